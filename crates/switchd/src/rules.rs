//! The bridge's OpenFlow rules as the control commands change them:
//! `add-flow`, `add-flows`, `del-flows [MATCH]`, `replace-flows`, and
//! `dump-flows` printed as `ovs-ofctl dump-flows` prints them.
//!
//! A [`RuleSet`] is the editable list (with each rule's install time);
//! every change builds a new immutable [`RuleTables`] that the switch
//! publishes to its PMD threads. Changes are all or nothing: a file with
//! one bad line changes nothing, and the error names the file, line and
//! field.
//!
//! Threads: owned by the control side (behind the switch's state lock);
//! never touched by a PMD.

use crate::group_stats::{GroupCounters, GroupDelta};
use flowpath_flow::{FieldId, Match, Style};
use flowpath_ofproto::parse::{parse_match, parse_rule, parse_rules};
use flowpath_ofproto::rule::{Rule, RuleError};
use flowpath_ofproto::tables::{FragMode, RuleTables};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// A rule with the time it was installed and its statistics.
#[derive(Clone, Debug)]
pub struct InstalledRule {
    /// The rule.
    pub rule: Rule,
    /// When it was added (or last replaced).
    pub added: Instant,
    /// Unique for the switch's lifetime: statistics find their rule by it
    /// across rule changes.
    pub uid: u64,
    /// Packets of the megaflows that went through this rule (pushed by
    /// the revalidator).
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// When a packet last went through it (as far as the revalidator
    /// has seen).
    pub last_used: Option<Instant>,
}

impl InstalledRule {
    /// OpenFlow's modify: `new`'s actions (and write-actions set), the
    /// counters zeroed with `reset_counts`, the cookie `new_cookie` if
    /// given; the match, priority and timeouts stay.
    fn modify(&mut self, new: &Rule, reset_counts: bool, new_cookie: Option<u64>) {
        if let Some(c) = new_cookie {
            self.rule.cookie = c;
        }
        self.rule.actions = new.actions.clone();
        self.rule.write_actions = new.write_actions.clone();
        if reset_counts {
            self.packets = 0;
            self.bytes = 0;
        }
    }
}

/// A published version of the rules: the immutable tables the PMDs and the
/// revalidator translate with, and the rule uids by table index.
#[derive(Clone, Debug)]
pub struct Published {
    /// Increases with every change.
    pub version: u64,
    /// The tables.
    pub tables: Arc<RuleTables>,
    /// `uids[i]` is the uid of `tables.rules()[i]`.
    pub uids: Arc<Vec<u64>>,
    /// The [`crate::group_stats::GroupStats::uid`] of each group's counters, by group id.
    pub group_uids: Arc<HashMap<u32, u64>>,
}

/// A rule set's contents as a publication needs them (see
/// [`RuleSet::publish_input_for`]).
pub struct PublishInput {
    rules: Vec<Rule>,
    uids: Vec<u64>,
    prefixes: Vec<FieldId>,
    per_table: Vec<(u8, Vec<FieldId>)>,
    ports: Vec<u32>,
    port_config: std::collections::BTreeMap<u32, u32>,
    frag_mode: FragMode,
    sampling: bool,
    tunnels: Option<Arc<flowpath_ofproto::tunnel::Tunnels>>,
    miss_to_controller: Arc<std::sync::atomic::AtomicBool>,
    groups: Vec<flowpath_ofproto::group::Group>,
    version: u64,
    group_uids: HashMap<u32, u64>,
}

impl PublishInput {
    /// Builds the tables.
    pub fn build(self) -> Published {
        let mut t = RuleTables::with_table_prefixes(self.rules, &self.prefixes, &self.per_table);
        t.set_ports(self.ports);
        t.set_port_config(self.port_config);
        t.set_frag_mode(self.frag_mode);
        t.set_sampling(self.sampling);
        t.set_tunnels(self.tunnels);
        t.share_miss_to_controller(self.miss_to_controller);
        // Checked when rules and groups are added (`check_groups`).
        let _ = t.set_groups(self.groups);
        Published {
            version: self.version,
            tables: Arc::new(t),
            uids: Arc::new(self.uids),
            group_uids: Arc::new(self.group_uids),
        }
    }
}

