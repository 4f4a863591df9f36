//! Tensor file layer: bytes, dtypes and shapes in `.npy` and `.safetensors`
//! files. No numerics happen here beyond optional widening to `f32`/`f64`.
//!
//! # Contract
//!
//! * A [`TensorData`] is a dtype, a C-order shape and exactly
//!   `product(shape) * dtype.size()` little-endian bytes. A scalar has shape
//!   `[]` (one element); zero-size shapes are allowed.
//! * Reading memory-maps the file; tensor bytes are a view into the map
//!   (no copy). Typed accessors ([`TensorData::as_f32`], ...) borrow when the
//!   data is aligned (and the host is little-endian) and copy otherwise.
//!   As with any mmap, the file must not be modified or truncated while
//!   tensors read from it are alive.
//! * A tensor reads as an `ndarray` array of its shape
//!   ([`TensorData::view`], [`TensorData::to_array`]) and an array writes
//!   as a tensor ([`TensorData::from_array`]); see [`array`].
//! * Readers never panic on any input bytes: malformed, truncated, overflowing
//!   or unsupported files produce an [`IoError`] whose message is one line
//!   starting with the path.
//! * `.npy`: versions 1.0/2.0/3.0, dtypes `<f4 <f8 <f2 |u1 <u2 |i1 <i4 <i8`,
//!   C order only (see [`npy`]). Writing is byte-identical to `numpy.save`.
//!   BF16 and FP8 have no `.npy` dtype and cannot be written there.
//! * `.safetensors`: dtypes F32 F64 F16 BF16 U8 U16 I8 I32 I64 F8_E4M3
//!   F8_E5M2 (see [`safetensors`]).
//! * [`load_tensor`] dispatches on the extension (`.npy`, `.safetensors`),
//!   falling back to sniffing the content for other extensions.

pub mod array;
pub mod digest;
pub mod dtype;
pub mod error;
pub mod npy;
pub mod safetensors;
pub mod tensor;

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use memmap2::{Mmap, MmapMut};

pub use self::digest::sha256_hex;
pub use self::dtype::DType;
pub use self::error::{IoError, Result};
pub use self::npy::{
    npy_header_bytes, read_npy, read_npy_bytes, read_npy_header, write_npy, write_npy_tensor, NpyHeader, NpyWriter,
};
pub use self::safetensors::{write_safetensors, write_safetensors_tensors, RawTensor, SafetensorsFile};
pub use self::tensor::{Bytes, Element, TensorData, Widen};

/// Description of one tensor in a file, without loading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    /// Tensor name (for `.npy`, the file stem).
    pub name: String,
    /// `None` when the dtype is not supported by this crate.
    pub dtype: Option<DType>,
    /// The dtype as the file spells it (`F8_E4M3`, `BOOL`, `<f4`, ...).
    pub dtype_name: String,
    pub shape: Vec<usize>,
    pub nbytes: usize,
}

/// Tensor file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Npy,
    Safetensors,
}

fn format_from_extension(path: &Path) -> Option<Format> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "npy" => Some(Format::Npy),
        "safetensors" => Some(Format::Safetensors),
        _ => None,
    }
}

/// Decide the format of an existing file: by extension, else by content.
pub fn detect_format(path: impl AsRef<Path>) -> Result<Format> {
    let path = path.as_ref();
    if let Some(f) = format_from_extension(path) {
        return Ok(f);
    }
    let mut head = [0u8; 9];
    let mut n = 0;
    let mut file = File::open(path).map_err(|source| IoError::Os {
        path: path.to_path_buf(),
        source,
    })?;
    while n < head.len() {
        match file.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(IoError::Os {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
    if n >= 6 && &head[..6] == b"\x93NUMPY" {
        Ok(Format::Npy)
    } else if n == 9 && head[8] == b'{' {
        Ok(Format::Safetensors)
    } else {
        Err(IoError::UnknownFormat {
            path: path.to_path_buf(),
        })
    }
}

/// Load one tensor from a `.npy` or `.safetensors` file.
///
/// For `.safetensors`, `name` selects the tensor; it may be `None` only when
/// the file holds exactly one tensor. For `.npy`, `name` is ignored.
pub fn load_tensor(path: impl AsRef<Path>, name: Option<&str>) -> Result<TensorData> {
    let path = path.as_ref();
    match detect_format(path)? {
        Format::Npy => read_npy(path),
        Format::Safetensors => SafetensorsFile::open(path)?.get(name),
    }
}

/// List the tensors in a `.npy` (one entry, named by the file stem) or
/// `.safetensors` file.
pub fn list_tensors(path: impl AsRef<Path>) -> Result<Vec<TensorEntry>> {
    let path = path.as_ref();
    match detect_format(path)? {
        Format::Npy => {
            let h = read_npy_header(path)?;
            Ok(vec![TensorEntry {
                name: path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                dtype: Some(h.dtype),
                dtype_name: h.dtype.npy_descr().unwrap_or_default().to_string(),
                shape: h.shape,
                nbytes: h.data_len,
            }])
        }
        Format::Safetensors => Ok(SafetensorsFile::open(path)?.entries().to_vec()),
    }
}

/// Write one tensor, choosing the format from the extension (`.npy` or
/// `.safetensors`; `name` is used only for safetensors).
pub fn write_tensor(path: impl AsRef<Path>, name: &str, t: &TensorData) -> Result<()> {
    let path = path.as_ref();
    match format_from_extension(path) {
        Some(Format::Npy) => write_npy_tensor(path, t),
        Some(Format::Safetensors) => write_safetensors_tensors(path, &[(name, t)], None),
        None => Err(IoError::UnknownFormat {
            path: path.to_path_buf(),
        }),
    }
}

/// Map a whole file read-only. Files that cannot be mapped (pipes, some
/// special files) are read into an anonymous map instead.
pub(crate) fn map_file(path: &Path) -> Result<Arc<Mmap>> {
    let os = |source| IoError::Os {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(os)?;
    // SAFETY: the map is read-only; the documented contract of this module is
    // that input files are not modified while tensors read from them live.
    if let Ok(m) = unsafe { Mmap::map(&file) } {
        return Ok(Arc::new(m));
    }
    let mut v = Vec::new();
    file.read_to_end(&mut v).map_err(os)?;
    let mut anon = MmapMut::map_anon(v.len()).map_err(os)?;
    anon.copy_from_slice(&v);
    Ok(Arc::new(anon.make_read_only().map_err(os)?))
}
