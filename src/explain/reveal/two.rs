//! Two probes on one line (docs/EXPLAIN.md, "Two probes a line"): where
//! counts are exact on f32 inputs, a line of a launch answers an *inner*
//! probe and an *outer* one, so a GEMV answers up to 2N pairs a launch.
//!
//! Every term of the line is `2^12 + 1` (a heavy unit [`HEAVY`] and a
//! light unit 1) except four: `+-`[`INNER`] at the inner pair p1, q1 and
//! `+`[`OUTER`] at p2, `-OUTER + HEAVY` at q2. With A1 and A2 the lowest
//! common ancestors of the pairs, and binary f32 additions rounding to
//! nearest:
//!
//! - a sum that holds one of `+-INNER` is that value (everything else is
//!   below half its ulp, 2^46), so A1 gives 0 and every unit under A1 is
//!   lost; so are the outer pair's values when A1 holds p2 or q2;
//! - a sum that holds one of `+-OUTER` (and not A1's other) lies in
//!   `[2^35, 2^36)` in magnitude, where the ulp is [`HEAVY`]: the heavy
//!   units added to it are kept exactly, the light part of each subtree
//!   added to it is rounded to a multiple of `HEAVY` (lost below 2,048
//!   units, one heavy unit more, a *carry*, from 2,048 on); A2 gives
//!   `HEAVY` (q2's marker) plus the heavy units under it;
//! - every other sum is a whole number below 2^24, exact.
//!
//! So the output is, with h the units outside A1 and l the units outside
//! A1 and A2 (both at most K - 4):
//!
//! - A1 holds one of p2, q2: at least 2^35 in magnitude ([`Reading::Unread`]);
//! - A1 holds both: `(2^12 + 1) l`, high part equal to low ([`Reading::Inner`]);
//! - A1 holds neither: `2^12 (h + 1 + carry) + l` with `l <= h`, so the high
//!   part exceeds the low. Then `L(p1, q1) = K - 2 - h`, and `|A1 u A2| =
//!   K - l` ([`Reading::Both`]): A2's own size is that union when A2 holds
//!   A1 (nested) and the union less `L(p1, q1)` when the two are apart,
//!   which one the line cannot tell ([`settle`] proves it from other
//!   answers). A carry needs a subtree of 2,048 units or more under A2 and
//!   outside A1; a reading whose sizes leave room for one is unread.
//!
//! Every answer an unread line or an unproven outer probe leaves is asked
//! again alone, on lines of one probe.

use super::error::RevealError;
use super::grid::Forest;
use super::keys::{at, At, Key};
use super::prober::{refill, Prober};
use super::tally::Tallies;

/// The heavy unit: the ulp of the outer pair's sums. Counts of up to
/// `HEAVY` units fit below it, so lines of two probes need K <= `HEAVY`.
pub(super) const HEAVY: f32 = 4096.0;

/// Every term but the probes' four: a heavy and a light unit.
const TERM: f32 = HEAVY + 1.0;

/// The outer pair's value: 1.5 * 2^35, so that it plus or minus any sum of
/// terms (below 2^24) stays in `[2^35, 2^36)`, whose ulp is `HEAVY`.
const OUTER: f32 = 1.5 * HEAVY * (1u32 << 23) as f32;

/// The inner pair's value, 1.5 * 2^70: its ulp (2^47) is more than twice
/// the outer value plus every term, so a sum that holds it is it.
const INNER: f32 = OUTER * (1u64 << 35) as f32;

/// The units a carry needs in one subtree: half of `HEAVY`.
const CARRY: u32 = HEAVY as u32 / 2;

/// What one line of a launch of [`Prober::measure_two`] holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Line {
    /// One probe, as lines hold it ([`Prober::measure_lines`]).
    One(Key),
    /// An inner and an outer probe (their four leaves distinct).
    Two(Key, Key),
}

/// What the output of a line of two probes says (module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reading {
    /// `L(p1, q1)` and the size of `A1 u A2`.
    Both { inner: u32, union: u32 },
    /// `L(p1, q1)`; A1 holds the outer pair (whose `L` is not read).
    Inner(u32),
    /// Neither probe's answer can be read from it.
    Unread,
}

