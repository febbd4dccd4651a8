//! Network address translation: choosing a connection's translated reply
//! tuple, and rewriting packets in both directions.
//!
//! What, choosing (when a connection with `nat(src=...)` or
//! `nat(dst=...)` is committed), following Open vSwitch 3.1's userspace
//! rules:
//!
//! - the address: none given → keep the packet's; else `min + h % n` over
//!   the range (IPv6 ranges are capped at 2^32 addresses), `h` a hash of
//!   the range and the original tuple, so a tuple maps to a stable choice;
//! - the source port (SNAT without a port range, and always as DNAT's
//!   fall-back): the packet's own port first, then its class — 1–511,
//!   600–1023 or 1024–65535 as the port is below 512, below 1024, or not;
//!   with a port range: `min + h % n` then onwards, wrapping;
//! - the destination port (DNAT with a port range): `min + h % n` then
//!   onwards;
//! - at most 128 ports are tried in order; while ports remain, another
//!   round of half as many starts at a pseudo-random port (down to 16);
//! - a reply tuple already owned by a live connection is skipped; if none
//!   is free the commit fails ("tuple space exhaustion", counted).
//!
//! `persistent`, `hash` and `random` are accepted and, as in Open
//! vSwitch's userspace datapath, do not change the choice.
//!
//! What, rewriting: a packet in the original direction gets the reply
//! tuple's reverse as its new source (SNAT) or destination (DNAT); a reply
//! gets the original tuple's reverse. TCP and UDP ports are rewritten with
//! the addresses. The IPv4 header checksum and the TCP/UDP/ICMPv6
//! checksums (whose pseudo-header covers the addresses) are patched
//! incrementally (RFC 1624); a zero UDP-over-IPv4 checksum stays zero. An
//! ICMP error related to a NATed connection has its outer address and its
//! quoted packet's addresses and ports translated (the quoted IPv4 header
//! checksum patched), and the ICMP checksum recomputed over the message.
//!
//! Invariants: rewriting never writes outside the IP packet and never
//! panics (every write goes through checked views). Thread-safety: pure
//! functions over the caller's frame.

use crate::key::{parse_l3, ConnKey};
use crate::table::nat_bits;
use crate::{NatKind, NatSpec};
use flowpath_wire::{checksum, ip_proto, Ipv4Packet, TcpPacket, UdpPacket};
use std::net::IpAddr;

/// The NAT bits a spec asks for (`None` for a plain `nat`).
pub fn action_bits(spec: &NatSpec) -> u8 {
    let ports = spec.range.as_ref().is_some_and(|r| r.min_port != 0);
    match spec.kind {
        Some(NatKind::Src) => nat_bits::SRC | if ports { nat_bits::SRC_PORT } else { 0 },
        Some(NatKind::Dst) => nat_bits::DST | if ports { nat_bits::DST_PORT } else { 0 },
        None => 0,
    }
}

/// The reverse of a NAT action (what replies get).
pub fn reverse_action(a: u8) -> u8 {
    if a & nat_bits::SRC != 0 {
        (a & !nat_bits::SRC) | nat_bits::DST
    } else if a & nat_bits::DST != 0 {
        (a & !nat_bits::DST) | nat_bits::SRC
    } else {
        a
    }
}

/// The hash that places a new connection's translation in `spec`'s range:
/// of the tuple and the range, with fixed keys, so a tuple maps to the
/// same choice in every run (folded multiplies, a few instructions a word;
/// this runs once per new translated connection).
pub fn choice_hash(key: &ConnKey, spec: &NatSpec) -> u32 {
    use crate::table::{folded, tuple_words, MUL};
    let mut h = 0x6e61_745f_6861_7368_u64;
    let mut mix = |w: u64| h = folded(h ^ w, MUL);
    for w in tuple_words(key) {
        mix(w);
    }
    if let Some(r) = &spec.range {
        for a in [addr_bytes(&r.min_addr), addr_bytes(&r.max_addr)] {
            let v = u128::from_le_bytes(a);
            mix(v as u64);
            mix((v >> 64) as u64);
        }
        mix(u64::from(r.min_port) << 16 | u64::from(r.max_port));
    }
    (h ^ (h >> 32)) as u32
}

