//! A test frontend for vhost-user ports: plays the driver side (what QEMU
//! or DPDK's virtio-user does) over a real Unix socket — guest memory in a
//! memfd passed with `SCM_RIGHTS`, split rings laid out in it, frames put
//! on its transmit rings and read from its receive rings. Written from
//! the vhost-user and virtio specifications, independently of the port's
//! own codec, so the two check each other.
//!
//! Layout: one memfd of [`MEM_SIZE`] bytes at guest-physical
//! [`GPA_BASE`]; the frontend's user addresses are where it mapped the
//! memfd. Each virtqueue gets [`QSIZE`] descriptors, its rings, and one
//! [`BUF`]-byte buffer per descriptor; descriptor `i` always points at
//! buffer `i` unless a test writes its own.
#![allow(unsafe_code, dead_code, missing_docs)]

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

pub const MEM_SIZE: usize = 16 << 20;
pub const GPA_BASE: u64 = 0x4000_0000;
pub const QSIZE: u16 = 256;
pub const BUF: usize = 2048;
pub const HDR: usize = 12;

pub const F_CSUM: u64 = 1 << 0;
pub const F_GUEST_CSUM: u64 = 1 << 1;
pub const F_GUEST_TSO4: u64 = 1 << 7;
pub const F_HOST_TSO4: u64 = 1 << 11;
pub const F_MRG_RXBUF: u64 = 1 << 15;
pub const F_MQ: u64 = 1 << 22;
pub const F_LOG_ALL: u64 = 1 << 26;
pub const F_INDIRECT: u64 = 1 << 28;
pub const F_EVENT_IDX: u64 = 1 << 29;
pub const F_PROTOCOL_FEATURES: u64 = 1 << 30;
pub const F_VERSION_1: u64 = 1 << 32;
pub const PF_MQ: u64 = 1;
pub const PF_LOG_SHMFD: u64 = 1 << 1;
pub const PF_RARP: u64 = 1 << 2;
pub const PF_REPLY_ACK: u64 = 1 << 3;

pub const D_NEXT: u16 = 1;
pub const D_WRITE: u16 = 2;
pub const D_INDIRECT: u16 = 4;

/// One virtqueue as the driver sees it (offsets into guest memory).
#[derive(Debug)]
pub struct DriverQueue {
    pub desc: usize,
    pub avail: usize,
    pub used: usize,
    pub bufs: usize,
    /// Next available index the driver writes.
    pub avail_idx: u16,
    /// Used entries consumed so far.
    pub last_used: u16,
    pub kick: OwnedFd,
    pub call: OwnedFd,
    /// Kicks written (the port asked for them).
    pub kicks: u64,
}

pub struct Frontend {
    pub sock: UnixStream,
    memfd: OwnedFd,
    mem: *mut u8,
    pub queues: Vec<DriverQueue>,
    pub features: u64,
}

fn eventfd() -> OwnedFd {
    // SAFETY: plain flags; the new descriptor is owned below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    assert!(fd >= 0, "eventfd");
    // SAFETY: a fresh descriptor owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Reads an eventfd's counter (0 if nothing was written).
pub fn eventfd_count(fd: &OwnedFd) -> u64 {
    let mut v = 0u64;
    // SAFETY: reading 8 bytes into a live u64.
    let r = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    if r == 8 {
        v
    } else {
        0
    }
}

fn msg(request: u32, flags: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&request.to_le_bytes());
    v.extend_from_slice(&(flags | 1).to_le_bytes());
    v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

fn send_with_fds(sock: &UnixStream, bytes: &[u8], fds: &[RawFd]) {
    let mut cbuf = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain data for which zero is valid.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    if !fds.is_empty() {
        // SAFETY: CMSG_SPACE is a pure computation.
        let space = unsafe { libc::CMSG_SPACE((4 * fds.len()) as u32) } as usize;
        mh.msg_control = cbuf.as_mut_ptr().cast();
        mh.msg_controllen = space as _;
        // SAFETY: the control buffer is large enough for `fds` (8 at most,
        // 128 bytes); CMSG_* stay inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&mh);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN((4 * fds.len()) as u32) as _;
            let d = libc::CMSG_DATA(c).cast::<i32>();
            for (k, fd) in fds.iter().enumerate() {
                std::ptr::write_unaligned(d.add(k), *fd);
            }
        }
    }
    // SAFETY: `mh` points to live buffers of the lengths given.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &mh, libc::MSG_NOSIGNAL) };
    assert_eq!(n as usize, bytes.len(), "sendmsg");
}