/// The editable rule list and the table options it is built with.
#[derive(Clone, Debug)]
pub struct RuleSet {
    rules: Vec<InstalledRule>,
    prefixes: Vec<FieldId>,
    per_table: Vec<(u8, Vec<FieldId>)>,
    ports: Vec<u32>,
    /// Ports' OpenFlow configuration bits (PORT_MOD), those not 0.
    port_config: std::collections::BTreeMap<u32, u32>,
    groups: Vec<flowpath_ofproto::group::Group>,
    group_counters: GroupCounters,
    frag_mode: FragMode,
    /// The bridge has flow-sample collector sets (`sample` samples).
    sampling: bool,
    /// The bridge's tunnels (see `Lookup::tunnels`).
    tunnels: Option<Arc<flowpath_ofproto::tunnel::Tunnels>>,
    /// The bridge's Geneve option map (its tunnels' when it has them).
    tlv: Arc<flowpath_ofproto::tunnel::TlvTable>,
    /// Shared with every publication (see
    /// [`RuleTables::share_miss_to_controller`]).
    miss_to_controller: Arc<std::sync::atomic::AtomicBool>,
    next_uid: u64,
    version: u64,
    /// Where the rule of each (table, priority, match) is in `rules`: an
    /// add replaces it in place without a scan (100,000 adds one by one
    /// stay linear). Positions only, hashed by the key they point at (a
    /// match is 832 bytes: a copy of each in the index doubled what
    /// copying a rule set costs).
    index: hashbrown::HashTable<usize>,
    index_hasher: foldhash::fast::RandomState,
    /// Whether some rule has a timeout, as of rules version `.0`: the
    /// revalidator's expiry round skips the scan of a large table
    /// without timeouts.
    timed: Option<(u64, bool)>,
}

impl RuleSet {
    /// A rule set with prefix tracking on `prefixes` (and `per_table`
    /// overrides); `ALL` and `FLOOD` reach `ports`.
    pub fn new(
        rules: Vec<Rule>,
        prefixes: Vec<FieldId>,
        per_table: Vec<(u8, Vec<FieldId>)>,
        ports: Vec<u32>,
    ) -> RuleSet {
        let mut s = RuleSet {
            rules: Vec::new(),
            prefixes,
            per_table,
            ports,
            port_config: Default::default(),
            groups: Vec::new(),
            group_counters: GroupCounters::default(),
            frag_mode: FragMode::default(),
            sampling: false,
            tunnels: None,
            tlv: Arc::default(),
            miss_to_controller: Arc::default(),
            next_uid: 1,
            version: 0,
            index: hashbrown::HashTable::new(),
            index_hasher: Default::default(),
            timed: None,
        };
        s.add(rules);
        s
    }

    /// Port `port`'s OpenFlow configuration bits (0: none set).
    pub fn port_config(&self, port: u32) -> u32 {
        self.port_config.get(&port).copied().unwrap_or(0)
    }

    /// Sets port `port`'s OpenFlow configuration bits (translation
    /// honours them once published).
    pub fn set_port_config(&mut self, port: u32, config: u32) {
        if self.port_config(port) == config {
            return;
        }
        if config == 0 {
            self.port_config.remove(&port);
        } else {
            self.port_config.insert(port, config);
        }
        self.version += 1;
    }

    /// Installs the group table; fails (changing nothing) if a rule or
    /// bucket sends to a group that is not among `groups`.
    pub fn set_groups(
        &mut self,
        groups: Vec<flowpath_ofproto::group::Group>,
    ) -> Result<(), String> {
        let rules: Vec<Rule> = self.rules.iter().map(|r| r.rule.clone()).collect();
        flowpath_ofproto::group::check_refs(&rules, &groups)?;
        self.groups = groups;
        self.group_counters.sync(&self.groups, Instant::now());
        self.version += 1;
        Ok(())
    }

    /// Installs the group table as OpenFlow's group_mod does (all or
    /// nothing): every rule must send only to groups among `groups`, but a
    /// bucket may send to a group that does not exist (yet); translation
    /// drops there, as OVS.
    pub fn set_groups_chained(
        &mut self,
        groups: Vec<flowpath_ofproto::group::Group>,
    ) -> Result<(), String> {
        check_rule_refs(self.rules.iter().map(|r| &r.rule), &groups)?;
        self.groups = groups;
        self.group_counters.sync(&self.groups, Instant::now());
        self.version += 1;
        Ok(())
    }

