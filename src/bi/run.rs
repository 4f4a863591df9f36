//! Running cells: building each family's batches from the seed, calling the
//! subject, comparing bytes, the vacuity test and the positive controls.

use super::confirm::NonDetRate;
use super::content::Content;
use super::family::{Family, RowPos};
use super::inputs::{other_id, Draw, Rows};
use super::power::{self, Power};
use super::report::{Cell, Control, Report};
use super::verdict::{compare_rows, RowDiff, Verdict};
use crate::format::Format;
use crate::gemm::{BLayout, Matrix, Problem};
use crate::order::InType;
use crate::rng::SplitMix64;
use crate::subject::{Knobs, Model, ScaleKind, Subject, SubjectError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Size bounds, checked before anything is allocated.
pub struct Limits;

impl Limits {
    pub const MAX_M: usize = 1 << 16;
    /// mxbi's one K limit ([`crate::limits::MAX_K`], 2^22).
    pub const MAX_K: usize = crate::limits::MAX_K;
    pub const MAX_N: usize = 1 << 16;
    /// Largest M*K, K*N or M*N of one batch (f32 elements).
    pub const MAX_ELEMENTS: usize = 1 << 28;
    pub const MAX_CELLS: usize = 1 << 20;
    pub const MAX_REPEATS: usize = 1000;
}

/// What to check.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    pub families: Vec<Family>,
    /// Batch sizes; the `batch` family's baseline is the first.
    pub ms: Vec<usize>,
    pub k: usize,
    pub n: usize,
    /// Target-row positions for `content`, `batch` and `position`.
    pub positions: Vec<RowPos>,
    pub seed: u64,
    /// The element type inputs are drawn in (what the order's steps read).
    pub input: InType,
    /// Runs of the `repeat` family (at least 2).
    pub repeats: usize,
    /// Re-runs of each side of a cell that would fail, before it is
    /// `BI_FAIL` (0: none; see [`super::confirm`]).
    pub confirm: usize,
}

impl CheckOptions {
    /// Checks every bound; the message names the offending option.
    pub fn validate(&self, has_vs: bool) -> Result<(), String> {
        if self.families.is_empty() {
            return Err("no family given".into());
        }
        if self.ms.is_empty() {
            return Err("no M given".into());
        }
        for &m in &self.ms {
            if m == 0 || m > Limits::MAX_M {
                return Err(format!("M = {m} is out of range (1..={})", Limits::MAX_M));
            }
        }
        if self.k == 0 {
            return Err(format!(
                "K = 0 is out of range (1..={}, mxbi's K limit)",
                crate::limits::MAX_K
            ));
        }
        crate::limits::check_k("K", self.k)?;
        if self.n == 0 || self.n > Limits::MAX_N {
            return Err(format!("N = {} is out of range (1..={})", self.n, Limits::MAX_N));
        }
        let m_max = *self.ms.iter().max().unwrap_or(&1);
        for (what, x, y) in [("M*K", m_max, self.k), ("K*N", self.k, self.n), ("M*N", m_max, self.n)] {
            if x.checked_mul(y).is_none_or(|p| p > Limits::MAX_ELEMENTS) {
                return Err(format!("{what} = {x}*{y} exceeds {} elements", Limits::MAX_ELEMENTS));
            }
        }
        if self.repeats < 2 || self.repeats > Limits::MAX_REPEATS {
            return Err(format!(
                "repeats = {} is out of range (2..={})",
                self.repeats,
                Limits::MAX_REPEATS
            ));
        }
        if self.confirm > super::confirm::MAX_CONFIRM {
            return Err(format!(
                "confirm = {} is out of range (0..={})",
                self.confirm,
                super::confirm::MAX_CONFIRM
            ));
        }
        if self.families.contains(&Family::Switch) && !has_vs {
            return Err("the switch family needs a second subject (--vs)".into());
        }
        if self.positions.contains(&RowPos::All) {
            if let Some(f) = self.families.iter().find(|f| **f != Family::Position) {
                return Err(format!(
                    "row position 'all' applies to the position family only, not to {}",
                    f.name()
                ));
            }
        }
        let cells = self.families.len() * self.ms.len() * self.positions.len().max(RowPos::POSITIONS.len());
        if cells > Limits::MAX_CELLS {
            return Err(format!("{cells} cells exceed {}", Limits::MAX_CELLS));
        }
        Ok(())
    }
}

