//! Flow sampling: the packets `sample` actions picked, counted per
//! flow-sample collector set as Open vSwitch's IPFIX exporter counts them
//! (`ovs-ofctl dump-ipfix-flow`), gathered into flow records and exported
//! as IPFIX (RFC 7011) over UDP to each set's collector.
//!
//! The PMDs hand the sampled packets' headers to a bounded queue (see
//! `flowpath_datapath::execute::SampledPacket`); one thread here drains it.
//! As OVS with its default `cache_active_timeout` of 0, records are sent
//! as soon as the queue is drained (packets of one flow sampled in one
//! burst share a record), every message carrying the template.

use crate::fault::Part;
use flowpath_datapath::execute::SampledPacket;
use flowpath_flow::FlowKey;
use flowpath_openflow::msg::IpfixStats;
use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How many sampled packets may wait for the sampler thread (more are
/// dropped by the PMDs and counted).
pub const SAMPLE_QUEUE: usize = 4096;

/// The IPFIX template flowpath's records use.
const TEMPLATE_ID: u16 = 256;

/// The template's fields: (information element, length), RFC 7012
/// numbering.
const FIELDS: &[(u16, u16)] = &[
    (10, 4),  // ingressInterface
    (14, 4),  // egressInterface
    (61, 1),  // flowDirection
    (56, 6),  // sourceMacAddress
    (80, 6),  // destinationMacAddress
    (256, 2), // ethernetType
    (58, 2),  // vlanId
    (8, 4),   // sourceIPv4Address
    (12, 4),  // destinationIPv4Address
    (27, 16), // sourceIPv6Address
    (28, 16), // destinationIPv6Address
    (4, 1),   // protocolIdentifier
    (5, 1),   // ipClassOfService
    (7, 2),   // sourceTransportPort
    (11, 2),  // destinationTransportPort
    (138, 4), // observationPointId
    (2, 8),   // packetDeltaCount
    (1, 8),   // octetDeltaCount
    (152, 8), // flowStartMilliseconds
    (153, 8), // flowEndMilliseconds
];

/// A flow-sample collector set: `--sample-collector-set ID[=IP:PORT]`
/// (OVS's `Flow_Sample_Collector_Set` with its IPFIX target).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectorSet {
    /// The `collector_set_id` that `sample` actions name.
    pub id: u32,
    /// Where its records go (none: counted only).
    pub target: Option<SocketAddr>,
}

impl std::str::FromStr for CollectorSet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (id, target) = match s.split_once('=') {
            Some((id, t)) => (id, Some(t)),
            None => (s, None),
        };
        let id = id.trim().parse::<u32>().map_err(|_| {
            format!("'{s}': a collector set is ID[=IP:PORT] with ID a number 0 to 4294967295")
        })?;
        let target = match target {
            None => None,
            Some(t) => Some(t.trim().parse::<SocketAddr>().map_err(|_| {
                format!("'{s}': the collector '{t}' is not IP:PORT (IPv6: [ADDR]:PORT)")
            })?),
        };
        Ok(CollectorSet { id, target })
    }
}

/// What one flow record is about (OVS's flow key: ports, direction,
/// observation ids and the headers).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct RecordKey {
    obs_domain_id: u32,
    obs_point_id: u32,
    in_port: u32,
    out_port: u32,
    direction: u8,
    dl_src: u64,
    dl_dst: u64,
    dl_type: u16,
    vlan_tci: u16,
    src: u128,
    dst: u128,
    proto: u8,
    tos: u8,
    tp_src: u16,
    tp_dst: u16,
}

#[derive(Clone, Copy, Debug)]
struct Record {
    packets: u64,
    bytes: u64,
    start_ms: u64,
    end_ms: u64,
}

struct SetState {
    target: Option<SocketAddr>,
    stats: IpfixStats,
    records: HashMap<RecordKey, Record>,
    /// Data records sent so far per observation domain (the IPFIX
    /// sequence number).
    seq: BTreeMap<u32, u32>,
}

