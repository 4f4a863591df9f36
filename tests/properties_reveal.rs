//! Property suite: reveal recovers the generating order, with the CPU model
//! of that order as the black box, small K.
//!
//! - Orders of reveal's own f32 family (fma/muladd with contiguous or
//!   interleaved splits, fresh tiles, GEMV lanes, serial/pairwise/butterfly
//!   reductions, output formats) and tensor-core presets (bf16, f16, FP8
//!   steps, with splits): the recovered shape is the compiled tree's shape,
//!   no probe answer contradicts it, and the recovered order compiles to
//!   the generating order's tree, or, where the bytes cannot tell several
//!   orders of that shape apart (`fma` and `muladd` under a bf16 output at
//!   tiny K; a `c=late` step chain and its split), one of the equivalent
//!   orders reveal lists does.
//! - Any order of the grammar's f32 families (which may have redundant
//!   nodes: empty parts, a split of one tile): the shape is recovered, and
//!   the order reveal names gives the generating order's bytes on fresh
//!   inputs (e.g. `fma;ktile=1;split=3/interleave` at K = 2 is `muladd`).
//!
//! Expensive (a reveal runs several GEMM launches): `PROPTEST_CASES=N` runs
//! N / 100 cases (see tests/common/props.rs).

#[path = "common/props.rs"]
mod props;

use mxbi::explain::candidates::{self, Inputs};
use mxbi::explain::{reveal, RevealOptions, Shape};
use mxbi::gemm::gemm;
use mxbi::order::{InType, Order};
use mxbi::subject::Model;
use props::{cases_expensive, keys_spec};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// An order of reveal's f32 families: fma/muladd with any part keys.
fn f32_order() -> impl Strategy<Value = Order> {
    (prop::sample::select(vec!["fma", "muladd"]), keys_spec(None))
        .prop_filter_map("rejected by the grammar", |(f, k)| {
            format!("{f}{k}").parse::<Order>().ok()
        })
}

/// A tensor-core preset (bf16, f16 or FP8 steps) with an optional split.
fn mma_order() -> impl Strategy<Value = (Order, InType)> {
    (
        prop::sample::select(vec![
            ("hopper-bf16", InType::Bf16),
            ("ampere-bf16", InType::Bf16),
            ("hopper-f16", InType::F16),
            ("hopper-fp8-wgmma", InType::E4M3),
            ("hopper-fp8-mma-sync", InType::E4M3),
            ("ada-fp8", InType::E4M3),
        ]),
        prop::sample::select(vec!["", ";split=2", ";split=2;reduce=pairwise"]),
    )
        .prop_map(|((p, t), keys)| (format!("{p}{keys}").parse::<Order>().unwrap(), t))
}

/// The property body: reveal on the model of `want` recovers it.
fn reveal_recovers(want: &Order, o: RevealOptions) -> Result<(), TestCaseError> {
    let r = reveal(&Model::new(*want), o).map_err(|e| TestCaseError::fail(format!("{want} K={}: {e}", o.k)))?;
    let tree = want.compile(o.k);
    prop_assert_eq!(r.disagreement_count, 0, "{} K={}: {}", want, o.k, r);
    prop_assert!(r.shape == Shape::of_tree(&tree), "{} K={}: shape {}", want, o.k, r);
    let got = r
        .order
        .ok_or_else(|| TestCaseError::fail(format!("{want} K={}: no order\n{r}", o.k)))?;
    prop_assert!(
        std::iter::once(&got)
            .chain(&r.equivalent)
            .any(|e| e.compile(o.k) == tree),
        "{} K={}: recovered {} (equivalent: {:?})",
        want,
        o.k,
        got,
        r.equivalent.iter().map(|o| o.to_string()).collect::<Vec<_>>()
    );
    Ok(())
}

/// The property body of the broader suite: reveal on the model of `want`
/// (any order of the grammar, which may have redundant nodes such as
/// empty parts) recovers its shape, and the order it names, if any, gives
/// `want`'s bytes on fresh random inputs.
fn reveal_recovers_an_equivalent(want: &Order, o: RevealOptions, seed: u64) -> Result<(), TestCaseError> {
    let r = reveal(&Model::new(*want), o).map_err(|e| TestCaseError::fail(format!("{want} K={}: {e}", o.k)))?;
    prop_assert_eq!(r.disagreement_count, 0, "{} K={}: {}", want, o.k, r);
    prop_assert!(
        r.shape == Shape::of_tree(&want.compile(o.k)),
        "{} K={}: shape {}",
        want,
        o.k,
        r
    );
    if let Some(got) = r.order {
        let (m, k, n) = (8, o.k, 8);
        let a = props::values_in(o.input, m * k, seed, false);
        let b = props::values_in(o.input, k * n, !seed, false);
        let p = props::problem(&a, &b, m, k, n);
        let (x, y) = (gemm(want, &p, None).unwrap(), gemm(&got, &p, None).unwrap());
        prop_assert!(
            props::first_difference(&x, &y).is_none(),
            "{} K={}: recovered {} differs",
            want,
            k,
            got
        );
    }
    Ok(())
}

