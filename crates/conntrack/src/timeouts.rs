//! Connection timeouts: the default timeout policy of Open vSwitch's
//! userspace datapath and the internal timeout classes that map onto it.
//!
//! What: [`Timeouts`] holds one value per timeout-policy attribute, in
//! seconds, named as `ovs-vsctl add-zone-tp` names them (`tcp_syn_sent`,
//! `udp_first`, ...). The protocol state machines do not pick attributes
//! directly; they pick a [`TimeoutClass`] (the tracker's own stages, such
//! as "TCP opening" or "other: seen both ways"), and [`Timeouts::ms`]
//! turns it into milliseconds exactly as Open vSwitch maps its internal
//! timeouts onto the policy attributes.
//!
//! Invariants: plain values, no interior state. Thread-safety: `Copy`,
//! read-only once the tracker is built.

/// Timeout policy, in seconds (Open vSwitch's userspace defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP: first packet seen (default 30 s).
    pub tcp_syn_sent: u32,
    /// TCP: opening, not yet established both ways (30 s).
    pub tcp_syn_recv: u32,
    /// TCP: established (24 h).
    pub tcp_established: u32,
    /// TCP: one side closing (15 min).
    pub tcp_fin_wait: u32,
    /// TCP: both sides closing (45 s).
    pub tcp_time_wait: u32,
    /// TCP: closed or reset (30 s).
    pub tcp_close: u32,
    /// UDP and other protocols: first packet (60 s).
    pub udp_first: u32,
    /// UDP and other protocols: several packets, one direction (60 s).
    pub udp_single: u32,
    /// UDP and other protocols: packets both ways (30 s).
    pub udp_multiple: u32,
    /// ICMP: request seen (60 s).
    pub icmp_first: u32,
    /// ICMP: reply seen (30 s).
    pub icmp_reply: u32,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            tcp_syn_sent: 30,
            tcp_syn_recv: 30,
            tcp_established: 24 * 60 * 60,
            tcp_fin_wait: 15 * 60,
            tcp_time_wait: 45,
            tcp_close: 30,
            udp_first: 60,
            udp_single: 60,
            udp_multiple: 30,
            icmp_first: 60,
            icmp_reply: 30,
        }
    }
}

/// The tracker's timeout stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutClass {
    /// TCP: the first packet.
    TcpFirstPacket,
    /// TCP: a side not yet established.
    TcpOpening,
    /// TCP: both sides established.
    TcpEstablished,
    /// TCP: one side closing.
    TcpClosing,
    /// TCP: both sides closing.
    TcpFinWait,
    /// TCP: both sides closed (or reset).
    TcpClosed,
    /// Other: first packet.
    OtherFirst,
    /// Other: more packets in the original direction only.
    OtherMultiple,
    /// Other: packets in both directions.
    OtherBidir,
    /// ICMP: request(s) only.
    IcmpFirst,
    /// ICMP: reply seen.
    IcmpReply,
}

impl Timeouts {
    /// The timeout of a stage in milliseconds.
    pub fn ms(&self, c: TimeoutClass) -> u64 {
        let s = match c {
            TimeoutClass::TcpFirstPacket => self.tcp_syn_sent,
            TimeoutClass::TcpOpening => self.tcp_syn_recv,
            TimeoutClass::TcpEstablished => self.tcp_established,
            TimeoutClass::TcpClosing => self.tcp_fin_wait,
            TimeoutClass::TcpFinWait => self.tcp_time_wait,
            TimeoutClass::TcpClosed => self.tcp_close,
            TimeoutClass::OtherFirst => self.udp_first,
            TimeoutClass::OtherMultiple => self.udp_single,
            TimeoutClass::OtherBidir => self.udp_multiple,
            TimeoutClass::IcmpFirst => self.icmp_first,
            TimeoutClass::IcmpReply => self.icmp_reply,
        };
        u64::from(s) * 1000
    }
}

/// The attribute names, in [`Timeouts`]' field order (as `ovs-vsctl
/// add-zone-tp` names them).
pub const NAMES: [&str; 11] = [
    "tcp_syn_sent",
    "tcp_syn_recv",
    "tcp_established",
    "tcp_fin_wait",
    "tcp_time_wait",
    "tcp_close",
    "udp_first",
    "udp_single",
    "udp_multiple",
    "icmp_first",
    "icmp_reply",
];

impl Timeouts {
    fn as_array(&self) -> [u32; 11] {
        [
            self.tcp_syn_sent,
            self.tcp_syn_recv,
            self.tcp_established,
            self.tcp_fin_wait,
            self.tcp_time_wait,
            self.tcp_close,
            self.udp_first,
            self.udp_single,
            self.udp_multiple,
            self.icmp_first,
            self.icmp_reply,
        ]
    }

