//! Against the real `ovsdb-server` with Open vSwitch's own schema: the
//! replica follows what `ovs-vsctl` changes, the client's writes are what
//! `ovs-vsctl` reads back, and a restarted server is noticed and
//! reconnected to.
//!
//! Skipped (with a message) when Open vSwitch's tools are not installed,
//! except when the environment variable `CI` is set: then it fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use flowpath_ovsdb::{
    ChangeKind, Client, Condition, Error, Mutation, Operation, Replica, TableMonitor, Value,
};

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";
const DB: &str = "Open_vSwitch";
const WAIT: Duration = Duration::from_secs(10);

/// Whether the tools are there; without them, skip or (under CI) fail.
fn tools_present() -> bool {
    let missing: Vec<&str> = ["ovsdb-server", "ovsdb-tool", "ovs-vsctl"]
        .into_iter()
        .filter(|tool| {
            Command::new(tool)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_or(true, |s| !s.success())
        })
        .collect();
    let schema_missing = !Path::new(SCHEMA).exists();
    if missing.is_empty() && !schema_missing {
        return true;
    }
    let why = format!(
        "missing tools {missing:?}, schema {SCHEMA} present: {}",
        !schema_missing
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "under CI the OVS tools must be installed: {why}"
    );
    eprintln!("skipped: {why}");
    false
}

/// A private `ovsdb-server` in a temporary directory; dropping it kills
/// the server (the process this test started, by its handle) and removes
/// the directory, also when the test fails.
struct Server {
    dir: PathBuf,
    child: Option<Child>,
    /// Also listen on `ptcp:PORT:127.0.0.1`.
    tcp_port: Option<u16>,
}

