//! A bridge's LOCAL tap as the tunnel underlay of another bridge in the
//! same process (Open vSwitch's `br-phy` layout: the tunnel endpoint's
//! address is configured in the kernel on the `br-phy` interface, the
//! tunnel ports live on `br-int`).
//!
//! What: every `tap:NAME` port has a tap-off. While an underlay end
//! (`local:NAME`, opened by the tunnel bridge) is attached, the tap's
//! transmit side sorts what its bridge sends to the host: tunnel packets
//! for the endpoint (UDP to a tunnel port, or GRE, to one of the addresses
//! in the [`Filter`] the tunnel bridge sets) go to the underlay end
//! instead of the kernel; ARP and IPv6 neighbour solicitations and
//! advertisements go to both (the kernel answers for its addresses, the
//! tunnel bridge learns its neighbours from them); the rest goes to the
//! kernel. What the underlay end sends (encapsulated packets, its ARP
//! and ND requests) the tap's bridge receives on the tap's second receive
//! queue, as if the host had sent it.
//!
//! How: the two directions are [`crate::patch`] channels (bounded queues
//! of bursts, eventfd wake-ups); the ends find each other by the tap's
//! name in a process-wide table taken only when a port opens or closes.
//! The filter is read under a lock held for each transmit call, which the
//! tunnel bridge takes once a second to refresh it.
//!
//! Invariants: with no underlay end attached every frame goes to the
//! kernel as before; frames sent by the underlay end while no tap of that
//! name is open are dropped and counted (as a patch port without its
//! peer).

use crate::patch::{Channel, PatchRx, PatchTx};
use crate::{NetdevError, OpenPort, PortSpec, QueueStats, RxQueue, TxFrame, TxQueue};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// What the tunnel bridge takes from the tap's traffic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// The endpoint addresses.
    pub addrs: Vec<IpAddr>,
    /// The tunnels' UDP destination ports (VXLAN 4789, Geneve 6081...).
    pub udp_ports: Vec<u16>,
    /// GRE packets too.
    pub gre: bool,
}

/// Where a frame the tap's bridge sends goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// To the kernel only.
    Tap,
    /// To the tunnel underlay only (a tunnel packet for the endpoint).
    Underlay,
    /// To both (ARP, neighbour discovery).
    Both,
}

/// Sorts frame `f` by `filter` (see the module documentation).
pub fn dest(f: &[u8], filter: &Filter) -> Dest {
    let Some(et) = f.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
        return Dest::Tap;
    };
    let ip = &f[14..];
    let (proto, dst, l4) = match et {
        0x0806 => return Dest::Both,
        0x0800 if ip.len() >= 20 => {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            // A fragment goes to the kernel (flowpath decapsulates whole
            // packets only, as Open vSwitch's userspace tunnels).
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
            if ihl < 20 || frag != 0 {
                return Dest::Tap;
            }
            let d: [u8; 4] = [ip[16], ip[17], ip[18], ip[19]];
            (ip[9], IpAddr::from(d), ip.get(ihl..).unwrap_or_default())
        }
        0x86dd if ip.len() >= 40 => {
            let mut d = [0u8; 16];
            d.copy_from_slice(&ip[24..40]);
            (ip[6], IpAddr::from(d), &ip[40..])
        }
        _ => return Dest::Tap,
    };
    match proto {
        // Neighbour solicitations and advertisements.
        58 if matches!(l4.first(), Some(135 | 136)) => Dest::Both,
        17 if l4.len() >= 8 => {
            let port = u16::from_be_bytes([l4[2], l4[3]]);
            if filter.udp_ports.contains(&port) && filter.addrs.contains(&dst) {
                Dest::Underlay
            } else {
                Dest::Tap
            }
        }
        47 if filter.gre && filter.addrs.contains(&dst) => Dest::Underlay,
        _ => Dest::Tap,
    }
}

/// The two directions between tap `NAME` and its underlay end, and the
/// filter.
pub(crate) struct TapOff {
    /// What the tap's bridge sends that the underlay takes.
    to_underlay: Arc<Channel>,
    /// What the underlay end sends into the tap's bridge.
    to_bridge: Arc<Channel>,
    filter: Mutex<Filter>,
}

