//! Vector compares of a cache bucket: the crate's CPU-specific code,
//! fenced here with its scalar reference.
//!
//! What: [`match16`] returns the bitmap of a 16-entry bucket's 32-bit
//! entries whose bits under a field mask equal a wanted value (the hybrid
//! table's signature search: which of a bucket's ways hold a packet's
//! signature, or which are empty). [`match8`] does the same for an
//! 8-entry bucket with the whole entry compared (a dpcls subtable's
//! index: which slots hold a hash, or are empty).
//!
//! Why: written as a plain loop the compiler keeps it scalar (16 × shift,
//! mask, compare, set, shift, or): callgrind counted 45 instructions per
//! packet for the hybrid table's signature search at 1,000 flows, more than
//! the DFC's whole lookup (39). With SSE2 it is four loads, four ANDs, four
//! compares, three packs and one mask extraction. The subtable bucket's
//! loop was worse: ~40 shuffles, shifts and ORs per bucket; with SSE2, two
//! loads, two compares, two packs and one mask extraction.
//!
//! Which variant runs: SSE2 is part of the x86_64 baseline (every x86_64
//! CPU has it, and the default `x86_64` targets enable it), so on x86_64
//! the SSE2 variant is chosen at compile time and needs no run-time
//! detection; the binary still runs on every x86_64 machine of the project.
//! Elsewhere the scalar reference runs. [`match16_scalar`] is always built;
//! the tests compare the two on random and edge-case buckets.
//!
//! Safety: the SSE2 intrinsics need the `sse2` target feature, which the
//! `cfg` guarantees at compile time; the four 16-byte loads are unaligned
//! loads that stay inside the 64-byte array they are given.
//!
//! Threads: no state.

#![allow(unsafe_code)]

/// Bitmap of the entries `w` of `ways` with `ways[w] & field == want`
/// (bit `w` for entry `w`). The portable reference.
#[inline(always)]
pub fn match16_scalar(ways: &[u32; 16], field: u32, want: u32) -> u32 {
    let mut m = 0u32;
    for (w, e) in ways.iter().enumerate() {
        m |= u32::from(e & field == want) << w;
    }
    m
}

/// Bitmap of the entries `w` of `ways` with `ways[w] & field == want`
/// (bit `w` for entry `w`): SSE2 on x86_64, [`match16_scalar`] elsewhere.
#[inline(always)]
pub fn match16(ways: &[u32; 16], field: u32, want: u32) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        match16_sse2(ways, field, want)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        match16_scalar(ways, field, want)
    }
}

/// The SSE2 variant of [`match16`].
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
pub fn match16_sse2(ways: &[u32; 16], field: u32, want: u32) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_epi8,
        _mm_packs_epi16, _mm_packs_epi32, _mm_set1_epi32,
    };
    let p = ways.as_ptr().cast::<__m128i>();
    // SAFETY: `sse2` is enabled at compile time (the cfg above); lanes
    // 0..4 of `p` are the 64 bytes of `ways`, read with unaligned loads.
    unsafe {
        let f = _mm_set1_epi32(field as i32);
        let v = _mm_set1_epi32(want as i32);
        let eq = |k: usize| _mm_cmpeq_epi32(_mm_and_si128(_mm_loadu_si128(p.add(k)), f), v);
        // Each 32-bit lane is 0 or -1; saturating packs keep that, so the
        // sixteen lanes become sixteen bytes in entry order.
        let lo = _mm_packs_epi32(eq(0), eq(1));
        let hi = _mm_packs_epi32(eq(2), eq(3));
        _mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u32
    }
}

/// Bitmap of the entries `w` of `ways` equal to `want` (bit `w` for entry
/// `w`). The portable reference.
#[inline(always)]
pub fn match8_scalar(ways: &[u32; 8], want: u32) -> u32 {
    let mut m = 0u32;
    for (w, e) in ways.iter().enumerate() {
        m |= u32::from(*e == want) << w;
    }
    m
}

/// Bitmap of the entries `w` of `ways` equal to `want`: SSE2 on x86_64,
/// [`match8_scalar`] elsewhere.
#[inline(always)]
pub fn match8(ways: &[u32; 8], want: u32) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        match8_sse2(ways, want)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        match8_scalar(ways, want)
    }
}

