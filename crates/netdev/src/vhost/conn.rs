//! The per-port control thread: owns the vhost-user socket (listening in
//! server mode, connecting and reconnecting every second in client
//! mode), reads messages with their descriptors, and keeps the device
//! state — features, guest memory, each virtqueue's size, addresses,
//! base, eventfds and enable flag. Whenever a virtqueue's state changes
//! it withdraws the ring from the PMDs first and installs a new one after
//! (the hand-over in `queue`); a new memory table withdraws every ring
//! before the old mappings go.
//!
//! A disconnect (or a protocol error, which closes the connection) resets
//! the device: rings withdrawn, descriptors closed, memory unmapped; the
//! port then waits for the next frontend. The thread never panics and
//! notices the port closing within 100 ms.
#![allow(unsafe_code)]

use super::log::DirtyLog;
use super::memory::{GuestMemory, RegionDesc};
use super::packed::PackedRing;
use super::protocol::{
    self, decode, feature, protocol_feature, req, Header, Msg, VringState, HDR_LEN, MAX_FDS,
};
use super::queue::{ActiveRing, AnyRing, QueueSlot, RingCfg};
use super::ring::{used_index_in, RingAddrs, Vring, MAX_QUEUE_SIZE};
use crate::NetdevError;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The control thread; stopped and joined on drop (the port's guard).
pub(crate) struct Control {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The socket file this port created (server mode), removed on drop.
    created: Option<PathBuf>,
}

impl Drop for Control {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(p) = self.created.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Starts the control thread of `port` (`queues` queue pairs, `slots`
/// one per virtqueue). In server mode the socket is bound here, so a bad
/// path fails the open.
pub(crate) fn start(
    port: &str,
    path: &Path,
    client: bool,
    queues: usize,
    slots: Vec<Arc<QueueSlot>>,
) -> Result<Control, NetdevError> {
    let listener = if client {
        None
    } else {
        use std::os::unix::fs::FileTypeExt;
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if m.file_type().is_socket() {
                // A stale socket of an earlier run (as OVS does).
                let _ = std::fs::remove_file(path);
            }
        }
        let l = UnixListener::bind(path)
            .map_err(|e| NetdevError::os(port, format!("bind {}", path.display()), e))?;
        Some(l)
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut dev = Device::new(port, queues, slots);
    let (stop2, path2) = (stop.clone(), path.to_path_buf());
    let created = listener.is_some().then(|| path.to_path_buf());
    let thread = std::thread::Builder::new()
        .name("vhost-user".into())
        .spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                let stream = match &listener {
                    Some(l) => accept(l, &stop2),
                    None => connect(&path2, &stop2),
                };
                if let Some(s) = stream {
                    dev.serve(s, &stop2);
                    dev.reset();
                }
            }
            dev.reset();
        })
        .map_err(|e| NetdevError::os(port, "spawn the vhost-user thread", e))?;
    Ok(Control {
        stop,
        thread: Some(thread),
        created,
    })
}

/// Waits for a frontend (100 ms steps).
fn accept(l: &UnixListener, stop: &AtomicBool) -> Option<UnixStream> {
    while !stop.load(Ordering::SeqCst) {
        if crate::wait_readable(&[l.as_raw_fd()], 100) > 0 {
            if let Ok((s, _)) = l.accept() {
                return Some(s);
            }
        }
    }
    None
}

