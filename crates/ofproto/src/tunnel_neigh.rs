//! The tunnels' neighbour table (OVS's `tnl-neigh-cache`): IP → MAC of
//! the underlay's next hops, learned by snooping ARP and neighbour
//! advertisements or set by hand, aged out when unconfirmed for the
//! aging time (`tnl/neigh/aging`, 900 s by default as in Open vSwitch).
//! Part of [`crate::tunnel`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A neighbour entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neigh {
    /// Its MAC.
    pub mac: [u8; 6],
    /// Set by hand (`tnl/neigh/set`): never replaced by snooping.
    pub fixed: bool,
    /// When it was learned or confirmed (ms).
    pub updated_ms: u64,
}

#[derive(Debug, Default)]
struct NeighTable {
    entries: BTreeMap<IpAddr, Neigh>,
    wanted: BTreeSet<IpAddr>,
}

/// The neighbour table. See the module documentation.
#[derive(Debug)]
pub struct Neighbours {
    table: Mutex<NeighTable>,
    generation: AtomicU64,
    /// How long a learned entry lives unconfirmed (ms).
    aging_ms: AtomicU64,
}

/// Open vSwitch's default aging time (`NEIGH_ENTRY_DEFAULT_IDLE_TIME`).
pub const DEFAULT_AGING_SECS: u64 = 900;

/// The longest aging time `tnl/neigh/aging` takes (OVS's limit).
pub const MAX_AGING_SECS: u64 = 3600;

/// A learned entry this close to its end is asked for again, so that an
/// answering neighbour never lapses (ms: three request rounds).
pub const REFRESH_BEFORE_MS: u64 = 3000;

impl Default for Neighbours {
    fn default() -> Self {
        Neighbours {
            table: Mutex::default(),
            generation: AtomicU64::new(0),
            aging_ms: AtomicU64::new(DEFAULT_AGING_SECS * 1000),
        }
    }
}

impl Neighbours {
    fn lock(&self) -> MutexGuard<'_, NeighTable> {
        // A translation that panicked with the lock held left a table
        // that is still whole (every change is one insert or remove).
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The MAC of `ip`, if known.
    pub fn lookup(&self, ip: IpAddr) -> Option<[u8; 6]> {
        self.lock().entries.get(&ip).map(|n| n.mac)
    }

    /// Learns (snooped) that `ip` is at `mac`; a hand-set entry stays.
    pub fn learn(&self, ip: IpAddr, mac: [u8; 6], now_ms: u64) {
        let mut t = self.lock();
        t.wanted.remove(&ip);
        let changed = match t.entries.get_mut(&ip) {
            Some(n) if n.fixed => false,
            Some(n) => {
                n.updated_ms = now_ms;
                std::mem::replace(&mut n.mac, mac) != mac
            }
            None => {
                t.entries.insert(
                    ip,
                    Neigh {
                        mac,
                        fixed: false,
                        updated_ms: now_ms,
                    },
                );
                true
            }
        };
        if changed {
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    /// Sets `ip` → `mac` by hand.
    pub fn set(&self, ip: IpAddr, mac: [u8; 6], now_ms: u64) {
        let mut t = self.lock();
        t.wanted.remove(&ip);
        t.entries.insert(
            ip,
            Neigh {
                mac,
                fixed: true,
                updated_ms: now_ms,
            },
        );
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Forgets every entry (`tnl/neigh/flush`).
    pub fn flush(&self) {
        self.lock().entries.clear();
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Notes that a translation needed `ip` and did not find it.
    pub fn want(&self, ip: IpAddr) {
        self.lock().wanted.insert(ip);
    }

    /// The addresses translations found missing since the last call.
    pub fn take_wanted(&self) -> Vec<IpAddr> {
        std::mem::take(&mut self.lock().wanted)
            .into_iter()
            .collect()
    }

    /// Every entry, by address.
    pub fn entries(&self) -> Vec<(IpAddr, Neigh)> {
        self.lock().entries.iter().map(|(a, n)| (*a, *n)).collect()
    }

    /// Changes with every entry learned, changed, set, flushed or aged
    /// out.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Bumps the generation (something translation reads changed).
    pub(crate) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The aging time in seconds (`tnl/neigh/aging`).
    pub fn aging_secs(&self) -> u64 {
        self.aging_ms.load(Ordering::Relaxed) / 1000
    }

    /// Sets the aging time: 1 to [`MAX_AGING_SECS`] seconds.
    pub fn set_aging_secs(&self, secs: u64) -> Result<(), String> {
        if !(1..=MAX_AGING_SECS).contains(&secs) {
            return Err(format!(
                "bad aging value {secs}: 1 to {MAX_AGING_SECS} seconds"
            ));
        }
        self.aging_ms.store(secs * 1000, Ordering::Relaxed);
        Ok(())
    }

    /// Ages the learned entries at `now_ms`: removes those unconfirmed
    /// for the aging time (the generation bumped if any went) and returns
    /// the addresses of those within [`REFRESH_BEFORE_MS`] of it, to ask
    /// for again. Entries set by hand stay.
    pub fn expire(&self, now_ms: u64) -> Vec<IpAddr> {
        let aging = self.aging_ms.load(Ordering::Relaxed);
        let mut t = self.lock();
        let n = t.entries.len();
        t.entries
            .retain(|_, e| e.fixed || now_ms < e.updated_ms.saturating_add(aging));
        let gone = t.entries.len() != n;
        let refresh = t
            .entries
            .iter()
            .filter(|(_, e)| {
                !e.fixed && now_ms + REFRESH_BEFORE_MS >= e.updated_ms.saturating_add(aging)
            })
            .map(|(ip, _)| *ip)
            .collect();
        drop(t);
        if gone {
            self.bump();
        }
        refresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn learned_entries_age_out_unless_confirmed_and_hand_set_ones_stay() {
        let n = Neighbours::default();
        assert_eq!(n.aging_secs(), DEFAULT_AGING_SECS);
        assert!(n.set_aging_secs(0).is_err());
        assert!(n.set_aging_secs(MAX_AGING_SECS + 1).is_err());
        n.set_aging_secs(10).unwrap();
        n.learn(ip("10.0.0.1"), [2, 0, 0, 0, 0, 1], 1_000);
        n.learn(ip("10.0.0.2"), [2, 0, 0, 0, 0, 2], 1_000);
        n.set(ip("10.0.0.3"), [2, 0, 0, 0, 0, 3], 1_000);
        // Far from the end: nothing to ask, nothing gone.
        assert!(n.expire(5_000).is_empty());
        // Within the refresh window: both learned ones are asked for.
        let g = n.generation();
        assert_eq!(n.expire(8_500), vec![ip("10.0.0.1"), ip("10.0.0.2")]);
        assert_eq!(n.generation(), g, "nothing went");
        // One answers (snooped again); the other does not.
        n.learn(ip("10.0.0.1"), [2, 0, 0, 0, 0, 1], 9_000);
        assert!(n.expire(11_000).is_empty());
        assert_eq!(n.lookup(ip("10.0.0.2")), None, "unconfirmed: gone");
        assert!(n.generation() > g);
        assert!(n.lookup(ip("10.0.0.1")).is_some());
        // The hand-set entry outlives any aging.
        n.expire(1_000_000);
        assert_eq!(n.lookup(ip("10.0.0.3")), Some([2, 0, 0, 0, 0, 3]));
        assert_eq!(n.lookup(ip("10.0.0.1")), None);
    }
}
