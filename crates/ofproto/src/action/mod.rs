//! OpenFlow-style rule actions: the `actions=` part of an `ovs-ofctl`
//! flow, parsed and printed back as `ovs-ofctl dump-flows` prints it.
//!
//! What: [`Action`] is one action of a rule (`output:2`, `resubmit(,2)`,
//! `set_field:10.0.0.1->nw_src`, `mod_vlan_vid:10`, ...); an empty list
//! means drop. [`parse_actions`] reads an action list, [`format_actions`]
//! prints one.
//!
//! Why this shape: translation (xlate) wants one variant per behaviour, so
//! the many OVS spellings collapse onto few variants (`strip_vlan` and
//! `pop_vlan` are both [`Action::PopVlan`]; `output:IN_PORT` is
//! [`Action::InPort`]; `mod_nw_src` is a [`Action::SetField`] of `nw_src`).
//! Only the spelling difference that changes meaning is kept: a legacy
//! `mod_*` action is a `SetField` with `legacy: true`, because OVS accepts it
//! whatever the rule matches (it is ignored for packets of the wrong type),
//! whereas `set_field` demands that the rule's match pins the field's
//! prerequisites; and it prints back as written.
//!
//! Invariants of a parsed list (checked by [`parse_actions`], assumed by the
//! printer for exact round trips):
//! - ports of `Output` / `Resubmit` are 1..[`OFPP_MAX`] or [`OFPP_LOCAL`];
//! - tables are 0..=254; `GotoTable` is last and goes to a later table;
//! - `SetField` values are in field units, already ANDed with the mask, the
//!   mask is within the field's full mask; `legacy` ones have the full mask
//!   and one of the seven legacy fields, `nw_ttl` (`mod_nw_ttl`) or
//!   `tun_id` (`set_tunnel`);
//! - `ModVlanVid` ≤ 4095, `ModVlanPcp` ≤ 7, `PushVlan` is 0x8100 or 0x88a8.
//!
//! Layout: this module holds the types; `parse` splits a list and holds
//! the argument parsers and instructions, `parse_one` one action by
//! family, `format` the printer.
//!
//! Thread-safety: plain data.

use crate::rule::RuleError;
use flowpath_flow::field::{self, FieldId, FieldInfo};
use flowpath_flow::value::format_value;
use flowpath_flow::Match;
use std::fmt;

mod format;
mod parse;
mod parse_one;
#[cfg(test)]
mod tests;

pub use format::{format_actions, format_instructions};
pub use parse::{is_unsupported_field, parse_actions, parse_bucket_actions, parse_instructions};

/// `table=` of an action (`ct`): 0..=254.
pub(crate) fn parse_table_arg(name: &str, s: &str) -> Result<u8, RuleError> {
    parse::parse_table(name, s)
}

/// A subfield an action reads (`ct`'s `zone=`), checked against `matching`.
pub(crate) fn parse_subfield_arg(
    name: &str,
    s: &str,
    matching: &Match,
) -> Result<Subfield, RuleError> {
    parse::parse_src(name, s, matching)
}

/// A `ct(exec(...))` list: as [`parse_actions`], where writes to `ct_mark`
/// and `ct_label` are allowed.
pub(crate) fn parse_ct_exec(text: &str, matching: &Match) -> Result<Vec<Action>, RuleError> {
    parse::parse_actions_in(text, matching, 0, true)
}

/// A subfield as OVS prints it (`NXM_NX_REG0[0..15]`).
pub(crate) fn format_subfield(sf: &Subfield) -> String {
    sf.to_string()
}

/// First reserved OpenFlow 1.0 port number: real ports are 1..`OFPP_MAX`.
pub const OFPP_MAX: u32 = 0xff00;
/// The OpenFlow `IN_PORT` reserved port.
pub const OFPP_IN_PORT: u32 = 0xfff8;
/// The OpenFlow `LOCAL` reserved port (the switch's own interface); it is
/// an ordinary output port number for flowpath.
pub const OFPP_LOCAL: u32 = 0xfffe;
/// Most members a `bundle` takes.
pub const MAX_BUNDLE_MEMBERS: usize = 8;

