//! TRex's stateful traffic profiles (the SFR profile of seed 001,
//! `sfr_delay_10_1g.yaml`, and any other `cap_info` profile) expanded into
//! frames, one stream per direction.
//!
//! What: each template (a recorded conversation, [`Template`]) is started
//! `cps × M` times per second, copy k of template t at `k / (cps_t × M)`
//! seconds, for every such start before the duration; each copy is emitted
//! whole, so the last packets fall after the duration. Copies take the
//! generator's client and server addresses in sequence (one counter each
//! over all templates, in start order, wrapping: TRex's `seq`
//! distribution) and client ports from 1024 upward (per client address);
//! server ports stay the template's.
//!
//! Why streamed: the expansion of a long run at `-m 10` is tens of GB. A
//! min-heap holds one entry per live copy (its next packet) and one per
//! template (its next start), ordered by (time, template, copy, packet), so
//! memory grows with the concurrent copies, not with the output, and the
//! output is a pure function of the profile, templates, M and duration.
//!
//! No I/O: the caller reads the profile and the captures ([`parse`],
//! [`TemplateBuilder`]) and writes what [`expand`] hands its sink.

mod profile;
mod template;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;

pub use profile::{parse, ProfileError, SfrProfile, TemplateSpec};
pub use template::{Dir, Frame, Instance, Template, TemplateBuilder, MAX_TEMPLATE_FLOWS};

/// The steady-state figures a profile implies at a multiplier.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// Templates started per second (TRex's "new flows/s").
    pub flows_per_sec: f64,
    /// Packets per second.
    pub packets_per_sec: f64,
    /// Bytes per second (frames without FCS).
    pub bytes_per_sec: f64,
    /// Copies alive at once on average (rate × template length).
    pub concurrent: f64,
}

impl Figures {
    /// Average frame size in bytes (without FCS).
    pub fn average_bytes(&self) -> f64 {
        self.bytes_per_sec / self.packets_per_sec
    }

    /// Megabits per second.
    pub fn mbit_per_sec(&self) -> f64 {
        self.bytes_per_sec * 8.0 / 1e6
    }
}

/// The profile's arithmetic at multiplier `m`.
pub fn figures(profile: &SfrProfile, templates: &[Template], m: f64) -> Figures {
    let mut fig = Figures::default();
    for (spec, t) in profile.templates.iter().zip(templates) {
        let r = spec.cps * m;
        fig.flows_per_sec += r;
        fig.packets_per_sec += r * t.frames.len() as f64;
        fig.bytes_per_sec += r * t.bytes as f64;
        fig.concurrent += r * t.span_ns as f64 / 1e9;
    }
    fig
}

/// What the expansion emitted of one template.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TemplateCount {
    /// Copies per second (cps × M).
    pub rate: f64,
    /// Copies started.
    pub copies: u64,
    /// Frames emitted.
    pub packets: u64,
    /// Their wire bytes.
    pub bytes: u64,
}

/// Copies started before `duration` seconds at `rate` per second: the k
/// with `start_ns(k) < duration`.
pub fn starts_before(rate: f64, duration: f64) -> u64 {
    let limit = (duration * 1e9).round() as u64;
    let mut n = (rate * duration).ceil().max(0.0) as u64;
    // Float rounding: settle on the exact count.
    while n > 0 && start_ns(n - 1, rate) >= limit {
        n -= 1;
    }
    while start_ns(n, rate) < limit {
        n += 1;
    }
    n
}

/// Start time of copy k at `rate` per second, ns.
fn start_ns(k: u64, rate: f64) -> u64 {
    (k as f64 * 1e9 / rate).round() as u64
}

/// The address `i` places after `lo` in `lo..=hi`, wrapping.
fn nth(lo: Ipv4Addr, hi: Ipv4Addr, i: u64) -> u32 {
    let size = u64::from(u32::from(hi).saturating_sub(u32::from(lo))) + 1;
    u32::from(lo) + (i % size) as u32
}

/// A heap entry: the next packet `i` of copy `k` of template `t` (packet
/// 0 is the start, when the copy takes its addresses).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Ev {
    time: u64,
    t: u32,
    k: u64,
    i: u32,
    client: u32,
    server: u32,
    port: u16,
}

