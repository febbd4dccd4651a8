//! Miniflow extraction: Ethernet frame → [`FlowKey`], as OVS's
//! `miniflow_extract()` (3.x) does it.
//!
//! One pass over the frame, front to back, through the checked views of
//! `flowpath_wire`. No allocation, no panic, no read past the frame: every
//! header is length-checked before a field is taken from it, and a header
//! that fails its check ends the walk with the fields gathered so far.
//!
//! # What is extracted
//!
//! - `in_port` always. A frame shorter than 14 bytes yields nothing else.
//! - `dl_dst`, `dl_src`. Up to two VLAN tags (TPID 0x8100 or 0x88a8): the
//!   outer TCI goes to `vlan_tci`, the second to `vlan_tci_inner`, each with
//!   [`VLAN_CFI`] set to mean "present". A tag is parsed only if its TCI and
//!   the following type field are in the frame (4 + 2 bytes); otherwise, and
//!   for a third tag, the TPID itself becomes `dl_type` and parsing stops
//!   there (e.g. a truncated tag gives `dl_type = 0x8100`).
//! - `dl_type`: a type field ≥ 0x0600 is the EtherType; below that the frame
//!   is 802.3 and an LLC/SNAP header (`AA AA 03 00 00 00`) with a protocol id
//!   ≥ 0x0600 supplies it, anything else gives 0x05ff.
//! - IPv4 (0x0800): ≥ 20 bytes, version 4, IHL ≥ 5, `IHL*4 ≤ total length ≤
//!   bytes available`, and at most 65535 bytes of padding after the total
//!   length; otherwise no L3 field at all. Then `nw_src`, `nw_dst`,
//!   `nw_proto`, `nw_tos` (the whole byte), `nw_ttl`, `nw_frag`
//!   ([`FRAG_ANY`] if MF or offset ≠ 0, plus [`FRAG_LATER`] if offset ≠ 0).
//! - IPv6 (0x86dd): ≥ 40 bytes, version 6, `40 + payload length ≤ bytes
//!   available`, padding ≤ 65535 bytes; otherwise no L3 field. Then
//!   `ipv6_src`, `ipv6_dst`, `ipv6_label`, and after walking the extension
//!   headers `nw_tos` (traffic class), `nw_ttl` (hop limit), `nw_proto` (the
//!   last next-header value) and `nw_frag`. Walked: hop-by-hop (0), routing
//!   (43), destination options (60) — `(len + 1) * 8` bytes —, AH (51) —
//!   `(len + 2) * 4` bytes —, fragment (44). Every header needs 8 bytes and
//!   its whole length in the payload; a short one makes the walk fail, which
//!   leaves `nw_proto`, `nw_tos`, `nw_ttl` and `nw_frag` 0 (addresses and
//!   label stay). A fragment header with a non-zero offset/flags word sets
//!   [`FRAG_ANY`]; a non-zero offset also sets [`FRAG_LATER`], stops the walk
//!   and reports `nw_proto` = 44 (as OVS). Any other next header ends the
//!   walk (ESP 50, no-next-header 59, mobility 135 ...).
//! - Transport, unless [`FRAG_LATER`], dispatched on `nw_proto` alone (so
//!   ICMPv6 inside IPv4 is read as ICMPv6, as OVS does), over the IP payload
//!   without its padding: TCP (≥ 20 bytes, data offset ≥ 5, offset × 4 ≤
//!   bytes) → `tp_src`, `tp_dst`, `tcp_flags` (low 12 bits of the
//!   offset/flags word); UDP (≥ 8) and SCTP (≥ 12) → ports; ICMP and IGMP
//!   (≥ 8) → `tp_src` = type, `tp_dst` = code; ICMPv6 (≥ 8) → type/code and,
//!   for a neighbor solicitation (135) or advertisement (136) with code 0,
//!   `nd_target` (when its 16 bytes are present) and the options: a source
//!   link-layer address option (type 1, 8 bytes) of an NS gives `arp_sha`, a
//!   target link-layer address option (type 2, 8 bytes) of an NA gives
//!   `arp_tha`; an option of length 0, an option running past the message,
//!   or a second SLL (TLL) after a non-zero first one makes the ND part
//!   invalid: `nd_target`, `arp_sha`, `arp_tha` all 0, type and code kept.
//!   Also, as OVS: `nd_reserved` = the word after the checksum (an NA's
//!   R/S/O flags), and `nd_options_type` = the type of the first SLL or TLL
//!   option of 8 bytes, in either message (kept when the rest is invalid).
//! - ARP / RARP (0x0806 / 0x8035): ≥ 28 bytes with htype 1, ptype 0x0800,
//!   hlen 6, plen 4: `nw_proto` = opcode if ≤ 0xff else 0, `nw_src` = SPA,
//!   `nw_dst` = TPA, `arp_sha`, `arp_tha`.
//! - MPLS (0x8847 / 0x8848): the first label stack entry (4 bytes, as on
//!   the wire) into `mpls_lse0` and, while the entry read is not the bottom
//!   of the stack, the second into `mpls_lse1` and the third into
//!   `mpls_lse2`; an entry cut short by the end of the frame is not read;
//!   nothing after the stack is parsed (as OVS).
//! - Any other EtherType (LLDP, ...): L2 fields only.
//!
//! [`Layers`] reports byte offsets into the frame: `l3` is where the L3
//! header starts (just past the Ethernet header, VLAN tags and LLC/SNAP; set
//! whenever the Ethernet header is complete, whatever the EtherType, like
//! OVS's `l3_ofs`); `l4` is where the transport header starts, set only when
//! transport fields were extracted. Either is [`NONE`] when absent or when
//! the offset does not fit in 16 bits.
//!
//! Invariants (checked by the tests and the fuzz target): the key's unused
//! bits stay zero; `l3 ≤ l4 ≤ frame.len()` when both are set; the result is
//! a pure function of `(frame, in_port)`.

