//! `mxbi device ...`: real-GPU suites (behind the `cuda` feature) and the
//! CPU replay of their captures (always available).

mod casts;
mod collective;
mod conform;
mod probe;
mod replay;
mod vendor;

use super::Result;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum DeviceCommand {
    /// GPU, compute capability, driver, CUDA, NVRTC and cuBLAS versions.
    Info(InfoArgs),
    /// NVRTC kernels generated from orders vs the CPU model (conformance).
    Conform(conform::ConformArgs),
    /// Tensor-core instruction probes (mma.sync, wgmma) vs the step model.
    Probe(probe::ProbeArgs),
    /// Exhaustive hardware/intrinsic conversions vs the `nvidia` cast preset.
    Casts(casts::CastsArgs),
    /// Vendor GEMMs (cuBLAS, cuBLASLt): anchor-row batch-invariance table
    /// and a pinned cuBLASLt algorithm.
    Vendor(vendor::VendorArgs),
    /// Fused comm+matmul ops on several GPUs through NCCL (feature `nccl`)
    /// vs the CPU op models.
    Collective(collective::CollectiveArgs),
    /// Replay committed captures on the CPU (no GPU needed).
    Replay(replay::ReplayArgs),
}

#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs a device command; only `replay` can end in a failed check (exit
/// codes: README, "Exit codes").
pub fn run(cmd: DeviceCommand) -> Result<crate::cli::Outcome> {
    if let DeviceCommand::Replay(a) = cmd {
        return replay::run(a);
    }
    match cmd {
        DeviceCommand::Info(a) => info(a),
        DeviceCommand::Conform(a) => conform::run(a),
        DeviceCommand::Probe(a) => probe::run(a),
        DeviceCommand::Casts(a) => casts::run(a),
        DeviceCommand::Vendor(a) => vendor::run(a),
        DeviceCommand::Collective(a) => collective::run(a),
        DeviceCommand::Replay(_) => unreachable!("handled above"),
    }?;
    Ok(crate::cli::Outcome::Held)
}

#[cfg(feature = "cuda")]
fn info(a: InfoArgs) -> Result<()> {
    let gpu = mxbi::device::gpu::Gpu::open(a.gpu)?;
    let info = gpu.info()?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        outln!("{info}");
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn info(_: InfoArgs) -> Result<()> {
    Err(mxbi::device::DeviceError::NotBuilt.into())
}
