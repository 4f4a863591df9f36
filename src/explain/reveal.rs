//! Active recovery: the reduction tree of a black-box subject, through the
//! subject interface only (FPRev's counting probes, generalised).
//!
//! # Probes
//! Every term is a small unit `u` except two, `+B` at p and `-B` at q
//! (`B / u` large enough that a unit added into a sum that holds `B` is
//! lost). `B` and `-B` cancel exactly where they meet, at the lowest common
//! ancestor of p and q; every unit summed into a node under that ancestor
//! is swamped, every other unit survives. So the output is `(K - L(p, q)) u`
//! with `L(p, q)` the number of terms under the ancestor. A fused
//! multi-term (tensor-core) sum truncates the units it aligns to `B`, so it
//! shows up as one node with many children.
//!
//! Many probes per launch: with plain f32/bf16/f16 inputs row i of A holds
//! `+B` at `p_i` and column j of B holds `-B` at `q_j`, so one GEMM answers
//! the `M x N` probes `(p_i, q_j)` ("rows x columns"). FP8 inputs lack the
//! range for that (a product of one large and one small element is not far
//! enough from a unit), so both factors carry the large values and only the
//! diagonal elements are probes ("diagonal"). An output format that rounds
//! the counts (bf16, f16 outputs) is detected by a calibration launch; then
//! each probe counts the units of one window of at most the exactly
//! countable size, and the windows are added up.
//!
//! # Recovery
//! FPRev's recursion: for a set of leaves S (all of K first), probe its
//! first leaf f against the rest; equal `L` means the same ancestor of f;
//! each group of equal `L` is recursed into. All sets of one recursion level
//! are probed together, packed into as few launches as fit `M x N`.
//!
//! # Checks and the order
//! Every probe answer (also the duplicates that fill unused rows and
//! columns) is checked against the recovered tree: positions whose answers
//! disagree are reported (a kernel that reduces column tiles or rows
//! differently). The recovered shape is matched against the candidate
//! family; the shape-matching candidates are then told apart by their bytes
//! on random inputs of the subject's type (FPRev's `random_test`, here
//! deciding the numerics a shape cannot show: fma vs muladd, fused-sum
//! precision, output format). The result is the simplest order whose tree
//! and bytes both match, or the shape as a tree listing.

use super::candidates::{self, Inputs};
use super::identify::{identify, IdentifyOptions};
use super::shape::{Child, Shape};
use crate::gemm::{BLayout, Matrix, Problem};
use crate::order::{InType, Order};
use crate::subject::Subject;
use std::collections::HashMap;

/// What to reveal.
#[derive(Clone, Copy, Debug)]
pub struct RevealOptions {
    /// The launch shape (the subject's tree may depend on it).
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// The element type the subject reads; probe values are exact in it.
    pub input: InType,
    /// Seed of the random verification inputs.
    pub seed: u64,
    /// Rows of the random verification launch compared byte for byte.
    pub verify_rows: usize,
}

/// How probes were laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    RowsColumns,
    Diagonal,
}

/// A probe position whose answer contradicts the recovered tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Disagreement {
    pub launch: usize,
    pub row: usize,
    pub col: usize,
    pub p: u32,
    pub q: u32,
    /// Terms under the ancestor: predicted by the recovered tree, measured here.
    pub expected: u32,
    pub measured: u32,
}

/// The result of a reveal.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Revealed {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub input: InType,
    pub scheme: Scheme,
    /// Units counted per probe (K when the output counts exactly).
    pub window: usize,
    /// GEMM launches of the subject (calibration, probes, verification).
    pub launches: usize,
    /// Probe answers used (every position of every probe launch).
    pub probes: usize,
    /// The recovered summation-tree shape.
    pub shape: Shape,
    /// Probe answers checked against the recovered tree.
    pub checked: usize,
    /// Positions whose answers contradict it (at most 16 listed).
    pub disagreements: Vec<Disagreement>,
    pub disagreement_count: usize,
    /// Family candidates with the recovered shape.
    pub shape_matches: Vec<Order>,
    /// The simplest order whose tree is the recovered shape and whose bytes
    /// equal the subject's on the verification inputs (None: the grammar's
    /// family cannot say it; see `shape`).
    pub order: Option<Order>,
    /// Other shape-matching orders with the same bytes on those inputs.
    pub equivalent: Vec<Order>,
    /// Output elements compared in the verification launch.
    pub verified_elements: usize,
}