/// Reads the output `v` of a line of two probes over `kl` leaves
/// (module doc): an `Inner` or `Both` reading only where the value is the
/// one that case gives and no other.
pub(super) fn read_two(v: f32, kl: u32) -> Reading {
    if !(0.0..(1u32 << 24) as f32).contains(&v) || v.fract() != 0.0 || kl > HEAVY as u32 || kl < 4 {
        return Reading::Unread;
    }
    let c = v as u32;
    let (high, low) = (c >> 12, c & 0xFFF);
    let units = kl - 4;
    if low > units {
        return Reading::Unread;
    }
    if high == low {
        return Reading::Inner(kl - low);
    }
    // no carry: h = high - 1
    let Some(h) = high.checked_sub(1).filter(|&h| h <= units) else {
        return Reading::Unread;
    };
    let (inner, union) = (kl - 2 - h, kl - low);
    // (the high part at most the low: no case gives it)
    if union < inner + 2 {
        return Reading::Unread;
    }
    // a carry would mean h one less, L(p1, q1) one more, and a subtree of
    // at least CARRY units under A2 and outside A1 (of union - L - 2)
    if (union - 2).checked_sub(inner + 1).is_some_and(|u| u >= CARRY) {
        return Reading::Unread;
    }
    Reading::Both { inner, union }
}

/// The outer probe of a line read as [`Reading::Both`], waiting for
/// [`settle`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Waiting {
    pub(super) inner: Key,
    pub(super) outer: Key,
    /// `L(p1, q1)`.
    pub(super) inner_l: u32,
    /// The size of `A1 u A2`.
    pub(super) union: u32,
    /// How many positions answered, and where the first sat.
    pub(super) count: u64,
    pub(super) at: At,
    /// A proven `L` of a leaf of the inner pair and one of the outer pair,
    /// where the caller knows one ([`measure_level`]).
    pub(super) known: Option<u32>,
}

/// Tallies each waiting outer probe whose nesting the answers prove, and
/// returns the forest of every tallied answer and the probes still open.
/// A node that holds a leaf of each pair (x of p1, q1; y of p2, q2) and is
/// smaller than the union proves A2 holds A1 (apart, any such node holds
/// both ancestors): `L(p2, q2)` is the union. One larger than the union
/// (`L(x, y)`) proves them apart (nested, A2 holds every such pair): the
/// union less `L(p1, q1)`. Repeated while a pass tallies something (an
/// outer probe's answer can prove another's).
pub(super) fn settle(t: &mut Tallies, kl: usize, mut waiting: Vec<Waiting>) -> (Forest, Vec<Waiting>) {
    loop {
        let mut forest = Forest::of(t, kl);
        let mut open = Vec::new();
        let mut tallied = false;
        for w in waiting {
            let (mut nested, mut apart) = (false, false);
            if let Some(l) = w.known {
                nested |= l < w.union;
                apart |= l > w.union;
            }
            for x in [w.inner.0, w.inner.1] {
                for y in [w.outer.0, w.outer.1] {
                    if let Some(l) = t.pair_value(x, y) {
                        nested |= l < w.union;
                        apart |= l > w.union;
                    }
                    nested |= forest.joined(x, y) && forest.size(x) < w.union;
                }
            }
            let value = match (nested, apart) {
                (true, false) => w.union,
                (false, true) => w.union - w.inner_l,
                // unproven, or answers that contradict each other (asked
                // again alone, where the check of every answer shows them)
                _ => {
                    open.push(w);
                    continue;
                }
            };
            t.add(w.outer, value, w.count, w.at);
            tallied = true;
        }
        if !tallied {
            return (forest, open);
        }
        waiting = open;
    }
}

