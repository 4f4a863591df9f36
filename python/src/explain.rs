//! The explainer: `reveal` and `diverge`.

use mxbi::explain::{self, RevealOptions, Revealed};
use mxbi::order::Order;
use mxbi::subject::Subject;
use pyo3::prelude::*;

use crate::args::{err, parse};
use crate::subjects::{in_type, subject, take_abort, RunnerCtx};
/// The result of [`reveal`]: `str()` is the explainer's text.
#[pyclass(module = "mxbi._mxbi", name = "Revealed", frozen)]
pub(crate) struct PyRevealed {
    pub(crate) r: Revealed,
}

#[pymethods]
impl PyRevealed {
    fn __str__(&self) -> String {
        self.r.to_string()
    }
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string_pretty(&self.r).map_err(err)
    }
    /// The simplest order whose tree is the recovered one and whose bytes
    /// equal the subject's on the verification inputs (None: the grammar
    /// cannot say it).
    #[getter]
    fn order(&self) -> Option<String> {
        self.r.order.map(|o| o.to_string())
    }
    /// Other orders with the same shape and the same bytes.
    #[getter]
    fn equivalent(&self) -> Vec<String> {
        self.r.equivalent.iter().map(|o| o.to_string()).collect()
    }
    /// The named order's other spellings with its tree for K: split parts
    /// that start elsewhere (`align`) but cut the same parts.
    #[getter]
    fn same_parts(&self) -> Vec<String> {
        self.r.same_parts.iter().map(|o| o.to_string()).collect()
    }
    /// The fewest probe answers that prove the recovered tree's wide nodes
    /// (every pair of children of a node of three or more; docs/EXPLAIN.md
    /// "What a wide node costs").
    #[getter]
    fn sibling_pairs(&self) -> u64 {
        self.r.shape.sibling_pairs()
    }
    #[getter]
    fn launches(&self) -> usize {
        self.r.launches
    }
    /// Wall seconds per phase of the reveal, in order (`mxbi reveal
    /// --timings`; not part of the result's bytes).
    #[getter]
    fn timings(&self) -> Vec<(String, f64)> {
        self.r.timings.iter().map(|(w, s)| (w.to_string(), *s)).collect()
    }
    /// Of the launches, those that answered a pair at every element (square
    /// launches; docs/EXPLAIN.md "Pairs in both dimensions").
    #[getter]
    fn grid_launches(&self) -> usize {
        self.r.grid_launches
    }
    #[getter]
    fn probes(&self) -> usize {
        self.r.probes
    }
    #[getter]
    fn disagreements(&self) -> usize {
        self.r.disagreement_count
    }
    /// The recovered summation tree, one node a line (a property, as
    /// `order`: what the reveal found).
    #[getter]
    fn shape(&self) -> String {
        self.r.shape.listing()
    }
}

/// The explainer's built-in family of orders for K terms whose inputs are
/// exact in `input` (the candidates `identify` tries; docs/EXPLAIN.md), each
/// tree distinct for K, simplest first.
#[pyfunction]
#[pyo3(signature = (k, input=None))]
pub(crate) fn family(k: usize, input: Option<&str>) -> PyResult<Vec<String>> {
    let t = in_type(input, None)?;
    mxbi::limits::check_k("k", k).map_err(err)?;
    Ok(explain::candidates::family(explain::candidates::Inputs::of_type(t), k)
        .into_iter()
        .map(|c| c.order.to_string())
        .collect())
}

/// Recovers a subject's reduction tree at one launch shape (FPRev-style
/// probes through the subject interface).
#[pyfunction]
#[pyo3(signature = (subject, m, k, n, input=None, seed=7, verify_rows=4, name=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn reveal(
    py: Python<'_>,
    subject: &Bound<'_, PyAny>,
    m: usize,
    k: usize,
    n: usize,
    input: Option<&str>,
    seed: u64,
    verify_rows: usize,
    name: Option<String>,
) -> PyResult<PyRevealed> {
    let named = input.map(|t| in_type(Some(t), None)).transpose()?;
    let s = self::subject(
        subject,
        name,
        RunnerCtx {
            input: named,
            timeout: None,
        },
    )?;
    let input = in_type(input, s.input)?;
    let o = RevealOptions {
        m,
        k,
        n,
        input,
        seed,
        verify_rows,
    };
    let subj: &dyn Subject = s.subject.as_ref();
    let r = py.detach(|| explain::reveal(subj, o));
    take_abort(&s)?;
    Ok(PyRevealed { r: r.map_err(err)? })
}

/// Where two orders' trees first diverge for K and why, with fixes when the
/// two sides are batch sizes: (the explanation, the fixes).
#[pyfunction]
#[pyo3(signature = (left, right, k, mx=false, m_left=None, m_right=None))]
pub(crate) fn diverge(
    left: &str,
    right: &str,
    k: usize,
    mx: bool,
    m_left: Option<usize>,
    m_right: Option<usize>,
) -> PyResult<(String, Vec<String>)> {
    let (l, r): (Order, Order) = (parse(left)?, parse(right)?);
    l.check_size(k).map_err(err)?;
    r.check_size(k).map_err(err)?;
    let d = explain::diverge(&l, &r, k, mx);
    let varies = match (m_left, m_right) {
        (Some(left), Some(right)) => explain::Varies::BatchSize { left, right },
        _ => explain::Varies::Unknown,
    };
    let fixes = explain::suggest(&d, &varies).iter().map(|f| f.to_string()).collect();
    Ok((d.to_string(), fixes))
}
