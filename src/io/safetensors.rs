//! `.safetensors` reading (memory-mapped, via the `safetensors` crate's
//! header validation) and writing.
//!
//! Supported dtypes: F32, F64, F16, BF16, U8, U16, I8, I32, I64, F8_E4M3,
//! F8_E5M2. Files containing other dtypes that the `safetensors` crate knows
//! (BOOL, I16, U32, U64) open and list fine; fetching such a tensor is an
//! error. Dtypes unknown to the crate make the file unreadable (the error
//! names the dtype).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ::safetensors::tensor::TensorView;
use ::safetensors::{Dtype as StDtype, SafeTensorError, SafeTensors};
use memmap2::Mmap;

use super::dtype::DType;
use super::error::{list_names, IoError, Result};
use super::tensor::{checked_sizes, Bytes, TensorData};
use super::TensorEntry;

/// Header size limit of the `safetensors` crate.
const MAX_HEADER_SIZE: u64 = 100_000_000;

/// Supported dtype names, for error messages.
pub const SUPPORTED_ST_DTYPES: &str = "F32, F64, F16, BF16, U8, U16, I8, I32, I64, F8_E4M3, F8_E5M2";

/// Dtype names the `safetensors` crate (0.4) can parse.
const CRATE_DTYPES: &[&str] = &[
    "BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64",
];

fn from_st(d: StDtype) -> Option<DType> {
    Some(match d {
        StDtype::F32 => DType::F32,
        StDtype::F64 => DType::F64,
        StDtype::F16 => DType::F16,
        StDtype::BF16 => DType::BF16,
        StDtype::U8 => DType::U8,
        StDtype::U16 => DType::U16,
        StDtype::I8 => DType::I8,
        StDtype::I32 => DType::I32,
        StDtype::I64 => DType::I64,
        StDtype::F8_E4M3 => DType::F8E4M3,
        StDtype::F8_E5M2 => DType::F8E5M2,
        _ => return None,
    })
}

fn describe(e: &SafeTensorError) -> String {
    use SafeTensorError as E;
    match e {
        E::InvalidHeader => "header is not valid UTF-8".into(),
        E::InvalidHeaderStart => "header does not start with '{'".into(),
        E::InvalidHeaderDeserialization => "header is not valid safetensors JSON".into(),
        E::HeaderTooLarge => "header is too large".into(),
        E::HeaderTooSmall => "file is too small to hold a safetensors header".into(),
        E::InvalidHeaderLength => "header length runs past the end of the file".into(),
        E::TensorNotFound(n) => format!("no tensor named '{}'", n.escape_debug()),
        E::TensorInvalidInfo => "a tensor's data_offsets do not match its shape and dtype".into(),
        E::InvalidOffset(n) => format!(
            "tensor '{}' has invalid data_offsets (tensors must be contiguous from offset 0)",
            n.escape_debug()
        ),
        E::IoError(e) => e.to_string(),
        E::JsonError(e) => format!("JSON error: {e}"),
        E::InvalidTensorView(d, s, n) => {
            format!("{n} bytes of data do not match dtype {d:?} and shape {s:?}")
        }
        E::MetadataIncompleteBuffer => "data section size does not match the tensors declared in the header".into(),
        E::ValidationOverflow => "tensor sizes in the header overflow".into(),
    }
}

/// An opened, validated, memory-mapped `.safetensors` file.
#[derive(Debug)]
pub struct SafetensorsFile {
    path: PathBuf,
    map: Arc<Mmap>,
    data_start: usize,
    /// In file (offset) order, parallel to `offsets`.
    entries: Vec<TensorEntry>,
    offsets: Vec<(usize, usize)>,
    metadata: Option<HashMap<String, String>>,
}

impl SafetensorsFile {
    /// Map and validate a `.safetensors` file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let map = super::map_file(&path)?;
        let bad = |msg: String| IoError::Malformed {
            path: path.clone(),
            msg: format!("not a valid .safetensors file: {msg}"),
        };
        let buf: &[u8] = &map;
        if buf.len() < 8 {
            return Err(bad(format!("file is only {} bytes long", buf.len())));
        }
        let mut n8 = [0u8; 8];
        n8.copy_from_slice(&buf[..8]);
        let n = u64::from_le_bytes(n8);
        if n > MAX_HEADER_SIZE {
            return Err(bad(format!(
                "header length {n} exceeds the limit of {MAX_HEADER_SIZE} bytes"
            )));
        }
        let n = n as usize;
        if n > buf.len() - 8 {
            return Err(bad(format!(
                "header length {n} runs past the end of the file ({} bytes)",
                buf.len()
            )));
        }
        let data_start = 8 + n;
        let data_len = buf.len() - data_start;
        precheck_header(&buf[8..data_start], data_len as u64).map_err(|e| match e {
            Precheck::Bad(msg) => bad(msg),
            Precheck::Unknown(dtype) => IoError::UnsupportedDtype {
                path: path.clone(),
                dtype,
                detail: String::new(),
                supported: SUPPORTED_ST_DTYPES.to_string(),
            },
        })?;

