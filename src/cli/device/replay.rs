//! `mxbi device replay DIR`: replays capture folders on the CPU model and
//! reports mismatches (no GPU needed), through the one replay interface
//! (`device::replay`): this file never looks at a suite's name. Every
//! capture must be the one anchored in `reference/captures.sha256`
//! (compiled in) unless `--unanchored` is given. Exit codes as in the README
//! ("Exit codes"): a mismatch is a failed check (1, after the report); a
//! capture that is not anchored or not intact is bad input (2).
//!
//! Without `--full` it replays what CI replays: every conform row and foil,
//! every probe case and collective row, and for casts the boundary, ordinary
//! and sampled chunks of `--cast-seed`; `--full` replays every cast chunk.

use crate::cli::{CliError, Outcome, Result};
use mxbi::device::capture::{Capture, ANCHOR_FILE};
use mxbi::device::replay::{replay_capture, ReplayOptions};
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
    /// Print one line per replayed unit: per conform case the rows and, per
    /// foil, the stored and recomputed mismatch counts; per probe its line.
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
    let opts = ReplayOptions {
        full: a.full,
        cast_seed: a.cast_seed,
    };
    let mut failed = 0usize;
    for dir in capture_dirs(&a.dir)? {
        let cap = if a.unanchored {
            Capture::open(&dir)?
        } else {
            Capture::open_anchored(&dir)?
        };
        cap.verify_all()?;
        let r = replay_capture(&cap, &opts)?;
        if a.verbose {
            for line in &r.details {
                outln!("{line}");
            }
        }
        for p in &r.problems {
            eprintln!("{}: {p}", dir.display());
        }
        failed += r.failed;
        let tag = if a.unanchored {
            format!(" [UNANCHORED: not checked against {ANCHOR_FILE}]")
        } else {
            String::new()
        };
        outln!("{}: {}{tag}", dir.display(), r.summary);
    }
    if failed > 0 {
        crate::cli::write_stderr_line(&format!(
            "mxbi: {failed} replayed rows, chunks or foil counts differ from the capture"
        ));
        return Ok(Outcome::Failed);
    }
    Ok(Outcome::Held)
}
