//! Vendor GEMMs (cuBLAS, cuBLASLt) under the anchor-row probe: one fixed
//! input row is placed at the first, middle and last position of batches
//! of M rows, and the bytes of its output row are compared with the result
//! at the smallest M. Batch invariance holds when no byte differs.
//!
//! Six cases, all computing `Y[M,N] = X[M,K] · W[N,K]ᵀ` (row-major):
//!
//! | case | API | inputs | output |
//! |---|---|---|---|
//! | `sgemm` | cuBLAS `cublasSgemm` | f32 | f32 |
//! | `lt-f32` | cuBLASLt, `COMPUTE_32F` | f32 | f32 |
//! | `gemmex-bf16` | cuBLAS `cublasGemmEx`, `COMPUTE_32F` | bf16 | bf16 |
//! | `lt-bf16` | cuBLASLt, `COMPUTE_32F` | bf16 | bf16 |
//! | `lt-fp8-tensor` | cuBLASLt, per-tensor f32 scales | e4m3 | bf16 |
//! | `lt-fp8-vec128-blk128` | cuBLASLt, `BLK128x128_32F` weights, `VEC128_32F` activations | e4m3 | bf16 |
//!
//! cuBLAS is column-major, so every case runs as `Dᶜ[N,M] = op(A)·B` with
//! `A = W` (stored K×N column-major, `TRANSA = T`), `B = X` (K×M, `N`) and
//! `D` N×M column-major, which is `Y` row-major: the anchor row is
//! contiguous, and M only ever appears as the column count of `B` and `D`
//! (no alignment demand on M, FP8's "TN" requirement met).
//!
//! For the cuBLASLt cases the heuristic's choice is read back at every M,
//! and a pinned algorithm is built once: the heuristic's configuration at
//! `pin_m` is re-initialised with `cublasLtMatmulAlgoInit`, every config
//! attribute copied except `SPLITK_NUM = 1` and `REDUCTION_SCHEME = NONE`,
//! checked with `cublasLtMatmulAlgoCheck` at each M and applied there; an M
//! the check refuses is recorded as refused, never run on another algorithm.
//!
//! Everything here except [`run`] (feature `cuda`) is plain Rust: inputs
//! are regenerated from the seed, the table is derived from the stored
//! anchor rows, and [`replay`] checks a capture on a machine without a GPU.

#[cfg(feature = "cuda")]
pub(crate) mod run;
#[cfg(feature = "cuda")]
pub use run::run;

use super::capture::{sha256_hex, Capture, CaptureWriter, Manifest};
use super::{DeviceError, Result};
use crate::format::Format;
use crate::rng::SplitMix64;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Version of `report.json`'s layout and of the input generator.
pub const SCHEMA: u32 = 1;
/// The default seed ("mxbi_vnd").
pub const DEFAULT_SEED: u64 = 0x6d78_6269_5f76_6e64;
/// Batch sizes of the full probe.
pub const M_LIST: [usize; 14] = [1, 2, 4, 8, 16, 17, 32, 33, 64, 128, 256, 257, 1024, 4096];
/// Batch sizes of `--quick`.
pub const QUICK_M_LIST: [usize; 3] = [1, 17, 128];
/// Batch sizes at which heuristic and pinned algorithms are timed.
pub const TIMING_M: [usize; 5] = [1, 16, 128, 1024, 4096];
/// cuBLASLt (and cuBLAS) workspace, allocated explicitly: 32 MiB, NVIDIA's
/// recommendation for Hopper.
pub const WORKSPACE_BYTES: usize = 32 << 20;
/// Per-tensor dequantisation scale of the weights in `lt-fp8-tensor`.
pub const TENSOR_SCALE_W: f32 = 0.5;
/// Per-tensor dequantisation scale of the activations in `lt-fp8-tensor`.
pub const TENSOR_SCALE_X: f32 = 0.25;
/// Block edge of the `VEC128_32F` / `BLK128x128_32F` scale modes.
pub const SCALE_BLOCK: usize = 128;

/// Element types of inputs and outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dtype {
    F32,
    Bf16,
    E4m3,
}

impl Dtype {
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 => 2,
            Dtype::E4m3 => 1,
        }
    }

    /// Exact value of one little-endian element.
    pub fn decode(self, b: &[u8]) -> f64 {
        match self {
            Dtype::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            Dtype::Bf16 => Format::BF16.decode_f64(u16::from_le_bytes([b[0], b[1]])),
            Dtype::E4m3 => Format::E4M3.decode_f64(b[0] as u16),
        }
    }

    fn tag(self) -> u64 {
        match self {
            Dtype::F32 => 1,
            Dtype::Bf16 => 2,
            Dtype::E4m3 => 3,
        }
    }
}

/// Which library entry point runs a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// The classic cuBLAS API (`cublasSgemm`, `cublasGemmEx`): no algorithm
    /// control, so no pinned variant.
    Cublas,
    CublasLt,
}

/// How FP8 inputs are dequantised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scaling {
    None,
    /// One f32 per tensor (`SCALAR_32F`).
    Tensor,
    /// Weights `BLK128x128_32F` (cuBLAS A), activations `VEC128_32F` (B).
    Vec128Blk128,
}

/// The six vendor GEMM cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CaseId {
    Sgemm,
    LtF32,
    GemmexBf16,
    LtBf16,
    LtFp8Tensor,
    LtFp8Vec128Blk128,
}

