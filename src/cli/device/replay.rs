//! `mxbi device replay DIR`: replays every capture folder under DIR on the
//! CPU model and reports mismatches (no GPU needed).

use crate::cli::Result;

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// A capture folder, or a folder of capture folders (reference/captures).
    pub dir: std::path::PathBuf,
}

pub fn run(_a: ReplayArgs) -> Result<()> {
    Err(crate::cli::CliError("`device replay` is not built yet".into()))
}
