//! Translation ("xlate"): a packet's walk through the rule tables, giving
//! the datapath actions and the megaflow mask.
//!
//! # What
//!
//! Starting in table 0, the packet's flow is looked up, the matching rule's
//! actions are applied in order (`resubmit` and `goto_table` look it up
//! again in other tables), and every output is preceded by a *commit* that
//! emits the datapath `set`/`push_vlan`/`pop_vlan` actions needed to turn
//! the packet as the datapath has it into the packet as the rules have made
//! it. Semantics are those of Open vSwitch with `fail-mode=secure`: highest
//! priority wins, a table miss drops, `output` to the packet's own in_port
//! is skipped (the `in_port` action sends it back), OpenFlow port N is
//! datapath port N.
//!
//! # Freezing
//!
//! Where the rest of the translation needs what only the datapath can
//! give — the L3 header of a packet a `pop_mpls` made IP again, a select
//! group's datapath hash — translation freezes as OVS's does: every level
//! of the resubmit stack keeps the actions it had left (with OVS's
//! `unroll_xlate` markers), the freeze ends at the top, at the end of a
//! group bucket or of a `check_pkt_larger` branch with `[hash(...),]
//! recirc(ID)`, the state kept under ID ([`crate::recirc`]); a packet whose
//! key has that `recirc_id` resumes from it ("thaw").
//!
//! # Wildcards
//!
//! The megaflow mask starts with what is always examined (in_port,
//! dl_type, and nw_frag for IP), accumulates the classifier's recorded bits
//! for every lookup, and the fields that actions read or write (a rewritten
//! field is matched exactly, so that "no change needed" is safe; `dec_ttl`
//! reads the TTL; L4 rewrites read nw_proto). It then gets OVS's final
//! touches: the VLAN CFI bit with any TCI bit, only the low 8 bits of ICMP
//! type/code, no ports for later fragments.
//!
//! # Invariant
//!
//! Every packet that agrees with the translated packet on the megaflow mask
//! gets exactly the same datapath actions (property-tested against the
//! linear-scan reference, [`crate::linear`]).
//!
//! Pure computation on a `FlowKey`: no I/O, no clock (a freeze or thaw
//! takes the process-wide recirculation table's lock once).
//!
//! # Layout
//!
//! This module holds the entry points, the walk through the tables and
//! freezing; the actions by family are in `actions` (outputs, choices,
//! control flow, field writes, MPLS), with `groups` (groups, bundle,
//! multipath), `fields` (writes, reads, `check_pkt_larger`, `learn`),
//! `mpls`, `bridge` (`NORMAL`) and `commit` (the datapath actions before
//! each output, the mask's final touches).

use crate::action::{Action, OFPP_LOCAL};
use crate::normal::{self, NormalEnv, PortVlans};
use crate::recirc::{FrozenState, Segment};
use crate::tables::{FragMode, Lookup};
use flowpath_flow::field::FieldId;
use flowpath_flow::key::{FRAG_ANY, FRAG_LATER, VLAN_CFI, W_MPLS};
use flowpath_flow::{FlowKey, FlowMask, Match, Regs, Style};
use flowpath_odp::{DpAction, DpActions, SetHeader};
use std::fmt::Write as _;

mod actions;
mod bridge;
mod commit;
mod ct;
mod fields;
mod freeze;
mod groups;
mod mpls;
mod trace;
mod tunnel;

use actions::{At, Step};
use groups::multipath_link;
use mpls::{is_mpls, MPLS_MAX_LABELS};
pub use trace::{next_ct_state, packet_text, resume_banner, trace_with_ct};

