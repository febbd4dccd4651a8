//! TCP connection tracking: the per-direction state machine and the
//! sequence-window checks of Guido van Rooij's "Real Stateful TCP Packet
//! Filtering" (the algorithm of OpenBSD's pf, which Open vSwitch's
//! userspace tracker uses).
//!
//! What: each connection keeps one [`TcpPeer`] per direction — the highest
//! sequence number sent (`seqlo`), the highest the other end may send
//! (`seqhi`: its ack plus window), the largest window seen and the window
//! scale — and a state per side (`SYN_SENT` … `TIME_WAIT`, the names
//! `dpctl/dump-conntrack` prints). A segment is accepted when
//!
//! - its last octet lies inside the receiver's advertised window,
//! - it starts no more than one window behind what was already sent,
//! - its ack is neither far behind nor more than a window ahead of what
//!   the other side sent (the "ack skew", 65535 + 1500 bytes, scaled),
//! - a RST carries exactly (±1) the expected sequence number.
//!
//! A segment that fails the checks is `+inv` and changes nothing, except
//! in the loose cases pf allows (peer not yet synchronised or already
//! closing, within one maximum window of the edges), which update the
//! sequence state but not the timeout. Flag combinations no stack sends
//! (SYN+RST, SYN+FIN, no SYN/ACK/RST, FIN/PSH/URG without ACK) are
//! always invalid. A SYN+ACK cannot open a connection; a bare SYN on a
//! connection whose both sides reached FIN_WAIT_2 or later replaces it.
//! A connection picked up mid-stream (first packet not a SYN) does not
//! know the window scales and assumes the maximum (`BE_LIBERAL`).
//!
//! Invariants: all sequence arithmetic is modulo 2^32; nothing here reads
//! outside the segment it is given. Thread-safety: the state lives inside
//! a connection's lock.

use crate::proto::UpdateRes;
use crate::timeouts::TimeoutClass;

/// TCP states, numbered as Open vSwitch numbers them (the order matters:
/// the checks compare states).
pub mod st {
    /// Closed.
    pub const CLOSED: u8 = 0;
    /// Listen (unused by the tracker, kept for numbering).
    pub const LISTEN: u8 = 1;
    /// SYN sent.
    pub const SYN_SENT: u8 = 2;
    /// SYN received.
    pub const SYN_RECV: u8 = 3;
    /// Established.
    pub const ESTABLISHED: u8 = 4;
    /// Close wait.
    pub const CLOSE_WAIT: u8 = 5;
    /// FIN wait 1.
    pub const FIN_WAIT_1: u8 = 6;
    /// Closing (FIN sent).
    pub const CLOSING: u8 = 7;
    /// Last ACK.
    pub const LAST_ACK: u8 = 8;
    /// FIN wait 2 (FIN sent and acknowledged).
    pub const FIN_WAIT_2: u8 = 9;
    /// Time wait (reset, or both closed).
    pub const TIME_WAIT: u8 = 10;
    /// Number of states.
    pub const MAX_NUM: u8 = 11;
}

/// The names of the TCP states, as `dpctl/dump-conntrack` prints them.
pub const STATE_NAMES: [&str; 11] = [
    "CLOSED",
    "LISTEN",
    "SYN_SENT",
    "SYN_RECV",
    "ESTABLISHED",
    "CLOSE_WAIT",
    "FIN_WAIT_1",
    "CLOSING",
    "LAST_ACK",
    "FIN_WAIT_2",
    "TIME_WAIT",
];

const FIN: u16 = 0x01;
const SYN: u16 = 0x02;
const RST: u16 = 0x04;
const PSH: u16 = 0x08;
const ACK: u16 = 0x10;
const URG: u16 = 0x20;

const MAX_WSCALE: u8 = 14;
/// The peer sent a window-scale option.
const WSCALE_FLAG: u8 = 0x80;
/// The connection was picked up mid-stream: scale unknown.
const WSCALE_UNKNOWN: u8 = 0x40;
const WSCALE_MASK: u8 = 0x0f;
/// The largest ack skew accepted: one maximum window plus a fudge factor.
const MAX_ACK_WINDOW: i64 = 0xffff + 1500;

/// The fields of a TCP segment the tracker needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Flags (low 9 bits of the offset/flags word).
    pub flags: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// Window field (unscaled).
    pub win: u16,
    /// Payload length.
    pub payload_len: u32,
    /// Window scale option: `WSCALE_FLAG | shift` if present, else 0.
    pub wscale: u8,
}

