//! Where two copies of an op's logical row diverge, from their provenance
//! records ([`RowProvenance`]) and, for all-gather-matmul, the inputs: the
//! first node that differs on each axis the records can differ on, in the
//! order the data flows:
//!
//! 1. an operand a path re-rounds (x2 at a `requant` scale point, x1 with
//!    `x1_requant`): the first K-block of the failing column (x2) or of the
//!    row (x1) whose values differ, its k-range, the scales involved, and
//!    the tree node that first consumes it;
//! 2. the orders: the first differing node of the compiled trees
//!    ([`crate::explain::diverge`]), with the term, split part and k-tile
//!    each side continues with;
//! 3. the cross-rank reduction: the first step whose added partial comes
//!    from a different rank, and that rank's K shard.
//!
//! The mechanism is named in words (scale-point split, K-loop schedule
//! split, content coupling, position-dependent reduction). This is the
//! explanation of a failing op cell ([`super::cross_rank::Diff`], [`explain_diff`]).

use super::agmm::{self, AgmmSpec, Operands, PathSpec};
use super::cross_rank::Diff;
use super::{Inputs, OpError, OpSpec, Result, RowProvenance};
use crate::explain::divergence::{diverge as tree_diverge, locate, Location};
use crate::format::{e8m0_exponent, pow2};
use crate::gemm::MX_BLOCK;
use crate::order::{MxScale, Order};
use std::fmt;

/// What a first diverging node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeKind {
    /// x2 as the two paths read it (a scale point that re-rounds it).
    X2Operand,
    /// x1 as the two paths read it (re-rounded with a shard's scale).
    X1Operand,
    /// The two orders' trees.
    Order,
    /// The cross-rank reduction of partial sums.
    Reduction,
}

/// The first node that differs on one axis.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FirstNode {
    pub kind: NodeKind,
    /// The node index in the (left) compiled tree: the first differing node
    /// (orders) or the first node consuming the changed block (operands).
    pub node: Option<u32>,
    /// The k-range involved (inclusive).
    pub k_range: Option<(usize, usize)>,
    /// Where the first term after the divergence sits on each side.
    pub left_at: Option<Location>,
    pub right_at: Option<Location>,
    /// Reduction: the ranks whose partials are added at the diverging step.
    pub ranks: Option<(usize, usize)>,
    pub detail: String,
}

/// The divergence of two copies of a row.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OpDivergence {
    pub left: RowProvenance,
    pub right: RowProvenance,
    /// The column the operand analysis looked at (the first differing one).
    pub column: Option<usize>,
    /// One first node per axis that differs, in data-flow order.
    pub nodes: Vec<FirstNode>,
    /// The mechanism, in words (one sentence per axis).
    pub mechanism: Vec<String>,
    /// Axes the records differ on where no value differs on these inputs
    /// (a scale point that re-rounds no element, an x1 re-rounding that
    /// changes no value), in words.
    pub latent: Vec<String>,
}

/// The K of the row's GEMM (or reduction) and whether its inputs are MX.
fn k_of(spec: &OpSpec) -> (usize, bool) {
    match spec {
        OpSpec::AllGatherMatmul(s) => (s.k, s.mx_format.is_some()),
        OpSpec::MatmulReduceScatter(s) | OpSpec::MatmulAllReduce(s) => (s.k / s.world_size.max(1), false),
        OpSpec::Moe(s) => (s.hidden, false),
        OpSpec::RmsNorm(s) => (s.h, false),
        OpSpec::QuantMatmul(s) => (s.k, false),
    }
}

/// The number of terms of an order's tree and term `k`'s index in it.
fn term_of(o: &Order, k: usize, mx: bool, kk: usize) -> (usize, u32) {
    if mx && o.scale == MxScale::Block && o.mma().is_none() {
        (k / MX_BLOCK, (kk / MX_BLOCK) as u32)
    } else {
        (k, kk as u32)
    }
}

/// The first node of `o`'s tree consuming k index `kk`, and where it sits.
fn consumer(o: &Order, k: usize, mx: bool, kk: usize) -> (Option<u32>, Location) {
    let (terms, t) = term_of(o, k, mx, kk);
    let tree = o.compile(terms);
    let node = tree.nodes.iter().position(|n| n.terms().contains(&t)).map(|i| i as u32);
    (node, locate(o, terms, t))
}

