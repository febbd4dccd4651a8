//! A template capture loaded for expansion: its frames, each frame's
//! direction, flow and time offset, and the rewrite of a frame for one
//! copy (addresses, client port, checksums).
//!
//! Direction: the template's server is the destination address of its
//! first packet; frames from that address go server-to-client, all others
//! client-to-server (the SIP and RTSP templates hold flows from more than
//! one client-side address: all of them become the copy's client). A flow
//! is (protocol, client-side port, server-side port); the copy gives flow j
//! (in order of first appearance) the client port `base + j`.

use std::net::Ipv4Addr;

use super::profile::{SfrProfile, TemplateSpec};

/// Client-to-server or server-to-client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Client to server: TRex's port 0.
    C2s,
    /// Server to client: TRex's port 1.
    S2c,
}

/// One template frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Time from the copy's start, ns.
    pub offset_ns: u64,
    /// The captured bytes.
    pub data: Vec<u8>,
    /// Its length on the wire.
    pub orig_len: u32,
    /// Its direction.
    pub dir: Dir,
    /// Index of its flow within the template.
    pub flow: u16,
    /// Offset of the IPv4 header.
    ip: usize,
    /// Offset of the TCP/UDP header.
    l4: usize,
    /// 6 (TCP) or 17 (UDP).
    proto: u8,
}

/// A loaded template.
#[derive(Debug, Clone)]
pub struct Template {
    /// The frames, in capture order.
    pub frames: Vec<Frame>,
    /// Number of flows (client ports one copy takes).
    pub flows: u16,
    /// Sum of the frames' wire lengths.
    pub bytes: u64,
    /// Time from the first to the last frame, ns.
    pub span_ns: u64,
}

/// Most flows one template may hold.
pub const MAX_TEMPLATE_FLOWS: usize = 1024;

/// Builds a [`Template`] from a capture's frames, in capture order,
/// timing them per the profile's gap rules.
#[derive(Debug)]
pub struct TemplateBuilder {
    cap_ipg: bool,
    override_ipg: Option<(f64, f64)>,
    ipg_us: f64,
    rtt_us: f64,
    frames: Vec<Frame>,
    server: Option<Ipv4Addr>,
    flows: Vec<(u8, u16, u16)>,
    prev_ts: u64,
    t: u64,
}

impl TemplateBuilder {
    /// A builder for `spec`'s capture under `profile`'s gap rules.
    pub fn new(spec: &TemplateSpec, profile: &SfrProfile) -> TemplateBuilder {
        TemplateBuilder {
            cap_ipg: profile.cap_ipg,
            override_ipg: profile.cap_ipg_min.zip(profile.cap_override_ipg),
            // The profile parser requires both without cap_ipg.
            ipg_us: spec.ipg_us.unwrap_or(0.0),
            rtt_us: spec.rtt_us.unwrap_or(0.0),
            frames: Vec::new(),
            server: None,
            flows: Vec::new(),
            prev_ts: 0,
            t: 0,
        }
    }

    /// Adds the next frame of the capture (an Ethernet frame captured at
    /// `timestamp_ns`, `orig_len` bytes on the wire); the error says what
    /// is wrong with it.
    pub fn push(&mut self, timestamp_ns: u64, d: &[u8], orig_len: u32) -> Result<(), String> {
        let (ip, l4, proto) = locate(d).map_err(str::to_string)?;
        let src = Ipv4Addr::new(d[ip + 12], d[ip + 13], d[ip + 14], d[ip + 15]);
        let dst = Ipv4Addr::new(d[ip + 16], d[ip + 17], d[ip + 18], d[ip + 19]);
        let server = *self.server.get_or_insert(dst);
        let sport = u16::from_be_bytes([d[l4], d[l4 + 1]]);
        let dport = u16::from_be_bytes([d[l4 + 2], d[l4 + 3]]);
        let dir = if src == server { Dir::S2c } else { Dir::C2s };
        if dir == Dir::C2s && dst != server {
            return Err(format!(
                "{src} -> {dst}: neither end is the template's server {server} (the first packet's destination)"
            ));
        }
        let key = match dir {
            Dir::C2s => (proto, sport, dport),
            Dir::S2c => (proto, dport, sport),
        };
        let flow = match self.flows.iter().position(|f| *f == key) {
            Some(i) => i,
            None => {
                if self.flows.len() == MAX_TEMPLATE_FLOWS {
                    return Err(format!(
                        "more than {MAX_TEMPLATE_FLOWS} flows in one template"
                    ));
                }
                self.flows.push(key);
                self.flows.len() - 1
            }
        };
        // Gaps: the capture's own (cap_ipg, cap_ipg_min/cap_override_ipg),
        // or ipg within a direction and rtt when it turns.
        if let Some(last) = self.frames.last() {
            let gap = if self.cap_ipg {
                let g = timestamp_ns.saturating_sub(self.prev_ts);
                match self.override_ipg {
                    Some((min, over)) if (g as f64) < min * 1e3 => (over * 1e3).round() as u64,
                    _ => g,
                }
            } else {
                let us = if last.dir != dir {
                    self.rtt_us
                } else {
                    self.ipg_us
                };
                (us * 1e3).round() as u64
            };
            self.t += gap;
        }
        self.prev_ts = timestamp_ns.max(self.prev_ts);
        self.frames.push(Frame {
            offset_ns: self.t,
            data: d.to_vec(),
            orig_len: orig_len.max(d.len() as u32),
            dir,
            flow: flow as u16,
            ip,
            l4,
            proto,
        });
        Ok(())
    }

