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
//! result does not depend on the thread count. Outputs that meet an Inf or a
//! NaN are recomputed by the generic evaluator (NaN payload propagation is
//! then exactly the evaluator's): for `fma`/`muladd` the non-finite outputs
//! (a non-finite value anywhere in an output's computation reaches the
//! output), for `mma` those whose row of A or column of B is not finite.

mod fma;
mod mma;
mod plan;

use super::{eval, Kind, Prepared};
use crate::order::{Family, Order, OutFmt};
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
    let tree = order.compile(k);
    let plan = Plan::from_tree(&tree)?;
    // outputs left to the generic evaluator
    let (mut out, bad_rows, bad_cols) = match order.family {
        // a non-finite value anywhere in an output's computation makes the
        // output non-finite (nothing turns Inf or NaN back into a number)
        Family::Fma | Family::MulAdd => (fma::run(&plan, a, bt, k, n, rows, isa), None, None),
        Family::Mma(m) => {
            let inp = mma::Inputs { a, bt, k, n, rows };
            let (out, br, bc) = mma::run(&plan, m, &inp, isa)?;
            (out, Some(br), Some(bc))
        }
    };
    let redo = |r: usize, j: usize, v: f32| match (&bad_rows, &bad_cols) {
        (Some(br), Some(bc)) => br[r] || bc[j],
        _ => !v.is_finite(),
    };
    out.par_chunks_mut(n)
        .zip(rows.par_iter())
        .enumerate()
        .for_each(|(r, (row, &i))| {
            let mut scratch = Vec::new();
            for (j, o) in row.iter_mut().enumerate() {
                if redo(r, j, *o) {
                    *o = eval::evaluate(&tree, order, prep, i, j, &mut scratch, None);
                }
            }
        });
    Some(out)
}

/// `eval::convert_out` (RNE to bf16/f16, widened back), with `half`'s
/// conversions for numbers (NaNs take the evaluator's path).
#[inline]
fn convert(x: f32, to: OutFmt) -> f32 {
    match to {
        _ if x.is_nan() => eval::convert_out(x, to),
        OutFmt::F32 => x,
        OutFmt::Bf16 => half::bf16::from_f32(x).to_f32(),
        OutFmt::F16 => half::f16::from_f32(x).to_f32(),
    }
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
                *d = convert(*x, to);
            }
        }
        Op::Chain { .. } | Op::Fused { .. } => unreachable!("kernel operations are run by their module"),
    }
    bufs[st.dst] = d;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convert_matches_the_evaluator() {
        let special = [
            0u32,
            0x8000_0000,
            0x7F80_0000,
            0xFF80_0000,
            0x7F7F_FFFF,
            0x0000_0001,
            0x477F_F000,
            0x477F_EFFF,
        ];
        let bits = (0..=u32::MAX)
            .step_by(251)
            .chain(special)
            .chain((0..1 << 16).map(|x| 0x477F_0000 | x));
        for b in bits.chain((0..1 << 17).map(|x| 0x3380_0000 + x)) {
            let x = f32::from_bits(b);
            for to in [OutFmt::Bf16, OutFmt::F16] {
                let (got, want) = (convert(x, to), eval::convert_out(x, to));
                assert_eq!(got.to_bits(), want.to_bits(), "{x:e} ({b:#010x}) {to:?}");
            }
        }
    }
}
