//! The switch's replies and asynchronous messages.

use super::*;

/// HELLO with the version bitmap of every version flowpath speaks.
pub fn encode_hello(version: u8) -> Vec<u8> {
    let mut w = header::start(version, MsgType::Hello, 0);
    if version > OFP10 {
        let bitmap: u32 = header::VERSIONS.iter().map(|v| 1u32 << v).sum();
        w.u16(1);
        w.u16(8);
        w.u32(bitmap);
    }
    header::finish(w)
}

/// A HELLO offering only the versions in `bitmap` (bit V: version V; an
/// Open vSwitch bridge's `protocols`): the highest in the header, the
/// bitmap element unless that is OpenFlow 1.0.
pub fn encode_hello_versions(bitmap: u32) -> Vec<u8> {
    let top = header::VERSIONS
        .iter()
        .rev()
        .copied()
        .find(|v| bitmap & (1 << v) != 0)
        .unwrap_or(OFP10);
    let mut w = header::start(top, MsgType::Hello, 0);
    if top > OFP10 {
        w.u16(1);
        w.u16(8);
        w.u32(bitmap);
    }
    header::finish(w)
}

/// Every version this crate speaks, as a HELLO bitmap.
pub fn all_versions() -> u32 {
    header::VERSIONS.iter().map(|v| 1u32 << v).sum()
}

/// The highest version both sides speak (None: none in common).
pub fn negotiate(their_header_version: u8, their_bitmap: u32) -> Option<u8> {
    header::VERSIONS
        .iter()
        .rev()
        .copied()
        .find(|v| *v <= their_header_version && their_bitmap & (1 << v) != 0)
}

/// A reply with `body` of type `t`.
pub fn encode_simple(version: u8, t: MsgType, xid: u32, body: &[u8]) -> Vec<u8> {
    let mut w = header::start(version, t, xid);
    w.bytes(body);
    header::finish(w)
}

/// A Nicira vendor message `sub` with `body`.
pub fn encode_nx(version: u8, xid: u32, sub: u32, body: &[u8]) -> Vec<u8> {
    let mut w = header::start(version, MsgType::Vendor, xid);
    w.u32(NX_VENDOR_ID);
    w.u32(sub);
    w.bytes(body);
    header::finish(w)
}

/// `NXT_ROLE_REPLY` / `OFPT_ROLE_REPLY`.
pub fn encode_role_reply(
    version: u8,
    xid: u32,
    role: u32,
    generation_id: u64,
    nx: bool,
) -> Vec<u8> {
    if nx {
        return encode_nx(version, xid, NXT_ROLE_REPLY, &role.to_be_bytes());
    }
    let mut w = header::start(version, MsgType::RoleReply, xid);
    w.u32(role);
    w.zeros(4);
    w.u64(generation_id);
    header::finish(w)
}

/// `NXT_TLV_TABLE_REPLY`: the option space and field count, and the
/// mappings.
pub fn encode_tlv_table_reply(
    version: u8,
    xid: u32,
    max_space: u32,
    max_fields: u16,
    maps: &[super::TlvMapping],
) -> Vec<u8> {
    // max_option_space u32, max_fields u16, pad[10], then the mappings.
    let mut body = Vec::new();
    body.extend_from_slice(&max_space.to_be_bytes());
    body.extend_from_slice(&max_fields.to_be_bytes());
    body.extend_from_slice(&[0; 10]);
    for m in maps {
        body.extend_from_slice(&m.class.to_be_bytes());
        body.push(m.typ);
        body.push(m.len);
        body.extend_from_slice(&m.index.to_be_bytes());
        body.extend_from_slice(&[0; 2]);
    }
    encode_nx(version, xid, NXT_TLV_TABLE_REPLY, &body)
}

/// A port as the switch describes it.
#[derive(Clone, Debug)]
pub struct PortInfo {
    /// OpenFlow port number (OpenFlow 1.0 numbering; LOCAL is 0xfffe).
    pub no: u32,
    /// Its name.
    pub name: String,
    /// Its Ethernet address.
    pub mac: [u8; 6],
    /// Link up.
    pub up: bool,
    /// Its OpenFlow configuration bits (`OFPPC_*`, OpenFlow 1.0
    /// numbering; 1.1+ messages carry those that version defines).
    pub config: u32,
}

/// A port's statistics.
#[derive(Clone, Copy, Debug, Default)]
pub struct PortCounters {
    /// OpenFlow port number.
    pub no: u32,
    /// Received packets.
    pub rx_packets: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Packets dropped on receive.
    pub rx_dropped: u64,
    /// Packets dropped on transmit.
    pub tx_dropped: u64,
    /// Seconds the port has existed.
    pub duration_s: u32,
}

