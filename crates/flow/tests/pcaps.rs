//! Extraction over the shared capture corpus (`$FLOWPATH_PCAPS`, default
//! `<workspace>/../shared/pcaps`): every Ethernet packet of every file is
//! extracted without panic and with sane layer offsets; non-Ethernet link
//! types and unreadable files are reported and counted. Spot checks compare
//! fields with what `tcpdump -nn -e -v` prints for the same packets.

use std::path::{Path, PathBuf};

use flowpath_flow::extract::{
    extract_general, extract_with_layers, possible_words, used_words, Layers, NONE,
};
use flowpath_flow::key::{FlowKey, FRAG_ANY, FRAG_LATER, VLAN_CFI};
use flowpath_io::{PcapReader, LINKTYPE_ETHERNET};

fn corpus_dir() -> PathBuf {
    flowpath_io::corpus::shared_pcaps_dir(env!("CARGO_MANIFEST_DIR"))
}

/// Whether the corpus is beside the checkout; when it is not, the test
/// returns at once, saying so (and fails under CI): see
/// `flowpath_io::corpus::shared_available`.
fn have_corpus(test: &str) -> bool {
    flowpath_io::corpus::corpus_or_skip(env!("CARGO_MANIFEST_DIR"), test).is_some()
}

fn walk(d: &Path, out: &mut Vec<PathBuf>) {
    let files =
        flowpath_io::corpus::capture_files(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    out.extend(files);
}

fn check_invariants(frame: &[u8], k: &FlowKey, l: &Layers, in_port: u32) {
    assert_eq!(k.in_port(), in_port);
    assert_eq!(
        (k.recirc_id(), k.dp_hash()),
        (0, 0),
        "no recirculation metadata"
    );
    assert_eq!(k.w[14], 0);
    if !matches!(k.dl_type(), 0x8847 | 0x8848) {
        assert_eq!(k.w[15], 0, "MPLS label stack entries only for MPLS");
        // (The third entry's bits hold an ND packet's reserved word.)
        let nd = k.nw_proto() == 58 && matches!(k.tp_src(), 135 | 136) && k.tp_dst() == 0;
        if !nd {
            assert_eq!(k.mpls_lse2(), 0, "MPLS label stack entries only for MPLS");
        }
    }
    assert_words_possible(k);
    if l.l3 != NONE {
        assert!(usize::from(l.l3) <= frame.len());
    }
    if l.l4 != NONE {
        assert!(l.l3 != NONE && l.l3 < l.l4, "{l:?}");
        assert!(usize::from(l.l4) <= frame.len());
    }
    assert!(l.vlan_count <= 2);
    if frame.len() < 14 {
        assert_eq!(*l, Layers::EMPTY);
    }
}

#[derive(Default, Debug)]
struct Tally {
    extracted: u64,
    non_ethernet: u64,
    ipv4: u64,
    ipv6: u64,
    arp: u64,
    l4: u64,
    vlan2: u64,
    later_frags: u64,
    nd_targets: u64,
}

#[test]
fn every_ethernet_packet_of_the_corpus_extracts() {
    if !have_corpus("every_ethernet_packet_of_the_corpus_extracts") {
        return;
    }
    let dir = corpus_dir();
    assert!(
        dir.is_dir(),
        "pcap corpus missing: {} (set FLOWPATH_PCAPS)",
        dir.display()
    );
    let mut files = Vec::new();
    walk(&dir, &mut files);
    assert!(
        files.len() >= 150,
        "only {} captures in {}",
        files.len(),
        dir.display()
    );

    let mut t = Tally::default();
    let mut unreadable = 0;
    let mut stopped = 0;
    for f in &files {
        let mut r = match PcapReader::open(f) {
            Ok(r) => r,
            Err(e) => {
                println!("unreadable: {e}");
                unreadable += 1;
                continue;
            }
        };
        let mut skipped = 0;
        let mut port = 0u32;
        while let Some(p) = r.next_packet() {
            let p = match p {
                Ok(p) => p,
                Err(e) => {
                    println!("stopped: {e}");
                    stopped += 1;
                    break;
                }
            };
            if p.link_type != LINKTYPE_ETHERNET {
                skipped += 1;
                continue;
            }
            // Ports are 16 bits.
            port = port % 0xffff + 1;
            let (k, l) = extract_with_layers(p.data, port);
            check_invariants(p.data, &k, &l, port);
            // The straight-line common case gives the general walk's answer.
            assert_eq!(
                (k, l),
                extract_general(p.data, port),
                "{}: {:02x?}",
                f.display(),
                p.data
            );
            t.extracted += 1;
            t.ipv4 += u64::from(k.dl_type() == 0x0800 && k.nw_ttl() != 0);
            t.ipv6 += u64::from(k.dl_type() == 0x86dd && k.ipv6_src() | k.ipv6_dst() != 0);
            t.arp += u64::from(k.dl_type() == 0x0806 && k.arp_sha() != 0);
            t.l4 += u64::from(l.l4 != NONE);
            t.vlan2 += u64::from(k.vlan_tci_inner() != 0);
            t.later_frags += u64::from(k.nw_frag() & FRAG_LATER != 0);
            t.nd_targets += u64::from(k.nd_target() != 0);
        }
        if skipped > 0 {
            println!("{}: {skipped} non-Ethernet packets skipped", f.display());
            t.non_ethernet += skipped;
        }
    }
    println!("{t:?}; {unreadable} unreadable files, {stopped} stopped early");
    assert_eq!(unreadable, 1, "only the zstd file");
    // Measured on the 199-file corpus: 109,606 Ethernet packets, 426 others.
    assert!(t.extracted >= 109_000, "{t:?}");
    assert!(t.non_ethernet >= 400, "{t:?}");
    assert!(t.ipv4 > 90_000 && t.ipv6 > 1_000 && t.arp > 2_000, "{t:?}");
    assert!(
        t.l4 > 90_000 && t.vlan2 > 20 && t.later_frags > 100 && t.nd_targets > 10,
        "{t:?}"
    );
}

/// Keys of the Ethernet packets of `rel`, in order (index 0 = tcpdump's 1).
fn keys(rel: &str) -> Vec<(FlowKey, Layers)> {
    let mut r = PcapReader::open(corpus_dir().join(rel)).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.link_type, LINKTYPE_ETHERNET, "{rel}");
        out.push(extract_with_layers(p.data, 1));
    }
    out
}

