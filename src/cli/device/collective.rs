//! `mxbi device collective`: fused comm+matmul ops on real GPUs (NCCL)
//! against the CPU op models; `--sequential`: AllGatherMatmul with every
//! rank's kernels run one after another on one GPU (no NCCL).

use crate::cli::Result;

#[derive(clap::Args, Debug)]
pub struct CollectiveArgs {
    /// Folder for results; the capture goes to DIR/collective (with
    /// --sequential: DIR/collective-seq-wsN).
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// Number of ranks (with NCCL: GPUs 0..N-1).
    #[arg(long, default_value_t = 2)]
    pub world: usize,
    /// Run AllGatherMatmul only, every rank in turn on GPU 0: the
    /// all-gather is a host copy of the shards (feature `cuda`, no NCCL).
    /// MatmulReduceScatter/AllReduce are not run: their reduction order is
    /// NCCL's own.
    #[arg(long)]
    pub sequential: bool,
}

pub fn run(a: CollectiveArgs) -> Result<()> {
    if a.sequential {
        sequential(a)
    } else {
        nccl(a)
    }
}

#[cfg(feature = "cuda")]
fn finish(
    a: &CollectiveArgs,
    folder: &str,
    report: &mxbi::device::collective::CollectiveReport,
    info: serde_json::Value,
    last_note: String,
) -> Result<()> {
    use mxbi::device::capture::CaptureWriter;
    let mut w = CaptureWriter::create(&a.out.join(folder))?;
    w.put_json("cases.json", report)?;
    let mut notes: Vec<String> = report.records.iter().flat_map(|r| r.notes.iter().cloned()).collect();
    notes.dedup();
    notes.push(last_note);
    w.finish(mxbi::device::collective::SUITE, info, notes)?;
    outln!("{}", report.table());
    let bad: usize = report.records.iter().map(|r| r.mismatches).sum();
    if bad > 0 {
        return Err(crate::cli::CliError(format!(
            "{bad} GPU output elements differ from the model"
        )));
    }
    Ok(())
}

#[cfg(feature = "cuda")]
fn sequential(a: CollectiveArgs) -> Result<()> {
    use mxbi::device::collective::{run_sequential, sequential_cases};
    if ![2, 4, 8].contains(&a.world) {
        return Err(crate::cli::CliError(format!(
            "--world {}: the all-gather-matmul presets support world sizes 2, 4, 8",
            a.world
        )));
    }
    let gpu = mxbi::device::gpu::Gpu::open(0)?;
    let info = gpu.info()?;
    let report = run_sequential(&gpu, &sequential_cases(a.world), &|l| crate::cli::write_stderr_line(l))?;
    let note = format!(
        "world size {}: ranks run sequentially on ONE GPU, the all-gather a host copy; no NCCL was involved",
        a.world
    );
    finish(
        &a,
        &format!("collective-seq-ws{}", a.world),
        &report,
        serde_json::to_value(&info)?,
        note,
    )
}

#[cfg(not(feature = "cuda"))]
fn sequential(_a: CollectiveArgs) -> Result<()> {
    Err(mxbi::device::DeviceError::NotBuilt.into())
}

#[cfg(feature = "nccl")]
fn nccl(a: CollectiveArgs) -> Result<()> {
    use mxbi::device::collective::{default_cases, run};
    use mxbi::device::nccl::Ranks;
    let ranks = Ranks::open(a.world)?;
    let info = ranks.gpus[0].info()?;
    let report = run(&ranks, &default_cases(a.world), &|l| crate::cli::write_stderr_line(l))?;
    let note = format!("{} GPUs, NCCL {}", a.world, report.nccl_version);
    finish(&a, "collective", &report, serde_json::to_value(&info)?, note)
}

#[cfg(not(feature = "nccl"))]
fn nccl(_a: CollectiveArgs) -> Result<()> {
    Err(crate::cli::CliError(
        "this mxbi was built without NCCL; rebuild with `cargo build --release --features nccl` (or use --sequential)"
            .into(),
    ))
}
