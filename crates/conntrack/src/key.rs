//! Connection keys and their extraction from packets.
//!
//! What: [`ConnKey`] is the tuple a connection is looked up by — both
//! addresses, both ports (for ICMP echo-like messages, the identifier and
//! the message types), the IP protocol, the address family and the zone.
//! [`extract`] parses a frame's IPv4/IPv6 header and L4 header into a key
//! with the same checks Open vSwitch's userspace tracker makes:
//!
//! - IPv4: header length ≥ 20 and inside the packet, not a fragment, header
//!   checksum right (unless the caller vouches for the checksums);
//! - IPv6: extension headers (hop-by-hop, routing, destination options,
//!   AH, atomic fragments) are skipped; a real fragment is not tracked;
//! - TCP: data offset in range, checksum right, neither port zero;
//! - UDP: length field in range, checksum right (a zero IPv4 UDP checksum
//!   means "none"), neither port zero;
//! - ICMP: echo, timestamp and information request/reply (code 0) are
//!   connections of their own, keyed by identifier; destination
//!   unreachable, source quench, redirect, time exceeded and parameter
//!   problem are *related* to the connection of the packet they quote,
//!   whose source must be the error's destination: the key is then the
//!   quoted packet's key, reversed;
//! - ICMPv6: echo request/reply, and errors (destination unreachable,
//!   packet too big, time exceeded, parameter problem) as for ICMP;
//! - any other protocol is tracked by addresses alone (ports zero).
//!
//! A packet that fails any check gets no key and is `+inv`.
//!
//! Invariants: extraction never panics and never reads outside `frame`;
//! every offset in [`Parsed`] lies inside `frame`. Thread-safety: pure
//! functions over borrowed bytes.

use flowpath_wire::{checksum, ip_proto};

/// One side of a connection tuple.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The address; an IPv4 address sits in the first four bytes.
    pub addr: [u8; 16],
    /// The TCP/UDP port, or the ICMP identifier (zero for other protocols).
    pub port: u16,
    /// ICMP type (the request's type on the source side, the reply's on
    /// the destination side); zero for other protocols.
    pub icmp_type: u8,
    /// ICMP code (always zero for the messages tracked as connections).
    pub icmp_code: u8,
}

/// The tuple a connection is found by, in one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnKey {
    /// Sender.
    pub src: Endpoint,
    /// Receiver.
    pub dst: Endpoint,
    /// IPv6 (true) or IPv4.
    pub v6: bool,
    /// IP protocol number.
    pub proto: u8,
    /// Conntrack zone.
    pub zone: u16,
}

/// Hashes the key as the words the connection table's hash reads
/// ([`crate::table::tuple_words`]): fewer, larger writes than the derived
/// field-by-field hash (for the maps keyed by tuples: ALG expectations,
/// NAT's choice).
impl std::hash::Hash for ConnKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        for w in crate::table::tuple_words(self) {
            h.write_u64(w);
        }
    }
}

impl ConnKey {
    /// The same tuple seen from the other end.
    pub fn reverse(&self) -> ConnKey {
        ConnKey {
            src: self.dst,
            dst: self.src,
            ..*self
        }
    }

    /// Whether `other` is this tuple seen from the other end.
    #[inline(always)]
    pub fn is_reverse_of(&self, other: &ConnKey) -> bool {
        self.src == other.dst
            && self.dst == other.src
            && self.proto == other.proto
            && self.zone == other.zone
            && self.v6 == other.v6
    }

    /// Whether the protocol is ICMP for this key's address family.
    pub fn is_icmp(&self) -> bool {
        (!self.v6 && self.proto == ip_proto::ICMP) || (self.v6 && self.proto == ip_proto::ICMPV6)
    }

    /// Whether the protocol has ports that NAT may translate.
    pub fn has_ports(&self) -> bool {
        self.proto == ip_proto::TCP || self.proto == ip_proto::UDP
    }
}

/// What [`extract`] found in a packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The key to look up (for a related ICMP error: the quoted packet's
    /// key, reversed).
    pub key: ConnKey,
    /// The packet is an ICMP/ICMPv6 error quoting another connection.
    pub related: bool,
    /// Offset of the L4 header in the frame.
    pub l4: usize,
    /// End of the IP packet in the frame (excludes Ethernet padding).
    pub end: usize,
}

