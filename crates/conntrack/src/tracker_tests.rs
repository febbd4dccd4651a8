//! Unit tests of the tracker: states, zones, commit, mark/label, limits,
//! timeouts, flush, dump, NAT end to end. (Test-only module.)

use super::*;
use crate::format::{format_entry, format_zone_limits};
use crate::key::ETH_TYPE_IPV6;
use crate::testpkt::*;
use crate::{state as s, NatKind, NatRange, NatSpec};
use std::net::Ipv4Addr;

const A: [u8; 4] = [10, 1, 1, 1];
pub(super) const B: [u8; 4] = [10, 1, 1, 2];

pub(super) fn ct() -> Conntrack {
    Conntrack::new(Config {
        shards: 8,
        ..Config::default()
    })
}

pub(super) fn commit(zone: u16) -> CtArgs {
    CtArgs {
        zone,
        commit: true,
        ..CtArgs::default()
    }
}

pub(super) fn lookup(zone: u16) -> CtArgs {
    CtArgs {
        zone,
        ..CtArgs::default()
    }
}

/// Runs a frame through `ct` with fresh metadata; returns the metadata.
pub(super) fn run(ct: &Conntrack, f: &mut [u8], args: &CtArgs, now: u64) -> CtMeta {
    let mut md = CtMeta::default();
    let dl = if f.get(12) == Some(&0x86) {
        ETH_TYPE_IPV6
    } else {
        ETH_TYPE_IPV4
    };
    ct.execute(f, 14, dl, false, args, &mut md, now);
    md
}

#[test]
fn udp_new_then_reply_established() {
    let ct = ct();
    let mut f = udp4(A, B, 1, 2, b"x");
    let md = run(&ct, &mut f, &lookup(0), 0);
    assert_eq!(md.state, s::TRK | s::NEW, "uncommitted: new");
    assert_eq!(ct.n_conns(), 0);
    let md = run(&ct, &mut f, &commit(0), 0);
    assert_eq!(md.state, s::TRK | s::NEW);
    assert_eq!(ct.n_conns(), 1);
    assert_ne!(md.conn, 0);
    let o = md.orig.expect("orig");
    assert_eq!(
        (&o.src[..4], o.src_port, o.dst_port, o.proto),
        (&A[..], 1, 2, 17)
    );
    // More packets one way: still new.
    let md = run(&ct, &mut f, &lookup(0), 1);
    assert_eq!(md.state, s::TRK | s::NEW);
    let mut r = udp4(B, A, 2, 1, b"y");
    let md = run(&ct, &mut r, &lookup(0), 2);
    assert_eq!(md.state, s::TRK | s::EST | s::RPL);
    assert_eq!(
        md.orig.expect("orig").src_port,
        1,
        "orig tuple of the reply"
    );
    let md = run(&ct, &mut f, &lookup(0), 3);
    assert_eq!(md.state, s::TRK | s::EST);
    // Another zone does not see it.
    let md = run(&ct, &mut f, &lookup(1), 3);
    assert_eq!(md.state, s::TRK | s::NEW);
    let dump = ct.dump(None);
    assert_eq!(dump.len(), 1);
    assert_eq!(
        format_entry(&dump[0], false, false),
        "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=1,dport=2),reply=(src=10.1.1.2,dst=10.1.1.1,sport=2,dport=1)"
    );
}

#[test]
fn tcp_handshake_states_and_dump() {
    let ct = ct();
    let mut syn = tcp4(A, B, 34567, 80, 100, 0, TCP_SYN, &[]);
    let md = run(&ct, &mut syn, &commit(1), 0);
    assert_eq!(md.state, s::TRK | s::NEW);
    let mut synack = tcp4(B, A, 80, 34567, 500, 101, TCP_SYN | TCP_ACK, &[]);
    let md = run(&ct, &mut synack, &lookup(1), 1);
    assert_eq!(md.state, s::TRK | s::EST | s::RPL);
    let mut ack = tcp4(A, B, 34567, 80, 101, 501, TCP_ACK, &[]);
    let md = run(&ct, &mut ack, &lookup(1), 2);
    assert_eq!(md.state, s::TRK | s::EST);
    let mut data = tcp4(
        A,
        B,
        34567,
        80,
        101,
        501,
        TCP_ACK | TCP_PSH,
        b"GET / HTTP/1.0\r\n\r\n",
    );
    assert_eq!(run(&ct, &mut data, &lookup(1), 3).state, s::TRK | s::EST);
    // Way outside the window: invalid.
    let mut bad = tcp4(A, B, 34567, 80, 2_000_000_000, 501, TCP_ACK, b"zz");
    assert_eq!(run(&ct, &mut bad, &lookup(1), 4).state, s::TRK | s::INV);
    let d = ct.dump_at(Some(1), 4);
    assert_eq!(
        format_entry(&d[0], false, true),
        "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=34567,dport=80),reply=(src=10.1.1.2,dst=10.1.1.1,sport=80,dport=34567),zone=1,timeout=86399,protoinfo=(state=ESTABLISHED)"
    );
    // A SYN+ACK cannot open a connection; an orphan ACK can (mid-stream).
    let mut sa = tcp4(A, B, 1111, 80, 1, 1, TCP_SYN | TCP_ACK, &[]);
    assert_eq!(run(&ct, &mut sa, &commit(0), 0).state, s::TRK | s::INV);
    let mut mid = tcp4(A, B, 2222, 80, 1, 1, TCP_ACK, &[]);
    assert_eq!(run(&ct, &mut mid, &commit(0), 0).state, s::TRK | s::NEW);
}

