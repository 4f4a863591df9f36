//! `mxbi explain --case CASE --cell ID` on an op subject (`op:PRESET`, or
//! `nccl:PRESET` through the CPU model its GPUs must reproduce): the
//! cell's two sides explained with the op's provenance.
//!
//! Each side (a batch, the target row's index in it, the rank asked) is
//! run as the whole op ([`crate::op::run_op`] on the side's job,
//! [`OpSubject::op_job`]); the target row's provenance record is taken from
//! that run and the run's row is checked against the subject's bytes (a
//! record that does not reproduce them is said so and the cell is not
//! counted as explained). The two records are then diffed
//! ([`crate::op::divergence::diverge_jobs`], as `mxbi op check` does): the
//! first diverging node (an x2 or x1 K-block a path re-rounds, the order
//! trees' first differing node with its k-tile or split part, the
//! cross-rank reduction step and its ranks), with the path (LOCAL, GATHER)
//! and rank of each side, and the mechanism in words. For
//! all-gather-matmul, the mechanism is also named as `mxbi op explain`
//! names it: from the two paths ([`crate::op::hypotheses::relation`]) and,
//! from the bytes alone, by `mxbi op explain`'s ranking
//! ([`crate::op::hypotheses::rank_mechanisms`]) over every rank's copy of
//! the variant batch as the subject answers it (skipped, and said so, above
//! [`RANKING_BUDGET`]). The fix is a [`crate::explain::Fix`]: one path for
//! LOCAL and GATHER rows; one rank order for every chunk of a reduction.
//!
//! Exit status ([`Explained::held`]): held when the records reproduce both
//! sides' bytes (or carry a non-deterministic reduction, whose run is not
//! the model's run 0) and account for them: the bytes agree, or a node
//! diverges, or the records carry a mechanism that couples a row to other
//! rows' content or to the run (per-tensor amax, MX blocks along M,
//! non-deterministic reduction, routing, row-count tiling).

use super::{Result, Unexplained};
use crate::explain::{Fix, Varies};
use crate::gemm::{BLayout, Matrix, Problem};
use crate::mx::MxFormat;
use crate::op::divergence::{diverge_jobs, Job, OpDivergence};
use crate::op::hypotheses::{path_family, rank_mechanisms, relation, Hypothesis, Observed, Ranking};
use crate::op::subject::OpSubject;
use crate::op::{self, agmm, Inputs, Mechanism, OpSpec, RankOutput, RowProvenance};
use crate::subject::{Knobs, Subject};
use crate::subjects::op_model;
use serde_json::{json, Value};

/// Most multiply-adds the mechanism ranking may cost (candidate paths x
/// rows x N x K); above it the ranking is skipped and `mxbi op explain`
/// named instead.
pub const RANKING_BUDGET: usize = 1 << 30;

/// One side of a cell.
pub struct Side<'a> {
    /// The subject the bytes came from (the ranking asks it for every rank).
    pub subject: &'a dyn Subject,
    /// The batch `[M, K]`, f32 values as the checker draws them.
    pub a: &'a [f32],
    /// The target row's index in the batch.
    pub at: usize,
    /// The rank asked; 0 is the copy [`Subject::run`] answers (for
    /// reduce-scatter: the row's holder).
    pub rank: usize,
    /// The subject's bytes of the target row.
    pub bytes: &'a [f32],
}

/// The target row's operands as an all-gather-matmul reads them, for the
/// order identification: x1 codes `[K]` and scales `[K/32]`, x2 codes and
/// scales `[K, N]` / `[K/32, N]`.
pub struct MxRow {
    pub format: MxFormat,
    pub c1: Vec<u8>,
    pub s1: Vec<u8>,
    pub c2: Vec<u8>,
    pub s2: Vec<u8>,
}

impl MxRow {
    /// The target row as a one-row MX problem (B `[K, N]`).
    pub fn problem(&self, n: usize) -> Problem<'_> {
        Problem {
            a: Matrix::Mx {
                codes: &self.c1,
                scales: &self.s1,
                format: self.format,
            },
            b: Matrix::Mx {
                codes: &self.c2,
                scales: &self.s2,
                format: self.format,
            },
            m: 1,
            n,
            k: self.c1.len(),
            b_layout: BLayout::Kn,
        }
    }
}

/// The op explanation of a cell.
pub struct Explained {
    /// The row JSON's `"op"` object.
    pub json: Value,
    pub text: String,
    pub held: bool,
    pub mx: Option<MxRow>,
    /// What differs between the sides for the order section's fixes (the
    /// path, when the two copies take different paths).
    pub varies: Option<Varies>,
    /// The same, summarised for a report's explanation.
    pub story: OpStory,
}