/// The M values where a subject's behaviour is likely to change: for each
/// boundary b (the last M of a dispatch entry, a tile height) b-1, b, b+1,
/// plus the usual 1, 2, 8/9, 16/17, 32/33, 64/65, 128/129, 256/257, 512/513.
pub fn edge_ms(boundaries: &[usize]) -> Vec<usize> {
    let mut v = vec![1, 2, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256, 257, 512, 513];
    for &b in boundaries {
        v.extend([b.saturating_sub(1), b, b + 1]);
    }
    v.retain(|m| (1..=Limits::MAX_M).contains(m));
    v.sort_unstable();
    v.dedup();
    v
}

/// One batch: its row ids, in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Batch {
    ids: Vec<u64>,
}

impl Batch {
    /// M rows: the target (id 0) at `at`, the others from `set` in order.
    pub(super) fn with_target(m: usize, at: usize, set: u64) -> Batch {
        Batch {
            ids: super::inputs::target_batch(m, at, set),
        }
    }

    /// M rows `0..M` of set A (all rows compared).
    fn plain(m: usize) -> Batch {
        Batch {
            ids: (0..m).map(|j| other_id(0, j)).collect(),
        }
    }
}

/// Most f32 elements the input caches of one session hold.
const CACHE_ELEMENTS: usize = 1 << 24;

/// The inputs of every cell that shares (seed, K, N, input type, draw): B,
/// the rows by id, the batches and the vacuity verdicts, each built once.
pub(super) struct Session {
    pub(super) rows: Rows,
    row_cache: HashMap<u64, Arc<Vec<f32>>>,
    batches: HashMap<Batch, Arc<Vec<f32>>>,
    cached: usize,
    /// Power by the ids of the compared rows and the output formats their
    /// bytes allow (every order of the family is row-only: rows are
    /// independent under it).
    power: HashMap<(Vec<u64>, Vec<Option<Format>>), Power>,
}

impl Session {
    pub(super) fn new(opts: &CheckOptions, draw: Draw, content: Content) -> Session {
        Session {
            rows: Rows::build(opts.seed, opts.k, opts.n, opts.input, draw, content),
            row_cache: HashMap::new(),
            batches: HashMap::new(),
            cached: 0,
            power: HashMap::new(),
        }
    }

    /// Whether this session serves `opts` drawn `draw` with `content` (same
    /// seed, K, N, input type, draw and content).
    pub(super) fn serves(&self, opts: &CheckOptions, draw: Draw, content: Content) -> bool {
        let r = &self.rows;
        (r.seed, r.k, r.n, r.ty, r.draw, r.content) == (opts.seed, opts.k, opts.n, opts.input, draw, content)
    }

    pub(super) fn batch(&mut self, b: &Batch) -> Arc<Vec<f32>> {
        if let Some(a) = self.batches.get(b) {
            return a.clone();
        }
        let k = self.rows.k;
        if self.cached + (b.ids.len() + 1) * k > CACHE_ELEMENTS {
            self.batches.clear();
            self.row_cache.clear();
            self.cached = 0;
        }
        let mut a = Vec::with_capacity(b.ids.len() * k);
        for &id in &b.ids {
            let row = match self.row_cache.get(&id) {
                Some(r) => r.clone(),
                None => {
                    let r = Arc::new(self.rows.row(id));
                    self.cached += k;
                    self.row_cache.insert(id, r.clone());
                    r
                }
            };
            a.extend_from_slice(&row);
        }
        let a = Arc::new(a);
        self.cached += a.len();
        self.batches.insert(b.clone(), a.clone());
        a
    }

