//! The packed virtqueue (virtio 1.1, 2.8), device side: one ring of
//! descriptors that the driver makes available and the device hands back
//! as used in the same slots, told apart by two flag bits and a wrap
//! counter on each side, plus two small event-suppression areas (the
//! driver's says when it wants interrupts, the device's when it wants
//! kicks).
//!
//! Facts from the specification: a descriptor is 16 bytes (address,
//! length, buffer id, flags); it is available when its `AVAIL` flag equals
//! the device's available wrap counter and its `USED` flag does not; a
//! buffer is a run of descriptors linked by `NEXT` in consecutive slots,
//! or one `INDIRECT` descriptor whose table holds the buffer's
//! descriptors in order; the buffer id is in the last descriptor; the
//! device writes one used descriptor per buffer (id, bytes written,
//! `AVAIL` = `USED` = its used wrap counter) in the order it uses them and
//! moves on by as many slots as the buffer took; each counter flips when
//! its position wraps. `SET_VRING_BASE`/`GET_VRING_BASE` carry the
//! available position with its wrap counter in bit 15 (QEMU adds the used
//! one in the upper 16 bits).
//!
//! Why shaped so: the guest is as untrusted as on a split ring, and the
//! walk enforces the same rules ([`ChainError`]): buffers inside guest
//! memory, no zero or huge lengths, the direction the queue expects, at
//! most a ring's worth of descriptors in a chain, indirect tables whole,
//! in memory and not nested, buffer ids inside the ring. A chain that
//! breaks a rule stops the ring (its extent is not known, so it cannot
//! be handed back) until the frontend starts it again. Used descriptors
//! are written only at [`VirtRing::publish`] — id and length first, the
//! flags last with release order — so a frame half written or abandoned
//! ([`VirtRing::rewind`]) never shows, and a rewound chain is read again
//! as the guest wrote it.
//!
//! Invariants: the ring and the two areas were checked to lie in guest
//! memory, aligned, when the ring was built; positions are always below
//! the size; the used position never passes the available one; no
//! allocation after [`PackedRing::new`] (the used list holds a ring's
//! worth). Threads: as [`super::ring::Vring`].
#![allow(unsafe_code)]

use super::log::DirtyLog;
use super::memory::GuestMemory;
use super::ring::{
    indirect_table, need_event, take_buffer, ChainError, Mark, RingAddrs, Seg, VirtRing,
    DESC_F_INDIRECT, DESC_F_NEXT, DESC_F_WRITE, DESC_SIZE, MAX_QUEUE_SIZE,
};
use std::sync::atomic::{fence, AtomicU16, Ordering};
use std::sync::Arc;

/// `VRING_PACKED_DESC_F_AVAIL`.
pub const DESC_F_AVAIL: u16 = 1 << 7;
/// `VRING_PACKED_DESC_F_USED`.
pub const DESC_F_USED: u16 = 1 << 15;
/// Event suppression: always notify.
pub const EVENT_ENABLE: u16 = 0;
/// Event suppression: never notify.
pub const EVENT_DISABLE: u16 = 1;
/// Event suppression: notify at the position in `off_wrap`
/// (`EVENT_IDX`).
pub const EVENT_DESC: u16 = 2;

/// A used descriptor waiting for [`VirtRing::publish`].
#[derive(Clone, Copy, Debug)]
struct Pending {
    pos: u16,
    id: u16,
    len: u32,
    flags: u16,
}

/// A packed virtqueue in guest memory.
pub struct PackedRing {
    mem: Arc<GuestMemory>,
    desc: *mut u8,
    /// The driver's event suppression area (read).
    driver: *mut u8,
    /// The device's event suppression area (written).
    device: *mut u8,
    size: u16,
    next_avail: u16,
    avail_wrap: bool,
    next_used: u16,
    used_wrap: bool,
    /// Per ring position, the walked chain starting there: (buffer id,
    /// slots it takes).
    chains: Box<[(u16, u16)]>,
    /// Used descriptors not yet written (a ring's worth at most).
    pending: Vec<Pending>,
    /// Used position and wrap counter at the last publish.
    published: (u16, bool),
    event_idx: bool,
    broken: bool,
    notify: bool,
    log: Option<Arc<DirtyLog>>,
}

