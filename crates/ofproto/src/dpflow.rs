//! Reading datapath flows as `ovs-dpctl dump-flows` and
//! `ovs-appctl netdev-dummy/receive` write them:
//! `in_port(1),eth(src=50:54:00:00:00:09,dst=50:54:00:00:00:0a),eth_type(0x0800),ipv4(src=10.0.0.2,dst=10.0.0.1,proto=1,tos=0,ttl=64,frag=no),icmp(type=8,code=0)`.
//!
//! What: [`parse_dp_flow`] gives the key and the mask of the bits written
//! (`src=10.0.0.0/255.0.0.0` writes a masked field), so it reads both a
//! packet (`flowpath trace` input; fields not written are 0) and a
//! megaflow as dump-flows prints it. Attributes: `in_port`, `eth`, `vlan`
//! (with `encap(...)`, up to two tags), `eth_type`, `ipv4`, `ipv6`, `tcp`,
//! `udp`, `sctp`, `tcp_flags`, `icmp`, `icmpv6`, `arp`, `nd`; the metadata
//! `recirc_id(ID)` (below 0x10000, flowpath's ids) and `dp_hash(H[/M])`
//! (its low 16 bits kept, as the datapath keeps them); the metadata OVS
//! prints with its default value (`skb_priority(0)`, `skb_mark(0)`,
//! `packet_type(ns=0,id=0)`, `ct_*` zero) are accepted; other values of
//! them, and attributes flowpath's key has no room for (tunnels,
//! conntrack state), are refused by name.
//!
//! Invariant: total, no panic on any input (fuzzed with the rule parser's
//! property test).

use crate::rule::RuleError;
use flowpath_flow::field::FieldId;
use flowpath_flow::key::VLAN_CFI;
use flowpath_flow::value::{parse_uint, parse_value};
use flowpath_flow::{FlowKey, FlowMask};

/// A `V` or `V/M` number of at most `bits` bits (the mask all ones when
/// not given), for attribute `attr`'s `what`.
fn masked_uint(attr: &str, what: &str, text: &str, bits: u32) -> Result<(u32, u32), RuleError> {
    let full = u32::MAX >> (32 - bits);
    let num = |x: &str| {
        parse_uint(x.trim())
            .ok()
            .filter(|n| *n <= u128::from(full))
            .map(|n| n as u32)
            .ok_or_else(|| {
                RuleError::new(
                    Some(attr),
                    format!("{attr}: {what}: '{}' is not a {bits}-bit number", x.trim()),
                )
            })
    };
    match text.split_once('/') {
        Some((v, m)) => Ok((num(v)?, num(m)?)),
        None => Ok((num(text)?, full)),
    }
}

/// Splits `s` at the commas outside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, RuleError> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(RuleError::new(None, format!("unbalanced ')' in '{s}'")));
                }
            }
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(RuleError::new(None, format!("unbalanced '(' in '{s}'")));
    }
    out.push(s[start..].trim());
    out.retain(|x| !x.is_empty());
    Ok(out)
}

/// `name(args)` → (name, args).
fn attr(item: &str) -> Result<(&str, &str), RuleError> {
    let Some(open) = item.find('(') else {
        return Err(RuleError::new(
            Some(item),
            "expected ATTRIBUTE(...) (datapath flow syntax)",
        ));
    };
    if !item.ends_with(')') {
        return Err(RuleError::new(Some(item), "missing ')'"));
    }
    Ok((item[..open].trim(), &item[open + 1..item.len() - 1]))
}

struct Builder {
    key: FlowKey,
    mask: FlowMask,
    /// VLAN tags seen so far (outer first).
    tags: u8,
}

impl Builder {
    fn put(&mut self, attr_name: &str, id: FieldId, text: &str) -> Result<(), RuleError> {
        let f = id.info();
        let (v, m) = parse_value(f, text).map_err(|e| {
            RuleError::new(Some(attr_name), format!("{attr_name}: {}: {}", f.name, e.0))
        })?;
        f.set_masked(&mut self.key, v, m);
        f.or_mask(&mut self.mask, m);
        Ok(())
    }