use flowpath_wire::ethernet::{self, ethertype, is_vlan_tpid, EthernetFrame};
use flowpath_wire::icmpv6::{msg_type as icmp6_type, nd_opt};
use flowpath_wire::ip_proto;
use flowpath_wire::ipv4::{FLAG_MF, FRAG_OFFSET_MASK};
use flowpath_wire::ipv6::{is_ext_header, Ipv6ExtHeader, Ipv6FragHeader};
use flowpath_wire::{ArpPacket, Ipv6Packet, TcpPacket};

use crate::key::{FlowKey, FRAG_ANY, FRAG_LATER, VLAN_CFI, W_CT_FIRST, W_IPV6_MISC, W_MPLS};

/// Marks an absent layer in [`Layers`].
pub const NONE: u16 = u16::MAX;

/// Byte offsets of the layers found by [`extract_with_layers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layers {
    /// Start of the L3 header (after L2 tags and LLC/SNAP), or [`NONE`].
    pub l3: u16,
    /// Start of the transport header, or [`NONE`] when no transport field
    /// was extracted.
    pub l4: u16,
    /// Number of VLAN tags parsed (0..=2).
    pub vlan_count: u8,
}

impl Layers {
    /// No layer found.
    pub const EMPTY: Layers = Layers {
        l3: NONE,
        l4: NONE,
        vlan_count: 0,
    };
}

impl Default for Layers {
    fn default() -> Self {
        Layers::EMPTY
    }
}

/// Most VLAN tags parsed (OVS's default `FLOW_MAX_VLAN_HEADERS`).
const MAX_VLAN_TAGS: u8 = 2;
/// Most padding OVS accepts after an IP packet (its `l2_pad_size` is 16 bits).
const MAX_L2_PAD: usize = u16::MAX as usize;

/// Extracts the flow key of `frame` as received on `in_port`.
#[inline]
pub fn extract(frame: &[u8], in_port: u32) -> FlowKey {
    extract_with_layers(frame, in_port).0
}

/// Why a frame can never be a valid packet (see [`never_valid`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Shorter than an Ethernet header (14 bytes).
    Runt,
    /// An IPv4 header (EtherType 0x0800 after any VLAN tags) whose
    /// version is not 4, whose header length is under 20 bytes, or whose
    /// total length is shorter than its own header.
    BadIpv4Header,
}

/// Bitmap of the key words (bit `i` = word `i`) that the extractor can
/// make non-zero in a key with this `dl_type` and `nw_proto`: what an
/// exact-match megaflow of such packets must cover (the datapath's
/// `exact_mask_for`). IPv4 keys use words 0–4 only — except with nw_proto
/// 58, whose ICMPv6 neighbour discovery fields (nd_sll, nd_tll, nd_target,
/// nd_reserved) are extracted from IPv4 too, as OVS's extraction does; ARP and RARP keys
/// add the hardware addresses (5, 6); any other type may use every word.
/// The extraction tests check it on generated packets and on the capture
/// corpus.
pub fn possible_words(dl_type: u16, nw_proto: u8) -> u64 {
    const BASE: u64 = 0b1_1111;
    match (dl_type, nw_proto) {
        (ethertype::IPV4, ip_proto::ICMPV6) => {
            BASE | 1 << 5 | 1 << 6 | 1 << W_IPV6_MISC | 1 << 12 | 1 << 13
        }
        (ethertype::IPV4, _) => BASE,
        (ethertype::ARP | ethertype::RARP, _) => BASE | 1 << 5 | 1 << 6,
        (ethertype::MPLS | ethertype::MPLS_MCAST, _) => BASE | 1 << W_IPV6_MISC | 1 << W_MPLS,
        _ => 0x3fff,
    }
}

