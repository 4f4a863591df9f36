//! `mxbi device probe` (being built).

use crate::cli::Result;

#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// Folder for results and captures.
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
}

pub fn run(_a: ProbeArgs) -> Result<()> {
    Err(crate::cli::CliError("`device probe` is not built yet".into()))
}