/// Why a reveal stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RevealError {
    /// Bad options (sizes).
    #[error("{0}")]
    Options(String),
    /// The subject did not answer (every failed launch of the round ran first).
    #[error("{failed} of {launches} launches failed; first: {first}")]
    Subject {
        failed: usize,
        launches: usize,
        first: String,
    },
    /// Answers that are not counts, or that no static tree explains.
    #[error("{0}")]
    Inconsistent(String),
}

/// Probe magnitudes for an input type: (small, large) element values.
fn magnitudes(t: InType) -> (f32, f32, Scheme) {
    let p = |e: i32| 2f32.powi(e);
    match t {
        InType::F32 | InType::Bf16 => (1.0, p(40), Scheme::RowsColumns),
        InType::F16 => (p(-6), p(14), Scheme::Diagonal),
        InType::E4M3 => (p(-9), p(8), Scheme::Diagonal),
        InType::E5M2 => (p(-16), p(15), Scheme::Diagonal),
    }
}

/// One probe: the terms p (+B) and q (-B), the units counted (None: all
/// other terms), where it sits.
#[derive(Clone, Debug)]
struct Probe {
    p: u32,
    q: u32,
    window: Option<Vec<u32>>,
}

/// One probe answer: where it sat, the probe, the units counted (None:
/// all other terms) and the measured `L` (or, for a window, the units of
/// the window lost plus 2).
struct Answer {
    launch: usize,
    row: usize,
    col: usize,
    p: u32,
    q: u32,
    window: Option<Vec<u32>>,
    measured: u32,
}

struct Prober<'a> {
    subject: &'a dyn Subject,
    o: RevealOptions,
    lo: f32,
    hi: f32,
    scheme: Scheme,
    window: usize,
    launches: usize,
    /// Every probe answer.
    answers: Vec<Answer>,
}