fn path_of<'a>(s: &'a AgmmSpec, p: &RowProvenance) -> &'a PathSpec {
    s.path_for(p.rank, p.global_row).1
}

/// Exact values of a column of x2 as `path` reads it, per k.
fn x2_column(s: &AgmmSpec, path: &PathSpec, o: &Operands, j: usize) -> Result<Vec<(f64, u8)>> {
    let el = s.mx_format.expect("MX checked").element();
    let (k, n) = (s.k, s.n);
    let idx = |kk: usize| match s.x2_layout {
        agmm::X2Layout::Kn => (kk * n + j, (kk / MX_BLOCK) * n + j),
        agmm::X2Layout::Nk => (j * k + kk, j * (k / MX_BLOCK) + kk / MX_BLOCK),
    };
    let pr = agmm::prepare(s, path, o)?;
    let (codes, scales, fe) = match pr.requantized_x2() {
        Some((c, sc, f)) => (c, sc, f.element()),
        None => (o.c2, o.s2, el),
    };
    Ok((0..k)
        .map(|kk| {
            let (ci, si) = idx(kk);
            (
                fe.decode_f64(codes[ci] as u16) * pow2(e8m0_exponent(scales[si])),
                scales[si],
            )
        })
        .collect())
}

/// Exact values of x1 row `g` as `path` reads it, with each k's scale.
fn x1_row(s: &AgmmSpec, path: &PathSpec, o: &Operands, g: usize) -> Result<Vec<(f64, u8)>> {
    let el = s.mx_format.expect("MX checked").element();
    let (c, sc) = agmm::x1_rows(s, path, o, &[g])?;
    Ok((0..s.k)
        .map(|kk| {
            let x = sc[kk / MX_BLOCK];
            (el.decode_f64(c[kk] as u16) * pow2(e8m0_exponent(x)), x)
        })
        .collect())
}

/// The first K-block where two views of an operand differ: (block, values
/// differing in it, left scale, right scale).
fn first_block(a: &[(f64, u8)], b: &[(f64, u8)]) -> Option<(usize, usize, u8, u8)> {
    a.chunks(MX_BLOCK)
        .zip(b.chunks(MX_BLOCK))
        .enumerate()
        .find_map(|(blk, (x, y))| {
            let d = x.iter().zip(y).filter(|(p, q)| p.0.to_bits() != q.0.to_bits()).count();
            (d > 0).then(|| (blk, d, x[0].1, y[0].1))
        })
}

fn pow(s: u8) -> String {
    format!("2^{}", e8m0_exponent(s))
}

/// The divergence of copies `a` and `b` of a row of `spec`'s op; `inputs`
/// (all-gather-matmul) enable the operand analysis at column `col`.
pub fn diverge(
    spec: &OpSpec,
    inputs: Option<&Inputs>,
    a: &RowProvenance,
    b: &RowProvenance,
    col: Option<usize>,
) -> Result<OpDivergence> {
    let job = Job { spec, inputs };
    diverge_jobs(job, a, job, b, col)
}

/// The op run one copy of a row comes from: its spec and, for the operand
/// analysis, its inputs.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    pub spec: &'a OpSpec,
    pub inputs: Option<&'a Inputs>,
}

