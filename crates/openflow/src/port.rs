//! OpenFlow port numbers: 16-bit in OpenFlow 1.0, 32-bit from 1.1 on,
//! with the reserved ports at the top of each range.

/// OpenFlow 1.0's `OFPP_MAX`: ports below it are real.
pub const OFPP_MAX: u16 = 0xff00;
/// `IN_PORT`.
pub const OFPP_IN_PORT: u16 = 0xfff8;
/// `TABLE` (packet-out only).
pub const OFPP_TABLE: u16 = 0xfff9;
/// `NORMAL`.
pub const OFPP_NORMAL: u16 = 0xfffa;
/// `FLOOD`.
pub const OFPP_FLOOD: u16 = 0xfffb;
/// `ALL`.
pub const OFPP_ALL: u16 = 0xfffc;
/// `CONTROLLER`.
pub const OFPP_CONTROLLER: u16 = 0xfffd;
/// `LOCAL`.
pub const OFPP_LOCAL: u16 = 0xfffe;
/// `NONE` (OpenFlow 1.0) / `ANY` (1.1+).
pub const OFPP_NONE: u16 = 0xffff;

/// An OpenFlow 1.0 port as an OpenFlow 1.1+ port.
pub fn to_of11(p: u32) -> u32 {
    if p >= u32::from(OFPP_MAX) && p <= 0xffff {
        p + 0xffff_0000
    } else {
        p
    }
}

/// An OpenFlow 1.1+ port as OpenFlow 1.0's (None: not representable).
pub fn from_of11(p: u32) -> Option<u32> {
    if p >= 0xffff_ff00 {
        Some(p - 0xffff_0000)
    } else if p < u32::from(OFPP_MAX) {
        Some(p)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_ports_move_to_the_top() {
        assert_eq!(to_of11(5), 5);
        assert_eq!(to_of11(0xfffe), 0xffff_fffe);
        assert_eq!(from_of11(0xffff_fffd), Some(0xfffd));
        assert_eq!(from_of11(0x1_0000), None);
        assert_eq!(from_of11(7), Some(7));
    }
}
