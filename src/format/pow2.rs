//! Exact powers of two, built from the bits (no `powi`, no `log2`), and
//! the power of two an E8M0 scale byte stands for.

/// The exponent of an E8M0 scale byte (OCP MX): byte `b` in `0..=254` is
/// the scale 2^(b - 127), so 2^-127 (0x00) to 2^127 (0xFE). 0xFF is NaN
/// and has no exponent: this gives 128 for it, and a caller that must see
/// NaN tests for 0xFF first.
#[inline]
pub const fn e8m0_exponent(b: u8) -> i32 {
    b as i32 - 127
}

/// 2^e as an f64, exactly: normal for `-1022 <= e <= 1023`, subnormal
/// for `-1074 <= e < -1022`; beyond the range the value 2^e rounds to:
/// `+Inf` above 1023, `+0.0` below -1074.
#[inline]
pub const fn pow2(e: i32) -> f64 {
    if e > 1023 {
        f64::INFINITY
    } else if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else if e >= -1074 {
        f64::from_bits(1u64 << (e + 1074))
    } else {
        0.0
    }
}

/// 2^e as an f32, exactly: normal for `-126 <= e <= 127`, subnormal for
/// `-149 <= e < -126`; beyond the range `+Inf` above 127, `+0.0` below
/// -149 (the same values as `pow2(e) as f32`).
#[inline]
pub const fn pow2_f32(e: i32) -> f32 {
    if e > 127 {
        f32::INFINITY
    } else if e >= -126 {
        f32::from_bits(((e + 127) as u32) << 23)
    } else if e >= -149 {
        f32::from_bits(1u32 << (e + 149))
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_two_are_exact_and_saturate_beyond_the_range() {
        let mut x = 1.0f64;
        for e in 0..=1023 {
            assert_eq!(pow2(e), x, "{e}");
            x *= 2.0;
        }
        let mut x = 1.0f64;
        for e in (-1074..=0).rev() {
            assert_eq!(pow2(e), x, "{e}");
            x /= 2.0;
        }
        assert_eq!(pow2(1024), f64::INFINITY);
        assert_eq!(pow2(-1075).to_bits(), 0);
        for e in -200..=200 {
            assert_eq!(pow2_f32(e).to_bits(), (pow2(e) as f32).to_bits(), "{e}");
            assert_eq!(pow2_f32(e).to_bits(), (2f64.powi(e) as f32).to_bits(), "{e}");
        }
        assert_eq!(pow2_f32(-149).to_bits(), 1);
        assert_eq!(pow2_f32(-127).to_bits(), 0x0040_0000);
        assert_eq!(
            (e8m0_exponent(0), e8m0_exponent(127), e8m0_exponent(0xFE)),
            (-127, 0, 127)
        );
        assert_eq!(e8m0_exponent(0xFF), 128);
    }
}
