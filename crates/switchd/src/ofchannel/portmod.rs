//! Port and table configuration over the OpenFlow channel, with Open
//! vSwitch's semantics:
//!
//! - `PORT_MOD`: the port must exist (`OFPPMFC_BAD_PORT`) and the message
//!   must carry its Ethernet address (`OFPPMFC_BAD_HW_ADDR`); the
//!   configuration bits under the mask change (down, no receive, no
//!   forward, no flood, no packet-in), translation honours them once
//!   published (existing megaflows are revalidated), and a change is
//!   reported with `PORT_STATUS` (reason modify);
//! - `TABLE_MOD`: OpenFlow 1.4+ eviction and vacancy event settings,
//!   kept and reported by the table description (flowpath's tables have
//!   no flow limit: nothing is ever evicted and no vacancy event is sent);
//!   table 254 is read-only (`OFPTMFC_EPERM`).

use super::*;
use flowpath_openflow::msg::{PortMod, TableConfig, TableMod};

/// The tables a table description lists (254 is Open vSwitch's hidden
/// internal table).
const TABLES: u8 = 254;

impl Session {
    pub(super) fn port_mod(&mut self, pm: PortMod) -> Result<Vec<Vec<u8>>, OfError> {
        if self.info.role.load(Ordering::Relaxed) == 3 {
            return Err(ofe::BRC_IS_SECONDARY);
        }
        let Some(mut p) = self.ports().into_iter().find(|p| p.no == pm.port) else {
            return Err(ofe::PMFC_BAD_PORT);
        };
        if p.mac != pm.hw_addr {
            return Err(ofe::PMFC_BAD_HW_ADDR);
        }
        let new = (p.config & !pm.mask) | (pm.config & pm.mask);
        if new == p.config {
            return Ok(Vec::new());
        }
        self.ctl.state().rules.set_port_config(p.no, new);
        self.reg.ports_dirty.store(true, Ordering::SeqCst);
        self.pending = true;
        self.flush();
        p.config = new;
        // As Open vSwitch: taking a port down or up is reported twice, the
        // configuration first, then the link that follows it.
        self.reg.port_status(&self.info, &p);
        let up = new & msg::PC_PORT_DOWN == 0;
        if up != p.up {
            p.up = up;
            self.reg.port_status(&self.info, &p);
        }
        Ok(Vec::new())
    }

    pub(super) fn table_mod(&mut self, tm: TableMod) -> Result<Vec<Vec<u8>>, OfError> {
        if self.info.role.load(Ordering::Relaxed) == 3 {
            return Err(ofe::BRC_IS_SECONDARY);
        }
        let mut cfg = self.reg.table_cfg.lock().unwrap_or_else(|p| p.into_inner());
        let tables = match tm.table {
            0xff => 0..TABLES,
            t if t < TABLES => t..t + 1,
            _ => return Err(ofe::TMFC_EPERM),
        };
        for t in tables {
            let c = cfg.entry(t).or_default();
            c.apply(&tm);
            if *c == TableConfig::default() {
                cfg.remove(&t);
            }
        }
        Ok(Vec::new())
    }

    pub(super) fn table_desc(&self, xid: u32) -> Vec<Vec<u8>> {
        let mut used = [false; 256];
        for r in self.ctl.state().rules.rules() {
            used[usize::from(r.rule.table)] = true;
        }
        let cfg = self.reg.table_cfg.lock().unwrap_or_else(|p| p.into_inner());
        let mut r = msg::StatsReply::new(self.version, xid, msg::stats::TABLE_DESC, None);
        for t in 0..TABLES {
            // As Open vSwitch with no flow limit: 100% free when empty, else
            // its rounding of (2^32 - 1 - flows) / (2^32 - 1) down to 99%.
            let vacancy = if used[usize::from(t)] { 99 } else { 100 };
            r.push(&msg::table_desc_entry(
                t,
                &cfg.get(&t).copied().unwrap_or_default(),
                vacancy,
            ));
        }
        r.finish()
    }
}