    /// A datapath flow's `tos`/`tclass`: the whole byte, DSCP and ECN
    /// (`V` or `V/M`), as flowpath's `nw_tos` (DSCP bits) and `nw_ecn`.
    fn put_tos(&mut self, attr_name: &str, text: &str) -> Result<(), RuleError> {
        let (v, m) = masked_uint(attr_name, "tos", text, 8)?;
        let (v, m) = (u128::from(v), u128::from(m));
        for (id, bits) in [(FieldId::NwTos, 0xfc), (FieldId::NwEcn, 0x03)] {
            let f = id.info();
            let (fv, fm) = (v & bits, m & bits);
            if fm != 0 {
                f.set_masked(&mut self.key, fv, fm);
                f.or_mask(&mut self.mask, fm);
            }
        }
        Ok(())
    }

    /// The `k=v` pairs of an attribute, each given to `each(k, v)`.
    fn pairs(
        &mut self,
        name: &str,
        args: &str,
        mut each: impl FnMut(&mut Self, &str, &str) -> Result<(), RuleError>,
    ) -> Result<(), RuleError> {
        for kv in split_top(args)? {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(RuleError::new(
                    Some(name),
                    format!("{name}: expected KEY=VALUE, got '{kv}'"),
                ));
            };
            each(self, k.trim(), v.trim())?;
        }
        Ok(())
    }

    fn item(&mut self, item: &str) -> Result<(), RuleError> {
        let (name, args) = attr(item)?;
        let unknown = |k: &str| RuleError::new(Some(name), format!("{name}: unknown key '{k}'"));
        match name {
            "in_port" | "recirc_id" | "dp_hash" | "skb_priority" | "skb_mark" | "ct_state"
            | "ct_zone" | "ct_mark" | "ct_label" | "packet_type" => self.meta_item(name, args),
            "eth" => self.pairs(name, args, |b, k, v| match k {
                "src" => b.put(name, FieldId::EthSrc, v),
                "dst" => b.put(name, FieldId::EthDst, v),
                _ => Err(unknown(k)),
            }),
            "eth_type" => self.put(name, FieldId::EthType, args),
            "vlan" | "encap" | "mpls" => self.tag_item(name, args),
            "ipv4" => self.pairs(name, args, |b, k, v| {
                let id = match k {
                    "src" => FieldId::NwSrc,
                    "dst" => FieldId::NwDst,
                    "proto" => FieldId::NwProto,
                    "tos" => return b.put_tos(name, v),
                    "ttl" => FieldId::NwTtl,
                    "frag" => FieldId::NwFrag,
                    _ => return Err(unknown(k)),
                };
                b.put(name, id, v)
            }),
            "ipv6" => self.pairs(name, args, |b, k, v| {
                let id = match k {
                    "src" => FieldId::Ipv6Src,
                    "dst" => FieldId::Ipv6Dst,
                    "label" => FieldId::Ipv6Label,
                    "proto" => FieldId::NwProto,
                    "tclass" => return b.put_tos(name, v),
                    "hlimit" => FieldId::NwTtl,
                    "frag" => FieldId::NwFrag,
                    _ => return Err(unknown(k)),
                };
                b.put(name, id, v)
            }),
            "tcp" | "udp" | "sctp" => self.pairs(name, args, |b, k, v| match k {
                "src" => b.put(name, FieldId::TpSrc, v),
                "dst" => b.put(name, FieldId::TpDst, v),
                _ => Err(unknown(k)),
            }),
            "tcp_flags" => self.put(name, FieldId::TcpFlags, args),
            "icmp" | "icmpv6" => self.pairs(name, args, |b, k, v| match k {
                // 8-bit fields in the low bits of tp_src/tp_dst.
                "type" => b.put(name, FieldId::IcmpType, v),
                "code" => b.put(name, FieldId::IcmpCode, v),
                _ => Err(unknown(k)),
            }),
            "arp" => self.pairs(name, args, |b, k, v| {
                let id = match k {
                    "sip" => FieldId::NwSrc,
                    "tip" => FieldId::NwDst,
                    "op" => FieldId::NwProto,
                    "sha" => FieldId::ArpSha,
                    "tha" => FieldId::ArpTha,
                    _ => return Err(unknown(k)),
                };
                b.put(name, id, v)
            }),
            "nd" => self.pairs(name, args, |b, k, v| {
                let id = match k {
                    "target" => FieldId::NdTarget,
                    "sll" => FieldId::NdSll,
                    "tll" => FieldId::NdTll,
                    _ => return Err(unknown(k)),
                };
                b.put(name, id, v)
            }),
            // Up to three label stack entries, as OVS writes them: a key
            // seen again starts the next entry.
            "tunnel" | "ct_tuple4" | "ct_tuple6" | "nsh" | "ipv4_frag" | "erspan" => {
                Err(RuleError::new(
                    Some(name),
                    format!("{name}(...) is not supported by flowpath"),
                ))
            }
            _ => Err(RuleError::new(
                Some(name),
                format!("unknown datapath flow attribute '{name}'"),
            )),
        }
    }

    /// The metadata attributes: `in_port`, `recirc_id`, `dp_hash`, the ones
    /// OVS prints with their default values, `packet_type`.
    fn meta_item(&mut self, name: &str, args: &str) -> Result<(), RuleError> {
        match name {
            "in_port" => self.put(name, FieldId::InPort, args),
            "recirc_id" | "dp_hash" => {
                let (v, m) = masked_uint(name, "value", args, 32)?;
                let (mut k, mut mk) = (self.key, self.mask.to_key());
                if name == "recirc_id" {
                    // flowpath's ids are 16 bits (they share in_port's word).
                    if v > 0xffff {
                        return Err(RuleError::new(
                            Some(name),
                            format!("recirc_id({args}): flowpath's ids are below 0x10000"),
                        ));
                    }
                    k.set_recirc_id(v & m);
                    mk.set_recirc_id(m);
                } else {
                    // The key keeps the hash's low 12 bits (a select group
                    // reads at most 8); a non-zero hash stays non-zero as
                    // the datapath keeps it.
                    if m > 0xfff && m != u32::MAX {
                        return Err(RuleError::new(
                            Some(name),
                            format!("dp_hash({args}): flowpath keeps the low 12 bits only"),
                        ));
                    }
                    let low = v & m & 0xfff;
                    k.set_dp_hash(if low == 0 && v & m != 0 { 0x800 } else { low });
                    mk.set_dp_hash(m & 0xfff);
                }
                self.key = k;
                self.mask = FlowMask::from_key(&mk);
                Ok(())
            }
            "skb_priority" | "skb_mark" | "ct_state" | "ct_zone" | "ct_mark" | "ct_label" => {
                let v = args.split('/').next().unwrap_or("");
                match parse_uint(v) {
                    Ok(0) => Ok(()),
                    _ => Err(RuleError::new(
                        Some(name),
                        format!("{name}({args}) is not supported by flowpath (only 0)"),
                    )),
                }
            }
            "packet_type" => {
                if args.replace(' ', "") == "ns=0,id=0" {
                    Ok(())
                } else {
                    Err(RuleError::new(
                        Some(name),
                        "only Ethernet packets (packet_type(ns=0,id=0)) are supported",
                    ))
                }
            }
            _ => Err(RuleError::new(
                Some(name),
                format!("unknown datapath flow attribute '{name}'"),
            )),
        }
    }

    /// VLAN tags (`vlan`, `encap`) and MPLS label stack entries (`mpls`).
    fn tag_item(&mut self, name: &str, args: &str) -> Result<(), RuleError> {
        let unknown = |k: &str| RuleError::new(Some(name), format!("{name}: unknown key '{k}'"));
        match name {
            "vlan" => {
                if self.tags >= 2 {
                    return Err(RuleError::new(Some(name), "more than two VLAN tags"));
                }
                let (mut tci, mut tmask) = (VLAN_CFI, VLAN_CFI);
                for kv in split_top(args)? {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    let (shift, width) = match k.trim() {
                        "vid" => (0, 12),
                        "pcp" => (13, 3),
                        "cfi" => (12, 1),
                        k => return Err(unknown(k)),
                    };
                    let (val, msk) = masked_uint(name, k.trim(), v, width)?;
                    let (val, msk) = ((val as u16) << shift, (msk as u16) << shift);
                    tci = (tci & !msk) | (val & msk);
                    tmask |= msk;
                }
                let (mut k, mut m) = (self.key, self.mask.to_key());
                if self.tags == 0 {
                    k.set_vlan_tci(tci);
                    m.set_vlan_tci(tmask);
                } else {
                    k.set_vlan_tci_inner(tci);
                    m.set_vlan_tci_inner(tmask);
                }
                self.key = k;
                self.mask = FlowMask::from_key(&m);
                self.tags += 1;
                Ok(())
            }
            "encap" => {
                for it in split_top(args)? {
                    self.item(it)?;
                }
                Ok(())
            }
            "mpls" => {
                let mut entry = 0usize;
                let mut seen: Vec<String> = Vec::new();
                self.pairs(name, args, |b, k, v| {
                    let (shift, width) = match k {
                        "label" => (12, 20),
                        "tc" => (9, 3),
                        "ttl" => (0, 8),
                        "bos" => (8, 1),
                        _ => return Err(unknown(k)),
                    };
                    if seen.iter().any(|x| x == k) {
                        entry += 1;
                        seen.clear();
                        if entry == 3 {
                            return Err(RuleError::new(
                                Some(name),
                                format!("{name}: more than 3 label stack entries"),
                            ));
                        }
                    }
                    seen.push(k.to_string());
                    // `VALUE` or `VALUE/MASK`, as OVS prints a masked entry.
                    let (x, m) = masked_uint(name, k, v, width)?;
                    let bits = ((1u32 << width) - 1) << shift;
                    let mut mk = b.mask.to_key();
                    let (old, old_m) = (b.key.mpls_lse(entry), mk.mpls_lse(entry));
                    b.key
                        .set_mpls_lse(entry, (old & !bits) | ((x & m) << shift));
                    mk.set_mpls_lse(entry, (old_m & !bits) | (m << shift));
                    b.mask = FlowMask::from_key(&mk);
                    Ok(())
                })
            }
            _ => Err(RuleError::new(
                Some(name),
                format!("unknown datapath flow attribute '{name}'"),
            )),
        }
    }
}

