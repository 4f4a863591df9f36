//! Which mechanism made an all-gather-matmul's LOCAL and GATHER rows
//! differ, from each rank's observed bytes: passive identification over a
//! bounded family of *paths* (order x scale point x x1 re-rounding), one
//! identification per rank for its LOCAL rows (its own shard) and one for
//! its GATHER rows (every other shard), then the candidate mechanisms
//! ranked by how many ranks a (LOCAL, GATHER) pair of their kind
//! reproduces exactly.
//!
//! The mechanisms ([`Hypothesis`]), as relations between the two paths:
//! - `one-path`: the same path (order, scale point, x1) for every row;
//! - `scale-point-split`: the same order, x2's scales entering at a
//!   different point (`agmm-v2-prefix`);
//! - `k-loop-split`: the same step arithmetic, scale point and output
//!   conversion, a different K-loop schedule: k-tile width, fresh or
//!   carried tiles, promotion interval, split (`agmm-v2-kloop`);
//! - `content-coupling`: the same order and scale point, GATHER re-rounding
//!   x1 with a scale shared by its shard's rows (`agmm-v2-coupled`).
//!
//! The path family ([`path_family`]): the step arithmetics of the presets
//! and of the two-GPU capture (`blackwell-mxf8f6f4`, `fma;scale=dequant`,
//! `fma;scale=block`, `hopper-fp8-wgmma;promote=32;scale=block`), each
//! with its K-loop variants (fresh k-tiles of 64..512 k, contiguous splits
//! of 2 and 4, promotion every 64..256 k for mma orders that do not promote
//! already), each with its own scale point and `requant:e4m3|e5m2` (the
//! element format), each with and without x1 re-rounding. A candidate is
//! dropped at its first row that differs (rows of a path are evaluated one
//! first, then the rest), and a row computed once serves every rank.

use super::agmm::{self, AgmmSpec, Operands, PathSpec, Prepared, ScalePoint};
use super::{parse_order, OpError, RankOutput, Result};
use crate::format::Format;
use crate::gemm::MX_BLOCK;
use crate::order::{Family, MxScale, Order};
use std::collections::HashMap;
use std::fmt;

/// A candidate mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hypothesis {
    OnePath,
    ScalePointSplit,
    KLoopSplit,
    ContentCoupling,
}

impl Hypothesis {
    pub const ALL: [Hypothesis; 4] = [
        Hypothesis::OnePath,
        Hypothesis::ScalePointSplit,
        Hypothesis::KLoopSplit,
        Hypothesis::ContentCoupling,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Hypothesis::OnePath => "one-path",
            Hypothesis::ScalePointSplit => "scale-point-split",
            Hypothesis::KLoopSplit => "k-loop-split",
            Hypothesis::ContentCoupling => "content-coupling",
        }
    }

    /// The preset that models it.
    pub fn preset(self) -> &'static str {
        match self {
            Hypothesis::OnePath => "agmm-v2-fixed",
            Hypothesis::ScalePointSplit => "agmm-v2-prefix",
            Hypothesis::KLoopSplit => "agmm-v2-kloop",
            Hypothesis::ContentCoupling => "agmm-v2-coupled",
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Hypothesis::OnePath => "LOCAL and GATHER rows are one computation (no path split)",
            Hypothesis::ScalePointSplit => {
                "LOCAL and GATHER run the same order but apply x2's scales at different points"
            }
            Hypothesis::KLoopSplit => {
                "LOCAL and GATHER use the same step arithmetic and scale point but different K-loop schedules"
            }
            Hypothesis::ContentCoupling => {
                "GATHER re-rounds x1 with a scale shared by its shard's rows (a row depends on the others)"
            }
        }
    }
}

impl fmt::Display for Hypothesis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The step arithmetics the family starts from.
pub const BASE_ORDERS: [&str; 4] = [
    "mma(k=32,f=25,in=e4m3);scale=fused",
    "fma;scale=dequant",
    "fma;scale=block",
    "hopper-fp8-wgmma;promote=32;scale=block",
];

/// The K-loop variants of one order at K (spellings appended to it).
fn kloop_variants(o: &Order, k: usize) -> Vec<String> {
    let mut v = vec![String::new()];
    // fma with block scales counts blocks, not k
    let unit = if o.mma().is_none() && o.scale == MxScale::Block {
        MX_BLOCK
    } else {
        1
    };
    for t in [64usize, 128, 256, 512] {
        if t < k {
            v.push(format!(";ktile={};tile=fresh", t / unit));
        }
    }
    for s in [2, 4] {
        v.push(format!(";split={s}"));
    }
    if o.mma().is_some() && o.promote.is_none() && o.scale != MxScale::Block {
        for p in [64usize, 128, 256] {
            if p < k {
                v.push(format!(";promote={p}"));
            }
        }
    }
    v
}

