//! `flowpath trace`'s tunnel options: tunnel ports, the underlay, its
//! routes and neighbours and the Geneve option map, so a trace can show
//! what native tunnelling does (`tnl_push(...)` for an output to a tunnel
//! port; the tunnel metadata of a packet traced in on one).
//!
//! The ports and the underlay are parsed as `flowpath switch` parses its
//! `--port N=vxlan:...` and `--underlay` (the same code); routes,
//! neighbours and option maps are what `ovs/route/add`, `tnl/neigh/set`
//! and `ovs-ofctl add-tlv-map` would set on a running switch.

use anyhow::{bail, Context, Result};
use flowpath_ofproto::tunnel::{TunnelPort, Tunnels};
use flowpath_switchd::underlay::{parse_mac, UnderlayConfig};
use std::net::IpAddr;
use std::sync::Arc;

/// Tunnel options of `flowpath trace`.
#[derive(clap::Args)]
pub struct TunnelArgs {
    /// A tunnel port, as `flowpath switch --port`: `N=vxlan:OPTS`,
    /// `N=geneve:OPTS` or `N=gre:OPTS`, OPTS being `remote_ip=IP|flow`
    /// (required), `local_ip=IP`, `key=K|flow`, `dst_port=P`,
    /// `csum=true|false`, `ttl=T`, `tos=T`, `df_default=true|false`
    /// (OVS's interface options). Repeatable; needs --underlay.
    #[arg(long = "port", value_name = "N=KIND:OPTS")]
    pub tunnel_ports: Vec<String>,
    /// The underlay the tunnels' outer packets use, as `flowpath switch
    /// --underlay`: `NAME,ip=ADDR/PLEN[,ip=...][,gw=IP][,mac=MAC]`
    /// (NAME is only printed: `null` will do; without mac= the underlay's
    /// MAC is 02:fd:00:00:00:01). Its addresses are the tunnel endpoints
    /// and give the connected routes.
    #[arg(long, value_name = "NAME,ip=ADDR/PLEN,...")]
    pub underlay: Option<String>,
    /// A route of the underlay, as `ovs-appctl ovs/route/add
    /// PREFIX/PLEN BRIDGE [GW]`: `PREFIX/PLEN[,gw=IP]`. Repeatable.
    #[arg(long, value_name = "PREFIX/PLEN[,gw=IP]")]
    pub route: Vec<String>,
    /// A neighbour of the underlay, as `ovs-appctl tnl/neigh/set BRIDGE
    /// IP MAC`: `IP=MAC`. Without one for the next hop, an output to a
    /// tunnel sends nothing (a running switch would ask for it first).
    /// Repeatable.
    #[arg(long, value_name = "IP=MAC")]
    pub neigh: Vec<String>,
    /// Geneve options mapped to tun_metadata0..7, as `ovs-ofctl
    /// add-tlv-map`: `{class=C,type=T,len=L}->tun_metadataN[,...]`.
    /// Repeatable.
    #[arg(long = "tlv-map", value_name = "MAP")]
    pub tlv_map: Vec<String>,
}

