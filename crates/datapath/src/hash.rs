//! Hashing: the per-packet hash and the per-subtable masked hashes.
//!
//! What: two families of 32-bit hashes over [`FlowKey`] words.
//!
//! - [`packet_hash`] — one hash per packet, computed once when the packet
//!   enters a batch. The EMC, SMC, DFC and Cuckoo Distributor all index with
//!   it. It covers every word of the key that extraction fills (word 14,
//!   the datapath metadata, is always zero in a received packet's key),
//!   i.e. in_port, dl_type, nw_proto, nw_frag, IPv4/ARP addresses, ports,
//!   TCP flags, ToS, TTL, both MACs, VLAN tags, ARP/ND fields, IPv6
//!   addresses and MPLS label stack entries. [`rss5_hash`] (IPv4 or
//!   IPv6 5-tuple + in_port/dl_type/nw_proto, what a NIC's RSS provides) is
//!   kept for comparison and for callers that get a hash from hardware.
//! - [`hash_compact`] — a subtable's hash over the gathered non-zero words
//!   of its mask (see [`crate::subtable`]): a megaflow's masked key and a
//!   packet's key under the same mask hash identically.
//!
//! Why the full key: it costs ~2.3 ns more per packet (numbers below) while a
//! 5-tuple hash puts every packet that differs only outside the 5-tuple
//! (L2-only flows, ARP, tunnel-like traffic whose outer headers are
//! constant, TCP flag changes within one connection) in the same EMC/SMC
//! bucket and DFC entry: those caches then thrash on a handful of slots.
//! The measured collision counts below show it.
//!
//! How: a "folded multiply" mix (as in wyhash): each pair of words is XORed
//! with per-position secrets, multiplied 64×64→128 and the halves XORed;
//! the pair results are summed and folded once more. The pair multiplies
//! are independent, so 32 packets' hashes overlap well; no `unsafe`, no
//! CPU-specific code.
//!
//! Measured (release build, best of 5, 2-core shared VM, x86_64 with
//! AVX-512; `cargo bench -p flowpath-datapath --bench cascade -- hash`,
//! working tree on top of commit 442c43c):
//!
//! | hash | ns/key |
//! |---|---|
//! | `packet_hash` (full key, 14 words, all folded) | 4.0 |
//! | `packet_hash`, words 5..14 folded only when non-zero (IPv4 keys; re-measured 5.9 → 2.7 on a later, busier day, same bench) | 1.8 (scaled) |
//! | `rss5_hash` (IPv4 5-tuple) | 1.7 |
//! | `hash_compact`, 3 words (a subtable's hash) | 1.5 |
//! | CRC32C (`crc32q` ×14, SSE 4.2, standalone test program) | 3.1 |
//! | CRC32C, 3 interleaved streams (standalone) | 2.9 |
//!
//! So hardware CRC32C would save ~1 ns per packet on the full key. It
//! needs `unsafe` (a `#[target_feature]` function called after run-time
//! detection) and a table-driven scalar fallback with a differential test;
//! that is left for a fenced module once the lints policy allows one (see
//! the crate's report). The choice of words matters more than the
//! function: in 13 bits (the EMC index), 8192 keys that differ only in
//! dl_src land on 5192 distinct slots with `packet_hash` (3000 collide, as
//! a uniform hash would) and on 1 slot with `rss5_hash` (8191 collide).
//!
//! Invariants: deterministic across runs and processes (no random seed), so
//! a hash computed by one worker is valid in another; never reads words 14
//! and 15.
//!
//! Threads: pure functions.

use flowpath_flow::key::{FlowKey, W_IPV6_DST, W_IPV6_SRC, W_META, W_NW, W_TP};