    fn from_array(a: [u32; 11]) -> Timeouts {
        let [tcp_syn_sent, tcp_syn_recv, tcp_established, tcp_fin_wait, tcp_time_wait, tcp_close, udp_first, udp_single, udp_multiple, icmp_first, icmp_reply] =
            a;
        Timeouts {
            tcp_syn_sent,
            tcp_syn_recv,
            tcp_established,
            tcp_fin_wait,
            tcp_time_wait,
            tcp_close,
            udp_first,
            udp_single,
            udp_multiple,
            icmp_first,
            icmp_reply,
        }
    }
}

/// Checks that `name` is a timeout attribute ([`NAMES`]) and `secs` a
/// valid value for it; the attribute's index.
pub fn check(name: &str, secs: u32) -> Result<usize, String> {
    let i = NAMES.iter().position(|n| *n == name).ok_or_else(|| {
        format!(
            "unknown conntrack timeout {name} (one of {})",
            NAMES.join(", ")
        )
    })?;
    if secs == 0 {
        return Err(format!("{name}: a timeout of 0 seconds is not allowed"));
    }
    Ok(i)
}

/// [`Timeouts`] that can change while packets are tracked: one atomic
/// per attribute, read with one relaxed load per state update (a change
/// applies to the next update of each connection).
pub struct LiveTimeouts {
    secs: [std::sync::atomic::AtomicU32; 11],
}

impl LiveTimeouts {
    /// Starts from `t`.
    pub fn new(t: Timeouts) -> Self {
        LiveTimeouts {
            secs: t.as_array().map(std::sync::atomic::AtomicU32::new),
        }
    }

    /// The timeout of a stage in milliseconds.
    #[inline]
    pub fn ms(&self, c: TimeoutClass) -> u64 {
        let i = match c {
            TimeoutClass::TcpFirstPacket => 0,
            TimeoutClass::TcpOpening => 1,
            TimeoutClass::TcpEstablished => 2,
            TimeoutClass::TcpClosing => 3,
            TimeoutClass::TcpFinWait => 4,
            TimeoutClass::TcpClosed => 5,
            TimeoutClass::OtherFirst => 6,
            TimeoutClass::OtherMultiple => 7,
            TimeoutClass::OtherBidir => 8,
            TimeoutClass::IcmpFirst => 9,
            TimeoutClass::IcmpReply => 10,
        };
        self.secs.get(i).map_or(0, |a| {
            u64::from(a.load(std::sync::atomic::Ordering::Relaxed)) * 1000
        })
    }

    /// Sets attribute `name` ([`NAMES`]) to `secs` seconds.
    pub fn set(&self, name: &str, secs: u32) -> Result<(), String> {
        let i = NAMES.iter().position(|n| *n == name).ok_or_else(|| {
            format!(
                "unknown conntrack timeout {name} (one of {})",
                NAMES.join(", ")
            )
        })?;
        if secs == 0 {
            return Err(format!("{name}: a timeout of 0 seconds is not allowed"));
        }
        if let Some(a) = self.secs.get(i) {
            a.store(secs, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// The timeouts now.
    pub fn get(&self) -> Timeouts {
        Timeouts::from_array(
            self.secs
                .each_ref()
                .map(|a| a.load(std::sync::atomic::Ordering::Relaxed)),
        )
    }
}

impl std::fmt::Debug for LiveTimeouts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_mapping() {
        let t = Timeouts::default();
        assert_eq!(t.ms(TimeoutClass::TcpEstablished), 86_400_000);
        assert_eq!(t.ms(TimeoutClass::TcpClosing), 900_000);
        assert_eq!(t.ms(TimeoutClass::TcpFinWait), 45_000);
        assert_eq!(t.ms(TimeoutClass::OtherMultiple), 60_000);
        assert_eq!(t.ms(TimeoutClass::OtherBidir), 30_000);
        assert_eq!(t.ms(TimeoutClass::IcmpReply), 30_000);
        let live = LiveTimeouts::new(t);
        for c in [
            TimeoutClass::TcpFirstPacket,
            TimeoutClass::TcpEstablished,
            TimeoutClass::OtherBidir,
            TimeoutClass::IcmpReply,
        ] {
            assert_eq!(live.ms(c), t.ms(c));
        }
        live.set("tcp_established", 60).unwrap();
        assert_eq!(live.ms(TimeoutClass::TcpEstablished), 60_000);
        assert_eq!(live.get().tcp_established, 60);
        assert!(live.set("tcp_bogus", 5).is_err());
        assert!(live.set("udp_first", 0).is_err());
    }
}
