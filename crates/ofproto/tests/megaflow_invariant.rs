//! The megaflow invariant, property-tested: every packet inside a megaflow
//! computed by the classifier (staged lookup, prefix and port tracking) gets
//! exactly the datapath actions that a straightforward linear scan of the
//! rules gives it.
//!
//! Rule sets are random: several tables chained by resubmit/goto_table,
//! random priorities, protocols, in_port, VLAN matches, CIDR and arbitrary
//! masks on addresses, arbitrary masks on ports, and actions that rewrite
//! fields, decrement the TTL and push/pop VLAN tags.

use flowpath_flow::field::FieldId;
use flowpath_flow::key::VLAN_CFI;
use flowpath_flow::{FlowKey, FlowMask, FLOW_WORDS};
use flowpath_ofproto::linear::LinearTables;
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::rule::Rule;
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::xlate;
use proptest::prelude::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
}

fn ip(r: &mut Rng) -> String {
    format!(
        "{}.{}.{}.{}",
        [7, 10, 192][r.below(3) as usize],
        r.below(4),
        r.below(4),
        r.below(256)
    )
}

fn rule_text(r: &mut Rng, table: u8, ntables: u8, prio: u16) -> String {
    let mut p: Vec<String> = vec![format!("table={table}"), format!("priority={prio}")];
    let proto = r.pick(&[
        "", "ip", "tcp", "udp", "tcp", "udp", "icmp", "arp", "ipv6", "tcp6", "udp6",
    ]);
    if !proto.is_empty() {
        p.push(proto.into());
    }
    if r.chance(25) {
        p.push(format!("in_port={}", 1 + r.below(4)));
    }
    match r.below(10) {
        0 => p.push(format!("dl_vlan={}", 1 + r.below(3))),
        1 => p.push("vlan_tci=0x1000/0x1000".into()),
        2 => p.push("dl_vlan=0xffff".into()),
        _ => {}
    }
    let v4 = matches!(proto, "ip" | "tcp" | "udp" | "icmp");
    if v4 {
        for f in ["nw_src", "nw_dst"] {
            match r.below(5) {
                0 | 1 => p.push(format!(
                    "{f}={}/{}",
                    ip(r),
                    [8, 16, 24, 28, 30, 32][r.below(6) as usize]
                )),
                2 => p.push(format!("{f}={}/255.{}.255.0", ip(r), r.below(256))),
                _ => {}
            }
        }
        if r.chance(10) {
            p.push(format!("nw_tos={}", r.below(4) * 4));
        }
        if r.chance(5) {
            p.push(format!("nw_ttl={}", [1, 64][r.below(2) as usize]));
        }
    }
    if matches!(proto, "tcp" | "udp" | "tcp6" | "udp6") {
        for f in ["tp_src", "tp_dst"] {
            match r.below(6) {
                0 | 1 => p.push(format!(
                    "{f}={}",
                    [22, 80, 90, 443, 1024, 5900][r.below(6) as usize]
                )),
                2 => {
                    let m = (0xffffu32 << r.below(16)) & 0xffff;
                    p.push(format!("{f}={:#x}/{m:#x}", r.below(65536) as u32 & m));
                }
                3 => {
                    let m = r.below(65536) as u32;
                    p.push(format!("{f}={:#x}/{m:#x}", r.below(65536) as u32 & m));
                }
                _ => {}
            }
        }
    }
    if proto == "icmp" && r.chance(50) {
        p.push(format!("icmp_type={}", [0, 3, 8][r.below(3) as usize]));
    }
    if proto == "arp" && r.chance(50) {
        p.push(format!("arp_op={}", 1 + r.below(2)));
    }
    if matches!(proto, "ipv6" | "tcp6" | "udp6") && r.chance(60) {
        p.push(format!(
            "ipv6_dst=2001:db8::{:x}/{}",
            r.below(16),
            [64, 120, 124, 128][r.below(4) as usize]
        ));
    }
    let mut acts: Vec<String> = Vec::new();
    for _ in 0..r.below(4) {
        let a = match r.below(16) {
            0..=5 => format!("output:{}", 1 + r.below(4)),
            6 if table + 1 < ntables => format!(
                "resubmit(,{})",
                table + 1 + r.below(u64::from(ntables - table - 1)) as u8
            ),
            7 if table + 1 < ntables => format!("resubmit({},{})", 1 + r.below(4), table + 1),
            8 if v4 => format!("mod_nw_dst:{}", ip(r)),
            9 if matches!(proto, "tcp" | "udp") => {
                format!("mod_tp_dst:{}", [80, 8080][r.below(2) as usize])
            }
            10 => format!("mod_dl_src:00:00:00:00:00:{:02x}", r.below(256)),
            11 if v4 || proto.starts_with("ipv6") || proto.ends_with('6') => "dec_ttl".into(),
            12 => format!("mod_vlan_vid:{}", 1 + r.below(9)),
            13 => "pop_vlan".into(),
            14 => "push_vlan:0x8100".into(),
            15 => "in_port".into(),
            _ => "all".into(),
        };
        acts.push(a);
    }
    if table + 1 < ntables && r.chance(15) {
        acts.push(format!("goto_table:{}", table + 1));
    }
    let a = if acts.is_empty() {
        "drop".to_string()
    } else {
        acts.join(",")
    };
    format!("{},actions={a}", p.join(","))
}

