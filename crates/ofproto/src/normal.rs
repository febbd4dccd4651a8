//! The `NORMAL` action's state: the bridge's MAC learning table and its
//! ports' 802.1Q configuration.
//!
//! What: [`MacTable`] maps (VLAN, MAC) to the port the MAC was last seen
//! on, with OVS's defaults (2,048 entries, 300 s aging; the least recently
//! used entry makes room for a new one when full); [`PortVlans`] says per
//! port whether it is an access port of one VLAN or a trunk (of every VLAN
//! or of a list). Translation ([`crate::xlate`]) reads both through a
//! [`NormalEnv`] and learns into the table.
//!
//! Semantics (Open vSwitch's, ovs-vswitchd.conf.db(5) "VLAN
//! Configuration"): a packet arriving on an access port is in the port's
//! VLAN and is dropped if it carries an 802.1Q tag with a non-zero VLAN id;
//! on a trunk it is in the VLAN of its tag (0 when untagged) and is dropped
//! when the port does not trunk that VLAN. It leaves an access port
//! untagged and a trunk port tagged with its VLAN (untagged for VLAN 0).
//!
//! Change tracking: every change that can change a translation (a MAC
//! learned, moved to another port, expired, evicted or flushed) is logged
//! with a sequence number; each datapath worker remembers the last number
//! it has seen and asks [`MacTable::changes_since`] which (VLAN, MAC)s to
//! revalidate — the megaflows NORMAL installed match `dl_dst` exactly, so
//! only those whose destination changed need translating again (OVS
//! revalidates every flow on a MAC learning change).
//!
//! Threads: plain data; the live switch shares one table between its PMDs
//! behind a mutex taken only on the slow path (upcalls, revalidation,
//! `fdb/show`).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// OVS's default MAC table size (`other_config:mac-table-size`).
pub const DEFAULT_MAC_TABLE_SIZE: usize = 2048;
/// OVS's default MAC aging time, seconds (`other_config:mac-aging-time`).
pub const DEFAULT_MAC_AGING_S: u64 = 300;
/// Changes kept for the workers to catch up with; a worker further behind
/// revalidates everything.
const LOG_CAP: usize = 4096;

/// A VLAN id (0..=4095; 0 = untagged).
pub type Vid = u16;

/// One port's 802.1Q configuration.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum VlanMode {
    /// Carries every VLAN (OVS's default: no `tag`, no `trunks`).
    #[default]
    TrunkAll,
    /// Carries the VLANs listed (`trunks=V1,V2`), sorted.
    Trunk(Vec<Vid>),
    /// Carries exactly one VLAN, untagged (`tag=V` / `vlan=V`).
    Access(Vid),
    /// A trunk (of `trunks`, sorted and holding `native`; every VLAN when
    /// empty) whose untagged packets are VLAN `native`; packets of the
    /// native VLAN leave untagged when `untagged` (OVS's
    /// `vlan_mode=native-untagged`), tagged otherwise (`native-tagged`).
    Native {
        /// The native VLAN (the port's `tag`).
        native: Vid,
        /// The VLANs trunked (empty: every VLAN).
        trunks: Vec<Vid>,
        /// The native VLAN leaves untagged.
        untagged: bool,
    },
}

impl VlanMode {
    /// True when the port carries VLAN `vlan`.
    pub fn includes(&self, vlan: Vid) -> bool {
        match self {
            VlanMode::TrunkAll => true,
            VlanMode::Trunk(v) => v.binary_search(&vlan).is_ok(),
            VlanMode::Access(t) => *t == vlan,
            // (VLAN 0 is the native VLAN's untagged form, never trunked
            // beside a native VLAN other than 0.)
            VlanMode::Native { native, trunks, .. } => {
                !(vlan == 0 && *native != 0)
                    && (trunks.is_empty() || trunks.binary_search(&vlan).is_ok())
            }
        }
    }

    /// A native-VLAN trunk (`vlan_mode=native-tagged` or
    /// `native-untagged`): `trunks` sorted, as OVS makes them: the native
    /// VLAN added to a non-empty list, and VLAN 0 taken out unless it is
    /// the native VLAN.
    pub fn native(native: Vid, mut trunks: Vec<Vid>, untagged: bool) -> VlanMode {
        if !trunks.is_empty() {
            trunks.push(native);
            if native != 0 {
                trunks.retain(|v| *v != 0);
            }
        }
        trunks.sort_unstable();
        trunks.dedup();
        VlanMode::Native {
            native,
            trunks,
            untagged,
        }
    }

