//! UDP and "other" protocols: a three-stage tracker without sequence
//! checks, as Open vSwitch's `conntrack-other`.
//!
//! Stages: *first* (one packet seen), *multiple* (more packets, original
//! direction only), *bidir* (a reply was seen). A packet of a connection
//! that has not yet seen a reply stays `+new`; once a reply was seen
//! every packet is `+est`. Every packet re-arms the timeout of the stage
//! it leads to (udp_first, udp_single, udp_multiple).
//!
//! Invariants: stages only move forward. Thread-safety: the state lives
//! inside a connection's lock.

use crate::proto::UpdateRes;
use crate::timeouts::TimeoutClass;

/// The stage of a UDP/other connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtherState {
    /// One packet seen.
    First,
    /// More packets seen, original direction only.
    Multiple,
    /// Packets seen both ways.
    Bidir,
}

impl OtherState {
    /// The timeout class of a stage.
    pub fn timeout(self) -> TimeoutClass {
        match self {
            OtherState::First => TimeoutClass::OtherFirst,
            OtherState::Multiple => TimeoutClass::OtherMultiple,
            OtherState::Bidir => TimeoutClass::OtherBidir,
        }
    }

    /// Advances the stage for one packet (`reply`: from the responder).
    pub fn update(&mut self, reply: bool) -> (UpdateRes, TimeoutClass) {
        if reply {
            *self = OtherState::Bidir;
        } else if *self == OtherState::First {
            *self = OtherState::Multiple;
        }
        let res = if *self == OtherState::Bidir {
            UpdateRes::Valid
        } else {
            UpdateRes::ValidNew
        };
        (res, self.timeout())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages() {
        let mut s = OtherState::First;
        assert_eq!(
            s.update(false),
            (UpdateRes::ValidNew, TimeoutClass::OtherMultiple)
        );
        assert_eq!(
            s.update(false),
            (UpdateRes::ValidNew, TimeoutClass::OtherMultiple)
        );
        assert_eq!(s.update(true), (UpdateRes::Valid, TimeoutClass::OtherBidir));
        assert_eq!(
            s.update(false),
            (UpdateRes::Valid, TimeoutClass::OtherBidir)
        );
        assert_eq!(s, OtherState::Bidir);
    }
}
