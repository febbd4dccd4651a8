//! Overlay tunnel headers: VXLAN (RFC 7348), Geneve (RFC 8926) and GRE
//! (RFC 2784/2890, transparent Ethernet bridging) over IPv4 or IPv6, as a
//! userspace switch builds and strips them ("native tunnelling").
//!
//! What:
//! - [`HeaderSpec`] → [`build_header`]: the outer headers of one tunnel
//!   destination as a template (Ethernet, IPv4 or IPv6, UDP or GRE, the
//!   tunnel header), with the per-packet fields zero: IP total/payload
//!   length, UDP source port and length, checksums that cover the payload.
//!   Open vSwitch keeps the same template in its `tnl_push` datapath
//!   action.
//! - [`finish_push`]: fills in a copy of the template in front of a frame
//!   (lengths, the IPv4 header checksum by RFC 1624 from the template's,
//!   the UDP source port from the packet's hash, the UDP or GRE checksum
//!   when the template asks for one).
//! - [`decap`]: checks a received frame's outer headers and, if it is a
//!   tunnel packet, returns its [`TunnelMeta`] and where the inner
//!   Ethernet frame starts.
//!
//! Invariants: nothing here panics or allocates; every length is checked
//! before it is read; a frame that is not a well-formed tunnel packet is an
//! [`DecapError`], never a partial result.
//!
//! Threads: pure functions.

use crate::checksum;

/// Ethernet header length.
const ETH_LEN: usize = 14;
/// IPv4 header length (no options: what a template has).
const IPV4_LEN: usize = 20;
/// IPv6 header length.
const IPV6_LEN: usize = 40;
/// UDP header length.
const UDP_LEN: usize = 8;
/// VXLAN header length.
const VXLAN_LEN: usize = 8;
/// Geneve base header length.
const GENEVE_LEN: usize = 8;

/// EtherType of transparent Ethernet bridging (GRE's and Geneve's inner
/// protocol).
pub const ETH_P_TEB: u16 = 0x6558;
/// The VXLAN flags word with the I (valid VNI) bit.
pub const VXLAN_FLAGS: u32 = 0x0800_0000;
/// GRE flag: checksum present.
pub const GRE_CSUM: u16 = 0x8000;
/// GRE flag: key present.
pub const GRE_KEY: u16 = 0x2000;
/// GRE flag: sequence number present.
pub const GRE_SEQ: u16 = 0x1000;
/// Geneve flag byte: operations and maintenance packet.
pub const GENEVE_OAM: u8 = 0x80;
/// Geneve flag byte: critical options present.
pub const GENEVE_CRIT: u8 = 0x40;
/// The longest template [`build_header`] makes (IPv6, Geneve with every
/// option field present: 166 bytes).
pub const MAX_HEADER: usize = ETH_LEN + IPV6_LEN + UDP_LEN + GENEVE_LEN + MAX_GENEVE_OPTS;
/// How many Geneve options a bridge maps (`tun_metadata0..7`).
pub const TLV_FIELDS: usize = 8;

/// The most Geneve option bytes a template carries: every mapped field
/// present with the longest value (8 bytes) behind its 4-byte option
/// header.
pub const MAX_GENEVE_OPTS: usize = TLV_FIELDS * (4 + 8);

/// One Geneve option mapped to a `tun_metadataN` field: its class, type
/// and length in bytes (4 or 8; 0: the field is unmapped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TlvEntry {
    /// Option class.
    pub class: u16,
    /// Option type (its high bit: critical).
    pub typ: u8,
    /// Option data length in bytes (0: unmapped).
    pub len: u8,
}

/// A bridge's Geneve option map: entry `i` is `tun_metadata{i}`
/// (Open vSwitch's TLV table, `ovs-ofctl add-tlv-map`).
pub type TlvMap = [TlvEntry; TLV_FIELDS];

/// Encodes the options of the mapped fields present in `present` (bit
/// N: `tun_metadataN`; a present field whose value is 0 is sent, as Open
/// vSwitch does) into `out` (at most [`MAX_GENEVE_OPTS`] bytes); returns
/// the length, or `None` when they do not fit.
pub fn encode_geneve_opts(
    map: &TlvMap,
    values: &[u64; TLV_FIELDS],
    present: u8,
    out: &mut [u8],
) -> Option<usize> {
    let mut n = 0;
    for (i, (e, v)) in map.iter().zip(values).enumerate() {
        if e.len == 0 || present >> i & 1 == 0 {
            continue;
        }
        let len = usize::from(e.len);
        let o = out
            .get_mut(n..n + 4 + len)
            .filter(|_| n + 4 + len <= MAX_GENEVE_OPTS)?;
        o[0..2].copy_from_slice(&e.class.to_be_bytes());
        o[2] = e.typ;
        o[3] = e.len / 4;
        let b = v.to_be_bytes();
        o[4..].copy_from_slice(&b[8 - len..]);
        n += 4 + len;
    }
    Some(n)
}

