//! Property suite: element formats (FP8 e4m3/e5m2, FP6 e2m3/e3m2, FP4 e2m1,
//! MX INT8, E8M0, bf16, f16) under every cast preset and every deterministic
//! rounding mode with both overflow policies.
//!
//! The reference here is written from the documented rules alone, without
//! the crate's rounding code: the code of `x` is found by searching the
//! format's value table (decode) for the two neighbours of `|x|` and
//! choosing between them by the rounding mode (ties by the even code, or
//! away); one virtual value past the largest finite one (`max + ulp`) stands
//! for overflow, which the policy turns into max, Inf, NaN or an error.
//! INT8 is rounded as an integer count of 2^-6; E8M0 by its documented rule.
//! The crate's one reference rounding, `round_to_quantum`, is itself checked
//! against integer rounding of the scaled value in f64.
//!
//! Case counts: `PROPTEST_CASES` (see tests/common/props.rs).

#[path = "common/props.rs"]
mod props;

use mxbi::format::{
    cast_f32_slice, cast_f64_slice, encode_e8m0_f64, encode_f32, encode_f64, round_to_quantum, CastPolicy, CastPreset,
    CodesMut, E8m0Negative, E8m0Rule, E8m0Zero, Format, Fp8Rne, Overflow, Rounding, Simd, Stochastic,
};
use props::{config, f32_bits, f64_spread, shrunk_failure};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::HashMap;
use std::sync::OnceLock;

/// What a cast must give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Code(u16),
    /// Some NaN code of the format (payload rules are tested elsewhere).
    Nan,
    /// The cast fails (no Inf/NaN to overflow into, NaN not representable).
    Err,
}

/// One (format, policy) under test, with a label for messages.
#[derive(Clone, Copy, Debug)]
struct Case {
    format: Format,
    label: &'static str,
    p: CastPolicy,
}

const MODES: [Rounding; 5] = [
    Rounding::NearestEven,
    Rounding::NearestAway,
    Rounding::TowardZero,
    Rounding::Up,
    Rounding::Down,
];

fn mode_label(r: Rounding, o: Overflow) -> &'static str {
    match (r, o) {
        (Rounding::NearestEven, Overflow::Saturate) => "ieee nearest-even saturate",
        (Rounding::NearestEven, Overflow::NonFinite) => "ieee nearest-even nonfinite",
        (Rounding::NearestAway, Overflow::Saturate) => "ieee nearest-away saturate",
        (Rounding::NearestAway, Overflow::NonFinite) => "ieee nearest-away nonfinite",
        (Rounding::TowardZero, Overflow::Saturate) => "ieee toward-zero saturate",
        (Rounding::TowardZero, Overflow::NonFinite) => "ieee toward-zero nonfinite",
        (Rounding::Up, Overflow::Saturate) => "ieee up saturate",
        (Rounding::Up, Overflow::NonFinite) => "ieee up nonfinite",
        (Rounding::Down, Overflow::Saturate) => "ieee down saturate",
        (Rounding::Down, Overflow::NonFinite) => "ieee down nonfinite",
        _ => "ieee stochastic",
    }
}

/// Every (format, policy): the four presets, and the IEEE policy with each
/// deterministic rounding mode and both overflow policies.
fn cases_all() -> Vec<Case> {
    let mut v = Vec::new();
    for format in Format::ALL {
        for preset in CastPreset::ALL {
            v.push(Case {
                format,
                label: preset.name(),
                p: preset.policy(format),
            });
        }
        for r in MODES {
            for o in [Overflow::Saturate, Overflow::NonFinite] {
                let mut p = CastPolicy::ieee(format);
                p.rounding = r;
                p.overflow = o;
                v.push(Case {
                    format,
                    label: mode_label(r, o),
                    p,
                });
            }
        }
    }
    v.retain(|c| c.p.validate(c.format).is_ok());
    v
}

/// Exponent range of inputs worth drawing for a format: from below its
/// smallest subnormal to past its overflow threshold.
fn exponent_range(f: Format) -> (i32, i32) {
    match f.minifloat() {
        Some(m) => (m.emin() - m.mbits as i32 - 3, m.emax() + 3),
        None if f == Format::E8M0 => (-131, 130),
        None => (-10, 4), // INT8
    }
}

