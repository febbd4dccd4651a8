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
//! can thaw any id. Ids are 16 bits (they share a key word with in_port)
//! and are not reclaimed: after 65,535 distinct states, translation fails
//! as OVS's does when it cannot allocate one ("Failed to allocate
//! recirculation id"). Touched only by the slow path (one lock per freeze
//! or thaw, never per packet).

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
}

#[derive(Default)]
struct Table {
    ids: HashMap<Arc<FrozenState>, u32>,
    states: Vec<Arc<FrozenState>>,
}

fn table() -> &'static Mutex<Table> {
    static T: OnceLock<Mutex<Table>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(Table::default()))
}

/// The id of `state`: the one it already has, or a new one; `None` when
/// every id is taken.
pub fn alloc(state: FrozenState) -> Option<u32> {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&id) = t.ids.get(&state) {
        return Some(id);
    }
    if t.states.len() >= MAX_RECIRC_IDS {
        return None;
    }
    let state = Arc::new(state);
    t.states.push(Arc::clone(&state));
    let id = t.states.len() as u32;
    t.ids.insert(state, id);
    Some(id)
}

/// The state frozen under `id`, if any.
pub fn find(id: u32) -> Option<Arc<FrozenState>> {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    let i = usize::try_from(id).ok()?.checked_sub(1)?;
    t.states.get(i).cloned()
}

/// How many ids have been given (for `dpif/show`-style statistics).
pub fn count() -> usize {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .states
        .len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(port: u32) -> FrozenState {
        FrozenState {
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