const PORT_CURR: u32 = (1 << 6) | (1 << 11); // 10GB_FD | COPPER (as OVS's netdevs)
const PORT_STATE_LINK_DOWN: u32 = 1;
const PORT_STATE_LIVE: u32 = 4;

fn put_name(w: &mut Writer, name: &str, n: usize) {
    let b = name.as_bytes();
    let k = b.len().min(n - 1);
    w.bytes(&b[..k]);
    w.zeros(n - k);
}

pub(super) fn put_port_desc(w: &mut Writer, version: u8, p: &PortInfo) {
    // As Open vSwitch: a port whose link is up and that is not
    // administratively down is live (OpenFlow 1.1+).
    let live = p.up && p.config & super::PC_PORT_DOWN == 0;
    let mut state = u32::from(!p.up) * PORT_STATE_LINK_DOWN;
    let config = if version == OFP10 {
        p.config & super::PC10_ALL
    } else {
        state |= u32::from(live) * PORT_STATE_LIVE;
        p.config & super::PC11_ALL
    };
    if version == OFP10 {
        w.u16(p.no as u16);
        w.bytes(&p.mac);
        put_name(w, &p.name, 16);
        w.u32(config);
        w.u32(state);
        w.u32(PORT_CURR);
        w.u32(0);
        w.u32(0);
        w.u32(0);
    } else if version < OFP14 {
        w.u32(port::to_of11(p.no));
        w.zeros(4);
        w.bytes(&p.mac);
        w.zeros(2);
        put_name(w, &p.name, 16);
        w.u32(config);
        w.u32(state);
        w.u32(PORT_CURR);
        w.u32(0);
        w.u32(0);
        w.u32(0);
        w.u32(10_000_000);
        w.u32(0);
    } else {
        w.u32(port::to_of11(p.no));
        w.u16(72);
        w.zeros(2);
        w.bytes(&p.mac);
        w.zeros(2);
        put_name(w, &p.name, 16);
        w.u32(config);
        w.u32(state);
        // Ethernet property.
        w.u16(0);
        w.u16(32);
        w.zeros(4);
        w.u32(PORT_CURR);
        w.u32(0);
        w.u32(0);
        w.u32(0);
        w.u32(10_000_000);
        w.u32(0);
    }
}

/// FEATURES_REPLY (OpenFlow 1.0 lists the ports in it).
pub fn encode_features_reply(version: u8, xid: u32, dpid: u64, ports: &[PortInfo]) -> Vec<u8> {
    let mut w = header::start(version, MsgType::FeaturesReply, xid);
    w.u64(dpid);
    w.u32(0); // n_buffers: flowpath buffers no packets
    w.u8(254);
    if version == OFP10 {
        w.zeros(3);
        // FLOW_STATS | TABLE_STATS | PORT_STATS | ARP_MATCH_IP
        w.u32(1 | 2 | 4 | 0x80);
        // Every OpenFlow 1.0 action but ENQUEUE's queue configuration.
        w.u32(0xfff);
        for p in ports {
            put_port_desc(&mut w, version, p);
        }
    } else {
        w.u8(0);
        w.zeros(2);
        // FLOW_STATS | TABLE_STATS | PORT_STATS | GROUP_STATS
        w.u32(1 | 2 | 4 | 8);
        w.u32(0);
    }
    header::finish(w)
}

/// GET_CONFIG_REPLY.
pub fn encode_get_config_reply(version: u8, xid: u32, flags: u16, miss_send_len: u16) -> Vec<u8> {
    let mut w = header::start(version, MsgType::GetConfigReply, xid);
    w.u16(flags);
    w.u16(miss_send_len);
    header::finish(w)
}

/// Builds multipart/stats replies, split into messages of at most about
/// 64 kB with the MORE flag on all but the last.
pub struct StatsReply {
    version: u8,
    xid: u32,
    stype: u16,
    nx_sub: Option<u32>,
    /// The vendor of a vendor reply: Nicira's (header padded to 8 bytes)
    /// or ONF's (OpenFlow 1.3 experimenter multipart, unpadded).
    onf: bool,
    msgs: Vec<Writer>,
}

