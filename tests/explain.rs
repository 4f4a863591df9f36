//! The explainer (docs/EXPLAIN.md): reveal recovers every order family of
//! the model exactly (recovered tree == compiled tree), identification
//! finds planted orders and says so when nothing reproduces a row, the
//! divergence of a known pair is located, and exactness explains an
//! identity-scale pass against a K-varying-scale failure.

use mxbi::explain::candidates::{self, Inputs};
use mxbi::explain::{self, Fix, IdentifyOptions, Mechanism, Reason, RevealOptions, Varies};
use mxbi::gemm::{gemm, BLayout, Matrix, Problem};
use mxbi::mx::MxFormat;
use mxbi::order::{InType, Order};
use mxbi::rng::SplitMix64;
use mxbi::subject::{Dispatch, Model, Subject, SubjectError};
use std::sync::atomic::{AtomicUsize, Ordering};

fn order(s: &str) -> Order {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn opts(m: usize, k: usize, n: usize, input: InType) -> RevealOptions {
    RevealOptions {
        m,
        k,
        n,
        input,
        seed: 7,
        verify_rows: 4,
    }
}

/// Reveals `spec` on the model and checks the recovered order's tree.
fn reveals_exactly(spec: &str, o: RevealOptions) -> explain::Revealed {
    let want = order(spec);
    let r = explain::reveal(&Model::new(want), o).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert_eq!(r.disagreement_count, 0, "{spec}: {r}");
    let got = r.order.unwrap_or_else(|| panic!("{spec}: no order recovered:\n{r}"));
    if got.compile(o.k) != want.compile(o.k) {
        // only a known identity: promotion without block scales,
        // fma(1, p, acc) = RN(acc + p), is the serial sum of the blocks
        assert!(
            want.promote.is_some() && r.equivalent.contains(&want),
            "{spec}: recovered {got}\n{r}"
        );
        return r;
    }
    assert_eq!(got.compile(o.k), want.compile(o.k), "{spec}: recovered {got}\n{r}");
    // the shape alone is the compiled tree's shape
    assert!(r.shape == explain::Shape::of_tree(&want.compile(o.k)), "{spec}");
    r
}

#[test]
fn reveal_recovers_every_f32_family() {
    for spec in [
        "fma",
        "muladd",
        "fma;split=4",
        "fma;split=3;reduce=pairwise",
        "muladd;split=6;reduce=pairwise",
        "fma;ktile=32;tile=fresh",
        "fma;ktile=16;tile=fresh;reduce=pairwise",
        "fma;ktile=16;split=4/interleave",
        "muladd;ktile=8;split=2/interleave;reduce=pairwise",
        "fma;ktile=16;tile=fresh;split=2",
        "fma;lanes=8",
        "muladd;lanes=16;reduce=serial",
        "fma;lanes=4;reduce=pairwise",
        "fma;lanes=8;ktile=64;tile=fresh;reduce=serial",
        "muladd;lanes=8;ktile=64;tile=fresh",
        "fma;out=bf16",
        "fma;split=4;out=f16",
    ] {
        let r = reveals_exactly(spec, opts(8, 128, 64, InType::F32));
        assert_eq!(r.scheme, explain::reveal::Scheme::Lines, "{spec}");
    }
}

#[test]
fn reveal_recovers_tensor_core_families() {
    for (spec, t, k) in [
        ("hopper-bf16", InType::Bf16, 128),
        ("ampere-bf16", InType::Bf16, 128),
        ("hopper-bf16;split=2;reduce=pairwise", InType::Bf16, 128),
        ("hopper-bf16;out=bf16", InType::Bf16, 128),
        ("hopper-f16", InType::F16, 64),
        ("hopper-fp8-wgmma", InType::E4M3, 128),
        ("hopper-fp8-mma-sync", InType::E4M3, 128),
        ("ada-fp8", InType::E4M3, 128),
        ("deepgemm-fp8", InType::E4M3, 256),
    ] {
        reveals_exactly(spec, opts(16, k, 32, t));
    }
}

/// An output too narrow to count K units: windowed probes.
#[test]
fn reveal_counts_in_windows_when_the_output_rounds() {
    let r = reveals_exactly("fma;split=2;out=bf16", opts(32, 320, 32, InType::F32));
    assert_eq!(r.window, 256);
    assert_eq!(r.scheme, explain::reveal::Scheme::Lines);
    // f16 inputs: lines too (units of 2^-24 against 2^15), windowed
    let r = reveals_exactly("hopper-f16;out=bf16", opts(16, 320, 16, InType::F16));
    assert_eq!(r.window, 256);
    assert_eq!(r.scheme, explain::reveal::Scheme::Lines);
    // FP8 inputs keep the diagonal layout (one factor's range is too short)
    let r = reveals_exactly("hopper-fp8-wgmma", opts(16, 128, 16, InType::E4M3));
    assert_eq!(r.scheme, explain::reveal::Scheme::Diagonal);
    let r = reveals_exactly("fma;split=2", opts(16, 64, 16, InType::E5M2));
    assert_eq!(r.scheme, explain::reveal::Scheme::Diagonal);
}

/// An f16-input GEMV answers N probes a launch (lines with subnormal units):
/// on the diagonal layout it answered one (8,195 launches here, 22 s).
#[test]
fn an_f16_gemv_is_probed_a_line_per_column() {
    for (spec, most) in [("fma;out=f16", 140), ("fma;split=8;reduce=pairwise;out=f16", 240)] {
        let r = reveals_exactly(spec, opts(1, 4096, 64, InType::F16));
        assert_eq!((r.scheme, r.window), (explain::reveal::Scheme::Lines, 2048), "{spec}");
        assert!(r.launches <= most, "{spec}: {} launches", r.launches);
    }
}

/// A subject that flushes f16 subnormal inputs to zero (as a kernel with
/// FTZ inputs would): the f16 lines' units vanish, calibration fails, and
/// reveal probes on the diagonal in normal numbers instead.
struct FlushesSubnormals(Model);

impl Subject for FlushesSubnormals {
    fn name(&self) -> String {
        format!("ftz({})", self.0.name())
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let (Matrix::F32(a), Matrix::F32(b)) = (p.a, p.b) else {
            unreachable!("f16 reveals pass f32 operands")
        };
        let ftz = |x: &[f32]| -> Vec<f32> {
            x.iter()
                .map(|&v| if v.abs() < 2f32.powi(-14) { 0.0 } else { v })
                .collect()
        };
        let (a, b) = (ftz(a), ftz(b));
        let q = Problem {
            a: Matrix::F32(&a),
            b: Matrix::F32(&b),
            ..*p
        };
        self.0.run(&q, rows)
    }
}

#[test]
fn reveal_falls_back_to_the_diagonal_when_f16_subnormals_are_flushed() {
    let want = order("fma;split=2");
    let r = explain::reveal(&FlushesSubnormals(Model::new(want)), opts(8, 64, 8, InType::F16)).unwrap();
    assert_eq!(r.scheme, explain::reveal::Scheme::Diagonal);
    assert_eq!((r.order, r.disagreement_count), (Some(want), 0));
}

/// The H200's `cublas:gemmex-bf16` at M = 1, K = 7168 stopped at
/// calibration ("does not return sums of units exactly"): with one row only
/// the K-unit count was tried. The sizes now lie along the columns, so a
/// GEMV whose bf16 output rounds the counts is probed in windows of 256
/// units, N windows per launch.
#[test]
fn reveal_a_gemv_whose_bf16_output_rounds_the_counts() {
    let r = reveals_exactly("fma;out=bf16", opts(1, 7168, 2048, InType::F32));
    assert_eq!((r.window, r.scheme), (256, explain::reveal::Scheme::Lines));
    // one launch answers N windowed probes: 7167 pairs x 28 windows (and
    // 3 launches repeat a sample of them with other values)
    assert!(r.launches <= 7167 * 28 / 2048 + 4 + 3, "{}", r.launches);
    for spec in ["fma;lanes=16;out=bf16", "hopper-bf16;split=2;out=bf16"] {
        let r = reveals_exactly(spec, opts(1, 1024, 256, InType::Bf16));
        assert_eq!(r.window, 256, "{spec}");
    }
    // a zero that can fail: the same subject is refused when the counts
    // are taken whole (K units through a bf16 output)
    let r = reveals_exactly("fma;out=bf16", opts(4, 512, 64, InType::F32));
    assert_eq!(r.window, 256);
    let whole = reveals_exactly("fma", opts(4, 512, 64, InType::F32));
    assert_eq!(whole.window, 512);
}

/// Windowed probes rank a set's leaves by the ancestor they share with its
/// first leaf (`reveal/rank.rs`): a sample of at most 256 leaves counted
/// exactly, then each class of equal counts among its own leaves (or
/// sampled again, with a zero test that closes a class of one ancestor),
/// instead of every leaf's count added up over windows of 256 terms. A
/// probe that loses every unit of the first stage (which holds the leaf
/// the set hangs from) reads as the ancestor the set hangs from (the fused
/// nodes of `hopper-bf16`).
#[test]
fn windowed_probes_rank_leaves_in_stages() {
    // (order, input, distinct probes of the windows-added-up scheme at
    // 56911f3, distinct probes now: exact counts, the same every run)
    for (spec, t, before, now) in [
        ("fma;out=bf16", InType::F32, 16_376, 4_094),
        ("fma;split=2;out=bf16", InType::F32, 20_468, 7_164),
        ("fma;split=4;reduce=pairwise;out=bf16", InType::F32, 22_512, 10_232),
        ("fma;lanes=16;out=bf16", InType::F32, 24_548, 12_909),
        (
            "fma;ktile=512;tile=fresh;lanes=16;reduce=serial;out=bf16",
            InType::F32,
            19_769,
            12_352,
        ),
        ("hopper-bf16;out=bf16", InType::Bf16, 31_721, 19_439),
    ] {
        let r = reveals_exactly(spec, opts(1, 2048, 512, t));
        assert_eq!(r.window, 256, "{spec}");
        assert_eq!(r.distinct_probes, now, "{spec} (before: {before}): {r}");
    }
    // a chain GEMV: two probes a leaf (the sample, then the class of 16
    // between two sampled leaves), N = 64 a launch, + calibration, three
    // repeats and the verification launch (1,029 launches before)
    let r = reveals_exactly("fma;out=bf16", opts(1, 4096, 64, InType::F32));
    assert_eq!(
        (r.distinct_probes, r.launches),
        (2 * 4095, 2 * 4095usize.div_ceil(64) + 5),
        "{r}"
    );
}

/// Memory: the answers are tallied per distinct probe, not stored per
/// position; every requested probe's answers are still checked.
#[test]
fn reveal_tallies_answers_per_probe() {
    let r = reveals_exactly("fma;split=2", opts(256, 64, 256, InType::F32));
    // two launches of 256 x 256 answers: 0 against the rest (63 distinct
    // probes), then part 1's chain as a copy of part 0's (31 pairs), after
    // which nothing is left to ask
    assert_eq!(r.probes, 2 * 256 * 256, "{r}");
    assert_eq!(r.distinct_probes, 63 + 31);
    assert_eq!(r.checked, r.probes, "{r}");
}

fn mx_opts(m: usize, k: usize, n: usize) -> RevealOptions {
    opts(m, k, n, InType::E4M3)
}

/// MX inputs: probes through the E8M0 scales (one unit per block, `+-2^40`
/// in the scales). A block-scale `fma`/`muladd` order's tree is over the
/// blocks: recovered = compiled tree.
#[test]
fn reveal_mx_through_the_scales() {
    for spec in [
        "fma;scale=block",
        "muladd;scale=block",
        "fma;split=4;scale=block",
        "fma;split=3;reduce=pairwise;scale=block",
        "fma;ktile=4;split=2/interleave;scale=block",
        "fma;lanes=8;scale=block",
        "fma;scale=block;out=bf16",
    ] {
        let want = order(spec);
        let r = explain::reveal_mx(&Model::new(want), mx_opts(8, 2048, 64), MxFormat::Fp8E4M3)
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(r.disagreement_count, 0, "{spec}: {r}");
        assert_eq!(r.shape.k, 64, "{spec}");
        assert!(r.shape == explain::Shape::of_tree(&want.compile(64)), "{spec}: {r}");
        let got = r.order.unwrap_or_else(|| panic!("{spec}: no order:\n{r}"));
        if got.scale != want.scale {
            // a bf16 output can hide the scale point on the random inputs:
            // then the planted order is listed as equivalent on them
            assert!(r.equivalent.contains(&want), "{spec}: recovered {got}\n{r}");
            continue;
        }
        assert_eq!(got.compile(64), want.compile(64), "{spec}: recovered {got}\n{r}");
    }
    // a square launch probes the blocks in both dimensions too (grid
    // launches through the scales: +B in a row's block scale, -B in a
    // column's)
    for spec in [
        "fma;scale=block",
        "fma;split=4;scale=block",
        "fma;ktile=4;split=2/interleave;scale=block",
    ] {
        let want = order(spec);
        let r = explain::reveal_mx(&Model::new(want), mx_opts(16, 32 * 200, 16), MxFormat::Fp8E4M3)
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(r.disagreement_count, 0, "{spec}: {r}");
        assert!(r.grid_launches >= 2, "{spec}: {r}");
        assert!(r.shape == explain::Shape::of_tree(&want.compile(200)), "{spec}: {r}");
        assert_eq!(r.order.map(|o| o.compile(200)), Some(want.compile(200)), "{spec}: {r}");
    }
    // orders that sum elements: the tree seen at one element per block,
    // the rest decided by the bytes on random MX inputs
    for spec in [
        "fma",
        "fma;split=2",
        "blackwell-mxf8f6f4",
        "mma(k=32,f=13,out=13,in=e4m3);promote=32;scale=block",
    ] {
        let want = order(spec);
        let r = explain::reveal_mx(&Model::new(want), mx_opts(8, 1024, 64), MxFormat::Fp8E4M3)
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(r.disagreement_count, 0, "{spec}: {r}");
        let bs = 32u32;
        let seen = explain::Shape::of_tree(&want.compile(1024)).restrict(32, |x| (x % bs == 0).then_some(x / bs));
        assert!(r.shape == seen, "{spec}: {r}");
        let got = r.order.unwrap_or_else(|| panic!("{spec}: no order:\n{r}"));
        assert!(
            got.compile(1024) == want.compile(1024) && got.scale == want.scale || r.equivalent.contains(&want),
            "{spec}: recovered {got}\n{r}"
        );
    }
}

/// Many probes per launch: far fewer launches than FPRev's one per probe.
#[test]
fn reveal_packs_probes_into_launches() {
    let r = reveals_exactly("fma", opts(64, 512, 512, InType::F32));
    // one calibration, one launch answers all 511 probes, two repeat 64
    // of them with other values (data dependence: rescaled up and the
    // refill share a launch, 512 columns holding both), one verification
    assert_eq!(r.launches, 5, "{r}");
    assert_eq!(r.repeats.repeats.len(), 3, "three variants: {:?}", r.repeats.repeats);
    assert_eq!(r.repeats.probes, 64);
    assert!(r.probes >= 511);
}

/// A square launch answers a pair at every element (grid launches): a
/// chain or a contiguous split at M = N = 64, K = 4096 takes 33 grid
/// launches where FPRev's first level on lines took 64 (69 launches in
/// all), and an interleaved tree, whose lanes the windows do not join,
/// stops the grid after its two scouting windows.
#[test]
fn a_square_launch_probes_pairs_in_both_dimensions() {
    for spec in ["fma", "fma;split=64", "fma;split=8;reduce=pairwise"] {
        let r = reveals_exactly(spec, opts(64, 4096, 64, InType::F32));
        assert_eq!((r.grid_launches, r.launches), (33, 38), "{spec}: {r}");
    }
    let r = reveals_exactly("fma;ktile=8;split=8/interleave", opts(64, 4096, 64, InType::F32));
    assert_eq!(r.grid_launches, 2, "{r}");
    // lines answer as many a launch where one side is long: no grid
    let r = reveals_exactly("fma", opts(64, 512, 512, InType::F32));
    assert_eq!(r.grid_launches, 0, "{r}");
}

/// A GEMV (M = 1, N = 64: a launch answers 64 pairs) asks about one pair
/// a node where the tree repeats a pattern: pairs of leaves the first
/// leaf's stride apart realize lanes, contiguous parts and fresh k-tiles
/// (4,095 pairs; two on a line, the pair x with the pair two strides on,
/// so 32 launches, with the first level's first launch, calibration,
/// three repeats and verification; 64 with one pair a line); the parts of an
/// interleaved split are realized as copies of the first leaf's part
/// after the first level. A part's chain that goes on at a jump (k-tiles
/// dealt round-robin) is linked where the stride stops joining: a pair
/// from the part's earlier run to where it goes on, first among the
/// components of the missing size, then by the shift found. FPRev's levels
/// alone took 197, 165, 184 and 197 launches for the lanes, the parts, the
/// fresh tiles and the first interleaved split (a chain: 69 both ways);
/// the interleaved splits took 124, 128 and 127 with the stride round but
/// no links, and 78, 88 and 81 with links but one pair a line.
#[test]
fn a_gemv_asks_about_one_pair_a_node() {
    for (spec, launches) in [
        ("fma", 38),
        ("fma;lanes=16", 40),
        ("fma;split=8;reduce=pairwise", 39),
        ("fma;ktile=512;tile=fresh;lanes=16;reduce=serial", 39),
        ("fma;ktile=64;split=16/interleave;reduce=butterfly", 57),
        ("fma;ktile=8;split=8/interleave", 75),
        ("fma;ktile=32;split=8/interleave;reduce=pairwise", 59),
    ] {
        let r = reveals_exactly(spec, opts(1, 4096, 64, InType::F32));
        assert_eq!(r.launches, launches, "{spec}: {r}");
    }
    // bf16 inputs hold no term `2^12 + 1`: one probe a line, FPRev's
    // levels for the fused nodes
    let r = reveals_exactly("hopper-bf16", opts(1, 4096, 64, InType::Bf16));
    assert_eq!(r.launches, 549, "{r}");
}

/// Two probes a line need an f32 output (24 significant bits). A bf16
/// output counts K = 256 units exactly, so the stride round tries them:
/// the check line of its first launch comes back rounded, none of that
/// launch's lines of two is read (their probes are asked again alone) and
/// none is used again. The tree is recovered; the try costs one launch
/// (21 launches with one probe a line).
#[test]
fn an_output_that_rounds_the_check_line_gets_one_probe_a_line() {
    let r = reveals_exactly("fma;out=bf16", opts(1, 256, 16, InType::F32));
    assert_eq!((r.window, r.launches), (256, 22), "{r}");
}

/// On a square launch the grid answers every neighbour pair; an
/// interleaved split's parts go on at jumps, which the links join after
/// the grid (before them: 132, 152 and 103 launches).
#[test]
fn a_square_launch_links_the_runs_of_an_interleaved_split() {
    for (spec, launches) in [
        ("fma;ktile=64;split=16/interleave", 41),
        ("fma;ktile=32;split=8/interleave;reduce=pairwise", 43),
        ("fma;ktile=64;split=32/interleave;reduce=butterfly", 42),
    ] {
        let r = reveals_exactly(spec, opts(64, 4096, 64, InType::F32));
        assert_eq!((r.grid_launches, r.launches), (33, launches), "{spec}: {r}");
    }
}

/// The model of an order, except that the answer at row 12, column 0 of
/// its second launch (the first launch of probes, after calibration) is
/// one unit less: a whole count, at a position that repeats the probe
/// (row 0 gave its first answer) and that the verification launch does
/// not read (its random values sit in the first 8 rows).
struct OneAnswerOff(Order, AtomicUsize);

impl Subject for OneAnswerOff {
    fn name(&self) -> String {
        "one-answer-off".into()
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let mut c = gemm(&self.0, p, rows).unwrap();
        if self.1.fetch_add(1, Ordering::SeqCst) == 1 {
            c[12 * p.n] -= 1.0;
        }
        Ok(c)
    }
}

/// One answer that contradicts a tree every other answer agrees with: the
/// tree is the model's, the answer is listed, and no order is named.
#[test]
fn no_order_is_named_for_a_tree_an_answer_contradicts() {
    let s = OneAnswerOff(order("fma;split=4"), AtomicUsize::new(0));
    let r = explain::reveal(&s, opts(16, 256, 64, InType::F32)).unwrap();
    assert!(
        r.shape == explain::Shape::of_tree(&order("fma;split=4").compile(256)),
        "{r}"
    );
    assert_eq!(r.disagreement_count, 1, "{r}");
    assert_eq!((r.disagreements[0].row, r.disagreements[0].col), (12, 0), "{r}");
    assert!(r.shape_matches.contains(&order("fma;split=4")), "{r}");
    assert_eq!(r.order, None, "{r}");
    assert!(r.to_string().contains("no order named"), "{r}");
    // the same subject with the answer left alone is named
    let r = explain::reveal(&Model::new(order("fma;split=4")), opts(16, 256, 64, InType::F32)).unwrap();
    assert_eq!(r.order, Some(order("fma;split=4")), "{r}");
}

/// A subject whose right half of columns is reduced differently: the
/// probes sharing a launch do not share a tree, and reveal says so.
struct TwoTrees(Order, Order);

impl Subject for TwoTrees {
    fn name(&self) -> String {
        "two-trees".into()
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let l = gemm(&self.0, p, rows).unwrap();
        let r = gemm(&self.1, p, rows).unwrap();
        let n = p.n;
        Ok(l.iter()
            .zip(&r)
            .enumerate()
            .map(|(i, (x, y))| if i % n < n / 2 { *x } else { *y })
            .collect())
    }
}

#[test]
fn reveal_says_when_positions_do_not_share_a_tree() {
    let s = TwoTrees(order("fma"), order("fma;split=2"));
    match explain::reveal(&s, opts(4, 64, 128, InType::F32)) {
        Ok(r) => {
            assert!(r.disagreement_count > 0, "{r}");
            assert!(r.to_string().contains("contradict the recovered tree"), "{r}");
            // no order is named for a tree some answers contradict
            assert_eq!(r.order, None, "{r}");
            assert!(r.to_string().contains("no order named"), "{r}");
        }
        Err(e) => assert!(matches!(e, explain::RevealError::Inconsistent(_)), "{e}"),
    }
    // the control: the same subject with one tree on both halves agrees
    let same = TwoTrees(order("fma;split=2"), order("fma;split=2"));
    let r = explain::reveal(&same, opts(4, 64, 128, InType::F32)).unwrap();
    assert_eq!(r.disagreement_count, 0);
    assert_eq!(r.order, Some(order("fma;split=2")));
    // the same under a bf16 output (windowed ranks, zero tests included:
    // K = 1024 > 256 units): the halves' answers contradict one tree
    let s = TwoTrees(order("fma;out=bf16"), order("fma;split=2;out=bf16"));
    match explain::reveal(&s, opts(4, 1024, 128, InType::F32)) {
        Ok(r) => {
            assert!(r.window < 1024 && r.disagreement_count > 0, "{r}");
            assert_eq!(r.order, None, "{r}");
        }
        Err(e) => assert!(matches!(e, explain::RevealError::Inconsistent(_)), "{e}"),
    }
    let same = TwoTrees(order("fma;split=2;out=bf16"), order("fma;split=2;out=bf16"));
    let r = explain::reveal(&same, opts(4, 1024, 128, InType::F32)).unwrap();
    assert_eq!((r.window, r.disagreement_count), (256, 0));
    assert_eq!(r.order, Some(order("fma;split=2;out=bf16")));
}

/// A subject that is not a sum of its products: reveal refuses it.
struct NotASum;

impl Subject for NotASum {
    fn name(&self) -> String {
        "not-a-sum".into()
    }
    fn run(&self, p: &Problem, _rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        Ok(vec![0.5; p.m * p.n])
    }
}

#[test]
fn reveal_refuses_a_subject_that_does_not_sum() {
    let e = explain::reveal(&NotASum, opts(4, 64, 16, InType::F32)).unwrap_err();
    assert!(e.to_string().contains("does not return sums"), "{e}");
    // f32 lines' own units (1): only f16 inputs retry on the diagonal
    assert!(e.to_string().contains("(units of 1e0:"), "{e}");
    let e = explain::reveal(&NotASum, opts(4, 64, 16, InType::F16)).unwrap_err();
    assert!(
        e.to_string().contains("(units of 2.44140625e-4:"),
        "the diagonal's units: {e}"
    );
}

fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            let e = r.range_i64(-6, 6) as i32;
            let m = 1.0 + (r.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
            if r.next_u32() & 1 == 1 {
                -m * 2f32.powi(e)
            } else {
                m * 2f32.powi(e)
            }
        })
        .collect()
}

