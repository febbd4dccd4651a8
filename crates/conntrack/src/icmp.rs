//! ICMP and ICMPv6 echo-like exchanges, as Open vSwitch's
//! `conntrack-icmp`.
//!
//! A request (echo, timestamp, information request; ICMPv6 echo request)
//! opens a connection keyed by the identifier; requests stay `+new` until
//! a reply was seen, after which every packet is `+est`. Timeouts:
//! icmp_first, then icmp_reply. ICMP *errors* are not connections: the key
//! extractor maps them to the connection they quote (`+rel`).
//!
//! Invariants: the stage only moves forward. Thread-safety: the state
//! lives inside a connection's lock.

use crate::key::{icmp4_valid_new, ICMP6_ECHO_REQUEST};
use crate::proto::UpdateRes;
use crate::timeouts::TimeoutClass;

/// The stage of an ICMP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpState {
    /// Request(s) seen.
    First,
    /// A reply was seen.
    Reply,
}

impl IcmpState {
    /// The timeout class of a stage.
    pub fn timeout(self) -> TimeoutClass {
        match self {
            IcmpState::First => TimeoutClass::IcmpFirst,
            IcmpState::Reply => TimeoutClass::IcmpReply,
        }
    }

    /// Advances the stage for one packet.
    pub fn update(&mut self, reply: bool) -> (UpdateRes, TimeoutClass) {
        let mut res = UpdateRes::Valid;
        if reply && *self == IcmpState::First {
            *self = IcmpState::Reply;
        } else if *self == IcmpState::First {
            res = UpdateRes::ValidNew;
        }
        (res, self.timeout())
    }
}

/// Whether an ICMP message of `icmp_type` may open a connection.
pub fn valid_new(v6: bool, icmp_type: u8) -> bool {
    if v6 {
        icmp_type == ICMP6_ECHO_REQUEST
    } else {
        icmp4_valid_new(icmp_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_reply() {
        let mut s = IcmpState::First;
        assert_eq!(s.update(false).0, UpdateRes::ValidNew);
        assert_eq!(s.update(true), (UpdateRes::Valid, TimeoutClass::IcmpReply));
        assert_eq!(s.update(false).0, UpdateRes::Valid);
        assert!(valid_new(false, 8) && valid_new(false, 13) && !valid_new(false, 0));
        assert!(valid_new(true, 128) && !valid_new(true, 129));
    }
}
