//! The cast presets (`ml_dtypes`, `ml_dtypes@0.6`, `nvidia`, `torch`,
//! `gfloat`) walked over every f32 input against an independent formulation
//! of their rules.
//!
//! # The independent formulation
//!
//! Nothing here calls mxbi to compute an expected code, not even its
//! decode. Each format is described by its OCP MX / IEEE 754 parameters
//! (exponent and mantissa widths, bias, largest finite value, whether it has
//! Inf); the preset rules are written from the README's preset table and the
//! oracle evidence, as codes (`ml_dtypes` E4M3 NaN -> sign | 0x7F, ...),
//! never as mxbi's policy fields. Rounding is done in f64 arithmetic: the
//! magnitude is scaled by a power of two so that the target's quantum is 1,
//! rounded to an integer by the f64 adder (add and subtract 2^52: nearest
//! even) or by an integer conversion (toward zero; up = that plus one when
//! something was cut), and scaled back (exact at every step); overflow is
//! "the rounded value exceeds max". mxbi instead rounds an integer
//! significand on its bits (and its array path uses tables built from that). E8M0 is written twice over:
//! `ml_dtypes` as a value rule (nearest, ties up), `ml_dtypes@0.6` the same
//! with its f32-subnormal case (2^-127, 2^-126) -> 2^-126, `torch` as c10's
//! bit rule (exponent field plus guard && (round || sticky || field != 0)),
//! `gfloat` ties to the even byte and `nvidia` rounding |x| up or toward
//! zero, as values. f64 inputs of the presets that narrow to f32 first
//! (ml_dtypes@0.6 except f16, torch) are narrowed by a rounding written here
//! too (not `as f32`).
//!
//! # What is walked
//!
//! * f32: every one of the 2^32 bit patterns, for every preset and every
//!   format the preset's implementation has (both ml_dtypes releases: all
//!   but int8; torch: e4m3, e5m2, e8m0, bf16, f16; nvidia and gfloat: all
//!   nine), plus the `nvidia` preset with the rounding and overflow of
//!   each GPU conversion of the device sweep (`e4m3.nosat`,
//!   `e8m0.rz.satfinite`, `bf16.rd`, ...).
//!   mxbi's scalar path (`encode_f32`) and array path (`cast_f32_slice`:
//!   lookup table / FP8 fast path) are both compared.
//! * f64 (2^64 is out of reach; the walk is structured): for every f32 bit
//!   pattern `b` with finite value `v`: `v`, the f64 just below and just
//!   above `v` in magnitude, the midpoint `t` between `v` and the next f32 of
//!   larger magnitude (2^128 after the largest finite f32), and the f64 just
//!   below and above `t`; for every f32 NaN pattern, f64 NaNs of that sign
//!   whose payload is the f32 payload followed by 0, by 1 and by 1 << 28 in
//!   the low 29 bits; for +-Inf, +-Inf; plus, both signs, 2^k, 1.5 * 2^k
//!   and the f64 neighbours of 2^k for every k outside the f32 range
//!   (-1074..=-150 and 128..=1023) and the largest f64. Every format
//!   boundary (value, midpoint, overflow threshold) is an f32 value, so this
//!   puts inputs one f64 ulp either side of every boundary and every f32
//!   tie, which is where rounding once and rounding through f32 differ.
//!   The full walk compares the scalar path (`encode_f64`); the CI sample
//!   compares `cast_f64_slice` too (the same function per element).
//!
//! CI runs a deterministic sample of both walks (`sampled_*`): a stride
//! through all patterns plus dense windows around every value and midpoint
//! of the format, the overflow threshold, zero, the f32 subnormal range,
//! f32 max, Inf and NaN, in both signs. The `planted_*` tests show the walk
//! fails: a reference with one rule changed finds exactly the inputs that
//! rule governs.
//!
//! The full walks (log to stdout; `--test-threads=1` so that one walk at a
//! time uses every core):
//!
//! ```text
//! cargo test --release --test exhaustive_presets -- --ignored --nocapture --test-threads=1
//! ```
//!
//! `MXBI_WALK_FORMATS=e8m0,f16` restricts the formats; `MXBI_WALK_EVERY=k`
//! walks only every k-th block of 2^20 f32 patterns (a reduced run; the log
//! says how many inputs were walked). The last full run's log is in
//! docs/evidence/.

use mxbi::format::{
    cast_f32_slice, cast_f64_slice, encode_f32, encode_f64, CastPolicy, CastPreset, CodesMut, Format, Overflow,
    Rounding,
};
use rayon::prelude::*;
use std::sync::OnceLock;
use std::time::Instant;

// ---------------------------------------------------------------------------
// Formats, from the OCP MX v1.0 spec and IEEE 754.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fmt {
    E4m3,
    E5m2,
    E3m2,
    E2m3,
    E2m1,
    Int8,
    E8m0,
    Bf16,
    F16,
}

const ALL_FMTS: [Fmt; 9] = [
    Fmt::E4m3,
    Fmt::E5m2,
    Fmt::E3m2,
    Fmt::E2m3,
    Fmt::E2m1,
    Fmt::Int8,
    Fmt::E8m0,
    Fmt::Bf16,
    Fmt::F16,
];

/// A sign-magnitude binary float with subnormals.
#[derive(Clone, Copy, Debug)]
struct Float {
    ebits: i32,
    mbits: i32,
    bias: i32,
    /// Largest finite value.
    max: f64,
    /// Whether the all-ones exponent with a zero mantissa is Inf.
    inf: bool,
}

const F32: Float = Float {
    ebits: 8,
    mbits: 23,
    bias: 127,
    max: f32::MAX as f64,
    inf: true,
};

impl Fmt {
    fn name(self) -> &'static str {
        match self {
            Fmt::E4m3 => "e4m3",
            Fmt::E5m2 => "e5m2",
            Fmt::E3m2 => "e3m2",
            Fmt::E2m3 => "e2m3",
            Fmt::E2m1 => "e2m1",
            Fmt::Int8 => "int8",
            Fmt::E8m0 => "e8m0",
            Fmt::Bf16 => "bf16",
            Fmt::F16 => "f16",
        }
    }

    fn mxbi(self) -> Format {
        self.name().parse().unwrap()
    }

    fn wide(self) -> bool {
        matches!(self, Fmt::Bf16 | Fmt::F16)
    }

    fn float(self) -> Option<Float> {
        let f = |ebits, mbits, bias, max, inf| Float {
            ebits,
            mbits,
            bias,
            max,
            inf,
        };
        Some(match self {
            Fmt::E4m3 => f(4, 3, 7, 448.0, false),
            Fmt::E5m2 => f(5, 2, 15, 57344.0, true),
            Fmt::E3m2 => f(3, 2, 3, 28.0, false),
            Fmt::E2m3 => f(2, 3, 1, 7.5, false),
            Fmt::E2m1 => f(2, 1, 1, 6.0, false),
            Fmt::Bf16 => f(8, 7, 127, (2.0 - 1.0 / 128.0) * pow2(127), true),
            Fmt::F16 => f(5, 10, 15, 65504.0, true),
            Fmt::Int8 | Fmt::E8m0 => return None,
        })
    }
}

