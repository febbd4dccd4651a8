//! The text formats of Open vSwitch's conntrack commands, byte for byte
//! as version 3.1 prints them for the userspace datapath:
//!
//! - [`format_entry`]: one line of `dpctl/dump-conntrack [-m] [-s]`
//!   (`ct_dpif_format_entry`), e.g.
//!   `tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=34567,dport=80),reply=(src=10.1.1.2,dst=10.1.1.1,sport=80,dport=34567),zone=1,mark=3,protoinfo=(state=ESTABLISHED)`.
//!   The userspace tracker keeps no per-connection counters or
//!   timestamps and no id or status, so `-s` adds only `timeout=`, and
//!   `-m` adds `id=0`, `status=0` and the per-side TCP details;
//! - [`format_stats`]: `dpctl/ct-stats-show [-m]` ("Connections Stats:");
//! - [`format_zone_limits`]: `dpctl/ct-get-limits` ("default limit=...").
//!
//! Invariants: pure functions of their inputs. Thread-safety: none needed.

use crate::tcp::{st, STATE_NAMES};
use crate::{ConnEntry, Tuple};
use std::fmt::Write;
use std::net::IpAddr;

/// The protocol name `dpctl` prints (a number for unnamed protocols).
pub fn proto_name(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        58 => "icmpv6".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        132 => "sctp".into(),
        136 => "udplite".into(),
        33 => "dccp".into(),
        2 => "igmp".into(),
        n => n.to_string(),
    }
}

fn state_name(s: u8) -> String {
    match STATE_NAMES.get(usize::from(s)) {
        Some(n) => (*n).to_string(),
        None => format!("[{s}]"),
    }
}

/// A tuple: `src=...,dst=...,sport=...,dport=...` (or
/// `id=...,type=...,code=...` for ICMP).
pub fn format_tuple(out: &mut String, t: &Tuple) {
    let _ = write!(out, "src={},dst={}", t.src, t.dst);
    let v6 = matches!(t.src, IpAddr::V6(_));
    if t.proto == 1 || t.proto == 58 {
        let _ = write!(
            out,
            ",id={},type={},code={}",
            t.icmp_id, t.icmp_type, t.icmp_code
        );
    } else {
        let _ = v6;
        let _ = write!(out, ",sport={},dport={}", t.src_port, t.dst_port);
    }
}

fn tcp_flags(f: u8) -> String {
    if f == 0 {
        return "0".into();
    }
    const NAMES: [&str; 6] = [
        "WINDOW_SCALE",
        "SACK_PERM",
        "CLOSE_INIT",
        "BE_LIBERAL",
        "DATA_UNACKNOWLEDGED",
        "MAXACK_SET",
    ];
    let mut parts = Vec::new();
    let mut bad = 0u8;
    for bit in 0..8 {
        if f & (1 << bit) != 0 {
            match NAMES.get(bit) {
                Some(n) => parts.push((*n).to_string()),
                None => bad |= 1 << bit,
            }
        }
    }
    if bad != 0 {
        parts.push(format!("0x{bad:x}"));
    }
    parts.join("|")
}

/// One `dpctl/dump-conntrack` line. `verbose` is `-m`, `stats` is `-s`.
pub fn format_entry(e: &ConnEntry, verbose: bool, stats: bool) -> String {
    let mut s = proto_name(e.orig.proto);
    s.push_str(",orig=(");
    format_tuple(&mut s, &e.orig);
    s.push_str("),reply=(");
    format_tuple(&mut s, &e.reply);
    s.push(')');
    if verbose {
        s.push_str(",id=0");
    }
    if e.zone != 0 {
        let _ = write!(s, ",zone={}", e.zone);
    }
    if verbose {
        s.push_str(",status=0");
    }
    if stats {
        let _ = write!(s, ",timeout={}", e.timeout);
    }
    if e.mark != 0 {
        let _ = write!(s, ",mark={}", e.mark);
    }
    if e.label != 0 {
        let _ = write!(s, ",labels=0x{:x}", e.label);
    }
    if let Some(t) = &e.tcp {
        s.push_str(",protoinfo=(");
        if verbose {
            let _ = write!(
                s,
                "state_orig={},state_reply={}",
                state_name(t.state_orig),
                state_name(t.state_reply)
            );
            if t.wscale_orig != 0 || t.wscale_reply != 0 {
                let _ = write!(
                    s,
                    ",wscale_orig={},wscale_reply={}",
                    t.wscale_orig, t.wscale_reply
                );
            }
            let _ = write!(
                s,
                ",flags_orig={},flags_reply={}",
                tcp_flags(t.flags_orig),
                tcp_flags(t.flags_reply)
            );
        } else {
            let _ = write!(
                s,
                "state={}",
                state_name(coalesce(t.state_orig.max(t.state_reply)))
            );
        }
        s.push(')');
    }
    if let Some(h) = e.helper {
        let _ = write!(s, ",helper={}", h.name());
    }
    if verbose {
        if let Some(p) = &e.parent {
            s.push_str(",parent=(");
            format_tuple(&mut s, p);
            s.push(')');
        }
    }
    s
}

