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

use super::capture::Capture;
use super::conform::row_digest;
use super::replay::{Replay, ReplayOptions, ReplayOutcome};
use super::{DeviceError, Result};
use crate::op::{generate, run_op, GenOpts, Inputs, OpOutput, OpSpec, X2Scales};
use serde::{Deserialize, Serialize};

/// The suite name of collective captures.
pub const SUITE: &str = "collective";

/// One two-GPU case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollectiveCase {
    pub name: String,
    /// The spec (preset with overrides, or a full spec) as given.
    pub spec: serde_json::Value,
    pub seed: u64,
    pub x2_scales: X2Scales,
}

impl CollectiveCase {
    pub fn resolve(&self) -> Result<OpSpec> {
        OpSpec::from_value(self.spec.clone()).map_err(|e| DeviceError::Refused(format!("{}: {e}", self.name)))
    }

    pub fn inputs(&self, spec: &OpSpec) -> Inputs {
        generate(spec, &GenOpts::new(self.seed).x2(self.x2_scales))
    }

    pub fn model(&self) -> Result<OpOutput> {
        let spec = self.resolve()?;
        run_op(&spec, &self.inputs(&spec)).map_err(|e| DeviceError::Refused(format!("{}: model: {e}", self.name)))
    }
}

/// The cases of the two-GPU run: both AllGatherMatmul presets with paths a
/// Hopper kernel realises, with identity and K-varying x2 scales, and a
/// MatmulAllReduce.
pub fn default_cases(world: usize) -> Vec<CollectiveCase> {
    use serde_json::json;
    let shape = json!({"world_size": world, "m_per_rank": 64, "k": 1024, "n": 256});
    let with = |base: serde_json::Value, extra: serde_json::Value| {
        let mut v = shape.clone();
        for (k, x) in base.as_object().unwrap().iter().chain(extra.as_object().unwrap()) {
            v[k] = x.clone();
        }
        v
    };
    let mut cases = Vec::new();
    let paths = [
        (
            "fma",
            json!({"order": "fma;scale=dequant", "scale_point": "dequant"}),
            json!({"order": "fma;scale=dequant", "scale_point": "requant:e4m3"}),
        ),
        (
            "wgmma-promote",
            json!({"order": "hopper-fp8-wgmma;promote=32;scale=block", "scale_point": "block"}),
            json!({"order": "hopper-fp8-wgmma;promote=32;scale=block", "scale_point": "requant:e4m3"}),
        ),
    ];
    for (pname, local, gather) in &paths {
        for x2 in [X2Scales::Identity, X2Scales::KVarying] {
            let tag = match x2 {
                X2Scales::Identity => "id",
                X2Scales::KConstant => "kconst",
                X2Scales::KVarying => "kvar",
            };
            cases.push(CollectiveCase {
                name: format!("agmm-v2-prefix/{pname}/{tag}"),
                spec: with(
                    json!({"preset": "agmm-v2-prefix"}),
                    json!({"local": local, "gather": gather}),
                ),
                seed: 7,
                x2_scales: x2,
            });
            cases.push(CollectiveCase {
                name: format!("agmm-v2-fixed/{pname}/{tag}"),
                spec: with(json!({"preset": "agmm-v2-fixed"}), json!({"local": local})),
                seed: 7,
                x2_scales: x2,
            });
        }
    }
    for kind in ["fixed", "ring"] {
        cases.push(CollectiveCase {
            name: format!("mmar-{kind}/hopper-bf16"),
            spec: json!({"preset": format!("mmar-{kind}"), "world_size": world, "m": 64, "k": 1024, "n": 256}),
            seed: 11,
            x2_scales: X2Scales::Identity,
        });
    }
    // NCCL's reduce-scatter against the ring model; from WS 3 on the run
    // names the order of every element run (`reduction_orders`)
    cases.push(CollectiveCase {
        name: "mmrs-ring/hopper-bf16".into(),
        spec: json!({"preset": "mmrs-ring", "world_size": world, "m": 64, "k": 1024, "n": 256}),
        seed: 11,
        x2_scales: X2Scales::Identity,
    });
    cases
}

/// The cases of the sequential one-GPU run at world size `world`: the
/// AllGatherMatmul cases of [`default_cases`] (both presets, both path
/// orders, identity and K-varying x2 scales) with 128 rows in all
/// (`M_per_rank = 128 / world`), and no MatmulAllReduce (its reduction
/// order is NCCL's own and is not emulated).
pub fn sequential_cases(world: usize) -> Vec<CollectiveCase> {
    let mpr = (128 / world.max(1)).max(1);
    default_cases(world)
        .into_iter()
        .filter(|c| c.name.starts_with("agmm-"))
        .map(|mut c| {
            c.spec["m_per_rank"] = serde_json::json!(mpr);
            c
        })
        .collect()
}

