//! Shared input generation for the criterion benches: the same distribution
//! as `mxbi bench` (random sign and mantissa, exponent uniform in [-24, 24]).

pub fn input(n: usize) -> Vec<f32> {
    mxbi::rng::bench_input(n)
}
