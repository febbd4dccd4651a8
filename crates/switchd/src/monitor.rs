//! `flowpath switch --monitor`: a parent process that runs the switch as
//! its child and starts it again when it dies abnormally, as Open
//! vSwitch's `--monitor`.
//!
//! What: the monitor starts the child (this program, with the same
//! arguments less `--monitor`), waits for it, and:
//!
//! - the child exits with status 0 (`ctl exit`, or a signal it handled):
//!   the monitor exits 0;
//! - the child is killed by a signal, or exits with [`EXIT_CRASHED`]
//!   (a PMD panicked) or 101 (a panic elsewhere that ended the process):
//!   it is started again after a back-off — [`BACKOFF_MIN`], doubled
//!   after each child that lived less than [`STABLE`], up to
//!   [`BACKOFF_MAX`];
//! - the child exits with another status (it could not start: bad
//!   arguments, a port that does not exist): the first child's failure
//!   ends the monitor with that status; a later one (the same
//!   arguments worked before) is retried with the back-off.
//!
//! SIGTERM or SIGINT to the monitor stops the child with SIGTERM (SIGKILL
//! after [`STOP_WAIT`]) and ends the monitor; the child also gets
//! SIGTERM if the monitor itself dies.

use flowpath_io::process;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The switch's exit status after a PMD thread panicked.
pub const EXIT_CRASHED: i32 = 70;
/// Rust's exit status when a panic ends the process.
const EXIT_PANIC: i32 = 101;
/// The first back-off.
pub const BACKOFF_MIN: Duration = Duration::from_millis(500);
/// The longest back-off.
pub const BACKOFF_MAX: Duration = Duration::from_secs(16);
/// A child that lived this long resets the back-off.
pub const STABLE: Duration = Duration::from_secs(10);
/// How long a child stopped with SIGTERM has before SIGKILL.
pub const STOP_WAIT: Duration = Duration::from_secs(10);

/// What to do after a child ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// End the monitor with this status.
    Exit(i32),
    /// Start the child again.
    Restart,
}

/// Decides what follows the end of a child with `status`; `first`: the
/// first child.
pub fn next(status: ExitStatus, first: bool) -> Next {
    match (status.code(), status.signal()) {
        (Some(0), _) => Next::Exit(0),
        (Some(EXIT_CRASHED | EXIT_PANIC), _) | (None, Some(_)) => Next::Restart,
        (Some(c), _) if first => Next::Exit(c),
        (Some(_), _) => Next::Restart,
        (None, None) => Next::Restart,
    }
}

/// The back-off after a child that lived `lived`, the previous back-off
/// being `prev`.
pub fn backoff(prev: Duration, lived: Duration) -> Duration {
    if lived >= STABLE {
        BACKOFF_MIN
    } else {
        (prev * 2).clamp(BACKOFF_MIN, BACKOFF_MAX)
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "an unknown cause".into(),
    }
}

fn spawn(exe: &Path, args: &[OsString]) -> std::io::Result<Child> {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    process::term_with_parent(&mut cmd);
    cmd.spawn()
}

/// Stops `child`: SIGTERM, then SIGKILL after [`STOP_WAIT`].
fn stop_child(child: &mut Child) -> Option<ExitStatus> {
    let _ = process::signal(child, process::SIGTERM);
    let t0 = Instant::now();
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if t0.elapsed() > STOP_WAIT {
            let _ = child.kill();
            return child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the monitor: `exe args` as the child, until the monitor is
/// stopped or the child ends normally. Returns the monitor's exit status.
pub fn run(exe: &Path, args: &[OsString]) -> Result<i32, String> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("cannot install a signal handler: {e}"))?;
    }
    let mut first = true;
    let mut delay = Duration::ZERO;
    loop {
        let started = Instant::now();
        let mut child = spawn(exe, args)
            .map_err(|e| format!("monitor: cannot start {}: {e}", exe.display()))?;
        let status = loop {
            if stop.load(Ordering::Relaxed) {
                stop_child(&mut child);
                return Ok(0);
            }
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("monitor: cannot wait for the switch: {e}")),
            }
        };
        match next(status, first) {
            Next::Exit(c) => return Ok(c),
            Next::Restart => {}
        }
        first = false;
        delay = backoff(delay, started.elapsed());
        eprintln!(
            "flowpath: monitor: switch (pid {}) died ({}); restarting in {} ms",
            child.id(),
            describe(status),
            delay.as_millis()
        );
        let until = Instant::now() + delay;
        while Instant::now() < until {
            if stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_follows_a_child() {
        let exit = |c: i32| ExitStatus::from_raw(c << 8);
        let killed = |s: i32| ExitStatus::from_raw(s);
        assert_eq!(next(exit(0), true), Next::Exit(0));
        assert_eq!(next(exit(0), false), Next::Exit(0));
        assert_eq!(next(killed(9), true), Next::Restart);
        assert_eq!(next(killed(6), false), Next::Restart);
        assert_eq!(next(exit(EXIT_CRASHED), true), Next::Restart);
        assert_eq!(next(exit(101), true), Next::Restart);
        assert_eq!(next(exit(1), true), Next::Exit(1));
        assert_eq!(next(exit(1), false), Next::Restart);
    }

    #[test]
    fn backoff_doubles_and_resets() {
        let short = Duration::from_secs(1);
        let mut d = Duration::ZERO;
        d = backoff(d, short);
        assert_eq!(d, BACKOFF_MIN);
        d = backoff(d, short);
        assert_eq!(d, BACKOFF_MIN * 2);
        for _ in 0..10 {
            d = backoff(d, short);
        }
        assert_eq!(d, BACKOFF_MAX);
        assert_eq!(backoff(d, STABLE), BACKOFF_MIN);
    }
}
