//! Minimal batch-invariance checks over op models: build variants, run
//! them, compare one logical row's bytes (f32 bit patterns, so -0 != +0 and
//! NaN payloads count). Each check first runs the base variant twice (trials
//! 0 and 1); if those differ the verdict is [`Verdict::NonDet`].
//!
//! * [`seed_ab`]: target row pinned to content C, other rows from seed A vs
//!   seed B (literature BI).
//! * [`position`]: the same content at row `from` vs row `to` (moves it to
//!   another chunk, shard or rank).
//! * [`batch_size`]: the same content at the same row under two specs that
//!   differ in M.
//! * [`cross_rank`]: one output; the row's bytes on every rank that holds it.

use super::{generate, run_op_trial, GenOpts, Inputs, OpOutput, OpSpec, Result, RowProvenance};

/// Where two compared copies of a row differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Diff {
    /// Provenance of the two copies compared.
    pub a: RowProvenance,
    pub b: RowProvenance,
    /// Elements whose bits differ, and the first such column.
    pub elements: usize,
    pub first_col: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    Fail(Box<Diff>),
    NonDet(Box<Diff>),
}

impl Verdict {
    pub fn passed(&self) -> bool {
        matches!(self, Verdict::Pass)
    }
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Pass => "BI_PASS",
            Verdict::Fail(_) => "BI_FAIL",
            Verdict::NonDet(_) => "NON_DET",
        }
    }
}

/// Elements whose bits differ and the first differing index.
pub fn bit_diff(a: &[f32], b: &[f32]) -> Option<(usize, usize)> {
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

fn diff_at(a: &OpOutput, (ra, ia): (usize, usize), b: &OpOutput, (rb, ib): (usize, usize)) -> Option<Diff> {
    let (elements, first_col) = bit_diff(a.per_rank[ra].row(ia), b.per_rank[rb].row(ib))?;
    Some(Diff {
        a: a.provenance_of(ra, ia).cloned().expect("provenance covers every row"),
        b: b.provenance_of(rb, ib).cloned().expect("provenance covers every row"),
        elements,
        first_col,
    })
}

/// Global row `ga` of `a` vs global row `gb` of `b`, on every rank that holds
/// both (the k-th copy of `ga` is compared with the k-th copy of `gb` when
/// they sit on different ranks).
pub fn compare_rows(a: &OpOutput, ga: usize, b: &OpOutput, gb: usize) -> Option<Diff> {
    let (la, lb) = (a.locations(ga), b.locations(gb));
    for &pa in &la {
        if let Some(&pb) = lb.iter().find(|pb| pb.0 == pa.0) {
            if let Some(d) = diff_at(a, pa, b, pb) {
                return Some(d);
            }
        }
    }
    // the row moved to another rank: compare copies in order
    for (&pa, &pb) in la.iter().zip(&lb) {
        if let Some(d) = diff_at(a, pa, b, pb) {
            return Some(d);
        }
    }
    None
}

/// Every copy of global row `g` in one output against its first copy.
pub fn cross_rank(out: &OpOutput, g: usize) -> Verdict {
    let locs = out.locations(g);
    for &l in locs.iter().skip(1) {
        if let Some(d) = diff_at(out, locs[0], out, l) {
            return Verdict::Fail(Box::new(d));
        }
    }
    Verdict::Pass
}

fn run2(spec: &OpSpec, inputs: &Inputs) -> Result<(OpOutput, Option<Diff>)> {
    let o0 = run_op_trial(spec, inputs, 0)?;
    let o1 = run_op_trial(spec, inputs, 1)?;
    let m = o0.provenance.iter().map(|p| p.global_row).max().map_or(0, |x| x + 1);
    let nd = (0..m).find_map(|g| compare_rows(&o0, g, &o1, g));
    Ok((o0, nd))
}

fn verdict(nd: Option<Diff>, d: Option<Diff>) -> Verdict {
    match (nd, d) {
        (Some(n), _) => Verdict::NonDet(Box::new(n)),
        (None, Some(d)) => Verdict::Fail(Box::new(d)),
        (None, None) => Verdict::Pass,
    }
}

/// Seed A vs seed B for the other rows; `row` pinned to `content`.
pub fn seed_ab(spec: &OpSpec, base: GenOpts, row: usize, content: u64, seed_a: u64, seed_b: u64) -> Result<Verdict> {
    let a = generate(spec, &GenOpts { seed: seed_a, ..base }.pin(row, content));
    let b = generate(spec, &GenOpts { seed: seed_b, ..base }.pin(row, content));
    let (oa, nd) = run2(spec, &a)?;
    let ob = run_op_trial(spec, &b, 0)?;
    Ok(verdict(nd, compare_rows(&oa, row, &ob, row)))
}

/// The same content at row `from` and at row `to`.
pub fn position(spec: &OpSpec, base: GenOpts, content: u64, from: usize, to: usize) -> Result<Verdict> {
    let a = generate(spec, &base.pin(from, content));
    let b = generate(spec, &base.pin(to, content));
    let (oa, nd) = run2(spec, &a)?;
    let ob = run_op_trial(spec, &b, 0)?;
    Ok(verdict(nd, compare_rows(&oa, from, &ob, to)))
}

/// The same content at `row` under two specs (e.g. different M).
pub fn batch_size(spec_a: &OpSpec, spec_b: &OpSpec, base: GenOpts, row: usize, content: u64) -> Result<Verdict> {
    let a = generate(spec_a, &base.pin(row, content));
    let b = generate(spec_b, &base.pin(row, content));
    let (oa, nd) = run2(spec_a, &a)?;
    let ob = run_op_trial(spec_b, &b, 0)?;
    Ok(verdict(nd, compare_rows(&oa, row, &ob, row)))
}

/// Generated inputs; global row `row` on every rank that holds it.
pub fn rank(spec: &OpSpec, base: GenOpts, row: usize) -> Result<Verdict> {
    let inp = generate(spec, &base);
    let (o, nd) = run2(spec, &inp)?;
    Ok(match nd {
        Some(n) => Verdict::NonDet(Box::new(n)),
        None => cross_rank(&o, row),
    })
}
