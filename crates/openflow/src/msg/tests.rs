use super::*;
use flowpath_ofproto::parse::parse_rule;

fn roundtrip(dialect: Dialect, version: u8, text: &str) {
    let rule = parse_rule(text).unwrap();
    let entry = flow_stats_entry(version, dialect, &rule, &FlowCounters::default())
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(entry.len() % 8, 0, "{text}");
    let _ = entry;
}

#[test]
fn flow_entries_encode() {
    for text in [
        "priority=5,tcp,tp_dst=80,actions=output:2",
        "table=3,priority=1,reg0=5,actions=resubmit(,4),load:0x1->NXM_NX_REG1[0..3]",
        "priority=7,ip,actions=mod_nw_src:1.2.3.4,dec_ttl,NORMAL",
    ] {
        roundtrip(Dialect::Nx, OFP10, text);
        roundtrip(Dialect::Oxm, OFP13, text);
    }
}

#[test]
fn hello_negotiates_the_highest_common_version() {
    assert_eq!(negotiate(OFP15, (1 << OFP10) | (1 << OFP13)), Some(OFP13));
    assert_eq!(negotiate(OFP10, 1 << OFP10), Some(OFP10));
    assert_eq!(negotiate(0x02, 1 << 0x02), None);
    let h = encode_hello(OFP15);
    match decode(&h, ConnState::default()).unwrap().request {
        Request::Hello { versions } => assert_eq!(negotiate(OFP15, versions), Some(OFP15)),
        r => panic!("{r:?}"),
    }
}

#[test]
fn bad_messages_get_errors() {
    let st = ConnState::default();
    // Length field longer than the bytes.
    assert_eq!(
        decode(&[1, 2, 0, 12, 0, 0, 0, 1], st).unwrap_err(),
        BRC_BAD_LEN_E
    );
    // Unknown type in OpenFlow 1.0.
    assert_eq!(
        decode(&[1, 30, 0, 8, 0, 0, 0, 1], st).unwrap_err(),
        BRC_BAD_TYPE
    );
    // Unsupported version.
    assert_eq!(
        decode(&[2, 2, 0, 8, 0, 0, 0, 1], st).unwrap_err(),
        BRC_BAD_VERSION
    );
}

/// An OpenFlow 1.5 packet-out with `oxms` as its match and an output
/// to port 2.
fn packet_out15(oxms: &[u8]) -> Vec<u8> {
    let mlen = 4 + oxms.len();
    let mut m = vec![0, 1, 0, mlen as u8];
    m.extend_from_slice(oxms);
    m.resize(mlen.next_multiple_of(8), 0);
    let act = [0, 0, 0, 16, 0, 0, 0, 2, 0xff, 0xff, 0, 0, 0, 0, 0, 0];
    let mut b = vec![OFP15, 13, 0, 0, 0, 0, 0, 7];
    b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 16, 0, 0]);
    b.extend_from_slice(&m);
    b.extend_from_slice(&act);
    b.extend_from_slice(&[0xff; 14]);
    let len = b.len() as u16;
    b[2..4].copy_from_slice(&len.to_be_bytes());
    b
}

#[test]
fn packet_out15_takes_pipeline_fields_only() {
    let st = ConnState::default();
    // OXM in_port = 1.
    let in_port = [0x80, 0x00, 0x00, 0x04, 0, 0, 0, 1];
    match decode(&packet_out15(&in_port), st).unwrap().request {
        Request::PacketOut(p) => assert_eq!(p.in_port, 1),
        r => panic!("{r:?}"),
    }
    // And eth_type = 0x0800: not a pipeline field (as Open vSwitch).
    let mut more = in_port.to_vec();
    more.extend_from_slice(&[0x80, 0x00, 0x0a, 0x02, 0x08, 0x00]);
    assert_eq!(
        decode(&packet_out15(&more), st).unwrap_err(),
        BRC_PIPELINE_FIELDS_ONLY
    );
    // No in_port.
    assert_eq!(decode(&packet_out15(&[]), st).unwrap_err(), BRC_BAD_PORT);
}

/// Taking the full messages of a long reply as it is built gives the same
/// messages as building it whole: every one but the last says "more".
#[test]
fn a_long_reply_taken_in_parts_is_the_whole_reply() {
    let entry = [7u8; 1000];
    let mut whole = StatsReply::new(OFP13, 9, stats::FLOW, None);
    let mut parts = StatsReply::new(OFP13, 9, stats::FLOW, None);
    let mut got = Vec::new();
    for i in 0..300 {
        whole.push(&entry);
        parts.push(&entry);
        if i % 37 == 0 {
            got.extend(parts.take_full());
        }
    }
    got.extend(parts.finish());
    let whole = whole.finish();
    assert!(whole.len() > 3);
    assert_eq!(got, whole);
    let more = |m: &Vec<u8>| u16::from_be_bytes([m[10], m[11]]) & 1 == 1;
    assert!(got[..got.len() - 1].iter().all(more));
    assert!(!more(got.last().unwrap()));
}
