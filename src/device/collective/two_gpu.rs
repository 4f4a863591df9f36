//! The two-GPU (NCCL) run: one GPU per rank, NCCL's all-gather before the
//! AllGatherMatmul kernels and NCCL's sum after the partial GEMMs of
//! MatmulAllReduce / MatmulReduceScatter, each case compared with the CPU
//! model.

use super::agmm_gpu::{bytes, prepare, rank_output};
use super::cases::CollectiveCase;
use super::compare::{record, reduction_orders};
use super::report::{progress_line, CollectiveReport};
use crate::device::codegen::{Backend16, GpuPlan};
use crate::device::exec::{gemm_on_gpu, GemmOperands, KernelCache};
use crate::device::nccl::{nccl_version, Ranks};
use crate::device::{DeviceError, Result};
use crate::op::agmm::AgmmSpec;
use crate::op::reduce::ReduceSpec;
use crate::op::{Inputs, OpSpec};

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
        format!("NCCL {what} (sum) of {ws} partials; the rank order of every element run is named in reduction_orders")
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
