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

use super::{CliError, Outcome, Result};
use clap::Args;
use mxbi::bi::{ContentClass, Others};
use mxbi::fuzz::{fuzz_with, something_ran, write_files, FuzzConfig, FuzzError, FuzzOutcome};
use mxbi::order::InType;
use mxbi::subject::Knobs;
use mxbi::subjects::fuzz_target::target;
use mxbi::subjects::subject_from_spec;
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

fn parse_input(s: &str) -> Result<InType> {
    InType::from_name(s).ok_or_else(|| {
        CliError(format!(
            "--input: unknown input type '{s}'; expected f32, bf16, f16, e4m3 or e5m2"
        ))
    })
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
    let t = target(&a.subject, input, a.timeout).map_err(CliError)?;
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
    mxbi::fuzz::check_config(&cfg, t.subject.as_ref()).map_err(|e| match e {
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
        something_ran(name, o).map_err(CliError)?;
        write_files(&a.out, name, o).map_err(CliError)?;
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
    write_files(&a.out, name, o).map_err(CliError)?;
    // the minimal case names the fuzzed exec: command: its replay must allow it
    let allow = if mxbi::subjects::allow_exec::is_exec(&a.subject) {
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
