//! Argument helpers shared by the bindings: the one error type (`mxbi.MxbiError`, the CLI's one-line message), string and integer arguments, numpy arrays in and out.

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::fmt::Display;
use std::str::FromStr;

// named `mxbi.MxbiError` (its documented name; tracebacks print it so)
pyo3::create_exception!(
    mxbi,
    MxbiError,
    PyValueError,
    "Bad input or a run that cannot happen: the message is the CLI's one line (exit code 2 there)."
);

pub(crate) fn err(msg: impl Display) -> PyErr {
    MxbiError::new_err(mxbi::message::one_line(&msg.to_string()))
}

/// Parses a name with the library's own parser and message.
pub(crate) fn parse<T: FromStr>(s: &str) -> PyResult<T>
where
    T::Err: Display,
{
    s.parse::<T>().map_err(err)
}

/// A string argument of a public class's method: anything else is an
/// `MxbiError` naming the argument (not PyO3's `TypeError`).
pub(crate) fn str_arg(x: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    match x.cast::<PyString>() {
        Ok(s) => Ok(s.to_string()),
        Err(_) => Err(err(format!("{what}: expected a string, got {}", type_name(x)))),
    }
}

/// An integer argument (Python's or numpy's, never a bool or a float) as a
/// usize: negative, too large or not an integer is an `MxbiError` naming
/// the argument (not PyO3's `OverflowError`/`TypeError`).
pub(crate) fn usize_arg(x: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
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
pub(crate) fn type_name(x: &Bound<'_, PyAny>) -> String {
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

pub(crate) fn parse_opt<T: FromStr>(s: Option<&str>) -> PyResult<Option<T>>
where
    T::Err: Display,
{
    s.map(parse).transpose()
}

/// A flat vector as a numpy array of this shape (the vector is moved, not copied).
pub(crate) fn array<'py, T: numpy::Element>(
    py: Python<'py>,
    v: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    PyArray1::from_vec(py, v).reshape(shape.to_vec())
}

/// Float values as f32: float32 as they are; float64 only where every value
/// is exactly an f32 (as the CLI's inputs: nothing rounds twice).
pub(crate) fn f32_values<'a>(x: &'a Floats<'_>, what: &str) -> PyResult<std::borrow::Cow<'a, [f32]>> {
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

pub(crate) fn shape_of(x: &Floats<'_>) -> Vec<usize> {
    match x {
        Floats::F32(a) => a.shape().to_vec(),
        Floats::F64(a) => a.shape().to_vec(),
    }
}

pub(crate) fn contiguous<'a, T: numpy::Element>(x: &'a PyReadonlyArrayDyn<'_, T>, what: &str) -> PyResult<&'a [T]> {
    x.as_slice()
        .map_err(|_| err(format!("{what}: expected a C-contiguous array")))
}

#[derive(FromPyObject)]
pub(crate) enum Floats<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

#[derive(FromPyObject)]
pub(crate) enum Codes<'py> {
    U8(PyReadonlyArrayDyn<'py, u8>),
    U16(PyReadonlyArrayDyn<'py, u16>),
}
