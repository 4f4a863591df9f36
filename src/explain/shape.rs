//! The summation-tree shape of a reduction tree: what probes can see.
//!
//! Leaves are the terms `0..K`; an internal node is one addition that
//! rounds (an `fma` or `muladd` step, a fused multi-term sum, an add, a
//! promotion), its children the subtrees it adds. `+0` starts, zero
//! padding and output conversions are invisible, and a node with a single
//! child is that child. Children are unordered: probes that count swamped
//! terms cannot tell `a + b` from `b + a`, nor an `fma` step from a
//! `muladd` step (identification tells those apart afterwards).

use crate::order::{Node, Tree};

/// A child of a shape node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Child {
    Leaf(u32),
    Node(usize),
}

/// An unordered tree over the leaves `0..k`; every internal node has at
/// least two children.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Shape {
    pub k: usize,
    /// Internal nodes; children refer to earlier nodes.
    pub nodes: Vec<Vec<Child>>,
    pub root: Option<Child>,
}

impl PartialEq for Shape {
    /// Same leaves under the same unordered structure.
    fn eq(&self, other: &Shape) -> bool {
        self.k == other.k && self.canonical() == other.canonical()
    }
}

impl Shape {
    /// The shape of a compiled tree.
    pub fn of_tree(t: &Tree) -> Shape {
        let mut nodes: Vec<Vec<Child>> = Vec::new();
        let mut map: Vec<Option<Child>> = Vec::with_capacity(t.nodes.len());
        for n in &t.nodes {
            let mut ch: Vec<Child> = Vec::new();
            let mut add = |c: Option<Child>| ch.extend(c);
            match n {
                Node::Zero => {}
                Node::Fma { acc, k } | Node::MulAdd { acc, k } => {
                    add(map[*acc as usize]);
                    add(Some(Child::Leaf(*k)));
                }
                Node::Fused { c, ks, .. } => {
                    add(map[*c as usize]);
                    for k in ks.iter().flatten() {
                        add(Some(Child::Leaf(*k)));
                    }
                }
                Node::Add { a, b } => {
                    add(map[*a as usize]);
                    add(map[*b as usize]);
                }
                Node::Promote { acc, partial, .. } => {
                    add(map[*acc as usize]);
                    add(map[*partial as usize]);
                }
                Node::Convert { x, .. } => add(map[*x as usize]),
            }
            map.push(match ch.len() {
                0 => None,
                1 => Some(ch[0]),
                _ => {
                    nodes.push(ch);
                    Some(Child::Node(nodes.len() - 1))
                }
            });
        }
        Shape {
            k: t.k,
            nodes,
            root: map.get(t.root as usize).copied().flatten(),
        }
    }

    /// (smallest leaf, number of leaves) of every internal node.
    fn keys(&self) -> Vec<(u32, u32)> {
        let mut keys: Vec<(u32, u32)> = Vec::with_capacity(self.nodes.len());
        for ch in &self.nodes {
            let (mut lo, mut size) = (u32::MAX, 0u32);
            for c in ch {
                let (l, s) = match c {
                    Child::Leaf(k) => (*k, 1),
                    Child::Node(i) => keys[*i],
                };
                lo = lo.min(l);
                size += s;
            }
            keys.push((lo, size));
        }
        keys
    }

    /// A canonical form: every leaf and internal node, named by its
    /// (smallest leaf, number of leaves) — unique within a tree — with its
    /// parent's name, sorted. Equal forms, equal unordered trees.
    pub fn canonical(&self) -> Vec<[u32; 4]> {
        let keys = self.keys();
        let mut v: Vec<[u32; 4]> = Vec::new();
        for (i, ch) in self.nodes.iter().enumerate() {
            let (pl, ps) = keys[i];
            for c in ch {
                let (l, s) = match c {
                    Child::Leaf(k) => (*k, 1),
                    Child::Node(j) => keys[*j],
                };
                v.push([l, s, pl, ps]);
            }
        }
        if let Some(r) = self.root {
            let (l, s) = match r {
                Child::Leaf(k) => (k, 1),
                Child::Node(j) => keys[j],
            };
            v.push([l, s, u32::MAX, 0]);
        }
        v.sort_unstable();
        v
    }

