//! Datapath actions: what the slow path hands to the fast path.
//!
//! These are the actions of an installed megaflow, in the vocabulary of
//! OVS's datapath (ODP) actions and printed the way `ofproto/trace` prints
//! its `Datapath actions:` line: `drop`, `2`, `2,3`, `set(ipv4(ttl=63))`,
//! `push_vlan(vid=10,pcp=0)`, `pop_vlan`, `userspace(controller)`.
//!
//! A `set` carries the new values of the rewritten fields of one header as a
//! key under a mask (the fields that change, nothing else); the datapath
//! rewrites exactly those bits and fixes checksums.
//!
//! This crate sits below both the fast path (`flowpath-datapath`, which
//! executes these actions) and the slow path (`flowpath-ofproto`, which
//! produces them), so that neither depends on the other.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

use flowpath_flow::field::FieldId;
use flowpath_flow::value::format_mac;
use flowpath_flow::{FlowKey, FlowMask};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

mod tnl;
pub use tnl::{TnlPush, TNL_HEADER_MAX};

/// Which header a `set` rewrites.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SetHeader {
    /// Ethernet addresses.
    Eth,
    /// IPv4 src, dst, tos, ttl.
    Ipv4,
    /// IPv6 src, dst, label, tclass, hop limit.
    Ipv6,
    /// TCP ports.
    Tcp,
    /// UDP ports.
    Udp,
    /// SCTP ports.
    Sctp,
    /// ARP sender and target addresses, opcode (`set(arp(...))`).
    Arp,
    /// ICMPv4 type and code (`set(icmp(...))`, always both).
    Icmp,
    /// ICMPv6 type and code (`set(icmpv6(...))`, always both).
    Icmpv6,
    /// IPv6 neighbour discovery: target and link-layer address options
    /// (`set(nd(...))`).
    Nd,
    /// Neighbour discovery extensions: the reserved word and the first
    /// option's type (`set(nd_ext(...))`).
    NdExt,
}

