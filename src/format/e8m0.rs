//! E8M0 (OCP MX shared scale): 2^(b-127) for b in 0..=254, 0xFF = NaN.
//! No zero, no sign, no Inf: each implementation decides what 0, negatives,
//! Inf and ties become, and those choices are the policy fields here.

use super::policy::{CastPolicy, E8m0Negative, E8m0Rule, E8m0Zero, Overflow};
use super::round::{Input, Rounding};

/// Encode an f32 to an E8M0 byte under `p`.
pub fn encode_e8m0_f32(x: f32, p: &CastPolicy, index: u64) -> u8 {
    encode_e8m0(Input::from_f32(x), p, index)
}

/// Encode an f64 to an E8M0 byte under `p` (through f32 first when the
/// policy says `f64_via_f32`).
pub fn encode_e8m0_f64(x: f64, p: &CastPolicy, index: u64) -> u8 {
    if p.f64_via_f32 {
        return encode_e8m0_f32(x as f32, p, index);
    }
    encode_e8m0(Input::from_f64(x), p, index)
}

pub(crate) fn encode_e8m0(input: Input, p: &CastPolicy, index: u64) -> u8 {
    match input {
        Input::Nan { .. } => 0xFF,
        Input::Zero { .. } => match p.e8m0_zero {
            E8m0Zero::Nan => 0xFF,
            E8m0Zero::Min => 0x00,
        },
        Input::Inf { negative: true } | Input::Finite { negative: true, .. }
            if p.e8m0_negative != E8m0Negative::Abs =>
        {
            match p.e8m0_negative {
                E8m0Negative::Nan => 0xFF,
                _ => 0x00,
            }
        }
        Input::Inf { .. } => match p.overflow {
            Overflow::Saturate => 0xFE,
            Overflow::NonFinite => 0xFF,
        },
        Input::Finite { sig, exp, .. } => {
            let bitlen = 64 - sig.leading_zeros() as i32;
            let e = exp + bitlen - 1; // floor(log2 x)
            let shift = (bitlen - 1) as u32;
            let rem = sig - (1u64 << shift); // x = 2^e * (1 + rem / 2^shift)
            let up = if rem == 0 {
                false
            } else if p.e8m0_rule == E8m0Rule::ImplicitBit {
                if e < -126 {
                    // (2^-127, 2^-126) -> 2^-126; below 2^-127 clamps to 0x00 below
                    e == -127
                } else {
                    rem >= (1u64 << shift) / 2
                }
            } else {
                let half = if shift == 0 { 0 } else { 1u64 << (shift - 1) };
                let cmp = rem.cmp(&half);
                use std::cmp::Ordering::*;
                match p.rounding {
                    Rounding::NearestEven => cmp == Greater || (cmp == Equal && (e + 127) & 1 != 0),
                    Rounding::NearestAway => cmp != Less,
                    Rounding::TowardZero | Rounding::Down => false,
                    Rounding::Up => true,
                    Rounding::Stochastic => {
                        let k = p.stochastic.bits;
                        let t = ((rem as u128) << k) >> shift;
                        t + p.stochastic.draw(index) as u128 >= (1u128 << k)
                    }
                }
            };
            let big_e = e + up as i32;
            if big_e < -127 {
                0x00
            } else if big_e > 127 {
                match p.overflow {
                    Overflow::Saturate => 0xFE,
                    Overflow::NonFinite if p.rounding.overflow_to_max(false) => 0xFE,
                    Overflow::NonFinite => 0xFF,
                }
            } else {
                (big_e + 127) as u8
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{CastPreset, Format};

    fn enc(preset: CastPreset, bits: u32) -> u8 {
        encode_e8m0_f32(f32::from_bits(bits), &preset.policy(Format::E8M0), 0)
    }

    #[test]
    fn research_note_edge_vectors() {
        // (input bits, ml_dtypes, torch, gfloat sat=False): outputs of the
        // oracle versions of reference/README.md on these inputs.
        let rows: &[(u32, u8, u8, u8)] = &[
            (0x3f800000, 0x7f, 0x7f, 0x7f),
            (0x3f400000, 0x7f, 0x7f, 0x7e),
            (0x3fc00000, 0x80, 0x80, 0x80),
            (0x40400000, 0x81, 0x81, 0x80),
            (0x3fbfffff, 0x7f, 0x7f, 0x7f),
            (0x00400000, 0x00, 0x00, 0x00),
            (0x00000000, 0xff, 0x00, 0xff),
            (0xbf800000, 0xff, 0x7f, 0xff),
            (0x7f000000, 0xfe, 0xfe, 0xfe),
            (0x7f400000, 0xff, 0xff, 0xfe),
            (0x7f800000, 0xff, 0xff, 0xff),
            (0x7fc00000, 0xff, 0xff, 0xff),
        ];
        for &(b, ml, t, g) in rows {
            assert_eq!(enc(CastPreset::MlDtypes, b), ml, "ml_dtypes {b:#x}");
            assert_eq!(enc(CastPreset::Torch, b), t, "torch {b:#x}");
            assert_eq!(torch_c10_rule(b), t, "c10 rule {b:#x}");
            assert_eq!(enc(CastPreset::Gfloat, b), g, "gfloat {b:#x}");
        }
        // The ml_dtypes releases part on (2^-127, 1.5 * 2^-127): (input
        // bits, ml_dtypes 0.7.0, ml_dtypes 0.6.0), from their vectors in
        // reference/vectors/cast_ml_dtypes*.tsv.gz; torch keeps 0.6's rule.
        let releases: &[(u32, u8, u8)] = &[
            (0x00400000, 0x00, 0x00),
            (0x00400001, 0x00, 0x01),
            (0x00495f7e, 0x00, 0x01),
            (0x005fffff, 0x00, 0x01),
            (0x00600000, 0x01, 0x01),
            (0x007fffff, 0x01, 0x01),
        ];
        for &(b, now, v06) in releases {
            assert_eq!(enc(CastPreset::MlDtypes, b), now, "ml_dtypes {b:#x}");
            assert_eq!(enc(CastPreset::MlDtypes06, b), v06, "ml_dtypes@0.6 {b:#x}");
            assert_eq!(enc(CastPreset::Torch, b), v06, "torch {b:#x}");
        }
        // NVIDIA round-up satfinite.
        assert_eq!(enc(CastPreset::Nvidia, 0x3f400000), 0x7f);
        assert_eq!(enc(CastPreset::Nvidia, 0x40400000), 0x81);
        assert_eq!(enc(CastPreset::Nvidia, 0x00000000), 0x00);
        assert_eq!(enc(CastPreset::Nvidia, 0x7f800000), 0xfe);
        assert_eq!(enc(CastPreset::Nvidia, 0x00400001), 0x01);
        assert_eq!(enc(CastPreset::Nvidia, 0x3f800001), 0x80);
    }

    /// c10's bit formulation, written out as torch does it: exponent field,
    /// plus one iff guard && (round || sticky || field != 0); sign ignored.
    fn torch_c10_rule(bits: u32) -> u8 {
        let exponent = (bits >> 23) & 0xFF;
        if exponent == 0xFF {
            return 0xFF;
        }
        let g = bits & 0x40_0000 != 0;
        let r = bits & 0x20_0000 != 0;
        let s = bits & 0x1F_FFFF != 0;
        (exponent + (g && (r || s || exponent > 0)) as u32) as u8
    }

    #[test]
    fn implicit_bit_rule_equals_c10_bit_rule_on_every_f32() {
        let p = CastPreset::Torch.policy(Format::E8M0);
        let bad = (0u32..=u32::MAX)
            .step_by(61)
            .chain(0..0x0100_0000)
            .filter(|&b| encode_e8m0_f32(f32::from_bits(b), &p, 0) != torch_c10_rule(b))
            .count();
        assert_eq!(bad, 0);
    }
}