fn problem<'a>(a: &'a [f32], b: &'a [f32], m: usize, k: usize, n: usize) -> Problem<'a> {
    Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m,
        n,
        k,
        b_layout: BLayout::Kn,
    }
}

#[test]
fn identify_finds_planted_orders_and_says_when_none_fits() {
    let (m, k, n) = (3, 512, 48);
    let a = random_f32(m * k, 1);
    let b = random_f32(k * n, 2);
    let p = problem(&a, &b, m, k, n);
    let fam = candidates::family(Inputs::of(&p), k);
    for spec in [
        "fma",
        "muladd;split=7;reduce=pairwise",
        "fma;ktile=64;split=4/interleave",
        "fma;lanes=32;out=bf16",
    ] {
        let c = gemm(&order(spec), &p, None).unwrap();
        let ids = explain::identify(
            &p,
            &[0, 2],
            &[&c[..n], &c[2 * n..]].concat(),
            &fam,
            IdentifyOptions::default(),
        )
        .unwrap();
        for id in &ids {
            // a bf16 output rounds many orders to the same bytes: the
            // planted one is among them
            if spec.ends_with("out=bf16") {
                assert!(
                    id.matches.contains(&order(spec)) && id.matches.len() > 1,
                    "{spec}: {id}"
                );
            } else {
                assert_eq!(id.matches, vec![order(spec)], "{spec}: {id}");
            }
            assert!(id.closest.is_none());
        }
    }
    // a foreign row: the chain over k descending, which no order spells
    let foreign: Vec<f32> = (0..n)
        .map(|j| (0..k).rev().fold(0f32, |acc, kk| a[kk].mul_add(b[kk * n + j], acc)))
        .collect();
    let id = &explain::identify(&p, &[0], &foreign, &fam, IdentifyOptions::default()).unwrap()[0];
    assert!(id.matches.is_empty(), "{id}");
    let c = id.closest.as_ref().unwrap();
    assert!(c.elements_differ > 0 && c.max_ulp > 0);
    assert!(id.to_string().contains("no order in the family reproduces it"), "{id}");
    // a zero that can fail: one flipped low bit of a planted row is caught,
    // and the closest order is the planted one, one element and one ulp away
    let mut c = gemm(&order("fma;split=4"), &p, Some(&[1])).unwrap();
    c[5] = f32::from_bits(c[5].to_bits() ^ 1);
    let id = &explain::identify(&p, &[1], &c, &fam, IdentifyOptions::default()).unwrap()[0];
    assert!(id.matches.is_empty(), "{id}");
    let cl = id.closest.as_ref().unwrap();
    assert_eq!(
        (cl.order, cl.elements_differ, cl.max_ulp),
        (order("fma;split=4"), 1, 1),
        "{id}"
    );
}

