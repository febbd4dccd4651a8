//! `flowpath gen sfr`: a TRex stateful profile (by default the seed's
//! `sfr_delay_10_1g.yaml`) expanded into two captures, one per direction.
//!
//! Each template is started `cps × M` times per second, copy k of template
//! t at `k / (cps_t × M)` seconds, for every such start before the
//! duration; each copy is written whole, so the last packets fall after
//! the duration. Copies take the generator's client and server addresses
//! in sequence (one counter each over all templates, in start order) and
//! client ports from 1024 upward (per client address).
//!
//! Streaming: the templates are held in memory (a few MB), the expansion
//! is not. A min-heap holds one entry per live copy (its next packet) and
//! one per template (its next start), ordered by (time, template, copy,
//! packet), so memory grows with the concurrent copies, not the output, and
//! the output is a pure function of the arguments.

mod profile;
mod template;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use flowpath_io::PcapWriter;

use profile::SfrProfile;
use template::{Copy, Dir, Template};

/// The seed's profile, beside the repository in `shared/`.
fn default_profile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/trex-sfr/sfr_delay_10_1g.yaml")
}

pub(super) const LONG_ABOUT: &str = "\
TRex's SFR profile (sfr_delay_10_1g.yaml, seed 001's second workload) or any TRex \
stateful cap_info profile, expanded into captures: every template (a recorded \
conversation) is started cps x M times per second over the duration, copy k at k/(cps x M) \
s, and written whole with the capture's own packet gaps.

Writes OUT-c2s.pcap (client-to-server, TRex's port 0), OUT-s2c.pcap (server-to-client, \
its port 1), OUT.parts listing the two (the form `flowpath bench --pcap` replays: \
c2s on in_port 1, s2c on 11) and OUT.flows (priority=0,actions=NORMAL, the seed's \
bridge rule). `flowpath run --pcap OUT-c2s.pcap` replays one direction; `flowpath \
switch` takes each as a pcap: port. Prints the profile's figures (flows/s = templates \
started per second, TRex's count; packets/s; average frame size without FCS; Mbit/s; \
concurrent copies) and what was written.

Honoured: duration (default of --duration); generator distribution (seq only), \
clients_start/end and servers_start/end (one counter each, in start order, wrapping); \
mac (the client side's Ethernet source; the server side's is it with the last byte + 1); \
cap_ipg (true: the capture's gaps; false: ipg us between packets of one direction, \
rtt us when the direction turns); cap_ipg_min/cap_override_ipg; cap_info name (resolved \
beside the profile, or by its file name there: TRex's avl/ prefix), cps, ipg, rtt, w (1 only).

Not honoured (accepted, listed on stderr): clients_per_gb, min_clients, dual_port_mask \
(one port pair), tcp_aging/udp_aging other than 0, one_app_server: true, plugin_id (TRex's RTSP/SIP \
plugins rewrite addresses inside payloads; here payloads are the capture's). TRex's \
start jitter is not modelled: starts are evenly spaced.

Frames: the template's server is its first packet's destination; frames from it are \
server-to-client, all others client-to-server. Addresses become the copy's client and \
server, the client-side port of template flow j becomes base+j (base from 1024 per \
client), server ports stay; IPv4 and TCP/UDP checksums are updated incrementally (a template's wrong \
checksum stays wrong, as some in the RTP templates). Timestamps start at 0.";

/// Arguments of `flowpath gen sfr`.
#[derive(clap::Args)]
pub(super) struct SfrArgs {
    /// Rate multiplier M (TRex's -m): each template starts cps x M times a second.
    #[arg(short = 'm', long, value_name = "M", default_value_t = 1.0)]
    multiplier: f64,
    /// Seconds of flow starts (TRex's -d) [default: the profile's duration].
    #[arg(short = 'd', long, value_name = "S")]
    duration: Option<f64>,
    /// The TRex profile [default: shared/trex-sfr/sfr_delay_10_1g.yaml beside
    /// the repository].
    #[arg(long, value_name = "FILE.yaml")]
    profile: Option<PathBuf>,
    /// Output prefix: writes OUT-c2s.pcap, OUT-s2c.pcap, OUT.parts, OUT.flows
    /// (a trailing .pcap or .parts is dropped).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: PathBuf,
}

/// One template's schedule and its counts.
struct Slot {
    rate: f64,
    starts: u64,
    packets: u64,
    bytes: u64,
}

