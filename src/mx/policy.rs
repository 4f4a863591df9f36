//! MX formats, scale modes and block policies, and the named presets.

use crate::format::{CastPolicy, Format, NanPolicy, Overflow, Rounding};
use std::fmt;
use std::str::FromStr;

/// An MX element format (the shared scale is always E8M0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum MxFormat {
    #[serde(rename = "mxfp8-e4m3")]
    Fp8E4M3,
    #[serde(rename = "mxfp8-e5m2")]
    Fp8E5M2,
    #[serde(rename = "mxfp6-e3m2")]
    Fp6E3M2,
    #[serde(rename = "mxfp6-e2m3")]
    Fp6E2M3,
    #[serde(rename = "mxfp4-e2m1")]
    Fp4E2M1,
    #[serde(rename = "mxint8")]
    Int8,
}

impl MxFormat {
    pub const ALL: [MxFormat; 6] = [
        MxFormat::Fp8E4M3,
        MxFormat::Fp8E5M2,
        MxFormat::Fp6E3M2,
        MxFormat::Fp6E2M3,
        MxFormat::Fp4E2M1,
        MxFormat::Int8,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            MxFormat::Fp8E4M3 => "mxfp8-e4m3",
            MxFormat::Fp8E5M2 => "mxfp8-e5m2",
            MxFormat::Fp6E3M2 => "mxfp6-e3m2",
            MxFormat::Fp6E2M3 => "mxfp6-e2m3",
            MxFormat::Fp4E2M1 => "mxfp4-e2m1",
            MxFormat::Int8 => "mxint8",
        }
    }

    /// The element format.
    pub const fn element(self) -> Format {
        match self {
            MxFormat::Fp8E4M3 => Format::E4M3,
            MxFormat::Fp8E5M2 => Format::E5M2,
            MxFormat::Fp6E3M2 => Format::E3M2,
            MxFormat::Fp6E2M3 => Format::E2M3,
            MxFormat::Fp4E2M1 => Format::E2M1,
            MxFormat::Int8 => Format::Int8,
        }
    }

    /// The element's largest finite value (from the format).
    pub fn max_value(self) -> f64 {
        self.element().max_value()
    }

    /// `fl32(1/max)` computed as TransformerEngine does, `(float)(1.0/max)`
    /// (an f64 division, then narrowing): the RCEIL multiplier.
    pub fn max_rcp(self) -> f32 {
        (1.0 / self.max_value()) as f32
    }

    /// Explicit mantissa bits of the element's largest binade (used by the
    /// EVEN scale mode): the format's, and 6 for MXINT8 (steps of 2^-6).
    pub const fn mbits(self) -> u32 {
        match self.element().minifloat() {
            Some(m) => m.mbits,
            None => 6,
        }
    }
}

impl fmt::Display for MxFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MxFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        MxFormat::ALL.into_iter().find(|m| m.name() == s.to_ascii_lowercase()).ok_or_else(|| {
            format!(
                "unknown MX format '{s}'; expected one of: mxfp8-e4m3, mxfp8-e5m2, mxfp6-e3m2, mxfp6-e2m3, mxfp4-e2m1, mxint8"
            )
        })
    }
}

/// How the block exponent `E` is derived from the block's largest magnitude
/// `amax` (`e = floor(log2 amax)` from the bits, `emax` = element emax).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScaleMode {
    /// OCP: `E = e - emax`. The block max may saturate.
    Floor,
    /// `E = ceil(log2 amax) - emax`.
    Ceil,
    /// torchao's EVEN: add half an element ulp to the bits of amax
    /// (`bits + 2^(22 - mbits)`), clear the mantissa, then FLOOR. If that
    /// carries amax to Inf (blocks near f32 max), the block is treated as
    /// non-finite, as torchao does.
    Even,
    /// NVIDIA (cuBLAS/TE): `s = fl32(amax * fl32(1/max_elem))`, then `s`
    /// rounded up to a power of two (exactly, including f32 subnormal `s`).
    Rceil,
}

impl ScaleMode {
    pub const ALL: [ScaleMode; 4] = [ScaleMode::Floor, ScaleMode::Ceil, ScaleMode::Even, ScaleMode::Rceil];
    pub const fn name(self) -> &'static str {
        match self {
            ScaleMode::Floor => "floor",
            ScaleMode::Ceil => "ceil",
            ScaleMode::Even => "even",
            ScaleMode::Rceil => "rceil",
        }
    }
}

impl FromStr for ScaleMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ScaleMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown scale mode '{s}'; expected floor, ceil, even or rceil"))
    }
}

/// The element codes written into a block whose scale is NaN (0xFF).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NanBlockCodes {
    /// The element format's NaN (0x7F for FP8), or 0 where it has none.
    FormatNan,
    /// What torchao writes: 0x7F for FP8; for FP6/FP4 the code of 1.5
    /// (0x0E e3m2, 0x0C e2m3, 0x03 e2m1), an artifact of its kernels.
    Torchao,
}

impl NanBlockCodes {
    pub fn code(self, format: MxFormat) -> u8 {
        match (self, format) {
            (_, MxFormat::Fp8E4M3 | MxFormat::Fp8E5M2) => 0x7F,
            (NanBlockCodes::FormatNan, _) | (_, MxFormat::Int8) => 0,
            (NanBlockCodes::Torchao, MxFormat::Fp6E3M2) => 0x0E,
            (NanBlockCodes::Torchao, MxFormat::Fp6E2M3) => 0x0C,
            (NanBlockCodes::Torchao, MxFormat::Fp4E2M1) => 0x03,
        }
    }
}

