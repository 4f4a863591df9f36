//! Tensors as `ndarray` arrays: a [`TensorData`] read as an array of its
//! shape, and an array written as a tensor.
//!
//! # Contract
//! * An array has the tensor's shape, and its element at index `(i, j, ...)`
//!   is the tensor's element there in C order; writing keeps the array's
//!   logical order whatever its memory layout, so [`TensorData::from_array`]
//!   of a view read back is the same bytes.
//! * The dimension type `D` ([`ndarray::Ix2`], [`ndarray::IxDyn`], ...)
//!   states the number of dimensions the caller needs; a tensor with
//!   another number is an error naming its shape, never a panic.

use std::borrow::Cow;

use ndarray::{Array, ArrayBase, ArrayView, CowArray, Data, Dimension, IxDyn};

use super::error::{IoError, Result};
use super::tensor::{Element, TensorData, Widen};

impl TensorData {
    /// The elements as an array of the tensor's shape; the dtype must be
    /// exactly `T::DTYPE` (as [`TensorData::as_slice`]: borrowed when the
    /// bytes are aligned, copied otherwise).
    pub fn view<T: Element, D: Dimension>(&self) -> Result<CowArray<'_, T, D>> {
        let shape = IxDyn(self.shape());
        let a: CowArray<'_, T, IxDyn> = match self.as_slice::<T>()? {
            Cow::Borrowed(s) => ArrayView::from_shape(shape, s).map_err(|e| self.shape_error(e))?.into(),
            Cow::Owned(v) => Array::from_shape_vec(shape, v).map_err(|e| self.shape_error(e))?.into(),
        };
        self.dimensions(a)
    }

    /// Every element widened to `F` (as [`TensorData::to_f32_vec`] and
    /// [`TensorData::to_f64_vec`]) in an array of the tensor's shape.
    pub fn to_array<F: Widen, D: Dimension>(&self) -> Result<Array<F, D>> {
        let a = Array::from_shape_vec(IxDyn(self.shape()), F::widen(self)).map_err(|e| self.shape_error(e))?;
        self.dimensions(a)
    }

    /// A tensor of the array's shape and elements (dtype `T::DTYPE`),
    /// written in the array's logical (C) order.
    pub fn from_array<T: Element, S: Data<Elem = T>, D: Dimension>(a: &ArrayBase<S, D>) -> TensorData {
        let c = a.as_standard_layout();
        let values = c.as_slice().expect("a standard-layout array is one contiguous slice");
        TensorData::from_slice(a.shape().to_vec(), values).expect("an array's shape fits its elements")
    }

    /// `a` with the dimension type `D`, or an error naming the shape.
    fn dimensions<S: Data, D: Dimension>(&self, a: ArrayBase<S, IxDyn>) -> Result<ArrayBase<S, D>> {
        match D::NDIM {
            Some(want) if want != self.ndim() => Err(IoError::Tensor(format!(
                "tensor has shape {:?} ({} dimensions), expected {want}",
                self.shape(),
                self.ndim()
            ))),
            _ => a.into_dimensionality().map_err(|e| self.shape_error(e)),
        }
    }

    fn shape_error(&self, e: ndarray::ShapeError) -> IoError {
        IoError::Tensor(format!("tensor of shape {:?} as an array: {e}", self.shape()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::DType;
    use ndarray::{array, Ix1, Ix2};

    #[test]
    fn a_view_has_the_shape_and_c_order() {
        let t = TensorData::from_slice(vec![2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let v = t.view::<f32, Ix2>().unwrap();
        assert_eq!(v, array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
        assert_eq!(v[(1, 0)], 4.0);
        assert_eq!(t.view::<f32, IxDyn>().unwrap().shape(), [2, 3]);
        let e = t.view::<f32, Ix1>().unwrap_err().to_string();
        assert_eq!(e, "tensor has shape [2, 3] (2 dimensions), expected 1");
        assert!(t.view::<f64, Ix2>().unwrap_err().to_string().contains("dtype f32"));
    }

    #[test]
    fn widened_arrays_keep_the_values() {
        let t = TensorData::new(DType::F8E4M3, vec![1, 2], vec![0x38, 0xC0]).unwrap();
        assert_eq!(t.to_array::<f32, Ix2>().unwrap(), array![[1.0f32, -2.0]]);
        assert_eq!(t.to_array::<f64, Ix2>().unwrap(), array![[1.0f64, -2.0]]);
        let s = TensorData::from_slice(vec![], &[7i64]).unwrap();
        assert_eq!(s.to_array::<f64, IxDyn>().unwrap().shape(), [] as [usize; 0]);
    }

    #[test]
    fn any_layout_is_written_in_logical_order() {
        let a = array![[1u16, 2, 3], [4, 5, 6]];
        let t = TensorData::from_array(&a.t());
        assert_eq!(t.shape(), [3, 2]);
        assert_eq!(&*t.as_u16().unwrap(), &[1, 4, 2, 5, 3, 6]);
        assert_eq!(t.view::<u16, Ix2>().unwrap(), a.t());
        // a zero-size shape no array can index is an error, not a panic
        let huge = TensorData::new(DType::U8, vec![0, usize::MAX, 2], vec![]).unwrap();
        assert!(huge.view::<u8, IxDyn>().is_err());
    }
}