// SAFETY: the pointers point into `mem`, which the ring keeps alive (an
// `Arc`); a ring is used by one thread at a time (module docs).
unsafe impl Send for PackedRing {}

impl std::fmt::Debug for PackedRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedRing")
            .field("size", &self.size)
            .field("next_avail", &self.next_avail)
            .field("next_used", &self.next_used)
            .finish()
    }
}

/// One descriptor as read from guest memory.
struct Desc {
    addr: u64,
    len: u32,
    id: u16,
    flags: u16,
}

/// Reads descriptor `i` of the table at `table` (its flags already read
/// with acquire order by the caller where that matters).
fn read_desc(table: *const u8, i: u16) -> Desc {
    let at = DESC_SIZE as usize * usize::from(i);
    // SAFETY: callers pass a table checked to hold more than `i`
    // descriptors inside guest memory; unaligned-safe reads.
    unsafe {
        let p = table.add(at);
        Desc {
            addr: u64::from_le(std::ptr::read_unaligned(p.cast::<u64>())),
            len: u32::from_le(std::ptr::read_unaligned(p.add(8).cast::<u32>())),
            id: u16::from_le(std::ptr::read_unaligned(p.add(12).cast::<u16>())),
            flags: u16::from_le(std::ptr::read_unaligned(p.add(14).cast::<u16>())),
        }
    }
}

impl PackedRing {
    /// A ring of `size` descriptors at `addrs` (`desc`: the ring, `avail`:
    /// the driver's event area, `used`: the device's), resuming at `base`
    /// (`SET_VRING_BASE`: position and wrap counter in bit 15; every
    /// earlier buffer was used). With `event_idx` the driver may ask for
    /// an interrupt at a position.
    pub fn new(
        mem: Arc<GuestMemory>,
        addrs: RingAddrs,
        size: u16,
        base: u32,
        event_idx: bool,
    ) -> Result<PackedRing, &'static str> {
        if size == 0 || size > MAX_QUEUE_SIZE {
            return Err("ring size not between 1 and 32768");
        }
        let pos = (base & 0x7fff) as u16;
        if pos >= size {
            return Err("ring base past the ring's end");
        }
        let desc = mem
            .uva(addrs.desc, DESC_SIZE * u64::from(size))
            .ok_or("descriptor ring outside guest memory")?;
        let driver = mem
            .uva(addrs.avail, 4)
            .ok_or("driver event area outside guest memory")?;
        let device = mem
            .uva(addrs.used, 4)
            .ok_or("device event area outside guest memory")?;
        if !(desc as usize).is_multiple_of(16)
            || !(driver as usize).is_multiple_of(4)
            || !(device as usize).is_multiple_of(4)
        {
            return Err("ring areas misaligned");
        }
        let wrap = base & 0x8000 != 0;
        let mut r = PackedRing {
            mem,
            desc,
            driver,
            device,
            size,
            next_avail: pos,
            avail_wrap: wrap,
            next_used: pos,
            used_wrap: wrap,
            chains: vec![(0, 0); usize::from(size)].into_boxed_slice(),
            pending: Vec::with_capacity(usize::from(size)),
            published: (pos, wrap),
            event_idx,
            broken: false,
            notify: true,
            log: None,
        };
        // The PMD polls: no kicks until it goes idle.
        r.set_notify(false);
        Ok(r)
    }

    /// Where the ring stands, as `GET_VRING_BASE` answers: the available
    /// position and wrap counter, and (upper half) the used ones.
    pub fn base(&self) -> u32 {
        let half = |pos: u16, wrap: bool| u32::from(pos) | (u32::from(wrap) << 15);
        half(self.next_avail, self.avail_wrap) | (half(self.next_used, self.used_wrap) << 16)
    }

    /// Logs every write into guest memory in `log` from now on (live
    /// migration); `None` stops logging.
    pub fn set_log(&mut self, log: Option<Arc<DirtyLog>>) {
        self.log = log;
        self.log_ring();
    }

    /// Whether the ring was found broken.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Marks the pages of the descriptor ring and the device's event
    /// area (after writing there) while logging.
    #[inline]
    fn log_ring(&self) {
        if self.log.is_some() {
            self.mark_ring();
        }
    }

    /// [`PackedRing::log_ring`]'s work, out of the hot path's code.
    #[cold]
    #[inline(never)]
    fn mark_ring(&self) {
        if let Some(log) = &self.log {
            if let Some(gpa) = self.mem.gpa_of(self.desc) {
                log.mark(gpa, DESC_SIZE * u64::from(self.size));
            }
            if let Some(gpa) = self.mem.gpa_of(self.device) {
                log.mark(gpa, 4);
            }
        }
    }

    fn flags_atomic(&self, pos: u16) -> &AtomicU16 {
        // SAFETY: `pos < size`: the flags of a descriptor inside the
        // checked, 16-aligned ring; the guest writes them concurrently.
        unsafe { &*(self.desc.add(16 * usize::from(pos) + 14) as *const AtomicU16) }
    }

    /// Whether descriptor flags `f` say available for the wrap counter.
    fn is_avail(&self, f: u16) -> bool {
        (f & DESC_F_AVAIL != 0) == self.avail_wrap && (f & DESC_F_USED != 0) != self.avail_wrap
    }

    /// Position `pos` moved on by `n` slots, and whether that wrapped.
    fn advance(&self, pos: u16, n: u16) -> (u16, bool) {
        let p = u32::from(pos) + u32::from(n);
        let size = u32::from(self.size);
        if p >= size {
            ((p - size) as u16, true)
        } else {
            (p as u16, false)
        }
    }
}