/// An action set (or a group bucket, which OpenFlow executes as one) in
/// execution order: the last `strip_vlan`/`pop_vlan`, the last
/// `pop_mpls`, the last `push_mpls`, the last `push_vlan`, the last
/// `dec_ttl`, the last `dec_mpls_ttl`, every set-field, `load`, `move` and
/// `set_mpls_*` in the order written,
/// then the last output (`output`, `IN_PORT`, `ALL`, `FLOOD`, `NORMAL`,
/// `CONTROLLER`, `resubmit`, `group`, the group taking precedence).
/// `None` without an output: nothing is done at all.
fn action_set_order(set: &[Action]) -> Option<Vec<Action>> {
    let last = |f: &dyn Fn(&Action) -> bool| set.iter().rev().find(|a| f(a)).copied();
    let output = last(&|a| matches!(a, Action::Group(_)))
        .or_else(|| {
            last(&|a| {
                matches!(
                    a,
                    Action::Output(_)
                        | Action::OutputTrunc { .. }
                        | Action::Enqueue { .. }
                        | Action::Bundle { .. }
                        | Action::InPort
                        | Action::All
                        | Action::Flood
                        | Action::Normal
                        | Action::Controller { .. }
                        | Action::Resubmit { .. }
                )
            })
        })
        // As OVS 3.1's final actions: ct_clear, then ct, only without any of
        // the above.
        .or_else(|| last(&|a| matches!(a, Action::CtClear)))
        .or_else(|| last(&|a| matches!(a, Action::Ct(_))))?;
    let mut list: Vec<Action> = Vec::new();
    list.extend(last(&|a| matches!(a, Action::PopVlan)));
    list.extend(last(&|a| matches!(a, Action::PopMpls(_))));
    list.extend(last(&|a| matches!(a, Action::PushMpls(_))));
    list.extend(last(&|a| matches!(a, Action::PushVlan(_))));
    list.extend(last(&|a| {
        matches!(a, Action::DecTtl | Action::DecTtlIds { .. })
    }));
    list.extend(last(&|a| matches!(a, Action::DecMplsTtl)));
    list.extend(set.iter().copied().filter(|a| {
        matches!(
            a,
            Action::SetField { .. }
                | Action::Load { .. }
                | Action::Move { .. }
                | Action::ModVlanVid(_)
                | Action::ModVlanPcp(_)
                | Action::SetMplsLabel(_)
                | Action::SetMplsTc(_)
                | Action::SetMplsTtl(_)
        )
    }));
    list.extend(last(&|a| matches!(a, Action::SetQueue(_))));
    list.push(output);
    Some(list)
}

/// The actions that OVS lets run after a `pop_mpls` to a non-MPLS
/// EtherType without parsing the packet again (`recirc_for_mpls`):
/// outputs, queue choice, groups (a select group is checked when it
/// picks), and rewrites below L3.
fn reads_only_l2(a: &Action) -> bool {
    use flowpath_flow::field::EthReq;
    match *a {
        Action::Output(_)
        | Action::OutputTrunc { .. }
        | Action::Enqueue { .. }
        | Action::InPort
        | Action::All
        | Action::Flood
        | Action::Normal
        | Action::ModVlanVid(_)
        | Action::ModVlanPcp(_)
        | Action::SetQueue(_)
        | Action::Group(_) => true,
        Action::SetField { field, .. }
        | Action::Load {
            dst: crate::action::Subfield { field, .. },
            ..
        } => matches!(field.info().prereq.eth, EthReq::Any | EthReq::Mpls),
        _ => false,
    }
}

/// Most nested resubmits (OVS's translation depth limit).
pub const MAX_DEPTH: u32 = 64;
/// Most resubmits in one translation (OVS's limit).
pub const MAX_RESUBMITS: u32 = 4096;
/// Most datapath actions `check_pkt_larger` branches may grow a
/// translation to (each nested check doubles what follows it; OVS's
/// limit is the 64 KB of a netlink attribute).
pub const MAX_DP_ACTIONS: usize = 4096;

/// The outcome of translating one packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xlate {
    /// Datapath actions (empty = drop).
    pub actions: DpActions,
    /// The megaflow mask: bits of the packet key the actions depend on.
    pub megaflow: FlowMask,
    /// The flow after all actions (as the rules left it).
    pub final_flow: FlowKey,
    /// Human-readable walk through the tables (when asked for).
    pub trace: String,
    /// True when translation was cut short (too deep / too many
    /// resubmits); the actions are then empty, as in OVS.
    pub error: Option<String>,
    /// The flows `learn` actions made (only when side effects were
    /// allowed: [`XlateMode::learn`]); the caller adds them to the tables.
    pub learned: Vec<crate::rule::Rule>,
    /// Indexes (in [`Lookup::lookup_indexed`]'s numbering, for
    /// [`crate::tables::RuleTables`] the position in its rule list) of the
    /// rules the packet went through, in order; filled only by
    /// [`xlate_recording_rules`] (rule statistics), empty otherwise.
    pub rules: Vec<u32>,
    /// The groups the packet went through, in order, with the index of
    /// the bucket taken (`None`: every bucket, an `all` or `indirect`
    /// group); filled only as [`Xlate::rules`] is (group statistics).
    pub groups: Vec<(u32, Option<u32>)>,
    /// The translation read the CFI bit of the packet's tag and no other
    /// TCI bit (the megaflow is the same; OVS prints it, see
    /// [`Style::MegaflowCfiRead`]).
    pub cfi_read: bool,
    /// Each `recirc(ID)` the actions end a frozen translation with.
    pub recirculations: Vec<Recirculation>,
    /// The Geneve option map translation saw (the option lengths the
    /// megaflow is printed with).
    pub tlv: flowpath_wire::tunnel::TlvMap,
}

