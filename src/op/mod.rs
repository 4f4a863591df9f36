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
pub mod divergence;
pub mod generate;
pub mod hypotheses;
pub mod moe;
pub mod norm;
pub mod path_sets;
pub mod presets;
pub mod provenance;
pub mod reduce;
pub mod reduce_subject;
pub mod spec;
pub mod subject;
pub mod visibility;

pub use cross_rank::{cross_rank, Diff};
pub use generate::{generate, GenOpts, Pin, X2Scales};
pub use provenance::{Mechanism, RowProvenance};

use crate::gemm::{self, GemmError, Problem};
use crate::io::{DType, TensorData};
use crate::order::{Order, OrderError};
use std::collections::BTreeMap;

/// Why an op could not run. Every variant is a clear one-line message.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error("bad op spec: {0}")]
    Spec(String),
    #[error("unknown preset '{name}'; known presets: {known}")]
    UnknownPreset { name: String, known: String },
    #[error("preset '{preset}' does not support world size {got}; supported: {supported}")]
    WorldSize {
        preset: String,
        got: usize,
        supported: String,
    },
    #[error("shape: {0}")]
    Shape(String),
    #[error("input: {0}")]
    Input(String),
    #[error(transparent)]
    Order(#[from] OrderError),
    #[error("gemm: {0}")]
    Gemm(#[from] GemmError),
}

pub type Result<T> = std::result::Result<T, OpError>;

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
    /// Reads a spec from JSON: either a full spec (`{"op": ...}`) or a
    /// preset with overrides (`{"preset": "agmm-v2-prefix", "k": 512}`).
    pub fn from_json(text: &str) -> Result<OpSpec> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| OpError::Spec(format!("not valid JSON: {e}")))?;
        Self::from_value(v)
    }

    pub fn from_value(v: serde_json::Value) -> Result<OpSpec> {
        let spec = if v.get("preset").is_some() {
            presets::resolve(&v)?
        } else {
            serde_json::from_value::<OpSpec>(v).map_err(|e| OpError::Spec(e.to_string()))?
        };
        spec.validate()?;
        Ok(spec)
    }

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

/// One input tensor: f32 values or u8 bytes (MX codes, E8M0 scales).
#[derive(Clone, Debug, PartialEq)]
pub enum TensorValues {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub values: TensorValues,
}

impl Tensor {
    pub fn f32(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
        Tensor {
            shape,
            values: TensorValues::F32(v),
        }
    }
    pub fn u8(shape: Vec<usize>, v: Vec<u8>) -> Tensor {
        Tensor {
            shape,
            values: TensorValues::U8(v),
        }
    }
    /// As an [`crate::io`] tensor (f32 or uint8), for writing.
    pub fn to_tensor_data(&self) -> TensorData {
        match &self.values {
            TensorValues::F32(v) => TensorData::from_slice(self.shape.clone(), v),
            TensorValues::U8(v) => TensorData::new(DType::U8, self.shape.clone(), v.clone()),
        }
        .expect("shape matches data by construction")
    }
    /// From an [`crate::io`] tensor: uint8 stays bytes; f32/f16/bf16 become
    /// f32 exactly; f64 must be exact in f32.
    pub fn from_tensor_data(name: &str, t: &TensorData) -> Result<Tensor> {
        let shape = t.shape().to_vec();
        let bad = |e: crate::io::IoError| OpError::Input(format!("{name}: {e}"));
        Ok(match t.dtype() {
            DType::U8 | DType::F8E4M3 | DType::F8E5M2 => Tensor::u8(shape, t.as_bits8().map_err(bad)?.to_vec()),
            DType::F32 => Tensor::f32(shape, t.as_f32().map_err(bad)?.into_owned()),
            DType::F16 => Tensor::f32(shape, t.as_f16().map_err(bad)?.iter().map(|h| h.to_f32()).collect()),
            DType::BF16 => Tensor::f32(shape, t.as_bf16().map_err(bad)?.iter().map(|h| h.to_f32()).collect()),
            DType::F64 => {
                let v = t.as_f64().map_err(bad)?;
                if let Some(i) = v.iter().position(|x| !x.is_nan() && (*x as f32) as f64 != *x) {
                    return Err(OpError::Input(format!(
                        "{name}: element {i} ({:e}) is not exactly representable in f32",
                        v[i]
                    )));
                }
                Tensor::f32(shape, v.iter().map(|&x| x as f32).collect())
            }
            d => {
                return Err(OpError::Input(format!(
                    "{name}: expected f32/f16/bf16 values or uint8 codes, got {}",
                    d.name()
                )))
            }
        })
    }
}

