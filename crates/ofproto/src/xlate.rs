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

use crate::action::{Action, OFPP_LOCAL};
use crate::normal::{self, NormalEnv, PortVlans};
use crate::recirc::{FrozenState, Segment};
use crate::tables::Lookup;
use flowpath_flow::field::FieldId;
use flowpath_flow::key::{FRAG_LATER, VLAN_CFI, W_MPLS};
use flowpath_flow::{FlowKey, FlowMask, Match, Regs, Style};
use flowpath_odp::{DpAction, DpActions, SetHeader};
use std::fmt::Write as _;

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
    let output = last(&|a| matches!(a, Action::Group(_))).or_else(|| {
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
    })?;
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

/// `multipath`'s link for hash `h`, as OVS's `multipath_algorithm`:
/// `modulo_n` the remainder, `hash_threshold` equal slices of the hash
/// space, `hrw` (up to 64 links) the link whose `hash_2words(h, link)` is
/// highest (the lowest on ties), `iter_hash` (and `hrw` past 64 links)
/// `hash_2words(h, i) % m` for i = 0, 1, ... until it names a link, `m`
/// being `arg` if it lies in `n_links..=2 n_links + 1`, else the power of
/// two at or above `n_links`.
fn multipath_link(h: u32, alg: u8, n_links: u32, arg: u32) -> u32 {
    use flowpath_flow::ovs_hash::hash_2words;
    let n = n_links.max(1);
    let iter_hash = |modulo: u32| {
        let m = if modulo < n || modulo / 2 > n {
            n.next_power_of_two()
        } else {
            modulo
        };
        // (Each try fails with probability under 1/2: 64 tries never
        // all fail in practice; the remainder is a bound, not a choice.)
        (0..64u32)
            .map(|i| hash_2words(h, i) % m)
            .find(|&l| l < n)
            .unwrap_or(h % n)
    };
    match alg {
        0 => h % n,
        1 if n == 1 => 0,
        1 => h / (u32::MAX / n + 1),
        2 if n <= 64 => {
            let mut best = (0, hash_2words(h, 0));
            for l in 1..n {
                let w = hash_2words(h, l);
                if w > best.1 {
                    best = (l, w);
                }
            }
            best.0
        }
        2 => iter_hash(0),
        _ => iter_hash(arg),
    }
}

/// Makes the symmetric L4 part of OVS's hashes significant in `m`:
/// nw_proto, and the ports of TCP, SCTP and, if `udp`, UDP (not of a
/// later fragment).
fn sym_l4(f: &FlowKey, m: &mut FlowKey, udp: bool) {
    m.set_nw_proto(0xff);
    let ports = match f.nw_proto() {
        6 | 132 => true,
        17 => udp,
        _ => false,
    };
    if ports && f.nw_frag() & FRAG_LATER == 0 {
        m.set_tp_src(0xffff);
        m.set_tp_dst(0xffff);
    }
}

/// The bottom-of-stack bit of an MPLS label stack entry.
const MPLS_BOS: u32 = 1 << 8;
/// Label stack entries a flow keeps (OVS's `FLOW_MAX_MPLS_LABELS`).
const MPLS_MAX_LABELS: usize = 3;

fn is_mpls(dl_type: u16) -> bool {
    matches!(dl_type, 0x8847 | 0x8848)
}

/// OVS's `flow_count_mpls_labels` on `k`: the labels in its stack (up to
/// three: the entries to the first bottom of stack, or the non-zero ones
/// when none of the three is the bottom), and whether a bottom was found.
fn mpls_label_count(k: &FlowKey) -> (usize, bool) {
    if !is_mpls(k.dl_type()) {
        return (0, true);
    }
    let mut cnt = 0;
    for i in 0..MPLS_MAX_LABELS {
        let lse = k.mpls_lse(i);
        if lse & MPLS_BOS != 0 {
            return (i + 1, true);
        }
        if lse != 0 {
            cnt += 1;
        }
    }
    (cnt, false)
}

/// Moves the top `n` label stack entries of `k` one place down (entry
/// `n` is overwritten), making room for a new top entry.
fn lse_shift_down(k: &mut FlowKey, n: usize) {
    for i in (1..=n).rev() {
        let v = k.mpls_lse(i - 1);
        k.set_mpls_lse(i, v);
    }
}

/// Removes the top of the `n` label stack entries of `k` (the others move
/// up; entry `n - 1` becomes 0).
fn lse_shift_up(k: &mut FlowKey, n: usize) {
    for i in 1..n {
        let v = k.mpls_lse(i);
        k.set_mpls_lse(i - 1, v);
    }
    k.set_mpls_lse(n - 1, 0);
}

