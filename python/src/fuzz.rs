//! The fuzzer and case files: `fuzz` (the CLI's files and summary) and `check_case`.

use mxbi::bi::{self, Report};
use mxbi::subject::{Knobs, Subject};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::args::err;
use crate::check::PyReport;
use crate::subjects::{in_type, subject, subject_from_spec, take_abort, Parsed, RunnerCtx};
/// What a fuzz run found (`mxbi fuzz`): the JSON of its `fuzz.json`, and on
/// a failure the minimal case (`mxbi-bi-case/1`) and its setting.
#[pyclass(module = "mxbi._mxbi", name = "FuzzOutcome", frozen)]
pub(crate) struct PyFuzzOutcome {
    /// `fuzz.json`, byte for byte what `mxbi fuzz` writes.
    pub(crate) summary: String,
    /// `minimal.json` (None: no failure).
    pub(crate) minimal: Option<String>,
    /// The minimal case's setting as JSON (None: no failure).
    pub(crate) setting: Option<String>,
}

#[pymethods]
impl PyFuzzOutcome {
    /// `fuzz.json`: seed, cases tried, the case found and the minimal one,
    /// the failing cell, the explanation (no times).
    fn summary_json(&self) -> String {
        self.summary.clone()
    }
    /// `minimal.json`, or None when no case failed.
    fn minimal_json(&self) -> Option<String> {
        self.minimal.clone()
    }
    /// The minimal case's setting (family, m, base_m, k, n, row, input,
    /// content, knobs, seed) as JSON, or None when no case failed.
    fn setting_json(&self) -> Option<String> {
        self.setting.clone()
    }
}

/// A library message that starts with the CLI's flag (`--max-k 0 is out of
/// range`) names the Python argument instead (`max_k 0 is out of range`).
pub(crate) fn argument_name(msg: &str) -> String {
    match msg.strip_prefix("--") {
        Some(rest) => {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(rest.len());
            format!("{}{}", rest[..end].replace('-', "_"), &rest[end..])
        }
        None => msg.to_string(),
    }
}

/// Seconds as a duration, checked (the CLI's messages).
pub(crate) fn seconds(what: &str, x: f64, max: f64, zero_ok: bool) -> PyResult<std::time::Duration> {
    let ok = if zero_ok { x >= 0.0 } else { x > 0.0 };
    if !(ok && x <= max) {
        let range = if zero_ok { ", 0 or more" } else { " in (0, 86400]" };
        return Err(err(format!("{what} {x}: expected seconds{range}")));
    }
    Ok(std::time::Duration::from_secs_f64(x))
}

