//! Seeded random streams: one xoshiro256++ per stream, seeded through SplitMix64
//! (one independent, reproducible stream per job and per fault set).

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::{SplitMix64, Xoshiro256PlusPlus};

/// Derives the seed of stream `stream` from a run's seed, so streams are independent and adding
/// a stream does not shift the others.
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut mix = SplitMix64::seed_from_u64(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    mix.next_u64()
}

/// A random stream with the few draws workloads need.
#[derive(Clone, Debug)]
pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    /// `seed_from_u64` of xoshiro256++ expands the seed with SplitMix64.
    pub fn new(seed: u64) -> Self {
        Self(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; bias below 2^-40 for the spans used here).
    /// `n == 0` gives 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Exponentially distributed with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let mut a = Rng::new(stream_seed(1, 0));
        let mut b = Rng::new(stream_seed(1, 0));
        let mut c = Rng::new(stream_seed(1, 1));
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(7);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let v = r.below(5);
            assert!(v < 5);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn exponential_mean_is_close() {
        let mut r = Rng::new(3);
        let n = 20_000;
        let mean = (0..n).map(|_| r.exponential(5.0)).sum::<f64>() / f64::from(n);
        assert!((mean - 5.0).abs() < 0.2, "{mean}");
    }
}
