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
//! Many probes per launch: with f32/bf16 inputs every line (column of B, or
//! row of A when M > N) holds a whole probe and the other operand is all
//! units, so one GEMM answers `max(M, N)` arbitrary probes ("lines"; a
//! GEMV answers N). f16 and FP8 inputs lack the range for that (a product
//! of one large and one small element is not far enough from a unit), so
//! both factors carry the large values and only the diagonal elements are
//! probes ("diagonal"). MX inputs carry the large values in the block
//! scales instead (one unit per block, [`reveal_mx`]).
//!
//! An output format that rounds the counts (bf16, f16 outputs) is detected
//! by a calibration launch (its sizes laid out along the longer of rows and
//! columns, so a GEMV is calibrated too); then each probe counts the units
//! of one window of at most the exactly countable size, and the windows are
//! added up (a windowed probe is one line too).
//!
//! Memory: every answer is tallied against its probe (the pair and its
//! window), so what is kept grows with the distinct probes (at most
//! [`MAX_PROBES`], checked before each round's launches are built, one
//! launch built at a time), not with `M x N`.
//!
//! # Recovery
//! FPRev's recursion: for a set of leaves S (all of K first), probe its
//! first leaf f against the rest; equal `L` means the same ancestor of f;
//! each group of equal `L` is recursed into. All sets of one recursion level
//! are probed together, packed into as few launches as fit `M x N`.
//!
//! # Checks and the order
//! Every answer (each probe's line answers it once per row or column, and
//! lines beyond the probes repeat them at other positions) is checked
//! against the recovered tree: positions whose answers disagree are
//! reported (a kernel that reduces column tiles or rows differently). The recovered shape is matched against the
//! candidate family; the shape-matching candidates are then told apart by
//! their bytes on random inputs of the subject's type (FPRev's
//! `random_test`, here deciding the numerics a shape cannot show: fma vs
//! muladd, fused-sum
//! precision, output format). The result is the simplest order whose tree
//! and bytes both match, or the shape as a tree listing.

