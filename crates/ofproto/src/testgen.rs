//! Random rule sets and packet keys for property tests.
//!
//! Shared by the megaflow-invariant tests of this crate and the datapath's
//! differential tests, so both exercise the same rule shapes: several tables
//! chained by resubmit and goto_table, random priorities (distinct within a
//! table: OpenFlow leaves ties unspecified), protocols, in_port, VLAN and
//! masked MAC matches, CIDR and arbitrary masks on addresses and ports, and
//! actions that rewrite fields (ARP and ICMP ones too), decrement the TTL,
//! push/pop VLAN tags, go to the controller (with options, or pausing) or
//! loop (translation then fails); `output:REG`, `clone(...)`, OpenFlow
//! 1.3's `vlan_vid`; registers, metadata
//! and the packet mark matched, loaded, moved from and into packet fields;
//! conjunctive matches (`conjunction(id,k/2)` flows and their `conj_id`
//! flow). [`ct_rule_set`] makes connection-tracking pipelines, and
//! [`random_ct`] gives a key a tracker's fields.
//!
//! Deterministic for a seed; not for production use.

use crate::parse::parse_rules;
use crate::rule::Rule;
use flowpath_flow::key::VLAN_CFI;
use flowpath_flow::FlowKey;

/// A small xorshift generator (seeded by the property test framework).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// True with probability `pct` %.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    /// One of `xs` (non-empty).
    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// A random IPv4 address from a small space (so rules and packets meet).
pub fn ip(r: &mut Rng) -> String {
    format!(
        "{}.{}.{}.{}",
        [7, 10, 192][r.below(3) as usize],
        r.below(3),
        r.below(3),
        r.below(8)
    )
}

