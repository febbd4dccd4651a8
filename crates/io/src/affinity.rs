//! Core pinning and scheduling priority for a datapath (or benchmark)
//! thread, as OVS pins its PMD threads and the reference harness renices
//! them.
//!
//! What: [`pin_current_thread`] binds the calling thread to one CPU
//! (`sched_setaffinity`), [`raise_priority`] asks for nice −20 for the
//! calling thread (and its autogroup, since with `CONFIG_SCHED_AUTOGROUP`
//! nice values only count inside a session), and [`thread_cpu_time_ns`]
//! reads how long the calling thread has been on a CPU (procfs schedstat),
//! so a measurement can say whether it was disturbed.
//!
//! Why here: these are syscalls, and `io` is the crate that holds the
//! workspace's `unsafe` syscalls. Each `unsafe` block is one libc call on
//! plain values.
//!
//! Threads: every function acts on the calling thread only.

use std::io;

/// Number of CPUs this process may run on (at least 1).
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Number of CPUs online (at least 1), whatever the calling thread's
/// mask allows it.
#[allow(unsafe_code)]
pub fn online_cpus() -> usize {
    // SAFETY: sysconf takes a constant and reads no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|n| *n > 0).unwrap_or(1)
}

/// Binds the calling thread to `cpu` only.
///
/// Fails with the OS error (e.g. `EINVAL` for a CPU that does not exist or
/// is not allowed to this process).
#[allow(unsafe_code)]
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    if cpu >= max {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `cpu_set_t` is a plain bit array for which all-zero is a
    // valid (empty) value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu < 8 * size_of::<cpu_set_t>()` (checked above), so
    // CPU_SET writes inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 = the calling thread; `set` is a valid, initialised
    // cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Keeps the calling thread (and the threads it starts from now on, which
/// inherit its mask) off `cpus`, as long as another allowed CPU remains:
/// a switch's control threads stay off its PMD cores. Returns whether
/// the mask changed.
#[allow(unsafe_code)]
pub fn avoid_cpus(cpus: &[usize]) -> io::Result<bool> {
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: all-zero is a valid (empty) cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 = the calling thread; `set` is a valid cpu_set_t of
    // the size passed, which the call fills.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut changed = false;
    for &c in cpus.iter().filter(|&&c| c < max) {
        // SAFETY: `c < 8 * size_of::<cpu_set_t>()`.
        if unsafe { libc::CPU_ISSET(c, &set) } {
            // SAFETY: as above.
            unsafe { libc::CPU_CLR(c, &mut set) };
            changed = true;
        }
    }
    // SAFETY: `set` is a valid cpu_set_t.
    if !changed || unsafe { libc::CPU_COUNT(&set) } == 0 {
        return Ok(false);
    }
    // SAFETY: pid 0 = the calling thread; `set` is a valid, initialised
    // cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(true)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Best effort: nice −20 for the calling thread and for its autogroup.
/// Returns true if the thread's nice value was set (needs
/// `CAP_SYS_NICE`, e.g. root); the autogroup write is attempted either way.
#[allow(unsafe_code)]
pub fn raise_priority() -> bool {
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    // SAFETY: plain integer arguments; PRIO_PROCESS with a thread id sets
    // that thread's nice value on Linux.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -20) };
    // Ignored on failure: without autogroups (or rights) there is nothing
    // more to do.
    let _ = std::fs::write("/proc/self/autogroup", "-20");
    rc == 0
}

/// Time the calling thread has spent on a CPU, in nanoseconds (first field
/// of `/proc/thread-self/schedstat`), if the kernel provides it.
pub fn thread_cpu_time_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_to_an_allowed_cpu_and_reject_absurd_ones() {
        // Run on a helper thread so the test harness's threads stay free.
        std::thread::spawn(|| {
            assert!(available_cpus() >= 1);
            pin_current_thread(0).expect("CPU 0 exists");
            assert!(pin_current_thread(1 << 20).is_err());
            let a = thread_cpu_time_ns();
            let mut x = 0u64;
            for i in 0..1_000_000u64 {
                x = x.wrapping_add(i * i);
            }
            std::hint::black_box(x);
            if let (Some(a), Some(b)) = (a, thread_cpu_time_ns()) {
                assert!(b >= a);
            }
        })
        .join()
        .expect("thread");
    }
}
