//! Which op runs and with what parameters ([`OpSpec`]): the op kinds, their shapes and their JSON form.

use super::error::{OpError, Result};
use super::{agmm, coupling, moe, norm, reduce};
use crate::order::Order;

/// An op spec: tagged by `op` in JSON.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum OpSpec {
    /// All-gather x1 along M, then matmul with x2 (LOCAL and GATHER paths).
    AllGatherMatmul(agmm::AgmmSpec),
    /// Per-rank partial products over a K shard, reduce-scattered along M.
    MatmulReduceScatter(reduce::ReduceSpec),
    /// Per-rank partial products over a K shard, all-reduced.
    MatmulAllReduce(reduce::ReduceSpec),
    /// MoE: router, expert GEMMs whose order depends on rows per expert; with
    /// `ep_world_size` the rows travel by all-to-all (AlltoAll + AllGather +
    /// BatchMatmul), without it one device runs a grouped matmul.
    Moe(moe::MoeSpec),
    /// RMSNorm with a row reduction given by an order (possibly batch-size
    /// dependent).
    RmsNorm(norm::NormSpec),
    /// Dynamic quantization of the activation inside the op, then a matmul.
    QuantMatmul(coupling::QuantSpec),
}

impl OpSpec {
    /// Checks shapes, world sizes and orders without running anything.
    pub fn validate(&self) -> Result<()> {
        self.check_limits()?;
        match self {
            OpSpec::AllGatherMatmul(s) => s.validate(),
            OpSpec::MatmulReduceScatter(s) => s.validate(true),
            OpSpec::MatmulAllReduce(s) => s.validate(false),
            OpSpec::Moe(s) => s.validate(),
            OpSpec::RmsNorm(s) => s.validate(),
            OpSpec::QuantMatmul(s) => s.validate(),
        }
    }

    /// Sizes bounded before anything is allocated ([`crate::limits`]): the
    /// world size, K, every input and output array (zero dimensions
    /// counted as 1, products overflow-checked), the output rows (each
    /// carries a provenance record) and the tree of every order at K.
    fn check_limits(&self) -> Result<()> {
        use crate::limits::{check_at_most, check_elements, check_k, nonzero_product, MAX_OP_ROWS, MAX_WORLD};
        struct Sizes<'a> {
            world: usize,
            /// (field name, K of the matmuls)
            k: (&'static str, usize),
            arrays: Vec<(&'static str, Vec<usize>)>,
            /// output rows summed over ranks, as factors
            rows: Vec<usize>,
            orders: Vec<&'a str>,
        }
        let z = match self {
            OpSpec::AllGatherMatmul(s) => {
                let (ws, mpr) = (s.world_size, s.m_per_rank);
                Sizes {
                    world: ws,
                    k: ("k", s.k),
                    arrays: vec![
                        ("x1", vec![ws, mpr, s.k]),
                        ("x2", vec![s.k, s.n]),
                        ("the outputs", vec![ws, ws, mpr, s.n]),
                    ],
                    rows: vec![ws, ws, mpr],
                    orders: std::iter::once(&s.local)
                        .chain(&s.gather)
                        .map(|p| p.order.as_str())
                        .collect(),
                }
            }
            OpSpec::MatmulReduceScatter(s) | OpSpec::MatmulAllReduce(s) => Sizes {
                world: s.world_size,
                k: ("k", s.k),
                arrays: vec![
                    ("x1", vec![s.m, s.k]),
                    ("x2", vec![s.k, s.n]),
                    ("the per-rank partial products", vec![s.world_size, s.m, s.n]),
                ],
                rows: vec![s.world_size, s.m],
                orders: vec![&s.order],
            },
            OpSpec::Moe(s) => Sizes {
                world: s.ep_world_size.unwrap_or(1),
                k: ("hidden", s.hidden),
                arrays: vec![
                    ("x", vec![s.tokens, s.hidden]),
                    ("logits", vec![s.tokens, s.experts]),
                    ("w", vec![s.experts, s.hidden, s.n]),
                    ("the output", vec![s.tokens, s.n]),
                ],
                rows: vec![s.tokens],
                orders: s.tiling.iter().map(|r| r.order.as_str()).collect(),
            },
            OpSpec::RmsNorm(s) => Sizes {
                world: 1,
                k: ("h", s.h),
                arrays: vec![("x", vec![s.m, s.h])],
                rows: vec![s.m],
                orders: std::iter::once(&s.order)
                    .chain(s.small_batch.as_ref().map(|b| &b.order))
                    .map(String::as_str)
                    .collect(),
            },
            OpSpec::QuantMatmul(s) => Sizes {
                world: 1,
                k: ("k", s.k),
                arrays: vec![
                    ("x", vec![s.m, s.k]),
                    ("w", vec![s.k, s.n]),
                    ("the output", vec![s.m, s.n]),
                ],
                rows: vec![s.m],
                orders: vec![&s.order],
            },
        };
        check_at_most("world size", z.world, MAX_WORLD, "MAX_WORLD").map_err(OpError::Spec)?;
        check_k(z.k.0, z.k.1).map_err(OpError::Spec)?;
        for (name, dims) in &z.arrays {
            check_elements(name, dims).map_err(OpError::Spec)?;
        }
        let rows = nonzero_product(&z.rows).unwrap_or(usize::MAX);
        check_at_most("output rows (summed over ranks)", rows, MAX_OP_ROWS, "MAX_OP_ROWS").map_err(OpError::Spec)?;
        // K bounds every matmul's K (shards and row batches are smaller);
        // an order that does not parse is reported by the op's own checks
        for o in z.orders.iter().filter_map(|o| o.parse::<Order>().ok()) {
            o.check_size(z.k.1)?;
        }
        Ok(())
    }

    /// Number of ranks whose outputs the op produces.
    pub fn ranks(&self) -> usize {
        match self {
            OpSpec::AllGatherMatmul(s) => s.world_size,
            OpSpec::MatmulReduceScatter(s) | OpSpec::MatmulAllReduce(s) => s.world_size,
            OpSpec::Moe(s) => s.ep_world_size.unwrap_or(1),
            OpSpec::RmsNorm(_) | OpSpec::QuantMatmul(_) => 1,
        }
    }

    /// The names and shapes of the inputs the op reads (codes and scales are
    /// separate entries; `u8` marks MX codes and E8M0 scales).
    pub fn input_shapes(&self) -> Vec<(String, Vec<usize>, bool)> {
        match self {
            OpSpec::AllGatherMatmul(s) => s.input_shapes(),
            OpSpec::MatmulReduceScatter(s) | OpSpec::MatmulAllReduce(s) => s.input_shapes(),
            OpSpec::Moe(s) => s.input_shapes(),
            OpSpec::RmsNorm(s) => s.input_shapes(),
            OpSpec::QuantMatmul(s) => s.input_shapes(),
        }
    }
}
