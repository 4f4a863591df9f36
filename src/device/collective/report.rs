//! The collective run's records and report (`collective/cases.json`), its
//! Markdown table and the progress line of one record.

use super::cases::CollectiveCase;
use serde::{Deserialize, Serialize};

/// The result of one case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollectiveRecord {
    pub case: CollectiveCase,
    pub ranks: usize,
    pub rows: usize,
    pub n: usize,
    /// Elements where a rank's GPU output differs from the model (NaN as a class).
    pub mismatches: usize,
    /// Per rank: 16 hex digits per row (`conform::row_digest`).
    pub gpu_row_digests: Vec<String>,
    /// Global rows whose bytes differ across ranks, on the GPU.
    pub gpu_cross_rank_rows: Vec<usize>,
    /// The same, from the CPU model.
    pub model_cross_rank_rows: Vec<usize>,
    /// The op's path of each row on each rank, from the model's provenance.
    pub paths: Vec<String>,
    /// Reduce ops at WS >= 3: per rank, each run of output elements and
    /// the rank orders reproducing it ([`super::reduction_orders`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reduction_orders: Vec<String>,
    pub notes: Vec<String>,
}

impl CollectiveRecord {
    pub fn verdict(rows: &[usize]) -> &'static str {
        if rows.is_empty() {
            "PASS (rank-invariant)"
        } else {
            "FAIL (rows differ across ranks)"
        }
    }
}

/// The run's report (`collective/cases.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollectiveReport {
    pub records: Vec<CollectiveRecord>,
    /// NCCL's version code; 0 when no NCCL was involved.
    pub nccl_version: i32,
    /// The ranks ran one after another on one GPU, the all-gather a host
    /// copy (`mxbi device collective --sequential`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sequential: bool,
}

impl CollectiveReport {
    pub fn table(&self) -> String {
        let mut s = String::from(
            "| case | ranks | rows x N | GPU vs model mismatches | cross-rank (GPU) | cross-rank (model) |\n|---|---:|---|---:|---|---|\n",
        );
        for r in &self.records {
            s.push_str(&format!(
                "| {} | {} | {} x {} | {} | {} ({} rows) | {} ({} rows) |\n",
                r.case.name,
                r.ranks,
                r.rows,
                r.n,
                r.mismatches,
                CollectiveRecord::verdict(&r.gpu_cross_rank_rows),
                r.gpu_cross_rank_rows.len(),
                CollectiveRecord::verdict(&r.model_cross_rank_rows),
                r.model_cross_rank_rows.len()
            ));
        }
        s
    }
}

#[cfg(feature = "cuda")]
pub(super) fn progress_line(rec: &CollectiveRecord) -> String {
    format!(
        "{}: {} mismatches; cross-rank GPU {} / model {}",
        rec.case.name,
        rec.mismatches,
        rec.gpu_cross_rank_rows.len(),
        rec.model_cross_rank_rows.len()
    )
}
