//! Frozen translations and their recirculation ids (OVS's "freezing").
//!
//! Where translation cannot go on without something only the datapath
//! knows — the L3 header of a packet a `pop_mpls` made IP again (never
//! parsed), or the packet's `dp_hash` that a select group picks its bucket
//! by — it stops ("freezes"): the datapath actions so far end with
//! `recirc(ID)` (after `hash(...)` for a group), and what translation still
//! had to do is kept here under ID: the actions left at every level of the
//! resubmit stack (innermost first), the action set, the `push`/`pop`
//! stack, the registers and metadata, the in_port. When the recirculated
//! packet misses the datapath's caches, its upcall carries `recirc_id` =
//! ID, and translation resumes ("thaws") from this state.
//!
//! Ids are given per distinct state (the same state gets the same id, so a
//! flow's megaflows stay the same across upcalls and revalidations), from
//! one process-wide table, as OVS's are per process: any bridge's tables
//! can thaw any id. Ids are 16 bits (they share a key word with in_port):
//! with 65,535 states kept, translation fails as OVS's does when it cannot
//! allocate one ("Failed to allocate recirculation id"). The live switch's
//! revalidator frees the states no megaflow needs any more, each round
//! ([`RecircTable::sweep`]); `flowpath run`, `bench` and `trace` keep theirs
//! (they end). Touched only by the slow path (one lock per freeze or thaw,
//! never per packet).

use crate::action::Action;
use flowpath_flow::key::Regs;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The most ids one process gives (the key holds 16 bits; 0 is "not
/// recirculated").
pub const MAX_RECIRC_IDS: usize = 0xffff;

/// The actions one level of the resubmit stack had left when translation
/// froze, with what they need to run as they would have.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Segment {
    /// The actions, the one that froze translation first when it is to run
    /// again (a select group, an action that reads L3 after `pop_mpls`).
    pub actions: Vec<Action>,
    /// The rule's `write_actions(...)` (for a `WriteActions` among them).
    pub write_set: Vec<Action>,
    /// The table the rule is in (a `resubmit` without a table uses it).
    pub table: u8,
}

/// Everything a frozen translation needs to go on.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct FrozenState {
    /// The actions left, innermost level first (run in this order).
    pub segments: Vec<Segment>,
    /// The OpenFlow action set.
    pub action_set: Vec<Action>,
    /// The `push`/`pop` stack.
    pub stack: Vec<u128>,
    /// Registers, `metadata`, `tun_id`.
    pub regs: Regs,
    /// The in_port the translation had (actions may have changed it).
    pub in_port: u32,
    /// The table a thaw without actions looks the packet up in.
    pub table: u8,
    /// Frozen by a `ct(table=N)`: the thawed pass sees the packet's
    /// `ct_*` fields (any other thaw sees them cleared, as OVS).
    pub conntracked: bool,
}

/// A table of frozen states by id. The process has one
/// ([`RecircTable::global`]); the functions of this module use it.
///
/// Ids are reclaimed by whoever sees every megaflow (the live switch's
/// revalidator): each round it calls [`RecircTable::begin_round`], dumps
/// the megaflows, and [`RecircTable::sweep`]s with the ids they name. A
/// state is freed when no dumped megaflow names its id and no translation
/// has given or thawed it since the previous round began: a translation
/// under way while a round begins (an upcall whose megaflow lands after
/// a PMD's dump, a packet-out whose packet-in is not yet encoded with its
/// continuation) keeps its state through that round. A freed id is given
/// again only after one more round.
#[derive(Default)]
pub struct RecircTable {
    inner: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    ids: HashMap<Arc<FrozenState>, u32>,
    /// By id - 1: the state (None: freed) and the round it was last given
    /// or thawed in.
    states: Vec<(Option<Arc<FrozenState>>, u64)>,
    /// Freed ids and the round they were freed in.
    free: Vec<(u32, u64)>,
    live: usize,
    round: u64,
}

impl RecircTable {
    /// The process's table.
    pub fn global() -> &'static RecircTable {
        static T: OnceLock<RecircTable> = OnceLock::new();
        T.get_or_init(RecircTable::default)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The id of `state`: the one it already has, or a new one; `None`
    /// when every id is taken.
    pub fn alloc(&self, state: FrozenState) -> Option<u32> {
        let mut t = self.lock();
        let round = t.round;
        if let Some(&id) = t.ids.get(&state) {
            if let Some(e) = t.states.get_mut(id as usize - 1) {
                e.1 = round;
            }
            return Some(id);
        }
        let state = Arc::new(state);
        // A freed id once a round has passed since (nothing can name it
        // any more), else a new one.
        let reuse = t.free.iter().position(|&(_, r)| r < round);
        let id = match reuse {
            Some(i) => {
                let (id, _) = t.free.swap_remove(i);
                t.states[id as usize - 1] = (Some(Arc::clone(&state)), round);
                id
            }
            None if t.states.len() < MAX_RECIRC_IDS => {
                t.states.push((Some(Arc::clone(&state)), round));
                t.states.len() as u32
            }
            None => return None,
        };
        t.ids.insert(state, id);
        t.live += 1;
        Some(id)
    }