impl StatsReply {
    /// A reply of stats type `stype` (`nx_sub`: a Nicira stats reply).
    pub fn new(version: u8, xid: u32, stype: u16, nx_sub: Option<u32>) -> StatsReply {
        let mut s = StatsReply {
            version,
            xid,
            stype,
            nx_sub,
            onf: false,
            msgs: Vec::new(),
        };
        s.new_msg();
        s
    }

    /// An ONF experimenter multipart reply of type `sub` (OpenFlow 1.3).
    pub fn new_onf(version: u8, xid: u32, sub: u32) -> StatsReply {
        let mut s = StatsReply {
            version,
            xid,
            stype: ST_VENDOR,
            nx_sub: Some(sub),
            onf: true,
            msgs: Vec::new(),
        };
        s.new_msg();
        s
    }

    fn new_msg(&mut self) {
        let mut w = header::start(self.version, MsgType::StatsReply, self.xid);
        w.u16(self.stype);
        w.u16(0);
        if self.version != OFP10 {
            w.zeros(4);
        }
        if let Some(sub) = self.nx_sub {
            if self.onf {
                w.u32(header::ONF_VENDOR_ID);
                w.u32(sub);
            } else {
                w.u32(NX_VENDOR_ID);
                w.u32(sub);
                w.zeros(4);
            }
        }
        self.msgs.push(w);
    }

    /// Appends one entry (starting a new message when this one is full).
    pub fn push(&mut self, entry: &[u8]) {
        let cur = self.msgs.last().map_or(0, Writer::len);
        if cur + entry.len() > 65_000 {
            self.new_msg();
        }
        if let Some(w) = self.msgs.last_mut() {
            w.bytes(entry);
        }
    }

    /// The messages already full (every one but the one being filled),
    /// marked "more to follow", taken out: a long reply can go out while
    /// the rest is encoded.
    pub fn take_full(&mut self) -> Vec<Vec<u8>> {
        let n = self.msgs.len().saturating_sub(1);
        self.msgs
            .drain(..n)
            .map(|mut w| {
                w.patch_u16(10, 1);
                header::finish(w)
            })
            .collect()
    }

    /// The messages.
    pub fn finish(self) -> Vec<Vec<u8>> {
        let n = self.msgs.len();
        self.msgs
            .into_iter()
            .enumerate()
            .map(|(i, mut w)| {
                if i + 1 < n {
                    w.patch_u16(10, 1);
                }
                header::finish(w)
            })
            .collect()
    }
}

/// Stats types, for [`StatsReply::new`].
pub mod stats {
    /// DESC.
    pub const DESC: u16 = super::ST_DESC;
    /// FLOW.
    pub const FLOW: u16 = super::ST_FLOW;
    /// AGGREGATE.
    pub const AGGREGATE: u16 = super::ST_AGGREGATE;
    /// TABLE.
    pub const TABLE: u16 = super::ST_TABLE;
    /// PORT.
    pub const PORT: u16 = super::ST_PORT;
    /// QUEUE.
    pub const QUEUE: u16 = super::ST_QUEUE;
    /// GROUP.
    pub const GROUP: u16 = super::MP_GROUP;
    /// GROUP_DESC.
    pub const GROUP_DESC: u16 = super::MP_GROUP_DESC;
    /// GROUP_FEATURES.
    pub const GROUP_FEATURES: u16 = super::MP_GROUP_FEATURES;
    /// METER.
    pub const METER: u16 = super::MP_METER;
    /// TABLE_FEATURES.
    pub const TABLE_FEATURES: u16 = super::MP_TABLE_FEATURES;
    /// PORT_DESC.
    pub const PORT_DESC: u16 = super::MP_PORT_DESC;
    /// TABLE_DESC (OpenFlow 1.4+).
    pub const TABLE_DESC: u16 = super::MP_TABLE_DESC;
    /// Vendor (Nicira) stats.
    pub const VENDOR: u16 = super::ST_VENDOR;
    /// NXST_FLOW.
    pub const NXST_FLOW: u32 = super::NXST_FLOW;
    /// NXST_AGGREGATE.
    pub const NXST_AGGREGATE: u32 = super::NXST_AGGREGATE;
    /// NXST_GROUP (group statistics in OpenFlow 1.0).
    pub const NXST_GROUP: u32 = super::NXST_GROUP;
    /// NXST_GROUP_DESC.
    pub const NXST_GROUP_DESC: u32 = super::NXST_GROUP_DESC;
    /// NXST_GROUP_FEATURES.
    pub const NXST_GROUP_FEATURES: u32 = super::NXST_GROUP_FEATURES;
    /// NXST_IPFIX_BRIDGE.
    pub const NXST_IPFIX_BRIDGE: u32 = super::NXST_IPFIX_BRIDGE;
    /// NXST_IPFIX_FLOW.
    pub const NXST_IPFIX_FLOW: u32 = super::NXST_IPFIX_FLOW;
}

