//! Fast kernels for common order families. Each must agree bit for bit with
//! the generic evaluator ([`super::eval`]).
//!
//! The order's reduction tree is regrouped into tile-wide operations
//! ([`plan`]): `fma`/`muladd` parts become GEMM kernels over the part's k
//! list ([`fma`]), tensor-core steps become integer fused sums vectorised
//! across columns ([`mma`]), and the combination of parts (serial, pairwise,
//! butterfly, promotion, output conversion) runs element-wise in the tree's
//! own operations. Work is split into tiles of C only (never along K), so the
//! result does not depend on the thread count.
//!
//! # Contract: what the kernels compute, what they hand to the evaluator
//!
//! * Whole problems the kernels do not take ([`gemm`] returns None and the
//!   caller runs the evaluator): MX `scale=block` with `fma`/`muladd` (exact
//!   block-dot terms); an `mma` step whose fused sum does not fit 64-bit
//!   integer lanes (`f=60` with `in=f32`, for instance); a tree that is not
//!   made of chains from +0 and element-wise steps (no order of the grammar
//!   makes one today).
//! * Otherwise the kernels compute every output themselves, Inf and NaN
//!   inputs included, on element inputs, MX `scale=dequant`, and, for `mma`,
//!   MX `scale=fused` and `scale=block` (promotion by the block scales):
//!   IEEE steps in the tree's own order, fused sums in integers with the
//!   specials of docs/ORDERS.md (a NaN term, Inf times zero, or Infs of both
//!   signs give NaN; else an Inf term gives Inf).
//! * Then exactly the outputs whose value is NaN are handed to the
//!   evaluator, which recomputes them: the kernels decide that an output is
//!   NaN, the evaluator gives its sign and payload (IEEE steps propagate one
//!   operand's NaN, and which operand depends on instruction selection, so
//!   vector and scalar code may differ where NaNs meet).
//!
//! [`compute_isa`] returns the kernels' own values and the handed-off set, so
//! tests check the hand-off and compare only what the kernels computed.

mod buffer;
mod fma;
mod isa;
mod mma;
mod plan;
mod tile;

pub use buffer::poison_scratch;
pub use isa::Isa;

use super::{eval, Kind, Prepared};
use crate::order::{Family, Order, Tree};
use plan::Plan;
use rayon::prelude::*;

/// The fast kernels' own result for the selected rows, before the hand-off
/// to the evaluator (the module's contract, above).
#[derive(Clone, Debug, PartialEq)]
pub struct Computed {
    /// C, row-major `[rows.len(), N]`, every element as the kernels computed it.
    pub values: Vec<f32>,
    /// Indices into `values`, ascending, of the outputs handed to the
    /// evaluator: exactly those whose value is NaN.
    pub handed_off: Vec<usize>,
    /// The kernel that computed them: `fma`, or for mma families the lanes
    /// of the fused sums, `mma words` (AVX-512 word pairs), `mma i32` or
    /// `mma i64` (none for an empty result).
    pub kernel: &'static str,
}

/// The selected rows of C (row-major `[rows.len(), N]`) with the fast
/// kernels (NaN outputs recomputed by the evaluator), or None where no
/// kernel applies (the whole problem is the evaluator's).
pub fn gemm(order: &Order, prep: &Prepared, rows: &[usize]) -> Option<Vec<f32>> {
    gemm_isa(order, prep, rows, Isa::detect())
}

/// [`gemm`] with the kernels of a given instruction set (which this CPU
/// must run: see [`Isa::available`]); for tests.
#[doc(hidden)]
pub fn gemm_isa(order: &Order, prep: &Prepared, rows: &[usize], isa: Isa) -> Option<Vec<f32>> {
    let tree = order.compile(prep.terms());
    let Computed {
        mut values, handed_off, ..
    } = kernels(order, &tree, prep, rows, isa)?;
    if handed_off.is_empty() {
        return Some(values);
    }
    let n = prep.n;
    let redone: Vec<f32> = handed_off
        .par_iter()
        .map_init(Vec::new, |scratch, &x| {
            eval::evaluate(&tree, order, prep, rows[x / n], x % n, scratch, None)
        })
        .collect();
    for (&x, v) in handed_off.iter().zip(redone) {
        values[x] = v;
    }
    Some(values)
}

/// What the kernels of `isa` compute for the selected rows, and which
/// outputs [`gemm_isa`] hands to the evaluator; None where no kernel
/// applies. For tests of the hand-off.
#[doc(hidden)]
pub fn compute_isa(order: &Order, prep: &Prepared, rows: &[usize], isa: Isa) -> Option<Computed> {
    kernels(order, &order.compile(prep.terms()), prep, rows, isa)
}

fn kernels(order: &Order, tree: &Tree, prep: &Prepared, rows: &[usize], isa: Isa) -> Option<Computed> {
    assert!(isa.available(), "{isa:?} is not available on this CPU");
    let (a, bt, scales) = match &prep.kind {
        Kind::Values { a, bt } => (a, bt, None),
        Kind::Scaled { a, bt, xa, xb, fused } => (a, bt, Some(mma::Scales { xa, xb, fused: *fused })),
        Kind::Blocks { .. } => return None,
    };
    let (k, n) = (prep.k, prep.n);
    if rows.iter().any(|&r| r >= prep.m) {
        return None;
    }
    if rows.is_empty() || n == 0 {
        return Some(Computed {
            values: vec![0.0; rows.len() * n],
            handed_off: Vec::new(),
            kernel: "none",
        });
    }
    let plan = Plan::from_tree(tree)?;
    let (values, kernel) = match (order.family, scales) {
        (Family::Fma | Family::MulAdd, None) => (fma::run(&plan, a, bt, k, n, rows, isa), "fma"),
        (Family::Mma(m), scales) => {
            let inp = mma::Inputs {
                a,
                bt,
                k,
                n,
                rows,
                scales,
            };
            mma::run(&plan, m, &inp, isa)?
        }
        (Family::Fma | Family::MulAdd, Some(_)) => return None,
    };
    // a parallel, branch-free scan first: NaN outputs are rare
    let any_nan = values
        .par_chunks(1 << 16)
        .any(|c| c.iter().fold(false, |seen, x| seen | x.is_nan()));
    let handed_off = match any_nan {
        true => (0..values.len()).filter(|&x| values[x].is_nan()).collect(),
        false => Vec::new(),
    };
    Some(Computed {
        values,
        handed_off,
        kernel,
    })
}

#[cfg(test)]
mod tests {
    use super::tile::convert;
    use super::*;
    use crate::order::OutFmt;

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
