//! Application-layer gateways: FTP and TFTP expectations.
//!
//! What: a connection committed with a helper (`ct(commit,alg=ftp)`)
//! whose control packets announce a data connection makes the tracker
//! *expect* it; the data connection's first packet is then `+new+rel`,
//! and, once committed, all its packets are `+rel`, with the control
//! connection's mark and label and its tuple as the original tuple. As in
//! Open vSwitch 3.1:
//!
//! - FTP control traffic is TCP to or from port 21; TFTP is UDP to port 69;
//! - FTP over IPv4: `PORT h1,h2,h3,h4,p1,p2` (active, from the client) and
//!   `227 ... (h1,h2,h3,h4,p1,p2)` (passive, from the server); the address
//!   must be the client's (active) or the server's (passive), or the
//!   control connection's translated address — anything else, or a
//!   malformed message, adds `+inv` to the packet's state (which keeps its
//!   `+est`, as in Open vSwitch);
//! - FTP over IPv6: `EPRT |2|addr|port|` and the `229 Entering Extended
//!   Passive Mode (|||port|)` reply;
//! - TFTP: every request expects the server's answer, from any port, to
//!   the client's port;
//! - an expectation matches any source port; it lives as long as its
//!   control connection.
//!
//! Not supported: rewriting the addresses inside FTP messages for NAT
//! (the frame cannot grow or shrink here), so FTP through NAT works only
//! when the translated message would keep its length — which this module
//! does not attempt; expected connections are not translated.
//!
//! Invariants: an expectation's key has source port 0; parsing never
//! reads outside the payload. Thread-safety: one mutex over the
//! expectations, taken only for packets of helper connections and on
//! creation of new connections while expectations exist.

use crate::key::ConnKey;
use crate::Alg;
use flowpath_wire::ip_proto;
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const FTP_PORT: u16 = 21;
const TFTP_PORT: u16 = 69;
const LARGEST_MSG: usize = 128;

/// An expected connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// The control connection's original tuple.
    pub parent: ConnKey,
    /// Mark inherited from the control connection.
    pub mark: u32,
    /// Label inherited from the control connection.
    pub label: u128,
}

/// The expectations of a tracker.
#[derive(Default)]
pub struct Expectations {
    map: Mutex<HashMap<ConnKey, Expectation>>,
    n: AtomicUsize,
}

/// The ALG a packet's ports select, if any.
pub fn ctl_type(key: &ConnKey) -> Option<Alg> {
    match key.proto {
        ip_proto::TCP if key.src.port == FTP_PORT || key.dst.port == FTP_PORT => Some(Alg::Ftp),
        ip_proto::UDP if key.dst.port == TFTP_PORT => Some(Alg::Tftp),
        _ => None,
    }
}

/// What an FTP control message asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FtpMsg {
    /// Not a message about a data connection.
    Other,
    /// Malformed or suspicious: `+inv`.
    Invalid,
    /// A data connection to `port`, announced with address `addr` (IPv4 in
    /// the first 4 bytes; `None` for EPSV, which names no address).
    Data {
        /// Announced address.
        addr: Option<[u8; 16]>,
        /// Announced port.
        port: u16,
        /// Passive mode (announced by the server).
        passive: bool,
    },
}

fn starts_with_ci(s: &[u8], p: &[u8]) -> bool {
    s.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p))
}

fn contains_ci(s: &[u8], p: &[u8]) -> bool {
    s.windows(p.len()).any(|w| w.eq_ignore_ascii_case(p))
}

/// Parses decimal digits at `*i` (at most `max_digits`), advancing `*i`.
fn number(s: &[u8], i: &mut usize, max_digits: usize) -> Option<u32> {
    let start = *i;
    let mut v: u32 = 0;
    while let Some(c) = s.get(*i).filter(|c| c.is_ascii_digit()) {
        if *i - start >= max_digits {
            return None;
        }
        v = v * 10 + u32::from(c - b'0');
        *i += 1;
    }
    (*i > start).then_some(v)
}

fn skip_non_digits(s: &[u8], i: &mut usize) {
    while s.get(*i).is_some_and(|c| !c.is_ascii_digit()) {
        *i += 1;
    }
}