/// [`diverge`] for copies from two runs of the op (two batches of one
/// batch-invariance cell: the same K, N and weights, other rows or another
/// batch size): `a` is a row of `ja`'s run, `b` of `jb`'s. Their global
/// rows index their own run's x1. Axes the records differ on without
/// changing a value on these inputs are named as such (a latent
/// difference), not as a diverging node.
pub fn diverge_jobs(
    ja: Job,
    a: &RowProvenance,
    jb: Job,
    b: &RowProvenance,
    col: Option<usize>,
) -> Result<OpDivergence> {
    let (k, mx) = k_of(ja.spec);
    if k_of(jb.spec) != (k, mx) {
        return Err(OpError::Spec(
            "the two copies come from ops of different K or input kinds".into(),
        ));
    }
    let mut f = Findings::default();
    // 1. operands re-rounded by a path (all-gather-matmul with inputs)
    if let (OpSpec::AllGatherMatmul(sa), OpSpec::AllGatherMatmul(sb), Some(ia), Some(ib), true) =
        (ja.spec, jb.spec, ja.inputs, jb.inputs, mx)
    {
        let (oa, ob) = (agmm::read(sa, ia)?, agmm::read(sb, ib)?);
        let pair = AgmmPair {
            sa,
            sb,
            oa: &oa,
            ob: &ob,
            pa: path_of(sa, a),
            pb: path_of(sb, b),
            a,
            b,
            k,
            mx,
        };
        if pair.pa.scale_point != pair.pb.scale_point {
            x2_operand(&pair, col, &mut f)?;
        }
        // x1 re-rounded with its shard's scale: on one path (a path
        // split), or on both with different shards (content coupling
        // across two batches)
        if pair.pa.x1_requant.is_some() || pair.pb.x1_requant.is_some() {
            x1_operand(&pair, &mut f)?;
        }
    }
    // 2. the orders' trees
    if a.order != b.order {
        order_node(a, b, k, mx, &mut f);
    }
    // 3. the cross-rank reduction
    if a.computed_on.len() > 1 && a.computed_on != b.computed_on {
        reduction_node(a, b, k, &mut f);
    }
    if f.nodes.is_empty() {
        f.mechanism.push(
            "the two records name the same computation (path, order, scale point, reduction): a difference must come from other rows' content or from the run (non-determinism)".into(),
        );
    }
    Ok(OpDivergence {
        left: a.clone(),
        right: b.clone(),
        column: col,
        nodes: f.nodes,
        mechanism: f.mechanism,
        latent: f.latent,
    })
}

/// What the steps of [`diverge_jobs`] find, in step order.
#[derive(Default)]
struct Findings {
    nodes: Vec<FirstNode>,
    mechanism: Vec<String>,
    latent: Vec<String>,
}

/// A copy's side in words: `rank R (PATH)`.
fn side(p: &RowProvenance) -> String {
    format!("rank {} ({})", p.rank, p.path.to_uppercase())
}

/// Two copies of a row of all-gather-matmul runs with their inputs: each
/// side's spec, operands, path and row record, and the op's K.
struct AgmmPair<'x> {
    sa: &'x AgmmSpec,
    sb: &'x AgmmSpec,
    oa: &'x Operands<'x>,
    ob: &'x Operands<'x>,
    pa: &'x PathSpec,
    pb: &'x PathSpec,
    a: &'x RowProvenance,
    b: &'x RowProvenance,
    k: usize,
    mx: bool,
}

/// The paths apply x2's scales at different points: the first K-block of
/// x2 column `col` (default 0) read differently, or a latent difference.
fn x2_operand(p: &AgmmPair, col: Option<usize>, f: &mut Findings) -> Result<()> {
    let (sa, sb, pa, pb, a, b) = (p.sa, p.sb, p.pa, p.pb, p.a, p.b);
    let j = col.unwrap_or(0);
    if j >= sa.n.min(sb.n) {
        return Err(OpError::Shape(format!("column {j} is out of range (N = {})", sa.n)));
    }
    let (xa, xb) = (x2_column(sa, pa, p.oa, j)?, x2_column(sb, pb, p.ob, j)?);
    if let Some((blk, d, sca, scb)) = first_block(&xa, &xb) {
        let k0 = blk * MX_BLOCK;
        let order = super::parse_order("order", &pa.order)?;
        let (node, at) = consumer(&order, p.k, p.mx, k0);
        let given = o_scale(sa, p.oa, blk, j);
        f.nodes.push(FirstNode {
            kind: NodeKind::X2Operand,
            node,
            k_range: Some((k0, k0 + MX_BLOCK - 1)),
            left_at: Some(at.clone()),
            right_at: Some(at),
            ranks: None,
            detail: format!(
                "x2 column {j}, K-block {blk} (k {k0}..{}): its scale is {}; {} reads it at scale {} and {} at scale {}: {d} of {MX_BLOCK} element values differ",
                k0 + MX_BLOCK - 1,
                pow(given),
                side(a),
                pow(sca),
                side(b),
                pow(scb)
            ),
        });
        f.mechanism.push(format!(
            "scale-point split: {} applies x2's scales at '{}', {} at '{}'; where x2's scale is below its column's largest, the re-rounded elements lose bits (e4m3 subnormals or zero), so the same row differs by path",
            side(a),
            pa.scale_point,
            side(b),
            pb.scale_point
        ));
    } else {
        f.latent.push(format!(
            "{} applies x2's scales at '{}', {} at '{}', but both read every value of x2 column {j} the same (no element is re-rounded on these inputs)",
            side(a),
            pa.scale_point,
            side(b),
            pb.scale_point
        ));
    }
    Ok(())
}