/// The bounded path family for `spec`'s shape (see the module doc),
/// simplest first; every member validates for `spec`.
pub fn path_family(spec: &AgmmSpec) -> Vec<PathSpec> {
    let Some(fmt) = spec.mx_format else {
        return Vec::new();
    };
    let el = fmt.element();
    let requant = match el {
        Format::E5M2 => ScalePoint::Requant(Format::E5M2),
        _ => ScalePoint::Requant(Format::E4M3),
    };
    let mut out: Vec<PathSpec> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for base in BASE_ORDERS {
        let Ok(b) = base.parse::<Order>() else { continue };
        for suffix in kloop_variants(&b, spec.k) {
            let Ok(o) = format!("{base}{suffix}").parse::<Order>() else {
                continue;
            };
            let own = match o.scale {
                MxScale::Fused => ScalePoint::Fused,
                MxScale::Block => ScalePoint::Block,
                MxScale::Dequant => ScalePoint::Dequant,
            };
            for sp in [own, requant] {
                for x1 in [None, Some(el)] {
                    let p = PathSpec {
                        order: o.to_string(),
                        scale_point: sp,
                        x1_requant: x1,
                    };
                    let probe = AgmmSpec {
                        local: p.clone(),
                        gather: None,
                        ..spec.clone()
                    };
                    if probe.validate().is_ok() && seen.insert((p.order.clone(), sp.to_string(), x1)) {
                        out.push(p);
                    }
                }
            }
        }
    }
    out
}

/// Whether two orders share step arithmetic, scale key and output
/// conversion (so they differ at most in their K-loop schedule).
fn same_numerics(a: &Order, b: &Order) -> bool {
    let fam = |o: &Order| match o.family {
        Family::Fma => "fma".to_string(),
        Family::MulAdd => "muladd".to_string(),
        Family::Mma(m) => format!("{m:?}"),
    };
    fam(a) == fam(b) && a.scale == b.scale && a.out == b.out
}

/// The mechanism relating a LOCAL path to a GATHER path (None: they differ
/// in more than one of the ways the hypotheses name).
pub fn relation(local: &PathSpec, gather: &PathSpec, k: usize) -> Option<Hypothesis> {
    let (Ok(lo), Ok(go)) = (parse_order("local", &local.order), parse_order("gather", &gather.order)) else {
        return None;
    };
    let same_order = same_numerics(&lo, &go) && lo.compile(k) == go.compile(k);
    let sp = local.scale_point == gather.scale_point;
    let x1 = local.x1_requant == gather.x1_requant;
    match (same_order, sp, x1) {
        (true, true, true) => Some(Hypothesis::OnePath),
        (true, false, true) => Some(Hypothesis::ScalePointSplit),
        (false, true, true) if same_numerics(&lo, &go) => Some(Hypothesis::KLoopSplit),
        (true, true, false) if gather.x1_requant.is_some() => Some(Hypothesis::ContentCoupling),
        _ => None,
    }
}

/// Each rank's observed output: full rows, or one digest per row.
pub enum Observed<'a> {
    /// Per rank `[M, N]` f32.
    Rows(&'a [RankOutput]),
    /// Per rank one digest per row, and the digest function.
    Digests {
        per_rank: &'a [Vec<u64>],
        digest: &'a dyn Fn(&[f32]) -> u64,
    },
}

impl Observed<'_> {
    fn ranks(&self) -> usize {
        match self {
            Observed::Rows(r) => r.len(),
            Observed::Digests { per_rank, .. } => per_rank.len(),
        }
    }

    /// Whether `row` is rank `r`'s observed row `g`; with full rows, also
    /// the number of elements whose bits differ.
    fn compare(&self, r: usize, g: usize, row: &[f32]) -> (bool, Option<usize>) {
        match self {
            Observed::Rows(o) => {
                let d = o[r]
                    .row(g)
                    .iter()
                    .zip(row)
                    .filter(|(a, b)| a.to_bits() != b.to_bits())
                    .count();
                (d == 0, Some(d))
            }
            Observed::Digests { per_rank, digest } => (per_rank[r][g] == digest(row), None),
        }
    }
}

/// The paths of the family that reproduce one rank's rows of one kind.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PathMatches {
    /// The global rows identified (LOCAL: the rank's own shard).
    pub rows: Vec<usize>,
    /// Every path of the family that reproduces all of them, simplest first.
    pub matches: Vec<PathSpec>,
    /// When none does: the path whose first row came closest (elements
    /// differing in the first row; None with digests).
    pub closest: Option<(PathSpec, Option<usize>)>,
}

