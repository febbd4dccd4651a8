//! The upcall interface: how the fast path asks the slow path about a miss.
//!
//! What: the [`Upcall`] trait. On a dpcls miss the worker calls it inline
//! (as OVS's PMD threads do) with the packet's key; the slow path returns
//! the datapath actions for the packet and the megaflow mask — the bits the
//! decision depended on. Every packet whose key agrees with this key on the
//! mask must get the same actions (the megaflow invariant, checked by the
//! slow path's property tests); the datapath adds in_port to the mask.
//!
//! Why a trait: the datapath does not depend on ofproto's classifier or
//! translation; the lead's glue implements it, and the tests implement it
//! with a linear-scan oracle. Closures `FnMut(&FlowKey) -> Result<..>`
//! implement it too.
//!
//! Threads: called on the worker's thread, between tiers of one batch.

use crate::pipeline::Datapath;
use flowpath_flow::{FlowKey, FlowMask};
use flowpath_odp::DpActions;

/// Why an upcall gave no actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UpcallError {
    /// The slow path failed for this packet (translation error, ...): the
    /// packet is dropped and counted as "miss with failed upcall".
    #[error("upcall failed")]
    Failed,
    /// The slow path could not take the packet at all (busy, shutting
    /// down): the packet is dropped and counted as "lost".
    #[error("upcall lost")]
    Lost,
}

/// The slow path as the datapath sees it.
pub trait Upcall {
    /// Classifies `key`: its datapath actions and the megaflow mask.
    fn upcall(&mut self, key: &FlowKey) -> Result<(DpActions, FlowMask), UpcallError>;

    /// [`Upcall::upcall`] at time `now_ms` of the worker's clock (what the
    /// datapath calls; the slow path's MAC learning needs the time).
    fn upcall_at(
        &mut self,
        key: &FlowKey,
        _now_ms: u64,
    ) -> Result<(DpActions, FlowMask), UpcallError> {
        self.upcall(key)
    }

    /// Called after each batch (between batches, on the worker's thread):
    /// the slow path may revalidate megaflows its own state change made
    /// stale (MAC learning). Returns how many megaflows it removed.
    fn after_batch(&mut self, _dp: &mut Datapath, _now_ms: u64) -> usize {
        0
    }
}

impl<F> Upcall for F
where
    F: FnMut(&FlowKey) -> Result<(DpActions, FlowMask), UpcallError>,
{
    fn upcall(&mut self, key: &FlowKey) -> Result<(DpActions, FlowMask), UpcallError> {
        self(key)
    }
}
