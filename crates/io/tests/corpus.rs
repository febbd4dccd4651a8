//! Every capture of the shared corpus (`$FLOWPATH_PCAPS`, default
//! `<workspace>/../shared/pcaps`) opens and reads to its end or to one
//! clear error, never a panic; spot checks against values `tshark` reports
//! for the same files (timestamps, lengths, link types, packet counts).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use flowpath_io::{load_ethernet_frames, FileFormat, IoError, PcapReader};

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

fn corpus() -> Vec<PathBuf> {
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
    files
}

fn file(rel: &str) -> PathBuf {
    corpus_dir().join(rel)
}

struct Summary {
    packets: u64,
    by_link: BTreeMap<u16, u64>,
    error: Option<IoError>,
}

fn read_all(path: &Path) -> Result<Summary, IoError> {
    let mut r = PcapReader::open(path)?;
    let mut s = Summary {
        packets: 0,
        by_link: BTreeMap::new(),
        error: None,
    };
    while let Some(p) = r.next_packet() {
        match p {
            Ok(p) => {
                assert!(p.data.len() <= 64 << 20);
                s.packets += 1;
                *s.by_link.entry(p.link_type).or_default() += 1;
            }
            Err(e) => {
                assert!(s.error.is_none(), "a second error after {:?}", s.error);
                s.error = Some(e);
            }
        }
    }
    Ok(s)
}

#[test]
fn every_capture_reads_without_panic() {
    if !have_corpus("every_capture_reads_without_panic") {
        return;
    }
    let files = corpus();
    let (mut opened, mut packets, mut compressed) = (0, 0u64, 0);
    for f in &files {
        match read_all(f) {
            Ok(s) => {
                opened += 1;
                packets += s.packets;
                if let Some(e) = s.error {
                    println!("stopped early: {e}");
                }
            }
            Err(e @ IoError::Compressed { .. }) => {
                println!("refused: {e}");
                compressed += 1;
            }
            Err(e) => panic!("unexpected open error: {e}"),
        }
    }
    println!("{opened} files opened, {packets} packets, {compressed} compressed");
    assert_eq!(compressed, 1);
    assert_eq!(opened, files.len() - 1);
    assert!(packets >= 110_000, "only {packets} packets");
}

#[test]
fn packet_counts_and_link_types() {
    if !have_corpus("packet_counts_and_link_types") {
        return;
    }
    let cases: &[(&str, &[(u16, u64)])] = &[
        (
            "pcapplusplus/PcapExamples/pcapng-example.pcapng",
            &[(1, 59), (113, 100)],
        ),
        (
            "pcapplusplus/PcapExamples/many_interfaces-1.pcapng",
            &[(0, 2), (1, 62)],
        ),
        ("pcapplusplus/PacketExamples/GrePackets.pcap", &[(1, 7)]),
        ("pcapplusplus/PacketExamples/NullLoopback.pcap", &[(0, 3)]),
        (
            "pcapplusplus/PcapExamples/too_many_interfaces.pcapng",
            &[(1, 1)],
        ),
        ("zeek/ldap/gap-data-missing.pcapng", &[(1, 18)]),
        ("tcpdump/hoobr_lookup_nsap.pcap", &[(1, 9)]),
        ("tcpdump/bootp_asan.pcap", &[(1, 1)]),
        ("tcpdump/ipv6hdr-heapoverflow.pcap", &[(229, 1)]),
        ("tcpdump/llc-xid-heapoverflow.pcap", &[(100, 1)]),
        ("tcpdump/vsock-1.pcapng", &[(271, 10)]),
        ("tcpdump/icmp6_mobileprefix_asan.pcap", &[(1, 2)]),
        ("zeek/echo-connections.pcap", &[(1, 82582)]),
        ("tcpdump/empty.pcap", &[]),
        ("tcpdump/empty.pcapng", &[]),
    ];
    for (rel, want) in cases {
        let s = read_all(&file(rel)).unwrap_or_else(|e| panic!("{e}"));
        assert!(s.error.is_none(), "{rel}: {:?}", s.error);
        let want: BTreeMap<u16, u64> = want.iter().copied().collect();
        assert_eq!(s.by_link, want, "{rel}");
    }
}

/// (timestamp ns, caplen, orig len, interface)
type Seen = (u64, usize, u32, u32);

fn first_packets(rel: &str, n: usize) -> Vec<Seen> {
    let mut r = PcapReader::open(file(rel)).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap_or_else(|e| panic!("{e}"));
        out.push((p.timestamp_ns, p.data.len(), p.orig_len, p.interface));
        if out.len() == n {
            break;
        }
    }
    out
}