/// A case and a finite f64 input in its interesting range.
fn case_and_f64(filter: fn(&Case) -> bool) -> impl Strategy<Value = (Case, f64)> {
    let cases: Vec<Case> = cases_all().into_iter().filter(filter).collect();
    prop::sample::select(cases).prop_flat_map(|c| {
        let (lo, hi) = exponent_range(c.format);
        (Just(c), f64_spread(lo, hi))
    })
}

/// A case and a non-NaN f32 input: any bits, or a value in its range.
fn case_and_f32() -> impl Strategy<Value = (Case, f32)> {
    prop::sample::select(cases_all()).prop_flat_map(|c| {
        let (lo, hi) = exponent_range(c.format);
        let x = prop_oneof![
            f32_bits().prop_filter("NaN has its own rules", |x| !x.is_nan()),
            f64_spread(lo, hi).prop_map(|x| x as f32),
        ];
        (Just(c), x)
    })
}

/// Finite magnitudes of a sign-magnitude format by magnitude code (0..=max).
fn magnitudes(f: Format) -> &'static [f64] {
    static TABLES: OnceLock<HashMap<Format, Vec<f64>>> = OnceLock::new();
    let t = TABLES.get_or_init(|| {
        Format::ALL
            .into_iter()
            .filter_map(|f| {
                let m = f.minifloat()?;
                Some((f, (0..=m.max_mag()).map(|c| f.decode_f64(c)).collect()))
            })
            .collect()
    });
    &t[&f]
}

/// Index chosen between the neighbours `lo` (value `vlo`) and `lo + 1`
/// (value `vhi`) of a positive `a` strictly between them. `down`: the mode
/// rounds this magnitude toward zero (Some(true)) or away (Some(false));
/// None: nearest, with `away` breaking ties.
fn choose(a: f64, lo: usize, vlo: f64, vhi: f64, down: Option<bool>, away: bool) -> usize {
    match down {
        Some(true) => lo,
        Some(false) => lo + 1,
        None => {
            // 2a, vlo + vhi are exact in f64 (few significant bits, close binades)
            let (two_a, mid2) = (2.0 * a, vlo + vhi);
            if two_a < mid2 {
                lo
            } else if two_a > mid2 || away || lo % 2 == 1 {
                lo + 1
            } else {
                lo
            }
        }
    }
}

/// Whether `mode` rounds a magnitude of this sign down (None: nearest).
fn rounds_down(mode: Rounding, negative: bool) -> Option<bool> {
    match mode {
        Rounding::TowardZero => Some(true),
        Rounding::Up => Some(negative),
        Rounding::Down => Some(!negative),
        _ => None,
    }
}

/// The reference cast of a finite or infinite (not NaN) f64.
fn reference(x: f64, f: Format, p: &CastPolicy) -> Want {
    let x = if p.f64_via_f32 { x as f32 as f64 } else { x };
    let w = match f {
        Format::E8M0 => reference_e8m0(x, p),
        Format::Int8 => reference_int8(x, p),
        _ => reference_minifloat(x, f, p),
    };
    match w {
        Want::Code(c) if f.is_nan_code(c) => Want::Nan,
        w => w,
    }
}

fn reference_minifloat(x: f64, f: Format, p: &CastPolicy) -> Want {
    let mf = f.minifloat().unwrap();
    let neg = x.is_sign_negative();
    let sign = if neg { mf.sign_mask() } else { 0 };
    let max = mf.max_mag() as usize;
    let overflow = |from_inf: bool| -> Want {
        let to_max = p.overflow == Overflow::Saturate || (!from_inf && rounds_down(p.rounding, neg) == Some(true));
        if to_max {
            Want::Code(sign | max as u16)
        } else if let Some(inf) = mf.inf_mag() {
            Want::Code(sign | inf)
        } else if mf.has_nan() {
            Want::Nan
        } else {
            Want::Err
        }
    };
    let a = x.abs();
    if a == f64::INFINITY {
        return overflow(true);
    }
    if a == 0.0 {
        return Want::Code(sign);
    }
    let mags = magnitudes(f);
    let ovf_value = mags[max] + (mags[max] - mags[max - 1]);
    if a >= ovf_value {
        return if rounds_down(p.rounding, neg) == Some(true) {
            Want::Code(sign | max as u16)
        } else {
            overflow(false)
        };
    }
    let lo = mags.partition_point(|&v| v <= a) - 1;
    if mags[lo] == a {
        return Want::Code(sign | lo as u16);
    }
    let vhi = if lo == max { ovf_value } else { mags[lo + 1] };
    let c = choose(
        a,
        lo,
        mags[lo],
        vhi,
        rounds_down(p.rounding, neg),
        p.rounding == Rounding::NearestAway,
    );
    if c > max {
        overflow(false)
    } else {
        Want::Code(sign | c as u16)
    }
}

