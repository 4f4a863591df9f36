//! `mxbi device probe`: tensor-core instruction probes (`mma.sync`,
//! `wgmma`) against the CPU step model; writes the capture `OUT/probe/`
//! (see `mxbi::device::probe`).

use crate::cli::Result;

#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// Folder for results and captures (the capture goes to OUT/probe/).
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// Cases per probe (rounded up to whole tiles; default 2^20).
    #[arg(long)]
    pub cases: Option<usize>,
    /// 2^14 cases per probe.
    #[arg(long, conflicts_with = "cases")]
    pub quick: bool,
    /// Only these probes (comma-separated names, e.g.
    /// mma.sync.m16n8k16.bf16,wgmma.m64n8k32.e4m3).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Generator seed.
    #[arg(long, default_value_t = mxbi::device::probe::DEFAULT_SEED)]
    pub seed: u64,
}

#[cfg(feature = "cuda")]
pub fn run(a: ProbeArgs) -> Result<()> {
    use crate::cli::CliError;
    use mxbi::device::gpu::Gpu;
    use mxbi::device::probe::{self, RunOptions};

    let opts = RunOptions {
        cases: if a.quick {
            probe::QUICK_CASES
        } else {
            a.cases.unwrap_or(probe::DEFAULT_CASES)
        },
        seed: a.seed,
        only: a.only.clone(),
    };
    probe::select(&opts.only)?;
    let gpu = Gpu::open(a.gpu)?;
    let info = gpu.info()?;
    outln!("{info}\n");
    let t0 = std::time::Instant::now();
    let report = probe::run(&gpu, &opts)?;
    out!("{}", report.table());
    for (name, why) in &report.failures {
        outln!("\n{name}: {why}");
    }
    for r in &report.results {
        if let Some(m) = r.mismatches.first() {
            outln!(
                "\n{}: {} mismatches; first: case {} (tile {}, r {}, n {}, {}) gpu {} [0x{:08x}] model {} [0x{:08x}] c {}",
                r.record.name,
                r.record.mismatches,
                m.case,
                m.tile,
                m.row,
                m.col,
                m.class,
                m.gpu,
                m.gpu_bits,
                m.model,
                m.model_bits,
                m.c
            );
            let bad: Vec<String> = r
                .record
                .classes
                .iter()
                .filter(|(_, c)| c.mismatches > 0)
                .map(|(k, c)| format!("{k} {}/{}", c.mismatches, c.cases))
                .collect();
            outln!("  mismatches by class: {}", bad.join(", "));
        }
    }
    let dir = a.out.join("probe");
    if !report.results.is_empty() {
        let notes = report.failures.iter().map(|(n, w)| format!("{n}: {w}")).collect();
        let device = serde_json::to_value(&info)?;
        probe::write_capture(&dir, &report.results, device, notes)?;
        outln!("\ncapture written to {}", dir.display());
    }
    outln!("total {:.1} s", t0.elapsed().as_secs_f64());
    let mismatching = report.results.iter().filter(|r| r.record.mismatches > 0).count();
    if !report.failures.is_empty() || mismatching > 0 {
        return Err(CliError(format!(
            "{} probe(s) failed to run, {} probe(s) with mismatches",
            report.failures.len(),
            mismatching
        )));
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
pub fn run(_a: ProbeArgs) -> Result<()> {
    Err(mxbi::device::DeviceError::NotBuilt.into())
}
