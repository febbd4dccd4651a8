//! A split virtqueue (virtio 1.x, 2.7) laid out in guest memory, seen from
//! the device side: take chains from the available ring, walk their
//! descriptors, return them on the used ring, and decide whether the
//! driver wants an interrupt.
//!
//! Why shaped so: a guest is untrusted, so the walk is where every rule is
//! enforced — each descriptor is copied out of guest memory once and then
//! checked: the head and every `next` index inside the table, at most as
//! many descriptors as the table has (a longer chain is a loop), no zero
//! or huge lengths, every buffer inside one mapped region
//! ([`GuestMemory::gpa`]), the direction the queue expects (a transmit
//! chain is read-only, a receive chain write-only), an indirect table
//! non-empty, a whole number of descriptors, inside memory and not nested.
//! An available index that moves by more than the ring size marks the
//! ring broken until the frontend starts it again. The result of a walk is
//! a list of [`Seg`]s that point into checked memory; only this module
//! makes them.
//!
//! Invariants: the ring's three areas were checked to lie in guest memory
//! with their natural alignment when the [`Vring`] was built; indices
//! into them are taken modulo the ring size; guest memory is only read and
//! written through raw pointers (the guest changes it concurrently), with
//! the ring indices accessed atomically (acquire on the available index,
//! release on the used index). No allocation: the segment list is
//! allocated once with room for [`MAX_SEGS`].
//!
//! Threads: a `Vring` is used by one thread at a time: the PMD that holds
//! its queue (see the hand-over in `super`), or the control thread while
//! the queue is withdrawn.
#![allow(unsafe_code)]

use super::log::DirtyLog;
use super::memory::GuestMemory;
use std::sync::atomic::{fence, AtomicU16, Ordering};
use std::sync::Arc;

/// `VRING_DESC_F_NEXT`.
pub const DESC_F_NEXT: u16 = 0x1;
/// `VRING_DESC_F_WRITE`.
pub const DESC_F_WRITE: u16 = 0x2;
/// `VRING_DESC_F_INDIRECT`.
pub const DESC_F_INDIRECT: u16 = 0x4;
/// `VRING_AVAIL_F_NO_INTERRUPT`.
pub const AVAIL_F_NO_INTERRUPT: u16 = 0x1;
/// `VRING_USED_F_NO_NOTIFY`.
pub const USED_F_NO_NOTIFY: u16 = 0x1;
/// Largest ring (virtio's limit for split rings).
pub const MAX_QUEUE_SIZE: u16 = 32768;
/// Most descriptors one chain may have (indirect ones included).
pub const MAX_SEGS: usize = 1024;
/// Longest single descriptor accepted.
pub const MAX_DESC_LEN: u32 = 1 << 17;
/// Size of one descriptor.
pub const DESC_SIZE: u64 = 16;

/// Why a chain (or the ring) was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainError {
    /// The available index moved by more than the ring size.
    AvailIdx,
    /// A head index outside the descriptor table.
    HeadIndex,
    /// A `next` index outside the table.
    NextIndex,
    /// More descriptors than the table holds: a loop.
    Loop,
    /// A zero-length buffer.
    ZeroLen,
    /// A buffer longer than [`MAX_DESC_LEN`], or a chain longer than the
    /// caller's limit.
    HugeLen,
    /// A buffer outside guest memory.
    OutsideMemory,
    /// A writable buffer in a transmit chain or the reverse.
    Direction,
    /// An indirect table inside an indirect table.
    NestedIndirect,
    /// An indirect table that is empty, not whole descriptors, too large,
    /// outside memory, or chained.
    BadIndirect,
    /// More than [`MAX_SEGS`] buffers.
    TooLong,
}

/// One checked buffer of a chain.
#[derive(Clone, Copy, Debug)]
pub struct Seg {
    host: *mut u8,
    len: u32,
}

// SAFETY: a `Seg` is only dereferenced (by `gather`/`scatter`, crate
// private) while the ring that made it is held and its memory alive;
// between bursts it is a stale number that nothing reads through.
unsafe impl Send for Seg {}

