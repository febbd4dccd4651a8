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
//!   and one of the seven legacy fields;
//! - `ModVlanVid` ≤ 4095, `ModVlanPcp` ≤ 7, `PushVlan` is 0x8100 or 0x88a8.
//!
//! Thread-safety: plain data.

use crate::rule::RuleError;
use flowpath_flow::field::{self, FieldId, FieldInfo};
use flowpath_flow::value::{format_value, parse_uint, parse_value};
use flowpath_flow::Match;
use std::fmt;

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

/// One rule action. A rule with no action drops the packet.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Action {
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
    "ct",
    "ct_clear",
    "nat",
    "meter",
    "autopath",
    "exit",
    "sample",
    "clone",
    "encap",
    "decap",
    "dec_nsh_ttl",
    "stack_push",
    "stack_pop",
    "output_reg",
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

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Action::Output(OFPP_LOCAL) => f.write_str("LOCAL"),
            Action::Output(p) => write!(f, "output:{p}"),
            Action::OutputTrunc { port, max_len } => {
                f.write_str("output(port=")?;
                write_port(f, port)?;
                write!(f, ",max_len={max_len})")
            }
            Action::InPort => f.write_str("IN_PORT"),
            Action::Group(g) => write!(f, "group:{g}"),
            Action::SetQueue(q) => write!(f, "set_queue:{q}"),
            Action::Bundle {
                fields,
                basis,
                hrw,
                members,
                n,
                load,
            } => {
                let alg = if hrw { "hrw" } else { "active_backup" };
                let name = BUNDLE_FIELDS
                    .get(usize::from(fields))
                    .copied()
                    .unwrap_or("?");
                match load {
                    None => write!(f, "bundle({name},{basis},{alg},ofport,members:")?,
                    Some(dst) => {
                        write!(f, "bundle_load({name},{basis},{alg},ofport,{dst},members:")?
                    }
                }
                for (i, m) in members.iter().take(usize::from(n)).enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{m}")?;
                }
                f.write_str(")")
            }
            Action::Multipath {
                fields,
                basis,
                alg,
                n_links,
                arg,
                dst,
            } => write!(
                f,
                "multipath({},{basis},{},{n_links},{arg},{dst})",
                BUNDLE_FIELDS
                    .get(usize::from(fields))
                    .copied()
                    .unwrap_or("?"),
                MULTIPATH_ALGORITHMS
                    .get(usize::from(alg))
                    .copied()
                    .unwrap_or("?")
            ),
            Action::PopQueue => f.write_str("pop_queue"),
            Action::Enqueue { port, queue } => {
                f.write_str("enqueue:")?;
                write_port(f, port)?;
                write!(f, ":{queue}")
            }
            Action::All => f.write_str("ALL"),
            Action::Flood => f.write_str("FLOOD"),
            Action::Normal => f.write_str("NORMAL"),
            Action::Controller { max_len } => write!(f, "CONTROLLER:{max_len}"),
            Action::Resubmit { port, table } => match (port, table) {
                (None, None) => f.write_str("resubmit:IN_PORT"),
                (Some(p), None) => {
                    f.write_str("resubmit:")?;
                    write_port(f, p)
                }
                (None, Some(t)) => write!(f, "resubmit(,{t})"),
                (Some(p), Some(t)) => {
                    f.write_str("resubmit(")?;
                    write_port(f, p)?;
                    write!(f, ",{t})")
                }
            },
            Action::GotoTable(t) => write!(f, "goto_table:{t}"),
            Action::SetField {
                field,
                value,
                mask,
                legacy,
            } => {
                let info = field.info();
                if field == FieldId::TunId && legacy {
                    return if value <= u128::from(u32::MAX) {
                        write!(f, "set_tunnel:{value:#x}")
                    } else {
                        write!(f, "set_tunnel64:{value:#x}")
                    };
                }
                let legacy_name = LEGACY.iter().find(|(_, id)| *id == field).map(|(n, _)| n);
                match legacy_name {
                    Some(name) if legacy && mask == info.full_mask() => {
                        write!(f, "{name}:{}", format_value(info, value, mask))
                    }
                    _ => write!(
                        f,
                        "set_field:{}->{}",
                        format_value(info, value, mask),
                        info.name
                    ),
                }
            }
            Action::DecTtl => f.write_str("dec_ttl"),
            Action::ClearActions => f.write_str("clear_actions"),
            Action::WriteActions => f.write_str("write_actions"),
            Action::DecTtlIds { ids, n } => {
                f.write_str("dec_ttl(")?;
                for (i, id) in ids.iter().take(usize::from(n)).enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{id}")?;
                }
                f.write_str(")")
            }
            Action::PushVlan(tpid) => write!(f, "push_vlan:{tpid:#06x}"),
            Action::PushMpls(t) => write!(f, "push_mpls:{t:#06x}"),
            Action::PopMpls(t) => write!(f, "pop_mpls:{t:#06x}"),
            Action::SetMplsLabel(v) => write!(f, "set_mpls_label({v})"),
            Action::SetMplsTc(v) => write!(f, "set_mpls_tc({v})"),
            Action::SetMplsTtl(v) => write!(f, "set_mpls_ttl({v})"),
            Action::DecMplsTtl => f.write_str("dec_mpls_ttl"),
            Action::UnrollXlate { table, cookie } => {
                write!(f, "unroll_xlate(table={table}, cookie={cookie})")
            }
            Action::PopVlan => f.write_str("pop_vlan"),
            Action::ModVlanVid(v) => write!(f, "mod_vlan_vid:{v}"),
            Action::ModVlanPcp(p) => write!(f, "mod_vlan_pcp:{p}"),
            Action::Load { dst, value } => write!(f, "load:{value:#x}->{dst}"),
            Action::Move { src, dst } => write!(f, "move:{src}->{dst}"),
            Action::Push(sf) => write!(f, "push:{sf}"),
            Action::Conjunction { id, k, n } => write!(f, "conjunction({id},{k}/{n})"),
            Action::Learn(id) => match crate::learn::get(id) {
                Some(l) => write!(f, "{l}"),
                None => f.write_str("learn(?)"),
            },
            Action::Pop(sf) => write!(f, "pop:{sf}"),
            Action::CheckPktLarger { len, dst } => write!(f, "check_pkt_larger({len})->{dst}"),
            Action::FinTimeout { idle, hard } => {
                f.write_str("fin_timeout(")?;
                let mut sep = "";
                if idle != 0 {
                    write!(f, "idle_timeout={idle}")?;
                    sep = ",";
                }
                if hard != 0 {
                    write!(f, "{sep}hard_timeout={hard}")?;
                }
                f.write_str(")")
            }
            Action::WriteMetadata { value, mask } => {
                if mask == u64::MAX {
                    write!(f, "write_metadata:{value:#x}")
                } else {
                    write!(f, "write_metadata:{value:#x}/{mask:#x}")
                }
            }
        }
    }
}

