//! Seeded, reproducible traffic workloads: Ethernet frames plus the
//! `ovs-ofctl` rule set they are meant to be classified against.
//!
//! # What it reproduces
//!
//! The workloads of the published evaluations of the Open vSwitch userspace
//! datapath, in the form the team's reference harness (`gen-pcap.py`, next to
//! the OVS-DPDK measurements in `shared/anchors/ovs-dpdk/`) writes them:
//!
//! | profile | traffic | rules |
//! |---|---|---|
//! | [`flows`] | N UDP flows, round robin / uniform / Zipf | one `udp` megaflow |
//! | [`subtables`] | S×D UDP flows, uniform | S rules with S distinct masks (Cuckoo Distributor) |
//! | [`nmap`] | TCP SYN scan of H hosts × ports 1..P | port-drop rule sets over `output:2` |
//! | [`churn`] | short-lived UDP flows arriving at a rate | one `udp` megaflow |
//! | [`sfr`] | a TRex stateful profile (SFR): recorded conversations replayed at their rates | (`NORMAL`, the caller's) |
//!
//! # Byte identity with `gen-pcap.py`
//!
//! For the same parameters and seed, `flows`, `subtables` and `nmap` produce
//! the same frames, in the same order, with the same timestamps, and the
//! same rule text as `gen-pcap.py` (written as one pcap file: the script
//! splits workloads of more than 250,000 packets into part files). This
//! holds because [`pyrandom`] reimplements Python's Mersenne Twister and the
//! exact algorithms of `random.randrange` and `random.shuffle`. Differences,
//! all outside the script's defaults: `--packets` is an exact count here
//! (the script raises `subtables --pkts` to `--min-pkts`); `flows --order
//! rr` honours `--packets`; `nmap` takes ports `1..=P` only (no `--port-lo`
//! / `--port-step`); `zipf` and `churn` exist only here.
//!
//! # Shape
//!
//! [`generate`] takes a [`Profile`] and [`Options`] and returns a
//! [`Workload`]: one frame per distinct flow ([`frame::Frames`]), the flow
//! index of every packet, a packet rate for timestamps, the rules and a
//! one-line description. Frames are built by hand ([`frame`]) so this crate
//! depends on neither the datapath nor the packet parsers it is used to test.
//! Everything is a pure function of the profile, the options and the seed:
//! no clock, no global state, no I/O (writing pcaps is the caller's job).

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod attack;
pub mod churn;
pub mod flows;
pub mod frame;
pub mod nmap;
pub mod pyrandom;
pub mod sfr;
pub mod subtables;
pub mod workload;
pub mod zipf;

pub use attack::{AttackMix, StormSpec, TseSpec};
pub use churn::ChurnSpec;
pub use flows::{FlowsSpec, Order};
pub use frame::{Frames, UdpChecksum};
pub use nmap::{NmapRuleSet, NmapSpec, ScanOrder};
pub use subtables::SubtablesSpec;
pub use workload::{Packet, Workload};

/// Default seed, the same as `gen-pcap.py`'s `--seed`.
pub const DEFAULT_SEED: u64 = 1;
/// Default wire frame size in bytes (with FCS): the 64-byte minimum.
pub const DEFAULT_FRAME_SIZE: usize = 64;
/// Default minimum packet count: small workloads are repeated up to it so
/// that every 32-packet rx burst is full (as `gen-pcap.py --min-pkts`).
pub const DEFAULT_MIN_PACKETS: u64 = 4096;
/// Largest number of distinct flows a workload may have (2^24: the flows'
/// addresses stay inside one /8 each).
pub const MAX_FLOWS: u64 = 1 << 24;
/// Largest number of packets a workload may have (2^28).
pub const MAX_PACKETS: u64 = 1 << 28;
/// Packet rate of every profile but churn: packet `i` is stamped `i` µs.
pub const DEFAULT_PPS: u64 = 1_000_000;