/// True when `text` looks like a datapath flow (`in_port(1),eth(...)`)
/// rather than an `ovs-ofctl` match (`in_port=1,tcp`).
pub fn is_dp_flow(text: &str) -> bool {
    let t = text.trim_start();
    match (t.find('('), t.find('=')) {
        (Some(p), Some(e)) => p < e,
        (Some(_), None) => true,
        _ => false,
    }
}

/// Parses a datapath flow: its key and the mask of the bits written.
pub fn parse_dp_flow(text: &str) -> Result<(FlowKey, FlowMask), RuleError> {
    let mut b = Builder {
        key: FlowKey::zero(),
        mask: FlowMask::catchall(),
        tags: 0,
    };
    for item in split_top(text.trim())? {
        b.item(item)?;
    }
    Ok((b.key, b.mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet() {
        let (k, m) = parse_dp_flow("recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth(src=50:54:00:00:00:09,dst=50:54:00:00:00:0a),eth_type(0x0800),ipv4(src=10.0.0.2,dst=10.0.0.1,proto=1,tos=0,ttl=64,frag=no),icmp(type=8,code=0)").unwrap();
        assert_eq!(k.in_port(), 1);
        assert_eq!(k.dl_src(), 0x5054_0000_0009);
        assert_eq!(k.dl_type(), 0x0800);
        assert_eq!(k.nw_src(), 0x0a00_0002);
        assert_eq!((k.nw_proto(), k.nw_ttl(), k.nw_frag()), (1, 64, 0));
        assert_eq!((k.tp_src(), k.tp_dst()), (8, 0));
        assert_eq!(m.to_key().nw_frag(), 3);
        assert_eq!(m.to_key().nw_src(), u32::MAX);
    }

    #[test]
    fn vlans_masks_and_errors() {
        let (k, m) = parse_dp_flow("in_port(2),eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02),eth_type(0x8100),vlan(vid=5,pcp=3),encap(eth_type(0x0800),ipv4(src=10.0.0.0/255.0.0.0,frag=no))").unwrap();
        assert_eq!(k.vlan_tci(), VLAN_CFI | 5 | (3 << 13));
        assert_eq!(k.dl_type(), 0x0800, "the innermost type");
        assert_eq!(m.to_key().nw_src(), 0xff00_0000);
        let (k, m) = parse_dp_flow("recirc_id(0x2),dp_hash(0x4851f3bb/0xf),in_port(1)").unwrap();
        assert_eq!((k.recirc_id(), k.dp_hash(), k.in_port()), (2, 0xb, 1));
        assert_eq!(
            (m.to_key().recirc_id(), m.to_key().dp_hash()),
            (0xffff, 0xf)
        );
        assert!(parse_dp_flow("recirc_id(0x10000),in_port(1)").is_err());
        assert!(parse_dp_flow("dp_hash(0x10000/0xf0000)").is_err());
        assert!(parse_dp_flow("skb_mark(1),in_port(1)").is_err());
        assert!(parse_dp_flow("in_port(1),eth(src=1)").is_err());
        assert!(parse_dp_flow("in_port(1),tunnel(tun_id=1)")
            .unwrap_err()
            .msg
            .contains("not supported"));
        assert!(parse_dp_flow("in_port(1").is_err());
        assert!(parse_dp_flow("in_port(1)),x(").is_err());
        assert!(is_dp_flow("in_port(1),eth()"));
        assert!(!is_dp_flow("in_port=1,tcp"));
        assert!(!is_dp_flow("tcp,in_port=1,actions=output(2)"));
    }

    /// `tos`/`tclass` are the whole byte: DSCP into nw_tos, ECN into
    /// nw_ecn (OVS's own tests trace `tos=1`).
    #[test]
    fn tos_is_dscp_and_ecn() {
        let ecn = |k: &FlowKey| FieldId::NwEcn.info().get(k);
        let dscp = |k: &FlowKey| FieldId::NwTos.info().get(k);
        let (k, m) =
            parse_dp_flow("in_port(1),eth_type(0x0800),ipv4(src=1.1.1.1,tos=0x2b,frag=no)")
                .unwrap();
        assert_eq!((dscp(&k), ecn(&k)), (0x28, 3));
        assert_eq!((dscp(&m.to_key()), ecn(&m.to_key())), (0xfc, 3));
        let (k, m) = parse_dp_flow("in_port(1),eth_type(0x86dd),ipv6(tclass=1/0x3)").unwrap();
        assert_eq!((dscp(&k), ecn(&k)), (0, 1));
        assert_eq!((dscp(&m.to_key()), ecn(&m.to_key())), (0, 3));
        assert!(parse_dp_flow("in_port(1),eth_type(0x0800),ipv4(tos=256)").is_err());
    }
}
