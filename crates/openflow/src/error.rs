//! OpenFlow errors, as Open vSwitch numbers them for each version.
//!
//! An [`OfError`] is one error condition (`OFPBMC_BAD_FIELD`, ...) with
//! its (type, code) in OpenFlow 1.0 and in 1.1 and later. Some have no
//! standard OpenFlow 1.0 code: Open vSwitch sends those as a Nicira vendor
//! error (type `NXET_VENDOR` 0xb0c2, code 0, then vendor 0x00002320 and the
//! extension's type and code); [`OfError::encode`] does the same, so
//! `ovs-ofctl` names every error as it names Open vSwitch's.

use crate::buf::Writer;
use crate::header::{Header, NX_VENDOR_ID, OFPT_ERROR};
use std::fmt;

/// A (vendor, type, code) triplet: vendor 0 is standard OpenFlow.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Triplet {
    /// 0, or the vendor/experimenter id (0x00002320 for Nicira).
    pub vendor: u32,
    /// Error type.
    pub etype: u16,
    /// Error code.
    pub code: u16,
}

const fn of(etype: u16, code: u16) -> Triplet {
    Triplet {
        vendor: 0,
        etype,
        code,
    }
}

const fn nx(etype: u16, code: u16) -> Triplet {
    Triplet {
        vendor: NX_VENDOR_ID,
        etype,
        code,
    }
}

/// One OpenFlow error condition.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OfError {
    /// Open vSwitch's name without `OFPERR_` (e.g. `OFPBMC_BAD_FIELD`).
    pub name: &'static str,
    /// Its numbers in OpenFlow 1.0.
    pub of10: Triplet,
    /// Its numbers in OpenFlow 1.1 and later.
    pub of11: Triplet,
}

macro_rules! errors {
    ($($id:ident = $name:literal, $of10:expr, $of11:expr;)*) => {
        $(
            #[doc = concat!("`", $name, "`.")]
            pub const $id: OfError = OfError { name: $name, of10: $of10, of11: $of11 };
        )*
        /// Every error this crate sends.
        pub const ALL: &[OfError] = &[$($id),*];
    };
}

