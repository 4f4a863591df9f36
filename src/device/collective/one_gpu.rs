//! AllGatherMatmul at world sizes above the GPUs at hand: every rank's
//! kernels run one after another on ONE GPU. The all-gather is data
//! movement, so each rank's gathered x1 is the host concatenation of the
//! shards in rank order (no NCCL is involved); MatmulReduceScatter /
//! AllReduce are refused (their reduction order is NCCL's own and cannot
//! be emulated on one GPU).

use super::agmm_gpu::{bytes, prepare, rank_output};
use super::cases::CollectiveCase;
use super::compare::record;
use super::report::{progress_line, CollectiveReport};
use crate::device::exec::KernelCache;
use crate::device::gpu::Gpu;
use crate::device::{DeviceError, Result};
use crate::op::OpSpec;

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
