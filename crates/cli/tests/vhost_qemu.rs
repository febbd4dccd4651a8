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

use ofnet::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The unpacked kernel package: its `vmlinuz` and modules directory.
fn kernel() -> Option<(PathBuf, PathBuf)> {
    let root = std::env::var_os("FLOWPATH_VM_KERNEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/flowpath-vm"));
    let vmlinuz = std::fs::read_dir(root.join("boot"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })?;
    let version = vmlinuz.file_name()?.to_str()?.strip_prefix("vmlinuz-")?;
    let modules = root.join("lib/modules").join(version).join("kernel");
    modules.is_dir().then_some((vmlinuz, modules))
}

/// One entry of a `newc` cpio archive.
fn cpio_entry(out: &mut Vec<u8>, ino: u32, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
    let fields = [
        ino,
        mode,
        0,
        0,
        1,
        0,
        data.len() as u32,
        0,
        0,
        rdev.0,
        rdev.1,
        name.len() as u32 + 1,
        0,
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// The modules virtio-net needs, in load order (Debian builds them as
/// modules).
const MODULES: [&str; 8] = [
    "drivers/virtio/virtio.ko",
    "drivers/virtio/virtio_ring.ko",
    "drivers/virtio/virtio_pci_modern_dev.ko",
    "drivers/virtio/virtio_pci_legacy_dev.ko",
    "drivers/virtio/virtio_pci.ko",
    "net/core/failover.ko",
    "drivers/net/net_failover.ko",
    "drivers/net/virtio_net.ko",
];

/// The guest's `/init`: network up, then the exchanges, each reported on
/// the console with a `VM:` line.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net; do
  insmod /lib/$m.ko || echo "VM: insmod $m failed"
done
ip link set lo up
ip link set eth0 up
ip addr add 10.77.0.4/24 dev eth0
# (With the switch as the vhost-user client, the link comes up once it
# has connected.)
for i in $(seq 60); do [ "$(cat /sys/class/net/eth0/carrier)" = 1 ] && break; sleep 1; done
echo "VM: FEATURES $(cat /sys/class/net/eth0/device/features)"
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

/// The initramfs: busybox, the modules, `/init`, `/dev/console`.
fn initramfs(busybox: &Path, modules: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ino = 1;
    for d in ["bin", "dev", "lib", "proc", "sys", "tmp"] {
        cpio_entry(&mut out, ino, d, 0o040_755, (0, 0), &[]);
        ino += 1;
    }
    cpio_entry(&mut out, ino, "dev/console", 0o020_600, (5, 1), &[]);
    ino += 1;
    cpio_entry(&mut out, ino, "init", 0o100_755, (0, 0), INIT.as_bytes());
    ino += 1;
    let bb = std::fs::read(busybox).expect("read busybox");
    cpio_entry(&mut out, ino, "bin/busybox", 0o100_755, (0, 0), &bb);
    ino += 1;
    for m in MODULES {
        let data = std::fs::read(modules.join(m)).unwrap_or_else(|e| panic!("{m}: {e}"));
        let name = format!(
            "lib/{}",
            Path::new(m).file_name().unwrap().to_string_lossy()
        );
        cpio_entry(&mut out, ino, &name, 0o100_644, (0, 0), &data);
        ino += 1;
    }
    cpio_entry(&mut out, 0, "TRAILER!!!", 0, (0, 0), &[]);
    out
}

/// Whether an x86-64 ELF executable has no program interpreter (is
/// statically linked).
fn is_static(elf: &[u8]) -> bool {
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    let (Some(phoff), Some(size), Some(n)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) else {
        return false;
    };
    elf.starts_with(b"\x7fELF")
        && (0..usize::from(n)).all(|i| {
            let at = phoff as usize + i * usize::from(size);
            // PT_INTERP = 3.
            elf.get(at..at + 4) != Some(&3u32.to_le_bytes()[..])
        })
}

fn md5(path: &Path) -> String {
    let o = sh(&format!("md5sum {}", s(path)));
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The word after `VM: KEY ` in the console log.
fn reported(log: &str, key: &str) -> Option<String> {
    let at = log.find(&format!("VM: {key} "))?;
    log[at..].split_whitespace().nth(2).map(str::to_string)
}

#[test]
fn a_linux_guest_pings_and_moves_tcp_both_ways_with_offloads() {
    guest_exchanges(
        "a_linux_guest_pings_and_moves_tcp_both_ways_with_offloads",
        false,
    );
}

/// The same with the switch as the vhost-user client (OVS's
/// `dpdkvhostuserclient`): QEMU listens, the switch connects to it.
#[test]
fn a_linux_guest_on_a_client_port() {
    guest_exchanges("a_linux_guest_on_a_client_port", true);
}

fn guest_exchanges(test: &str, client: bool) {
    if !can_run(
        test,
        &[
            "ip",
            "python3",
            "curl",
            "md5sum",
            "qemu-system-x86_64",
            "busybox",
        ],
    ) {
        return;
    }
    let Some((vmlinuz, modules)) = kernel() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no guest kernel: .ci/run unpacks Debian's linux-image into /var/cache/flowpath-vm"
        );
        eprintln!("skipped: no guest kernel (FLOWPATH_VM_KERNEL or /var/cache/flowpath-vm)");
        return;
    };
    let busybox = PathBuf::from(
        String::from_utf8_lossy(&sh("command -v busybox").stdout)
            .trim()
            .to_string(),
    );
    // (Debian's plain `busybox` is linked against the C library, which
    // the initramfs does not have: `busybox-static`.)
    if !is_static(&std::fs::read(&busybox).unwrap_or_default()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is not static (busybox-static)",
            s(&busybox)
        );
        eprintln!("skipped: {} is not static (busybox-static)", s(&busybox));
        return;
    }
    // One guest at a time (two TCG guests on two cores would mostly wait).
    let _one = one_bridge_at_a_time();
    let mut t = Topo::new(if client { "vc" } else { "vm" });
    let initrd = t.path("initrd.cpio");
    std::fs::write(&initrd, initramfs(&busybox, &modules)).unwrap();
    // Namespace 1 serves 16 MB.
    let www = t.path("www");
    std::fs::create_dir_all(&www).unwrap();
    ok(&format!(
        "head -c 16000000 /dev/urandom > {}",
        s(&www.join("blob"))
    ));
    let blob_md5 = md5(&www.join("blob"));
    let mut server = t.ns_command(1, "python3 -m http.server 8000 --bind 10.77.0.1");
    server.current_dir(&www);
    t.start(server, "http.log");
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
    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args(["-accel", "tcg", "-cpu", "max", "-m", "256", "-smp", "1"])
        .args(["-nographic", "-no-reboot", "-kernel"])
        .arg(&vmlinuz)
        .arg("-initrd")
        .arg(&initrd)
        .args(["-append", "console=ttyS0 quiet panic=-1"])
        .args([
            "-object",
            "memory-backend-memfd,id=mem,size=256M,share=on",
            "-numa",
            "node,memdev=mem",
            "-chardev",
        ])
        .arg(format!(
            "socket,id=c,path={}{}",
            s(&sock),
            if client { ",server=on,wait=off" } else { "" }
        ))
        .args([
            "-netdev",
            "vhost-user,id=n,chardev=c",
            "-device",
            "virtio-net-pci,netdev=n,mac=52:54:00:77:00:04,vectors=0",
        ]);
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
    // GUEST_CSUM, 7 GUEST_TSO4, 9 GUEST_ECN, 11 HOST_TSO4, 13 HOST_ECN),
    // and super-frames crossed the port both ways.
    let features = reported(&log, "FEATURES").unwrap_or_default();
    for bit in [0, 1, 7, 9, 11, 13] {
        assert_eq!(
            features.as_bytes().get(bit),
            Some(&b'1'),
            "feature bit {bit}: {features}"
        );
    }
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