/// The answers (tallied values, in order) of one level of FPRev's
/// recursion, `keys[i]` asked by a task of `owners[i]` = (the first leaf
/// of the task it came from, the size of the ancestor it hangs from, its
/// number of leaves). Where lines of two probes fit, keys of two tasks of
/// one parent that hang at different sizes share a line, the larger
/// task's inner: their groups are disjoint subtrees, and the first leaves
/// of the two tasks meet at the larger of the sizes (the parent's first
/// leaf meets each at its own), which in a tree of binary nodes exceeds
/// the two ancestors' union (that ancestor holds both groups and the
/// parent's first leaf), so they are proven apart ([`settle`]). Keys left
/// on their own, unread or unproven are asked alone. Keys that fit one
/// launch of one probe a line are asked so (two a line could only add a
/// launch for those asked again).
pub(super) fn measure_level(
    pr: &mut Prober,
    keys: &[Key],
    owners: &[(u32, u32, usize)],
) -> Result<Vec<u32>, RevealError> {
    if !pr.takes_two() || keys.len() <= pr.slots() {
        return pr.measure(keys);
    }
    // by parent, then by the size the task hangs at
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| (owners[i].0, owners[i].1, i));
    let mut lines: Vec<Line> = Vec::with_capacity(keys.len());
    // the proven L of each line's leaves, by its outer key
    let mut known: rustc_hash::FxHashMap<Key, u32> = Default::default();
    let mut start = 0;
    while start < order.len() {
        let parent = owners[order[start]].0;
        let end = start + order[start..].iter().take_while(|&&i| owners[i].0 == parent).count();
        // the lowest-hanging keys with the highest-hanging ones, while
        // they hang at different sizes
        let (mut lo, mut hi) = (start, end);
        while lo < hi {
            let a = order[lo];
            if lo + 1 < hi && owners[a].1 < owners[order[hi - 1]].1 {
                let b = order[hi - 1];
                let (inner, outer) = if owners[a].2 >= owners[b].2 { (a, b) } else { (b, a) };
                lines.push(Line::Two(keys[inner], keys[outer]));
                known.insert(keys[outer], owners[a].1.max(owners[b].1));
                hi -= 1;
            } else {
                lines.push(Line::One(keys[a]));
            }
            lo += 1;
        }
        start = end;
    }
    if !lines.iter().any(|l| matches!(l, Line::Two(..))) {
        return pr.measure(keys);
    }
    let (mut waiting, mut again) = pr.measure_two(&lines)?;
    for w in &mut waiting {
        w.known = known.get(&w.outer).copied();
    }
    let (_, open) = settle(&mut pr.tallies, pr.kl, waiting);
    again.extend(open.iter().map(|w| w.outer));
    if !again.is_empty() {
        pr.measure(&again)?;
    }
    let missing = || RevealError::Inconsistent("a probe was not placed".into());
    keys.iter().map(|k| pr.tallies.value(k).ok_or_else(missing)).collect()
}

