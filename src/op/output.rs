//! An op's outputs: each rank's rows and their provenance.

use super::provenance::RowProvenance;

/// One rank's output: row-major f32 `[rows, cols]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RankOutput {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl RankOutput {
    pub fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
}

/// Every rank's output and the provenance of every output row (ordered by
/// rank, then row).
#[derive(Clone, Debug, PartialEq)]
pub struct OpOutput {
    pub per_rank: Vec<RankOutput>,
    pub provenance: Vec<RowProvenance>,
}

impl OpOutput {
    /// Where a logical (global) row appears: `(rank, row)` pairs.
    pub fn locations(&self, global_row: usize) -> Vec<(usize, usize)> {
        self.provenance
            .iter()
            .filter(|p| p.global_row == global_row)
            .map(|p| (p.rank, p.row))
            .collect()
    }

    /// The provenance of `(rank, row)`.
    pub fn provenance_of(&self, rank: usize, row: usize) -> Option<&RowProvenance> {
        self.provenance.iter().find(|p| p.rank == rank && p.row == row)
    }
}