/// Bitmap of the non-zero words of `key`.
pub fn used_words(key: &FlowKey) -> u64 {
    let mut m = 0u64;
    for (i, w) in key.w.iter().enumerate() {
        m |= u64::from(*w != 0) << i;
    }
    m
}

/// Input that no sender can have meant as a packet: a frame shorter than
/// an Ethernet header, or an IPv4 header with impossible lengths. The
/// datapath drops such frames before classification (no upcall, no
/// megaflow), counted; a frame cut short by a capture's snap length is
/// *not* such input (its headers are whole) and is classified as usual.
/// Reads at most the first bytes of the headers; never panics.
pub fn never_valid(frame: &[u8]) -> Option<Invalid> {
    if frame.len() < 14 {
        return Some(Invalid::Runt);
    }
    let be16 = |i: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(i)?, *frame.get(i + 1)?]))
    };
    let mut off = 12;
    let mut et = be16(off)?;
    while et == 0x8100 || et == 0x88a8 {
        off += 4;
        et = be16(off)?;
    }
    if et != 0x0800 {
        return None;
    }
    let l3 = off + 2;
    let v = *frame.get(l3)?;
    let ihl = usize::from(v & 0x0f) * 4;
    if v >> 4 != 4 || ihl < 20 {
        return Some(Invalid::BadIpv4Header);
    }
    match be16(l3 + 2) {
        Some(total) if usize::from(total) < ihl => Some(Invalid::BadIpv4Header),
        _ => None,
    }
}

/// Extracts the flow key of `frame` and the offsets of its layers.
pub fn extract_with_layers(frame: &[u8], in_port: u32) -> (FlowKey, Layers) {
    extract_impl(frame, in_port)
}

/// Extracts the flow key of `frame` into `key` (overwriting all of it) and
/// returns the offsets of its layers: the same result as
/// [`extract_with_layers`], written in place.
///
/// Why: a batch keeps its keys in an array; extracting straight into the
/// packet's slot avoids copying the 128-byte key out of a temporary. That
/// copy was measured to cost a store-forwarding stall per packet (the key
/// is written word by word and the copy reads it back 16 bytes at a time
/// right away): ~17 % of the cycles of an EMC-hit replay.
#[inline]
pub fn extract_into(frame: &[u8], in_port: u32, key: &mut FlowKey) -> Layers {
    if let Some(layers) = fast_ipv4_into(frame, in_port, key) {
        key.w[W_CT_FIRST..].fill(0);
        return layers;
    }
    let (k, layers) = walk(frame, in_port);
    *key = k;
    layers
}

/// [`extract_into`] for a key whose words `W_CT_FIRST..` are zero already
/// (a batch's free slot: `Batch::push_with`); they are left alone. What a
/// recirculated packet's pass parses with: its connection-tracking and
/// tunnel words are written after (clearing them first cost a `memset`
/// call per packet, ~37 instructions by callgrind on decapsulated VXLAN).
#[inline]
pub fn extract_into_zeroed_ext(frame: &[u8], in_port: u32, key: &mut FlowKey) -> Layers {
    debug_assert!(key.w[W_CT_FIRST..].iter().all(|&w| w == 0));
    if let Some(layers) = fast_ipv4_into(frame, in_port, key) {
        return layers;
    }
    let (k, layers) = walk(frame, in_port);
    *key = k;
    layers
}

/// [`extract_into`] for frames from the wire: `Err` for a frame
/// [`never_valid`] rejects (the key slot then holds nothing meaningful);
/// the check runs only when the straight line does not answer (a frame it
/// answers is untagged IPv4 with a 20-byte header and a total length of at
/// least 20, which `never_valid` always accepts: ~20 instructions per
/// packet by callgrind). Also tells whether the key is known to use only
/// words 0..5 (the straight-line case answered: its other words are 0),
/// so a hash may skip them. (Its own dispatch: sharing `extract_impl`'s,
/// returning the flag with the key, cost ~43 instructions per packet by
/// callgrind, code generation.)
#[inline]
pub fn extract_into_checked(
    frame: &[u8],
    in_port: u32,
    key: &mut FlowKey,
) -> Result<(Layers, bool), Invalid> {
    key.w[W_CT_FIRST..].fill(0);
    extract_into_rx(frame, in_port, key)
}