impl Prober<'_> {
    /// Whether lines of two probes fit: lines of exact counts with units
    /// of 1 on f32 inputs (every term `2^12 + 1` exact), at most `HEAVY`
    /// leaves, and no launch of them seen to round their outputs.
    pub(super) fn takes_two(&self) -> bool {
        self.scheme == super::options::Scheme::Lines
            && self.mx.is_none()
            && self.o.input == crate::order::InType::F32
            && self.lo == 1.0
            && self.other == 1.0
            && self.window == self.kl
            && (4..=HEAVY as usize).contains(&self.kl)
            && self.o.m.max(self.o.n) >= 2
            && self.two_exact != Some(false)
    }

    /// Launches of `lines` (along the longer of rows and columns, the
    /// other operand all ones; lines beyond them repeat them). The first
    /// such launch of a reveal also holds a check line: the largest odd
    /// number of terms `2^12 + 1` at most K - 4 (24 significant bits, as
    /// the largest outputs of two probes), which an output or accumulator
    /// narrower than f32 rounds; if it does, no line of two probes is read
    /// and lines of two are not used again. One probe's answers are
    /// tallied as on lines of one; an inner probe's `L` where it is read;
    /// the outer probes read as [`Reading::Both`] are returned to
    /// [`settle`], with every probe left unread (or on a line whose
    /// positions disagree) to be asked again alone.
    pub(super) fn measure_two(&mut self, lines: &[Line]) -> Result<(Vec<Waiting>, Vec<Key>), RevealError> {
        let keys: Vec<Key> = lines
            .iter()
            .flat_map(|l| match *l {
                Line::One(k) => vec![k],
                Line::Two(a, b) => vec![a, b],
            })
            .collect();
        self.room_for(&keys)?;
        let (m, kl, n) = (self.o.m, self.kl, self.o.n);
        let cols = n >= m;
        let slots = if cols { n } else { m };
        // a check line first where no launch has checked the width
        let check = self.two_exact.is_none().then(|| {
            let c = (kl - 4) as u32;
            c - 1 + (c & 1)
        });
        let mut content: Vec<Option<Line>> = Vec::with_capacity(lines.len() + 1);
        if check.is_some() {
            content.push(None);
        }
        content.extend(lines.iter().map(|&l| Some(l)));
        let chunks: Vec<&[Option<Line>]> = content.chunks(slots).collect();
        let (lo, hi) = (self.lo, self.hi);
        // per launch, per line: the first answer, where it sat, how many
        // positions answered, whether they all agree
        let mut seen: Vec<Vec<(f32, At, u64, bool)>> = vec![Vec::new(); chunks.len()];
        self.launch_all(
            chunks.len(),
            |li, a, b| {
                let chunk = chunks[li];
                let (line_op, other_op) = if cols { (&mut *b, &mut *a) } else { (&mut *a, &mut *b) };
                let (line_len, other_len) = if cols { (kl * n, m * kl) } else { (m * kl, kl * n) };
                refill(other_op, other_len, 1.0);
                // every term of line l but its probes' (and the check
                // line's past its count): written row by row of B (a
                // column at a time is a strided write per term)
                let base: Vec<f32> = (0..slots)
                    .map(|l| match chunk[l % chunk.len()] {
                        Some(Line::One(_)) => lo,
                        None | Some(Line::Two(..)) => TERM,
                    })
                    .collect();
                line_op.truncate(line_len);
                line_op.resize(line_len, 0.0);
                if cols {
                    use rayon::prelude::*;
                    line_op.par_chunks_mut(n).for_each(|row| row.copy_from_slice(&base));
                } else {
                    for (line, &v) in line_op.chunks_mut(kl).zip(&base) {
                        line.fill(v);
                    }
                }
                let (stride, step) = if cols { (n, 1) } else { (1, kl) };
                for l in 0..slots {
                    let mut put = |x: u32, v: f32| line_op[x as usize * stride + l * step] = v;
                    match chunk[l % chunk.len()] {
                        None => (check.unwrap_or(0)..kl as u32).for_each(|x| put(x, 0.0)),
                        Some(Line::One((p, q, _))) => {
                            put(p, hi);
                            put(q, -hi);
                        }
                        Some(Line::Two((p1, q1, _), (p2, q2, _))) => {
                            put(p1, INNER);
                            put(q1, -INNER);
                            put(p2, OUTER);
                            put(q2, -OUTER + HEAVY);
                        }
                    }
                }
            },
            |_, id, li, out| {
                let used = chunks[li].len();
                let mut lines: Vec<Option<(f32, At, u64, bool)>> = vec![None; used];
                for i in 0..m {
                    for (j, &v) in out[i * n..(i + 1) * n].iter().enumerate() {
                        let s = if cols { j } else { i } % used;
                        match &mut lines[s] {
                            None => lines[s] = Some((v, at(id, i, j), 1, true)),
                            Some(e) => {
                                e.2 += 1;
                                e.3 &= e.0.to_bits() == v.to_bits();
                            }
                        }
                    }
                }
                seen[li] = lines
                    .into_iter()
                    .map(|e| e.expect("every line has a position"))
                    .collect();
                Ok(())
            },
        )?;
        if let Some(c) = check {
            let (v, _, _, same) = seen[0][0];
            self.two_exact = Some(same && v == TERM * c as f32);
        }
        let two = self.two_exact == Some(true);
        let ct = self.counter();
        let (mut waiting, mut again) = (Vec::new(), Vec::new());
        for (chunk, seen) in chunks.iter().zip(&seen) {
            for (line, &(v, at, count, same)) in chunk.iter().zip(seen) {
                match *line {
                    None => {}
                    Some(Line::One(k)) => match ct.count(v).filter(|&c| same && c <= kl as u32 - 2) {
                        Some(c) => self.tallies.add(k, kl as u32 - c, count, at),
                        None => again.push(k),
                    },
                    Some(Line::Two(inner, outer)) => match (two && same).then(|| read_two(v, kl as u32)) {
                        Some(Reading::Both { inner: inner_l, union }) => {
                            self.tallies.add(inner, inner_l, count, at);
                            waiting.push(Waiting {
                                inner,
                                outer,
                                inner_l,
                                union,
                                count,
                                at,
                                known: None,
                            });
                        }
                        Some(Reading::Inner(l)) => {
                            self.tallies.add(inner, l, count, at);
                            again.push(outer);
                        }
                        _ => again.extend([inner, outer]),
                    },
                }
            }
        }
        Ok((waiting, again))
    }
}