/// One datapath action.
///
/// `Set` is much larger than the others (a key and a mask); megaflows hold
/// a handful of actions each, built once per upcall, so the size is kept
/// for direct access without a pointer chase on the per-packet path.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum DpAction {
    /// Send a copy of the packet, as it is now, to this datapath port.
    Output(u32),
    /// Rewrite the bits of `mask` in `header` to the values in `key`
    /// (key/mask use the [`FlowKey`] layout).
    Set {
        /// Header rewritten.
        header: SetHeader,
        /// New values.
        key: FlowKey,
        /// Bits rewritten.
        mask: FlowMask,
    },
    /// Push an 802.1Q/802.1ad tag with this TPID and TCI (CFI bit clear).
    PushVlan {
        /// Tag protocol identifier.
        tpid: u16,
        /// Tag control information (PCP, DEI, VID).
        tci: u16,
    },
    /// Remove the outermost VLAN tag.
    PopVlan,
    /// Send to the controller (`userspace(controller(...))`; counted, as
    /// flowpath has no controller channel yet).
    Controller {
        /// The packet-in's reason (OpenFlow's `OFPR_*` number; 6: an
        /// explicit table miss).
        reason: u8,
        /// The controller connection id (0: all).
        id: u16,
        /// Bytes of the packet to send.
        max_len: u16,
        /// The cookie of the rule whose action it is (`u64::MAX`: no
        /// rule's, as a packet-out's own actions).
        cookie: u64,
        /// The table of that rule.
        table: u8,
        /// `controller(userdata=...)`: an index into the process's
        /// userdata table (0: none).
        userdata: u32,
        /// `controller(pause)`: the id of the frozen rest of the
        /// translation (0: none), which the controller's resume thaws.
        cont: u32,
    },
    /// The next output sends at most this many bytes of the packet
    /// (`trunc(N)`, from `output(port=P,max_len=N)`).
    Trunc(u32),
    /// Sets the packet's priority (`set(skb_priority(N))`, from
    /// `set_queue`/`enqueue`): metadata that no flowpath port acts on.
    SetPriority(u32),
    /// Sets bits of the packet's mark (`set(skb_mark(V[/M]))`, from a
    /// write to `pkt_mark`): metadata that no flowpath port acts on.
    SetMark {
        /// The new bits.
        value: u32,
        /// The bits written (all ones: a plain set).
        mask: u32,
    },
    /// Push an MPLS label stack entry after the Ethernet header and its
    /// VLAN tags; the packet's EtherType becomes `ethertype`.
    PushMpls {
        /// 0x8847 or 0x8848.
        ethertype: u16,
        /// The entry (label 12..32, tc 9..12, bos 8, ttl 0..8).
        lse: u32,
    },
    /// Remove the top MPLS label stack entry; the packet's EtherType
    /// becomes this one.
    PopMpls(u16),
    /// Rewrite the top MPLS label stack entry (`set(mpls(...))`).
    SetMpls(u32),
    /// Compute the packet's datapath hash (`dp_hash`) from its L3/L4
    /// addresses (`hash(sym_l4(B))` symmetric, `hash(l4(B))` not), for a
    /// select group's recirculated lookup.
    Hash {
        /// Symmetric in source and destination (OVS's `sym_l4`).
        symmetric: bool,
        /// The hash basis.
        basis: u32,
    },
    /// `recirc(ID)`: parse the packet, as the actions so far left it, again
    /// and look it up once more with `recirc_id` = ID (its in_port,
    /// metadata and `dp_hash` kept): translation was frozen here, to go on
    /// with what only the new parse (or the hash) tells.
    Recirc(u32),
    /// `check_pkt_len(size=N,gt(...),le(...))`, from `check_pkt_larger`:
    /// the `gt` actions that follow this one run when the packet (its
    /// whole frame, as it is now) is longer than `size` bytes, the `le`
    /// actions after them otherwise. The branches are laid out flat, so
    /// that the list stays a plain slice: `[CheckPktLen{gt: 2, le: 1}, A,
    /// B, C]` is `check_pkt_len(size=N,gt(A,B),le(C))`, and a branch may
    /// hold further `CheckPktLen`s (counted in its length).
    CheckPktLen {
        /// The length compared with.
        size: u16,
        /// Number of flat actions in the greater-than branch.
        gt: u16,
        /// Number of flat actions in the less-or-equal branch.
        le: u16,
    },
    /// `clone(...)`: the `len` actions that follow this one run on a copy
    /// of the packet; the packet after them is as it was before (laid out
    /// flat, as `CheckPktLen`'s branches).
    Clone {
        /// Number of flat actions in the clone.
        len: u16,
    },
    /// `ct(...)`: send the packet through the connection tracker (its
    /// `ct_*` metadata set, NAT applied, the connection committed).
    Ct(CtAction),
    /// `ct_clear`: the packet becomes untracked (its `ct_*` metadata 0).
    CtClear,
    /// `sample(sample=P%,actions(userspace(flow_sample(...))))`, from an
    /// OpenFlow `sample` action on a bridge with flow-sample collector
    /// sets: a share of the packets, as they are here, goes to the
    /// sampler off the fast path (`userspace(...)` alone at 100 %).
    Sample(FlowSample),
    /// `tnl_push(tnl_port(P),header(...),out_port(O))`: encapsulate the
    /// packet in the outer headers of a tunnel (native tunnelling).
    TnlPush(TnlPush),
    /// `tnl_pop(P)`: check and strip a received packet's tunnel headers
    /// and look the inner frame up again with the tunnel's metadata in
    /// its key and datapath port P as its in_port (dropped, counted, when
    /// the outer headers are not a well-formed tunnel packet).
    TnlPop {
        /// The tunnel's datapath port.
        port: u32,
        /// Its kind (how the outer headers are read; not printed, as
        /// OVS's datapath knows it from the port).
        kind: flowpath_wire::tunnel::TunnelKind,
        /// The bridge's Geneve option map, by which options become
        /// `tun_metadataN` (not printed).
        tlv: flowpath_wire::tunnel::TlvMap,
    },
}

