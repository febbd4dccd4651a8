//! The tracker: [`Conntrack`] and the per-packet `ct` action.
//!
//! What: `execute` follows Open vSwitch 3.1's `conntrack_execute` for one
//! packet:
//!
//! 1. a packet that already went through a `ct` of this zone and carries
//!    a connection handle (and no `force`/helper) skips the lookup: only
//!    mark, label and NAT are applied;
//! 2. otherwise its tuple is extracted; an unparsable packet is
//!    `+trk+inv`;
//! 3. entering a different zone clears the previous `ct_state` (in the
//!    same zone only `+snat`/`+dnat` are kept); a packet already NATed by
//!    an earlier `ct` of the zone is looked up by its reversed tuple;
//! 4. found: the protocol state machine decides `+est`/`+new`/`+inv`
//!    (`+rpl` in the reply direction); an ICMP error quoting it is
//!    `+rel`; NAT is applied if the action asks for it; `force` deletes
//!    a connection found in the reply direction;
//! 5. not found: a NATed packet whose original tuple is known finds its
//!    connection by that tuple; an orphan ICMP error is `+inv`; anything
//!    else is `+new` (or `+inv` if it cannot open a connection, e.g. a
//!    SYN+ACK or an ICMP reply) and, with `commit`, becomes a connection
//!    — unless the tracker or the zone is full, or no NAT tuple is free,
//!    in which case the packet stays `+new` and the refusal is counted;
//! 6. the metadata gets zone, mark, label and original tuple; the
//!    action's mark/label are written (masked) into the connection.
//!
//! Invariants: see the crate documentation. Thread-safety: `Conntrack`
//! is `Send + Sync`; counters are relaxed atomics.

use crate::key::{extract, ConnKey, Parsed, ETH_TYPE_IPV4};
use crate::limits::ZoneLimits;
use crate::nat::{self, Layout};
use crate::proto::{valid_new, UpdateRes, L4};
use crate::table::{handle_split, handle_with_dir, Conn, Table};
use crate::{
    state, tcp, Config, ConnEntry, CtArgs, CtMeta, FlushTuple, OrigTuple, Stats, TcpInfo, Tuple,
    TupleMatch,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Default)]
struct Counters {
    committed: AtomicU64,
    removed: AtomicU64,
    full: AtomicU64,
    zone_limited: AtomicU64,
    nat_exhausted: AtomicU64,
    unparsable: AtomicU64,
    invalid: AtomicU64,
}

/// The connection tracker, shared by all PMD threads.
pub struct Conntrack {
    cfg: Config,
    table: Table,
    limits: ZoneLimits,
    n_conns: AtomicU32,
    max_conns: AtomicU32,
    seq_check: AtomicBool,
    sweep_next: AtomicUsize,
    last_sweep: AtomicU64,
    rng: AtomicU64,
    ctr: Counters,
}

/// Where the packet is, for the state machines and NAT.
struct Pkt<'a> {
    frame: &'a mut [u8],
    parsed: Parsed,
    l3: usize,
}

impl Pkt<'_> {
    fn l4(&self) -> &[u8] {
        self.frame
            .get(self.parsed.l4..self.parsed.end)
            .unwrap_or(&[])
    }

    fn layout(&self) -> Layout {
        let v6 = self.parsed.key.v6;
        // The outer protocol: the key's for a plain packet, ICMP for an
        // error (whose key is the quoted packet's).
        let proto = if self.parsed.related {
            if v6 {
                flowpath_wire::ip_proto::ICMPV6
            } else {
                flowpath_wire::ip_proto::ICMP
            }
        } else {
            self.parsed.key.proto
        };
        Layout {
            l3: self.l3,
            l4: self.parsed.l4,
            end: self.parsed.end,
            v6,
            proto,
        }
    }
}

fn orig_tuple(k: &ConnKey) -> OrigTuple {
    let (sp, dp) = if k.is_icmp() {
        (u16::from(k.src.icmp_type), u16::from(k.src.icmp_code))
    } else {
        (k.src.port, k.dst.port)
    };
    OrigTuple {
        v6: k.v6,
        src: k.src.addr,
        dst: k.dst.addr,
        src_port: sp,
        dst_port: dp,
        proto: k.proto,
    }
}