/// What a block containing Inf or NaN becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NonFiniteBlock {
    /// Scale 0xFF (NaN) and every element NaN (the element format's NaN
    /// code, or code 0 where the format has none): torchao HEAD, microxcaling.
    NanScale,
    /// TransformerEngine: amax ignores NaN (`fmaxf`); an Inf amax gives scale
    /// 0xFE; elements are rescaled and cast with the (saturating) element
    /// policy, so +-Inf become +-max and NaN stays NaN.
    Saturate,
}

/// Scale byte of an all-zero block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZeroBlock {
    /// 0x00 (2^-127): what every anchor produces.
    Min,
    /// 0x7F (1.0).
    One,
}

/// What a block exponent above 127 becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScaleOverflow {
    /// 0xFF (NaN), as torchao.
    Nan,
    /// 0xFE (2^127), as NVIDIA satfinite.
    Saturate,
}

/// Every choice of an MX quantizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct MxPolicy {
    pub scale_mode: ScaleMode,
    /// Element cast (rounding, saturation, NaN policy, INT8 -2.0).
    pub element: CastPolicy,
    pub nonfinite: NonFiniteBlock,
    pub nan_block_codes: NanBlockCodes,
    pub zero_block: ZeroBlock,
    pub scale_overflow: ScaleOverflow,
    /// Treat f32-subnormal inputs as zero (microxcaling `flush_fp32_subnorms`).
    pub flush_subnormals: bool,
}

/// Named MX presets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MxPreset {
    /// OCP MX v1.0 / Rouhani et al. Algorithm 1: FLOOR, RNE elements clamped
    /// to +-max, NaN scale for Inf/NaN blocks, MXINT8 -2.0 allowed.
    Ocp,
    /// torchao HEAD `to_mx`: FLOOR by default, RNE saturating elements,
    /// non-finite amax -> scale 0xFF and NaN data (FP6/FP4: the code of 1.5),
    /// scale overflow -> 0xFF.
    Torchao,
    /// TransformerEngine / cuBLAS: RCEIL, `cvt.rn.satfinite` elements,
    /// Inf amax -> 0xFE with saturated data, NaN ignored by amax.
    Nvidia,
    /// microxcaling (its exact C++/CUDA path): FLOOR, round half away from
    /// zero ("nearest"), NaN blocks, MXINT8 never -2.0. Its Python path's
    /// float32 `log2` hazard is not reproduced.
    Microxcaling,
}

impl MxPreset {
    pub const ALL: [MxPreset; 4] = [
        MxPreset::Ocp,
        MxPreset::Torchao,
        MxPreset::Nvidia,
        MxPreset::Microxcaling,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            MxPreset::Ocp => "ocp",
            MxPreset::Torchao => "torchao",
            MxPreset::Nvidia => "nvidia",
            MxPreset::Microxcaling => "microxcaling",
        }
    }

    pub fn policy(self, format: MxFormat) -> MxPolicy {
        let fmt = format.element();
        let mut element = CastPolicy::ieee(fmt);
        element.overflow = Overflow::Saturate;
        element.nan = NanPolicy::Zero;
        let mut p = MxPolicy {
            scale_mode: ScaleMode::Floor,
            element,
            nonfinite: NonFiniteBlock::NanScale,
            nan_block_codes: NanBlockCodes::FormatNan,
            zero_block: ZeroBlock::Min,
            scale_overflow: ScaleOverflow::Nan,
            flush_subnormals: false,
        };
        match self {
            MxPreset::Ocp => {}
            MxPreset::Torchao => p.nan_block_codes = NanBlockCodes::Torchao,
            MxPreset::Nvidia => {
                p.scale_mode = ScaleMode::Rceil;
                p.nonfinite = NonFiniteBlock::Saturate;
                p.scale_overflow = ScaleOverflow::Saturate;
                p.element = crate::format::CastPreset::Nvidia.policy(fmt);
            }
            MxPreset::Microxcaling => {
                p.element.rounding = Rounding::NearestAway;
                p.element.int8_allow_neg2 = false;
            }
        }
        p
    }
}

impl fmt::Display for MxPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MxPreset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        MxPreset::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown MX preset '{s}'; expected ocp, torchao, nvidia or microxcaling"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_parameters_are_the_ocp_values() {
        // OCP MX v1.0, Tables 2-4: largest normal values and mantissa bits
        let spec = [
            (MxFormat::Fp8E4M3, 448.0, 3),
            (MxFormat::Fp8E5M2, 57344.0, 2),
            (MxFormat::Fp6E3M2, 28.0, 2),
            (MxFormat::Fp6E2M3, 7.5, 3),
            (MxFormat::Fp4E2M1, 6.0, 1),
            (MxFormat::Int8, 127.0 / 64.0, 6),
        ];
        assert_eq!(spec.len(), MxFormat::ALL.len());
        for (f, max, mbits) in spec {
            assert_eq!(f.max_value(), max, "{f}");
            assert_eq!(f.max_rcp(), (1.0f64 / max) as f32, "{f}");
            assert_eq!(f.mbits(), mbits, "{f}");
        }
    }
}
