//! Scoped tolerances: from a sweep of cases, each tagged with a scope (for
//! example `bf16 bias=on`), the observed worst absolute, relative and ULP
//! error per scope, and a proposed `atol` (with `rtol = 0`) and `rtol`
//! (with `atol = 0`) above the observed worst and below one `eps` of the
//! output type, or the reason why that is impossible.
//!
//! The proposal is the smallest number of the form `{1, 2, 5} x 10^e`
//! strictly above the worst, else the smallest two-significant-digit
//! number above it, as long as it stays below `eps`; a scope whose worst
//! is 0 is bit-identical and gets 0. Why below one `eps`: a tolerance of a
//! whole step at 1.0 hides any regression of one ULP there, so the bound
//! must come from the observed worst, not from the type alone.

use super::ulp;
use crate::io::DType;
use std::collections::BTreeMap;

/// One case of a sweep: its output and what it is compared with (a
/// same-precision reference, or the golden rounded to the output type).
#[derive(Clone, Copy, Debug)]
pub struct Sample<'a> {
    pub scope: &'a str,
    pub dtype: DType,
    pub actual: &'a [f64],
    pub expected: &'a [f64],
}

/// Where a worst value was seen.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct At {
    pub case: usize,
    pub index: usize,
    pub actual: f64,
    pub expected: f64,
}

/// A proposed tolerance, or why none fits.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Proposal {
    Value { value: f64 },
    Impossible { why: String },
}

/// The observations and proposals of one scope.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Scope {
    pub scope: String,
    pub dtype: &'static str,
    pub cases: usize,
    pub elements: usize,
    pub worst_abs: f64,
    pub worst_abs_at: Option<At>,
    /// `|a - e| / |e|` over elements with `e != 0`.
    pub worst_rel: f64,
    /// Elements with `e == 0` and `a != 0` (no rtol covers them).
    pub zero_expected_mismatches: usize,
    pub worst_ulp: u64,
    /// `finfo(dtype).eps`.
    pub eps: f64,
    /// The type's step at the worst absolute error's expected value.
    pub step_at_worst: Option<f64>,
    pub atol: Proposal,
    pub rtol: Proposal,
}

/// The smallest `{1,2,5} x 10^e` above `x`, else the smallest two-digit
/// `d.d x 10^e` above `x`, if below `limit`.
pub fn round_above(x: f64, limit: f64) -> Option<f64> {
    if x == 0.0 {
        return Some(0.0);
    }
    let e0 = x.log10().floor() as i32 - 1;
    let two_digits: Vec<f64> = (10..100).map(|d| d as f64 / 10.0).collect();
    for digits in [&[1.0, 2.0, 5.0][..], &two_digits[..]] {
        let first_above = (e0..e0 + 3).find_map(|e| {
            digits.iter().find_map(|&d| {
                let v: f64 = format!("{d}e{e}").parse().expect("a number");
                (v > x).then_some(v)
            })
        });
        if let Some(v) = first_above.filter(|&v| v < limit) {
            return Some(v);
        }
    }
    None
}

fn propose(kind: &str, worst: f64, eps: f64, blocker: Option<String>) -> Proposal {
    if let Some(why) = blocker {
        return Proposal::Impossible { why };
    }
    if !worst.is_finite() {
        return Proposal::Impossible {
            why: format!("the worst {kind} error is {worst}"),
        };
    }
    if worst >= eps {
        return Proposal::Impossible {
            why: format!(
                "the worst {kind} error {worst:e} is at least one eps ({eps:e}): a bound below one eps cannot cover it"
            ),
        };
    }
    match round_above(worst, eps) {
        Some(value) => Proposal::Value { value },
        None => Proposal::Impossible {
            why: format!("no two-digit number lies between the worst {kind} error {worst:e} and eps {eps:e}"),
        },
    }
}

/// Observations and proposals per scope, in scope-name order. Elements
/// where both values are NaN, or equal infinities, agree; any other
/// non-finite pair makes both proposals impossible for that scope.
pub fn scoped(samples: &[Sample]) -> Result<Vec<Scope>, String> {
    let mut by: BTreeMap<&str, Vec<(usize, &Sample)>> = BTreeMap::new();
    for (i, s) in samples.iter().enumerate() {
        if s.actual.len() != s.expected.len() {
            return Err(format!("case {i} ({}): actual and expected lengths differ", s.scope));
        }
        by.entry(s.scope).or_default().push((i, s));
    }
    let mut out = Vec::new();
    for (scope, cases) in by {
        let dtype = cases[0].1.dtype;
        if let Some((i, s)) = cases.iter().find(|(_, s)| s.dtype != dtype) {
            return Err(format!(
                "scope {scope}: case {i} is {} but the scope's first case is {}",
                s.dtype.name(),
                dtype.name()
            ));
        }
        let eps = ulp::eps(dtype)?;
        let (mut worst_abs, mut worst_rel, mut worst_ulp) = (0f64, 0f64, 0u64);
        let mut at = None;
        let (mut zero_mis, mut elements, mut nonfinite) = (0usize, 0usize, 0usize);
        for &(ci, s) in &cases {
            for (j, (&a, &e)) in s.actual.iter().zip(s.expected).enumerate() {
                elements += 1;
                if !a.is_finite() || !e.is_finite() {
                    if !((a.is_nan() && e.is_nan()) || a == e) {
                        nonfinite += 1;
                    }
                    continue;
                }
                let d = (a - e).abs();
                if d > worst_abs {
                    worst_abs = d;
                    at = Some(At {
                        case: ci,
                        index: j,
                        actual: a,
                        expected: e,
                    });
                }
                if e == 0.0 {
                    zero_mis += (a != 0.0) as usize;
                } else {
                    worst_rel = worst_rel.max(d / e.abs());
                }
                if let Some(u) =
                    ulp::distance(a, e, dtype).map_err(|x| format!("scope {scope}, case {ci}, element {j}: {x}"))?
                {
                    worst_ulp = worst_ulp.max(u);
                }
            }
        }
        let nf = (nonfinite > 0).then(|| format!("{nonfinite} elements disagree on NaN/Inf: no tolerance covers them"));
        let rtol_block = nf.clone().or_else(|| {
            (zero_mis > 0)
                .then(|| format!("{zero_mis} elements expect exactly 0 and got nonzero: only an atol covers them"))
        });
        out.push(Scope {
            scope: scope.to_string(),
            dtype: dtype.name(),
            cases: cases.len(),
            elements,
            worst_abs,
            step_at_worst: at.as_ref().map(|a| ulp::step(dtype, a.expected)).transpose()?,
            worst_abs_at: at,
            worst_rel,
            zero_expected_mismatches: zero_mis,
            worst_ulp,
            eps,
            atol: propose("absolute", worst_abs, eps, nf),
            rtol: propose("relative", worst_rel, eps, rtol_block),
        });
    }
    Ok(out)
}
