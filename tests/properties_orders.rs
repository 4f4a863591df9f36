//! Property suite: identities the order grammar implies (docs/ORDERS.md),
//! on orders drawn from the grammar, random K and random operands exact in
//! the order's input type. Each identity is checked on the bytes of the
//! GEMM (NaN as a class), and where the grammar says two spellings are the
//! same order, on the compiled trees too.
//!
//! - `split=1` and `lanes=1` are the plain order ("a key given at its
//!   default value is the same as no key");
//! - the canonical form parses back to the same tree, and is a fixed point;
//! - `ktile` without `tile=fresh` or an interleaved split does nothing;
//! - `reduce=pairwise` over at most two parts is `reduce=serial`;
//! - `lanes=L` with a serial or pairwise reduction is
//!   `split=L/interleave;ktile=1` (lane l takes k = l mod L);
//! - lanes cut into fresh k-tiles: `lanes=1;ktile=T;tile=fresh` is
//!   `ktile=T;tile=fresh`; with T >= K (one tile per lane) it is `lanes=L`
//!   with the same reduction; `fma` with tiles of one term per lane (T = L)
//!   is `muladd;lanes=L` (a fresh one-term chain is `RN(+0 + a*b)`);
//! - promotion without block scales, `fma(1, p, acc) = RN(acc + p)`, is the
//!   serial sum of fresh tiles of the promotion width;
//! - `mma(k=2h,...,split=halves)` is the chain of `mma(k=h,...)` steps when
//!   K is a multiple of 2h (c=fused: each half is one fused sum, chained);
//! - `fma` is `muladd` when every product is exact in f32;
//! - `out=bf16|f16` is the RNE conversion of the f32 result.
//!
//! Case counts: `PROPTEST_CASES` (see tests/common/props.rs).

#[path = "common/props.rs"]
mod props;

use mxbi::format::{encode_f32, CastPolicy, Format};
use mxbi::gemm::{gemm, Problem};
use mxbi::order::{Family, MmaSplit, Order, OutFmt, Reduce, Tile};
use props::{config, first_difference, in_type, order, problem, shrunk_failure, values_in};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

