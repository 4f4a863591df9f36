//! Emulated GEMM: `C = A x B` under an accumulation [`Order`], bit for bit.
//!
//! A is `[M, K]` row-major; B is `[K, N]` (`kn`) or `[N, K]` (`nk`). Inputs
//! are f32 values (bf16/f16 widened exactly) or MX codes with E8M0 scales
//! (blocks of 32 along K). Every output element is the evaluation of the
//! order's reduction tree; [`eval`] is the generic evaluator of any tree,
//! [`fast`] holds kernels for common families that must agree with it bit
//! for bit. Rows are computed in parallel; results do not depend on the
//! thread count.

pub mod arrays;
pub mod eval;
pub mod fast;
pub mod mma_step;
mod operands;
mod prepare;
mod problem;
mod run;
pub mod step;

pub use operands::MxOperand;

pub use arrays::{gemm_array, MxArrays};

pub use prepare::{check_operands, prepare, representable, transpose_columns, Kind, Prepared};
pub use problem::{BLayout, GemmError, Matrix, Problem, MX_BLOCK};
pub use run::{gemm, gemm_generic, trace};