/// Parses an FTP control message (the TCP payload) of an IPv4 or IPv6
/// control connection.
pub fn parse_ftp(payload: &[u8], v6: bool) -> FtpMsg {
    let msg = payload.get(..payload.len().min(LARGEST_MSG)).unwrap_or(&[]);
    if !v6 {
        let (rest, passive) = if starts_with_ci(msg, b"PORT") {
            (msg.get(4..).unwrap_or(&[]), false)
        } else if starts_with_ci(msg, b"227") {
            (msg.get(3..).unwrap_or(&[]), true)
        } else {
            return FtpMsg::Other;
        };
        let Some(sp) = rest.iter().position(|&c| c == b' ') else {
            return FtpMsg::Invalid;
        };
        let mut i = sp;
        skip_non_digits(rest, &mut i);
        let mut nums = [0u32; 6];
        for (k, n) in nums.iter_mut().enumerate() {
            let Some(v) = number(rest, &mut i, 3).filter(|v| *v <= 255) else {
                return FtpMsg::Invalid;
            };
            *n = v;
            if k < 5 {
                if rest.get(i) != Some(&b',') {
                    return FtpMsg::Invalid;
                }
                i += 1;
            }
        }
        let mut addr = [0u8; 16];
        for (a, n) in addr.iter_mut().zip(&nums[..4]) {
            *a = *n as u8;
        }
        FtpMsg::Data {
            addr: Some(addr),
            port: ((nums[4] << 8) | nums[5]) as u16,
            passive,
        }
    } else if starts_with_ci(msg, b"EPRT") {
        let mut i = 4;
        skip_non_digits(msg, &mut i);
        if msg.get(i) != Some(&b'2') || msg.get(i + 1).is_none_or(|c| c.is_ascii_digit()) {
            return FtpMsg::Invalid;
        }
        i += 2;
        let start = i;
        while msg
            .get(i)
            .is_some_and(|c| c.is_ascii_hexdigit() || *c == b':' || *c == b'.')
        {
            i += 1;
        }
        let Some(a) = msg
            .get(start..i)
            .and_then(|s| std::str::from_utf8(s).ok())
            .and_then(|s| s.parse::<Ipv6Addr>().ok())
        else {
            return FtpMsg::Invalid;
        };
        i += 1; // the delimiter
        match number(msg, &mut i, 5).filter(|p| *p <= 65535) {
            Some(p) => FtpMsg::Data {
                addr: Some(a.octets()),
                port: p as u16,
                passive: false,
            },
            None => FtpMsg::Invalid,
        }
    } else if contains_ci(msg, b"EXTENDED PASSIVE") {
        let mut i = msg.iter().position(|&c| c == b'(').unwrap_or(msg.len());
        skip_non_digits(msg, &mut i);
        match number(msg, &mut i, 5).filter(|p| *p <= 65535) {
            Some(p) => FtpMsg::Data {
                addr: None,
                port: p as u16,
                passive: true,
            },
            None => FtpMsg::Invalid,
        }
    } else {
        FtpMsg::Other
    }
}

impl Expectations {
    /// No expectations.
    pub fn new() -> Expectations {
        Expectations::default()
    }

