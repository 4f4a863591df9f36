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
//!   [`SubjectError::Unsupported`] (the cell becomes an error verdict), a
//!   run that broke as [`SubjectError::Failed`] (also a per-cell error), and
//!   a subject that can no longer run anything (its runner died, hung, or
//!   answered garbage; a dump lacks a file) as [`SubjectError::Broken`]:
//!   the checker stops at once. Never a wrong answer.
//! - **Ranks.** A multi-device subject (an op sharding A over ranks) says
//!   how many ranks hold a copy of the output ([`Subject::world_size`]) and
//!   returns each rank's copy of the requested global rows
//!   ([`Subject::run_on_rank`]); `run` is rank 0's copy.
//! - **Knobs** ([`Knobs`]) are per-cell settings only some subjects accept
//!   (world size, MX scale kinds, deterministic communication); a subject
//!   built with a knob it cannot honour is refused by its factory.

use crate::gemm::{gemm, GemmError, Problem};
use crate::order::{InType, Order};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

pub mod dispatch;
pub mod dump;
pub mod exec;
mod job;
pub mod spec;
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

/// How a matrix's E8M0 scales vary (MX subjects).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ScaleKind {
    /// Every scale 2^0: "ID".
    #[serde(rename = "ID")]
    Identity,
    /// Scales that vary along K: "VAR".
    #[serde(rename = "VAR")]
    Varying,
}

impl ScaleKind {
    pub const ALL: [ScaleKind; 2] = [ScaleKind::Identity, ScaleKind::Varying];

    pub const fn name(self) -> &'static str {
        match self {
            ScaleKind::Identity => "ID",
            ScaleKind::Varying => "VAR",
        }
    }
}

impl fmt::Display for ScaleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ScaleKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ID" | "id" | "identity" => Ok(ScaleKind::Identity),
            "VAR" | "var" | "varying" => Ok(ScaleKind::Varying),
            _ => Err(format!("unknown scale kind '{s}'; expected ID or VAR")),
        }
    }
}

/// Per-cell settings of a matrix that only some subjects accept; `None`
/// leaves the subject's own default. A subject factory that cannot honour a
/// set knob returns an error (one line).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Knobs {
    /// Ranks the subject shards A over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<usize>,
    /// How A's (x1's) MX scales vary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x1_scales: Option<ScaleKind>,
    /// How B's (x2's) MX scales vary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x2_scales: Option<ScaleKind>,
    /// Deterministic communication (e.g. `HCCL_DETERMINISTIC`, NCCL's fixed
    /// reduction order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deterministic_comm: Option<bool>,
}

impl Knobs {
    /// Whether no knob is set.
    pub fn is_empty(&self) -> bool {
        *self == Knobs::default()
    }

    /// The set knobs as id segments, `ws=4/x=ID,VAR/det=1` (empty when none).
    pub fn id(&self) -> String {
        let mut v = Vec::new();
        if let Some(ws) = self.world_size {
            v.push(format!("ws={ws}"));
        }
        match (self.x1_scales, self.x2_scales) {
            (None, None) => {}
            (a, b) => v.push(format!(
                "x={},{}",
                a.map_or("-", ScaleKind::name),
                b.map_or("-", ScaleKind::name)
            )),
        }
        if let Some(d) = self.deterministic_comm {
            v.push(format!("det={}", d as u8));
        }
        v.join("/")
    }

    /// One line naming the set knobs a subject cannot honour (`why` says
    /// what it accepts), or Ok when none is set.
    pub fn refuse_any(&self, subject: &str, why: &str) -> Result<(), String> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(format!("subject '{subject}' takes no knobs ({}): {why}", self.id()))
        }
    }
}

/// Something that computes a GEMM-like op on given inputs (see the module
/// doc for the contract).
pub trait Subject: Send + Sync {
    /// The name reports use: `kind:argument`, e.g. `model:fma;split=4`.
    fn name(&self) -> String;