/// The arguments of a flow-sample datapath action: the probability and
/// OVS's `flow_sample` user-action cookie.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct FlowSample {
    /// Packets sampled out of `u32::MAX` (the OpenFlow probability
    /// scaled: `p << 16 | p`); `u32::MAX`: every packet.
    pub probability: u32,
    /// The OpenFlow action's probability, out of 65535.
    pub of_probability: u16,
    /// `collector_set_id`.
    pub collector_set_id: u32,
    /// `obs_domain_id`.
    pub obs_domain_id: u32,
    /// `obs_point_id`.
    pub obs_point_id: u32,
    /// The datapath port the sample is reported for (`u32::MAX`: none,
    /// the packet's input).
    pub output_port: u32,
    /// 0 (neither), 1 ingress, 2 egress.
    pub direction: u8,
}

impl FlowSample {
    /// The `userspace(...)` action it delivers the packet with.
    fn write_userspace(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "userspace(pid=0,flow_sample(probability={},collector_set_id={},obs_domain_id={},obs_point_id={},output_port={}",
            self.of_probability,
            self.collector_set_id,
            self.obs_domain_id,
            self.obs_point_id,
            self.output_port
        )?;
        match self.direction {
            1 => f.write_str(",ingress")?,
            2 => f.write_str(",egress")?,
            _ => {}
        }
        f.write_str("))")
    }
}

impl fmt::Display for FlowSample {
    /// As OVS prints it: `sample(sample=10.0%,actions(userspace(...)))`,
    /// or the `userspace(...)` action alone when every packet is sampled.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.probability == u32::MAX {
            return self.write_userspace(f);
        }
        let pct = 100.0 * f64::from(self.probability) / f64::from(u32::MAX);
        write!(f, "sample(sample={pct:.1}%,actions(")?;
        self.write_userspace(f)?;
        f.write_str("))")
    }
}

/// The arguments of a datapath `ct` action (OVS's `OVS_CT_ATTR_*`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct CtAction {
    /// The conntrack zone.
    pub zone: u16,
    /// Commit the connection (create its entry).
    pub commit: bool,
    /// `force_commit`: a committed connection seen in the reply direction
    /// is replaced by a new one in this direction.
    pub force: bool,
    /// Set the connection's mark: (value, mask).
    pub mark: Option<(u32, u32)>,
    /// Set the connection's label: (value, mask).
    pub label: Option<(u128, u128)>,
    /// The application-layer gateway the connection uses.
    pub helper: CtHelper,
    /// Network address translation.
    pub nat: Option<CtNat>,
}

/// A `ct` action's ALG (`alg=` in OpenFlow, `helper=` in the datapath).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum CtHelper {
    /// None.
    #[default]
    None,
    /// FTP (port 21).
    Ftp,
    /// TFTP (port 69).
    Tftp,
}

/// What a `nat` does.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum NatKind {
    /// Plain `nat`: apply the translation the connection already has.
    #[default]
    Existing,
    /// `nat(src=...)`.
    Src,
    /// `nat(dst=...)`.
    Dst,
}

/// A `nat(...)`: its kind, address and port ranges and flags, as OVS's
/// `ofpact_nat` (addresses as numbers: IPv4 in the low 32 bits).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct CtNat {
    /// Source, destination or the existing translation.
    pub kind: NatKind,
    /// An address range is given (`src=IP...`).
    pub has_addr: bool,
    /// The range's addresses are IPv6.
    pub v6: bool,
    /// First address of the range.
    pub addr_min: u128,
    /// Last address (0: the same as the first).
    pub addr_max: u128,
    /// First port (0: ports kept).
    pub port_min: u16,
    /// Last port (0: the same as the first).
    pub port_max: u16,
    /// `persistent`.
    pub persistent: bool,
    /// `hash`: ports chosen by a hash.
    pub hash: bool,
    /// `random`: ports chosen at random.
    pub random: bool,
}

