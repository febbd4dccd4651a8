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
    ct_state, FlowKey, FlowMask, Regs, VLAN_CFI, W_ARP_SHA, W_ARP_THA, W_CONJ_ID, W_CT,
    W_CT_IPV6_DST, W_CT_IPV6_SRC, W_CT_LABEL, W_CT_NW, W_IPV6_DST, W_IPV6_MISC, W_IPV6_SRC,
    W_L2_DST, W_L2_SRC, W_META, W_META2, W_METADATA, W_MPLS, W_ND_TARGET, W_NW, W_TP, W_TUN_GBP,
    W_TUN_ID, W_TUN_IPV6_DST, W_TUN_IPV6_SRC, W_TUN_MD, W_TUN_MISC, W_TUN_NW,
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
    VlanVid,
    NdReserved,
    NdOptionsType,
    CtState,
    CtZone,
    CtMark,
    CtLabel,
    CtNwSrc,
    CtNwDst,
    CtIpv6Src,
    CtIpv6Dst,
    CtNwProto,
    CtTpSrc,
    CtTpDst,
    TunSrc,
    TunDst,
    TunIpv6Src,
    TunIpv6Dst,
    TunFlags,
    TunTtl,
    TunTos,
    TunGbpId,
    TunGbpFlags,
    TunMetadata0,
    TunMetadata1,
    TunMetadata2,
    TunMetadata3,
    TunMetadata4,
    TunMetadata5,
    TunMetadata6,
    TunMetadata7,
}

/// The tunnel fields, in the order Open vSwitch prints a match's
/// (`format_flow_tunnel`).
pub const TUNNEL_FIELDS: [FieldId; 18] = [
    FieldId::TunId,
    FieldId::TunSrc,
    FieldId::TunDst,
    FieldId::TunIpv6Src,
    FieldId::TunIpv6Dst,
    FieldId::TunGbpId,
    FieldId::TunGbpFlags,
    FieldId::TunTos,
    FieldId::TunTtl,
    FieldId::TunFlags,
    FieldId::TunMetadata0,
    FieldId::TunMetadata1,
    FieldId::TunMetadata2,
    FieldId::TunMetadata3,
    FieldId::TunMetadata4,
    FieldId::TunMetadata5,
    FieldId::TunMetadata6,
    FieldId::TunMetadata7,
];

impl FieldId {
    /// `tun_metadataN`'s N, for the Geneve option fields.
    pub fn tun_metadata_index(self) -> Option<usize> {
        (self as usize)
            .checked_sub(FieldId::TunMetadata0 as usize)
            .filter(|&n| n < crate::key::TUN_METADATA)
    }
}

