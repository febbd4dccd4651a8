//! Per-zone connection limits (`dpctl/ct-set-limits`,
//! `dpctl/ct-get-limits`, `dpctl/ct-del-limits`).
//!
//! What: every zone has a connection count; a zone may have its own
//! limit, and the *default* limit applies to each zone that has none.
//! A limit of 0 means unlimited (the default limit starts at 0). A commit
//! in a zone at its limit fails: the packet stays `+new` (untracked
//! connection) and the refusal is counted.
//!
//! Why shaped so: the check runs on the packet path when a connection is
//! committed, so it is two atomic loads and one compare-and-swap in flat
//! arrays indexed by zone (65,536 zones: 768 KiB per tracker), no lock.
//!
//! Difference from Open vSwitch 3.1: there, zones without their own limit
//! share one count under the default limit; here each zone is counted on
//! its own (as the kernel datapath and the documentation describe), and a
//! zone counts all its connections, including those committed before a
//! limit was set.
//!
//! Invariants: `count[z]` equals the number of connections in the table
//! committed in zone `z` (incremented by [`ZoneLimits::admit`], decremented
//! by [`ZoneLimits::release`] once per removed connection).
//! Thread-safety: all atomics; any thread may call any method.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const NONE: u64 = u64::MAX;
const N_ZONES: usize = 1 << 16;

/// The zone limits and counts.
pub struct ZoneLimits {
    default: AtomicU32,
    limit: Box<[AtomicU64]>,
    count: Box<[AtomicU32]>,
}

impl Default for ZoneLimits {
    fn default() -> Self {
        ZoneLimits::new()
    }
}

impl ZoneLimits {
    /// No limits, all counts zero.
    pub fn new() -> ZoneLimits {
        ZoneLimits {
            default: AtomicU32::new(0),
            limit: (0..N_ZONES).map(|_| AtomicU64::new(NONE)).collect(),
            count: (0..N_ZONES).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// The default limit (0 = unlimited).
    pub fn default_limit(&self) -> u32 {
        self.default.load(Ordering::Relaxed)
    }

    /// Sets the default limit.
    pub fn set_default(&self, limit: u32) {
        self.default.store(limit, Ordering::Relaxed);
    }

    /// Sets zone `zone`'s own limit.
    pub fn set(&self, zone: u16, limit: u32) {
        if let Some(l) = self.limit.get(usize::from(zone)) {
            l.store(u64::from(limit), Ordering::Relaxed);
        }
    }

    /// Removes zone `zone`'s own limit (the default applies again).
    pub fn del(&self, zone: u16) {
        if let Some(l) = self.limit.get(usize::from(zone)) {
            l.store(NONE, Ordering::Relaxed);
        }
    }

    /// Zone `zone`'s own limit, if it has one.
    pub fn own(&self, zone: u16) -> Option<u32> {
        let v = self.limit.get(usize::from(zone))?.load(Ordering::Relaxed);
        u32::try_from(v).ok()
    }

    /// The limit in force for `zone` (0 = unlimited).
    pub fn effective(&self, zone: u16) -> u32 {
        self.own(zone).unwrap_or_else(|| self.default_limit())
    }

    /// Zone `zone`'s connection count.
    pub fn count(&self, zone: u16) -> u32 {
        self.count
            .get(usize::from(zone))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Counts one more connection in `zone` unless it is at its limit.
    pub fn admit(&self, zone: u16) -> bool {
        let limit = self.effective(zone);
        let Some(c) = self.count.get(usize::from(zone)) else {
            return false;
        };
        c.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
            (limit == 0 || n < limit).then_some(n.saturating_add(1))
        })
        .is_ok()
    }

    /// Counts one connection of `zone` out.
    pub fn release(&self, zone: u16) {
        if let Some(c) = self.count.get(usize::from(zone)) {
            let _ = c.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }

    /// `(zone, own limit, count)` for every zone with its own limit, by zone.
    pub fn list(&self) -> Vec<(u16, u32, u32)> {
        (0..=u16::MAX)
            .filter_map(|z| self.own(z).map(|l| (z, l, self.count(z))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_own_limits() {
        let z = ZoneLimits::new();
        assert!(z.admit(5) && z.admit(5));
        z.set_default(3);
        assert!(z.admit(5));
        assert!(!z.admit(5), "zone 5 at the default limit");
        assert!(z.admit(6), "zones are counted separately");
        z.set(5, 10);
        assert!(z.admit(5));
        assert_eq!(z.list(), vec![(5, 10, 4)]);
        z.del(5);
        assert!(!z.admit(5));
        z.release(5);
        assert_eq!(z.count(5), 3);
        assert!(!z.admit(5));
        z.release(5);
        assert!(z.admit(5));
        z.set(7, 0);
        assert_eq!(z.effective(7), 0);
        for _ in 0..5 {
            assert!(z.admit(7), "explicit 0 = unlimited");
        }
    }
}
