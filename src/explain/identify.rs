//! Passive identification: which candidate orders reproduce the observed
//! bytes of one or more rows exactly.
//!
//! Row-only: each row is its own one-row problem (an output row depends
//! only on its row of A and on B). Early pruning: every candidate is first
//! evaluated on the first few columns only, and dropped at the first
//! differing byte; the survivors are evaluated on the whole row. A
//! candidate the inputs cannot run (an mma order whose input type does not
//! hold the values, an MX scale point on plain inputs) is skipped and
//! counted. Results do not depend on the thread count.

use super::candidates::{order_key, Candidate};
use super::divergence::ulp_distance;
use crate::gemm::{self, gemm, BLayout, Matrix, Prepared, Problem, MX_BLOCK};
use crate::order::{InType, MxScale, Order};
use rayon::prelude::*;

/// Knobs of the search.
#[derive(Clone, Copy, Debug)]
pub struct IdentifyOptions {
    /// Columns evaluated before a candidate is dropped or kept.
    pub prune_cols: usize,
    /// Rejected candidates evaluated on the whole row to find the closest.
    pub closest_full: usize,
}

impl Default for IdentifyOptions {
    fn default() -> Self {
        IdentifyOptions {
            prune_cols: 4,
            closest_full: 8,
        }
    }
}

/// The nearest miss when no candidate reproduces a row.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Closest {
    pub order: Order,
    /// Output elements whose bits differ.
    pub elements_differ: usize,
    /// Bytes of the f32 output bits that differ.
    pub bytes_differ: usize,
    /// Largest distance in f32 ULP (u64::MAX: a NaN against a number).
    pub max_ulp: u64,
}

/// What identification found for one row.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RowIdentity {
    pub row: usize,
    /// Every candidate that reproduces all bytes of the row, simplest first.
    pub matches: Vec<Order>,
    /// The matches grouped by identical tree for K (each group's first
    /// order is its simplest spelling); orders in different groups have
    /// different trees that happen to give the same bytes on these inputs.
    pub classes: Vec<Vec<Order>>,
    /// The nearest miss (only when nothing matches).
    pub closest: Option<Closest>,
    /// Candidates evaluated, and those the inputs could not run.
    pub evaluated: usize,
    pub skipped: usize,
}

impl RowIdentity {
    /// The simplest reproducing order.
    pub fn order(&self) -> Option<Order> {
        self.matches.first().copied()
    }
}

/// Owned operands of a one-row sub-problem.
struct Sub {
    a: Vec<f32>,
    b: Vec<f32>,
    ca: Vec<u8>,
    sa: Vec<u8>,
    cb: Vec<u8>,
    sb: Vec<u8>,
    mx: Option<crate::mx::MxFormat>,
    k: usize,
    n: usize,
}

impl Sub {
    /// Row `r` of A and the first `cols` columns of B, B kept `[cols, K]`
    /// (the layout the evaluator reads: no second copy when it prepares).
    fn new(p: &Problem, r: usize, cols: usize) -> Sub {
        let (k, n) = (p.k, p.n);
        let cols = cols.min(n);
        // the first `cols` columns of a `[rows, n]` (Kn) or `[n, rows]`
        // (Nk) operand, as `[cols, rows]`
        fn take_cols<T: Copy + Default + Send + Sync>(
            b: &[T],
            layout: BLayout,
            n: usize,
            rows: usize,
            cols: usize,
        ) -> Vec<T> {
            match layout {
                BLayout::Kn => gemm::transpose_columns(b, rows, n, cols),
                BLayout::Nk => b[..cols * rows].to_vec(),
            }
        }
        let mut s = Sub {
            a: vec![],
            b: vec![],
            ca: vec![],
            sa: vec![],
            cb: vec![],
            sb: vec![],
            mx: None,
            k,
            n: cols,
        };
        match (p.a, p.b) {
            (Matrix::F32(a), Matrix::F32(b)) => {
                s.a = a[r * k..(r + 1) * k].to_vec();
                s.b = take_cols(b, p.b_layout, n, k, cols);
            }
            (
                Matrix::Mx {
                    codes: ca,
                    scales: sa,
                    format,
                },
                Matrix::Mx {
                    codes: cb, scales: sb, ..
                },
            ) => {
                let kb = k / MX_BLOCK;
                s.ca = ca[r * k..(r + 1) * k].to_vec();
                s.sa = sa[r * kb..(r + 1) * kb].to_vec();
                s.cb = take_cols(cb, p.b_layout, n, k, cols);
                s.sb = take_cols(sb, p.b_layout, n, kb, cols);
                s.mx = Some(format);
            }
            _ => {}
        }
        s
    }

