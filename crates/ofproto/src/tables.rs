//! The rule tables of a bridge: up to 255 OpenFlow tables, each a
//! [`Classifier`], plus the rules themselves.
//!
//! Built once from a rule list (an `add-flows` file) and then read-only: a
//! rule change builds a new `RuleTables` and publishes it (the control path
//! swaps versions; see DESIGN.md "Threads"). A later rule with the same
//! table, match and priority as an earlier one replaces it, as
//! `ovs-ofctl add-flow` modifies an identical flow.

use crate::classifier::Classifier;
use crate::rule::Rule;
use flowpath_flow::field::FieldId;
use flowpath_flow::{FlowKey, FlowMask, Regs};
use std::collections::{BTreeMap, BTreeSet};

/// How the bridge looks up IP fragments (OVS's `ovs-ofctl set-frags`,
/// OpenFlow's `OFPC_FRAG_*`).
///
/// A fragment's L4 ports are in its first fragment only; OVS's default,
/// `normal`, looks every fragment up as if its ports (ICMP type and code)
/// were 0, so that all fragments of a datagram take the same way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FragMode {
    /// Every fragment, first one included, looked up with its L4 ports
    /// (ICMP type and code) 0 (OVS's default).
    #[default]
    Normal,
    /// Every fragment dropped before any lookup.
    Drop,
    /// Fragments looked up as they are: a first fragment with its ports,
    /// `nw_frag` matchable to tell them apart.
    NxMatch,
}

impl FragMode {
    /// The modes, by their `set-frags` names.
    pub const ALL: [FragMode; 3] = [FragMode::Normal, FragMode::Drop, FragMode::NxMatch];

    /// The mode's name, as `ovs-ofctl get-frags` prints it.
    pub fn name(self) -> &'static str {
        match self {
            FragMode::Normal => "normal",
            FragMode::Drop => "drop",
            FragMode::NxMatch => "nx-match",
        }
    }
}

impl std::fmt::Display for FragMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for FragMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "normal" => Ok(FragMode::Normal),
            "drop" => Ok(FragMode::Drop),
            "nx-match" => Ok(FragMode::NxMatch),
            "reassemble" => Err(
                "frag mode reassemble is not supported by flowpath (it needs IP reassembly, \
                 which comes with connection tracking); use normal, drop or nx-match"
                    .into(),
            ),
            _ => Err(format!(
                "unknown frag mode {s:?}: expected normal, drop or nx-match"
            )),
        }
    }
}

/// Something that finds the rule a packet hits in a table. Implemented by
/// [`RuleTables`] (classifier with wildcard tracking) and by the linear-scan
/// reference in [`crate::linear`].
pub trait Lookup {
    /// The highest-priority rule of `table` matching `key` with registers
    /// `regs`; with `wc`, ORs into it the key bits the answer depended on.
    fn lookup(
        &self,
        table: u8,
        key: &FlowKey,
        regs: &Regs,
        wc: Option<&mut FlowMask>,
    ) -> Option<&Rule>;
    /// [`Lookup::lookup`], with the rule's index where the tables number
    /// their rules (`None` where they do not).
    fn lookup_indexed(
        &self,
        table: u8,
        key: &FlowKey,
        regs: &Regs,
        wc: Option<&mut FlowMask>,
    ) -> Option<(Option<u32>, &Rule)> {
        self.lookup(table, key, regs, wc).map(|r| (None, r))
    }
    /// The bridge's ports (targets of `ALL` and `FLOOD`), ascending.
    fn ports(&self) -> &[u32];
    /// Group `id`, if the tables have it.
    fn group(&self, _id: u32) -> Option<&crate::group::Group> {
        None
    }
    /// Every rule, in the tables' numbering (`learn`'s `limit` counts
    /// them).
    fn all_rules(&self) -> &[Rule];
    /// How IP fragments are looked up.
    fn frag_mode(&self) -> FragMode {
        FragMode::Normal
    }
    /// A table miss (of the first table or a `goto_table`, not of a
    /// `resubmit`) sends the packet to the controllers (OVS's default
    /// while an OpenFlow 1.0-1.2 connection is up) instead of dropping it.
    fn miss_to_controller(&self) -> bool {
        false
    }
    /// Port `port`'s OpenFlow configuration bits ([`port_config`]; 0 for
    /// a port with none set, or one the tables do not know).
    fn port_config(&self, _port: u32) -> u32 {
        0
    }
    /// The bridge has flow-sample collector sets (OVS's IPFIX
    /// configuration): `sample` actions sample; without any they do
    /// nothing, as in OVS.
    fn sampling(&self) -> bool {
        false
    }
    /// The bridge's tunnel ports, underlay, routes and neighbours (none:
    /// no tunnel ports).
    fn tunnels(&self) -> Option<&crate::tunnel::Tunnels> {
        None
    }
}