#[test]
fn identify_finds_dispatch_entries_and_mx_scale_points() {
    // MX inputs: the scale point is identified
    let (m, k, n) = (2, 256, 16);
    let mut r = SplitMix64::new(9);
    let codes = |len: usize, r: &mut SplitMix64| -> Vec<u8> {
        (0..len)
            .map(|_| (r.next_u32() % 0x7E) as u8 | ((r.next_u32() & 1) << 7) as u8)
            .collect()
    };
    let ca = codes(m * k, &mut r);
    let cb = codes(k * n, &mut r);
    let sa: Vec<u8> = (0..m * k / 32).map(|_| 120 + (r.next_u32() % 12) as u8).collect();
    let sb: Vec<u8> = (0..k / 32 * n).map(|_| 120 + (r.next_u32() % 12) as u8).collect();
    let f = MxFormat::Fp8E4M3;
    let p = Problem {
        a: Matrix::Mx {
            codes: &ca,
            scales: &sa,
            format: f,
        },
        b: Matrix::Mx {
            codes: &cb,
            scales: &sb,
            format: f,
        },
        m,
        n,
        k,
        b_layout: BLayout::Kn,
    };
    let fam = candidates::with_dispatch(Inputs::Mx, k, &[order("fma;split=2;scale=block")]);
    for spec in [
        "fma;scale=block",
        "fma;split=2;scale=block",
        "fma",
        "blackwell-mxf8f6f4",
    ] {
        let c = gemm(&order(spec), &p, Some(&[1])).unwrap();
        let id = &explain::identify(&p, &[1], &c, &fam, IdentifyOptions::default()).unwrap()[0];
        assert_eq!(id.order(), Some(order(spec)), "{spec}: {id}");
    }
}

