//! The tunnel datapath actions' arguments: `tnl_push(...)`'s header
//! template (built by `flowpath_wire::tunnel`) and how Open vSwitch prints
//! it.

use core::fmt;
use flowpath_wire::tunnel::{self, TunnelKind, GRE_CSUM, GRE_KEY, GRE_SEQ};

/// The most template bytes a `tnl_push` carries.
pub const TNL_HEADER_MAX: usize = tunnel::MAX_HEADER;

/// `tnl_push(tnl_port(P),header(...),out_port(O))`: put the outer headers
/// in front of the packet (lengths, checksums and the UDP source port
/// filled in per packet); the outputs that follow send it to the underlay.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TnlPush {
    /// The tunnel's datapath port (OVS's `tnl_port`).
    pub tnl_port: u32,
    /// The underlay port the encapsulated packet leaves by.
    pub out_port: u32,
    /// The tunnel's kind.
    pub kind: TunnelKind,
    /// Template length.
    pub len: u8,
    /// The UDP source ports used: `port_min..port_max` (not printed).
    pub port_min: u16,
    /// See `port_min`.
    pub port_max: u16,
    /// The template (its first `len` bytes).
    pub header: [u8; TNL_HEADER_MAX],
}

impl TnlPush {
    /// A push of the `len`-byte template at the start of `header`
    /// (`None`: longer than [`TNL_HEADER_MAX`]).
    pub fn new(tnl_port: u32, out_port: u32, kind: TunnelKind, header: &[u8]) -> Option<Self> {
        let mut h = [0u8; TNL_HEADER_MAX];
        h.get_mut(..header.len())?.copy_from_slice(header);
        Some(TnlPush {
            tnl_port,
            out_port,
            kind,
            len: u8::try_from(header.len()).ok()?,
            port_min: tunnel::DEFAULT_PORT_MIN,
            port_max: tunnel::DEFAULT_PORT_MAX,
            header: h,
        })
    }

    /// The push with UDP source ports from `min..max`.
    pub fn with_port_range(mut self, min: u16, max: u16) -> Self {
        self.port_min = min;
        self.port_max = max;
        self
    }

    /// The template.
    pub fn header(&self) -> &[u8] {
        &self.header[..usize::from(self.len)]
    }
}