    /// The power of rows `sel` of batch `b` (at most [`power::MAX_ROWS`]
    /// of them) in the weakest of `formats`.
    fn power(&mut self, b: &Batch, sel: &[usize], formats: Vec<Option<Format>>) -> Power {
        let ids: Vec<u64> = sel.iter().take(power::MAX_ROWS).map(|&i| b.ids[i]).collect();
        let key = (ids, formats);
        if let Some(p) = self.power.get(&key) {
            return p.clone();
        }
        let r = &self.rows;
        // sessions are rebuilt per job of a matrix: the measurement is also
        // kept across them, by everything that determines it
        let global = (r.seed, r.k, r.n, r.ty, r.draw, r.content, key.clone());
        let p = match power_cache().lock().ok().and_then(|c| c.get(&global).cloned()) {
            Some(p) => p,
            None => {
                let a = r.batch(&key.0);
                let p = power::measure(&a, &r.b, r.k, r.n, r.ty, &key.1, r.seed);
                if let Ok(mut c) = power_cache().lock() {
                    if c.len() >= POWER_CACHE_ENTRIES {
                        c.clear();
                    }
                    c.insert(global, p.clone());
                }
                p
            }
        };
        self.power.insert(key, p.clone());
        p
    }
}

/// What determines a power measurement: seed, K, N, input type, draw,
/// content, compared row ids and output formats.
type PowerKey = (
    u64,
    usize,
    usize,
    InType,
    Draw,
    Content,
    (Vec<u64>, Vec<Option<Format>>),
);

/// Most power measurements kept across sessions.
const POWER_CACHE_ENTRIES: usize = 4096;

fn power_cache() -> &'static std::sync::Mutex<HashMap<PowerKey, Power>> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<HashMap<PowerKey, Power>>> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Runs a subject's `rank` on a batch `a` (`[m, K]`); `sel` selects
/// output rows.
pub(super) fn run_batch(
    subject: &dyn Subject,
    rank: usize,
    rows: &Rows,
    a: &[f32],
    sel: &[usize],
) -> Result<Vec<f32>, SubjectError> {
    let p = Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(&rows.b),
        m: a.len() / rows.k,
        n: rows.n,
        k: rows.k,
        b_layout: BLayout::Kn,
    };
    let out = if rank == 0 {
        subject.run(&p, Some(sel))?
    } else {
        subject.run_on_rank(&p, rank, Some(sel))?
    };
    if out.len() != sel.len() * rows.n {
        return Err(SubjectError::Failed {
            subject: subject.name(),
            why: format!("returned {} values for {} rows of N = {}", out.len(), sel.len(), rows.n),
        });
    }
    Ok(out)
}

