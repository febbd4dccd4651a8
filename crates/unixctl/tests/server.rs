//! The control server against good and bad clients: round trips,
//! `list-commands`, unknown methods and argument counts (OVS's messages),
//! several requests on one connection, malformed JSON, non-string
//! parameters, oversized requests, a client that stalls mid-request while
//! others are served, many clients at once, a panicking handler, a socket
//! already in use, a stale socket file, and the real `ovs-appctl`.

use flowpath_unixctl::{Client, CommandSpec, Handler, Server, UnixctlError, MAX_REQUEST};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

static SEQ: AtomicU32 = AtomicU32::new(0);

fn sock_path(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fp-unixctl-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    d.join(format!("{name}.ctl"))
}

fn specs() -> Vec<CommandSpec> {
    let c = |n: &str, u: &str, min, max| CommandSpec {
        name: n.into(),
        usage: u.into(),
        min_args: min,
        max_args: max,
    };
    vec![
        c("echo", "ARG...", 1, 3),
        c("lines", "", 0, 0),
        c("fail", "", 0, 0),
        c("boom", "", 0, 0),
        c("slow", "", 0, 0),
    ]
}

fn handler() -> Arc<dyn Handler> {
    Arc::new(|m: &str, p: &[String]| -> Result<String, String> {
        match m {
            "echo" => Ok(format!("{}\n", p.join(" "))),
            "lines" => Ok("one\ntwo\nthree\n".into()),
            "fail" => Err("it failed".into()),
            "boom" => panic!("handler bug"),
            "slow" => {
                std::thread::sleep(Duration::from_millis(300));
                Ok("done\n".into())
            }
            _ => Err("?".into()),
        }
    })
}

fn server(name: &str) -> (Server, PathBuf) {
    let p = sock_path(name);
    let s = Server::bind_with_timeout(&p, specs(), handler(), Duration::from_millis(500)).unwrap();
    (s, p)
}

fn call(p: &Path, m: &str, args: &[&str]) -> Result<String, String> {
    let mut c = Client::connect(p, Duration::from_secs(5)).unwrap();
    let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    c.call(m, &a).unwrap()
}

/// Sends raw bytes and reads until the server closes or 2 s pass.
fn raw(p: &Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(p).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn commands_answer_and_errors_use_ovs_messages() {
    let (_s, p) = server("basic");
    assert_eq!(call(&p, "echo", &["a", "b"]), Ok("a b\n".into()));
    assert_eq!(call(&p, "lines", &[]), Ok("one\ntwo\nthree\n".into()));
    assert_eq!(call(&p, "fail", &[]), Err("it failed\n".into()));
    let l = call(&p, "list-commands", &[]).unwrap();
    assert!(l.starts_with("The available commands are:\n"), "{l}");
    assert!(l.contains("  echo                    ARG...\n"), "{l}");
    assert!(l.contains("  list-commands"), "{l}");
    assert_eq!(
        call(&p, "nope", &[]),
        Err("\"nope\" is not a valid command (use \"list-commands\" to see a list of valid commands)\n".into())
    );
    assert_eq!(
        call(&p, "echo", &[]),
        Err("\"echo\" command requires at least 1 arguments\n".into())
    );
    assert_eq!(
        call(&p, "echo", &["1", "2", "3", "4"]),
        Err("\"echo\" command takes at most 3 arguments\n".into())
    );
}

#[test]
fn several_requests_on_one_connection_in_order() {
    let (_s, p) = server("multi");
    let mut c = Client::connect(&p, Duration::from_secs(5)).unwrap();
    for i in 0..20 {
        let a = vec![i.to_string()];
        assert_eq!(c.call("echo", &a).unwrap(), Ok(format!("{i}\n")));
    }
    // Two requests in one write, no separator: two replies.
    let out = raw(
        &p,
        br#"{"id":1,"method":"echo","params":["x"]}{"id":2,"method":"lines","params":[]}"#,
    );
    let replies: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&out)
        .into_iter()
        .map(|v| v.unwrap())
        .collect();
    assert_eq!(replies.len(), 2, "{out}");
    assert_eq!(replies[0]["id"], 1);
    assert_eq!(replies[0]["result"], "x\n");
    assert_eq!(replies[1]["id"], 2);
    assert!(replies[1]["error"].is_null());
}

#[test]
fn malformed_requests_get_an_error_or_a_closed_connection() {
    let (s, p) = server("bad");
    for (bytes, want) in [
        (
            &b"{\"id\":7,\"method\":\"echo\",\"params\":[1]}"[..],
            "array of strings",
        ),
        (b"{\"id\":8,\"params\":[]}", "no \\\"method\\\""),
        (b"[1,2,3]", "not a JSON object"),
        (b"{\"id\":9,,}", "malformed"),
        (b"\xff\xfe garbage", "malformed"),
    ] {
        let out = raw(&p, bytes);
        assert!(out.contains(want), "{bytes:?}: {out}");
        assert!(out.contains("\"result\":null"), "{out}");
    }
    // The server is still there.
    assert_eq!(call(&p, "echo", &["ok"]), Ok("ok\n".into()));
    let t0 = Instant::now();
    while s.clients() > 0 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.clients(), 0, "every connection thread ended");
}