    /// Number of expectations.
    pub fn len(&self) -> usize {
        self.n.load(Ordering::Relaxed)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConnKey, Expectation>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Expects a connection `src → dst:port` (any source port) on behalf
    /// of the control connection `parent`.
    pub fn expect(&self, mut key: ConnKey, exp: Expectation) {
        key.src.port = 0;
        let mut m = self.lock();
        m.entry(key).or_insert(exp);
        self.n.store(m.len(), Ordering::Relaxed);
    }

    /// The expectation a new connection's first packet matches.
    pub fn find(&self, key: &ConnKey) -> Option<Expectation> {
        if self.is_empty() {
            return None;
        }
        let mut k = *key;
        k.src.port = 0;
        self.lock().get(&k).copied()
    }

    /// Forgets the expectations of a control connection (when it goes).
    pub fn clean(&self, parent: &ConnKey) {
        if self.is_empty() {
            return;
        }
        let mut m = self.lock();
        m.retain(|_, e| e.parent != *parent);
        self.n.store(m.len(), Ordering::Relaxed);
    }
}

/// The expectation key for a data connection of the control connection
/// (`key`, `rev_key`): announced by the server (`reply`) the client
/// connects to the server, otherwise the server to the client.
pub fn data_key(key: &ConnKey, rev_key: &ConnKey, reply: bool, port: u16) -> ConnKey {
    let (src, dst) = if reply {
        (key.src.addr, key.dst.addr)
    } else {
        (rev_key.src.addr, rev_key.dst.addr)
    };
    let mut k = ConnKey {
        v6: key.v6,
        proto: key.proto,
        zone: key.zone,
        ..ConnKey::default()
    };
    k.src.addr = src;
    k.dst.addr = dst;
    k.dst.port = port;
    k
}

/// Whether an FTP-announced address is acceptable: the announcing side's
/// own address or its translated one.
pub fn addr_ok(key: &ConnKey, rev_key: &ConnKey, passive: bool, addr: &[u8; 16]) -> bool {
    if passive {
        *addr == key.dst.addr || *addr == rev_key.src.addr
    } else {
        *addr == key.src.addr || *addr == rev_key.dst.addr
    }
}

/// Formats an IPv4 address stored in a key (for messages).
pub fn v4(a: &[u8; 16]) -> Ipv4Addr {
    Ipv4Addr::new(a[0], a[1], a[2], a[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ftp_v4_messages() {
        assert_eq!(
            parse_ftp(b"PORT 10,1,1,1,200,10\r\n", false),
            FtpMsg::Data {
                addr: Some({
                    let mut a = [0; 16];
                    a[..4].copy_from_slice(&[10, 1, 1, 1]);
                    a
                }),
                port: 200 * 256 + 10,
                passive: false
            }
        );
        match parse_ftp(b"227 Entering Passive Mode (10,1,1,2,19,137).\r\n", false) {
            FtpMsg::Data { port, passive, .. } => {
                assert_eq!((port, passive), (19 * 256 + 137, true))
            }
            m => panic!("{m:?}"),
        }
        assert_eq!(
            parse_ftp(b"port 10,1,1,1,300,1\r\n", false),
            FtpMsg::Invalid
        );
        assert_eq!(parse_ftp(b"PORT 10,1,1\r\n", false), FtpMsg::Invalid);
        assert_eq!(parse_ftp(b"PORTX", false), FtpMsg::Invalid);
        assert_eq!(parse_ftp(b"USER anonymous\r\n", false), FtpMsg::Other);
        assert_eq!(parse_ftp(b"", false), FtpMsg::Other);
    }

    #[test]
    fn ftp_v6_messages() {
        match parse_ftp(b"EPRT |2|fc00::1|50000|\r\n", true) {
            FtpMsg::Data {
                addr,
                port,
                passive,
            } => {
                assert_eq!(port, 50000);
                assert!(!passive);
                assert_eq!(addr.map(|a| a[15]), Some(1));
            }
            m => panic!("{m:?}"),
        }
        assert_eq!(
            parse_ftp(b"229 Entering Extended Passive Mode (|||6446|)\r\n", true),
            FtpMsg::Data {
                addr: None,
                port: 6446,
                passive: true
            }
        );
        assert_eq!(
            parse_ftp(b"EPRT |1|10.0.0.1|50000|\r\n", true),
            FtpMsg::Invalid
        );
        assert_eq!(
            parse_ftp(b"EPRT |2|fc00::1|99999|\r\n", true),
            FtpMsg::Invalid
        );
    }

    #[test]
    fn expectations_wildcard_source_port_and_clean() {
        let e = Expectations::new();
        let mut parent = ConnKey {
            proto: 6,
            ..ConnKey::default()
        };
        parent.src.port = 40000;
        parent.dst.port = 21;
        let mut k = ConnKey {
            proto: 6,
            ..ConnKey::default()
        };
        k.dst.port = 5000;
        assert!(e.find(&k).is_none());
        e.expect(
            k,
            Expectation {
                parent,
                mark: 1,
                label: 2,
            },
        );
        k.src.port = 20;
        assert_eq!(e.find(&k).map(|x| x.mark), Some(1));
        e.clean(&parent);
        assert!(e.find(&k).is_none() && e.is_empty());
        assert_eq!(
            v4(&[1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).to_string(),
            "1.2.3.4"
        );
    }
}
