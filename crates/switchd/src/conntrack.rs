//! The connection tracker's control commands, as Open vSwitch's `dpctl/*`
//! conntrack commands take their arguments and print their answers:
//! `dpctl/dump-conntrack [dp] [-m] [-s] [zone=N]`,
//! `dpctl/flush-conntrack [dp] [zone=N] ['TUPLE']`,
//! `dpctl/ct-stats-show [dp] [-m] [zone=N]`,
//! `dpctl/ct-set-maxconns [dp] N`, `dpctl/ct-get-maxconns [dp]`,
//! `dpctl/ct-get-nconns [dp]`,
//! `dpctl/ct-set-limits [dp] [default=L] [zone=N,limit=L]...`,
//! `dpctl/ct-get-limits [dp] [zone=N[,zone=N]...]`,
//! `dpctl/ct-del-limits [dp] zone=N[,zone=N]...`, and the fragment
//! reassembler's `dpctl/ipf-set-enabled|ipf-set-disabled [dp] v4|v6`,
//! `dpctl/ipf-set-min-frag [dp] v4|v6 SIZE`,
//! `dpctl/ipf-set-max-nfrags [dp] N`, `dpctl/ipf-get-status [dp] [-m]`.
//!
//! The tracker is the switch's one `Conntrack` (shared by the PMDs); these
//! handlers read and change it directly (it takes `&self` everywhere) —
//! no PMD is asked anything. A datapath name (`netdev@ovs-netdev`,
//! `ovs-netdev`, `system@…`) is accepted and ignored, as the switch has
//! one datapath.

use flowpath_conntrack::ipf::{self, Ipf};
use flowpath_conntrack::{format, Conntrack, FlushTuple, TupleMatch};
use std::net::IpAddr;

/// Drops a leading datapath name (`netdev@ovs-netdev`, `ovs-netdev`).
fn skip_dp(p: &[String]) -> &[String] {
    match p.first() {
        Some(a) if !a.contains('=') && !a.starts_with('-') && a.parse::<u64>().is_err() => &p[1..],
        _ => p,
    }
}

fn parse_zone(v: &str) -> Result<u16, String> {
    v.parse()
        .map_err(|_| format!("invalid zone \"{v}\" (0 to 65535 expected)"))
}

/// `dpctl/dump-conntrack`.
pub fn dump(ct: &Conntrack, p: &[String]) -> Result<String, String> {
    let (mut verbose, mut stats, mut zone) = (false, false, None);
    for a in skip_dp(p) {
        match a.as_str() {
            "-m" | "--more" => verbose = true,
            "-s" | "--statistics" => stats = true,
            _ => match a.strip_prefix("zone=") {
                Some(z) => zone = Some(parse_zone(z)?),
                None => return Err(format!("invalid argument \"{a}\"")),
            },
        }
    }
    let mut lines: Vec<(_, String)> = ct
        .dump(zone)
        .iter()
        .map(|e| {
            (
                format::sort_key(&e.orig),
                format::format_entry(e, verbose, stats),
            )
        })
        .collect();
    lines.sort();
    let mut out = String::new();
    for (_, l) in lines {
        out.push_str(&l);
        out.push('\n');
    }
    Ok(out)
}

/// `dpctl/ct-stats-show`.
pub fn stats_show(ct: &Conntrack, p: &[String]) -> Result<String, String> {
    let (mut verbose, mut zone) = (false, None);
    for a in skip_dp(p) {
        match a.as_str() {
            "-m" | "--more" => verbose = true,
            _ => match a.strip_prefix("zone=") {
                Some(z) => zone = Some(parse_zone(z)?),
                None => return Err(format!("invalid argument \"{a}\"")),
            },
        }
    }
    Ok(format::format_stats(&ct.dump(zone), verbose))
}

/// One `ct_nw_src=A,ct_nw_dst=B,ct_nw_proto=P,ct_tp_src=S,ct_tp_dst=D`
/// (`ct_ipv6_src`/`ct_ipv6_dst`, `icmp_id`/`icmp_type`/`icmp_code`), as
/// OVS's `ct_dpif_parse_tuple`; returns the protocol given, if any.
fn parse_tuple(text: &str) -> Result<(TupleMatch, Option<u8>), String> {
    let mut m = TupleMatch::default();
    let mut proto = None;
    for kv in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("invalid conntrack tuple field: {kv}"))?;
        let num = |v: &str| -> Result<u64, String> {
            let r = match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => v.parse(),
            };
            r.map_err(|_| format!("failed to parse field {k}"))
        };
        let ip = |v: &str| -> Result<IpAddr, String> {
            v.parse().map_err(|_| format!("failed to parse field {k}"))
        };
        match k {
            "ct_nw_src" | "ct_ipv6_src" => m.src = Some(ip(v)?),
            "ct_nw_dst" | "ct_ipv6_dst" => m.dst = Some(ip(v)?),
            "ct_nw_proto" => proto = Some(u8::try_from(num(v)?).map_err(|_| "bad ct_nw_proto")?),
            "ct_tp_src" => m.src_port = Some(u16::try_from(num(v)?).map_err(|_| "bad ct_tp_src")?),
            "ct_tp_dst" => m.dst_port = Some(u16::try_from(num(v)?).map_err(|_| "bad ct_tp_dst")?),
            "icmp_id" => m.icmp_id = Some(u16::try_from(num(v)?).map_err(|_| "bad icmp_id")?),
            "icmp_type" => m.icmp_type = Some(u8::try_from(num(v)?).map_err(|_| "bad icmp_type")?),
            "icmp_code" => m.icmp_code = Some(u8::try_from(num(v)?).map_err(|_| "bad icmp_code")?),
            _ => return Err(format!("invalid conntrack tuple field: {k}")),
        }
    }
    Ok((m, proto))
}