/// The field sets `bundle` hashes, by name.
pub const BUNDLE_FIELDS: [&str; 7] = [
    "eth_src",
    "symmetric_l4",
    "symmetric_l3l4",
    "symmetric_l3l4+udp",
    "nw_src",
    "nw_dst",
    "symmetric_l3",
];

/// The algorithms of `multipath`, by name.
pub const MULTIPATH_ALGORITHMS: [&str; 4] = ["modulo_n", "hash_threshold", "hrw", "iter_hash"];

/// Most controller ids a `dec_ttl(...)` takes.
pub const MAX_DEC_TTL_IDS: usize = 8;

/// The `max_len` of a `controller` action that gives no length.
pub const CONTROLLER_MAX_LEN: u16 = 0xffff;

/// The packet-in reasons, by OpenFlow number, as `controller(reason=...)`
/// names them.
pub const PACKET_IN_REASONS: [&str; 6] = [
    "no_match",
    "action",
    "invalid_ttl",
    "action_set",
    "group",
    "packet_out",
];

impl Action {
    /// `CONTROLLER:max_len`: a packet-in for reason "action" to every
    /// controller.
    pub const fn controller(max_len: u16) -> Action {
        Action::Controller {
            max_len,
            reason: 1,
            id: 0,
            userdata: 0,
            pause: false,
            meter_id: None,
        }
    }

    /// True for a `controller` with no option but its length: OpenFlow
    /// carries it as an output to the CONTROLLER port, whose packet-in
    /// reason depends on where it runs (a group bucket, the action set).
    pub fn is_plain_controller(&self) -> bool {
        matches!(
            *self,
            Action::Controller {
                reason: 1,
                id: 0,
                userdata: 0,
                pause: false,
                meter_id: None,
                ..
            }
        )
    }
}

/// The `controller(userdata=...)` bytes of the process, interned: actions
/// are plain values, so they hold an index into this table.
pub mod userdata {
    use std::sync::{Mutex, OnceLock};

    fn table() -> &'static Mutex<Vec<Vec<u8>>> {
        static T: OnceLock<Mutex<Vec<Vec<u8>>>> = OnceLock::new();
        T.get_or_init(|| Mutex::new(Vec::new()))
    }

    /// The index of `bytes` (1-based; the same bytes, the same index).
    pub fn intern(bytes: &[u8]) -> u32 {
        let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = t.iter().position(|b| b == bytes) {
            return i as u32 + 1;
        }
        t.push(bytes.to_vec());
        t.len() as u32
    }

    /// The bytes of index `i` (empty for 0 or an unknown index).
    pub fn get(i: u32) -> Vec<u8> {
        if i == 0 {
            return Vec::new();
        }
        let t = table().lock().unwrap_or_else(|e| e.into_inner());
        t.get(i as usize - 1).cloned().unwrap_or_default()
    }
}