/// Names the rank order behind each rank's reduced output: the partials
/// (`[rank][element]`, as summed) and each rank's output (the whole sum for
/// an all-reduce, the rank's `1/WS` part for a reduce-scatter) are cut by
/// `explain::reduction::segments` over every serial order and the tree
/// into runs of elements one order reproduces; one line per run:
/// `rank R: elements A..B: NAMES` (`ring@c`, `fixed`, `tree`, or a rank
/// list; `+N more` when several computations reproduce the run, `none`
/// when no candidate does).
pub fn reduction_orders(partials: &[Vec<f32>], outputs: &[Vec<f32>], scatter: bool) -> Vec<String> {
    use crate::explain::reduction::{candidates, segments};
    use crate::op::reduce::Sum;
    let ws = partials.len();
    let cands = candidates(ws, true);
    let add = |x: f32, y: f32| Sum::F32.add(x, y);
    let mut lines = Vec::new();
    for (r, out) in outputs.iter().enumerate() {
        let off = if scatter { r * out.len() } else { 0 };
        let parts: Vec<&[f32]> = partials.iter().map(|p| &p[off..off + out.len()]).collect();
        for sg in segments(&parts, out, &cands, &add) {
            let names = match sg.matches.first() {
                None => "none".to_string(),
                Some(&i) => {
                    let mut t = cands[i].names(ws).join(" = ");
                    if sg.matches.len() > 1 {
                        t.push_str(&format!(" (+{} more)", sg.matches.len() - 1));
                    }
                    t
                }
            };
            lines.push(format!("rank {r}: elements {}..{}: {names}", sg.start, sg.end));
        }
    }
    lines
}

/// The global rows whose copies differ across ranks, for ops where every
/// rank holds every row; empty for a reduce-scatter (each rank holds other
/// rows: there are no copies to compare).
pub fn op_cross_rank_differences(spec: &OpSpec, per_rank: &[Vec<f32>], n: usize) -> Vec<usize> {
    match spec {
        OpSpec::MatmulReduceScatter(_) => Vec::new(),
        _ => cross_rank_differences(per_rank, n),
    }
}

/// Global rows whose bytes differ between ranks (`M` rows per rank).
pub fn cross_rank_differences(per_rank: &[Vec<f32>], n: usize) -> Vec<usize> {
    let rows = per_rank.first().map_or(0, |r| r.len() / n.max(1));
    (0..rows)
        .filter(|&g| {
            let first = &per_rank[0][g * n..(g + 1) * n];
            per_rank[1..].iter().any(|r| {
                r[g * n..(g + 1) * n]
                    .iter()
                    .zip(first)
                    .any(|(a, b)| a.to_bits() != b.to_bits())
            })
        })
        .collect()
}

/// The result of one case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollectiveRecord {
    pub case: CollectiveCase,
    pub ranks: usize,
    pub rows: usize,
    pub n: usize,
    /// Elements where a rank's GPU output differs from the model (NaN as a class).
    pub mismatches: usize,
    /// Per rank: 16 hex digits per row (`conform::row_digest`).
    pub gpu_row_digests: Vec<String>,
    /// Global rows whose bytes differ across ranks, on the GPU.
    pub gpu_cross_rank_rows: Vec<usize>,
    /// The same, from the CPU model.
    pub model_cross_rank_rows: Vec<usize>,
    /// The op's path of each row on each rank, from the model's provenance.
    pub paths: Vec<String>,
    /// Reduce ops at WS >= 3: per rank, each run of output elements and
    /// the rank orders reproducing it ([`reduction_orders`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reduction_orders: Vec<String>,
    pub notes: Vec<String>,
}

impl CollectiveRecord {
    pub fn verdict(rows: &[usize]) -> &'static str {
        if rows.is_empty() {
            "PASS (rank-invariant)"
        } else {
            "FAIL (rows differ across ranks)"
        }
    }
}

/// The run's report (`collective/cases.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollectiveReport {
    pub records: Vec<CollectiveRecord>,
    /// NCCL's version code; 0 when no NCCL was involved.
    pub nccl_version: i32,
    /// The ranks ran one after another on one GPU, the all-gather a host
    /// copy (`mxbi device collective --sequential`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sequential: bool,
}

