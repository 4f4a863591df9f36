//! A compiled reduction tree regrouped for tile-wise evaluation: runs of
//! `fma`/`muladd` nodes chained from +0 become one `Chain` (a part, which a
//! GEMM kernel computes for a whole tile at once); every other node is kept
//! as it is. The operations are scheduled in depth-first order from the root
//! (any topological order gives the same values: every operation is a pure
//! function of its operands), with tile buffers ("slots") reused as soon as a
//! value is dead, so a serial or pairwise reduction over many parts holds
//! only a few partial tiles at a time.

use crate::order::{Node, OutFmt, Tree};

/// One tile-wide operation.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Op {
    /// +0 everywhere.
    Zero,
    /// A part: from +0, `acc = fma(a_k, b_k, acc)` (or `RN(acc + RN(a_k*b_k))`
    /// when `fma` is false) over `ks` in order.
    Chain { ks: Vec<u32>, fma: bool },
    /// One tensor-core fused sum with C the value of op `c`.
    Fused {
        c: usize,
        ks: Vec<Option<u32>>,
        f: u32,
        out: u32,
    },
    /// `RN(a + b)`.
    Add { a: usize, b: usize },
    /// `fma(s, partial, acc)`: `s` is 1.0 for element inputs, the block
    /// scale product at k `k0` for MX `scale=block`.
    Promote { acc: usize, partial: usize, k0: u32 },
    /// Final RNE conversion.
    Convert { x: usize, to: OutFmt },
}

impl Op {
    fn operands(&self) -> Vec<usize> {
        match *self {
            Op::Zero | Op::Chain { .. } => vec![],
            Op::Fused { c, .. } => vec![c],
            Op::Add { a, b } => vec![a, b],
            Op::Promote { acc, partial, .. } => vec![acc, partial],
            Op::Convert { x, .. } => vec![x],
        }
    }
}

/// One scheduled operation: op `op` writes slot `dst`, reading its operands
/// from `src` (in the order of [`Op`]'s fields). `dst` never aliases a source.
#[derive(Clone, Copy, Debug)]
pub(super) struct Step {
    pub op: usize,
    pub dst: usize,
    pub src: [usize; 2],
}

#[derive(Clone, Debug)]
pub(super) struct Plan {
    pub ops: Vec<Op>,
    pub steps: Vec<Step>,
    /// Number of tile buffers the schedule needs.
    pub slots: usize,
    /// The slot holding the root value after the last step.
    pub root_slot: usize,
}

impl Plan {
    /// Regroups `tree`; None where its shape is not one this module handles
    /// (a chain that does not start from +0, or an intermediate chain value
    /// read elsewhere).
    pub fn from_tree(tree: &Tree) -> Option<Plan> {
        let nodes = &tree.nodes;
        let mut uses = vec![0u32; nodes.len()];
        for n in nodes {
            match n {
                Node::Zero => {}
                Node::Fma { acc, .. } | Node::MulAdd { acc, .. } => uses[*acc as usize] += 1,
                Node::Fused { c, .. } => uses[*c as usize] += 1,
                Node::Add { a, b } => {
                    uses[*a as usize] += 1;
                    uses[*b as usize] += 1;
                }
                Node::Promote { acc, partial, .. } => {
                    uses[*acc as usize] += 1;
                    uses[*partial as usize] += 1;
                }
                Node::Convert { x, .. } => uses[*x as usize] += 1,
            }
        }
        *uses.get_mut(tree.root as usize)? += 1;
        let mut ops: Vec<Op> = Vec::new();
        // tree node -> op; for chains, the op's current last tree node
        let mut map = vec![usize::MAX; nodes.len()];
        let mut tail: Vec<usize> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let m = |x: &u32| lookup(&map, *x);
            let op = match n {
                Node::Zero => Op::Zero,
                Node::Fma { acc, k } | Node::MulAdd { acc, k } => {
                    let fma = matches!(n, Node::Fma { .. });
                    let acc = *acc as usize;
                    if matches!(nodes.get(acc)?, Node::Zero) {
                        Op::Chain { ks: vec![*k], fma }
                    } else {
                        let o = lookup(&map, acc as u32)?;
                        match &mut ops[o] {
                            Op::Chain { ks, fma: f2 } if *f2 == fma && tail[o] == acc && uses[acc] == 1 => {
                                ks.push(*k);
                                map[i] = o;
                                tail[o] = i;
                                continue;
                            }
                            _ => return None,
                        }
                    }
                }
                Node::Fused { c, ks, f, out } => Op::Fused {
                    c: m(c)?,
                    ks: ks.clone(),
                    f: *f,
                    out: *out,
                },
                Node::Add { a, b } => Op::Add { a: m(a)?, b: m(b)? },
                Node::Promote { acc, partial, k0 } => Op::Promote {
                    acc: m(acc)?,
                    partial: m(partial)?,
                    k0: *k0,
                },
                Node::Convert { x, to } => Op::Convert { x: m(x)?, to: *to },
            };
            map[i] = ops.len();
            tail.push(i);
            ops.push(op);
        }
        let root = *map.get(tree.root as usize)?;
        if root == usize::MAX {
            return None;
        }
        Some(schedule(ops, root))
    }

    /// The chains (parts) the schedule computes.
    pub fn chains(&self) -> impl Iterator<Item = (usize, &[u32])> {
        self.steps.iter().filter_map(|s| match &self.ops[s.op] {
            Op::Chain { ks, .. } => Some((s.op, ks.as_slice())),
            _ => None,
        })
    }
}

