//! IP fragment reassembly for the tracker (Open vSwitch's `ipf`).
//!
//! What: the tracker cannot track a fragment (only the first one has
//! ports), so before `ct` the datapath hands IPv4/IPv6 fragments to
//! [`Ipf::reassemble`]. Fragments are held, per original packet (source,
//! destination, identification, protocol, zone, recirculation id), until
//! the first and the last arrived and nothing is missing; then the whole
//! packet is rebuilt ([`IpfResult::Reassembled`]): the datapath runs *it*
//! through `ct` and forwards the held *fragments* with the resulting
//! metadata, as Open vSwitch does. Facts kept from Open vSwitch 3.1:
//!
//! - IPv4 and IPv6 reassembly are on by default;
//! - a fragment other than the last smaller than the minimum fragment size
//!   (IPv4 1200 bytes, IPv6 1280 bytes of IP packet; settable down to 400)
//!   is refused as "too small";
//! - a fragment overlapping one already held is refused ("overlapped");
//! - at most 1000 fragments are held in all (settable up to 5000); an IPv4
//!   packet may have at most ⌈(65535 − 60) / (min size − 60)⌉ fragments;
//! - a list not completed within 15 s expires: its fragments are handed
//!   back by [`Ipf::expire`] to be sent on untracked ("expired");
//! - a reassembled packet longer than 65,535 bytes fails the list, whose
//!   later fragments pass through (and conntrack marks them invalid);
//! - `dpctl/ipf-get-status` and the fragment-list dump print as
//!   [`format_status`] and [`Ipf::dump`] do.
//!
//! Why a separate module with its own lock: fragments are rare and may
//! allocate (they are copied); the tracker's packet path stays free of it.
//!
//! Invariants: `held` equals the number of fragments in all lists; no
//! input panics (all reads are checked). Thread-safety: `Ipf` is
//! `Send + Sync`; one mutex guards the lists, counters are atomics.

use flowpath_wire::{checksum, ip_proto};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

const V4_MIN_DEFAULT: u32 = 1200;
const V6_MIN_DEFAULT: u32 = 1280;
const MIN_FRAG_LBOUND: u32 = 400;
const MAX_FRAGS_DEFAULT: u32 = 1000;
const MAX_FRAGS_UBOUND: u32 = 5000;
const LIST_TIMEOUT_MS: u64 = 15_000;
const V4_MAX_HDR: u32 = 60;
const MAX_PACKET: usize = 65_535;
const V6_MAX_LIST: usize = 65_535;

/// What [`Ipf::reassemble`] did with a packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IpfResult {
    /// Not a fragment, or reassembly is off for its family: run it through
    /// `ct` as it is.
    NotFragment,
    /// Held until the rest arrives: nothing to forward now.
    Held,
    /// Refused (malformed, too small, overlapping): the packet is
    /// `+trk+inv`, as Open vSwitch marks it.
    Invalid,
    /// Not held (fragment limit reached, list failed): run it through `ct`,
    /// which marks a fragment invalid.
    PassThrough,
    /// The packet is complete.
    Reassembled {
        /// The whole packet: the first fragment's frame up to its IP
        /// header, then the rebuilt IP packet (IPv4: no fragment flags,
        /// total length and checksum updated; IPv6: the fragment header
        /// kept as an atomic fragment, payload length updated).
        packet: Vec<u8>,
        /// The held fragments, by offset, to forward after `ct`.
        fragments: Vec<Vec<u8>>,
    },
}

/// Why a setting was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpfError {
    /// Minimum fragment size below 400.
    MinFragTooSmall,
    /// Maximum fragments above 5000.
    MaxFragsTooLarge,
}

impl std::fmt::Display for IpfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IpfError::MinFragTooSmall => f.write_str("minimum fragment size below 400"),
            IpfError::MaxFragsTooLarge => f.write_str("maximum fragments above 5000"),
        }
    }
}

impl std::error::Error for IpfError {}

