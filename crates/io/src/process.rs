//! Child processes for `flowpath switch --monitor`: signalling a child,
//! and a child that gets SIGTERM when its parent dies. Each `unsafe`
//! block is one libc call.
#![allow(unsafe_code)]

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// Sends `sig` to `child` (not yet waited for, so its pid is still its
/// own).
pub fn signal(child: &Child, sig: i32) -> std::io::Result<()> {
    // SAFETY: kill(2) with plain integers; the pid is our own unreaped
    // child's.
    if unsafe { libc::kill(child.id() as libc::pid_t, sig) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the process `cmd` starts receive SIGTERM when the thread that
/// started it (the monitor's) ends.
pub fn term_with_parent(cmd: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and
    // only calls prctl(2), which is async-signal-safe and touches no
    // memory.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// SIGTERM.
pub const SIGTERM: i32 = libc::SIGTERM;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_signalled() {
        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        signal(&c, SIGTERM).unwrap();
        let s = c.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&s),
            Some(SIGTERM)
        );
    }
}
