//! Tunnels over another bridge's LOCAL interface: Open vSwitch's
//! standard userspace-tunnelling layout, from the OVSDB alone.
//!
//! What: the tunnel ports are on one bridge (`br-int`), the physical port
//! on another (`br-phy`), and the tunnel endpoint's address is configured
//! in the kernel on `br-phy`'s LOCAL interface (`ip addr add IP/PLEN dev
//! br-phy`). A bridge from the OVSDB started without `--underlay` looks,
//! once a second while it has tunnel ports, for the tap of this process
//! (another bridge's LOCAL or internal interface) that carries an
//! address — the one the kernel routes a tunnel's fixed remote through
//! first — and opens `local:NAME` as its underlay (see
//! `flowpath_netdev::tapoff`). From then on, every second: the endpoint
//! addresses and MAC are the interface's, the routes those of its
//! subnets and the kernel's routes through it (`/proc/net/route`,
//! `/proc/net/ipv6_route`; `ovs/route/show` lists them as `Cached`), and
//! the tap hands this bridge the tunnel packets for those addresses and
//! copies of ARP and neighbour discovery. The kernel answers ARP for its
//! addresses; translation learns neighbours from what it sees and asks
//! for missing ones through the other bridge, whose `NORMAL` (or flows)
//! carries the outer packets to the physical port.
//!
//! Differences from Open vSwitch: it routes each packet through whichever
//! bridge's LOCAL port its route names; here a bridge's tunnels use one
//! underlay interface, the first found, kept until the switch restarts.

use crate::shared::Shared;
use flowpath_netdev::tapoff;
use flowpath_ofproto::tunnel::{connected_routes, Remote, Route, Tunnels, Underlay, UNDERLAY_PORT};
use flowpath_wire::tunnel::TunnelKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// `RTF_UP`, `RTF_GATEWAY`, `RTF_REJECT` of the kernel's route flags.
const RTF_UP: u32 = 0x1;
const RTF_GATEWAY: u32 = 0x2;
const RTF_REJECT: u32 = 0x200;

/// The source address for a route to `to` (through gateway `gw`): the
/// address whose subnet holds the gateway (or the destination), else the
/// first of the family.
fn src_for(addrs: &[(IpAddr, u8)], to: IpAddr) -> Option<IpAddr> {
    let same: Vec<&(IpAddr, u8)> = addrs
        .iter()
        .filter(|(a, _)| a.is_ipv4() == to.is_ipv4())
        .collect();
    use crate::underlay::mask;
    same.iter()
        .find(|(a, p)| mask(*a, *p) == mask(to, *p))
        .or(same.first())
        .map(|(a, _)| *a)
}

/// The IPv4 routes through `dev` in `/proc/net/route`'s text.
pub fn routes_v4(text: &str, dev: &str, addrs: &[(IpAddr, u8)]) -> Vec<Route> {
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    let mut out = Vec::new();
    for l in text.lines().skip(1) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 8 || f[0] != dev {
            continue;
        }
        let (Some(dst), Some(gw), Some(flags), Some(mask)) =
            (hex(f[1]), hex(f[2]), hex(f[3]), hex(f[7]))
        else {
            continue;
        };
        if flags & RTF_UP == 0 || flags & RTF_REJECT != 0 {
            continue;
        }
        // The kernel prints the address's bytes as a native integer.
        let prefix = IpAddr::V4(Ipv4Addr::from(dst.to_ne_bytes()));
        let gw = (flags & RTF_GATEWAY != 0).then(|| IpAddr::V4(Ipv4Addr::from(gw.to_ne_bytes())));
        let Some(src) = src_for(addrs, gw.unwrap_or(prefix)) else {
            continue;
        };
        out.push(Route {
            prefix,
            plen: mask.count_ones() as u8,
            gw,
            src,
            user: false,
        });
    }
    out
}

