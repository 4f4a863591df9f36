//! `mxbi bi run`: the batch-invariance checker on a subject (contract: the
//! module doc of `bi`). Parsing subject specs and writing reports only.

use super::bi_report::{emit, progress_bar, tick, MergeArgs, ReportArgs};
use super::subjects::subject_from_spec;
use super::{CliError, Outcome, Result};
use crate::bi::{
    bisect_ranges, builtin, check_shard_content, edge_ms, expand, parse_ms, parse_shard, run_matrix, run_matrix_on,
    CheckOptions, Content, ContentClass, Family, RowPos,
};
use crate::order::InType;
use crate::subject::{Dump, Exec, ExecOptions, Knobs, Subject};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

pub(super) mod dump_gen;

#[derive(Subcommand, Debug)]
pub enum BiCommand {
    /// Run a subject through variant families; one verdict per cell.
    Run(RunArgs),
    /// Merge shard reports of one check into the unsharded report.
    Merge(MergeArgs),
    /// Print the JSON Schema of the case format (mxbi-bi-case/1).
    Schema,
    /// Write every job a check would ask of its subject to a dump folder
    /// (inputs + manifest), for any runner to answer offline; then
    /// `bi run --subject dump:DIR` with the same options.
    Gen(dump_gen::GenArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A case file (mxbi-bi-case/1; `mxbi bi schema`) instead of the
    /// subject and check flags.
    #[arg(value_name = "CASE.json", conflicts_with_all = ["subject", "vs", "family", "m", "k", "n", "rows", "input", "seed", "repeats", "confirm"])]
    pub case: Option<PathBuf>,
    /// The subject: `model:ORDER` (the CPU model), `dispatch:FILE` (an
    /// order chosen by shape from a JSON table), `exec:CMD` (an external
    /// runner, protocol mxbi-exec/1), `dump:DIR` (outputs written into a
    /// folder from `bi gen`), or with feature `cuda` `cuda:ORDER`,
    /// `cublas:sgemm|gemmex-bf16`, `cublaslt:f32|bf16|fp8-tensor|fp8-blk128[:pinned]`.
    /// Required without a case file.
    #[arg(long, required_unless_present = "case")]
    pub subject: Option<String>,
    /// A built-in matrix instead of --family/--m/--k/--n: seed000 (one
    /// subject per cell setting), te-anchor, edges (docs/BI.md).
    #[arg(long, conflicts_with_all = ["case", "vs", "family", "k", "n", "rows", "input"])]
    pub matrix: Option<String>,
    /// Run only shard i of n (0-based): the cells whose index in the whole
    /// check is i mod n; every shard runs the positive controls.
    #[arg(long)]
    pub shard: Option<String>,
    /// A second subject for the `switch` family.
    #[arg(long)]
    pub vs: Option<String>,
    /// Families, comma-separated: content, batch, position, permutation,
    /// repeat, switch, rank, anchor (docs/BI.md). Required without a case
    /// file or --matrix.
    #[arg(long, value_delimiter = ',', required_unless_present_any = ["case", "matrix"])]
    pub family: Vec<String>,
    /// Batch sizes, comma-separated (the batch family's baseline is the
    /// first), or `edges`: the usual edges plus b-1, b, b+1 for each
    /// boundary of a dispatch subject. Ranges `A..B` (= `A..=B`, both
    /// include B) mix with sizes (`1,8,40..60`): each range is sampled and
    /// the first and last M of each run of failing M found by bisection.
    #[arg(long, default_value = "edges")]
    pub m: String,
    /// K, the inner dimension (terms summed into each output element), 1 to
    /// 4194304 (mxbi's K limit). Required without a case file or --matrix.
    #[arg(long, required_unless_present_any = ["case", "matrix"])]
    pub k: Option<usize>,
    /// N, the output columns (the shared operand B is K x N). Required
    /// without a case file or --matrix.
    #[arg(long, required_unless_present_any = ["case", "matrix"])]
    pub n: Option<usize>,
    /// Target-row positions, comma-separated: indices, mid, last (default:
    /// 0,mid,last; the position family: 0,1,2,3,7,15,31,mid,last).
    #[arg(long, value_delimiter = ',')]
    pub rows: Vec<String>,
    /// Input element type (default: what the subject reads, e.g. a model's
    /// order or a bf16 library call; an `exec:` runner is told the other
    /// subject's; else f32).
    #[arg(long)]
    pub input: Option<String>,
    /// How input values are drawn: separating (the default: inputs built
    /// to separate accumulation orders, docs/BI.md "Power"), plain (the
    /// drawing before separating existed), k-scaled, wide-exponents,
    /// cancellation, subnormals, specials.
    #[arg(long, default_value = "separating")]
    pub content: String,
    /// Seed of every input drawn: the same seed gives the same inputs and
    /// the same report, byte for byte, on any thread count.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs of the repeat family.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Re-runs of each side of a cell that would fail, before it is
    /// BI_FAIL; a side that does not reproduce makes the cell NON_DET with
    /// its disagreement rate (0: no re-runs).
    #[arg(long, default_value_t = crate::bi::DEFAULT_CONFIRM)]
    pub confirm: usize,
    /// exec: subjects: seconds a runner may take to greet and per job.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
    /// exec: subjects: keep the job files (the folder is printed).
    #[arg(long)]
    pub keep: bool,
    /// The witness check (docs/BI.md, "Witnesses"): `auto` (the default)
    /// for cells whose two sides' orders are declared (a model, a dispatch
    /// table), `on` (or bare `--witness`) also identifies undeclared orders
    /// from the subject's bytes, `off` skips it.
    #[arg(long, value_name = "WHEN", default_value = "auto", num_args = 0..=1, default_missing_value = "on")]
    pub witness: String,
    /// A case file whose subject (or vs) is `exec:CMD` may run CMD
    /// (docs/BI.md, "Case files are data"; also MXBI_ALLOW_EXEC=1). A
    /// `--subject exec:CMD` typed here runs without it.
    #[arg(long)]
    pub allow_exec: bool,
    #[command(flatten)]
    pub out: ReportArgs,
}

/// A parsed subject and what the checker should know about it.
pub(super) struct ParsedSubject {
    pub subject: Box<dyn Subject>,
    /// The input type its order reads (model subjects).
    pub input: Option<InType>,
    /// M values where its behaviour may change (dispatch bounds).
    pub boundaries: Vec<usize>,
    /// An exec runner's kept job folder.
    pub kept: Option<PathBuf>,
}

/// What runner subjects (`exec:`, `dump:`) take from the command line or
/// a case file.
#[derive(Default)]
pub(super) struct RunnerCtx {
    /// The input type jobs announce (None: the other subject's, else f32;
    /// see [`parse_pair`]).
    pub input: Option<InType>,
    /// Seconds (0: the default, 120).
    pub timeout: f64,
    pub keep: bool,
    /// The folder an `exec:` runner starts in (a case file's folder).
    pub dir: Option<PathBuf>,
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
            dir: None,
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

pub(super) fn parse_subject(spec: &str) -> Result<ParsedSubject> {
    parse_subject_with(spec, &RunnerCtx::default())
}

/// Whether a spec names an external runner, whose input type is what it
/// is told (`exec:`).
fn is_runner(spec: &str) -> bool {
    spec.starts_with("exec:")
}

/// A subject and its switch partner. Runners (`exec:`) are started last,
/// told the input type `ctx.input`, else the one the other subject reads
/// (a bf16 GEMM's partner runner gets bf16 jobs), else f32.
pub(super) fn parse_pair(
    spec: &str,
    vs: Option<&str>,
    ctx: &RunnerCtx,
) -> Result<(ParsedSubject, Option<ParsedSubject>)> {
    let mut main = (!is_runner(spec)).then(|| parse_subject_with(spec, ctx)).transpose()?;
    let mut other = match vs {
        Some(v) if !is_runner(v) => Some(parse_subject_with(v, ctx)?),
        _ => None,
    };
    let told = RunnerCtx {
        input: ctx
            .input
            .or_else(|| main.as_ref().and_then(|p| p.input))
            .or_else(|| other.as_ref().and_then(|p| p.input)),
        timeout: ctx.timeout,
        keep: ctx.keep,
        dir: ctx.dir.clone(),
    };
    if main.is_none() {
        main = Some(parse_subject_with(spec, &told)?);
    }
    if let (Some(v), None) = (vs, &other) {
        other = Some(parse_subject_with(v, &told)?);
    }
    Ok((main.expect("parsed above"), other))
}

pub(super) fn parse_subject_with(spec: &str, ctx: &RunnerCtx) -> Result<ParsedSubject> {
    if let Some(gpu) = crate::device::subject::GpuSpec::parse(spec) {
        let parsed = gpu.map_err(CliError)?;
        return Ok(ParsedSubject {
            input: Some(parsed.input()),
            boundaries: parsed.m_boundaries(),
            subject: crate::device::subject::gpu_subject_from_spec(spec)
                .expect("a GPU kind")
                .map_err(CliError)?,
            kept: None,
        });
    }
    let (kind, arg) = spec.split_once(':').unwrap_or((spec, ""));
    match kind {
        "exec" => {
            let mut opts = ExecOptions {
                keep: ctx.keep,
                input: ctx.input.unwrap_or(InType::F32),
                dir: ctx.dir.clone(),
                ..ExecOptions::default()
            };
            if ctx.timeout > 0.0 {
                opts.timeout = Duration::from_secs_f64(ctx.timeout);
            }
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
        // model:, dispatch:, op: and the rest (src/cli/subjects.rs)
        _ => {
            let s = subject_from_spec(spec, &Knobs::default()).map_err(CliError)?;
            Ok(ParsedSubject {
                input: s.input(),
                boundaries: s.m_boundaries(),
                subject: s,
                kept: None,
            })
        }
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
        BiCommand::Run(a) => match &a.case {
            Some(case) => super::bi_case::run_case(case, &a.out, a.allow_exec),
            None => run_check(a),
        },
        BiCommand::Merge(a) => super::bi_report::merge_reports(a),
        BiCommand::Schema => super::bi_case::schema(),
        BiCommand::Gen(a) => dump_gen::gen(a),
    }
}

fn run_check(a: RunArgs) -> Result<Outcome> {
    if let Some(name) = &a.matrix {
        return run_matrix_cmd(&a, name);
    }
    let Some(spec) = &a.subject else {
        return Err(CliError(
            "--subject, --k and --n are required without a case file".into(),
        ));
    };
    let ctx = RunnerCtx::of(&a)?;
    let (subject, vs) = parse_pair(spec, a.vs.as_deref(), &ctx)?;
    for kept in [Some(&subject), vs.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|s| s.kept.as_ref())
    {
        super::write_stderr_line(&format!("mxbi: runner job files are kept in {}", kept.display()));
    }
    let opts = check_options(&a, subject.input, &subject.boundaries)?;
    let witness = crate::bi::witness::WitnessCheck {
        mode: a.witness.parse().map_err(|e| CliError(format!("--witness: {e}")))?,
        search: Default::default(),
    };
    let shard = a.shard.as_deref().map(parse_shard).transpose().map_err(CliError)?;
    let ranges = m_ranges(&a.m)?;
    if !ranges.is_empty() && shard.is_some() {
        return Err(CliError(
            "--m ranges are bisected over the whole check: run them without --shard".into(),
        ));
    }
    let pb = progress_bar();
    let class: ContentClass = a
        .content
        .parse()
        .map_err(|e: String| CliError(format!("--content: {e}")))?;
    let content = Content {
        class,
        ..Content::default()
    };
    let report = check_shard_content(
        subject.subject.as_ref(),
        vs.as_ref().map(|v| v.subject.as_ref()),
        &opts,
        shard,
        content,
        &tick(&pb),
    );
    pb.finish_and_clear();
    let mut report = report.map_err(CliError)?;
    if !ranges.is_empty() {
        bisect_ranges(
            subject.subject.as_ref(),
            vs.as_ref().map(|v| v.subject.as_ref()),
            &opts,
            content,
            &ranges,
            &mut report,
        )
        .map_err(CliError)?;
    }
    let rows = crate::bi::Rows::with_content(opts.seed, opts.k, opts.n, opts.input, content);
    crate::bi::witness::apply(&mut report, subject.subject.as_ref(), &opts, &rows, witness).map_err(CliError)?;
    dump_gen::mark_replayed_repeats(spec, &mut report);
    if !a.out.no_explain {
        let knobs = crate::subject::Knobs::default();
        let setup = super::explain_cell::CellSetup {
            subject: subject.subject.as_ref(),
            vs: vs.as_ref().map(|v| v.subject.as_ref()),
            spec,
            vs_spec: a.vs.as_deref(),
            knobs: &knobs,
            opts: &opts,
            content,
        };
        super::bi_explain::explain_failures(&mut report, &setup);
    }
    emit(&report, &a.out)
}

/// `--matrix NAME`: a built-in matrix. A matrix that sets knobs
/// (`seed000`) builds one subject per cell setting (`subject_from_spec`
/// under each setting's knobs); one that sets none runs one subject,
/// parsed as `--subject` is without a matrix (`exec:` runners started once,
/// with `--timeout`/`--keep`, and told the matrix's input type).
fn run_matrix_cmd(a: &RunArgs, name: &str) -> Result<Outcome> {
    let spec = a
        .subject
        .as_deref()
        .ok_or_else(|| CliError("--matrix needs --subject".into()))?;
    let shard = a.shard.as_deref().map(parse_shard).transpose().map_err(CliError)?;
    let mut ctx = RunnerCtx::of(a)?;
    // a runner has no boundaries and one rank: a stand-in lends the same
    // to `builtin`, so the runner starts once, knowing the input type
    let (jobs, held) = if is_runner(spec) {
        let stand_in = crate::subject::Model::new("fma".parse().expect("fma parses"));
        let jobs = builtin(name, &stand_in).map_err(CliError)?;
        ctx.input = jobs.first().map(|j| j.opts.input);
        (jobs, None)
    } else {
        let plain = parse_subject_with(spec, &ctx)?;
        (builtin(name, plain.subject.as_ref()).map_err(CliError)?, Some(plain))
    };
    let one_setting = jobs.iter().all(|j| j.knobs.is_empty());
    let held = match held {
        Some(h) => Some(h),
        None if one_setting => Some(parse_subject_with(spec, &ctx)?),
        None => None,
    };
    if let Some(kept) = held.as_ref().and_then(|h| h.kept.as_ref()) {
        super::write_stderr_line(&format!("mxbi: runner job files are kept in {}", kept.display()));
    }
    let pb = progress_bar();
    let report = match held {
        Some(h) if one_setting => run_matrix_on(&jobs, h.subject.as_ref(), shard, &tick(&pb)),
        other => {
            drop(other);
            run_matrix(&jobs, &|k| subject_from_spec(spec, k), shard, &tick(&pb))
        }
    };
    pb.finish_and_clear();
    let mut report = report.map_err(CliError)?;
    if let Some(m) = report.matrix.as_mut() {
        m.name = Some(name.to_string());
    }
    emit(&report, &a.out)
}

/// The ranges of `--m` (none for `edges` or a plain list).
fn m_ranges(m: &str) -> Result<Vec<(usize, usize)>> {
    if m.trim() == "edges" {
        return Ok(Vec::new());
    }
    let items = parse_ms(m).map_err(|e| CliError(format!("--m: {e}")))?;
    Ok(expand(&items).map_err(|e| CliError(format!("--m: {e}")))?.1)
}

/// The check's options from the flags; `input_hint` and `boundaries` come
/// from the subject (its input type, its M edges).
fn check_options(a: &RunArgs, input_hint: Option<InType>, boundaries: &[usize]) -> Result<CheckOptions> {
    let (Some(k), Some(n)) = (a.k, a.n) else {
        return Err(CliError(
            "--subject, --k and --n are required without a case file".into(),
        ));
    };
    let families: Vec<Family> = parse_list("family", &a.family)?;
    let positions: Vec<RowPos> = parse_list("rows", &a.rows)?;
    let ms = if a.m.trim() == "edges" {
        edge_ms(boundaries)
    } else {
        let items = parse_ms(&a.m).map_err(|e| CliError(format!("--m: {e}")))?;
        expand(&items).map_err(|e| CliError(format!("--m: {e}")))?.0
    };
    let input = match &a.input {
        Some(s) => parse_input(s)?,
        None => input_hint.unwrap_or(InType::F32),
    };
    Ok(CheckOptions {
        families,
        ms,
        k,
        n,
        positions,
        seed: a.seed,
        input,
        repeats: a.repeats,
        confirm: a.confirm,
    })
}
