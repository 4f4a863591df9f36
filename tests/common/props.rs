//! Shared pieces of the property suites (`tests/properties_*.rs`): the
//! proptest configuration, strategies for values and for orders of the
//! grammar (docs/ORDERS.md), operands exact in an order's input type, and
//! byte comparison with NaN as a class.
//!
//! # Case counts, seeds, failure files
//! - `PROPTEST_CASES=N` sets every property's case count (default: the
//!   small count each property names, so the whole set stays well under a
//!   minute of `cargo test --release`). The expensive properties (reveal,
//!   batch-invariance checks) run `N / 100` cases (at least 1) under it.
//! - The seed is fixed (so CI runs the same cases every time) unless
//!   `PROPTEST_RNG_SEED=S` is given; a deep run should vary it.
//! - Failure persistence is off: proptest writes no `proptest-regressions`
//!   files into the source tree. A failure prints the shrunk input; a case
//!   worth keeping is added to the suite as a named regression test.

#![allow(dead_code)] // each property file uses its own subset

use mxbi::format::Format;
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::order::{InType, Order};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

/// The fixed default seed (any value; changing it changes the CI cases).
pub const DEFAULT_SEED: u64 = 0x6D78_6269_7072_6F70;

/// `PROPTEST_CASES` if set, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// For expensive properties: `PROPTEST_CASES / 100` (at least 1) if set,
/// else `default`.
pub fn cases_expensive(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(default, |n| (n / 100).max(1))
}

/// The configuration of every property: `cases` cases, no failure files,
/// the fixed seed unless `PROPTEST_RNG_SEED` is set.
pub fn config(cases: u32) -> Config {
    let base = Config::default();
    let rng_seed = match std::env::var("PROPTEST_RNG_SEED") {
        Ok(_) => base.rng_seed,
        Err(_) => RngSeed::Fixed(DEFAULT_SEED),
    };
    Config {
        cases,
        // filters that keep one order in ~30 (e.g. lanes with a serial
        // reduction) must not abort a deep run
        max_local_rejects: cases.saturating_mul(64).max(65536),
        failure_persistence: None,
        rng_seed,
        ..base
    }
}

/// Runs a property outside the `proptest!` macro: `cases` cases of
/// `strategy` through `body` with [`config`]; panics with the shrunk
/// counterexample. The macro re-reads `PROPTEST_CASES` over any configured
/// count, so the expensive properties (whose deep count is
/// [`cases_expensive`]) run through this instead.
pub fn check<S: Strategy>(cases: u32, strategy: S, body: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let mut runner = TestRunner::new(config(cases));
    if let Err(e) = runner.run(&strategy, body) {
        panic!("{e}");
    }
}

