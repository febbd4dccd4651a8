//! Tunnel ports, the underlay, its routes and neighbours: what translation
//! needs to encapsulate a packet (native tunnelling, as Open vSwitch's
//! userspace datapath does it) and to recognise one to decapsulate.
//!
//! What:
//! - [`TunnelPort`]: an OpenFlow port of the bridge that is a VXLAN,
//!   Geneve or GRE tunnel (`vxlan:remote_ip=IP|flow,key=K|flow,...`).
//!   Tunnel ports with the same kind and UDP port share one datapath port
//!   (OVS's `vxlan_sys_4789`): a received packet's `tnl_pop` names it, and
//!   translation picks the OpenFlow port by the outer source, destination
//!   and key, as OVS's `tnl_port_receive`.
//! - [`Underlay`]: the interface the outer packets use, its MAC and
//!   addresses (the tunnel endpoint), and [`Route`]s (connected subnets,
//!   a gateway, `ovs/route/add`).
//! - [`Neighbours`]: the IP → MAC table the outer Ethernet header's
//!   destination comes from, learned by snooping ARP on the underlay, set
//!   by hand (`tnl/neigh/set`), and the addresses translation found
//!   missing ([`Neighbours::take_wanted`]) for the switch to ask for.
//!
//! Why here: translation reads them (through [`crate::tables::Lookup::tunnels`]);
//! the switch fills them. Changes to the neighbours bump a generation that
//! the revalidator compares, so megaflows translated without a neighbour
//! are translated again once it is known.
//!
//! Threads: [`Tunnels`] is shared by every translation; the neighbour
//! table is behind a mutex (taken per translation that outputs to a
//! tunnel or sees an ARP on the underlay, never per packet of a megaflow).

use flowpath_wire::tunnel::{TlvEntry, TlvMap, TunnelKind, TLV_FIELDS};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

pub use crate::tunnel_dad::{Dad, DadState, DAD_WAIT_MS};
pub use crate::tunnel_neigh::{
    Neigh, Neighbours, DEFAULT_AGING_SECS, MAX_AGING_SECS, REFRESH_BEFORE_MS,
};
pub use crate::tunnel_route::{connected_routes, Route};
pub use crate::tunnel_tlv::TlvTable;

/// The datapath port of the underlay interface (no OpenFlow port: the
/// bridge never sees its packets, only their decapsulated insides).
pub const UNDERLAY_PORT: u32 = 0xfd00;
/// The first datapath port number of the tunnel classes (one per kind and
/// UDP port), above every OpenFlow port number a bridge gives.
pub const FIRST_VPORT: u32 = 0xfe00;

/// Where a tunnel's remote endpoint comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remote {
    /// A fixed address.
    Ip(IpAddr),
    /// The flow's `tun_dst` / `tun_ipv6_dst` (`remote_ip=flow`).
    Flow,
}

/// Where a tunnel's key (VNI, GRE key) comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// A fixed key (`key=K`); 0 for none.
    Fixed(u64),
    /// The flow's `tun_id` (`key=flow`).
    Flow,
}

/// One tunnel port. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelPort {
    /// Its OpenFlow port number.
    pub ofport: u32,
    /// VXLAN, Geneve or GRE.
    pub kind: TunnelKind,
    /// The remote endpoint.
    pub remote: Remote,
    /// The local endpoint (`local_ip=`), if it must be one address.
    pub local: Option<IpAddr>,
    /// The key packets received on the port carry (`in_key`, or `key`).
    pub key: Key,
    /// The key packets sent to the port get (`out_key`, or `key`).
    pub out_key: Key,
    /// The UDP destination port (VXLAN, Geneve).
    pub dst_port: u16,
    /// Outer checksums (`csum=true|false`), as OVS 3.1: UDP ones over IPv6
    /// always, over IPv4 with `csum=true`; GRE's only with `csum=true`.
    pub csum: Option<bool>,
    /// Outer TTL (`ttl=`, default 64).
    pub ttl: u8,
    /// Outer ToS (`tos=`, default 0).
    pub tos: u8,
    /// `ttl=inherit`: an IP packet's outer TTL is its own.
    pub ttl_inherit: bool,
    /// `tos=inherit`: an IP packet's outer DSCP is its own.
    pub tos_inherit: bool,
    /// Set don't-fragment on IPv4 (`df_default=`, default true).
    pub df: bool,
}

