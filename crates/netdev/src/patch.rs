//! `patch:NAME,peer=PEER`: one end of a pair of ports that joins two
//! bridges of one process (Open vSwitch's `patch` interfaces). What one
//! end sends, the other receives.
//!
//! What: each direction is a channel: a bounded lock-free queue of
//! bursts (64; a burst is what one transmit call was given, up to a
//! PMD's output batch, copied back to back into one buffer), a pool of
//! those buffers (filled as needed, then reused: no allocation per frame
//! once warm), and an eventfd that wakes the receiving PMD when it
//! sleeps. One queue operation per burst, not per frame. Ends find their
//! channels by name in a process-wide table (taken only when a port opens
//! or closes).
//!
//! Why a queue and not a jump into the other bridge's tables: each
//! bridge is its own datapath with its own PMDs and caches (see the
//! design page); a frame that crosses goes through the other bridge's
//! cascade as if it had arrived on a wire, with its offload state
//! ([`VnetHdr`]) kept.
//!
//! Invariants: frames sent while no end named PEER is open, or while the
//! queue is full (a whole burst), are dropped and counted (as OVS drops output to a patch
//! port without its peer); the receiving PMD is woken only when it said
//! it found the queue empty (one eventfd write per wake-up, none while it
//! is busy).

use crate::{
    NetdevError, OpenPort, PortSpec, QueueStats, RxMeta, RxQueue, TxFrame, TxQueue, VnetHdr,
};
use crossbeam_queue::ArrayQueue;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Bursts one direction holds before it drops (each holds what one
/// transmit call was given: up to a PMD's output batch).
pub const QUEUE_LEN: usize = 64;

/// One transmit call's frames, back to back in `data`.
#[derive(Default)]
pub(crate) struct Burst {
    data: Vec<u8>,
    /// (offset, length, offload state) of each frame.
    frames: Vec<(u32, u32, Option<VnetHdr>)>,
}

/// One direction of a pair: from the end named `.0` of its key to `.1`
/// (also the two directions between a LOCAL tap and the tunnel underlay
/// it serves, see [`crate::tapoff`]).
pub(crate) struct Channel {
    full: ArrayQueue<Burst>,
    free: ArrayQueue<Burst>,
    /// An end receives from this channel.
    receiver: AtomicBool,
    /// The receiver found the queue empty (its PMD may go to sleep).
    waiting: AtomicBool,
    /// The eventfd was written and not yet read.
    signalled: AtomicBool,
    wake: OwnedFd,
}

impl Channel {
    pub(crate) fn new(port: &str) -> Result<Channel, NetdevError> {
        Ok(Channel {
            full: ArrayQueue::new(QUEUE_LEN),
            free: ArrayQueue::new(QUEUE_LEN),
            receiver: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
            signalled: AtomicBool::new(false),
            wake: crate::sys::eventfd(port)?,
        })
    }

    /// Sender: frames were queued; wakes a receiver that may sleep.
    fn notify(&self) {
        // Pairs with the receiver's fence: either it sees the frames on
        // its second look, or this sees `waiting`.
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::Relaxed) && self.waiting.swap(false, Ordering::AcqRel) {
            crate::sys::eventfd_signal(self.wake.as_raw_fd());
            self.signalled.store(true, Ordering::Release);
        }
    }

    /// Receiver: reads the eventfd once after a wake-up.
    fn drain_wake(&self) {
        if self.signalled.load(Ordering::Relaxed) && self.signalled.swap(false, Ordering::AcqRel) {
            crate::sys::eventfd_drain(self.wake.as_raw_fd());
        }
    }

    /// Hands every queued burst back to the pool.
    fn discard(&self) {
        while let Some(b) = self.full.pop() {
            let _ = self.free.push(b);
        }
    }
}

type Key = (String, String);

/// The channels of every pair in this process, by (from, to).
fn channels() -> &'static Mutex<HashMap<Key, Weak<Channel>>> {
    static CHANNELS: std::sync::OnceLock<Mutex<HashMap<Key, Weak<Channel>>>> =
        std::sync::OnceLock::new();
    CHANNELS.get_or_init(Default::default)
}