impl Server {
    fn new() -> Server {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "flowpath-ovsdb-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let server = Server {
            dir,
            child: None,
            tcp_port: None,
        };
        let out = Command::new("ovsdb-tool")
            .arg("create")
            .arg(server.db())
            .arg(SCHEMA)
            .output()
            .unwrap();
        assert!(out.status.success(), "ovsdb-tool create: {out:?}");
        server
    }

    fn db(&self) -> PathBuf {
        self.dir.join("conf.db")
    }

    fn sock(&self) -> PathBuf {
        self.dir.join("db.sock")
    }

    fn address(&self) -> String {
        format!("unix:{}", self.sock().display())
    }

    fn start(&mut self) {
        assert!(self.child.is_none());
        let _ = std::fs::remove_file(self.sock());
        let d = &self.dir;
        let child = Command::new("ovsdb-server")
            .arg(self.db())
            .args(
                self.tcp_port
                    .map(|p| format!("--remote=ptcp:{p}:127.0.0.1")),
            )
            .arg(format!("--remote=punix:{}", self.sock().display()))
            .arg(format!(
                "--unixctl={}",
                d.join("ovsdb-server.ctl").display()
            ))
            .arg(format!(
                "--log-file={}",
                d.join("ovsdb-server.log").display()
            ))
            .arg("--no-chdir")
            .arg("-vconsole:off")
            .env("OVS_RUNDIR", d)
            .env("OVS_LOGDIR", d)
            .env("OVS_DBDIR", d)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting ovsdb-server");
        self.child = Some(child);
        // Up when the socket accepts connections.
        let until = Instant::now() + WAIT;
        while std::os::unix::net::UnixStream::connect(self.sock()).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("ovsdb-server exited with {status}: {}", self.log());
            }
            assert!(
                Instant::now() < until,
                "ovsdb-server did not listen: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ovsdb-server.log")).unwrap_or_default()
    }

    /// Runs `ovs-vsctl --no-wait ARGS` against this server; its output.
    fn vsctl(&self, args: &[&str]) -> String {
        let out = Command::new("ovs-vsctl")
            .arg(format!("--db={}", self.address()))
            .arg("--no-wait")
            .arg("--timeout=10")
            .args(args)
            .env("OVS_RUNDIR", &self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ovs-vsctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn monitored() -> Vec<TableMonitor> {
    vec![
        TableMonitor::all("Open_vSwitch"),
        TableMonitor::all("Bridge"),
        TableMonitor::all("Port"),
        TableMonitor::columns(
            "Interface",
            &[
                "name",
                "type",
                "ofport",
                "ofport_request",
                "error",
                "statistics",
            ],
        ),
    ]
}

fn wait(client: &mut Client, what: &str, done: impl FnMut(&Replica) -> bool) {
    assert!(
        client.wait_until(WAIT, done).unwrap(),
        "timed out waiting for {what}; replica: {:?}",
        client.replica()
    );
}

fn has_row(r: &Replica, table: &str, name: &str) -> bool {
    r.find(table, "name", name).is_some()
}

/// br0 with its port p1 and interface p1 are in the replica, linked.
fn check_br0_p1(r: &Replica) {
    let br = r.find("Bridge", "name", "br0").expect("bridge br0");
    assert_eq!(br.string("datapath_type").unwrap(), "netdev");
    let port = r.find("Port", "name", "p1").expect("port p1");
    assert!(br.uuids("ports").unwrap().contains(&port.uuid()));
    let iface = r.find("Interface", "name", "p1").expect("interface p1");
    assert_eq!(port.uuids("interfaces").unwrap(), vec![iface.uuid()]);
    assert_eq!(iface.string("type").unwrap(), "system");
    assert_eq!(iface.optional_integer("ofport_request").unwrap(), Some(5));
    let ovs = r.rows("Open_vSwitch").next().expect("Open_vSwitch row");
    assert_eq!(ovs.uuids("bridges").unwrap(), vec![br.uuid()]);
}

#[test]
fn replica_follows_vsctl_and_writes_read_back() {
    if !tools_present() {
        return;
    }
    let mut server = Server::new();
    server.start();
    let mut client = Client::connect(&server.address()).unwrap();
    assert!(client.list_dbs().unwrap().contains(&DB.to_string()));
    client.echo().unwrap();

    // Names are checked against the schema before anything is sent.
    let e = client
        .monitor(DB, &[TableMonitor::columns("Bridge", &["nmae"])])
        .unwrap_err();
    assert_eq!(e.to_string(), "table Bridge has no column nmae");
    let e = client
        .monitor(DB, &[TableMonitor::all("Bridges")])
        .unwrap_err();
    assert_eq!(e.to_string(), "database has no table Bridges");
    let e = client.get_schema("nosuchdb").unwrap_err();
    assert!(
        matches!(&e, Error::Server { method, .. } if method == "get_schema"),
        "{e}"
    );
    assert!(e.to_string().contains("unknown database"), "{e}");

    let initial = client.monitor(DB, &monitored()).unwrap();
    assert!(initial.is_empty(), "{initial:?}");
    assert!(client.replica().is_empty());
    assert_eq!(client.schema().unwrap().name, DB);

    server.vsctl(&["init"]);
    wait(&mut client, "the Open_vSwitch row", |r| {
        r.len("Open_vSwitch") == 1
    });

    server.vsctl(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
    ]);
    wait(&mut client, "bridge br0", |r| {
        r.find("Bridge", "name", "br0")
            .is_some_and(|b| b.string("datapath_type").is_ok_and(|t| t == "netdev"))
    });
    // The bridge's local port and interface came with it.
    assert!(has_row(client.replica(), "Port", "br0"));
    assert!(has_row(client.replica(), "Interface", "br0"));

    server.vsctl(&[
        "add-port",
        "br0",
        "p1",
        "--",
        "set",
        "Interface",
        "p1",
        "type=system",
        "ofport_request=5",
    ]);
    wait(&mut client, "interface p1 with ofport_request", |r| {
        r.find("Interface", "name", "p1")
            .is_some_and(|i| i.optional_integer("ofport_request").ok() == Some(Some(5)))
    });
    check_br0_p1(client.replica());
    let iface = client.replica().find("Interface", "name", "p1").unwrap();
    assert_eq!(iface.optional_integer("ofport").unwrap(), None);
    assert!(iface.integer_map("statistics").unwrap().is_empty());
    // Not monitored, but a column: told apart from a typo.
    assert!(matches!(iface.get("mtu"), Err(Error::MissingColumn { .. })));
    assert!(matches!(iface.get("mtuu"), Err(Error::NoSuchColumn { .. })));

    // Write back what a switch reports.
    let ovs_uuid = client
        .replica()
        .rows("Open_vSwitch")
        .next()
        .unwrap()
        .uuid()
        .clone();
    let results = client
        .transact(
            DB,
            &[
                Operation::Update {
                    table: "Interface".into(),
                    conditions: vec![Condition::eq("name", "p1")],
                    row: [
                        ("ofport".to_string(), Value::from(5)),
                        (
                            "error".to_string(),
                            Value::from("could not open network device p1"),
                        ),
                        (
                            "statistics".to_string(),
                            Value::map([("rx_packets", 10i64), ("tx_bytes", 1234i64)]),
                        ),
                    ]
                    .into(),
                },
                Operation::Mutate {
                    table: "Open_vSwitch".into(),
                    conditions: vec![Condition::uuid(&ovs_uuid)],
                    mutations: vec![
                        Mutation::new("cur_cfg", "+=", 7),
                        Mutation::insert("external_ids", Value::string_map([("flowpath", "yes")])),
                    ],
                },
                Operation::Comment("flowpath-ovsdb test".into()),
            ],
        )
        .unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].count, Some(1));
    assert_eq!(results[1].count, Some(1));
    wait(&mut client, "our own write", |r| {
        r.find("Interface", "name", "p1")
            .is_some_and(|i| i.optional_integer("ofport").ok() == Some(Some(5)))
    });
    let iface = client.replica().find("Interface", "name", "p1").unwrap();
    assert_eq!(
        iface.optional_string("error").unwrap(),
        Some("could not open network device p1")
    );
    assert_eq!(iface.integer_map("statistics").unwrap()["tx_bytes"], 1234);
    let ovs = client.replica().row("Open_vSwitch", &ovs_uuid).unwrap();
    assert_eq!(ovs.integer("cur_cfg").unwrap(), 7);
    assert_eq!(ovs.string_map("external_ids").unwrap()["flowpath"], "yes");

    assert_eq!(server.vsctl(&["get", "Interface", "p1", "ofport"]), "5");
    assert_eq!(
        server.vsctl(&["get", "Interface", "p1", "statistics"]),
        "{rx_packets=10, tx_bytes=1234}"
    );
    assert_eq!(
        server.vsctl(&["get", "Interface", "p1", "error"]),
        "\"could not open network device p1\""
    );
    assert_eq!(server.vsctl(&["get", "Open_vSwitch", ".", "cur_cfg"]), "7");

    // Select and insert with a named UUID.
    let r = client
        .transact(
            DB,
            &[Operation::Select {
                table: "Interface".into(),
                conditions: vec![Condition::eq("name", "p1")],
                columns: Some(vec!["name".into(), "ofport".into()]),
            }],
        )
        .unwrap();
    let rows = r[0].rows.as_ref().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["ofport"], Value::from(5));

    // Errors: the schema's, then the server's, naming the operation.
    let e = client
        .transact(
            DB,
            &[Operation::Update {
                table: "Interface".into(),
                conditions: vec![],
                row: [("ofportt".to_string(), Value::from(1))].into(),
            }],
        )
        .unwrap_err();
    assert_eq!(e.to_string(), "table Interface has no column ofportt");
    let e = client
        .transact(
            DB,
            &[
                Operation::Comment("first".into()),
                Operation::Update {
                    table: "Interface".into(),
                    conditions: vec![Condition::eq("name", "p1")],
                    row: [("ofport_request".to_string(), Value::from(70000))].into(),
                },
            ],
        )
        .unwrap_err();
    match &e {
        Error::Transaction {
            index, op, error, ..
        } => {
            assert_eq!(
                (*index, op.as_str(), error.as_str()),
                (1, "update", "constraint violation"),
                "{e}"
            );
        }
        other => panic!("expected a transaction error, got {other}"),
    }
    let e = client
        .transact(
            DB,
            &[Operation::Wait {
                table: "Bridge".into(),
                conditions: vec![Condition::eq("name", "br0")],
                columns: vec!["name".into()],
                equal: true,
                rows: vec![],
                timeout_ms: Some(0),
            }],
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("transaction failed at operation 0 (wait): timed out"),
        "{e}"
    );
    // A failed transaction changed nothing.
    assert_eq!(
        server.vsctl(&["get", "Interface", "p1", "ofport_request"]),
        "5"
    );

    // Quiet: no update comes.
    while client
        .next_update(Duration::from_millis(100))
        .unwrap()
        .is_some()
    {}
    assert!(client
        .next_update(Duration::from_millis(200))
        .unwrap()
        .is_none());

    server.vsctl(&["del-port", "br0", "p1"]);
    let mut deleted = Vec::new();
    while has_row(client.replica(), "Interface", "p1") || has_row(client.replica(), "Port", "p1") {
        let changes = client
            .next_update(WAIT)
            .unwrap()
            .expect("an update for del-port");
        deleted.extend(
            changes
                .into_iter()
                .filter(|c| c.kind == ChangeKind::Delete)
                .map(|c| c.table),
        );
    }
    deleted.sort();
    assert_eq!(deleted, vec!["Interface", "Port"]);
    let br = client.replica().find("Bridge", "name", "br0").unwrap();
    assert_eq!(
        br.uuids("ports").unwrap().len(),
        1,
        "only the local port is left"
    );
}