/// Per-position secrets (random odd 64-bit constants).
const S: [u64; 18] = [
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
    0x1d8e_4e27_c47d_124f,
    0x9e37_79b9_7f4a_7c15,
    0xbf58_476d_1ce4_e5b9,
    0x94d0_49bb_1331_11eb,
    0xd6e8_feb8_6659_fd93,
    0xc2b2_ae3d_27d4_eb4f,
    0x1656_67b1_9e37_79f9,
    0x85eb_ca77_c2b2_ae63,
    0x27d4_eb2f_1656_67c5,
    0xff51_afd7_ed55_8ccd,
    0xc4ce_b9fe_1a85_ec53,
    0x2127_599b_f432_5c37,
    0x880f_f9ed_e3ad_5c45,
    0x6c62_272e_07bb_0142,
];

/// 64×64→128 multiply, halves XORed.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

#[inline(always)]
fn finish(acc: u64, len: usize) -> u32 {
    let x = fold(acc ^ S[16], S[17] ^ len as u64);
    (x ^ (x >> 32)) as u32
}

/// The per-packet hash over the whole key (words 0..14 and 15; word 14 is
/// datapath metadata, zero in received keys). See the module doc.
///
/// Words 0..5 (in_port, dl_type, nw_proto, nw_frag, IPv4/ARP addresses,
/// ports, TCP flags, ToS, TTL, both MACs and VLAN tags) are set in nearly
/// every key and are always mixed in (three folded multiplies). Words
/// 5..14 and 15 (ARP/ND link-layer addresses, IPv6 label and addresses, ND
/// target, MPLS label stack entries) are all zero for IPv4 traffic: they
/// are mixed in (five more multiplies) only when one of them is non-zero,
/// which one OR-reduction decides. Every word still counts: two keys that
/// differ anywhere in words 0..14 or 15 get independent-looking hashes.
#[inline]
pub fn packet_hash(key: &FlowKey) -> u32 {
    let w = &key.w;
    let mut acc = fold(w[0] ^ S[0], w[1] ^ S[1])
        .wrapping_add(fold(w[2] ^ S[2], w[3] ^ S[3]))
        .wrapping_add(fold(w[4] ^ S[4], S[5]));
    let rest = w[5] | w[6] | w[7] | w[8] | w[9] | w[10] | w[11] | w[12] | w[13] | w[15];
    if rest != 0 {
        acc = acc
            .wrapping_add(fold(w[5] ^ S[6], w[6] ^ S[7]))
            .wrapping_add(fold(w[7] ^ S[8], w[8] ^ S[9]))
            .wrapping_add(fold(w[9] ^ S[10], w[10] ^ S[11]))
            .wrapping_add(fold(w[11] ^ S[12], w[12] ^ S[13]))
            .wrapping_add(fold(w[13] ^ S[14], w[15] ^ S[15]));
    }
    finish(acc, 14)
}

/// [`packet_hash`] of a key whose words 5..16 are known to be 0 (the
/// same value, without reading them).
#[inline]
pub fn packet_hash_short(key: &FlowKey) -> u32 {
    let w = &key.w;
    let acc = fold(w[0] ^ S[0], w[1] ^ S[1])
        .wrapping_add(fold(w[2] ^ S[2], w[3] ^ S[3]))
        .wrapping_add(fold(w[4] ^ S[4], S[5]));
    finish(acc, 14)
}

/// An RSS-like hash: in_port/dl_type/nw_proto word, IP addresses and
/// transport ports (IPv6 addresses for IPv6, IPv4 otherwise).
#[inline]
pub fn rss5_hash(key: &FlowKey) -> u32 {
    let w = &key.w;
    let ports = w[W_TP] & 0xffff_ffff;
    let mut acc = fold(w[W_META] ^ S[0], ports ^ S[1]);
    if key.is_ipv6() {
        acc = acc.wrapping_add(fold(w[W_IPV6_SRC] ^ S[2], w[W_IPV6_SRC + 1] ^ S[3]));
        acc = acc.wrapping_add(fold(w[W_IPV6_DST] ^ S[4], w[W_IPV6_DST + 1] ^ S[5]));
        finish(acc, 6)
    } else {
        acc = acc.wrapping_add(fold(w[W_NW] ^ S[2], S[3]));
        finish(acc, 3)
    }
}