impl Seg {
    /// Its length in bytes.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Where it lies in this process (tests: to tell which guest address
    /// a walk found).
    #[cfg(test)]
    pub(crate) fn host(&self) -> *mut u8 {
        self.host
    }

    /// Never true (zero lengths are refused); for clippy's symmetry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The frontend's addresses of the three areas (its user addresses, as
/// `SET_VRING_ADDR` gives them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingAddrs {
    /// Descriptor table.
    pub desc: u64,
    /// Available ring.
    pub avail: u64,
    /// Used ring.
    pub used: u64,
}

/// A split virtqueue in guest memory.
pub struct Vring {
    mem: Arc<GuestMemory>,
    desc: *mut u8,
    avail: *mut u8,
    used: *mut u8,
    size: u16,
    last_avail: u16,
    /// The guest's available index as last read: chains up to it are
    /// taken without reading the index again (the guest's core writes
    /// that line; reading it once per burst instead of once per chain
    /// keeps it from moving between the cores).
    avail_seen: u16,
    used_idx: u16,
    published: u16,
    event_idx: bool,
    broken: bool,
    /// The guest was asked to kick on its next post (idle).
    notify: bool,
    /// Dirty logging while the guest migrates: the bitmap, and the used
    /// area's guest-physical address when it is to be logged too.
    log: Option<Arc<DirtyLog>>,
    log_used: Option<u64>,
}

// SAFETY: the pointers point into `mem`, which the `Vring` keeps alive
// (an `Arc`); a `Vring` is used by one thread at a time (module docs).
unsafe impl Send for Vring {}

impl std::fmt::Debug for Vring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vring")
            .field("size", &self.size)
            .field("last_avail", &self.last_avail)
            .field("used_idx", &self.used_idx)
            .finish()
    }
}

/// The used index a split ring at `addrs` holds in guest memory (`None`:
/// its used area is outside the guest's memory or misaligned). A ring
/// that starts where this differs from the base it is given resumes from
/// here: see `conn`.
pub fn used_index_in(mem: &GuestMemory, addrs: &RingAddrs) -> Option<u16> {
    let p = mem.uva(addrs.used, 4)?;
    if !(p as usize).is_multiple_of(4) {
        return None;
    }
    // SAFETY: `p + 2` is inside the 4 bytes `uva` checked to lie in a
    // mapped region, 2-aligned; the guest may write it concurrently, hence
    // an atomic read.
    let idx = unsafe { &*(p.add(2) as *const AtomicU16) };
    Some(u16::from_le(idx.load(Ordering::Acquire)))
}

