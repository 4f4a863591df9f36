//! `mxbi bi gen --out DIR <bi run options>`: the check run against a
//! recording subject, so `DIR` holds every job `bi run --subject dump:DIR`
//! with the same options will ask (layout: `subject::dump`, docs/BI.md).
//! The folder is written as `DIR.partial` and renamed at the end: a failed
//! gen leaves nothing behind.

use super::{check_options, parse_input, CliError, Outcome, Result, RunArgs};
use crate::cli::subject_specs::parse_with;
use clap::Args;
use mxbi::bi::check;
use mxbi::gemm::Problem;
use mxbi::order::InType;
use mxbi::subject::spec::RunnerOptions;
use mxbi::subject::{Dump, Model, Recorder, Subject, SubjectError, DUMP_SCHEMA};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct GenArgs {
    /// The dump folder to create (it must not exist).
    #[arg(long)]
    pub out: PathBuf,
    /// The options of the `bi run` this dump is for. `--subject` only lends
    /// its defaults (input type, M edges); it is not run, and an `exec:`
    /// runner is not started.
    #[command(flatten)]
    pub run: RunArgs,
}

/// The input type and M boundaries a subject spec lends to a dump.
fn hints(spec: &str, input: Option<InType>) -> Result<(Option<InType>, Vec<usize>)> {
    match spec.split_once(':') {
        Some(("exec", _)) => Ok((input, vec![])),
        Some(("dump", dir)) => {
            let d = Dump::open(dir).map_err(CliError)?;
            Ok((Some(d.input_type()), d.boundaries().to_vec()))
        }
        _ => {
            let runner = RunnerOptions {
                input,
                ..RunnerOptions::default()
            };
            let p = parse_with(spec, &runner)?;
            Ok((p.input, p.boundaries))
        }
    }
}

pub fn gen(g: GenArgs) -> Result<Outcome> {
    let a = &g.run;
    if a.case.is_some() {
        return Err(CliError("bi gen takes the check as flags, not a case file".into()));
    }
    for (flag, set) in [
        ("--json", a.out.json.is_some()),
        ("--markdown", a.out.markdown.is_some()),
        ("--junit", a.out.junit.is_some()),
        ("--svg", a.out.svg.is_some()),
        ("--strict", a.out.strict),
        ("--keep", a.keep),
    ] {
        if set {
            return Err(CliError(format!(
                "bi gen writes a dump folder, not a report: drop {flag}"
            )));
        }
    }
    let Some(spec) = &a.subject else {
        return Err(CliError("--subject, --k and --n are required".into()));
    };
    let input = a.input.as_deref().map(parse_input).transpose()?;
    let (input_hint, boundaries) = hints(spec, input)?;
    let opts = check_options(a, input_hint, &boundaries)?;
    if g.out.exists() {
        return Err(CliError(format!(
            "{}: exists; bi gen writes a new folder",
            g.out.display()
        )));
    }
    let mut partial = g.out.clone().into_os_string();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::create_dir(&partial).map_err(|e| {
        CliError(format!(
            "{}: {e} (a bi gen that did not finish leaves this folder: remove it)",
            partial.display()
        ))
    })?;
    let written = (|| -> std::result::Result<usize, String> {
        let rec = Answering(Recorder::new(&partial, opts.input)?);
        check(&rec, a.vs.as_ref().map(|_| &rec as _), &opts, &|_, _| {})?;
        let options = serde_json::json!({
            "subject": a.subject,
            "vs": a.vs,
            "family": opts.families.iter().map(|f| f.name()).collect::<Vec<_>>(),
            "m": opts.ms,
            "k": opts.k,
            "n": opts.n,
            "rows": opts.positions.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            "seed": opts.seed,
            "input": opts.input.name(),
            "repeats": opts.repeats,
        });
        let n = rec.0.finish(options, boundaries)?;
        std::fs::rename(&partial, &g.out).map_err(|e| format!("{}: {e}", g.out.display()))?;
        Ok(n)
    })();
    let n = written.map_err(|e| {
        let _ = std::fs::remove_dir_all(&partial);
        CliError(e)
    })?;
    outln!(
        "wrote {n} jobs to {} ({DUMP_SCHEMA}): a runner writes job-NNNNNN/out.npy for each job of manifest.json, \
         then: mxbi bi run --subject dump:{} with the same options",
        g.out.display(),
        g.out.display()
    );
    Ok(Outcome::Held)
}

/// The recorder, answering each job it records with the CPU model's
/// (`fma`) bytes instead of the recorder's zeros: the check's probe that
/// outputs depend on inputs (`bi::depends`) must see a GEMM, and the
/// recorded jobs are the same.
struct Answering(Recorder);

impl Subject for Answering {
    fn name(&self) -> String {
        self.0.name()
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> std::result::Result<Vec<f32>, SubjectError> {
        self.0.run(p, rows)?;
        Model::new("fma".parse().expect("fma parses")).run(p, rows)
    }
}
