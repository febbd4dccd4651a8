//! Hand-made pcap and pcapng byte images: byte orders, resolutions,
//! per-section interface state, fallbacks, truncation and corruption, the
//! writer round trip, and a property test that no mutation of a valid file
//! makes the reader panic or loop.

use std::io::Cursor;

use flowpath_io::{FileFormat, IoError, PcapReader, PcapWriter};
use proptest::prelude::*;

// ---------------------------------------------------------------- pcap ---

fn pcap_header(big: bool, nano: bool, snaplen: u32, link: u32) -> Vec<u8> {
    let magic: u32 = if nano { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    let mut h = Vec::new();
    let w32 = |h: &mut Vec<u8>, v: u32| {
        h.extend(if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        })
    };
    let w16 = |h: &mut Vec<u8>, v: u16| {
        h.extend(if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        })
    };
    w32(&mut h, magic);
    w16(&mut h, 2);
    w16(&mut h, 4);
    w32(&mut h, 0);
    w32(&mut h, 0);
    w32(&mut h, snaplen);
    w32(&mut h, link);
    h
}

fn pcap_record(big: bool, sec: u32, frac: u32, data: &[u8], orig: u32) -> Vec<u8> {
    let mut r = Vec::new();
    for v in [sec, frac, data.len() as u32, orig] {
        r.extend(if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    r.extend_from_slice(data);
    r
}

fn reader(bytes: Vec<u8>) -> Result<PcapReader, IoError> {
    PcapReader::from_reader("mem.pcap", Cursor::new(bytes))
}

/// (link type, timestamp ns, data, orig len)
type Got = (u16, u64, Vec<u8>, u32);

fn collect(r: &mut PcapReader) -> (Vec<Got>, Option<IoError>) {
    let mut pkts = Vec::new();
    let mut err = None;
    for p in r.by_ref() {
        match p {
            Ok(p) => pkts.push((p.link_type, p.timestamp_ns, p.data, p.orig_len)),
            Err(e) => err = Some(e),
        }
    }
    (pkts, err)
}

#[test]
fn pcap_byte_orders_and_resolutions() {
    for big in [false, true] {
        for nano in [false, true] {
            let mut f = pcap_header(big, nano, 65535, 1);
            f.extend(pcap_record(big, 10, 5, &[1, 2, 3], 3));
            f.extend(pcap_record(big, 11, 0, &[], 0));
            let mut r = reader(f).unwrap();
            assert_eq!(
                r.format(),
                FileFormat::Pcap {
                    big_endian: big,
                    nanosecond: nano
                }
            );
            let (p, e) = collect(&mut r);
            assert!(e.is_none());
            let frac = if nano { 5 } else { 5_000 };
            assert_eq!(p[0], (1, 10_000_000_000 + frac, vec![1, 2, 3], 3));
            assert_eq!(p[1], (1, 11_000_000_000, vec![], 0));
            assert_eq!(p.len(), 2);
        }
    }
}

#[test]
fn pcap_link_type_is_masked_and_caplen_over_snaplen_accepted() {
    let mut f = pcap_header(false, false, 4, 0x3000_0001);
    f.extend(pcap_record(false, 1, 0, &[9; 10], 262_144));
    let mut r = reader(f).unwrap();
    assert_eq!(r.interfaces()[0].link_type, 1);
    let (p, e) = collect(&mut r);
    assert!(e.is_none());
    assert_eq!((p[0].0, p[0].2.len(), p[0].3), (1, 10, 262_144));
}

#[test]
fn pcap_truncated_final_record_is_reported_once() {
    let mut f = pcap_header(false, false, 65535, 1);
    f.extend(pcap_record(false, 1, 0, &[1; 60], 60));
    f.extend(pcap_record(false, 2, 0, &[2; 60], 60));
    for cut in [f.len() - 1, f.len() - 60, f.len() - 70, f.len() - 76 + 3] {
        let mut r = reader(f[..cut].to_vec()).unwrap();
        let (p, e) = collect(&mut r);
        assert_eq!(p.len(), 1, "cut {cut}");
        match e {
            Some(IoError::Truncated {
                record: 2,
                have,
                need,
                ..
            }) => {
                assert_eq!(have as usize, cut - 24 - 76);
                assert!(need > have);
            }
            other => panic!("cut {cut}: {other:?}"),
        }
        assert!(r.next_packet().is_none(), "ends after the error");
    }
}

#[test]
fn pcap_implausible_caplen_is_corrupt() {
    let mut f = pcap_header(false, false, 65535, 1);
    let mut rec = pcap_record(false, 1, 0, &[], 0);
    rec[8..12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    f.extend(rec);
    let mut r = reader(f).unwrap();
    let (p, e) = collect(&mut r);
    assert!(p.is_empty());
    assert!(
        matches!(e, Some(IoError::BadRecord { record: 1, .. })),
        "{e:?}"
    );
}

#[test]
fn header_errors() {
    assert!(matches!(reader(vec![]), Err(IoError::Empty { .. })));
    assert!(matches!(
        reader(vec![0xd4, 0xc3]),
        Err(IoError::UnknownFormat { .. })
    ));
    let e = reader(b"GET / HTTP/1.1\r\n".to_vec()).err().unwrap();
    assert!(e.to_string().contains("not a pcap or pcapng file"), "{e}");
    let h = pcap_header(false, false, 65535, 1);
    assert!(matches!(
        reader(h[..20].to_vec()),
        Err(IoError::BadHeader { .. })
    ));
    assert!(matches!(
        reader(vec![0x1f, 0x8b, 8, 0]),
        Err(IoError::Compressed { kind: "gzip", .. })
    ));
    // Header only: a valid empty capture.
    let mut r = reader(h).unwrap();
    assert!(r.next_packet().is_none());
}

#[test]
fn open_missing_file_names_it() {
    let e = PcapReader::open("/nonexistent/x.pcap").err().unwrap();
    assert!(matches!(e, IoError::Open { .. }));
    assert!(e.to_string().contains("/nonexistent/x.pcap"));
}

// -------------------------------------------------------------- pcapng ---

fn w32(big: bool, v: u32) -> [u8; 4] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

fn w16(big: bool, v: u16) -> [u8; 2] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

fn block(big: bool, ty: u32, body: &[u8]) -> Vec<u8> {
    let pad = (4 - body.len() % 4) % 4;
    let len = (12 + body.len() + pad) as u32;
    let mut b = Vec::new();
    b.extend(w32(big, ty));
    b.extend(w32(big, len));
    b.extend_from_slice(body);
    b.extend(std::iter::repeat_n(0, pad));
    b.extend(w32(big, len));
    b
}

fn shb(big: bool) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(w32(big, 0x1a2b_3c4d));
    body.extend(w16(big, 1));
    body.extend(w16(big, 0));
    body.extend(if big {
        (-1i64).to_be_bytes()
    } else {
        (-1i64).to_le_bytes()
    });
    block(big, 0x0a0d_0d0a, &body)
}

/// IDB with optional if_tsresol and optional extra raw option bytes.
fn idb(big: bool, link: u16, snaplen: u32, tsresol: Option<u8>, extra_opt: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(w16(big, link));
    body.extend(w16(big, 0));
    body.extend(w32(big, snaplen));
    if let Some(r) = tsresol {
        body.extend(w16(big, 9));
        body.extend(w16(big, 1));
        body.extend([r, 0, 0, 0]);
    }
    body.extend_from_slice(extra_opt);
    if tsresol.is_some() || !extra_opt.is_empty() {
        body.extend([0, 0, 0, 0]);
    }
    block(big, 1, &body)
}

fn epb(big: bool, iface: u32, ts: u64, data: &[u8], orig: u32) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(w32(big, iface));
    body.extend(w32(big, (ts >> 32) as u32));
    body.extend(w32(big, ts as u32));
    body.extend(w32(big, data.len() as u32));
    body.extend(w32(big, orig));
    body.extend_from_slice(data);
    body.extend(std::iter::repeat_n(0, (4 - data.len() % 4) % 4));
    block(big, 6, &body)
}

#[test]
fn pcapng_sections_interfaces_and_resolutions() {
    let mut f = shb(false);
    f.extend(idb(false, 1, 0, Some(9), &[]));
    f.extend(idb(false, 113, 128, None, &[]));
    f.extend(epb(false, 0, 1_500, &[1, 2, 3, 4, 5], 5));
    f.extend(epb(false, 1, 7, &[6; 8], 100));
    f.extend(block(false, 5, &[0; 8])); // statistics: skipped
                                        // A big-endian section: interfaces start over.
    f.extend(shb(true));
    f.extend(idb(true, 101, 65535, Some(0x80 | 10), &[]));
    f.extend(epb(true, 0, 3 << 10, &[7], 1));
    let mut r = reader(f).unwrap();
    assert_eq!(r.format(), FileFormat::PcapNg);
    let (p, e) = collect(&mut r);
    assert!(e.is_none(), "{e:?}");
    assert_eq!(p[0], (1, 1_500, vec![1, 2, 3, 4, 5], 5));
    assert_eq!(p[1], (113, 7_000, vec![6; 8], 100));
    assert_eq!(p[2], (101, 3_000_000_000, vec![7], 1));
    assert_eq!(p.len(), 3);
    assert_eq!(r.interfaces().len(), 1);
}

#[test]
fn pcapng_unparsable_options_fall_back_to_fixed_fields() {
    // A comment option (code 1) that is not UTF-8, and no end-of-options.
    let bad_comment = [1u8, 0, 4, 0, 0xff, 0xfe, 0xfd, 0xfc];
    let mut f = shb(false);
    let mut idb_body = Vec::new();
    idb_body.extend(w16(false, 1));
    idb_body.extend(w16(false, 0));
    idb_body.extend(w32(false, 0));
    idb_body.extend_from_slice(&bad_comment);
    f.extend(block(false, 1, &idb_body));
    let mut epb_body = Vec::new();
    for v in [0u32, 0, 2, 3, 3] {
        epb_body.extend(w32(false, v));
    }
    epb_body.extend([1, 2, 3, 0]);
    epb_body.extend_from_slice(&bad_comment);
    f.extend(block(false, 6, &epb_body));
    let (p, e) = collect(&mut reader(f).unwrap());
    assert!(e.is_none(), "{e:?}");
    assert_eq!(p, vec![(1, 2_000, vec![1, 2, 3], 3)]);
}

#[test]
fn pcapng_simple_and_obsolete_packet_blocks() {
    let mut f = shb(false);
    f.extend(idb(false, 1, 4, None, &[]));
    let mut spb = Vec::new();
    spb.extend(w32(false, 6));
    spb.extend([1, 2, 3, 4]); // snaplen 4: only 4 of 6 bytes
    f.extend(block(false, 3, &spb));
    let mut opb = Vec::new();
    opb.extend(w16(false, 0));
    opb.extend(w16(false, 0));
    opb.extend(w32(false, 0));
    opb.extend(w32(false, 9));
    opb.extend(w32(false, 2));
    opb.extend(w32(false, 2));
    opb.extend([8, 9, 0, 0]);
    f.extend(block(false, 2, &opb));
    let (p, e) = collect(&mut reader(f).unwrap());
    assert!(e.is_none(), "{e:?}");
    assert_eq!(
        p,
        vec![(1, 0, vec![1, 2, 3, 4], 6), (1, 9_000, vec![8, 9], 2)]
    );
}

#[test]
fn pcapng_corruption_is_reported() {
    let base = {
        let mut f = shb(false);
        f.extend(idb(false, 1, 0, None, &[]));
        f
    };
    // Packet on an interface that was never described.
    let mut f = base.clone();
    f.extend(epb(false, 3, 0, &[1], 1));
    let (p, e) = collect(&mut reader(f).unwrap());
    assert!(p.is_empty());
    let e = e.unwrap();
    assert!(matches!(e, IoError::BadRecord { record: 3, .. }), "{e}");
    assert!(e.to_string().contains("interface 3"), "{e}");
    // Block length not a multiple of 4.
    let mut f = base.clone();
    let mut b = epb(false, 0, 0, &[1], 1);
    b[4] = 30;
    f.extend(b);
    assert!(matches!(
        collect(&mut reader(f).unwrap()).1,
        Some(IoError::BadRecord { .. })
    ));
    // Trailer length differs from the header length.
    let mut f = base.clone();
    let mut b = epb(false, 0, 0, &[1], 1);
    let n = b.len();
    b[n - 4] = 0;
    f.extend(b);
    assert!(matches!(
        collect(&mut reader(f).unwrap()).1,
        Some(IoError::BadRecord { .. })
    ));
    // File ends inside a block.
    let mut f = base.clone();
    let b = epb(false, 0, 0, &[1; 40], 40);
    f.extend_from_slice(&b[..b.len() - 5]);
    let (p, e) = collect(&mut reader(f).unwrap());
    assert!(p.is_empty());
    assert!(
        matches!(e, Some(IoError::Truncated { record: 3, .. })),
        "{e:?}"
    );
    // First block not a section header / SHB cut short.
    assert!(matches!(
        reader(shb(false)[..20].to_vec()),
        Err(IoError::BadHeader { .. })
    ));
    let mut bad_magic = shb(false);
    bad_magic[8] = 0;
    assert!(matches!(reader(bad_magic), Err(IoError::BadHeader { .. })));
}

// -------------------------------------------------------------- writer ---

#[test]
fn writer_round_trip() {
    let dir = std::env::temp_dir().join(format!("flowpath-io-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("out.pcap");
    let mut w = PcapWriter::create(&path, 64).unwrap();
    w.write(1_000_000_123, &[0xaa; 60]).unwrap();
    w.write(2_000_000_000, &[0xbb; 100]).unwrap();
    w.write_with_orig_len(3, &[0xcc; 10], 1500).unwrap();
    assert_eq!(w.written(), 3);
    w.finish().unwrap();

    let mut r = PcapReader::open(&path).unwrap();
    assert_eq!(
        r.format(),
        FileFormat::Pcap {
            big_endian: false,
            nanosecond: true
        }
    );
    assert_eq!(r.interfaces()[0].snaplen, 64);
    let (p, e) = collect(&mut r);
    assert!(e.is_none());
    assert_eq!(p[0], (1, 1_000_000_123, vec![0xaa; 60], 60));
    assert_eq!(
        p[1],
        (1, 2_000_000_000, vec![0xbb; 64], 100),
        "cut to the snaplen"
    );
    assert_eq!(p[2], (1, 3, vec![0xcc; 10], 1500));

    let frames = flowpath_io::load_ethernet_frames(&path).unwrap();
    assert_eq!(frames.len(), 3);
    assert_eq!(frames.timestamps_ns, vec![1_000_000_123, 2_000_000_000, 3]);
    assert_eq!(frames.get(2), Some(&[0xcc; 10][..]));

    // Timestamps past 2106 do not fit the format.
    let mut w = PcapWriter::create_with_link_type(dir.join("raw.pcap"), 101, 0).unwrap();
    assert_eq!(w.snaplen(), 262_144);
    let e = w.write(u64::MAX, &[1]).unwrap_err();
    assert!(matches!(e, IoError::Write { .. }), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

// ------------------------------------------------------------ property ---

fn sample_pcap() -> Vec<u8> {
    let mut f = pcap_header(false, false, 65535, 1);
    for i in 0..4u8 {
        f.extend(pcap_record(false, u32::from(i), 0, &[i; 30], 30));
    }
    f
}

fn sample_pcapng() -> Vec<u8> {
    let mut f = shb(false);
    f.extend(idb(false, 1, 0, Some(9), &[]));
    for i in 0..3u8 {
        f.extend(epb(false, 0, u64::from(i), &[i; 21], 21));
    }
    f.extend(shb(true));
    f.extend(idb(true, 113, 0, None, &[]));
    f.extend(epb(true, 0, 1, &[7; 9], 9));
    f
}

proptest! {
    #[test]
    fn mutated_files_never_panic(
        which in any::<bool>(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
    ) {
        let mut f = if which { sample_pcap() } else { sample_pcapng() };
        for (at, v) in edits {
            let n = f.len();
            f[at % n] = v;
        }
        let keep = f.len() - cut % (f.len() / 2);
        f.truncate(keep);
        if let Ok(mut r) = reader(f.clone()) {
            let mut n = 0;
            let mut errors = 0;
            while let Some(p) = r.next_packet() {
                match p {
                    Ok(p) => prop_assert!(p.data.len() <= f.len()),
                    Err(_) => errors += 1,
                }
                n += 1;
                prop_assert!(n < 100, "reader loops");
            }
            prop_assert!(errors <= 1);
        }
    }
}
