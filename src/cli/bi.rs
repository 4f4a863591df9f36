//! `mxbi bi run`: the batch-invariance checker on a subject (contract: the
//! module doc of `bi`). Parsing subject specs and writing reports only.

use super::bi_report::{emit, mark_replayed_repeats, progress_bar, tick, MergeArgs, ReportArgs};
use super::subject_specs::{parse_pair, parse_with};
use super::{CliError, Outcome, Result};
use clap::{Args, Subcommand};
use mxbi::bi::{
    bisect_ranges, builtin, check_shard_content, edge_ms, expand, parse_ms, parse_shard, run_matrix, run_matrix_on,
    CheckOptions, Content, ContentClass, Family, RowPos,
};
use mxbi::order::InType;
use mxbi::subject::spec::{timeout_secs, RunnerOptions};
use mxbi::subject::Knobs;
use mxbi::subjects::{self, subject_from_spec};
use std::path::PathBuf;

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
    #[arg(long, default_value_t = mxbi::bi::DEFAULT_CONFIRM)]
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

/// The runner options (`exec:`, `dump:`) of `bi run`'s flags.
fn runner_options(a: &RunArgs) -> Result<RunnerOptions> {
    Ok(RunnerOptions {
        input: a.input.as_deref().map(parse_input).transpose()?,
        timeout: Some(timeout_secs(a.timeout, "--timeout").map_err(CliError)?),
        keep: a.keep,
        dir: None,
        input_flag: "--input",
    })
}

fn parse_input(s: &str) -> Result<InType> {
    InType::from_name(s).ok_or_else(|| {
        CliError(format!(
            "unknown input type '{s}'; expected f32, bf16, f16, e4m3 or e5m2"
        ))
    })
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
    let runner = runner_options(&a)?;
    let (subject, vs) = parse_pair(spec, a.vs.as_deref(), &runner)?;
    for kept in [Some(&subject), vs.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|s| s.kept.as_ref())
    {
        super::write_stderr_line(&format!("mxbi: runner job files are kept in {}", kept.display()));
    }
    let opts = check_options(&a, subject.input, &subject.boundaries)?;
    let witness = mxbi::bi::witness::WitnessCheck {
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
    let rows = mxbi::bi::Rows::with_content(opts.seed, opts.k, opts.n, opts.input, content);
    mxbi::bi::witness::apply(&mut report, subject.subject.as_ref(), &opts, &rows, witness).map_err(CliError)?;
    mark_replayed_repeats(spec, &mut report);
    if !a.out.no_explain {
        let knobs = Knobs::default();
        let setup = mxbi::diagnosis::CellSetup {
            subject: subject.subject.as_ref(),
            vs: vs.as_ref().map(|v| v.subject.as_ref()),
            spec,
            vs_spec: a.vs.as_deref(),
            knobs: &knobs,
            opts: &opts,
            content,
        };
        mxbi::diagnosis::explain_failures(&mut report, &setup);
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
    let mut runner = runner_options(a)?;
    // a runner has no boundaries and one rank: a stand-in lends the same
    // to `builtin`, so the runner starts once, knowing the input type
    let (jobs, held) = if subjects::factory().is_runner(spec) {
        let stand_in = mxbi::subject::Model::new("fma".parse().expect("fma parses"));
        let jobs = builtin(name, &stand_in).map_err(CliError)?;
        runner.input = jobs.first().map(|j| j.opts.input);
        (jobs, None)
    } else {
        let plain = parse_with(spec, &runner)?;
        (builtin(name, plain.subject.as_ref()).map_err(CliError)?, Some(plain))
    };
    let one_setting = jobs.iter().all(|j| j.knobs.is_empty());
    let held = match held {
        Some(h) => Some(h),
        None if one_setting => Some(parse_with(spec, &runner)?),
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
