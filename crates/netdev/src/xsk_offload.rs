//! Offload state on AF_XDP receive: what an `afxdp:` rx queue does about
//! frames a peer left work in, since AF_XDP hands frames over without the
//! kernel's offload state.
//!
//! Partial checksums: a software peer (veth, tap, virtio) with tx checksum
//! offload on hands over TCP and UDP frames whose checksum field holds
//! only the pseudo-header sum; sent on as they are, every receiver drops
//! them (TCP stalls, silently). On interfaces that can deliver such frames
//! ([`may_receive_partial_csum`]: all but hardware NICs, whose receive
//! path never does), each received TCP/UDP frame's checksum field is
//! compared with its pseudo-header sum (a few additions, no payload read);
//! a match is finished in place ([`finish_partial_csum`]), counted
//! (`csum_partial`), and logged once per port with the remedy.
//!
//! GSO super-frames (a peer with TSO on: native XDP on veth turns TSO off
//! at the peer, generic mode does not) are larger than a UMEM frame and
//! dropped by the kernel before the socket sees them. The queue reads the
//! kernel's count of those ([`too_big`]) at most every [`WATCH_EVERY`],
//! every 64th empty poll or every [`WATCH_BURSTS`]th burst, until it
//! finds some, and logs the first once per port with the remedy; the count
//! itself is read with the queue's other counters (`too_big`).
//!
//! Cost on the per-packet path: one flag test and, for TCP/UDP frames, the
//! header check; per burst or empty poll a counter; no allocation, lock or
//! syscall (the kernel's counters are read, rarely, between bursts).

use crate::offload::finish_partial_csum;
use crate::QueueStats;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often (at most) an rx queue reads the kernel's drop counters to
/// notice frames too big for AF_XDP.
pub const WATCH_EVERY: Duration = Duration::from_millis(250);
/// ... and after how many non-empty bursts at the latest.
pub const WATCH_BURSTS: u32 = 1 << 16;

/// One rx queue's offload state (cloned from the port's first for each of
/// its queues: the "logged" flags are shared, the rest is the queue's).
#[derive(Clone)]
pub(crate) struct RxOffload {
    /// The port (its spec) and interface, for the log lines.
    port: String,
    ifname: String,
    /// Whether frames are checked for partial checksums.
    csum_on: bool,
    /// Set once the port has logged its first partial checksum.
    csum_logged: Arc<AtomicBool>,
    /// This queue has found one (spares the shared flag afterwards).
    csum_seen: bool,
    /// Empty polls and bursts, counted to space the looks at the kernel's
    /// counters, and when the next look may be.
    polls: u32,
    bursts: u32,
    next_watch: Instant,
    /// This queue has found frames too big.
    big_seen: bool,
    /// Set once the port has logged frames too big.
    big_logged: Arc<AtomicBool>,
}

impl RxOffload {
    /// The state of a port's first queue.
    pub(crate) fn new(port: &str, ifname: &str) -> RxOffload {
        RxOffload {
            port: port.to_string(),
            ifname: ifname.to_string(),
            csum_on: may_receive_partial_csum(ifname),
            csum_logged: Arc::default(),
            csum_seen: false,
            polls: 0,
            bursts: 0,
            next_watch: Instant::now(),
            big_seen: false,
            big_logged: Arc::default(),
        }
    }

    /// A received frame: finishes a partial checksum in it, counted in
    /// `stats`.
    #[inline]
    pub(crate) fn frame(&mut self, data: &mut [u8], stats: &mut QueueStats) {
        if self.csum_on && finish_partial_csum(data) {
            self.csum_found(stats);
        }
    }

    /// A poll that found nothing; `too_big` reads the kernel's count.
    #[inline]
    pub(crate) fn empty_poll(&mut self, too_big: impl FnOnce() -> u64) {
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(64) && !self.big_seen {
            self.watch(too_big);
        }
    }

    /// A burst received; `too_big` reads the kernel's count.
    #[inline]
    pub(crate) fn burst(&mut self, too_big: impl FnOnce() -> u64) {
        self.bursts = self.bursts.wrapping_add(1);
        if self.bursts.is_multiple_of(WATCH_BURSTS) && !self.big_seen {
            self.watch(too_big);
        }
    }