    /// Leaves under each internal node, and each leaf's parent node.
    fn parents(&self) -> (Vec<Option<usize>>, Vec<Option<usize>>, Vec<u32>) {
        let mut leaf_parent = vec![None; self.k];
        let mut node_parent = vec![None; self.nodes.len()];
        for (i, ch) in self.nodes.iter().enumerate() {
            for c in ch {
                match c {
                    Child::Leaf(k) => {
                        if let Some(p) = leaf_parent.get_mut(*k as usize) {
                            *p = Some(i);
                        }
                    }
                    Child::Node(j) => node_parent[*j] = Some(i),
                }
            }
        }
        let sizes = self.keys().into_iter().map(|(_, s)| s).collect();
        (leaf_parent, node_parent, sizes)
    }

    /// An oracle for `L(p, q)`: the number of leaves under the lowest
    /// common ancestor of leaves p and q (what a probe measures).
    pub fn lca_sizes(&self) -> LcaSizes {
        let (leaf_parent, node_parent, sizes) = self.parents();
        let n = self.nodes.len();
        // the Euler tour of each tree (a node, then again after each child
        // node), its first position per node, and each node's depth
        let (mut tour, mut first, mut depth, mut tree) = (Vec::new(), vec![0u32; n], vec![0u32; n], vec![0u32; n]);
        for r in (0..n).filter(|&i| node_parent[i].is_none()) {
            let mut stack: Vec<(usize, usize)> = vec![(r, 0)];
            first[r] = tour.len() as u32;
            tree[r] = r as u32;
            tour.push(r as u32);
            while let Some(&mut (v, ref mut next)) = stack.last_mut() {
                let child = self.nodes[v][*next..].iter().position(|c| matches!(c, Child::Node(_)));
                match child {
                    Some(off) => {
                        let Child::Node(c) = self.nodes[v][*next + off] else {
                            unreachable!("position found a node")
                        };
                        *next += off + 1;
                        first[c] = tour.len() as u32;
                        depth[c] = depth[v] + 1;
                        tree[c] = r as u32;
                        tour.push(c as u32);
                        stack.push((c, 0));
                    }
                    None => {
                        stack.pop();
                        if let Some(&(u, _)) = stack.last() {
                            tour.push(u as u32);
                        }
                    }
                }
            }
        }
        // sparse table: level j holds the shallowest node of tour[i..i + 2^j]
        let mut levels = vec![tour];
        while 1usize << levels.len() <= levels[0].len() {
            let (prev, half) = (levels.last().expect("level 0"), 1usize << (levels.len() - 1));
            let next = (0..prev.len() - half)
                .map(|i| {
                    let (x, y) = (prev[i], prev[i + half]);
                    if depth[y as usize] < depth[x as usize] {
                        y
                    } else {
                        x
                    }
                })
                .collect();
            levels.push(next);
        }
        LcaSizes {
            leaf_parent,
            node_parent,
            sizes,
            tree,
            first,
            depth,
            levels,
        }
    }

    /// `L(p, x)` for every leaf x (0 for p itself and for leaves not in
    /// the tree, None when p is not in it): one walk up from p, each leaf
    /// visited once, O(K).
    pub fn lca_row(&self, lca: &LcaSizes, p: u32) -> Option<Vec<u32>> {
        let mut out = vec![0u32; self.k];
        let mut prev = Child::Leaf(p);
        let mut a = (*lca.leaf_parent.get(p as usize)?)?;
        let mut stack: Vec<Child> = Vec::new();
        loop {
            stack.extend(self.nodes[a].iter().filter(|c| **c != prev));
            while let Some(c) = stack.pop() {
                match c {
                    Child::Leaf(x) => {
                        if let Some(o) = out.get_mut(x as usize) {
                            *o = lca.sizes[a];
                        }
                    }
                    Child::Node(j) => stack.extend(self.nodes[j].iter().copied()),
                }
            }
            prev = Child::Node(a);
            match lca.node_parent[a] {
                Some(b) => a = b,
                None => return Some(out),
            }
        }
    }