/// A `recirc(ID)` a translation ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recirculation {
    /// The recirculation id.
    pub id: u32,
    /// The packet the datapath sends back, as the actions before left it
    /// (its next pass's key adds `recirc_id` and, after a `hash`, the
    /// `dp_hash` bits).
    pub packet: FlowKey,
    /// After a `hash(...)` action: the 32-bit hash the datapath computes
    /// for it (OVS's; `hash(l4)` of a packet that is not a received one's
    /// first pass takes the translated packet as the received one).
    pub dp_hash: Option<u32>,
    /// After a `ct(table=N)`: the next pass's key also has the `ct_*`
    /// fields the tracker gives (in a trace, `--ct-next`'s state), and
    /// its addresses and ports as NAT made them.
    pub ct: Option<CtRecirc>,
}

/// What a `ct(table=N)` recirculation adds to [`Recirculation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtRecirc {
    /// The table the next pass resumes in.
    pub table: u8,
    /// The zone the packet was tracked in.
    pub zone: u16,
    /// The `ct`'s NAT, if any.
    pub nat: Option<flowpath_odp::CtNat>,
}

impl Recirculation {
    /// The next pass's key as OVS's `ofproto/trace` makes it: the packet
    /// with this `recirc_id`, its `dp_hash` bits, and after a `ct`, the
    /// tracker's state `ct_state` and the NAT simulated (the range's
    /// first address and port, as OVS's trace does).
    pub fn next_key(&self, ct_state: u8) -> FlowKey {
        let mut k = self.packet;
        k.set_recirc_id(self.id);
        if let Some(h) = self.dp_hash {
            k.set_dp_hash(flowpath_flow::key::dp_hash_bits(h));
        }
        let Some(ct) = &self.ct else {
            return k;
        };
        k.set_ct_state(ct_state);
        let Some(n) = ct.nat.filter(|n| n.has_addr) else {
            return k;
        };
        let fam = (!n.v6 && k.is_ipv4()) || (n.v6 && k.is_ipv6());
        if !fam {
            return k;
        }
        match n.kind {
            flowpath_odp::NatKind::Src => {
                if n.v6 {
                    k.set_ipv6_src(n.addr_min);
                } else {
                    k.set_nw_src(n.addr_min as u32);
                }
                if n.port_min != 0 {
                    k.set_tp_src(n.port_min);
                }
            }
            flowpath_odp::NatKind::Dst => {
                if n.v6 {
                    k.set_ipv6_dst(n.addr_min);
                } else {
                    k.set_nw_dst(n.addr_min as u32);
                }
                if n.port_min != 0 {
                    k.set_tp_dst(n.port_min);
                }
            }
            flowpath_odp::NatKind::Existing => {}
        }
        k
    }
}

/// See `Ctx::flow_state`.
#[derive(Clone, Copy)]
struct FlowState {
    flow: FlowKey,
    regs: Regs,
    base: FlowKey,
    flow_tpid: [u16; 2],
    base_tpid: [u16; 2],
    tag_src: [Option<u8>; 2],
    was_mpls: bool,
}