/// One rank's identification.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RankIdentity {
    pub rank: usize,
    pub local: PathMatches,
    pub gather: PathMatches,
    /// The mechanisms with a (LOCAL, GATHER) pair of reproducing paths, and
    /// the simplest such pair.
    pub reproduced_by: Vec<(Hypothesis, PathSpec, PathSpec)>,
}

/// The ranking over every rank.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Ranking {
    pub candidates: usize,
    pub ranks: Vec<RankIdentity>,
    /// Every mechanism with the number of ranks it reproduces; most first,
    /// ties simplest first.
    pub ranking: Vec<(Hypothesis, usize)>,
    /// The mechanisms that reproduce every rank.
    pub supported: Vec<Hypothesis>,
}

impl Ranking {
    /// The one mechanism the data supports, if exactly one reproduces every
    /// rank.
    pub fn verdict(&self) -> Option<Hypothesis> {
        match self.supported.as_slice() {
            [h] => Some(*h),
            _ => None,
        }
    }
}

struct Evaluator<'a> {
    spec: &'a AgmmSpec,
    ops: &'a Operands<'a>,
    family: Vec<PathSpec>,
    prepared: Vec<Option<Prepared>>,
    rows: HashMap<(usize, usize), Vec<f32>>,
}

impl Evaluator<'_> {
    /// Rows `gs` of candidate `c` (computed once, batched).
    fn rows(&mut self, c: usize, gs: &[usize]) -> Result<Vec<Vec<f32>>> {
        let missing: Vec<usize> = gs
            .iter()
            .copied()
            .filter(|g| !self.rows.contains_key(&(c, *g)))
            .collect();
        if !missing.is_empty() {
            if self.prepared[c].is_none() {
                self.prepared[c] = Some(agmm::prepare(self.spec, &self.family[c], self.ops)?);
            }
            let pr = self.prepared[c].as_ref().expect("prepared above");
            let y = agmm::eval_rows(self.spec, &self.family[c], pr, self.ops, &missing)?;
            let n = self.spec.n;
            for (i, g) in missing.iter().enumerate() {
                self.rows.insert((c, *g), y[i * n..(i + 1) * n].to_vec());
            }
        }
        Ok(gs.iter().map(|g| self.rows[&(c, *g)].clone()).collect())
    }

    fn identify(&mut self, obs: &Observed, r: usize, gs: Vec<usize>) -> Result<PathMatches> {
        let mut matches = Vec::new();
        let mut closest: Option<(usize, Option<usize>)> = None;
        if gs.is_empty() {
            return Ok(PathMatches {
                rows: gs,
                matches,
                closest: None,
            });
        }
        for c in 0..self.family.len() {
            // a path the GEMM refuses at this shape (an mma block-scale
            // split whose parts do not start on MX blocks at this K)
            // reproduces nothing; any other error stops the ranking
            let first = match self.rows(c, &gs[..1]) {
                Err(OpError::Gemm(crate::gemm::GemmError::Unsupported(_))) => continue,
                r => r?,
            };
            let (ok, d) = obs.compare(r, gs[0], &first[0]);
            if !ok {
                if closest.is_none_or(|(_, best)| matches!((d, best), (Some(x), Some(y)) if x < y)) {
                    closest = Some((c, d));
                }
                continue;
            }
            let rest = self.rows(c, &gs[1..])?;
            if gs[1..].iter().zip(&rest).all(|(&g, row)| obs.compare(r, g, row).0) {
                matches.push(self.family[c].clone());
            }
        }
        let closest = if matches.is_empty() {
            closest.map(|(c, d)| (self.family[c].clone(), d))
        } else {
            None
        };
        Ok(PathMatches {
            rows: gs,
            matches,
            closest,
        })
    }
}

