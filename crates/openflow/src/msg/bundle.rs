//! Bundles: OpenFlow 1.4's `OFPT_BUNDLE_CONTROL` / `OFPT_BUNDLE_ADD_MESSAGE`
//! and the same messages as ONF's OpenFlow 1.3 extension (experimenter
//! `ONF_VENDOR_ID`, types 2300 and 2301), which `ovs-ofctl --bundle` sends.
//!
//! A bundle collects flow (and group, packet-out) modifications on one
//! connection; a commit applies them all or none.

use super::{decode, ConnState, Decoded, Request};
use crate::buf::{Reader, Writer};
use crate::error::*;
use crate::header::{self, Header, MsgType, OFP13, OFP14, ONF_VENDOR_ID};

/// ONF's experimenter type of a bundle control message (OpenFlow 1.3).
pub const ONFT_BUNDLE_CONTROL: u32 = 2300;
/// ONF's experimenter type of a bundle add message (OpenFlow 1.3).
pub const ONFT_BUNDLE_ADD_MESSAGE: u32 = 2301;

/// `OFPBCT_*`: what a bundle control message asks or answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BundleCtrl {
    /// Open a bundle.
    Open,
    /// Close it (no more messages).
    Close,
    /// Apply every message, all or none.
    Commit,
    /// Throw it away.
    Discard,
}

impl BundleCtrl {
    /// The request's wire number.
    pub fn request(self) -> u16 {
        match self {
            BundleCtrl::Open => 0,
            BundleCtrl::Close => 2,
            BundleCtrl::Commit => 4,
            BundleCtrl::Discard => 6,
        }
    }
}

/// `OFPBF_ATOMIC`.
pub const BF_ATOMIC: u16 = 1;
/// `OFPBF_ORDERED`.
pub const BF_ORDERED: u16 = 2;

/// A decoded bundle control request.
#[derive(Clone, Debug)]
pub struct BundleControl {
    /// The bundle.
    pub id: u32,
    /// What to do.
    pub ctrl: BundleCtrl,
    /// `OFPBF_*` flags.
    pub flags: u16,
    /// Sent as ONF's OpenFlow 1.3 extension.
    pub onf: bool,
}

/// A decoded bundle add request.
#[derive(Clone, Debug)]
pub struct BundleAdd {
    /// The bundle.
    pub id: u32,
    /// `OFPBF_*` flags.
    pub flags: u16,
    /// The message's bytes (echoed in an error that concerns it).
    pub raw: Vec<u8>,
    /// The message, decoded: a flow_mod, group_mod, port_mod or
    /// packet_out.
    pub inner: Box<Decoded>,
}

/// Reads a bundle control body (after the header and, for ONF, the
/// experimenter header).
pub(super) fn decode_control(r: &mut Reader<'_>, onf: bool) -> Result<Request, OfError> {
    let id = r.u32()?;
    let t = r.u16()?;
    let flags = r.u16()?;
    let ctrl = match t {
        0 => BundleCtrl::Open,
        2 => BundleCtrl::Close,
        4 => BundleCtrl::Commit,
        6 => BundleCtrl::Discard,
        _ => return Err(BFC_BAD_TYPE),
    };
    Ok(Request::BundleControl(BundleControl {
        id,
        ctrl,
        flags,
        onf,
    }))
}

/// Whether `m` (a whole message) is of a type a bundle may carry.
fn bundlable(m: &[u8]) -> bool {
    let Ok(h) = Header::read(m) else {
        return false;
    };
    match MsgType::from_wire(h.version, h.mtype) {
        Ok(MsgType::FlowMod | MsgType::GroupMod | MsgType::PortMod | MsgType::PacketOut) => true,
        // Nicira's NXT_FLOW_MOD.
        Ok(MsgType::Vendor) => {
            m.len() >= 16
                && u32::from_be_bytes([m[8], m[9], m[10], m[11]]) == header::NX_VENDOR_ID
                && u32::from_be_bytes([m[12], m[13], m[14], m[15]]) == super::NXT_FLOW_MOD
        }
        _ => false,
    }
}

/// Reads a bundle add body: the bundle id, flags and the message
/// (checked as Open vSwitch checks it: same version and xid as the outer
/// message, a bundlable type) and decodes the message.
pub(super) fn decode_add(
    r: &mut Reader<'_>,
    outer: &Header,
    st: ConnState,
) -> Result<Request, OfError> {
    let id = r.u32()?;
    r.skip(2)?;
    let flags = r.u16()?;
    let rest = r.rest();
    if rest.len() < header::HEADER_LEN {
        return Err(BFC_MSG_BAD_LEN);
    }
    let ih = Header {
        version: rest[0],
        mtype: rest[1],
        length: u16::from_be_bytes([rest[2], rest[3]]),
        xid: u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]),
    };
    if ih.version != outer.version {
        return Err(BFC_BAD_VERSION);
    }
    let len = usize::from(ih.length);
    if len < header::HEADER_LEN || len > rest.len() {
        return Err(BFC_MSG_BAD_LEN);
    }
    if ih.xid != outer.xid {
        return Err(BFC_MSG_BAD_XID);
    }
    let raw = &rest[..len];
    if !bundlable(raw) {
        return Err(BFC_MSG_UNSUP);
    }
    let inner = decode(raw, st)?;
    Ok(Request::BundleAdd(BundleAdd {
        id,
        flags,
        raw: raw.to_vec(),
        inner: Box::new(inner),
    }))
}