/// 2^k for any k in the f64 range (subnormal results included), from bits.
fn pow2(k: i32) -> f64 {
    debug_assert!((-1074..=1023).contains(&k), "2^{k}");
    if k >= -1022 {
        f64::from_bits(((k + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (k + 1074))
    }
}

/// floor(log2 a) for finite a > 0, from the bits.
fn ilog2(a: f64) -> i32 {
    let b = a.to_bits();
    let e = ((b >> 52) & 0x7FF) as i32;
    if e == 0 {
        -1074 + 63 - (b & ((1 << 52) - 1)).leading_zeros() as i32
    } else {
        e - 1023
    }
}

/// Rounding directions the presets use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    NearestEven,
    TowardZero,
    Up,
    Down,
}

/// Rounds 0 <= s < 2^52 (the magnitude of a value of sign `neg`) to an
/// integer: nearest-even by adding and subtracting 2^52 (the f64 addition
/// rounds to nearest even at the units place), toward zero by a conversion
/// to an integer, up as toward zero plus one when something was cut.
fn round_int(s: f64, neg: bool, mode: Mode) -> f64 {
    debug_assert!((0.0..4503599627370496.0).contains(&s));
    let trunc = || s as i64 as f64;
    let ceil = || trunc() + (trunc() < s) as i64 as f64;
    match mode {
        Mode::NearestEven => (s + 4503599627370496.0) - 4503599627370496.0,
        Mode::TowardZero => trunc(),
        Mode::Up if neg => trunc(),
        Mode::Up => ceil(),
        Mode::Down if neg => ceil(),
        Mode::Down => trunc(),
    }
}

/// The magnitude `a > 0` rounded into `f` (unbounded exponent range above,
/// subnormals below), or None when the rounded value exceeds max.
fn round_float(f: &Float, a: f64, neg: bool, mode: Mode) -> Option<f64> {
    let emin = 1 - f.bias;
    let q = ilog2(a).max(emin) - f.mbits; // exponent of the quantum
    let v = round_int(a * pow2(-q), neg, mode) * pow2(q);
    (v <= f.max).then_some(v)
}

/// The magnitude code of a value `v >= 0` of `f`.
fn float_code(f: &Float, v: f64) -> u16 {
    if v == 0.0 {
        return 0;
    }
    let emin = 1 - f.bias;
    let e = ilog2(v);
    if e < emin {
        (v / pow2(emin - f.mbits)) as u16
    } else {
        let frac = v / pow2(e - f.mbits) - pow2(f.mbits);
        (((e + f.bias) as u16) << f.mbits) | frac as u16
    }
}

/// The value of magnitude code `c` of `f` (finite codes only), from the bits.
fn float_value(f: &Float, c: u16) -> f64 {
    let (field, m) = ((c >> f.mbits) as i32, (c & ((1 << f.mbits) - 1)) as f64);
    if field == 0 {
        m * pow2(1 - f.bias - f.mbits)
    } else {
        (pow2(f.mbits) + m) * pow2(field - f.bias - f.mbits)
    }
}

// ---------------------------------------------------------------------------
// Inputs.

/// An input value, read from its bits.
#[derive(Clone, Copy, Debug)]
enum X {
    /// `payload`: the NaN's mantissa, left-aligned in 64 bits.
    Nan {
        neg: bool,
        payload: u64,
    },
    Inf {
        neg: bool,
    },
    Zero {
        neg: bool,
    },
    Finite {
        neg: bool,
        a: f64,
    },
}

impl X {
    fn from_f32(b: u32) -> X {
        let neg = b >> 31 != 0;
        let (e, m) = ((b >> 23) & 0xFF, b & 0x7F_FFFF);
        match (e, m) {
            (0xFF, 0) => X::Inf { neg },
            (0xFF, m) => X::Nan {
                neg,
                payload: (m as u64) << 41,
            },
            (0, 0) => X::Zero { neg },
            _ => X::Finite {
                neg,
                a: f32::from_bits(b & 0x7FFF_FFFF) as f64,
            },
        }
    }

    fn from_f64(x: f64) -> X {
        let b = x.to_bits();
        let neg = b >> 63 != 0;
        let (e, m) = ((b >> 52) & 0x7FF, b & ((1 << 52) - 1));
        match (e, m) {
            (0x7FF, 0) => X::Inf { neg },
            (0x7FF, m) => X::Nan { neg, payload: m << 12 },
            (0, 0) => X::Zero { neg },
            _ => X::Finite { neg, a: x.abs() },
        }
    }
}

/// f64 -> f32 as a C cast does it (round to nearest even; NaN: sign and
/// the top 23 payload bits kept, quiet bit set), written with the rounding
/// above.
fn narrow_f32(x: f64) -> u32 {
    let sign = |neg: bool| if neg { 0x8000_0000u32 } else { 0 };
    match X::from_f64(x) {
        X::Nan { neg, payload } => sign(neg) | 0x7FC0_0000 | (payload >> 41) as u32,
        X::Inf { neg } => sign(neg) | 0x7F80_0000,
        X::Zero { neg } => sign(neg),
        X::Finite { neg, a } => match round_float(&F32, a, neg, Mode::NearestEven) {
            Some(v) => sign(neg) | (v as f32).to_bits(),
            None => sign(neg) | 0x7F80_0000,
        },
    }
}

// ---------------------------------------------------------------------------
// The presets' rules.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Preset {
    MlDtypes,
    MlDtypes06,
    Nvidia,
    Torch,
    Gfloat,
}

impl Preset {
    fn name(self) -> &'static str {
        match self {
            Preset::MlDtypes => "ml_dtypes",
            Preset::MlDtypes06 => "ml_dtypes@0.6",
            Preset::Nvidia => "nvidia",
            Preset::Torch => "torch",
            Preset::Gfloat => "gfloat",
        }
    }

    fn mxbi(self) -> CastPreset {
        self.name().parse().unwrap()
    }

    /// The implementation, whichever release: the two ml_dtypes releases
    /// share every rule but E8M0's and the f64 path's.
    fn family(self) -> Preset {
        match self {
            Preset::MlDtypes06 => Preset::MlDtypes,
            p => p,
        }
    }

    /// The formats the implementation itself has.
    fn formats(self) -> &'static [Fmt] {
        match self.family() {
            Preset::MlDtypes => &[
                Fmt::E4m3,
                Fmt::E5m2,
                Fmt::E3m2,
                Fmt::E2m3,
                Fmt::E2m1,
                Fmt::E8m0,
                Fmt::Bf16,
                Fmt::F16,
            ],
            Preset::Torch => &[Fmt::E4m3, Fmt::E5m2, Fmt::E8m0, Fmt::Bf16, Fmt::F16],
            Preset::Nvidia | Preset::Gfloat => &ALL_FMTS,
            Preset::MlDtypes06 => unreachable!("a family"),
        }
    }
}