/// Ethernet types handled.
pub const ETH_TYPE_IPV4: u16 = 0x0800;
/// IPv6 Ethernet type.
pub const ETH_TYPE_IPV6: u16 = 0x86dd;

const ICMP4_ECHO_REPLY: u8 = 0;
const ICMP4_DST_UNREACH: u8 = 3;
const ICMP4_SOURCEQUENCH: u8 = 4;
const ICMP4_REDIRECT: u8 = 5;
const ICMP4_ECHO_REQUEST: u8 = 8;
const ICMP4_TIME_EXCEEDED: u8 = 11;
const ICMP4_PARAM_PROB: u8 = 12;
const ICMP4_TIMESTAMP: u8 = 13;
const ICMP4_TIMESTAMPREPLY: u8 = 14;
const ICMP4_INFOREQUEST: u8 = 15;
const ICMP4_INFOREPLY: u8 = 16;

const ICMP6_DST_UNREACH: u8 = 1;
const ICMP6_PACKET_TOO_BIG: u8 = 2;
const ICMP6_TIME_EXCEEDED: u8 = 3;
const ICMP6_PARAM_PROB: u8 = 4;
/// ICMPv6 echo request.
pub const ICMP6_ECHO_REQUEST: u8 = 128;
const ICMP6_ECHO_REPLY: u8 = 129;

/// Bytes of the quoted L4 header an ICMP error must carry.
const ICMP_ERROR_DATA_L4_LEN: usize = 8;

/// The reply type of an ICMP request type (and vice versa); 0 for others.
pub fn reverse_icmp_type(t: u8) -> u8 {
    match t {
        ICMP4_ECHO_REQUEST => ICMP4_ECHO_REPLY,
        ICMP4_ECHO_REPLY => ICMP4_ECHO_REQUEST,
        ICMP4_TIMESTAMP => ICMP4_TIMESTAMPREPLY,
        ICMP4_TIMESTAMPREPLY => ICMP4_TIMESTAMP,
        ICMP4_INFOREQUEST => ICMP4_INFOREPLY,
        ICMP4_INFOREPLY => ICMP4_INFOREQUEST,
        _ => 0,
    }
}

/// The reply type of an ICMPv6 echo type (and vice versa); 0 for others.
pub fn reverse_icmp6_type(t: u8) -> u8 {
    match t {
        ICMP6_ECHO_REQUEST => ICMP6_ECHO_REPLY,
        ICMP6_ECHO_REPLY => ICMP6_ECHO_REQUEST,
        _ => 0,
    }
}

/// Whether an ICMP (v4) type may open a connection.
pub fn icmp4_valid_new(t: u8) -> bool {
    matches!(t, ICMP4_ECHO_REQUEST | ICMP4_INFOREQUEST | ICMP4_TIMESTAMP)
}

#[inline]
fn be16(d: &[u8], at: usize) -> Option<u16> {
    match d.get(at..at.checked_add(2)?) {
        Some(&[a, b]) => Some(u16::from_be_bytes([a, b])),
        _ => None,
    }
}

