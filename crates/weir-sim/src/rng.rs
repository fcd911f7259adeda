//! A small seeded random number generator with a fixed algorithm.
//!
//! The lab promises the same bytes for the same command on every machine and every
//! version, so it does not borrow a generator whose algorithm may change between
//! releases: this is SplitMix64 (Steele, Lea and Flood, 2014), 64 bits of state.

/// A seeded SplitMix64 generator: the only source of randomness in the simulator.
///
/// # Examples
///
/// ```
/// use weir_sim::SimRng;
///
/// let mut a = SimRng::new(7);
/// let mut b = SimRng::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// let u = a.next_f64();
/// assert!((0.0..1.0).contains(&u));
/// ```
#[derive(Debug, Clone)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    /// A generator whose whole output is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SimRng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        // 53 bits fit a f64 mantissa exactly.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform number in `(0, 1]`, safe to take the logarithm of.
    fn next_open_f64(&mut self) -> f64 {
        1.0 - self.next_f64()
    }

    /// An exponentially distributed number with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * self.next_open_f64().ln()
    }

    /// A standard normal number (Box–Muller; one of the pair is discarded so that each
    /// call consumes the same amount of randomness).
    pub fn standard_normal(&mut self) -> f64 {
        let radius = (-2.0 * self.next_open_f64().ln()).sqrt();
        let angle = std::f64::consts::TAU * self.next_f64();
        radius * angle.cos()
    }

    /// A log-normal number whose median is `median` and whose logarithm has standard
    /// deviation `sigma`.
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.standard_normal()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let mut a = SimRng::new(42);
        let mut b = SimRng::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn splitmix64_reference_values() {
        // First outputs of SplitMix64 seeded with 0, as published with the algorithm.
        let mut rng = SimRng::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn exponential_mean_is_close() {
        let mut rng = SimRng::new(1);
        let n = 20_000;
        let sum: f64 = (0..n).map(|_| rng.exponential(10.0)).sum();
        let mean = sum / f64::from(n);
        assert!((9.5..10.5).contains(&mean), "mean {mean}");
    }

    #[test]
    fn lognormal_median_is_close() {
        let mut rng = SimRng::new(3);
        let mut samples: Vec<f64> = (0..10_001).map(|_| rng.lognormal(100.0, 1.0)).collect();
        samples.sort_by(f64::total_cmp);
        let median = samples[5_000];
        assert!((90.0..110.0).contains(&median), "median {median}");
    }
}
