//! Parsing and printing field values in `ovs-ofctl` syntax.
//!
//! Integers are decimal or `0x` hex, optionally `/mask`; IPv4 addresses take
//! a CIDR length or a dotted mask; IPv6 a prefix length or an address mask;
//! MACs an optional `/mask`; `nw_frag` its keywords; `tcp_flags` numbers or
//! `+syn-ack` flag lists. Printing follows OVS's `match_format` conventions:
//! decimal when exact, hex `value/mask` when masked, CIDR when possible.

use crate::field::{FieldId, FieldInfo, ValueFormat};
use crate::key::{FRAG_ANY, FRAG_LATER};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Why a value did not parse. The text names what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValueError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ValueError> {
    Err(ValueError(msg.into()))
}

/// Parses an unsigned integer: decimal or `0x` hexadecimal.
pub fn parse_uint(s: &str) -> Result<u128, ValueError> {
    let s = s.trim();
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u128::from_str_radix(h, 16)
    } else {
        s.parse::<u128>()
    };
    r.or_else(|_| {
        err(format!(
            "'{s}' is not a number (decimal or 0x hex expected)"
        ))
    })
}

/// Parses a MAC address `xx:xx:xx:xx:xx:xx` (also `-` separated).
pub fn parse_mac(s: &str) -> Result<u64, ValueError> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return err(format!(
            "'{s}' is not a MAC address (xx:xx:xx:xx:xx:xx expected)"
        ));
    }
    let mut v = 0u64;
    for p in parts {
        if p.is_empty() || p.len() > 2 {
            return err(format!(
                "'{s}' is not a MAC address (xx:xx:xx:xx:xx:xx expected)"
            ));
        }
        let b = u8::from_str_radix(p, 16).or_else(|_| {
            err(format!(
                "'{s}' is not a MAC address (xx:xx:xx:xx:xx:xx expected)"
            ))
        })?;
        v = (v << 8) | u64::from(b);
    }
    Ok(v)
}

/// Prints a 48-bit MAC.
pub fn format_mac(v: u64) -> String {
    let b = v.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

fn parse_ipv4(s: &str) -> Result<u32, ValueError> {
    s.parse::<Ipv4Addr>()
        .map(u32::from)
        .or_else(|_| err(format!("'{s}' is not an IPv4 address (a.b.c.d expected)")))
}

fn parse_ipv6(s: &str) -> Result<u128, ValueError> {
    s.parse::<Ipv6Addr>()
        .map(u128::from)
        .or_else(|_| err(format!("'{s}' is not an IPv6 address")))
}

/// The prefix length of `mask` (over `bits` bits) if it is a CIDR mask.
pub fn prefix_len(mask: u128, bits: u32) -> Option<u32> {
    let ones = mask.count_ones();
    if ones > bits {
        return None;
    }
    let expected = if ones == 0 {
        0
    } else {
        (u128::MAX >> (128 - ones)) << (bits - ones)
    };
    (mask == expected).then_some(ones)
}

/// A mask of the `len` leading bits of a `bits`-bit field.
pub fn prefix_mask(len: u32, bits: u32) -> u128 {
    if len == 0 {
        0
    } else {
        (u128::MAX >> (128 - len)) << (bits - len)
    }
}

const TCP_FLAG_NAMES: &[(&str, u16)] = &[
    ("fin", 0x001),
    ("syn", 0x002),
    ("rst", 0x004),
    ("psh", 0x008),
    ("ack", 0x010),
    ("urg", 0x020),
    ("ece", 0x040),
    ("cwr", 0x080),
    ("ns", 0x100),
];

fn parse_tcp_flags(s: &str) -> Result<(u128, u128), ValueError> {
    if s.starts_with('+') || s.starts_with('-') {
        let (mut v, mut m) = (0u16, 0u16);
        let mut rest = s;
        while !rest.is_empty() {
            let sign = rest.as_bytes()[0];
            rest = &rest[1..];
            let end = rest.find(['+', '-']).unwrap_or(rest.len());
            let name = &rest[..end];
            rest = &rest[end..];
            let Some(&(_, bit)) = TCP_FLAG_NAMES.iter().find(|(n, _)| *n == name) else {
                return err(format!(
                    "'{name}' is not a TCP flag (fin, syn, rst, psh, ack, urg, ece, cwr, ns expected)"
                ));
            };
            m |= bit;
            if sign == b'+' {
                v |= bit;
            }
        }
        return Ok((u128::from(v), u128::from(m)));
    }
    // "syn|ack" exact form, or numeric.
    if s.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
        let mut v = 0u16;
        for name in s.split('|') {
            let Some(&(_, bit)) = TCP_FLAG_NAMES.iter().find(|(n, _)| *n == name) else {
                return err(format!("'{name}' is not a TCP flag"));
            };
            v |= bit;
        }
        return Ok((u128::from(v), 0xfff));
    }
    let (v, m) = split_mask(s);
    let v = parse_uint(v)?;
    let m = match m {
        Some(m) => parse_uint(m)?,
        None => 0xfff,
    };
    Ok((v, m))
}

