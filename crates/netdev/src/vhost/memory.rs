//! Guest memory: the regions a vhost-user frontend passes with
//! `SET_MEM_TABLE`, mapped from their descriptors, and the bounds-checked
//! translation of guest-physical and frontend user addresses to host
//! pointers.
//!
//! Why shaped so: every address the guest writes into a ring is
//! untrusted. [`GuestMemory::gpa`] and [`GuestMemory::uva`] return a host
//! pointer only when the whole range `[addr, addr + len)` lies inside one
//! region (overflow-checked); nothing else in the port turns a guest
//! number into a pointer. A buffer that straddles two regions is refused
//! (frontends lay out memory backends as whole regions, so a real buffer
//! never does).
//!
//! Invariants: a [`GuestMemory`] is immutable once built; its mappings
//! stay valid until it is dropped, which happens only when the last ring
//! holding it (an `Arc`) is gone — the control thread withdraws the rings
//! first (see the hand-over in `super`). Regions may also be owned
//! buffers ([`GuestMemory::from_owned`]), for tests and the fuzz target.
//!
//! Threads: shared read-only (`Sync`); the bytes behind it are written by
//! the guest at any time, so they are only ever read or written through
//! raw pointers, never as Rust references.
#![allow(unsafe_code)]

use crate::NetdevError;
use std::os::fd::{AsRawFd, OwnedFd};

/// Most regions in one memory table (VHOST_MEMORY_BASELINE_NREGIONS).
pub const MAX_REGIONS: usize = 8;

/// One region as the frontend describes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionDesc {
    /// Guest-physical start.
    pub gpa: u64,
    /// Size in bytes.
    pub size: u64,
    /// Start in the frontend's own address space.
    pub uva: u64,
    /// Offset of the region in the passed descriptor.
    pub mmap_offset: u64,
}

/// What backs a region.
enum Backing {
    /// `mmap`ed from the frontend's descriptor: `map_len` bytes at `base`.
    Mapped { base: *mut u8, map_len: usize },
    /// A buffer of our own (tests, fuzzing), reached through `host`.
    Owned { _buf: Box<[u8]> },
}

struct Region {
    desc: RegionDesc,
    /// Host address of the region's first byte.
    host: *mut u8,
    backing: Backing,
}

/// The guest's memory as mapped into this process.
pub struct GuestMemory {
    regions: Vec<Region>,
}

// SAFETY: the mappings and buffers are owned by this value and never
// change while it lives; access to the bytes goes through raw pointers
// whose users follow the ring hand-over (module docs).
unsafe impl Send for GuestMemory {}
// SAFETY: as above; `GuestMemory` itself has no interior mutability.
unsafe impl Sync for GuestMemory {}

impl std::fmt::Debug for GuestMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.regions.iter().map(|r| r.desc))
            .finish()
    }
}

impl GuestMemory {
    /// No memory at all (before the first `SET_MEM_TABLE`).
    pub fn empty() -> GuestMemory {
        GuestMemory {
            regions: Vec::new(),
        }
    }

    /// Maps each region from its descriptor (shared, read-write). Regions
    /// that overlap in guest-physical space, are empty, or whose ranges
    /// overflow are refused.
    pub fn map(port: &str, regions: &[(RegionDesc, OwnedFd)]) -> Result<GuestMemory, NetdevError> {
        let bad = |why: &str| {
            NetdevError::os(
                port,
                format!("SET_MEM_TABLE: {why}"),
                std::io::Error::from_raw_os_error(libc::EINVAL),
            )
        };
        if regions.len() > MAX_REGIONS {
            return Err(bad("too many regions"));
        }
        let mut mem = GuestMemory::empty();
        for (d, fd) in regions {
            check_desc(d, &mem).map_err(bad)?;
            let want = d
                .size
                .checked_add(d.mmap_offset)
                .and_then(|l| usize::try_from(l).ok())
                .ok_or_else(|| bad("region too large"))?;
            let map_len = round_to_block(fd, want).ok_or_else(|| bad("region too large"))?;
            let base = map_shared(fd, map_len)
                .ok_or_else(|| NetdevError::last_os(port, "SET_MEM_TABLE: mmap"))?;
            // SAFETY: `mmap_offset + size <= map_len` (checked above), so
            // the offset stays inside the mapping just made.
            let host = unsafe { base.add(d.mmap_offset as usize) };
            mem.regions.push(Region {
                desc: *d,
                host,
                backing: Backing::Mapped { base, map_len },
            });
        }
        Ok(mem)
    }

    /// Memory over buffers of our own: `(gpa, bytes)`; the user address
    /// of each region equals its guest-physical one. Overlapping or empty
    /// regions are refused.
    pub fn from_owned(regions: Vec<(u64, Box<[u8]>)>) -> Option<GuestMemory> {
        let mut mem = GuestMemory::empty();
        for (gpa, mut buf) in regions {
            let d = RegionDesc {
                gpa,
                size: buf.len() as u64,
                uva: gpa,
                mmap_offset: 0,
            };
            check_desc(&d, &mem).ok()?;
            let host = buf.as_mut_ptr();
            mem.regions.push(Region {
                desc: d,
                host,
                backing: Backing::Owned { _buf: buf },
            });
        }
        Some(mem)
    }

