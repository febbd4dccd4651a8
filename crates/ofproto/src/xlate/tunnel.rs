//! Native tunnelling in translation: what the underlay receives (ARP for
//! the endpoint answered and snooped, tunnel packets decapsulated), which
//! tunnel port a decapsulated packet came in on, and an output to a
//! tunnel port (the outer headers built from the route and the
//! neighbour, as OVS's `native_tunnel_output`).

use super::*;
use crate::tunnel::{Key, Remote, TunnelPort, Tunnels};
use flowpath_odp::TnlPush;
use flowpath_wire::tunnel::{build_header, HeaderSpec, OuterIp, TunnelKind, MAX_HEADER};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A MAC address as 6 bytes from the key's 48-bit number.
fn mac_bytes(m: u64) -> [u8; 6] {
    let b = m.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn mac_u64(m: [u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]])
}

/// A megaflow's Geneve options as OVS prints them: one whose whole length
/// (in `tlv`) is significant without a mask (one the packet did not
/// carry is already `tun_metadataN=NP`, from the match printer).
pub(super) fn options_text(text: String, tlv: &flowpath_wire::tunnel::TlvMap) -> String {
    if !text.contains("tun_metadata") {
        return text;
    }
    text.split(',')
        .map(|item| {
            let Some((n, value)) = item
                .strip_prefix("tun_metadata")
                .and_then(|r| r.split_once('='))
                .and_then(|(n, v)| Some((n.parse::<usize>().ok()?, v)))
            else {
                return item.to_string();
            };
            let bits = 8 * u32::from(tlv.get(n).map_or(0, |e| e.len));
            let full = if bits >= 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            match value.split_once('/') {
                Some((v, m))
                    if bits != 0
                        && u64::from_str_radix(m.trim_start_matches("0x"), 16) == Ok(full) =>
                {
                    format!("tun_metadata{n}={v}")
                }
                _ => item.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl<L: Lookup> Ctx<'_, '_, L> {
    fn now_ms(&self) -> u64 {
        self.normal.as_ref().map_or(0, |e| e.now_ms)
    }

    /// Makes field `f` of the megaflow exact.
    fn exact(&mut self, f: FieldId) {
        f.info().or_mask(&mut self.wc, f.info().full_mask());
    }

    /// A packet received on the underlay: ARP for the endpoint is
    /// answered, ARP is snooped, tunnel packets to the endpoint are
    /// decapsulated (`tnl_pop`), the rest is dropped. The bridge's tables
    /// are not consulted.
    pub(super) fn underlay_input(&mut self, t: &Tunnels) {
        let Some(u) = t.underlay() else {
            return;
        };
        let (port, mac, answer) = (u.port, u.mac, !u.kernel);
        let k = self.flow;
        match k.dl_type() {
            0x0806 => {
                for f in [
                    FieldId::ArpOp,
                    FieldId::ArpSpa,
                    FieldId::ArpTpa,
                    FieldId::ArpSha,
                ] {
                    self.exact(f);
                }
                let spa = IpAddr::V4(Ipv4Addr::from(k.nw_src()));
                let tpa = IpAddr::V4(Ipv4Addr::from(k.nw_dst()));
                let sha = mac_bytes(k.arp_sha());
                // Snooped (OVS's `tnl_neigh_snoop`): requests and replies.
                if self.side_effects && k.nw_src() != 0 && sha != [0; 6] {
                    t.neigh.learn(spa, sha, self.now_ms());
                    self.note(
                        0,
                        &format!(
                            "underlay: learned neighbour {spa} at {}",
                            normal::format_mac(k.arp_sha())
                        ),
                    );
                }
                // (Addresses the kernel holds, the kernel answers for.)
                if answer && k.nw_proto() == 1 && t.is_local(tpa) {
                    // Answer: the request turned around, as an OpenFlow ARP
                    // responder does it.
                    for f in [FieldId::EthSrc, FieldId::EthDst, FieldId::ArpTha] {
                        self.exact(f);
                    }
                    self.flow.set_dl_dst(k.dl_src());
                    self.flow.set_dl_src(mac_u64(mac));
                    self.flow.set_nw_proto(2);
                    self.flow.set_arp_tha(k.arp_sha());
                    self.flow.set_arp_sha(mac_u64(mac));
                    self.flow.set_nw_dst(k.nw_src());
                    self.flow.set_nw_src(k.nw_dst());
                    self.commit();
                    self.odp.push(DpAction::Output(port));
                    self.note(0, &format!("underlay: ARP reply for {tpa}"));
                } else {
                    self.note(0, "underlay: ARP, nothing to answer: dropping");
                }
            }
            0x86dd if k.nw_proto() == 58 && matches!(k.tp_src(), 135 | 136) && k.tp_dst() == 0 => {
                self.underlay_nd(t, port, mac, answer);
            }
            0x0800 | 0x86dd => {
                let v4 = k.dl_type() == 0x0800;
                let dst = if v4 {
                    self.exact(FieldId::NwDst);
                    IpAddr::V4(Ipv4Addr::from(k.nw_dst()))
                } else {
                    self.exact(FieldId::Ipv6Dst);
                    IpAddr::V6(Ipv6Addr::from(k.ipv6_dst()))
                };
                self.exact(FieldId::NwProto);
                self.exact(FieldId::EthDst);
                if !t.is_local(dst) || k.dl_dst() != mac_u64(mac) || k.nw_frag() != 0 {
                    self.note(
                        0,
                        "underlay: not a tunnel packet for this endpoint: dropping",
                    );
                    return;
                }
                let class = match k.nw_proto() {
                    17 => {
                        self.exact(FieldId::TpDst);
                        t.classes()
                            .into_iter()
                            .find(|&(_, kind, p)| kind != TunnelKind::Gre && p == k.tp_dst())
                    }
                    47 => t
                        .classes()
                        .into_iter()
                        .find(|&(_, kind, _)| kind == TunnelKind::Gre),
                    _ => None,
                };
                match class {
                    Some((vport, kind, _)) => {
                        self.odp.push(DpAction::TnlPop {
                            port: vport,
                            kind,
                            tlv: t.tlv(),
                        });
                        self.note(
                            0,
                            &format!(
                                "underlay: {} packet to {dst}: tnl_pop({vport})",
                                kind.name()
                            ),
                        );
                    }
                    None => self.note(0, "underlay: no tunnel on this port: dropping"),
                }
            }
            _ => self.note(0, "underlay: not ARP or IP: dropping"),
        }
    }

    /// IPv6 neighbour discovery on the underlay: solicitations for the
    /// endpoint answered with an advertisement (the solicitation turned
    /// around: type 136, solicited and override flags, its source
    /// link-layer option made the target's), the sender's link-layer
    /// address snooped from solicitations and advertisements.
    fn underlay_nd(&mut self, t: &Tunnels, port: u32, mac: [u8; 6], answer: bool) {
        use FieldId as F;
        let k = self.flow;
        for f in [
            F::Icmpv6Type,
            F::Icmpv6Code,
            F::NdTarget,
            F::NdSll,
            F::NdTll,
            F::Ipv6Src,
            F::NdOptionsType,
        ] {
            self.exact(f);
        }
        let target = IpAddr::V6(Ipv6Addr::from(k.nd_target()));
        let (who, lladdr) = if k.tp_src() == 135 {
            (IpAddr::V6(Ipv6Addr::from(k.ipv6_src())), k.arp_sha())
        } else {
            (target, k.arp_tha())
        };
        // Duplicate address detection: another node advertises one of
        // our tentative addresses, or detects it for itself (a
        // solicitation from `::`).
        if let IpAddr::V6(tgt) = target {
            let contested = k.tp_src() == 136 || k.ipv6_src() == 0;
            if answer && self.side_effects && contested && t.dad.conflict(tgt) {
                self.note(
                    0,
                    &format!(
                        "underlay: {tgt} is in use by another node (duplicate address detection)"
                    ),
                );
            }
            // Another node's detection of one of our usable addresses:
            // defended by an advertisement to all nodes (sent by the
            // neighbour thread: the solicitation has no room for the
            // link-layer option the advertisement needs).
            if answer && k.tp_src() == 135 && k.ipv6_src() == 0 && t.is_local(target) {
                if self.side_effects {
                    t.dad.defend(tgt);
                }
                self.note(
                    0,
                    &format!(
                        "underlay: another node is detecting {tgt}, ours: defending it with an advertisement to all nodes"
                    ),
                );
            }
        }
        if self.side_effects && lladdr != 0 && !who.is_unspecified() && !t.has_address(who) {
            t.neigh.learn(who, mac_bytes(lladdr), self.now_ms());
            self.note(
                0,
                &format!(
                    "underlay: learned neighbour {who} at {}",
                    normal::format_mac(lladdr)
                ),
            );
        }
        // A solicitation for one of ours, from an address (not duplicate
        // address detection), with its link-layer option to turn into
        // ours.
        if answer
            && k.tp_src() == 135
            && t.is_local(target)
            && k.ipv6_src() != 0
            && k.nd_options_type() == 1
        {
            for f in [F::EthSrc, F::EthDst, F::Ipv6Dst, F::NdReserved] {
                self.exact(f);
            }
            self.flow.set_dl_dst(k.dl_src());
            self.flow.set_dl_src(mac_u64(mac));
            self.flow.set_ipv6_src(k.nd_target());
            self.flow.set_ipv6_dst(k.ipv6_src());
            self.flow.set_tp_src(136);
            self.flow.set_nd_reserved(0x6000_0000);
            self.flow.set_nd_options_type(2);
            self.flow.set_arp_tha(mac_u64(mac));
            self.commit();
            self.odp.push(DpAction::Output(port));
            self.note(
                0,
                &format!("underlay: neighbour advertisement for {target}"),
            );
        } else {
            self.note(
                0,
                "underlay: neighbour discovery, nothing to answer: dropping",
            );
        }
    }

    /// As OVS's `tnl_process_ecn`: a packet that came through a tunnel
    /// whose outer header says congestion (ECN CE) is dropped if it is not
    /// ECN capable (after table 0's lookup, whose bits stay in the
    /// megaflow: true), and is marked CE otherwise (after that lookup,
    /// which sees its own ECN).
    pub(super) fn tunnel_ecn_drop(&mut self) -> bool {
        let k = self.flow;
        if !(k.has_tunnel() && k.is_ip_any() && k.tun_tos() & 3 == 3) {
            return false;
        }
        if k.nw_tos() & 3 != 0 {
            self.ecn_ce = true;
            return false;
        }
        let tables = self.tables;
        let _ = tables.lookup(0, &self.flow, &self.regs, Some(&mut self.wc));
        self.note(
            0,
            "dropping tunnel packet marked ECN CE but is not ECN capable",
        );
        true
    }

    /// A packet decapsulated on tunnel datapath port `in_port`: its
    /// OpenFlow in_port becomes the tunnel port its outer headers name.
    /// False (drop) when none does.
    pub(super) fn tunnel_receive(&mut self, t: &Tunnels) -> bool {
        let k = self.flow;
        let (src, dst) = if k.tun_dst() != 0 {
            (
                IpAddr::V4(Ipv4Addr::from(k.tun_src())),
                IpAddr::V4(Ipv4Addr::from(k.tun_dst())),
            )
        } else {
            (
                IpAddr::V6(Ipv6Addr::from(k.tun_ipv6_src())),
                IpAddr::V6(Ipv6Addr::from(k.tun_ipv6_dst())),
            )
        };
        match t.receive(k.in_port(), src, dst, k.tun_id()) {
            Some(p) => {
                self.flow.set_in_port(p);
                self.note(
                    0,
                    &format!("tunnel: from {src} key {:#x}: in_port {p}", k.tun_id()),
                );
                true
            }
            None => {
                self.note(
                    0,
                    &format!(
                        "receive tunnel port not found (from {src} key {:#x}): dropping",
                        k.tun_id()
                    ),
                );
                false
            }
        }
    }

    /// Output to tunnel port `p`: `clone(tnl_push(...),UNDERLAY)`.
    ///
    /// As OVS's `tnl_port_send` and `native_tunnel_output`: the inner
    /// packet's ECN is copied to the outer ToS (CE as ECT(0)), so it is
    /// significant for every IP packet output to a tunnel; nothing is sent
    /// to the address the packet came in to (the tunnel destination it
    /// was received with; none for a packet that came through no tunnel,
    /// so a `remote_ip=flow` port without `tun_dst` sends nothing); the
    /// rewrites pending are committed before the route and neighbour are
    /// looked up (they stay when those fail).
    pub(super) fn tunnel_output(&mut self, p: &TunnelPort, t: &Tunnels) {
        let f = self.flow;
        let (mut tos, mut ttl) = (p.tos, p.ttl);
        if f.is_ip_any() {
            // `tos=inherit`: the packet's DSCP; `ttl=inherit`: its TTL
            // (both then significant, as OVS's tnl_port_send makes them).
            if p.tos_inherit {
                FieldId::NwTos
                    .info()
                    .or_mask(&mut self.wc, FieldId::NwTos.info().full_mask());
                tos = f.nw_tos() & 0xfc;
            }
            if p.ttl_inherit {
                FieldId::NwTtl
                    .info()
                    .or_mask(&mut self.wc, FieldId::NwTtl.info().full_mask());
                ttl = f.nw_ttl();
            }
            FieldId::NwEcn
                .info()
                .or_mask(&mut self.wc, FieldId::NwEcn.info().full_mask());
            let ecn = f.nw_tos() & 3;
            tos |= if ecn == 3 { 2 } else { ecn };
        }
        let tnl_dst = |tun_dst: u32, tun_ipv6_dst: u128| {
            if tun_dst != 0 {
                IpAddr::V4(Ipv4Addr::from(tun_dst))
            } else {
                IpAddr::V6(Ipv6Addr::from(tun_ipv6_dst))
            }
        };
        let remote = match p.remote {
            Remote::Ip(ip) => ip,
            Remote::Flow => tnl_dst(f.tun_dst(), f.tun_ipv6_dst()),
        };
        let mapped = |a: IpAddr| match a {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        if mapped(remote) == mapped(tnl_dst(self.orig.tun_dst(), self.orig.tun_ipv6_dst())) {
            // As OVS: what tnl_port_send wrote into the flow's tunnel
            // metadata stays when the output stops here (it is restored
            // only after an output): later matches and outputs see the
            // port's fixed key and addresses.
            let split = |a: Option<IpAddr>| match a {
                Some(IpAddr::V4(v4)) => (u32::from(v4), 0),
                Some(IpAddr::V6(v6)) => (0, u128::from(v6)),
                None => (0, 0),
            };
            let (src4, src6) = split(p.local);
            self.flow.set_tun_src(src4);
            self.flow.set_tun_ipv6_src(src6);
            if let Remote::Ip(ip) = p.remote {
                let (dst4, dst6) = split(Some(ip));
                self.flow.set_tun_dst(dst4);
                self.flow.set_tun_ipv6_dst(dst6);
            }
            if let Key::Fixed(k) = p.out_key {
                self.flow.set_tun_id(k);
            }
            self.flow.set_tun_tp_dst(p.dst_port);
            self.flow.set_tun_ttl(ttl);
            self.flow.set_tun_tos(tos);
            self.note(
                self.depth + 1,
                &format!(
                    "output to tunnel port {}: not tunneling to our own address ({remote})",
                    p.ofport
                ),
            );
            return;
        }
        self.commit();
        let key = match p.out_key {
            Key::Fixed(k) => k,
            Key::Flow => f.tun_id(),
        };
        let Some(u) = t.underlay() else {
            self.note(self.depth + 1, "native tunnel: no underlay: nothing sent");
            return;
        };
        let Some((hop, src)) = t.route(remote) else {
            self.note(
                self.depth + 1,
                &format!("native tunnel routing failed: no route to {remote}"),
            );
            return;
        };
        let src = p.local.unwrap_or(src);
        let Some(dmac) = t.neigh.lookup(hop) else {
            if self.side_effects {
                t.neigh.want(hop);
            }
            self.note(self.depth + 1, &format!("neighbor cache miss for {hop} on the underlay: sending an ARP/ND request, dropping"));
            return;
        };
        let ip = match (src, remote) {
            (IpAddr::V4(s), IpAddr::V4(d)) => OuterIp::V4 {
                src: s.octets(),
                dst: d.octets(),
                df: p.df,
            },
            (IpAddr::V6(s), IpAddr::V6(d)) => OuterIp::V6 {
                src: s.octets(),
                dst: d.octets(),
            },
            _ => {
                self.note(
                    self.depth + 1,
                    "native tunnel: local and remote addresses of different families",
                );
                return;
            }
        };
        let v6 = matches!(ip, OuterIp::V6 { .. });
        let mut opts = [0u8; flowpath_wire::tunnel::MAX_GENEVE_OPTS];
        let mut nopts = 0;
        if p.kind == TunnelKind::Geneve {
            let mut values = [0u64; flowpath_wire::tunnel::TLV_FIELDS];
            for (i, v) in values.iter_mut().enumerate() {
                *v = f.tun_metadata(i);
            }
            let present = f.tun_metadata_present_map();
            let Some(n) =
                flowpath_wire::tunnel::encode_geneve_opts(&t.tlv(), &values, present, &mut opts)
            else {
                self.note(
                    self.depth + 1,
                    "native tunnel: the Geneve options do not fit the header",
                );
                return;
            };
            nopts = n;
        }
        let spec = HeaderSpec {
            kind: p.kind,
            eth_dst: dmac,
            eth_src: u.mac,
            ip,
            tos,
            ttl,
            udp_dst: p.dst_port,
            // As OVS 3.1's header builders: a UDP checksum over IPv6
            // always (csum=false or not), over IPv4 with csum=true; a GRE
            // checksum only with csum=true.
            csum: p.csum == Some(true) || (v6 && p.kind != TunnelKind::Gre),
            key: if p.kind == TunnelKind::Gre && p.out_key == Key::Fixed(0) {
                None
            } else {
                Some(key as u32)
            },
            oam: f.tun_flags() & 1 != 0,
            geneve_opts: &opts[..nopts],
        };
        let mut h = [0u8; MAX_HEADER];
        let Some(push) = build_header(&spec, &mut h)
            .ok()
            .and_then(|n| TnlPush::new(t.vport(p), u.port, p.kind, &h[..n]))
            .map(|push| {
                let (min, max) = t.port_range();
                push.with_port_range(min, max)
            })
        else {
            self.note(self.depth + 1, "native tunnel: header could not be built");
            return;
        };
        self.odp.push(DpAction::Clone { len: 2 });
        self.odp.push(DpAction::TnlPush(push));
        self.odp.push(DpAction::Output(u.port));
    }
}