        let (n2, meta) = SafeTensors::read_metadata(buf).map_err(|e| bad(describe(&e)))?;
        if n2 != n {
            return Err(bad("inconsistent header length".to_string()));
        }
        let mut items: Vec<_> = meta
            .tensors()
            .into_iter()
            .map(|(name, info)| (name, info.dtype, info.shape.clone(), info.data_offsets))
            .collect();
        items.sort_by(|a, b| a.3.cmp(&b.3).then_with(|| a.0.cmp(&b.0)));
        let mut entries = Vec::with_capacity(items.len());
        let mut offsets = Vec::with_capacity(items.len());
        for (name, dt, shape, (s, e)) in items {
            // Re-check bounds ourselves so that slicing can never panic.
            if s > e || e > data_len {
                return Err(bad(format!(
                    "tensor '{}' data_offsets [{s}, {e}] lie outside the data section ({data_len} bytes)",
                    name.escape_debug()
                )));
            }
            entries.push(TensorEntry {
                name,
                dtype: from_st(dt),
                dtype_name: format!("{dt:?}"),
                shape,
                nbytes: e - s,
            });
            offsets.push((s, e));
        }
        let metadata = meta.metadata().clone();
        Ok(SafetensorsFile {
            path,
            map,
            data_start,
            entries,
            offsets,
            metadata,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tensors in file order.
    pub fn entries(&self) -> &[TensorEntry] {
        &self.entries
    }

    /// Tensor names in file order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.name.as_str()).collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The optional `__metadata__` string map.
    pub fn metadata(&self) -> Option<&HashMap<String, String>> {
        self.metadata.as_ref()
    }

    /// Fetch one tensor (zero-copy view into the map).
    pub fn tensor(&self, name: &str) -> Result<TensorData> {
        let Some(i) = self.entries.iter().position(|e| e.name == name) else {
            return Err(IoError::TensorNotFound {
                path: self.path.clone(),
                name: name.to_string(),
                available: list_names(&self.names()),
            });
        };
        self.by_index(i)
    }

    fn by_index(&self, i: usize) -> Result<TensorData> {
        let e = &self.entries[i];
        let Some(dtype) = e.dtype else {
            return Err(IoError::UnsupportedDtype {
                path: self.path.clone(),
                dtype: e.dtype_name.clone(),
                detail: format!(" (tensor '{}')", e.name.escape_debug()),
                supported: SUPPORTED_ST_DTYPES.to_string(),
            });
        };
        let (s, end) = self.offsets[i];
        let bytes = Bytes::mapped(self.map.clone(), self.data_start + s, end - s)?;
        TensorData::from_bytes(dtype, e.shape.clone(), bytes)
    }

    /// The tensor called `name`, or the only tensor when `name` is `None`
    /// (error when the file holds zero or several tensors).
    pub fn get(&self, name: Option<&str>) -> Result<TensorData> {
        match name {
            Some(n) => self.tensor(n),
            None => match self.entries.len() {
                0 => Err(IoError::Empty {
                    path: self.path.clone(),
                }),
                1 => self.by_index(0),
                count => Err(IoError::NameRequired {
                    path: self.path.clone(),
                    count,
                    available: list_names(&self.names()),
                }),
            },
        }
    }

    /// All tensors in file order (fails on the first unsupported dtype).
    pub fn tensors(&self) -> Result<Vec<(String, TensorData)>> {
        (0..self.entries.len())
            .map(|i| Ok((self.entries[i].name.clone(), self.by_index(i)?)))
            .collect()
    }
}

enum Precheck {
    Bad(String),
    Unknown(String),
}

/// Structural checks done before handing the header to the `safetensors`
/// crate: clear messages, unknown dtype names, and offsets bounded by the
/// data section (which rules out arithmetic overflow inside the crate).
fn precheck_header(header: &[u8], data_len: u64) -> std::result::Result<(), Precheck> {
    use serde_json::Value;
    let v: Value =
        serde_json::from_slice(header).map_err(|e| Precheck::Bad(format!("header is not valid JSON ({e})")))?;
    let Value::Object(obj) = v else {
        return Err(Precheck::Bad("header is not a JSON object".into()));
    };
    for (name, info) in &obj {
        if name == "__metadata__" {
            let ok = match info {
                Value::Object(m) => m.values().all(Value::is_string),
                _ => false,
            };
            if !ok {
                return Err(Precheck::Bad("__metadata__ must map strings to strings".into()));
            }
            continue;
        }
        let nm = name.escape_debug();
        let Value::Object(info) = info else {
            return Err(Precheck::Bad(format!("entry '{nm}' is not an object")));
        };
        let Some(dtype) = info.get("dtype").and_then(Value::as_str) else {
            return Err(Precheck::Bad(format!("tensor '{nm}' has no string 'dtype'")));
        };
        if !CRATE_DTYPES.contains(&dtype) {
            return Err(Precheck::Unknown(dtype.escape_debug().to_string()));
        }
        let shape_ok = matches!(info.get("shape"), Some(Value::Array(a)) if a.iter().all(|d| d.as_u64().is_some()));
        if !shape_ok {
            return Err(Precheck::Bad(format!(
                "tensor '{nm}' has no 'shape' list of non-negative integers"
            )));
        }
        let offs = match info.get("data_offsets") {
            Some(Value::Array(a)) if a.len() == 2 => (a[0].as_u64(), a[1].as_u64()),
            _ => (None, None),
        };
        let (Some(s), Some(e)) = offs else {
            return Err(Precheck::Bad(format!(
                "tensor '{nm}' has no 'data_offsets' pair of non-negative integers"
            )));
        };
        if s > e || e > data_len {
            return Err(Precheck::Bad(format!(
                "tensor '{nm}' data_offsets [{s}, {e}] lie outside the data section ({data_len} bytes)"
            )));
        }
    }
    Ok(())
}

/// One tensor to write: `(name, dtype, shape, little-endian bytes)`.
pub type RawTensor<'a> = (&'a str, DType, &'a [usize], &'a [u8]);

/// Write tensors (and optional `__metadata__`) to a `.safetensors` file.
/// Names must be unique and not `__metadata__`; each byte slice must match
/// its shape and dtype. Tensors are laid out as the `safetensors` crate does
/// (by decreasing alignment, then name).
pub fn write_safetensors(
    path: impl AsRef<Path>,
    tensors: &[RawTensor<'_>],
    metadata: Option<&HashMap<String, String>>,
) -> Result<()> {
    let path = path.as_ref();
    let mismatch = |msg: String| IoError::SizeMismatch {
        path: path.to_path_buf(),
        msg,
    };
    let mut seen = HashSet::new();
    let mut views = Vec::with_capacity(tensors.len());
    for &(name, dtype, shape, data) in tensors {
        if name == "__metadata__" {
            return Err(IoError::Malformed {
                path: path.to_path_buf(),
                msg: "'__metadata__' is reserved and cannot be a tensor name".into(),
            });
        }
        if !seen.insert(name) {
            return Err(IoError::Malformed {
                path: path.to_path_buf(),
                msg: format!("duplicate tensor name '{}'", name.escape_debug()),
            });
        }
        let nbytes = checked_sizes(dtype, shape).map(|x| x.1);
        if nbytes != Some(data.len()) {
            return Err(mismatch(format!(
                "tensor '{}': shape {shape:?} of {dtype} needs {} bytes, got {}",
                name.escape_debug(),
                nbytes.map_or("too many".to_string(), |n| n.to_string()),
                data.len()
            )));
        }
        let view = TensorView::new(dtype.to_st(), shape.to_vec(), data).map_err(|e| mismatch(describe(&e)))?;
        views.push((name.to_string(), view));
    }
    let meta = metadata.cloned();
    ::safetensors::serialize_to_file(views, &meta, path).map_err(|e| match e {
        SafeTensorError::IoError(source) => IoError::Os {
            path: path.to_path_buf(),
            source,
        },
        other => IoError::Malformed {
            path: path.to_path_buf(),
            msg: describe(&other),
        },
    })
}

/// Write named [`TensorData`]s to a `.safetensors` file.
pub fn write_safetensors_tensors(
    path: impl AsRef<Path>,
    tensors: &[(&str, &TensorData)],
    metadata: Option<&HashMap<String, String>>,
) -> Result<()> {
    let raw: Vec<RawTensor<'_>> = tensors
        .iter()
        .map(|(n, t)| (*n, t.dtype(), t.shape(), t.bytes()))
        .collect();
    write_safetensors(path, &raw, metadata)
}
