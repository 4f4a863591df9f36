//! Fast kernels for common order families. Each must agree bit for bit with
//! the generic evaluator ([`super::eval`]); [`gemm`] returns None where no
//! kernel applies.
//!
//! The order's reduction tree is regrouped into tile-wide operations
//! ([`plan`]): `fma`/`muladd` parts become GEMM kernels over the part's k
//! list ([`fma`]), tensor-core steps become integer fused sums vectorised
//! across columns ([`mma`]), and the combination of parts (serial, pairwise,
//! butterfly, promotion, output conversion) runs element-wise in the tree's
//! own operations. Work is split into tiles of C only (never along K), so the
//! result does not depend on the thread count. Outputs whose row of A or
//! column of B holds a non-finite value are recomputed by the generic
//! evaluator (NaN payload propagation is then exactly the evaluator's).

mod fma;
mod mma;
mod plan;

use super::{eval, Kind, Prepared};
use crate::order::{Family, Order};
use plan::{Op, Plan, Step};
use rayon::prelude::*;

/// Instruction sets the kernels are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Avx512,
    Avx2,
    Portable,
}

impl Isa {
    /// The best one this CPU runs.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512dq")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512cd")
                && is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("bmi1")
                && is_x86_feature_detected!("bmi2")
                && is_x86_feature_detected!("lzcnt")
            {
                return Isa::Avx512;
            }
            if is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("bmi1")
                && is_x86_feature_detected!("bmi2")
                && is_x86_feature_detected!("lzcnt")
            {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }

    /// Whether this CPU runs it.
    pub fn available(self) -> bool {
        match (self, Isa::detect()) {
            (Isa::Portable, _) | (_, Isa::Avx512) => true,
            (Isa::Avx2, d) => d == Isa::Avx2,
            (Isa::Avx512, _) => false,
        }
    }
}

/// The selected rows of C (row-major `[rows.len(), N]`) with the fast
/// kernels, or None where none applies.
pub fn gemm(order: &Order, prep: &Prepared, rows: &[usize]) -> Option<Vec<f32>> {
    gemm_isa(order, prep, rows, Isa::detect())
}

/// [`gemm`] with the kernels of a given instruction set (which this CPU
/// must run: see [`Isa::available`]); for tests.
#[doc(hidden)]
pub fn gemm_isa(order: &Order, prep: &Prepared, rows: &[usize], isa: Isa) -> Option<Vec<f32>> {
    assert!(isa.available(), "{isa:?} is not available on this CPU");
    let Kind::Values { a, bt } = &prep.kind else {
        return None;
    };
    let (k, n) = (prep.k, prep.n);
    if rows.iter().any(|&r| r >= prep.m) {
        return None;
    }
    if rows.is_empty() || n == 0 {
        return Some(vec![0.0; rows.len() * n]);
    }
    let t0 = std::time::Instant::now();
    let tree = order.compile(k);
    let plan = Plan::from_tree(&tree)?;
    if std::env::var("DBG").is_ok() { eprintln!("plan {:?}", t0.elapsed()); }
    let bad_rows: Vec<bool> = rows
        .par_iter()
        .map(|&r| a[r * k..(r + 1) * k].iter().any(|x| !x.is_finite()))
        .collect();
    let bad_cols: Vec<bool> = (0..n)
        .into_par_iter()
        .map(|j| bt[j * k..(j + 1) * k].iter().any(|x| !x.is_finite()))
        .collect();
    if std::env::var("DBG").is_ok() { eprintln!("scan {:?}", t0.elapsed()); }
    let mut out = match order.family {
        Family::Fma | Family::MulAdd => fma::run(&plan, a, bt, k, n, rows, isa),
        Family::Mma(m) => {
            let inp = mma::Inputs {
                a,
                bt,
                k,
                n,
                rows,
                bad_rows: &bad_rows,
                bad_cols: &bad_cols,
            };
            mma::run(&plan, m, &inp, isa)?
        }
    };
    if std::env::var("DBG").is_ok() { eprintln!("run {:?}", t0.elapsed()); }
    if bad_rows.iter().any(|&b| b) || bad_cols.iter().any(|&b| b) {
        out.par_chunks_mut(n)
            .zip(rows.par_iter())
            .zip(bad_rows.par_iter())
            .for_each(|((row, &i), &bad)| {
                let mut scratch = Vec::new();
                for (j, o) in row.iter_mut().enumerate() {
                    if bad || bad_cols[j] {
                        *o = eval::evaluate(&tree, order, prep, i, j, &mut scratch, None);
                    }
                }
            });
    }
    Some(out)
}

/// The tile buffers of one task, one per plan slot.
struct TileBufs(Vec<Vec<f32>>);

impl TileBufs {
    fn new(slots: usize, len: usize) -> TileBufs {
        TileBufs((0..slots).map(|_| vec![0f32; len]).collect())
    }
}

/// The element-wise operations of a plan, over whole tile buffers.
fn elementwise(op: &Op, st: &Step, bufs: &mut [Vec<f32>]) {
    let mut d = std::mem::take(&mut bufs[st.dst]);
    match *op {
        Op::Zero => d.fill(0.0),
        Op::Add { .. } => {
            for ((d, a), b) in d.iter_mut().zip(&bufs[st.src[0]]).zip(&bufs[st.src[1]]) {
                *d = a + b;
            }
        }
        Op::Promote { .. } => {
            for ((d, acc), p) in d.iter_mut().zip(&bufs[st.src[0]]).zip(&bufs[st.src[1]]) {
                *d = 1f32.mul_add(*p, *acc);
            }
        }
        Op::Convert { to, .. } => {
            for (d, x) in d.iter_mut().zip(&bufs[st.src[0]]) {
                *d = eval::convert_out(*x, to);
            }
        }
        Op::Chain { .. } | Op::Fused { .. } => unreachable!("kernel operations are run by their module"),
    }
    bufs[st.dst] = d;
}