impl Segment {
    /// Reads a segment from the TCP header and payload `l4` (the whole IP
    /// payload). `None` if the header does not fit.
    pub fn parse(l4: &[u8]) -> Option<Segment> {
        let w = |i: usize| -> Option<u32> {
            match l4.get(i..i + 4)? {
                &[a, b, c, d] => Some(u32::from_be_bytes([a, b, c, d])),
                _ => None,
            }
        };
        let seq = w(4)?;
        let ack = w(8)?;
        let off_flags = u16::from_be_bytes([*l4.get(12)?, *l4.get(13)?]);
        let hl = usize::from(off_flags >> 12) * 4;
        if hl < 20 || hl > l4.len() {
            return None;
        }
        let win = u16::from_be_bytes([*l4.get(14)?, *l4.get(15)?]);
        let wscale = window_scale(l4.get(20..hl)?);
        Some(Segment {
            flags: off_flags & 0x1ff,
            seq,
            ack,
            win,
            payload_len: (l4.len() - hl) as u32,
            wscale,
        })
    }
}

/// The window-scale option among TCP options, as a flagged shift.
fn window_scale(mut opts: &[u8]) -> u8 {
    let mut wscale = 0;
    while opts.len() >= 3 {
        match opts.first().copied().unwrap_or(0) {
            0 => return wscale,
            1 => opts = opts.get(1..).unwrap_or(&[]),
            kind => {
                if kind == 3 {
                    wscale = opts.get(2).copied().unwrap_or(0).min(MAX_WSCALE) | WSCALE_FLAG;
                }
                let len = usize::from(opts.get(1).copied().unwrap_or(0)).max(2);
                opts = opts.get(len..).unwrap_or(&[]);
            }
        }
    }
    wscale
}

/// Flag combinations no TCP sends.
pub fn invalid_flags(flags: u16) -> bool {
    if flags & SYN != 0 {
        if flags & (RST | FIN) != 0 {
            return true;
        }
    } else if flags & (ACK | RST) == 0 {
        return true;
    }
    flags & ACK == 0 && flags & (FIN | PSH | URG) != 0
}

/// Whether a segment may open a connection (a SYN, or a mid-stream
/// packet; never a SYN+ACK).
pub fn valid_new(flags: u16) -> bool {
    !invalid_flags(flags) && flags & (SYN | ACK) != (SYN | ACK)
}

/// One direction's sequence state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpPeer {
    /// Highest sequence number sent (plus one for SYN/FIN).
    pub seqlo: u32,
    /// Highest sequence number the other side allows (its ack + window).
    pub seqhi: u32,
    /// Largest window advertised (before scaling).
    pub max_win: u16,
    /// Window scale, with `WSCALE_FLAG`/`WSCALE_UNKNOWN`.
    pub wscale: u8,
    /// State (see [`st`]).
    pub state: u8,
}

#[inline]
fn seq_geq(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

#[inline]
fn seq_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

#[inline]
fn shl(w: u16, s: u8) -> u32 {
    u32::from(w) << u32::from(s.min(MAX_WSCALE))
}

/// A TCP connection's tracking state: `[original sender, responder]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpConn {
    /// The two directions.
    pub peer: [TcpPeer; 2],
}

impl TcpConn {
    /// The state after the first packet of a new connection.
    pub fn new(seg: &Segment) -> (TcpConn, TimeoutClass) {
        let mut src = TcpPeer {
            seqlo: seg.seq,
            seqhi: seg.seq.wrapping_add(seg.payload_len).wrapping_add(1),
            ..TcpPeer::default()
        };
        let mut dst = TcpPeer::default();
        if seg.flags & SYN != 0 {
            src.seqhi = src.seqhi.wrapping_add(1);
            src.wscale = seg.wscale;
        } else {
            src.wscale = WSCALE_UNKNOWN;
            dst.wscale = WSCALE_UNKNOWN;
        }
        src.max_win = seg.win.max(1);
        if src.wscale & WSCALE_MASK != 0 {
            let sws = src.wscale & WSCALE_MASK;
            src.max_win = u32::from(src.max_win).div_ceil(1 << sws) as u16;
        }
        if seg.flags & FIN != 0 {
            src.seqhi = src.seqhi.wrapping_add(1);
        }
        dst.seqhi = 1;
        dst.max_win = 1;
        src.state = st::SYN_SENT;
        dst.state = st::CLOSED;
        (TcpConn { peer: [src, dst] }, TimeoutClass::TcpFirstPacket)
    }