#[test]
fn icmp_echo_and_related_error() {
    let ct = ct();
    let mut req = icmp4_echo(A, B, 8, 9, 1);
    assert_eq!(run(&ct, &mut req, &commit(5), 0).state, s::TRK | s::NEW);
    let mut rep = icmp4_echo(B, A, 0, 9, 1);
    let md = run(&ct, &mut rep, &lookup(5), 1);
    assert_eq!(md.state, s::TRK | s::EST | s::RPL);
    let o = md.orig.expect("orig");
    assert_eq!((o.src_port, o.dst_port), (8, 0), "ICMP: type and code");
    // An echo reply alone cannot open a connection.
    let mut lone = icmp4_echo(B, A, 0, 10, 1);
    assert_eq!(run(&ct, &mut lone, &commit(5), 1).state, s::TRK | s::INV);
    // A UDP connection and an ICMP port unreachable about it.
    let mut u = udp4(A, B, 5000, 53, b"q");
    run(&ct, &mut u, &commit(0), 0);
    let mut err = icmp4_error(B, A, 3, 3, &u[14..]);
    let md = run(&ct, &mut err, &lookup(0), 1);
    assert_eq!(md.state, s::TRK | s::REL | s::RPL);
    // An error about an unknown connection is invalid.
    let other = udp4(A, B, 5001, 53, b"q");
    let mut err2 = icmp4_error(B, A, 3, 3, &other[14..]);
    assert_eq!(run(&ct, &mut err2, &lookup(0), 1).state, s::TRK | s::INV);
    let d = ct.dump(Some(5));
    assert_eq!(
        format_entry(&d[0], false, false),
        "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=9,type=8,code=0),reply=(src=10.1.1.2,dst=10.1.1.1,id=9,type=0,code=0),zone=5"
    );
}

#[test]
fn icmpv6_echo_dump() {
    let ct = ct();
    let mut req = icmp6_echo(v6a(1), v6a(2), 128, 3, 1);
    assert_eq!(run(&ct, &mut req, &commit(0), 0).state, s::TRK | s::NEW);
    let mut rep = icmp6_echo(v6a(2), v6a(1), 129, 3, 1);
    assert_eq!(
        run(&ct, &mut rep, &lookup(0), 0).state,
        s::TRK | s::EST | s::RPL
    );
    let d = ct.dump(None);
    assert_eq!(
        format_entry(&d[0], false, false),
        "icmpv6,orig=(src=fc00::1,dst=fc00::2,id=3,type=128,code=0),reply=(src=fc00::2,dst=fc00::1,id=3,type=129,code=0)"
    );
}

#[test]
fn unparsable_and_non_ip_are_invalid() {
    let ct = ct();
    let mut f = udp4(A, B, 1, 2, b"x");
    let mut md = CtMeta::default();
    ct.execute(&mut f, 14, 0x0806, false, &commit(3), &mut md, 0);
    assert_eq!(md.state, s::TRK | s::INV);
    assert_eq!(md.zone, 3);
    let mut short = f[..20].to_vec();
    assert_eq!(run(&ct, &mut short, &commit(0), 0).state, s::TRK | s::INV);
    assert_eq!(ct.n_conns(), 0);
    assert_eq!(ct.stats().unparsable, 2);
}

#[test]
fn mark_and_label_with_masks() {
    let ct = ct();
    let mut f = udp4(A, B, 1, 2, b"x");
    let args = CtArgs {
        set_mark: Some((0x3, 0xff)),
        set_label: Some((0xffff0005, u128::MAX)),
        ..commit(0)
    };
    let md = run(&ct, &mut f, &args, 0);
    assert_eq!((md.mark, md.label), (3, 0xffff0005));
    // Masked update keeps the other bits.
    let args2 = CtArgs {
        set_mark: Some((0x100, 0xf00)),
        ..commit(0)
    };
    let md = run(&ct, &mut f, &args2, 1);
    assert_eq!(md.mark, 0x103);
    let mut r = udp4(B, A, 2, 1, b"y");
    let md = run(&ct, &mut r, &lookup(0), 2);
    assert_eq!((md.mark, md.label), (0x103, 0xffff0005), "replies see them");
    let line = format_entry(&ct.dump(None)[0], false, false);
    assert!(line.ends_with(",mark=259,labels=0xffff0005"), "{line}");
    // Not committed, not found: no mark.
    let mut g = udp4(A, B, 7, 8, b"");
    assert_eq!(
        run(
            &ct,
            &mut g,
            &CtArgs {
                set_mark: Some((1, 1)),
                ..lookup(0)
            },
            0
        )
        .mark,
        0
    );
}