/// Counters of one address family.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpfFamilyStatus {
    /// Reassembly on.
    pub enabled: bool,
    /// Minimum size of a fragment other than the last.
    pub min_frag_size: u32,
    /// Fragments held.
    pub accepted: u64,
    /// Fragments handed back with a reassembled packet.
    pub completed: u64,
    /// Fragments handed back by expiry.
    pub expired: u64,
    /// Fragments refused as too small.
    pub too_small: u64,
    /// Fragments refused as overlapping.
    pub overlapped: u64,
    /// Fragments dropped without being sent.
    pub purged: u64,
}

/// `dpctl/ipf-get-status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpfStatus {
    /// IPv4.
    pub v4: IpfFamilyStatus,
    /// IPv6.
    pub v6: IpfFamilyStatus,
    /// Most fragments held.
    pub max_frags: u32,
    /// Fragments held now.
    pub nfrag: u32,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    completed: AtomicU64,
    expired: AtomicU64,
    too_small: AtomicU64,
    overlapped: AtomicU64,
    purged: AtomicU64,
}

impl Counters {
    fn read(&self) -> [u64; 6] {
        [
            self.accepted.load(Ordering::Relaxed),
            self.completed.load(Ordering::Relaxed),
            self.expired.load(Ordering::Relaxed),
            self.too_small.load(Ordering::Relaxed),
            self.overlapped.load(Ordering::Relaxed),
            self.purged.load(Ordering::Relaxed),
        ]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ListKey {
    src: [u8; 16],
    dst: [u8; 16],
    ident: u32,
    v6: bool,
    zone: u16,
    proto: u8,
    recirc_id: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListState {
    OtherSeen,
    FirstSeen,
    LastSeen,
    FirstLastSeen,
    ReassFail,
}

impl ListState {
    fn name(self) -> &'static str {
        match self {
            ListState::OtherSeen => "other frag",
            ListState::FirstSeen => "first frag",
            ListState::LastSeen => "last frag",
            ListState::FirstLastSeen => "first/last frag",
            ListState::ReassFail => "reassemble fail",
        }
    }
}

struct Frag {
    start: usize,
    end: usize,
    /// The frame, trimmed to the end of the IP packet.
    frame: Vec<u8>,
    l3: usize,
    /// Offset of the fragment's data in `frame`.
    data: usize,
}

struct FragList {
    frags: Vec<Frag>,
    state: ListState,
    expiration: u64,
}

/// The fragment reassembler.
pub struct Ipf {
    lists: Mutex<HashMap<ListKey, FragList>>,
    v4_enabled: AtomicBool,
    v6_enabled: AtomicBool,
    min_v4: AtomicU32,
    min_v6: AtomicU32,
    max_frags: AtomicU32,
    held: AtomicU32,
    c4: Counters,
    c6: Counters,
}

impl Default for Ipf {
    fn default() -> Self {
        Ipf::new()
    }
}

/// A parsed fragment.
struct FragInfo {
    key: ListKey,
    start: usize,
    end: usize,
    first: bool,
    last: bool,
    /// End of the IP packet in the frame.
    stop: usize,
    data: usize,
}

fn be16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(at)?, *d.get(at + 1)?]))
}

enum Parse {
    NotFragment,
    Invalid,
    TooSmall,
    Frag(FragInfo),
}

