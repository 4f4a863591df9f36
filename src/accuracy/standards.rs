//! Accuracy standards: the verdict of each standard, from the one table of
//! numbers ([`super::table`], whose items this module also re-exports
//! under their old paths).
//!
//! Sources (the `source` column; docs/ACCURACY.md, "Sources"): §6 for the
//! double benchmark of the Ascend ATK (`cv_fused_double_benchmark`), its
//! per-dtype `error_thd` and EB limits, the stricter per-op limits, the
//! graded L0/L1/L2 scheme and the single-benchmark standard of the Ascend
//! opbase precision standard; §11 for msprobe's bands, its ULP and
//! binary-consistency methods, and PyTorch `assert_close` defaults.
//!
//! Standards (formulas in docs/ACCURACY.md, "Standards"):
//! * `atk` (alias `cv_fused_double_benchmark`): for MaxRE, AvgRE and RMSE,
//!   `ratio = metric(actual) / max(metric(benchmark), error_thd[dtype])`
//!   within the ratio limits, and `|EB(actual)|` within the EB limit.
//! * `atk-strict`: the same with the stricter per-op limits.
//! * `atk-l0`, `atk-l1`, `atk-l2`: the graded scheme's ratios (MaxRE,
//!   AvgRE, RMSE); every report also names the best level met.
//! * `single`: no benchmark; pass iff `AvgRE < T[dtype]` and
//!   `MaxRE < 10 T[dtype]`.
//! * `msprobe`: `ratio = metric(actual) / metric(benchmark)` for RMSE and
//!   MaxRE (0/0 counts as 1, x/0 as Inf: the notes do not say), each
//!   `pass` up to the pass limit, `warn` up to the warn limit, `error`
//!   above; the worst band is the verdict (`warn` exits 0).
//! * `msprobe-ulp`: the share of elements more than `ulp_thd[dtype]` ULP
//!   from the rounded golden is below 0.1%, or below the benchmark's.
//! * `msprobe-binary`: every output element is bit-identical to the
//!   benchmark's (error rate 0).
//! * `assert-close`: `|a - g| <= atol + rtol |g|` for every element, with
//!   PyTorch's defaults for the dtype unless given; NaN anywhere fails
//!   (`equal_nan=False`), an Inf must equal the golden's.
//!
//! NaN/Inf (ATK rules, applied by every standard but `assert-close` and
//! `msprobe-binary`): an element whose golden is NaN or Inf is not judged
//! (it passes); an actual NaN or Inf where the golden is finite fails; a
//! benchmark NaN or Inf there means the benchmark cannot be formed, and the
//! verdict is refused (an error, exit code 2).

use super::metrics::{metrics, Metrics};
use super::ulp;
use crate::io::DType;
use std::fmt;
use std::str::FromStr;

/// The table, also under its old paths (`accuracy::standards::TABLE`, ...).
pub use super::table::*;

/// A standard a case is judged by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Standard {
    Atk,
    AtkStrict,
    /// The graded scheme at level 0, 1 or 2.
    AtkLevel(u8),
    Single,
    Msprobe,
    MsprobeUlp,
    MsprobeBinary,
    /// `assert_close` with optional rtol/atol overriding the defaults.
    AssertClose {
        rtol: Option<f64>,
        atol: Option<f64>,
    },
}

impl Standard {
    pub const NAMES: &'static str =
        "atk (cv_fused_double_benchmark), atk-strict, atk-l0, atk-l1, atk-l2, single, msprobe, msprobe-ulp, msprobe-binary, assert-close";

    /// Whether the standard compares with a same-precision benchmark.
    pub fn needs_benchmark(&self) -> bool {
        !matches!(self, Standard::Single | Standard::AssertClose { .. })
    }
}

impl fmt::Display for Standard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Standard::Atk => f.write_str("atk"),
            Standard::AtkStrict => f.write_str("atk-strict"),
            Standard::AtkLevel(l) => write!(f, "atk-l{l}"),
            Standard::Single => f.write_str("single"),
            Standard::Msprobe => f.write_str("msprobe"),
            Standard::MsprobeUlp => f.write_str("msprobe-ulp"),
            Standard::MsprobeBinary => f.write_str("msprobe-binary"),
            Standard::AssertClose { .. } => f.write_str("assert-close"),
        }
    }
}