/// Prints an action list as `ovs-ofctl dump-flows` does: comma-separated,
/// `drop` when empty.
pub fn format_actions(actions: &[Action]) -> String {
    if actions.is_empty() {
        return "drop".into();
    }
    actions
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Prints a rule's instructions: its actions, with the
/// [`Action::WriteActions`] marker expanded to `write_actions(...)` of
/// `write_set` (`drop` when there is nothing).
pub fn format_instructions(actions: &[Action], write_set: &[Action]) -> String {
    if actions.is_empty() {
        return "drop".into();
    }
    actions
        .iter()
        .map(|a| match a {
            Action::WriteActions if write_set.is_empty() => "write_actions()".to_string(),
            Action::WriteActions => format!("write_actions({})", format_actions(write_set)),
            a => a.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// How an action's argument was written.
#[derive(Clone, Copy)]
enum Arg<'a> {
    /// `name` alone.
    None,
    /// `name:arg` or `name=arg`.
    Colon(&'a str),
    /// `name(arg)`.
    Paren(&'a str),
}

/// Splits an action list at top-level commas and white space; commas inside
/// parentheses belong to the action (`resubmit(,2)`).
fn split_actions(text: &str) -> Result<Vec<&str>, RuleError> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1).ok_or_else(|| {
                    RuleError::new(
                        Some("actions"),
                        format!("unbalanced ')' in '{}'", text.trim()),
                    )
                })?;
            }
            ',' | ' ' | '\t' | '\r' | '\n' if depth == 0 => {
                if i > start {
                    out.push(&text[start..i]);
                }
                // The separator is one ASCII byte.
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(RuleError::new(
            Some("actions"),
            format!("unbalanced '(' in '{}'", text.trim()),
        ));
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    Ok(out)
}

/// Splits `name:arg`, `name=arg` or `name(arg)`.
fn split_action(item: &str) -> Result<(&str, Arg<'_>), RuleError> {
    // `check_pkt_larger(N)->DST` has text after its ')': all of it is the
    // argument (`parse_check_pkt_larger` reads it).
    if let Some(name) = item
        .get(..16)
        .filter(|p| p.eq_ignore_ascii_case("check_pkt_larger"))
    {
        return Ok((name, Arg::Colon(&item[16..])));
    }
    let Some(i) = item.find([':', '=', '(']) else {
        return Ok((item, Arg::None));
    };
    let name = &item[..i];
    let rest = &item[i + 1..];
    if item.as_bytes()[i] == b'(' {
        // split_actions only yields items with balanced parentheses, so
        // the argument closes at the item's last ')'.
        match rest.strip_suffix(')') {
            Some(arg) => Ok((name, Arg::Paren(arg))),
            None => Err(RuleError::new(
                Some(name),
                format!("unexpected text after ')' in '{item}'"),
            )),
        }
    } else {
        Ok((name, Arg::Colon(rest)))
    }
}

fn fail<T>(name: &str, msg: impl Into<String>) -> Result<T, RuleError> {
    Err(RuleError::new(Some(name), msg))
}

fn unsupported<T>(name: &str, what: &str) -> Result<T, RuleError> {
    fail(name, format!("{what} is not supported by flowpath"))
}

/// Where a port argument sends the packet.
enum Dest {
    Number(u32),
    InPort,
    All,
    Flood,
    Controller,
    Normal,
}

const PORT_RANGE: &str = "1 to 65279, or IN_PORT, ALL, FLOOD, CONTROLLER, LOCAL, NORMAL";

fn parse_port(name: &str, s: &str) -> Result<Dest, RuleError> {
    let s = s.trim();
    let by_name = match s.to_ascii_lowercase().as_str() {
        "in_port" => Some(Dest::InPort),
        "all" => Some(Dest::All),
        "flood" => Some(Dest::Flood),
        "controller" => Some(Dest::Controller),
        "local" => Some(Dest::Number(OFPP_LOCAL)),
        "normal" => Some(Dest::Normal),
        "table" => return unsupported(name, &format!("port {s}")),
        "none" | "any" => return fail(name, format!("{s} is not a valid port ({PORT_RANGE})")),
        _ => None,
    };
    if let Some(p) = by_name {
        return Ok(p);
    }
    if s.starts_with("NXM_") || s.starts_with("OXM_") || s.starts_with("reg") {
        return unsupported(name, &format!("a port taken from a field ('{s}')"));
    }
    let n =
        parse_uint(s).map_err(|e| RuleError::new(Some(name), format!("{e} (port expected)")))?;
    match n {
        1..0xff00 => Ok(Dest::Number(n as u32)),
        0xfff8 => Ok(Dest::InPort),
        0xfffb => Ok(Dest::Flood),
        0xfffc => Ok(Dest::All),
        0xfffd => Ok(Dest::Controller),
        0xfffe => Ok(Dest::Number(OFPP_LOCAL)),
        0xfffa => Ok(Dest::Normal),
        0xfff9 => unsupported(name, &format!("reserved port {n:#x}")),
        _ => fail(name, format!("port {s} is out of range ({PORT_RANGE})")),
    }
}

fn port_action(p: Dest) -> Action {
    match p {
        Dest::Number(n) => Action::Output(n),
        Dest::InPort => Action::InPort,
        Dest::All => Action::All,
        Dest::Flood => Action::Flood,
        Dest::Controller => Action::Controller {
            max_len: CONTROLLER_MAX_LEN,
        },
        Dest::Normal => Action::Normal,
    }
}

fn parse_table(name: &str, s: &str) -> Result<u8, RuleError> {
    let n =
        parse_uint(s).map_err(|e| RuleError::new(Some(name), format!("{e} (table expected)")))?;
    if n > 254 {
        return fail(
            name,
            format!("table {} is out of range (0 to 254)", s.trim()),
        );
    }
    Ok(n as u8)
}

fn parse_small(name: &str, s: &str, max: u128, what: &str) -> Result<u128, RuleError> {
    let n = parse_uint(s).map_err(|e| RuleError::new(Some(name), e.0))?;
    if n > max {
        return fail(
            name,
            format!("{what} {} is out of range (0 to {max})", s.trim()),
        );
    }
    Ok(n)
}

fn parse_controller(name: &str, arg: Arg<'_>) -> Result<Action, RuleError> {
    let max_len = match arg {
        Arg::None => CONTROLLER_MAX_LEN,
        Arg::Colon(s) => parse_small(name, s, 0xffff, "max_len")? as u16,
        Arg::Paren(s) => {
            let mut max_len = CONTROLLER_MAX_LEN;
            for kv in s.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
                match kv.split_once('=') {
                    Some((k, v)) if k.trim() == "max_len" => {
                        max_len = parse_small(name, v, 0xffff, "max_len")? as u16;
                    }
                    _ => return unsupported(name, &format!("controller option '{kv}'")),
                }
            }
            max_len
        }
    };
    Ok(Action::Controller { max_len })
}

fn parse_resubmit(name: &str, arg: Arg<'_>) -> Result<Action, RuleError> {
    let port_of = |s: &str| -> Result<Option<u32>, RuleError> {
        match parse_port(name, s)? {
            Dest::Number(n) => Ok(Some(n)),
            Dest::InPort => Ok(None),
            _ => fail(
                name,
                format!("{} is not a port that resubmit can use", s.trim()),
            ),
        }
    };
    match arg {
        Arg::None => fail(name, "resubmit needs a port or a table (resubmit:PORT, resubmit(,TABLE), resubmit(PORT,TABLE))"),
        Arg::Colon(s) => Ok(Action::Resubmit {
            port: port_of(s)?,
            table: None,
        }),
        Arg::Paren(s) => {
            let parts: Vec<&str> = s.split(',').map(str::trim).collect();
            if parts.len() > 2 {
                return unsupported(name, &format!("resubmit with a third argument ('{}')", parts[2]));
            }
            let p = parts.first().copied().unwrap_or("");
            let t = parts.get(1).copied().unwrap_or("");
            if p.is_empty() && t.is_empty() {
                return fail(name, "at least one of the port and the table must be given");
            }
            let port = if p.is_empty() { None } else { port_of(p)? };
            let table = if t.is_empty() {
                None
            } else {
                Some(parse_table(name, t)?)
            };
            Ok(Action::Resubmit { port, table })
        }
    }
}

/// True for names of match fields flowpath does not implement (registers,
/// metadata, tunnel and conntrack fields, MPLS, ...).
pub fn is_unsupported_field(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "skb_priority",
        "actset_output",
        "dp_hash",
        "recirc_id",
        "packet_type",
        "in_port_oxm",
        "vlan_tpid",
        "nd_reserved",
        "nd_options_type",
        "ipv6_exthdr",
    ];
    const PREFIXES: &[&str] = &[
        "NXM_NX_TUN",
        "NXM_NX_CT_",
        "OXM_OF_TUNNEL_ID",
        "OXM_OF_MPLS",
        "OXM_OF_VLAN_VID",
        "tun_",
        "ct_",
        "mpls",
        "nsh_",
        "erspan",
        "cvlan",
        "vlan_pcp_",
    ];
    NAMES.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The "match" group buckets are parsed with ([`parse_bucket_actions`]):
/// `set_field` prerequisites are then checked per packet, not at parse
/// time.
fn bucket_context() -> &'static Match {
    static M: std::sync::OnceLock<Match> = std::sync::OnceLock::new();
    M.get_or_init(Match::catchall)
}

/// Parses a group bucket's actions (no match to check `set_field`
/// prerequisites against: they are checked when the bucket runs, as OVS
/// does).
pub fn parse_bucket_actions(text: &str) -> Result<Vec<Action>, RuleError> {
    let actions = parse_actions(text, bucket_context(), 0)?;
    // A bucket runs as an action set, which has no place for it.
    if let Some(a) = actions
        .iter()
        .find(|a| matches!(a, Action::CheckPktLarger { .. }))
    {
        return fail(
            "check_pkt_larger",
            format!("disallowed action in a group bucket (an action set): {a}"),
        );
    }
    Ok(actions)
}

/// A `bundle`/`multipath` field set by name.
fn hash_fields(name: &str, fname: &str) -> Result<u8, RuleError> {
    match BUNDLE_FIELDS.iter().position(|f| *f == fname) {
        Some(i) => Ok(i as u8),
        None => fail(
            name,
            format!(
                "'{fname}' is not a field set to hash ({})",
                BUNDLE_FIELDS.join(", ")
            ),
        ),
    }
}

/// A hash basis, 0 to 65535.
fn hash_basis(name: &str, basis: &str) -> Result<u16, RuleError> {
    parse_uint(basis)
        .ok()
        .filter(|b| *b <= 0xffff)
        .map(|b| b as u16)
        .ok_or_else(|| RuleError::new(Some(name), format!("'{basis}' is not a basis (0 to 65535)")))
}

/// A bit range read by an action: it must exist and, unless in a group
/// bucket, its prerequisites must be met by the rule's match (as
/// ovs-ofctl checks).
fn parse_src(name: &str, text: &str, matching: &Match) -> Result<Subfield, RuleError> {
    let sf = Subfield::parse(text).map_err(|e| RuleError::new(Some(name), e))?;
    if !std::ptr::eq(matching, bucket_context()) {
        matching
            .check_prereqs(sf.field.info())
            .map_err(|e| RuleError::new(Some(name), e))?;
    }
    Ok(sf)
}

/// A bit range written by an action: as [`parse_src`], and writable.
fn parse_dst(name: &str, text: &str, matching: &Match) -> Result<Subfield, RuleError> {
    let sf = parse_src(name, text, matching)?;
    let info = sf.field.info();
    if !info.writable {
        let why = if matches!(
            info.id,
            FieldId::ArpOp | FieldId::ArpSpa | FieldId::ArpTpa | FieldId::ArpSha | FieldId::ArpTha
        ) {
            " by flowpath (no ARP rewrite)"
        } else {
            ""
        };
        return fail(
            name,
            format!("destination field {} is not writable{why}", info.name),
        );
    }
    Ok(sf)
}

fn parse_set_field(name: &str, arg: Arg<'_>, matching: &Match) -> Result<Action, RuleError> {
    let s = match arg {
        Arg::Colon(s) | Arg::Paren(s) => s,
        Arg::None => return fail(name, "set_field needs VALUE->FIELD"),
    };
    let Some((v, dst)) = s.rsplit_once("->") else {
        return fail(name, format!("'{s}' is not VALUE->FIELD"));
    };
    let dst = dst.trim();
    let Some(info) = field::lookup(dst) else {
        if is_unsupported_field(dst) {
            return unsupported(name, &format!("field {dst}"));
        }
        return fail(name, format!("unknown field '{dst}'"));
    };
    if !info.writable {
        return fail(name, format!("{} is not writable", info.name));
    }
    let (value, mask) = parse_value(info, v).map_err(|e| RuleError::new(Some(name), e.0))?;
    if info.id == FieldId::DlVlan && value > 0xfff {
        return fail(name, "dl_vlan=0xffff (no VLAN) cannot be set; use pop_vlan");
    }
    // A group bucket has no match: as OVS, its set_field is checked
    // against each packet when it runs (skipped without the prerequisites).
    if !std::ptr::eq(matching, bucket_context()) {
        matching
            .check_prereqs(info)
            .map_err(|e| RuleError::new(Some(name), e))?;
    }
    Ok(Action::SetField {
        field: info.id,
        value,
        mask,
        legacy: false,
    })
}

fn parse_legacy(name: &str, arg: Arg<'_>, id: FieldId) -> Result<Action, RuleError> {
    let s = match arg {
        Arg::Colon(s) | Arg::Paren(s) => s.trim(),
        Arg::None => return fail(name, format!("{name} needs a value")),
    };
    let info: &FieldInfo = id.info();
    if s.contains('/') {
        return fail(name, format!("{name} does not take a mask (use set_field)"));
    }
    let value = if id == FieldId::NwTos {
        let n = parse_uint(s).map_err(|e| RuleError::new(Some(name), e.0))?;
        if n > 255 || n % 4 != 0 {
            return fail(
                name,
                format!("'{s}' is not a ToS value (a multiple of 4 from 0 to 252)"),
            );
        }
        n
    } else {
        parse_value(info, s)
            .map_err(|e| RuleError::new(Some(name), e.0))?
            .0
    };
    Ok(Action::SetField {
        field: id,
        value,
        mask: info.full_mask(),
        legacy: true,
    })
}

fn check_no_arg(name: &str, arg: Arg<'_>) -> Result<(), RuleError> {
    match arg {
        Arg::None => Ok(()),
        Arg::Paren(s) if s.trim().is_empty() => Ok(()),
        _ => fail(name, format!("{name} takes no argument")),
    }
}

fn no_arg(name: &str, arg: Arg<'_>, a: Action) -> Result<Action, RuleError> {
    check_no_arg(name, arg).map(|()| a)
}

fn need_arg<'a>(name: &str, arg: Arg<'a>) -> Result<&'a str, RuleError> {
    match arg {
        Arg::Colon(s) | Arg::Paren(s) => Ok(s),
        Arg::None => fail(name, format!("{name} needs an argument ({name}:VALUE)")),
    }
}