/// A port's OpenFlow configuration bits (`OFPPC_*`, OpenFlow 1.0
/// numbering), as `PORT_MOD` sets them and translation honours them.
pub mod port_config {
    /// Administratively down: nothing received from it or sent to it.
    pub const PORT_DOWN: u32 = 1 << 0;
    /// Packets received on it are dropped (but STP's).
    pub const NO_RECV: u32 = 1 << 2;
    /// Left out of `FLOOD` (and `NORMAL`'s flooding).
    pub const NO_FLOOD: u32 = 1 << 4;
    /// Output to it is dropped.
    pub const NO_FWD: u32 = 1 << 5;
    /// Table misses of packets from it do not go to the controllers.
    pub const NO_PACKET_IN: u32 = 1 << 6;
}

/// What `learn(...,limit=N)` checks before adding `flow` (OVS's
/// `ofproto_flow_mod_learn`): a flow already there (same table, priority
/// and match) is only refreshed; a new one needs fewer than `limit` flows
/// with its cookie in its table, counting those learned earlier in the
/// same translation (`pending`).
pub fn learn_allowed(rules: &[Rule], pending: &[Rule], flow: &Rule, limit: u32) -> bool {
    if limit == 0 {
        return true;
    }
    let same = |r: &Rule| {
        r.table == flow.table && r.priority == flow.priority && r.matching == flow.matching
    };
    if rules.iter().chain(pending).any(same) {
        return true;
    }
    let n = rules
        .iter()
        .chain(pending)
        .filter(|r| r.table == flow.table && r.cookie == flow.cookie)
        .count();
    n < limit as usize
}

/// All tables of a bridge.
#[derive(Clone, Debug)]
pub struct RuleTables {
    rules: Vec<Rule>,
    tables: Vec<Option<Classifier>>,
    ports: Vec<u32>,
    groups: std::collections::BTreeMap<u32, crate::group::Group>,
    /// The prefix-tracking configuration (to rebuild with more rules).
    prefixes: Vec<FieldId>,
    per_table: Vec<(u8, Vec<FieldId>)>,
    frag_mode: FragMode,
    /// Shared by every publication of a switch's tables: it changes when
    /// connections come and go, without a rebuild.
    miss_to_controller: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Ports with configuration bits set (see [`port_config`]).
    port_config: BTreeMap<u32, u32>,
    /// See [`Lookup::sampling`].
    sampling: bool,
    /// See [`Lookup::tunnels`].
    tunnels: Option<std::sync::Arc<crate::tunnel::Tunnels>>,
}

/// The hash of a rule's identity in a table (table, priority, match) with
/// `h`: the match's significant words only (hashing whole 800-byte
/// matches was a tenth of a 100,000-rule build).
pub fn rule_key_hash(
    h: &foldhash::fast::RandomState,
    table: u8,
    priority: u16,
    m: &flowpath_flow::Match,
) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut s = h.build_hasher();
    s.write_u32((u32::from(table) << 16) | u32::from(priority));
    m.hash_significant(&mut s);
    s.finish()
}

/// The ports a rule set mentions (in_port matches, outputs, resubmits).
pub fn ports_of_rules(rules: &[Rule]) -> Vec<u32> {
    use crate::action::Action;
    let mut set = BTreeSet::new();
    for r in rules {
        let m = &r.matching;
        if m.mask.to_key().in_port() != 0 {
            set.insert(m.key.in_port());
        }
        for a in r.actions.iter().chain(&r.write_actions) {
            match a {
                Action::Output(p)
                | Action::OutputTrunc { port: p, .. }
                | Action::Enqueue { port: p, .. } => {
                    set.insert(*p);
                }
                Action::Resubmit { port: Some(p), .. } => {
                    set.insert(*p);
                }
                _ => {}
            }
        }
    }
    set.into_iter().filter(|p| *p < 0xff00).collect()
}