impl CtNat {
    /// Writes the range as OVS writes it (`10.0.0.1-10.0.0.9:100-200`,
    /// IPv6 in brackets when ports follow).
    pub fn write_range(&self, out: &mut String) {
        use std::fmt::Write as _;
        if !self.has_addr {
            return;
        }
        let addr = |a: u128| -> String {
            if self.v6 {
                let t = Ipv6Addr::from(a).to_string();
                if self.port_min != 0 {
                    format!("[{t}]")
                } else {
                    t
                }
            } else {
                std::net::Ipv4Addr::from(a as u32).to_string()
            }
        };
        out.push_str(&addr(self.addr_min));
        if self.addr_max != 0 && self.addr_max != self.addr_min {
            let _ = write!(out, "-{}", addr(self.addr_max));
        }
        if self.port_min != 0 {
            let _ = write!(out, ":{}", self.port_min);
            if self.port_max != 0 && self.port_max != self.port_min {
                let _ = write!(out, "-{}", self.port_max);
            }
        }
    }

    /// The `nat` text as OVS's OpenFlow printer writes it: `nat`,
    /// `nat(src)`, `nat(dst=10.0.0.1:80,random)` (flags only with a
    /// range).
    pub fn format(&self) -> String {
        self.format_with(false)
    }

    /// The `nat` text as OVS's datapath printer writes it (flags printed
    /// with or without a range; `hash` wins over `random`, as the
    /// translation emits only one).
    pub fn format_odp(&self) -> String {
        self.format_with(true)
    }

    fn format_with(&self, odp: bool) -> String {
        let mut s = String::from("nat");
        let kind = match self.kind {
            NatKind::Existing => return s,
            NatKind::Src => "src",
            NatKind::Dst => "dst",
        };
        s.push('(');
        s.push_str(kind);
        if self.has_addr {
            s.push('=');
            self.write_range(&mut s);
        }
        if self.has_addr || odp {
            if self.persistent {
                s.push_str(",persistent");
            }
            if self.hash {
                s.push_str(",hash");
            }
            if self.random && !(odp && self.hash) {
                s.push_str(",random");
            }
        }
        s.push(')');
        s
    }
}

/// A 128-bit value as OVS's `ds_put_hex`: `0x` and the digits without
/// leading zeros, `0` for zero.
fn hex128(v: u128) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

impl fmt::Display for CtAction {
    /// As OVS's `format_odp_conntrack_action`: `ct`, or
    /// `ct(commit,zone=1,mark=0x1/0xff,label=0x1/0x1,helper=ftp,nat(...))`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.commit {
            parts.push("commit".into());
        }
        if self.force {
            parts.push("force_commit".into());
        }
        if self.zone != 0 {
            parts.push(format!("zone={}", self.zone));
        }
        if let Some((v, m)) = self.mark {
            // (C's `%#x`, as OVS prints it: `0` for zero.)
            parts.push(format!(
                "mark={}/{}",
                hex128(u128::from(v)),
                hex128(u128::from(m))
            ));
        }
        if let Some((v, m)) = self.label {
            if m == u128::MAX {
                parts.push(format!("label={}", hex128(v)));
            } else {
                parts.push(format!("label={}/{}", hex128(v), hex128(m)));
            }
        }
        match self.helper {
            CtHelper::None => {}
            CtHelper::Ftp => parts.push("helper=ftp".into()),
            CtHelper::Tftp => parts.push("helper=tftp".into()),
        }
        if let Some(n) = &self.nat {
            parts.push(n.format_odp());
        }
        if parts.is_empty() {
            write!(f, "ct")
        } else {
            write!(f, "ct({})", parts.join(","))
        }
    }
}

