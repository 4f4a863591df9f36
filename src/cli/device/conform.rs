//! `mxbi device conform`: orders as NVRTC kernels vs the CPU model.

use crate::cli::Result;
use crate::device::conform::ConformOptions;

#[derive(clap::Args, Debug)]
pub struct ConformArgs {
    /// Folder for results; the capture goes to DIR/conform.
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// Seed of the case generator.
    #[arg(long, default_value_t = ConformOptions::default().seed)]
    pub seed: u64,
    /// Random cases after the fixed per-family ones.
    #[arg(long, default_value_t = ConformOptions::default().random_cases)]
    pub cases: usize,
    /// Largest M*N*K of a case.
    #[arg(long, default_value_t = ConformOptions::default().max_terms)]
    pub max_terms: usize,
    /// Small run: 8 random cases, M*N*K <= 2^20.
    #[arg(long)]
    pub quick: bool,
}

#[cfg(feature = "cuda")]
pub fn run(a: ConformArgs) -> Result<()> {
    use crate::device::capture::CaptureWriter;
    use crate::device::gpu::Gpu;
    let mut opts = ConformOptions {
        seed: a.seed,
        random_cases: a.cases,
        max_terms: a.max_terms,
    };
    if a.quick {
        opts.random_cases = opts.random_cases.min(8);
        opts.max_terms = opts.max_terms.min(1 << 20);
    }
    let gpu = Gpu::open(a.gpu)?;
    let info = gpu.info()?;
    let report = crate::device::conform::run(&gpu, &opts, &|line| eprintln!("{line}"))?;
    let mut w = CaptureWriter::create(&a.out.join("conform"))?;
    w.put_json("cases.json", &report)?;
    let notes = vec![
        format!(
            "{} cases, {} elements, {} mismatches, {} failed to build/run",
            report.records.len(),
            report.records.iter().map(|r| r.elements).sum::<usize>(),
            report.total_mismatches(),
            report.failed.len()
        ),
        format!(
            "seed {:#x}; {} of {} cases discriminate (a foil misses GPU bytes); {} all-NaN",
            opts.seed,
            report.discriminating(),
            report.records.len(),
            report.all_nan()
        ),
    ];
    w.finish("conform", serde_json::to_value(&info)?, notes)?;
    println!("{}", report.summary());
    Ok(())
}

#[cfg(not(feature = "cuda"))]
pub fn run(_a: ConformArgs) -> Result<()> {
    Err(crate::device::DeviceError::NotBuilt.into())
}