#[test]
fn divergence_of_a_split_that_changes_with_m() {
    // a dispatch that runs one FMA chain at M = 1 and split-K = 4 from M = 2
    let d = Dispatch::parse(
        "t.json",
        r#"{"dispatch": [{"m_max": 1, "order": "fma"}, {"order": "fma;split=4"}]}"#,
    )
    .unwrap();
    let (k, n) = (1024, 64);
    let a = random_f32(2 * k, 3);
    let b = random_f32(k * n, 4);
    let one = d.run(&problem(&a[..k], &b, 1, k, n), None).unwrap();
    let two = d.run(&problem(&a, &b, 2, k, n), Some(&[0])).unwrap();
    let p1 = problem(&a[..k], &b, 1, k, n);
    let fam = candidates::family(Inputs::of(&p1), k);
    let left = explain::identify(&p1, &[0], &one, &fam, IdentifyOptions::default()).unwrap()[0]
        .order()
        .unwrap();
    let right = explain::identify(&p1, &[0], &two, &fam, IdentifyOptions::default()).unwrap()[0]
        .order()
        .unwrap();
    assert_eq!((left, right), (order("fma"), order("fma;split=4")));
    let diff = explain::diverge(&left, &right, k, false);
    let dv = diff.divergence.as_ref().unwrap();
    assert_eq!(dv.node, 257);
    assert_eq!(diff.common_terms, 256);
    let at = diff.right_at.as_ref().unwrap();
    assert_eq!((at.term, at.part, at.part_range), (256, Some((1, 4)), Some((256, 511))));
    assert!(matches!(diff.mechanisms[..], [Mechanism::Split { .. }]));
    let text = diff.to_string();
    assert!(text.contains("split part 1 of 4, k 256..511"), "{text}");
    // the ULP map: the rows differ, tile by tile
    let map = explain::ulp_map(&one, &two, 16);
    assert_eq!(map.len(), 4);
    assert!(map.iter().map(|t| t.differ).sum::<usize>() > 0);
    // along K: identical while only the first part's terms are present
    let prof = explain::k_profile(&p1, 0, &left, &right, 128).unwrap();
    assert_eq!(prof[0].k_end, 128);
    assert!(
        prof.iter().take_while(|c| c.k_end <= 256).all(|c| c.differ == 0),
        "{prof:?}"
    );
    assert!(prof.iter().any(|c| c.differ > 0), "{prof:?}");
    // the fix: one split plan for every M
    let fixes = explain::suggest(&diff, &Varies::BatchSize { left: 1, right: 2 });
    assert!(matches!(&fixes[0], Fix::SplitFromKN { order, .. } if *order == right));
    assert!(fixes[0].to_string().contains("fma;split=4"));
}

