//! `mxbi device collective`: fused comm+matmul ops on real GPUs (NCCL)
//! against the CPU op models.

use crate::cli::Result;

#[derive(clap::Args, Debug)]
pub struct CollectiveArgs {
    /// Folder for results; the capture goes to DIR/collective.
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// Number of GPUs (ranks).
    #[arg(long, default_value_t = 2)]
    pub world: usize,
}

#[cfg(feature = "nccl")]
pub fn run(a: CollectiveArgs) -> Result<()> {
    use crate::device::capture::CaptureWriter;
    use crate::device::collective::{default_cases, run};
    use crate::device::nccl::Ranks;
    let ranks = Ranks::open(a.world)?;
    let info = ranks.gpus[0].info()?;
    let report = run(&ranks, &default_cases(a.world), &|l| crate::cli::write_stderr_line(l))?;
    let mut w = CaptureWriter::create(&a.out.join("collective"))?;
    w.put_json("cases.json", &report)?;
    let mut notes: Vec<String> = report.records.iter().flat_map(|r| r.notes.iter().cloned()).collect();
    notes.dedup();
    notes.push(format!("{} GPUs, NCCL {}", a.world, report.nccl_version));
    w.finish(crate::device::collective::SUITE, serde_json::to_value(&info)?, notes)?;
    outln!("{}", report.table());
    let bad: usize = report.records.iter().map(|r| r.mismatches).sum();
    if bad > 0 {
        return Err(crate::cli::CliError(format!(
            "{bad} GPU output elements differ from the model"
        )));
    }
    Ok(())
}

#[cfg(not(feature = "nccl"))]
pub fn run(_a: CollectiveArgs) -> Result<()> {
    Err(crate::cli::CliError(
        "this mxbi was built without NCCL; rebuild with `cargo build --release --features nccl`".into(),
    ))
}