fn rule_set(r: &mut Rng) -> Vec<Rule> {
    let ntables = 1 + r.below(3) as u8;
    let mut lines = Vec::new();
    for t in 0..ntables {
        let n = 1 + r.below(10);
        // Distinct priorities within a table: ties are unspecified in OpenFlow.
        let mut prios: Vec<u16> = Vec::new();
        while (prios.len() as u64) < n {
            let p = r.below(65536) as u16;
            if !prios.contains(&p) {
                prios.push(p);
            }
        }
        for p in prios {
            lines.push(rule_text(r, t, ntables, p));
        }
    }
    let text = lines.join("\n");
    parse_rules(&text, None).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Makes a sampled key look like a packet the extractor could produce.
fn normalize(mut k: FlowKey) -> FlowKey {
    if k.vlan_tci() & VLAN_CFI == 0 {
        k.set_vlan_tci(0);
        k.set_vlan_tci_inner(0);
    } else if k.vlan_tci_inner() & VLAN_CFI == 0 {
        k.set_vlan_tci_inner(0);
    }
    // Fragment bits exist only for IP; later fragments carry no L4 header.
    if !k.is_ip_any() {
        k.set_nw_frag(0);
    } else if k.nw_frag() & 2 != 0 {
        k.set_nw_frag(3);
        k.set_tp_src(0);
        k.set_tp_dst(0);
        k.set_tcp_flags(0);
    }
    k
}

fn packet(r: &mut Rng, rules: &[Rule]) -> FlowKey {
    let mut k = FlowKey::zero();
    for w in k.w.iter_mut().take(14) {
        *w = r.next();
    }
    // Keep fields sensible where they steer the walk.
    if r.chance(70) && !rules.is_empty() {
        let rule = &rules[r.below(rules.len() as u64) as usize];
        k = FlowKey {
            w: std::array::from_fn(|i| {
                (rule.matching.key.w[i] & rule.matching.mask.w[i])
                    | (k.w[i] & !rule.matching.mask.w[i])
            }),
        };
    }
    if k.dl_type() & 0xff != 0 && r.chance(80) {
        k.set_dl_type([0x0800, 0x86dd, 0x0806, 0x0800][r.below(4) as usize]);
    }
    if r.chance(70) {
        k.set_nw_proto([6, 17, 1, 58, 132][r.below(5) as usize]);
    }
    k.set_in_port(1 + r.below(4) as u32);
    k.set_nw_frag([0, 0, 0, 1, 3][r.below(5) as usize]);
    k.set_nw_ttl([0, 1, 2, 64][r.below(4) as usize]);
    if r.chance(50) {
        k.set_vlan_tci(0);
    }
    k.w[14] = 0;
    k.w[15] = 0;
    normalize(k)
}

fn check(seed: u64, prefixes: &[FieldId]) -> Result<(), TestCaseError> {
    let mut r = Rng(seed | 1);
    let rules = rule_set(&mut r);
    let mut fast = RuleTables::new(rules.clone(), prefixes);
    fast.set_ports(vec![1, 2, 3, 4]);
    let mut slow = LinearTables::new(rules.clone());
    slow.set_ports(vec![1, 2, 3, 4]);
    for _ in 0..24 {
        let pkt = packet(&mut r, &rules);
        let x = xlate(&fast, &pkt, false);
        let reference = xlate(&slow, &pkt, false);
        prop_assert_eq!(
            &x.actions,
            &reference.actions,
            "classifier disagrees with linear scan for {:?}",
            pkt
        );
        let m: FlowMask = x.megaflow;
        for _ in 0..12 {
            let mut s = FlowKey::zero();
            for i in 0..FLOW_WORDS {
                s.w[i] = (pkt.w[i] & m.w[i]) | (r.next() & !m.w[i]);
            }
            s.w[14] = 0;
            s.w[15] = 0;
            let s = normalize(s);
            prop_assert!(s.eq_masked(&pkt, &m));
            let y = xlate(&slow, &s, false);
            let rules_text: Vec<String> = rules.iter().map(|r| r.to_string()).collect();
            prop_assert_eq!(
                &y.actions,
                &x.actions,
                "megaflow {} of {:?} admits {:?} which gets other actions; rules:\n{}",
                x.megaflow_text(&pkt),
                pkt,
                s,
                rules_text.join("\n")
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn megaflows_are_correct_with_default_prefixes(seed in any::<u64>()) {
        check(seed, &[FieldId::NwDst, FieldId::NwSrc])?;
    }

    #[test]
    fn megaflows_are_correct_without_prefix_tracking(seed in any::<u64>()) {
        check(seed, &[])?;
    }

    #[test]
    fn megaflows_are_correct_with_ipv6_prefixes(seed in any::<u64>()) {
        check(seed, &[FieldId::Ipv6Dst, FieldId::NwSrc, FieldId::NwDst])?;
    }
}
