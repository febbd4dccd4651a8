//! `tap:NAME`: a tap interface the port creates — the bridge's
//! host-facing port (OVS's LOCAL/internal port) — brought up, and deleted
//! when the port closes (the tap is not persistent, so closing its
//! descriptor removes it, also when the process dies).
//!
//! Frames are read and written one per `read`/`write` call on the
//! non-blocking tap descriptor (no `IFF_VNET_HDR`: the host stack
//! segments and checksums before handing frames to the tap). An
//! interface of that name that already exists is refused, so a port never
//! takes over somebody else's interface.
#![allow(unsafe_code)]

use crate::sys;
use crate::{NetdevError, OpenPort, PortSpec, QueueStats, RxMeta, RxQueue, TxFrame, TxQueue};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `TUNSETIFF` (`_IOW('T', 202, int)`).
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `IFF_TAP`.
const IFF_TAP: libc::c_short = 0x0002;
/// `IFF_NO_PI`: no packet-information prefix.
const IFF_NO_PI: libc::c_short = 0x1000;
/// Largest frame read from the tap (64 KiB + Ethernet and VLAN headers).
const TAP_BUF: usize = 65_536 + 64;

/// Receives from the tap.
#[derive(Debug)]
pub struct TapRx {
    port: String,
    fd: OwnedFd,
    buf: Vec<u8>,
    stats: QueueStats,
}

impl RxQueue for TapRx {
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8], RxMeta)) -> Result<usize, NetdevError> {
        let mut n = 0;
        while n < max {
            // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
            let r = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                )
            };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => break,
                    _ => return Err(NetdevError::os(&self.port, "read", e)),
                }
            }
            let len = r as usize;
            self.stats.packets += 1;
            self.stats.bytes += len as u64;
            f(&self.buf[..len.min(self.buf.len())], RxMeta::default());
            n += 1;
        }
        Ok(n)
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// Transmits to the tap (frames reach the host stack).
#[derive(Debug)]
pub struct TapTx {
    fd: OwnedFd,
    stats: QueueStats,
}

impl TxQueue for TapTx {
    fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize {
        let mut n = 0;
        for f in frames {
            // SAFETY: `f.data` is a live slice of `f.data.len()` bytes.
            let r =
                unsafe { libc::write(self.fd.as_raw_fd(), f.data.as_ptr().cast(), f.data.len()) };
            if r < 0 {
                self.stats.dropped += 1;
            } else {
                n += 1;
                self.stats.packets += 1;
                self.stats.bytes += f.data.len() as u64;
            }
        }
        n
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// Opens a `tap:` port: creates the interface and brings it up; `extra`
/// more transmit queues (descriptors of the same tap).
pub fn open(spec: &PortSpec, extra: usize) -> Result<OpenPort, NetdevError> {
    let port = spec.to_string();
    let PortSpec::Tap { name } = spec else {
        return Err(NetdevError::BadSpec {
            spec: port,
            reason: "not a tap port".into(),
        });
    };
    if sys::ifindex(&port, name).is_ok() {
        return Err(NetdevError::os(
            &port,
            format!("cannot create tap '{name}'"),
            std::io::Error::from_raw_os_error(libc::EEXIST),
        ));
    }
    // SAFETY: a constant NUL-terminated path; flags are plain integers.
    let raw = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(NetdevError::last_os(&port, "open /dev/net/tun"));
    }
    // SAFETY: `raw` was just returned by open() and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut ifr = ifreq_named(name);
    ifr.ifr_ifru.ifru_flags = IFF_TAP | IFF_NO_PI;
    // SAFETY: `ifr` is a valid ifreq with a NUL-terminated name, which
    // TUNSETIFF reads and updates in place.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut ifr) };
    if rc < 0 {
        return Err(NetdevError::last_os(
            &port,
            format!("cannot create tap '{name}'"),
        ));
    }
    set_up(&port, name)?;
    let tx_fd = fd
        .try_clone()
        .map_err(|e| NetdevError::os(&port, "dup", e))?;
    let mut more_tx: Vec<Box<dyn TxQueue>> = Vec::new();
    for _ in 0..extra {
        more_tx.push(Box::new(TapTx {
            fd: fd
                .try_clone()
                .map_err(|e| NetdevError::os(&port, "dup", e))?,
            stats: QueueStats::default(),
        }));
    }
    let p = OpenPort {
        spec: spec.clone(),
        kind: "tap",
        detail: String::new(),
        rxqs: vec![Box::new(TapRx {
            port: port.clone(),
            fd,
            buf: vec![0; TAP_BUF],
            stats: QueueStats::default(),
        })],
        tx: Box::new(TapTx {
            fd: tx_fd,
            stats: QueueStats::default(),
        }),
        more_tx,
        guard: None,
    };
    // Another bridge may take its tunnel packets (see `crate::tapoff`).
    crate::tapoff::attach_to_tap(name, p)
}

/// An `ifreq` with `name` (at most 15 bytes, checked by the spec parser).
fn ifreq_named(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data for which all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes().take(15)) {
        *d = s as libc::c_char;
    }
    ifr
}

/// Sets `IFF_UP` on `name`.
fn set_up(port: &str, name: &str) -> Result<(), NetdevError> {
    let s = sys::socket(port, libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    let mut ifr = ifreq_named(name);
    // SAFETY: `ifr` is a valid ifreq naming the interface; the kernel
    // writes the flags into it.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut ifr) } < 0 {
        return Err(NetdevError::last_os(port, "SIOCGIFFLAGS"));
    }
    // SAFETY: reading the union field SIOCGIFFLAGS just wrote.
    let flags = unsafe { ifr.ifr_ifru.ifru_flags };
    ifr.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: as above; the kernel reads the flags.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS as _, &ifr) } < 0 {
        return Err(NetdevError::last_os(
            port,
            "bring the tap up (SIOCSIFFLAGS)",
        ));
    }
    Ok(())
}
