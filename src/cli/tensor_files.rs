//! Tensor files on the command line: read (named, bounded), written, and
//! read as f32 values.

use super::output::{CliError, Result};
use mxbi::io::{self, DType, TensorData};
use std::path::PathBuf;

/// Loads a tensor. An empty tensor has no bytes that bound its other
/// dimensions, so their product (zero dimensions counted as 1) must stay
/// within [`mxbi::limits::MAX_ELEMENTS`].
pub(super) fn load(path: &std::path::Path, name: Option<&str>) -> Result<TensorData> {
    let t = io::load_tensor(path, name)?;
    if t.numel() == 0 {
        mxbi::limits::check_elements(&format!("{}: the empty tensor of shape", path.display()), t.shape())
            .map_err(CliError)?;
    }
    Ok(t)
}

pub(super) fn save(path: &PathBuf, t: TensorData) -> Result<()> {
    Ok(io::write_tensor(path, "data", &t)?)
}

/// Reads a floating-point input as f32 (borrowing the memory map for f32
/// files), refusing values that f32 cannot hold exactly (so that nothing
/// rounds twice).
pub(super) fn input_f32<'a>(t: &'a TensorData, path: &std::path::Path) -> Result<std::borrow::Cow<'a, [f32]>> {
    Ok(match t.dtype() {
        DType::F32 => t.as_f32()?,
        DType::F16 => t.as_f16()?.iter().map(|h| h.to_f32()).collect(),
        DType::BF16 => t.as_bf16()?.iter().map(|h| h.to_f32()).collect(),
        DType::F64 => {
            let v = t.as_f64()?;
            if let Some((i, x)) = v
                .iter()
                .enumerate()
                .find(|(_, x)| !x.is_nan() && (**x as f32) as f64 != **x)
            {
                return Err(CliError(format!(
                    "{}: element {i} ({x:e}) is not exactly representable in f32",
                    path.display()
                )));
            }
            v.iter().map(|&x| x as f32).collect()
        }
        d => {
            return Err(CliError(format!(
                "{}: expected f32, f16 or bf16 values, got {}",
                path.display(),
                d.name()
            )))
        }
    })
}
