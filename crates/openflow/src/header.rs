//! The OpenFlow header, versions and message type numbers.
//!
//! Message types are numbered differently in OpenFlow 1.0 and 1.1+ from
//! PORT_MOD on; [`MsgType`] is the version-independent name and
//! [`MsgType::from_wire`] / [`MsgType::wire`] translate.

use crate::buf::{Reader, Writer};
use crate::error::{OfError, BRC_BAD_LEN_E, BRC_BAD_TYPE};

/// OpenFlow 1.0's version number on the wire.
pub const OFP10: u8 = 0x01;
/// OpenFlow 1.1.
pub const OFP11: u8 = 0x02;
/// OpenFlow 1.2.
pub const OFP12: u8 = 0x03;
/// OpenFlow 1.3.
pub const OFP13: u8 = 0x04;
/// OpenFlow 1.4.
pub const OFP14: u8 = 0x05;
/// OpenFlow 1.5.
pub const OFP15: u8 = 0x06;
/// The versions flowpath speaks, lowest first.
pub const VERSIONS: [u8; 4] = [OFP10, OFP13, OFP14, OFP15];
/// Nicira's vendor (experimenter) id.
pub const NX_VENDOR_ID: u32 = 0x0000_2320;
/// ONF's experimenter id.
pub const ONF_VENDOR_ID: u32 = 0x4f4e_4600;
/// `OFPT_ERROR` (the same in every version).
pub const OFPT_ERROR: u8 = 1;
/// Bytes of an OpenFlow header.
pub const HEADER_LEN: usize = 8;

/// The 8-byte header of every message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Header {
    /// Wire version.
    pub version: u8,
    /// Wire type.
    pub mtype: u8,
    /// Length of the whole message.
    pub length: u16,
    /// Transaction id.
    pub xid: u32,
}

impl Header {
    /// A header with length 0 (patched when the message is finished).
    pub fn new(version: u8, mtype: u8, xid: u32) -> Header {
        Header {
            version,
            mtype,
            length: 0,
            xid,
        }
    }

    /// Reads a header (the first 8 bytes of `buf`).
    pub fn read(buf: &[u8]) -> Result<Header, OfError> {
        let mut r = Reader::new(buf);
        let h = Header {
            version: r.u8()?,
            mtype: r.u8()?,
            length: r.u16()?,
            xid: r.u32()?,
        };
        if usize::from(h.length) < HEADER_LEN {
            return Err(BRC_BAD_LEN_E);
        }
        Ok(h)
    }

    /// Writes it.
    pub fn write(&self, w: &mut Writer) {
        w.u8(self.version);
        w.u8(self.mtype);
        w.u16(self.length);
        w.u32(self.xid);
    }
}

/// Version-independent message types.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[allow(missing_docs)]
pub enum MsgType {
    Hello,
    Error,
    EchoRequest,
    EchoReply,
    Vendor,
    FeaturesRequest,
    FeaturesReply,
    GetConfigRequest,
    GetConfigReply,
    SetConfig,
    PacketIn,
    FlowRemoved,
    PortStatus,
    PacketOut,
    FlowMod,
    GroupMod,
    PortMod,
    TableMod,
    StatsRequest,
    StatsReply,
    BarrierRequest,
    BarrierReply,
    QueueGetConfigRequest,
    QueueGetConfigReply,
    RoleRequest,
    RoleReply,
    GetAsyncRequest,
    GetAsyncReply,
    SetAsync,
    MeterMod,
    RoleStatus,
    TableStatus,
    RequestForward,
    BundleControl,
    BundleAddMessage,
}

const OF10_TYPES: [MsgType; 22] = [
    MsgType::Hello,
    MsgType::Error,
    MsgType::EchoRequest,
    MsgType::EchoReply,
    MsgType::Vendor,
    MsgType::FeaturesRequest,
    MsgType::FeaturesReply,
    MsgType::GetConfigRequest,
    MsgType::GetConfigReply,
    MsgType::SetConfig,
    MsgType::PacketIn,
    MsgType::FlowRemoved,
    MsgType::PortStatus,
    MsgType::PacketOut,
    MsgType::FlowMod,
    MsgType::PortMod,
    MsgType::StatsRequest,
    MsgType::StatsReply,
    MsgType::BarrierRequest,
    MsgType::BarrierReply,
    MsgType::QueueGetConfigRequest,
    MsgType::QueueGetConfigReply,
];

