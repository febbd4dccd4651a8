//! The field registry: every match field flowpath knows, by its OVS name.
//!
//! One table ([`FIELDS`]) says, for each field, its names (canonical first,
//! then aliases), where it lives in a [`FlowKey`], its width,
//! its prerequisites and how its values are written. The rule parser, the
//! `set_field` action, the megaflow printer and the tests all go through this
//! table, so a field is added in one place.
//!
//! Values are carried as `u128` right-aligned in the field's own units (an
//! IPv4 address is a `u32` number, `nw_tos` is the DSCP byte value such as
//! 0x20, `dl_vlan` is the 12-bit VID). [`FieldInfo::set`] and [`FieldInfo::or_mask`]
//! write a field value/mask into key bits.

use crate::key::{
    FlowKey, FlowMask, Regs, VLAN_CFI, W_ARP_SHA, W_ARP_THA, W_CONJ_ID, W_IPV6_DST, W_IPV6_MISC,
    W_IPV6_SRC, W_L2_DST, W_L2_SRC, W_META, W_META2, W_METADATA, W_MPLS, W_ND_TARGET, W_NW, W_TP,
    W_TUN_ID,
};

/// Identifies a registry field.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum FieldId {
    InPort,
    EthSrc,
    EthDst,
    EthType,
    VlanTci,
    DlVlan,
    DlVlanPcp,
    NwSrc,
    NwDst,
    NwProto,
    NwTos,
    IpDscp,
    NwEcn,
    NwTtl,
    NwFrag,
    TpSrc,
    TpDst,
    TcpSrc,
    TcpDst,
    UdpSrc,
    UdpDst,
    SctpSrc,
    SctpDst,
    TcpFlags,
    IcmpType,
    IcmpCode,
    Icmpv6Type,
    Icmpv6Code,
    ArpOp,
    ArpSpa,
    ArpTpa,
    ArpSha,
    ArpTha,
    Ipv6Src,
    Ipv6Dst,
    Ipv6Label,
    NdTarget,
    NdSll,
    NdTll,
    VlanTci1,
    PktMark,
    Metadata,
    Reg0,
    Reg1,
    Reg2,
    Reg3,
    Reg4,
    Reg5,
    Reg6,
    Reg7,
    Reg8,
    Reg9,
    Reg10,
    Reg11,
    Reg12,
    Reg13,
    Reg14,
    Reg15,
    Xreg0,
    Xreg1,
    Xreg2,
    Xreg3,
    Xreg4,
    Xreg5,
    Xreg6,
    Xreg7,
    Xxreg0,
    Xxreg1,
    Xxreg2,
    Xxreg3,
    ConjId,
    TunId,
    MplsLabel,
    MplsTc,
    MplsBos,
    MplsTtl,
}

/// Where a field's bits live in the key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Storage {
    /// `bits` bits starting at bit `shift` of word `word`.
    Bits {
        /// Word index.
        word: u8,
        /// Lowest bit.
        shift: u8,
        /// Width in bits (1..=48 here).
        bits: u8,
    },
    /// A 128-bit value in words `word` (high) and `word + 1` (low).
    Wide {
        /// First word.
        word: u8,
    },
    /// `bits` bits starting at bit `shift` of word `word` of the
    /// registers ([`Regs`]), not of the key.
    Reg {
        /// Word index in [`Regs`].
        word: u8,
        /// Lowest bit.
        shift: u8,
        /// Width in bits (32 or 64).
        bits: u8,
    },
    /// A 128-bit register (`xxreg`) in register words `word` (high) and
    /// `word + 1` (low).
    RegWide {
        /// First word.
        word: u8,
    },
}

/// How a field's values are written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ValueFormat {
    /// Decimal when exact, `0x..`/`0x..` when masked.
    Int,
    /// Always hexadecimal (`dl_type=0x0800`, `vlan_tci=0x1005`), `digits` wide.
    Hex {
        /// Zero-padded digit count.
        digits: u8,
    },
    /// Dotted quad, CIDR or dotted mask.
    Ipv4,
    /// RFC 5952 text, prefix length or address mask.
    Ipv6,
    /// `xx:xx:xx:xx:xx:xx`, optional `/mask`.
    Mac,
    /// `no`, `yes`, `first`, `later`, `not_later`.
    Frag,
    /// `+syn-ack` or numeric.
    TcpFlags,
    /// Hexadecimal without padding, `0` for zero (`reg0=0x5`, `pkt_mark=0/0xf`).
    HexInt,
}

/// Which Ethernet types a field needs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EthReq {
    /// No requirement.
    Any,
    /// IPv4 or IPv6.
    Ip,
    /// IPv4 only.
    Ipv4,
    /// IPv6 only.
    Ipv6,
    /// ARP or RARP.
    Arp,
    /// MPLS, unicast or multicast (0x8847, 0x8848).
    Mpls,
}

/// Which IP protocols a field needs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ProtoReq {
    /// No requirement.
    Any,
    /// TCP, UDP or SCTP.
    L4,
    /// Exactly this protocol.
    One(u8),
}