#[test]
fn timeouts_and_sweep() {
    let ct = ct();
    let mut f = udp4(A, B, 1, 2, b"x");
    run(&ct, &mut f, &commit(0), 0);
    assert_eq!(ct.sweep_all(59_999), 0);
    // Expired connections are not found even before the sweep.
    assert_eq!(run(&ct, &mut f, &lookup(0), 60_000).state, s::TRK | s::NEW);
    let mut removed = 0;
    for _ in 0..16 {
        removed += ct.sweep(60_000);
    }
    assert_eq!(removed, 1);
    assert_eq!(ct.n_conns(), 0);
    // A reply shortens the UDP timeout to 30 s.
    run(&ct, &mut f, &commit(0), 100_000);
    let mut r = udp4(B, A, 2, 1, b"y");
    run(&ct, &mut r, &lookup(0), 100_000);
    assert_eq!(ct.dump_at(None, 100_000)[0].timeout, 30);
    assert_eq!(ct.sweep_all(130_000), 1);
}

#[test]
fn max_conns_and_zone_limits() {
    let ct = ct();
    ct.set_max_conns(2);
    for p in 1..=3u16 {
        let mut f = udp4(A, B, p, 9, b"");
        let md = run(&ct, &mut f, &commit(0), 0);
        assert_eq!(md.state, s::TRK | s::NEW, "refused commits stay +new");
    }
    assert_eq!(ct.n_conns(), 2);
    assert_eq!(ct.stats().full, 1);
    ct.set_max_conns(100);
    ct.set_default_limit(10);
    ct.set_zone_limit(3, 2);
    for p in 1..=4u16 {
        let mut f = udp4(A, B, p, 9, b"");
        run(&ct, &mut f, &commit(3), 0);
    }
    assert_eq!(ct.stats().zone_limited, 2);
    assert_eq!(
        format_zone_limits(ct.default_limit(), &ct.zone_limits()),
        "default limit=10\nzone=3,limit=2,count=2"
    );
    assert_eq!(
        ct.zone_limits_of(&[0, 3, 4]),
        vec![(0, 10, 2), (3, 2, 2), (4, 10, 0)]
    );
    ct.flush(Some(3), None);
    assert_eq!(ct.zone_limits_of(&[3]), vec![(3, 2, 0)]);
    assert_eq!(ct.n_conns(), 2);
    ct.del_zone_limit(3);
    assert!(ct.zone_limits().is_empty());
}

#[test]
fn flush_by_tuple() {
    let ct = ct();
    for p in 1..=3u16 {
        let mut f = udp4(A, B, p, 9, b"");
        run(&ct, &mut f, &commit(0), 0);
    }
    let t = FlushTuple {
        proto: Some(17),
        orig: TupleMatch {
            src_port: Some(2),
            ..TupleMatch::default()
        },
        ..FlushTuple::default()
    };
    ct.flush(None, Some(&t));
    assert_eq!(ct.n_conns(), 2);
    assert!(ct.dump(None).iter().all(|e| e.orig.src_port != 2));
    ct.flush(None, None);
    assert_eq!(ct.n_conns(), 0);
    assert!(ct.dump(None).is_empty());
}

#[test]
fn fast_path_by_handle_and_zone_change() {
    let ct = ct();
    let mut f = udp4(A, B, 1, 2, b"x");
    let mut md = CtMeta::default();
    ct.execute(&mut f, 14, ETH_TYPE_IPV4, false, &commit(1), &mut md, 0);
    let h = md.conn;
    assert_ne!(h, 0);
    // Recirculated, same zone: mark set through the handle.
    let args = CtArgs {
        set_mark: Some((7, u32::MAX)),
        ..commit(1)
    };
    ct.execute(&mut f, 14, ETH_TYPE_IPV4, false, &args, &mut md, 1);
    assert_eq!(md.mark, 7);
    assert_eq!(md.conn, h);
    // A different zone: the state is recomputed there.
    ct.execute(&mut f, 14, ETH_TYPE_IPV4, false, &lookup(2), &mut md, 1);
    assert_eq!(md.state, s::TRK | s::NEW);
    assert_eq!(md.zone, 2);
    assert_eq!(md.mark, 0);
}

#[test]
fn force_replaces_reply_direction_connection() {
    let ct = ct();
    let mut f = udp4(A, B, 1, 2, b"x");
    run(&ct, &mut f, &commit(0), 0);
    let mut r = udp4(B, A, 2, 1, b"y");
    let args = CtArgs {
        force: true,
        ..commit(0)
    };
    let md = run(&ct, &mut r, &args, 1);
    assert_eq!(md.state, s::TRK | s::NEW);
    let d = ct.dump(None);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].orig.src, IpAddr::V4(Ipv4Addr::from(B)));
}

fn snat_args(lo: [u8; 4], hi: [u8; 4], pmin: u16, pmax: u16) -> CtArgs {
    CtArgs {
        nat: Some(NatSpec {
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
        }),
        ..commit(0)
    }
}

