//! Hand-built test frames (Ethernet + IPv4/IPv6 + TCP/UDP/ICMP) with
//! correct checksums, for the unit tests and the integration tests (which
//! include this file by path).
//!
//! Every builder returns a whole Ethernet frame whose IP header starts at
//! offset 14. Test-only code: it may index freely.

#![allow(dead_code, missing_docs, clippy::too_many_arguments)]

use flowpath_wire::checksum;

pub const TCP_FIN: u16 = 0x01;
pub const TCP_SYN: u16 = 0x02;
pub const TCP_RST: u16 = 0x04;
pub const TCP_PSH: u16 = 0x08;
pub const TCP_ACK: u16 = 0x10;

pub fn v6a(n: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0] = 0xfc;
    a[15] = n;
    a
}

fn eth(ty: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    f.extend_from_slice(&ty.to_be_bytes());
    f
}

pub fn fix_ipv4_csum(f: &mut [u8]) {
    let ihl = usize::from(f[14] & 0x0f) * 4;
    f[24] = 0;
    f[25] = 0;
    let c = checksum::checksum(&f[14..14 + ihl]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = eth(0x0800);
    let total = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0]);
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(l4);
    fix_ipv4_csum(&mut f);
    f
}

fn ipv6(src: [u8; 16], dst: [u8; 16], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = eth(0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    f.extend_from_slice(&[proto, 64]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(l4);
    f
}

/// Recomputes the L4 checksum at `csum_at` (offset within L4) of a frame.
pub fn fix_l4_csum(f: &mut [u8], csum_at: usize) {
    let v6 = f[12] == 0x86;
    let (l4, ph) = if v6 {
        let len = (f.len() - 54) as u32;
        let s: [u8; 16] = f[22..38].try_into().unwrap();
        let d: [u8; 16] = f[38..54].try_into().unwrap();
        (54, checksum::pseudo_header_v6(s, d, f[20], len))
    } else {
        let ihl = usize::from(f[14] & 0x0f) * 4;
        let l4 = 14 + ihl;
        let s: [u8; 4] = f[26..30].try_into().unwrap();
        let d: [u8; 4] = f[30..34].try_into().unwrap();
        (
            l4,
            checksum::pseudo_header_v4(s, d, f[23], (f.len() - l4) as u16),
        )
    };
    f[l4 + csum_at] = 0;
    f[l4 + csum_at + 1] = 0;
    let proto = if v6 { f[20] } else { f[23] };
    let c = if proto == 1 {
        checksum::checksum(&f[l4..])
    } else {
        !checksum::add(ph, checksum::sum(&f[l4..]))
    };
    f[l4 + csum_at..l4 + csum_at + 2].copy_from_slice(&c.to_be_bytes());
}

pub fn tcp_hdr(
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u16,
    win: u16,
    opts: &[u8],
) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    let hl = 20 + opts.len();
    let off = ((hl / 4) as u16) << 12;
    t.extend_from_slice(&(off | flags).to_be_bytes());
    t.extend_from_slice(&win.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 0]);
    t.extend_from_slice(opts);
    t
}

pub fn tcp4_full(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u16,
    win: u16,
    opts: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut t = tcp_hdr(sport, dport, seq, ack, flags, win, opts);
    t.extend_from_slice(payload);
    let mut f = ipv4(src, dst, 6, &t);
    fix_l4_csum(&mut f, 16);
    f
}

pub fn tcp4(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u16,
    payload: &[u8],
) -> Vec<u8> {
    tcp4_full(src, dst, sport, dport, seq, ack, flags, 65535, &[], payload)
}

pub fn tcp6(
    src: [u8; 16],
    dst: [u8; 16],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u16,
) -> Vec<u8> {
    let t = tcp_hdr(sport, dport, seq, ack, flags, 65535, &[]);
    let mut f = ipv6(src, dst, 6, &t);
    fix_l4_csum(&mut f, 16);
    f
}

pub fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    let mut f = ipv4(src, dst, 17, &u);
    fix_l4_csum(&mut f, 6);
    f
}

pub fn udp6(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    let mut f = ipv6(src, dst, 17, &u);
    fix_l4_csum(&mut f, 6);
    f
}

pub fn icmp4_echo(src: [u8; 4], dst: [u8; 4], ty: u8, id: u16, seq: u16) -> Vec<u8> {
    let mut i = vec![ty, 0, 0, 0];
    i.extend_from_slice(&id.to_be_bytes());
    i.extend_from_slice(&seq.to_be_bytes());
    i.extend_from_slice(b"pingdata");
    let mut f = ipv4(src, dst, 1, &i);
    fix_l4_csum(&mut f, 2);
    f
}

pub fn icmp4_error(src: [u8; 4], dst: [u8; 4], ty: u8, code: u8, quoted_ip: &[u8]) -> Vec<u8> {
    let mut i = vec![ty, code, 0, 0, 0, 0, 0, 0];
    let n = quoted_ip.len().min(28);
    i.extend_from_slice(&quoted_ip[..n]);
    let mut f = ipv4(src, dst, 1, &i);
    fix_l4_csum(&mut f, 2);
    f
}

pub fn icmp6_echo(src: [u8; 16], dst: [u8; 16], ty: u8, id: u16, seq: u16) -> Vec<u8> {
    let mut i = vec![ty, 0, 0, 0];
    i.extend_from_slice(&id.to_be_bytes());
    i.extend_from_slice(&seq.to_be_bytes());
    let mut f = ipv6(src, dst, 58, &i);
    fix_l4_csum(&mut f, 2);
    f
}

pub fn icmp6_error(src: [u8; 16], dst: [u8; 16], ty: u8, code: u8, quoted_ip: &[u8]) -> Vec<u8> {
    let mut i = vec![ty, code, 0, 0, 0, 0, 0, 0];
    i.extend_from_slice(quoted_ip);
    let mut f = ipv6(src, dst, 58, &i);
    fix_l4_csum(&mut f, 2);
    f
}

/// A frame of another IP protocol (e.g. GRE = 47) over IPv4.
pub fn other4(src: [u8; 4], dst: [u8; 4], proto: u8) -> Vec<u8> {
    ipv4(src, dst, proto, &[0u8; 8])
}

/// Whether the IPv4 header and L4 checksums of a frame are right.
pub fn checksums_ok(f: &[u8]) -> bool {
    let mut g = f.to_vec();
    let v6 = f[12] == 0x86;
    if !v6 {
        fix_ipv4_csum(&mut g);
    }
    let proto = if v6 { f[20] } else { f[23] };
    match proto {
        6 => fix_l4_csum(&mut g, 16),
        17 => fix_l4_csum(&mut g, 6),
        1 | 58 => fix_l4_csum(&mut g, 2),
        _ => {}
    }
    g == f
}
