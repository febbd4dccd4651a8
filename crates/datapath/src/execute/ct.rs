//! The `ct` datapath action: the packet through the connection tracker.
//!
//! The tracker (`flowpath_conntrack::Conntrack`) is shared by the workers
//! of a switch (given with [`Executor::set_conntrack`]); a worker that was
//! given none makes its own on the first `ct` (a `flowpath run` or bench
//! process). The action's arguments become the tracker's ([`args`]: a few
//! copies, no allocation); the packet's [`CtMeta`] is updated in place and
//! goes with the packet through `recirc`, whose next pass puts it in the
//! key ([`put_in_key`]).
//!
//! Difference from OVS: transport checksums are not verified (a packet
//! with a bad one is tracked as any other; OVS makes it `+inv`), because
//! frames of ports with checksum offload reach the datapath with partial
//! checksums and no flag saying so.

use super::{Executor, PacketMeta, NONE};
use crate::packet::PacketBuf;
use flowpath_conntrack::ipf::{Ipf, IpfResult};
use flowpath_conntrack::{Alg, CtArgs, CtMeta, NatKind, NatRange, NatSpec};
use flowpath_flow::FlowKey;
use flowpath_odp::{CtAction, CtHelper, CtNat};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// An untracked packet's metadata.
pub(crate) const UNTRACKED: CtMeta = CtMeta {
    state: 0,
    zone: 0,
    mark: 0,
    label: 0,
    orig: None,
    conn: 0,
};

/// An executor's tracker and fragment reassembler (none until given or
/// first needed).
#[derive(Clone, Default)]
pub(crate) struct Tracker(
    pub(crate) Option<Arc<flowpath_conntrack::Conntrack>>,
    pub(crate) Option<Arc<Ipf>>,
);

/// What a `ct` did with a packet.
pub(super) enum CtOutcome {
    /// Tracked: the rest of the actions run on it.
    Done,
    /// A fragment the reassembler holds: nothing more runs on it now.
    Held,
    /// The last fragment of a datagram: the datagram was tracked; the
    /// rest of the actions run on each of its fragments (these, in order),
    /// with the datagram's tracking state.
    Fragments(Vec<Vec<u8>>),
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(t) => write!(f, "Tracker({} connections)", t.n_conns()),
            None => f.write_str("Tracker(none)"),
        }
    }
}

fn addr(v6: bool, a: u128) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        IpAddr::V4(Ipv4Addr::from(a as u32))
    }
}

fn nat_spec(n: &CtNat) -> NatSpec {
    NatSpec {
        kind: match n.kind {
            flowpath_odp::NatKind::Existing => None,
            flowpath_odp::NatKind::Src => Some(NatKind::Src),
            flowpath_odp::NatKind::Dst => Some(NatKind::Dst),
        },
        range: n.has_addr.then(|| NatRange {
            min_addr: addr(n.v6, n.addr_min),
            max_addr: addr(
                n.v6,
                if n.addr_max == 0 {
                    n.addr_min
                } else {
                    n.addr_max
                },
            ),
            min_port: n.port_min,
            max_port: if n.port_max == 0 {
                n.port_min
            } else {
                n.port_max
            },
        }),
        persistent: n.persistent,
        hash: n.hash,
        random: n.random,
    }
}

/// The tracker's arguments for a datapath `ct(...)`.
pub(crate) fn args(ct: &CtAction) -> CtArgs {
    CtArgs {
        zone: ct.zone,
        commit: ct.commit || ct.force,
        force: ct.force,
        set_mark: ct.mark,
        set_label: ct.label,
        nat: ct.nat.as_ref().map(nat_spec),
        helper: match ct.helper {
            CtHelper::None => None,
            CtHelper::Ftp => Some(Alg::Ftp),
            CtHelper::Tftp => Some(Alg::Tftp),
        },
    }
}

/// Writes a recirculated packet's connection-tracking metadata into its
/// key (the `ct_*` fields its next pass is classified on).
#[inline]
pub fn put_in_key(md: &CtMeta, k: &mut FlowKey) {
    if md.state == 0 {
        return;
    }
    k.set_ct_state(md.state);
    k.set_ct_zone(md.zone);
    k.set_ct_mark(md.mark);
    k.set_ct_label(md.label);
    if let Some(o) = &md.orig {
        k.set_ct_nw_proto(o.proto);
        k.set_ct_tp_src(o.src_port);
        k.set_ct_tp_dst(o.dst_port);
        if o.v6 {
            k.set_ct_ipv6_src(u128::from_be_bytes(o.src));
            k.set_ct_ipv6_dst(u128::from_be_bytes(o.dst));
        } else {
            let v4 = |b: &[u8; 16]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            k.set_ct_nw_src(v4(&o.src));
            k.set_ct_nw_dst(v4(&o.dst));
        }
    }
}

