//! The cuBLAS sgemm trees at K = 7168 (capture `reveal-k7168`): the
//! reduction trees `mxbi reveal` recovered from `cublas:sgemm` (f32,
//! N = 2048) on an H200 at M = 2, 4, 8, 17 and 32, where the grammar of the
//! run's binary named no order.
//!
//! - M = 2, 4, 8 (one tree): 16 lanes (k mod 16), each lane cut into fresh
//!   k-tiles of 256 k (16 of its terms), a lane's tiles added serially, the
//!   lanes added serially: the order
//!   `fma;ktile=256;tile=fresh;lanes=16;reduce=serial`.
//! - M = 17, 32 (one tree): the 16 parts of `fma;ktile=8;split=16/interleave`
//!   (8-k tiles, tile t in part t mod 16, each part one chain in ascending
//!   k), combined as `((p0+p8)+p15) + (p1+p9) + ... + (p6+p14) + p7`, left
//!   to right. No `reduce` of the grammar combines parts so; this tree is a
//!   stated limit (docs/EXPLAIN.md), checked here node for node.
//!
//! Each is compared with the compiled shape (a named order, or the limit's
//! tree built here), near orders and planted swaps must not match, the
//! explainer's candidate family names the first and nothing for the second,
//! and both reproduce the anchor rows cuBLAS returned at those M in the
//! committed `vendor` capture, bit for bit, where the near trees do not.
//! The lane trees of the run before (capture `reveal-vendor`, K = 2048 at
//! M = 2, 4, 8) are the same order at their K.

mod common;

use common::committed_capture;
use common::trees::{self, assert_none_match, exchange, family_matches, interleaved_parts, numeric_variants, planted};
use common::vendor_rows::{differing, Operands, VendorCapture};
use mxbi::device::capture::Capture;
use mxbi::device::vendor::CaseId;
use mxbi::explain::candidates::Inputs;
use mxbi::explain::Shape;
use mxbi::gemm::eval::evaluate;
use mxbi::gemm::prepare;
use mxbi::order::{InType, Node, NodeId, Order, Tree};

const K: usize = 7168;
/// The M of each tree.
const LANE_M: [usize; 3] = [2, 4, 8];
const PARTS_M: [usize; 2] = [17, 32];
/// What the M = 2, 4, 8 tree is.
const ORDER: &str = "fma;ktile=256;tile=fresh;lanes=16;reduce=serial";
/// The M = 17, 32 tree: the 16 parts of an interleaved split (8-k tiles),
/// combined left to right in these groups (a group's parts added first).
const PARTS: usize = 16;
const TILE: usize = 8;
const STATED: &[&[usize]] = &[
    &[0, 8],
    &[15],
    &[1, 9],
    &[2, 10],
    &[3, 11],
    &[4, 12],
    &[5, 13],
    &[6, 14],
    &[7],
];
/// [`STATED`] with p7 and p15 exchanged (a planted near tree).
const SWAPPED: &[&[usize]] = &[
    &[0, 8],
    &[7],
    &[1, 9],
    &[2, 10],
    &[3, 11],
    &[4, 12],
    &[5, 13],
    &[6, 14],
    &[15],
];

/// The anchored listing of M, as text.
fn listing(m: usize) -> String {
    trees::listing("reveal-k7168", &format!("sgemm-k7168-m{m}.tree"))
}

fn captured(m: usize) -> Shape {
    trees::parse(&listing(m), K, &format!("M = {m}"))
}

fn shape_of(spec: &str) -> Shape {
    trees::shape_of(spec, K)
}