const PRESETS: [Preset; 5] = [
    Preset::MlDtypes,
    Preset::MlDtypes06,
    Preset::Nvidia,
    Preset::Torch,
    Preset::Gfloat,
];

/// One walk: a preset on a format, with the rounding and overflow of the
/// preset (README table) or of one GPU conversion (`conversion`).
#[derive(Clone, Copy, Debug)]
struct Walk {
    preset: Preset,
    fmt: Fmt,
    mode: Mode,
    saturate: bool,
    /// The device sweep's conversion name, for the nvidia variants.
    conversion: Option<&'static str>,
}

impl Walk {
    fn preset(preset: Preset, fmt: Fmt) -> Walk {
        let small = matches!(fmt, Fmt::E3m2 | Fmt::E2m3 | Fmt::E2m1);
        let (mode, saturate) = match preset {
            // non-saturating RNE; FP6/FP4 overflow -> max
            Preset::MlDtypes | Preset::MlDtypes06 => (Mode::NearestEven, small),
            // cvt.rn.satfinite (bf16/f16: cvt.rn, no satfinite); E8M0 cvt.rp.satfinite
            Preset::Nvidia => (if fmt == Fmt::E8m0 { Mode::Up } else { Mode::NearestEven }, !fmt.wide()),
            // E4M3 saturates, the others do not
            Preset::Torch => (Mode::NearestEven, fmt == Fmt::E4m3),
            Preset::Gfloat => (Mode::NearestEven, false),
        };
        Walk {
            preset,
            fmt,
            mode,
            saturate,
            conversion: None,
        }
    }

    fn name(&self) -> String {
        format!(
            "{} {}{}",
            self.preset.name(),
            self.fmt.name(),
            self.conversion.map(|c| format!(" ({c})")).unwrap_or_default()
        )
    }

    /// Whether f64 inputs are first narrowed to f32: ml_dtypes 0.6's own
    /// types and c10's types are constructed from float; numpy's float16
    /// rounds an f64 once (`npy_doublebits_to_halfbits`), and so does the
    /// current ml_dtypes for every type.
    fn via_f32(&self) -> bool {
        match self.preset {
            Preset::MlDtypes06 => self.fmt != Fmt::F16,
            Preset::Torch => true,
            Preset::MlDtypes | Preset::Nvidia | Preset::Gfloat => false,
        }
    }

    /// mxbi's policy for this walk: the preset's, with the conversion's
    /// rounding and overflow put in for the nvidia variants (as
    /// `mxbi device casts` does).
    fn policy(&self) -> CastPolicy {
        let mut p = self.preset.mxbi().policy(self.fmt.mxbi());
        if self.conversion.is_some() {
            p.rounding = match self.mode {
                Mode::NearestEven => Rounding::NearestEven,
                Mode::TowardZero => Rounding::TowardZero,
                Mode::Up => Rounding::Up,
                Mode::Down => Rounding::Down,
            };
            p.overflow = if self.saturate {
                Overflow::Saturate
            } else {
                Overflow::NonFinite
            };
        }
        p
    }
}

/// The nvidia preset under the rounding and overflow of each conversion of
/// the GPU sweep (`src/device/casts.rs`) that differs from the preset's own.
fn nvidia_conversions() -> Vec<Walk> {
    use Fmt::*;
    use Mode::*;
    let v = |name, fmt, mode, saturate| Walk {
        preset: Preset::Nvidia,
        fmt,
        mode,
        saturate,
        conversion: Some(name),
    };
    vec![
        v("e4m3.nosat", E4m3, NearestEven, false),
        v("e5m2.nosat", E5m2, NearestEven, false),
        v("e8m0.rp.nosat", E8m0, Up, false),
        v("e8m0.rz.satfinite", E8m0, TowardZero, true),
        v("e8m0.rz.nosat", E8m0, TowardZero, false),
        v("e2m3.rz.satfinite", E2m3, TowardZero, true),
        v("e3m2.rz.satfinite", E3m2, TowardZero, true),
        v("e2m1.rz.satfinite", E2m1, TowardZero, true),
        v("bf16.rz", Bf16, TowardZero, false),
        v("bf16.rd", Bf16, Down, false),
        v("bf16.ru", Bf16, Up, false),
        v("f16.rz", F16, TowardZero, false),
        v("f16.rd", F16, Down, false),
        v("f16.ru", F16, Up, false),
    ]
}

/// Every preset walk (the presets' own policies), then the nvidia
/// conversions.
fn all_walks(preset: Preset) -> Vec<Walk> {
    let mut w: Vec<Walk> = preset.formats().iter().map(|&f| Walk::preset(preset, f)).collect();
    if preset == Preset::Nvidia {
        w.extend(nvidia_conversions());
    }
    w
}

/// A deliberately wrong rule, to show that the walk finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plant {
    None,
    /// ml_dtypes E8M0 with gfloat's ties-to-even instead of ties up.
    E8m0TiesToEven,
    /// ml_dtypes E8M0 with the other release's rule for f32 subnormals.
    E8m0OtherRelease,
    /// nvidia E8M0: negative inputs -> NaN instead of converting |x|.
    E8m0NegativeNan,
    /// nvidia non-saturating E4M3: the overflow NaN drops the input's sign.
    UnsignedOverflowNan,
    /// ml_dtypes FP6/FP4: NaN -> zero of the NaN's own sign (not flipped).
    NanZeroKeepsSign,
    /// ml_dtypes f16: NaN -> the canonical quiet NaN, payload dropped.
    F16NanCanonical,
    /// f64 inputs rounded the other way: once instead of through f32, or
    /// through f32 instead of once.
    F64OtherRounding,
}

/// The expected code of an f32 input, or None where mxbi must refuse it.
fn expect_f32(w: &Walk, b: u32, plant: Plant) -> Option<u16> {
    if w.fmt == Fmt::E8m0 && w.preset == Preset::Torch {
        return Some(torch_e8m0(b) as u16);
    }
    expect(w, X::from_f32(b), plant)
}

/// The expected code of an f64 input.
fn expect_f64(w: &Walk, x: f64, plant: Plant) -> Option<u16> {
    if w.via_f32() != (plant == Plant::F64OtherRounding) {
        return expect_f32(w, narrow_f32(x), plant);
    }
    expect(w, X::from_f64(x), plant)
}

fn expect(w: &Walk, x: X, plant: Plant) -> Option<u16> {
    match w.fmt {
        Fmt::E8m0 => Some(e8m0(w, x, plant) as u16),
        Fmt::Int8 => int8(w, x),
        _ => float(w, x, plant),
    }
}

