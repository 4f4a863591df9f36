//! Error metrics of one output against the golden, as the double
//! benchmark defines them (docs/ACCURACY.md, "Metrics"):
//!
//! | metric | formula |
//! |---|---|
//! | RE (element-wise) | `|a - g| / (|g| + 1e-7)` |
//! | MaxRE | max of RE |
//! | AvgRE | mean of RE |
//! | RMSE | `sqrt(mean((a - g)^2))` |
//! | EB (error balance) | `mean((a - g) / max(|g|, 1))` |
//!
//! Elements whose golden is NaN or Inf are not judged (they pass, as the
//! double benchmark rules); an output that is NaN or Inf where the golden
//! is finite is counted in [`Metrics::nonfinite`] and left out of the
//! sums, and the standards treat it (a fail for the output under test,
//! "cannot judge" for the benchmark). Sums run in element order in f64.

use super::table::RE_FLOOR;

/// The metrics of one output against the golden.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Metrics {
    /// Elements with a finite golden (judged).
    pub judged: usize,
    /// Elements with a NaN or Inf golden (not judged: they pass).
    pub golden_nonfinite: usize,
    /// Judged elements whose output is NaN or Inf.
    pub nonfinite: usize,
    pub max_re: f64,
    pub avg_re: f64,
    pub rmse: f64,
    pub eb: f64,
    /// Largest `|a - g|`.
    pub max_abs: f64,
    /// The element of MaxRE (first one on ties), if any was judged.
    pub max_re_at: Option<usize>,
}

/// `|a - g| / (|g| + 1e-7)`.
pub fn relative_error(a: f64, g: f64) -> f64 {
    (a - g).abs() / (g.abs() + RE_FLOOR)
}

/// The metrics of `out` against `golden` (same length).
pub fn metrics(out: &[f64], golden: &[f64]) -> Metrics {
    assert_eq!(out.len(), golden.len(), "metrics: lengths differ");
    let mut m = Metrics {
        judged: 0,
        golden_nonfinite: 0,
        nonfinite: 0,
        max_re: 0.0,
        avg_re: 0.0,
        rmse: 0.0,
        eb: 0.0,
        max_abs: 0.0,
        max_re_at: None,
    };
    let (mut sum_re, mut sum_sq, mut sum_eb, mut finite) = (0f64, 0f64, 0f64, 0usize);
    for (i, (&a, &g)) in out.iter().zip(golden).enumerate() {
        if !g.is_finite() {
            m.golden_nonfinite += 1;
            continue;
        }
        m.judged += 1;
        if !a.is_finite() {
            m.nonfinite += 1;
            continue;
        }
        finite += 1;
        let d = a - g;
        let re = relative_error(a, g);
        if m.max_re_at.is_none() || re > m.max_re {
            m.max_re = re;
            m.max_re_at = Some(i);
        }
        m.max_abs = m.max_abs.max(d.abs());
        sum_re += re;
        sum_sq += d * d;
        sum_eb += d / g.abs().max(1.0);
    }
    if finite > 0 {
        m.avg_re = sum_re / finite as f64;
        m.rmse = (sum_sq / finite as f64).sqrt();
        m.eb = sum_eb / finite as f64;
    }
    m
}