/// Words that belong before `actions=`, for a better message when they
/// turn up after it.
fn is_match_word(name: &str) -> bool {
    field::lookup(name).is_some()
        || flowpath_flow::matching::PROTOCOLS
            .iter()
            .any(|(p, _, _)| *p == name)
        || matches!(
            name,
            "priority" | "table" | "cookie" | "idle_timeout" | "hard_timeout"
        )
}

/// Parses one action; `Ok(None)` is `drop`.
/// `check_pkt_larger(LEN)->DST[bit]` (its argument is not in the usual
/// `name(arg)` form); ovs-ofctl's checks and messages.
fn parse_check_pkt_larger(item: &str, arg: Arg<'_>, matching: &Match) -> Result<Action, RuleError> {
    let name = "check_pkt_larger";
    let Arg::Colon(rest) = arg else {
        return fail(
            name,
            format!("'{item}' is not check_pkt_larger(LEN)->DST[BIT]"),
        );
    };
    let Some((len, dst)) = rest.split_once("->") else {
        return fail(name, format!("{}: missing `->'", rest.trim()));
    };
    let Some(len) = len
        .trim()
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
    else {
        return fail(
            name,
            format!("'{item}' is not check_pkt_larger(LEN)->DST[BIT]"),
        );
    };
    let len = match parse_uint(len.trim()) {
        Ok(n) if n <= u128::from(u16::MAX) => n as u16,
        _ => return fail(name, format!("invalid packet length \"{}\"", len.trim())),
    };
    let dst = parse_dst(name, dst, matching)?;
    if dst.n_bits != 1 {
        return fail(name, "Only 1-bit destination field is allowed");
    }
    if !dst.field.info().is_reg() {
        return fail(
            name,
            format!(
                "flowpath takes the result in a register or metadata bit, not in {}",
                dst.field.info().name
            ),
        );
    }
    Ok(Action::CheckPktLarger { len, dst })
}