/// The IPv6 routes through `dev` in `/proc/net/ipv6_route`'s text
/// (link-local and multicast ones left out).
pub fn routes_v6(text: &str, dev: &str, addrs: &[(IpAddr, u8)]) -> Vec<Route> {
    let addr = |s: &str| u128::from_str_radix(s, 16).ok().map(Ipv6Addr::from);
    let mut out = Vec::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 10 || f[9] != dev {
            continue;
        }
        let (Some(dst), Some(plen), Some(hop), Ok(flags)) = (
            addr(f[0]),
            u8::from_str_radix(f[1], 16).ok(),
            addr(f[4]),
            u32::from_str_radix(f[8], 16),
        ) else {
            continue;
        };
        let s0 = dst.segments()[0];
        if flags & RTF_UP == 0
            || flags & RTF_REJECT != 0
            || s0 & 0xffc0 == 0xfe80
            || s0 & 0xff00 == 0xff00
            || (plen == 128 && addrs.iter().any(|(a, _)| *a == IpAddr::V6(dst)))
        {
            continue;
        }
        let gw = (flags & RTF_GATEWAY != 0).then_some(IpAddr::V6(hop));
        let Some(src) = src_for(addrs, gw.unwrap_or(IpAddr::V6(dst))) else {
            continue;
        };
        out.push(Route {
            prefix: IpAddr::V6(dst),
            plen,
            gw,
            src,
            user: false,
        });
    }
    out
}

/// Interface `name` as an underlay: its MAC and addresses, and the
/// routes of its subnets and the kernel's through it. `None` when it has
/// no MAC (gone).
pub fn kernel_underlay(name: &str) -> Option<(Underlay, Vec<Route>)> {
    let mac = crate::underlay::interface_mac(name)?;
    let addrs = tapoff::kernel_addrs(name);
    let u = Underlay {
        port: UNDERLAY_PORT,
        name: name.to_string(),
        mac,
        addrs: addrs.clone(),
        kernel: true,
    };
    let mut routes = connected_routes(&u, &[]);
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let kernel = routes_v4(&read("/proc/net/route"), name, &addrs)
        .into_iter()
        .chain(routes_v6(&read("/proc/net/ipv6_route"), name, &addrs));
    for r in kernel {
        let net = |x: &Route| (crate::underlay::mask(x.prefix, x.plen), x.plen);
        if !routes.iter().any(|c| net(c) == net(&r)) {
            routes.push(r);
        }
    }
    Some((u, routes))
}

/// The tap to use as the underlay of a bridge whose own taps are `own`
/// and whose tunnels are `t`: among this process's others with an
/// address, the one with the longest route to a fixed remote, else the
/// first by name.
fn pick(own: &[String], t: &Tunnels) -> Option<String> {
    let remotes: Vec<IpAddr> = t
        .ports()
        .iter()
        .filter_map(|p| match p.remote {
            Remote::Ip(r) => Some(r),
            Remote::Flow => None,
        })
        .collect();
    let mut best: Option<(i32, String)> = None;
    for name in tapoff::taps().into_iter().filter(|n| !own.contains(n)) {
        let Some((u, routes)) = kernel_underlay(&name) else {
            continue;
        };
        if u.addrs.is_empty() {
            continue;
        }
        let score = routes
            .iter()
            .filter(|r| remotes.iter().any(|ip| r.holds(*ip)))
            .map(|r| i32::from(r.plen))
            .max()
            .unwrap_or(-1);
        if best.as_ref().is_none_or(|(s, _)| score > *s) {
            best = Some((score, name));
        }
    }
    best.map(|(_, n)| n)
}

/// The bridge's name.
fn bridge_name(sh: &Shared) -> String {
    sh.channel
        .get()
        .map_or_else(|| "br0".to_string(), |(n, _)| n.clone())
}