/// One rule action. A rule with no action drops the packet.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Action {
    /// `note:HEX`: bytes for the controller that do nothing (interned in
    /// [`userdata`]; kept so that `dump-flows` shows them, as OVS).
    Note(u32),
    /// Send the packet, as it is now, to this port (`output:2`, `2`;
    /// [`OFPP_LOCAL`] prints as `LOCAL`).
    Output(u32),
    /// Send at most `max_len` bytes of the packet to `port`
    /// (`output(port=P,max_len=N)`; a numbered port or LOCAL).
    OutputTrunc {
        /// The port.
        port: u32,
        /// Bytes kept (at least 14).
        max_len: u32,
    },
    /// Send the packet through group `N` (`group:N`, see [`crate::group`]).
    Group(u32),
    /// `bundle(FIELDS,BASIS,ALGORITHM,ofport,members:P,...)`: output to one
    /// live member (a port of the bridge): the first (`active_backup`) or
    /// the one a hash of `fields` picks (`hrw`).
    Bundle {
        /// Hashed fields ([`BUNDLE_FIELDS`] index).
        fields: u8,
        /// Hash basis.
        basis: u16,
        /// `hrw` (true) or `active_backup`.
        hrw: bool,
        /// Member ports (the first `n`).
        members: [u16; MAX_BUNDLE_MEMBERS],
        /// How many members.
        n: u8,
        /// `bundle_load(...)`: store the chosen member (65535, OFPP_NONE,
        /// when none is live) in these bits instead of outputting.
        load: Option<Subfield>,
    },
    /// `multipath(FIELDS,BASIS,ALGORITHM,N_LINKS,ARG,DST[a..b])`: a link
    /// number in `0..n_links`, chosen as OVS chooses it (OVS's hash of the
    /// field set and its algorithms), stored in `dst`.
    Multipath {
        /// Hashed fields ([`BUNDLE_FIELDS`] index).
        fields: u8,
        /// Hash basis.
        basis: u16,
        /// [`MULTIPATH_ALGORITHMS`] index.
        alg: u8,
        /// Number of links, 1..=65536.
        n_links: u32,
        /// `iter_hash`'s argument.
        arg: u32,
        /// Where the link number goes.
        dst: Subfield,
    },
    /// `set_queue:Q`: later outputs use queue `Q` (the datapath's
    /// `skb_priority`).
    SetQueue(u32),
    /// `pop_queue`: back to the packet's own queue.
    PopQueue,
    /// `enqueue:P:Q`: output to `port` on queue `queue`.
    Enqueue {
        /// The port.
        port: u32,
        /// The queue.
        queue: u32,
    },
    /// Send the packet back out of the port it came in on (`IN_PORT`).
    InPort,
    /// Send to every port except the input port (`ALL`).
    All,
    /// Send to every port except the input port and ports with flooding
    /// disabled (`FLOOD`).
    Flood,
    /// Switch the packet as an L2 learning switch (`NORMAL`): learn its
    /// source, send it to the port its destination was learned on, or
    /// flood it (see [`crate::normal`]).
    Normal,
    /// Send (at most `max_len` bytes of) the packet to the controller
    /// (`CONTROLLER:65535`).
    Controller {
        /// Bytes of the packet to send.
        max_len: u16,
        /// The packet-in's reason (OpenFlow's `OFPR_*` number: 0
        /// no_match, 1 action, 2 invalid_ttl, 3 action_set, 4 group, 5
        /// packet_out).
        reason: u8,
        /// The controller connection id (`id=`; 0: every controller).
        id: u16,
        /// `userdata=HEX`: an index into the process's userdata table
        /// ([`userdata`]), 0 for none.
        userdata: u32,
        /// `pause`: translation stops here, to resume when the controller
        /// sends the packet back (a continuation).
        pause: bool,
        /// `meter_id=N`.
        meter_id: Option<u32>,
    },
    /// Output to the port held in `src` (`output:NXM_NX_REG0[0..15]`).
    OutputReg {
        /// Where the port number is.
        src: Subfield,
    },
    /// `sample(...)`: sFlow/IPFIX sampling to a flow-sample collector set.
    Sample {
        /// Packets sampled out of 65535.
        probability: u16,
        /// `collector_set_id=`.
        collector_set_id: u32,
        /// `obs_domain_id=`.
        obs_domain_id: u32,
        /// `obs_point_id=`.
        obs_point_id: u32,
        /// `sampling_port=`: the port the sample is reported for (OpenFlow
        /// numbering; `None`: OVS's `OFPP_NONE`, the packet's own input).
        sampling_port: Option<u32>,
        /// `ingress` / `egress` (default: neither).
        direction: SampleDirection,
    },
    /// `clone(...)`: the next `len` actions of the same list run on a copy
    /// of the packet; the packet after the clone is as it was before it.
    /// (Laid out flat, as [`flowpath_odp::DpAction::CheckPktLen`].)
    Clone {
        /// How many of the following actions the clone holds (nested
        /// clones counted whole).
        len: u16,
    },
    /// Look the packet up again, with `in_port` replaced by `port` (None:
    /// unchanged) in `table` (None: the current table).
    Resubmit {
        /// The in_port of the new lookup; None means `IN_PORT` (unchanged).
        port: Option<u32>,
        /// The table of the new lookup; None means the current table.
        table: Option<u8>,
    },
    /// Continue the pipeline in a later table (`goto_table:2`).
    GotoTable(u8),
    /// Rewrite the bits of `mask` in `field` to `value` (field units).
    SetField {
        /// The field written.
        field: FieldId,
        /// The new value (already ANDed with `mask`).
        value: u128,
        /// The bits written.
        mask: u128,
        /// Written as a legacy `mod_*` action (`mod_nw_src:...`): accepted
        /// whatever the match, and printed back in that form.
        legacy: bool,
    },
    /// The `clear_actions` instruction: empties the action set.
    ClearActions,
    /// The `write_actions(...)` instruction: adds the rule's write set
    /// ([`crate::rule::Rule::write_actions`]) to the action set, which runs
    /// at the end of the pipeline.
    WriteActions,
    /// Decrement the IP TTL / hop limit (`dec_ttl`).
    DecTtl,
    /// `dec_ttl(ID,...)`: as `DecTtl`, but an expired TTL sends one
    /// packet-in per controller id (the first `n` of `ids`).
    DecTtlIds {
        /// Controller ids.
        ids: [u16; MAX_DEC_TTL_IDS],
        /// How many of `ids` are given (1..=[`MAX_DEC_TTL_IDS`]).
        n: u8,
    },
    /// Push a VLAN tag with this TPID (`push_vlan:0x8100`).
    PushVlan(u16),
    /// Remove the outer VLAN tag (`pop_vlan`, also read from `strip_vlan`).
    PopVlan,
    /// Set the VLAN ID (`mod_vlan_vid:10`).
    ModVlanVid(u16),
    /// Set the VLAN priority (`mod_vlan_pcp:3`).
    ModVlanPcp(u8),
    /// `load:VALUE->DST[a..b]`: write `value` into bits of a field or
    /// register (as `set_field` with the bit range as mask).
    Load {
        /// Where.
        dst: Subfield,
        /// The value, right-aligned (at most `dst.n_bits` wide).
        value: u128,
    },
    /// `move:SRC[a..b]->DST[c..d]`: copy bits from one field or register
    /// to another (the source bits become significant in the megaflow).
    Move {
        /// Read from.
        src: Subfield,
        /// Written to (same width).
        dst: Subfield,
    },
    /// `push:SRC[a..b]`: push the bits on the translation's stack.
    Push(Subfield),
    /// `pop:DST[a..b]`: pop the top of the stack into the bits (nothing
    /// when the stack is empty, as OVS).
    Pop(Subfield),
    /// `conjunction(ID,K/N)`: this flow is clause `k` (1-based) of the `n`
    /// of conjunctive match `id`; a flow's actions are all conjunctions
    /// or none (see [`crate::classifier`]).
    Conjunction {
        /// The conjunctive match.
        id: u32,
        /// This flow's clause, 1..=n.
        k: u8,
        /// Number of clauses, 2..=64.
        n: u8,
    },
    /// `learn(...)`: the index of its specs in [`crate::learn`]'s registry.
    Learn(u32),
    /// `check_pkt_larger(LEN)->DST[bit]`: the rest of the action list runs
    /// twice in translation, once with the bit set (the packet is longer
    /// than `len` bytes) and once with it clear; the datapath picks the
    /// branch per packet (`check_pkt_len`). `dst` is one bit of a register
    /// or of `metadata`.
    CheckPktLarger {
        /// Bytes compared with (the whole frame).
        len: u16,
        /// The bit that says which.
        dst: Subfield,
    },
    /// `fin_timeout(idle_timeout=I,hard_timeout=H)`: once a TCP FIN or RST
    /// goes through this rule, its idle and hard timeouts come down to
    /// these (0: unchanged). Makes nw_proto significant.
    FinTimeout {
        /// Idle timeout after a FIN/RST (seconds, 0 = none).
        idle: u16,
        /// Hard timeout after a FIN/RST.
        hard: u16,
    },
    /// `push_mpls:ETHERTYPE`: push an MPLS label stack entry (the first
    /// made from the IP header, a later one a copy of the top entry) and
    /// make the packet MPLS with this EtherType (0x8847 or 0x8848).
    PushMpls(u16),
    /// `pop_mpls:ETHERTYPE`: remove the top label stack entry; the packet's
    /// EtherType becomes this one.
    PopMpls(u16),
    /// `set_mpls_label(N)`: the top entry's label (20 bits).
    SetMplsLabel(u32),
    /// `set_mpls_tc(N)`: the top entry's traffic class (3 bits).
    SetMplsTc(u8),
    /// `set_mpls_ttl(N)`: the top entry's TTL.
    SetMplsTtl(u8),
    /// `dec_mpls_ttl`: decrement the top entry's TTL (an expired one goes
    /// to the controller and ends the table's actions).
    DecMplsTtl,
    /// Never written by a user: a frozen translation's marker, placed (as
    /// OVS's `unroll_xlate`) before the first action left that may tell a
    /// controller its rule's table and cookie; thawed, it restores them.
    /// After a `pop_mpls` it is, as in OVS, an action that recirculates.
    UnrollXlate {
        /// The rule's table.
        table: u8,
        /// The rule's cookie (`u64::MAX` for none).
        cookie: u64,
    },
    /// `ct(...)`: the index of its arguments in [`crate::ct`]'s registry.
    Ct(u32),
    /// `ct_clear`: the packet becomes untracked.
    CtClear,
    /// The `write_metadata:VALUE[/MASK]` instruction.
    WriteMetadata {
        /// New bits.
        value: u64,
        /// Bits written.
        mask: u64,
    },
}

