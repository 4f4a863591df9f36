//! A fast path of the reference encoder: a branchless, vectorisable encoder
//! for the most common cast, f32 to FP8 (E4M3, E5M2) with
//! round-to-nearest-even, under saturating or non-finite overflow and a
//! canonical NaN code. It gives exactly the codes of the exact encoder
//! (tests: `equals_exact_encoder`, and the exhaustive walk and the oracle
//! hashes run through the array paths that use it).
//!
//! For |x| with bits `a`: in the target's normal range the mantissa is
//! rounded on the bits (`a + 2^(22-MB) - 1 + lsb`, the carry moves into the
//! exponent); below it, one f32 addition of `c = 2^(24-BIAS-MB)`, whose ulp
//! is the target's subnormal quantum, rounds to nearest-even.

use super::elem::Format;
use super::policy::{CastPolicy, NanOut, Overflow};
use super::round::Rounding;

/// Constants of one (format, policy).
#[derive(Clone, Copy, Debug)]
pub struct Fp8Rne {
    mb: u32,
    min_normal_bits: u32,
    rebias: u32,
    c_bits: u32,
    max_mag: u32,
    /// Magnitude code of an overflow (saturate: max; else Inf or NaN).
    ovf_mag: u32,
    /// Mask applied to the input's sign bit (0x80) on an overflow code: 0x80
    /// when it carries the sign, 0 when not (a mask, not a bool, so that the
    /// vector loop has no branch).
    ovf_sign: u32,
    nan_code: u32,
    /// The same for the NaN code.
    nan_sign: u32,
}

/// The widest vector instruction set the running CPU offers to the FP8
/// loops (detected once). The loops are the same Rust code compiled for each
/// level, so every level gives the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Simd {
    Baseline,
    Avx2,
    /// AVX-512 F + BW + VL.
    Avx512,
}

impl Fp8Rne {
    /// The encoder, where it applies (E4M3/E5M2, nearest-even, canonical NaN).
    pub fn new(format: Format, p: &CastPolicy) -> Option<Fp8Rne> {
        let mf = match format {
            Format::E4M3 | Format::E5M2 => format.minifloat()?,
            _ => return None,
        };
        if p.rounding != Rounding::NearestEven {
            return None;
        }
        let (nan_code, nan_signed) = match p.nan_out {
            NanOut::Canonical(c) => (c as u32, false),
            NanOut::SignedCanonical(c) => (c as u32, true),
            _ => return None,
        };
        let (bias, mb) = (mf.bias as u32, mf.mbits);
        let (ovf_mag, ovf_signed) = match (p.overflow, mf.inf_mag()) {
            (Overflow::Saturate, _) => (mf.max_mag() as u32, true),
            (Overflow::NonFinite, Some(inf)) => (inf as u32, true),
            // no Inf: the NaN code, as the exact encoder writes it
            (Overflow::NonFinite, None) => (nan_code, nan_signed || p.signed_overflow_nan),
        };
        Some(Fp8Rne {
            mb,
            min_normal_bits: (128 - bias) << 23,
            rebias: (127 - bias) << mb,
            c_bits: (151 - bias - mb) << 23,
            max_mag: mf.max_mag() as u32,
            ovf_mag,
            ovf_sign: if ovf_signed { 0x80 } else { 0 },
            nan_code,
            nan_sign: if nan_signed { 0x80 } else { 0 },
        })
    }

    #[inline(always)]
    fn one(&self, x: f32) -> u8 {
        let b = x.to_bits();
        let sign = (b >> 24) & 0x80;
        let a = b & 0x7FFF_FFFF;
        let r = a + ((1 << (22 - self.mb)) - 1) + ((a >> (23 - self.mb)) & 1);
        let norm = (r >> (23 - self.mb)).wrapping_sub(self.rebias);
        let c = f32::from_bits(self.c_bits);
        let sub = (f32::from_bits(a) + c).to_bits().wrapping_sub(self.c_bits);
        let mag = if a < self.min_normal_bits { sub } else { norm };
        let code = if mag > self.max_mag {
            self.ovf_mag | (sign & self.ovf_sign)
        } else {
            mag | sign
        };
        let code = if a > 0x7F80_0000 {
            self.nan_code | (sign & self.nan_sign)
        } else {
            code
        };
        code as u8
    }