fn parse_one(item: &str, matching: &Match, table: u8) -> Result<Option<Action>, RuleError> {
    let (name, arg) = split_action(item)?;
    let lname = name.to_ascii_lowercase();
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        if !matches!(arg, Arg::None) {
            return fail(name, format!("'{item}' is not an action"));
        }
        return parse_port(name, name).map(|p| Some(port_action(p)));
    }
    let a = match lname.as_str() {
        "drop" => {
            check_no_arg(name, arg)?;
            return Ok(None);
        }
        "output" => match arg {
            Arg::Paren(s) => {
                let mut port = None;
                let mut max_len = None;
                for kv in s.split(',').map(str::trim) {
                    match kv.split_once('=') {
                        Some((k, v)) if k.trim() == "port" => port = Some(v),
                        Some((k, v)) if k.trim() == "max_len" => {
                            let n = parse_uint(v).map_err(|e| RuleError::new(Some(name), e.0))?;
                            if n < 14 {
                                return fail(
                                    name,
                                    format!("max_len {n} is less than the minimum value 14"),
                                );
                            }
                            if n > u128::from(u32::MAX) {
                                return fail(name, format!("max_len {n} is out of range"));
                            }
                            max_len = Some(n as u32);
                        }
                        // `output(3)`: the port alone.
                        None if port.is_none() && !kv.is_empty() => port = Some(kv),
                        _ => return fail(name, format!("unexpected '{kv}' in output(...)")),
                    }
                }
                let Some(p) = port else {
                    return fail(name, "output(...) needs port=PORT");
                };
                let dest = parse_port(name, p)?;
                match (max_len, dest) {
                    (None, d) => port_action(d),
                    (Some(max_len), Dest::Number(port)) => Action::OutputTrunc { port, max_len },
                    (Some(_), _) => {
                        return fail(
                            name,
                            format!("output to unsupported truncate port: {}", p.trim()),
                        )
                    }
                }
            }
            _ => port_action(parse_port(name, need_arg(name, arg)?)?),
        },
        "in_port" => no_arg(name, arg, Action::InPort)?,
        "all" => no_arg(name, arg, Action::All)?,
        "flood" => no_arg(name, arg, Action::Flood)?,
        "normal" => no_arg(name, arg, Action::Normal)?,
        "local" => no_arg(name, arg, Action::Output(OFPP_LOCAL))?,
        "controller" => parse_controller(name, arg)?,
        "resubmit" => parse_resubmit(name, arg)?,
        "goto_table" => {
            let t = parse_table(name, need_arg(name, arg)?)?;
            if t <= table {
                return fail(
                    name,
                    format!(
                        "goto_table:{t} must go to a later table than this rule's table {table}"
                    ),
                );
            }
            Action::GotoTable(t)
        }
        "set_field" => parse_set_field(name, arg, matching)?,
        "check_pkt_larger" => parse_check_pkt_larger(item, arg, matching)?,
        "fin_timeout" => {
            let Arg::Paren(s) = arg else {
                return fail(name, "fin_timeout takes (idle_timeout=I,hard_timeout=H)");
            };
            let (mut idle, mut hard) = (0u16, 0u16);
            for kv in s.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                let n = parse_small(name, v, 0xffff, "timeout")? as u16;
                match k.trim() {
                    "idle_timeout" => idle = n,
                    "hard_timeout" => hard = n,
                    _ => return fail(name, format!("invalid key '{}' in fin_timeout", k.trim())),
                }
            }
            Action::FinTimeout { idle, hard }
        }
        // The whole tunnel id (ovs-ofctl prints a value over 32 bits as
        // set_tunnel64 whichever was written).
        "set_tunnel" | "set_tunnel64" => {
            let s = need_arg(name, arg)?;
            let value = parse_uint(s.trim())
                .ok()
                .filter(|v| *v <= u128::from(u64::MAX))
                .ok_or_else(|| {
                    RuleError::new(Some(name), format!("'{}' is not a 64-bit tunnel id", s.trim()))
                })?;
            Action::SetField {
                field: FieldId::TunId,
                value,
                mask: u128::from(u64::MAX),
                legacy: true,
            }
        }
        "load" => {
            let s = need_arg(name, arg)?;
            let Some((v, dst)) = s.split_once("->") else {
                return fail(name, format!("'{s}' is not VALUE->DST[BITS]"));
            };
            let dst = parse_dst(name, dst, matching)?;
            let value = parse_uint(v.trim()).map_err(|e| RuleError::new(Some(name), e.0))?;
            if value & !(dst.mask() >> dst.ofs) != 0 {
                return fail(
                    name,
                    format!("value {} does not fit in {} bits", v.trim(), dst.n_bits),
                );
            }
            Action::Load { dst, value }
        }
        "move" => {
            let s = need_arg(name, arg)?;
            let Some((src, dst)) = s.split_once("->") else {
                return fail(name, format!("'{s}' is not SRC[BITS]->DST[BITS]"));
            };
            let src = parse_src(name, src, matching)?;
            let dst = parse_dst(name, dst, matching)?;
            if src.n_bits != dst.n_bits {
                return fail(
                    name,
                    format!(
                        "source field is {} bits wide but destination is {} bits wide",
                        src.n_bits, dst.n_bits
                    ),
                );
            }
            Action::Move { src, dst }
        }
        "push" => Action::Push(parse_src(name, need_arg(name, arg)?, matching)?),
        "learn" => {
            let Arg::Paren(s) = arg else {
                return fail(name, "learn(table=T,...,SPEC,...)");
            };
            let l = crate::learn::parse(s)?;
            // The packet bits it reads must exist where the rule applies.
            if !std::ptr::eq(matching, bucket_context()) {
                for sf in l.sources() {
                    matching
                        .check_prereqs(sf.field.info())
                        .map_err(|e| RuleError::new(Some(name), e))?;
                }
            }
            Action::Learn(crate::learn::intern(l))
        }
        "conjunction" => {
            let Arg::Paren(s) = arg else {
                return fail(name, "conjunction(ID,K/N)");
            };
            let Some((id, kn)) = s.split_once(',') else {
                return fail(name, format!("'{s}' is not ID,K/N"));
            };
            let Some((k, n)) = kn.split_once('/') else {
                return fail(name, format!("'{kn}' is not K/N"));
            };
            let num = |x: &str, what: &str| {
                parse_uint(x.trim())
                    .ok()
                    .filter(|v| *v <= u128::from(u32::MAX))
                    .map(|v| v as u32)
                    .ok_or_else(|| {
                        RuleError::new(Some(name), format!("'{}' is not a {what}", x.trim()))
                    })
            };
            let (id, k, n) = (num(id, "conjunction id")?, num(k, "clause")?, num(n, "clause count")?);
            if n < 2 {
                return fail(name, "conjunction must have at least 2 clauses");
            }
            if n > 64 {
                return fail(name, "conjunction must have at most 64 clauses");
            }
            if k == 0 {
                return fail(name, "clause index must be positive");
            }
            if k > n {
                return fail(
                    name,
                    "clause index must be less than or equal to number of clauses",
                );
            }
            Action::Conjunction {
                id,
                k: k as u8,
                n: n as u8,
            }
        }
        "pop" => Action::Pop(parse_dst(name, need_arg(name, arg)?, matching)?),
        "write_metadata" => {
            return fail(
                name,
                "write_metadata is an instruction: it comes after the actions and write_actions(...), before goto_table",
            )
        }
        "bundle" | "bundle_load" => {
            let load = lname == "bundle_load";
            let usage = if load {
                "bundle_load(FIELDS,BASIS,ALGORITHM,ofport,DST[a..b],members:P,...)"
            } else {
                "bundle(FIELDS,BASIS,ALGORITHM,ofport,members:P,...)"
            };
            let Arg::Paren(s) = arg else {
                return fail(name, usage);
            };
            let parts: Vec<&str> = s.splitn(if load { 6 } else { 5 }, ',').map(str::trim).collect();
            let (head, dst, members) = match (load, &parts[..]) {
                (false, [a, b, c, d, m]) => ([*a, *b, *c, *d], None, *m),
                (true, [a, b, c, d, dst, m]) => ([*a, *b, *c, *d], Some(*dst), *m),
                _ => return fail(name, usage),
            };
            let [fname, basis, alg, ofport] = head;
            let fields = hash_fields(name, fname)?;
            let basis = hash_basis(name, basis)?;
            let hrw = match alg {
                "hrw" => true,
                "active_backup" => false,
                _ => {
                    return fail(
                        name,
                        format!("'{alg}' is not a bundle algorithm (active_backup, hrw)"),
                    )
                }
            };
            if ofport != "ofport" {
                return fail(
                    name,
                    format!("'{ofport}': bundle members must be given as ofport"),
                );
            }
            let load = match dst {
                Some(d) => {
                    let sf = parse_dst(name, d, matching)?;
                    if sf.n_bits < 16 {
                        return fail(
                            name,
                            format!("{d}: a bundle_load destination must be at least 16 bits"),
                        );
                    }
                    Some(sf)
                }
                None => None,
            };
            let Some(list) = members
                .strip_prefix("members:")
                .or(members.strip_prefix("slaves:"))
            else {
                return fail(name, "bundle needs members:P,P,...");
            };
            let mut m = [0u16; MAX_BUNDLE_MEMBERS];
            let mut n = 0;
            for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let Dest::Number(port) = parse_port(name, p)? else {
                    return fail(name, format!("{p} is not a port a bundle can have"));
                };
                if n == MAX_BUNDLE_MEMBERS {
                    return unsupported(
                        name,
                        &format!("bundle with more than {MAX_BUNDLE_MEMBERS} members"),
                    );
                }
                m[n] = port as u16;
                n += 1;
            }
            Action::Bundle {
                fields,
                basis,
                hrw,
                members: m,
                n: n as u8,
                load,
            }
        }
        "multipath" => {
            let usage = "multipath(FIELDS,BASIS,ALGORITHM,N_LINKS,ARG,DST[a..b])";
            let Arg::Paren(s) = arg else {
                return fail(name, usage);
            };
            let parts: Vec<&str> = s.splitn(6, ',').map(str::trim).collect();
            let [fname, basis, alg, n_links, a, dst] = parts[..] else {
                return fail(name, usage);
            };
            let fields = hash_fields(name, fname)?;
            let basis = hash_basis(name, basis)?;
            let Some(alg) = MULTIPATH_ALGORITHMS.iter().position(|x| *x == alg) else {
                return fail(
                    name,
                    format!(
                        "'{alg}' is not a multipath algorithm ({})",
                        MULTIPATH_ALGORITHMS.join(", ")
                    ),
                );
            };
            let n_links = parse_uint(n_links)
                .ok()
                .filter(|n| (1..=65536).contains(n))
                .ok_or_else(|| {
                    RuleError::new(
                        Some(name),
                        format!("n_links {n_links} is not in valid range 1 to 65536"),
                    )
                })? as u32;
            let arg = parse_uint(a)
                .ok()
                .filter(|v| *v <= u128::from(u32::MAX))
                .ok_or_else(|| RuleError::new(Some(name), format!("'{a}' is not a number")))?
                as u32;
            let dst = parse_dst(name, dst, matching)?;
            if dst.n_bits < 32 && n_links > 1u32 << dst.n_bits {
                return fail(
                    name,
                    format!(
                        "{}-bit destination field has {} possible values, less than specified n_links {n_links}",
                        dst.n_bits,
                        1u32 << dst.n_bits
                    ),
                );
            }
            Action::Multipath {
                fields,
                basis,
                alg: alg as u8,
                n_links,
                arg,
                dst,
            }
        }
        "set_queue" => {
            let s = need_arg(name, arg)?;
            let q = parse_uint(s.trim()).map_err(|e| RuleError::new(Some(name), e.0))?;
            if q > u128::from(u32::MAX) {
                return fail(name, format!("{} is not a queue id", s.trim()));
            }
            Action::SetQueue(q as u32)
        }
        "pop_queue" => no_arg(name, arg, Action::PopQueue)?,
        "enqueue" => {
            let s = match arg {
                Arg::Colon(s) => s.replacen(':', ",", 1),
                Arg::Paren(s) => s.to_string(),
                Arg::None => return fail(name, "enqueue needs PORT:QUEUE"),
            };
            let Some((p, q)) = s.split_once(',') else {
                return fail(name, format!("'{s}' is not PORT:QUEUE"));
            };
            let port = match parse_port(name, p)? {
                Dest::Number(n) => n,
                _ => return fail(name, format!("{} is not a port enqueue can use", p.trim())),
            };
            let q = parse_uint(q.trim()).map_err(|e| RuleError::new(Some(name), e.0))?;
            if q > u128::from(u32::MAX) {
                return fail(name, format!("{} is not a queue id", q));
            }
            Action::Enqueue {
                port,
                queue: q as u32,
            }
        }
        "group" => {
            let s = need_arg(name, arg)?;
            let g = parse_uint(s.trim()).map_err(|e| RuleError::new(Some(name), e.0))?;
            if g > 0xffff_ff00 {
                return fail(
                    name,
                    format!("{} is not a group id (0 to 4294967040)", s.trim()),
                );
            }
            Action::Group(g as u32)
        }
        "clear_actions" | "write_actions" | "apply_actions" => {
            return fail(name, "an instruction cannot be nested in an action list")
        }
        // OpenFlow 1.1's TTL and ECN actions: unlike the 1.0 `mod_*`
        // actions, OVS demands that the match pin IP (as set_field does),
        // so they are `set_field`s (and print as such).
        "mod_nw_ttl" | "mod_nw_ecn" => {
            let v = match arg {
                Arg::Colon(v) | Arg::Paren(v) => v.trim(),
                Arg::None => return fail(name, format!("{name} needs a value")),
            };
            let field = if lname == "mod_nw_ttl" {
                "nw_ttl"
            } else {
                "nw_ecn"
            };
            let text = format!("{v}->{field}");
            parse_set_field(name, Arg::Colon(&text), matching)?
        }
        "dec_ttl" => match arg {
            Arg::None => Action::DecTtl,
            Arg::Paren(s) if s.trim().is_empty() => Action::DecTtl,
            // Controller ids: an expired TTL sends a packet-in to each.
            Arg::Paren(s) => {
                let mut ids = [0u16; MAX_DEC_TTL_IDS];
                let mut n = 0;
                for x in s.split(',') {
                    let id = parse_uint(x.trim())
                        .ok()
                        .filter(|v| *v <= 0xffff)
                        .ok_or_else(|| {
                            RuleError::new(
                                Some(name),
                                format!("'{}' is not a controller id (0 to 65535)", x.trim()),
                            )
                        })?;
                    if n == MAX_DEC_TTL_IDS {
                        return unsupported(
                            name,
                            &format!("dec_ttl with more than {MAX_DEC_TTL_IDS} controller ids"),
                        );
                    }
                    ids[n] = id as u16;
                    n += 1;
                }
                Action::DecTtlIds { ids, n: n as u8 }
            }
            _ => return fail(name, "dec_ttl takes controller ids: dec_ttl(ID,ID,...)"),
        },
        "push_vlan" => {
            let s = need_arg(name, arg)?;
            let tpid = parse_uint(s).map_err(|e| RuleError::new(Some(name), e.0))?;
            if tpid != 0x8100 && tpid != 0x88a8 {
                return fail(
                    name,
                    format!(
                        "'{}' is not a VLAN TPID (0x8100 or 0x88a8 expected)",
                        s.trim()
                    ),
                );
            }
            Action::PushVlan(tpid as u16)
        }
        "pop_vlan" | "strip_vlan" => no_arg(name, arg, Action::PopVlan)?,
        "push_mpls" => {
            let s = need_arg(name, arg)?;
            let t = parse_small(name, s, 0xffff, "EtherType")? as u16;
            // ovs-vswitchd refuses any other (OFPBAC_BAD_ARGUMENT).
            if !matches!(t, 0x8847 | 0x8848) {
                return fail(
                    name,
                    format!("'{}' is not an MPLS EtherType (0x8847 or 0x8848)", s.trim()),
                );
            }
            Action::PushMpls(t)
        }
        "pop_mpls" => Action::PopMpls(parse_small(name, need_arg(name, arg)?, 0xffff, "EtherType")? as u16),
        "set_mpls_label" => {
            Action::SetMplsLabel(parse_small(name, need_arg(name, arg)?, 0xfffff, "MPLS label")? as u32)
        }
        "set_mpls_tc" => Action::SetMplsTc(parse_small(name, need_arg(name, arg)?, 7, "MPLS TC")? as u8),
        "set_mpls_ttl" => {
            Action::SetMplsTtl(parse_small(name, need_arg(name, arg)?, 255, "MPLS TTL")? as u8)
        }
        "dec_mpls_ttl" => no_arg(name, arg, Action::DecMplsTtl)?,
        "mod_vlan_vid" => {
            Action::ModVlanVid(parse_small(name, need_arg(name, arg)?, 4095, "VLAN ID")? as u16)
        }
        "mod_vlan_pcp" => {
            Action::ModVlanPcp(parse_small(name, need_arg(name, arg)?, 7, "VLAN priority")? as u8)
        }
        _ => {
            if let Some(&(_, id)) = LEGACY.iter().find(|(n, _)| *n == lname) {
                parse_legacy(name, arg, id)?
            } else if UNSUPPORTED.contains(&lname.as_str()) {
                return unsupported(name, &format!("action {name}"));
            } else if is_match_word(name) && matches!(arg, Arg::Colon(_)) && item.contains('=') {
                return fail(
                    name,
                    "is a match field or rule keyword: actions=... must come last",
                );
            } else if name.is_empty() {
                return fail("actions", format!("'{item}' is not an action"));
            } else {
                return fail(name, "unknown action");
            }
        }
    };
    Ok(Some(a))
}

