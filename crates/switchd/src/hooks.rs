//! The test hooks' control command, `debug/panic THREAD` (present only
//! when [`fault::hooks_enabled`]): makes a thread panic, to show what a
//! panic there costs (see [`fault`]).

use crate::fault::{self, Part};
use crate::shared::Shared;

/// Runs a test hook's command; `None` if `method` is not one.
pub fn call(sh: &Shared, method: &str, params: &[String]) -> Option<Result<String, String>> {
    if method != "debug/panic" || !fault::hooks_enabled() {
        return None;
    }
    let what = params.first().map(String::as_str).unwrap_or("");
    let part = match fault::part_named(what) {
        Some(Part::Control) => panic!("debug/panic control: panic requested"),
        Some(p) => p,
        None => {
            return Some(Err(format!(
                "debug/panic {what:?}: expected control, revalidator, sampler, openflow or pmd"
            )))
        }
    };
    fault::arm(part);
    match part {
        Part::Revalidator => {
            let _ = sh.reval_kick();
        }
        Part::Pmd => {
            // PMDs look at the hook when they drain their commands.
            for p in sh.pmds().iter() {
                p.wake();
            }
        }
        _ => {}
    }
    Some(Ok(format!("{} will panic\n", part.name())))
}