    /// The shape restricted to some leaves, relabelled: `map(x)` is leaf
    /// x's new label in `0..k` (None: dropped). Nodes left with one child
    /// are that child; with none, they vanish. What probes see when only
    /// the mapped terms carry units (MX probes: one element per block).
    pub fn restrict(&self, k: usize, map: impl Fn(u32) -> Option<u32>) -> Shape {
        let mut nodes: Vec<Vec<Child>> = Vec::new();
        let mut new: Vec<Option<Child>> = Vec::with_capacity(self.nodes.len());
        let get = |new: &Vec<Option<Child>>, c: &Child| match c {
            Child::Leaf(x) => map(*x).map(Child::Leaf),
            Child::Node(j) => new[*j],
        };
        for ch in &self.nodes {
            let kept: Vec<Child> = ch.iter().filter_map(|c| get(&new, c)).collect();
            new.push(match kept.len() {
                0 => None,
                1 => Some(kept[0]),
                _ => {
                    nodes.push(kept);
                    Some(Child::Node(nodes.len() - 1))
                }
            });
        }
        let root = self.root.and_then(|r| get(&new, &r));
        Shape { k, nodes, root }
    }

    /// How many leaves the tree holds.
    pub fn leaves(&self) -> usize {
        self.nodes
            .iter()
            .flatten()
            .filter(|c| matches!(c, Child::Leaf(_)))
            .count()
            + usize::from(matches!(self.root, Some(Child::Leaf(_))))
    }

    /// The fewest probe answers that prove this shape to probes that see
    /// only lowest common ancestors (FPRev's, `reveal`'s): the pairs of
    /// children of every node with three or more, each pair once
    /// (docs/EXPLAIN.md, "What a wide node costs"). A tree that joins two
    /// children a, b of such a node first gives other answers only where
    /// the big values lie in a and b alone, so every such finer tree needs
    /// its own answer. Binary nodes add nothing here (a chain's K - 2 is
    /// another argument: docs/PERFORMANCE.md, "Two probes a line").
    pub fn sibling_pairs(&self) -> u64 {
        self.nodes
            .iter()
            .map(|ch| ch.len() as u64)
            .filter(|&c| c >= 3)
            .map(|c| c * (c - 1) / 2)
            .sum()
    }

    /// One line per internal node: `n7 = sum(n3, k12, k13)`.
    pub fn listing(&self) -> String {
        let mut s = String::new();
        for (i, ch) in self.nodes.iter().enumerate() {
            let parts: Vec<String> = ch
                .iter()
                .map(|c| match c {
                    Child::Leaf(k) => format!("k{k}"),
                    Child::Node(j) => format!("n{j}"),
                })
                .collect();
            s.push_str(&format!("n{i} = sum({})\n", parts.join(", ")));
        }
        match self.root {
            Some(Child::Node(j)) => s.push_str(&format!("root = n{j}")),
            Some(Child::Leaf(k)) => s.push_str(&format!("root = k{k}")),
            None => s.push_str("root = +0"),
        }
        s
    }
}

/// How a subtree combines its terms ([`Shape::form`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Form {
    /// One term.
    Term,
    /// A chain: each addition adds the previous result and fresh terms
    /// (`fan_in` 2: one term at a time; more: fused sums of `fan_in - 1`);
    /// `ascending`: the terms join in increasing k (Some(false):
    /// decreasing; None: neither).
    Chain { fan_in: usize, ascending: Option<bool> },
    /// Balanced pairwise additions (depth ceil(log2(terms))).
    Pairwise,
    /// Anything else, by its depth and widest addition.
    Mixed { depth: usize, fan_in: usize },
}

/// One subtree: the terms it covers and how it combines them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Part {
    /// Smallest and largest term.
    pub lo: u32,
    pub hi: u32,
    pub terms: usize,
    /// The terms' spacing when they are evenly spaced (1: contiguous).
    pub step: Option<u32>,
    pub form: Form,
}

/// The nearest family order by tree ([`Shape::distance`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ShapeMiss {
    pub order: crate::order::Order,
    /// Tree edges (child, parent) in one tree and not the other.
    pub edges_differ: usize,
    /// The first edge of the recovered tree the order lacks: the child's
    /// (smallest term, terms) and its parent's.
    pub first: Option<[u32; 4]>,
}

