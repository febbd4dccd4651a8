//! The tunnel underlay: `--underlay SPEC,ip=ADDR/PLEN[,gw=IP][,mac=MAC]`,
//! the thread that asks for missing neighbours, and the tunnel commands
//! (`tnl/neigh/*`, `tnl/arp/*`, `ovs/route/*`, `tnl/ports/show`).
//!
//! What: flowpath owns the endpoint addresses on the underlay interface:
//! translation answers ARP for them, snoops every ARP it sees there, and
//! decapsulates the tunnel packets sent to them (see
//! `flowpath_ofproto::tunnel`); nothing else received there reaches the
//! bridge. The neighbour thread sends an ARP request, once a second while
//! unanswered, for every next hop a translation found missing and for the
//! fixed remote endpoints of the tunnel ports (so the first packets of a
//! tunnel are not all dropped while the neighbour is learned).
//!
//! Threads: one neighbour thread per switch with an underlay; it sends
//! through the underlay port's first transmit queue (a lock shared with
//! PMD 0, taken once a second at most).

use crate::shared::Shared;
use flowpath_netdev::{PortSpec, TxFrame};
use flowpath_ofproto::tunnel::{Remote, TunnelPort, Tunnels, Underlay, UNDERLAY_PORT};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often unanswered neighbours are asked for again.
pub const ASK_INTERVAL: Duration = Duration::from_secs(1);

/// `--underlay`'s parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnderlayConfig {
    /// The port it is (`afpacket:u0`, `afxdp:u0`, `pcap:...`).
    pub spec: PortSpec,
    /// The endpoint addresses (`ip=`, repeatable).
    pub addrs: Vec<(IpAddr, u8)>,
    /// Gateways (`gw=`): a default route through each.
    pub gws: Vec<IpAddr>,
    /// Its MAC (`mac=`; default: the interface's own).
    pub mac: Option<[u8; 6]>,
}

impl UnderlayConfig {
    /// Parses `SPEC,ip=ADDR/PLEN[,ip=...][,gw=IP][,mac=MAC]`.
    pub fn parse(s: &str) -> Result<UnderlayConfig, String> {
        let mut rest = Vec::new();
        let mut cfg = UnderlayConfig {
            spec: PortSpec::Null,
            addrs: Vec::new(),
            gws: Vec::new(),
            mac: None,
        };
        for tok in s.split(',') {
            if let Some(v) = tok.strip_prefix("ip=") {
                let (a, p) = v
                    .split_once('/')
                    .ok_or_else(|| format!("--underlay {s}: ip={v}: expected ADDR/PLEN"))?;
                let a: IpAddr = a
                    .parse()
                    .map_err(|_| format!("--underlay {s}: ip={v}: not an IP address"))?;
                let max = if a.is_ipv4() { 32 } else { 128 };
                let p: u8 =
                    p.parse().ok().filter(|p| *p <= max).ok_or_else(|| {
                        format!("--underlay {s}: ip={v}: prefix length 0 to {max}")
                    })?;
                cfg.addrs.push((a, p));
            } else if let Some(v) = tok.strip_prefix("gw=") {
                cfg.gws.push(
                    v.parse()
                        .map_err(|_| format!("--underlay {s}: gw={v}: not an IP address"))?,
                );
            } else if let Some(v) = tok.strip_prefix("mac=") {
                cfg.mac = Some(
                    parse_mac(v).ok_or_else(|| format!("--underlay {s}: mac={v}: not a MAC"))?,
                );
            } else {
                rest.push(tok);
            }
        }
        if cfg.addrs.is_empty() {
            return Err(format!(
                "--underlay {s}: the tunnel endpoint's address is missing (ip=ADDR/PLEN)"
            ));
        }
        cfg.spec = PortSpec::parse(&rest.join(",")).map_err(|e| format!("--underlay {s}: {e}"))?;
        Ok(cfg)
    }

