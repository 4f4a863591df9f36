//! `mxbi device conform`: orders as NVRTC kernels vs the CPU model.

use crate::cli::Result;
use mxbi::device::conform::ConformOptions;

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

/// Largest `--cases`: 2^16 random cases.
const MAX_CASES: usize = 1 << 16;
/// Smallest `--max-terms`: 2^16 (smaller budgets make the case generator
/// search for a long time; the smallest case is 1 x 8 x 32).
const MIN_MAX_TERMS: usize = 1 << 16;

/// Sizes checked before anything runs.
fn check(a: &ConformArgs) -> Result<()> {
    if a.cases > MAX_CASES {
        return Err(crate::cli::CliError(format!(
            "--cases = {} is larger than the limit of {MAX_CASES} (2^16) random cases",
            a.cases
        )));
    }
    if a.max_terms < MIN_MAX_TERMS {
        return Err(crate::cli::CliError(format!(
            "--max-terms = {} is below the smallest useful budget, {MIN_MAX_TERMS} (2^16)",
            a.max_terms
        )));
    }
    Ok(())
}

#[cfg(feature = "cuda")]
pub fn run(a: ConformArgs) -> Result<()> {
    use mxbi::device::capture::CaptureWriter;
    use mxbi::device::gpu::Gpu;
    check(&a)?;
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
    let report = mxbi::device::conform::run(&gpu, &opts, &|line| crate::cli::write_stderr_line(line))?;
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
    w.finish(mxbi::device::conform::SUITE, serde_json::to_value(&info)?, notes)?;
    outln!("{}", report.summary());
    Ok(())
}

#[cfg(not(feature = "cuda"))]
pub fn run(a: ConformArgs) -> Result<()> {
    check(&a)?;
    Err(mxbi::device::DeviceError::NotBuilt.into())
}
