//! The replay of golden traces recorded from Open vSwitch 3.1 (shared by
//! `ovs_golden.rs` and `ovs_golden_tunnels.rs`): [`check`] loads each
//! recorded rule set (its groups, frag mode, sampling and tunnel
//! configuration too), traces each recorded packet as `flowpath trace`
//! did, and compares the datapath actions and megaflow with OVS's, the
//! documented differences (each helper says which) apart.

use flowpath_odp::format_actions;
use flowpath_ofproto::classifier::DEFAULT_PREFIXES;
use flowpath_ofproto::group::parse_groups;
use flowpath_ofproto::normal::{MacTable, NormalEnv, PortVlans};
use flowpath_ofproto::parse::{parse_packet, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::xlate_with;

/// True when flowpath's megaflow is OVS's with the L2 fields a
/// `symmetric_l3l4` hash of a packet that is not IP reads (Ethernet
/// addresses, VLAN) made significant: OVS 3.1 hashes them but leaves them
/// out of its megaflow, which is then too wide (see `mask_hash_fields`).
pub fn l2_hash_narrowing(rules: &str, ovs: &str, ours: &str) -> bool {
    const L2: [&str; 4] = ["dl_src", "dl_dst", "dl_vlan", "vlan_tci"];
    if !rules.contains("symmetric_l3l4") || ovs.contains(",ip") || ovs.contains(",ipv6") {
        return false;
    }
    let items = |m: &str| -> Vec<(String, String)> {
        m.split(',')
            .map(|i| {
                let (k, v) = i.split_once('=').unwrap_or((i, ""));
                (k.to_string(), v.to_string())
            })
            .collect()
    };
    let (o, u) = (items(ovs), items(ours));
    o.iter().all(|(k, v)| {
        u.iter()
            .any(|(k2, v2)| k == k2 && (v == v2 || L2.contains(&k.as_str())))
    }) && u
        .iter()
        .all(|(k, _)| L2.contains(&k.as_str()) || o.iter().any(|(k2, _)| k == k2))
}

/// The tunnels `flowpath trace`'s options describe (`--underlay NAME,
/// ip=A/P,...,mac=M`, `--route P/L[,gw=G]`, `--neigh IP=MAC`, `--port
/// N=KIND:OPTS`, `--tlv-map MAP`), built as `flowpath trace` builds them.
pub fn tunnels_from_args(args: &[&str]) -> std::sync::Arc<flowpath_ofproto::tunnel::Tunnels> {
    use flowpath_ofproto::tunnel::{TunnelPort, Tunnels, Underlay, UNDERLAY_PORT};
    let mac = |s: &str| -> [u8; 6] {
        let b: Vec<u8> = s
            .split(':')
            .map(|x| u8::from_str_radix(x, 16).unwrap())
            .collect();
        b.try_into().unwrap()
    };
    let (mut ports, mut underlay, mut routes, mut neighs, mut maps) =
        (Vec::new(), None, Vec::new(), Vec::new(), Vec::new());
    for pair in args.chunks(2) {
        let v = pair[1];
        match pair[0] {
            "--port" => {
                let (n, spec) = v.split_once('=').unwrap();
                ports.push(TunnelPort::parse(n.parse().unwrap(), spec).unwrap());
            }
            "--underlay" => {
                let mut u = Underlay {
                    port: UNDERLAY_PORT,
                    name: "null".into(),
                    mac: [0x02, 0xfd, 0, 0, 0, 0x01],
                    addrs: Vec::new(),
                    kernel: false,
                };
                for tok in v.split(',').skip(1) {
                    if let Some(a) = tok.strip_prefix("ip=") {
                        let (ip, plen) = a.split_once('/').unwrap();
                        u.addrs.push((ip.parse().unwrap(), plen.parse().unwrap()));
                    } else if let Some(m) = tok.strip_prefix("mac=") {
                        u.mac = mac(m);
                    }
                }
                underlay = Some(u);
            }
            "--route" => routes.push(v),
            "--neigh" => neighs.push(v),
            "--tlv-map" => maps.push(v),
            o => panic!("unknown tunnel option {o}"),
        }
    }
    let t = Tunnels::new(ports, underlay, &[]);
    for r in routes {
        let (net, gw) = match r.split_once(",gw=") {
            Some((net, gw)) => (net, Some(gw.parse().unwrap())),
            None => (r, None),
        };
        let (prefix, plen) = net.split_once('/').unwrap();
        t.add_route(prefix.parse().unwrap(), plen.parse().unwrap(), gw)
            .unwrap();
    }
    for n in neighs {
        let (ip, m) = n.split_once('=').unwrap();
        t.neigh.set(ip.parse().unwrap(), mac(m), 0);
    }
    for m in maps {
        t.add_tlv(m).unwrap();
    }
    std::sync::Arc::new(t)
}

/// Asserts that each `(what, at_least)`: at least that many lines (rule
/// sets) of `data` hold `what`.
pub fn at_least_in_rule_sets(data: &str, wants: &[(&str, usize)]) {
    for (what, at_least) in wants {
        let n = data.lines().filter(|l| l.contains(what)).count();
        assert!(n >= *at_least, "{what} in only {n} rule sets");
    }
}

/// True when flowpath's megaflow is OVS's with `nw_proto` (`arp_op`)
/// exact, in a rule set that `move`s or `pop`s into packet fields: an L3
/// rewrite pending makes it significant (there is none when it is 0). OVS
/// 3.1 leaves it out after a `move` or `pop` alone, so its megaflow also
/// covers packets with nw_proto 0, which get no rewrite. The same for a
/// packet that came through a tunnel whose outer header says congestion
/// (`tun_tos` ECN CE) and that is ECN capable: marked CE, a rewrite of
/// its ECN bits.
pub fn nw_proto_narrowing(rules: &str, ovs: &str, ours: &str) -> bool {
    if !(rules.contains("move:") || rules.contains("pop:")) {
        return false;
    }
    nw_proto_only(ovs, ours)
}

/// True when the two megaflows differ only in `nw_proto` (`arp_op`).
pub fn nw_proto_only(ovs: &str, ours: &str) -> bool {
    let norm = |m: &str| -> Vec<String> {
        m.split(',')
            .filter(|i| !i.starts_with("nw_proto=") && !i.starts_with("arp_op="))
            .map(|i| match i {
                "tcp" | "udp" | "icmp" | "sctp" => "ip".to_string(),
                "tcp6" | "udp6" | "icmp6" | "sctp6" => "ipv6".to_string(),
                _ => i.to_string(),
            })
            .collect()
    };
    ovs != ours && norm(ovs) == norm(ours)
}

/// A packet traced in on a tunnel whose outer ToS says congestion (ECN
/// CE, `tun_tos=3`) with ECN-capable insides: marked CE (see
/// [`nw_proto_narrowing`]).
pub fn ce_marked(pkt: &str) -> bool {
    let num = |name: &str| {
        pkt.split(',')
            .find_map(|i| i.strip_prefix(name))
            .and_then(|v| v.parse::<u8>().ok())
            .unwrap_or(0)
    };
    num("tun_tos=") & 3 == 3 && num("nw_ecn=") != 0
}

/// True when the megaflows differ only in VLAN items, ours having OVS's
/// and more, in a rule set that pops and pushes tags: a tag pushed after a
/// pop is compared with the packet's whole tag (OVS compares them and
/// reads nothing when they are equal, so its megaflow also covers packets
/// with another priority, which need the tag rewritten).
pub fn vlan_narrowing(rules: &str, ovs: &str, ours: &str) -> bool {
    const VLAN: [&str; 3] = ["dl_vlan", "dl_vlan_pcp", "vlan_tci"];
    if !(rules.contains("push_vlan") && rules.contains("pop_vlan")) {
        return false;
    }
    let split = |m: &str| -> (Vec<String>, Vec<String>) {
        m.split(',')
            .map(str::to_string)
            .partition(|i| VLAN.contains(&i.split('=').next().unwrap_or("")))
    };
    let ((ov, oo), (uv, uo)) = (split(ovs), split(ours));
    oo == uo && ov.iter().all(|i| uv.contains(i)) && uv.len() > ov.len()
}

/// `userspace(controller(...))` written `userspace(controller)`.
/// `actions` without the paused controller actions (`continuation=1`).
pub fn without_paused_controller(actions: &str) -> String {
    let mut out = String::new();
    let mut rest = actions;
    while let Some(i) = rest.find("userspace(controller(") {
        let end = rest[i..].find("))").map_or(rest.len(), |e| i + e + 2);
        if rest[i..end].contains("continuation=1") {
            out.push_str(&rest[..i]);
            let mut tail = &rest[end..];
            if tail.starts_with(',') {
                tail = &tail[1..];
            } else if out.ends_with(',') {
                out.pop();
            }
            rest = tail;
        } else {
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// `actions` with a `clone(...)` that ends them replaced by its actions.
pub fn unwrap_last_clone(actions: &str) -> String {
    let Some(body) = actions.strip_suffix(')') else {
        return actions.to_string();
    };
    // The `clone(` whose parenthesis closes at the end, at the top level.
    let mut depth = 0i32;
    for (i, c) in body.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' if depth > 0 => depth -= 1,
            '(' => {
                let start = i.saturating_sub(5);
                let at_top = start == 0 || body[..start].ends_with(',');
                if &body[start..i] == "clone" && at_top {
                    return format!("{}{}", &body[..start], &body[i + 1..]);
                }
                return actions.to_string();
            }
            _ => {}
        }
    }
    actions.to_string()
}

pub fn reduce_controller(actions: &str) -> String {
    let mut out = String::new();
    let mut rest = actions;
    while let Some(i) = rest.find("userspace(controller(") {
        out.push_str(&rest[..i]);
        out.push_str("userspace(controller)");
        rest = &rest[i..];
        let end = rest.find("))").map_or(rest.len(), |e| e + 2);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `actions` with the masks of `set(eth(...))` rewrites left out.
pub fn unmasked_eth_sets(actions: &str) -> String {
    let mut out = String::new();
    let mut rest = actions;
    while let Some(i) = rest.find("set(eth(") {
        out.push_str(&rest[..i + 8]);
        rest = &rest[i + 8..];
        let end = rest.find(')').unwrap_or(rest.len());
        let inner: Vec<&str> = rest[..end]
            .split(',')
            .map(|kv| kv.split('/').next().unwrap_or(kv))
            .collect();
        out.push_str(&inner.join(","));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// True when the megaflows differ only as flowpath means them to, its
/// having OVS's items plus MPLS ones: with a `set(mpls(...))` among the
/// actions (flowpath keeps the packet's stack exact), or for a packet
/// with no bottom of stack among its first three entries (flowpath keeps
/// the three exact: the label count depends on which are zero).
pub fn mpls_narrowing(pkt: &str, ovs_actions: &str, ovs: &str, ours: &str) -> bool {
    let deep = (pkt.contains("mpls(") && !pkt.contains("bos=1")) || pkt.contains("mpls_bos=0");
    // (A count after a pop, of a stack left without a bottom, is the
    // second case too.)
    let mpls_actions = ["set(mpls(", "pop_mpls("]
        .iter()
        .any(|a| ovs_actions.contains(a));
    if !mpls_actions && !deep {
        return false;
    }
    let (o, m): (Vec<&str>, Vec<&str>) = (ovs.split(',').collect(), ours.split(',').collect());
    o.iter().all(|x| m.contains(x) || x.starts_with("mpls_"))
        && m.iter().all(|x| o.contains(x) || x.starts_with("mpls_"))
}

/// `recirc(0x1f)` written `recirc(ID)`, `recirc_id=0x1f` `recirc_id=ID`:
/// ids differ between processes.
pub fn without_recirc_ids(text: &str) -> String {
    let mut text = text.to_string();
    for (start, end) in [("recirc(0x", ')'), ("recirc_id=0x", ',')] {
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find(start) {
            let keep = start.len() - 2;
            out.push_str(&rest[..i + keep]);
            rest = &rest[i + keep..];
            let e = rest.find(end).unwrap_or(rest.len());
            out.push_str("ID");
            rest = &rest[e..];
        }
        out.push_str(rest);
        text = out;
    }
    text
}

/// Replays `data`; returns how many traces went through a `conj_id` flow
/// and how many second passes' datapath hashes were compared with OVS's.
pub fn check(data: &str, at_least: usize) -> (usize, usize) {
    let mut conj = 0;
    let mut hashes = 0;
    let mut n = 0;
    let mut failures = Vec::new();
    for line in data.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let rules: Vec<String> = v["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect();
        let text = rules.join("\n");
        let mut tables = match parse_rules(&text, None) {
            Ok(r) => RuleTables::new(r, DEFAULT_PREFIXES),
            Err(e) => {
                // OVS loaded it: flowpath must too.
                failures.push(format!("rules:\n{text}\nflowpath refuses them: {e}"));
                continue;
            }
        };
        tables.set_ports(vec![1, 2, 3, 4]);
        if let Some(a) = v["tunnel_args"].as_array() {
            let args: Vec<&str> = a.iter().map(|x| x.as_str().unwrap()).collect();
            tables.set_tunnels(Some(tunnels_from_args(&args)));
        }
        if let Some(m) = v["frag_mode"].as_str() {
            tables.set_frag_mode(m.parse().unwrap());
        }
        tables.set_sampling(v["sampling"].as_bool() == Some(true));
        if let Some(g) = v["groups"].as_array().filter(|g| !g.is_empty()) {
            let text: Vec<&str> = g.iter().map(|x| x.as_str().unwrap()).collect();
            tables
                .set_groups(parse_groups(&text.join("\n"), None).unwrap())
                .unwrap();
        }
        // One trace per line, or (the register file) a rule set's traces
        // in "traces".
        let traces: Vec<&serde_json::Value> = match v["traces"].as_array() {
            Some(t) => t.iter().collect(),
            None => vec![&v],
        };
        // Each trace's recirculations (ids and packets), for the second
        // passes recorded after the first ones.
        let mut recircs: Vec<Vec<(u32, Option<u32>)>> = Vec::new();
        for t in traces {
            let pkt = t["packet"].as_str().unwrap();
            // OpenFlow-style or (multi-label MPLS) datapath-flow packets.
            let mut key = parse_packet(pkt).unwrap();
            // A second pass: the packet the k-th recirculation of trace i
            // sent back, with the datapath hash OVS's datapath gave it.
            if let Some(of) = t["recirc_of"].as_array() {
                let (i, k) = (of[0].as_u64().unwrap(), of[1].as_u64().unwrap());
                let (id, ours) = recircs
                    .get(i as usize)
                    .and_then(|r| r.get(k as usize))
                    .copied()
                    .unwrap_or_else(|| panic!("trace {i} has no recirculation {k}: {pkt}"));
                key.set_recirc_id(id);
                let h = t["dp_hash"].as_u64().unwrap() as u32;
                // The whole 32-bit hash OVS's datapath gave the packet
                // (its dump-flows prints it): ours must be the same.
                if t["megaflow"].as_str().unwrap().contains("dp_hash=") {
                    if ours == Some(h) {
                        hashes += 1;
                    } else {
                        failures.push(format!(
                            "rules:\n{text}\npacket: {pkt}\n ovs's datapath hash: {h:#x}, ours: {ours:x?}"
                        ));
                    }
                }
                if h != 0 {
                    key.set_dp_hash(flowpath_flow::key::dp_hash_bits(h));
                }
            }
            // As `flowpath trace` (what tools/ovs-compare.py ran): NORMAL with
            // an empty MAC table, no learning, flooding to LOCAL too.
            let vlans = PortVlans::default();
            let mut macs = MacTable::default();
            let env = NormalEnv {
                vlans: &vlans,
                macs: &mut macs,
                now_ms: 0,
                learn: false,
                local: true,
            };
            let x = xlate_with(&tables, &key, true, false, Some(env));
            if x.trace.contains("conj_id=") {
                conj += 1;
            }
            recircs.push(x.recirculations.iter().map(|r| (r.id, r.dp_hash)).collect());
            let actions = format_actions(&x.actions);
            let megaflow = without_recirc_ids(&x.megaflow_text(&key));
            let (ovs_actions, ovs_megaflow) = (
                t["actions"].as_str().unwrap(),
                without_recirc_ids(t["megaflow"].as_str().unwrap()),
            );
            let ovs_megaflow = ovs_megaflow.as_str();
            // Recirculation ids are each process's own.
            let (actions, ovs_actions) = (
                without_recirc_ids(&actions),
                without_recirc_ids(ovs_actions),
            );
            let ovs_actions = ovs_actions.as_str();
            // Documented difference: a paused packet-in (`controller(pause)`)
            // is a datapath action in flowpath (the packet-in carries the
            // continuation); OVS sends it from the translation and its
            // trace shows none.
            // (Without it, a datapath clone before it is the last action
            // and needs no clone, as in OVS.)
            let stripped = without_paused_controller(&actions);
            let actions = if stripped == actions {
                actions
            } else if stripped.is_empty() {
                "drop".to_string()
            } else {
                unwrap_last_clone(&stripped)
            };
            // Data recorded before packet-ins were compared in full holds
            // `userspace(controller)`: ours reduced to that.
            let actions = if ovs_actions.contains("userspace(controller)") {
                reduce_controller(&actions)
            } else {
                actions
            };
            // With the L2 fields significant, a rewrite of them needs no
            // mask (the same rewrite).
            let l2 = l2_hash_narrowing(&text, ovs_megaflow, &megaflow);
            let ok = {
                (actions == ovs_actions
                    || (l2 && unmasked_eth_sets(ovs_actions) == unmasked_eth_sets(&actions)))
                    && (megaflow == ovs_megaflow
                        // A failed translation's megaflow is never
                        // installed (both drop the packet).
                        || x.error.is_some()
                        || mpls_narrowing(pkt, ovs_actions, ovs_megaflow, &megaflow)
                        || vlan_narrowing(&text, ovs_megaflow, &megaflow)
                        || nw_proto_narrowing(&text, ovs_megaflow, &megaflow)
                        || (ce_marked(pkt) && nw_proto_only(ovs_megaflow, &megaflow))
                        || l2)
            };
            if !ok {
                failures.push(format!(
                    "rules:\n{text}\npacket: {pkt}\n ovs: {} / {}\nours: {megaflow} / {actions}",
                    t["megaflow"], t["actions"]
                ));
            }
            n += 1;
        }
    }
    assert!(n >= at_least, "only {n} recorded traces");
    assert!(
        failures.is_empty(),
        "{} of {n} differ:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    (conj, hashes)
}
