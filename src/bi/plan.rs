//! Planning a check: for each family and M, the cells to run (which
//! batches are compared, which rows, on which ranks), and how many cells
//! a family lists before positions are resolved.

use super::family::{Family, RowPos};
use super::options::CheckOptions;
use super::session::Batch;
use crate::rng::SplitMix64;

/// A planned cell: the batches to compare, which rows and on which ranks.
pub(super) struct Plan {
    pub(super) family: Family,
    pub(super) m: usize,
    pub(super) row: String,
    pub(super) baseline: Batch,
    pub(super) base_rows: Vec<usize>,
    pub(super) base_rank: usize,
    /// The variant batch and its rows, matched one to one with `base_rows`.
    pub(super) variant: Option<(Batch, Vec<usize>)>,
    pub(super) var_rank: usize,
    /// Row labels for offenders.
    pub(super) labels: Vec<usize>,
    /// Rank cells: the compared rank and the id suffix (`rank=R/held`).
    pub(super) rank: Option<(usize, String)>,
    /// Rank cells: the paths compared, e.g. `GATHER vs LOCAL`.
    pub(super) path: Option<String>,
}

impl Plan {
    fn simple(family: Family, m: usize, row: String, baseline: Batch, base_rows: Vec<usize>) -> Plan {
        Plan {
            family,
            m,
            row,
            labels: base_rows.clone(),
            baseline,
            base_rows,
            base_rank: 0,
            variant: None,
            var_rank: 0,
            rank: None,
            path: None,
        }
    }

    fn with_variant(mut self, batch: Batch, rows: Vec<usize>) -> Plan {
        self.labels = rows.clone();
        self.variant = Some((batch, rows));
        self
    }
}

fn derangement(m: usize, seed: u64) -> Vec<usize> {
    // Sattolo's algorithm: a uniformly random cyclic permutation, so no
    // element stays in place (m >= 2).
    let mut p: Vec<usize> = (0..m).collect();
    let mut r = SplitMix64::new(seed ^ 0xDE7A_0000 ^ m as u64);
    for i in (1..m).rev() {
        let j = r.below(i as u64) as usize;
        p.swap(i, j);
    }
    p
}

/// The rows each position resolves to in a batch of `m`, first occurrence
/// of each index only.
fn resolved(positions: &[RowPos], m: usize) -> Vec<(RowPos, usize)> {
    let mut seen = Vec::new();
    let mut v = Vec::new();
    for &p in positions {
        if let Some(i) = p.resolve(m) {
            if !seen.contains(&i) {
                seen.push(i);
                v.push((p, i));
            }
        }
    }
    v
}

/// The target positions a family uses (the options', else its default).
fn positions_of(opts: &CheckOptions, family: Family) -> Vec<RowPos> {
    if opts.positions.is_empty() {
        match family {
            Family::Position => RowPos::POSITIONS.to_vec(),
            _ => vec![RowPos::Index(0), RowPos::Mid, RowPos::Last],
        }
    } else {
        opts.positions.clone()
    }
}

/// How many cells one family lists before positions are resolved, and how
/// many of those are merged because two positions name one row (at M = 2,
/// `mid` and `last` are both row 1): `(listed, merged)`. Families without
/// target positions list exactly the cells they plan (`planned`).
pub(super) fn listed(opts: &CheckOptions, family: Family, planned: usize) -> (usize, usize) {
    let positions = positions_of(opts, family);
    let m0 = opts.ms[0];
    // positions that resolve inside a batch of m (to a row other than 0
    // when `skip0`) minus the distinct rows they name
    let dups = |m: usize, skip0: bool| {
        let inside = |i: &usize| !(skip0 && *i == 0);
        let named = positions.iter().filter_map(|p| p.resolve(m)).filter(inside).count();
        named - resolved(&positions, m).into_iter().map(|x| x.1).filter(inside).count()
    };
    let listed = opts.ms.len() * positions.len();
    let merged = |m_of: &dyn Fn(usize) -> Option<usize>, skip0: bool| -> usize {
        opts.ms.iter().filter_map(|&m| m_of(m)).map(|m| dups(m, skip0)).sum()
    };
    match family {
        Family::Content => (listed, merged(&|m| (m >= 2).then_some(m), false)),
        Family::Position => (listed, merged(&Some, true)),
        // the baseline M is compared with, not listed as a cell
        Family::Anchor | Family::Batch => (
            opts.ms.iter().filter(|&&m| m != m0).count() * positions.len(),
            match family {
                Family::Anchor => merged(&|m| (m != m0).then_some(m), false),
                _ => merged(&|m| (m != m0).then_some(m.min(m0)), false),
            },
        ),
        Family::Permutation | Family::Repeat | Family::Switch | Family::Rank => (planned, 0),
    }
}

