//! `mxbi fuzz`: draws checker cells toward a subject's edges until one
//! fails, shrinks it and writes the minimal case (contract: the module doc
//! of `fuzz`). Parsing, printing and files only.
//!
//! Files under `--out DIR`: `fuzz.json` (what the run did: seed, cases
//! tried, the case found and the minimal one, the failing cell, the
//! explanation; no times, so the same seed and case limit give the same
//! bytes), and on a failure `minimal.json` (`mxbi-bi-case/1`; `mxbi bi run
//! DIR/minimal.json` exits 1). The corpus (`--corpus`, default
//! `DIR/corpus`) gets the minimal case too and is replayed first.
//!
//! A failure is written only after `--confirm N` replays (default 3) all
//! fail again; one that does not replay every time is listed as `NON_DET`
//! with its rate (`k of N replays failed`) in the output and under
//! `non_det` in `fuzz.json`, and no minimal case is written for it. Exit
//! codes: 1 on a confirmed failure; 0 when none was found (also with
//! `NON_DET` entries, as `mxbi bi run`, unless `--strict`); 2 on bad input.

use super::subjects::subject_from_spec;
use super::{CliError, Outcome, Result};
use crate::bi::{ContentClass, Others, MAX_CASE_BYTES};
use crate::fuzz::{fuzz_with, relative_spec, FuzzConfig, FuzzError, FuzzOutcome};
use crate::gemm::MX_BLOCK;
use crate::order::InType;
use crate::subject::{Dispatch, Exec, ExecOptions, Knobs, ScaleKind, Subject};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct FuzzArgs {
    /// The subject, as `mxbi bi run --subject` spells it (model:, dispatch:,
    /// op:, exec:, and the GPU kinds with feature `cuda`).
    #[arg(long)]
    pub subject: String,
    /// Families to draw, comma-separated (default: content, batch,
    /// position, permutation; rank too for multi-rank subjects).
    #[arg(long, value_delimiter = ',')]
    pub families: Vec<String>,
    /// Content classes to draw, comma-separated: plain, k-scaled,
    /// wide-exponents, cancellation, subnormals, specials (default: all).
    #[arg(long, value_delimiter = ',')]
    pub classes: Vec<String>,
    /// What the non-target rows may hold besides `drawn` (drawn half the
    /// time), comma-separated: zero, duplicate, target, tiny, huge,
    /// zero-beside (default: all; `drawn`: always drawn).
    #[arg(long, value_delimiter = ',')]
    pub others: Vec<String>,
    /// Replays that must all fail again before a failure is shrunk and
    /// before the minimal case is written (0: none); a failure that does
    /// not replay every time is NON_DET.
    #[arg(long, default_value_t = 3)]
    pub confirm: u32,
    /// NON_DET failures also fail the run (exit 1).
    #[arg(long)]
    pub strict: bool,
    /// Seconds to spend on new cases (the corpus and shrinking come on top).
    #[arg(long, default_value_t = 60.0)]
    pub budget: f64,
    /// Most new cases (default: until the budget ends).
    #[arg(long)]
    pub max_cases: Option<u64>,
    /// The run's seed: the same seed, the same cases.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output folder (created): fuzz.json, minimal.json on a failure.
    #[arg(long, default_value = "mxbi-fuzz")]
    pub out: PathBuf,
    /// Regression corpus folder (default: OUT/corpus): replayed first; a
    /// new minimal case is saved there.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Input element type (default: what the subject reads, else f32).
    #[arg(long)]
    pub input: Option<String>,
    /// Largest M drawn.
    #[arg(long, default_value_t = 513)]
    pub max_m: usize,
    /// Largest K drawn; at most 4194304 (mxbi's K limit).
    #[arg(long, default_value_t = 4096)]
    pub max_k: usize,
    /// Largest N drawn.
    #[arg(long, default_value_t = 64)]
    pub max_n: usize,
    /// Most subject runs spent shrinking.
    #[arg(long, default_value_t = 400)]
    pub max_shrink_runs: u64,
    /// exec: subjects: seconds a runner may take to greet and per job.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
}