/// MX codes in [1/2, 4) (e4m3), with scales from `scale(block, row_or_col)`.
fn mx_problem(m: usize, k: usize, n: usize, varying: bool) -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let f = mxbi::format::Format::E4M3;
    let mut r = SplitMix64::new(11);
    let code = |r: &mut SplitMix64| loop {
        let c = (r.next_u32() & 0xFF) as u8;
        let v = f.decode_f32(c as u16).abs();
        if (0.5..4.0).contains(&v) {
            return c;
        }
    };
    let ca: Vec<u8> = (0..m * k).map(|_| code(&mut r)).collect();
    let cb: Vec<u8> = (0..k * n).map(|_| code(&mut r)).collect();
    let kb = k / 32;
    let scale = |r: &mut SplitMix64| if varying { (127 + r.range_i64(-6, 2)) as u8 } else { 127 };
    let sa: Vec<u8> = (0..m * kb).map(|_| scale(&mut r)).collect();
    let sb: Vec<u8> = (0..kb * n).map(|_| scale(&mut r)).collect();
    (ca, sa, cb, sb)
}

#[test]
fn exactness_explains_identity_pass_and_k_varying_fail() {
    let (m, k, n) = (1, 128, 16);
    let family: Vec<Order> = [
        "fma",
        "muladd",
        "fma;split=4",
        "fma;split=4;reduce=pairwise",
        "fma;lanes=8",
        "fma;scale=block",
        "muladd;scale=block;split=2",
    ]
    .iter()
    .map(|s| order(s))
    .collect();
    let mut verdicts = Vec::new();
    for varying in [false, true] {
        let (ca, sa, cb, sb) = mx_problem(m, k, n, varying);
        let f = MxFormat::Fp8E4M3;
        let p = Problem {
            a: Matrix::Mx {
                codes: &ca,
                scales: &sa,
                format: f,
            },
            b: Matrix::Mx {
                codes: &cb,
                scales: &sb,
                format: f,
            },
            m,
            n,
            k,
            b_layout: BLayout::Kn,
        };
        let e = explain::analyze(&p, &[0], &family).unwrap();
        // a proof never contradicts the measurement
        assert!(e.iter().all(|x| x.reason.is_none() || x.same_bytes), "{e:?}");
        verdicts.push(e);
    }
    // identity scales: every element proven order-independent (all partial sums exact)
    assert!(verdicts[0]
        .iter()
        .all(|x| x.same_bytes && matches!(x.reason, Some(Reason::ExactSums { .. }))));
    // K-varying scales: the same codes lose the proof, and the orders
    // disagree (a witness pair of orders with different bytes)
    let unproven = verdicts[1].iter().filter(|x| x.reason.is_none()).count();
    let witnessed = verdicts[1].iter().filter(|x| x.witness.is_some()).count();
    assert!(
        unproven > 0 && witnessed > 0,
        "{unproven} unproven, {witnessed} witnessed"
    );
    assert!(verdicts[1].iter().all(|x| x.witness.is_none() || x.reason.is_none()));
}