impl TunnelPort {
    /// Parses `KIND:OPT=V,...` (`vxlan:remote_ip=172.31.1.1,key=5`) for
    /// OpenFlow port `ofport`. Options: `remote_ip` (IP or `flow`,
    /// required), `local_ip`, `key` (number or `flow`; or `in_key` and
    /// `out_key` apart: the key received packets must carry and the one
    /// sent packets get), `dst_port`, `csum`, `ttl`, `tos`, `df_default`.
    pub fn parse(ofport: u32, spec: &str) -> Result<TunnelPort, String> {
        let (kind, opts) = spec.split_once(':').unwrap_or((spec, ""));
        let kind = match kind {
            "vxlan" => TunnelKind::Vxlan,
            "geneve" => TunnelKind::Geneve,
            "gre" => TunnelKind::Gre,
            _ => return Err(format!("{kind}: not a tunnel kind (vxlan, geneve or gre)")),
        };
        let mut t = TunnelPort {
            ofport,
            kind,
            remote: Remote::Flow,
            local: None,
            key: Key::Fixed(0),
            out_key: Key::Fixed(0),
            dst_port: kind.default_port(),
            csum: None,
            ttl: 64,
            tos: 0,
            ttl_inherit: false,
            tos_inherit: false,
            df: true,
        };
        let mut have_remote = false;
        for o in opts.split(',').filter(|o| !o.is_empty()) {
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| format!("{spec}: option '{o}' needs a value ({o}=...)"))?;
            let bad = |what: &str| format!("{spec}: {k}={v}: {what}");
            match k {
                "remote_ip" => {
                    have_remote = true;
                    t.remote = if v == "flow" {
                        Remote::Flow
                    } else {
                        Remote::Ip(v.parse().map_err(|_| bad("not an IP address or 'flow'"))?)
                    };
                }
                "local_ip" => {
                    if v == "flow" {
                        return Err(bad("local_ip=flow is not supported by flowpath"));
                    }
                    t.local = Some(v.parse().map_err(|_| bad("not an IP address"))?);
                }
                "key" | "in_key" | "out_key" => {
                    let key = if v == "flow" {
                        Key::Flow
                    } else {
                        Key::Fixed(parse_num(v).ok_or_else(|| bad("not a number or 'flow'"))?)
                    };
                    if k != "out_key" {
                        t.key = key;
                    }
                    if k != "in_key" {
                        t.out_key = key;
                    }
                }
                "dst_port" => {
                    if kind == TunnelKind::Gre {
                        return Err(bad("GRE has no UDP port"));
                    }
                    t.dst_port = v.parse().map_err(|_| bad("not a UDP port"))?;
                }
                "csum" => t.csum = Some(parse_bool(v).ok_or_else(|| bad("true or false expected"))?),
                "df_default" => t.df = parse_bool(v).ok_or_else(|| bad("true or false expected"))?,
                "ttl" if v == "inherit" => t.ttl_inherit = true,
                "ttl" => {
                    t.ttl = v
                        .parse()
                        .map_err(|_| bad("a TTL (0-255) or 'inherit' expected"))?;
                }
                "tos" if v == "inherit" => t.tos_inherit = true,
                "tos" => {
                    t.tos = v
                        .parse()
                        .map_err(|_| bad("a ToS (0-255) or 'inherit' expected"))?;
                }
                // Taken with no effect, as Open vSwitch 3.1's userspace
                // datapath: its routes carry no packet marks, and it
                // neither pushes nor reads a VXLAN-GBP header.
                "egress_pkt_mark" => {}
                "exts" if v == "gbp" && kind == TunnelKind::Vxlan => {}
                "packet_type" if v == "legacy_l2" => {}
                "seq" if v == "false" => {}
                "exts" | "packet_type" | "seq" => {
                    return Err(bad(
                        "not supported by flowpath (Ethernet frames only: packet_type=legacy_l2, exts=gbp, seq=false)",
                    ))
                }
                "psk" | "remote_cert" | "remote_name" => {
                    return Err(bad("IPsec tunnels are not supported by flowpath"))
                }
                _ => {
                    return Err(format!(
                        "{spec}: unknown tunnel option '{k}' (remote_ip, local_ip, key, in_key, out_key, dst_port, csum, ttl, tos, df_default, egress_pkt_mark, exts, packet_type, seq)"
                    ))
                }
            }
        }
        if !have_remote {
            return Err(format!(
                "{spec}: a tunnel needs remote_ip=IP or remote_ip=flow"
            ));
        }
        let max_key = if kind == TunnelKind::Gre {
            u64::from(u32::MAX)
        } else {
            0xff_ffff
        };
        for k in [t.key, t.out_key] {
            let Key::Fixed(k) = k else {
                continue;
            };
            if k > max_key {
                return Err(format!(
                    "{spec}: key {k:#x} does not fit the {}-bit key of {}",
                    if kind == TunnelKind::Gre { 32 } else { 24 },
                    kind.name()
                ));
            }
        }
        Ok(t)
    }

    /// The options as `tnl/ports/show` and the port's description print
    /// them.
    pub fn describe(&self) -> String {
        let mut s = format!("{}:", self.kind.name());
        match self.remote {
            Remote::Ip(ip) => s.push_str(&format!("remote_ip={ip}")),
            Remote::Flow => s.push_str("remote_ip=flow"),
        }
        if let Some(l) = self.local {
            s.push_str(&format!(",local_ip={l}"));
        }
        let text = |k: Key| match k {
            Key::Fixed(k) => k.to_string(),
            Key::Flow => "flow".to_string(),
        };
        match (self.key, self.out_key) {
            (Key::Fixed(0), Key::Fixed(0)) => {}
            (i, o) if i == o => s.push_str(&format!(",key={}", text(i))),
            (i, o) => s.push_str(&format!(",in_key={},out_key={}", text(i), text(o))),
        }
        if self.kind != TunnelKind::Gre && self.dst_port != self.kind.default_port() {
            s.push_str(&format!(",dst_port={}", self.dst_port));
        }
        if let Some(c) = self.csum {
            s.push_str(&format!(",csum={c}"));
        }
        if self.tos_inherit {
            s.push_str(",tos=inherit");
        }
        if self.ttl_inherit {
            s.push_str(",ttl=inherit");
        }
        s
    }
}

