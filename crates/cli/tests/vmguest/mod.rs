//! A Linux guest for the tests that put a virtual machine on a vhost-user
//! port: Debian's kernel (unpacked where `.ci/run` puts it:
//! `FLOWPATH_VM_KERNEL`, default `/var/cache/flowpath-vm`), a busybox
//! initramfs written here with the virtio-net modules and the test's own
//! `/init`, and QEMU's command line for it. QEMU runs without KVM (TCG:
//! nested virtualisation is not reliable on the test machines) and with
//! MSI-X off on the device (QEMU 7.2 crashes starting vhost with MSI-X
//! under TCG).
#![allow(dead_code)]

use crate::ofnet::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The unpacked kernel package: its `vmlinuz` and modules directory.
pub fn kernel() -> Option<(PathBuf, PathBuf)> {
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
pub fn cpio_entry(
    out: &mut Vec<u8>,
    ino: u32,
    name: &str,
    mode: u32,
    rdev: (u32, u32),
    data: &[u8],
) {
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
pub const MODULES: [&str; 8] = [
    "drivers/virtio/virtio.ko",
    "drivers/virtio/virtio_ring.ko",
    "drivers/virtio/virtio_pci_modern_dev.ko",
    "drivers/virtio/virtio_pci_legacy_dev.ko",
    "drivers/virtio/virtio_pci.ko",
    "net/core/failover.ko",
    "drivers/net/net_failover.ko",
    "drivers/net/virtio_net.ko",
];

/// The start of the guest's `/init`: the virtio-net driver loaded,
/// `eth0` up at `IP/24` (`@IP@`), waiting (up to 60 s) for its carrier;
/// each test appends what the guest does then, reporting on the console
/// with `VM:` lines.
pub const INIT_NET: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net; do
  insmod /lib/$m.ko || echo "VM: insmod $m failed"
done
ip link set lo up
ip link set eth0 up
ip addr add @IP@/24 dev eth0
# (With the switch as the vhost-user client, the link comes up once it
# has connected.)
for i in $(seq 60); do [ "$(cat /sys/class/net/eth0/carrier)" = 1 ] && break; sleep 1; done
"#;

/// The initramfs: busybox, the modules, `/init` (`init`), `/dev/console`.
pub fn initramfs(busybox: &Path, modules: &Path, init: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ino = 1;
    for d in ["bin", "dev", "lib", "proc", "sys", "tmp"] {
        cpio_entry(&mut out, ino, d, 0o040_755, (0, 0), &[]);
        ino += 1;
    }
    cpio_entry(&mut out, ino, "dev/console", 0o020_600, (5, 1), &[]);
    ino += 1;
    cpio_entry(&mut out, ino, "init", 0o100_755, (0, 0), init.as_bytes());
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
pub fn is_static(elf: &[u8]) -> bool {
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

pub fn md5(path: &Path) -> String {
    let o = sh(&format!("md5sum {}", s(path)));
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The word after `VM: KEY ` in the console log.
pub fn reported(log: &str, key: &str) -> Option<String> {
    let at = log.find(&format!("VM: {key} "))?;
    log[at..].split_whitespace().nth(2).map(str::to_string)
}

/// Writes the initramfs with `/init` `init` into the run directory; its
/// path.
pub fn write_initrd(t: &Topo, busybox: &Path, modules: &Path, init: &str) -> PathBuf {
    let initrd = t.path("initrd.cpio");
    std::fs::write(&initrd, initramfs(busybox, modules, init)).unwrap();
    initrd
}

/// Namespace 1 serves 16 MB of random bytes at
/// `http://10.77.0.1:8000/blob`; their MD5.
pub fn serve_blob(t: &mut Topo) -> String {
    let www = t.path("www");
    std::fs::create_dir_all(&www).unwrap();
    ok(&format!(
        "head -c 16000000 /dev/urandom > {}",
        s(&www.join("blob"))
    ));
    let sum = md5(&www.join("blob"));
    let mut server = t.ns_command(1, "python3 -m http.server 8000 --bind 10.77.0.1");
    server.current_dir(&www);
    t.start(server, "http.log");
    sum
}

/// What a guest test needs: the kernel, its modules and a static
/// busybox. `None` (the test skips) when something is missing outside
/// CI; in CI a missing piece fails the test.
pub fn prerequisites(test: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    if !can_run(
        test,
        &[
            "ip",
            "python3",
            "curl",
            "md5sum",
            "qemu-system-x86_64",
            "busybox",
            "tcpdump",
        ],
    ) {
        return None;
    }
    let Some((vmlinuz, modules)) = kernel() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no guest kernel: .ci/run unpacks Debian's linux-image into /var/cache/flowpath-vm"
        );
        eprintln!("skipped: no guest kernel (FLOWPATH_VM_KERNEL or /var/cache/flowpath-vm)");
        return None;
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
        return None;
    }
    Some((vmlinuz, modules, busybox))
}

/// QEMU for a guest of 256 MB (shared memory, as vhost-user needs) on
/// chardev `chardev` (QEMU's `-chardev` value, id `c`), its virtio-net
/// device with MAC `mac` and the device options `extra` (`,packed=on`).
pub fn qemu(vmlinuz: &Path, initrd: &Path, chardev: &str, mac: &str, extra: &str) -> Command {
    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args(["-accel", "tcg", "-cpu", "max", "-m", "256", "-smp", "1"])
        .args(["-nographic", "-no-reboot", "-kernel"])
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", "console=ttyS0 quiet panic=-1"])
        .args([
            "-object",
            "memory-backend-memfd,id=mem,size=256M,share=on",
            "-numa",
            "node,memdev=mem",
            "-chardev",
            chardev,
            "-netdev",
            "vhost-user,id=n,chardev=c",
            "-device",
        ])
        .arg(format!(
            "virtio-net-pci,netdev=n,mac={mac},vectors=0{extra}"
        ));
    qemu
}
