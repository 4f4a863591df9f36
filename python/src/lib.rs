//! `mxbi._mxbi`: the native half of the Python package. Thin wiring over the
//! mxbi library, in the spirit of `src/cli`: no numerics here. The pure-Python
//! half (`python/mxbi/`) turns user inputs (numpy arrays, anything with
//! `__array__` or DLPack, torch tensors) into C-contiguous arrays of exactly
//! the dtype each function below takes, and wraps the results.
//!
//! Errors are `mxbi.MxbiError` (a `ValueError`) carrying the CLI's one-line
//! message (without its `mxbi: error: ` prefix). The GIL is released while
//! mxbi computes; a Python subject re-acquires it to call its function.

use mxbi::accuracy::{Golden, Standard};
use mxbi::bi::{self, CheckOptions, Family, Report, RowPos};
use mxbi::explain::{self, RevealOptions, Revealed};
use mxbi::format::{self, CastPolicy, CastPreset, CodesMut, Format, NanPolicy, Overflow, Rounding, Stochastic};
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::io::DType;
use mxbi::mx::{self, AxisLayout, MxFormat, MxPreset, ScaleLayout, ScaleMode};
use mxbi::order::{InType, Order, Tree};
use mxbi::subject::spec::RunnerOptions;
use mxbi::subject::{Knobs, Subject, SubjectError};
use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArray2, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::fmt::Display;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

// named `mxbi.MxbiError` (its documented name; tracebacks print it so)
pyo3::create_exception!(
    mxbi,
    MxbiError,
    PyValueError,
    "Bad input or a run that cannot happen: the message is the CLI's one line (exit code 2 there)."
);

fn err(msg: impl Display) -> PyErr {
    MxbiError::new_err(mxbi::message::one_line(&msg.to_string()))
}

/// Parses a name with the library's own parser and message.
fn parse<T: FromStr>(s: &str) -> PyResult<T>
where
    T::Err: Display,
{
    s.parse::<T>().map_err(err)
}

/// A string argument of a public class's method: anything else is an
/// `MxbiError` naming the argument (not PyO3's `TypeError`).
fn str_arg(x: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    match x.cast::<PyString>() {
        Ok(s) => Ok(s.to_string()),
        Err(_) => Err(err(format!("{what}: expected a string, got {}", type_name(x)))),
    }
}

/// An integer argument (Python's or numpy's, never a bool or a float) as a
/// usize: negative, too large or not an integer is an `MxbiError` naming
/// the argument (not PyO3's `OverflowError`/`TypeError`).
fn usize_arg(x: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    let not_int = || err(format!("{what}: expected an integer, got {}", type_name(x)));
    if x.is_instance_of::<pyo3::types::PyBool>() || !x.hasattr("__index__")? {
        return Err(not_int());
    }
    let index = x.py().import("operator")?.getattr("index")?;
    let i = index.call1((x,)).map_err(|_| not_int())?;
    match i.extract::<usize>() {
        Ok(v) => Ok(v),
        Err(_) if i.lt(0)? => Err(err(format!("{what}: expected an integer >= 0, got {i}"))),
        Err(_) => Err(err(format!("{what}: {i} is too large (at most {})", usize::MAX))),
    }
}

/// A value's type and (short) repr for a message: `int 3`.
fn type_name(x: &Bound<'_, PyAny>) -> String {
    let ty = x
        .get_type()
        .name()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".into());
    let r = x.repr().map(|s| s.to_string()).unwrap_or_default();
    let r: String = if r.chars().count() > 60 {
        r.chars().take(57).chain("...".chars()).collect()
    } else {
        r
    };
    format!("{ty} {r}")
}

fn parse_opt<T: FromStr>(s: Option<&str>) -> PyResult<Option<T>>
where
    T::Err: Display,
{
    s.map(parse).transpose()
}

/// A flat vector as a numpy array of this shape (the vector is moved, not copied).
fn array<'py, T: numpy::Element>(py: Python<'py>, v: Vec<T>, shape: &[usize]) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    PyArray1::from_vec(py, v).reshape(shape.to_vec())
}

