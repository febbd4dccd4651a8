//! The client against a scripted server on a Unix socket: what the real
//! `ovsdb-server` does rarely or only after long idle times (its echo
//! probe), and what it never does (garbage, silence).

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use flowpath_ovsdb::{Client, Error, Framer, Message};
use serde_json::json;

/// A socket path in a fresh directory, removed on drop.
struct TempSock(PathBuf);

impl TempSock {
    fn new() -> TempSock {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "flowpath-ovsdb-fake-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempSock(dir.join("sock"))
    }
}

impl Drop for TempSock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

fn read_msg(s: &mut UnixStream, f: &mut Framer) -> Message {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(m) = f.next_message().unwrap() {
            return m;
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "client closed");
        f.push(&buf[..n]);
    }
}

fn send(s: &mut UnixStream, m: &Message) {
    s.write_all(&m.to_bytes()).unwrap();
}

#[test]
fn answers_echo_while_waiting_then_notices_garbage() {
    let sock = TempSock::new();
    let listener = UnixListener::bind(&sock.0).unwrap();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut f = Framer::new();
        let Message::Request { method, id, .. } = read_msg(&mut s, &mut f) else {
            panic!("expected a request");
        };
        assert_eq!(method, "list_dbs");
        // Probe the client before answering, split over two writes.
        let probe = Message::Request {
            method: "echo".into(),
            params: json!(["probe"]),
            id: json!("echo"),
        }
        .to_bytes();
        s.write_all(&probe[..5]).unwrap();
        thread::sleep(Duration::from_millis(50));
        s.write_all(&probe[5..]).unwrap();
        let reply = read_msg(&mut s, &mut f);
        assert_eq!(
            reply,
            Message::Response {
                result: json!(["probe"]),
                id: json!("echo")
            }
        );
        // A notification for no monitor of ours, then the reply.
        send(
            &mut s,
            &Message::Notification {
                method: "update".into(),
                params: json!(["someone-else", {"Bridge": {}}]),
            },
        );
        send(
            &mut s,
            &Message::Response {
                result: json!(["Open_vSwitch", "_Server"]),
                id,
            },
        );
        // An unknown request gets an error reply.
        send(
            &mut s,
            &Message::Request {
                method: "bogus".into(),
                params: json!([]),
                id: json!(99),
            },
        );
        let Message::Error { id, .. } = read_msg(&mut s, &mut f) else {
            panic!("expected an error reply");
        };
        assert_eq!(id, json!(99));
        s.write_all(b"{\"id\": ]").unwrap();
        thread::sleep(Duration::from_millis(200));
    });
    let mut client = Client::connect(&format!("unix:{}", sock.0.display())).unwrap();
    assert_eq!(client.list_dbs().unwrap(), vec!["Open_vSwitch", "_Server"]);
    assert_eq!(client.echoes_answered(), 1);
    let e = client.next_update(Duration::from_secs(10)).unwrap_err();
    assert!(matches!(e, Error::Json(_)), "{e}");
    assert!(!client.is_connected());
    server.join().unwrap();
}

#[test]
fn a_silent_server_times_out_and_a_closed_one_disconnects() {
    let sock = TempSock::new();
    let listener = UnixListener::bind(&sock.0).unwrap();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut f = Framer::new();
        let _ = read_msg(&mut s, &mut f); // never answered
        let Message::Request { id, .. } = read_msg(&mut s, &mut f) else {
            panic!("expected a request");
        };
        // The late reply to the first request comes first, is ignored.
        send(
            &mut s,
            &Message::Response {
                result: json!(["late"]),
                id: json!(1),
            },
        );
        send(
            &mut s,
            &Message::Error {
                error: json!({"error": "unknown database", "details": "nope"}),
                id,
            },
        );
        let _ = read_msg(&mut s, &mut f);
        // Close without answering.
    });
    let mut client = Client::connect(&format!("unix:{}", sock.0.display())).unwrap();
    client.set_timeout(Duration::from_millis(200));
    let e = client.list_dbs().unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(
        e.to_string().starts_with("no reply to list_dbs from unix:"),
        "{e}"
    );
    assert!(client.is_connected());
    client.set_timeout(Duration::from_secs(10));
    let e = client.get_schema("nope").unwrap_err();
    assert_eq!(e.to_string(), "get_schema failed: unknown database (nope)");
    let e = client.echo().unwrap_err();
    assert!(
        matches!(&e, Error::Disconnected { waiting_for: Some(m), .. } if m == "echo"),
        "{e}"
    );
    assert!(
        e.to_string()
            .ends_with("closed while waiting for the reply to echo"),
        "{e}"
    );
    let e = client.echo().unwrap_err();
    assert!(matches!(e, Error::NotConnected { .. }), "{e}");
    server.join().unwrap();
}

#[test]
fn bad_addresses_are_refused() {
    for a in [
        "",
        "unix:",
        "tcp:1.2.3.4",
        "tcp:host:6640",
        // (Without TLS settings.)
        "ssl:1.2.3.4:6640",
        "ssl:1.2.3.4",
        "/run/db.sock",
    ] {
        let e = Client::connect(a).unwrap_err();
        assert!(matches!(e, Error::BadAddress { .. }), "{a}: {e}");
        assert!(e.to_string().contains(&format!("{a:?}")), "{e}");
    }
    assert_eq!(
        "tcp:[::1]:6640"
            .parse::<flowpath_ovsdb::Address>()
            .unwrap()
            .to_string(),
        "tcp:[::1]:6640"
    );
}