/// An op cell's explanation in a few fields (`bi::Explanation`'s).
pub struct OpStory {
    /// Each side in words (rank, row, M, path, order, scale point) and its
    /// order, whether the op model reproduces the side's bytes, and its
    /// path (`LOCAL`, `GATHER`).
    pub sides: [(String, String, bool, String); 2],
    pub first_node: Option<String>,
    pub mechanisms: Vec<String>,
    pub fixes: Vec<String>,
}

/// One side run as the whole op.
struct Ran {
    spec: OpSpec,
    inputs: Inputs,
    record: RowProvenance,
    reproduces: bool,
    m: usize,
}

/// The op explanation of a cell whose subject is `spec` under `knobs`:
/// None when it is not an op subject (`op:`, `nccl:`). `vs`: Some for a
/// switch cell, whose right side is the case's `vs` subject (None: it has
/// none; a right side that is not an op subject leaves the cell to the
/// order identification).
pub fn for_cell(
    (spec, knobs): (&str, &Knobs),
    vs: Option<Option<&str>>,
    left: &Side,
    right: &Side,
    b: &[f32],
) -> Result<Option<Explained>> {
    let model = |s: &str, k: &Knobs| op_model(s, k).transpose().map_err(Unexplained);
    let Some(lm) = model(spec, knobs)? else {
        return Ok(None);
    };
    let rm = match vs {
        None => None,
        Some(Some(v)) => match model(v, &Knobs::default())? {
            Some(m) => Some(m),
            None => return Ok(None),
        },
        Some(None) => return Ok(None),
    };
    explain((&lm, left), (rm.as_ref().unwrap_or(&lm), right), b).map(Some)
}

fn run_side(model: &OpSubject, s: &Side, b: &[f32], k: usize, n: usize) -> Result<Ran> {
    let m = s.a.len() / k;
    let p = Problem {
        a: Matrix::F32(s.a),
        b: Matrix::F32(b),
        m,
        n,
        k,
        b_layout: BLayout::Kn,
    };
    let (spec, inputs) = model.op_job(&p)?;
    let out = op::run_op(&spec, &inputs)?;
    let record = out
        .provenance
        .iter()
        .find(|r| r.global_row == s.at && (s.rank == 0 || r.rank == s.rank))
        .cloned()
        .ok_or_else(|| Unexplained(format!("the op holds no copy of row {} on rank {}", s.at, s.rank)))?;
    let row = out.per_rank[record.rank].row(record.row);
    let reproduces = row.len() == s.bytes.len() && row.iter().zip(s.bytes).all(|(x, y)| x.to_bits() == y.to_bits());
    Ok(Ran {
        spec,
        inputs,
        record,
        reproduces,
        m,
    })
}

/// `mxbi op explain`'s ranking on every rank's copy of `s`'s batch as the
/// subject answers it; Err(reason) when it is skipped.
fn ranking(
    s: &Side,
    spec: &agmm::AgmmSpec,
    inputs: &Inputs,
    b: &[f32],
) -> Result<std::result::Result<Ranking, String>> {
    let (m, k, n) = (spec.m(), spec.k, spec.n);
    let cost = path_family(spec)
        .len()
        .saturating_mul(m)
        .saturating_mul(n)
        .saturating_mul(k);
    if cost > RANKING_BUDGET {
        return Ok(Err(format!(
            "skipped: about {cost} multiply-adds (at most {RANKING_BUDGET}); run mxbi op explain on the op's outputs"
        )));
    }
    let p = Problem {
        a: Matrix::F32(s.a),
        b: Matrix::F32(b),
        m,
        n,
        k,
        b_layout: BLayout::Kn,
    };
    let mut per_rank = Vec::with_capacity(spec.world_size);
    for r in 0..spec.world_size {
        let data = if r == 0 {
            s.subject.run(&p, None)?
        } else {
            s.subject.run_on_rank(&p, r, None)?
        };
        per_rank.push(RankOutput { rows: m, cols: n, data });
    }
    let ops = agmm::read(spec, inputs)?;
    Ok(Ok(rank_mechanisms(spec, &ops, &Observed::Rows(&per_rank))?))
}

/// The records' mechanisms that make a row depend on other rows' content
/// or on the run (nothing a diverging node shows).
fn coupling(r: &RowProvenance) -> Vec<Mechanism> {
    r.mechanisms
        .iter()
        .copied()
        .filter(|m| {
            matches!(
                m,
                Mechanism::PerTensorAmax
                    | Mechanism::MxAlongM
                    | Mechanism::NonDeterministic
                    | Mechanism::Routing
                    | Mechanism::RowCountTiling
                    | Mechanism::BatchDependentSplit
            )
        })
        .collect()
}

