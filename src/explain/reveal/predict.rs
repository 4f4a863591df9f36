//! Nodes predicted before FPRev's recursion asks for them (docs/EXPLAIN.md,
//! "Predicted nodes"). Every prediction is a set of pairs, one per node it
//! predicts; the forest (`grid.rs`) keeps only the nodes the answers prove,
//! so a wrong prediction costs its probes and never a wrong node, and
//! FPRev's recursion then asks one probe per proven subtree, none inside
//! one.
//!
//! - **Stride neighbours** ([`stride_round`]), where the first level takes
//!   more than one launch: its first launch (the first leaf f against the
//!   next leaves) finds the least `s` with `L(f, f + s) = 2` (f's sibling
//!   leaf). Pairs `(x, x + s)` realize every node of a chain over the
//!   leaves `s` apart (lanes), of contiguous parts and of their serial or
//!   pairwise combination, as neighbours do on grid launches.
//! - **Links** ([`link_round`]), where stride pairs stop joining: a chain
//!   that goes on at a jump (k-tiles dealt round-robin to parts) is joined
//!   by a pair from its earlier run to where it goes on, found among the
//!   components of the size the stride pair's `L` leaves over, then by the
//!   shift between the two; also over a grid's neighbour pairs.
//! - **Translated subtrees** ([`translate_round`]): after each level of
//!   FPRev's recursion, the groups hanging from each ancestor of a task's
//!   first leaf f (inside the task) are known as sets. A GPU
//!   reduction repeats one pattern at other offsets (lanes, split parts,
//!   k-tiles), so a group whose leaves are an already predicted subtree's
//!   leaves shifted by t is predicted to be that subtree shifted by t; f's
//!   ancestors are predicted as binary nodes (the ancestor below, then the
//!   group).

use super::error::RevealError;
use super::grid::Forest;
use super::keys::{Key, NO_WINDOW};
use super::prober::Prober;
use super::two::{self, Line, Waiting};
use rustc_hash::FxHashMap as HashMap;

/// Launches' worth of stride pairs (one a line) a round holds at most
/// (rounds of 1, 2, 4, ... before): a stride that fails costs at most
/// this many launches. With two probes a line (`two.rs`) a round holds as
/// many pairs on half as many lines (rounds sized in lines, twice the
/// pairs, ran ahead of an interleaved split's links: docs/PERFORMANCE.md,
/// "Two probes a line").
const STRIDE_ROUND: usize = 8;

/// Launches a link round ([`link_round`]) holds at most after a stride
/// round, and after a grid (all of whose runs' starts come at once).
const LINK_LAUNCHES: usize = 3;
const GRID_LINK_LAUNCHES: usize = 8;

