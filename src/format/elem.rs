//! The element-type vocabulary: every format mxbi encodes ([`Format`]), and
//! the parameters of the sign-magnitude ones ([`MiniFloat`]), each derived
//! from three inputs. A leaf: it imports nothing from the crate.

use super::pow2::{e8m0_exponent, pow2};
use std::fmt;
use std::str::FromStr;

/// One element format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// OCP FP8 E4M3 ("e4m3fn"): bias 7, max 448, NaN = S.1111.111, no Inf.
    E4M3,
    /// OCP FP8 E5M2: bias 15, max 57344, IEEE-like Inf and NaN.
    E5M2,
    /// OCP FP6 E3M2: bias 3, max 28, no Inf/NaN.
    E3M2,
    /// OCP FP6 E2M3: bias 1, max 7.5, no Inf/NaN.
    E2M3,
    /// OCP FP4 E2M1: bias 1, max 6, no Inf/NaN.
    E2M1,
    /// MX INT8: two's complement integer times 2^-6 (range [-2, 127/64]).
    Int8,
    /// E8M0 scale: unsigned, bias 127, 0xFF = NaN, no zero, no Inf.
    E8M0,
    /// bfloat16.
    BF16,
    /// IEEE binary16.
    F16,
}

/// How a minifloat encodes its specials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    /// No Inf, no NaN: every code is a finite number.
    None,
    /// Only S.111..1.111..1 is NaN (OCP E4M3 "fn").
    NanOnlyAllOnes,
    /// IEEE: all-ones exponent is Inf (zero mantissa) or NaN.
    Ieee,
}

/// Parameters of a sign-magnitude binary floating-point format with subnormals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MiniFloat {
    pub ebits: u32,
    pub mbits: u32,
    pub bias: i32,
    pub specials: Specials,
}

impl MiniFloat {
    /// The format with `ebits` exponent bits, `mbits` mantissa bits and
    /// `specials`; the bias is the IEEE one, 2^(ebits-1) - 1.
    pub const fn new(ebits: u32, mbits: u32, specials: Specials) -> MiniFloat {
        MiniFloat {
            ebits,
            mbits,
            bias: (1 << (ebits - 1)) - 1,
            specials,
        }
    }
    /// Exponent of the smallest normal number.
    pub const fn emin(&self) -> i32 {
        1 - self.bias
    }
    /// Total bits of a code (sign included).
    pub const fn bits(&self) -> u32 {
        1 + self.ebits + self.mbits
    }
    pub const fn sign_mask(&self) -> u16 {
        1 << (self.ebits + self.mbits)
    }
    /// Magnitude code of the largest finite value.
    pub const fn max_mag(&self) -> u16 {
        let all = (1u16 << (self.ebits + self.mbits)) - 1;
        match self.specials {
            Specials::None => all,
            Specials::NanOnlyAllOnes => all - 1,
            Specials::Ieee => all - (1 << self.mbits) as u16,
        }
    }
    /// Exponent of the largest finite value.
    pub const fn emax(&self) -> i32 {
        ((self.max_mag() >> self.mbits) as i32) - self.bias
    }
    /// Magnitude code of +Inf, if the format has one.
    pub const fn inf_mag(&self) -> Option<u16> {
        match self.specials {
            Specials::Ieee => Some(self.max_mag() + 1),
            _ => None,
        }
    }
    /// Canonical positive quiet NaN magnitude code, if the format has NaN.
    pub const fn nan_mag(&self) -> Option<u16> {
        match self.specials {
            Specials::None => None,
            Specials::NanOnlyAllOnes => Some((1u16 << (self.ebits + self.mbits)) - 1),
            // quiet NaN: top mantissa bit set.
            Specials::Ieee => Some(self.max_mag() + 1 + (1 << (self.mbits - 1))),
        }
    }
    pub const fn has_nan(&self) -> bool {
        !matches!(self.specials, Specials::None)
    }
    pub fn is_nan_code(&self, code: u16) -> bool {
        let mag = code & (self.sign_mask() - 1);
        match self.specials {
            Specials::None => false,
            Specials::NanOnlyAllOnes => mag == self.sign_mask() - 1,
            Specials::Ieee => mag > self.max_mag() + 1,
        }
    }
    pub fn is_inf_code(&self, code: u16) -> bool {
        Some(code & (self.sign_mask() - 1)) == self.inf_mag()
    }
    /// Exact value of a code as (sign, integer significand, exponent):
    /// |v| = sig * 2^exp. `None` for Inf/NaN codes.
    pub fn decode_parts(&self, code: u16) -> Option<(bool, u32, i32)> {
        if self.is_nan_code(code) || self.is_inf_code(code) {
            return None;
        }
        let sign = code & self.sign_mask() != 0;
        let mag = (code & (self.sign_mask() - 1)) as u32;
        let e_field = mag >> self.mbits;
        let m = mag & ((1 << self.mbits) - 1);
        let q = self.emin() - self.mbits as i32; // exponent of the subnormal quantum
        if e_field == 0 {
            Some((sign, m, q))
        } else {
            Some((sign, m | (1 << self.mbits), q + e_field as i32 - 1))
        }
    }
}