/// Whether an overflow (not an Inf input) rounds to max under IEEE 754
/// §7.4: the directed roundings toward zero for this sign.
fn overflow_to_max(mode: Mode, neg: bool) -> bool {
    match mode {
        Mode::NearestEven => false,
        Mode::TowardZero => true,
        Mode::Up => neg,
        Mode::Down => !neg,
    }
}

fn float(w: &Walk, x: X, plant: Plant) -> Option<u16> {
    let f = w.fmt.float().unwrap();
    let sign_bit = 1u16 << (f.ebits + f.mbits);
    let s = |neg: bool| if neg { sign_bit } else { 0 };
    let max_code = || float_code(&f, f.max);
    let exp_ones = ((1u16 << f.ebits) - 1) << f.mbits;
    let overflow = |neg: bool, from_inf: bool| -> Option<u16> {
        if w.saturate || (!from_inf && overflow_to_max(w.mode, neg)) {
            return Some(s(neg) | max_code());
        }
        if f.inf {
            return Some(s(neg) | exp_ones);
        }
        match (w.fmt, w.preset.family()) {
            // E4M3 has NaN but no Inf: the NaN with the input's sign
            (Fmt::E4m3, Preset::MlDtypes) => Some(s(neg) | 0x7F),
            (Fmt::E4m3, Preset::Nvidia) if plant == Plant::UnsignedOverflowNan => Some(0x7F),
            (Fmt::E4m3, Preset::Nvidia) => Some(s(neg) | 0x7F),
            // gfloat: every NaN it writes is all ones
            (Fmt::E4m3, Preset::Gfloat) => Some(0xFF),
            (Fmt::E4m3, Preset::Torch) => unreachable!("torch E4M3 saturates"),
            (Fmt::E4m3, Preset::MlDtypes06) => unreachable!("a family"),
            // FP6/FP4: no Inf, no NaN: refused
            _ => None,
        }
    };
    match x {
        X::Zero { neg } => Some(s(neg)),
        X::Inf { neg } => overflow(neg, true),
        X::Finite { neg, a } => match round_float(&f, a, neg, w.mode) {
            Some(v) => Some(s(neg) | float_code(&f, v)),
            None => overflow(neg, false),
        },
        X::Nan { neg, payload } => {
            use Fmt::*;
            match (w.preset.family(), w.fmt) {
                (Preset::MlDtypes, E4m3) => Some(s(neg) | 0x7F),
                (Preset::MlDtypes, E5m2) => Some(s(neg) | 0x7E),
                (Preset::MlDtypes, Bf16) => Some(s(neg) | 0x7FC0),
                (Preset::MlDtypes, F16) if plant == Plant::F16NanCanonical => Some(s(neg) | 0x7E00),
                // numpy: the top 10 payload bits, 1 if they are all zero
                (Preset::MlDtypes, F16) => Some(s(neg) | 0x7C00 | ((payload >> 54) as u16).max(1)),
                (Preset::MlDtypes, _) if plant == Plant::NanZeroKeepsSign => Some(s(neg)),
                // FP6/FP4: ml_dtypes' NaN is -0, with the NaN's sign applied on top
                (Preset::MlDtypes, _) => Some(s(!neg)),
                (Preset::Nvidia, E4m3 | E5m2) => Some(0x7F),
                (Preset::Nvidia, Bf16 | F16) => Some(0x7FFF),
                (Preset::Nvidia, _) => Some(max_code()),
                (Preset::Torch, E4m3 | E5m2) => Some(s(neg) | 0x7F),
                (Preset::Torch, Bf16) => Some(0xFFFF),
                // c10 f32 -> f16: quiet bit set, the top 9 further payload bits kept
                (Preset::Torch, F16) => Some(s(neg) | 0x7E00 | (payload >> 54) as u16),
                (Preset::Torch, _) => unreachable!("torch has no FP6/FP4"),
                (Preset::Gfloat, E4m3 | E5m2) => Some(0xFF),
                (Preset::Gfloat, Bf16 | F16) => Some(0xFFFF),
                (Preset::Gfloat, _) => None,
                (Preset::MlDtypes06, _) => unreachable!("a family"),
            }
        }
    }
}

/// MX INT8: k / 64 for k in -128..=127.
fn int8(w: &Walk, x: X) -> Option<u16> {
    let overflow = |neg: bool, from_inf: bool| -> Option<u16> {
        (w.saturate || (!from_inf && overflow_to_max(w.mode, neg))).then_some(if neg { 0x80 } else { 0x7F })
    };
    match x {
        X::Zero { .. } => Some(0),
        X::Inf { neg } => overflow(neg, true),
        X::Nan { .. } => match w.preset {
            Preset::Nvidia => Some(0x7F),
            _ => None,
        },
        X::Finite { neg, a } => {
            if a >= 4.0 {
                return overflow(neg, false); // beyond any rounding of k / 64
            }
            let k = round_int(a * 64.0, neg, w.mode);
            if k > if neg { 128.0 } else { 127.0 } {
                return overflow(neg, false);
            }
            let k = k as i32;
            Some((if neg { -k } else { k }) as i8 as u8 as u16)
        }
    }
}

/// torch: c10's `fp8e8m0fnu_from_fp32_value`, on the f32 bits: the exponent
/// field, plus one iff guard && (round || sticky || field != 0); the sign is
/// ignored; Inf and NaN give 0xFF (as does 2^127 rounding up).
fn torch_e8m0(b: u32) -> u8 {
    let field = (b >> 23) & 0xFF;
    if field == 0xFF {
        return 0xFF;
    }
    let guard = b & 0x40_0000 != 0;
    let round = b & 0x20_0000 != 0;
    let sticky = b & 0x1F_FFFF != 0;
    (field + (guard && (round || sticky || field != 0)) as u32) as u8
}

/// How a positive finite value becomes a power of two.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pow2Rule {
    /// ml_dtypes: nearest with ties up, for every a.
    TiesUp,
    /// ml_dtypes 0.6: nearest with ties up for a >= 2^-126; below (no
    /// implicit bit in f32) a <= 2^-127 -> 2^-127, a > 2^-127 -> 2^-126.
    TiesUpImplicitBit,
    /// gfloat: nearest, a tie goes to the even byte.
    TiesEvenByte,
    Up,
    TowardZero,
}

/// The E8M0 byte of a > 0 under `rule`, before overflow: may exceed 254.
fn pow2_byte(a: f64, rule: Pow2Rule) -> i32 {
    let e = ilog2(a);
    let frac = a / pow2(e); // in [1, 2), exact
    let k = match rule {
        Pow2Rule::TiesUpImplicitBit if a < pow2(-126) => {
            if a <= pow2(-127) {
                -127
            } else {
                -126
            }
        }
        Pow2Rule::TiesUp | Pow2Rule::TiesUpImplicitBit => e + (frac >= 1.5) as i32,
        Pow2Rule::TiesEvenByte => {
            let tie_up = (e + 127).rem_euclid(2) == 1; // e's byte is odd: the even one is above
            e + (frac > 1.5 || (frac == 1.5 && tie_up)) as i32
        }
        Pow2Rule::Up => e + (frac > 1.0) as i32,
        Pow2Rule::TowardZero => e,
    };
    (k + 127).max(0) // everything below 2^-127 is 0x00: E8M0 has no zero
}