/// Parses the IP header at `l3` (bounded by `end`): returns the key's
/// addresses and protocol, the L4 offset and the IP packet's end.
/// `outer` enables the checks that only apply to the packet itself (total
/// length, header checksum unless `csum_ok`).
pub(crate) fn parse_l3(
    frame: &[u8],
    l3: usize,
    end: usize,
    v6: bool,
    outer: bool,
    csum_ok: bool,
) -> Option<(ConnKey, usize, usize)> {
    let ip = frame.get(l3..end)?;
    let mut key = ConnKey {
        v6,
        ..ConnKey::default()
    };
    if !v6 {
        if ip.len() < 20 {
            return None;
        }
        let ihl = usize::from(ip.first()? & 0x0f) * 4;
        if ihl < 20 || ihl > ip.len() {
            return None;
        }
        let mut stop = end;
        if outer {
            let total = usize::from(be16(ip, 2)?);
            if total < ihl || total > ip.len() {
                return None;
            }
            stop = l3 + total;
        }
        let frag = be16(ip, 6)?;
        if frag & 0x3fff != 0 {
            return None;
        }
        if outer && !csum_ok && checksum::sum(ip.get(..ihl)?) != 0xffff {
            return None;
        }
        // (Each address written whole, in one store: the lookup reads it
        // back at once, and a wide load of narrower recent stores stalls.)
        let v4 = |at: usize| -> Option<[u8; 16]> {
            let b: [u8; 4] = ip.get(at..at + 4)?.try_into().ok()?;
            Some(u128::from(u32::from_le_bytes(b)).to_le_bytes())
        };
        key.src.addr = v4(12)?;
        key.dst.addr = v4(16)?;
        key.proto = *ip.get(9)?;
        Some((key, l3 + ihl, stop))
    } else {
        if ip.len() < 40 {
            return None;
        }
        let mut stop = end;
        if outer {
            let plen = usize::from(be16(ip, 4)?);
            if 40 + plen > ip.len() {
                return None;
            }
            stop = l3 + 40 + plen;
        }
        key.src.addr.copy_from_slice(ip.get(8..24)?);
        key.dst.addr.copy_from_slice(ip.get(24..40)?);
        let mut nh = *ip.get(6)?;
        let mut off = 40usize;
        let avail = stop - l3;
        loop {
            match nh {
                ip_proto::HOPOPTS | ip_proto::ROUTING | ip_proto::DSTOPTS => {
                    let len = (usize::from(*ip.get(off + 1)?) + 1) * 8;
                    if off + len > avail {
                        return None;
                    }
                    nh = *ip.get(off)?;
                    off += len;
                }
                ip_proto::AH => {
                    let len = (usize::from(*ip.get(off + 1)?) + 2) * 4;
                    if off + len > avail {
                        return None;
                    }
                    nh = *ip.get(off)?;
                    off += len;
                }
                ip_proto::FRAGMENT => {
                    if off + 8 > avail {
                        return None;
                    }
                    let offflg = be16(ip, off + 2)?;
                    if offflg & 0xfff9 != 0 {
                        // A real fragment (offset or more-fragments set).
                        return None;
                    }
                    nh = *ip.get(off)?;
                    off += 8;
                }
                _ => break,
            }
        }
        key.proto = nh;
        Some((key, l3 + off, stop))
    }
}

fn l4_sum_ok(frame: &[u8], key: &ConnKey, l4: usize, end: usize) -> bool {
    let Some(data) = frame.get(l4..end) else {
        return false;
    };
    let len = data.len();
    let ph = if key.v6 {
        checksum::pseudo_header_v6(key.src.addr, key.dst.addr, key.proto, len as u32)
    } else {
        let (Ok(s), Ok(d)) = (
            <[u8; 4]>::try_from(&key.src.addr[..4]),
            <[u8; 4]>::try_from(&key.dst.addr[..4]),
        ) else {
            return false;
        };
        if len > usize::from(u16::MAX) {
            return false;
        }
        checksum::pseudo_header_v4(s, d, key.proto, len as u16)
    };
    checksum::add(ph, checksum::sum(data)) == 0xffff
}

