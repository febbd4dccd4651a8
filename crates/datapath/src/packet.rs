//! Packet buffers: a frame's bytes with headroom, reused batch after batch.
//!
//! What: [`PacketBuf`] holds one frame at an offset inside a buffer it owns,
//! with [`HEADROOM`] bytes free in front (like a DPDK mbuf's headroom), so
//! that pushing a VLAN tag moves only the 12 address bytes backwards instead
//! of the whole frame forwards. [`PacketBuf::load`] copies a received frame
//! in, as a NIC (or DPDK's pcap device) writes into an rx buffer.
//!
//! Why: the datapath rewrites packets in place and outputs them; a buffer
//! per rx slot that is reused for every batch means no allocation per
//! packet. The buffer starts with room for [`DATA_ROOM`] bytes of frame
//! (enough for any standard 1518-byte Ethernet frame plus tags) and grows,
//! once, when a longer frame arrives; it keeps that size, so a capture of
//! jumbo frames allocates once per rx slot, not per packet. Frames longer
//! than [`MAX_FRAME_LEN`] (libpcap's largest snaplen) are refused with
//! [`Oversize`], which the caller counts as a drop.
//!
//! Invariants: `start + len ≤ buf.len()` at all times (every method keeps
//! it, so slicing the frame never panics); a freshly loaded frame starts at
//! [`HEADROOM`]; the bytes outside `start..start + len` are meaningless.
//!
//! Threads: owned by one worker (one per rx slot of its batch).

/// Free bytes kept in front of a freshly loaded frame: room for the
/// longest tunnel header `tnl_push` puts there (166 bytes: Ethernet,
/// IPv6, UDP, Geneve with eight 8-byte options), rounded up to a cache
/// line (DPDK's `RTE_PKTMBUF_HEADROOM` is 128).
pub const HEADROOM: usize = 192;

const _: () = assert!(HEADROOM >= flowpath_wire::tunnel::MAX_HEADER);

/// Frame bytes a new buffer holds without growing (DPDK's default mbuf data
/// room is 2048 bytes).
pub const DATA_ROOM: usize = 2048;

/// The longest frame a buffer accepts (libpcap's largest snaplen); longer
/// frames are refused with [`Oversize`].
pub const MAX_FRAME_LEN: usize = 262_144;

/// A frame longer than [`MAX_FRAME_LEN`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("frame of {0} bytes exceeds the {MAX_FRAME_LEN}-byte maximum")]
pub struct Oversize(pub usize);

/// One frame with headroom. See the module documentation.
#[derive(Clone, Debug)]
pub struct PacketBuf {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Default for PacketBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl PacketBuf {
    /// An empty buffer with [`HEADROOM`] + [`DATA_ROOM`] bytes.
    pub fn new() -> Self {
        PacketBuf {
            buf: vec![0; HEADROOM + DATA_ROOM],
            start: HEADROOM,
            len: 0,
        }
    }

    /// Replaces the contents with a copy of `frame`, [`HEADROOM`] bytes
    /// into the buffer. Grows the buffer (an allocation) only if `frame` is
    /// longer than any frame this buffer held before.
    #[inline]
    pub fn load(&mut self, frame: &[u8]) -> Result<(), Oversize> {
        let n = frame.len();
        if n > MAX_FRAME_LEN {
            self.start = HEADROOM;
            self.len = 0;
            return Err(Oversize(n));
        }
        if HEADROOM + n > self.buf.len() {
            self.buf.resize(HEADROOM + n, 0);
        }
        self.start = HEADROOM;
        self.len = n;
        let dst = &mut self.buf[HEADROOM..HEADROOM + n];
        match (frame.first_chunk::<32>(), frame.last_chunk::<32>()) {
            // Minimum-size frames (33..=64 bytes) by two fixed-size,
            // overlapping copies, inline: the library call's dispatch and
            // its 32-byte AVX stores cost more than the copy (perf put 9 %
            // of the receive loop's samples in the call on 60-byte frames).
            (Some(head), Some(tail)) if n <= 64 => {
                if let Some(d) = dst.first_chunk_mut::<32>() {
                    *d = *head;
                }
                if let Some(d) = dst.last_chunk_mut::<32>() {
                    *d = *tail;
                }
            }
            _ => dst.copy_from_slice(frame),
        }
        Ok(())
    }