/// Reads Geneve options into the mapped fields' values and marks them in
/// `present` (bit N: `tun_metadataN`); an option that is not mapped is
/// skipped, unless it is critical (then `false`: the packet must be
/// dropped, as RFC 8926 says).
fn decode_geneve_opts(
    map: &TlvMap,
    mut o: &[u8],
    values: &mut [u64; TLV_FIELDS],
    present: &mut u8,
) -> bool {
    while o.len() >= 4 {
        let len = 4 * usize::from(o[3] & 0x1f);
        let Some(data) = o.get(4..4 + len) else {
            return false;
        };
        let (class, typ) = (u16::from_be_bytes([o[0], o[1]]), o[2]);
        match map.iter().position(|e| {
            e.len != 0 && e.class == class && e.typ == typ && usize::from(e.len) == len
        }) {
            Some(i) => {
                let mut b = [0u8; 8];
                b[8 - len..].copy_from_slice(data);
                values[i] = u64::from_be_bytes(b);
                *present |= 1 << i;
            }
            None if typ & 0x80 != 0 => return false,
            None => {}
        }
        o = &o[4 + len..];
    }
    true
}

/// The kind of tunnel (Open vSwitch's `OVS_VPORT_TYPE_*` numbers are
/// [`TunnelKind::ovs_type`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// VXLAN over UDP.
    Vxlan,
    /// Geneve over UDP.
    Geneve,
    /// GRE carrying Ethernet frames.
    Gre,
}

impl TunnelKind {
    /// Open vSwitch's datapath port type number as `tnl_push` prints it
    /// (GRE over IPv6 is `ip6gre`, 109).
    pub fn ovs_type(self, v6: bool) -> u32 {
        match (self, v6) {
            (TunnelKind::Gre, false) => 3,
            (TunnelKind::Gre, true) => 109,
            (TunnelKind::Vxlan, _) => 4,
            (TunnelKind::Geneve, _) => 5,
        }
    }

    /// The kind with this OVS type number.
    pub fn from_ovs_type(t: u32) -> Option<TunnelKind> {
        match t {
            3 | 109 => Some(TunnelKind::Gre),
            4 => Some(TunnelKind::Vxlan),
            5 => Some(TunnelKind::Geneve),
            _ => None,
        }
    }

    /// The name users write (`vxlan`, `geneve`, `gre`).
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
            TunnelKind::Gre => "gre",
        }
    }

    /// The UDP destination port by default (GRE: none).
    pub fn default_port(self) -> u16 {
        match self {
            TunnelKind::Vxlan => 4789,
            TunnelKind::Geneve => 6081,
            TunnelKind::Gre => 0,
        }
    }
}

/// The outer IP header of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OuterIp {
    /// IPv4.
    V4 {
        /// Source address.
        src: [u8; 4],
        /// Destination address.
        dst: [u8; 4],
        /// Set don't-fragment.
        df: bool,
    },
    /// IPv6.
    V6 {
        /// Source address.
        src: [u8; 16],
        /// Destination address.
        dst: [u8; 16],
    },
}

/// What a tunnel template is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderSpec<'a> {
    /// The tunnel protocol.
    pub kind: TunnelKind,
    /// Outer Ethernet destination (the next hop's MAC).
    pub eth_dst: [u8; 6],
    /// Outer Ethernet source.
    pub eth_src: [u8; 6],
    /// Outer IP header.
    pub ip: OuterIp,
    /// ToS / traffic class.
    pub tos: u8,
    /// TTL / hop limit.
    pub ttl: u8,
    /// UDP destination port (VXLAN, Geneve).
    pub udp_dst: u16,
    /// Carry a UDP (or GRE) checksum.
    pub csum: bool,
    /// The VNI (24 bits; VXLAN, Geneve) or GRE key (32 bits); `None`: GRE
    /// without a key (VXLAN and Geneve always carry one, 0 if `None`).
    pub key: Option<u32>,
    /// Geneve's OAM flag.
    pub oam: bool,
    /// Geneve options, already encoded (a multiple of 4 bytes, at most
    /// [`MAX_GENEVE_OPTS`]).
    pub geneve_opts: &'a [u8],
}

/// Why a template could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The output buffer is shorter than the template.
    NoRoom,
    /// Geneve options not a multiple of 4 bytes or over the maximum.
    BadOptions,
}