/// An IPFIX exporter's counters (one entry of an `NXST_IPFIX_FLOW` reply,
/// or the `NXST_IPFIX_BRIDGE` reply), as Open vSwitch keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpfixStats {
    /// Flow records made.
    pub total_flows: u64,
    /// Flow records waiting in the cache.
    pub current_flows: u64,
    /// Sampled packets.
    pub pkts: u64,
    /// Of those, IPv4 packets of a protocol a record describes (TCP, UDP,
    /// SCTP, ICMP).
    pub ipv4_pkts: u64,
    /// Likewise IPv6 (TCP, UDP, SCTP, ICMPv6).
    pub ipv6_pkts: u64,
    /// Sampled packets no record describes well.
    pub error_pkts: u64,
    /// Of those, IPv4.
    pub ipv4_error_pkts: u64,
    /// Of those, IPv6.
    pub ipv6_error_pkts: u64,
    /// IPFIX messages sent to the collectors.
    pub tx_pkts: u64,
    /// IPFIX messages that could not be sent.
    pub tx_errors: u64,
    /// The collector set (`NXST_IPFIX_FLOW`).
    pub collector_set_id: u32,
}

/// One `nx_ipfix_stats_reply` (88 bytes).
pub fn ipfix_stats_entry(s: &IpfixStats) -> Vec<u8> {
    let mut w = Writer::new();
    for v in [
        s.total_flows,
        s.current_flows,
        s.pkts,
        s.ipv4_pkts,
        s.ipv6_pkts,
        s.error_pkts,
        s.ipv4_error_pkts,
        s.ipv6_error_pkts,
        s.tx_pkts,
        s.tx_errors,
    ] {
        w.u64(v);
    }
    w.u32(s.collector_set_id);
    w.zeros(4);
    w.buf
}

/// The DESC reply body.
pub fn desc_body(dp_desc: &str) -> Vec<u8> {
    let mut w = Writer::new();
    put_name(&mut w, "flowpath", 256);
    put_name(&mut w, "flowpath userspace switch", 256);
    put_name(&mut w, env!("CARGO_PKG_VERSION"), 256);
    put_name(&mut w, "None", 32);
    put_name(&mut w, dp_desc, 256);
    w.buf
}

/// One port's description entry (PORT_DESC reply).
pub fn port_desc_entry(version: u8, p: &PortInfo) -> Vec<u8> {
    let mut w = Writer::new();
    put_port_desc(&mut w, version, p);
    w.buf
}

/// One port's statistics entry (PORT reply).
pub fn port_stats_entry(version: u8, c: &PortCounters) -> Vec<u8> {
    let mut w = Writer::new();
    if version == OFP10 {
        w.u16(c.no as u16);
        w.zeros(6);
    } else if version < OFP14 {
        w.u32(port::to_of11(c.no));
        w.zeros(4);
    } else {
        w.u16(0);
        w.zeros(2);
        w.u32(port::to_of11(c.no));
        w.u32(c.duration_s);
        w.u32(0);
        w.u64(c.rx_packets);
        w.u64(c.tx_packets);
        w.u64(c.rx_bytes);
        w.u64(c.tx_bytes);
        w.u64(c.rx_dropped);
        w.u64(c.tx_dropped);
        w.u64(0);
        w.u64(0);
        // Ethernet property.
        w.u16(0);
        w.u16(40);
        w.zeros(4);
        w.zeros(32);
        let n = w.len() as u16;
        w.patch_u16(0, n);
        return w.buf;
    }
    w.u64(c.rx_packets);
    w.u64(c.tx_packets);
    w.u64(c.rx_bytes);
    w.u64(c.tx_bytes);
    w.u64(c.rx_dropped);
    w.u64(c.tx_dropped);
    w.zeros(6 * 8); // errors, frame/over/crc errors, collisions
    if version == OFP13 {
        w.u32(c.duration_s);
        w.u32(0);
    }
    w.buf
}

