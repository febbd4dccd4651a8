use super::*;

#[test]
fn mpls_actions_parse_and_check_the_ethertype_they_leave() {
    let mut ip = Match::catchall();
    assert!(ip.set_protocol("ip"));
    let a = parse_actions(
        "push_mpls:0x8847,set_field:5->mpls_label,set_mpls_tc(3),set_mpls_ttl:9,dec_mpls_ttl,pop_mpls:0x0800,output:1",
        &ip,
        0,
    )
    .unwrap();
    assert_eq!(
        a,
        vec![
            Action::PushMpls(0x8847),
            Action::SetField {
                field: FieldId::MplsLabel,
                value: 5,
                mask: 0xfffff,
                legacy: false
            },
            Action::SetMplsTc(3),
            Action::SetMplsTtl(9),
            Action::DecMplsTtl,
            Action::PopMpls(0x0800),
            Action::Output(1),
        ]
    );
    assert_eq!(
        a.iter().map(|x| x.to_string()).collect::<Vec<_>>()[..3],
        [
            "push_mpls:0x8847",
            "set_field:5->mpls_label",
            "set_mpls_tc(3)"
        ]
    );
    // Without the push, the match is not MPLS; after a pop, not either.
    assert!(parse_actions("set_field:5->mpls_label", &ip, 0).is_err());
    let mut mpls = Match::catchall();
    assert!(mpls.set_protocol("mpls"));
    assert!(parse_actions("set_field:5->mpls_label", &mpls, 0).is_ok());
    assert!(parse_actions("pop_mpls:0x0800,set_field:5->mpls_label", &mpls, 0).is_err());
    // An L3 field after a push: the payload is opaque.
    assert!(parse_actions("push_mpls:0x8847,set_field:1.2.3.4->nw_src", &ip, 0).is_err());
    for bad in [
        "push_mpls:0x0800",
        "set_mpls_label:1048576",
        "set_mpls_tc:8",
        "dec_mpls_ttl:1",
    ] {
        assert!(parse_actions(bad, &mpls, 0).is_err(), "{bad}");
    }
    // mpls_bos is read-only.
    assert!(parse_actions("set_field:1->mpls_bos", &mpls, 0).is_err());
}

fn tcp() -> Match {
    let mut m = Match::catchall();
    assert!(m.set_protocol("tcp"));
    m
}

fn p(text: &str) -> Result<Vec<Action>, RuleError> {
    parse_actions(text, &tcp(), 0)
}

fn round(text: &str) -> String {
    format_actions(&p(text).unwrap_or_else(|e| panic!("{text}: {e}")))
}

#[test]
fn outputs_and_ports() {
    assert_eq!(p("output:2").unwrap(), vec![Action::Output(2)]);
    assert_eq!(
        p("2,3").unwrap(),
        vec![Action::Output(2), Action::Output(3)]
    );
    assert_eq!(p("output(port=4)").unwrap(), vec![Action::Output(4)]);
    assert_eq!(round("output:LOCAL"), "LOCAL");
    assert_eq!(round("65534"), "LOCAL");
    assert_eq!(round("in_port,all,flood"), "IN_PORT,ALL,FLOOD");
    assert_eq!(round("output:IN_PORT"), "IN_PORT");
    assert_eq!(round("controller"), "CONTROLLER:65535");
    assert_eq!(round("controller:128"), "CONTROLLER:128");
    assert_eq!(round("controller(max_len=64)"), "CONTROLLER:64");
    assert_eq!(round("CONTROLLER:65535"), "CONTROLLER:65535");
    assert!(p("output:0").is_err());
    assert!(p("output:65280").is_err());
    assert!(p("output:NONE").is_err());
    assert!(p("output").is_err());
}

