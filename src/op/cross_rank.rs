//! The copies of one logical row across an op's ranks, compared byte for
//! byte (f32 bit patterns: -0 != +0 and NaN payloads count), with the
//! provenance of the two copies that differ: what `mxbi op check` reports
//! and [`super::divergence::explain_diff`] explains. Batch-invariance
//! verdicts over op models come from the checker (`crate::bi` on
//! [`super::subject::OpSubject`]), not from here.

use super::{OpOutput, RowProvenance};

/// Where two copies of a row differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Diff {
    /// Provenance of the two copies compared.
    pub a: RowProvenance,
    pub b: RowProvenance,
    /// Elements whose bits differ, and the first such column.
    pub elements: usize,
    pub first_col: usize,
}

/// Elements whose bits differ and the first differing index (a length
/// difference counts as differing elements from the shorter length on).
fn bit_diff(a: &[f32], b: &[f32]) -> Option<(usize, usize)> {
    let mut first = None;
    let mut count = 0;
    for (j, (x, y)) in a.iter().zip(b).enumerate() {
        if x.to_bits() != y.to_bits() {
            count += 1;
            first.get_or_insert(j);
        }
    }
    if a.len() != b.len() {
        count += a.len().abs_diff(b.len());
        first.get_or_insert(a.len().min(b.len()));
    }
    first.map(|f| (count, f))
}

/// Every copy of global row `g` in `out` against its first copy (in rank
/// order): the first copy whose bytes differ, or None when every rank
/// holding the row has the same bytes (also when at most one rank holds it).
pub fn cross_rank(out: &OpOutput, g: usize) -> Option<Diff> {
    let locs = out.locations(g);
    let (r0, i0) = *locs.first()?;
    locs.iter().skip(1).find_map(|&(r, i)| {
        let (elements, first_col) = bit_diff(out.per_rank[r0].row(i0), out.per_rank[r].row(i))?;
        Some(Diff {
            a: out.provenance_of(r0, i0).cloned().expect("provenance covers every row"),
            b: out.provenance_of(r, i).cloned().expect("provenance covers every row"),
            elements,
            first_col,
        })
    })
}