impl Frontend {
    /// Connects to a port listening on `path` (waits up to 5 s for it).
    pub fn connect(path: &std::path::Path) -> UnixStream {
        let t0 = Instant::now();
        loop {
            match UnixStream::connect(path) {
                Ok(s) => return s,
                Err(e) if t0.elapsed() > Duration::from_secs(5) => panic!("connect: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// A frontend over `sock` with `pairs` queue pairs, negotiated and
    /// started as QEMU does it.
    pub fn start(sock: UnixStream, pairs: usize, features: u64) -> Frontend {
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (memfd, p) = shared_memfd(MEM_SIZE);
        let mut f = Frontend {
            sock,
            memfd,
            mem: p.cast(),
            queues: Vec::new(),
            features,
        };
        let offered = f.get_u64(1);
        assert_eq!(offered & features, features, "offered {offered:#x}");
        f.set_u64(2, features);
        if features & F_PROTOCOL_FEATURES != 0 {
            let pf = f.get_u64(15);
            assert_ne!(pf & PF_REPLY_ACK, 0);
            assert_ne!(pf & PF_LOG_SHMFD, 0);
            assert_ne!(pf & PF_RARP, 0);
            f.set_u64(16, PF_MQ | PF_LOG_SHMFD | PF_RARP | PF_REPLY_ACK);
            assert!(f.get_u64(17) >= pairs as u64);
        }
        f.request(3, &[], &[]);
        f.set_mem_table();
        // Lay out the queues: rings then buffers, page aligned.
        let mut at = 0usize;
        let mut alloc = |n: usize| {
            let a = at;
            at += n.div_ceil(4096) * 4096;
            a
        };
        for _ in 0..2 * pairs {
            let q = QSIZE as usize;
            let desc = alloc(16 * q);
            let avail = alloc(6 + 2 * q);
            let used = alloc(6 + 8 * q);
            let bufs = alloc(BUF * q);
            f.queues.push(DriverQueue {
                desc,
                avail,
                used,
                bufs,
                avail_idx: 0,
                last_used: 0,
                kick: eventfd(),
                call: eventfd(),
                kicks: 0,
            });
        }
        assert!(at <= MEM_SIZE);
        for i in 0..2 * pairs {
            for d in 0..QSIZE {
                let write = if i % 2 == 0 { D_WRITE } else { 0 };
                f.set_desc(i, d, f.buf_gpa(i, d), BUF as u32, write, 0);
            }
            if i % 2 == 0 {
                // Receive queue: every buffer posted.
                for d in 0..QSIZE {
                    f.post(i, d);
                }
            }
            f.start_queue(i);
        }
        f
    }

    pub fn start_queue(&mut self, i: usize) {
        self.start_queue_at(i, 0);
    }

    /// Sets virtqueue `i` up again from index `base` (`SET_VRING_BASE`).
    pub fn start_queue_at(&mut self, i: usize, base: u16) {
        let q = &self.queues[i];
        let (kick, call) = (q.kick.as_raw_fd(), q.call.as_raw_fd());
        let idx = i as u32;
        self.request(8, &state(idx, u32::from(QSIZE)), &[]);
        self.request(10, &state(idx, u32::from(base)), &[]);
        self.set_vring_addr(i, None);
        self.request(12, &u64::from(idx).to_le_bytes(), &[kick]);
        self.request(13, &u64::from(idx).to_le_bytes(), &[call]);
        if self.features & F_PROTOCOL_FEATURES != 0 {
            self.request(18, &state(idx, 1), &[]);
        }
    }

    /// `SET_VRING_ADDR` for virtqueue `i`, its used area logged at
    /// guest-physical `log` if given (`VHOST_VRING_F_LOG`).
    pub fn set_vring_addr(&mut self, i: usize, log: Option<u64>) {
        let q = &self.queues[i];
        let (desc, avail, used) = (self.uva(q.desc), self.uva(q.avail), self.uva(q.used));
        let mut a = Vec::new();
        a.extend_from_slice(&(i as u32).to_le_bytes());
        a.extend_from_slice(&u32::from(log.is_some()).to_le_bytes());
        a.extend_from_slice(&desc.to_le_bytes());
        a.extend_from_slice(&used.to_le_bytes());
        a.extend_from_slice(&avail.to_le_bytes());
        a.extend_from_slice(&log.unwrap_or(0).to_le_bytes());
        self.request(9, &a, &[]);
    }

    /// `SET_FEATURES` again (as QEMU turns `LOG_ALL` on and off).
    pub fn set_features(&mut self, features: u64) {
        self.features = features;
        self.set_u64(2, features);
        // (Not acknowledged: a request that is answers once it is done.)
        self.get_u64(17);
    }

    /// `SET_LOG_BASE` with a shared bitmap of `size` bytes at `offset` in
    /// `fd` (as QEMU sends it: no acknowledgement asked, an empty reply).
    pub fn set_log_base(&mut self, fd: RawFd, size: u64, offset: u64) {
        let mut p = Vec::new();
        p.extend_from_slice(&size.to_le_bytes());
        p.extend_from_slice(&offset.to_le_bytes());
        send_with_fds(&self.sock, &msg(6, 0, &p), &[fd]);
        let r = self.read_reply(6);
        assert!(r.is_empty(), "SET_LOG_BASE reply {r:?}");
    }

    pub fn set_mem_table(&mut self) {
        let mut p = Vec::new();
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&GPA_BASE.to_le_bytes());
        p.extend_from_slice(&(MEM_SIZE as u64).to_le_bytes());
        p.extend_from_slice(&(self.mem as u64).to_le_bytes());
        p.extend_from_slice(&0u64.to_le_bytes());
        let fd = self.memfd.as_raw_fd();
        self.request(5, &p, &[fd]);
    }

    /// A request that answers with one u64.
    pub fn get_u64(&mut self, request: u32) -> u64 {
        send_with_fds(&self.sock, &msg(request, 0, &[]), &[]);
        let r = self.read_reply(request);
        u64::from_le_bytes(r[..8].try_into().unwrap())
    }

    fn set_u64(&mut self, request: u32, v: u64) {
        self.request(request, &v.to_le_bytes(), &[]);
    }

    /// Sends a request without its own reply; with REPLY_ACK negotiated
    /// asks for the acknowledgement and checks it.
    pub fn request(&mut self, request: u32, payload: &[u8], fds: &[RawFd]) {
        let ack = self.features & F_PROTOCOL_FEATURES != 0 && request != 2 && request != 16;
        let flags = if ack { 0x8 } else { 0 };
        send_with_fds(&self.sock, &msg(request, flags, payload), fds);
        if ack {
            let r = self.read_reply(request);
            assert_eq!(r, 0u64.to_le_bytes(), "request {request} refused");
        }
    }

    /// `GET_VRING_BASE`.
    pub fn get_vring_base(&mut self, i: usize) -> u32 {
        send_with_fds(&self.sock, &msg(11, 0, &state(i as u32, 0)), &[]);
        let r = self.read_reply(11);
        u32::from_le_bytes(r[4..8].try_into().unwrap())
    }

    /// Sends a request and returns the acknowledgement's value.
    pub fn request_acked(&mut self, request: u32, payload: &[u8]) -> u64 {
        send_with_fds(&self.sock, &msg(request, 0x8, payload), &[]);
        let r = self.read_reply(request);
        u64::from_le_bytes(r[..8].try_into().unwrap())
    }

    fn read_reply(&mut self, request: u32) -> Vec<u8> {
        let mut h = [0u8; 12];
        self.sock.read_exact(&mut h).expect("reply header");
        assert_eq!(u32::from_le_bytes(h[0..4].try_into().unwrap()), request);
        assert_ne!(u32::from_le_bytes(h[4..8].try_into().unwrap()) & 0x4, 0);
        let n = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
        let mut p = vec![0u8; n];
        self.sock.read_exact(&mut p).expect("reply payload");
        p
    }

    /// Sends raw bytes (for malformed-message tests).
    pub fn send_raw(&mut self, b: &[u8]) {
        let _ = self.sock.write_all(b);
    }

    pub fn uva(&self, off: usize) -> u64 {
        self.mem as u64 + off as u64
    }

    pub fn gpa(&self, off: usize) -> u64 {
        GPA_BASE + off as u64
    }

    pub fn buf_gpa(&self, q: usize, d: u16) -> u64 {
        self.gpa(self.queues[q].bufs + BUF * usize::from(d))
    }

    fn ptr(&self, off: usize, len: usize) -> *mut u8 {
        assert!(off + len <= MEM_SIZE);
        // SAFETY: inside our mapping (asserted).
        unsafe { self.mem.add(off) }
    }

    pub fn write(&self, off: usize, b: &[u8]) {
        // SAFETY: `ptr` checked the range.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.ptr(off, b.len()), b.len()) };
    }

    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        // SAFETY: `ptr` checked the range.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr(off, len), v.as_mut_ptr(), len) };
        v
    }

    fn atomic16(&self, off: usize) -> &AtomicU16 {
        assert_eq!(off % 2, 0);
        // SAFETY: inside the mapping, 2-aligned, shared with the port.
        unsafe { &*(self.ptr(off, 2) as *const AtomicU16) }
    }

    pub fn set_desc(&self, q: usize, d: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&addr.to_le_bytes());
        b[8..12].copy_from_slice(&len.to_le_bytes());
        b[12..14].copy_from_slice(&flags.to_le_bytes());
        b[14..16].copy_from_slice(&next.to_le_bytes());
        self.write(self.queues[q].desc + 16 * usize::from(d), &b);
    }

    /// Offers descriptor `head` on queue `q`'s available ring.
    pub fn post(&mut self, q: usize, head: u16) {
        let dq = &self.queues[q];
        let slot = dq.avail + 4 + 2 * usize::from(dq.avail_idx % QSIZE);
        self.write(slot, &head.to_le_bytes());
        let old = dq.avail_idx;
        let idx = old.wrapping_add(1);
        self.atomic16(dq.avail + 2).store(idx, Ordering::Release);
        self.queues[q].avail_idx = idx;
        // Kick if the device asked (virtio 2.7.13: full barrier first).
        std::sync::atomic::fence(Ordering::SeqCst);
        let dq = &self.queues[q];
        let want = if self.features & F_EVENT_IDX != 0 {
            let ev = self
                .atomic16(dq.used + 4 + 8 * usize::from(QSIZE))
                .load(Ordering::Acquire);
            idx.wrapping_sub(ev).wrapping_sub(1) < idx.wrapping_sub(old)
        } else {
            self.atomic16(dq.used).load(Ordering::Acquire) & 1 == 0
        };
        if want {
            let one = 1u64;
            // SAFETY: writing 8 bytes from a live u64 to our eventfd.
            unsafe { libc::write(dq.kick.as_raw_fd(), (&one as *const u64).cast(), 8) };
            self.queues[q].kicks += 1;
        }
    }

    /// Sets the available index as a broken driver would.
    pub fn set_avail_idx(&mut self, q: usize, idx: u16) {
        let a = self.queues[q].avail;
        self.atomic16(a + 2).store(idx, Ordering::Release);
        self.queues[q].avail_idx = idx;
    }

    /// The used index the port published.
    pub fn used_idx(&self, q: usize) -> u16 {
        self.atomic16(self.queues[q].used + 2)
            .load(Ordering::Acquire)
    }

    /// Transmits `frame` on queue pair `pair` (its virtqueue 2·pair+1),
    /// with one descriptor; false if the ring is full.
    pub fn send(&mut self, pair: usize, frame: &[u8]) -> bool {
        self.send_hdr(pair, &[0u8; HDR], frame)
    }

    /// [`Frontend::send`] with virtio-net header `hdr`.
    pub fn send_hdr(&mut self, pair: usize, hdr: &[u8; HDR], frame: &[u8]) -> bool {
        let q = 2 * pair + 1;
        let in_flight = self.queues[q].avail_idx.wrapping_sub(self.used_idx(q));
        if in_flight >= QSIZE || frame.len() + HDR > BUF {
            return false;
        }
        let d = self.queues[q].avail_idx % QSIZE;
        let off = self.queues[q].bufs + BUF * usize::from(d);
        self.write(off, hdr);
        self.write(off + HDR, frame);
        let gpa = self.buf_gpa(q, d);
        self.set_desc(q, d, gpa, (HDR + frame.len()) as u32, 0, 0);
        self.post(q, d);
        true
    }

    /// Transmits `frame` in `parts` chained descriptors (header in the
    /// first), using descriptors from `first` on.
    pub fn send_chained(&mut self, pair: usize, frame: &[u8], parts: usize, first: u16) {
        let q = 2 * pair + 1;
        let mut data = vec![0u8; HDR];
        data.extend_from_slice(frame);
        let step = data.len().div_ceil(parts);
        for (k, chunk) in data.chunks(step).enumerate() {
            let d = first + k as u16;
            let off = self.queues[q].bufs + BUF * usize::from(d);
            self.write(off, chunk);
            let last = (k + 1) * step >= data.len();
            let gpa = self.buf_gpa(q, d);
            self.set_desc(
                q,
                d,
                gpa,
                chunk.len() as u32,
                if last { 0 } else { D_NEXT },
                d + 1,
            );
        }
        self.post(q, first);
    }

    /// Frames the port delivered on queue pair `pair`'s receive ring
    /// (virtqueue 2·pair), buffers given back unless `keep`.
    pub fn recv(&mut self, pair: usize, keep: bool) -> Vec<Vec<u8>> {
        self.recv_hdr(pair, keep)
            .into_iter()
            .map(|(_, f)| f)
            .collect()
    }

    /// [`Frontend::recv`] with each frame's virtio-net header.
    pub fn recv_hdr(&mut self, pair: usize, keep: bool) -> Vec<([u8; HDR], Vec<u8>)> {
        let q = 2 * pair;
        let mut out = Vec::new();
        let used = self.used_idx(q);
        while self.queues[q].last_used != used {
            let e = self.queues[q].used + 4 + 8 * usize::from(self.queues[q].last_used % QSIZE);
            let r = self.read(e, 8);
            let id = u32::from_le_bytes(r[0..4].try_into().unwrap()) as u16;
            let len = u32::from_le_bytes(r[4..8].try_into().unwrap()) as usize;
            self.queues[q].last_used = self.queues[q].last_used.wrapping_add(1);
            let b = self.read(self.queues[q].bufs + BUF * usize::from(id), len);
            if !keep {
                self.post(q, id);
            }
            let nbufs = u16::from_le_bytes([b[10], b[11]]);
            let mut frame = b[HDR..].to_vec();
            for _ in 1..nbufs {
                // Merged buffers follow (the port published them together).
                let e = self.queues[q].used + 4 + 8 * usize::from(self.queues[q].last_used % QSIZE);
                let r = self.read(e, 8);
                let id = u32::from_le_bytes(r[0..4].try_into().unwrap()) as u16;
                let len = u32::from_le_bytes(r[4..8].try_into().unwrap()) as usize;
                self.queues[q].last_used = self.queues[q].last_used.wrapping_add(1);
                frame.extend(self.read(self.queues[q].bufs + BUF * usize::from(id), len));
                if !keep {
                    self.post(q, id);
                }
            }
            let mut hdr = [0u8; HDR];
            hdr.copy_from_slice(&b[..HDR]);
            out.push((hdr, frame));
        }
        out
    }

    /// Waits until the port has taken everything offered on `pair`'s
    /// transmit ring (or 5 s).
    pub fn wait_tx_done(&self, pair: usize) -> bool {
        let q = 2 * pair + 1;
        let t0 = Instant::now();
        while self.used_idx(q) != self.queues[q].avail_idx {
            if t0.elapsed() > Duration::from_secs(5) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }
}

impl Drop for Frontend {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.mem.cast(), MEM_SIZE) };
    }
}