impl Shape {
    /// The terms under `c`, sorted.
    fn terms(&self, c: Child) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack = vec![c];
        while let Some(x) = stack.pop() {
            match x {
                Child::Leaf(k) => out.push(k),
                Child::Node(i) => stack.extend(self.nodes[i].iter().copied()),
            }
        }
        out.sort_unstable();
        out
    }

    /// How the subtree under `c` combines its terms.
    pub fn form(&self, c: Child) -> Form {
        let Child::Node(root) = c else {
            return Form::Term;
        };
        // depth, widest addition, and whether every node has at most one
        // node child (a chain), over the subtree
        let (mut depth, mut fan_in, mut chain, mut leaves) = (0usize, 0usize, true, 0usize);
        let mut stack = vec![(root, 1usize)];
        while let Some((i, d)) = stack.pop() {
            depth = depth.max(d);
            let ch = &self.nodes[i];
            fan_in = fan_in.max(ch.len());
            let mut inner = 0;
            for x in ch {
                match x {
                    Child::Node(j) => {
                        inner += 1;
                        stack.push((*j, d + 1));
                    }
                    Child::Leaf(_) => leaves += 1,
                }
            }
            chain &= inner <= 1;
        }
        let balanced = (leaves.max(1) as f64).log2().ceil() as usize;
        if chain && (depth > 1 || !(fan_in == 2 && depth == balanced)) {
            Form::Chain {
                fan_in,
                ascending: self.join_order(root),
            }
        } else if fan_in == 2 && depth == balanced {
            Form::Pairwise
        } else {
            Form::Mixed { depth, fan_in }
        }
    }

    /// A chain's terms in the order they join (deepest addition first):
    /// Some(true) increasing k, Some(false) decreasing, None neither.
    fn join_order(&self, root: usize) -> Option<bool> {
        let mut joined: Vec<Vec<u32>> = Vec::new();
        let mut at = Some(root);
        while let Some(i) = at {
            at = None;
            let mut here = Vec::new();
            for c in &self.nodes[i] {
                match c {
                    Child::Leaf(k) => here.push(*k),
                    Child::Node(j) => at = Some(*j),
                }
            }
            here.sort_unstable();
            joined.push(here);
        }
        // the terms of one addition join together (unordered)
        let groups: Vec<(u32, u32)> = joined
            .into_iter()
            .rev()
            .filter(|g| !g.is_empty())
            .map(|g| (g[0], g[g.len() - 1]))
            .collect();
        if groups.windows(2).all(|w| w[0].1 < w[1].0) {
            Some(true)
        } else if groups.windows(2).all(|w| w[0].0 > w[1].1) {
            Some(false)
        } else {
            None
        }
    }

    /// The subtree under `c` as a [`Part`].
    pub fn part(&self, c: Child) -> Part {
        let t = self.terms(c);
        let (lo, hi) = (t.first().copied().unwrap_or(0), t.last().copied().unwrap_or(0));
        let step = match t.len() {
            0 | 1 => Some(1),
            _ => {
                let s = t[1] - t[0];
                t.windows(2).all(|w| w[1] - w[0] == s).then_some(s)
            }
        };
        Part {
            lo,
            hi,
            terms: t.len(),
            step,
            form: self.form(c),
        }
    }

    /// The parts the root adds (its children; one part: the whole tree
    /// when the root is a chain or a single term).
    pub fn root_parts(&self) -> Vec<Part> {
        match self.root {
            None => Vec::new(),
            Some(r @ Child::Leaf(_)) => vec![self.part(r)],
            Some(r @ Child::Node(i)) => match self.form(r) {
                Form::Chain { .. } => vec![self.part(r)],
                _ => self.nodes[i].iter().map(|&c| self.part(c)).collect(),
            },
        }
    }

    /// The distance from this tree to `other`'s canonical form: edges in
    /// one and not the other, and the first edge of this tree `other`
    /// lacks.
    pub fn distance(canon: &[[u32; 4]], other: &[[u32; 4]]) -> (usize, Option<[u32; 4]>) {
        Shape::distance_within(canon, other, usize::MAX).expect("no distance exceeds usize::MAX")
    }

    /// [`Shape::distance`] where it is at most `cutoff`, else None (found
    /// as soon as the edges in one and not the other pass the cutoff).
    pub fn distance_within(canon: &[[u32; 4]], other: &[[u32; 4]], cutoff: usize) -> Option<(usize, Option<[u32; 4]>)> {
        if canon.len().abs_diff(other.len()) > cutoff {
            return None;
        }
        // the edges as integers in the same order (a merge of two sorted
        // lists; branch-free steps)
        let key = |e: &[u32; 4]| (e[0] as u128) << 96 | (e[1] as u128) << 64 | (e[2] as u128) << 32 | e[3] as u128;
        let (mut i, mut j, mut differ, mut first) = (0, 0, 0, None);
        while i < canon.len() && j < other.len() {
            if differ > cutoff {
                return None;
            }
            let (x, y) = (key(&canon[i]), key(&other[j]));
            if x < y && first.is_none() {
                first = Some(canon[i]);
            }
            differ += (x != y) as usize;
            i += (x <= y) as usize;
            j += (x >= y) as usize;
        }
        if i < canon.len() {
            first = first.or(Some(canon[i]));
        }
        differ += (canon.len() - i) + (other.len() - j);
        (differ <= cutoff).then_some((differ, first))
    }
}