/// One table's TABLE_FEATURES entry (OpenFlow 1.3+): its name, the
/// metadata bits it matches and writes, its size, and the eight
/// properties OpenFlow requires (instructions, next tables, write and
/// apply actions, match fields, wildcards, write and apply set-field):
/// every instruction, action and field is allowed in every table.
pub fn table_features_entry(table: u8, max_entries: u32) -> Vec<u8> {
    let mut w = Writer::new();
    w.u16(0);
    w.u8(table);
    w.zeros(5);
    put_name(&mut w, &format!("table{table}"), 32);
    w.u64(u64::MAX);
    w.u64(u64::MAX);
    w.u32(0);
    w.u32(max_entries);
    let prop = |w: &mut Writer, t: u16, body: &[u8]| {
        let s = w.len();
        w.u16(t);
        w.u16((4 + body.len()) as u16);
        w.bytes(body);
        w.pad8_from(s);
    };
    let mut inst = Vec::new();
    for t in 1u16..=5 {
        inst.extend_from_slice(&t.to_be_bytes());
        inst.extend_from_slice(&4u16.to_be_bytes());
    }
    let next: Vec<u8> = (table.saturating_add(1)..=253)
        .filter(|t| *t > table)
        .collect();
    let mut acts = Vec::new();
    for t in [0u16, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25] {
        acts.extend_from_slice(&t.to_be_bytes());
        acts.extend_from_slice(&4u16.to_be_bytes());
    }
    let fields: Vec<u8> = nxm::oxm_basic_headers()
        .iter()
        .flat_map(|h| h.to_be_bytes())
        .collect();
    prop(&mut w, 0, &inst);
    prop(&mut w, 2, &next);
    prop(&mut w, 4, &acts);
    prop(&mut w, 6, &acts);
    prop(&mut w, 8, &fields);
    prop(&mut w, 10, &fields);
    prop(&mut w, 12, &fields);
    prop(&mut w, 14, &fields);
    let n = w.len() as u16;
    w.patch_u16(0, n);
    w.buf
}

/// One table's statistics entry (TABLE reply).
pub fn table_stats_entry(
    version: u8,
    table: u8,
    active: u32,
    lookups: u64,
    matched: u64,
) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(table);
    w.zeros(3);
    if version == OFP10 {
        // No name: Open vSwitch's tables have none until one is set.
        w.zeros(32);
        w.u32(0x003f_ffff);
        w.u32(1_000_000);
    }
    w.u32(active);
    w.u64(lookups);
    w.u64(matched);
    w.buf
}