/// The SSE2 variant of [`match8`].
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
pub fn match8_sse2(ways: &[u32; 8], want: u32) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_epi8, _mm_packs_epi16,
        _mm_packs_epi32, _mm_set1_epi32, _mm_setzero_si128,
    };
    let p = ways.as_ptr().cast::<__m128i>();
    // SAFETY: `sse2` is enabled at compile time (the cfg above); lanes
    // 0..2 of `p` are the 32 bytes of `ways`, read with unaligned loads.
    unsafe {
        let v = _mm_set1_epi32(want as i32);
        let lo = _mm_cmpeq_epi32(_mm_loadu_si128(p), v);
        let hi = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(1)), v);
        // 0 / -1 lanes survive the saturating packs: eight bytes in entry
        // order, then eight zero bytes.
        let bytes = _mm_packs_epi16(_mm_packs_epi32(lo, hi), _mm_setzero_si128());
        _mm_movemask_epi8(bytes) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::Rng;

    /// The test's name says, in the test output, which variant ran.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[test]
    fn match16_sse2_variant_agrees_with_the_scalar_reference() {
        match16_against_scalar();
    }

    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    #[test]
    fn match16_no_sse2_on_this_target_so_only_the_scalar_reference_runs() {
        match16_against_scalar();
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[test]
    fn match8_sse2_variant_agrees_with_the_scalar_reference() {
        match8_against_scalar();
    }

    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    #[test]
    fn match8_no_sse2_on_this_target_so_only_the_scalar_reference_runs() {
        match8_against_scalar();
    }

    fn match8_against_scalar() {
        let mut rng = Rng::new(13);
        for _ in 0..20_000u32 {
            let mut ways = [0u32; 8];
            for e in ways.iter_mut() {
                *e = rng.next_u32();
            }
            // Plant the wanted value and empty (0) slots, so that both
            // matches and the emptiness test's answer vary.
            let want = rng.next_u32();
            let plant = rng.next_u32() & 0xff;
            let empty = rng.next_u32() & 0xff & !plant;
            for (w, e) in ways.iter_mut().enumerate() {
                if plant & (1 << w) != 0 {
                    *e = want;
                } else if empty & (1 << w) != 0 {
                    *e = 0;
                }
            }
            let got = match8(&ways, want);
            assert_eq!(got, match8_scalar(&ways, want), "{ways:x?} {want:x}");
            assert_eq!(got & plant, plant, "every planted way matches");
            assert_eq!(match8(&ways, 0), match8_scalar(&ways, 0), "{ways:x?}");
        }
        // Edges: all equal, none, sign bits (the packs saturate).
        assert_eq!(match8(&[0; 8], 0), 0xff);
        assert_eq!(match8(&[u32::MAX; 8], u32::MAX), 0xff);
        assert_eq!(match8(&[u32::MAX; 8], 0), 0);
        let mut one = [0x8000_0000u32; 8];
        one[7] = 0x7fff_ffff;
        assert_eq!(match8(&one, 0x7fff_ffff), 1 << 7);
        assert_eq!(match8(&one, 0x8000_0000), 0x7f);
    }

    fn match16_against_scalar() {
        let mut rng = Rng::new(11);
        let fields = [0u32, u32::MAX, 0xfff << 19, 0x8000_0000, 0xffff];
        for round in 0..20_000u32 {
            let field = fields[round as usize % fields.len()];
            let mut ways = [0u32; 16];
            for e in ways.iter_mut() {
                *e = rng.next_u32();
            }
            // Plant the wanted value (under the field) in some ways, so
            // that matches are common, not one in 2^32.
            let want = rng.next_u32() & field;
            let plant = rng.next_u32() & 0xffff;
            for (w, e) in ways.iter_mut().enumerate() {
                if plant & (1 << w) != 0 {
                    *e = (*e & !field) | want;
                }
            }
            let got = match16(&ways, field, want);
            assert_eq!(
                got,
                match16_scalar(&ways, field, want),
                "{ways:x?} {field:x} {want:x}"
            );
            assert_eq!(got & plant, plant, "every planted way matches");
        }
        // Edges: all empty, all full, sign bits set (the packs saturate).
        assert_eq!(match16(&[0; 16], 0xfff << 19, 0), 0xffff);
        assert_eq!(match16(&[u32::MAX; 16], u32::MAX, u32::MAX), 0xffff);
        assert_eq!(match16(&[u32::MAX; 16], u32::MAX, 0), 0);
        let mut one = [0x8000_0000u32; 16];
        one[15] = 0x7fff_ffff;
        assert_eq!(match16(&one, u32::MAX, 0x7fff_ffff), 1 << 15);
        assert_eq!(match16_scalar(&one, u32::MAX, 0x7fff_ffff), 1 << 15);
    }
}
