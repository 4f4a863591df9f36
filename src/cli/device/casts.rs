//! `mxbi device casts`: every f32 through the GPU's conversions (CUDA
//! intrinsics and inline PTX `cvt`) against the CPU `nvidia` preset; writes
//! the capture folder `OUT/casts/`. The work is in
//! [`mxbi::device::casts`].

use crate::cli::Result;

#[derive(clap::Args, Debug)]
pub struct CastsArgs {
    /// Folder for results and captures (the capture goes to OUT/casts/).
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// Only the chunks holding each format's edge cases (a smoke run),
    /// instead of all 2^32 inputs.
    #[arg(long)]
    pub quick: bool,
    /// Comma-separated conversion names (default: all).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

#[cfg(feature = "cuda")]
pub fn run(a: CastsArgs) -> Result<()> {
    use mxbi::device::casts::{self, ChunkSelection, SweepOptions};
    use mxbi::device::gpu::Gpu;

    // Refuse unknown names before touching the GPU.
    casts::select(&a.only)?;
    let gpu = Gpu::open(a.gpu)?;
    let info = gpu.info()?;
    outln!(
        "{} (sm_{}{})",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1
    );
    let opts = SweepOptions {
        selection: if a.quick {
            ChunkSelection::Boundary
        } else {
            ChunkSelection::All
        },
        only: a.only.clone(),
    };
    outln!(
        "{:<20} {:>12} {:>12}  {:<10} {:>7}  note",
        "conversion",
        "inputs",
        "mismatches",
        "path",
        "seconds"
    );
    let report = casts::run(&gpu, &opts, |r| {
        let note = match r.status {
            casts::Status::Ran if r.mismatches == 0 && !r.unexplained() => String::new(),
            casts::Status::Ran if !r.unexplained() => "predicted gap (known_gap in sweep.json)".into(),
            casts::Status::Ran => match r.predicted_mismatches {
                Some(p) => format!("UNEXPLAINED (predicted {p})"),
                None => "UNEXPLAINED".into(),
            },
            s => format!(
                "{s:?}: {}",
                r.error.as_deref().unwrap_or("").lines().next().unwrap_or("")
            ),
        };
        outln!(
            "{:<20} {:>12} {:>12}  {:<10} {:>7.1}  {note}",
            r.name,
            r.inputs,
            r.mismatches,
            r.path.name(),
            r.seconds
        );
    })?;

    let dir = a.out.join("casts");
    let notes: Vec<String> = report
        .conversions
        .iter()
        .map(|r| {
            format!(
                "{}: {:?}, {} of {} inputs mismatch ({}; ptx {})",
                r.name,
                r.status,
                r.mismatches,
                r.inputs,
                r.path.name(),
                if r.ptx_cvt.is_empty() {
                    "-".to_string()
                } else {
                    r.ptx_cvt.join(" ")
                }
            )
        })
        .collect();
    let device = serde_json::to_value(&info)?;
    casts::write_capture(&dir, &report, device, notes)?;
    outln!("wrote {}", dir.display());

    let bad: Vec<&str> = report
        .conversions
        .iter()
        .filter(|r| r.unexplained())
        .map(|r| r.name.as_str())
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(crate::cli::CliError(format!(
            "{} conversion(s) failed or mismatched without a predicted explanation: {}",
            bad.len(),
            bad.join(", ")
        )))
    }
}

#[cfg(not(feature = "cuda"))]
pub fn run(a: CastsArgs) -> Result<()> {
    // Unknown names are still reported as such.
    mxbi::device::casts::select(&a.only)?;
    let _ = (a.out, a.gpu, a.quick);
    Err(mxbi::device::DeviceError::NotBuilt.into())
}