/// [`extract_into_checked`] for a key whose connection-tracking words
/// (`W_CT_FIRST..`) are zero already: it writes words `0..W_CT_FIRST` and
/// leaves those alone (every extracted key has them zero), so a received
/// packet never touches its key's third cache line. The batch's slots
/// keep that invariant (`Batch::push_with`).
///
/// Why: with the 24-word key the straight line (built in place already:
/// the compiler elides the temporary) also stored the 64 zero bytes of
/// the third line, which nothing on the received packet's path reads;
/// leaving them out is 3 instructions per packet by callgrind (`flowpath
/// bench --flows 1000`, steady state).
#[inline]
pub fn extract_into_rx(
    frame: &[u8],
    in_port: u32,
    key: &mut FlowKey,
) -> Result<(Layers, bool), Invalid> {
    debug_assert!(key.w[W_CT_FIRST..].iter().all(|&w| w == 0));
    if let Some(layers) = fast_ipv4_into(frame, in_port, key) {
        return Ok((layers, true));
    }
    checked_walk(frame, in_port, key)
}

/// [`extract_into_checked`]'s frames that the straight line does not
/// answer: the validity check and the general walk, out of line (inlined,
/// the walk's many live values made the caller's straight line spill
/// registers to the stack).
#[cold]
#[inline(never)]
fn checked_walk(frame: &[u8], in_port: u32, key: &mut FlowKey) -> Result<(Layers, bool), Invalid> {
    if let Some(why) = never_valid(frame) {
        return Err(why);
    }
    let (k, layers) = walk(frame, in_port);
    key.w[..W_CT_FIRST].copy_from_slice(&k.w[..W_CT_FIRST]);
    Ok((layers, false))
}

/// The extractor; inlined into both entry points so the key is built in
/// registers and stored once: the common case's straight line
/// ([`fast_ipv4_into`]) when it applies, else the general walk.
#[inline(always)]
fn extract_impl(frame: &[u8], in_port: u32) -> (FlowKey, Layers) {
    let mut k = FlowKey::zero();
    if let Some(layers) = fast_ipv4_into(frame, in_port, &mut k) {
        return (k, layers);
    }
    walk(frame, in_port)
}

/// The general walk alone, without the straight-line shortcut: the reference
/// the shortcut is tested against (the result is always the same as
/// [`extract_with_layers`]'s).
pub fn extract_general(frame: &[u8], in_port: u32) -> (FlowKey, Layers) {
    walk(frame, in_port)
}

/// The common case in one straight line ("study", as OVS's specialised
/// miniflow extraction): an untagged Ethernet II frame with an IPv4 header
/// without options that is not a fragment, and a whole UDP or TCP header.
/// Its key's five words are built directly — no per-field read-modify-write,
/// no per-header dispatch. `None` for anything else, which the general walk
/// takes; where it answers, it gives exactly the walk's key and layers
/// (differential tests: random frames around the case's edges, the capture
/// corpus).
///
/// Writes straight into `key` (its words `0..W_CT_FIRST`; the
/// connection-tracking words are left as they are), and only once every
/// check has passed: on `None`, `key` is untouched.
#[inline(always)]
fn fast_ipv4_into(frame: &[u8], in_port: u32, key: &mut FlowKey) -> Option<Layers> {
    use crate::key::{W_L2_DST, W_L2_SRC, W_META, W_NW, W_TP};
    // Ethernet (14), IPv4 without options (20), the UDP header (8).
    let b: &[u8; 42] = frame.first_chunk()?;
    if b[12] != 0x08 || b[13] != 0x00 || b[14] != 0x45 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([b[16], b[17]]));
    let l3_len = frame.len() - 14;
    if total < 20 || l3_len < total || l3_len - total > MAX_L2_PAD {
        return None;
    }
    if u16::from_be_bytes([b[20], b[21]]) & (FLAG_MF | FRAG_OFFSET_MASK) != 0 {
        return None;
    }
    let proto = b[23];
    let payload = total - 20;
    let flags = match proto {
        ip_proto::UDP if payload >= 8 => 0,
        ip_proto::TCP if payload >= 20 => {
            let &[o, f] = frame.get(46..48)?.first_chunk::<2>()?;
            let doff = usize::from(o >> 4) * 4;
            if doff < 20 || payload < doff {
                return None;
            }
            u64::from(u16::from_be_bytes([o, f]) & 0x0fff)
        }
        _ => return None,
    };
    let k = &mut key.w;
    k[W_META] =
        u64::from(in_port & 0xffff) | u64::from(ethertype::IPV4) << 32 | u64::from(proto) << 48;
    k[W_NW] = u64::from(u32::from_be_bytes([b[26], b[27], b[28], b[29]]))
        | u64::from(u32::from_be_bytes([b[30], b[31], b[32], b[33]])) << 32;
    k[W_TP] = u64::from(u32::from_be_bytes([0, 0, b[34], b[35]]))
        | u64::from(u16::from_be_bytes([b[36], b[37]])) << 16
        | flags << 32
        | u64::from(b[15]) << 48
        | u64::from(b[22]) << 56;
    k[W_L2_DST] = u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]]);
    k[W_L2_SRC] = u64::from_be_bytes([0, 0, b[6], b[7], b[8], b[9], b[10], b[11]]);
    k[W_L2_SRC + 1..W_CT_FIRST].fill(0);
    Some(Layers {
        l3: 14,
        l4: 34,
        vlan_count: 0,
    })
}

