//! Flow syntax, end to end through the public API: a broad table of rules
//! that must print canonically and read back equal, and one test per class
//! of bad input, checking that the error names the line and the field.

use flowpath_ofproto::action::Action;
use flowpath_ofproto::parse::{parse_match, parse_rule, parse_rules};
use flowpath_ofproto::rule::{Rule, RuleError};

fn parse(text: &str) -> Rule {
    parse_rule(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// parse → print → parse gives an equal rule, and printing is stable.
fn round_trip(text: &str) -> String {
    let r = parse(text);
    let printed = r.to_string();
    let again =
        parse_rule(&printed).unwrap_or_else(|e| panic!("{text:?} printed as {printed:?}: {e}"));
    assert_eq!(r, again, "{text:?} printed as {printed:?}");
    assert_eq!(again.to_string(), printed);
    printed
}

#[test]
fn nmap_rules_round_trip() {
    assert_eq!(
        round_trip("priority=65535,tcp,tp_dst=90,actions=drop"),
        "priority=65535,tcp,tp_dst=90 actions=drop"
    );
    assert_eq!(
        round_trip("priority=0,actions=output:2"),
        "priority=0 actions=output:2"
    );
    assert_eq!(
        round_trip("priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=90,actions=output:2"),
        "priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=90 actions=output:2"
    );
}

#[test]
fn canonical_forms() {
    let cases: &[(&str, &str)] = &[
        (
            "table=1,priority=100,tcp,nw_src=10.0.0.0/8,tp_dst=80,actions=output:2",
            "table=1, priority=100,tcp,nw_src=10.0.0.0/8,tp_dst=80 actions=output:2",
        ),
        (
            "tp_dst=80 tcp nw_src=10.1.2.3/8 priority=100 table=1 actions=2",
            "table=1, priority=100,tcp,nw_src=10.0.0.0/8,tp_dst=80 actions=output:2",
        ),
        (
            "hard_timeout=20,idle_timeout=10,cookie=31,ip,actions=drop",
            "cookie=0x1f, idle_timeout=10, hard_timeout=20, priority=32768,ip actions=drop",
        ),
        ("actions=", "priority=32768 actions=drop"),
        ("dl_type=0x0800,nw_proto=6 actions=1", "priority=32768,tcp actions=output:1"),
        ("dl_type=0x88cc actions=CONTROLLER", "priority=32768,dl_type=0x88cc actions=CONTROLLER:65535"),
        (
            "in_port=LOCAL,eth_src=00:0A:E4:25:6B:B0,actions=in_port",
            "priority=32768,in_port=65534,dl_src=00:0a:e4:25:6b:b0 actions=IN_PORT",
        ),
        ("vlan_vid=4106,vlan_pcp=3 actions=strip_vlan,flood", "priority=32768,dl_vlan=10,dl_vlan_pcp=3 actions=pop_vlan,FLOOD"),
        (
            "dl_vlan=0xffff actions=push_vlan:0x8100,mod_vlan_vid:10,all",
            "priority=32768,vlan_tci=0x0000 actions=push_vlan:0x8100,mod_vlan_vid:10,ALL",
        ),
        (
            "udp6,ipv6_src=2001:db8::1/32,udp_dst=53 actions=resubmit(,2)",
            "priority=32768,udp6,ipv6_src=2001:db8::/32,tp_dst=53 actions=resubmit(,2)",
        ),
        (
            "icmp,icmp_type=8,icmp_code=0,actions=mod_nw_dst:1.2.3.4,mod_nw_tos:32,output:1",
            "priority=32768,icmp,icmp_type=8,icmp_code=0 actions=mod_nw_dst:1.2.3.4,mod_nw_tos:32,output:1",
        ),
        (
            "tcp,tcp_flags=+syn-ack,nw_frag=no actions=set_field:10.0.0.1->nw_src,mod_tp_dst:80,dec_ttl",
            "priority=32768,tcp,nw_frag=no,tcp_flags=+syn-ack actions=set_field:10.0.0.1->nw_src,mod_tp_dst:80,dec_ttl",
        ),
        (
            "arp,arp_op=1,arp_tpa=10.0.0.1 actions=LOCAL",
            "priority=32768,arp,arp_tpa=10.0.0.1,arp_op=1 actions=LOCAL",
        ),
        (
            "table=2 ip actions=resubmit:3,resubmit(3,4),resubmit(4),goto_table:5",
            "table=2, priority=32768,ip actions=resubmit:3,resubmit(3,4),resubmit:4,goto_table:5",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(&round_trip(input), want, "{input}");
    }
}

#[test]
fn broad_table_round_trips() {
    let rules = [
        "priority=1,in_port=3,actions=output:4",
        "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
        "dl_src=00:11:22:33:44:55,dl_dst=66:77:88:99:aa:bb,dl_type=0x0806,actions=flood",
        "vlan_tci=0x1000/0x1000,actions=pop_vlan,output:1",
        "vlan_tci=0x0000,actions=push_vlan:0x88a8,mod_vlan_pcp:5,output:2",
        "ip,nw_src=192.168.0.0/255.255.0.255,nw_dst=10.0.0.1,nw_proto=47,actions=output:1",
        "ip,nw_tos=32,nw_ecn=1,nw_ttl=64,ip_frag=first,actions=dec_ttl,output:1",
        "ip,ip_dscp=8,actions=set_field:16->ip_dscp,output:1",
        "tcp,tp_src=0x400/0xfc00,tp_dst=443,actions=mod_tp_src:1000,output:1",
        "udp,udp_src=53,actions=set_field:0x40/0xffc0->udp_src,output:2",
        "sctp,sctp_dst=9,actions=set_field:7->sctp_dst,output:3",
        "tcp6,ipv6_dst=fe80::/10,ipv6_label=0x12345,actions=set_field:::1->ipv6_dst,output:1",
        "icmp6,icmpv6_type=135,nd_target=2001:db8::1,nd_sll=00:00:00:00:00:01,actions=output:1",
        "icmp6,icmp_type=136,nd_tll=00:00:00:00:00:02,actions=output:1",
        "rarp,arp_sha=00:00:00:00:00:01,arp_tha=ff:ff:ff:ff:ff:ff,actions=output:1",
        "arp,nw_src=10.0.0.1,nw_dst=10.0.0.2/24,actions=mod_nw_src:10.0.0.9,output:1",
        "tcp,tcp_flags=syn|ack,actions=controller:128",
        "tcp,tcp_flags=0x002/0x002,actions=controller(max_len=64)",
        "ip,nw_frag=later,actions=drop",
        "ip,nw_frag=not_later,actions=drop",
        "eth,actions=ALL",
        "ipv6,actions=set_field:0x1/0xf->ipv6_label,output:1",
        "cookie=0xffffffffffffffff,table=254,priority=65535,actions=resubmit:IN_PORT",
        "table=3,actions=resubmit(LOCAL,1),output:65279",
        "dl_vlan=4095,actions=mod_vlan_vid:4095,set_field:3->dl_vlan_pcp,set_field:4106->vlan_vid,output:1",
        "actions=mod_dl_src:00:00:00:00:00:01,mod_dl_dst:00:00:00:00:00:02,mod_nw_src:1.1.1.1,mod_tp_dst:1,output:1",
        "ip actions=set_field:00:11:22:33:44:55/ff:ff:ff:00:00:00->eth_src,set_field:0x1005->vlan_tci,output:1",
        "pkt_mark=0x10/0xf0,ip,reg0=0x5,reg3=0x10/0xf0,metadata=0x1/0xff,in_port=1,actions=load:0x1->NXM_NX_REG1[0..3],move:NXM_OF_ETH_SRC[]->NXM_NX_XXREG0[0..47],push:NXM_OF_IP_SRC[],pop:NXM_NX_REG2[],set_field:0x7->pkt_mark,write_metadata:0x5/0xff,goto_table:1",
        "xreg1=0x100000002,actions=move:NXM_NX_REG3[0..15]->NXM_OF_IN_PORT[],load:0->OXM_OF_METADATA[],resubmit(,2)",
    ];
    for text in rules {
        round_trip(text);
    }
}

#[test]
fn dump_flows_output_reads_back() {
    let r = parse(" cookie=0x0, duration=12.5s, table=0, n_packets=10, n_bytes=600, idle_age=3, priority=100,tcp,tp_dst=80 actions=output:2");
    assert_eq!(r.to_string(), "priority=100,tcp,tp_dst=80 actions=output:2");
}

#[test]
fn match_only_for_trace() {
    let m = parse_match("in_port=1,tcp,nw_src=10.0.0.1,tp_dst=80").unwrap();
    let r = parse("in_port=1,tcp,nw_src=10.0.0.1,tp_dst=80 actions=drop");
    assert_eq!(m, r.matching);
}

fn err(text: &str) -> RuleError {
    match parse_rule(text) {
        Ok(r) => panic!("{text:?} parsed as {r}"),
        Err(e) => e,
    }
}

/// The error for `flow` placed on line 2 of a file: names the line and,
/// when given, the field.
fn file_err(flow: &str, field: Option<&str>, needle: &str) {
    let text = format!("# header\n{flow}\npriority=1 actions=drop\n");
    let e = parse_rules(&text, Some("t.flows")).expect_err(flow);
    assert_eq!(e.line, 2, "{flow}: {e}");
    assert_eq!(e.file.as_deref(), Some("t.flows"));
    let shown = e.to_string();
    assert!(shown.starts_with("t.flows:2: "), "{flow}: {shown}");
    if let Some(f) = field {
        assert_eq!(e.field.as_deref(), Some(f), "{flow}: {shown}");
        assert!(shown.contains(f), "{flow}: {shown}");
    }
    assert!(shown.contains(needle), "{flow}: {shown} lacks {needle:?}");
}

#[test]
fn the_documented_message() {
    let mut text = String::new();
    for _ in 0..11 {
        text.push_str("actions=drop\n");
    }
    text.push_str("ip,nw_src=10.0.0.300 actions=drop\n");
    let e = parse_rules(&text, Some("rules.flows")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "rules.flows:12: nw_src: '10.0.0.300' is not an IPv4 address (a.b.c.d expected)"
    );
}

#[test]
fn single_flow_errors_have_no_location() {
    let e = err("ip,nw_src=1.2.3.999 actions=drop");
    assert_eq!((e.file.as_deref(), e.line), (None, 0));
    assert_eq!(
        e.to_string(),
        "nw_src: '1.2.3.999' is not an IPv4 address (a.b.c.d expected)"
    );
    assert_eq!(
        err("tcp").to_string(),
        "must specify an action (actions=...)"
    );
}

#[test]
fn bad_values() {
    file_err(
        "ip,nw_src=10.0.0.300 actions=drop",
        Some("nw_src"),
        "not an IPv4 address",
    );
    file_err("tcp,tp_dst=65536 actions=drop", Some("tp_dst"), "too wide");
    file_err(
        "dl_src=00:11:22 actions=drop",
        Some("dl_src"),
        "not a MAC address",
    );
    file_err(
        "ip,nw_ttl=3/1 actions=drop",
        Some("nw_ttl"),
        "does not take a mask",
    );
    file_err("tcp,tp_dst= actions=drop", Some("tp_dst"), "needs a value");
    file_err("tcp_dst actions=drop", Some("tcp_dst"), "needs a value");
}

#[test]
fn unmet_prerequisites() {
    file_err(
        "tp_dst=80 actions=drop",
        Some("tp_dst"),
        "tp_dst requires ip or ipv6 with tcp, udp or sctp",
    );
    file_err(
        "udp,tcp_dst=80 actions=drop",
        Some("tcp_dst"),
        "tcp_dst requires",
    );
    file_err(
        "ipv6,nw_src=1.2.3.4 actions=drop",
        Some("nw_src"),
        "nw_src requires ip",
    );
    file_err(
        "ip,ipv6_src=::1 actions=drop",
        Some("ipv6_src"),
        "ipv6_src requires ipv6",
    );
    file_err(
        "icmp6,nd_target=::1 actions=drop",
        Some("nd_target"),
        "nd_target requires",
    );
    file_err(
        "tcp,icmp_type=3 actions=drop",
        Some("icmp_type"),
        "icmp_type requires icmp or icmp6",
    );
    file_err(
        "ip actions=set_field:80->tp_dst",
        Some("set_field"),
        "tp_dst requires",
    );
}

#[test]
fn duplicates_and_conflicts() {
    file_err(
        "tcp,tp_dst=80,tp_dst=81 actions=drop",
        Some("tp_dst"),
        "given twice",
    );
    file_err(
        "tcp,tp_dst=80,tcp_dst=81 actions=drop",
        Some("tcp_dst"),
        "overlaps tp_dst",
    );
    file_err(
        "ip,nw_tos=32,ip_dscp=8 actions=drop",
        Some("ip_dscp"),
        "overlaps nw_tos",
    );
    file_err(
        "priority=1,priority=2 actions=drop",
        Some("priority"),
        "given twice",
    );
    file_err("tcp,udp actions=drop", Some("udp"), "contradicts");
    file_err(
        "tcp,nw_proto=17 actions=drop",
        Some("nw_proto"),
        "contradicts",
    );
}

#[test]
fn unknown_things() {
    file_err(
        "nw_sorc=1.2.3.4 actions=drop",
        Some("nw_sorc"),
        "unknown field or keyword",
    );
    file_err(
        "tcpp actions=drop",
        Some("tcpp"),
        "unknown field or keyword",
    );
    file_err("actions=frobnicate", Some("frobnicate"), "unknown action");
    file_err(
        "actions=set_field:1->nope",
        Some("set_field"),
        "unknown field 'nope'",
    );
    file_err("tcp=1 actions=drop", Some("tcp"), "takes no value");
}

#[test]
fn unsupported_things() {
    for (flow, field) in [
        ("tun_metadata21=1 actions=drop", "tun_metadata21"),
        ("nsh_spi=3 actions=drop", "nsh_spi"),
        ("mpls,mpls_lse1=3 actions=drop", "mpls_lse1"),
        (
            "NXM_NX_TUN_METADATA22=1 actions=drop",
            "NXM_NX_TUN_METADATA22",
        ),
        ("actions=learn(table=1,NXM_NX_TUN_METADATA20[])", "learn"),
        ("actions=encap(nsh)", "encap"),
        ("actions=meter:1", "meter"),
        ("actions=set_field:1->tun_metadata20", "set_field"),
        ("actions=load:1->NXM_NX_TUN_METADATA23[]", "load"),
    ] {
        file_err(flow, Some(field), "not supported by flowpath");
    }
}

#[test]
fn out_of_range_numbers() {
    file_err("table=255 actions=drop", Some("table"), "out of range");
    file_err(
        "priority=65536 actions=drop",
        Some("priority"),
        "out of range",
    );
    file_err(
        "idle_timeout=70000 actions=drop",
        Some("idle_timeout"),
        "out of range",
    );
    file_err(
        "cookie=0x10000000000000000 actions=drop",
        Some("cookie"),
        "out of range",
    );
    file_err("priority=x actions=drop", Some("priority"), "not a number");
    file_err("actions=output:0", Some("output"), "out of range");
    file_err("actions=output:65280", Some("output"), "out of range");
    file_err("actions=0", Some("0"), "out of range");
    file_err(
        "actions=controller:65536",
        Some("controller"),
        "out of range",
    );
    file_err(
        "actions=mod_vlan_vid:4096",
        Some("mod_vlan_vid"),
        "out of range",
    );
    file_err(
        "actions=mod_vlan_pcp:8",
        Some("mod_vlan_pcp"),
        "out of range",
    );
    file_err("actions=push_vlan:0x9100", Some("push_vlan"), "TPID");
    file_err("actions=resubmit(,255)", Some("resubmit"), "out of range");
    file_err(
        "ip actions=mod_nw_tos:33",
        Some("mod_nw_tos"),
        "multiple of 4",
    );
}

#[test]
fn structural_errors() {
    file_err("tcp,tp_dst=80", None, "must specify an action");
    file_err("cookie=1/0xff actions=drop", Some("cookie"), "del-flows");
    file_err("out_port=1 actions=drop", Some("out_port"), "del-flows");
    file_err("actions=resubmit(,2", Some("actions"), "unbalanced");
    file_err("actions=drop,output:1", Some("drop"), "only action");
    file_err(
        "table=2 actions=goto_table:1",
        Some("goto_table"),
        "later table",
    );
    file_err(
        "actions=goto_table:3,output:1",
        Some("goto_table"),
        "last action",
    );
    file_err(
        "actions=output:1,priority=3",
        Some("priority"),
        "must come last",
    );
    file_err("actions=resubmit(,)", Some("resubmit"), "at least one");
    file_err(
        "actions=set_field:0x800->dl_type",
        Some("set_field"),
        "not writable",
    );
    file_err(
        "actions=move:NXM_NX_REG0[]->NXM_NX_REG1[0..3]",
        Some("move"),
        "32 bits wide but destination is 4",
    );
    file_err("reg0=1,reg0=2 actions=drop", Some("reg0"), "given twice");
    // Register views overlap by design: the later bits win, as in OVS 3.1
    // (whose dump-flows shows `reg0=0,reg1=0x1` for the first).
    assert_eq!(
        parse("reg1=2,xreg0=1 actions=drop").to_string(),
        "priority=32768,reg0=0,reg1=0x1 actions=drop"
    );
    assert_eq!(
        parse("xreg0=1,reg1=2 actions=drop").to_string(),
        "priority=32768,reg0=0,reg1=0x2 actions=drop"
    );
    // The later field replaces all of its bits, mask included (OVS 3.1:
    // `reg2=0,reg3=0/0x1`).
    assert_eq!(
        parse("xreg1=0x40,reg3=0x0/0x1 actions=drop").to_string(),
        "priority=32768,reg2=0,reg3=0/0x1 actions=drop"
    );
    file_err("=3 actions=drop", None, "without a field name");
}

#[test]
fn file_error_on_line_3_loads_nothing() {
    let text = "priority=1,tcp,tp_dst=80,actions=output:1\n\
                # a comment line\n\
                priority=2,udp,tp_dst=53,actions=bogus\n\
                priority=3,actions=drop\n";
    let e = parse_rules(text, Some("x.flows")).unwrap_err();
    assert_eq!(e.line, 3);
    assert_eq!(e.field.as_deref(), Some("bogus"));
    assert_eq!(e.to_string(), "x.flows:3: bogus: unknown action");
    let e = parse_rules(text, None).unwrap_err();
    assert_eq!(e.to_string(), "line 3: bogus: unknown action");
}

#[test]
fn file_lines_and_comments() {
    let text =
        "\n# rules\npriority=1 actions=output:1   # to 1\r\n\n  tcp,tp_dst=22 actions=drop\n";
    let rules = parse_rules(text, None).unwrap();
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0].line, 3);
    assert_eq!(rules[0].actions, vec![Action::Output(1)]);
    assert_eq!(rules[1].line, 5);
    assert_eq!(parse_rule("priority=1 actions=output:1").unwrap().line, 0);
    assert!(parse_rules("", None).unwrap().is_empty());
}

/// `tun_id` prints where `ovs-ofctl dump-flows` prints it (after the
/// registers, before `metadata` and `in_port`), `set_tunnel` by the size
/// of its value (as OVS 3.1 printed this very rule).
#[test]
fn tun_id_prints_as_ovs_ofctl() {
    let r = flowpath_ofproto::parse::parse_rules(
        "table=0,priority=7,tcp,reg0=5,tunnel_id=0x7/0xff,in_port=2,metadata=3,pkt_mark=4,nw_dst=1.2.3.4,\
         actions=set_tunnel:5,set_tunnel64:0x100000000,set_tunnel:0x123456789,move:NXM_NX_TUN_ID[0..7]->reg1[0..7],output:1",
        None,
    )
    .unwrap();
    let text = r[0].to_string();
    assert!(
        text.contains("priority=7,pkt_mark=0x4,tcp,reg0=0x5,tun_id=0x7/0xff,metadata=0x3,in_port=2,nw_dst=1.2.3.4"),
        "{text}"
    );
    assert!(
        text.contains("actions=set_tunnel:0x5,set_tunnel64:0x100000000,set_tunnel64:0x123456789,move:NXM_NX_TUN_ID[0..7]->NXM_NX_REG1[0..7],output:1"),
        "{text}"
    );
    // A packet can say what tunnel it came through (as `ofproto/trace`'s
    // flow): its tunnel metadata is part of its key.
    let k = flowpath_ofproto::parse::parse_packet(
        "in_port=1,tun_id=5,tun_src=10.0.0.1,tun_dst=10.0.0.2,tun_flags=+oam,tcp",
    )
    .unwrap();
    assert_eq!(k.tun_id(), 5);
    assert_eq!(k.tun_src(), 0x0a00_0001);
    assert_eq!(k.tun_dst(), 0x0a00_0002);
    assert_eq!(k.tun_flags(), 1);
    assert!(k.has_tunnel());
    // Registers still are not.
    assert!(flowpath_ofproto::parse::parse_packet("in_port=1,reg0=5,tcp").is_err());
}

/// The tunnel fields parse and print as `ovs-ofctl` prints them (OVS's
/// `format_flow_tunnel` order, after the registers).
#[test]
fn tunnel_fields_print_as_ovs_ofctl() {
    let r = flowpath_ofproto::parse::parse_rules(
        "priority=5,reg1=2,tun_flags=-oam,tun_gbp_flags=0x1,tun_gbp_id=7,tun_ipv6_dst=2001:db8::/64,         tun_dst=192.168.1.0/24,tun_src=10.0.0.1,tun_id=0x10,in_port=3,actions=set_field:10.0.0.9->tun_dst,output:1",
        None,
    )
    .unwrap();
    let text = r[0].to_string();
    assert!(
        text.contains("priority=5,reg1=0x2,tun_id=0x10,tun_src=10.0.0.1,tun_dst=192.168.1.0/24,tun_ipv6_dst=2001:db8::/64,tun_gbp_id=7,tun_gbp_flags=0x1,tun_flags=-oam,in_port=3"),
        "{text}"
    );
    assert!(
        text.contains("actions=set_field:10.0.0.9->tun_dst,output:1"),
        "{text}"
    );
    for bad in ["tun_flags=+df", "tun_flags=2", "tun_ttl=3/1"] {
        assert!(
            flowpath_ofproto::parse::parse_rules(&format!("{bad},actions=drop"), None).is_err(),
            "{bad}"
        );
    }
}

/// `fin_timeout(...)` parses and prints as `ovs-ofctl` (idle first, zero
/// ones left out), is refused in an action set, and `learn`'s fin timeouts
/// become the learned flow's first action (OVS 3.1's dump of a flow learned
/// by this rule: `actions=fin_timeout(idle_timeout=5,hard_timeout=10),output:1`).
#[test]
fn fin_timeout_as_ovs_ofctl() {
    let r = parse_rule("in_port=3,actions=fin_timeout(hard_timeout=4,idle_timeout=3),fin_timeout(hard_timeout=4),output:2").unwrap();
    assert!(
        r.to_string()
            .contains("actions=fin_timeout(idle_timeout=3,hard_timeout=4),fin_timeout(hard_timeout=4),output:2"),
        "{r}"
    );
    assert!(parse_rule("actions=fin_timeout(soft_timeout=1)").is_err());
    assert!(parse_rule("actions=fin_timeout(idle_timeout=65536)").is_err());
    assert!(parse_rule("actions=write_actions(fin_timeout(idle_timeout=1))").is_err());
    let r = parse_rule("table=0,in_port=1,actions=learn(table=1,fin_idle_timeout=5,fin_hard_timeout=10,idle_timeout=30,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])").unwrap();
    let flowpath_ofproto::action::Action::Learn(id) = r.actions[0] else {
        panic!("{r}");
    };
    let key =
        flowpath_ofproto::parse::parse_packet("in_port=1,dl_src=00:00:00:00:00:07,tcp").unwrap();
    let learned = flowpath_ofproto::learn::get(id)
        .unwrap()
        .flow(&key, &flowpath_flow::Regs::zero())
        .unwrap();
    assert!(
        learned.to_string().ends_with(
            "dl_dst=00:00:00:00:00:07 actions=fin_timeout(idle_timeout=5,hard_timeout=10),output:1"
        ),
        "{learned}"
    );
}

/// MPLS matches print as `ovs-ofctl dump-flows` printed this very rule
/// (OVS 3.1): the keyword first, the label stack entry's fields after the
/// Ethernet ones, in OVS's order; none is maskable; each needs `mpls` or
/// `mplsm`.
#[test]
fn mpls_matches_as_ovs_ofctl() {
    let r = parse_rule(
        "mpls,in_port=1,dl_vlan=3,dl_src=00:00:00:00:00:01,mpls_label=5,mpls_tc=2,mpls_bos=1,mpls_ttl=7,reg0=1,actions=drop",
    )
    .unwrap();
    assert!(
        r.to_string().contains(
            "mpls,reg0=0x1,in_port=1,dl_vlan=3,dl_src=00:00:00:00:00:01,mpls_label=5,mpls_tc=2,mpls_ttl=7,mpls_bos=1 actions=drop"
        ),
        "{r}"
    );
    let r = parse_rule(
        "mplsm,OXM_OF_MPLS_LABEL=0x10,actions=move:NXM_NX_MPLS_TTL[]->reg1[0..7],output:1",
    )
    .unwrap();
    assert!(
        r.to_string()
            .contains("mplsm,mpls_label=16 actions=move:NXM_NX_MPLS_TTL[]->NXM_NX_REG1[0..7]"),
        "{r}"
    );
    for (bad, needle) in [
        ("mplsm,mpls_label=0x5/0xff,actions=drop", "mask"),
        ("mpls,mpls_label=1048576,actions=drop", "mpls_label"),
        ("mpls,mpls_ttl=256,actions=drop", "mpls_ttl"),
        ("mpls_label=3,actions=drop", "mpls or mplsm"),
        ("ip,mpls_tc=1,actions=drop", "mpls or mplsm"),
        ("mpls,actions=set_field:1->mpls_bos", "not writable"),
        ("ip,actions=set_field:3->mpls_label", "mpls or mplsm"),
    ] {
        let e = parse_rule(bad).unwrap_err().to_string();
        assert!(e.contains(needle), "{bad}: {e}");
    }
}