/// The stride round, where counts are exact: the first launch of FPRev's
/// first level (leaf 0 against leaves 1, 2, ..., a launch's worth); then,
/// unless that launch held the whole first level, with `s` the least leaf
/// whose `L` with leaf 0 is 2, the pairs `(x, x + s)` not yet joined, in
/// rounds of 1, 2, 4, then [`STRIDE_ROUND`] launches while at least half
/// of a round's pairs join their leaves (counted again after the
/// [`link_round`] a round with fewer gets). The forest of every tallied
/// answer (the first level then asks only what it leaves open), or None
/// where counts are windowed.
pub(super) fn stride_round(pr: &mut Prober) -> Result<Option<Forest>, RevealError> {
    let kl = pr.kl;
    if pr.window < kl {
        return Ok(None);
    }
    let first: Vec<Key> = (1..kl.min(pr.slots() + 1)).map(|x| (0, x as u32, NO_WINDOW)).collect();
    let ls = pr.measure(&first)?;
    let mut forest = Forest::of(&pr.tallies, kl);
    // a launch that held the whole first level leaves the translation
    // round (after it) more to go on than a stride
    let whole = first.len() == kl - 1;
    let Some(s) = ls.iter().position(|&l| l == 2).map(|i| i + 1).filter(|_| !whole) else {
        return Ok(Some(forest));
    };
    let pairs: Vec<Key> = (0..kl - s).map(|x| (x as u32, (x + s) as u32, NO_WINDOW)).collect();
    // in rounds of 1, 2, 4, then 8 launches (a file runner answers a
    // round at a time), while at least half of a round's pairs join their
    // leaves (a stride the tree keeps)
    let (mut at, mut launches) = (0, 1);
    // the offset from a chain's earlier part to where it goes on (links)
    let mut shift: Option<u32> = None;
    // lines of two probes (`two.rs`): the pair x with the pair two strides
    // on (x + 2s), whose node holds x's in a chain over the stride, for x
    // in the first half of each run of four strides; `taken` marks the
    // pairs so asked before their turn
    let mut taken = vec![false; pairs.len()];
    let mut waiting: Vec<Waiting> = Vec::new();
    while at < pairs.len() {
        let mut batch: Vec<Key> = Vec::new();
        let mut lines: Vec<Line> = Vec::new();
        while at < pairs.len() && batch.len() < launches * pr.slots() {
            let (x, k) = (at, pairs[at]);
            at += 1;
            if taken[x] || forest.joined(k.0, k.1) {
                continue;
            }
            batch.push(k);
            let y = x + 2 * s;
            if pr.takes_two() && (x / s) % 4 < 2 && y < pairs.len() && !forest.joined(pairs[y].0, pairs[y].1) {
                taken[y] = true;
                batch.push(pairs[y]);
                lines.push(Line::Two(k, pairs[y]));
            } else {
                lines.push(Line::One(k));
            }
        }
        if batch.is_empty() {
            break;
        }
        if lines.iter().any(|l| matches!(l, Line::Two(..))) {
            let (read, mut again) = pr.measure_two(&lines)?;
            waiting.extend(read);
            let (grown, open) = two::settle(&mut pr.tallies, pr.kl, std::mem::take(&mut waiting));
            forest = grown;
            // an outer probe whose proof (the pair between the two, x + s)
            // comes in a later round waits for it; the rest are asked alone
            for w in open {
                let between = w.inner.0 as usize + s;
                if between >= at && !taken[between] {
                    waiting.push(w);
                } else {
                    again.push(w.outer);
                }
            }
            if !again.is_empty() {
                pr.measure(&again)?;
                forest = Forest::of(&pr.tallies, kl);
            }
        } else {
            pr.measure(&batch)?;
            forest = Forest::of(&pr.tallies, kl);
        }
        // (a pair still waiting counts neither way)
        let asked = batch.len() - waiting.iter().filter(|w| batch.contains(&w.outer)).count();
        let mut joined = batch.iter().filter(|k| forest.joined(k.0, k.1)).count();
        if joined * 2 < asked {
            forest = link_round(pr, forest, &batch, s as u32, &mut shift, LINK_LAUNCHES)?;
            joined = batch.iter().filter(|k| forest.joined(k.0, k.1)).count();
        }
        if joined * 2 < asked {
            break;
        }
        launches = (launches * 2).min(STRIDE_ROUND);
    }
    if !waiting.is_empty() {
        let (grown, open) = two::settle(&mut pr.tallies, pr.kl, waiting);
        forest = grown;
        let again: Vec<Key> = open.iter().map(|w| w.outer).collect();
        if !again.is_empty() {
            pr.measure(&again)?;
            forest = Forest::of(&pr.tallies, kl);
        }
    }
    Ok(Some(forest))
}

