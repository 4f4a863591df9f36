//! Two trees `mxbi reveal` recovered on an H200 that the grammar of the
//! run's binary did not name (capture `reveal-gemmex`):
//!
//! - cuBLAS GemmEx, bf16 inputs and output, K = 7168, N = 2048, at M = 1, 8
//!   and 64 (one tree): three contiguous parts of whole 128-k tiles (19, 19
//!   and 18 tiles: k 0..2431, 2432..4863, 4864..7167), each part one chain
//!   of 16-term tensor-core steps from +0 (`hopper-bf16`), the parts added
//!   serially: split-K = 3 with parts rounded up to the 128-k tile. At this
//!   K that is the order `mma(k=16,f=25);ktile=2432;tile=fresh;out=bf16`
//!   (fresh tiles of 2432 k are those three parts); `split=3` itself cuts
//!   at ceil(7168 / 3) = 2390 k and is another tree. Since `align`
//!   (docs/ORDERS.md "Parts") the grammar says it for every K:
//!   `mma(k=16,f=25);split=3;align=128;out=bf16`, and the family names it
//!   (`split=3;align=64`, the same parts at this K).
//! - `torch.matmul` f32 (no TF32) at M = 1, K = 4096, N = 4096 (a GEMV):
//!   the 16 parts of `fma;ktile=64;split=16/interleave` (64-k tiles, tile t
//!   in part t mod 16, each part one chain over its 4 tiles) combined by a
//!   butterfly over the parts: `fma;ktile=64;split=16/interleave;reduce=butterfly`.
//!
//! Each capture is compared with the named order's compiled shape (and the
//! torch tree with its combination built here node for node, without the
//! compiler's reductions); near orders and planted changes must not match;
//! the GemmEx order reproduces the anchor rows cuBLAS returned at M = 1, 8
//! and 64 in the committed `vendor` capture bit for bit, where near orders
//! miss them.

mod common;

use common::committed_capture;
use common::trees::{
    self, assert_family_names_variants, assert_none_match, exchange, interleaved_parts, planted, shape_of,
};
use common::vendor_rows::{differing, Operands, VendorCapture};
use mxbi::device::capture::Capture;
use mxbi::device::vendor::CaseId;
use mxbi::explain::candidates::{family, Inputs};
use mxbi::explain::Shape;
use mxbi::order::{InType, Node, NodeId, Order, Tree};

/// GemmEx: K, the M probed, the order, and the parts (first k of each).
const GK: usize = 7168;
const GEMMEX_M: [usize; 3] = [1, 8, 64];
const GEMMEX: &str = "mma(k=16,f=25);ktile=2432;tile=fresh;out=bf16";
const GEMMEX_PARTS: [usize; 3] = [0, 2432, 4864];
/// torch.matmul: K and the order.
const TK: usize = 4096;
const TORCH: &str = "fma;ktile=64;split=16/interleave;reduce=butterfly";

fn listing(name: &str) -> String {
    trees::listing("reveal-gemmex", name)
}

fn gemmex_listing(m: usize) -> String {
    listing(&format!("gemmex-bf16-k7168-m{m}.tree"))
}

fn gemmex(m: usize) -> Shape {
    trees::parse(&gemmex_listing(m), GK, &format!("M = {m}"))
}

fn torch() -> Shape {
    Shape::parse_listing(&listing("torch-f32-k4096-m1.tree"), TK).unwrap()
}

#[test]
fn the_capture_holds_two_trees() {
    assert_eq!(
        trees::file_names("reveal-gemmex"),
        [
            "gemmex-bf16-k7168-m1.tree",
            "gemmex-bf16-k7168-m8.tree",
            "gemmex-bf16-k7168-m64.tree",
            "torch-f32-k4096-m1.tree"
        ]
    );
    // M = 1, 8, 64 share one listing
    assert_eq!(gemmex_listing(1), gemmex_listing(8));
    assert_eq!(gemmex_listing(1), gemmex_listing(64));
    let g = gemmex(1);
    assert_eq!(g.leaves(), GK);
    // 448 sums of 16 terms (the first from +0: 16 children, then 17 with
    // the carried sum) and two adds of parts
    assert_eq!(g.nodes.len(), 448 + 2);
    assert_eq!(g.nodes.iter().filter(|ch| ch.len() == 2).count(), 2);
    let t = torch();
    assert_eq!(t.leaves(), TK);
    assert_eq!(t.nodes.len(), TK - 1, "binary sums only");
}