/// `ct_state`'s flag names, bit 0 first (as OVS's `ct_state_to_string`).
const CT_STATE_NAMES: [(&str, u8); 8] = [
    ("new", 0x01),
    ("est", 0x02),
    ("rel", 0x04),
    ("rpl", 0x08),
    ("inv", 0x10),
    ("trk", 0x20),
    ("snat", 0x40),
    ("dnat", 0x80),
];

/// Parses a `ct_state` value as OVS's `parse_flags`: `+trk-new` (the
/// named flags significant), `trk|est` or a number (every flag
/// significant), `0x21/0x21`.
fn parse_ct_state(s: &str) -> Result<(u128, u128), ValueError> {
    let bit_of = |name: &str| -> Result<u8, ValueError> {
        CT_STATE_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| *b)
            .ok_or_else(|| {
                ValueError(format!(
                    "{s}: unknown ct_state flag '{name}' (new, est, rel, rpl, inv, trk, snat or dnat expected)"
                ))
            })
    };
    if s.starts_with('+') || s.starts_with('-') {
        let (mut v, mut m) = (0u8, 0u8);
        let mut rest = s;
        while let Some(&sign) = rest.as_bytes().first() {
            rest = &rest[1..];
            let end = rest.find(['+', '-']).unwrap_or(rest.len());
            let bit = bit_of(&rest[..end])?;
            rest = &rest[end..];
            if m & bit != 0 {
                return err(format!(
                    "{s}: Each ct_state flag can be specified only once"
                ));
            }
            m |= bit;
            if sign == b'+' {
                v |= bit;
            }
        }
        return Ok((u128::from(v), u128::from(m)));
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        let (v, m) = split_mask(s);
        let v = parse_uint(v)?;
        let m = match m {
            Some(m) => parse_uint(m)?,
            None => 0xff,
        };
        if v > 0xff || m > 0xff {
            return err(format!("{s}: unknown ct_state flag bits (0xff at most)"));
        }
        return Ok((v, m));
    }
    let mut v = 0u8;
    for name in s.split('|') {
        v |= bit_of(name)?;
    }
    Ok((u128::from(v), 0xff))
}

/// Prints a `ct_state` value as OVS's `match_format`: `new|trk` (or `0`)
/// when every flag is significant, else `+trk-new` in bit order.
/// `tun_flags`: `+oam`/`-oam` (flag syntax), `oam`, or a number with
/// an optional mask; only bit 0 (oam) exists, as OVS's OpenFlow field.
fn parse_tun_flags(s: &str) -> Result<(u128, u128), ValueError> {
    match s {
        "+oam" | "oam" => return Ok((1, 1)),
        "-oam" => return Ok((0, 1)),
        _ => {}
    }
    let (v, m) = split_mask(s);
    let v = parse_uint(v).map_err(|_| {
        ValueError(format!(
            "{s}: unknown tun_flags value (+oam, -oam or a number expected)"
        ))
    })?;
    let m = match m {
        Some(m) => parse_uint(m)?,
        None => 1,
    };
    if v > 1 || m > 1 {
        return err(format!(
            "{s}: tun_flags has one flag, oam (bit 0): 0x1 at most"
        ));
    }
    Ok((v & m, m))
}

/// `tun_flags` as OVS prints it (`+oam`, `-oam`).
fn format_tun_flags(v: u128, m: u128) -> String {
    if m & 1 == 0 {
        return "0/0".into();
    }
    if v & 1 != 0 { "+oam" } else { "-oam" }.into()
}

fn format_ct_state(v: u128, m: u128) -> String {
    if m == 0xff {
        let names: Vec<&str> = CT_STATE_NAMES
            .iter()
            .filter(|(_, b)| v & u128::from(*b) != 0)
            .map(|(n, _)| *n)
            .collect();
        return if names.is_empty() {
            "0".into()
        } else {
            names.join("|")
        };
    }
    if m == 0 {
        return "0/0".into();
    }
    let mut s = String::new();
    for (n, b) in CT_STATE_NAMES {
        let b = u128::from(b);
        if m & b != 0 {
            s.push(if v & b != 0 { '+' } else { '-' });
            s.push_str(n);
        }
    }
    s
}