/// Orders of reveal's own family for `input` and K (each tree distinct).
fn family_order(input: InType, k: usize, pick: prop::sample::Index) -> Order {
    let fam = candidates::family(Inputs::of_type(input), k);
    fam[pick.index(fam.len())].order
}

/// Reveal recovers the tree of random orders of its f32 family at small K.
#[test]
fn reveal_recovers_the_tree_of_a_family_order() {
    let s = (2usize..96, any::<prop::sample::Index>(), any::<u64>());
    props::check(cases_expensive(24), s, |(k, pick, seed)| {
        let want = family_order(InType::F32, k, pick);
        reveal_recovers(&want, options(8, k, 16, InType::F32, seed))
    });
}

/// Reveal recovers the tree of random orders of its f32 family on a square
/// launch, where grid launches (a pair at every element) come first and
/// FPRev's recursion asks only what their nodes leave open.
#[test]
fn reveal_on_a_square_launch_recovers_the_tree() {
    let s = (40usize..400, any::<prop::sample::Index>(), any::<u64>());
    props::check(cases_expensive(24), s, |(k, pick, seed)| {
        let want = family_order(InType::F32, k, pick);
        let o = options(16, k, 16, InType::F32, seed);
        let r = reveal(&Model::new(want), o).map_err(|e| TestCaseError::fail(format!("{want} K={k}: {e}")))?;
        // counts in windows (an output that rounds them): lines only
        let grid = r.window == k;
        prop_assert!(
            (r.grid_launches >= 2) == grid,
            "{} K={}: {} grid launches, window {}",
            want,
            k,
            r.grid_launches,
            r.window
        );
        reveal_recovers(&want, o)
    });
}

/// Any order of the grammar's f32 families on a square launch (grid
/// launches first): the shape is recovered and the named order has its
/// bytes.
#[test]
fn reveal_on_a_square_launch_recovers_an_equivalent_of_any_f32_order() {
    props::check(
        cases_expensive(24),
        (f32_order(), 40usize..400, any::<u64>()),
        |(want, k, seed)| reveal_recovers_an_equivalent(&want, options(16, k, 16, InType::F32, seed), seed),
    );
}

/// Reveal recovers the shape of any order of the grammar's f32 families,
/// and names an order with its bytes.
#[test]
fn reveal_recovers_an_equivalent_of_any_f32_order() {
    props::check(
        cases_expensive(24),
        (f32_order(), 2usize..96, any::<u64>()),
        |(want, k, seed)| reveal_recovers_an_equivalent(&want, options(8, k, 16, InType::F32, seed), seed),
    );
}

/// Any order of the grammar's f32 families on a narrow launch (a GEMV of 16
/// columns, its transpose, or 2 x 8), where the stride rounds put two
/// probes on a line (an inner pair and the pair two strides on) and read
/// the outer one's answer only where other answers prove the two nested
/// or apart: the shape is recovered and no answer contradicts it. (The
/// order named is not checked here: a verification launch of 16 elements
/// does not always tell fresh k-tiles from one chain; at K = 99,
/// `fma;ktile=32;tile=fresh;split=3` was named `fma;split=3` for some
/// seeds, before lines of two probes too.)
#[test]
fn reveal_on_a_narrow_launch_recovers_the_shape_of_any_f32_order() {
    props::check(
        cases_expensive(24),
        (
            f32_order(),
            40usize..1200,
            prop::sample::select(vec![(1usize, 16usize), (16, 1), (2, 8)]),
            any::<u64>(),
        ),
        |(want, k, (m, n), seed)| {
            let o = options(m, k, n, InType::F32, seed);
            let r = reveal(&Model::new(want), o).map_err(|e| TestCaseError::fail(format!("{want} K={k}: {e}")))?;
            prop_assert_eq!(r.disagreement_count, 0, "{} K={}: {}", want, k, r);
            prop_assert!(
                r.shape == Shape::of_tree(&want.compile(k)),
                "{} K={}: shape {}",
                want,
                k,
                r
            );
            Ok(())
        },
    );
}

/// The tensor-core property at launch shape `m` x `n`: K is `chunks` (a range)
/// steps of the order's tensor-core K, times 2.
fn mma_orders_recovered(chunks: std::ops::Range<usize>, m: usize, n: usize) {
    props::check(
        cases_expensive(24),
        (mma_order(), chunks, any::<u64>()),
        |((want, t), chunks, seed)| {
            let k = chunks * want.mma().unwrap().k as usize * 2;
            reveal_recovers(&want, options(m, k, n, t, seed))
        },
    );
}

/// Reveal recovers tensor-core orders (probes exact in the step's input
/// type) at small K.
#[test]
fn reveal_recovers_the_tree_of_an_mma_order() {
    mma_orders_recovered(1..5, 16, 32);
}

/// Tensor-core orders on a square launch (bf16 inputs take grid launches;
/// their fused nodes are never realized by one pair, so the recursion
/// resolves them).
#[test]
fn reveal_on_a_square_launch_recovers_an_mma_order() {
    mma_orders_recovered(2..12, 24, 24);
}

fn options(m: usize, k: usize, n: usize, input: InType, seed: u64) -> RevealOptions {
    RevealOptions {
        m,
        k,
        n,
        input,
        seed,
        verify_rows: 4,
    }
}