    /// Runs one segment (`reply`: from the responder) through the state
    /// machine. Returns the verdict and, when the timeout is to be
    /// re-armed, its class. `seq_check` off accepts every segment with
    /// valid flags (`dpctl/tcp-seq-chk disable`).
    pub fn update(
        &mut self,
        seg: &Segment,
        reply: bool,
        seq_check: bool,
    ) -> (UpdateRes, Option<TimeoutClass>) {
        let flags = seg.flags;
        if invalid_flags(flags) {
            return (UpdateRes::Invalid, None);
        }
        let (si, di) = if reply { (1, 0) } else { (0, 1) };
        let [p0, p1] = &mut self.peer;
        let (src, dst) = if si == 0 { (p0, p1) } else { (p1, p0) };

        if flags & (SYN | ACK) == SYN {
            if dst.state >= st::FIN_WAIT_2 && src.state >= st::FIN_WAIT_2 {
                src.state = st::CLOSED;
                dst.state = st::CLOSED;
                return (UpdateRes::New, None);
            } else if src.state <= st::SYN_SENT {
                src.state = st::SYN_SENT;
                return (UpdateRes::ValidNew, Some(TimeoutClass::TcpFirstPacket));
            }
        }
        let _ = di;

        let mut sws = 0u8;
        let mut dws = 0u8;
        if src.wscale & WSCALE_FLAG != 0 && dst.wscale & WSCALE_FLAG != 0 && flags & SYN == 0 {
            sws = src.wscale & WSCALE_MASK;
            dws = dst.wscale & WSCALE_MASK;
        } else if src.wscale & WSCALE_UNKNOWN != 0
            && dst.wscale & WSCALE_UNKNOWN != 0
            && flags & SYN == 0
        {
            sws = MAX_WSCALE;
            dws = MAX_WSCALE;
        }

        let orig_seq = seg.seq;
        let mut seq = seg.seq;
        let mut win = seg.win;
        let mut ack = seg.ack;
        let mut end = seq.wrapping_add(seg.payload_len);
        let mut check_ackskew = true;
        if src.state < st::SYN_SENT {
            // The first packet from this side.
            if flags & SYN != 0 {
                end = end.wrapping_add(1);
                if dst.wscale & WSCALE_FLAG != 0 {
                    src.wscale = seg.wscale;
                    if src.wscale & WSCALE_FLAG != 0 {
                        sws = src.wscale & WSCALE_MASK;
                        win = u32::from(win).div_ceil(1 << sws) as u16;
                        dws = dst.wscale & WSCALE_MASK;
                    } else {
                        // The other side's scale is void: unscale its window.
                        dst.max_win = shl(dst.max_win, dst.wscale & WSCALE_MASK) as u16;
                        dst.wscale = 0;
                    }
                }
            }
            if flags & FIN != 0 {
                end = end.wrapping_add(1);
            }
            src.seqlo = seq;
            src.state = st::SYN_SENT;
            let reach = end.wrapping_add(shl(dst.max_win, dws).max(1));
            if src.seqhi == 1 || seq_geq(reach, src.seqhi) {
                src.seqhi = reach;
                // A new or picked-up connection: no ack-skew check.
                check_ackskew = false;
            }
            if win > src.max_win {
                src.max_win = win;
            }
        } else {
            if flags & SYN != 0 {
                end = end.wrapping_add(1);
            }
            if flags & FIN != 0 {
                end = end.wrapping_add(1);
            }
        }

        if flags & ACK == 0 {
            ack = dst.seqlo;
        } else if ack == 0 && flags & (ACK | RST) == (ACK | RST) {
            // Some stacks send RST+ACK with a zero ack.
            ack = dst.seqlo;
        }
        if seq == end {
            // No data: relax the sequence checks.
            seq = src.seqlo;
            end = seq;
        }
        let ackskew: i64 = if check_ackskew {
            i64::from(dst.seqlo.wrapping_sub(ack) as i32)
        } else {
            0
        };

        let in_window = seq_geq(src.seqhi, end)
            && seq_geq(seq, src.seqlo.wrapping_sub(shl(dst.max_win, dws)))
            && ackskew >= -MAX_ACK_WINDOW
            && ackskew <= (MAX_ACK_WINDOW << sws)
            && (flags & RST == 0
                || orig_seq == src.seqlo
                || orig_seq == src.seqlo.wrapping_add(1)
                || orig_seq.wrapping_add(1) == src.seqlo);

        if in_window || !seq_check {
            if src.max_win < win {
                src.max_win = win;
            }
            if seq_gt(end, src.seqlo) {
                src.seqlo = end;
            }
            let edge = ack.wrapping_add(shl(win, sws));
            if seq_geq(edge, dst.seqhi) {
                dst.seqhi = ack.wrapping_add(shl(win, sws).max(1));
            }
            if flags & SYN != 0 && src.state < st::SYN_SENT {
                src.state = st::SYN_SENT;
            }
            if flags & FIN != 0 && src.state < st::CLOSING {
                src.state = st::CLOSING;
            }
            if flags & ACK != 0 {
                if dst.state == st::SYN_SENT {
                    dst.state = st::ESTABLISHED;
                } else if dst.state == st::CLOSING {
                    dst.state = st::FIN_WAIT_2;
                }
            }
            if flags & RST != 0 {
                src.state = st::TIME_WAIT;
                dst.state = st::TIME_WAIT;
            }
            let tc = if src.state >= st::FIN_WAIT_2 && dst.state >= st::FIN_WAIT_2 {
                TimeoutClass::TcpClosed
            } else if src.state >= st::CLOSING && dst.state >= st::CLOSING {
                TimeoutClass::TcpFinWait
            } else if src.state < st::ESTABLISHED || dst.state < st::ESTABLISHED {
                TimeoutClass::TcpOpening
            } else if src.state >= st::CLOSING || dst.state >= st::CLOSING {
                TimeoutClass::TcpClosing
            } else {
                TimeoutClass::TcpEstablished
            };
            (UpdateRes::Valid, Some(tc))
        } else if (dst.state < st::SYN_SENT
            || dst.state >= st::FIN_WAIT_2
            || src.state >= st::FIN_WAIT_2)
            && seq_geq(src.seqhi.wrapping_add(MAX_ACK_WINDOW as u32), end)
            && seq_geq(seq, src.seqlo.wrapping_sub(MAX_ACK_WINDOW as u32))
        {
            // Loose acceptance: shotgunned SYNs, a connection picked up
            // after the fact, stray packets right after a close. The
            // timeout is not re-armed, so a flood cannot keep it alive.
            if src.max_win < win {
                src.max_win = win;
            }
            if seq_gt(end, src.seqlo) {
                src.seqlo = end;
            }
            let edge = ack.wrapping_add(shl(win, sws));
            if seq_geq(edge, dst.seqhi) {
                dst.seqhi = ack.wrapping_add(shl(win, sws).max(1));
            }
            if flags & FIN != 0 && src.state < st::CLOSING {
                src.state = st::CLOSING;
            }
            if flags & RST != 0 {
                src.state = st::TIME_WAIT;
                dst.state = st::TIME_WAIT;
            }
            (UpdateRes::Valid, None)
        } else {
            (UpdateRes::Invalid, None)
        }
    }