impl CaseId {
    pub const ALL: [CaseId; 6] = [
        CaseId::Sgemm,
        CaseId::LtF32,
        CaseId::GemmexBf16,
        CaseId::LtBf16,
        CaseId::LtFp8Tensor,
        CaseId::LtFp8Vec128Blk128,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CaseId::Sgemm => "sgemm",
            CaseId::LtF32 => "lt-f32",
            CaseId::GemmexBf16 => "gemmex-bf16",
            CaseId::LtBf16 => "lt-bf16",
            CaseId::LtFp8Tensor => "lt-fp8-tensor",
            CaseId::LtFp8Vec128Blk128 => "lt-fp8-vec128-blk128",
        }
    }

    pub fn api(self) -> Api {
        match self {
            CaseId::Sgemm | CaseId::GemmexBf16 => Api::Cublas,
            _ => Api::CublasLt,
        }
    }

    pub fn input(self) -> Dtype {
        match self {
            CaseId::Sgemm | CaseId::LtF32 => Dtype::F32,
            CaseId::GemmexBf16 | CaseId::LtBf16 => Dtype::Bf16,
            CaseId::LtFp8Tensor | CaseId::LtFp8Vec128Blk128 => Dtype::E4m3,
        }
    }

    pub fn output(self) -> Dtype {
        match self {
            CaseId::Sgemm | CaseId::LtF32 => Dtype::F32,
            _ => Dtype::Bf16,
        }
    }

    pub fn scaling(self) -> Scaling {
        match self {
            CaseId::LtFp8Tensor => Scaling::Tensor,
            CaseId::LtFp8Vec128Blk128 => Scaling::Vec128Blk128,
            _ => Scaling::None,
        }
    }

    pub fn pinnable(self) -> bool {
        self.api() == Api::CublasLt
    }

    /// Largest `max|y − ref| / max|ref|` over the anchor row that is still
    /// plausible: f32 accumulation and output; bf16 output rounding
    /// (2⁻⁹); FP8 tensor-core accumulation plus bf16 output.
    pub fn tolerance(self) -> f64 {
        match self.output() {
            Dtype::F32 => 1e-5,
            _ if self.input() == Dtype::E4m3 => 2e-2,
            _ => 1e-2,
        }
    }
}

/// One GEMM shape: `N` outputs per row, reduction length `K`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    pub name: String,
    pub n: usize,
    pub k: usize,
}

impl Shape {
    pub fn new(n: usize, k: usize) -> Shape {
        Shape {
            name: format!("n{n}-k{k}"),
            n,
            k,
        }
    }

    /// Number of 128-wide K blocks (`L` in the cuBLAS documentation).
    pub fn k_blocks(&self) -> usize {
        self.k.div_ceil(SCALE_BLOCK)
    }

    /// Number of 128-row N blocks of the weights.
    pub fn n_blocks(&self) -> usize {
        self.n.div_ceil(SCALE_BLOCK)
    }
}

/// N=K=2048 (the TransformerEngine measurement's shape) and an MX-sized
/// one: K=7168 (DeepSeek-V3's hidden size; a multiple of 32 and of 128).
pub fn default_shapes() -> Vec<Shape> {
    vec![Shape::new(2048, 2048), Shape::new(2048, 7168)]
}

/// Where the anchor row sits in a batch of M rows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// `first`, `mid`, `last`, or several joined by `/` when they coincide.
    pub label: String,
    pub row: usize,
}

/// First (0), middle (M/2) and last (M−1) rows, merged where they
/// coincide; only the middle one when `all` is false.
pub fn positions(m: usize, all: bool) -> Vec<Position> {
    assert!(m > 0, "M must be positive");
    let cand: Vec<(&str, usize)> = if all {
        vec![("first", 0), ("mid", m / 2), ("last", m - 1)]
    } else {
        vec![("mid", m / 2)]
    };
    let mut out: Vec<Position> = Vec::new();
    for (label, row) in cand {
        match out.iter_mut().find(|p| p.row == row) {
            Some(p) => {
                p.label.push('/');
                p.label.push_str(label);
            }
            None => out.push(Position {
                label: label.into(),
                row,
            }),
        }
    }
    out
}

/// Everything that decides what a run does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VendorOptions {
    pub seed: u64,
    pub m_list: Vec<usize>,
    /// First, middle and last positions (else the middle one only).
    pub all_positions: bool,
    pub shapes: Vec<Shape>,
    pub cases: Vec<CaseId>,
    /// The M at which the heuristic's choice is read back and pinned: the
    /// largest M of the list. That is where the algorithm's throughput
    /// matters most and where the heuristic is least tempted to split K;
    /// the slowdown the pin costs at small M is then what the timing table
    /// measures.
    pub pin_m: usize,
    pub timing_m: Vec<usize>,
    pub warmup: usize,
    /// Timed samples per variant (medians are reported).
    pub timing_reps: usize,
    /// Back-to-back launches inside one timed sample.
    pub timing_inner: usize,
}

impl VendorOptions {
    pub fn full() -> VendorOptions {
        VendorOptions {
            seed: DEFAULT_SEED,
            m_list: M_LIST.to_vec(),
            all_positions: true,
            shapes: default_shapes(),
            cases: CaseId::ALL.to_vec(),
            pin_m: *M_LIST.iter().max().expect("non-empty"),
            timing_m: TIMING_M.to_vec(),
            warmup: 5,
            timing_reps: 20,
            timing_inner: 5,
        }
    }