use super::candidates::{self, Inputs};
use super::identify::{identify, IdentifyOptions};
use super::shape::{Child, Shape};
use crate::gemm::{BLayout, Matrix, Problem, MX_BLOCK};
use crate::mx::MxFormat;
use crate::order::{InType, MxScale, Order};
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
    Lines,
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
    /// MX inputs (probed per block through the scales; `shape` is then
    /// over the K / 32 blocks).
    pub mx: Option<MxFormat>,
    pub scheme: Scheme,
    /// Units counted per probe (K when the output counts exactly).
    pub window: usize,
    /// GEMM launches of the subject (calibration, probes, verification).
    pub launches: usize,
    /// Probe answers received (every position of every probe launch).
    pub probes: usize,
    /// Distinct probes requested (each answer is tallied against its
    /// probe: memory grows with these, not with M x N).
    pub distinct_probes: usize,
    /// The recovered summation-tree shape.
    pub shape: Shape,
    /// Probe answers checked against the recovered tree: every answer,
    /// wherever it sat.
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
    /// Wall seconds per phase, in order (not serialized: the JSON output
    /// stays the same bytes run to run; `mxbi reveal --timings` prints them).
    #[serde(skip)]
    pub timings: Vec<(&'static str, f64)>,
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

/// Most distinct probes one reveal may request: 2^24. Each keeps a tally of
/// its answers (about 50 bytes), so the tallies stay under about 1 GiB;
/// checked before each round, before its launches are built.
pub const MAX_PROBES: usize = 1 << 24;

/// Answers that differ from their probe's first answer are tallied per
/// distinct (probe, value) up to this many; beyond, they are only counted
/// (as disagreements).
const MAX_DEVIANT: usize = 1 << 16;

/// The window index of a probe that counts every other term.
const NO_WINDOW: u32 = u32::MAX;

/// A probe: `+B` at p, `-B` at q, the window (chunk of the other terms)
/// whose units it counts, or [`NO_WINDOW`].
type Key = (u32, u32, u32);

/// Where an answer sat: (launch, row, column).
type At = (u32, u32, u32);

fn at(launch: usize, row: usize, col: usize) -> At {
    (launch as u32, row as u32, col as u32)
}

/// The answers of requested probes: every answer is tallied against its
/// probe, so memory grows with the distinct probes, not with M x N.
#[derive(Default)]
struct Tallies {
    /// Each probe's first answer: (value, how many answers gave it, where the first sat).
    first: HashMap<Key, (u32, u64, At)>,
    /// Answers that differ from their probe's first answer, per value.
    deviant: HashMap<(Key, u32), (u64, At)>,
    /// Deviant answers beyond [`MAX_DEVIANT`] (counted, not kept).
    overflow: u64,
    /// Every answer received.
    answers: u64,
}

impl Tallies {
    fn add(&mut self, key: Key, value: u32, count: u64, at: At) {
        use std::collections::hash_map::Entry;
        self.answers += count;
        match self.first.entry(key) {
            Entry::Vacant(e) => {
                e.insert((value, count, at));
            }
            Entry::Occupied(mut e) => {
                let f = e.get_mut();
                if f.0 == value {
                    f.1 += count;
                } else if let Some(d) = self.deviant.get_mut(&(key, value)) {
                    d.0 += count;
                } else if self.deviant.len() < MAX_DEVIANT {
                    self.deviant.insert((key, value), (count, at));
                } else {
                    self.overflow += count;
                }
            }
        }
    }

    fn value(&self, key: &Key) -> Option<u32> {
        self.first.get(key).map(|f| f.0)
    }
}

/// Per-launch tally of one probe's answers (merged into [`Tallies`] once
/// per launch, so a launch of M x N answers costs few hash lookups).
#[derive(Clone, Default)]
struct Local(Vec<(u32, u64, At)>);

impl Local {
    fn add(&mut self, value: u32, at: At) {
        match self.0.iter_mut().find(|x| x.0 == value) {
            Some(x) => x.1 += 1,
            None => self.0.push((value, 1, at)),
        }
    }

    /// Adds the tallies of answers that came after this one's.
    fn absorb(&mut self, later: Local) {
        for (v, c, a) in later.0 {
            match self.0.iter_mut().find(|x| x.0 == v) {
                Some(x) => x.1 += c,
                None => self.0.push((v, c, a)),
            }
        }
    }

    fn merge(&self, key: Key, t: &mut Tallies) {
        for &(v, c, a) in &self.0 {
            t.add(key, v, c, a);
        }
    }
}

/// Probe magnitudes for an input type: (small, large) element values.
fn magnitudes(t: InType, mx: bool) -> (f32, f32, Scheme) {
    let p = |e: i32| 2f32.powi(e);
    if mx {
        // the large value lives in the block scale: 2^40 through E8M0
        return (1.0, p(40), Scheme::Lines);
    }
    match t {
        InType::F32 | InType::Bf16 => (1.0, p(40), Scheme::Lines),
        InType::F16 => (p(-6), p(14), Scheme::Diagonal),
        InType::E4M3 => (p(-9), p(8), Scheme::Diagonal),
        InType::E5M2 => (p(-16), p(15), Scheme::Diagonal),
    }
}

/// Where windowed probes count units: the leaves the probe's ancestor can
/// hold. The first round probes every leaf. A set found to join its
/// parent's first leaf `f` at an ancestor of `L` terms is then probed
/// within itself plus `f` only: the ancestor of two of its leaves either
/// lies inside one child of that ancestor (whose leaves are all in the
/// set) or is the ancestor itself, and then `f`'s unit is lost with every
/// other: a probe that loses every unit of its scope has `L(p, q) = L`.
/// So a deep set needs one window, not one per `w` terms of K.
struct Scopes {
    /// Each scope: its sorted leaves and, but for the first (every leaf),
    /// the size of the ancestor it hangs from.
    list: Vec<(Vec<u32>, Option<u32>)>,
    /// The scope of the probes whose `p` is this leaf (a leaf is the first
    /// of at most one set).
    of: Vec<u32>,
}

impl Scopes {
    fn new(kl: usize) -> Scopes {
        Scopes {
            list: vec![((0..kl as u32).collect(), None)],
            of: vec![0; kl],
        }
    }

    /// The probes from `p` (the first leaf of a set) count units only
    /// among `leaves` (sorted, holding the set); `ceiling` is the size of
    /// the ancestor the set hangs from.
    fn add(&mut self, p: u32, leaves: Vec<u32>, ceiling: u32) {
        self.list.push((leaves, Some(ceiling)));
        self.of[p as usize] = (self.list.len() - 1) as u32;
    }

    fn leaves(&self, p: u32) -> &[u32] {
        &self.list[self.of[p as usize] as usize].0
    }

    fn ceiling(&self, p: u32) -> Option<u32> {
        self.list[self.of[p as usize] as usize].1
    }

    /// Windows of `w` units over the scope's terms other than p and q.
    fn n_windows(&self, p: u32, w: usize) -> usize {
        self.leaves(p).len().saturating_sub(2).div_ceil(w.max(1)).max(1)
    }

    /// The index range of window `c` among the scope's `len - 2` terms.
    fn range(&self, p: u32, w: usize, c: u32) -> (usize, usize) {
        let rest = self.leaves(p).len().saturating_sub(2);
        ((c as usize * w).min(rest), ((c as usize + 1) * w).min(rest))
    }

    /// The terms of window `c` of the probe (p, q): chunk c (of `w`) of
    /// the scope's leaves without p and q (both are in the scope).
    fn window(&self, p: u32, q: u32, w: usize, c: u32) -> impl Iterator<Item = u32> + '_ {
        let leaves = self.leaves(p);
        let at = |x: u32| leaves.binary_search(&x).unwrap_or(leaves.len());
        let (a, b) = (at(p).min(at(q)), at(p).max(at(q)));
        let (lo, hi) = self.range(p, w, c);
        (lo..hi).map(move |i| {
            leaves[if i < a {
                i
            } else if i + 1 < b {
                i + 1
            } else {
                i + 2
            }]
        })
    }

    /// How many terms window `c` of a probe from `p` holds.
    fn window_len(&self, p: u32, w: usize, c: u32) -> u32 {
        let (lo, hi) = self.range(p, w, c);
        (hi - lo) as u32
    }
}

/// MX codes of +1, -1 and 0 in `f` (probe values are `+-1 * 2^s`, the
/// power of two in the block's E8M0 scale).
#[derive(Clone, Copy)]
struct MxCodes {
    format: MxFormat,
    pos: u8,
    neg: u8,
    zero: u8,
}

impl MxCodes {
    fn of(format: MxFormat) -> Option<MxCodes> {
        let f = format.element();
        let enc = |v: f32| -> Option<u8> {
            let c = crate::format::encode_f32(v, f, &crate::format::CastPolicy::ieee(f), 0).ok()?;
            (f.decode_f32(c) == v && c <= 0xFF).then_some(c as u8)
        };
        Some(MxCodes {
            format,
            pos: enc(1.0)?,
            neg: enc(-1.0)?,
            zero: enc(0.0)?,
        })
    }

    /// (code, E8M0 scale) of a probe value: 0 or +-2^e.
    fn of_value(&self, v: f32) -> (u8, u8) {
        if v == 0.0 {
            return (self.zero, 127);
        }
        let e = ((v.to_bits() >> 23) & 0xFF) as i32 - 127;
        (if v > 0.0 { self.pos } else { self.neg }, (127 + e) as u8)
    }
}