/// Connects, trying again every second.
fn connect(path: &Path, stop: &AtomicBool) -> Option<UnixStream> {
    while !stop.load(Ordering::SeqCst) {
        if let Ok(s) = UnixStream::connect(path) {
            return Some(s);
        }
        for _ in 0..10 {
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    None
}

/// What the control thread knows of one virtqueue.
#[derive(Debug, Default)]
struct VqCtl {
    num: u16,
    addrs: Option<RingAddrs>,
    /// The used area's guest-physical address to log (`VHOST_VRING_F_LOG`).
    log_used: Option<u64>,
    /// Where the ring resumes (`SET_VRING_BASE`; a packed ring's wrap
    /// counter in bit 15).
    base: u32,
    /// A kick was set: the ring is started (until `GET_VRING_BASE`).
    started: bool,
    enabled: bool,
    call: Option<OwnedFd>,
    kick: Option<OwnedFd>,
    err: Option<OwnedFd>,
}

/// The device state of one port.
struct Device {
    port: String,
    queues: usize,
    slots: Vec<Arc<QueueSlot>>,
    vqs: Vec<VqCtl>,
    mem: Arc<GuestMemory>,
    /// The dirty-page bitmap of a migration (`SET_LOG_BASE`); rings log
    /// into it while the features carry `LOG_ALL`.
    log: Option<Arc<DirtyLog>>,
    features: u64,
    protocol: u64,
    status: u64,
}

impl Device {
    fn new(port: &str, queues: usize, slots: Vec<Arc<QueueSlot>>) -> Device {
        Device {
            port: port.to_string(),
            queues,
            vqs: (0..slots.len()).map(|_| VqCtl::default()).collect(),
            slots,
            mem: Arc::new(GuestMemory::empty()),
            log: None,
            features: 0,
            protocol: 0,
            status: 0,
        }
    }

    /// Back to the state before any frontend: rings withdrawn first.
    fn reset(&mut self) {
        for s in &self.slots {
            s.withdraw();
        }
        for v in &mut self.vqs {
            *v = VqCtl::default();
        }
        self.mem = Arc::new(GuestMemory::empty());
        self.log = None;
        self.features = 0;
        self.protocol = 0;
        self.status = 0;
    }

    /// Reads and answers messages until the frontend goes or `stop`.
    fn serve(&mut self, mut s: UnixStream, stop: &AtomicBool) {
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut payload = vec![0u8; protocol::MAX_PAYLOAD];
        let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(1 + self.vqs.len());
        while !stop.load(Ordering::SeqCst) {
            if !self.wait(&s, &mut pfds) {
                continue;
            }
            let mut hdr = [0u8; HDR_LEN];
            let fds = match recv_with_fds(&s, &mut hdr) {
                Ok(Some(fds)) => fds,
                Ok(None) => return, // the frontend closed
                Err(e) => {
                    eprintln!("flowpath: port '{}': vhost-user: {e}", self.port);
                    return;
                }
            };
            let h = match Header::parse(&hdr) {
                Ok(h) => h,
                Err(e) => {
                    eprintln!("flowpath: port '{}': vhost-user: {e}", self.port);
                    return;
                }
            };
            let p = &mut payload[..h.size as usize];
            if s.read_exact(p).is_err() {
                return;
            }
            let msg = match decode(&h, p) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("flowpath: port '{}': vhost-user: {e}", self.port);
                    return;
                }
            };
            // Decided before the request runs: a reset forgets REPLY_ACK.
            let ack = h.need_reply()
                && self.protocol & protocol_feature::REPLY_ACK != 0
                && !protocol::has_reply(h.request);
            let (reply, ok) = match self.handle(msg, fds) {
                Ok(r) => (r, true),
                Err(why) => {
                    eprintln!(
                        "flowpath: port '{}': vhost-user request {}: {why}",
                        self.port, h.request
                    );
                    // A migration must not go on without the log: its
                    // reply has no way to say the log failed.
                    if h.request == req::SET_LOG_BASE {
                        return;
                    }
                    (None, false)
                }
            };
            let out = match reply {
                Some(r) => Some(r),
                None if ack => Some(protocol::reply_u64(h.request, u64::from(!ok))),
                // A request that must be answered and failed: answer 0
                // rather than leave the frontend waiting.
                None if protocol::has_reply(h.request) => Some(protocol::reply_u64(h.request, 0)),
                None => None,
            };
            if let Some(o) = out {
                if s.write_all(&o).is_err() {
                    return;
                }
            }
        }
    }

    /// Waits up to 100 ms for a message or a kick on one of the guest's
    /// transmit virtqueues (passed on to the idle PMD, see
    /// `QueueSlot::kick`); true when a message waits.
    fn wait(&self, s: &UnixStream, pfds: &mut Vec<libc::pollfd>) -> bool {
        pfds.clear();
        let watch = |fd: i32| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        pfds.push(watch(s.as_raw_fd()));
        for (i, v) in self.vqs.iter().enumerate() {
            match &v.kick {
                Some(k) if i % 2 == 1 && !self.slots[i].kicked() => pfds.push(watch(k.as_raw_fd())),
                // Keeps `pfds[1 + i]` lined up with virtqueue `i`.
                _ => pfds.push(watch(-1)),
            }
        }
        // SAFETY: `pfds` is a live, initialised array of `pfds.len()`
        // pollfd entries (negative descriptors are ignored by poll).
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 100) };
        if rc <= 0 {
            return false;
        }
        for (i, p) in pfds[1..].iter().enumerate() {
            if p.fd >= 0 && p.revents & libc::POLLIN != 0 {
                let mut v = 0u64;
                // SAFETY: reading 8 bytes into a live u64 from the guest's
                // kick eventfd, which poll found readable (so the read does
                // not block even if the frontend made it blocking).
                unsafe { libc::read(p.fd, (&mut v as *mut u64).cast(), 8) };
                self.slots[i].kick();
            }
        }
        pfds[0].revents != 0
    }

    fn vq(&self, index: u32) -> Result<usize, String> {
        let i = index as usize;
        if i < self.vqs.len() {
            Ok(i)
        } else {
            Err(format!(
                "virtqueue {index} out of range ({} queue pairs)",
                self.queues
            ))
        }
    }

    /// Withdraws virtqueue `i` from the PMDs, keeping where it stopped.
    fn stop(&mut self, i: usize) {
        if let Some(a) = self.slots[i].withdraw() {
            self.vqs[i].base = a.ring.base();
        }
    }

    /// Hands virtqueue `i` to the PMDs if it is ready to run.
    fn start(&mut self, i: usize) {
        let v = &self.vqs[i];
        let enabled = v.enabled || self.features & feature::PROTOCOL_FEATURES == 0;
        let Some(addrs) = v.addrs else { return };
        if !v.started || !enabled || v.num == 0 {
            return;
        }
        let event_idx = self.features & feature::RING_EVENT_IDX != 0;
        let logging = self.features & feature::LOG_ALL != 0;
        let ring = if self.features & feature::RING_PACKED != 0 {
            PackedRing::new(self.mem.clone(), addrs, v.num, v.base, event_idx).map(|mut r| {
                if logging {
                    r.set_log(self.log.clone());
                }
                AnyRing::Packed(r)
            })
        } else {
            // As DPDK's backend does: where the guest's used index and the
            // base disagree (chains the frontend counted as taken but that
            // were never returned), the ring resumes from the used index —
            // from the base, the guest would read used entries nobody
            // wrote. Those chains are lost (their frames dropped).
            let mut base = v.base as u16;
            if let Some(used) = used_index_in(&self.mem, &addrs).filter(|&u| u != base) {
                eprintln!(
                    "flowpath: port '{}': virtqueue {i}: the guest's used index {used} \
                     disagrees with the base {base}: resuming from {used}",
                    self.port
                );
                base = used;
            }
            Vring::new(self.mem.clone(), addrs, v.num, base, event_idx).map(|mut r| {
                if logging {
                    r.set_log(self.log.clone(), v.log_used);
                }
                AnyRing::Split(r)
            })
        };
        match ring {
            Ok(ring) => {
                let mergeable = self.features & feature::NET_MRG_RXBUF != 0;
                let hdr_len = if mergeable || self.features & feature::VERSION_1 != 0 {
                    12
                } else {
                    10
                };
                self.slots[i].install(ActiveRing {
                    ring,
                    cfg: RingCfg {
                        call: v.call.as_ref().map_or(-1, |f| f.as_raw_fd()),
                        hdr_len,
                        mergeable,
                        offloads: super::queue::Offloads::of(self.features),
                    },
                });
                // A sleeping PMD asked a ring that is gone for kicks: wake
                // it to look at (and arm) this one (the guest's transmit
                // virtqueues are the odd ones).
                if i % 2 == 1 {
                    self.slots[i].kick();
                }
            }
            Err(why) => eprintln!(
                "flowpath: port '{}': virtqueue {i} not started: {why}",
                self.port
            ),
        }
    }

    /// Applies one request; `Ok(Some(reply))` for requests that answer.
    fn handle(&mut self, msg: Msg, mut fds: Vec<OwnedFd>) -> Result<Option<Vec<u8>>, String> {
        let all = 0..self.vqs.len();
        match msg {
            Msg::GetFeatures => {
                return Ok(Some(protocol::reply_u64(
                    req::GET_FEATURES,
                    feature::OFFERED,
                )))
            }
            Msg::SetFeatures(f) => {
                if f & !feature::OFFERED != 0 {
                    return Err(format!("features {f:#x} were not offered"));
                }
                all.clone().for_each(|i| self.stop(i));
                self.features = f;
                all.for_each(|i| self.start(i));
            }
            Msg::GetProtocolFeatures => {
                return Ok(Some(protocol::reply_u64(
                    req::GET_PROTOCOL_FEATURES,
                    protocol_feature::OFFERED,
                )))
            }
            Msg::SetProtocolFeatures(f) => self.protocol = f & protocol_feature::OFFERED,
            Msg::SetOwner | Msg::Ignored => {}
            // Only with the protocol feature (the specification's rule);
            // the guest's first transmit queue carries it.
            Msg::SendRarp(mac) => {
                if self.protocol & protocol_feature::RARP != 0 {
                    self.slots[1].inject(rarp(mac));
                }
            }
            Msg::ResetOwner => self.reset(),
            Msg::SetMemTable(regions) => {
                if fds.len() != regions.len() {
                    return Err(format!(
                        "{} regions but {} descriptors",
                        regions.len(),
                        fds.len()
                    ));
                }
                let pairs: Vec<(RegionDesc, OwnedFd)> = regions.into_iter().zip(fds).collect();
                let mem = GuestMemory::map(&self.port, &pairs).map_err(|e| e.to_string())?;
                // Every ring lets go of the old memory before it is unmapped
                // (when the last `Arc` drops here).
                all.clone().for_each(|i| self.stop(i));
                self.mem = Arc::new(mem);
                all.for_each(|i| self.start(i));
            }
            Msg::SetLogBase { size, offset } => {
                let [fd] = &fds[..] else {
                    return Err(format!("{} descriptors with SET_LOG_BASE", fds.len()));
                };
                let log = DirtyLog::map(&self.port, fd, size, offset).map_err(|e| e.to_string())?;
                // Rings let go of the old bitmap before it is unmapped.
                all.clone().for_each(|i| self.stop(i));
                self.log = Some(Arc::new(log));
                all.for_each(|i| self.start(i));
                return Ok(Some(protocol::encode(
                    req::SET_LOG_BASE,
                    protocol::FLAG_VERSION | protocol::FLAG_REPLY,
                    &[],
                )));
            }
            // Not needed with a shared bitmap; the descriptor is closed.
            Msg::SetLogFd => {}
            Msg::SetVringNum(VringState { index, num }) => {
                let i = self.vq(index)?;
                // (A packed ring's size need not be a power of two.)
                let packed = self.features & feature::RING_PACKED != 0;
                if num == 0 || num > u32::from(MAX_QUEUE_SIZE) || !(packed || num.is_power_of_two())
                {
                    return Err(format!("ring size {num}"));
                }
                self.stop(i);
                self.vqs[i].num = num as u16;
                self.start(i);
            }
            Msg::SetVringAddr { index, addrs, log } => {
                let i = self.vq(index)?;
                self.stop(i);
                self.vqs[i].addrs = Some(addrs);
                self.vqs[i].log_used = log;
                self.start(i);
            }
            Msg::SetVringBase(VringState { index, num }) => {
                let i = self.vq(index)?;
                self.stop(i);
                self.vqs[i].base = num;
                self.start(i);
            }
            Msg::GetVringBase(index) => {
                let i = self.vq(index)?;
                self.stop(i);
                let v = &mut self.vqs[i];
                v.started = false;
                v.kick = None;
                return Ok(Some(protocol::reply_state(
                    req::GET_VRING_BASE,
                    VringState { index, num: v.base },
                )));
            }
            Msg::SetVringFd {
                request,
                index,
                nofd,
            } => {
                let i = self.vq(index)?;
                let fd = if nofd { None } else { fds.pop() };
                if !nofd && fd.is_none() {
                    return Err("no descriptor came with the request".into());
                }
                self.stop(i);
                let v = &mut self.vqs[i];
                match request {
                    req::SET_VRING_KICK => {
                        v.kick = fd;
                        v.started = true;
                    }
                    req::SET_VRING_CALL => v.call = fd,
                    _ => v.err = fd,
                }
                self.start(i);
            }
            Msg::GetQueueNum => {
                return Ok(Some(protocol::reply_u64(
                    req::GET_QUEUE_NUM,
                    self.queues as u64,
                )))
            }
            Msg::SetVringEnable(VringState { index, num }) => {
                let i = self.vq(index)?;
                self.stop(i);
                self.vqs[i].enabled = num != 0;
                self.start(i);
            }
            Msg::GetStatus => return Ok(Some(protocol::reply_u64(req::GET_STATUS, self.status))),
            Msg::SetStatus(s) => {
                // Status 0 resets the device: the rings stop where they are
                // (a later GET_VRING_BASE answers from there) until the
                // frontend sets them up again, as DPDK's backend does. QEMU
                // sends it first when it stops a device, a migrating
                // guest's included.
                if s == 0 && self.status != 0 {
                    all.for_each(|i| self.stop(i));
                    for v in &mut self.vqs {
                        v.started = false;
                    }
                }
                self.status = s;
            }
            Msg::Unknown(r) => return Err(format!("request {r} is not supported")),
        }
        Ok(None)
    }
}

