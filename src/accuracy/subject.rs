//! Accuracy through the subject interface: a subject's output on a problem
//! judged against the exact golden of the problem and a benchmark subject's
//! output (a same-precision reference, e.g. the CPU model's plain `fma`
//! order with the same output type); and the summary a batch-invariance
//! report carries for a case's `standard.acc`.

use super::golden;
use super::report::{judge, Report};
use super::standards::{Standard, Status};
use crate::gemm::Problem;
use crate::io::DType;
use crate::subject::Subject;

/// Runs `subject` and `benchmark` on `problem` and judges the first by
/// `standard` as outputs of type `dtype`.
pub fn judge_subject(
    subject: &dyn Subject,
    benchmark: &dyn Subject,
    problem: &Problem,
    standard: &Standard,
    dtype: DType,
) -> Result<Report, String> {
    let g = golden::gemm(problem).map_err(|e| e.to_string())?;
    let run = |s: &dyn Subject| -> Result<Vec<f64>, String> {
        Ok(s.run(problem, None)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(f64::from)
            .collect())
    };
    let actual = run(subject)?;
    let bench = run(benchmark)?;
    judge(standard, dtype, &actual, Some(&bench), &g)
}

/// The accuracy verdict a batch-invariance report carries beside its cells.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CaseAccuracy {
    /// The standard as the case names it.
    pub standard: String,
    pub dtype: String,
    /// The batch judged: rows `[M, K]` drawn as the checker draws them.
    pub m: usize,
    /// The benchmark subject.
    pub benchmark: String,
    pub status: Status,
    /// The whole accuracy report (docs/ACCURACY.md).
    pub report: serde_json::Value,
}

impl CaseAccuracy {
    pub fn new(standard: &str, dtype: DType, m: usize, benchmark: &dyn Subject, report: &Report) -> CaseAccuracy {
        CaseAccuracy {
            standard: standard.to_string(),
            dtype: dtype.name().to_string(),
            m,
            benchmark: benchmark.name(),
            status: report.verdict.status,
            report: serde_json::to_value(report).expect("reports serialize"),
        }
    }

    /// One line for the text report.
    pub fn line(&self) -> String {
        let s = match self.status {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        format!(
            "accuracy {s}: standard {} ({}), dtype {}, M = {}, benchmark {}",
            self.standard,
            self.report["verdict"]["standard"].as_str().unwrap_or("?"),
            self.dtype,
            self.m,
            self.benchmark
        )
    }
}