/// Float values as f32: float32 as they are; float64 only where every value
/// is exactly an f32 (as the CLI's inputs: nothing rounds twice).
fn f32_values<'a>(x: &'a Floats<'_>, what: &str) -> PyResult<std::borrow::Cow<'a, [f32]>> {
    Ok(match x {
        Floats::F32(a) => contiguous(a, what)?.into(),
        Floats::F64(a) => {
            let v = contiguous(a, what)?;
            if let Some((i, x)) = v
                .iter()
                .enumerate()
                .find(|(_, x)| !x.is_nan() && (**x as f32) as f64 != **x)
            {
                return Err(err(format!(
                    "{what}: element {i} ({x:e}) is not exactly representable in f32"
                )));
            }
            v.iter().map(|&x| x as f32).collect::<Vec<f32>>().into()
        }
    })
}

fn shape_of(x: &Floats<'_>) -> Vec<usize> {
    match x {
        Floats::F32(a) => a.shape().to_vec(),
        Floats::F64(a) => a.shape().to_vec(),
    }
}

fn contiguous<'a, T: numpy::Element>(x: &'a PyReadonlyArrayDyn<'_, T>, what: &str) -> PyResult<&'a [T]> {
    x.as_slice()
        .map_err(|_| err(format!("{what}: expected a C-contiguous array")))
}

// ---------------------------------------------------------------- formats

/// Every element format: (name, bits, max, emax, has_inf, has_nan).
#[pyfunction]
fn formats() -> Vec<(&'static str, u32, f64, i32, bool, bool)> {
    Format::ALL
        .iter()
        .map(|f| (f.name(), f.bits(), f.max_value(), f.emax(), f.has_inf(), f.has_nan()))
        .collect()
}

/// Codes (uint16) and their exact values (float64).
type ValueTable<'py> = (Bound<'py, PyArrayDyn<u16>>, Bound<'py, PyArrayDyn<f64>>);

/// Every code of a format and its exact value: (codes uint16, values float64).
#[pyfunction]
fn value_table<'py>(py: Python<'py>, format: &str) -> PyResult<ValueTable<'py>> {
    let f: Format = parse(format)?;
    let (codes, values): (Vec<u16>, Vec<f64>) = f.value_table().into_iter().unzip();
    let n = codes.len();
    Ok((array(py, codes, &[n])?, array(py, values, &[n])?))
}

#[derive(FromPyObject)]
enum Floats<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

#[derive(FromPyObject)]
enum Codes<'py> {
    U8(PyReadonlyArrayDyn<'py, u8>),
    U16(PyReadonlyArrayDyn<'py, u16>),
}

/// Casts float32/float64 values to codes (uint8; uint16 for bf16/f16), as
/// `mxbi cast`.
#[pyfunction]
#[pyo3(signature = (x, to, preset=None, round=None, overflow=None, nan=None, seed=None, sr_bits=None))]
#[allow(clippy::too_many_arguments)]
fn cast<'py>(
    py: Python<'py>,
    x: Floats<'py>,
    to: &str,
    preset: Option<&str>,
    round: Option<&str>,
    overflow: Option<&str>,
    nan: Option<&str>,
    seed: Option<u64>,
    sr_bits: Option<u32>,
) -> PyResult<Bound<'py, PyAny>> {
    let to: Format = parse(to)?;
    let mut p = match parse_opt::<CastPreset>(preset)? {
        Some(pr) => pr.policy(to),
        None => CastPolicy::ieee(to),
    };
    if let Some(r) = parse_opt::<Rounding>(round)? {
        p.rounding = r;
    }
    if let Some(o) = parse_opt::<Overflow>(overflow)? {
        p.overflow = o;
    }
    if let Some(n) = parse_opt::<NanPolicy>(nan)? {
        p.nan = n;
    }
    if seed.is_some() || sr_bits.is_some() {
        if p.rounding != Rounding::Stochastic {
            return Err(err("seed/sr_bits only apply with round='stochastic'"));
        }
        p.stochastic = Stochastic {
            seed: seed.unwrap_or(0),
            bits: sr_bits.unwrap_or(16),
        };
    }
    let shape = match &x {
        Floats::F32(a) => a.shape().to_vec(),
        Floats::F64(a) => a.shape().to_vec(),
    };
    let wide = to.bits() > 8;
    let n: usize = shape.iter().product();
    let mut out8 = if wide { Vec::new() } else { vec![0u8; n] };
    let mut out16 = if wide { vec![0u16; n] } else { Vec::new() };
    let res = {
        let out = if wide {
            CodesMut::U16(&mut out16)
        } else {
            CodesMut::U8(&mut out8)
        };
        match &x {
            Floats::F32(a) => {
                let s = contiguous(a, "x")?;
                py.detach(|| format::cast_f32_slice(s, out, to, &p, 0))
            }
            Floats::F64(a) => {
                let s = contiguous(a, "x")?;
                py.detach(|| format::cast_f64_slice(s, out, to, &p, 0))
            }
        }
    };
    res.map_err(err)?;
    Ok(if wide {
        array(py, out16, &shape)?.into_any()
    } else {
        array(py, out8, &shape)?.into_any()
    })
}

