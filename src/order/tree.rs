//! The reduction tree of one output element: an SSA list of nodes in
//! evaluation order (every operand refers to an earlier node). `k` indices
//! name terms: the product `a[k] * b[k]`, or for MX `scale=block` with
//! fma/muladd the exact dot of block `k`.

use super::{CMode, Family, InType, MmaSplit, Order, OutFmt, Reduce, Tile};
use serde::{Deserialize, Serialize};

pub type NodeId = u32;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Node {
    /// +0.
    Zero,
    /// `RN(acc + term_k)` (one rounding).
    Fma { acc: NodeId, k: u32 },
    /// `RN(acc + RN(term_k))`.
    MulAdd { acc: NodeId, k: u32 },
    /// One fused multi-term sum (tensor-core step): C plus the products of
    /// `ks` (None = a zero product padding K), F alignment bits, result RZ
    /// to `out` fraction bits.
    Fused {
        c: NodeId,
        ks: Vec<Option<u32>>,
        f: u32,
        out: u32,
    },
    /// `RN(a + b)`.
    Add { a: NodeId, b: NodeId },
    /// `fma(s, partial, acc)` with `s` the scale product of the block
    /// starting at term `k0` (1.0 without block scales).
    Promote { acc: NodeId, partial: NodeId, k0: u32 },
    /// Final conversion (RNE) to bf16/f16, widened back to f32.
    Convert { x: NodeId, to: OutFmt },
}

/// A compiled order for one K. Serialises as its node list (the canonical
/// form of a tree: two orders with equal trees are the same order for K).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    pub nodes: Vec<Node>,
    pub root: NodeId,
    /// Number of terms.
    pub k: usize,
    /// The input type of fused steps (mma families).
    pub input: Option<InType>,
}

/// Where two trees first differ: the node id, both nodes, and what differs.
/// The words are written by the renderer (`render.rs`, `Display`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Divergence {
    /// The first node id at which the two node lists differ.
    pub node: NodeId,
    /// The node of the left tree (None: the left tree has fewer nodes).
    pub left: Option<Node>,
    /// The node of the right tree (None: the right tree has fewer nodes).
    pub right: Option<Node>,
    pub what: Difference,
}

/// What differs at a [`Divergence`] node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Difference {
    /// One tree has no node at this id.
    Missing,
    /// Different operations (e.g. an `fma` step against a fresh `+0`).
    Operation,
    /// Same operation on different terms (`k`, or a fused step's `ks`).
    Terms,
    /// Same operation and terms, different operands (accumulator, C, inputs).
    Operands,
    /// Fused sums of different precision (`f` or `out` bits).
    Precision,
    /// Promotion of a different scale block (`k0`).
    ScaleBlock,
    /// Output conversion to a different format.
    Target,
}

impl Node {
    /// The terms this node consumes, in its order (fused padding omitted).
    pub fn terms(&self) -> Vec<u32> {
        match self {
            Node::Fma { k, .. } | Node::MulAdd { k, .. } => vec![*k],
            Node::Fused { ks, .. } => ks.iter().flatten().copied().collect(),
            _ => vec![],
        }
    }

    /// The nodes this node reads.
    pub fn operands(&self) -> Vec<NodeId> {
        match self {
            Node::Zero => vec![],
            Node::Fma { acc, .. } | Node::MulAdd { acc, .. } => vec![*acc],
            Node::Fused { c, .. } => vec![*c],
            Node::Add { a, b } => vec![*a, *b],
            Node::Promote { acc, partial, .. } => vec![*acc, *partial],
            Node::Convert { x, .. } => vec![*x],
        }
    }
}

/// What differs between two nodes at the same id.
fn difference(a: &Node, b: &Node) -> Difference {
    if std::mem::discriminant(a) != std::mem::discriminant(b) {
        return Difference::Operation;
    }
    match (a, b) {
        (Node::Fused { ks: x, .. }, Node::Fused { ks: y, .. }) if x != y => Difference::Terms,
        (Node::Fused { f: f1, out: o1, .. }, Node::Fused { f: f2, out: o2, .. }) if (f1, o1) != (f2, o2) => {
            Difference::Precision
        }
        (Node::Promote { k0: x, .. }, Node::Promote { k0: y, .. }) if x != y => Difference::ScaleBlock,
        (Node::Convert { to: x, .. }, Node::Convert { to: y, .. }) if x != y => Difference::Target,
        _ if a.terms() != b.terms() => Difference::Terms,
        _ => Difference::Operands,
    }
}

