//! The tree torch.matmul (bf16 and f16 inputs and output) used for a GEMV
//! at M = 1, K = 4096, N = 64 on an H100, as `reveal` recovered it there
//! (`reference/captures/logs/reveal-h100-2026-12-06/trees/`, the listing;
//! SHA-256 pinned below): three contiguous parts of 1,408, 1,408 and
//! 1,280 terms, each a chain of tensor-core fused sums of 16 products and
//! the running sum, the parts added `(p0 + p1) + p2`
//! (`mma(k=16,f=25);split=3;align=128`, docs/ORDERS.md "Parts").
//!
//! Why its reveal cannot take 64 launches at N = 64: a node of c >= 3
//! children is proven only by an answer for every pair of its children
//! (docs/EXPLAIN.md, "What a wide node costs"; `Shape::sibling_pairs`).
//! The lemma is checked here by brute force on small fused trees, the
//! count on the captured one, and the captured tree is replayed on the
//! CPU with the fused sums of docs/ORDERS.md so that the reveal's cost on
//! it is measured without a device.

mod common;

use mxbi::explain::shape::{Child, Shape};
use mxbi::explain::{self, RevealOptions};
use mxbi::gemm::step::{decompose, fused_sum, product};
use mxbi::gemm::Problem;
use mxbi::order::InType;
use mxbi::subject::{Subject, SubjectError};
use sha2::{Digest, Sha256};

const DIR: &str = "logs/reveal-h100-2026-12-06/trees";
const BF16_N64: &str = "torch-2.11.0_cu130-matmul-bf16-1x4096x64.txt";
const F16_N64: &str = "torch-2.11.0_cu130-matmul-f16-1x4096x64.txt";
/// Both N = 64 listings are this file (bf16 and f16 ran one tree).
const SHA256_N64: &str = "a35e1a3e1d5fffa0d79568c7712682cbb2cf8a6cf75a23fea5c11fa03f2acbc2";

fn captured(file: &str) -> Shape {
    let bytes = std::fs::read(common::committed_capture(&format!("{DIR}/{file}"))).unwrap();
    let digest: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(digest, SHA256_N64, "{file} changed");
    Shape::parse_listing(std::str::from_utf8(&bytes).unwrap(), 4096).unwrap()
}

/// The shape with children `a` and `b` of node `v` joined into a node of
/// their own first (the finer tree a proof of `v` must rule out).
fn join(s: &Shape, v: usize, a: usize, b: usize) -> Shape {
    let mut t = s.clone();
    let pair = vec![t.nodes[v][a], t.nodes[v][b]];
    let new = t.nodes.len();
    t.nodes.push(pair);
    let kept: Vec<Child> = t.nodes[v]
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != a && i != b)
        .map(|(_, c)| *c)
        .chain([Child::Node(new)])
        .collect();
    t.nodes[v] = kept;
    // children refer to earlier nodes: move the new node before v
    reorder_before(&t, new, v)
}

/// `t` with node `moved` placed just before node `at`, references renumbered.
fn reorder_before(t: &Shape, moved: usize, at: usize) -> Shape {
    let order: Vec<usize> = (0..t.nodes.len())
        .filter(|&i| i != moved)
        .flat_map(|i| if i == at { vec![moved, i] } else { vec![i] })
        .collect();
    let mut index = vec![0usize; t.nodes.len()];
    for (new, &old) in order.iter().enumerate() {
        index[old] = new;
    }
    let map = |c: &Child| match *c {
        Child::Node(j) => Child::Node(index[j]),
        leaf => leaf,
    };
    Shape {
        k: t.k,
        nodes: order
            .iter()
            .map(|&old| t.nodes[old].iter().map(map).collect())
            .collect(),
        root: t.root.as_ref().map(map),
    }
}

/// The leaves under a child.
fn leaves_under(s: &Shape, c: Child, out: &mut Vec<u32>) {
    match c {
        Child::Leaf(k) => out.push(k),
        Child::Node(j) => {
            for &x in &s.nodes[j] {
                leaves_under(s, x, out);
            }
        }
    }
}