fn plain_nat() -> CtArgs {
    CtArgs {
        nat: Some(NatSpec {
            kind: None,
            range: None,
            persistent: false,
            hash: false,
            random: false,
        }),
        ..lookup(0)
    }
}

#[test]
fn snat_tcp_rewrites_both_directions() {
    let ct = ct();
    let ext = [192, 0, 2, 1];
    let mut syn = tcp4(A, B, 40000, 80, 100, 0, TCP_SYN, &[]);
    let md = run(&ct, &mut syn, &snat_args(ext, ext, 0, 0), 0);
    assert_eq!(md.state, s::TRK | s::NEW | s::SNAT);
    assert_eq!(md.conn, 0, "no handle after a NAT action");
    assert_eq!(&syn[26..30], &ext, "source rewritten");
    assert_eq!(u16::from_be_bytes([syn[34], syn[35]]), 40000, "port kept");
    assert!(checksums_ok(&syn), "IPv4 and TCP checksums patched");
    // The reply comes to the translated address and is translated back.
    let mut synack = tcp4(B, ext, 80, 40000, 900, 101, TCP_SYN | TCP_ACK, &[]);
    let md = run(&ct, &mut synack, &plain_nat(), 1);
    assert_eq!(md.state, s::TRK | s::EST | s::RPL | s::DNAT);
    assert_eq!(&synack[30..34], &A);
    assert!(checksums_ok(&synack));
    let o = md.orig.expect("orig");
    assert_eq!(&o.src[..4], &A);
    // The next original packet: plain `nat` applies the translation.
    let mut ack = tcp4(A, B, 40000, 80, 101, 901, TCP_ACK, &[]);
    let md = run(&ct, &mut ack, &plain_nat(), 2);
    assert_eq!(md.state, s::TRK | s::EST | s::SNAT);
    assert_eq!(&ack[26..30], &ext);
    assert!(checksums_ok(&ack));
    let d = ct.dump(None);
    assert_eq!(
        format_entry(&d[0], false, false),
        "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=40000,dport=80),reply=(src=10.1.1.2,dst=192.0.2.1,sport=80,dport=40000),protoinfo=(state=ESTABLISHED)"
    );
}

#[test]
fn snat_port_collision_picks_another_port() {
    let ct = ct();
    let ext = [192, 0, 2, 1];
    let mut a = udp4(A, B, 5000, 53, b"q");
    run(&ct, &mut a, &snat_args(ext, ext, 0, 0), 0);
    let mut b = udp4([10, 1, 1, 3], B, 5000, 53, b"q");
    let md = run(&ct, &mut b, &snat_args(ext, ext, 0, 0), 0);
    assert_eq!(md.state & s::SNAT, s::SNAT);
    assert_eq!(&b[26..30], &ext);
    assert_eq!(u16::from_be_bytes([b[34], b[35]]), 5001);
    assert!(checksums_ok(&b));
    // A port range of one port, taken: exhaustion, the packet stays +new.
    let mut c = udp4([10, 1, 1, 4], B, 7000, 53, b"q");
    run(&ct, &mut c, &snat_args(ext, ext, 6000, 6000), 0);
    let mut d = udp4([10, 1, 1, 5], B, 7000, 53, b"q");
    let md = run(&ct, &mut d, &snat_args(ext, ext, 6000, 6000), 0);
    assert_eq!(md.state, s::TRK | s::NEW);
    assert_eq!(ct.stats().nat_exhausted, 1);
    assert_eq!(ct.n_conns(), 3);
    assert_eq!(
        ct.zone_limits_of(&[0])[0].2,
        3,
        "zone count released on failure"
    );
}

#[test]
fn dnat_with_port_and_icmp_error_inner_translation() {
    let ct = ct();
    let vip = [172, 16, 0, 1];
    let backend = [10, 1, 1, 2];
    let args = CtArgs {
        nat: Some(NatSpec {
            kind: Some(NatKind::Dst),
            range: Some(NatRange {
                min_addr: IpAddr::V4(Ipv4Addr::from(backend)),
                max_addr: IpAddr::V4(Ipv4Addr::from(backend)),
                min_port: 8080,
                max_port: 8080,
            }),
            persistent: false,
            hash: false,
            random: false,
        }),
        ..commit(0)
    };
    let mut u = udp4(A, vip, 5555, 80, b"hello");
    let md = run(&ct, &mut u, &args, 0);
    assert_eq!(md.state, s::TRK | s::NEW | s::DNAT);
    assert_eq!(&u[30..34], &backend);
    assert_eq!(u16::from_be_bytes([u[36], u[37]]), 8080);
    assert!(checksums_ok(&u));
    // The backend answers with a port unreachable quoting the translated
    // packet; it must reach the client quoting the original one.
    let mut err = icmp4_error(backend, A, 3, 3, &u[14..]);
    let md = run(&ct, &mut err, &plain_nat(), 1);
    assert_eq!(md.state, s::TRK | s::REL | s::RPL | s::SNAT);
    assert_eq!(&err[26..30], &vip, "outer source is the VIP");
    let inner = 14 + 20 + 8;
    assert_eq!(&err[inner + 16..inner + 20], &vip, "quoted destination");
    assert_eq!(
        u16::from_be_bytes([err[inner + 22], err[inner + 23]]),
        80,
        "quoted port"
    );
    assert!(checksums_ok(&err), "ICMP checksum recomputed");
    let q = &err[inner..inner + 20];
    assert_eq!(
        flowpath_wire::checksum::sum(q),
        0xffff,
        "quoted IPv4 header checksum"
    );
}