/// The collector sets and their counters.
pub struct Sampler {
    sets: Mutex<BTreeMap<u32, SetState>>,
    socket: Mutex<Option<UdpSocket>>,
}

/// How a sampled packet counts (OVS's sampled packet types).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Ipv4Ok,
    Ipv6Ok,
    Ipv4Error,
    Ipv6Error,
    Other,
}

fn kind(k: &FlowKey) -> Kind {
    match k.dl_type() {
        0x0800 if matches!(k.nw_proto(), 6 | 17 | 132 | 1) => Kind::Ipv4Ok,
        0x0800 => Kind::Ipv4Error,
        0x86dd if matches!(k.nw_proto(), 6 | 17 | 132 | 58) => Kind::Ipv6Ok,
        0x86dd => Kind::Ipv6Error,
        _ => Kind::Other,
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Sampler {
    /// A sampler for these collector sets (a later set with the same id
    /// replaces an earlier one).
    pub fn new(sets: &[CollectorSet]) -> Sampler {
        let sets = sets
            .iter()
            .map(|c| {
                let state = SetState {
                    target: c.target,
                    stats: IpfixStats {
                        collector_set_id: c.id,
                        ..IpfixStats::default()
                    },
                    records: HashMap::new(),
                    seq: BTreeMap::new(),
                };
                (c.id, state)
            })
            .collect();
        Sampler {
            sets: Mutex::new(sets),
            socket: Mutex::new(None),
        }
    }

    /// The collector sets, in id order.
    pub fn sets(&self) -> Vec<CollectorSet> {
        self.lock()
            .iter()
            .map(|(id, s)| CollectorSet {
                id: *id,
                target: s.target,
            })
            .collect()
    }

    /// Replaces the collector sets with `sets` (a set kept keeps its
    /// counters and waiting records; its collector may change).
    pub fn set_sets(&self, sets: &[CollectorSet]) {
        let mut cur = self.lock();
        cur.retain(|id, _| sets.iter().any(|c| c.id == *id));
        for c in sets {
            let s = cur.entry(c.id).or_insert_with(|| SetState {
                target: c.target,
                stats: IpfixStats {
                    collector_set_id: c.id,
                    ..IpfixStats::default()
                },
                records: HashMap::new(),
                seq: BTreeMap::new(),
            });
            s.target = c.target;
        }
    }

    /// True when there is at least one collector set (`sample` actions
    /// then sample).
    pub fn any(&self) -> bool {
        !self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, SetState>> {
        self.sets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Each collector set's counters, in id order (`NXST_IPFIX_FLOW`).
    pub fn stats(&self) -> Vec<IpfixStats> {
        self.lock().values().map(|s| s.stats).collect()
    }

    /// Counts one sampled packet and adds it to its flow record. A
    /// packet for a collector set the switch does not have is ignored,
    /// as OVS ignores it.
    pub fn add(&self, p: &SampledPacket, now_ms: u64) {
        let mut sets = self.lock();
        let Some(set) = sets.get_mut(&p.sample.collector_set_id) else {
            return;
        };
        let k = flowpath_flow::extract::extract(&p.headers, p.in_port);
        let st = &mut set.stats;
        st.pkts += 1;
        match kind(&k) {
            Kind::Ipv4Ok => st.ipv4_pkts += 1,
            Kind::Ipv6Ok => st.ipv6_pkts += 1,
            Kind::Ipv4Error => {
                st.ipv4_error_pkts += 1;
                st.error_pkts += 1;
            }
            Kind::Ipv6Error => {
                st.ipv6_error_pkts += 1;
                st.error_pkts += 1;
            }
            Kind::Other => {}
        }
        let (src, dst) = if k.is_ipv6() {
            (k.ipv6_src(), k.ipv6_dst())
        } else if k.is_ipv4() {
            (u128::from(k.nw_src()), u128::from(k.nw_dst()))
        } else {
            (0, 0)
        };
        let l4 = k.is_ip_any();
        let key = RecordKey {
            obs_domain_id: p.sample.obs_domain_id,
            obs_point_id: p.sample.obs_point_id,
            in_port: p.in_port,
            out_port: p.sample.output_port,
            direction: p.sample.direction,
            dl_src: k.dl_src(),
            dl_dst: k.dl_dst(),
            dl_type: k.dl_type(),
            vlan_tci: k.vlan_tci(),
            src,
            dst,
            proto: if l4 { k.nw_proto() } else { 0 },
            tos: if l4 { k.nw_tos() } else { 0 },
            tp_src: if l4 { k.tp_src() } else { 0 },
            tp_dst: if l4 { k.tp_dst() } else { 0 },
        };
        // As OVS: the probability stands for the packets not sampled.
        let weight = 65535 / u64::from(p.sample.of_probability.max(1));
        let rec = set.records.entry(key).or_insert_with(|| Record {
            packets: 0,
            bytes: 0,
            start_ms: now_ms,
            end_ms: now_ms,
        });
        if rec.packets == 0 {
            set.stats.total_flows += 1;
        }
        rec.packets += weight;
        rec.bytes += weight * p.len as u64;
        rec.end_ms = now_ms;
        set.stats.current_flows = set.records.len() as u64;
    }

    /// Sends every waiting record to its set's collector (records of a
    /// set without one are dropped) and empties the caches.
    pub fn flush(&self) {
        let mut sets = self.lock();
        for set in sets.values_mut() {
            if set.records.is_empty() {
                continue;
            }
            let records = std::mem::take(&mut set.records);
            set.stats.current_flows = 0;
            let Some(target) = set.target else {
                continue;
            };
            let mut by_domain: BTreeMap<u32, Vec<(RecordKey, Record)>> = BTreeMap::new();
            for (k, r) in records {
                by_domain.entry(k.obs_domain_id).or_default().push((k, r));
            }
            for (domain, recs) in by_domain {
                for chunk in recs.chunks(MAX_RECORDS) {
                    let seq = set.seq.entry(domain).or_insert(0);
                    let msg = message(domain, *seq, chunk);
                    *seq = seq.wrapping_add(chunk.len() as u32);
                    if self.send(&msg, target) {
                        set.stats.tx_pkts += 1;
                    } else {
                        set.stats.tx_errors += 1;
                    }
                }
            }
        }
    }

    fn send(&self, msg: &[u8], to: SocketAddr) -> bool {
        let mut sock = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        let wrong_family = sock
            .as_ref()
            .and_then(|s| s.local_addr().ok())
            .is_some_and(|a| a.is_ipv4() != to.is_ipv4());
        if sock.is_none() || wrong_family {
            let any: SocketAddr = if to.is_ipv4() {
                (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
            };
            *sock = UdpSocket::bind(any).ok();
        }
        sock.as_ref().is_some_and(|s| s.send_to(msg, to).is_ok())
    }
}

/// Records per message: well under a 1,500-byte MTU.
const MAX_RECORDS: usize = 10;

/// The length of one data record.
fn record_len() -> usize {
    FIELDS.iter().map(|(_, l)| usize::from(*l)).sum()
}

/// One IPFIX message: header, the template set, one data set.
fn message(domain: u32, seq: u32, recs: &[(RecordKey, Record)]) -> Vec<u8> {
    let mut m = Vec::with_capacity(64 + recs.len() * record_len());
    m.extend_from_slice(&10u16.to_be_bytes());
    m.extend_from_slice(&0u16.to_be_bytes()); // length, below
    let secs = (now_ms() / 1000) as u32;
    m.extend_from_slice(&secs.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(&domain.to_be_bytes());
    // Template set (id 2).
    let tlen = 4 + 4 + 4 * FIELDS.len();
    m.extend_from_slice(&2u16.to_be_bytes());
    m.extend_from_slice(&(tlen as u16).to_be_bytes());
    m.extend_from_slice(&TEMPLATE_ID.to_be_bytes());
    m.extend_from_slice(&(FIELDS.len() as u16).to_be_bytes());
    for (ie, len) in FIELDS {
        m.extend_from_slice(&ie.to_be_bytes());
        m.extend_from_slice(&len.to_be_bytes());
    }
    // Data set.
    let dlen = 4 + recs.len() * record_len();
    m.extend_from_slice(&TEMPLATE_ID.to_be_bytes());
    m.extend_from_slice(&(dlen as u16).to_be_bytes());
    for (k, r) in recs {
        let v4 = k.dl_type == 0x0800;
        let v6 = k.dl_type == 0x86dd;
        m.extend_from_slice(&k.in_port.to_be_bytes());
        m.extend_from_slice(&k.out_port.to_be_bytes());
        // flowDirection: 0 ingress, 1 egress (ingress unless told).
        m.push(u8::from(k.direction == 2));
        m.extend_from_slice(&k.dl_src.to_be_bytes()[2..]);
        m.extend_from_slice(&k.dl_dst.to_be_bytes()[2..]);
        m.extend_from_slice(&k.dl_type.to_be_bytes());
        m.extend_from_slice(&(k.vlan_tci & 0x0fff).to_be_bytes());
        let (s4, d4) = if v4 {
            (k.src as u32, k.dst as u32)
        } else {
            (0, 0)
        };
        m.extend_from_slice(&s4.to_be_bytes());
        m.extend_from_slice(&d4.to_be_bytes());
        let (s6, d6) = if v6 { (k.src, k.dst) } else { (0, 0) };
        m.extend_from_slice(&s6.to_be_bytes());
        m.extend_from_slice(&d6.to_be_bytes());
        m.push(k.proto);
        m.push(k.tos);
        m.extend_from_slice(&k.tp_src.to_be_bytes());
        m.extend_from_slice(&k.tp_dst.to_be_bytes());
        m.extend_from_slice(&k.obs_point_id.to_be_bytes());
        m.extend_from_slice(&r.packets.to_be_bytes());
        m.extend_from_slice(&r.bytes.to_be_bytes());
        m.extend_from_slice(&r.start_ms.to_be_bytes());
        m.extend_from_slice(&r.end_ms.to_be_bytes());
    }
    let len = m.len() as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    m
}

/// The sampler thread: drains the PMDs' queue, counts, and sends the
/// records once the queue is empty; ends when `stop` is set or every
/// PMD's sender is gone.
pub fn run(sampler: Arc<Sampler>, rx: Receiver<SampledPacket>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        // A panicking batch is dropped (logged and counted); the thread
        // goes on with the next.
        let go_on = crate::fault::guard(Part::Sampler, "the batch is dropped", || {
            crate::fault::hook(Part::Sampler);
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(p) => {
                    let now = now_ms();
                    sampler.add(&p, now);
                    while let Ok(p) = rx.try_recv() {
                        sampler.add(&p, now);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return false,
            }
            sampler.flush();
            true
        });
        if go_on == Some(false) {
            break;
        }
    }
    sampler.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_odp::FlowSample;

    fn udp4(src_port: u16, proto: u8) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[22] = 64;
        f[23] = proto;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&src_port.to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f[38..40].copy_from_slice(&26u16.to_be_bytes());
        f
    }

    fn sampled(frame: Vec<u8>, set: u32, probability: u16) -> SampledPacket {
        SampledPacket {
            len: frame.len(),
            headers: frame,
            in_port: 1,
            sample: FlowSample {
                probability: u32::MAX,
                of_probability: probability,
                collector_set_id: set,
                obs_domain_id: 7,
                obs_point_id: 9,
                output_port: u32::MAX,
                direction: 0,
            },
        }
    }

    #[test]
    fn collector_sets_parse_and_bad_ones_are_named() {
        let c: CollectorSet = "3".parse().unwrap();
        assert_eq!(
            c,
            CollectorSet {
                id: 3,
                target: None
            }
        );
        let c: CollectorSet = "1=127.0.0.1:4739".parse().unwrap();
        assert_eq!(c.target, Some("127.0.0.1:4739".parse().unwrap()));
        let c: CollectorSet = "2=[::1]:4739".parse().unwrap();
        assert!(c.target.unwrap().is_ipv6());
        let e = "x=1.2.3.4:5".parse::<CollectorSet>().unwrap_err();
        assert!(e.contains("'x=1.2.3.4:5'"), "{e}");
        let e = "1=1.2.3.4".parse::<CollectorSet>().unwrap_err();
        assert!(e.contains("'1.2.3.4' is not IP:PORT"), "{e}");
    }

    #[test]
    fn counts_as_open_vswitch_and_exports_records() {
        let collector = UdpSocket::bind("127.0.0.1:0").unwrap();
        collector
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let target = collector.local_addr().unwrap();
        let s = Sampler::new(&[
            CollectorSet {
                id: 1,
                target: Some(target),
            },
            CollectorSet {
                id: 2,
                target: None,
            },
        ]);
        assert!(s.any());
        // Three packets of one UDP flow, one of another, one GRE (an IPv4
        // protocol no record describes), one for a set the switch lacks.
        for _ in 0..3 {
            s.add(&sampled(udp4(1000, 17), 1, 65535), 5);
        }
        s.add(&sampled(udp4(1001, 17), 1, 32768), 6);
        s.add(&sampled(udp4(1000, 47), 1, 65535), 6);
        s.add(&sampled(udp4(1000, 17), 9, 65535), 6);
        s.add(&sampled(udp4(1000, 17), 2, 65535), 6);
        let st = s.stats();
        assert_eq!(st.len(), 2);
        let one = st[0];
        assert_eq!(one.collector_set_id, 1);
        assert_eq!((one.pkts, one.ipv4_pkts, one.ipv4_error_pkts), (5, 4, 1));
        assert_eq!(one.error_pkts, 1);
        assert_eq!((one.total_flows, one.current_flows), (3, 3));
        assert_eq!((st[1].pkts, st[1].total_flows), (1, 1));
        s.flush();
        let st = s.stats();
        assert_eq!(
            (st[0].current_flows, st[0].tx_pkts, st[0].tx_errors),
            (0, 1, 0)
        );
        assert_eq!(st[1].tx_pkts, 0, "a set without a collector sends nothing");
        let mut buf = [0u8; 2048];
        let n = collector.recv(&mut buf).unwrap();
        let m = &buf[..n];
        assert_eq!(u16::from_be_bytes([m[0], m[1]]), 10, "IPFIX version");
        assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), n);
        assert_eq!(
            u32::from_be_bytes([m[12], m[13], m[14], m[15]]),
            7,
            "domain"
        );
        // The data set: three records, the first flow's weight 3 packets,
        // the half-probability one's 1 * 65535/32768 = 1.
        let tset = 16;
        let tlen = usize::from(u16::from_be_bytes([m[tset + 2], m[tset + 3]]));
        let d = tset + tlen;
        assert_eq!(u16::from_be_bytes([m[d], m[d + 1]]), TEMPLATE_ID);
        let dlen = usize::from(u16::from_be_bytes([m[d + 2], m[d + 3]]));
        assert_eq!((dlen - 4) / record_len(), 3);
        let mut counts = Vec::new();
        let pkt_at = FIELDS
            .iter()
            .take_while(|(ie, _)| *ie != 2)
            .map(|(_, l)| usize::from(*l))
            .sum::<usize>();
        for i in 0..3 {
            let r = d + 4 + i * record_len() + pkt_at;
            counts.push(u64::from_be_bytes(m[r..r + 8].try_into().unwrap()));
        }
        counts.sort_unstable();
        assert_eq!(counts, vec![1, 1, 3]);
        // A second flush sends nothing new.
        s.flush();
        assert_eq!(s.stats()[0].tx_pkts, 1);
    }
}