struct Builder {
    nodes: Vec<Node>,
}

impl Builder {
    fn push(&mut self, n: Node) -> NodeId {
        self.nodes.push(n);
        (self.nodes.len() - 1) as NodeId
    }
    fn zero(&mut self) -> NodeId {
        self.push(Node::Zero)
    }

    /// One part accumulated from +0 by the family.
    fn part(&mut self, o: &Order, ks: &[u32]) -> NodeId {
        match o.family {
            Family::Fma => {
                let mut acc = self.zero();
                for &k in ks {
                    acc = self.push(Node::Fma { acc, k });
                }
                acc
            }
            Family::MulAdd => {
                let mut acc = self.zero();
                for &k in ks {
                    acc = self.push(Node::MulAdd { acc, k });
                }
                acc
            }
            Family::Mma(m) => {
                let promote = o.promote.map(|p| p as usize);
                let block = promote.unwrap_or(usize::MAX);
                let mut fin = if promote.is_some() { Some(self.zero()) } else { None };
                let mut acc = self.zero();
                for (bi, blk) in ks.chunks(block.min(ks.len().max(1))).enumerate() {
                    if promote.is_some() && bi > 0 {
                        acc = self.zero();
                    }
                    for chunk in blk.chunks(m.k as usize) {
                        let mut pos: Vec<Option<u32>> = chunk.iter().map(|&k| Some(k)).collect();
                        pos.resize(m.k as usize, None);
                        acc = self.step(o, &pos, acc);
                    }
                    if let Some(f) = fin {
                        fin = Some(self.push(Node::Promote {
                            acc: f,
                            partial: acc,
                            k0: blk[0],
                        }));
                    }
                }
                fin.unwrap_or(acc)
            }
        }
    }

    /// One tensor-core instruction on the chunk positions `pos`.
    fn step(&mut self, o: &Order, pos: &[Option<u32>], c: NodeId) -> NodeId {
        let m = o.mma().unwrap();
        let (f, out) = (m.f, m.out);
        let halves: Vec<Vec<Option<u32>>> = match m.split {
            MmaSplit::None => vec![pos.to_vec()],
            MmaSplit::Halves => {
                let h = pos.len() / 2;
                vec![pos[..h].to_vec(), pos[h..].to_vec()]
            }
            MmaSplit::Mod4 => {
                let lo = pos
                    .iter()
                    .enumerate()
                    .filter(|(p, _)| p % 4 < 2)
                    .map(|(_, k)| *k)
                    .collect();
                let hi = pos
                    .iter()
                    .enumerate()
                    .filter(|(p, _)| p % 4 >= 2)
                    .map(|(_, k)| *k)
                    .collect();
                vec![lo, hi]
            }
        };
        let mut acc = match m.c {
            CMode::Fused => c,
            CMode::Late => self.zero(),
        };
        for ks in halves {
            acc = self.push(Node::Fused { c: acc, ks, f, out });
        }
        match m.c {
            CMode::Fused => acc,
            CMode::Late => self.push(Node::Add { a: c, b: acc }),
        }
    }

    fn reduce(&mut self, how: Reduce, mut v: Vec<NodeId>) -> NodeId {
        if v.is_empty() {
            return self.zero();
        }
        match how {
            Reduce::Serial => {
                let mut acc = v[0];
                for &x in &v[1..] {
                    acc = self.push(Node::Add { a: acc, b: x });
                }
                acc
            }
            Reduce::Pairwise => {
                while v.len() > 1 {
                    let mut next = Vec::with_capacity(v.len().div_ceil(2));
                    for pair in v.chunks(2) {
                        next.push(if pair.len() == 2 {
                            self.push(Node::Add { a: pair[0], b: pair[1] })
                        } else {
                            pair[0]
                        });
                    }
                    v = next;
                }
                v[0]
            }
            Reduce::Butterfly => {
                // all lanes at once; lane 0's value is the result
                let n = v.len();
                let mut off = n / 2;
                while off >= 1 {
                    // only lanes 0..off are still needed for lane 0's result
                    let mut next = v.clone();
                    for l in 0..off.min(n) {
                        next[l] = self.push(Node::Add { a: v[l], b: v[l ^ off] });
                    }
                    v = next;
                    off /= 2;
                }
                v[0]
            }
        }
    }
}

