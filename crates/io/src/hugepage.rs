//! Cache tables on 2 MB pages: a fenced `unsafe` (memory-mapping
//! syscalls) of the workspace, kept here with the other system calls so
//! that the datapath crate has none (it re-exports this module as
//! `flowpath_datapath::hugepage`).
//!
//! What: [`HugeVec`] is a fixed-length array (the EMC's, SMC's, DFC's,
//! CD's and hybrid table's storage, the dpcls subtables' indexes) that,
//! when it spans at least one 2 MB page, is allocated 2 MB-aligned and
//! marked `MADV_HUGEPAGE` *before* it is first written, so the kernel backs
//! it with transparent huge pages where the system allows it
//! (`/sys/kernel/mm/transparent_hugepage/enabled` is `always` or
//! `madvise`). Smaller arrays, and every array when
//! [`set_enabled`]`(false)`, are plain allocations. [`HugeGrowVec`] is the
//! growable form, for the megaflow slab: a mapped array grows by moving
//! its pages into a larger aligned mapping (`mremap`), not by copying.
//! The datapath's caches, slab and indexes use them.
//!
//! Why: a 4 MB table of 4 KB pages needs 1,024 TLB entries; with 100K+
//! flows every lookup lands on a random page, so the DFC/CD thread (seed
//! 002) measured TLB misses dominating EMC lookups without huge pages.
//! Two 2 MB pages cover the same table. Advising after the fact does not
//! help: pages already touched stay 4 KB until `khugepaged` collapses them,
//! if it ever does — hence allocation, advice and first touch here, in
//! that order.
//!
//! Safety (the whole reason for the fence): the memory is either a fresh
//! anonymous mapping of our own (2 MB-aligned, `munmap`ped on drop) or,
//! for small arrays and as a fallback, `std::alloc::alloc` with the layout
//! kept for `dealloc` (the allocator may hand back memory already touched
//! as 4 KB pages, which advice no longer changes); every element is
//! written before the slice is exposed; `T: Copy` so nothing needs
//! dropping; a growth moves the whole old mapping (both ends 2 MB-aligned)
//! over the start of a fresh one with `MREMAP_FIXED`, after which the old
//! range is the kernel's and the array points at the new one only;
//! `madvise` only advises (its failure changes nothing but the
//! page size). [`huge_pages_kb`] reads `/proc/self/smaps_rollup` — for
//! reports, never on the packet path.
//!
//! Threads: [`set_enabled`] is a process-wide switch read at allocation
//! time (set it once, at start-up); a `HugeVec` is `Send`/`Sync` as its
//! elements are.

#![allow(unsafe_code)]

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The huge page size used (x86_64's and aarch64's PMD size).
pub const HUGE_PAGE: usize = 2 << 20;

static ENABLED: AtomicBool = AtomicBool::new(true);
/// Bytes of the mappings `map_huge` made that are still mapped.
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// Bytes this process holds in tables mapped for huge pages (outside the
/// global allocator: a heap profile or a counting allocator does not see
/// them).
pub fn mapped_bytes() -> usize {
    MAPPED.load(Ordering::Relaxed)
}

/// Turns huge-page allocation of later tables on or off for the whole
/// process (on by default; `--no-huge-pages` on the command line).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether later tables are allocated for huge pages.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The kB of this process's anonymous memory backed by transparent huge
/// pages (`AnonHugePages` of `/proc/self/smaps_rollup`), if the kernel
/// reports it.
pub fn huge_pages_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A fixed-length array, on 2 MB pages when large enough. See the module
/// documentation.
pub struct HugeVec<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    backing: Backing,
}

/// Where a [`HugeVec`]'s memory comes from.
#[derive(Clone, Copy, Debug)]
enum Backing {
    /// Nothing allocated (no bytes).
    None,
    /// The global allocator, with this layout.
    Heap(Layout),
    /// A fresh anonymous mapping of this many bytes, 2 MB-aligned and
    /// advised for huge pages.
    Mapped(usize),
}

