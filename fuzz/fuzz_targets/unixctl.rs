//! Fuzz target `unixctl`: the control socket's request parser on arbitrary
//! bytes must not panic; whatever it accepts must have a method and string
//! parameters, and re-encoding it must parse to the same request.
//!
//! Run with `cargo +nightly fuzz run unixctl` (from the workspace root).

#![no_main]

use flowpath_unixctl::parse_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(r) = parse_request(data) else {
        return;
    };
    let again = serde_json::json!({"id": r.id, "method": r.method, "params": r.params}).to_string();
    let r2 = parse_request(again.as_bytes()).unwrap_or_else(|e| panic!("{again}: {e:?}"));
    assert_eq!(r2, r);
});