/// Decodes codes (uint8/uint16) of a format to float32, as `mxbi decode`.
#[pyfunction]
fn decode<'py>(py: Python<'py>, codes: Codes<'py>, format: &str) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let f: Format = parse(format)?;
    let (shape, codes): (Vec<usize>, Vec<u16>) = match &codes {
        Codes::U8(a) => (
            a.shape().to_vec(),
            contiguous(a, "codes")?.iter().map(|&c| c as u16).collect(),
        ),
        Codes::U16(a) => (a.shape().to_vec(), contiguous(a, "codes")?.to_vec()),
    };
    if let Some((i, c)) = codes.iter().enumerate().find(|(_, &c)| c as u32 >= f.code_count()) {
        return Err(err(format!(
            "codes: element {i}: code {c:#x} is not a valid {f} code ({} bits)",
            f.bits()
        )));
    }
    let vals: Vec<f32> = py.detach(|| codes.iter().map(|&c| f.decode_f32(c)).collect());
    array(py, vals, &shape)
}

// ---------------------------------------------------------------- MX

fn check_swizzle(shape: &[usize], axis: isize) -> PyResult<()> {
    if shape.len() != 2 || !(axis == -1 || axis == 1) {
        return Err(err(
            "scale_layout='swizzled-128x4' needs a 2-d input with blocks along the last axis",
        ));
    }
    Ok(())
}

type Quantized<'py> = (Bound<'py, PyArrayDyn<u8>>, Bound<'py, PyArrayDyn<u8>>, Option<String>);

/// MX block quantization, as `mxbi quantize`: (codes uint8 of x's shape,
/// E8M0 scales uint8, the `--stats` JSON when `stats`).
#[pyfunction]
#[pyo3(signature = (x, format, preset=None, scale_mode=None, round=None, seed=None, flush_subnormals=false,
                    no_int8_neg2=false, block=32, axis=-1, pad=false, scale_layout="plain", stats=false))]