/// `dpctl/flush-conntrack`.
pub fn flush(ct: &Conntrack, p: &[String]) -> Result<String, String> {
    let mut zone = None;
    let mut tuples = Vec::new();
    for a in skip_dp(p) {
        match a.strip_prefix("zone=") {
            Some(z) => zone = Some(parse_zone(z)?),
            None => tuples.push(a.as_str()),
        }
    }
    let tuple = match tuples.as_slice() {
        [] => None,
        [o] | [o, _] => {
            let (orig, proto) = parse_tuple(o)?;
            let (reply, rproto) = match tuples.get(1) {
                Some(r) => parse_tuple(r)?,
                None => (TupleMatch::default(), None),
            };
            Some(FlushTuple {
                proto: proto.or(rproto),
                orig,
                reply,
            })
        }
        _ => return Err("too many arguments (at most an original and a reply tuple)".into()),
    };
    ct.flush(zone, tuple.as_ref());
    Ok(String::new())
}

/// What an OpenFlow `NXT_CT_FLUSH` flushes: its zone (with a tuple and
/// no zone, zone 0, as Open vSwitch; neither: every zone) and the tuple
/// its protocol and directions make.
pub fn of_flush(f: &flowpath_openflow::msg::CtFlush) -> (Option<u16>, Option<FlushTuple>) {
    if f.orig.is_none() && f.reply.is_none() {
        return (f.zone, None);
    }
    let tuple = FlushTuple {
        proto: (f.proto != 0).then_some(f.proto),
        orig: f.orig.unwrap_or_default(),
        reply: f.reply.unwrap_or_default(),
    };
    (Some(f.zone.unwrap_or(0)), Some(tuple))
}

/// `dpctl/ct-set-maxconns`.
pub fn set_maxconns(ct: &Conntrack, p: &[String]) -> Result<String, String> {
    let n = skip_dp(p)
        .first()
        .and_then(|v| v.parse::<u32>().ok())
        .ok_or("maxconns missing or malformed")?;
    ct.set_max_conns(n);
    Ok("setting maxconns successful\n".into())
}

/// `dpctl/ct-set-limits`.
pub fn set_limits(ct: &Conntrack, p: &[String]) -> Result<String, String> {
    let mut default = None;
    let mut zones = Vec::new();
    for a in skip_dp(p) {
        if let Some(v) = a.strip_prefix("default=") {
            default = Some(v.parse::<u32>().map_err(|_| "invalid default limit")?);
            continue;
        }
        let (mut z, mut l) = (None, None);
        for kv in a.split(',') {
            match kv.split_once('=') {
                Some(("zone", v)) => z = Some(parse_zone(v)?),
                Some(("limit", v)) => {
                    l = Some(
                        v.parse::<u32>()
                            .map_err(|_| format!("invalid limit \"{v}\""))?,
                    )
                }
                _ => return Err(format!("failed to parse zone limit \"{a}\"")),
            }
        }
        match (z, l) {
            (Some(z), Some(l)) => zones.push((z, l)),
            _ => {
                return Err(format!(
                    "failed to parse zone limit \"{a}\" (zone=N,limit=L)"
                ))
            }
        }
    }
    if let Some(d) = default {
        ct.set_default_limit(d);
    }
    for (z, l) in zones {
        ct.set_zone_limit(z, l);
    }
    Ok(String::new())
}

/// The zones of `zone=N[,zone=N]...` arguments.
fn zone_list(p: &[String]) -> Result<Vec<u16>, String> {
    let mut zones = Vec::new();
    for a in p {
        for kv in a.split(',') {
            match kv.strip_prefix("zone=") {
                Some(z) => zones.push(parse_zone(z)?),
                None => return Err(format!("failed to parse zone list \"{a}\"")),
            }
        }
    }
    Ok(zones)
}

/// `dpctl/ct-get-limits`.
pub fn get_limits(ct: &Conntrack, p: &[String]) -> Result<String, String> {
    let zones = zone_list(skip_dp(p))?;
    let list = if zones.is_empty() {
        ct.zone_limits()
    } else {
        ct.zone_limits_of(&zones)
    };
    let mut s = format::format_zone_limits(ct.default_limit(), &list);
    s.push('\n');
    Ok(s)
}