impl DpAction {
    /// A packet-in for reason "action", to every controller, the whole
    /// packet, from a rule with cookie 0.
    pub const CONTROLLER: DpAction = DpAction::Controller {
        reason: 1,
        id: 0,
        max_len: u16::MAX,
        cookie: 0,
        table: 0,
        userdata: 0,
        cont: 0,
    };

    /// The flat length of the action that starts a list (1, or for a
    /// `CheckPktLen` 1 plus both branches).
    pub fn flat_len(&self) -> usize {
        match self {
            DpAction::CheckPktLen { gt, le, .. } => 1 + usize::from(*gt) + usize::from(*le),
            DpAction::Clone { len } => 1 + usize::from(*len),
            _ => 1,
        }
    }
}

/// A megaflow's action list. Empty means drop.
pub type DpActions = Vec<DpAction>;

fn fmt_set(
    f: &mut fmt::Formatter<'_>,
    header: SetHeader,
    key: &FlowKey,
    mask: &FlowMask,
) -> fmt::Result {
    let mk = mask.to_key();
    let mut parts: Vec<String> = Vec::new();
    let name = match header {
        SetHeader::Eth => {
            push_mac(&mut parts, "src", key.dl_src(), mk.dl_src());
            push_mac(&mut parts, "dst", key.dl_dst(), mk.dl_dst());
            "eth"
        }
        SetHeader::Ipv4 => {
            push_ipv4(&mut parts, "src", key.nw_src(), mk.nw_src());
            push_ipv4(&mut parts, "dst", key.nw_dst(), mk.nw_dst());
            push_u8(&mut parts, "tos", key.nw_tos(), mk.nw_tos(), true);
            push_u8(&mut parts, "ttl", key.nw_ttl(), mk.nw_ttl(), false);
            "ipv4"
        }
        SetHeader::Ipv6 => {
            let mut ip = |name: &str, v: u128, m: u128| {
                if m == u128::MAX {
                    parts.push(format!("{name}={}", Ipv6Addr::from(v)));
                } else if m != 0 {
                    parts.push(format!(
                        "{name}={}/{}",
                        Ipv6Addr::from(v),
                        Ipv6Addr::from(m)
                    ));
                }
            };
            ip("src", key.ipv6_src(), mk.ipv6_src());
            ip("dst", key.ipv6_dst(), mk.ipv6_dst());
            let (l, lm) = (key.ipv6_label(), mk.ipv6_label());
            if lm == 0xfffff {
                parts.push(format!("label={l:#x}"));
            } else if lm != 0 {
                parts.push(format!("label={l:#x}/{lm:#x}"));
            }
            push_u8(&mut parts, "tclass", key.nw_tos(), mk.nw_tos(), true);
            push_u8(&mut parts, "hlimit", key.nw_ttl(), mk.nw_ttl(), false);
            "ipv6"
        }
        SetHeader::Tcp | SetHeader::Udp | SetHeader::Sctp => {
            for (n, v, m) in [
                ("src", key.tp_src(), mk.tp_src()),
                ("dst", key.tp_dst(), mk.tp_dst()),
            ] {
                if m == 0xffff {
                    parts.push(format!("{n}={v}"));
                } else if m != 0 {
                    parts.push(format!("{n}={v}/{m:#x}"));
                }
            }
            match header {
                SetHeader::Tcp => "tcp",
                SetHeader::Udp => "udp",
                _ => "sctp",
            }
        }
        SetHeader::Arp => {
            push_ipv4(&mut parts, "sip", key.nw_src(), mk.nw_src());
            push_ipv4(&mut parts, "tip", key.nw_dst(), mk.nw_dst());
            push_u8(&mut parts, "op", key.nw_proto(), mk.nw_proto(), false);
            push_mac(&mut parts, "sha", key.arp_sha(), mk.arp_sha());
            push_mac(&mut parts, "tha", key.arp_tha(), mk.arp_tha());
            "arp"
        }
        SetHeader::Icmp | SetHeader::Icmpv6 => {
            push_u8(
                &mut parts,
                "type",
                key.tp_src() as u8,
                mk.tp_src() as u8,
                false,
            );
            push_u8(
                &mut parts,
                "code",
                key.tp_dst() as u8,
                mk.tp_dst() as u8,
                false,
            );
            if header == SetHeader::Icmp {
                "icmp"
            } else {
                "icmpv6"
            }
        }
        SetHeader::Nd => {
            let (t, tm) = (key.nd_target(), mk.nd_target());
            if tm == u128::MAX {
                parts.push(format!("target={}", Ipv6Addr::from(t)));
            } else if tm != 0 {
                parts.push(format!(
                    "target={}/{}",
                    Ipv6Addr::from(t),
                    Ipv6Addr::from(tm)
                ));
            }
            push_mac(&mut parts, "sll", key.arp_sha(), mk.arp_sha());
            push_mac(&mut parts, "tll", key.arp_tha(), mk.arp_tha());
            "nd"
        }
        SetHeader::NdExt => {
            // As OVS: the reserved word always (hex), the option type
            // under its mask.
            parts.push(format!("nd_reserved={:#x}", key.nd_reserved()));
            let f = FieldId::NdOptionsType.info();
            let (v, m) = (f.get(key) as u8, f.get(&mk) as u8);
            push_u8(&mut parts, "nd_options_type", v, m, false);
            "nd_ext"
        }
    };
    write!(f, "set({name}({}))", parts.join(","))
}