    /// The underlay as translation sees it: the interface's MAC unless
    /// one was given (a port without an interface: a fixed local one).
    pub fn underlay(&self) -> Result<Underlay, String> {
        let name = self
            .spec
            .ifname()
            .map_or_else(|| self.spec.to_string(), str::to_string);
        let mac = match (self.mac, self.spec.ifname()) {
            (Some(m), _) => m,
            (None, Some(ifname)) => interface_mac(ifname).ok_or_else(|| {
                format!("--underlay: cannot read the MAC address of {ifname} (give mac=)")
            })?,
            (None, None) => [0x02, 0xfd, 0, 0, 0, 0x01],
        };
        Ok(Underlay {
            port: UNDERLAY_PORT,
            name,
            mac,
            addrs: self.addrs.clone(),
            kernel: false,
        })
    }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut m {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

fn format_mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// An interface's MAC address, from sysfs.
pub fn interface_mac(ifname: &str) -> Option<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{ifname}/address")).ok()?;
    parse_mac(s.trim())
}

/// Builds the tunnels of a switch.
pub fn tunnels(ports: Vec<TunnelPort>, u: Option<&UnderlayConfig>) -> Result<Arc<Tunnels>, String> {
    if !ports.is_empty() && u.is_none() {
        return Err(format!(
            "tunnel port {} needs an underlay: --underlay SPEC,ip=ADDR/PLEN",
            ports[0].ofport
        ));
    }
    let underlay = u.map(UnderlayConfig::underlay).transpose()?;
    Ok(Arc::new(Tunnels::new(
        ports,
        underlay,
        u.map_or(&[][..], |u| &u.gws[..]),
    )))
}

/// An ARP request from `u` (its MAC, source address `spa`) for `tpa`.
fn arp_request(mac: [u8; 6], spa: Ipv4Addr, tpa: Ipv4Addr) -> [u8; 42] {
    let mut f = [0u8; 42];
    f[0..6].fill(0xff);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    f[14..22].copy_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1]);
    f[22..28].copy_from_slice(&mac);
    f[28..32].copy_from_slice(&spa.octets());
    f[38..42].copy_from_slice(&tpa.octets());
    f
}

/// An ICMPv6 neighbour-discovery frame from `mac`/`src` to `dst_mac`/`dst`
/// (hop limit 255) carrying `icmp` (its checksum filled in here).
fn nd_frame(dst_mac: [u8; 6], mac: [u8; 6], src: [u8; 16], dst: [u8; 16], icmp: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 54 + icmp.len()];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    let ip = &mut f[14..54];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&(icmp.len() as u16).to_be_bytes());
    ip[6] = 58;
    ip[7] = 255;
    ip[8..24].copy_from_slice(&src);
    ip[24..40].copy_from_slice(&dst);
    f[54..].copy_from_slice(icmp);
    use flowpath_wire::checksum;
    let pseudo = checksum::pseudo_header_v6(src, dst, 58, icmp.len() as u32);
    let c = !checksum::add(pseudo, checksum::sum(&f[54..]));
    f[56..58].copy_from_slice(&c.to_be_bytes());
    f
}

/// A neighbour solicitation from `mac`/`src` for `target`, to its
/// solicited-node multicast address; from `::` (`src` `None`: duplicate
/// address detection) it carries no link-layer option.
fn neighbour_solicitation(
    mac: [u8; 6],
    src: Option<std::net::Ipv6Addr>,
    target: std::net::Ipv6Addr,
) -> Vec<u8> {
    let t = target.octets();
    let src = src.map_or([0; 16], |s| s.octets());
    let mut dst = [0u8; 16];
    dst[..2].copy_from_slice(&[0xff, 0x02]);
    dst[11..13].copy_from_slice(&[0x01, 0xff]);
    dst[13..].copy_from_slice(&t[13..]);
    let mut icmp = [0u8; 32];
    icmp[0] = 135;
    icmp[8..24].copy_from_slice(&t);
    icmp[24] = 1;
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&mac);
    let len = if src == [0; 16] { 24 } else { 32 };
    let dst_mac = [0x33, 0x33, 0xff, t[13], t[14], t[15]];
    nd_frame(dst_mac, mac, src, dst, &icmp[..len])
}

/// An unsolicited neighbour advertisement of `target` at `mac` to all
/// nodes (override flag set, target link-layer option): what defends an
/// address against another node's duplicate address detection.
fn neighbour_advertisement(mac: [u8; 6], target: std::net::Ipv6Addr) -> Vec<u8> {
    let t = target.octets();
    let dst = std::net::Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1).octets();
    let mut icmp = [0u8; 32];
    icmp[0] = 136;
    icmp[4] = 0x20; // override; neither router nor solicited
    icmp[8..24].copy_from_slice(&t);
    icmp[24] = 2;
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&mac);
    nd_frame([0x33, 0x33, 0, 0, 0, 1], mac, t, dst, &icmp)
}

