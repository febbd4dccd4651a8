//! Open vSwitch's flow hashes, bit for bit, so that a switch choice made
//! by hashing (a `select` group's bucket, a `bundle` member, a
//! `multipath` link, the datapath's `dp_hash`) is the one OVS makes for
//! the same packet.
//!
//! Written from the functions' definitions (OVS 3.1 `lib/hash.h`,
//! `lib/jhash.c`, `lib/flow.c`): the MurmurHash3-style word steps and
//! finaliser of OVS's portable build (Debian's `openvswitch-switch` is
//! built without SSE4.2, so it uses these and not CRC32), and Bob
//! Jenkins' lookup3 for the hashes OVS keeps stable "on the wire"
//! (`jhash_bytes`). OVS hashes its `struct flow` fields as they lie in
//! memory: network byte order, read as native (little-endian x86)
//! words; the functions below rebuild those bytes from a [`FlowKey`]
//! (whose values are numbers), so they give what OVS gives on a
//! little-endian machine whatever the host is.
//!
//! Nothing here is on a per-packet fast path except [`hash_5tuple`] and
//! [`symmetric_l3l4`] for packets a `hash` datapath action runs on.

use crate::key::{FlowKey, FRAG_ANY};

const ETH_TYPE_IP: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const ETH_TYPE_ARP: u16 = 0x0806;
const IPPROTO_ICMP: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_ICMPV6: u8 = 58;
const IPPROTO_SCTP: u8 = 132;
const VLAN_VID_MASK: u16 = 0x0fff;

/// One MurmurHash3 step: mixes 32-bit `data` into `hash` (OVS's
/// `hash_add`; a zero `data` word still rotates and multiplies).
#[inline]
pub fn hash_add(hash: u32, data: u32) -> u32 {
    let mut h = hash;
    if data != 0 {
        let d = data
            .wrapping_mul(0xcc9e_2d51)
            .rotate_left(15)
            .wrapping_mul(0x1b87_3593);
        h ^= d;
    }
    h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64)
}

/// Two steps: the low then the high half of `data` (`hash_add64`).
#[inline]
pub fn hash_add64(hash: u32, data: u64) -> u32 {
    hash_add(hash_add(hash, data as u32), (data >> 32) as u32)
}

