//! Port specs: the text after `N=` in `flowpath switch --port N=SPEC`.
//!
//! ```text
//! afxdp:IFNAME[,mode=native|generic][,queues=N]
//! afpacket:IFNAME[,queues=N][,ring=v2|v3]
//! tap:NAME
//! pcap:FILE[,loop]
//! pcap-out:FILE
//! vhost-user:PATH[,server|client][,queues=N]
//! patch:NAME,peer=PEER
//! local:NAME
//! null
//! ```
//!
//! Parse, don't validate: a [`PortSpec`] that exists is well formed
//! (interface names are 1–15 bytes without `/`, whitespace or `:`, queue
//! counts 1–64); whether the interface exists is found out on open.

use crate::NetdevError;
use std::fmt;
use std::path::PathBuf;

/// Most rx queues one port may have.
pub const MAX_QUEUES: u32 = 64;

/// How an AF_XDP port's program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// Native (driver) mode where the driver supports it, else generic.
    Auto,
    /// Driver mode only (fails if the driver has none).
    Native,
    /// Generic (skb) mode.
    Generic,
}

/// The layout of an AF_PACKET port's rx ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RingKind {
    /// TPACKET_V2: one slot per frame, each handed over as soon as the
    /// kernel wrote it (no added latency); frames larger than a slot
    /// (GSO, jumbo) come through the socket's queue instead.
    #[default]
    Frames,
    /// TPACKET_V3: blocks of frames handed over when full or 1 ms after
    /// their first frame (fewer cache misses at high rates, up to a
    /// millisecond of delay for sparse traffic).
    Blocks,
}

impl RingKind {
    /// The option value (`v2`, `v3`).
    pub fn name(self) -> &'static str {
        match self {
            RingKind::Frames => "v2",
            RingKind::Blocks => "v3",
        }
    }
}

/// A parsed port spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortSpec {
    /// AF_XDP sockets on an interface, one per rx queue.
    AfXdp {
        /// Interface name.
        ifname: String,
        /// Attach mode.
        mode: XdpMode,
        /// Rx queues (the interface's queues 0..N).
        queues: u32,
    },
    /// AF_PACKET sockets with mapped rx rings, fanned out over N queues.
    AfPacket {
        /// Interface name.
        ifname: String,
        /// Rx queues (sockets in one PACKET_FANOUT group).
        queues: u32,
        /// The rx ring's layout.
        ring: RingKind,
    },
    /// A tap interface the port creates (and deletes on close).
    Tap {
        /// Interface name.
        name: String,
    },
    /// Frames received from a capture.
    Pcap {
        /// The capture.
        path: PathBuf,
        /// Start again at the end.
        looped: bool,
    },
    /// Frames sent are written to a capture.
    PcapOut {
        /// The capture written.
        path: PathBuf,
    },
    /// Sent frames are counted and discarded; nothing is received.
    Null,
    /// A vhost-user socket a VM or DPDK application attaches to (see
    /// [`crate::vhost`]).
    VhostUser {
        /// The Unix socket.
        path: PathBuf,
        /// Connect to `path` (the frontend listens) instead of listening.
        client: bool,
        /// Queue pairs.
        queues: u32,
    },
    /// One end of a pair joining two bridges of this process (see
    /// [`crate::patch`]).
    Patch {
        /// This end's name.
        name: String,
        /// The other end's name.
        peer: String,
    },
    /// The tunnel underlay through tap `NAME`, another bridge's LOCAL port
    /// in this process (see [`crate::tapoff`]).
    Local {
        /// The tap's name.
        name: String,
    },
}