/// A flow's statistics, for [`flow_stats_entry`].
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowCounters {
    /// Seconds since it was added.
    pub duration_s: u32,
    /// Nanoseconds part.
    pub duration_ns: u32,
    /// Seconds since last used (NXM only).
    pub idle_age: u16,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

/// One flow's entry of a FLOW (or NXST_FLOW) reply.
pub fn flow_stats_entry(
    version: u8,
    dialect: Dialect,
    r: &Rule,
    c: &FlowCounters,
) -> Result<Vec<u8>, String> {
    let mut w = Writer::new();
    let cx = Ctx {
        version,
        matching: &r.matching,
    };
    match dialect {
        Dialect::Of10 => {
            w.u16(0);
            w.u8(r.table);
            w.u8(0);
            ofp10::put(&mut w, &r.matching)?;
            w.u32(c.duration_s);
            w.u32(c.duration_ns);
            w.u16(r.priority);
            w.u16(r.idle_timeout);
            w.u16(r.hard_timeout);
            w.zeros(6);
            w.u64(r.cookie);
            w.u64(c.packets);
            w.u64(c.bytes);
            actions::put_of10_actions(&mut w, &r.actions, &r.write_actions, cx)?;
        }
        Dialect::Nx => {
            w.u16(0);
            w.u8(r.table);
            w.u8(0);
            w.u32(c.duration_s);
            w.u32(c.duration_ns);
            w.u16(r.priority);
            w.u16(r.idle_timeout);
            w.u16(r.hard_timeout);
            let ml_at = w.len();
            w.u16(0);
            w.u16(c.idle_age.saturating_add(1));
            w.u16(0);
            w.u64(r.cookie);
            w.u64(c.packets);
            w.u64(c.bytes);
            let ms = w.len();
            nxm::put_match(&mut w, &r.matching, false)?;
            let ml = (w.len() - ms) as u16;
            w.patch_u16(ml_at, ml);
            w.pad8_from(ms);
            actions::put_of10_actions(&mut w, &r.actions, &r.write_actions, cx)?;
        }
        Dialect::Oxm if version >= OFP15 => {
            w.u16(0);
            w.zeros(2);
            w.u8(r.table);
            w.u8(0);
            w.u16(r.priority);
            w.u16(r.idle_timeout);
            w.u16(r.hard_timeout);
            w.u16(u16::from(r.flags));
            w.u16(r.importance);
            w.u64(r.cookie);
            put_oxm_match(&mut w, &r.matching)?;
            put_oxs(
                &mut w,
                &[
                    (
                        0,
                        8,
                        (u64::from(c.duration_s) << 32) | u64::from(c.duration_ns),
                    ),
                    (1, 8, u64::from(c.idle_age) << 32),
                    (4, 8, c.packets),
                    (5, 8, c.bytes),
                ],
            );
            actions::put_instructions(&mut w, &r.actions, &r.write_actions, cx)?;
        }
        Dialect::Oxm => {
            w.u16(0);
            w.u8(r.table);
            w.u8(0);
            w.u32(c.duration_s);
            w.u32(c.duration_ns);
            w.u16(r.priority);
            w.u16(r.idle_timeout);
            w.u16(r.hard_timeout);
            w.u16(u16::from(r.flags));
            if version >= OFP14 {
                w.u16(r.importance);
                w.zeros(2);
            } else {
                w.zeros(4);
            }
            w.u64(r.cookie);
            w.u64(c.packets);
            w.u64(c.bytes);
            put_oxm_match(&mut w, &r.matching)?;
            actions::put_instructions(&mut w, &r.actions, &r.write_actions, cx)?;
        }
    }
    let n = w.len() as u16;
    w.patch_u16(0, n);
    Ok(w.buf)
}

/// Writes an OpenFlow 1.1+ `ofp_match` of type OXM with its padding.
pub fn put_oxm_match(w: &mut Writer, m: &Match) -> Result<(), String> {
    let s = w.len();
    w.u16(1);
    w.u16(0);
    nxm::put_match(w, m, true)?;
    let len = (w.len() - s) as u16;
    w.patch_u16(s + 2, len);
    w.pad8_from(s);
    Ok(())
}

/// OpenFlow 1.5's statistics (OXS): `(field, length, value)` entries
/// of the OpenFlow basic class 0x8002, with the 4-byte header and padding.
pub(super) fn put_oxs(w: &mut Writer, stats: &[(u8, u8, u64)]) {
    let s = w.len();
    w.u16(0);
    w.u16(0);
    for &(field, len, v) in stats {
        w.u32(nxm::header(0x8002, field, len));
        w.uint(u128::from(v), usize::from(len));
    }
    let n = (w.len() - s) as u16;
    w.patch_u16(s + 2, n);
    w.pad8_from(s);
}

/// The AGGREGATE reply body.
pub fn aggregate_body(
    version: u8,
    dialect: Dialect,
    packets: u64,
    bytes: u64,
    flows: u32,
) -> Vec<u8> {
    let mut w = Writer::new();
    if version >= OFP15 && dialect == Dialect::Oxm {
        put_oxs(
            &mut w,
            &[(4, 8, packets), (5, 8, bytes), (3, 4, u64::from(flows))],
        );
        return w.buf;
    }
    w.u64(packets);
    w.u64(bytes);
    w.u32(flows);
    w.zeros(4);
    w.buf
}

/// A PACKET_IN: `reason` (0 no match, 1 action, ...), the frame cut to
/// `max_len`, the port it came in on, the table and cookie of the flow
/// that sent it.
#[allow(clippy::too_many_arguments)]
pub fn encode_packet_in(
    version: u8,
    frame: &[u8],
    max_len: usize,
    in_port: u32,
    reason: u8,
    table: u8,
    cookie: u64,
) -> Vec<u8> {
    let data = &frame[..frame.len().min(max_len)];
    let mut w = header::start(version, MsgType::PacketIn, 0);
    w.u32(0xffff_ffff);
    w.u16(frame.len().min(usize::from(u16::MAX)) as u16);
    if version == OFP10 {
        w.u16(in_port as u16);
        w.u8(reason);
        w.u8(0);
    } else {
        w.u8(reason);
        w.u8(table);
        w.u64(cookie);
        let mut m = Match::catchall();
        m.set_field_masked(
            flowpath_flow::FieldId::InPort.info(),
            u128::from(in_port),
            0xffff,
        );
        // Cannot fail for an in_port-only match.
        let _ = put_oxm_match(&mut w, &m);
        w.zeros(2);
    }
    w.bytes(data);
    header::finish(w)
}

/// The BARRIER reply.
pub fn encode_barrier_reply(version: u8, xid: u32) -> Vec<u8> {
    encode_simple(version, MsgType::BarrierReply, xid, &[])
}