/// The link round after a stride round (stride `s`) in which fewer than
/// half of the pairs joined their leaves: a chain that goes on at a jump
/// (k-tiles dealt round-robin to parts). A pair `(x, x + s)` not joined
/// whose `L` exceeds the sizes of its two components by `c >= 2` has c
/// more leaves below its ancestor; x *starts* a run unless the pair
/// `s` before it exceeded by `c - 1` (the same run, one leaf on). For each
/// start x, once a link is known (`shift`), the pair `(x - shift, x)` is
/// asked (the run `shift` before goes on at x; its answer joins once the
/// earlier run is whole, in any order of answers); else, or where that
/// pair was asked and did not join, the pairs (least leaf of a
/// component of exactly c leaves, x). A candidate pair that joins sets
/// `shift` (x less that least leaf, where it lies before x). At most
/// `turns` launches, one a turn, while a turn joins something.
fn link_round(
    pr: &mut Prober,
    mut forest: Forest,
    batch: &[Key],
    s: u32,
    shift: &mut Option<u32>,
    turns: usize,
) -> Result<Forest, RevealError> {
    for _ in 0..turns {
        let mut extra: HashMap<u32, u32> = HashMap::default();
        for k in batch {
            let (x, y) = (k.0.min(k.1), k.0.max(k.1));
            if forest.joined(x, y) {
                continue;
            }
            let Some(l) = pr.tallies.pair_value(x, y) else { continue };
            let parts = forest.size(x) + forest.size(y);
            if let Some(c) = l.checked_sub(parts).filter(|&c| c >= 2) {
                extra.insert(x, c);
            }
        }
        let mut starts: Vec<(u32, u32)> = extra
            .iter()
            .filter(|&(&x, &c)| x.checked_sub(s).and_then(|y| extra.get(&y)) != Some(&(c - 1)))
            .map(|(&x, &c)| (x, c))
            .collect();
        starts.sort_unstable();
        let asked = |pr: &Prober, p: u32, q: u32| pr.tallies.pair_value(p, q).is_some();
        let mut asks: Vec<Key> = Vec::new();
        let mut open: Vec<(u32, u32)> = Vec::new();
        for &(x, c) in &starts {
            match shift.and_then(|d| x.checked_sub(d)) {
                Some(y) if !asked(pr, y, x) => asks.push((y, x, NO_WINDOW)),
                _ => open.push((x, c)),
            }
        }
        let guessed = asks.len();
        if !open.is_empty() {
            // the components by size, each by its least leaf
            let mut by_size: HashMap<u32, Vec<u32>> = HashMap::default();
            for y in 0..pr.kl as u32 {
                if forest.find(y) == y {
                    let c = forest.size(y);
                    by_size.entry(c).or_default().push(y);
                }
            }
            'starts: for (x, c) in open {
                for &r in by_size.get(&c).map_or(&[][..], |v| v.as_slice()) {
                    if asks.len() >= pr.slots() {
                        break 'starts;
                    }
                    if !forest.joined(r, x) && !asked(pr, r, x) {
                        asks.push((r, x, NO_WINDOW));
                    }
                }
            }
        }
        asks.truncate(pr.slots());
        if asks.is_empty() {
            break;
        }
        pr.measure(&asks)?;
        let before = forest.components(0..pr.kl as u32);
        forest = Forest::of(&pr.tallies, pr.kl);
        // (a candidate component after x gives no shift)
        let found = asks[guessed.min(asks.len())..]
            .iter()
            .find(|k| k.0 < k.1 && forest.joined(k.0, k.1));
        if let Some(&(r, x, _)) = found {
            *shift = Some(x - r);
        }
        if forest.components(0..pr.kl as u32) == before {
            break;
        }
    }
    Ok(forest)
}

/// The link round ([`link_round`]) over the neighbour pairs a grid answered
/// (every `(x, x + 1)`), where some did not join their leaves.
pub(super) fn link_neighbours(pr: &mut Prober, forest: Forest) -> Result<Forest, RevealError> {
    let pairs: Vec<Key> = (1..pr.kl as u32).map(|y| (y - 1, y, NO_WINDOW)).collect();
    link_round(pr, forest, &pairs, 1, &mut None, GRID_LINK_LAUNCHES)
}

/// A task's first leaf and its groups, each with its `L` and its leaves
/// (sorted), by increasing `L`.
pub(super) type GroupsOf<'t> = (u32, Vec<(u32, &'t [u32])>);