/// Identifies every rank's LOCAL and GATHER rows in `obs` over the path
/// family for `spec`'s shape (`spec`'s own paths are not used) on the
/// inputs `ops`, and ranks the mechanisms.
pub fn rank_mechanisms(spec: &AgmmSpec, ops: &Operands, obs: &Observed) -> Result<Ranking> {
    let (ws, mpr, m) = (spec.world_size, spec.m_per_rank, spec.m());
    if obs.ranks() != ws {
        return Err(OpError::Input(format!(
            "observed {} ranks, the spec has world size {ws}",
            obs.ranks()
        )));
    }
    if let Observed::Rows(o) = obs {
        if let Some((r, x)) = o.iter().enumerate().find(|(_, x)| x.rows != m || x.cols != spec.n) {
            return Err(OpError::Input(format!(
                "rank {r}: observed [{}, {}], expected [{m}, {}]",
                x.rows, x.cols, spec.n
            )));
        }
    }
    if let Observed::Digests { per_rank, .. } = obs {
        if let Some((r, d)) = per_rank.iter().enumerate().find(|(_, d)| d.len() != m) {
            return Err(OpError::Input(format!(
                "rank {r}: {} row digests, expected {m}",
                d.len()
            )));
        }
    }
    let family = path_family(spec);
    if family.is_empty() {
        return Err(OpError::Spec("mechanism ranking needs MX inputs (mx_format)".into()));
    }
    let mut ev = Evaluator {
        spec,
        ops,
        prepared: (0..family.len()).map(|_| None).collect(),
        family,
        rows: HashMap::new(),
    };
    let mut ranks = Vec::with_capacity(ws);
    for r in 0..ws {
        let own: Vec<usize> = (r * mpr..(r + 1) * mpr).collect();
        let others: Vec<usize> = (0..m).filter(|g| g / mpr != r).collect();
        let local = ev.identify(obs, r, own)?;
        let gather = ev.identify(obs, r, others)?;
        let mut reproduced_by: Vec<(Hypothesis, PathSpec, PathSpec)> = Vec::new();
        for l in &local.matches {
            for g in &gather.matches {
                if let Some(h) = relation(l, g, spec.k) {
                    if !reproduced_by.iter().any(|x| x.0 == h) {
                        reproduced_by.push((h, l.clone(), g.clone()));
                    }
                }
            }
        }
        reproduced_by.sort_by_key(|x| x.0);
        ranks.push(RankIdentity {
            rank: r,
            local,
            gather,
            reproduced_by,
        });
    }
    let mut ranking: Vec<(Hypothesis, usize)> = Hypothesis::ALL
        .iter()
        .map(|&h| {
            (
                h,
                ranks
                    .iter()
                    .filter(|r| r.reproduced_by.iter().any(|x| x.0 == h))
                    .count(),
            )
        })
        .collect();
    ranking.sort_by_key(|&(h, n)| (std::cmp::Reverse(n), h));
    let supported = ranking.iter().filter(|x| x.1 == ws).map(|x| x.0).collect();
    Ok(Ranking {
        candidates: ev.family.len(),
        ranks,
        ranking,
        supported,
    })
}

fn path_words(p: &PathSpec) -> String {
    let mut s = format!("{} with x2 scales at {}", p.order, p.scale_point);
    if let Some(f) = p.x1_requant {
        s.push_str(&format!(", x1 re-rounded to {} per shard", f.name()));
    }
    s
}

impl fmt::Display for Ranking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} candidate paths per row kind", self.candidates)?;
        for r in &self.ranks {
            for (kind, pm) in [("LOCAL", &r.local), ("GATHER", &r.gather)] {
                match (pm.matches.first(), &pm.closest) {
                    (Some(p), _) => writeln!(
                        f,
                        "rank {}: {kind} rows ({}) reproduced by {} path(s), simplest: {}",
                        r.rank,
                        pm.rows.len(),
                        pm.matches.len(),
                        path_words(p)
                    )?,
                    (None, Some((p, d))) => writeln!(
                        f,
                        "rank {}: {kind} rows ({}): no path of the family reproduces them; closest on the first row: {}{}",
                        r.rank,
                        pm.rows.len(),
                        path_words(p),
                        d.map(|d| format!(" ({d} elements differ)")).unwrap_or_default()
                    )?,
                    (None, None) => writeln!(f, "rank {}: {kind}: no rows", r.rank)?,
                }
            }
            if r.reproduced_by.is_empty() {
                writeln!(f, "rank {}: no mechanism reproduces this rank", r.rank)?;
            }
            for (h, l, g) in &r.reproduced_by {
                writeln!(
                    f,
                    "rank {}: {h} reproduces it: LOCAL {} / GATHER {}",
                    r.rank,
                    path_words(l),
                    path_words(g)
                )?;
            }
        }
        let ranks = self.ranks.len();
        let list: Vec<String> = self.ranking.iter().map(|(h, n)| format!("{h} {n}/{ranks}")).collect();
        writeln!(f, "ranking (ranks reproduced): {}", list.join(", "))?;
        match self.supported.as_slice() {
            [] => writeln!(f, "no mechanism of the family reproduces every rank"),
            [h] => writeln!(
                f,
                "the data supports {h} ({}: {}): the only mechanism that reproduces every rank",
                h.preset(),
                h.words()
            ),
            many => {
                let names: Vec<String> = many.iter().map(|h| h.to_string()).collect();
                writeln!(
                    f,
                    "the data cannot tell apart {}: each reproduces every rank (the paths agree on these inputs, or differ where several mechanisms act alike)",
                    names.join(", ")
                )
            }
        }
    }
}
