//! Where connections live: an array of fixed 128-byte slots in chunks
//! that never move.
//!
//! What: slot `i` is found through the slab's chunk directory
//! (chunk 0 holds slots `0..BASE`, chunk `k ≥ 1` the `BASE << (k - 1)`
//! slots from `BASE << (k - 1)` on), so the slots of a growing table are
//! allocated a chunk at a time, each twice the last, and a slot's address
//! never changes while the table lives. A connection is written into a
//! free slot in place: no allocation per connection, no allocator header,
//! and the index refers to it by a 32-bit slot number instead of a
//! pointer.
//!
//! Why: the record and its index entries are all a connection costs; a
//! separately allocated, reference-counted record (the previous form)
//! added an allocator header, two counts and a 16-byte slot pointing at
//! it, and an allocation per new connection.
//!
//! Memory: chunks come from the allocator zeroed (`calloc`): the pages of
//! a large chunk's tail that no connection has used yet are not resident.
//!
//! Invariants: slots `0..len` hold an initialised connection each (live
//! or removed and not yet reused); slots from `len` on were never
//! written. A chunk pointer, once published, stays valid until the slab
//! is dropped.
//!
//! Safety: the slots are `UnsafeCell`s written only by the table's single
//! writer (under its writer lock) while no reader can reach them — a
//! fresh slot, or a freed one whose removal every reader pinned before it
//! has since left (epoch-based reclamation in `table.rs`); the one field a
//! stale reader may still read, the handle, is only ever accessed
//! atomically.

#![allow(unsafe_code)]

use crate::conn::Conn;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Slots of chunk 0 (4 KiB of 128-byte slots).
const BASE: usize = 32;
/// Chunks in a directory: enough for 2^32 slots.
const CHUNKS: usize = 28;

/// One slot: a connection's storage, a whole number of cache lines.
#[repr(C, align(64))]
pub(crate) struct Slot(UnsafeCell<MaybeUninit<Conn>>);

// (A connection is 128 bytes on 64-bit Linux: two cache lines. Checked
// where it matters, the memory per connection; elsewhere it only has to
// fit some whole number of lines.)
#[cfg(all(target_pointer_width = "64", target_os = "linux"))]
const _: () = assert!(std::mem::size_of::<Slot>() == 128);

/// Bytes of one slot.
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// The chunk and offset of slot `i`.
#[inline(always)]
fn locate(i: usize) -> (usize, usize) {
    if i < BASE {
        (0, i)
    } else {
        let k = (usize::BITS - 1 - (i / BASE).leading_zeros()) as usize + 1;
        (k, i - (BASE << (k - 1)))
    }
}

/// Slots of chunk `k`.
fn chunk_len(k: usize) -> usize {
    if k == 0 {
        BASE
    } else {
        BASE << (k - 1)
    }
}

/// The table's connection storage.
pub(crate) struct Slab {
    chunks: [AtomicPtr<Slot>; CHUNKS],
    /// Slots handed out so far (initialised); published after the slot.
    len: AtomicUsize,
}

impl Slab {
    pub(crate) fn new() -> Slab {
        Slab {
            chunks: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            len: AtomicUsize::new(0),
        }
    }

    /// Slots handed out so far.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// The address of slot `i` if its chunk exists (the slot itself may be
    /// unwritten: see [`Slab::len`]).
    #[inline(always)]
    fn slot_ptr(&self, i: usize) -> Option<*mut Conn> {
        let (k, off) = locate(i);
        let c = self.chunks.get(k)?.load(Ordering::Acquire);
        if c.is_null() {
            return None;
        }
        // SAFETY: chunk `k` is an array of `chunk_len(k)` slots and
        // `off < chunk_len(k)` by `locate`; the pointer stays in it.
        let s = unsafe { c.add(off) };
        // SAFETY: `s` points into a live chunk (see above).
        Some(unsafe { (*s).0.get() }.cast::<Conn>())
    }

    /// The connection in slot `i`, if the slot was ever written.
    ///
    /// # Safety
    ///
    /// The caller reads through the reference only what the slot's
    /// current occupant guarantees: its handle at any time (atomically),
    /// anything else only while the connection is reachable to it (found
    /// through the index or a matching handle while pinned).
    #[inline(always)]
    pub(crate) unsafe fn get(&self, i: usize) -> Option<&Conn> {
        if i >= self.len() {
            return None;
        }
        // SAFETY: `i < len`: the slot was initialised (published by the
        // release store of `len`, read by the acquire above).
        self.slot_ptr(i).map(|p| unsafe { &*p })
    }

