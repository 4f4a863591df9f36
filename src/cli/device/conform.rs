//! `mxbi device conform` (being built).

use crate::cli::Result;

#[derive(clap::Args, Debug)]
pub struct ConformArgs {
    /// Folder for results and captures.
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
}

pub fn run(_a: ConformArgs) -> Result<()> {
    Err(crate::cli::CliError("`device conform` is not built yet".into()))
}