/// A field's prerequisites: the dl_type / nw_proto (and ICMPv6 type) a
/// packet must have for the field to mean anything.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Prereq {
    /// Ethernet type requirement.
    pub eth: EthReq,
    /// IP protocol requirement.
    pub proto: ProtoReq,
    /// ICMPv6 types allowed (ND fields), empty = any.
    pub icmp6_types: &'static [u8],
}

impl Prereq {
    const NONE: Prereq = Prereq {
        eth: EthReq::Any,
        proto: ProtoReq::Any,
        icmp6_types: &[],
    };
    const fn eth(eth: EthReq) -> Prereq {
        Prereq {
            eth,
            proto: ProtoReq::Any,
            icmp6_types: &[],
        }
    }
    const fn proto(eth: EthReq, proto: ProtoReq) -> Prereq {
        Prereq {
            eth,
            proto,
            icmp6_types: &[],
        }
    }

    /// True when the packet `key` satisfies these prerequisites.
    pub fn ok_for(&self, key: &FlowKey) -> bool {
        let t = key.dl_type();
        let eth_ok = match self.eth {
            EthReq::Any => true,
            EthReq::Ip => t == 0x0800 || t == 0x86dd,
            EthReq::Ipv4 => t == 0x0800,
            EthReq::Ipv6 => t == 0x86dd,
            EthReq::Arp => t == 0x0806 || t == 0x8035,
            EthReq::Mpls => t == 0x8847 || t == 0x8848,
        };
        let proto_ok = match self.proto {
            ProtoReq::Any => true,
            ProtoReq::L4 => matches!(key.nw_proto(), 6 | 17 | 132),
            ProtoReq::One(p) => key.nw_proto() == p,
        };
        let icmp6_ok = self.icmp6_types.is_empty()
            || (key.tp_src() < 256 && self.icmp6_types.contains(&(key.tp_src() as u8)));
        eth_ok && proto_ok && icmp6_ok
    }

    /// Human text for error messages, e.g. "ip,tcp" or "ipv6,icmp6 type 135".
    pub fn describe(&self) -> String {
        let mut s = String::from(match self.eth {
            EthReq::Any => "",
            EthReq::Ip => "ip or ipv6",
            EthReq::Ipv4 => "ip",
            EthReq::Ipv6 => "ipv6",
            EthReq::Arp => "arp",
            EthReq::Mpls => "mpls or mplsm",
        });
        match self.proto {
            ProtoReq::Any => {}
            ProtoReq::L4 => s.push_str(" with tcp, udp or sctp"),
            ProtoReq::One(p) => s.push_str(&format!(" with nw_proto={p}")),
        }
        if !self.icmp6_types.is_empty() {
            s.push_str(&format!(" and icmp_type in {:?}", self.icmp6_types));
        }
        s
    }
}

/// One registry entry.
#[derive(Clone, Copy, Debug)]
pub struct FieldInfo {
    /// Which field.
    pub id: FieldId,
    /// Canonical name (as printed).
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// Width of a value in bits.
    pub bits: u8,
    /// Where the value's bits live.
    pub storage: Storage,
    /// Value `v` of the field is stored as `v >> unit_shift` (nw_tos: 2).
    pub unit_shift: u8,
    /// How values are parsed and printed.
    pub format: ValueFormat,
    /// Prerequisites.
    pub prereq: Prereq,
    /// Whether `set_field` may write it.
    pub writable: bool,
    /// Whether a mask may be given (`value/mask`).
    pub maskable: bool,
}

const fn bits(word: usize, shift: u8, bits: u8) -> Storage {
    Storage::Bits {
        word: word as u8,
        shift,
        bits,
    }
}

const fn wide(word: usize) -> Storage {
    Storage::Wide { word: word as u8 }
}

#[allow(clippy::too_many_arguments)]
const fn f(
    id: FieldId,
    name: &'static str,
    aliases: &'static [&'static str],
    nbits: u8,
    storage: Storage,
    format: ValueFormat,
    prereq: Prereq,
    writable: bool,
    maskable: bool,
) -> FieldInfo {
    FieldInfo {
        id,
        name,
        aliases,
        bits: nbits,
        storage,
        unit_shift: 0,
        format,
        prereq,
        writable,
        maskable,
    }
}

/// A register field: `bits` bits at `shift` of register word `word`.
const fn reg(id: FieldId, name: &'static str, word: u8, shift: u8, nbits: u8) -> FieldInfo {
    f(
        id,
        name,
        &[],
        nbits,
        Storage::Reg {
            word,
            shift,
            bits: nbits,
        },
        ValueFormat::HexInt,
        Prereq::NONE,
        true,
        true,
    )
}

/// A 128-bit register (`xxreg`) in register words `word` and `word + 1`.
const fn xxreg(id: FieldId, name: &'static str, word: u8) -> FieldInfo {
    f(
        id,
        name,
        &[],
        128,
        Storage::RegWide { word },
        ValueFormat::HexInt,
        Prereq::NONE,
        true,
        true,
    )
}