impl Shape {
    /// Reads a listing in the form [`Shape::listing`] writes (what `mxbi
    /// reveal --json` stores as `tree`): one `nI = sum(C, C, ...)` line per
    /// internal node, I counting from 0 in line order, each child `kX` (a
    /// leaf, X < `k`) or `nJ` (an earlier node), at least two children,
    /// every leaf and node the child of at most one node; then one
    /// `root = nJ`, `root = kX` or `root = +0` line, the last. Blank lines
    /// and surrounding whitespace are ignored. An error names the line.
    pub fn parse_listing(text: &str, k: usize) -> Result<Shape, String> {
        let mut nodes: Vec<Vec<Child>> = Vec::new();
        let mut leaf_used = vec![false; k];
        let mut node_used: Vec<bool> = Vec::new();
        let mut root: Option<Option<Child>> = None;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let at = |msg: String| format!("listing line {}: {msg}: `{line}`", i + 1);
            if root.is_some() {
                return Err(at("a line after the root line".into()));
            }
            let (lhs, rhs) = line
                .split_once('=')
                .map(|(l, r)| (l.trim(), r.trim()))
                .ok_or_else(|| at("expected `nI = sum(...)` or `root = ...`".into()))?;
            let child = |c: &str, nodes: &Vec<Vec<Child>>| -> Result<Child, String> {
                let num = |d: &str| {
                    d.parse::<usize>()
                        .ok()
                        .filter(|_| d.bytes().all(|b| b.is_ascii_digit()))
                };
                match (c.strip_prefix('k').and_then(num), c.strip_prefix('n').and_then(num)) {
                    (Some(x), _) if x < k => Ok(Child::Leaf(x as u32)),
                    (Some(x), _) => Err(at(format!("leaf k{x} is not below K = {k}"))),
                    (_, Some(j)) if j < nodes.len() => Ok(Child::Node(j)),
                    (_, Some(j)) => Err(at(format!("n{j} is not an earlier node"))),
                    _ => Err(at(format!("`{c}` is not a child (kX or nJ)"))),
                }
            };
            if lhs == "root" {
                let r = if rhs == "+0" { None } else { Some(child(rhs, &nodes)?) };
                let has_parent = match r {
                    Some(Child::Leaf(x)) => leaf_used[x as usize],
                    Some(Child::Node(j)) => node_used[j],
                    None => false,
                };
                if has_parent {
                    return Err(at("the root has a parent".into()));
                }
                root = Some(r);
                continue;
            }
            if lhs != format!("n{}", nodes.len()) {
                return Err(at(format!("expected node n{}", nodes.len())));
            }
            let args = rhs
                .strip_prefix("sum(")
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| at("expected sum(...)".into()))?;
            let mut ch = Vec::new();
            for c in args.split(',') {
                let c = child(c.trim(), &nodes)?;
                let used = match c {
                    Child::Leaf(x) => &mut leaf_used[x as usize],
                    Child::Node(j) => &mut node_used[j],
                };
                if std::mem::replace(used, true) {
                    return Err(at("a child that already has a parent".into()));
                }
                ch.push(c);
            }
            if ch.len() < 2 {
                return Err(at("a sum of fewer than two children".into()));
            }
            nodes.push(ch);
            node_used.push(false);
        }
        let root = root.ok_or_else(|| "listing: no `root = ...` line".to_string())?;
        Ok(Shape { k, nodes, root })
    }
}