/// A heap entry: the next packet of copy `k` of template `t`, or (`i`
/// 0) its start, when its addresses are taken.
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

/// Runs `flowpath gen sfr`.
pub(super) fn run(a: SfrArgs) -> anyhow::Result<()> {
    if !(a.multiplier.is_finite() && a.multiplier > 0.0) {
        anyhow::bail!(
            "invalid value '{}' for --multiplier: a positive number",
            a.multiplier
        );
    }
    let path = match a.profile {
        Some(p) => p,
        None => {
            let p = default_profile();
            if !p.is_file() {
                anyhow::bail!(
                    "the default profile {} is missing (the seed's shared/ folder beside the repository); name one with --profile",
                    p.display()
                );
            }
            std::fs::canonicalize(&p).unwrap_or(p)
        }
    };
    let profile = profile::load(&path)?;
    if !profile.ignored.is_empty() {
        eprintln!(
            "flowpath gen sfr: {}: not honoured: {}",
            path.display(),
            profile.ignored.join(", ")
        );
    }
    let duration = match (a.duration, profile.duration) {
        (Some(d), _) if !(d.is_finite() && d > 0.0) => {
            anyhow::bail!("invalid value '{d}' for --duration: a positive number of seconds")
        }
        (Some(d), _) | (None, Some(d)) => d,
        (None, None) => anyhow::bail!("{}: no duration; give --duration", path.display()),
    };
    let templates = template::load_all(&profile)?;
    let prefix = output_prefix(&a.output);
    let name = |suffix: &str| {
        let mut s = prefix.clone().into_os_string();
        s.push(suffix);
        PathBuf::from(s)
    };
    let (c2s_path, s2c_path) = (name("-c2s.pcap"), name("-s2c.pcap"));
    let (parts_path, rules_path) = (name(".parts"), name(".flows"));
    let m = a.multiplier;

    // The profile's arithmetic (steady state at M).
    let mut fig = Figures::default();
    for (spec, t) in profile.templates.iter().zip(&templates) {
        let r = spec.cps * m;
        fig.flows += r;
        fig.packets += r * t.frames.len() as f64;
        fig.bytes += r * t.bytes as f64;
        fig.concurrent += r * t.span_ns as f64 / 1e9;
    }
    println!(
        "profile x{m}: {:.1} flows/s, {:.1} packets/s, {:.1} B average, {:.1} Mbit/s, {:.0} concurrent",
        fig.flows,
        fig.packets,
        fig.bytes / fig.packets,
        fig.bytes * 8.0 / 1e6,
        fig.concurrent
    );

    let mut slots: Vec<Slot> = profile
        .templates
        .iter()
        .map(|s| {
            let rate = s.cps * m;
            Slot {
                rate,
                starts: starts_before(rate, duration),
                packets: 0,
                bytes: 0,
            }
        })
        .collect();
    let mut c2s = PcapWriter::create(&c2s_path, 0).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut s2c = PcapWriter::create(&s2c_path, 0).map_err(|e| anyhow::anyhow!("{e}"))?;
    expand(&profile, &templates, &mut slots, &mut c2s, &mut s2c)?;
    let (n_c2s, n_s2c) = (c2s.written(), s2c.written());
    c2s.finish().map_err(|e| anyhow::anyhow!("{e}"))?;
    s2c.finish().map_err(|e| anyhow::anyhow!("{e}"))?;
    let file_name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    std::fs::write(
        &parts_path,
        format!("{}\n{}\n", file_name(&c2s_path), file_name(&s2c_path)),
    )
    .with_context(|| format!("writing {}", parts_path.display()))?;
    std::fs::write(&rules_path, "priority=0,actions=NORMAL\n")
        .with_context(|| format!("writing {}", rules_path.display()))?;

    let flows: u64 = slots.iter().map(|s| s.starts).sum();
    let packets = n_c2s + n_s2c;
    let bytes: u64 = slots.iter().map(|s| s.bytes).sum();
    println!(
        "written: {flows} flows ({:.1}/s), {packets} packets ({:.1}/s), {:.1} B average, {:.1} Mbit/s over {duration} s; c2s {n_c2s} -> {}, s2c {n_s2c} -> {}; {}, {}",
        flows as f64 / duration,
        packets as f64 / duration,
        bytes as f64 / packets.max(1) as f64,
        bytes as f64 * 8.0 / 1e6 / duration,
        c2s_path.display(),
        s2c_path.display(),
        parts_path.display(),
        rules_path.display()
    );
    for (spec, s) in profile.templates.iter().zip(&slots) {
        println!(
            "template {}: {} flows ({:.3} expected), {} packets, {} bytes",
            spec.name,
            s.starts,
            s.rate * duration,
            s.packets,
            s.bytes
        );
    }
    Ok(())
}

