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

use crate::alg;
use crate::key::{extract_into, ConnKey, Parsed, ETH_TYPE_IPV4};
use crate::limits::ZoneLimits;
use crate::nat::{self, Layout};
use crate::proto::{valid_new, UpdateRes, L4};
use crate::table::{self, handle_split, handle_with_dir, Conn, Table, TableGuard, WriteGuard};
use crate::{
    state, tcp, Alg, Config, ConnEntry, CtArgs, CtMeta, FlushTuple, OrigTuple, Stats, TcpInfo,
    Tuple, TupleMatch,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

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
    table: Table,
    limits: ZoneLimits,
    /// The timeouts in force (changeable at run time).
    timeouts: crate::timeouts::LiveTimeouts,
    n_conns: AtomicU32,
    max_conns: AtomicU32,
    seq_check: AtomicBool,
    exps: alg::Expectations,
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
            table,
            limits: ZoneLimits::new(),
            timeouts: crate::timeouts::LiveTimeouts::new(cfg.timeouts),
            n_conns: AtomicU32::new(0),
            max_conns: AtomicU32::new(cfg.max_conns),
            seq_check: AtomicBool::new(cfg.tcp_seq_check),
            exps: alg::Expectations::new(),
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
        self.execute_hinted(frame, l3, dl_type, csum_ok, args, md, now_ms, 0);
    }

    /// [`Conntrack::execute`] with `hint`, the hash [`Conntrack::prefetch`]
    /// returned for this very frame in this zone (0: none). The caller
    /// vouches that the frame has not changed since; the lookup then skips
    /// hashing the tuple.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn execute_hinted(
        &self,
        frame: &mut [u8],
        l3: usize,
        dl_type: u16,
        csum_ok: bool,
        args: &CtArgs,
        md: &mut CtMeta,
        now_ms: u64,
        hint: u64,
    ) {
        let zone = args.zone;
        let g = table::pin();
        if md.conn != 0 && !args.force && args.helper.is_none() {
            if let Some(conn) = self.table.by_handle(md.conn, &g) {
                if conn.key.zone == zone && conn.alg.is_none() && !conn.expired(now_ms) {
                    self.process_fast(frame, l3, dl_type, args, md, conn);
                    return;
                }
            }
        }
        let mut pkt = Pkt {
            frame,
            parsed: Parsed::default(),
            l3,
        };
        if !extract_into(pkt.frame, l3, dl_type, zone, csum_ok, &mut pkt.parsed) {
            self.ctr.unparsable.fetch_add(1, Ordering::Relaxed);
            self.ctr.invalid.fetch_add(1, Ordering::Relaxed);
            md.state = state::INV | state::TRK;
            md.zone = zone;
            md.mark = 0;
            md.label = 0;
            md.orig = None;
            md.conn = 0;
            return;
        }
        self.process(&mut pkt, args, md, now_ms, hint, &g);
        if md.state & state::INV != 0 {
            self.ctr.invalid.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Starts loading what [`Conntrack::execute`] will read first for this
    /// packet in `zone` (an IPv4 TCP or UDP packet; others are left
    /// alone): the index bucket of its tuple. Returns the tuple's
    /// hash for [`Conntrack::prefetch_conn`] (0 for a packet the tracker
    /// cannot parse: nothing to load). For a batch: call this for every
    /// packet, then `prefetch_conn` for every packet, then `execute`, so
    /// the cache misses of a large table overlap. A hint only: nothing
    /// changes, and a wrong guess costs a load.
    #[inline]
    pub fn prefetch(
        &self,
        frame: &[u8],
        l3: usize,
        dl_type: u16,
        zone: u16,
        g: &TableGuard,
    ) -> u64 {
        // (Not `extract`: building the key and hashing it at once stalls
        // on the key's narrow stores; the words come straight from the
        // frame. Other packets are not prefetched.)
        match crate::key::quick_words_v4(frame, l3, dl_type, zone) {
            Some(w) => {
                let h = self.table.hash_words(&w);
                self.table.prefetch(h, g);
                h
            }
            None => 0,
        }
    }

    /// Starts loading the connection a [`Conntrack::prefetch`]ed tuple
    /// (hash `h`) points to, once its bucket is (being) loaded.
    #[inline]
    pub fn prefetch_conn(&self, h: u64, g: &TableGuard) {
        if h != 0 {
            self.table.prefetch_conn(h, g);
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
        conn: &Conn,
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
            (s.mark, s.label())
        };
        md.mark = mark;
        md.label = label;
        self.set_mark_label(args, md, conn);
    }

    fn process(
        &self,
        pkt: &mut Pkt<'_>,
        args: &CtArgs,
        md: &mut CtMeta,
        now: u64,
        hint: u64,
        g: &TableGuard,
    ) {
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
        // (The packet's key is read in place for the lookup: a copy of it
        // right after it was built would stall on its narrow stores.)
        let mut natted_key: Option<ConnKey> = None;
        let mut reply = false;
        let mut conn: Option<&Conn> = None;

        if natted {
            if let Some((c, r)) = self.table.lookup(&pkt.parsed.key.reverse(), now, g) {
                reply = !r;
                natted_key = Some(if reply { c.rev_key() } else { c.key });
                conn = Some(c);
            }
        } else if let Some((c, r)) = {
            let key = &pkt.parsed.key;
            debug_assert!(hint == 0 || hint == self.table.hash(key), "stale hint");
            let h = if hint != 0 {
                hint
            } else {
                self.table.hash(key)
            };
            self.table.lookup_hashed(key, h, now, g)
        } {
            reply = r;
            conn = Some(c);
        }

        if args.force && reply {
            if let Some(c) = conn.take() {
                self.remove(c);
            }
            reply = false;
        }

        let mut create = false;
        // Whether `md`'s mark and label were read with the state update.
        let mut marked = false;
        if let Some(c) = conn {
            create = self.update_state(pkt, md, c, reply, related, now);
            marked = !create && !related;
            if !create && args.nat.is_some() {
                self.handle_nat(pkt, md, c, zone, reply, related);
            }
        } else if let Some(c) = self.by_orig_tuple(md, &pkt.parsed.key, args, now, g) {
            create = self.update_state(pkt, md, c, false, related, now);
            conn = Some(c);
        } else if related {
            md.state = state::INV;
        } else {
            create = true;
        }

        let key = natted_key.unwrap_or(pkt.parsed.key);
        let mut expected = None;
        if create {
            expected = self.exps.find(&key);
            let mut w = self.table.insert_guard();
            conn = if self.table.lookup(&key, now, g).is_some() {
                // Another thread created it meanwhile: the verdict stands,
                // but hand out no handle to the replaced connection.
                None
            } else {
                self.not_found(&mut w, pkt, md, &key, args, expected.as_ref(), now, g)
            };
        }

        // The metadata.
        md.state |= state::TRK;
        md.zone = zone;
        match &conn {
            Some(c) => {
                if !marked {
                    let s = c.lock();
                    md.mark = s.mark;
                    md.label = s.label();
                }
                md.orig = Some(orig_tuple(c.parent().unwrap_or(&c.key)));
            }
            None => match &expected {
                Some(e) => {
                    md.mark = e.mark;
                    md.label = e.label;
                    md.orig = Some(orig_tuple(&e.parent));
                }
                None => {
                    md.mark = 0;
                    md.label = 0;
                    md.orig = Some(orig_tuple(&key));
                }
            },
        }
        md.conn = 0;
        if let Some(c) = &conn {
            self.set_mark_label(args, md, c);
            if !related {
                self.alg_ctl(pkt, md, c);
            }
            if args.nat.is_none() {
                md.conn = handle_with_dir(c.handle(), reply, related);
            }
        }
    }

    /// A helper connection's control packet: expectations for the data
    /// connections it announces.
    fn alg_ctl(&self, pkt: &Pkt<'_>, md: &mut CtMeta, c: &Conn) {
        let Some(alg) = c.alg else {
            return;
        };
        if alg::ctl_type(&pkt.parsed.key) != Some(alg) {
            return;
        }
        let reply = md.state & state::RPL != 0;
        let (mark, label) = {
            let s = c.lock();
            (s.mark, s.label())
        };
        let exp = alg::Expectation {
            parent: c.key,
            mark,
            label,
        };
        match alg {
            Alg::Tftp => {
                let k = alg::data_key(&c.key, &c.rev_key(), reply, c.key.src.port);
                self.exps.expect(k, exp);
            }
            Alg::Ftp => {
                let l4 = pkt.l4();
                let hl = usize::from(l4.get(12).copied().unwrap_or(0) >> 4) * 4;
                let payload = l4.get(hl..).unwrap_or(&[]);
                match alg::parse_ftp(payload, c.key.v6) {
                    alg::FtpMsg::Other => {}
                    alg::FtpMsg::Invalid => md.state |= state::TRK | state::INV,
                    alg::FtpMsg::Data {
                        addr,
                        port,
                        passive,
                    } => {
                        if addr.is_some_and(|a| !alg::addr_ok(&c.key, &c.rev_key(), passive, &a)) {
                            md.state |= state::TRK | state::INV;
                            return;
                        }
                        let k = alg::data_key(&c.key, &c.rev_key(), reply, port);
                        self.exps.expect(k, exp);
                    }
                }
            }
        }
    }

    fn set_mark_label(&self, args: &CtArgs, md: &mut CtMeta, c: &Conn) {
        if args.set_mark.is_none() && args.set_label.is_none() {
            return;
        }
        let mut s = c.lock();
        if let Some((v, m)) = args.set_mark {
            if c.parent().is_some() {
                md.mark = s.mark;
            } else {
                md.mark = v | (md.mark & !m);
                s.mark = md.mark;
            }
        }
        if let Some((v, m)) = args.set_label {
            if c.parent().is_some() {
                md.label = s.label();
            } else {
                md.label = v | (md.label & !m);
                s.set_label(md.label);
            }
        }
    }

    /// Runs the packet through an existing connection's state machine.
    /// Returns true when the packet must start a new connection instead.
    fn update_state(
        &self,
        pkt: &Pkt<'_>,
        md: &mut CtMeta,
        c: &Conn,
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
        if c.parent().is_some() {
            md.state |= state::REL;
        }
        let seq_check = self.seq_check.load(Ordering::Relaxed);
        let (res, tc) = {
            let mut s = c.lock();
            // (The mark and label read under the same lock: the metadata
            // needs them, and a second lock per packet cost more than
            // the copy.)
            md.mark = s.mark;
            md.label = s.label();
            s.l4.update(pkt.l4(), reply, seq_check)
        };
        if let Some(tc) = tc {
            c.expiration
                .store(now.saturating_add(self.timeouts.ms(tc)), Ordering::Relaxed);
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
            (&c.rev_key(), c.nat_action)
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
    fn by_orig_tuple<'g>(
        &'g self,
        md: &CtMeta,
        k: &ConnKey,
        args: &CtArgs,
        now: u64,
        g: &'g TableGuard,
    ) -> Option<&'g Conn> {
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
        self.table.lookup(&key, now, g).map(|(c, _)| c)
    }

    /// No connection: `+new` (or `+inv`), and commit if asked. Called with
    /// the insertion lock held.
    // (The insertion lock and the pin come with the packet's state.)
    #[allow(clippy::too_many_arguments)]
    fn not_found<'g>(
        &'g self,
        w: &mut WriteGuard<'_>,
        pkt: &mut Pkt<'_>,
        md: &mut CtMeta,
        key: &ConnKey,
        args: &CtArgs,
        expected: Option<&alg::Expectation>,
        now: u64,
        g: &'g TableGuard,
    ) -> Option<&'g Conn> {
        if !valid_new(key, pkt.l4()) {
            md.state = state::INV;
            return None;
        }
        md.state = state::NEW;
        if expected.is_some() {
            md.state |= state::REL;
        }
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
        let exp = now.saturating_add(self.timeouts.ms(tc));
        let mut rev = key.reverse();
        let mut action = 0;
        if let Some(spec) = args.nat.as_ref().filter(|s| s.kind.is_some()) {
            action = nat::action_bits(spec);
            let hash = nat::choice_hash(key, spec);
            let mut rng = self.rng.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) | 1;
            let table = &self.table;
            let mut free = |t: &ConnKey| table.lookup(t, now, g).is_none();
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
        // The helper sticks when the ports agree with it (or name no ALG).
        c.alg = args
            .helper
            .filter(|h| alg::ctl_type(key).is_none_or(|t| t == *h));
        if let Some(e) = expected {
            c.set_parent(e.parent);
            let s = c.state.get_mut().unwrap_or_else(|e| e.into_inner());
            s.mark = e.mark;
            s.set_label(e.label);
        }
        let mut evicted = Vec::new();
        let inserted = self.table.insert(w, c, now, &mut evicted, g);
        for old in evicted {
            self.count_out(old);
        }
        match inserted {
            Ok(arc) => {
                self.n_conns.fetch_add(1, Ordering::Relaxed);
                self.ctr.committed.fetch_add(1, Ordering::Relaxed);
                if action != 0 {
                    let lay = pkt.layout();
                    Self::nat_one(pkt.frame, &lay, arc, false, pkt.parsed.related, md);
                }
                Some(arc)
            }
            Err(_) => {
                self.limits.release(key.zone);
                None
            }
        }
    }

    /// Removes a connection and counts it out (once).
    fn remove(&self, c: &Conn) {
        if self.table.remove(c) {
            self.count_out(c);
        }
    }

    fn count_out(&self, c: &Conn) {
        if c.alg.is_some() {
            self.exps.clean(&c.key);
        }
        let _ = self
            .n_conns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        self.limits.release(c.key.zone);
        self.ctr.removed.fetch_add(1, Ordering::Relaxed);
    }
}

#[path = "admin.rs"]
mod admin;

#[cfg(test)]
#[path = "tracker_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "tracker_tests_shared.rs"]
mod tests_shared;