impl VirtRing for PackedRing {
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
        if self.broken {
            return Ok(0);
        }
        let f = u16::from_le(self.flags_atomic(self.next_avail).load(Ordering::Acquire));
        Ok(u16::from(self.is_avail(f)))
    }

    fn take_head(&mut self) -> u16 {
        self.next_avail
    }

    fn walk_chain(
        &mut self,
        head: u16,
        writable: bool,
        max_total: u64,
        segs: &mut Vec<Seg>,
    ) -> Result<u64, ChainError> {
        segs.clear();
        if head != self.next_avail || head >= self.size {
            return Err(ChainError::HeadIndex);
        }
        let mut pos = head;
        let mut wrap = self.avail_wrap;
        let mut slots = 0u16;
        let mut total = 0u64;
        let id = loop {
            if slots >= self.size {
                return Err(ChainError::Loop);
            }
            // Each slot of the chain must be available (the head was seen
            // so; the driver writes the others before it).
            let f = u16::from_le(self.flags_atomic(pos).load(Ordering::Acquire));
            if (f & DESC_F_AVAIL != 0) != wrap || (f & DESC_F_USED != 0) == wrap {
                return Err(ChainError::NextIndex);
            }
            let d = read_desc(self.desc, pos);
            slots += 1;
            let (p, wrapped) = self.advance(pos, 1);
            pos = p;
            wrap ^= wrapped;
            if d.flags & DESC_F_INDIRECT != 0 {
                if slots != 1 {
                    return Err(ChainError::BadIndirect);
                }
                // The table's descriptors, in order (no NEXT in a packed
                // table), none of them indirect.
                let (table, n) = indirect_table(&self.mem, d.addr, d.len, d.flags)?;
                for i in 0..n {
                    let e = read_desc(table, i);
                    if e.flags & DESC_F_INDIRECT != 0 {
                        return Err(ChainError::NestedIndirect);
                    }
                    let b = (e.addr, e.len, e.flags);
                    take_buffer(&self.mem, b, (writable, max_total), &mut total, segs)?;
                }
                break d.id;
            }
            let b = (d.addr, d.len, d.flags);
            take_buffer(&self.mem, b, (writable, max_total), &mut total, segs)?;
            if d.flags & DESC_F_NEXT == 0 {
                break d.id;
            }
        };
        if id >= self.size {
            return Err(ChainError::HeadIndex);
        }
        self.chains[usize::from(head)] = (id, slots);
        self.next_avail = pos;
        self.avail_wrap = wrap;
        Ok(total)
    }

    fn refuse(&mut self, _head: u16) {
        self.broken = true;
    }

    fn push_used(&mut self, head: u16, len: u32) {
        let (id, slots) = self.chains[usize::from(head % self.size)];
        let flags = if self.used_wrap {
            DESC_F_AVAIL | DESC_F_USED
        } else {
            0
        } | if len > 0 { DESC_F_WRITE } else { 0 };
        if self.pending.len() < self.pending.capacity() {
            self.pending.push(Pending {
                pos: self.next_used,
                id,
                len,
                flags,
            });
        }
        let (p, wrapped) = self.advance(self.next_used, slots.max(1));
        self.next_used = p;
        self.used_wrap ^= wrapped;
    }

    fn publish(&mut self) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        for u in &self.pending {
            let at = 16 * usize::from(u.pos);
            // SAFETY: `pos < size`: a descriptor inside the checked ring;
            // the id and length go first, the flags (which hand the slot
            // back) after them with release order.
            unsafe {
                let p = self.desc.add(at);
                std::ptr::write_volatile(p.add(8).cast::<u32>(), u.len.to_le());
                std::ptr::write_volatile(p.add(12).cast::<u16>(), u.id.to_le());
            }
            self.flags_atomic(u.pos)
                .store(u.flags.to_le(), Ordering::Release);
        }
        self.pending.clear();
        self.log_ring();
        let (old, old_wrap) = self.published;
        let (new, new_wrap) = (self.next_used, self.used_wrap);
        self.published = (new, new_wrap);
        // The driver's request must be read after the descriptors are
        // visible (a full barrier), or an interrupt could be missed.
        fence(Ordering::SeqCst);
        // SAFETY: the driver's area is 4 checked, 4-aligned bytes:
        // `off_wrap` then `flags`.
        let (off_wrap, flags) = unsafe {
            (
                u16::from_le(std::ptr::read_volatile(self.driver.cast::<u16>())),
                u16::from_le(std::ptr::read_volatile(self.driver.add(2).cast::<u16>())),
            )
        };
        match flags & 3 {
            EVENT_DISABLE => false,
            EVENT_DESC if self.event_idx => {
                // Positions on one line: the old one a lap back if the used
                // position wrapped since, the event's if its wrap counter
                // is not the current one.
                let size = self.size;
                let old = if old_wrap != new_wrap || new <= old {
                    old.wrapping_sub(size)
                } else {
                    old
                };
                let mut off = off_wrap & 0x7fff;
                if (off_wrap & 0x8000 != 0) != new_wrap {
                    off = off.wrapping_sub(size);
                }
                need_event(off, new, old)
            }
            _ => true,
        }
    }

    fn set_notify(&mut self, on: bool) {
        if self.notify == on {
            return;
        }
        self.notify = on;
        let flags = if on { EVENT_ENABLE } else { EVENT_DISABLE };
        // SAFETY: the device's area is 4 checked, 4-aligned bytes; its
        // flags are the second u16.
        unsafe { std::ptr::write_volatile(self.device.add(2).cast::<u16>(), flags.to_le()) };
        self.log_ring();
    }

    fn mark(&self) -> Mark {
        Mark::packed(
            self.next_avail,
            self.avail_wrap,
            self.next_used,
            self.used_wrap,
            self.pending.len() as u16,
        )
    }

    fn rewind(&mut self, mark: Mark) {
        let (avail, avail_wrap, used, used_wrap, pending) = mark.unpack();
        self.next_avail = avail;
        self.avail_wrap = avail_wrap;
        self.next_used = used;
        self.used_wrap = used_wrap;
        self.pending.truncate(usize::from(pending));
    }

    fn set_broken(&mut self) {
        self.broken = true;
    }
}

#[cfg(test)]
mod tests;
