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

use super::capture::{Capture, CaptureWriter, Manifest};
use super::{DeviceError, Result};
use crate::io::sha256_hex;
use crate::order::InType;
use crate::rng::SplitMix64;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

#[cfg(feature = "cuda")]
pub(crate) mod blas;
mod capture;
mod cases;
mod compare;
mod replay;
mod report;
#[cfg(feature = "cuda")]
pub(crate) mod run;

/// The suite name of vendor captures (`manifest.json`).
pub const SUITE: &str = "vendor";

pub use capture::*;
pub use cases::*;
pub use compare::*;
pub use replay::*;
pub use report::*;
#[cfg(feature = "cuda")]
pub use run::run;

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

/// The exact value of one little-endian element of type `t` (the
/// vendor cases' inputs and outputs: f32, bf16, e4m3; f16 and e5m2 read
/// as their two- and one-byte codes).
pub fn decode_le(t: InType, b: &[u8]) -> f64 {
    match t.format() {
        None => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        Some(f) if t.bytes() == 2 => f.decode_f64(u16::from_le_bytes([b[0], b[1]])),
        Some(f) => f.decode_f64(b[0] as u16),
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

    pub fn input(self) -> InType {
        match self {
            CaseId::Sgemm | CaseId::LtF32 => InType::F32,
            CaseId::GemmexBf16 | CaseId::LtBf16 => InType::Bf16,
            CaseId::LtFp8Tensor | CaseId::LtFp8Vec128Blk128 => InType::E4M3,
        }
    }

    pub fn output(self) -> InType {
        match self {
            CaseId::Sgemm | CaseId::LtF32 => InType::F32,
            _ => InType::Bf16,
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
            InType::F32 => 1e-5,
            _ if self.input() == InType::E4M3 => 2e-2,
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
        for dt in [InType::F32, InType::Bf16, InType::E4M3] {
            assert_eq!(weights(dt, &s, 1), weights(dt, &s, 1));
            assert_ne!(weights(dt, &s, 1), weights(dt, &s, 2));
            assert_eq!(anchor(dt, &s, 1).len(), s.k * dt.bytes());
            let n4 = neighbours(dt, &s, 4, 1);
            let n5 = neighbours(dt, &s, 5, 1);
            assert_eq!(n4, neighbours(dt, &s, 4, 1));
            // Different M, different neighbours (not a prefix of each other).
            assert_ne!(&n4[..], &n5[..n4.len()]);
            assert_ne!(anchor(dt, &s, 1), n4[..s.k * dt.bytes()]);
            for b in weights(dt, &s, 3).chunks(dt.bytes()) {
                let v = decode_le(dt, b);
                assert!(v.is_finite() && v.abs() < 4.0, "{dt:?} {v}");
            }
        }
        // bf16 values are f32 values truncated: exact, and not all on a short grid.
        let b = weights(InType::Bf16, &s, 5);
        assert!(b.chunks(2).any(|c| c[0] & 1 == 1));
        // e4m3 codes never NaN.
        assert!(weights(InType::E4M3, &s, 9).iter().all(|&c| c & 0x7F != 0x7F));
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
        let a = anchor(InType::F32, &s, 4);
        let w = weights(InType::F32, &s, 4);
        let j = 7;
        let direct: f64 = (0..s.k)
            .map(|i| decode_le(InType::F32, &a[i * 4..]) * decode_le(InType::F32, &w[(j * s.k + i) * 4..]))
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
        assert_eq!(row_diff(&a, &b, InType::F32), (2, 2));
        assert_eq!(row_diff(&a, &b, InType::Bf16), (2, 2));
        assert_eq!(row_diff(&a, &a, InType::Bf16), (0, 0));
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