/// Expands `templates` (one per `profile.templates` entry, in order) at
/// multiplier `m` for `duration` seconds, handing every frame in time
/// order to `sink(direction, timestamp_ns, frame, orig_len)`; stops at the
/// sink's first error. Returns the counts per template.
pub fn expand<E>(
    profile: &SfrProfile,
    templates: &[Template],
    m: f64,
    duration: f64,
    mut sink: impl FnMut(Dir, u64, &[u8], u32) -> Result<(), E>,
) -> Result<Vec<TemplateCount>, E> {
    let mut counts: Vec<TemplateCount> = profile
        .templates
        .iter()
        .zip(templates)
        .map(|(s, _)| {
            let rate = s.cps * m;
            TemplateCount {
                rate,
                copies: starts_before(rate, duration),
                packets: 0,
                bytes: 0,
            }
        })
        .collect();
    let mut heap = BinaryHeap::new();
    for (t, c) in counts.iter().enumerate() {
        if c.copies > 0 {
            heap.push(Reverse(Ev {
                time: 0,
                t: t as u32,
                k: 0,
                i: 0,
                client: 0,
                server: 0,
                port: 0,
            }));
        }
    }
    let (clients, servers) = (profile.clients, profile.servers);
    let n_clients = u64::from(u32::from(clients.1).saturating_sub(u32::from(clients.0))) + 1;
    // Next client port of each client address, grown on demand.
    let mut ports: Vec<u16> = Vec::new();
    let (mut next_client, mut next_server) = (0u64, 0u64);
    let client_mac = profile.mac;
    let mut server_mac = profile.mac;
    server_mac[5] = server_mac[5].wrapping_add(1);
    let mut buf = Vec::with_capacity(9216);
    while let Some(Reverse(mut ev)) = heap.pop() {
        let t = ev.t as usize;
        let tpl = &templates[t];
        if ev.i == 0 {
            // A start: the next addresses and ports; schedule the next start.
            let ci = next_client % n_clients;
            next_client += 1;
            ev.client = nth(clients.0, clients.1, ci);
            ev.server = nth(servers.0, servers.1, next_server);
            next_server += 1;
            let ci = ci as usize;
            if ports.len() <= ci {
                ports.resize(ci + 1, 1024);
            }
            // Ports 1024..=65535, then 1024 again (0 after a wrap of the
            // counter below).
            if ports[ci] < 1024 || u32::from(ports[ci]) + u32::from(tpl.flows) > 0x1_0000 {
                ports[ci] = 1024;
            }
            ev.port = ports[ci];
            ports[ci] = ports[ci].wrapping_add(tpl.flows);
            let c = &counts[t];
            if ev.k + 1 < c.copies {
                heap.push(Reverse(Ev {
                    time: start_ns(ev.k + 1, c.rate),
                    t: ev.t,
                    k: ev.k + 1,
                    i: 0,
                    client: 0,
                    server: 0,
                    port: 0,
                }));
            }
        }
        let frame = &tpl.frames[ev.i as usize];
        let copy = Instance {
            client: Ipv4Addr::from(ev.client),
            server: Ipv4Addr::from(ev.server),
            port: ev.port,
            client_mac,
            server_mac,
        };
        frame.rewrite(&copy, &mut buf);
        sink(frame.dir, ev.time, &buf, frame.orig_len)?;
        counts[t].packets += 1;
        counts[t].bytes += u64::from(frame.orig_len);
        if let Some(next) = tpl.frames.get(ev.i as usize + 1) {
            // ev.time = start + this frame's offset, so no underflow.
            ev.time = ev.time - frame.offset_ns + next.offset_ns;
            ev.i += 1;
            heap.push(Reverse(ev));
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn starts_are_exact() {
        assert_eq!(starts_before(404.52, 0.1), 41);
        assert_eq!(starts_before(10.0, 1.0), 10);
        assert_eq!(starts_before(4.759, 0.1), 1);
        assert_eq!(starts_before(1975.015, 1.0), 1976);
    }

    #[test]
    fn addresses_wrap() {
        let lo = Ipv4Addr::new(16, 0, 0, 1);
        let hi = Ipv4Addr::new(16, 0, 1, 255);
        assert_eq!(Ipv4Addr::from(nth(lo, hi, 0)), lo);
        assert_eq!(Ipv4Addr::from(nth(lo, hi, 510)), hi);
        assert_eq!(Ipv4Addr::from(nth(lo, hi, 511)), lo);
    }

    /// A two-packet UDP template (DNS-like), client 21.0.0.2:1024 ->
    /// server 22.0.0.12:53, and back 10 ms later.
    fn dns_frames() -> Vec<(u64, Vec<u8>)> {
        let frame = |src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16| {
            let mut f = vec![0u8; 14 + 20 + 8];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[16..18].copy_from_slice(&28u16.to_be_bytes());
            f[22] = 64;
            f[23] = 17;
            f[26..30].copy_from_slice(&src);
            f[30..34].copy_from_slice(&dst);
            f[34..36].copy_from_slice(&sport.to_be_bytes());
            f[36..38].copy_from_slice(&dport.to_be_bytes());
            f[38..40].copy_from_slice(&8u16.to_be_bytes());
            f
        };
        vec![
            (
                5_000_000_000,
                frame([21, 0, 0, 2], [22, 0, 0, 12], 1024, 53),
            ),
            (
                5_010_000_000,
                frame([22, 0, 0, 12], [21, 0, 0, 2], 53, 1024),
            ),
        ]
    }

    fn profile(cap_ipg: bool) -> SfrProfile {
        let text = format!(
            "- duration: 1\n  generator:\n    distribution: seq\n    clients_start: 16.0.0.1\n    \
             clients_end: 16.0.0.2\n    servers_start: 48.0.0.1\n    servers_end: 48.0.0.3\n  \
             cap_ipg: {cap_ipg}\n  cap_info:\n    - name: dns.pcap\n      cps: 10\n      \
             ipg: 100\n      rtt: 2000\n"
        );
        parse(&text, Path::new("p.yaml")).expect("profile parses")
    }

    fn template(p: &SfrProfile) -> Template {
        let mut b = TemplateBuilder::new(&p.templates[0], p);
        for (ts, f) in dns_frames() {
            b.push(ts, &f, f.len() as u32).expect("frame");
        }
        b.finish().expect("template")
    }

    #[test]
    fn copies_take_addresses_in_sequence() {
        let p = profile(true);
        let t = template(&p);
        let mut out = Vec::new();
        let counts = expand(&p, std::slice::from_ref(&t), 1.0, 0.5, |d, ts, f, _| {
            out.push((d, ts, f.to_vec()));
            Ok::<(), ()>(())
        })
        .expect("expands");
        assert_eq!(counts[0].copies, 5);
        assert_eq!(out.len(), 10);
        // Copy 1 starts at 100 ms, its answer 10 ms later.
        let (d, ts, f) = &out[2];
        assert_eq!((*d, *ts), (Dir::C2s, 100_000_000));
        assert_eq!(f[26..34], [16, 0, 0, 2, 48, 0, 0, 2]);
        let answer = out
            .iter()
            .find(|(d, ts, _)| *d == Dir::S2c && *ts == 110_000_000);
        let (_, _, f) = answer.expect("copy 1's answer");
        assert_eq!(f[26..34], [48, 0, 0, 2, 16, 0, 0, 2]);
        // Copy 2 wraps to the first client, its second port; copy 3 the
        // first server again.
        let c2 = &out
            .iter()
            .filter(|(d, ..)| *d == Dir::C2s)
            .nth(2)
            .expect("copy 2")
            .2;
        assert_eq!(c2[26..30], [16, 0, 0, 1]);
        assert_eq!(u16::from_be_bytes([c2[34], c2[35]]), 1025);
        let c3 = &out
            .iter()
            .filter(|(d, ..)| *d == Dir::C2s)
            .nth(3)
            .expect("copy 3")
            .2;
        assert_eq!(c3[30..34], [48, 0, 0, 1]);
    }

    #[test]
    fn client_ports_wrap_to_1024() {
        let mut p = profile(true);
        p.clients.1 = p.clients.0;
        p.templates[0].cps = 100_000.0;
        let t = template(&p);
        let mut ports = Vec::new();
        let counts = expand(&p, std::slice::from_ref(&t), 1.0, 0.7, |d, _, f, _| {
            if d == Dir::C2s {
                ports.push(u16::from_be_bytes([f[34], f[35]]));
            }
            Ok::<(), ()>(())
        })
        .expect("expands");
        assert_eq!(counts[0].copies, 70_000);
        assert!(ports.iter().all(|&p| p >= 1024));
        assert_eq!(ports[64_511], 65_535);
        assert_eq!(ports[64_512], 1024);
    }

    #[test]
    fn without_cap_ipg_rtt_times_a_turn() {
        let p = profile(false);
        let t = template(&p);
        assert_eq!(t.frames[1].offset_ns, 2_000_000);
        let p = profile(true);
        assert_eq!(template(&p).frames[1].offset_ns, 10_000_000);
    }
}
