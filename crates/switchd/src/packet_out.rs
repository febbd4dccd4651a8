//! OpenFlow packet-out: a controller's frame and actions, translated as a
//! flow with those actions would translate them (through the bridge's
//! tables for `resubmit`, `output:TABLE`, groups and `NORMAL`), then run
//! on the frame, as if it had come in on the given port, by the thread
//! that received it (see [`crate::pmd::ControlExec`]).
//!
//! Why a one-shot table: translation starts with a lookup in table 0;
//! `OneShot` answers that first lookup with a rule holding the
//! packet-out's actions and every later one from the real tables, so the
//! translation is exactly a flow's.

use crate::control::Control;
use crate::pmd::ControlExec;
use flowpath_datapath::execute::PacketIn;
use flowpath_flow::key::Regs;
use flowpath_flow::{FieldId, FlowKey, FlowMask, Match};
use flowpath_ofproto::action::Action;
use flowpath_ofproto::group::Group;
use flowpath_ofproto::rule::Rule;
use flowpath_ofproto::tables::{FragMode, Lookup, RuleTables};
use flowpath_ofproto::xlate::{xlate_on, XlateMode};
use std::cell::Cell;

struct OneShot<'a> {
    inner: &'a RuleTables,
    rule: Rule,
    used: Cell<bool>,
}

impl Lookup for OneShot<'_> {
    fn lookup(
        &self,
        table: u8,
        key: &FlowKey,
        regs: &Regs,
        wc: Option<&mut FlowMask>,
    ) -> Option<&Rule> {
        if !self.used.get() {
            self.used.set(true);
            return Some(&self.rule);
        }
        self.inner.lookup(table, key, regs, wc)
    }
    fn ports(&self) -> &[u32] {
        self.inner.ports()
    }
    fn port_config(&self, port: u32) -> u32 {
        self.inner.port_config(port)
    }
    fn group(&self, id: u32) -> Option<&Group> {
        self.inner.group(id)
    }
    fn all_rules(&self) -> &[Rule] {
        self.inner.all_rules()
    }
    fn frag_mode(&self) -> FragMode {
        // The packet-out's own actions apply to fragments too.
        FragMode::NxMatch
    }
}

/// Why a packet-out was refused (mapped to OpenFlow errors by the caller).
#[derive(Debug, PartialEq, Eq)]
pub enum PacketOutError {
    /// The frame is not an Ethernet frame flowpath can parse.
    BadPacket,
    /// The actions are not valid for this packet (the message says why).
    BadActions(String),
    /// It could not be run (no packet-out datapath, or no recirculation
    /// id left).
    Busy,
}

/// Translates and runs a packet-out; returns when it has been sent, with
/// the packet-ins it caused.
pub fn run(
    ctl: &Control,
    in_port: u32,
    frame: &[u8],
    actions: Vec<Action>,
    now_ms: u64,
) -> Result<Vec<PacketIn>, PacketOutError> {
    let mut key = FlowKey::default();
    if flowpath_flow::extract::extract_into_checked(frame, in_port, &mut key).is_err() {
        return Err(PacketOutError::BadPacket);
    }
    // The actions are checked against the packet (its protocol pins
    // set_field's prerequisites), as Open vSwitch checks them.
    let mut m = Match::catchall();
    m.set_field_masked(FieldId::EthType.info(), u128::from(key.dl_type()), 0xffff);
    if key.is_ip_any() {
        m.set_field_masked(FieldId::NwProto.info(), u128::from(key.nw_proto()), 0xff);
    }
    let rule = Rule::new(m, actions);
    // Read through the rule parser unless that would check and change
    // nothing (outputs, controller, ...: most packet-outs).
    let mut rule = if flowpath_ofproto::parse::is_canonical(&rule) {
        rule
    } else {
        flowpath_ofproto::parse::parse_rule(&rule.to_string())
            .map_err(|e| PacketOutError::BadActions(e.to_string()))?
    };
    // No rule's cookie (as OVS: packet-ins from a packet-out carry none).
    rule.cookie = u64::MAX;
    let sh = ctl.shared();
    let tables = sh.published().tables;
    let one = OneShot {
        inner: &tables,
        rule,
        used: Cell::new(false),
    };
    let x = xlate_on(&one, Some(&sh.bridge), &key, now_ms, XlateMode::default());
    execute(ctl, in_port, frame, x, now_ms)
}

/// Resumes a paused translation (`NXT_RESUME`): the frozen rest thawed on
/// `frame` (with the registers and ingress port the controller sent
/// back), run as a packet-out.
pub fn resume(
    ctl: &Control,
    frame: &[u8],
    state: flowpath_ofproto::recirc::FrozenState,
    now_ms: u64,
) -> Result<Vec<PacketIn>, PacketOutError> {
    let in_port = state.in_port;
    let mut key = FlowKey::default();
    if flowpath_flow::extract::extract_into_checked(frame, in_port, &mut key).is_err() {
        return Err(PacketOutError::BadPacket);
    }
    let Some(id) = flowpath_ofproto::recirc::alloc(state) else {
        return Err(PacketOutError::Busy);
    };
    key.set_recirc_id(id);
    let sh = ctl.shared();
    let tables = sh.published().tables;
    let x = xlate_on(
        &*tables,
        Some(&sh.bridge),
        &key,
        now_ms,
        XlateMode::default(),
    );
    execute(ctl, in_port, frame, x, now_ms)
}

/// Runs a translation's actions on `frame` on this thread (see
/// [`crate::pmd::ControlExec`]); returns the packet-ins it caused.
fn execute(
    ctl: &Control,
    in_port: u32,
    frame: &[u8],
    x: flowpath_ofproto::xlate::Xlate,
    now_ms: u64,
) -> Result<Vec<PacketIn>, PacketOutError> {
    if let Some(e) = x.error {
        return Err(PacketOutError::BadActions(e));
    }
    if !x.recirculations.is_empty() {
        return Err(PacketOutError::BadActions(
            "actions that recirculate are not supported in a packet-out".into(),
        ));
    }
    let sh = ctl.shared();
    let tx = sh.tx.read().unwrap_or_else(|p| p.into_inner()).clone();
    let mut guard = sh.control_exec.lock().unwrap_or_else(|p| p.into_inner());
    let exec = match &mut *guard {
        Some(e) => e,
        None => {
            let made = ControlExec::new(
                sh.published().tables,
                sh.bridge.clone(),
                sh.sample_sink.clone(),
                sh.conntrack.clone(),
                sh.ipf.clone(),
            )
            .map_err(|_| PacketOutError::Busy)?;
            guard.insert(made)
        }
    };
    let mut pins = Vec::new();
    if exec.run(&tx, in_port, frame, &x.actions, now_ms, &mut pins) {
        Ok(pins)
    } else {
        Err(PacketOutError::BadPacket)
    }
}