use EthReq as E;
use FieldId as F;
use ProtoReq as P;
use ValueFormat as V;

const TCP: Prereq = Prereq::proto(E::Ip, P::One(6));
const UDP: Prereq = Prereq::proto(E::Ip, P::One(17));
const SCTP: Prereq = Prereq::proto(E::Ip, P::One(132));
const ICMP: Prereq = Prereq::proto(E::Ipv4, P::One(1));
const ICMP6: Prereq = Prereq::proto(E::Ipv6, P::One(58));

/// The registry, in the order fields are printed by the canonical printer
/// where that order is not decided by [`Match::format`](crate::Match::format).
pub static FIELDS: &[FieldInfo] = &[
    f(
        F::InPort,
        "in_port",
        &[],
        16,
        bits(W_META, 0, 16),
        V::Int,
        Prereq::NONE,
        true,
        false,
    ),
    f(
        F::EthSrc,
        "dl_src",
        &["eth_src"],
        48,
        bits(W_L2_SRC, 0, 48),
        V::Mac,
        Prereq::NONE,
        true,
        true,
    ),
    f(
        F::EthDst,
        "dl_dst",
        &["eth_dst"],
        48,
        bits(W_L2_DST, 0, 48),
        V::Mac,
        Prereq::NONE,
        true,
        true,
    ),
    f(
        F::EthType,
        "dl_type",
        &["eth_type"],
        16,
        bits(W_META, 32, 16),
        V::Hex { digits: 4 },
        Prereq::NONE,
        false,
        false,
    ),
    f(
        F::VlanTci,
        "vlan_tci",
        &[],
        16,
        bits(W_L2_DST, 48, 16),
        V::Hex { digits: 4 },
        Prereq::NONE,
        true,
        true,
    ),
    f(
        F::DlVlan,
        "dl_vlan",
        &["vlan_vid"],
        12,
        bits(W_L2_DST, 48, 12),
        V::Int,
        Prereq::NONE,
        true,
        false,
    ),
    f(
        F::DlVlanPcp,
        "dl_vlan_pcp",
        &["vlan_pcp"],
        3,
        bits(W_L2_DST, 61, 3),
        V::Int,
        Prereq::NONE,
        true,
        false,
    ),
    f(
        F::NwSrc,
        "nw_src",
        &["ip_src"],
        32,
        bits(W_NW, 0, 32),
        V::Ipv4,
        Prereq::eth(E::Ipv4),
        true,
        true,
    ),
    f(
        F::NwDst,
        "nw_dst",
        &["ip_dst"],
        32,
        bits(W_NW, 32, 32),
        V::Ipv4,
        Prereq::eth(E::Ipv4),
        true,
        true,
    ),
    f(
        F::NwProto,
        "nw_proto",
        &["ip_proto"],
        8,
        bits(W_META, 48, 8),
        V::Int,
        Prereq::eth(E::Ip),
        false,
        false,
    ),
    FieldInfo {
        unit_shift: 2,
        ..f(
            F::NwTos,
            "nw_tos",
            &[],
            6,
            bits(W_TP, 50, 6),
            V::Int,
            Prereq::eth(E::Ip),
            true,
            false,
        )
    },
    f(
        F::IpDscp,
        "ip_dscp",
        &[],
        6,
        bits(W_TP, 50, 6),
        V::Int,
        Prereq::eth(E::Ip),
        true,
        false,
    ),
    f(
        F::NwEcn,
        "nw_ecn",
        &["ip_ecn"],
        2,
        bits(W_TP, 48, 2),
        V::Int,
        Prereq::eth(E::Ip),
        true,
        false,
    ),
    f(
        F::NwTtl,
        "nw_ttl",
        &[],
        8,
        bits(W_TP, 56, 8),
        V::Int,
        Prereq::eth(E::Ip),
        true,
        false,
    ),
    f(
        F::NwFrag,
        "nw_frag",
        &["ip_frag"],
        2,
        bits(W_META, 56, 2),
        V::Frag,
        Prereq::eth(E::Ip),
        false,
        true,
    ),
    f(
        F::TpSrc,
        "tp_src",
        &[],
        16,
        bits(W_TP, 0, 16),
        V::Int,
        Prereq::proto(E::Ip, P::L4),
        true,
        true,
    ),
    f(
        F::TpDst,
        "tp_dst",
        &[],
        16,
        bits(W_TP, 16, 16),
        V::Int,
        Prereq::proto(E::Ip, P::L4),
        true,
        true,
    ),
    f(
        F::TcpSrc,
        "tcp_src",
        &[],
        16,
        bits(W_TP, 0, 16),
        V::Int,
        TCP,
        true,
        true,
    ),
    f(
        F::TcpDst,
        "tcp_dst",
        &[],
        16,
        bits(W_TP, 16, 16),
        V::Int,
        TCP,
        true,
        true,
    ),
    f(
        F::UdpSrc,
        "udp_src",
        &[],
        16,
        bits(W_TP, 0, 16),
        V::Int,
        UDP,
        true,
        true,
    ),
    f(
        F::UdpDst,
        "udp_dst",
        &[],
        16,
        bits(W_TP, 16, 16),
        V::Int,
        UDP,
        true,
        true,
    ),
    f(
        F::SctpSrc,
        "sctp_src",
        &[],
        16,
        bits(W_TP, 0, 16),
        V::Int,
        SCTP,
        true,
        true,
    ),
    f(
        F::SctpDst,
        "sctp_dst",
        &[],
        16,
        bits(W_TP, 16, 16),
        V::Int,
        SCTP,
        true,
        true,
    ),
    f(
        F::TcpFlags,
        "tcp_flags",
        &[],
        12,
        bits(W_TP, 32, 12),
        V::TcpFlags,
        TCP,
        false,
        true,
    ),
    f(
        F::IcmpType,
        "icmp_type",
        &[],
        8,
        bits(W_TP, 0, 8),
        V::Int,
        ICMP,
        false,
        false,
    ),
    f(
        F::IcmpCode,
        "icmp_code",
        &[],
        8,
        bits(W_TP, 16, 8),
        V::Int,
        ICMP,
        false,
        false,
    ),
    f(
        F::Icmpv6Type,
        "icmpv6_type",
        &[],
        8,
        bits(W_TP, 0, 8),
        V::Int,
        ICMP6,
        false,
        false,
    ),
    f(
        F::Icmpv6Code,
        "icmpv6_code",
        &[],
        8,
        bits(W_TP, 16, 8),
        V::Int,
        ICMP6,
        false,
        false,
    ),
    f(
        F::ArpOp,
        "arp_op",
        &[],
        8,
        bits(W_META, 48, 8),
        V::Int,
        Prereq::eth(E::Arp),
        false,
        false,
    ),
    f(
        F::ArpSpa,
        "arp_spa",
        &[],
        32,
        bits(W_NW, 0, 32),
        V::Ipv4,
        Prereq::eth(E::Arp),
        false,
        true,
    ),
    f(
        F::ArpTpa,
        "arp_tpa",
        &[],
        32,
        bits(W_NW, 32, 32),
        V::Ipv4,
        Prereq::eth(E::Arp),
        false,
        true,
    ),
    f(
        F::ArpSha,
        "arp_sha",
        &[],
        48,
        bits(W_ARP_SHA, 0, 48),
        V::Mac,
        Prereq::eth(E::Arp),
        false,
        true,
    ),
    f(
        F::ArpTha,
        "arp_tha",
        &[],
        48,
        bits(W_ARP_THA, 0, 48),
        V::Mac,
        Prereq::eth(E::Arp),
        false,
        true,
    ),
    f(
        F::Ipv6Src,
        "ipv6_src",
        &[],
        128,
        wide(W_IPV6_SRC),
        V::Ipv6,
        Prereq::eth(E::Ipv6),
        true,
        true,
    ),
    f(
        F::Ipv6Dst,
        "ipv6_dst",
        &[],
        128,
        wide(W_IPV6_DST),
        V::Ipv6,
        Prereq::eth(E::Ipv6),
        true,
        true,
    ),
    f(
        F::Ipv6Label,
        "ipv6_label",
        &[],
        20,
        bits(W_IPV6_MISC, 0, 20),
        V::Hex { digits: 5 },
        Prereq::eth(E::Ipv6),
        true,
        true,
    ),
    FieldInfo {
        prereq: Prereq {
            eth: E::Ipv6,
            proto: P::One(58),
            icmp6_types: &[135, 136],
        },
        ..f(
            F::NdTarget,
            "nd_target",
            &[],
            128,
            wide(W_ND_TARGET),
            V::Ipv6,
            ICMP6,
            false,
            true,
        )
    },
    FieldInfo {
        prereq: Prereq {
            eth: E::Ipv6,
            proto: P::One(58),
            icmp6_types: &[135],
        },
        ..f(
            F::NdSll,
            "nd_sll",
            &[],
            48,
            bits(W_ARP_SHA, 0, 48),
            V::Mac,
            ICMP6,
            false,
            true,
        )
    },
    FieldInfo {
        prereq: Prereq {
            eth: E::Ipv6,
            proto: P::One(58),
            icmp6_types: &[136],
        },
        ..f(
            F::NdTll,
            "nd_tll",
            &[],
            48,
            bits(W_ARP_THA, 0, 48),
            V::Mac,
            ICMP6,
            false,
            true,
        )
    },
    // The second (inner) 802.1Q tag's TCI, as OVS prints it in trace
    // flows (`vlan_tci1=0x0000`); CFI bit = tag present.
    f(
        F::VlanTci1,
        "vlan_tci1",
        &[],
        16,
        bits(W_L2_SRC, 48, 16),
        V::Hex { digits: 4 },
        Prereq::NONE,
        false,
        true,
    ),
    // Pipeline metadata: the packet mark (datapath metadata, in the key)
    // and the registers and `metadata` (translation state, in [`Regs`]).
    f(
        F::PktMark,
        "pkt_mark",
        &[],
        32,
        bits(W_META2, 32, 32),
        V::HexInt,
        Prereq::NONE,
        true,
        true,
    ),
    reg(F::Metadata, "metadata", W_METADATA as u8, 0, 64),
    reg(F::Reg0, "reg0", 0, 32, 32),
    reg(F::Reg1, "reg1", 0, 0, 32),
    reg(F::Reg2, "reg2", 1, 32, 32),
    reg(F::Reg3, "reg3", 1, 0, 32),
    reg(F::Reg4, "reg4", 2, 32, 32),
    reg(F::Reg5, "reg5", 2, 0, 32),
    reg(F::Reg6, "reg6", 3, 32, 32),
    reg(F::Reg7, "reg7", 3, 0, 32),
    reg(F::Reg8, "reg8", 4, 32, 32),
    reg(F::Reg9, "reg9", 4, 0, 32),
    reg(F::Reg10, "reg10", 5, 32, 32),
    reg(F::Reg11, "reg11", 5, 0, 32),
    reg(F::Reg12, "reg12", 6, 32, 32),
    reg(F::Reg13, "reg13", 6, 0, 32),
    reg(F::Reg14, "reg14", 7, 32, 32),
    reg(F::Reg15, "reg15", 7, 0, 32),
    reg(F::Xreg0, "xreg0", 0, 0, 64),
    reg(F::Xreg1, "xreg1", 1, 0, 64),
    reg(F::Xreg2, "xreg2", 2, 0, 64),
    reg(F::Xreg3, "xreg3", 3, 0, 64),
    reg(F::Xreg4, "xreg4", 4, 0, 64),
    reg(F::Xreg5, "xreg5", 5, 0, 64),
    reg(F::Xreg6, "xreg6", 6, 0, 64),
    reg(F::Xreg7, "xreg7", 7, 0, 64),
    xxreg(F::Xxreg0, "xxreg0", 0),
    xxreg(F::Xxreg1, "xxreg1", 2),
    xxreg(F::Xxreg2, "xxreg2", 4),
    xxreg(F::Xxreg3, "xxreg3", 6),
    // The conjunctive match's id (set by the classifier, matched by the
    // `conj_id=N` flow; not writable, no mask).
    FieldInfo {
        format: V::Int,
        writable: false,
        maskable: false,
        ..reg(F::ConjId, "conj_id", W_CONJ_ID as u8, 0, 32)
    },
    // The tunnel id: 0 on every packet (flowpath has no tunnel ports) and,
    // as OVS's tunnel metadata of a packet that came in on no tunnel,
    // never in a megaflow; what the actions write there goes nowhere (no
    // output encapsulates). Translation state, like a register.
    FieldInfo {
        aliases: &["tunnel_id"],
        ..reg(F::TunId, "tun_id", W_TUN_ID as u8, 0, 64)
    },
    // The top MPLS label stack entry's fields (OVS: not maskable; label,
    // tc and ttl writable, bos read-only).
    f(
        F::MplsLabel,
        "mpls_label",
        &[],
        20,
        bits(W_MPLS, 12, 20),
        V::Int,
        Prereq::eth(E::Mpls),
        true,
        false,
    ),
    f(
        F::MplsTc,
        "mpls_tc",
        &[],
        3,
        bits(W_MPLS, 9, 3),
        V::Int,
        Prereq::eth(E::Mpls),
        true,
        false,
    ),
    f(
        F::MplsBos,
        "mpls_bos",
        &[],
        1,
        bits(W_MPLS, 8, 1),
        V::Int,
        Prereq::eth(E::Mpls),
        false,
        false,
    ),
    f(
        F::MplsTtl,
        "mpls_ttl",
        &[],
        8,
        bits(W_MPLS, 0, 8),
        V::Int,
        Prereq::eth(E::Mpls),
        true,
        false,
    ),
];

