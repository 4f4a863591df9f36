//! Pair probes in both dimensions ("grid"): row i of A carries `+B` at
//! p_i, column j of B carries `-B` at q_j, every other element is a unit
//! (1), so output (i, j) answers the pair (p_i, q_j) and one launch answers
//! every pair of P x Q (module doc of `reveal`, "Grid").
//!
//! The pairs are chosen so that a launch answers a run of consecutive
//! leaves: a window of `2h` leaves alternates between rows and columns,
//! so every pair of neighbours (x, x + 1) in it, and every pair an odd
//! distance apart, is answered; windows overlap by one leaf. Where the
//! answers realize a node (a pair from its two children with `L` equal to
//! the two children's sizes), the node is certain: the ancestor of p and q
//! holds both children, which are nodes, and nothing else ([`Forest`]).
//! The nodes found so form components that FPRev's recursion then treats
//! as known: one probe per component, none inside one.

use super::keys::NO_WINDOW;
use super::tally::Tallies;

/// At most this many rows and columns carry grid pairs (a launch answers
/// at most `GRID_SIDE^2` distinct pairs, so the tallies stay small).
pub(super) const GRID_SIDE: usize = 128;

/// One grid launch: the leaves carrying `+B` on the rows (`rows[i % len]`
/// on row i) and `-B` on the columns (likewise); disjoint.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Window {
    pub(super) rows: Vec<u32>,
    pub(super) cols: Vec<u32>,
}

/// The grid launches over `kl` leaves for an M x N launch, or None where
/// they would not take fewer launches than FPRev's first level on lines
/// (`max(M, N)` probes a launch): windows of `2h` consecutive leaves (h =
/// min(M, N, [`GRID_SIDE`])), even offsets on rows and odd on columns, the
/// next window starting at the last leaf of this one.
pub(super) fn plan(kl: usize, m: usize, n: usize) -> Option<Vec<Window>> {
    // a row and a column of pairs at least (h = 1 would be lines again)
    let h = m.min(n).min(GRID_SIDE);
    if h < 2 {
        return None;
    }
    let step = 2 * h - 1;
    let pairs = kl.saturating_sub(1);
    let grid = pairs.div_ceil(step);
    if grid >= pairs.div_ceil(m.max(n)) {
        return None;
    }
    let windows = (0..grid)
        .map(|w| {
            let start = w * step;
            let end = (start + 2 * h).min(kl);
            let (mut rows, mut cols) = (Vec::with_capacity(h), Vec::with_capacity(h));
            for x in start..end {
                if (x - start).is_multiple_of(2) {
                    rows.push(x as u32);
                } else {
                    cols.push(x as u32);
                }
            }
            Window { rows, cols }
        })
        .collect();
    Some(windows)
}

/// The nodes the answers realize, merged smallest first (Kruskal's order):
/// a pair whose `L` equals the sizes of the components of its two leaves
/// joins them into a node. Leaves are nodes `0..kl`; merged nodes follow.
pub(super) struct Forest {
    /// Union-find over the leaves (the component's root leaf).
    root: Vec<u32>,
    /// Each component's top node, by its root leaf.
    top: Vec<u32>,
    /// Per node: its parent node (u32::MAX: none yet), its size, and for
    /// a merged node its two children.
    parent: Vec<u32>,
    size: Vec<u32>,
    children: Vec<[u32; 2]>,
    kl: usize,
}