impl RuleTables {
    /// Builds the tables from `rules` with prefix tracking on `prefixes`.
    /// The bridge's ports default to those the rules mention.
    pub fn new(rules: Vec<Rule>, prefixes: &[FieldId]) -> Self {
        Self::with_table_prefixes(rules, prefixes, &[])
    }

    /// Like [`RuleTables::new`], with per-table prefix fields (OVS's
    /// `Flow_Table:prefixes` set on one table): `per_table` entries override
    /// `prefixes` for their table.
    pub fn with_table_prefixes(
        rules: Vec<Rule>,
        prefixes: &[FieldId],
        per_table: &[(u8, Vec<FieldId>)],
    ) -> Self {
        // A later rule with the same table, priority and match replaces an
        // earlier one. The matches are compared in place (a rule's match
        // is large: copying it into the map was most of a build's cost).
        // Positions hashed by the match's significant words only (hashing
        // whole 800-byte matches was a tenth of a build).
        let hasher = foldhash::fast::RandomState::default();
        let hash = |r: &Rule| rule_key_hash(&hasher, r.table, r.priority, &r.matching);
        let same = |a: &Rule, b: &Rule| {
            a.table == b.table && a.priority == b.priority && a.matching == b.matching
        };
        let mut last: hashbrown::HashTable<usize> =
            hashbrown::HashTable::with_capacity(rules.len());
        for (i, r) in rules.iter().enumerate() {
            let h = hash(r);
            match last.find_mut(h, |&j| same(&rules[j], r)) {
                Some(j) => *j = i,
                None => {
                    last.insert_unique(h, i, |&j| hash(&rules[j]));
                }
            }
        }
        let mut keep = vec![false; rules.len()];
        for &i in last.iter() {
            keep[i] = true;
        }
        drop(last);
        let rules: Vec<Rule> = if keep.iter().all(|&k| k) {
            rules
        } else {
            rules
                .into_iter()
                .zip(keep)
                .filter_map(|(r, k)| k.then_some(r))
                .collect()
        };
        let mut tables: Vec<Option<Classifier>> = vec![None; 256];
        for (i, r) in rules.iter().enumerate() {
            let fields = per_table
                .iter()
                .rev()
                .find(|(t, _)| *t == r.table)
                .map_or(prefixes, |(_, f)| f.as_slice());
            let t = tables[usize::from(r.table)].get_or_insert_with(|| Classifier::new(fields));
            t.insert_conj(&r.matching, r.priority, i as u32, &r.clauses());
        }
        let ports = ports_of_rules(&rules);
        RuleTables {
            rules,
            tables,
            ports,
            groups: Default::default(),
            prefixes: prefixes.to_vec(),
            per_table: per_table.to_vec(),
            frag_mode: FragMode::default(),
            miss_to_controller: Default::default(),
            port_config: BTreeMap::new(),
            sampling: false,
            tunnels: None,
        }
    }

    /// These tables with `extra` rules added (a later rule with the same
    /// table, priority and match replaces an earlier one, as `add-flow`
    /// does), the same prefix tracking, groups and ports: how flows that
    /// `learn` made join the tables.
    pub fn with_added(&self, extra: &[Rule]) -> RuleTables {
        let mut rules = self.rules.clone();
        rules.extend_from_slice(extra);
        let mut t = RuleTables::with_table_prefixes(rules, &self.prefixes, &self.per_table);
        t.groups = self.groups.clone();
        t.frag_mode = self.frag_mode;
        t.miss_to_controller = self.miss_to_controller.clone();
        t.port_config = self.port_config.clone();
        t.sampling = self.sampling;
        t.tunnels = self.tunnels.clone();
        let mut ports = self.ports.clone();
        ports.extend(t.ports.iter().copied());
        t.set_ports(ports);
        t
    }

    /// Installs the group table (`add-groups`). Fails, naming the rule's
    /// line and the group, if a rule or bucket sends to a group that is
    /// not in `groups` (as OVS refuses such a flow).
    pub fn set_groups(&mut self, groups: Vec<crate::group::Group>) -> Result<(), String> {
        crate::group::check_refs(&self.rules, &groups)?;
        self.groups = groups.into_iter().map(|g| (g.id, g)).collect();
        Ok(())
    }