    fn problem(&self) -> Problem<'_> {
        let (a, b) = match self.mx {
            None => (Matrix::F32(&self.a), Matrix::F32(&self.b)),
            Some(format) => (
                Matrix::Mx {
                    codes: &self.ca,
                    scales: &self.sa,
                    format,
                },
                Matrix::Mx {
                    codes: &self.cb,
                    scales: &self.sb,
                    format,
                },
            ),
        };
        Problem {
            a,
            b,
            m: 1,
            n: self.n,
            k: self.k,
            b_layout: BLayout::Nk,
        }
    }
}

/// Evaluates many orders on one small problem, preparing (normalising,
/// transposing) the inputs once per kind of preparation instead of once per
/// order. Bit-identical to [`gemm`] (the same fast kernels and evaluator).
struct Evaluator<'a> {
    p: Problem<'a>,
    preps: Vec<(PrepKey, Option<Prepared<'a>>)>,
}

/// Orders with equal keys prepare the inputs identically.
type PrepKey = (MxScale, Option<InType>);

/// The key of an order whose preparation does not depend on the rest of
/// the order (None: prepare it on its own).
fn prep_key(o: &Order) -> Option<PrepKey> {
    let input = o.mma().map(|m| m.input);
    (!(o.scale == MxScale::Block && input.is_some())).then_some((o.scale, input))
}

impl<'a> Evaluator<'a> {
    fn new(p: Problem<'a>, candidates: &[Candidate]) -> Self {
        let mut keys: Vec<(PrepKey, Order)> = Vec::new();
        for c in candidates {
            if let Some(k) = prep_key(&c.order) {
                if !keys.iter().any(|(x, _)| *x == k) {
                    keys.push((k, c.order));
                }
            }
        }
        let preps = keys
            .into_par_iter()
            .map(|(k, o)| (k, gemm::prepare(&o, &p).ok()))
            .collect();
        Evaluator { p, preps }
    }

    /// The row of `o` (None: the inputs cannot run it).
    fn eval(&self, o: &Order) -> Option<Vec<f32>> {
        let Some(key) = prep_key(o) else {
            return gemm(o, &self.p, None).ok();
        };
        let prep = self.preps.iter().find(|(k, _)| *k == key)?.1.as_ref()?;
        if o.check_size(self.p.k).is_err() {
            return None;
        }
        if let Some(v) = gemm::fast::gemm(o, prep, &[0]) {
            return Some(v);
        }
        let tree = o.compile(prep.terms());
        Some(
            (0..prep.n)
                .into_par_iter()
                .map_init(Vec::new, |scratch, j| {
                    gemm::eval::evaluate(&tree, o, prep, 0, j, scratch, None)
                })
                .collect(),
        )
    }
}

/// Checks shapes and row indices before any work.
fn check(p: &Problem, rows: &[usize], observed: &[f32]) -> Result<(), String> {
    if let Some(&r) = rows.iter().find(|&&r| r >= p.m) {
        return Err(format!("row {r} is out of range (M = {})", p.m));
    }
    if observed.len() != rows.len() * p.n {
        return Err(format!(
            "observed has {} values, expected {} rows x N = {}",
            observed.len(),
            rows.len(),
            p.n
        ));
    }
    let (a_len, b_len) = match (p.a, p.b) {
        (Matrix::F32(a), Matrix::F32(b)) => (a.len(), b.len()),
        (
            Matrix::Mx {
                codes: a, scales: sa, ..
            },
            Matrix::Mx {
                codes: b, scales: sb, ..
            },
        ) => {
            if !p.k.is_multiple_of(MX_BLOCK) || sa.len() * MX_BLOCK != p.m * p.k || sb.len() * MX_BLOCK != p.k * p.n {
                return Err("MX inputs: K must be a multiple of 32 and the scales [M, K/32], [K/32, N]".into());
            }
            (a.len(), b.len())
        }
        _ => return Err("A and B must both be MX or both be plain values".into()),
    };
    if a_len != p.m * p.k || b_len != p.k * p.n {
        return Err(format!(
            "A has {a_len} and B {b_len} elements; expected M*K = {} and K*N = {}",
            p.m * p.k,
            p.k * p.n
        ));
    }
    Ok(())
}

/// Elements, bytes and largest ULP distance by which two rows differ.
type Distance = (usize, usize, u64);

/// Mismatch summary of `got` against `want` (bit patterns).
fn distance(got: &[f32], want: &[f32]) -> Distance {
    let mut elements = 0;
    let mut bytes = 0;
    let mut ulp = 0u64;
    for (g, w) in got.iter().zip(want) {
        let (x, y) = (g.to_bits(), w.to_bits());
        if x != y {
            elements += 1;
            bytes += (x ^ y).to_le_bytes().iter().filter(|&&b| b != 0).count();
            ulp = ulp.max(ulp_distance(*g, *w));
        }
    }
    (elements, bytes, ulp)
}

fn simplicity(o: &Order) -> (usize, usize) {
    let s = o.to_string();
    (s.matches(';').count(), s.len())
}