fn e8m0(w: &Walk, x: X, plant: Plant) -> u8 {
    match w.preset {
        Preset::MlDtypes | Preset::MlDtypes06 | Preset::Gfloat => {
            let implicit_bit = (w.preset == Preset::MlDtypes06) != (plant == Plant::E8m0OtherRelease);
            let rule = if w.preset == Preset::Gfloat || plant == Plant::E8m0TiesToEven {
                Pow2Rule::TiesEvenByte
            } else if implicit_bit {
                Pow2Rule::TiesUpImplicitBit
            } else {
                Pow2Rule::TiesUp
            };
            // zero, negatives, Inf, NaN and overflow are all NaN
            match x {
                X::Finite { neg: false, a } => {
                    let k = pow2_byte(a, rule);
                    if k > 254 {
                        0xFF
                    } else {
                        k as u8
                    }
                }
                _ => 0xFF,
            }
        }
        Preset::Nvidia => {
            // |x| is converted: the sign is dropped (measured on an H200)
            let rule = match w.mode {
                Mode::Up => Pow2Rule::Up,
                Mode::TowardZero => Pow2Rule::TowardZero,
                m => unreachable!("no nvidia E8M0 conversion rounds {m:?}"),
            };
            match x {
                X::Nan { .. } => 0xFF,
                X::Finite { neg: true, .. } | X::Inf { neg: true } | X::Zero { neg: true }
                    if plant == Plant::E8m0NegativeNan =>
                {
                    0xFF
                }
                X::Zero { .. } => 0x00,
                X::Inf { .. } => {
                    if w.saturate {
                        0xFE
                    } else {
                        0xFF
                    }
                }
                X::Finite { a, .. } => {
                    let k = pow2_byte(a, rule);
                    if k <= 254 {
                        k as u8
                    } else if w.saturate || overflow_to_max(w.mode, false) {
                        0xFE
                    } else {
                        0xFF
                    }
                }
            }
        }
        Preset::Torch => unreachable!("torch E8M0 is the bit rule on f32"),
    }
}

// ---------------------------------------------------------------------------
// Comparing mxbi with the reference.

/// What one walk found.
#[derive(Default)]
struct Tally {
    inputs: u64,
    /// Inputs where the scalar or the array path differs from the reference.
    mismatches: u64,
    /// The mismatching inputs (bits), at most `KEEP`, or all when collecting.
    bad: Vec<u64>,
    /// Array calls whose success disagreed with whether the reference
    /// expects a refusal somewhere in the call.
    array_errors: u64,
}

const KEEP: usize = 8;

impl Tally {
    fn merge(mut self, o: Tally, keep_all: bool) -> Tally {
        self.inputs += o.inputs;
        self.mismatches += o.mismatches;
        self.array_errors += o.array_errors;
        self.bad.extend(o.bad);
        if !keep_all {
            self.bad.sort_unstable();
            self.bad.truncate(KEEP);
        }
        self
    }
    fn failures(&self) -> u64 {
        self.mismatches + self.array_errors
    }
}

/// Casts through mxbi's array path; None if the call failed.
fn array_f32(xs: &[f32], fmt: Fmt, p: &CastPolicy) -> Option<Vec<u16>> {
    if fmt.wide() {
        let mut out = vec![0u16; xs.len()];
        cast_f32_slice(xs, CodesMut::U16(&mut out), fmt.mxbi(), p, 0).ok()?;
        Some(out)
    } else {
        let mut out = vec![0u8; xs.len()];
        cast_f32_slice(xs, CodesMut::U8(&mut out), fmt.mxbi(), p, 0).ok()?;
        Some(out.into_iter().map(u16::from).collect())
    }
}

fn array_f64(xs: &[f64], fmt: Fmt, p: &CastPolicy) -> Option<Vec<u16>> {
    if fmt.wide() {
        let mut out = vec![0u16; xs.len()];
        cast_f64_slice(xs, CodesMut::U16(&mut out), fmt.mxbi(), p, 0).ok()?;
        Some(out)
    } else {
        let mut out = vec![0u8; xs.len()];
        cast_f64_slice(xs, CodesMut::U8(&mut out), fmt.mxbi(), p, 0).ok()?;
        Some(out.into_iter().map(u16::from).collect())
    }
}

/// Compares one block of inputs (given as bits: f32 in the low 32 bits, or
/// f64) through the scalar path and, when `arrays`, the array path: on the
/// whole block, which must fail iff the reference refuses an input (when it
/// succeeds every code is compared), and, where some input is refused, once
/// more on the inputs the reference accepts (every code compared).
fn check_block<T: Copy>(
    xs: &[T],
    bits: impl Fn(T) -> u64,
    want: impl Fn(T) -> Option<u16>,
    scalar: impl Fn(T) -> Option<u16>,
    array: impl Fn(&[T]) -> Option<Vec<u16>>,
    arrays: bool,
    keep_all: bool,
) -> Tally {
    let wants: Vec<Option<u16>> = xs.iter().map(|&x| want(x)).collect();
    let mut bad: Vec<bool> = xs.iter().zip(&wants).map(|(&x, w)| scalar(x) != *w).collect();
    let mut array_errors = 0;
    if arrays {
        let refused = wants.iter().any(Option::is_none);
        let whole = array(xs);
        if whole.is_some() == refused {
            array_errors += 1;
        }
        let codes = if refused {
            let accepted: Vec<T> = xs
                .iter()
                .zip(&wants)
                .filter(|(_, w)| w.is_some())
                .map(|(&x, _)| x)
                .collect();
            array(&accepted)
        } else {
            whole
        };
        match codes {
            Some(codes) => {
                let mut k = 0;
                for (i, w) in wants.iter().enumerate() {
                    if let Some(w) = w {
                        bad[i] |= codes[k] != *w;
                        k += 1;
                    }
                }
            }
            None => array_errors += 1,
        }
    }
    let mut t = Tally {
        inputs: xs.len() as u64,
        array_errors,
        ..Tally::default()
    };
    for (i, &b) in bad.iter().enumerate() {
        if b {
            t.mismatches += 1;
            if keep_all || t.bad.len() < KEEP {
                t.bad.push(bits(xs[i]));
            }
        }
    }
    t
}

