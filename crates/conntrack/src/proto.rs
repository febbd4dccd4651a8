//! The per-protocol part of a connection, behind one enum.
//!
//! What: [`L4`] is a connection's protocol state — TCP ([`crate::tcp`]),
//! ICMP ([`crate::icmp`]) or UDP/other ([`crate::other`]) — and
//! [`UpdateRes`] the verdict of running one packet through it, with Open
//! vSwitch's four outcomes: invalid, valid (`+est`), valid but still new
//! (`+new`: no reply seen yet), and "start a new connection" (a SYN that
//! reopens a closed TCP connection).
//!
//! Invariants: an `L4` variant never changes over a connection's life.
//! Thread-safety: lives inside a connection's lock.

use crate::icmp::IcmpState;
use crate::key::ConnKey;
use crate::other::OtherState;
use crate::tcp::{Segment, TcpConn};
use crate::timeouts::TimeoutClass;
use flowpath_wire::ip_proto;

/// The verdict of a packet on an existing connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateRes {
    /// Not acceptable: `+inv`, no state change.
    Invalid,
    /// Accepted: `+est`.
    Valid,
    /// This packet starts a new connection in place of the old one.
    New,
    /// Accepted, but the connection has not seen a reply: `+new`.
    ValidNew,
}

/// A connection's protocol state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    /// TCP window tracking.
    Tcp(TcpConn),
    /// ICMP echo-like exchange.
    Icmp(IcmpState),
    /// UDP and every other protocol.
    Other(OtherState),
}

/// Whether the packet (L4 bytes `l4`, key `key`) may create a connection.
pub fn valid_new(key: &ConnKey, l4: &[u8]) -> bool {
    if key.proto == ip_proto::TCP {
        Segment::parse(l4).is_some_and(|s| crate::tcp::valid_new(s.flags))
    } else if key.is_icmp() {
        crate::icmp::valid_new(key.v6, key.src.icmp_type)
    } else {
        true
    }
}

impl L4 {
    /// The state of a new connection created by this packet.
    pub fn new(key: &ConnKey, l4: &[u8]) -> (L4, TimeoutClass) {
        if key.proto == ip_proto::TCP {
            if let Some(s) = Segment::parse(l4) {
                let (c, t) = TcpConn::new(&s);
                return (L4::Tcp(c), t);
            }
        }
        if key.is_icmp() {
            (L4::Icmp(IcmpState::First), TimeoutClass::IcmpFirst)
        } else {
            (L4::Other(OtherState::First), TimeoutClass::OtherFirst)
        }
    }

    /// Runs a packet through the state.
    pub fn update(
        &mut self,
        l4: &[u8],
        reply: bool,
        seq_check: bool,
    ) -> (UpdateRes, Option<TimeoutClass>) {
        match self {
            L4::Tcp(c) => match Segment::parse(l4) {
                Some(s) => c.update(&s, reply, seq_check),
                None => (UpdateRes::Invalid, None),
            },
            L4::Icmp(s) => {
                let (r, t) = s.update(reply);
                (r, Some(t))
            }
            L4::Other(s) => {
                let (r, t) = s.update(reply);
                (r, Some(t))
            }
        }
    }
}