fn ip4(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

fn ip6(s: &str) -> u128 {
    u128::from(
        s.parse::<std::net::Ipv6Addr>()
            .unwrap_or_else(|e| panic!("{s}: {e}")),
    )
}

fn mac(s: &str) -> u64 {
    s.split(':').fold(0, |acc, h| {
        (acc << 8) | u64::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{s}: {e}"))
    })
}

#[test]
fn qinq_arp() {
    if !have_corpus("qinq_arp") {
        return;
    }
    // vlan 200, p 0 (S-tag 0x88a8) / vlan 2001, p 0; ARP who-has
    // 172.21.79.100 tell 172.21.79.97, then the reply.
    let k = keys("tcpdump/802.1ad_QinQ.pcap");
    let (req, l) = k[0];
    assert_eq!(
        (req.vlan_tci(), req.vlan_tci_inner()),
        (200 | VLAN_CFI, 2001 | VLAN_CFI)
    );
    assert_eq!((req.dl_type(), l.vlan_count, l.l3), (0x0806, 2, 22));
    assert_eq!(req.dl_src(), mac("00:20:d2:5a:fb:3f"));
    assert_eq!(req.dl_dst(), mac("ff:ff:ff:ff:ff:ff"));
    assert_eq!(req.nw_proto(), 1);
    assert_eq!(
        (req.nw_src(), req.nw_dst()),
        (ip4(172, 21, 79, 97), ip4(172, 21, 79, 100))
    );
    assert_eq!(
        (req.arp_sha(), req.arp_tha()),
        (mac("00:20:d2:5a:fb:3f"), 0)
    );
    let (rep, _) = k[1];
    assert_eq!(rep.nw_proto(), 2);
    assert_eq!(
        (rep.nw_src(), rep.nw_dst()),
        (ip4(172, 21, 79, 100), ip4(172, 21, 79, 97))
    );
    assert_eq!(
        (rep.arp_sha(), rep.arp_tha()),
        (mac("00:80:ea:81:88:63"), mac("00:20:d2:5a:fb:3f"))
    );
}

#[test]
fn vlan_pcp_and_dei() {
    if !have_corpus("vlan_pcp_and_dei") {
        return;
    }
    // vlan 666, p 5, DEI / vlan 200, p 2; ARP 192.168.2.200 -> .254.
    let (k, _) = keys("pcapplusplus/PacketExamples/ArpRequestWithVlan.pcap")[0];
    assert_eq!(k.vlan_tci(), (5 << 13) | 0x1000 | 666);
    assert_eq!(k.vlan_tci_inner(), (2 << 13) | VLAN_CFI | 200);
    assert_eq!(
        (k.nw_src(), k.nw_dst()),
        (ip4(192, 168, 2, 200), ip4(192, 168, 2, 254))
    );
}

#[test]
fn three_tags_stop_at_the_third_tpid() {
    if !have_corpus("three_tags_stop_at_the_third_tpid") {
        return;
    }
    // vlan 30 / vlan 20 / vlan 10 / IPv4 TCP: only two tags parsed.
    for (k, l) in keys("zeek/vlan-qinqinq.pcap") {
        assert_eq!(
            (k.vlan_tci(), k.vlan_tci_inner()),
            (30 | VLAN_CFI, 20 | VLAN_CFI)
        );
        assert_eq!((k.dl_type(), l.l3, l.l4), (0x8100, 22, NONE));
        assert_eq!((k.nw_src(), k.tp_src()), (0, 0));
    }
}

#[test]
fn snap_encapsulated_tcp() {
    if !have_corpus("snap_encapsulated_tcp") {
        return;
    }
    // 802.3 LLC/SNAP, IPv4 192.168.1.1.12345 > 192.168.1.2.80 SYN.
    let (k, l) = keys("zeek/snap-tcp.pcap")[0];
    assert_eq!((k.dl_type(), l.l3, l.l4), (0x0800, 22, 42));
    assert_eq!(
        (k.nw_src(), k.nw_dst()),
        (ip4(192, 168, 1, 1), ip4(192, 168, 1, 2))
    );
    assert_eq!(
        (
            k.nw_proto(),
            k.nw_ttl(),
            k.tp_src(),
            k.tp_dst(),
            k.tcp_flags()
        ),
        (6, 64, 12345, 80, 0x002)
    );
}

#[test]
fn tcp_flags_and_sctp() {
    if !have_corpus("tcp_flags_and_sctp") {
        return;
    }
    // 127.0.0.1.80 > 127.0.0.1.55920: Flags [S.]
    let (k, _) = keys("tcpdump/print-flags.pcap")[1];
    assert_eq!((k.tp_src(), k.tp_dst(), k.tcp_flags()), (80, 55920, 0x012));
    assert_eq!(k.nw_src(), ip4(127, 0, 0, 1));
    // tos 0x10, SCTP 192.168.170.8.7 > 192.168.170.56.7
    let (k, _) = keys("zeek/communityid/sctp.pcap")[0];
    assert_eq!(
        (k.nw_proto(), k.nw_tos(), k.tp_src(), k.tp_dst()),
        (132, 0x10, 7, 7)
    );
    assert_eq!(k.nw_dst(), ip4(192, 168, 170, 56));
}

#[test]
fn neighbor_discovery() {
    if !have_corpus("neighbor_discovery") {
        return;
    }
    let k = keys("pcapplusplus/PacketExamples/IcmpV6_NeighAdvSoli.pcap");
    // NS from :: (no options), who has fe80::c000:54ff:fef5:0; class 0xe0.
    let (ns, _) = k[0];
    assert_eq!((ns.nw_proto(), ns.tp_src(), ns.tp_dst()), (58, 135, 0));
    assert_eq!((ns.nw_tos(), ns.nw_ttl()), (0xe0, 255));
    assert_eq!(ns.ipv6_dst(), ip6("ff02::1:fff5:0"));
    assert_eq!(ns.nd_target(), ip6("fe80::c000:54ff:fef5:0"));
    assert_eq!((ns.arp_sha(), ns.arp_tha()), (0, 0));
    // NA with target link-address c2:00:54:f5:00:00.
    let (na, _) = k[1];
    assert_eq!(na.tp_src(), 136);
    assert_eq!(na.nd_target(), ip6("fe80::c000:54ff:fef5:0"));
    assert_eq!((na.arp_sha(), na.arp_tha()), (0, mac("c2:00:54:f5:00:00")));

    let k = keys("zeek/ipv6-http-atomic-frag.pcap");
    // NS with source link-address 00:10:18:95:31:6a, who has 2001:db8:1::1.
    let (ns, _) = k[1];
    assert_eq!((ns.tp_src(), ns.nd_target()), (135, ip6("2001:db8:1::1")));
    assert_eq!((ns.arp_sha(), ns.arp_tha()), (mac("00:10:18:95:31:6a"), 0));
    // Destination options, then TCP 36951 > 80 [S].
    let (syn, l) = k[3];
    assert_eq!(
        (syn.nw_proto(), syn.nw_frag(), syn.tp_src(), syn.tp_dst()),
        (6, 0, 36951, 80)
    );
    assert_eq!((syn.tcp_flags(), l.l4), (0x002, 14 + 40 + 8));
}

#[test]
fn fragments() {
    if !have_corpus("fragments") {
        return;
    }
    let k = keys("zeek/ipv6-fragmented-dns.pcap");
    // frag (0x00000001:2896|342): a later fragment.
    let (later, l) = k[3];
    assert_eq!(
        (later.nw_proto(), later.nw_frag(), later.tp_src(), l.l4),
        (44, FRAG_ANY | FRAG_LATER, 0, NONE)
    );
    assert_eq!(
        (later.nw_ttl(), later.ipv6_src()),
        (53, ip6("2607:f740:b::f93"))
    );
    // frag (0x00000002:0|1432) 53 > 51851: the first fragment keeps L4.
    let (first, _) = k[5];
    assert_eq!(
        (
            first.nw_proto(),
            first.nw_frag(),
            first.tp_src(),
            first.tp_dst()
        ),
        (17, FRAG_ANY, 53, 51851)
    );

    let k = keys("pcapplusplus/PcapExamples/ip4_fragments.pcap");
    // id 7840 offset 0 flags [+]: 10.118.213.212.789 > 10.118.213.211.2049
    let (first, _) = k[0];
    assert_eq!(
        (first.nw_frag(), first.tp_src(), first.tp_dst()),
        (FRAG_ANY, 789, 2049)
    );
    // offset 1480: no transport fields; last (offset 7400, no MF) too.
    for i in [1, 5] {
        let (later, l) = k[i];
        assert_eq!(
            (later.nw_proto(), later.nw_frag(), later.tp_src(), l.l4),
            (17, FRAG_ANY | FRAG_LATER, 0, NONE)
        );
    }
}

#[test]
fn malformed_ip_headers_give_l2_only() {
    if !have_corpus("malformed_ip_headers_give_l2_only") {
        return;
    }
    for rel in [
        "tcpdump/ipv4_invalid_total_length.pcap",
        "tcpdump/ipv4_invalid_hdr_length.pcap",
        "tcpdump/ipv4_invalid_length.pcap",
        "tcpdump/kday1.pcap",
        "tcpdump/ipv6_invalid_length.pcap",
        "tcpdump/ipv6_invalid_length_2.pcap",
        "zeek/ip-bogus-header-len.pcap",
        "tcpdump/bigtcp-ipv4.pcap",
    ] {
        for (k, l) in keys(rel) {
            assert!(k.dl_type() == 0x0800 || k.dl_type() == 0x86dd, "{rel}");
            assert_eq!(
                (k.nw_src(), k.ipv6_src(), k.nw_ttl(), l.l4),
                (0, 0, 0, NONE),
                "{rel}"
            );
        }
    }
}

/// The key uses only the words `possible_words` allows for its protocol
/// (what exact-match megaflows cover).
fn assert_words_possible(k: &FlowKey) {
    let extra = used_words(k) & !possible_words(k.dl_type(), k.nw_proto());
    assert_eq!(extra, 0, "words {extra:#x} used by {k:?}");
}
