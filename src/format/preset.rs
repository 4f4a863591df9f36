//! The named cast presets. Each reproduces how one release of a library (or
//! of the toolkit whose GPU conversions were measured) casts, and names that
//! release.
//!
//! A preset is spelled `FAMILY` or `FAMILY@MAJOR.MINOR` (the full version is
//! accepted too): the bare family name is the newest release mxbi tracks for
//! that family, a versioned spelling one release (`ml_dtypes` is
//! `ml_dtypes@0.7`; `ml_dtypes@0.6` keeps the rule its release had).
//! [`CastPreset::release`] is the one place each version is stated; the
//! spellings and the error message listing them are derived from it.

use super::elem::Format;
use super::policy::{default_nan_out, CastPolicy, E8m0Negative, E8m0Rule, E8m0Zero, NanOut, NanPolicy, Overflow};
use super::round::Rounding;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// A release whose casts a preset reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    /// What was released: the Python distribution (`ml_dtypes`, `torch`,
    /// `gfloat`), or `CUDA` for the conversions measured on a GPU.
    pub library: &'static str,
    /// Its version, dot-separated numbers, as the distribution's metadata
    /// gives it (without a local build label such as torch's `+cu132`).
    pub version: &'static str,
}

impl Release {
    /// The version's first two components (`0.6.0` -> `0.6`): what a
    /// versioned preset spelling names.
    pub fn short_version(&self) -> &'static str {
        match self.version.match_indices('.').nth(1) {
            Some((i, _)) => &self.version[..i],
            None => self.version,
        }
    }

    /// The version's numbers, for ordering releases of one library.
    fn numbers(&self) -> Vec<u64> {
        self.version
            .split('.')
            .map(|c| c.parse().expect("a release version is dot-separated numbers"))
            .collect()
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.library, self.version)
    }
}

/// Named presets: each sets every policy the way that release casts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum CastPreset {
    /// ml_dtypes numpy `astype` (and its scalar constructors, which agree),
    /// its current release: non-saturating RNE; E4M3 overflow/Inf -> NaN;
    /// FP6/FP4 overflow/Inf -> max and NaN -> -0 (sign flipped by the NaN's
    /// sign); E8M0 the nearest power of two with ties up, on every positive
    /// finite input (f32 subnormals included: (2^-127, 1.5 * 2^-127) ->
    /// 0x00), zero/negative/overflow -> NaN; f16 (numpy's own type) NaN
    /// payloads truncated as numpy; f64 inputs rounded once.
    MlDtypes,
    /// ml_dtypes' release before the current one, `astype`: as
    /// [`CastPreset::MlDtypes`] except that E8M0 rounds on the implicit bit,
    /// which f32 subnormals lack ((2^-127, 2^-126) -> 0x01), and that f64
    /// inputs go through f32 first (rounding twice), except for f16, which
    /// numpy rounds once (`npy_doublebits_to_halfbits`).
    MlDtypes06,
    /// NVIDIA PTX `cvt.rn.satfinite` for FP8/FP6/FP4 (NaN -> 0x7F for FP8,
    /// NaN -> +max for FP6/FP4), `cvt.rp.satfinite.ue8m0x2.f32` for E8M0,
    /// `cvt.rn.bf16/f16.f32` (non-saturating) for bf16/f16.
    Nvidia,
    /// torch eager `.to()`: E4M3 saturates (also Inf), E5M2 does not; FP8 NaN
    /// -> 0x7F with the sign; bf16 NaN -> 0xFFFF (1-d tensors); f16 NaN
    /// quieted with its top payload bits; E8M0 via c10's bit rule (exponent
    /// field, round on guard/round/sticky with the implicit bit as LSB, sign
    /// ignored, zero -> 0x00, Inf/NaN -> 0xFF); f64 inputs go through f32
    /// first.
    Torch,
    /// gfloat `round_float(..., TiesToEven, sat=False)`: E8M0 ties to even;
    /// every NaN it produces is all-ones (0xFF, 0xFFFF); NaN into a format
    /// without NaN, or overflow where there is no Inf/NaN, raises. Its E8M0
    /// underflow bug (values below 2^-127 -> NaN) is not reproduced.
    Gfloat,
}

impl CastPreset {
    pub const ALL: [CastPreset; 5] = [
        CastPreset::MlDtypes,
        CastPreset::MlDtypes06,
        CastPreset::Nvidia,
        CastPreset::Torch,
        CastPreset::Gfloat,
    ];

    /// The release this preset reproduces: checked against that release's
    /// own outputs (reference/README.md), or, for `nvidia`, measured on an
    /// H200 (sm_90) with that CUDA (docs/DEVICE.md).
    pub const fn release(self) -> Release {
        let (library, version) = match self {
            CastPreset::MlDtypes => ("ml_dtypes", "0.7.0"),
            CastPreset::MlDtypes06 => ("ml_dtypes", "0.6.0"),
            CastPreset::Nvidia => ("CUDA", "13.0"),
            CastPreset::Torch => ("torch", "2.15.0"),
            CastPreset::Gfloat => ("gfloat", "0.5.2"),
        };
        Release { library, version }
    }

