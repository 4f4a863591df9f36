//! A GEMM problem: the operands (f32 values or MX codes with E8M0 scales),
//! B's layout, the shape, and why a problem cannot run.

use crate::mx::MxFormat;

/// One operand.
#[derive(Clone, Copy, Debug)]
pub enum Matrix<'a> {
    /// f32 values, row-major.
    F32(&'a [f32]),
    /// MX codes (row-major, same shape as the matrix) and E8M0 scales with
    /// blocks of 32 along K: A scales `[M, K/32]`; B scales `[K/32, N]`
    /// (`kn`) or `[N, K/32]` (`nk`).
    Mx {
        codes: &'a [u8],
        scales: &'a [u8],
        format: MxFormat,
    },
}

/// Layout of B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BLayout {
    Kn,
    Nk,
}

/// A GEMM problem.
#[derive(Clone, Copy, Debug)]
pub struct Problem<'a> {
    pub a: Matrix<'a>,
    pub b: Matrix<'a>,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub b_layout: BLayout,
}

/// The MX block size along K.
pub const MX_BLOCK: usize = 32;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GemmError {
    #[error("shape mismatch: {0}")]
    Shape(String),
    #[error(
        "{operand}[{index}] = {value:e} is not exactly representable in {ty}, which the order's step reads (in={ty})"
    )]
    NotRepresentable {
        operand: &'static str,
        index: usize,
        value: f32,
        ty: &'static str,
    },
    #[error("unsupported combination: {0}")]
    Unsupported(String),
    #[error("row {row} is out of range (M = {m})")]
    Row { row: usize, m: usize },
    /// A size beyond [`crate::limits`] (K, the output, the order's tree).
    #[error("{0}")]
    Limit(String),
}
