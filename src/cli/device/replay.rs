//! `mxbi device replay DIR`: replays capture folders on the CPU model and
//! reports mismatches (no GPU needed). Exit code 1 on any mismatch.

use crate::cli::{CliError, Result};
use crate::device::capture::Capture;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// A capture folder, or a folder of capture folders (reference/captures).
    pub dir: PathBuf,
    /// Recompute every row (default: a sample of rows per case).
    #[arg(long)]
    pub full: bool,
}

fn capture_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    if dir.join("manifest.json").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| CliError(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("manifest.json").is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(CliError(format!(
            "{}: no capture folder (manifest.json) found",
            dir.display()
        )));
    }
    Ok(dirs)
}

pub fn run(a: ReplayArgs) -> Result<()> {
    let mut bad = 0usize;
    for dir in capture_dirs(&a.dir)? {
        let cap = Capture::open(&dir)?;
        cap.verify_all()?;
        let line = match cap.manifest.suite.as_str() {
            "conform" => {
                use crate::device::conform::{replay, RowSelection};
                let r = replay(
                    &cap,
                    if a.full {
                        RowSelection::All
                    } else {
                        RowSelection::Sample
                    },
                )?;
                bad += r.row_mismatches.len();
                format!(
                    "{} cases, {} rows replayed, {} rows differ from the GPU bytes",
                    r.cases,
                    r.rows_checked,
                    r.row_mismatches.len()
                )
            }
            "casts" => {
                use crate::device::casts::{replay, ChunkSelection};
                let r = replay(
                    &cap,
                    if a.full {
                        ChunkSelection::All
                    } else {
                        ChunkSelection::Boundary
                    },
                )?;
                let unexplained = r.unexplained();
                bad += unexplained.len();
                let names: Vec<&str> = unexplained.iter().map(|c| c.name.as_str()).collect();
                format!(
                    "{} conversions replayed, {} differing chunks/records, unexplained: {}",
                    r.conversions.len(),
                    r.mismatches(),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )
            }
            "probe" => {
                let r = crate::device::probe::replay(&cap)?;
                if !r.ok() {
                    bad += 1;
                }
                format!(
                    "{} probes replayed, {} recorded mismatches{}",
                    r.lines.len(),
                    r.mismatches(),
                    if r.ok() { "" } else { " -- replay FAILED" }
                )
            }
            "vendor" => {
                let r = crate::device::vendor::replay(&cap)?;
                bad += r.mismatches.len();
                format!(
                    "{} tables and {} anchor rows consistent with the stored bytes{} (no CPU model of cuBLAS yet)",
                    r.tables_checked,
                    r.rows_checked,
                    if r.consistent() { "" } else { " -- INCONSISTENT" }
                )
            }
            "collective" => {
                let r = crate::device::collective::replay(&cap)?;
                bad += r.row_mismatches.len() + r.verdict_mismatches.len();
                format!(
                    "{} cases, {} rank rows replayed, {} rows and {} verdicts differ from the GPU",
                    r.cases,
                    r.rows_checked,
                    r.row_mismatches.len(),
                    r.verdict_mismatches.len()
                )
            }
            other => format!("suite `{other}`: integrity verified (no CPU replay for this suite)"),
        };
        outln!("{}: {line}", dir.display());
    }
    if bad > 0 {
        return Err(CliError(format!(
            "{bad} replayed rows differ from the captured GPU bytes"
        )));
    }
    Ok(())
}