/// Clears every L3 and L4 field of `k` (OVS's `flow_push_mpls` on the
/// flow: an MPLS payload is opaque).
fn clear_l3(k: &mut FlowKey) {
    use flowpath_flow::key::{W_ARP_SHA, W_ARP_THA, W_IPV6_SRC, W_ND_TARGET, W_NW, W_TP};
    k.set_nw_proto(0);
    k.set_nw_frag(0);
    k.set_ipv6_label(0);
    for w in [W_NW, W_TP, W_ARP_SHA, W_ARP_THA] {
        k.w[w] = 0;
    }
    for w in W_IPV6_SRC..W_ND_TARGET + 2 {
        k.w[w] = 0;
    }
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
    /// The translation read the CFI bit of the packet's tag and no other
    /// TCI bit (the megaflow is the same; OVS prints it, see
    /// [`Style::MegaflowCfiRead`]).
    pub cfi_read: bool,
    /// Each `recirc(ID)` the actions end a frozen translation with.
    pub recirculations: Vec<Recirculation>,
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
    let env = NormalEnv {
        vlans: &b.vlans,
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
    };
    if key.recirc_id() == 0 {
        ctx.xlate_table(0, None);
    } else {
        ctx.thaw(key.recirc_id());
    }
    if ctx.error.is_none() && ctx.freezing.is_none() {
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
    }
    Xlate {
        actions: ctx.odp,
        megaflow: ctx.wc,
        final_flow: ctx.flow,
        trace: ctx.trace,
        error: ctx.error,
        learned: ctx.learned,
        rules: ctx.rules.unwrap_or_default(),
        cfi_read: ctx.cfi_read,
        recirculations: ctx.recirculations,
    }
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
        self.do_actions(&list, &[], table);
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
        let indent = self.depth;
        match rule {
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
                self.do_actions(&r.actions, &r.write_actions, table);
                if self.depth > 0 {
                    self.cookie = cookie;
                }
            }
        }
    }

    fn do_actions(&mut self, actions: &[Action], write_set: &[Action], table: u8) {
        let indent = self.depth + 1;
        for (i, a) in actions.iter().enumerate() {
            if self.error.is_some() {
                return;
            }
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
            match *a {
                Action::Output(port) => {
                    if port == self.flow.in_port() {
                        self.note(indent + 1, "skipping output to input port");
                    } else {
                        self.output(port);
                    }
                }
                Action::InPort => {
                    let p = self.flow.in_port();
                    self.output(p);
                }
                Action::OutputTrunc { port, max_len } => {
                    if port == self.flow.in_port() {
                        self.note(indent + 1, "skipping output to input port");
                    } else {
                        // As OVS: trunc(N) comes before the commit.
                        self.odp.push(DpAction::Trunc(max_len));
                        self.output(port);
                    }
                }
                Action::All | Action::Flood => {
                    let in_port = self.flow.in_port();
                    let ports: Vec<u32> = self
                        .tables
                        .ports()
                        .iter()
                        .copied()
                        .filter(|p| *p != in_port)
                        .collect();
                    for p in ports {
                        self.output(p);
                    }
                }
                Action::Controller { .. } => {
                    self.commit();
                    self.odp.push(DpAction::Controller);
                }
                Action::Normal => self.xlate_normal(indent + 1),
                Action::Bundle {
                    fields,
                    basis,
                    hrw,
                    members,
                    n,
                    load,
                } => {
                    let members = &members[..usize::from(n)];
                    let chosen = if hrw {
                        // As OVS's: the hash's fields significant when
                        // there is a choice; of the live members, the one
                        // whose hash_2words(index, hash) is highest (the
                        // first on ties).
                        if members.len() > 1 {
                            self.mask_hash_fields(fields);
                        }
                        let h = flowpath_flow::ovs_hash::hash_fields(&self.flow, fields, basis);
                        let mut best: Option<(u16, u32)> = None;
                        for (i, &p) in members.iter().enumerate() {
                            if self.port_live(u32::from(p)) {
                                let w = flowpath_flow::ovs_hash::hash_2words(i as u32, h);
                                if best.is_none_or(|(_, b)| w > b) {
                                    best = Some((p, w));
                                }
                            }
                        }
                        best.map(|(p, _)| p)
                    } else {
                        members
                            .iter()
                            .copied()
                            .find(|&p| self.port_live(u32::from(p)))
                    };
                    match (load, chosen) {
                        // bundle_load: OFPP_NONE when no member is live.
                        (Some(dst), c) => {
                            let v = u128::from(c.unwrap_or(0xffff));
                            self.set_field(dst.field, v << dst.ofs, dst.mask(), false);
                        }
                        (None, Some(p)) if u32::from(p) == self.flow.in_port() => {
                            self.note(indent + 1, "skipping output to input port");
                        }
                        (None, Some(p)) => self.output(u32::from(p)),
                        (None, None) => self.note(indent + 1, "no live bundle member: drop"),
                    }
                }
                Action::Multipath {
                    fields,
                    basis,
                    alg,
                    n_links,
                    arg,
                    dst,
                } => {
                    self.mask_hash_fields(fields);
                    let h = flowpath_flow::ovs_hash::hash_fields(&self.flow, fields, basis);
                    let link = multipath_link(h, alg, n_links, arg);
                    self.set_field(dst.field, u128::from(link) << dst.ofs, dst.mask(), false);
                }
                Action::Group(id) => {
                    // Groups nest (a bucket may send to a group): they count
                    // towards the resubmit and depth limits.
                    if !self.enter_resubmit() {
                        return;
                    }
                    self.depth += 1;
                    self.xlate_group(id, table);
                    self.depth -= 1;
                    if self.freezing.is_some() {
                        // The group froze to recirculate (a datapath hash
                        // to compute, or L3 to parse): it runs again then.
                        self.unroll(&actions[i..], write_set, table);
                        return;
                    }
                }
                Action::ClearActions => self.action_set.clear(),
                // A frozen translation's marker: the rule's table and
                // cookie again (flowpath's thawed levels carry their table).
                Action::UnrollXlate { cookie, .. } => self.cookie = cookie,
                // As OVS: a queue action makes the priority significant
                // whether or not an output follows.
                Action::SetQueue(q) => {
                    self.priority_significant();
                    self.flow.set_skb_priority(q);
                }
                Action::PopQueue => {
                    self.priority_significant();
                    self.flow.set_skb_priority(self.orig.skb_priority());
                }
                Action::Enqueue { port, queue } => {
                    self.priority_significant();
                    if port == self.flow.in_port() {
                        self.note(indent + 1, "skipping output to input port");
                    } else {
                        let saved = self.flow.skb_priority();
                        self.flow.set_skb_priority(queue);
                        self.output(port);
                        self.flow.set_skb_priority(saved);
                    }
                }
                Action::WriteActions => self.action_set.extend_from_slice(write_set),
                Action::Resubmit { port, table: t } => {
                    let target = t.unwrap_or(table);
                    if !self.enter_resubmit() {
                        return;
                    }
                    // A change of in_port by the resubmitted rule's actions
                    // stays, as in OVS.
                    self.depth += 1;
                    self.xlate_table(target, port);
                    self.depth -= 1;
                }
                Action::GotoTable(t) => {
                    if !self.enter_resubmit() {
                        return;
                    }
                    self.xlate_table(t, None);
                    return;
                }
                Action::SetField {
                    field,
                    value,
                    mask,
                    legacy,
                } => self.set_field(field, value, mask, legacy),
                Action::DecTtl | Action::DecTtlIds { .. } => {
                    let packet_ins = match *a {
                        Action::DecTtlIds { n, .. } => usize::from(n),
                        _ => 1,
                    };
                    // As OVS 3.1: the TTL and nw_proto become significant
                    // whatever the packet (an ARP packet's megaflow gets
                    // arp_op and nw_ttl); only IP packets are changed.
                    let mut m = self.wc.to_key();
                    m.set_nw_ttl(0xff);
                    m.set_nw_proto(0xff);
                    self.wc = FlowMask::from_key(&m);
                    if !self.flow.is_ip_any() {
                        continue;
                    }
                    let ttl = self.flow.nw_ttl();
                    if ttl > 1 {
                        self.flow.set_nw_ttl(ttl - 1);
                    } else {
                        let v = if self.flow.is_ipv4() { 4 } else { 6 };
                        self.note(indent + 1, &format!("IPv{v} decrement TTL exception"));
                        // As OVS: the packet goes to the controller (reason
                        // "invalid TTL") and this table's remaining actions
                        // are skipped.
                        self.commit();
                        for _ in 0..packet_ins {
                            self.odp.push(DpAction::Controller);
                        }
                        return;
                    }
                }
                Action::PushVlan(tpid) => {
                    // Existing tags become significant (they move inward).
                    let mut m = self.wc.to_key();
                    if self.flow.vlan_tci() & VLAN_CFI != 0 {
                        m.set_vlan_tci(0xffff);
                        if self.flow.vlan_tci_inner() & VLAN_CFI != 0 {
                            m.set_vlan_tci_inner(0xffff);
                        }
                    }
                    self.wc = FlowMask::from_key(&m);
                    self.flow.set_vlan_tci_inner(self.flow.vlan_tci());
                    self.flow.set_vlan_tci(VLAN_CFI);
                    self.flow_tpid = [tpid, self.flow_tpid[0]];
                    self.tag_src = [None, self.tag_src[0]];
                }
                Action::PopVlan => {
                    let mut m = self.wc.to_key();
                    if self.flow.vlan_tci_inner() & VLAN_CFI != 0 {
                        m.set_vlan_tci_inner(0xffff);
                    }
                    self.wc = FlowMask::from_key(&m);
                    self.flow.set_vlan_tci(self.flow.vlan_tci_inner());
                    self.flow.set_vlan_tci_inner(0);
                    self.flow_tpid = [self.flow_tpid[1], 0];
                    self.tag_src = [self.tag_src[1], None];
                }
                Action::ModVlanVid(vid) => self.set_vlan(0x0fff, vid & 0x0fff, true),
                Action::ModVlanPcp(pcp) => self.set_vlan(0xe000, u16::from(pcp & 7) << 13, true),
                Action::Load { dst, value } => {
                    self.set_field(dst.field, value << dst.ofs, dst.mask(), false)
                }
                Action::Move { src, dst } => {
                    // As OVS: both ends' bits become significant; nothing
                    // is copied when either lacks its prerequisites (only
                    // possible in a group bucket).
                    if !self.prereqs_ok(dst.field) {
                        self.note(indent + 1, "skipped: the packet lacks the destination");
                        continue;
                    }
                    match self.read_subfield(src) {
                        Some(v) => self.move_to(dst, v),
                        None => self.note(indent + 1, "skipped: the packet lacks the source"),
                    }
                }
                Action::Push(sf) => {
                    let v = self.read_subfield(sf).unwrap_or(0);
                    self.stack.push(v);
                }
                Action::Pop(sf) => match self.stack.pop() {
                    Some(v) => {
                        if self.prereqs_ok(sf.field) {
                            self.move_to(sf, v);
                        }
                    }
                    None => self.note(indent + 1, "stack underflow: nothing popped"),
                },
                // A conjunctive flow is never the classifier's answer: its
                // clauses only make the `conj_id` flow match.
                Action::Conjunction { .. } => {}
                Action::Learn(id) => self.learn(id, indent),
                // As OVS 3.1: nw_proto becomes significant (whether the
                // packet can carry a FIN); the timeouts come down outside
                // translation, from the megaflows' TCP flags (the learned
                // flows' in the slow path, the rules' in the revalidator).
                Action::FinTimeout { .. } => {
                    let mut m = self.wc.to_key();
                    m.set_nw_proto(0xff);
                    self.wc = FlowMask::from_key(&m);
                }
                Action::CheckPktLarger { len, dst } => {
                    // As OVS: the rest of this list runs in both branches,
                    // then this list ends (the caller's continues).
                    let rest = actions.get(i + 1..).unwrap_or(&[]);
                    self.check_pkt_larger(len, dst, rest, write_set, table);
                    return;
                }
                Action::WriteMetadata { value, mask } => {
                    let md = FieldId::Metadata.info();
                    md.set_regs_masked(&mut self.regs, u128::from(value), u128::from(mask));
                }
                Action::PushMpls(ethertype) => {
                    let n = self.count_mpls_labels();
                    if n == 0 {
                        self.commit();
                    } else if n >= MPLS_MAX_LABELS {
                        self.error = Some(format!(
                            "dropping packet on which an MPLS push action can't be performed \
                             as it would have more MPLS LSEs than the {MPLS_MAX_LABELS} supported"
                        ));
                        return;
                    }
                    self.push_mpls(n, ethertype);
                }
                Action::PopMpls(ethertype) => {
                    let n = self.count_mpls_labels();
                    if self.pop_mpls(n, ethertype) {
                        if !is_mpls(ethertype) {
                            self.was_mpls = true;
                        }
                    } else if n >= MPLS_MAX_LABELS {
                        self.error = Some(format!(
                            "dropping packet on which an MPLS pop action can't be performed \
                             as it has more MPLS LSEs than the {MPLS_MAX_LABELS} supported"
                        ));
                        return;
                    }
                }
                Action::SetMplsLabel(label) => self.set_mpls_bits(0xffff_f000, label << 12),
                Action::SetMplsTc(tc) => self.set_mpls_bits(0xe00, u32::from(tc) << 9),
                Action::SetMplsTtl(ttl) => self.set_mpls_bits(0xff, u32::from(ttl)),
                Action::DecMplsTtl => {
                    // As OVS: an expired TTL goes to the controller, and
                    // this list's remaining actions are skipped, also (with
                    // no packet-in) for a packet that is not MPLS.
                    if is_mpls(self.flow.dl_type()) {
                        let lse = self.flow.mpls_lse0();
                        let ttl = lse & 0xff;
                        self.or_lse_mask(0, 0xff);
                        if ttl > 1 {
                            self.flow.set_mpls_lse0((lse & !0xff) | (ttl - 1));
                            continue;
                        }
                        self.commit();
                        self.odp.push(DpAction::Controller);
                    }
                    self.note(indent + 1, "MPLS decrement TTL exception");
                    return;
                }
            }
        }
    }

    /// Keeps `rest` (the actions a level had left when translation froze)
    /// for after recirculation.
    ///
    /// As OVS's `freeze_unroll_actions`: before the first action that may
    /// send a packet-in (which names the rule's table and cookie) an
    /// `UnrollXlate` marker keeps them, unless the last marker of this
    /// freeze has the same; `write_metadata` becomes the `set_field` it
    /// means.
    fn unroll(&mut self, rest: &[Action], write_set: &[Action], table: u8) {
        if rest.is_empty() {
            return;
        }
        let mut actions = Vec::with_capacity(rest.len() + 1);
        for a in rest {
            let may_packet_in = matches!(
                a,
                Action::Output(_)
                    | Action::OutputTrunc { .. }
                    | Action::InPort
                    | Action::All
                    | Action::Flood
                    | Action::Normal
                    | Action::Controller { .. }
                    | Action::Group(_)
                    | Action::DecTtl
                    | Action::DecTtlIds { .. }
                    | Action::DecMplsTtl
                    | Action::Resubmit { table: None, .. }
            );
            if may_packet_in && self.unrolled != Some((table, self.cookie)) {
                self.unrolled = Some((table, self.cookie));
                actions.push(Action::UnrollXlate {
                    table,
                    cookie: self.cookie,
                });
            }
            actions.push(match *a {
                Action::WriteMetadata { value, mask } => Action::SetField {
                    field: FieldId::Metadata,
                    value: u128::from(value),
                    mask: u128::from(mask),
                    legacy: false,
                },
                a => a,
            });
        }
        self.frozen.push(Segment {
            actions,
            write_set: write_set.to_vec(),
            table,
        });
    }

    /// Ends a freeze (at the top of the pipeline, at the end of a group
    /// bucket or of a `check_pkt_larger` branch, as OVS): commits the
    /// packet's changes, keeps the state under a recirculation id and emits
    /// `[hash(...),]recirc(ID)`. Nothing when not freezing.
    fn finish_freezing(&mut self) {
        let Some(hash) = self.freezing.take() else {
            return;
        };
        self.unrolled = None;
        self.commit();
        let state = FrozenState {
            segments: std::mem::take(&mut self.frozen),
            action_set: self.action_set.clone(),
            stack: self.stack.clone(),
            regs: self.regs,
            in_port: self.flow.in_port(),
            table: 0,
        };
        let Some(id) = crate::recirc::alloc(state) else {
            self.error = Some("Failed to allocate recirculation id".into());
            return;
        };
        // The hash the datapath computes (as OVS's userspace datapath):
        // sym_l4 of the packet as it is now; l4 from the received
        // packet's 5-tuple hash (its RSS hash).
        let dp_hash = hash.map(|(symmetric, basis)| {
            self.odp.push(DpAction::Hash { symmetric, basis });
            if symmetric {
                flowpath_flow::ovs_hash::symmetric_l3l4(&self.flow, basis, false)
            } else {
                let rss = flowpath_flow::ovs_hash::hash_5tuple(&self.orig, 0);
                flowpath_flow::ovs_hash::hash_int(rss, basis)
            }
        });
        self.odp.push(DpAction::Recirc(id));
        if self.tracing {
            self.note(self.depth, &format!("recirc({id:#x}): translation frozen"));
        }
        let mut packet = self.flow;
        packet.set_in_port(self.orig.in_port());
        packet.set_recirc_id(0);
        packet.set_dp_hash(0);
        self.recirculations.push(Recirculation {
            id,
            packet,
            dp_hash,
        });
    }

    /// Resumes the translation frozen under recirculation id `id` (the
    /// packet is the recirculated one: parsed again, with its `dp_hash`):
    /// the metadata, stack and action set come back, then the actions left
    /// run, innermost level first; without any, a lookup in its table.
    fn thaw(&mut self, id: u32) {
        let Some(st) = crate::recirc::find(id) else {
            self.note(
                0,
                &format!("     >>>> Recirculation context not found for ID {id:x} <<<<"),
            );
            self.error = Some("No recirculation context".into());
            return;
        };
        self.regs = st.regs;
        self.stack = st.stack.clone();
        self.action_set = st.action_set.clone();
        self.flow.set_in_port(st.in_port);
        self.cur_table = st.table;
        if self.tracing {
            self.note(0, &format!("thaw (recirc_id {id:#x})"));
            self.note(1, &format!("Resuming from table {}", st.table));
            if !st.action_set.is_empty() {
                let set = crate::action::format_actions(&st.action_set);
                self.note(1, &format!("Restoring action set {set}"));
            }
        }
        if st.segments.is_empty() {
            self.xlate_table(st.table, None);
            return;
        }
        for (k, seg) in st.segments.iter().enumerate() {
            if self.error.is_some() {
                return;
            }
            if self.freezing.is_some() {
                self.frozen.extend(st.segments[k..].iter().cloned());
                return;
            }
            if self.tracing {
                let acts = crate::action::format_actions(&seg.actions);
                self.note(1, &format!("Restoring actions {acts}"));
            }
            self.cur_table = seg.table;
            self.do_actions(&seg.actions, &seg.write_set, seg.table);
        }
    }

    /// OVS's `flow_count_mpls_labels`: the labels in the flow's stack (up
    /// to three), making the bottom-of-stack bits it reads significant
    /// (and, without a bottom among them, the three entries).
    fn count_mpls_labels(&mut self) -> usize {
        let (n, bottom) = mpls_label_count(&self.flow);
        if bottom {
            // The bottom-of-stack bits read up to the bottom.
            for i in 0..n {
                self.or_lse_mask(i, MPLS_BOS);
            }
        } else {
            // No bottom in the first three: the count also depends on
            // which entries are zero, which only whole entries pin (OVS's
            // megaflow keeps only the bottom-of-stack bits here, so that a
            // packet with a zero entry under it would count differently):
            // all three become significant.
            for i in 0..MPLS_MAX_LABELS {
                self.or_lse_mask(i, u32::MAX);
            }
        }
        n
    }

    /// Makes bits of label stack entry `i` significant.
    fn or_lse_mask(&mut self, i: usize, bits: u32) {
        let mut m = self.wc.to_key();
        let v = m.mpls_lse(i) | bits;
        m.set_mpls_lse(i, v);
        self.wc = FlowMask::from_key(&m);
    }

    /// `set_mpls_label`/`tc`/`ttl`: the bits of the top entry, when the
    /// packet is MPLS (significant; nothing otherwise).
    fn set_mpls_bits(&mut self, mask: u32, value: u32) {
        if is_mpls(self.flow.dl_type()) {
            self.or_lse_mask(0, mask);
            let lse = self.flow.mpls_lse0();
            self.flow.set_mpls_lse0((lse & !mask) | (value & mask));
        }
    }

    /// OVS's `flow_push_mpls` on the flow (`n` labels now, fewer than
    /// three): the first label is made from the IP header (label 0, or 2
    /// for IPv6; TC the low bits of the DSCP; TTL the IP TTL, 64 if none;
    /// bottom of stack), and the L3 and L4 fields are cleared (the payload
    /// is opaque now); a later one copies the top entry (not bottom of
    /// stack), making the entries there significant.
    fn push_mpls(&mut self, n: usize, ethertype: u16) {
        if n > 0 {
            for i in 0..n {
                self.or_lse_mask(i, u32::MAX);
            }
            let f = &mut self.flow;
            lse_shift_down(f, n);
            f.set_mpls_lse0(f.mpls_lse1() & !MPLS_BOS);
        } else {
            let f = self.flow;
            let label: u32 = if f.is_ipv6() { 2 } else { 0 };
            let (mut tc, mut ttl) = (0u32, 64u32);
            if f.is_ip_any() {
                tc = u32::from((f.nw_tos() & 0xfc) >> 2) & 7;
                if f.nw_ttl() != 0 {
                    ttl = u32::from(f.nw_ttl());
                }
                let mut m = self.wc.to_key();
                m.set_nw_tos(m.nw_tos() | 0xfc);
                m.set_nw_ttl(0xff);
                self.wc = FlowMask::from_key(&m);
            }
            let f = &mut self.flow;
            f.set_mpls_lse0((label << 12) | (tc << 9) | MPLS_BOS | ttl);
            clear_l3(f);
        }
        self.flow.set_dl_type(ethertype);
    }

    /// OVS's `flow_pop_mpls` on the flow (`n` labels now): false when
    /// there is nothing to pop, or three labels of which the third is not
    /// the bottom (what would fill its place is unknown).
    fn pop_mpls(&mut self, n: usize, ethertype: u16) -> bool {
        if n == 0 {
            return false;
        }
        if n == MPLS_MAX_LABELS {
            self.or_lse_mask(n - 1, MPLS_BOS);
            if self.flow.mpls_lse(n - 1) & MPLS_BOS == 0 {
                return false;
            }
        }
        for i in 1..n {
            self.or_lse_mask(i, u32::MAX);
        }
        lse_shift_up(&mut self.flow, n);
        self.flow.set_dl_type(ethertype);
        true
    }

    /// The flow, the registers and what has been committed: what a
    /// `check_pkt_larger` branch starts from.
    fn flow_state(&self) -> FlowState {
        FlowState {
            flow: self.flow,
            regs: self.regs,
            base: self.base,
            flow_tpid: self.flow_tpid,
            base_tpid: self.base_tpid,
            tag_src: self.tag_src,
            was_mpls: self.was_mpls,
        }
    }

    fn set_flow_state(&mut self, s: FlowState) {
        self.flow = s.flow;
        self.regs = s.regs;
        self.base = s.base;
        self.flow_tpid = s.flow_tpid;
        self.base_tpid = s.base_tpid;
        self.tag_src = s.tag_src;
        self.was_mpls = s.was_mpls;
    }

    /// `check_pkt_larger(len)->dst`, as OVS 3.1 translates it for a
    /// datapath with `check_pkt_len`: the pending changes are committed,
    /// then `rest` (the actions after it in the same list) and the action
    /// set are translated twice from the same state — with the `dst` bit 1
    /// into the greater-than branch, with it 0 into the less-or-equal one.
    /// The flow, registers and committed state are restored after each
    /// branch; the `push`/`pop` stack and the action set are copied once
    /// for both branches (the first branch's run of the action set empties
    /// it for the second, as in OVS) and restored at the end. The megaflow
    /// gets both branches' bits; the packet length is not in it (the
    /// datapath checks it per packet).
    fn check_pkt_larger(
        &mut self,
        len: u16,
        dst: crate::action::Subfield,
        rest: &[Action],
        write_set: &[Action],
        table: u8,
    ) {
        let indent = self.depth + 1;
        self.commit();
        let stack = self.stack.clone();
        let action_set = self.action_set.clone();
        let saved = self.flow_state();
        let at = self.odp.len();
        self.odp.push(DpAction::CheckPktLen {
            size: len,
            gt: 0,
            le: 0,
        });
        let info = dst.field.info();
        let mut lens = [0u16; 2];
        for (k, bit) in [1u128, 0].into_iter().enumerate() {
            if self.error.is_some() {
                return;
            }
            if self.odp.len() > MAX_DP_ACTIONS {
                self.error = Some(format!(
                    "over {MAX_DP_ACTIONS} datapath actions (check_pkt_larger branches)"
                ));
                return;
            }
            if self.tracing {
                let cmp = if bit == 1 { "longer" } else { "not longer" };
                self.note(
                    indent,
                    &format!("(packets {cmp} than {len} bytes: {dst}={bit})"),
                );
            }
            let start = self.odp.len();
            info.set_regs_masked(&mut self.regs, bit << dst.ofs, dst.mask());
            self.do_actions(rest, write_set, table);
            if self.error.is_none() && self.freezing.is_none() {
                self.cur_table = table;
                self.run_action_set();
            }
            // As OVS: a freeze in a branch recirculates from that branch.
            if self.error.is_none() {
                self.finish_freezing();
            }
            match u16::try_from(self.odp.len() - start) {
                Ok(n) => lens[k] = n,
                Err(_) => {
                    self.error = Some("a check_pkt_larger branch is too long".into());
                    return;
                }
            }
            self.set_flow_state(saved);
        }
        self.odp[at] = DpAction::CheckPktLen {
            size: len,
            gt: lens[0],
            le: lens[1],
        };
        self.stack = stack;
        self.action_set = action_set;
        self.cur_table = table;
    }

    /// Writes `v` (right-aligned) into the bits of `sf`, as `move` and
    /// `pop` do: the bits become significant, but — unlike `set_field` and
    /// `load` (checked against OVS 3.1) — not nw_proto.
    fn move_to(&mut self, sf: crate::action::Subfield, v: u128) {
        let info = sf.field.info();
        let m = sf.mask() >> sf.ofs;
        let (value, mask) = ((v & m) << sf.ofs, sf.mask());
        match sf.field {
            FieldId::VlanTci | FieldId::DlVlan | FieldId::DlVlanPcp => {
                self.set_field(sf.field, value, mask, false)
            }
            _ if info.is_reg() => info.set_regs_masked(&mut self.regs, value, mask),
            _ => {
                info.or_mask(&mut self.wc, mask);
                info.set_masked(&mut self.flow, value, mask);
            }
        }
    }

    /// `learn`: the sources become significant (OVS's `learn_mask`); with
    /// side effects, the flow is made for the caller to add.
    /// Stores `learn`'s success in its `result_dst` bit, if it has one.
    fn learn_result(&mut self, l: &crate::learn::Learn, ok: bool) {
        if let Some(d) = l.result_dst {
            let info = d.field.info();
            info.set_regs_masked(&mut self.regs, u128::from(ok) << d.ofs, d.mask());
        }
    }

    fn learn(&mut self, id: u32, indent: u32) {
        let Some(l) = crate::learn::get(id) else {
            return;
        };
        for sf in l.sources() {
            let info = sf.field.info();
            if !info.is_reg() {
                info.or_mask(&mut self.wc, sf.mask());
            }
        }
        if !self.side_effects {
            // As OVS 3.1: `ofproto/trace` ignores the action; a
            // revalidation (no trace) takes learning as succeeded.
            if !self.tracing && l.flow(&self.flow, &self.regs).is_some() {
                self.learn_result(&l, true);
            }
            self.note(
                indent + 1,
                ">> suppressing side effects, so learn action ignored",
            );
            return;
        }
        match l.flow(&self.flow, &self.regs) {
            Some(r) => {
                let ok = crate::tables::learn_allowed(
                    self.tables.all_rules(),
                    &self.learned,
                    &r,
                    l.limit,
                );
                if !ok {
                    self.note(indent + 1, "Limit exceeded, learn failed");
                } else {
                    if self.tracing {
                        self.note(indent + 1, &format!("learned: {r}"));
                    }
                    self.learned.push(r);
                }
                self.learn_result(&l, ok);
            }
            None => self.note(
                indent + 1,
                "the learned match lacks prerequisites: nothing learned",
            ),
        }
    }

    /// True when the flow has `field`'s prerequisites (nw_proto becomes
    /// significant when they involve it).
    fn prereqs_ok(&mut self, field: FieldId) -> bool {
        let info = field.info();
        if !matches!(info.prereq.proto, flowpath_flow::field::ProtoReq::Any) {
            FieldId::NwProto.info().or_mask(&mut self.wc, 0xff);
        }
        info.prereq.ok_for(&self.flow)
    }

    /// Reads the bits of `sf` (right-aligned), making them significant;
    /// `None` when the flow lacks the field's prerequisites.
    fn read_subfield(&mut self, sf: crate::action::Subfield) -> Option<u128> {
        if !self.prereqs_ok(sf.field) {
            return None;
        }
        let info = sf.field.info();
        let v = if info.is_reg() {
            info.get_regs(&self.regs)
        } else {
            info.or_mask(&mut self.wc, sf.mask());
            info.get(&self.flow)
        };
        Some((v & sf.mask()) >> sf.ofs)
    }

    /// `NORMAL`: an L2 learning switch (OVS's `xlate_normal`). The
    /// megaflow gets dl_src, dl_dst and the outer VLAN id exact (and, for
    /// a broadcast ARP, what OVS's gratuitous-ARP check reads).
    fn xlate_normal(&mut self, indent: u32) {
        let mut m = self.wc.to_key();
        m.set_dl_src(0xffff_ffff_ffff);
        m.set_dl_dst(0xffff_ffff_ffff);
        m.set_vlan_tci(m.vlan_tci() | 0x0fff | VLAN_CFI);
        self.wc = FlowMask::from_key(&m);

        let in_port = self.flow.in_port();
        let tci = self.flow.vlan_tci();
        let dl_type = self.flow.dl_type();
        if (dl_type == 0x8100 || dl_type == 0x88a8) && tci & VLAN_CFI == 0 {
            self.note(indent, "partial VLAN tag, dropping");
            return;
        }
        let empty = PortVlans::default();
        let vlans = self.normal.as_ref().map_or(&empty, |e| e.vlans);
        let vid = if tci & VLAN_CFI != 0 { tci & 0x0fff } else { 0 };
        let in_mode = vlans.get(in_port).clone();
        let Some(vlan) = in_mode.input_vlan(vid) else {
            let why = match in_mode {
                normal::VlanMode::Access(t) => format!(
                    "dropping VLAN {vid} tagged packet received on port {in_port} configured as VLAN {t} access port"
                ),
                _ => format!(
                    "dropping VLAN {vid} packet received on port {in_port} not configured for trunking VLAN {vid}"
                ),
            };
            self.note(indent, &why);
            return;
        };
        let dl_src = self.flow.dl_src();
        let dl_dst = self.flow.dl_dst();
        if normal::is_reserved(dl_dst) {
            self.note(indent, "packet to a reserved multicast address, dropping");
            return;
        }
        // OVS's gratuitous-ARP check (it reads these fields whatever it
        // concludes; the answer matters only for bonds).
        if dl_type == 0x0806 {
            let mut m = self.wc.to_key();
            if dl_dst == 0xffff_ffff_ffff {
                m.set_nw_proto(0xff);
                if self.flow.nw_proto() == 1 {
                    m.set_nw_src(u32::MAX);
                    m.set_nw_dst(u32::MAX);
                }
            }
            self.wc = FlowMask::from_key(&m);
        }
        let mut local = false;
        let mut did_learn = false;
        let mut dst_port = None;
        if let Some(env) = self.normal.as_mut() {
            local = env.local;
            // Learn first, then look up (a packet to its own source finds
            // its input port and is dropped, as in OVS).
            if env.learn && !normal::is_multicast(dl_src) {
                env.macs.learn(vlan, dl_src, in_port, env.now_ms);
                did_learn = true;
            }
            if !normal::is_multicast(dl_dst) {
                dst_port = env.macs.lookup(vlan, dl_dst, env.now_ms);
            }
        }
        if did_learn {
            self.note(
                indent,
                &format!(
                    "learned that {} is on port {in_port} in VLAN {vlan}",
                    normal::format_mac(dl_src)
                ),
            );
        }
        match dst_port {
            Some(p) if p == in_port => {
                self.note(indent, "learned port is input port, dropping");
            }
            Some(p) => {
                self.note(indent, "forwarding to learned port");
                let mode = vlans.get(p).clone();
                self.output_normal(p, &mode, vlan);
            }
            None => {
                self.note(indent, "no learned MAC for destination, flooding");
                // LOCAL first, then ascending (OVS floods in its bundle
                // list's order, LOCAL first on a fresh bridge).
                let mut ports: Vec<u32> = Vec::new();
                if local || self.tables.ports().contains(&OFPP_LOCAL) {
                    ports.push(OFPP_LOCAL);
                }
                ports.extend(self.tables.ports().iter().filter(|&&p| p != OFPP_LOCAL));
                for p in ports {
                    if p == in_port {
                        continue;
                    }
                    let mode = vlans.get(p).clone();
                    if mode.includes(vlan) {
                        self.output_normal(p, &mode, vlan);
                    }
                }
            }
        }
    }

    /// Sends the packet through group `id` (see [`crate::group`]).
    fn xlate_group(&mut self, id: u32, table: u8) {
        use crate::group::GroupType;
        let tables = self.tables;
        let indent = self.depth;
        let Some(g) = tables.group(id) else {
            self.note(indent, &format!("group {id} does not exist: drop"));
            return;
        };
        match g.kind {
            GroupType::All => {
                for b in &g.buckets {
                    self.xlate_bucket(b, table);
                }
            }
            GroupType::Indirect => {
                if let Some(b) = g.buckets.first() {
                    self.xlate_bucket(b, table);
                }
            }
            GroupType::FastFailover => match g
                .buckets
                .iter()
                .find(|b| self.bucket_live(b, GroupType::FastFailover, 0))
            {
                Some(b) => self.xlate_bucket(b, table),
                None => self.note(indent, &format!("group {id}: no live bucket: drop")),
            },
            GroupType::Select => {
                if self.was_mpls {
                    // As OVS: the bucket choice may read L3 (the caller
                    // keeps this group for after recirculation).
                    self.freezing = Some(None);
                    return;
                }
                if let Some(t) = &g.dp_hash {
                    let h = self.flow.dp_hash();
                    if h == 0 {
                        // No datapath hash yet: the datapath computes it
                        // and recirculates; the caller keeps this group.
                        self.note(indent, &format!("group {id}: hashing in the datapath"));
                        self.freezing = Some(Some((t.symmetric, t.basis)));
                        return;
                    }
                    let mut m = self.wc.to_key();
                    m.set_dp_hash(m.dp_hash() | t.mask);
                    self.wc = FlowMask::from_key(&m);
                    // As OVS: from the hash's slot on, the first live
                    // bucket (so the weights still hold when some die).
                    let live = (0..=t.mask).find_map(|i| {
                        let slot = h.wrapping_add(i) & t.mask;
                        let b = g.buckets.get(usize::from(*t.slots.get(slot as usize)?))?;
                        self.bucket_live(b, GroupType::Select, 0).then_some(b)
                    });
                    match live {
                        Some(b) => {
                            self.note(indent, &format!("group {id}: dp_hash bucket {}", b.id));
                            self.xlate_bucket(b, table);
                        }
                        None => self.note(indent, &format!("group {id}: no live bucket: drop")),
                    }
                    return;
                }
                // As OVS's slow-path methods: the fields of the symmetric
                // L4 hash (UDP ports not among them) or of `fields(...)`
                // significant; of the live buckets, the one with the
                // highest score, hash_int(bucket id, hash)'s low 16 bits
                // × weight, the later one on ties (so weight 0 only when
                // every live bucket scores 0).
                let h = self.select_hash(g.fields.as_deref(), g.param);
                let mut best: Option<(&crate::group::Bucket, u32)> = None;
                for b in &g.buckets {
                    if !self.bucket_live(b, GroupType::Select, 0) {
                        continue;
                    }
                    let score =
                        (flowpath_flow::ovs_hash::hash_int(b.id, h) & 0xffff) * u32::from(b.weight);
                    if best.is_none_or(|(_, s)| score >= s) {
                        best = Some((b, score));
                    }
                }
                let best = best.map(|(b, _)| b);
                match best {
                    Some(b) => {
                        self.note(indent, &format!("group {id}: selected bucket {}", b.id));
                        self.xlate_bucket(b, table);
                    }
                    None => self.note(indent, &format!("group {id}: no bucket: drop")),
                }
            }
        }
    }

    /// Runs a bucket on the packet as it was before the group. As OVS
    /// (and OpenFlow), a bucket's actions are an action set: ordered as
    /// [`action_set_order`] orders them, nothing at all without an output.
    fn xlate_bucket(&mut self, b: &crate::group::Bucket, table: u8) {
        let Some(list) = action_set_order(&b.actions) else {
            self.note(self.depth, "bucket without output: nothing to do");
            return;
        };
        let (flow, tpid, src) = (self.flow, self.flow_tpid, self.tag_src);
        let was_mpls = self.was_mpls;
        self.do_actions(&list, &[], table);
        // As OVS: a freeze in a bucket recirculates a copy from there; the
        // actions after the group go on with the packet as it was.
        if self.error.is_none() {
            self.finish_freezing();
        }
        self.flow = flow;
        self.flow_tpid = tpid;
        self.tag_src = src;
        // As OVS: a bucket's pop_mpls has no effect after the bucket.
        self.was_mpls = was_mpls;
    }

    /// A port is live when it is a port of the bridge (LOCAL when the
    /// bridge has one).
    fn port_live(&self, p: u32) -> bool {
        let local = self.normal.as_ref().is_some_and(|e| e.local);
        self.tables.ports().contains(&p) || (p == OFPP_LOCAL && local)
    }

    /// Makes the fields that `bundle`'s and `multipath`'s field set
    /// ([`crate::action::BUNDLE_FIELDS`]) hashes significant, as OVS 3.1's
    /// `flow_mask_hash_fields` (the hash itself:
    /// [`flowpath_flow::ovs_hash::hash_fields`]).
    fn mask_hash_fields(&mut self, set: u8) {
        if set == 1 {
            // OVS's symmetric_l4: L4 ports of TCP and SCTP only.
            self.mask_symmetric_l4();
            return;
        }
        let f = self.flow;
        let mut m = self.wc.to_key();
        let (v4, v6) = (f.is_ipv4(), f.is_ip_any() && !f.is_ipv4());
        match set {
            0 => {
                m.set_dl_src(0xffff_ffff_ffff);
            }
            4 if v4 => {
                m.set_nw_src(u32::MAX);
            }
            4 if v6 => {
                m.set_ipv6_src(u128::MAX);
            }
            5 if v4 => {
                m.set_nw_dst(u32::MAX);
            }
            5 if v6 => {
                m.set_ipv6_dst(u128::MAX);
            }
            2 | 3 if !v4 && !v6 => {
                // symmetric_l3l4 of a packet that is not IP hashes its L2
                // fields (OVS's flow_hash_symmetric_l2), which OVS 3.1
                // leaves out of the megaflow: then other packets of it
                // would reuse this packet's choice. flowpath makes them
                // significant (its megaflow is narrower than OVS's here,
                // on purpose).
                m.set_dl_src(0xffff_ffff_ffff);
                m.set_dl_dst(0xffff_ffff_ffff);
                m.set_vlan_tci(m.vlan_tci() | 0x0fff);
                m.set_vlan_tci_inner(m.vlan_tci_inner() | 0x0fff);
            }
            2 | 3 | 6 if v4 || v6 => {
                // symmetric_l3 (6), symmetric_l3l4 (2), +udp (3).
                if v4 {
                    m.set_nw_src(u32::MAX);
                    m.set_nw_dst(u32::MAX);
                } else {
                    m.set_ipv6_src(u128::MAX);
                    m.set_ipv6_dst(u128::MAX);
                }
                if set != 6 {
                    sym_l4(&f, &mut m, set == 3);
                }
            }
            _ => {}
        }
        self.wc = FlowMask::from_key(&m);
    }

    /// Bucket liveness, as OVS's: a bucket of a group of `kind` is live if
    /// it watches nothing, a port of the bridge, or a group with a live
    /// bucket — but never, in a select group, with weight 0.
    fn bucket_live(
        &self,
        b: &crate::group::Bucket,
        kind: crate::group::GroupType,
        depth: u32,
    ) -> bool {
        if kind == crate::group::GroupType::Select && b.weight == 0 {
            return false;
        }
        if b.watch_port.is_none() && b.watch_group.is_none() {
            return true;
        }
        let port_live = b.watch_port.is_some_and(|p| self.port_live(p));
        port_live
            || (depth < 32
                && b.watch_group
                    .and_then(|g| self.tables.group(g))
                    .is_some_and(|g| {
                        g.buckets
                            .iter()
                            .any(|x| self.bucket_live(x, g.kind, depth + 1))
                    }))
    }

    /// A slow-path select group's hash of the packet, as OVS 3.1's: of
    /// `fields` (each whose prerequisites the packet meets, under its
    /// mask, in OVS's field order, from `hash_uint64(param)`), or OVS's
    /// `flow_hash_symmetric_l4`; the bits read become significant.
    fn select_hash(&mut self, fields: Option<&[crate::group::SelectField]>, param: u64) -> u32 {
        use flowpath_flow::ovs_hash::{hash_bytes, hash_uint64, symmetric_l4};
        let Some(fields) = fields else {
            self.mask_symmetric_l4();
            return symmetric_l4(&self.flow, 0);
        };
        let f = self.flow;
        let mut basis = hash_uint64(param);
        for sf in fields {
            if !self.select_prereq_ok(sf) {
                continue;
            }
            let info = sf.id.info();
            let value = if info.is_reg() {
                info.get_regs(&self.regs)
            } else if sf.id == FieldId::DlVlan {
                // vlan_vid: the VID with the present bit.
                u128::from(f.vlan_tci() & 0x1fff)
            } else {
                info.get(&f)
            };
            let n = sf.n_bytes();
            let bytes = (value & sf.mask).to_be_bytes();
            basis = hash_bytes(&bytes[16 - n..], basis);
            let mut mask = self.wc;
            // As OVS's setters of vlan_vid and vlan_pcp (on the mask):
            // the VID with the present bit as masked, the priority with
            // the present bit.
            let tci_bits = match sf.id {
                FieldId::DlVlan => Some((sf.mask & 0x1fff) as u16),
                FieldId::DlVlanPcp => Some(((sf.mask & 7) as u16) << 13 | VLAN_CFI),
                _ => None,
            };
            match tci_bits {
                Some(bits) => {
                    let mut m = mask.to_key();
                    m.set_vlan_tci(m.vlan_tci() | bits);
                    mask = FlowMask::from_key(&m);
                }
                None => info.or_mask(&mut mask, sf.mask),
            }
            self.wc = mask;
        }
        basis
    }

    /// Whether the packet meets `sf`'s prerequisites, as OVS's
    /// `mf_are_prereqs_ok` decides it (the bits it reads become
    /// significant: nw_proto when it checks an IP packet's protocol, the
    /// tag's present bit, ICMPv6 type and code for ND fields).
    fn select_prereq_ok(&mut self, sf: &crate::group::SelectField) -> bool {
        use FieldId as F;
        let f = self.flow;
        let t = f.dl_type();
        let mut m = self.wc.to_key();
        let mut proto = |want: u8, v4_only: bool, v6_only: bool| {
            let ip = if v4_only {
                t == 0x0800
            } else if v6_only {
                t == 0x86dd
            } else {
                f.is_ip_any()
            };
            if !ip {
                return false;
            }
            m.set_nw_proto(0xff);
            f.nw_proto() == want
        };
        let later = f.nw_frag() & FRAG_LATER != 0;
        let ok = match sf.id {
            F::DlVlanPcp => {
                m.set_vlan_tci(m.vlan_tci() | VLAN_CFI);
                f.vlan_tci() & VLAN_CFI != 0
            }
            F::MplsLabel | F::MplsTc | F::MplsBos | F::MplsTtl => matches!(t, 0x8847 | 0x8848),
            F::NwSrc | F::NwDst => t == 0x0800,
            F::Ipv6Src | F::Ipv6Dst | F::Ipv6Label => t == 0x86dd,
            F::NwProto | F::NwTos | F::IpDscp | F::NwEcn | F::NwTtl | F::NwFrag => f.is_ip_any(),
            F::ArpOp | F::ArpSpa | F::ArpTpa | F::ArpSha | F::ArpTha => {
                matches!(t, 0x0806 | 0x8035)
            }
            F::TpSrc | F::TpDst | F::TcpSrc | F::TcpDst | F::TcpFlags => {
                proto(6, false, false) && !later
            }
            F::UdpSrc | F::UdpDst => proto(17, false, false) && !later,
            F::SctpSrc | F::SctpDst => proto(132, false, false) && !later,
            F::IcmpType | F::IcmpCode => proto(1, true, false),
            F::Icmpv6Type | F::Icmpv6Code => proto(58, false, true),
            F::NdTarget | F::NdSll | F::NdTll => {
                proto(58, false, true) && {
                    m.set_tp_src(0xffff);
                    let ty = f.tp_src();
                    let type_ok = match sf.id {
                        F::NdSll => ty == 135,
                        F::NdTll => ty == 136,
                        _ => ty == 135 || ty == 136,
                    };
                    type_ok && {
                        m.set_tp_dst(0xffff);
                        f.tp_dst() == 0
                    }
                }
            }
            _ => true,
        };
        self.wc = FlowMask::from_key(&m);
        ok
    }

    /// Makes the fields of OVS's `symmetric_l4` hash significant: Ethernet
    /// addresses, type and VLAN; IP addresses and protocol; the ports of
    /// every IP packet but UDP's.
    fn mask_symmetric_l4(&mut self) {
        let f = self.flow;
        let mut m = self.wc.to_key();
        m.set_dl_src(0xffff_ffff_ffff);
        m.set_dl_dst(0xffff_ffff_ffff);
        // Both tags' VIDs are hashed (OVS: every `FLOW_MAX_VLAN_HEADERS`).
        m.set_vlan_tci(m.vlan_tci() | 0x1fff);
        m.set_vlan_tci_inner(m.vlan_tci_inner() | 0x1fff);
        if f.is_ip_any() {
            if f.is_ipv4() {
                m.set_nw_src(u32::MAX);
                m.set_nw_dst(u32::MAX);
            } else {
                m.set_ipv6_src(u128::MAX);
                m.set_ipv6_dst(u128::MAX);
            }
            m.set_nw_proto(0xff);
            // As OVS's symmetric_l4: the ports of every IP packet but
            // UDP are significant, hashed or not (checked against OVS
            // 3.1: ICMP type and code, zero ports of other protocols).
            if f.nw_proto() != 17 {
                m.set_tp_src(0xffff);
                m.set_tp_dst(0xffff);
            }
        }
        self.wc = FlowMask::from_key(&m);
    }

    /// Outputs to `port` with the VLAN tag its mode gives VLAN `vlan`, then
    /// restores the flow's tags. As OVS: an access port sends untagged; a
    /// trunk tags with the VLAN and the packet's priority (PCP), and a
    /// packet of VLAN 0 with a non-zero priority keeps a priority tag.
    fn output_normal(&mut self, port: u32, mode: &normal::VlanMode, vlan: u16) {
        let (saved_tci, saved_tpid, saved_src) =
            (self.flow.vlan_tci(), self.flow_tpid, self.tag_src);
        let pcp = if saved_tci & VLAN_CFI != 0 {
            saved_tci & 0xe000
        } else {
            0
        };
        let tci = match mode {
            normal::VlanMode::Access(_) => 0,
            _ => {
                let vid = mode.output_vid(vlan);
                if vid == 0 && saved_tci & VLAN_CFI != 0 {
                    // VLAN 0 on a trunk: whether the packet keeps a
                    // priority tag depends on its PCP being zero or not,
                    // so the PCP is significant (found by the megaflow
                    // invariant test: PCP 7 and PCP 0 packets of one
                    // megaflow got different actions).
                    let mut m = self.wc.to_key();
                    m.set_vlan_tci(m.vlan_tci() | 0xe000 | VLAN_CFI);
                    self.wc = FlowMask::from_key(&m);
                }
                match vid | pcp {
                    0 => 0,
                    t => t | VLAN_CFI,
                }
            }
        };
        self.flow.set_vlan_tci(tci);
        if tci != 0 && saved_tci & VLAN_CFI == 0 {
            self.flow_tpid[0] = 0x8100;
        }
        // The packet's own outer tag with (significant) VID replaced, or
        // a made one.
        if tci != 0 && (saved_tci & VLAN_CFI == 0 || self.tag_src[0] != Some(0)) {
            self.tag_src[0] = None;
        }
        self.output(port);
        self.flow.set_vlan_tci(saved_tci);
        self.flow_tpid = saved_tpid;
        self.tag_src = saved_src;
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

    /// Sets bits `bits` of the outer VLAN TCI to `value`, pushing a tag
    /// first when there is none and `push_if_needed`.
    fn set_vlan(&mut self, bits: u16, value: u16, push_if_needed: bool) {
        let mut m = self.wc.to_key();
        m.set_vlan_tci(m.vlan_tci() | bits | VLAN_CFI);
        self.wc = FlowMask::from_key(&m);
        let tci = self.flow.vlan_tci();
        if tci & VLAN_CFI != 0 || push_if_needed {
            if tci & VLAN_CFI == 0 {
                self.flow_tpid[0] = 0x8100;
            }
            // The bits written are significant on the packet's outer tag:
            // another tag becomes a made one.
            if tci & VLAN_CFI == 0 || self.tag_src[0] != Some(0) {
                self.tag_src[0] = None;
            }
            self.flow.set_vlan_tci((tci & !bits) | value | VLAN_CFI);
        }
    }

    fn set_field(&mut self, field: FieldId, value: u128, mask: u128, legacy: bool) {
        let info = field.info();
        if info.is_reg() {
            // Translation state: never part of the megaflow.
            info.set_regs_masked(&mut self.regs, value, mask);
            return;
        }
        let is_l4 = matches!(
            field,
            FieldId::TpSrc
                | FieldId::TpDst
                | FieldId::TcpSrc
                | FieldId::TcpDst
                | FieldId::UdpSrc
                | FieldId::UdpDst
                | FieldId::SctpSrc
                | FieldId::SctpDst
        );
        match field {
            FieldId::DlVlan => return self.set_vlan(0x0fff, (value as u16) & 0x0fff, legacy),
            FieldId::DlVlanPcp => return self.set_vlan(0xe000, ((value as u16) & 7) << 13, legacy),
            FieldId::VlanTci => {
                let mut m = self.wc.to_key();
                m.set_vlan_tci(m.vlan_tci() | mask as u16);
                self.wc = FlowMask::from_key(&m);
                if self.tag_src[0] != Some(0) {
                    self.tag_src[0] = None;
                }
                let tci = self.flow.vlan_tci();
                let new = (tci & !(mask as u16)) | (value as u16 & mask as u16);
                // Writing the CFI bit of an untagged packet makes a tag: an
                // 802.1Q one (checked against OVS 3.1).
                if tci & VLAN_CFI == 0 && new & VLAN_CFI != 0 {
                    self.flow_tpid[0] = 0x8100;
                }
                self.flow.set_vlan_tci(new);
                return;
            }
            _ => {}
        }
        let applies = if legacy && is_l4 {
            self.flow.is_ip_any() && self.flow.nw_frag() & FRAG_LATER == 0
        } else if legacy {
            match info.prereq.eth {
                flowpath_flow::field::EthReq::Ipv4 => self.flow.is_ipv4(),
                flowpath_flow::field::EthReq::Ip => self.flow.is_ip_any(),
                _ => true,
            }
        } else {
            info.prereq.ok_for(&self.flow)
        };
        if !applies {
            self.note(
                self.depth + 2,
                "skipped: the packet lacks this field's prerequisites",
            );
            return;
        }
        // Reading the prerequisites makes them significant; like OVS 3.1,
        // any L3 or L4 rewrite makes nw_proto significant.
        let is_l3 = matches!(
            info.prereq.eth,
            flowpath_flow::field::EthReq::Ip
                | flowpath_flow::field::EthReq::Ipv4
                | flowpath_flow::field::EthReq::Ipv6
        );
        if is_l3 || is_l4 || !matches!(info.prereq.proto, flowpath_flow::field::ProtoReq::Any) {
            FieldId::NwProto.info().or_mask(&mut self.wc, 0xff);
        }
        info.or_mask(&mut self.wc, mask);
        info.set_masked(&mut self.flow, value, mask);
    }

    fn output(&mut self, port: u32) {
        self.commit();
        self.odp.push(DpAction::Output(port));
    }

    /// Emits the datapath actions that make the packet (`base`) look like
    /// the flow, in OVS's order: Ethernet, L3, L4, then VLAN tags.
    fn commit(&mut self) {
        use FieldId::*;
        // The rewritable fields of each header, as OVS's datapath `set`
        // attributes group them (the ToS byte is one field: DSCP + ECN).
        const ETH: &[&[FieldId]] = &[&[EthSrc], &[EthDst]];
        const IPV4: &[&[FieldId]] = &[&[NwSrc], &[NwDst], &[NwTos, NwEcn], &[NwTtl]];
        const IPV6: &[&[FieldId]] = &[
            &[Ipv6Src],
            &[Ipv6Dst],
            &[Ipv6Label],
            &[NwTos, NwEcn],
            &[NwTtl],
        ];
        const L4: &[&[FieldId]] = &[&[TpSrc], &[TpDst]];
        self.commit_header(SetHeader::Eth, ETH);
        // As OVS: a packet that stops being MPLS does so before the L3
        // and L4 rewrites (which would otherwise do nothing); other MPLS
        // changes come after them.
        let mpls_first = is_mpls(self.base.dl_type()) && !is_mpls(self.flow.dl_type());
        if mpls_first {
            self.commit_mpls();
        }
        // As OVS: no L3 rewrite when nw_proto is 0 (every L3 rewrite has made
        // nw_proto significant, so megaflows stay correct).
        if self.flow.nw_proto() != 0 && self.base.is_ipv4() {
            self.commit_header(SetHeader::Ipv4, IPV4);
        } else if self.flow.nw_proto() != 0 && self.base.is_ipv6() {
            self.commit_header(SetHeader::Ipv6, IPV6);
        }
        if self.flow.nw_proto() != 0
            && self.base.is_ip_any()
            && self.base.nw_frag() & FRAG_LATER == 0
        {
            match self.flow.nw_proto() {
                6 => self.commit_header(SetHeader::Tcp, L4),
                17 => self.commit_header(SetHeader::Udp, L4),
                132 => self.commit_header(SetHeader::Sctp, L4),
                _ => {}
            }
        }
        if !mpls_first {
            self.commit_mpls();
        }
        self.commit_vlan();
        // As OVS: the priority last; its change makes it significant.
        let p = self.flow.skb_priority();
        if p != self.base.skb_priority() {
            let mut m = self.wc.to_key();
            m.set_skb_priority(u32::MAX);
            self.wc = FlowMask::from_key(&m);
            self.odp.push(DpAction::SetPriority(p));
            self.base.set_skb_priority(p);
        }
        // Then the mark, as OVS: a masked set under the mark's megaflow
        // bits (every write made its bits significant), a plain set when
        // all 32 are.
        let mark = self.flow.pkt_mark();
        if mark != self.base.pkt_mark() {
            let mut m = self.wc.to_key();
            let mask = m.pkt_mark();
            self.odp.push(DpAction::SetMark {
                value: mark & mask,
                mask,
            });
            m.set_pkt_mark(mask);
            self.wc = FlowMask::from_key(&m);
            self.base.set_pkt_mark(mark);
        }
    }

    /// OVS's MPLS commit: the datapath packet's label stack (`base`) is
    /// made the flow's by popping the entries not shared with it (the
    /// stacks compared from the bottom up), or rewriting the top one with
    /// `set(mpls(...))` when the flow has an entry in its place, then
    /// pushing the flow's extra entries.
    fn commit_mpls(&mut self) {
        let flow = self.flow;
        let flow_n = mpls_label_count(&flow).0;
        let mut base_n = mpls_label_count(&self.base).0;
        let mut common = 0;
        for i in 0..flow_n.min(base_n) {
            if flow.mpls_lse(flow_n - 1 - i) != self.base.mpls_lse(base_n - 1 - i) {
                break;
            }
            common += 1;
        }
        while base_n > common {
            if base_n - 1 == common && flow_n > common {
                let lse = flow.mpls_lse(flow_n - base_n);
                self.odp.push(DpAction::SetMpls(lse));
                // The set writes the whole entry, bits the actions left as
                // the packet had them too: unlike OVS 3.1 (whose megaflow
                // keeps only the changed bits, so that a packet with
                // another TTL under it would get this one's), every entry
                // of the packet's stack becomes significant.
                for i in 0..mpls_label_count(&self.orig).0 {
                    self.or_lse_mask(i, u32::MAX);
                }
                self.base.set_mpls_lse0(lse);
                common += 1;
            } else {
                // The last pop gives the flow's EtherType; an earlier one
                // (the packet stays MPLS) an MPLS one.
                let t = if !is_mpls(flow.dl_type()) && base_n > 1 {
                    0x8847
                } else {
                    flow.dl_type()
                };
                self.odp.push(DpAction::PopMpls(t));
                lse_shift_up(&mut self.base, base_n);
                self.base.set_dl_type(flow.dl_type());
                base_n -= 1;
            }
        }
        while base_n < flow_n {
            let lse = flow.mpls_lse(flow_n - base_n - 1);
            self.odp.push(DpAction::PushMpls {
                ethertype: flow.dl_type(),
                lse,
            });
            // The datapath packet keeps its L3 fields (a later restore of
            // the flow, after a group bucket, compares against them).
            let b = &mut self.base;
            lse_shift_down(b, base_n);
            b.set_mpls_lse0(lse);
            b.set_dl_type(flow.dl_type());
            base_n += 1;
        }
    }

    /// Emits one `set` for `header` carrying every field (group) whose
    /// significant bits differ between the flow and the datapath packet;
    /// each such field is written under its megaflow mask, as OVS's masked
    /// set actions do.
    fn commit_header(&mut self, header: SetHeader, fields: &[&[FieldId]]) {
        let mut key = FlowKey::zero();
        let mut mask = FlowMask::catchall();
        for group in fields {
            let mut m = FlowMask::catchall();
            for f in group.iter() {
                m.or_assign(&f.info().storage_mask());
            }
            let m = m.intersect(&self.wc);
            if !self.flow.eq_masked(&self.base, &m) {
                for i in 0..flowpath_flow::FLOW_WORDS {
                    key.w[i] |= self.flow.w[i] & m.w[i];
                }
                mask.or_assign(&m);
            }
        }
        self.emit_set(header, key, mask);
    }

    fn emit_set(&mut self, header: SetHeader, key: FlowKey, mask: FlowMask) {
        if mask.is_catchall() {
            return;
        }
        let key = key.masked(&mask);
        // The datapath packet now carries these values.
        for i in 0..flowpath_flow::FLOW_WORDS {
            self.base.w[i] = (self.base.w[i] & !mask.w[i]) | key.w[i];
        }
        self.odp.push(DpAction::Set { header, key, mask });
    }

    /// Pops the packet's tags that differ from the flow's (outermost
    /// first) and pushes the flow's (innermost first), comparing from the
    /// innermost tag outwards as OVS does.
    fn commit_vlan(&mut self) {
        let tags = |k: &FlowKey, tp: [u16; 2]| -> Vec<(u16, u16)> {
            let mut v = Vec::new();
            if k.vlan_tci() & VLAN_CFI != 0 {
                v.push((tp[0], k.vlan_tci()));
                if k.vlan_tci_inner() & VLAN_CFI != 0 {
                    v.push((tp[1], k.vlan_tci_inner()));
                }
            }
            v
        };
        let b = tags(&self.base, self.base_tpid);
        let f = tags(&self.flow, self.flow_tpid);
        let (mut bn, mut fn_) = (b.len() as isize - 1, f.len() as isize - 1);
        // Comparing a tag the actions made (or another of the packet's
        // tags) with the packet's reads the whole of both packet tags.
        let mut read = [false; 2];
        let mut compare = |bn: isize, fn_: isize| {
            let src = self.tag_src[fn_ as usize];
            if src != Some(bn as u8) {
                read[bn as usize] = true;
                if let Some(k) = src {
                    read[usize::from(k).min(1)] = true;
                }
            }
        };
        while bn >= 0 && fn_ >= 0 {
            compare(bn, fn_);
            if b[bn as usize] != f[fn_ as usize] {
                break;
            }
            bn -= 1;
            fn_ -= 1;
        }
        let mut m = self.wc.to_key();
        if read[0] {
            m.set_vlan_tci(0xffff);
        }
        if read[1] {
            m.set_vlan_tci_inner(0xffff);
        }
        self.wc = FlowMask::from_key(&m);
        if bn < 0 && fn_ < 0 {
            return;
        }
        let mut m = self.wc.to_key();
        for i in (0..=bn).rev() {
            self.odp.push(DpAction::PopVlan);
            if i == 0 {
                m.set_vlan_tci(0xffff);
            } else {
                m.set_vlan_tci_inner(0xffff);
            }
        }
        self.wc = FlowMask::from_key(&m);
        for i in (0..=fn_).rev() {
            let (tpid, tci) = f[i as usize];
            self.odp.push(DpAction::PushVlan {
                tpid,
                tci: tci & !VLAN_CFI,
            });
        }
        self.base.set_vlan_tci(self.flow.vlan_tci());
        self.base.set_vlan_tci_inner(self.flow.vlan_tci_inner());
        self.base_tpid = self.flow_tpid;
        self.tag_src = [Some(0), Some(1)];
    }

    fn finish_wc(&mut self) {
        let mut m = self.wc.to_key();
        let is_icmp = (self.flow.is_ipv4() && self.flow.nw_proto() == 1)
            || (self.flow.is_ipv6() && self.flow.nw_proto() == 58);
        if is_icmp {
            m.set_tp_src(m.tp_src() & 0xff);
            m.set_tp_dst(m.tp_dst() & 0xff);
        }
        // Whether a tag is present is always part of a megaflow (OVS's
        // datapath keys encode it structurally); an absent tag's TCI bits are
        // all zero, so the CFI bit alone matches "no tag".
        let orig = self.orig;
        self.cfi_read = orig.vlan_tci() & VLAN_CFI != 0 && m.vlan_tci() == VLAN_CFI;
        if orig.vlan_tci() & VLAN_CFI == 0 {
            m.set_vlan_tci(VLAN_CFI);
            m.set_vlan_tci_inner(0);
        } else {
            m.set_vlan_tci(m.vlan_tci() | VLAN_CFI);
            if orig.vlan_tci_inner() & VLAN_CFI == 0 {
                m.set_vlan_tci_inner(VLAN_CFI);
            } else {
                m.set_vlan_tci_inner(m.vlan_tci_inner() | VLAN_CFI);
            }
        }
        if self.orig.nw_frag() & FRAG_LATER != 0 {
            m.set_tp_src(0);
            m.set_tp_dst(0);
        }
        // A lookup that failed on the L2 stage makes the MPLS bits of its
        // subtable significant whatever the packet: a packet that is not
        // MPLS has none (its dl_type, always significant, says so), as
        // OVS's datapath key leaves them out.
        if !is_mpls(self.orig.dl_type()) {
            m.w[W_MPLS] = 0;
            m.set_mpls_lse2(0);
        }
        self.wc = FlowMask::from_key(&m);
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
        Match::new(key, &self.megaflow).format(style)
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