    /// The VLAN of a packet that arrives with tag VLAN id `vid` (0 if
    /// untagged), or `None` if the port must drop it.
    pub fn input_vlan(&self, vid: Vid) -> Option<Vid> {
        match self {
            VlanMode::Access(t) => (vid == 0).then_some(*t),
            VlanMode::TrunkAll => Some(vid),
            VlanMode::Trunk(v) => v.binary_search(&vid).is_ok().then_some(vid),
            VlanMode::Native { native, .. } if vid == 0 => Some(*native),
            VlanMode::Native { .. } => self.includes(vid).then_some(vid),
        }
    }

    /// The VLAN id a packet of `vlan` leaves this port tagged with (0 =
    /// untagged).
    pub fn output_vid(&self, vlan: Vid) -> Vid {
        match self {
            VlanMode::Access(_) => 0,
            VlanMode::Native {
                native,
                untagged: true,
                ..
            } if *native == vlan => 0,
            _ => vlan,
        }
    }
}

impl fmt::Display for VlanMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, v: &[Vid]| -> fmt::Result {
            f.write_str("trunks=")?;
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{x}")?;
            }
            Ok(())
        };
        match self {
            VlanMode::TrunkAll => f.write_str("trunk"),
            VlanMode::Trunk(v) => list(f, v),
            VlanMode::Access(t) => write!(f, "vlan={t}"),
            VlanMode::Native {
                native,
                trunks,
                untagged,
            } => {
                let kind = if *untagged { "untagged" } else { "tagged" };
                write!(f, "native-{kind}={native}")?;
                if !trunks.is_empty() {
                    f.write_str(",")?;
                    list(f, trunks)?;
                }
                Ok(())
            }
        }
    }
}

/// Parses a port's VLAN options, as `--port N=SPEC,vlan=V` and
/// `--port-vlan N=...` take them: `vlan=V` (or `tag=V`, access port) or
/// `trunks=V1,V2,...` (a trunk of those VLANs; `trunks=` alone or nothing
/// is a trunk of every VLAN), `native-tagged=V[,trunks=...]` or
/// `native-untagged=V[,trunks=...]` (a trunk whose untagged packets are
/// VLAN V, sent tagged or untagged). `text` is the option list after the
/// port (`vlan=10`, `trunks=10,20`, `native-untagged=10,trunks=20`).
pub fn parse_vlan_mode(text: &str) -> Result<VlanMode, String> {
    let text = text.trim();
    if text.is_empty() || text == "trunk" {
        return Ok(VlanMode::TrunkAll);
    }
    let vid = |s: &str| -> Result<Vid, String> {
        match s.trim().parse::<u16>() {
            Ok(v) if v <= 4095 => Ok(v),
            _ => Err(format!("'{}' is not a VLAN id (0 to 4095)", s.trim())),
        }
    };
    if let Some(v) = text.strip_prefix("vlan=").or(text.strip_prefix("tag=")) {
        return Ok(VlanMode::Access(vid(v)?));
    }
    let list = |list: &str| -> Result<Vec<Vid>, String> {
        list.split(',')
            .filter(|s| !s.trim().is_empty())
            .map(vid)
            .collect()
    };
    for (prefix, untagged) in [("native-tagged=", false), ("native-untagged=", true)] {
        if let Some(rest) = text.strip_prefix(prefix) {
            let (v, trunks) = match rest.split_once(",trunks=") {
                Some((v, t)) => (v, list(t)?),
                None => (rest, Vec::new()),
            };
            return Ok(VlanMode::native(vid(v)?, trunks, untagged));
        }
    }
    if let Some(l) = text.strip_prefix("trunks=") {
        let mut v = list(l)?;
        if v.is_empty() {
            return Ok(VlanMode::TrunkAll);
        }
        v.sort_unstable();
        v.dedup();
        return Ok(VlanMode::Trunk(v));
    }
    Err(format!(
        "'{text}': expected vlan=V (access port), trunks=V1,V2,... (trunk port) or native-tagged=V / native-untagged=V[,trunks=V1,V2,...]"
    ))
}

/// The 802.1Q configuration of the bridge's ports (ports not listed are
/// trunks of every VLAN).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortVlans {
    modes: HashMap<u32, VlanMode>,
}

impl PortVlans {
    /// Sets port `port`'s mode.
    pub fn set(&mut self, port: u32, mode: VlanMode) {
        if mode == VlanMode::TrunkAll {
            self.modes.remove(&port);
        } else {
            self.modes.insert(port, mode);
        }
    }