/// The translation round after a level of FPRev's recursion, over each of
/// its `sets` (a task's first leaf f and its groups: the leaves hanging
/// from each ancestor of f inside the task, by increasing `L`, each with
/// that `L` and sorted; exact counts): the pairs of the predicted nodes
/// ([`translated_pairs`]) not yet answered nor joined in `forest`, one
/// launch of them first, the rest only if at least half of that launch's
/// pairs joined their leaves. A pair lies in its group, which meets f at
/// the group's `L`: pairs of two groups share lines where they fit
/// ([`two::measure_level`]). The forest of every tallied answer, or None
/// when nothing was asked.
pub(super) fn translate_round(
    pr: &mut Prober,
    sets: &[GroupsOf],
    mut forest: Option<&mut Forest>,
) -> Result<Option<Forest>, RevealError> {
    let t = &pr.tallies;
    let (keys, owners): (Vec<Key>, Vec<(u32, u32, usize)>) = sets
        .iter()
        .flat_map(|(f, groups)| {
            let leaves: Vec<&[u32]> = groups.iter().map(|g| g.1).collect();
            translated_pairs(*f, &leaves)
                .into_iter()
                .map(move |(p, q, g)| ((p, q, NO_WINDOW), (*f, groups[g].0, groups[g].1.len())))
        })
        .filter(|&((p, q, _), _)| t.pair_value(p, q).is_none())
        .filter(|&((p, q, _), _)| forest.as_deref_mut().is_none_or(|f| !f.joined(p, q)))
        .unzip();
    if keys.is_empty() {
        return Ok(None);
    }
    let per = if pr.takes_two() { 2 } else { 1 };
    let scout = keys.len().min(pr.slots() * per);
    two::measure_level(pr, &keys[..scout], &owners[..scout])?;
    let mut grown = Forest::of(&pr.tallies, pr.kl);
    let joined = keys[..scout].iter().filter(|k| grown.joined(k.0, k.1)).count();
    if scout < keys.len() && joined * 2 >= scout {
        two::measure_level(pr, &keys[scout..], &owners[scout..])?;
        grown = Forest::of(&pr.tallies, pr.kl);
    }
    Ok(Some(grown))
}