/// Extracts the L4 part of `key` from `frame[l4..end]`. `check` carries
/// the outer packet's checksum policy (`Some(csum_ok)`), `None` inside an
/// ICMP error (no checksum, no length checks, no recursion). `min_len`
/// is the minimum quoted L4 length inside an ICMPv4 error.
fn extract_l4(
    frame: &[u8],
    key: &mut ConnKey,
    l4: usize,
    end: usize,
    check: Option<bool>,
    min_len: Option<usize>,
) -> Option<bool> {
    let data = frame.get(l4..end)?;
    let size = data.len();
    match key.proto {
        ip_proto::TCP => {
            if let Some(csum_ok) = check {
                if size < 20 {
                    return None;
                }
                let hl = usize::from(data.get(12)? >> 4) * 4;
                if hl < 20 || hl > size {
                    return None;
                }
                if !csum_ok && !l4_sum_ok(frame, key, l4, end) {
                    return None;
                }
            }
            if size < min_len.unwrap_or(20) {
                return None;
            }
            key.src.port = be16(data, 0)?;
            key.dst.port = be16(data, 2)?;
            (key.src.port != 0 && key.dst.port != 0).then_some(false)
        }
        ip_proto::UDP => {
            if let Some(csum_ok) = check {
                if size < 8 {
                    return None;
                }
                let ulen = usize::from(be16(data, 4)?);
                if ulen < 8 || ulen > size {
                    return None;
                }
                let zero_ok = !key.v6 && be16(data, 6)? == 0;
                if !zero_ok && !csum_ok && !l4_sum_ok(frame, key, l4, end) {
                    return None;
                }
            }
            if size < min_len.unwrap_or(8) {
                return None;
            }
            key.src.port = be16(data, 0)?;
            key.dst.port = be16(data, 2)?;
            (key.src.port != 0 && key.dst.port != 0).then_some(false)
        }
        ip_proto::ICMP if !key.v6 => {
            if let Some(false) = check {
                if checksum::sum(data) != 0xffff {
                    return None;
                }
            }
            if size < min_len.unwrap_or(8).max(8) {
                return None;
            }
            let t = *data.first()?;
            let code = *data.get(1)?;
            match t {
                ICMP4_ECHO_REQUEST | ICMP4_ECHO_REPLY | ICMP4_TIMESTAMP | ICMP4_TIMESTAMPREPLY
                | ICMP4_INFOREQUEST | ICMP4_INFOREPLY => {
                    if code != 0 {
                        return None;
                    }
                    let id = be16(data, 4)?;
                    key.src.port = id;
                    key.dst.port = id;
                    key.src.icmp_type = t;
                    key.dst.icmp_type = reverse_icmp_type(t);
                    Some(false)
                }
                ICMP4_DST_UNREACH | ICMP4_TIME_EXCEEDED | ICMP4_PARAM_PROB | ICMP4_SOURCEQUENCH
                | ICMP4_REDIRECT => {
                    check?;
                    let (mut inner, il4, _) = parse_l3(frame, l4 + 8, end, false, false, true)?;
                    if inner.src.addr != key.dst.addr {
                        return None;
                    }
                    inner.zone = key.zone;
                    extract_l4(
                        frame,
                        &mut inner,
                        il4,
                        end,
                        None,
                        Some(ICMP_ERROR_DATA_L4_LEN),
                    )?;
                    *key = inner.reverse();
                    Some(true)
                }
                _ => None,
            }
        }
        ip_proto::ICMPV6 if key.v6 => {
            if let Some(false) = check {
                if !l4_sum_ok(frame, key, l4, end) {
                    return None;
                }
            }
            if size < 8 {
                return None;
            }
            let t = *data.first()?;
            let code = *data.get(1)?;
            match t {
                ICMP6_ECHO_REQUEST | ICMP6_ECHO_REPLY => {
                    if code != 0 {
                        return None;
                    }
                    let id = be16(data, 4)?;
                    key.src.port = id;
                    key.dst.port = id;
                    key.src.icmp_type = t;
                    key.dst.icmp_type = reverse_icmp6_type(t);
                    Some(false)
                }
                ICMP6_DST_UNREACH | ICMP6_PACKET_TOO_BIG | ICMP6_TIME_EXCEEDED
                | ICMP6_PARAM_PROB => {
                    check?;
                    let (mut inner, il4, _) = parse_l3(frame, l4 + 8, end, true, false, true)?;
                    if inner.src.addr != key.dst.addr {
                        return None;
                    }
                    inner.zone = key.zone;
                    extract_l4(frame, &mut inner, il4, end, None, None)?;
                    *key = inner.reverse();
                    Some(true)
                }
                _ => None,
            }
        }
        _ => Some(false),
    }
}