struct Ctx<'a, 'e, L: Lookup> {
    tables: &'a L,
    /// `NORMAL`'s state (learning table, VLANs); `None`: an empty table,
    /// no learning, no VLAN configuration, no LOCAL port.
    normal: Option<NormalEnv<'e>>,
    flow: FlowKey,
    /// The registers and `metadata` (all zero when the packet enters).
    regs: Regs,
    /// The `push`/`pop` stack.
    stack: Vec<u128>,
    base: FlowKey,
    wc: FlowMask,
    odp: DpActions,
    depth: u32,
    resubmits: u32,
    tracing: bool,
    trace: String,
    error: Option<String>,
    /// VLAN TPIDs of the flow's / the datapath packet's tags (outer, inner);
    /// the key does not carry them, tags present on input count as 0x8100.
    flow_tpid: [u16; 2],
    base_tpid: [u16; 2],
    /// For each of the flow's tags (outer, inner): the datapath packet's
    /// tag it is, bits other than significant ones unchanged (`None`: a
    /// tag the actions made). Comparing a made tag with the packet's
    /// reads all of the packet's tag (see `commit_vlan`).
    tag_src: [Option<u8>; 2],
    /// The packet as it arrived.
    orig: FlowKey,
    /// Record the rules hit (`Some`) or not.
    rules: Option<Vec<u32>>,
    /// Record the groups and buckets taken (`Some`) or not.
    groups: Option<Vec<(u32, Option<u32>)>>,
    /// The OpenFlow action set (`write_actions` appends, `clear_actions`
    /// empties), run when the pipeline ends.
    action_set: Vec<Action>,
    /// The table translation is in (for a `resubmit` without a table in
    /// the action set).
    cur_table: u8,
    /// Whether `learn` learns (an upcall) or only reads (a trace, a
    /// revalidation).
    side_effects: bool,
    /// The flows `learn` made.
    learned: Vec<crate::rule::Rule>,
    /// See [`Xlate::cfi_read`].
    cfi_read: bool,
    /// A `pop_mpls` made the packet IP (or other non-MPLS) again: its L3
    /// header was never parsed, so what reads it needs the packet parsed
    /// again: translation freezes and the packet recirculates.
    was_mpls: bool,
    /// Translation is freezing ([`crate::recirc`]): `Some(hash)`, with the
    /// datapath hash (`(symmetric, basis)`) to compute before
    /// recirculating, if any. Every level of the resubmit stack then stops
    /// and keeps its actions left in `frozen`, up to where the freeze is
    /// finished (`finish_freezing`).
    freezing: Option<Option<(bool, u32)>>,
    /// The actions left so far by the levels stopped, innermost first.
    frozen: Vec<Segment>,
    /// See [`Xlate::recirculations`].
    recirculations: Vec<Recirculation>,
    /// The cookie of the rule whose actions run (`u64::MAX` before any).
    cookie: u64,
    /// The last `UnrollXlate` marker this freeze put, as (table, cookie).
    unrolled: Option<(u8, u64)>,
    /// The rule whose actions run is a table-miss rule (priority 0,
    /// matching everything): its packet-ins are explicit misses.
    miss_rule: bool,
    /// Translating a group bucket's own actions (a packet-in's reason is
    /// then "group").
    in_bucket: bool,
    /// Translating the action set (reason "action_set").
    in_action_set: bool,
    /// A `controller(pause)` stopped translation.
    paused: bool,
    /// A `controller(pause)` froze the translation: the index in `odp` of
    /// its controller action, which gets the frozen state's id.
    pausing: Option<usize>,
    /// The action list being run is the last of the translation (OVS's
    /// `is_last_action`: the top level, the last action's resubmit or
    /// group, the action set, a datapath clone's actions); its last action
    /// is the translation's last when the action set is empty.
    last_level: bool,
    /// Whether the packet is tracked here, as OVS's `ctx->conntracked`: a
    /// first pass whose key has `+trk`, a `ct(table=N)`'s pass (and what
    /// its own freezes resume); a `ct` ends it. `ct_clear` does (and
    /// emits) nothing outside it.
    conntracked: bool,
    /// Mark the packet ECN CE after the next table lookup (a tunnel
    /// packet whose outer header says congestion: see `tunnel_ecn_drop`).
    ecn_ce: bool,
}

/// Translates `key` through `tables`. With `trace`, also records the
/// human-readable walk in [`Xlate::trace`].
pub fn xlate<L: Lookup>(tables: &L, key: &FlowKey, trace: bool) -> Xlate {
    xlate_inner(tables, key, trace, false, None, false)
}

/// [`xlate`] with the bridge state `NORMAL` uses (and learns into when
/// `env.learn`); `record` also fills [`Xlate::rules`].
pub fn xlate_with<L: Lookup>(
    tables: &L,
    key: &FlowKey,
    trace: bool,
    record: bool,
    env: Option<NormalEnv<'_>>,
) -> Xlate {
    let learn = env.as_ref().is_some_and(|e| e.learn);
    xlate_inner(tables, key, trace, record, env, learn)
}

/// What [`xlate_on`] does besides translating.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XlateMode {
    /// Record the human-readable walk ([`Xlate::trace`]).
    pub trace: bool,
    /// Record the rules gone through ([`Xlate::rules`]).
    pub record: bool,
    /// `NORMAL` learns the packet's source (an upcall; not a trace or a
    /// revalidation).
    pub learn: bool,
    /// `learn` actions make their flows ([`Xlate::learned`]) even without
    /// `learn`: a revalidation that refreshes the flows a megaflow's
    /// packets learn, as OVS's translation cache does (`NORMAL` does not
    /// learn from it).
    pub relearn: bool,
}