    /// The state frozen under `id`, if any.
    pub fn find(&self, id: u32) -> Option<Arc<FrozenState>> {
        let mut t = self.lock();
        let round = t.round;
        let e = t
            .states
            .get_mut(usize::try_from(id).ok()?.checked_sub(1)?)?;
        e.1 = round;
        e.0.clone()
    }

    /// How many states are kept.
    pub fn count(&self) -> usize {
        self.lock().live
    }

    /// Starts a reclaiming round; returns it (for [`RecircTable::sweep`]).
    pub fn begin_round(&self) -> u64 {
        let mut t = self.lock();
        t.round += 1;
        t.round
    }

    /// Frees the states that no id of `in_use` names and that were not
    /// given or thawed since the round before `round` began; returns how
    /// many.
    pub fn sweep(&self, in_use: &std::collections::HashSet<u32>, round: u64) -> usize {
        let mut t = self.lock();
        let now = t.round;
        let mut freed = Vec::new();
        for (i, e) in t.states.iter_mut().enumerate() {
            let id = i as u32 + 1;
            if e.0.is_some() && e.1 + 1 < round && !in_use.contains(&id) {
                if let Some(st) = e.0.take() {
                    freed.push((id, st));
                }
            }
        }
        for (id, st) in &freed {
            t.ids.remove(st);
            t.free.push((*id, now));
        }
        t.live -= freed.len();
        freed.len()
    }
}

/// [`RecircTable::alloc`] on the process's table.
pub fn alloc(state: FrozenState) -> Option<u32> {
    RecircTable::global().alloc(state)
}

/// [`RecircTable::find`] on the process's table.
pub fn find(id: u32) -> Option<Arc<FrozenState>> {
    RecircTable::global().find(id)
}

/// [`RecircTable::count`] on the process's table.
pub fn count() -> usize {
    RecircTable::global().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(port: u32) -> FrozenState {
        FrozenState {
            conntracked: false,
            segments: vec![Segment {
                actions: vec![Action::Output(2)],
                write_set: vec![],
                table: 0,
            }],
            action_set: vec![],
            stack: vec![],
            regs: Regs::zero(),
            in_port: port,
            table: 0,
        }
    }

    #[test]
    fn unused_states_are_swept_and_their_ids_given_again_a_round_later() {
        let t = RecircTable::default();
        let (a, b) = (t.alloc(state(1)).unwrap(), t.alloc(state(2)).unwrap());
        assert_eq!(t.count(), 2);
        // A round: the dump names a; b was given before the round began
        // (kept through it: its translation may still be under way).
        let r = t.begin_round();
        let in_use: std::collections::HashSet<u32> = [a].into_iter().collect();
        assert_eq!(t.sweep(&in_use, r), 0);
        assert!(
            t.find(b).is_some(),
            "b kept through the round it was given before"
        );
        // The next round: b was neither named nor thawed since the
        // previous round began (a is named again).
        t.begin_round();
        let r = t.begin_round();
        assert_eq!(t.sweep(&in_use, r), 1);
        assert!(t.find(b).is_none(), "b freed");
        assert_eq!(t.find(a).unwrap().in_port, 1);
        assert_eq!(t.count(), 1);
        // Not given again in the round it was freed in...
        let c = t.alloc(state(3)).unwrap();
        assert_ne!(c, b);
        // ... but after the next one; a state given or thawed since the
        // round began stays though no dump names it.
        let r = t.begin_round();
        let d = t.alloc(state(4)).unwrap();
        assert_eq!(d, b, "the freed id comes back");
        assert_eq!(t.find(d).unwrap().in_port, 4);
        assert_eq!(t.alloc(state(2)), t.alloc(state(2)), "same state, same id");
        t.find(c);
        assert_eq!(
            t.sweep(&std::collections::HashSet::new(), r),
            0,
            "a was named last round"
        );
        let r = t.begin_round();
        t.find(c);
        t.find(d);
        assert_eq!(t.sweep(&std::collections::HashSet::new(), r), 1, "only a");
        assert!(t.find(a).is_none());
        assert!(t.find(c).is_some() && t.find(d).is_some());
    }

    #[test]
    fn same_state_same_id_and_found_again() {
        // Other tests of this process share the table: use states of
        // their own (in_ports no other test uses).
        let a = alloc(state(60_001)).unwrap();
        let b = alloc(state(60_002)).unwrap();
        assert_ne!(a, b);
        assert_eq!(alloc(state(60_001)), Some(a));
        assert_eq!(find(a).unwrap().in_port, 60_001);
        assert_eq!(find(b).unwrap().in_port, 60_002);
        assert!(find(0).is_none());
        assert!(count() >= 2);
    }
}