fn mac(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl fmt::Display for TnlPush {
    /// As Open vSwitch's `format_odp_tnl_push_action`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = self.header();
        let Some(lay) = tunnel::layout(h) else {
            return write!(
                f,
                "tnl_push(tnl_port({}),header(size={}))",
                self.tnl_port, self.len
            );
        };
        write!(
            f,
            "tnl_push(tnl_port({}),header(size={},type={},eth(dst={},src={},dl_type=0x{:04x}),",
            self.tnl_port,
            self.len,
            self.kind.ovs_type(lay.v6),
            mac(&h[0..6]),
            mac(&h[6..12]),
            be16(h, 12)
        )?;
        let ip = &h[14..];
        if lay.v6 {
            let src = std::net::Ipv6Addr::from(u128::from_be_bytes(
                ip[8..24].try_into().unwrap_or([0; 16]),
            ));
            let dst = std::net::Ipv6Addr::from(u128::from_be_bytes(
                ip[24..40].try_into().unwrap_or([0; 16]),
            ));
            let flow = be32(ip, 0);
            write!(
                f,
                "ipv6(src={src},dst={dst},label={},proto={},tclass=0x{:x},hlimit={}),",
                flow & 0xfffff,
                ip[6],
                (flow >> 20) & 0xff,
                ip[7]
            )?;
        } else {
            write!(
                f,
                "ipv4(src={}.{}.{}.{},dst={}.{}.{}.{},proto={},tos={},ttl={},frag=0x{:x}),",
                ip[12],
                ip[13],
                ip[14],
                ip[15],
                ip[16],
                ip[17],
                ip[18],
                ip[19],
                ip[9],
                // C's `%#x`: no prefix for zero.
                if ip[1] == 0 {
                    "0".to_string()
                } else {
                    format!("{:#x}", ip[1])
                },
                ip[8],
                be16(ip, 6)
            )?;
        }
        let l4 = &h[lay.l4..];
        if lay.gre {
            let flags = be16(l4, 0);
            write!(f, "gre((flags=0x{flags:x},proto=0x{:x})", be16(l4, 2))?;
            let mut at = 4;
            if flags & GRE_CSUM != 0 && l4.len() >= at + 4 {
                write!(f, ",csum=0x{:x}", be16(l4, at))?;
                at += 4;
            }
            if flags & GRE_KEY != 0 && l4.len() >= at + 4 {
                write!(f, ",key=0x{:x}", be32(l4, at))?;
                at += 4;
            }
            if flags & GRE_SEQ != 0 && l4.len() >= at + 4 {
                write!(f, ",seq=0x{:x}", be32(l4, at))?;
            }
            f.write_str(")")?;
        } else {
            write!(
                f,
                "udp(src={},dst={},csum=0x{:x}),",
                be16(l4, 0),
                be16(l4, 2),
                be16(l4, 6)
            )?;
            let t = &l4[8..];
            if t.len() >= 8 {
                match self.kind {
                    TunnelKind::Vxlan => write!(
                        f,
                        "vxlan(flags=0x{:x},vni=0x{:x})",
                        be32(t, 0),
                        be32(t, 4) >> 8
                    )?,
                    _ => {
                        f.write_str("geneve(")?;
                        if t[1] & tunnel::GENEVE_OAM != 0 {
                            f.write_str("oam,")?;
                        }
                        if t[1] & tunnel::GENEVE_CRIT != 0 {
                            f.write_str("crit,")?;
                        }
                        write!(f, "vni=0x{:x}", be32(t, 4) >> 8)?;
                        let opts = &t[8..];
                        if !opts.is_empty() {
                            f.write_str(",options(")?;
                            write_geneve_opts(f, opts)?;
                            f.write_str(")")?;
                        }
                        f.write_str(")")?;
                    }
                }
            }
        }
        write!(f, "),out_port({}))", self.out_port)
    }
}

/// Geneve options as OVS prints them (its `format_geneve_opts`: one
/// after the other, numbers as `%#x`): `{class=0x102,type=0,len=4,0xa}`.
fn write_geneve_opts(f: &mut fmt::Formatter<'_>, mut o: &[u8]) -> fmt::Result {
    let hex = |v: u16| {
        if v == 0 {
            "0".to_string()
        } else {
            format!("{v:#x}")
        }
    };
    while o.len() >= 4 {
        let len = 4 * usize::from(o[3] & 0x1f);
        let Some(data) = o.get(4..4 + len) else {
            break;
        };
        write!(
            f,
            "{{class={},type={},len={len}",
            hex(be16(o, 0)),
            hex(u16::from(o[2]))
        )?;
        if !data.is_empty() {
            // As OVS's `ds_put_hex`: no leading zeros, and all zeros as
            // a bare 0.
            match data.iter().position(|b| *b != 0) {
                None => f.write_str(",0")?,
                Some(i) => {
                    write!(f, ",0x{:x}", data[i])?;
                    for b in &data[i + 1..] {
                        write!(f, "{b:02x}")?;
                    }
                }
            }
        }
        f.write_str("}")?;
        o = &o[4 + len..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Opts<'a>(&'a [u8]);
    impl fmt::Display for Opts<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write_geneve_opts(f, self.0)
        }
    }

    /// Option values print as OVS 3.1's `ds_put_hex`: no leading zeros,
    /// and an all-zero value as a bare 0 (OVS's trace of a Geneve push
    /// with a present option of value 0).
    #[test]
    fn geneve_options_print_as_ovs() {
        let o = [
            0x01, 0x02, 0x80, 1, 0, 0, 0x12, 0x34, // class 0x102, type 0x80, len 4
            0x01, 0x03, 0x02, 1, 0, 0, 0, 0, // value 0
            0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0x0a, // class 0, type 0, len 8
        ];
        assert_eq!(
            Opts(&o).to_string(),
            "{class=0x102,type=0x80,len=4,0x1234}{class=0x103,type=0x2,len=4,0}\
             {class=0,type=0,len=8,0xa}"
        );
    }
}