/// A TCP/UDP packet's pseudo-header addresses and partial checksum field
/// (see [`super::PacketMeta::csum_partial`]) before NAT.
struct PartialSum {
    /// The addresses as they were (`n` bytes, from `addr_at` in the frame).
    addrs: [u8; 32],
    n: usize,
    addr_at: usize,
    /// The checksum field's offset in the frame, and its value.
    field_at: usize,
    field: u16,
}

impl PartialSum {
    fn take(d: &[u8], meta: &PacketMeta) -> Option<PartialSum> {
        if meta.l3 == NONE || meta.l4 == NONE {
            return None;
        }
        let (l3, l4) = (usize::from(meta.l3), usize::from(meta.l4));
        let field_at = l4
            + match meta.nw_proto {
                flowpath_wire::ip_proto::TCP => 16,
                flowpath_wire::ip_proto::UDP => 6,
                _ => return None,
            };
        let (addr_at, n) = match d.get(l3)? >> 4 {
            4 => (l3 + 12, 8),
            6 => (l3 + 8, 32),
            _ => return None,
        };
        let mut addrs = [0u8; 32];
        addrs[..n].copy_from_slice(d.get(addr_at..addr_at + n)?);
        let f = d.get(field_at..field_at + 2)?;
        Some(PartialSum {
            addrs,
            n,
            addr_at,
            field_at,
            field: u16::from_be_bytes([f[0], f[1]]),
        })
    }

    /// Writes the field back as the pseudo-header's sum over the
    /// addresses the packet has now (ports are not in it).
    fn put(&self, d: &mut [u8]) {
        let mut now = [0u8; 32];
        match d.get(self.addr_at..self.addr_at + self.n) {
            Some(a) => now[..self.n].copy_from_slice(a),
            None => return,
        }
        let sum =
            super::rewrite::partial_sum_replace(self.field, &self.addrs[..self.n], &now[..self.n]);
        if let Some(f) = d.get_mut(self.field_at..self.field_at + 2) {
            f.copy_from_slice(&sum.to_be_bytes());
        }
    }
}

impl Executor {
    /// Shares `ct` as the tracker of this worker's `ct` actions.
    pub fn set_conntrack(&mut self, ct: Option<Arc<flowpath_conntrack::Conntrack>>) {
        self.conntrack.0 = ct;
    }

    /// Shares `ipf` as the reassembler of fragments this worker's `ct`
    /// actions see (made on first need when none was given).
    pub fn set_ipf(&mut self, ipf: Option<Arc<Ipf>>) {
        self.conntrack.1 = ipf;
    }

    /// The tracker (made now if none was given).
    pub fn conntrack_handle(&mut self) -> Arc<flowpath_conntrack::Conntrack> {
        self.conntrack.1.get_or_insert_with(|| Arc::new(Ipf::new()));
        self.conntrack
            .0
            .get_or_insert_with(|| {
                Arc::new(flowpath_conntrack::Conntrack::new(
                    flowpath_conntrack::Config::default(),
                ))
            })
            .clone()
    }

    /// Starts loading the connection-table bucket of a packet about to run
    /// `ct` in `zone` (see `flowpath_conntrack::Conntrack::prefetch`);
    /// returns its tuple's hash for [`Executor::ct_prefetch_conn`] (0:
    /// nothing to load, or no tracker yet).
    #[inline]
    pub fn ct_prefetch(
        &self,
        frame: &[u8],
        l3: usize,
        dl_type: u16,
        zone: u16,
        g: &flowpath_conntrack::TableGuard,
    ) -> u64 {
        self.conntrack
            .0
            .as_deref()
            .map_or(0, |t| t.prefetch(frame, l3, dl_type, zone, g))
    }

