//! vhost-user ports against a test frontend (`vhost_frontend`) that plays
//! the guest's driver over a real socket: frames both ways, several queue
//! pairs, server and client mode, disconnects under traffic, a guest that
//! stops reading, malformed descriptors and messages.

mod vhost_frontend;

use flowpath_netdev::{open_with, OpenPort, PortSpec, RxQueue, TxFrame};
use std::time::{Duration, Instant};
use vhost_frontend::*;

fn server_port(dir: &TempDir, queues: u32, txqs: usize) -> OpenPort {
    let spec = PortSpec::VhostUser {
        path: dir.sock(),
        client: false,
        queues,
    };
    open_with(&spec, txqs).expect("open vhost-user port")
}

/// Polls `rxq` until `want` frames came or 5 s passed.
fn drain(rxq: &mut dyn RxQueue, want: usize, out: &mut Vec<Vec<u8>>) {
    let t0 = Instant::now();
    while out.len() < want && t0.elapsed() < Duration::from_secs(5) {
        let n = rxq.recv(64, &mut |b, _| out.push(b.to_vec())).unwrap();
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn tx_frame(d: &[u8]) -> TxFrame<'_> {
    TxFrame {
        data: d,
        vnet: None,
        timestamp_ns: 0,
    }
}

/// Waits until the port has the guest's rings (the control thread
/// installed them): a probe frame crosses.
fn wait_ready(port: &mut OpenPort, fe: &mut Frontend, pair: usize) {
    let probe = frame(u32::MAX, 60);
    let t0 = Instant::now();
    loop {
        let sent = port.tx.send(&mut std::iter::once(tx_frame(&probe)));
        if sent == 1 {
            let t1 = Instant::now();
            while t1.elapsed() < Duration::from_secs(1) {
                if !fe.recv(pair, false).is_empty() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "rings never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn frames_cross_both_ways_intact() {
    let dir = TempDir::new("both");
    let mut port = server_port(&dir, 1, 1);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    let before_tx = port.tx.stats();

    // Guest → switch: 600 frames of many sizes, then a chained and an
    // indirect one.
    let sent: Vec<Vec<u8>> = (0..600)
        .map(|i| frame(i, 60 + (i as usize * 7) % 1454))
        .collect();
    let mut got = Vec::new();
    for f in &sent {
        while !fe.send(0, f) {
            drain(port.rxqs[0].as_mut(), got.len() + 1, &mut got);
        }
    }
    drain(port.rxqs[0].as_mut(), sent.len(), &mut got);
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "frames changed on the way");
    assert!(fe.wait_tx_done(0));
    let chained = frame(1000, 1400);
    fe.send_chained(0, &chained, 3, 0);
    let mut more = Vec::new();
    drain(port.rxqs[0].as_mut(), 1, &mut more);
    assert_eq!(more, vec![chained.clone()]);
    // Indirect: descriptor 10 points at a table of two descriptors.
    assert!(fe.wait_tx_done(0));
    let q = 1;
    let table_off = fe.queues[q].bufs + BUF * 20;
    let data_off = fe.queues[q].bufs + BUF * 21;
    let ind = frame(1001, 300);
    fe.write(data_off, &[0u8; HDR]);
    fe.write(data_off + HDR, &ind);
    let mut t = Vec::new();
    for (addr, len, flags, next) in [
        (fe.gpa(data_off), 100u32, D_NEXT, 1u16),
        (fe.gpa(data_off + 100), (HDR + ind.len() - 100) as u32, 0, 0),
    ] {
        t.extend_from_slice(&addr.to_le_bytes());
        t.extend_from_slice(&len.to_le_bytes());
        t.extend_from_slice(&flags.to_le_bytes());
        t.extend_from_slice(&next.to_le_bytes());
    }
    fe.write(table_off, &t);
    fe.set_desc(q, 10, fe.gpa(table_off), 32, D_INDIRECT, 0);
    fe.post(q, 10);
    let mut more = Vec::new();
    drain(port.rxqs[0].as_mut(), 1, &mut more);
    assert_eq!(more, vec![ind]);
    let rs = port.rxqs[0].stats();
    assert_eq!((rs.packets, rs.errors), (602, 0));

    // Switch → guest: 600 frames in bursts, and jumbo frames that need
    // several merged buffers.
    let mut out: Vec<Vec<u8>> = (0..600)
        .map(|i| frame(i, 60 + (i as usize * 13) % 1454))
        .collect();
    out.push(frame(7000, 9000));
    out.push(frame(7001, 2048 - HDR + 1));
    let mut rcvd = Vec::new();
    for burst in out.chunks(32) {
        let n = port.tx.send(&mut burst.iter().map(|f| tx_frame(f)));
        assert_eq!(n, burst.len());
        rcvd.extend(fe.recv(0, false));
    }
    rcvd.extend(fe.recv(0, false));
    assert_eq!(rcvd.len(), out.len());
    assert!(rcvd == out, "frames changed on the way to the guest");
    let ts = port.tx.stats();
    assert_eq!(ts.packets - before_tx.packets, out.len() as u64);
    assert_eq!(ts.dropped, 0);
}

#[test]
fn two_queue_pairs_keep_their_traffic_apart() {
    let dir = TempDir::new("mq");
    let mut port = server_port(&dir, 2, 2);
    assert_eq!(port.rxqs.len(), 2);
    assert_eq!(port.more_tx.len(), 1);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 2, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    for i in 0..100 {
        assert!(fe.send((i % 2) as usize, &frame(i, 100)));
    }
    for pair in 0..2 {
        let mut got = Vec::new();
        drain(port.rxqs[pair].as_mut(), 50, &mut got);
        let want: Vec<Vec<u8>> = (0..100)
            .filter(|i| i % 2 == pair as u32)
            .map(|i| frame(i, 100))
            .collect();
        assert_eq!(got, want, "queue pair {pair}");
    }
    // The second transmit queue fills the guest's second receive ring.
    let f = frame(5, 200);
    assert_eq!(port.more_tx[0].send(&mut std::iter::once(tx_frame(&f))), 1);
    assert_eq!(fe.recv(1, false), vec![f]);
}

#[test]
fn a_transmit_queue_whose_ring_is_disabled_uses_another() {
    let dir = TempDir::new("mq1");
    let mut port = server_port(&dir, 2, 2);
    // The guest enables one queue pair of two (a 1-vCPU Linux guest).
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    let f = frame(9, 300);
    assert_eq!(port.more_tx[0].send(&mut std::iter::once(tx_frame(&f))), 1);
    assert_eq!(fe.recv(0, false), vec![f]);
}

#[test]
fn client_mode_connects_and_reconnects() {
    let dir = TempDir::new("client");
    let listener = std::os::unix::net::UnixListener::bind(dir.sock()).unwrap();
    let spec = PortSpec::parse(&format!("vhost-user:{},client", dir.sock().display())).unwrap();
    let mut port = open_with(&spec, 1).unwrap();
    assert_eq!(port.kind, "vhost-user");
    for round in 0..2u32 {
        let (s, _) = listener.accept().unwrap();
        let mut fe = Frontend::start(s, 1, linux_features());
        wait_ready(&mut port, &mut fe, 0);
        let f = frame(round, 500);
        assert!(fe.send(0, &f));
        let mut got = Vec::new();
        drain(port.rxqs[0].as_mut(), 1, &mut got);
        assert_eq!(got, vec![f]);
        drop(fe); // the frontend goes; the port connects again
    }
    // The socket file is the frontend's: the port leaves it alone.
    drop(port);
    assert!(dir.sock().exists());
}

#[test]
fn guest_disconnect_and_reconnect_under_traffic() {
    let dir = TempDir::new("reconnect");
    let mut port = server_port(&dir, 1, 1);
    let mut rxq = port.rxqs.pop().unwrap();
    let mut tx = std::mem::replace(
        &mut port.tx,
        Box::new(flowpath_netdev::null::NullTx::default()),
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    // A PMD: polls the guest's transmit ring and sends to its receive ring
    // all the time, across the disconnects.
    let pmd = std::thread::spawn(move || {
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut offered = 0u64;
        let f = frame(0xffff, 100);
        while !stop2.load(std::sync::atomic::Ordering::SeqCst) {
            rxq.recv(32, &mut |b, _| got.push(b.to_vec())).unwrap();
            offered += 8;
            tx.send(&mut std::iter::repeat_n(tx_frame(&f), 8));
            std::thread::sleep(Duration::from_micros(50));
        }
        (got, offered, rxq.stats(), tx.stats())
    });
    for round in 0..3u32 {
        let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
        // Traffic both ways, then gone without a goodbye in mid-stream.
        let t0 = Instant::now();
        let mut n = 0;
        while t0.elapsed() < Duration::from_millis(300) {
            if fe.send(0, &frame(round * 100_000 + n, 200)) {
                n += 1;
            }
            fe.recv(0, false);
        }
        if round == 2 {
            // The last one finishes: everything it sent arrives.
            assert!(fe.wait_tx_done(0));
        }
        drop(fe);
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (got, offered, rs, ts) = pmd.join().unwrap();
    assert!(got
        .iter()
        .any(|f| f[14..18] >= 200_000u32.to_be_bytes()[..]));
    assert_eq!(rs.packets, got.len() as u64);
    assert_eq!(rs.errors, 0);
    assert_eq!(ts.packets + ts.dropped, offered, "every frame counted");
    assert!(ts.packets > 0);
}

#[test]
fn a_guest_that_stops_reading_costs_drops_not_a_stall() {
    let dir = TempDir::new("stall");
    let mut port = server_port(&dir, 1, 1);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    let base = port.tx.stats();
    // The guest reads nothing more: 256 buffers, then drops.
    let f = frame(1, 1000);
    let t0 = Instant::now();
    let mut sent = 0;
    for _ in 0..100 {
        sent += port.tx.send(&mut std::iter::repeat_n(tx_frame(&f), 32));
    }
    assert!(t0.elapsed() < Duration::from_secs(1), "send stalled");
    let s = port.tx.stats();
    assert_eq!(sent, usize::from(QSIZE));
    assert_eq!(s.packets - base.packets, u64::from(QSIZE));
    assert_eq!(s.dropped - base.dropped, 3200 - u64::from(QSIZE));
    // Reading again lets frames through again.
    assert_eq!(fe.recv(0, false).len(), usize::from(QSIZE));
    assert_eq!(port.tx.send(&mut std::iter::once(tx_frame(&f))), 1);
}

#[test]
fn bad_descriptors_are_refused_and_counted() {
    let dir = TempDir::new("bad");
    let mut port = server_port(&dir, 1, 1);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    let q = 1;
    let good_off = fe.queues[q].bufs;
    let good = frame(42, 100);
    fe.write(good_off, &[0u8; HDR]);
    fe.write(good_off + HDR, &good);
    let good_gpa = fe.gpa(good_off);
    let glen = (HDR + good.len()) as u32;
    let table_off = fe.queues[q].bufs + BUF * 100;
    // Each case: descriptors from 1 on, head 1; a good frame after each.
    type Case = Vec<(u64, u32, u16, u16)>;
    let cases: Vec<(&str, Case)> = vec![
        ("outside memory", vec![(0x1000, 64, 0, 0)]),
        (
            "past the end",
            vec![(GPA_BASE + MEM_SIZE as u64 - 10, 64, 0, 0)],
        ),
        (
            "loop",
            vec![(good_gpa, 10, D_NEXT, 2), (good_gpa, 10, D_NEXT, 1)],
        ),
        ("zero length", vec![(good_gpa, 0, 0, 0)]),
        ("huge length", vec![(good_gpa, 1 << 20, 0, 0)]),
        ("next out of range", vec![(good_gpa, 10, D_NEXT, 999)]),
        ("writable on transmit", vec![(good_gpa, glen, D_WRITE, 0)]),
        (
            "indirect not whole",
            vec![(fe.gpa(table_off), 7, D_INDIRECT, 0)],
        ),
        ("indirect outside", vec![(0x10, 32, D_INDIRECT, 0)]),
        (
            "indirect chained",
            vec![(fe.gpa(table_off), 32, D_INDIRECT | D_NEXT, 2)],
        ),
        (
            "indirect too big",
            vec![(fe.gpa(table_off), 16 << 20, D_INDIRECT, 0)],
        ),
    ];
    let mut errors = 0;
    let mut got = Vec::new();
    for (name, descs) in &cases {
        assert!(fe.wait_tx_done(0), "{name}");
        for (k, (addr, len, flags, next)) in descs.iter().enumerate() {
            fe.set_desc(q, 1 + k as u16, *addr, *len, *flags, *next);
        }
        fe.post(q, 1);
        fe.set_desc(q, 0, good_gpa, glen, 0, 0);
        fe.post(q, 0);
        errors += 1;
        let want = got.len() + 1;
        drain(port.rxqs[0].as_mut(), want, &mut got);
        assert_eq!(got.len(), want, "{name}: the good frame after it");
        assert_eq!(port.rxqs[0].stats().errors, errors, "{name}: counted");
    }
    // Nested indirect and an indirect loop.
    for (name, table) in [
        (
            "nested indirect",
            vec![(fe.gpa(table_off), 32u32, D_INDIRECT, 0u16)],
        ),
        (
            "indirect loop",
            vec![(good_gpa, 10, D_NEXT, 1), (good_gpa, 10, D_NEXT, 0)],
        ),
    ] {
        assert!(fe.wait_tx_done(0));
        let mut t = Vec::new();
        for (addr, len, flags, next) in &table {
            t.extend_from_slice(&addr.to_le_bytes());
            t.extend_from_slice(&len.to_le_bytes());
            t.extend_from_slice(&flags.to_le_bytes());
            t.extend_from_slice(&next.to_le_bytes());
        }
        fe.write(table_off, &t);
        fe.set_desc(
            q,
            1,
            fe.gpa(table_off),
            16 * table.len() as u32,
            D_INDIRECT,
            0,
        );
        fe.post(q, 1);
        errors += 1;
        drain(port.rxqs[0].as_mut(), 0, &mut got);
        let t0 = Instant::now();
        while port.rxqs[0].stats().errors < errors && t0.elapsed() < Duration::from_secs(5) {
            port.rxqs[0].recv(32, &mut |_, _| {}).unwrap();
        }
        assert_eq!(port.rxqs[0].stats().errors, errors, "{name}");
    }
    assert!(got.iter().all(|f| *f == good));
    // An available index that jumps past the ring: refused, ring stopped.
    assert!(fe.wait_tx_done(0));
    let idx = fe.queues[q].avail_idx.wrapping_add(QSIZE + 1);
    fe.set_avail_idx(q, idx);
    for _ in 0..10 {
        assert_eq!(port.rxqs[0].recv(32, &mut |_, _| {}).unwrap(), 0);
    }
    assert_eq!(port.rxqs[0].stats().errors, errors + 1);
}

#[test]
fn a_bad_receive_buffer_stops_only_that_ring() {
    let dir = TempDir::new("badrx");
    let mut port = server_port(&dir, 1, 1);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    // The next receive buffer points outside memory.
    let next = fe.queues[0].avail_idx;
    let _ = next;
    let q = 0;
    let used = fe.used_idx(q);
    let head_slot = fe.queues[q].avail + 4 + 2 * usize::from(used % QSIZE);
    let head = u16::from_le_bytes(fe.read(head_slot, 2).try_into().unwrap());
    fe.set_desc(q, head, 0x10, 2048, D_WRITE, 0);
    let f = frame(3, 100);
    assert_eq!(port.tx.send(&mut std::iter::repeat_n(tx_frame(&f), 4)), 0);
    let s = port.tx.stats();
    assert_eq!(s.errors, 1);
    assert_eq!(s.dropped, 4);
    // The guest's transmit ring still works.
    assert!(fe.send(0, &f));
    let mut got = Vec::new();
    drain(port.rxqs[0].as_mut(), 1, &mut got);
    assert_eq!(got, vec![f]);
}

#[test]
fn interrupts_only_when_the_guest_asks() {
    let dir = TempDir::new("irq");
    let mut port = server_port(&dir, 1, 1);
    // EVENT_IDX: used_event (avail.ring[size]) says when to interrupt.
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    let q = 0;
    let used_event_off = fe.queues[q].avail + 4 + 2 * usize::from(QSIZE);
    let call = &fe.queues[q].call;
    eventfd_count(call);
    // A polling guest: used_event far behind, never passed.
    let far = fe.used_idx(q).wrapping_sub(1000);
    fe.write(used_event_off, &far.to_le_bytes());
    let f = frame(1, 64);
    for _ in 0..50 {
        port.tx.send(&mut std::iter::repeat_n(tx_frame(&f), 4));
        fe.recv(0, false);
    }
    assert_eq!(
        eventfd_count(&fe.queues[q].call),
        0,
        "interrupted a polling guest"
    );
    // The guest asks to be told about the next used entry.
    let now = fe.used_idx(q);
    fe.write(used_event_off, &now.to_le_bytes());
    port.tx.send(&mut std::iter::once(tx_frame(&f)));
    assert_eq!(eventfd_count(&fe.queues[q].call), 1);
}

#[test]
fn malformed_messages_close_the_connection_and_the_port_serves_the_next() {
    let dir = TempDir::new("msg");
    let mut port = server_port(&dir, 1, 1);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    // Refused requests are acknowledged as failed, the connection stays.
    assert_ne!(
        fe.request_acked(8, &[9, 0, 0, 0, 0, 1, 0, 0]),
        0,
        "virtqueue 9"
    );
    assert_ne!(fe.request_acked(8, &[0, 0, 0, 0, 3, 0, 0, 0]), 0, "size 3");
    assert_ne!(fe.request_acked(77, &[]), 0, "unknown request");
    assert!(fe.get_u64(17) >= 1, "still served");
    // A reset is acknowledged too (REPLY_ACK was negotiated before it).
    assert_eq!(fe.request_acked(4, &[]), 0, "RESET_OWNER");
    // A bad version closes it.
    fe.send_raw(&[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
    let mut b = [0u8; 1];
    let r = std::io::Read::read(&mut fe.sock, &mut b);
    assert!(matches!(r, Ok(0) | Err(_)));
    drop(fe);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    // The socket file is the port's: removed with it.
    drop(port);
    assert!(!dir.sock().exists());
}

/// A port whose guest sent five frames (`got`), its transmit ring then
/// stopped by `GET_VRING_BASE`, which must answer 5.
fn five_frames_then_stopped(tag: &str) -> (TempDir, OpenPort, Frontend, Vec<Vec<u8>>) {
    let dir = TempDir::new(tag);
    let mut port = server_port(&dir, 1, 1);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    for i in 0..5 {
        assert!(fe.send(0, &frame(i, 80)));
    }
    let mut got = Vec::new();
    drain(port.rxqs[0].as_mut(), 5, &mut got);
    assert_eq!(fe.get_vring_base(1), 5);
    (dir, port, fe, got)
}

#[test]
fn get_vring_base_stops_the_ring_and_tells_where() {
    let (_dir, mut port, mut fe, _) = five_frames_then_stopped("base");
    // Stopped: a new frame waits.
    assert!(fe.send(0, &frame(5, 80)));
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(port.rxqs[0].recv(32, &mut |_, _| {}).unwrap(), 0);
}

#[test]
fn legacy_guest_without_protocol_features() {
    let dir = TempDir::new("legacy");
    let mut port = server_port(&dir, 1, 1);
    // No PROTOCOL_FEATURES, no EVENT_IDX, no MRG_RXBUF, no VERSION_1:
    // rings run at the kick, 10-byte headers.
    let fe = Frontend::start(Frontend::connect(&dir.sock()), 1, 0);
    let f = frame(1, 300);
    let t0 = Instant::now();
    while fe.used_idx(0) == 0 && t0.elapsed() < Duration::from_secs(5) {
        port.tx.send(&mut std::iter::once(tx_frame(&f)));
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_ne!(fe.used_idx(0), 0, "ring never ran");
    let e = fe.read(fe.queues[0].used + 4, 8);
    let id = u32::from_le_bytes(e[0..4].try_into().unwrap()) as usize;
    let len = u32::from_le_bytes(e[4..8].try_into().unwrap()) as usize;
    assert_eq!(len, 10 + f.len());
    let b = fe.read(fe.queues[0].bufs + BUF * id, len);
    assert_eq!(&b[..10], &[0u8; 10]);
    assert_eq!(&b[10..], &f[..]);
}

#[test]
fn two_pmds_share_the_one_enabled_receive_ring() {
    let dir = TempDir::new("share");
    let mut port = server_port(&dir, 2, 2);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    // wait_ready's probe went through the first one.
    let probe = port.tx.stats().packets;
    let txs = vec![
        std::mem::replace(
            &mut port.tx,
            Box::new(flowpath_netdev::null::NullTx::default()),
        ),
        port.more_tx.pop().unwrap(),
    ];
    let threads: Vec<_> = txs
        .into_iter()
        .enumerate()
        .map(|(t, mut tx)| {
            std::thread::spawn(move || {
                let f = frame(t as u32, 100);
                for _ in 0..250 {
                    tx.send(&mut std::iter::repeat_n(tx_frame(&f), 8));
                    std::thread::sleep(Duration::from_micros(20));
                }
                tx.stats()
            })
        })
        .collect();
    let mut got = 0u64;
    while threads.iter().any(|t| !t.is_finished()) {
        got += fe.recv(0, false).len() as u64;
    }
    let stats: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    got += fe.recv(0, false).len() as u64;
    let sent: u64 = stats.iter().map(|s| s.packets).sum::<u64>() - probe;
    for (t, s) in stats.iter().enumerate() {
        let own = if t == 0 { probe } else { 0 };
        assert_eq!(s.packets - own + s.dropped, 2000, "every frame counted");
        assert!(s.packets > 0, "both queues got through: {stats:?}");
    }
    assert_eq!(got, sent);
}

#[test]
fn an_idle_poller_sleeps_until_the_guest_kicks() {
    for features in [linux_features(), F_VERSION_1 | F_MRG_RXBUF] {
        let dir = TempDir::new("kick");
        let mut port = server_port(&dir, 1, 1);
        let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, features);
        let fd = port.rxqs[0].poll_fd().expect("a descriptor to wait on");
        wait_ready(&mut port, &mut fe, 0);
        // Until the guest's transmit ring runs (until the switch set it up,
        // the guest's ring says "kick"): a probe frame crosses.
        assert!(fe.send(0, &frame(0xfffe, 60)));
        let mut got = Vec::new();
        drain(port.rxqs[0].as_mut(), 1, &mut got);
        assert_eq!(got.len(), 1, "the guest's transmit ring never ran");
        // Busy: a poller that finds the ring empty between the guest's
        // frames does not ask for kicks (each would be a system call in
        // the guest).
        let before = fe.queues[1].kicks;
        let mut got = Vec::new();
        for i in 0..200 {
            assert_eq!(port.rxqs[0].recv(32, &mut |_, _| {}).unwrap(), 0);
            assert!(fe.send(0, &frame(i, 80)));
            drain(port.rxqs[0].as_mut(), got.len() + 1, &mut got);
        }
        assert_eq!(got.len(), 200);
        assert_eq!(fe.queues[1].kicks - before, 0, "kicks while busy");
        // Idle: the PMD asks for a kick before it sleeps on the descriptor.
        assert!(port.rxqs[0].arm_wakeup(), "nothing waits");
        assert_eq!(
            flowpath_netdev::wait_readable(&[fd], 0),
            0,
            "readable while idle"
        );
        let f = frame(1, 100);
        assert!(fe.send(0, &f));
        assert_eq!(fe.queues[1].kicks - before, 1, "no kick asked for");
        let t1 = Instant::now();
        assert_eq!(flowpath_netdev::wait_readable(&[fd], 2000), 1, "no wake-up");
        assert!(t1.elapsed() < Duration::from_millis(500));
        let mut got = Vec::new();
        drain(port.rxqs[0].as_mut(), 1, &mut got);
        assert_eq!(got, vec![f]);
        // Found frames take the request back: no more kicks.
        let before = fe.queues[1].kicks;
        for i in 0..20 {
            assert!(fe.send(0, &frame(i, 80)));
        }
        assert_eq!(
            fe.queues[1].kicks - before,
            0,
            "kicks after traffic resumed"
        );
        // A frame already waiting keeps the PMD awake.
        assert!(!port.rxqs[0].arm_wakeup(), "frames wait");
        let mut got = Vec::new();
        drain(port.rxqs[0].as_mut(), 20, &mut got);
        assert_eq!(got.len(), 20);
    }
}

#[test]
fn memory_remapped_under_traffic() {
    let dir = TempDir::new("remap");
    let mut port = server_port(&dir, 1, 1);
    let mut rxq = port.rxqs.pop().unwrap();
    let mut tx = std::mem::replace(
        &mut port.tx,
        Box::new(flowpath_netdev::null::NullTx::default()),
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    // A PMD polling both rings without pause while the memory table is
    // replaced again and again: the old mappings go only after the rings
    // were taken from it (else this test dies of a fault).
    let pmd = std::thread::spawn(move || {
        let mut got = 0u64;
        let f = frame(0xffff, 100);
        while !stop2.load(std::sync::atomic::Ordering::SeqCst) {
            got += rxq.recv(32, &mut |_, _| {}).unwrap() as u64;
            tx.send(&mut std::iter::repeat_n(tx_frame(&f), 4));
        }
        (got, rxq.stats(), tx.stats())
    });
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    let mut sent = 0u64;
    for round in 0..100u32 {
        for i in 0..20 {
            if fe.send(0, &frame(round * 100 + i, 300)) {
                sent += 1;
            }
        }
        fe.recv(0, false);
        fe.set_mem_table();
    }
    assert!(fe.wait_tx_done(0));
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (got, rs, ts) = pmd.join().unwrap();
    assert_eq!(got, sent, "every frame the guest sent arrived");
    assert_eq!(rs.errors + ts.errors, 0);
    assert!(ts.packets > 0);
}

#[test]
fn offloads_are_negotiated_and_carried_both_ways() {
    use flowpath_netdev::offload::{VnetHdr, F_NEEDS_CSUM, GSO_TCPV4};
    let dir = TempDir::new("offl");
    let mut port = server_port(&dir, 1, 1);
    assert!(port.tx.takes_vnet_hdr());
    let features = linux_features() | F_CSUM | F_GUEST_CSUM | F_HOST_TSO4 | F_GUEST_TSO4;
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, features);
    wait_ready(&mut port, &mut fe, 0);
    let csum = VnetHdr {
        flags: F_NEEDS_CSUM,
        csum_start: 34,
        csum_offset: 16,
        ..VnetHdr::default()
    };
    let tso = VnetHdr {
        gso_type: GSO_TCPV4,
        gso_size: 1448,
        hdr_len: 54,
        ..csum
    };
    let with = |v: &VnetHdr| {
        let mut h = [0u8; HDR];
        h[..10].copy_from_slice(&v.to_bytes());
        h
    };
    // Guest → switch: each frame's offload state comes with it; a header
    // whose checksum lies outside its frame is refused and counted.
    let f = frame(1, 200);
    let outside = VnetHdr {
        csum_start: 190,
        ..csum
    };
    for v in [csum, tso, VnetHdr::default(), outside] {
        assert!(fe.send_hdr(0, &with(&v), &f));
    }
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < 3 && t0.elapsed() < Duration::from_secs(5) {
        port.rxqs[0]
            .recv(64, &mut |b, m| got.push((b.len(), m.vnet)))
            .unwrap();
    }
    assert!(fe.wait_tx_done(0));
    assert_eq!(got, vec![(200, Some(csum)), (200, Some(tso)), (200, None)]);
    assert_eq!(port.rxqs[0].stats().errors, 1);
    // Switch → guest: the guest took GUEST_CSUM and GUEST_TSO4, so the
    // frames keep their offload state, told in their headers.
    for v in [csum, tso] {
        let n = port.tx.send(&mut std::iter::once(TxFrame {
            data: &f,
            vnet: Some(v),
            timestamp_ns: 0,
        }));
        assert_eq!(n, 1);
        let r = fe.recv_hdr(0, false);
        assert_eq!(r.len(), 1);
        assert_eq!(&r[0].0[..10], &v.to_bytes());
        assert_eq!(r[0].1, f);
    }
}

/// Live migration as QEMU drives it: a shared bitmap (`SET_LOG_BASE`),
/// `LOG_ALL` in the features, the used areas' addresses with
/// `VHOST_VRING_F_LOG`; then every page the port writes — the frames'
/// buffers in the guest's receive ring and both used areas — is marked,
/// and no other (the transmit buffers are only read); with `LOG_ALL` off
/// again nothing is marked. A log that cannot be set closes the
/// connection (a migration must not go on unlogged).
#[test]
fn dirty_pages_are_logged_while_the_guest_migrates() {
    let dir = TempDir::new("log");
    let mut port = server_port(&dir, 1, 1);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    let page = |gpa: u64| gpa / 4096;
    // Guest memory starts at GPA_BASE: the bitmap covers it from page 0.
    let len = ((GPA_BASE as usize + MEM_SIZE) / 4096).div_ceil(8);
    let (logfd, logp) = shared_memfd(len + 64);
    fe.set_log_base(std::os::fd::AsRawFd::as_raw_fd(&logfd), len as u64, 64);
    let logp = logp.wrapping_add(64);
    fe.set_features(linux_features() | F_LOG_ALL);
    for i in 0..2 {
        let used = fe.gpa(fe.queues[i].used);
        fe.set_vring_addr(i, Some(used));
    }
    let _ = collect_log(logp, len);
    // Switch -> guest: 20 frames, one buffer each.
    let rx_used_before = fe.used_idx(0);
    let out: Vec<Vec<u8>> = (0..20).map(|i| frame(i, 100 + 90 * i as usize)).collect();
    assert_eq!(port.tx.send(&mut out.iter().map(|f| tx_frame(f))), 20);
    let mut expect = std::collections::BTreeSet::new();
    for k in 0..20u16 {
        let e = fe.queues[0].used + 4 + 8 * usize::from(rx_used_before.wrapping_add(k) % QSIZE);
        let r = fe.read(e, 8);
        let id = u16::from_le_bytes([r[0], r[1]]);
        let n = u64::from(u32::from_le_bytes(r[4..8].try_into().unwrap()));
        let at = fe.buf_gpa(0, id);
        expect.extend(page(at)..=page(at + n - 1));
    }
    expect.insert(page(fe.gpa(fe.queues[0].used)));
    assert_eq!(fe.recv(0, true), out);
    // Guest -> switch: the port writes only the used area.
    for i in 0..10 {
        assert!(fe.send(0, &frame(100 + i, 500)));
    }
    let mut got = Vec::new();
    drain(port.rxqs[0].as_mut(), 10, &mut got);
    assert_eq!(got.len(), 10);
    assert!(fe.wait_tx_done(0));
    expect.insert(page(fe.gpa(fe.queues[1].used)));
    assert_eq!(collect_log(logp, len), expect);

    // Migration over (or cancelled): LOG_ALL off, nothing more is marked.
    fe.set_features(linux_features());
    assert_eq!(port.tx.send(&mut out.iter().map(|f| tx_frame(f))), 20);
    assert_eq!(fe.recv(0, false).len(), 20);
    assert!(fe.send(0, &frame(200, 500)));
    drain(port.rxqs[0].as_mut(), 11, &mut got);
    assert!(fe.wait_tx_done(0));
    assert_eq!(collect_log(logp, len), Default::default());

    // A log without its descriptor: the connection closes.
    fe.send_raw(&[6, 0, 0, 0, 1, 0, 0, 0, 16, 0, 0, 0]);
    fe.send_raw(&[0u8; 16]);
    let mut b = [0u8; 1];
    let r = std::io::Read::read(&mut fe.sock, &mut b);
    assert!(matches!(r, Ok(0) | Err(_)));
}

/// After a migration QEMU asks the destination port to announce a guest
/// that cannot announce itself (`SEND_RARP` with its MAC): the port
/// receives a broadcast RARP request from that MAC, as if the guest had
/// sent it, before the guest's own frames.
#[test]
fn a_migrated_guest_is_announced_with_a_rarp() {
    let dir = TempDir::new("rarp");
    let mut port = server_port(&dir, 1, 1);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    let mac = [0x52u8, 0x54, 0x00, 0xab, 0xcd, 0xef];
    let mut p = [0u8; 8];
    p[..6].copy_from_slice(&mac);
    fe.request(19, &p, &[]);
    assert!(fe.send(0, &frame(1, 100)));
    let mut got = Vec::new();
    drain(port.rxqs[0].as_mut(), 2, &mut got);
    // RFC 903: Ethernet broadcast from the guest, type 0x8035; hardware
    // type 1, protocol 0x0800, lengths 6 and 4, operation 3 (request
    // reverse), the guest's MAC as sender and target hardware address.
    let mut want = vec![0xffu8; 6];
    want.extend_from_slice(&mac);
    want.extend_from_slice(&[0x80, 0x35, 0, 1, 0x08, 0, 6, 4, 0, 3]);
    want.extend_from_slice(&mac);
    want.extend_from_slice(&[0; 4]);
    want.extend_from_slice(&mac);
    want.extend_from_slice(&[0; 4]);
    want.resize(60, 0);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], want);
    assert_eq!(got[1], frame(1, 100));
}

/// A device status of 0 (a reset, which QEMU sends first when it stops a
/// device) stops the rings where they are: nothing more is taken from
/// the guest, and `GET_VRING_BASE` answers from there.
#[test]
fn a_status_reset_stops_the_rings() {
    let dir = TempDir::new("status");
    let mut port = server_port(&dir, 1, 1);
    let mut fe = Frontend::start(Frontend::connect(&dir.sock()), 1, linux_features());
    wait_ready(&mut port, &mut fe, 0);
    // (DRIVER_OK first, as QEMU sets it when it starts the device.)
    fe.request(39, &15u64.to_le_bytes(), &[]);
    for i in 0..3 {
        assert!(fe.send(0, &frame(i, 80)));
    }
    let mut got = Vec::new();
    drain(port.rxqs[0].as_mut(), 3, &mut got);
    assert_eq!(got.len(), 3);
    fe.request(39, &0u64.to_le_bytes(), &[]);
    assert!(fe.send(0, &frame(3, 80)));
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(port.rxqs[0].recv(32, &mut |_, _| {}).unwrap(), 0);
    assert_eq!(fe.get_vring_base(1), 3);
}

/// A ring set up again from a base that disagrees with the used index in
/// the guest's memory (a frontend that counted chains as taken that were
/// never returned) resumes from the used index, as DPDK's backend does:
/// the guest is never shown used entries nobody wrote, and its next
/// frames cross.
#[test]
fn a_base_that_disagrees_with_the_used_index_yields_to_it() {
    let (_dir, mut port, mut fe, mut got) = five_frames_then_stopped("resync");
    fe.start_queue_at(1, 9);
    // Nothing was published for the four chains the base claims.
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(fe.used_idx(1), 5);
    assert!(fe.send(0, &frame(5, 80)));
    drain(port.rxqs[0].as_mut(), 6, &mut got);
    assert_eq!(got.len(), 6);
    assert_eq!(got[5], frame(5, 80));
    assert!(fe.wait_tx_done(0));
    assert_eq!(fe.used_idx(1), 6);
}