impl FieldId {
    /// This field's registry entry.
    pub fn info(self) -> &'static FieldInfo {
        // FIELDS lists every FieldId exactly once, in declaration order
        // (checked by the `registry_is_indexed_by_id` test).
        &FIELDS[self as usize]
    }
}

/// The NXM and OXM names of the fields (`ovs-fields(7)`), with the field
/// they name. Left out: `OXM_OF_VLAN_VID` (OpenFlow 1.2+ VLAN id with its
/// own present bit), tunnel and conntrack fields. (OVS 3.1 has no
/// `NXM_NX_XREG` name: `xreg`s are `OXM_OF_PKT_REG`.)
pub const NXM_NAMES: &[(&str, FieldId)] = &[
    ("NXM_OF_IN_PORT", FieldId::InPort),
    ("OXM_OF_IN_PORT", FieldId::InPort),
    ("NXM_OF_ETH_SRC", FieldId::EthSrc),
    ("OXM_OF_ETH_SRC", FieldId::EthSrc),
    ("NXM_OF_ETH_DST", FieldId::EthDst),
    ("OXM_OF_ETH_DST", FieldId::EthDst),
    ("NXM_OF_ETH_TYPE", FieldId::EthType),
    ("OXM_OF_ETH_TYPE", FieldId::EthType),
    ("NXM_OF_VLAN_TCI", FieldId::VlanTci),
    ("OXM_OF_VLAN_PCP", FieldId::DlVlanPcp),
    ("NXM_OF_IP_SRC", FieldId::NwSrc),
    ("OXM_OF_IPV4_SRC", FieldId::NwSrc),
    ("NXM_OF_IP_DST", FieldId::NwDst),
    ("OXM_OF_IPV4_DST", FieldId::NwDst),
    ("NXM_OF_IP_PROTO", FieldId::NwProto),
    ("OXM_OF_IP_PROTO", FieldId::NwProto),
    ("NXM_OF_IP_TOS", FieldId::NwTos),
    ("OXM_OF_IP_DSCP", FieldId::IpDscp),
    ("NXM_NX_IP_ECN", FieldId::NwEcn),
    ("OXM_OF_IP_ECN", FieldId::NwEcn),
    ("NXM_NX_IP_TTL", FieldId::NwTtl),
    ("NXM_NX_IP_FRAG", FieldId::NwFrag),
    ("NXM_OF_TCP_SRC", FieldId::TcpSrc),
    ("OXM_OF_TCP_SRC", FieldId::TcpSrc),
    ("NXM_OF_TCP_DST", FieldId::TcpDst),
    ("OXM_OF_TCP_DST", FieldId::TcpDst),
    ("NXM_OF_UDP_SRC", FieldId::UdpSrc),
    ("OXM_OF_UDP_SRC", FieldId::UdpSrc),
    ("NXM_OF_UDP_DST", FieldId::UdpDst),
    ("OXM_OF_UDP_DST", FieldId::UdpDst),
    ("OXM_OF_SCTP_SRC", FieldId::SctpSrc),
    ("OXM_OF_SCTP_DST", FieldId::SctpDst),
    ("NXM_NX_TCP_FLAGS", FieldId::TcpFlags),
    ("OXM_OF_TCP_FLAGS", FieldId::TcpFlags),
    ("NXM_OF_ICMP_TYPE", FieldId::IcmpType),
    ("OXM_OF_ICMPV4_TYPE", FieldId::IcmpType),
    ("NXM_OF_ICMP_CODE", FieldId::IcmpCode),
    ("OXM_OF_ICMPV4_CODE", FieldId::IcmpCode),
    ("NXM_NX_ICMPV6_TYPE", FieldId::Icmpv6Type),
    ("OXM_OF_ICMPV6_TYPE", FieldId::Icmpv6Type),
    ("NXM_NX_ICMPV6_CODE", FieldId::Icmpv6Code),
    ("OXM_OF_ICMPV6_CODE", FieldId::Icmpv6Code),
    ("NXM_OF_ARP_OP", FieldId::ArpOp),
    ("OXM_OF_ARP_OP", FieldId::ArpOp),
    ("NXM_OF_ARP_SPA", FieldId::ArpSpa),
    ("OXM_OF_ARP_SPA", FieldId::ArpSpa),
    ("NXM_OF_ARP_TPA", FieldId::ArpTpa),
    ("OXM_OF_ARP_TPA", FieldId::ArpTpa),
    ("NXM_NX_ARP_SHA", FieldId::ArpSha),
    ("OXM_OF_ARP_SHA", FieldId::ArpSha),
    ("NXM_NX_ARP_THA", FieldId::ArpTha),
    ("OXM_OF_ARP_THA", FieldId::ArpTha),
    ("NXM_NX_IPV6_SRC", FieldId::Ipv6Src),
    ("OXM_OF_IPV6_SRC", FieldId::Ipv6Src),
    ("NXM_NX_IPV6_DST", FieldId::Ipv6Dst),
    ("OXM_OF_IPV6_DST", FieldId::Ipv6Dst),
    ("NXM_NX_IPV6_LABEL", FieldId::Ipv6Label),
    ("OXM_OF_IPV6_FLABEL", FieldId::Ipv6Label),
    ("NXM_NX_ND_TARGET", FieldId::NdTarget),
    ("OXM_OF_IPV6_ND_TARGET", FieldId::NdTarget),
    ("NXM_NX_ND_SLL", FieldId::NdSll),
    ("OXM_OF_IPV6_ND_SLL", FieldId::NdSll),
    ("NXM_NX_ND_TLL", FieldId::NdTll),
    ("OXM_OF_IPV6_ND_TLL", FieldId::NdTll),
    ("NXM_NX_PKT_MARK", FieldId::PktMark),
    ("NXM_NX_CONJ_ID", FieldId::ConjId),
    ("NXM_NX_TUN_ID", FieldId::TunId),
    ("OXM_OF_TUNNEL_ID", FieldId::TunId),
    ("OXM_OF_MPLS_LABEL", FieldId::MplsLabel),
    ("OXM_OF_MPLS_TC", FieldId::MplsTc),
    ("OXM_OF_MPLS_BOS", FieldId::MplsBos),
    ("NXM_NX_MPLS_TTL", FieldId::MplsTtl),
    ("OXM_OF_METADATA", FieldId::Metadata),
    ("NXM_NX_REG0", FieldId::Reg0),
    ("NXM_NX_REG1", FieldId::Reg1),
    ("NXM_NX_REG2", FieldId::Reg2),
    ("NXM_NX_REG3", FieldId::Reg3),
    ("NXM_NX_REG4", FieldId::Reg4),
    ("NXM_NX_REG5", FieldId::Reg5),
    ("NXM_NX_REG6", FieldId::Reg6),
    ("NXM_NX_REG7", FieldId::Reg7),
    ("NXM_NX_REG8", FieldId::Reg8),
    ("NXM_NX_REG9", FieldId::Reg9),
    ("NXM_NX_REG10", FieldId::Reg10),
    ("NXM_NX_REG11", FieldId::Reg11),
    ("NXM_NX_REG12", FieldId::Reg12),
    ("NXM_NX_REG13", FieldId::Reg13),
    ("NXM_NX_REG14", FieldId::Reg14),
    ("NXM_NX_REG15", FieldId::Reg15),
    ("OXM_OF_PKT_REG0", FieldId::Xreg0),
    ("OXM_OF_PKT_REG1", FieldId::Xreg1),
    ("OXM_OF_PKT_REG2", FieldId::Xreg2),
    ("OXM_OF_PKT_REG3", FieldId::Xreg3),
    ("OXM_OF_PKT_REG4", FieldId::Xreg4),
    ("OXM_OF_PKT_REG5", FieldId::Xreg5),
    ("OXM_OF_PKT_REG6", FieldId::Xreg6),
    ("OXM_OF_PKT_REG7", FieldId::Xreg7),
    ("NXM_NX_XXREG0", FieldId::Xxreg0),
    ("NXM_NX_XXREG1", FieldId::Xxreg1),
    ("NXM_NX_XXREG2", FieldId::Xxreg2),
    ("NXM_NX_XXREG3", FieldId::Xxreg3),
];

