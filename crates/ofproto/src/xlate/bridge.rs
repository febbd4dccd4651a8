//! `NORMAL`: the L2 learning switch's decision (MAC learning, VLANs,
//! flooding) translated into outputs with their tag changes.

use super::*;

impl<L: Lookup> Ctx<'_, '_, L> {
    /// `NORMAL`: an L2 learning switch (OVS's `xlate_normal`). The
    /// megaflow gets dl_src, dl_dst and the outer VLAN id exact (and, for
    /// a broadcast ARP, what OVS's gratuitous-ARP check reads).
    pub(super) fn xlate_normal(&mut self, indent: u32) {
        let mut m = self.wc.to_key();
        m.set_dl_src(0xffff_ffff_ffff);
        m.set_dl_dst(0xffff_ffff_ffff);
        m.set_vlan_tci(m.vlan_tci() | 0x0fff | VLAN_CFI);
        self.wc = FlowMask::from_key(&m);

        let in_port = self.flow.in_port();
        let tci = self.flow.vlan_tci();
        let dl_type = self.flow.dl_type();
        if (dl_type == 0x8100 || dl_type == 0x88a8) && tci & VLAN_CFI == 0 {
            self.note(indent, "partial VLAN tag, dropping");
            return;
        }
        let empty = PortVlans::default();
        let vlans = self.normal.as_ref().map_or(&empty, |e| e.vlans);
        let vid = if tci & VLAN_CFI != 0 { tci & 0x0fff } else { 0 };
        let in_mode = vlans.get(in_port).clone();
        let Some(vlan) = in_mode.input_vlan(vid) else {
            let why = match in_mode {
                normal::VlanMode::Access(t) => format!(
                    "dropping VLAN {vid} tagged packet received on port {in_port} configured as VLAN {t} access port"
                ),
                _ => format!(
                    "dropping VLAN {vid} packet received on port {in_port} not configured for trunking VLAN {vid}"
                ),
            };
            self.note(indent, &why);
            return;
        };
        let dl_src = self.flow.dl_src();
        let dl_dst = self.flow.dl_dst();
        if normal::is_reserved(dl_dst) {
            self.note(indent, "packet to a reserved multicast address, dropping");
            return;
        }
        // OVS's gratuitous-ARP check (it reads these fields whatever it
        // concludes; the answer matters only for bonds).
        if dl_type == 0x0806 {
            let mut m = self.wc.to_key();
            if dl_dst == 0xffff_ffff_ffff {
                m.set_nw_proto(0xff);
                if self.flow.nw_proto() == 1 {
                    m.set_nw_src(u32::MAX);
                    m.set_nw_dst(u32::MAX);
                }
            }
            self.wc = FlowMask::from_key(&m);
        }
        let mut local = false;
        let mut did_learn = false;
        let mut dst_port = None;
        if let Some(env) = self.normal.as_mut() {
            local = env.local;
            // Learn first, then look up (a packet to its own source finds
            // its input port and is dropped, as in OVS).
            if env.learn && !normal::is_multicast(dl_src) {
                env.macs.learn(vlan, dl_src, in_port, env.now_ms);
                did_learn = true;
            }
            if !normal::is_multicast(dl_dst) {
                dst_port = env.macs.lookup(vlan, dl_dst, env.now_ms);
            }
        }
        if did_learn {
            self.note(
                indent,
                &format!(
                    "learned that {} is on port {in_port} in VLAN {vlan}",
                    normal::format_mac(dl_src)
                ),
            );
        }
        match dst_port {
            Some(p) if p == in_port => {
                self.note(indent, "learned port is input port, dropping");
            }
            Some(p) => {
                self.note(indent, "forwarding to learned port");
                let mode = vlans.get(p).clone();
                self.output_normal(p, &mode, vlan);
            }
            None => {
                self.note(indent, "no learned MAC for destination, flooding");
                // LOCAL first, then ascending (OVS floods in its bundle
                // list's order, LOCAL first on a fresh bridge).
                let mut ports: Vec<u32> = Vec::new();
                if local || self.tables.ports().contains(&OFPP_LOCAL) {
                    ports.push(OFPP_LOCAL);
                }
                ports.extend(self.tables.ports().iter().filter(|&&p| p != OFPP_LOCAL));
                for p in ports {
                    let no_flood = crate::tables::port_config::NO_FLOOD;
                    if p == in_port || self.tables.port_config(p) & no_flood != 0 {
                        continue;
                    }
                    let mode = vlans.get(p).clone();
                    if mode.includes(vlan) {
                        self.output_normal(p, &mode, vlan);
                    }
                }
            }
        }
    }

    /// Outputs to `port` with the VLAN tag its mode gives VLAN `vlan`, then
    /// restores the flow's tags. As OVS: an access port sends untagged; a
    /// trunk tags with the VLAN and the packet's priority (PCP), and a
    /// packet of VLAN 0 with a non-zero priority keeps a priority tag.
    pub(super) fn output_normal(&mut self, port: u32, mode: &normal::VlanMode, vlan: u16) {
        let (saved_tci, saved_tpid, saved_src) =
            (self.flow.vlan_tci(), self.flow_tpid, self.tag_src);
        let pcp = if saved_tci & VLAN_CFI != 0 {
            saved_tci & 0xe000
        } else {
            0
        };
        let tci = match mode {
            normal::VlanMode::Access(_) => 0,
            // The native VLAN leaves a native-untagged port as from an
            // access port: the tag popped, its priority with it.
            normal::VlanMode::Native {
                native,
                untagged: true,
                ..
            } if *native == vlan => 0,
            _ => {
                let vid = mode.output_vid(vlan);
                if vid == 0 && saved_tci & VLAN_CFI != 0 {
                    // VLAN 0 on a trunk: whether the packet keeps a
                    // priority tag depends on its PCP being zero or not,
                    // so the PCP is significant (found by the megaflow
                    // invariant test: PCP 7 and PCP 0 packets of one
                    // megaflow got different actions).
                    let mut m = self.wc.to_key();
                    m.set_vlan_tci(m.vlan_tci() | 0xe000 | VLAN_CFI);
                    self.wc = FlowMask::from_key(&m);
                }
                match vid | pcp {
                    0 => 0,
                    t => t | VLAN_CFI,
                }
            }
        };
        self.flow.set_vlan_tci(tci);
        if tci != 0 && saved_tci & VLAN_CFI == 0 {
            self.flow_tpid[0] = 0x8100;
        }
        // The packet's own outer tag with (significant) VID replaced, or
        // a made one.
        if tci != 0 && (saved_tci & VLAN_CFI == 0 || self.tag_src[0] != Some(0)) {
            self.tag_src[0] = None;
        }
        self.output(port);
        self.flow.set_vlan_tci(saved_tci);
        self.flow_tpid = saved_tpid;
        self.tag_src = saved_src;
    }
}