/// The state shown without `-m`: FIN_WAIT_2 as TIME_WAIT, SYN_RECV as
/// ESTABLISHED (the kernel tracker's view).
pub fn coalesce(s: u8) -> u8 {
    match s {
        st::FIN_WAIT_2 => st::TIME_WAIT,
        st::SYN_RECV => st::ESTABLISHED,
        s => s,
    }
}

/// `dpctl/ct-stats-show [-m]` for the dumped entries (one zone or all).
pub fn format_stats(entries: &[ConnEntry], verbose: bool) -> String {
    let mut tcp = 0;
    let mut per_state = [0u32; st::MAX_NUM as usize];
    let (mut udp, mut udplite, mut sctp, mut icmp, mut dccp, mut igmp, mut other) =
        (0, 0, 0, 0, 0, 0, 0);
    let mut icmpv6 = 0;
    for e in entries {
        match e.orig.proto {
            1 => icmp += 1,
            58 => icmpv6 += 1,
            6 => {
                tcp += 1;
                if let Some(t) = &e.tcp {
                    let s = coalesce(t.state_orig.max(t.state_reply));
                    if let Some(n) = per_state.get_mut(usize::from(s)) {
                        *n += 1;
                    }
                }
            }
            17 => udp += 1,
            132 => sctp += 1,
            136 => udplite += 1,
            33 => dccp += 1,
            2 => igmp += 1,
            _ => other += 1,
        }
    }
    let _ = icmpv6; // counted in the total only, as Open vSwitch does
    let mut s = format!("Connections Stats:\n    Total: {}\n", entries.len());
    if tcp > 0 {
        let _ = writeln!(s, "  TCP: {tcp}");
        if verbose {
            s.push_str("    Conn per TCP states:\n");
            for (i, n) in per_state.iter().enumerate() {
                if *n > 0 {
                    let _ = writeln!(s, "\t  [{}]={}", state_name(i as u8), n);
                }
            }
        }
    }
    for (name, n) in [
        ("UDP", udp),
        ("UDPLITE", udplite),
        ("SCTP", sctp),
        ("ICMP", icmp),
        ("DCCP", dccp),
        ("IGMP", igmp),
        ("Other", other),
    ] {
        if n > 0 {
            let _ = writeln!(s, "  {name}: {n}");
        }
    }
    s
}

/// `dpctl/ct-get-limits`: the default, then `zone=Z,limit=L,count=C` per
/// zone, without a trailing newline.
pub fn format_zone_limits(default_limit: u32, zones: &[(u16, u32, u32)]) -> String {
    let mut s = format!("default limit={default_limit}");
    for (z, l, c) in zones {
        let _ = write!(s, "\nzone={z},limit={l},count={c}");
    }
    s
}