impl TunnelArgs {
    /// The tunnels these options describe; `None` when none is given.
    pub fn tunnels(&self) -> Result<Option<Arc<Tunnels>>> {
        if self.tunnel_ports.is_empty()
            && self.underlay.is_none()
            && self.route.is_empty()
            && self.neigh.is_empty()
            && self.tlv_map.is_empty()
        {
            return Ok(None);
        }
        let mut ports = Vec::new();
        for p in &self.tunnel_ports {
            ports.push(parse_port(p)?);
        }
        let underlay = self
            .underlay
            .as_deref()
            .map(UnderlayConfig::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?;
        if underlay.is_none() && !(self.route.is_empty() && self.neigh.is_empty()) {
            bail!("--route and --neigh need an --underlay");
        }
        let t = flowpath_switchd::underlay::tunnels(ports, underlay.as_ref())
            .map_err(|e| anyhow::anyhow!("--port: {e}"))?;
        for r in &self.route {
            let (prefix, plen, gw) = parse_route(r)?;
            t.add_route(prefix, plen, gw)
                .map_err(|e| anyhow::anyhow!("--route {r}: {e}"))?;
        }
        for n in &self.neigh {
            let (ip, mac) = n
                .split_once('=')
                .with_context(|| format!("--neigh '{n}': expected IP=MAC"))?;
            let ip: IpAddr = ip
                .trim()
                .parse()
                .with_context(|| format!("--neigh '{n}': '{ip}' is not an IP address"))?;
            let mac = parse_mac(mac.trim())
                .with_context(|| format!("--neigh '{n}': '{mac}' is not a MAC address"))?;
            t.neigh.set(ip, mac, 0);
        }
        for m in &self.tlv_map {
            t.add_tlv(m)
                .map_err(|e| anyhow::anyhow!("--tlv-map: {e}"))?;
        }
        Ok(Some(t))
    }
}

/// Parses `N=KIND:OPTS`.
fn parse_port(s: &str) -> Result<TunnelPort> {
    let (n, spec) = s.split_once('=').with_context(|| {
        format!("--port '{s}': expected N=KIND:OPTS, e.g. 10=vxlan:remote_ip=flow")
    })?;
    let n = crate::cmd_switch::port_number(s, n)?;
    TunnelPort::parse(n, spec).map_err(|e| anyhow::anyhow!("--port {n}: {e}"))
}

/// Parses `PREFIX/PLEN[,gw=IP]`.
fn parse_route(s: &str) -> Result<(IpAddr, u8, Option<IpAddr>)> {
    let (net, gw) = match s.split_once(',') {
        Some((net, rest)) => {
            let g = rest
                .strip_prefix("gw=")
                .with_context(|| format!("--route '{s}': expected PREFIX/PLEN[,gw=IP]"))?;
            let g: IpAddr = g
                .parse()
                .with_context(|| format!("--route '{s}': gw={g}: not an IP address"))?;
            (net, Some(g))
        }
        None => (s, None),
    };
    let (prefix, plen) = net
        .split_once('/')
        .with_context(|| format!("--route '{s}': expected PREFIX/PLEN"))?;
    let prefix: IpAddr = prefix
        .parse()
        .with_context(|| format!("--route '{s}': '{prefix}' is not an IP address"))?;
    let plen: u8 = plen
        .parse()
        .with_context(|| format!("--route '{s}': '{plen}' is not a prefix length"))?;
    Ok((prefix, plen, gw))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(ports: &[&str], underlay: Option<&str>, route: &[&str], neigh: &[&str]) -> TunnelArgs {
        TunnelArgs {
            tunnel_ports: ports.iter().map(|s| s.to_string()).collect(),
            underlay: underlay.map(str::to_string),
            route: route.iter().map(|s| s.to_string()).collect(),
            neigh: neigh.iter().map(|s| s.to_string()).collect(),
            tlv_map: vec!["{class=0x102,type=0x80,len=4}->tun_metadata0".into()],
        }
    }

    #[test]
    fn tunnel_options_build_ports_routes_and_neighbours() {
        let t = args(
            &[
                "10=vxlan:remote_ip=172.31.1.1,key=flow",
                "11=gre:remote_ip=flow",
            ],
            Some("null,ip=172.31.1.100/24,mac=aa:55:aa:55:00:00"),
            &["10.55.0.0/16,gw=172.31.1.254"],
            &["172.31.1.254=aa:55:aa:55:00:fe"],
        )
        .tunnels()
        .unwrap()
        .unwrap();
        assert_eq!(t.ports().len(), 2);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(t.route(ip("10.55.1.1")).unwrap().0, ip("172.31.1.254"));
        assert_eq!(
            t.neigh.lookup(ip("172.31.1.254")),
            Some([0xaa, 0x55, 0xaa, 0x55, 0, 0xfe])
        );
        assert_eq!(t.tlv()[0].class, 0x102);
        assert_eq!(t.underlay().unwrap().mac, [0xaa, 0x55, 0xaa, 0x55, 0, 0]);
        for (bad, needle) in [
            (
                args(&["10=vxlan:remote_ip=flow"], None, &[], &[]),
                "needs an underlay",
            ),
            (
                args(&[], Some("null,ip=1.1.1.1/24"), &["1.2.3.0"], &[]),
                "PREFIX/PLEN",
            ),
            (
                args(&[], Some("null,ip=1.1.1.1/24"), &[], &["1.1.1.2=zz"]),
                "not a MAC",
            ),
            (
                args(
                    &["x=gre:remote_ip=flow"],
                    Some("null,ip=1.1.1.1/24"),
                    &[],
                    &[],
                ),
                "not a port number",
            ),
        ] {
            let e = format!("{:#}", bad.tunnels().unwrap_err());
            assert!(e.contains(needle), "{e}");
        }
    }
}
