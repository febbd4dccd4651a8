//! Cache tables on 2 MB pages: the second fenced `unsafe` of the crate.
//!
//! What: [`HugeVec`] is a fixed-length array (the EMC's, SMC's, DFC's,
//! CD's and hybrid table's storage) that, when it spans at least one 2 MB
//! page, is allocated 2 MB-aligned and marked `MADV_HUGEPAGE` *before* it
//! is first written, so the kernel backs it with transparent huge pages
//! where the system allows it (`/sys/kernel/mm/transparent_hugepage/enabled`
//! is `always` or `madvise`). Smaller arrays, and every array when
//! [`set_enabled`]`(false)`, are plain allocations.
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
//! dropping; `madvise` only advises (its failure changes nothing but the
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
use std::sync::atomic::{AtomicBool, Ordering};

/// The huge page size used (x86_64's and aarch64's PMD size).
pub const HUGE_PAGE: usize = 2 << 20;

static ENABLED: AtomicBool = AtomicBool::new(true);

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
            // SAFETY: the mapping map_huge made, of this size, unmapped
            // once; nothing refers to it any more.
            Backing::Mapped(size) => unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), size);
            },
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
}