/// MurmurHash3's finaliser of `hash ^ fin` (`hash_finish`).
#[inline]
pub fn hash_finish(hash: u32, fin: u32) -> u32 {
    let mut h = hash ^ fin;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// `hash_2words(x, y)`.
#[inline]
pub fn hash_2words(x: u32, y: u32) -> u32 {
    hash_finish(hash_add(hash_add(x, 0), y), 8)
}

/// `hash_int(x, basis)` (the same as `hash_2words(x, basis)`).
#[inline]
pub fn hash_int(x: u32, basis: u32) -> u32 {
    hash_2words(x, basis)
}

/// `hash_uint64_basis(x, basis)`.
#[inline]
pub fn hash_uint64_basis(x: u64, basis: u32) -> u32 {
    hash_finish(hash_add64(basis, x), 8)
}

/// `hash_uint64(x)`.
#[inline]
pub fn hash_uint64(x: u64) -> u32 {
    hash_uint64_basis(x, 0)
}

/// `hash_bytes(p, n, basis)`: 4-byte little-endian words, a last partial
/// word padded with zeros, finished with the length.
pub fn hash_bytes(p: &[u8], basis: u32) -> u32 {
    let mut h = basis;
    let mut chunks = p.chunks_exact(4);
    for c in &mut chunks {
        h = hash_add(h, u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut t = [0u8; 4];
        t[..rest.len()].copy_from_slice(rest);
        h = hash_add(h, u32::from_le_bytes(t));
    }
    hash_finish(h, p.len() as u32)
}

#[inline]
fn jhash_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

#[inline]
fn jhash_final(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

/// Jenkins' lookup3 over bytes as OVS's `jhash_bytes`: 12-byte blocks
/// mixed while 12 or more bytes are left, the 1–11 left zero-padded and
/// finalised (for lengths that are not a multiple of 12 this is lookup3's
/// `hashlittle`).
pub fn jhash_bytes(p: &[u8], basis: u32) -> u32 {
    let init = 0xdead_beef_u32
        .wrapping_add(p.len() as u32)
        .wrapping_add(basis);
    let (mut a, mut b, mut c) = (init, init, init);
    let word = |s: &[u8], i: usize| {
        let mut t = [0u8; 4];
        let s = s.get(i * 4..).unwrap_or(&[]);
        let n = s.len().min(4);
        t[..n].copy_from_slice(&s[..n]);
        u32::from_le_bytes(t)
    };
    let mut chunks = p.chunks_exact(12);
    for blk in &mut chunks {
        a = a.wrapping_add(word(blk, 0));
        b = b.wrapping_add(word(blk, 1));
        c = c.wrapping_add(word(blk, 2));
        jhash_mix(&mut a, &mut b, &mut c);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        a = a.wrapping_add(word(rest, 0));
        b = b.wrapping_add(word(rest, 1));
        c = c.wrapping_add(word(rest, 2));
        jhash_final(&mut a, &mut b, &mut c);
    }
    c
}

/// A big-endian 16-bit field as OVS reads it from memory: its two bytes
/// as a little-endian number.
#[inline]
fn be16_raw(v: u16) -> u32 {
    u32::from(v.swap_bytes())
}

/// The 16 bytes of an IPv6 address (or an IPv4 one in the first four).
fn addr_bytes(k: &FlowKey, src: bool) -> [u8; 16] {
    let mut out = [0u8; 16];
    if k.dl_type() == ETH_TYPE_IPV6 {
        out = if src { k.ipv6_src() } else { k.ipv6_dst() }.to_be_bytes();
    } else {
        let v = if src { k.nw_src() } else { k.nw_dst() };
        out[..4].copy_from_slice(&v.to_be_bytes());
    }
    out
}

/// The VLAN IDs of both tags, XORed (OVS XORs its `FLOW_MAX_VLAN_HEADERS`
/// = 2 TCIs' VID bits).
#[inline]
fn vids(k: &FlowKey) -> u16 {
    (k.vlan_tci() ^ k.vlan_tci_inner()) & VLAN_VID_MASK
}

/// OVS's `flow_hash_5tuple`: IP (or ARP) addresses, protocol and, for
/// TCP, UDP, SCTP, ICMP and ICMPv6, the transport ports (ICMP type and
/// code); the hash the userspace datapath takes as a packet's RSS hash
/// when the NIC gives none.
pub fn hash_5tuple(k: &FlowKey, basis: u32) -> u32 {
    let mut h = basis;
    match k.dl_type() {
        ETH_TYPE_IPV6 => {
            for v in [k.ipv6_src(), k.ipv6_dst()] {
                h = hash_add64(h, ((v >> 64) as u64).swap_bytes());
                h = hash_add64(h, (v as u64).swap_bytes());
            }
        }
        ETH_TYPE_IP | ETH_TYPE_ARP => {
            h = hash_add(h, k.nw_src().swap_bytes());
            h = hash_add(h, k.nw_dst().swap_bytes());
        }
        _ => return hash_finish(h, 42),
    }
    let proto = k.nw_proto();
    h = hash_add(h, u32::from(proto));
    if matches!(
        proto,
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP | IPPROTO_ICMP | IPPROTO_ICMPV6
    ) {
        h = hash_add(h, be16_raw(k.tp_src()) | be16_raw(k.tp_dst()) << 16);
    }
    hash_finish(h, 42)
}

/// OVS's `flow_hash_symmetric_l4`: Ethernet addresses (XORed), type and
/// VLAN IDs; IP addresses (XORed) and protocol; TCP and SCTP ports
/// (XORed); by lookup3 over OVS's 32-byte field block.
pub fn symmetric_l4(k: &FlowKey, basis: u32) -> u32 {
    // Layout: address union 0..16, eth_type 16..18, vlan_tci 18..20,
    // tp_port 20..22, eth_addr 22..28, ip_proto 28, padding to 32.
    let mut f = [0u8; 32];
    let eth = (k.dl_src() ^ k.dl_dst()).to_be_bytes();
    f[22..28].copy_from_slice(&eth[2..8]);
    f[18..20].copy_from_slice(&vids(k).to_be_bytes());
    let dl_type = k.dl_type();
    f[16..18].copy_from_slice(&dl_type.to_be_bytes());
    if matches!(dl_type, ETH_TYPE_IP | ETH_TYPE_IPV6) {
        let (a, b) = (addr_bytes(k, true), addr_bytes(k, false));
        for (x, (a, b)) in f.iter_mut().zip(a.iter().zip(&b)) {
            *x = a ^ b;
        }
        let proto = k.nw_proto();
        f[28] = proto;
        if matches!(proto, IPPROTO_TCP | IPPROTO_SCTP) {
            f[20..22].copy_from_slice(&(k.tp_src() ^ k.tp_dst()).to_be_bytes());
        }
    }
    jhash_bytes(&f, basis)
}

/// OVS's `flow_hash_symmetric_l2`: Ethernet type, VLAN IDs and addresses
/// (XORed).
pub fn symmetric_l2(k: &FlowKey, basis: u32) -> u32 {
    // Layout: eth_type 0..2, vlan_tci 2..4, eth_addr 4..10, pad 10..12.
    let mut f = [0u8; 12];
    f[0..2].copy_from_slice(&k.dl_type().to_be_bytes());
    f[2..4].copy_from_slice(&vids(k).to_be_bytes());
    f[4..10].copy_from_slice(&(k.dl_src() ^ k.dl_dst()).to_be_bytes()[2..8]);
    let mut h = basis;
    for w in f.chunks_exact(4) {
        h = hash_add(h, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    }
    hash_finish(h, basis)
}

/// OVS's `flow_hash_symmetric_l3l4`: IP addresses (XORed), protocol and,
/// unless a fragment, TCP and SCTP ports (and UDP's with `udp`), XORed;
/// [`symmetric_l2`] for packets that are not IP. The userspace
/// datapath's `hash(sym_l4(basis))`.
pub fn symmetric_l3l4(k: &FlowKey, basis: u32, udp: bool) -> u32 {
    let mut h = basis;
    match k.dl_type() {
        ETH_TYPE_IP => h = hash_add(h, (k.nw_src() ^ k.nw_dst()).swap_bytes()),
        ETH_TYPE_IPV6 => {
            let x = k.ipv6_src() ^ k.ipv6_dst();
            h = hash_add64(h, ((x >> 64) as u64).swap_bytes());
            h = hash_add64(h, (x as u64).swap_bytes());
        }
        _ => return symmetric_l2(k, basis),
    }
    let proto = k.nw_proto();
    h = hash_add(h, u32::from(proto));
    if k.nw_frag() & FRAG_ANY == 0
        && (matches!(proto, IPPROTO_TCP | IPPROTO_SCTP) || (udp && proto == IPPROTO_UDP))
    {
        h = hash_add(h, be16_raw(k.tp_src() ^ k.tp_dst()));
    }
    hash_finish(h, basis)
}

/// OVS's `flow_hash_symmetric_l3`: IP addresses (XORed) and Ethernet type,
/// by lookup3 over a 20-byte block.
pub fn symmetric_l3(k: &FlowKey, basis: u32) -> u32 {
    let mut f = [0u8; 20];
    let dl_type = k.dl_type();
    f[16..18].copy_from_slice(&dl_type.to_be_bytes());
    if matches!(dl_type, ETH_TYPE_IP | ETH_TYPE_IPV6) {
        let (a, b) = (addr_bytes(k, true), addr_bytes(k, false));
        for (x, (a, b)) in f.iter_mut().zip(a.iter().zip(&b)) {
            *x = a ^ b;
        }
    }
    jhash_bytes(&f, basis)
}

/// The field sets `bundle` and `multipath` hash, in OVS's
/// `nx_hash_fields` order of names (`eth_src`, `symmetric_l4`,
/// `symmetric_l3l4`, `symmetric_l3l4+udp`, `nw_src`, `nw_dst`,
/// `symmetric_l3`): index `set`'s hash with `basis` (`flow_hash_fields`).
pub fn hash_fields(k: &FlowKey, set: u8, basis: u16) -> u32 {
    let basis = u32::from(basis);
    let ip = |src: bool| match k.dl_type() {
        ETH_TYPE_IP => jhash_bytes(&addr_bytes(k, src)[..4], basis),
        ETH_TYPE_IPV6 => jhash_bytes(&addr_bytes(k, src), basis),
        _ => basis,
    };
    match set {
        0 => jhash_bytes(&k.dl_src().to_be_bytes()[2..8], basis),
        1 => symmetric_l4(k, basis),
        2 => symmetric_l3l4(k, basis, false),
        3 => symmetric_l3l4(k, basis, true),
        4 => ip(true),
        5 => ip(false),
        _ => symmetric_l3(k, basis),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_steps_match_ovs_published_values() {
        // On whole words, hash_bytes is MurmurHash3_x86_32: its
        // published check values.
        assert_eq!(hash_bytes(b"", 0), 0);
        assert_eq!(hash_bytes(b"", 1), 0x514e_28b7);
        assert_eq!(hash_bytes(b"test", 0), 0xba6b_d213);
        assert_eq!(hash_bytes(b"\0\0\0\0", 0), 0x2362_f9de);
    }

    #[test]
    fn jhash_bytes_is_lookup3_hashlittle() {
        // lookup3.c's own check values for hashlittle.
        let s = b"Four score and seven years ago";
        assert_eq!(jhash_bytes(s, 0), 0x1777_0551);
        assert_eq!(jhash_bytes(s, 1), 0xcd62_8161);
        assert_eq!(jhash_bytes(b"", 0), 0xdead_beef);
    }

    #[test]
    fn hash_bytes_pads_and_finishes_with_the_length() {
        let a = hash_bytes(&[1, 2, 3, 4, 5], 7);
        let b = hash_finish(
            hash_add(hash_add(7, u32::from_le_bytes([1, 2, 3, 4])), 5),
            5,
        );
        assert_eq!(a, b);
        assert_ne!(hash_bytes(&[1, 2, 3, 4, 5, 0], 7), a);
    }

    fn tcp(src: u32, dst: u32, sp: u16, dp: u16) -> FlowKey {
        let mut k = FlowKey::zero();
        k.set_dl_type(ETH_TYPE_IP);
        k.set_dl_src(0x0000_0000_0001);
        k.set_dl_dst(0x0000_0000_0002);
        k.set_nw_src(src);
        k.set_nw_dst(dst);
        k.set_nw_proto(IPPROTO_TCP);
        k.set_tp_src(sp);
        k.set_tp_dst(dp);
        k
    }

    #[test]
    fn symmetric_hashes_are_symmetric_and_5tuple_is_not() {
        let a = tcp(0x0a00_0001, 0x0a00_0002, 1234, 80);
        let mut b = tcp(0x0a00_0002, 0x0a00_0001, 80, 1234);
        b.set_dl_src(0x0000_0000_0002);
        b.set_dl_dst(0x0000_0000_0001);
        for set in 1..=3 {
            assert_eq!(
                hash_fields(&a, set, 9),
                hash_fields(&b, set, 9),
                "set {set}"
            );
        }
        assert_eq!(symmetric_l3(&a, 3), symmetric_l3(&b, 3));
        assert_ne!(hash_5tuple(&a, 0), hash_5tuple(&b, 0));
        assert_ne!(hash_fields(&a, 4, 0), hash_fields(&b, 4, 0));
    }

    #[test]
    fn ports_count_only_where_ovs_counts_them() {
        let a = tcp(1, 2, 10, 20);
        let b = tcp(1, 2, 11, 20);
        assert_ne!(symmetric_l3l4(&a, 0, false), symmetric_l3l4(&b, 0, false));
        let (mut fa, mut fb) = (a, b);
        fa.set_nw_frag(FRAG_ANY);
        fb.set_nw_frag(FRAG_ANY);
        assert_eq!(symmetric_l3l4(&fa, 0, false), symmetric_l3l4(&fb, 0, false));
        let (mut ua, mut ub) = (a, b);
        ua.set_nw_proto(IPPROTO_UDP);
        ub.set_nw_proto(IPPROTO_UDP);
        assert_eq!(symmetric_l4(&ua, 0), symmetric_l4(&ub, 0));
        assert_eq!(symmetric_l3l4(&ua, 0, false), symmetric_l3l4(&ub, 0, false));
        assert_ne!(symmetric_l3l4(&ua, 0, true), symmetric_l3l4(&ub, 0, true));
        assert_ne!(hash_5tuple(&ua, 0), hash_5tuple(&ub, 0));
    }

    #[test]
    fn non_ip_falls_back_to_l2() {
        let mut k = FlowKey::zero();
        k.set_dl_type(0x88cc);
        k.set_dl_src(0x0011_2233_4455);
        k.set_dl_dst(0x0066_7788_99aa);
        assert_eq!(symmetric_l3l4(&k, 5, false), symmetric_l2(&k, 5));
        assert_eq!(hash_5tuple(&k, 5), hash_finish(5, 42));
        assert_eq!(hash_fields(&k, 4, 5), 5);
    }
}