#[allow(clippy::too_many_arguments)]
fn quantize<'py>(
    py: Python<'py>,
    x: Floats<'py>,
    format: &str,
    preset: Option<&str>,
    scale_mode: Option<&str>,
    round: Option<&str>,
    seed: Option<u64>,
    flush_subnormals: bool,
    no_int8_neg2: bool,
    block: usize,
    axis: isize,
    pad: bool,
    scale_layout: &str,
    stats: bool,
) -> PyResult<Quantized<'py>> {
    let f: MxFormat = parse(format)?;
    let mut p = parse_opt::<MxPreset>(preset)?.unwrap_or(MxPreset::Ocp).policy(f);
    if let Some(m) = parse_opt::<ScaleMode>(scale_mode)? {
        p.scale_mode = m;
    }
    if let Some(r) = parse_opt::<Rounding>(round)? {
        p.element.rounding = r;
    }
    if let Some(s) = seed {
        p.element.stochastic.seed = s;
    }
    p.flush_subnormals |= flush_subnormals;
    if no_int8_neg2 {
        if f != MxFormat::Int8 {
            return Err(err("no_int8_neg2 applies to mxint8 only"));
        }
        p.element.int8_allow_neg2 = false;
    }
    let scale_layout: ScaleLayout = parse(scale_layout)?;
    let shape = shape_of(&x);
    let layout = AxisLayout::new(&shape, axis, block, pad).map_err(err)?;
    if scale_layout == ScaleLayout::Swizzled128x4 {
        check_swizzle(&shape, axis)?;
    }
    let xs = f32_values(&x, "x")?;
    let xs: &[f32] = &xs;
    let (q, st) = py
        .detach(|| -> Result<_, String> {
            let q = mx::quantize(xs, &layout, f, &p).map_err(|e| e.to_string())?;
            let st = if stats {
                let s = mx::QuantStats::compute(xs, &q, &layout, f).map_err(|e| e.to_string())?;
                Some(serde_json::to_string(&s).map_err(|e| e.to_string())?)
            } else {
                None
            };
            Ok((q, st))
        })
        .map_err(err)?;
    let ax = if axis < 0 {
        (axis + shape.len() as isize) as usize
    } else {
        axis as usize
    };
    let (scale_shape, scales) = match scale_layout {
        ScaleLayout::Plain => (AxisLayout::scale_shape(&shape, ax, layout.nblocks), q.scales),
        ScaleLayout::Swizzled128x4 => {
            let s = mx::swizzle_128x4(&q.scales, shape[0], layout.nblocks);
            (vec![s.len()], s)
        }
    };
    Ok((array(py, q.codes, &shape)?, array(py, scales, &scale_shape)?, st))
}

/// Exact MX dequantization, as `mxbi dequantize`: (values, the number of
/// values f32 could not hold exactly; always 0 for dtype f64).
#[pyfunction]
#[pyo3(signature = (codes, scales, format, block=32, axis=-1, pad=false, scale_layout="plain", dtype="f32"))]
#[allow(clippy::too_many_arguments)]
fn dequantize<'py>(
    py: Python<'py>,
    codes: PyReadonlyArrayDyn<'py, u8>,
    scales: PyReadonlyArrayDyn<'py, u8>,
    format: &str,
    block: usize,
    axis: isize,
    pad: bool,
    scale_layout: &str,
    dtype: &str,
) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let f: MxFormat = parse(format)?;
    if dtype != "f32" && dtype != "f64" {
        return Err(err(format!("unknown dtype '{dtype}'; expected f32 or f64")));
    }
    let scale_layout: ScaleLayout = parse(scale_layout)?;
    let shape = codes.shape().to_vec();
    let layout = AxisLayout::new(&shape, axis, block, pad).map_err(err)?;
    let c = contiguous(&codes, "codes")?;
    let raw = contiguous(&scales, "scales")?;
    let scales = match scale_layout {
        ScaleLayout::Plain => raw.to_vec(),
        ScaleLayout::Swizzled128x4 => {
            check_swizzle(&shape, axis)?;
            let want = mx::swizzled_len(shape[0], layout.nblocks);
            if raw.len() != want {
                return Err(err(format!(
                    "scales: swizzled scales for {}x{} need {want} bytes, got {}",
                    shape[0],
                    layout.nblocks,
                    raw.len()
                )));
            }
            mx::unswizzle_128x4(raw, shape[0], layout.nblocks)
        }
    };
    let el = f.element();
    if let Some((i, v)) = c.iter().enumerate().find(|(_, &v)| v as u32 >= el.code_count()) {
        return Err(err(format!("codes: element {i}: code {v:#x} is not a valid {el} code")));
    }
    if dtype == "f32" {
        let (v, inexact) = py.detach(|| mx::dequantize(c, &scales, &layout, f)).map_err(err)?;
        Ok((array(py, v, &shape)?.into_any(), inexact))
    } else {
        let v = py.detach(|| mx::dequantize_f64(c, &scales, &layout, f)).map_err(err)?;
        Ok((array(py, v, &shape)?.into_any(), 0))
    }
}

