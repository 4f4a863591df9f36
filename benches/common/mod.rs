//! Shared input generation for the criterion benches: the same distribution
//! as `mxbi bench` (random sign and mantissa, exponent uniform in [-24, 24]).

pub fn input(n: usize) -> Vec<f32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = state;
            let sign = ((u >> 63) as u32) << 31;
            let mant = (u >> 8) as u32 & 0x7F_FFFF;
            let e = ((u >> 32) % 49) as i32 - 24;
            f32::from_bits(sign | (((e + 127) as u32) << 23) | mant)
        })
        .collect()
}