#[derive(Default)]
struct Figures {
    flows: f64,
    packets: f64,
    bytes: f64,
    concurrent: f64,
}

/// `OUT` without a trailing `.pcap` or `.parts`.
fn output_prefix(out: &Path) -> PathBuf {
    match out.extension().and_then(|e| e.to_str()) {
        Some("pcap" | "parts") => out.with_extension(""),
        _ => out.to_path_buf(),
    }
}

/// Start time of copy k at `rate` per second, ns.
fn start_ns(k: u64, rate: f64) -> u64 {
    (k as f64 * 1e9 / rate).round() as u64
}

/// Copies started before `duration` seconds: k = 0, 1, ... with
/// k / rate < duration.
fn starts_before(rate: f64, duration: f64) -> u64 {
    let limit = (duration * 1e9).round() as u64;
    let mut n = (rate * duration).ceil().max(0.0) as u64;
    // Float rounding: settle on the exact count of start_ns(k) < limit.
    while n > 0 && start_ns(n - 1, rate) >= limit {
        n -= 1;
    }
    while start_ns(n, rate) < limit {
        n += 1;
    }
    n
}

/// The address `i` places after `lo` in `lo..=hi`, wrapping.
fn nth(lo: Ipv4Addr, hi: Ipv4Addr, i: u64) -> u32 {
    let size = u64::from(u32::from(hi) - u32::from(lo)) + 1;
    u32::from(lo) + (i % size) as u32
}

/// Streams every copy's packets, in time order, into the two writers.
fn expand(
    profile: &SfrProfile,
    templates: &[Template],
    slots: &mut [Slot],
    c2s: &mut PcapWriter,
    s2c: &mut PcapWriter,
) -> anyhow::Result<()> {
    let mut heap = BinaryHeap::new();
    for (t, s) in slots.iter().enumerate() {
        if s.starts > 0 {
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
    let n_clients = u64::from(u32::from(profile.clients.1) - u32::from(profile.clients.0)) + 1;
    // Next client port of each client address (at most 2^32 entries in
    // theory; the profile's ranges are small, so grown on demand).
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
            // A start: take the next addresses and ports, schedule the next start.
            let ci = next_client % n_clients;
            next_client += 1;
            ev.client = nth(profile.clients.0, profile.clients.1, ci);
            ev.server = nth(profile.servers.0, profile.servers.1, next_server);
            next_server += 1;
            let ci = ci as usize;
            if ports.len() <= ci {
                ports.resize(ci + 1, 1024);
            }
            if u32::from(ports[ci]) + u32::from(tpl.flows) > 0x1_0000 {
                ports[ci] = 1024;
            }
            ev.port = ports[ci];
            ports[ci] += tpl.flows;
            let slot = &slots[t];
            if ev.k + 1 < slot.starts {
                heap.push(Reverse(Ev {
                    time: start_ns(ev.k + 1, slot.rate),
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
        let copy = Copy {
            client: Ipv4Addr::from(ev.client),
            server: Ipv4Addr::from(ev.server),
            port: ev.port,
            client_mac,
            server_mac,
        };
        frame.rewrite(&copy, &mut buf);
        let w = match frame.dir {
            Dir::C2s => &mut *c2s,
            Dir::S2c => &mut *s2c,
        };
        w.write_with_orig_len(ev.time, &buf, frame.orig_len)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        slots[t].packets += 1;
        slots[t].bytes += u64::from(frame.orig_len);
        if let Some(next) = tpl.frames.get(ev.i as usize + 1) {
            let start = ev.time - frame.offset_ns;
            ev.time = start + next.offset_ns;
            ev.i += 1;
            heap.push(Reverse(ev));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn prefix() {
        assert_eq!(output_prefix(Path::new("x/sfr.pcap")), Path::new("x/sfr"));
        assert_eq!(output_prefix(Path::new("x/sfr")), Path::new("x/sfr"));
    }
}
