//! Accuracy standards: the one table of numbers ([`TABLE`]; docs/ACCURACY.md
//! shows it as rendered by [`table_markdown`], and a test keeps the two
//! equal) and the verdict of each standard.
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

/// One value per output type (`None`: the source gives none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerDtype {
    pub f16: Option<f64>,
    pub bf16: Option<f64>,
    pub f32: Option<f64>,
    pub f64: Option<f64>,
    pub e4m3: Option<f64>,
    pub e5m2: Option<f64>,
}

impl PerDtype {
    /// The same value for every type.
    pub const fn all(v: f64) -> PerDtype {
        PerDtype {
            f16: Some(v),
            bf16: Some(v),
            f32: Some(v),
            f64: Some(v),
            e4m3: Some(v),
            e5m2: Some(v),
        }
    }

    pub fn get(&self, dtype: DType) -> Option<f64> {
        match dtype {
            DType::F16 => self.f16,
            DType::BF16 => self.bf16,
            DType::F32 => self.f32,
            DType::F64 => self.f64,
            DType::F8E4M3 => self.e4m3,
            DType::F8E5M2 => self.e5m2,
            _ => None,
        }
    }

    fn cells(&self) -> [Option<f64>; 6] {
        [self.f16, self.bf16, self.f32, self.f64, self.e4m3, self.e5m2]
    }
}

/// One row of [`TABLE`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    pub standard: &'static str,
    pub quantity: &'static str,
    pub values: PerDtype,
    pub source: &'static str,
}

const fn p2(e: i32) -> f64 {
    // exact for the small exponents used here
    let mut v = 1.0;
    let mut i = 0;
    if e < 0 {
        while i > e {
            v /= 2.0;
            i -= 1;
        }
    } else {
        while i < e {
            v *= 2.0;
            i += 1;
        }
    }
    v
}

const NONE: PerDtype = PerDtype {
    f16: None,
    bf16: None,
    f32: None,
    f64: None,
    e4m3: None,
    e5m2: None,
};

/// ATK `error_thd[dtype]` (fp64 uses fp32's).
pub const ERROR_THD: Row = Row {
    standard: "atk*",
    quantity: "error_thd",
    values: PerDtype {
        f16: Some(p2(-11)),
        bf16: Some(p2(-8)),
        f32: Some(p2(-14)),
        f64: Some(p2(-14)),
        ..NONE
    },
    source: "§6",
};
/// ATK limit on `|EB(actual)|` (fp64 uses fp32's).
pub const EB_LIMIT: Row = Row {
    standard: "atk, atk-strict",
    quantity: "max abs(EB)",
    values: PerDtype {
        f16: Some(p2(-10)),
        bf16: Some(p2(-7)),
        f32: Some(p2(-14)),
        f64: Some(p2(-14)),
        ..NONE
    },
    source: "§6",
};
pub const ATK_MAXRE: Row = ratio_row("atk, atk-l0", "MaxRE ratio <=", 10.0, "§6");
pub const ATK_AVGRE: Row = ratio_row("atk, atk-l0", "AvgRE ratio <=", 2.0, "§6");
pub const ATK_RMSE: Row = ratio_row("atk, atk-l0", "RMSE ratio <=", 2.0, "§6");
pub const STRICT_MAXRE: Row = ratio_row("atk-strict, atk-l2", "MaxRE ratio <=", 2.0, "§6");
pub const STRICT_AVGRE: Row = ratio_row("atk-strict, atk-l2", "AvgRE ratio <=", 1.2, "§6");
pub const STRICT_RMSE: Row = ratio_row("atk-strict, atk-l2", "RMSE ratio <=", 1.2, "§6");
pub const L1_MAXRE: Row = ratio_row("atk-l1", "MaxRE ratio <=", 5.0, "§6");
pub const L1_AVGRE: Row = ratio_row("atk-l1", "AvgRE ratio <=", 1.5, "§6");
pub const L1_RMSE: Row = ratio_row("atk-l1", "RMSE ratio <=", 1.5, "§6");
/// Single-benchmark `T[dtype]`: pass iff AvgRE < T and MaxRE < 10 T.
pub const SINGLE_T: Row = Row {
    standard: "single",
    quantity: "T",
    values: PerDtype {
        f16: Some(p2(-10)),
        bf16: Some(p2(-7)),
        f32: Some(p2(-13)),
        e4m3: Some(p2(-3)),
        e5m2: Some(p2(-2)),
        ..NONE
    },
    source: "§6",
};
pub const SINGLE_MAXRE_FACTOR: Row = ratio_row("single", "MaxRE < factor x T", 10.0, "§6");
pub const MSPROBE_RMSE_PASS: Row = ratio_row("msprobe", "RMSE ratio pass <=", 1.0, "§11");
pub const MSPROBE_RMSE_WARN: Row = ratio_row("msprobe", "RMSE ratio warn <=", 2.0, "§11");
pub const MSPROBE_MAXRE_PASS: Row = ratio_row("msprobe", "MaxRE ratio pass <=", 1.0, "§11");
pub const MSPROBE_MAXRE_WARN: Row = ratio_row("msprobe", "MaxRE ratio warn <=", 10.0, "§11");
/// msprobe ULP threshold per dtype.
pub const MSPROBE_ULP: Row = Row {
    standard: "msprobe-ulp",
    quantity: "ULP threshold",
    values: PerDtype {
        f16: Some(1.0),
        bf16: Some(1.0),
        f32: Some(32.0),
        ..NONE
    },
    source: "§11",
};
pub const MSPROBE_ULP_SHARE: Row = ratio_row("msprobe-ulp", "share over threshold <", 0.001, "§11");
pub const MSPROBE_BINARY_RATE: Row = ratio_row("msprobe-binary", "error rate <=", 0.0, "§11");
/// PyTorch `assert_close` default rtol.
pub const ASSERT_CLOSE_RTOL: Row = Row {
    standard: "assert-close",
    quantity: "rtol",
    values: PerDtype {
        f16: Some(1e-3),
        bf16: Some(1.6e-2),
        f32: Some(1.3e-6),
        ..NONE
    },
    source: "§11",
};
/// PyTorch `assert_close` default atol.
pub const ASSERT_CLOSE_ATOL: Row = Row {
    standard: "assert-close",
    quantity: "atol",
    values: PerDtype {
        f16: Some(1e-5),
        bf16: Some(1e-5),
        f32: Some(1e-5),
        ..NONE
    },
    source: "§11",
};
/// The `1e-7` in `RE = |a - g| / (|g| + 1e-7)`.
pub const RE_FLOOR_ROW: Row = ratio_row("metrics", "RE denominator floor", 1e-7, "§6");
/// Least `sum|a_k b_k| / |sum a_k b_k|` for the `cancellation` label (ours).
pub const CANCELLATION_ROW: Row = ratio_row("ulp view", "cancellation ratio >=", 2.0, "ours");

