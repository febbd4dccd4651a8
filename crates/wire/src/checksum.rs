//! Internet checksums (RFC 1071), incremental updates (RFC 1624) and CRC32c
//! (RFC 3309, for SCTP).
//!
//! Sums are carried as folded 16-bit ones'-complement values (`u16`): the
//! checksum a header stores is `!sum`, and a header whose stored checksum is
//! right sums to `0xffff`. [`update`] is RFC 1624 equation 3,
//! `HC' = ~(~HC + ~m + m')`, which needs only the old and new values of the
//! changed 16-bit words, never the packet; that is how the datapath rewrites
//! addresses, ports, TTL and ToS at line rate.
//!
//! Changed bytes must be updated as the 16-bit words they sit in (a TTL is
//! the high byte of the TTL/protocol word): the views in this crate do that
//! for every field they rewrite.

/// Ones'-complement addition of two folded sums.
#[inline(always)]
pub fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// Folds a wide accumulator into a 16-bit ones'-complement sum.
#[inline(always)]
pub fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The ones'-complement sum of `data` taken as big-endian 16-bit words (an
/// odd trailing byte is padded with a zero byte, RFC 1071).
///
/// Eight bytes at a time, as two big-endian 32-bit words: 2^16 is 1 modulo
/// 0xffff, so a 32-bit word adds what its two 16-bit halves add, and the
/// fold gives the same value as a sum of 16-bit words (the one that
/// `sum_words` takes, the reference in the tests).
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        if let Some(&[a, b, c, d, e, f, g, h]) = c.first_chunk::<8>() {
            acc += u64::from(u32::from_be_bytes([a, b, c, d]));
            acc += u64::from(u32::from_be_bytes([e, f, g, h]));
        }
    }
    fold(acc + u64::from(sum_words(chunks.remainder())))
}

/// [`sum`] of an IPv4 header without options (20 bytes): five 32-bit
/// words, no loop (a decapsulation checks every outer header: the
/// general [`sum`] took ~74 instructions for it by callgrind, this ~20).
#[inline]
pub fn sum_ipv4_header(h: &[u8; 20]) -> u16 {
    let w = |i: usize| u64::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    fold(w(0) + w(4) + w(8) + w(12) + w(16))
}

/// [`sum`] two bytes at a time.
fn sum_words(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        if let [a, b] = w {
            acc += u64::from(u16::from_be_bytes([*a, *b]));
        }
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    fold(acc)
}

/// The checksum to store for `data` (whose checksum field is zero): `!sum`.
pub fn checksum(data: &[u8]) -> u16 {
    !sum(data)
}

/// The sum of the IPv4 pseudo-header for a transport segment of `len`
/// bytes with protocol `proto`.
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> u16 {
    let mut s = add(sum(&src), sum(&dst));
    s = add(s, u16::from(proto));
    add(s, len)
}

/// The sum of the IPv6 pseudo-header (RFC 8200 section 8.1) for an
/// upper-layer packet of `len` bytes with next header `proto`.
pub fn pseudo_header_v6(src: [u8; 16], dst: [u8; 16], proto: u8, len: u32) -> u16 {
    let mut s = add(sum(&src), sum(&dst));
    s = add(s, (len >> 16) as u16);
    s = add(s, len as u16);
    add(s, u16::from(proto))
}

/// RFC 1624 eqn. 3: the new stored checksum after one 16-bit word of the
/// covered data changed from `old` to `new` (`hc` is the stored checksum).
#[inline(always)]
pub fn update(hc: u16, old: u16, new: u16) -> u16 {
    !add(add(!hc, !old), new)
}

/// [`update`] for a 32-bit field (two words).
#[inline(always)]
pub fn update32(hc: u16, old: u32, new: u32) -> u16 {
    let hc = update(hc, (old >> 16) as u16, (new >> 16) as u16);
    update(hc, old as u16, new as u16)
}