/// The tap-offs of this process, by tap name.
fn table() -> &'static Mutex<HashMap<String, Weak<TapOff>>> {
    static T: std::sync::OnceLock<Mutex<HashMap<String, Weak<TapOff>>>> =
        std::sync::OnceLock::new();
    T.get_or_init(Default::default)
}

/// Tap `name`'s tap-off, made if neither end holds it.
fn tapoff(name: &str, port: &str) -> Result<Arc<TapOff>, NetdevError> {
    let mut map = table().lock().unwrap_or_else(PoisonError::into_inner);
    map.retain(|_, w| w.strong_count() > 0);
    if let Some(t) = map.get(name).and_then(Weak::upgrade) {
        return Ok(t);
    }
    let t = Arc::new(TapOff {
        to_underlay: Arc::new(Channel::new(port)?),
        to_bridge: Arc::new(Channel::new(port)?),
        filter: Mutex::new(Filter::default()),
    });
    map.insert(name.to_string(), Arc::downgrade(&t));
    Ok(t)
}

/// Sets what the underlay end of tap `name` takes (by the tunnel bridge,
/// when its addresses or tunnel ports change). Nothing when neither end
/// is open.
pub fn set_filter(name: &str, f: Filter) {
    let t = table()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(name)
        .and_then(Weak::upgrade);
    if let Some(t) = t {
        *t.filter.lock().unwrap_or_else(PoisonError::into_inner) = f;
    }
}

/// The taps open in this process that could serve as an underlay.
pub fn taps() -> Vec<String> {
    let map = table().lock().unwrap_or_else(PoisonError::into_inner);
    let mut v: Vec<String> = map
        .iter()
        .filter(|(_, w)| w.strong_count() > 0)
        .map(|(k, _)| k.clone())
        .collect();
    v.sort();
    v
}

/// A tap's transmit side with its tap-off: `tap` gets what the kernel
/// should, the underlay end the rest.
pub(crate) struct MuxTx {
    pub(crate) tap: Box<dyn TxQueue>,
    off: Arc<TapOff>,
    up: PatchTx,
}

impl MuxTx {
    pub(crate) fn new(tap: Box<dyn TxQueue>, off: Arc<TapOff>) -> MuxTx {
        let up = PatchTx::new(off.to_underlay.clone());
        MuxTx { tap, off, up }
    }
}

impl TxQueue for MuxTx {
    fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize {
        // No underlay end: everything is the kernel's.
        let Some(mut b) = self.up.start() else {
            return self.tap.send(frames);
        };
        let MuxTx { tap, off, up } = self;
        // (Held for the call: the tunnel bridge takes it once a second.)
        let filter = off.filter.lock().unwrap_or_else(PoisonError::into_inner);
        let mut n = 0;
        for fr in frames {
            let d = dest(fr.data, &filter);
            if d != Dest::Tap {
                up.add(&mut b, &fr);
            }
            if d != Dest::Underlay {
                n += tap.send(&mut std::iter::once(TxFrame {
                    data: fr.data,
                    vnet: fr.vnet,
                    timestamp_ns: fr.timestamp_ns,
                }));
            } else {
                n += 1;
            }
        }
        drop(filter);
        up.finish(b);
        n
    }

    fn takes_vnet_hdr(&self) -> bool {
        self.tap.takes_vnet_hdr()
    }

    fn flush(&mut self) -> Result<(), NetdevError> {
        self.tap.flush()
    }

    fn stats(&self) -> QueueStats {
        self.tap.stats()
    }
}