    pub fn quick() -> VendorOptions {
        VendorOptions {
            m_list: QUICK_M_LIST.to_vec(),
            all_positions: false,
            pin_m: *QUICK_M_LIST.iter().max().expect("non-empty"),
            timing_m: vec![1, 128],
            timing_reps: 10,
            ..VendorOptions::full()
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(DeviceError::Refused(s));
        if self.m_list.is_empty() || self.m_list.contains(&0) {
            return bad("the M list must be non-empty and positive".into());
        }
        if !self.m_list.contains(&self.pin_m) {
            return bad(format!("pin M {} is not in the M list", self.pin_m));
        }
        for s in &self.shapes {
            if s.n == 0 || s.k == 0 || s.n % 16 != 0 || s.k % SCALE_BLOCK != 0 {
                return bad(format!(
                    "shape {}: N must be a multiple of 16 and K of 128 (FP8 alignment, scale blocks)",
                    s.name
                ));
            }
            if s.n > 0xFFFF || s.k > 0xFFFF {
                return bad(format!("shape {}: N and K must be below 65536", s.name));
            }
        }
        if self.m_list.iter().any(|&m| m >= 1 << 24) {
            return bad("M must be below 2^24".into());
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Inputs: regenerated from the seed on any machine.
// ---------------------------------------------------------------------------

const KIND_WEIGHTS: u64 = 1;
const KIND_ANCHOR: u64 = 2;
const KIND_NEIGHBOURS: u64 = 3;
const KIND_WEIGHT_SCALES: u64 = 4;
const KIND_ANCHOR_SCALES: u64 = 5;
const KIND_NEIGHBOUR_SCALES: u64 = 6;

/// The stream of one input: its kind, element type, shape and (for the
/// neighbour rows) M. The anchor and the weights do not depend on M; the
/// neighbours do, so each M sees different rows around the anchor.
fn stream(seed: u64, kind: u64, dtype: Dtype, shape: &Shape, m: usize) -> SplitMix64 {
    let index = (kind << 60) | (dtype.tag() << 56) | ((shape.n as u64) << 40) | ((shape.k as u64) << 24) | m as u64;
    SplitMix64::for_item(seed, index)
}

/// One random element: f32 uniform in [-1, 1) on a 2⁻²³ grid; bf16 the
/// same value truncated to its top 16 bits (exact, full 8-bit significand,
/// so that f32 sums really round); e4m3 a code with random sign, exponent
/// field 0..=8 (|v| < 4, subnormals included, never NaN) and mantissa.
fn push_element(dtype: Dtype, r: &mut SplitMix64, out: &mut Vec<u8>) {
    match dtype {
        Dtype::F32 | Dtype::Bf16 => {
            let v = (r.next_u32() >> 8) as f32 * (1.0 / (1u32 << 23) as f32) - 1.0;
            if dtype == Dtype::F32 {
                out.extend_from_slice(&v.to_le_bytes());
            } else {
                out.extend_from_slice(&((v.to_bits() >> 16) as u16).to_le_bytes());
            }
        }
        Dtype::E4m3 => {
            let sign = r.below(2) as u8;
            let exp = r.below(9) as u8;
            let man = r.below(8) as u8;
            out.push(sign << 7 | exp << 3 | man);
        }
    }
}

fn elements(dtype: Dtype, mut r: SplitMix64, count: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * dtype.size());
    for _ in 0..count {
        push_element(dtype, &mut r, &mut out);
    }
    out
}

/// Weights `W[N,K]` row-major, raw little-endian elements.
pub fn weights(dtype: Dtype, shape: &Shape, seed: u64) -> Vec<u8> {
    elements(dtype, stream(seed, KIND_WEIGHTS, dtype, shape, 0), shape.n * shape.k)
}

/// The anchor row (K elements), the same for every M and position.
pub fn anchor(dtype: Dtype, shape: &Shape, seed: u64) -> Vec<u8> {
    elements(dtype, stream(seed, KIND_ANCHOR, dtype, shape, 0), shape.k)
}

/// The M rows around the anchor, `X[M,K]` row-major before the anchor is
/// written into one of them.
pub fn neighbours(dtype: Dtype, shape: &Shape, m: usize, seed: u64) -> Vec<u8> {
    elements(dtype, stream(seed, KIND_NEIGHBOURS, dtype, shape, m), m * shape.k)
}

fn power_of_two_scales(mut r: SplitMix64, count: usize) -> Vec<f32> {
    // Powers of two 2^-3..2^1: exact to apply, yet different per block, so a
    // wrong scale layout shows up in the reference check.
    (0..count).map(|_| (2f32).powi(r.range_i64(-3, 1) as i32)).collect()
}

/// Weight block scales, logical `[n_block][k_block]`.
pub fn weight_block_scales(shape: &Shape, seed: u64) -> Vec<f32> {
    power_of_two_scales(
        stream(seed, KIND_WEIGHT_SCALES, Dtype::E4m3, shape, 0),
        shape.n_blocks() * shape.k_blocks(),
    )
}

/// The anchor row's 1×128 scales, `[k_block]`.
pub fn anchor_scales(shape: &Shape, seed: u64) -> Vec<f32> {
    power_of_two_scales(
        stream(seed, KIND_ANCHOR_SCALES, Dtype::E4m3, shape, 0),
        shape.k_blocks(),
    )
}

/// The neighbours' 1×128 scales, logical `[row][k_block]`.
pub fn neighbour_scales(shape: &Shape, m: usize, seed: u64) -> Vec<f32> {
    power_of_two_scales(
        stream(seed, KIND_NEIGHBOUR_SCALES, Dtype::E4m3, shape, m),
        m * shape.k_blocks(),
    )
}

/// `BLK128x128_32F` layout for cuBLAS operand A (the weights): K-major,
/// `L4 × ceil(N/128)` with `L4` = K blocks rounded up to a multiple of 4;
/// element `(kb, nb)` at `kb + nb·L4`, padding zero.
pub fn blk128_layout(logical: &[f32], shape: &Shape) -> Vec<f32> {
    let (l, nb) = (shape.k_blocks(), shape.n_blocks());
    let l4 = l.div_ceil(4) * 4;
    let mut out = vec![0f32; l4 * nb];
    for n in 0..nb {
        for k in 0..l {
            out[k + n * l4] = logical[n * l + k];
        }
    }
    out
}

/// `VEC128_32F` layout for cuBLAS operand B (the activations, cuBLAS N =
/// batch M): N-major, shape `M × L`; element `(row, kb)` at `row + kb·M`.
pub fn vec128_layout(logical: &[f32], m: usize, shape: &Shape) -> Vec<f32> {
    let l = shape.k_blocks();
    let mut out = vec![0f32; l * m];
    for row in 0..m {
        for k in 0..l {
            out[row + k * m] = logical[row * l + k];
        }
    }
    out
}

/// The anchor row's output computed in f64 from the generated inputs (and
/// scales): a check that layouts, transposes and scale orders are right,
/// not a model of the library's rounding.
pub fn reference_row(case: CaseId, shape: &Shape, seed: u64) -> Vec<f64> {
    let dt = case.input();
    let es = dt.size();
    let a: Vec<f64> = anchor(dt, shape, seed).chunks(es).map(|b| dt.decode(b)).collect();
    let w = weights(dt, shape, seed);
    let (l, kb) = (shape.k_blocks(), SCALE_BLOCK);
    let (ws, xs) = match case.scaling() {
        Scaling::Vec128Blk128 => (weight_block_scales(shape, seed), anchor_scales(shape, seed)),
        _ => (Vec::new(), Vec::new()),
    };
    (0..shape.n)
        .into_par_iter()
        .map(|j| {
            let row = &w[j * shape.k * es..(j + 1) * shape.k * es];
            match case.scaling() {
                Scaling::Vec128Blk128 => (0..l)
                    .map(|b| {
                        let s: f64 = (b * kb..((b + 1) * kb).min(shape.k))
                            .map(|i| a[i] * dt.decode(&row[i * es..]))
                            .sum();
                        s * ws[(j / kb) * l + b] as f64 * xs[b] as f64
                    })
                    .sum(),
                scaling => {
                    let s: f64 = (0..shape.k).map(|i| a[i] * dt.decode(&row[i * es..])).sum();
                    if scaling == Scaling::Tensor {
                        s * TENSOR_SCALE_W as f64 * TENSOR_SCALE_X as f64
                    } else {
                        s
                    }
                }
            }
        })
        .collect()
}

/// How far a GPU anchor row is from [`reference_row`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReferenceCheck {
    /// The M whose heuristic result was compared.
    pub m: usize,
    pub max_abs_err: f64,
    pub max_abs_ref: f64,
    /// `max_abs_err / max_abs_ref`.
    pub rel: f64,
    pub tolerance: f64,
    pub plausible: bool,
}

pub fn check_reference(case: CaseId, m: usize, row: &[u8], reference: &[f64]) -> ReferenceCheck {
    let dt = case.output();
    let mut max_err = 0f64;
    let mut max_ref = 0f64;
    for (b, r) in row.chunks(dt.size()).zip(reference) {
        let y = dt.decode(b);
        let e = if y.is_finite() { (y - r).abs() } else { f64::INFINITY };
        max_err = max_err.max(e);
        max_ref = max_ref.max(r.abs());
    }
    let rel = if max_ref > 0.0 { max_err / max_ref } else { max_err };
    let tolerance = case.tolerance();
    ReferenceCheck {
        m,
        max_abs_err: max_err,
        max_abs_ref: max_ref,
        rel: if rel.is_finite() { rel } else { f64::MAX },
        tolerance,
        plausible: rel <= tolerance,
    }
}

// ---------------------------------------------------------------------------
// Results.
// ---------------------------------------------------------------------------

/// A cuBLASLt algorithm's configuration, read back attribute by attribute
/// (`cublasLtMatmulAlgoConfigGetAttribute`), plus capabilities where the
/// library answers (`cublasLtMatmulAlgoCapGetAttribute`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlgoConfig {
    pub algo_id: i64,
    pub tile_id: u64,
    pub splitk_num: u64,
    pub reduction_scheme: u64,
    pub cta_swizzling: u64,
    pub custom_option: u64,
    pub stages_id: u64,
    pub inner_shape_id: u64,
    pub cluster_shape_id: u64,
    /// `CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS`.
    pub numerical_impl_flags: Option<u64>,
    /// `CUBLASLT_ALGO_CAP_SPLITK_SUPPORT`.
    pub splitk_support: Option<u64>,
    /// `CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK`.
    pub reduction_scheme_mask: Option<u64>,
}

impl AlgoConfig {
    /// The configuration attributes only (capabilities ignored).
    pub fn same_config(&self, o: &AlgoConfig) -> bool {
        self.key() == o.key()
    }

