//! `FlowKey` and `FlowMask`: the fixed-layout packet key every tier works on.
//!
//! A key is 40 little `u64` words (320 bytes, five cache lines, 64-byte
//! aligned). Every field lives at a fixed bit range of one word (or, for the
//! 128-bit IPv6 addresses, two whole words, high half first), so a mask is
//! the same array and "key under mask" is a word-wise AND. The words that an
//! IPv4 5-tuple flow needs (`W_META`, `W_NW`, `W_TP`, `W_L2_DST`) come first;
//! the extension words — connection tracking (16..24) and tunnel metadata
//! (24..40) — come last: they are zero until a packet has been through a
//! `ct` action or a tunnel's decapsulation and recirculated, so a received
//! packet's key never touches them and the packet hash leaves them out
//! (see `datapath::hash`).
//!
//! Layout (bit 0 = least significant):
//!
//! | word | bits | field |
//! |---|---|---|
//! | 0 `W_META` | 0..16 in_port, 16..32 recirc_id, 32..48 dl_type, 48..56 nw_proto (arp_op), 56..58 nw_frag |
//! | 1 `W_NW` | 0..32 nw_src (arp_spa), 32..64 nw_dst (arp_tpa) |
//! | 2 `W_TP` | 0..16 tp_src (icmp_type), 16..32 tp_dst (icmp_code), 32..44 tcp_flags (32..48 nd_options_type), 48..56 nw_tos (DSCP+ECN byte), 56..64 nw_ttl |
//! | 3 `W_L2_DST` | 0..48 dl_dst, 48..64 vlan_tci (outer tag, CFI bit = present) |
//! | 4 `W_L2_SRC` | 0..48 dl_src, 48..64 vlan_tci of the inner (second) tag |
//! | 5 `W_ARP_SHA` | 0..48 arp_sha / nd_sll, 48..56 ct_state, 56..64 ct_nw_proto |
//! | 6 `W_ARP_THA` | 0..48 arp_tha / nd_tll, 48..64 ct_zone |
//! | 7 `W_IPV6_MISC` | 0..20 ipv6_label, 20..32 dp_hash (its low 12 bits; datapath metadata), 32..64 mpls_lse2 (the third MPLS label stack entry) or nd_reserved |
//! | 8, 9 | ipv6_src (high, low) |
//! | 10, 11 | ipv6_dst |
//! | 12, 13 | nd_target |
//! | 14 `W_META2` | 0..32 skb_priority, 32..64 pkt_mark (datapath metadata: 0 in every extracted key; only megaflow masks and translation use them) |
//! | 15 `W_MPLS` | 0..32 mpls_lse0 (the top MPLS label stack entry: label 12..32, tc 9..12, bos 8, ttl 0..8), 32..64 mpls_lse1 (the next) |
//! | 16 `W_CT` | 0..32 ct_mark, 32..48 ct_tp_src, 48..64 ct_tp_dst |
//! | 17 `W_CT_NW` | 0..32 ct_nw_src, 32..64 ct_nw_dst |
//! | 18, 19 | ct_label (high, low) |
//! | 20, 21 | ct_ipv6_src |
//! | 22, 23 | ct_ipv6_dst |
//! | 24 `W_TUN_ID` | tun_id |
//! | 25 `W_TUN_NW` | 0..32 tun_src, 32..64 tun_dst (IPv4 outer addresses) |
//! | 26 `W_TUN_MISC` | 0..16 the tunnel flags ([`tnl_flags`]: oam, df, csum, key; OpenFlow's `tun_flags` is bit 0), 16..24 tun_tos, 24..32 tun_ttl, 32..48 tun_tp_src, 48..64 tun_tp_dst |
//! | 27 `W_TUN_GBP` | 0..16 tun_gbp_id, 16..24 tun_gbp_flags, 32..40 which of tun_metadata0..7 are present (bit 32 + N) |
//! | 28, 29 | tun_ipv6_src |
//! | 30, 31 | tun_ipv6_dst |
//! | 32..40 `W_TUN_MD` | tun_metadata0..7: one Geneve option's value each (at most 8 bytes, right-aligned; 0 when absent) |
//!
//! Fields that share storage (nw_src / arp_spa, tp_src / icmp_type, ...) are
//! told apart by their prerequisites (dl_type, nw_proto), which every mask
//! that touches them also covers. Unused bits are always zero in keys built
//! by the extractor and by the rule parser.
//!
//! Thread-safety: plain `Copy` data.

/// Number of 64-bit words in a key.
pub const FLOW_WORDS: usize = 40;

/// `i` as an index into a key's words, clamped to the last word (a
/// conditional move; lets the compiler drop the bounds check where a word
/// number, always < [`FLOW_WORDS`], indexes a key). The hot loops use
/// [`Word`] instead, which costs nothing.
#[inline(always)]
pub const fn word_index(i: u8) -> usize {
    let i = i as usize;
    if i < FLOW_WORDS {
        i
    } else {
        FLOW_WORDS - 1
    }
}