#[test]
fn resubmit_forms() {
    assert_eq!(round("resubmit(,2)"), "resubmit(,2)");
    assert_eq!(round("resubmit:3"), "resubmit:3");
    assert_eq!(round("resubmit(3,2)"), "resubmit(3,2)");
    assert_eq!(round("resubmit(3)"), "resubmit:3");
    assert_eq!(round("resubmit( , 2 )"), "resubmit(,2)");
    assert_eq!(round("resubmit:IN_PORT"), "resubmit:IN_PORT");
    assert_eq!(round("resubmit(LOCAL,1)"), "resubmit(LOCAL,1)");
    assert!(p("resubmit(,)").is_err());
    assert!(p("resubmit(,255)").is_err());
    assert!(p("resubmit").is_err());
    let e = p("resubmit(1,2,ct)").unwrap_err();
    assert!(e.msg.contains("not supported by flowpath"), "{e}");
}

#[test]
fn set_fields_and_legacy() {
    assert_eq!(
        round("set_field:10.0.0.1->nw_src"),
        "set_field:10.0.0.1->nw_src"
    );
    assert_eq!(
        round("set_field:10.0.0.1/8->ip_src"),
        "set_field:10.0.0.0/8->nw_src"
    );
    assert_eq!(
        round("set_field:00:11:22:33:44:55->eth_dst"),
        "set_field:00:11:22:33:44:55->dl_dst"
    );
    assert_eq!(round("mod_nw_dst:1.2.3.4"), "mod_nw_dst:1.2.3.4");
    assert_eq!(
        round("mod_dl_src:00:0A:00:00:00:01"),
        "mod_dl_src:00:0a:00:00:00:01"
    );
    assert_eq!(
        round("mod_nw_tos:32,mod_tp_dst:80"),
        "mod_nw_tos:32,mod_tp_dst:80"
    );
    // Legacy actions do not need prerequisites, set_field does.
    let none = Match::catchall();
    assert!(parse_actions("mod_nw_src:1.2.3.4", &none, 0).is_ok());
    let e = parse_actions("set_field:1.2.3.4->nw_src", &none, 0).unwrap_err();
    assert!(e.to_string().contains("nw_src requires ip"), "{e}");
    assert!(p("mod_nw_tos:33").is_err());
    assert!(p("mod_nw_src:1.2.3.4/8").is_err());
    // in_port is writable, as in OVS (load:N->NXM_OF_IN_PORT[]).
    assert!(p("set_field:1->in_port").is_ok());
    assert_eq!(
        p("set_field:1->reg0").unwrap(),
        vec![Action::SetField {
            field: FieldId::Reg0,
            value: 1,
            mask: 0xffff_ffff,
            legacy: false
        }]
    );
    assert!(p("set_field:1->tun_metadata20")
        .unwrap_err()
        .msg
        .contains("not supported"));
    assert!(p("set_field:1").is_err());
    assert!(p("set_field:0xffff->dl_vlan").is_err());
}