fn push_ipv4(parts: &mut Vec<String>, name: &str, v: u32, m: u32) {
    if m == u32::MAX {
        parts.push(format!("{name}={}", Ipv4Addr::from(v)));
    } else if m != 0 {
        parts.push(format!(
            "{name}={}/{}",
            Ipv4Addr::from(v),
            Ipv4Addr::from(m)
        ));
    }
}

fn push_mac(parts: &mut Vec<String>, name: &str, v: u64, m: u64) {
    if m == 0xffff_ffff_ffff {
        parts.push(format!("{name}={}", format_mac(v)));
    } else if m != 0 {
        parts.push(format!("{name}={}/{}", format_mac(v), format_mac(m)));
    }
}

fn push_u8(parts: &mut Vec<String>, name: &str, v: u8, m: u8, hex: bool) {
    // (As OVS's `%#x`: 0 is "0", not "0x0".)
    let x = if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    };
    match (m, hex) {
        (0, _) => {}
        (0xff, true) => parts.push(format!("{name}={x}")),
        (0xff, false) => parts.push(format!("{name}={v}")),
        (_, true) => parts.push(format!("{name}={x}/{m:#x}")),
        (_, false) => parts.push(format!("{name}={v}/{m:#x}")),
    }
}

/// An MPLS label stack entry as OVS prints it (`label=L,tc=T,ttl=N,bos=B`).
struct Lse(u32);

impl fmt::Display for Lse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        write!(
            f,
            "label={},tc={},ttl={},bos={}",
            x >> 12,
            (x >> 9) & 7,
            x & 0xff,
            (x >> 8) & 1
        )
    }
}

