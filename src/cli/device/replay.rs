//! `mxbi device replay DIR`: replays capture folders on the CPU model and
//! reports mismatches (no GPU needed). Every capture must be the one
//! anchored in `reference/captures.sha256` (compiled in) unless
//! `--unanchored` is given. A mismatch is a failed check: exit code 1 after
//! the report; a capture that is not anchored or not intact is bad input
//! (exit code 2).
//!
//! Without `--full` it replays what CI replays: every conform row and foil,
//! every probe case and collective row, and for casts the boundary, ordinary
//! and sampled chunks of `--cast-seed`; `--full` replays every cast chunk.

use crate::cli::{CliError, Outcome, Result};
use crate::device::capture::{Capture, ANCHOR_FILE};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// A capture folder, or a folder of capture folders (reference/captures).
    pub dir: PathBuf,
    /// Recompute every cast chunk (all 2^32 inputs per conversion; slow on
    /// few cores) instead of the sampled chunks.
    #[arg(long)]
    pub full: bool,
    /// Seed of the sampled cast chunks (CI derives it from the commit id).
    #[arg(long, default_value_t = 0)]
    pub cast_seed: u64,
    /// Replay captures that are not anchored in reference/captures.sha256
    /// (a fresh GPU run before it is committed); every line says so.
    #[arg(long)]
    pub unanchored: bool,
    /// Print one line per conform case (rows, and per foil the stored and
    /// recomputed mismatch counts).
    #[arg(long)]
    pub verbose: bool,
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

pub fn run(a: ReplayArgs) -> Result<Outcome> {
    let mut bad = 0usize;
    for dir in capture_dirs(&a.dir)? {
        let cap = if a.unanchored {
            Capture::open(&dir)?
        } else {
            Capture::open_anchored(&dir)?
        };
        cap.verify_all()?;
        let line = match cap.manifest.suite.as_str() {
            "conform" => {
                use crate::device::conform::{replay, RowSelection};
                let r = replay(&cap, RowSelection::All)?;
                if a.verbose {
                    for c in &r.case_replays {
                        outln!("{}", c.line());
                    }
                }
                let disagreements = r.foil_disagreements();
                for d in &disagreements {
                    eprintln!("{}: foil {d}", dir.display());
                }
                bad += r.row_mismatches.len() + disagreements.len();
                let nd: Vec<String> = r.non_discriminating().iter().map(|c| c.id.to_string()).collect();
                format!(
                    "{}; not discriminating: {}",
                    r.totals(),
                    if nd.is_empty() {
                        "none".to_string()
                    } else {
                        nd.join(" ")
                    }
                )
            }
            "casts" => {
                use crate::device::casts::{replay, ChunkSelection};
                let sel = if a.full {
                    ChunkSelection::All
                } else {
                    ChunkSelection::Sampled { seed: a.cast_seed }
                };
                let r = replay(&cap, sel.clone())?;
                let unexplained = r.unexplained();
                bad += unexplained.len();
                let names: Vec<&str> = unexplained.iter().map(|c| c.name.as_str()).collect();
                let chunks: usize = r.conversions.iter().map(|c| c.chunks.len()).sum();
                format!(
                    "{} conversions, {chunks} chunks replayed ({}), {} differing chunks/records, unexplained: {}",
                    r.conversions.len(),
                    sel.name(),
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
        let tag = if a.unanchored {
            format!(" [UNANCHORED: not checked against {ANCHOR_FILE}]")
        } else {
            String::new()
        };
        outln!("{}: {line}{tag}", dir.display());
    }
    if bad > 0 {
        crate::cli::write_stderr_line(&format!(
            "mxbi: {bad} replayed rows, chunks or foil counts differ from the capture"
        ));
        return Ok(Outcome::Failed);
    }
    Ok(Outcome::Held)
}