    /// The groups, by id.
    pub fn groups(&self) -> impl Iterator<Item = &crate::group::Group> {
        self.groups.values()
    }

    /// Replaces the port list used by `ALL` and `FLOOD`.
    pub fn set_ports(&mut self, mut ports: Vec<u32>) {
        ports.sort_unstable();
        ports.dedup();
        self.ports = ports;
    }

    /// Replaces the ports' configuration bits (see [`port_config`]);
    /// ports not in `config` have none.
    pub fn set_port_config(&mut self, config: BTreeMap<u32, u32>) {
        self.port_config = config;
        self.port_config.retain(|_, c| *c != 0);
    }

    /// Table misses go to the controllers (see
    /// [`Lookup::miss_to_controller`]).
    pub fn set_miss_to_controller(&mut self, on: bool) {
        self.miss_to_controller = std::sync::Arc::new(on.into());
    }

    /// Table misses go to the controllers while `flag` is on (one flag
    /// for every publication of the tables: changing it needs no
    /// rebuild, only a revalidation).
    pub fn share_miss_to_controller(
        &mut self,
        flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) {
        self.miss_to_controller = flag;
    }

    /// Sets how IP fragments are looked up (OVS's `set-frags`).
    pub fn set_frag_mode(&mut self, mode: FragMode) {
        self.frag_mode = mode;
    }

    /// The bridge has flow-sample collector sets (see
    /// [`Lookup::sampling`]).
    pub fn set_sampling(&mut self, on: bool) {
        self.sampling = on;
    }

    /// Gives the tables the bridge's tunnels (see [`Lookup::tunnels`]);
    /// their OpenFlow ports join the port list.
    pub fn set_tunnels(&mut self, tunnels: Option<std::sync::Arc<crate::tunnel::Tunnels>>) {
        if let Some(t) = &tunnels {
            let mut ports = self.ports.clone();
            ports.extend(t.ports().iter().map(|p| p.ofport));
            self.set_ports(ports);
        }
        self.tunnels = tunnels;
    }

    /// The rules, in load order (after replacement of duplicates).
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The classifier of `table`, if it has rules.
    pub fn table(&self, table: u8) -> Option<&Classifier> {
        self.tables[usize::from(table)].as_ref()
    }
}

impl Lookup for RuleTables {
    fn lookup(
        &self,
        table: u8,
        key: &FlowKey,
        regs: &Regs,
        wc: Option<&mut FlowMask>,
    ) -> Option<&Rule> {
        let c = self.tables[usize::from(table)].as_ref()?;
        c.lookup(key, regs, wc)
            .map(|(id, _)| &self.rules[id as usize])
    }

    fn lookup_indexed(
        &self,
        table: u8,
        key: &FlowKey,
        regs: &Regs,
        wc: Option<&mut FlowMask>,
    ) -> Option<(Option<u32>, &Rule)> {
        let c = self.tables[usize::from(table)].as_ref()?;
        c.lookup(key, regs, wc)
            .map(|(id, _)| (Some(id), &self.rules[id as usize]))
    }

    fn ports(&self) -> &[u32] {
        &self.ports
    }

    fn group(&self, id: u32) -> Option<&crate::group::Group> {
        self.groups.get(&id)
    }

    fn all_rules(&self) -> &[Rule] {
        &self.rules
    }

    fn frag_mode(&self) -> FragMode {
        self.frag_mode
    }
    fn sampling(&self) -> bool {
        self.sampling
    }
    fn tunnels(&self) -> Option<&crate::tunnel::Tunnels> {
        self.tunnels.as_deref()
    }
    fn miss_to_controller(&self) -> bool {
        self.miss_to_controller
            .load(std::sync::atomic::Ordering::Relaxed)
    }
    fn port_config(&self, port: u32) -> u32 {
        if self.port_config.is_empty() {
            return 0;
        }
        self.port_config.get(&port).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_match, parse_rules};
    use crate::xlate::xlate;