fn parse(s: &str) -> Order {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// An order built by changing fields, checked to be one the grammar
/// accepts (its canonical spelling parses back to it).
fn reparse(o: Order) -> Order {
    let back = parse(&o.to_string());
    assert_eq!(back.to_string(), o.to_string(), "{o} is not a canonical order");
    back
}

/// A random problem whose values are exact in `o`'s input type.
fn operands(o: &Order, (m, k, n): (usize, usize, usize), seed: u64) -> (Vec<f32>, Vec<f32>) {
    let t = in_type(o);
    (values_in(t, m * k, seed, false), values_in(t, k * n, !seed, false))
}

/// The property body of every identity: `left` and `right` give the same
/// GEMM bytes (NaN as a class) on a random problem exact in `left`'s type.
fn same_bytes(left: &Order, right: &Order, shape: (usize, usize, usize), seed: u64) -> Result<(), TestCaseError> {
    let (a, b) = operands(left, shape, seed);
    let p = problem(&a, &b, shape.0, shape.1, shape.2);
    same_bytes_on(left, right, &p)
}

fn same_bytes_on(left: &Order, right: &Order, p: &Problem) -> Result<(), TestCaseError> {
    let (l, r) = (gemm(left, p, None), gemm(right, p, None));
    match (&l, &r) {
        (Ok(x), Ok(y)) => {
            if let Some(i) = first_difference(x, y) {
                return Err(TestCaseError::fail(format!(
                    "{left} vs {right}: K={} C[{}, {}] = {:#010x} vs {:#010x}",
                    p.k,
                    i / p.n,
                    i % p.n,
                    x[i].to_bits(),
                    y[i].to_bits()
                )));
            }
            Ok(())
        }
        _ => {
            prop_assert_eq!(
                l.is_ok(),
                r.is_ok(),
                "{} vs {}: {:?} {:?}",
                left,
                right,
                l.err(),
                r.err()
            );
            Ok(())
        }
    }
}

/// `o` spelled with an extra `key=value` (None where `o`'s canonical form
/// already has the key).
fn with_key(o: &Order, key: &str, value: &str) -> Option<Order> {
    let canon = o.to_string();
    (!canon.contains(&format!(";{key}="))).then(|| parse(&format!("{canon};{key}={value}")))
}

fn shapes() -> impl Strategy<Value = (usize, usize, usize)> {
    (1usize..4, 1usize..160, 1usize..5)
}

proptest! {
    #![proptest_config(config(props::cases(300)))]

    /// `split=1` is the plain order: same tree, same bytes.
    #[test]
    fn split_1_equals_the_plain_order(o in order(), shape in shapes(), seed in any::<u64>()) {
        if let Some(s1) = with_key(&o, "split", "1") {
            prop_assert_eq!(s1.compile(shape.1), o.compile(shape.1), "{} vs {}", s1, o);
            same_bytes(&s1, &o, shape, seed)?;
        }
    }

    /// `lanes=1` is the plain order: same tree, same bytes.
    #[test]
    fn lanes_1_equals_the_plain_order(o in order(), shape in shapes(), seed in any::<u64>()) {
        if let Some(l1) = with_key(&o, "lanes", "1") {
            prop_assert_eq!(l1.compile(shape.1), o.compile(shape.1), "{} vs {}", l1, o);
            same_bytes(&l1, &o, shape, seed)?;
        }
    }

    /// The canonical form parses to the same tree and prints itself.
    #[test]
    fn canonical_form_round_trips(o in order(), k in 1usize..300) {
        let canon = o.to_string();
        let back = parse(&canon);
        prop_assert_eq!(back.to_string(), canon.clone());
        prop_assert_eq!(back.compile(k), o.compile(k), "{}", canon);
    }

    /// `ktile` has no effect without `tile=fresh` or an interleaved split.
    #[test]
    fn ktile_without_fresh_tiles_or_interleave_does_nothing(
        o in order().prop_filter("ktile would act", |o| o.tile == Tile::Carry && !o.interleave && o.lanes == 1),
        t in 1u32..100,
        shape in shapes(),
        seed in any::<u64>(),
    ) {
        let tiled = parse(&format!("{o};ktile={t}"));
        prop_assert_eq!(tiled, o, "ktile={} on {}", t, o);
        prop_assert_eq!(tiled.compile(shape.1), o.compile(shape.1), "ktile={} on {}", t, o);
        same_bytes(&tiled, &o, shape, seed)?;
    }

    /// Pairwise over at most two parts is serial.
    #[test]
    fn pairwise_over_two_parts_is_serial(
        o in order().prop_filter("at most two parts", |o| o.lanes == 1 && o.split <= 2 && o.tile == Tile::Carry),
        shape in shapes(),
        seed in any::<u64>(),
    ) {
        let serial = reparse(Order { reduce: Some(Reduce::Serial), ..o });
        let pairwise = reparse(Order { reduce: Some(Reduce::Pairwise), ..o });
        same_bytes(&serial, &pairwise, shape, seed)?;
    }

    /// `lanes=L` is `split=L/interleave;ktile=1` under a serial or pairwise
    /// reduction.
    #[test]
    fn lanes_equal_an_interleaved_split_of_single_k_tiles(
        o in order().prop_filter("lanes", |o| {
            o.lanes > 1 && o.reduction() != Reduce::Butterfly && o.tile == Tile::Carry
        }),
        shape in shapes(),
        seed in any::<u64>(),
    ) {
        let split = reparse(Order { lanes: 1, split: o.lanes, interleave: true, ktile: Some(1), ..o });
        same_bytes(&o, &split, shape, seed)?;
    }

    /// `lanes=1;ktile=T;tile=fresh` is `ktile=T;tile=fresh`: the same order,
    /// tree and bytes.
    #[test]
    fn one_lane_with_fresh_tiles_is_fresh_tiles(
        (fam, _) in props::family_spec(),
        t in 1u32..80,
        reduce in prop::sample::select(vec!["", ";reduce=serial", ";reduce=pairwise"]),
        shape in shapes(),
        seed in any::<u64>(),
    ) {
        let one = parse(&format!("{fam};lanes=1;ktile={t};tile=fresh{reduce}"));
        let tiles = parse(&format!("{fam};ktile={t};tile=fresh{reduce}"));
        prop_assert_eq!(one, tiles);
        prop_assert_eq!(one.compile(shape.1), tiles.compile(shape.1), "{}", tiles);
        same_bytes(&one, &tiles, shape, seed)?;
    }

    /// Lanes whose fresh k-tile holds all of K are the lanes without tiles
    /// (each lane one chain), under the same reduction: same tree, same bytes.
    #[test]
    fn lanes_with_one_fresh_tile_are_plain_lanes(
        o in order().prop_filter("lanes, fresh tiles", |o| o.lanes > 1 && o.tile == Tile::Fresh),
        m in 1usize..4,
        n in 1usize..5,
        seed in any::<u64>(),
    ) {
        let t = o.ktile.unwrap() as usize;
        let k = 1 + (seed as usize % t.min(200));
        let plain = reparse(Order { ktile: None, tile: Tile::Carry, ..o });
        prop_assert_eq!(o.compile(k), plain.compile(k), "{} vs {} K={}", o, plain, k);
        same_bytes(&o, &plain, (m, k, n), seed)?;
    }

    /// `fma` lanes cut into k-tiles of one term per lane (T = L) are
    /// `muladd` lanes: each term is a fresh chain `RN(+0 + a*b)`, added to
    /// the lane serially, as `muladd` adds `RN(a*b)`.
    #[test]
    fn fma_lanes_with_one_term_tiles_are_muladd_lanes(
        o in order().prop_filter("fma lanes", |o| o.family == Family::Fma && o.lanes > 1),
        shape in shapes(),
        seed in any::<u64>(),
    ) {
        let tiled = reparse(Order { ktile: Some(o.lanes), tile: Tile::Fresh, ..o });
        let muladd = reparse(Order { family: Family::MulAdd, ktile: None, tile: Tile::Carry, ..o });
        same_bytes(&tiled, &muladd, shape, seed)?;
    }

    /// Promotion without block scales is the serial sum of fresh tiles of
    /// the promotion width (`fma(1, p, acc) = RN(acc + p)`).
    #[test]
    fn promotion_without_scales_is_a_serial_sum_of_fresh_tiles(
        // fresh tiles are combined by `reduce` when they are the parts
        // (no split), serially inside a part otherwise
        o in order().prop_filter("promotion, contiguous parts", |o| {
            o.promote.is_some() && !o.interleave && o.tile == Tile::Carry && o.lanes == 1
                && (o.split > 1 || o.reduction() == Reduce::Serial)
        }),
        shape in shapes(),
        seed in any::<u64>(),
    ) {
        let tiles = reparse(Order { promote: None, ktile: o.promote, tile: Tile::Fresh, ..o });
        same_bytes(&o, &tiles, shape, seed)?;
    }

    /// `mma(k=2h, split=halves)` is the chain of `mma(k=h)` steps (C fused,
    /// K a multiple of 2h).
    #[test]
    fn halves_step_is_a_chain_of_half_width_steps(
        o in props::mma_order().prop_filter("halves, C fused", |o| {
            let m = o.mma().unwrap();
            m.split == MmaSplit::Halves && m.c == mxbi::order::CMode::Fused
        }),
        chunks in 1usize..5,
        m in 1usize..4,
        n in 1usize..4,
        seed in any::<u64>(),
    ) {
        let mut half = o.mma().unwrap();
        half.k /= 2;
        half.split = MmaSplit::None;
        let chained = reparse(Order { family: Family::Mma(half), ..o });
        same_bytes(&o, &chained, (m, chunks * o.mma().unwrap().k as usize, n), seed)?;
    }

    /// `fma` is `muladd` when every product is exact in f32 (bf16 factors
    /// of bounded exponent: 16-bit significand products, no underflow).
    #[test]
    fn fma_equals_muladd_when_products_are_exact(
        o in order().prop_filter("fma", |o| o.family == Family::Fma),
        shape in shapes(),
        seed in any::<u64>(),
    ) {
        let (m, k, n) = shape;
        let bf16 = |len: usize, s: u64| -> Vec<f32> {
            values_in(mxbi::order::InType::Bf16, len, s, false)
                .into_iter()
                .map(|v| if v == 0.0 || (v.abs() > 2f32.powi(-30) && v.abs() < 2f32.powi(30)) { v } else { 1.5 })
                .collect()
        };
        let (a, b) = (bf16(m * k, seed), bf16(k * n, !seed));
        let muladd = reparse(Order { family: Family::MulAdd, ..o });
        same_bytes_on(&o, &muladd, &problem(&a, &b, m, k, n))?;
    }

    /// `out=bf16|f16` is the nearest-even conversion of the f32 result.
    #[test]
    fn output_conversion_is_rne_of_the_f32_result(
        o in order().prop_filter("f32 output", |o| o.out == OutFmt::F32),
        to_bf16 in any::<bool>(),
        shape in shapes(),
        seed in any::<u64>(),
    ) {
        let (m, k, n) = shape;
        let (a, b) = operands(&o, shape, seed);
        let p = problem(&a, &b, m, k, n);
        let (out, fmt) = if to_bf16 { (OutFmt::Bf16, Format::BF16) } else { (OutFmt::F16, Format::F16) };
        let f32_result = gemm(&o, &p, None).unwrap();
        let converted = gemm(&reparse(Order { out, ..o }), &p, None).unwrap();
        let rne = CastPolicy::ieee(fmt);
        for (i, (&x, &y)) in f32_result.iter().zip(&converted).enumerate() {
            let want = fmt.decode_f32(encode_f32(x, fmt, &rne, 0).unwrap());
            prop_assert_eq!(props::class_bits(y), props::class_bits(want), "{} C[{}]: f32 {:e}", o, i, x);
        }
    }
}

/// Lanes cut into fresh k-tiles are not the lanes: lane 0 holds 2^25, 1
/// in its first k-tile and -2^25, 1 in its second (k = 0, 4 | 8, 12; the
/// other terms 0). One chain per lane gives ((2^25 + 1) - 2^25) + 1 = 1;
/// fresh tiles give 2^25 + RN(-2^25 + 1) = 0 (the same case as
/// reference/orders/test_exact_orders.py). The new identities above can
/// therefore fail where the tiles matter.
#[test]
fn fresh_lane_tiles_change_the_result() {
    let mut a = vec![0f32; 16];
    let big = 2f32.powi(25);
    (a[0], a[4], a[8], a[12]) = (big, 1.0, -big, 1.0);
    let b = vec![1f32; 16];
    let p = problem(&a, &b, 1, 16, 1);
    let run = |s: &str| gemm(&parse(s), &p, None).unwrap()[0];
    assert_eq!(run("fma;lanes=4"), 1.0);
    assert_eq!(run("fma;lanes=4;reduce=serial"), 1.0);
    assert_eq!(run("fma;lanes=4;ktile=8;tile=fresh"), 0.0);
    assert_eq!(run("fma;lanes=4;ktile=8;tile=fresh;reduce=serial"), 0.0);
    // one tile covering K is the plain lanes again
    assert_eq!(run("fma;lanes=4;ktile=16;tile=fresh"), 1.0);
}

/// The identity property can fail: checked against a wrong identity
/// (`split=2` for `split=1`) it is caught, and shrinking removes terms down
/// from up to 160 to a few (terms from a small set where swamping shows:
/// +-1, 3, +-2^25; greedy shrinking may stop above the smallest case).
#[test]
fn identity_property_catches_a_planted_wrong_identity() {
    let big = 2f32.powi(25);
    let term = prop::sample::select(vec![1.0f32, -1.0, 3.0, big, -big]).prop_map(|a| (a, 1.0f32));
    let (why, terms) = shrunk_failure(500, prop::collection::vec(term, 1..160), |terms| {
        let k = terms.len();
        let (a, b): (Vec<f32>, Vec<f32>) = terms.into_iter().unzip();
        same_bytes_on(&parse("fma;split=2"), &parse("fma"), &problem(&a, &b, 1, k, 1))
    });
    assert!((2..=24).contains(&terms.len()), "K = {}: {terms:?} {why}", terms.len());
    assert!(terms.iter().any(|t| t.0.abs() == big), "{terms:?}");
}