/// A path re-rounds x1 with its shard's scale: the first K-block of the
/// row read differently (content coupling), or a latent difference.
fn x1_operand(p: &AgmmPair, f: &mut Findings) -> Result<()> {
    let (sa, sb, pa, pb, a, b) = (p.sa, p.sb, p.pa, p.pb, p.a, p.b);
    let (xa, xb) = (x1_row(sa, pa, p.oa, a.global_row)?, x1_row(sb, pb, p.ob, b.global_row)?);
    if let Some((blk, d, sca, scb)) = first_block(&xa, &xb) {
        let k0 = blk * MX_BLOCK;
        let order = super::parse_order("order", &pa.order)?;
        let (node, at) = consumer(&order, p.k, p.mx, k0);
        let read = |p: &RowProvenance, s: &AgmmSpec, path: &PathSpec, x: u8| {
            if path.x1_requant.is_some() {
                format!(
                    "{} reads it at scale {} (the largest over the rows of shard {})",
                    side(p),
                    pow(x),
                    p.global_row / s.m_per_rank
                )
            } else {
                format!("{} at its own scale {}", side(p), pow(x))
            }
        };
        f.nodes.push(FirstNode {
            kind: NodeKind::X1Operand,
            node,
            k_range: Some((k0, k0 + MX_BLOCK - 1)),
            left_at: Some(at.clone()),
            right_at: Some(at),
            ranks: None,
            detail: format!(
                "x1 row {}, K-block {blk} (k {k0}..{}): {}, {}: {d} of {MX_BLOCK} element values differ",
                a.global_row,
                k0 + MX_BLOCK - 1,
                read(a, sa, pa, sca),
                read(b, sb, pb, scb)
            ),
        });
        f.mechanism.push(if pa.x1_requant == pb.x1_requant {
            "content coupling: both copies re-round x1 with a scale shared by the rows of their shard, and those rows differ between the two batches, so the row's bytes depend on the other rows' content".to_string()
        } else {
            format!(
                "content coupling: {} re-rounds x1 with a scale shared by the rows of the row's shard, so the row's bytes depend on the other rows' content",
                side(if pb.x1_requant.is_some() { b } else { a })
            )
        });
    } else if pa.x1_requant != pb.x1_requant {
        f.latent.push(format!(
            "{} re-rounds x1 with a scale shared by the rows of its shard, but no value of this row changes by it on these inputs",
            side(if pb.x1_requant.is_some() { b } else { a })
        ));
    }
    Ok(())
}

/// The copies run different orders: the first node where their trees
/// diverge, with the k-range of the tile (or split part) holding the first
/// term after it.
fn order_node(a: &RowProvenance, b: &RowProvenance, k: usize, mx: bool, f: &mut Findings) {
    let (ta, _) = term_of(&a.order, k, mx, 0);
    let (tb, _) = term_of(&b.order, k, mx, 0);
    let td = tree_diverge(&a.order, &b.order, k, mx);
    let Some(d) = &td.divergence else {
        return;
    };
    // the k-range of the tile (or split part) holding the first
    // term after the divergence, on the side that has one
    let range = |l: &Option<Location>, terms: usize| {
        l.as_ref().map(|l| {
            let unit = if terms < k { MX_BLOCK } else { 1 };
            let (a, b) = l.tile.map(|t| t.1).or(l.part_range).unwrap_or((l.term, l.term));
            (a as usize * unit, (b as usize + 1) * unit - 1)
        })
    };
    let (ra, rb) = (range(&td.left_at, ta), range(&td.right_at, tb));
    let width = |r: Option<(usize, usize)>| r.map_or(0, |(a, b)| b - a);
    let words: Vec<String> = td.mechanisms.iter().map(|m| m.to_string()).collect();
    f.nodes.push(FirstNode {
        kind: NodeKind::Order,
        node: Some(d.node),
        k_range: if width(rb) > width(ra) { rb } else { ra.or(rb) },
        left_at: td.left_at.clone(),
        right_at: td.right_at.clone(),
        ranks: None,
        detail: format!(
            "tree node {}: the first {} terms are summed identically, then {} continues with {} and {} with {}",
            d.node,
            td.common_terms,
            side(a),
            td.left_at.as_ref().map_or("nothing".into(), |l| l.to_string()),
            side(b),
            td.right_at.as_ref().map_or("nothing".into(), |l| l.to_string())
        ),
    });
    let schedule = td.mechanisms.iter().all(|m| {
        !matches!(
            m,
            crate::explain::Mechanism::Family { .. }
                | crate::explain::Mechanism::ScalePoint { .. }
                | crate::explain::Mechanism::Output { .. }
        )
    });
    f.mechanism.push(format!(
        "{}: {} runs {}, {} runs {}; {}",
        if schedule {
            "K-loop schedule split"
        } else {
            "order change"
        },
        side(a),
        a.order,
        side(b),
        b.order,
        words.join("; ")
    ));
}

