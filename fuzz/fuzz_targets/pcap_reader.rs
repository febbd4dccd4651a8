//! Fuzz target `pcap_reader`: `flowpath_io::PcapReader` on arbitrary file
//! contents must not panic, must end, and must report at most one error.

#![no_main]

use flowpath_io::PcapReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = PcapReader::from_reader("fuzz.pcap", std::io::Cursor::new(data.to_vec()))
    else {
        return;
    };
    let mut errors = 0;
    let mut n = 0usize;
    while let Some(p) = r.next_packet() {
        match p {
            Ok(p) => assert!(p.data.len() <= data.len()),
            Err(_) => errors += 1,
        }
        n += 1;
        assert!(n <= data.len(), "more records than bytes");
    }
    assert!(errors <= 1);
});