/// Parses `{class=C,type=T,len=L}->tun_metadataN[,...]` (OVS's
/// `add-tlv-map` syntax); lengths 4 or 8, fields 0..7.
pub fn parse_tlv_map(spec: &str) -> Result<Vec<(usize, TlvEntry)>, String> {
    let mut out = Vec::new();
    let mut rest = spec.trim();
    while !rest.is_empty() {
        let bad = |what: &str| format!("{spec}: {what}");
        let body = rest
            .strip_prefix('{')
            .and_then(|r| r.split_once('}'))
            .ok_or_else(|| bad("expected {class=C,type=T,len=L}->tun_metadataN"))?;
        let (opt, after) = body;
        let after = after
            .trim_start()
            .strip_prefix("->")
            .ok_or_else(|| bad("expected ->tun_metadataN after the option"))?;
        let (field, next) = after.split_once(',').unwrap_or((after, ""));
        let n: usize = field
            .trim()
            .strip_prefix("tun_metadata")
            .and_then(|n| n.parse().ok())
            .filter(|n| *n < TLV_FIELDS)
            .ok_or_else(|| {
                bad(&format!(
                    "{field}: flowpath maps tun_metadata0 to tun_metadata{}",
                    TLV_FIELDS - 1
                ))
            })?;
        let mut e = TlvEntry::default();
        for kv in opt.split(',') {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad(&format!("'{kv}': expected NAME=VALUE")))?;
            let v = parse_num(v.trim()).ok_or_else(|| bad(&format!("{k}={v}: not a number")))?;
            match k.trim() {
                "class" => e.class = u16::try_from(v).map_err(|_| bad("class is 16 bits"))?,
                "type" => e.typ = u8::try_from(v).map_err(|_| bad("type is 8 bits"))?,
                "len" if v == 4 || v == 8 => e.len = v as u8,
                "len" => {
                    return Err(bad(&format!(
                        "len={v}: flowpath maps options of 4 or 8 bytes"
                    )))
                }
                k => return Err(bad(&format!("unknown key '{k}' (class, type, len)"))),
            }
        }
        if e.len == 0 {
            return Err(bad("len= is missing"));
        }
        out.push((n, e));
        rest = next.trim();
    }
    Ok(out)
}