/// The listings are the `tree` fields of the run's JSONs, committed whole
/// in capture `reveal-vendor-2` (same run), byte for byte; there reveal
/// named no order for them.
#[test]
fn the_trees_are_those_of_the_reveal_vendor_2_jsons() {
    let run = Capture::open_anchored(&committed_capture("reveal-vendor-2")).unwrap();
    let pairs = [
        ("gemmex-bf16-k7168-m1.json", "gemmex-bf16-k7168-m1.tree"),
        ("gemmex-bf16-k7168-m8.json", "gemmex-bf16-k7168-m8.tree"),
        ("gemmex-bf16-k7168-m64.json", "gemmex-bf16-k7168-m64.tree"),
        ("side-torch-k4096-m1.json", "torch-f32-k4096-m1.tree"),
    ];
    for (json, tree) in pairs {
        let v: serde_json::Value = run.read_json(json).unwrap();
        assert!(v["order"].is_null(), "{json}");
        assert_eq!(v["disagreement_count"], 0, "{json}");
        assert_eq!(format!("{}\n", v["tree"].as_str().unwrap()), listing(tree), "{json}");
    }
}

/// The GemmEx listing, written out here line for line: three chains of
/// fused 16-term nodes starting at k = 0, 2432 and 4864 (152, 152 and 144
/// steps), each node taking the next 16 k of its chain; the first two
/// chains added when the second ends, the third added last.
fn gemmex_listing_built() -> String {
    let mut out = String::new();
    let mut id = 0usize;
    let mut ends = Vec::new();
    let bounds = [GEMMEX_PARTS[0], GEMMEX_PARTS[1], GEMMEX_PARTS[2], GK];
    for p in 0..3 {
        let mut prev: Option<usize> = None;
        for k0 in (bounds[p]..bounds[p + 1]).step_by(16) {
            let ks: Vec<String> = (k0..k0 + 16).map(|k| format!("k{k}")).collect();
            let carried = prev.map_or(String::new(), |n| format!("n{n}, "));
            out += &format!("n{id} = sum({carried}{})\n", ks.join(", "));
            prev = Some(id);
            id += 1;
        }
        ends.push(prev.unwrap());
        if p == 1 {
            out += &format!("n{id} = sum(n{}, n{})\n", ends[0], ends[1]);
            ends.push(id);
            id += 1;
        }
    }
    // ends: part 0, part 1, (p0 + p1), part 2
    out += &format!("n{id} = sum(n{}, n{})\nroot = n{id}\n", ends[2], ends[3]);
    out
}

#[test]
fn the_gemmex_tree_is_three_chains_of_16_term_steps() {
    let built = gemmex_listing_built();
    assert_eq!(built.lines().count(), 451);
    assert_eq!(
        gemmex_listing(1),
        built,
        "the capture is not the stated tree, line for line"
    );
}

/// The order's shape is the capture's: fresh 2432-k tiles are the three
/// parts (tiles combined serially); the same tree spelled as an interleaved
/// split of three 2432-k tiles; the numerics (f, out) are invisible to it.
#[test]
fn the_gemmex_tree_is_split_k_3_in_whole_128_k_tiles() {
    let o: Order = GEMMEX.parse().unwrap();
    assert_eq!(o.to_string(), GEMMEX);
    let want = shape_of(GEMMEX, GK);
    for m in GEMMEX_M {
        assert!(gemmex(m) == want, "M = {m}: the capture is not the shape of {GEMMEX}");
    }
    assert!(want == shape_of("hopper-bf16;ktile=2432;split=3/interleave", GK));
    assert!(want == shape_of("mma(k=16,f=24);ktile=2432;tile=fresh", GK));
    // 2432 = ceil(7168 / (3 x 128)) x 128: three parts of whole 128-k tiles
    assert_eq!(GK.div_ceil(3 * 128) * 128, 2432);
    assert_eq!(GK.div_ceil(3 * 64) * 64, 2432, "64-k tiles would cut the same parts");
    // split-K = 3 in whole tiles, for every K: parts that start on a tile
    assert!(want == shape_of("hopper-bf16;split=3;align=128", GK));
    assert!(want == shape_of("hopper-bf16;split=3;align=64", GK));
    assert!(want != shape_of("hopper-bf16;split=3;align=256", GK));
}