impl Forest {
    /// The forest every tallied, unwindowed answer realizes (each probe's
    /// first answer; a probe whose answers differ is left to the check of
    /// every answer against the recovered tree).
    pub(super) fn of(t: &Tallies, kl: usize) -> Forest {
        // (L, p, q) packed so that the keys' order is the tuples' (leaves
        // are below 2^16: reveal's limit on K)
        let mut pairs: Vec<u64> = Vec::with_capacity(t.distinct());
        t.for_each_first(|k, v| {
            if k.2 == NO_WINDOW {
                let (p, q) = (k.0.min(k.1) as u64, k.0.max(k.1) as u64);
                pairs.push((v.0 as u64) << 32 | p << 16 | q);
            }
        });
        debug_assert!(kl <= 1 << 16);
        pairs.sort_unstable();
        let mut f = Forest {
            root: (0..kl as u32).collect(),
            top: (0..kl as u32).collect(),
            parent: vec![u32::MAX; kl],
            size: vec![1; kl],
            children: Vec::new(),
            kl,
        };
        for key in pairs {
            let (l, p, q) = ((key >> 32) as u32, (key >> 16) as u32 & 0xFFFF, key as u32 & 0xFFFF);
            let (a, b) = (f.find(p), f.find(q));
            if a == b {
                continue;
            }
            let (ta, tb) = (f.top[a as usize], f.top[b as usize]);
            if f.size[ta as usize] + f.size[tb as usize] != l {
                continue;
            }
            let node = f.parent.len() as u32;
            f.parent.push(u32::MAX);
            f.size.push(l);
            f.children.push([ta, tb]);
            f.parent[ta as usize] = node;
            f.parent[tb as usize] = node;
            // union: the smaller root leaf stays the root (deterministic)
            let (keep, gone) = (a.min(b), a.max(b));
            f.root[gone as usize] = keep;
            f.top[keep as usize] = node;
        }
        f
    }

    /// The root leaf of x's component (its representative).
    pub(super) fn find(&mut self, x: u32) -> u32 {
        let mut r = x;
        while self.root[r as usize] != r {
            r = self.root[r as usize];
        }
        let mut y = x;
        while self.root[y as usize] != r {
            let next = self.root[y as usize];
            self.root[y as usize] = r;
            y = next;
        }
        r
    }

    /// Whether p and q are leaves of one component (a node holds both).
    pub(super) fn joined(&mut self, p: u32, q: u32) -> bool {
        self.find(p) == self.find(q)
    }

    /// The number of leaves of x's component.
    pub(super) fn size(&mut self, x: u32) -> u32 {
        let r = self.find(x);
        self.size[self.top[r as usize] as usize]
    }

    /// Components among `leaves`.
    pub(super) fn components(&mut self, leaves: impl Iterator<Item = u32>) -> usize {
        let mut roots: Vec<u32> = leaves.map(|x| self.find(x)).collect();
        roots.sort_unstable();
        roots.dedup();
        roots.len()
    }

