//! Small fenced wrappers over the syscalls several port kinds share:
//! interface lookup, sockets as owned descriptors, mapped memory that
//! unmaps itself, and `poll(2)` for idle waiting.
//!
//! Every `unsafe` block is one libc call on values this module checked or
//! built itself, with a `// SAFETY:` note.
#![allow(unsafe_code)]

use crate::NetdevError;
use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The interface index of `ifname`, or `NoSuchInterface` for `port`.
pub fn ifindex(port: &str, ifname: &str) -> Result<u32, NetdevError> {
    let c = CString::new(ifname).map_err(|_| NetdevError::NoSuchInterface {
        port: port.to_string(),
        ifname: ifname.to_string(),
    })?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(NetdevError::NoSuchInterface {
            port: port.to_string(),
            ifname: ifname.to_string(),
        });
    }
    Ok(idx)
}

/// A non-blocking eventfd (a wake-up for an idle PMD) as an owned
/// descriptor.
pub fn eventfd(port: &str) -> Result<OwnedFd, NetdevError> {
    // SAFETY: plain flags; the new descriptor is owned just below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(NetdevError::last_os(port, "eventfd"));
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds 1 to eventfd `fd` (readable until read).
pub fn eventfd_signal(fd: RawFd) {
    let one = 1u64;
    // SAFETY: writing 8 bytes from a live u64; a bad or full descriptor
    // only makes the call fail.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Reads eventfd `fd` back to 0 (non-blocking: nothing to read is fine).
pub fn eventfd_drain(fd: RawFd) {
    let mut v = 0u64;
    // SAFETY: reading 8 bytes into a live u64.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

/// `socket(domain, ty | SOCK_CLOEXEC, proto)` as an owned descriptor.
pub fn socket(port: &str, domain: i32, ty: i32, proto: i32) -> Result<OwnedFd, NetdevError> {
    // SAFETY: plain integer arguments.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(NetdevError::last_os(port, "socket"));
    }
    // SAFETY: `fd` was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` with a plain-old-data value.
pub fn setsockopt<T: Copy>(
    port: &str,
    fd: RawFd,
    level: i32,
    name: i32,
    val: &T,
    what: &str,
) -> Result<(), NetdevError> {
    // SAFETY: `val` points to a live, initialised `T` of the size passed;
    // the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(NetdevError::last_os(port, what));
    }
    Ok(())
}

/// `getsockopt` into a plain-old-data value (all-zero bit patterns valid).
pub fn getsockopt<T: Copy + Default>(
    port: &str,
    fd: RawFd,
    level: i32,
    name: i32,
    what: &str,
) -> Result<T, NetdevError> {
    let mut val = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is a live `T` of `len` bytes the kernel may write.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut val as *mut T).cast(), &mut len) };
    if rc < 0 {
        return Err(NetdevError::last_os(port, what));
    }
    Ok(val)
}

/// A shared mapping of a descriptor (a packet ring, an XDP ring, a UMEM),
/// unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; which thread
// touches it is governed by the owner (one queue, one thread at a time).
unsafe impl Send for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` at `offset`, read-write, shared.
    pub fn map(
        port: &str,
        fd: RawFd,
        len: usize,
        offset: i64,
        what: &str,
    ) -> Result<Mmap, NetdevError> {
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL); no
        // existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(NetdevError::last_os(port, what));
        }
        Ok(Mmap { ptr: p.cast(), len })
    }

    /// Anonymous private memory of `len` bytes (an AF_XDP UMEM), zeroed.
    pub fn anonymous(port: &str, len: usize) -> Result<Mmap, NetdevError> {
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(NetdevError::last_os(port, "mmap (umem)"));
        }
        Ok(Mmap { ptr: p.cast(), len })
    }

    /// Start of the mapping.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length in bytes.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Waits until one of `fds` is readable or `timeout_ms` passes (an idle
/// PMD's back-off). Returns how many are readable (0 on timeout or
/// interruption).
pub fn wait_readable(fds: &[RawFd], timeout_ms: i32) -> usize {
    wait_readable_us(fds, u64::from(timeout_ms.max(0) as u32) * 1000)
}

/// As [`wait_readable`], the timeout in microseconds (`ppoll(2)`), so
/// that a `pmd-maxsleep` below a millisecond is a sleep on the queues,
/// not a blind one.
pub fn wait_readable_us(fds: &[RawFd], timeout_us: u64) -> usize {
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; 64];
    let n = fds.len().min(pfds.len());
    for (p, fd) in pfds.iter_mut().zip(fds) {
        p.fd = *fd;
        p.events = libc::POLLIN;
    }
    if n == 0 {
        std::thread::sleep(std::time::Duration::from_micros(timeout_us));
        return 0;
    }
    let ts = libc::timespec {
        tv_sec: (timeout_us / 1_000_000) as libc::time_t,
        tv_nsec: ((timeout_us % 1_000_000) * 1000) as libc::c_long,
    };
    // SAFETY: `pfds[..n]` is a valid, initialised array of pollfd and `ts`
    // a valid timespec; no signal mask is passed.
    let rc = unsafe { libc::ppoll(pfds.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
    rc.max(0) as usize
}