#[test]
fn reconnects_after_a_server_restart() {
    if !tools_present() {
        return;
    }
    let mut server = Server::new();
    server.start();
    server.vsctl(&["init"]);
    server.vsctl(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
    ]);
    server.vsctl(&[
        "add-port",
        "br0",
        "p1",
        "--",
        "set",
        "Interface",
        "p1",
        "type=system",
        "ofport_request=5",
    ]);
    let mut client = Client::connect(&server.address()).unwrap();
    let initial = client.monitor(DB, &monitored()).unwrap();
    assert!(initial.iter().all(|c| c.kind == ChangeKind::Insert));
    check_br0_p1(client.replica());

    server.stop();
    let e = client.next_update(WAIT).unwrap_err();
    assert!(matches!(e, Error::Disconnected { .. }), "{e}");
    assert!(!client.is_connected());
    let e = client
        .transact(DB, &[Operation::Comment("x".into())])
        .unwrap_err();
    assert!(matches!(e, Error::NotConnected { .. }), "{e}");
    // The last contents stay readable meanwhile.
    check_br0_p1(client.replica());
    // No server: reconnect fails and can be retried.
    let e = client.reconnect().unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    assert!(e.to_string().starts_with("connecting to unix:"), "{e}");

    // Changed while the client was away.
    server.start();
    server.vsctl(&["add-port", "br0", "p2"]);
    let until = Instant::now() + WAIT;
    let mut backoff = Duration::from_millis(10);
    let rebuilt = loop {
        match client.reconnect() {
            Ok(changes) => break changes,
            Err(e) => {
                assert!(Instant::now() < until, "no reconnect: {e}");
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    };
    assert!(client.is_connected());
    assert!(rebuilt.iter().all(|c| c.kind == ChangeKind::Insert));
    check_br0_p1(client.replica());
    assert!(has_row(client.replica(), "Port", "p2"));
    assert_eq!(client.replica().len("Port"), 3);

    // Updates flow again on the new connection.
    server.vsctl(&["del-br", "br0"]);
    wait(&mut client, "br0 deleted", |r| {
        r.len("Bridge") == 0 && r.len("Port") == 0
    });
    assert_eq!(client.replica().len("Interface"), 0);
}

#[test]
fn connects_over_tcp() {
    if !tools_present() {
        return;
    }
    let mut server = Server::new();
    // A port free a moment ago (the small race is acceptable in a test).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    server.tcp_port = Some(port);
    server.start();
    server.vsctl(&["init"]);
    server.vsctl(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
    ]);
    let address = format!("tcp:127.0.0.1:{port}");
    let until = Instant::now() + WAIT;
    let mut client = loop {
        match Client::connect(&address) {
            Ok(c) => break c,
            Err(e) => {
                assert!(Instant::now() < until, "{e}: {}", server.log());
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    assert_eq!(client.address().to_string(), address);
    client.monitor(DB, &monitored()).unwrap();
    let br = client.replica().find("Bridge", "name", "br0").unwrap();
    assert_eq!(br.string("datapath_type").unwrap(), "netdev");
    server.vsctl(&["add-port", "br0", "p1"]);
    wait(&mut client, "port p1 over tcp", |r| {
        has_row(r, "Port", "p1")
    });
}
