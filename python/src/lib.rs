//! `mxbi._mxbi`: the native half of the Python package. Thin wiring over the
//! mxbi library, in the spirit of `src/cli`: no numerics here. The pure-Python
//! half (`python/mxbi/`) turns user inputs (numpy arrays, anything with
//! `__array__` or DLPack, torch tensors) into C-contiguous arrays of exactly
//! the dtype each function below takes, and wraps the results.
//!
//! Errors are `mxbi.MxbiError` (a `ValueError`) carrying the CLI's one-line
//! message (without its `mxbi: error: ` prefix). The GIL is released while
//! mxbi computes; a Python subject re-acquires it to call its function.

mod accuracy;
mod args;
mod check;
mod explain;
mod formats;
mod fuzz;
mod gemm;
mod mx;
mod orders;
mod subjects;

use args::MxbiError;
use pyo3::prelude::*;

#[pymodule]
fn _mxbi(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MxbiError", m.py().get_type::<MxbiError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(formats::formats, m)?)?;
    m.add_function(wrap_pyfunction!(formats::value_table, m)?)?;
    m.add_function(wrap_pyfunction!(formats::cast, m)?)?;
    m.add_function(wrap_pyfunction!(formats::decode, m)?)?;
    m.add_function(wrap_pyfunction!(mx::quantize, m)?)?;
    m.add_function(wrap_pyfunction!(mx::dequantize, m)?)?;
    m.add_function(wrap_pyfunction!(orders::presets, m)?)?;
    m.add_function(wrap_pyfunction!(gemm::gemm, m)?)?;
    m.add_function(wrap_pyfunction!(gemm::trace, m)?)?;
    m.add_function(wrap_pyfunction!(check::check, m)?)?;
    m.add_class::<orders::PyOrder>()?;
    m.add_class::<orders::PyTree>()?;
    m.add_class::<check::PyReport>()?;
    m.add_function(wrap_pyfunction!(check::edge_ms, m)?)?;
    m.add_function(wrap_pyfunction!(explain::reveal, m)?)?;
    m.add_function(wrap_pyfunction!(explain::diverge, m)?)?;
    m.add_function(wrap_pyfunction!(explain::family, m)?)?;
    m.add_function(wrap_pyfunction!(accuracy::accuracy, m)?)?;
    m.add_function(wrap_pyfunction!(fuzz::fuzz, m)?)?;
    m.add_function(wrap_pyfunction!(fuzz::check_case, m)?)?;
    m.add_class::<fuzz::PyFuzzOutcome>()?;
    m.add_class::<explain::PyRevealed>()?;
    m.add_class::<accuracy::PyAccuracy>()?;
    Ok(())
}
