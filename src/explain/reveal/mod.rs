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
//! Many probes per launch: with f32/bf16/f16 inputs every line (column of
//! B, or row of A when M > N) holds a whole probe and the other operand is
//! all ones, so one GEMM answers `max(M, N)` arbitrary probes ("lines"; a
//! GEMV answers N). f16 reaches `B / u` = 2^39 only with subnormal units
//! (2^-24 against 2^15); a subject that flushes them fails calibration and
//! is probed on the diagonal instead. FP8 inputs lack the range for lines
//! (a product of one large and one small element is not far enough from a
//! unit), so both factors carry the large values and only the diagonal
//! elements are probes ("diagonal"). MX inputs carry the large values in
//! the block scales instead (one unit per block, [`reveal_mx`]).
//!
//! Grid launches (`grid.rs`): on a square launch, row i of A carries `+B`
//! at p_i and column j of B `-B` at q_j, so C[i, j] answers (p_i, q_j) and a
//! launch answers every pair of P x Q; pairs of neighbours realize the
//! nodes of chains and contiguous parts before FPRev's recursion runs
//! (docs/EXPLAIN.md, "Pairs in both dimensions").
//!
//! An output format that rounds the counts (bf16, f16 outputs) is detected
//! by a calibration launch (its sizes laid out along the longer of rows and
//! columns, so a GEMV is calibrated too); then each probe counts the units
//! of one window of at most the exactly countable size (or is a zero test),
//! and a recursion level's leaves are ranked in stages (`rank.rs`; a
//! windowed probe is one line too).
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
//! are probed together, packed into as few launches as fit `M x N`. Nodes
//! the grid launches realized are known: no probe inside one, one probe
//! per node elsewhere. Where the grid did not run, pairs of predicted
//! nodes are asked first (`predict.rs`: neighbours at leaf 0's stride,
//! then, after the first level, groups that are shifted copies of known
//! subtrees); the forest keeps only the nodes their answers prove.
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
//!
//! # Data-dependent orders
//! The probes assume one static tree. When every answer agrees with the
//! recovered tree, a seeded sample of at most [`REPEAT_PROBES`] probes is
//! repeated with other values (`repeat.rs`: rescaled up, rescaled down,
//! swamped units refilled with 0 or half a unit; one launch each, the
//! refill sharing the launch of the first where a launch holds the sample
//! twice, so at most 3 extra launches). A static tree gives the same counts; any
//! changed answer is [`RevealError::DataDependent`] naming the probes,
//! never a tree.

use super::candidates::{self, Inputs};
use super::identify::{identify, IdentifyOptions, RowIdentity};
use super::shape::{Child, Shape};
use crate::gemm::{BLayout, Matrix, Problem, MX_BLOCK};
use crate::mx::MxFormat;
use crate::order::{InType, Order};
use crate::subject::Subject;
use rustc_hash::FxHashMap as HashMap;

mod error;
mod grid;
mod keys;
mod matching;
mod options;
mod predict;
mod prober;
mod rank;
mod repeat;
mod repeats;
mod tally;
mod two;
mod verify;

pub use error::RevealError;
pub use options::{RevealOptions, Scheme, MAX_PROBES};
pub use repeat::REPEAT_PROBES;
pub use repeats::{ChangedAnswer, Repeats};

use keys::{At, Key, NO_WINDOW};