    /// The groups `ids` were modified (replaced, buckets inserted or
    /// removed): their counters start again from 0, as Open vSwitch's.
    pub fn groups_modified(&mut self, ids: &[u32]) {
        self.group_counters.modified(&self.groups, ids);
        self.version += 1;
    }

    /// The groups' packet and byte counters.
    pub fn group_counters(&self) -> &GroupCounters {
        &self.group_counters
    }

    /// Adds group statistics pushed by the revalidator.
    pub fn credit_groups(&mut self, deltas: &[GroupDelta]) {
        self.group_counters.credit(deltas);
    }

    /// Sets how IP fragments are looked up (OVS's `set-frags`).
    pub fn set_frag_mode(&mut self, mode: FragMode) {
        if mode != self.frag_mode {
            self.frag_mode = mode;
            self.version += 1;
        }
    }

    /// Table misses go to the controllers (an OpenFlow 1.0-1.2
    /// connection is up, as OVS). Returns whether that changed.
    pub fn set_miss_to_controller(&mut self, on: bool) -> bool {
        use std::sync::atomic::Ordering;
        let changed = on != self.miss_to_controller.swap(on, Ordering::Relaxed);
        if changed {
            self.version += 1;
        }
        changed
    }

    /// How IP fragments are looked up.
    pub fn frag_mode(&self) -> FragMode {
        self.frag_mode
    }

    /// The bridge's ports (what `ALL` and `FLOOD` reach).
    pub fn ports(&self) -> &[u32] {
        &self.ports
    }

    /// The bridge's prefix-tracking fields.
    pub fn prefixes(&self) -> &[FieldId] {
        &self.prefixes
    }

    /// Replaces the per-table prefix-tracking fields (OVS's
    /// `Flow_Table:prefixes`); tables not listed use the bridge's.
    pub fn set_table_prefixes(&mut self, mut per_table: Vec<(u8, Vec<FieldId>)>) {
        per_table.sort_by_key(|(t, _)| *t);
        if per_table != self.per_table {
            self.per_table = per_table;
            self.version += 1;
        }
    }

    /// Marks the tables changed (something translation reads outside
    /// them changed, e.g. a port's VLAN mode): the next publication is
    /// revalidated whole.
    pub fn touch(&mut self) {
        self.version += 1;
    }

    /// Replaces the bridge's ports (a port added or removed).
    pub fn set_ports(&mut self, mut ports: Vec<u32>) {
        ports.sort_unstable();
        ports.dedup();
        if ports != self.ports {
            self.ports = ports;
            self.version += 1;
        }
    }

    /// Whether `sample` actions sample (the bridge has flow-sample
    /// collector sets).
    pub fn set_sampling(&mut self, on: bool) {
        if on != self.sampling {
            self.sampling = on;
            self.version += 1;
        }
    }

    /// The bridge's Geneve option map.
    pub fn tlv_map(&self) -> flowpath_wire::tunnel::TlvMap {
        self.tlv.get()
    }

    /// The table behind [`RuleSet::tlv_map`] (the tunnels' once set).
    pub fn tlv_table(&self) -> Arc<flowpath_ofproto::tunnel::TlvTable> {
        self.tlv.clone()
    }

    /// Checks flows about to be added: [`RuleSet::check_tlv_mapped`], then
    /// [`RuleSet::check_groups`].
    pub fn check_new(&self, new: &[Rule]) -> Result<(), String> {
        self.check_tlv_mapped(new)?;
        self.check_groups(new)
    }

    /// Refuses flows that use a `tun_metadataN` the bridge does not map
    /// (as an OpenFlow flow_mod is refused, and Open vSwitch refuses it).
    pub fn check_tlv_mapped(&self, new: &[Rule]) -> Result<(), String> {
        let map = self.tlv_map();
        for r in new {
            let un = flowpath_ofproto::tunnel::unmapped_tlv_fields(r, &map);
            if un != 0 {
                return Err(format!(
                    "{r}: tun_metadata{} is not mapped to a Geneve option (add-tlv-map first)",
                    un.trailing_zeros()
                ));
            }
        }
        Ok(())
    }

    /// Gives the tables the bridge's tunnels.
    pub fn set_tunnels(&mut self, t: Option<Arc<flowpath_ofproto::tunnel::Tunnels>>) {
        // (The tunnels' option map becomes the bridge's; without tunnels
        // the bridge keeps its own.)
        if let Some(t) = &t {
            self.tlv = t.tlv_table();
        }
        self.tunnels = t;
        self.version += 1;
    }

