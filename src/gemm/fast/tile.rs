//! What both kernels share: the tile buffers of one task (one per plan
//! slot) and the plan's element-wise operations over them.

use super::plan::{Op, Step};
use crate::gemm::eval;
use crate::order::OutFmt;

/// `eval::convert_out` (RNE to bf16/f16, widened back), with `half`'s
/// conversions for numbers (NaNs take the evaluator's path).
#[inline]
pub(super) fn convert(x: f32, to: OutFmt) -> f32 {
    match to {
        _ if x.is_nan() => eval::convert_out(x, to),
        OutFmt::F32 => x,
        OutFmt::Bf16 => half::bf16::from_f32(x).to_f32(),
        OutFmt::F16 => half::f16::from_f32(x).to_f32(),
    }
}

/// The tile buffers of one task, one per plan slot.
pub(super) struct TileBufs(pub(super) Vec<Vec<f32>>);

impl TileBufs {
    pub(super) fn new(slots: usize, len: usize) -> TileBufs {
        TileBufs((0..slots).map(|_| vec![0f32; len]).collect())
    }
}

/// The element-wise operations of a plan, over whole tile buffers.
pub(super) fn elementwise(op: &Op, st: &Step, bufs: &mut [Vec<f32>]) {
    let mut d = std::mem::take(&mut bufs[st.dst]);
    match *op {
        Op::Zero => d.fill(0.0),
        Op::Add { .. } => {
            for ((d, a), b) in d.iter_mut().zip(&bufs[st.src[0]]).zip(&bufs[st.src[1]]) {
                *d = a + b;
            }
        }
        Op::Promote { .. } => {
            // element inputs (or `scale=fused`): the scale is 1.0
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