// ---------------------------------------------------------------- orders

/// An accumulation order (grammar: docs/ORDERS.md). `str()` is its
/// canonical spelling.
#[pyclass(module = "mxbi._mxbi", name = "Order", frozen, eq)]
#[derive(Clone, PartialEq)]
struct PyOrder {
    order: Order,
}

#[pymethods]
impl PyOrder {
    #[new]
    fn new(spec: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyOrder {
            order: parse(&str_arg(spec, "spec")?)?,
        })
    }
    fn __str__(&self) -> String {
        self.order.to_string()
    }
    fn __repr__(&self) -> String {
        format!("Order('{}')", self.order)
    }
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.order.to_string().hash(&mut h);
        h.finish()
    }
    /// The preset this order is, if any (e.g. `hopper-bf16`).
    #[getter]
    fn preset(&self) -> Option<&'static str> {
        self.order.preset_name()
    }
    /// The element type the order's steps read (`f32` for fma/muladd).
    #[getter]
    fn input(&self) -> &'static str {
        bi::input_of(&self.order).name()
    }
    /// The reduction tree for K terms.
    fn tree(&self, k: &Bound<'_, PyAny>) -> PyResult<PyTree> {
        let k = usize_arg(k, "k")?;
        self.order.check_size(k).map_err(err)?;
        Ok(PyTree {
            tree: self.order.compile(k),
        })
    }
    /// The first node where this order's tree and `other`'s differ for K
    /// (the text `mxbi order --diff` prints), or None when they are the same.
    /// `other`: an Order or its spelling.
    fn diff(&self, other: &Bound<'_, PyAny>, k: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        let other: Order = match other.cast::<PyOrder>() {
            Ok(o) => o.get().order,
            Err(_) => match other.cast::<PyString>() {
                Ok(s) => parse(&s.to_string())?,
                Err(_) => {
                    return Err(err(format!(
                        "other: expected an Order or its spelling, got {}",
                        type_name(other)
                    )))
                }
            },
        };
        let k = usize_arg(k, "k")?;
        self.order.check_size(k).map_err(err)?;
        other.check_size(k).map_err(err)?;
        Ok(self.order.compile(k).diff(&other.compile(k)).map(|d| d.to_string()))
    }
}

/// A compiled reduction tree. `str()` is the compressed view `mxbi order
/// --k` prints; `listing()` every node (`--full`).
#[pyclass(module = "mxbi._mxbi", name = "Tree", frozen)]
struct PyTree {
    tree: Tree,
}

#[pymethods]
impl PyTree {
    fn __str__(&self) -> String {
        self.tree.to_string()
    }
    fn __len__(&self) -> usize {
        self.tree.nodes.len()
    }
    /// Every node, one a line, then `root = %N`.
    fn listing(&self) -> String {
        format!("{}root = %{}\n", self.tree.listing(), self.tree.root)
    }
    #[getter]
    fn root(&self) -> u32 {
        self.tree.root
    }
    #[getter]
    fn k(&self) -> usize {
        self.tree.k
    }
    /// One node described in words.
    fn describe(&self, node: &Bound<'_, PyAny>) -> PyResult<String> {
        let node = usize_arg(node, "node")?;
        if node >= self.tree.nodes.len() {
            return Err(err(format!(
                "node {node} is out of range ({} nodes)",
                self.tree.nodes.len()
            )));
        }
        Ok(self.tree.describe_node(node))
    }
}

/// The named presets: (name, the order it expands to).
#[pyfunction]
fn presets() -> Vec<(&'static str, &'static str)> {
    mxbi::order::PRESETS.to_vec()
}

// ---------------------------------------------------------------- GEMM