fn reference_int8(x: f64, p: &CastPolicy) -> Want {
    let neg = x.is_sign_negative();
    let lo: i64 = if p.int8_allow_neg2 { -128 } else { -127 };
    let clamp = |from_inf: bool| -> Want {
        let to_max = !from_inf && rounds_down(p.rounding, neg) == Some(true);
        if p.overflow == Overflow::NonFinite && !to_max {
            Want::Err
        } else {
            Want::Code(if neg { lo as i8 as u8 as u16 } else { 127 })
        }
    };
    if x.is_infinite() {
        return clamp(true);
    }
    if x.abs() >= 1024.0 {
        return clamp(false);
    }
    let v = x * 64.0; // exact
    let r = match p.rounding {
        Rounding::NearestEven => v.round_ties_even(),
        Rounding::NearestAway => v.round(),
        Rounding::TowardZero => v.trunc(),
        Rounding::Up => v.ceil(),
        _ => v.floor(),
    } as i64;
    if (lo..=127).contains(&r) {
        Want::Code(r as i8 as u8 as u16)
    } else {
        clamp(false)
    }
}

fn reference_e8m0(x: f64, p: &CastPolicy) -> Want {
    if x == 0.0 {
        return Want::Code(match p.e8m0_zero {
            E8m0Zero::Nan => 0xFF,
            E8m0Zero::Min => 0x00,
        });
    }
    if x < 0.0 {
        match p.e8m0_negative {
            E8m0Negative::Nan => return Want::Code(0xFF),
            E8m0Negative::Min => return Want::Code(0x00),
            E8m0Negative::Abs => {}
        }
    }
    let a = x.abs();
    let overflow = |from_inf: bool| {
        let to_max = p.overflow == Overflow::Saturate || (!from_inf && rounds_down(p.rounding, false) == Some(true));
        Want::Code(if to_max { 0xFE } else { 0xFF })
    };
    if a == f64::INFINITY {
        return overflow(true);
    }
    let value = |b: usize| 2f64.powi(b as i32 - 127);
    if a < value(0) {
        return Want::Code(0x00); // below 2^-127: the smallest scale, every mode
    }
    if a >= 2f64.powi(128) {
        return if rounds_down(p.rounding, false) == Some(true) {
            Want::Code(0xFE)
        } else {
            overflow(false)
        };
    }
    let lo = (0..=254).rev().find(|&b| value(b) <= a).unwrap();
    if value(lo) == a {
        return Want::Code(lo as u16);
    }
    let b = if p.e8m0_rule == E8m0Rule::ImplicitBit && a < value(1) {
        1 // (2^-127, 2^-126): above the smallest scale, no implicit bit to round on
    } else {
        choose(
            a,
            lo,
            value(lo),
            value(lo + 1),
            rounds_down(p.rounding, false),
            p.rounding == Rounding::NearestAway,
        )
    };
    if b > 254 {
        overflow(false)
    } else {
        Want::Code(b as u16)
    }
}

/// What the crate's cast gave, as a [`Want`].
fn got(r: Result<u16, mxbi::format::CastError>, f: Format) -> Want {
    match r {
        Ok(c) if f.is_nan_code(c) => Want::Nan,
        Ok(c) => Want::Code(c),
        Err(_) => Want::Err,
    }
}

/// The property body: `encode` agrees with the reference on `x`.
fn encode_matches_reference(
    c: &Case,
    x: f64,
    encode: impl Fn(f64, Format, &CastPolicy) -> Want,
) -> Result<(), TestCaseError> {
    let want = reference(x, c.format, &c.p);
    let have = encode(x, c.format, &c.p);
    prop_assert_eq!(have, want, "{} {} x = {:e} ({:#x})", c.format, c.label, x, x.to_bits());
    Ok(())
}

