//! `mxbi bi run`: the batch-invariance checker on a subject (contract: the
//! module doc of `bi`). Parsing subject specs and writing reports only.

use super::bi_report::{emit, progress_bar, tick, MergeArgs, ReportArgs};
use super::{CliError, Outcome, Result};
use crate::bi::{check, edge_ms, input_of, CheckOptions, Family, RowPos};
use crate::order::{InType, Order};
use crate::subject::{Dispatch, Model, Subject};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum BiCommand {
    /// Run a subject through variant families; one verdict per cell.
    Run(RunArgs),
    /// Merge shard reports of one check into the unsharded report.
    Merge(MergeArgs),
    /// Print the JSON Schema of the case format (mxbi-bi-case/1).
    Schema,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A case file (mxbi-bi-case/1; `mxbi bi schema`) instead of the
    /// subject and check flags.
    #[arg(value_name = "CASE.json", conflicts_with_all = ["subject", "vs", "family", "m", "k", "n", "rows", "input", "seed", "repeats"])]
    pub case: Option<PathBuf>,
    /// The subject: `model:ORDER` (the CPU model) or `dispatch:FILE` (an
    /// order chosen by shape from a JSON table).
    #[arg(long, required_unless_present = "case")]
    pub subject: Option<String>,
    /// A second subject for the `switch` family.
    #[arg(long)]
    pub vs: Option<String>,
    /// Families, comma-separated: content, batch, position, permutation,
    /// repeat, switch.
    #[arg(long, value_delimiter = ',', required_unless_present = "case")]
    pub family: Vec<String>,
    /// Batch sizes, comma-separated (the batch family's baseline is the
    /// first), or `edges`: the usual edges plus b-1, b, b+1 for each
    /// boundary of a dispatch subject.
    #[arg(long, default_value = "edges")]
    pub m: String,
    #[arg(long, required_unless_present = "case")]
    pub k: Option<usize>,
    #[arg(long, required_unless_present = "case")]
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
    #[command(flatten)]
    pub out: ReportArgs,
}

/// Most bytes a dispatch table file may have.
const MAX_TABLE_BYTES: u64 = 1 << 20;

/// A parsed subject and what the checker should know about it.
pub(super) struct ParsedSubject {
    pub subject: Box<dyn Subject>,
    /// The input type its order reads (model subjects).
    pub input: Option<InType>,
    /// M values where its behaviour may change (dispatch bounds).
    pub boundaries: Vec<usize>,
}

pub(super) fn parse_subject(spec: &str) -> Result<ParsedSubject> {
    let (kind, arg) = spec.split_once(':').ok_or_else(|| {
        CliError(format!(
            "subject '{spec}': expected KIND:ARG (model:ORDER or dispatch:FILE)"
        ))
    })?;
    match kind {
        "model" => {
            let order: Order = arg.parse()?;
            Ok(ParsedSubject {
                subject: Box::new(Model::new(order)),
                input: Some(input_of(&order)),
                boundaries: vec![],
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
            })
        }
        _ => Err(CliError(format!(
            "subject '{spec}': unknown kind '{kind}' (model:ORDER or dispatch:FILE)"
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
        BiCommand::Run(a) => match &a.case {
            Some(case) => super::bi_case::run_case(case, &a.out),
            None => run_check(a),
        },
        BiCommand::Merge(a) => super::bi_report::merge_reports(a),
        BiCommand::Schema => super::bi_case::schema(),
    }
}

fn run_check(a: RunArgs) -> Result<Outcome> {
    let (Some(spec), Some(k), Some(n)) = (&a.subject, a.k, a.n) else {
        return Err(CliError(
            "--subject, --k and --n are required without a case file".into(),
        ));
    };
    let subject = parse_subject(spec)?;
    let vs = a.vs.as_deref().map(parse_subject).transpose()?;
    let families: Vec<Family> = parse_list("family", &a.family)?;
    let positions: Vec<RowPos> = parse_list("rows", &a.rows)?;
    let ms = if a.m.trim() == "edges" {
        edge_ms(&subject.boundaries)
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
        Some(s) => InType::from_name(s).ok_or_else(|| {
            CliError(format!(
                "unknown input type '{s}'; expected f32, bf16, f16, e4m3 or e5m2"
            ))
        })?,
        None => subject.input.unwrap_or(InType::F32),
    };
    let opts = CheckOptions {
        families,
        ms,
        k,
        n,
        positions,
        seed: a.seed,
        input,
        repeats: a.repeats,
    };
    let pb = progress_bar();
    let report = check(
        subject.subject.as_ref(),
        vs.as_ref().map(|v| v.subject.as_ref()),
        &opts,
        &tick(&pb),
    );
    pb.finish_and_clear();
    emit(&report.map_err(CliError)?, &a.out)
}