    /// The spelling without a version: the implementation whose casts the
    /// preset reproduces.
    pub const fn family(self) -> &'static str {
        match self {
            CastPreset::MlDtypes | CastPreset::MlDtypes06 => "ml_dtypes",
            CastPreset::Nvidia => "nvidia",
            CastPreset::Torch => "torch",
            CastPreset::Gfloat => "gfloat",
        }
    }

    /// Whether this is the newest release of its family that mxbi tracks:
    /// the one the bare family name spells.
    pub fn is_newest(self) -> bool {
        let own = self.release().numbers();
        CastPreset::ALL
            .iter()
            .filter(|q| q.family() == self.family())
            .all(|q| q.release().numbers() <= own)
    }

    /// The versioned spelling, `FAMILY@MAJOR.MINOR`.
    pub fn versioned_name(self) -> String {
        format!("{}@{}", self.family(), self.release().short_version())
    }

    /// The canonical spelling: the family name for the newest release, the
    /// versioned spelling for an older one.
    pub fn name(self) -> &'static str {
        static NAMES: OnceLock<Vec<String>> = OnceLock::new();
        let names = NAMES.get_or_init(|| {
            CastPreset::ALL
                .iter()
                .map(|p| {
                    if p.is_newest() {
                        p.family().to_string()
                    } else {
                        p.versioned_name()
                    }
                })
                .collect()
        });
        let i = CastPreset::ALL
            .iter()
            .position(|&p| p == self)
            .expect("ALL lists every preset");
        &names[i]
    }

    /// Every accepted spelling with the release it names, one entry per
    /// preset: `ml_dtypes or ml_dtypes@0.7 (ml_dtypes 0.7.0)`.
    pub fn spellings() -> Vec<String> {
        CastPreset::ALL
            .iter()
            .map(|p| {
                if p.is_newest() {
                    format!("{} or {} ({})", p.name(), p.versioned_name(), p.release())
                } else {
                    format!("{} ({})", p.name(), p.release())
                }
            })
            .collect()
    }

    /// The full policy this implementation uses for `format`.
    pub fn policy(self, format: Format) -> CastPolicy {
        let mut p = CastPolicy::ieee(format);
        match self {
            CastPreset::MlDtypes | CastPreset::MlDtypes06 => {
                match format {
                    Format::E3M2 | Format::E2M3 | Format::E2M1 => {
                        p.overflow = Overflow::Saturate;
                        p.nan = NanPolicy::FlipSignZero;
                    }
                    Format::E8M0 => {
                        p.rounding = Rounding::NearestAway;
                        if self == CastPreset::MlDtypes06 {
                            p.e8m0_rule = E8m0Rule::ImplicitBit;
                        }
                    }
                    Format::F16 => p.nan_out = NanOut::TruncatePayload,
                    _ => {}
                }
                p.f64_via_f32 = self == CastPreset::MlDtypes06 && format != Format::F16;
                p.e8m0_zero = E8m0Zero::Nan;
                p.e8m0_negative = E8m0Negative::Nan;
            }
            CastPreset::Nvidia => {
                p.overflow = match format {
                    Format::BF16 | Format::F16 => Overflow::NonFinite,
                    _ => Overflow::Saturate,
                };
                p.nan = NanPolicy::PosMax;
                p.nan_out = match format {
                    Format::E4M3 | Format::E5M2 => NanOut::Canonical(0x7F),
                    Format::BF16 => NanOut::Canonical(0x7FFF),
                    Format::F16 => NanOut::Canonical(0x7FFF),
                    f => default_nan_out(f),
                };
                if format == Format::E8M0 {
                    p.rounding = Rounding::Up;
                }
                // Measured on an H200 (CUDA 13.0 headers, all 2^32 inputs,
                // docs/DEVICE.md): the non-saturating E4M3 conversion gives
                // an overflow NaN with the input's sign, and the E8M0
                // conversion (software on sm_90) converts |x|.
                p.signed_overflow_nan = true;
                p.e8m0_zero = E8m0Zero::Min;
                p.e8m0_negative = E8m0Negative::Abs;
            }
            CastPreset::Torch => {
                p.overflow = match format {
                    Format::E4M3 => Overflow::Saturate,
                    _ => Overflow::NonFinite,
                };
                p.nan_out = match format {
                    Format::E4M3 | Format::E5M2 => NanOut::SignedCanonical(0x7F),
                    Format::BF16 => NanOut::Canonical(0xFFFF),
                    Format::F16 => NanOut::QuietPayload,
                    f => default_nan_out(f),
                };
                if format == Format::E8M0 {
                    p.rounding = Rounding::NearestAway;
                }
                p.e8m0_rule = E8m0Rule::ImplicitBit;
                p.e8m0_zero = E8m0Zero::Min;
                p.e8m0_negative = E8m0Negative::Abs;
                p.f64_via_f32 = true;
            }
            CastPreset::Gfloat => {
                p.nan = NanPolicy::Error;
                p.nan_out = match format {
                    Format::E4M3 | Format::E5M2 => NanOut::Canonical(0xFF),
                    Format::BF16 | Format::F16 => NanOut::Canonical(0xFFFF),
                    f => default_nan_out(f),
                };
            }
        }
        p
    }
}