    /// The groups, in id order.
    pub fn groups(&self) -> &[flowpath_ofproto::group::Group] {
        &self.groups
    }

    /// Fails if `rules` send to a group this rule set does not have
    /// (the groups' own buckets are not checked here).
    pub fn check_groups(&self, rules: &[Rule]) -> Result<(), String> {
        check_rule_refs(rules, &self.groups)
    }

    /// The rules, in installation order.
    pub fn rules(&self) -> &[InstalledRule] {
        &self.rules
    }

    /// The immutable tables for the PMDs.
    pub fn tables(&self) -> Arc<RuleTables> {
        self.publish().tables
    }

    /// The tables with their version and rule uids. The rule set holds no
    /// two rules with the same table, priority and match, so the tables
    /// keep every rule in this order and index `i` is rule `i` here.
    pub fn publish(&self) -> Published {
        self.publish_input_for(false).build()
    }

    /// [`RuleSet::publish`] in fail-open mode (`--fail-mode standalone`
    /// with every controller gone): the tables hold one flow,
    /// `actions=NORMAL`, as Open vSwitch's fail-open flow overrides every
    /// other while it is on.
    pub fn publish_fail_open(&self) -> Published {
        self.publish_input_for(true).build()
    }

    /// What [`RuleSet::publish`] (with `fail_open`,
    /// [`RuleSet::publish_fail_open`]) builds from, copied out (each rule
    /// once): a caller holding the rule set under a lock builds the tables
    /// after letting go of it.
    pub fn publish_input_for(&self, fail_open: bool) -> PublishInput {
        let (rules, uids) = if fail_open {
            let normal = Rule::new(
                Match::catchall(),
                vec![flowpath_ofproto::action::Action::Normal],
            );
            (vec![normal], vec![u64::MAX])
        } else {
            (
                self.rules.iter().map(|r| r.rule.clone()).collect(),
                self.rules.iter().map(|r| r.uid).collect(),
            )
        };
        PublishInput {
            rules,
            uids,
            prefixes: self.prefixes.clone(),
            per_table: self.per_table.clone(),
            ports: self.ports.clone(),
            port_config: self.port_config.clone(),
            frag_mode: self.frag_mode,
            sampling: self.sampling,
            tunnels: self.tunnels.clone(),
            miss_to_controller: self.miss_to_controller.clone(),
            groups: self.groups.clone(),
            version: self.version,
            group_uids: self.group_counters.uids(),
        }
    }