    fn key(&self) -> [u64; 9] {
        [
            self.algo_id as u64,
            self.tile_id,
            self.splitk_num,
            self.reduction_scheme,
            self.cta_swizzling,
            self.custom_option,
            self.stages_id,
            self.inner_shape_id,
            self.cluster_shape_id,
        ]
    }

    /// `id/tile/stages/splitK/red/swz/custom/inner/cluster`.
    pub fn short(&self) -> String {
        format!(
            "{}/t{}/s{}/k{}/r{}/w{}/c{}/i{}/g{}",
            self.algo_id,
            self.tile_id,
            self.stages_id,
            self.splitk_num,
            self.reduction_scheme,
            self.cta_swizzling,
            self.custom_option,
            self.inner_shape_id,
            self.cluster_shape_id
        )
    }
}

/// The heuristic's top choice at one M.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeuristicPick {
    pub m: usize,
    /// `ok`, or why there was none (e.g. `CUBLAS_STATUS_NOT_SUPPORTED`).
    pub status: String,
    pub config: Option<AlgoConfig>,
    pub workspace_bytes: Option<u64>,
    pub waves_count: Option<f32>,
    /// False if another position at the same M got a different choice.
    pub same_at_all_positions: bool,
}

/// `cublasLtMatmulAlgoCheck` of the pinned algorithm at one M.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PinCheck {
    pub m: usize,
    /// `ok`, or the refusal.
    pub status: String,
    pub workspace_bytes: Option<u64>,
    pub waves_count: Option<f32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PinReport {
    pub pin_m: usize,
    /// What the heuristic chose at `pin_m`.
    pub heuristic_at_pin: AlgoConfig,
    /// The re-initialised algorithm, read back after setting it.
    pub pinned: AlgoConfig,
    /// Whether the re-initialised `cublasLtMatmulAlgo_t` has the same 64
    /// bytes as the heuristic's (false when split-K was changed, or when the
    /// heuristic's struct carries state the attributes do not expose).
    pub reinit_bytes_equal_heuristic: bool,
    pub checks: Vec<PinCheck>,
}

/// Medians of timed runs (CUDA events), microseconds per GEMM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingEntry {
    pub m: usize,
    /// The library's own choice (cuBLAS default, or cuBLASLt heuristic).
    pub heuristic_us: Option<f64>,
    pub pinned_us: Option<f64>,
    /// `heuristic_us / pinned_us`: the pinned algorithm's speed relative
    /// to the heuristic (below 1: the pin is slower).
    pub pinned_speed: Option<f64>,
    pub heuristic_samples_us: Vec<f64>,
    pub pinned_samples_us: Vec<f64>,
    /// Why a variant was not timed.
    pub note: Option<String>,
}

/// Everything recorded for one case at one shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseRun {
    pub case: CaseId,
    pub shape: String,
    pub api: Api,
    pub input: Dtype,
    pub output: Dtype,
    pub scaling: Scaling,
    /// `cublasGetMathMode` of the classic handle (cuBLAS cases).
    pub math_mode: Option<String>,
    pub heuristic: Vec<HeuristicPick>,
    pub pin: Option<PinReport>,
    /// Why there is no pinned algorithm, when there is none.
    pub pin_error: Option<String>,
    pub timings: Vec<TimingEntry>,
    /// The worst anchor row (of all M, positions and variants that ran)
    /// against the f64 reference.
    pub reference_check: Option<ReferenceCheck>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// cuBLAS's default, or the cuBLASLt heuristic's top choice at each M.
    Heuristic,
    /// The cuBLASLt algorithm pinned at `pin_m`.
    Pinned,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Heuristic => "heuristic",
            Variant::Pinned => "pinned",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "why")]