errors! {
    HELLO_INCOMPATIBLE = "OFPHFC_INCOMPATIBLE", of(0, 0), of(0, 0);
    BRC_BAD_VERSION = "OFPBRC_BAD_VERSION", of(1, 0), of(1, 0);
    BRC_BAD_TYPE = "OFPBRC_BAD_TYPE", of(1, 1), of(1, 1);
    BRC_BAD_STAT = "OFPBRC_BAD_STAT", of(1, 2), of(1, 2);
    BRC_BAD_VENDOR = "OFPBRC_BAD_VENDOR", of(1, 3), of(1, 3);
    BRC_BAD_SUBTYPE = "OFPBRC_BAD_SUBTYPE", of(1, 4), of(1, 4);
    BRC_EPERM = "OFPBRC_EPERM", of(1, 5), of(1, 5);
    BRC_BAD_LEN_E = "OFPBRC_BAD_LEN", of(1, 6), of(1, 6);
    BRC_BUFFER_UNKNOWN = "OFPBRC_BUFFER_UNKNOWN", of(1, 8), of(1, 8);
    BRC_BAD_TABLE_ID = "OFPBRC_BAD_TABLE_ID", nx(1, 512), of(1, 9);
    BRC_IS_SECONDARY = "OFPBRC_IS_SECONDARY", of(1, 5), of(1, 10);
    BRC_BAD_PORT = "OFPBRC_BAD_PORT", nx(1, 514), of(1, 11);
    BRC_BAD_PACKET = "OFPBRC_BAD_PACKET", nx(1, 5), of(1, 12);
    BRC_PIPELINE_FIELDS_ONLY = "OFPBRC_PIPELINE_FIELDS_ONLY", of(1, 17), of(1, 17);
    BAC_BAD_TYPE = "OFPBAC_BAD_TYPE", of(2, 0), of(2, 0);
    BAC_BAD_LEN = "OFPBAC_BAD_LEN", of(2, 1), of(2, 1);
    BAC_BAD_VENDOR = "OFPBAC_BAD_VENDOR", of(2, 2), of(2, 2);
    BAC_BAD_VENDOR_TYPE = "OFPBAC_BAD_VENDOR_TYPE", of(2, 3), of(2, 3);
    BAC_BAD_OUT_PORT = "OFPBAC_BAD_OUT_PORT", of(2, 4), of(2, 4);
    BAC_BAD_ARGUMENT = "OFPBAC_BAD_ARGUMENT", of(2, 5), of(2, 5);
    BAC_BAD_OUT_GROUP = "OFPBAC_BAD_OUT_GROUP", nx(2, 9), of(2, 9);
    BAC_MATCH_INCONSISTENT = "OFPBAC_MATCH_INCONSISTENT", nx(1, 522), of(2, 10);
    BAC_UNSUPPORTED_ORDER = "OFPBAC_UNSUPPORTED_ORDER", nx(1, 521), of(2, 11);
    BAC_BAD_SET_TYPE = "OFPBAC_BAD_SET_TYPE", nx(1, 523), of(2, 13);
    BAC_BAD_SET_LEN = "OFPBAC_BAD_SET_LEN", nx(1, 524), of(2, 14);
    BAC_BAD_SET_ARGUMENT = "OFPBAC_BAD_SET_ARGUMENT", nx(1, 525), of(2, 15);
    TTMFC_BAD_COMMAND = "NXTTMFC_BAD_COMMAND", nx(1, 527), nx(16, 0);
    TTMFC_BAD_OPT_LEN = "NXTTMFC_BAD_OPT_LEN", nx(1, 528), nx(17, 0);
    TTMFC_BAD_FIELD_IDX = "NXTTMFC_BAD_FIELD_IDX", nx(1, 529), nx(18, 0);
    TTMFC_ALREADY_MAPPED = "NXTTMFC_ALREADY_MAPPED", nx(1, 531), nx(20, 0);
    TTMFC_DUP_ENTRY = "NXTTMFC_DUP_ENTRY", nx(1, 532), nx(21, 0);
    TTMFC_INVALID_TLV_DEL = "NXTTMFC_INVALID_TLV_DEL", nx(1, 537), nx(38, 0);
    FMFC_INVALID_TLV_FIELD = "NXFMFC_INVALID_TLV_FIELD", nx(1, 536), nx(37, 0);
    BIC_UNKNOWN_INST = "OFPBIC_UNKNOWN_INST", nx(2, 257), of(3, 0);
    BIC_UNSUP_INST = "OFPBIC_UNSUP_INST", nx(2, 257), of(3, 1);
    BIC_BAD_TABLE_ID = "OFPBIC_BAD_TABLE_ID", nx(1, 512), of(3, 2);
    BIC_BAD_LEN = "OFPBIC_BAD_LEN", of(2, 1), of(3, 7);
    BMC_BAD_TYPE = "OFPBMC_BAD_TYPE", nx(1, 256), of(4, 0);
    BMC_BAD_LEN = "OFPBMC_BAD_LEN", nx(1, 256), of(4, 1);
    BMC_BAD_WILDCARDS = "OFPBMC_BAD_WILDCARDS", nx(1, 262), of(4, 5);
    BMC_BAD_FIELD = "OFPBMC_BAD_FIELD", nx(0, 263), of(4, 6);
    BMC_BAD_VALUE = "OFPBMC_BAD_VALUE", nx(1, 258), of(4, 7);
    BMC_BAD_MASK = "OFPBMC_BAD_MASK", nx(1, 259), of(4, 8);
    BMC_BAD_PREREQ = "OFPBMC_BAD_PREREQ", nx(1, 260), of(4, 9);
    BMC_DUP_FIELD = "OFPBMC_DUP_FIELD", nx(1, 261), of(4, 10);
    FMFC_UNKNOWN = "OFPFMFC_UNKNOWN", of(3, 5), of(5, 0);
    FMFC_TABLE_FULL = "OFPFMFC_TABLE_FULL", of(3, 0), of(5, 1);
    FMFC_BAD_TABLE_ID = "OFPFMFC_BAD_TABLE_ID", nx(1, 512), of(5, 2);
    FMFC_OVERLAP = "OFPFMFC_OVERLAP", of(3, 1), of(5, 3);
    FMFC_EPERM = "OFPFMFC_EPERM", of(3, 2), of(5, 4);
    FMFC_BAD_COMMAND = "OFPFMFC_BAD_COMMAND", of(3, 4), of(5, 6);
    FMFC_BAD_FLAGS = "OFPFMFC_BAD_FLAGS", nx(3, 258), of(5, 7);
    GMFC_GROUP_EXISTS = "OFPGMFC_GROUP_EXISTS", nx(6, 0), of(6, 0);
    GMFC_INVALID_GROUP = "OFPGMFC_INVALID_GROUP", nx(6, 1), of(6, 1);
    GMFC_UNKNOWN_GROUP = "OFPGMFC_UNKNOWN_GROUP", nx(6, 8), of(6, 8);
    GMFC_BAD_TYPE = "OFPGMFC_BAD_TYPE", nx(6, 10), of(6, 10);
    GMFC_BAD_COMMAND = "OFPGMFC_BAD_COMMAND", nx(6, 11), of(6, 11);
    GMFC_BAD_BUCKET = "OFPGMFC_BAD_BUCKET", nx(6, 12), of(6, 12);
    GMFC_WATCH_UNSUPPORTED = "OFPGMFC_WATCH_UNSUPPORTED", nx(6, 6), of(6, 6);
    GMFC_BAD_WATCH = "OFPGMFC_BAD_WATCH", nx(6, 13), of(6, 13);
    GMFC_UNKNOWN_BUCKET = "OFPGMFC_UNKNOWN_BUCKET", nx(6, 15), of(6, 15);
    GMFC_BUCKET_EXISTS = "OFPGMFC_BUCKET_EXISTS", nx(6, 16), of(6, 16);
    BPC_BAD_TYPE = "OFPBPC_BAD_TYPE", nx(13, 2), of(14, 0);
    BPC_BAD_LEN = "OFPBPC_BAD_LEN", nx(13, 3), of(14, 1);
    BPC_BAD_VALUE = "OFPBPC_BAD_VALUE", nx(13, 4), of(14, 2);
    PMFC_BAD_PORT = "OFPPMFC_BAD_PORT", of(4, 0), of(7, 0);
    PMFC_BAD_HW_ADDR = "OFPPMFC_BAD_HW_ADDR", of(4, 1), of(7, 1);
    TMFC_BAD_TABLE = "OFPTMFC_BAD_TABLE", of(8, 0), of(8, 0);
    TMFC_EPERM = "OFPTMFC_EPERM", of(8, 2), of(8, 2);
    RRFC_BAD_ROLE = "OFPRRFC_BAD_ROLE", nx(1, 513), of(11, 2);
    RRFC_STALE = "OFPRRFC_STALE", nx(1, 513), of(11, 0);
    MOFC_MONITOR_EXISTS = "OFPMOFC_MONITOR_EXISTS", nx(1, 517), of(16, 1);
    MOFC_UNKNOWN_MONITOR = "OFPMOFC_UNKNOWN_MONITOR", nx(1, 519), of(16, 3);
    MOFC_BAD_COMMAND = "OFPMOFC_BAD_COMMAND", nx(1, 519), of(16, 4);
    MOFC_BAD_FLAGS = "OFPMOFC_BAD_FLAGS", nx(1, 518), of(16, 5);
    NXR_NOT_SUPPORTED = "NXR_NOT_SUPPORTED", nx(1, 533), nx(34, 0);
    NXR_STALE = "NXR_STALE", nx(1, 534), nx(35, 0);
    BRC_MUST_BE_ZERO = "NXBRC_MUST_BE_ZERO", nx(1, 515), nx(4, 0);
    NXST_NOT_CONFIGURED = "NXST_NOT_CONFIGURED", nx(1, 535), nx(36, 0);
    BFC_EPERM = "OFPBFC_EPERM", of(17, 1), of(17, 1);
    BFC_BAD_ID = "OFPBFC_BAD_ID", of(17, 2), of(17, 2);
    BFC_BUNDLE_CLOSED = "OFPBFC_BUNDLE_CLOSED", of(17, 4), of(17, 4);
    BFC_OUT_OF_BUNDLES = "OFPBFC_OUT_OF_BUNDLES", of(17, 5), of(17, 5);
    BFC_BAD_TYPE = "OFPBFC_BAD_TYPE", of(17, 6), of(17, 6);
    BFC_BAD_FLAGS = "OFPBFC_BAD_FLAGS", of(17, 7), of(17, 7);
    BFC_MSG_BAD_LEN = "OFPBFC_MSG_BAD_LEN", of(17, 8), of(17, 8);
    BFC_MSG_BAD_XID = "OFPBFC_MSG_BAD_XID", of(17, 9), of(17, 9);
    BFC_MSG_UNSUP = "OFPBFC_MSG_UNSUP", of(17, 10), of(17, 10);
    BFC_MSG_TOO_MANY = "OFPBFC_MSG_TOO_MANY", of(17, 12), of(17, 12);
    BFC_MSG_FAILED = "OFPBFC_MSG_FAILED", of(17, 13), of(17, 13);
    BFC_BAD_VERSION = "OFPBFC_BAD_VERSION", nx(22, 0), nx(22, 0);
}