/// The copies add the ranks' partial sums in different orders: the first
/// reduction step where they differ.
fn reduction_node(a: &RowProvenance, b: &RowProvenance, k: usize, f: &mut Findings) {
    let Some(i) = a.computed_on.iter().zip(&b.computed_on).position(|(x, y)| x != y) else {
        return;
    };
    let (ra, rb) = (a.computed_on[i], b.computed_on[i]);
    let shard = |r: usize| (r * k, (r + 1) * k - 1);
    let commutative = a.computed_on.len() == 2 && {
        let (mut x, mut y) = (a.computed_on.clone(), b.computed_on.clone());
        x.sort_unstable();
        y.sort_unstable();
        x == y
    };
    f.nodes.push(FirstNode {
        kind: NodeKind::Reduction,
        node: Some(i as u32),
        k_range: Some(shard(ra)),
        left_at: None,
        right_at: None,
        ranks: Some((ra, rb)),
        detail: format!(
            "reduction step {i}: {} adds rank {ra}'s partial (k {}..{}), {} adds rank {rb}'s (k {}..{}){}",
            side(a),
            shard(ra).0,
            shard(ra).1,
            side(b),
            shard(rb).0,
            shard(rb).1,
            if commutative {
                " (a two-term sum is commutative: the bytes cannot differ here)"
            } else {
                ""
            }
        ),
    });
    f.mechanism.push(format!(
        "position-dependent reduction: the partial sums are added in the order {:?} for one copy and {:?} for the other",
        a.computed_on, b.computed_on
    ));
}

fn o_scale(s: &AgmmSpec, o: &Operands, blk: usize, j: usize) -> u8 {
    match s.x2_layout {
        agmm::X2Layout::Kn => o.s2[blk * s.n + j],
        agmm::X2Layout::Nk => o.s2[j * (s.k / MX_BLOCK) + blk],
    }
}

/// The explanation of two differing copies of a row ([`super::cross_rank`]):
/// their divergence at the first differing column.
pub fn explain_diff(spec: &OpSpec, inputs: Option<&Inputs>, d: &Diff) -> Result<OpDivergence> {
    diverge(spec, inputs, &d.a, &d.b, Some(d.first_col))
}

impl fmt::Display for OpDivergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let desc = |p: &RowProvenance| {
            format!(
                "rank {} row {} ({}, {}{}{})",
                p.rank,
                p.row,
                p.path.to_uppercase(),
                p.order,
                p.scale_point
                    .as_ref()
                    .map(|s| format!(", x2 scales at {s}"))
                    .unwrap_or_default(),
                p.reduction.as_ref().map(|r| format!(", {r}")).unwrap_or_default()
            )
        };
        writeln!(f, "{} vs {}:", desc(&self.left), desc(&self.right))?;
        if let Some(n) = self.nodes.first() {
            writeln!(f, "  first diverging node: {}", n.detail)?;
            if let (Some(node), Some(at)) = (n.node, &n.left_at) {
                if n.kind != NodeKind::Order && n.kind != NodeKind::Reduction {
                    writeln!(f, "  consumed by tree node {node} at {at}")?;
                }
            }
        }
        for n in self.nodes.iter().skip(1) {
            writeln!(f, "  also: {}", n.detail)?;
        }
        for m in &self.mechanism {
            writeln!(f, "  mechanism: {m}")?;
        }
        for l in &self.latent {
            writeln!(f, "  latent (no value differs on these inputs): {l}")?;
        }
        Ok(())
    }
}
