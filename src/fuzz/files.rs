//! What a fuzz run leaves on disk (docs/FUZZING.md): `minimal.json`, the
//! failure's minimal case (`mxbi-bi-case/1`), and `fuzz.json`
//! (`mxbi-fuzz/1`), what the run did, without times. The CLI and the
//! Python binding write the same bytes.

use super::{relative_spec, write_atomic, FuzzOutcome};
use crate::bi::{Cell, MAX_CASE_BYTES};
use serde::Serialize;
use std::path::Path;

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
    cell: &'a Cell,
    explanation: &'a [String],
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    write_atomic(path, text).map_err(|e| e.to_string())
}

/// Err when a run without a failure could run no case at all (every
/// drawn case had no cell or only ERROR cells): nothing was checked.
pub fn something_ran(name: &str, o: &FuzzOutcome) -> Result<(), String> {
    if o.failure.is_none() && o.cases_tried > 0 && o.cases_skipped == o.cases_tried {
        return Err(format!(
            "{name}: no case could run ({}); nothing was checked",
            o.first_error.as_deref().unwrap_or("every drawn case had no cell")
        ));
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
pub fn minimal_json(o: &FuzzOutcome, out: &Path) -> Result<Option<String>, String> {
    let Some(f) = &o.failure else {
        return Ok(None);
    };
    let mut file = f.file.clone();
    file.subject = relative_spec(&file.subject, out);
    let mut text = serde_json::to_string_pretty(&file).expect("a case serialises");
    text.push('\n');
    if text.len() as u64 > MAX_CASE_BYTES {
        return Err(format!("the minimal case exceeds {MAX_CASE_BYTES} bytes"));
    }
    Ok(Some(text))
}

/// Writes `OUT/minimal.json` (on a failure), then `OUT/fuzz.json`.
pub fn write_files(out: &Path, name: &str, o: &FuzzOutcome) -> Result<(), String> {
    if let Some(text) = minimal_json(o, out)? {
        write(&out.join("minimal.json"), &text)?;
    }
    write(&out.join("fuzz.json"), &summary_json(name, o))
}