#[test]
fn vlan_ttl_goto_drop() {
    assert_eq!(
        round("push_vlan:0x8100,mod_vlan_vid:10,mod_vlan_pcp:3"),
        "push_vlan:0x8100,mod_vlan_vid:10,mod_vlan_pcp:3"
    );
    assert_eq!(round("strip_vlan,dec_ttl"), "pop_vlan,dec_ttl");
    assert_eq!(round("push_vlan:34984"), "push_vlan:0x88a8");
    assert!(p("push_vlan:0x9100").is_err());
    assert!(p("mod_vlan_vid:4096").is_err());
    assert!(p("mod_vlan_pcp:8").is_err());
    assert_eq!(round("goto_table:2"), "goto_table:2");
    assert_eq!(round("NORMAL"), "NORMAL");
    assert_eq!(round("normal"), "NORMAL");
    assert_eq!(p("output:NORMAL").unwrap(), vec![Action::Normal]);
    assert_eq!(p("output(3)").unwrap(), vec![Action::Output(3)]);
    assert_eq!(
        round("output(port=2,max_len=100)"),
        "output(port=2,max_len=100)"
    );
    assert_eq!(
        round("output(max_len=64,port=LOCAL)"),
        "output(port=LOCAL,max_len=64)"
    );
    assert!(p("output(port=2,max_len=13)")
        .unwrap_err()
        .msg
        .contains("minimum value 14"));
    assert!(p("output(port=NORMAL,max_len=100)")
        .unwrap_err()
        .msg
        .contains("unsupported truncate port"));
    let noted = p("note:00.1f,output:2").unwrap();
    assert_eq!(noted.len(), 2);
    assert_eq!(noted[1], Action::Output(2));
    assert_eq!(round("note:00.1f,output:2"), "note:00.1f,output:2");
    assert!(p("note:xyz").is_err());
    assert_eq!(round("dec_ttl(1,2)"), "dec_ttl(1,2)");
    assert_eq!(
        round("set_queue:5,output:2,pop_queue"),
        "set_queue:5,output:2,pop_queue"
    );
    assert_eq!(round("enqueue:2:7"), "enqueue:2:7");
    assert_eq!(
        round("bundle(symmetric_l4,7,hrw,ofport,members:2,3)"),
        "bundle(symmetric_l4,7,hrw,ofport,members:2,3)"
    );
    assert_eq!(
        round("bundle(eth_src,0,active_backup,ofport,slaves:4)"),
        "bundle(eth_src,0,active_backup,ofport,members:4)"
    );
    assert!(p("bundle(foo,0,hrw,ofport,members:2)").is_err());
    assert!(p("bundle(eth_src,0,iter_hash,ofport,members:2)").is_err());
    assert!(p("bundle(eth_src,0,hrw,ofport,members:1,2,3,4,5,6,7,8,9)").is_err());
    assert_eq!(round("enqueue(LOCAL,7)"), "enqueue:LOCAL:7");
    assert!(p("enqueue:ALL:7").is_err());
    assert!(p("enqueue:2").is_err());
    assert!(p("set_queue:x").is_err());
    assert!(p("dec_ttl(1,x)").is_err());
    assert!(p("dec_ttl(1,2,3,4,5,6,7,8,9)").is_err());
    // p() parses for a `tcp` rule: IP is pinned.
    assert_eq!(round("mod_nw_ttl:9"), "mod_nw_ttl:9");
    assert_eq!(round("mod_nw_ecn:2"), "set_field:2->nw_ecn");
    assert!(parse_actions("mod_nw_ttl:9", &Match::catchall(), 0).is_err());
    assert_eq!(p("output(port=3)").unwrap(), vec![Action::Output(3)]);
    assert!(p("output(3,4)").is_err());
    assert_eq!(p("output:0xfffa").unwrap(), vec![Action::Normal]);
    assert!(p("NORMAL:1").is_err());
    assert!(p("resubmit:NORMAL").is_err());
    assert!(parse_actions("goto_table:2", &tcp(), 2).is_err());
    assert!(p("goto_table:2,output:1").is_err());
    assert_eq!(p("drop").unwrap(), vec![]);
    assert_eq!(p("").unwrap(), vec![]);
    assert!(p("drop,output:1").is_err());
    assert_eq!(format_actions(&[]), "drop");
}

#[test]
fn instructions() {
    let i = |t: &str| parse_instructions(t, &tcp(), 0);
    let (l, w) = i(
        "output:1,clear_actions,write_actions(mod_dl_src:00:00:00:00:00:01,output:2),goto_table:3",
    )
    .unwrap();
    assert_eq!(
        l,
        vec![
            Action::Output(1),
            Action::ClearActions,
            Action::WriteActions,
            Action::GotoTable(3)
        ]
    );
    assert_eq!(w.len(), 2);
    assert_eq!(
        format_instructions(&l, &w),
        "output:1,clear_actions,write_actions(mod_dl_src:00:00:00:00:00:01,output:2),goto_table:3"
    );
    for (bad, needle) in [
        (
            "write_actions(output:2),output:3",
            "apply_actions must appear before write_actions",
        ),
        (
            "clear_actions,output:3",
            "apply_actions must appear before clear_actions",
        ),
        (
            "write_actions(output:2),clear_actions",
            "clear_actions must appear before write_actions",
        ),
        (
            "write_actions(output:2),write_actions(output:3)",
            "given twice",
        ),
        (
            "apply_actions(output:1)",
            "apply_actions is the default instruction",
        ),
        ("write_actions(goto_table:2)", "cannot hold instructions"),
        ("output:1,write_actions(clear_actions)", "cannot be nested"),
        (
            "write_metadata:1,clear_actions",
            "clear_actions must appear before write_metadata",
        ),
        (
            "write_metadata:1,write_actions(output:1)",
            "write_actions must appear before write_metadata",
        ),
        ("write_metadata:1,write_metadata:2", "given twice"),
        ("write_metadata:0x1/0x1/", "64-bit number"),
        ("write_actions(push:NXM_NX_REG0[],output:1)", "disallowed"),
    ] {
        let e = i(bad).unwrap_err().to_string();
        assert!(e.contains(needle), "{bad}: {e}");
    }
}