impl Vring {
    /// A ring of `size` entries at `addrs`, resuming at index `base`
    /// (`SET_VRING_BASE`; every earlier chain was returned). With
    /// `event_idx` the guest's `used_event` decides interrupts, else its
    /// flags do; without it the guest is asked not to kick (the PMD
    /// polls).
    pub fn new(
        mem: Arc<GuestMemory>,
        addrs: RingAddrs,
        size: u16,
        base: u16,
        event_idx: bool,
    ) -> Result<Vring, &'static str> {
        if size == 0 || size > MAX_QUEUE_SIZE || !size.is_power_of_two() {
            return Err("ring size not a power of two up to 32768");
        }
        let n = u64::from(size);
        let desc = mem
            .uva(addrs.desc, DESC_SIZE * n)
            .ok_or("descriptor table outside guest memory")?;
        let avail = mem
            .uva(addrs.avail, 6 + 2 * n)
            .ok_or("available ring outside guest memory")?;
        let used = mem
            .uva(addrs.used, 6 + 8 * n)
            .ok_or("used ring outside guest memory")?;
        if !(avail as usize).is_multiple_of(2) || !(used as usize).is_multiple_of(4) {
            return Err("ring areas misaligned");
        }
        let r = Vring {
            mem,
            desc,
            avail,
            used,
            size,
            last_avail: base,
            avail_seen: base,
            used_idx: base,
            published: base,
            event_idx,
            broken: false,
            notify: true,
            log: None,
            log_used: None,
        };
        r.used_idx_atomic().store(base, Ordering::Release);
        // The PMD polls: no kicks until it goes idle.
        let mut r = r;
        r.set_notify(false);
        Ok(r)
    }

    /// Asks the guest to kick (write its `kick` eventfd) on its next post,
    /// or not to: with `EVENT_IDX` by moving `avail_event` to the next
    /// index (or behind it), else with the used ring's `NO_NOTIFY` flag.
    pub fn set_notify(&mut self, on: bool) {
        if self.notify == on {
            return;
        }
        self.notify = on;
        if self.event_idx {
            let ev = if on {
                self.last_avail
            } else {
                self.last_avail.wrapping_sub(1)
            };
            let at = 4 + 8 * usize::from(self.size);
            // SAFETY: `avail_event` is the u16 at `4 + 8 * size`, inside the
            // checked used ring (6 + 8 * size bytes), 2-aligned.
            unsafe { std::ptr::write_volatile(self.used.add(at).cast::<u16>(), ev.to_le()) };
        } else {
            let flags = if on { 0 } else { USED_F_NO_NOTIFY };
            // SAFETY: the flags are the first u16 of the checked used ring.
            unsafe { std::ptr::write_volatile(self.used.cast::<u16>(), flags.to_le()) };
        }
        self.log_used_area();
    }

    /// Logs every write into guest memory from now on in `log` (live
    /// migration), the used area at guest-physical `used_gpa` if given;
    /// `None` stops logging.
    pub fn set_log(&mut self, log: Option<Arc<DirtyLog>>, used_gpa: Option<u64>) {
        self.log = log;
        self.log_used = used_gpa.filter(|_| self.log.is_some());
        // What `new` wrote may not have been logged.
        self.log_used_area();
    }

    /// Marks the used area's pages (after writing there) while logging;
    /// one test of a field otherwise.
    #[inline]
    fn log_used_area(&self) {
        if self.log.is_some() {
            self.mark_used_area();
        }
    }

    /// [`Vring::log_used_area`]'s work, kept out of the hot path's code.
    #[cold]
    #[inline(never)]
    fn mark_used_area(&self) {
        if let (Some(log), Some(gpa)) = (&self.log, self.log_used) {
            log.mark(gpa, 6 + 8 * u64::from(self.size));
        }
    }

    /// Whether the guest was asked to kick.
    pub fn notify(&self) -> bool {
        self.notify
    }

    /// Ring size.
    pub fn size(&self) -> u16 {
        self.size
    }

    /// Next available index to take (what `GET_VRING_BASE` returns).
    pub fn last_avail(&self) -> u16 {
        self.last_avail
    }

    /// Whether the ring was found broken ([`ChainError::AvailIdx`]).
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Stops using the ring until it is built again (the guest broke a
    /// rule that cannot be recovered from in place).
    pub fn set_broken(&mut self) {
        self.broken = true;
    }

    /// The guest memory the ring lives in.
    pub fn mem(&self) -> &GuestMemory {
        &self.mem
    }

    fn avail_idx_atomic(&self) -> &AtomicU16 {
        // SAFETY: `avail + 2` is inside the checked, 2-aligned available
        // ring; the guest writes it concurrently, hence atomic access.
        unsafe { &*(self.avail.add(2) as *const AtomicU16) }
    }

    fn used_idx_atomic(&self) -> &AtomicU16 {
        // SAFETY: `used + 2` is inside the checked, 4-aligned used ring.
        unsafe { &*(self.used.add(2) as *const AtomicU16) }
    }

    /// How many chains wait (0 when broken): those seen at the last read
    /// of the guest's index not taken yet, or, when none is left, what
    /// the index says now.
    pub fn pending(&mut self) -> Result<u16, ChainError> {
        if self.broken {
            return Ok(0);
        }
        let mut n = self.avail_seen.wrapping_sub(self.last_avail);
        if n == 0 {
            self.avail_seen = self.avail_idx_atomic().load(Ordering::Acquire);
            n = self.avail_seen.wrapping_sub(self.last_avail);
        }
        if n > self.size {
            self.broken = true;
            return Err(ChainError::AvailIdx);
        }
        Ok(n)
    }

    /// Takes the next available head, if [`Vring::pending`] said one waits.
    pub fn take_head(&mut self) -> u16 {
        let slot = usize::from(self.last_avail % self.size);
        // SAFETY: `4 + 2 * slot + 2 <= 6 + 2 * size`: inside the checked
        // available ring, 2-aligned.
        let head = unsafe { std::ptr::read_volatile(self.avail.add(4 + 2 * slot).cast::<u16>()) };
        self.last_avail = self.last_avail.wrapping_add(1);
        u16::from_le(head)
    }

    /// Walks the chain at `head` into `segs` (cleared first; its capacity
    /// must be [`MAX_SEGS`]), expecting write-only buffers if `writable`,
    /// else read-only ones, at most `max_total` bytes in all. Returns the
    /// total length.
    pub fn walk(
        &self,
        head: u16,
        writable: bool,
        max_total: u64,
        segs: &mut Vec<Seg>,
    ) -> Result<u64, ChainError> {
        segs.clear();
        if head >= self.size {
            return Err(ChainError::HeadIndex);
        }
        let mut table = self.desc;
        let mut table_len = self.size;
        let mut budget = usize::from(self.size);
        let mut indirect = false;
        let mut i = head;
        let mut total = 0u64;
        loop {
            if budget == 0 {
                return Err(ChainError::Loop);
            }
            budget -= 1;
            let d = read_desc(table, i);
            if d.flags & DESC_F_INDIRECT != 0 {
                if indirect {
                    return Err(ChainError::NestedIndirect);
                }
                (table, table_len) = indirect_table(&self.mem, d.addr, d.len, d.flags)?;
                budget = usize::from(table_len);
                indirect = true;
                i = 0;
                continue;
            }
            let want = (writable, max_total);
            take_buffer(&self.mem, (d.addr, d.len, d.flags), want, &mut total, segs)?;
            if d.flags & DESC_F_NEXT == 0 {
                return Ok(total);
            }
            i = d.next;
            if i >= table_len {
                return Err(ChainError::NextIndex);
            }
        }
    }

    /// Puts `head` on the used ring with `len` bytes written (not yet
    /// visible to the guest: see [`Vring::publish`]).
    pub fn push_used(&mut self, head: u16, len: u32) {
        let slot = usize::from(self.used_idx % self.size);
        // SAFETY: `4 + 8 * slot + 8 <= 6 + 8 * size`: inside the checked,
        // 4-aligned used ring.
        unsafe {
            let e = self.used.add(4 + 8 * slot).cast::<u32>();
            std::ptr::write_volatile(e, u32::from(head).to_le());
            std::ptr::write_volatile(e.add(1), len.to_le());
        }
        self.used_idx = self.used_idx.wrapping_add(1);
    }

    /// Makes the used entries pushed since the last call visible; returns
    /// whether the guest asked to be interrupted for them.
    pub fn publish(&mut self) -> bool {
        let old = self.published;
        let new = self.used_idx;
        if old == new {
            return false;
        }
        self.used_idx_atomic().store(new, Ordering::Release);
        self.published = new;
        self.log_used_area();
        // The guest's interrupt request must be read after the index is
        // visible (virtio 2.7.10: a full barrier), or an interrupt could be
        // missed.
        fence(Ordering::SeqCst);
        if self.event_idx {
            let at = 4 + 2 * usize::from(self.size);
            // SAFETY: `used_event` is the u16 at `4 + 2 * size`, inside the
            // checked available ring (6 + 2 * size bytes), 2-aligned.
            let ev =
                u16::from_le(unsafe { std::ptr::read_volatile(self.avail.add(at).cast::<u16>()) });
            need_event(ev, new, old)
        } else {
            // SAFETY: the flags are the first u16 of the checked ring.
            let flags = u16::from_le(unsafe { std::ptr::read_volatile(self.avail.cast::<u16>()) });
            flags & AVAIL_F_NO_INTERRUPT == 0
        }
    }

    /// Walks the read-only chain at `head` and copies its bytes from
    /// offset `skip` on into `out` (cleared first, never grown past its
    /// capacity). Returns the chain's total length.
    pub fn read_chain(
        &self,
        head: u16,
        skip: usize,
        segs: &mut Vec<Seg>,
        out: &mut Vec<u8>,
    ) -> Result<u64, ChainError> {
        let total = self.walk(head, false, out.capacity() as u64 + skip as u64, segs)?;
        if !self.gather(segs, skip, out) {
            return Err(ChainError::HugeLen);
        }
        Ok(total)
    }
}

