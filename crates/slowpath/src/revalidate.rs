//! Revalidation: the one test that keeps or deletes an installed megaflow.
//!
//! What: [`recheck`] translates a megaflow's key again against the current
//! rule tables and says whether the megaflow may stay: the translation
//! must succeed with the same actions and a mask that needs no bit the
//! installed mask lacks — then, by the megaflow invariant, every packet it
//! covers still gets its actions. The idle-expiry test is the datapath's
//! [`flowpath_datapath::dump::idle_expired`]. [`revalidate`] and [`revalidate_where`] apply `recheck` to a
//! datapath in place (`flowpath run`, the bench, a worker's own MAC and
//! learned-flow changes); the switch's revalidator thread applies the same
//! `recheck` and `idle_expired` to the megaflows the PMDs dump
//! ([`flowpath_datapath::Datapath::dump`]) and sends the deletions back.
//!
//! Why one module: the keep/delete decision must be the same wherever it
//! is taken, or a megaflow kept by one path would be removed by the other.
//!
//! Threads: plain functions; between batches or off the PMDs (they
//! translate, which allocates).

use flowpath_datapath::{Datapath, Megaflow, MegaflowRef};
use flowpath_flow::{FlowKey, FlowMask};
use flowpath_odp::DpAction;
use flowpath_ofproto::normal::Bridge;
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::{xlate_on, Xlate, XlateMode};

/// Translates `key` (a megaflow's masked key) again against `tables` and
/// says whether the megaflow with `mask` and `actions` may stay, with the
/// translation (its [`Xlate::rules`] are filled when `mode.record`).
pub fn recheck(
    tables: &RuleTables,
    bridge: Option<&Bridge>,
    key: &FlowKey,
    mask: &FlowMask,
    actions: &[DpAction],
    now_ms: u64,
    mode: XlateMode,
) -> (bool, Xlate) {
    let x = match hashed_key(key, mask) {
        Some(k) => xlate_on(tables, bridge, &k, now_ms, mode),
        None => xlate_on(tables, bridge, key, now_ms, mode),
    };
    let keep = x.error.is_none() && x.actions[..] == actions[..] && x.megaflow.is_subset_of(mask);
    (keep, x)
}

/// Re-checks every live megaflow of `dp` against `tables` and removes those
/// whose translation changed: a megaflow is kept only if translating its
/// (masked) key succeeds with the same actions and a mask that needs no bit
/// the installed mask lacks — then, by the megaflow invariant, every packet
/// it covers still gets its actions. Returns how many were removed.
/// Between batches only (allocates).
pub fn revalidate(dp: &mut Datapath, tables: &RuleTables) -> usize {
    revalidate_where(dp, tables, None, 0, |_| true)
}

/// [`revalidate`] of the megaflows `which` selects, with `bridge`'s
/// `NORMAL` state at `now_ms` (no learning).
pub fn revalidate_where(
    dp: &mut Datapath,
    tables: &RuleTables,
    bridge: Option<&Bridge>,
    now_ms: u64,
    which: impl Fn(&Megaflow<'_>) -> bool,
) -> usize {
    let refs: Vec<MegaflowRef> = dp.megaflows().live_refs().collect();
    let mut removed = 0;
    for r in refs {
        let keep = dp.megaflow(r).is_none_or(|m| {
            if !which(&m) {
                return true;
            }
            let mode = XlateMode::default();
            recheck(tables, bridge, &m.key, &m.mask, m.actions, now_ms, mode).0
        });
        if !keep && dp.remove_megaflow(r) {
            removed += 1;
        }
    }
    removed
}

/// A megaflow after recirculation that reads some bits of the datapath
/// hash, all 0 (the hash's slot 0), holds packets whose hash is not 0 (the
/// datapath never hashes to 0, which means "not hashed yet"): its key with
/// the lowest bit the mask leaves out set translates as those packets
/// did. `None` for every other key.
fn hashed_key(key: &FlowKey, mask: &FlowMask) -> Option<FlowKey> {
    let m = mask.to_key().dp_hash();
    if key.recirc_id() == 0 || key.dp_hash() != 0 || m == 0 || m == u32::MAX {
        return None;
    }
    let mut k = *key;
    let free = !m;
    k.set_dp_hash(free & free.wrapping_neg());
    Some(k)
}
