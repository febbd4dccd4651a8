//! Which XDP program an interface has attached through a BPF link, so
//! that an `afxdp` port tells the switch's own program (named
//! [`PROG_NAME`]: one that a switch which just died still holds while the
//! kernel releases it, waited for) from somebody else's (refused, never
//! replaced).
//!
//! How: the kernel's link ids are walked (`BPF_LINK_GET_NEXT_ID`), each
//! XDP link's interface read (`BPF_OBJ_GET_INFO_BY_FD`), and the program
//! of the one on the interface named from its own info. A program
//! attached without a link (the older netlink way, as `ip link set dev X
//! xdp obj F` does) is not found, and counts as somebody else's.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The name the switch's XDP program is loaded with.
pub const PROG_NAME: &str = "flowpath";

const BPF_PROG_GET_FD_BY_ID: i64 = 13;
const BPF_OBJ_GET_INFO_BY_FD: i64 = 15;
const BPF_LINK_GET_FD_BY_ID: i64 = 30;
const BPF_LINK_GET_NEXT_ID: i64 = 31;
const BPF_LINK_TYPE_XDP: u32 = 6;

/// An XDP program attached to an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    /// The program's id (as `bpftool prog` and `ip link` show it).
    pub prog_id: u32,
    /// The program's name (empty if it has none).
    pub name: String,
}

impl Attached {
    /// Whether it is the switch's own program.
    pub fn is_ours(&self) -> bool {
        self.name == PROG_NAME
    }
}

impl std::fmt::Display for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name.is_empty() {
            write!(f, "program id {}", self.prog_id)
        } else {
            write!(f, "program '{}' (id {})", self.name, self.prog_id)
        }
    }
}

fn bpf(cmd: i64, attr: &mut [u8; 128]) -> i64 {
    // SAFETY: `attr` is a live, zero-padded bpf_attr of the size passed;
    // the buffers it points to (if any) are kept alive by the caller.
    unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) }
}

fn fd_of(r: i64) -> Option<OwnedFd> {
    // SAFETY: `r` is a descriptor the kernel just returned, owned by nobody.
    (r >= 0).then(|| unsafe { OwnedFd::from_raw_fd(r as i32) })
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[off..off + 4]);
    u32::from_ne_bytes(w)
}

/// The object's info (`bpf_link_info` or `bpf_prog_info`), its first
/// `N` bytes.
fn info<const N: usize>(fd: &OwnedFd) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    let mut a = [0u8; 128];
    a[0..4].copy_from_slice(&(fd.as_raw_fd() as u32).to_ne_bytes());
    a[4..8].copy_from_slice(&(N as u32).to_ne_bytes());
    a[8..16].copy_from_slice(&(out.as_mut_ptr() as u64).to_ne_bytes());
    (bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a) >= 0).then_some(out)
}

fn by_id(cmd: i64, id: u32) -> Option<OwnedFd> {
    let mut a = [0u8; 128];
    a[0..4].copy_from_slice(&id.to_ne_bytes());
    fd_of(bpf(cmd, &mut a))
}