pub enum RowStatus {
    Ok,
    /// No algorithm for this problem (the heuristic returned none).
    Unsupported(String),
    /// The pinned algorithm was refused at this M (never replaced).
    Refused(String),
    /// The GEMM ran but the anchor row is not trustworthy (e.g. unwritten).
    Failed(String),
}

impl RowStatus {
    pub fn short(&self) -> &'static str {
        match self {
            RowStatus::Ok => "ok",
            RowStatus::Unsupported(_) => "unsupported",
            RowStatus::Refused(_) => "refused",
            RowStatus::Failed(_) => "failed",
        }
    }
}

/// One anchor output row in `rows.bin`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowEntry {
    pub case: CaseId,
    pub shape: String,
    pub variant: Variant,
    pub m: usize,
    pub position: String,
    pub row: usize,
    pub status: RowStatus,
    /// Byte offset and length in `rows.bin` (identical rows are stored once).
    pub offset: Option<u64>,
    pub bytes: Option<u64>,
    pub sha256: Option<String>,
}

/// `rows.bin` under construction: identical rows stored once.
#[derive(Default)]
pub struct RowStore {
    pub data: Vec<u8>,
    index: HashMap<Vec<u8>, u64>,
}

impl RowStore {
    /// Stores `row` (or finds it) and returns its offset.
    pub fn put(&mut self, row: &[u8]) -> u64 {
        if let Some(&o) = self.index.get(row) {
            return o;
        }
        let o = self.data.len() as u64;
        self.data.extend_from_slice(row);
        self.index.insert(row.to_vec(), o);
        o
    }

    /// A complete entry for a row that ran.
    #[allow(clippy::too_many_arguments)]
    pub fn entry(
        &mut self,
        case: CaseId,
        shape: &Shape,
        variant: Variant,
        m: usize,
        pos: &Position,
        status: RowStatus,
        row: Option<&[u8]>,
    ) -> RowEntry {
        let (offset, bytes, sha256) = match row {
            Some(r) => (Some(self.put(r)), Some(r.len() as u64), Some(sha256_hex(r))),
            None => (None, None, None),
        };
        RowEntry {
            case,
            shape: shape.name.clone(),
            variant,
            m,
            position: pos.label.clone(),
            row: pos.row,
            status,
            offset,
            bytes,
            sha256,
        }
    }
}

/// One cell of the anchor table: the anchor row at (M, position) against
/// the reference (smallest M that ran).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableCell {
    pub m: usize,
    pub position: String,
    pub row: usize,
    pub status: String,
    pub diff_bytes: Option<u64>,
    pub diff_elems: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseTable {
    pub case: CaseId,
    pub shape: String,
    pub variant: Variant,
    /// The M of the reference row (the smallest M that ran; M=1 unless
    /// the case does not support it).
    pub reference_m: Option<usize>,
    pub cells: Vec<TableCell>,
    pub ok_cells: usize,
    pub differing_cells: usize,
    /// Every cell that ran is byte-identical to the reference (None when
    /// nothing ran).
    pub invariant: Option<bool>,
    /// Pinned tables: the pinned reference row equals the heuristic one.
    pub reference_equals_heuristic: Option<bool>,
}

/// `report.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VendorReport {
    pub schema: u32,
    pub options: VendorOptions,
    /// How the inputs are generated (see `push_element`).
    pub generator: String,
    pub workspace_bytes: usize,
    pub tensor_scales: (f32, f32),
    /// CUDA/cuBLAS environment variables that change results, as set.
    pub environment: BTreeMap<String, String>,
    pub runs: Vec<CaseRun>,
    pub rows: Vec<RowEntry>,
    pub tables: Vec<CaseTable>,
    pub notes: Vec<String>,
}

/// A finished run: the report and the bytes of `rows.bin`.
pub struct VendorRun {
    pub report: VendorReport,
    pub rows_bin: Vec<u8>,
}

pub const GENERATOR: &str = "SplitMix64::for_item(seed, kind<<60 | dtype<<56 | N<<40 | K<<24 | M); \
f32: (u32>>8)*2^-23-1; bf16: top 16 bits of that f32; e4m3: sign, exponent field 0..=8, mantissa 0..7; \
scales: 2^(-3..=1); kinds 1 weights, 2 anchor, 3 neighbours(M), 4 weight scales, 5 anchor scales, \
6 neighbour scales(M); dtype 1 f32, 2 bf16, 3 e4m3 (scales use 3)";

/// Environment variables that change what cuBLAS does.
pub fn environment() -> BTreeMap<String, String> {
    [
        "CUBLAS_WORKSPACE_CONFIG",
        "NVIDIA_TF32_OVERRIDE",
        "CUBLASLT_LOG_LEVEL",
        "CUBLAS_LOGINFO_DBG",
        "CUDA_VISIBLE_DEVICES",
        "CUBLASLT_HEURISTICS_CACHE_CAPACITY",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
    .collect()
}

fn shape_by_name<'a>(shapes: &'a [Shape], name: &str) -> Result<&'a Shape> {
    shapes
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| DeviceError::Capture(format!("unknown shape `{name}`")))
}

fn row_bytes<'a>(e: &RowEntry, data: &'a [u8]) -> Result<Option<&'a [u8]>> {
    match (e.offset, e.bytes) {
        (Some(o), Some(b)) => {
            let (o, b) = (o as usize, b as usize);
            data.get(o..o + b).map(Some).ok_or_else(|| {
                DeviceError::Capture(format!(
                    "{} {} M={} {}: bytes {o}..{} outside rows.bin",
                    e.case.name(),
                    e.variant.name(),
                    e.m,
                    e.position,
                    o + b
                ))
            })
        }
        (None, None) => Ok(None),
        _ => Err(DeviceError::Capture("row entry with half an index".into())),
    }
}

/// Differing bytes and differing elements of two rows of `dtype`.
pub fn row_diff(a: &[u8], b: &[u8], dtype: Dtype) -> (u64, u64) {
    let bytes = a.iter().zip(b).filter(|(x, y)| x != y).count() as u64;
    let elems = a
        .chunks(dtype.size())
        .zip(b.chunks(dtype.size()))
        .filter(|(x, y)| x != y)
        .count() as u64;
    (bytes, elems)
}