impl PortSpec {
    /// Parses a spec (see the module documentation).
    pub fn parse(s: &str) -> Result<PortSpec, NetdevError> {
        let bad = |reason: String| NetdevError::BadSpec {
            spec: s.to_string(),
            reason,
        };
        let s_trim = s.trim();
        if s_trim == "null" {
            return Ok(PortSpec::Null);
        }
        let (kind, rest) = s_trim.split_once(':').ok_or_else(|| {
            bad(
                "expected KIND:NAME[,OPTIONS] with KIND one of afxdp, afpacket, tap, pcap, \
                 pcap-out, vhost-user, patch, local, or 'null'"
                    .to_string(),
            )
        })?;
        let mut parts = rest.split(',');
        let name = parts.next().unwrap_or("").trim();
        if name.is_empty() {
            return Err(bad(format!("{kind}: missing the name after ':'")));
        }
        let opts: Vec<(&str, Option<&str>)> = parts
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (p.trim(), None),
            })
            .collect();
        let mut queues = 1u32;
        let mut mode = XdpMode::Auto;
        let mut looped = false;
        let mut client = None;
        let mut ring = RingKind::default();
        let mut peer = None;
        let allowed: &[&str] = match kind {
            "afxdp" => &["mode", "queues"],
            "afpacket" => &["queues", "ring"],
            "pcap" => &["loop"],
            "vhost-user" => &["server", "client", "queues"],
            "patch" => &["peer"],
            "tap" | "pcap-out" | "local" => &[],
            _ => {
                return Err(bad(format!(
                    "unknown port kind '{kind}' (afxdp, afpacket, tap, pcap, pcap-out, \
                     vhost-user, patch, local, null)"
                )))
            }
        };
        for (k, v) in &opts {
            if !allowed.contains(k) {
                let list = if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                };
                return Err(bad(format!(
                    "unknown option '{k}' for {kind} ports (options: {list})"
                )));
            }
            match (*k, v) {
                ("queues", Some(v)) => {
                    queues = v
                        .parse()
                        .ok()
                        .filter(|q| (1..=MAX_QUEUES).contains(q))
                        .ok_or_else(|| {
                            bad(format!(
                                "queues={v}: expected a number from 1 to {MAX_QUEUES}"
                            ))
                        })?;
                }
                ("mode", Some(v)) => {
                    mode = match *v {
                        "native" | "drv" => XdpMode::Native,
                        "generic" | "skb" => XdpMode::Generic,
                        "auto" => XdpMode::Auto,
                        _ => return Err(bad(format!("mode={v}: expected native or generic"))),
                    }
                }
                ("ring", Some(v)) => {
                    ring = match *v {
                        "v2" | "frames" => RingKind::Frames,
                        "v3" | "blocks" => RingKind::Blocks,
                        _ => return Err(bad(format!("ring={v}: expected v2 or v3"))),
                    }
                }
                ("loop", None) => looped = true,
                ("peer", Some(v)) => peer = Some(v.to_string()),
                ("server" | "client", None) => {
                    let c = *k == "client";
                    if client.is_some_and(|was| was != c) {
                        return Err(bad("give either server or client, not both".to_string()));
                    }
                    client = Some(c);
                }
                (k, None) => return Err(bad(format!("option '{k}' needs a value ({k}=...)"))),
                (k, Some(_)) => return Err(bad(format!("option '{k}' takes no value"))),
            }
        }
        let ifname = |n: &str| -> Result<String, NetdevError> {
            if n.len() > 15 {
                return Err(bad(format!(
                    "interface name '{n}' is longer than 15 characters"
                )));
            }
            if n.bytes()
                .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0)
            {
                return Err(bad(format!("'{n}' is not a valid interface name")));
            }
            Ok(n.to_string())
        };
        Ok(match kind {
            "afxdp" => PortSpec::AfXdp {
                ifname: ifname(name)?,
                mode,
                queues,
            },
            "afpacket" => PortSpec::AfPacket {
                ifname: ifname(name)?,
                queues,
                ring,
            },
            "tap" => PortSpec::Tap {
                name: ifname(name)?,
            },
            "local" => PortSpec::Local {
                name: ifname(name)?,
            },
            "pcap" => PortSpec::Pcap {
                path: PathBuf::from(name),
                looped,
            },
            "patch" => {
                let Some(peer) = peer.filter(|p| !p.is_empty()) else {
                    return Err(bad("patch: give the other end's name (peer=NAME)".into()));
                };
                if peer == name {
                    return Err(bad(format!("patch: {name} cannot be its own peer")));
                }
                PortSpec::Patch {
                    name: name.to_string(),
                    peer,
                }
            }
            "vhost-user" => PortSpec::VhostUser {
                path: PathBuf::from(name),
                client: client.unwrap_or(false),
                queues,
            },
            _ => PortSpec::PcapOut {
                path: PathBuf::from(name),
            },
        })
    }

    /// The kind's name.
    pub fn kind(&self) -> &'static str {
        match self {
            PortSpec::AfXdp { .. } => "afxdp",
            PortSpec::AfPacket { .. } => "afpacket",
            PortSpec::Tap { .. } => "tap",
            PortSpec::Pcap { .. } => "pcap",
            PortSpec::PcapOut { .. } => "pcap-out",
            PortSpec::Null => "null",
            PortSpec::VhostUser { .. } => "vhost-user",
            PortSpec::Patch { .. } => "patch",
            PortSpec::Local { .. } => "local",
        }
    }

    /// The Linux interface this port uses, if any.
    pub fn ifname(&self) -> Option<&str> {
        match self {
            PortSpec::AfXdp { ifname, .. } | PortSpec::AfPacket { ifname, .. } => Some(ifname),
            PortSpec::Tap { name } => Some(name),
            _ => None,
        }
    }
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortSpec::AfXdp {
                ifname,
                mode,
                queues,
            } => {
                write!(f, "afxdp:{ifname}")?;
                match mode {
                    XdpMode::Auto => {}
                    XdpMode::Native => write!(f, ",mode=native")?,
                    XdpMode::Generic => write!(f, ",mode=generic")?,
                }
                if *queues != 1 {
                    write!(f, ",queues={queues}")?;
                }
                Ok(())
            }
            PortSpec::AfPacket {
                ifname,
                queues,
                ring,
            } => {
                write!(f, "afpacket:{ifname}")?;
                if *queues != 1 {
                    write!(f, ",queues={queues}")?;
                }
                if *ring != RingKind::default() {
                    write!(f, ",ring={}", ring.name())?;
                }
                Ok(())
            }
            PortSpec::Tap { name } => write!(f, "tap:{name}"),
            PortSpec::Pcap { path, looped } => {
                write!(f, "pcap:{}", path.display())?;
                if *looped {
                    write!(f, ",loop")?;
                }
                Ok(())
            }
            PortSpec::PcapOut { path } => write!(f, "pcap-out:{}", path.display()),
            PortSpec::Null => write!(f, "null"),
            PortSpec::VhostUser {
                path,
                client,
                queues,
            } => {
                write!(f, "vhost-user:{}", path.display())?;
                if *client {
                    write!(f, ",client")?;
                }
                if *queues != 1 {
                    write!(f, ",queues={queues}")?;
                }
                Ok(())
            }
            PortSpec::Patch { name, peer } => write!(f, "patch:{name},peer={peer}"),
            PortSpec::Local { name } => write!(f, "local:{name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_specs_parse_and_print_back() {
        for s in [
            "afxdp:p1",
            "afxdp:p1,mode=native",
            "afxdp:eth0,mode=generic,queues=4",
            "afpacket:p2",
            "afpacket:p2,queues=2",
            "afpacket:p2,ring=v3",
            "afpacket:p2,queues=2,ring=v3",
            "tap:fp0",
            "pcap:/tmp/a.pcap",
            "pcap:a.pcap,loop",
            "pcap-out:out.pcap",
            "vhost-user:/tmp/vm1.sock",
            "vhost-user:/tmp/vm1.sock,client,queues=4",
            "patch:patch-int,peer=patch-ex",
            "null",
        ] {
            let p = PortSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(p.to_string(), s);
        }
        assert_eq!(
            PortSpec::parse("afxdp:p1,mode=skb").unwrap(),
            PortSpec::AfXdp {
                ifname: "p1".into(),
                mode: XdpMode::Generic,
                queues: 1
            }
        );
        // v2 is the default and is not printed.
        let p = PortSpec::parse("afpacket:p2,ring=v2").unwrap();
        assert_eq!(p.to_string(), "afpacket:p2");
        assert!(matches!(
            p,
            PortSpec::AfPacket {
                ring: RingKind::Frames,
                ..
            }
        ));
        assert_eq!(
            PortSpec::parse("vhost-user:/tmp/a.sock,server").unwrap(),
            PortSpec::VhostUser {
                path: "/tmp/a.sock".into(),
                client: false,
                queues: 1
            }
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (s, want) in [
            ("p1", "expected KIND:NAME"),
            ("afxdp:", "missing the name"),
            ("foo:p1", "unknown port kind 'foo'"),
            ("patch:a", "peer=NAME"),
            ("patch:a,peer=a", "its own peer"),
            (
                "afxdp:p1,queues=0",
                "queues=0: expected a number from 1 to 64",
            ),
            ("afxdp:p1,queues=x", "queues=x"),
            ("afxdp:p1,mode=fast", "mode=fast"),
            (
                "afpacket:p1,mode=native",
                "unknown option 'mode' for afpacket",
            ),
            ("afpacket:p1,ring=v1", "ring=v1: expected v2 or v3"),
            ("afpacket:p1,ring", "needs a value"),
            ("tap:abcdefghijklmnopq", "longer than 15"),
            ("tap:a/b", "not a valid interface name"),
            ("pcap:x,loop=1", "takes no value"),
            ("afxdp:p1,queues", "needs a value"),
            ("pcap-out:x,loop", "options: none"),
            ("vhost-user:/s,server,client", "either server or client"),
            ("vhost-user:/s,queues=65", "queues=65"),
            (
                "vhost-user:/s,mode=native",
                "unknown option 'mode' for vhost-user",
            ),
        ] {
            let e = PortSpec::parse(s).unwrap_err().to_string();
            assert!(e.contains(want), "{s}: {e}");
            assert!(e.starts_with(&format!("port '{s}'")), "{s}: {e}");
        }
    }
}