/// The channel from `from` to `to`, made if no end holds it.
fn channel(from: &str, to: &str, port: &str) -> Result<Arc<Channel>, NetdevError> {
    let mut map = channels().lock().unwrap_or_else(PoisonError::into_inner);
    map.retain(|_, w| w.strong_count() > 0);
    let key = (from.to_string(), to.to_string());
    if let Some(c) = map.get(&key).and_then(Weak::upgrade) {
        return Ok(c);
    }
    let c = Arc::new(Channel::new(port)?);
    map.insert(key, Arc::downgrade(&c));
    Ok(c)
}

/// Receives what the peer sends.
pub struct PatchRx {
    ch: Arc<Channel>,
    /// The burst being handed out, and how many of its frames were.
    cur: Option<(Burst, usize)>,
    stats: QueueStats,
}

impl PatchRx {
    /// The receiving end of `ch`; Err when it has one already.
    pub(crate) fn new(ch: Arc<Channel>) -> Result<PatchRx, Arc<Channel>> {
        if ch.receiver.swap(true, Ordering::AcqRel) {
            return Err(ch);
        }
        Ok(PatchRx {
            ch,
            cur: None,
            stats: QueueStats::default(),
        })
    }

    /// The next burst with frames left, if any (looking twice when the
    /// queue seems empty: a sender that queued before seeing `waiting`
    /// is found on the second look; one after it wakes us).
    fn next_burst(&mut self) -> Option<(Burst, usize)> {
        if let Some(c) = self.cur.take() {
            return Some(c);
        }
        if let Some(b) = self.ch.full.pop() {
            return Some((b, 0));
        }
        self.ch.waiting.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let b = self.ch.full.pop()?;
        self.ch.waiting.store(false, Ordering::Relaxed);
        Some((b, 0))
    }
}

impl RxQueue for PatchRx {
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8], RxMeta)) -> Result<usize, NetdevError> {
        self.ch.drain_wake();
        let mut n = 0;
        while n < max {
            let Some((b, mut i)) = self.next_burst() else {
                break;
            };
            while i < b.frames.len() && n < max {
                let (off, len, vnet) = b.frames[i];
                let frame = b
                    .data
                    .get(off as usize..(off + len) as usize)
                    .unwrap_or_default();
                f(
                    frame,
                    RxMeta {
                        vnet,
                        timestamp_ns: 0,
                    },
                );
                self.stats.bytes += u64::from(len);
                i += 1;
                n += 1;
            }
            if i < b.frames.len() {
                self.cur = Some((b, i));
            } else {
                let _ = self.ch.free.push(b);
            }
        }
        self.stats.packets += n as u64;
        Ok(n)
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.ch.wake.as_raw_fd())
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

impl Drop for PatchRx {
    fn drop(&mut self) {
        self.ch.receiver.store(false, Ordering::Release);
        self.ch.discard();
    }
}

/// Sends to the peer.
pub struct PatchTx {
    ch: Arc<Channel>,
    stats: QueueStats,
}

impl PatchTx {
    /// A sender into `ch`.
    pub(crate) fn new(ch: Arc<Channel>) -> PatchTx {
        PatchTx {
            ch,
            stats: QueueStats::default(),
        }
    }

    /// An empty burst to fill with [`PatchTx::add`]; `None` (nothing is
    /// taken) when no end receives.
    pub(crate) fn start(&self) -> Option<Burst> {
        if !self.ch.receiver.load(Ordering::Acquire) {
            return None;
        }
        let mut b = self.ch.free.pop().unwrap_or_default();
        b.data.clear();
        b.frames.clear();
        Some(b)
    }