/// The next hops to ask for now: those translations found missing and
/// the fixed remotes' next hops not yet known.
fn to_ask(t: &Tunnels, now_ms: u64) -> Vec<(IpAddr, IpAddr)> {
    let mut want = t.neigh.take_wanted();
    // Learned entries near the end of their aging time are asked for
    // again (those that no longer answer go when it ends).
    want.extend(t.neigh.expire(now_ms));
    for p in t.ports() {
        if let Remote::Ip(r) = p.remote {
            if let Some((hop, _)) = t.route(r) {
                if t.neigh.lookup(hop).is_none() {
                    want.push(hop);
                }
            }
        }
    }
    want.sort();
    want.dedup();
    want.into_iter()
        .filter_map(|hop| t.route(hop).map(|(_, src)| (hop, src)))
        .collect()
}

/// Duplicate address detection's round (see
/// `flowpath_ofproto::tunnel::Dad`): the solicitations to send now;
/// addresses that became usable retranslate what was cached while they
/// were not, those found duplicate are dropped and logged.
fn dad_round(t: &Tunnels, mac: [u8; 6], now_ms: u64) -> Vec<Vec<u8>> {
    let probe = t.dad_round(now_ms);
    for a in t.dad.duplicates() {
        if t.has_address(IpAddr::V6(a)) {
            eprintln!(
                "flowpath: underlay: {a} is in use by another node (duplicate address detection): not using it"
            );
            t.drop_address(IpAddr::V6(a));
        }
    }
    probe
        .into_iter()
        .map(|a| neighbour_solicitation(mac, None, a))
        .collect()
}

/// Sends the advertisements defending the addresses other nodes are
/// detecting (see `flowpath_ofproto::tunnel::Dad::defend`); returns how
/// many were sent.
pub fn defend_once(sh: &Shared, t: &Tunnels) -> usize {
    let addrs = t.dad.take_defend();
    if addrs.is_empty() {
        return 0;
    }
    let Some(u) = t.underlay() else {
        return 0;
    };
    let frames: Vec<Vec<u8>> = addrs
        .into_iter()
        .map(|a| neighbour_advertisement(u.mac, a))
        .collect();
    send(sh, &frames)
}

/// Sends `frames` out of the underlay port; returns how many went.
fn send(sh: &Shared, frames: &[Vec<u8>]) -> usize {
    let tx = sh.tx();
    let Some(port) = tx.get(UNDERLAY_PORT) else {
        return 0;
    };
    let mut q = crate::ports::TxPort::lock(port.queue_for(0));
    frames
        .iter()
        .map(|f| {
            q.send(&mut std::iter::once(TxFrame {
                data: f,
                vnet: None,
                timestamp_ns: 0,
            }))
        })
        .sum()
}

/// Sends one round of duplicate address detection and neighbour
/// requests; returns how many were sent.
pub fn ask_once(sh: &Shared, t: &Tunnels) -> usize {
    let Some(u) = t.underlay() else {
        return 0;
    };
    let now_ms = sh.started.elapsed().as_millis() as u64;
    let mut frames = dad_round(t, u.mac, now_ms);
    for (hop, src) in to_ask(t, now_ms) {
        match (hop, src) {
            // (Not from an address still under detection.)
            _ if !t.dad.usable(src) => {}
            (IpAddr::V4(hop), IpAddr::V4(src)) => {
                frames.push(arp_request(u.mac, src, hop).to_vec())
            }
            (IpAddr::V6(hop), IpAddr::V6(src)) => {
                frames.push(neighbour_solicitation(u.mac, Some(src), hop))
            }
            _ => {}
        }
    }
    send(sh, &frames)
}

/// The neighbour thread: `each_round` (the underlay's refresh), then a
/// round of requests, every [`ASK_INTERVAL`] until the switch stops.
pub fn run(sh: Arc<Shared>, t: Arc<Tunnels>, mut each_round: impl FnMut(&Arc<Shared>, &Tunnels)) {
    while !sh.stop.load(Ordering::Relaxed) {
        each_round(&sh, &t);
        ask_once(&sh, &t);
        // Sleep in small steps so that a stop is seen quickly, and an
        // address another node is detecting is defended in time (its
        // detection waits a second).
        for _ in 0..10 {
            if sh.stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(ASK_INTERVAL / 10);
            defend_once(&sh, &t);
        }
    }
}