/// A fresh, 2 MB-aligned anonymous mapping of `bytes` rounded up to 2 MB,
/// advised `MADV_HUGEPAGE` and not yet touched; `None` if the system
/// refuses the mapping.
fn map_huge(bytes: usize) -> Option<NonNull<u8>> {
    let size = bytes.checked_next_multiple_of(HUGE_PAGE)?;
    let over = size.checked_add(HUGE_PAGE)?;
    // SAFETY: a new private anonymous mapping; no existing memory is
    // affected.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let base = raw as usize;
    let start = base.next_multiple_of(HUGE_PAGE);
    let head = start - base;
    let tail = over - head - size;
    // SAFETY: both ranges lie inside the mapping just made and outside
    // [start, start + size), which is what we keep; madvise only advises
    // that kept range.
    unsafe {
        if head > 0 {
            libc::munmap(raw, head);
        }
        if tail > 0 {
            libc::munmap((start + size) as *mut libc::c_void, tail);
        }
        libc::madvise(start as *mut libc::c_void, size, libc::MADV_HUGEPAGE);
    }
    MAPPED.fetch_add(size, Ordering::Relaxed);
    NonNull::new(start as *mut u8)
}

// SAFETY: a HugeVec owns its elements exclusively, like a Vec<T>.
unsafe impl<T: Copy + Send> Send for HugeVec<T> {}
// SAFETY: shared access only hands out &[T], like a Vec<T>.
unsafe impl<T: Copy + Sync> Sync for HugeVec<T> {}

impl<T: Copy> HugeVec<T> {
    /// `len` copies of `value`.
    pub fn new(len: usize, value: T) -> Self {
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        if bytes == 0 {
            return HugeVec {
                ptr: NonNull::dangling(),
                len,
                backing: Backing::None,
            };
        }
        if enabled() && bytes >= HUGE_PAGE {
            if let Some(ptr) = map_huge(bytes) {
                let size = bytes.div_ceil(HUGE_PAGE) * HUGE_PAGE;
                return Self::filled(ptr.cast(), len, value, Backing::Mapped(size));
            }
        }
        let Ok(layout) = Layout::array::<T>(len) else {
            // Over isize::MAX bytes: as Vec, an allocation failure.
            handle_alloc_error(Layout::new::<T>())
        };
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<T>()) else {
            handle_alloc_error(layout)
        };
        Self::filled(ptr, len, value, Backing::Heap(layout))
    }

    /// Writes `value` into each of the `len` elements at `ptr` (first
    /// touch: on a mapping advised for huge pages, this is where the
    /// kernel picks 2 MB pages).
    fn filled(ptr: NonNull<T>, len: usize, value: T, backing: Backing) -> Self {
        for i in 0..len {
            // SAFETY: i < len and the allocation holds len elements of T,
            // aligned for T (HUGE_PAGE is a multiple of any T's alignment
            // up to 2 MB; Layout::array otherwise).
            unsafe { ptr.as_ptr().add(i).write(value) };
        }
        HugeVec { ptr, len, backing }
    }

    /// At least `len` copies of `value`: exactly `len` on the heap, and as
    /// many as its whole 2 MB pages hold when mapped (growth uses what the
    /// pages hold anyway).
    pub fn new_rounded(len: usize, value: T) -> Self {
        let mut v = Self::new(len, value);
        if let Backing::Mapped(size) = v.backing {
            let cap = size / std::mem::size_of::<T>();
            for i in v.len..cap {
                // SAFETY: i < cap and the mapping holds size bytes, cap
                // elements of T.
                unsafe { v.ptr.as_ptr().add(i).write(value) };
            }
            v.len = cap;
        }
        v
    }

    /// Grows to at least `len` elements, the new ones `value`, keeping the
    /// old ones (a no-op if it already has `len`). An array mapped for huge
    /// pages keeps its pages: they are moved into a larger mapping
    /// (`mremap`, 2 MB-aligned at both ends, so huge pages stay huge), not
    /// copied — a table of 64 MB grows without a 64 MB copy on the packet
    /// thread. Otherwise (or if the move fails) the elements are copied
    /// into a new array, mapped for huge pages once it spans one.
    pub fn grow(&mut self, len: usize, value: T) {
        if len <= self.len {
            return;
        }
        let size_t = std::mem::size_of::<T>();
        if size_t == 0 {
            self.len = len;
            return;
        }
        if let Backing::Mapped(old_size) = self.backing {
            if let Some(dst) = len.checked_mul(size_t).and_then(map_huge) {
                let new_size = (len * size_t).div_ceil(HUGE_PAGE) * HUGE_PAGE;
                // SAFETY: moves our own mapping [ptr, ptr + old_size) over
                // the start of the fresh one at dst (both 2 MB-aligned,
                // old_size <= new_size); on success the old range is
                // unmapped by the kernel and nothing refers to it (we hold
                // &mut self); on failure nothing moved.
                let moved = unsafe {
                    libc::mremap(
                        self.ptr.as_ptr().cast(),
                        old_size,
                        old_size,
                        libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                        dst.as_ptr().cast::<libc::c_void>(),
                    )
                };
                if moved != libc::MAP_FAILED {
                    let cap = new_size / size_t;
                    let ptr = dst.cast::<T>();
                    for i in self.len..cap {
                        // SAFETY: i < cap, inside the new mapping.
                        unsafe { ptr.as_ptr().add(i).write(value) };
                    }
                    // The old range now belongs to the new mapping.
                    MAPPED.fetch_sub(old_size, Ordering::Relaxed);
                    self.ptr = ptr;
                    self.len = cap;
                    self.backing = Backing::Mapped(new_size);
                    return;
                }
                // SAFETY: the fresh mapping map_huge made, unused.
                unsafe { libc::munmap(dst.as_ptr().cast(), new_size) };
                MAPPED.fetch_sub(new_size, Ordering::Relaxed);
            }
        }
        let mut bigger = Self::new_rounded(len, value);
        bigger[..self.len].copy_from_slice(self);
        *self = bigger;
    }

    /// An empty array (no allocation).
    pub const fn empty() -> Self {
        HugeVec {
            ptr: NonNull::dangling(),
            len: 0,
            backing: Backing::None,
        }
    }

    /// Bytes allocated (whole 2 MB pages when mapped).
    pub fn allocated_bytes(&self) -> usize {
        match self.backing {
            Backing::None => 0,
            Backing::Heap(l) => l.size(),
            Backing::Mapped(size) => size,
        }
    }

    /// Whether the array was allocated for huge pages (aligned and
    /// advised; the kernel may still have given 4 KB pages).
    pub fn is_huge(&self) -> bool {
        matches!(self.backing, Backing::Mapped(_))
    }

    /// Sets every element to `value`.
    pub fn fill(&mut self, value: T) {
        self.iter_mut().for_each(|x| *x = value);
    }
}