/// Parses the text after `actions=` with OpenFlow 1.1+ instructions, as
/// `ovs-ofctl` takes them, in their order: actions (applied at once;
/// `apply_actions(...)` is refused as `ovs-ofctl` refuses it),
/// `clear_actions`, `write_actions(...)`, `goto_table:T`. Returns the rule's action list (with the
/// [`Action::ClearActions`] / [`Action::WriteActions`] markers where the
/// instructions are) and the write set. Errors name the instruction; an
/// out-of-order one is refused as `ovs-ofctl` refuses it.
pub fn parse_instructions(
    text: &str,
    matching: &Match,
    table: u8,
) -> Result<(Vec<Action>, Vec<Action>), RuleError> {
    let mut list = Vec::new();
    let mut write_set = Vec::new();
    // 0: actions, 1: clear_actions seen, 2: write_actions seen,
    // 3: write_metadata seen.
    let mut phase = 0;
    let mut plain = String::new();
    let flush = |plain: &mut String, list: &mut Vec<Action>| -> Result<(), RuleError> {
        if !plain.is_empty() {
            list.extend(parse_actions(plain, matching, table)?);
            plain.clear();
        }
        Ok(())
    };
    for item in split_actions(text)? {
        let (name, arg) = split_action(item)?;
        let order = |what: &str, before: &str| {
            fail(
                what,
                format!(
                    "invalid instruction ordering: {what} must appear before {before}, for OpenFlow 1.1+ compatibility"
                ),
            )
        };
        let later = |p: i32| match p {
            3 => "write_metadata",
            2 => "write_actions",
            _ => "clear_actions",
        };
        match name.to_ascii_lowercase().as_str() {
            // As ovs-ofctl: actions are applied without naming the
            // instruction.
            "apply_actions" => {
                return fail(name, "apply_actions is the default instruction");
            }
            "clear_actions" => {
                check_no_arg(name, arg)?;
                if phase > 0 {
                    return order("clear_actions", later(phase));
                }
                flush(&mut plain, &mut list)?;
                list.push(Action::ClearActions);
                phase = 1;
            }
            "write_actions" => {
                let Arg::Paren(inner) = arg else {
                    return fail(
                        name,
                        "write_actions takes a list: write_actions(ACTION,...)",
                    );
                };
                if phase == 2 {
                    return fail(name, "write_actions given twice");
                }
                if phase == 3 {
                    return order("write_actions", "write_metadata");
                }
                flush(&mut plain, &mut list)?;
                write_set = parse_actions(inner, matching, table)?;
                if write_set.iter().any(|a| {
                    matches!(
                        a,
                        Action::GotoTable(_) | Action::ClearActions | Action::WriteActions
                    )
                }) {
                    return fail(name, "write_actions cannot hold instructions");
                }
                if let Some(a) = write_set.iter().find(|a| {
                    matches!(
                        a,
                        Action::Push(_)
                            | Action::Pop(_)
                            | Action::Multipath { .. }
                            | Action::Bundle { load: Some(_), .. }
                            | Action::CheckPktLarger { .. }
                            | Action::FinTimeout { .. }
                    )
                }) {
                    return fail(name, format!("disallowed action in action set: {a}"));
                }
                list.push(Action::WriteActions);
                phase = 2;
            }
            "write_metadata" => {
                if phase == 3 {
                    return fail(name, "write_metadata given twice");
                }
                let s = need_arg(name, arg)?.trim();
                let (v, m) = match s.split_once('/') {
                    Some((v, m)) => (v, Some(m)),
                    None => (s, None),
                };
                let num = |x: &str| {
                    parse_uint(x.trim())
                        .ok()
                        .filter(|n| *n <= u128::from(u64::MAX))
                        .map(|n| n as u64)
                        .ok_or_else(|| {
                            RuleError::new(
                                Some(name),
                                format!("'{}' is not a 64-bit number", x.trim()),
                            )
                        })
                };
                let value = num(v)?;
                let mask = match m {
                    Some(m) => num(m)?,
                    None => u64::MAX,
                };
                flush(&mut plain, &mut list)?;
                list.push(Action::WriteMetadata {
                    value: value & mask,
                    mask,
                });
                phase = 3;
            }
            "goto_table" if phase > 0 => {
                let a = parse_one(item, matching, table)?;
                list.extend(a);
            }
            _ => {
                if phase > 0 {
                    return order("apply_actions", later(phase));
                }
                if !plain.is_empty() {
                    plain.push(',');
                }
                plain.push_str(item);
            }
        }
    }
    flush(&mut plain, &mut list)?;
    // As ovs-ofctl: conjunctions go with nothing else (but notes).
    if list.iter().any(|a| matches!(a, Action::Conjunction { .. }))
        || write_set
            .iter()
            .any(|a| matches!(a, Action::Conjunction { .. }))
    {
        if let Some(other) = list
            .iter()
            .chain(write_set.iter())
            .find(|a| !matches!(a, Action::Conjunction { .. }))
        {
            let what = match other {
                Action::WriteActions => "write_actions".to_string(),
                a => a.to_string(),
            };
            let what = what.split(['(', ':']).next().unwrap_or("").to_string();
            return fail(
                "conjunction",
                format!("\"conjunction\" actions may be used along with \"note\" but not any other kind of action (such as the \"{what}\" action used here)"),
            );
        }
    }
    if let Some(i) = list.iter().position(|a| matches!(a, Action::GotoTable(_))) {
        if i + 1 != list.len() {
            return fail("goto_table", "goto_table must be the last action");
        }
    }
    Ok((list, write_set))
}