impl FromStr for Standard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "atk" | "cv-fused-double-benchmark" | "double-benchmark" => Standard::Atk,
            "atk-strict" => Standard::AtkStrict,
            "atk-l0" => Standard::AtkLevel(0),
            "atk-l1" => Standard::AtkLevel(1),
            "atk-l2" => Standard::AtkLevel(2),
            "single" | "single-benchmark" => Standard::Single,
            "msprobe" => Standard::Msprobe,
            "msprobe-ulp" => Standard::MsprobeUlp,
            "msprobe-binary" => Standard::MsprobeBinary,
            "assert-close" => Standard::AssertClose { rtol: None, atol: None },
            _ => return Err(format!("unknown standard '{s}'; expected one of: {}", Self::NAMES)),
        })
    }
}

/// A check's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

/// One compared quantity.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Check {
    pub name: String,
    pub value: f64,
    /// The pass limit (`value <= limit`, or `<` where the name says so).
    pub limit: f64,
    /// msprobe's warn limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warn_limit: Option<f64>,
    pub status: Status,
}

/// The double-benchmark ratios `metric(actual) / max(metric(benchmark), error_thd)`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Ratios {
    pub max_re: f64,
    pub avg_re: f64,
    pub rmse: f64,
}

/// What a standard said about a case.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Verdict {
    pub standard: String,
    pub dtype: &'static str,
    pub status: Status,
    pub checks: Vec<Check>,
    pub actual: Metrics,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<Metrics>,
    /// The ATK ratios (with the `error_thd` floor), where they exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratios: Option<Ratios>,
    /// The best graded level met (`L2` best), where the ratios exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
}

/// The outputs of one case, as f64 values of `dtype`, same length.
#[derive(Clone, Copy, Debug)]
pub struct Case<'a> {
    pub dtype: DType,
    pub actual: &'a [f64],
    pub benchmark: Option<&'a [f64]>,
    pub golden: &'a [f64],
    /// The golden rounded to `dtype` (the ULP and binary standards).
    pub golden_rounded: &'a [f64],
}

fn need(row: &Row, dtype: DType, std: &Standard) -> Result<f64, String> {
    row.values.get(dtype).ok_or_else(|| {
        format!(
            "standard {std} has no {} for {} (docs/ACCURACY.md)",
            row.quantity,
            dtype.name()
        )
    })
}

fn all(row: &Row) -> f64 {
    row.values.f32.expect("rows that hold for every dtype")
}

fn le(name: &str, value: f64, limit: f64) -> Check {
    Check {
        name: name.into(),
        value,
        limit,
        warn_limit: None,
        status: if value <= limit { Status::Pass } else { Status::Fail },
    }
}

fn lt(name: &str, value: f64, limit: f64) -> Check {
    Check {
        name: name.into(),
        value,
        limit,
        warn_limit: None,
        status: if value < limit { Status::Pass } else { Status::Fail },
    }
}

fn band(name: &str, value: f64, pass: f64, warn: f64) -> Check {
    Check {
        name: name.into(),
        value,
        limit: pass,
        warn_limit: Some(warn),
        status: if value <= pass {
            Status::Pass
        } else if value <= warn {
            Status::Warn
        } else {
            Status::Fail
        },
    }
}

/// `x / y` with 0/0 = 1 and x/0 = Inf (msprobe's plain ratio).
fn plain_ratio(x: f64, y: f64) -> f64 {
    if y == 0.0 {
        if x == 0.0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        x / y
    }
}

const LEVELS: [(&str, [Row; 3]); 3] = [
    ("L2", [STRICT_MAXRE, STRICT_AVGRE, STRICT_RMSE]),
    ("L1", [L1_MAXRE, L1_AVGRE, L1_RMSE]),
    ("L0", [ATK_MAXRE, ATK_AVGRE, ATK_RMSE]),
];