/// Builds the template for `spec` into `out`; returns its length.
pub fn build_header(spec: &HeaderSpec<'_>, out: &mut [u8]) -> Result<usize, BuildError> {
    let opts = spec.geneve_opts;
    if spec.kind == TunnelKind::Geneve
        && (!opts.len().is_multiple_of(4) || opts.len() > MAX_GENEVE_OPTS)
    {
        return Err(BuildError::BadOptions);
    }
    let (ip_len, v6) = match spec.ip {
        OuterIp::V4 { .. } => (IPV4_LEN, false),
        OuterIp::V6 { .. } => (IPV6_LEN, true),
    };
    let l4_len = match spec.kind {
        TunnelKind::Vxlan => UDP_LEN + VXLAN_LEN,
        TunnelKind::Geneve => UDP_LEN + GENEVE_LEN + opts.len(),
        TunnelKind::Gre => {
            4 + if spec.csum { 4 } else { 0 } + if spec.key.is_some() { 4 } else { 0 }
        }
    };
    let total = ETH_LEN + ip_len + l4_len;
    let out = out.get_mut(..total).ok_or(BuildError::NoRoom)?;
    out.fill(0);
    out[0..6].copy_from_slice(&spec.eth_dst);
    out[6..12].copy_from_slice(&spec.eth_src);
    out[12..14].copy_from_slice(&(if v6 { 0x86ddu16 } else { 0x0800 }).to_be_bytes());
    let proto = if spec.kind == TunnelKind::Gre { 47 } else { 17 };
    match spec.ip {
        OuterIp::V4 { src, dst, df } => {
            let ip = &mut out[ETH_LEN..ETH_LEN + IPV4_LEN];
            ip[0] = 0x45;
            ip[1] = spec.tos;
            if df {
                ip[6] = 0x40;
            }
            ip[8] = spec.ttl;
            ip[9] = proto;
            ip[12..16].copy_from_slice(&src);
            ip[16..20].copy_from_slice(&dst);
            // Over a zero total length: `finish_push` adds the real one.
            let c = checksum::checksum(ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        OuterIp::V6 { src, dst } => {
            let ip = &mut out[ETH_LEN..ETH_LEN + IPV6_LEN];
            ip[0] = 0x60 | (spec.tos >> 4);
            ip[1] = spec.tos << 4;
            ip[6] = proto;
            ip[7] = spec.ttl;
            ip[8..24].copy_from_slice(&src);
            ip[24..40].copy_from_slice(&dst);
        }
    }
    let l4 = &mut out[ETH_LEN + ip_len..];
    match spec.kind {
        TunnelKind::Vxlan | TunnelKind::Geneve => {
            l4[2..4].copy_from_slice(&spec.udp_dst.to_be_bytes());
            // A checksum is asked for by a non-zero placeholder; the
            // real one is computed per packet.
            if spec.csum {
                l4[6..8].copy_from_slice(&0xffffu16.to_be_bytes());
            }
            let t = &mut l4[UDP_LEN..];
            let vni = spec.key.unwrap_or(0) & 0x00ff_ffff;
            if spec.kind == TunnelKind::Vxlan {
                t[0..4].copy_from_slice(&VXLAN_FLAGS.to_be_bytes());
            } else {
                t[0] = (opts.len() / 4) as u8;
                t[1] = if spec.oam { GENEVE_OAM } else { 0 }
                    | if opts_critical(opts) { GENEVE_CRIT } else { 0 };
                t[2..4].copy_from_slice(&ETH_P_TEB.to_be_bytes());
                t[GENEVE_LEN..GENEVE_LEN + opts.len()].copy_from_slice(opts);
            }
            t[4..8].copy_from_slice(&(vni << 8).to_be_bytes());
        }
        TunnelKind::Gre => {
            let mut flags = 0u16;
            let mut at = 4;
            if spec.csum {
                flags |= GRE_CSUM;
                at += 4;
            }
            if let Some(k) = spec.key {
                flags |= GRE_KEY;
                l4[at..at + 4].copy_from_slice(&k.to_be_bytes());
            }
            l4[0..2].copy_from_slice(&flags.to_be_bytes());
            l4[2..4].copy_from_slice(&ETH_P_TEB.to_be_bytes());
        }
    }
    Ok(total)
}

/// True when an encoded Geneve option list has an option with the
/// critical bit (type's high bit).
fn opts_critical(opts: &[u8]) -> bool {
    let mut at = 0;
    while at + 4 <= opts.len() {
        if opts[at + 2] & 0x80 != 0 {
            return true;
        }
        at += 4 + 4 * usize::from(opts[at + 3] & 0x1f);
    }
    false
}

/// Where the parts of a template are (from its own bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The outer IP header is IPv6.
    pub v6: bool,
    /// Offset of the UDP or GRE header.
    pub l4: usize,
    /// The tunnel is GRE (else UDP).
    pub gre: bool,
}

/// Reads a template's layout (`None`: not one [`build_header`] makes).
pub fn layout(header: &[u8]) -> Option<Layout> {
    let ethertype = u16::from_be_bytes([*header.get(12)?, *header.get(13)?]);
    let (v6, l4, proto) = match ethertype {
        0x0800 => (false, ETH_LEN + IPV4_LEN, *header.get(ETH_LEN + 9)?),
        0x86dd => (true, ETH_LEN + IPV6_LEN, *header.get(ETH_LEN + 6)?),
        _ => return None,
    };
    let gre = match proto {
        47 => true,
        17 => false,
        _ => return None,
    };
    (header.len() >= l4 + if gre { 4 } else { UDP_LEN }).then_some(Layout { v6, l4, gre })
}

/// The length of the outer headers of a frame encapsulated from a
/// [`build_header`] template (`None`: not one): through the VXLAN or
/// Geneve header and options, or the GRE header and its fields.
pub fn encap_len(frame: &[u8]) -> Option<usize> {
    let lay = layout(frame)?;
    let l4 = frame.get(lay.l4..)?;
    let n = if lay.gre {
        let flags = u16::from_be_bytes([l4[0], l4[1]]);
        4 + [GRE_CSUM, GRE_KEY, GRE_SEQ]
            .iter()
            .filter(|f| flags & **f != 0)
            .count()
            * 4
    } else {
        let t = l4.get(UDP_LEN..UDP_LEN + 8)?;
        if u16::from_be_bytes([t[2], t[3]]) == ETH_P_TEB {
            UDP_LEN + GENEVE_LEN + usize::from(t[0] & 0x3f) * 4
        } else {
            UDP_LEN + VXLAN_LEN
        }
    };
    let total = lay.l4 + n;
    (frame.len() >= total).then_some(total)
}

/// The UDP source port of an encapsulated frame's outer header (0 for
/// GRE or a frame that is not one).
pub fn udp_src_port(frame: &[u8]) -> u16 {
    match layout(frame) {
        Some(l) if !l.gre => u16::from_be_bytes([frame[l.l4], frame[l.l4 + 1]]),
        _ => 0,
    }
}

/// Fills in the per-packet fields of the `hlen`-byte template at the start
/// of `frame` (the template, or the outer headers of a frame encapsulated
/// from it, was copied there; the inner frame follows):
/// IP lengths and checksum, UDP source port (`src_port`), length and
/// checksum, GRE checksum. Returns false (frame unchanged beyond the
/// copy) when the template is not one [`build_header`] makes.
pub fn finish_push(frame: &mut [u8], hlen: usize, src_port: u16) -> bool {
    let Some(lay) = frame.get(..hlen).and_then(layout) else {
        return false;
    };
    let total = frame.len();
    let ip_payload = total - lay.l4;
    if lay.v6 {
        let Ok(plen) = u16::try_from(ip_payload) else {
            return false;
        };
        frame[ETH_LEN + 4..ETH_LEN + 6].copy_from_slice(&plen.to_be_bytes());
    } else {
        let Ok(tot) = u16::try_from(total - ETH_LEN) else {
            return false;
        };
        let ip = &mut frame[ETH_LEN..ETH_LEN + IPV4_LEN];
        // (From whatever length is there: 0 in a template, the old one in
        // a frame encapsulated before.)
        let old = u16::from_be_bytes([ip[2], ip[3]]);
        ip[2..4].copy_from_slice(&tot.to_be_bytes());
        let c = u16::from_be_bytes([ip[10], ip[11]]);
        ip[10..12].copy_from_slice(&checksum::update(c, old, tot).to_be_bytes());
    }
    let l4 = lay.l4;
    if lay.gre {
        let flags = u16::from_be_bytes([frame[l4], frame[l4 + 1]]);
        if flags & GRE_CSUM != 0 && frame.len() >= l4 + 8 {
            frame[l4 + 4..l4 + 6].fill(0);
            let c = checksum::checksum(&frame[l4..]);
            frame[l4 + 4..l4 + 6].copy_from_slice(&c.to_be_bytes());
        }
        return true;
    }
    let Ok(ulen) = u16::try_from(ip_payload) else {
        return false;
    };
    frame[l4..l4 + 2].copy_from_slice(&src_port.to_be_bytes());
    frame[l4 + 4..l4 + 6].copy_from_slice(&ulen.to_be_bytes());
    let want_csum = frame[l4 + 6] != 0 || frame[l4 + 7] != 0;
    if want_csum {
        frame[l4 + 6..l4 + 8].fill(0);
        let pseudo = if lay.v6 {
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&frame[ETH_LEN + 8..ETH_LEN + 24]);
            dst.copy_from_slice(&frame[ETH_LEN + 24..ETH_LEN + 40]);
            checksum::pseudo_header_v6(src, dst, 17, u32::from(ulen))
        } else {
            let mut src = [0u8; 4];
            let mut dst = [0u8; 4];
            src.copy_from_slice(&frame[ETH_LEN + 12..ETH_LEN + 16]);
            dst.copy_from_slice(&frame[ETH_LEN + 16..ETH_LEN + 20]);
            checksum::pseudo_header_v4(src, dst, 17, ulen)
        };
        let mut c = !checksum::add(pseudo, checksum::sum(&frame[l4..]));
        if c == 0 {
            c = 0xffff;
        }
        frame[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    }
    true
}

/// The UDP source port of an encapsulated packet, from its flow hash
/// (Open vSwitch's: the hash scaled into 32768..61000, the kernel's
/// default ephemeral range, so ECMP in the underlay spreads flows).
pub fn src_port_of_hash(hash: u32) -> u16 {
    src_port_in(hash, DEFAULT_PORT_MIN, DEFAULT_PORT_MAX)
}

/// The default UDP source port range of encapsulated packets (OVS's
/// `tnl/egress_port_range`).
pub const DEFAULT_PORT_MIN: u16 = 32768;
/// See [`DEFAULT_PORT_MIN`].
pub const DEFAULT_PORT_MAX: u16 = 61000;

/// [`src_port_of_hash`] in the range `min..max` (as OVS: the hash scaled
/// into it; `min` when the range is empty).
#[inline]
pub fn src_port_in(hash: u32, min: u16, max: u16) -> u16 {
    let span = u64::from(max.saturating_sub(min));
    (((u64::from(hash) * span) >> 32) as u32 + u32::from(min)) as u16
}

/// What a received tunnel packet's outer headers say (Open vSwitch's
/// `flow_tnl`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunnelMeta {
    /// The VNI or GRE key (0 if none).
    pub tun_id: u64,
    /// Outer IPv4 source (0 for IPv6).
    pub ipv4_src: u32,
    /// Outer IPv4 destination.
    pub ipv4_dst: u32,
    /// Outer IPv6 source (0 for IPv4).
    pub ipv6_src: u128,
    /// Outer IPv6 destination.
    pub ipv6_dst: u128,
    /// Outer ToS / traffic class.
    pub tos: u8,
    /// Outer TTL / hop limit.
    pub ttl: u8,
    /// UDP source port (0 for GRE).
    pub tp_src: u16,
    /// UDP destination port (0 for GRE).
    pub tp_dst: u16,
    /// Datapath flags: bit 0 OAM, 1 don't-fragment, 2 checksum, 3 key
    /// (Open vSwitch's `FLOW_TNL_F_*`).
    pub flags: u8,
    /// The mapped Geneve options' values (`tun_metadata0..7`; 0 when
    /// absent).
    pub md: [u64; TLV_FIELDS],
    /// Which of `md` the packet carried (bit N: `tun_metadataN`).
    pub md_present: u8,
}