/// Decodes answers into unit counts (a copy of what the prober knows, so a
/// launch's answers can be read while the prober runs the next one).
#[derive(Clone, Copy)]
struct Counter {
    unit: f64,
    kl: usize,
    ratio: f64,
}

impl Counter {
    /// The number of units an output value holds.
    fn count(&self, v: f32) -> Option<u32> {
        let c = v as f64 / self.unit;
        (c.is_finite() && c >= 0.0 && c.fract() == 0.0 && c <= self.kl as f64).then_some(c as u32)
    }

    fn not_a_count(&self, subject: &str, v: f32, p: u32, q: u32, i: usize, j: usize) -> RevealError {
        RevealError::Inconsistent(format!(
            "probe (+B at k={p}, -B at k={q}) at C[{i}, {j}] of {subject} gave {v:e}, not a whole number of units of {:e}: the subject's sum is not a static tree of roundings, or the probe's range ({:e} to a unit) is too small for its accumulator",
            self.unit, self.ratio
        ))
    }
}

struct Prober<'a> {
    subject: &'a dyn Subject,
    o: RevealOptions,
    /// MX inputs: probes per block (leaf b = block b).
    mx: Option<MxCodes>,
    /// Leaves: K, or K / 32 for MX.
    kl: usize,
    lo: f32,
    hi: f32,
    scheme: Scheme,
    window: usize,
    launches: usize,
    tallies: Tallies,
    /// Where windowed probes count units.
    scopes: Scopes,
    /// Seconds building launch inputs, in the subject, and reading answers.
    spent: [f64; 3],
    /// A and B of the last launch (their allocations are reused).
    buffers: (Vec<f32>, Vec<f32>),
}

/// `v` as `len` copies of `value` (keeping its allocation).
fn refill(v: &mut Vec<f32>, len: usize, value: f32) {
    v.clear();
    v.resize(len, value);
}

/// Rows read per block when a launch's answers are read in parallel: a
/// function of M only, so the tallies are the same on any thread count.
fn row_block(m: usize) -> usize {
    m.div_ceil(64).max(1)
}

