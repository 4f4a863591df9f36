//! The words for trees and divergences: node listings, the compressed
//! chain view (`Display for Tree`) and the first-divergence sentence. The
//! data lives in `tree.rs`; nothing here decides anything.

use super::tree::{Difference, Divergence, Node, NodeId, Tree};
use std::fmt::{self, Write};

impl Tree {
    /// One node as text (`%i = op(...)`).
    pub fn describe_node(&self, i: usize) -> String {
        describe(i, &self.nodes[i])
    }

    /// The full node list, one line per node.
    pub fn listing(&self) -> String {
        let mut s = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let _ = writeln!(s, "{}", describe(i, n));
        }
        s
    }
}

impl fmt::Display for Divergence {
    /// `first difference at node N (what): left / right`, two indented lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |n: &Option<Node>| match n {
            Some(x) => describe(self.node as usize, x),
            None => "(no node)".to_string(),
        };
        let what = match self.what {
            Difference::Missing => "one tree ends here",
            Difference::Operation => "different operation",
            Difference::Terms => "different terms",
            Difference::Operands => "different operands",
            Difference::Precision => "different fused-sum precision",
            Difference::ScaleBlock => "different scale block",
            Difference::Target => "different output format",
        };
        write!(
            f,
            "first difference at node {} ({what}):\n  {}\n  {}",
            self.node,
            side(&self.left),
            side(&self.right)
        )
    }
}

fn ks_text(ks: &[Option<u32>]) -> String {
    let real: Vec<u32> = ks.iter().flatten().copied().collect();
    let pad = ks.len() - real.len();
    let contiguous = real.windows(2).all(|w| w[1] == w[0] + 1);
    let body = match (real.first(), real.last()) {
        (None, _) | (_, None) => "-".to_string(),
        (Some(a), Some(b)) if contiguous => format!("{a}..{b}"),
        _ => format!("{real:?}"),
    };
    if pad > 0 {
        format!("{body} +{pad} zero")
    } else {
        body
    }
}

fn describe(i: usize, n: &Node) -> String {
    match n {
        Node::Zero => format!("%{i} = +0"),
        Node::Fma { acc, k } => format!("%{i} = fma(%{acc}, k={k})"),
        Node::MulAdd { acc, k } => format!("%{i} = muladd(%{acc}, k={k})"),
        Node::Fused { c, ks, f, out } => format!("%{i} = fused(c=%{c}, k={}, f={f}, out={out})", ks_text(ks)),
        Node::Add { a, b } => format!("%{i} = add(%{a}, %{b})"),
        Node::Promote { acc, partial, k0 } => format!("%{i} = promote(%{acc} + s[k0={k0}] * %{partial})"),
        Node::Convert { x, to } => format!("%{i} = to_{to:?}(%{x})").to_lowercase(),
    }
}

impl fmt::Display for Tree {
    /// A compressed listing: runs of chained fma/muladd/fused nodes are
    /// printed as one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        while i < self.nodes.len() {
            // a chain: node j's accumulator is node j-1, same kind
            let kind = std::mem::discriminant(&self.nodes[i]);
            let mut j = i;
            while j + 1 < self.nodes.len()
                && std::mem::discriminant(&self.nodes[j + 1]) == kind
                && chained(&self.nodes[j + 1], j as NodeId)
            {
                j += 1;
            }
            if j > i + 1 {
                let first = &self.nodes[i];
                let ks: Vec<u32> = self.nodes[i..=j].iter().flat_map(Node::terms).collect();
                let name = match first {
                    Node::Fma { .. } => "fma",
                    Node::MulAdd { .. } => "muladd",
                    Node::Fused { .. } => "fused",
                    _ => "op",
                };
                let from = match first {
                    Node::Fma { acc, .. } | Node::MulAdd { acc, .. } => *acc,
                    Node::Fused { c, .. } => *c,
                    _ => 0,
                };
                let extra = match first {
                    Node::Fused { f: ff, out, ks, .. } => format!(", {} terms per step, f={ff}, out={out}", ks.len()),
                    _ => String::new(),
                };
                writeln!(
                    f,
                    "%{i}..%{j} = {name} chain from %{from}: {} steps, k={}{extra}",
                    j - i + 1,
                    ranges(&ks)
                )?;
                i = j + 1;
            } else {
                writeln!(f, "{}", describe(i, &self.nodes[i]))?;
                i += 1;
            }
        }
        write!(f, "root = %{}", self.root)
    }
}

fn chained(n: &Node, prev: NodeId) -> bool {
    match n {
        Node::Fma { acc, .. } | Node::MulAdd { acc, .. } => *acc == prev,
        Node::Fused { c, .. } => *c == prev,
        _ => false,
    }
}

/// `0..63, 256..299` style text of a k list (in its order).
fn ranges(ks: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ks.len() {
        let mut j = i;
        while j + 1 < ks.len() && ks[j + 1] == ks[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            format!("{}", ks[i])
        } else {
            format!("{}..{}", ks[i], ks[j])
        });
        i = j + 1;
    }
    if out.len() > 8 {
        let n = out.len();
        format!(
            "{}, ... ({} runs) ..., {}",
            out[..3].join(", "),
            n,
            out[n - 2..].join(", ")
        )
    } else {
        out.join(", ")
    }
}