/// Gives tap port `p` (named `name`) its tap-off: a second receive queue
/// (what the underlay end sends) and sorting transmit queues.
pub(crate) fn attach_to_tap(name: &str, mut p: OpenPort) -> Result<OpenPort, NetdevError> {
    let port = p.spec.to_string();
    let off = tapoff(name, &port)?;
    let rx = PatchRx::new(off.to_bridge.clone()).map_err(|_| NetdevError::BadSpec {
        spec: port.clone(),
        reason: format!("tap {name} is open already in this process"),
    })?;
    p.rxqs.push(Box::new(rx) as Box<dyn RxQueue>);
    let tap = std::mem::replace(&mut p.tx, Box::new(crate::null::NullTx::default()));
    p.tx = Box::new(MuxTx::new(tap, off.clone()));
    p.more_tx = std::mem::take(&mut p.more_tx)
        .into_iter()
        .map(|q| Box::new(MuxTx::new(q, off.clone())) as Box<dyn TxQueue>)
        .collect();
    Ok(p)
}

/// Opens `local:NAME`: the underlay end of tap `NAME` (a bridge's LOCAL
/// port in this process, which may open before or after it), with
/// `extra` more transmit queues.
pub fn open(spec: &PortSpec, extra: usize) -> Result<OpenPort, NetdevError> {
    let PortSpec::Local { name } = spec else {
        return Err(NetdevError::BadSpec {
            spec: spec.to_string(),
            reason: "not a local: port".into(),
        });
    };
    let port = spec.to_string();
    let off = tapoff(name, &port)?;
    let rx = PatchRx::new(off.to_underlay.clone()).map_err(|_| NetdevError::BadSpec {
        spec: port.clone(),
        reason: format!("tap {name} already serves another bridge's tunnels"),
    })?;
    Ok(crate::patch::channel_port(
        spec,
        "local",
        format!("tunnel underlay through tap {name}"),
        rx,
        &off.to_bridge,
        extra,
    ))
}