/// `dpctl/ct-del-limits`.
pub fn del_limits(ct: &Conntrack, p: &[String]) -> Result<String, String> {
    let zones = zone_list(skip_dp(p))?;
    if zones.is_empty() {
        return Err("no zone given (zone=N[,zone=N]...)".into());
    }
    for z in zones {
        ct.del_zone_limit(z);
    }
    Ok(String::new())
}

fn family(p: &[String]) -> Result<bool, String> {
    match skip_dp(p).first().map(String::as_str) {
        Some("v4") => Ok(false),
        Some("v6") => Ok(true),
        _ => Err("invalid argument: v4 or v6 expected".into()),
    }
}

/// `dpctl/ipf-set-enabled` / `ipf-set-disabled`.
pub fn ipf_enable(ipf: &Ipf, p: &[String], on: bool) -> Result<String, String> {
    ipf.set_enabled(family(p)?, on);
    Ok("changing fragmentation enabled successful\n".to_string())
}

/// `dpctl/ipf-set-min-frag`.
pub fn ipf_min_frag(ipf: &Ipf, p: &[String]) -> Result<String, String> {
    let v6 = family(p)?;
    let n = skip_dp(p)
        .get(1)
        .and_then(|v| v.parse::<u32>().ok())
        .ok_or("parameter missing for min fragment size")?;
    ipf.set_min_frag(v6, n)
        .map_err(|e| format!("setting minimum fragment size failed: {e:?}"))?;
    Ok("setting minimum fragment size successful\n".into())
}

/// `dpctl/ipf-set-max-nfrags`.
pub fn ipf_max_frags(ipf: &Ipf, p: &[String]) -> Result<String, String> {
    let n = skip_dp(p)
        .first()
        .and_then(|v| v.parse::<u32>().ok())
        .ok_or("parameter missing for max fragments")?;
    ipf.set_max_frags(n)
        .map_err(|e| format!("setting maximum fragments failed: {e:?}"))?;
    Ok("setting maximum fragments successful\n".into())
}

/// `dpctl/ipf-get-status`.
pub fn ipf_status(ipf: &Ipf) -> String {
    ipf::format_status(&ipf.status())
}

/// `config/set` keys of the connection tracker's timeouts:
/// `ct-timeout-NAME=SECONDS`, NAME as OVS's timeout policies name them
/// (`tcp_established`, `udp_first`, ...).
pub(crate) const CT_TIMEOUT_PREFIX: &str = "ct-timeout-";

/// The tracker's timeouts as `config/show` lists them.
pub(crate) fn ct_timeouts_text(t: &flowpath_conntrack::Timeouts) -> String {
    let v = [
        t.tcp_syn_sent,
        t.tcp_syn_recv,
        t.tcp_established,
        t.tcp_fin_wait,
        t.tcp_time_wait,
        t.tcp_close,
        t.udp_first,
        t.udp_single,
        t.udp_multiple,
        t.icmp_first,
        t.icmp_reply,
    ];
    let mut s = String::new();
    for (n, secs) in flowpath_conntrack::timeouts::NAMES.iter().zip(v) {
        s.push_str(&format!("{CT_TIMEOUT_PREFIX}{n}={secs}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuples_and_limits_parse_as_ovs_writes_them() {
        let (m, p) = parse_tuple(
            "ct_nw_src=10.1.1.2,ct_nw_dst=10.1.1.1,ct_nw_proto=17,ct_tp_src=2,ct_tp_dst=1",
        )
        .unwrap();
        assert_eq!(p, Some(17));
        assert_eq!(m.src, Some("10.1.1.2".parse().unwrap()));
        assert_eq!((m.src_port, m.dst_port), (Some(2), Some(1)));
        assert!(parse_tuple("ct_nw_src=bogus").is_err());
        assert!(parse_tuple("nw_src=1.2.3.4").is_err());
        let ct = Conntrack::new(flowpath_conntrack::Config::default());
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        set_limits(&ct, &a(&["default=10", "zone=3,limit=5"])).unwrap();
        let s = get_limits(&ct, &a(&[])).unwrap();
        assert!(
            s.starts_with("default limit=10\nzone=3,limit=5,count=0"),
            "{s}"
        );
        del_limits(&ct, &a(&["zone=3"])).unwrap();
        assert_eq!(
            get_limits(&ct, &a(&["netdev@ovs-netdev"])).unwrap(),
            "default limit=10\n"
        );
        assert!(set_limits(&ct, &a(&["zone=3"])).is_err());
        assert_eq!(
            set_maxconns(&ct, &a(&["7"])).unwrap(),
            "setting maxconns successful\n"
        );
        assert_eq!(ct.max_conns(), 7);
        assert!(set_maxconns(&ct, &a(&["x"])).is_err());
        assert_eq!(dump(&ct, &a(&["-m"])).unwrap(), "");
    }
}