    /// The version the next [`RuleSet::publish`] carries.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Adds statistics pushed by the revalidator: `(uid, packets, bytes)`
    /// for rules that still exist; the others are ignored.
    pub fn credit(&mut self, deltas: &[(u64, u64, u64)], now: Instant) {
        if deltas.is_empty() {
            return;
        }
        let pos: std::collections::HashMap<u64, usize> = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| (r.uid, i))
            .collect();
        for (uid, p, b) in deltas {
            if let Some(&i) = pos.get(uid) {
                let r = &mut self.rules[i];
                r.packets += p;
                r.bytes += b;
                if *p > 0 {
                    r.last_used = Some(now);
                }
            }
        }
    }

    /// Applies the `fin_timeout` actions of the rules (by uid) that TCP
    /// FIN or RST packets went through: their timeouts come down as OVS
    /// reduces them ([`flowpath_ofproto::learn::reduce_timeouts`]).
    pub fn saw_fin(&mut self, uids: &[u64]) {
        if uids.is_empty() {
            return;
        }
        for r in self.rules.iter_mut().filter(|r| uids.contains(&r.uid)) {
            flowpath_ofproto::learn::reduce_timeouts(&mut r.rule);
        }
        // fin_timeout may give a rule without timeouts some.
        self.timed = None;
    }

    /// Removes the rules whose `idle_timeout` or `hard_timeout` (seconds)
    /// has passed at `now`, as OpenFlow expires them; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        self.expire_removed(now).len()
    }

    /// [`RuleSet::expire`], returning the removed rules with why they
    /// went (OpenFlow's `OFPRR_IDLE_TIMEOUT` 0, `OFPRR_HARD_TIMEOUT` 1).
    pub fn expire_removed(&mut self, now: Instant) -> Vec<(InstalledRule, u8)> {
        let timed = match self.timed {
            Some((v, t)) if v == self.version => t,
            _ => {
                let t = self
                    .rules
                    .iter()
                    .any(|r| r.rule.idle_timeout != 0 || r.rule.hard_timeout != 0);
                self.timed = Some((self.version, t));
                t
            }
        };
        if !timed {
            return Vec::new();
        }
        let mut gone = Vec::new();
        self.rules.retain(|r| {
            let age = now.saturating_duration_since(r.added).as_secs_f64();
            let idle = now
                .saturating_duration_since(r.last_used.unwrap_or(r.added))
                .as_secs_f64();
            let hard_ok = r.rule.hard_timeout == 0 || age < f64::from(r.rule.hard_timeout);
            let idle_ok = r.rule.idle_timeout == 0 || idle < f64::from(r.rule.idle_timeout);
            if !idle_ok {
                gone.push((r.clone(), 0));
            } else if !hard_ok {
                gone.push((r.clone(), 1));
            }
            hard_ok && idle_ok
        });
        if !gone.is_empty() {
            self.version += 1;
            self.reindex();
        }
        gone
    }

    /// Makes room for `n` more rules (a bundle of adds: the list grows
    /// once, not by doublings of 1 KiB rules).
    pub fn reserve(&mut self, n: usize) {
        self.rules.reserve(n);
    }

    /// Adds `rules`; a rule with the same table, priority and match as an
    /// existing one replaces it (as `ovs-ofctl add-flow` does).
    pub fn add(&mut self, rules: Vec<Rule>) {
        for rule in rules {
            self.add_one(rule);
        }
    }

    /// [`RuleSet::add`] of one rule.
    pub fn add_one(&mut self, rule: Rule) {
        let h = self.key_hash(rule.table, rule.priority, &rule.matching);
        let installed = InstalledRule {
            rule,
            added: Instant::now(),
            uid: self.next_uid,
            packets: 0,
            bytes: 0,
            last_used: None,
        };
        self.next_uid += 1;
        let r = &installed.rule;
        match self.find(h, r.table, r.priority, &r.matching) {
            Some(i) => self.rules[i] = installed,
            None => {
                self.rules.push(installed);
                self.index_insert(h, self.rules.len() - 1);
            }
        }
        self.version += 1;
    }

    /// The positions of the rules with exactly this priority and match,
    /// in `table` or in every table (strict modify and delete use the
    /// index instead of a scan).
    fn exact(&self, table: Option<u8>, priority: u16, m: &Match) -> Vec<usize> {
        let tables: Vec<u8> = match table {
            Some(t) => vec![t],
            None => self
                .rules
                .iter()
                .map(|r| r.rule.table)
                .collect::<std::collections::BTreeSet<u8>>()
                .into_iter()
                .collect(),
        };
        tables
            .into_iter()
            .filter_map(|t| self.find(self.key_hash(t, priority, m), t, priority, m))
            .collect()
    }

    fn key_hash(&self, table: u8, priority: u16, m: &Match) -> u64 {
        flowpath_ofproto::tables::rule_key_hash(&self.index_hasher, table, priority, m)
    }

    /// The position of the rule with this key (`h` its hash).
    fn find(&self, h: u64, table: u8, priority: u16, m: &Match) -> Option<usize> {
        let rules = &self.rules;
        self.index
            .find(h, |&i| {
                let r = &rules[i].rule;
                r.table == table && r.priority == priority && r.matching == *m
            })
            .copied()
    }

    /// Indexes position `i` (`h` the hash of its rule's key).
    fn index_insert(&mut self, h: u64, i: usize) {
        let (rules, hasher) = (&self.rules, &self.index_hasher);
        self.index.insert_unique(h, i, |&j| {
            let r = &rules[j].rule;
            flowpath_ofproto::tables::rule_key_hash(hasher, r.table, r.priority, &r.matching)
        });
    }

    /// [`RuleSet::modify_where`] for the flows of exactly this priority
    /// and match (OpenFlow's strict modify) that `pred` also accepts.
    pub fn modify_exact(
        &mut self,
        table: Option<u8>,
        new: &Rule,
        mut pred: impl FnMut(&Rule) -> bool,
        reset_counts: bool,
        new_cookie: Option<u64>,
    ) -> Vec<Rule> {
        let mut changed = Vec::new();
        for i in self.exact(table, new.priority, &new.matching) {
            let r = &mut self.rules[i];
            if pred(&r.rule) {
                r.modify(new, reset_counts, new_cookie);
                changed.push(r.rule.clone());
            }
        }
        self.version += 1;
        changed
    }

    /// Deletes the flows of exactly this priority and match (OpenFlow's
    /// strict delete) that `pred` also accepts; returns them.
    pub fn delete_exact(
        &mut self,
        table: Option<u8>,
        priority: u16,
        m: &Match,
        mut pred: impl FnMut(&Rule) -> bool,
    ) -> Vec<InstalledRule> {
        let mut hits = self.exact(table, priority, m);
        hits.retain(|&i| pred(&self.rules[i].rule));
        hits.sort_unstable_by(|a, b| b.cmp(a));
        let mut gone = Vec::new();
        for i in hits {
            let last = self.rules.len() - 1;
            let h = self.key_hash(
                self.rules[i].rule.table,
                self.rules[i].rule.priority,
                &self.rules[i].rule.matching,
            );
            if let Ok(e) = self.index.find_entry(h, |&j| j == i) {
                e.remove();
            }
            if i != last {
                // The last rule moves into `i`.
                let m = &self.rules[last].rule;
                let hm = self.key_hash(m.table, m.priority, &m.matching);
                if let Some(p) = self.index.find_mut(hm, |&j| j == last) {
                    *p = i;
                }
            }
            gone.push(self.rules.swap_remove(i));
        }
        self.version += 1;
        gone
    }

    /// Rebuilds the (table, priority, match) index after rules went.
    fn reindex(&mut self) {
        self.index.clear();
        self.index.reserve(self.rules.len(), |_| 0);
        for i in 0..self.rules.len() {
            let r = &self.rules[i].rule;
            let h = self.key_hash(r.table, r.priority, &r.matching);
            self.index_insert(h, i);
        }
    }

    /// Replaces every rule with `rules`.
    pub fn replace(&mut self, rules: Vec<Rule>) {
        self.rules.clear();
        self.index.clear();
        self.add(rules);
    }

    /// Deletes the rules `pred` selects; returns them.
    pub fn delete_where(&mut self, mut pred: impl FnMut(&Rule) -> bool) -> Vec<InstalledRule> {
        let mut gone = Vec::new();
        self.rules.retain(|r| {
            let d = pred(&r.rule);
            if d {
                gone.push(r.clone());
            }
            !d
        });
        self.version += 1;
        self.reindex();
        gone
    }

    /// Gives the rules `pred` selects `actions` (and the write-actions
    /// set), keeping their match, priority, timeouts and statistics
    /// (zeroed with `reset_counts`, as OpenFlow's modify), and the cookie
    /// `new_cookie` if given. Returns the changed rules.
    pub fn modify_where(
        &mut self,
        mut pred: impl FnMut(&Rule) -> bool,
        new: &Rule,
        reset_counts: bool,
        new_cookie: Option<u64>,
    ) -> Vec<Rule> {
        let mut changed = Vec::new();
        for r in &mut self.rules {
            if pred(&r.rule) {
                r.modify(new, reset_counts, new_cookie);
                changed.push(r.rule.clone());
            }
        }
        self.version += 1;
        changed
    }

    /// Deletes the rules `sel` selects (non-strict, as `ovs-ofctl
    /// del-flows`): those whose match covers every field `sel` names with
    /// the same values, in `sel`'s table if it names one. Returns how many.
    pub fn delete(&mut self, sel: &Selector) -> usize {
        let before = self.rules.len();
        self.rules.retain(|r| !sel.selects(&r.rule));
        self.version += 1;
        self.reindex();
        before - self.rules.len()
    }
}