    #[test]
    fn per_table_prefixes_override_the_default() {
        let rules = "table=0,priority=10,actions=resubmit(,1)\n\
                     table=1,priority=20,ip,nw_dst=10.0.0.0/8,actions=output:2\n\
                     table=1,priority=0,actions=output:3\n";
        let k = parse_match("in_port=1,ip,nw_dst=192.168.0.1").unwrap().key;
        let on = RuleTables::new(parse_rules(rules, None).unwrap(), &[FieldId::NwDst]);
        let off = RuleTables::with_table_prefixes(
            parse_rules(rules, None).unwrap(),
            &[FieldId::NwDst],
            &[(1, vec![])],
        );
        let a = xlate(&on, &k, false);
        let b = xlate(&off, &k, false);
        assert_eq!(a.actions, b.actions);
        assert_eq!(a.megaflow.to_key().nw_dst(), 0x8000_0000);
        assert_eq!(b.megaflow.to_key().nw_dst(), 0xff00_0000);
    }

    #[test]
    fn port_config_bits_shape_the_translation() {
        use super::port_config::*;
        use flowpath_odp::format_actions;
        let rules = "priority=10,in_port=1,actions=FLOOD\n\
                     priority=10,in_port=2,actions=ALL\n\
                     priority=10,in_port=3,actions=output:3,output:4,output:1\n\
                     priority=10,in_port=4,actions=output:1\n";
        let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
        t.set_ports(vec![1, 2, 3, 4]);
        let run = |t: &RuleTables, p: u32| {
            let k = parse_match(&format!("in_port={p},ip")).unwrap().key;
            format_actions(&xlate(t, &k, false).actions)
        };
        assert_eq!(run(&t, 1), "2,3,4");
        t.set_port_config([(2, NO_FLOOD), (3, NO_FWD), (4, NO_RECV)].into());
        // FLOOD leaves out NO_FLOOD and NO_FWD ports; ALL only NO_FWD.
        assert_eq!(run(&t, 1), "4");
        assert_eq!(run(&t, 2), "1,4");
        // Nothing from a NO_RECV port.
        assert_eq!(run(&t, 4), "drop");
        t.set_port_config([(1, PORT_DOWN)].into());
        assert_eq!(run(&t, 3), "4");
        assert_eq!(run(&t, 1), "drop");
        // Table misses of a NO_PACKET_IN port's packets are dropped.
        t.set_miss_to_controller(true);
        let k = parse_match("in_port=2,udp").unwrap().key;
        let miss = |t: &RuleTables| {
            let mut k = k;
            k.set_in_port(5);
            format_actions(&xlate(t, &k, false).actions)
        };
        assert!(miss(&t).contains("userspace"), "{}", miss(&t));
        t.set_port_config([(5, NO_PACKET_IN)].into());
        assert_eq!(miss(&t), "drop");
    }

    #[test]
    fn fragments_are_looked_up_by_the_frag_mode() {
        use flowpath_odp::format_actions;
        let rules = "priority=100,tcp,tp_dst=8080,actions=drop\npriority=10,actions=output:2\n";
        let first = parse_match("in_port=1,tcp,nw_frag=first,tp_src=1,tp_dst=8080")
            .unwrap()
            .key;
        let later = parse_match("in_port=1,tcp,nw_frag=later").unwrap().key;
        let whole = parse_match("in_port=1,tcp,tp_src=1,tp_dst=8080")
            .unwrap()
            .key;
        let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
        let run = |t: &RuleTables, k: &FlowKey| format_actions(&xlate(t, k, false).actions);
        // OVS's default: the first fragment as if its ports were 0.
        assert_eq!(t.frag_mode(), FragMode::Normal);
        assert_eq!(run(&t, &first), "2");
        assert_eq!(run(&t, &later), "2");
        assert_eq!(run(&t, &whole), "drop");
        // The ports are back for what follows the lookup.
        assert_eq!(xlate(&t, &first, false).final_flow.tp_dst(), 8080);
        t.set_frag_mode(FragMode::NxMatch);
        assert_eq!(run(&t, &first), "drop");
        assert_eq!(run(&t, &later), "2");
        t.set_frag_mode(FragMode::Drop);
        assert_eq!(run(&t, &first), "drop");
        assert_eq!(run(&t, &later), "drop");
        assert_eq!(run(&t, &whole), "drop");
        let added = t.with_added(&[]);
        assert_eq!(added.frag_mode(), FragMode::Drop, "kept by with_added");
        for m in FragMode::ALL {
            assert_eq!(m.name().parse::<FragMode>().unwrap(), m);
        }
        assert!("reassemble"
            .parse::<FragMode>()
            .unwrap_err()
            .contains("not supported"));
        assert!("bogus".parse::<FragMode>().is_err());
    }
}
