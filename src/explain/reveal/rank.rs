//! One recursion level of FPRev's recursion under an output that rounds the
//! counts (windowed probes, docs/EXPLAIN.md "Ranks for outputs that round
//! the counts"): each set's leaves ranked by the ancestor they share with
//! the set's first leaf, with probes that count at most the calibrated
//! window of units.
//!
//! # Why a rank is enough
//! The ancestors of the first leaf f are nested: `S(x)`, the leaves under
//! the lowest common ancestor of f and x, grows along one chain of sets. A
//! probe (f, x) counting units at a set W loses exactly the units of
//! `W ∩ S(x)`, so `|W ∩ S(x)|` is monotone in `S(x)`; and when
//! `S(x) ⊊ S(y)`, y itself lies in `S(y)` but not in `S(x)`. So units at
//! the set's own leaves tell every two ancestors apart, and the leaves can
//! be ranked without counting all of K:
//!
//! - **a sample** of at most `w` candidates, counted exactly, splits the
//!   leaves into classes of equal count (a chain at K = 4096 with `w` =
//!   256: classes of 16);
//! - two leaves of one class differ (if at all) at a candidate outside the
//!   sample that belongs to the class, so a class goes on with those
//!   candidates only: counted exactly when at most `w` remain, else sampled
//!   again, with a **zero test** (units at every remaining candidate, read
//!   only as "all lost or not": a positive sum of units stays positive
//!   through any rounding) that closes a class whose leaves all share one
//!   ancestor.
//!
//! Every stage removes `w` candidates from a class, so the stages end.
//! Equal counts at every stage mean the same ancestor; the order of the
//! counts is the order of the ancestors, so `L(f, x)` is one plus the
//! leaves of the set whose ancestor is no larger, except where `S(x)` holds
//! the leaf g the set hangs from (counted in the first stage's window: all
//! its units lost), which is the ancestor the set hangs from.

use super::error::RevealError;
use super::keys::Key;
use super::prober::Prober;

/// One set of a recursion level: its first leaf, its other leaves, and
/// (after the first level) the first leaf of the set it came from and the
/// size of the ancestor it hangs from.
pub(super) struct LevelSet<'a> {
    pub(super) first: u32,
    pub(super) rest: &'a [u32],
    pub(super) hangs: Option<(u32, u32)>,
}

/// Leaves of one set whose counts agreed so far, and the candidates that
/// can still tell them apart.
struct Class {
    set: usize,
    /// indices into the set's `rest`
    members: Vec<usize>,
    /// sorted leaves
    candidates: Vec<u32>,
    first_stage: bool,
}

/// `s` of the sorted `leaves`, evenly spaced, with `must` among them.
fn sample(leaves: &[u32], s: usize, must: Option<u32>) -> Vec<u32> {
    let others: Vec<u32> = leaves.iter().copied().filter(|&x| Some(x) != must).collect();
    let take = s - must.is_some() as usize;
    let mut out: Vec<u32> = (0..take).map(|i| others[i * others.len() / take]).collect();
    out.extend(must);
    out.sort_unstable();
    out
}

