//! Passive identification of a cross-rank reduction: given every rank's
//! partial values of one output chunk and the chunk's observed reduced
//! values, which rank orders reproduce every byte.
//!
//! A [`RankOrder`] combines the partials `P_r` of a chunk element by
//! element, either serially (`((P_a + P_b) + P_c) + ...`) or pairwise
//! (levels of neighbour adds over the listed ranks, an odd last element
//! carried up), with the caller's add (one rounding per add, e.g. `RN` in
//! f32 or in bf16): the same semantics as the op models' reductions
//! (docs/OPS.md), stated here without importing them.
//!
//! Names ([`RankOrder::name`]) follow the models at world size `WS`:
//! `ring@c` is the serial order a ring over ranks `0 -> 1 -> ... -> WS-1`
//! gives the chunk owned by rank `c` (`c+1, c+2, ..., c`, ranks mod WS);
//! `fixed` is serial `0, 1, ..., WS-1` (the same order as `ring@WS-1`, so
//! the bytes of that one chunk cannot tell the two apart: the other chunks
//! can); `tree` is pairwise over `0..WS-1`. Any other serial order is named
//! by its rank list (a ring over another rank order, or a chain).
//!
//! Two serial orders that differ only by swapping their first two ranks are
//! the same computation (an add is commutative); so are pairwise orders
//! that differ by swapping the two sides of an add. [`RankOrder::key`] is
//! the same for such orders, and the search keeps one order per key.
//!
//! The search prunes element by element (a candidate is dropped at its
//! first differing byte); results do not depend on the thread count.

use rayon::prelude::*;

/// How a rank order combines partials.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Combine {
    Serial,
    Pairwise,
}

/// One way to add the per-rank partials of a chunk.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct RankOrder {
    pub ranks: Vec<usize>,
    pub combine: Combine,
}

/// A canonical form of a pairwise combination (sides sorted at every add).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Node {
    Leaf(usize),
    Add(Box<Node>, Box<Node>),
}

impl Node {
    fn add(a: Node, b: Node) -> Node {
        if a <= b {
            Node::Add(Box::new(a), Box::new(b))
        } else {
            Node::Add(Box::new(b), Box::new(a))
        }
    }
}

impl RankOrder {
    pub fn serial(ranks: Vec<usize>) -> RankOrder {
        RankOrder {
            ranks,
            combine: Combine::Serial,
        }
    }

    pub fn pairwise(ranks: Vec<usize>) -> RankOrder {
        RankOrder {
            ranks,
            combine: Combine::Pairwise,
        }
    }

    /// The order a ring over ranks 0..ws-1 gives the chunk owned by `c`.
    pub fn ring(ws: usize, c: usize) -> RankOrder {
        RankOrder::serial((1..=ws).map(|s| (c + s) % ws).collect())
    }

    /// The computation's tree with both sides of every add sorted: equal
    /// for orders that compute the same thing by commutativity.
    fn tree(&self) -> Node {
        let leaves = self.ranks.iter().map(|&r| Node::Leaf(r));
        match self.combine {
            Combine::Serial => {
                let mut it = leaves;
                let first = it.next().expect("at least one rank");
                it.fold(first, Node::add)
            }
            Combine::Pairwise => {
                let mut level: Vec<Node> = leaves.collect();
                while level.len() > 1 {
                    let mut next = Vec::with_capacity(level.len().div_ceil(2));
                    let mut it = level.into_iter();
                    while let Some(a) = it.next() {
                        match it.next() {
                            Some(b) => next.push(Node::add(a, b)),
                            None => next.push(a),
                        }
                    }
                    level = next;
                }
                level.pop().expect("at least one rank")
            }
        }
    }

    /// Equal keys: the same computation (see the module doc).
    pub fn key(&self) -> impl std::hash::Hash + Ord + Clone + std::fmt::Debug {
        self.tree()
    }

    /// The models' names of this order at world size `ws` (see the module
    /// doc), most specific first; the rank list when no model has it.
    pub fn names(&self, ws: usize) -> Vec<String> {
        let key = self.tree();
        let mut v = Vec::new();
        if ws == self.ranks.len() {
            for c in 0..ws {
                if RankOrder::ring(ws, c).tree() == key {
                    v.push(format!("ring@{c}"));
                }
            }
            if RankOrder::serial((0..ws).collect()).tree() == key {
                v.push("fixed".into());
            }
            if RankOrder::pairwise((0..ws).collect()).tree() == key {
                v.push("tree".into());
            }
        }
        if v.is_empty() {
            v.push(self.to_string());
        }
        v
    }