    /// `L(f, x)` for every leaf x of f's component other than f whose
    /// `L` is at most `limit`, written into `row` (indexed by leaf; the
    /// caller clears what `touched` lists): walking up from f, each sibling
    /// subtree joins f at its parent, until a parent holds more than
    /// `limit` leaves.
    pub(super) fn row(&self, f: u32, limit: u32, row: &mut [u32], touched: &mut Vec<u32>) {
        let mut c = f;
        while self.parent[c as usize] != u32::MAX {
            let p = self.parent[c as usize];
            if self.size[p as usize] > limit {
                break;
            }
            let [l, r] = self.children[(p as usize) - self.kl];
            let sib = if l == c { r } else { l };
            let mut stack = vec![sib];
            while let Some(v) = stack.pop() {
                if (v as usize) < self.kl {
                    row[v as usize] = self.size[p as usize];
                    touched.push(v);
                } else {
                    stack.extend(self.children[v as usize - self.kl]);
                }
            }
            c = p;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::reveal::keys::at;

    #[test]
    fn windows_cover_every_neighbour_pair_once_a_window() {
        let w = plan(4096, 64, 64).expect("square launches use the grid");
        assert_eq!(w.len(), 33);
        let mut covered = vec![false; 4095];
        for win in &w {
            assert!(win.rows.len() <= 64 && win.cols.len() <= 64);
            for &p in &win.rows {
                assert!(!win.cols.contains(&p));
                for &q in &win.cols {
                    if p.abs_diff(q) == 1 {
                        covered[p.min(q) as usize] = true;
                    }
                }
            }
        }
        assert!(covered.iter().all(|&c| c), "every (x, x + 1) is a pair of some window");
        // every window has rows and columns, the last ends at the last leaf,
        // and no more windows than the leaves need
        for (kl, h) in [(255, 64), (256, 64), (4096, 64), (1000, 2), (400, 128)] {
            let w = plan(kl, h, h).unwrap_or_else(|| panic!("kl {kl}, h {h}"));
            assert_eq!(w.len(), (kl - 1).div_ceil(2 * h - 1), "kl {kl}, h {h}");
            assert!(
                w.iter().all(|x| !x.rows.is_empty() && !x.cols.is_empty()),
                "kl {kl}, h {h}"
            );
            let last = w.last().unwrap();
            assert_eq!(last.rows.iter().chain(&last.cols).max(), Some(&(kl as u32 - 1)));
        }
        // lines answer max(M, N) probes: the grid only where it is fewer
        // launches (at K = 64 and 65 both take one)
        assert_eq!(plan(64, 64, 64), None);
        assert_eq!(plan(65, 64, 64), None);
        assert_eq!(plan(4096, 1, 1), None);
        assert_eq!(plan(2, 8, 8), None);
        assert_eq!(plan(4096, 1, 64), None);
        assert_eq!(plan(4096, 64, 4096), None);
        assert_eq!(plan(4096, 4096, 4096), None);
        assert!(plan(4096, 100, 64).is_some());
    }

    /// A chain (`((0 + 1) + 2) + ...`): L(p, q) = max(p, q) + 1 for p != q.
    fn chain_tallies(pairs: &[(u32, u32)]) -> Tallies {
        let mut t = Tallies::default();
        for &(p, q) in pairs {
            t.add((p, q, NO_WINDOW), p.max(q) + 1, 1, at(0, 0, 0));
        }
        t
    }

    #[test]
    fn neighbour_pairs_of_a_chain_make_one_component() {
        let kl = 50;
        let pairs: Vec<(u32, u32)> = (1..kl as u32).map(|q| (q - 1, q)).collect();
        let mut f = Forest::of(&chain_tallies(&pairs), kl);
        assert_eq!(f.components(0..kl as u32), 1);
        let (mut row, mut touched) = (vec![0u32; kl], Vec::new());
        f.row(0, u32::MAX, &mut row, &mut touched);
        for (x, &l) in row.iter().enumerate().skip(1) {
            assert_eq!(l, x as u32 + 1, "L(0, {x})");
        }
        assert_eq!(touched.len(), kl - 1);
        // below a limit: the leaves whose L with 0 is at most 10, no other
        for x in touched.drain(..) {
            row[x as usize] = 0;
        }
        f.row(0, 10, &mut row, &mut touched);
        for (x, &l) in row.iter().enumerate().skip(1) {
            assert_eq!(l, if x < 10 { x as u32 + 1 } else { 0 }, "L(0, {x}) below 10");
        }
        assert_eq!(touched.len(), 9);
        // a missing neighbour pair leaves the chain in two pieces: the
        // prefix and the leaves above the gap, which realize nothing
        let gappy: Vec<(u32, u32)> = pairs.iter().copied().filter(|&(p, _)| p != 20).collect();
        let mut g = Forest::of(&chain_tallies(&gappy), kl);
        assert_eq!(g.components(0..21), 1);
        assert_eq!(g.components(0..kl as u32), 1 + (kl - 21));
    }

    #[test]
    fn a_pair_whose_ancestor_holds_more_realizes_nothing() {
        // (0, 1) and (2, 3) are cherries; L(1, 2) = 5 says their ancestor
        // holds a fifth leaf: no node of 4 may be made
        let mut t = Tallies::default();
        for (p, q, l) in [(0, 1, 2), (2, 3, 2), (1, 2, 5)] {
            t.add((p, q, NO_WINDOW), l, 1, at(0, 0, 0));
        }
        let mut f = Forest::of(&t, 5);
        assert_eq!(f.components(0..5), 3);
        assert_eq!(f.find(1), 0);
        assert_eq!(f.find(3), 2);
    }
}