impl CollectiveReport {
    pub fn table(&self) -> String {
        let mut s = String::from(
            "| case | ranks | rows x N | GPU vs model mismatches | cross-rank (GPU) | cross-rank (model) |\n|---|---:|---|---:|---|---|\n",
        );
        for r in &self.records {
            s.push_str(&format!(
                "| {} | {} | {} x {} | {} | {} ({} rows) | {} ({} rows) |\n",
                r.case.name,
                r.ranks,
                r.rows,
                r.n,
                r.mismatches,
                CollectiveRecord::verdict(&r.gpu_cross_rank_rows),
                r.gpu_cross_rank_rows.len(),
                CollectiveRecord::verdict(&r.model_cross_rank_rows),
                r.model_cross_rank_rows.len()
            ));
        }
        s
    }
}

/// Replay: per case, the model's rows must have the GPU's digests on every
/// rank and its cross-rank verdict must equal the GPU's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CollectiveReplayReport {
    pub cases: usize,
    pub rows_checked: usize,
    /// (case name, rank, row) whose model digest differs from the GPU's.
    pub row_mismatches: Vec<(String, usize, usize)>,
    /// Cases whose model verdict differs from the GPU verdict.
    pub verdict_mismatches: Vec<String>,
}

/// The collective suite's CPU replay: every rank row and cross-rank verdict.
pub struct Suite;

impl Replay for Suite {
    fn suite(&self) -> &'static str {
        SUITE
    }

    /// Fails on every rank row and every verdict that differs from the GPU.
    fn replay(&self, capture: &Capture, _: &ReplayOptions) -> Result<ReplayOutcome> {
        let r = replay(capture)?;
        Ok(ReplayOutcome {
            summary: format!(
                "{} cases, {} rank rows replayed, {} rows and {} verdicts differ from the GPU",
                r.cases,
                r.rows_checked,
                r.row_mismatches.len(),
                r.verdict_mismatches.len()
            ),
            details: Vec::new(),
            problems: Vec::new(),
            failed: r.row_mismatches.len() + r.verdict_mismatches.len(),
        })
    }
}

pub fn replay(capture: &Capture) -> Result<CollectiveReplayReport> {
    let report: CollectiveReport = capture.read_json("cases.json")?;
    let mut out = CollectiveReplayReport::default();
    for rec in &report.records {
        let model = rec.case.model()?;
        if model.per_rank.len() != rec.gpu_row_digests.len() {
            return Err(DeviceError::Capture(format!("{}: rank count differs", rec.case.name)));
        }
        for (r, (m, d)) in model.per_rank.iter().zip(&rec.gpu_row_digests).enumerate() {
            if d.len() != 16 * m.rows {
                return Err(DeviceError::Capture(format!("{}: digest length", rec.case.name)));
            }
            for row in 0..m.rows {
                out.rows_checked += 1;
                if format!("{:016x}", row_digest(m.row(row))) != d[16 * row..16 * row + 16] {
                    out.row_mismatches.push((rec.case.name.clone(), r, row));
                }
            }
        }
        let per: Vec<Vec<f32>> = model.per_rank.iter().map(|r| r.data.clone()).collect();
        if op_cross_rank_differences(&rec.case.resolve()?, &per, rec.n) != rec.gpu_cross_rank_rows {
            out.verdict_mismatches.push(rec.case.name.clone());
        }
        out.cases += 1;
    }
    Ok(out)
}

#[cfg(feature = "nccl")]
pub use two_gpu::run;

#[cfg(feature = "cuda")]
pub use one_gpu::run_sequential;

/// The GPU side of AllGatherMatmul shared by the NCCL run and the
/// sequential one-GPU run: x2 as the kernels read it, the plans of the
/// paths, and one rank's output from its gathered x1.
#[cfg(feature = "cuda")]
mod agmm_gpu {
    use super::*;
    use crate::device::codegen::{Backend16, GpuPlan};
    use crate::device::exec::{gemm_on_gpu, GemmOperands, KernelCache};
    use crate::device::gpu::{driver_err, Arch, Gpu};
    use crate::format::Format;
    use crate::op::agmm::{AgmmSpec, PathSpec, ScalePoint, X2Layout};
    use cudarc::driver::{LaunchConfig, PushKernelArg};