impl Prober<'_> {
    /// Runs one launch given in leaf space (`a` [M, kl], `b` [kl, N]).
    fn run(&mut self, a: &[f32], b: &[f32]) -> Result<Vec<f32>, String> {
        self.launches += 1;
        let (m, k, n, kl) = (self.o.m, self.o.k, self.o.n, self.kl);
        let out = match self.mx {
            None => {
                let p = Problem {
                    a: Matrix::F32(a),
                    b: Matrix::F32(b),
                    m,
                    n,
                    k,
                    b_layout: BLayout::Kn,
                };
                self.subject.run(&p, None)
            }
            Some(mc) => {
                // leaf b -> the first element of block b; the rest zero
                let (mut ca, mut sa) = (vec![mc.zero; m * k], vec![127u8; m * kl]);
                for i in 0..m {
                    for x in 0..kl {
                        let (c, s) = mc.of_value(a[i * kl + x]);
                        ca[i * k + x * MX_BLOCK] = c;
                        sa[i * kl + x] = s;
                    }
                }
                let (mut cb, mut sb) = (vec![mc.zero; k * n], vec![127u8; kl * n]);
                for x in 0..kl {
                    for j in 0..n {
                        let (c, s) = mc.of_value(b[x * n + j]);
                        cb[x * MX_BLOCK * n + j] = c;
                        sb[x * n + j] = s;
                    }
                }
                let p = Problem {
                    a: Matrix::Mx {
                        codes: &ca,
                        scales: &sa,
                        format: mc.format,
                    },
                    b: Matrix::Mx {
                        codes: &cb,
                        scales: &sb,
                        format: mc.format,
                    },
                    m,
                    n,
                    k,
                    b_layout: BLayout::Kn,
                };
                self.subject.run(&p, None)
            }
        }
        .map_err(|e| e.to_string())?;
        if out.len() != m * n {
            return Err(format!(
                "{} answered {} values for an [{m}, {n}] output",
                self.subject.name(),
                out.len()
            ));
        }
        Ok(out)
    }

    fn counter(&self) -> Counter {
        Counter {
            unit: self.lo as f64 * self.lo as f64,
            kl: self.kl,
            ratio: (self.hi as f64 / self.lo as f64).powi(match self.scheme {
                Scheme::Lines => 1,
                Scheme::Diagonal => 2,
            }),
        }
    }

    /// Runs `count` launches, each built when it is due (so only one
    /// launch's inputs are held at a time) and its answers handed to
    /// `take` (launch number, index, output). Every launch runs even when
    /// some fail (a file subject writes every missing job at once); the
    /// first unreadable answer stops the round.
    fn launch_all(
        &mut self,
        count: usize,
        mut build: impl FnMut(usize, &mut Vec<f32>, &mut Vec<f32>),
        mut take: impl FnMut(&mut Tallies, usize, usize, &[f32]) -> Result<(), RevealError>,
    ) -> Result<(), RevealError> {
        let mut first = None;
        let mut failed = 0;
        // the launch inputs, reused from launch to launch (a fresh 64 MiB
        // buffer per launch costs more in page faults than filling it)
        let (mut a, mut b) = std::mem::take(&mut self.buffers);
        for i in 0..count {
            let t0 = std::time::Instant::now();
            build(i, &mut a, &mut b);
            let id = self.launches;
            let t1 = std::time::Instant::now();
            let ran = self.run(&a, &b);
            let t2 = std::time::Instant::now();
            self.spent[0] += (t1 - t0).as_secs_f64();
            self.spent[1] += (t2 - t1).as_secs_f64();
            match ran {
                Ok(out) => {
                    if first.is_none() {
                        take(&mut self.tallies, id, i, &out)?;
                    }
                    self.spent[2] += t2.elapsed().as_secs_f64();
                }
                Err(e) => {
                    failed += 1;
                    first.get_or_insert(e);
                }
            }
        }
        self.buffers = (a, b);
        match first {
            Some(first) => Err(RevealError::Subject {
                failed,
                launches: count,
                first,
            }),
            None => Ok(()),
        }
    }

    /// The largest window size whose unit counts come back exact: one
    /// calibration launch (more only when neither M nor N has room for
    /// the sizes tried), the sizes laid out along the longer of rows and
    /// columns (so a GEMV, M = 1, is calibrated too).
    fn calibrate(&mut self) -> Result<usize, RevealError> {
        let (m, kl, n, lo) = (self.o.m, self.kl, self.o.n, self.lo);
        let mut sizes: Vec<usize> = vec![kl];
        for s in [2048usize, 256, 16] {
            if s < kl {
                sizes.push(s);
            }
        }
        // the largest odd count of each size: exact only if every count up
        // to the size is (an odd count needs every bit of its width)
        let odd: Vec<usize> = sizes.iter().map(|&s| s - 1 + (s & 1)).collect();
        let cols = n >= m;
        let per = (if cols { n } else { m }).min(sizes.len());
        let nl = sizes.len().div_ceil(per);
        let which = |l: usize, t: usize| l * per + t % per.min(sizes.len() - l * per);
        let mut got: Vec<Option<f32>> = vec![None; sizes.len()];
        let mut exact = vec![true; sizes.len()];
        let ct = self.counter();
        self.launch_all(
            nl,
            |l, a, b| {
                if cols {
                    // row by row of B (a column at a time is a strided
                    // write per term: slow at K x N = 4096 x 4096)
                    let count: Vec<usize> = (0..n).map(|j| odd[which(l, j)]).collect();
                    refill(b, kl * n, 0.0);
                    for (x, row) in b.chunks_mut(n).enumerate() {
                        for (v, &c) in row.iter_mut().zip(&count) {
                            if x < c {
                                *v = lo;
                            }
                        }
                    }
                    refill(a, m * kl, lo);
                } else {
                    refill(a, m * kl, 0.0);
                    for i in 0..m {
                        a[i * kl..i * kl + odd[which(l, i)]].fill(lo);
                    }
                    refill(b, kl * n, lo);
                }
            },
            |_, _, l, out| {
                use rayon::prelude::*;
                // per block of rows: (exact, first value) per size
                let blocks: Vec<(Vec<bool>, Vec<Option<f32>>)> = out
                    .par_chunks(row_block(m) * n)
                    .enumerate()
                    .map(|(bi, block)| {
                        let mut ex = vec![true; sizes.len()];
                        let mut first: Vec<Option<f32>> = vec![None; sizes.len()];
                        for (r, row) in block.chunks(n).enumerate() {
                            let i = bi * row_block(m) + r;
                            for (j, &v) in row.iter().enumerate() {
                                let s = which(l, if cols { j } else { i });
                                if ct.count(v) != Some(odd[s] as u32) {
                                    ex[s] = false;
                                }
                                first[s].get_or_insert(v);
                            }
                        }
                        (ex, first)
                    })
                    .collect();
                for (ex, first) in blocks {
                    for s in 0..sizes.len() {
                        exact[s] &= ex[s];
                        if let Some(v) = first[s] {
                            got[s].get_or_insert(v);
                        }
                    }
                }
                Ok(())
            },
        )?;
        match (0..sizes.len()).find(|&i| exact[i]) {
            Some(i) if (i..sizes.len()).all(|j| exact[j]) => Ok(sizes[i]),
            _ => {
                let seen: Vec<String> = (0..sizes.len())
                    .map(|s| {
                        format!(
                            "{} units gave {:e}{}",
                            odd[s],
                            got[s].unwrap_or(f32::NAN),
                            if exact[s] { "" } else { " (wrong)" }
                        )
                    })
                    .collect();
                Err(RevealError::Inconsistent(format!(
                    "{} does not return sums of units exactly (units of {:e}: {}): not a sum of the products, or an output too narrow to count even {} units",
                    self.subject.name(),
                    ct.unit,
                    seen.join(", "),
                    odd[sizes.len() - 1]
                )))
            }
        }
    }

    /// L(p, q) for every pair (the requested probes; their answers are
    /// tallied, see [`Tallies`]).
    fn measure(&mut self, pairs: &[(u32, u32)]) -> Result<Vec<u32>, RevealError> {
        let windowed = self.window < self.kl;
        let w = self.window;
        let nw = |p: u32| if windowed { self.scopes.n_windows(p, w) } else { 1 };
        let need: u128 = pairs.iter().map(|&(p, _)| nw(p) as u128).sum();
        if self.tallies.first.len() as u128 + need > MAX_PROBES as u128 {
            return Err(RevealError::Options(format!(
                "this round needs {need} probes ({} pairs, windows of {w} units) after {} already: more than reveal's limit of {} distinct probes",
                pairs.len(),
                self.tallies.first.len(),
                crate::limits::show(MAX_PROBES)
            )));
        }
        let probes: Vec<Key> = pairs
            .iter()
            .flat_map(|&(p, q)| (0..nw(p) as u32).map(move |c| (p, q, if windowed { c } else { NO_WINDOW })))
            .collect();
        match self.scheme {
            Scheme::Lines => self.measure_lines(&probes)?,
            Scheme::Diagonal => self.measure_diagonal(&probes)?,
        }
        let (t, sc) = (&self.tallies, &self.scopes);
        let missing = || RevealError::Inconsistent("a probe was not placed".into());
        pairs
            .iter()
            .map(|&(p, q)| {
                if !windowed {
                    return t.value(&(p, q, NO_WINDOW)).ok_or_else(missing);
                }
                let lost = (0..sc.n_windows(p, w) as u32).try_fold(0u32, |acc, c| {
                    t.value(&(p, q, c)).map(|v| acc + v - 2).ok_or_else(missing)
                })?;
                // every unit of the scope lost: the ancestor the set hangs from
                Ok(match sc.ceiling(p) {
                    Some(ceiling) if lost as usize == sc.leaves(p).len() - 2 => ceiling,
                    _ => 2 + lost,
                })
            })
            .collect()
    }

    /// One probe per line, along the longer of columns and rows: line s
    /// holds a whole probe in one operand (`+B` at p, `-B` at q, units at
    /// the terms it counts: every other term, or its window's; 0 elsewhere)
    /// and the other operand is all units, so one launch answers
    /// `max(M, N)` arbitrary probes whatever sets they come from. Lines
    /// beyond the probes repeat them, and every row (column) of a line
    /// answers it again: all are checked.
    fn measure_lines(&mut self, probes: &[Key]) -> Result<(), RevealError> {
        let (m, kl, n, lo, hi, w) = (self.o.m, self.kl, self.o.n, self.lo, self.hi, self.window);
        let cols = n >= m;
        let slots = if cols { n } else { m };
        let chunks: Vec<&[Key]> = probes.chunks(slots).collect();
        let ct = self.counter();
        let name = self.subject.name();
        let scopes = std::mem::replace(&mut self.scopes, Scopes::new(0));
        let sc = &scopes;
        // the probe's line in leaf space: `put(x, value)` for every
        // nonzero term (the line starts as 0, or as units when it counts
        // every term)
        let line = |&(p, q, c): &Key, put: &mut dyn FnMut(usize, f32)| {
            if c != NO_WINDOW {
                sc.window(p, q, w, c).for_each(|x| put(x as usize, lo));
            }
            put(p as usize, hi);
            put(q as usize, -hi);
        };
        let fill = |chunk: &[Key]| {
            if chunk.iter().any(|k| k.2 != NO_WINDOW) {
                0f32
            } else {
                lo
            }
        };
        let active = |&(p, _, c): &Key| -> u32 {
            if c == NO_WINDOW {
                kl as u32 - 2
            } else {
                sc.window_len(p, w, c)
            }
        };
        let done = self.launch_all(
            chunks.len(),
            |li, a, b| {
                let chunk = chunks[li];
                let used = chunk.len();
                if cols {
                    refill(b, kl * n, fill(chunk));
                    for j in 0..n {
                        line(&chunk[j % used], &mut |x, v| b[x * n + j] = v);
                    }
                    refill(a, m * kl, lo);
                } else {
                    refill(a, m * kl, fill(chunk));
                    for i in 0..m {
                        let row = &mut a[i * kl..(i + 1) * kl];
                        line(&chunk[i % used], &mut |x, v| row[x] = v);
                    }
                    refill(b, kl * n, lo);
                }
            },
            |t, id, li, out| {
                use rayon::prelude::*;
                let chunk = chunks[li];
                let used = chunk.len();
                let act: Vec<u32> = chunk.iter().map(active).collect();
                // blocks of rows read in parallel, each line's tallies
                // folded in row order: the same as one pass over the rows
                let rb = row_block(m);
                let blocks: Vec<Result<Vec<Local>, RevealError>> = out
                    .par_chunks(rb * n)
                    .enumerate()
                    .map(|(bi, block)| {
                        let mut local = vec![Local::default(); used];
                        for (r, row) in block.chunks(n).enumerate() {
                            let i = bi * rb + r;
                            for (j, &v) in row.iter().enumerate() {
                                let s = if cols { j } else { i } % used;
                                let got = ct
                                    .count(v)
                                    .filter(|&x| x <= act[s])
                                    .ok_or_else(|| ct.not_a_count(&name, v, chunk[s].0, chunk[s].1, i, j))?;
                                local[s].add(act[s] - got + 2, at(id, i, j));
                            }
                        }
                        Ok(local)
                    })
                    .collect();
                let mut local = vec![Local::default(); used];
                for block in blocks {
                    for (s, lt) in block?.into_iter().enumerate() {
                        local[s].absorb(lt);
                    }
                }
                for (s, lt) in local.iter().enumerate() {
                    lt.merge(chunk[s], t);
                }
                Ok(())
            },
        );
        self.scopes = scopes;
        done
    }

    /// Both factors carry the large values (the narrow types' range), so
    /// only the diagonal elements are probes: `min(M, N)` per launch.
    fn measure_diagonal(&mut self, probes: &[Key]) -> Result<(), RevealError> {
        let (m, kl, n, lo, hi, w) = (self.o.m, self.kl, self.o.n, self.lo, self.hi, self.window);
        let slots = m.min(n);
        let chunks: Vec<&[Key]> = probes.chunks(slots).collect();
        let ct = self.counter();
        let name = self.subject.name();
        let scopes = std::mem::replace(&mut self.scopes, Scopes::new(0));
        let sc = &scopes;
        let active = |&(p, _, c): &Key| -> u32 {
            if c == NO_WINDOW {
                kl as u32 - 2
            } else {
                sc.window_len(p, w, c)
            }
        };
        let done = self.launch_all(
            chunks.len(),
            |li, a, b| {
                refill(a, m * kl, 0.0);
                refill(b, kl * n, lo);
                for (i, &(p, q, c)) in chunks[li].iter().enumerate() {
                    let row = &mut a[i * kl..(i + 1) * kl];
                    if c == NO_WINDOW {
                        row.fill(lo);
                    } else {
                        sc.window(p, q, w, c).for_each(|x| row[x as usize] = lo);
                    }
                    row[p as usize] = hi;
                    row[q as usize] = hi;
                    b[p as usize * n + i] = hi;
                    b[q as usize * n + i] = -hi;
                }
            },
            |t, id, li, out| {
                for (i, key) in chunks[li].iter().enumerate() {
                    let v = out[i * n + i];
                    let act = active(key);
                    let c = ct
                        .count(v)
                        .filter(|&c| c <= act)
                        .ok_or_else(|| ct.not_a_count(&name, v, key.0, key.1, i, i))?;
                    t.add(*key, act - c + 2, 1, at(id, i, i));
                }
                Ok(())
            },
        );
        self.scopes = scopes;
        done
    }
}