impl fmt::Display for DpAction {
    /// One action; a `CheckPktLen` or `Clone` prints its header only
    /// (`check_pkt_len(size=N,gt:G,le:L)`, `clone(len:N)`):
    /// [`format_actions`] prints what they hold.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DpAction::CheckPktLen { size, gt, le } => {
                write!(f, "check_pkt_len(size={size},gt:{gt},le:{le})")
            }
            DpAction::Clone { len } => write!(f, "clone(len:{len})"),
            DpAction::Output(p) => write!(f, "{p}"),
            DpAction::TnlPush(t) => write!(f, "{t}"),
            DpAction::TnlPop { port, .. } => write!(f, "tnl_pop({port})"),
            DpAction::Set { header, key, mask } => fmt_set(f, *header, key, mask),
            DpAction::PushVlan { tpid, tci } => {
                let vid = tci & 0x0fff;
                let pcp = tci >> 13;
                if *tpid == 0x8100 {
                    write!(f, "push_vlan(vid={vid},pcp={pcp})")
                } else {
                    write!(f, "push_vlan(tpid={tpid:#x},vid={vid},pcp={pcp})")
                }
            }
            DpAction::PopVlan => write!(f, "pop_vlan"),
            DpAction::PushMpls { ethertype, lse } => {
                write!(f, "push_mpls({},eth_type={ethertype:#x})", Lse(*lse))
            }
            DpAction::PopMpls(t) => write!(f, "pop_mpls(eth_type={t:#x})"),
            DpAction::SetMpls(lse) => write!(f, "set(mpls({}))", Lse(*lse)),
            DpAction::Controller {
                reason,
                id,
                max_len,
                cookie,
                cont,
                ..
            } => {
                // (C's %#x: 0 without the prefix; no rule's cookie is 0.)
                let cookie = if *cookie == 0 || *cookie == u64::MAX {
                    "0".to_string()
                } else {
                    format!("{cookie:#x}")
                };
                // A paused one names its frozen state as OVS's does.
                let cont = if *cont == 0 {
                    String::new()
                } else {
                    format!("continuation=1,recirc_id={cont},")
                };
                write!(
                    f,
                    "userspace(controller(reason={reason},{cont}rule_cookie={cookie},controller_id={id},max_len={max_len}))"
                )
            }
            DpAction::Hash { symmetric, basis } => {
                let alg = if *symmetric { "sym_l4" } else { "l4" };
                write!(f, "hash({alg}({basis}))")
            }
            DpAction::Recirc(id) => write!(f, "recirc({id:#x})"),
            DpAction::Ct(ct) => write!(f, "{ct}"),
            DpAction::CtClear => write!(f, "ct_clear"),
            DpAction::Sample(fs) => write!(f, "{fs}"),
            DpAction::Trunc(n) => write!(f, "trunc({n})"),
            DpAction::SetPriority(0) => write!(f, "set(skb_priority(0))"),
            DpAction::SetPriority(n) => write!(f, "set(skb_priority({n:#x}))"),
            DpAction::SetMark { value, mask } => {
                let v = if *value == 0 {
                    "0".to_string()
                } else {
                    format!("{value:#x}")
                };
                if *mask == u32::MAX {
                    write!(f, "set(skb_mark({v}))")
                } else {
                    write!(f, "set(skb_mark({v}/{mask:#x}))")
                }
            }
        }
    }
}

/// Prints an action list as OVS prints datapath actions (`drop` if empty).
/// `check_pkt_len` prints its branches nested, as OVS does
/// (`check_pkt_len(size=100,gt(2),le(drop))`).
pub fn format_actions(actions: &[DpAction]) -> String {
    let mut out = String::new();
    write_actions(&mut out, actions);
    out
}

fn write_actions(out: &mut String, actions: &[DpAction]) {
    use std::fmt::Write as _;
    if actions.is_empty() {
        out.push_str("drop");
        return;
    }
    let mut i = 0;
    while let Some(a) = actions.get(i) {
        if i > 0 {
            out.push(',');
        }
        match *a {
            DpAction::CheckPktLen { size, gt, le } => {
                let (gt, le) = (usize::from(gt), usize::from(le));
                // A list cut short (never made by translation) prints what
                // it has.
                let g = actions.get(i + 1..i + 1 + gt).unwrap_or(&[]);
                let l = actions.get(i + 1 + gt..i + 1 + gt + le).unwrap_or(&[]);
                let _ = write!(out, "check_pkt_len(size={size},gt(");
                write_actions(out, g);
                out.push_str("),le(");
                write_actions(out, l);
                out.push_str("))");
            }
            DpAction::Clone { len } => {
                let body = actions.get(i + 1..i + 1 + usize::from(len)).unwrap_or(&[]);
                out.push_str("clone(");
                write_actions(out, body);
                out.push(')');
            }
            _ => {
                let _ = write!(out, "{a}");
            }
        }
        i += a.flat_len();
    }
}