#[test]
fn nat_v6_udp() {
    let ct = ct();
    let args = CtArgs {
        nat: Some(NatSpec {
            kind: Some(NatKind::Src),
            range: Some(NatRange {
                min_addr: IpAddr::V6(v6a(0x99).into()),
                max_addr: IpAddr::V6(v6a(0x99).into()),
                min_port: 0,
                max_port: 0,
            }),
            persistent: false,
            hash: false,
            random: false,
        }),
        ..commit(0)
    };
    let mut f = udp6(v6a(1), v6a(2), 1000, 53, b"x");
    let md = run(&ct, &mut f, &args, 0);
    assert_eq!(md.state & s::SNAT, s::SNAT);
    assert_eq!(&f[22..38], &v6a(0x99));
    assert!(checksums_ok(&f));
    let mut r = udp6(v6a(2), v6a(0x99), 53, 1000, b"y");
    let md = run(&ct, &mut r, &plain_nat(), 1);
    assert_eq!(md.state, s::TRK | s::EST | s::RPL | s::DNAT);
    assert_eq!(&r[38..54], &v6a(1));
    assert!(checksums_ok(&r));
}

#[test]
fn bytes_per_conn_is_bounded() {
    let b = Conntrack::bytes_per_conn();
    assert!(b > 100 && b < 512, "{b}");
}

#[test]
fn bad_l4_checksum_is_invalid_unless_offloaded() {
    let ct = ct();
    let mut f = udp4(A, B, 1, 2, b"payload");
    let n = f.len();
    f[n - 1] ^= 0xff;
    assert_eq!(
        run(&ct, &mut f.clone(), &commit(0), 0).state,
        s::TRK | s::INV
    );
    assert_eq!(ct.n_conns(), 0);
    let mut md = CtMeta::default();
    ct.execute(&mut f, 14, ETH_TYPE_IPV4, true, &commit(0), &mut md, 0);
    assert_eq!(md.state, s::TRK | s::NEW, "csum_ok skips verification");
    assert_eq!(ct.n_conns(), 1);
}

#[test]
fn ipv6_extension_headers_are_skipped() {
    let ct = ct();
    let plain = udp6(v6a(1), v6a(2), 7, 9, b"x");
    // Insert an 8-byte destination-options header before UDP.
    let mut f = plain[..54].to_vec();
    f[20] = 60;
    let plen = u16::from_be_bytes([f[18], f[19]]) + 8;
    f[18..20].copy_from_slice(&plen.to_be_bytes());
    f.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
    f.extend_from_slice(&plain[54..]);
    let md = run(&ct, &mut f, &commit(0), 0);
    assert_eq!(md.state, s::TRK | s::NEW);
    let d = ct.dump(None);
    assert_eq!(
        format_entry(&d[0], false, false),
        "udp,orig=(src=fc00::1,dst=fc00::2,sport=7,dport=9),reply=(src=fc00::2,dst=fc00::1,sport=9,dport=7)"
    );
}

fn handshake(ct: &Conntrack, sport: u16, now: u64) {
    let mut syn = tcp4(A, B, sport, 80, 100, 0, TCP_SYN, &[]);
    assert_eq!(run(ct, &mut syn, &commit(0), now).state, s::TRK | s::NEW);
    let mut sa = tcp4(B, A, 80, sport, 500, 101, TCP_SYN | TCP_ACK, &[]);
    assert_eq!(
        run(ct, &mut sa, &lookup(0), now).state,
        s::TRK | s::EST | s::RPL
    );
    let mut ack = tcp4(A, B, sport, 80, 101, 501, TCP_ACK, &[]);
    assert_eq!(run(ct, &mut ack, &lookup(0), now).state, s::TRK | s::EST);
}