/// Judges a case by a standard. `Err` when the case cannot be judged: no
/// threshold for the dtype, a missing or non-finite benchmark, lengths
/// that differ, no element with a finite golden.
pub fn evaluate(std: &Standard, case: &Case) -> Result<Verdict, String> {
    let n = case.actual.len();
    if case.golden.len() != n || case.golden_rounded.len() != n || case.benchmark.is_some_and(|b| b.len() != n) {
        return Err("actual, benchmark and golden have different lengths".into());
    }
    let actual = metrics(case.actual, case.golden);
    if actual.judged == 0 && !matches!(std, Standard::MsprobeBinary) {
        return Err("no element has a finite golden: nothing to judge".into());
    }
    let benchmark = benchmark_metrics(std, case)?;
    let dtype = case.dtype;
    // the ATK ratios and the best level, wherever error_thd exists
    let ratios = match (&benchmark, ERROR_THD.values.get(dtype)) {
        (Some(b), Some(thd)) => Some(Ratios {
            max_re: actual.max_re / b.max_re.max(thd),
            avg_re: actual.avg_re / b.avg_re.max(thd),
            rmse: actual.rmse / b.rmse.max(thd),
        }),
        _ => None,
    };
    let level = ratios.map(|r| {
        LEVELS
            .iter()
            .find(|(_, [a, b, c])| {
                actual.nonfinite == 0 && r.max_re <= all(a) && r.avg_re <= all(b) && r.rmse <= all(c)
            })
            .map_or("none", |(l, _)| l)
            .to_string()
    });
    let nonfinite = || lt("non-finite actual elements", actual.nonfinite as f64, 1.0);
    let mut checks = Vec::new();
    // msprobe-ulp passes when either of its two checks does
    let mut either = false;
    match *std {
        Standard::Atk | Standard::AtkStrict | Standard::AtkLevel(_) => {
            need(&ERROR_THD, dtype, std)?;
            let r = ratios.expect("benchmark and error_thd present");
            let rows = match *std {
                Standard::Atk | Standard::AtkLevel(0) => [ATK_MAXRE, ATK_AVGRE, ATK_RMSE],
                Standard::AtkStrict | Standard::AtkLevel(2) => [STRICT_MAXRE, STRICT_AVGRE, STRICT_RMSE],
                _ => [L1_MAXRE, L1_AVGRE, L1_RMSE],
            };
            checks.push(nonfinite());
            checks.push(le("MaxRE ratio", r.max_re, all(&rows[0])));
            checks.push(le("AvgRE ratio", r.avg_re, all(&rows[1])));
            checks.push(le("RMSE ratio", r.rmse, all(&rows[2])));
            if matches!(std, Standard::Atk | Standard::AtkStrict) {
                checks.push(le("|EB|", actual.eb.abs(), need(&EB_LIMIT, dtype, std)?));
            }
        }
        Standard::Single => {
            let t = need(&SINGLE_T, dtype, std)?;
            checks.push(nonfinite());
            checks.push(lt("AvgRE", actual.avg_re, t));
            checks.push(lt("MaxRE", actual.max_re, all(&SINGLE_MAXRE_FACTOR) * t));
        }
        Standard::Msprobe => {
            let b = benchmark.expect("checked above");
            checks.push(nonfinite());
            checks.push(band(
                "RMSE ratio",
                plain_ratio(actual.rmse, b.rmse),
                all(&MSPROBE_RMSE_PASS),
                all(&MSPROBE_RMSE_WARN),
            ));
            checks.push(band(
                "MaxRE ratio",
                plain_ratio(actual.max_re, b.max_re),
                all(&MSPROBE_MAXRE_PASS),
                all(&MSPROBE_MAXRE_WARN),
            ));
        }
        Standard::MsprobeUlp => {
            checks.extend(msprobe_ulp_checks(std, case)?);
            either = true;
        }
        Standard::MsprobeBinary => {
            let b = case.benchmark.expect("checked above");
            let same = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
            let differ = (0..n).filter(|&i| !same(case.actual[i], b[i])).count();
            let rate = if n == 0 { 0.0 } else { differ as f64 / n as f64 };
            checks.push(le(
                "error rate (bits differing from the benchmark)",
                rate,
                all(&MSPROBE_BINARY_RATE),
            ));
        }
        Standard::AssertClose { rtol, atol } => checks.extend(assert_close_checks(std, case, rtol, atol)?),
    }
    let statuses = checks.iter().map(|c| c.status);
    let status = if either { statuses.min() } else { statuses.max() }.unwrap_or(Status::Pass);
    Ok(Verdict {
        standard: std.to_string(),
        dtype: dtype.name(),
        status,
        checks,
        actual,
        benchmark,
        ratios,
        level,
    })
}

/// The benchmark's metrics (None: the case has none and `std` needs
/// none); Err when `std` needs one and it is missing, or it is NaN or Inf
/// where the golden is finite (the double benchmark cannot be formed).
fn benchmark_metrics(std: &Standard, case: &Case) -> Result<Option<Metrics>, String> {
    let n = case.actual.len();
    Ok(match case.benchmark {
        Some(b) => {
            let m = metrics(b, case.golden);
            if m.nonfinite > 0 && std.needs_benchmark() && !matches!(std, Standard::MsprobeBinary) {
                let i = (0..n)
                    .find(|&i| case.golden[i].is_finite() && !b[i].is_finite())
                    .unwrap_or(0);
                return Err(format!(
                    "the benchmark is {} at element {i} where the golden is finite: the double benchmark cannot be formed",
                    b[i]
                ));
            }
            Some(m)
        }
        None if std.needs_benchmark() => return Err(format!("standard {std} needs a benchmark")),
        None => None,
    })
}