/// Reads a message header and the descriptors that came with it.
/// `Ok(None)`: the peer closed the connection.
fn recv_with_fds(s: &UnixStream, hdr: &mut [u8; HDR_LEN]) -> std::io::Result<Option<Vec<OwnedFd>>> {
    // Room for MAX_FDS descriptors, aligned for cmsghdr.
    let mut cbuf = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: hdr.as_mut_ptr().cast(),
        iov_len: HDR_LEN,
    };
    // SAFETY: msghdr is plain data for which all-zero is valid.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf.as_mut_ptr().cast();
    mh.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: `mh` points to a live iovec over `hdr` and a live control
    // buffer of the length given; the kernel writes only inside them.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut mh, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote into `cbuf`
    // with the CMSG_* helpers, which stay inside `msg_controllen`; each
    // SCM_RIGHTS payload holds descriptors now owned by this process.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<i32>();
                let len = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                for k in 0..len / 4 {
                    let fd = std::ptr::read_unaligned(data.add(k));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    if n == 0 {
        return Ok(None);
    }
    let got = n as usize;
    if got < HDR_LEN {
        let mut r: &UnixStream = s;
        r.read_exact(&mut hdr[got..])?;
    }
    if fds.len() > MAX_FDS || mh.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(std::io::Error::other("too many descriptors with a message"));
    }
    Ok(Some(fds))
}

/// The RARP request a migrated guest's port broadcasts for it when asked
/// (`SEND_RARP`), as QEMU's own announcement is made (RFC 903: Ethernet,
/// IPv4, operation 3; both hardware addresses the guest's, no protocol
/// addresses), padded to the Ethernet minimum.
pub(crate) fn rarp(mac: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&0x8035u16.to_be_bytes());
    f[14..16].copy_from_slice(&1u16.to_be_bytes()); // Ethernet
    f[16..18].copy_from_slice(&0x0800u16.to_be_bytes()); // IPv4
    f[18] = 6;
    f[19] = 4;
    f[20..22].copy_from_slice(&3u16.to_be_bytes()); // reverse request
    f[22..28].copy_from_slice(&mac);
    f[32..38].copy_from_slice(&mac);
    f
}