    /// Port `port`'s mode.
    pub fn get(&self, port: u32) -> &VlanMode {
        const ALL: VlanMode = VlanMode::TrunkAll;
        self.modes.get(&port).unwrap_or(&ALL)
    }

    /// True when no port has a VLAN configuration.
    pub fn is_empty(&self) -> bool {
        self.modes.is_empty()
    }
}

/// One learned MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacEntry {
    /// The VLAN it was seen in.
    pub vlan: Vid,
    /// The MAC (48 bits, as `FlowKey::dl_src` holds it).
    pub mac: u64,
    /// The port it was last seen on.
    pub port: u32,
    /// When it was last seen (caller's clock, ms).
    pub used_ms: u64,
}

impl MacEntry {
    /// Seconds since last seen at `now_ms` (`fdb/show`'s "Age").
    pub fn age_s(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.used_ms) / 1000
    }
}

/// What changed since a worker last looked (see [`MacTable::changes_since`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MacChanges {
    /// Nothing.
    None,
    /// These (VLAN, MAC)s.
    Some(Vec<(Vid, u64)>),
    /// Too much to list: revalidate everything.
    All,
}

/// The MAC learning table. See the module documentation.
#[derive(Clone, Debug)]
pub struct MacTable {
    map: HashMap<(Vid, u64), (u32, u64)>,
    max: usize,
    aging_ms: u64,
    /// (sequence number, VLAN, MAC) of recent changes; `None` = everything
    /// (a flush).
    log: VecDeque<(u64, Option<(Vid, u64)>)>,
    seq: u64,
    /// Counters.
    pub stats: MacStats,
}

/// Counters of a [`MacTable`] (`fdb/stats-show`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MacStats {
    /// MACs learned (new entries).
    pub learned: u64,
    /// MACs that moved to another port.
    pub moved: u64,
    /// Entries removed because they aged out.
    pub expired: u64,
    /// Entries removed to make room.
    pub evicted: u64,
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable::new(DEFAULT_MAC_TABLE_SIZE, DEFAULT_MAC_AGING_S)
    }
}

/// True for a group (multicast or broadcast) address.
pub fn is_multicast(mac: u64) -> bool {
    (mac >> 40) & 1 == 1
}

/// True for the IEEE 802.1D reserved addresses 01:80:c2:00:00:00-0f
/// (STP, LACP, ...), which a bridge must not forward.
pub fn is_reserved(mac: u64) -> bool {
    mac & !0xf == 0x0180_c200_0000
}

/// Formats a 48-bit MAC as `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: u64) -> String {
    let b = mac.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

impl MacTable {
    /// A table of at most `max_entries` (at least 1) whose entries age out
    /// after `aging_s` seconds without a packet (at least 1 s, as OVS).
    pub fn new(max_entries: usize, aging_s: u64) -> Self {
        MacTable {
            map: HashMap::new(),
            max: max_entries.max(1),
            aging_ms: aging_s.max(1).saturating_mul(1000),
            log: VecDeque::new(),
            seq: 0,
            stats: MacStats::default(),
        }
    }

    /// Most entries.
    pub fn max_entries(&self) -> usize {
        self.max
    }

    /// Aging time in seconds.
    pub fn aging_s(&self) -> u64 {
        self.aging_ms / 1000
    }