/// The ordered k lists of the parts, grouped: each group is combined
/// serially (fresh tiles inside a split part or a lane), then groups by
/// `reduce`.
fn parts(o: &Order, k: usize) -> Vec<Vec<Vec<u32>>> {
    if o.lanes > 1 {
        return lane_parts(o, k);
    }
    let all: Vec<u32> = (0..k as u32).collect();
    let split = o.split as usize;
    let t = o.ktile.unwrap_or(k.max(1) as u32) as usize;
    let tile_of = |x: u32| x as usize / t;
    // one pass over the terms (each part keeps increasing k order)
    let mut split_parts: Vec<Vec<u32>> = vec![Vec::new(); split];
    let chunk = o.split_chunk(k).max(1);
    for &x in &all {
        let p = if o.interleave {
            tile_of(x) % split
        } else {
            x as usize / chunk
        };
        split_parts[p].push(x);
    }
    // fresh tiles: each part cut into tiles of T from its own start (for
    // interleaved parts these are exactly the dealt k-tiles)
    let fresh = |part: &Vec<u32>| -> Vec<Vec<u32>> {
        let mut out: Vec<Vec<u32>> = part.chunks(t).map(|c| c.to_vec()).collect();
        if out.is_empty() {
            out.push(Vec::new());
        }
        out
    };
    if o.tile == Tile::Fresh {
        if split == 1 {
            // the tiles themselves are the parts
            fresh(&split_parts[0]).into_iter().map(|t| vec![t]).collect()
        } else {
            split_parts.iter().map(fresh).collect()
        }
    } else {
        split_parts.into_iter().map(|p| vec![p]).collect()
    }
}

/// The lanes: lane l takes k = l, l+L, ...; with `ktile=T;tile=fresh` its
/// terms in each k-tile [tT, (t+1)T) are one part from +0 (the lane's tiles
/// in ascending order, combined serially inside the lane). A lane with no
/// terms (K < L) is one empty part (+0).
fn lane_parts(o: &Order, k: usize) -> Vec<Vec<Vec<u32>>> {
    let l = o.lanes as usize;
    let tile = match (o.tile, o.ktile) {
        (Tile::Fresh, Some(t)) => Some(t as usize),
        _ => None,
    };
    (0..l)
        .map(|lane| {
            let ks = (lane..k).step_by(l).map(|x| x as u32);
            let Some(t) = tile else {
                return vec![ks.collect()];
            };
            let mut tiles: Vec<Vec<u32>> = Vec::new();
            let mut current = usize::MAX;
            for x in ks {
                if x as usize / t != current {
                    current = x as usize / t;
                    tiles.push(Vec::new());
                }
                tiles.last_mut().expect("a tile was pushed").push(x);
            }
            if tiles.is_empty() {
                tiles.push(Vec::new());
            }
            tiles
        })
        .collect()
}

impl Tree {
    pub fn compile(o: &Order, k: usize) -> Tree {
        let mut b = Builder { nodes: Vec::new() };
        let groups = parts(o, k);
        let mut results = Vec::with_capacity(groups.len());
        for g in groups {
            let subs: Vec<NodeId> = g.iter().map(|p| b.part(o, p)).collect();
            results.push(b.reduce(Reduce::Serial, subs));
        }
        let mut root = b.reduce(o.reduction(), results);
        if o.out != OutFmt::F32 {
            root = b.push(Node::Convert { x: root, to: o.out });
        }
        Tree {
            nodes: b.nodes,
            root,
            k,
            input: o.mma().map(|m| m.input),
        }
    }