/// A planned cell: the batches to compare, which rows and on which ranks.
pub(super) struct Plan {
    pub(super) family: Family,
    pub(super) m: usize,
    row: String,
    baseline: Batch,
    base_rows: Vec<usize>,
    base_rank: usize,
    /// The variant batch and its rows, matched one to one with `base_rows`.
    variant: Option<(Batch, Vec<usize>)>,
    var_rank: usize,
    /// Row labels for offenders.
    labels: Vec<usize>,
    /// Rank cells: the compared rank and the id suffix (`rank=R/held`).
    rank: Option<(usize, String)>,
    /// Rank cells: the paths compared, e.g. `GATHER vs LOCAL`.
    path: Option<String>,
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

fn cell_of(plan: &Plan, opts: &CheckOptions, knobs: &Knobs, draw: Draw, subject: &dyn Subject) -> Cell {
    let kid = knobs.id();
    let mut id = format!("{}/", plan.family);
    if !kid.is_empty() {
        id.push_str(&kid);
        id.push('/');
    }
    let inputs = (draw != Draw::Wide).then_some(draw);
    if let Some(d) = inputs {
        id.push_str(&format!("inputs={}/", d.name()));
    }
    id.push_str(&format!("m={}/k={}/n={}/row={}", plan.m, opts.k, opts.n, plan.row));
    if let Some((_, suffix)) = &plan.rank {
        id.push('/');
        id.push_str(suffix);
    }
    Cell {
        id,
        family: plan.family,
        subject: subject.name(),
        m: plan.m,
        k: opts.k,
        n: opts.n,
        row: plan.row.clone(),
        rank: plan.rank.as_ref().map(|r| r.0),
        knobs: *knobs,
        inputs,
        path: plan.path.clone(),
        verdict: Verdict::Error,
        diff: RowDiff::default(),
        reason: None,
        power: None,
        nondet_rate: None,
    }
}

/// A per-cell ERROR, or Err when the subject is broken (the whole check
/// stops: nothing after it could run).
fn error_cell(mut c: Cell, e: SubjectError) -> Result<Cell, String> {
    if let SubjectError::Broken { .. } = e {
        return Err(e.to_string());
    }
    c.verdict = Verdict::Error;
    c.reason = Some(e.to_string());
    Ok(c)
}

/// The variant side of a planned cell: its batch on its rank, the
/// partner subject on the baseline batch (`switch`), or the baseline's
/// own bytes (`repeat`).
fn run_variant(
    plan: &Plan,
    session: &mut Session,
    base_a: &Arc<Vec<f32>>,
    base: &[f32],
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
) -> Result<Vec<f32>, SubjectError> {
    match (&plan.variant, plan.family) {
        (_, Family::Repeat) => Ok(base.to_vec()),
        (_, Family::Switch) => match vs {
            Some(other) => run_batch(other, 0, &session.rows, base_a, &plan.base_rows),
            None => Err(SubjectError::Unsupported {
                subject: subject.name(),
                why: "the switch family needs a second subject".into(),
            }),
        },
        (Some((batch, sel)), _) => {
            let a = if *batch == plan.baseline {
                base_a.clone()
            } else {
                session.batch(batch)
            };
            run_batch(subject, plan.var_rank, &session.rows, &a, sel)
        }
        (None, _) => unreachable!("every family but repeat and switch plans a variant"),
    }
}

/// Re-runs both sides of a cell whose sides differ, `opts.confirm` times
/// each ([`super::confirm`]): None when every re-run reproduced its side's
/// first bytes (the failure stands), else the disagreement rate.
fn confirm_sides(
    plan: &Plan,
    session: &mut Session,
    opts: &CheckOptions,
    base_a: &Arc<Vec<f32>>,
    (base, variant): (&[f32], &[f32]),
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
) -> Result<Option<NonDetRate>, SubjectError> {
    let n = session.rows.n;
    let rows = &session.rows;
    let on_base = super::confirm::reruns(base, n, opts.confirm, || {
        run_batch(subject, plan.base_rank, rows, base_a, &plan.base_rows)
    })?;
    let on_variant = super::confirm::reruns(variant, n, opts.confirm, || {
        run_variant(plan, session, base_a, base, subject, vs)
    })?;
    let differed = on_base + on_variant;
    Ok((differed > 0).then(|| NonDetRate::new(differed, 2 * opts.confirm)))
}

/// Runs one planned cell (Err: a subject is broken).
pub(super) fn run_plan(
    plan: &Plan,
    session: &mut Session,
    opts: &CheckOptions,
    knobs: &Knobs,
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
) -> Result<Cell, String> {
    let mut cell = cell_of(plan, opts, knobs, session.rows.draw, subject);
    let base_a = session.batch(&plan.baseline);
    let rows = &session.rows;
    let base = match run_batch(subject, plan.base_rank, rows, &base_a, &plan.base_rows) {
        Ok(x) => x,
        Err(e) => return error_cell(cell, e),
    };
    // the power of the compared rows, in the formats the bytes allow
    cell.power = Some(session.power(&plan.baseline, &plan.base_rows, power::output_formats(&base)));
    let rows = &session.rows;
    let runs = if plan.family == Family::Repeat { opts.repeats } else { 2 };
    for done in 1..runs {
        match run_batch(subject, plan.base_rank, rows, &base_a, &plan.base_rows) {
            Ok(again) => {
                let d = compare_rows(&base, &again, rows.n, &plan.base_rows);
                if !d.identical() {
                    // the rate: this re-run, then `confirm` more
                    let more = match super::confirm::reruns(&base, rows.n, opts.confirm, || {
                        run_batch(subject, plan.base_rank, rows, &base_a, &plan.base_rows)
                    }) {
                        Ok(x) => x,
                        Err(e) => return error_cell(cell, e),
                    };
                    let rate = NonDetRate::new(1 + more, done + opts.confirm);
                    cell.verdict = Verdict::NonDet;
                    cell.diff = d;
                    cell.reason = Some(format!("two runs of the same batch differ; {}", rate.text()));
                    cell.nondet_rate = Some(rate);
                    return Ok(cell);
                }
            }
            Err(e) => return error_cell(cell, e),
        }
    }
    let variant = match run_variant(plan, session, &base_a, &base, subject, vs) {
        Ok(v) => v,
        Err(e) => return error_cell(cell, e),
    };
    cell.diff = compare_rows(&base, &variant, session.rows.n, &plan.labels);
    // confirm (super::confirm): before a cell is BI_FAIL, each side is
    // re-run; a side that does not reproduce makes it NON_DET
    if !cell.diff.identical() && opts.confirm > 0 {
        match confirm_sides(plan, session, opts, &base_a, (&base, &variant), subject, vs) {
            Ok(None) => {}
            Ok(Some(rate)) => {
                cell.verdict = Verdict::NonDet;
                cell.reason = Some(format!(
                    "the sides differ, but re-runs of the same batch do not reproduce: {}",
                    rate.text()
                ));
                cell.nondet_rate = Some(rate);
                return Ok(cell);
            }
            Err(e) => return error_cell(cell, e),
        }
    }
    // power is measured on the values given: a subject that scales them by
    // MX scales of its own choosing (a VAR knob) sums other values, so its
    // cells are never called vacuous (their power is reported all the same)
    let own_scales = knobs.x1_scales == Some(ScaleKind::Varying) || knobs.x2_scales == Some(ScaleKind::Varying);
    let weak = cell.power.as_ref().filter(|p| !p.sufficient());
    cell.verdict = if !cell.diff.identical() {
        Verdict::Fail
    } else if let (false, Some(p)) = (own_scales, weak) {
        cell.reason = Some(format!(
            "power {:.3} < {} in {}: {} of the {} order pairs of the family give the same bytes on these inputs, so an order change may not show",
            p.value,
            power::THRESHOLD,
            p.output,
            p.pairs_agreeing,
            p.orders * p.orders.saturating_sub(1) / 2
        ));
        Verdict::Vacuous
    } else {
        Verdict::Pass
    };
    Ok(cell)
}

/// A subject built to break batch invariance, for the positive control:
/// the CPU model (`fma`) whose output bits are perturbed by a hash of the
/// whole batch (its bytes, M, the row's position), the rank asked for and,
/// when `nondet`, a call counter. Its rows depend on other rows, on M, on
/// position, on rank and on order, so every family must fail on it.
struct ControlSubject {
    nondet: bool,
    world_size: usize,
    calls: AtomicU64,
}

fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
}

