//! Duplicate address detection (RFC 4862, section 5.4) for the IPv6
//! endpoint addresses flowpath owns on its `--underlay`.
//!
//! What: a live switch starts its IPv6 endpoint addresses tentative; the
//! neighbour thread sends one neighbour solicitation from `::` for each
//! (`DupAddrDetectTransmits` 1) and, a second later (`RetransTimer`),
//! makes the address usable unless translation saw, meanwhile, a
//! neighbour advertisement for it or another node's solicitation from
//! `::` for it (that node's own detection). A tentative address is not
//! answered for and takes no tunnel packets; a duplicate one never does,
//! and the switch says so in its log and drops the address and its
//! routes. Addresses of the kernel (a `br-phy`-style underlay) are the
//! kernel's to check; `flowpath trace` has no detection (its addresses
//! are usable from the start).
//!
//! A usable address is defended: another node's solicitation from `::`
//! for it (that node's detection) is answered, as RFC 4861 asks, by an
//! advertisement to all nodes carrying the address's link-layer address,
//! which the neighbour thread sends within a tenth of a second (the
//! solicitation has no room for the option, so translation only queues
//! the address: [`Dad::defend`]).
//! Part of [`crate::tunnel`].

use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// How long after its solicitation a tentative address becomes usable
/// (RFC 4861's `RetransTimer`).
pub const DAD_WAIT_MS: u64 = 1000;

/// An address under detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DadState {
    /// Not yet usable: its solicitation not sent (`None`) or sent then.
    Tentative(Option<u64>),
    /// Another node has it.
    Duplicate,
}

/// The addresses under detection or found duplicate (a usable address
/// is not listed).
#[derive(Debug, Default)]
pub struct Dad {
    /// Any listed: the lock is taken only then.
    any: AtomicBool,
    addrs: Mutex<Vec<(Ipv6Addr, DadState)>>,
    /// Usable addresses another node is detecting: to be defended.
    defend: Mutex<Vec<Ipv6Addr>>,
}

impl Dad {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Ipv6Addr, DadState)>> {
        self.addrs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts detection for `addrs`: each tentative, unprobed.
    pub fn begin(&self, addrs: impl IntoIterator<Item = Ipv6Addr>) {
        let mut v = self.lock();
        for a in addrs {
            if !v.iter().any(|(b, _)| *b == a) {
                v.push((a, DadState::Tentative(None)));
            }
        }
        self.any.store(!v.is_empty(), Ordering::Release);
    }

    /// Whether `ip` may be used (neither tentative nor duplicate).
    pub fn usable(&self, ip: IpAddr) -> bool {
        let IpAddr::V6(ip) = ip else {
            return true;
        };
        !self.any.load(Ordering::Acquire) || !self.lock().iter().any(|(a, _)| *a == ip)
    }

    /// Whether `ip` is tentative.
    pub fn tentative(&self, ip: Ipv6Addr) -> bool {
        self.any.load(Ordering::Acquire)
            && self
                .lock()
                .iter()
                .any(|(a, s)| *a == ip && matches!(s, DadState::Tentative(_)))
    }

    /// Another node uses tentative `ip`: it is a duplicate. Whether that
    /// changed anything.
    pub fn conflict(&self, ip: Ipv6Addr) -> bool {
        let mut v = self.lock();
        match v.iter_mut().find(|(a, _)| *a == ip) {
            Some((_, s @ DadState::Tentative(_))) => {
                *s = DadState::Duplicate;
                true
            }
            _ => false,
        }
    }

    /// One round at `now_ms`: the addresses whose solicitation is to be
    /// sent now (marked sent), and those that became usable (unlisted).
    pub fn tick(&self, now_ms: u64) -> (Vec<Ipv6Addr>, Vec<Ipv6Addr>) {
        if !self.any.load(Ordering::Acquire) {
            return (Vec::new(), Vec::new());
        }
        let mut v = self.lock();
        let mut probe = Vec::new();
        let mut ready = Vec::new();
        v.retain_mut(|(a, s)| match s {
            DadState::Tentative(None) => {
                *s = DadState::Tentative(Some(now_ms));
                probe.push(*a);
                true
            }
            DadState::Tentative(Some(t)) if now_ms.saturating_sub(*t) >= DAD_WAIT_MS => {
                ready.push(*a);
                false
            }
            _ => true,
        });
        self.any.store(!v.is_empty(), Ordering::Release);
        (probe, ready)
    }

    /// Another node is detecting usable `ip`: queues an advertisement
    /// defending it (once however many solicitations arrive before it
    /// goes).
    pub fn defend(&self, ip: Ipv6Addr) {
        let mut v = self.defend.lock().unwrap_or_else(|e| e.into_inner());
        if !v.contains(&ip) {
            v.push(ip);
        }
    }

    /// The addresses to defend now (the queue emptied).
    pub fn take_defend(&self) -> Vec<Ipv6Addr> {
        std::mem::take(&mut *self.defend.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The addresses found duplicate.
    pub fn duplicates(&self) -> Vec<Ipv6Addr> {
        self.lock()
            .iter()
            .filter(|(_, s)| *s == DadState::Duplicate)
            .map(|(a, _)| *a)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_usable_after_its_wait_unless_contested() {
        let d = Dad::default();
        let (a, b): (Ipv6Addr, Ipv6Addr) =
            ("fd00::100".parse().unwrap(), "fd00::200".parse().unwrap());
        assert!(d.usable(IpAddr::V6(a)), "nothing under detection");
        d.begin([a, b]);
        assert!(!d.usable(IpAddr::V6(a)) && d.tentative(a));
        assert!(
            d.usable("172.31.1.1".parse().unwrap()),
            "IPv4 is not detected"
        );
        assert_eq!(d.tick(10), (vec![a, b], vec![]), "both probed");
        assert_eq!(d.tick(500), (vec![], vec![]));
        assert!(d.conflict(b));
        assert!(!d.conflict(b), "once");
        assert_eq!(d.tick(1010), (vec![], vec![a]));
        assert!(d.usable(IpAddr::V6(a)) && !d.tentative(a));
        assert!(!d.conflict(a), "a usable address is not taken back");
        assert!(!d.usable(IpAddr::V6(b)) && !d.tentative(b));
        assert_eq!(d.duplicates(), vec![b]);
    }
}