/// The words the connection table's hash reads
/// ([`crate::table::tuple_words`]), for an unfragmented IPv4 TCP or UDP
/// packet, straight from the frame without building the key (a
/// prefetch's guess: bounds-checked, not validated; `None` for anything
/// else). Equal to the words of the key [`extract`] gives whenever
/// `extract` accepts the packet.
#[inline]
pub(crate) fn quick_words_v4(
    frame: &[u8],
    l3: usize,
    dl_type: u16,
    zone: u16,
) -> Option<crate::table::TupleWords> {
    use crate::table::{meta_word, port_word};
    if dl_type != ETH_TYPE_IPV4 {
        return None;
    }
    let ip = frame.get(l3..)?;
    let vihl = *ip.first()?;
    let proto = *ip.get(9)?;
    if vihl >> 4 != 4 || (proto != ip_proto::TCP && proto != ip_proto::UDP) {
        return None;
    }
    if be16(ip, 6)? & 0x3fff != 0 {
        return None;
    }
    let ihl = usize::from(vihl & 0x0f) * 4;
    let word = |at: usize| -> Option<u64> {
        Some(u64::from(u32::from_le_bytes(
            ip.get(at..at + 4)?.try_into().ok()?,
        )))
    };
    let (src, dst) = (word(12)?, word(16)?);
    let (sp, dp) = (be16(ip, ihl)?, be16(ip, ihl + 2)?);
    Some([
        src,
        0,
        port_word(sp, 0, 0),
        dst,
        0,
        port_word(dp, 0, 0),
        meta_word(zone, proto, false),
    ])
}

/// [`extract_into`]'s straight line for the common packet, whose checksums
/// are not checked: IPv4 with a 20-byte header, not a fragment, TCP or UDP
/// with a whole header and non-zero ports. The same result as the general
/// path for such a packet; `None` for any other (the general path decides).
#[inline]
fn fast_v4(frame: &[u8], l3: usize, zone: u16) -> Option<Parsed> {
    let ip: &[u8; 20] = frame.get(l3..l3.checked_add(20)?)?.try_into().ok()?;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    let proto = ip[9];
    let l4 = l3 + 20;
    let end = l3 + total;
    if ip[0] & 0x0f != 5 || total < 20 || end > frame.len() || frag != 0 {
        return None;
    }
    let data = frame.get(l4..end)?;
    let ok = match proto {
        ip_proto::TCP => {
            let hl = usize::from(*data.get(12)? >> 4) * 4;
            hl >= 20 && hl <= data.len()
        }
        ip_proto::UDP => {
            let ulen = usize::from(be16(data, 4)?);
            ulen >= 8 && ulen <= data.len()
        }
        _ => false,
    };
    let (sp, dp) = (be16(data, 0)?, be16(data, 2)?);
    if !ok || sp == 0 || dp == 0 {
        return None;
    }
    let addr = |b: [u8; 4]| u128::from(u32::from_le_bytes(b)).to_le_bytes();
    let ep = |a: [u8; 4], port: u16| Endpoint {
        addr: addr(a),
        port,
        icmp_type: 0,
        icmp_code: 0,
    };
    Some(Parsed {
        key: ConnKey {
            src: ep([ip[12], ip[13], ip[14], ip[15]], sp),
            dst: ep([ip[16], ip[17], ip[18], ip[19]], dp),
            v6: false,
            proto,
            zone,
        },
        related: false,
        l4,
        end,
    })
}

/// Extracts the connection key of the packet whose IP header starts at
/// `frame[l3]`. `None`: the packet cannot be tracked (`+inv`).
pub fn extract(frame: &[u8], l3: usize, dl_type: u16, zone: u16, csum_ok: bool) -> Option<Parsed> {
    let mut p = Parsed::default();
    extract_into(frame, l3, dl_type, zone, csum_ok, &mut p).then_some(p)
}

/// [`extract`] into `out` (the tracker's per-packet path: the key is
/// built where it is used, not copied there); `false`: the packet cannot
/// be tracked, and `out` is unspecified.
#[inline]
pub fn extract_into(
    frame: &[u8],
    l3: usize,
    dl_type: u16,
    zone: u16,
    csum_ok: bool,
    out: &mut Parsed,
) -> bool {
    if dl_type == ETH_TYPE_IPV4 && csum_ok {
        if let Some(p) = fast_v4(frame, l3, zone) {
            *out = p;
            return true;
        }
    }
    extract_general(frame, l3, dl_type, zone, csum_ok, out)
}