fn crate_encode_f64(x: f64, f: Format, p: &CastPolicy) -> Want {
    got(encode_f64(x, f, p, 0), f)
}

proptest! {
    #![proptest_config(config(props::cases(2000)))]

    /// encode_f64 of any finite or infinite f64 is the reference rounding,
    /// for every format, preset and deterministic mode.
    #[test]
    fn encode_f64_equals_the_reference_rounding((c, x) in case_and_f64(|_| true)) {
        encode_matches_reference(&c, x, crate_encode_f64)?;
    }

    /// encode_f32 (and the E8M0 f32 encoder) of any f32 is the reference
    /// rounding of its exact value.
    #[test]
    fn encode_f32_equals_the_reference_rounding((c, x) in case_and_f32()) {
        let want = reference(x as f64, c.format, &c.p);
        prop_assert_eq!(got(encode_f32(x, c.format, &c.p, 0), c.format), want,
            "{} {} x = {:e} ({:#x})", c.format, c.label, x, x.to_bits());
    }

    /// Monotone: x <= y gives value(encode(x)) <= value(encode(y)) whenever
    /// neither is NaN; a NaN or an error comes only from an overflow in a
    /// format without Inf under non-finite overflow (docs: presets table).
    #[test]
    fn encoding_is_monotone(
        (c, x) in case_and_f64(|_| true),
        y in f64_spread(-140, 130),
        t in 0.0f64..1.0,
    ) {
        // a y in the case's range near x half the time
        let y = if t < 0.5 { x + (y - x) * t } else { y };
        let (f, p) = (c.format, &c.p);
        // E8M0 has no sign: its order is that of |x| (negatives follow a policy)
        let (x, y) = if f == Format::E8M0 { (x.abs(), y.abs()) } else { (x, y) };
        let (x, y) = if x <= y { (x, y) } else { (y, x) };
        let (cx, cy) = (encode_f64(x, f, p, 0), encode_f64(y, f, p, 0));
        for (v, r) in [(x, &cx), (y, &cy)] {
            let v = if p.f64_via_f32 { v as f32 as f64 } else { v };
            let exceptional = match r {
                Ok(code) => f.is_nan_code(*code),
                Err(_) => true,
            };
            if exceptional {
                let allowed = if f == Format::E8M0 {
                    v == 0.0 || (v > f.max_value() && p.overflow == Overflow::NonFinite)
                } else {
                    v.abs() > f.max_value() && p.overflow == Overflow::NonFinite && !f.has_inf()
                };
                prop_assert!(allowed, "{} {}: {:e} -> {:?}", f, c.label, v, r);
            }
        }
        if let (Ok(a), Ok(b)) = (cx, cy) {
            if !f.is_nan_code(a) && !f.is_nan_code(b) {
                prop_assert!(f.decode_f64(a) <= f.decode_f64(b),
                    "{} {}: {:e} -> {:#x} ({}) but {:e} -> {:#x} ({})",
                    f, c.label, x, a, f.decode_f64(a), y, b, f.decode_f64(b));
            }
        }
    }

    /// Encoding a decoded code gives the code back: encode(decode(encode(x)))
    /// = encode(x) for every x whose code is finite.
    #[test]
    fn encode_of_a_decoded_code_is_that_code((c, x) in case_and_f64(|_| true)) {
        let (f, p) = (c.format, &c.p);
        if let Ok(code) = encode_f64(x, f, p, 0) {
            let v = f.decode_f64(code);
            if v.is_finite() && !(f == Format::Int8 && code == 0x80 && !p.int8_allow_neg2) {
                prop_assert_eq!(encode_f64(v, f, p, 0).ok(), Some(code), "{} {} x = {:e}", f, c.label, x);
            }
        }
    }

    /// Stochastic rounding gives one of the two neighbours of x (the
    /// nearest-down or nearest-up code), whatever the seed and index.
    #[test]
    fn stochastic_rounding_picks_a_neighbour(
        (c, x) in case_and_f64(|c| c.label.ends_with("saturate") && c.format != Format::E8M0),
        seed in any::<u64>(),
        bits in 1u32..=32,
        index in any::<u64>(),
    ) {
        let f = c.format;
        let mut p = c.p;
        p.rounding = Rounding::Stochastic;
        p.stochastic = Stochastic { seed, bits };
        let code = encode_f64(x, f, &p, index).unwrap();
        let (mut up, mut down) = (c.p, c.p);
        up.rounding = Rounding::Up;
        down.rounding = Rounding::Down;
        let (u, d) = (encode_f64(x, f, &up, 0).unwrap(), encode_f64(x, f, &down, 0).unwrap());
        prop_assert!(code == u || code == d, "{} x = {:e}: {:#x} not in {{{:#x}, {:#x}}}", f, x, code, d, u);
    }

    /// The array paths (the table path for formats up to 8 bits, the FP8
    /// nearest-even fast path, the f64 path) give the scalar encoder's codes.
    #[test]
    fn slice_casts_equal_the_scalar_encoder(
        c in prop::sample::select(cases_all()),
        xs in prop::collection::vec(f32_bits(), 0..200),
    ) {
        let (f, p) = (c.format, &c.p);
        let want: Result<Vec<u16>, _> = xs.iter().enumerate().map(|(i, &x)| encode_f32(x, f, p, i as u64)).collect();
        let have: Result<Vec<u16>, _> = if f.bits() <= 8 {
            let mut out = vec![0u8; xs.len()];
            cast_f32_slice(&xs, CodesMut::U8(&mut out), f, p, 0).map(|_| out.iter().map(|&b| b as u16).collect())
        } else {
            let mut out = vec![0u16; xs.len()];
            cast_f32_slice(&xs, CodesMut::U16(&mut out), f, p, 0).map(|_| out)
        };
        prop_assert_eq!(have.is_ok(), want.is_ok(), "{} {}", f, c.label);
        if let (Ok(h), Ok(w)) = (&have, &want) {
            prop_assert_eq!(h, w, "{} {}", f, c.label);
        }
        let wide: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
        let want64: Result<Vec<u16>, _> = wide.iter().enumerate().map(|(i, &x)| encode_f64(x, f, p, i as u64)).collect();
        let mut out = vec![0u16; xs.len()];
        let have64 = cast_f64_slice(&wide, CodesMut::U16(&mut out), f, p, 0).map(|_| out);
        prop_assert_eq!(have64.ok(), want64.ok(), "{} {} (f64)", f, c.label);
    }

    /// The FP8 nearest-even fast path, at every vector level this CPU runs,
    /// gives the exact encoder's codes for any f32 bits.
    #[test]
    fn fp8_rne_fast_path_equals_the_exact_encoder(
        c in prop::sample::select(cases_all()),
        xs in prop::collection::vec(f32_bits(), 1..100),
    ) {
        let Some(fast) = Fp8Rne::new(c.format, &c.p) else { return Ok(()) };
        let want: Vec<u8> = xs.iter().map(|&x| encode_f32(x, c.format, &c.p, 0).unwrap() as u8).collect();
        for level in Simd::ALL {
            let mut out = vec![0u8; xs.len()];
            if fast.encode_at(level, &xs, 1.0, &mut out) {
                prop_assert_eq!(&out, &want, "{} {} {:?}", c.format, c.label, level);
            }
        }
    }
}