    /// The frame.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    /// The frame, mutable.
    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }

    /// Length of the frame.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no bytes.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Free bytes in front of the frame.
    #[inline(always)]
    pub fn headroom(&self) -> usize {
        self.start
    }

    /// Total size of the buffer (headroom + room for frame bytes).
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Inserts `n` bytes at offset `at` of the frame by moving the first
    /// `at` bytes `n` bytes into the headroom; the inserted bytes are
    /// returned for the caller to fill. `None` (and no change) when the
    /// headroom is smaller than `n` or the frame shorter than `at`.
    #[inline]
    pub fn insert_front(&mut self, at: usize, n: usize) -> Option<&mut [u8]> {
        if n > self.start || at > self.len {
            return None;
        }
        let s = self.start;
        self.buf.copy_within(s..s + at, s - n);
        self.start -= n;
        self.len += n;
        let ins = self.start + at;
        Some(&mut self.buf[ins..ins + n])
    }

    /// Removes `n` bytes at offset `at` of the frame by moving the first
    /// `at` bytes `n` bytes forward. False (and no change) when the frame
    /// is shorter than `at + n`.
    #[inline]
    pub fn remove_front(&mut self, at: usize, n: usize) -> bool {
        if at + n > self.len {
            return false;
        }
        let s = self.start;
        self.buf.copy_within(s..s + at, s + n);
        self.start += n;
        self.len -= n;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_insert_remove() {
        let mut p = PacketBuf::new();
        assert!(p.is_empty());
        p.load(&[1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(p.data(), &[1, 2, 3, 4, 5, 6]);
        assert_eq!(p.headroom(), HEADROOM);
        let ins = p.insert_front(2, 3).unwrap();
        ins.copy_from_slice(&[9, 9, 9]);
        assert_eq!(p.data(), &[1, 2, 9, 9, 9, 3, 4, 5, 6]);
        assert_eq!(p.headroom(), HEADROOM - 3);
        assert!(p.remove_front(2, 3));
        assert_eq!(p.data(), &[1, 2, 3, 4, 5, 6]);
        assert!(!p.remove_front(5, 2));
        assert!(p.insert_front(7, 1).is_none());
        assert!(p.insert_front(0, HEADROOM + 1).is_none());
        // Reload resets the headroom.
        p.insert_front(0, 10).unwrap();
        p.load(&[7]).unwrap();
        assert_eq!((p.data(), p.headroom()), (&[7u8][..], HEADROOM));
    }

    /// Every length around the inline copy's range (33..=64) loads exactly
    /// the frame, whatever the buffer held before.
    #[test]
    fn load_copies_every_short_length_exactly() {
        let mut p = PacketBuf::new();
        for n in 0..=130usize {
            p.load(&[0xee; 200]).unwrap();
            let frame: Vec<u8> = (0..n).map(|i| (i * 7 + n) as u8).collect();
            p.load(&frame).unwrap();
            assert_eq!(p.data(), &frame[..], "length {n}");
            assert_eq!(p.headroom(), HEADROOM);
        }
    }

    #[test]
    fn grows_for_jumbo_frames_and_refuses_oversize() {
        let mut p = PacketBuf::new();
        let big = vec![0xab; 9000];
        p.load(&big).unwrap();
        assert_eq!(p.data(), &big[..]);
        assert_eq!(p.capacity(), HEADROOM + 9000);
        p.load(&[1, 2]).unwrap();
        assert_eq!(p.capacity(), HEADROOM + 9000);
        let huge = vec![0; MAX_FRAME_LEN + 1];
        assert_eq!(p.load(&huge), Err(Oversize(MAX_FRAME_LEN + 1)));
        assert!(p.is_empty());
    }
}