#[derive(FromPyObject)]
enum Operand<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
    Codes(PyReadonlyArray2<'py, u8>),
}

struct Operands {
    a: Vec<f32>,
    b: Vec<f32>,
    ac: Vec<u8>,
    bc: Vec<u8>,
    sa: Vec<u8>,
    sb: Vec<u8>,
    format: Option<MxFormat>,
    m: usize,
    n: usize,
    k: usize,
    layout: BLayout,
}

impl Operands {
    fn problem(&self) -> Problem<'_> {
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

fn flat<T: numpy::Element + Copy>(x: &PyReadonlyArray2<'_, T>) -> Vec<T> {
    match x.as_slice() {
        Ok(s) => s.to_vec(),
        Err(_) => x.as_array().iter().copied().collect(),
    }
}

/// A float operand as f32 (float64 only when exact, as the CLI).
fn values(x: &Operand<'_>, what: &str) -> PyResult<Vec<f32>> {
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
fn b_layout_of(name: &str) -> PyResult<BLayout> {
    match name {
        "kn" => Ok(BLayout::Kn),
        "nk" => Ok(BLayout::Nk),
        x => Err(err(format!("unknown b_layout '{x}'; expected kn or nk"))),
    }
}

fn operands(
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
fn gemm<'py>(
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
fn trace<'py>(
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

// ---------------------------------------------------------------- subjects and the checker

/// A Python callable as a subject: `fn(a, b) -> out` with a `[M, K]` and
/// b `[K, N]` float32 arrays and out a float32 `[M, N]` array (the Python
/// half widens narrower outputs exactly before they get here). The whole
/// batch is computed and the requested rows are selected.
struct PySubject {
    func: Py<PyAny>,
    name: String,
    /// A `BaseException` that is not an `Exception` (KeyboardInterrupt,
    /// SystemExit): every later call fails at once and the check re-raises it.
    abort: Arc<Mutex<Option<PyErr>>>,
}

impl PySubject {
    /// Stops the checker at once (it re-raises the exception afterwards).
    fn broken(&self) -> SubjectError {
        SubjectError::Broken {
            subject: self.name.clone(),
            why: "interrupted".into(),
        }
    }

    fn failed(&self, why: impl Into<String>) -> SubjectError {
        SubjectError::Failed {
            subject: self.name.clone(),
            why: why.into(),
        }
    }
}

impl Subject for PySubject {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let (Matrix::F32(a), Matrix::F32(b)) = (p.a, p.b) else {
            return Err(SubjectError::Unsupported {
                subject: self.name.clone(),
                why: "MX inputs: a Python subject takes float32 arrays".into(),
            });
        };
        if self.abort.lock().map(|g| g.is_some()).unwrap_or(true) {
            return Err(self.broken());
        }
        let (m, n, k) = (p.m, p.n, p.k);
        let b_kn: std::borrow::Cow<[f32]> = match p.b_layout {
            BLayout::Kn => b.into(),
            BLayout::Nk => (0..k * n).map(|i| b[(i % n) * k + i / n]).collect::<Vec<_>>().into(),
        };
        let out = Python::attach(|py| -> Result<Vec<f32>, SubjectError> {
            let call = || -> PyResult<Bound<'_, PyAny>> {
                let a = PyArray1::from_slice(py, a).reshape([m, k])?;
                let b = PyArray1::from_slice(py, &b_kn).reshape([k, n])?;
                self.func.bind(py).call1((a, b))
            };
            let out = match call() {
                Ok(o) => o,
                Err(e) => {
                    if !e.is_instance_of::<PyException>(py) {
                        if let Ok(mut g) = self.abort.lock() {
                            *g = Some(e);
                        }
                        return Err(self.broken());
                    }
                    return Err(self.failed(mxbi::message::one_line(&e.to_string())));
                }
            };
            let arr = out.extract::<PyReadonlyArrayDyn<'_, f32>>().map_err(|_| {
                let ty = out
                    .get_type()
                    .name()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|_| "?".into());
                self.failed(format!("returned {ty}, expected a float32 array of shape ({m}, {n})"))
            })?;
            if arr.shape() != [m, n] {
                let got: Vec<String> = arr.shape().iter().map(|d| d.to_string()).collect();
                return Err(self.failed(format!(
                    "returned shape ({}), expected ({m}, {n}): one row per row of a, N = {n} columns",
                    got.join(", ")
                )));
            }
            Ok(match arr.as_slice() {
                Ok(s) => s.to_vec(),
                Err(_) => arr.as_array().iter().copied().collect(),
            })
        })?;
        match rows {
            None => Ok(out),
            Some(sel) => {
                let mut v = Vec::with_capacity(sel.len() * n);
                for &r in sel {
                    if r >= m {
                        return Err(SubjectError::Unsupported {
                            subject: self.name.clone(),
                            why: format!("row {r} is out of range (M = {m})"),
                        });
                    }
                    v.extend_from_slice(&out[r * n..(r + 1) * n]);
                }
                Ok(v)
            }
        }
    }
}