/// A word position in a key, `0..FLOW_WORDS`, as a type whose every value
/// is in range: indexing a key's words with [`Word::index`] compiles to a
/// plain load, no bounds check and no clamp (the compiler knows the
/// enum's range).
///
/// Why: a subtable's or mask's list of non-zero words indexes the packet
/// key once per word per lookup. With 16 words `w & 15` did it in one
/// instruction; with 24 the clamp ([`word_index`]: compare and
/// conditional move) cost ~10 instructions per packet of a dpcls lookup
/// by callgrind (`flowpath bench --flows 1000 --config none`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum Word {
    #[default]
    W0 = 0,
    W1,
    W2,
    W3,
    W4,
    W5,
    W6,
    W7,
    W8,
    W9,
    W10,
    W11,
    W12,
    W13,
    W14,
    W15,
    W16,
    W17,
    W18,
    W19,
    W20,
    W21,
    W22,
    W23,
    W24,
    W25,
    W26,
    W27,
    W28,
    W29,
    W30,
    W31,
    W32,
    W33,
    W34,
    W35,
    W36,
    W37,
    W38,
    W39,
}

impl Word {
    /// Every word, in order.
    pub const ALL: [Word; FLOW_WORDS] = {
        use Word::*;
        [
            W0, W1, W2, W3, W4, W5, W6, W7, W8, W9, W10, W11, W12, W13, W14, W15, W16, W17, W18,
            W19, W20, W21, W22, W23, W24, W25, W26, W27, W28, W29, W30, W31, W32, W33, W34, W35,
            W36, W37, W38, W39,
        ]
    };

    /// Word `i`, if `i < FLOW_WORDS`.
    #[inline]
    pub const fn new(i: usize) -> Option<Word> {
        if i < FLOW_WORDS {
            Some(Word::ALL[i])
        } else {
            None
        }
    }

    /// Its position, `< FLOW_WORDS`.
    #[inline(always)]
    pub const fn index(self) -> usize {
        self as usize
    }
}

const _: () = assert!(Word::W39 as usize == FLOW_WORDS - 1);

/// Word holding in_port, recirc_id, dl_type, nw_proto and nw_frag.
pub const W_META: usize = 0;
/// Word holding the IPv4 (or ARP) addresses.
pub const W_NW: usize = 1;
/// Word holding transport ports, TCP flags, ToS and TTL.
pub const W_TP: usize = 2;
/// Word holding dl_dst and the outer VLAN TCI.
pub const W_L2_DST: usize = 3;
/// Word holding dl_src and the inner VLAN TCI.
pub const W_L2_SRC: usize = 4;
/// Word holding arp_sha / nd_sll.
pub const W_ARP_SHA: usize = 5;
/// Word holding arp_tha / nd_tll.
pub const W_ARP_THA: usize = 6;
/// Word holding the IPv6 flow label (and the third MPLS label stack entry).
pub const W_IPV6_MISC: usize = 7;
/// First of the two words of ipv6_src.
pub const W_IPV6_SRC: usize = 8;
/// First of the two words of ipv6_dst.
pub const W_IPV6_DST: usize = 10;
/// First of the two words of nd_target.
pub const W_ND_TARGET: usize = 12;
/// Word of the datapath metadata (skb_priority).
pub const W_META2: usize = 14;
/// Word of the MPLS label stack entries (the first two).
pub const W_MPLS: usize = 15;
/// Word of `ct_mark`, `ct_tp_src` and `ct_tp_dst`.
pub const W_CT: usize = 16;
/// Word of `ct_nw_src` and `ct_nw_dst` (IPv4 original-direction tuple).
pub const W_CT_NW: usize = 17;
/// First of the two words of `ct_label`.
pub const W_CT_LABEL: usize = 18;
/// First of the two words of `ct_ipv6_src`.
pub const W_CT_IPV6_SRC: usize = 20;
/// First of the two words of `ct_ipv6_dst`.
pub const W_CT_IPV6_DST: usize = 22;
/// The first extension word (connection tracking, then tunnel
/// metadata); words from here on are zero in every extracted key.
pub const W_CT_FIRST: usize = 16;
/// Word of `tun_id`.
pub const W_TUN_ID: usize = 24;
/// Word of the IPv4 outer addresses `tun_src` and `tun_dst`.
pub const W_TUN_NW: usize = 25;
/// Word of `tun_flags`, `tun_tos`, `tun_ttl`, `tun_tp_src`, `tun_tp_dst`.
pub const W_TUN_MISC: usize = 26;
/// Word of `tun_gbp_id`, `tun_gbp_flags` and the presence bits of
/// `tun_metadata0..7` ([`TUN_MD_PRESENT_SHIFT`]).
pub const W_TUN_GBP: usize = 27;
/// Bit `TUN_MD_PRESENT_SHIFT + N` of [`W_TUN_GBP`]: `tun_metadataN` is
/// present (the packet carried its option, or an action wrote it), as
/// Open vSwitch's `tun_metadata.present.map`: an option whose value is 0
/// is present, and a match on the field requires it.
pub const TUN_MD_PRESENT_SHIFT: u32 = 32;

/// `tun_metadataN`'s presence bit in [`W_TUN_GBP`] (`n` <
/// [`TUN_METADATA`]).
#[inline]
pub const fn tun_md_present_bit(n: usize) -> u64 {
    1 << (TUN_MD_PRESENT_SHIFT + n as u32)
}
/// First of the two words of `tun_ipv6_src`.
pub const W_TUN_IPV6_SRC: usize = 28;
/// First of the two words of `tun_ipv6_dst`.
pub const W_TUN_IPV6_DST: usize = 30;
/// The first tunnel-metadata word.
pub const W_TUN_FIRST: usize = 24;
/// The first of the words of `tun_metadata0..7` (Geneve options).
pub const W_TUN_MD: usize = 32;
/// How many Geneve options a key holds (`tun_metadata0..7`).
pub const TUN_METADATA: usize = 8;