#[cfg(test)]
mod tests {
    use super::super::keys::NO_WINDOW;
    use super::*;

    /// The f32 sum of `terms` over a binary tree (children lists by node,
    /// leaves `0..terms.len()`, nodes after them; the root last).
    fn sum(terms: &[f32], kids: &[(usize, usize)], node: usize) -> f32 {
        if node < terms.len() {
            return terms[node];
        }
        let (a, b) = kids[node - terms.len()];
        sum(terms, kids, a) + sum(terms, kids, b)
    }

    /// A random binary tree over `kl` leaves (random merges of two of the
    /// current roots, some runs of a chain), its merges in order.
    fn random_tree(kl: usize, r: &mut crate::rng::SplitMix64) -> Vec<(usize, usize)> {
        let mut roots: Vec<usize> = (0..kl).collect();
        let mut kids = Vec::new();
        while roots.len() > 1 {
            let i = r.range_i64(0, roots.len() as i64 - 1) as usize;
            // neighbours half the time (chains and contiguous parts)
            let j = if r.next_u32() & 1 == 0 && i + 1 < roots.len() {
                i + 1
            } else {
                loop {
                    let j = r.range_i64(0, roots.len() as i64 - 1) as usize;
                    if j != i {
                        break j;
                    }
                }
            };
            let (a, b) = (roots[i], roots[j]);
            kids.push((a, b));
            let node = kl + kids.len() - 1;
            roots[i.min(j)] = node;
            roots.remove(i.max(j));
        }
        kids
    }

    /// Leaf sets of every node (bit sets).
    fn leaf_sets(kl: usize, kids: &[(usize, usize)]) -> Vec<Vec<bool>> {
        let mut sets: Vec<Vec<bool>> = (0..kl).map(|x| (0..kl).map(|y| y == x).collect()).collect();
        for &(a, b) in kids {
            let s = sets[a].iter().zip(&sets[b]).map(|(x, y)| *x || *y).collect();
            sets.push(s);
        }
        sets
    }

    fn lca(sets: &[Vec<bool>], x: usize, y: usize) -> usize {
        (0..sets.len())
            .find(|&v| sets[v][x] && sets[v][y])
            .expect("the root holds both")
    }

