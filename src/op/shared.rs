//! Small steps the op models share: an order field parsed, a plain matmul under an order, one f32 addition, argument checks.

use super::error::{OpError, Result};
use crate::gemm::{self, Problem};
use crate::order::Order;

/// Parses an order string, naming the field it came from.
pub(crate) fn parse_order(field: &str, s: &str) -> Result<Order> {
    s.parse::<Order>().map_err(|e| OpError::Spec(format!("{field}: {e}")))
}

/// Plain-value GEMM `[m, k] x [k, n]` (B row-major `[K, N]`) under `order`.
pub(crate) fn matmul_values(order: &Order, a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Result<Vec<f32>> {
    let p = Problem {
        a: gemm::Matrix::F32(a),
        b: gemm::Matrix::F32(b),
        m,
        n,
        k,
        b_layout: gemm::BLayout::Kn,
    };
    Ok(gemm::gemm(order, &p, None)?)
}

/// `RN(x + y)` in f32 (the one add every reduction uses).
#[inline]
pub(crate) fn add_f32(x: f32, y: f32) -> f32 {
    x + y
}

pub(crate) fn need(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(OpError::Shape(msg()))
    }
}

pub(crate) fn positive(what: &str, v: usize) -> Result<()> {
    need(v > 0, || format!("{what} must be at least 1"))
}