/// A bit range of a field or register: `NXM_NX_REG0[0..15]`, `reg1[]`,
/// `eth_src[40]`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Subfield {
    /// The field.
    pub field: FieldId,
    /// Lowest bit.
    pub ofs: u8,
    /// Width (1 to the field's width).
    pub n_bits: u8,
}

impl Subfield {
    /// The range's bits as a mask in field units.
    pub fn mask(&self) -> u128 {
        let m = if self.n_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << self.n_bits) - 1
        };
        m << self.ofs
    }

    /// Parses `FIELD[]`, `FIELD[N]` or `FIELD[A..B]` (any name of the
    /// field: `reg0`, `NXM_NX_REG0`, `eth_src`, `NXM_OF_ETH_SRC`; a bare
    /// `FIELD` is the whole field, as ovs-ofctl accepts).
    pub fn parse(text: &str) -> Result<Subfield, String> {
        let text = text.trim();
        let (name, range) = match text.split_once('[') {
            Some((n, r)) => {
                let Some(r) = r.strip_suffix(']') else {
                    return Err(format!("'{text}': missing ']'"));
                };
                (n, Some(r))
            }
            None => (text, None),
        };
        let Some(info) = field::lookup(name) else {
            if is_unsupported_field(name) {
                return Err(format!("field {name} is not supported by flowpath"));
            }
            return Err(format!("unknown field '{name}'"));
        };
        if matches!(
            info.id,
            FieldId::DlVlan | FieldId::DlVlanPcp | FieldId::NwFrag
        ) {
            return Err(format!(
                "{name} cannot be used as a bit range (use NXM_OF_VLAN_TCI or a whole-field action)"
            ));
        }
        let width = subfield_width(info.id, name);
        let (ofs, end) = match range.map(str::trim) {
            None | Some("") => (0, width - 1),
            Some(r) => {
                let num = |x: &str| {
                    x.trim()
                        .parse::<u32>()
                        .map_err(|_| format!("'{text}': '{x}' is not a bit number"))
                };
                match r.split_once("..") {
                    Some((a, b)) => (num(a)?, num(b)?),
                    None => {
                        let a = num(r)?;
                        (a, a)
                    }
                }
            }
        };
        if end < ofs {
            return Err(format!("'{text}': the range ends before it starts"));
        }
        if end >= width {
            return Err(format!(
                "'{text}': {} has {width} bits (0..{})",
                info.name,
                width - 1
            ));
        }
        Ok(Subfield {
            field: info.id,
            ofs: ofs as u8,
            n_bits: (end - ofs + 1) as u8,
        })
    }
}

