//! The cycle counter behind "processing cycles" in the statistics.
//!
//! What: [`rdtsc`] reads the CPU's time-stamp counter on x86_64 (the
//! counter OVS's `pmd-stats-show` reports processing cycles in); on other
//! architectures it returns nanoseconds of a monotonic clock since the
//! first call, so "cycles" are then nanoseconds ([`UNIT`] says which).
//!
//! Why here: reading the TSC is an `unsafe` intrinsic, and the io crate is
//! the one crate of the workspace allowed to hold `unsafe` code; the
//! datapath reads no clock — callers measure around a batch and pass the
//! count in.
//!
//! Invariants: successive reads on one core never go backwards (invariant
//! TSC on current x86_64 CPUs, `Instant` elsewhere); callers use
//! `wrapping_sub`/`saturating_sub` of two reads anyway.
//!
//! Threads: callable from any thread; compare reads taken on one thread
//! (pinned, for the TSC on older CPUs).

/// What a count of [`rdtsc`] measures: `"cycles"` (x86_64 TSC) or
/// `"ns"` (monotonic clock fallback).
#[cfg(target_arch = "x86_64")]
pub const UNIT: &str = "cycles";
/// What a count of [`rdtsc`] measures: `"cycles"` (x86_64 TSC) or
/// `"ns"` (monotonic clock fallback).
#[cfg(not(target_arch = "x86_64"))]
pub const UNIT: &str = "ns";

/// The time-stamp counter (x86_64), not serialized: cheap enough to read
/// once per batch.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86_64 CPU, reads a counter into
    // registers and touches no memory; the intrinsic has no precondition.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Nanoseconds of a monotonic clock since the first call (architectures
/// without a TSC intrinsic here).
#[cfg(not(target_arch = "x86_64"))]
pub fn rdtsc() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_forward() {
        let a = rdtsc();
        let mut x = 0u64;
        for i in 0..10_000u64 {
            x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        let b = rdtsc();
        assert!(b > a, "{a} then {b}");
        assert!(!UNIT.is_empty());
    }
}