/// One random rule of `table` (of `ntables`) in ovs-ofctl syntax.
pub fn rule_text(r: &mut Rng, table: u8, ntables: u8, prio: u16) -> String {
    let mut p: Vec<String> = vec![format!("table={table}"), format!("priority={prio}")];
    let proto = r.pick(&[
        "", "ip", "tcp", "udp", "tcp", "udp", "icmp", "arp", "ipv6", "tcp6", "udp6", "sctp", "mpls",
    ]);
    if !proto.is_empty() {
        p.push(proto.into());
    }
    if proto == "mpls" {
        for (f, n) in [("mpls_label", 4), ("mpls_bos", 2), ("mpls_tc", 2)] {
            if r.chance(40) {
                p.push(format!("{f}={}", r.below(n)));
            }
        }
    }
    if r.chance(25) {
        p.push(format!("in_port={}", 1 + r.below(3)));
    }
    match r.below(12) {
        0 => p.push(format!("dl_vlan={}", 1 + r.below(3))),
        1 => p.push("vlan_tci=0x1000/0x1000".into()),
        2 => p.push("dl_vlan=0xffff".into()),
        // OpenFlow 1.3's vlan_vid: no tag, a VID with the present bit.
        10 => p.push("vlan_vid=0".into()),
        11 => p.push(format!("vlan_vid={}", 0x1001 + r.below(3))),
        3 => p.push(format!(
            "dl_dst=02:00:00:00:00:{:02x}/ff:ff:ff:ff:ff:fe",
            r.below(4)
        )),
        _ => {}
    }
    let v4 = matches!(proto, "ip" | "tcp" | "udp" | "icmp" | "sctp");
    if v4 {
        for f in ["nw_src", "nw_dst"] {
            match r.below(5) {
                0 | 1 => p.push(format!(
                    "{f}={}/{}",
                    ip(r),
                    [8, 16, 24, 30, 32][r.below(5) as usize]
                )),
                2 => p.push(format!("{f}={}/255.{}.255.0", ip(r), r.below(256))),
                _ => {}
            }
        }
        if r.chance(10) {
            p.push(format!("nw_tos={}", r.below(4) * 4));
        }
        if r.chance(8) {
            p.push(format!("nw_ttl={}", [1, 64][r.below(2) as usize]));
        }
    }
    if matches!(proto, "tcp" | "udp" | "tcp6" | "udp6" | "sctp") {
        for f in ["tp_src", "tp_dst"] {
            match r.below(6) {
                0 | 1 => p.push(format!("{f}={}", [22, 80, 443, 1024][r.below(4) as usize])),
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
    if matches!(proto, "ipv6" | "tcp6" | "udp6") && r.chance(60) {
        p.push(format!(
            "ipv6_dst=2001:db8::{:x}/{}",
            r.below(8),
            [64, 124, 128][r.below(3) as usize]
        ));
    }
    // Registers, metadata and the packet mark (values from a small space,
    // so that the actions below make them match).
    if r.chance(25) {
        p.push(match r.below(6) {
            0 => format!("reg0={}", r.below(4)),
            1 => format!("reg1={:#x}/0x3", r.below(4)),
            2 => format!("metadata={:#x}/0xf", r.below(4)),
            3 => format!("pkt_mark={}", r.below(2)),
            4 => format!("tun_id={}", r.below(3)),
            _ => format!("xreg1={}", r.below(3)),
        });
    }
    let acts = random_actions(r, table, ntables, proto);
    let a = if acts.is_empty() {
        "drop".to_string()
    } else {
        acts.join(",")
    };
    format!("{},actions={a}", p.join(","))
}

/// The actions of a random rule of `table` matching `proto` (the rest of
/// [`rule_text`], drawn in the same order).
fn random_actions(r: &mut Rng, table: u8, ntables: u8, proto: &str) -> Vec<String> {
    let v4 = matches!(proto, "ip" | "tcp" | "udp" | "icmp" | "sctp");
    let v6 = matches!(proto, "ipv6" | "tcp6" | "udp6");
    let mut acts: Vec<String> = Vec::new();
    // Register actions: packet bits into registers and back.
    for _ in 0..r.below(3) {
        acts.push(match r.below(8) {
            0 => format!("load:{}->NXM_NX_REG0[]", r.below(4)),
            1 => "move:NXM_OF_IN_PORT[0..1]->NXM_NX_REG0[0..1]".into(),
            2 => "move:NXM_OF_ETH_DST[0..1]->NXM_NX_REG1[0..1]".into(),
            3 if v4 => "move:NXM_OF_IP_SRC[0..2]->OXM_OF_METADATA[0..2]".into(),
            4 if r.chance(30) => format!("set_tunnel:{}", r.below(3)),
            4 => format!("set_field:{}->pkt_mark", r.below(3)),
            5 if r.chance(50) => "push:NXM_NX_REG0[0..15],pop:NXM_NX_REG3[0..15]".into(),
            5 if r.chance(50) => format!(
                "multipath({},0,{},{},0,NXM_NX_REG0[0..1])",
                ["eth_src", "symmetric_l4", "nw_src", "symmetric_l3l4+udp"][r.below(4) as usize],
                ["modulo_n", "hash_threshold", "hrw", "iter_hash"][r.below(4) as usize],
                1 + r.below(4)
            ),
            5 => format!(
                "bundle_load(symmetric_l3,0,{},ofport,NXM_NX_REG0[],members:7,{},{})",
                ["hrw", "active_backup"][r.below(2) as usize],
                1 + r.below(4),
                1 + r.below(4)
            ),
            6 => "move:NXM_NX_REG1[0..7]->NXM_OF_ETH_SRC[0..7]".into(),
            7 if r.chance(40) => format!(
                "learn(table={},NXM_OF_ETH_SRC[],NXM_NX_REG1[0..15]=NXM_OF_VLAN_TCI[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15],output:NXM_OF_IN_PORT[])",
                r.below(3)
            ),
            _ => format!("load:{}->NXM_NX_REG3[0..1]", r.below(4)),
        });
    }
    for _ in 0..r.below(4) {
        let a = match r.below(23) {
            0..=4 => format!("output:{}", 1 + r.below(4)),
            5 if r.chance(50) => "NORMAL".into(),
            5 if r.chance(70) => format!("group:{}", 1 + r.below(4)),
            5 => format!(
                "bundle({},0,{},ofport,members:7,{},{})",
                [
                    "eth_src",
                    "symmetric_l4",
                    "symmetric_l3l4+udp",
                    "nw_src",
                    "symmetric_l3"
                ][r.below(5) as usize],
                ["hrw", "active_backup"][r.below(2) as usize],
                1 + r.below(4),
                1 + r.below(4)
            ),
            6 if table + 1 < ntables => {
                format!(
                    "resubmit(,{})",
                    table + 1 + r.below(u64::from(ntables - table - 1)) as u8
                )
            }
            7 if table + 1 < ntables => format!("resubmit({},{})", 1 + r.below(3), table + 1),
            8 if v4 => format!("mod_nw_dst:{}", ip(r)),
            9 if v4 => format!("mod_nw_src:{}", ip(r)),
            10 if matches!(proto, "tcp" | "udp" | "sctp" | "tcp6" | "udp6") => {
                format!("mod_tp_dst:{}", [80, 8080][r.below(2) as usize])
            }
            11 => format!("mod_dl_src:00:00:00:00:00:{:02x}", r.below(256)),
            12 if v4 || v6 => "dec_ttl".into(),
            13 => format!("mod_vlan_vid:{}", 1 + r.below(9)),
            14 => "strip_vlan".into(),
            15 => "push_vlan:0x8100".into(),
            16 if v6 => format!("set_field:2001:db8::{:x}->ipv6_src", r.below(8)),
            17 if v4 => format!("mod_nw_tos:{}", r.below(64) * 4),
            18 if r.chance(20) => "controller".into(),
            // A loop: translation fails when it is reached.
            19 if r.chance(15) => format!("resubmit(,{table})"),
            // ARP and ICMP rewrites (a responder's).
            20 if proto == "arp" => format!(
                "set_field:2->arp_op,move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:{}->arp_spa",
                ip(r)
            ),
            21 if proto == "icmp" => {
                format!("set_field:{}->icmp_type", [0, 3][r.below(2) as usize])
            }
            22 if proto == "arp" => "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[]".into(),
            _ => "in_port".into(),
        };
        acts.push(a);
    }
    // The port a field holds (the destination MAC's low bits, a constant).
    if r.chance(8) {
        acts.push(if r.chance(50) {
            "move:NXM_OF_ETH_DST[0..1]->NXM_NX_REG2[0..1],output:NXM_NX_REG2[0..15]".into()
        } else {
            format!(
                "load:{}->NXM_NX_REG2[16..31],output:NXM_NX_REG2[16..31]",
                1 + r.below(4)
            )
        });
    }
    // A VLAN tag made and written through OpenFlow 1.3's vlan_vid.
    if r.chance(6) {
        acts.push(format!(
            "push_vlan:0x8100,set_field:{}->vlan_vid",
            0x1001 + r.below(3)
        ));
    }
    // Packet-ins with options, a pause, samples (which sample when the
    // bridge has collector sets).
    if r.chance(6) {
        let a = match r.below(5) {
            0 => "controller(reason=no_match,id=2)",
            1 => "controller(max_len=64,userdata=01.02)",
            2 => "controller(pause)",
            3 => "sample(probability=65535,collector_set_id=1,obs_domain_id=2,obs_point_id=3,sampling_port=2,egress)",
            _ => "sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3)",
        };
        let at = r.below(acts.len() as u64 + 1) as usize;
        acts.insert(at, a.into());
    }
    // A clone around some of the actions: their changes do not leak.
    if !acts.is_empty() && r.chance(12) {
        let i = r.below(acts.len() as u64) as usize;
        let j = i + 1 + r.below((acts.len() - i) as u64) as usize;
        let body = acts[i..j].join(",");
        acts.splice(i..j, [format!("clone({body})")]);
    }
    // check_pkt_larger: what follows it runs in both branches, with a bit
    // of reg1 (which matches above read) set or clear.
    if r.chance(10) {
        let at = r.below(acts.len() as u64 + 1) as usize;
        acts.insert(
            at,
            format!(
                "check_pkt_larger({})->NXM_NX_REG1[{}]",
                [64, 200][r.below(2) as usize],
                r.below(2)
            ),
        );
    }
    // OpenFlow 1.1+ instructions, in their order.
    if r.chance(8) {
        acts.push("clear_actions".into());
    }
    if r.chance(12) {
        let w = match r.below(4) {
            0 => format!("output:{}", 1 + r.below(4)),
            1 => format!(
                "mod_dl_src:00:00:00:00:00:{:02x},output:{}",
                r.below(256),
                1 + r.below(4)
            ),
            2 => "strip_vlan,NORMAL".into(),
            _ => format!("dec_ttl,output:{}", 1 + r.below(4)),
        };
        acts.push(format!("write_actions({w})"));
    }
    if r.chance(8) {
        acts.push(format!("write_metadata:{:#x}/0xf", r.below(4)));
    }
    if table + 1 < ntables && r.chance(15) {
        acts.push(format!("goto_table:{}", table + 1));
    }
    acts
}

/// The group table the generated rule sets' `group:1` .. `group:4` use:
/// an `all` (one bucket through group 2: a freeze inside a bucket), a
/// `select` by the datapath hash (OVS's default: recirculation), a
/// `select` on chosen fields and a fast-failover group whose first bucket
/// watches a port that is not on the bridge.
pub const GROUPS: &str = "group_id=1,type=all,bucket=output:1,bucket=mod_dl_src:00:00:00:00:00:09,output:2,bucket=dec_ttl,output:3,bucket=group:2\n\
group_id=2,type=select,bucket=output:2,bucket=mod_nw_src:9.9.9.9,output:3,bucket=weight:5,output:4\n\
group_id=3,type=select,selection_method=hash,fields(ip_dst,tcp_dst),bucket=output:1,bucket=output:4\n\
group_id=4,type=ff,bucket=watch_port:9,output:9,bucket=watch_port:3,strip_vlan,output:3,bucket=output:2";

/// A random rule set of 1–3 tables with distinct priorities per table,
/// parsed, with its text.
pub fn rule_set(r: &mut Rng) -> (Vec<Rule>, String) {
    let ntables = 1 + r.below(3) as u8;
    let mut lines = Vec::new();
    for t in 0..ntables {
        let n = 1 + r.below(10);
        // Distinct priorities within a table: ties are unspecified.
        let mut prios: Vec<u16> = Vec::new();
        while (prios.len() as u64) < n {
            let p = r.below(65536) as u16;
            if !prios.contains(&p) {
                prios.push(p);
            }
        }
        for &p in &prios {
            lines.push(rule_text(r, t, ntables, p));
        }
        // A conjunctive match: two dimensions at a priority of their own,
        // and (usually) its conj_id flow.
        if r.chance(30) {
            let mut unused = || loop {
                let p = r.below(65536) as u16;
                if !prios.contains(&p) {
                    prios.push(p);
                    return p;
                }
            };
            let (p, idp) = (unused(), unused());
            let id = 1 + u32::from(t);
            for _ in 0..1 + r.below(2) {
                let m = format!("ip,nw_src={}/{}", ip(r), [24, 32][r.below(2) as usize]);
                lines.push(format!(
                    "table={t},priority={p},{m},actions=conjunction({id},1/2)"
                ));
            }
            for _ in 0..1 + r.below(2) {
                let m = match r.below(3) {
                    0 => format!("tcp,tp_dst={}", [22, 80, 443, 1024][r.below(4) as usize]),
                    1 => format!("in_port={}", 1 + r.below(3)),
                    _ => format!("ip,nw_dst={}/16", ip(r)),
                };
                lines.push(format!(
                    "table={t},priority={p},{m},actions=conjunction({id},2/2)"
                ));
            }
            if r.chance(85) {
                lines.push(format!(
                    "table={t},priority={idp},conj_id={id},actions=output:{}",
                    1 + r.below(4)
                ));
            }
        }
    }
    let text = lines.join("\n");
    let rules = parse_rules(&text, None).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (rules, text)
}

/// Makes a random key look like one the extractor produces: no TCI bits
/// for absent tags, 8-bit ICMP type and code, no fragment bits outside IP,
/// no L4 fields in later fragments, no priority, mark, recirculation id,
/// datapath hash or connection-tracking fields (a received packet is
/// untracked; [`with_ct_of`] puts a tracker's back).
pub fn normalize(mut k: FlowKey) -> FlowKey {
    k = with_ct_of(&FlowKey::zero(), k);
    // No datapath metadata (skb_priority, pkt_mark, recirc_id, dp_hash)
    // on a received packet.
    k.w[flowpath_flow::key::W_META2] = 0;
    k.set_recirc_id(0);
    k.set_dp_hash(0);
    if k.vlan_tci() & VLAN_CFI == 0 {
        k.set_vlan_tci(0);
        k.set_vlan_tci_inner(0);
    } else if k.vlan_tci_inner() & VLAN_CFI == 0 {
        k.set_vlan_tci_inner(0);
    }
    // As a datapath key: tunnel metadata only with a tunnel destination
    // (a packet that matched a rule's tun_id came through a tunnel).
    if !k.tunnel_is_zero() && !k.has_tunnel() {
        k.set_tun_src(0xac1f_0101);
        k.set_tun_dst(0xac1f_0164);
    }
    if matches!(k.dl_type(), 0x8847 | 0x8848) {
        // MPLS: the label stack entries, nothing of L3 or L4.
        let mpls = k.w[flowpath_flow::key::W_MPLS];
        let lse2 = k.mpls_lse2();
        for w in 1..15 {
            if w != flowpath_flow::key::W_L2_DST && w != flowpath_flow::key::W_L2_SRC {
                k.w[w] = 0;
            }
        }
        k.set_nw_proto(0);
        k.set_nw_frag(0);
        k.w[flowpath_flow::key::W_MPLS] = mpls;
        // As extracted: entries stop at the bottom of the stack.
        if k.mpls_lse0() & 0x100 != 0 {
            k.set_mpls_lse1(0);
        } else if k.mpls_lse1() & 0x100 == 0 {
            k.set_mpls_lse2(lse2);
        }
        return k;
    }
    k.w[flowpath_flow::key::W_MPLS] = 0;
    k.set_mpls_lse2(0);
    // ICMP type and code are 8 bits: the transport port fields' high bytes
    // are 0.
    if matches!((k.dl_type(), k.nw_proto()), (0x0800, 1) | (0x86dd, 58)) {
        k.set_tp_src(k.tp_src() & 0xff);
        k.set_tp_dst(k.tp_dst() & 0xff);
    }
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

/// A random packet key, usually inside one of `rules`' matches.
pub fn packet(r: &mut Rng, rules: &[Rule]) -> FlowKey {
    let mut k = FlowKey::zero();
    for w in k.w.iter_mut().take(14) {
        *w = r.next_u64();
    }
    if r.chance(70) && !rules.is_empty() {
        let rule = &rules[r.below(rules.len() as u64) as usize];
        k = FlowKey {
            w: std::array::from_fn(|i| {
                (rule.matching.key.w[i] & rule.matching.mask.w[i])
                    | (k.w[i] & !rule.matching.mask.w[i])
            }),
        };
    }
    if r.chance(85) {
        k.set_dl_type([0x0800, 0x86dd, 0x0806, 0x0800, 0x8847][r.below(5) as usize]);
    }
    if r.chance(50) {
        // A small label space, so that MPLS rules match.
        // Entries are never all zero: OVS counts a stack's labels by the
        // bottom-of-stack bits it makes significant and by whether each
        // entry is zero, which its megaflow (and flowpath's, the same)
        // does not pin; an all-zero entry above the bottom is the one case
        // where two packets of one megaflow count differently.
        let lse = |r: &mut Rng| ((r.below(4) << 12) | r.below(0x200)).max(1) as u32;
        k.set_mpls_lse0(lse(r));
        // Deeper stacks: a second and third entry.
        if r.chance(40) {
            k.set_mpls_lse1(lse(r));
            k.set_mpls_lse2(lse(r));
        }
    }
    if r.chance(80) {
        k.set_nw_proto([6, 17, 1, 58, 132][r.below(5) as usize]);
    }
    k.set_in_port(1 + r.below(3) as u32);
    k.set_nw_frag([0, 0, 0, 0, 1, 3][r.below(6) as usize]);
    k.set_nw_ttl([0, 1, 2, 64][r.below(4) as usize]);
    if r.chance(60) {
        k.set_vlan_tci(0);
    }
    k.set_dl_dst(0x0200_0000_0000 | r.below(4));
    if r.chance(50) {
        k.set_nw_src(0x0a00_0000 | r.below(8) as u32);
        k.set_nw_dst(0x0700_0000 | r.below(8) as u32);
        k.set_tp_dst([22, 80, 443, 1024][r.below(4) as usize]);
    }
    normalize(k)
}

/// `ct_state` matches of firewall pipelines (masked flag sets).
const CT_STATES: [&str; 12] = [
    "+trk+est-rel",
    "+trk+new",
    "+trk+inv",
    "-new+rpl",
    "+trk+est",
    "+trk+est+rpl",
    "+trk+rel",
    "+trk",
    "-trk",
    "+trk+snat",
    "+trk-new+dnat",
    "+est-inv",
];

/// A `ct(...)` for a rule matching `proto` (an IP protocol): commit or
/// not, a zone (a number or REG6's bits), `exec` writes to `ct_mark` and
/// `ct_label`, NAT, with `table` a later table of `ntables`.
fn ct_action(r: &mut Rng, proto: &str, table: u8, ntables: u8, commit: bool) -> String {
    let v6 = matches!(proto, "ipv6" | "tcp6" | "udp6");
    let mut p: Vec<String> = Vec::new();
    if commit {
        p.push("commit".into());
        if r.chance(10) {
            p.push("force".into());
        }
    }
    match r.below(5) {
        0 => p.push(format!("zone={}", [1, 5, 0xffff][r.below(3) as usize])),
        1 => p.push("zone=NXM_NX_REG6[0..15]".into()),
        _ => {}
    }
    if table + 1 < ntables && r.chance(40) {
        p.push(format!(
            "table={}",
            table + 1 + r.below(u64::from(ntables - table - 1)) as u8
        ));
    }
    if commit && r.chance(50) {
        p.push(format!(
            "exec({})",
            r.pick(&[
                "set_field:0x1->ct_mark",
                "set_field:0x2/0x3->ct_mark",
                "load:0x1->NXM_NX_CT_MARK[4..7]",
                "set_field:0x1/0x1->ct_label",
                "load:0x5->NXM_NX_CT_LABEL[64..66]",
                "set_field:0x1->ct_mark,set_field:0x10000->ct_label",
            ])
        ));
    }
    if r.chance(40) {
        if !commit || r.chance(40) {
            p.push("nat".into());
        } else if v6 {
            p.push(
                r.pick(&["nat(src=[fd00::1])", "nat(dst=[fd00::2]-[fd00::5]:80)"])
                    .into(),
            );
        } else {
            p.push(
                r.pick(&[
                    "nat(src=10.9.0.1-10.9.0.5)",
                    "nat(dst=10.9.0.2:80)",
                    "nat(src=10.9.0.1:1000-2000,random)",
                ])
                .into(),
            );
        }
    }
    if commit && matches!(proto, "tcp" | "tcp6") && r.chance(15) {
        p.push("alg=ftp".into());
    }
    if p.is_empty() {
        "ct".into()
    } else {
        format!("ct({})", p.join(","))
    }
}

/// A random connection-tracking rule set: table 0 sends untracked IP
/// through `ct(table=1)` (a zone given or loaded into REG6 per port, NAT),
/// later tables match `ct_state` (masked), `ct_mark`, `ct_label`,
/// `ct_zone` and the original tuple, and commit (`exec`, NAT, ALG),
/// recirculate, clear (`ct_clear`), read `ct_mark` into a register,
/// rewrite, resubmit and output; some rules of [`rule_text`] among them.
/// Parsed, with its text.
pub fn ct_rule_set(r: &mut Rng) -> (Vec<Rule>, String) {
    let ntables = 2 + r.below(3) as u8;
    let mut lines = Vec::new();
    for (proto, prio) in [("ip", 100), ("ipv6", 101)] {
        if r.chance(85) {
            let a = ct_action(r, proto, 0, 2, false);
            let a = if a.contains("table=") {
                a
            } else if a == "ct" {
                "ct(table=1)".into()
            } else {
                a.replacen("ct(", "ct(table=1,", 1)
            };
            lines.push(format!(
                "table=0,priority={prio},{proto},ct_state=-trk,actions={a}"
            ));
        }
    }
    for port in 1..=3 {
        if r.chance(30) {
            lines.push(format!(
                "table=0,priority={},in_port={port},ip,ct_state=-trk,actions=load:{}->NXM_NX_REG6[0..15],ct(table=1,zone=NXM_NX_REG6[0..15])",
                110 + port,
                1 + r.below(7)
            ));
        }
    }
    lines.push(format!(
        "table=0,priority=0,actions={}",
        r.pick(&["resubmit(,1)", "drop", "output:4"])
    ));
    for t in 1..ntables {
        let mut prios: Vec<u16> = Vec::new();
        for _ in 0..2 + r.below(7) {
            let prio = loop {
                let p = 1 + r.below(1000) as u16;
                if !prios.contains(&p) {
                    prios.push(p);
                    break p;
                }
            };
            if r.chance(15) {
                lines.push(rule_text(r, t, ntables, prio));
                continue;
            }
            let proto = r.pick(&["ip", "tcp", "udp", "icmp", "ipv6", "tcp6", "udp6", ""]);
            let mut m: Vec<String> = vec![format!("table={t}"), format!("priority={prio}")];
            if !proto.is_empty() {
                m.push(proto.into());
            }
            if r.chance(25) {
                m.push(format!("in_port={}", 1 + r.below(3)));
            }
            let state = r.pick(&CT_STATES);
            let tuple = !proto.is_empty() && r.chance(20);
            if tuple {
                m.push("ct_state=+trk+est".into());
                if proto.ends_with('6') {
                    m.push(format!("ct_ipv6_dst=fd00::{}", r.below(3)));
                } else {
                    m.push(
                        r.pick(&[
                            "ct_nw_dst=10.0.0.1",
                            "ct_nw_src=10.0.0.0/24",
                            "ct_nw_dst=10.9.0.0/16",
                        ])
                        .into(),
                    );
                }
                if r.chance(50) {
                    m.push("ct_nw_proto=6".into());
                    if r.chance(50) {
                        m.push(format!("ct_tp_dst={}", [22, 80][r.below(2) as usize]));
                    }
                }
            } else if r.chance(85) {
                m.push(format!("ct_state={state}"));
            }
            if r.chance(25) {
                m.push(format!(
                    "ct_mark={}",
                    r.pick(&["0", "1", "2", "0x1/0x1", "0x2/0x3", "0x10/0xf0"])
                ));
            }
            if r.chance(20) {
                m.push(format!(
                    "ct_label={}",
                    r.pick(&[
                        "0",
                        "0x1",
                        "0x1/0x1",
                        "0x10000/0xffff0000",
                        "0x50000000000000000/0x70000000000000000"
                    ])
                ));
            }
            if r.chance(20) {
                m.push(format!("ct_zone={}", [0, 1, 5][r.below(3) as usize]));
            }
            if r.chance(15) {
                m.push(format!("reg0={}", r.below(3)));
            }
            let inv = m.iter().any(|x| x.contains("+inv"));
            let mut acts: Vec<String> = Vec::new();
            for _ in 0..1 + r.below(4) {
                match r.below(10) {
                    0..=2 if !proto.is_empty() => {
                        let commit = !inv && r.chance(70);
                        acts.push(ct_action(r, proto, t, ntables, commit));
                    }
                    3 => acts.push("ct_clear".into()),
                    4 => acts.push("move:NXM_NX_CT_MARK[]->NXM_NX_REG0[]".into()),
                    5 if t + 1 < ntables => acts.push(format!(
                        "resubmit(,{})",
                        t + 1 + r.below(u64::from(ntables - t - 1)) as u8
                    )),
                    6 => acts.push(format!("load:{}->NXM_NX_REG6[0..15]", r.below(6))),
                    7 if matches!(proto, "ip" | "tcp" | "udp" | "icmp") => {
                        acts.push(format!("mod_nw_dst:10.0.0.{}", r.below(4)))
                    }
                    _ => acts.push(format!("output:{}", 1 + r.below(4))),
                }
            }
            lines.push(format!("{},actions={}", m.join(","), acts.join(",")));
        }
    }
    let text = lines.join("\n");
    let rules = parse_rules(&text, None).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (rules, text)
}

/// Sets `k`'s connection-tracking fields to random values from small
/// spaces (so that [`ct_rule_set`]'s matches meet them): a state, zone,
/// mark, label and original tuple, as the tracker gives a recirculated
/// packet.
pub fn random_ct(r: &mut Rng, k: &mut FlowKey) {
    k.set_ct_state(match r.below(4) {
        0 => r.next_u64() as u8,
        _ => [0x21, 0x22, 0x2a, 0x24, 0x30, 0x61, 0xa2, 0x20][r.below(8) as usize],
    });
    k.set_ct_zone([0, 1, 5, 7][r.below(4) as usize]);
    k.set_ct_mark([0, 1, 2, 3, 0x10, 0x12][r.below(6) as usize]);
    k.set_ct_label([0, 1, 0x10000, 0x5_0000_0000_0000_0000][r.below(4) as usize]);
    k.set_ct_nw_proto([0, 6, 17][r.below(3) as usize]);
    k.set_ct_nw_src(0x0a00_0000 | r.below(4) as u32);
    k.set_ct_nw_dst([0x0a00_0001, 0x0a09_0002, 0x0700_0001][r.below(3) as usize]);
    k.set_ct_ipv6_dst(0xfd00 << 112 | u128::from(r.below(3) as u8));
    k.set_ct_tp_dst([22, 80, 443][r.below(3) as usize]);
}

/// `k` with the connection-tracking fields of `from`.
pub fn with_ct_of(from: &FlowKey, mut k: FlowKey) -> FlowKey {
    k.set_ct_state(from.ct_state());
    k.set_ct_zone(from.ct_zone());
    k.set_ct_mark(from.ct_mark());
    k.set_ct_label(from.ct_label());
    k.set_ct_nw_proto(from.ct_nw_proto());
    k.set_ct_nw_src(from.ct_nw_src());
    k.set_ct_nw_dst(from.ct_nw_dst());
    k.set_ct_ipv6_src(from.ct_ipv6_src());
    k.set_ct_ipv6_dst(from.ct_ipv6_dst());
    k.set_ct_tp_src(from.ct_tp_src());
    k.set_ct_tp_dst(from.ct_tp_dst());
    k
}
