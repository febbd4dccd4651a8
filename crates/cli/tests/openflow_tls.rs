//! The OpenFlow channel over TLS, as root, with certificates made here
//! (one CA that signs the switch's and its peers' certificates, another
//! that signs a stranger's):
//!
//! - `--openflow pssl:PORT`: the real `ovs-ofctl -p KEY -c CERT -C CA`
//!   adds and dumps flows over `ssl:127.0.0.1:PORT`; a peer without a
//!   certificate, one signed by the other CA, and one that never ends its
//!   handshake are refused or time out while the switch serves the
//!   others.
//! - `--controller ssl:127.0.0.1:PORT`: `ovs-testcontroller -p -c -C
//!   pssl:PORT` controls the switch; pings between three namespaces go
//!   through the flows it installs. A controller whose certificate is
//!   signed by the other CA is refused.
//! - `ssl:`/`pssl:` without `--private-key`, `--certificate` or
//!   `--ca-cert`, or with a file that is not PEM, are refused at start,
//!   naming the option or the file.

mod ofnet;

use ofnet::{can_run, listening, s, sh, wait_until, Topo, BIN};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A CA: its certificate and key.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = p.self_signed(&key).unwrap();
    Ca { cert, key }
}

/// Writes `{name}-key.pem` and `{name}-cert.pem` (signed by `ca`) and, if
/// not there yet, `{ca}-cacert.pem` in `t`'s run directory.
fn issue(t: &Topo, ca_name: &str, ca: &Ca, name: &str) {
    let key = KeyPair::generate().unwrap();
    // The switch's certificate names 127.0.0.1 (for the rustls client
    // below; Open vSwitch and the switch look at no names).
    let names = match name {
        "switch" => vec!["127.0.0.1".to_string()],
        _ => Vec::new(),
    };
    let mut p = CertificateParams::new(names).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    let cert = p.signed_by(&key, &ca.cert, &ca.key).unwrap();
    std::fs::write(t.path(&format!("{name}-key.pem")), key.serialize_pem()).unwrap();
    std::fs::write(t.path(&format!("{name}-cert.pem")), cert.pem()).unwrap();
    std::fs::write(t.path(&format!("{ca_name}-cacert.pem")), ca.cert.pem()).unwrap();
}

/// `--private-key`, `--certificate`, `--ca-cert` (or ovs-ofctl's `-p`,
/// `-c`, `-C`) for `name`'s files.
fn tls_args(t: &Topo, name: &str, ca: &str, long: bool) -> Vec<String> {
    let opts = if long {
        ["--private-key", "--certificate", "--ca-cert"]
    } else {
        ["-p", "-c", "-C"]
    };
    vec![
        opts[0].into(),
        s(&t.path(&format!("{name}-key.pem"))),
        opts[1].into(),
        s(&t.path(&format!("{name}-cert.pem"))),
        opts[2].into(),
        s(&t.path(&format!("{ca}-cacert.pem"))),
    ]
}

/// Certificates for the switch, a controller (both signed by `ca1`) and a
/// stranger (signed by `ca2`).
fn certificates(t: &Topo) {
    let ca1 = ca("flowpath test CA");
    let ca2 = ca("another CA");
    issue(t, "ca1", &ca1, "switch");
    issue(t, "ca1", &ca1, "controller");
    issue(t, "ca2", &ca2, "stranger");
}

/// A rustls client trusting ca1, with `name`'s certificate or none:
/// whether the switch answers its OpenFlow HELLO.
fn hello(t: &Topo, port: u16, name: Option<&str>) -> Result<(), String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(t.path("ca1-cacert.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let cfg = match name {
        None => cfg.with_no_client_auth(),
        Some(n) => {
            let certs = CertificateDer::pem_file_iter(t.path(&format!("{n}-cert.pem")))
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_file(t.path(&format!("{n}-key.pem"))).unwrap();
            cfg.with_client_auth_cert(certs, key).unwrap()
        }
    };
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
    let mut sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut sock);
    // OFPT_HELLO, OpenFlow 1.3.
    tls.write_all(&[4, 0, 0, 8, 0, 0, 0, 1])
        .map_err(|e| e.to_string())?;
    let mut b = [0u8; 8];
    tls.read_exact(&mut b).map_err(|e| e.to_string())?;
    Ok(())
}