impl<T: Copy> Deref for HugeVec<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: ptr holds len initialised elements (or is dangling with
        // nothing to read: len * size_of::<T>() == 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> DerefMut for HugeVec<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as deref, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for HugeVec<T> {
    fn drop(&mut self) {
        match self.backing {
            // SAFETY: allocated with exactly this layout; T: Copy has no
            // destructor to run.
            Backing::Heap(layout) => unsafe { dealloc(self.ptr.as_ptr().cast(), layout) },
            Backing::Mapped(size) => {
                // SAFETY: the mapping map_huge made, of this size, unmapped
                // once; nothing refers to it any more.
                unsafe { libc::munmap(self.ptr.as_ptr().cast(), size) };
                MAPPED.fetch_sub(size, Ordering::Relaxed);
            }
            Backing::None => {}
        }
    }
}

impl<T: Copy> Clone for HugeVec<T> {
    fn clone(&self) -> Self {
        match self.first() {
            Some(&v) => {
                let mut c = HugeVec::new(self.len, v);
                c.copy_from_slice(self);
                c
            }
            None => HugeVec {
                ptr: NonNull::dangling(),
                len: 0,
                backing: Backing::None,
            },
        }
    }
}

/// A growable array on 2 MB pages once it spans one: `push` and `pop` on
/// a [`HugeVec`] used up to its length, growing by an eighth (at least
/// `min_step` elements) when full, as `reserve_gently` grows a `Vec`. For
/// slabs that grow with the flows installed (the megaflow table's hot lines
/// and counters).
pub struct HugeGrowVec<T: Copy> {
    buf: HugeVec<T>,
    len: usize,
    min_step: usize,
}

impl<T: Copy> HugeGrowVec<T> {
    /// An empty array growing by at least `min_step` elements.
    pub const fn new(min_step: usize) -> Self {
        HugeGrowVec {
            buf: HugeVec::empty(),
            len: 0,
            min_step,
        }
    }

    /// Elements it holds without growing.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Bytes allocated.
    pub fn allocated_bytes(&self) -> usize {
        self.buf.allocated_bytes()
    }

    /// Whether its storage is mapped for huge pages.
    pub fn is_huge(&self) -> bool {
        self.buf.is_huge()
    }