/// The tree of 16 interleaved parts (8-k tiles dealt round-robin, each part
/// an fma chain from +0 over its k in ascending order) combined left to
/// right over `groups`, every part in exactly one group.
fn interleaved(groups: &[&[usize]]) -> Tree {
    let mut parts: Vec<usize> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    parts.sort_unstable();
    assert_eq!(parts, (0..PARTS).collect::<Vec<_>>(), "{groups:?}");
    let (mut nodes, part) = interleaved_parts(K, PARTS, TILE);
    let push = |nodes: &mut Vec<Node>, n: Node| -> NodeId {
        nodes.push(n);
        (nodes.len() - 1) as NodeId
    };
    let mut root: Option<NodeId> = None;
    for g in groups {
        let mut s = part[g[0]];
        for &p in &g[1..] {
            s = push(&mut nodes, Node::Add { a: s, b: part[p] });
        }
        root = Some(match root {
            None => s,
            Some(r) => push(&mut nodes, Node::Add { a: r, b: s }),
        });
    }
    Tree {
        nodes,
        root: root.unwrap(),
        k: K,
        input: None,
    }
}

/// The groups of a serial combination `p0 + p1 + ... + p15`.
fn serial() -> Vec<Vec<usize>> {
    (0..PARTS).map(|p| vec![p]).collect()
}

fn refs(g: &[Vec<usize>]) -> Vec<&[usize]> {
    g.iter().map(|v| v.as_slice()).collect()
}

#[test]
fn the_capture_holds_two_trees() {
    assert_eq!(
        trees::file_names("reveal-k7168"),
        ["2", "4", "8", "17", "32"].map(|m| format!("sgemm-k7168-m{m}.tree"))
    );
    // M = 2, 4, 8 share one listing, M = 17, 32 another
    assert_eq!(listing(2), listing(4));
    assert_eq!(listing(2), listing(8));
    assert_eq!(listing(17), listing(32));
    assert_ne!(listing(2), listing(17));
    for m in [2, 17] {
        let s = captured(m);
        assert_eq!(s.leaves(), K, "M = {m}");
        assert_eq!(s.nodes.len(), K - 1, "M = {m}: binary sums only");
        assert!(s.nodes.iter().all(|ch| ch.len() == 2));
    }
}

#[test]
fn the_small_m_tree_is_lanes_cut_into_fresh_k_tiles() {
    let o: Order = ORDER.parse().unwrap();
    assert_eq!(o.to_string(), ORDER);
    let want = shape_of(ORDER);
    // 16 lanes x 28 tiles of 16 terms: 448 chains of 15 sums, 16 x 27 tile
    // adds, 15 lane adds
    assert_eq!(want.nodes.len(), 448 * 15 + 16 * 27 + 15);
    for m in LANE_M {
        assert!(captured(m) == want, "M = {m}: the capture is not the shape of {ORDER}");
    }
    // the numerics are invisible to the shape: muladd steps, an f16 output
    assert!(captured(2) == shape_of("muladd;lanes=16;ktile=256;tile=fresh;reduce=serial;out=f16"));
}

/// The comparison can fail: orders one parameter away, and the listing with
/// two leaves of different lanes swapped, are not the capture.
#[test]
fn near_orders_and_a_planted_swap_do_not_match_the_small_m_tree() {
    let c = captured(2);
    assert_none_match(
        &c,
        &[
            "fma;lanes=16;ktile=128;tile=fresh;reduce=serial",
            "fma;lanes=16;ktile=512;tile=fresh;reduce=serial",
            "fma;lanes=16;ktile=256;tile=fresh",
            "fma;lanes=16;ktile=256;tile=fresh;reduce=pairwise",
            "fma;lanes=8;ktile=256;tile=fresh;reduce=serial",
            "fma;lanes=32;ktile=256;tile=fresh;reduce=serial",
            "fma;lanes=16;reduce=serial",
            "fma;ktile=256;tile=fresh",
            "fma;ktile=16;split=16/interleave",
        ],
        K,
    );
    // k16 (lane 0) and k17 (lane 1) exchanged in the listing
    let text = listing(2);
    assert!(text.contains("n0 = sum(k0, k16)\n") && text.contains(" k17)\n"));
    let s = planted(&exchange(&text, "k16)", "k17)"), K);
    assert!(s != shape_of(ORDER), "a swap of two leaves across lanes went unnoticed");
}