/// The addresses the kernel holds on interface `ifname`, with their
/// prefix lengths (IPv6 link-local ones left out); empty when it has none
/// or does not exist.
#[allow(unsafe_code)]
pub fn kernel_addrs(ifname: &str) -> Vec<(IpAddr, u8)> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list it allocated into `head`, freed
    // below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive
        // until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() || ifa.ifa_addr.is_null() || ifa.ifa_netmask.is_null() {
            continue;
        }
        // SAFETY: a NUL-terminated name owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        if name.to_bytes() != ifname.as_bytes() {
            continue;
        }
        // SAFETY: the address and mask are sockaddrs of the family
        // `sa_family` says, owned by the list.
        let fam = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if fam == libc::AF_INET {
            // SAFETY: as above, an AF_INET sockaddr.
            let (a, m) = unsafe {
                (
                    &*ifa.ifa_addr.cast::<libc::sockaddr_in>(),
                    &*ifa.ifa_netmask.cast::<libc::sockaddr_in>(),
                )
            };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            let plen = u32::from_be(m.sin_addr.s_addr).count_ones() as u8;
            out.push((IpAddr::V4(ip), plen));
        } else if fam == libc::AF_INET6 {
            // SAFETY: as above, an AF_INET6 sockaddr.
            let (a, m) = unsafe {
                (
                    &*ifa.ifa_addr.cast::<libc::sockaddr_in6>(),
                    &*ifa.ifa_netmask.cast::<libc::sockaddr_in6>(),
                )
            };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            if ip.segments()[0] & 0xffc0 == 0xfe80 {
                continue;
            }
            let plen = m
                .sin6_addr
                .s6_addr
                .iter()
                .map(|b| b.count_ones())
                .sum::<u32>() as u8;
            out.push((IpAddr::V6(ip), plen));
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_v4(proto: u8, dst: [u8; 4], dport: u16, frag: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[20..22].copy_from_slice(&frag.to_be_bytes());
        f[23] = proto;
        f[30..34].copy_from_slice(&dst);
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn frames_are_sorted_by_the_filter() {
        let me = [172, 31, 1, 100];
        let f = Filter {
            addrs: vec![IpAddr::from(me)],
            udp_ports: vec![4789],
            gre: false,
        };
        assert_eq!(dest(&frame_v4(17, me, 4789, 0), &f), Dest::Underlay);
        assert_eq!(dest(&frame_v4(17, me, 53, 0), &f), Dest::Tap);
        assert_eq!(dest(&frame_v4(17, [172, 31, 1, 9], 4789, 0), &f), Dest::Tap);
        assert_eq!(
            dest(&frame_v4(17, me, 4789, 0x2000), &f),
            Dest::Tap,
            "fragment"
        );
        assert_eq!(dest(&frame_v4(47, me, 0, 0), &f), Dest::Tap, "no GRE port");
        let g = Filter {
            gre: true,
            ..f.clone()
        };
        assert_eq!(dest(&frame_v4(47, me, 0, 0), &g), Dest::Underlay);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(dest(&arp, &f), Dest::Both);
        let mut na = vec![0u8; 14 + 40 + 24];
        na[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        na[14 + 6] = 58;
        na[54] = 136;
        assert_eq!(dest(&na, &f), Dest::Both);
        na[54] = 128;
        assert_eq!(dest(&na, &f), Dest::Tap, "an echo request");
        assert_eq!(dest(&[0u8; 10], &f), Dest::Tap);
    }

    #[test]
    fn loopback_addresses_are_read() {
        let lo = kernel_addrs("lo");
        assert!(lo.contains(&(IpAddr::from([127, 0, 0, 1]), 8)), "{lo:?}");
        assert!(kernel_addrs("no-such-if0").is_empty());
    }

    fn recv_all(q: &mut dyn RxQueue) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        q.recv(64, &mut |d, _| got.push(d.to_vec())).unwrap();
        got
    }

    /// A transmit queue that keeps what it is sent (the kernel's side).
    #[derive(Default)]
    struct Keep(Arc<Mutex<Vec<Vec<u8>>>>);

    impl TxQueue for Keep {
        fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize {
            let mut v = self.0.lock().unwrap();
            frames.map(|f| v.push(f.data.to_vec())).count()
        }
        fn stats(&self) -> QueueStats {
            QueueStats::default()
        }
    }

    #[test]
    fn the_tap_and_its_underlay_end_exchange_frames() {
        let name = "tt-off0";
        let kernel = Arc::new(Mutex::new(Vec::new()));
        let tap = OpenPort {
            spec: PortSpec::Tap { name: name.into() },
            kind: "tap",
            detail: String::new(),
            rxqs: Vec::new(),
            tx: Box::new(Keep(kernel.clone())),
            more_tx: Vec::new(),
            guard: None,
        };
        let mut tap = attach_to_tap(name, tap).unwrap();
        let me = [172, 31, 1, 100];
        let tunnel = frame_v4(17, me, 4789, 0);
        let dns = frame_v4(17, me, 53, 0);
        let send = |p: &mut OpenPort, fs: &[&Vec<u8>]| {
            p.tx.send(&mut fs.iter().map(|d| TxFrame {
                data: d,
                vnet: None,
                timestamp_ns: 0,
            }))
        };
        // No underlay end yet: all to the kernel.
        assert_eq!(send(&mut tap, &[&tunnel, &dns]), 2);
        assert_eq!(kernel.lock().unwrap().len(), 2);
        let mut up = open(&PortSpec::Local { name: name.into() }, 0).unwrap();
        assert!(
            open(&PortSpec::Local { name: name.into() }, 0).is_err(),
            "one end at a time"
        );
        set_filter(
            name,
            Filter {
                addrs: vec![IpAddr::from(me)],
                udp_ports: vec![4789],
                gre: false,
            },
        );
        kernel.lock().unwrap().clear();
        assert_eq!(send(&mut tap, &[&tunnel, &dns]), 2);
        assert_eq!(*kernel.lock().unwrap(), vec![dns.clone()]);
        assert_eq!(recv_all(&mut *up.rxqs[0]), vec![tunnel.clone()]);
        // The other way: into the tap's bridge on its second queue.
        assert_eq!(send(&mut up, &[&dns]), 1);
        assert_eq!(recv_all(&mut *tap.rxqs[0]), vec![dns.clone()]);
        assert!(taps().contains(&name.to_string()));
        drop(up);
        kernel.lock().unwrap().clear();
        assert_eq!(send(&mut tap, &[&tunnel]), 1);
        assert_eq!(
            *kernel.lock().unwrap(),
            vec![tunnel],
            "the end gone: the kernel's again"
        );
    }
}