/// The reply to a bundle control request (`OPEN_REPLY`, `CLOSE_REPLY`,
/// `COMMIT_REPLY`, `DISCARD_REPLY`), in the request's form.
pub fn encode_bundle_reply(version: u8, xid: u32, req: &BundleControl) -> Vec<u8> {
    let mut w = if req.onf || version < OFP14 {
        let mut w = header::start(version.max(OFP13), MsgType::Vendor, xid);
        w.u32(ONF_VENDOR_ID);
        w.u32(ONFT_BUNDLE_CONTROL);
        w
    } else {
        header::start(version, MsgType::BundleControl, xid)
    };
    body(&mut w, req.id, req.ctrl.request() + 1, 0);
    header::finish(w)
}

fn body(w: &mut Writer, id: u32, t: u16, flags: u16) {
    w.u32(id);
    w.u16(t);
    w.u16(flags);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add_msg(version: u8, onf: bool, xid: u32, inner: &[u8]) -> Vec<u8> {
        let mut w = if onf {
            let mut w = header::start(version, MsgType::Vendor, xid);
            w.u32(ONF_VENDOR_ID);
            w.u32(ONFT_BUNDLE_ADD_MESSAGE);
            w
        } else {
            header::start(version, MsgType::BundleAddMessage, xid)
        };
        w.u32(7);
        w.zeros(2);
        w.u16(BF_ATOMIC);
        w.bytes(inner);
        header::finish(w)
    }

    fn barrier(version: u8, xid: u32) -> Vec<u8> {
        header::finish(header::start(version, MsgType::BarrierRequest, xid))
    }

    #[test]
    fn control_round_trip_both_forms() {
        for (v, onf) in [(OFP13, true), (OFP14, false), (header::OFP15, false)] {
            let req = BundleControl {
                id: 9,
                ctrl: BundleCtrl::Commit,
                flags: BF_ATOMIC | BF_ORDERED,
                onf,
            };
            let mut w = if onf {
                let mut w = header::start(v, MsgType::Vendor, 5);
                w.u32(ONF_VENDOR_ID);
                w.u32(ONFT_BUNDLE_CONTROL);
                w
            } else {
                header::start(v, MsgType::BundleControl, 5)
            };
            body(&mut w, req.id, req.ctrl.request(), req.flags);
            let m = header::finish(w);
            match decode(&m, ConnState::default()).unwrap().request {
                Request::BundleControl(c) => {
                    assert_eq!(
                        (c.id, c.ctrl, c.flags, c.onf),
                        (9, BundleCtrl::Commit, 3, onf)
                    );
                }
                other => panic!("{other:?}"),
            }
            let reply = encode_bundle_reply(v, 5, &req);
            // The reply type is the request's + 1, flags 0.
            let n = reply.len();
            assert_eq!(&reply[n - 8..], &[0, 0, 0, 9, 0, 5, 0, 0]);
            assert_eq!(usize::from(u16::from_be_bytes([reply[2], reply[3]])), n);
        }
    }

    #[test]
    fn add_checks_version_xid_length_and_type() {
        let v = OFP14;
        let ok = decode(&add_msg(v, false, 3, &barrier(v, 3)), ConnState::default());
        // A barrier is not bundlable.
        assert_eq!(ok.unwrap_err(), BFC_MSG_UNSUP);
        let e = decode(
            &add_msg(v, false, 3, &barrier(OFP13, 3)),
            ConnState::default(),
        );
        assert_eq!(e.unwrap_err(), BFC_BAD_VERSION);
        let e = decode(&add_msg(v, false, 3, &barrier(v, 4)), ConnState::default());
        assert_eq!(e.unwrap_err(), BFC_MSG_BAD_XID);
        let mut short = barrier(v, 3);
        short[3] = 40;
        let e = decode(&add_msg(v, false, 3, &short), ConnState::default());
        assert_eq!(e.unwrap_err(), BFC_MSG_BAD_LEN);
        let e = decode(&add_msg(v, false, 3, &[1, 2]), ConnState::default());
        assert_eq!(e.unwrap_err(), BFC_MSG_BAD_LEN);
    }

    #[test]
    fn bundle_errors_are_onf_in_13_and_standard_in_14() {
        let e13 = BFC_MSG_FAILED.encode(OFP13, 1, b"");
        // type 0xffff, exp_code 2313, experimenter ONF.
        assert_eq!(
            &e13[8..16],
            &[0xff, 0xff, 0x09, 0x09, 0x4f, 0x4e, 0x46, 0x00]
        );
        let e14 = BFC_MSG_FAILED.encode(OFP14, 1, b"");
        assert_eq!(&e14[8..12], &[0, 17, 0, 13]);
    }
}