    /// On random trees (K = 64 and K = 4096, where carries can happen),
    /// every reading of a line of two probes is the true answer: `Inner`
    /// exactly when A1 holds both outer leaves, `Both` with L(p1, q1) and
    /// the union's size, and a line A1 cuts (one outer leaf under it)
    /// unread. Each kind of reading occurs.
    #[test]
    fn a_reading_is_the_trees_answer() {
        let mut r = crate::rng::SplitMix64::new(26);
        let mut kinds = [0usize; 3];
        for (kl, trees, quads) in [(64usize, 40, 200), (4096, 3, 300)] {
            for _ in 0..trees {
                let kids = random_tree(kl, &mut r);
                let sets = leaf_sets(kl, &kids);
                let size = |v: usize| sets[v].iter().filter(|&&b| b).count() as u32;
                let root = sets.len() - 1;
                for _ in 0..quads {
                    let mut four = [0usize; 4];
                    for i in 0..4 {
                        four[i] = loop {
                            let x = r.range_i64(0, kl as i64 - 1) as usize;
                            if !four[..i].contains(&x) {
                                break x;
                            }
                        };
                    }
                    let [p1, q1, p2, q2] = four;
                    let mut terms = vec![TERM; kl];
                    terms[p1] = INNER;
                    terms[q1] = -INNER;
                    terms[p2] = OUTER;
                    terms[q2] = -OUTER + HEAVY;
                    let v = sum(&terms, &kids, root);
                    let (a1, a2) = (lca(&sets, p1, q1), lca(&sets, p2, q2));
                    let got = read_two(v, kl as u32);
                    match (sets[a1][p2], sets[a1][q2]) {
                        (true, true) => {
                            assert_eq!(got, Reading::Inner(size(a1)));
                            kinds[1] += 1;
                        }
                        (false, false) => {
                            let union = (0..kl).filter(|&x| sets[a1][x] || sets[a2][x]).count() as u32;
                            match got {
                                Reading::Both { inner, union: u } => {
                                    assert_eq!((inner, u), (size(a1), union), "{v}");
                                    kinds[0] += 1;
                                }
                                Reading::Unread => assert!(union - size(a1) - 2 >= CARRY, "{v}"),
                                other => panic!("{other:?} for {v}"),
                            }
                        }
                        _ => {
                            assert_eq!(got, Reading::Unread, "{v}");
                            kinds[2] += 1;
                        }
                    }
                }
            }
        }
        assert!(kinds.iter().all(|&k| k > 0), "{kinds:?}");
    }

    fn waiting(inner: (u32, u32), outer: (u32, u32), inner_l: u32, union: u32, known: Option<u32>) -> Waiting {
        Waiting {
            inner: (inner.0, inner.1, NO_WINDOW),
            outer: (outer.0, outer.1, NO_WINDOW),
            inner_l,
            union,
            count: 1,
            at: (0, 0, 0),
            known,
        }
    }

    fn answered(pairs: &[(u32, u32, u32)]) -> Tallies {
        let mut t = Tallies::default();
        for &(p, q, l) in pairs {
            t.add((p, q, NO_WINDOW), l, 1, (0, 0, 0));
        }
        t
    }

    /// `settle` tallies an outer probe exactly where other answers prove
    /// its ancestor nested with or apart from the inner one, and leaves
    /// every other open.
    #[test]
    fn settle_tallies_only_what_other_answers_prove() {
        let outer = |t: &Tallies, p: u32, q: u32| t.value(&(p, q, NO_WINDOW));
        // a chain over 8 leaves, L(x, x + 1) = x + 2: the line (0, 1) +
        // (2, 3) reads L = 2 and a union of 4, and L(1, 2) = 3 < 4 proves
        // A2 holds A1; the line (1, 2) + (3, 4) (union 5) is proven by the
        // first one's answer, L(2, 3) = 4 (so it is listed first: a second
        // pass); the line (4, 5) + (6, 7) has no answer between: open
        let mut t = answered(&[(0, 1, 2), (1, 2, 3), (4, 5, 6)]);
        let w = vec![
            waiting((1, 2), (3, 4), 3, 5, None),
            waiting((0, 1), (2, 3), 2, 4, None),
            waiting((4, 5), (6, 7), 6, 8, None),
        ];
        let (_, open) = settle(&mut t, 8, w);
        assert_eq!((outer(&t, 2, 3), outer(&t, 3, 4)), (Some(4), Some(5)));
        assert_eq!(open.iter().map(|w| w.outer.0).collect::<Vec<_>>(), vec![6]);
        // apart: {0, 1} + 4, then {2, 3}: L(1, 2) = 5 > the union 4, so
        // L(2, 3) is the union less L(0, 1)
        let mut t = answered(&[(0, 1, 2), (1, 2, 5)]);
        settle(&mut t, 5, vec![waiting((0, 1), (2, 3), 2, 4, None)]);
        assert_eq!(outer(&t, 2, 3), Some(2));
        // siblings ({0, 1}, {2, 3}): L(1, 2) = 4 is the union, either way
        let mut t = answered(&[(0, 1, 2), (1, 2, 4)]);
        let (_, open) = settle(&mut t, 4, vec![waiting((0, 1), (2, 3), 2, 4, None)]);
        assert_eq!((outer(&t, 2, 3), open.len()), (None, 1));
        // a tallied pair alone (the forest cannot join 1 and 3 without
        // L(1, 2)): L(1, 3) = 4 < the union 5, nested
        let mut t = answered(&[(0, 1, 2), (1, 3, 4)]);
        settle(&mut t, 6, vec![waiting((0, 1), (3, 4), 2, 5, None)]);
        assert_eq!(outer(&t, 3, 4), Some(5));
        // answers that say both: open
        let mut t = answered(&[(0, 1, 2), (1, 2, 3), (0, 3, 6)]);
        let (_, open) = settle(&mut t, 6, vec![waiting((0, 1), (2, 3), 2, 4, None)]);
        assert_eq!((outer(&t, 2, 3), open.len()), (None, 1));
        // no pair of the two lines answered, but the forest joins 1 and 3
        // in a node of 4 leaves, fewer than the union 5: nested
        let mut t = answered(&[(0, 1, 2), (1, 2, 3), (2, 3, 4)]);
        settle(&mut t, 6, vec![waiting((0, 1), (3, 4), 2, 5, None)]);
        assert_eq!(outer(&t, 3, 4), Some(5));
        // ... but not in a node as large as the union
        let mut t = answered(&[(0, 1, 2), (1, 2, 3), (2, 3, 4)]);
        let (_, open) = settle(&mut t, 6, vec![waiting((0, 1), (3, 4), 2, 4, None)]);
        assert_eq!((outer(&t, 3, 4), open.len()), (None, 1));
        // a known L of the two lines' leaves: larger than the union, apart;
        // smaller, nested; equal, open
        for (known, want) in [(Some(9), Some(3)), (Some(4), Some(5)), (Some(5), None), (None, None)] {
            let mut t = answered(&[(0, 1, 2)]);
            settle(&mut t, 9, vec![waiting((0, 1), (5, 6), 2, 5, known)]);
            assert_eq!(outer(&t, 5, 6), want, "{known:?}");
        }
    }