    /// The selected rows of `C = A x B` (all when `rows` is `None`),
    /// row-major `[rows, N]`, output bits widened exactly to f32.
    fn run(&self, problem: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError>;

    /// Ranks whose copy of an output row can be asked for (1: single device).
    fn world_size(&self) -> usize {
        1
    }

    /// The selected global rows as held by `rank` (default: rank 0 is
    /// [`Subject::run`], other ranks Unsupported).
    fn run_on_rank(&self, problem: &Problem, rank: usize, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        if rank == 0 {
            self.run(problem, rows)
        } else {
            Err(SubjectError::Unsupported {
                subject: self.name(),
                why: format!("rank {rank} asked of a subject with world size {}", self.world_size()),
            })
        }
    }

    /// M values at which the subject's behaviour may change (tile heights,
    /// dispatch `m_max`, split thresholds): feeds edge sweeps.
    fn m_boundaries(&self) -> Vec<usize> {
        Vec::new()
    }

    /// The element type the subject's inputs must be exactly representable
    /// in (what its steps read), if it has one: the checker draws inputs in
    /// it. None: any f32.
    fn input(&self) -> Option<InType> {
        None
    }

    /// The accumulation order the subject declares it uses for a whole
    /// batch of shape (M, K, N), if it declares one (the CPU model: its
    /// order; a dispatch table: the entry that matches the shape). None:
    /// not declared (the checker may identify it from bytes instead). A
    /// declaration is a claim, not a proof: the witness check
    /// (`bi::witness`) runs the subject to see whether its bytes follow it.
    fn declared_order(&self, m: usize, k: usize, n: usize) -> Option<Order> {
        let _ = (m, k, n);
        None
    }
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

    fn input(&self) -> Option<InType> {
        Some(self.order.mma().map_or(InType::F32, |m| m.input))
    }

    /// The model's order, at every shape.
    fn declared_order(&self, _m: usize, _k: usize, _n: usize) -> Option<Order> {
        Some(self.order)
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

    #[test]
    fn knobs_name_themselves_and_default_to_none() {
        let k = Knobs::default();
        assert!(k.is_empty());
        assert_eq!(k.id(), "");
        assert!(k.refuse_any("model:fma", "x").is_ok());
        let k = Knobs {
            world_size: Some(4),
            x1_scales: Some(ScaleKind::Identity),
            x2_scales: Some(ScaleKind::Varying),
            deterministic_comm: Some(true),
        };
        assert_eq!(k.id(), "ws=4/x=ID,VAR/det=1");
        assert_eq!(serde_json::to_string(&Knobs::default()).unwrap(), "{}");
        assert_eq!(
            serde_json::to_string(&k).unwrap(),
            r#"{"world_size":4,"x1_scales":"ID","x2_scales":"VAR","deterministic_comm":true}"#
        );
        let e = k.refuse_any("model:fma", "a single-device GEMM").unwrap_err();
        assert!(e.contains("ws=4/x=ID,VAR/det=1"), "{e}");
        for s in ScaleKind::ALL {
            assert_eq!(s.name().parse::<ScaleKind>(), Ok(s));
        }
        // the default rank door: rank 0 is `run`, other ranks are unsupported
        let a = vec![1.0f32; 4];
        let m = Model::new("fma".parse().unwrap());
        let p = problem(&a, &a, 2, 2, 2);
        assert_eq!(m.world_size(), 1);
        assert_eq!(m.declared_order(3, 2, 2), Some(m.order));
        assert_eq!(m.run_on_rank(&p, 0, None).unwrap(), m.run(&p, None).unwrap());
        assert!(matches!(
            m.run_on_rank(&p, 1, None),
            Err(SubjectError::Unsupported { .. })
        ));
    }

    fn bits(x: &[f32]) -> Vec<u32> {
        x.iter().map(|v| v.to_bits()).collect()
    }
}