/// The general walk over any frame.
#[inline(always)]
fn walk(frame: &[u8], in_port: u32) -> (FlowKey, Layers) {
    let mut k = FlowKey::zero();
    let mut layers = Layers::EMPTY;
    k.set_in_port(in_port);

    // The Ethernet header as one fixed-size array: the addresses and type
    // come out of it without a bounds check per field.
    let Some(&[d0, d1, d2, d3, d4, d5, s0, s1, s2, s3, s4, s5, t0, t1]) =
        frame.first_chunk::<{ EthernetFrame::<&[u8]>::HEADER_LEN }>()
    else {
        return (k, layers);
    };
    k.set_dl_dst(u64::from_be_bytes([0, 0, d0, d1, d2, d3, d4, d5]));
    k.set_dl_src(u64::from_be_bytes([0, 0, s0, s1, s2, s3, s4, s5]));

    // `off` is the offset of the current type field.
    let mut off = 12usize;
    let mut ty = u16::from_be_bytes([t0, t1]);
    while is_vlan_tpid(ty) && layers.vlan_count < MAX_VLAN_TAGS {
        // TPID at off, TCI at off+2, next type at off+4..off+6.
        let Some(&[t0, t1, n0, n1]) = frame.get(off + 2..off + 6) else {
            break;
        };
        let tci = u16::from_be_bytes([t0, t1]) | VLAN_CFI;
        if layers.vlan_count == 0 {
            k.set_vlan_tci(tci);
        } else {
            k.set_vlan_tci_inner(tci);
        }
        layers.vlan_count += 1;
        off += 4;
        ty = u16::from_be_bytes([n0, n1]);
    }
    off += 2;
    let dl_type = if ty >= ethertype::MIN {
        ty
    } else {
        match ethernet::llc_snap_ethertype(tail(frame, off)) {
            Some(snap) if snap >= ethertype::MIN => {
                off += ethernet::LLC_SNAP_LEN;
                snap
            }
            _ => ethertype::NONE,
        }
    };
    k.set_dl_type(dl_type);
    layers.l3 = offset(off);

    let l3 = tail(frame, off);
    match dl_type {
        ethertype::IPV4 => {
            if let Some((proto, frag, l4_off, payload)) = ipv4(&mut k, l3) {
                transport(&mut k, &mut layers, proto, frag, off + l4_off, payload);
            }
        }
        ethertype::IPV6 => {
            if let Some((proto, frag, l4_off, payload)) = ipv6(&mut k, l3) {
                transport(&mut k, &mut layers, proto, frag, off + l4_off, payload);
            }
        }
        ethertype::ARP | ethertype::RARP => arp(&mut k, l3),
        ethertype::MPLS | ethertype::MPLS_MCAST => mpls(&mut k, l3),
        _ => {}
    }
    (k, layers)
}

/// The MPLS label stack: its first three entries into the key, as OVS
/// (entries up to the bottom of the stack or the end of the frame; nothing
/// after the stack is parsed).
#[inline]
fn mpls(k: &mut FlowKey, l3: &[u8]) {
    let mut entries = l3.chunks_exact(4);
    if let Some(&[a, b, c, d]) = entries.next() {
        let lse = u32::from_be_bytes([a, b, c, d]);
        k.set_mpls_lse0(lse);
        if lse & MPLS_BOS != 0 {
            return;
        }
        if let Some(&[a, b, c, d]) = entries.next() {
            let lse = u32::from_be_bytes([a, b, c, d]);
            k.set_mpls_lse1(lse);
            if lse & MPLS_BOS != 0 {
                return;
            }
            if let Some(&[a, b, c, d]) = entries.next() {
                k.set_mpls_lse2(u32::from_be_bytes([a, b, c, d]));
            }
        }
    }
}

/// The bottom-of-stack bit of an MPLS label stack entry.
const MPLS_BOS: u32 = 1 << 8;

/// `frame[off..]`, or empty.
#[inline(always)]
fn tail(frame: &[u8], off: usize) -> &[u8] {
    frame.get(off..).unwrap_or(&[])
}

