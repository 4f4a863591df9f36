//! The cuBLAS sgemm GEMV tree (capture `reveal-gemv`): the reduction tree
//! `mxbi reveal` recovered from `cublas:sgemm` at M = 1, K = 4096 on an
//! H200 is, leaf for leaf, the shape of the order
//! `fma;ktile=512;tile=fresh;lanes=16;reduce=serial` compiled at K = 4096
//! (16 lanes, each cut into fresh k-tiles of 512 k, tiles serial inside a
//! lane, lanes serial). Its near neighbours do not match, a listing with two
//! leaves swapped does not match, the explainer's candidate family holds
//! the order, and the anchored file is the logged run's `tree`.

mod common;

use common::committed_capture;
use common::trees::{self, assert_family_names_variants, assert_none_match, exchange, planted};
use mxbi::device::capture::Capture;
use mxbi::explain::candidates::Inputs;
use mxbi::explain::Shape;
use mxbi::order::{InType, Order};

const K: usize = 4096;
const ORDER: &str = "fma;lanes=16;ktile=512;tile=fresh;reduce=serial";
const TREE_FILE: &str = "sgemm-k4096-m1.tree";

/// The anchored listing, as text.
fn listing() -> String {
    trees::listing("reveal-gemv", TREE_FILE)
}

fn captured() -> Shape {
    trees::parse(&listing(), K, TREE_FILE)
}

fn shape_of(spec: &str) -> Shape {
    trees::shape_of(spec, K)
}

#[test]
fn the_captured_tree_is_lanes_cut_into_fresh_k_tiles() {
    let c = captured();
    // every k once, 4,095 binary sums (128 chains of 31, 16 x 7 tile adds, 15 lane adds)
    assert_eq!(c.leaves(), K);
    assert_eq!(c.nodes.len(), 128 * 31 + 16 * 7 + 15);
    assert!(c.nodes.iter().all(|ch| ch.len() == 2));
    let o: Order = ORDER.parse().unwrap();
    assert_eq!(o.to_string(), "fma;ktile=512;tile=fresh;lanes=16;reduce=serial");
    assert!(c == shape_of(ORDER), "the capture is not the shape of {ORDER}");
    // the numerics are invisible to the shape: muladd steps, a bf16 output
    assert!(c == shape_of("muladd;lanes=16;ktile=512;tile=fresh;reduce=serial;out=bf16"));
}

/// The comparison can fail: orders one parameter away, and the listing
/// with two leaves of different lanes swapped, are not the capture.
#[test]
fn near_orders_and_a_planted_swap_do_not_match() {
    let c = captured();
    assert_none_match(
        &c,
        &[
            "fma;lanes=16;ktile=256;tile=fresh;reduce=serial",
            "fma;lanes=16;ktile=1024;tile=fresh;reduce=serial",
            "fma;lanes=16;ktile=512;tile=fresh",
            "fma;lanes=16;ktile=512;tile=fresh;reduce=pairwise",
            "fma;lanes=8;ktile=512;tile=fresh;reduce=serial",
            "fma;lanes=32;ktile=512;tile=fresh;reduce=serial",
            "fma;lanes=16;reduce=serial",
            "fma;lanes=16",
            "fma;ktile=512;tile=fresh",
            "fma;ktile=32;split=16/interleave",
        ],
        K,
    );
    // k16 (lane 0) and k17 (lane 1) exchanged in the listing
    let text = listing();
    assert!(text.contains("n0 = sum(k0, k16)\n") && text.contains(" k17)\n"));
    let s = planted(&exchange(&text, "k16)", "k17)"), K);
    assert!(s != shape_of(ORDER), "a swap of two leaves across lanes went unnoticed");
}

/// The explainer's family for f32 inputs at K = 4096 holds the order, and
/// the candidates with the capture's shape are exactly its numeric
/// variants (fma or muladd steps, f32, bf16 or f16 output).
#[test]
fn the_candidate_family_names_the_captured_tree() {
    let c = captured();
    assert_family_names_variants(
        Inputs::of_type(InType::F32),
        K,
        &c,
        ";ktile=512;tile=fresh;lanes=16;reduce=serial",
    );
}

/// The anchored file is the `tree` of the logged run (2026-12-01), which
/// is also the tree the anchored `reveal-vendor` capture recorded the day
/// before.
#[test]
fn the_capture_is_the_logged_run() {
    let text = listing();
    let tree_of = |path: std::path::PathBuf| -> String {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            (v["m"].as_u64(), v["k"].as_u64()),
            (Some(1), Some(K as u64)),
            "{}",
            path.display()
        );
        v["tree"].as_str().unwrap().to_string()
    };
    let logged = tree_of(committed_capture("logs/explain-2026-12-01/side-sgemm-k4096-m1.json"));
    assert_eq!(text, format!("{logged}\n"));
    let vendor = Capture::open_anchored(&committed_capture("reveal-vendor")).unwrap();
    let v: serde_json::Value = vendor.read_json("side-sgemm-k4096-m1.json").unwrap();
    assert_eq!(v["tree"].as_str(), Some(logged.as_str()));
}