/// An ordering key for tuples (dumps are sorted by it).
pub fn sort_key(t: &Tuple) -> (u8, IpAddr, IpAddr, u16, u16, u16, u8) {
    (
        t.proto,
        t.src,
        t.dst,
        t.src_port,
        t.dst_port,
        t.icmp_id,
        t.icmp_type,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TcpInfo;
    use std::net::Ipv4Addr;

    fn t(p: u8, s: [u8; 4], d: [u8; 4], sp: u16, dp: u16) -> Tuple {
        Tuple {
            proto: p,
            src: IpAddr::V4(Ipv4Addr::from(s)),
            dst: IpAddr::V4(Ipv4Addr::from(d)),
            src_port: sp,
            dst_port: dp,
            icmp_id: 0,
            icmp_type: 0,
            icmp_code: 0,
        }
    }

    fn udp_entry() -> ConnEntry {
        ConnEntry {
            orig: t(17, [10, 1, 1, 1], [10, 1, 1, 2], 1, 2),
            reply: t(17, [10, 1, 1, 2], [10, 1, 1, 1], 2, 1),
            zone: 0,
            mark: 0,
            label: 0,
            timeout: 29,
            tcp: None,
            helper: None,
            parent: None,
        }
    }

    // Expected lines from Open vSwitch's tests/system-traffic.at.
    #[test]
    fn udp_line() {
        assert_eq!(
            format_entry(&udp_entry(), false, false),
            "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=1,dport=2),reply=(src=10.1.1.2,dst=10.1.1.1,sport=2,dport=1)"
        );
        assert_eq!(
            format_entry(&udp_entry(), false, true),
            "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=1,dport=2),reply=(src=10.1.1.2,dst=10.1.1.1,sport=2,dport=1),timeout=29"
        );
    }

    #[test]
    fn icmp_line_with_zone() {
        let mut e = udp_entry();
        e.orig = Tuple {
            proto: 1,
            icmp_id: 77,
            icmp_type: 8,
            ..t(1, [10, 1, 1, 2], [10, 1, 1, 1], 0, 0)
        };
        e.reply = Tuple {
            proto: 1,
            icmp_id: 77,
            icmp_type: 0,
            ..t(1, [10, 1, 1, 1], [10, 1, 1, 2], 0, 0)
        };
        e.zone = 5;
        assert_eq!(
            format_entry(&e, false, false),
            "icmp,orig=(src=10.1.1.2,dst=10.1.1.1,id=77,type=8,code=0),reply=(src=10.1.1.1,dst=10.1.1.2,id=77,type=0,code=0),zone=5"
        );
    }

    #[test]
    fn tcp_line_mark_labels_and_verbose() {
        let mut e = udp_entry();
        e.orig = t(6, [10, 1, 1, 1], [10, 1, 1, 2], 34567, 80);
        e.reply = t(6, [10, 1, 1, 2], [10, 1, 1, 1], 80, 34567);
        e.zone = 1;
        e.mark = 3;
        e.label = 0x2_0000_0001;
        e.tcp = Some(TcpInfo {
            state_orig: st::FIN_WAIT_2,
            state_reply: st::ESTABLISHED,
            wscale_orig: 7,
            wscale_reply: 0,
            flags_orig: 0x01,
            flags_reply: 0x09,
        });
        assert_eq!(
            format_entry(&e, false, false),
            "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=34567,dport=80),reply=(src=10.1.1.2,dst=10.1.1.1,sport=80,dport=34567),zone=1,mark=3,labels=0x200000001,protoinfo=(state=TIME_WAIT)"
        );
        assert_eq!(
            format_entry(&e, true, true),
            "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=34567,dport=80),reply=(src=10.1.1.2,dst=10.1.1.1,sport=80,dport=34567),id=0,zone=1,status=0,timeout=29,mark=3,labels=0x200000001,protoinfo=(state_orig=FIN_WAIT_2,state_reply=ESTABLISHED,wscale_orig=7,wscale_reply=0,flags_orig=WINDOW_SCALE,flags_reply=WINDOW_SCALE|BE_LIBERAL)"
        );
    }

    #[test]
    fn stats_and_limits() {
        let mut tcp = udp_entry();
        tcp.orig.proto = 6;
        tcp.tcp = Some(TcpInfo {
            state_orig: st::ESTABLISHED,
            state_reply: st::SYN_RECV,
            wscale_orig: 0,
            wscale_reply: 0,
            flags_orig: 0,
            flags_reply: 0,
        });
        let mut gre = udp_entry();
        gre.orig.proto = 47;
        let v = [tcp, udp_entry(), udp_entry(), gre];
        assert_eq!(
            format_stats(&v, true),
            "Connections Stats:\n    Total: 4\n  TCP: 1\n    Conn per TCP states:\n\t  [ESTABLISHED]=1\n  UDP: 2\n  Other: 1\n"
        );
        assert_eq!(
            format_stats(&[], false),
            "Connections Stats:\n    Total: 0\n"
        );
        // From tests/system-traffic.at ("conntrack - zone-based limits").
        assert_eq!(
            format_zone_limits(10, &[(0, 5, 5), (3, 3, 0)]),
            "default limit=10\nzone=0,limit=5,count=5\nzone=3,limit=3,count=0"
        );
        assert_eq!(proto_name(47), "47");
    }
}