/// Named input tensors.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inputs(pub BTreeMap<String, Tensor>);

impl Inputs {
    pub fn insert(&mut self, name: &str, t: Tensor) {
        self.0.insert(name.to_string(), t);
    }

    fn get(&self, name: &str, shape: &[usize]) -> Result<&Tensor> {
        let t = self.0.get(name).ok_or_else(|| {
            OpError::Input(format!(
                "missing input '{name}' (shape {shape:?}); have: {}",
                self.0.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        if t.shape != shape {
            return Err(OpError::Input(format!(
                "input '{name}' has shape {:?}, expected {shape:?}",
                t.shape
            )));
        }
        Ok(t)
    }

    /// f32 values of `name` with exactly this shape.
    pub fn values(&self, name: &str, shape: &[usize]) -> Result<&[f32]> {
        match &self.get(name, shape)?.values {
            TensorValues::F32(v) => Ok(v),
            TensorValues::U8(_) => Err(OpError::Input(format!(
                "input '{name}' must hold values (f32/f16/bf16), got uint8"
            ))),
        }
    }

    /// u8 bytes (codes or scales) of `name` with exactly this shape.
    pub fn bytes(&self, name: &str, shape: &[usize]) -> Result<&[u8]> {
        match &self.get(name, shape)?.values {
            TensorValues::U8(v) => Ok(v),
            TensorValues::F32(_) => Err(OpError::Input(format!(
                "input '{name}' must be uint8 (MX codes or E8M0 scales), got float values"
            ))),
        }
    }
}

/// One rank's output: row-major f32 `[rows, cols]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RankOutput {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl RankOutput {
    pub fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
}

/// Every rank's output and the provenance of every output row (ordered by
/// rank, then row).
#[derive(Clone, Debug, PartialEq)]
pub struct OpOutput {
    pub per_rank: Vec<RankOutput>,
    pub provenance: Vec<RowProvenance>,
}

impl OpOutput {
    /// Where a logical (global) row appears: `(rank, row)` pairs.
    pub fn locations(&self, global_row: usize) -> Vec<(usize, usize)> {
        self.provenance
            .iter()
            .filter(|p| p.global_row == global_row)
            .map(|p| (p.rank, p.row))
            .collect()
    }

    /// The provenance of `(rank, row)`.
    pub fn provenance_of(&self, rank: usize, row: usize) -> Option<&RowProvenance> {
        self.provenance.iter().find(|p| p.rank == rank && p.row == row)
    }
}

/// Runs an op (trial 0).
pub fn run_op(spec: &OpSpec, inputs: &Inputs) -> Result<OpOutput> {
    run_op_trial(spec, inputs, 0)
}

/// Runs an op as run number `trial`. Only non-deterministic reductions
/// (`nondet`) look at `trial`: their order is drawn from the spec's seed and
/// the trial, modelling a different order on every run.
pub fn run_op_trial(spec: &OpSpec, inputs: &Inputs, trial: u64) -> Result<OpOutput> {
    spec.validate()?;
    match spec {
        OpSpec::AllGatherMatmul(s) => agmm::run(s, inputs),
        OpSpec::MatmulReduceScatter(s) => reduce::run(s, inputs, true, trial),
        OpSpec::MatmulAllReduce(s) => reduce::run(s, inputs, false, trial),
        OpSpec::Moe(s) => moe::run(s, inputs),
        OpSpec::RmsNorm(s) => norm::run(s, inputs),
        OpSpec::QuantMatmul(s) => coupling::run(s, inputs),
    }
}

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

fn need(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(OpError::Shape(msg()))
    }
}

fn positive(what: &str, v: usize) -> Result<()> {
    need(v > 0, || format!("{what} must be at least 1"))
}