    /// Copies frame `fr` into burst `b`.
    pub(crate) fn add(&mut self, b: &mut Burst, fr: &TxFrame<'_>) {
        let off = b.data.len();
        match (u32::try_from(off), u32::try_from(fr.data.len())) {
            (Ok(o), Ok(l)) if o.checked_add(l).is_some() => {
                b.data.extend_from_slice(fr.data);
                b.frames.push((o, l, fr.vnet));
            }
            _ => self.stats.dropped += 1,
        }
    }

    /// Queues burst `b`; returns how many frames went.
    pub(crate) fn finish(&mut self, b: Burst) -> usize {
        let (n, bytes) = (b.frames.len(), b.data.len() as u64);
        if n == 0 {
            let _ = self.ch.free.push(b);
            return 0;
        }
        match self.ch.full.push(b) {
            Ok(()) => {
                self.stats.packets += n as u64;
                self.stats.bytes += bytes;
                self.ch.notify();
                n
            }
            Err(b) => {
                self.stats.dropped += n as u64;
                let _ = self.ch.free.push(b);
                0
            }
        }
    }

    /// Counts `n` frames dropped (no receiver).
    pub(crate) fn dropped(&mut self, n: usize) {
        self.stats.dropped += n as u64;
    }
}

impl TxQueue for PatchTx {
    fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize {
        let Some(mut b) = self.start() else {
            let n = frames.count();
            self.dropped(n);
            return 0;
        };
        for fr in frames {
            self.add(&mut b, &fr);
        }
        self.finish(b)
    }