#[test]
fn tcp_close_time_wait_and_reopen() {
    let ct = ct();
    handshake(&ct, 4000, 0);
    let mut fin = tcp4(A, B, 4000, 80, 101, 501, TCP_FIN | TCP_ACK, &[]);
    assert_eq!(run(&ct, &mut fin, &lookup(0), 1).state, s::TRK | s::EST);
    assert!(format_entry(&ct.dump_at(None, 1)[0], false, false).ends_with("state=CLOSING)"));
    let mut fin2 = tcp4(B, A, 80, 4000, 501, 102, TCP_FIN | TCP_ACK, &[]);
    assert_eq!(
        run(&ct, &mut fin2, &lookup(0), 2).state,
        s::TRK | s::EST | s::RPL
    );
    let mut last = tcp4(A, B, 4000, 80, 102, 502, TCP_ACK, &[]);
    run(&ct, &mut last, &lookup(0), 3);
    let e = ct.dump_at(None, 3)[0];
    assert!(format_entry(&e, false, true).ends_with("timeout=30,protoinfo=(state=TIME_WAIT)"));
    assert!(format_entry(&e, true, false).ends_with(
        "protoinfo=(state_orig=FIN_WAIT_2,state_reply=FIN_WAIT_2,flags_orig=0,flags_reply=0)"
    ));
    // The same tuple opens a new connection with a new SYN.
    let mut syn = tcp4(A, B, 4000, 80, 90_000, 0, TCP_SYN, &[]);
    assert_eq!(run(&ct, &mut syn, &commit(0), 4).state, s::TRK | s::NEW);
    assert_eq!(ct.n_conns(), 1);
    assert!(format_entry(&ct.dump_at(None, 4)[0], false, false).ends_with("state=SYN_SENT)"));
    // A RST with the right sequence number resets it (accepted: +est).
    let mut rst = tcp4(A, B, 4000, 80, 90_001, 0, TCP_RST, &[]);
    assert_eq!(run(&ct, &mut rst, &lookup(0), 5).state, s::TRK | s::EST);
    assert!(format_entry(&ct.dump_at(None, 5)[0], false, false).ends_with("state=TIME_WAIT)"));
}

#[test]
fn tcp_window_scaling_and_seq_check_toggle() {
    let ct = ct();
    let ws = [1, 3, 3, 7]; // NOP, window scale 7
    let mut syn = tcp4_full(A, B, 5000, 443, 1, 0, TCP_SYN, 64240, &ws, &[]);
    run(&ct, &mut syn, &commit(0), 0);
    let mut sa = tcp4_full(B, A, 443, 5000, 7000, 2, TCP_SYN | TCP_ACK, 65160, &ws, &[]);
    assert_eq!(
        run(&ct, &mut sa, &lookup(0), 0).state,
        s::TRK | s::EST | s::RPL
    );
    let mut ack = tcp4_full(A, B, 5000, 443, 2, 7001, TCP_ACK, 502, &[], &[]);
    assert_eq!(run(&ct, &mut ack, &lookup(0), 0).state, s::TRK | s::EST);
    // 1 MB ahead of the acknowledged data: inside 502 << 7 = 64 KB? No.
    let mut far = tcp4_full(
        B,
        A,
        443,
        5000,
        7001 + 1_000_000,
        2,
        TCP_ACK,
        509,
        &[],
        b"x",
    );
    assert_eq!(run(&ct, &mut far, &lookup(0), 0).state, s::TRK | s::INV);
    // 40 KB ahead fits in the scaled window (502 << 7 = 64,256 bytes).
    let mut near = tcp4_full(B, A, 443, 5000, 7001 + 40_000, 2, TCP_ACK, 509, &[], b"x");
    assert_eq!(
        run(&ct, &mut near, &lookup(0), 0).state,
        s::TRK | s::EST | s::RPL
    );
    let e = ct.dump(None)[0];
    assert!(format_entry(&e, true, false)
        .contains("wscale_orig=7,wscale_reply=7,flags_orig=WINDOW_SCALE,flags_reply=WINDOW_SCALE"));
    ct.set_tcp_seq_check(false);
    assert!(!ct.tcp_seq_check());
    assert_eq!(
        run(&ct, &mut far, &lookup(0), 0).state,
        s::TRK | s::EST | s::RPL
    );
}

#[test]
fn icmp_error_in_original_direction_is_related_only() {
    let ct = ct();
    let mut u = udp4(A, B, 5000, 53, b"q");
    run(&ct, &mut u, &commit(0), 0);
    let mut r = udp4(B, A, 53, 5000, b"r");
    run(&ct, &mut r, &lookup(0), 0);
    // A's host answers B's reply with an error: original direction.
    let mut err = icmp4_error(A, B, 3, 3, &r[14..]);
    let md = run(&ct, &mut err, &lookup(0), 1);
    assert_eq!(md.state, s::TRK | s::REL);
    assert_eq!(md.orig.expect("orig").src_port, 5000);
}

#[test]
fn memory_per_connection() {
    let ct = ct();
    for i in 0..20_000u32 {
        let mut f = udp4(
            [10, (i >> 16) as u8, (i >> 8) as u8, i as u8],
            B,
            1000,
            53,
            b"",
        );
        run(&ct, &mut f, &commit(0), 0);
    }
    assert_eq!(ct.n_conns(), 20_000);
    let (entries, cap, slots) = ct.table.index_sizes();
    assert_eq!(
        entries, 20_000,
        "one index entry per connection without NAT"
    );
    assert_eq!(slots, 20_000);
    let per = (cap * crate::table::INDEX_ENTRY_BYTES + slots * crate::table::SLOT_BYTES) / 20_000;
    eprintln!(
        "slot {} B, index entry {} B, estimate {} B/conn, measured at 20k: {} B/conn",
        crate::table::SLOT_BYTES,
        crate::table::INDEX_ENTRY_BYTES,
        Conntrack::bytes_per_conn(),
        per
    );
    // Half of Open vSwitch 3.1's userspace conntrack (337 bytes per
    // connection, measured in BENCHMARKS.md).
    assert!(per <= 168, "{per} bytes per connection");
}