/// Where a ring was before a frame, to go back to if the frame is
/// abandoned half-way (nothing published since).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    avail: u16,
    used: u16,
    /// Packed rings: the wrap counters and the used entries not yet
    /// published.
    wraps: u8,
    unpublished: u16,
}

impl Mark {
    /// A packed ring's positions, wrap counters and unpublished entries.
    pub(crate) fn packed(
        avail: u16,
        avail_wrap: bool,
        used: u16,
        used_wrap: bool,
        unpublished: u16,
    ) -> Mark {
        Mark {
            avail,
            used,
            wraps: u8::from(avail_wrap) | (u8::from(used_wrap) << 1),
            unpublished,
        }
    }

    /// What [`Mark::packed`] took.
    pub(crate) fn unpack(self) -> (u16, bool, u16, bool, u16) {
        (
            self.avail,
            self.wraps & 1 != 0,
            self.used,
            self.wraps & 2 != 0,
            self.unpublished,
        )
    }
}

/// What the port's queues do with a virtqueue, split ([`Vring`]) or
/// packed (`super::packed::PackedRing`): take chains the guest made
/// available, walk them into checked [`Seg`]s, copy frames out of and
/// into those, hand the chains back as used and tell whether the guest
/// wants an interrupt. The queues are written once, generic over this,
/// and monomorphised for each layout (one dispatch per burst).
pub trait VirtRing {
    /// The guest memory the ring lives in.
    fn mem(&self) -> &GuestMemory;
    /// The dirty-page log, while the guest migrates.
    fn dirty_log(&self) -> Option<&DirtyLog>;
    /// Ring size.
    fn size(&self) -> u16;
    /// Whether a chain waits (a count: at least 1 if one does).
    fn pending(&mut self) -> Result<u16, ChainError>;
    /// The next chain's head (after [`VirtRing::pending`] said one waits);
    /// walk it next.
    fn take_head(&mut self) -> u16;
    /// Walks the chain at `head` into `segs` (see [`Vring::walk`]).
    fn walk_chain(
        &mut self,
        head: u16,
        writable: bool,
        max_total: u64,
        segs: &mut Vec<Seg>,
    ) -> Result<u64, ChainError>;
    /// Hands a chain whose walk failed back: unused on a split ring; a
    /// packed ring, where the chain's extent is not known, stops.
    fn refuse(&mut self, head: u16);
    /// Puts the walked chain `head` on the used ring with `len` bytes
    /// written (not visible to the guest before [`VirtRing::publish`]).
    fn push_used(&mut self, head: u16, len: u32);
    /// Makes the used chains visible; whether the guest asked for an
    /// interrupt for them.
    fn publish(&mut self) -> bool;
    /// Asks the guest to kick on its next post, or not to.
    fn set_notify(&mut self, on: bool);
    /// Where the ring is now.
    fn mark(&self) -> Mark;
    /// Goes back to a [`VirtRing::mark`].
    fn rewind(&mut self, mark: Mark);
    /// Stops using the ring until it is built again.
    fn set_broken(&mut self);

