//! One tracked connection: its record, as it lives in a slot of the
//! table's slab (`slab.rs`), and the state its lock guards.
//!
//! Why its own file: the record's layout (128 bytes, two cache lines) is
//! what a connection costs; `table.rs` is the index that finds it.

use crate::key::ConnKey;
use crate::proto::L4;
use crate::Alg;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// NAT action bits of a connection.
pub mod nat_bits {
    /// Source address translated.
    pub const SRC: u8 = 0x01;
    /// Source port translated.
    pub const SRC_PORT: u8 = 0x02;
    /// Destination address translated.
    pub const DST: u8 = 0x04;
    /// Destination port translated.
    pub const DST_PORT: u8 = 0x08;
}

/// The mutable part of a connection, under its lock.
#[derive(Clone, Copy, Debug)]
pub struct ConnMut {
    /// ct_mark.
    pub mark: u32,
    /// ct_label, as two words (not a `u128`: its 16-byte alignment would
    /// grow every connection by a cache line's quarter).
    label: [u64; 2],
    /// Protocol state.
    pub l4: L4,
}

impl ConnMut {
    /// ct_label.
    #[inline]
    pub fn label(&self) -> u128 {
        (u128::from(self.label[1]) << 64) | u128::from(self.label[0])
    }

    /// Sets ct_label.
    #[inline]
    pub fn set_label(&mut self, v: u128) {
        self.label = [v as u64, (v >> 64) as u64];
    }
}

/// What only some connections have, kept out of line.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    /// The reply tuple, when NAT made it other than the original reversed.
    rev: Option<ConnKey>,
    /// The control connection's tuple, for a connection an ALG expected.
    parent: Option<ConnKey>,
}

/// Bit of a stored handle: the connection was removed.
pub(crate) const DEAD: u64 = 1 << 63;

/// One tracked connection (128 bytes: two cache lines).
#[derive(Debug)]
pub struct Conn {
    /// Original-direction tuple.
    pub key: ConnKey,
    /// NAT applied to the original direction ([`nat_bits`]).
    pub nat_action: u8,
    /// Helper (ALG) of the connection.
    pub alg: Option<Alg>,
    /// The NAT'd reply tuple and the ALG parent, if any.
    pub(crate) extra: Option<Box<Extra>>,
    /// Handle (slot, shard, generation; [`DEAD`] once removed); 0 until
    /// inserted. Read it with [`Conn::handle`].
    pub(crate) handle: AtomicU64,
    /// Expiry time in ms; 0 = force-expired.
    pub expiration: AtomicU64,
    /// Mark, label and protocol state.
    pub state: Mutex<ConnMut>,
}

impl Conn {
    /// A new connection record (not yet in a table) with original tuple
    /// `key` and reply tuple `rev_key`.
    pub fn new(key: ConnKey, rev_key: ConnKey, l4: L4, expiration: u64) -> Conn {
        let extra = (rev_key != key.reverse()).then(|| {
            Box::new(Extra {
                rev: Some(rev_key),
                parent: None,
            })
        });
        Conn {
            key,
            nat_action: 0,
            alg: None,
            extra,
            handle: AtomicU64::new(0),
            expiration: AtomicU64::new(expiration),
            state: Mutex::new(ConnMut {
                mark: 0,
                label: [0; 2],
                l4,
            }),
        }
    }

    /// The reply-direction tuple (after NAT).
    #[inline]
    pub fn rev_key(&self) -> ConnKey {
        match self.extra.as_ref().and_then(|x| x.rev) {
            Some(r) => r,
            None => self.key.reverse(),
        }
    }

    /// Whether the reply tuple is other than the original reversed (NAT).
    #[inline]
    pub fn natted(&self) -> bool {
        self.extra.as_ref().is_some_and(|x| x.rev.is_some())
    }

    /// The control connection's tuple, for a connection an ALG expected.
    pub fn parent(&self) -> Option<&ConnKey> {
        self.extra.as_ref().and_then(|x| x.parent.as_ref())
    }

    /// Records the control connection an ALG expectation names.
    pub fn set_parent(&mut self, p: ConnKey) {
        self.extra.get_or_insert_with(Box::default).parent = Some(p);
    }

    /// The handle the datapath keeps between recirculations (0 for a
    /// connection not in a table or removed from it).
    #[inline]
    pub fn handle(&self) -> u64 {
        let h = self.handle.load(Ordering::Relaxed);
        if h & DEAD != 0 {
            0
        } else {
            h
        }
    }

    /// Whether the connection's time is up.
    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expiration.load(Ordering::Relaxed)
    }

    /// Makes the connection expire now (it stays in the table until swept
    /// or replaced; lookups no longer see it).
    pub fn force_expire(&self) {
        self.expiration.store(0, Ordering::Relaxed);
    }

    /// Locks the mutable state.
    pub fn lock(&self) -> MutexGuard<'_, ConnMut> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Which of the connection's tuples `k` is: `Some(false)` the
    /// original, `Some(true)` the reply, `None` neither. `kind`: the
    /// kind of the entry `k` was found through ([`crate::table::KIND_BOTH`], ...).
    #[inline(always)]
    pub(crate) fn owns(&self, k: &ConnKey, kind: u32) -> Option<bool> {
        if kind == crate::table::KIND_REPLY {
            return self
                .extra
                .as_ref()
                .and_then(|x| x.rev)
                .filter(|r| r == k)
                .map(|_| true);
        }
        if self.key == *k {
            return Some(false);
        }
        (kind == crate::table::KIND_BOTH && self.key.is_reverse_of(k)).then_some(true)
    }
}