/// The anchor tables, derived from the row entries and `rows.bin` alone:
/// one per (shape, case, variant) in order of first appearance.
pub fn derive_tables(rows: &[RowEntry], data: &[u8], shapes: &[Shape]) -> Result<Vec<CaseTable>> {
    let mut keys: Vec<(String, CaseId, Variant)> = Vec::new();
    for r in rows {
        let k = (r.shape.clone(), r.case, r.variant);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let reference = |shape: &str, case: CaseId, variant: Variant| -> Result<Option<(usize, &[u8])>> {
        let mut best: Option<&RowEntry> = None;
        for r in rows
            .iter()
            .filter(|r| r.shape == shape && r.case == case && r.variant == variant && r.status == RowStatus::Ok)
        {
            if best.is_none_or(|b| (r.m, r.row) < (b.m, b.row)) {
                best = Some(r);
            }
        }
        match best {
            None => Ok(None),
            Some(b) => Ok(row_bytes(b, data)?.map(|bytes| (b.m, bytes))),
        }
    };
    let mut tables = Vec::new();
    for (shape_name, case, variant) in keys {
        let shape = shape_by_name(shapes, &shape_name)?;
        let out = case.output();
        let reference_row = reference(&shape_name, case, variant)?;
        let mut cells = Vec::new();
        for r in rows
            .iter()
            .filter(|r| r.shape == shape_name && r.case == case && r.variant == variant)
        {
            let bytes = row_bytes(r, data)?;
            if let Some(b) = bytes {
                if b.len() != shape.n * out.size() {
                    return Err(DeviceError::Capture(format!(
                        "{} M={} {}: row of {} bytes, expected {}",
                        case.name(),
                        r.m,
                        r.position,
                        b.len(),
                        shape.n * out.size()
                    )));
                }
            }
            let (diff_bytes, diff_elems) = match (&r.status, bytes, reference_row) {
                (RowStatus::Ok, Some(b), Some((_, rb))) => {
                    let (db, de) = row_diff(rb, b, out);
                    (Some(db), Some(de))
                }
                _ => (None, None),
            };
            cells.push(TableCell {
                m: r.m,
                position: r.position.clone(),
                row: r.row,
                status: r.status.short().into(),
                diff_bytes,
                diff_elems,
            });
        }
        let ok_cells = cells.iter().filter(|c| c.diff_bytes.is_some()).count();
        let differing_cells = cells.iter().filter(|c| c.diff_bytes.is_some_and(|d| d > 0)).count();
        let reference_equals_heuristic = if variant == Variant::Pinned {
            match (reference_row, reference(&shape_name, case, Variant::Heuristic)?) {
                (Some((pm, p)), Some((hm, h))) if pm == hm => Some(p == h),
                _ => None,
            }
        } else {
            None
        };
        tables.push(CaseTable {
            case,
            shape: shape_name,
            variant,
            reference_m: reference_row.map(|r| r.0),
            cells,
            ok_cells,
            differing_cells,
            invariant: (ok_cells > 0).then_some(differing_cells == 0),
            reference_equals_heuristic,
        });
    }
    Ok(tables)
}

// ---------------------------------------------------------------------------
// Markdown.
// ---------------------------------------------------------------------------

fn cell_text(cells: &[&TableCell]) -> String {
    if cells.is_empty() {
        return " ".into();
    }
    if cells.iter().all(|c| c.diff_bytes == Some(0)) {
        return "=".into();
    }
    if cells
        .iter()
        .all(|c| c.diff_bytes.is_none() && c.status == cells[0].status)
    {
        return cells[0].status.clone();
    }
    cells
        .iter()
        .map(|c| match c.diff_elems {
            Some(0) => "=".to_string(),
            Some(e) => e.to_string(),
            None => c.status.clone(),
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The report as markdown: per shape, a matrix of M × (case, variant) with
/// `=` where the anchor row is byte-identical to the reference at every
/// position and otherwise the number of differing output elements per
/// position; then the heuristic's choices, the pins and the timings.
pub fn render_markdown(report: &VendorReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let o = &report.options;
    let _ = writeln!(
        s,
        "## Vendor GEMM anchor-row probe\n\nSeed {:#x}; positions {}; pinned at M={}; workspace {} MiB. \
Cells: `=` the anchor output row is byte-identical to the reference row (smallest M that ran, \
position first) at every position; otherwise differing output elements per position \
({}), `unsupported` (no algorithm), `refused` (pinned algorithm refused by AlgoCheck, not replaced), \
`failed`.\n",
        o.seed,
        if o.all_positions { "first/mid/last" } else { "mid" },
        o.pin_m,
        report.workspace_bytes >> 20,
        if o.all_positions {
            "first / mid / last, merged where they coincide"
        } else {
            "mid"
        },
    );
    for shape in &o.shapes {
        let tables: Vec<&CaseTable> = report.tables.iter().filter(|t| t.shape == shape.name).collect();
        if tables.is_empty() {
            continue;
        }
        let _ = writeln!(s, "### N={} K={}\n", shape.n, shape.k);
        let mut head = "| M |".to_string();
        let mut rule = "|---:|".to_string();
        for t in &tables {
            let _ = write!(head, " {} {} |", t.case.name(), t.variant.name());
            rule.push_str(":---:|");
        }
        let _ = writeln!(s, "{head}\n{rule}");
        for &m in &o.m_list {
            let _ = write!(s, "| {m} |");
            for t in &tables {
                let cells: Vec<&TableCell> = t.cells.iter().filter(|c| c.m == m).collect();
                let _ = write!(s, " {} |", cell_text(&cells));
            }
            s.push('\n');
        }
        let _ = write!(s, "| **invariant** |");
        for t in &tables {
            let v = match t.invariant {
                Some(true) => "**yes**".to_string(),
                Some(false) => format!("no ({}/{})", t.differing_cells, t.ok_cells),
                None => "n/a".into(),
            };
            let _ = write!(s, " {v} |");
        }
        let _ = write!(s, "\n| reference M |");
        for t in &tables {
            let v = t.reference_m.map(|m| m.to_string()).unwrap_or_else(|| "-".into());
            let extra = match t.reference_equals_heuristic {
                Some(true) => " (= heuristic)",
                Some(false) => " (≠ heuristic)",
                None => "",
            };
            let _ = write!(s, " {v}{extra} |");
        }
        s.push_str("\n\n");
    }

    let _ = writeln!(
        s,
        "### cuBLASLt algorithm choices\n\nConfig as `id/t tile/s stages/k splitK/r reduction/w swizzle/c custom/i inner shape/g cluster shape`; \
`*` marks M where the heuristic's config equals the pinned one.\n"
    );
    for run in report.runs.iter().filter(|r| r.api == Api::CublasLt) {
        let _ = writeln!(s, "**{} ({})**\n", run.case.name(), run.shape);
        match (&run.pin, &run.pin_error) {
            (Some(p), _) => {
                let _ = writeln!(
                    s,
                    "Pinned at M={}: heuristic {} → pinned {} (re-initialised bytes {} the heuristic's; numerical flags {}).\n",
                    p.pin_m,
                    p.heuristic_at_pin.short(),
                    p.pinned.short(),
                    if p.reinit_bytes_equal_heuristic { "equal" } else { "differ from" },
                    p.pinned
                        .numerical_impl_flags
                        .map(|f| format!("{f:#x}"))
                        .unwrap_or_else(|| "?".into())
                );
            }
            (None, Some(e)) => {
                let _ = writeln!(s, "No pinned algorithm: {e}\n");
            }
            _ => {}
        }
        let _ = writeln!(
            s,
            "| M | heuristic | ws KiB | waves | pinned check |\n|---:|---|---:|---:|---|"
        );
        for h in &run.heuristic {
            let same = match (&h.config, &run.pin) {
                (Some(c), Some(p)) if c.same_config(&p.pinned) => "*",
                _ => "",
            };
            let cfg = h
                .config
                .as_ref()
                .map(|c| format!("{}{same}", c.short()))
                .unwrap_or_else(|| h.status.clone());
            let check = run
                .pin
                .as_ref()
                .and_then(|p| p.checks.iter().find(|c| c.m == h.m))
                .map(|c| c.status.clone())
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                "| {} | {}{} | {} | {} | {} |",
                h.m,
                cfg,
                if h.same_at_all_positions {
                    ""
                } else {
                    " (differs by position!)"
                },
                h.workspace_bytes
                    .map(|w| (w >> 10).to_string())
                    .unwrap_or_else(|| "-".into()),
                h.waves_count.map(|w| format!("{w:.2}")).unwrap_or_else(|| "-".into()),
                check
            );
        }
        s.push('\n');
    }

    let _ = writeln!(
        s,
        "### Timing (median of {} samples × {} launches, CUDA events, µs per GEMM)\n\n\
`pinned speed` = heuristic time / pinned time (below 1: the pin is slower).\n\n\
| case | shape | M | heuristic µs | pinned µs | pinned speed |\n|---|---|---:|---:|---:|---:|",
        o.timing_reps, o.timing_inner
    );
    let f = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "-".into());
    for run in &report.runs {
        for t in &run.timings {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {}{} |",
                run.case.name(),
                run.shape,
                t.m,
                f(t.heuristic_us, 1),
                f(t.pinned_us, 1),
                f(t.pinned_speed, 3),
                t.note.as_ref().map(|n| format!(" ({n})")).unwrap_or_default()
            );
        }
    }
    s.push_str("\n### Reference check (anchor row vs f64 from the generated inputs)\n\n| case | shape | M | max rel err | tolerance | plausible |\n|---|---|---:|---:|---:|---|\n");
    for run in &report.runs {
        if let Some(c) = &run.reference_check {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2e} | {:.0e} | {} |",
                run.case.name(),
                run.shape,
                c.m,
                c.rel,
                c.tolerance,
                if c.plausible { "yes" } else { "**NO**" }
            );
        }
    }
    if !report.notes.is_empty() {
        s.push_str("\n### Notes\n\n");
        for n in &report.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

/// Median of the samples (mean of the two middle ones for an even count).
pub fn median(samples: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let h = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[h]
    } else {
        (v[h - 1] + v[h]) / 2.0
    })
}

