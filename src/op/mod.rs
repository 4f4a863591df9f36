//! Fused communication + matmul op models: several ranks simulated in one
//! process, bit-exact given their orders (docs/OPS.md is the contract).
//!
//! Every matmul goes through [`crate::gemm::gemm`] with an [`Order`]; the
//! collectives only decide which rows each rank holds, which order and
//! scale entry point each path uses, and in which order partial results are
//! added (`RN(x + y)` in f32, one rounding per add). Each output row carries
//! a [`RowProvenance`] naming the rank, path, order, scale entry point and
//! the mechanisms that touched it.
//!
//! Inputs are *global* tensors (the model shards them): see each op's docs.
//! Results do not depend on the thread count.

pub mod agmm;
pub mod coupling;
pub mod cross_rank;
mod definition;
pub mod divergence;
mod error;
pub mod generate;
pub mod hypotheses;
pub mod moe;
pub mod norm;
mod output;
pub mod path_sets;
pub mod presets;
pub mod provenance;
pub mod reduce;
pub mod reduce_subject;
mod run;
mod shared;
pub mod spec;
mod spec_json;
pub mod subject;
mod tensors;
pub mod visibility;

pub use cross_rank::{cross_rank, Diff};
pub use definition::OpSpec;
pub use error::{OpError, Result};
pub use generate::{generate, GenOpts, Pin, X2Scales};
pub use output::{OpOutput, RankOutput};
pub use provenance::{Mechanism, RowProvenance};
pub use run::{run_op, run_op_trial};
pub(crate) use shared::{add_f32, matmul_values, need, parse_order, positive};
pub use tensors::{Inputs, Tensor, TensorValues};
