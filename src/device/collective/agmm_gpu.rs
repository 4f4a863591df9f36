//! The GPU side of AllGatherMatmul shared by the NCCL run and the
//! sequential one-GPU run: x2 as the kernels read it, the plans of the
//! paths, and one rank's output from its gathered x1.

use crate::device::codegen::{Backend16, GpuPlan};
use crate::device::exec::{gemm_on_gpu, GemmOperands, KernelCache};
use crate::device::gpu::{driver_err, Arch, Gpu};
use crate::device::{DeviceError, Result};
use crate::format::Format;
use crate::op::agmm::{AgmmSpec, PathSpec, ScalePoint, X2Layout};
use crate::op::Inputs;
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