    /// Marks the pages of the `n` bytes written into the chain `segs`
    /// from offset `at` on (kept out of the hot path's code: called only
    /// while logging).
    #[cold]
    #[inline(never)]
    fn log_written(&self, segs: &[Seg], at: usize, n: usize) {
        let Some(log) = self.dirty_log() else { return };
        let (mut skip, mut left) = (at, n);
        for s in segs {
            let len = s.len as usize;
            if skip >= len {
                skip -= len;
                continue;
            }
            let k = (len - skip).min(left);
            if let Some(gpa) = self.mem().gpa_of(s.host.wrapping_add(skip)) {
                log.mark(gpa, k as u64);
            }
            left -= k;
            skip = 0;
            if left == 0 {
                break;
            }
        }
    }

    /// Copies the chain's bytes from offset `skip` on into `out` (cleared
    /// first, never grown past its capacity); returns false if they do not
    /// fit. `segs` must come from a walk of this ring while it is held.
    fn gather(&self, segs: &[Seg], skip: usize, out: &mut Vec<u8>) -> bool {
        out.clear();
        let mut skip = skip;
        for s in segs {
            let len = s.len as usize;
            if skip >= len {
                skip -= len;
                continue;
            }
            let n = len - skip;
            if out.len() + n > out.capacity() {
                return false;
            }
            let at = out.len();
            // SAFETY: `s` was made by `walk` from a range checked to lie in
            // `self.mem()`, which is alive; `skip < len`. `out` has room for
            // `n` more bytes (checked), which become initialised here.
            unsafe {
                std::ptr::copy_nonoverlapping(s.host.add(skip), out.as_mut_ptr().add(at), n);
                out.set_len(at + n);
            }
            skip = 0;
        }
        true
    }