/// `fuzz.json`: what the run did.
#[derive(Serialize)]
struct Summary<'a> {
    schema: &'static str,
    subject: String,
    seed: u64,
    cases_tried: u64,
    cases_skipped: u64,
    corpus_replayed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_error: Option<&'a str>,
    failure: Option<FailureSummary<'a>>,
    /// Failures that did not replay every time (absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    non_det: Vec<NonDetSummary<'a>>,
    #[serde(skip_serializing_if = "is_zero")]
    non_det_count: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

#[derive(Serialize)]
struct NonDetSummary<'a> {
    verdict: &'static str,
    stage: &'static str,
    case: String,
    cell: &'a str,
    failed: u32,
    replays: u32,
    rate: String,
}

#[derive(Serialize)]
struct FailureSummary<'a> {
    from_corpus: Option<String>,
    found: String,
    minimal: String,
    shrink_runs: u64,
    confirmed: u32,
    cell: &'a crate::bi::Cell,
    explanation: &'a [String],
}

/// The subject, its K boundaries and the knob settings drawn.
pub struct Target {
    pub subject: Box<dyn Subject>,
    pub k_boundaries: Vec<usize>,
    pub knobs: Vec<Knobs>,
    pub k_multiple: usize,
}

/// The subject a `--subject` spec names, with what the fuzzer draws for it
/// (`exec:` runners get `input` and `timeout` seconds; `dump:` is refused).
/// The Python binding's `fuzz` shares it.
pub fn target(spec: &str, input: Option<InType>, timeout: f64) -> Result<Target> {
    let (kind, arg) = spec.split_once(':').unwrap_or((spec, ""));
    let mut t = Target {
        subject: match kind {
            "exec" => {
                let opts = ExecOptions {
                    input: input.unwrap_or(InType::F32),
                    timeout: Duration::from_secs_f64(timeout),
                    ..ExecOptions::default()
                };
                Box::new(Exec::start(arg, opts).map_err(CliError)?)
            }
            "dump" => {
                return Err(CliError(
                    "mxbi fuzz draws new inputs: a dump: folder holds only the jobs it was generated for".into(),
                ))
            }
            _ => subject_from_spec(spec, &Knobs::default()).map_err(CliError)?,
        },
        k_boundaries: Vec::new(),
        knobs: vec![Knobs::default()],
        k_multiple: 1,
    };
    match kind {
        "dispatch" => {
            // the table was read and checked above; its K bounds
            let text = std::fs::read_to_string(arg).map_err(|e| CliError(format!("dispatch table {arg}: {e}")))?;
            let d = Dispatch::parse(arg, &text).map_err(CliError)?;
            t.k_boundaries = d.entries.iter().filter_map(|e| e.k_max).collect();
        }
        "op" => {
            // MX scales come in 32-element blocks along K; draw the scale kinds
            t.k_multiple = MX_BLOCK;
            let var = Some(ScaleKind::Varying);
            for (x1, x2) in [(None, var), (var, None), (var, var)] {
                let k = Knobs {
                    x1_scales: x1,
                    x2_scales: x2,
                    ..Knobs::default()
                };
                if subject_from_spec(spec, &k).is_ok() {
                    t.knobs.push(k);
                }
            }
        }
        _ => {}
    }
    Ok(t)
}

fn parse_input(s: &str) -> Result<InType> {
    InType::from_name(s).ok_or_else(|| {
        CliError(format!(
            "--input: unknown input type '{s}'; expected f32, bf16, f16, e4m3 or e5m2"
        ))
    })
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    crate::fuzz::write_atomic(path, text).map_err(|e| CliError(e.to_string()))
}

