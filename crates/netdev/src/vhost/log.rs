//! Dirty-page logging, what live migration needs from a vhost-user
//! backend: while the frontend migrates the guest, it copies guest memory
//! to the destination page by page and copies again every page written
//! since; the backend writes guest memory behind its back (received
//! frames, used rings), so it marks each page it writes in a bitmap the
//! frontend shares with it (`SET_LOG_BASE` with `LOG_SHMFD`), and the
//! frontend collects the marks.
//!
//! Facts from the vhost-user specification and Linux's vhost: one bit per
//! 4 KiB page of guest-physical memory (`VHOST_LOG_PAGE`), bit `p % 8` of
//! byte `p / 8` for page `p`; bits are only ever set by the backend, with
//! an atomic OR, after the write they stand for (the frontend clears a
//! word atomically, then copies its pages); logging applies while the
//! negotiated features carry `VHOST_F_LOG_ALL`, and a ring's used area is
//! logged at the guest-physical address `SET_VRING_ADDR` gives with
//! `VHOST_VRING_F_LOG`.
//!
//! Invariants: the bitmap is `len` bytes, mapped (or owned, in tests)
//! for as long as the value lives; marks beyond it are dropped (the
//! frontend sizes it for all of guest memory, so only a guest address
//! outside its memory would fall there, and those are refused earlier).
//!
//! Threads: shared by the rings of one port (`Sync`): marks are atomic.
#![allow(unsafe_code)]

use crate::NetdevError;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU8, Ordering};

/// Bytes of guest memory one bit stands for (`VHOST_LOG_PAGE`).
pub const LOG_PAGE: u64 = 4096;

/// What backs the bitmap.
enum Backing {
    /// `mmap`ed from the frontend's descriptor.
    Mapped { base: *mut u8, map_len: usize },
    /// A buffer of our own (tests).
    Owned { _buf: Box<[AtomicU8]> },
}

/// The frontend's dirty-page bitmap.
pub struct DirtyLog {
    bits: *const AtomicU8,
    len: usize,
    backing: Backing,
}

// SAFETY: the mapping or buffer is owned by this value and lives as long
// as it; the bytes are only touched through atomics.
unsafe impl Send for DirtyLog {}
// SAFETY: as above; every access is an atomic operation.
unsafe impl Sync for DirtyLog {}

impl std::fmt::Debug for DirtyLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirtyLog").field("len", &self.len).finish()
    }
}

impl DirtyLog {
    /// Maps the bitmap of `size` bytes found `offset` bytes into `fd`
    /// (`SET_LOG_BASE`'s payload), shared and writable.
    pub fn map(port: &str, fd: &OwnedFd, size: u64, offset: u64) -> Result<DirtyLog, NetdevError> {
        let bad = |why: &str| {
            NetdevError::os(
                port,
                format!("SET_LOG_BASE: {why}"),
                std::io::Error::from_raw_os_error(libc::EINVAL),
            )
        };
        if size == 0 {
            return Err(bad("empty log"));
        }
        let map_len = size
            .checked_add(offset)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| bad("log too large"))?;
        // Mapped from offset 0 (hugetlbfs needs aligned offsets), the
        // bitmap starts `offset` bytes in.
        let base = super::memory::map_shared(fd, map_len)
            .ok_or_else(|| NetdevError::last_os(port, "SET_LOG_BASE: mmap"))?;
        Ok(DirtyLog {
            // SAFETY: `offset + size == map_len`: inside the mapping.
            bits: unsafe { base.add(offset as usize) }.cast::<AtomicU8>(),
            len: size as usize,
            backing: Backing::Mapped { base, map_len },
        })
    }

    /// A zeroed bitmap of `len` bytes of our own (tests).
    pub fn owned(len: usize) -> DirtyLog {
        let buf: Box<[AtomicU8]> = (0..len.max(1)).map(|_| AtomicU8::new(0)).collect();
        DirtyLog {
            bits: buf.as_ptr(),
            len,
            backing: Backing::Owned { _buf: buf },
        }
    }

    /// Marks every page that `[gpa, gpa + len)` touches (after the write
    /// it stands for: release ordering).
    pub fn mark(&self, gpa: u64, len: u64) {
        if len == 0 {
            return;
        }
        let first = gpa / LOG_PAGE;
        let last = gpa.saturating_add(len - 1) / LOG_PAGE;
        for page in first..=last {
            let Ok(byte) = usize::try_from(page / 8) else {
                return;
            };
            if byte >= self.len {
                return;
            }
            // SAFETY: `byte < len`, inside the bitmap this value owns.
            let b = unsafe { &*self.bits.add(byte) };
            b.fetch_or(1 << (page % 8), Ordering::Release);
        }
    }

    /// Whether page `page` is marked (tests and diagnostics).
    pub fn is_marked(&self, page: u64) -> bool {
        usize::try_from(page / 8)
            .ok()
            .filter(|&b| b < self.len)
            .is_some_and(|b| {
                // SAFETY: `b < len`, inside the bitmap.
                let v = unsafe { &*self.bits.add(b) }.load(Ordering::Acquire);
                v & (1 << (page % 8)) != 0
            })
    }

    /// The marked pages, in order (tests and diagnostics).
    pub fn marked(&self) -> Vec<u64> {
        (0..self.len as u64 * 8)
            .filter(|&p| self.is_marked(p))
            .collect()
    }
}

impl Drop for DirtyLog {
    fn drop(&mut self) {
        if let Backing::Mapped { base, map_len } = self.backing {
            // SAFETY: exactly what mmap returned, unmapped once; no ring
            // holds the log any more (the last `Arc` is being dropped).
            unsafe { libc::munmap(base.cast(), map_len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_cover_exactly_the_pages_touched() {
        let log = DirtyLog::owned(4);
        log.mark(0x1000, 1);
        assert_eq!(log.marked(), vec![1]);
        log.mark(0x2fff, 2); // pages 2 and 3
        log.mark(0x9000, 0x2000); // pages 9 and 10
        log.mark(0x7000, 0); // nothing
        assert_eq!(log.marked(), vec![1, 2, 3, 9, 10]);
        // Past the bitmap's 32 pages: dropped, not a write outside it.
        log.mark(31 * LOG_PAGE, 3 * LOG_PAGE);
        log.mark(u64::MAX - 1, 10);
        assert_eq!(log.marked(), vec![1, 2, 3, 9, 10, 31]);
    }

    #[test]
    fn a_mapped_log_is_the_file_shared_with_the_frontend() {
        // A memfd as QEMU makes it: the bitmap 64 bytes in.
        // SAFETY: a C string literal and no flags.
        let fd = unsafe { libc::memfd_create(c"log".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: `fd` is a fresh descriptor we own from here on.
        let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        use std::os::fd::AsRawFd;
        // SAFETY: resizing our own memfd.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) }, 0);
        let log = DirtyLog::map("p", &fd, 128, 64).unwrap();
        log.mark(5 * LOG_PAGE + 7, 1);
        log.mark(17 * LOG_PAGE, 1);
        let mut b = [0u8; 4];
        // SAFETY: reading 4 bytes of our memfd into a live buffer.
        let n = unsafe { libc::pread(fd.as_raw_fd(), b.as_mut_ptr().cast(), 4, 64) };
        assert_eq!(n, 4);
        assert_eq!(b, [1 << 5, 0, 1 << 1, 0]);
        assert!(DirtyLog::map("p", &fd, 0, 0).is_err());
    }
}