    /// The handle word of slot `i` (0 for a never-used slot), without
    /// touching the rest of the slot.
    #[inline(always)]
    pub(crate) fn handle_of(&self, i: usize) -> Option<&AtomicU64> {
        if i >= self.len() {
            return None;
        }
        let p = self.slot_ptr(i)?;
        // SAFETY: an initialised slot's handle field; only ever accessed
        // atomically, so this shared reference races with no write.
        Some(unsafe { &*std::ptr::addr_of!((*p).handle) })
    }

    /// Prefetches slot `i`'s two cache lines (a hint).
    #[inline(always)]
    pub(crate) fn prefetch(&self, i: usize) {
        if let Some(p) = self.slot_ptr(i) {
            let p = p.cast::<u8>().cast_const();
            crate::table::prefetch_ptr(p);
            crate::table::prefetch_ptr(p.wrapping_add(64));
        }
    }

    /// Writes `conn` into slot `i` with handle `handle`, growing the slab
    /// by a chunk if needed (`i` is `len` for a fresh slot, or a freed
    /// slot below it). `None`: out of memory.
    ///
    /// # Safety
    ///
    /// The caller is the table's writer (holds its writer lock), and slot
    /// `i` is fresh or freed: no reader can reach its occupant any more.
    pub(crate) unsafe fn put(&self, i: usize, conn: Conn, handle: u64) -> Option<&Conn> {
        let (k, _) = locate(i);
        let chunk = self.chunks.get(k)?;
        if chunk.load(Ordering::Acquire).is_null() {
            let layout = Layout::array::<Slot>(chunk_len(k)).ok()?;
            // SAFETY: the layout has a non-zero size (BASE > 0 slots).
            let p = unsafe { alloc_zeroed(layout) }.cast::<Slot>();
            if p.is_null() {
                return None;
            }
            chunk.store(p, Ordering::Release);
        }
        let fresh = i >= self.len.load(Ordering::Relaxed);
        let p = self.slot_ptr(i)?;
        let Conn {
            key,
            nat_action,
            alg,
            extra,
            handle: _,
            expiration,
            state,
        } = conn;
        // SAFETY: by the contract no reader reaches the slot's occupant,
        // and the writer lock keeps other writers out: the non-atomic
        // fields are this thread's to drop and write. The handle field is
        // left to atomic stores (a reader holding a stale handle may be
        // comparing it). A fresh slot is zeroed memory: its old fields
        // are not dropped (there are none; a zero handle is a valid
        // `AtomicU64`).
        unsafe {
            if !fresh {
                std::ptr::addr_of_mut!((*p).extra).drop_in_place();
                std::ptr::addr_of_mut!((*p).state).drop_in_place();
            }
            std::ptr::addr_of_mut!((*p).key).write(key);
            std::ptr::addr_of_mut!((*p).nat_action).write(nat_action);
            std::ptr::addr_of_mut!((*p).alg).write(alg);
            std::ptr::addr_of_mut!((*p).extra).write(extra);
            std::ptr::addr_of_mut!((*p).expiration).write(expiration);
            std::ptr::addr_of_mut!((*p).state).write(state);
        }
        // SAFETY: every field is initialised now; the handle is published
        // last, with release, so a reader that matches it sees the rest.
        let c = unsafe { &*p };
        c.handle.store(handle, Ordering::Release);
        if fresh {
            self.len.store(i + 1, Ordering::Release);
        }
        Some(c)
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        let len = *self.len.get_mut();
        for i in 0..len {
            if let Some(p) = self.slot_ptr(i) {
                // SAFETY: `&mut self`: no reader; slots below `len` hold an
                // initialised connection, dropped once, here.
                unsafe { p.drop_in_place() };
            }
        }
        for (k, c) in self.chunks.iter_mut().enumerate() {
            let p = *c.get_mut();
            if p.is_null() {
                continue;
            }
            if let Ok(layout) = Layout::array::<Slot>(chunk_len(k)) {
                // SAFETY: allocated in `put` with this very layout, freed
                // once, here.
                unsafe { dealloc(p.cast(), layout) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_map_to_chunks_without_gaps_or_overlaps() {
        let mut next = (0usize, 0usize);
        for i in 0..(BASE << 6) {
            let (k, off) = locate(i);
            assert_eq!((k, off), next, "slot {i}");
            assert!(off < chunk_len(k));
            next = if off + 1 == chunk_len(k) {
                (k + 1, 0)
            } else {
                (k, off + 1)
            };
        }
        // The last chunk reaches past 2^32 slots.
        let last = (0..CHUNKS).map(chunk_len).sum::<usize>();
        assert!(last >= 1 << 32);
        assert_eq!(locate((1 << 32) - 1).0, CHUNKS - 1);
    }
}