/// The pinned-vs-heuristic speed ratios, one line per (case, shape, M), for
/// docs/PERFORMANCE.md.
pub fn pinned_ratios(report: &VendorReport) -> Vec<(CaseId, String, usize, f64)> {
    let mut out = Vec::new();
    for run in &report.runs {
        for t in &run.timings {
            if let Some(r) = t.pinned_speed {
                out.push((run.case, run.shape.clone(), t.m, r));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Captures.
// ---------------------------------------------------------------------------

/// Writes `report.json`, `rows.bin`, `tables.md` (the markdown rendering)
/// and the manifest into `dir`.
pub fn write_capture(dir: &Path, run: &VendorRun, device: serde_json::Value, notes: Vec<String>) -> Result<Manifest> {
    let mut w = CaptureWriter::create(dir)?;
    w.put("rows.bin", &run.rows_bin)?;
    w.put_json("report.json", &run.report)?;
    w.put("tables.md", render_markdown(&run.report).as_bytes())?;
    w.finish("vendor", device, notes)
}

/// What [`replay`] found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VendorReplayReport {
    pub rows_checked: usize,
    pub tables_checked: usize,
    /// Every inconsistency found (empty when the capture is consistent).
    pub mismatches: Vec<String>,
    /// One line per table: case, shape, variant, invariant or not.
    pub summary: Vec<String>,
}

impl VendorReplayReport {
    pub fn consistent(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// Re-derives the anchor tables from the stored rows and checks them
/// against the stored tables. File integrity (manifest SHA-256) is checked
/// on read and is an error; inconsistencies are listed in the report.
/// There is no CPU model of cuBLAS: this checks the capture, not the GPU.
pub fn replay(capture: &Capture) -> Result<VendorReplayReport> {
    if capture.manifest.suite != "vendor" {
        return Err(DeviceError::Capture(format!(
            "{} is a `{}` capture, not `vendor`",
            capture.dir.display(),
            capture.manifest.suite
        )));
    }
    let report: VendorReport = capture.read_json("report.json")?;
    let data = capture.read("rows.bin")?;
    let mut mismatches = Vec::new();
    if report.schema != SCHEMA {
        mismatches.push(format!("schema {} (this build reads {SCHEMA})", report.schema));
    }
    for e in &report.rows {
        let b = row_bytes(e, &data)?;
        match (b, &e.sha256) {
            (Some(b), Some(h)) if &sha256_hex(b) != h => mismatches.push(format!(
                "{} {} {} M={} {}: row digest differs",
                e.shape,
                e.case.name(),
                e.variant.name(),
                e.m,
                e.position
            )),
            (Some(_), None) | (None, Some(_)) => mismatches.push(format!(
                "{} {} M={} {}: digest without row or row without digest",
                e.shape,
                e.case.name(),
                e.m,
                e.position
            )),
            _ => {}
        }
        if (e.status == RowStatus::Ok) != b.is_some() {
            mismatches.push(format!(
                "{} {} M={} {}: status {} but {} row",
                e.shape,
                e.case.name(),
                e.m,
                e.position,
                e.status.short(),
                if b.is_some() { "a" } else { "no" }
            ));
        }
    }
    let tables = derive_tables(&report.rows, &data, &report.options.shapes)?;
    if tables.len() != report.tables.len() {
        mismatches.push(format!(
            "{} tables derived, {} stored",
            tables.len(),
            report.tables.len()
        ));
    }
    for (d, t) in tables.iter().zip(&report.tables) {
        if d != t {
            mismatches.push(format!(
                "table {} {} {}: stored cells differ from the rows",
                t.shape,
                t.case.name(),
                t.variant.name()
            ));
        }
    }
    let summary = tables
        .iter()
        .map(|t| {
            format!(
                "{} {} {}: {}",
                t.shape,
                t.case.name(),
                t.variant.name(),
                match t.invariant {
                    Some(true) => format!("invariant ({} rows)", t.ok_cells),
                    Some(false) => format!("{} of {} rows differ", t.differing_cells, t.ok_cells),
                    None => "nothing ran".into(),
                }
            )
        })
        .collect();
    Ok(VendorReplayReport {
        rows_checked: report.rows.len(),
        tables_checked: tables.len(),
        mismatches,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_merge_and_quick() {
        let p = positions(1, true);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].label, "first/mid/last");
        let p = positions(2, true);
        assert_eq!(
            p.iter().map(|p| (p.label.as_str(), p.row)).collect::<Vec<_>>(),
            [("first", 0), ("mid/last", 1)]
        );
        let p = positions(17, true);
        assert_eq!(p.iter().map(|p| p.row).collect::<Vec<_>>(), [0, 8, 16]);
        assert_eq!(
            positions(17, false),
            vec![Position {
                label: "mid".into(),
                row: 8
            }]
        );
    }

    #[test]
    fn generation_is_deterministic_and_m_dependent() {
        let s = Shape::new(32, 256);
        for dt in [Dtype::F32, Dtype::Bf16, Dtype::E4m3] {
            assert_eq!(weights(dt, &s, 1), weights(dt, &s, 1));
            assert_ne!(weights(dt, &s, 1), weights(dt, &s, 2));
            assert_eq!(anchor(dt, &s, 1).len(), s.k * dt.size());
            let n4 = neighbours(dt, &s, 4, 1);
            let n5 = neighbours(dt, &s, 5, 1);
            assert_eq!(n4, neighbours(dt, &s, 4, 1));
            // Different M, different neighbours (not a prefix of each other).
            assert_ne!(&n4[..], &n5[..n4.len()]);
            assert_ne!(anchor(dt, &s, 1), n4[..s.k * dt.size()]);
            for b in weights(dt, &s, 3).chunks(dt.size()) {
                let v = dt.decode(b);
                assert!(v.is_finite() && v.abs() < 4.0, "{dt:?} {v}");
            }
        }
        // bf16 values are f32 values truncated: exact, and not all on a short grid.
        let b = weights(Dtype::Bf16, &s, 5);
        assert!(b.chunks(2).any(|c| c[0] & 1 == 1));
        // e4m3 codes never NaN.
        assert!(weights(Dtype::E4m3, &s, 9).iter().all(|&c| c & 0x7F != 0x7F));
    }

    #[test]
    fn scale_layouts() {
        let s = Shape::new(256, 384); // 2 n-blocks, 3 k-blocks (L4 = 4)
        let logical: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let l = blk128_layout(&logical, &s);
        assert_eq!(l, vec![0., 1., 2., 0., 3., 4., 5., 0.]);
        let act: Vec<f32> = (0..6).map(|i| i as f32).collect(); // 2 rows × 3 k-blocks
        assert_eq!(vec128_layout(&act, 2, &s), vec![0., 3., 1., 4., 2., 5.]);
        assert!(weight_block_scales(&s, 1)
            .iter()
            .all(|&x| [0.125, 0.25, 0.5, 1.0, 2.0].contains(&x)));
    }

    #[test]
    fn reference_row_matches_a_direct_sum() {
        let s = Shape::new(16, 256);
        let r = reference_row(CaseId::LtF32, &s, 4);
        let a = anchor(Dtype::F32, &s, 4);
        let w = weights(Dtype::F32, &s, 4);
        let j = 7;
        let direct: f64 = (0..s.k)
            .map(|i| Dtype::F32.decode(&a[i * 4..]) * Dtype::F32.decode(&w[(j * s.k + i) * 4..]))
            .sum();
        assert_eq!(r[j], direct);
        let t = reference_row(CaseId::LtFp8Tensor, &s, 4);
        let u = reference_row(CaseId::LtFp8Vec128Blk128, &s, 4);
        assert_eq!(t.len(), 16);
        assert_ne!(t, u);
        // A row equal to the reference (rounded to f32) passes the check; a scaled one fails.
        let row: Vec<u8> = r.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
        assert!(check_reference(CaseId::LtF32, 1, &row, &r).plausible);
        let bad: Vec<u8> = r.iter().flat_map(|v| (*v as f32 * 1.01).to_le_bytes()).collect();
        assert!(!check_reference(CaseId::LtF32, 1, &bad, &r).plausible);
    }

    #[test]
    fn row_diff_counts_bytes_and_elements() {
        let a = [0u8, 0, 0, 0, 1, 2, 3, 4];
        let b = [0u8, 1, 0, 0, 1, 2, 3, 5];
        assert_eq!(row_diff(&a, &b, Dtype::F32), (2, 2));
        assert_eq!(row_diff(&a, &b, Dtype::Bf16), (2, 2));
        assert_eq!(row_diff(&a, &a, Dtype::Bf16), (0, 0));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn options_validate() {
        VendorOptions::full().validate().unwrap();
        VendorOptions::quick().validate().unwrap();
        let mut o = VendorOptions::quick();
        o.pin_m = 4096;
        assert!(o.validate().is_err());
    }
}