/// What `del-flows` and `dump-flows` select: an optional table and a
/// match (catch-all selects everything).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// `table=N`, if given.
    pub table: Option<u8>,
    /// The fields given.
    pub matching: Match,
}

impl Selector {
    /// Parses `[table=N,]FIELD=VALUE,...` (empty = every rule).
    pub fn parse(text: &str) -> Result<Selector, RuleError> {
        let mut table = None;
        let mut rest = Vec::new();
        for tok in text.split([',', ' ', '\t']).filter(|t| !t.is_empty()) {
            match tok.split_once('=') {
                Some(("table", v)) => {
                    let t: u8 = v.trim().parse().ok().filter(|t| *t < 255).ok_or_else(|| {
                        RuleError::new(Some("table"), format!("'{v}' is not a table (0 to 254)"))
                    })?;
                    table = Some(t);
                }
                _ => rest.push(tok),
            }
        }
        let matching = if rest.is_empty() {
            Match::catchall()
        } else {
            parse_match(&rest.join(","))?
        };
        Ok(Selector { table, matching })
    }

    /// Whether `r` is selected.
    pub fn selects(&self, r: &Rule) -> bool {
        if self.table.is_some_and(|t| t != r.table) {
            return false;
        }
        let m = &self.matching;
        m.mask.is_subset_of(&r.matching.mask) && r.matching.key.eq_masked(&m.key, &m.mask)
    }
}

