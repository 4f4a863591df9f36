//! Owned-or-mapped tensor bytes with dtype and shape.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use half::{bf16, f16};
use memmap2::Mmap;
use num_traits::AsPrimitive;

use super::dtype::DType;
use super::error::{IoError, Result};

/// Raw tensor bytes: either a region of a read-only memory map (shared,
/// cheap to clone) or an owned buffer.
#[derive(Clone)]
pub struct Bytes(Repr);

#[derive(Clone)]
enum Repr {
    Mapped { map: Arc<Mmap>, start: usize, len: usize },
    Owned(Arc<Vec<u8>>),
}

impl Bytes {
    /// Wrap an owned buffer.
    pub fn owned(v: Vec<u8>) -> Self {
        Bytes(Repr::Owned(Arc::new(v)))
    }

    /// A region of a memory map. `start..start+len` must lie within the map
    /// (checked; out-of-range regions are reported as an error, never a panic).
    pub(crate) fn mapped(map: Arc<Mmap>, start: usize, len: usize) -> Result<Self> {
        match start.checked_add(len) {
            Some(end) if end <= map.len() => Ok(Bytes(Repr::Mapped { map, start, len })),
            _ => Err(IoError::Tensor(format!(
                "internal: region {start}+{len} outside a map of {} bytes",
                map.len()
            ))),
        }
    }

    /// True when the bytes live in a memory-mapped file.
    pub fn is_mapped(&self) -> bool {
        matches!(self.0, Repr::Mapped { .. })
    }

    /// The bytes as a slice.
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Repr::Mapped { map, start, len } => &map[*start..*start + *len],
            Repr::Owned(v) => v.as_slice(),
        }
    }

    /// Copy (or unwrap, when not shared) into an owned `Vec<u8>`.
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Owned(v) => Arc::try_unwrap(v).unwrap_or_else(|v| v.as_ref().clone()),
            Repr::Mapped { .. } => self.as_slice().to_vec(),
        }
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_mapped() { "mapped" } else { "owned" };
        write!(f, "Bytes({kind}, {} bytes)", self.len())
    }
}

/// Rust element types that can be viewed directly from tensor bytes.
///
/// Implemented for `f32`, `f64`, `half::f16`, `half::bf16`, `u8`, `u16`,
/// `i8`, `i32`, `i64`. This trait is sealed.
pub trait Element: bytemuck::Pod + sealed::Sealed {
    /// The dtype whose storage is exactly this Rust type.
    const DTYPE: DType;
    #[doc(hidden)]
    fn from_le_slice(b: &[u8]) -> Self;
    #[doc(hidden)]
    fn to_le_vec(data: &[Self]) -> Vec<u8>;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($t:ty, $dt:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $dt;
            fn from_le_slice(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
            fn to_le_vec(data: &[Self]) -> Vec<u8> {
                if cfg!(target_endian = "little") {
                    bytemuck::cast_slice(data).to_vec()
                } else {
                    data.iter().flat_map(|x| x.to_le_bytes()).collect()
                }
            }
        }
    };
}

element!(f32, DType::F32);
element!(f64, DType::F64);
element!(f16, DType::F16);
element!(bf16, DType::BF16);
element!(u8, DType::U8);
element!(u16, DType::U16);
element!(i8, DType::I8);
element!(i32, DType::I32);
element!(i64, DType::I64);

/// View little-endian bytes as `[T]`: borrowed when aligned on a little-endian
/// host, otherwise copied. `bytes.len()` must be a multiple of `size_of::<T>()`.
fn view_le<T: Element>(bytes: &[u8]) -> Cow<'_, [T]> {
    if cfg!(target_endian = "little") {
        if let Ok(s) = bytemuck::try_cast_slice::<u8, T>(bytes) {
            return Cow::Borrowed(s);
        }
    }
    Cow::Owned(
        bytes
            .chunks_exact(std::mem::size_of::<T>())
            .map(T::from_le_slice)
            .collect(),
    )
}

/// A tensor read from or destined for a file: dtype, C-order shape and the
/// raw little-endian element bytes.
///
/// Invariant: `bytes.len() == product(shape) * dtype.size()` (checked by
/// every constructor).
#[derive(Clone, Debug)]
pub struct TensorData {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Bytes,
}

/// Number of elements and bytes for a shape, or `None` on overflow.
pub(crate) fn checked_sizes(dtype: DType, shape: &[usize]) -> Option<(usize, usize)> {
    let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    let nbytes = numel.checked_mul(dtype.size())?;
    Some((numel, nbytes))
}