#[test]
fn exactness_two_terms() {
    let (m, k, n) = (1, 64, 1);
    let mut a = vec![0f32; k];
    let mut b = vec![0f32; k];
    a[3] = 1.5;
    b[3] = 3.0;
    a[40] = 2f32.powi(-20);
    b[40] = 1.25;
    let p = problem(&a, &b, m, k, n);
    let fam: Vec<Order> = ["fma", "muladd", "fma;split=8;reduce=pairwise"]
        .iter()
        .map(|s| order(s))
        .collect();
    let e = explain::analyze(&p, &[0], &fam).unwrap();
    assert!(
        matches!(e[0].reason, Some(Reason::AtMostTwoTerms { nonzero: 2 })),
        "{e:?}"
    );
    assert!(e[0].same_bytes);
}

/// Two observations are explained by the nearest pair of their
/// reproducing orders: a row that both `fma` and `muladd` reproduce, beside
/// `muladd;split=2`, is `muladd` (a split change only), not `fma` (which
/// would add a step-arithmetic change that is not there).
#[test]
fn the_nearest_pair_says_only_what_changed() {
    use mxbi::explain::nearest_pair;
    use mxbi::order::Order;
    let o = |s: &str| s.parse::<Order>().unwrap();
    let pair = nearest_pair(&[o("fma"), o("muladd")], &[o("muladd;split=2")]).unwrap();
    assert_eq!(
        (pair.0.to_string(), pair.1.to_string()),
        ("muladd".into(), "muladd;split=2".into())
    );
    // ties go to the simplest
    let pair = nearest_pair(&[o("fma"), o("muladd")], &[o("fma;split=2"), o("muladd;split=2")]).unwrap();
    assert_eq!(pair.0.to_string(), "fma");
    assert!(nearest_pair(&[], &[o("fma")]).is_none());
}
