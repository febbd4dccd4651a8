//! Software prefetch: the one `unsafe` call of the crate, fenced here.
//!
//! What: [`prefetch`] asks the CPU to start loading the cache line that
//! holds a value, without waiting for it.
//!
//! Why: the caches' lookups are batched. Issuing the loads of all 32
//! packets' buckets first and using them afterwards keeps many cache
//! misses in flight at once (memory-level parallelism), where a plain
//! first pass only overlaps as many as the out-of-order window holds. This
//! matters when the tables (SMC 8 MB, DFC 4 MB, CD 4 MB, EMC keys 1 MB)
//! outgrow the CPU caches, i.e. with 100K+ parallel flows.
//!
//! Safety: the argument is a reference, so the address is valid; and a
//! prefetch is a hint that never faults and changes no memory, so even an
//! invalid address could not cause undefined behaviour. On targets without
//! the instruction it compiles to nothing.
//!
//! Threads: no state.

#![allow(unsafe_code)]

/// Starts loading the cache line holding `value` into all cache levels.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = (value as *const T).cast::<i8>();
        // SAFETY: PREFETCHT0 is part of SSE, which every x86_64 CPU has; it
        // is a hint that neither faults nor writes memory, and `p` comes
        // from a live reference.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = value;
    }
}

/// Starts loading, for every packet of `todo`, the element of `table` its
/// hash's low bits (`& mask`) index: a cache's first pass over a batch.
#[inline(always)]
pub fn prefetch_indexed<T>(table: &[T], hashes: &[u32], mask: u32, todo: u32) {
    let mut m = todo;
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        if let Some(b) = table.get((hashes[i] & mask) as usize) {
            prefetch(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prefetch;

    #[test]
    fn prefetch_leaves_values_unchanged() {
        let v: Vec<u64> = (0..1024).collect();
        for x in &v {
            prefetch(x);
        }
        assert_eq!(v.iter().sum::<u64>(), 1023 * 1024 / 2);
    }
}