/// `msprobe-ulp`'s two checks (the standard passes when either does):
/// the share of judged elements over the ULP threshold, and their count
/// against the benchmark's.
fn msprobe_ulp_checks(std: &Standard, case: &Case) -> Result<Vec<Check>, String> {
    let (n, dtype) = (case.actual.len(), case.dtype);
    let thd = need(&MSPROBE_ULP, dtype, std)? as u64;
    let b = case.benchmark.expect("checked above");
    let judged: Vec<usize> = (0..n).filter(|&i| case.golden[i].is_finite()).collect();
    let pick = |x: &[f64]| judged.iter().map(|&i| x[i]).collect::<Vec<f64>>();
    let g = pick(case.golden_rounded);
    let over_a = ulp::count_over(&pick(case.actual), &g, dtype, thd).map_err(|e| format!("actual: {e}"))?;
    let over_b = ulp::count_over(&pick(b), &g, dtype, thd).map_err(|e| format!("benchmark: {e}"))?;
    let share = over_a as f64 / judged.len() as f64;
    let by_share = lt("share over the ULP threshold", share, all(&MSPROBE_ULP_SHARE));
    let by_count = lt(
        "elements over the ULP threshold vs benchmark",
        over_a as f64,
        over_b as f64,
    );
    Ok(vec![by_share, by_count])
}

/// `assert-close`: every element within `atol + rtol |g|` (the dtype's
/// defaults where not given), and the worst excess over that bound.
fn assert_close_checks(
    std: &Standard,
    case: &Case,
    rtol: Option<f64>,
    atol: Option<f64>,
) -> Result<Vec<Check>, String> {
    let dtype = case.dtype;
    let rtol = match rtol {
        Some(r) => r,
        None => need(&ASSERT_CLOSE_RTOL, dtype, std)?,
    };
    let atol = match atol {
        Some(a) => a,
        None => need(&ASSERT_CLOSE_ATOL, dtype, std)?,
    };
    let mut bad = 0usize;
    let mut worst_excess = f64::NEG_INFINITY;
    for (&a, &g) in case.actual.iter().zip(case.golden) {
        let ok = if a.is_nan() || g.is_nan() {
            false
        } else if a.is_infinite() || g.is_infinite() {
            a == g
        } else {
            let allowed = atol + rtol * g.abs();
            worst_excess = worst_excess.max((a - g).abs() - allowed);
            (a - g).abs() <= allowed
        };
        bad += !ok as usize;
    }
    Ok(vec![
        le(
            &format!("elements with |a-g| > {atol:e} + {rtol:e}|g|"),
            bad as f64,
            0.0,
        ),
        Check {
            name: "max(|a-g| - atol - rtol|g|)".into(),
            value: worst_excess,
            limit: 0.0,
            warn_limit: None,
            status: if bad == 0 { Status::Pass } else { Status::Fail },
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `single` verdict on f32 outputs of golden 1.0 where one element
    /// of 1000 has relative error `max_re` (AvgRE = max_re / 1000 < T).
    fn single(max_re: f64) -> Status {
        let golden = vec![1.0f64; 1000];
        let mut actual = golden.clone();
        // |a - g| / (|g| + RE_FLOOR) = max_re
        actual[17] = 1.0 + max_re * (1.0 + RE_FLOOR);
        let case = Case {
            dtype: DType::F32,
            actual: &actual,
            benchmark: None,
            golden: &golden,
            golden_rounded: &golden,
        };
        let v = evaluate(&Standard::Single, &case).unwrap();
        let t = SINGLE_T.values.f32.unwrap();
        assert!(v.actual.avg_re < t, "the AvgRE check is not what decides: {v:?}");
        let close = approx::relative_eq!(v.actual.max_re, max_re, epsilon = 0.0, max_relative = 1e-9);
        assert!(close, "MaxRE {} vs {max_re}: {v:?}", v.actual.max_re);
        v.status
    }

    /// `single` passes iff AvgRE < T and MaxRE < 10 T: a MaxRE just below
    /// 10 T passes, just above fails (a factor of 9 or 11 fails this).
    #[test]
    fn single_maxre_factor_is_ten() {
        let t = SINGLE_T.values.f32.unwrap();
        assert_eq!(single(10.0 * t * (1.0 - 1e-5)), Status::Pass);
        assert_eq!(single(10.0 * t * (1.0 + 1e-5)), Status::Fail);
    }
}