/// Identifies each requested row: `observed` holds the observed rows,
/// row-major `[rows.len(), N]`, as f32 bits (narrower outputs widened
/// exactly). Candidates are tried in their order; matches are reported
/// simplest first.
pub fn identify(
    p: &Problem,
    rows: &[usize],
    observed: &[f32],
    candidates: &[Candidate],
    opts: IdentifyOptions,
) -> Result<Vec<RowIdentity>, String> {
    check(p, rows, observed)?;
    let n = p.n;
    let c = opts.prune_cols.clamp(1, n.max(1));
    // rows in parallel (each row's work is its own; results in row order)
    let out = rows.par_iter().enumerate().map(|(ri, &r)| {
        let want = &observed[ri * n..(ri + 1) * n];
        // stages of widening column prefixes; a candidate is dropped at its
        // first differing byte, the last stage is the whole row
        let mut widths = vec![c];
        for w in [64, 512] {
            if w > c && w < n {
                widths.push(w);
            }
        }
        if *widths.last().unwrap_or(&0) < n {
            widths.push(n);
        }
        let mut alive: Vec<usize> = (0..candidates.len()).collect();
        let mut first: Vec<Option<(usize, u64)>> = vec![None; candidates.len()];
        let mut skipped = 0;
        let mut full_rows: Vec<(usize, Distance)> = Vec::new();
        for (si, &w) in widths.iter().enumerate() {
            let sub = Sub::new(p, r, w);
            let live: Vec<Candidate> = alive.iter().map(|&i| candidates[i].clone()).collect();
            let ev = Evaluator::new(sub.problem(), &live);
            let res: Vec<(usize, Option<Distance>)> = alive
                .par_iter()
                .map(|&i| (i, ev.eval(&candidates[i].order).map(|got| distance(&got, &want[..w]))))
                .collect();
            if si == 0 {
                for (i, d) in &res {
                    first[*i] = d.map(|d| (d.0, d.2));
                }
                skipped = res.iter().filter(|(_, d)| d.is_none()).count();
            }
            if w == n {
                full_rows = res.iter().filter_map(|(i, d)| d.map(|d| (*i, d))).collect();
            }
            alive = res
                .iter()
                .filter(|(_, d)| matches!(d, Some((0, _, _))))
                .map(|(i, _)| *i)
                .collect();
        }
        let mut matches: Vec<Order> = full_rows
            .iter()
            .filter(|(_, d)| d.0 == 0)
            .map(|(i, _)| candidates[*i].order)
            .collect();
        matches.sort_by_key(simplicity);
        let mut closest = None;
        if matches.is_empty() {
            let mut ranked: Vec<usize> = (0..candidates.len()).filter(|&i| first[i].is_some()).collect();
            ranked.sort_by_key(|&i| first[i].expect("filtered"));
            ranked.truncate(opts.closest_full.max(1));
            let full = Sub::new(p, r, n);
            let ev = Evaluator::new(full.problem(), candidates);
            closest = ranked
                .par_iter()
                .filter_map(|&i| ev.eval(&candidates[i].order).map(|got| (i, distance(&got, want))))
                .collect::<Vec<_>>()
                .into_iter()
                .min_by_key(|(i, d)| (d.0, d.2, *i))
                .map(|(i, d)| Closest {
                    order: candidates[i].order,
                    elements_differ: d.0,
                    bytes_differ: d.1,
                    max_ulp: d.2,
                });
        }
        // each key compiles its order's tree (K = 4096: a fraction of a
        // millisecond, dozens of matches): in parallel, grouped in order
        let keys: Vec<u64> = matches.par_iter().map(|o| order_key(o, p.k)).collect();
        let mut classes: Vec<(u64, Vec<Order>)> = Vec::new();
        for (o, key) in matches.iter().zip(keys) {
            match classes.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(*o),
                None => classes.push((key, vec![*o])),
            }
        }
        RowIdentity {
            row: r,
            matches,
            classes: classes.into_iter().map(|(_, v)| v).collect(),
            closest,
            evaluated: candidates.len() - skipped,
            skipped,
        }
    });
    Ok(out.collect())
}

/// The simplest order of the built-in candidate family (`candidates::family`)
/// that reproduces `observed`, the one output row of `a_row` (K f32 values)
/// times `b` (K x N, row-major); `None` when no candidate does or the
/// operands cannot run.
pub fn simplest_order(a_row: &[f32], b: &[f32], k: usize, n: usize, observed: &[f32]) -> Option<Order> {
    let p = Problem {
        a: Matrix::F32(a_row),
        b: Matrix::F32(b),
        m: 1,
        n,
        k,
        b_layout: BLayout::Kn,
    };
    let candidates = super::candidates::family(super::candidates::Inputs::of(&p), k);
    let id = identify(&p, &[0], observed, &candidates, IdentifyOptions::default()).ok()?;
    id.first()?.order()
}