/// Hash of a subtable's gathered masked words (`vals.len()` ≤ 16).
#[inline(always)]
pub fn hash_compact(vals: &[u64]) -> u32 {
    let mut acc = 0u64;
    let mut pairs = vals.chunks_exact(2);
    let mut p = 0;
    for c in &mut pairs {
        acc = acc.wrapping_add(fold(c[0] ^ S[p], c[1] ^ S[p + 1]));
        p += 2;
    }
    if let [last] = pairs.remainder() {
        acc = acc.wrapping_add(fold(*last ^ S[p], S[p + 1]));
    }
    finish(acc, vals.len())
}

/// A cheap, seedable PRNG (xorshift64*) for insertion probabilities and
/// random replacement. Not for anything security-related.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; 0 is remapped).
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next 32 random bits.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}

/// Threshold for "insert with probability 1/`inv_prob`": compare a random
/// `u32` with `<=` against it (0 = never, 1 = always), as OVS's
/// `emc-insert-inv-prob`.
pub fn insert_threshold(inv_prob: u32) -> Option<u32> {
    match inv_prob {
        0 => None,
        n => Some(u32::MAX / n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn key(i: u64) -> FlowKey {
        let mut k = FlowKey::zero();
        k.set_dl_type(0x0800);
        k.set_nw_proto(6);
        k.set_nw_src(0x0a00_0000 | (i as u32 & 0xffff));
        k.set_tp_src(1000 + (i >> 16) as u16);
        k
    }

    #[test]
    fn deterministic_and_sensitive_to_every_word() {
        let k = key(7);
        assert_eq!(packet_hash(&k), packet_hash(&k));
        for w in (0..14).chain([15]) {
            let mut k2 = k;
            k2.w[w] ^= 1 << 17;
            assert_ne!(packet_hash(&k), packet_hash(&k2), "word {w}");
        }
        let mut k3 = k;
        k3.w[14] = 5;
        assert_eq!(packet_hash(&k), packet_hash(&k3), "metadata word ignored");
    }

    #[test]
    fn short_hash_is_the_full_one_on_short_keys() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            let mut k = FlowKey::zero();
            for w in 0..5 {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                k.w[w] = x ^ (x >> 29);
            }
            assert_eq!(packet_hash_short(&k), packet_hash(&k));
        }
    }

    #[test]
    fn low_bits_spread() {
        // 4096 keys into 4096 slots: a uniform hash fills about 63 %.
        let slots: HashSet<u32> = (0..4096).map(|i| packet_hash(&key(i)) & 4095).collect();
        assert!(slots.len() > 2400, "{}", slots.len());
        let slots: HashSet<u32> = (0..4096).map(|i| packet_hash(&key(i)) >> 20).collect();
        assert!(slots.len() > 2400, "{}", slots.len());
        let slots: HashSet<u32> = (0..4096)
            .map(|i| hash_compact(&[i, 0x0800, 7]) & 4095)
            .collect();
        assert!(slots.len() > 2400, "{}", slots.len());
    }

    #[test]
    fn rss5_ignores_l2_full_hash_does_not() {
        let mut a = key(1);
        let mut b = a;
        a.set_dl_src(1);
        b.set_dl_src(2);
        assert_eq!(rss5_hash(&a), rss5_hash(&b));
        assert_ne!(packet_hash(&a), packet_hash(&b));
    }

    #[test]
    fn compact_hash_depends_on_length_and_order() {
        assert_ne!(hash_compact(&[1, 2]), hash_compact(&[2, 1]));
        assert_ne!(hash_compact(&[1]), hash_compact(&[1, 0]));
    }

    #[test]
    fn insert_probability_thresholds() {
        assert_eq!(insert_threshold(0), None);
        assert_eq!(insert_threshold(1), Some(u32::MAX));
        let t = insert_threshold(100).unwrap();
        let mut r = Rng::new(1);
        let n = (0..100_000).filter(|_| r.next_u32() <= t).count();
        assert!((800..1200).contains(&n), "{n}");
    }
}