/// A decapsulated packet: its tunnel metadata and where its inner
/// Ethernet frame starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decap {
    /// The outer headers' metadata.
    pub meta: TunnelMeta,
    /// Offset of the inner frame.
    pub inner: usize,
    /// The tunnel's kind.
    pub kind: TunnelKind,
}

/// Why a frame was not decapsulated (each a datapath drop counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecapError {
    /// Too short for the headers it announces.
    Truncated,
    /// Not IPv4/IPv6 carrying UDP or GRE (or a fragment).
    NotTunnel,
    /// The IPv4 header checksum is wrong.
    BadIpChecksum,
    /// The UDP or GRE checksum is wrong.
    BadChecksum,
    /// A Geneve option marked critical that the TLV map does not know.
    UnknownCritical,
    /// The tunnel header is malformed (flags, version, protocol).
    BadHeader,
}

const F_OAM: u8 = 1;
const F_DF: u8 = 2;
const F_CSUM: u8 = 4;
const F_KEY: u8 = 8;

/// Checks `frame`'s outer headers as tunnel `kind` (UDP destination port
/// not checked: the caller chose the packet by it) and returns what they
/// say. IPv4 options are allowed; the IPv4 header checksum, a non-zero UDP
/// checksum and a GRE checksum are verified, as Open vSwitch does.
pub fn decap(frame: &[u8], kind: TunnelKind) -> Result<Decap, DecapError> {
    decap_mapped(frame, kind, &TlvMap::default())
}