/// The header a rewritable field belongs to, given the packet's protocol.
pub fn set_header_for(field: FieldId, key: &FlowKey) -> Option<SetHeader> {
    use FieldId::*;
    Some(match field {
        EthSrc | EthDst => SetHeader::Eth,
        NwSrc | NwDst if key.is_ipv4() => SetHeader::Ipv4,
        NwTos | IpDscp | NwEcn | NwTtl if key.is_ipv4() => SetHeader::Ipv4,
        NwTos | IpDscp | NwEcn | NwTtl | Ipv6Src | Ipv6Dst | Ipv6Label if key.is_ipv6() => {
            SetHeader::Ipv6
        }
        TpSrc | TpDst | TcpSrc | TcpDst | UdpSrc | UdpDst | SctpSrc | SctpDst
            if key.is_ip_any() =>
        {
            match key.nw_proto() {
                6 => SetHeader::Tcp,
                17 => SetHeader::Udp,
                132 => SetHeader::Sctp,
                _ => return None,
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_ovs() {
        assert_eq!(format_actions(&[]), "drop");
        assert_eq!(
            format_actions(&[DpAction::Output(2), DpAction::Output(3)]),
            "2,3"
        );
        let mut key = FlowKey::zero();
        let mut mask = FlowMask::catchall();
        key.set_nw_ttl(63);
        let mut mk = mask.to_key();
        mk.set_nw_ttl(0xff);
        mask = FlowMask::from_key(&mk);
        let a = DpAction::Set {
            header: SetHeader::Ipv4,
            key,
            mask,
        };
        assert_eq!(a.to_string(), "set(ipv4(ttl=63))");
        assert_eq!(
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 10
            }
            .to_string(),
            "push_vlan(vid=10,pcp=0)"
        );
    }

    #[test]
    fn mpls_actions_print_like_ovs() {
        let lse = (16 << 12) | (2 << 9) | (1 << 8) | 64;
        assert_eq!(
            DpAction::PushMpls {
                ethertype: 0x8847,
                lse
            }
            .to_string(),
            "push_mpls(label=16,tc=2,ttl=64,bos=1,eth_type=0x8847)"
        );
        assert_eq!(
            DpAction::PopMpls(0x800).to_string(),
            "pop_mpls(eth_type=0x800)"
        );
        assert_eq!(
            DpAction::SetMpls(lse).to_string(),
            "set(mpls(label=16,tc=2,ttl=64,bos=1))"
        );
    }

    #[test]
    fn check_pkt_len_prints_its_branches_nested() {
        let c = |size, gt, le| DpAction::CheckPktLen { size, gt, le };
        let o = DpAction::Output;
        assert_eq!(
            format_actions(&[c(100, 0, 0)]),
            "check_pkt_len(size=100,gt(drop),le(drop))"
        );
        // OVS 3.1's line for two nested checks.
        let nested = [
            c(100, 2, 3),
            c(300, 0, 1),
            o(1),
            c(300, 1, 1),
            o(3),
            o(4),
            o(9),
        ];
        assert_eq!(
            format_actions(&nested),
            "check_pkt_len(size=100,gt(check_pkt_len(size=300,gt(drop),le(1))),\
             le(check_pkt_len(size=300,gt(3),le(4)))),9"
        );
    }
}