use grid::Forest;
use matching::match_shapes;
use prober::{magnitudes, Magnitudes, MxCodes, Prober};
use tally::{Tallies, Windows};
use verify::{random_mx, random_values, verify_columns};

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
    /// GEMM launches of the subject (calibration, probes, repeats,
    /// verification).
    pub launches: usize,
    /// Of those, grid launches (pairs in both dimensions; 0 where lines
    /// take as few launches, or the first grid launch realized too little).
    pub grid_launches: usize,
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
    /// No candidate has the shape: the family order whose tree is nearest
    /// (fewest differing edges; ties: the simplest), and where it departs.
    pub closest: Option<crate::explain::ShapeMiss>,
    /// The simplest order whose tree is the recovered shape and whose bytes
    /// equal the subject's on the verification inputs (None: the grammar's
    /// family cannot say it, see `shape`; or some answers contradict the
    /// tree, so no one order explains them all).
    pub order: Option<Order>,
    /// Other shape-matching orders with the same bytes on those inputs.
    pub equivalent: Vec<Order>,
    /// The named order's other spellings with its tree for K, split parts
    /// starting elsewhere (`candidates::same_parts`): the family kept one.
    pub same_parts: Vec<Order>,
    /// Output elements compared in the verification launch.
    pub verified_elements: usize,
    /// The data-dependence check: probes repeated with other values, every
    /// answer the same (run only when every answer agrees with the tree;
    /// a changed answer is [`RevealError::DataDependent`] instead).
    pub repeats: Repeats,
    /// Wall seconds per phase, in order (not serialized: the JSON output
    /// stays the same bytes run to run; `mxbi reveal --timings` prints them).
    #[serde(skip)]
    pub timings: Vec<(&'static str, f64)>,
}

