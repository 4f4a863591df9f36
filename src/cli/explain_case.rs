//! `mxbi explain --case CASE --cell ID`: one cell of a case file's check
//! explained ([`mxbi::diagnosis::explain_cell`]), printed as text or JSON.

use super::bi_case::resolve_spec;
use super::{CliError, Outcome, Result};
use mxbi::diagnosis::{explain_cell, CellSetup};
use mxbi::subject::spec::Parsed;
use std::path::Path;

/// `mxbi explain --case CASE --cell ID`: the cell's two sides re-run on the
/// case's subject, and the target row's two observations explained.
/// `view`: the ULP map's tile width, the K profile's chunk, and whether to
/// add the exactness analysis; `as_json`: print JSON.
pub(super) fn explain_case_cell(
    case_path: &Path,
    cell: &str,
    allow_exec: bool,
    view: (usize, usize, bool),
    as_json: bool,
) -> Result<Outcome> {
    let case = super::bi_case::load(case_path)?;
    mxbi::subjects::allow_exec::check(&case_path.display().to_string(), &case, allow_exec, "--allow-exec")
        .map_err(CliError)?;
    let base = case_path.parent().unwrap_or(Path::new("."));
    let spec = resolve_spec(&case.subject, base);
    let mut subject = super::subject_specs::parse_subject(&spec)?;
    // a subject setting (op: scale kinds, world size) builds the subject
    // under it, as `bi run CASE` does
    let knobs = case.knobs.unwrap_or_default();
    if !knobs.is_empty() {
        let s = mxbi::subjects::subject_from_spec(&spec, &knobs).map_err(|e| CliError(format!("knobs: {e}")))?;
        subject = Parsed::of(s);
    }
    let vs_spec = case.vs.as_ref().map(|v| resolve_spec(v, base));
    let vs = vs_spec
        .as_deref()
        .map(super::subject_specs::parse_subject)
        .transpose()?;
    let opts = case.options(subject.input, &subject.boundaries).map_err(CliError)?;
    opts.validate(vs.is_some()).map_err(CliError)?;
    let setup = CellSetup {
        subject: subject.subject.as_ref(),
        vs: vs.as_ref().map(|v| v.subject.as_ref()),
        spec: &spec,
        vs_spec: vs_spec.as_deref(),
        knobs: &knobs,
        opts: &opts,
        content: case.content.unwrap_or_default(),
    };
    let e = explain_cell(&setup, cell, view).map_err(|e| CliError(e.0))?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&e.json)?);
    } else {
        out!("{}", e.text);
    }
    Ok(if e.held { Outcome::Held } else { Outcome::Failed })
}