/// [`decap`], reading the Geneve options that `map` maps into
/// [`TunnelMeta::md`].
pub fn decap_mapped(frame: &[u8], kind: TunnelKind, map: &TlvMap) -> Result<Decap, DecapError> {
    let mut meta = TunnelMeta::default();
    let inner = decap_into(frame, kind, map, &mut meta)?;
    Ok(Decap { meta, inner, kind })
}

/// [`decap_mapped`] writing the metadata into `m` (the datapath's form:
/// by perf, returning the metadata by value cost a store-forwarding stall
/// per packet, its fields just written narrow and copied wide); returns
/// the inner frame's offset. `m` is reset first.
#[inline]
pub fn decap_into(
    frame: &[u8],
    kind: TunnelKind,
    map: &TlvMap,
    m: &mut TunnelMeta,
) -> Result<usize, DecapError> {
    use DecapError::*;
    *m = TunnelMeta::default();
    let eth = frame.get(..ETH_LEN).ok_or(Truncated)?;
    let ethertype = u16::from_be_bytes([eth[12], eth[13]]);
    // (The pseudo-header is summed only for a UDP checksum to check.)
    let (l4, proto, l4_end, v6) = match ethertype {
        0x0800 => {
            let ip = frame.get(ETH_LEN..ETH_LEN + IPV4_LEN).ok_or(Truncated)?;
            if ip[0] >> 4 != 4 {
                return Err(NotTunnel);
            }
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let tot = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            if ihl < IPV4_LEN || tot < ihl {
                return Err(NotTunnel);
            }
            let hdr = frame.get(ETH_LEN..ETH_LEN + ihl).ok_or(Truncated)?;
            if frame.len() < ETH_LEN + tot {
                return Err(Truncated);
            }
            let frag = u16::from_be_bytes([ip[6], ip[7]]);
            if frag & 0x3fff != 0 {
                return Err(NotTunnel);
            }
            let sum = match hdr.first_chunk::<IPV4_LEN>() {
                Some(h) if ihl == IPV4_LEN => checksum::sum_ipv4_header(h),
                _ => checksum::sum(hdr),
            };
            if sum != 0xffff {
                return Err(BadIpChecksum);
            }
            m.ipv4_src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
            m.ipv4_dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
            m.tos = ip[1];
            m.ttl = ip[8];
            if frag & 0x4000 != 0 {
                m.flags |= F_DF;
            }
            (ETH_LEN + ihl, ip[9], ETH_LEN + tot, false)
        }
        0x86dd => {
            let ip = frame.get(ETH_LEN..ETH_LEN + IPV6_LEN).ok_or(Truncated)?;
            if ip[0] >> 4 != 6 {
                return Err(NotTunnel);
            }
            let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if frame.len() < ETH_LEN + IPV6_LEN + plen {
                return Err(Truncated);
            }
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&ip[8..24]);
            dst.copy_from_slice(&ip[24..40]);
            m.ipv6_src = u128::from_be_bytes(src);
            m.ipv6_dst = u128::from_be_bytes(dst);
            m.tos = (ip[0] << 4) | (ip[1] >> 4);
            m.ttl = ip[7];
            let l4 = ETH_LEN + IPV6_LEN;
            (l4, ip[6], l4 + plen, true)
        }
        _ => return Err(NotTunnel),
    };
    let seg = frame.get(l4..l4_end).ok_or(Truncated)?;
    let inner_at;
    match (kind, proto) {
        (TunnelKind::Vxlan | TunnelKind::Geneve, 17) => {
            let udp = seg.get(..UDP_LEN).ok_or(Truncated)?;
            let ulen = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
            if ulen < UDP_LEN || ulen > seg.len() {
                return Err(Truncated);
            }
            let seg = &seg[..ulen];
            let csum = u16::from_be_bytes([udp[6], udp[7]]);
            if csum != 0 {
                let len = l4_end - l4;
                let pseudo = if v6 {
                    let (s, d) = (m.ipv6_src.to_be_bytes(), m.ipv6_dst.to_be_bytes());
                    checksum::pseudo_header_v6(s, d, 17, len as u32)
                } else {
                    let (s, d) = (m.ipv4_src.to_be_bytes(), m.ipv4_dst.to_be_bytes());
                    checksum::pseudo_header_v4(s, d, 17, len as u16)
                };
                if checksum::add(pseudo, checksum::sum(seg)) != 0xffff {
                    return Err(BadChecksum);
                }
                m.flags |= F_CSUM;
            }
            m.tp_src = u16::from_be_bytes([udp[0], udp[1]]);
            m.tp_dst = u16::from_be_bytes([udp[2], udp[3]]);
            let t = &seg[UDP_LEN..];
            if kind == TunnelKind::Vxlan {
                let h = t.get(..VXLAN_LEN).ok_or(Truncated)?;
                let flags = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
                if flags != VXLAN_FLAGS || h[7] != 0 {
                    return Err(BadHeader);
                }
                m.tun_id = u64::from(u32::from_be_bytes([0, h[4], h[5], h[6]]));
                inner_at = l4 + UDP_LEN + VXLAN_LEN;
            } else {
                let h = t.get(..GENEVE_LEN).ok_or(Truncated)?;
                if h[0] >> 6 != 0 || u16::from_be_bytes([h[2], h[3]]) != ETH_P_TEB {
                    return Err(BadHeader);
                }
                let opt_len = usize::from(h[0] & 0x3f) * 4;
                if t.len() < GENEVE_LEN + opt_len {
                    return Err(Truncated);
                }
                if h[1] & GENEVE_OAM != 0 {
                    m.flags |= F_OAM;
                }
                m.tun_id = u64::from(u32::from_be_bytes([0, h[4], h[5], h[6]]));
                let opts = &t[GENEVE_LEN..GENEVE_LEN + opt_len];
                if !decode_geneve_opts(map, opts, &mut m.md, &mut m.md_present) {
                    return Err(UnknownCritical);
                }
                inner_at = l4 + UDP_LEN + GENEVE_LEN + opt_len;
            }
            m.flags |= F_KEY;
        }
        (TunnelKind::Gre, 47) => {
            let h = seg.get(..4).ok_or(Truncated)?;
            let flags = u16::from_be_bytes([h[0], h[1]]);
            // Version 0, no routing, no reserved bits; Ethernet inside.
            if flags & !(GRE_CSUM | GRE_KEY | GRE_SEQ) != 0
                || u16::from_be_bytes([h[2], h[3]]) != ETH_P_TEB
            {
                return Err(BadHeader);
            }
            let mut at = 4;
            if flags & GRE_CSUM != 0 {
                seg.get(at..at + 4).ok_or(Truncated)?;
                if checksum::sum(seg) != 0xffff {
                    return Err(BadChecksum);
                }
                m.flags |= F_CSUM;
                at += 4;
            }
            if flags & GRE_KEY != 0 {
                let k = seg.get(at..at + 4).ok_or(Truncated)?;
                m.tun_id = u64::from(u32::from_be_bytes([k[0], k[1], k[2], k[3]]));
                m.flags |= F_KEY;
                at += 4;
            }
            if flags & GRE_SEQ != 0 {
                seg.get(at..at + 4).ok_or(Truncated)?;
                at += 4;
            }
            inner_at = l4 + at;
        }
        _ => return Err(NotTunnel),
    }
    if frame.len() < inner_at + ETH_LEN {
        return Err(Truncated);
    }
    Ok(inner_at)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn spec(kind: TunnelKind, v6: bool, csum: bool) -> HeaderSpec<'static> {
        HeaderSpec {
            kind,
            eth_dst: [2, 0, 0, 0, 0, 2],
            eth_src: [2, 0, 0, 0, 0, 1],
            ip: if v6 {
                OuterIp::V6 {
                    src: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                    dst: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                }
            } else {
                OuterIp::V4 {
                    src: [172, 31, 1, 100],
                    dst: [172, 31, 1, 1],
                    df: true,
                }
            },
            tos: 0,
            ttl: 64,
            udp_dst: kind.default_port(),
            csum,
            key: Some(0x1234),
            oam: false,
            geneve_opts: &[],
        }
    }

    fn inner() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&[0xaa; 6]);
        f[6..12].copy_from_slice(&[0xbb; 6]);
        f[12] = 0x08;
        f[14..]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
        f
    }

    fn encap(s: &HeaderSpec<'_>, inner: &[u8]) -> Vec<u8> {
        let mut h = [0u8; MAX_HEADER];
        let n = build_header(s, &mut h).unwrap();
        let mut f = h[..n].to_vec();
        f.extend_from_slice(inner);
        assert!(finish_push(&mut f, n, 40000));
        f
    }

    #[test]
    fn round_trips_every_kind_and_family() {
        for kind in [TunnelKind::Vxlan, TunnelKind::Geneve, TunnelKind::Gre] {
            for v6 in [false, true] {
                for csum in [false, true] {
                    let s = spec(kind, v6, csum);
                    let f = encap(&s, &inner());
                    let d = decap(&f, kind).unwrap();
                    assert_eq!(&f[d.inner..], &inner()[..], "{kind:?} v6={v6}");
                    assert_eq!(d.meta.tun_id, 0x1234);
                    assert_eq!(d.meta.ttl, 64);
                    assert_eq!(d.meta.flags & F_KEY, F_KEY);
                    assert_eq!(d.meta.flags & F_CSUM != 0, csum, "{kind:?} v6={v6}");
                    if v6 {
                        assert_eq!(d.meta.ipv6_dst & 0xff, 2);
                    } else {
                        assert_eq!(d.meta.ipv4_dst, 0xac1f_0101);
                        assert_eq!(d.meta.flags & F_DF, F_DF);
                    }
                    if kind != TunnelKind::Gre {
                        assert_eq!(d.meta.tp_src, 40000);
                        assert_eq!(d.meta.tp_dst, kind.default_port());
                    }
                }
            }
        }
    }

    #[test]
    fn a_corrupted_checksum_is_refused() {
        let mut f = encap(&spec(TunnelKind::Vxlan, false, true), &inner());
        let last = f.len() - 1;
        f[last] ^= 1;
        assert_eq!(decap(&f, TunnelKind::Vxlan), Err(DecapError::BadChecksum));
        let mut f = encap(&spec(TunnelKind::Vxlan, false, false), &inner());
        f[ETH_LEN + 8] ^= 1; // TTL: the IPv4 checksum no longer adds up.
        assert_eq!(decap(&f, TunnelKind::Vxlan), Err(DecapError::BadIpChecksum));
    }

    #[test]
    fn truncations_never_panic() {
        for kind in [TunnelKind::Vxlan, TunnelKind::Geneve, TunnelKind::Gre] {
            let f = encap(&spec(kind, false, true), &inner());
            for n in 0..f.len() {
                let _ = decap(&f[..n], kind);
            }
            assert!(decap(&f, kind).is_ok());
        }
    }

    #[test]
    fn encapsulated_lengths_are_found_again() {
        for kind in [TunnelKind::Vxlan, TunnelKind::Geneve, TunnelKind::Gre] {
            for v6 in [false, true] {
                let mut s = spec(kind, v6, true);
                let opts = [0x01, 0x02, 0x01, 0x01, 0, 0, 0, 9];
                s.geneve_opts = &opts;
                let f = encap(&s, &inner());
                let d = decap(&f, kind).unwrap();
                assert_eq!(encap_len(&f), Some(d.inner), "{kind:?} v6={v6}");
                if kind != TunnelKind::Gre {
                    assert_eq!(udp_src_port(&f), 40000);
                }
                // The outer headers of an encapsulated frame finish another
                // inner frame as well as the template does.
                let mut g = f[..d.inner].to_vec();
                let other = [7u8; 100];
                g.extend_from_slice(&other);
                assert!(finish_push(&mut g, d.inner, 40000));
                let e = decap(&g, kind).unwrap();
                assert_eq!(&g[e.inner..], &other[..], "{kind:?} v6={v6}");
            }
        }
    }

    #[test]
    fn geneve_options_round_trip_through_the_map() {
        let mut map = TlvMap::default();
        map[0] = TlvEntry {
            class: 0x0102,
            typ: 0x80,
            len: 4,
        };
        map[3] = TlvEntry {
            class: 0xffff,
            typ: 1,
            len: 8,
        };
        map[6] = TlvEntry {
            class: 0x0102,
            typ: 0x06,
            len: 4,
        };
        let mut values = [0u64; TLV_FIELDS];
        values[0] = 0x0001_0002;
        values[3] = 0x1122_3344_5566_7788;
        values[5] = 9; // unmapped: not sent
        values[7] = 3; // not present: not sent
                       // Field 6 is present with the value 0: sent.
        let present = 1 << 0 | 1 << 3 | 1 << 5 | 1 << 6;
        let mut opts = [0u8; MAX_GENEVE_OPTS];
        let n = encode_geneve_opts(&map, &values, present, &mut opts).unwrap();
        assert_eq!(n, 8 + 12 + 8);
        assert_eq!(&opts[20..28], &[0x01, 0x02, 0x06, 1, 0, 0, 0, 0]);
        let mut s = spec(TunnelKind::Geneve, false, true);
        s.geneve_opts = &opts[..n];
        let f = encap(&s, &inner());
        let d = decap_mapped(&f, TunnelKind::Geneve, &map).unwrap();
        let mut want = values;
        want[5] = 0;
        want[7] = 0;
        assert_eq!(d.meta.md, want);
        assert_eq!(d.meta.md_present, 1 << 0 | 1 << 3 | 1 << 6);
        assert_eq!(&f[d.inner..], &inner()[..]);
        // A critical option the map does not know drops the packet; an
        // unknown plain one is skipped.
        let mut other = TlvMap::default();
        other[3] = map[3];
        assert_eq!(
            decap_mapped(&f, TunnelKind::Geneve, &other),
            Err(DecapError::UnknownCritical)
        );
        other[0] = TlvEntry {
            class: 0x0102,
            typ: 0x80,
            len: 4,
        };
        other[3] = TlvEntry::default();
        assert_eq!(
            decap_mapped(&f, TunnelKind::Geneve, &other)
                .unwrap()
                .meta
                .md[0],
            0x0001_0002
        );
        // Every field mapped with 8 bytes and present: the most a header
        // carries; a buffer too short for them is refused.
        let big = [TlvEntry {
            class: 1,
            typ: 1,
            len: 8,
        }; TLV_FIELDS];
        let mut out = [0u8; 200];
        assert_eq!(
            encode_geneve_opts(&big, &[1; TLV_FIELDS], 0xff, &mut out),
            Some(MAX_GENEVE_OPTS)
        );
        assert!(encode_geneve_opts(&big, &[1; TLV_FIELDS], 0xff, &mut out[..60]).is_none());
    }

    #[test]
    fn source_ports_stay_in_the_ephemeral_range() {
        for h in [0, 1, u32::MAX / 2, u32::MAX] {
            let p = src_port_of_hash(h);
            assert!((32768..61000).contains(&p), "{p}");
        }
    }
}