/// Runs `body` over `strategy` as the property tests do (fixed seed, no
/// files) and returns the shrunk counterexample it fails on, or panics if
/// it holds. For the tests that show a property can fail: the body is run
/// against a planted, wrong implementation.
pub fn shrunk_failure<S: Strategy>(
    cases: u32,
    strategy: S,
    body: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> (String, S::Value)
where
    S::Value: std::fmt::Debug,
{
    let mut cfg = config(cases);
    cfg.rng_seed = RngSeed::Fixed(DEFAULT_SEED);
    let mut runner = TestRunner::new(cfg);
    match runner.run(&strategy, body) {
        Ok(()) => panic!("the property held against the planted error in {cases} cases"),
        Err(TestError::Fail(why, value)) => (why.to_string(), value),
        Err(TestError::Abort(why)) => panic!("aborted: {why}"),
    }
}

/// Bits of an f32 with every NaN mapped to one pattern (NaN compares as a
/// class: payloads and signs of NaN are not part of the contracts here).
pub fn class_bits(x: f32) -> u32 {
    if x.is_nan() {
        0x7FC0_0000
    } else {
        x.to_bits()
    }
}

/// The first index where `a` and `b` differ as [`class_bits`], if any.
pub fn first_difference(a: &[f32], b: &[f32]) -> Option<usize> {
    assert_eq!(a.len(), b.len());
    (0..a.len()).find(|&i| class_bits(a[i]) != class_bits(b[i]))
}

/// Finite f64 values spread over every binade a format can meet: a power
/// of two 2^e (e in `lo..=hi`) times a significand of up to 53 bits, either
/// sign; also exact small dyadic values (ties and exact codes). Shrinks
/// toward small exponents and simple significands.
pub fn f64_spread(lo: i32, hi: i32) -> impl Strategy<Value = f64> {
    let general = (any::<bool>(), lo..=hi, 0u64..(1 << 52)).prop_map(|(neg, e, m)| {
        let v = (1.0 + m as f64 / (1u64 << 52) as f64) * 2f64.powi(e);
        if neg {
            -v
        } else {
            v
        }
    });
    // few significant bits: the codes themselves and the midpoints between them
    let dyadic = (any::<bool>(), lo..=hi, 0u64..64).prop_map(|(neg, e, m)| {
        let v = (64 + m) as f64 / 64.0 * 2f64.powi(e);
        if neg {
            -v
        } else {
            v
        }
    });
    prop_oneof![3 => general, 2 => dyadic, 1 => Just(0.0), 1 => Just(-0.0)]
}

/// Any f32 bit pattern (Inf, NaN and subnormals included).
pub fn f32_bits() -> impl Strategy<Value = f32> {
    any::<u32>().prop_map(f32::from_bits)
}

// ----------------------------------------------------------------------
// Orders of the grammar
// ----------------------------------------------------------------------

/// An `mma(...)` family item with parameters the grammar accepts, and its
/// Kc.
pub fn mma_spec() -> impl Strategy<Value = (String, u32)> {
    (
        prop::sample::select(vec![4u32, 8, 16, 32]),
        prop::sample::select(vec![13u32, 24, 25, 30]),
        prop::sample::select(vec![None, Some(13u32), Some(23)]),
        prop::sample::select(vec!["", ",split=halves", ",split=mod4"]),
        prop::sample::select(vec!["", ",c=late"]),
        prop::sample::select(vec!["bf16", "f16", "e4m3", "e5m2", "f32"]),
    )
        .prop_map(|(k, f, out, split, c, inp)| {
            let out = out.map_or(String::new(), |o| format!(",out={o}"));
            (format!("mma(k={k},f={f}{out}{split}{c},in={inp})"), k)
        })
}

/// A plain `mma(...)` order (no keys).
pub fn mma_order() -> impl Strategy<Value = Order> {
    mma_spec().prop_map(|(s, _)| s.parse::<Order>().unwrap_or_else(|e| panic!("{s}: {e}")))
}

/// The family item of a spec (`fma`, `muladd`, an `mma(...)`, or a preset
/// that runs on plain operands) and its Kc (None: not mma; Some(0): a
/// preset, which sets its own promotion).
pub fn family_spec() -> impl Strategy<Value = (String, Option<u32>)> {
    let presets: Vec<String> = mxbi::order::PRESETS
        .iter()
        .filter(|(name, _)| *name != "blackwell-mxf8f6f4") // scale=fused: MX inputs only
        .map(|(name, _)| name.to_string())
        .collect();
    prop_oneof![
        3 => Just(("fma".to_string(), None)),
        2 => Just(("muladd".to_string(), None)),
        3 => mma_spec().prop_map(|(s, k)| (s, Some(k))),
        1 => prop::sample::select(presets).prop_map(|p| (p, Some(0))),
    ]
}

/// The keys of a spec for f32 operands, given the family's Kc (see
/// [`family_spec`]): parts (split, interleave, fresh tiles, lanes, lanes
/// with fresh tiles),
/// reduction (butterfly over lanes or over a split of 2 or 4 parts),
/// promotion (mma only), output.
pub fn keys_spec(kc: Option<u32>) -> impl Strategy<Value = String> {
    let promote = match kc {
        Some(k) if k > 0 => prop_oneof![3 => Just(None), 1 => (1u32..5).prop_map(move |x| Some(x * k))].boxed(),
        _ => Just(None).boxed(),
    };
    // how K is cut into parts: plain, contiguous split, interleaved split,
    // fresh tiles (with or without a split), GEMV lanes, lanes cut into
    // fresh k-tiles (a multiple of the lanes)
    let parts = (
        0u32..7,
        prop::sample::select(vec![1u32, 2, 3, 4, 7]),
        prop::sample::select(vec![1u32, 4, 16, 32, 64]),
        prop::sample::select(vec![1u32, 2, 4, 8]),
    )
        .prop_map(|(mode, split, ktile, lanes)| {
            // butterfly combines lanes, or the parts of a split, a power of two
            let parts2 = split > 1 && split.is_power_of_two();
            match mode {
                0 => (String::new(), false),
                1 => (format!(";split={split}"), parts2),
                2 => (format!(";ktile={ktile};split={split}/interleave"), parts2),
                3 => (format!(";ktile={ktile};tile=fresh"), false),
                4 => (format!(";ktile={ktile};tile=fresh;split={split}"), parts2),
                5 => (format!(";lanes={lanes}"), lanes > 1),
                _ => (format!(";lanes={lanes};ktile={};tile=fresh", lanes * ktile), lanes > 1),
            }
        });
    (
        parts,
        prop::sample::select(vec![None, Some("serial"), Some("pairwise"), Some("butterfly")]),
        promote,
        prop::sample::select(vec![None, None, Some("bf16"), Some("f16")]),
    )
        .prop_map(|((mut s, butterfly), reduce, promote, out)| {
            // butterfly only where it is allowed (lanes > 1, or a split of
            // 2 or 4 parts)
            if let Some(r) = reduce.filter(|&r| r != "butterfly" || butterfly) {
                s += &format!(";reduce={r}");
            }
            if let Some(p) = promote {
                s += &format!(";promote={p}");
            }
            if let Some(o) = out {
                s += &format!(";out={o}");
            }
            s
        })
}

/// Orders of the grammar that run on f32 operands (spec strings built from
/// [`family_spec`] and [`keys_spec`]; the few combinations the parser
/// rejects are dropped, so every value is a parsed order).
pub fn order() -> impl Strategy<Value = Order> {
    family_spec()
        .prop_flat_map(|(f, kc)| (Just(f), keys_spec(kc)))
        .prop_filter_map("rejected by the grammar", |(f, k)| {
            let spec = format!("{f}{k}");
            spec.parse::<Order>().ok()
        })
}

/// The input type an order's steps read (f32 for fma/muladd).
pub fn in_type(o: &Order) -> InType {
    o.mma().map_or(InType::F32, |m| m.input)
}

/// `n` values exactly representable in `t`, from the seed: codes of `t`
/// (every finite code, signed zeros, subnormals) or, for f32, values over a
/// wide exponent range; with `special`, about one in 64 values is Inf or NaN.
pub fn values_in(t: InType, n: usize, seed: u64, special: bool) -> Vec<f32> {
    let mut rng = mxbi::rng::SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            let r = rng.next_u64();
            if special && r.is_multiple_of(64) {
                return [f32::INFINITY, f32::NEG_INFINITY, f32::NAN][(r >> 8) as usize % 3];
            }
            match t.format() {
                Some(f) => loop {
                    let c = (rng.next_u64() % f.code_count() as u64) as u16;
                    let v = f.decode_f32(c);
                    if v.is_finite() {
                        break v;
                    }
                },
                None => {
                    let sign = ((r >> 63) as u32) << 31;
                    match (r >> 8) % 8 {
                        0 => f32::from_bits(sign),
                        1 => ((r >> 16) % 9) as f32 - 4.0,
                        _ => {
                            let e = ((r >> 16) % 60) as u32 + 127 - 30;
                            f32::from_bits(sign | e << 23 | (r >> 32) as u32 & 0x7F_FFFF)
                        }
                    }
                }
            }
        })
        .collect()
}

/// Exact small values: integers in `-range..=range` times `2^shift`
/// (dyadic, few significant bits), from the seed.
pub fn small_dyadic(n: usize, range: i64, shift: i32, seed: u64) -> Vec<f32> {
    let mut rng = mxbi::rng::SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            let v = (rng.next_u64() % (2 * range as u64 + 1)) as i64 - range;
            v as f32 * 2f32.powi(shift)
        })
        .collect()
}

/// A problem on f32 operands, B `[K, N]`.
pub fn problem<'a>(a: &'a [f32], b: &'a [f32], m: usize, k: usize, n: usize) -> Problem<'a> {
    Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m,
        n,
        k,
        b_layout: BLayout::Kn,
    }
}

/// Every format with its bits, for the format properties.
pub const FORMATS: [Format; 9] = Format::ALL;