impl Prober<'_> {
    fn run(&mut self, a: &[f32], b: &[f32]) -> Result<Vec<f32>, String> {
        self.launches += 1;
        let p = Problem {
            a: Matrix::F32(a),
            b: Matrix::F32(b),
            m: self.o.m,
            n: self.o.n,
            k: self.o.k,
            b_layout: BLayout::Kn,
        };
        let out = self.subject.run(&p, None).map_err(|e| e.to_string())?;
        if out.len() != self.o.m * self.o.n {
            return Err(format!(
                "{} answered {} values for an [{}, {}] output",
                self.subject.name(),
                out.len(),
                self.o.m,
                self.o.n
            ));
        }
        Ok(out)
    }

    fn unit(&self) -> f64 {
        match self.scheme {
            Scheme::RowsColumns => self.lo as f64 * self.lo as f64,
            Scheme::Diagonal => self.lo as f64 * self.lo as f64,
        }
    }

    /// Runs a set of launches, all of them even when some fail.
    fn run_all(&mut self, launches: &[(Vec<f32>, Vec<f32>)]) -> Result<Vec<Vec<f32>>, RevealError> {
        let mut outs = Vec::new();
        let mut first = None;
        let mut failed = 0;
        for (a, b) in launches {
            match self.run(a, b) {
                Ok(o) => outs.push(o),
                Err(e) => {
                    failed += 1;
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            Some(first) => Err(RevealError::Subject {
                failed,
                launches: launches.len(),
                first,
            }),
            None => Ok(outs),
        }
    }

    /// The number of units (each `unit()`) an output value holds.
    fn count(&self, v: f32) -> Option<u32> {
        let c = v as f64 / self.unit();
        (c.is_finite() && c >= 0.0 && c.fract() == 0.0 && c <= self.o.k as f64).then_some(c as u32)
    }

    /// The largest window size whose unit counts come back exact.
    fn calibrate(&mut self) -> Result<usize, RevealError> {
        let (m, k, n) = (self.o.m, self.o.k, self.o.n);
        let mut sizes: Vec<usize> = vec![k];
        for s in [2048usize, 256, 16] {
            if s < k {
                sizes.push(s);
            }
        }
        sizes.truncate(m);
        // the largest odd count of each size: exact only if every count up
        // to the size is (an odd count needs every bit of its width)
        let odd: Vec<usize> = sizes.iter().map(|&s| s - 1 + (s & 1)).collect();
        let mut a = vec![0f32; m * k];
        for (i, &c) in odd.iter().enumerate() {
            a[i * k..i * k + c].fill(self.lo);
        }
        let b = vec![self.lo; k * n];
        let out = self.run_all(&[(a, b)])?.remove(0);
        let exact = |i: usize| (0..n).all(|j| self.count(out[i * n + j]) == Some(odd[i] as u32));
        match (0..sizes.len()).find(|&i| exact(i)) {
            Some(i) if (i..sizes.len()).all(exact) => Ok(sizes[i]),
            _ => Err(RevealError::Inconsistent(format!(
                "{} does not return sums of units exactly (a row of {} units of {:e} gave {:e}): not a sum of the products, or an output too narrow to count",
                self.subject.name(),
                odd[sizes.len() - 1],
                self.unit(),
                out[(sizes.len() - 1) * n]
            ))),
        }
    }

    /// L(p, q) for every pair.
    fn measure(&mut self, pairs: &[(u32, u32)]) -> Result<Vec<u32>, RevealError> {
        match self.scheme {
            Scheme::RowsColumns if self.window >= self.o.k => self.measure_rows_columns(pairs),
            _ => self.measure_diagonal(pairs),
        }
    }

    fn measure_rows_columns(&mut self, pairs: &[(u32, u32)]) -> Result<Vec<u32>, RevealError> {
        let (m, k, n) = (self.o.m, self.o.k, self.o.n);
        // tasks: one p with up to N of its q's
        let mut by_p: Vec<(u32, Vec<u32>)> = Vec::new();
        for &(p, q) in pairs {
            match by_p.last_mut() {
                Some((lp, qs)) if *lp == p && qs.len() < n => qs.push(q),
                _ => by_p.push((p, vec![q])),
            }
        }
        // pack tasks into launches: at most M rows and N distinct columns
        let mut launches: Vec<Vec<usize>> = Vec::new();
        let mut cols_used = 0;
        for (t, (_, qs)) in by_p.iter().enumerate() {
            match launches.last_mut() {
                Some(l) if l.len() < m && cols_used + qs.len() <= n => {
                    l.push(t);
                    cols_used += qs.len();
                }
                _ => {
                    launches.push(vec![t]);
                    cols_used = qs.len();
                }
            }
        }
        let mut built = Vec::new();
        let mut layouts = Vec::new();
        for l in &launches {
            let mut rows: Vec<u32> = l.iter().map(|&t| by_p[t].0).collect();
            let mut cols: Vec<u32> = l.iter().flat_map(|&t| by_p[t].1.iter().copied()).collect();
            let (r0, c0) = (rows.len(), cols.len());
            // fill the rest with repeats: the same probes at other positions
            for i in r0..m {
                rows.push(rows[i % r0]);
            }
            for j in c0..n {
                cols.push(cols[j % c0]);
            }
            let mut a = vec![self.lo; m * k];
            for (i, &p) in rows.iter().enumerate() {
                a[i * k + p as usize] = self.hi;
            }
            let mut b = vec![self.lo; k * n];
            for (j, &q) in cols.iter().enumerate() {
                b[q as usize * n + j] = -self.hi;
            }
            built.push((a, b));
            layouts.push((rows, cols));
        }
        let outs = self.run_all(&built)?;
        let base = self.launches - outs.len();
        let mut got: HashMap<(u32, u32), u32> = HashMap::new();
        for (li, (out, (rows, cols))) in outs.iter().zip(&layouts).enumerate() {
            for (i, &p) in rows.iter().enumerate() {
                for (j, &q) in cols.iter().enumerate() {
                    if p == q {
                        continue;
                    }
                    let v = out[i * n + j];
                    let c = self.count(v).ok_or_else(|| self.not_a_count(v, p, q, i, j))?;
                    let l = k as u32 - c;
                    self.answers.push(Answer {
                        launch: base + li,
                        row: i,
                        col: j,
                        p,
                        q,
                        window: None,
                        measured: l,
                    });
                    got.entry((p, q)).or_insert(l);
                }
            }
        }
        pairs
            .iter()
            .map(|pq| {
                got.get(pq)
                    .copied()
                    .ok_or_else(|| RevealError::Inconsistent("a probe was not placed".into()))
            })
            .collect()
    }

    fn not_a_count(&self, v: f32, p: u32, q: u32, i: usize, j: usize) -> RevealError {
        RevealError::Inconsistent(format!(
            "probe (+B at k={p}, -B at k={q}) at C[{i}, {j}] gave {v:e}, not a whole number of units of {:e}: the subject's sum is not a static tree of roundings, or the probe's range ({:e} to a unit) is too small for its accumulator",
            self.unit(),
            (self.hi as f64 / self.lo as f64).powi(match self.scheme {
                Scheme::RowsColumns => 1,
                Scheme::Diagonal => 2,
            })
        ))
    }

    fn measure_diagonal(&mut self, pairs: &[(u32, u32)]) -> Result<Vec<u32>, RevealError> {
        let (m, k, n) = (self.o.m, self.o.k, self.o.n);
        let slots = m.min(n);
        let w = self.window.max(1);
        let mut probes: Vec<(usize, Probe)> = Vec::new();
        for (pi, &(p, q)) in pairs.iter().enumerate() {
            let rest: Vec<u32> = (0..k as u32).filter(|&x| x != p && x != q).collect();
            if w >= k {
                probes.push((pi, Probe { p, q, window: None }));
            } else {
                for ch in rest.chunks(w) {
                    probes.push((
                        pi,
                        Probe {
                            p,
                            q,
                            window: Some(ch.to_vec()),
                        },
                    ));
                }
            }
        }
        let mut built = Vec::new();
        for chunk in probes.chunks(slots) {
            let mut a = vec![0f32; m * k];
            let mut b = vec![self.lo; k * n];
            for (i, (_, pr)) in chunk.iter().enumerate() {
                let row = &mut a[i * k..(i + 1) * k];
                match &pr.window {
                    None => row.fill(self.lo),
                    Some(wd) => wd.iter().for_each(|&x| row[x as usize] = self.lo),
                }
                row[pr.p as usize] = self.hi;
                row[pr.q as usize] = self.hi;
                b[pr.p as usize * n + i] = self.hi;
                b[pr.q as usize * n + i] = -self.hi;
            }
            built.push((a, b));
        }
        let outs = self.run_all(&built)?;
        let base = self.launches - outs.len();
        let mut lost = vec![0u32; pairs.len()];
        for (li, (out, chunk)) in outs.iter().zip(probes.chunks(slots)).enumerate() {
            for (i, (pi, pr)) in chunk.iter().enumerate() {
                let v = out[i * n + i];
                let active = pr.window.as_ref().map_or(k - 2, |w| w.len()) as u32;
                let c = self
                    .count(v)
                    .filter(|&c| c <= active)
                    .ok_or_else(|| self.not_a_count(v, pr.p, pr.q, i, i))?;
                lost[*pi] += active - c;
                self.answers.push(Answer {
                    launch: base + li,
                    row: i,
                    col: i,
                    p: pr.p,
                    q: pr.q,
                    window: pr.window.clone(),
                    measured: active - c + 2,
                });
            }
        }
        Ok(lost.into_iter().map(|x| x + 2).collect())
    }
}

/// A set of leaves being resolved, and what its probes found.
struct Task {
    set: Vec<u32>,
    /// (L, the group's leaves, the task that resolves it when it has two or more)
    groups: Vec<(u32, Vec<u32>, Option<usize>)>,
}

/// What assembling a task gives: a leaf, or the children of a node that
/// holds `size` leaves.
enum Built {
    Leaf(u32),
    Group(Vec<Child>, u32),
}

fn assemble(tasks: &[Task], t: usize, nodes: &mut Vec<Vec<Child>>) -> Result<Built, RevealError> {
    let task = &tasks[t];
    if task.set.len() == 1 {
        return Ok(Built::Leaf(task.set[0]));
    }
    let bad = |msg: String| RevealError::Inconsistent(msg);
    let mut cur = Child::Leaf(task.set[0]);
    let mut size = 1u32;
    let mut children: Vec<Child> = Vec::new();
    let last = task.groups.len() - 1;
    for (gi, (l, g, sub)) in task.groups.iter().enumerate() {
        // only the last group may join at an ancestor that also holds
        // leaves outside this set (the set is then siblings of a wider node)
        let joined = size + g.len() as u32;
        if *l != joined && !(gi == last && *l > joined) {
            return Err(bad(format!(
                "probes from k={} give {} terms under a common ancestor, but the {} terms below it and the {} joining there make {}: no static tree explains the answers",
                task.set[0],
                l,
                size,
                g.len(),
                size + g.len() as u32
            )));
        }
        if gi > 0 {
            nodes.push(std::mem::take(&mut children));
            cur = Child::Node(nodes.len() - 1);
        }
        children.push(cur);
        match sub {
            None => children.push(Child::Leaf(g[0])),
            Some(s) => match assemble(tasks, *s, nodes)? {
                Built::Leaf(x) => children.push(Child::Leaf(x)),
                Built::Group(ch, s) if s as usize == g.len() => {
                    nodes.push(ch);
                    children.push(Child::Node(nodes.len() - 1));
                }
                Built::Group(ch, s) if s == *l => children.extend(ch),
                Built::Group(_, s) => {
                    return Err(bad(format!(
                        "the terms joining k={} at an ancestor of {l} terms reach an ancestor of {s} terms among themselves",
                        task.set[0]
                    )))
                }
            },
        }
        size = *l;
    }
    Ok(Built::Group(children, size))
}

fn check_options(o: &RevealOptions) -> Result<(), RevealError> {
    let err = |s: String| Err(RevealError::Options(s));
    if o.m == 0 || o.n == 0 || o.k < 2 {
        return err(format!(
            "reveal needs M >= 1, N >= 1 and K >= 2 (got M={}, K={}, N={})",
            o.m, o.k, o.n
        ));
    }
    if o.k > 1 << 16 {
        return err(format!("K = {} is more than reveal's limit of 65536 terms", o.k));
    }
    let (mk, kn) = (o.m as u128 * o.k as u128, o.k as u128 * o.n as u128);
    if mk.max(kn) > crate::limits::MAX_ELEMENTS as u128 || (o.m * o.n) as u128 > crate::limits::MAX_ELEMENTS as u128 {
        return err("the launch shape exceeds mxbi::limits::MAX_ELEMENTS".into());
    }
    Ok(())
}

/// Random inputs of type `t` (exact in it): random sign, exponent within
/// +-8 of 1 (+-4 for 8-bit types), random significand.
fn random_values(t: InType, count: usize, seed: u64) -> Vec<f32> {
    let mut r = crate::rng::SplitMix64::new(seed);
    (0..count)
        .map(|_| loop {
            let sign = (r.next_u32() & 1) << 31;
            let e = r.range_i64(-8, 8) as i32;
            let v = f32::from_bits(sign | ((127 + e) as u32) << 23 | (r.next_u32() & 0x7F_FFFF));
            let v = match t.format() {
                None => v,
                Some(f) => match crate::format::encode_f32(v, f, &crate::format::CastPolicy::ieee(f), 0) {
                    Ok(c) => f.decode_f32(c),
                    Err(_) => continue,
                },
            };
            if v.is_finite() && v != 0.0 {
                return v;
            }
        })
        .collect()
}

/// Recovers the subject's reduction tree for the launch shape of `o` (see
/// the module doc).
pub fn reveal(subject: &dyn Subject, o: RevealOptions) -> Result<Revealed, RevealError> {
    check_options(&o)?;
    let (lo, hi, scheme) = magnitudes(o.input);
    let mut pr = Prober {
        subject,
        o,
        lo,
        hi,
        scheme,
        window: o.k,
        launches: 0,
        answers: Vec::new(),
    };
    pr.window = pr.calibrate()?;
    if pr.window < o.k {
        pr.scheme = Scheme::Diagonal;
    }
    // FPRev's recursion, one level per round
    let mut tasks = vec![Task {
        set: (0..o.k as u32).collect(),
        groups: vec![],
    }];
    let mut frontier = vec![0usize];
    while !frontier.is_empty() {
        let pairs: Vec<(u32, u32)> = frontier
            .iter()
            .flat_map(|&t| {
                let s = &tasks[t].set;
                s[1..].iter().map(move |&x| (s[0], x))
            })
            .collect();
        let ls = pr.measure(&pairs)?;
        let mut next = Vec::new();
        let mut at = 0;
        for &t in &frontier {
            let rest = tasks[t].set[1..].to_vec();
            let mut by_l: Vec<(u32, u32)> = rest.iter().enumerate().map(|(i, &x)| (ls[at + i], x)).collect();
            at += rest.len();
            by_l.sort_unstable();
            let mut groups: Vec<(u32, Vec<u32>, Option<usize>)> = Vec::new();
            for (l, x) in by_l {
                match groups.last_mut() {
                    Some((gl, g, _)) if *gl == l => g.push(x),
                    _ => groups.push((l, vec![x], None)),
                }
            }
            for g in groups.iter_mut() {
                if g.1.len() > 1 {
                    tasks.push(Task {
                        set: g.1.clone(),
                        groups: vec![],
                    });
                    g.2 = Some(tasks.len() - 1);
                    next.push(tasks.len() - 1);
                }
            }
            tasks[t].groups = groups;
        }
        frontier = next;
    }
    let mut nodes = Vec::new();
    let root = match assemble(&tasks, 0, &mut nodes)? {
        Built::Leaf(x) => Child::Leaf(x),
        Built::Group(ch, size) => {
            if size as usize != o.k {
                return Err(RevealError::Inconsistent(format!(
                    "the recovered tree holds {size} of the K = {} terms",
                    o.k
                )));
            }
            nodes.push(ch);
            Child::Node(nodes.len() - 1)
        }
    };
    let shape = Shape {
        k: o.k,
        nodes,
        root: Some(root),
    };
    // every answer against the recovered tree
    // (the launches repeat the same few pairs at many positions: each
    // distinct pair's `L` is computed once, every answer still compared)
    let lca = shape.lca_sizes();
    let mut memo: HashMap<(u32, u32), Option<u32>> = HashMap::new();
    let l_of = |memo: &mut HashMap<(u32, u32), Option<u32>>, p: u32, q: u32| {
        *memo.entry((p, q)).or_insert_with(|| lca.get(p, q))
    };
    let mut disagreements = Vec::new();
    let mut disagreement_count = 0;
    for Answer {
        launch,
        row,
        col,
        p,
        q,
        window,
        measured,
    } in &pr.answers
    {
        let pq = l_of(&mut memo, *p, *q);
        let expected = match window {
            None => pq,
            Some(w) => {
                // the lost units of this window, plus p and q
                pq.map(|b| {
                    2 + w
                        .iter()
                        .filter(|&&x| l_of(&mut memo, *p, x).is_some_and(|a| a <= b))
                        .count() as u32
                })
            }
        };
        if expected != Some(*measured) {
            disagreement_count += 1;
            if disagreements.len() < 16 {
                disagreements.push(Disagreement {
                    launch: *launch,
                    row: *row,
                    col: *col,
                    p: *p,
                    q: *q,
                    expected: expected.unwrap_or(0),
                    measured: *measured,
                });
            }
        }
    }
    let checked = pr.answers.len();
    // the order: shape-matching candidates told apart by their bytes
    let family = candidates::family(Inputs::of_type(o.input), o.k);
    let canon = shape.canonical();
    let shape_matches: Vec<Order> = family
        .iter()
        .map(|c| c.order)
        .filter(|ord| Shape::of_tree(&ord.compile(o.k)).canonical() == canon)
        .collect();
    let mut order = None;
    let mut equivalent = Vec::new();
    let mut verified_elements = 0;
    if !shape_matches.is_empty() {
        let a = random_values(o.input, o.m * o.k, o.seed ^ 0xA11CE);
        let b = random_values(o.input, o.k * o.n, o.seed ^ 0xB0B);
        let out = pr.run_all(&[(a.clone(), b.clone())])?.remove(0);
        let rows: Vec<usize> = (0..o.m.min(o.verify_rows.max(1))).collect();
        let observed: Vec<f32> = rows
            .iter()
            .flat_map(|&r| out[r * o.n..(r + 1) * o.n].to_vec())
            .collect();
        let p = Problem {
            a: Matrix::F32(&a),
            b: Matrix::F32(&b),
            m: o.m,
            n: o.n,
            k: o.k,
            b_layout: BLayout::Kn,
        };
        let cands: Vec<candidates::Candidate> = shape_matches
            .iter()
            .map(|&order| candidates::Candidate {
                order,
                source: candidates::Source::Family,
            })
            .collect();
        let ids =
            identify(&p, &rows, &observed, &cands, IdentifyOptions::default()).map_err(RevealError::Inconsistent)?;
        let mut common: Vec<Order> = ids[0].matches.clone();
        for id in &ids[1..] {
            common.retain(|x| id.matches.contains(x));
        }
        verified_elements = observed.len();
        if let Some((first, rest)) = common.split_first() {
            order = Some(*first);
            equivalent = rest.to_vec();
        }
    }
    Ok(Revealed {
        m: o.m,
        k: o.k,
        n: o.n,
        input: o.input,
        scheme: pr.scheme,
        window: pr.window,
        launches: pr.launches,
        probes: checked,
        shape,
        checked,
        disagreements,
        disagreement_count,
        shape_matches,
        order,
        equivalent,
        verified_elements,
    })
}