/// Every pair of leaves whose `L` differs between two shapes.
fn differing_pairs(x: &Shape, y: &Shape) -> Vec<(u32, u32)> {
    let (lx, ly) = (x.lca_sizes(), y.lca_sizes());
    let k = x.k as u32;
    (0..k)
        .flat_map(|p| (p + 1..k).map(move |q| (p, q)))
        .filter(|&(p, q)| lx.get(p, q) != ly.get(p, q))
        .collect()
}

/// The lemma behind `sibling_pairs`, by brute force: joining two children
/// a, b of a node changes `L` exactly at the pairs with one leaf in a and
/// one in b, so every such finer tree needs an answer of its own (a probe
/// whose `+-B` lie in a and b), on fused trees of two kinds (a chain of
/// fused sums, and three parts of such chains added), every node of three
/// or more children, every pair of its children.
#[test]
fn a_finer_tree_differs_only_where_both_probes_lie_in_the_two_children_it_joins() {
    let trees = [
        common::trees::shape_of("mma(k=8,f=25)", 40),
        common::trees::shape_of("mma(k=4,f=25);split=3", 30),
    ];
    let mut finer = 0;
    for s in &trees {
        for v in 0..s.nodes.len() {
            let c = s.nodes[v].len();
            if c < 3 {
                continue;
            }
            for a in 0..c {
                for b in a + 1..c {
                    let t = join(s, v, a, b);
                    assert!(t != *s, "node {v}: joining children {a}, {b} gives another tree");
                    let (mut la, mut lb) = (Vec::new(), Vec::new());
                    leaves_under(s, s.nodes[v][a], &mut la);
                    leaves_under(s, s.nodes[v][b], &mut lb);
                    let mut across: Vec<(u32, u32)> = la
                        .iter()
                        .flat_map(|&p| lb.iter().map(move |&q| (p.min(q), p.max(q))))
                        .collect();
                    across.sort_unstable();
                    assert_eq!(differing_pairs(s, &t), across, "node {v}, children {a} and {b}");
                    finer += 1;
                }
            }
        }
    }
    // a chain of 5 fused nodes of 8 products (the first has no running
    // sum): 28 + 4 * 36; three parts of 10 terms in steps of 4 products:
    // per part 6 + 10 + (3 children: the running sum and 2 products) 3
    let expected = trees.iter().map(Shape::sibling_pairs).sum::<u64>();
    assert_eq!(expected, 28 + 4 * 36 + 3 * (6 + 10 + 3));
    assert_eq!(finer as u64, expected);
}

/// The captured tree: 256 fused sums (three of 16 products starting a part,
/// 253 of 16 products and the running sum) and two adds; the answers that
/// prove it, and so the fewest GEMV launches at N = 64 for a reveal whose
/// output holds one pair (narrow outputs: `reveal`'s case) or two (f32).
#[test]
fn the_captured_bf16_gemv_tree_needs_34768_pair_answers() {
    let s = captured(BF16_N64);
    assert!(s == captured(F16_N64));
    let mut widths: Vec<usize> = s.nodes.iter().map(Vec::len).collect();
    widths.sort_unstable();
    assert_eq!(widths.iter().filter(|&&w| w == 2).count(), 2);
    assert_eq!(widths.iter().filter(|&&w| w == 16).count(), 3);
    assert_eq!(widths.iter().filter(|&&w| w == 17).count(), 253);
    assert_eq!(widths.len(), 258);
    assert_eq!(s.sibling_pairs(), 3 * 120 + 253 * 136);
    assert_eq!(s.sibling_pairs(), 34_768);
    assert_eq!(s.sibling_pairs().div_ceil(64), 544);
    assert_eq!(s.sibling_pairs().div_ceil(2 * 64), 272);
}

/// Sums every output along a shape as a tensor core chain does: a node
/// with a leaf among its children is one fused sum (f = 25 alignment
/// bits, an f32 result) of its first child if that is a node (the running
/// sum; else +0) and the products of its leaves; a node of nodes only is
/// an f32 add. The output is rounded to `out` (bf16 or f16, to nearest
/// even) and widened back exactly.
struct FusedTreeSubject {
    shape: Shape,
    out: InType,
}