/// The comparison can fail: the grammar's neighbours (split=3 itself cuts
/// at 2390 k; one 128-k tile more or less per part; split=2 as at M = 128;
/// no split as at M = 256; 32-term steps) and the listing with two leaves
/// on either side of a part boundary exchanged are not the capture.
#[test]
fn near_orders_and_a_planted_swap_do_not_match_the_gemmex_tree() {
    let c = gemmex(1);
    assert_none_match(
        &c,
        &[
            "hopper-bf16;split=3",
            "hopper-bf16;split=3;reduce=pairwise",
            "hopper-bf16;ktile=2304;tile=fresh",
            "hopper-bf16;ktile=2560;tile=fresh",
            "hopper-bf16;split=2",
            "hopper-bf16",
            "hopper-bf16;ktile=128;tile=fresh",
            "mma(k=32,f=25);ktile=2432;tile=fresh",
            "fma;ktile=2432;tile=fresh",
        ],
        GK,
    );
    let text = gemmex_listing(1);
    assert!(text.contains(" k2431)\n") && text.contains("n152 = sum(k2432, "));
    let s = planted(&exchange(&text, "k2431", "k2432"), GK);
    assert!(
        s != shape_of(GEMMEX, GK),
        "a swap across the part boundary went unnoticed"
    );
}

/// The explainer's family for bf16 inputs at K = 7168 had no order of this
/// shape (2432-k tiles are not among its widths): this is why reveal named
/// none on the H200. With split parts that start on a k-tile it has one,
/// in each output format (the first of the aligned spellings with these
/// parts). It holds the M = 128 and M = 256 orders' shapes too.
#[test]
fn the_candidate_family_names_the_gemmex_tree_with_aligned_split_parts() {
    let c = gemmex(1);
    let fam = family(Inputs::of_type(InType::Bf16), GK);
    let hits: Vec<String> = fam
        .iter()
        .filter(|cand| Shape::of_tree(&cand.order.compile(GK)) == c)
        .map(|cand| cand.order.to_string())
        .collect();
    assert_eq!(
        hits,
        [
            "mma(k=16,f=25);split=3;align=64",
            "mma(k=16,f=25);split=3;align=64;out=bf16",
            "mma(k=16,f=25);split=3;align=64;out=f16"
        ],
        "of {} candidates",
        fam.len()
    );
    for near in ["mma(k=16,f=25);split=2;out=bf16", "mma(k=16,f=25);out=bf16"] {
        assert!(fam.iter().any(|cand| cand.order.to_string() == near), "{near}");
    }
}

/// The torch tree, built here node for node: 16 parts (64-k tiles, tile t
/// in part t mod 16, each part an fma chain from +0 over its tiles in
/// ascending k), combined as written in `comb` (nested pairs of parts).
enum Comb {
    Part(usize),
    Add(Box<Comb>, Box<Comb>),
}

fn add(a: Comb, b: Comb) -> Comb {
    Comb::Add(Box::new(a), Box::new(b))
}

/// The butterfly over 16 parts, spelled out:
/// `(((p0+p8)+(p4+p12)) + ((p2+p10)+(p6+p14))) + (((p1+p9)+(p5+p13)) + ((p3+p11)+(p7+p15)))`.
fn butterfly16(p: impl Fn(usize) -> Comb + Copy) -> Comb {
    let pair = |i: usize| add(p(i), p(i + 8));
    let quad = |i: usize| add(pair(i), pair(i + 4));
    add(add(quad(0), quad(2)), add(quad(1), quad(3)))
}

fn torch_tree(comb: &Comb) -> Tree {
    let (mut nodes, part) = interleaved_parts(TK, 16, 64);
    fn emit(c: &Comb, part: &[NodeId], nodes: &mut Vec<Node>) -> NodeId {
        match c {
            Comb::Part(p) => part[*p],
            Comb::Add(a, b) => {
                let (a, b) = (emit(a, part, nodes), emit(b, part, nodes));
                nodes.push(Node::Add { a, b });
                (nodes.len() - 1) as NodeId
            }
        }
    }
    let root = emit(comb, &part, &mut nodes);
    Tree {
        nodes,
        root,
        k: TK,
        input: None,
    }
}

#[test]
fn the_torch_tree_is_a_butterfly_over_sixteen_interleaved_parts() {
    let o: Order = TORCH.parse().unwrap();
    assert_eq!(o.to_string(), TORCH);
    let c = torch();
    let built = Shape::of_tree(&torch_tree(&butterfly16(Comb::Part)));
    assert!(c == built, "the capture is not the butterfly built here");
    assert!(c == shape_of(TORCH, TK), "the capture is not the shape of {TORCH}");
    // the numerics are invisible to the shape
    assert!(c == shape_of("muladd;ktile=64;split=16/interleave;reduce=butterfly;out=f16", TK));
}

