//! An op's global input tensors by name ([`Inputs`]).

use super::error::{OpError, Result};
use crate::io::{DType, TensorData};
use std::collections::BTreeMap;

/// One input tensor: f32 values or u8 bytes (MX codes, E8M0 scales).
#[derive(Clone, Debug, PartialEq)]
pub enum TensorValues {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub values: TensorValues,
}

impl Tensor {
    pub fn f32(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
        Tensor {
            shape,
            values: TensorValues::F32(v),
        }
    }
    pub fn u8(shape: Vec<usize>, v: Vec<u8>) -> Tensor {
        Tensor {
            shape,
            values: TensorValues::U8(v),
        }
    }
    /// As an [`crate::io`] tensor (f32 or uint8), for writing.
    pub fn to_tensor_data(&self) -> TensorData {
        match &self.values {
            TensorValues::F32(v) => TensorData::from_slice(self.shape.clone(), v),
            TensorValues::U8(v) => TensorData::new(DType::U8, self.shape.clone(), v.clone()),
        }
        .expect("shape matches data by construction")
    }
    /// From an [`crate::io`] tensor: uint8 stays bytes; f32/f16/bf16 become
    /// f32 exactly; f64 must be exact in f32.
    pub fn from_tensor_data(name: &str, t: &TensorData) -> Result<Tensor> {
        let shape = t.shape().to_vec();
        let bad = |e: crate::io::IoError| OpError::Input(format!("{name}: {e}"));
        Ok(match t.dtype() {
            DType::U8 | DType::F8E4M3 | DType::F8E5M2 => Tensor::u8(shape, t.as_bits8().map_err(bad)?.to_vec()),
            DType::F32 => Tensor::f32(shape, t.as_f32().map_err(bad)?.into_owned()),
            DType::F16 => Tensor::f32(shape, t.as_f16().map_err(bad)?.iter().map(|h| h.to_f32()).collect()),
            DType::BF16 => Tensor::f32(shape, t.as_bf16().map_err(bad)?.iter().map(|h| h.to_f32()).collect()),
            DType::F64 => {
                let v = t.as_f64().map_err(bad)?;
                if let Some(i) = v.iter().position(|x| !x.is_nan() && (*x as f32) as f64 != *x) {
                    return Err(OpError::Input(format!(
                        "{name}: element {i} ({:e}) is not exactly representable in f32",
                        v[i]
                    )));
                }
                Tensor::f32(shape, v.iter().map(|&x| x as f32).collect())
            }
            d => {
                return Err(OpError::Input(format!(
                    "{name}: expected f32/f16/bf16 values or uint8 codes, got {}",
                    d.name()
                )))
            }
        })
    }
}

/// Named input tensors.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inputs(pub BTreeMap<String, Tensor>);

impl Inputs {
    pub fn insert(&mut self, name: &str, t: Tensor) {
        self.0.insert(name.to_string(), t);
    }

    fn get(&self, name: &str, shape: &[usize]) -> Result<&Tensor> {
        let t = self.0.get(name).ok_or_else(|| {
            OpError::Input(format!(
                "missing input '{name}' (shape {shape:?}); have: {}",
                self.0.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        if t.shape != shape {
            return Err(OpError::Input(format!(
                "input '{name}' has shape {:?}, expected {shape:?}",
                t.shape
            )));
        }
        Ok(t)
    }

    /// f32 values of `name` with exactly this shape.
    pub fn values(&self, name: &str, shape: &[usize]) -> Result<&[f32]> {
        match &self.get(name, shape)?.values {
            TensorValues::F32(v) => Ok(v),
            TensorValues::U8(_) => Err(OpError::Input(format!(
                "input '{name}' must hold values (f32/f16/bf16), got uint8"
            ))),
        }
    }

    /// u8 bytes (codes or scales) of `name` with exactly this shape.
    pub fn bytes(&self, name: &str, shape: &[usize]) -> Result<&[u8]> {
        match &self.get(name, shape)?.values {
            TensorValues::U8(v) => Ok(v),
            TensorValues::F32(_) => Err(OpError::Input(format!(
                "input '{name}' must be uint8 (MX codes or E8M0 scales), got float values"
            ))),
        }
    }
}