const fn ratio_row(standard: &'static str, quantity: &'static str, v: f64, source: &'static str) -> Row {
    Row {
        standard,
        quantity,
        values: PerDtype::all(v),
        source,
    }
}

/// Every number the standards use, in one table.
pub const TABLE: [Row; 24] = [
    ERROR_THD,
    EB_LIMIT,
    ATK_MAXRE,
    ATK_AVGRE,
    ATK_RMSE,
    STRICT_MAXRE,
    STRICT_AVGRE,
    STRICT_RMSE,
    L1_MAXRE,
    L1_AVGRE,
    L1_RMSE,
    SINGLE_T,
    SINGLE_MAXRE_FACTOR,
    MSPROBE_RMSE_PASS,
    MSPROBE_RMSE_WARN,
    MSPROBE_MAXRE_PASS,
    MSPROBE_MAXRE_WARN,
    MSPROBE_ULP,
    MSPROBE_ULP_SHARE,
    MSPROBE_BINARY_RATE,
    ASSERT_CLOSE_RTOL,
    ASSERT_CLOSE_ATOL,
    RE_FLOOR_ROW,
    CANCELLATION_ROW,
];

const fn value_of(row: &Row) -> f64 {
    match row.values.f32 {
        Some(v) => v,
        None => panic!("a row without an f32 value"),
    }
}

/// [`RE_FLOOR_ROW`]'s value.
pub const RE_FLOOR: f64 = value_of(&RE_FLOOR_ROW);
/// [`CANCELLATION_ROW`]'s value.
pub const CANCELLATION_MIN_RATIO: f64 = value_of(&CANCELLATION_ROW);

/// A number as the table shows it: `2^e` for powers of two up to 1/4,
/// scientific below 1e-3, else the shortest decimal.
fn show(v: f64) -> String {
    if v > 0.0 && v <= 0.25 && v.to_bits() & ((1 << 52) - 1) == 0 {
        let e = ((v.to_bits() >> 52) as i32) - 1023;
        return format!("2^{e}");
    }
    if v > 0.0 && v < 1e-3 {
        return format!("{v:e}");
    }
    format!("{v}")
}

/// The table as Markdown (docs/ACCURACY.md holds exactly this).
pub fn table_markdown() -> String {
    let mut s = String::from(
        "| standard | quantity | f16 | bf16 | f32 | f64 | e4m3 | e5m2 | source |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in TABLE {
        let cells: Vec<String> = r.values.cells().iter().map(|c| c.map_or("-".into(), show)).collect();
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.standard,
            r.quantity,
            cells.join(" | "),
            r.source
        ));
    }
    s
}

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
    let benchmark = match case.benchmark {
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
    };
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
            checks.push(by_share);
            checks.push(by_count);
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
        Standard::AssertClose { rtol, atol } => {
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
            checks.push(le(
                &format!("elements with |a-g| > {atol:e} + {rtol:e}|g|"),
                bad as f64,
                0.0,
            ));
            checks.push(Check {
                name: "max(|a-g| - atol - rtol|g|)".into(),
                value: worst_excess,
                limit: 0.0,
                warn_limit: None,
                status: if bad == 0 { Status::Pass } else { Status::Fail },
            });
        }
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
