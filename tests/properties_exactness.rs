//! Property suite: every order of a family agrees when every partial sum is
//! exact, and the exactness analysis (`explain::exactness`, docs/EXPLAIN.md)
//! is right both ways.
//!
//! - Small dyadic operands (integers in `[-R, R]` times a power of two):
//!   where this suite's own bound says every partial sum of every order is
//!   exact (the sum of |products| below 2^(c-1) grains, c the narrowest
//!   accumulator of the family: 24 bits for IEEE steps, `min(f, out + 1)`
//!   for a fused sum) and the exact sum is representable in every output
//!   format of the family, every order gives the same bytes (evaluated
//!   here, one GEMM per order) and the analysis proves it;
//! - on any operands, an element the analysis proves exact has the same
//!   bytes under every order of the family (soundness);
//! - conversely, where the analysis proves nothing because a unit is swamped
//!   by two large terms that cancel, it finds the order change (a witness
//!   pair of orders with different bytes).
//!
//! Families are drawn from the grammar (orders that read f32 operands).
//!
//! Case counts: `PROPTEST_CASES` (see tests/common/props.rs).

#[path = "common/props.rs"]
mod props;

use mxbi::explain::exactness::{analyze, Reason};
use mxbi::format::{encode_f64, CastPolicy, Format};
use mxbi::gemm::gemm;
use mxbi::order::{Family, InType, Order, OutFmt};
use props::{config, in_type, order, problem, small_dyadic, values_in};
use proptest::prelude::*;

/// A family of 2 to 6 orders that read f32 operands, always with `fma`.
fn family() -> impl Strategy<Value = Vec<Order>> {
    prop::collection::vec(order().prop_filter("reads f32", |o| in_type(o) == InType::F32), 1..6).prop_map(|mut v| {
        v.push("fma".parse().unwrap());
        v
    })
}

/// The narrowest accumulator of the family, in bits (the documented rule).
fn capacity(family: &[Order]) -> u32 {
    family
        .iter()
        .map(|o| match o.family {
            Family::Mma(m) => m.f.min(m.out + 1).min(24),
            _ => 24,
        })
        .min()
        .unwrap()
}

/// Whether `x` (an exact f64) is exactly representable in the output format.
fn representable(x: f64, out: OutFmt) -> bool {
    let f = match out {
        OutFmt::F32 => return (x as f32) as f64 == x,
        OutFmt::Bf16 => Format::BF16,
        OutFmt::F16 => Format::F16,
    };
    encode_f64(x, f, &CastPolicy::ieee(f), 0).is_ok_and(|c| f.decode_f64(c) == x)
}

/// Each order's C on the problem (all orders run: f32 operands).
fn outputs(family: &[Order], a: &[f32], b: &[f32], (m, k, n): (usize, usize, usize)) -> Vec<Vec<u32>> {
    let p = problem(a, b, m, k, n);
    family
        .iter()
        .map(|o| {
            gemm(o, &p, None)
                .unwrap_or_else(|e| panic!("{o}: {e}"))
                .iter()
                .map(|x| props::class_bits(*x))
                .collect()
        })
        .collect()
}