/// `off` as a layer offset, [`NONE`] if it does not fit.
#[inline(always)]
fn offset(off: usize) -> u16 {
    u16::try_from(off)
        .ok()
        .filter(|o| *o != NONE)
        .unwrap_or(NONE)
}

/// Validates an IPv4 header and extracts its fields. Returns the protocol,
/// the fragment bits, the payload's offset in `l3` and the payload.
///
/// The checks are those of `Ipv4Packet::check_len` (≥ 20 bytes, version
/// 4, IHL ≥ 5, `IHL*4 ≤ total length ≤ bytes available`), made on the
/// fixed 20-byte header array so that no field read needs its own bounds
/// check (the differential tests against etherparse and the capture corpus
/// hold it to the view's behaviour).
#[inline(always)]
fn ipv4<'a>(k: &mut FlowKey, l3: &'a [u8]) -> Option<(u8, u8, usize, &'a [u8])> {
    let h: &[u8; 20] = l3.first_chunk()?;
    if h[0] >> 4 != 4 {
        return None;
    }
    let hl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if hl < 20 || total < hl || l3.len() < total {
        return None;
    }
    if l3.len() - total > MAX_L2_PAD {
        return None;
    }
    k.set_nw_src(u32::from_be_bytes([h[12], h[13], h[14], h[15]]));
    k.set_nw_dst(u32::from_be_bytes([h[16], h[17], h[18], h[19]]));
    let proto = h[9];
    let flags_frag = u16::from_be_bytes([h[6], h[7]]);
    let mut frag = 0;
    if flags_frag & (FLAG_MF | FRAG_OFFSET_MASK) != 0 {
        frag = FRAG_ANY;
        if flags_frag & FRAG_OFFSET_MASK != 0 {
            frag |= FRAG_LATER;
        }
    }
    k.set_nw_proto(proto);
    k.set_nw_tos(h[1]);
    k.set_nw_ttl(h[8]);
    k.set_nw_frag(frag);
    let payload = l3.get(hl..total).unwrap_or(&[]);
    Some((proto, frag, hl, payload))
}

/// Validates an IPv6 header, walks its extension headers and extracts the
/// fields. Returns what [`ipv4`] returns.
#[inline(always)]
fn ipv6<'a>(k: &mut FlowKey, l3: &'a [u8]) -> Option<(u8, u8, usize, &'a [u8])> {
    let ip = Ipv6Packet::new_checked(l3).ok()?;
    let used = Ipv6Packet::<&[u8]>::HEADER_LEN + usize::from(ip.payload_len());
    if l3.len().saturating_sub(used) > MAX_L2_PAD {
        return None;
    }
    k.set_ipv6_src(u128::from_be_bytes(ip.src_bytes()));
    k.set_ipv6_dst(u128::from_be_bytes(ip.dst_bytes()));
    k.set_ipv6_label(ip.flow_label());

    let mut proto = ip.next_header();
    let mut frag = 0u8;
    let hl = Ipv6Packet::<&[u8]>::HEADER_LEN;
    let mut rest = l3.get(hl..used).unwrap_or(&[]);
    let mut l4_off = hl;
    while is_ext_header(proto) {
        let hlen;
        if proto == ip_proto::FRAGMENT {
            let f = Ipv6FragHeader::new_checked(rest).ok()?;
            hlen = Ipv6FragHeader::<&[u8]>::HEADER_LEN;
            proto = f.next_header();
            if f.offset_flags() != 0 {
                frag = FRAG_ANY;
                if f.frag_offset() != 0 {
                    frag |= FRAG_LATER;
                    proto = ip_proto::FRAGMENT;
                    break; // no transport header follows
                }
            }
        } else {
            let h = Ipv6ExtHeader::new_checked(rest, proto).ok()?;
            hlen = h.header_len();
            proto = h.next_header();
        }
        rest = rest.get(hlen..).unwrap_or(&[]);
        l4_off += hlen;
    }
    k.set_nw_proto(proto);
    k.set_nw_tos(ip.traffic_class());
    k.set_nw_ttl(ip.hop_limit());
    k.set_nw_frag(frag);
    Some((proto, frag, l4_off, rest))
}