fn ip_of(a: &[u8; 16], v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(*a))
    } else {
        IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))
    }
}

fn tuple_of(k: &ConnKey) -> Tuple {
    let icmp = k.is_icmp();
    Tuple {
        proto: k.proto,
        src: ip_of(&k.src.addr, k.v6),
        dst: ip_of(&k.dst.addr, k.v6),
        src_port: if icmp { 0 } else { k.src.port },
        dst_port: if icmp { 0 } else { k.dst.port },
        icmp_id: if icmp { k.src.port } else { 0 },
        icmp_type: if icmp { k.src.icmp_type } else { 0 },
        icmp_code: if icmp { k.src.icmp_code } else { 0 },
    }
}

fn side_matches(t: &Tuple, m: &TupleMatch) -> bool {
    m.src.is_none_or(|a| a == t.src)
        && m.dst.is_none_or(|a| a == t.dst)
        && m.src_port.is_none_or(|p| p == t.src_port)
        && m.dst_port.is_none_or(|p| p == t.dst_port)
        && m.icmp_id.is_none_or(|p| p == t.icmp_id)
        && m.icmp_type.is_none_or(|p| p == t.icmp_type)
        && m.icmp_code.is_none_or(|p| p == t.icmp_code)
}

impl Conntrack {
    /// An empty tracker.
    pub fn new(cfg: Config) -> Self {
        let table = Table::new(cfg.shards);
        Conntrack {
            cfg,
            table,
            limits: ZoneLimits::new(),
            n_conns: AtomicU32::new(0),
            max_conns: AtomicU32::new(cfg.max_conns),
            seq_check: AtomicBool::new(cfg.tcp_seq_check),
            sweep_next: AtomicUsize::new(0),
            last_sweep: AtomicU64::new(0),
            rng: AtomicU64::new(0x2545_f491_4f6c_dd1d),
            ctr: Counters::default(),
        }
    }