    /// Combines one element of every rank's partial with `add`.
    pub fn eval(&self, parts: &[&[f32]], i: usize, add: &(dyn Fn(f32, f32) -> f32 + Sync)) -> f32 {
        match self.combine {
            Combine::Serial => {
                let mut acc = parts[self.ranks[0]][i];
                for &r in &self.ranks[1..] {
                    acc = add(acc, parts[r][i]);
                }
                acc
            }
            Combine::Pairwise => {
                let mut level: Vec<f32> = self.ranks.iter().map(|&r| parts[r][i]).collect();
                while level.len() > 1 {
                    level = level
                        .chunks(2)
                        .map(|c| if c.len() == 2 { add(c[0], c[1]) } else { c[0] })
                        .collect();
                }
                level[0]
            }
        }
    }
}

impl std::fmt::Display for RankOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = self.ranks.iter().map(|r| format!("r{r}")).collect::<Vec<_>>().join(",");
        match self.combine {
            Combine::Serial => write!(f, "serial {list}"),
            Combine::Pairwise => write!(f, "pairwise {list}"),
        }
    }
}

/// The models' orders at world size `ws`: `ring@0..ring@WS-1` (the last is
/// also `fixed`) and `tree`; with `all_serial`, every serial order of the
/// ranks too (WS!/2 distinct computations), so that an order no model
/// names (another ring order, a chain) is still found. One order per
/// computation (by [`RankOrder::key`]), named orders first.
pub fn candidates(ws: usize, all_serial: bool) -> Vec<RankOrder> {
    let mut v: Vec<RankOrder> = (0..ws).map(|c| RankOrder::ring(ws, c)).collect();
    v.push(RankOrder::pairwise((0..ws).collect()));
    if all_serial {
        let mut perm: Vec<usize> = (0..ws).collect();
        permutations(&mut perm, 0, &mut |p| {
            if p.len() < 2 || p[0] < p[1] {
                v.push(RankOrder::serial(p.to_vec()));
            }
        });
    }
    let mut seen = std::collections::HashSet::new();
    v.retain(|o| seen.insert(o.tree()));
    v
}

fn permutations(p: &mut Vec<usize>, at: usize, f: &mut dyn FnMut(&[usize])) {
    if at == p.len() {
        f(p);
        return;
    }
    for i in at..p.len() {
        p.swap(at, i);
        permutations(p, at + 1, f);
        p.swap(at, i);
    }
}

/// What the search found for one chunk.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ReductionIdentity {
    /// Every candidate reproducing all bytes of the chunk, in candidate order.
    pub matches: Vec<RankOrder>,
    /// Candidates searched.
    pub evaluated: usize,
    /// Leading elements of the chunk after which only the matches are left
    /// (every other candidate has differed by then).
    pub decided_at: usize,
    /// When nothing matches: the candidate with the fewest differing
    /// elements, and that count.
    pub closest: Option<(RankOrder, usize)>,
}

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// Identifies one chunk: `parts[r]` is rank r's partial over the chunk's
/// elements (values as the reduction's buffer holds them), `observed` the
/// reduced chunk, `add` one add of the reduction. NaN compares as a class.
pub fn identify_chunk(
    parts: &[&[f32]],
    observed: &[f32],
    candidates: &[RankOrder],
    add: &(dyn Fn(f32, f32) -> f32 + Sync),
) -> Result<ReductionIdentity, String> {
    let ws = parts.len();
    if ws == 0 || parts.iter().any(|p| p.len() != observed.len()) {
        return Err(format!(
            "need one partial per rank, each of the chunk's {} elements",
            observed.len()
        ));
    }
    if let Some(c) = candidates
        .iter()
        .find(|c| c.ranks.iter().any(|&r| r >= ws) || c.ranks.is_empty())
    {
        return Err(format!("candidate {c} names a rank outside 0..{ws}"));
    }
    let res: Vec<(usize, usize)> = candidates
        .par_iter()
        .enumerate()
        .map(|(ci, c)| {
            // the first differing element (usize::MAX: none)
            let first = (0..observed.len()).position(|i| !same(c.eval(parts, i, add), observed[i]));
            (ci, first.unwrap_or(usize::MAX))
        })
        .collect();
    let matches: Vec<RankOrder> = res
        .iter()
        .filter(|(_, d)| *d == usize::MAX)
        .map(|(ci, _)| candidates[*ci].clone())
        .collect();
    let decided_at = res
        .iter()
        .filter(|(_, d)| *d != usize::MAX)
        .map(|(_, d)| d + 1)
        .max()
        .unwrap_or(0);
    let closest = if matches.is_empty() {
        candidates
            .par_iter()
            .map(|c| {
                let d = (0..observed.len())
                    .filter(|&i| !same(c.eval(parts, i, add), observed[i]))
                    .count();
                (c.clone(), d)
            })
            .collect::<Vec<_>>()
            .into_iter()
            .min_by_key(|(_, d)| *d)
    } else {
        None
    };
    Ok(ReductionIdentity {
        matches,
        evaluated: candidates.len(),
        decided_at,
        closest,
    })
}