impl Subject for ControlSubject {
    fn name(&self) -> String {
        format!("control:{}", if self.nondet { "nondet" } else { "coupled" })
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        self.run_on_rank(p, 0, rows)
    }

    fn run_on_rank(&self, p: &Problem, rank: usize, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let model = Model::new("fma".parse().expect("fma parses"));
        let all: Vec<usize> = (0..p.m).collect();
        let sel = rows.unwrap_or(&all);
        let mut out = model.run(p, Some(sel))?;
        let mut h = 0xCBF2_9CE4_8422_2325u64;
        if let Matrix::F32(a) = p.a {
            for x in a {
                fnv(&mut h, &x.to_bits().to_le_bytes());
            }
        }
        fnv(&mut h, &(p.m as u64).to_le_bytes());
        fnv(&mut h, &(rank as u64).to_le_bytes());
        if self.nondet {
            fnv(&mut h, &self.calls.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        }
        for (ri, &r) in sel.iter().enumerate() {
            let mut hr = h;
            fnv(&mut hr, &(r as u64).to_le_bytes());
            for c in 0..p.n {
                let mask = ((hr >> (16 * (c % 4))) & 0xFFFF) as u32 | 1;
                let x = &mut out[ri * p.n + c];
                *x = f32::from_bits(x.to_bits() ^ mask);
            }
        }
        Ok(out)
    }
}

/// The positive control of one family, on `plan` (the family's largest-M
/// cell): the control subject must fail it.
pub(super) fn control(plan: &Plan, session: &mut Session, opts: &CheckOptions, ws: usize) -> Result<Control, String> {
    let f = plan.family;
    let coupled = ControlSubject {
        nondet: f == Family::Repeat,
        world_size: ws,
        calls: AtomicU64::new(0),
    };
    let model = Model::new("fma".parse().expect("fma parses"));
    let none = Knobs::default();
    // switch: the model against the coupled control
    let cell = if f == Family::Switch {
        run_plan(plan, session, opts, &none, &model, Some(&coupled))?
    } else {
        run_plan(plan, session, opts, &none, &coupled, None)?
    };
    let expected = if f == Family::Repeat {
        Verdict::NonDet
    } else {
        Verdict::Fail
    };
    Ok(Control {
        family: f,
        cell: cell.id.clone(),
        subject: coupled.name(),
        verdict: cell.verdict,
        expected,
        held: cell.verdict == expected,
    })
}

/// Runs the whole check: every cell of every family, then one positive
/// control per family. `progress(done, total)` is called after each cell.
/// Err: bad options, no cell to check, or a subject reported
/// [`SubjectError::Broken`] (the check stops at once; no report).
pub fn check(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    check_shard(subject, vs, opts, None, progress)
}

/// [`check`] on one shard `(i, n)` of the cells (see
/// [`super::matrix::run_matrix`] for the selection).
pub fn check_shard(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    shard: Option<(usize, usize)>,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    check_shard_content(subject, vs, opts, shard, Content::default(), progress)
}

/// [`check_shard`] with inputs drawn as `content` says.
pub fn check_shard_content(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    shard: Option<(usize, usize)>,
    content: Content,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    content.validate()?;
    let job = super::matrix::Job {
        knobs: Knobs::default(),
        opts: opts.clone(),
        draw: Draw::Wide,
    };
    let mut report = super::matrix::run_jobs(
        &[job],
        &|_| Ok(super::matrix::Held::Borrowed(subject)),
        vs,
        shard,
        content,
        progress,
    )?;
    report.matrix = None;
    Ok(report)
}

/// [`check`] with inputs drawn as `content` says (a case's `content`).
pub fn check_content(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    content: Content,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    content.validate()?;
    let job = super::matrix::Job {
        knobs: Knobs::default(),
        opts: opts.clone(),
        draw: Draw::Wide,
    };
    let mut report = super::matrix::run_jobs(
        &[job],
        &|_| Ok(super::matrix::Held::Borrowed(subject)),
        vs,
        None,
        content,
        progress,
    )?;
    report.matrix = None;
    Ok(report)
}

/// The cells of a check and nothing else (no positive controls, no
/// report): what a search that runs many small checks needs. `knobs` only
/// names the subject's setting in the cell ids. Err: bad options, or a
/// subject that reported itself broken.
pub fn check_cells(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    content: Content,
    knobs: &Knobs,
) -> Result<Vec<Cell>, String> {
    opts.validate(vs.is_some())?;
    content.validate()?;
    let mut session = Session::new(opts, Draw::Wide, content);
    let mut fams = opts.families.clone();
    fams.sort_unstable();
    fams.dedup();
    let mut cells = Vec::new();
    for f in fams {
        for plan in plans(opts, f, subject.world_size()) {
            cells.push(run_plan(&plan, &mut session, opts, knobs, subject, vs)?);
        }
    }
    Ok(cells)
}