/// `dump-tlv-map`, as `ovs-ofctl dump-tlv-map` prints the table.
pub fn format_tlv_map(map: &TlvMap) -> String {
    let used: usize = map.iter().map(|e| usize::from(e.len)).sum();
    let mut s = format!(
        " max option space={} max fields={TLV_FIELDS}\n allocated option space={used}\n\n mapping table:\n  class  type  length  match field\n ------  ----  ------  --------------\n",
        TLV_FIELDS * 8
    );
    for (i, e) in map.iter().enumerate().filter(|(_, e)| e.len != 0) {
        s.push_str(&format!(
            "{:>7}{:>6}{:>8}  tun_metadata{i}\n",
            format!("{:#x}", e.class),
            format!("{:#x}", e.typ),
            e.len
        ));
    }
    s
}

fn parse_num(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Why a TLV table change was refused (Open vSwitch's `NXTTMFC_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlvModError {
    /// Not add, delete or clear.
    BadCommand,
    /// An option length other than 4 or 8 bytes.
    BadOptLen,
    /// A field index past `tun_metadata7`.
    BadFieldIdx,
    /// The field is mapped to another option.
    AlreadyMapped,
    /// The option is mapped to another field.
    DupEntry,
    /// A mapping to delete is used by a flow or group (match or action).
    InvalidTlvDel,
}

/// Which of `tun_metadata0..7` the flows `rules` and the groups `groups`
/// use, in their match or their actions (bit N: `tun_metadataN`): the
/// mappings Open vSwitch refuses to delete (`NXTTMFC_INVALID_TLV_DEL`:
/// its variable-length fields are reference-counted by the flows and
/// groups that name them).
pub fn tlv_fields_used<'a>(
    rules: impl IntoIterator<Item = &'a crate::rule::Rule>,
    groups: &[crate::group::Group],
) -> u8 {
    // (By the printed form: a field appears as `tun_metadataN` in a match
    // (any non-zero mask prints) and a set_field, as
    // `NXM_NX_TUN_METADATAN` in load, move, learn and the rest.)
    fn scan(text: &str, used: &mut u8) {
        let lower = text.to_ascii_lowercase();
        let mut rest = lower.as_str();
        while let Some(at) = rest.find("tun_metadata") {
            rest = &rest[at + "tun_metadata".len()..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if let Ok(n) = rest[..digits].parse::<usize>() {
                if n < TLV_FIELDS {
                    *used |= 1 << n;
                }
            }
        }
    }
    let mut used = 0u8;
    for r in rules.into_iter().filter(|r| may_use_tlv_fields(r)) {
        scan(&r.to_string(), &mut used);
    }
    for g in groups {
        scan(&g.to_string(), &mut used);
    }
    used
}

/// The `tun_metadataN` fields `rule` uses (bit N) that `map` does not
/// map: an OpenFlow flow_mod with any is refused with
/// `NXFMFC_INVALID_TLV_FIELD`, as Open vSwitch refuses it.
pub fn unmapped_tlv_fields(rule: &crate::rule::Rule, map: &TlvMap) -> u8 {
    let mapped = map
        .iter()
        .enumerate()
        .filter(|(_, e)| e.len != 0)
        .fold(0u8, |a, (i, _)| a | 1 << i);
    tlv_fields_used(std::iter::once(rule), &[]) & !mapped
}

/// Whether `rule` may use a `tun_metadataN`: it matches option bits, or
/// an action names a field. False for most flows (outputs, resubmits,
/// VLAN and MPLS pushes, ...), whose printed form [`tlv_fields_used`]
/// then need not read.
fn may_use_tlv_fields(rule: &crate::rule::Rule) -> bool {
    use crate::action::Action as A;
    let m = &rule.matching.mask.w;
    let matches = m[flowpath_flow::key::W_TUN_MD..][..TLV_FIELDS]
        .iter()
        .any(|&w| w != 0)
        || (m[flowpath_flow::key::W_TUN_GBP] >> flowpath_flow::key::TUN_MD_PRESENT_SHIFT) & 0xff
            != 0;
    let fieldless = |a: &A| {
        matches!(
            a,
            A::Note(_)
                | A::Output(_)
                | A::OutputTrunc { .. }
                | A::Group(_)
                | A::SetQueue(_)
                | A::PopQueue
                | A::Enqueue { .. }
                | A::InPort
                | A::All
                | A::Flood
                | A::Normal
                | A::Controller { .. }
                | A::Resubmit { .. }
                | A::GotoTable(_)
                | A::ClearActions
                | A::WriteActions
                | A::DecTtl
                | A::DecTtlIds { .. }
                | A::PushVlan(_)
                | A::PopVlan
                | A::ModVlanVid(_)
                | A::ModVlanPcp(_)
                | A::Conjunction { .. }
                | A::FinTimeout { .. }
                | A::PushMpls(_)
                | A::PopMpls(_)
                | A::SetMplsLabel(_)
                | A::SetMplsTc(_)
                | A::SetMplsTtl(_)
                | A::DecMplsTtl
                | A::CtClear
                | A::WriteMetadata { .. }
        )
    };
    matches || !rule.actions.iter().all(fieldless) || !rule.write_actions.iter().all(fieldless)
}

/// The underlay interface: its datapath port, MAC and endpoint addresses
/// (with their prefix lengths).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Underlay {
    /// Its datapath port ([`UNDERLAY_PORT`]).
    pub port: u32,
    /// The interface's name (for `ovs/route/show`).
    pub name: String,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// The endpoint addresses flowpath owns on it.
    pub addrs: Vec<(IpAddr, u8)>,
    /// The addresses are the kernel's, on a bridge's LOCAL interface
    /// (Open vSwitch's `br-phy`): the kernel answers ARP and neighbour
    /// solicitations for them, translation only learns from them.
    pub kernel: bool,
}

