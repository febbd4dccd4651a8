//! Groups and `learn` against the bytes Open vSwitch 3.1's `ovs-ofctl`
//! sends (captured from its socket writes with strace).

use super::*;
use flowpath_ofproto::action::format_actions;
use flowpath_ofproto::group::{parse_group, GroupType};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

// ovs-ofctl -O OpenFlow13 add-group br0
//   group_id=1,type=all,bucket=output:1,bucket=mod_dl_src:00:00:00:00:00:01,output:2
const OF13_ALL: &str = "040f006000000006000000000000000100200000ffffffffffffffff000000000000001000000001000000000000000000300000ffffffffffffffff000000000019001080000806000000000001000000000010000000020000000000000000";
// ... group_id=4,type=ff,bucket=watch_port:1,output:1,bucket=watch_group:3,output:2
const OF13_FF: &str = "040f00500000000600000300000000040020000000000001ffffffff000000000000001000000001000000000000000000200000ffffffff000000030000000000000010000000020000000000000000";
// -O OpenFlow15 add-group group_id=6,type=select,selection_method=hash,
//   fields(ip_src,tcp_dst),bucket=bucket_id:3,weight:5,output:1,bucket=output:2
const OF15_SELECT: &str = "060f009000000006000001000000000600400000ffffffff00200010000000030000001000000001000000000000000000000008000500000020001000000000000000100000000200000000000000000000000800010000ffff00360000154d000000010000000068617368000000000000000000000000000000000000000080001604ffffffff80001c02ffff0000";
// ... group_id=7,type=select,selection_method=dp_hash,selection_method_param=7,bucket=output:1
const OF15_DP_HASH: &str = "060f006000000006000001000000000700200000ffffffff0020001000000000000000100000000100000000000000000000000800010000ffff00280000154d000000010000000064705f686173680000000000000000000000000000000007";
// -O OpenFlow15 insert-buckets group_id=1,command_bucket_id=last,bucket=bucket_id:5,output:3
const OF15_INSERT: &str = "060f003000000006000300000000000100180000fffffffe001800100000000500000010000000030000000000000000";
// -O OpenFlow15 remove-buckets group_id=1,command_bucket_id=first
const OF15_REMOVE: &str = "060f001800000006000500000000000100000000fffffffd";
// -O OpenFlow13 del-groups group_id=1
const OF13_DEL: &str = "040f0010000000060002000000000001";
// -O OpenFlow10 add-flow actions=learn(table=2,idle_timeout=10,priority=7,cookie=0x5,
//   send_flow_rem,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],
//   load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15],output:NXM_NX_REG1[0..15])
const OF10_LEARN: &str = "010e009000000006003820ff00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000008000ffffffffffff0000ffff0048000023200010000a000000070000000000000005000102000000000000300000040600000000020600000810000000020000000100040000101000010204000000000000";
// -O OpenFlow15 add-flow ip,actions=learn(table=3,limit=5,result_dst=reg2[3],
//   delete_learned,fin_idle_timeout=3,fin_hard_timeout=4,dl_type=0x800,
//   nw_src=10.0.0.1,load:0x123->NXM_NX_REG3[4..20])
const OF15_LEARN2: &str = "060e009800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a0208000000000000000004005800000000ffff005000002320002d000000008000000000000000000000060300000300040000000500030000000104042010080000000602000020200a00000100000e0400002811000001230001060400040000";

fn group_mod(h: &str) -> Result<GroupMod, OfError> {
    match decode(&hex(h), ConnState::default())?.request {
        Request::GroupMod(gm) => Ok(gm),
        r => panic!("{r:?}"),
    }
}

/// A GROUP_DESC entry read back as a group_mod (add) of `version`.
fn desc_as_mod(version: u8, e: &[u8]) -> GroupMod {
    let mut m = vec![version, 15, 0, 0, 0, 0, 0, 1, 0, 0];
    if version < OFP15 {
        m.extend_from_slice(&e[2..]);
    } else {
        m.extend_from_slice(&e[2..10]);
        m.extend_from_slice(&[0, 0, 0xff, 0xff, 0xff, 0xff]);
        m.extend_from_slice(&e[16..]);
    }
    let n = m.len() as u16;
    m[2..4].copy_from_slice(&n.to_be_bytes());
    group_mod(&m.iter().map(|b| format!("{b:02x}")).collect::<String>()).unwrap()
}