    fn takes_vnet_hdr(&self) -> bool {
        // The offload state crosses with the frame.
        true
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// Opens patch end `name` whose peer is `peer`, with `extra` more
/// transmit queues (one per PMD: they share the channel, which takes
/// many senders).
pub fn open(spec: &PortSpec, extra: usize) -> Result<OpenPort, NetdevError> {
    let PortSpec::Patch { name, peer } = spec else {
        return Err(NetdevError::BadSpec {
            spec: spec.to_string(),
            reason: "not a patch port".into(),
        });
    };
    let port = spec.to_string();
    let rxq = PatchRx::new(channel(peer, name, &port)?).map_err(|_| NetdevError::BadSpec {
        spec: port.clone(),
        reason: format!("patch port {name} is open already (in this or another bridge)"),
    })?;
    let tx = channel(name, peer, &port)?;
    Ok(channel_port(
        spec,
        "patch",
        format!("peer={peer}"),
        rxq,
        &tx,
        extra,
    ))
}

/// A port that receives from `rx` and sends into `tx` (`extra` more
/// transmit queues: the channel takes many senders).
pub(crate) fn channel_port(
    spec: &PortSpec,
    kind: &'static str,
    detail: String,
    rx: PatchRx,
    tx: &Arc<Channel>,
    extra: usize,
) -> OpenPort {
    let mk = || Box::new(PatchTx::new(tx.clone())) as Box<dyn TxQueue>;
    OpenPort {
        spec: spec.clone(),
        kind,
        detail,
        rxqs: vec![Box::new(rx)],
        tx: mk(),
        more_tx: (0..extra).map(|_| mk()).collect(),
        guard: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, peer: &str) -> PortSpec {
        PortSpec::Patch {
            name: name.into(),
            peer: peer.into(),
        }
    }

    fn send(p: &mut OpenPort, frames: &[&[u8]]) -> usize {
        let mut it = frames.iter().map(|d| TxFrame {
            data: d,
            vnet: None,
            timestamp_ns: 0,
        });
        p.tx.send(&mut it)
    }

    fn recv_all(p: &mut OpenPort) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        p.rxqs[0]
            .recv(64, &mut |d, _| got.push(d.to_vec()))
            .unwrap();
        got
    }

    fn readable(fd: RawFd) -> bool {
        crate::wait_readable(&[fd], 0) > 0
    }

    #[test]
    fn frames_cross_both_ways_in_order() {
        let mut a = open(&spec("t1-a", "t1-b"), 1).unwrap();
        let mut b = open(&spec("t1-b", "t1-a"), 0).unwrap();
        assert_eq!(send(&mut a, &[b"one", b"two"]), 2);
        assert_eq!(recv_all(&mut b), vec![b"one".to_vec(), b"two".to_vec()]);
        assert!(recv_all(&mut a).is_empty());
        let mut it = [TxFrame {
            data: b"back",
            vnet: Some(VnetHdr::default()),
            timestamp_ns: 0,
        }]
        .into_iter();
        assert_eq!(b.tx.send(&mut it), 1);
        let mut metas = Vec::new();
        a.rxqs[0]
            .recv(8, &mut |d, m| metas.push((d.to_vec(), m)))
            .unwrap();
        assert_eq!(metas.len(), 1);
        assert_eq!(metas[0].0, b"back");
        assert_eq!(
            metas[0].1.vnet,
            Some(VnetHdr::default()),
            "offload state kept"
        );
        // The second transmit queue feeds the same direction.
        let mut it = [TxFrame {
            data: b"q2",
            vnet: None,
            timestamp_ns: 0,
        }]
        .into_iter();
        assert_eq!(a.more_tx[0].send(&mut it), 1);
        assert_eq!(recv_all(&mut b), vec![b"q2".to_vec()]);
        assert_eq!(a.tx.stats().packets, 2);
        assert_eq!(b.rxqs[0].stats().packets, 3);
        assert_eq!(b.rxqs[0].stats().bytes, 8);
    }

    #[test]
    fn without_a_peer_or_with_a_full_queue_frames_are_dropped_and_counted() {
        let mut a = open(&spec("t2-a", "t2-b"), 0).unwrap();
        assert_eq!(send(&mut a, &[b"lost"]), 0);
        assert_eq!(a.tx.stats().dropped, 1);
        let mut b = open(&spec("t2-b", "t2-a"), 0).unwrap();
        assert!(
            recv_all(&mut b).is_empty(),
            "nothing sent before the peer opened"
        );
        // A full queue: bursts of 3 frames, the ones past QUEUE_LEN lost.
        let frame = [7u8; 60];
        let burst: Vec<&[u8]> = vec![&frame[..]; 3];
        let mut sent = 0;
        for _ in 0..QUEUE_LEN + 2 {
            sent += send(&mut a, &burst);
        }
        assert_eq!(sent, 3 * QUEUE_LEN);
        assert_eq!(a.tx.stats().dropped, 1 + 6);
        // Received in calls of at most 2: bursts are split across calls.
        let mut n = 0;
        while b.rxqs[0]
            .recv(2, &mut |d, _| {
                assert_eq!(d, &frame[..]);
                n += 1
            })
            .unwrap()
            > 0
        {}
        assert_eq!(n, 3 * QUEUE_LEN);
        // The peer closes: frames are dropped again.
        drop(b);
        assert_eq!(send(&mut a, &[b"x"]), 0);
    }

    #[test]
    fn an_end_opens_once() {
        let _a = open(&spec("t3-a", "t3-b"), 0).unwrap();
        let e = open(&spec("t3-a", "t3-b"), 0).unwrap_err().to_string();
        assert!(e.contains("open already"), "{e}");
    }

    #[test]
    fn a_receiver_that_found_nothing_is_woken_once() {
        let mut a = open(&spec("t4-a", "t4-b"), 0).unwrap();
        let mut b = open(&spec("t4-b", "t4-a"), 0).unwrap();
        let fd = b.rxqs[0].poll_fd().unwrap();
        // Busy receiver (never reported empty): no wake-up written.
        send(&mut a, &[b"1"]);
        assert!(!readable(fd));
        assert_eq!(recv_all(&mut b).len(), 1);
        // It found the queue empty: the next burst wakes it, once.
        assert!(recv_all(&mut b).is_empty());
        send(&mut a, &[b"2"]);
        send(&mut a, &[b"3"]);
        assert!(readable(fd));
        assert_eq!(recv_all(&mut b).len(), 2);
        assert!(!readable(fd), "the wake-up was read");
    }
}
