//! `mxbi bi run`: the batch-invariance checker on a subject (contract: the
//! module doc of `bi`). Parsing subject specs and writing reports only.

use super::subjects::subject_from_spec;
use super::{CliError, Outcome, Result};
use crate::bi::{builtin, check_shard, edge_ms, parse_shard, run_matrix, CheckOptions, Family, Report, RowPos};
use crate::order::InType;
use crate::subject::Knobs;
use clap::{Args, Subcommand};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum BiCommand {
    /// Run a subject through variant families; one verdict per cell.
    Run(RunArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The subject: `model:ORDER` (the CPU model), `dispatch:FILE` (an
    /// order chosen by shape from a JSON table), `op:PRESET` (an op model).
    #[arg(long)]
    pub subject: String,
    /// A built-in matrix instead of --family/--m/--k/--n: seed000,
    /// te-anchor, edges.
    #[arg(long, conflicts_with_all = ["family", "m", "k", "n", "rows"])]
    pub matrix: Option<String>,
    /// Run only shard i of n (0-based): cells whose global index is i mod n;
    /// the positive controls run in every shard.
    #[arg(long)]
    pub shard: Option<String>,
    /// A second subject for the `switch` family.
    #[arg(long)]
    pub vs: Option<String>,
    /// Families, comma-separated: content, batch, position, permutation,
    /// repeat, switch.
    #[arg(long, value_delimiter = ',', required_unless_present = "matrix")]
    pub family: Vec<String>,
    /// Batch sizes, comma-separated (the batch family's baseline is the
    /// first), or `edges`: the usual edges plus b-1, b, b+1 for each
    /// boundary of a dispatch subject.
    #[arg(long)]
    pub m: Option<String>,
    #[arg(long, required_unless_present = "matrix")]
    pub k: Option<usize>,
    #[arg(long, required_unless_present = "matrix")]
    pub n: Option<usize>,
    /// Target-row positions, comma-separated: indices, mid, last (default:
    /// 0,mid,last; the position family: 0,1,2,3,7,15,31,mid,last).
    #[arg(long, value_delimiter = ',')]
    pub rows: Vec<String>,
    /// Input element type (default: what the model's order reads; else f32).
    #[arg(long)]
    pub input: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs of the repeat family.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a Markdown table here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Write JUnit XML here (one test case per cell).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// NON_DET and ERROR cells also fail the run (exit 1).
    #[arg(long)]
    pub strict: bool,
}

fn parse_list<T: std::str::FromStr<Err = String>>(what: &str, items: &[String]) -> Result<Vec<T>> {
    items
        .iter()
        .map(|s| s.trim().parse::<T>().map_err(|e| CliError(format!("--{what}: {e}"))))
        .collect()
}

pub fn run(c: BiCommand) -> Result<Outcome> {
    match c {
        BiCommand::Run(a) => run_check(a),
    }
}

fn run_check(a: RunArgs) -> Result<Outcome> {
    if let Some(name) = &a.matrix {
        return run_matrix_cmd(&a, name);
    }
    let subject = subject_from_spec(&a.subject, &Knobs::default()).map_err(CliError)?;
    let vs =
        a.vs.as_deref()
            .map(|v| subject_from_spec(v, &Knobs::default()))
            .transpose()
            .map_err(CliError)?;
    let shard = a.shard.as_deref().map(parse_shard).transpose().map_err(CliError)?;
    let families: Vec<Family> = parse_list("family", &a.family)?;
    let positions: Vec<RowPos> = parse_list("rows", &a.rows)?;
    let m_arg = a.m.as_deref().unwrap_or("edges");
    let ms = if m_arg.trim() == "edges" {
        edge_ms(&subject.m_boundaries())
    } else {
        m_arg
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<usize>()
                    .map_err(|_| CliError(format!("--m: '{s}' is not a batch size (a list of integers, or edges)")))
            })
            .collect::<Result<Vec<_>>>()?
    };
    let input = match &a.input {
        Some(s) => InType::from_name(s).ok_or_else(|| {
            CliError(format!(
                "unknown input type '{s}'; expected f32, bf16, f16, e4m3 or e5m2"
            ))
        })?,
        None => subject.input().unwrap_or(InType::F32),
    };
    let opts = CheckOptions {
        families,
        ms,
        k: a.k.unwrap_or(0),
        n: a.n.unwrap_or(0),
        positions,
        seed: a.seed,
        input,
        repeats: a.repeats,
    };
    let tty = std::io::stderr().is_terminal();
    let progress = |done: usize, total: usize| {
        if tty {
            use std::io::Write;
            let end = if done == total { "\n" } else { "" };
            let _ = write!(std::io::stderr().lock(), "\r{done}/{total} cells{end}");
        }
    };
    let report: Report = check_shard(subject.as_ref(), vs.as_deref(), &opts, shard, &progress).map_err(CliError)?;
    finish(&a, report)
}

/// `--matrix NAME`: a built-in matrix, one subject per cell setting.
fn run_matrix_cmd(a: &RunArgs, name: &str) -> Result<Outcome> {
    if a.vs.is_some() {
        return Err(CliError(
            "--vs (the switch family) does not combine with --matrix".into(),
        ));
    }
    let shard = a.shard.as_deref().map(parse_shard).transpose().map_err(CliError)?;
    let plain = subject_from_spec(&a.subject, &Knobs::default()).map_err(CliError)?;
    let jobs = builtin(name, plain.as_ref()).map_err(CliError)?;
    let tty = std::io::stderr().is_terminal();
    let progress = |done: usize, total: usize| {
        if tty && (done % 64 == 0 || done == total) {
            use std::io::Write;
            let end = if done == total { "\n" } else { "" };
            let _ = write!(std::io::stderr().lock(), "\r{done}/{total} cells{end}");
        }
    };
    let report = run_matrix(&jobs, &|k| subject_from_spec(&a.subject, k), shard, &progress).map_err(CliError)?;
    finish(a, report)
}

/// Writes the report files, prints the summary and maps it to an outcome.
fn finish(a: &RunArgs, report: Report) -> Result<Outcome> {
    // write every file fully before anything is reported
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(p) = &a.json {
        write_atomic(p, json.as_bytes())?;
    }
    if let Some(p) = &a.markdown {
        write_atomic(p, report.markdown().as_bytes())?;
    }
    if let Some(p) = &a.junit {
        write_atomic(p, report.junit(a.strict).as_bytes())?;
    }
    out!("{}", report.text());
    match report.exit_code(a.strict) {
        0 => Ok(Outcome::Held),
        1 => Ok(Outcome::Failed),
        _ if !report.summary.valid => Err(CliError(
            "a positive control did not fail: this run cannot tell passing from failing".into(),
        )),
        _ => Err(CliError(format!(
            "no cell could run: {}",
            report
                .cells
                .first()
                .and_then(|c| c.reason.as_deref())
                .unwrap_or("no cells")
        ))),
    }
}

/// Writes through a temporary file in the same folder, so a failed run
/// leaves no half-written report.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes).map_err(|e| CliError(format!("{}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(|e| CliError(format!("{}: {e}", path.display())))
}