fn format_tcp_flags(v: u128, m: u128) -> String {
    let known: u128 = 0x1ff;
    if m & !known != 0 && m != 0xfff {
        return format!("{v:#05x}/{m:#05x}");
    }
    if m == 0xfff {
        let names: Vec<&str> = TCP_FLAG_NAMES
            .iter()
            .filter(|(_, b)| v & u128::from(*b) != 0)
            .map(|(n, _)| *n)
            .collect();
        if names.is_empty() || v & !known != 0 {
            return format!("{v:#05x}");
        }
        return names.join("|");
    }
    let mut s = String::new();
    for (n, b) in TCP_FLAG_NAMES {
        let b = u128::from(*b);
        if m & b != 0 {
            s.push(if v & b != 0 { '+' } else { '-' });
            s.push_str(n);
        }
    }
    s
}

fn split_mask(s: &str) -> (&str, Option<&str>) {
    match s.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (s, None),
    }
}

/// Parses `text` as a value of field `f`, returning (value, mask) in field
/// units; an exact value gets the field's full mask. The value is returned
/// already ANDed with the mask.
pub fn parse_value(f: &FieldInfo, text: &str) -> Result<(u128, u128), ValueError> {
    let text = text.trim();
    if text.is_empty() {
        return err(format!("{} needs a value", f.name));
    }
    let full = f.full_mask();
    let (v, m) = match f.format {
        ValueFormat::Frag => {
            let (v, m) = match text {
                "no" => (0, FRAG_ANY | FRAG_LATER),
                "yes" => (FRAG_ANY, FRAG_ANY),
                "first" => (FRAG_ANY, FRAG_ANY | FRAG_LATER),
                "later" => (FRAG_ANY | FRAG_LATER, FRAG_ANY | FRAG_LATER),
                "not_later" => (0, FRAG_LATER),
                _ => {
                    return err(format!(
                    "'{text}' is not a nw_frag value (no, yes, first, later or not_later expected)"
                ))
                }
            };
            (u128::from(v), u128::from(m))
        }
        ValueFormat::TcpFlags => parse_tcp_flags(text)?,
        ValueFormat::CtState => parse_ct_state(text)?,
        ValueFormat::TunFlags => parse_tun_flags(text)?,
        ValueFormat::Mac => {
            let (v, m) = split_mask(text);
            let v = u128::from(parse_mac(v)?);
            let m = match m {
                Some(m) => u128::from(parse_mac(m)?),
                None => full,
            };
            (v, m)
        }
        ValueFormat::Ipv4 => {
            let (v, m) = split_mask(text);
            let v = u128::from(parse_ipv4(v)?);
            let m = match m {
                None => full,
                Some(m) if m.contains('.') => u128::from(parse_ipv4(m)?),
                Some(m) => {
                    let len = m.parse::<u32>().ok().filter(|l| *l <= 32).ok_or_else(|| {
                        ValueError(format!(
                            "'/{m}' is not a prefix length (0 to 32) or dotted mask"
                        ))
                    })?;
                    prefix_mask(len, 32)
                }
            };
            (v, m)
        }
        ValueFormat::Ipv6 => {
            let (v, m) = split_mask(text);
            let v = parse_ipv6(v)?;
            let m = match m {
                None => full,
                Some(m) if m.contains(':') => parse_ipv6(m)?,
                Some(m) => {
                    let len = m.parse::<u32>().ok().filter(|l| *l <= 128).ok_or_else(|| {
                        ValueError(format!(
                            "'/{m}' is not a prefix length (0 to 128) or IPv6 mask"
                        ))
                    })?;
                    prefix_mask(len, 128)
                }
            };
            (v, m)
        }
        ValueFormat::Int | ValueFormat::HexInt | ValueFormat::Hex { .. } => {
            let (v, m) = split_mask(text);
            if f.id == FieldId::InPort && v == "LOCAL" {
                (0xfffe, full)
            } else {
                let v = parse_uint(v)?;
                let m = match m {
                    Some(m) => parse_uint(m)?,
                    None => full,
                };
                (v, m)
            }
        }
    };
    if text.contains('/') && !f.maskable && f.format != ValueFormat::Frag {
        return err(format!("{} does not take a mask", f.name));
    }
    // (nd_options_type: OVS's 16-bit place of an 8-bit value.)
    if f.id == FieldId::NdOptionsType && v > 0xff {
        return err(format!("value {text} is too wide for {} (8 bits)", f.name));
    }
    if v & !full != 0 && !(f.id == FieldId::DlVlan && v == 0xffff) {
        return err(format!(
            "value {text} is too wide for {} ({} bits)",
            f.name, f.bits
        ));
    }
    if m & !full != 0 {
        return err(format!(
            "mask in {text} is too wide for {} ({} bits)",
            f.name, f.bits
        ));
    }
    // dl_vlan=0xffff ("no VLAN") is the one value wider than its field.
    let v = if f.id == FieldId::DlVlan { v } else { v & m };
    Ok((v, m))
}

