//! GEMM under an order: operands from numpy, `gemm` and `trace`.

use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::mx::MxFormat;
use mxbi::order::Order;
use numpy::{PyArrayDyn, PyReadonlyArray2, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::args::{array, contiguous, err, parse, parse_opt};
#[derive(FromPyObject)]
pub(crate) enum Operand<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
    Codes(PyReadonlyArray2<'py, u8>),
}

pub(crate) struct Operands {
    pub(crate) a: Vec<f32>,
    pub(crate) b: Vec<f32>,
    pub(crate) ac: Vec<u8>,
    pub(crate) bc: Vec<u8>,
    pub(crate) sa: Vec<u8>,
    pub(crate) sb: Vec<u8>,
    pub(crate) format: Option<MxFormat>,
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) layout: BLayout,
}

impl Operands {
    pub(crate) fn problem(&self) -> Problem<'_> {
        let (a, b) = match self.format {
            None => (Matrix::F32(&self.a), Matrix::F32(&self.b)),
            Some(f) => (
                Matrix::Mx {
                    codes: &self.ac,
                    scales: &self.sa,
                    format: f,
                },
                Matrix::Mx {
                    codes: &self.bc,
                    scales: &self.sb,
                    format: f,
                },
            ),
        };
        Problem {
            a,
            b,
            m: self.m,
            n: self.n,
            k: self.k,
            b_layout: self.layout,
        }
    }
}

pub(crate) fn flat<T: numpy::Element + Copy>(x: &PyReadonlyArray2<'_, T>) -> Vec<T> {
    match x.as_slice() {
        Ok(s) => s.to_vec(),
        Err(_) => x.as_array().iter().copied().collect(),
    }
}

/// A float operand as f32 (float64 only when exact, as the CLI).
pub(crate) fn values(x: &Operand<'_>, what: &str) -> PyResult<Vec<f32>> {
    match x {
        Operand::F32(a) => Ok(flat(a)),
        Operand::F64(a) => {
            let v = flat(a);
            if let Some((i, x)) = v
                .iter()
                .enumerate()
                .find(|(_, x)| !x.is_nan() && (**x as f32) as f64 != **x)
            {
                return Err(err(format!(
                    "{what}: element {i} ({x:e}) is not exactly representable in f32"
                )));
            }
            Ok(v.iter().map(|&x| x as f32).collect())
        }
        Operand::Codes(_) => Err(err(format!(
            "{what}: expected f32, f16 or bf16 values, got uint8 (MX codes need format=)"
        ))),
    }
}

/// B's layout by name: kn (`[K, N]`) or nk (`[N, K]`).
pub(crate) fn b_layout_of(name: &str) -> PyResult<BLayout> {
    match name {
        "kn" => Ok(BLayout::Kn),
        "nk" => Ok(BLayout::Nk),
        x => Err(err(format!("unknown b_layout '{x}'; expected kn or nk"))),
    }
}

pub(crate) fn operands(
    a: &Operand<'_>,
    b: &Operand<'_>,
    b_layout: &str,
    format: Option<&str>,
    a_scales: Option<PyReadonlyArrayDyn<'_, u8>>,
    b_scales: Option<PyReadonlyArrayDyn<'_, u8>>,
) -> PyResult<Operands> {
    let layout = b_layout_of(b_layout)?;
    let dims = |o: &Operand<'_>| match o {
        Operand::F32(x) => (x.shape()[0], x.shape()[1]),
        Operand::F64(x) => (x.shape()[0], x.shape()[1]),
        Operand::Codes(x) => (x.shape()[0], x.shape()[1]),
    };
    let (m, ka) = dims(a);
    let (b0, b1) = dims(b);
    let (kb, n) = if layout == BLayout::Kn { (b0, b1) } else { (b1, b0) };
    if ka != kb {
        return Err(err(format!(
            "shape mismatch: A is [{m}, {ka}] but B ({}) has K = {kb}",
            if layout == BLayout::Kn { "[K, N]" } else { "[N, K]" }
        )));
    }
    let format: Option<MxFormat> = parse_opt(format)?;
    let mut o = Operands {
        a: vec![],
        b: vec![],
        ac: vec![],
        bc: vec![],
        sa: vec![],
        sb: vec![],
        format,
        m,
        n,
        k: ka,
        layout,
    };
    match format {
        None => {
            if a_scales.is_some() || b_scales.is_some() {
                return Err(err("a_scales/b_scales need format (MX inputs)"));
            }
            o.a = values(a, "a")?;
            o.b = values(b, "b")?;
        }
        Some(_) => {
            let (Some(sa), Some(sb)) = (a_scales, b_scales) else {
                return Err(err("MX inputs need a_scales and b_scales"));
            };
            match (a, b) {
                (Operand::Codes(a), Operand::Codes(b)) => {
                    o.ac = flat(a);
                    o.bc = flat(b);
                }
                _ => return Err(err("MX codes must be uint8")),
            }
            o.sa = contiguous(&sa, "a_scales")?.to_vec();
            o.sb = contiguous(&sb, "b_scales")?.to_vec();
        }
    }
    Ok(o)
}

/// `C = A x B` under an order, as `mxbi gemm`: float32 `[M, N]` (or
/// `[len(rows), N]`).
#[pyfunction]
#[pyo3(signature = (a, b, order, b_layout="kn", rows=None, generic=false, format=None, a_scales=None, b_scales=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<'py>(
    py: Python<'py>,
    a: Operand<'py>,
    b: Operand<'py>,
    order: &str,
    b_layout: &str,
    rows: Option<Vec<usize>>,
    generic: bool,
    format: Option<&str>,
    a_scales: Option<PyReadonlyArrayDyn<'py, u8>>,
    b_scales: Option<PyReadonlyArrayDyn<'py, u8>>,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let order: Order = parse(order)?;
    let o = operands(&a, &b, b_layout, format, a_scales, b_scales)?;
    let rows = rows.as_deref();
    let c = py
        .detach(|| {
            let p = o.problem();
            if generic {
                mxbi::gemm::gemm_generic(&order, &p, rows)
            } else {
                mxbi::gemm::gemm(&order, &p, rows)
            }
        })
        .map_err(err)?;
    array(py, c, &[rows.map_or(o.m, |r| r.len()), o.n])
}

/// Every intermediate value of one output element, as `mxbi trace`:
/// a list of (node, op, value, bits).
#[pyfunction]
#[pyo3(signature = (a, b, order, row, col, b_layout="kn", format=None, a_scales=None, b_scales=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn trace<'py>(
    py: Python<'py>,
    a: Operand<'py>,
    b: Operand<'py>,
    order: &str,
    row: usize,
    col: usize,
    b_layout: &str,
    format: Option<&str>,
    a_scales: Option<PyReadonlyArrayDyn<'py, u8>>,
    b_scales: Option<PyReadonlyArrayDyn<'py, u8>>,
) -> PyResult<Vec<(usize, String, f32, String)>> {
    let order: Order = parse(order)?;
    let o = operands(&a, &b, b_layout, format, a_scales, b_scales)?;
    let steps = py
        .detach(|| mxbi::gemm::trace(&order, &o.problem(), row, col))
        .map_err(err)?;
    Ok(steps.into_iter().map(|s| (s.node, s.op, s.value, s.bits)).collect())
}
