//! Formats and casts: the element-type table, value tables, `cast` and `decode`.

use mxbi::format::{self, CastPolicy, CastPreset, CodesMut, Format, NanPolicy, Overflow, Rounding, Stochastic};
use numpy::{PyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::args::{array, contiguous, err, parse, parse_opt, Codes, Floats};
/// Every element format: (name, bits, max, emax, has_inf, has_nan).
#[pyfunction]
pub(crate) fn formats() -> Vec<(&'static str, u32, f64, i32, bool, bool)> {
    Format::ALL
        .iter()
        .map(|f| (f.name(), f.bits(), f.max_value(), f.emax(), f.has_inf(), f.has_nan()))
        .collect()
}

/// Codes (uint16) and their exact values (float64).
pub(crate) type ValueTable<'py> = (Bound<'py, PyArrayDyn<u16>>, Bound<'py, PyArrayDyn<f64>>);

/// Every code of a format and its exact value: (codes uint16, values float64).
#[pyfunction]
pub(crate) fn value_table<'py>(py: Python<'py>, format: &str) -> PyResult<ValueTable<'py>> {
    let f: Format = parse(format)?;
    let (codes, values): (Vec<u16>, Vec<f64>) = f.value_table().into_iter().unzip();
    let n = codes.len();
    Ok((array(py, codes, &[n])?, array(py, values, &[n])?))
}

/// Casts float32/float64 values to codes (uint8; uint16 for bf16/f16), as
/// `mxbi cast`.
#[pyfunction]
#[pyo3(signature = (x, to, preset=None, round=None, overflow=None, nan=None, seed=None, sr_bits=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn cast<'py>(
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
pub(crate) fn decode<'py>(py: Python<'py>, codes: Codes<'py>, format: &str) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
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