/// [`xlate_with`] on a bridge's shared `NORMAL` state: its learning table
/// is locked for the translation; `None` translates with an empty table
/// and no learning (give `None` when the tables do not use `NORMAL`, to
/// take no lock).
pub fn xlate_on<L: Lookup>(
    tables: &L,
    bridge: Option<&crate::normal::Bridge>,
    key: &FlowKey,
    now_ms: u64,
    mode: XlateMode,
) -> Xlate {
    let Some(b) = bridge else {
        return xlate_inner(
            tables,
            key,
            mode.trace,
            mode.record,
            None,
            mode.learn || mode.relearn,
        );
    };
    let mut macs = b.macs();
    let vlans = b.vlans();
    let env = NormalEnv {
        vlans: &vlans,
        macs: &mut macs,
        now_ms,
        learn: mode.learn,
        local: b.local,
    };
    xlate_inner(
        tables,
        key,
        mode.trace,
        mode.record,
        Some(env),
        mode.learn || mode.relearn,
    )
}

/// [`xlate`] that also records which rules the packet went through
/// ([`Xlate::rules`]), for attributing statistics to rules (the
/// revalidator); costs one small allocation more than [`xlate`].
pub fn xlate_recording_rules<L: Lookup>(tables: &L, key: &FlowKey) -> Xlate {
    xlate_inner(tables, key, false, true, None, false)
}

fn xlate_inner<L: Lookup>(
    tables: &L,
    key: &FlowKey,
    trace: bool,
    record: bool,
    normal: Option<NormalEnv<'_>>,
    side_effects: bool,
) -> Xlate {
    let mut wc = FlowMask::catchall();
    let mut m = wc.to_key();
    m.set_in_port(u32::MAX);
    m.set_recirc_id(u32::MAX);
    m.set_dl_type(0xffff);
    if key.is_ip_any() {
        m.set_nw_frag(0x3);
    }
    wc = FlowMask::from_key(&m);
    let tpid = |tci: u16| if tci & VLAN_CFI != 0 { 0x8100 } else { 0 };
    let tpids = [tpid(key.vlan_tci()), tpid(key.vlan_tci_inner())];
    let mut ctx = Ctx {
        tables,
        normal,
        flow: *key,
        regs: Regs::zero(),
        stack: Vec::new(),
        base: *key,
        wc,
        odp: Vec::new(),
        depth: 0,
        resubmits: 0,
        tracing: trace,
        trace: String::new(),
        error: None,
        flow_tpid: tpids,
        base_tpid: tpids,
        tag_src: [Some(0), Some(1)],
        orig: *key,
        rules: record.then(Vec::new),
        groups: record.then(Vec::new),
        action_set: Vec::new(),
        cur_table: 0,
        side_effects,
        learned: Vec::new(),
        cfi_read: false,
        was_mpls: false,
        freezing: None,
        frozen: Vec::new(),
        recirculations: Vec::new(),
        cookie: u64::MAX,
        unrolled: None,
        miss_rule: false,
        in_bucket: false,
        in_action_set: false,
        paused: false,
        pausing: None,
        last_level: true,
        conntracked: key.ct_state() & flowpath_flow::key::ct_state::TRK != 0,
        ecn_ce: false,
    };
    let rx_off = tables.port_config(key.in_port())
        & (crate::tables::port_config::NO_RECV | crate::tables::port_config::PORT_DOWN);
    // Native tunnelling: the underlay's packets never reach the tables; a
    // decapsulated packet's in_port becomes its tunnel port's.
    let mut tunnel_done = false;
    if let Some(t) = tables.tunnels() {
        if t.underlay().is_some_and(|u| u.port == key.in_port()) {
            ctx.underlay_input(t);
            tunnel_done = true;
        } else if key.recirc_id() == 0
            && t.vport_kind(key.in_port()).is_some()
            && !ctx.tunnel_receive(t)
        {
            tunnel_done = true;
        }
    }
    if tunnel_done || (key.recirc_id() == 0 && ctx.tunnel_ecn_drop()) {
    } else if rx_off != 0 && !is_stp(key) {
        // As OVS: nothing from a port that may not receive (STP's
        // frames still come in unless the port is down).
        ctx.note(
            0,
            "OFPPC_NO_RECV or OFPPC_PORT_DOWN set on the input port: dropping",
        );
    } else if rx_off & crate::tables::port_config::PORT_DOWN != 0 {
        ctx.note(0, "OFPPC_PORT_DOWN set on the input port: dropping");
    } else if key.recirc_id() == 0 {
        ctx.xlate_table(0, None);
    } else {
        ctx.thaw(key.recirc_id());
    }
    if ctx.error.is_none() && ctx.freezing.is_none() && !ctx.paused {
        ctx.run_action_set();
    }
    if ctx.error.is_none() {
        ctx.finish_freezing();
    }
    if ctx.error.is_some() {
        ctx.odp.clear();
        ctx.recirculations.clear();
    } else {
        // As OVS: a failed translation's megaflow is what it read, without
        // the final touches (it is never installed; a trace prints it).
        ctx.finish_wc();
        // As OVS: a datapath clone that is the last action needs no copy
        // (its actions are the last on the packet).
        let mut i = 0;
        let mut last = None;
        while let Some(a) = ctx.odp.get(i) {
            last = Some(i);
            i += a.flat_len();
        }
        if let Some(i) = last.filter(|&i| matches!(ctx.odp[i], DpAction::Clone { .. })) {
            ctx.odp.remove(i);
        }
    }
    Xlate {
        actions: ctx.odp,
        megaflow: ctx.wc,
        final_flow: ctx.flow,
        trace: ctx.trace,
        error: ctx.error,
        learned: ctx.learned,
        rules: ctx.rules.unwrap_or_default(),
        groups: ctx.groups.unwrap_or_default(),
        cfi_read: ctx.cfi_read,
        recirculations: ctx.recirculations,
        tlv: tables.tunnels().map(|t| t.tlv()).unwrap_or_default(),
    }
}