/// Every tallied answer against the recovered tree: (the
/// disagreeing answers, at most 16 listed by position, and their count).
fn check_answers(shape: &Shape, t: &Tallies, windows: &Windows, kl: usize) -> (Vec<Disagreement>, usize) {
    use rayon::prelude::*;
    let lca = shape.lca_sizes();
    let mut deviant: HashMap<Key, Vec<(u32, u64, At)>> = HashMap::default();
    for (&(key, v), &(c, a)) in &t.deviant {
        deviant.entry(key).or_default().push((v, c, a));
    }
    type Bad = (At, u32, u32, u32, u32);
    type Entry<'t> = (Key, &'t tally::First);
    // a probe's answers (its first and any that differ) against `expected`
    let judge = |key: &Key, f: &tally::First, expected: Option<u32>, bad: &mut Vec<Bad>, count: &mut u64| {
        let all = std::iter::once(*f).chain(deviant.get(key).into_iter().flatten().copied());
        for (v, n, a) in all {
            if expected != Some(v) {
                *count += n;
                bad.push((a, key.0, key.1, expected.unwrap_or(0), v));
            }
        }
    };
    let (mut windowed, mut plain): (Vec<Entry>, Vec<Entry>) = (Vec::new(), Vec::with_capacity(t.distinct()));
    t.for_each_first(|k, f| {
        if k.2 == NO_WINDOW {
            plain.push((k, f));
        } else {
            windowed.push((k, f));
        }
    });
    // an unwindowed probe is one lookup of L(p, q): in parallel, in any
    // order (the list is sorted below and the count is a sum)
    let (mut bad, mut count) = plain
        .par_chunks(4096)
        .map(|chunk| {
            let (mut bad, mut count) = (Vec::new(), 0u64);
            for (key, f) in chunk {
                judge(key, f, lca.get(key.0, key.1), &mut bad, &mut count);
            }
            (bad, count)
        })
        .reduce(
            || (Vec::new(), 0),
            |(mut a, x), (b, y)| {
                a.extend(b);
                (a, x + y)
            },
        );
    count += t.overflow;
    // a windowed probe asks L(p, x) for every leaf of its window: probes
    // by p, one walk up from p per p
    windowed.sort_unstable_by_key(|e| e.0);
    let mut i = 0;
    while i < windowed.len() {
        let p = windowed[i].0 .0;
        let j = i + windowed[i..].iter().take_while(|e| e.0 .0 == p).count();
        let row = shape.lca_row(&lca, p);
        let l = |q: u32| -> Option<u32> { row.as_ref()?.get(q as usize).copied().filter(|&x| x > 0) };
        for (key, f) in &windowed[i..j] {
            let (_, q, c) = *key;
            let expected = l(q).map(|lpq| {
                let lost = windows
                    .window(p, q, c)
                    .filter(|&x| l(x).is_some_and(|a| a <= lpq))
                    .count();
                windows.expected(c, windows.active(key, kl), lost as u32)
            });
            judge(key, f, expected, &mut bad, &mut count);
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
    /// The first leaf of the set this one came from and the size of the
    /// ancestor it hangs from (windowed probes rank within the set and that
    /// leaf: `rank.rs`).
    hangs: Option<(u32, u32)>,
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

/// The verification launch: the subject on random inputs `p` (counted
/// among the launches).
fn verification_launch(pr: &mut Prober, p: &Problem) -> Result<Vec<f32>, RevealError> {
    pr.launches += 1;
    pr.subject.run(p, None).map_err(|e| RevealError::Subject {
        failed: 1,
        launches: 1,
        first: e.to_string(),
    })
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
    let mut pr = new_prober(subject, o, mx)?;
    let kl = pr.kl;
    let mut clock = Clock::start();
    pr.window = calibrate(&mut pr, &magnitudes(o.input, mx.is_some()))?;
    clock.mark("calibration");
    pr.spent = [0.0; 3];
    let (mut forest, grid_launches) = grid_round(&mut pr)?;
    forest = match forest {
        Some(f) => Some(predict::link_neighbours(&mut pr, f)?),
        None => predict::stride_round(&mut pr)?,
    };
    let tasks = fprev_rounds(&mut pr, forest)?;
    let shape = recovered_shape(&tasks, kl)?;
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
    let (disagreements, disagreement_count) = check_answers(&shape, &pr.tallies, &pr.windows, kl);
    clock.mark("answers checked against the tree");
    // a tree every answer agrees with: do the answers depend on the data?
    let repeats = if disagreement_count == 0 {
        let r = pr.repeat(&shape)?;
        clock.mark("probes repeated with other values");
        if r.changed_count > 0 {
            return Err(RevealError::DataDependent(Box::new(r)));
        }
        r
    } else {
        Repeats::default()
    };
    let t = &pr.tallies;
    let (probes, checked, distinct_probes) = (t.answers as usize, t.answers as usize, t.distinct());
    // the order: shape-matching candidates told apart by their bytes
    let inputs = if mx.is_some() {
        Inputs::Mx
    } else {
        Inputs::of_type(o.input)
    };
    let family = candidates::family(inputs, o.k);
    let (shape_matches, closest) = match_shapes(&family, &shape, o.k, mx.is_some());
    clock.mark("shape matched against the candidates");
    // an order is named only for a tree every answer agrees with
    let verified = if shape_matches.is_empty() || disagreement_count > 0 {
        Verified::default()
    } else {
        let v = verify_matches(&mut pr, mx, &shape_matches, &mut clock)?;
        clock.mark("identify among the shape matches");
        v
    };
    Ok(Revealed {
        m: o.m,
        k: o.k,
        n: o.n,
        input: o.input,
        mx,
        scheme: pr.scheme,
        window: pr.window,
        launches: pr.launches,
        grid_launches,
        probes,
        distinct_probes,
        shape,
        checked,
        disagreements,
        disagreement_count,
        shape_matches,
        closest,
        order: verified.order,
        equivalent: verified.equivalent,
        same_parts: verified
            .order
            .map_or_else(Vec::new, |n| candidates::same_parts(&n, o.k)),
        verified_elements: verified.elements,
        repeats,
        timings: clock.finish(),
    })
}

/// The window size, calibrated with the first of `layouts` (the prober's
/// own) whose unit counts come back exact; a layout whose calibration
/// finds the subject inconsistent gives way to the next, and the last
/// one's error is the answer (f16: lines, then the diagonal, for a subject
/// that flushes subnormals).
fn calibrate(pr: &mut Prober, layouts: &[Magnitudes]) -> Result<usize, RevealError> {
    let mut tried = pr.calibrate();
    for v in &layouts[1..] {
        if !matches!(tried, Err(RevealError::Inconsistent(_))) {
            break;
        }
        (pr.lo, pr.hi, pr.other, pr.scheme) = (v.lo, v.hi, v.other, v.scheme);
        tried = pr.calibrate();
    }
    tried
}

/// A prober for `o` (MX inputs of `mx`: the leaves are K's blocks), before
/// calibration (its window is every leaf).
fn new_prober(subject: &dyn Subject, o: RevealOptions, mx: Option<MxFormat>) -> Result<Prober<'_>, RevealError> {
    let codes =
        match mx {
            None => None,
            Some(f) => Some(MxCodes::of(f).ok_or_else(|| {
                RevealError::Options(format!("MX format {}: +1, -1 and 0 are not all codes", f.name()))
            })?),
        };
    let kl = if mx.is_some() { o.k / MX_BLOCK } else { o.k };
    let v = magnitudes(o.input, mx.is_some())[0];
    Ok(Prober {
        subject,
        o,
        mx: codes,
        kl,
        lo: v.lo,
        hi: v.hi,
        other: v.other,
        scheme: v.scheme,
        window: kl,
        launches: 0,
        tallies: Tallies::default(),
        windows: Windows::default(),
        spent: [0.0; 3],
        buffers: prober::kept_buffers(),
        lines_held: None,
        two_exact: None,
    })
}

/// The grid round (`grid.rs`) where the probe values fit it and it takes
/// fewer launches than lines: the first two windows, then the others only
/// if the second one's answers realized nodes (at most a quarter of its
/// leaves left in separate components: a chain's prefix reaches into it,
/// an interleaved tree's lanes do not); the forest of every tallied
/// answer, and the grid launches run.
fn grid_round(pr: &mut Prober) -> Result<(Option<Forest>, usize), RevealError> {
    let windows = match grid::plan(pr.kl, pr.o.m, pr.o.n) {
        Some(w) if pr.grid_fits() => w,
        _ => return Ok((None, 0)),
    };
    let before = pr.launches;
    let scout = windows.len().min(2);
    pr.measure_grid(&windows[..scout])?;
    let last = &windows[scout - 1];
    let leaves = last.rows.iter().chain(&last.cols).copied();
    if Forest::of(&pr.tallies, pr.kl).components(leaves) * 4 > last.rows.len() + last.cols.len() {
        return Ok((None, pr.launches - before));
    }
    pr.measure_grid(&windows[scout..])?;
    Ok((Some(Forest::of(&pr.tallies, pr.kl)), pr.launches - before))
}

/// Where a leaf's `L` with its task's first leaf comes from.
enum Source {
    Known(u32),
    /// The index of the pair asked.
    Asked(usize),
}

/// FPRev's recursion, one level per round: each task's leaves are grouped
/// by the L their pair with the task's first leaf measures; every group of
/// two or more becomes a task of the next round. With a grid forest, `L`
/// inside the first leaf's component is the forest's, and a component
/// elsewhere is asked once, through its representative (every leaf of a
/// node that does not hold f has the same ancestor with f), or not at all
/// when an answer for that pair is already tallied. After each level
/// (exact counts), the translation round (`predict.rs`) adds the nodes
/// of shifted copies it proves inside that level's tasks to the forest.
fn fprev_rounds(pr: &mut Prober, mut forest: Option<Forest>) -> Result<Vec<Task>, RevealError> {
    let kl = pr.kl;
    let mut tasks = vec![Task {
        set: (0..kl as u32).collect(),
        hangs: None,
        groups: vec![],
    }];
    let mut frontier = vec![0usize];
    let windowed = pr.window < kl;
    let mut row = vec![0u32; kl];
    // the tasks whose groups the last level found
    let mut grouped: Vec<usize> = Vec::new();
    while !frontier.is_empty() {
        if !grouped.is_empty() && !windowed {
            let sets: Vec<predict::GroupsOf> = grouped
                .iter()
                .map(|&t| {
                    (
                        tasks[t].set[0],
                        tasks[t].groups.iter().map(|g| (g.0, g.1.as_slice())).collect(),
                    )
                })
                .collect();
            if let Some(f) = predict::translate_round(pr, &sets, forest.as_mut())? {
                forest = Some(f);
            }
        }
        grouped = frontier.clone();
        if windowed {
            let sets: Vec<rank::LevelSet> = frontier
                .iter()
                .map(|&t| rank::LevelSet {
                    first: tasks[t].set[0],
                    rest: &tasks[t].set[1..],
                    hangs: tasks[t].hangs,
                })
                .collect();
            let ls: Vec<u32> = rank::rank_level(pr, &sets)?.concat();
            frontier = next_level(&mut tasks, &frontier, &ls);
            continue;
        }
        let mut asks: Vec<(u32, u32)> = Vec::new();
        // per ask, its task's (parent's first leaf, size it hangs at, leaves)
        let mut owners: Vec<(u32, u32, usize)> = Vec::new();
        let mut sources: Vec<Source> = Vec::new();
        for &t in &frontier {
            let s = &tasks[t].set;
            let f = s[0];
            let owner = tasks[t].hangs.map_or((u32::MAX, 0, s.len()), |h| (h.0, h.1, s.len()));
            let Some(fo) = forest.as_mut() else {
                for &x in &s[1..] {
                    sources.push(Source::Asked(asks.len()));
                    asks.push((f, x));
                    owners.push(owner);
                }
                continue;
            };
            // the set's leaves meet f no higher than the ancestor the set
            // hangs from (its L with the parent set's first leaf)
            let limit = tasks[t].hangs.map_or(u32::MAX, |h| h.1);
            let mut touched = Vec::new();
            fo.row(f, limit, &mut row, &mut touched);
            let mut by_rep: HashMap<u32, usize> = HashMap::default();
            for &x in &s[1..] {
                if row[x as usize] != 0 {
                    sources.push(Source::Known(row[x as usize]));
                    continue;
                }
                let r = fo.find(x);
                let t = &pr.tallies;
                match t.pair_value(f, r) {
                    Some(v) => sources.push(Source::Known(v)),
                    None => {
                        let i = *by_rep.entry(r).or_insert_with(|| {
                            asks.push((f, r));
                            owners.push(owner);
                            asks.len() - 1
                        });
                        sources.push(Source::Asked(i));
                    }
                }
            }
            for x in touched {
                row[x as usize] = 0;
            }
        }
        let keys: Vec<Key> = asks.iter().map(|&(p, q)| (p, q, NO_WINDOW)).collect();
        let asked = two::measure_level(pr, &keys, &owners)?;
        let ls: Vec<u32> = sources
            .iter()
            .map(|s| match s {
                Source::Known(v) => *v,
                Source::Asked(i) => asked[*i],
            })
            .collect();
        frontier = next_level(&mut tasks, &frontier, &ls);
    }
    Ok(tasks)
}

/// Groups each frontier task's leaves by `ls` (their `L` with its first
/// leaf, task by task in frontier order); every group of two or more
/// becomes a task of the next level, whose indices are returned.
fn next_level(tasks: &mut Vec<Task>, frontier: &[usize], ls: &[u32]) -> Vec<usize> {
    let mut next = Vec::new();
    let mut at = 0;
    for &t in frontier {
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
                tasks.push(Task {
                    set: g.1.clone(),
                    hangs: Some((first, g.0)),
                    groups: vec![],
                });
                g.2 = Some(tasks.len() - 1);
                next.push(tasks.len() - 1);
            }
        }
        tasks[t].groups = groups;
    }
    next
}

