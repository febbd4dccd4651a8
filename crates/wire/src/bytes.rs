//! Non-panicking big-endian reads and writes at fixed offsets.
//!
//! Every packet view reads and writes through these helpers. A read outside
//! the buffer yields zeros and a write outside it is dropped, so no accessor
//! can panic whatever the buffer; on a view whose `check_len` succeeded the
//! fallback paths are never taken. The helpers are `#[inline(always)]` and
//! compile to one bounds check plus a load.

use crate::Field;

/// The byte at `at`, or 0.
#[inline(always)]
pub(crate) fn u8_at(d: &[u8], at: usize) -> u8 {
    d.get(at).copied().unwrap_or(0)
}

/// `N` bytes starting at `at`, or zeros.
#[inline(always)]
pub(crate) fn array_at<const N: usize>(d: &[u8], at: usize) -> [u8; N] {
    match d.get(at..).and_then(|s| s.get(..N)) {
        Some(s) => {
            let mut out = [0u8; N];
            for (o, i) in out.iter_mut().zip(s) {
                *o = *i;
            }
            out
        }
        None => [0u8; N],
    }
}

/// The big-endian `u16` in `f` (a two-byte range), or 0.
#[inline(always)]
pub(crate) fn be16(d: &[u8], f: Field) -> u16 {
    match d.get(f) {
        Some(&[a, b]) => u16::from_be_bytes([a, b]),
        _ => 0,
    }
}

/// The big-endian `u32` in `f` (a four-byte range), or 0.
#[inline(always)]
pub(crate) fn be32(d: &[u8], f: Field) -> u32 {
    match d.get(f) {
        Some(&[a, b, c, e]) => u32::from_be_bytes([a, b, c, e]),
        _ => 0,
    }
}

/// Writes `v` into byte `at` if it exists.
#[inline(always)]
pub(crate) fn set_u8_at(d: &mut [u8], at: usize, v: u8) {
    if let Some(b) = d.get_mut(at) {
        *b = v;
    }
}

/// Writes `v` big-endian into `f` (a two-byte range) if it exists.
#[inline(always)]
pub(crate) fn set_be16(d: &mut [u8], f: Field, v: u16) {
    if let Some([a, b]) = d.get_mut(f) {
        [*a, *b] = v.to_be_bytes();
    }
}

/// Writes `v` big-endian into `f` (a four-byte range) if it exists.
#[inline(always)]
pub(crate) fn set_be32(d: &mut [u8], f: Field, v: u32) {
    if let Some([a, b, c, e]) = d.get_mut(f) {
        [*a, *b, *c, *e] = v.to_be_bytes();
    }
}

/// Copies `v` to offset `at` if all of it fits; otherwise writes nothing.
#[inline(always)]
pub(crate) fn set_bytes_at(d: &mut [u8], at: usize, v: &[u8]) {
    if let Some(s) = d.get_mut(at..).and_then(|s| s.get_mut(..v.len())) {
        for (o, i) in s.iter_mut().zip(v) {
            *o = *i;
        }
    }
}

/// The sub-slice `from..to`, clamped to the buffer (never panics).
#[inline(always)]
pub(crate) fn sub(d: &[u8], from: usize, to: usize) -> &[u8] {
    let to = to.min(d.len());
    d.get(from..to).unwrap_or(&[])
}

/// Mutable [`sub`].
#[inline(always)]
pub(crate) fn sub_mut(d: &mut [u8], from: usize, to: usize) -> &mut [u8] {
    let to = to.min(d.len());
    d.get_mut(from..to).unwrap_or(&mut [])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_are_zero() {
        let d = [1u8, 2, 3];
        assert_eq!(u8_at(&d, 3), 0);
        assert_eq!(be16(&d, 2..4), 0);
        assert_eq!(be16(&d, 1..3), 0x0203);
        assert_eq!(be32(&d, 0..4), 0);
        assert_eq!(array_at::<2>(&d, 2), [0, 0]);
        assert_eq!(array_at::<2>(&d, usize::MAX), [0, 0]);
        assert_eq!(sub(&d, 2, 10), &[3]);
        assert_eq!(sub(&d, 5, 10), &[] as &[u8]);
        assert_eq!(sub(&d, 2, 1), &[] as &[u8]);
    }

    #[test]
    fn writes_past_the_end_are_dropped() {
        let mut d = [0u8; 3];
        set_be16(&mut d, 2..4, 0xffff);
        set_be32(&mut d, 0..4, 0xffff_ffff);
        set_u8_at(&mut d, 3, 1);
        set_bytes_at(&mut d, 2, &[1, 2]);
        assert_eq!(d, [0, 0, 0]);
        set_be16(&mut d, 1..3, 0xabcd);
        set_bytes_at(&mut d, 0, &[9]);
        assert_eq!(d, [9, 0xab, 0xcd]);
        assert!(sub_mut(&mut d, 4, 2).is_empty());
    }
}