/// An STP frame (to the bridge group address 01:80:c2:00:00:00).
fn is_stp(key: &FlowKey) -> bool {
    key.dl_dst() == 0x0180_c200_0000
}

impl<L: Lookup> Ctx<'_, '_, L> {
    fn note(&mut self, indent: u32, text: &str) {
        if self.tracing {
            for _ in 0..indent {
                self.trace.push_str("    ");
            }
            self.trace.push_str(text);
            self.trace.push('\n');
        }
    }

    /// Runs the action set at the end of the pipeline, in OpenFlow's order:
    /// the last `strip_vlan`/`pop_vlan`, the last `push_vlan`, the last
    /// `dec_ttl`, every set-field in the order written, then the last
    /// output (`output`, `IN_PORT`, `ALL`, `FLOOD`, `NORMAL`,
    /// `CONTROLLER`, `resubmit`); nothing at all without an output.
    fn run_action_set(&mut self) {
        let set = std::mem::take(&mut self.action_set);
        if set.is_empty() {
            return;
        }
        let Some(list) = action_set_order(&set) else {
            self.note(0, "action set: no output, nothing to do");
            return;
        };
        if self.tracing {
            self.note(0, "action set:");
        }
        let table = self.cur_table;
        let was = std::mem::replace(&mut self.in_action_set, true);
        let level = std::mem::replace(&mut self.last_level, true);
        self.do_actions(&list, &[], table);
        self.last_level = level;
        self.in_action_set = was;
    }