    /// Appends `v`.
    pub fn push(&mut self, v: T) {
        let cap = self.buf.len();
        if self.len == cap {
            let step = (cap / 8).max(self.min_step).max(1);
            self.buf.grow(cap.saturating_add(step), v);
        }
        self.buf[self.len] = v;
        self.len += 1;
    }

    /// Removes and returns the last element.
    pub fn pop(&mut self) -> Option<T> {
        let v = self[..].last().copied()?;
        self.len -= 1;
        Some(v)
    }
}

impl<T: Copy> Deref for HugeGrowVec<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        &self.buf[..self.len]
    }
}

impl<T: Copy> DerefMut for HugeGrowVec<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.buf[..self.len]
    }
}

impl<T: Copy> fmt::Debug for HugeGrowVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HugeGrowVec")
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .field("huge", &self.is_huge())
            .finish()
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for HugeVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HugeVec")
            .field("len", &self.len)
            .field("huge", &self.is_huge())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_arrays_hold_their_values() {
        let mut s = HugeVec::new(1000, 7u32);
        assert!(!s.is_huge(), "4 KB is below one huge page");
        assert!(s.iter().all(|&x| x == 7));
        s[999] = 1;
        let c = s.clone();
        assert_eq!(c[999], 1);
        assert_eq!(c.len(), 1000);
        let mut l = HugeVec::new(3 << 20, u16::MAX);
        assert_eq!(l.is_huge(), enabled());
        assert_eq!(l.as_ptr() as usize % HUGE_PAGE, 0, "2 MB aligned");
        assert!(l.iter().all(|&x| x == u16::MAX));
        l.fill(3);
        assert_eq!(l.iter().map(|&x| u64::from(x)).sum::<u64>(), 3 * (3 << 20));
        let e: HugeVec<u64> = HugeVec::new(0, 1);
        assert!(e.is_empty());
        assert!(e.clone().is_empty());
    }

    /// Grows a slab of 16-byte elements element by element across 2 MB
    /// (heap -> mapped) and then across several mapped sizes (mremap
    /// moves), checking every element after each growth, and pops back.
    #[test]
    fn a_growing_slab_keeps_every_element() {
        let mut v: HugeGrowVec<[u64; 2]> = HugeGrowVec::new(16);
        let n = 3 * HUGE_PAGE / 16 + 12_345; // ~6.2 MB
        let mut last_cap = 0;
        let mut growths = 0;
        for i in 0..n as u64 {
            v.push([i, !i]);
            if v.capacity() != last_cap {
                growths += 1;
                last_cap = v.capacity();
                assert!(v.capacity() >= v.len());
                assert!(
                    v.iter()
                        .enumerate()
                        .all(|(j, x)| *x == [j as u64, !(j as u64)]),
                    "contents kept across growth to {last_cap}"
                );
                if v.is_huge() {
                    assert_eq!(v.as_ptr() as usize % HUGE_PAGE, 0, "2 MB aligned");
                    assert_eq!(v.allocated_bytes() % HUGE_PAGE, 0);
                }
            }
        }
        assert!(growths > 10, "grew {growths} times");
        assert_eq!(v.len(), n);
        assert_eq!(v.is_huge(), enabled());
        assert!(v.allocated_bytes() >= n * 16);
        v[7] = [1, 2];
        assert_eq!(v.pop(), Some([n as u64 - 1, !(n as u64 - 1)]));
        assert_eq!(v.len(), n - 1);
        assert_eq!(v[7], [1, 2]);
        let mut e: HugeGrowVec<u8> = HugeGrowVec::new(1);
        assert_eq!(e.pop(), None);
        e.push(9);
        assert_eq!((e.len(), e[0]), (1, 9));
    }

    #[test]
    fn grow_from_a_mapped_array_moves_its_pages() {
        let mut h = HugeVec::new_rounded(HUGE_PAGE / 8 + 1, 5u64);
        let first = h.len();
        assert!(first > HUGE_PAGE / 8);
        h[0] = 11;
        h[first - 1] = 12;
        h.grow(first * 3, 6);
        assert!(h.len() >= first * 3);
        assert_eq!((h[0], h[1], h[first - 1]), (11, 5, 12));
        assert!(h[first..].iter().all(|&x| x == 6));
        h.grow(10, 0);
        assert!(h.len() >= first * 3, "never shrinks");
    }
}
