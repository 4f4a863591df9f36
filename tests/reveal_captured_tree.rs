//! The tree torch.matmul (f32, TF32 off) used for a GEMV at M = 1,
//! K = 4096, N = 64 on the H200, as `reveal` recovered it there
//! (`reference/captures/logs/reveal-h200-2026-12-06/links/torch_gemv_n64_tree.txt`,
//! the display and the listing; its SHA-256 is pinned below), replayed on
//! the CPU: a subject that sums every output along that tree in f32. The
//! reveal recovers the same tree in the same launches as on the GPU
//! (launch counts are a function of the answers), so the cost of a tree no
//! order names is measured here without a device.

mod common;

use mxbi::explain::shape::Child;
use mxbi::explain::{self, RevealOptions, Shape};
use mxbi::gemm::Problem;
use mxbi::order::InType;
use mxbi::subject::{Subject, SubjectError};
use sha2::{Digest, Sha256};

const FILE: &str = "logs/reveal-h200-2026-12-06/links/torch_gemv_n64_tree.txt";
const SHA256: &str = "e9a52af77043cdf8e3b00576b6acfe8ce4031a2456680dfe58f9aca5212868d1";

/// The captured text and its tree (the listing after the display).
fn captured() -> (String, Shape) {
    let bytes = std::fs::read(common::committed_capture(FILE)).unwrap();
    let digest: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(digest, SHA256, "{FILE} changed");
    let text = String::from_utf8(bytes).unwrap();
    let at = text.find("\nn0 = ").expect("the listing follows the display");
    let shape = Shape::parse_listing(&text[at + 1..], 4096).unwrap();
    (text, shape)
}

/// Sums every output along a tree: each product rounded to f32, each
/// node's children added in f32 in listing order.
struct TreeSubject(Shape);

impl Subject for TreeSubject {
    fn name(&self) -> String {
        "captured-tree".into()
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let mut node = vec![0f32; self.0.nodes.len()];
        Ok(common::trees::each_output(p, rows, |operands| {
            let value = |node: &[f32], ch: &Child| match *ch {
                Child::Leaf(k) => {
                    let (a, b) = operands(k);
                    a * b
                }
                Child::Node(x) => node[x],
            };
            for x in 0..self.0.nodes.len() {
                let ch = &self.0.nodes[x];
                let mut s = value(&node, &ch[0]);
                for c in &ch[1..] {
                    s += value(&node, c);
                }
                node[x] = s;
            }
            value(&node, self.0.root.as_ref().unwrap())
        }))
    }
}

/// The CPU replay recovers the captured tree, every answer agreeing, and
/// names no order. Launches: 325 on the H200 (the display in the capture:
/// translated subtrees after the first level only); 191 with translated
/// subtrees after every level (the 128-leaf blocks below the first leaf's
/// part are butterflies whose copies are predicted once one is known);
/// 134 with two probes a line in FPRev's levels and the translation
/// rounds (pairs of two groups that meet the first leaf at different
/// sizes, proven apart).
#[test]
fn the_captured_torch_gemv_tree_is_recovered_on_the_cpu() {
    let (text, shape) = captured();
    let o = RevealOptions {
        m: 1,
        k: 4096,
        n: 64,
        input: InType::F32,
        seed: 7,
        verify_rows: 4,
    };
    let r = explain::reveal(&TreeSubject(shape.clone()), o).unwrap();
    assert_eq!(r.disagreement_count, 0, "{r}");
    assert!(r.shape == shape, "{r}");
    assert_eq!(r.order, None, "{r}");
    assert!(text.contains("N=64 (f32 inputs): 325 launches"));
    assert_eq!(r.launches, 134, "{r}");
    // a binary tree: no wide node to prove pair by pair, no such line
    assert_eq!(shape.sibling_pairs(), 0);
    assert!(!r.to_string().contains("children: proving them"), "{r}");
}