/// `tnl/neigh/show` (= `tnl/arp/show`), as OVS prints it.
pub fn neigh_show(t: Option<&Tunnels>, bridge: &str) -> String {
    // Over another bridge's LOCAL interface, its name (where OVS learns).
    let bridge = t
        .and_then(Tunnels::underlay)
        .filter(|u| u.kernel)
        .map_or_else(|| bridge.to_string(), |u| u.name.clone());
    let mut out =
        String::from("IP                                            MAC                 Bridge\n");
    out.push_str("==========================================================================\n");
    for (ip, n) in t.map(|t| t.neigh.entries()).unwrap_or_default() {
        let _ = writeln!(
            out,
            "{:<46}{}   {bridge}",
            ip.to_string(),
            format_mac(n.mac)
        );
    }
    out
}

/// `tnl/neigh/set BRIDGE IP MAC`.
pub fn neigh_set(t: Option<&Tunnels>, p: &[String], now_ms: u64) -> Result<String, String> {
    let t = t.ok_or("no tunnel underlay (--underlay)")?;
    let ip: IpAddr = p
        .get(1)
        .and_then(|s| s.parse().ok())
        .ok_or("bad IP address")?;
    let mac = p
        .get(2)
        .and_then(|s| parse_mac(s))
        .ok_or("bad MAC address")?;
    t.neigh.set(ip, mac, now_ms);
    Ok("OK\n".into())
}

/// `tnl/neigh/aging [SECS]`: the aging time of learned neighbours, or
/// sets it (1 to 3600 s), as Open vSwitch.
pub fn neigh_aging(t: Option<&Tunnels>, p: &[String]) -> Result<String, String> {
    let t = t.ok_or("no tunnel underlay (--underlay)")?;
    match p.first() {
        None => Ok(format!("{}\n", t.neigh.aging_secs())),
        Some(s) => {
            let secs = s.parse().map_err(|_| format!("bad aging value {s}"))?;
            t.neigh.set_aging_secs(secs)?;
            Ok("OK\n".into())
        }
    }
}

/// `tnl/neigh/flush`.
pub fn neigh_flush(t: Option<&Tunnels>) -> String {
    if let Some(t) = t {
        t.neigh.flush();
    }
    "OK\n".into()
}

/// `ip` with the bits past `plen` cleared.
pub(crate) fn mask(ip: IpAddr, plen: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = if plen == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(plen.min(32)))
            };
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = if plen == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(plen.min(128)))
            };
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

/// `ovs/route/show`, as OVS prints it.
pub fn route_show(t: Option<&Tunnels>) -> String {
    let mut out = String::from("Route Table:\n");
    let Some(t) = t else {
        return out;
    };
    let dev = t.underlay().map_or_else(String::new, |u| u.name.clone());
    for r in t.routes() {
        let _ = write!(
            out,
            "{}{}/{} dev {dev}",
            if r.user { "User: " } else { "Cached: " },
            mask(r.prefix, r.plen),
            r.plen
        );
        if let Some(g) = r.gw {
            let _ = write!(out, " GW {g}");
        }
        let _ = writeln!(out, " SRC {}", r.src);
    }
    out
}

/// Parses `IP/PLEN` (a bare IP: a host route).
fn parse_prefix(s: &str) -> Option<(IpAddr, u8)> {
    let (a, p) = s.split_once('/').unwrap_or((s, ""));
    let a: IpAddr = a.parse().ok()?;
    let max = if a.is_ipv4() { 32 } else { 128 };
    let p = if p.is_empty() { max } else { p.parse().ok()? };
    (p <= max).then_some((a, p))
}

/// `ovs/route/add IP/PLEN BRIDGE [GW]`.
pub fn route_add(t: Option<&Tunnels>, p: &[String]) -> Result<String, String> {
    let t = t.ok_or("no tunnel underlay (--underlay)")?;
    let (a, plen) = p
        .first()
        .and_then(|s| parse_prefix(s))
        .ok_or("Invalid parameters")?;
    let gw = match p.get(2) {
        Some(g) => Some(
            g.parse::<IpAddr>()
                .map_err(|_| "Invalid pkt_mark or gateway")?,
        ),
        None => None,
    };
    t.add_route(mask(a, plen), plen, gw)
        .map_err(|e| format!("Error while inserting route. ({e})"))?;
    Ok("OK\n".into())
}