    const REQUANT_SRC: &str = r#"
#include <cuda_fp8.h>
typedef unsigned char u8;
__device__ float e4m3_value(u8 c) {
    int s = c >> 7, E = (c >> 3) & 15, f = c & 7;
    if (E == 15 && f == 7) return __uint_as_float(0x7fffffffu);
    float m = E == 0 ? (float)f * 0.001953125f : __uint_as_float((u32)(E + 120) << 23) * (1.0f + f * 0.125f);
    return s ? -m : m;
}
// x2 as Bt [N][K] codes, scales [N][K/32]; per column j: sref = max scale,
// element -> RNE-saturating e4m3 of value * 2^(scale - sref) (exact in f32
// for the scale spreads used), every block's scale -> sref.
extern "C" __global__ void requant_e4m3(const u8* codes, const u8* scales, u8* out_codes, u8* out_scales, int N, int K) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    int kb = K / 32;
    int sref = 0;
    for (int b = 0; b < kb; ++b) sref = max(sref, (int)scales[j * kb + b]);
    for (int k = 0; k < K; ++k) {
        int d = sref - (int)scales[j * kb + k / 32];
        float v = e4m3_value(codes[(long long)j * K + k]) * __uint_as_float((u32)(127 - d) << 23);
        out_codes[(long long)j * K + k] = (u8)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    }
    for (int b = 0; b < kb; ++b) out_scales[j * kb + b] = (u8)sref;
}
"#;

    fn source_requant() -> String {
        format!("typedef unsigned int u32;\n{REQUANT_SRC}")
    }

    /// x2 `[K][N]` (kn) or `[N][K]` (nk) codes and scales, as Bt `[N][K]`
    /// and `[N][K/32]`.
    fn x2_nk(spec: &AgmmSpec, codes: &[u8], scales: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let (k, n, kb) = (spec.k, spec.n, spec.k / 32);
        match spec.x2_layout {
            X2Layout::Nk => (codes.to_vec(), scales.to_vec()),
            X2Layout::Kn => {
                let mut c = vec![0u8; n * k];
                let mut s = vec![0u8; n * kb];
                for kk in 0..k {
                    for j in 0..n {
                        c[j * k + kk] = codes[kk * n + j];
                    }
                }
                for b in 0..kb {
                    for j in 0..n {
                        s[j * kb + b] = scales[b * n + j];
                    }
                }
                (c, s)
            }
        }
    }

    fn plan_for(path: &PathSpec) -> Result<GpuPlan> {
        let order = path.order.parse().map_err(|e| DeviceError::Refused(format!("{e}")))?;
        match path.scale_point {
            ScalePoint::Dequant | ScalePoint::Block | ScalePoint::Requant(Format::E4M3) => {}
            sp => {
                return Err(DeviceError::Refused(format!(
                    "scale point `{sp}` has no Hopper kernel here"
                )))
            }
        }
        GpuPlan::new(&order, Some(false), Backend16::MmaSync).map_err(DeviceError::Refused)
    }

    fn requant(gpu: &Gpu, cache_src: &str, n: usize, k: usize, c: &[u8], s: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
        // compiled once per process (NVRTC with cuda_fp8.h is slow), loaded per call
        static PTX: std::sync::Mutex<Option<cudarc::nvrtc::Ptx>> = std::sync::Mutex::new(None);
        let ptx = {
            let mut p = PTX.lock().expect("ptx lock");
            if p.is_none() {
                *p = Some(crate::device::gpu::compile_ptx("requant_e4m3", cache_src, Arch::Sm90)?);
            }
            p.clone().expect("compiled above")
        };
        let module = gpu.ctx.load_module(ptx).map_err(driver_err("load requant"))?;
        let f = gpu.function(&module, "requant_e4m3")?;
        let st = &gpu.stream;
        let dc = st.clone_htod(c).map_err(driver_err("upload x2"))?;
        let ds = st.clone_htod(s).map_err(driver_err("upload x2 scales"))?;
        let mut oc = st.alloc_zeros::<u8>(c.len()).map_err(driver_err("alloc"))?;
        let mut os = st.alloc_zeros::<u8>(s.len()).map_err(driver_err("alloc"))?;
        let (ni, ki) = (n as i32, k as i32);
        let mut lb = st.launch_builder(&f);
        lb.arg(&dc).arg(&ds).arg(&mut oc).arg(&mut os).arg(&ni).arg(&ki);
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(64) as u32, 1, 1),
            block_dim: (64, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: argument list matches `requant_e4m3`; buffers are N*K and N*K/32 bytes.
        unsafe { lb.launch(cfg) }.map_err(driver_err("launch requant"))?;
        gpu.sync()?;
        Ok((
            st.clone_dtoh(&oc).map_err(driver_err("download"))?,
            st.clone_dtoh(&os).map_err(driver_err("download"))?,
        ))
    }

    /// The input `name` as bytes (MX codes or scales).
    pub(super) fn bytes(inputs: &Inputs, name: &str) -> Result<Vec<u8>> {
        match inputs.0.get(name).map(|t| &t.values) {
            Some(crate::op::TensorValues::U8(v)) => Ok(v.clone()),
            _ => Err(DeviceError::Refused(format!("input `{name}` missing or not bytes"))),
        }
    }

    /// The kernels' operands of one AllGatherMatmul: x2 as Bt, the paths' plans.
    pub(super) struct Prepared {
        pub bt: Vec<u8>,
        pub sbt: Vec<u8>,
        pub local: GpuPlan,
        pub gather: Option<GpuPlan>,
    }

    pub(super) fn prepare(spec: &AgmmSpec, inputs: &Inputs) -> Result<Prepared> {
        let (c2, s2) = (bytes(inputs, "x2")?, bytes(inputs, "x2_scales")?);
        let (bt, sbt) = x2_nk(spec, &c2, &s2);
        Ok(Prepared {
            bt,
            sbt,
            local: plan_for(&spec.local)?,
            gather: spec.gather.as_ref().map(plan_for).transpose()?,
        })
    }

    /// Rank `r`'s output `[WS*M_per_rank, N]` on `gpu`, from the x1 codes
    /// and scales it holds after the all-gather (every shard, rank order):
    /// LOCAL kernels for its own shard, GATHER kernels for the others (a
    /// `requant` GATHER path re-rounds x2 on this GPU first).
    pub(super) fn rank_output(
        gpu: &Gpu,
        cache: &mut KernelCache,
        spec: &AgmmSpec,
        prep: &Prepared,
        r: usize,
        g_codes: &[u8],
        g_scales: &[u8],
    ) -> Result<Vec<f32>> {
        let (ws, mpr, k, n, kb) = (spec.world_size, spec.m_per_rank, spec.k, spec.n, spec.k / 32);
        let (bt, sbt) = (&prep.bt, &prep.sbt);
        let mut out = vec![0f32; ws * mpr * n];
        // the GATHER path's x2 operand on this rank
        let gather_x2 = match (&spec.gather, &prep.gather) {
            (Some(p), Some(_)) if matches!(p.scale_point, ScalePoint::Requant(_)) => {
                Some(requant(gpu, &source_requant(), n, k, bt, sbt)?)
            }
            (Some(_), Some(_)) => Some((bt.clone(), sbt.clone())),
            _ => None,
        };
        for shard in 0..ws {
            let rows = shard * mpr..(shard + 1) * mpr;
            let (plan, (b, sb)) = match (&prep.gather, &gather_x2) {
                (Some(g), Some(x2)) if shard != r => (g, x2.clone()),
                _ => (&prep.local, (bt.clone(), sbt.clone())),
            };
            let ops = GemmOperands {
                a: g_codes[rows.start * k..rows.end * k].to_vec(),
                bt: b,
                sa: g_scales[rows.start * kb..rows.end * kb].to_vec(),
                sb,
            };
            let (y, _) = gemm_on_gpu(gpu, cache, plan, mpr, n, k, &ops)?;
            out[rows.start * n..rows.end * n].copy_from_slice(&y);
        }
        Ok(out)
    }
}