proptest! {
    #![proptest_config(config(props::cases(100)))]

    /// Where every partial sum of every order is exact, all orders give the
    /// same bytes, and the analysis proves it; anything the analysis proves
    /// has the same bytes under every order.
    #[test]
    fn every_order_agrees_when_all_partial_sums_are_exact(
        fam in family(),
        (m, k, n) in (1usize..3, 1usize..100, 1usize..4),
        range in prop::sample::select(vec![1i64, 2, 3, 7, 15, 100, 1000]),
        (sa, sb) in (-20i32..20, -20i32..20),
        seed in any::<u64>(),
    ) {
        let a = small_dyadic(m * k, range, sa, seed);
        let b = small_dyadic(k * n, range, sb, !seed);
        let c = outputs(&fam, &a, &b, (m, k, n));
        let cap = capacity(&fam);
        let rows: Vec<usize> = (0..m).collect();
        let analysis = analyze(&problem(&a, &b, m, k, n), &rows, &fam).unwrap();
        for e in &analysis {
            let idx = e.row * n + e.col;
            let agree = c.iter().all(|o| o[idx] == c[0][idx]);
            // the sum of |products| in grains of 2^(sa + sb)
            let grains: f64 = (0..k)
                .map(|kk| (a[e.row * k + kk] as f64 * b[kk * n + e.col] as f64).abs())
                .sum::<f64>()
                / 2f64.powi(sa + sb);
            // ... and the exact sum survives every output conversion of the family
            let sum: f64 = (0..k).map(|kk| a[e.row * k + kk] as f64 * b[kk * n + e.col] as f64).sum();
            if grains < 2f64.powi(cap as i32 - 1) && fam.iter().all(|o| representable(sum, o.out)) {
                prop_assert!(agree, "exact sums but orders differ at C[{}, {}]: {:?}", e.row, e.col,
                    fam.iter().zip(&c).map(|(o, v)| format!("{o}: {:#010x}", v[idx])).collect::<Vec<_>>());
                prop_assert!(matches!(e.reason, Some(Reason::ExactSums { .. })),
                    "exact sums ({} grains, capacity {}) not proven: {:?}", grains, cap, e);
            }
            if e.reason.is_some() {
                prop_assert!(agree && e.same_bytes, "proven but not the same bytes: {:?}", e);
            }
            prop_assert_eq!(e.same_bytes, agree, "measured same bytes disagrees: {:?}", e);
        }
    }

    /// Soundness on any operands (wide exponents, cancellation, sparse rows
    /// with at most two nonzero products): what the analysis proves, every
    /// order of the family shows.
    #[test]
    fn what_the_analysis_proves_every_order_shows(
        fam in family(),
        (m, k, n) in (1usize..3, 1usize..64, 1usize..4),
        sparse in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut a = values_in(InType::F32, m * k, seed, false);
        let b = values_in(InType::F32, k * n, !seed, false);
        if sparse {
            // at most two nonzero entries per row of A
            for (i, x) in a.iter_mut().enumerate() {
                if (i % k) % 13 > 1 {
                    *x = 0.0;
                }
            }
        }
        let c = outputs(&fam, &a, &b, (m, k, n));
        let rows: Vec<usize> = (0..m).collect();
        for e in analyze(&problem(&a, &b, m, k, n), &rows, &fam).unwrap() {
            let idx = e.row * n + e.col;
            let agree = c.iter().all(|o| o[idx] == c[0][idx]);
            if e.reason.is_some() {
                prop_assert!(agree, "proven {:?} but the orders differ", e);
            }
            prop_assert_eq!(e.same_bytes, agree);
        }
    }

    /// Conversely: a unit swamped by +B and -B (B / unit >= 2^25) is an
    /// order change that can show; the analysis proves nothing there and
    /// finds a witness pair (serial `fma` against an interleaved split that
    /// lets +B and -B meet first).
    #[test]
    fn the_analysis_finds_an_order_change_when_a_unit_is_swamped(
        extra in prop::collection::vec(order().prop_filter("reads f32", |o| in_type(o) == InType::F32), 0..3),
        half in 2usize..32,
        (i, j, l) in (0usize..1000, 0usize..1000, 0usize..1000),
        unit in props::f64_spread(-40, 40).prop_filter("nonzero", |u| *u != 0.0),
        gap in 25i32..60,
        neg in any::<bool>(),
    ) {
        let k = 2 * half + 1;
        // the unit at an odd position before the later of the two even ones
        let odd = 2 * (i % (half - 1)) + 1;
        let later = 2 * (odd / 2 + 1 + j % (half - odd / 2));
        let mut earlier = 2 * (l % half);
        if earlier == later {
            earlier = (later + 2) % (2 * half);
        }
        let unit = unit as f32;
        let big = unit.abs() * 2f32.powi(gap) * if neg { -1.0 } else { 1.0 };
        let mut a = vec![0f32; k];
        a[odd] = unit;
        a[earlier] = big;
        a[later] = -big;
        let b = vec![1f32; k];
        let mut fam: Vec<Order> = vec!["fma".parse().unwrap(), "fma;ktile=1;split=2/interleave".parse().unwrap()];
        fam.extend(extra);
        let e = &analyze(&problem(&a, &b, 1, k, 1), &[0], &fam).unwrap()[0];
        prop_assert!(e.reason.is_none(), "{:?}", e);
        prop_assert!(!e.same_bytes, "{:?}", e);
        let w = e.witness.as_ref().unwrap();
        prop_assert_ne!(w.left_bits, w.right_bits);
    }
}

/// Regression (found by `what_the_analysis_proves_every_order_shows`, shrunk
/// to this): a family mixing output formats. 257 is the exact sum of every
/// order, but `out=bf16` rounds it to 256, so nothing is provable; 256
/// converts exactly and is proven.
#[test]
fn exactness_with_mixed_output_formats_regression() {
    let fam: Vec<Order> = ["fma", "fma;out=bf16"].iter().map(|s| s.parse().unwrap()).collect();
    let b = [1f32];
    let e = &analyze(&problem(&[257.0], &b, 1, 1, 1), &[0], &fam).unwrap()[0];
    assert!(e.reason.is_none() && !e.same_bytes, "{e:?}");
    let w = e.witness.as_ref().unwrap();
    assert_eq!((w.left_bits, w.right_bits), (257f32.to_bits(), 256f32.to_bits()));
    let e = &analyze(&problem(&[256.0], &b, 1, 1, 1), &[0], &fam).unwrap()[0];
    assert!(
        matches!(e.reason, Some(Reason::ExactSums { .. })) && e.same_bytes,
        "{e:?}"
    );
}