fn side_words(r: &Ran, s: &Side) -> String {
    let rec = &r.record;
    let mut w = format!(
        "rank {} row {} of M = {} on the {} path, {}",
        rec.rank,
        rec.row,
        r.m,
        rec.path.to_uppercase(),
        rec.order
    );
    if let Some(sp) = &rec.scale_point {
        w.push_str(&format!(", x2 scales at {sp}"));
    }
    if let Some(red) = &rec.reduction {
        w.push_str(&format!(", reduction {red}"));
    }
    if let Some(d) = &rec.detail {
        w.push_str(&format!(" ({d})"));
    }
    w.push_str(if r.reproduces {
        "; the op model reproduces the subject's bytes"
    } else if s.rank == 0 && rec.mechanisms.contains(&Mechanism::NonDeterministic) {
        "; the op model's run differs from the subject's bytes (a non-deterministic reduction draws its order per run)"
    } else {
        "; the op model does NOT reproduce the subject's bytes: this record is not the row's computation"
    });
    w
}

/// Explains the cell whose sides are `left` (baseline) and `right`
/// (variant), each with its op model, both on the weights `b` `[K, N]`.
fn explain((lm, left): (&OpSubject, &Side), (rm, right): (&OpSubject, &Side), b: &[f32]) -> Result<Explained> {
    // B is [K, N]; a side's bytes are one row of N
    let n = left.bytes.len();
    let k = b.len() / n.max(1);
    let (l, r) = (run_side(lm, left, b, k, n)?, run_side(rm, right, b, k, n)?);
    let differ: Vec<usize> = (0..n.min(left.bytes.len()).min(right.bytes.len()))
        .filter(|&j| left.bytes[j].to_bits() != right.bytes[j].to_bits())
        .collect();
    let col = differ.first().copied();
    let div: OpDivergence = diverge_jobs(
        Job {
            spec: &l.spec,
            inputs: Some(&l.inputs),
        },
        &l.record,
        Job {
            spec: &r.spec,
            inputs: Some(&r.inputs),
        },
        &r.record,
        col,
    )?;
    let mut text = divergence_text(lm, (&l, left), (&r, right), &differ, n, &div);
    let same_bytes = differ.is_empty();
    let mut couple: Vec<Mechanism> = coupling(&l.record);
    couple.extend(
        coupling(&r.record)
            .into_iter()
            .filter(|m| !coupling(&l.record).contains(m)),
    );
    let mut named = String::new();
    let mut hypothesis: Option<Hypothesis> = None;
    let mut fixes: Vec<Fix> = Vec::new();
    let mut rank_json = Value::Null;
    let mut ranking_said = String::new();
    let mut mx = None;
    let mut varies = None;
    if let (OpSpec::AllGatherMatmul(sa), OpSpec::AllGatherMatmul(sb)) = (&l.spec, &r.spec) {
        let g = agmm_story((sa, &l), (sb, &r, right), b, k)?;
        (named, hypothesis, fixes, varies, mx) = (g.named, g.hypothesis, g.fixes, g.varies, g.mx);
        (ranking_said, rank_json) = g.ranking;
    }
    // a cross-rank reduction: the ring position, and one order for all
    let (ca, cb) = (&l.record.computed_on, &r.record.computed_on);
    let ring = |x: &Ran| match &x.spec {
        OpSpec::MatmulReduceScatter(s) | OpSpec::MatmulAllReduce(s)
            if x.record.mechanisms.contains(&Mechanism::PositionDependentReduction) =>
        {
            Some(x.record.global_row / s.m.div_ceil(s.world_size))
        }
        _ => None,
    };
    if let (Some(c1), Some(c2)) = (ring(&l), ring(&r)) {
        named = if c1 == c2 {
            format!("ring position: both rows sit in chunk {c1}, so the ring adds their partials in the same order")
        } else {
            format!(
                "ring position: the ring starts adding at the rank after the chunk's owner; the rows sit in chunks {c1} and {c2} (owners rank {c1} and rank {c2}), so their partials are added starting at rank {} and rank {}",
                ca.first().copied().unwrap_or_default(),
                cb.first().copied().unwrap_or_default()
            )
        };
    }
    if ca.len() > 1 && (ca != cb || couple.contains(&Mechanism::NonDeterministic)) {
        fixes.push(Fix::FixedRankOrder { ranks: ca.clone() });
    }
    if named.is_empty() && !couple.is_empty() && div.nodes.is_empty() {
        let names: Vec<String> = couple
            .iter()
            .map(|m| {
                serde_json::to_value(m)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            })
            .collect();
        named = format!(
            "{} ({}): the row depends on the other rows of its batch or on the run, not on a path or order",
            if couple.contains(&Mechanism::NonDeterministic) {
                "non-deterministic reduction"
            } else {
                "content coupling"
            },
            names.join(", ")
        );
    }
    if !named.is_empty() {
        text.push_str(&format!("  mechanism named: {named}\n"));
    }
    if !ranking_said.is_empty() {
        text.push_str(&format!("  {ranking_said}\n"));
    }
    if !same_bytes || !div.nodes.is_empty() {
        for f in &fixes {
            text.push_str(&format!("  fix: {f}\n"));
        }
    }
    // a non-deterministic reduction's run is not the model's run 0
    let nondet = couple.contains(&Mechanism::NonDeterministic);
    let accounted = (l.reproduces && r.reproduces) || nondet;
    let held = accounted && (same_bytes || !div.nodes.is_empty() || !couple.is_empty());
    let side_json =
        |x: &Ran, s: &Side| json!({"rank_asked": s.rank, "m": x.m, "row": s.at, "model_reproduces": x.reproduces});
    let json = json!({
        "model": lm.name(),
        "left": side_json(&l, left),
        "right": side_json(&r, right),
        "elements_differ": differ.len(),
        "first_node": div.nodes.first(),
        "divergence": div,
        "hypothesis": hypothesis.map(|h| json!({"name": h, "preset": h.preset(), "words": h.words()})),
        "mechanism_named": named,
        "ranking": rank_json,
        "fixes": fixes.iter().map(|f| json!({"fix": f, "words": f.to_string()})).collect::<Vec<_>>(),
        "explained": held,
    });
    let story = op_summary(&div, &named, (&l, &r), &fixes);
    Ok(Explained {
        json,
        text,
        held,
        mx,
        varies,
        story,
    })
}