/// Compares one case's per-rank GPU outputs with the CPU model.
#[cfg(feature = "cuda")]
fn record(
    case: &CollectiveCase,
    spec: &OpSpec,
    inputs: &Inputs,
    gpu_out: Vec<Vec<f32>>,
    notes: Vec<String>,
) -> Result<CollectiveRecord> {
    let model = run_op(spec, inputs).map_err(|e| DeviceError::Refused(format!("{}: model: {e}", case.name)))?;
    let n = model.per_rank[0].cols;
    let mut mismatches = 0;
    for (g, m) in gpu_out.iter().zip(&model.per_rank) {
        mismatches += g
            .iter()
            .zip(&m.data)
            .filter(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()))
            .count();
    }
    let per_model: Vec<Vec<f32>> = model.per_rank.iter().map(|r| r.data.clone()).collect();
    Ok(CollectiveRecord {
        case: case.clone(),
        ranks: gpu_out.len(),
        rows: model.per_rank[0].rows,
        n,
        mismatches,
        gpu_row_digests: gpu_out
            .iter()
            .map(|o| o.chunks(n).map(|row| format!("{:016x}", row_digest(row))).collect())
            .collect(),
        gpu_cross_rank_rows: op_cross_rank_differences(spec, &gpu_out, n),
        model_cross_rank_rows: op_cross_rank_differences(spec, &per_model, n),
        reduction_orders: Vec::new(),
        paths: model
            .provenance
            .iter()
            .filter(|p| p.row == 0 || p.row + 1 == model.per_rank[0].rows)
            .map(|p| format!("rank {} row {}: {} {}", p.rank, p.row, p.path, p.order))
            .collect(),
        notes,
    })
}