impl FieldId {
    /// A tunnel-metadata field ([`TUNNEL_FIELDS`]).
    pub fn is_tunnel(self) -> bool {
        TUNNEL_FIELDS.contains(&self)
    }
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
    /// `tun_metadataN`: a 64-bit value in word `word` and its presence
    /// bit, [`crate::key::TUN_MD_PRESENT_SHIFT`] + `n` of
    /// [`crate::key::W_TUN_GBP`]. Writing a value to a key marks the
    /// field present (0 is a value, as in Open vSwitch); a non-zero mask
    /// of the field also covers its presence bit, so a match on it
    /// requires the option.
    TunMd {
        /// The value's word.
        word: u8,
        /// The field's number N.
        n: u8,
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
    /// Connection-tracking state flags: `+trk+est-new`, `new|trk`, or
    /// numeric (`0x21/0x21`).
    CtState,
    /// Hexadecimal without padding, `0` for zero (`reg0=0x5`, `pkt_mark=0/0xf`).
    HexInt,
    /// Tunnel flags: `+oam`, `-oam`, or numeric.
    TunFlags,
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
    /// The match must show a valid tracked connection (OVS's `CT`
    /// prerequisite of the original-direction tuple fields): one of
    /// `ct_state`'s new, est, rel, rpl, snat or dnat bits set, or `+trk`
    /// with `-inv`.
    pub ct: bool,
}

impl Prereq {
    const NONE: Prereq = Prereq {
        eth: EthReq::Any,
        proto: ProtoReq::Any,
        icmp6_types: &[],
        ct: false,
    };
    /// A tracked, valid connection (the `CT` prerequisite).
    const CT: Prereq = Prereq {
        ct: true,
        ..Prereq::NONE
    };
    const fn eth(eth: EthReq) -> Prereq {
        Prereq {
            eth,
            proto: ProtoReq::Any,
            icmp6_types: &[],
            ct: false,
        }
    }
    const fn proto(eth: EthReq, proto: ProtoReq) -> Prereq {
        Prereq {
            eth,
            proto,
            icmp6_types: &[],
            ct: false,
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
        // A packet's valid connection always has new, est or rpl set.
        let ct_ok =
            !self.ct || key.ct_state() & (ct_state::NEW | ct_state::EST | ct_state::RPL) != 0;
        eth_ok && proto_ok && icmp6_ok && ct_ok
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
        if self.ct {
            s.push_str("a tracked connection (ct_state with +trk and a valid state)");
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

mod table;

pub use table::FIELDS;

impl FieldId {
    /// This field's registry entry.
    pub fn info(self) -> &'static FieldInfo {
        // FIELDS lists every FieldId exactly once, in declaration order
        // (checked by the `registry_is_indexed_by_id` test).
        &FIELDS[self as usize]
    }
}

/// The NXM and OXM names of the fields (`ovs-fields(7)`), with the field
/// they name. Left out: tunnel fields. (OVS 3.1 has no
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
    ("OXM_OF_VLAN_VID", FieldId::VlanVid),
    ("ERICOXM_OF_ICMPV6_ND_RESERVED", FieldId::NdReserved),
    ("ERICOXM_OF_ICMPV6_ND_OPTIONS_TYPE", FieldId::NdOptionsType),
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
    ("NXM_NX_CT_STATE", FieldId::CtState),
    ("NXM_NX_CT_ZONE", FieldId::CtZone),
    ("NXM_NX_CT_MARK", FieldId::CtMark),
    ("NXM_NX_CT_LABEL", FieldId::CtLabel),
    ("NXM_NX_CT_NW_SRC", FieldId::CtNwSrc),
    ("NXM_NX_CT_NW_DST", FieldId::CtNwDst),
    ("NXM_NX_CT_IPV6_SRC", FieldId::CtIpv6Src),
    ("NXM_NX_CT_IPV6_DST", FieldId::CtIpv6Dst),
    ("NXM_NX_CT_NW_PROTO", FieldId::CtNwProto),
    ("NXM_NX_CT_TP_SRC", FieldId::CtTpSrc),
    ("NXM_NX_CT_TP_DST", FieldId::CtTpDst),
    ("NXM_NX_TUN_IPV4_SRC", FieldId::TunSrc),
    ("NXM_NX_TUN_IPV4_DST", FieldId::TunDst),
    ("NXM_NX_TUN_IPV6_SRC", FieldId::TunIpv6Src),
    ("NXM_NX_TUN_IPV6_DST", FieldId::TunIpv6Dst),
    ("NXM_NX_TUN_FLAGS", FieldId::TunFlags),
    ("NXM_NX_TUN_GBP_ID", FieldId::TunGbpId),
    ("NXM_NX_TUN_GBP_FLAGS", FieldId::TunGbpFlags),
    ("NXM_NX_TUN_METADATA0", FieldId::TunMetadata0),
    ("NXM_NX_TUN_METADATA1", FieldId::TunMetadata1),
    ("NXM_NX_TUN_METADATA2", FieldId::TunMetadata2),
    ("NXM_NX_TUN_METADATA3", FieldId::TunMetadata3),
    ("NXM_NX_TUN_METADATA4", FieldId::TunMetadata4),
    ("NXM_NX_TUN_METADATA5", FieldId::TunMetadata5),
    ("NXM_NX_TUN_METADATA6", FieldId::TunMetadata6),
    ("NXM_NX_TUN_METADATA7", FieldId::TunMetadata7),
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
        self.get_words(&key.w)
    }

    /// [`FieldInfo::get`] on a key's or a mask's words.
    #[inline]
    fn get_words(&self, w: &[u64; crate::key::FLOW_WORDS]) -> u128 {
        let key = w;
        let raw = match self.storage {
            Storage::Bits { word, shift, bits } => {
                u128::from((key[word as usize] >> shift) & (low_mask(u32::from(bits)) as u64))
            }
            Storage::Wide { word } => {
                (u128::from(key[word as usize]) << 64) | u128::from(key[word as usize + 1])
            }
            Storage::TunMd { word, .. } => u128::from(key[word as usize]),
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

    /// Writes `value` into the field's bits of `key`, leaving other bits
    /// (a `tun_metadataN` becomes present).
    pub fn set(&self, key: &mut FlowKey, value: u128) {
        let raw = (value >> self.unit_shift) & low_mask(u32::from(self.bits));
        match self.storage {
            Storage::Bits { word, shift, bits } => put_bits(&mut key.w, word, shift, bits, raw),
            Storage::Wide { word } => put_wide(&mut key.w, word, raw),
            Storage::TunMd { word, n } => {
                key.w[usize::from(word)] = raw as u64;
                key.w[crate::key::W_TUN_GBP] |= crate::key::tun_md_present_bit(n.into());
            }
            Storage::Reg { .. } | Storage::RegWide { .. } => {}
        }
    }

    /// Writes only the bits of `value` selected by `mask` into `key`
    /// (nothing when `mask` is 0).
    pub fn set_masked(&self, key: &mut FlowKey, value: u128, mask: u128) {
        if mask == 0 {
            return;
        }
        let old = self.get(key);
        self.set(key, (old & !mask) | (value & mask));
    }

    /// Reads the field from a mask.
    pub fn get_mask(&self, mask: &FlowMask) -> u128 {
        self.get_words(&mask.w)
    }

    /// ORs `m` (field units) into the field's bits of `mask`.
    pub fn or_mask(&self, mask: &mut FlowMask, m: u128) {
        let old = self.get_mask(mask);
        self.set_mask(mask, old | m);
    }

    /// Sets the field's bits of `mask` to exactly `m` (a `tun_metadataN`'s
    /// presence bit with them: set when `m` is not 0).
    pub fn set_mask(&self, mask: &mut FlowMask, m: u128) {
        if let Storage::TunMd { word, n } = self.storage {
            let raw = (m >> self.unit_shift) as u64;
            mask.w[usize::from(word)] = raw;
            let p = &mut mask.w[crate::key::W_TUN_GBP];
            *p = if raw != 0 {
                *p | crate::key::tun_md_present_bit(n.into())
            } else {
                *p & !crate::key::tun_md_present_bit(n.into())
            };
            return;
        }
        let mut k = mask.to_key();
        self.set(&mut k, m);
        *mask = FlowMask::from_key(&k);
    }

    /// The field's storage bits as a key-wide mask (all of the field).
    pub fn storage_mask(&self) -> FlowMask {
        let mut m = FlowMask::catchall();
        self.add_storage_to(&mut m);
        m
    }

    /// ORs the field's storage bits into `m` (nothing for a register).
    #[inline]
    pub fn add_storage_to(&self, m: &mut FlowMask) {
        let raw = low_mask(u32::from(self.bits));
        match self.storage {
            Storage::Bits { word, shift, bits } => {
                m.w[usize::from(word)] |=
                    ((raw as u64) & (low_mask(u32::from(bits)) as u64)) << shift;
            }
            Storage::Wide { word } => {
                m.w[usize::from(word)] |= (raw >> 64) as u64;
                m.w[usize::from(word) + 1] |= raw as u64;
            }
            Storage::TunMd { word, n } => {
                m.w[usize::from(word)] |= raw as u64;
                m.w[crate::key::W_TUN_GBP] |= crate::key::tun_md_present_bit(n.into());
            }
            Storage::Reg { .. } | Storage::RegWide { .. } => {}
        }
    }

    /// The words the field is stored in, as a bitmap: bit `i` for key
    /// word `i`, bit `FLOW_WORDS + j` for register word `j` (as
    /// [`crate::Match::word_bits`]).
    #[inline]
    pub fn word_bits(&self) -> u64 {
        let regs = crate::key::FLOW_WORDS as u32;
        match self.storage {
            Storage::Bits { word, .. } => 1u64 << word,
            Storage::Wide { word } => 3u64 << word,
            Storage::TunMd { word, .. } => 1u64 << word | 1u64 << crate::key::W_TUN_GBP,
            Storage::Reg { word, .. } => 1u64 << (regs + u32::from(word)),
            Storage::RegWide { word } => 3u64 << (regs + u32::from(word)),
        }
    }

    /// True when some of the field's storage bits are set in `m`.
    #[inline]
    pub fn storage_meets(&self, m: &FlowMask) -> bool {
        let raw = low_mask(u32::from(self.bits));
        match self.storage {
            Storage::Bits { word, shift, bits } => {
                let s = ((raw as u64) & (low_mask(u32::from(bits)) as u64)) << shift;
                m.w[usize::from(word)] & s != 0
            }
            Storage::Wide { word } => {
                let i = usize::from(word);
                m.w[i] & (raw >> 64) as u64 != 0 || m.w[i + 1] & raw as u64 != 0
            }
            Storage::TunMd { word, n } => {
                m.w[usize::from(word)] != 0
                    || m.w[crate::key::W_TUN_GBP] & crate::key::tun_md_present_bit(n.into()) != 0
            }
            Storage::Reg { .. } | Storage::RegWide { .. } => false,
        }
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

    /// The storage helpers agree with writing a full mask through the
    /// field's setter, and with intersecting whole masks.
    #[test]
    fn storage_bits_are_the_fields_bits() {
        for f in FIELDS {
            let mut want = FlowMask::catchall();
            f.set_mask(&mut want, f.full_mask());
            assert_eq!(f.storage_mask(), want, "{}", f.name);
            if !f.is_reg() {
                assert_eq!(f.word_bits(), want.word_map(), "{}", f.name);
            } else {
                let mut m = crate::Match::catchall();
                f.set_regs_masked(&mut m.regs_mask, u128::MAX, u128::MAX);
                assert_eq!(f.word_bits(), m.word_bits(), "{}", f.name);
            }
            for g in FIELDS {
                let meets = !g.storage_mask().intersect(&want).is_catchall();
                assert_eq!(g.storage_meets(&want), meets, "{} {}", g.name, f.name);
            }
        }
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