fn lookup(map: &[usize], x: u32) -> Option<usize> {
    let v = *map.get(x as usize)?;
    (v != usize::MAX).then_some(v)
}

fn schedule(ops: Vec<Op>, root: usize) -> Plan {
    // depth-first post-order from the root, left operand first
    let mut order = Vec::new();
    let mut visited = vec![false; ops.len()];
    let mut stack = vec![(root, false)];
    while let Some((o, expanded)) = stack.pop() {
        if expanded {
            order.push(o);
            continue;
        }
        if visited[o] {
            continue;
        }
        visited[o] = true;
        stack.push((o, true));
        for x in ops[o].operands().into_iter().rev() {
            if !visited[x] {
                stack.push((x, false));
            }
        }
    }
    let mut uses = vec![0u32; ops.len()];
    for &o in &order {
        for x in ops[o].operands() {
            uses[x] += 1;
        }
    }
    uses[root] += 1;
    let mut slot_of = vec![usize::MAX; ops.len()];
    let mut free: Vec<usize> = Vec::new();
    let mut slots = 0;
    let mut steps = Vec::with_capacity(order.len());
    for &o in &order {
        let dst = free.pop().unwrap_or_else(|| {
            slots += 1;
            slots - 1
        });
        let operands = ops[o].operands();
        let mut src = [usize::MAX; 2];
        for (s, &x) in src.iter_mut().zip(&operands) {
            *s = slot_of[x];
        }
        for &x in &operands {
            uses[x] -= 1;
            if uses[x] == 0 {
                free.push(slot_of[x]);
            }
        }
        slot_of[o] = dst;
        steps.push(Step { op: o, dst, src });
    }
    Plan {
        root_slot: slot_of[root],
        ops,
        steps,
        slots,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::Order;

    fn plan(s: &str, k: usize) -> Plan {
        Plan::from_tree(&s.parse::<Order>().unwrap().compile(k)).unwrap()
    }

    #[test]
    fn parts_become_chains() {
        let p = plan("fma;split=4/interleave;ktile=2", 16);
        let chains: Vec<Vec<u32>> = p.chains().map(|(_, ks)| ks.to_vec()).collect();
        assert_eq!(
            chains,
            vec![
                vec![0, 1, 8, 9],
                vec![2, 3, 10, 11],
                vec![4, 5, 12, 13],
                vec![6, 7, 14, 15]
            ]
        );
        // a serial reduction keeps at most three tiles alive
        let p = plan("fma;ktile=1;tile=fresh", 300);
        assert_eq!(p.chains().count(), 300);
        assert!(p.slots <= 3, "{}", p.slots);
        let p = plan("fma;lanes=64", 300);
        assert!(p.slots <= 12, "{}", p.slots);
        let p = plan("hopper-bf16;promote=32", 100);
        assert!(p.slots <= 4, "{}", p.slots);
    }
}