/// Prints a value/mask of field `f` the way OVS's match printer does.
/// `mask` must be non-zero.
pub fn format_value(f: &FieldInfo, value: u128, mask: u128) -> String {
    let full = f.full_mask();
    match f.format {
        ValueFormat::Frag => {
            let v = value as u8;
            match mask as u8 {
                3 => match v {
                    0 => "no",
                    1 => "first",
                    _ => "later",
                },
                1 => {
                    if v & FRAG_ANY != 0 {
                        "yes"
                    } else {
                        "no"
                    }
                }
                _ => {
                    if v & FRAG_LATER != 0 {
                        "later"
                    } else {
                        "not_later"
                    }
                }
            }
            .to_string()
        }
        ValueFormat::TcpFlags => format_tcp_flags(value, mask),
        ValueFormat::CtState => format_ct_state(value, mask),
        ValueFormat::TunFlags => format_tun_flags(value, mask),
        ValueFormat::Mac => {
            if mask == full {
                format_mac(value as u64)
            } else {
                format!("{}/{}", format_mac(value as u64), format_mac(mask as u64))
            }
        }
        ValueFormat::Ipv4 => {
            let a = Ipv4Addr::from(value as u32);
            if mask == full {
                a.to_string()
            } else if let Some(len) = prefix_len(mask, 32) {
                format!("{a}/{len}")
            } else {
                format!("{a}/{}", Ipv4Addr::from(mask as u32))
            }
        }
        ValueFormat::Ipv6 => {
            let a = Ipv6Addr::from(value);
            if mask == full {
                a.to_string()
            } else if let Some(len) = prefix_len(mask, 128) {
                format!("{a}/{len}")
            } else {
                format!("{a}/{}", Ipv6Addr::from(mask))
            }
        }
        ValueFormat::Hex { digits } => {
            let d = usize::from(digits);
            if mask == full {
                format!("0x{value:0d$x}")
            } else {
                format!("0x{value:0d$x}/0x{mask:0d$x}")
            }
        }
        ValueFormat::Int => {
            if mask == full {
                format!("{value}")
            } else {
                format!("{value:#x}/{mask:#x}")
            }
        }
        ValueFormat::HexInt => {
            let v = if value == 0 {
                "0".to_string()
            } else {
                format!("{value:#x}")
            };
            if mask == full {
                v
            } else {
                format!("{v}/{mask:#x}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::lookup;

    fn p(name: &str, s: &str) -> Result<(u128, u128), ValueError> {
        parse_value(lookup(name).unwrap(), s)
    }

    fn round(name: &str, s: &str) -> String {
        let f = lookup(name).unwrap();
        let (v, m) = parse_value(f, s).unwrap();
        format_value(f, v, m)
    }

    #[test]
    fn integers() {
        assert_eq!(p("tp_dst", "80").unwrap(), (80, 0xffff));
        assert_eq!(p("tp_dst", "0x40/0xffc0").unwrap(), (0x40, 0xffc0));
        assert_eq!(p("tp_dst", "0x47/0xffc0").unwrap(), (0x40, 0xffc0));
        assert!(p("tp_dst", "65536").is_err());
        assert!(p("tp_dst", "abc").is_err());
        assert!(p("nw_ttl", "3/1").is_err());
        assert_eq!(round("tp_dst", "0x40/0xffc0"), "0x40/0xffc0");
        assert_eq!(round("tp_src", "1234"), "1234");
        assert_eq!(round("dl_type", "2048"), "0x0800");
        assert_eq!(round("in_port", "LOCAL"), "65534");
    }

    #[test]
    fn ipv4() {
        assert_eq!(
            p("nw_src", "10.1.2.3/8").unwrap(),
            (0x0a00_0000, 0xff00_0000)
        );
        assert_eq!(
            p("nw_src", "10.1.2.3/255.0.255.0").unwrap(),
            (0x0a00_0200, 0xff00_ff00)
        );
        assert!(p("nw_src", "10.1.2/8").is_err());
        assert!(p("nw_src", "10.1.2.3/33").is_err());
        assert_eq!(round("nw_dst", "7.7.7.104"), "7.7.7.104");
        assert_eq!(round("nw_dst", "7.7.7.104/29"), "7.7.7.104/29");
        assert_eq!(
            round("nw_dst", "7.7.7.0/255.0.255.0"),
            "7.0.7.0/255.0.255.0"
        );
        assert_eq!(round("nw_dst", "1.2.3.4/0"), "0.0.0.0/0");
    }

    #[test]
    fn ipv6_and_mac() {
        assert_eq!(round("ipv6_src", "2001:db8::1/32"), "2001:db8::/32");
        assert_eq!(round("ipv6_src", "2001:db8::1"), "2001:db8::1");
        assert_eq!(round("ipv6_src", "::1/::ffff"), "::1/::ffff");
        assert_eq!(round("dl_src", "00:0A:E4:25:6B:B0"), "00:0a:e4:25:6b:b0");
        assert_eq!(
            round("dl_dst", "01:00:00:00:00:00/01:00:00:00:00:00"),
            "01:00:00:00:00:00/01:00:00:00:00:00"
        );
        assert!(p("dl_dst", "01:00:00:00:00").is_err());
    }

    #[test]
    fn frag_and_flags() {
        for s in ["no", "yes", "first", "later", "not_later"] {
            assert_eq!(round("nw_frag", s), s);
        }
        assert!(p("nw_frag", "maybe").is_err());
        assert_eq!(p("tcp_flags", "+syn-ack").unwrap(), (0x002, 0x012));
        assert_eq!(round("tcp_flags", "+syn-ack"), "+syn-ack");
        assert_eq!(round("tcp_flags", "0x002"), "syn");
        assert_eq!(round("tcp_flags", "syn|ack"), "syn|ack");
        assert!(p("tcp_flags", "+bogus").is_err());
    }

    #[test]
    fn ct_state_as_ovs_parses_and_prints_it() {
        assert_eq!(p("ct_state", "+trk+est-new").unwrap(), (0x22, 0x23));
        assert_eq!(round("ct_state", "+trk+est-new"), "-new+est+trk");
        assert_eq!(round("ct_state", "-trk"), "-trk");
        assert_eq!(p("ct_state", "new|trk").unwrap(), (0x21, 0xff));
        assert_eq!(round("ct_state", "trk|new"), "new|trk");
        assert_eq!(round("ct_state", "0"), "0");
        assert_eq!(p("ct_state", "0x21/0x21").unwrap(), (0x21, 0x21));
        assert_eq!(round("ct_state", "0x21/0x21"), "+new+trk");
        assert!(p("ct_state", "+trk+trk").is_err());
        assert!(p("ct_state", "+bogus").is_err());
        assert!(p("ct_state", "0x100").is_err());
        assert_eq!(round("ct_mark", "0x5/0xff"), "0x5/0xff");
        assert_eq!(round("ct_zone", "7"), "7");
        assert_eq!(round("ct_label", "0x1/0x1"), "0x1/0x1");
        assert_eq!(
            p("ct_label", "0x10000000000000000000000000000001")
                .unwrap()
                .0,
            (1u128 << 124) | 1
        );
        assert_eq!(round("ct_nw_src", "10.0.0.0/8"), "10.0.0.0/8");
        assert_eq!(round("ct_ipv6_dst", "fe80::1"), "fe80::1");
    }

    #[test]
    fn tos_units_and_vlan() {
        assert_eq!(p("nw_tos", "32").unwrap(), (32, 0xfc));
        assert!(p("nw_tos", "33").is_err());
        assert_eq!(p("ip_dscp", "8").unwrap(), (8, 0x3f));
        assert_eq!(p("dl_vlan", "0xffff").unwrap().0, 0xffff);
        assert!(p("dl_vlan", "4096").is_err());
        assert!(p("dl_vlan_pcp", "8").is_err());
    }

    #[test]
    fn prefixes() {
        assert_eq!(prefix_len(0xffff_ff00, 32), Some(24));
        assert_eq!(prefix_len(0, 32), Some(0));
        assert_eq!(prefix_len(0xff00_ff00, 32), None);
        assert_eq!(prefix_mask(24, 32), 0xffff_ff00);
        assert_eq!(prefix_mask(128, 128), u128::MAX);
    }
}