/// The tunnel flags (OVS's `FLOW_TNL_F_*`), in [`W_TUN_MISC`] bits
/// 0..16 and printed in a megaflow as `tun_flags=-df-csum+key`.
/// OpenFlow's `tun_flags` field shows only [`tnl_flags::OAM`].
pub mod tnl_flags {
    /// Operations and maintenance frame (VXLAN-GPE/Geneve's O bit).
    pub const OAM: u8 = 1 << 0;
    /// The outer IPv4 header had don't-fragment set.
    pub const DF: u8 = 1 << 1;
    /// The outer UDP (or GRE) header carried a checksum.
    pub const CSUM: u8 = 1 << 2;
    /// The tunnel header carried a key (VNI, GRE key).
    pub const KEY: u8 = 1 << 3;
}

/// `ct_state` bits, as OpenFlow's `ct_state` field numbers them.
pub mod ct_state {
    /// The start of a new connection (not yet committed).
    pub const NEW: u8 = 0x01;
    /// Part of an existing connection.
    pub const EST: u8 = 0x02;
    /// Related to an existing connection (an ICMP error, an ALG's data
    /// connection).
    pub const REL: u8 = 0x04;
    /// In the reply direction.
    pub const RPL: u8 = 0x08;
    /// Invalid: the tracker could not make sense of it.
    pub const INV: u8 = 0x10;
    /// Tracked: the packet has been through the connection tracker.
    pub const TRK: u8 = 0x20;
    /// Source-translated.
    pub const SNAT: u8 = 0x40;
    /// Destination-translated.
    pub const DNAT: u8 = 0x80;
}

/// `nw_frag` bit: the packet is a fragment (first or later).
pub const FRAG_ANY: u8 = 1;
/// `nw_frag` bit: the packet is a later fragment (offset != 0).
pub const FRAG_LATER: u8 = 2;

/// The VLAN TCI bit that flowpath (like OVS) uses to mean "a tag is present".
pub const VLAN_CFI: u16 = 0x1000;

/// `tcp_flags` bits of a TCP FIN and RST: the packets that end a
/// connection (`fin_timeout`).
pub const TCP_FIN_RST: u16 = 0x001 | 0x004;

/// A packet's flow key. See the module documentation for the layout.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(64))]
pub struct FlowKey {
    /// The raw words.
    pub w: [u64; FLOW_WORDS],
}

/// A wildcard mask over a [`FlowKey`]: 1 bits are significant.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(64))]
pub struct FlowMask {
    /// The raw words.
    pub w: [u64; FLOW_WORDS],
}

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey { w: [0; FLOW_WORDS] }
    }
}

impl Default for FlowMask {
    fn default() -> Self {
        FlowMask { w: [0; FLOW_WORDS] }
    }
}

impl core::fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "FlowKey[")?;
        for (i, w) in self.w.iter().enumerate() {
            if *w != 0 {
                write!(f, " {i}:{w:#x}")?;
            }
        }
        write!(f, " ]")
    }
}

impl core::fmt::Debug for FlowMask {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "FlowMask[")?;
        for (i, w) in self.w.iter().enumerate() {
            if *w != 0 {
                write!(f, " {i}:{w:#x}")?;
            }
        }
        write!(f, " ]")
    }
}