/// Options common to every profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// Seed of the random orders (default [`DEFAULT_SEED`]).
    pub seed: u64,
    /// Frame size on the wire, FCS included (default 64 = 60 bytes stored).
    pub frame_size: usize,
    /// Exact packet count; `None` = the profile's default.
    pub packets: Option<u64>,
    /// Smallest default packet count (see [`DEFAULT_MIN_PACKETS`]).
    pub min_packets: u64,
    /// UDP checksum policy (default: 0, as `gen-pcap.py`).
    pub udp_checksum: UdpChecksum,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: DEFAULT_SEED,
            frame_size: DEFAULT_FRAME_SIZE,
            packets: None,
            min_packets: DEFAULT_MIN_PACKETS,
            udp_checksum: UdpChecksum::Zero,
        }
    }
}

/// A workload model and its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Profile {
    /// N parallel UDP flows (see [`flows`]).
    Flows(FlowsSpec),
    /// The Cuckoo Distributor subtable sweep (see [`subtables`]).
    Subtables(SubtablesSpec),
    /// A TCP SYN port scan with port-drop rules (see [`nmap`]).
    Nmap(NmapSpec),
    /// Short-lived flows arriving at a rate (see [`churn`]).
    Churn(ChurnSpec),
    /// Tuple Space Explosion traffic mixed with established flows (see
    /// [`attack`]).
    Tse(TseSpec),
    /// A new-flow storm mixed with established flows (see [`attack`]).
    Storm(StormSpec),
}

/// Why a workload could not be generated. Each variant names the
/// command-line option at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An option has a value outside its range or syntax.
    #[error("invalid value '{value}' for {option}: {reason}")]
    InvalidValue {
        /// The option, as spelled on the command line (e.g. `--flows`).
        option: &'static str,
        /// The offending value.
        value: String,
        /// What is allowed.
        reason: String,
    },
    /// Two options that exclude each other were both given.
    #[error("{0} and {1} cannot be used together")]
    Conflict(&'static str, &'static str),
}

impl Error {
    /// Shorthand for [`Error::InvalidValue`].
    pub(crate) fn invalid(
        option: &'static str,
        value: impl ToString,
        reason: impl Into<String>,
    ) -> Self {
        Error::InvalidValue {
            option,
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// Generates the workload of `profile` with `opts`.
pub fn generate(profile: &Profile, opts: &Options) -> Result<Workload, Error> {
    check_options(opts)?;
    match profile {
        Profile::Flows(s) => flows::generate(s, opts),
        Profile::Subtables(s) => subtables::generate(s, opts),
        Profile::Nmap(s) => nmap::generate(s, opts),
        Profile::Churn(s) => churn::generate(s, opts),
        Profile::Tse(s) => attack::generate_tse(s, opts),
        Profile::Storm(s) => attack::generate_storm(s, opts),
    }
}

fn check_options(opts: &Options) -> Result<(), Error> {
    if !(frame::MIN_WIRE_SIZE..=frame::MAX_WIRE_SIZE).contains(&opts.frame_size) {
        return Err(Error::invalid(
            "--frame-size",
            opts.frame_size,
            format!(
                "the wire frame size (with FCS) must be {}..={} bytes",
                frame::MIN_WIRE_SIZE,
                frame::MAX_WIRE_SIZE
            ),
        ));
    }
    if let Some(p) = opts.packets {
        if p == 0 || p > MAX_PACKETS {
            return Err(Error::invalid(
                "--packets",
                p,
                format!("must be 1..={MAX_PACKETS}"),
            ));
        }
    }
    if opts.min_packets > MAX_PACKETS {
        return Err(Error::invalid(
            "--min-packets",
            opts.min_packets,
            format!("must be at most {MAX_PACKETS}"),
        ));
    }
    Ok(())
}

/// Checks a count option against `1..=max`.
pub(crate) fn check_count(option: &'static str, v: u64, max: u64) -> Result<(), Error> {
    if v == 0 || v > max {
        return Err(Error::invalid(option, v, format!("must be 1..={max}")));
    }
    Ok(())
}

/// An IPv4 address from its dotted-quad bytes, in host order.
pub(crate) fn ip(a: [u8; 4]) -> u32 {
    u32::from_be_bytes(a)
}

/// The rules of the UDP profiles (`flows`, `churn`), as `gen-pcap.py`.
pub(crate) fn udp_rules() -> Vec<String> {
    vec![
        "priority=10,udp,actions=output:2".into(),
        "priority=0,actions=drop".into(),
    ]
}