#[test]
fn open_vswitch_group_mods_decode_and_describe_back_byte_for_byte() {
    for (h, text) in [
        (
            OF13_ALL,
            "group_id=1,type=all,bucket=output:1,bucket=set_field:00:00:00:00:00:01->eth_src,output:2",
        ),
        (
            OF13_FF,
            "group_id=4,type=ff,bucket=watch_port:1,output:1,bucket=watch_group:3,output:2",
        ),
    ] {
        let gm = group_mod(h).unwrap();
        assert_eq!(gm.command, GroupCommand::Add);
        assert_eq!(gm.group, parse_group(text).unwrap(), "{text}");
        // The description's buckets are the bytes ovs-ofctl sent.
        let e = group_desc_entry(OFP13, &gm.group).unwrap();
        assert_eq!(&e[8..], &hex(h)[16..], "{text}");
        assert_eq!(desc_as_mod(OFP13, &e).group, gm.group);
    }
    for h in [OF15_SELECT, OF15_DP_HASH] {
        let gm = group_mod(h).unwrap();
        let e = group_desc_entry(OFP15, &gm.group).unwrap();
        assert_eq!(&e[16..], &hex(h)[24..], "{gm:?}");
        assert_eq!(desc_as_mod(OFP15, &e).group, gm.group);
    }
    let g = group_mod(OF15_SELECT).unwrap().group;
    assert_eq!(g.kind, GroupType::Select);
    assert_eq!(
        g.to_string(),
        "group_id=6,type=select,selection_method=hash,fields(nw_src,tcp_dst),\
         bucket=bucket_id:3,weight:5,actions=output:1,bucket=bucket_id:0,actions=output:2"
    );
    let g = group_mod(OF15_DP_HASH).unwrap().group;
    assert_eq!((g.method.as_deref(), g.param), (Some("dp_hash"), 7));
    assert!(g.dp_hash.is_some());
    let gm = group_mod(OF15_INSERT).unwrap();
    assert_eq!(
        (gm.command, gm.command_bucket_id, gm.group.buckets[0].id),
        (GroupCommand::InsertBucket, BUCKET_LAST, 5)
    );
    let gm = group_mod(OF15_REMOVE).unwrap();
    assert_eq!(
        (gm.command, gm.command_bucket_id),
        (GroupCommand::RemoveBucket, BUCKET_FIRST)
    );
    let gm = group_mod(OF13_DEL).unwrap();
    assert_eq!((gm.command, gm.group.id), (GroupCommand::Delete, 1));
}