    #[inline(always)]
    fn run(&self, input: &[f32], scale: f32, out: &mut [u8]) {
        for (o, &x) in out.iter_mut().zip(input) {
            *o = self.one(x * scale);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(&self, input: &[f32], scale: f32, out: &mut [u8]) {
        self.run(input, scale, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn run_avx512(&self, input: &[f32], scale: f32, out: &mut [u8]) {
        self.run(input, scale, out)
    }

    /// The same loop for callers that are themselves compiled for a vector
    /// level (see [`Simd`]).
    #[inline(always)]
    pub fn encode_inline(&self, input: &[f32], scale: f32, out: &mut [u8]) {
        self.run(input, scale, out)
    }

    /// One block of `N` elements: the loop fully unrolled for a block length
    /// known at compile time.
    #[inline(always)]
    pub fn encode_array<const N: usize>(&self, input: &[f32; N], scale: f32, out: &mut [u8; N]) {
        for (o, &x) in out.iter_mut().zip(input) {
            *o = self.one(x * scale);
        }
    }

    /// The vector level of the running CPU (checked once).
    pub fn simd() -> Simd {
        #[cfg(target_arch = "x86_64")]
        return simd_x86();
        #[cfg(not(target_arch = "x86_64"))]
        Simd::Baseline
    }

    /// Encodes `input[i] * scale` (pass 1.0 for a plain cast). `scale` must
    /// be a power of two for which every product is exact or below the
    /// target's rounding threshold (MX rescaling).
    #[inline]
    pub fn encode(&self, input: &[f32], scale: f32, out: &mut [u8]) {
        let done = self.encode_at(Self::simd(), input, scale, out);
        debug_assert!(done);
    }

    /// [`Fp8Rne::encode`] with the loop compiled for `level`; returns false
    /// (writing nothing) when the running CPU lacks it. Every level gives the
    /// same bytes (tested).
    pub fn encode_at(&self, level: Simd, input: &[f32], scale: f32, out: &mut [u8]) -> bool {
        assert_eq!(input.len(), out.len());
        if !level.available() {
            return false;
        }
        match level {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU supports the features (checked above).
            Simd::Avx512 => unsafe { self.run_avx512(input, scale, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Simd::Avx2 => unsafe { self.run_avx2(input, scale, out) },
            _ => self.run(input, scale, out),
        }
        true
    }
}

impl Simd {
    pub const ALL: [Simd; 3] = [Simd::Baseline, Simd::Avx2, Simd::Avx512];

    /// Whether the running CPU can run loops compiled for this level.
    pub fn available(self) -> bool {
        match self {
            Simd::Baseline => true,
            #[cfg(target_arch = "x86_64")]
            _ => self as u8 <= simd_x86() as u8,
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn simd_x86() -> Simd {
    use std::sync::OnceLock;
    static LEVEL: OnceLock<Simd> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
        {
            Simd::Avx512
        } else if is_x86_feature_detected!("avx2") {
            Simd::Avx2
        } else {
            Simd::Baseline
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{encode_f32, CastPreset};

    /// Every f32 top half with several low halves, every preset it covers.
    #[test]
    fn equals_exact_encoder() {
        let mut n = 0;
        for f in [Format::E4M3, Format::E5M2] {
            for preset in CastPreset::ALL {
                for overflow in [Overflow::Saturate, Overflow::NonFinite] {
                    let p = CastPolicy {
                        overflow,
                        ..preset.policy(f)
                    };
                    let Some(e) = Fp8Rne::new(f, &p) else { continue };
                    let xs: Vec<f32> = (0u32..65536)
                        .flat_map(|hi| {
                            [0u32, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF].map(|lo| f32::from_bits(hi << 16 | lo))
                        })
                        .collect();
                    let want: Vec<u8> = xs.iter().map(|x| encode_f32(*x, f, &p, 0).unwrap() as u8).collect();
                    for level in Simd::ALL {
                        let mut out = vec![0u8; xs.len()];
                        if !e.encode_at(level, &xs, 1.0, &mut out) {
                            continue;
                        }
                        for ((x, c), w) in xs.iter().zip(&out).zip(&want) {
                            assert_eq!(w, c, "{f} {preset} {overflow:?} {level:?} {:#x}", x.to_bits());
                        }
                        n += 1;
                    }
                }
            }
        }
        // every covered (format, preset, overflow), at least at the baseline level
        assert!(n >= 6);
    }
}