fn check_f32(w: &Walk, p: &CastPolicy, plant: Plant, bits: &[u32], keep_all: bool) -> Tally {
    let format = w.fmt.mxbi();
    let xs: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
    check_block(
        &xs,
        |x| x.to_bits() as u64,
        |x| expect_f32(w, x.to_bits(), plant),
        |x| encode_f32(x, format, p, 0).ok(),
        |xs| array_f32(xs, w.fmt, p),
        true,
        keep_all,
    )
}

fn check_f64(w: &Walk, p: &CastPolicy, plant: Plant, xs: &[f64], arrays: bool, keep_all: bool) -> Tally {
    let format = w.fmt.mxbi();
    check_block(
        xs,
        |x| x.to_bits(),
        |x| expect_f64(w, x, plant),
        |x| encode_f64(x, format, p, 0).ok(),
        |xs| array_f64(xs, w.fmt, p),
        arrays,
        keep_all,
    )
}

/// The structured f64 inputs of one f32 bit pattern (see the module doc).
fn f64_neighbourhood(b: u32, out: &mut Vec<f64>) {
    let x = f32::from_bits(b);
    let sign = ((b >> 31) as u64) << 63;
    if x.is_nan() {
        let m = (b & 0x7F_FFFF) as u64;
        for low in [0, 1, 1 << 28] {
            out.push(f64::from_bits(sign | 0x7FF << 52 | m << 29 | low));
        }
        return;
    }
    if x.is_infinite() {
        out.push(x as f64);
        return;
    }
    let v = x as f64;
    let vb = v.to_bits();
    if x != 0.0 {
        out.push(f64::from_bits(vb - 1));
    }
    out.extend([v, f64::from_bits(vb + 1)]);
    let next = if b & 0x7FFF_FFFF == 0x7F7F_FFFF {
        pow2(128)
    } else {
        f32::from_bits((b & 0x7FFF_FFFF) + 1) as f64
    };
    let t = (v.abs() + next) / 2.0; // exact: 25 significant bits
    let tb = t.to_bits() | sign;
    out.extend([f64::from_bits(tb - 1), f64::from_bits(tb), f64::from_bits(tb + 1)]);
}

/// f64 inputs outside the f32 range (both signs), walked in full and in CI.
fn f64_outside_f32() -> Vec<f64> {
    let mut v = vec![f64::MAX];
    for k in (-1074..=-150).chain(128..=1023) {
        let p = pow2(k);
        v.push(p);
        v.push(f64::from_bits(p.to_bits() + 1));
        if k > -1074 {
            v.push(f64::from_bits(p.to_bits() - 1));
        }
        if k < 1023 && k > -1074 {
            v.push(p * 1.5);
        }
    }
    let neg: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v
}

/// CPU seconds used by this process so far (all threads).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
        t(u.ru_utime) + t(u.ru_stime)
    }
}

/// Wall-clock and CPU time of a walk.
struct Clock(Instant, f64);

impl Clock {
    fn start() -> Clock {
        Clock(Instant::now(), cpu_seconds())
    }
}

fn print_walk(kind: &str, w: &Walk, t: &Tally, clock: &Clock) {
    println!(
        "{kind} {:<36} {:>12} inputs  {:>3} mismatches  {:>7.1} s  ({:.1} CPU s)",
        w.name(),
        t.inputs,
        t.failures(),
        clock.0.elapsed().as_secs_f64(),
        cpu_seconds() - clock.1
    );
    for b in &t.bad {
        if kind == "f32" {
            let b = *b as u32;
            println!(
                "    input {b:#010x} ({:e}): reference {:x?}, mxbi scalar {:x?}",
                f32::from_bits(b),
                expect_f32(w, b, Plant::None),
                encode_f32(f32::from_bits(b), w.fmt.mxbi(), &w.policy(), 0).ok()
            );
        } else {
            let x = f64::from_bits(*b);
            println!(
                "    input {b:#018x} ({x:e}): reference {:x?}, mxbi scalar {:x?}",
                expect_f64(w, x, Plant::None),
                encode_f64(x, w.fmt.mxbi(), &w.policy(), 0).ok()
            );
        }
    }
    if t.array_errors > 0 {
        println!(
            "    {} array calls succeeded or failed against the reference",
            t.array_errors
        );
    }
}

// ---------------------------------------------------------------------------
// CI samples.

/// The f32 patterns sampled for a format in CI: every 4093rd pattern, every
/// 61st f32 subnormal, and, in both signs, windows around every value and
/// every midpoint of the format (+-48 patterns; +-2 for bf16/f16, which
/// have 2^15 of each), around the overflow threshold and around the f32
/// specials (+-4096 patterns).
fn sample_f32(fmt: Fmt) -> &'static [u32] {
    static CACHE: OnceLock<Vec<Vec<u32>>> = OnceLock::new();
    let all = CACHE.get_or_init(|| ALL_FMTS.iter().map(|&f| build_sample(f)).collect());
    &all[ALL_FMTS.iter().position(|&f| f == fmt).unwrap()]
}

fn build_sample(fmt: Fmt) -> Vec<u32> {
    let mut s: Vec<u32> = (0..=u32::MAX / 4093).map(|k| k * 4093).collect();
    s.extend((0..0x80_0000u32).step_by(61));
    // boundaries as values: the format's values and midpoints
    let mut edges: Vec<f64> = Vec::new();
    let ladder: Vec<f64> = match fmt {
        Fmt::Int8 => (0..=128).map(|k| k as f64 / 64.0).collect(),
        Fmt::E8m0 => (-127..=128).map(pow2).collect(),
        _ => {
            let f = fmt.float().unwrap();
            let top = float_code(&f, f.max);
            let mut l: Vec<f64> = (0..=top).map(|c| float_value(&f, c)).collect();
            // the would-be next value: the overflow threshold lies halfway
            l.push(f.max + (f.max - float_value(&f, top - 1)));
            l
        }
    };
    for pair in ladder.windows(2) {
        edges.push(pair[0]);
        edges.push((pair[0] + pair[1]) / 2.0);
    }
    edges.push(*ladder.last().unwrap());
    let w: i64 = if fmt.wide() { 2 } else { 48 };
    for v in edges {
        let b = (v as f32).to_bits() as i64;
        for d in -w..=w {
            s.push((b + d).clamp(0, 0x7FFF_FFFF) as u32);
        }
    }
    for b in [
        0u32,
        0x0040_0000,
        0x0080_0000,
        0x7F7F_FFFF,
        0x7F80_0000,
        0x7FC0_0000,
        0x7FFF_FFFF,
    ] {
        for d in -4096i64..=4096 {
            s.push((b as i64 + d).clamp(0, 0x7FFF_FFFF) as u32);
        }
    }
    let neg: Vec<u32> = s.iter().map(|b| b | 0x8000_0000).collect();
    s.extend(neg);
    s.sort_unstable();
    s.dedup();
    s
}

