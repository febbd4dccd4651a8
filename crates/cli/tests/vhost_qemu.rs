//! A virtual machine on a vhost-user port, as root: QEMU boots a Linux
//! kernel (Debian's, unpacked where `.ci/run` puts it:
//! `FLOWPATH_VM_KERNEL`, default `/var/cache/flowpath-vm`) with a busybox
//! initramfs made here, its virtio-net device attached to the switch's
//! `vhost-user:` port; the switch's other ports are three namespaces on
//! veths (afpacket), rules `NORMAL`. The guest's own Linux driver
//! negotiates the features it wants — the checksum and segmentation
//! offloads among them — and then: pings a namespace, downloads 16 MB
//! over HTTP from it (checked against the file's MD5), and serves 8 MB
//! that a namespace downloads (checked likewise). TCP super-frames must
//! cross the port both ways (fewer frames than 1,514-byte segments would
//! need). QEMU runs without KVM (TCG: nested virtualisation is not
//! reliable on the test machines) and with MSI-X off on the device
//! (QEMU 7.2 crashes starting vhost with MSI-X under TCG).

mod ofnet;
mod vmguest;

use ofnet::*;
use std::time::Duration;
use vmguest::*;

/// What the guest does once its link is up (after `INIT_NET`).
const EXCHANGES: &str = r#"echo "VM: FEATURES $(cat /sys/class/net/eth0/device/features)"
ping -c 3 -W 5 10.77.0.1 >/dev/null && echo "VM: PING-OK"
wget -q -O /tmp/blob http://10.77.0.1:8000/blob && echo "VM: GOT $(md5sum /tmp/blob)"
mkdir -p /www
dd if=/dev/urandom of=/www/up bs=1M count=8 2>/dev/null
echo "VM: UP $(md5sum /www/up)"
httpd -p 8080 -h /www
echo "VM: READY"
sleep 300
poweroff -f
"#;

#[test]
fn a_linux_guest_pings_and_moves_tcp_both_ways_with_offloads() {
    guest_exchanges(
        "a_linux_guest_pings_and_moves_tcp_both_ways_with_offloads",
        false,
        false,
    );
}

/// The same over packed virtqueues (`packed=on`: the guest's driver and
/// the port use the packed ring layout).
#[test]
fn a_linux_guest_over_packed_rings() {
    guest_exchanges("a_linux_guest_over_packed_rings", false, true);
}

/// The same with the switch as the vhost-user client (OVS's
/// `dpdkvhostuserclient`): QEMU listens, the switch connects to it.
#[test]
fn a_linux_guest_on_a_client_port() {
    guest_exchanges("a_linux_guest_on_a_client_port", true, false);
}

fn guest_exchanges(test: &str, client: bool, packed: bool) {
    let Some((vmlinuz, modules, busybox)) = prerequisites(test) else {
        return;
    };
    // One guest at a time (two TCG guests on two cores would mostly wait).
    let _one = one_bridge_at_a_time();
    let mut t = Topo::new(match (client, packed) {
        (true, _) => "vc",
        (false, true) => "vp",
        (false, false) => "vm",
    });
    let init = INIT_NET.replace("@IP@", "10.77.0.4") + EXCHANGES;
    let initrd = write_initrd(&t, &busybox, &modules, &init);
    let blob_md5 = serve_blob(&mut t);
    let sock = t.path("vm.sock");
    t.switch_with_rules(
        "actions=NORMAL\n",
        &[
            "--port".into(),
            format!(
                "4=vhost-user:{}{}",
                s(&sock),
                if client { ",client" } else { "" }
            ),
        ],
    );
    let chardev = format!(
        "socket,id=c,path={}{}",
        s(&sock),
        if client { ",server=on,wait=off" } else { "" }
    );
    let extra = if packed { ",packed=on" } else { "" };
    let qemu = qemu(&vmlinuz, &initrd, &chardev, "52:54:00:77:00:04", extra);
    let vm = t.start(qemu, "qemu.log");
    let ready = wait_until(Duration::from_secs(240), || {
        t.log("qemu.log").contains("VM: READY") || t.kids[vm].try_wait().ok().flatten().is_some()
    });
    let log = t.log("qemu.log");
    assert!(
        ready && log.contains("VM: READY"),
        "the guest did not get through:\n{log}\n{}",
        t.log("switch.log")
    );
    assert!(
        log.contains("VM: PING-OK"),
        "the guest could not ping:\n{log}"
    );
    assert_eq!(
        reported(&log, "GOT").as_deref(),
        Some(blob_md5.as_str()),
        "the guest's download:\n{log}"
    );
    // Namespace 2 downloads what the guest serves.
    let got = t.path("up");
    let o = t.in_ns(
        2,
        90,
        &format!("curl -sS -m 80 -o {} http://10.77.0.4:8080/up", s(&got)),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        Some(md5(&got)),
        reported(&log, "UP"),
        "the namespace's download from the guest"
    );
    // The guest's driver took the offloads (feature bits 0 CSUM, 1
    // GUEST_CSUM, 7 GUEST_TSO4, 9 GUEST_ECN, 11 HOST_TSO4, 13 HOST_ECN,
    // 21 GUEST_ANNOUNCE),
    // and super-frames crossed the port both ways.
    let features = reported(&log, "FEATURES").unwrap_or_default();
    for bit in [0, 1, 7, 9, 11, 13, 21] {
        assert_eq!(
            features.as_bytes().get(bit),
            Some(&b'1'),
            "feature bit {bit}: {features}"
        );
    }
    // Bit 34: RING_PACKED, as asked.
    assert_eq!(
        features.as_bytes().get(34),
        Some(if packed { &b'1' } else { &b'0' }),
        "feature bit 34 (packed ring): {features}"
    );
    let show = t.appctl("dpctl/show");
    let port = show
        .split("port 4:")
        .nth(1)
        .unwrap_or_else(|| panic!("no port 4:\n{show}"));
    let counts = |dir: &str| -> (u64, u64) {
        let l = port
            .lines()
            .find(|l| l.trim_start().starts_with(dir))
            .unwrap_or("");
        let n = |k: &str| {
            l.split(k)
                .nth(1)
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0u64)
        };
        (n("packets:"), n("bytes:"))
    };
    let (rxp, rxb) = counts("RX");
    let (txp, txb) = counts("TX");
    eprintln!("port 4: RX {rxp} frames {rxb} bytes, TX {txp} frames {txb} bytes");
    assert!(
        rxb > 8_000_000 && rxb / rxp.max(1) > 1514,
        "from the guest: {port}"
    );
    assert!(
        txb > 16_000_000 && txb / txp.max(1) > 1514,
        "to the guest: {port}"
    );
}

#[test]
fn dynamic_executables_are_told_from_static_ones() {
    // Every Debian system's `env` is dynamically linked.
    assert!(!is_static(&std::fs::read("/usr/bin/env").unwrap()));
    assert!(!is_static(b"not an ELF file at all"));
    if let Ok(bb) = std::fs::read("/bin/busybox") {
        if sh("dpkg -s busybox-static").status.success() {
            assert!(is_static(&bb));
        }
    }
}