    /// Node-by-node comparison: the first node that differs.
    pub fn diff(&self, other: &Tree) -> Option<Divergence> {
        let n = self.nodes.len().max(other.nodes.len());
        (0..n).find_map(|i| {
            let (a, b) = (self.nodes.get(i), other.nodes.get(i));
            (a != b).then(|| Divergence {
                node: i as NodeId,
                left: a.cloned(),
                right: b.cloned(),
                what: match (a, b) {
                    (Some(x), Some(y)) => difference(x, y),
                    _ => Difference::Missing,
                },
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(s: &str, k: usize) -> Tree {
        s.parse::<Order>().unwrap().compile(k)
    }

    /// Every term appears exactly once in every tree.
    #[test]
    fn every_term_used_once() {
        for s in [
            "fma",
            "fma;split=3;reduce=pairwise",
            "fma;split=4/interleave;ktile=64",
            "fma;ktile=100;tile=fresh",
            "fma;split=2;ktile=50;tile=fresh",
            "fma;lanes=32",
            "fma;lanes=4;ktile=8;tile=fresh",
            "muladd;lanes=8;ktile=64;tile=fresh;reduce=serial",
            "hopper-bf16",
            "hopper-fp8-mma-sync",
            "ampere-bf16;split=2",
            "deepgemm-fp8",
            "hopper-bf16;lanes=2;ktile=64;tile=fresh;reduce=pairwise",
            "fma;ktile=4;split=16/interleave;reduce=butterfly",
            "hopper-bf16;split=4;reduce=butterfly",
        ] {
            for k in [1usize, 7, 32, 100, 300] {
                let t = tree(s, k);
                let mut seen = vec![0; k];
                for n in &t.nodes {
                    match n {
                        Node::Fma { k, .. } | Node::MulAdd { k, .. } => seen[*k as usize] += 1,
                        Node::Fused { ks, .. } => ks.iter().flatten().for_each(|k| seen[*k as usize] += 1),
                        _ => {}
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "{s} K={k}: {seen:?}");
                // SSA: operands precede their node
                for (i, n) in t.nodes.iter().enumerate() {
                    let ops: Vec<NodeId> = match n {
                        Node::Fma { acc, .. } | Node::MulAdd { acc, .. } => vec![*acc],
                        Node::Fused { c, .. } => vec![*c],
                        Node::Add { a, b } => vec![*a, *b],
                        Node::Promote { acc, partial, .. } => vec![*acc, *partial],
                        Node::Convert { x, .. } => vec![*x],
                        Node::Zero => vec![],
                    };
                    assert!(ops.iter().all(|&o| (o as usize) < i), "{s}: node {i}");
                }
            }
        }
    }

    #[test]
    fn shapes_of_known_orders() {
        // split=4 pairwise over K=8: four 2-term chains, then (p0+p1)+(p2+p3)
        let t = tree("fma;split=4;reduce=pairwise", 8);
        let adds = t.nodes.iter().filter(|n| matches!(n, Node::Add { .. })).count();
        assert_eq!(adds, 3);
        // butterfly over 4 lanes: 2 + 1 adds reach lane 0
        let t = tree("fma;lanes=4", 8);
        assert_eq!(t.nodes.iter().filter(|n| matches!(n, Node::Add { .. })).count(), 3);
        // mod4 split: positions {0,1,4,5,...} first
        let t = tree("hopper-fp8-mma-sync", 32);
        let first = t.nodes.iter().find_map(|n| match n {
            Node::Fused { ks, .. } => Some(ks.clone()),
            _ => None,
        });
        assert_eq!(first.unwrap()[..4], [Some(0), Some(1), Some(4), Some(5)]);
        // padding of a short last chunk
        let t = tree("hopper-bf16", 20);
        let last = t.nodes.iter().rev().find_map(|n| match n {
            Node::Fused { ks, .. } => Some(ks.clone()),
            _ => None,
        });
        assert_eq!(last.unwrap().iter().filter(|k| k.is_none()).count(), 12);
    }

    /// The split parts built in one pass equal their definition: part p of a
    /// contiguous split holds the terms with `k / w == p`, `w` = ceil(K / S)
    /// rounded up to a multiple of `align` (when given), of an interleaved
    /// split the terms whose k-tile is p modulo S.
    #[test]
    fn one_pass_split_parts_match_the_definition() {
        for s in [
            "fma;split=3",
            "fma;split=7;reduce=pairwise",
            "fma;split=4/interleave;ktile=16",
            "fma;split=5/interleave;ktile=3",
            "fma;split=2;ktile=50;tile=fresh",
            "fma;split=64;ktile=1;tile=fresh",
            "hopper-bf16;split=3",
            "fma;split=3;align=16",
            "fma;split=5;align=7;reduce=pairwise",
            "hopper-bf16;split=3;align=128",
            "fma;split=2;align=8;ktile=4;tile=fresh",
        ] {
            let o: Order = s.parse().unwrap();
            for k in [0usize, 1, 2, 5, 31, 100, 257, 4096] {
                let all: Vec<u32> = (0..k as u32).collect();
                let split = o.split as usize;
                let t = o.ktile.unwrap_or(k.max(1) as u32) as usize;
                let a = o.align.unwrap_or(1) as usize;
                let chunk = (k.div_ceil(split).div_ceil(a) * a).max(1);
                let want: Vec<Vec<u32>> = (0..split)
                    .map(|p| {
                        all.iter()
                            .copied()
                            .filter(|&x| {
                                if o.interleave {
                                    (x as usize / t) % split == p
                                } else {
                                    x as usize / chunk == p
                                }
                            })
                            .collect()
                    })
                    .collect();
                let got = parts(&o, k);
                let flat_got: Vec<u32> = got.iter().flatten().flatten().copied().collect();
                let flat_want: Vec<u32> = want.iter().flatten().copied().collect();
                assert_eq!(flat_got, flat_want, "{s} K={k}");
                if o.tile == Tile::Carry {
                    assert_eq!(got, want.into_iter().map(|p| vec![p]).collect::<Vec<_>>(), "{s} K={k}");
                }
            }
        }
    }

    /// Aligned split parts: K = 4096 in 3 parts of 11 x 128 (the last
    /// shorter), and a part left empty where K runs out first.
    #[test]
    fn aligned_split_parts_start_on_multiples_of_align() {
        let sizes = |spec: &str, k: usize| -> Vec<usize> {
            let o: Order = spec.parse().unwrap();
            parts(&o, k).iter().map(|p| p.iter().map(Vec::len).sum()).collect()
        };
        assert_eq!(sizes("fma;split=3;align=128", 4096), vec![1408, 1408, 1280]);
        assert_eq!(sizes("fma;split=3", 4096), vec![1366, 1366, 1364]);
        assert_eq!(sizes("fma;split=3;align=128", 200), vec![128, 72, 0]);
        assert_eq!(sizes("fma;split=4;align=128", 4096), sizes("fma;split=4", 4096));
    }

    /// Lanes cut into fresh k-tiles: lane l's parts are its terms grouped
    /// by k-tile (k / T), each group in ascending k, the groups in
    /// ascending tile order; an empty lane is one empty part.
    #[test]
    fn lane_tiles_match_the_definition() {
        for s in [
            "fma;lanes=4;ktile=8;tile=fresh",
            "fma;lanes=16;ktile=512;tile=fresh;reduce=serial",
            "fma;lanes=3;ktile=3;tile=fresh;reduce=serial",
            "fma;lanes=8;ktile=64;tile=fresh;reduce=pairwise",
        ] {
            let o: Order = s.parse().unwrap();
            let (l, t) = (o.lanes as usize, o.ktile.unwrap() as usize);
            for k in [0usize, 1, 2, 5, 31, 100, 257, 4096, 4100] {
                let got = parts(&o, k);
                assert_eq!(got.len(), l, "{s} K={k}");
                for (lane, tiles) in got.iter().enumerate() {
                    let mine: Vec<u32> = (0..k as u32).filter(|x| *x as usize % l == lane).collect();
                    let mut want: Vec<Vec<u32>> = Vec::new();
                    for tile in 0..k.div_ceil(t) {
                        let ks: Vec<u32> = mine.iter().copied().filter(|&x| x as usize / t == tile).collect();
                        if !ks.is_empty() {
                            want.push(ks);
                        }
                    }
                    if want.is_empty() {
                        want.push(Vec::new());
                    }
                    assert_eq!(tiles, &want, "{s} K={k} lane {lane}");
                }
            }
        }
        // the cuBLAS GEMV reading at K = 4096: 16 lanes of 8 tiles of 32 terms
        let o: Order = "fma;lanes=16;ktile=512;tile=fresh;reduce=serial".parse().unwrap();
        let p = parts(&o, 4096);
        assert!(p
            .iter()
            .all(|lane| lane.len() == 8 && lane.iter().all(|t| t.len() == 32)));
        assert_eq!(p[3][1][..3], [515, 531, 547]);
        // the tree: 128 chains of 32 steps, 16 x 7 adds inside the lanes, 15 across
        let t = o.compile(4096);
        let adds = t.nodes.iter().filter(|n| matches!(n, Node::Add { .. })).count();
        assert_eq!(adds, 16 * 7 + 15);
        assert_eq!(t.nodes.iter().filter(|n| matches!(n, Node::Zero)).count(), 128);
    }

    /// `check_size`'s estimate bounds what compile allocates (nodes,
    /// fused-step slots, term lists), and it refuses the sizes that used to
    /// abort.
    #[test]
    fn size_bound_covers_compiled_trees() {
        for s in [
            "fma",
            "muladd;split=9;reduce=pairwise",
            "fma;split=4/interleave;ktile=8",
            "fma;ktile=3;tile=fresh;split=5",
            "fma;lanes=32",
            "fma;lanes=8;reduce=serial",
            "fma;lanes=16;ktile=512;tile=fresh;reduce=serial",
            "fma;lanes=4;ktile=4;tile=fresh",
            "hopper-bf16;lanes=4;ktile=64;tile=fresh;promote=32",
            "hopper-bf16",
            "hopper-fp8-mma-sync",
            "ampere-bf16;split=3;reduce=pairwise",
            "deepgemm-fp8",
            "mma(k=64,f=25,split=mod4,c=late);promote=128;split=3",
            "blackwell-mxf8f6f4;out=bf16",
            "fma;ktile=8;split=64/interleave;reduce=butterfly",
            "hopper-bf16;ktile=32;tile=fresh;split=8;reduce=butterfly",
        ] {
            let o: Order = s.parse().unwrap();
            for k in [0usize, 1, 31, 64, 1000, 4096] {
                let t = o.compile(k);
                let slots: usize = t
                    .nodes
                    .iter()
                    .map(|n| match n {
                        Node::Fused { ks, .. } => ks.len(),
                        _ => 0,
                    })
                    .sum();
                // nodes, fused-step slots, and the term and part lists (2K)
                let used = (t.nodes.len() + slots + 2 * k) as u128;
                let bound = o.tree_size_bound(k);
                assert!(used <= bound, "{s} K={k}: {used} > bound {bound}");
                assert!(o.check_size(k).is_ok(), "{s} K={k}");
            }
        }
        use crate::limits::MAX_K;
        // every preset and the plain families fit at the largest K
        for s in ["fma", "muladd", "fma;lanes=32", "fma;split=1024;reduce=pairwise"]
            .into_iter()
            .chain(crate::order::PRESETS.iter().map(|p| p.0))
        {
            let o: Order = s.parse().unwrap();
            assert!(o.check_size(MAX_K).is_ok(), "{s}: {:?}", o.check_size(MAX_K));
        }
        for (s, k) in [
            ("fma", MAX_K + 1),
            ("fma", usize::MAX),
            ("fma;split=4000000000", 64),
            ("fma;lanes=2147483648", 64),
            ("mma(k=4000000000,f=25)", 64),
            ("fma;ktile=1;tile=fresh", MAX_K),
            ("fma;lanes=2;ktile=2;tile=fresh", MAX_K),
        ] {
            let e = s.parse::<Order>().unwrap().check_size(k).unwrap_err().to_string();
            assert!(e.contains("limit"), "{s} K={k}: {e}");
        }
    }

    #[test]
    fn diff_names_the_first_divergent_node() {
        let a = tree("fma", 1024);
        let b = tree("fma;split=4", 1024);
        let d = a.diff(&b).unwrap();
        assert_eq!(d.node, 257);
        assert_eq!(d.left, Some(Node::Fma { acc: 256, k: 256 }));
        assert_eq!(d.right, Some(Node::Zero));
        assert_eq!(d.what, Difference::Operation);
        assert!(a.diff(&tree("fma", 1024)).is_none());
    }

    #[test]
    fn diff_says_what_differs() {
        let what = |x: &str, y: &str, k: usize| tree(x, k).diff(&tree(y, k)).map(|d| d.what);
        assert_eq!(what("fma", "muladd", 8), Some(Difference::Operation));
        assert_eq!(what("hopper-bf16", "ampere-bf16", 64), Some(Difference::Terms));
        assert_eq!(what("fma;out=bf16", "fma;out=f16", 8), Some(Difference::Target));
        assert_eq!(what("fma", "fma;out=bf16", 8), Some(Difference::Missing));
        assert_eq!(
            what("mma(k=16,f=25)", "mma(k=16,f=24)", 64),
            Some(Difference::Precision)
        );
        // interleaved split: the first part takes other terms
        assert_eq!(
            what("fma;split=2;ktile=2", "fma;split=2/interleave;ktile=2", 8),
            Some(Difference::Terms)
        );
    }

    #[test]
    fn trees_serialise_as_their_node_list() {
        let t = tree("fma;split=2;reduce=pairwise;out=bf16", 6);
        let j = serde_json::to_string(&t).unwrap();
        assert!(j.contains(r#"{"op":"fma","acc":0,"k":0}"#), "{j}");
        let back: Tree = serde_json::from_str(&j).unwrap();
        assert_eq!(back, t);
    }
}
