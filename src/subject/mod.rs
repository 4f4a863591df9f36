//! The subject interface: the one door through which the checker, the
//! explainer, the accuracy verdicts and the fuzzer reach "something that
//! computes a GEMM-like op". They never import `device` or `op` (tests/layering.rs);
//! those (and external runners, dump folders, the Python binding) implement
//! [`Subject`] instead.
//!
//! # Contract
//! - A job is a [`Problem`]: A `[M, K]` (one row per token), the shared
//!   weights B, and for MX inputs their E8M0 scales, in the vocabulary of
//!   `gemm`.
//! - [`Subject::run`] returns the requested rows of `C = A x B` (every row
//!   when `rows` is `None`), row-major `[rows.len(), N]`, as f32 values whose
//!   bits are the subject's output bits: a narrower output type (bf16, f16,
//!   FP8) is widened exactly, so byte comparisons of the f32 bits are byte
//!   comparisons of the outputs (NaN payloads and the sign of zero count).
//! - Requesting rows is a request, not a promise of row-only work: a subject
//!   may compute all rows and return the selection. Rows must be returned
//!   in the order asked.
//! - A subject is not assumed deterministic or batch-invariant: deciding
//!   that is the checker's job. It must report a problem it cannot run as
//!   [`SubjectError::Unsupported`] (the cell becomes an error verdict), and a
//!   run that broke as [`SubjectError::Failed`], never a wrong answer.

use crate::gemm::{gemm, GemmError, Problem};
use crate::order::Order;

pub mod dispatch;
pub mod dump;
pub mod exec;
mod job;
pub use dispatch::Dispatch;
pub use dump::{Dump, Recorder, DUMP_SCHEMA};
pub use exec::{Exec, ExecOptions, EXEC_PROTOCOL};

/// Why a subject produced no output.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SubjectError {
    /// The subject cannot run this problem (shape, input type, order).
    #[error("{subject} cannot run this problem: {why}")]
    Unsupported { subject: String, why: String },
    /// The subject started and broke (a runner died, a kernel faulted).
    #[error("{subject} failed: {why}")]
    Failed { subject: String, why: String },
    /// The subject can no longer run anything (an external runner died,
    /// hung past its timeout, answered garbage; a dump folder lacks a
    /// file): the checker stops at once instead of recording per-cell errors.
    #[error("{subject} is broken: {why}")]
    Broken { subject: String, why: String },
}

/// Something that computes a GEMM-like op on given inputs (see the module
/// doc for the contract).
pub trait Subject: Send + Sync {
    /// The name reports use: `kind:argument`, e.g. `model:fma;split=4`.
    fn name(&self) -> String;

    /// The selected rows of `C = A x B` (all when `rows` is `None`),
    /// row-major `[rows, N]`, output bits widened exactly to f32.
    fn run(&self, problem: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError>;
}

/// The CPU model under one accumulation order (`model:ORDER`): bit-exact,
/// deterministic, and row-only when rows are requested.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    pub order: Order,
}

impl Model {
    pub fn new(order: Order) -> Self {
        Model { order }
    }
}

impl Subject for Model {
    fn name(&self) -> String {
        format!("model:{}", self.order)
    }

    fn run(&self, problem: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        gemm(&self.order, problem, rows).map_err(|e| {
            let (subject, why) = (self.name(), e.to_string());
            match e {
                GemmError::Shape(_)
                | GemmError::Row { .. }
                | GemmError::NotRepresentable { .. }
                | GemmError::Unsupported(_)
                | GemmError::Limit(_) => SubjectError::Unsupported { subject, why },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::{BLayout, Matrix};

    fn problem<'a>(a: &'a [f32], b: &'a [f32], m: usize, k: usize, n: usize) -> Problem<'a> {
        Problem {
            a: Matrix::F32(a),
            b: Matrix::F32(b),
            m,
            n,
            k,
            b_layout: BLayout::Kn,
        }
    }

    #[test]
    fn the_model_subject_is_the_model() {
        let (m, k, n) = (5, 300, 3);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) * 1e-3).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.7).collect();
        let p = problem(&a, &b, m, k, n);
        for spec in ["fma", "fma;split=4;reduce=pairwise", "muladd;lanes=8"] {
            let order: Order = spec.parse().unwrap();
            let s = Model::new(order);
            assert_eq!(s.name(), format!("model:{order}"));
            let all = s.run(&p, None).unwrap();
            let want = gemm(&order, &p, None).unwrap();
            assert_eq!(bits(&all), bits(&want));
            // rows come back in the order asked
            let some = s.run(&p, Some(&[4, 1])).unwrap();
            assert_eq!(bits(&some[..n]), bits(&all[4 * n..5 * n]));
            assert_eq!(bits(&some[n..]), bits(&all[n..2 * n]));
        }
    }

    #[test]
    fn problems_a_subject_cannot_run_are_unsupported() {
        let a = vec![1.0f32; 4];
        let b = vec![1.0f32; 4];
        let s = Model::new("fma".parse().unwrap());
        let err = s.run(&problem(&a, &b, 2, 2, 2), Some(&[7])).unwrap_err();
        assert!(matches!(err, SubjectError::Unsupported { .. }), "{err}");
        assert!(
            err.to_string().starts_with("model:fma cannot run this problem"),
            "{err}"
        );
    }

    fn bits(x: &[f32]) -> Vec<u32> {
        x.iter().map(|v| v.to_bits()).collect()
    }
}
