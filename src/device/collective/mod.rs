//! Fused comm+matmul ops on real GPUs (one GPU per rank, NCCL), compared
//! byte for byte with the CPU op models of `crate::op`.
//!
//! - AllGatherMatmul: NCCL all-gathers the x1 shards (MX codes and E8M0
//!   scales); every rank then runs the generated GEMM kernels of its paths:
//!   LOCAL for its own shard's rows, GATHER for the rows it received. A
//!   `requant:e4m3` GATHER path re-rounds x2 on the GPU (`cvt.rn.satfinite`
//!   through `__nv_cvt_float_to_fp8`) before its GEMM.
//! - MatmulAllReduce: every rank runs its K-shard partial GEMM, then NCCL
//!   all-reduces (sum) the partials.
//!
//! A case is stored as its resolved spec, input seed and x2-scale mode;
//! the capture holds each rank's per-row digests of the GPU output and the
//! cross-rank verdicts, so CI replays the model on the CPU.
//!
//! | file | concern |
//! |---|---|
//! | `cases` | the cases: spec, seed, x2-scale mode |
//! | `compare` | cross-rank differences, named reduction orders, GPU vs model |
//! | `report` | records, the report and its table |
//! | `replay` | the CPU replay of a capture |
//! | `agmm_gpu` | (cuda) the AllGatherMatmul kernels of one rank |
//! | `one_gpu` | (cuda) every rank in sequence on one GPU |
//! | `two_gpu` | (nccl) one GPU per rank, NCCL collectives |

#[cfg(feature = "cuda")]
mod agmm_gpu;
mod cases;
mod compare;
#[cfg(feature = "cuda")]
mod one_gpu;
mod replay;
mod report;
#[cfg(feature = "nccl")]
pub(crate) mod two_gpu;

/// The suite name of collective captures.
pub const SUITE: &str = "collective";

pub use cases::*;
pub use compare::*;
#[cfg(feature = "cuda")]
pub use one_gpu::run_sequential;
pub use replay::*;
pub use report::*;
#[cfg(feature = "nccl")]
pub use two_gpu::run;