/// [`extract_into`] without its straight line.
fn extract_general(
    frame: &[u8],
    l3: usize,
    dl_type: u16,
    zone: u16,
    csum_ok: bool,
    out: &mut Parsed,
) -> bool {
    let v6 = match dl_type {
        ETH_TYPE_IPV4 => false,
        ETH_TYPE_IPV6 => true,
        _ => return false,
    };
    let Some((key, l4, end)) = parse_l3(frame, l3, frame.len(), v6, true, csum_ok) else {
        return false;
    };
    out.key = key;
    out.key.zone = zone;
    let Some(related) = extract_l4(frame, &mut out.key, l4, end, Some(csum_ok), None) else {
        return false;
    };
    out.related = related;
    out.l4 = l4;
    out.end = end;
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testpkt::*;

    #[test]
    fn tcp_v4_key() {
        let f = tcp4([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80, 1, 0, TCP_SYN, &[]);
        let p = extract(&f, 14, ETH_TYPE_IPV4, 7, false).expect("valid");
        assert!(!p.related);
        assert_eq!(p.key.proto, 6);
        assert_eq!(p.key.zone, 7);
        assert_eq!(&p.key.src.addr[..4], &[10, 0, 0, 1]);
        assert_eq!((p.key.src.port, p.key.dst.port), (1234, 80));
        assert_eq!(p.l4, 34);
        assert_eq!(p.end, f.len());
    }

    #[test]
    fn bad_checksums_are_invalid_unless_vouched_for() {
        let mut f = tcp4([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80, 1, 0, TCP_SYN, &[]);
        let last = f.len() - 3; // inside the TCP header (urgent pointer)
        f[last] ^= 0x55;
        assert!(extract(&f, 14, ETH_TYPE_IPV4, 0, false).is_none());
        assert!(extract(&f, 14, ETH_TYPE_IPV4, 0, true).is_some());
        let mut g = udp4([1, 1, 1, 1], [2, 2, 2, 2], 5, 6, b"hi");
        g[14 + 10] ^= 1; // IPv4 header checksum
        assert!(extract(&g, 14, ETH_TYPE_IPV4, 0, false).is_none());
    }

    #[test]
    fn udp_zero_checksum_ok_on_v4_only() {
        let mut f = udp4([1, 1, 1, 1], [2, 2, 2, 2], 5, 6, b"hi");
        f[34 + 6] = 0;
        f[34 + 7] = 0;
        assert!(extract(&f, 14, ETH_TYPE_IPV4, 0, false).is_some());
        let mut g = udp6(v6a(1), v6a(2), 5, 6, b"hi");
        g[54 + 6] = 0;
        g[54 + 7] = 0;
        assert!(extract(&g, 14, ETH_TYPE_IPV6, 0, false).is_none());
    }

    #[test]
    fn port_zero_and_fragments_are_invalid() {
        let f = udp4([1, 1, 1, 1], [2, 2, 2, 2], 0, 6, b"");
        assert!(extract(&f, 14, ETH_TYPE_IPV4, 0, false).is_none());
        let mut g = udp4([1, 1, 1, 1], [2, 2, 2, 2], 5, 6, b"");
        g[14 + 6] = 0x20; // MF
        fix_ipv4_csum(&mut g);
        assert!(extract(&g, 14, ETH_TYPE_IPV4, 0, false).is_none());
        assert!(extract(&g, 14, 0x0806, 0, false).is_none());
    }

    #[test]
    fn icmp_echo_and_error() {
        let e = icmp4_echo([1, 1, 1, 1], [2, 2, 2, 2], 8, 0x42, 1);
        let p = extract(&e, 14, ETH_TYPE_IPV4, 0, false).expect("echo");
        assert_eq!((p.key.src.icmp_type, p.key.dst.icmp_type), (8, 0));
        assert_eq!((p.key.src.port, p.key.dst.port), (0x42, 0x42));
        // A port unreachable from 2.2.2.2 about a UDP packet 1.1.1.1 -> 2.2.2.2.
        let inner = udp4([1, 1, 1, 1], [2, 2, 2, 2], 5000, 53, b"query");
        let err = icmp4_error([2, 2, 2, 2], [1, 1, 1, 1], 3, 3, &inner[14..]);
        let p = extract(&err, 14, ETH_TYPE_IPV4, 0, false).expect("error");
        assert!(p.related);
        assert_eq!(p.key.proto, 17);
        assert_eq!(&p.key.src.addr[..4], &[2, 2, 2, 2]);
        assert_eq!((p.key.src.port, p.key.dst.port), (53, 5000));
        // The quoted packet must come from the error's destination.
        let err2 = icmp4_error([2, 2, 2, 2], [3, 3, 3, 3], 3, 3, &inner[14..]);
        assert!(extract(&err2, 14, ETH_TYPE_IPV4, 0, false).is_none());
    }

    #[test]
    fn icmp6_echo_and_error() {
        let e = icmp6_echo(v6a(1), v6a(2), 128, 7, 1);
        let p = extract(&e, 14, ETH_TYPE_IPV6, 0, false).expect("echo6");
        assert_eq!((p.key.src.icmp_type, p.key.dst.icmp_type), (128, 129));
        let inner = tcp6(v6a(1), v6a(2), 1000, 22, 5, 0, TCP_SYN);
        let err = icmp6_error(v6a(2), v6a(1), 1, 4, &inner[14..]);
        let p = extract(&err, 14, ETH_TYPE_IPV6, 0, false).expect("error6");
        assert!(p.related);
        assert_eq!((p.key.src.port, p.key.dst.port), (22, 1000));
    }

    #[test]
    fn never_panics_on_garbage() {
        for len in 0..80 {
            let f: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            for l3 in [0usize, 14, 100] {
                let _ = extract(&f, l3, ETH_TYPE_IPV4, 0, false);
                let _ = extract(&f, l3, ETH_TYPE_IPV6, 0, true);
            }
        }
    }

    fn general(frame: &[u8], zone: u16) -> Option<Parsed> {
        let mut p = Parsed::default();
        extract_general(frame, 14, ETH_TYPE_IPV4, zone, true, &mut p).then_some(p)
    }

    #[test]
    fn the_straight_line_takes_plain_tcp_and_udp() {
        let t = tcp4([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80, 1, 0, TCP_SYN, b"xy");
        let u = udp4([1, 2, 3, 4], [5, 6, 7, 8], 53, 4000, b"hello");
        for f in [&t, &u] {
            let fast = fast_v4(f, 14, 9).expect("taken");
            assert_eq!(Some(fast), general(f, 9));
        }
    }

    proptest::proptest! {
        /// The straight line answers as the general path wherever it
        /// answers, over plain packets with any byte of their first 60
        /// changed and any length.
        #[test]
        fn the_straight_line_agrees_with_the_general_path(
            tcp in proptest::bool::ANY,
            sport in proptest::prop_oneof![proptest::strategy::Just(0u16), 1u16..],
            dport in proptest::prop_oneof![proptest::strategy::Just(0u16), 1u16..],
            changes in proptest::collection::vec(
                (0usize..60, proptest::prop_oneof![
                    proptest::strategy::Just(0u8),
                    proptest::strategy::Just(0x45u8),
                    proptest::strategy::Just(0xffu8),
                    proptest::num::u8::ANY,
                ]),
                0..3,
            ),
            cut in 0usize..80,
            zone in proptest::num::u16::ANY,
        ) {
            let mut f = if tcp {
                tcp4([10, 0, 0, 1], [10, 0, 0, 2], sport, dport, 1, 0, TCP_SYN, b"payload")
            } else {
                udp4([10, 0, 0, 1], [10, 0, 0, 2], sport, dport, b"payload")
            };
            for (at, byte) in changes {
                if let Some(b) = f.get_mut(at) {
                    *b = byte;
                }
            }
            f.truncate(f.len().saturating_sub(cut));
            if let Some(fast) = fast_v4(&f, 14, zone) {
                proptest::prop_assert_eq!(Some(fast), general(&f, zone));
            }
        }
    }
}
