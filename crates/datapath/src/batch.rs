//! Batches: up to 32 packets' keys going through the cascade together.
//!
//! What: the input of [`crate::Datapath::process_batch`] — each packet's
//! [`FlowKey`], its 32-bit hash and its length — and its output: one
//! [`Verdict`] per packet, plus a slot per packet for actions that the slow
//! path returned without installing a megaflow.
//!
//! Why: every tier works on the whole batch with a bitmask of the packets
//! still unclassified, so each tier's memory accesses for all packets are
//! issued before any is waited for. Packets' bytes are not here: the caller
//! keeps them (indexed like the batch) and applies
//! [`Batch::actions`] to them after classification — that is the hook for
//! action execution, grouping by output port, etc.
//!
//! Invariants: `len <= BATCH_SIZE`; after `process_batch` every packet's
//! verdict is not [`Verdict::Pending`]; a [`Verdict::SlowPath`] packet's
//! actions are in its `upcall_actions` slot. Connection-tracking words
//! (`W_CT_FIRST..`, zero in every key the extractor builds): a packet's
//! are zero unless its bit in `ct` is set, and every free slot's (index
//! `>= len`) are zero ([`Batch::clear`] re-zeroes the slots whose bit is
//! set). So a received packet's key is written without touching its third
//! cache line ([`Batch::push_with`]), and the EMC, which keeps only words
//! `0..W_CT_FIRST`, knows the few packets ([`Batch::ct_packets`]) whose
//! keys have extension words (recirculated after `ct` or `tnl_pop`).
//!
//! Threads: owned by the worker that fills it; allocate once and reuse
//! (it is ~9.5 KB, 8 KB of it keys: keep it boxed or in the worker's state).

use crate::hash::packet_hash;
use crate::megaflow::MegaflowRef;
use crate::pipeline::Datapath;
use flowpath_flow::key::W_CT_FIRST;
use flowpath_flow::FlowKey;
use flowpath_odp::{DpAction, DpActions};

/// Maximum packets per batch (OVS's `NETDEV_MAX_BURST`).
pub const BATCH_SIZE: usize = 32;

/// Which tier decided a packet that got a megaflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Exact match cache.
    Emc,
    /// Signature match cache.
    Smc,
    /// Datapath flow cache.
    Dfc,
    /// Cuckoo Distributor (directed subtable lookup).
    Cd,
    /// Ranked dpcls search.
    Megaflow,
    /// The slow path, which installed the megaflow.
    Upcall,
    /// The hybrid table (a megaflow entry, or a subtable entry that
    /// directed the dpcls search).
    Hybrid,
    /// A tier from outside the crate ([`crate::Datapath::push_tier`]).
    Other,
}

/// Why a packet was dropped without actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The upcall failed.
    UpcallFailed,
    /// The slow path could not take the packet.
    Lost,
}

/// The classification of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Not classified yet.
    Pending,
    /// Apply this megaflow's actions.
    Megaflow {
        /// The megaflow.
        flow: MegaflowRef,
        /// Which tier found (or installed) it.
        tier: Tier,
    },
    /// Apply the slow path's actions held in the batch (nothing was
    /// installed: flow limit).
    SlowPath,
    /// Drop.
    Drop(DropReason),
}

/// The batch is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("batch is full ({BATCH_SIZE} packets)")]
pub struct BatchFull;

/// Up to [`BATCH_SIZE`] packets. See the module documentation.
#[derive(Clone, Debug)]
pub struct Batch {
    len: usize,
    pub(crate) keys: [FlowKey; BATCH_SIZE],
    /// Bit `i`: packet `i`'s connection-tracking words may be non-zero
    /// (clear: they are zero). No bit at or above `len`.
    pub(crate) ct: u32,
    pub(crate) hashes: [u32; BATCH_SIZE],
    pub(crate) sizes: [u32; BATCH_SIZE],
    pub(crate) verdicts: [Verdict; BATCH_SIZE],
    pub(crate) upcall_actions: [DpActions; BATCH_SIZE],
}