    /// Copies the chain's first `out.len()` bytes into `out`; false if the
    /// chain is shorter. `segs` as for [`VirtRing::gather`].
    fn read_head(&self, segs: &[Seg], out: &mut [u8]) -> bool {
        let mut done = 0;
        for s in segs {
            if done == out.len() {
                break;
            }
            let n = (s.len as usize).min(out.len() - done);
            // SAFETY: `s` was made by `walk` from a range checked to lie in
            // `self.mem()`, which is alive; `n <= s.len`, and `out` has room
            // for `n` bytes from `done`.
            unsafe {
                std::ptr::copy_nonoverlapping(s.host, out.as_mut_ptr().add(done), n);
            }
            done += n;
        }
        done == out.len()
    }

    /// Asks the CPU to bring in the first cache line of `seg` after
    /// `skip` bytes (a hint: touches nothing). `seg` as for
    /// [`VirtRing::gather`].
    #[inline]
    fn prefetch_seg(&self, seg: &Seg, skip: usize) {
        if skip < seg.len as usize {
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                // SAFETY: `skip < len` keeps the address inside the checked
                // buffer; prefetching is a hint with no architectural
                // effect, and SSE is part of the x86_64 baseline.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(seg.host.add(skip).cast::<i8>()) }
            }
        }
    }

    /// Writes `parts` one after the other into the chain's buffers from
    /// offset `at` on; returns the bytes written (less than asked if the
    /// chain is shorter). `segs` as for [`VirtRing::gather`].
    fn scatter(&self, segs: &[Seg], at: usize, parts: &[&[u8]]) -> usize {
        let mut written = 0;
        let mut seg = 0;
        let mut off = at;
        // Find the segment holding offset `at`.
        while seg < segs.len() && off >= segs[seg].len as usize {
            off -= segs[seg].len as usize;
            seg += 1;
        }
        for part in parts {
            let mut p = *part;
            while !p.is_empty() && seg < segs.len() {
                let s = segs[seg];
                let n = (s.len as usize - off).min(p.len());
                // SAFETY: `s` is a checked, writable range of `s.len` bytes
                // in live guest memory; `off + n <= s.len`.
                unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), s.host.add(off), n) };
                written += n;
                p = &p[n..];
                off += n;
                if off == s.len as usize {
                    seg += 1;
                    off = 0;
                }
            }
        }
        if self.dirty_log().is_some() {
            self.log_written(segs, at, written);
        }
        written
    }
}