#[cfg(feature = "cuda")]
fn progress_line(rec: &CollectiveRecord) -> String {
    format!(
        "{}: {} mismatches; cross-rank GPU {} / model {}",
        rec.case.name,
        rec.mismatches,
        rec.gpu_cross_rank_rows.len(),
        rec.model_cross_rank_rows.len()
    )
}

/// AllGatherMatmul at world sizes above the GPUs at hand: every rank's
/// kernels run one after another on ONE GPU. The all-gather is data
/// movement, so each rank's gathered x1 is the host concatenation of the
/// shards in rank order (no NCCL is involved); MatmulReduceScatter /
/// AllReduce are refused (their reduction order is NCCL's own and cannot
/// be emulated on one GPU).
#[cfg(feature = "cuda")]
mod one_gpu {
    use super::agmm_gpu::{bytes, prepare, rank_output};
    use super::*;
    use crate::device::exec::KernelCache;
    use crate::device::gpu::Gpu;

    /// Runs every case with ranks in sequence on `gpu`, compares with the
    /// CPU model.
    pub fn run_sequential(gpu: &Gpu, cases: &[CollectiveCase], progress: &dyn Fn(&str)) -> Result<CollectiveReport> {
        let mut cache = KernelCache::default();
        let mut records = Vec::new();
        for case in cases {
            let spec = case.resolve()?;
            let OpSpec::AllGatherMatmul(s) = &spec else {
                return Err(DeviceError::Refused(format!(
                    "{}: only AllGatherMatmul runs with sequential ranks (a reduction's order is NCCL's own)",
                    case.name
                )));
            };
            let inputs = case.inputs(&spec);
            let (ws, mpr, k, kb) = (s.world_size, s.m_per_rank, s.k, s.k / 32);
            let (c1, s1) = (bytes(&inputs, "x1")?, bytes(&inputs, "x1_scales")?);
            let prep = prepare(s, &inputs)?;
            let mut outs = Vec::with_capacity(ws);
            for r in 0..ws {
                // rank r's all-gather: every rank's shard, copied in rank order
                let mut g_codes = Vec::with_capacity(c1.len());
                let mut g_scales = Vec::with_capacity(s1.len());
                for src in 0..ws {
                    g_codes.extend_from_slice(&c1[src * mpr * k..(src + 1) * mpr * k]);
                    g_scales.extend_from_slice(&s1[src * mpr * kb..(src + 1) * mpr * kb]);
                }
                outs.push(rank_output(gpu, &mut cache, s, &prep, r, &g_codes, &g_scales)?);
            }
            let notes = vec![format!(
                "{ws} ranks run one after another on one GPU; each rank's all-gather is a host copy of the x1 shards in rank order (no NCCL)"
            )];
            let rec = record(case, &spec, &inputs, outs, notes)?;
            progress(&progress_line(&rec));
            records.push(rec);
        }
        Ok(CollectiveReport {
            records,
            nccl_version: 0,
            sequential: true,
        })
    }
}

#[cfg(feature = "nccl")]
pub(crate) mod two_gpu {
    use super::agmm_gpu::{bytes, prepare, rank_output};
    use super::*;
    use crate::device::codegen::{Backend16, GpuPlan};
    use crate::device::exec::{gemm_on_gpu, GemmOperands, KernelCache};
    use crate::device::nccl::{nccl_version, Ranks};
    use crate::op::agmm::AgmmSpec;
    use crate::op::reduce::ReduceSpec;

    fn check_world(ws: usize, ranks: &Ranks) -> Result<usize> {
        if ws != ranks.world() {
            return Err(DeviceError::Refused(format!(
                "spec world size {ws}, {} GPUs open",
                ranks.world()
            )));
        }
        Ok(ws)
    }