/// The comparison can fail: the grammar's neighbours (other reductions,
/// tile widths and part counts, the cuBLAS sgemm GEMV order at the same
/// shape, plain lanes), and the butterfly with p7 and p14 exchanged.
#[test]
fn near_orders_and_a_planted_swap_do_not_match_the_torch_tree() {
    let c = torch();
    assert_none_match(
        &c,
        &[
            "fma;ktile=64;split=16/interleave",
            "fma;ktile=64;split=16/interleave;reduce=pairwise",
            "fma;ktile=32;split=16/interleave;reduce=butterfly",
            "fma;ktile=128;split=16/interleave;reduce=butterfly",
            "fma;ktile=64;split=8/interleave;reduce=butterfly",
            "fma;ktile=64;split=32/interleave;reduce=butterfly",
            "fma;split=16;reduce=butterfly",
            "fma;ktile=512;tile=fresh;lanes=16;reduce=serial",
            "fma;lanes=16",
        ],
        TK,
    );
    let swap = |i: usize| {
        Comb::Part(match i {
            7 => 14,
            14 => 7,
            i => i,
        })
    };
    assert!(
        c != Shape::of_tree(&torch_tree(&butterfly16(swap))),
        "p7 <-> p14 matches"
    );
}

/// The explainer's family for f32 inputs at K = 4096 now holds the torch
/// order: exactly its numeric variants have the capture's shape.
#[test]
fn the_candidate_family_names_the_torch_tree() {
    let c = torch();
    assert_family_names_variants(
        Inputs::of_type(InType::F32),
        TK,
        &c,
        ";ktile=64;split=16/interleave;reduce=butterfly",
    );
}

/// The GemmEx anchor rows of the committed `vendor` capture at K = 7168 and
/// M, every position, and the model's row under `order` on the suite's own
/// inputs (regenerated from its seed, bf16 values widened to f32).
struct GemmexRows {
    capture: VendorCapture,
    x: Operands,
}

impl GemmexRows {
    fn open() -> GemmexRows {
        let capture = VendorCapture::open();
        let x = capture.inputs(CaseId::GemmexBf16, GK);
        GemmexRows { capture, x }
    }

    fn rows(&self, m: usize) -> Vec<(String, Vec<f32>)> {
        self.capture.some_rows(CaseId::GemmexBf16, GK, m)
    }

    fn order_row(&self, order: &str) -> Vec<f32> {
        self.x.order_row(order)
    }
}

/// The named order reproduces every captured GemmEx anchor row at M = 1, 8
/// and 64 (0 of 2048 elements differ), as does `split=3` with parts that
/// start on 64 or 128 k; its neighbours in the tree (split=3 at 2390 k,
/// parts aligned to 256 k, 18 or 20 tiles per part, split=2, no split)
/// miss every row.
/// What the rows cannot tell: the bf16 output hides the step arithmetic on
/// these inputs (`f=24` steps, and plain `fma` chains, give the same bytes).
#[test]
fn the_gemmex_order_reproduces_the_captured_anchor_rows() {
    let v = GemmexRows::open();
    let check = |order: &str, reproduces: bool| {
        let row = v.order_row(order);
        for m in GEMMEX_M {
            for (pos, c) in v.rows(m) {
                let diff = differing(&row, &c);
                println!("K=7168 M={m} {pos}: {order}: {diff} of {} elements differ", c.len());
                if reproduces {
                    assert_eq!(diff, 0, "M = {m} {pos}: {order}");
                } else {
                    assert!(diff > 0, "M = {m} {pos}: {order} reproduces the row");
                }
            }
        }
    };
    check(GEMMEX, true);
    // the same parts for every K: split-K = 3 whose parts start on a tile
    // (the family's name, align=64, and 128), against one that starts them
    // on 256 k (parts of 2,560)
    check("hopper-bf16;split=3;align=64;out=bf16", true);
    check("hopper-bf16;split=3;align=128;out=bf16", true);
    check("hopper-bf16;split=3;align=256;out=bf16", false);
    for near in [
        "hopper-bf16;split=3;out=bf16",
        "hopper-bf16;ktile=2304;tile=fresh;out=bf16",
        "hopper-bf16;ktile=2560;tile=fresh;out=bf16",
        "hopper-bf16;split=2;out=bf16",
        "hopper-bf16;out=bf16",
    ] {
        check(near, false);
    }
    for same_bytes in ["mma(k=16,f=24);ktile=2432;tile=fresh;out=bf16", "fma;out=bf16"] {
        check(same_bytes, true);
    }
}