fn addr_bytes(a: &IpAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match a {
        IpAddr::V4(v4) => out[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out = v6.octets(),
    }
    out
}

/// The address `h % n` positions into `[min, max]`.
fn addr_in_range(min: [u8; 16], max: [u8; 16], h: u32, v6: bool) -> [u8; 16] {
    let mut out = min;
    if !v6 {
        let lo = u32::from_be_bytes([min[0], min[1], min[2], min[3]]);
        let hi = u32::from_be_bytes([max[0], max[1], max[2], max[3]]);
        let n = u64::from(hi.saturating_sub(lo)) + 1;
        let v = lo.wrapping_add((u64::from(h) % n) as u32);
        out[..4].copy_from_slice(&v.to_be_bytes());
    } else {
        let lo = u128::from_be_bytes(min);
        let hi = u128::from_be_bytes(max);
        let n = hi.saturating_sub(lo).min(0xffff_fffe) + 1;
        let v = lo.wrapping_add(u128::from(h) % n);
        out = v.to_be_bytes();
    }
    out
}

fn default_sport_range(p: u16) -> (u16, u16) {
    if p < 512 {
        (1, 511)
    } else if p < 1024 {
        (600, 1023)
    } else {
        (1024, 65535)
    }
}

/// Tries ports from `curr` onwards in `[min, max]` for `set(port)`; true
/// when `free()` accepts one (left in place), else the port is restored.
fn unique_port(
    rev: &mut ConnKey,
    which_src: bool,
    curr: u16,
    min: u16,
    max: u16,
    rng: &mut u64,
    free: &mut dyn FnMut(&ConnKey) -> bool,
) -> bool {
    let orig = if which_src {
        rev.src.port
    } else {
        rev.dst.port
    };
    let range = u32::from(max.saturating_sub(min)) + 1;
    let mut attempts = range.min(128);
    let mut curr = curr;
    loop {
        let in_range = curr >= min && curr <= max;
        let n = if in_range { range } else { range + 1 };
        for _ in 0..n.min(attempts) {
            if which_src {
                rev.src.port = curr;
            } else {
                rev.dst.port = curr;
            }
            if free(rev) {
                return true;
            }
            curr = if !(curr >= min && curr <= max) || curr == max {
                min
            } else {
                curr + 1
            };
        }
        if attempts < range && attempts >= 16 {
            attempts /= 2;
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            curr = min.wrapping_add((*rng % u64::from(range)) as u16);
        } else {
            break;
        }
    }
    if which_src {
        rev.src.port = orig;
    } else {
        rev.dst.port = orig;
    }
    false
}

/// Chooses the reply tuple of a new connection `key` translated per
/// `spec` (`action` = [`action_bits`]). `hash` mixes the range and the
/// tuple; `free` says whether a reply tuple is unused. `None`: no free
/// tuple.
pub fn unique_tuple(
    key: &ConnKey,
    spec: &NatSpec,
    action: u8,
    hash: u32,
    rng: &mut u64,
    free: &mut dyn FnMut(&ConnKey) -> bool,
) -> Option<ConnKey> {
    let snat = action & nat_bits::SRC != 0;
    let range = spec.range.as_ref();
    let min_addr = range.map(|r| addr_bytes(&r.min_addr)).unwrap_or_default();
    let max_addr = range.map(|r| addr_bytes(&r.max_addr)).unwrap_or_default();
    let addr = if min_addr == [0u8; 16] {
        if snat {
            key.src.addr
        } else {
            key.dst.addr
        }
    } else {
        addr_in_range(min_addr, max_addr.max(min_addr), hash, key.v6)
    };
    let (pmin, pmax) = range.map_or((0, 0), |r| (r.min_port, r.max_port.max(r.min_port)));
    let hashed = |lo: u16, hi: u16| lo.wrapping_add((hash % (u32::from(hi - lo) + 1)) as u16);

    let (curr_s, min_s, max_s) = if !snat || action & nat_bits::SRC_PORT == 0 {
        let (lo, hi) = default_sport_range(key.src.port);
        (key.src.port, lo, hi)
    } else {
        (hashed(pmin, pmax), pmin, pmax)
    };
    let (curr_d, min_d, max_d) = if action & nat_bits::DST_PORT != 0 {
        (hashed(pmin, pmax), pmin, pmax)
    } else {
        (key.dst.port, key.dst.port, key.dst.port)
    };

    let mut rev = key.reverse();
    let pat = key.has_ports();
    if pat {
        rev.src.port = curr_d;
        rev.dst.port = curr_s;
    }
    if snat {
        rev.dst.addr = addr;
    } else {
        rev.src.addr = addr;
    }
    if !pat {
        return free(&rev).then_some(rev);
    }
    let mut found = false;
    if action & nat_bits::DST_PORT != 0 {
        found = unique_port(&mut rev, true, curr_d, min_d, max_d, rng, free);
    }
    if !found {
        found = unique_port(&mut rev, false, curr_s, min_s, max_s, rng, free);
    }
    found.then_some(rev)
}

/// Where a packet's headers are, for rewriting.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// IP header offset.
    pub l3: usize,
    /// L4 header offset.
    pub l4: usize,
    /// End of the IP packet.
    pub end: usize,
    /// IPv6.
    pub v6: bool,
    /// IP protocol of the outer packet.
    pub proto: u8,
}