/// The M = 17, 32 tree, node for node: the builder gives the compiled tree
/// of `fma;ktile=8;split=16/interleave` for a serial combination (same
/// shape, same values), and the capture for the stated one; near
/// combinations, and the stated one with two parts exchanged, do not match.
#[test]
fn the_mid_m_tree_is_sixteen_interleaved_parts_in_a_fixed_order() {
    let split16 = "fma;ktile=8;split=16/interleave";
    let serial_tree = interleaved(&refs(&serial()));
    assert!(
        Shape::of_tree(&serial_tree) == shape_of(split16),
        "the builder is not the compiler's split"
    );
    let stated = Shape::of_tree(&interleaved(STATED));
    for m in PARTS_M {
        assert!(captured(m) == stated, "M = {m}: the capture is not the stated tree");
    }
    let c = captured(17);
    // the grammar's neighbours
    assert_none_match(
        &c,
        &[
            split16,
            "fma;ktile=8;split=16/interleave;reduce=pairwise",
            "fma;ktile=8;split=8/interleave",
            "fma;ktile=16;split=8/interleave",
            "fma;ktile=8;split=32/interleave",
        ],
        K,
    );
    // the combination one would expect (p_i + p_(i+8), i = 0..7, serial),
    // and the stated one with p7 and p15 exchanged
    let pairs: Vec<Vec<usize>> = (0..8).map(|i| vec![i, i + 8]).collect();
    for (what, g) in [("pairs", refs(&pairs)), ("p7 <-> p15", SWAPPED.to_vec())] {
        assert!(c != Shape::of_tree(&interleaved(&g)), "{what} matches the capture");
    }
}

/// The explainer's family for f32 inputs at K = 7168 holds the M = 2, 4, 8
/// order (exactly its numeric variants have the capture's shape) and no
/// order of the M = 17, 32 tree's shape.
#[test]
fn the_candidate_family_names_the_small_m_tree_and_not_the_mid_m_tree() {
    let (small, mid) = (captured(2), captured(17));
    let (matches, of) = family_matches(Inputs::of_type(InType::F32), K, &[&small, &mid]);
    let want = numeric_variants(";ktile=256;tile=fresh;lanes=16;reduce=serial");
    assert_eq!(matches[0], want, "of {of} candidates");
    assert_eq!(matches[1], Vec::<String>::new(), "of {of} candidates");
}

/// The anchor rows cuBLAS sgemm returned at K (N = 2048) and M in the
/// committed `vendor` capture, every position, with the suite's own inputs
/// regenerated from its seed (anchor row, weights `W[N, K]`).
struct VendorRows {
    capture: VendorCapture,
    x: Operands,
}

impl VendorRows {
    fn open(k: usize) -> VendorRows {
        let capture = VendorCapture::open();
        let x = capture.inputs(CaseId::Sgemm, k);
        VendorRows { capture, x }
    }

    fn rows(&self, m: usize) -> Vec<(String, Vec<f32>)> {
        self.capture.some_rows(CaseId::Sgemm, self.x.k, m)
    }

    /// The model's anchor row under `order`.
    fn order_row(&self, order: &str) -> Vec<f32> {
        self.x.order_row(order)
    }

    /// The model's anchor row under a tree of fma steps and adds, by the
    /// generic evaluator.
    fn tree_row(&self, tree: &Tree) -> Vec<f32> {
        let o: Order = "fma".parse().unwrap();
        let prep = prepare(&o, &self.x.problem()).unwrap();
        let mut scratch = Vec::new();
        (0..self.x.n)
            .map(|j| evaluate(tree, &o, &prep, 0, j, &mut scratch, None))
            .collect()
    }
}