/// A field's width as a bit range, where OVS's differs from the key's:
/// NXM_OF_IN_PORT is OpenFlow 1.0's 16-bit port number (OXM_OF_IN_PORT and
/// in_port are 32 bits); the ARP opcode is 16 bits (only the low 8 are
/// kept, as OVS keeps them).
fn subfield_width(id: FieldId, name: &str) -> u32 {
    match id {
        FieldId::InPort if name == "NXM_OF_IN_PORT" => 16,
        FieldId::ArpOp => 16,
        // OVS's vlan_vid as a bit range: the 12-bit VID.
        FieldId::VlanVid => 12,
        // (An 8-bit value in OVS's 16-bit place.)
        FieldId::NdOptionsType => 8,
        _ => u32::from(id.info().bits),
    }
}

impl fmt::Display for Subfield {
    /// As OVS prints it: the field's NXM/OXM name where it has one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.field.info();
        let name = field::NXM_NAMES
            .iter()
            .find(|(_, id)| *id == self.field)
            .map_or(info.name, |(n, _)| n);
        f.write_str(name)?;
        let width = subfield_width(info.id, name);
        if u32::from(self.n_bits) == width && self.ofs == 0 {
            f.write_str("[]")
        } else if self.n_bits == 1 {
            write!(f, "[{}]", self.ofs)
        } else {
            write!(
                f,
                "[{}..{}]",
                self.ofs,
                u32::from(self.ofs) + u32::from(self.n_bits) - 1
            )
        }
    }
}