    /// Entries (live or not yet swept).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn changed(&mut self, what: Option<(Vid, u64)>) {
        self.seq += 1;
        if self.log.len() == LOG_CAP {
            self.log.pop_front();
        }
        self.log.push_back((self.seq, what));
    }

    /// The current change sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// What changed after sequence number `seen` (and the number to
    /// remember now).
    pub fn changes_since(&self, seen: u64) -> (MacChanges, u64) {
        if seen >= self.seq {
            return (MacChanges::None, self.seq);
        }
        let oldest = self.log.front().map_or(u64::MAX, |e| e.0);
        if seen + 1 < oldest {
            return (MacChanges::All, self.seq);
        }
        let mut v = Vec::new();
        for (s, what) in &self.log {
            if *s <= seen {
                continue;
            }
            match what {
                Some(x) => v.push(*x),
                None => return (MacChanges::All, self.seq),
            }
        }
        v.sort_unstable();
        v.dedup();
        (MacChanges::Some(v), self.seq)
    }

    /// The port `mac` was learned on in `vlan`, if it has not aged out at
    /// `now_ms`.
    pub fn lookup(&self, vlan: Vid, mac: u64, now_ms: u64) -> Option<u32> {
        match self.map.get(&(vlan, mac)) {
            Some(&(port, used)) if now_ms.saturating_sub(used) < self.aging_ms => Some(port),
            _ => None,
        }
    }

    /// Learns that `mac` is on `port` in `vlan` at `now_ms`. Group
    /// addresses are not learned. Returns true when the table's answer for
    /// (vlan, mac) changed (new entry or new port).
    pub fn learn(&mut self, vlan: Vid, mac: u64, port: u32, now_ms: u64) -> bool {
        if is_multicast(mac) {
            return false;
        }
        let aging = self.aging_ms;
        if let Some(e) = self.map.get_mut(&(vlan, mac)) {
            let expired = now_ms.saturating_sub(e.1) >= aging;
            let moved = e.0 != port;
            *e = (port, now_ms);
            if moved {
                self.stats.moved += 1;
            }
            if moved || expired {
                self.changed(Some((vlan, mac)));
                return true;
            }
            return false;
        }
        if self.map.len() >= self.max {
            self.expire(now_ms);
        }
        if self.map.len() >= self.max {
            // Least recently used out (a scan of at most `max` entries: the
            // slow path only, and only when full).
            if let Some((&k, _)) = self.map.iter().min_by_key(|(k, v)| (v.1, **k)) {
                self.map.remove(&k);
                self.stats.evicted += 1;
                self.changed(Some(k));
            }
        }
        self.map.insert((vlan, mac), (port, now_ms));
        self.stats.learned += 1;
        self.changed(Some((vlan, mac)));
        true
    }

    /// Notes that `mac` was seen on `port` in `vlan` at `now_ms` by a
    /// packet that did not reach the slow path (a megaflow hit): an entry
    /// that still says so and has not aged out is kept fresh, as OVS's
    /// revalidator refreshes learning from megaflow statistics. Nothing
    /// else changes (no new entry, no move: those take an upcall).
    /// Returns whether an entry was refreshed.
    pub fn refresh(&mut self, vlan: Vid, mac: u64, port: u32, now_ms: u64) -> bool {
        let aging = self.aging_ms;
        match self.map.get_mut(&(vlan, mac)) {
            Some(e) if e.0 == port && now_ms.saturating_sub(e.1) < aging => {
                e.1 = e.1.max(now_ms);
                true
            }
            _ => false,
        }
    }

    /// Removes the entries aged out at `now_ms`; returns how many.
    pub fn expire(&mut self, now_ms: u64) -> usize {
        let aging = self.aging_ms;
        let old: Vec<(Vid, u64)> = self
            .map
            .iter()
            .filter(|(_, v)| now_ms.saturating_sub(v.1) >= aging)
            .map(|(k, _)| *k)
            .collect();
        for k in &old {
            self.map.remove(k);
            self.stats.expired += 1;
            self.changed(Some(*k));
        }
        old.len()
    }

    /// Removes every entry (`fdb/flush`); returns how many there were.
    pub fn flush(&mut self) -> usize {
        let n = self.map.len();
        self.map.clear();
        self.changed(None);
        n
    }

    /// Removes the entries on `port` (the port went away).
    pub fn flush_port(&mut self, port: u32) -> usize {
        let old: Vec<(Vid, u64)> = self
            .map
            .iter()
            .filter(|(_, v)| v.0 == port)
            .map(|(k, _)| *k)
            .collect();
        for k in &old {
            self.map.remove(k);
            self.changed(Some(*k));
        }
        old.len()
    }

    /// The live entries at `now_ms`, sorted as `fdb/show` prints them
    /// (port, VLAN, MAC).
    pub fn entries(&self, now_ms: u64) -> Vec<MacEntry> {
        let mut v: Vec<MacEntry> = self
            .map
            .iter()
            .filter(|(_, e)| now_ms.saturating_sub(e.1) < self.aging_ms)
            .map(|(&(vlan, mac), &(port, used_ms))| MacEntry {
                vlan,
                mac,
                port,
                used_ms,
            })
            .collect();
        v.sort_by_key(|e| (e.port, e.vlan, e.mac));
        v
    }

    /// `ovs-appctl fdb/show`'s text: ` port  VLAN  MAC                Age`
    /// and one line per entry; `port_name` names a port number.
    pub fn show(&self, now_ms: u64, port_name: impl Fn(u32) -> String) -> String {
        let mut s = String::from(" port  VLAN  MAC                Age\n");
        for e in self.entries(now_ms) {
            s.push_str(&format!(
                "{:>5}  {:>4}  {}  {:>3}\n",
                port_name(e.port),
                e.vlan,
                format_mac(e.mac),
                e.age_s(now_ms)
            ));
        }
        s
    }
}

