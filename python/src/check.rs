//! The batch-invariance checker: `check`, its report, `edge_ms`.

use mxbi::bi::{self, CheckOptions, Family, Report, RowPos};
use mxbi::subject::{Knobs, Subject};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::args::err;
use crate::subjects::{in_type, subject, take_abort, RunnerCtx};
/// The batch sizes of an `edges` sweep for these boundaries.
#[pyfunction]
pub(crate) fn edge_ms(boundaries: Vec<usize>) -> Vec<usize> {
    bi::edge_ms(&boundaries)
}

/// The report of a check (the JSON of `mxbi bi run --json`, its text,
/// Markdown and JUnit).
#[pyclass(module = "mxbi._mxbi", name = "RawReport", frozen)]
pub(crate) struct PyReport {
    pub(crate) report: Report,
}

#[pymethods]
impl PyReport {
    /// The JSON report, byte for byte what `mxbi bi run --json` writes.
    fn to_json(&self) -> PyResult<String> {
        let mut s = serde_json::to_string_pretty(&self.report).map_err(err)?;
        s.push('\n');
        Ok(s)
    }
    /// The SVG heatmap of `mxbi bi run --svg`.
    fn svg(&self) -> String {
        bi::heatmap(&self.report)
    }
    /// What `mxbi bi run` prints: non-passing cells, then the summary line.
    fn text(&self) -> String {
        self.report.text()
    }
    fn markdown(&self) -> String {
        self.report.markdown()
    }
    #[pyo3(signature = (strict=false))]
    fn junit(&self, strict: bool) -> String {
        self.report.junit(strict)
    }
    /// The CLI's exit code for this report: 0, 1, or 2.
    #[pyo3(signature = (strict=false))]
    fn exit_code(&self, strict: bool) -> i32 {
        self.report.exit_code(strict)
    }
    fn summary_line(&self) -> String {
        self.report.summary_line()
    }
    /// Each explanation's lines as `mxbi bi run` prints them.
    fn explanation_lines(&self) -> Vec<Vec<String>> {
        self.report.explanations.iter().map(|e| e.lines()).collect()
    }
}

/// The batch-invariance checker, as `mxbi bi run`.
#[pyfunction]
#[pyo3(signature = (subject, families, k, n, ms=None, rows=None, input=None, seed=1, repeats=3, vs=None, name=None, vs_name=None, timeout=None, witness="auto", explain=true))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn check<'py>(
    py: Python<'py>,
    subject: &Bound<'py, PyAny>,
    families: Vec<String>,
    k: usize,
    n: usize,
    ms: Option<Vec<usize>>,
    rows: Option<Vec<String>>,
    input: Option<&str>,
    seed: u64,
    repeats: usize,
    vs: Option<&Bound<'py, PyAny>>,
    name: Option<String>,
    vs_name: Option<String>,
    timeout: Option<f64>,
    witness: &str,
    explain: bool,
) -> PyResult<PyReport> {
    let mode: bi::witness::WitnessMode = witness.parse().map_err(|e| err(format!("witness: {e}")))?;
    let input_named = input.map(|t| in_type(Some(t), None)).transpose()?;
    let ctx = RunnerCtx {
        input: input_named,
        timeout,
    };
    let spec_of = |x: &Bound<'py, PyAny>| x.cast::<PyString>().ok().map(|s| s.to_string());
    let (spec, vs_spec) = (spec_of(subject), vs.and_then(spec_of));
    let s = self::subject(subject, name, ctx)?;
    let v = vs.map(|v| self::subject(v, vs_name, ctx)).transpose()?;
    let families: Vec<Family> = families
        .iter()
        .map(|f| f.trim().parse::<Family>().map_err(|e| err(format!("families: {e}"))))
        .collect::<PyResult<_>>()?;
    let positions: Vec<RowPos> = rows
        .unwrap_or_default()
        .iter()
        .map(|r| r.trim().parse::<RowPos>().map_err(|e| err(format!("rows: {e}"))))
        .collect::<PyResult<_>>()?;
    let ms = ms.unwrap_or_else(|| bi::edge_ms(&s.boundaries));
    let input = in_type(input, s.input)?;
    let opts = CheckOptions {
        families,
        ms,
        k,
        n,
        positions,
        seed,
        input,
        repeats,
        confirm: bi::DEFAULT_CONFIRM,
    };
    let subj: &dyn Subject = s.subject.as_ref();
    let other: Option<&dyn Subject> = v.as_ref().map(|p| p.subject.as_ref());
    // the witness check as `bi run --witness` (docs/BI.md, "Witnesses")
    let check = bi::witness::WitnessCheck {
        mode,
        search: Default::default(),
    };
    let result = py.detach(|| {
        let mut r = bi::check(subj, other, &opts, &|_, _| {})?;
        let rows = bi::Rows::new(opts.seed, opts.k, opts.n, opts.input);
        bi::witness::apply(&mut r, subj, &opts, &rows, check)?;
        // each failing family explained, as `mxbi bi run` does
        if explain {
            let name = subj.name();
            mxbi::diagnosis::explain_report(
                &mut r,
                subj,
                other,
                spec.as_deref().unwrap_or(&name),
                vs_spec.as_deref(),
                &Knobs::default(),
                &opts,
                bi::Content::default(),
            );
        }
        Ok::<Report, String>(r)
    });
    // a KeyboardInterrupt (or SystemExit) inside fn ends the check
    take_abort(&s)?;
    if let Some(v) = &v {
        take_abort(v)?;
    }
    let report = result.map_err(err)?;
    Ok(PyReport { report })
}