/// The provenance listing of a cell's two sides: each side in words, then
/// whether their bytes and records differ, and the divergence as `mxbi op
/// check` prints it.
fn divergence_text(
    lm: &OpSubject,
    (l, left): (&Ran, &Side),
    (r, right): (&Ran, &Side),
    differ: &[usize],
    n: usize,
    div: &OpDivergence,
) -> String {
    let mut text = format!("op provenance ({}):\n", lm.name());
    text.push_str(&format!("  observed {}\n", side_words(l, left)));
    text.push_str(&format!("  vs       {}\n", side_words(r, right)));
    let same_bytes = differ.is_empty();
    if same_bytes && div.nodes.is_empty() {
        text.push_str("  no divergence: the two copies have the same bytes");
        if div.latent.is_empty() {
            text.push_str(" and their records the same computation\n");
        } else {
            text.push_str("; their records differ where no value differs on these inputs:\n");
            for w in &div.latent {
                text.push_str(&format!("  latent: {w}\n"));
            }
        }
    } else {
        if same_bytes {
            text.push_str(
                "  no divergence in the bytes: the records differ (below), but on these inputs the two copies have the same bytes\n",
            );
        } else {
            text.push_str(&format!("  the copies differ in {} of {n} elements\n", differ.len()));
        }
        // the divergence as `mxbi op check` prints it, without its header
        for line in div.to_string().lines().skip(1) {
            text.push_str(&format!("  {}\n", line.trim_start()));
        }
    }
    text
}

/// What an all-gather-matmul cell's two paths say: the mechanism as `mxbi
/// op explain` names it, its fixes, what varies, the ranking of the
/// mechanisms on the variant batch's bytes (words and JSON) and, for MX
/// inputs, the target row as the op reads it.
struct AgmmStory {
    named: String,
    hypothesis: Option<Hypothesis>,
    fixes: Vec<Fix>,
    varies: Option<Varies>,
    ranking: (String, Value),
    mx: Option<MxRow>,
}