/// A bridge's `NORMAL` state shared by its workers: the learning table
/// (behind a mutex, taken only on the slow path), its change sequence
/// number readable without the lock, the ports' VLANs, and whether the
/// bridge has a LOCAL port.
#[derive(Debug)]
pub struct Bridge {
    macs: Mutex<MacTable>,
    seq: AtomicU64,
    /// The flows `learn` actions made on this bridge.
    pub learned: std::sync::Arc<crate::learn::LearnedFlows>,
    /// Ports' 802.1Q configuration (changed while running by
    /// [`Bridge::set_vlan_mode`]; read on the slow path only).
    vlans: std::sync::RwLock<PortVlans>,
    /// Flooding includes the LOCAL port.
    pub local: bool,
}

impl Default for Bridge {
    /// OVS's defaults: 2,048 entries, 300 s aging, no VLAN configuration,
    /// no LOCAL port.
    fn default() -> Self {
        Bridge::new(MacTable::default(), PortVlans::default(), false)
    }
}

impl Bridge {
    /// A bridge with an empty `macs` table.
    pub fn new(macs: MacTable, vlans: PortVlans, local: bool) -> Self {
        Bridge {
            seq: AtomicU64::new(macs.seq()),
            macs: Mutex::new(macs),
            learned: Default::default(),
            vlans: std::sync::RwLock::new(vlans),
            local,
        }
    }

    /// The ports' 802.1Q configuration, read-locked.
    pub fn vlans(&self) -> std::sync::RwLockReadGuard<'_, PortVlans> {
        self.vlans.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets port `port`'s 802.1Q mode; true when it changed (the caller
    /// revalidates: translations through `NORMAL` depend on it).
    pub fn set_vlan_mode(&self, port: u32, mode: VlanMode) -> bool {
        let mut v = self.vlans.write().unwrap_or_else(PoisonError::into_inner);
        if *v.get(port) == mode {
            return false;
        }
        v.set(port, mode);
        true
    }

    /// The learning table, locked. A poisoned lock (a panic while it was
    /// held) still gives the table: it is consistent between calls.
    pub fn macs(&self) -> BridgeGuard<'_> {
        BridgeGuard {
            g: self.macs.lock().unwrap_or_else(PoisonError::into_inner),
            seq: &self.seq,
        }
    }

    /// The table's change sequence number, without the lock.
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }
}

/// The locked learning table; publishes the change sequence number when
/// dropped.
#[derive(Debug)]
pub struct BridgeGuard<'a> {
    g: MutexGuard<'a, MacTable>,
    seq: &'a AtomicU64,
}

impl std::ops::Deref for BridgeGuard<'_> {
    type Target = MacTable;
    fn deref(&self) -> &MacTable {
        &self.g
    }
}

impl std::ops::DerefMut for BridgeGuard<'_> {
    fn deref_mut(&mut self) -> &mut MacTable {
        &mut self.g
    }
}

impl Drop for BridgeGuard<'_> {
    fn drop(&mut self) {
        self.seq.store(self.g.seq(), Ordering::Release);
    }
}