#[test]
fn register_actions() {
    let ip = {
        let mut m = Match::catchall();
        assert!(m.set_protocol("ip"));
        m
    };
    let a = parse_actions(
        "load:0x5->NXM_NX_REG0[0..3],move:NXM_OF_IP_SRC[0..7]->reg1[8..15],\
         push:OXM_OF_METADATA[],pop:NXM_NX_PKT_MARK[0..31],move:NXM_OF_IN_PORT[]->NXM_NX_XXREG1[0..15],\
         load:1->OXM_OF_PKT_REG2[63]",
        &ip,
        0,
    )
    .unwrap();
    // As `ovs-ofctl dump-flows` prints them.
    assert_eq!(
        format_actions(&a),
        "load:0x5->NXM_NX_REG0[0..3],move:NXM_OF_IP_SRC[0..7]->NXM_NX_REG1[8..15],\
         push:OXM_OF_METADATA[],pop:NXM_NX_PKT_MARK[],move:NXM_OF_IN_PORT[]->NXM_NX_XXREG1[0..15],\
         load:0x1->OXM_OF_PKT_REG2[63]"
    );
    let Action::Move { src, dst } = a[1] else {
        panic!("{:?}", a[1]);
    };
    assert_eq!((src.field, src.ofs, src.n_bits), (FieldId::NwSrc, 0, 8));
    assert_eq!((dst.field, dst.mask()), (FieldId::Reg1, 0xff00));
    let none = Match::catchall();
    for (bad, needle) in [
        ("move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]", "nw_src requires ip"),
        ("move:NXM_NX_REG0[]->NXM_NX_REG1[0..15]", "32 bits wide"),
        ("load:0x10->NXM_NX_REG0[0..3]", "does not fit in 4 bits"),
        ("load:1->NXM_NX_REG0[32]", "has 32 bits"),
        ("load:1->NXM_NX_REG0[5..3]", "ends before"),
        ("load:1->NXM_OF_ETH_TYPE[]", "not writable"),
        ("load:1->NXM_NX_REG16[]", "unknown field"),
        ("load:1->NXM_NX_TUN_METADATA20[]", "not supported"),
        ("write_metadata:1", "is an instruction"),
        ("push", "needs"),
    ] {
        let e = parse_actions(bad, &none, 0).unwrap_err().to_string();
        assert!(e.contains(needle), "{bad}: {e}");
    }
    let mut arp = Match::catchall();
    assert!(arp.set_protocol("arp"));
    // ARP fields are written as OVS writes them (`set(arp(...))`).
    assert!(parse_actions("move:NXM_NX_REG0[0..7]->NXM_OF_ARP_OP[0..7]", &arp, 0).is_ok());
    let e = parse_actions("move:NXM_NX_REG0[0..7]->NXM_OF_ARP_OP[0..7]", &none, 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("arp_op"), "{e}");
    let (list, _) = parse_instructions(
        "load:1->reg0,write_actions(output:1),write_metadata:0x5/0xff,goto_table:2",
        &none,
        0,
    )
    .unwrap();
    assert_eq!(
        list[2],
        Action::WriteMetadata {
            value: 5,
            mask: 0xff
        }
    );
    assert_eq!(list[2].to_string(), "write_metadata:0x5/0xff");
}