struct Parsed {
    subject: Box<dyn Subject>,
    input: Option<InType>,
    boundaries: Vec<usize>,
    /// A Python subject's abort slot (see [`PySubject`]).
    abort: Option<Arc<Mutex<Option<PyErr>>>>,
}

/// What runner subjects (`exec:`, `dump:`) take from the call (the CLI's
/// `--input`, `--timeout`).
#[derive(Clone, Copy, Default)]
struct RunnerCtx {
    input: Option<InType>,
    /// Seconds (None: the default, 120).
    timeout: Option<f64>,
}

/// A subject spec string, as the CLI's `--subject`: the library's one
/// factory (`mxbi::subjects`: model:, dispatch:, op:, exec:, dump: and
/// the GPU kinds, which need a build with feature `cuda` and say so
/// otherwise), with `exec:`/`dump:` taking the call's runner options as
/// `mxbi bi run` does; the CLI's messages.
fn subject_from_spec(spec: &str, ctx: RunnerCtx) -> PyResult<Parsed> {
    let runner = RunnerOptions {
        input: ctx.input,
        timeout: ctx
            .timeout
            .map(|t| mxbi::subject::spec::timeout_secs(t, "timeout"))
            .transpose()
            .map_err(err)?,
        input_flag: "input",
        ..RunnerOptions::default()
    };
    let p = mxbi::subjects::parse(spec, &Knobs::default(), &runner).map_err(err)?;
    Ok(Parsed {
        subject: p.subject,
        input: p.input,
        boundaries: p.boundaries,
        abort: None,
    })
}

/// A subject: a spec string (see [`subject_from_spec`]) or a callable,
/// named `name`.
fn subject(spec: &Bound<'_, PyAny>, name: Option<String>, ctx: RunnerCtx) -> PyResult<Parsed> {
    if let Ok(s) = spec.cast::<PyString>() {
        let spec: String = s.extract()?;
        return subject_from_spec(&spec, ctx);
    }
    if !spec.is_callable() {
        let ty = spec.get_type().name()?.to_string();
        return Err(err(format!(
            "subject: expected a callable fn(a, b) -> out or a spec string (model:ORDER or dispatch:FILE), got {ty}"
        )));
    }
    let name = match name {
        Some(n) => n,
        None => format!(
            "python:{}",
            spec.getattr("__qualname__")
                .map(|q| q.to_string())
                .unwrap_or_else(|_| "fn".into())
        ),
    };
    let abort = Arc::new(Mutex::new(None));
    let s = PySubject {
        func: spec.clone().unbind(),
        name,
        abort: abort.clone(),
    };
    Ok(Parsed {
        subject: Box::new(s),
        input: None,
        boundaries: vec![],
        abort: Some(abort),
    })
}

/// The input type named (the CLI's message), else the subject's own, else f32.
fn in_type(input: Option<&str>, own: Option<InType>) -> PyResult<InType> {
    match input {
        Some(t) => InType::from_name(t).ok_or_else(|| {
            err(format!(
                "unknown input type '{t}'; expected f32, bf16, f16, e4m3 or e5m2"
            ))
        }),
        None => Ok(own.unwrap_or(InType::F32)),
    }
}

