//! `mxbi bi run CASE.json`: a case file (`mxbi-bi-case/1`, contract in
//! `bi::case`) run exactly as the flag form would run it, its name and
//! standards carried into the report. `mxbi bi schema` prints the case
//! format's JSON Schema.

use super::bi_report::{emit, progress_bar, tick, ReportArgs};
use super::subject_specs::parse_pair;
use super::{CliError, Outcome, Result};
use mxbi::bi::{case_schema, check_content, Case, CaseInfo, MAX_CASE_BYTES};
use mxbi::subject::spec::{Parsed, RunnerOptions};
use std::path::Path;

/// A subject spec with a relative `dispatch:` or `dump:` path resolved
/// against the case file's folder (a case names its table or dump next to
/// itself). An `exec:` command is a shell line, not a path: its runner
/// starts in the case file's folder instead ([`run_case`]).
pub(super) fn resolve_spec(spec: &str, base: &Path) -> String {
    match spec.split_once(':') {
        Some((kind @ ("dispatch" | "dump"), p)) if Path::new(p).is_relative() => {
            format!("{kind}:{}", base.join(p).display())
        }
        _ => spec.to_string(),
    }
}

/// Reads and parses a case file (size-bounded; errors name the JSON path).
pub fn load(path: &Path) -> Result<Case> {
    let name = path.display().to_string();
    let len = std::fs::metadata(path)
        .map_err(|e| CliError(format!("{name}: {e}")))?
        .len();
    if len > MAX_CASE_BYTES {
        return Err(CliError(format!(
            "{name}: {len} bytes (a case has at most {MAX_CASE_BYTES})"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| CliError(format!("{name}: {e}")))?;
    Case::parse(&name, &text).map_err(CliError)
}

/// Runs the case file at `path`; an `exec:` subject in it only when
/// `allow_exec` (`--allow-exec`) or MXBI_ALLOW_EXEC=1 allows it
/// ([`mxbi::subjects::allow_exec`]), else exit 2 naming the command.
pub fn run_case(path: &Path, out: &ReportArgs, allow_exec: bool) -> Result<Outcome> {
    let name = path.display().to_string();
    let case = load(path)?;
    mxbi::subjects::allow_exec::check(&name, &case, allow_exec, "--allow-exec").map_err(CliError)?;
    let base = path.parent().unwrap_or(Path::new(""));
    let runner = RunnerOptions {
        input: case.input.map(|i| i.0),
        // an empty parent is the current folder
        dir: Some(if base.as_os_str().is_empty() {
            Path::new(".").to_path_buf()
        } else {
            base.to_path_buf()
        }),
        ..RunnerOptions::default()
    };
    let vs_spec = case.vs.as_deref().map(|s| resolve_spec(s, base));
    let (mut subject, vs) = parse_pair(&resolve_spec(&case.subject, base), vs_spec.as_deref(), &runner)?;
    // a subject setting (op: scale kinds, world size) builds the subject under it
    if let Some(k) = case.knobs.filter(|k| !k.is_empty()) {
        let s = mxbi::subjects::subject_from_spec(&resolve_spec(&case.subject, base), &k)
            .map_err(|e| CliError(format!("{name}: knobs: {e}")))?;
        subject = Parsed::of(s);
    }
    let opts = case
        .options(subject.input, &subject.boundaries)
        .map_err(|e| CliError(format!("{name}: {e}")))?;
    let acc = case.standard.as_ref().and_then(|s| s.acc.as_deref());
    let acc_standard = acc.map(|a| super::accuracy::case_standard(&name, a)).transpose()?;
    let pb = progress_bar();
    let report = check_content(
        subject.subject.as_ref(),
        vs.as_ref().map(|v| v.subject.as_ref()),
        &opts,
        case.content.unwrap_or_default(),
        &tick(&pb),
    );
    pb.finish_and_clear();
    let mut report = report.map_err(|e| CliError(format!("{name}: {e}")))?;
    super::bi_report::mark_replayed_repeats(&case.subject, &mut report);
    if let (Some(a), Some(std)) = (acc, &acc_standard) {
        let v = super::accuracy::case_accuracy(a, std, &case.subject, subject.subject.as_ref(), &opts)
            .map_err(|e| CliError(format!("{name}: {}", e.0)))?;
        report.accuracy = Some(v);
    }
    report.case = Some(CaseInfo {
        name: case.name.clone(),
        standard: case.standard.clone(),
    });
    if !out.no_explain {
        let spec = resolve_spec(&case.subject, base);
        let knobs = case.knobs.unwrap_or_default();
        let setup = mxbi::diagnosis::CellSetup {
            subject: subject.subject.as_ref(),
            vs: vs.as_ref().map(|v| v.subject.as_ref()),
            spec: &spec,
            vs_spec: vs_spec.as_deref(),
            knobs: &knobs,
            opts: &opts,
            content: case.content.unwrap_or_default(),
        };
        mxbi::diagnosis::explain_failures(&mut report, &setup);
    }
    emit(&report, out)
}

pub fn schema() -> Result<Outcome> {
    out!("{}", case_schema());
    Ok(Outcome::Held)
}
