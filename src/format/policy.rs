//! Cast policies: every choice that determines the code a value is cast to.
//! The named presets that fill them in are in `preset`.

use super::elem::Format;
use super::round::{Rounding, Stochastic};
use std::str::FromStr;

/// Conversion rule to E8M0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum E8m0Rule {
    /// Round the exact value to a power of two under the policy's rounding
    /// mode (nearest modes compare with the midpoint 1.5 * 2^e in value;
    /// nearest-even ties go to the even byte). Values below 2^-127 become
    /// byte 0x00; results above 2^127 follow the overflow policy. With
    /// nearest-away, the rule of the `ml_dtypes` preset.
    Value,
    /// Rounding "on the implicit bit", as torch (c10
    /// `fp8e8m0fnu_from_fp32_value`) and the `ml_dtypes@0.6` preset do it:
    /// for |x| >= 2^-126 nearest with ties up (the implicit bit is the
    /// LSB); below 2^-126 (where f32 has no implicit bit) values up to
    /// 2^-127 give 0x00 and values above it 0x01. The policy's rounding
    /// mode must be nearest-away.
    ImplicitBit,
}

/// What +-0 becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum E8m0Zero {
    /// NaN (0xFF), as ml_dtypes and gfloat.
    Nan,
    /// The smallest scale 2^-127 (0x00), as NVIDIA round-up/satfinite.
    Min,
}

/// What a negative input (including -Inf) becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum E8m0Negative {
    /// NaN (0xFF), as ml_dtypes and gfloat.
    Nan,
    /// Convert |x| (the sign bit is ignored), as torch.
    Abs,
    /// 0x00: the smallest value >= x, as round-up with satfinite gives.
    Min,
}

/// What a finite value beyond the largest finite code (or an infinite input)
/// becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Overflow {
    /// Clamp to +-max finite ("satfinite"); +-Inf inputs also become +-max.
    Saturate,
    /// IEEE: Inf where the format has it, else NaN; for formats with neither
    /// the cast fails. Directed roundings toward zero give +-max (IEEE 754 §7.4).
    NonFinite,
}

impl FromStr for Overflow {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "saturate" => Ok(Overflow::Saturate),
            "nonfinite" => Ok(Overflow::NonFinite),
            _ => Err(format!("unknown overflow policy '{s}'; expected saturate or nonfinite")),
        }
    }
}

/// What a NaN input becomes in a format that has no NaN (FP6, FP4, INT8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NanPolicy {
    /// The cast fails with an error naming the element (gfloat raises).
    Error,
    /// -0 (ml_dtypes: its `quiet_NaN()` for these types is -0).
    NegZero,
    /// +max finite (NVIDIA `__nv_cvt_*_to_fp4/fp6` with satfinite).
    PosMax,
    /// +0.
    Zero,
    /// -0 with the input's sign bit xor-ed in: +NaN -> -0, -NaN -> +0
    /// (ml_dtypes: its NaN for these types is -0, and the sign is applied on top).
    FlipSignZero,
}

impl FromStr for NanPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "error" => Ok(NanPolicy::Error),
            "neg-zero" => Ok(NanPolicy::NegZero),
            "pos-max" => Ok(NanPolicy::PosMax),
            "zero" => Ok(NanPolicy::Zero),
            "flip-sign-zero" => Ok(NanPolicy::FlipSignZero),
            _ => Err(format!(
                "unknown NaN policy '{s}'; expected error, neg-zero, pos-max, zero or flip-sign-zero"
            )),
        }
    }
}

/// Which NaN code a NaN input becomes in a format that has NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NanOut {
    /// Always this exact code, whatever the input's sign.
    Canonical(u16),
    /// The input's sign with this magnitude code.
    SignedCanonical(u16),
    /// IEEE narrowing as numpy does it: sign kept, top payload bits kept, a
    /// payload that truncates to zero becomes 1.
    TruncatePayload,
    /// sign kept, quiet bit set, top payload bits kept (c10's f32 -> f16).
    QuietPayload,
}

/// Every choice that determines the code a value is cast to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CastPolicy {
    pub rounding: Rounding,
    /// Used only when `rounding` is `Stochastic`.
    pub stochastic: Stochastic,
    pub overflow: Overflow,
    /// NaN input for formats without NaN.
    pub nan: NanPolicy,
    /// NaN input for formats with NaN.
    pub nan_out: NanOut,
    /// Formats without Inf under `Overflow::NonFinite`: the NaN an overflow
    /// produces carries the sign of the input (NVIDIA's non-saturating
    /// E4M3: -500 -> 0xFF while a NaN input -> 0x7F).
    #[serde(default)]
    pub signed_overflow_nan: bool,
    /// E8M0 only: the conversion rule.
    pub e8m0_rule: E8m0Rule,
    /// E8M0 only: what +-0 becomes.
    pub e8m0_zero: E8m0Zero,
    /// E8M0 only: what a negative input becomes.
    pub e8m0_negative: E8m0Negative,
    /// MX INT8 only: whether -2.0 (code 0x80) may be produced.
    pub int8_allow_neg2: bool,
    /// f64 inputs are first narrowed to f32 (nearest-even), then cast: the
    /// double rounding of numpy `astype` and torch `.to()` from float64.
    pub f64_via_f32: bool,
}

impl CastPolicy {
    /// Plain IEEE-style defaults: nearest-even, non-finite overflow, errors
    /// for unrepresentable NaN, E8M0 zero/negative -> NaN.
    pub const fn ieee(format: Format) -> CastPolicy {
        CastPolicy {
            rounding: Rounding::NearestEven,
            stochastic: Stochastic { seed: 0, bits: 16 },
            overflow: Overflow::NonFinite,
            nan: NanPolicy::Error,
            nan_out: default_nan_out(format),
            signed_overflow_nan: false,
            e8m0_rule: E8m0Rule::Value,
            e8m0_zero: E8m0Zero::Nan,
            e8m0_negative: E8m0Negative::Nan,
            int8_allow_neg2: true,
            f64_via_f32: false,
        }
    }

    /// Checks the policy against the format; rejects combinations that cannot
    /// be honoured instead of approximating them.
    pub fn validate(&self, format: Format) -> Result<(), String> {
        if self.rounding == Rounding::Stochastic && !(1..=32).contains(&self.stochastic.bits) {
            return Err(format!(
                "stochastic rounding needs 1..=32 random bits, got {}",
                self.stochastic.bits
            ));
        }
        if self.e8m0_rule == E8m0Rule::ImplicitBit && format == Format::E8M0 && self.rounding != Rounding::NearestAway {
            return Err("this preset's E8M0 rule rounds to nearest with ties up (on the implicit bit); use --round nearest-away, or --preset ml_dtypes/nvidia/gfloat for other modes".into());
        }
        if format == Format::Int8 && self.nan == NanPolicy::NegZero {
            return Err("int8 has no -0; choose a NaN policy of error, zero or pos-max".into());
        }
        Ok(())
    }
}

/// The positive canonical quiet NaN of a format, sign taken from the input.
pub const fn default_nan_out(format: Format) -> NanOut {
    match format {
        Format::E4M3 => NanOut::SignedCanonical(0x7F),
        Format::E5M2 => NanOut::SignedCanonical(0x7E),
        Format::BF16 => NanOut::SignedCanonical(0x7FC0),
        Format::F16 => NanOut::SignedCanonical(0x7E00),
        Format::E8M0 => NanOut::Canonical(0xFF),
        _ => NanOut::Canonical(0),
    }
}