impl Default for Batch {
    fn default() -> Self {
        Self::new()
    }
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch {
            len: 0,
            keys: [FlowKey::zero(); BATCH_SIZE],
            ct: 0,
            hashes: [0; BATCH_SIZE],
            sizes: [0; BATCH_SIZE],
            verdicts: [Verdict::Pending; BATCH_SIZE],
            upcall_actions: std::array::from_fn(|_| DpActions::new()),
        }
    }

    /// Number of packets.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when full.
    pub fn is_full(&self) -> bool {
        self.len == BATCH_SIZE
    }

    /// Empties the batch (keeps its storage). Re-zeroes the
    /// connection-tracking words of the keys that had them (see the
    /// module documentation; none in a batch of received packets).
    #[inline]
    pub fn clear(&mut self) {
        let mut m = self.ct;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            self.keys[i].w[W_CT_FIRST..].fill(0);
        }
        self.ct = 0;
        self.len = 0;
    }

    /// Adds a packet whose hash was already computed (by the extractor or
    /// taken from the NIC; it must be the same function for every packet
    /// a datapath sees — [`crate::hash::packet_hash`] by default).
    #[inline]
    pub fn push_hashed(&mut self, key: FlowKey, hash: u32, bytes: u32) -> Result<(), BatchFull> {
        if self.len == BATCH_SIZE {
            return Err(BatchFull);
        }
        let i = self.len;
        self.keys[i] = key;
        self.note_ct(i);
        self.hashes[i] = hash;
        self.sizes[i] = bytes;
        self.verdicts[i] = Verdict::Pending;
        self.len += 1;
        Ok(())
    }

    /// Adds a packet whose key `fill` writes in place (e.g. with
    /// `flowpath_flow::extract::extract_into_rx`), hashing it with
    /// [`packet_hash`]; returns the packet's index. The key slot is handed
    /// to `fill` with its words `0..W_CT_FIRST` as an earlier packet left
    /// them and its connection-tracking words (`W_CT_FIRST..`) zero:
    /// `fill` must write every word of `0..W_CT_FIRST`, and may set
    /// connection-tracking words (a recirculated packet's state after
    /// `ct`), which are then noted ([`Batch::ct_packets`]) unless `fill`
    /// claims the short form. Writing in place saves a copy of the key
    /// per packet. `fill` returns `Some(true)` when it knows words 5..24 are 0
    /// (the hash then skips reading them: the same value), `Some(false)`
    /// otherwise, and `None` to leave the packet out (`Ok(None)`: the
    /// frame turned out never valid; the slot stays free).
    #[inline]
    pub fn push_with(
        &mut self,
        bytes: u32,
        fill: impl FnOnce(&mut FlowKey) -> Option<bool>,
    ) -> Result<Option<usize>, BatchFull> {
        self.push_filled(bytes, None, fill)
    }

    /// [`Batch::push_with`] for a key whose extension words the caller
    /// knows to be set or not (`ext`: a recirculated packet's connection
    /// tracking state or tunnel metadata; true when unsure — false when
    /// any is set would be wrong): they are not read back (by perf, reading
    /// the words just written stalled on store forwarding).
    #[inline]
    pub fn push_with_ext(
        &mut self,
        bytes: u32,
        ext: bool,
        fill: impl FnOnce(&mut FlowKey) -> Option<bool>,
    ) -> Result<Option<usize>, BatchFull> {
        self.push_filled(bytes, Some(ext), fill)
    }

    #[inline(always)]
    fn push_filled(
        &mut self,
        bytes: u32,
        ext: Option<bool>,
        fill: impl FnOnce(&mut FlowKey) -> Option<bool>,
    ) -> Result<Option<usize>, BatchFull> {
        if self.len == BATCH_SIZE {
            return Err(BatchFull);
        }
        let i = self.len;
        let Some(short) = fill(&mut self.keys[i]) else {
            // The slot stays free: its connection-tracking words must be
            // zero.
            self.keys[i].w[W_CT_FIRST..].fill(0);
            return Ok(None);
        };
        self.hashes[i] = if short {
            debug_assert!(self.keys[i].w[5..].iter().all(|&w| w == 0));
            crate::hash::packet_hash_short(&self.keys[i])
        } else {
            match ext {
                Some(any) => {
                    // (Never fewer than there are: a key said to have
                    // them without any is only looked up salted and
                    // misses the EMC.)
                    debug_assert!(any || self.keys[i].w[W_CT_FIRST..].iter().all(|&w| w == 0));
                    self.ct = self.ct & !(1 << i) | u32::from(any) << i;
                }
                None => self.note_ct(i),
            }
            packet_hash(&self.keys[i])
        };
        self.sizes[i] = bytes;
        self.verdicts[i] = Verdict::Pending;
        self.len += 1;
        Ok(Some(i))
    }

    /// Adds a packet, hashing its key with [`packet_hash`].
    #[inline]
    pub fn push(&mut self, key: FlowKey, bytes: u32) -> Result<(), BatchFull> {
        let h = packet_hash(&key);
        self.push_hashed(key, h, bytes)
    }

    /// The keys of the packets.
    pub fn keys(&self) -> &[FlowKey] {
        &self.keys[..self.len]
    }

    /// Bitmap of the packets whose keys have non-zero extension words
    /// (connection tracking or tunnel: packets recirculated after `ct` or
    /// `tnl_pop`); the EMC checks their hits against the megaflow.
    #[inline(always)]
    pub fn ct_packets(&self) -> u32 {
        self.ct
    }

    /// Notes whether slot `i`'s key has connection-tracking state.
    #[inline(always)]
    fn note_ct(&mut self, i: usize) {
        let any = self.keys[i].w[W_CT_FIRST..].iter().fold(0, |a, &w| a | w) != 0;
        self.ct = self.ct & !(1 << i) | u32::from(any) << i;
    }

    /// The hashes of the packets.
    pub fn hashes(&self) -> &[u32] {
        &self.hashes[..self.len]
    }

    /// The verdicts of the packets.
    pub fn verdicts(&self) -> &[Verdict] {
        &self.verdicts[..self.len]
    }

    /// Bitmap of all packets.
    #[inline(always)]
    pub fn all(&self) -> u32 {
        if self.len == BATCH_SIZE {
            u32::MAX
        } else {
            (1u32 << self.len) - 1
        }
    }

    /// The actions to apply to packet `i` (empty = drop). `dp` must be the
    /// datapath that processed the batch.
    pub fn actions<'a>(&'a self, i: usize, dp: &'a Datapath) -> &'a [DpAction] {
        match self.verdicts[i] {
            Verdict::Megaflow { flow, .. } => dp.actions(flow),
            Verdict::SlowPath => &self.upcall_actions[i],
            Verdict::Pending | Verdict::Drop(_) => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_to_32_and_clears() {
        let mut b = Batch::new();
        assert!(b.is_empty());
        for i in 0..BATCH_SIZE as u32 {
            let mut k = FlowKey::zero();
            k.set_nw_src(i);
            b.push(k, 64).unwrap();
        }
        assert!(b.is_full());
        assert_eq!(b.push(FlowKey::zero(), 64), Err(BatchFull));
        assert_eq!(b.all(), u32::MAX);
        assert_eq!(b.hashes()[3], packet_hash(&b.keys()[3]));
        b.clear();
        b.push(FlowKey::zero(), 1).unwrap();
        assert_eq!(b.all(), 1);
        assert_eq!(b.verdicts(), &[Verdict::Pending]);
        let mut k = FlowKey::zero();
        k.set_nw_dst(7);
        assert_eq!(
            b.push_with(60, |slot| {
                *slot = k;
                Some(false)
            }),
            Ok(Some(1))
        );
        assert_eq!(b.keys()[1], k);
        assert_eq!(b.hashes()[1], packet_hash(&k));
        assert_eq!(b.len(), 2);
        assert_eq!(b.push_with(60, |_| None), Ok(None), "left out");
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn connection_tracking_words_are_noted_and_cleared() {
        let mut b = Batch::new();
        let mut ct = FlowKey::zero();
        ct.set_nw_src(1);
        ct.set_ct_mark(9);
        b.push(FlowKey::zero(), 64).unwrap();
        b.push(ct, 64).unwrap();
        let filled = |b: &mut Batch| {
            b.push_with(64, |slot| {
                *slot = ct;
                Some(false)
            })
            .unwrap()
        };
        assert_eq!(filled(&mut b), Some(2));
        let mut left_out = ct;
        left_out.set_ct_label(3);
        assert_eq!(
            b.push_with(64, |slot| {
                *slot = left_out;
                None
            }),
            Ok(None)
        );
        assert_eq!(b.ct_packets(), 0b110);
        assert_eq!(b.keys()[2], ct);
        b.clear();
        assert_eq!(b.ct_packets(), 0);
        // A received packet's fill writes only the words before the
        // connection-tracking ones: every slot it gets has them zero.
        for _ in 0..4 {
            b.push_with(64, |slot| {
                slot.w[..W_CT_FIRST].fill(0);
                slot.set_nw_dst(2);
                Some(false)
            })
            .unwrap();
        }
        assert_eq!(b.ct_packets(), 0);
        assert!(b
            .keys()
            .iter()
            .all(|k| k.w[W_CT_FIRST..].iter().all(|&w| w == 0)));
    }
}