    pub(crate) fn agmm(
        ranks: &Ranks,
        caches: &mut [KernelCache],
        spec: &AgmmSpec,
        inputs: &Inputs,
    ) -> Result<(Vec<Vec<f32>>, Vec<String>)> {
        let ws = check_world(spec.world_size, ranks)?;
        let (mpr, k, kb) = (spec.m_per_rank, spec.k, spec.k / 32);
        let (c1, s1) = (bytes(inputs, "x1")?, bytes(inputs, "x1_scales")?);
        // NCCL all-gather of the x1 shards (codes and scales)
        let code_shards: Vec<Vec<u8>> = (0..ws).map(|r| c1[r * mpr * k..(r + 1) * mpr * k].to_vec()).collect();
        let scale_shards: Vec<Vec<u8>> = (0..ws).map(|r| s1[r * mpr * kb..(r + 1) * mpr * kb].to_vec()).collect();
        let g_codes = ranks.all_gather_bytes(&code_shards)?;
        let g_scales = ranks.all_gather_bytes(&scale_shards)?;
        let mut notes = Vec::new();
        if g_codes.iter().all(|g| *g == c1) && g_scales.iter().all(|g| *g == s1) {
            notes.push("NCCL all-gather delivered x1 byte-identical to every rank".into());
        } else {
            return Err(DeviceError::Refused(
                "NCCL all-gather returned bytes different from the shards".into(),
            ));
        }
        let prep = prepare(spec, inputs)?;
        let mut outs = Vec::new();
        for r in 0..ws {
            outs.push(rank_output(
                &ranks.gpus[r],
                &mut caches[r],
                spec,
                &prep,
                r,
                &g_codes[r],
                &g_scales[r],
            )?);
        }
        Ok((outs, notes))
    }

    fn bf16_bits(v: &[f32]) -> Result<Vec<u8>> {
        v.iter()
            .map(|&x| {
                let b = half::bf16::from_f32(x);
                if b.to_f32().to_bits() != x.to_bits() {
                    return Err(DeviceError::Refused(format!("{x:e} is not a bf16 value")));
                }
                Ok(b.to_bits().to_le_bytes())
            })
            .collect::<Result<Vec<_>>>()
            .map(|v| v.concat())
    }

    /// Each rank's output, the run's notes, the named reduction orders.
    type RankOutputs = (Vec<Vec<f32>>, Vec<String>, Vec<String>);

    /// MatmulAllReduce (`scatter` false) or MatmulReduceScatter: the
    /// partials on the GPUs, NCCL's sum, and (WS >= 3) the rank orders that
    /// reproduce each rank's output, named by `reduction_orders`.
    fn reduce_op(
        ranks: &Ranks,
        caches: &mut [KernelCache],
        spec: &ReduceSpec,
        inputs: &Inputs,
        scatter: bool,
    ) -> Result<RankOutputs> {
        let ws = check_world(spec.world_size, ranks)?;
        if spec.sum != crate::op::reduce::Sum::F32 {
            return Err(DeviceError::Refused(
                "a bf16 NCCL sum needs cudarc's `f16` feature (bf16 buffers); not enabled in this build".into(),
            ));
        }
        let (m, k, n) = (spec.m, spec.k, spec.n);
        let ks = k / ws;
        let get = |name: &str| -> Result<Vec<f32>> {
            match inputs.0.get(name).map(|t| &t.values) {
                Some(crate::op::TensorValues::F32(v)) => Ok(v.clone()),
                _ => Err(DeviceError::Refused(format!("input `{name}` missing or not f32"))),
            }
        };
        let (x1, x2) = (get("x1")?, get("x2")?);
        let order = spec.order.parse().map_err(|e| DeviceError::Refused(format!("{e}")))?;
        let plan = GpuPlan::new(&order, None, Backend16::MmaSync).map_err(DeviceError::Refused)?;
        let mut partials = Vec::new();
        for r in 0..ws {
            let a: Vec<f32> = (0..m)
                .flat_map(|i| x1[i * k + r * ks..i * k + (r + 1) * ks].to_vec())
                .collect();
            let bt: Vec<f32> = (0..n)
                .flat_map(|j| (0..ks).map(move |kk| (j, kk)))
                .map(|(j, kk)| x2[(r * ks + kk) * n + j])
                .collect();
            let to_bytes = |v: &[f32]| -> Result<Vec<u8>> {
                match plan.elem_bytes() {
                    4 => Ok(v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect()),
                    2 => bf16_bits(v),
                    _ => Err(DeviceError::Refused(
                        "fp8 partial orders are not wired for MatmulAllReduce".into(),
                    )),
                }
            };
            let ops = GemmOperands {
                a: to_bytes(&a)?,
                bt: to_bytes(&bt)?,
                sa: vec![],
                sb: vec![],
            };
            let (p, _) = gemm_on_gpu(&ranks.gpus[r], &mut caches[r], &plan, m, n, ks, &ops)?;
            partials.push(p);
        }
        let reduced = if scatter {
            ranks.reduce_scatter_sum(&partials)?
        } else {
            ranks.all_reduce_sum(&partials)?
        };
        let what = if scatter { "reduce-scatter" } else { "all-reduce" };
        let notes = vec![if ws == 2 {
            format!("NCCL {what} (sum) of {ws} partials; with 2 ranks the sum P0+P1 has one add, which is commutative, so no reduction order can be observed")
        } else {
            format!(
                "NCCL {what} (sum) of {ws} partials; the rank order of every element run is named in reduction_orders"
            )
        }];
        let orders = if ws > 2 {
            reduction_orders(&partials, &reduced, scatter)
        } else {
            Vec::new()
        };
        Ok((reduced, notes, orders))
    }

