//! Property suite: MX quantization and dequantization bounds per scale
//! mode (src/mx: FLOOR, CEIL, EVEN, RCEIL), for every MX format and preset.
//!
//! For a block with finite values and an unclamped scale `X = 2^E`:
//! - where the block maximum lands, `amax / X` (the contract of each mode):
//!   FLOOR `[2^emax, 2^(emax+1))` (the OCP rule; the maximum may
//!   saturate), CEIL `(2^(emax-1), 2^emax]` (never saturates), EVEN (amax
//!   rounded at the element's precision, then FLOOR)
//!   `[2^emax (1 - 2^-(m+2)), 2^emax (2 - 2^-(m+1)))`, RCEIL
//!   (`ceil_pow2(fl32(amax * fl32(1/max)))`) `(max/2 (1 - 2^-22), max (1 + 2^-22)]`;
//! - every element: `|x - dequant| <= X ulp(x / X) / 2` (one nearest
//!   rounding, `ulp` of the element format at `x / X`, 2^-6 for INT8) when
//!   `x / X` is in the element's range (`[-max, max]`; `[-2, max]` for
//!   MX INT8 where -2.0 is allowed), else the element is the range's end
//!   times X (saturated);
//! - so the block's largest error is at most `X * max(ulp_top / 2,
//!   (sat - max))`, `sat` the mode's upper end above.
//!
//! Also: the array quantizer (table and FP8 fast paths) gives, element by
//! element, the reference cast of `x / X` under the element policy, and
//! exact dequantization is `code value * X`.
//!
//! Case counts: `PROPTEST_CASES` (see tests/common/props.rs).

#[path = "common/props.rs"]
mod props;

use mxbi::format::{encode_f64, Format, Rounding};
use mxbi::mx::{dequantize_f64, quantize, quantize_block, AxisLayout, MxFormat, MxPolicy, MxPreset, ScaleMode};
use props::{config, shrunk_failure};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// Every (format, preset, scale mode) with a nearest element rounding.
fn policies() -> Vec<(MxFormat, &'static str, MxPolicy)> {
    let mut v = Vec::new();
    for f in MxFormat::ALL {
        for preset in MxPreset::ALL {
            for mode in ScaleMode::ALL {
                let mut p = preset.policy(f);
                p.scale_mode = mode;
                v.push((f, preset.name(), p));
            }
        }
    }
    v
}

/// A block of 1 to 32 finite f32 values around 2^center, spread over a few
/// binades, with zeros and both signs.
fn block() -> impl Strategy<Value = Vec<f32>> {
    (-60i32..60, 0i32..12).prop_flat_map(|(center, spread)| {
        prop::collection::vec(
            prop_oneof![
                8 => (any::<bool>(), -spread..=0i32, 0u32..(1 << 23)).prop_map(move |(neg, e, m)| {
                    let v = f32::from_bits(((127 + center + e) as u32) << 23 | m);
                    if neg { -v } else { v }
                }),
                1 => Just(0.0f32),
            ],
            1..=32,
        )
    })
}

/// Exponent of the element format's quantum at magnitude `v` (> 0).
fn ulp_exp(f: Format, v: f64) -> i32 {
    match f.minifloat() {
        Some(m) => {
            let e = v.log2().floor() as i32;
            // exact binade from the bits, not the float log2
            let e = if 2f64.powi(e) > v {
                e - 1
            } else if 2f64.powi(e + 1) <= v {
                e + 1
            } else {
                e
            };
            e.max(m.emin()) - m.mbits as i32
        }
        None => -6, // INT8: steps of 2^-6
    }
}

/// The upper end of `amax / X` for the mode (exclusive for FLOOR/EVEN).
fn sat_end(f: MxFormat, mode: ScaleMode) -> f64 {
    let emax = f.element().emax();
    let m = f.mbits() as i32;
    match mode {
        ScaleMode::Floor => 2f64.powi(emax + 1),
        ScaleMode::Ceil => 2f64.powi(emax),
        ScaleMode::Even => 2f64.powi(emax) * (2.0 - 2f64.powi(-(m + 1))),
        ScaleMode::Rceil => f.max_value() * (1.0 + 2f64.powi(-22)),
    }
}