/// Property-based search for a batch-invariance failure, shrunk to a
/// minimal case, as `mxbi fuzz` (the library's `fuzz::fuzz_with`). A spec
/// string is read as the CLI reads `--subject` (its K boundaries, its knob
/// settings); a callable is a [`PySubject`] as for [`check`]. With `out`,
/// `OUT/fuzz.json` and on a failure `OUT/minimal.json` are written as the
/// CLI writes them. `confirm`: replays that must all fail again before a
/// failure is shrunk and before the minimal case is the result (`--confirm`;
/// a failure that does not replay every time is listed under `non_det` in
/// `fuzz.json`); `others`: what the non-target rows may hold besides
/// `drawn` (`--others`). The GIL is released while mxbi computes.
#[pyfunction]
#[pyo3(signature = (subject, families=vec![], classes=vec![], budget=60.0, max_cases=None, seed=1, out=None,
                    corpus=None, input=None, max_m=513, max_k=4096, max_n=64, max_shrink_runs=400,
                    k_boundaries=vec![], name=None, timeout=None, confirm=3, others=vec![]))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn fuzz(
    py: Python<'_>,
    subject: &Bound<'_, PyAny>,
    families: Vec<String>,
    classes: Vec<String>,
    budget: f64,
    max_cases: Option<u64>,
    seed: u64,
    out: Option<std::path::PathBuf>,
    corpus: Option<std::path::PathBuf>,
    input: Option<&str>,
    max_m: usize,
    max_k: usize,
    max_n: usize,
    max_shrink_runs: u64,
    k_boundaries: Vec<usize>,
    name: Option<String>,
    timeout: Option<f64>,
    confirm: u32,
    others: Vec<String>,
) -> PyResult<PyFuzzOutcome> {
    use mxbi::fuzz::{fuzz_with, FuzzConfig, FuzzError};
    let budget = seconds("budget", budget, 86_400.0 * 365.0, true)?;
    let timeout = timeout.unwrap_or(120.0);
    seconds("timeout", timeout, 86_400.0, false)?;
    let input = input.map(|t| in_type(Some(t), None)).transpose()?;
    let classes = classes
        .iter()
        .map(|c| {
            c.trim()
                .parse::<bi::ContentClass>()
                .map_err(|e| err(format!("classes: {e}")))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let others = others
        .iter()
        .map(|c| c.trim().parse::<bi::Others>().map_err(|e| err(format!("others: {e}"))))
        .collect::<PyResult<Vec<_>>>()?;
    let families: Vec<String> = families.iter().map(|f| f.trim().to_string()).collect();
    // a spec: the CLI's own reading; a callable: the checker's Python subject
    let (parsed, spec, t_boundaries, knobs, k_multiple) = if let Ok(s) = subject.cast::<PyString>() {
        let spec: String = s.extract()?;
        let t = mxbi::subjects::fuzz_target::target(&spec, input, timeout).map_err(err)?;
        let parsed = Parsed {
            input: t.subject.input(),
            boundaries: t.subject.m_boundaries(),
            subject: t.subject,
            abort: None,
        };
        (parsed, spec, t.k_boundaries, t.knobs, t.k_multiple)
    } else {
        let parsed = self::subject(subject, name, RunnerCtx { input, timeout: None })?;
        let spec = parsed.subject.name();
        (parsed, spec, Vec::new(), vec![Knobs::default()], 1)
    };
    let mut kb = t_boundaries;
    kb.extend(k_boundaries);
    let corpus = corpus.or_else(|| out.as_ref().map(|o| o.join("corpus")));
    if let Some(o) = &out {
        std::fs::create_dir_all(o).map_err(|e| err(format!("out {}: {e}", o.display())))?;
    }
    let cfg = FuzzConfig {
        seed,
        budget,
        max_cases,
        families,
        classes,
        others,
        knobs,
        spec: spec.clone(),
        k_boundaries: kb,
        input,
        max_m,
        max_k,
        max_n,
        k_multiple,
        corpus,
        max_shrink_runs,
        confirm,
    };
    let subj: &dyn Subject = parsed.subject.as_ref();
    let is_spec = parsed.abort.is_none();
    let factory = move |k: &Knobs| -> Result<Box<dyn Subject>, String> {
        if is_spec {
            mxbi::subjects::subject_from_spec(&spec, k)
        } else {
            Err(format!("knob setting {}: a Python callable has no settings", k.id()))
        }
    };
    let res = py.detach(|| fuzz_with(subj, &factory, &cfg));
    // a KeyboardInterrupt (or SystemExit) inside fn ends the run
    take_abort(&parsed)?;
    let o = res.map_err(|e| match e {
        FuzzError::BadInput(e) | FuzzError::Broken(e) => err(argument_name(&e)),
    })?;
    let name = subj.name();
    mxbi::fuzz::something_ran(&name, &o).map_err(err)?;
    let here = std::path::PathBuf::from(".");
    let minimal = mxbi::fuzz::minimal_json(&o, out.as_deref().unwrap_or(&here)).map_err(err)?;
    if let Some(dir) = &out {
        mxbi::fuzz::write_files(dir, &name, &o).map_err(err)?;
    }
    let setting = o.failure.as_ref().map(|f| {
        let c = &f.case;
        serde_json::json!({
            "family": c.family.name(),
            "m": c.m,
            "base_m": c.base_m,
            "k": c.k,
            "n": c.n,
            "row": c.row.to_string(),
            "input": c.input.name(),
            "content": c.content.describe(),
            "knobs": (!c.knobs.is_empty()).then(|| c.knobs.id()),
            "seed": c.seed,
            "describe": c.describe(),
            "found": f.found.describe(),
        })
        .to_string()
    });
    Ok(PyFuzzOutcome {
        summary: mxbi::fuzz::summary_json(&name, &o),
        minimal,
        setting,
    })
}

/// Runs a case file (`mxbi-bi-case/1` text) as `mxbi bi run CASE` does, on
/// `subject` (a callable or a spec string; None: the case's own subject).
/// Paths in the case's subject are read from the current folder. The
/// case's own `exec:` subject runs only with `allow_exec` (or
/// MXBI_ALLOW_EXEC=1; docs/BI.md, "Case files are data"), else
/// `MxbiError` naming the command.
#[pyfunction]
#[pyo3(signature = (case, subject=None, name=None, timeout=None, allow_exec=false, explain=true))]
pub(crate) fn check_case(
    py: Python<'_>,
    case: &str,
    subject: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
    timeout: Option<f64>,
    allow_exec: bool,
    explain: bool,
) -> PyResult<PyReport> {
    let c = bi::Case::parse("case", case).map_err(err)?;
    let ctx = RunnerCtx {
        input: c.input.map(|i| i.0),
        timeout,
    };
    if c.vs.is_some() {
        return Err(err("case: a switch case (vs) is run with mxbi bi run"));
    }
    if subject.is_none() {
        mxbi::subjects::allow_exec::check("case", &c, allow_exec, "allow_exec=True").map_err(err)?;
    }
    let knobs = c.knobs.filter(|k| !k.is_empty());
    let s = match (subject, knobs) {
        (Some(f), None) => self::subject(f, name, ctx)?,
        (Some(_), Some(k)) => {
            return Err(err(format!(
                "case: knob setting {} needs the case's own subject (subject=None)",
                k.id()
            )))
        }
        (None, None) => subject_from_spec(&c.subject, ctx)?,
        (None, Some(k)) => {
            let s = mxbi::subjects::subject_from_spec(&c.subject, &k).map_err(err)?;
            Parsed {
                input: s.input(),
                boundaries: s.m_boundaries(),
                subject: s,
                abort: None,
            }
        }
    };
    let opts = c
        .options(s.input, &s.boundaries)
        .map_err(|e| err(format!("case: {e}")))?;
    let content = c.content.unwrap_or_default();
    let subj: &dyn Subject = s.subject.as_ref();
    let spec = match subject {
        Some(x) => x.cast::<PyString>().ok().map(|s| s.to_string()),
        None => Some(c.subject.clone()),
    };
    let knobs_used = c.knobs.unwrap_or_default();
    let result = py.detach(|| {
        let mut r = bi::check_content(subj, None, &opts, content, &|_, _| {})?;
        // each failing family explained, as `mxbi bi run CASE` does
        if explain {
            let name = subj.name();
            let spec = spec.as_deref().unwrap_or(&name);
            mxbi::diagnosis::explain_report(&mut r, subj, None, spec, None, &knobs_used, &opts, content);
        }
        Ok::<Report, String>(r)
    });
    take_abort(&s)?;
    let mut report = result.map_err(err)?;
    report.case = Some(bi::CaseInfo {
        name: c.name.clone(),
        standard: c.standard.clone(),
    });
    Ok(PyReport { report })
}