proptest! {
    #![proptest_config(config(props::cases(2000)))]

    /// The one reference rounding, `round_to_quantum(sig, exp, q)`, is the
    /// integer rounding (floor, ceil, ties to even, ties away, by mode and
    /// sign) of the exact value `sig * 2^(exp - q)`, computed in f64 where
    /// it is exact; stochastic rounding gives the floor or the ceiling.
    #[test]
    fn round_to_quantum_is_integer_rounding_of_the_scaled_value(
        sig in 1u64..(1 << 53),
        exp in -200i32..200,
        shift in -10i32..80,
        negative in any::<bool>(),
        mode in prop::sample::select(Rounding::ALL.to_vec()),
        draw in any::<u64>(),
        bits in 1u32..=32,
    ) {
        let q = exp + shift;
        let v = sig as f64 / 2f64.powi(shift); // exact: a power-of-two scaling
        let (lo, hi) = (v.floor(), v.ceil());
        let want = match mode {
            Rounding::NearestEven => Some(v.round_ties_even()),
            Rounding::NearestAway => Some(v.round()),
            Rounding::TowardZero => Some(lo),
            Rounding::Up => Some(if negative { lo } else { hi }),
            Rounding::Down => Some(if negative { hi } else { lo }),
            Rounding::Stochastic => None,
        };
        let r = draw >> (64 - bits);
        let got = round_to_quantum(sig as u128, exp, q, negative, mode, Some((bits, r))) as f64;
        match want {
            Some(w) => prop_assert_eq!(got, w, "{} * 2^{} at quantum 2^{} ({:?}, negative {})", sig, exp, q, mode, negative),
            None => prop_assert!(got == lo || got == hi, "stochastic {} not in [{}, {}]", got, lo, hi),
        }
    }
}