    /// Runs every case on `ranks`, compares with the CPU model.
    pub fn run(ranks: &Ranks, cases: &[CollectiveCase], progress: &dyn Fn(&str)) -> Result<CollectiveReport> {
        let mut caches: Vec<KernelCache> = (0..ranks.world()).map(|_| KernelCache::default()).collect();
        let mut records = Vec::new();
        for case in cases {
            let spec = case.resolve()?;
            let inputs = case.inputs(&spec);
            let (gpu_out, notes, orders) = match &spec {
                OpSpec::AllGatherMatmul(s) => {
                    let (o, n) = agmm(ranks, &mut caches, s, &inputs)?;
                    (o, n, Vec::new())
                }
                OpSpec::MatmulAllReduce(s) => reduce_op(ranks, &mut caches, s, &inputs, false)?,
                OpSpec::MatmulReduceScatter(s) => reduce_op(ranks, &mut caches, s, &inputs, true)?,
                _ => {
                    return Err(DeviceError::Refused(format!(
                        "{}: no two-GPU runner for this op",
                        case.name
                    )))
                }
            };
            let mut rec = record(case, &spec, &inputs, gpu_out, notes)?;
            rec.reduction_orders = orders;
            progress(&progress_line(&rec));
            records.push(rec);
        }
        Ok(CollectiveReport {
            records,
            nccl_version: nccl_version()?,
            sequential: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduction_orders_name_each_ring_position() {
        use crate::op::reduce::partials;
        for (ws, scatter) in [(4, true), (8, true), (4, false)] {
            let preset = if scatter { "mmrs-ring" } else { "mmar-ring" };
            let spec =
                OpSpec::from_value(serde_json::json!({"preset": preset, "world_size": ws, "m": 4 * ws})).unwrap();
            let (OpSpec::MatmulReduceScatter(rs) | OpSpec::MatmulAllReduce(rs)) = &spec else {
                unreachable!()
            };
            let inputs = generate(&spec, &GenOpts::new(11));
            let p = partials(rs, &inputs).unwrap();
            let out: Vec<Vec<f32>> = run_op(&spec, &inputs)
                .unwrap()
                .per_rank
                .into_iter()
                .map(|r| r.data)
                .collect();
            let lines = reduction_orders(&p, &out, scatter);
            if scatter {
                // one run per rank, its own chunk's ring position, no other computation
                let want: Vec<String> = (0..ws)
                    .map(|r| {
                        let fixed = if r == ws - 1 { " = fixed" } else { "" };
                        format!("rank {r}: elements 0..256: ring@{r}{fixed}")
                    })
                    .collect();
                assert_eq!(lines, want);
            } else {
                // every rank: WS runs, ring@0, ring@1, ... in chunk order
                let r0: Vec<&String> = lines.iter().filter(|l| l.starts_with("rank 0:")).collect();
                assert_eq!(r0.len(), ws, "{lines:?}");
                for (c, l) in r0.iter().enumerate() {
                    assert!(l.contains(&format!("ring@{c}")), "{l}");
                }
            }
        }
    }

    #[test]
    fn sequential_cases_are_the_all_gather_cases_with_128_rows() {
        for ws in [2, 4, 8] {
            let cases = sequential_cases(ws);
            assert_eq!(cases.len(), 8);
            for c in &cases {
                let OpSpec::AllGatherMatmul(s) = c.resolve().unwrap() else {
                    panic!("{}: not an all-gather-matmul", c.name)
                };
                assert_eq!((s.world_size, s.world_size * s.m_per_rank), (ws, 128), "{}", c.name);
            }
        }
    }

    #[test]
    fn default_cases_resolve_and_the_model_shows_the_anti_pattern() {
        for c in default_cases(2) {
            let out = c.model().unwrap_or_else(|e| panic!("{}: {e}", c.name));
            let per: Vec<Vec<f32>> = out.per_rank.iter().map(|r| r.data.clone()).collect();
            let diff = op_cross_rank_differences(&c.resolve().unwrap(), &per, out.per_rank[0].cols);
            let expect_fail = c.name.starts_with("agmm-v2-prefix") && c.name.ends_with("kvar");
            assert_eq!(!diff.is_empty(), expect_fail, "{}", c.name);
        }
    }
}