/// Rewrites the source (`src`) or destination address of the IP packet at
/// `lay` to `new`, patching the IPv4 header checksum and, when `l4_csum`,
/// the TCP/UDP/ICMPv6 checksum whose pseudo-header covers it.
fn set_addr(frame: &mut [u8], lay: &Layout, src: bool, new: &[u8; 16], l4_csum: bool) {
    let (at, n) = match (lay.v6, src) {
        (false, true) => (lay.l3 + 12, 4),
        (false, false) => (lay.l3 + 16, 4),
        (true, true) => (lay.l3 + 8, 16),
        (true, false) => (lay.l3 + 24, 16),
    };
    let mut old = [0u8; 16];
    match (frame.get(at..at + n), old.get_mut(..n)) {
        (Some(field), Some(o)) => o.copy_from_slice(field),
        _ => return,
    }
    let (Some(old), Some(new_b)) = (old.get(..n), new.get(..n)) else {
        return;
    };
    if old == new_b {
        return;
    }
    if !lay.v6 {
        if let Some(ip) = frame.get_mut(lay.l3..lay.end) {
            let mut p = Ipv4Packet::new_unchecked(ip);
            let a = std::net::Ipv4Addr::new(new[0], new[1], new[2], new[3]);
            if src {
                p.rewrite_src_addr(a);
            } else {
                p.rewrite_dst_addr(a);
            }
        }
    } else if let Some(f) = frame.get_mut(at..at + n) {
        f.copy_from_slice(new_b);
    }
    if l4_csum {
        patch_l4_for_addr(frame, lay, old, new_b);
    }
}

fn patch_l4_for_addr(frame: &mut [u8], lay: &Layout, old: &[u8], new: &[u8]) {
    let Some(l4) = frame.get_mut(lay.l4..lay.end) else {
        return;
    };
    match lay.proto {
        ip_proto::TCP => TcpPacket::new_unchecked(l4).update_checksum_for_addr(old, new),
        ip_proto::UDP => UdpPacket::new_unchecked(l4).update_checksum_for_addr(old, new),
        ip_proto::ICMPV6 if lay.v6 => {
            if let Some([a, b]) = l4.get_mut(2..4) {
                let hc = u16::from_be_bytes([*a, *b]);
                [*a, *b] = checksum::update_bytes(hc, old, new).to_be_bytes();
            }
        }
        _ => {}
    }
}

fn set_ports(frame: &mut [u8], lay: &Layout, sport: u16, dport: u16) {
    let Some(l4) = frame.get_mut(lay.l4..lay.end) else {
        return;
    };
    match lay.proto {
        ip_proto::TCP => {
            let mut t = TcpPacket::new_unchecked(l4);
            if t.src_port() != sport {
                t.rewrite_src_port(sport);
            }
            if t.dst_port() != dport {
                t.rewrite_dst_port(dport);
            }
        }
        ip_proto::UDP => {
            let mut u = UdpPacket::new_unchecked(l4);
            if u.src_port() != sport {
                u.rewrite_src_port(sport);
            }
            if u.dst_port() != dport {
                u.rewrite_dst_port(dport);
            }
        }
        _ => {}
    }
}