/// Fails if `rules` send to a group not among `groups` (whose buckets
/// may send anywhere).
fn check_rule_refs<'a>(
    rules: impl IntoIterator<Item = &'a Rule>,
    groups: &[flowpath_ofproto::group::Group],
) -> Result<(), String> {
    use flowpath_ofproto::action::Action;
    // Groups are kept sorted by id.
    let known = |g: u32| {
        groups.binary_search_by_key(&g, |x| x.id).is_ok() || groups.iter().any(|x| x.id == g)
    };
    for r in rules {
        for a in r.actions.iter().chain(&r.write_actions) {
            if let Action::Group(g) = a {
                if !known(*g) {
                    return Err(format!("line {}: group:{g}: no such group", r.line));
                }
            }
        }
    }
    Ok(())
}

/// Parses one rule given on the command line (`add-flow`).
pub fn parse_one(text: &str) -> Result<Rule, RuleError> {
    parse_rule(text)
}

/// Reads and parses a rule file (`add-flows`, `replace-flows`); all or
/// nothing, errors name the file, line and field.
pub fn load_file(path: &str) -> Result<Vec<Rule>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    parse_rules(&text, Some(path)).map_err(|e| e.to_string())
}

/// The `dump-flows` text: one line per rule, as `ovs-ofctl dump-flows`
/// prints it (` cookie=0x0, duration=1.234s, table=0, n_packets=…,
/// n_bytes=…, priority=…,MATCH actions=…`), sorted by table and then by
/// descending priority, with the statistics the revalidator pushed
/// (`n_packets`, `n_bytes`, `idle_age` in seconds).
pub fn dump_flows(set: &RuleSet, sel: &Selector) -> String {
    let now = Instant::now();
    let mut rows: Vec<&InstalledRule> = set.rules.iter().filter(|r| sel.selects(&r.rule)).collect();
    rows.sort_by(|a, b| {
        (a.rule.table, std::cmp::Reverse(a.rule.priority))
            .cmp(&(b.rule.table, std::cmp::Reverse(b.rule.priority)))
    });
    let mut out = String::new();
    for ir in rows {
        let r = &ir.rule;
        let dur = now.duration_since(ir.added).as_secs_f64();
        out.push_str(&format!(
            " cookie={:#x}, duration={dur:.3}s, table={}, ",
            r.cookie, r.table
        ));
        out.push_str(&format!("n_packets={}, n_bytes={}, ", ir.packets, ir.bytes));
        if r.idle_timeout != 0 {
            out.push_str(&format!("idle_timeout={}, ", r.idle_timeout));
        }
        if r.hard_timeout != 0 {
            out.push_str(&format!("hard_timeout={}, ", r.hard_timeout));
        }
        let idle = now
            .duration_since(ir.last_used.unwrap_or(ir.added))
            .as_secs();
        out.push_str(&format!("idle_age={idle}, priority={}", r.priority));
        let m = r.matching.format(Style::Rule);
        if !m.is_empty() {
            out.push(',');
            out.push_str(&m);
        }
        out.push_str(&format!(" actions={}\n", format_actions_of(r)));
    }
    out
}

