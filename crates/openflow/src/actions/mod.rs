//! Actions and instructions on the wire: OpenFlow 1.0's and 1.1+'s
//! actions, the Nicira extension actions (`NXAST_*`), and OpenFlow 1.1+'s
//! instructions, to and from flowpath's [`Action`] lists.
//!
//! The encoding follows Open vSwitch's choices so that `ovs-ofctl` prints
//! a flow read from flowpath as it prints the same flow read from Open
//! vSwitch: `load:` is `NXAST_REG_LOAD` (printed `load:`), `set_field` is
//! OpenFlow 1.2+'s Set-Field (or `NXAST_REG_LOAD2` where that has no
//! room), `mod_*` actions are OpenFlow 1.0's, `goto_table` in OpenFlow
//! 1.0 is `resubmit(,T)`.
//! `learn` is `NXAST_LEARN` (`NXAST_LEARN2` with a limit or a result
//! bit), as Open vSwitch writes it. `ct` is `NXAST_CT` with its `nat` and
//! `exec` writes nested inside, `ct_clear` `NXAST_CT_CLEAR` (see `ct`).

use crate::port::{
    self, OFPP_ALL, OFPP_CONTROLLER, OFPP_FLOOD, OFPP_IN_PORT, OFPP_LOCAL, OFPP_NORMAL,
};
use flowpath_flow::{FieldId, Match};
use flowpath_ofproto::action::{
    Action, SampleDirection, Subfield, MAX_BUNDLE_MEMBERS, MAX_DEC_TTL_IDS,
};

// Nicira action subtypes.
const NXAST_RESUBMIT: u16 = 1;
const NXAST_SET_TUNNEL: u16 = 2;
const NXAST_SET_TUNNEL64: u16 = 9;
const NXAST_SET_QUEUE: u16 = 4;
const NXAST_POP_QUEUE: u16 = 5;
const NXAST_REG_MOVE: u16 = 6;
const NXAST_REG_LOAD: u16 = 7;
const NXAST_NOTE: u16 = 8;
const NXAST_MULTIPATH: u16 = 10;
const NXAST_BUNDLE: u16 = 12;
const NXAST_BUNDLE_LOAD: u16 = 13;
const NXAST_RESUBMIT_TABLE: u16 = 14;
const NXAST_OUTPUT_REG: u16 = 15;
const NXAST_DEC_TTL: u16 = 18;
const NXAST_FIN_TIMEOUT: u16 = 19;
const NXAST_CONTROLLER: u16 = 20;
const NXAST_DEC_TTL_CNT_IDS: u16 = 21;
const NXAST_WRITE_METADATA: u16 = 22;
const NXAST_PUSH_MPLS: u16 = 23;
const NXAST_POP_MPLS: u16 = 24;
const NXAST_SET_MPLS_TTL: u16 = 25;
const NXAST_DEC_MPLS_TTL: u16 = 26;
const NXAST_STACK_PUSH: u16 = 27;
const NXAST_STACK_POP: u16 = 28;
const NXAST_SAMPLE: u16 = 29;
const NXAST_SAMPLE2: u16 = 38;
const NXAST_SAMPLE3: u16 = 41;
const NXAST_SET_MPLS_LABEL: u16 = 30;
const NXAST_SET_MPLS_TC: u16 = 31;
const NXAST_OUTPUT_REG2: u16 = 32;
const NXAST_REG_LOAD2: u16 = 33;
const NXAST_CONJUNCTION: u16 = 34;
const NXAST_CONTROLLER2: u16 = 37;
const NXAST_OUTPUT_TRUNC: u16 = 39;
const NXAST_GROUP: u16 = 40;
const NXAST_CLONE: u16 = 42;
const NXAST_CHECK_PKT_LARGER: u16 = 49;

// OpenFlow 1.1+ instruction types.
const OFPIT_GOTO_TABLE: u16 = 1;
const OFPIT_WRITE_METADATA: u16 = 2;
const OFPIT_WRITE_ACTIONS: u16 = 3;
const OFPIT_APPLY_ACTIONS: u16 = 4;
const OFPIT_CLEAR_ACTIONS: u16 = 5;

/// Where an action list is encoded or decoded: the version, and the
/// flow's match (for `mod_tp_src` and friends, whose OpenFlow 1.2+ field
/// depends on the protocol the flow matches).
#[derive(Clone, Copy, Debug)]
pub struct Ctx<'a> {
    /// Wire version.
    pub version: u8,
    /// The flow's match.
    pub matching: &'a Match,
}

mod ct;
mod decode;
mod encode;
mod learn;
use learn::{NXAST_LEARN, NXAST_LEARN2};

pub use decode::{pull_actions, pull_instructions};
pub use encode::{put_actions, put_instructions, put_of10_actions};