/// Everything translation needs about tunnels. See the module
/// documentation.
#[derive(Debug)]
pub struct Tunnels {
    /// The ports (added and removed while the switch runs: `dpctl/add-if`,
    /// the OVSDB's tunnel interfaces).
    ports: RwLock<Vec<TunnelPort>>,
    /// (kind, UDP port) of each datapath tunnel class; class `i` is
    /// datapath port `FIRST_VPORT + i` (a class stays once made: its
    /// number is in megaflows).
    classes: RwLock<Vec<(TunnelKind, u16)>>,
    /// Set at start (`--underlay`) or later (a bridge's LOCAL interface
    /// found to carry the endpoint's address).
    underlay: RwLock<Option<Arc<Underlay>>>,
    routes: RwLock<Vec<Route>>,
    /// The Geneve option map (`add-tlv-map`).
    tlv: Arc<TlvTable>,
    /// The UDP source port range (`tnl/egress_port_range`): min << 16 | max.
    port_range: std::sync::atomic::AtomicU32,
    /// The neighbour table.
    pub neigh: Neighbours,
    /// Duplicate address detection of the IPv6 endpoint addresses.
    pub dad: Dad,
}

/// The most tunnel classes (datapath ports `FIRST_VPORT..`, below 0xff00,
/// OpenFlow's reserved ports).
pub const MAX_CLASSES: usize = 0xff00 - FIRST_VPORT as usize;