/// `ovs-appctl bridge/dump-flows`: every flow, hidden ones included, in
/// Open vSwitch's format (`[table_id=T, ]duration=Ns, n_packets=N,
/// n_bytes=N, [priority=P,]MATCH,actions=A`). The hidden flow is the
/// fail-open flow while it is on (priority 15790320, `NORMAL`, as Open
/// vSwitch's); Open vSwitch's internal table 254 has no counterpart.
pub fn bridge_dump_flows(set: &RuleSet, learned: &[Rule], fail_open: bool) -> String {
    let now = Instant::now();
    let mut rows: Vec<(Rule, u64, u64, u64)> = set
        .rules
        .iter()
        .map(|ir| {
            let d = now.duration_since(ir.added).as_secs();
            (ir.rule.clone(), d, ir.packets, ir.bytes)
        })
        .chain(learned.iter().map(|r| (r.clone(), 0, 0, 0)))
        .collect();
    rows.sort_by_key(|(r, ..)| (r.table, std::cmp::Reverse(r.priority)));
    let mut out = String::new();
    if fail_open {
        // Above every OpenFlow priority (Open vSwitch's hidden flows have
        // 32-bit priorities).
        out.push_str("duration=0s, n_packets=0, n_bytes=0, priority=15790320,actions=NORMAL\n");
    }
    for (r, dur, packets, bytes) in rows {
        if r.table != 0 {
            out.push_str(&format!("table_id={}, ", r.table));
        }
        out.push_str(&format!(
            "duration={dur}s, n_packets={packets}, n_bytes={bytes}, "
        ));
        // As Open vSwitch's match format: the priority unless the
        // default, the fields, no comma at the end.
        let mut m = String::new();
        if r.priority != flowpath_ofproto::rule::DEFAULT_PRIORITY {
            m.push_str(&format!("priority={},", r.priority));
        }
        m.push_str(&r.matching.format(Style::Rule));
        out.push_str(m.trim_end_matches(','));
        out.push_str(&format!(",actions={}\n", format_actions_of(&r)));
    }
    out
}

/// The flows `learn` made, as `dump_flows` prints rules (table, then
/// priority, highest first) but without counters, which flowpath does not
/// keep for them.
pub fn dump_learned(flows: &[Rule], sel: &Selector) -> String {
    let mut rows: Vec<&Rule> = flows.iter().filter(|r| sel.selects(r)).collect();
    rows.sort_by_key(|r| (r.table, std::cmp::Reverse(r.priority)));
    let mut out = String::new();
    for r in rows {
        out.push_str(&format!(" cookie={:#x}, {r}\n", r.cookie));
    }
    out
}

/// A rule's actions as `ovs-ofctl` prints them (`drop` when empty).
pub fn format_actions_of(r: &Rule) -> String {
    let s = flowpath_ofproto::action::format_instructions(&r.actions, &r.write_actions);
    if s.is_empty() {
        "drop".to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> RuleSet {
        RuleSet::new(parse_rules(text, None).unwrap(), vec![], vec![], vec![1, 2])
    }

    #[test]
    fn expiry_sees_timeouts_added_after_a_round_without_any() {
        let mut s = set("priority=10,tcp,actions=output:2\n");
        let later = Instant::now() + std::time::Duration::from_secs(5);
        assert_eq!(s.expire(later), 0, "no timeouts: nothing to expire");
        s.add(vec![parse_one(
            "priority=9,udp,hard_timeout=1,actions=output:1",
        )
        .unwrap()]);
        assert_eq!(s.expire(later), 1, "the new rule's hard timeout");
        assert_eq!(s.rules().len(), 1);
    }

    #[test]
    fn add_replaces_same_match_and_priority() {
        let mut s = set("priority=10,tcp,actions=output:2\npriority=5,actions=drop\n");
        s.add(vec![parse_one("priority=10,tcp,actions=output:1").unwrap()]);
        assert_eq!(s.rules().len(), 2);
        let d = dump_flows(&s, &Selector::parse("").unwrap());
        assert!(d.contains("priority=10,tcp actions=output:1"), "{d}");
        assert!(!d.contains("output:2"), "{d}");
        assert!(d.starts_with(" cookie=0x0, duration="), "{d}");
    }

    #[test]
    fn delete_is_non_strict() {
        let mut s = set("priority=10,tcp,tp_dst=80,actions=output:2\n\
             priority=9,tcp,actions=output:2\n\
             priority=8,udp,actions=output:2\n\
             table=1,priority=8,tcp,actions=output:2\n\
             priority=1,actions=drop\n");
        assert_eq!(s.delete(&Selector::parse("table=0,tcp").unwrap()), 2);
        assert_eq!(s.rules().len(), 3);
        assert_eq!(s.delete(&Selector::parse("tcp").unwrap()), 1);
        assert_eq!(s.delete(&Selector::parse("").unwrap()), 2);
        assert!(s.rules().is_empty());
        assert!(Selector::parse("table=x").is_err());
        assert!(Selector::parse("nw_dst=1.2.3.400").is_err());
    }
}
