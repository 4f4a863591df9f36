//! The conformance run on a GPU (feature `cuda`): generated kernels,
//! the CPU model and the foils, case by case.

use super::*;

use crate::device::exec::{gemm_on_gpu, operand_bytes, GemmOperands, KernelCache, POISON};
use crate::device::gpu::Gpu;

/// Runs one case on the GPU; returns the output `[M][N]` and GPU ms.
fn run_case(gpu: &Gpu, cache: &mut KernelCache, case: &ConformCase, inputs: &CaseInputs) -> Result<(Vec<f32>, f32)> {
    let plan = case.plan()?;
    let operands = GemmOperands {
        a: operand_bytes(&plan, &inputs.a, &inputs.a_codes),
        bt: operand_bytes(&plan, &inputs.bt, &inputs.bt_codes),
        sa: inputs.sa.clone(),
        sb: inputs.sb.clone(),
    };
    gemm_on_gpu(gpu, cache, &plan, case.m, case.n, case.k, &operands)
}

/// Runs every case: GPU kernels, CPU model, comparison.
pub fn run(gpu: &Gpu, opts: &ConformOptions, progress: &dyn Fn(&str)) -> Result<ConformReport> {
    let cases = generate_cases(opts);
    let mut cache = KernelCache::default();
    let mut records = Vec::new();
    let mut failed = Vec::new();
    for case in &cases {
        let inputs = case.inputs();
        let gpu_out = run_case(gpu, &mut cache, case, &inputs);
        match gpu_out {
            Ok((out, ms)) => {
                // `gemm` prepares the inputs once and spreads rows over threads
                let model = case.model(&inputs, None)?;
                let mut rec = compare(case, &out, &model, POISON, ms);
                let order = case.parsed_order()?;
                for foil in foils(&order) {
                    let fc = ConformCase {
                        order: foil.to_string(),
                        ..case.clone()
                    };
                    if let Ok(fm) = fc.model(&inputs, None) {
                        let fr = compare(&fc, &out, &fm, POISON, 0.0);
                        rec.foils.push((fc.order.clone(), fr.mismatches));
                    }
                }
                progress(&format!(
                    "case {:3} {:<60} {}x{}x{} {:?}: {} mismatches",
                    case.id,
                    case.order,
                    case.m,
                    case.n,
                    case.k,
                    case.class,
                    rec.mismatches + rec.unwritten
                ));
                records.push(rec);
            }
            Err(e) => {
                progress(&format!("case {:3} {}: FAILED {e}", case.id, case.order));
                failed.push((case.id, case.order.clone(), e.to_string()));
                if matches!(e, DeviceError::Driver(_)) {
                    // a fault poisons the context: stop here and report
                    break;
                }
            }
        }
    }
    Ok(ConformReport {
        options: opts.clone(),
        records,
        failed,
    })
}