fn state(index: u32, num: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&index.to_le_bytes());
    b[4..].copy_from_slice(&num.to_le_bytes());
    b
}

/// The default feature set a Linux guest negotiates here.
pub fn linux_features() -> u64 {
    F_VERSION_1 | F_MRG_RXBUF | F_MQ | F_INDIRECT | F_EVENT_IDX | F_PROTOCOL_FEATURES
}

/// A test frame: Ethernet header, a sequence number, filler of `len`.
pub fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(18)];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u32 ^ seq) as u8;
    }
    f
}

/// A unique socket path in a fresh temporary directory (removed by the
/// returned guard).
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let d = std::env::temp_dir().join(format!(
            "flowpath-vhost-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    pub fn sock(&self) -> std::path::PathBuf {
        self.0.join("vhost.sock")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A memfd of `len` bytes, mapped shared (the caller unmaps it, or leaves
/// it to the test process's end): guest memory, or the dirty-page bitmap
/// as QEMU shares it.
pub fn shared_memfd(len: usize) -> (OwnedFd, *mut u8) {
    // SAFETY: a constant name, plain flags; the descriptor is owned below.
    let fd = unsafe { libc::memfd_create(c"vhost-test".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: resizing our own memfd.
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), len as i64) }, 0);
    // SAFETY: a fresh shared mapping of our own memfd.
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
    assert_ne!(p, libc::MAP_FAILED);
    (fd, p.cast())
}

/// The marked pages of a bitmap of `len` bytes at `p`, cleared as the
/// frontend clears what it collects.
pub fn collect_log(p: *mut u8, len: usize) -> std::collections::BTreeSet<u64> {
    let mut pages = std::collections::BTreeSet::new();
    for i in 0..len {
        // SAFETY: inside the mapping of `len` bytes; the port ORs bits in
        // atomically, so the byte is swapped atomically too.
        let b = unsafe { &*(p.add(i) as *const std::sync::atomic::AtomicU8) }
            .swap(0, std::sync::atomic::Ordering::AcqRel);
        for bit in 0..8 {
            if b & (1 << bit) != 0 {
                pages.insert((i * 8 + bit) as u64);
            }
        }
    }
    pages
}