/// Every tallied answer against the recovered tree: (the
/// disagreeing answers, at most 16 listed by position, and their count).
fn check_answers(shape: &Shape, t: &Tallies, scopes: &Scopes, w: usize) -> (Vec<Disagreement>, usize) {
    let lca = shape.lca_sizes();
    // probes by p, so each p's row of L is computed once where it pays
    let mut keys: Vec<&Key> = t.first.keys().collect();
    keys.sort_unstable();
    let mut deviant: HashMap<Key, Vec<(u32, u64, At)>> = HashMap::new();
    for (&(key, v), &(c, a)) in &t.deviant {
        deviant.entry(key).or_default().push((v, c, a));
    }
    let mut bad: Vec<(At, u32, u32, u32, u32)> = Vec::new();
    let mut count = t.overflow;
    let mut i = 0;
    while i < keys.len() {
        let p = keys[i].0;
        let j = i + keys[i..].iter().take_while(|k| k.0 == p).count();
        let group = &keys[i..j];
        let row = (group.len() >= 64 || group.iter().any(|k| k.2 != NO_WINDOW))
            .then(|| shape.lca_row(&lca, p))
            .flatten();
        let l = |q: u32| -> Option<u32> {
            match &row {
                Some(r) => r.get(q as usize).copied().filter(|&x| x > 0),
                None => lca.get(p, q),
            }
        };
        for key in group {
            let (_, q, c) = **key;
            let expected = match (c, l(q)) {
                (_, None) => None,
                (NO_WINDOW, Some(x)) => Some(x),
                (c, Some(lpq)) => {
                    let lost = scopes
                        .window(p, q, w, c)
                        .filter(|&x| l(x).is_some_and(|a| a <= lpq))
                        .count();
                    Some(2 + lost as u32)
                }
            };
            let f = t.first[*key];
            let all = std::iter::once((f.0, f.1, f.2)).chain(deviant.get(*key).into_iter().flatten().copied());
            for (v, n, a) in all {
                if expected != Some(v) {
                    count += n;
                    bad.push((a, p, q, expected.unwrap_or(0), v));
                }
            }
        }
        i = j;
    }
    bad.sort_unstable();
    let list = bad
        .iter()
        .take(16)
        .map(|&((launch, row, col), p, q, expected, measured)| Disagreement {
            launch: launch as usize,
            row: row as usize,
            col: col as usize,
            p,
            q,
            expected,
            measured,
        })
        .collect();
    (list, count as usize)
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

fn check_options(o: &RevealOptions, mx: bool) -> Result<(), RevealError> {
    let err = |s: String| Err(RevealError::Options(s));
    if o.m == 0 || o.n == 0 || o.k < 2 {
        return err(format!(
            "reveal needs M >= 1, N >= 1 and K >= 2 (got M={}, K={}, N={})",
            o.m, o.k, o.n
        ));
    }
    if o.k > 1 << 16 && !mx {
        return err(format!("K = {} is more than reveal's limit of 65536 terms", o.k));
    }
    if mx && (!o.k.is_multiple_of(MX_BLOCK) || o.k < 2 * MX_BLOCK || o.k > MX_BLOCK << 16) {
        return err(format!(
            "MX reveal needs K a multiple of {MX_BLOCK}, at least 2 blocks and at most 65536 (got K={})",
            o.k
        ));
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

/// Random MX operands: finite nonzero codes of the format, scales within
/// +-4 of 2^0 (`rows` x `cols` codes, a scale per 32 codes along `rows`
/// when `along_rows`, else along `cols`).
fn random_mx(f: MxFormat, rows: usize, cols: usize, along_rows: bool, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut r = crate::rng::SplitMix64::new(seed);
    let e = f.element();
    let codes = (0..rows * cols)
        .map(|_| loop {
            // a code of the element's width (FP6 and FP4 codes sit in the
            // low bits of the byte)
            let c = (r.next_u32() & ((1u32 << e.bits()) - 1)) as u8;
            let v = e.decode_f32(c as u16);
            if v.is_finite() && v != 0.0 {
                return c;
            }
        })
        .collect();
    let ns = if along_rows {
        rows / MX_BLOCK * cols
    } else {
        rows * cols / MX_BLOCK
    };
    let scales = (0..ns).map(|_| (127 + r.range_i64(-4, 4)) as u8).collect();
    (codes, scales)
}

/// The shape an order shows to MX probes (one unit per block): its tree
/// over blocks for block-scale `fma`/`muladd`, else its element tree seen
/// at the first element of each block.
fn block_shape(o: &Order, k: usize) -> Shape {
    if o.scale == MxScale::Block && o.mma().is_none() {
        Shape::of_tree(&o.compile(k / MX_BLOCK))
    } else {
        let bs = MX_BLOCK as u32;
        Shape::of_tree(&o.compile(k)).restrict(k / MX_BLOCK, |x| x.is_multiple_of(bs).then_some(x / bs))
    }
}

/// Wall seconds per phase of one reveal.
struct Clock {
    start: std::time::Instant,
    lap: std::time::Instant,
    timings: Vec<(&'static str, f64)>,
}

impl Clock {
    fn start() -> Clock {
        let now = std::time::Instant::now();
        Clock {
            start: now,
            lap: now,
            timings: Vec::new(),
        }
    }

    /// Records the time since the last mark as `what`.
    fn mark(&mut self, what: &'static str) {
        let now = std::time::Instant::now();
        self.timings.push((what, (now - self.lap).as_secs_f64()));
        self.lap = now;
    }

    fn finish(mut self) -> Vec<(&'static str, f64)> {
        self.timings.push(("total", self.start.elapsed().as_secs_f64()));
        self.timings
    }
}

/// The order with the fields that cannot change its tree's shape set to
/// one value: the output format (one final rounding) and `muladd` read as
/// `fma` (a product rounded or not is one leaf either way). Shape matching
/// compiles one tree per key (test: `shape_key_keeps_the_shape`).
fn shape_key(o: &Order) -> Order {
    let mut k = *o;
    k.out = crate::order::OutFmt::F32;
    if k.family == crate::order::Family::MulAdd {
        k.family = crate::order::Family::Fma;
    }
    k
}

/// The shape probes see: the order's tree, or for MX probes its tree over
/// blocks ([`block_shape`]).
fn order_shape(o: &Order, k: usize, mx: bool) -> Shape {
    if mx {
        block_shape(o, k)
    } else {
        Shape::of_tree(&o.compile(k))
    }
}

/// Columns compared in the verification launch: at most this many, spread
/// evenly over N (so every column tile of a wide launch is seen) ...
const VERIFY_COLUMNS: usize = 512;

/// ... these.
fn verify_columns(n: usize) -> Vec<usize> {
    let c = n.min(VERIFY_COLUMNS);
    (0..c).map(|i| i * n / c).collect()
}

/// Recovers the subject's reduction tree for the launch shape of `o` (see
/// the module doc).
pub fn reveal(subject: &dyn Subject, o: RevealOptions) -> Result<Revealed, RevealError> {
    reveal_with(subject, o, None)
}

/// [`reveal`] for a subject that reads MX operands of `format` (codes and
/// E8M0 scales, blocks of 32 along K): the probes put one unit in the first
/// element of each block and the large values in the block scales
/// (`+-1 * 2^40`), so the range is the scales', not the element format's.
/// What is recovered is the tree over blocks (the shape's leaf b is block
/// b): the whole tree of a `scale=block` `fma`/`muladd` order; for orders
/// that sum elements (`dequant`, `fused`, `mma` with promotion) the tree
/// seen at the first element of each block, the order within a block being
/// told apart by the bytes on random MX inputs.
pub fn reveal_mx(subject: &dyn Subject, o: RevealOptions, format: MxFormat) -> Result<Revealed, RevealError> {
    reveal_with(subject, o, Some(format))
}

fn reveal_with(subject: &dyn Subject, o: RevealOptions, mx: Option<MxFormat>) -> Result<Revealed, RevealError> {
    check_options(&o, mx.is_some())?;
    let codes =
        match mx {
            None => None,
            Some(f) => Some(MxCodes::of(f).ok_or_else(|| {
                RevealError::Options(format!("MX format {}: +1, -1 and 0 are not all codes", f.name()))
            })?),
        };
    let kl = if mx.is_some() { o.k / MX_BLOCK } else { o.k };
    let (lo, hi, scheme) = magnitudes(o.input, mx.is_some());
    let mut pr = Prober {
        subject,
        o,
        mx: codes,
        kl,
        lo,
        hi,
        scheme,
        window: kl,
        launches: 0,
        tallies: Tallies::default(),
        scopes: Scopes::new(kl),
        spent: [0.0; 3],
        buffers: (Vec::new(), Vec::new()),
    };
    let mut clock = Clock::start();
    pr.window = pr.calibrate()?;
    clock.mark("calibration");
    pr.spent = [0.0; 3];
    // FPRev's recursion, one level per round
    let mut tasks = vec![Task {
        set: (0..kl as u32).collect(),
        groups: vec![],
    }];
    let mut frontier = vec![0usize];
    let windowed = pr.window < kl;
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
            let first = tasks[t].set[0];
            for g in groups.iter_mut() {
                if g.1.len() > 1 {
                    if windowed {
                        let mut scope = g.1.clone();
                        scope.push(first);
                        scope.sort_unstable();
                        pr.scopes.add(g.1[0], scope, g.0);
                    }
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
            if size as usize != kl {
                return Err(RevealError::Inconsistent(format!(
                    "the recovered tree holds {size} of the {kl} terms"
                )));
            }
            nodes.push(ch);
            Child::Node(nodes.len() - 1)
        }
    };
    let shape = Shape {
        k: kl,
        nodes,
        root: Some(root),
    };
    // every answer (tallied per probe) against the recovered tree
    // others against the recovered tree
    let rounds = clock.lap.elapsed().as_secs_f64();
    let [built, ran, read] = pr.spent;
    clock.timings.extend([
        ("probe inputs built", built),
        ("probe launches (in the subject)", ran),
        ("probe answers read and tallied", read),
        ("tree assembled", rounds - built - ran - read),
    ]);
    clock.lap = std::time::Instant::now();
    let (disagreements, disagreement_count) = check_answers(&shape, &pr.tallies, &pr.scopes, pr.window);
    clock.mark("answers checked against the tree");
    let t = &pr.tallies;
    let (probes, checked, distinct_probes) = (t.answers as usize, t.answers as usize, t.first.len());
    // the order: shape-matching candidates told apart by their bytes
    let inputs = if mx.is_some() {
        Inputs::Mx
    } else {
        Inputs::of_type(o.input)
    };
    let family = candidates::family(inputs, o.k);
    let canon = shape.canonical();
    let shape_matches: Vec<Order> = {
        use rayon::prelude::*;
        // one tree per shape key, compiled in parallel
        let mut index: HashMap<Order, usize> = HashMap::new();
        let mut uniq: Vec<Order> = Vec::new();
        for c in &family {
            index.entry(shape_key(&c.order)).or_insert_with(|| {
                uniq.push(shape_key(&c.order));
                uniq.len() - 1
            });
        }
        let hit: Vec<bool> = uniq
            .par_iter()
            .map(|ord| order_shape(ord, o.k, mx.is_some()).canonical() == canon)
            .collect();
        family
            .iter()
            .map(|c| c.order)
            .filter(|ord| hit[index[&shape_key(ord)]])
            .collect()
    };
    clock.mark("shape matched against the candidates");
    let mut order = None;
    let mut equivalent = Vec::new();
    let mut verified_elements = 0;
    if !shape_matches.is_empty() {
        let rows: Vec<usize> = (0..o.m.min(o.verify_rows.max(1))).collect();
        let cols = verify_columns(o.n);
        let c = cols.len();
        let pick = |out: &[f32]| -> Vec<f32> {
            rows.iter()
                .flat_map(|&r| cols.iter().map(move |&j| out[r * o.n + j]))
                .collect()
        };
        let cands: Vec<candidates::Candidate> = shape_matches
            .iter()
            .map(|&order| candidates::Candidate {
                order,
                source: candidates::Source::Family,
            })
            .collect();
        let ids = match mx {
            None => {
                // random values in the compared rows of A and columns of
                // B, zeros elsewhere
                let mut a = vec![0f32; o.m * o.k];
                a[..rows.len() * o.k].copy_from_slice(&random_values(o.input, rows.len() * o.k, o.seed ^ 0xA11CE));
                let bc = random_values(o.input, o.k * c, o.seed ^ 0xB0B);
                let mut b = vec![0f32; o.k * o.n];
                for x in 0..o.k {
                    for (t, &j) in cols.iter().enumerate() {
                        b[x * o.n + j] = bc[x * c + t];
                    }
                }
                let p = Problem {
                    a: Matrix::F32(&a),
                    b: Matrix::F32(&b),
                    m: o.m,
                    n: o.n,
                    k: o.k,
                    b_layout: BLayout::Kn,
                };
                pr.launches += 1;
                let out = subject.run(&p, None).map_err(|e| RevealError::Subject {
                    failed: 1,
                    launches: 1,
                    first: e.to_string(),
                })?;
                clock.mark("verification launch");
                let observed = pick(&out);
                verified_elements = observed.len();
                // the candidates on the compared columns only
                let sub = Problem {
                    b: Matrix::F32(&bc),
                    n: c,
                    ..p
                };
                identify(&sub, &rows, &observed, &cands, IdentifyOptions::default())
            }
            Some(f) => {
                let (ca, sa) = random_mx(f, o.m, o.k, false, o.seed ^ 0xA11CE);
                let (cb, sb) = random_mx(f, o.k, o.n, true, o.seed ^ 0xB0B);
                let p = Problem {
                    a: Matrix::Mx {
                        codes: &ca,
                        scales: &sa,
                        format: f,
                    },
                    b: Matrix::Mx {
                        codes: &cb,
                        scales: &sb,
                        format: f,
                    },
                    m: o.m,
                    n: o.n,
                    k: o.k,
                    b_layout: BLayout::Kn,
                };
                pr.launches += 1;
                let out = subject.run(&p, None).map_err(|e| RevealError::Subject {
                    failed: 1,
                    launches: 1,
                    first: e.to_string(),
                })?;
                clock.mark("verification launch");
                let observed = pick(&out);
                verified_elements = observed.len();
                // the candidates on the compared columns only
                let kb = o.k / MX_BLOCK;
                let (cb, sb) = (&cb, &sb);
                let cbc: Vec<u8> = (0..o.k)
                    .flat_map(|x| cols.iter().map(move |&j| cb[x * o.n + j]))
                    .collect();
                let sbc: Vec<u8> = (0..kb)
                    .flat_map(|x| cols.iter().map(move |&j| sb[x * o.n + j]))
                    .collect();
                let sub = Problem {
                    b: Matrix::Mx {
                        codes: &cbc,
                        scales: &sbc,
                        format: f,
                    },
                    n: c,
                    ..p
                };
                identify(&sub, &rows, &observed, &cands, IdentifyOptions::default())
            }
        }
        .map_err(RevealError::Inconsistent)?;
        let mut common: Vec<Order> = ids[0].matches.clone();
        for id in &ids[1..] {
            common.retain(|x| id.matches.contains(x));
        }
        if let Some((first, rest)) = common.split_first() {
            order = Some(*first);
            equivalent = rest.to_vec();
        }
        clock.mark("identify among the shape matches");
    }
    Ok(Revealed {
        m: o.m,
        k: o.k,
        n: o.n,
        input: o.input,
        mx,
        scheme: pr.scheme,
        window: pr.window,
        launches: pr.launches,
        probes,
        distinct_probes,
        shape,
        checked,
        disagreements,
        disagreement_count,
        shape_matches,
        order,
        equivalent,
        verified_elements,
        timings: clock.finish(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shape matching compiles one tree per [`shape_key`]: every order of
    /// the candidate families has its key's shape.
    #[test]
    fn shape_key_keeps_the_shape() {
        for (inputs, k) in [
            (Inputs::of_type(InType::F32), 96),
            (Inputs::of_type(InType::Bf16), 256),
            (Inputs::of_type(InType::E4M3), 256),
            (Inputs::Mx, 256),
        ] {
            let mx = inputs == Inputs::Mx;
            let family = candidates::family(inputs, k);
            let mut keyed = 0;
            for c in &family {
                let key = shape_key(&c.order);
                keyed += usize::from(key != c.order);
                assert!(
                    order_shape(&c.order, k, mx).canonical() == order_shape(&key, k, mx).canonical(),
                    "{} vs its key {}",
                    c.order,
                    key
                );
            }
            assert!(keyed > family.len() / 2, "the key merges most of the family: {keyed}");
        }
    }
}
