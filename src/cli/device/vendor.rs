//! `mxbi device vendor`: cuBLAS / cuBLASLt anchor-row batch-invariance
//! table and a pinned cuBLASLt algorithm; writes the capture `DIR/vendor/`.

use crate::cli::Result;

#[derive(clap::Args, Debug)]
pub struct VendorArgs {
    /// Folder for results and captures (the capture goes to DIR/vendor/).
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// M in {1, 17, 128}, middle position only, fewer timing samples.
    #[arg(long)]
    pub quick: bool,
}

#[cfg(feature = "cuda")]
pub fn run(a: VendorArgs) -> Result<()> {
    use mxbi::device::vendor;
    let gpu = mxbi::device::gpu::Gpu::open(a.gpu)?;
    let info = gpu.info()?;
    crate::cli::write_stderr_line(&info.to_string());
    let opts = if a.quick {
        vendor::VendorOptions::quick()
    } else {
        vendor::VendorOptions::full()
    };
    let result = vendor::run(&gpu, &opts)?;
    let markdown = vendor::render_markdown(&result.report);
    outln!("{markdown}");
    let dir = a.out.join("vendor");
    let manifest = vendor::write_capture(&dir, &result, serde_json::to_value(&info)?, result.report.notes.clone())?;
    let bytes: u64 = manifest.files.iter().map(|f| f.bytes).sum();
    crate::cli::write_stderr_line(&format!(
        "capture: {} ({} files, {} bytes)",
        dir.display(),
        manifest.files.len(),
        bytes
    ));
    Ok(())
}

#[cfg(not(feature = "cuda"))]
pub fn run(_a: VendorArgs) -> Result<()> {
    Err(mxbi::device::DeviceError::NotBuilt.into())
}
