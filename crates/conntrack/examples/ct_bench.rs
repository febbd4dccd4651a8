//! A quick measurement of the tracker's per-packet cost (not a test):
//! commits N UDP connections, then runs established packets of them in
//! both directions through `ct(zone=0)` and prints nanoseconds per packet
//! and the estimated memory per connection.
//!
//! `cargo run --release -p flowpath-conntrack --example ct_bench [N]`

use flowpath_conntrack::{Config, Conntrack, CtArgs, CtMeta};
use flowpath_wire::checksum;
use std::time::Instant;

fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    f.extend_from_slice(&[0x45, 0, 0, 36, 0, 1, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    let c = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 16, 0, 0]);
    f.extend_from_slice(b"payload!");
    f
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let ct = Conntrack::new(Config::default());
    let commit = CtArgs {
        commit: true,
        ..CtArgs::default()
    };
    let lookup = CtArgs::default();
    let mut fwd: Vec<Vec<u8>> = Vec::new();
    let mut rev: Vec<Vec<u8>> = Vec::new();
    for i in 0..n {
        let a = [10, (i >> 16) as u8, (i >> 8) as u8, i as u8];
        let b = [192, 168, 0, 1];
        fwd.push(udp4(a, b, 1000 + (i % 5000) as u16, 53));
        rev.push(udp4(b, a, 53, 1000 + (i % 5000) as u16));
    }
    let t = Instant::now();
    for f in &mut fwd {
        let mut md = CtMeta::default();
        ct.execute(f, 14, 0x0800, true, &commit, &mut md, 0);
    }
    let commit_ns = t.elapsed().as_nanos() as f64 / f64::from(n);
    let rounds = 10;
    let t = Instant::now();
    for r in 0..rounds {
        for (f, g) in fwd.iter_mut().zip(rev.iter_mut()) {
            let mut md = CtMeta::default();
            ct.execute(g, 14, 0x0800, true, &lookup, &mut md, r);
            let mut md = CtMeta::default();
            ct.execute(f, 14, 0x0800, true, &lookup, &mut md, r);
        }
    }
    let est_ns = t.elapsed().as_nanos() as f64 / (f64::from(n) * 2.0 * rounds as f64);
    println!(
        "{n} connections: commit {commit_ns:.0} ns/packet, established {est_ns:.0} ns/packet, {} conns, ~{} bytes/conn",
        ct.n_conns(),
        Conntrack::bytes_per_conn()
    );
}