impl Ipf {
    /// Reassembly on for both families, Open vSwitch's defaults.
    pub fn new() -> Ipf {
        Ipf {
            lists: Mutex::new(HashMap::new()),
            v4_enabled: AtomicBool::new(true),
            v6_enabled: AtomicBool::new(true),
            min_v4: AtomicU32::new(V4_MIN_DEFAULT),
            min_v6: AtomicU32::new(V6_MIN_DEFAULT),
            max_frags: AtomicU32::new(MAX_FRAGS_DEFAULT),
            held: AtomicU32::new(0),
            c4: Counters::default(),
            c6: Counters::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ListKey, FragList>> {
        self.lists.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn counters(&self, v6: bool) -> &Counters {
        if v6 {
            &self.c6
        } else {
            &self.c4
        }
    }

    /// Turns reassembly on or off for one family (`dpctl/ipf-set-enabled`).
    pub fn set_enabled(&self, v6: bool, on: bool) {
        if v6 {
            self.v6_enabled.store(on, Ordering::Relaxed);
        } else {
            self.v4_enabled.store(on, Ordering::Relaxed);
        }
    }

    /// Sets the minimum size of a non-last fragment (`dpctl/ipf-set-min-frag`).
    pub fn set_min_frag(&self, v6: bool, size: u32) -> Result<(), IpfError> {
        if size < MIN_FRAG_LBOUND {
            return Err(IpfError::MinFragTooSmall);
        }
        if v6 {
            self.min_v6.store(size, Ordering::Relaxed);
        } else {
            self.min_v4.store(size, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Sets the most fragments held (`dpctl/ipf-set-max-nfrags`).
    pub fn set_max_frags(&self, n: u32) -> Result<(), IpfError> {
        if n > MAX_FRAGS_UBOUND {
            return Err(IpfError::MaxFragsTooLarge);
        }
        self.max_frags.store(n, Ordering::Relaxed);
        Ok(())
    }

    fn max_v4_list(&self) -> usize {
        let min = self
            .min_v4
            .load(Ordering::Relaxed)
            .saturating_sub(V4_MAX_HDR)
            .max(1);
        (MAX_PACKET as u32 - V4_MAX_HDR).div_ceil(min) as usize
    }

    fn parse(
        &self,
        frame: &[u8],
        l3: usize,
        v6: bool,
        zone: u16,
        recirc_id: u32,
        csum_ok: bool,
    ) -> Parse {
        let Some(ip) = frame.get(l3..) else {
            return Parse::Invalid;
        };
        if !v6 {
            if ip.len() < 20 {
                return Parse::Invalid;
            }
            let (Some(flg), Some(total), Some(&vihl)) = (be16(ip, 6), be16(ip, 2), ip.first())
            else {
                return Parse::Invalid;
            };
            if flg & 0x3fff == 0 {
                return Parse::NotFragment;
            }
            let total = usize::from(total);
            let ihl = usize::from(vihl & 0x0f) * 4;
            if ihl < 20 || total < ihl || total > ip.len() {
                return Parse::Invalid;
            }
            if !csum_ok && ip.get(..ihl).is_none_or(|h| checksum::sum(h) != 0xffff) {
                return Parse::Invalid;
            }
            let last = flg & 0x2000 == 0;
            let offset = usize::from(flg & 0x1fff) * 8;
            if !last && (total as u32) < self.min_v4.load(Ordering::Relaxed) {
                return Parse::TooSmall;
            }
            if total == ihl {
                return Parse::Invalid;
            }
            let mut key = ListKey {
                src: [0; 16],
                dst: [0; 16],
                ident: u32::from(be16(ip, 4).unwrap_or(0)),
                v6: false,
                zone,
                proto: ip.get(9).copied().unwrap_or(0),
                recirc_id,
            };
            if let (Some(s), Some(d)) = (ip.get(12..16), ip.get(16..20)) {
                key.src[..4].copy_from_slice(s);
                key.dst[..4].copy_from_slice(d);
            }
            Parse::Frag(FragInfo {
                key,
                start: offset,
                end: offset + (total - ihl) - 1,
                first: offset == 0,
                last,
                stop: l3 + total,
                data: l3 + ihl,
            })
        } else {
            if ip.len() < 40 {
                return Parse::Invalid;
            }
            let Some(plen) = be16(ip, 4) else {
                return Parse::Invalid;
            };
            let total = 40 + usize::from(plen);
            if total > ip.len() {
                return Parse::Invalid;
            }
            let mut nh = ip.get(6).copied().unwrap_or(0);
            let mut off = 40;
            loop {
                match nh {
                    ip_proto::HOPOPTS | ip_proto::ROUTING | ip_proto::DSTOPTS => {
                        let Some(&l) = ip.get(off + 1) else {
                            return Parse::Invalid;
                        };
                        nh = ip.get(off).copied().unwrap_or(0);
                        off += (usize::from(l) + 1) * 8;
                    }
                    ip_proto::AH => {
                        let Some(&l) = ip.get(off + 1) else {
                            return Parse::Invalid;
                        };
                        nh = ip.get(off).copied().unwrap_or(0);
                        off += (usize::from(l) + 2) * 4;
                    }
                    ip_proto::FRAGMENT => break,
                    _ => return Parse::NotFragment,
                }
                if off > total {
                    return Parse::Invalid;
                }
            }
            if off + 8 > total {
                return Parse::Invalid;
            }
            let (Some(offlg), Some(proto)) = (be16(ip, off + 2), ip.get(off).copied()) else {
                return Parse::Invalid;
            };
            if offlg & 0xfff9 == 0 {
                return Parse::NotFragment; // atomic fragment
            }
            let last = offlg & 1 == 0;
            let offset = usize::from(offlg >> 3) * 8;
            if !last && (total as u32) < self.min_v6.load(Ordering::Relaxed) {
                return Parse::TooSmall;
            }
            let data = off + 8;
            if total == data {
                return Parse::Invalid;
            }
            let ident = match ip.get(off + 4..off + 8) {
                Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
                _ => return Parse::Invalid,
            };
            let mut key = ListKey {
                src: [0; 16],
                dst: [0; 16],
                ident,
                v6: true,
                zone,
                proto,
                recirc_id,
            };
            if let (Some(s), Some(d)) = (ip.get(8..24), ip.get(24..40)) {
                key.src.copy_from_slice(s);
                key.dst.copy_from_slice(d);
            }
            Parse::Frag(FragInfo {
                key,
                start: offset,
                end: offset + (total - data) - 1,
                first: offset == 0,
                last,
                stop: l3 + total,
                data: l3 + data,
            })
        }
    }

    /// Offers a packet to the reassembler (see [`IpfResult`]). `csum_ok`:
    /// the IPv4 header checksum is known good.
    #[allow(clippy::too_many_arguments)]
    pub fn reassemble(
        &self,
        frame: &[u8],
        l3: usize,
        dl_type: u16,
        zone: u16,
        recirc_id: u32,
        csum_ok: bool,
        now_ms: u64,
    ) -> IpfResult {
        let v6 = match dl_type {
            0x0800 => false,
            0x86dd => true,
            _ => return IpfResult::NotFragment,
        };
        let enabled = if v6 {
            &self.v6_enabled
        } else {
            &self.v4_enabled
        };
        let c = self.counters(v6);
        let info = match self.parse(frame, l3, v6, zone, recirc_id, csum_ok) {
            Parse::NotFragment => return IpfResult::NotFragment,
            _ if !enabled.load(Ordering::Relaxed) => return IpfResult::NotFragment,
            Parse::Invalid => return IpfResult::Invalid,
            Parse::TooSmall => {
                c.too_small.fetch_add(1, Ordering::Relaxed);
                return IpfResult::Invalid;
            }
            Parse::Frag(i) => i,
        };
        if self.held.load(Ordering::Relaxed) >= self.max_frags.load(Ordering::Relaxed) {
            return IpfResult::PassThrough;
        }
        let max_list = if v6 { V6_MAX_LIST } else { self.max_v4_list() };
        let mut lists = self.lock();
        let list = lists.entry(info.key).or_insert_with(|| FragList {
            frags: Vec::new(),
            state: ListState::OtherSeen,
            expiration: now_ms.saturating_add(LIST_TIMEOUT_MS),
        });
        if list.state == ListState::ReassFail || list.frags.len() >= max_list {
            return IpfResult::PassThrough;
        }
        let overlaps = list.frags.iter().any(|f| {
            (info.start >= f.start && info.start <= f.end)
                || (info.end >= f.start && info.end <= f.end)
                || (info.start < f.start && info.end > f.end)
        });
        if overlaps {
            c.overlapped.fetch_add(1, Ordering::Relaxed);
            if list.frags.is_empty() {
                lists.remove(&info.key);
            }
            return IpfResult::Invalid;
        }
        let Some(bytes) = frame.get(..info.stop) else {
            return IpfResult::Invalid;
        };
        list.frags.push(Frag {
            start: info.start,
            end: info.end,
            frame: bytes.to_vec(),
            l3,
            data: info.data,
        });
        self.held.fetch_add(1, Ordering::Relaxed);
        c.accepted.fetch_add(1, Ordering::Relaxed);
        list.state = match (list.state, info.first, info.last) {
            (ListState::FirstLastSeen, _, _) => ListState::FirstLastSeen,
            (ListState::FirstSeen, _, true) | (ListState::LastSeen, true, _) => {
                ListState::FirstLastSeen
            }
            (ListState::FirstSeen, _, _) => ListState::FirstSeen,
            (ListState::LastSeen, _, _) => ListState::LastSeen,
            (_, true, _) => ListState::FirstSeen,
            (_, _, true) => ListState::LastSeen,
            _ => ListState::OtherSeen,
        };
        if list.state != ListState::FirstLastSeen {
            return IpfResult::Held;
        }
        list.frags.sort_by_key(|f| f.start);
        let contiguous = list.frags.windows(2).all(|w| match w {
            [a, b] => a.end + 1 == b.start,
            _ => true,
        });
        if !contiguous {
            return IpfResult::Held;
        }
        match build(&list.frags, v6) {
            Some(packet) => {
                let Some(list) = lists.remove(&info.key) else {
                    return IpfResult::Held;
                };
                let n = list.frags.len();
                let _ = self
                    .held
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                        Some(h.saturating_sub(n as u32))
                    });
                c.completed.fetch_add(n as u64, Ordering::Relaxed);
                IpfResult::Reassembled {
                    packet,
                    fragments: list.frags.into_iter().map(|f| f.frame).collect(),
                }
            }
            None => {
                list.state = ListState::ReassFail;
                IpfResult::Held
            }
        }
    }

    /// Hands back the fragments of lists that timed out (15 s after their
    /// first fragment), to be sent on untracked.
    pub fn expire(&self, now_ms: u64) -> Vec<Vec<u8>> {
        let mut lists = self.lock();
        let dead: Vec<ListKey> = lists
            .iter()
            .filter(|(_, l)| now_ms >= l.expiration)
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::new();
        for k in dead {
            if let Some(l) = lists.remove(&k) {
                let n = l.frags.len();
                let _ = self
                    .held
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                        Some(h.saturating_sub(n as u32))
                    });
                self.counters(k.v6)
                    .expired
                    .fetch_add(n as u64, Ordering::Relaxed);
                out.extend(l.frags.into_iter().map(|f| f.frame));
            }
        }
        out
    }

    /// The status `dpctl/ipf-get-status` prints.
    pub fn status(&self) -> IpfStatus {
        let fam = |c: &Counters, en: &AtomicBool, min: &AtomicU32| {
            let [accepted, completed, expired, too_small, overlapped, purged] = c.read();
            IpfFamilyStatus {
                enabled: en.load(Ordering::Relaxed),
                min_frag_size: min.load(Ordering::Relaxed),
                accepted,
                completed,
                expired,
                too_small,
                overlapped,
                purged,
            }
        };
        IpfStatus {
            v4: fam(&self.c4, &self.v4_enabled, &self.min_v4),
            v6: fam(&self.c6, &self.v6_enabled, &self.min_v6),
            max_frags: self.max_frags.load(Ordering::Relaxed),
            nfrag: self.held.load(Ordering::Relaxed),
        }
    }

    /// The fragment lists, one `(src=...,dst=...,recirc_id=...,...)` line
    /// each, as `dpctl/ipf-get-status -m` prints them (sorted).
    pub fn dump(&self) -> Vec<String> {
        let lists = self.lock();
        let mut v: Vec<String> = lists
            .iter()
            .map(|(k, l)| {
                let (s, d, dl) = if k.v6 {
                    (
                        IpAddr::V6(Ipv6Addr::from(k.src)),
                        IpAddr::V6(Ipv6Addr::from(k.dst)),
                        0x86dd,
                    )
                } else {
                    (
                        IpAddr::V4(Ipv4Addr::new(k.src[0], k.src[1], k.src[2], k.src[3])),
                        IpAddr::V4(Ipv4Addr::new(k.dst[0], k.dst[1], k.dst[2], k.dst[3])),
                        0x0800,
                    )
                };
                format!(
                    "(src={s},dst={d},recirc_id={},ip_id={},dl_type=0x{dl:x},zone={},nw_proto={},num_fragments={},state={})",
                    k.recirc_id,
                    k.ident,
                    k.zone,
                    k.proto,
                    l.frags.len(),
                    l.state.name()
                )
            })
            .collect();
        v.sort();
        v
    }
}

/// Rebuilds the packet from a sorted, contiguous list starting at offset 0.
fn build(frags: &[Frag], v6: bool) -> Option<Vec<u8>> {
    let first = frags.first()?;
    let mut pkt = first.frame.clone();
    for f in frags.get(1..)? {
        pkt.extend_from_slice(f.frame.get(f.data..)?);
    }
    let l3 = first.l3;
    if !v6 {
        let total = pkt.len() - l3;
        if total > MAX_PACKET {
            return None;
        }
        let ip = pkt.get_mut(l3..)?;
        let old_flg = be16(ip, 6)?;
        let old_len = be16(ip, 2)?;
        let new_flg = old_flg & !0x2000;
        let mut c = be16(ip, 10)?;
        c = checksum::update(c, old_flg, new_flg);
        c = checksum::update(c, old_len, total as u16);
        ip.get_mut(2..4)?
            .copy_from_slice(&(total as u16).to_be_bytes());
        ip.get_mut(6..8)?.copy_from_slice(&new_flg.to_be_bytes());
        ip.get_mut(10..12)?.copy_from_slice(&c.to_be_bytes());
    } else {
        let plen = pkt.len() - l3 - 40;
        if plen > MAX_PACKET {
            return None;
        }
        // The fragment header sits just before the first fragment's data.
        let fh = first.data.checked_sub(8)?;
        pkt.get_mut(fh + 2..fh + 4)?.copy_from_slice(&[0, 0]);
        pkt.get_mut(l3 + 4..l3 + 6)?
            .copy_from_slice(&(plen as u16).to_be_bytes());
    }
    Some(pkt)
}

/// `dpctl/ipf-get-status`, as Open vSwitch prints it.
pub fn format_status(s: &IpfStatus) -> String {
    let fam = |name: &str, f: &IpfFamilyStatus| {
        format!(
            "        min {name} frag size: {}\n        {name} frags accepted: {}\n        {name} frags completed: {}\n        {name} frags expired: {}\n        {name} frags too small: {}\n        {name} frags overlapped: {}\n        {name} frags purged: {}\n",
            f.min_frag_size, f.accepted, f.completed, f.expired, f.too_small, f.overlapped, f.purged
        )
    };
    format!(
        "        Fragmentation Module Status\n        ---------------------------\n        v4 enabled: {}\n        v6 enabled: {}\n        max num frags (v4/v6): {}\n        num frag: {}\n{}{}",
        u8::from(s.v4.enabled),
        u8::from(s.v6.enabled),
        s.max_frags,
        s.nfrag,
        fam("v4", &s.v4),
        fam("v6", &s.v6)
    )
}

/// The fragment-list part of `dpctl/ipf-get-status -m`.
pub fn format_dump(lines: &[String]) -> String {
    let mut s = String::from("\n        Fragment Lists:\n\n");
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpkt::*;

    /// Splits an IPv4 frame (IP at 14) into fragments of `chunk` payload
    /// bytes (a multiple of 8).
    fn frag4(f: &[u8], chunk: usize) -> Vec<Vec<u8>> {
        let ihl = usize::from(f[14] & 0x0f) * 4;
        let payload = &f[14 + ihl..];
        let mut out = Vec::new();
        let mut off = 0;
        while off < payload.len() {
            let end = (off + chunk).min(payload.len());
            let mut g = f[..14 + ihl].to_vec();
            g.extend_from_slice(&payload[off..end]);
            let total = (ihl + end - off) as u16;
            g[16..18].copy_from_slice(&total.to_be_bytes());
            let mf = if end < payload.len() { 0x2000 } else { 0 };
            g[20..22].copy_from_slice(&(mf | (off / 8) as u16).to_be_bytes());
            fix_ipv4_csum(&mut g);
            out.push(g);
            off = end;
        }
        out
    }

    fn frag6(f: &[u8], chunk: usize, ident: u32) -> Vec<Vec<u8>> {
        let proto = f[20];
        let payload = &f[54..];
        let mut out = Vec::new();
        let mut off = 0;
        while off < payload.len() {
            let end = (off + chunk).min(payload.len());
            let mut g = f[..54].to_vec();
            g[20] = 44;
            let m = u16::from(end < payload.len());
            let offlg = ((off / 8) as u16) << 3 | m;
            g.extend_from_slice(&[proto, 0]);
            g.extend_from_slice(&offlg.to_be_bytes());
            g.extend_from_slice(&ident.to_be_bytes());
            g.extend_from_slice(&payload[off..end]);
            let plen = (8 + end - off) as u16;
            g[18..20].copy_from_slice(&plen.to_be_bytes());
            out.push(g);
            off = end;
        }
        out
    }

    #[test]
    fn v4_out_of_order_reassembly_matches_original() {
        let ipf = Ipf::new();
        ipf.set_min_frag(false, 400).expect("bound");
        let mut big = udp4([10, 0, 0, 1], [10, 0, 0, 2], 7, 9, &vec![0xab; 3000]);
        big[20] = 0; // clear DF
        fix_ipv4_csum(&mut big);
        let mut fr = frag4(&big, 1480);
        assert_eq!(fr.len(), 3);
        fr.swap(0, 2);
        assert_eq!(
            ipf.reassemble(&fr[0], 14, 0x0800, 0, 0, false, 0),
            IpfResult::Held
        );
        assert_eq!(
            ipf.reassemble(&fr[1], 14, 0x0800, 0, 0, false, 1),
            IpfResult::Held
        );
        assert_eq!(ipf.status().nfrag, 2);
        match ipf.reassemble(&fr[2], 14, 0x0800, 0, 0, false, 2) {
            IpfResult::Reassembled { packet, fragments } => {
                assert!(packet == big, "rebuilt packet equals the original");
                assert_eq!(fragments.len(), 3);
                assert!(checksums_ok(&packet));
                let p = crate::key::extract(&packet, 14, 0x0800, 0, false).expect("trackable");
                assert_eq!((p.key.src.port, p.key.dst.port), (7, 9));
            }
            other => panic!("{other:?}"),
        }
        let s = ipf.status();
        assert_eq!((s.v4.accepted, s.v4.completed, s.nfrag), (3, 3, 0));
    }

    #[test]
    fn v6_reassembly() {
        let ipf = Ipf::new();
        let big = udp6(v6a(1), v6a(2), 7, 9, &vec![0x5a; 4000]);
        let fr = frag6(&big, 1448, 0x1234);
        let mut res = IpfResult::Held;
        for f in &fr {
            res = ipf.reassemble(f, 14, 0x86dd, 3, 0, false, 0);
        }
        let IpfResult::Reassembled { packet, .. } = res else {
            panic!("{res:?}");
        };
        let p = crate::key::extract(&packet, 14, 0x86dd, 3, false).expect("trackable");
        assert_eq!((p.key.proto, p.key.src.port), (17, 7));
    }

    #[test]
    fn too_small_overlap_limits_and_expiry() {
        let ipf = Ipf::new();
        let big = udp4([10, 0, 0, 1], [10, 0, 0, 2], 7, 9, &vec![1; 3000]);
        let small = frag4(&big, 504);
        assert_eq!(
            ipf.reassemble(&small[0], 14, 0x0800, 0, 0, false, 0),
            IpfResult::Invalid
        );
        assert_eq!(ipf.status().v4.too_small, 1);
        let fr = frag4(&big, 1480);
        assert_eq!(
            ipf.reassemble(&fr[0], 14, 0x0800, 0, 0, false, 0),
            IpfResult::Held
        );
        assert_eq!(
            ipf.reassemble(&fr[0], 14, 0x0800, 0, 0, false, 0),
            IpfResult::Invalid
        );
        assert_eq!(ipf.status().v4.overlapped, 1);
        assert_eq!(ipf.dump(), vec![
            "(src=10.0.0.1,dst=10.0.0.2,recirc_id=0,ip_id=1,dl_type=0x800,zone=0,nw_proto=17,num_fragments=1,state=first frag)".to_string()
        ]);
        assert!(ipf.expire(14_999).is_empty());
        assert_eq!(ipf.expire(15_000).len(), 1);
        assert_eq!(ipf.status().v4.expired, 1);
        assert_eq!(ipf.status().nfrag, 0);
        ipf.set_max_frags(0).expect("bound");
        assert_eq!(
            ipf.reassemble(&fr[1], 14, 0x0800, 0, 0, false, 0),
            IpfResult::PassThrough
        );
        assert!(ipf.set_max_frags(5001).is_err());
        assert!(ipf.set_min_frag(true, 399).is_err());
        ipf.set_enabled(false, false);
        assert_eq!(
            ipf.reassemble(&fr[1], 14, 0x0800, 0, 0, false, 0),
            IpfResult::NotFragment
        );
        assert_eq!(
            ipf.reassemble(&big, 14, 0x0800, 0, 0, false, 0),
            IpfResult::NotFragment
        );
    }

    #[test]
    fn status_format() {
        let ipf = Ipf::new();
        assert_eq!(
            format_status(&ipf.status()),
            "        Fragmentation Module Status\n        ---------------------------\n        v4 enabled: 1\n        v6 enabled: 1\n        max num frags (v4/v6): 1000\n        num frag: 0\n        min v4 frag size: 1200\n        v4 frags accepted: 0\n        v4 frags completed: 0\n        v4 frags expired: 0\n        v4 frags too small: 0\n        v4 frags overlapped: 0\n        v4 frags purged: 0\n        min v6 frag size: 1280\n        v6 frags accepted: 0\n        v6 frags completed: 0\n        v6 frags expired: 0\n        v6 frags too small: 0\n        v6 frags overlapped: 0\n        v6 frags purged: 0\n"
        );
        assert_eq!(format_dump(&[]), "\n        Fragment Lists:\n\n");
    }

    #[test]
    fn garbage_never_panics() {
        let ipf = Ipf::new();
        ipf.set_min_frag(false, 400).expect("bound");
        ipf.set_min_frag(true, 400).expect("bound");
        let mut seed = 99u64;
        for len in 0..300usize {
            let mut f: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            if let Some(b) = f.get_mut(14) {
                *b = if len % 2 == 0 { 0x45 } else { 0x60 };
            }
            if let Some(b) = f.get_mut(20) {
                *b = 44;
            }
            for dl in [0x0800, 0x86dd] {
                let _ = ipf.reassemble(&f, 14, dl, 0, 0, true, 0);
                let _ = ipf.reassemble(&f, usize::MAX, dl, 0, 0, true, 0);
            }
        }
        let _ = ipf.expire(u64::MAX);
        assert_eq!(ipf.status().nfrag, 0);
    }
}