#[test]
fn oversized_request_closes_the_connection() {
    let (_s, p) = server("big");
    let mut s = UnixStream::connect(&p).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut big = b"{\"id\":1,\"method\":\"echo\",\"params\":[\"".to_vec();
    big.extend(std::iter::repeat_n(b'a', MAX_REQUEST + 100_000));
    // The server stops reading and closes: the write fails or the read
    // sees the end, without a reply.
    let _ = s.write_all(&big);
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "no reply to an oversized request");
    assert_eq!(call(&p, "echo", &["still"]), Ok("still\n".into()));
}

#[test]
fn a_stalled_client_does_not_block_others_and_is_closed() {
    let (s, p) = server("stall");
    let mut stalled = UnixStream::connect(&p).unwrap();
    stalled.write_all(b"{\"id\":1,\"method\":\"ec").unwrap();
    let t0 = Instant::now();
    assert_eq!(call(&p, "echo", &["other"]), Ok("other\n".into()));
    assert!(t0.elapsed() < Duration::from_millis(400));
    // Closed after the idle timeout (500 ms in this test).
    stalled
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(stalled.read(&mut buf).unwrap_or(0), 0);
    let t0 = Instant::now();
    while s.clients() > 0 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.clients(), 0);
}

#[test]
fn many_clients_at_once() {
    let (_s, p) = server("many");
    let threads: Vec<_> = (0..50)
        .map(|i| {
            let p = p.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(&p, Duration::from_secs(10)).unwrap();
                let r = c.call("slow", &[]).unwrap();
                let e = c.call("echo", &[i.to_string()]).unwrap();
                (r, e, i)
            })
        })
        .collect();
    for t in threads {
        let (r, e, i) = t.join().unwrap();
        assert_eq!(r, Ok("done\n".into()));
        assert_eq!(e, Ok(format!("{i}\n")));
    }
}

#[test]
fn a_panicking_handler_gives_an_error_and_the_server_goes_on() {
    let (_s, p) = server("panic");
    let e = call(&p, "boom", &[]).unwrap_err();
    assert!(e.contains("internal error"), "{e}");
    assert_eq!(call(&p, "echo", &["after"]), Ok("after\n".into()));
}

#[test]
fn socket_in_use_is_refused_and_stale_socket_replaced() {
    let (s, p) = server("inuse");
    let e = Server::bind(&p, specs(), handler()).unwrap_err();
    assert!(matches!(e, UnixctlError::InUse(_)), "{e}");
    assert!(e.to_string().contains("already in use"));
    s.shutdown();
    assert!(!p.exists(), "socket removed on shutdown");
    // A stale file (no server) is replaced.
    std::fs::write(&p, b"").unwrap();
    let s2 = Server::bind(&p, specs(), handler()).unwrap();
    assert_eq!(call(&p, "echo", &["x"]), Ok("x\n".into()));
    drop(s2);
    let e = Client::connect(&p, Duration::from_secs(1)).unwrap_err();
    assert!(e.to_string().contains("cannot connect"), "{e}");
}

#[test]
fn real_ovs_appctl_talks_to_the_server() {
    let have = std::process::Command::new("sh")
        .args(["-c", "command -v ovs-appctl"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !have {
        assert!(
            std::env::var("CI").map_or(true, |v| v.is_empty() || v == "false"),
            "CI must have ovs-appctl (.ci/run installs openvswitch-common)"
        );
        eprintln!("SKIPPED real_ovs_appctl_talks_to_the_server: ovs-appctl not installed");
        return;
    }
    let (_s, p) = server("appctl");
    let run = |args: &[&str]| {
        let o = std::process::Command::new("ovs-appctl")
            .arg("-t")
            .arg(&p)
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert_eq!(
        run(&["lines"]),
        (Some(0), "one\ntwo\nthree\n".into(), String::new())
    );
    assert_eq!(run(&["echo", "a", "b c"]).1, "a b c\n");
    let (code, out, _) = run(&["list-commands"]);
    assert_eq!(code, Some(0));
    assert_eq!(out, call(&p, "list-commands", &[]).unwrap());
    let (code, _, err) = run(&["fail"]);
    assert_eq!(code, Some(2));
    // The error on its own line, then ovs-appctl's own line.
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err:?}");
    assert_eq!(lines[0], "it failed", "{err:?}");
    assert!(
        lines[1].starts_with("ovs-appctl: ") && lines[1].ends_with("server returned an error"),
        "{err:?}"
    );
    // An unknown command's error likewise (`ovs-appctl -t SOCK bogus`).
    let (code, _, err) = run(&["bogus"]);
    assert_eq!(code, Some(2));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err:?}");
    assert!(
        lines[0].starts_with("\"bogus\" is not a valid command"),
        "{err:?}"
    );
    assert!(lines[1].starts_with("ovs-appctl: "), "{err:?}");
    let (code, _, err) = run(&["echo"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("requires at least 1 arguments"), "{err}");
}