fn ftp_commit() -> CtArgs {
    CtArgs {
        helper: Some(crate::Alg::Ftp),
        set_mark: Some((0x42, u32::MAX)),
        ..commit(0)
    }
}

#[test]
fn ftp_passive_expectation_makes_data_related() {
    let ct = ct();
    // Control connection A:40000 -> B:21.
    let mut syn = tcp4(A, B, 40000, 21, 100, 0, TCP_SYN, &[]);
    assert_eq!(run(&ct, &mut syn, &ftp_commit(), 0).state, s::TRK | s::NEW);
    let mut sa = tcp4(B, A, 21, 40000, 500, 101, TCP_SYN | TCP_ACK, &[]);
    run(&ct, &mut sa, &ftp_commit(), 0);
    let mut ack = tcp4(A, B, 40000, 21, 101, 501, TCP_ACK, &[]);
    run(&ct, &mut ack, &ftp_commit(), 0);
    let mut pasv = tcp4(A, B, 40000, 21, 101, 501, TCP_ACK | TCP_PSH, b"PASV\r\n");
    run(&ct, &mut pasv, &ftp_commit(), 0);
    let reply = b"227 Entering Passive Mode (10,1,1,2,19,137).\r\n";
    let mut r = tcp4(B, A, 21, 40000, 501, 107, TCP_ACK | TCP_PSH, reply);
    assert_eq!(
        run(&ct, &mut r, &ftp_commit(), 0).state,
        s::TRK | s::EST | s::RPL
    );
    // The client opens the data connection to 19*256+137 from any port.
    let mut d = tcp4(A, B, 40001, 19 * 256 + 137, 7, 0, TCP_SYN, &[]);
    let md = run(&ct, &mut d, &lookup(0), 0);
    assert_eq!(md.state, s::TRK | s::NEW | s::REL, "expected: +new+rel");
    assert_eq!(md.mark, 0x42, "mark of the control connection");
    assert_eq!(
        md.orig.expect("orig").dst_port,
        21,
        "orig tuple: the control connection"
    );
    let md = run(&ct, &mut d, &commit(0), 0);
    assert_eq!(md.state, s::TRK | s::NEW | s::REL);
    let mut dsa = tcp4(B, A, 19 * 256 + 137, 40001, 900, 8, TCP_SYN | TCP_ACK, &[]);
    let md = run(&ct, &mut dsa, &lookup(0), 0);
    assert_eq!(md.state, s::TRK | s::EST | s::REL | s::RPL);
    assert_eq!(md.mark, 0x42);
    // Unrelated connections to other ports are not related.
    let mut other = tcp4(A, B, 40002, 9999, 7, 0, TCP_SYN, &[]);
    assert_eq!(run(&ct, &mut other, &lookup(0), 0).state, s::TRK | s::NEW);
    let line = ct
        .dump(None)
        .iter()
        .map(|e| format_entry(e, true, false))
        .find(|l| l.contains("dport=5001"))
        .expect("data connection dumped");
    assert!(
        line.ends_with(",parent=(src=10.1.1.1,dst=10.1.1.2,sport=40000,dport=21)"),
        "{line}"
    );
    // Flushing the control connection forgets its expectations.
    ct.flush(
        None,
        Some(&FlushTuple {
            proto: Some(6),
            orig: TupleMatch {
                dst_port: Some(21),
                ..TupleMatch::default()
            },
            ..FlushTuple::default()
        }),
    );
    let mut late = tcp4(A, B, 40003, 19 * 256 + 137, 7, 0, TCP_SYN, &[]);
    assert_eq!(run(&ct, &mut late, &lookup(0), 0).state, s::TRK | s::NEW);
}

#[test]
fn ftp_active_port_and_bad_address() {
    let ct = ct();
    let mut syn = tcp4(A, B, 40000, 21, 100, 0, TCP_SYN, &[]);
    run(&ct, &mut syn, &ftp_commit(), 0);
    let mut sa = tcp4(B, A, 21, 40000, 500, 101, TCP_SYN | TCP_ACK, &[]);
    run(&ct, &mut sa, &ftp_commit(), 0);
    let mut port = tcp4(
        A,
        B,
        40000,
        21,
        101,
        501,
        TCP_ACK | TCP_PSH,
        b"PORT 10,1,1,1,200,10\r\n",
    );
    assert_eq!(run(&ct, &mut port, &ftp_commit(), 0).state, s::TRK | s::EST);
    // The server connects back from port 20.
    let mut d = tcp4(B, A, 20, 200 * 256 + 10, 1, 0, TCP_SYN, &[]);
    assert_eq!(
        run(&ct, &mut d, &commit(0), 0).state,
        s::TRK | s::NEW | s::REL
    );
    // A PORT naming a third host is refused.
    let mut evil = tcp4(
        A,
        B,
        40000,
        21,
        123,
        501,
        TCP_ACK | TCP_PSH,
        b"PORT 6,6,6,6,1,1\r\n",
    );
    let md = run(&ct, &mut evil, &ftp_commit(), 0);
    assert_eq!(md.state & s::INV, s::INV);
    let mut d2 = tcp4(B, [6, 6, 6, 6], 20, 257, 1, 0, TCP_SYN, &[]);
    assert_eq!(run(&ct, &mut d2, &lookup(0), 0).state, s::TRK | s::NEW);
}