/// The cells of one family; `ws` is the subject's world size (rank cells).
pub(super) fn plans(opts: &CheckOptions, family: Family, ws: usize) -> Vec<Plan> {
    let mut out = Vec::new();
    let positions = positions_of(opts, family);
    let m0 = opts.ms[0];
    for &m in &opts.ms {
        match family {
            Family::Content => {
                for (p, i) in resolved(&positions, m) {
                    if m < 2 {
                        continue;
                    }
                    out.push(
                        Plan::simple(family, m, p.to_string(), Batch::with_target(m, i, 0), vec![i])
                            .with_variant(Batch::with_target(m, i, 1), vec![i]),
                    );
                }
            }
            Family::Batch => {
                if m == m0 {
                    continue;
                }
                // the same index in both batches, resolved in the smaller
                for (p, i) in resolved(&positions, m.min(m0)) {
                    out.push(
                        Plan::simple(family, m, p.to_string(), Batch::with_target(m0, i, 0), vec![i])
                            .with_variant(Batch::with_target(m, i, 0), vec![i]),
                    );
                }
            }
            Family::Anchor => {
                if m == m0 {
                    continue;
                }
                // the row at 0 of the baseline batch vs at p of this one
                for (p, i) in resolved(&positions, m) {
                    out.push(
                        Plan::simple(family, m, p.to_string(), Batch::with_target(m0, 0, 0), vec![0])
                            .with_variant(Batch::with_target(m, i, 0), vec![i]),
                    );
                }
            }
            Family::Position => {
                if positions.contains(&RowPos::All) && m >= 2 {
                    // the target at every row of one batch; row i vs row
                    // i - 1 for every i >= 1: all rows must agree
                    let batch = Batch { ids: vec![0; m] };
                    out.push(
                        Plan::simple(family, m, "all".into(), batch.clone(), (0..m - 1).collect())
                            .with_variant(batch, (1..m).collect()),
                    );
                }
                for (p, i) in resolved(&positions, m) {
                    if i == 0 {
                        continue;
                    }
                    out.push(
                        Plan::simple(family, m, p.to_string(), Batch::with_target(m, 0, 0), vec![0])
                            .with_variant(Batch::with_target(m, i, 0), vec![i]),
                    );
                }
            }
            Family::Permutation => {
                if m < 2 {
                    continue;
                }
                let perm = derangement(m, opts.seed);
                let base = Batch::plain(m);
                // variant position q holds baseline row perm[q]
                let ids: Vec<u64> = perm.iter().map(|&src| base.ids[src]).collect();
                let mut at = vec![0; m];
                for (q, &src) in perm.iter().enumerate() {
                    at[src] = q;
                }
                let mut plan = Plan::simple(family, m, "all".into(), base, (0..m).collect());
                plan.variant = Some((Batch { ids }, at));
                out.push(plan);
            }
            Family::Repeat | Family::Switch => {
                out.push(Plan::simple(family, m, "all".into(), Batch::plain(m), (0..m).collect()))
            }
            Family::Rank => out.extend(rank_plans(&positions, m, ws)),
        }
    }
    out
}

/// Rank cells for one M: per target position and rank r >= 1, (held) the
/// row's copy on rank r vs on rank 0 in the same batch, and (owned) the
/// same content placed at the same offset of rank r's shard, computed by
/// its owner r, vs placed in rank 0's shard, computed by rank 0. Ranks own
/// contiguous shards of M / ws rows; owned cells need ws | M.
fn rank_plans(positions: &[RowPos], m: usize, ws: usize) -> Vec<Plan> {
    let mut out = Vec::new();
    if ws < 2 {
        return out;
    }
    let mpr = m.is_multiple_of(ws).then_some(m / ws);
    let role = |owner: usize, r: usize| if owner == r { "LOCAL" } else { "GATHER" };
    for (p, i) in resolved(positions, m) {
        for r in 1..ws {
            let mut plan = Plan::simple(Family::Rank, m, p.to_string(), Batch::with_target(m, i, 0), vec![i])
                .with_variant(Batch::with_target(m, i, 0), vec![i]);
            plan.var_rank = r;
            plan.rank = Some((r, format!("rank={r}/held")));
            plan.path = mpr.map(|mpr| format!("{} vs {}", role(i / mpr, r), role(i / mpr, 0)));
            out.push(plan);
        }
    }
    if let Some(mpr) = mpr {
        let mut offsets = Vec::new();
        for (p, i) in resolved(positions, m) {
            let off = i % mpr;
            if offsets.contains(&off) {
                continue;
            }
            offsets.push(off);
            for r in 1..ws {
                let at = r * mpr + off;
                let mut plan = Plan::simple(Family::Rank, m, p.to_string(), Batch::with_target(m, off, 0), vec![off])
                    .with_variant(Batch::with_target(m, at, 0), vec![at]);
                plan.var_rank = r;
                plan.rank = Some((r, format!("rank={r}/owned")));
                plan.path = Some("LOCAL vs LOCAL".into());
                out.push(plan);
            }
        }
    }
    out
}
