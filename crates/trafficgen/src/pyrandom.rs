//! A pseudo-random generator that reproduces Python's `random.Random`.
//!
//! The team's reference workload generator (`gen-pcap.py`, next to the
//! OVS-DPDK measurements) draws its random orders from Python's `random`
//! module. To make the same workloads byte for byte, this module implements
//! the same generator and the same derived algorithms as CPython 3:
//!
//! - the generator: MT19937 (Matsumoto and Nishimura's Mersenne Twister,
//!   `mt19937ar.c`), seeded from an integer the way `random_seed` in
//!   `Modules/_randommodule.c` does it: the absolute value split into 32-bit
//!   words, least significant first (at least one word), fed to
//!   `init_by_array`;
//! - `getrandbits(k)`: one 32-bit output shifted right by `32 - k` for
//!   `k <= 32`; for larger `k` words are filled from the least significant
//!   end, the last one shifted right;
//! - `randrange(n)` (= `_randbelow_with_getrandbits`): draw `k =
//!   n.bit_length()` bits, retry while the value is `>= n`;
//! - `shuffle(x)`: Fisher-Yates from the end, `j = _randbelow(i + 1)` for
//!   `i = len-1 .. 1`;
//! - `random()`: 53 bits from two outputs, `(a >> 5, b >> 6)`, scaled by
//!   `2^-53`.
//!
//! Nothing else of Python's module is reproduced. The generator is small,
//! fast enough for workload generation (a few ns per draw) and not meant for
//! anything cryptographic.

/// MT19937 state size in 32-bit words.
const N: usize = 624;
/// MT19937 middle word offset.
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// Python's `random.Random`: MT19937 plus CPython's derived algorithms.
#[derive(Clone)]
pub struct PyRandom {
    mt: [u32; N],
    mti: usize,
}

impl std::fmt::Debug for PyRandom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyRandom")
            .field("mti", &self.mti)
            .finish_non_exhaustive()
    }
}

impl PyRandom {
    /// The generator of `random.Random(seed)` for a non-negative integer seed.
    pub fn new(seed: u64) -> Self {
        // Python splits abs(seed) into 32-bit words, least significant
        // first, and uses at least one word (seed 0 gives the key [0]).
        let lo = seed as u32;
        let hi = (seed >> 32) as u32;
        if hi == 0 {
            Self::from_key(&[lo])
        } else {
            Self::from_key(&[lo, hi])
        }
    }

    /// `init_by_array` of `mt19937ar.c`.
    fn from_key(key: &[u32]) -> Self {
        let mut r = Self::from_u32(19_650_218);
        let mt = &mut r.mt;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        r
    }

    /// `init_genrand` of `mt19937ar.c`.
    fn from_u32(s: u32) -> Self {
        let mut mt = [0u32; N];
        mt[0] = s;
        for i in 1..N {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        PyRandom { mt, mti: N }
    }

    /// Regenerates the whole state block (the "twist").
    fn twist(&mut self) {
        let mt = &mut self.mt;
        let mag = |y: u32| if y & 1 == 0 { 0 } else { MATRIX_A };
        for kk in 0..N - M {
            let y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
            mt[kk] = mt[kk + M] ^ (y >> 1) ^ mag(y);
        }
        for kk in N - M..N - 1 {
            let y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
            mt[kk] = mt[kk + M - N] ^ (y >> 1) ^ mag(y);
        }
        let y = (mt[N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
        mt[N - 1] = mt[M - 1] ^ (y >> 1) ^ mag(y);
        self.mti = 0;
    }

    /// The next 32-bit output (`genrand_uint32`).
    pub fn next_u32(&mut self) -> u32 {
        if self.mti >= N {
            self.twist();
        }
        let mut y = self.mt[self.mti];
        self.mti += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `getrandbits(k)` for `1 <= k <= 64`.
    pub fn getrandbits(&mut self, k: u32) -> u64 {
        debug_assert!((1..=64).contains(&k));
        if k <= 32 {
            return u64::from(self.next_u32() >> (32 - k));
        }
        // Least significant word first; the last word keeps its top bits.
        let lo = u64::from(self.next_u32());
        let hi = u64::from(self.next_u32() >> (64 - k));
        (hi << 32) | lo
    }

    /// `randrange(n)`: uniform in `0..n`, for `n >= 1`.
    pub fn randbelow(&mut self, n: u64) -> u64 {
        debug_assert!(n >= 1);
        let k = 64 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `shuffle(x)`: the same permutation Python makes of a list.
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.randbelow(i as u64 + 1) as usize;
            x.swap(i, j);
        }
    }

    /// `random()`: uniform in `[0, 1)` with 53 bits.
    pub fn random(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference values printed by CPython 3.11:
    //   r = random.Random(1); [r.getrandbits(32) for _ in range(3)]
    //   random.Random(1).random()
    //   random.Random(0).random()
    //   random.Random(9).getrandbits(48)
    //   r = random.Random(2**40 + 5); r.getrandbits(32)
    //   r = random.Random(42); [r.randrange(10) for _ in range(10)]
    //   r = random.Random(3); l = list(range(10)); r.shuffle(l)

    #[test]
    fn matches_cpython_random() {
        assert_eq!(PyRandom::new(1).random(), 0.134_364_244_112_401_22);
        assert_eq!(PyRandom::new(0).random(), 0.844_421_851_525_048_1);
    }

    #[test]
    fn matches_cpython_getrandbits() {
        let mut r = PyRandom::new(1);
        let got: Vec<u64> = (0..3).map(|_| r.getrandbits(32)).collect();
        assert_eq!(got, GETRANDBITS_SEED1);
        assert_eq!(
            PyRandom::new((1 << 40) + 5).getrandbits(32),
            GETRANDBITS_BIGSEED
        );
        assert_eq!(PyRandom::new(9).getrandbits(48), GETRANDBITS48_SEED9);
    }

    #[test]
    fn matches_cpython_randrange_and_shuffle() {
        let mut r = PyRandom::new(42);
        let got: Vec<u64> = (0..10).map(|_| r.randbelow(10)).collect();
        assert_eq!(got, RANDRANGE10_SEED42);
        let mut l: Vec<u32> = (0..10).collect();
        PyRandom::new(3).shuffle(&mut l);
        assert_eq!(l, SHUFFLE10_SEED3);
    }

    const GETRANDBITS_SEED1: [u64; 3] = [577_090_037, 2_444_712_010, 3_639_700_191];
    const GETRANDBITS_BIGSEED: u64 = 2_166_296_868;
    const GETRANDBITS48_SEED9: u64 = 172_603_839_325_806;
    const RANDRANGE10_SEED42: [u64; 10] = [1, 0, 4, 3, 3, 2, 1, 8, 1, 9];
    const SHUFFLE10_SEED3: [u32; 10] = [1, 5, 6, 0, 9, 4, 7, 2, 8, 3];

    #[test]
    fn randbelow_one_is_zero() {
        let mut r = PyRandom::new(5);
        assert!((0..100).all(|_| r.randbelow(1) == 0));
    }
}