/// Whether port spec `spec` names a tunnel port (`vxlan:`, `geneve:` or
/// `gre:` before its options).
pub fn is_tunnel_spec(spec: &str) -> bool {
    matches!(
        spec.split_once(':').map(|(k, _)| k),
        Some("vxlan" | "geneve" | "gre")
    )
}

/// Tunnel port `p`'s class: its kind and UDP port (0 for GRE).
fn class_of(p: &TunnelPort) -> (TunnelKind, u16) {
    (
        p.kind,
        if p.kind == TunnelKind::Gre {
            0
        } else {
            p.dst_port
        },
    )
}

impl Tunnels {
    /// Tunnels over `underlay` (none: tunnel ports can send nothing), with
    /// the connected routes of its addresses and a default route through
    /// each gateway in `gws`.
    pub fn new(ports: Vec<TunnelPort>, underlay: Option<Underlay>, gws: &[IpAddr]) -> Tunnels {
        let mut classes: Vec<(TunnelKind, u16)> = Vec::new();
        for p in &ports {
            let c = class_of(p);
            if !classes.contains(&c) {
                classes.push(c);
            }
        }
        let routes = underlay
            .as_ref()
            .map_or_else(Vec::new, |u| connected_routes(u, gws));
        Tunnels {
            ports: RwLock::new(ports),
            classes: RwLock::new(classes),
            underlay: RwLock::new(underlay.map(Arc::new)),
            routes: RwLock::new(routes),
            tlv: Arc::default(),
            port_range: std::sync::atomic::AtomicU32::new(
                u32::from(flowpath_wire::tunnel::DEFAULT_PORT_MIN) << 16
                    | u32::from(flowpath_wire::tunnel::DEFAULT_PORT_MAX),
            ),
            neigh: Neighbours::default(),
            dad: Dad::default(),
        }
    }

    /// The tunnel ports.
    pub fn ports(&self) -> Vec<TunnelPort> {
        self.ports.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The tunnel port with OpenFlow number `ofport`.
    pub fn port(&self, ofport: u32) -> Option<TunnelPort> {
        self.ports
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|p| p.ofport == ofport)
            .cloned()
    }

    /// Adds tunnel port `p` (its class made if new); refused when its
    /// number is taken or every tunnel datapath port is.
    pub fn add_port(&self, p: TunnelPort) -> Result<(), String> {
        let mut ports = self.ports.write().unwrap_or_else(|e| e.into_inner());
        if ports.iter().any(|q| q.ofport == p.ofport) {
            return Err(format!("port {} exists", p.ofport));
        }
        let mut classes = self.classes.write().unwrap_or_else(|e| e.into_inner());
        let c = class_of(&p);
        if !classes.contains(&c) {
            if classes.len() >= MAX_CLASSES {
                return Err(format!(
                    "{}: at most {MAX_CLASSES} kinds and UDP ports of tunnels",
                    p.describe()
                ));
            }
            classes.push(c);
        }
        ports.push(p);
        ports.sort_by_key(|q| q.ofport);
        Ok(())
    }

    /// Removes tunnel port `ofport`; false if there is none.
    pub fn del_port(&self, ofport: u32) -> bool {
        let mut ports = self.ports.write().unwrap_or_else(|e| e.into_inner());
        let n = ports.len();
        ports.retain(|p| p.ofport != ofport);
        ports.len() != n
    }