/// Looks a field up by any of its names (case-sensitive, as OVS): its
/// name, an alias, or its NXM/OXM name ([`NXM_NAMES`]).
pub fn lookup(name: &str) -> Option<&'static FieldInfo> {
    FIELDS
        .iter()
        .find(|f| f.name == name || f.aliases.contains(&name))
        .or_else(|| {
            NXM_NAMES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, id)| id.info())
        })
}

/// Writes `v` into `bits` bits at `shift` of `w[word]`.
fn put_bits(w: &mut [u64], word: u8, shift: u8, bits: u8, v: u128) {
    let m = (low_mask(u32::from(bits)) as u64) << shift;
    let x = &mut w[usize::from(word)];
    *x = (*x & !m) | (((v as u64) << shift) & m);
}

/// Writes a 128-bit `v` into `w[word]` (high) and `w[word + 1]`.
fn put_wide(w: &mut [u64], word: u8, v: u128) {
    w[usize::from(word)] = (v >> 64) as u64;
    w[usize::from(word) + 1] = v as u64;
}

fn low_mask(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

impl FieldInfo {
    /// The all-ones mask for this field, in field units.
    pub fn full_mask(&self) -> u128 {
        low_mask(u32::from(self.bits)) << self.unit_shift
    }

    /// Reads the field's value from a key (or a mask viewed as a key).
    pub fn get(&self, key: &FlowKey) -> u128 {
        let raw = match self.storage {
            Storage::Bits { word, shift, bits } => {
                u128::from((key.w[word as usize] >> shift) & (low_mask(u32::from(bits)) as u64))
            }
            Storage::Wide { word } => {
                (u128::from(key.w[word as usize]) << 64) | u128::from(key.w[word as usize + 1])
            }
            Storage::Reg { .. } | Storage::RegWide { .. } => 0,
        };
        raw << self.unit_shift
    }

    /// True for the registers and `metadata`, which live in [`Regs`]
    /// (their [`FieldInfo::get`] on a key is 0, [`FieldInfo::set`] does
    /// nothing: use [`FieldInfo::get_regs`] / [`FieldInfo::set_regs_masked`]).
    pub fn is_reg(&self) -> bool {
        matches!(self.storage, Storage::Reg { .. } | Storage::RegWide { .. })
    }

    /// Reads a register field (0 for a key field).
    pub fn get_regs(&self, regs: &Regs) -> u128 {
        match self.storage {
            Storage::Reg { word, shift, bits } => {
                u128::from((regs.w[word as usize] >> shift) & (low_mask(u32::from(bits)) as u64))
            }
            Storage::RegWide { word } => {
                (u128::from(regs.w[word as usize]) << 64) | u128::from(regs.w[word as usize + 1])
            }
            _ => 0,
        }
    }

    /// Writes the bits of `value` selected by `mask` into a register
    /// field (nothing for a key field).
    pub fn set_regs_masked(&self, regs: &mut Regs, value: u128, mask: u128) {
        let mask = mask & low_mask(u32::from(self.bits));
        let v = (self.get_regs(regs) & !mask) | (value & mask);
        match self.storage {
            Storage::Reg { word, shift, bits } => put_bits(&mut regs.w, word, shift, bits, v),
            Storage::RegWide { word } => put_wide(&mut regs.w, word, v),
            _ => {}
        }
    }

    /// Writes `value` into the field's bits of `key`, leaving other bits.
    pub fn set(&self, key: &mut FlowKey, value: u128) {
        let raw = (value >> self.unit_shift) & low_mask(u32::from(self.bits));
        match self.storage {
            Storage::Bits { word, shift, bits } => put_bits(&mut key.w, word, shift, bits, raw),
            Storage::Wide { word } => put_wide(&mut key.w, word, raw),
            Storage::Reg { .. } | Storage::RegWide { .. } => {}
        }
    }

    /// Writes only the bits of `value` selected by `mask` into `key`.
    pub fn set_masked(&self, key: &mut FlowKey, value: u128, mask: u128) {
        let old = self.get(key);
        self.set(key, (old & !mask) | (value & mask));
    }

    /// Reads the field from a mask.
    pub fn get_mask(&self, mask: &FlowMask) -> u128 {
        self.get(&mask.to_key())
    }

    /// ORs `m` (field units) into the field's bits of `mask`.
    pub fn or_mask(&self, mask: &mut FlowMask, m: u128) {
        let mut k = mask.to_key();
        let old = self.get(&k);
        self.set(&mut k, old | m);
        *mask = FlowMask::from_key(&k);
    }

    /// Sets the field's bits of `mask` to exactly `m`.
    pub fn set_mask(&self, mask: &mut FlowMask, m: u128) {
        let mut k = mask.to_key();
        self.set(&mut k, m);
        *mask = FlowMask::from_key(&k);
    }

    /// The field's storage bits as a key-wide mask (all of the field).
    pub fn storage_mask(&self) -> FlowMask {
        let mut m = FlowMask::catchall();
        self.set_mask(&mut m, self.full_mask());
        m
    }
}

/// Sets `dl_vlan`'s VID under a match: value/mask on vlan_tci including CFI,
/// or "no VLAN" for 0xffff, as OVS does.
pub fn vlan_vid_bits(vid: u16) -> (u16, u16) {
    if vid == 0xffff {
        (0, 0xffff)
    } else {
        (VLAN_CFI | (vid & 0x0fff), VLAN_CFI | 0x0fff)
    }
}

/// Sets `dl_vlan_pcp` under a match: value/mask on vlan_tci including CFI.
pub fn vlan_pcp_bits(pcp: u8) -> (u16, u16) {
    (VLAN_CFI | (u16::from(pcp & 7) << 13), VLAN_CFI | 0xe000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_indexed_by_id() {
        for (i, f) in FIELDS.iter().enumerate() {
            assert_eq!(f.id as usize, i, "{} out of order", f.name);
        }
        assert_eq!(FieldId::NdTll.info().name, "nd_tll");
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = FIELDS
            .iter()
            .flat_map(|f| std::iter::once(f.name).chain(f.aliases.iter().copied()))
            .collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn aliases_resolve() {
        assert_eq!(lookup("eth_src").unwrap().id, FieldId::EthSrc);
        assert_eq!(lookup("ip_dst").unwrap().id, FieldId::NwDst);
        assert_eq!(lookup("NXM_OF_IP_DST").unwrap().id, FieldId::NwDst);
        assert_eq!(
            lookup("OXM_OF_IPV6_ND_TARGET").unwrap().id,
            FieldId::NdTarget
        );
        assert!(lookup("nxm_of_ip_dst").is_none(), "case-sensitive");
        assert_eq!(lookup("NXM_NX_REG0").unwrap().id, FieldId::Reg0);
        assert_eq!(lookup("OXM_OF_PKT_REG3").unwrap().id, FieldId::Xreg3);
        assert!(lookup("NXM_NX_XREG0").is_none(), "not an OVS 3.1 name");
        assert!(lookup("no_such_field").is_none());
    }

    #[test]
    fn tos_views_share_storage() {
        let mut k = FlowKey::zero();
        FieldId::NwTos.info().set(&mut k, 0x28);
        assert_eq!(k.nw_tos(), 0x28);
        assert_eq!(FieldId::IpDscp.info().get(&k), 0x0a);
        FieldId::NwEcn.info().set(&mut k, 3);
        assert_eq!(k.nw_tos(), 0x2b);
        assert_eq!(FieldId::NwTos.info().get(&k), 0x28);
    }

    #[test]
    fn wide_fields() {
        let mut k = FlowKey::zero();
        let v = 0x2001_0db8_0000_0000_0000_0000_0000_0001u128;
        FieldId::Ipv6Dst.info().set(&mut k, v);
        assert_eq!(k.ipv6_dst(), v);
        assert_eq!(FieldId::Ipv6Dst.info().get(&k), v);
        assert_eq!(FieldId::Ipv6Dst.info().full_mask(), u128::MAX);
    }
}
