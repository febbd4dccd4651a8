//! `flowpath gen sfr`: a TRex stateful profile (by default the seed's
//! `sfr_delay_10_1g.yaml`) expanded into two captures, one per direction.
//!
//! The expansion is `flowpath_trafficgen::sfr`'s; this module reads the
//! profile and its captures, writes the pcaps, `.parts` and rules, and
//! prints the figures.

use std::path::{Path, PathBuf};

use anyhow::Context;
use flowpath_bench::sfr::{default_profile, load_templates};
use flowpath_io::PcapWriter;
use flowpath_trafficgen::sfr::{self, Dir};

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
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading the profile {}", path.display()))?;
    let profile = sfr::parse(&text, &path)?;
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
    let templates = load_templates(&profile, &path).map_err(anyhow::Error::msg)?;
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
    let fig = sfr::figures(&profile, &templates, m);
    println!(
        "profile x{m}: {:.1} flows/s, {:.1} packets/s, {:.1} B average, {:.1} Mbit/s, {:.0} concurrent",
        fig.flows_per_sec,
        fig.packets_per_sec,
        fig.average_bytes(),
        fig.mbit_per_sec(),
        fig.concurrent
    );

    let mut c2s = PcapWriter::create(&c2s_path, 0).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut s2c = PcapWriter::create(&s2c_path, 0).map_err(|e| anyhow::anyhow!("{e}"))?;
    let counts = sfr::expand(
        &profile,
        &templates,
        m,
        duration,
        |dir, ts, frame, orig_len| {
            let w = match dir {
                Dir::C2s => &mut c2s,
                Dir::S2c => &mut s2c,
            };
            w.write_with_orig_len(ts, frame, orig_len)
        },
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
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

    let flows: u64 = counts.iter().map(|c| c.copies).sum();
    let packets = n_c2s + n_s2c;
    let bytes: u64 = counts.iter().map(|c| c.bytes).sum();
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
    for (spec, c) in profile.templates.iter().zip(&counts) {
        println!(
            "template {}: {} flows ({:.3} expected), {} packets, {} bytes",
            spec.name,
            c.copies,
            c.rate * duration,
            c.packets,
            c.bytes
        );
    }
    Ok(())
}

/// `OUT` without a trailing `.pcap` or `.parts`.
fn output_prefix(out: &Path) -> PathBuf {
    match out.extension().and_then(|e| e.to_str()) {
        Some("pcap" | "parts") => out.with_extension(""),
        _ => out.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix() {
        assert_eq!(output_prefix(Path::new("x/sfr.pcap")), Path::new("x/sfr"));
        assert_eq!(output_prefix(Path::new("x/sfr")), Path::new("x/sfr"));
    }
}
