//! Captured reduction trees against orders, for the capture tests: the
//! `.tree` listings of an anchored capture, the shapes of orders, planted
//! near trees, the candidate family's matches, the chains of an
//! interleaved split built node for node, and the output elements a
//! subject that replays a tree computes ([`each_output`]).

use super::committed_capture;
use mxbi::device::capture::Capture;
use mxbi::explain::candidates::{family, Inputs};
use mxbi::explain::Shape;
use mxbi::order::{Node, NodeId, Order};

/// The committed capture `name`, checked against its anchor, every file
/// intact.
pub fn anchored(name: &str) -> Capture {
    let c = Capture::open_anchored(&committed_capture(name)).unwrap_or_else(|e| panic!("anchored capture {name}: {e}"));
    c.verify_all().unwrap();
    c
}

/// The names of the files of the anchored capture `name`, in its
/// manifest's order.
pub fn file_names(name: &str) -> Vec<String> {
    anchored(name).manifest.files.iter().map(|f| f.name.clone()).collect()
}

/// The text of `file` in the anchored capture `capture`.
pub fn listing(capture: &str, file: &str) -> String {
    String::from_utf8(anchored(capture).read(file).unwrap()).unwrap()
}

/// The shape of a tree listing over K leaves.
pub fn parse(text: &str, k: usize, what: &str) -> Shape {
    Shape::parse_listing(text, k).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The shape of the order `spec` compiled at K.
pub fn shape_of(spec: &str, k: usize) -> Shape {
    let o: Order = spec.parse().unwrap_or_else(|e| panic!("{spec}: {e}"));
    Shape::of_tree(&o.compile(k))
}

/// Asserts that no order of `specs` has the shape `captured` at K.
pub fn assert_none_match(captured: &Shape, specs: &[&str], k: usize) {
    for spec in specs {
        assert!(*captured != shape_of(spec, k), "{spec} matches the capture");
    }
}

/// `text` with every `a` written `b` and every `b` written `a`.
pub fn exchange(text: &str, a: &str, b: &str) -> String {
    assert!(!text.contains('\u{0}'));
    text.replace(a, "\u{0}").replace(b, a).replace('\u{0}', b)
}

/// The shape of a planted (edited) listing, which must still hold every k
/// of 0..K once.
pub fn planted(text: &str, k: usize) -> Shape {
    let s = Shape::parse_listing(text, k).unwrap();
    assert_eq!(s.leaves(), k);
    s
}

/// For each shape of `shapes`, the orders of the explainer's family for
/// `inputs` at K that compile to it, sorted; and the family's size.
pub fn family_matches(inputs: Inputs, k: usize, shapes: &[&Shape]) -> (Vec<Vec<String>>, usize) {
    let fam = family(inputs, k);
    let mut hits = vec![Vec::new(); shapes.len()];
    for cand in &fam {
        let s = Shape::of_tree(&cand.order.compile(k));
        for (i, want) in shapes.iter().enumerate() {
            if s == **want {
                hits[i].push(cand.order.to_string());
            }
        }
    }
    for h in &mut hits {
        h.sort();
    }
    (hits, fam.len())
}

/// Asserts that the orders of the explainer's family for `inputs` at K
/// with the shape `captured` are exactly [`numeric_variants`] of `rest`.
pub fn assert_family_names_variants(inputs: Inputs, k: usize, captured: &Shape, rest: &str) {
    let (hits, of) = family_matches(inputs, k, &[captured]);
    assert_eq!(hits[0], numeric_variants(rest), "of {of} candidates");
}

/// The numeric variants of one tree, sorted: `fma` or `muladd` steps
/// followed by `rest`, with f32, bf16 or f16 output.
pub fn numeric_variants(rest: &str) -> Vec<String> {
    let mut v: Vec<String> = ["fma", "muladd"]
        .iter()
        .flat_map(|f| {
            ["", ";out=bf16", ";out=f16"]
                .iter()
                .map(move |out| format!("{f}{rest}{out}"))
        })
        .collect();
    v.sort();
    v
}

/// The parts of an interleaved split over K, node for node: `parts` fma
/// chains from +0 (node 0, `Node::Zero`), tile t of `tile` k in part
/// t mod `parts`, each part over its k in ascending order. Returns the
/// nodes and each part's last node; combining the parts is the caller's.
pub fn interleaved_parts(k: usize, parts: usize, tile: usize) -> (Vec<Node>, Vec<NodeId>) {
    let mut nodes = vec![Node::Zero];
    let mut last = vec![0 as NodeId; parts];
    for (p, slot) in last.iter_mut().enumerate() {
        let mut acc: NodeId = 0;
        for t in (p..k / tile).step_by(parts) {
            for k in t * tile..(t + 1) * tile {
                nodes.push(Node::Fma { acc, k: k as u32 });
                acc = (nodes.len() - 1) as NodeId;
            }
        }
        *slot = acc;
    }
    (nodes, last)
}

/// Every output element of `rows` (all rows when None) of a problem with
/// f32 operands, row by row: `element` is given, for one (i, j), the
/// operands `(a[i, k], b[k, j])` of each k (B in either layout) and returns
/// C[i, j]. The loop of the tree-replaying subjects of the reveal tests.
pub fn each_output(
    p: &mxbi::gemm::Problem,
    rows: Option<&[usize]>,
    mut element: impl FnMut(&dyn Fn(u32) -> (f32, f32)) -> f32,
) -> Vec<f32> {
    use mxbi::gemm::{BLayout, Matrix};
    let (Matrix::F32(a), Matrix::F32(b)) = (p.a, p.b) else {
        unreachable!("reveal of f32, bf16 and f16 inputs passes f32 operands")
    };
    let all: Vec<usize> = (0..p.m).collect();
    let mut c = Vec::with_capacity(rows.map_or(p.m, <[usize]>::len) * p.n);
    for &i in rows.unwrap_or(&all) {
        for j in 0..p.n {
            let operands = |k: u32| {
                let k = k as usize;
                let bk = match p.b_layout {
                    BLayout::Kn => b[k * p.n + j],
                    BLayout::Nk => b[j * p.k + k],
                };
                (a[i * p.k + k], bk)
            };
            c.push(element(&operands));
        }
    }
    c
}
