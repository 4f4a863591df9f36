//! Property suite: the fast GEMM evaluators equal the generic ones, on
//! orders drawn from the grammar (docs/ORDERS.md) and random shapes.
//!
//! - `gemm` (fast kernels where they apply) = `gemm_generic` (the tree
//!   evaluator), bit for bit, NaN as a class, on any order of the grammar
//!   with operands exact in its input type (Inf and NaN included);
//! - the tensor-core kernels (`gemm` on an `mma` order) = the chain of
//!   single-instruction steps `mma_step` the contract defines (chunks of
//!   Kc from +0, the last one padded with zero products);
//! - the property can fail: an evaluator with a planted swapped order is
//!   caught, and the shrunk case is a tiny GEMM.
//!
//! Case counts: `PROPTEST_CASES` (see tests/common/props.rs).

#[path = "common/props.rs"]
mod props;

use mxbi::gemm::mma_step::mma_step;
use mxbi::gemm::{gemm, gemm_generic, GemmError, Problem};
use mxbi::order::{Family, Order};
use props::{class_bits, config, first_difference, in_type, order, problem, shrunk_failure, values_in};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

type Eval = fn(&Order, &Problem) -> Result<Vec<f32>, GemmError>;

fn fast(o: &Order, p: &Problem) -> Result<Vec<f32>, GemmError> {
    gemm(o, p, None)
}

/// The property body: `eval` gives the generic evaluator's bytes on the
/// order `o` for an `m x k x n` problem drawn from `seed`.
fn evaluator_equals_generic(
    o: &Order,
    (m, k, n): (usize, usize, usize),
    seed: u64,
    special: bool,
    eval: Eval,
) -> Result<(), TestCaseError> {
    let t = in_type(o);
    let a = values_in(t, m * k, seed, special);
    let b = values_in(t, k * n, seed ^ 0x5EED, special);
    let p = problem(&a, &b, m, k, n);
    let want = gemm_generic(o, &p, None);
    let have = eval(o, &p);
    match (&have, &want) {
        (Ok(h), Ok(w)) => {
            if let Some(i) = first_difference(h, w) {
                return Err(TestCaseError::fail(format!(
                    "{o}: M={m} K={k} N={n}: C[{}, {}] = {:#010x}, generic {:#010x}",
                    i / n,
                    i % n,
                    h[i].to_bits(),
                    w[i].to_bits()
                )));
            }
        }
        _ => prop_assert_eq!(have.map(|_| ()), want.map(|_| ()), "{}", o),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(props::cases(300)))]

    /// The fast kernels give the generic evaluator's bytes on every order
    /// of the grammar and random shapes.
    #[test]
    fn fast_gemm_equals_generic_on_grammar_orders(
        o in order(),
        m in 1usize..6,
        k in 1usize..200,
        n in 1usize..6,
        seed in any::<u64>(),
        special in any::<bool>(),
    ) {
        evaluator_equals_generic(&o, (m, k, n), seed, special, fast)?;
    }

    /// An mma order's output element is the chain of `mma_step`s over
    /// chunks of Kc, from +0, the last chunk padded with zero products.
    #[test]
    fn mma_kernels_equal_the_mma_step_chain(
        o in props::mma_order(),
        m in 1usize..4,
        k in 1usize..130,
        n in 1usize..4,
        seed in any::<u64>(),
    ) {
        let mma = o.mma().unwrap();
        let a = values_in(mma.input, m * k, seed, false);
        let b = values_in(mma.input, k * n, seed ^ 1, false);
        let p = problem(&a, &b, m, k, n);
        let fast = gemm(&o, &p, None).unwrap();
        let generic = gemm_generic(&o, &p, None).unwrap();
        for i in 0..m {
            for j in 0..n {
                let row: Vec<f32> = a[i * k..(i + 1) * k].to_vec();
                let col: Vec<f32> = (0..k).map(|kk| b[kk * n + j]).collect();
                let mut acc = 0f32;
                for (ca, cb) in row.chunks(mma.k as usize).zip(col.chunks(mma.k as usize)) {
                    acc = mma_step(&mma, ca, cb, acc);
                }
                prop_assert_eq!(class_bits(fast[i * n + j]), class_bits(acc), "{} K={} C[{}, {}] fast", o, k, i, j);
                prop_assert_eq!(class_bits(generic[i * n + j]), class_bits(acc), "{} K={} C[{}, {}] generic", o, k, i, j);
            }
        }
    }
}

/// Helper of the planted test: the generic evaluator on K reversed (A's
/// columns and B's rows in the opposite order): a swapped order.
fn reversed(o: &Order, p: &Problem) -> Result<Vec<f32>, GemmError> {
    let (m, k, n) = (p.m, p.k, p.n);
    let (mxbi::gemm::Matrix::F32(a), mxbi::gemm::Matrix::F32(b)) = (p.a, p.b) else {
        unreachable!()
    };
    let ra: Vec<f32> = (0..m * k).map(|x| a[(x / k) * k + (k - 1 - x % k)]).collect();
    let rb: Vec<f32> = (0..k * n).map(|x| b[(k - 1 - x / n) * n + x % n]).collect();
    gemm_generic(o, &problem(&ra, &rb, m, k, n), None)
}

/// The property can fail: an evaluator that sums K in the opposite order
/// is caught, and shrinking gives a tiny GEMM (one output, K of 2 or 3).
#[test]
fn fast_equals_generic_catches_a_planted_swapped_order() {
    let strategy = (1usize..6, 1usize..200, 1usize..6, any::<u64>());
    let fma: Order = "fma".parse().unwrap();
    let (why, (m, k, n, _)) = shrunk_failure(200, strategy, |(m, k, n, seed)| {
        evaluator_equals_generic(&fma, (m, k, n), seed, false, reversed)
    });
    // N does not shrink to 1 where only another column differs
    assert_eq!(m, 1, "{why}");
    assert!((2..=3).contains(&k) && n <= 5, "K = {k}: {why}");
}

/// The grammar strategy reaches every family and the part keys (so the
/// properties above are not run on a narrow slice of the grammar).
#[test]
fn the_order_strategy_covers_the_grammar() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::new(config(1));
    let s = order();
    let (mut fam, mut keys) = ([0usize; 3], [0usize; 7]);
    for _ in 0..2000 {
        let o = s.new_tree(&mut runner).unwrap().current();
        fam[match o.family {
            Family::Fma => 0,
            Family::MulAdd => 1,
            Family::Mma(_) => 2,
        }] += 1;
        keys[0] += (o.split > 1) as usize;
        keys[1] += o.interleave as usize;
        keys[2] += (o.lanes > 1) as usize;
        keys[3] += (o.tile == mxbi::order::Tile::Fresh) as usize;
        keys[4] += o.promote.is_some() as usize;
        keys[5] += (o.out != mxbi::order::OutFmt::F32) as usize;
        keys[6] += (o.lanes > 1 && o.tile == mxbi::order::Tile::Fresh) as usize;
    }
    assert!(fam.iter().all(|&c| c > 200), "{fam:?}");
    assert!(keys.iter().all(|&c| c > 50), "{keys:?}");
}
