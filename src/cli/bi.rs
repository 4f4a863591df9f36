//! `mxbi bi run`: the batch-invariance checker on a subject (contract: the
//! module doc of `bi`). Parsing subject specs and writing reports only.

use super::{CliError, Outcome, Result};
use crate::bi::{check, edge_ms, input_of, CheckOptions, Family, Report, RowPos};
use crate::order::{InType, Order};
use crate::subject::{Dispatch, Dump, Exec, ExecOptions, Model, Subject};
use clap::{Args, Subcommand};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod dump_gen;

#[derive(Subcommand, Debug)]
pub enum BiCommand {
    /// Run a subject through variant families; one verdict per cell.
    Run(RunArgs),
    /// Write every job a check would ask of its subject to a dump folder
    /// (inputs + manifest), for any runner to answer offline; then
    /// `bi run --subject dump:DIR` with the same options.
    Gen(dump_gen::GenArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The subject: `model:ORDER` (the CPU model), `dispatch:FILE` (an
    /// order chosen by shape from a JSON table), `exec:CMD` (an external
    /// runner, protocol mxbi-exec/1) or `dump:DIR` (outputs written into a
    /// folder from `bi gen`).
    #[arg(long)]
    pub subject: String,
    /// A second subject for the `switch` family.
    #[arg(long)]
    pub vs: Option<String>,
    /// Families, comma-separated: content, batch, position, permutation,
    /// repeat, switch.
    #[arg(long, value_delimiter = ',', required = true)]
    pub family: Vec<String>,
    /// Batch sizes, comma-separated (the batch family's baseline is the
    /// first), or `edges`: the usual edges plus b-1, b, b+1 for each
    /// boundary of a dispatch subject.
    #[arg(long, default_value = "edges")]
    pub m: String,
    #[arg(long)]
    pub k: usize,
    #[arg(long)]
    pub n: usize,
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
    /// exec: subjects: seconds a runner may take to greet and per job.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
    /// exec: subjects: keep the job files (the folder is printed).
    #[arg(long)]
    pub keep: bool,
}

/// Most bytes a dispatch table file may have.
const MAX_TABLE_BYTES: u64 = 1 << 20;

/// A parsed subject and what the checker should know about it.
struct ParsedSubject {
    subject: Box<dyn Subject>,
    /// The input type its order reads (model subjects).
    input: Option<InType>,
    /// M values where its behaviour may change (dispatch bounds).
    boundaries: Vec<usize>,
    /// An exec runner's kept job folder.
    kept: Option<PathBuf>,
}

/// What runner subjects (`exec:`, `dump:`) take from the command line.
struct RunnerCtx {
    input: Option<InType>,
    timeout: f64,
    keep: bool,
}

impl RunnerCtx {
    fn of(a: &RunArgs) -> Result<RunnerCtx> {
        if !(a.timeout > 0.0 && a.timeout <= 86_400.0) {
            return Err(CliError(format!(
                "--timeout {}: expected seconds in (0, 86400]",
                a.timeout
            )));
        }
        Ok(RunnerCtx {
            input: a.input.as_deref().map(parse_input).transpose()?,
            timeout: a.timeout,
            keep: a.keep,
        })
    }
}

fn parse_input(s: &str) -> Result<InType> {
    InType::from_name(s).ok_or_else(|| {
        CliError(format!(
            "unknown input type '{s}'; expected f32, bf16, f16, e4m3 or e5m2"
        ))
    })
}

fn parse_subject(spec: &str, ctx: &RunnerCtx) -> Result<ParsedSubject> {
    let (kind, arg) = spec.split_once(':').ok_or_else(|| {
        CliError(format!(
            "subject '{spec}': expected KIND:ARG (model:ORDER, dispatch:FILE, exec:CMD or dump:DIR)"
        ))
    })?;
    match kind {
        "model" => {
            let order: Order = arg.parse()?;
            Ok(ParsedSubject {
                subject: Box::new(Model::new(order)),
                input: Some(input_of(&order)),
                boundaries: vec![],
                kept: None,
            })
        }
        "dispatch" => {
            let path = Path::new(arg);
            let len = std::fs::metadata(path)
                .map_err(|e| CliError(format!("dispatch table {arg}: {e}")))?
                .len();
            if len > MAX_TABLE_BYTES {
                return Err(CliError(format!(
                    "dispatch table {arg}: {len} bytes (at most {MAX_TABLE_BYTES})"
                )));
            }
            let text = std::fs::read_to_string(path).map_err(|e| CliError(format!("dispatch table {arg}: {e}")))?;
            let d = Dispatch::parse(arg, &text).map_err(CliError)?;
            let inputs: Vec<InType> = d.entries.iter().map(|e| input_of(&e.order)).collect();
            let input = inputs.iter().all(|t| *t == inputs[0]).then(|| inputs[0]);
            Ok(ParsedSubject {
                boundaries: d.m_boundaries(),
                subject: Box::new(d),
                input,
                kept: None,
            })
        }
        "exec" => {
            let opts = ExecOptions {
                timeout: Duration::from_secs_f64(ctx.timeout),
                keep: ctx.keep,
                input: ctx.input.unwrap_or(InType::F32),
            };
            let e = Exec::start(arg, opts.clone()).map_err(CliError)?;
            Ok(ParsedSubject {
                kept: ctx.keep.then(|| e.work_dir().to_path_buf()),
                subject: Box::new(e),
                input: Some(opts.input),
                boundaries: vec![],
            })
        }
        "dump" => {
            let d = Dump::open(arg).map_err(CliError)?;
            if let Some(t) = ctx.input.filter(|t| *t != d.input_type()) {
                return Err(CliError(format!(
                    "dump folder {arg} holds {} inputs, not {} (--input)",
                    d.input_type().name(),
                    t.name()
                )));
            }
            Ok(ParsedSubject {
                input: Some(d.input_type()),
                boundaries: d.boundaries().to_vec(),
                subject: Box::new(d),
                kept: None,
            })
        }
        _ => Err(CliError(format!(
            "subject '{spec}': unknown kind '{kind}' (model:ORDER, dispatch:FILE, exec:CMD or dump:DIR)"
        ))),
    }
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
        BiCommand::Gen(a) => dump_gen::gen(a),
    }
}

fn run_check(a: RunArgs) -> Result<Outcome> {
    let ctx = RunnerCtx::of(&a)?;
    let subject = parse_subject(&a.subject, &ctx)?;
    let vs = a.vs.as_deref().map(|s| parse_subject(s, &ctx)).transpose()?;
    for kept in [Some(&subject), vs.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|s| s.kept.as_ref())
    {
        super::write_stderr_line(&format!("mxbi: runner job files are kept in {}", kept.display()));
    }
    let opts = check_options(&a, subject.input, &subject.boundaries)?;
    let tty = std::io::stderr().is_terminal();
    let report: Report = check(
        subject.subject.as_ref(),
        vs.as_ref().map(|v| v.subject.as_ref()),
        &opts,
        &|done, total| {
            if tty {
                use std::io::Write;
                let end = if done == total { "\n" } else { "" };
                let _ = write!(std::io::stderr().lock(), "\r{done}/{total} cells{end}");
            }
        },
    )
    .map_err(CliError)?;
    let report = if a.subject.starts_with("dump:") {
        dump_gen::mark_replayed_repeats(report, &opts)
    } else {
        report
    };
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

/// The check's options from the command line; `input_hint` and
/// `boundaries` come from the subject (its input type, its M edges).
fn check_options(a: &RunArgs, input_hint: Option<InType>, boundaries: &[usize]) -> Result<CheckOptions> {
    let families: Vec<Family> = parse_list("family", &a.family)?;
    let positions: Vec<RowPos> = parse_list("rows", &a.rows)?;
    let ms = if a.m.trim() == "edges" {
        edge_ms(boundaries)
    } else {
        a.m.split(',')
            .map(|s| {
                s.trim()
                    .parse::<usize>()
                    .map_err(|_| CliError(format!("--m: '{s}' is not a batch size (a list of integers, or edges)")))
            })
            .collect::<Result<Vec<_>>>()?
    };
    let input = match &a.input {
        Some(s) => parse_input(s)?,
        None => input_hint.unwrap_or(InType::F32),
    };
    Ok(CheckOptions {
        families,
        ms,
        k: a.k,
        n: a.n,
        positions,
        seed: a.seed,
        input,
        repeats: a.repeats,
    })
}

/// Writes through a temporary file in the same folder, so a failed run
/// leaves no half-written report.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes).map_err(|e| CliError(format!("{}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(|e| CliError(format!("{}: {e}", path.display())))
}