/// [`update`] for a field of several words, such as an IPv6 address. The
/// field must start on a 16-bit boundary of the covered data; `old` and
/// `new` have the same length (an odd last byte is the high byte of its
/// word). Extra bytes of the longer slice are ignored.
pub fn update_bytes(hc: u16, old: &[u8], new: &[u8]) -> u16 {
    let n = old.len().min(new.len());
    let (old, new) = (&old[..n], &new[..n]);
    // ~HC + ~m + m' summed word by word equals ~HC + ~sum(m) + sum(m').
    !add(add(!hc, !sum(old)), sum(new))
}

/// CRC32c (Castagnoli) of `data`, as SCTP uses it (RFC 3309): initial value
/// and final XOR all ones, reflected. SCTP stores `crc32c(..).to_le_bytes()`.
pub fn crc32c(data: &[u8]) -> u32 {
    !crc32c_update(!0, data)
}

/// Feeds `data` into a running CRC32c register `state` (start with `!0`,
/// complement the final state): lets a caller checksum a buffer in pieces.
pub fn crc32c_update(state: u32, data: &[u8]) -> u32 {
    let mut crc = state;
    for b in data {
        crc = CRC32C_TABLE[((crc ^ u32::from(*b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

const CRC32C_TABLE: [u32; 256] = crc32c_table();

const fn crc32c_table() -> [u32; 256] {
    // Reflected Castagnoli polynomial.
    const POLY: u32 = 0x82f6_3b78;
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { POLY ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 1071 section 3 example: words 0001 f203 f4f5 f6f7 sum to ddf2.
    #[test]
    fn sum_by_eight_bytes_is_the_sum_of_words() {
        // Every length 0..200 and a few byte patterns (all-ones words
        // included: the 0xffff / 0 representation must not change).
        let mut x = 0x1234_5678_9abc_def1u64;
        for len in 0..200 {
            for pat in 0..4 {
                let data: std::vec::Vec<u8> = (0..len)
                    .map(|i| match pat {
                        0 => 0xff,
                        1 => 0,
                        2 => i as u8,
                        _ => {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            x as u8
                        }
                    })
                    .collect();
                assert_eq!(sum(&data), sum_words(&data), "len {len} pattern {pat}");
            }
        }
    }

    #[test]
    fn ipv4_header_sum_is_the_sum_of_words() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for pat in 0..500 {
            let mut h = [0u8; 20];
            for b in h.iter_mut() {
                *b = match pat {
                    0 => 0xff,
                    1 => 0,
                    _ => {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    }
                };
            }
            assert_eq!(sum_ipv4_header(&h), sum_words(&h), "{h:02x?}");
        }
    }

    #[test]
    fn rfc1071_example() {
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&d), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum(&[0x12]), 0x1200);
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(sum(&[]), 0);
    }

    #[test]
    fn incremental_update_matches_recompute() {
        // A real IPv4 header (checksum 0xb861 per RFC examples elsewhere).
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = checksum(&h);
        assert_eq!(c, 0xb861);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(sum(&h), 0xffff);
        // Change the TTL (high byte of word 8..10) and the source address.
        let old_w = u16::from_be_bytes([h[8], h[9]]);
        h[8] = 0x3f;
        let new_w = u16::from_be_bytes([h[8], h[9]]);
        let c2 = update(c, old_w, new_w);
        let old_src = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
        h[12..16].copy_from_slice(&[10, 0, 0, 1]);
        let c3 = update32(c2, old_src, 0x0a00_0001);
        h[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(c3, checksum(&h));
    }

    #[test]
    fn update_bytes_matches_update32() {
        let a = update32(0x1234, 0xdead_beef, 0x0102_0304);
        let b = update_bytes(0x1234, &[0xde, 0xad, 0xbe, 0xef], &[1, 2, 3, 4]);
        assert_eq!(a, b);
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(&[]), 0);
    }

    #[test]
    fn pseudo_headers() {
        let v4 = pseudo_header_v4([192, 0, 2, 1], [192, 0, 2, 2], 0x11, 8);
        assert_eq!(v4, fold(0xc000 + 0x0201 + 0xc000 + 0x0202 + 0x11 + 8));
        let mut s = [0u8; 16];
        s[15] = 1;
        let v6 = pseudo_header_v6(s, s, 0x3a, 0x1_0002);
        assert_eq!(v6, fold(1 + 1 + 1 + 2 + 0x3a));
    }
}