#[test]
fn unknown_and_unsupported() {
    for a in [
        "learn(table=1,NXM_NX_TUN_METADATA20[])",
        "encap(nsh)",
        "meter:1",
    ] {
        let e = p(a).unwrap_err();
        assert!(
            e.to_string().contains("not supported by flowpath"),
            "{a}: {e}"
        );
    }
    let e = p("frobnicate").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("frobnicate"));
    assert!(p("resubmit(,2").is_err());
    assert!(p("output:1)").is_err());
    let e = p("output:1,priority=3").unwrap_err();
    assert!(e.msg.contains("must come last"), "{e}");
}

#[test]
fn unsupported_field_names() {
    for n in [
        "tun_metadata23",
        "nsh_spi",
        "mpls_label",
        "NXM_NX_TUN_METADATA20",
    ] {
        assert!(is_unsupported_field(n), "{n}");
    }
    for n in [
        "nw_src",
        "register",
        "reg",
        "tp_dst",
        "ct_state",
        "NXM_NX_CT_MARK",
    ] {
        assert!(!is_unsupported_field(n), "{n}");
    }
}

/// `controller(...)`, `output:REG`, `sample(...)` and `clone(...)` read
/// and print as `ovs-ofctl dump-flows` prints them (checked with OVS 3.1's
/// `ovs-ofctl parse-flow`).
#[test]
fn controller_output_reg_sample_clone() {
    for (text, printed) in [
        ("controller", "CONTROLLER:65535"),
        ("controller:100", "CONTROLLER:100"),
        (
            "controller(reason=no_match,max_len=128,id=3,userdata=01.02,pause,meter_id=5)",
            "controller(reason=no_match,max_len=128,id=3,userdata=01.02,pause,meter_id=5)",
        ),
        (
            "controller(userdata=0a.0b.0c,id=2)",
            "controller(id=2,userdata=0a.0b.0c)",
        ),
        ("controller(reason=action)", "CONTROLLER:65535"),
        ("output:NXM_NX_REG0[0..15]", "output:NXM_NX_REG0[0..15]"),
        ("output:reg1[16..31]", "output:NXM_NX_REG1[16..31]"),
        (
            "sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3)",
            "sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3)",
        ),
        (
            "sample(probability=7)",
            "sample(probability=7,collector_set_id=0,obs_domain_id=0,obs_point_id=0)",
        ),
        (
            "sample(probability=7,sampling_port=local,egress)",
            "sample(probability=7,collector_set_id=0,obs_domain_id=0,obs_point_id=0,sampling_port=LOCAL,egress)",
        ),
        (
            "sample(ingress,probability=9,sampling_port=3,collector_set_id=4)",
            "sample(probability=9,collector_set_id=4,obs_domain_id=0,obs_point_id=0,sampling_port=3,ingress)",
        ),
        (
            "sample(probability=9,sampling_port=65535)",
            "sample(probability=9,collector_set_id=0,obs_domain_id=0,obs_point_id=0)",
        ),
        (
            "clone(output:2,mod_dl_dst:1:2:3:4:5:6),output:3",
            "clone(output:2,mod_dl_dst:01:02:03:04:05:06),output:3",
        ),
        (
            "clone(clone(output:1),output:2),clone()",
            "clone(clone(output:1),output:2),clone()",
        ),
    ] {
        assert_eq!(round(text), printed, "{text}");
    }
    let a = p("clone(output:2,clone(output:3)),output:4").unwrap();
    assert_eq!(a[0], Action::Clone { len: 3 });
    assert_eq!(a[2], Action::Clone { len: 1 });
    assert_eq!(a.len(), 5);
    for (bad, says) in [
        ("controller(reason=bogus)", "unknown reason"),
        ("controller(userdata=zz)", "not hex bytes"),
        ("controller(colour=red)", "unknown controller option"),
        ("sample(collector_set_id=1)", "probability"),
        ("sample(probability=0)", "probability"),
        ("sample(probability=1,sampling_port=70000)", "unknown port"),
        ("sample(probability=1,colour=red)", "invalid key \"colour\""),
        ("sample(probability=1,sideways)", "invalid key \"sideways\""),
        ("clone(goto_table:1)", "not allowed inside clone"),
        ("output:NXM_NX_REG0[0..40]", "0..31"),
    ] {
        let e = p(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}