    /// The state printed without `-m`: the further of the two sides, with
    /// FIN_WAIT_2 shown as TIME_WAIT and SYN_RECV as ESTABLISHED (as the
    /// kernel tracker would show them).
    pub fn coalesced_state(&self) -> u8 {
        match self.peer[0].state.max(self.peer[1].state) {
            st::FIN_WAIT_2 => st::TIME_WAIT,
            st::SYN_RECV => st::ESTABLISHED,
            s => s,
        }
    }

    /// Window scale shifts `(orig, reply)` for the verbose dump.
    pub fn wscales(&self) -> (u8, u8) {
        (
            self.peer[0].wscale & WSCALE_MASK,
            self.peer[1].wscale & WSCALE_MASK,
        )
    }

    /// Protoinfo flags `(orig, reply)`: bit 0 WINDOW_SCALE, bit 3 BE_LIBERAL.
    pub fn flags(&self) -> (u8, u8) {
        let f = |p: &TcpPeer| {
            let mut r = 0;
            if p.wscale & WSCALE_FLAG != 0 {
                r |= 0x01;
            }
            if p.wscale & WSCALE_UNKNOWN != 0 {
                r |= 0x08;
            }
            r
        };
        (f(&self.peer[0]), f(&self.peer[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(flags: u16, seq: u32, ack: u32, len: u32) -> Segment {
        Segment {
            flags,
            seq,
            ack,
            win: 65535,
            payload_len: len,
            wscale: 0,
        }
    }

    #[test]
    fn flags() {
        assert!(invalid_flags(SYN | RST));
        assert!(invalid_flags(SYN | FIN));
        assert!(invalid_flags(0));
        assert!(invalid_flags(FIN));
        assert!(!invalid_flags(SYN));
        assert!(!invalid_flags(RST));
        assert!(!valid_new(SYN | ACK));
        assert!(valid_new(ACK));
    }

    #[test]
    fn handshake_data_close() {
        let (mut c, tc) = TcpConn::new(&seg(SYN, 1000, 0, 0));
        assert_eq!(tc, TimeoutClass::TcpFirstPacket);
        // SYN+ACK from the server.
        let (r, t) = c.update(&seg(SYN | ACK, 5000, 1001, 0), true, true);
        assert_eq!(r, UpdateRes::Valid);
        assert_eq!(t, Some(TimeoutClass::TcpOpening));
        assert_eq!(c.peer[0].state, st::ESTABLISHED);
        // ACK from the client.
        let (r, t) = c.update(&seg(ACK, 1001, 5001, 0), false, true);
        assert_eq!(r, UpdateRes::Valid);
        assert_eq!(t, Some(TimeoutClass::TcpEstablished));
        assert_eq!(c.coalesced_state(), st::ESTABLISHED);
        // Data both ways.
        assert_eq!(
            c.update(&seg(ACK | PSH, 1001, 5001, 100), false, true).0,
            UpdateRes::Valid
        );
        assert_eq!(
            c.update(&seg(ACK, 5001, 1101, 50), true, true).0,
            UpdateRes::Valid
        );
        // Far outside the window: invalid, nothing changes.
        let before = c;
        assert_eq!(
            c.update(
                &seg(ACK, 1101u32.wrapping_add(3_000_000), 5051, 10),
                false,
                true
            )
            .0,
            UpdateRes::Invalid
        );
        assert_eq!(c, before);
        // ...unless sequence checking is off.
        assert_eq!(
            c.update(
                &seg(ACK, 1101u32.wrapping_add(3_000_000), 5051, 10),
                false,
                false
            )
            .0,
            UpdateRes::Valid
        );
        let mut c = before;
        // FIN from the client, acked; FIN from the server, acked.
        let (_, t) = c.update(&seg(FIN | ACK, 1101, 5051, 0), false, true);
        assert_eq!(t, Some(TimeoutClass::TcpClosing));
        assert_eq!(c.peer[0].state, st::CLOSING);
        let (_, t) = c.update(&seg(FIN | ACK, 5051, 1102, 0), true, true);
        assert_eq!(t, Some(TimeoutClass::TcpFinWait));
        let (_, t) = c.update(&seg(ACK, 1102, 5052, 0), false, true);
        assert_eq!(t, Some(TimeoutClass::TcpClosed));
        assert_eq!(c.coalesced_state(), st::TIME_WAIT);
        // A new SYN on the closed connection starts a new one.
        assert_eq!(
            c.update(&seg(SYN, 9000, 0, 0), false, true).0,
            UpdateRes::New
        );
    }

    #[test]
    fn rst_needs_exact_sequence() {
        let (mut c, _) = TcpConn::new(&seg(SYN, 1000, 0, 0));
        c.update(&seg(SYN | ACK, 5000, 1001, 0), true, true);
        c.update(&seg(ACK, 1001, 5001, 0), false, true);
        assert_eq!(
            c.update(&seg(RST, 1500, 0, 0), false, true).0,
            UpdateRes::Invalid
        );
        assert_eq!(
            c.update(&seg(RST, 1001, 0, 0), false, true).0,
            UpdateRes::Valid
        );
        assert_eq!(c.peer[0].state, st::TIME_WAIT);
    }

    #[test]
    fn window_scale_option() {
        // kind 3 len 3 shift 7, after a NOP.
        assert_eq!(window_scale(&[1, 3, 3, 7]), WSCALE_FLAG | 7);
        assert_eq!(window_scale(&[3, 3, 20]), WSCALE_FLAG | 14);
        assert_eq!(window_scale(&[2, 4, 5, 0xb4]), 0);
        assert_eq!(window_scale(&[0, 3, 3, 7]), 0);
        assert_eq!(window_scale(&[2, 0, 0]), 0); // bad length does not loop
        let mut h = vec![0u8; 24];
        h[12] = 6 << 4;
        h[13] = SYN as u8;
        h[20..24].copy_from_slice(&[1, 3, 3, 2]);
        let s = Segment::parse(&h).expect("segment");
        assert_eq!(s.wscale, WSCALE_FLAG | 2);
        assert!(Segment::parse(&h[..19]).is_none());
    }

    #[test]
    fn midstream_pickup_is_liberal() {
        let (mut c, _) = TcpConn::new(&seg(ACK, 777, 888, 10));
        assert_eq!(c.flags(), (0x08, 0x08));
        assert_eq!(
            c.update(&seg(ACK, 888, 787, 20), true, true).0,
            UpdateRes::Valid
        );
        assert_eq!(
            c.update(&seg(ACK, 787, 908, 20), false, true).0,
            UpdateRes::Valid
        );
    }
}
