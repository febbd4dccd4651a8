//! The tracker's management side: sweeping, flushing, dumping, limits
//! and counters — what `dpctl/*` commands and the sweeping thread call.
//!
//! Split from the packet path (`tracker.rs`) to keep each file readable;
//! it is the same `impl Conntrack`. Nothing here runs per packet; these
//! methods may allocate (dumps, flush lists).
//!
//! Thread-safety: every method takes `&self` and may run while PMD
//! threads process packets.

use super::*;
use crate::format;

impl Conntrack {
    /// Expires connections whose timeout passed. Call from a thread that
    /// is not a PMD, every 100 ms – 1 s. Each call resumes where the last
    /// one stopped and visits the slots a sweep unit at a time until it
    /// has looked at max(max_conns / 64, 4096) connection slots (Open
    /// vSwitch's clean-up budget) or at every unit, so one call's work
    /// stays bounded while a lightly loaded table is swept completely.
    /// Returns the number of connections removed.
    pub fn sweep(&self, now_ms: u64) -> usize {
        self.last_sweep.store(now_ms, Ordering::Relaxed);
        let n = self.table.sweep_units();
        let budget = (self.max_conns() as usize / 64).max(4096);
        let start = self.sweep_next.load(Ordering::Relaxed) % n;
        let mut visited = 0;
        let g = crate::table::pin();
        let mut expired = Vec::new();
        let mut i = start;
        loop {
            visited += self.table.expired_in_unit(i, now_ms, &mut expired, &g);
            i = (i + 1) % n;
            if i == start || visited >= budget {
                break;
            }
        }
        self.sweep_next.store(i, Ordering::Relaxed);
        let mut removed = 0;
        for c in expired {
            if self.table.remove(c) {
                self.count_out(c);
                removed += 1;
            }
        }
        removed
    }

    /// Expires every connection whose timeout passed, in all shards.
    pub fn sweep_all(&self, now_ms: u64) -> usize {
        self.last_sweep.store(now_ms, Ordering::Relaxed);
        let mut removed = 0;
        let g = crate::table::pin();
        for c in self.table.expired(now_ms, &g) {
            if self.table.remove(c) {
                self.count_out(c);
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
        let g = crate::table::pin();
        for c in self.table.all(&g) {
            if zone.is_some_and(|z| z != c.key.zone) {
                continue;
            }
            if let Some(t) = tuple {
                if t.proto.is_some_and(|p| p != c.key.proto)
                    || !side_matches(&tuple_of(&c.key), &t.orig)
                    || !side_matches(&tuple_of(&c.rev_key()), &t.reply)
                {
                    continue;
                }
            }
            self.remove(c);
        }
    }

    /// The live connections (all zones, or one), for
    /// `dpctl/dump-conntrack`, sorted by zone then original tuple.
    pub fn dump_at(&self, zone: Option<u16>, now_ms: u64) -> Vec<ConnEntry> {
        let g = crate::table::pin();
        let mut v: Vec<ConnEntry> = self
            .table
            .all(&g)
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
            reply: tuple_of(&c.rev_key()),
            zone: c.key.zone,
            mark: s.mark,
            label: s.label(),
            timeout: u32::try_from(exp.saturating_sub(now) / 1000).unwrap_or(u32::MAX),
            tcp,
            helper: c.alg,
            parent: c.parent().map(tuple_of),
        }
    }

    /// Looks a tuple up as a packet would: the live connection owning it
    /// and whether `key` is its reply tuple (`dpctl/ct-get`-like; for
    /// tests and tools, not the packet path).
    pub fn find(&self, key: &ConnKey, now_ms: u64) -> Option<(ConnEntry, bool)> {
        let g = table::pin();
        self.table
            .lookup(key, now_ms, &g)
            .map(|(c, reply)| (self.entry(c, now_ms), reply))
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

    /// Sets timeout attribute `name` (`tcp_established`, `udp_first`,
    /// ... as OVS's timeout policies name them) to `secs` seconds; it
    /// applies from each connection's next packet.
    pub fn set_timeout(&self, name: &str, secs: u32) -> Result<(), String> {
        self.timeouts.set(name, secs)
    }

    /// The timeouts in force.
    pub fn timeouts(&self) -> crate::timeouts::Timeouts {
        self.timeouts.get()
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

    /// Estimated bytes per connection without NAT: its slot and its index
    /// entry (an index is between three eighths and three quarters full:
    /// counted at half). NAT adds a second entry and the reply tuple's
    /// small allocation.
    pub fn bytes_per_conn() -> usize {
        crate::table::SLOT_BYTES + 2 * crate::table::INDEX_ENTRY_BYTES
    }

    /// The TCP states of the connections, for `ct-stats-show -m`.
    pub fn tcp_state_name(state: u8) -> &'static str {
        tcp::STATE_NAMES
            .get(usize::from(state))
            .copied()
            .unwrap_or("[unknown]")
    }
}