pub fn run(a: FuzzArgs) -> Result<Outcome> {
    if !(a.budget >= 0.0 && a.budget <= 86_400.0 * 365.0) {
        return Err(CliError(format!("--budget {}: expected seconds, 0 or more", a.budget)));
    }
    if !(a.timeout > 0.0 && a.timeout <= 86_400.0) {
        return Err(CliError(format!(
            "--timeout {}: expected seconds in (0, 86400]",
            a.timeout
        )));
    }
    let input = a.input.as_deref().map(parse_input).transpose()?;
    let others = a
        .others
        .iter()
        .map(|s| {
            s.trim()
                .parse::<Others>()
                .map_err(|e| CliError(format!("--others: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let classes = a
        .classes
        .iter()
        .map(|s| {
            s.trim()
                .parse::<ContentClass>()
                .map_err(|e| CliError(format!("--classes: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let corpus = a.corpus.clone().unwrap_or_else(|| a.out.join("corpus"));
    let t = target(&a.subject, input, a.timeout)?;
    let cfg = FuzzConfig {
        seed: a.seed,
        budget: Duration::from_secs_f64(a.budget),
        max_cases: a.max_cases,
        families: a.families.clone(),
        classes,
        others,
        knobs: t.knobs.clone(),
        spec: a.subject.clone(),
        k_boundaries: t.k_boundaries.clone(),
        input,
        max_m: a.max_m,
        max_k: a.max_k,
        max_n: a.max_n,
        k_multiple: t.k_multiple,
        corpus: Some(corpus.clone()),
        max_shrink_runs: a.max_shrink_runs,
        confirm: a.confirm,
    };
    // bad settings are refused before the header and before --out is
    // made: nothing on stdout, nothing on disk
    crate::fuzz::check_config(&cfg, t.subject.as_ref()).map_err(|e| match e {
        FuzzError::BadInput(e) | FuzzError::Broken(e) => CliError(e),
    })?;
    std::fs::create_dir_all(&a.out).map_err(|e| CliError(format!("--out {}: {e}", a.out.display())))?;
    let name = t.subject.name();
    outln!("mxbi fuzz: {name}, seed {}", a.seed);
    let start = Instant::now();
    let spec = a.subject.clone();
    let factory = move |k: &Knobs| subject_from_spec(&spec, k);
    let res = fuzz_with(t.subject.as_ref(), &factory, &cfg);
    let secs = start.elapsed().as_secs_f64();
    let o = match res {
        Ok(o) => o,
        Err(FuzzError::BadInput(e)) | Err(FuzzError::Broken(e)) => return Err(CliError(e)),
    };
    report(&a, &name, &corpus, &o, secs)
}

fn report(a: &FuzzArgs, name: &str, corpus: &Path, o: &FuzzOutcome, secs: f64) -> Result<Outcome> {
    if o.corpus_replayed > 0 {
        outln!("corpus {}: {} case(s) replayed", corpus.display(), o.corpus_replayed);
    }
    let rate = if secs > 0.0 { o.cases_tried as f64 / secs } else { 0.0 };
    outln!(
        "cases tried: {} ({} with no cell to run), {:.1} s, {:.1} cases/s",
        o.cases_tried,
        o.cases_skipped,
        secs,
        rate
    );
    for d in &o.non_det {
        outln!(
            "NON_DET  {} ({}): {}; {}",
            d.cell.id,
            d.stage,
            d.rate(),
            d.case.describe()
        );
    }
    if o.non_det_count > o.non_det.len() as u64 {
        outln!("NON_DET  {} more not listed", o.non_det_count - o.non_det.len() as u64);
    }
    let Some(f) = &o.failure else {
        something_ran(name, o)?;
        write_files(&a.out, name, o)?;
        if o.non_det_count > 0 {
            outln!(
                "no reproducible failure (seed {}, {} cases): {} NON_DET, no minimal case written",
                o.seed,
                o.cases_tried,
                o.non_det_count
            );
            return Ok(if a.strict { Outcome::Failed } else { Outcome::Held });
        }
        outln!("no failure (seed {}, {} cases)", o.seed, o.cases_tried);
        return Ok(Outcome::Held);
    };
    match &f.from_corpus {
        Some(p) => outln!("corpus case {} fails again: {}", p.display(), f.case.describe()),
        None => {
            outln!("failure found: {}", f.found.describe());
            outln!("shrunk ({} runs) to: {}", f.shrink_runs, f.case.describe());
        }
    }
    if f.confirmed > 0 {
        outln!("confirmed: {} of {} replays failed again", f.confirmed, f.confirmed);
    }
    let c = &f.cell;
    outln!(
        "BI_FAIL  {}: {} of {} rows, {} bytes, {} columns differ, max {} ulp",
        c.id,
        c.diff.rows_differing,
        c.diff.rows,
        c.diff.bytes_differing,
        c.diff.columns_differing,
        c.diff.max_ulp
    );
    if let Some(off) = c.diff.first_offenders.first() {
        outln!(
            "  first: row {} col {}: {} vs {}",
            off.row,
            off.col,
            off.baseline,
            off.variant
        );
    }
    for l in &f.explanation {
        outln!("{l}");
    }
    let minimal = a.out.join("minimal.json");
    write_files(&a.out, name, o)?;
    // the minimal case names the fuzzed exec: command: its replay must allow it
    let allow = if super::allow_exec::is_exec(&a.subject) {
        "--allow-exec "
    } else {
        ""
    };
    outln!(
        "minimal case: {} (replay: mxbi bi run {allow}{})",
        minimal.display(),
        minimal.display()
    );
    Ok(Outcome::Failed)
}

/// Err when a run without a failure could run no case at all (every
/// drawn case had no cell or only ERROR cells): nothing was checked.
pub fn something_ran(name: &str, o: &FuzzOutcome) -> Result<()> {
    if o.failure.is_none() && o.cases_tried > 0 && o.cases_skipped == o.cases_tried {
        return Err(CliError(format!(
            "{name}: no case could run ({}); nothing was checked",
            o.first_error.as_deref().unwrap_or("every drawn case had no cell")
        )));
    }
    Ok(())
}

/// `fuzz.json` (what the run did, no times) for a subject named `name`.
pub fn summary_json(name: &str, o: &FuzzOutcome) -> String {
    let failure = o.failure.as_ref().map(|f| FailureSummary {
        from_corpus: f.from_corpus.as_ref().map(|p| p.display().to_string()),
        found: f.found.describe(),
        minimal: f.case.describe(),
        shrink_runs: f.shrink_runs,
        confirmed: f.confirmed,
        cell: &f.cell,
        explanation: &f.explanation,
    });
    let s = Summary {
        schema: "mxbi-fuzz/1",
        subject: name.to_string(),
        seed: o.seed,
        cases_tried: o.cases_tried,
        cases_skipped: o.cases_skipped,
        corpus_replayed: o.corpus_replayed,
        first_error: o.first_error.as_deref(),
        failure,
        non_det: o
            .non_det
            .iter()
            .map(|d| NonDetSummary {
                verdict: "NON_DET",
                stage: d.stage,
                case: d.case.describe(),
                cell: &d.cell.id,
                failed: d.failed,
                replays: d.replays,
                rate: d.rate(),
            })
            .collect(),
        non_det_count: o.non_det_count,
    };
    let mut text = serde_json::to_string_pretty(&s).expect("a summary serialises");
    text.push('\n');
    text
}

/// `minimal.json` (`mxbi-bi-case/1`) of a failure, its subject's paths
/// relative to the folder `out` it is written into; None: no failure.
pub fn minimal_json(o: &FuzzOutcome, out: &Path) -> Result<Option<String>> {
    let Some(f) = &o.failure else {
        return Ok(None);
    };
    let mut file = f.file.clone();
    file.subject = relative_spec(&file.subject, out);
    let mut text = serde_json::to_string_pretty(&file).expect("a case serialises");
    text.push('\n');
    if text.len() as u64 > MAX_CASE_BYTES {
        return Err(CliError(format!("the minimal case exceeds {MAX_CASE_BYTES} bytes")));
    }
    Ok(Some(text))
}

/// Writes `OUT/minimal.json` (on a failure), then `OUT/fuzz.json`.
pub fn write_files(out: &Path, name: &str, o: &FuzzOutcome) -> Result<()> {
    if let Some(text) = minimal_json(o, out)? {
        write_file(&out.join("minimal.json"), &text)?;
    }
    write_file(&out.join("fuzz.json"), &summary_json(name, o))
}
