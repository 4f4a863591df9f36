//! The one deterministic generator used for generated test cases:
//! SplitMix64 (Steele, Lea, Flood 2014). Same seed, same stream, on any
//! machine; cases that are stored as seeds are regenerated from it.

/// SplitMix64 state.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// A stream for item `index` of the run seeded `seed`, independent of
    /// how items are scheduled over threads.
    pub fn for_item(seed: u64, index: u64) -> Self {
        let mut s = SplitMix64(seed ^ 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(index.wrapping_add(1)));
        s.next_u64();
        s
    }

    /// The generator seeded `seed` after `draws` calls of
    /// [`next_u64`](Self::next_u64) (its state advances by a constant per
    /// draw), so a stream can be split into blocks drawn in parallel.
    pub fn after_draws(seed: u64, draws: u64) -> Self {
        SplitMix64(seed.wrapping_add(draws.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (n > 0), by 128-bit multiply (no modulo bias worth
    /// noting for n far below 2^64).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range_i64(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `num/den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

/// Exponent range of the benchmarks' input ([`bench_input`]): |x| in [2^-BENCH_EXP_SPREAD, 2^(BENCH_EXP_SPREAD+1)).
pub const BENCH_EXP_SPREAD: i32 = 24;

/// The benchmarks' input (`mxbi bench`, the criterion benches): random sign, random 23-bit mantissa, exponent
/// uniform in [-24, 24] (49 binades, wider than any FP8 format), no
/// zeros/Inf/NaN. Its own stream (xorshift64, fixed seed), not [`SplitMix64`]:
/// the published benchmark figures (docs/PERFORMANCE.md) were measured on it.
pub fn bench_input(n: usize) -> Vec<f32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = state;
            let sign = ((u >> 63) as u32) << 31;
            let mant = (u >> 8) as u32 & 0x7F_FFFF;
            let e = ((u >> 32) % (2 * BENCH_EXP_SPREAD as u64 + 1)) as i32 - BENCH_EXP_SPREAD;
            f32::from_bits(sign | (((e + 127) as u32) << 23) | mant)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_draws_continues_the_stream() {
        let mut r = SplitMix64::new(42);
        for skipped in 0..5u64 {
            let mut later = SplitMix64::after_draws(42, skipped);
            let mut again = r.clone();
            assert_eq!(later.next_u64(), again.next_u64(), "after {skipped} draws");
            r.next_u64();
        }
    }

    #[test]
    fn known_stream() {
        // First outputs of SplitMix64 seeded 0 (published reference values).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SplitMix64::new(7);
        for n in [1u64, 2, 3, 1000] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
    }
}