/// The pairs that realize the translated nodes inside the groups, bottom-up
/// within each group (a node's children before the node), groups by
/// increasing `L`. `groups` are the first level's groups of leaves
/// hanging from the ancestors of `f`, by increasing `L`, each sorted.
///
/// A group of one leaf is predicted (a leaf). A group of two or more is
/// predicted when its leaves, shifted by their least, are those of f's
/// ancestor below it (every group under that ancestor predicted) or of an
/// earlier predicted group: it is a copy of that subtree shifted by the
/// difference of their least leaves. Pairs `(f, first leaf of a group)`
/// are the first level's own and are not returned. Each pair comes with
/// the index of the group it lies in.
pub(super) fn translated_pairs(f: u32, groups: &[&[u32]]) -> Vec<(u32, u32, usize)> {
    // the predicted merges of f's ancestors, bottom-up: a group's merges,
    // then the pair joining it to f (each group's merges a slice of this)
    let mut merges: Vec<(u32, u32)> = Vec::new();
    // f's ancestors' leaves, in the order their groups came
    let mut path: Vec<u32> = vec![f];
    // every group so far predicted: `merges` is f's ancestor's subtree
    let mut whole = true;
    // by a predicted group's leaves less their least: (least, merges)
    let mut sources: HashMap<Vec<u32>, (u32, std::ops::Range<usize>)> = HashMap::default();
    let mut asked: Vec<(u32, u32, usize)> = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let least = g[0];
        let pattern: Vec<u32> = g.iter().map(|&x| x - least).collect();
        let source = if g.len() == 1 {
            Some((least, 0..0))
        } else {
            let below = (whole && path.len() == g.len()).then(|| {
                let mut below = path.clone();
                below.sort_unstable();
                below
            });
            below
                .filter(|b| b.iter().map(|&x| x - b[0]).eq(pattern.iter().copied()))
                .map(|b| (b[0], 0..merges.len()))
                .or_else(|| sources.get(&pattern).cloned())
        };
        match source {
            Some((from, range)) => {
                let start = merges.len();
                for i in range {
                    let (p, q) = merges[i];
                    merges.push((p - from + least, q - from + least));
                }
                asked.extend(merges[start..].iter().map(|&(p, q)| (p, q, gi)));
                if g.len() > 1 {
                    sources.entry(pattern).or_insert((least, start..merges.len()));
                }
            }
            None => whole = false,
        }
        merges.push((f, least));
        path.extend_from_slice(g);
    }
    asked
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first level's groups of f = 0 in a tree given by its L(0, x).
    fn groups_of(l0: &[u32]) -> Vec<Vec<u32>> {
        let mut by: Vec<(u32, u32)> = l0.iter().enumerate().skip(1).map(|(x, &l)| (l, x as u32)).collect();
        by.sort_unstable();
        let mut gs: Vec<(u32, Vec<u32>)> = Vec::new();
        for (l, x) in by {
            match gs.last_mut() {
                Some((gl, g)) if *gl == l => g.push(x),
                _ => gs.push((l, vec![x])),
            }
        }
        gs.into_iter().map(|(_, g)| g).collect()
    }

    fn pairs(l0: &[u32]) -> Vec<(u32, u32)> {
        let gs = groups_of(l0);
        let refs: Vec<&[u32]> = gs.iter().map(|g| g.as_slice()).collect();
        translated_pairs(0, &refs).into_iter().map(|(p, q, _)| (p, q)).collect()
    }

    #[test]
    fn a_chain_has_nothing_to_predict() {
        let l0: Vec<u32> = (0..64).map(|x| x + 1).collect();
        assert!(pairs(&l0).is_empty());
    }

    #[test]
    fn two_interleaved_chains_copy_the_first() {
        // lanes of 2: even leaves a chain, odd leaves a chain, added
        // last: L(0, 2j) = j + 1, L(0, odd) = 8
        let l0: Vec<u32> = (0..8).map(|x| if x % 2 == 0 { x / 2 + 1 } else { 8 }).collect();
        // the odd lane is the even lane shifted by 1: the even lane's
        // joins (0, 2), (0, 4), (0, 6) become (1, 3), (1, 5), (1, 7)
        assert_eq!(pairs(&l0), vec![(1, 3), (1, 5), (1, 7)]);
    }

    #[test]
    fn a_group_copies_an_earlier_group_and_the_ancestor_below() {
        // four tiles of 4 leaves, each a chain, added serially:
        // ((t0 + t1) + t2) + t3; L(0, x) = x + 1 in t0, then 8, 12, 16
        let l0: Vec<u32> = (0..16).map(|x| if x < 4 { x + 1 } else { 4 * (x / 4 + 1) }).collect();
        let got = pairs(&l0);
        // t1 copies t0 (the ancestor below, size 4); t2 does not match
        // the ancestor below (8 leaves) but copies t1; t3 copies t2
        let want: Vec<(u32, u32)> = [4u32, 8, 12]
            .iter()
            .flat_map(|&s| [(s, s + 1), (s, s + 2), (s, s + 3)])
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn an_unmatched_group_stops_its_ancestors_being_copied() {
        // t0 = {0, 1, 2, 3} a chain; the next group {4, 6} is not a shift
        // of anything of size 2 before it; the group {5, 7, 8, 9} then
        // matches no whole ancestor (the ancestor below holds {4, 6}, not
        // predicted) and no group: nothing is asked
        let l0 = [1, 2, 3, 4, 6, 10, 6, 10, 10, 10];
        assert!(pairs(&l0).is_empty());
        // {2, 4} is not predicted; {5, 6, 7, 9} has the shape and size of
        // the ancestor below ({0, 1, 2, 4}), whose structure is then not
        // whole: not copied either
        let l0 = [1, 2, 4, 10, 4, 8, 8, 8, 10, 8];
        assert!(pairs(&l0).is_empty());
    }
}