/// decode then encode gives back every code of every format, under every
/// preset and mode (stochastic included: exact values never round). The
/// documented exceptions are asserted as such: Inf under saturation gives
/// max, MX INT8 without -2.0 gives -127/64 for code 0x80, a NaN code gives
/// a NaN code.
#[test]
fn decode_then_encode_gives_back_every_code() {
    let mut checked = 0usize;
    let mut cases = cases_all();
    for format in Format::ALL {
        let mut p = CastPolicy::ieee(format);
        p.rounding = Rounding::Stochastic;
        p.stochastic = Stochastic { seed: 9, bits: 8 };
        cases.push(Case {
            format,
            label: "stochastic",
            p,
        });
    }
    for c in cases {
        let (f, p) = (c.format, &c.p);
        for code in (0..f.code_count()).map(|c| c as u16) {
            let v64 = f.decode_f64(code);
            let v32 = f.decode_f32(code);
            let want = if f.is_nan_code(code) {
                Want::Nan
            } else if v64.is_infinite() && p.overflow == Overflow::Saturate {
                Want::Code(code - 1) // the largest finite magnitude, same sign
            } else if f == Format::Int8 && code == 0x80 && !p.int8_allow_neg2 {
                Want::Code(0x81)
            } else {
                Want::Code(code)
            };
            let e64 = got(encode_f64(v64, f, p, code as u64), f);
            let e32 = got(encode_f32(v32, f, p, code as u64), f);
            assert_eq!(e64, want, "{f} {}: code {code:#x} = {v64:e} (f64)", c.label);
            assert_eq!(e32, want, "{f} {}: code {code:#x} = {v32:e} (f32)", c.label);
            if f == Format::E8M0 {
                assert_eq!(
                    got(Ok(encode_e8m0_f64(v64, p, 0) as u16), f),
                    want,
                    "{f} {}: {code:#x}",
                    c.label
                );
            }
            checked += 1;
        }
    }
    // 9 formats; bf16/f16 alone have 2 x 65536 codes per policy
    assert!(checked > 1_900_000, "{checked}");
}