    /// Keeps `h` (what [`Executor::ct_prefetch`] returned for the packet in
    /// batch slot `slot`) for that packet's first `ct`, if the packet is
    /// unchanged by then; [`Executor::execute`] drops it when it is done
    /// with the packet.
    #[inline]
    pub fn set_ct_hint(&mut self, slot: usize, h: u64) {
        if let Some(x) = self.ct_hints.get_mut(slot) {
            *x = h;
        }
    }

    /// Starts loading the connection of a packet [`Executor::ct_prefetch`]
    /// returned hash `h` for.
    #[inline]
    pub fn ct_prefetch_conn(&self, h: u64, g: &flowpath_conntrack::TableGuard) {
        if let Some(t) = self.conntrack.0.as_deref() {
            t.prefetch_conn(h, g);
        }
    }

    /// Sets the time the tracker sees for the packets run next.
    pub fn set_now(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }

    /// Runs `ct` on the packet (see the module documentation). A fragment
    /// goes to the reassembler first, as OVS's `ipf`: held until its
    /// datagram is whole, then the datagram is tracked and its fragments
    /// go on with the datagram's state ([`CtOutcome::Fragments`]).
    pub(super) fn conntrack(
        &mut self,
        pkt: &mut PacketBuf,
        meta: &mut PacketMeta,
        key: &FlowKey,
        ct: &CtAction,
        hint: u64,
    ) -> CtOutcome {
        let now = self.now_ms;
        if self.conntrack.0.is_none() {
            self.conntrack_handle();
        }
        let a = args(ct);
        let l3 = if meta.l3 == NONE {
            usize::MAX
        } else {
            usize::from(meta.l3)
        };
        self.stats.conntracked += 1;
        if key.nw_frag() & flowpath_flow::key::FRAG_ANY != 0 && l3 != usize::MAX {
            if let Some(o) = self.ct_fragment(pkt, meta, key, ct.zone, &a, l3) {
                return o;
            }
        }
        let Some(tracker) = self.conntrack.0.as_ref() else {
            return CtOutcome::Done;
        };
        // A partial checksum (left to offload) is the pseudo-header's sum,
        // which NAT's checksum patches would treat as a checksum: kept
        // apart, and patched as a sum after.
        let partial = (meta.csum_partial && ct.nat.is_some())
            .then(|| PartialSum::take(pkt.data(), meta))
            .flatten();
        // Checksums are not verified: frames from ports with checksum
        // offload carry partial transport checksums the datapath does not
        // see flagged (OVS trusts its packets' offload flags instead).
        tracker.execute_hinted(
            pkt.data_mut(),
            l3,
            key.dl_type(),
            true,
            &a,
            &mut meta.ct,
            now,
            hint,
        );
        if let Some(p) = partial {
            p.put(pkt.data_mut());
        }
        CtOutcome::Done
    }

    /// A fragment through the reassembler (see [`Executor::conntrack`]):
    /// `None` when it is to be tracked as it is.
    #[cold]
    #[inline(never)]
    fn ct_fragment(
        &mut self,
        pkt: &PacketBuf,
        meta: &mut PacketMeta,
        key: &FlowKey,
        zone: u16,
        a: &CtArgs,
        l3: usize,
    ) -> Option<CtOutcome> {
        let now = self.now_ms;
        let tracker = self.conntrack.0.clone()?;
        let ipf = self
            .conntrack
            .1
            .get_or_insert_with(|| Arc::new(Ipf::new()))
            .clone();
        match ipf.reassemble(
            pkt.data(),
            l3,
            key.dl_type(),
            zone,
            key.recirc_id(),
            true,
            now,
        ) {
            IpfResult::NotFragment | IpfResult::PassThrough => None,
            IpfResult::Held => {
                self.stats.ipf_held += 1;
                Some(CtOutcome::Held)
            }
            IpfResult::Invalid => {
                meta.ct = CtMeta {
                    state: flowpath_conntrack::state::TRK | flowpath_conntrack::state::INV,
                    zone,
                    ..UNTRACKED
                };
                Some(CtOutcome::Done)
            }
            IpfResult::Reassembled {
                mut packet,
                fragments,
            } => {
                tracker.execute(&mut packet, l3, key.dl_type(), true, a, &mut meta.ct, now);
                // (The fragments keep their own headers: NAT of
                // fragmented datagrams is not carried into them.)
                meta.ct.conn = 0;
                Some(CtOutcome::Fragments(fragments))
            }
        }
    }
}