/// Both trees reproduce every captured anchor row of their M (0 elements
/// differ); the near trees miss each row in many elements.
#[test]
fn the_trees_reproduce_the_captured_anchor_rows() {
    let v = VendorRows::open(K);
    let check = |what: &str, row: &[f32], m: usize, reproduces: bool| {
        for (pos, c) in v.rows(m) {
            let diff = differing(row, &c);
            println!("K=7168 M={m} {pos}: {what}: {diff} of {} elements differ", c.len());
            if reproduces {
                assert_eq!(diff, 0, "M = {m} {pos}: {what}");
            } else {
                assert!(diff > 100, "M = {m} {pos}: {what} comes too close ({diff})");
            }
        }
    };
    let lanes = v.order_row(ORDER);
    for m in LANE_M {
        check(ORDER, &lanes, m, true);
    }
    // the step arithmetic shows: muladd lanes miss; so do 512-k tiles
    for near in [
        "muladd;ktile=256;tile=fresh;lanes=16;reduce=serial",
        "fma;ktile=512;tile=fresh;lanes=16;reduce=serial",
    ] {
        check(near, &v.order_row(near), 2, false);
    }
    // the stated tree by the generic evaluator; its serial variant is the
    // compiled split's row (the builder and the compiler agree on values)
    let serial_row = v.tree_row(&interleaved(&refs(&serial())));
    assert_eq!(
        differing(&serial_row, &v.order_row("fma;ktile=8;split=16/interleave")),
        0
    );
    let stated = v.tree_row(&interleaved(STATED));
    for m in PARTS_M {
        check("stated tree", &stated, m, true);
    }
    let pairs: Vec<Vec<usize>> = (0..8).map(|i| vec![i, i + 8]).collect();
    check("serial split=16", &serial_row, 17, false);
    check("stated, p7 <-> p15", &v.tree_row(&interleaved(SWAPPED)), 17, false);
    check(
        "pairs p_i + p_(i+8)",
        &v.tree_row(&interleaved(&refs(&pairs))),
        17,
        false,
    );
    check(
        "fma;ktile=8;split=8/interleave",
        &v.order_row("fma;ktile=8;split=8/interleave"),
        17,
        false,
    );
    check(ORDER, &lanes, 17, false);
}

/// The lane trees of the run of 2026-11-30 (capture `reveal-vendor`: K = 2048
/// at M = 2, 4, 8, and K = 7168 at M = 4, where that day's grammar named no
/// order) are the same order's shape at their K (the K = 7168 listing is
/// this capture's, byte for byte), and at K = 2048 it reproduces the
/// captured anchor rows of M = 2, 4, 8 too.
#[test]
fn the_earlier_run_s_lane_trees_are_the_same_order() {
    let vendor = Capture::open_anchored(&committed_capture("reveal-vendor")).unwrap();
    let tree_of = |name: &str| -> String {
        let v: serde_json::Value = vendor.read_json(name).unwrap();
        assert!(v["order"].is_null(), "{name}");
        v["tree"].as_str().unwrap().to_string()
    };
    assert_eq!(format!("{}\n", tree_of("sgemm-k7168-m4.json")), listing(4));
    let o: Order = ORDER.parse().unwrap();
    let at_2048 = Shape::of_tree(&o.compile(2048));
    let v = VendorRows::open(2048);
    let row = v.order_row(ORDER);
    for m in LANE_M {
        let s = Shape::parse_listing(&tree_of(&format!("sgemm-k2048-m{m}.json")), 2048).unwrap();
        assert!(s == at_2048, "K = 2048 M = {m}: not the shape of {ORDER}");
        for (pos, c) in v.rows(m) {
            assert_eq!(differing(&row, &c), 0, "K = 2048 M = {m} {pos}");
        }
    }
    // a zero that can fail: the neighbouring tile width misses
    let near = v.order_row("fma;ktile=512;tile=fresh;lanes=16;reduce=serial");
    for (pos, c) in v.rows(2) {
        assert!(differing(&near, &c) > 100, "K = 2048 M = 2 {pos}");
    }
}
