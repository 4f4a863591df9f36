//! The ULP view: per element, the distance in units in the last place
//! between the output and the golden rounded (once) to the output type; a
//! histogram, the worst elements, and the cancellation diagnostic
//! `c = sum |a_k b_k| / |sum a_k b_k|` that tells an error of many ULPs on
//! a result near zero (cancellation) from a kernel bug.
//!
//! Distance: the values of a type, ordered on the number line, are
//! numbered consecutively with +0 and -0 both 0 (the ordinal of a
//! sign-magnitude code is `+mag` or `-mag`); the distance is the
//! difference of ordinals. NaN and Inf have no ordinal.
//!
//! Labels of an element (docs/ACCURACY.md, "ULP view"):
//! * `exact`: 0 ULP; `rounding`: 1 ULP (what two correctly rounding
//!   computations can differ by);
//! * `cancellation`: more than 1 ULP, but the sum lost at least one binade
//!   (`c >= CANCELLATION_MIN_RATIO`) and the absolute error is at most one
//!   step of the output type at the magnitude of `sum |a_k b_k|`: the size
//!   of one rounding of an intermediate value at the scale of the terms;
//! * `excess`: more than 1 ULP and not explained so (look at the kernel);
//! * `unknown`: more than 1 ULP and no `sum |a_k b_k|` known (a golden
//!   read from a file);
//! * `nonfinite`: the output or the rounded golden is NaN or Inf.

use super::golden::element_format;
use super::table::CANCELLATION_MIN_RATIO;
use crate::format::pow2;
use crate::format::{encode_f64, CastPolicy};
use crate::io::DType;
use std::collections::BTreeMap;

/// Fraction bits and minimum normal exponent of an output type.
fn params(dtype: DType) -> Result<(u32, i32), String> {
    Ok(match dtype {
        DType::F64 => (52, -1022),
        DType::F32 => (23, -126),
        d => {
            let mf = element_format(d)?.minifloat().expect("float formats");
            (mf.mbits, mf.emin())
        }
    })
}

/// `finfo(dtype).eps`: the spacing of the type just above 1.0 (`2^-mbits`).
pub fn eps(dtype: DType) -> Result<f64, String> {
    Ok(pow2(-(params(dtype)?.0 as i32)))
}

/// The spacing of the type's values at magnitude `|x|` (the ULP of `x`;
/// subnormal spacing below the smallest normal). The exponent comes from
/// the bits of `x`, never from a float `log2`.
pub fn step(dtype: DType, x: f64) -> Result<f64, String> {
    let (mbits, emin) = params(dtype)?;
    let x = x.abs();
    let e = if x == 0.0 || !x.is_finite() {
        emin
    } else {
        let b = x.to_bits();
        let field = (b >> 52) as i32;
        let e = if field == 0 {
            -1074 + 63 - b.leading_zeros() as i32
        } else {
            field - 1023
        };
        e.max(emin)
    };
    Ok(pow2(e - mbits as i32))
}

/// The ordinal of `v` among the values of `dtype` (`None` for NaN/Inf);
/// an error when `v` is not a value of the type.
pub fn ordinal(v: f64, dtype: DType) -> Result<Option<i64>, String> {
    if !v.is_finite() {
        return Ok(None);
    }
    let signed = |neg: bool, mag: i64| if neg { -mag } else { mag };
    match dtype {
        DType::F64 => {
            let b = v.to_bits();
            Ok(Some(signed(b >> 63 != 0, (b & !(1 << 63)) as i64)))
        }
        DType::F32 => {
            let f = v as f32;
            if f as f64 != v {
                return Err(format!("{v:e} is not an f32 value"));
            }
            let b = f.to_bits();
            Ok(Some(signed(b >> 31 != 0, (b & 0x7FFF_FFFF) as i64)))
        }
        d => {
            let f = element_format(d)?;
            let code = encode_f64(v, f, &CastPolicy::ieee(f), 0).map_err(|e| e.to_string())?;
            let back = f.decode_f64(code);
            if back != v {
                return Err(format!("{v:e} is not a {} value", d.name()));
            }
            let mf = f.minifloat().expect("float formats");
            let mag = (code & (mf.sign_mask() - 1)) as i64;
            Ok(Some(signed(code & mf.sign_mask() != 0, mag)))
        }
    }
}

/// ULP distance between two values of `dtype` (`None` when either is NaN
/// or Inf).
pub fn distance(a: f64, b: f64, dtype: DType) -> Result<Option<u64>, String> {
    Ok(match (ordinal(a, dtype)?, ordinal(b, dtype)?) {
        (Some(x), Some(y)) => Some(x.abs_diff(y)),
        _ => None,
    })
}

/// What an element's ULP error is attributed to (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    Exact,
    Rounding,
    Cancellation,
    Excess,
    Unknown,
    Nonfinite,
}

/// `sum |a_k b_k| / |sum a_k b_k|` (Inf when the sum is 0 and a term is
/// not; 1 when every term is 0).
pub fn cancellation_ratio(abs_sum: f64, golden: f64) -> f64 {
    if golden == 0.0 {
        if abs_sum == 0.0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        abs_sum / golden.abs()
    }
}