const OF11_TYPES: [MsgType; 35] = [
    MsgType::Hello,
    MsgType::Error,
    MsgType::EchoRequest,
    MsgType::EchoReply,
    MsgType::Vendor,
    MsgType::FeaturesRequest,
    MsgType::FeaturesReply,
    MsgType::GetConfigRequest,
    MsgType::GetConfigReply,
    MsgType::SetConfig,
    MsgType::PacketIn,
    MsgType::FlowRemoved,
    MsgType::PortStatus,
    MsgType::PacketOut,
    MsgType::FlowMod,
    MsgType::GroupMod,
    MsgType::PortMod,
    MsgType::TableMod,
    MsgType::StatsRequest,
    MsgType::StatsReply,
    MsgType::BarrierRequest,
    MsgType::BarrierReply,
    MsgType::QueueGetConfigRequest,
    MsgType::QueueGetConfigReply,
    MsgType::RoleRequest,
    MsgType::RoleReply,
    MsgType::GetAsyncRequest,
    MsgType::GetAsyncReply,
    MsgType::SetAsync,
    MsgType::MeterMod,
    MsgType::RoleStatus,
    MsgType::TableStatus,
    MsgType::RequestForward,
    MsgType::BundleControl,
    MsgType::BundleAddMessage,
];

impl MsgType {
    /// The type of wire number `t` in `version`.
    pub fn from_wire(version: u8, t: u8) -> Result<MsgType, OfError> {
        let table: &[MsgType] = if version == OFP10 {
            &OF10_TYPES
        } else {
            &OF11_TYPES
        };
        table.get(usize::from(t)).copied().ok_or(BRC_BAD_TYPE)
    }

    /// The wire number of this type in `version` (None: the version has
    /// no such message).
    pub fn wire(self, version: u8) -> Option<u8> {
        let table: &[MsgType] = if version == OFP10 {
            &OF10_TYPES
        } else {
            &OF11_TYPES
        };
        table.iter().position(|t| *t == self).map(|i| i as u8)
    }
}

/// Starts a message of `t` for `version`: the header with a placeholder
/// length; [`finish`] patches it.
pub fn start(version: u8, t: MsgType, xid: u32) -> Writer {
    let mut w = Writer::new();
    Header::new(version, t.wire(version).unwrap_or(4), xid).write(&mut w);
    w
}

/// Writes the final length into a message built with [`start`].
pub fn finish(mut w: Writer) -> Vec<u8> {
    let n = w.len().min(usize::from(u16::MAX)) as u16;
    w.patch_u16(2, n);
    w.buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_differ_between_versions_from_port_mod_on() {
        assert_eq!(MsgType::FlowMod.wire(OFP10), Some(14));
        assert_eq!(MsgType::FlowMod.wire(OFP13), Some(14));
        assert_eq!(MsgType::StatsRequest.wire(OFP10), Some(16));
        assert_eq!(MsgType::StatsRequest.wire(OFP13), Some(18));
        assert_eq!(MsgType::BarrierRequest.wire(OFP10), Some(18));
        assert_eq!(MsgType::BarrierRequest.wire(OFP13), Some(20));
        assert_eq!(MsgType::GroupMod.wire(OFP10), None);
        assert_eq!(MsgType::BundleControl.wire(OFP14), Some(33));
        assert_eq!(
            MsgType::from_wire(OFP10, 18).unwrap(),
            MsgType::BarrierRequest
        );
        assert!(MsgType::from_wire(OFP10, 22).is_err());
        assert!(Header::read(&[1, 0, 0, 7, 0, 0, 0, 0]).is_err());
    }
}
