//! MX block quantization: `quantize` and `dequantize`.

use mxbi::format::Rounding;
use mxbi::mx::{self, AxisLayout, MxFormat, MxPreset, ScaleLayout, ScaleMode};
use numpy::{PyArrayDyn, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::args::{array, contiguous, err, f32_values, parse, parse_opt, shape_of, Floats};
pub(crate) fn check_swizzle(shape: &[usize], axis: isize) -> PyResult<()> {
    if shape.len() != 2 || !(axis == -1 || axis == 1) {
        return Err(err(
            "scale_layout='swizzled-128x4' needs a 2-d input with blocks along the last axis",
        ));
    }
    Ok(())
}

pub(crate) type Quantized<'py> = (Bound<'py, PyArrayDyn<u8>>, Bound<'py, PyArrayDyn<u8>>, Option<String>);

/// MX block quantization, as `mxbi quantize`: (codes uint8 of x's shape,
/// E8M0 scales uint8, the `--stats` JSON when `stats`).
#[pyfunction]
#[pyo3(signature = (x, format, preset=None, scale_mode=None, round=None, seed=None, flush_subnormals=false,
                    no_int8_neg2=false, block=32, axis=-1, pad=false, scale_layout="plain", stats=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn quantize<'py>(
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
pub(crate) fn dequantize<'py>(
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
