//! Accuracy verdicts: `accuracy` and its report.

use mxbi::accuracy::{Golden, Standard};
use mxbi::io::DType;
use mxbi::mx::MxFormat;
use mxbi::subject::Subject;
use numpy::{PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::args::{contiguous, err, parse, parse_opt};
use crate::gemm::{b_layout_of, operands, Operand};
use crate::subjects::{subject, take_abort, RunnerCtx};
/// An accuracy report (`mxbi accuracy`): `text()` is what the CLI prints.
#[pyclass(module = "mxbi._mxbi", name = "AccuracyReport", frozen)]
pub(crate) struct PyAccuracy {
    pub(crate) r: mxbi::accuracy::Report,
}

#[pymethods]
impl PyAccuracy {
    fn text(&self) -> String {
        self.r.text()
    }
    /// The JSON `mxbi accuracy --json` prints.
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string_pretty(&self.r).map_err(err)
    }
    #[getter]
    fn passed(&self) -> bool {
        self.r.passed()
    }
}

pub(crate) fn output_dtype(s: &str) -> PyResult<DType> {
    let d = DType::from_name(s).ok_or_else(|| err(format!("unknown dtype '{s}'")))?;
    match d {
        DType::F32 | DType::F64 | DType::BF16 | DType::F16 | DType::F8E4M3 | DType::F8E5M2 => Ok(d),
        _ => Err(err(format!(
            "dtype {s}: expected an output type: f32, f64, bf16, f16, e4m3, e5m2"
        ))),
    }
}

/// Judges an output against a golden (given, or the exact product of
/// `a`/`b`) and a benchmark (values, or a subject run on `a`/`b`), as
/// `mxbi accuracy`.
#[pyfunction]
#[pyo3(signature = (actual, dtype, standard="atk", golden=None, benchmark=None, a=None, b=None, b_layout="kn",
                    format=None, a_scales=None, b_scales=None, subject=None, rtol=None, atol=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn accuracy<'py>(
    py: Python<'py>,
    actual: PyReadonlyArrayDyn<'py, f64>,
    dtype: &str,
    standard: &str,
    golden: Option<PyReadonlyArrayDyn<'py, f64>>,
    benchmark: Option<PyReadonlyArrayDyn<'py, f64>>,
    a: Option<Operand<'py>>,
    b: Option<Operand<'py>>,
    b_layout: &str,
    format: Option<&str>,
    a_scales: Option<PyReadonlyArrayDyn<'py, u8>>,
    b_scales: Option<PyReadonlyArrayDyn<'py, u8>>,
    subject: Option<&Bound<'py, PyAny>>,
    rtol: Option<f64>,
    atol: Option<f64>,
) -> PyResult<PyAccuracy> {
    let mut standard: Standard = parse(standard)?;
    // named wrongly is refused even where a golden is given (no a, b to read them for)
    b_layout_of(b_layout)?;
    parse_opt::<MxFormat>(format)?;
    if rtol.is_some() || atol.is_some() {
        let Standard::AssertClose { rtol: r, atol: t } = &mut standard else {
            return Err(err("rtol/atol apply to standard='assert-close' only"));
        };
        *r = rtol;
        *t = atol;
    }
    let dtype = output_dtype(dtype)?;
    let shape = actual.shape().to_vec();
    let actual = contiguous(&actual, "actual")?.to_vec();
    let same = |what: &str, got: &[usize]| -> PyResult<()> {
        if got != shape.as_slice() {
            return Err(err(format!(
                "shape mismatch: {what} is {got:?}, the actual output is {shape:?}"
            )));
        }
        Ok(())
    };
    let bench_values = match &benchmark {
        Some(v) => {
            same("the benchmark", v.shape())?;
            Some(contiguous(v, "benchmark")?.to_vec())
        }
        None => None,
    };
    let (gold, bench) = match (golden, a, b) {
        (Some(g), None, None) => {
            if subject.is_some() {
                return Err(err("a benchmark subject needs a and b (its inputs)"));
            }
            same("the golden", g.shape())?;
            (Golden::given(contiguous(&g, "golden")?.to_vec()), bench_values)
        }
        (None, Some(a), Some(b)) => {
            let o = operands(&a, &b, b_layout, format, a_scales, b_scales)?;
            if shape != [o.m, o.n] {
                return Err(err(format!(
                    "shape mismatch: the actual output is {shape:?}, A x B is [{}, {}]",
                    o.m, o.n
                )));
            }
            let g = py.detach(|| mxbi::accuracy::golden::gemm(&o.problem())).map_err(err)?;
            let bench = match subject {
                Some(spec) => {
                    let s = self::subject(spec, None, RunnerCtx::default())?;
                    let subj: &dyn Subject = s.subject.as_ref();
                    let out = py.detach(|| subj.run(&o.problem(), None));
                    take_abort(&s)?;
                    Some(out.map_err(err)?.into_iter().map(f64::from).collect())
                }
                None => bench_values,
            };
            (g, bench)
        }
        (Some(_), _, _) => return Err(err("give a golden or a and b, not both")),
        _ => return Err(err("a golden is needed: golden=, or a= and b= to compute it")),
    };
    let r = py
        .detach(|| mxbi::accuracy::judge(&standard, dtype, &actual, bench.as_deref(), &gold))
        .map_err(err)?;
    Ok(PyAccuracy { r })
}