/// Translates the addresses of the packet at `lay` so that it matches
/// `key` reversed: with `action` SRC the source becomes `key.dst`, with
/// DST the destination becomes `key.src`; ports follow when `ports`.
fn translate(
    frame: &mut [u8],
    lay: &Layout,
    key: &ConnKey,
    action: u8,
    ports: bool,
    l4_csum: bool,
) {
    if action & nat_bits::SRC != 0 {
        set_addr(frame, lay, true, &key.dst.addr, l4_csum);
    } else if action & nat_bits::DST != 0 {
        set_addr(frame, lay, false, &key.src.addr, l4_csum);
    }
    if ports && key.has_ports() {
        set_ports(frame, lay, key.dst.port, key.src.port);
    }
}

/// NATs one packet of a connection: `key` is the tuple whose reverse the
/// packet must carry afterwards (the reply tuple for an original-direction
/// packet, the original tuple for a reply) and `action` the NAT to apply
/// (reversed for replies). `related`: the packet is an ICMP error quoting
/// the connection.
pub fn nat_packet(frame: &mut [u8], lay: &Layout, key: &ConnKey, action: u8, related: bool) {
    if action & (nat_bits::SRC | nat_bits::DST) == 0 {
        return;
    }
    if !related {
        translate(frame, lay, key, action, true, true);
        return;
    }
    // Outer header: only the address (ICMP has no ports); ICMPv6's
    // checksum is recomputed below anyway.
    translate(frame, lay, key, action, false, false);
    let inner_l3 = lay.l4 + 8;
    let Some((ik, il4, _)) = parse_l3(frame, inner_l3, lay.end, lay.v6, false, true) else {
        return;
    };
    let inner = Layout {
        l3: inner_l3,
        l4: il4,
        end: lay.end,
        v6: lay.v6,
        proto: ik.proto,
    };
    translate(
        frame,
        &inner,
        &key.reverse(),
        reverse_action(action),
        true,
        true,
    );
    // The ICMP checksum covers the quoted packet: recompute it.
    let ph = if lay.v6 {
        let (Some(s), Some(d)) = (
            frame.get(lay.l3 + 8..lay.l3 + 24),
            frame.get(lay.l3 + 24..lay.l3 + 40),
        ) else {
            return;
        };
        let mut sa = [0u8; 16];
        let mut da = [0u8; 16];
        sa.copy_from_slice(s);
        da.copy_from_slice(d);
        Some(checksum::pseudo_header_v6(
            sa,
            da,
            ip_proto::ICMPV6,
            (lay.end - lay.l4) as u32,
        ))
    } else {
        None
    };
    let Some(msg) = frame.get_mut(lay.l4..lay.end) else {
        return;
    };
    if let Some(c) = msg.get_mut(2..4) {
        c.copy_from_slice(&[0, 0]);
    }
    let s = checksum::sum(msg);
    let c = !ph.map_or(s, |p| checksum::add(p, s));
    if let Some(f) = msg.get_mut(2..4) {
        f.copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NatRange;
    use std::net::Ipv4Addr;

    fn k(sp: u16) -> ConnKey {
        let mut k = ConnKey {
            proto: 6,
            ..ConnKey::default()
        };
        k.src.addr[..4].copy_from_slice(&[10, 0, 0, 1]);
        k.dst.addr[..4].copy_from_slice(&[8, 8, 8, 8]);
        k.src.port = sp;
        k.dst.port = 80;
        k
    }

    fn snat(lo: [u8; 4], hi: [u8; 4], pmin: u16, pmax: u16) -> NatSpec {
        NatSpec {
            kind: Some(NatKind::Src),
            range: Some(NatRange {
                min_addr: IpAddr::V4(Ipv4Addr::from(lo)),
                max_addr: IpAddr::V4(Ipv4Addr::from(hi)),
                min_port: pmin,
                max_port: pmax,
            }),
            persistent: false,
            hash: false,
            random: false,
        }
    }

    #[test]
    fn snat_keeps_port_when_free_then_moves_within_class() {
        let spec = snat([192, 0, 2, 1], [192, 0, 2, 1], 0, 0);
        let a = action_bits(&spec);
        assert_eq!(a, nat_bits::SRC);
        let mut rng = 1;
        let r = unique_tuple(&k(40000), &spec, a, 7, &mut rng, &mut |_| true).expect("free");
        assert_eq!(&r.dst.addr[..4], &[192, 0, 2, 1]);
        assert_eq!((r.src.port, r.dst.port), (80, 40000));
        // Port taken: the next one in 1024..65535.
        let r = unique_tuple(&k(40000), &spec, a, 7, &mut rng, &mut |t| {
            t.dst.port != 40000
        })
        .expect("next");
        assert_eq!(r.dst.port, 40001);
        // A privileged port stays in 600..1023.
        let r = unique_tuple(&k(1023), &spec, a, 7, &mut rng, &mut |t| t.dst.port != 1023)
            .expect("wrap");
        assert_eq!(r.dst.port, 600);
        // Nothing free: exhaustion.
        assert!(unique_tuple(&k(40000), &spec, a, 7, &mut rng, &mut |_| false).is_none());
    }

    #[test]
    fn snat_port_and_address_ranges() {
        let spec = snat([192, 0, 2, 10], [192, 0, 2, 19], 5000, 5009);
        let a = action_bits(&spec);
        assert_eq!(a, nat_bits::SRC | nat_bits::SRC_PORT);
        let mut rng = 3;
        let mut seen = std::collections::HashSet::new();
        for sp in 1000..1010u16 {
            let r = unique_tuple(
                &k(sp),
                &spec,
                a,
                u32::from(sp) * 7919,
                &mut rng,
                &mut |_| true,
            )
            .expect("free");
            assert!((5000..=5009).contains(&r.dst.port));
            assert!((10..=19).contains(&r.dst.addr[3]));
            seen.insert(r.dst.addr[3]);
        }
        assert!(seen.len() > 1, "the hash spreads addresses");
        // Ports exhausted in the range: fails.
        assert!(unique_tuple(&k(1), &spec, a, 0, &mut rng, &mut |t| t.dst.port > 6000).is_none());
    }

    #[test]
    fn the_choice_hash_is_fixed_and_spreads_tuples() {
        let spec = snat([10, 200, 0, 1], [10, 200, 0, 254], 0, 0);
        let a = action_bits(&spec);
        let mut addrs = std::collections::HashSet::new();
        for sp in 1024..3024u16 {
            let h = choice_hash(&k(sp), &spec);
            assert_eq!(
                h,
                choice_hash(&k(sp), &spec),
                "the same tuple, the same hash"
            );
            let r = unique_tuple(&k(sp), &spec, a, h, &mut 1, &mut |_| true).expect("free");
            addrs.insert(r.dst.addr[3]);
        }
        // 2,000 tuples over 254 addresses: nearly every address is used.
        assert!(addrs.len() > 240, "{}", addrs.len());
        // The range is in the hash: another range, another choice.
        let other = snat([10, 200, 0, 1], [10, 200, 0, 253], 0, 0);
        assert!((1024..1100u16).any(|sp| choice_hash(&k(sp), &spec) != choice_hash(&k(sp), &other)));
    }

    #[test]
    fn dnat_port_range() {
        let spec = NatSpec {
            kind: Some(NatKind::Dst),
            range: Some(NatRange {
                min_addr: IpAddr::V4(Ipv4Addr::new(10, 1, 1, 2)),
                max_addr: IpAddr::V4(Ipv4Addr::new(10, 1, 1, 2)),
                min_port: 8080,
                max_port: 8080,
            }),
            persistent: false,
            hash: false,
            random: false,
        };
        let a = action_bits(&spec);
        let mut rng = 5;
        let r = unique_tuple(&k(40000), &spec, a, 1, &mut rng, &mut |_| true).expect("free");
        assert_eq!(&r.src.addr[..4], &[10, 1, 1, 2]);
        assert_eq!((r.src.port, r.dst.port), (8080, 40000));
        assert_eq!(reverse_action(a) & nat_bits::SRC, nat_bits::SRC);
    }
}