    /// The underlay.
    pub fn underlay(&self) -> Option<Arc<Underlay>> {
        self.underlay
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the underlay and the routes not added by the user with
    /// `routes` (the user's take the new underlay's source address, or go
    /// when it has none of their family). Returns whether anything
    /// changed (translations then done again).
    pub fn set_underlay(&self, u: Option<Underlay>, routes: Vec<Route>) -> bool {
        let mut cur = self.underlay.write().unwrap_or_else(|e| e.into_inner());
        let mut rs = self.routes.write().unwrap_or_else(|e| e.into_inner());
        let mut next: Vec<Route> = routes;
        for r in rs.iter().filter(|r| r.user) {
            let src = u.as_ref().and_then(|u| {
                u.addrs
                    .iter()
                    .find(|(a, _)| a.is_ipv4() == r.prefix.is_ipv4())
                    .map(|(a, _)| *a)
            });
            if let Some(src) = src {
                next.push(Route { src, ..*r });
            }
        }
        let same = cur.as_deref() == u.as_ref() && {
            let mut a = rs.clone();
            let mut b = next.clone();
            let k = |r: &Route| (r.prefix, r.plen, r.gw, r.src, r.user);
            a.sort_by_key(k);
            b.sort_by_key(k);
            a == b
        };
        if same {
            return false;
        }
        *cur = u.map(Arc::new);
        *rs = next;
        drop((cur, rs));
        self.neigh.bump();
        true
    }

    /// The datapath port of tunnel port `p`'s class.
    pub fn vport(&self, p: &TunnelPort) -> u32 {
        let c = class_of(p);
        let classes = self.classes.read().unwrap_or_else(|e| e.into_inner());
        let i = classes.iter().position(|x| *x == c).unwrap_or(0);
        FIRST_VPORT + i as u32
    }

    /// The tunnel classes: (datapath port, kind, UDP port).
    pub fn classes(&self) -> Vec<(u32, TunnelKind, u16)> {
        self.classes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .enumerate()
            .map(|(i, &(k, p))| (FIRST_VPORT + i as u32, k, p))
            .collect()
    }

    /// The kind of datapath tunnel port `vport`, if it is one.
    pub fn vport_kind(&self, vport: u32) -> Option<TunnelKind> {
        let i = vport.checked_sub(FIRST_VPORT)? as usize;
        let classes = self.classes.read().unwrap_or_else(|e| e.into_inner());
        classes.get(i).map(|c| c.0)
    }

    /// The OpenFlow port a packet decapsulated on datapath port `vport`
    /// belongs to, by its outer source, destination and key (OVS's
    /// `tnl_find`: exact remote and key first, then `key=flow`, then
    /// `remote_ip=flow`, then both).
    pub fn receive(&self, vport: u32, src: IpAddr, dst: IpAddr, tun_id: u64) -> Option<u32> {
        let i = vport.checked_sub(FIRST_VPORT)? as usize;
        let class = *self
            .classes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(i)?;
        let mut best: Option<(u8, u32)> = None;
        for p in self.ports.read().unwrap_or_else(|e| e.into_inner()).iter() {
            if class_of(p) != class || p.local.is_some_and(|l| l != dst) {
                continue;
            }
            let remote = match p.remote {
                Remote::Ip(ip) if ip == src => 2,
                Remote::Ip(_) => continue,
                Remote::Flow => 0,
            };
            let key = match p.key {
                Key::Fixed(k) if k == tun_id => 1,
                Key::Fixed(_) => continue,
                Key::Flow => 0,
            };
            let score = remote + key;
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, p.ofport));
            }
        }
        best.map(|(_, p)| p)
    }

    /// The route to `dst`: (next hop, source address), longest prefix
    /// first.
    pub fn route(&self, dst: IpAddr) -> Option<(IpAddr, IpAddr)> {
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        routes
            .iter()
            .filter(|r| r.holds(dst))
            .max_by_key(|r| r.plen)
            .map(|r| (r.gw.unwrap_or(dst), r.src))
    }

    /// Every route, longest prefix first.
    pub fn routes(&self) -> Vec<Route> {
        let mut r = self
            .routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        r.sort_by_key(|b| std::cmp::Reverse(b.plen));
        r
    }

    /// Adds a route (`ovs/route/add`): the source is the underlay's
    /// address of the same family. Err when there is none.
    pub fn add_route(&self, prefix: IpAddr, plen: u8, gw: Option<IpAddr>) -> Result<(), String> {
        let max = if prefix.is_ipv4() { 32 } else { 128 };
        if plen > max {
            return Err(format!("{prefix}/{plen}: prefix length over {max}"));
        }
        let src = self
            .underlay()
            .and_then(|u| {
                u.addrs
                    .iter()
                    .find(|(a, _)| a.is_ipv4() == prefix.is_ipv4())
                    .map(|(a, _)| *a)
            })
            .ok_or_else(|| {
                format!("{prefix}/{plen}: the underlay has no address of this family")
            })?;
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.retain(|r| !(r.prefix == prefix && r.plen == plen));
        routes.push(Route {
            prefix,
            plen,
            gw,
            src,
            user: true,
        });
        drop(routes);
        self.neigh.bump();
        Ok(())
    }

    /// Deletes a route (`ovs/route/del`); false when there was none.
    pub fn del_route(&self, prefix: IpAddr, plen: u8) -> bool {
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        let n = routes.len();
        routes.retain(|r| !(r.prefix == prefix && r.plen == plen));
        let gone = routes.len() != n;
        drop(routes);
        if gone {
            self.neigh.bump();
        }
        gone
    }

    /// The UDP source port range of encapsulated packets.
    pub fn port_range(&self) -> (u16, u16) {
        let r = self.port_range.load(Ordering::Acquire);
        ((r >> 16) as u16, r as u16)
    }

    /// Sets it (the bounds in either order, as OVS).
    pub fn set_port_range(&self, a: u16, b: u16) {
        let (min, max) = (a.min(b), a.max(b));
        self.port_range
            .store(u32::from(min) << 16 | u32::from(max), Ordering::Release);
        self.neigh.bump();
    }

    /// The Geneve option map.
    pub fn tlv(&self) -> TlvMap {
        self.tlv.get()
    }

    /// The Geneve option map's table (shared with the bridge's rule set).
    pub fn tlv_table(&self) -> Arc<TlvTable> {
        self.tlv.clone()
    }

    /// The option map changed: the megaflows are translated again (the
    /// map is in their actions).
    pub fn tlv_changed(&self) {
        self.neigh.bump();
    }

    /// [`TlvTable::add`], then [`Tunnels::tlv_changed`].
    pub fn add_tlv(&self, spec: &str) -> Result<(), String> {
        self.tlv.add(spec)?;
        self.tlv_changed();
        Ok(())
    }

    /// The underlay address `ip` is one of ours (and not tentative).
    pub fn is_local(&self, ip: IpAddr) -> bool {
        self.has_address(ip) && self.dad.usable(ip)
    }

    /// `ip` is one of the underlay's addresses, usable or not.
    pub fn has_address(&self, ip: IpAddr) -> bool {
        self.underlay()
            .is_some_and(|u| u.addrs.iter().any(|(a, _)| *a == ip))
    }

    /// Duplicate address detection's round at `now_ms` (see [`Dad`]): the
    /// addresses to send a solicitation for now; those that became usable
    /// retranslate what was cached while they were not.
    pub fn dad_round(&self, now_ms: u64) -> Vec<std::net::Ipv6Addr> {
        let (probe, ready) = self.dad.tick(now_ms);
        if !ready.is_empty() {
            self.neigh.bump();
        }
        probe
    }

    /// Stops using underlay address `ip` (another node has it): it and
    /// the routes through it go.
    pub fn drop_address(&self, ip: IpAddr) {
        let Some(u) = self.underlay() else {
            return;
        };
        let mut rest = (*u).clone();
        rest.addrs.retain(|(a, _)| *a != ip);
        let routes = self
            .routes()
            .into_iter()
            .filter(|r| !r.user && r.src != ip)
            .collect();
        self.set_underlay(Some(rest), routes);
    }
}

#[cfg(test)]
mod tests;
