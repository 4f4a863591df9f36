//! The report side of `mxbi bi`: the output flags every form of `bi run`
//! shares, the progress bar, atomic writes, and `mxbi bi merge`.

use super::{CliError, Outcome, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use mxbi::bi::{heatmap, merge, parse_json, Family, Report, Verdict};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Where reports go and how strict the exit code is.
#[derive(Args, Debug, Clone, Default)]
pub struct ReportArgs {
    /// Write the JSON report here (mxbi-bi-report/1).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write Markdown tables here (one per family).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Write JUnit XML here (one test case per cell).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write an SVG heatmap of the cells by verdict here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// NON_DET and ERROR cells also fail the run (exit 1).
    #[arg(long)]
    pub strict: bool,
    /// Skip the explanations: by default each failing family's first
    /// failing cell is re-run and explained (its two orders, the first
    /// diverging node, the fix; docs/BI.md "Explanations in the report").
    #[arg(long)]
    pub no_explain: bool,
}

/// A progress bar on stderr when stderr is a terminal; hidden otherwise
/// (pipes, tests, CI see nothing).
pub fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} cells, {elapsed} elapsed, about {eta} left") {
        pb.set_style(style);
    }
    pb
}

/// The callback `bi::check` calls after each cell.
pub fn tick(pb: &ProgressBar) -> impl Fn(usize, usize) + '_ {
    move |done, total| {
        pb.set_length(total as u64);
        pb.set_position(done as u64);
    }
}

/// Writes every requested report (each through a temporary file renamed
/// into place once all are written: an error leaves no report half
/// written), prints the terminal summary and maps the verdicts to the exit
/// code.
pub fn emit(report: &Report, out: &ReportArgs) -> Result<Outcome> {
    // a run that cannot count (exit 2) writes no report file
    let outcome = match report.exit_code(out.strict) {
        0 => Outcome::Held,
        1 => Outcome::Failed,
        _ if !report.summary.valid => {
            return Err(CliError(
                "a positive control did not fail: this run cannot tell passing from failing".into(),
            ))
        }
        _ => {
            return Err(CliError(format!(
                "no cell could run: {}",
                report
                    .cells
                    .first()
                    .and_then(|c| c.reason.as_deref())
                    .unwrap_or("no cells")
            )))
        }
    };
    let mut files: Vec<(&Path, String)> = Vec::new();
    if let Some(p) = &out.json {
        let mut s = serde_json::to_string_pretty(report)?;
        s.push('\n');
        files.push((p, s));
    }
    if let Some(p) = &out.markdown {
        files.push((p, report.markdown()));
    }
    if let Some(p) = &out.junit {
        files.push((p, report.junit(out.strict)));
    }
    if let Some(p) = &out.svg {
        files.push((p, heatmap(report)));
    }
    write_all_atomic(&files)?;
    out!("{}", report.text());
    Ok(outcome)
}

/// The temporary name of `path` while it is written: hidden, in the same
/// folder (so the rename is atomic), unique to this process.
fn temp_of(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "report".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

/// Writes each file to its temporary name, then renames them all into
/// place; on any error the temporaries are removed and no target changes.
pub fn write_all_atomic(files: &[(&Path, String)]) -> Result<()> {
    let mut written: Vec<PathBuf> = Vec::new();
    let cleanup = |w: &[PathBuf]| {
        for t in w {
            let _ = std::fs::remove_file(t);
        }
    };
    for (path, text) in files {
        let tmp = temp_of(path);
        if let Err(e) = std::fs::write(&tmp, text) {
            cleanup(&written);
            let _ = std::fs::remove_file(&tmp);
            return Err(CliError(format!("{}: {e}", path.display())));
        }
        written.push(tmp);
    }
    for (i, (path, _)) in files.iter().enumerate() {
        if let Err(e) = std::fs::rename(&written[i], path) {
            cleanup(&written[i..]);
            return Err(CliError(format!("{}: {e}", path.display())));
        }
    }
    Ok(())
}

/// `mxbi bi merge OUT.json IN.json...`
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The merged JSON report.
    #[arg(value_name = "OUT.json")]
    pub out: PathBuf,
    /// Shard reports of one check.
    #[arg(value_name = "IN.json", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Write Markdown tables here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Write JUnit XML here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write an SVG heatmap here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// NON_DET and ERROR cells also fail (exit 1).
    #[arg(long)]
    pub strict: bool,
}

/// Most bytes one report file may have.
const MAX_REPORT_BYTES: u64 = 1 << 30;

/// Reads a report; errors name the file and the JSON path.
pub fn read_report(path: &Path) -> Result<Report> {
    let name = path.display();
    let len = std::fs::metadata(path)
        .map_err(|e| CliError(format!("{name}: {e}")))?
        .len();
    if len > MAX_REPORT_BYTES {
        return Err(CliError(format!("{name}: {len} bytes (at most {MAX_REPORT_BYTES})")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| CliError(format!("{name}: {e}")))?;
    parse_json(&name.to_string(), &text).map_err(CliError)
}

pub fn merge_reports(a: MergeArgs) -> Result<Outcome> {
    let mut inputs = Vec::with_capacity(a.inputs.len());
    for p in &a.inputs {
        inputs.push((p.display().to_string(), read_report(p)?));
    }
    let merged = merge(&inputs).map_err(CliError)?;
    emit(
        &merged,
        &ReportArgs {
            json: Some(a.out),
            markdown: a.markdown,
            junit: a.junit,
            svg: a.svg,
            strict: a.strict,
            no_explain: true,
        },
    )
}
/// Why a repeat cell proves nothing on a dump.
pub(super) const REPLAYED: &str =
    "a dump answers every repeat of a batch from one file: it cannot show non-determinism";

/// On a `dump:` subject (`spec`), a passing `repeat` cell is VACUOUS (see
/// [`REPLAYED`]); other cells and other subjects are left alone.
pub(super) fn mark_replayed_repeats(spec: &str, r: &mut Report) {
    if !spec.starts_with("dump:") {
        return;
    }
    for c in r.cells.iter_mut() {
        if c.family == Family::Repeat && c.verdict == Verdict::Pass {
            c.verdict = Verdict::Vacuous;
            c.reason = Some(REPLAYED.into());
        }
    }
    r.finish();
}
