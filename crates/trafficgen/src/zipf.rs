//! Zipf-distributed flow choice: elephants and mice.
//!
//! Flow of rank `k` (1-based) is drawn with probability
//! `k^-s / H(n, s)`, where `H(n, s) = sum_{i=1..n} i^-s`. Rank 1 is flow 0,
//! rank 2 flow 1, and so on, so the lowest-numbered flows are the elephants.
//! `s = 0` is the uniform distribution; `s = 1` is classic Zipf (with 1000
//! flows the top flow carries about 13 % of the packets, the top 10 %
//! of flows about 70 %).
//!
//! Sampling is by inversion: the cumulative weights are tabulated once
//! (8 bytes per flow, 8 MB for 1M flows) and each draw is a binary search for
//! a uniform `[0, 1)` number from [`PyRandom::random`]. The table is built
//! with `f64::powf`, i.e. the platform's `pow`; glibc's is accurate to well
//! under one ulp, so a different libm could change a draw only if a uniform
//! number fell within an ulp of a bucket boundary — never in practice, but
//! strictly the bit-reproducibility promise is "same seed, same platform
//! libm".

use crate::pyrandom::PyRandom;

/// A tabulated Zipf distribution over `0..n`.
#[derive(Clone, Debug)]
pub struct Zipf {
    /// `cdf[i]` = sum of the weights of flows `0..=i`, normalised so the last
    /// entry is exactly 1.0.
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `n >= 1` flows with exponent `s >= 0` (finite).
    pub fn new(n: usize, s: f64) -> Self {
        debug_assert!(n >= 1 && s.is_finite() && s >= 0.0);
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0f64;
        for k in 1..=n {
            acc += (k as f64).powf(-s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Zipf { cdf }
    }

    /// Number of flows.
    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    /// True if the distribution has no flow (never, by construction).
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// Probability of flow `i`.
    pub fn probability(&self, i: usize) -> f64 {
        let below = if i == 0 { 0.0 } else { self.cdf[i - 1] };
        self.cdf[i] - below
    }

    /// Draws one flow index.
    pub fn sample(&self, rng: &mut PyRandom) -> usize {
        let u = rng.random();
        // First index whose cumulative weight exceeds u; u < 1.0 = last entry,
        // so the index is always in range.
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_exponent_is_uniform() {
        let z = Zipf::new(4, 0.0);
        for i in 0..4 {
            assert!((z.probability(i) - 0.25).abs() < 1e-12);
        }
    }

    #[test]
    fn classic_zipf_top_share() {
        let z = Zipf::new(1000, 1.0);
        // 1 / H(1000) = 1 / 7.4855 = 0.1336
        assert!((z.probability(0) - 0.1336).abs() < 1e-3);
        assert!(z.probability(0) > z.probability(1));
        assert_eq!(z.len(), 1000);
        assert!(!z.is_empty());
    }

    #[test]
    fn samples_stay_in_range() {
        let z = Zipf::new(3, 2.0);
        let mut rng = PyRandom::new(1);
        let mut counts = [0u32; 3];
        for _ in 0..10_000 {
            counts[z.sample(&mut rng)] += 1;
        }
        // p = 1, 1/4, 1/9 normalised: 0.735, 0.184, 0.082
        assert!((7000..7700).contains(&counts[0]), "{counts:?}");
        assert!(counts[2] > 500, "{counts:?}");
    }
}
