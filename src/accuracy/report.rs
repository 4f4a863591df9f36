//! One accuracy report: a standard's verdict, the metrics and ratios
//! behind it, the golden's own error bound and the ULP view, as JSON and
//! as text.

use super::golden::{Bound, Golden};
use super::standards::{evaluate, Case, Standard, Status, Verdict};
use super::ulp::{self, UlpView};
use crate::io::DType;

/// How many worst elements a report lists.
pub const WORST: usize = 10;

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Report {
    pub verdict: Verdict,
    pub golden: Bound,
    /// The output under test against the golden rounded to `dtype`.
    pub ulp: UlpView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ulp_benchmark: Option<UlpView>,
}

/// Judges `actual` (and `benchmark`) against `golden` by `standard`. The
/// outputs must be values of `dtype` (an error otherwise: a file that does
/// not hold what `--dtype` says).
pub fn judge(
    standard: &Standard,
    dtype: DType,
    actual: &[f64],
    benchmark: Option<&[f64]>,
    golden: &Golden,
) -> Result<Report, String> {
    let n = actual.len();
    if golden.len() != n || benchmark.is_some_and(|b| b.len() != n) {
        return Err(format!(
            "lengths differ: actual {n}, benchmark {}, golden {}",
            benchmark.map_or("-".into(), |b| b.len().to_string()),
            golden.len()
        ));
    }
    let rounded = golden.rounded(dtype)?;
    let abs = golden.abs_sum.as_deref();
    let view = |x: &[f64], what: &str| {
        ulp::view(x, &golden.values, &rounded, abs, dtype, WORST).map_err(|e| format!("{what}: {e}"))
    };
    let ulp = view(actual, "actual")?;
    let ulp_benchmark = benchmark.map(|b| view(b, "benchmark")).transpose()?;
    let verdict = evaluate(
        standard,
        &Case {
            dtype,
            actual,
            benchmark,
            golden: &golden.values,
            golden_rounded: &rounded,
        },
    )?;
    Ok(Report {
        verdict,
        golden: golden.bound,
        ulp,
        ulp_benchmark,
    })
}

impl Report {
    /// Whether the verdict passes (`warn` passes).
    pub fn passed(&self) -> bool {
        self.verdict.status != Status::Fail
    }

    /// A short human-readable summary.
    pub fn text(&self) -> String {
        let v = &self.verdict;
        let status = match v.status {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        let mut s = format!(
            "{status}  standard {}  dtype {}  judged {} elements ({} with a non-finite golden skipped)\n",
            v.standard, v.dtype, v.actual.judged, v.actual.golden_nonfinite
        );
        for c in &v.checks {
            let warn = c.warn_limit.map_or(String::new(), |w| format!(", warn <= {w:e}"));
            s.push_str(&format!(
                "  {:<5} {:<48} {:>12.6e}  limit {:e}{warn}\n",
                format!("{:?}", c.status).to_lowercase(),
                c.name,
                c.value,
                c.limit
            ));
        }
        let m = |name: &str, x: &super::metrics::Metrics| {
            format!(
                "  {name:<9} MaxRE {:.6e}  AvgRE {:.6e}  RMSE {:.6e}  EB {:.6e}  max|a-g| {:.6e}\n",
                x.max_re, x.avg_re, x.rmse, x.eb, x.max_abs
            )
        };
        s.push_str(&m("actual", &v.actual));
        if let Some(b) = &v.benchmark {
            s.push_str(&m("benchmark", b));
        }
        if let Some(r) = &v.ratios {
            s.push_str(&format!(
                "  ratios    MaxRE {:.4}  AvgRE {:.4}  RMSE {:.4}  (best level {})\n",
                r.max_re,
                r.avg_re,
                r.rmse,
                v.level.as_deref().unwrap_or("-")
            ));
        }
        s.push_str(&format!("  golden    {:?}\n", self.golden));
        let u = &self.ulp;
        let labels: Vec<String> = u
            .labels
            .iter()
            .map(|(l, n)| format!("{l:?} {n}").to_lowercase())
            .collect();
        s.push_str(&format!(
            "  ULP       max {}  labels: {}\n",
            u.max_ulp,
            labels.join(", ")
        ));
        for e in u.worst.iter().take(5) {
            s.push_str(&format!(
                "    [{}] out {:e} golden {:e} ({} ULP, |err| {:e}{}) {:?}\n",
                e.index,
                e.output,
                e.golden,
                e.ulp.map_or("-".into(), |d| d.to_string()),
                e.abs_err,
                e.cancellation.map_or(String::new(), |c| format!(", c = {c:.3e}")),
                e.label
            ));
        }
        s
    }
}