/// The reference is itself checked on the documented edge values, so the
/// properties above compare against something that is right.
#[test]
fn reference_gives_the_documented_edge_codes() {
    let ml = |f: Format| CastPreset::MlDtypes.policy(f);
    let nv = |f: Format| CastPreset::Nvidia.policy(f);
    let ieee = |f: Format| CastPolicy::ieee(f);
    assert_eq!(
        reference(464.0, Format::E4M3, &ml(Format::E4M3)),
        Want::Code(0x7E),
        "tie to even max"
    );
    assert_eq!(
        reference(465.0, Format::E4M3, &ml(Format::E4M3)),
        Want::Nan,
        "E4M3 overflow -> NaN"
    );
    assert_eq!(
        reference(1e9, Format::E4M3, &nv(Format::E4M3)),
        Want::Code(0x7E),
        "satfinite"
    );
    assert_eq!(
        reference(61440.0, Format::E5M2, &ml(Format::E5M2)),
        Want::Code(0x7C),
        "tie to even Inf"
    );
    assert_eq!(
        reference(7.0, Format::E2M1, &ml(Format::E2M1)),
        Want::Code(0x07),
        "FP4 saturates"
    );
    assert_eq!(
        reference(7.0, Format::E2M1, &ieee(Format::E2M1)),
        Want::Err,
        "FP4 has no Inf/NaN"
    );
    assert_eq!(
        reference(0.25, Format::E2M1, &ml(Format::E2M1)),
        Want::Code(0x00),
        "tie to +0"
    );
    assert_eq!(
        reference(-0.75, Format::E2M1, &ml(Format::E2M1)),
        Want::Code(0x0A),
        "tie to even -1.0"
    );
    assert_eq!(
        reference(1.5, Format::E8M0, &ml(Format::E8M0)),
        Want::Code(0x80),
        "implicit bit: ties up"
    );
    assert_eq!(
        reference(1.5, Format::E8M0, &ieee(Format::E8M0)),
        Want::Code(0x80),
        "tie to even byte 128"
    );
    assert_eq!(
        reference(3.0, Format::E8M0, &ieee(Format::E8M0)),
        Want::Code(0x80),
        "tie to even byte 128"
    );
    assert_eq!(reference(0.0, Format::E8M0, &nv(Format::E8M0)), Want::Code(0x00));
    assert_eq!(reference(-2.0, Format::Int8, &ieee(Format::Int8)), Want::Code(0x80));
    let mut mx = ieee(Format::Int8);
    mx.int8_allow_neg2 = false;
    mx.overflow = Overflow::Saturate;
    assert_eq!(reference(-2.0, Format::Int8, &mx), Want::Code(0x81));
    assert_eq!(
        reference(2f64.powi(-131), Format::E8M0, &ieee(Format::E8M0)),
        Want::Code(0x00)
    );
}

/// The reference property can fail: an encoder with a planted tie error
/// (nearest-even policies rounded with ties away) is caught, and the shrunk
/// counterexample is a tie between two codes.
#[test]
fn encode_reference_property_catches_a_planted_tie_error() {
    let planted = |x: f64, f: Format, p: &CastPolicy| {
        let mut q = *p;
        if q.rounding == Rounding::NearestEven {
            q.rounding = Rounding::NearestAway;
        }
        got(encode_f64(x, f, &q, 0), f)
    };
    let rne = |c: &Case| c.p.rounding == Rounding::NearestEven && c.format != Format::E8M0;
    let (why, (c, x)) = shrunk_failure(4000, case_and_f64(rne), |(c, x)| {
        encode_matches_reference(&c, x, planted)
    });
    // a tie: ties-away and nearest-even differ only there
    let mut away = c.p;
    away.rounding = Rounding::NearestAway;
    let mut up = c.p;
    up.rounding = Rounding::Up;
    let mut down = c.p;
    down.rounding = Rounding::Down;
    let (u, d) = (
        encode_f64(x, c.format, &up, 0).map(|k| c.format.decode_f64(k)),
        encode_f64(x, c.format, &down, 0).map(|k| c.format.decode_f64(k)),
    );
    if let (Ok(u), Ok(d)) = (u, d) {
        if u.is_finite() && d.is_finite() {
            assert_eq!(2.0 * x, u + d, "not a tie: {x:e} ({why})");
        }
    }
    assert_ne!(reference(x, c.format, &c.p), reference(x, c.format, &away), "{why}");
}

/// The monotonicity property can fail: an encoder that drops the sign of
/// negative values below -1 is caught, with a small shrunk pair.
#[test]
fn monotone_property_catches_a_planted_sign_error() {
    let f = Format::E4M3;
    let p = CastPreset::Nvidia.policy(f);
    let planted = |x: f64| {
        let c = encode_f64(x, f, &p, 0).unwrap();
        if x < -1.0 {
            c & 0x7F
        } else {
            c
        }
    };
    let (why, (x, y)) = shrunk_failure(1000, (f64_spread(-8, 9), f64_spread(-8, 9)), |(x, y)| {
        let (x, y) = if x <= y { (x, y) } else { (y, x) };
        let (a, b) = (planted(x), planted(y));
        prop_assert!(f.decode_f64(a) <= f.decode_f64(b), "{x} -> {a:#x}, {y} -> {b:#x}");
        Ok(())
    });
    let lo = x.min(y);
    assert!(lo < -1.0, "{why}");
    // shrinking keeps the exponents small: both values within a few binades of 1
    assert!(x.abs() <= 2f64.powi(4) && y.abs() <= 2f64.powi(10), "{x} {y}: {why}");
}
