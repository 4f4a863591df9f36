//! Running an op: [`run_op`] dispatches on the op kind (a trial number varies a non-deterministic reduction).

use super::definition::OpSpec;
use super::error::Result;
use super::output::OpOutput;
use super::tensors::Inputs;
use super::{agmm, coupling, moe, norm, reduce};

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