/// `L(first, x)` for every leaf of `rest`, set by set.
pub(super) fn rank_level(pr: &mut Prober, sets: &[LevelSet]) -> Result<Vec<Vec<u32>>, RevealError> {
    let w = pr.window;
    // per set, per leaf of rest: the counts of its stages, and whether the
    // first stage lost every unit
    let mut path: Vec<Vec<Vec<u32>>> = sets.iter().map(|s| vec![Vec::new(); s.rest.len()]).collect();
    let mut all_lost: Vec<Vec<bool>> = sets.iter().map(|s| vec![false; s.rest.len()]).collect();
    let mut active: Vec<Class> = sets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut candidates: Vec<u32> = s.rest.iter().copied().chain(s.hangs.map(|h| h.0)).collect();
            candidates.sort_unstable();
            Class {
                set: i,
                members: (0..s.rest.len()).collect(),
                candidates,
                first_stage: true,
            }
        })
        .collect();
    while !active.is_empty() {
        // (counted window, zero-test window) per class
        let mut plan: Vec<(u32, Option<u32>)> = Vec::with_capacity(active.len());
        let mut probes: Vec<Key> = Vec::new();
        for c in &active {
            let set = &sets[c.set];
            let (counted, zero) = if c.candidates.len() <= w {
                (c.candidates.clone(), None)
            } else {
                let must = if c.first_stage { set.hangs.map(|h| h.0) } else { None };
                let counted = sample(&c.candidates, w, must);
                let zero = (!c.first_stage).then(|| {
                    let rest: Vec<u32> = c
                        .candidates
                        .iter()
                        .copied()
                        .filter(|x| counted.binary_search(x).is_err())
                        .collect();
                    pr.windows.add(rest, false)
                });
                (counted, zero)
            };
            let id = pr.windows.add(counted, true);
            for &i in &c.members {
                let x = set.rest[i];
                probes.push((set.first, x, id));
                if let Some(z) = zero {
                    probes.push((set.first, x, z));
                }
            }
            plan.push((id, zero));
        }
        let values = pr.measure(&probes)?;
        let mut at = 0;
        let mut next = Vec::new();
        for (c, (id, zero)) in active.into_iter().zip(plan) {
            let set = &sets[c.set];
            let counted = pr.windows.leaves(id);
            // (count with x's own unit, all lost in the zero test, member)
            let mut ranked: Vec<(u32, bool, usize)> = Vec::with_capacity(c.members.len());
            for &i in &c.members {
                let x = set.rest[i];
                let holds = counted.binary_search(&x).is_ok() as u32;
                let v = values[at];
                at += 1;
                let act = pr.windows.active(&(set.first, x, id), pr.kl);
                let closed = match zero {
                    Some(z) => {
                        let zv = values[at];
                        at += 1;
                        zv == pr.windows.active(&(set.first, x, z), pr.kl) + 2
                    }
                    None => false,
                };
                if c.first_stage {
                    all_lost[c.set][i] = v == act + 2;
                }
                let count = v - 2 + holds;
                path[c.set][i].push(count);
                ranked.push((count, closed, i));
            }
            if c.candidates.len() <= w {
                continue; // counted exactly: every class is one ancestor
            }
            ranked.sort_unstable();
            for part in ranked.chunk_by(|a, b| a.0 == b.0) {
                if part.len() == 1 || (zero.is_some() && part.iter().all(|r| r.1)) {
                    continue;
                }
                let members: Vec<usize> = part.iter().map(|r| r.2).collect();
                let mut candidates: Vec<u32> = members
                    .iter()
                    .map(|&i| set.rest[i])
                    .filter(|x| counted.binary_search(x).is_err() && c.candidates.binary_search(x).is_ok())
                    .collect();
                candidates.sort_unstable();
                if candidates.is_empty() {
                    continue; // the leaves agree on every one of their own
                }
                next.push(Class {
                    set: c.set,
                    members,
                    candidates,
                    first_stage: false,
                });
            }
        }
        active = next;
    }
    // the order of the stage counts is the order of the ancestors
    Ok(sets
        .iter()
        .enumerate()
        .map(|(si, s)| {
            let mut order: Vec<usize> = (0..s.rest.len()).collect();
            order.sort_by(|&a, &b| path[si][a].cmp(&path[si][b]));
            let mut l = vec![0u32; s.rest.len()];
            let mut below = 1u32;
            for part in order.chunk_by(|&a, &b| path[si][a] == path[si][b]) {
                below += part.len() as u32;
                let ceiling = s.hangs.filter(|_| part.iter().any(|&i| all_lost[si][i])).map(|h| h.1);
                for &i in part {
                    l[i] = ceiling.unwrap_or(below);
                }
            }
            l
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::sample;

    #[test]
    fn a_sample_is_sorted_distinct_and_holds_the_leaf_it_must() {
        let leaves: Vec<u32> = (0..1000).map(|x| 3 * x + 1).collect();
        for (s, must) in [
            (256, None),
            (256, Some(2998)),
            (16, Some(1)),
            (1000, None),
            (1, Some(499)),
        ] {
            let got = sample(&leaves, s, must);
            assert_eq!(got.len(), s, "{s} {must:?}");
            assert!(got.windows(2).all(|w| w[0] < w[1]), "{s} {must:?}: {got:?}");
            assert!(got.iter().all(|x| leaves.binary_search(x).is_ok()), "{s} {must:?}");
            if let Some(g) = must {
                assert!(got.contains(&g), "{s} {must:?}");
            }
        }
        // evenly spaced: a sample of 256 of 1000 leaves skips at most 4 in a row
        let got = sample(&leaves, 256, None);
        assert!(got.windows(2).all(|w| w[1] - w[0] <= 3 * 4), "{got:?}");
    }
}