/// The tree the rounds' tasks assemble to; Err when it does not hold all
/// `kl` leaves.
fn recovered_shape(tasks: &[Task], kl: usize) -> Result<Shape, RevealError> {
    let mut nodes = Vec::new();
    let root = match assemble(tasks, 0, &mut nodes)? {
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
    Ok(Shape {
        k: kl,
        nodes,
        root: Some(root),
    })
}

/// What the verification launch told apart: the first order every
/// compared element agrees with, the others that agree too, and how many
/// elements were compared.
#[derive(Default)]
struct Verified {
    order: Option<Order>,
    equivalent: Vec<Order>,
    elements: usize,
}

/// The verification launch (random inputs in the compared rows and
/// columns) and the shape matches identified on its bytes.
fn verify_matches(
    pr: &mut Prober,
    mx: Option<MxFormat>,
    shape_matches: &[Order],
    clock: &mut Clock,
) -> Result<Verified, RevealError> {
    let o = pr.o;
    let rows: Vec<usize> = (0..o.m.min(o.verify_rows.max(1))).collect();
    let cols = verify_columns(o.n);
    let cands: Vec<candidates::Candidate> = shape_matches
        .iter()
        .map(|&order| candidates::Candidate {
            order,
            source: candidates::Source::Family,
        })
        .collect();
    let (ids, elements) = match mx {
        None => verify_f32(pr, &rows, &cols, &cands, clock)?,
        Some(f) => verify_mx(pr, f, &rows, &cols, &cands, clock)?,
    };
    let mut common: Vec<Order> = ids[0].matches.clone();
    for id in &ids[1..] {
        common.retain(|x| id.matches.contains(x));
    }
    let mut v = Verified {
        elements,
        ..Verified::default()
    };
    if let Some((first, rest)) = common.split_first() {
        v.order = Some(*first);
        v.equivalent = rest.to_vec();
    }
    Ok(v)
}

/// Elements `rows` x `cols` of an output of `n` columns, row by row.
fn pick(out: &[f32], rows: &[usize], cols: &[usize], n: usize) -> Vec<f32> {
    rows.iter()
        .flat_map(|&r| cols.iter().map(move |&j| out[r * n + j]))
        .collect()
}

/// [`verify_matches`] on f32 inputs: random values in the compared rows of
/// A and columns of B, zeros elsewhere; the candidates run on the compared
/// columns only.
fn verify_f32(
    pr: &mut Prober,
    rows: &[usize],
    cols: &[usize],
    cands: &[candidates::Candidate],
    clock: &mut Clock,
) -> Result<(Vec<RowIdentity>, usize), RevealError> {
    let o = pr.o;
    let c = cols.len();
    // A and B in the probe launches' buffers (already mapped: a fresh
    // 64 MiB buffer is zeroed by the kernel page by page as it is written)
    pr.lines_held = None;
    let mut a = std::mem::take(&mut pr.buffers.0);
    prober::refill(&mut a, o.m * o.k, 0.0);
    a[..rows.len() * o.k].copy_from_slice(&random_values(o.input, rows.len() * o.k, o.seed ^ 0xA11CE));
    let bc = random_values(o.input, o.k * c, o.seed ^ 0xB0B);
    let mut b = std::mem::take(&mut pr.buffers.1);
    {
        use rayon::prelude::*;
        b.truncate(o.k * o.n);
        b.resize(o.k * o.n, 0.0);
        // every element written once, rows in parallel
        b.par_chunks_mut(o.n).zip(bc.par_chunks(c)).for_each(|(row, vals)| {
            row.fill(0.0);
            for (&j, &v) in cols.iter().zip(vals) {
                row[j] = v;
            }
        });
    }
    let p = Problem {
        a: Matrix::F32(&a),
        b: Matrix::F32(&b),
        m: o.m,
        n: o.n,
        k: o.k,
        b_layout: BLayout::Kn,
    };
    let ran = verification_launch(pr, &p);
    pr.buffers.1 = b;
    let sub = Problem {
        a: Matrix::F32(&a),
        b: Matrix::F32(&bc),
        m: o.m,
        n: c,
        k: o.k,
        b_layout: BLayout::Kn,
    };
    let observed = pick(&ran?, rows, cols, o.n);
    clock.mark("verification launch");
    let ids = identify(&sub, rows, &observed, cands, IdentifyOptions::default()).map_err(RevealError::Inconsistent);
    pr.buffers.0 = a;
    Ok((ids?, observed.len()))
}

/// [`verify_matches`] on MX inputs of `f`: random codes and scales; the
/// candidates run on the compared columns only.
fn verify_mx(
    pr: &mut Prober,
    f: MxFormat,
    rows: &[usize],
    cols: &[usize],
    cands: &[candidates::Candidate],
    clock: &mut Clock,
) -> Result<(Vec<RowIdentity>, usize), RevealError> {
    let o = pr.o;
    let c = cols.len();
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
    let observed = pick(&verification_launch(pr, &p)?, rows, cols, o.n);
    clock.mark("verification launch");
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
    let ids = identify(&sub, rows, &observed, cands, IdentifyOptions::default()).map_err(RevealError::Inconsistent)?;
    Ok((ids, observed.len()))
}

#[cfg(test)]
mod tests {
    use super::verify::{order_shape, shape_key};
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

    /// Every answer counts: grid cells like probes on lines, and the
    /// differing answers beyond those kept (`MAX_DEVIANT`) too; the list
    /// holds the first 16 by position.
    #[test]
    fn every_disagreeing_answer_is_counted() {
        let kl = 8;
        let fma: Order = "fma".parse().unwrap();
        // a chain: L(p, q) = max(p, q) + 1
        let shape = order_shape(&fma, kl, false);
        let mut t = Tallies::default();
        let g = t.add_grid(&[0, 2], &[1, 3]);
        // (0, 1), (0, 3), (2, 1) as the chain says; (2, 3) gives 5, not 4
        for (i, l) in [2, 4, 3, 5].into_iter().enumerate() {
            t.add_cell(g, i, l, 1, keys::at(0, i / 2, i % 2));
        }
        // a cell answered again, differently: (0, 3) gives 9, twice; and
        // the wrong (2, 3) again the same (two wrong answers)
        t.add_cell(g, 1, 9, 1, keys::at(0, 2, 1));
        t.add_cell(g, 1, 9, 1, keys::at(0, 4, 1));
        t.add_cell(g, 3, 5, 1, keys::at(0, 3, 1));
        // a probe on lines: right first, then more differing answers than kept
        let extra = tally::MAX_DEVIANT + 10;
        t.add((4, 6, NO_WINDOW), 7, 1, keys::at(1, 0, 0));
        for v in 0..extra {
            t.add((4, 6, NO_WINDOW), 100 + v as u32, 1, keys::at(2, 0, v));
        }
        assert_eq!(t.overflow, 11);
        assert_eq!(t.answers as usize, 4 + 3 + 1 + extra);
        assert_eq!(t.distinct(), 5);
        let (list, count) = check_answers(&shape, &t, &Windows::default(), kl);
        assert_eq!(count, 2 + 2 + extra);
        assert_eq!(list.len(), 16);
        let cell = Disagreement {
            launch: 0,
            row: 1,
            col: 1,
            p: 2,
            q: 3,
            expected: 4,
            measured: 5,
        };
        assert_eq!(list[0], cell);
        let again = Disagreement {
            row: 2,
            p: 0,
            expected: 4,
            measured: 9,
            ..cell
        };
        assert_eq!(list[1], again);
        assert!(list[2..]
            .iter()
            .all(|d| (d.launch, d.p, d.q, d.expected) == (2, 4, 6, 7)));
    }
}