/// `ovs-testcontroller` on `pssl:PORT` with `name`'s certificate (and
/// ca1 to check the switch's), then the switch with `--controller
/// ssl:127.0.0.1:PORT`.
fn ssl_controller_and_switch(t: &mut Topo, port: u16, name: &str) {
    let ct = tls_args(t, name, "ca1", false);
    let ct: Vec<&str> = ct.iter().map(String::as_str).collect();
    t.testcontroller("OpenFlow13", &ct, &format!("pssl:{port}:127.0.0.1"));
    assert!(wait_until(Duration::from_secs(5), || listening(port)));
    let args = tls_args(t, "switch", "ca1", true);
    t.switch_controlled(&format!("ssl:127.0.0.1:{port}"), "secure", &args);
}

#[test]
fn pssl_serves_ovs_ofctl_and_refuses_strangers() {
    if !can_run(
        "pssl_serves_ovs_ofctl_and_refuses_strangers",
        &["ovs-ofctl"],
    ) {
        return;
    }
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let t0 = Instant::now();
    let mut t = Topo::bare("tls");
    certificates(&t);
    let port = 16640;
    let mut args = vec!["--openflow".to_string(), format!("pssl:{port}:127.0.0.1")];
    args.extend(tls_args(&t, "switch", "ca1", true));
    let sw = t.switch(&args);
    assert!(wait_until(Duration::from_secs(5), || listening(port)));
    // A peer that connects and never says anything: the others are
    // served meanwhile.
    let _stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let ok = tls_args(&t, "controller", "ca1", false).join(" ");
    let target = format!("ssl:127.0.0.1:{port}");
    t.ofctl(&format!(
        "{ok} -O OpenFlow13 add-flow {target} 'priority=7,ip,nw_dst=10.9.0.1,actions=drop'"
    ));
    let d = t.ofctl(&format!("{ok} dump-flows {target}"));
    assert!(
        d.contains("priority=7,ip,nw_dst=10.9.0.1 actions=drop"),
        "{d}"
    );
    // Signed by another CA: refused.
    let bad = tls_args(&t, "stranger", "ca1", false).join(" ");
    let o = t.ofctl_output(&format!("{bad} dump-flows {target}"));
    assert!(
        !o.status.success(),
        "a certificate of another CA was accepted: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    // No certificate: refused (the same client with one is answered).
    assert_eq!(hello(&t, port, Some("controller")), Ok(()));
    let r = hello(&t, port, None);
    assert!(r.is_err(), "a peer without a certificate got an answer");
    // The switch still serves.
    let d = t.ofctl(&format!("{ok} dump-flows {target}"));
    assert!(d.contains("nw_dst=10.9.0.1"), "{d}");
    let log = t.log("switch.log");
    assert!(
        log.contains("UnknownIssuer") && log.contains("peer sent no certificates"),
        "{log}"
    );
    // SIGTERM: the switch stops at once, the stalled handshake too.
    let pid = t.kids[sw].id();
    assert!(sh(&format!("kill -TERM {pid}")).status.success());
    let child = &mut t.kids[sw];
    assert!(
        wait_until(Duration::from_secs(3), || child
            .try_wait()
            .is_ok_and(|s| s.is_some())),
        "the switch did not stop within 3 s of SIGTERM"
    );
    eprintln!("pssl test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn ssl_controller_forwards_pings() {
    if !can_run(
        "ssl_controller_forwards_pings",
        &["ip", "ping", "ovs-testcontroller", "ovs-ofctl"],
    ) {
        return;
    }
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let t0 = Instant::now();
    let mut t = Topo::new("tlc");
    certificates(&t);
    ssl_controller_and_switch(&mut t, 16641, "controller");
    // The controller installs its table-miss flow once connected.
    assert!(
        wait_until(Duration::from_secs(10), || t
            .ofctl("-O OpenFlow13 dump-flows br0")
            .contains("actions=CONTROLLER")),
        "the ssl controller installed no flows: {}\n{}",
        t.log("switch.log"),
        t.log("testcontroller.log")
    );
    for (a, b) in [(1, 2), (2, 3), (3, 1)] {
        assert!(t.ping(a, b), "ping h{a} -> h{b} through the controller");
    }
    let d = t.ofctl("-O OpenFlow13 dump-flows br0");
    let learned = d.lines().filter(|l| l.contains("actions=output:")).count();
    assert!(learned >= 4, "the controller's flows:\n{d}");
    eprintln!("ssl controller test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn ssl_controller_of_another_ca_is_refused() {
    if !can_run(
        "ssl_controller_of_another_ca_is_refused",
        &["ovs-testcontroller", "ovs-ofctl"],
    ) {
        return;
    }
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut t = Topo::bare("tlx");
    certificates(&t);
    // The stranger trusts the switch's CA: only the switch can refuse.
    ssl_controller_and_switch(&mut t, 16643, "stranger");
    assert!(
        wait_until(Duration::from_secs(10), || t
            .log("switch.log")
            .contains("UnknownIssuer")),
        "{}",
        t.log("switch.log")
    );
    let d = t.ofctl("-O OpenFlow13 dump-flows br0");
    assert!(
        !d.contains("CONTROLLER"),
        "a refused controller's flows:\n{d}"
    );
}

#[test]
fn ssl_needs_its_three_files() {
    let t = Topo::bare("tlo");
    certificates(&t);
    std::fs::write(t.path("junk.pem"), "not a certificate\n").unwrap();
    let run = |extra: &[String]| -> String {
        let o = Command::new(BIN)
            .args(["switch", "--rules", "/dev/null", "--port", "1=null"])
            .arg("--ctl")
            .arg(t.path("x.ctl"))
            .args(["--openflow", "pssl:16642:127.0.0.1"])
            .args(extra)
            .output()
            .unwrap();
        assert!(!o.status.success(), "started with {extra:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let all = tls_args(&t, "switch", "ca1", true);
    for (i, opt) in ["--private-key", "--certificate", "--ca-cert"]
        .iter()
        .enumerate()
    {
        let mut a = all.clone();
        a.drain(2 * i..2 * i + 2);
        let e = run(&a);
        assert!(e.contains(opt), "without {opt}: {e}");
    }
    let junk = s(&t.path("junk.pem"));
    for i in 0..3 {
        let mut a = all.clone();
        a[2 * i + 1] = junk.clone();
        let e = run(&a);
        assert!(e.contains(&junk) && e.contains(&all[2 * i]), "{e}");
    }
}

/// `flowpath switch --ovsdb ssl:...` against the real `ovsdb-server` on
/// `pssl:` (both presenting certificates signed by ca1): `ovs-vsctl --wait`
/// returns once the switch applied the change it read over TLS, and the
/// bridge it made answers `ovs-ofctl`. A switch whose certificate another
/// CA signed is refused by the server and says so; `ssl:` without the TLS
/// files is refused at start.
#[test]
fn ovsdb_over_ssl() {
    let tools = ["ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl"];
    if !can_run("ovsdb_over_ssl", &tools) {
        return;
    }
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut t = Topo::bare("tlsdb");
    certificates(&t);
    let dir = t.dir.clone();
    let o = sh(&format!(
        "ovsdb-tool create {}/conf.db {}",
        dir.display(),
        ofnet::SCHEMA
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let port = 16641;
    let mut db = Command::new("ovsdb-server");
    db.arg(dir.join("conf.db"))
        .arg(format!("--remote=punix:{}", dir.join("db.sock").display()))
        .arg(format!("--remote=pssl:{port}:127.0.0.1"))
        .arg(format!("--unixctl={}", dir.join("ovsdb.ctl").display()))
        .args(tls_args(&t, "controller", "ca1", true));
    t.start(db, "ovsdb-server.out");
    assert!(
        wait_until(Duration::from_secs(10), || listening(port)),
        "{}",
        t.log("ovsdb-server.out")
    );
    ofnet::vsctl(&dir, "--no-wait init");
    let remote = format!("ssl:127.0.0.1:{port}");
    let switch = |t: &mut Topo, cert: &str, log: &str| {
        let mut c = Command::new(BIN);
        c.args(["switch", "--bridge", "brs", "--ovsdb", &remote, "--ctl"])
            .arg(dir.join(format!("{cert}.ctl")))
            .args(tls_args(t, cert, "ca1", true));
        t.start(c, log)
    };
    let sw = switch(&mut t, "switch", "switch.log");
    // --wait: answered once the switch wrote cur_cfg back over TLS.
    ofnet::vsctl(&dir, "add-br brs -- set bridge brs datapath_type=netdev");
    assert!(t.ofctl("show brs").contains("LOCAL(brs)"));
    assert!(t
        .log("switch.log")
        .contains(&format!("connected to {remote}")));
    t.kill(sw);
    // A certificate of another CA: the server refuses it.
    let bad = switch(&mut t, "stranger", "stranger.log");
    assert!(
        wait_until(Duration::from_secs(10), || t
            .log("stranger.log")
            .contains(&format!("cannot connect to {remote}"))),
        "{}",
        t.log("stranger.log")
    );
    t.kill(bad);
    // ssl: without the files: refused at start, naming the options.
    let o = sh(&format!(
        "{BIN} switch --ovsdb {remote} --ctl {}/x.ctl",
        dir.display()
    ));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--private-key"),
        "{err}"
    );
}
