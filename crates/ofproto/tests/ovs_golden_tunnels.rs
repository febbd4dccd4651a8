//! Native tunnelling against answers recorded from Open vSwitch 3.1
//! (`tools/ovs-compare.py --tunnels`, see `tools/ovs_compare_tunnels.py`):
//! each line of `tests/data/ovs31-tunnel-traces.jsonl` is a rule set, the
//! tunnel configuration both sides had (as `flowpath trace`'s options,
//! "tunnel_args") and OVS's megaflow and datapath actions for each of its
//! packets; replayed by the same machinery as `ovs_golden.rs`.

mod golden;

use golden::{at_least_in_rule_sets, check};

/// Native tunnelling (`tools/ovs-compare.py --tunnels`): tunnel ports
/// (VXLAN, Geneve, GRE; fixed and `flow` remotes and keys, IPv6, through a
/// gateway, to a neighbour not known), matches on and writes to the tunnel
/// fields (set_field, set_tunnel[64], load, move with registers; in
/// clones too), packets on tunnel ports with tunnel metadata and on
/// untunnelled ports (the `tnl_push` headers compared byte for byte), and
/// tunnel packets received on the underlay (`tnl_pop`). 310 rule sets x
/// (7 packets + 2 on the underlay), and 40 more (10 + 2) whose ports
/// include three with `in_key` and `out_key` apart (VNIs 44/55, any/66,
/// 88/flow), and 100 more (10 + 2) adding two with `tos=inherit` (one
/// with `ttl=inherit` too) and inner packets of other DSCPs and TTLs, and
/// 60 more (10 + 2) in which Geneve options take the value 0 (present:
/// matched as `tun_metadataN=0x0`, written by `set_field`, `load` and
/// `move`, carried by packets and pushed as `len=4,0`); one line per rule
/// set, each carrying the tunnel configuration as `flowpath trace`'s
/// options ("tunnel_args"); and one (seed 9104) whose packets leave with
/// 48 bytes of Geneve options (five options of 4 and 8 bytes: a 98-byte
/// header).
#[test]
fn tunnel_traces_match_ovs_3_1() {
    let data = include_str!("data/ovs31-tunnel-traces.jsonl");
    check(data, 3400);
    assert!(data.lines().count() >= 300);
    assert!(data.matches("tnl_push(").count() >= 1000);
    assert!(data.matches("tnl_pop(").count() >= 600);
    at_least_in_rule_sets(
        data,
        &[
            ("tnl_push(", 150),
            ("geneve(", 80),
            ("gre((", 45),
            ("vxlan(", 100),
            ("ipv6(src=fd00::100", 35),
            ("options({", 50),
            ("tun_metadata", 300),
            ("=NP", 200),
            ("tun_src=", 300),
            ("tun_flags=", 300),
            ("set_tunnel", 180),
            ("move:NXM_NX_TUN", 240),
            ("tun_gbp_id", 220),
            ("clone(", 200),
            ("in_key=44,out_key=55", 40),
            // Sent with an out_key other than the in_key.
            ("vni=0x37", 5),
            ("key=0x42", 5),
            ("ttl=inherit", 90),
            // The outer TTL and DSCP taken from the inner packet.
            (",proto=17,tos=0xb8,ttl=", 3),
            ("ttl=7,frag=", 3),
            // Options present with the value 0: pushed, matched, set.
            (",len=4,0}", 5),
            ("tun_metadata3=0x0", 2),
            ("set_field:0x0->tun_metadata", 8),
            // More than 40 bytes of options pushed.
            ("header(size=98,type=5,", 1),
        ],
    );
}