impl fmt::Display for CastPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CastPreset {
    type Err = String;
    /// `FAMILY` (the newest release), `FAMILY@MAJOR.MINOR` or
    /// `FAMILY@VERSION`; `-` may stand for `_` in the family name.
    fn from_str(s: &str) -> Result<Self, String> {
        let (family, version) = match s.split_once('@') {
            Some((f, v)) => (f, Some(v)),
            None => (s, None),
        };
        let family = family.replace('-', "_");
        CastPreset::ALL
            .into_iter()
            .filter(|p| p.family() == family)
            .find(|p| match version {
                None => p.is_newest(),
                Some(v) => v == p.release().short_version() || v == p.release().version,
            })
            .ok_or_else(|| {
                format!(
                    "unknown cast preset '{s}'; expected {}",
                    CastPreset::spellings().join(", ")
                )
            })
    }
}

impl From<CastPreset> for String {
    fn from(p: CastPreset) -> String {
        p.name().to_string()
    }
}

impl TryFrom<String> for CastPreset {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_names_one_preset() {
        for p in CastPreset::ALL {
            assert_eq!(p.name().parse::<CastPreset>(), Ok(p), "{}", p.name());
            assert_eq!(p.versioned_name().parse::<CastPreset>(), Ok(p));
            let full = format!("{}@{}", p.family(), p.release().version);
            assert_eq!(full.parse::<CastPreset>(), Ok(p));
            // what messages and reports print is the spelling that parses back
            assert_eq!(p.to_string(), p.name());
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.name()));
            assert_eq!(serde_json::from_str::<CastPreset>(&json).unwrap(), p);
        }
        // one newest release per family
        for p in CastPreset::ALL {
            let newest = CastPreset::ALL
                .iter()
                .filter(|q| q.family() == p.family() && q.is_newest())
                .count();
            assert_eq!(newest, 1, "{}", p.family());
        }
    }

    #[test]
    fn spellings_name_their_release() {
        let want = [
            ("ml_dtypes", CastPreset::MlDtypes),
            ("ml-dtypes", CastPreset::MlDtypes),
            ("ml_dtypes@0.7", CastPreset::MlDtypes),
            ("ml_dtypes@0.7.0", CastPreset::MlDtypes),
            ("ml_dtypes@0.6", CastPreset::MlDtypes06),
            ("ml-dtypes@0.6", CastPreset::MlDtypes06),
            ("nvidia", CastPreset::Nvidia),
            ("torch", CastPreset::Torch),
            ("gfloat", CastPreset::Gfloat),
        ];
        for (s, p) in want {
            assert_eq!(s.parse::<CastPreset>(), Ok(p), "{s}");
        }
        assert_eq!(CastPreset::MlDtypes.name(), "ml_dtypes");
        assert_eq!(CastPreset::MlDtypes06.name(), "ml_dtypes@0.6");
        for bad in [
            "ml_dtypes@0.5",
            "ml_dtypes@",
            "ml_dtypes@0",
            "cublas",
            "torch@2.14",
            "@0.6",
        ] {
            let e = bad.parse::<CastPreset>().unwrap_err();
            assert_eq!(
                e,
                format!(
                    "unknown cast preset '{bad}'; expected ml_dtypes or ml_dtypes@0.7 (ml_dtypes 0.7.0), \
                     ml_dtypes@0.6 (ml_dtypes 0.6.0), nvidia or nvidia@13.0 (CUDA 13.0), \
                     torch or torch@2.15 (torch 2.15.0), gfloat or gfloat@0.5 (gfloat 0.5.2)"
                )
            );
        }
    }

    #[test]
    fn the_two_ml_dtypes_releases_differ_in_the_e8m0_rule_and_f64_inputs() {
        for f in Format::ALL {
            let (new, old) = (CastPreset::MlDtypes.policy(f), CastPreset::MlDtypes06.policy(f));
            assert!(!new.f64_via_f32, "{f}");
            assert_eq!(old.f64_via_f32, f != Format::F16, "{f}");
            let rule = if f == Format::E8M0 {
                E8m0Rule::ImplicitBit
            } else {
                E8m0Rule::Value
            };
            assert_eq!((new.e8m0_rule, old.e8m0_rule), (E8m0Rule::Value, rule));
            let old_as_new = CastPolicy {
                e8m0_rule: E8m0Rule::Value,
                f64_via_f32: false,
                ..old
            };
            assert_eq!(old_as_new, new, "{f}");
        }
    }
}