impl FusedTreeSubject {
    fn node(&self, x: usize, values: &[f32], term: &dyn Fn(u32) -> mxbi::gemm::step::Decomposed) -> f32 {
        let ch = &self.shape.nodes[x];
        if ch.iter().all(|c| matches!(c, Child::Node(_))) {
            return ch
                .iter()
                .fold(None, |s: Option<f32>, c| {
                    let Child::Node(j) = *c else { unreachable!("nodes only") };
                    Some(s.map_or(values[j], |s| s + values[j]))
                })
                .unwrap();
        }
        let c = match ch[0] {
            Child::Node(j) => values[j],
            Child::Leaf(_) => 0.0,
        };
        let mut terms = vec![decompose(c, -126)];
        terms.extend(ch.iter().filter_map(|c| match *c {
            Child::Leaf(k) => Some(term(k)),
            Child::Node(_) => None,
        }));
        fused_sum(&terms, 25, 23)
    }
}

impl Subject for FusedTreeSubject {
    fn name(&self) -> String {
        "captured-fused-tree".into()
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let emin = self.out.emin();
        let mut values = vec![0f32; self.shape.nodes.len()];
        let Some(Child::Node(root)) = self.shape.root else {
            unreachable!("the captured root is a node")
        };
        Ok(common::trees::each_output(p, rows, |operands| {
            let term = |k: u32| {
                let (a, b) = operands(k);
                product(decompose(a, emin), decompose(b, emin), 0)
            };
            for x in 0..self.shape.nodes.len() {
                values[x] = self.node(x, &values, &term);
            }
            match self.out {
                InType::Bf16 => half::bf16::from_f32(values[root]).to_f32(),
                _ => half::f16::from_f32(values[root]).to_f32(),
            }
        }))
    }
}

/// The CPU replay recovers the captured tree with bf16 and with f16
/// outputs, every answer agreeing, in the launches the H100 took (744 and
/// 660: launch counts are a function of the answers) and one more: the
/// family now names the tree (split parts that start on multiples of 64
/// k, the same tree as 128 at this K), so its bytes are verified in a
/// launch. Both are above the 544 launches the tree's sibling pairs need
/// at one pair an answer, and the report says what the proof takes.
#[test]
fn the_captured_fused_tree_is_recovered_on_the_cpu_above_its_floor() {
    let shape = captured(BF16_N64);
    let named = [
        (InType::Bf16, 744 + 1, "mma(k=16,f=25);split=3;align=64;out=bf16"),
        (InType::F16, 660 + 1, "mma(k=16,f=25,in=f16);split=3;align=64;out=f16"),
    ];
    for (out, launches, order) in named {
        let o = RevealOptions {
            m: 1,
            k: 4096,
            n: 64,
            input: out,
            seed: 7,
            verify_rows: 4,
        };
        let subject = FusedTreeSubject {
            shape: shape.clone(),
            out,
        };
        let r = explain::reveal(&subject, o).unwrap();
        assert_eq!(r.disagreement_count, 0, "{r}");
        assert!(r.shape == shape, "{out:?}: {r}");
        assert_eq!(r.launches, launches, "{out:?}: {r}");
        assert_eq!(r.order.map(|o| o.to_string()).as_deref(), Some(order), "{r}");
        let aligned: mxbi::order::Order = order.replace("align=64", "align=128").parse().unwrap();
        assert!(Shape::of_tree(&aligned.compile(4096)) == shape);
        // the name does not say 64 rather than 128: the report says so
        assert_eq!(r.same_parts, vec![aligned], "{r}");
        assert!(
            r.to_string().contains(&format!(
                "the same tree at K=4096: {aligned} (split parts that start elsewhere"
            )),
            "{r}"
        );
        assert!(r.probes as u64 >= shape.sibling_pairs(), "{out:?}: {r}");
        let report = r.to_string();
        assert!(
            report.contains("the tree has nodes of up to 17 children: proving them takes at least 34768 probe answers"),
            "{report}"
        );
    }
}