/// What translation needs for `NORMAL`: the ports' VLAN configuration, the
/// learning table, the clock, and whether to learn (a trace or a
/// revalidation looks without learning, as OVS's do).
#[derive(Debug)]
pub struct NormalEnv<'a> {
    /// Ports' 802.1Q configuration.
    pub vlans: &'a PortVlans,
    /// The learning table.
    pub macs: &'a mut MacTable,
    /// Now, in the table's clock (ms).
    pub now_ms: u64,
    /// Learn the packet's source.
    pub learn: bool,
    /// Whether the bridge has a LOCAL port that flooding includes.
    pub local: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: u64 = 0x5054_0000_0009;
    const B: u64 = 0x5054_0000_000a;

    #[test]
    fn learns_moves_ages_and_evicts() {
        let mut t = MacTable::new(2, 300);
        assert!(t.learn(0, A, 1, 0));
        assert!(!t.learn(0, A, 1, 10), "same port: no change");
        assert_eq!(t.lookup(0, A, 20), Some(1));
        assert_eq!(t.lookup(1, A, 20), None, "per VLAN");
        assert!(t.learn(0, A, 2, 30), "moved");
        assert_eq!(t.lookup(0, A, 40), Some(2));
        assert_eq!(t.stats.moved, 1);
        assert_eq!(t.lookup(0, A, 30 + 300_000), None, "aged out");
        assert!(!t.learn(0, 0x0100_5e00_0001, 1, 0), "multicast not learned");
        // Full: the least recently used goes.
        assert!(t.learn(0, B, 3, 50));
        assert!(t.learn(5, B, 4, 60));
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup(0, A, 70), None, "A (used at 30) evicted");
        assert_eq!(t.lookup(0, B, 70), Some(3));
        assert_eq!(t.stats.evicted, 1);
        assert_eq!(t.expire(60 + 300_000), 2);
        assert!(t.is_empty());
    }

    #[test]
    fn change_log() {
        let mut t = MacTable::default();
        let s0 = t.seq();
        assert_eq!(t.changes_since(s0).0, MacChanges::None);
        t.learn(0, A, 1, 0);
        t.learn(0, B, 2, 0);
        t.learn(0, A, 1, 5);
        let (c, s1) = t.changes_since(s0);
        assert_eq!(c, MacChanges::Some(vec![(0, A), (0, B)]));
        assert_eq!(t.changes_since(s1).0, MacChanges::None);
        t.flush();
        assert_eq!(t.changes_since(s1).0, MacChanges::All);
        for i in 0..(LOG_CAP as u64 + 10) {
            t.learn(1, 0x0200_0000_0000 + i, 1, 0);
        }
        assert_eq!(t.changes_since(s1).0, MacChanges::All, "fell behind");
    }

    #[test]
    fn vlan_modes() {
        assert_eq!(parse_vlan_mode("").unwrap(), VlanMode::TrunkAll);
        assert_eq!(parse_vlan_mode("vlan=10").unwrap(), VlanMode::Access(10));
        assert_eq!(
            parse_vlan_mode("trunks=20,10,20").unwrap(),
            VlanMode::Trunk(vec![10, 20])
        );
        assert!(parse_vlan_mode("vlan=4096").is_err());
        assert!(parse_vlan_mode("mode=x").is_err());
        let acc = VlanMode::Access(10);
        assert_eq!(acc.input_vlan(0), Some(10));
        assert_eq!(acc.input_vlan(10), None, "tagged on an access port");
        assert_eq!(acc.output_vid(10), 0);
        let tr = VlanMode::Trunk(vec![10, 20]);
        assert_eq!(tr.input_vlan(0), None, "VLAN 0 not trunked");
        assert_eq!(tr.input_vlan(20), Some(20));
        assert!(tr.includes(10) && !tr.includes(30));
        assert_eq!(VlanMode::TrunkAll.input_vlan(7), Some(7));
        // Native VLANs: untagged packets join VLAN 5, which a non-empty
        // trunk list gains; it leaves tagged or untagged as the mode says.
        let nt = parse_vlan_mode("native-tagged=5,trunks=10").unwrap();
        assert_eq!(nt, VlanMode::native(5, vec![10], false));
        assert_eq!(nt.to_string(), "native-tagged=5,trunks=5,10");
        assert_eq!(nt.input_vlan(0), Some(5));
        assert_eq!(nt.input_vlan(5), Some(5));
        assert_eq!(nt.input_vlan(10), Some(10));
        assert_eq!(nt.input_vlan(11), None);
        assert_eq!(nt.output_vid(5), 5);
        let nu = parse_vlan_mode("native-untagged=5").unwrap();
        assert_eq!(nu.to_string(), "native-untagged=5");
        assert!(nu.includes(4095), "no trunks: every VLAN");
        assert_eq!(nu.output_vid(5), 0);
        assert!(!nu.includes(0) && !nt.includes(0), "VLAN 0 beside native 5");
        assert_eq!(
            VlanMode::native(5, vec![0, 7], true),
            VlanMode::native(5, vec![7], true)
        );
        assert_eq!(nu.output_vid(6), 6);
        assert_eq!(parse_vlan_mode(&nu.to_string()).unwrap(), nu);
        assert!(parse_vlan_mode("native-tagged=x").is_err());
        assert!(is_reserved(0x0180_c200_0000) && is_reserved(0x0180_c200_000e));
        assert!(!is_reserved(0x0180_c200_0010));
        assert_eq!(format_mac(A), "50:54:00:00:00:09");
    }
}