#[test]
fn tftp_expectation() {
    let ct = ct();
    let args = CtArgs {
        helper: Some(crate::Alg::Tftp),
        ..commit(0)
    };
    let mut rrq = udp4(A, B, 3333, 69, b"\x00\x01file\x00octet\x00");
    assert_eq!(run(&ct, &mut rrq, &args, 0).state, s::TRK | s::NEW);
    // The server answers from a fresh port.
    let mut data = udp4(B, A, 47000, 3333, b"\x00\x03\x00\x01hello");
    assert_eq!(
        run(&ct, &mut data, &commit(0), 0).state,
        s::TRK | s::NEW | s::REL
    );
    let e = ct.dump(None);
    assert!(e.iter().any(|e| e.helper == Some(crate::Alg::Tftp)));
    assert!(
        format_entry(&e[0], false, false).contains("helper=tftp")
            || format_entry(&e[1], false, false).contains("helper=tftp")
    );
}

fn nat6(kind: NatKind, a: u8) -> Option<NatSpec> {
    Some(NatSpec {
        kind: Some(kind),
        range: Some(NatRange {
            min_addr: IpAddr::V6(v6a(a).into()),
            max_addr: IpAddr::V6(v6a(a).into()),
            min_port: 0,
            max_port: 0,
        }),
        persistent: false,
        hash: false,
        random: false,
    })
}

#[test]
fn icmpv6_echo_snat_and_error_through_dnat() {
    let ct = ct();
    // ICMPv6 echo, SNAT: the pseudo-header checksum follows the address.
    let args = CtArgs {
        nat: nat6(NatKind::Src, 0x55),
        ..commit(0)
    };
    let mut req = icmp6_echo(v6a(1), v6a(2), 128, 77, 1);
    let md = run(&ct, &mut req, &args, 0);
    assert_eq!(md.state, s::TRK | s::NEW | s::SNAT);
    assert_eq!(&req[22..38], &v6a(0x55));
    assert!(checksums_ok(&req));
    let mut rep = icmp6_echo(v6a(2), v6a(0x55), 129, 77, 1);
    let md = run(&ct, &mut rep, &plain_nat(), 0);
    assert_eq!(md.state, s::TRK | s::EST | s::RPL | s::DNAT);
    assert_eq!(&rep[38..54], &v6a(1));
    assert!(checksums_ok(&rep));
    // TCP over IPv6 with DNAT; the server's ICMPv6 error about it must
    // reach the client quoting the address the client used.
    let args = CtArgs {
        nat: nat6(NatKind::Dst, 0x20),
        ..commit(0)
    };
    let mut syn = tcp6(v6a(1), v6a(0x99), 1234, 443, 10, 0, TCP_SYN);
    let original = syn.clone();
    assert_eq!(
        run(&ct, &mut syn, &args, 0).state,
        s::TRK | s::NEW | s::DNAT
    );
    assert_eq!(&syn[38..54], &v6a(0x20));
    assert!(checksums_ok(&syn));
    let mut err = icmp6_error(v6a(0x20), v6a(1), 1, 4, &syn[14..]);
    let md = run(&ct, &mut err, &plain_nat(), 0);
    assert_eq!(md.state, s::TRK | s::REL | s::RPL | s::SNAT);
    assert_eq!(
        &err[22..38],
        &v6a(0x99),
        "outer source: the address the client used"
    );
    let inner = 14 + 40 + 8;
    assert_eq!(
        &err[inner + 24..inner + 40],
        &v6a(0x99),
        "quoted destination"
    );
    assert!(
        checksums_ok(&err),
        "ICMPv6 checksum over the new pseudo-header"
    );
    assert!(
        err[inner..] == original[14..],
        "the quoted packet is the client's, checksum included"
    );
}

#[test]
fn sweep_work_is_bounded_and_resumes() {
    let ct = ct();
    ct.set_max_conns(20_000); // budget: max(20,000 / 64, 4096) slots
    for i in 0..10_000u32 {
        let mut f = udp4(
            [10, 9, (i >> 8) as u8, i as u8],
            B,
            1000 + (i >> 16) as u16,
            53,
            b"",
        );
        run(&ct, &mut f, &commit(0), 0);
    }
    assert_eq!(ct.n_conns(), 10_000);
    let first = ct.sweep(1_000_000);
    assert!(
        (4096..10_000).contains(&first),
        "one call removes a bounded share: {first}"
    );
    let mut total = first;
    for _ in 0..8 {
        total += ct.sweep(1_000_000);
    }
    assert_eq!(total, 10_000, "later calls resume and finish");
    assert_eq!(ct.n_conns(), 0);
}