/// Extracts the transport fields of `payload` (which starts at frame offset
/// `l4_off`), unless it is a later fragment.
#[inline(always)]
fn transport(
    k: &mut FlowKey,
    layers: &mut Layers,
    proto: u8,
    frag: u8,
    l4_off: usize,
    payload: &[u8],
) {
    if frag & FRAG_LATER != 0 {
        return;
    }
    let parsed = match proto {
        ip_proto::TCP => match TcpPacket::new_checked(payload) {
            Ok(t) => {
                k.set_tp_src(t.src_port());
                k.set_tp_dst(t.dst_port());
                k.set_tcp_flags(t.flags());
                true
            }
            Err(_) => false,
        },
        // UDP (8-byte header) and SCTP (12-byte common header) both start
        // with the two ports.
        ip_proto::UDP | ip_proto::SCTP => {
            let min = if proto == ip_proto::UDP { 8 } else { 12 };
            match payload.get(..min) {
                Some(&[s0, s1, d0, d1, ..]) => {
                    k.set_tp_src(u16::from_be_bytes([s0, s1]));
                    k.set_tp_dst(u16::from_be_bytes([d0, d1]));
                    true
                }
                _ => false,
            }
        }
        ip_proto::ICMP | ip_proto::IGMP => match payload.get(..8) {
            Some(&[ty, code, ..]) => {
                k.set_tp_src(u16::from(ty));
                k.set_tp_dst(u16::from(code));
                true
            }
            _ => false,
        },
        ip_proto::ICMPV6 => match payload.get(..8) {
            Some(&[ty, code, ..]) => {
                k.set_tp_src(u16::from(ty));
                k.set_tp_dst(u16::from(code));
                if code == 0
                    && (ty == icmp6_type::NEIGHBOR_SOLICIT || ty == icmp6_type::NEIGHBOR_ADVERT)
                {
                    let reserved =
                        u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                    nd(k, ty, reserved, payload.get(8..).unwrap_or(&[]));
                }
                true
            }
            _ => false,
        },
        _ => false,
    };
    if parsed {
        layers.l4 = offset(l4_off);
    }
}

/// Neighbor discovery: `body` is the NS/NA message after its 8-byte ICMPv6
/// header (target address, then options).
#[inline(always)]
fn nd(k: &mut FlowKey, ty: u8, reserved: u32, body: &[u8]) {
    k.set_nd_reserved(reserved);
    let Some(target) = body.get(..16) else {
        return;
    };
    // As OVS: the type of the first link-layer address option taken
    // (either kind, in either message; kept when the rest is invalid).
    let mut opt_type = 0u8;
    let (mut any_sll, mut any_tll) = (false, false);
    let mut o = body.get(16..).unwrap_or(&[]);
    while let &[kind, units, m0, m1, m2, m3, m4, m5, ..] = o {
        let len = usize::from(units) * 8;
        if len == 0 || len > o.len() {
            break;
        }
        let nonzero = [m0, m1, m2, m3, m4, m5] != [0; 6];
        let seen = match kind {
            1 if len == 8 => Some(&mut any_sll),
            2 if len == 8 => Some(&mut any_tll),
            _ => None,
        };
        if let Some(seen) = seen {
            if *seen {
                break; // a second one: OVS's invalid ND part
            }
            *seen = nonzero;
            if opt_type == 0 {
                opt_type = kind;
            }
        }
        o = o.get(len..).unwrap_or(&[]);
    }
    k.set_nd_options_type(opt_type);
    let mut t = [0u8; 16];
    for (d, s) in t.iter_mut().zip(target) {
        *d = *s;
    }
    let mut sha = 0u64;
    let mut tha = 0u64;
    let mut opts = body.get(16..).unwrap_or(&[]);
    while let &[kind, units, m0, m1, m2, m3, m4, m5, ..] = opts {
        let len = usize::from(units) * 8;
        if len == 0 || len > opts.len() {
            return; // invalid: nothing of the ND part is kept
        }
        if len == 8 {
            let mac = u64::from_be_bytes([0, 0, m0, m1, m2, m3, m4, m5]);
            if kind == nd_opt::SOURCE_LL_ADDR && ty == icmp6_type::NEIGHBOR_SOLICIT {
                if sha != 0 {
                    return; // duplicate SLL
                }
                sha = mac;
            } else if kind == nd_opt::TARGET_LL_ADDR && ty == icmp6_type::NEIGHBOR_ADVERT {
                if tha != 0 {
                    return; // duplicate TLL
                }
                tha = mac;
            }
        }
        opts = opts.get(len..).unwrap_or(&[]);
    }
    k.set_nd_target(u128::from_be_bytes(t));
    k.set_arp_sha(sha);
    k.set_arp_tha(tha);
}