    /// Looks the flow up in `table` (with `in_port` replaced by
    /// `lookup_port` for the lookup only, as OVS's `resubmit(PORT,T)`: the
    /// rule's actions see the flow's own in_port) and runs the rule.
    fn xlate_table(&mut self, table: u8, lookup_port: Option<u32>) {
        if self.was_mpls {
            // The lookup reads L3: it runs after recirculation.
            self.freezing = Some(None);
            let resubmit = Action::Resubmit {
                port: lookup_port,
                table: Some(table),
            };
            self.unroll(&[resubmit], &[], table);
            return;
        }
        self.cur_table = table;
        let tables = self.tables;
        // IP fragments (nw_frag, always significant for IP, tells them):
        // as OVS's bridge, by its frag mode.
        let fragment = self.flow.is_ip_any() && self.flow.nw_frag() & FRAG_ANY != 0;
        let saved_l4 = (self.flow.tp_src(), self.flow.tp_dst());
        if fragment {
            match tables.frag_mode() {
                FragMode::NxMatch => {}
                FragMode::Normal => {
                    // Looked up as if it had no ports (restored after).
                    self.flow.set_tp_src(0);
                    self.flow.set_tp_dst(0);
                }
                FragMode::Drop => {
                    // OVS's internal drop-fragments rule: no actions.
                    if self.tracing {
                        let indent = self.depth;
                        self.note(
                            indent,
                            &format!("{table:2}. Packets are IP fragments and the fragment handling mode is \"drop\"."),
                        );
                        self.note(indent + 1, "drop");
                    }
                    return;
                }
            }
        }
        let saved_port = self.flow.in_port();
        if let Some(p) = lookup_port {
            self.flow.set_in_port(p);
        }
        let rule = match self.rules.as_mut() {
            None => tables.lookup(table, &self.flow, &self.regs, Some(&mut self.wc)),
            Some(seen) => tables
                .lookup_indexed(table, &self.flow, &self.regs, Some(&mut self.wc))
                .map(|(id, r)| {
                    if let Some(id) = id {
                        seen.push(id);
                    }
                    r
                }),
        };
        self.flow.set_in_port(saved_port);
        self.flow.set_tp_src(saved_l4.0);
        self.flow.set_tp_dst(saved_l4.1);
        if std::mem::take(&mut self.ecn_ce) {
            self.flow.set_nw_tos(self.flow.nw_tos() | 3);
            let f = FieldId::NwEcn.info();
            f.or_mask(&mut self.wc, f.full_mask());
        }
        let indent = self.depth;
        match rule {
            None if indent == 0
                && tables.miss_to_controller()
                && tables.port_config(self.orig.in_port())
                    & crate::tables::port_config::NO_PACKET_IN
                    == 0 =>
            {
                if self.tracing {
                    self.note(indent, &format!("{table:2}. No match."));
                    self.note(indent + 1, "CONTROLLER:65535");
                }
                self.packet_in(0, 0, u16::MAX);
            }
            None => {
                if self.tracing {
                    self.note(indent, &format!("{table:2}. No match."));
                    self.note(indent + 1, "drop");
                }
            }
            Some(r) => {
                if self.tracing {
                    let m = r.matching.format(Style::Rule);
                    let m = if m.is_empty() {
                        "priority ".to_string() + &r.priority.to_string()
                    } else {
                        format!("{m}, priority {}", r.priority)
                    };
                    let cookie = if r.cookie != 0 {
                        format!(", cookie {:#x}", r.cookie)
                    } else {
                        String::new()
                    };
                    self.note(indent, &format!("{table:2}. {m}{cookie}"));
                }
                if r.actions.is_empty() && self.tracing {
                    self.note(indent + 1, "drop");
                }
                // As OVS: the rule's cookie while its actions run (back
                // to the resubmitting rule's after, but for the first).
                let cookie = std::mem::replace(&mut self.cookie, r.cookie);
                let miss = r.priority == 0 && r.matching == flowpath_flow::Match::catchall();
                let was_miss = std::mem::replace(&mut self.miss_rule, miss);
                let was_bucket = std::mem::replace(&mut self.in_bucket, false);
                self.do_actions(&r.actions, &r.write_actions, table);
                self.in_bucket = was_bucket;
                if self.depth > 0 {
                    self.cookie = cookie;
                    self.miss_rule = was_miss;
                }
            }
        }
    }

    fn do_actions(&mut self, actions: &[Action], write_set: &[Action], table: u8) {
        let level = self.last_level;
        self.run_list(actions, write_set, table);
        self.last_level = level;
    }