// Every minifloat's parameters, derived from three inputs (exponent bits,
// mantissa bits, how specials are encoded): the bias is 2^(ebits-1) - 1 for
// all of them, and emin, emax, max, Inf and NaN codes follow in
// `MiniFloat`'s methods. This table is the only place they are stated.
pub const E4M3: MiniFloat = MiniFloat::new(4, 3, Specials::NanOnlyAllOnes);
pub const E5M2: MiniFloat = MiniFloat::new(5, 2, Specials::Ieee);
pub const E3M2: MiniFloat = MiniFloat::new(3, 2, Specials::None);
pub const E2M3: MiniFloat = MiniFloat::new(2, 3, Specials::None);
pub const E2M1: MiniFloat = MiniFloat::new(2, 1, Specials::None);
pub const BF16: MiniFloat = MiniFloat::new(8, 7, Specials::Ieee);
pub const F16: MiniFloat = MiniFloat::new(5, 10, Specials::Ieee);

impl Format {
    pub const ALL: [Format; 9] = [
        Format::E4M3,
        Format::E5M2,
        Format::E3M2,
        Format::E2M3,
        Format::E2M1,
        Format::Int8,
        Format::E8M0,
        Format::BF16,
        Format::F16,
    ];

    /// Canonical CLI name.
    pub const fn name(self) -> &'static str {
        match self {
            Format::E4M3 => "e4m3",
            Format::E5M2 => "e5m2",
            Format::E3M2 => "e3m2",
            Format::E2M3 => "e2m3",
            Format::E2M1 => "e2m1",
            Format::Int8 => "int8",
            Format::E8M0 => "e8m0",
            Format::BF16 => "bf16",
            Format::F16 => "f16",
        }
    }

    /// The sign-magnitude float parameters, for formats that have them.
    pub const fn minifloat(self) -> Option<MiniFloat> {
        match self {
            Format::E4M3 => Some(E4M3),
            Format::E5M2 => Some(E5M2),
            Format::E3M2 => Some(E3M2),
            Format::E2M3 => Some(E2M3),
            Format::E2M1 => Some(E2M1),
            Format::BF16 => Some(BF16),
            Format::F16 => Some(F16),
            Format::Int8 | Format::E8M0 => None,
        }
    }

    /// Number of bits in a code.
    pub const fn bits(self) -> u32 {
        match self {
            Format::E4M3 | Format::E5M2 | Format::Int8 | Format::E8M0 => 8,
            Format::E3M2 | Format::E2M3 => 6,
            Format::E2M1 => 4,
            Format::BF16 | Format::F16 => 16,
        }
    }

    /// Number of distinct codes.
    pub const fn code_count(self) -> u32 {
        1 << self.bits()
    }

    /// Largest finite value.
    pub fn max_value(self) -> f64 {
        match self {
            Format::Int8 => 127.0 / 64.0,
            Format::E8M0 => 2f64.powi(127),
            _ => self.decode_f64(self.minifloat().unwrap().max_mag()),
        }
    }

    /// Exponent of the largest normal value (OCP `emax_elem`).
    pub fn emax(self) -> i32 {
        match self {
            Format::Int8 => 0,
            Format::E8M0 => 127,
            _ => self.minifloat().unwrap().emax(),
        }
    }

    /// Whether the format can encode NaN.
    pub fn has_nan(self) -> bool {
        match self {
            Format::Int8 => false,
            Format::E8M0 => true,
            _ => self.minifloat().unwrap().has_nan(),
        }
    }

    /// Whether the format can encode Inf.
    pub fn has_inf(self) -> bool {
        self.minifloat().is_some_and(|m| m.inf_mag().is_some())
    }

    /// Whether the code is a NaN.
    pub fn is_nan_code(self, code: u16) -> bool {
        match self {
            Format::Int8 => false,
            Format::E8M0 => code & 0xFF == 0xFF,
            _ => self.minifloat().unwrap().is_nan_code(code),
        }
    }

    /// Exact value of a code as f64 (always exact). Codes wider than the
    /// format's bit width are masked.
    pub fn decode_f64(self, code: u16) -> f64 {
        let code = code & ((self.code_count() - 1) as u16);
        match self {
            Format::Int8 => (code as u8 as i8) as f64 / 64.0,
            Format::E8M0 => {
                if code == 0xFF {
                    f64::NAN
                } else {
                    pow2(e8m0_exponent(code as u8))
                }
            }
            _ => {
                let mf = self.minifloat().unwrap();
                if mf.is_nan_code(code) {
                    return if code & mf.sign_mask() != 0 {
                        -f64::NAN
                    } else {
                        f64::NAN
                    };
                }
                if mf.is_inf_code(code) {
                    return if code & mf.sign_mask() != 0 {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    };
                }
                let (s, sig, e) = mf.decode_parts(code).unwrap();
                let v = sig as f64 * 2f64.powi(e);
                if s {
                    -v
                } else {
                    v
                }
            }
        }
    }

    /// Exact value of a code as f32 (every code of every format is exactly
    /// representable in f32). NaN codes give a quiet NaN with the code's sign;
    /// bf16/f16 NaN payloads are preserved as the hardware widening does.
    pub fn decode_f32(self, code: u16) -> f32 {
        match self {
            Format::BF16 => f32::from_bits((code as u32) << 16),
            Format::F16 => half::f16::from_bits(code).to_f32(),
            Format::E8M0 => {
                if code & 0xFF == 0xFF {
                    f32::NAN
                } else if code & 0xFF == 0 {
                    f32::from_bits(0x0040_0000)
                } else {
                    f32::from_bits(((code & 0xFF) as u32) << 23)
                }
            }
            _ => self.decode_f64(code) as f32,
        }
    }

    /// All codes of the format with their exact values, in code order.
    pub fn value_table(self) -> Vec<(u16, f64)> {
        (0..self.code_count())
            .map(|c| (c as u16, self.decode_f64(c as u16)))
            .collect()
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error for an unknown format name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown element format '{0}'; expected one of: e4m3, e5m2, e3m2, e2m3, e2m1, int8, e8m0, bf16, f16")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "e4m3" | "fp8-e4m3" | "e4m3fn" | "float8_e4m3fn" => Format::E4M3,
            "e5m2" | "fp8-e5m2" | "float8_e5m2" => Format::E5M2,
            "e3m2" | "fp6-e3m2" | "float6_e3m2fn" => Format::E3M2,
            "e2m3" | "fp6-e2m3" | "float6_e2m3fn" => Format::E2M3,
            "e2m1" | "fp4-e2m1" | "float4_e2m1fn" => Format::E2M1,
            "int8" | "mxint8" => Format::Int8,
            "e8m0" | "float8_e8m0fnu" | "ue8m0" => Format::E8M0,
            "bf16" | "bfloat16" => Format::BF16,
            "f16" | "fp16" | "float16" | "half" => Format::F16,
            _ => return Err(UnknownFormat(s.to_string())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived biases and exponent ranges are the published ones (OCP
    /// OFP8 and MX v1.0, IEEE 754 binary16/binary32, bfloat16).
    #[test]
    fn derived_parameters() {
        let table = [
            (E4M3, 7, -6, 8),
            (E5M2, 15, -14, 15),
            (E3M2, 3, -2, 4),
            (E2M3, 1, 0, 2),
            (E2M1, 1, 0, 2),
            (BF16, 127, -126, 127),
            (F16, 15, -14, 15),
        ];
        for (m, bias, emin, emax) in table {
            assert_eq!((m.bias, m.emin(), m.emax()), (bias, emin, emax), "{m:?}");
        }
    }

    #[test]
    fn format_constants() {
        assert_eq!(Format::E4M3.max_value(), 448.0);
        assert_eq!(Format::E5M2.max_value(), 57344.0);
        assert_eq!(Format::E3M2.max_value(), 28.0);
        assert_eq!(Format::E2M3.max_value(), 7.5);
        assert_eq!(Format::E2M1.max_value(), 6.0);
        assert_eq!(Format::BF16.max_value(), f32::from_bits(0x7F7F_0000) as f64);
        assert_eq!(Format::F16.max_value(), 65504.0);
        assert_eq!(
            [
                Format::E4M3,
                Format::E5M2,
                Format::E3M2,
                Format::E2M3,
                Format::E2M1,
                Format::Int8
            ]
            .map(|f| f.emax()),
            [8, 15, 4, 2, 2, 0]
        );
        assert_eq!(Format::E4M3.decode_f64(0x01), 2f64.powi(-9));
        assert_eq!(Format::E5M2.decode_f64(0x01), 2f64.powi(-16));
        assert!(Format::E4M3.decode_f64(0x7F).is_nan());
        assert!(Format::E4M3.decode_f64(0xFF).is_nan());
        assert_eq!(Format::E5M2.decode_f64(0x7C), f64::INFINITY);
        assert_eq!(Format::E5M2.decode_f64(0xFC), f64::NEG_INFINITY);
        assert!(Format::E5M2.decode_f64(0x7D).is_nan());
        assert_eq!(Format::E8M0.decode_f32(0).to_bits(), 0x0040_0000);
        assert_eq!(Format::E8M0.decode_f32(0xFE), 2f32.powi(127));
        assert_eq!(Format::Int8.decode_f64(0x80), -2.0);
        assert_eq!(Format::Int8.decode_f64(0x7F), 127.0 / 64.0);
        assert_eq!(Format::E2M1.decode_f64(0x8), -0.0);
        assert!(Format::E2M1.decode_f64(0x8).is_sign_negative());
    }

    #[test]
    fn decode_f32_matches_f64_for_every_code() {
        for f in Format::ALL {
            for (c, v) in f.value_table() {
                let d = f.decode_f32(c);
                if v.is_nan() {
                    assert!(d.is_nan(), "{f} {c:#x}");
                } else {
                    assert_eq!(d as f64, v, "{f} {c:#x}");
                    assert_eq!(d.is_sign_negative(), v.is_sign_negative(), "{f} {c:#x}");
                }
            }
        }
    }
}
