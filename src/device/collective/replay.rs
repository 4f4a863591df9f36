//! The collective suite's CPU replay: every rank row's digest and every
//! cross-rank verdict of a capture, recomputed by the op model.

use super::compare::op_cross_rank_differences;
use super::report::CollectiveReport;
use super::SUITE;
use crate::device::capture::Capture;
use crate::device::conform::row_digest;
use crate::device::suite_replay::{Replay, ReplayOptions, ReplayOutcome};
use crate::device::{DeviceError, Result};

/// Replay: per case, the model's rows must have the GPU's digests on every
/// rank and its cross-rank verdict must equal the GPU's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CollectiveReplayReport {
    pub cases: usize,
    pub rows_checked: usize,
    /// (case name, rank, row) whose model digest differs from the GPU's.
    pub row_mismatches: Vec<(String, usize, usize)>,
    /// Cases whose model verdict differs from the GPU verdict.
    pub verdict_mismatches: Vec<String>,
}

/// The collective suite's CPU replay: every rank row and cross-rank verdict.
pub struct Suite;

impl Replay for Suite {
    fn suite(&self) -> &'static str {
        SUITE
    }

    /// Fails on every rank row and every verdict that differs from the GPU.
    fn replay(&self, capture: &Capture, _: &ReplayOptions) -> Result<ReplayOutcome> {
        let r = replay(capture)?;
        Ok(ReplayOutcome {
            summary: format!(
                "{} cases, {} rank rows replayed, {} rows and {} verdicts differ from the GPU",
                r.cases,
                r.rows_checked,
                r.row_mismatches.len(),
                r.verdict_mismatches.len()
            ),
            details: Vec::new(),
            problems: Vec::new(),
            failed: r.row_mismatches.len() + r.verdict_mismatches.len(),
        })
    }
}

pub fn replay(capture: &Capture) -> Result<CollectiveReplayReport> {
    let report: CollectiveReport = capture.read_json("cases.json")?;
    let mut out = CollectiveReplayReport::default();
    for rec in &report.records {
        let model = rec.case.model()?;
        if model.per_rank.len() != rec.gpu_row_digests.len() {
            return Err(DeviceError::Capture(format!("{}: rank count differs", rec.case.name)));
        }
        for (r, (m, d)) in model.per_rank.iter().zip(&rec.gpu_row_digests).enumerate() {
            if d.len() != 16 * m.rows {
                return Err(DeviceError::Capture(format!("{}: digest length", rec.case.name)));
            }
            for row in 0..m.rows {
                out.rows_checked += 1;
                if format!("{:016x}", row_digest(m.row(row))) != d[16 * row..16 * row + 16] {
                    out.row_mismatches.push((rec.case.name.clone(), r, row));
                }
            }
        }
        let per: Vec<Vec<f32>> = model.per_rank.iter().map(|r| r.data.clone()).collect();
        if op_cross_rank_differences(&rec.case.resolve()?, &per, rec.n) != rec.gpu_cross_rank_rows {
            out.verdict_mismatches.push(rec.case.name.clone());
        }
        out.cases += 1;
    }
    Ok(out)
}