/// OpenFlow 1.4's error type `OFPET_BUNDLE_FAILED`; in OpenFlow 1.3 the
/// same errors are ONF experimenter errors numbered 2300 + code.
const OFPET_BUNDLE_FAILED: u16 = 17;

/// Error types, named as in OpenFlow 1.1+, for building [`OfError`]s by
/// hand in tests.
pub const BAD_REQUEST: u16 = 1;
/// `OFPBRC_BAD_LEN`'s code.
pub const BRC_BAD_LEN: u16 = 6;

impl OfError {
    /// The error with standard OpenFlow 1.1+ `(etype, code)`; an
    /// unknown pair is `OFPBRC_BAD_LEN`-like generic request error.
    pub const fn new(etype: u16, code: u16) -> OfError {
        if etype == BAD_REQUEST && code == BRC_BAD_LEN {
            return BRC_BAD_LEN_E;
        }
        OfError {
            name: "OFPERR_UNKNOWN",
            of10: of(etype, code),
            of11: of(etype, code),
        }
    }

    /// The triplet used for OpenFlow `version` (wire number).
    pub fn triplet(&self, version: u8) -> Triplet {
        if version < crate::header::OFP14
            && self.of11.vendor == 0
            && self.of11.etype == OFPET_BUNDLE_FAILED
        {
            return Triplet {
                vendor: crate::header::ONF_VENDOR_ID,
                etype: 2300 + self.of11.code,
                code: 0,
            };
        }
        if version <= crate::header::OFP10 {
            self.of10
        } else {
            self.of11
        }
    }

    /// An `OFPT_ERROR` for `version`, answering message `xid` whose bytes
    /// (at most the first 64, as OVS) are echoed.
    pub fn encode(&self, version: u8, xid: u32, request: &[u8]) -> Vec<u8> {
        let t = self.triplet(version);
        let mut w = Writer::new();
        Header::new(version, OFPT_ERROR, xid).write(&mut w);
        let echo = &request[..request.len().min(64)];
        if t.vendor == 0 {
            w.u16(t.etype);
            w.u16(t.code);
        } else if version <= crate::header::OFP11 {
            w.u16(0xb0c2);
            w.u16(0);
            w.u32(t.vendor);
            w.u16(t.etype);
            w.u16(t.code);
        } else {
            w.u16(0xffff);
            w.u16(t.etype);
            w.u32(t.vendor);
        }
        w.bytes(echo);
        let n = w.len() as u16;
        w.patch_u16(2, n);
        w.buf
    }
}

impl fmt::Display for OfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl std::error::Error for OfError {}