macro_rules! scalar_accessors {
    ($($(#[$doc:meta])* $get:ident, $set:ident, $ty:ty, $word:expr, $shift:expr, $bits:expr;)*) => {
        impl FlowKey {
            $(
                $(#[$doc])*
                #[inline(always)]
                pub fn $get(&self) -> $ty {
                    ((self.w[$word] >> $shift) & ((1u64 << $bits) - 1)) as $ty
                }
                #[doc = concat!("Sets the field read by [`FlowKey::", stringify!($get), "`].")]
                #[inline(always)]
                pub fn $set(&mut self, v: $ty) {
                    let m = ((1u64 << $bits) - 1) << $shift;
                    self.w[$word] = (self.w[$word] & !m) | ((u64::from(v) << $shift) & m);
                }
            )*
        }
    };
}

scalar_accessors! {
    /// OpenFlow / datapath input port (16 bits, as OpenFlow 1.0's and
    /// every datapath port number flowpath gives).
    in_port, set_in_port, u32, W_META, 0, 16;
    /// The recirculation id (OVS's `recirc_id`): 0 for a received packet,
    /// the id of the frozen translation for a recirculated one. Shares the
    /// in_port's word, which every megaflow matches, so every megaflow
    /// matches it exactly at no cost.
    recirc_id, set_recirc_id, u32, W_META, 16, 16;
    /// The datapath hash (OVS's `dp_hash`), its low 12 bits: 0 until a
    /// datapath `hash` action computed it (a computed hash is never 0; a
    /// select group reads at most its low 8 bits).
    dp_hash, set_dp_hash, u32, W_IPV6_MISC, 20, 12;
    /// Ethernet type after any VLAN tags (0x05ff for non-Ethernet-II frames, as OVS).
    dl_type, set_dl_type, u16, W_META, 32, 16;
    /// IP protocol, or the ARP opcode (low 8 bits) for ARP.
    nw_proto, set_nw_proto, u8, W_META, 48, 8;
    /// Fragment bits: [`FRAG_ANY`], [`FRAG_LATER`].
    nw_frag, set_nw_frag, u8, W_META, 56, 2;
    /// Connection-tracking state ([`ct_state`] bits; 0 = not tracked).
    ct_state, set_ct_state, u8, W_ARP_SHA, 48, 8;
    /// Connection-tracking zone of the last `ct` action.
    ct_zone, set_ct_zone, u16, W_ARP_THA, 48, 16;
    /// The tracked connection's mark.
    ct_mark, set_ct_mark, u32, W_CT, 0, 32;
    /// The original-direction tuple's IP protocol.
    ct_nw_proto, set_ct_nw_proto, u8, W_ARP_SHA, 56, 8;
    /// The original-direction tuple's source port (ICMP: type).
    ct_tp_src, set_ct_tp_src, u16, W_CT, 32, 16;
    /// The original-direction tuple's destination port (ICMP: code).
    ct_tp_dst, set_ct_tp_dst, u16, W_CT, 48, 16;
    /// The original-direction tuple's IPv4 source.
    ct_nw_src, set_ct_nw_src, u32, W_CT_NW, 0, 32;
    /// The original-direction tuple's IPv4 destination.
    ct_nw_dst, set_ct_nw_dst, u32, W_CT_NW, 32, 32;
    /// IPv4 source, or ARP sender protocol address.
    nw_src, set_nw_src, u32, W_NW, 0, 32;
    /// IPv4 destination, or ARP target protocol address.
    nw_dst, set_nw_dst, u32, W_NW, 32, 32;
    /// Transport source port, or ICMP/ICMPv6 type.
    tp_src, set_tp_src, u16, W_TP, 0, 16;
    /// Transport destination port, or ICMP/ICMPv6 code.
    tp_dst, set_tp_dst, u16, W_TP, 16, 16;
    /// TCP flags (12 bits).
    tcp_flags, set_tcp_flags, u16, W_TP, 32, 12;
    /// The whole IPv4 ToS / IPv6 traffic class byte (DSCP << 2 | ECN).
    nw_tos, set_nw_tos, u8, W_TP, 48, 8;
    /// IPv4 TTL / IPv6 hop limit.
    nw_ttl, set_nw_ttl, u8, W_TP, 56, 8;
    /// Ethernet destination (48 bits, first octet most significant).
    dl_dst, set_dl_dst, u64, W_L2_DST, 0, 48;
    /// Outer VLAN TCI with [`VLAN_CFI`] set when a tag is present, else 0.
    vlan_tci, set_vlan_tci, u16, W_L2_DST, 48, 16;
    /// Ethernet source.
    dl_src, set_dl_src, u64, W_L2_SRC, 0, 48;
    /// Inner (second) VLAN TCI, [`VLAN_CFI`] set when present.
    vlan_tci_inner, set_vlan_tci_inner, u16, W_L2_SRC, 48, 16;
    /// ARP sender hardware address, or ND source link-layer address.
    arp_sha, set_arp_sha, u64, W_ARP_SHA, 0, 48;
    /// ARP target hardware address, or ND target link-layer address.
    arp_tha, set_arp_tha, u64, W_ARP_THA, 0, 48;
    /// IPv6 flow label (20 bits).
    ipv6_label, set_ipv6_label, u32, W_IPV6_MISC, 0, 20;
    /// A neighbour solicitation's or advertisement's reserved word (the
    /// advertisement's R/S/O flags), where the third MPLS label stack
    /// entry is (an ND packet has none; an IPv4 packet's addresses stay
    /// apart, as ICMPv6 is read inside IPv4 too).
    nd_reserved, set_nd_reserved, u32, W_IPV6_MISC, 32, 32;
    /// The type of an ND packet's first link-layer address option (1 or
    /// 2; 0 if none), where TCP's flags are (an ND packet has none).
    nd_options_type, set_nd_options_type, u8, W_TP, 32, 8;
    /// The packet's priority (`skb_priority`: the queue `set_queue`
    /// chose); datapath metadata, 0 for every received packet.
    skb_priority, set_skb_priority, u32, W_META2, 0, 32;
    /// The packet's mark (`pkt_mark`, the datapath's `skb_mark`);
    /// datapath metadata, 0 for every received packet.
    pkt_mark, set_pkt_mark, u32, W_META2, 32, 32;
    /// The top MPLS label stack entry (label, tc, bos, ttl as on the
    /// wire), 0 without MPLS.
    mpls_lse0, set_mpls_lse0, u32, W_MPLS, 0, 32;
    /// The second MPLS label stack entry, 0 if none.
    mpls_lse1, set_mpls_lse1, u32, W_MPLS, 32, 32;
    /// The third MPLS label stack entry, 0 if none (OVS keeps three:
    /// enough to count a stack's labels and to pop the third's place).
    mpls_lse2, set_mpls_lse2, u32, W_IPV6_MISC, 32, 32;
    /// The outer IPv4 source of a packet received through a tunnel (0
    /// otherwise).
    tun_src, set_tun_src, u32, W_TUN_NW, 0, 32;
    /// The outer IPv4 destination of a packet received through a tunnel.
    tun_dst, set_tun_dst, u32, W_TUN_NW, 32, 32;
    /// OpenFlow's `tun_flags`: the oam bit.
    tun_flags, set_tun_flags, u16, W_TUN_MISC, 0, 1;
    /// The outer ToS byte.
    tun_tos, set_tun_tos, u8, W_TUN_MISC, 16, 8;
    /// The outer TTL / hop limit.
    tun_ttl, set_tun_ttl, u8, W_TUN_MISC, 24, 8;
    /// The outer UDP source port (0 for GRE).
    tun_tp_src, set_tun_tp_src, u16, W_TUN_MISC, 32, 16;
    /// The outer UDP destination port (0 for GRE).
    tun_tp_dst, set_tun_tp_dst, u16, W_TUN_MISC, 48, 16;
    /// VXLAN group policy id.
    tun_gbp_id, set_tun_gbp_id, u16, W_TUN_GBP, 0, 16;
    /// VXLAN group policy flags.
    tun_gbp_flags, set_tun_gbp_flags, u8, W_TUN_GBP, 16, 8;
    /// All the tunnel flags ([`tnl_flags`]: oam, df, csum, key).
    tun_dp_flags, set_tun_dp_flags, u8, W_TUN_MISC, 0, 8;
}

/// The key's `dp_hash` bits for a computed 32-bit hash `h`: its low 12
/// bits, with bit 11 set when those are all 0 (0 means "no hash"; select
/// groups read at most the low 8 bits, so the choice is the same).
#[inline]
pub fn dp_hash_bits(h: u32) -> u32 {
    if h & 0xfff == 0 {
        0x800
    } else {
        h & 0xfff
    }
}

impl FlowKey {
    /// An all-zero key.
    pub const fn zero() -> Self {
        FlowKey { w: [0; FLOW_WORDS] }
    }

    /// Word `i` (no bounds check: see [`Word`]).
    #[inline(always)]
    pub fn word(&self, i: Word) -> u64 {
        self.w[i.index()]
    }

    /// MPLS label stack entry `i` (0 = top; 2 and above = the third).
    #[inline]
    pub fn mpls_lse(&self, i: usize) -> u32 {
        match i {
            0 => self.mpls_lse0(),
            1 => self.mpls_lse1(),
            _ => self.mpls_lse2(),
        }
    }

    /// Sets MPLS label stack entry `i` (0 = top; 2 and above = the third).
    #[inline]
    pub fn set_mpls_lse(&mut self, i: usize, v: u32) {
        match i {
            0 => self.set_mpls_lse0(v),
            1 => self.set_mpls_lse1(v),
            _ => self.set_mpls_lse2(v),
        }
    }

    #[inline(always)]
    fn get128(&self, word: usize) -> u128 {
        (u128::from(self.w[word]) << 64) | u128::from(self.w[word + 1])
    }

    #[inline(always)]
    fn set128(&mut self, word: usize, v: u128) {
        self.w[word] = (v >> 64) as u64;
        self.w[word + 1] = v as u64;
    }

    /// `tun_id`: the VNI or GRE key of a packet received through a tunnel
    /// (0 otherwise).
    #[inline(always)]
    pub fn tun_id(&self) -> u64 {
        self.w[W_TUN_ID]
    }
    /// Sets `tun_id`.
    #[inline(always)]
    pub fn set_tun_id(&mut self, v: u64) {
        self.w[W_TUN_ID] = v;
    }
    /// The outer IPv6 source of a packet received through a tunnel.
    pub fn tun_ipv6_src(&self) -> u128 {
        self.get128(W_TUN_IPV6_SRC)
    }
    /// Sets `tun_ipv6_src`.
    pub fn set_tun_ipv6_src(&mut self, v: u128) {
        self.set128(W_TUN_IPV6_SRC, v)
    }
    /// The outer IPv6 destination of a packet received through a tunnel.
    pub fn tun_ipv6_dst(&self) -> u128 {
        self.get128(W_TUN_IPV6_DST)
    }
    /// Sets `tun_ipv6_dst`.
    pub fn set_tun_ipv6_dst(&mut self, v: u128) {
        self.set128(W_TUN_IPV6_DST, v)
    }
    /// Whether the key carries a tunnel (its outer destination is set, as
    /// OVS's `flow_tnl_dst_is_set`).
    #[inline]
    pub fn has_tunnel(&self) -> bool {
        self.w[W_TUN_NW] >> 32 != 0 || self.w[W_TUN_IPV6_DST] | self.w[W_TUN_IPV6_DST + 1] != 0
    }
    /// `tun_metadataN`'s value (0 when absent: see
    /// [`FlowKey::tun_metadata_present`]).
    #[inline]
    pub fn tun_metadata(&self, n: usize) -> u64 {
        self.w.get(W_TUN_MD + n).copied().unwrap_or(0)
    }
    /// Whether `tun_metadataN` is present.
    #[inline]
    pub fn tun_metadata_present(&self, n: usize) -> bool {
        n < TUN_METADATA && self.w[W_TUN_GBP] & tun_md_present_bit(n) != 0
    }
    /// The presence bits of `tun_metadata0..7` (bit N: field N).
    #[inline]
    pub fn tun_metadata_present_map(&self) -> u8 {
        (self.w[W_TUN_GBP] >> TUN_MD_PRESENT_SHIFT) as u8
    }
    /// Sets `tun_metadataN` to `v` and marks it present (`n` <
    /// [`TUN_METADATA`]; others ignored).
    #[inline]
    pub fn set_tun_metadata(&mut self, n: usize, v: u64) {
        if n < TUN_METADATA {
            self.w[W_TUN_MD + n] = v;
            self.w[W_TUN_GBP] |= tun_md_present_bit(n);
        }
    }
    /// Whether every tunnel word is zero (a packet that came through no
    /// tunnel).
    #[inline]
    pub fn tunnel_is_zero(&self) -> bool {
        // (One OR over the words, no branch per word: the check runs on
        // every recirculation.)
        self.w[W_TUN_FIRST..].iter().fold(0, |a, &w| a | w) == 0
    }
    /// The key with its tunnel words cleared.
    #[inline]
    pub fn clear_tunnel(&mut self) {
        self.w[W_TUN_FIRST..].fill(0);
    }

    /// IPv6 source address as a big-endian number.
    pub fn ipv6_src(&self) -> u128 {
        self.get128(W_IPV6_SRC)
    }
    /// Sets the IPv6 source address.
    pub fn set_ipv6_src(&mut self, v: u128) {
        self.set128(W_IPV6_SRC, v)
    }
    /// IPv6 destination address.
    pub fn ipv6_dst(&self) -> u128 {
        self.get128(W_IPV6_DST)
    }
    /// Sets the IPv6 destination address.
    pub fn set_ipv6_dst(&mut self, v: u128) {
        self.set128(W_IPV6_DST, v)
    }
    /// ND target address.
    pub fn nd_target(&self) -> u128 {
        self.get128(W_ND_TARGET)
    }
    /// Sets the ND target address.
    pub fn set_nd_target(&mut self, v: u128) {
        self.set128(W_ND_TARGET, v)
    }

    /// The tracked connection's label.
    pub fn ct_label(&self) -> u128 {
        self.get128(W_CT_LABEL)
    }
    /// Sets the connection label.
    pub fn set_ct_label(&mut self, v: u128) {
        self.set128(W_CT_LABEL, v)
    }
    /// The original-direction tuple's IPv6 source.
    pub fn ct_ipv6_src(&self) -> u128 {
        self.get128(W_CT_IPV6_SRC)
    }
    /// Sets the original-direction IPv6 source.
    pub fn set_ct_ipv6_src(&mut self, v: u128) {
        self.set128(W_CT_IPV6_SRC, v)
    }
    /// The original-direction tuple's IPv6 destination.
    pub fn ct_ipv6_dst(&self) -> u128 {
        self.get128(W_CT_IPV6_DST)
    }
    /// Sets the original-direction IPv6 destination.
    pub fn set_ct_ipv6_dst(&mut self, v: u128) {
        self.set128(W_CT_IPV6_DST, v)
    }

    /// This key with every bit outside `mask` cleared.
    #[inline(always)]
    pub fn masked(&self, mask: &FlowMask) -> FlowKey {
        let mut out = FlowKey::zero();
        for i in 0..FLOW_WORDS {
            out.w[i] = self.w[i] & mask.w[i];
        }
        out
    }

    /// True when `self` and `other` agree on every bit of `mask`.
    #[inline(always)]
    pub fn eq_masked(&self, other: &FlowKey, mask: &FlowMask) -> bool {
        let mut diff = 0u64;
        for i in 0..FLOW_WORDS {
            diff |= (self.w[i] ^ other.w[i]) & mask.w[i];
        }
        diff == 0
    }

    /// True for IPv4 packets.
    pub fn is_ipv4(&self) -> bool {
        self.dl_type() == 0x0800
    }
    /// True for IPv6 packets.
    pub fn is_ipv6(&self) -> bool {
        self.dl_type() == 0x86dd
    }
    /// True for IPv4 or IPv6.
    pub fn is_ip_any(&self) -> bool {
        self.is_ipv4() || self.is_ipv6()
    }
}

/// Number of tunnel words (`W_TUN_FIRST..FLOW_WORDS`).
pub const TUN_WORDS: usize = FLOW_WORDS - W_TUN_FIRST;

/// Writes the tunnel words (`W_TUN_FIRST..`, in order) of a key that a
/// decapsulated packet with metadata `m` gets: the words the `set_tun_*`
/// setters would leave after [`FlowKey::clear_tunnel`], each written once
/// and whole.
///
/// Why: a decapsulation fills these per packet. Through a scratch key and
/// the field setters (a read-modify-write each) plus a copy, `tnl_pop`
/// spent ~130 instructions per packet on them by callgrind; written
/// straight into the packet's record they cost a store each.
#[inline]
pub fn tunnel_words(m: &flowpath_wire::tunnel::TunnelMeta, out: &mut [u64; TUN_WORDS]) {
    use std::hint::black_box;
    const A: usize = W_TUN_FIRST;
    out[W_TUN_ID - A] = m.tun_id;
    // (Each field read as it was written: `m` was just filled field by
    // field; neighbours merged into one wider load stall on store
    // forwarding.)
    out[W_TUN_NW - A] = u64::from(black_box(m.ipv4_src)) | u64::from(black_box(m.ipv4_dst)) << 32;
    out[W_TUN_MISC - A] = u64::from(black_box(m.flags))
        | u64::from(black_box(m.tos)) << 16
        | u64::from(black_box(m.ttl)) << 24
        | u64::from(black_box(m.tp_src)) << 32
        | u64::from(black_box(m.tp_dst)) << 48;
    out[W_TUN_GBP - A] = u64::from(black_box(m.md_present)) << TUN_MD_PRESENT_SHIFT;
    out[W_TUN_IPV6_SRC - A] = (m.ipv6_src >> 64) as u64;
    out[W_TUN_IPV6_SRC + 1 - A] = m.ipv6_src as u64;
    out[W_TUN_IPV6_DST - A] = (m.ipv6_dst >> 64) as u64;
    out[W_TUN_IPV6_DST + 1 - A] = m.ipv6_dst as u64;
    for (d, v) in out[W_TUN_MD - A..].iter_mut().zip(m.md) {
        *d = v;
    }
}

impl FlowMask {
    /// A mask with no significant bit (matches everything).
    pub const fn catchall() -> Self {
        FlowMask { w: [0; FLOW_WORDS] }
    }

    /// This mask's words as a key value (for the field accessors).
    pub fn to_key(&self) -> FlowKey {
        FlowKey { w: self.w }
    }

    /// Builds a mask from a key value whose 1 bits are the significant bits.
    pub fn from_key(k: &FlowKey) -> Self {
        FlowMask { w: k.w }
    }

    /// Bitwise OR of two masks (the union of significant bits).
    pub fn union(&self, other: &FlowMask) -> FlowMask {
        let mut out = *self;
        out.or_assign(other);
        out
    }

    /// ORs `other` into `self`.
    #[inline(always)]
    pub fn or_assign(&mut self, other: &FlowMask) {
        for i in 0..FLOW_WORDS {
            self.w[i] |= other.w[i];
        }
    }

    /// Bitwise AND of two masks.
    pub fn intersect(&self, other: &FlowMask) -> FlowMask {
        let mut out = *self;
        for i in 0..FLOW_WORDS {
            out.w[i] &= other.w[i];
        }
        out
    }

    /// True when every significant bit of `self` is significant in `other`.
    pub fn is_subset_of(&self, other: &FlowMask) -> bool {
        (0..FLOW_WORDS).all(|i| self.w[i] & !other.w[i] == 0)
    }

    /// True when no bit is significant.
    pub fn is_catchall(&self) -> bool {
        self.w.iter().all(|w| *w == 0)
    }

    /// Bitmap of the words that have at least one significant bit.
    pub fn word_map(&self) -> u64 {
        let mut map = 0u64;
        for (i, w) in self.w.iter().enumerate() {
            if *w != 0 {
                map |= 1 << i;
            }
        }
        map
    }
}

/// Words of [`Regs`]: eight 64-bit `xreg`s, `metadata` and `conj_id`.
pub const REG_WORDS: usize = 10;

/// Word of [`Regs`] holding the OpenFlow `metadata` field.
pub const W_METADATA: usize = 8;

/// Word of [`Regs`] holding `conj_id` (low 32 bits): the conjunctive
/// match the classifier found, for its second lookup.
pub const W_CONJ_ID: usize = 9;

/// The OpenFlow pipeline's registers and metadata: translation-time state
/// that no datapath key carries (every packet starts with all of them
/// zero, and OVS never puts them in a megaflow).
///
/// Word `i` < 8 is `xreg{i}`: `reg{2i}` in its high 32 bits, `reg{2i+1}`
/// in its low 32 bits (so `xxreg{j}` is words `2j` (high) and `2j+1`, as
/// OVS lays them out); word [`W_METADATA`] is `metadata`, word
/// [`W_CONJ_ID`] `conj_id`. A mask over
/// registers is the same type, 1 bits significant.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub struct Regs {
    /// The raw words.
    pub w: [u64; REG_WORDS],
}

impl Regs {
    /// All registers zero (also: a mask with no significant bit).
    pub const fn zero() -> Self {
        Regs { w: [0; REG_WORDS] }
    }

    /// `reg{i}` (0..16).
    pub fn reg(&self, i: usize) -> u32 {
        let w = self.w[i / 2];
        if i.is_multiple_of(2) {
            (w >> 32) as u32
        } else {
            w as u32
        }
    }

    /// These registers with every bit outside `mask` cleared.
    #[inline(always)]
    pub fn masked(&self, mask: &Regs) -> Regs {
        let mut out = Regs::zero();
        for i in 0..REG_WORDS {
            out.w[i] = self.w[i] & mask.w[i];
        }
        out
    }

    /// ORs `other` into `self`.
    pub fn or_assign(&mut self, other: &Regs) {
        for i in 0..REG_WORDS {
            self.w[i] |= other.w[i];
        }
    }

    /// Bitwise AND.
    pub fn intersect(&self, other: &Regs) -> Regs {
        self.masked(other)
    }

    /// True when every word is zero.
    pub fn is_zero(&self) -> bool {
        self.w.iter().all(|w| *w == 0)
    }

    /// True when `self` and `other` agree on every bit of `mask`.
    pub fn eq_masked(&self, other: &Regs, mask: &Regs) -> bool {
        (0..REG_WORDS).all(|i| (self.w[i] ^ other.w[i]) & mask.w[i] == 0)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn word_positions() {
        for (i, w) in super::Word::ALL.iter().enumerate() {
            assert_eq!(w.index(), i);
            assert_eq!(super::Word::new(i), Some(*w));
        }
        assert_eq!(super::Word::new(super::FLOW_WORDS), None);
    }

    use super::*;

    proptest::proptest! {
        /// The words written whole are those the field setters leave.
        #[test]
        fn tunnel_words_are_what_the_setters_write(
            id: u64, s4: u32, d4: u32, s6: u128, d6: u128, tos: u8, ttl: u8,
            sp: u16, dp: u16, flags: u8, md: [u64; 8], present: u8,
        ) {
            // (An absent option's value is 0, as the decapsulation leaves it.)
            let md: [u64; 8] = std::array::from_fn(|i| if present >> i & 1 != 0 { md[i] } else { 0 });
            let m = flowpath_wire::tunnel::TunnelMeta {
                tun_id: id, ipv4_src: s4, ipv4_dst: d4, ipv6_src: s6, ipv6_dst: d6,
                tos, ttl, tp_src: sp, tp_dst: dp, flags, md, md_present: present,
            };
            let mut k = FlowKey::zero();
            k.w.fill(u64::MAX);
            k.clear_tunnel();
            k.set_tun_id(id);
            k.set_tun_src(s4);
            k.set_tun_dst(d4);
            k.set_tun_ipv6_src(s6);
            k.set_tun_ipv6_dst(d6);
            k.set_tun_tos(tos);
            k.set_tun_ttl(ttl);
            k.set_tun_tp_src(sp);
            k.set_tun_tp_dst(dp);
            k.set_tun_dp_flags(flags);
            for (i, v) in md.iter().enumerate() {
                if present >> i & 1 != 0 {
                    k.set_tun_metadata(i, *v);
                }
            }
            let mut out = [0x5a5a_5a5a_5a5a_5a5au64; TUN_WORDS];
            tunnel_words(&m, &mut out);
            proptest::prop_assert_eq!(&out[..], &k.w[W_TUN_FIRST..]);
        }
    }

    #[test]
    fn accessors_round_trip_and_do_not_overlap() {
        let mut k = FlowKey::zero();
        k.set_in_port(0xbeef);
        k.set_recirc_id(0xdead);
        k.set_dp_hash(0xafe);
        k.set_ct_state(0x5a);
        k.set_ct_zone(0xbeef);
        k.set_ct_nw_proto(0xc3);
        k.set_ct_mark(0x1234_5678);
        k.set_ct_tp_src(0x1111);
        k.set_ct_tp_dst(0x2222);
        k.set_ct_nw_src(0x3333_3333);
        k.set_ct_nw_dst(0x4444_4444);
        k.set_ct_label(u128::MAX - 5);
        k.set_ct_ipv6_src(7 << 64);
        k.set_ct_ipv6_dst(9);
        k.set_dl_type(0x86dd);
        k.set_nw_proto(58);
        k.set_nw_frag(3);
        k.set_nw_src(0x0102_0304);
        k.set_nw_dst(0x0506_0708);
        k.set_tp_src(0xaaaa);
        k.set_tp_dst(0x5555);
        k.set_tcp_flags(0xfff);
        k.set_nw_tos(0xfd);
        k.set_nw_ttl(0x40);
        k.set_dl_dst(0x0011_2233_4455);
        k.set_vlan_tci(0x1005);
        k.set_dl_src(0x6677_8899_aabb);
        k.set_vlan_tci_inner(0x1fff);
        k.set_arp_sha(0xffff_ffff_ffff);
        k.set_arp_tha(0x0000_0000_0001);
        k.set_ipv6_label(0xfffff);
        k.set_ipv6_src(u128::MAX - 1);
        k.set_ipv6_dst(1);
        k.set_nd_target(0x1234 << 100);
        assert_eq!(k.in_port(), 0xbeef);
        assert_eq!(k.recirc_id(), 0xdead);
        assert_eq!(k.dp_hash(), 0xafe);
        assert_eq!(
            (k.ct_state(), k.ct_zone(), k.ct_nw_proto(), k.ct_mark()),
            (0x5a, 0xbeef, 0xc3, 0x1234_5678)
        );
        assert_eq!((k.ct_tp_src(), k.ct_tp_dst()), (0x1111, 0x2222));
        assert_eq!((k.ct_nw_src(), k.ct_nw_dst()), (0x3333_3333, 0x4444_4444));
        assert_eq!(
            (k.ct_label(), k.ct_ipv6_src(), k.ct_ipv6_dst()),
            (u128::MAX - 5, 7 << 64, 9)
        );
        assert_eq!(k.dl_type(), 0x86dd);
        assert_eq!(k.nw_proto(), 58);
        assert_eq!(k.nw_frag(), 3);
        assert_eq!(k.nw_src(), 0x0102_0304);
        assert_eq!(k.nw_dst(), 0x0506_0708);
        assert_eq!(k.tp_src(), 0xaaaa);
        assert_eq!(k.tp_dst(), 0x5555);
        assert_eq!(k.tcp_flags(), 0xfff);
        assert_eq!(k.nw_tos(), 0xfd);
        assert_eq!(k.nw_ttl(), 0x40);
        assert_eq!(k.dl_dst(), 0x0011_2233_4455);
        assert_eq!(k.vlan_tci(), 0x1005);
        assert_eq!(k.dl_src(), 0x6677_8899_aabb);
        assert_eq!(k.vlan_tci_inner(), 0x1fff);
        assert_eq!(k.arp_sha(), 0xffff_ffff_ffff);
        assert_eq!(k.arp_tha(), 1);
        assert_eq!(k.ipv6_label(), 0xfffff);
        assert_eq!(k.ipv6_src(), u128::MAX - 1);
        assert_eq!(k.ipv6_dst(), 1);
        assert_eq!(k.nd_target(), 0x1234 << 100);
        assert_eq!(k.w[14] | k.w[15], 0);
        k.set_pkt_mark(0xffff_ffff);
        k.set_skb_priority(5);
        assert_eq!((k.pkt_mark(), k.skb_priority()), (0xffff_ffff, 5));
    }

    #[test]
    fn setters_truncate_to_width() {
        let mut k = FlowKey::zero();
        k.set_nw_frag(0xff);
        assert_eq!(k.nw_frag(), 3);
        assert_eq!(k.nw_proto(), 0);
        k.set_tcp_flags(0xffff);
        assert_eq!(k.tcp_flags(), 0xfff);
        assert_eq!(k.nw_tos(), 0);
    }

    #[test]
    fn masked_compare() {
        let mut a = FlowKey::zero();
        let mut b = FlowKey::zero();
        a.set_nw_dst(0x0a00_0001);
        b.set_nw_dst(0x0a00_00ff);
        let mut m = FlowMask::catchall();
        m.w[W_NW] = 0xffff_ff00 << 32;
        assert!(a.eq_masked(&b, &m));
        m.w[W_NW] |= 0xff << 32;
        assert!(!a.eq_masked(&b, &m));
        assert_eq!(a.masked(&m), a);
    }
}