#[test]
fn timestamps_and_lengths_match_tshark() {
    if !have_corpus("timestamps_and_lengths_match_tshark") {
        return;
    }
    // (file, [(epoch ns, caplen, len, interface)]) as `tshark -T fields -e
    // frame.time_epoch -e frame.cap_len -e frame.len` prints them.
    let cases: &[(&str, &[Seen])] = &[
        (
            "tcpdump/tcp-handshake-nano.pcap",
            &[
                (1_418_145_369_924_505_488, 76, 76, 0),
                (1_418_145_370_052_027_262, 76, 76, 0),
            ],
        ),
        (
            "pcapplusplus/PcapExamples/nanosecs_big_endian.pcap",
            &[
                (1_766_361_926_167_647_291, 74, 74, 0),
                (1_766_361_926_167_658_091, 74, 74, 0),
            ],
        ),
        (
            "pcapplusplus/PcapExamples/microsecs_big_endian.pcap",
            &[(1_474_059_824_864_984_000, 1196, 1196, 0)],
        ),
        (
            "tcpdump/time_2106_overflow.pcapng",
            &[(4_294_967_296_000_000_000, 98, 98, 0)],
        ),
        (
            "pcapplusplus/PcapExamples/pcapng-example.pcapng",
            &[
                (1_422_527_998_578_402_281, 74, 74, 0),
                (2_894_531_997_938_836_488, 74, 74, 0),
                (1_422_527_998_578_455_857, 66, 66, 0),
            ],
        ),
        (
            // Sub-second field 1,000,000 µs: rolls into the next second.
            "tcpdump/timestamp_invalid_micro.pcap",
            &[
                (1_418_145_369_999_999_000, 76, 76, 0),
                (1_418_145_371_000_000_000, 76, 76, 0),
            ],
        ),
        (
            // Second record: caplen = len = 0.
            "tcpdump/icmp6_mobileprefix_asan.pcap",
            &[
                (1_398_584_960_999_999_000, 60, 98358, 0),
                (69_448_201_000_000_000, 0, 0, 0),
            ],
        ),
        (
            "zeek/ldap/gap-data-missing.pcapng",
            &[(1_725_966_494_956_327_000, 90, 90, 48)],
        ),
        (
            "tcpdump/isup.pcap",
            &[(1_089_032_999_862_196_000, 146, 146, 0)],
        ),
    ];
    for (rel, want) in cases {
        assert_eq!(first_packets(rel, want.len()), *want, "{rel}");
    }
}

#[test]
fn formats_detected_by_magic_not_name() {
    if !have_corpus("formats_detected_by_magic_not_name") {
        return;
    }
    let r = PcapReader::open(file("pcapplusplus/PacketExamples/IcmpPackets.pcap")).unwrap();
    assert_eq!(r.format(), FileFormat::PcapNg);
    let r = PcapReader::open(file("tcpdump/isup.pcap")).unwrap();
    assert_eq!(
        r.format(),
        FileFormat::Pcap {
            big_endian: true,
            nanosecond: false
        }
    );
    let r = PcapReader::open(file("zeek/vntag.pcap")).unwrap();
    assert_eq!(
        r.format(),
        FileFormat::Pcap {
            big_endian: false,
            nanosecond: true
        }
    );
}

#[test]
fn zstd_file_is_refused_clearly() {
    if !have_corpus("zstd_file_is_refused_clearly") {
        return;
    }
    let rel = "pcapplusplus/PcapExamples/file_heuristics/pcapng-example.pcapng.zst";
    let e = PcapReader::open(file(rel)).err().expect("must fail");
    assert!(matches!(e, IoError::Compressed { kind: "zstd", .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("compressed capture") && msg.contains("pcapng-example.pcapng.zst"),
        "{msg}"
    );
}

#[test]
fn load_ethernet_frames_accepts_ethernet_and_rejects_others() {
    if !have_corpus("load_ethernet_frames_accepts_ethernet_and_rejects_others") {
        return;
    }
    let f = load_ethernet_frames(file("pcapplusplus/PcapExamples/example.pcap")).unwrap();
    assert_eq!(f.len(), 4631);
    assert!(f.stopped_early.is_none());
    assert_eq!(f.iter().count(), 4631);
    assert_eq!(f.get(0).map(<[u8]>::len), Some(f.offsets[1]));

    let e = load_ethernet_frames(file("pcapplusplus/PcapExamples/raw_ip.pcap")).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            IoError::NotEthernet {
                link_type: 101,
                record: 1,
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("raw_ip.pcap") && msg.contains("101"), "{msg}");

    // A pcapng whose second interface is Linux SLL.
    let e =
        load_ethernet_frames(file("pcapplusplus/PcapExamples/pcapng-example.pcapng")).unwrap_err();
    assert!(
        matches!(e, IoError::NotEthernet { link_type: 113, .. }),
        "{e}"
    );
}