/// One round: finds the underlay if the bridge has tunnel ports and none
/// yet, opens it (`attach`: `local:NAME` as the underlay's datapath
/// port), then takes the interface's addresses and routes again and
/// tells the tap what to hand over.
pub fn refresh(sh: &Arc<Shared>, t: &Tunnels, attach: &dyn Fn(&str) -> Result<(), String>) {
    if !sh.auto_underlay {
        return;
    }
    let name = match t.underlay() {
        Some(u) if u.kernel => u.name.clone(),
        Some(_) => return,
        None => {
            if t.ports().is_empty() {
                return;
            }
            let own: Vec<String> = sh
                .ports()
                .iter()
                .filter_map(|p| match flowpath_netdev::PortSpec::parse(&p.name) {
                    Ok(flowpath_netdev::PortSpec::Tap { name }) => Some(name),
                    _ => None,
                })
                .chain(std::iter::once(bridge_name(sh)))
                .collect();
            let Some(name) = pick(&own, t) else {
                return;
            };
            if let Err(e) = attach(&name) {
                eprintln!(
                    "flowpath: bridge {}: tunnels over {name}: {e}",
                    bridge_name(sh)
                );
                return;
            }
            eprintln!(
                "flowpath: bridge {}: tunnels over {name}'s addresses",
                bridge_name(sh)
            );
            name
        }
    };
    let Some((u, routes)) = kernel_underlay(&name) else {
        return;
    };
    let classes = t.classes();
    let filter = tapoff::Filter {
        addrs: u.addrs.iter().map(|(a, _)| *a).collect(),
        udp_ports: classes
            .iter()
            .filter(|(_, k, _)| *k != TunnelKind::Gre)
            .map(|(_, _, p)| *p)
            .collect(),
        gre: classes.iter().any(|(_, k, _)| *k == TunnelKind::Gre),
    };
    t.set_underlay(Some(u), routes);
    tapoff::set_filter(&name, filter);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn kernel_routes_through_the_interface_are_read() {
        // As the kernel prints them on a little-endian machine.
        let mut v4 = String::from(
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n",
        );
        let le = |a: [u8; 4]| format!("{:08X}", u32::from_ne_bytes(a));
        for (dev, dst, gw, flags, mask) in [
            (
                "br-phy",
                [172, 31, 1, 0],
                [0, 0, 0, 0],
                1,
                [255, 255, 255, 0],
            ),
            (
                "br-phy",
                [10, 9, 0, 0],
                [172, 31, 1, 254],
                3,
                [255, 255, 0, 0],
            ),
            (
                "br-phy",
                [10, 8, 0, 0],
                [0, 0, 0, 0],
                0x201,
                [255, 255, 0, 0],
            ),
            ("eth0", [0, 0, 0, 0], [192, 168, 0, 1], 3, [0, 0, 0, 0]),
        ] {
            v4 += &format!(
                "{dev}\t{}\t{}\t{flags:04X}\t0\t0\t0\t{}\t0\t0\t0\n",
                le(dst),
                le(gw),
                le(mask)
            );
        }
        let addrs = [(ip("172.31.1.100"), 24), (ip("fd00:1::100"), 64)];
        let r = routes_v4(&v4, "br-phy", &addrs);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(
            (r[0].prefix, r[0].plen, r[0].gw),
            (ip("172.31.1.0"), 24, None)
        );
        assert_eq!(
            (r[1].prefix, r[1].plen, r[1].gw, r[1].src),
            (
                ip("10.9.0.0"),
                16,
                Some(ip("172.31.1.254")),
                ip("172.31.1.100")
            )
        );
        // With two addresses, a route takes the one whose subnet holds
        // its gateway, not the first.
        let two = [(ip("192.168.5.1"), 24), (ip("172.31.1.100"), 24)];
        assert_eq!(routes_v4(&v4, "br-phy", &two)[1].src, ip("172.31.1.100"));
        let v6 = "fd000001000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001   br-phy\n\
                  fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001   br-phy\n\
                  fd000002000000000000000000000000 40 00000000000000000000000000000000 00 fd000001000000000000000000000001 00000400 00000001 00000000 00000003   br-phy\n\
                  fd000003000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n";
        let r = routes_v6(v6, "br-phy", &addrs);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(
            (r[0].prefix, r[0].plen, r[0].gw),
            (ip("fd00:1::"), 64, None)
        );
        assert_eq!(
            (r[1].prefix, r[1].gw, r[1].src),
            (ip("fd00:2::"), Some(ip("fd00:1::1")), ip("fd00:1::100"))
        );
        assert!(
            routes_v6(v6, "br-phy", &[(ip("172.31.1.100"), 24)]).is_empty(),
            "no IPv6 source"
        );
    }
}