/// Re-raises a `BaseException` a Python subject's function raised.
fn take_abort(p: &Parsed) -> PyResult<()> {
    if let Some(slot) = &p.abort {
        if let Some(e) = slot.lock().ok().and_then(|mut g| g.take()) {
            return Err(e);
        }
    }
    Ok(())
}

/// The batch sizes of an `edges` sweep for these boundaries.
#[pyfunction]
fn edge_ms(boundaries: Vec<usize>) -> Vec<usize> {
    bi::edge_ms(&boundaries)
}

/// The report of a check (the JSON of `mxbi bi run --json`, its text,
/// Markdown and JUnit).
#[pyclass(module = "mxbi._mxbi", name = "RawReport", frozen)]
struct PyReport {
    report: Report,
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
fn check<'py>(
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

// ---------------------------------------------------------------- the fuzzer

/// What a fuzz run found (`mxbi fuzz`): the JSON of its `fuzz.json`, and on
/// a failure the minimal case (`mxbi-bi-case/1`) and its setting.
#[pyclass(module = "mxbi._mxbi", name = "FuzzOutcome", frozen)]
struct PyFuzzOutcome {
    /// `fuzz.json`, byte for byte what `mxbi fuzz` writes.
    summary: String,
    /// `minimal.json` (None: no failure).
    minimal: Option<String>,
    /// The minimal case's setting as JSON (None: no failure).
    setting: Option<String>,
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
fn argument_name(msg: &str) -> String {
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
fn seconds(what: &str, x: f64, max: f64, zero_ok: bool) -> PyResult<std::time::Duration> {
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
fn fuzz(
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
fn check_case(
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

// ---------------------------------------------------------------- the explainer

/// The result of [`reveal`]: `str()` is the explainer's text.
#[pyclass(module = "mxbi._mxbi", name = "Revealed", frozen)]
struct PyRevealed {
    r: Revealed,
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
    #[getter]
    fn launches(&self) -> usize {
        self.r.launches
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

/// Recovers a subject's reduction tree at one launch shape (FPRev-style
/// probes through the subject interface).
#[pyfunction]
#[pyo3(signature = (subject, m, k, n, input=None, seed=7, verify_rows=4, name=None))]
#[allow(clippy::too_many_arguments)]
fn reveal(
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
fn diverge(
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

// ---------------------------------------------------------------- accuracy

/// An accuracy report (`mxbi accuracy`): `text()` is what the CLI prints.
#[pyclass(module = "mxbi._mxbi", name = "AccuracyReport", frozen)]
struct PyAccuracy {
    r: mxbi::accuracy::Report,
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

fn output_dtype(s: &str) -> PyResult<DType> {
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
fn accuracy<'py>(
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

#[pymodule]
fn _mxbi(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MxbiError", m.py().get_type::<MxbiError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(formats, m)?)?;
    m.add_function(wrap_pyfunction!(value_table, m)?)?;
    m.add_function(wrap_pyfunction!(cast, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_function(wrap_pyfunction!(quantize, m)?)?;
    m.add_function(wrap_pyfunction!(dequantize, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(gemm, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_class::<PyOrder>()?;
    m.add_class::<PyTree>()?;
    m.add_class::<PyReport>()?;
    m.add_function(wrap_pyfunction!(edge_ms, m)?)?;
    m.add_function(wrap_pyfunction!(reveal, m)?)?;
    m.add_function(wrap_pyfunction!(diverge, m)?)?;
    m.add_function(wrap_pyfunction!(accuracy, m)?)?;
    m.add_function(wrap_pyfunction!(fuzz, m)?)?;
    m.add_function(wrap_pyfunction!(check_case, m)?)?;
    m.add_class::<PyFuzzOutcome>()?;
    m.add_class::<PyRevealed>()?;
    m.add_class::<PyAccuracy>()?;
    Ok(())
}