    fn run_list(&mut self, actions: &[Action], write_set: &[Action], table: u8) {
        let indent = self.depth + 1;
        // The end of a clone's actions (which it ran itself).
        let mut skip_to = 0;
        let level = self.last_level;
        for (i, a) in actions.iter().enumerate() {
            if i < skip_to {
                continue;
            }
            if self.error.is_some() || self.paused {
                return;
            }
            // This action is the translation's last (a clone: when it runs
            // to the end of the list).
            let end = match *a {
                Action::Clone { len } => i + 1 + usize::from(len),
                _ => i + 1,
            };
            self.last_level = level && end >= actions.len() && self.action_set.is_empty();
            if self.freezing.is_some() {
                // Frozen below this level: what is left here runs after
                // recirculation.
                self.unroll(&actions[i..], write_set, table);
                return;
            }
            if self.was_mpls && !reads_only_l2(a) {
                // As OVS: what may read the L3 header a pop_mpls exposed
                // (never parsed) runs after recirculation, from here.
                if self.tracing {
                    self.note(
                        indent,
                        &format!("{a}: recirculating to parse the packet after pop_mpls"),
                    );
                }
                self.freezing = Some(None);
                self.unroll(&actions[i..], write_set, table);
                return;
            }
            if self.tracing {
                self.note(indent, &a.to_string());
            }
            let step = match a {
                Action::Output(..)
                | Action::InPort
                | Action::OutputTrunc { .. }
                | Action::All
                | Action::Flood
                | Action::Controller { .. }
                | Action::OutputReg { .. }
                | Action::Normal
                | Action::SetQueue(..)
                | Action::PopQueue
                | Action::Enqueue { .. } => self.output_action(a, indent),
                Action::Sample { .. } => {
                    self.sample(a, indent);
                    Step::Next
                }
                Action::Clone { len } => {
                    let end = (i + 1 + usize::from(*len)).min(actions.len());
                    skip_to = end;
                    let last = self.last_level;
                    self.clone_actions(&actions[i + 1..end], table, last);
                    Step::Next
                }
                Action::Bundle { .. } | Action::Multipath { .. } => self.choice_action(a, indent),
                Action::Group(..)
                | Action::ClearActions
                | Action::UnrollXlate { .. }
                | Action::WriteActions
                | Action::Resubmit { .. }
                | Action::GotoTable(..)
                | Action::Conjunction { .. }
                | Action::Note(_)
                | Action::Learn(..)
                | Action::FinTimeout { .. }
                | Action::CheckPktLarger { .. } => self.control_action(
                    a,
                    &At {
                        i,
                        actions,
                        write_set,
                        table,
                        indent,
                    },
                ),
                Action::SetField { .. }
                | Action::DecTtl
                | Action::DecTtlIds { .. }
                | Action::PushVlan(..)
                | Action::PopVlan
                | Action::ModVlanVid(..)
                | Action::ModVlanPcp(..)
                | Action::Load { .. }
                | Action::Move { .. }
                | Action::Push(..)
                | Action::Pop(..)
                | Action::WriteMetadata { .. } => self.fields_action(a, indent),
                Action::PushMpls(..)
                | Action::PopMpls(..)
                | Action::SetMplsLabel(..)
                | Action::SetMplsTc(..)
                | Action::SetMplsTtl(..)
                | Action::DecMplsTtl => self.mpls_action(a, indent),
                Action::Ct(id) => self.ct_action(*id, indent),
                Action::CtClear => self.ct_clear_action(),
            };
            if step == Step::Stop {
                return;
            }
        }
    }

    fn priority_significant(&mut self) {
        let mut m = self.wc.to_key();
        m.set_skb_priority(u32::MAX);
        self.wc = FlowMask::from_key(&m);
    }

    fn enter_resubmit(&mut self) -> bool {
        self.resubmits += 1;
        if self.depth >= MAX_DEPTH {
            self.error = Some(format!("over max translation depth {MAX_DEPTH}"));
            return false;
        }
        if self.resubmits > MAX_RESUBMITS {
            self.error = Some(format!("over {MAX_RESUBMITS} resubmit actions"));
            return false;
        }
        true
    }
}

impl Xlate {
    /// The megaflow as OVS prints it (`recirc_id=0,eth,...`) for `key`.
    pub fn megaflow_text(&self, key: &FlowKey) -> String {
        let style = if self.cfi_read {
            Style::MegaflowCfiRead
        } else {
            Style::Megaflow
        };
        tunnel::options_text(Match::new(key, &self.megaflow).format(style), &self.tlv)
    }

    /// The full `ofproto/trace`-style report for `key` (needs `trace=true`).
    pub fn report(&self, key: &FlowKey, flow_text: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "Flow: {flow_text}");
        let _ = writeln!(s);
        let _ = writeln!(s, "bridge(\"br0\")");
        let _ = writeln!(s, "-------------");
        s.push_str(&self.trace);
        let _ = writeln!(s);
        if self.final_flow == *key {
            let _ = writeln!(s, "Final flow: unchanged");
        } else {
            let full = FlowMask {
                w: [u64::MAX; flowpath_flow::FLOW_WORDS],
            };
            let _ = writeln!(
                s,
                "Final flow: {}",
                Match::new(&self.final_flow, &full).format(Style::Rule)
            );
        }
        let _ = writeln!(s, "Megaflow: {}", self.megaflow_text(key));
        if let Some(e) = &self.error {
            let _ = writeln!(s, "Translation failed: {e}");
        }
        let _ = write!(
            s,
            "Datapath actions: {}",
            flowpath_odp::format_actions(&self.actions)
        );
        s
    }
}