/// The f64 inputs sampled in CI: the structured neighbourhood of every 7th
/// pattern of the f32 sample, and the f64 range outside f32.
fn sample_f64(fmt: Fmt) -> Vec<f64> {
    let mut xs = f64_outside_f32();
    for &b in sample_f32(fmt).iter().step_by(7) {
        f64_neighbourhood(b, &mut xs);
    }
    xs
}

fn walk_sample_f32(w: &Walk, plant: Plant, keep_all: bool) -> Tally {
    let p = w.policy();
    sample_f32(w.fmt)
        .par_chunks(1 << 16)
        .map(|c| check_f32(w, &p, plant, c, keep_all))
        .reduce(Tally::default, |a, b| a.merge(b, keep_all))
}

fn walk_sample_f64(w: &Walk, plant: Plant, keep_all: bool) -> Tally {
    let p = w.policy();
    sample_f64(w.fmt)
        .par_chunks(1 << 16)
        .map(|c| check_f64(w, &p, plant, c, true, keep_all))
        .reduce(Tally::default, |a, b| a.merge(b, keep_all))
}

#[test]
fn sampled_f32_inputs_match_independent_preset_rules() {
    let mut failures = 0;
    for preset in PRESETS {
        for w in all_walks(preset) {
            let clock = Clock::start();
            let t = walk_sample_f32(&w, Plant::None, false);
            print_walk("f32", &w, &t, &clock);
            assert!(t.inputs > 1_000_000);
            failures += t.failures();
        }
    }
    assert_eq!(failures, 0);
}

#[test]
fn sampled_f64_inputs_match_independent_preset_rules() {
    let mut failures = 0;
    for preset in PRESETS {
        for w in all_walks(preset) {
            let clock = Clock::start();
            let t = walk_sample_f64(&w, Plant::None, false);
            print_walk("f64", &w, &t, &clock);
            assert!(t.inputs > 1_000_000);
            failures += t.failures();
        }
    }
    assert_eq!(failures, 0);
}

// ---------------------------------------------------------------------------
// The walk can fail: a planted rule finds exactly the inputs it governs.

/// Runs the f32 sample of `w` against a reference with `plant`; returns the
/// mismatching inputs (sorted) and how many inputs were walked.
fn planted_f32(w: Walk, plant: Plant) -> (Vec<u32>, u64) {
    let t = walk_sample_f32(&w, plant, true);
    assert_eq!(t.array_errors, 0);
    let mut bad: Vec<u32> = t.bad.iter().map(|&b| b as u32).collect();
    bad.sort_unstable();
    println!(
        "{}: {plant:?} planted: {} of {} inputs differ",
        w.name(),
        bad.len(),
        t.inputs
    );
    (bad, t.inputs)
}

fn predicted(fmt: Fmt, pred: impl Fn(u32) -> bool) -> Vec<u32> {
    sample_f32(fmt).iter().copied().filter(|&b| pred(b)).collect()
}

fn is_nan(b: u32) -> bool {
    b & 0x7FFF_FFFF > 0x7F80_0000
}

#[test]
fn planted_e8m0_ties_to_even_is_caught() {
    // differ: ties 1.5 * 2^e whose lower byte is even (ties up vs down), and
    // at the lowest byte, 0x00: ml_dtypes@0.6 gives 0x01 on all of
    // (2^-127, 1.5 * 2^-127], ml_dtypes on the tie 1.5 * 2^-127 alone
    let normal_tie = |b: u32| {
        let field = b >> 23; // sign bit set: no match
        b & 0x7F_FFFF == 0x40_0000 && (1..=254).contains(&field) && field.is_multiple_of(2)
    };
    for (preset, lowest) in [
        (Preset::MlDtypes, 0x60_0000..=0x60_0000),
        (Preset::MlDtypes06, 0x40_0001..=0x60_0000),
    ] {
        let (bad, _) = planted_f32(Walk::preset(preset, Fmt::E8m0), Plant::E8m0TiesToEven);
        let want = predicted(Fmt::E8m0, |b| normal_tie(b) || lowest.contains(&b));
        assert!(want.len() > 100);
        assert_eq!(bad, want, "{}", preset.name());
    }
}

#[test]
fn planted_e8m0_other_release_is_caught() {
    // the releases differ on (2^-127, 1.5 * 2^-127) alone: 0x00 now, 0x01 in 0.6
    for preset in [Preset::MlDtypes, Preset::MlDtypes06] {
        let (bad, _) = planted_f32(Walk::preset(preset, Fmt::E8m0), Plant::E8m0OtherRelease);
        let want = predicted(Fmt::E8m0, |b| (0x40_0001..0x60_0000).contains(&b));
        assert!(want.len() > 8000);
        assert_eq!(bad, want, "{}", preset.name());
    }
}

#[test]
fn planted_e8m0_negative_nan_is_caught() {
    let (bad, _) = planted_f32(Walk::preset(Preset::Nvidia, Fmt::E8m0), Plant::E8m0NegativeNan);
    // every negative non-NaN input (nvidia converts |x|, never to NaN)
    let want = predicted(Fmt::E8m0, |b| b >> 31 == 1 && !is_nan(b));
    assert!(want.len() > 1000);
    assert_eq!(bad, want);
}

#[test]
fn planted_unsigned_overflow_nan_is_caught() {
    let w = nvidia_conversions()
        .into_iter()
        .find(|w| w.conversion == Some("e4m3.nosat"))
        .unwrap();
    let (bad, _) = planted_f32(w, Plant::UnsignedOverflowNan);
    // negative inputs beyond 464 (the tie between 448 and 480 rounds to
    // 448), -Inf included
    let want = predicted(Fmt::E4m3, |b| {
        b >> 31 == 1 && !is_nan(b) && b & 0x7FFF_FFFF > 0x43E8_0000
    });
    assert!(want.len() > 1000);
    assert_eq!(bad, want);
}

#[test]
fn planted_nan_zero_sign_is_caught() {
    for fmt in [Fmt::E3m2, Fmt::E2m3, Fmt::E2m1] {
        let (bad, _) = planted_f32(Walk::preset(Preset::MlDtypes, fmt), Plant::NanZeroKeepsSign);
        let want = predicted(fmt, is_nan);
        assert!(want.len() > 1000);
        assert_eq!(bad, want);
    }
}

#[test]
fn planted_f16_nan_payload_is_caught() {
    let (bad, _) = planted_f32(Walk::preset(Preset::MlDtypes, Fmt::F16), Plant::F16NanCanonical);
    // NaNs whose truncated payload is not the canonical 0x200
    let want = predicted(Fmt::F16, |b| is_nan(b) && ((b & 0x7F_FFFF) >> 13).max(1) != 0x200);
    assert!(want.len() > 1000);
    assert_eq!(bad, want);
}