    /// Host pointer to guest-physical `[gpa, gpa + len)`, if it lies in one
    /// region.
    pub fn gpa(&self, gpa: u64, len: u64) -> Option<*mut u8> {
        self.regions
            .iter()
            .find_map(|r| offset_in(r.desc.gpa, r.desc.size, gpa, len).map(|o| (r, o)))
            .map(|(r, o)| {
                // SAFETY: `o + len <= size` (offset_in), inside the region.
                unsafe { r.host.add(o) }
            })
    }

    /// Host pointer to frontend user address `[uva, uva + len)`, if it lies
    /// in one region.
    pub fn uva(&self, uva: u64, len: u64) -> Option<*mut u8> {
        self.regions
            .iter()
            .find_map(|r| offset_in(r.desc.uva, r.desc.size, uva, len).map(|o| (r, o)))
            .map(|(r, o)| {
                // SAFETY: `o + len <= size` (offset_in), inside the region.
                unsafe { r.host.add(o) }
            })
    }

    /// The guest-physical address of host pointer `host`, if it lies in a
    /// region (the reverse of [`GuestMemory::gpa`], for dirty logging).
    pub fn gpa_of(&self, host: *const u8) -> Option<u64> {
        let h = host as usize;
        self.regions.iter().find_map(|r| {
            let off = h.checked_sub(r.host as usize)?;
            (off < r.desc.size as usize).then(|| r.desc.gpa + off as u64)
        })
    }

    /// The regions, as described.
    pub fn regions(&self) -> impl Iterator<Item = RegionDesc> + '_ {
        self.regions.iter().map(|r| r.desc)
    }
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        for r in &self.regions {
            if let Backing::Mapped { base, map_len } = r.backing {
                // SAFETY: exactly what mmap returned, unmapped once; no ring
                // refers to it any more (the last `Arc` is being dropped).
                unsafe { libc::munmap(base.cast(), map_len) };
            }
        }
    }
}

/// Maps `len` bytes of `fd` from its start, shared and writable, at an
/// address the kernel picks; `None` (errno set) if it cannot. The caller
/// owns the mapping (and unmaps it).
pub(crate) fn map_shared(fd: &OwnedFd, len: usize) -> Option<*mut u8> {
    // SAFETY: a fresh mapping chosen by the kernel (addr NULL) of a
    // descriptor we hold; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    (p != libc::MAP_FAILED).then(|| p.cast::<u8>())
}

/// Offset of `[addr, addr + len)` inside `[start, start + size)`.
fn offset_in(start: u64, size: u64, addr: u64, len: u64) -> Option<usize> {
    let off = addr.checked_sub(start)?;
    let end = off.checked_add(len)?;
    (end <= size).then_some(off as usize)
}

/// Refuses an empty, overflowing or overlapping (in guest-physical
/// space) region.
fn check_desc(d: &RegionDesc, mem: &GuestMemory) -> Result<(), &'static str> {
    if d.size == 0 {
        return Err("empty region");
    }
    let end = d.gpa.checked_add(d.size).ok_or("region wraps around")?;
    d.uva.checked_add(d.size).ok_or("region wraps around")?;
    if usize::try_from(d.size).is_err() {
        return Err("region too large");
    }
    if mem
        .regions
        .iter()
        .any(|r| d.gpa < r.desc.gpa + r.desc.size && r.desc.gpa < end)
    {
        return Err("regions overlap");
    }
    Ok(())
}

/// `len` rounded up to the descriptor's block size when that is larger
/// than a page (hugetlbfs mappings must cover whole huge pages).
fn round_to_block(fd: &OwnedFd, len: usize) -> Option<usize> {
    // SAFETY: `st` is plain data for which all-zero is valid; fstat
    // writes it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor we own and a live stat buffer.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    let blk = if rc == 0 && st.st_blksize > 4096 {
        st.st_blksize as usize
    } else {
        1
    };
    len.checked_add(blk - 1).map(|l| l / blk * blk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translation_is_bounds_checked() {
        let m = GuestMemory::from_owned(vec![
            (0x1000, vec![0u8; 0x1000].into_boxed_slice()),
            (0x4000, vec![0u8; 0x100].into_boxed_slice()),
        ])
        .unwrap();
        assert!(m.gpa(0x1000, 0x1000).is_some());
        assert!(m.gpa(0x1fff, 1).is_some());
        assert!(m.gpa(0x1fff, 2).is_none());
        assert!(m.gpa(0x0fff, 1).is_none());
        assert!(m.gpa(0x4000, 0x101).is_none());
        assert!(m.gpa(u64::MAX, 2).is_none());
        assert!(m.gpa(0x1800, u64::MAX).is_none());
        assert!(m.uva(0x4010, 0x10).is_some());
        for gpa in [0x1000, 0x1abc, 0x1fff, 0x4000, 0x40ff] {
            assert_eq!(m.gpa_of(m.gpa(gpa, 1).unwrap()), Some(gpa));
        }
        let outside = [0u8; 4];
        assert_eq!(m.gpa_of(outside.as_ptr()), None);
    }

    #[test]
    fn overlapping_or_empty_regions_are_refused() {
        assert!(GuestMemory::from_owned(vec![
            (0x1000, vec![0u8; 0x1000].into_boxed_slice()),
            (0x1800, vec![0u8; 0x100].into_boxed_slice()),
        ])
        .is_none());
        assert!(GuestMemory::from_owned(vec![(0, Vec::new().into_boxed_slice())]).is_none());
    }
}
