//! Fault isolation: a panic in a control thread costs that thread's
//! current piece of work, never the forwarding.
//!
//! What: the release build unwinds on panic (the workspace's profile), so
//! each control-side thread runs its work through [`guard`]: the
//! revalidator one round at a time (a panicking round is dropped, the
//! next runs on time), the sampler one batch at a time, each OpenFlow
//! thread as a whole (a panicking connection is closed, the others go
//! on), and the control server answers a panicking command with an error
//! (the `unixctl` crate). Each caught panic is logged once with its
//! message (the panic hook prints the message and place, [`guard`] says
//! what goes on) and counted; `coverage/show` lists the counts.
//!
//! A PMD thread's panic is a bug on the packet path whose state (rx
//! rings, half-sent bursts) cannot be trusted: the process stops cleanly
//! (ports closed, XDP programs detached, sockets removed) and exits with
//! status 1, so that a supervisor (`flowpath switch --monitor`, or
//! systemd's `Restart=on-failure`) starts it again.
//!
//! Test hooks: with `FLOWPATH_TEST_HOOKS=1` in the environment when the
//! switch starts, the control socket has `debug/panic THREAD`, which
//! makes that thread panic (the command itself for `control`, the next
//! round or batch for the revalidator and the sampler, the next message
//! an OpenFlow connection receives, the next command a PMD drains).
//! Without it the command does not exist.

use flowpath_unixctl::CommandSpec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The environment variable that enables `debug/panic`.
pub const TEST_HOOKS_ENV: &str = "FLOWPATH_TEST_HOOKS";

/// The threads whose panics are caught and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// A control command's handler (caught by the control server).
    Control,
    /// A revalidator round.
    Revalidator,
    /// A batch of the sampler thread.
    Sampler,
    /// An OpenFlow channel thread (a connection's, a listener's).
    OpenFlow,
    /// A PMD thread (fatal: the switch stops and exits with status 1).
    Pmd,
}

const PARTS: [Part; 5] = [
    Part::Control,
    Part::Revalidator,
    Part::Sampler,
    Part::OpenFlow,
    Part::Pmd,
];

impl Part {
    /// The name `debug/panic` and `coverage/show` use.
    pub fn name(self) -> &'static str {
        match self {
            Part::Control => "control",
            Part::Revalidator => "revalidator",
            Part::Sampler => "sampler",
            Part::OpenFlow => "openflow",
            Part::Pmd => "pmd",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Panics caught, per part, since the process started.
static CAUGHT: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
/// Panics requested by `debug/panic`, per part, not yet raised.
static ARMED: [AtomicBool; 5] = [const { AtomicBool::new(false) }; 5];
/// A PMD panicked: the process must exit with an error.
static FATAL: AtomicBool = AtomicBool::new(false);

/// Panics caught in `part` so far.
pub fn caught(part: Part) -> u64 {
    CAUGHT[part.index()].load(Ordering::Relaxed)
}

/// Whether a PMD thread panicked (the switch is stopping and must exit
/// with an error).
pub fn fatal() -> bool {
    FATAL.load(Ordering::Relaxed)
}

/// The text of a panic's payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Runs `f`; a panic in it is caught, counted for `part`, logged with
/// `what_next` (what the thread does now), and gives `None`.
pub fn guard<R>(part: Part, what_next: &str, f: impl FnOnce() -> R) -> Option<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(p) => {
            let n = CAUGHT[part.index()].fetch_add(1, Ordering::Relaxed) + 1;
            eprintln!(
                "flowpath: {} thread panicked: {}; {what_next} ({n} caught so far)",
                part.name(),
                panic_message(&*p)
            );
            if part == Part::Pmd {
                FATAL.store(true, Ordering::Relaxed);
            }
            None
        }
    }
}

/// Panics here if `debug/panic` asked `part` to (the threads call this
/// once per round or batch; one relaxed load otherwise).
pub fn hook(part: Part) {
    if ARMED[part.index()].load(Ordering::Relaxed)
        && ARMED[part.index()].swap(false, Ordering::Relaxed)
    {
        panic!("debug/panic {}: panic requested", part.name());
    }
}

/// Whether the test hooks are enabled (read once, at the first call).
pub fn hooks_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var(TEST_HOOKS_ENV).is_ok_and(|v| v == "1"))
}

/// The test hooks' commands (none unless [`hooks_enabled`]).
pub fn commands() -> Vec<CommandSpec> {
    if !hooks_enabled() {
        return Vec::new();
    }
    vec![CommandSpec {
        name: "debug/panic".into(),
        usage: "control|revalidator|sampler|openflow|pmd".into(),
        min_args: 1,
        max_args: 1,
    }]
}

/// Makes `part` panic at its next [`hook`] (`debug/panic`).
pub fn arm(part: Part) {
    ARMED[part.index()].store(true, Ordering::Relaxed);
}

/// The part `debug/panic` names.
pub fn part_named(name: &str) -> Option<Part> {
    PARTS.into_iter().find(|p| p.name() == name)
}

/// `coverage/show`'s rows for the caught panics.
pub fn coverage() -> String {
    let mut out = String::new();
    for p in PARTS {
        out.push_str(&format!(
            "{:<36} total: {}\n",
            format!("panic_caught_{}", p.name()),
            caught(p)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_catches_counts_and_goes_on() {
        let before = caught(Part::Sampler);
        assert_eq!(guard(Part::Sampler, "goes on", || 7), Some(7));
        assert_eq!(caught(Part::Sampler), before);
        let r: Option<()> = guard(Part::Sampler, "goes on", || panic!("boom {}", 1));
        assert_eq!(r, None);
        assert_eq!(caught(Part::Sampler), before + 1);
        assert!(!fatal(), "only a PMD's panic is fatal");
        assert!(coverage().contains("panic_caught_sampler"));
    }

    #[test]
    fn hooks_fire_once_and_messages_are_read() {
        arm(Part::OpenFlow);
        let p = std::panic::catch_unwind(|| hook(Part::OpenFlow)).unwrap_err();
        assert_eq!(panic_message(&*p), "debug/panic openflow: panic requested");
        hook(Part::OpenFlow); // disarmed by the first
        assert_eq!(part_named("revalidator"), Some(Part::Revalidator));
        assert_eq!(part_named("nothing"), None);
        let p = std::panic::catch_unwind(|| panic!("static")).unwrap_err();
        assert_eq!(panic_message(&*p), "static");
    }
}