/// The property body: the scale puts amax where the mode says and every
/// element is within its bound. `quant` quantizes one block.
fn block_within_bounds(
    f: MxFormat,
    p: &MxPolicy,
    x: &[f32],
    quant: impl Fn(&[f32], MxFormat, &MxPolicy) -> (u8, Vec<u8>),
) -> Result<(), TestCaseError> {
    let (s, codes) = quant(x, f, p);
    let el = f.element();
    let amax = x.iter().map(|v| v.abs() as f64).fold(0.0, f64::max);
    prop_assert!(s != 0xFF, "NaN scale for a finite block");
    let big_x = 2f64.powi(s as i32 - 127);
    let max = f.max_value();
    let emax = el.emax();
    let r = amax / big_x;
    if amax > 0.0 && s > 0 && s < 0xFE {
        let (lo, hi) = match p.scale_mode {
            ScaleMode::Floor => (2f64.powi(emax), 2f64.powi(emax + 1)),
            ScaleMode::Ceil => (
                2f64.powi(emax - 1) * (1.0 + f64::EPSILON),
                2f64.powi(emax) * (1.0 + f64::EPSILON),
            ),
            ScaleMode::Even => (
                2f64.powi(emax) * (1.0 - 2f64.powi(-(f.mbits() as i32 + 2))),
                sat_end(f, ScaleMode::Even),
            ),
            ScaleMode::Rceil => (
                max / 2.0 * (1.0 - 2f64.powi(-22)),
                sat_end(f, ScaleMode::Rceil) * (1.0 + f64::EPSILON),
            ),
        };
        prop_assert!(
            lo <= r && r < hi,
            "{} {:?}: amax / X = {} not in [{}, {})",
            f,
            p.scale_mode,
            r,
            lo,
            hi
        );
    }
    let sat = sat_end(f, p.scale_mode);
    let top_ulp = 2f64.powi(emax - f.mbits() as i32);
    let block_bound = big_x * (top_ulp / 2.0).max(sat - max);
    for (v, &c) in x.iter().zip(&codes) {
        let v = *v as f64;
        let d = el.decode_f64(c as u16) * big_x;
        let err = (v - d).abs();
        // INT8 is two's complement: -2.0 (code 0x80) where the policy allows it
        let lowest = if f == MxFormat::Int8 && p.element.int8_allow_neg2 {
            -2.0
        } else {
            -max
        };
        if (lowest..=max).contains(&(v / big_x)) {
            let bound = if v == 0.0 {
                0.0
            } else {
                big_x * 2f64.powi(ulp_exp(el, v.abs() / big_x)) / 2.0
            };
            prop_assert!(
                err <= bound,
                "{} {:?}: {:e} -> {:#x} = {:e}, error {:e} > {:e}",
                f,
                p.scale_mode,
                v,
                c,
                d,
                err,
                bound
            );
        } else {
            let end = if v < 0.0 { lowest } else { max };
            prop_assert_eq!(
                d,
                end * big_x,
                "{} {:?}: {:e} beyond the range not saturated",
                f,
                p.scale_mode,
                v
            );
        }
        prop_assert!(
            err <= block_bound,
            "{} {:?}: error {:e} above the block bound {:e}",
            f,
            p.scale_mode,
            err,
            block_bound
        );
    }
    Ok(())
}

fn crate_block(x: &[f32], f: MxFormat, p: &MxPolicy) -> (u8, Vec<u8>) {
    quantize_block(x, f, p).unwrap_or_else(|e| panic!("{f}: {e}"))
}

proptest! {
    #![proptest_config(config(props::cases(1000)))]

    /// The block scale puts amax in the mode's range and every element's
    /// error is within half an element ulp (or saturated), per scale mode.
    #[test]
    fn quantization_error_is_within_the_scale_mode_bound(
        (f, _preset, p) in prop::sample::select(policies()),
        x in block(),
    ) {
        prop_assume!(p.element.rounding != Rounding::Stochastic);
        block_within_bounds(f, &p, &x, crate_block)?;
    }

    /// The array quantizer (table / FP8 fast paths, any axis) gives the
    /// reference cast of x / X for every element, and dequantization is
    /// exactly code value times X.
    #[test]
    fn quantize_codes_are_the_reference_cast_of_x_over_the_scale(
        (f, _preset, p) in prop::sample::select(policies()),
        rows in prop::collection::vec(block(), 1..4),
        block_log in 0u32..6,
    ) {
        let shortest = rows.iter().map(|r| r.len()).min().unwrap();
        // the block: 2^block_log, at most the largest power of two in the shortest row
        let b = (1usize << block_log).min(1 << shortest.ilog2());
        let len = shortest / b * b;
        let x: Vec<f32> = rows.iter().flat_map(|r| r[..len].iter().copied()).collect();
        let layout = AxisLayout::new(&[rows.len(), len], -1, b, false).unwrap();
        let q = quantize(&x, &layout, f, &p).unwrap();
        let deq = dequantize_f64(&q.codes, &q.scales, &layout, f).unwrap();
        for (i, &v) in x.iter().enumerate() {
            let s = q.scales[i / b];
            prop_assert!(s != 0xFF);
            let scaled = v as f64 * 2f64.powi(127 - s as i32); // exact
            let want = encode_f64(scaled, f.element(), &p.element, 0).unwrap();
            prop_assert_eq!(q.codes[i] as u16, want, "{} {:?} x[{}] = {:e}, scale {:#x}", f, p.scale_mode, i, v, s);
            prop_assert_eq!(deq[i], f.element().decode_f64(want) * 2f64.powi(s as i32 - 127));
        }
        // one block at a time gives the same bytes
        for (blk, chunk) in x.chunks(b).enumerate() {
            let (s, c) = crate_block(chunk, f, &p);
            prop_assert_eq!(s, q.scales[blk]);
            prop_assert_eq!(&c[..], &q.codes[blk * b..blk * b + chunk.len()]);
        }
    }
}

/// The bound property can fail: a quantizer whose FLOOR scale is one
/// binade too small (a planted off-by-one exponent) saturates blocks beyond
/// the bound; shrinking gives a one- or two-element block.
#[test]
fn bound_property_catches_a_planted_scale_off_by_one() {
    let f = MxFormat::Fp8E4M3;
    let p = MxPreset::Ocp.policy(f);
    let planted = |x: &[f32], f: MxFormat, p: &MxPolicy| {
        let (s, _) = crate_block(x, f, p);
        let s = s.saturating_sub(1).max(1);
        let codes = x
            .iter()
            .map(|v| {
                let scaled = *v as f64 * 2f64.powi(127 - s as i32);
                encode_f64(scaled, f.element(), &p.element, 0).unwrap() as u8
            })
            .collect();
        (s, codes)
    };
    let (why, x) = shrunk_failure(500, block(), |x| block_within_bounds(f, &p, &x, planted));
    assert!(x.len() <= 2, "{x:?}: {why}");
}