impl TensorData {
    /// Build from owned little-endian bytes; errors when the length does not
    /// match `shape` and `dtype`.
    pub fn new(dtype: DType, shape: Vec<usize>, bytes: Vec<u8>) -> Result<Self> {
        Self::from_bytes(dtype, shape, Bytes::owned(bytes))
    }

    /// Build from a [`Bytes`] buffer; errors when the length does not match.
    pub fn from_bytes(dtype: DType, shape: Vec<usize>, bytes: Bytes) -> Result<Self> {
        let Some((_, nbytes)) = checked_sizes(dtype, &shape) else {
            return Err(IoError::Tensor(format!(
                "shape {shape:?} of {dtype} overflows the address space"
            )));
        };
        if nbytes != bytes.len() {
            return Err(IoError::Tensor(format!(
                "shape {shape:?} of {dtype} needs {nbytes} bytes, got {}",
                bytes.len()
            )));
        }
        Ok(TensorData { dtype, shape, bytes })
    }

    /// Build from typed elements (dtype = `T::DTYPE`).
    /// For FP8 data use [`TensorData::new`] with the raw codes.
    pub fn from_slice<T: Element>(shape: Vec<usize>, data: &[T]) -> Result<Self> {
        Self::new(T::DTYPE, shape, T::to_le_vec(data))
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of dimensions (0 for a scalar).
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (1 for a scalar, 0 for a zero-size array).
    pub fn numel(&self) -> usize {
        // Cannot overflow: checked at construction.
        self.shape.iter().product()
    }

    /// Raw little-endian element bytes.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// The underlying buffer.
    pub fn raw(&self) -> &Bytes {
        &self.bytes
    }

    /// Size of the data in bytes.
    pub fn nbytes(&self) -> usize {
        self.bytes.len()
    }

    /// True when the data is a view into a memory-mapped file.
    pub fn is_mapped(&self) -> bool {
        self.bytes.is_mapped()
    }

    /// Detach from any memory map by copying the bytes into memory.
    pub fn into_owned(self) -> TensorData {
        if self.is_mapped() {
            let v = self.bytes.into_vec();
            TensorData {
                dtype: self.dtype,
                shape: self.shape,
                bytes: Bytes::owned(v),
            }
        } else {
            self
        }
    }

    /// Split into parts.
    pub fn into_parts(self) -> (DType, Vec<usize>, Bytes) {
        (self.dtype, self.shape, self.bytes)
    }

    fn expect(&self, allowed: &[DType], what: &str) -> Result<()> {
        if allowed.contains(&self.dtype) {
            Ok(())
        } else {
            let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
            Err(IoError::Tensor(format!(
                "tensor has dtype {}, cannot view as {what} (needs {})",
                self.dtype,
                names.join(" or ")
            )))
        }
    }

    /// Typed view; the dtype must be exactly `T::DTYPE`. Borrows when the
    /// bytes are suitably aligned (always the case for mmapped `.npy` files
    /// written with 64-byte aligned headers), copies otherwise.
    pub fn as_slice<T: Element>(&self) -> Result<Cow<'_, [T]>> {
        self.expect(&[T::DTYPE], std::any::type_name::<T>())?;
        Ok(view_le(self.bytes()))
    }