    /// Values no line of two probes gives are unread.
    #[test]
    fn other_values_are_unread() {
        for v in [
            -1.0,
            0.5,
            f32::NAN,
            f32::INFINITY,
            (1u32 << 24) as f32,
            OUTER,
            3.0 * 4096.0 + 5.0,
        ] {
            assert_eq!(read_two(v, 64), Reading::Unread, "{v}");
        }
        // high 10 (h = 9), low 4: L(p1, q1) = 64 - 2 - 9, union 60
        assert_eq!(
            read_two(10.0 * 4096.0 + 4.0, 64),
            Reading::Both { inner: 53, union: 60 }
        );
        assert_eq!(read_two(7.0 * 4097.0, 64), Reading::Inner(57));
        // more leaves than a heavy unit counts, or fewer than two pairs
        assert_eq!(read_two(10.0 * 4096.0 + 4.0, 4097), Reading::Unread);
        assert_eq!(read_two(0.0, 3), Reading::Unread);
        // four leaves, all the pairs': the marker alone, A1 and A2 apart
        assert_eq!(read_two(4096.0, 4), Reading::Both { inner: 2, union: 4 });
        // a low part of more units than there are, high equal or not
        assert_eq!(read_two(62.0 * 4097.0, 64), Reading::Unread);
        assert_eq!(read_two(63.0 * 4096.0 + 61.0, 64), Reading::Unread);
        // a high part of more units than there are (h = 62 of 60)
        assert_eq!(read_two(63.0 * 4096.0, 64), Reading::Unread);
        // a carry's edge at K = 4096 (h = 3000: L(p1, q1) = 1094): a
        // union 2,051 larger leaves room for a subtree of 2,048 units
        // outside A1 were L(p1, q1) one more; 2,050 larger does not
        let v = |low: u32| (4096 * 3001 + low) as f32;
        assert_eq!(read_two(v(4096 - 1094 - 2051), 4096), Reading::Unread);
        let union = 1094 + 2050;
        assert_eq!(read_two(v(4096 - union), 4096), Reading::Both { inner: 1094, union });
    }
}