#[test]
fn bad_group_mods_get_open_vswitch_errors() {
    let patch = |h: &str, at: usize, bytes: &[u8]| {
        let mut m = hex(h);
        m[at..at + bytes.len()].copy_from_slice(bytes);
        m.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    // Type 9; command 7; a weight in an all group; no watch in ff.
    assert_eq!(
        group_mod(&patch(OF13_ALL, 10, &[9])).unwrap_err(),
        GMFC_BAD_TYPE
    );
    assert_eq!(
        group_mod(&patch(OF13_ALL, 8, &[0, 7])).unwrap_err(),
        GMFC_BAD_COMMAND
    );
    assert_eq!(
        group_mod(&patch(OF13_ALL, 18, &[0, 5])).unwrap_err(),
        GMFC_INVALID_GROUP
    );
    assert_eq!(
        group_mod(&patch(OF13_FF, 20, &[0xff, 0xff, 0xff, 0xff])).unwrap_err(),
        GMFC_INVALID_GROUP
    );
    // A watch_port in an all group; an indirect group with two buckets.
    assert_eq!(
        group_mod(&patch(OF13_ALL, 20, &[0, 0, 0, 1])).unwrap_err(),
        GMFC_WATCH_UNSUPPORTED
    );
    assert_eq!(
        group_mod(&patch(OF13_ALL, 10, &[2])).unwrap_err(),
        GMFC_INVALID_GROUP
    );
    // OpenFlow 1.3.5: a delete with buckets.
    assert_eq!(
        group_mod(&patch(OF13_ALL, 8, &[0, 2])).unwrap_err(),
        GMFC_INVALID_GROUP
    );
    // A bucket longer than the message.
    assert_eq!(
        group_mod(&patch(OF13_ALL, 16, &[0, 0x70])).unwrap_err(),
        GMFC_BAD_BUCKET
    );
    // OpenFlow 1.5: remove-bucket with a bucket; a command bucket id on an
    // add; two buckets with one id.
    assert_eq!(
        group_mod(&patch(OF15_INSERT, 8, &[0, 5])).unwrap_err(),
        GMFC_BAD_BUCKET
    );
    assert_eq!(
        group_mod(&patch(OF15_INSERT, 8, &[0, 0])).unwrap_err(),
        GMFC_BAD_BUCKET
    );
    assert_eq!(
        group_mod(&patch(OF15_SELECT, 28, &[0, 0, 0, 0])).unwrap_err(),
        GMFC_BAD_BUCKET
    );
    // The selection method on an all group; an unknown method.
    assert_eq!(
        group_mod(&patch(OF15_SELECT, 10, &[0])).unwrap_err(),
        BPC_BAD_VALUE
    );
    assert_eq!(
        group_mod(&patch(OF15_DP_HASH, 72, b"xx")).unwrap_err(),
        BPC_BAD_VALUE
    );
}

#[test]
fn truncated_and_corrupted_messages_are_errors_not_panics() {
    for h in [
        OF13_ALL,
        OF13_FF,
        OF15_SELECT,
        OF15_DP_HASH,
        OF15_INSERT,
        OF15_REMOVE,
        OF13_DEL,
        OF10_LEARN,
        OF15_LEARN2,
    ] {
        let m = hex(h);
        for n in 8..m.len() {
            let mut t = m[..n].to_vec();
            t[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            let _ = decode(&t, ConnState::default());
        }
        for i in 8..m.len() {
            for x in [0u8, 0x01, 0x7f, 0xff] {
                let mut t = m.clone();
                t[i] = x;
                let _ = decode(&t, ConnState::default());
            }
        }
    }
}

fn flow_mod_actions(h: &str) -> Vec<Action> {
    match decode(&hex(h), ConnState::default()).unwrap().request {
        Request::FlowMod(fm) => fm.rule.actions,
        r => panic!("{r:?}"),
    }
}

#[test]
fn open_vswitch_learn_actions_decode_print_and_encode_byte_for_byte() {
    let acts = flow_mod_actions(OF10_LEARN);
    assert_eq!(
        format_actions(&acts),
        "learn(table=2,idle_timeout=10,priority=7,send_flow_rem,cookie=0x5,\
         NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15],\
         output:NXM_NX_REG1[0..15])"
    );
    let m = Match::catchall();
    let cx = |version| Ctx {
        version,
        matching: &m,
    };
    let mut w = Writer::new();
    actions::put_actions(&mut w, &acts, cx(OFP10)).unwrap();
    assert_eq!(w.buf, hex(OF10_LEARN)[72..]);
    // NXAST_LEARN2: a limit and a result bit.
    let acts = flow_mod_actions(OF15_LEARN2);
    assert_eq!(
        format_actions(&acts),
        "learn(table=3,fin_idle_timeout=3,fin_hard_timeout=4,delete_learned,limit=5,\
         result_dst=NXM_NX_REG2[3],NXM_OF_ETH_TYPE[]=0x800,NXM_OF_IP_SRC[]=0xa000001,\
         load:0x123->NXM_NX_REG3[4..20])"
    );
    let raw = hex(OF15_LEARN2);
    let at = raw
        .windows(10)
        .position(|x| x == hex("ffff005000002320002d"))
        .unwrap();
    let mut w = Writer::new();
    actions::put_actions(&mut w, &acts, cx(OFP15)).unwrap();
    assert_eq!(w.buf, raw[at..at + 0x50]);
}

#[test]
fn learn_texts_round_trip_in_every_version() {
    use flowpath_ofproto::parse::parse_rule;
    for text in [
        "actions=learn(table=1,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])",
        "actions=learn(table=10,idle_timeout=60,hard_timeout=120,priority=100,cookie=0xabc,send_flow_rem,delete_learned,fin_idle_timeout=5,fin_hard_timeout=6,NXM_NX_REG0[]=0x12345678,load:NXM_NX_REG1[0..7]->NXM_NX_REG2[8..15])",
        "ip,actions=learn(limit=10,result_dst=reg0[31],dl_type=0x800,NXM_OF_IP_DST[]=NXM_OF_IP_SRC[],load:0x1->NXM_NX_REG3[0])",
    ] {
        let rule = parse_rule(text).unwrap();
        for version in [OFP10, OFP13, OFP15] {
            let m = Match::catchall();
            let mut w = Writer::new();
            let cx = Ctx {
                version,
                matching: &m,
            };
            actions::put_actions(&mut w, &rule.actions, cx).unwrap();
            let mut back = Vec::new();
            actions::pull_actions(&mut Reader::new(&w.buf), version, &mut back).unwrap();
            assert_eq!(
                format_actions(&back),
                format_actions(&rule.actions),
                "{text} in {version}"
            );
        }
    }
}

#[test]
fn group_statistics_and_features_have_open_vswitch_layouts() {
    let e = group_stats_entry(OFP13, 7, 2, (10, 1000), &[(4, 400), (6, 600)], (1, 2));
    assert_eq!(e.len(), 40 + 2 * 16);
    assert_eq!(u16::from_be_bytes([e[0], e[1]]) as usize, e.len());
    assert_eq!(&e[4..12], &[0, 0, 0, 7, 0, 0, 0, 2]);
    let f = group_features_body(OFP13);
    assert_eq!(f.len(), 40);
    assert_eq!(&f[..8], &[0, 0, 0, 0xf, 0, 0, 0, 7]);
}

#[test]
fn nicira_group_action_is_laid_out_as_open_vswitch() {
    // ovs-ofctl -O OpenFlow10 add-flow br0 priority=5,actions=group:2
    let h = "010e005800000006003820ff00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000005ffffffffffff0000ffff0010000023200028000000000002";
    let acts = flow_mod_actions(h);
    assert_eq!(acts, vec![Action::Group(2)]);
    let m = Match::catchall();
    let mut w = Writer::new();
    let cx = Ctx {
        version: OFP10,
        matching: &m,
    };
    actions::put_actions(&mut w, &acts, cx).unwrap();
    assert_eq!(w.buf, hex(h)[72..]);
}

#[test]
fn a_group_mod_with_an_all_zero_set_field_mask_is_refused() {
    // Found by the `openflow` fuzz target: an OpenFlow 1.3 group_mod whose
    // bucket sets a non-maskable field under a mask of zero bits. The
    // decoder shifted by 128 and panicked; it must answer with an error.
    let mut m = base64_decode(
        "BA8BBPcBAFqmpVpaWhAAAABdASAwAFNTU/sBAAkQAAAAGQAQAAABBAAAAAAAAAAAFAAACRAAAAwAAAAAAAAAABl6ABAAAAEEAAD/AKalWlpaEAAAABAAAGNHCAgA+wkACRAAAAAQACAAAAAAAAAB/wUAAAYAAAAADwAIARMBBPcBAFqmpVpaWhAAJe8AAA==",
    );
    let n = m.len() as u16;
    m[2..4].copy_from_slice(&n.to_be_bytes());
    for st in [
        ConnState::default(),
        ConnState {
            flow_mod_table_id: true,
        },
    ] {
        assert!(decode(&m, st).is_err());
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = s.bytes().filter(|&c| c != b'=').map(val).collect();
    let mut out = Vec::new();
    for chunk in digits.chunks(4) {
        let mut acc = 0u32;
        for (i, d) in chunk.iter().enumerate() {
            acc |= u32::from(*d) << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((acc >> (16 - 8 * i)) as u8);
        }
    }
    out
}
