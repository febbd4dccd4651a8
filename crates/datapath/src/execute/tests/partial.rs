//! Partial transport checksums (left to offload: the field holds the
//! pseudo-header's sum): address rewrites keep the field the new
//! pseudo-header's sum, port rewrites leave it alone.

use super::*;

/// The (not inverted) sum of the pseudo-header of an Ethernet/IPv4 or
/// IPv6 frame's TCP or UDP segment, and the checksum field's offset.
pub(crate) fn pseudo_sum(f: &[u8]) -> (u16, usize) {
    let v6 = f[14] >> 4 == 6;
    let (addrs, proto, l4) = if v6 {
        (&f[22..54], f[20], 54)
    } else {
        (&f[26..34], f[23], 14 + usize::from(f[14] & 0x0f) * 4)
    };
    let len = f.len() - l4;
    let mut s: u32 = u32::from(proto) + len as u32;
    for c in addrs.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    (s as u16, l4 + if proto == 6 { 16 } else { 6 })
}

/// `f` with its checksum field set to its pseudo-header's sum.
pub(crate) fn partial(mut f: Vec<u8>) -> Vec<u8> {
    let (s, at) = pseudo_sum(&f);
    f[at..at + 2].copy_from_slice(&s.to_be_bytes());
    f
}

fn field(f: &[u8]) -> u16 {
    let (_, at) = pseudo_sum(f);
    u16::from_be_bytes([f[at], f[at + 1]])
}

#[test]
fn rewrites_keep_a_partial_checksum_a_pseudo_header_sum() {
    let v4_addrs = set(SetHeader::Ipv4, |k, m| {
        k.set_nw_src(0xc0a8_0101);
        m.set_nw_src(u32::MAX);
        k.set_nw_dst(0x0a63_0007);
        m.set_nw_dst(u32::MAX);
    });
    let v6_addrs = set(SetHeader::Ipv6, |k, m| {
        k.set_ipv6_src(0xfd00_0000_0000_0000_0000_0000_0000_0042);
        m.set_ipv6_src(u128::MAX);
        k.set_ipv6_dst(0xfd00_0000_0000_0000_0000_0000_0000_0099);
        m.set_ipv6_dst(u128::MAX);
    });
    let ports = |h: SetHeader| {
        set(h, |k, m| {
            k.set_tp_src(4321);
            m.set_tp_src(u16::MAX);
            k.set_tp_dst(8080);
            m.set_tp_dst(u16::MAX);
        })
    };
    for (frame, addrs, l4) in [
        (tcp4(b"partial"), &v4_addrs, SetHeader::Tcp),
        (udp4(b"partial"), &v4_addrs, SetHeader::Udp),
        (v6(6, b"partial"), &v6_addrs, SetHeader::Tcp),
        (v6(17, b"partial"), &v6_addrs, SetHeader::Udp),
    ] {
        let f = partial(frame);
        let (mut p, mut meta) = load(&f);
        meta.csum_partial = true;
        apply(&mut p, &mut meta, addrs).unwrap();
        assert_ne!(p.data(), &f[..], "{l4:?}: the addresses changed");
        assert_eq!(
            field(p.data()),
            pseudo_sum(p.data()).0,
            "{l4:?}: after the addresses"
        );
        let before = field(p.data());
        apply(&mut p, &mut meta, &ports(l4)).unwrap();
        assert_eq!(
            field(p.data()),
            before,
            "{l4:?}: the ports are not in the sum"
        );
        // Without the flag, the same rewrites patch a full checksum.
        let (mut q, mut meta) = load(&f);
        apply(&mut q, &mut meta, addrs).unwrap();
        assert_ne!(field(q.data()), pseudo_sum(q.data()).0, "{l4:?}");
    }
}