/// ARP / RARP for Ethernet and IPv4.
#[inline(always)]
fn arp(k: &mut FlowKey, l3: &[u8]) {
    let a = ArpPacket::new_unchecked(l3);
    if !a.is_eth_ipv4() {
        return;
    }
    let op = a.operation();
    k.set_nw_proto(u8::try_from(op).unwrap_or(0));
    k.set_nw_src(u32::from(a.sender_ipv4()));
    k.set_nw_dst(u32::from(a.target_ipv4()));
    k.set_arp_sha(a.sender_eth().to_u64());
    k.set_arp_tha(a.target_eth().to_u64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_valid_frames() {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        assert_eq!(never_valid(&f), None);
        assert_eq!(never_valid(&f[..13]), Some(Invalid::Runt));
        assert_eq!(never_valid(&f[..14]), None, "no IP header bytes: L2 only");
        assert_eq!(never_valid(&f[..20]), None, "cut by a snap length");
        let mut g = f.clone();
        g[14] = 0x44;
        assert_eq!(never_valid(&g), Some(Invalid::BadIpv4Header));
        g[14] = 0x65;
        assert_eq!(never_valid(&g), Some(Invalid::BadIpv4Header));
        let mut h = f.clone();
        h[16..18].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(never_valid(&h), Some(Invalid::BadIpv4Header));
        // Behind a VLAN tag too; other EtherTypes are not looked at.
        let mut v = vec![0u8; 64];
        v[12..14].copy_from_slice(&[0x81, 0x00]);
        v[16..18].copy_from_slice(&[0x08, 0x00]);
        v[18] = 0x43;
        assert_eq!(never_valid(&v), Some(Invalid::BadIpv4Header));
        v[16..18].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(never_valid(&v), None);
    }

    /// A frame around the fast path's edges: untagged IPv4/UDP or TCP
    /// with random lengths, fragment bits, version/IHL, data offsets and
    /// padding; sometimes a VLAN tag or another EtherType.
    fn edge_frame(seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let len = 14 + (next() % 90) as usize;
        let mut f: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let pick = next() % 16;
        if len >= 15 && pick < 13 {
            f[12] = 0x08;
            f[13] = 0x00;
            f[14] = if pick < 11 { 0x45 } else { 0x46 };
        }
        if len >= 18 && next() % 4 != 0 {
            // A total length at (mostly), around or beyond the frame's.
            let l3 = (len - 14) as i64;
            let l3 = if next() % 2 == 0 {
                l3
            } else {
                l3 + (next() % 9) as i64 - 6
            };
            f[16..18].copy_from_slice(&(l3.max(0) as u16).to_be_bytes());
        }
        if len >= 22 && next() % 4 != 0 {
            // Mostly not a fragment; else DF, MF or an offset.
            let ff: [[u8; 2]; 5] = [[0, 0], [0, 0], [0x40, 0], [0x20, 0], [0, 9]];
            f[20..22].copy_from_slice(&ff[(next() % 5) as usize]);
        }
        if len >= 24 {
            f[23] = [6, 17, 6, 17, 1, 132][(next() % 6) as usize];
        }
        if len >= 47 && next() % 2 == 0 {
            f[46] = ((next() % 16) as u8) << 4 | (f[46] & 0x0f);
        }
        f
    }

    #[test]
    fn fast_path_is_the_general_walk() {
        let mut fast = 0;
        for seed in 1..200_000u64 {
            let f = edge_frame(seed);
            let general = extract_general(&f, seed as u32);
            // Into a dirty key: the head is all written, the
            // connection-tracking words are left alone, and a frame the
            // straight line declines leaves the key untouched.
            let mut got = FlowKey {
                w: [0xa5a5_a5a5_a5a5_a5a5; crate::FLOW_WORDS],
            };
            match fast_ipv4_into(&f, seed as u32, &mut got) {
                Some(layers) => {
                    fast += 1;
                    assert_eq!(layers, general.1, "frame {f:02x?}");
                    assert_eq!(got.w[..W_CT_FIRST], general.0.w[..W_CT_FIRST]);
                    assert!(got.w[W_CT_FIRST..]
                        .iter()
                        .all(|&w| w == 0xa5a5_a5a5_a5a5_a5a5));
                }
                None => assert!(got.w.iter().all(|&w| w == 0xa5a5_a5a5_a5a5_a5a5)),
            }
            assert_eq!(extract_with_layers(&f, seed as u32), general);
        }
        // The generator reaches the fast path often, and not always.
        assert!((5_000..190_000).contains(&fast), "{fast}");
    }

    #[test]
    fn extract_into_overwrites_and_matches() {
        // Ethernet + IPv4 + UDP 1024 -> 5001, and a truncated frame.
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[20, 0, 0, 1]);
        f[34..36].copy_from_slice(&1024u16.to_be_bytes());
        f[36..38].copy_from_slice(&5001u16.to_be_bytes());
        for frame in [&f[..], &f[..20], &[][..]] {
            let mut dirty = FlowKey {
                w: [u64::MAX; crate::FLOW_WORDS],
            };
            let layers = extract_into(frame, 3, &mut dirty);
            assert_eq!((dirty, layers), extract_with_layers(frame, 3));
        }
        assert_eq!(extract(&f, 3).tp_dst(), 5001);
    }
}
