//! The underlay's routes: a route (`ovs/route/show`'s lines) and those
//! an underlay's own addresses give. Read by [`crate::tunnel::Tunnels`].

use crate::tunnel::Underlay;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A route of the underlay (`ovs/route/show`'s lines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The destination prefix.
    pub prefix: IpAddr,
    /// Its length.
    pub plen: u8,
    /// The gateway (`None`: directly connected).
    pub gw: Option<IpAddr>,
    /// The source address packets routed here take.
    pub src: IpAddr,
    /// Added by the user (`ovs/route/add`), not from the underlay's
    /// addresses.
    pub user: bool,
}

impl Route {
    /// Whether `ip` is in the route's prefix.
    pub fn holds(&self, ip: IpAddr) -> bool {
        match (self.prefix, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let m = if self.plen == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(self.plen.min(32)))
                };
                u32::from(p) & m == u32::from(a) & m
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let m = if self.plen == 0 {
                    0
                } else {
                    u128::MAX << (128 - u32::from(self.plen.min(128)))
                };
                u128::from(p) & m == u128::from(a) & m
            }
            _ => false,
        }
    }
}

/// The routes an underlay's addresses give: each address's subnet, and a
/// default route of its family through each gateway in `gws`.
pub fn connected_routes(u: &Underlay, gws: &[IpAddr]) -> Vec<Route> {
    let mut routes = Vec::new();
    for &(a, plen) in &u.addrs {
        routes.push(Route {
            prefix: a,
            plen,
            gw: None,
            src: a,
            user: false,
        });
        for &g in gws.iter().filter(|g| g.is_ipv4() == a.is_ipv4()) {
            let any = if a.is_ipv4() {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            } else {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            };
            routes.push(Route {
                prefix: any,
                plen: 0,
                gw: Some(g),
                src: a,
                user: false,
            });
        }
    }
    routes
}