    /// Runs one packet through the tracker (see the module documentation):
    /// `frame` is the whole frame, `l3` the offset of its IP header,
    /// `dl_type` 0x0800 or 0x86dd (anything else is `+trk+inv`),
    /// `csum_ok` says the L3/L4 checksums are known good and must not be
    /// verified. Updates `md`, rewrites the frame for NAT, commits when
    /// `args.commit` (or `args.force`).
    // The datapath's calling convention: one packet and its metadata.
    #[allow(clippy::too_many_arguments)]
    pub fn execute(
        &self,
        frame: &mut [u8],
        l3: usize,
        dl_type: u16,
        csum_ok: bool,
        args: &CtArgs,
        md: &mut CtMeta,
        now_ms: u64,
    ) {
        let zone = args.zone;
        if md.conn != 0 && !args.force && args.helper.is_none() {
            if let Some(conn) = self.table.by_handle(md.conn) {
                if conn.key.zone == zone && !conn.expired(now_ms) {
                    self.process_fast(frame, l3, dl_type, args, md, &conn);
                    return;
                }
            }
        }
        let Some(parsed) = extract(frame, l3, dl_type, zone, csum_ok) else {
            self.ctr.unparsable.fetch_add(1, Ordering::Relaxed);
            self.ctr.invalid.fetch_add(1, Ordering::Relaxed);
            md.state = state::INV | state::TRK;
            md.zone = zone;
            md.mark = 0;
            md.label = 0;
            md.orig = None;
            md.conn = 0;
            return;
        };
        let mut pkt = Pkt { frame, parsed, l3 };
        self.process(&mut pkt, args, md, now_ms);
        if md.state & state::INV != 0 {
            self.ctr.invalid.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A recirculated packet with a known connection: mark, label, NAT.
    fn process_fast(
        &self,
        frame: &mut [u8],
        l3: usize,
        dl_type: u16,
        args: &CtArgs,
        md: &mut CtMeta,
        conn: &Arc<Conn>,
    ) {
        let (_, reply, related) = handle_split(md.conn);
        if args.nat.is_some() {
            if conn.nat_action != 0 && md.state & (state::SNAT | state::DNAT) == 0 {
                // Re-derive the layout: the frame is the one the handle
                // was recorded for.
                let lay = crate::key::parse_l3(
                    frame,
                    l3,
                    frame.len(),
                    dl_type != ETH_TYPE_IPV4,
                    true,
                    true,
                )
                .map(|(k, l4, end)| Layout {
                    l3,
                    l4,
                    end,
                    v6: k.v6,
                    proto: k.proto,
                });
                if let Some(lay) = lay {
                    Self::nat_one(frame, &lay, conn, reply, related, md);
                }
            }
            md.conn = 0;
        }
        md.zone = args.zone;
        let (mark, label) = {
            let s = conn.lock();
            (s.mark, s.label)
        };
        md.mark = mark;
        md.label = label;
        self.set_mark_label(args, md, conn);
    }

    fn process(&self, pkt: &mut Pkt<'_>, args: &CtArgs, md: &mut CtMeta, now: u64) {
        let zone = args.zone;
        if md.state != 0 && md.zone != zone {
            md.state = 0;
        }
        // In the same zone only the NAT bits carry over (they say the
        // packet was already translated); the verdict is made afresh, so a
        // stale `+inv` or `+rpl` cannot mix with this pass's result.
        md.state &= state::SNAT | state::DNAT;
        let natted = md.state & (state::SNAT | state::DNAT) != 0;
        let related = pkt.parsed.related;
        let mut key = pkt.parsed.key;
        let mut reply = false;
        let mut conn: Option<Arc<Conn>> = None;

        if natted {
            if let Some((c, r)) = self.table.lookup(&key.reverse(), now) {
                reply = !r;
                key = if reply { c.rev_key } else { c.key };
                conn = Some(c);
            }
        } else if let Some((c, r)) = self.table.lookup(&key, now) {
            reply = r;
            conn = Some(c);
        }

        if args.force && reply {
            if let Some(c) = conn.take() {
                self.remove(&c);
            }
            reply = false;
        }

        let mut create = false;
        if let Some(c) = &conn {
            create = self.update_state(pkt, md, c, reply, related, now);
            if !create {
                if let Some(n) = &args.nat {
                    let _ = n;
                    self.handle_nat(pkt, md, c, zone, reply, related);
                }
            }
        } else if let Some(c) = self.by_orig_tuple(md, &pkt.parsed.key, args, now) {
            create = self.update_state(pkt, md, &c, false, related, now);
            conn = Some(c);
        } else if related {
            md.state = state::INV;
        } else {
            create = true;
        }

        if create {
            let _g = self.table.insert_guard();
            if !self.table.taken(&key, now) {
                conn = self.not_found(pkt, md, &key, args, now);
            }
        }

        // The metadata.
        md.state |= state::TRK;
        md.zone = zone;
        match &conn {
            Some(c) => {
                let s = c.lock();
                md.mark = s.mark;
                md.label = s.label;
                drop(s);
                md.orig = Some(orig_tuple(c.parent.as_deref().unwrap_or(&c.key)));
            }
            None => {
                md.mark = 0;
                md.label = 0;
                md.orig = Some(orig_tuple(&key));
            }
        }
        md.conn = 0;
        if let Some(c) = &conn {
            self.set_mark_label(args, md, c);
            if args.nat.is_none() {
                md.conn = handle_with_dir(c.handle.load(Ordering::Relaxed), reply, related);
            }
        }
    }

    fn set_mark_label(&self, args: &CtArgs, md: &mut CtMeta, c: &Conn) {
        if args.set_mark.is_none() && args.set_label.is_none() {
            return;
        }
        let mut s = c.lock();
        if let Some((v, m)) = args.set_mark {
            if c.parent.is_some() {
                md.mark = s.mark;
            } else {
                md.mark = v | (md.mark & !m);
                s.mark = md.mark;
            }
        }
        if let Some((v, m)) = args.set_label {
            if c.parent.is_some() {
                md.label = s.label;
            } else {
                md.label = v | (md.label & !m);
                s.label = md.label;
            }
        }
    }

    /// Runs the packet through an existing connection's state machine.
    /// Returns true when the packet must start a new connection instead.
    fn update_state(
        &self,
        pkt: &Pkt<'_>,
        md: &mut CtMeta,
        c: &Arc<Conn>,
        reply: bool,
        related: bool,
        now: u64,
    ) -> bool {
        if related {
            md.state |= state::REL;
            if reply {
                md.state |= state::RPL;
            }
            return false;
        }
        if c.parent.is_some() {
            md.state |= state::REL;
        }
        let seq_check = self.seq_check.load(Ordering::Relaxed);
        let (res, tc) = {
            let mut s = c.lock();
            s.l4.update(pkt.l4(), reply, seq_check)
        };
        if let Some(tc) = tc {
            c.expiration.store(
                now.saturating_add(self.cfg.timeouts.ms(tc)),
                Ordering::Relaxed,
            );
        }
        match res {
            UpdateRes::Valid => {
                md.state |= state::EST;
                md.state &= !state::NEW;
                if reply {
                    md.state |= state::RPL;
                }
                false
            }
            UpdateRes::Invalid => {
                md.state = state::INV;
                false
            }
            UpdateRes::New => {
                self.remove(c);
                true
            }
            UpdateRes::ValidNew => {
                md.state |= state::NEW;
                false
            }
        }
    }

    fn handle_nat(
        &self,
        pkt: &mut Pkt<'_>,
        md: &mut CtMeta,
        c: &Conn,
        zone: u16,
        reply: bool,
        related: bool,
    ) {
        let nat_bits = md.state & (state::SNAT | state::DNAT);
        if c.nat_action != 0 && (nat_bits == 0 || zone != md.zone) {
            md.state &= !(state::SNAT | state::DNAT);
            let lay = pkt.layout();
            Self::nat_one(pkt.frame, &lay, c, reply, related, md);
        }
    }

    fn nat_one(
        frame: &mut [u8],
        lay: &Layout,
        c: &Conn,
        reply: bool,
        related: bool,
        md: &mut CtMeta,
    ) {
        let (key, action) = if reply {
            (&c.key, nat::reverse_action(c.nat_action))
        } else {
            (&c.rev_key, c.nat_action)
        };
        if action & crate::table::nat_bits::SRC != 0 {
            md.state |= state::SNAT;
        } else if action & crate::table::nat_bits::DST != 0 {
            md.state |= state::DNAT;
        }
        nat::nat_packet(frame, lay, key, action, related);
    }

    /// A packet NATed by an earlier `ct` of this zone, whose connection is
    /// found by the original tuple in its metadata.
    fn by_orig_tuple(
        &self,
        md: &CtMeta,
        k: &ConnKey,
        args: &CtArgs,
        now: u64,
    ) -> Option<Arc<Conn>> {
        if md.state & (state::SNAT | state::DNAT) == 0 || args.nat.is_some() {
            return None;
        }
        let o = md.orig?;
        if o.proto == 0 {
            return None;
        }
        let mut key = ConnKey {
            v6: k.v6,
            proto: o.proto,
            zone: md.zone,
            ..ConnKey::default()
        };
        key.src.addr = o.src;
        key.dst.addr = o.dst;
        if k.is_icmp() {
            key.src.port = k.src.port;
            key.dst.port = k.dst.port;
            let t = o.src_port as u8;
            key.src.icmp_type = t;
            key.dst.icmp_type = if k.v6 {
                crate::key::reverse_icmp6_type(t)
            } else {
                crate::key::reverse_icmp_type(t)
            };
        } else {
            key.src.port = o.src_port;
            key.dst.port = o.dst_port;
        }
        self.table.lookup(&key, now).map(|(c, _)| c)
    }

    /// No connection: `+new` (or `+inv`), and commit if asked. Called with
    /// the insertion lock held.
    fn not_found(
        &self,
        pkt: &mut Pkt<'_>,
        md: &mut CtMeta,
        key: &ConnKey,
        args: &CtArgs,
        now: u64,
    ) -> Option<Arc<Conn>> {
        if !valid_new(key, pkt.l4()) {
            md.state = state::INV;
            return None;
        }
        md.state = state::NEW;
        if !(args.commit || args.force) {
            return None;
        }
        if !self.limits.admit(key.zone) {
            self.ctr.zone_limited.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if self.n_conns.load(Ordering::Relaxed) >= self.max_conns.load(Ordering::Relaxed) {
            self.limits.release(key.zone);
            self.ctr.full.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let (l4, tc) = L4::new(key, pkt.l4());
        let exp = now.saturating_add(self.cfg.timeouts.ms(tc));
        let mut rev = key.reverse();
        let mut action = 0;
        if let Some(spec) = args.nat.as_ref().filter(|s| s.kind.is_some()) {
            action = nat::action_bits(spec);
            let hash = self.nat_hash(key, spec);
            let mut rng = self.rng.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) | 1;
            let table = &self.table;
            let mut free = |t: &ConnKey| !table.taken(t, now);
            match nat::unique_tuple(key, spec, action, hash, &mut rng, &mut free) {
                Some(r) => rev = r,
                None => {
                    self.limits.release(key.zone);
                    self.ctr.nat_exhausted.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
            }
        }
        let mut c = Conn::new(*key, rev, l4, exp);
        c.nat_action = action;
        c.alg = args.helper;
        let mut evicted = Vec::new();
        let inserted = self.table.insert(c, now, &mut evicted);
        for old in evicted {
            self.count_out(&old);
        }
        match inserted {
            Ok(arc) => {
                self.n_conns.fetch_add(1, Ordering::Relaxed);
                self.ctr.committed.fetch_add(1, Ordering::Relaxed);
                if action != 0 {
                    let lay = pkt.layout();
                    Self::nat_one(pkt.frame, &lay, &arc, false, pkt.parsed.related, md);
                }
                Some(arc)
            }
            Err(_) => {
                self.limits.release(key.zone);
                None
            }
        }
    }

    fn nat_hash(&self, key: &ConnKey, spec: &crate::NatSpec) -> u32 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        if let Some(r) = &spec.range {
            r.min_addr.hash(&mut h);
            r.max_addr.hash(&mut h);
            r.min_port.hash(&mut h);
            r.max_port.hash(&mut h);
        }
        let v = h.finish();
        (v ^ (v >> 32)) as u32
    }

    /// Removes a connection and counts it out (once).
    fn remove(&self, c: &Arc<Conn>) {
        if self.table.remove(c) {
            self.count_out(c);
        }
    }

    fn count_out(&self, c: &Conn) {
        let _ = self
            .n_conns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        self.limits.release(c.key.zone);
        self.ctr.removed.fetch_add(1, Ordering::Relaxed);
    }

    /// Expires connections whose timeout passed. Call from a thread that
    /// is not a PMD, every 100 ms – 1 s. Each call visits a slice of the
    /// shards (all of them within 16 calls) so that one call's work stays
    /// bounded. Returns the number of connections removed.
    pub fn sweep(&self, now_ms: u64) -> usize {
        self.last_sweep.store(now_ms, Ordering::Relaxed);
        let n = self.table.n_shards();
        let step = n.div_ceil(16).max(1);
        let from = self.sweep_next.load(Ordering::Relaxed) % n.max(1);
        let to = (from + step).min(n);
        self.sweep_next
            .store(if to >= n { 0 } else { to }, Ordering::Relaxed);
        let mut removed = 0;
        for c in self.table.expired_in(from, to, now_ms) {
            if self.table.remove(&c) {
                self.count_out(&c);
                removed += 1;
            }
        }
        removed
    }

    /// Expires every connection whose timeout passed, in all shards.
    pub fn sweep_all(&self, now_ms: u64) -> usize {
        self.last_sweep.store(now_ms, Ordering::Relaxed);
        let mut removed = 0;
        for c in self.table.expired_in(0, self.table.n_shards(), now_ms) {
            if self.table.remove(&c) {
                self.count_out(&c);
                removed += 1;
            }
        }
        removed
    }

    /// Deletes connections: all, those of `zone`, or (with `tuple`) those
    /// matching it (in `zone`, or in zone 0 when no zone is given, as
    /// `dpctl/flush-conntrack` does).
    pub fn flush(&self, zone: Option<u16>, tuple: Option<&FlushTuple>) {
        let zone = match (zone, tuple) {
            (None, Some(_)) => Some(0),
            (z, _) => z,
        };
        for c in self.table.all() {
            if zone.is_some_and(|z| z != c.key.zone) {
                continue;
            }
            if let Some(t) = tuple {
                if t.proto.is_some_and(|p| p != c.key.proto)
                    || !side_matches(&tuple_of(&c.key), &t.orig)
                    || !side_matches(&tuple_of(&c.rev_key), &t.reply)
                {
                    continue;
                }
            }
            self.remove(&c);
        }
    }

    /// The live connections (all zones, or one), for
    /// `dpctl/dump-conntrack`, sorted by zone then original tuple.
    pub fn dump_at(&self, zone: Option<u16>, now_ms: u64) -> Vec<ConnEntry> {
        let mut v: Vec<ConnEntry> = self
            .table
            .all()
            .iter()
            .filter(|c| !c.expired(now_ms) && zone.is_none_or(|z| z == c.key.zone))
            .map(|c| self.entry(c, now_ms))
            .collect();
        v.sort_by_key(|e| (e.zone, format::sort_key(&e.orig)));
        v
    }

    /// [`Conntrack::dump_at`] at the time of the last sweep (the tracker
    /// reads no clock; the sweeping thread's calls tell it the time).
    pub fn dump(&self, zone: Option<u16>) -> Vec<ConnEntry> {
        self.dump_at(zone, self.last_sweep.load(Ordering::Relaxed))
    }

    fn entry(&self, c: &Conn, now: u64) -> ConnEntry {
        let s = *c.lock();
        let tcp = match s.l4 {
            L4::Tcp(t) => {
                let (wo, wr) = t.wscales();
                let (fo, fr) = t.flags();
                Some(TcpInfo {
                    state_orig: t.peer[0].state,
                    state_reply: t.peer[1].state,
                    wscale_orig: wo,
                    wscale_reply: wr,
                    flags_orig: fo,
                    flags_reply: fr,
                })
            }
            _ => None,
        };
        let exp = c.expiration.load(Ordering::Relaxed);
        ConnEntry {
            orig: tuple_of(&c.key),
            reply: tuple_of(&c.rev_key),
            zone: c.key.zone,
            mark: s.mark,
            label: s.label,
            timeout: u32::try_from(exp.saturating_sub(now) / 1000).unwrap_or(u32::MAX),
            tcp,
            helper: c.alg,
            parent: c.parent.as_deref().map(tuple_of),
        }
    }

    /// Looks a tuple up as a packet would: the live connection owning it
    /// and whether `key` is its reply tuple (`dpctl/ct-get`-like; for
    /// tests and tools, not the packet path).
    pub fn find(&self, key: &ConnKey, now_ms: u64) -> Option<(ConnEntry, bool)> {
        self.table
            .lookup(key, now_ms)
            .map(|(c, reply)| (self.entry(&c, now_ms), reply))
    }

    /// The lookup key of a dumped tuple in `zone` (the inverse of what
    /// [`Conntrack::dump`] prints).
    pub fn key_of(t: &Tuple, zone: u16) -> ConnKey {
        let mut k = ConnKey {
            proto: t.proto,
            zone,
            ..ConnKey::default()
        };
        let put = |a: &IpAddr, out: &mut [u8; 16]| match a {
            IpAddr::V4(v4) => {
                let o = v4.octets();
                out[0] = o[0];
                out[1] = o[1];
                out[2] = o[2];
                out[3] = o[3];
            }
            IpAddr::V6(v6) => *out = v6.octets(),
        };
        k.v6 = matches!(t.src, IpAddr::V6(_));
        put(&t.src, &mut k.src.addr);
        put(&t.dst, &mut k.dst.addr);
        if k.is_icmp() {
            k.src.port = t.icmp_id;
            k.dst.port = t.icmp_id;
            k.src.icmp_type = t.icmp_type;
            k.src.icmp_code = t.icmp_code;
            k.dst.icmp_type = if k.v6 {
                crate::key::reverse_icmp6_type(t.icmp_type)
            } else {
                crate::key::reverse_icmp_type(t.icmp_type)
            };
        } else {
            k.src.port = t.src_port;
            k.dst.port = t.dst_port;
        }
        k
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            n_conns: self.n_conns(),
            max_conns: self.max_conns(),
            committed: r(&self.ctr.committed),
            removed: r(&self.ctr.removed),
            full: r(&self.ctr.full),
            zone_limited: r(&self.ctr.zone_limited),
            nat_exhausted: r(&self.ctr.nat_exhausted),
            unparsable: r(&self.ctr.unparsable),
            invalid: r(&self.ctr.invalid),
        }
    }

    /// Connections in the table.
    pub fn n_conns(&self) -> u32 {
        self.n_conns.load(Ordering::Relaxed)
    }

    /// Sets the maximum number of connections (`dpctl/ct-set-maxconns`).
    pub fn set_max_conns(&self, n: u32) {
        self.max_conns.store(n, Ordering::Relaxed);
    }

    /// The maximum number of connections.
    pub fn max_conns(&self) -> u32 {
        self.max_conns.load(Ordering::Relaxed)
    }

    /// Turns TCP sequence checking on or off.
    pub fn set_tcp_seq_check(&self, on: bool) {
        self.seq_check.store(on, Ordering::Relaxed);
    }

    /// Whether TCP sequence checking is on.
    pub fn tcp_seq_check(&self) -> bool {
        self.seq_check.load(Ordering::Relaxed)
    }

    /// Sets zone `zone`'s own connection limit (0 = unlimited).
    pub fn set_zone_limit(&self, zone: u16, limit: u32) {
        self.limits.set(zone, limit);
    }

    /// Removes zone `zone`'s own limit (the default applies again).
    pub fn del_zone_limit(&self, zone: u16) {
        self.limits.del(zone);
    }

    /// Sets the default zone limit (0 = unlimited).
    pub fn set_default_limit(&self, limit: u32) {
        self.limits.set_default(limit);
    }

    /// The default zone limit.
    pub fn default_limit(&self) -> u32 {
        self.limits.default_limit()
    }

    /// `(zone, limit, count)` of every zone with its own limit.
    pub fn zone_limits(&self) -> Vec<(u16, u32, u32)> {
        self.limits.list()
    }

    /// `(zone, limit in force, count)` for the zones asked about, as
    /// `dpctl/ct-get-limits zone=...` reports them.
    pub fn zone_limits_of(&self, zones: &[u16]) -> Vec<(u16, u32, u32)> {
        zones
            .iter()
            .map(|&z| (z, self.limits.effective(z), self.limits.count(z)))
            .collect()
    }

    /// Estimated bytes per connection: the record, its `Arc`, its two
    /// index entries (with the hash map's control bytes) and its slab slot.
    pub fn bytes_per_conn() -> usize {
        std::mem::size_of::<Conn>()
            + 2 * std::mem::size_of::<usize>()
            + 2 * (crate::table::INDEX_ENTRY_BYTES + 1)
            + crate::table::SLOT_BYTES
    }

    /// The TCP states of the connections, for `ct-stats-show -m`.
    pub fn tcp_state_name(state: u8) -> &'static str {
        tcp::STATE_NAMES
            .get(usize::from(state))
            .copied()
            .unwrap_or("[unknown]")
    }
}

use crate::format;

#[cfg(test)]
#[path = "tracker_tests.rs"]
mod tests;