/// The label of one element.
pub fn label(dtype: DType, ulp: Option<u64>, abs_err: f64, abs_sum: Option<f64>, golden: f64) -> Result<Label, String> {
    Ok(match ulp {
        None => Label::Nonfinite,
        Some(0) => Label::Exact,
        Some(1) => Label::Rounding,
        Some(_) => match abs_sum {
            None => Label::Unknown,
            Some(s) => {
                let c = cancellation_ratio(s, golden);
                if c >= CANCELLATION_MIN_RATIO && abs_err <= step(dtype, s)? {
                    Label::Cancellation
                } else {
                    Label::Excess
                }
            }
        },
    })
}

/// One element of the worst list.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Element {
    pub index: usize,
    pub output: f64,
    pub golden: f64,
    pub golden_rounded: f64,
    pub ulp: Option<u64>,
    pub abs_err: f64,
    /// `sum |a_k b_k| / |sum a_k b_k|`, when the terms are known.
    pub cancellation: Option<f64>,
    pub label: Label,
}

/// One histogram bin: ULP distances in `[lo, hi]`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Bin {
    pub lo: u64,
    pub hi: u64,
    pub count: usize,
}

/// The ULP view of one output.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct UlpView {
    pub dtype: &'static str,
    pub elements: usize,
    /// Largest finite distance.
    pub max_ulp: u64,
    /// Bins 0, 1, 2, 3-4, 5-8, ... up to the bin of `max_ulp`.
    pub histogram: Vec<Bin>,
    /// Elements per label.
    pub labels: BTreeMap<Label, usize>,
    /// The worst elements: largest distance first (non-finite first of
    /// all), then by index.
    pub worst: Vec<Element>,
}

/// The bin of a distance: 0 -> [0,0], 1 -> [1,1], else (2^(j-1), 2^j].
fn bin_of(d: u64) -> (u64, u64) {
    if d <= 1 {
        return (d, d);
    }
    let hi = d.next_power_of_two();
    (hi / 2 + 1, hi)
}

/// Elements with a distance above `ulps` (non-finite included), counted
/// per element.
pub fn count_over(out: &[f64], golden_rounded: &[f64], dtype: DType, ulps: u64) -> Result<usize, String> {
    let mut n = 0;
    for (&a, &g) in out.iter().zip(golden_rounded) {
        match distance(a, g, dtype)? {
            Some(d) if d <= ulps => {}
            _ => n += 1,
        }
    }
    Ok(n)
}

/// The ULP view of `out` against `golden_rounded` (the golden rounded to
/// `dtype`); `golden` (f64) and `abs_sum` feed the errors and labels.
/// Elements whose golden is NaN or Inf are skipped (not judged); an output
/// that is not a value of `dtype` is an error.
pub fn view(
    out: &[f64],
    golden: &[f64],
    golden_rounded: &[f64],
    abs_sum: Option<&[f64]>,
    dtype: DType,
    worst_n: usize,
) -> Result<UlpView, String> {
    let n = out.len();
    if golden.len() != n || golden_rounded.len() != n || abs_sum.is_some_and(|s| s.len() != n) {
        return Err("ulp view: lengths differ".into());
    }
    let mut bins: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    let mut labels = BTreeMap::new();
    // (distance, index) of the elements that are not exact; non-finite as u64::MAX
    let mut off: Vec<(u64, usize)> = Vec::new();
    let mut max_ulp = 0;
    let mut elements = 0;
    for i in 0..n {
        if !golden[i].is_finite() {
            continue;
        }
        elements += 1;
        let d = distance(out[i], golden_rounded[i], dtype).map_err(|e| format!("element {i}: {e}"))?;
        let abs_err = (out[i] - golden[i]).abs();
        let s = abs_sum.map(|s| s[i]);
        let l = label(dtype, d, abs_err, s, golden[i])?;
        *labels.entry(l).or_insert(0) += 1;
        if let Some(d) = d {
            *bins.entry(bin_of(d)).or_insert(0) += 1;
            max_ulp = max_ulp.max(d);
        }
        if d != Some(0) {
            off.push((d.unwrap_or(u64::MAX), i));
        }
    }
    // worst first: non-finite, then larger distance, then index
    off.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut worst = Vec::new();
    for &(_, i) in off.iter().take(worst_n) {
        let d = distance(out[i], golden_rounded[i], dtype)?;
        let abs_err = (out[i] - golden[i]).abs();
        let s = abs_sum.map(|s| s[i]);
        worst.push(Element {
            index: i,
            output: out[i],
            golden: golden[i],
            golden_rounded: golden_rounded[i],
            ulp: d,
            abs_err,
            cancellation: s.map(|s| cancellation_ratio(s, golden[i])),
            label: label(dtype, d, abs_err, s, golden[i])?,
        });
    }
    let top = bin_of(max_ulp).1;
    let mut histogram = Vec::new();
    let mut lo = 0;
    while lo <= top {
        let (l, h) = bin_of(lo);
        histogram.push(Bin {
            lo: l,
            hi: h,
            count: bins.get(&(l, h)).copied().unwrap_or(0),
        });
        lo = h + 1;
    }
    Ok(UlpView {
        dtype: dtype.name(),
        elements,
        max_ulp,
        histogram,
        labels,
        worst,
    })
}