fn agmm_story(
    (sa, l): (&agmm::AgmmSpec, &Ran),
    (sb, r, right): (&agmm::AgmmSpec, &Ran, &Side),
    b: &[f32],
    k: usize,
) -> Result<AgmmStory> {
    let pa = sa.path_for(l.record.rank, l.record.global_row).1;
    let pb = sb.path_for(r.record.rank, r.record.global_row).1;
    // LOCAL first (the relation reads the second as GATHER)
    let (loc, oth) = if r.record.path == "local" && l.record.path != "local" {
        (pb, pa)
    } else {
        (pa, pb)
    };
    let hypothesis = match relation(loc, oth, k) {
        // one path that re-rounds x1 per shard still couples rows
        Some(Hypothesis::OnePath) if loc.x1_requant.is_some() => Some(Hypothesis::ContentCoupling),
        h => h,
    };
    let named = match hypothesis {
        Some(Hypothesis::ContentCoupling) if pa == pb => format!(
            "content-coupling: both copies take the {} path, which re-rounds x1 with a scale shared by its shard's rows ({})",
            l.record.path.to_uppercase(),
            Hypothesis::ContentCoupling.preset()
        ),
        Some(Hypothesis::OnePath) if l.record.path == r.record.path => format!(
            "one-path: both copies take the {} path, one computation",
            l.record.path.to_uppercase()
        ),
        Some(h) => format!("{h} ({}: {})", h.preset(), h.words()),
        None => "none of mxbi op explain's: the two paths differ in more than one way".into(),
    };
    // one path for LOCAL and GATHER rows: the op's LOCAL one
    let mut fixes = Vec::new();
    if pa != pb || hypothesis == Some(Hypothesis::ContentCoupling) {
        fixes.push(Fix::OnePath {
            order: op::parse_order("order", &sa.local.order)?,
        });
    }
    let varies = (pa != pb).then(|| Varies::Path {
        left: l.record.path.clone(),
        right: r.record.path.clone(),
    });
    let (mut ranking_said, mut mx) = ((String::new(), Value::Null), None);
    if let Some(format) = sa.mx_format {
        ranking_said = ranking_words(ranking(right, sb, &r.inputs, b)?, r.m);
        let j = agmm::read(sa, &l.inputs)?;
        let kb = k / crate::gemm::MX_BLOCK;
        let g = l.record.global_row;
        mx = Some(MxRow {
            format,
            c1: j.c1[g * k..(g + 1) * k].to_vec(),
            s1: j.s1[g * kb..(g + 1) * kb].to_vec(),
            c2: j.c2.to_vec(),
            s2: j.s2.to_vec(),
        });
    }
    Ok(AgmmStory {
        named,
        hypothesis,
        fixes,
        varies,
        ranking: ranking_said,
        mx,
    })
}

/// The mechanism ranking on the variant batch (of `m` rows) in words and
/// as JSON, or why it was skipped.
fn ranking_words(rk: std::result::Result<Ranking, String>, m: usize) -> (String, Value) {
    match rk {
        Ok(rk) => {
            let list: Vec<String> = rk
                .ranking
                .iter()
                .map(|(h, c)| format!("{h} {c}/{}", rk.ranks.len()))
                .collect();
            let said = match (rk.verdict(), rk.supported.as_slice()) {
                (Some(h), _) => format!("support {h}, the only mechanism that reproduces every rank"),
                (None, []) => "support no mechanism of the family".to_string(),
                (None, many) => format!(
                    "cannot tell apart {}",
                    many.iter().map(|h| h.to_string()).collect::<Vec<_>>().join(", ")
                ),
            };
            let words = format!(
                "the op's bytes on the variant batch (M = {m}, every rank's copy) {said} (mxbi op explain's ranking over {} paths: {})",
                rk.candidates,
                list.join(", ")
            );
            let value = json!({
                "batch_m": m,
                "verdict": rk.verdict(),
                "supported": rk.supported,
                "ranking": rk.ranking,
                "candidates": rk.candidates,
            });
            (words, value)
        }
        Err(why) => (
            format!("mechanism ranking on the op's bytes: {why}"),
            json!({ "skipped": why }),
        ),
    }
}

/// The summary a report carries: the divergence's first node and
/// mechanism lines, the mechanism named, each side in brief, the fixes.
fn op_summary(div: &OpDivergence, named: &str, (l, r): (&Ran, &Ran), fixes: &[Fix]) -> OpStory {
    let div_words = div.to_string();
    let first_node = div_words
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("first diverging node: "))
        .map(str::to_string);
    let mut mechanisms: Vec<String> = div_words
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("mechanism: "))
        .map(str::to_string)
        .collect();
    if !named.is_empty() {
        mechanisms.push(named.to_string());
    }
    let brief = |x: &Ran| {
        let rec = &x.record;
        let mut w = format!(
            "rank {} row {} of M = {}, {} path",
            rec.rank,
            rec.row,
            x.m,
            rec.path.to_uppercase()
        );
        if let Some(sp) = &rec.scale_point {
            w.push_str(&format!(", x2 scales at {sp}"));
        }
        (w, rec.order.to_string(), x.reproduces, rec.path.to_uppercase())
    };
    OpStory {
        sides: [brief(l), brief(r)],
        first_node,
        mechanisms,
        fixes: fixes.iter().map(|f| f.to_string()).collect(),
    }
}