    /// The template; an error if the capture held no frame.
    pub fn finish(self) -> Result<Template, String> {
        if self.frames.is_empty() {
            return Err("the template capture holds no packet".into());
        }
        Ok(Template {
            bytes: self.frames.iter().map(|f| u64::from(f.orig_len)).sum(),
            span_ns: self.frames.last().map_or(0, |f| f.offset_ns),
            flows: self.flows.len() as u16,
            frames: self.frames,
        })
    }
}

/// Offsets of the IPv4 and L4 headers and the protocol of an Ethernet
/// frame that must be an unfragmented IPv4 TCP or UDP packet.
fn locate(d: &[u8]) -> Result<(usize, usize, u8), &'static str> {
    let mut ip = 14;
    if d.len() < 14 {
        return Err("shorter than an Ethernet header");
    }
    let mut ethertype = u16::from_be_bytes([d[12], d[13]]);
    if ethertype == 0x8100 && d.len() >= 18 {
        ethertype = u16::from_be_bytes([d[16], d[17]]);
        ip = 18;
    }
    if ethertype != 0x0800 {
        return Err("not IPv4 (each template frame must be IPv4 TCP or UDP)");
    }
    if d.len() < ip + 20 {
        return Err("truncated IPv4 header");
    }
    let ihl = usize::from(d[ip] & 0x0f) * 4;
    if d[ip] >> 4 != 4 || ihl < 20 || d.len() < ip + ihl {
        return Err("bad IPv4 header");
    }
    let frag = u16::from_be_bytes([d[ip + 6], d[ip + 7]]);
    if frag & 0x3fff != 0 {
        return Err("IPv4 fragment (templates must be unfragmented)");
    }
    let proto = d[ip + 9];
    let l4 = ip + ihl;
    let need = match proto {
        0x06 => 20,
        0x11 => 8,
        _ => return Err("neither TCP nor UDP"),
    };
    if d.len() < l4 + need {
        return Err("truncated TCP/UDP header");
    }
    Ok((ip, l4, proto))
}

/// What one copy puts in its frames.
#[derive(Debug, Clone, Copy)]
pub struct Instance {
    /// The client address.
    pub client: Ipv4Addr,
    /// The server address.
    pub server: Ipv4Addr,
    /// Client port of flow 0.
    pub port: u16,
    /// Client side's Ethernet address.
    pub client_mac: [u8; 6],
    /// Server side's Ethernet address.
    pub server_mac: [u8; 6],
}

impl Frame {
    /// Writes this frame, rewritten for `copy`, into `out`.
    pub fn rewrite(&self, copy: &Instance, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.data);
        let (ip, l4) = (self.ip, self.l4);
        let port = copy.port.wrapping_add(self.flow);
        let (src_mac, dst_mac, src, dst) = match self.dir {
            Dir::C2s => (copy.client_mac, copy.server_mac, copy.client, copy.server),
            Dir::S2c => (copy.server_mac, copy.client_mac, copy.server, copy.client),
        };
        out[0..6].copy_from_slice(&dst_mac);
        out[6..12].copy_from_slice(&src_mac);
        // Old and new 16-bit words of the L4 pseudo-header and ports, for
        // the incremental checksum update (RFC 1624).
        let mut old = [0u16; 5];
        let mut new = [0u16; 5];
        for (i, w) in (ip + 12..ip + 20).step_by(2).enumerate() {
            old[i] = u16::from_be_bytes([out[w], out[w + 1]]);
        }
        out[ip + 12..ip + 16].copy_from_slice(&src.octets());
        out[ip + 16..ip + 20].copy_from_slice(&dst.octets());
        for (i, w) in (ip + 12..ip + 20).step_by(2).enumerate() {
            new[i] = u16::from_be_bytes([out[w], out[w + 1]]);
        }
        let pw = match self.dir {
            Dir::C2s => l4,
            Dir::S2c => l4 + 2,
        };
        old[4] = u16::from_be_bytes([out[pw], out[pw + 1]]);
        out[pw..pw + 2].copy_from_slice(&port.to_be_bytes());
        new[4] = port;
        // IPv4 header checksum: recomputed (the header is whole).
        out[ip + 10..ip + 12].fill(0);
        let ihl = usize::from(out[ip] & 0x0f) * 4;
        let c = !fold(sum_words(&out[ip..ip + ihl]));
        out[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        let ck = if self.proto == 0x06 { l4 + 16 } else { l4 + 6 };
        if out.len() < ck + 2 {
            return;
        }
        let hc = u16::from_be_bytes([out[ck], out[ck + 1]]);
        if self.proto == 0x11 && hc == 0 {
            return; // UDP without a checksum stays without.
        }
        // HC' = ~(~HC + ~m + m') per changed word.
        let mut s = u32::from(!hc);
        for (o, n) in old.iter().zip(&new) {
            s += u32::from(!*o) + u32::from(*n);
        }
        let mut c = !fold(s);
        if self.proto == 0x11 && c == 0 {
            c = 0xffff;
        }
        out[ck..ck + 2].copy_from_slice(&c.to_be_bytes());
    }
}

fn sum_words(b: &[u8]) -> u32 {
    b.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}