    /// A partial checksum was finished: count it, and log the port's
    /// first.
    #[cold]
    fn csum_found(&mut self, stats: &mut QueueStats) {
        stats.csum_partial += 1;
        if self.csum_seen {
            return;
        }
        self.csum_seen = true;
        if !self.csum_logged.swap(true, Ordering::Relaxed) {
            let (p, i) = (&self.port, &self.ifname);
            eprintln!(
                "flowpath: port '{p}': peer sends partial checksums (tx checksum offload on): \
                 finished in software; for speed: ethtool -K PEER tx off (PEER: the other end \
                 of {i}), or use afpacket:{i}"
            );
        }
    }

    /// Looks (at most every [`WATCH_EVERY`]) whether the kernel dropped
    /// frames too big for a UMEM frame; logs the port's first.
    #[cold]
    fn watch(&mut self, too_big: impl FnOnce() -> u64) {
        let now = Instant::now();
        if now < self.next_watch {
            return;
        }
        self.next_watch = now + WATCH_EVERY;
        let n = too_big();
        if n == 0 {
            return;
        }
        self.big_seen = true;
        if !self.big_logged.swap(true, Ordering::Relaxed) {
            let (p, i) = (&self.port, &self.ifname);
            eprintln!(
                "flowpath: port '{p}': {n} frame(s) over {} bytes dropped by the kernel \
                 (AF_XDP takes no GSO super-frames): the peer sends them (TSO/GSO on; generic \
                 XDP mode lets them through); remedy: ethtool -K PEER tx off (PEER: the other \
                 end of {i}; turns TSO off too), mode=native, or use afpacket:{i}",
                crate::afxdp::FRAME_SIZE
            );
        }
    }
}

/// Frames the kernel dropped as too big for a UMEM frame, from its
/// `XDP_STATISTICS`: `rx_dropped` counts those and, in copy mode, frames
/// it found no fill-ring entry for (those also in
/// `rx_fill_ring_empty_descs`).
pub(crate) fn too_big(rx_dropped: u64, rx_fill_ring_empty_descs: u64) -> u64 {
    rx_dropped.saturating_sub(rx_fill_ring_empty_descs)
}

/// Whether frames received on `ifname` may carry a checksum the sender
/// left to offload: those of software devices (veth, tap, macvlan, ...:
/// no `device` in sysfs) and of virtio-net may; a hardware NIC's receive
/// path never hands one over, so its frames are not checked.
pub(crate) fn may_receive_partial_csum(ifname: &str) -> bool {
    match std::fs::read_link(format!("/sys/class/net/{ifname}/device/driver")) {
        Ok(d) => d.file_name().is_none_or(|n| n == "virtio_net"),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_interfaces_are_checked() {
        // Loopback has no device (no driver): checked, like veth and tap.
        assert!(may_receive_partial_csum("lo"));
        assert!(may_receive_partial_csum("no-such-interface"));
    }

    #[test]
    fn kernel_drops_too_big_leave_out_fill_ring_drops() {
        assert_eq!(too_big(57, 0), 57);
        assert_eq!(too_big(10, 4), 6);
        assert_eq!(too_big(3, 5), 0);
    }

    #[test]
    fn the_kernel_counter_is_read_rarely_and_not_after_a_find() {
        let mut o = RxOffload::new("afxdp:x", "x");
        let mut reads = 0;
        // 63 empty polls: no read; the 64th: one.
        for _ in 0..64 {
            o.empty_poll(|| {
                reads += 1;
                0
            });
        }
        assert_eq!(reads, 1);
        // The next 64 polls come before WATCH_EVERY has passed: no read.
        for _ in 0..64 {
            o.empty_poll(|| {
                reads += 1;
                5
            });
        }
        assert_eq!(reads, 1);
        o.next_watch = Instant::now();
        for _ in 0..64 {
            o.empty_poll(|| {
                reads += 1;
                5
            });
        }
        assert_eq!(reads, 2);
        assert!(o.big_seen && o.big_logged.load(Ordering::Relaxed));
        // Found: no more reads.
        o.next_watch = Instant::now();
        for _ in 0..WATCH_BURSTS {
            o.burst(|| {
                reads += 1;
                5
            });
        }
        assert_eq!(reads, 2);
    }
}