/// Parses the text after `actions=` for a rule in `table` whose match is
/// `matching` (`set_field` must have its prerequisites met by it;
/// `goto_table` must go to a later table). An empty text or `drop` is the
/// empty list. Errors name the action as written. Instructions
/// (`write_actions`, ...) are read by [`parse_instructions`].
pub fn parse_actions(text: &str, matching: &Match, table: u8) -> Result<Vec<Action>, RuleError> {
    let mut actions = Vec::new();
    let mut dropped = false;
    let mut cur: Option<Match> = None;
    for item in split_actions(text)? {
        // `note:HEX`: a comment for the controller that does nothing, as in
        // OVS (flowpath does not keep it: dump-flows does not show it).
        if let Some(hex) = item.trim().strip_prefix("note:") {
            let ok = hex
                .split('.')
                .all(|b| b.len() <= 2 && (b.is_empty() || u8::from_str_radix(b, 16).is_ok()));
            if !ok {
                return fail("note", format!("'{hex}' is not hex bytes (note:00.11.22)"));
            }
            continue;
        }
        match parse_one(item, cur.as_ref().unwrap_or(matching), table)? {
            Some(a) => {
                // As ovs-ofctl checks a list: after push_mpls/pop_mpls the
                // later actions see the new EtherType (and, after a push,
                // no network protocol).
                if let Action::PushMpls(t) | Action::PopMpls(t) = a {
                    if !std::ptr::eq(matching, bucket_context()) {
                        let mut m = cur.take().unwrap_or(*matching);
                        m.set_field_masked(FieldId::EthType.info(), u128::from(t), 0xffff);
                        if matches!(a, Action::PushMpls(_)) {
                            m.set_field_masked(FieldId::NwProto.info(), 0, 0xff);
                        }
                        cur = Some(m);
                    }
                }
                actions.push(a)
            }
            None => dropped = true,
        }
    }
    if dropped && !actions.is_empty() {
        return fail("drop", "drop must be the only action");
    }
    if let Some(i) = actions
        .iter()
        .position(|a| matches!(a, Action::GotoTable(_)))
    {
        if i + 1 != actions.len() {
            return fail("goto_table", "goto_table must be the last action");
        }
    }
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpls_actions_parse_and_check_the_ethertype_they_leave() {
        let mut ip = Match::catchall();
        assert!(ip.set_protocol("ip"));
        let a = parse_actions(
            "push_mpls:0x8847,set_field:5->mpls_label,set_mpls_tc(3),set_mpls_ttl:9,dec_mpls_ttl,pop_mpls:0x0800,output:1",
            &ip,
            0,
        )
        .unwrap();
        assert_eq!(
            a,
            vec![
                Action::PushMpls(0x8847),
                Action::SetField {
                    field: FieldId::MplsLabel,
                    value: 5,
                    mask: 0xfffff,
                    legacy: false
                },
                Action::SetMplsTc(3),
                Action::SetMplsTtl(9),
                Action::DecMplsTtl,
                Action::PopMpls(0x0800),
                Action::Output(1),
            ]
        );
        assert_eq!(
            a.iter().map(|x| x.to_string()).collect::<Vec<_>>()[..3],
            [
                "push_mpls:0x8847",
                "set_field:5->mpls_label",
                "set_mpls_tc(3)"
            ]
        );
        // Without the push, the match is not MPLS; after a pop, not either.
        assert!(parse_actions("set_field:5->mpls_label", &ip, 0).is_err());
        let mut mpls = Match::catchall();
        assert!(mpls.set_protocol("mpls"));
        assert!(parse_actions("set_field:5->mpls_label", &mpls, 0).is_ok());
        assert!(parse_actions("pop_mpls:0x0800,set_field:5->mpls_label", &mpls, 0).is_err());
        // An L3 field after a push: the payload is opaque.
        assert!(parse_actions("push_mpls:0x8847,set_field:1.2.3.4->nw_src", &ip, 0).is_err());
        for bad in [
            "push_mpls:0x0800",
            "set_mpls_label:1048576",
            "set_mpls_tc:8",
            "dec_mpls_ttl:1",
        ] {
            assert!(parse_actions(bad, &mpls, 0).is_err(), "{bad}");
        }
        // mpls_bos is read-only.
        assert!(parse_actions("set_field:1->mpls_bos", &mpls, 0).is_err());
    }

    fn tcp() -> Match {
        let mut m = Match::catchall();
        assert!(m.set_protocol("tcp"));
        m
    }

    fn p(text: &str) -> Result<Vec<Action>, RuleError> {
        parse_actions(text, &tcp(), 0)
    }

    fn round(text: &str) -> String {
        format_actions(&p(text).unwrap_or_else(|e| panic!("{text}: {e}")))
    }

    #[test]
    fn outputs_and_ports() {
        assert_eq!(p("output:2").unwrap(), vec![Action::Output(2)]);
        assert_eq!(
            p("2,3").unwrap(),
            vec![Action::Output(2), Action::Output(3)]
        );
        assert_eq!(p("output(port=4)").unwrap(), vec![Action::Output(4)]);
        assert_eq!(round("output:LOCAL"), "LOCAL");
        assert_eq!(round("65534"), "LOCAL");
        assert_eq!(round("in_port,all,flood"), "IN_PORT,ALL,FLOOD");
        assert_eq!(round("output:IN_PORT"), "IN_PORT");
        assert_eq!(round("controller"), "CONTROLLER:65535");
        assert_eq!(round("controller:128"), "CONTROLLER:128");
        assert_eq!(round("controller(max_len=64)"), "CONTROLLER:64");
        assert_eq!(round("CONTROLLER:65535"), "CONTROLLER:65535");
        assert!(p("output:0").is_err());
        assert!(p("output:65280").is_err());
        assert!(p("output:NONE").is_err());
        assert!(p("output").is_err());
    }

    #[test]
    fn resubmit_forms() {
        assert_eq!(round("resubmit(,2)"), "resubmit(,2)");
        assert_eq!(round("resubmit:3"), "resubmit:3");
        assert_eq!(round("resubmit(3,2)"), "resubmit(3,2)");
        assert_eq!(round("resubmit(3)"), "resubmit:3");
        assert_eq!(round("resubmit( , 2 )"), "resubmit(,2)");
        assert_eq!(round("resubmit:IN_PORT"), "resubmit:IN_PORT");
        assert_eq!(round("resubmit(LOCAL,1)"), "resubmit(LOCAL,1)");
        assert!(p("resubmit(,)").is_err());
        assert!(p("resubmit(,255)").is_err());
        assert!(p("resubmit").is_err());
        let e = p("resubmit(1,2,ct)").unwrap_err();
        assert!(e.msg.contains("not supported by flowpath"), "{e}");
    }

    #[test]
    fn set_fields_and_legacy() {
        assert_eq!(
            round("set_field:10.0.0.1->nw_src"),
            "set_field:10.0.0.1->nw_src"
        );
        assert_eq!(
            round("set_field:10.0.0.1/8->ip_src"),
            "set_field:10.0.0.0/8->nw_src"
        );
        assert_eq!(
            round("set_field:00:11:22:33:44:55->eth_dst"),
            "set_field:00:11:22:33:44:55->dl_dst"
        );
        assert_eq!(round("mod_nw_dst:1.2.3.4"), "mod_nw_dst:1.2.3.4");
        assert_eq!(
            round("mod_dl_src:00:0A:00:00:00:01"),
            "mod_dl_src:00:0a:00:00:00:01"
        );
        assert_eq!(
            round("mod_nw_tos:32,mod_tp_dst:80"),
            "mod_nw_tos:32,mod_tp_dst:80"
        );
        // Legacy actions do not need prerequisites, set_field does.
        let none = Match::catchall();
        assert!(parse_actions("mod_nw_src:1.2.3.4", &none, 0).is_ok());
        let e = parse_actions("set_field:1.2.3.4->nw_src", &none, 0).unwrap_err();
        assert!(e.to_string().contains("nw_src requires ip"), "{e}");
        assert!(p("mod_nw_tos:33").is_err());
        assert!(p("mod_nw_src:1.2.3.4/8").is_err());
        // in_port is writable, as in OVS (load:N->NXM_OF_IN_PORT[]).
        assert!(p("set_field:1->in_port").is_ok());
        assert_eq!(
            p("set_field:1->reg0").unwrap(),
            vec![Action::SetField {
                field: FieldId::Reg0,
                value: 1,
                mask: 0xffff_ffff,
                legacy: false
            }]
        );
        assert!(p("set_field:1->tun_src")
            .unwrap_err()
            .msg
            .contains("not supported"));
        assert!(p("set_field:1").is_err());
        assert!(p("set_field:0xffff->dl_vlan").is_err());
    }

    #[test]
    fn vlan_ttl_goto_drop() {
        assert_eq!(
            round("push_vlan:0x8100,mod_vlan_vid:10,mod_vlan_pcp:3"),
            "push_vlan:0x8100,mod_vlan_vid:10,mod_vlan_pcp:3"
        );
        assert_eq!(round("strip_vlan,dec_ttl"), "pop_vlan,dec_ttl");
        assert_eq!(round("push_vlan:34984"), "push_vlan:0x88a8");
        assert!(p("push_vlan:0x9100").is_err());
        assert!(p("mod_vlan_vid:4096").is_err());
        assert!(p("mod_vlan_pcp:8").is_err());
        assert_eq!(round("goto_table:2"), "goto_table:2");
        assert_eq!(round("NORMAL"), "NORMAL");
        assert_eq!(round("normal"), "NORMAL");
        assert_eq!(p("output:NORMAL").unwrap(), vec![Action::Normal]);
        assert_eq!(p("output(3)").unwrap(), vec![Action::Output(3)]);
        assert_eq!(
            round("output(port=2,max_len=100)"),
            "output(port=2,max_len=100)"
        );
        assert_eq!(
            round("output(max_len=64,port=LOCAL)"),
            "output(port=LOCAL,max_len=64)"
        );
        assert!(p("output(port=2,max_len=13)")
            .unwrap_err()
            .msg
            .contains("minimum value 14"));
        assert!(p("output(port=NORMAL,max_len=100)")
            .unwrap_err()
            .msg
            .contains("unsupported truncate port"));
        assert_eq!(p("note:00.1f,output:2").unwrap(), vec![Action::Output(2)]);
        assert!(p("note:xyz").is_err());
        assert_eq!(round("dec_ttl(1,2)"), "dec_ttl(1,2)");
        assert_eq!(
            round("set_queue:5,output:2,pop_queue"),
            "set_queue:5,output:2,pop_queue"
        );
        assert_eq!(round("enqueue:2:7"), "enqueue:2:7");
        assert_eq!(
            round("bundle(symmetric_l4,7,hrw,ofport,members:2,3)"),
            "bundle(symmetric_l4,7,hrw,ofport,members:2,3)"
        );
        assert_eq!(
            round("bundle(eth_src,0,active_backup,ofport,slaves:4)"),
            "bundle(eth_src,0,active_backup,ofport,members:4)"
        );
        assert!(p("bundle(foo,0,hrw,ofport,members:2)").is_err());
        assert!(p("bundle(eth_src,0,iter_hash,ofport,members:2)").is_err());
        assert!(p("bundle(eth_src,0,hrw,ofport,members:1,2,3,4,5,6,7,8,9)").is_err());
        assert_eq!(round("enqueue(LOCAL,7)"), "enqueue:LOCAL:7");
        assert!(p("enqueue:ALL:7").is_err());
        assert!(p("enqueue:2").is_err());
        assert!(p("set_queue:x").is_err());
        assert!(p("dec_ttl(1,x)").is_err());
        assert!(p("dec_ttl(1,2,3,4,5,6,7,8,9)").is_err());
        // p() parses for a `tcp` rule: IP is pinned.
        assert_eq!(round("mod_nw_ttl:9"), "set_field:9->nw_ttl");
        assert_eq!(round("mod_nw_ecn:2"), "set_field:2->nw_ecn");
        assert!(parse_actions("mod_nw_ttl:9", &Match::catchall(), 0).is_err());
        assert_eq!(p("output(port=3)").unwrap(), vec![Action::Output(3)]);
        assert!(p("output(3,4)").is_err());
        assert_eq!(p("output:0xfffa").unwrap(), vec![Action::Normal]);
        assert!(p("NORMAL:1").is_err());
        assert!(p("resubmit:NORMAL").is_err());
        assert!(parse_actions("goto_table:2", &tcp(), 2).is_err());
        assert!(p("goto_table:2,output:1").is_err());
        assert_eq!(p("drop").unwrap(), vec![]);
        assert_eq!(p("").unwrap(), vec![]);
        assert!(p("drop,output:1").is_err());
        assert_eq!(format_actions(&[]), "drop");
    }

    #[test]
    fn instructions() {
        let i = |t: &str| parse_instructions(t, &tcp(), 0);
        let (l, w) = i("output:1,clear_actions,write_actions(mod_dl_src:00:00:00:00:00:01,output:2),goto_table:3").unwrap();
        assert_eq!(
            l,
            vec![
                Action::Output(1),
                Action::ClearActions,
                Action::WriteActions,
                Action::GotoTable(3)
            ]
        );
        assert_eq!(w.len(), 2);
        assert_eq!(
            format_instructions(&l, &w),
            "output:1,clear_actions,write_actions(mod_dl_src:00:00:00:00:00:01,output:2),goto_table:3"
        );
        for (bad, needle) in [
            (
                "write_actions(output:2),output:3",
                "apply_actions must appear before write_actions",
            ),
            (
                "clear_actions,output:3",
                "apply_actions must appear before clear_actions",
            ),
            (
                "write_actions(output:2),clear_actions",
                "clear_actions must appear before write_actions",
            ),
            (
                "write_actions(output:2),write_actions(output:3)",
                "given twice",
            ),
            (
                "apply_actions(output:1)",
                "apply_actions is the default instruction",
            ),
            ("write_actions(goto_table:2)", "cannot hold instructions"),
            ("output:1,write_actions(clear_actions)", "cannot be nested"),
            (
                "write_metadata:1,clear_actions",
                "clear_actions must appear before write_metadata",
            ),
            (
                "write_metadata:1,write_actions(output:1)",
                "write_actions must appear before write_metadata",
            ),
            ("write_metadata:1,write_metadata:2", "given twice"),
            ("write_metadata:0x1/0x1/", "64-bit number"),
            ("write_actions(push:NXM_NX_REG0[],output:1)", "disallowed"),
        ] {
            let e = i(bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn register_actions() {
        let ip = {
            let mut m = Match::catchall();
            assert!(m.set_protocol("ip"));
            m
        };
        let a = parse_actions(
            "load:0x5->NXM_NX_REG0[0..3],move:NXM_OF_IP_SRC[0..7]->reg1[8..15],\
             push:OXM_OF_METADATA[],pop:NXM_NX_PKT_MARK[0..31],move:NXM_OF_IN_PORT[]->NXM_NX_XXREG1[0..15],\
             load:1->OXM_OF_PKT_REG2[63]",
            &ip,
            0,
        )
        .unwrap();
        // As `ovs-ofctl dump-flows` prints them.
        assert_eq!(
            format_actions(&a),
            "load:0x5->NXM_NX_REG0[0..3],move:NXM_OF_IP_SRC[0..7]->NXM_NX_REG1[8..15],\
             push:OXM_OF_METADATA[],pop:NXM_NX_PKT_MARK[],move:NXM_OF_IN_PORT[]->NXM_NX_XXREG1[0..15],\
             load:0x1->OXM_OF_PKT_REG2[63]"
        );
        let Action::Move { src, dst } = a[1] else {
            panic!("{:?}", a[1]);
        };
        assert_eq!((src.field, src.ofs, src.n_bits), (FieldId::NwSrc, 0, 8));
        assert_eq!((dst.field, dst.mask()), (FieldId::Reg1, 0xff00));
        let none = Match::catchall();
        for (bad, needle) in [
            ("move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]", "nw_src requires ip"),
            ("move:NXM_NX_REG0[]->NXM_NX_REG1[0..15]", "32 bits wide"),
            ("load:0x10->NXM_NX_REG0[0..3]", "does not fit in 4 bits"),
            ("load:1->NXM_NX_REG0[32]", "has 32 bits"),
            ("load:1->NXM_NX_REG0[5..3]", "ends before"),
            ("load:1->NXM_OF_ETH_TYPE[]", "not writable"),
            ("load:1->NXM_NX_REG16[]", "unknown field"),
            ("load:1->NXM_NX_TUN_IPV4_SRC[]", "not supported"),
            ("write_metadata:1", "is an instruction"),
            ("push", "needs"),
        ] {
            let e = parse_actions(bad, &none, 0).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        let mut arp = Match::catchall();
        assert!(arp.set_protocol("arp"));
        let e = parse_actions("move:NXM_NX_REG0[0..7]->NXM_OF_ARP_OP[0..7]", &arp, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no ARP rewrite"), "{e}");
        let (list, _) = parse_instructions(
            "load:1->reg0,write_actions(output:1),write_metadata:0x5/0xff,goto_table:2",
            &none,
            0,
        )
        .unwrap();
        assert_eq!(
            list[2],
            Action::WriteMetadata {
                value: 5,
                mask: 0xff
            }
        );
        assert_eq!(list[2].to_string(), "write_metadata:0x5/0xff");
    }

    #[test]
    fn unknown_and_unsupported() {
        for a in [
            "learn(table=1,NXM_NX_TUN_IPV4_SRC[])",
            "ct(commit)",
            "meter:1",
        ] {
            let e = p(a).unwrap_err();
            assert!(
                e.to_string().contains("not supported by flowpath"),
                "{a}: {e}"
            );
        }
        let e = p("frobnicate").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("frobnicate"));
        assert!(p("resubmit(,2").is_err());
        assert!(p("output:1)").is_err());
        let e = p("output:1,priority=3").unwrap_err();
        assert!(e.msg.contains("must come last"), "{e}");
    }

    #[test]
    fn unsupported_field_names() {
        for n in ["tun_src", "ct_state", "mpls_label", "NXM_NX_TUN_IPV4_SRC"] {
            assert!(is_unsupported_field(n), "{n}");
        }
        for n in ["nw_src", "register", "reg", "tp_dst"] {
            assert!(!is_unsupported_field(n), "{n}");
        }
    }
}