    pub fn as_f32(&self) -> Result<Cow<'_, [f32]>> {
        self.as_slice()
    }
    pub fn as_f64(&self) -> Result<Cow<'_, [f64]>> {
        self.as_slice()
    }
    pub fn as_f16(&self) -> Result<Cow<'_, [f16]>> {
        self.as_slice()
    }
    pub fn as_bf16(&self) -> Result<Cow<'_, [bf16]>> {
        self.as_slice()
    }
    /// dtype must be U8 (for FP8 codes use [`TensorData::as_bits8`]).
    pub fn as_u8(&self) -> Result<&[u8]> {
        self.expect(&[DType::U8], "u8")?;
        Ok(self.bytes())
    }
    pub fn as_u16(&self) -> Result<Cow<'_, [u16]>> {
        self.as_slice()
    }
    pub fn as_i8(&self) -> Result<Cow<'_, [i8]>> {
        self.as_slice()
    }
    pub fn as_i32(&self) -> Result<Cow<'_, [i32]>> {
        self.as_slice()
    }
    pub fn as_i64(&self) -> Result<Cow<'_, [i64]>> {
        self.as_slice()
    }

    /// Raw codes of any 1-byte dtype (U8, I8, F8E4M3, F8E5M2).
    pub fn as_bits8(&self) -> Result<&[u8]> {
        self.expect(&[DType::U8, DType::I8, DType::F8E4M3, DType::F8E5M2], "8-bit codes")?;
        Ok(self.bytes())
    }

    /// Raw bit patterns of any 2-byte dtype (F16, BF16, U16).
    pub fn as_bits16(&self) -> Result<Cow<'_, [u16]>> {
        self.expect(&[DType::F16, DType::BF16, DType::U16], "16-bit codes")?;
        Ok(view_le(self.bytes()))
    }

    /// Raw bit patterns of any 4-byte dtype (F32, I32).
    pub fn as_bits32(&self) -> Result<Cow<'_, [u32]>> {
        self.expect(&[DType::F32, DType::I32], "32-bit codes")?;
        Ok(view_le_u32(self.bytes()))
    }

    /// Raw bit patterns of any 8-byte dtype (F64, I64).
    pub fn as_bits64(&self) -> Result<Cow<'_, [u64]>> {
        self.expect(&[DType::F64, DType::I64], "64-bit codes")?;
        Ok(view_le_u64(self.bytes()))
    }

    /// Convert every element to `f32` (allocates). Exact for F32, F16, BF16,
    /// FP8, U8, U16, I8; F64 and large I32/I64 values are rounded as by `as`.
    /// FP8 is decoded per OCP (E4M3 "FN": no infinities; E5M2 IEEE-like).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        Widen::widen(self)
    }

    /// Convert every element to `f64` (allocates). Exact for every dtype
    /// except I64 values beyond 2^53.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        Widen::widen(self)
    }
}

/// The float types every stored dtype widens to (`f32`, `f64`); see
/// [`TensorData::to_array`]. Sealed.
pub trait Widen: Element {
    /// Every element of `t` converted to `Self` as by `as`.
    #[doc(hidden)]
    fn widen(t: &TensorData) -> Vec<Self>;
}

impl Widen for f32 {
    fn widen(t: &TensorData) -> Vec<f32> {
        widen_as(t)
    }
}

impl Widen for f64 {
    fn widen(t: &TensorData) -> Vec<f64> {
        widen_as(t)
    }
}

/// Every element converted to `F` with one `as` from its stored type
/// (num-traits' [`AsPrimitive`]), so exact wherever `F` holds the value;
/// f16, bf16 and FP8 through their exact f32 value.
fn widen_as<F>(t: &TensorData) -> Vec<F>
where
    F: Copy + 'static,
    f32: AsPrimitive<F>,
    f64: AsPrimitive<F>,
    u8: AsPrimitive<F>,
    i8: AsPrimitive<F>,
    u16: AsPrimitive<F>,
    i32: AsPrimitive<F>,
    i64: AsPrimitive<F>,
{
    fn cast<T: Element + AsPrimitive<F>, F: Copy + 'static>(b: &[u8]) -> Vec<F> {
        view_le::<T>(b).iter().map(|x| x.as_()).collect()
    }
    let b = t.bytes();
    match t.dtype {
        DType::F32 => cast::<f32, F>(b),
        DType::F64 => cast::<f64, F>(b),
        DType::F16 => view_le::<f16>(b).iter().map(|x| x.to_f32().as_()).collect(),
        DType::BF16 => view_le::<bf16>(b).iter().map(|x| x.to_f32().as_()).collect(),
        DType::U8 => cast::<u8, F>(b),
        DType::I8 => cast::<i8, F>(b),
        DType::U16 => cast::<u16, F>(b),
        DType::I32 => cast::<i32, F>(b),
        DType::I64 => cast::<i64, F>(b),
        DType::F8E4M3 | DType::F8E5M2 => {
            let f = t.dtype.format().expect("FP8 storage types have an element format");
            b.iter().map(|&x| f.decode_f32(x as u16).as_()).collect()
        }
    }
}

fn view_le_u32(b: &[u8]) -> Cow<'_, [u32]> {
    if cfg!(target_endian = "little") {
        if let Ok(s) = bytemuck::try_cast_slice::<u8, u32>(b) {
            return Cow::Borrowed(s);
        }
    }
    Cow::Owned(
        b.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

fn view_le_u64(b: &[u8]) -> Cow<'_, [u64]> {
    if cfg!(target_endian = "little") {
        if let Ok(s) = bytemuck::try_cast_slice::<u8, u64>(b) {
            return Cow::Borrowed(s);
        }
    }
    Cow::Owned(
        b.chunks_exact(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                u64::from_le_bytes(a)
            })
            .collect(),
    )
}