/// See [`Shape::lca_sizes`]: each query is one range-minimum lookup over
/// the Euler tour (O(1)), so checking every answer of a grid launch costs
/// no walk up a chain.
pub struct LcaSizes {
    leaf_parent: Vec<Option<usize>>,
    node_parent: Vec<Option<usize>>,
    sizes: Vec<u32>,
    /// Per node: the root of its tree (a shape may be a forest while it is
    /// built), its first position in the tour, its depth.
    tree: Vec<u32>,
    first: Vec<u32>,
    depth: Vec<u32>,
    /// The Euler tour (level 0) and its sparse table.
    levels: Vec<Vec<u32>>,
}

impl LcaSizes {
    /// `L(p, q)`, or None when a leaf is not in the tree (or the two are
    /// in different trees of a forest).
    pub fn get(&self, p: u32, q: u32) -> Option<u32> {
        let a = (*self.leaf_parent.get(p as usize)?)?;
        let b = (*self.leaf_parent.get(q as usize)?)?;
        if self.tree[a] != self.tree[b] {
            return None;
        }
        let (fa, fb) = (self.first[a] as usize, self.first[b] as usize);
        let (i, j) = (fa.min(fb), fa.max(fb));
        let lvl = (usize::BITS - 1 - (j - i + 1).leading_zeros()) as usize;
        let (x, y) = (self.levels[lvl][i], self.levels[lvl][j + 1 - (1 << lvl)]);
        let top = if self.depth[y as usize] < self.depth[x as usize] {
            y
        } else {
            x
        };
        Some(self.sizes[top as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::Order;

    fn shape(s: &str, k: usize) -> Shape {
        Shape::of_tree(&s.parse::<Order>().unwrap().compile(k))
    }

    #[test]
    fn distances_within_a_cutoff_are_the_distances() {
        let specs = [
            "fma",
            "fma;split=4",
            "fma;ktile=4;split=8/interleave",
            "fma;ktile=8;split=4;reduce=pairwise",
            "fma;split=64;reduce=pairwise",
            "mma(k=16,f=25)",
            "mma(k=8,f=25);split=2",
        ];
        let canon: Vec<Vec<[u32; 4]>> = specs.iter().map(|s| shape(s, 64).canonical()).collect();
        // the definition: edges in one and not the other, and the least
        // edge of the first the second lacks
        let by_sets = |x: &[[u32; 4]], y: &[[u32; 4]]| {
            let (sx, sy): (std::collections::BTreeSet<_>, std::collections::BTreeSet<_>) =
                (x.iter().copied().collect(), y.iter().copied().collect());
            (sx.symmetric_difference(&sy).count(), sx.difference(&sy).next().copied())
        };
        for x in &canon {
            for y in &canon {
                let full = Shape::distance(x, y);
                assert_eq!(full, by_sets(x, y));
                for cutoff in [0, 1, full.0.saturating_sub(1), full.0, full.0 + 1, usize::MAX] {
                    let within = Shape::distance_within(x, y, cutoff);
                    assert_eq!(within, (full.0 <= cutoff).then_some(full), "cutoff {cutoff}");
                }
            }
        }
        assert!(canon.iter().any(|x| Shape::distance(x, &canon[0]).0 > 0));
        // one a prefix of the other: what is left of the first after the merge
        for x in &canon {
            let half = &x[..x.len() / 2];
            assert_eq!(Shape::distance(x, half), by_sets(x, half));
            assert_eq!(Shape::distance(x, &[]), (x.len(), x.first().copied()));
            assert_eq!(Shape::distance(half, x), by_sets(half, x));
        }
    }

    #[test]
    fn numerics_are_invisible_structure_is_not() {
        assert_eq!(shape("fma", 64), shape("muladd", 64));
        assert_eq!(shape("fma", 64), shape("fma;out=bf16", 64));
        assert_ne!(shape("fma", 64), shape("fma;split=2", 64));
        // two parts summed serially or pairwise: the same tree
        assert_eq!(shape("fma;split=2", 64), shape("fma;split=2;reduce=pairwise", 64));
        assert_ne!(shape("fma;split=4", 64), shape("fma;split=4;reduce=pairwise", 64));
        assert_ne!(shape("hopper-bf16", 64), shape("ampere-bf16", 64));
        assert_eq!(shape("hopper-bf16", 64), shape("mma(k=16,f=24)", 64));
    }

    #[test]
    fn lca_rows_agree_with_lca_sizes_and_restriction_keeps_structure() {
        for spec in [
            "fma",
            "fma;split=4;reduce=pairwise",
            "hopper-bf16",
            "fma;lanes=8",
            "fma;ktile=4;split=4/interleave;reduce=butterfly",
        ] {
            let s = shape(spec, 64);
            let l = s.lca_sizes();
            for p in [0u32, 5, 17, 63] {
                let row = s.lca_row(&l, p).unwrap();
                for x in 0..64u32 {
                    let want = if x == p { 0 } else { l.get(p, x).unwrap() };
                    assert_eq!(row[x as usize], want, "{spec} L({p}, {x})");
                }
            }
        }
        // a chain over 128 terms seen at every 32nd term is a chain over 4
        let r = shape("fma", 128).restrict(4, |x| (x % 32 == 0).then_some(x / 32));
        assert!(r == shape("fma", 4));
        let r = shape("fma;split=2;reduce=pairwise", 128).restrict(4, |x| (x % 32 == 0).then_some(x / 32));
        assert!(r == shape("fma;split=2", 4));
        assert!(r != shape("fma", 4));
    }

    /// `parse_listing` reads back what `listing` writes, and refuses
    /// malformed listings with the line.
    #[test]
    fn listings_parse_back() {
        for (spec, k) in [
            ("fma", 64),
            ("fma;split=4;reduce=pairwise", 100),
            ("hopper-bf16", 64),
            ("fma;lanes=8", 64),
            ("fma;lanes=4;ktile=16;tile=fresh;reduce=serial", 70),
            ("fma", 1),
            ("fma", 0),
        ] {
            let s = shape(spec, k);
            let back = Shape::parse_listing(&s.listing(), k).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert!(back == s, "{spec}");
            assert_eq!(back.listing(), s.listing(), "{spec}");
        }
        // a listing tells shapes apart: two leaves swapped across lanes
        let s = shape("fma;lanes=4;ktile=16;tile=fresh;reduce=serial", 64);
        let text = s
            .listing()
            .replace("(k0, k4)", "(k1, k4)")
            .replacen("(k1, k5)", "(k0, k5)", 1);
        let swapped = Shape::parse_listing(&text, 64).unwrap();
        assert!(swapped != s);
        let err = |t: &str| Shape::parse_listing(t, 8).unwrap_err();
        assert!(err("n0 = sum(k0, k1)").contains("no `root"));
        assert!(err("n1 = sum(k0, k1)\nroot = n1").contains("expected node n0"));
        assert!(err("n0 = sum(k0, k9)\nroot = n0").contains("not below K"));
        assert!(err("n0 = sum(k0, n0)\nroot = n0").contains("earlier node"));
        assert!(err("n0 = sum(k0, k0)\nroot = n0").contains("already has a parent"));
        assert!(err("n0 = sum(k0)\nroot = n0").contains("fewer than two"));
        assert!(err("n0 = add(k0, k1)\nroot = n0").contains("sum(...)"));
        assert!(err("n0 = sum(k0, x1)\nroot = n0").contains("not a child"));
        assert!(err("n0 = sum(k0, k+1)\nroot = n0").contains("not a child"));
        assert!(err("root = k0\nn0 = sum(k1, k2)").contains("after the root"));
        assert!(err("n0 = sum(k0, k1)\nn1 = sum(n0, k2)\nroot = n0").contains("the root has a parent"));
        assert!(Shape::parse_listing("\n n0 = sum(k0, k1) \n\nroot = n0\n", 8).is_ok());
    }

    #[test]
    fn lca_sizes_of_a_chain_and_a_split() {
        let l = shape("fma", 8).lca_sizes();
        assert_eq!(l.get(0, 1), Some(2));
        assert_eq!(l.get(3, 5), Some(6));
        let l = shape("fma;split=2", 8).lca_sizes();
        assert_eq!(l.get(4, 5), Some(2));
        assert_eq!(l.get(0, 5), Some(8));
        let l = shape("hopper-bf16", 32).lca_sizes();
        assert_eq!(l.get(0, 15), Some(16));
        assert_eq!(l.get(16, 17), Some(32));
    }
}
