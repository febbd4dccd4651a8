//! Capture files as ports: `pcap:FILE[,loop]` receives the capture's
//! Ethernet frames (once, or over and over), `pcap-out:FILE` writes what
//! the port is sent.
//!
//! A `pcap:` port reads the whole capture into memory when it opens (so a
//! bad file fails at start-up, naming it, and receiving makes no
//! syscalls); it delivers frames as fast as it is polled, with their
//! capture timestamps in [`RxMeta::timestamp_ns`]. A capture that is not
//! Ethernet is refused. A `pcap-out:` port writes frames with the
//! timestamp they carry, or the wall clock when they carry none; it is
//! buffered and completed when the port closes.

use crate::{NetdevError, OpenPort, PortSpec, QueueStats, RxMeta, RxQueue, TxFrame, TxQueue};
use flowpath_io::{load_ethernet_frames, EthernetFrames, PcapWriter};

/// Receives a capture's frames.
#[derive(Debug)]
pub struct PcapRx {
    frames: EthernetFrames,
    next: usize,
    looped: bool,
    /// Added to timestamps on each pass of a looped capture, so they
    /// keep increasing.
    pass_offset_ns: u64,
    stats: QueueStats,
}

impl PcapRx {
    /// Frames in the capture.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// True if the capture has no frame.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

impl RxQueue for PcapRx {
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8], RxMeta)) -> Result<usize, NetdevError> {
        let total = self.frames.len();
        let mut n = 0;
        while n < max {
            if self.next >= total {
                if !self.looped || total == 0 {
                    break;
                }
                let span = self.frames.timestamps_ns.last().copied().unwrap_or(0)
                    - self.frames.timestamps_ns.first().copied().unwrap_or(0);
                self.pass_offset_ns += span + 1_000;
                self.next = 0;
            }
            let i = self.next;
            self.next += 1;
            let data = self.frames.get(i).unwrap_or(&[]);
            let ts = self.frames.timestamps_ns.get(i).copied().unwrap_or(0);
            self.stats.packets += 1;
            self.stats.bytes += data.len() as u64;
            f(
                data,
                RxMeta {
                    vnet: None,
                    timestamp_ns: ts + self.pass_offset_ns,
                },
            );
            n += 1;
        }
        Ok(n)
    }

    fn exhausted(&self) -> bool {
        !self.looped && self.next >= self.frames.len()
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// Sends nowhere: a `pcap:` port's transmit side counts and drops (a
/// capture is read-only).
#[derive(Debug, Default)]
pub struct DropTx {
    stats: QueueStats,
}

impl TxQueue for DropTx {
    fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize {
        for _ in frames {
            self.stats.dropped += 1;
        }
        0
    }

    fn takes_vnet_hdr(&self) -> bool {
        true
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// Writes what it is sent to a capture.
pub struct PcapTx {
    port: String,
    writer: Option<PcapWriter>,
    stats: QueueStats,
    /// The first write error, reported by `flush`.
    error: Option<flowpath_io::IoError>,
}

impl std::fmt::Debug for PcapTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapTx").field("port", &self.port).finish()
    }
}

impl TxQueue for PcapTx {
    fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize {
        let mut n = 0;
        for f in frames {
            let Some(w) = self.writer.as_mut() else {
                self.stats.dropped += 1;
                continue;
            };
            let ts = if f.timestamp_ns != 0 {
                f.timestamp_ns
            } else {
                wall_clock_ns()
            };
            match w.write(ts, f.data) {
                Ok(()) => {
                    n += 1;
                    self.stats.packets += 1;
                    self.stats.bytes += f.data.len() as u64;
                }
                Err(e) => {
                    self.stats.errors += 1;
                    self.stats.dropped += 1;
                    self.error.get_or_insert(e);
                }
            }
        }
        n
    }

    fn flush(&mut self) -> Result<(), NetdevError> {
        match self.error.take() {
            Some(source) => Err(NetdevError::Capture {
                port: self.port.clone(),
                err: source,
            }),
            None => Ok(()),
        }
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

impl Drop for PcapTx {
    fn drop(&mut self) {
        if let Some(w) = self.writer.take() {
            if let Err(e) = w.finish() {
                eprintln!("flowpath: port '{}': {e}", self.port);
            }
        }
    }
}

fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Opens a `pcap:` or `pcap-out:` port.
pub fn open(spec: &PortSpec) -> Result<OpenPort, NetdevError> {
    let port = spec.to_string();
    match spec {
        PortSpec::Pcap { path, looped } => {
            let frames = load_ethernet_frames(path).map_err(|source| NetdevError::Capture {
                port: port.clone(),
                err: source,
            })?;
            if let Some(e) = &frames.stopped_early {
                eprintln!(
                    "flowpath: warning: port '{port}': {e}; using the {} frames before it",
                    frames.len()
                );
            }
            let detail = format!(
                "{} frames{}",
                frames.len(),
                if *looped { ", looped" } else { "" }
            );
            Ok(OpenPort {
                spec: spec.clone(),
                kind: "pcap",
                detail,
                rxqs: vec![Box::new(PcapRx {
                    frames,
                    next: 0,
                    looped: *looped,
                    pass_offset_ns: 0,
                    stats: QueueStats::default(),
                })],
                tx: Box::new(DropTx::default()),
                more_tx: Vec::new(),
                guard: None,
            })
        }
        PortSpec::PcapOut { path } => {
            let w = PcapWriter::create(path, 0).map_err(|source| NetdevError::Capture {
                port: port.clone(),
                err: source,
            })?;
            Ok(OpenPort {
                spec: spec.clone(),
                kind: "pcap-out",
                detail: String::new(),
                rxqs: Vec::new(),
                tx: Box::new(PcapTx {
                    port,
                    writer: Some(w),
                    stats: QueueStats::default(),
                    error: None,
                }),
                more_tx: Vec::new(),
                guard: None,
            })
        }
        _ => Err(NetdevError::BadSpec {
            spec: port,
            reason: "not a capture port".into(),
        }),
    }
}