/// Where one rank order holds: elements `start..end` and the candidates
/// (indices into the list searched) that reproduce every one of them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Segment {
    pub start: usize,
    pub end: usize,
    pub matches: Vec<usize>,
}

/// Cuts a buffer whose chunk boundaries are unknown (a collective chunks
/// by bytes, channels and protocol, not by rows) into maximal runs of
/// elements that some candidate reproduces, greedily from the start: a run
/// ends where no candidate reproduces every element so far. An element no
/// candidate reproduces is a run of its own with no match.
pub fn segments(
    parts: &[&[f32]],
    observed: &[f32],
    candidates: &[RankOrder],
    add: &(dyn Fn(f32, f32) -> f32 + Sync),
) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    let mut i = 0;
    while i < observed.len() {
        let ok = |c: &RankOrder, e: usize| same(c.eval(parts, e, add), observed[e]);
        let mut alive: Vec<usize> = (0..candidates.len()).filter(|&c| ok(&candidates[c], i)).collect();
        let start = i;
        i += 1;
        if alive.is_empty() {
            out.push(Segment {
                start,
                end: i,
                matches: alive,
            });
            continue;
        }
        while i < observed.len() {
            let next: Vec<usize> = alive.iter().copied().filter(|&c| ok(&candidates[c], i)).collect();
            if next.is_empty() {
                break;
            }
            alive = next;
            i += 1;
        }
        out.push(Segment {
            start,
            end: i,
            matches: alive,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_equivalences() {
        assert_eq!(RankOrder::ring(4, 0).ranks, vec![1, 2, 3, 0]);
        assert_eq!(RankOrder::ring(4, 3).names(4), vec!["ring@3", "fixed"]);
        assert_eq!(RankOrder::pairwise(vec![0, 1, 2, 3]).names(4), vec!["tree"]);
        // swapping the first two ranks of a serial order is the same sum
        assert_eq!(RankOrder::serial(vec![2, 1, 3, 0]).names(4), vec!["ring@0"]);
        assert_eq!(RankOrder::serial(vec![3, 1, 2, 0]).names(4), vec!["serial r3,r1,r2,r0"]);
        // WS 2: every order is the same computation
        assert_eq!(
            RankOrder::ring(2, 0).names(2),
            vec!["ring@0", "ring@1", "fixed", "tree"]
        );
        assert_eq!(candidates(2, true).len(), 1);
        // WS 4: 4 rings (one is fixed), the tree, 12 serial orders in all
        assert_eq!(candidates(4, false).len(), 5);
        assert_eq!(candidates(4, true).len(), 12 + 1);
        assert_eq!(candidates(8, true).len(), 20160 + 1);
    }

    #[test]
    fn finds_the_order_and_cuts_segments() {
        let add = |x: f32, y: f32| x + y;
        // three partials whose sum depends on the order
        let p0 = [1.0f32, 1.0];
        let p1 = [1e8f32, 3.0];
        let p2 = [-1e8f32, 5.0];
        let parts: [&[f32]; 3] = [&p0, &p1, &p2];
        let cands = candidates(3, true);
        let want = RankOrder::serial(vec![1, 2, 0]);
        let obs: Vec<f32> = (0..2).map(|i| want.eval(&parts, i, &add)).collect();
        assert_eq!(obs[0], 1.0);
        let id = identify_chunk(&parts, &obs, &cands, &add).unwrap();
        assert!(id.matches.iter().all(|m| m.key() == want.key()), "{:?}", id.matches);
        assert_eq!(id.matches.len(), 1);
        // a planted error matches nothing and names the closest
        let bad = [obs[0], f32::from_bits(obs[1].to_bits() ^ 1)];
        let id = identify_chunk(&parts, &bad, &cands, &add).unwrap();
        assert!(id.matches.is_empty());
        assert_eq!(id.closest.as_ref().unwrap().1, 1);
        // two orders in one buffer: two segments
        let other = RankOrder::serial(vec![0, 1, 2]);
        let mixed = [obs[0], other.eval(&parts, 0, &add)];
        assert_ne!(mixed[0], mixed[1]);
        let pa = [1.0f32, 1.0];
        let pb = [1e8f32, 1e8];
        let pc = [-1e8f32, -1e8];
        let parts2: [&[f32]; 3] = [&pa, &pb, &pc];
        let segs = segments(&parts2, &mixed, &cands, &add);
        assert_eq!(segs.len(), 2, "{segs:?}");
        assert_eq!((segs[0].start, segs[0].end, segs[1].end), (0, 1, 2));
    }
}