/// The legacy `mod_*` actions and the field each writes.
const LEGACY: &[(&str, FieldId)] = &[
    ("mod_dl_src", FieldId::EthSrc),
    ("mod_dl_dst", FieldId::EthDst),
    ("mod_nw_src", FieldId::NwSrc),
    ("mod_nw_dst", FieldId::NwDst),
    ("mod_nw_tos", FieldId::NwTos),
    ("mod_tp_src", FieldId::TpSrc),
    ("mod_tp_dst", FieldId::TpDst),
];

/// OVS actions (and reserved ports) that flowpath does not implement: they
/// are named as unsupported rather than unknown.
const UNSUPPORTED: &[&str] = &[
    "table",
    "meter",
    "autopath",
    "exit",
    "encap",
    "decap",
    "dec_nsh_ttl",
    "stack_push",
    "stack_pop",
    "delete_field",
    "debug_recirc",
    "debug_slow",
];

fn port_name(p: u32) -> Option<&'static str> {
    match p {
        OFPP_LOCAL => Some("LOCAL"),
        OFPP_IN_PORT => Some("IN_PORT"),
        _ => None,
    }
}

fn write_port(f: &mut fmt::Formatter<'_>, p: u32) -> fmt::Result {
    match port_name(p) {
        Some(n) => f.write_str(n),
        None => write!(f, "{p}"),
    }
}

/// `sample(...,ingress|egress)`: which direction the sampled packet is
/// reported in (NXAST_SAMPLE3's `direction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SampleDirection {
    /// Neither given.
    #[default]
    Default,
    /// `ingress`.
    Ingress,
    /// `egress`.
    Egress,
}

impl SampleDirection {
    /// The NXAST_SAMPLE3 wire value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// From the wire value, if it is one.
    pub fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(Self::Default),
            1 => Some(Self::Ingress),
            2 => Some(Self::Egress),
            _ => None,
        }
    }
}

/// A sample's `sampling_port` as `ovs-ofctl` writes it (reserved ports by
/// name).
pub fn sample_port_name(p: u32) -> String {
    match p {
        0xfff8 => "IN_PORT".into(),
        0xfff9 => "TABLE".into(),
        0xfffa => "NORMAL".into(),
        0xfffb => "FLOOD".into(),
        0xfffc => "ALL".into(),
        0xfffd => "CONTROLLER".into(),
        0xfffe => "LOCAL".into(),
        _ => p.to_string(),
    }
}