/// `ovs/route/del IP/PLEN`.
pub fn route_del(t: Option<&Tunnels>, p: &[String]) -> Result<String, String> {
    let t = t.ok_or("no tunnel underlay (--underlay)")?;
    let (a, plen) = p
        .first()
        .and_then(|s| parse_prefix(s))
        .ok_or("Invalid parameters")?;
    if t.del_route(mask(a, plen), plen) {
        Ok("OK\n".into())
    } else {
        Err("Not found".into())
    }
}

/// `tnl/egress_port_range [MIN MAX]`, as OVS answers it.
pub fn egress_port_range(t: Option<&Tunnels>, p: &[String]) -> Result<String, String> {
    let t = t.ok_or("no tunnels (--underlay)")?;
    if p.len() < 2 {
        let (min, max) = t.port_range();
        return Ok(format!("Tunnel UDP source port range: {min}-{max}\n"));
    }
    let num = |s: &str| s.parse::<u16>().ok().filter(|v| *v > 0);
    let Some(a) = num(&p[0]) else {
        return Ok("Invalid min.".into());
    };
    let Some(b) = num(&p[1]) else {
        return Ok("Invalid max.".into());
    };
    t.set_port_range(a, b);
    Ok("OK\n".into())
}

/// `ovs/route/lookup IP`, as OVS prints it.
pub fn route_lookup(t: Option<&Tunnels>, p: &[String]) -> Result<String, String> {
    let t = t.ok_or("no tunnel underlay (--underlay)")?;
    let ip: IpAddr = p
        .first()
        .and_then(|s| s.parse().ok())
        .ok_or("Invalid parameters")?;
    let (hop, src) = t.route(ip).ok_or("Not found")?;
    let gw = if hop == ip {
        "::".to_string()
    } else {
        hop.to_string()
    };
    let dev = t.underlay().map_or_else(String::new, |u| u.name.clone());
    Ok(format!("src {src}\ngateway {gw}\ndev {dev}\n"))
}

/// `add-tlv-map BRIDGE {class=C,type=T,len=L}->tun_metadataN[,...]`.
pub fn tlv_add(sh: &Shared, p: &[String]) -> Result<String, String> {
    sh.tlv.add(&p[1..].join(" "))?;
    tlv_changed(sh);
    Ok(String::new())
}

/// `del-tlv-map BRIDGE [MAPPINGS]` (none: every mapping); refused for a
/// mapping that flows or groups use.
pub fn tlv_del(sh: &Shared, p: &[String]) -> Result<String, String> {
    sh.tlv
        .del(&p.get(1..).unwrap_or(&[]).join(" "), tlv_in_use(sh))?;
    tlv_changed(sh);
    Ok(String::new())
}

/// The option map changed: the tunnels' megaflows are translated again.
pub fn tlv_changed(sh: &Shared) {
    if let Some(t) = &sh.tunnels {
        t.tlv_changed();
    }
}

/// Which `tun_metadataN` the installed flows and groups use (bit N), as
/// [`flowpath_ofproto::tunnel::tlv_fields_used`].
pub fn tlv_in_use(sh: &Shared) -> u8 {
    let st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
    flowpath_ofproto::tunnel::tlv_fields_used(
        st.rules.rules().iter().map(|r| &r.rule),
        st.rules.groups(),
    )
}

/// `dump-tlv-map [BRIDGE]`.
pub fn tlv_dump(sh: &Shared) -> String {
    flowpath_ofproto::tunnel::format_tlv_map(&sh.tlv.get())
}