#[test]
fn planted_f64_other_rounding_is_caught() {
    // ml_dtypes@0.6 narrows f64 to f32 first, ml_dtypes rounds once; the
    // other way differs only where the f64 is not an f32 (next to a format
    // boundary that is an f32 tie or value, or outside the f32 range)
    for w in [
        Walk::preset(Preset::MlDtypes06, Fmt::E4m3),
        Walk::preset(Preset::MlDtypes06, Fmt::E8m0),
        Walk::preset(Preset::MlDtypes, Fmt::E4m3),
        Walk::preset(Preset::MlDtypes, Fmt::E8m0),
        Walk::preset(Preset::MlDtypes, Fmt::Bf16),
    ] {
        let t = walk_sample_f64(&w, Plant::F64OtherRounding, true);
        println!(
            "{}: F64OtherRounding planted: {} of {} f64 inputs differ",
            w.name(),
            t.mismatches,
            t.inputs
        );
        assert!(t.mismatches > 100);
        for &b in &t.bad {
            let x = f64::from_bits(b);
            assert!(x.is_nan() || (x as f32) as f64 != x, "{x:e}");
        }
    }
}

/// numpy rounds an f64 to float16 once (`npy_doublebits_to_halfbits`);
/// outputs of numpy 2.4.6 `np.array([x]).astype(np.float16)`.
#[test]
fn ml_dtypes_f16_rounds_f64_once_as_numpy() {
    let p = CastPreset::MlDtypes.policy(Format::F16);
    let rows: &[(f64, u16)] = &[
        (1.0 + pow2(-11) + pow2(-40), 0x3C01), // through f32: the tie, 0x3C00
        (65520.0 - pow2(-30), 0x7BFF),         // through f32: 65520, Inf
        (65520.0, 0x7C00),
        (pow2(-25) + pow2(-60), 0x0001), // through f32: the tie, 0x0000
    ];
    for &(x, want) in rows {
        assert_eq!(encode_f64(x, Format::F16, &p, 0).unwrap(), want, "{x:e}");
        assert_eq!(
            expect_f64(&Walk::preset(Preset::MlDtypes, Fmt::F16), x, Plant::None),
            Some(want)
        );
    }
}

// ---------------------------------------------------------------------------
// The full walks.

fn walk_filter() -> (Option<Vec<String>>, u32) {
    let formats = std::env::var("MXBI_WALK_FORMATS")
        .ok()
        .map(|s| s.split(',').map(|n| n.trim().to_string()).collect());
    let every = std::env::var("MXBI_WALK_EVERY")
        .ok()
        .map(|s| s.parse::<u32>().expect("MXBI_WALK_EVERY: a positive integer"))
        .unwrap_or(1)
        .max(1);
    (formats, every)
}

fn selected(preset: Preset) -> (Vec<Walk>, u32) {
    let (formats, every) = walk_filter();
    let walks = all_walks(preset)
        .into_iter()
        .filter(|w| formats.as_ref().is_none_or(|f| f.iter().any(|n| n == w.fmt.name())))
        .collect();
    println!(
        "\n# {} rayon threads; blocks of 2^20 f32 patterns walked: every {every}{}",
        rayon::current_num_threads(),
        if every == 1 {
            " (all 2^32 patterns)"
        } else {
            " (a reduced run)"
        }
    );
    (walks, every)
}

/// Every f32 pattern (in blocks of 2^20, every `every`-th block).
fn full_f32(preset: Preset) {
    let (walks, every) = selected(preset);
    let mut failures = 0;
    for w in walks {
        let p = w.policy();
        let clock = Clock::start();
        let t = (0..4096u32)
            .into_par_iter()
            .filter(|c| c % every == 0)
            .map(|c| {
                let bits: Vec<u32> = (c << 20..=(c << 20 | 0xF_FFFF)).collect();
                check_f32(&w, &p, Plant::None, &bits, false)
            })
            .reduce(Tally::default, |a, b| a.merge(b, false));
        print_walk("f32", &w, &t, &clock);
        failures += t.failures();
    }
    assert_eq!(failures, 0);
}

/// The structured f64 walk: the neighbourhood of every f32 pattern (in
/// blocks of 2^20, every `every`-th block) and the range outside f32,
/// through the scalar path (the f64 array path is the same function per
/// element; the CI sample compares it too).
fn full_f64(preset: Preset) {
    let (walks, every) = selected(preset);
    let outside = f64_outside_f32();
    let mut failures = 0;
    for w in walks.into_iter().filter(|w| w.conversion.is_none()) {
        let p = w.policy();
        let clock = Clock::start();
        let t = (0..4096u32)
            .into_par_iter()
            .filter(|c| c % every == 0)
            .map(|c| {
                let mut xs = Vec::with_capacity(6 << 20);
                for b in c << 20..=(c << 20 | 0xF_FFFF) {
                    f64_neighbourhood(b, &mut xs);
                }
                check_f64(&w, &p, Plant::None, &xs, false, false)
            })
            .reduce(Tally::default, |a, b| a.merge(b, false))
            .merge(check_f64(&w, &p, Plant::None, &outside, true, false), false);
        print_walk("f64", &w, &t, &clock);
        failures += t.failures();
    }
    assert_eq!(failures, 0);
}

#[test]
#[ignore = "every f32 input (2^32 per walk), ml_dtypes' formats"]
fn full_f32_walk_ml_dtypes() {
    full_f32(Preset::MlDtypes);
}

#[test]
#[ignore = "every f32 input (2^32 per walk), ml_dtypes 0.6's formats"]
fn full_f32_walk_ml_dtypes_0_6() {
    full_f32(Preset::MlDtypes06);
}

#[test]
#[ignore = "every f32 input (2^32 per walk), nvidia's formats and GPU conversions"]
fn full_f32_walk_nvidia() {
    full_f32(Preset::Nvidia);
}

#[test]
#[ignore = "every f32 input (2^32 per walk), torch's formats"]
fn full_f32_walk_torch() {
    full_f32(Preset::Torch);
}

#[test]
#[ignore = "every f32 input (2^32 per walk), gfloat's formats"]
fn full_f32_walk_gfloat() {
    full_f32(Preset::Gfloat);
}

#[test]
#[ignore = "structured f64 walk (about 2.6e10 inputs per format)"]
fn full_f64_walk_ml_dtypes() {
    full_f64(Preset::MlDtypes);
}

#[test]
#[ignore = "structured f64 walk (about 2.6e10 inputs per format)"]
fn full_f64_walk_ml_dtypes_0_6() {
    full_f64(Preset::MlDtypes06);
}

#[test]
#[ignore = "structured f64 walk (about 2.6e10 inputs per format)"]
fn full_f64_walk_nvidia() {
    full_f64(Preset::Nvidia);
}

#[test]
#[ignore = "structured f64 walk (about 2.6e10 inputs per format)"]
fn full_f64_walk_torch() {
    full_f64(Preset::Torch);
}

#[test]
#[ignore = "structured f64 walk (about 2.6e10 inputs per format)"]
fn full_f64_walk_gfloat() {
    full_f64(Preset::Gfloat);
}