/// The program attached to `ifindex` through an XDP link, if any (and
/// if this process may look: it needs CAP_SYS_ADMIN or CAP_BPF).
pub fn by_link(ifindex: u32) -> Option<Attached> {
    let mut id = 0u32;
    loop {
        let mut a = [0u8; 128];
        a[0..4].copy_from_slice(&id.to_ne_bytes());
        if bpf(BPF_LINK_GET_NEXT_ID, &mut a) < 0 {
            return None;
        }
        id = u32_at(&a, 4);
        let Some(link) = by_id(BPF_LINK_GET_FD_BY_ID, id) else {
            continue; // gone meanwhile
        };
        // bpf_link_info: type, id, prog_id, then (8-aligned) the xdp
        // union member's ifindex.
        let Some(li) = info::<24>(&link) else {
            continue;
        };
        if u32_at(&li, 0) != BPF_LINK_TYPE_XDP || u32_at(&li, 16) != ifindex {
            continue;
        }
        let prog_id = u32_at(&li, 8);
        // bpf_prog_info: the name is bytes 64..80.
        let name = by_id(BPF_PROG_GET_FD_BY_ID, prog_id)
            .and_then(|p| info::<80>(&p))
            .map(|pi| {
                let n = &pi[64..80];
                let end = n.iter().position(|&b| b == 0).unwrap_or(n.len());
                String::from_utf8_lossy(&n[..end]).into_owned()
            })
            .unwrap_or_default();
        return Some(Attached { prog_id, name });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{afxdp, PortSpec};
    use std::process::Command;

    fn sh(cmd: &str) -> bool {
        Command::new("sh")
            .args(["-c", cmd])
            .status()
            .is_ok_and(|s| s.success())
    }

    /// A veth pair, deleted on drop.
    struct Veth(String);

    impl Drop for Veth {
        fn drop(&mut self) {
            sh(&format!("ip link del {}", self.0));
        }
    }

    /// Loads `r0 = XDP_PASS; exit` named `name`.
    fn load(name: &str) -> OwnedFd {
        let mut code = Vec::new();
        for (op, imm) in [(0xb7u8, 2i32), (0x95, 0)] {
            let mut i = [0u8; 8];
            i[0] = op;
            i[4..8].copy_from_slice(&imm.to_ne_bytes());
            code.extend_from_slice(&i);
        }
        let license = c"GPL";
        let mut a = [0u8; 128];
        a[0..4].copy_from_slice(&6u32.to_ne_bytes()); // BPF_PROG_TYPE_XDP
        a[4..8].copy_from_slice(&2u32.to_ne_bytes());
        a[8..16].copy_from_slice(&(code.as_ptr() as u64).to_ne_bytes());
        a[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
        a[48..48 + name.len()].copy_from_slice(name.as_bytes());
        fd_of(bpf(5, &mut a)).expect("load a program")
    }

    /// Attaches `prog` to `ifindex` in generic mode through a link.
    fn attach(prog: &OwnedFd, ifindex: u32) -> OwnedFd {
        let mut a = [0u8; 128];
        a[0..4].copy_from_slice(&(prog.as_raw_fd() as u32).to_ne_bytes());
        a[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        a[8..12].copy_from_slice(&37u32.to_ne_bytes()); // BPF_XDP
        a[12..16].copy_from_slice(&2u32.to_ne_bytes()); // XDP_FLAGS_SKB_MODE
        fd_of(bpf(28, &mut a)).expect("attach")
    }

    #[test]
    fn a_foreign_program_is_refused_and_the_switchs_own_waited_for() {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        if !root {
            assert!(std::env::var_os("CI").is_none(), "needs root");
            eprintln!("SKIPPED: needs root");
            return;
        }
        let name = format!("fxat{}", std::process::id() % 100_000);
        assert!(sh(&format!(
            "ip link add {name} type veth peer name {name}p && ip link set {name} up && ip link set {name}p up"
        )));
        let _veth = Veth(name.clone());
        let ifindex: u32 = std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let spec = PortSpec::parse(&format!("afxdp:{name},mode=generic")).unwrap();
        assert_eq!(by_link(ifindex), None);

        // Somebody else's program: refused at once, named.
        let prog = load("other");
        let link = attach(&prog, ifindex);
        let found = by_link(ifindex).expect("the attached program");
        assert_eq!(found.name, "other");
        assert!(!found.is_ours());
        let t0 = std::time::Instant::now();
        let e = afxdp::open(&spec, 0).unwrap_err().to_string();
        assert!(
            e.contains("program 'other'") && e.contains("not this switch's"),
            "{e}"
        );
        assert!(
            t0.elapsed() < afxdp::RELEASE_WAIT,
            "a foreign program was waited for"
        );
        drop(link);

        // The switch's own program, released shortly (as a dead
        // switch's is): waited for, then the port opens.
        let prog = load(PROG_NAME);
        let link = attach(&prog, ifindex);
        assert!(by_link(ifindex).is_some_and(|p| p.is_ours()));
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            drop(link);
        });
        let port = afxdp::open(&spec, 0).expect("the port opens once the old program is gone");
        t.join().unwrap();
        assert!(by_link(ifindex).is_some_and(|p| p.is_ours()));
        drop(port);
        assert_eq!(by_link(ifindex), None);
    }
}