/// `tnl/ports/show`: each tunnel class's datapath port and the OpenFlow
/// tunnel ports on it.
pub fn ports_show(t: Option<&Tunnels>) -> String {
    let mut out = String::from("Listening ports:\n");
    let Some(t) = t else {
        return out;
    };
    for (vport, kind, udp) in t.classes() {
        let name = if udp == 0 {
            format!("{}_sys", kind.name())
        } else {
            format!("{}_sys_{udp}", kind.name())
        };
        let _ = writeln!(
            out,
            "{name} ({vport}) ref_cnt={}",
            t.ports().iter().filter(|p| t.vport(p) == vport).count()
        );
        for p in t.ports().iter().filter(|p| t.vport(p) == vport) {
            let _ = writeln!(out, "  port {}: {}", p.ofport, p.describe());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn underlay_options_parse_and_refuse() {
        let u = UnderlayConfig::parse(
            "afpacket:u0,ip=172.31.1.100/24,gw=172.31.1.254,mac=02:00:00:00:00:64",
        )
        .unwrap();
        assert_eq!(u.spec, PortSpec::parse("afpacket:u0").unwrap());
        assert_eq!(u.addrs, vec![("172.31.1.100".parse().unwrap(), 24)]);
        assert_eq!(u.gws, vec!["172.31.1.254".parse::<IpAddr>().unwrap()]);
        assert_eq!(u.underlay().unwrap().mac, [2, 0, 0, 0, 0, 0x64]);
        for (bad, needle) in [
            ("afpacket:u0", "address is missing"),
            ("afpacket:u0,ip=1.2.3.4", "ADDR/PLEN"),
            ("afpacket:u0,ip=1.2.3.4/33", "prefix length"),
            ("afpacket:u0,ip=1.2.3.4/24,mac=zz", "not a MAC"),
            ("nope:u0,ip=1.2.3.4/24", "--underlay"),
        ] {
            let e = UnderlayConfig::parse(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn arp_requests_are_well_formed() {
        let f = arp_request(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
        );
        let k = flowpath_flow::extract::extract(&f, 1);
        assert_eq!(k.dl_type(), 0x0806);
        assert_eq!(k.nw_proto(), 1, "a request");
        assert_eq!((k.nw_src(), k.nw_dst()), (0x0a00_0001, 0x0a00_0002));
        assert_eq!(k.dl_dst(), 0xffff_ffff_ffff);
    }

    #[test]
    fn neighbour_solicitations_are_well_formed() {
        let (src, target) = ("fd00::100".parse().unwrap(), "fd00::1:2".parse().unwrap());
        let f = neighbour_solicitation([2, 0, 0, 0, 0, 1], Some(src), target);
        let (k, _) = flowpath_flow::extract::extract_with_layers(&f, 1);
        assert_eq!((k.nw_proto(), k.tp_src()), (58, 135));
        assert_eq!(k.nd_target(), u128::from(target));
        assert_eq!(k.arp_sha(), 0x0200_0000_0001, "source link-layer option");
        assert_eq!(
            k.ipv6_dst(),
            u128::from("ff02::1:ff01:2".parse::<std::net::Ipv6Addr>().unwrap())
        );
        // The ICMPv6 checksum adds up over the pseudo-header.
        use flowpath_wire::checksum;
        let mut d = [0u8; 16];
        d.copy_from_slice(&f[38..54]);
        let p = checksum::pseudo_header_v6(src.octets(), d, 58, 32);
        assert_eq!(checksum::add(p, checksum::sum(&f[54..])), 0xffff);
        // Duplicate address detection's: from ::, no option.
        let f = neighbour_solicitation([2, 0, 0, 0, 0, 1], None, target);
        let (k, _) = flowpath_flow::extract::extract_with_layers(&f, 1);
        assert_eq!((k.ipv6_src(), k.tp_src(), k.arp_sha()), (0, 135, 0));
        assert_eq!(k.nd_target(), u128::from(target));
        assert_eq!(f.len(), 78);
        let p = checksum::pseudo_header_v6([0; 16], d, 58, 24);
        assert_eq!(checksum::add(p, checksum::sum(&f[54..])), 0xffff);
    }

    #[test]
    fn neighbour_advertisements_are_well_formed() {
        let target: std::net::Ipv6Addr = "fd00::100".parse().unwrap();
        let f = neighbour_advertisement([2, 0, 0, 0, 0, 1], target);
        let (k, _) = flowpath_flow::extract::extract_with_layers(&f, 1);
        assert_eq!((k.nw_proto(), k.tp_src(), k.tp_dst()), (58, 136, 0));
        assert_eq!(k.nd_target(), u128::from(target));
        assert_eq!(k.ipv6_src(), u128::from(target));
        assert_eq!(
            k.ipv6_dst(),
            u128::from("ff02::1".parse::<std::net::Ipv6Addr>().unwrap())
        );
        assert_eq!(k.dl_dst(), 0x3333_0000_0001);
        assert_eq!(k.arp_tha(), 0x0200_0000_0001, "target link-layer option");
        assert_eq!(f[54 + 4], 0x20, "override, not solicited");
        use flowpath_wire::checksum;
        let mut d = [0u8; 16];
        d.copy_from_slice(&f[38..54]);
        let p = checksum::pseudo_header_v6(target.octets(), d, 58, 32);
        assert_eq!(checksum::add(p, checksum::sum(&f[54..])), 0xffff);
    }

    #[test]
    fn commands_print_as_ovs() {
        let u = UnderlayConfig::parse("null,ip=172.31.1.100/24,gw=172.31.1.254").unwrap();
        let t = tunnels(
            vec![TunnelPort::parse(10, "vxlan:remote_ip=10.1.1.1").unwrap()],
            Some(&u),
        )
        .unwrap();
        let s = route_show(Some(&t));
        assert!(
            s.contains("Cached: 172.31.1.0/24 dev null SRC 172.31.1.100\n"),
            "{s}"
        );
        assert!(
            s.contains("Cached: 0.0.0.0/0 dev null GW 172.31.1.254 SRC 172.31.1.100\n"),
            "{s}"
        );
        route_add(
            Some(&t),
            &["10.1.0.0/16".into(), "br0".into(), "172.31.1.9".into()],
        )
        .unwrap();
        assert!(route_show(Some(&t))
            .contains("User: 10.1.0.0/16 dev null GW 172.31.1.9 SRC 172.31.1.100\n"));
        // The fixed remote's next hop is the route's gateway.
        assert_eq!(
            to_ask(&t, 0),
            vec![(
                "172.31.1.9".parse().unwrap(),
                "172.31.1.100".parse().unwrap()
            )]
        );
        assert_eq!(
            route_del(Some(&t), &["10.1.0.0/16".into()]).unwrap(),
            "OK\n"
        );
        assert_eq!(
            route_del(Some(&t), &["10.1.0.0/16".into()]).unwrap_err(),
            "Not found"
        );
        neigh_set(
            Some(&t),
            &[
                "br0".into(),
                "172.31.1.254".into(),
                "aa:55:aa:55:00:01".into(),
            ],
            0,
        )
        .unwrap();
        let n = neigh_show(Some(&t), "br0");
        assert!(
            n.ends_with("172.31.1.254                                  aa:55:aa:55:00:01   br0\n"),
            "{n}"
        );
        assert!(to_ask(&t, 0).is_empty(), "known now");
        // A learned neighbour near the end of its aging time is asked for
        // again; the command reads and sets the time.
        assert_eq!(neigh_aging(Some(&t), &[]).unwrap(), "900\n");
        assert!(neigh_aging(Some(&t), &["0".into()]).is_err());
        assert_eq!(neigh_aging(Some(&t), &["10".into()]).unwrap(), "OK\n");
        assert_eq!(neigh_aging(Some(&t), &[]).unwrap(), "10\n");
        let hop: IpAddr = "172.31.1.7".parse().unwrap();
        t.neigh.learn(hop, [2, 0, 0, 0, 0, 7], 1_000);
        assert!(to_ask(&t, 2_000).is_empty());
        assert_eq!(
            to_ask(&t, 9_000),
            vec![(hop, "172.31.1.100".parse().unwrap())]
        );
        assert!(
            to_ask(&t, 11_000).is_empty(),
            "gone: asked only when wanted"
        );
        assert_eq!(t.neigh.lookup(hop), None);
        assert_eq!(
            neigh_set(
                Some(&t),
                &["br0".into(), "x".into(), "aa:55:aa:55:00:01".into()],
                0
            )
            .unwrap_err(),
            "bad IP address"
        );
        assert_eq!(
            egress_port_range(Some(&t), &[]).unwrap(),
            "Tunnel UDP source port range: 32768-61000\n"
        );
        assert_eq!(
            egress_port_range(Some(&t), &["5000".into(), "4000".into()]).unwrap(),
            "OK\n"
        );
        assert_eq!(t.port_range(), (4000, 5000));
        assert_eq!(
            egress_port_range(Some(&t), &["x".into(), "1".into()]).unwrap(),
            "Invalid min."
        );
        assert_eq!(
            route_lookup(Some(&t), &["172.31.1.7".into()]).unwrap(),
            "src 172.31.1.100\ngateway ::\ndev null\n"
        );
        assert_eq!(
            route_lookup(Some(&t), &["8.8.8.8".into()]).unwrap(),
            "src 172.31.1.100\ngateway 172.31.1.254\ndev null\n"
        );
        let p = ports_show(Some(&t));
        assert!(
            p.contains("vxlan_sys_4789 (65024) ref_cnt=1\n  port 10: vxlan:remote_ip=10.1.1.1\n"),
            "{p}"
        );
    }
}