impl VirtRing for Vring {
    fn mem(&self) -> &GuestMemory {
        &self.mem
    }
    fn dirty_log(&self) -> Option<&DirtyLog> {
        self.log.as_deref()
    }
    fn size(&self) -> u16 {
        self.size
    }
    fn pending(&mut self) -> Result<u16, ChainError> {
        Vring::pending(self)
    }
    fn take_head(&mut self) -> u16 {
        Vring::take_head(self)
    }
    fn walk_chain(
        &mut self,
        head: u16,
        writable: bool,
        max_total: u64,
        segs: &mut Vec<Seg>,
    ) -> Result<u64, ChainError> {
        self.walk(head, writable, max_total, segs)
    }
    fn refuse(&mut self, head: u16) {
        if head < self.size {
            Vring::push_used(self, head, 0);
        }
    }
    fn push_used(&mut self, head: u16, len: u32) {
        Vring::push_used(self, head, len)
    }
    fn publish(&mut self) -> bool {
        Vring::publish(self)
    }
    fn set_notify(&mut self, on: bool) {
        Vring::set_notify(self, on)
    }
    fn mark(&self) -> Mark {
        Mark {
            avail: self.last_avail,
            used: self.used_idx,
            ..Mark::default()
        }
    }
    fn rewind(&mut self, mark: Mark) {
        self.last_avail = mark.avail;
        self.used_idx = mark.used;
    }
    fn set_broken(&mut self) {
        Vring::set_broken(self)
    }
}

/// Checks the buffer `(addr, len, flags)` of a chain (a walk wanting
/// `(writable, max_total)` bytes, `total` so far) and adds it to `segs`:
/// the rules both ring layouts enforce on each buffer.
pub(crate) fn take_buffer(
    mem: &GuestMemory,
    (addr, len, flags): (u64, u32, u16),
    (writable, max_total): (bool, u64),
    total: &mut u64,
    segs: &mut Vec<Seg>,
) -> Result<(), ChainError> {
    if len == 0 {
        return Err(ChainError::ZeroLen);
    }
    if len > MAX_DESC_LEN {
        return Err(ChainError::HugeLen);
    }
    if (flags & DESC_F_WRITE != 0) != writable {
        return Err(ChainError::Direction);
    }
    let host = mem
        .gpa(addr, u64::from(len))
        .ok_or(ChainError::OutsideMemory)?;
    *total += u64::from(len);
    if *total > max_total {
        return Err(ChainError::HugeLen);
    }
    if segs.len() >= MAX_SEGS {
        return Err(ChainError::TooLong);
    }
    segs.push(Seg { host, len });
    Ok(())
}

/// The table an indirect descriptor `(addr, len, flags)` points at and
/// how many descriptors it holds: not chained on, not empty, whole
/// descriptors, no more than a ring's worth, inside guest memory.
pub(crate) fn indirect_table(
    mem: &GuestMemory,
    addr: u64,
    len: u32,
    flags: u16,
) -> Result<(*mut u8, u16), ChainError> {
    if flags & DESC_F_NEXT != 0
        || len == 0
        || !u64::from(len).is_multiple_of(DESC_SIZE)
        || u64::from(len) / DESC_SIZE > u64::from(MAX_QUEUE_SIZE)
    {
        return Err(ChainError::BadIndirect);
    }
    let table = mem
        .gpa(addr, u64::from(len))
        .ok_or(ChainError::BadIndirect)?;
    Ok((table, (u64::from(len) / DESC_SIZE) as u16))
}

/// virtio's `vring_need_event`: whether moving the used index from `old`
/// to `new` passes the index `event` the guest asked to be told about.
pub fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

struct Desc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

/// Copies descriptor `i` out of `table` (the caller checked `i` is below
/// the table's length).
fn read_desc(table: *mut u8, i: u16) -> Desc {
    let mut b = [0u8; 16];
    // SAFETY: the table holds at least `i + 1` descriptors (the main table
    // was checked for `size` entries, an indirect one for its length, and
    // `i` is below that count), so these 16 bytes are in guest memory.
    unsafe {
        std::ptr::copy_nonoverlapping(table.add(16 * usize::from(i)), b.as_mut_ptr(), 16);
    }
    Desc {
        addr: u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        len: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
        flags: u16::from_le_bytes([b[12], b[13]]),
        next: u16::from_le_bytes([b[14], b[15]]),
    }
}

#[cfg(test)]
pub(crate) mod tests;
