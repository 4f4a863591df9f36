//! NumPy `.npy` reading (memory-mapped) and writing (one-shot or streamed).
//!
//! Reading accepts format versions 1.0, 2.0 and 3.0, little-endian (or
//! byte-order-free 1-byte) dtypes `<f4 <f8 <f2 |u1 <u2 |i1 <i4 <i8`, and C
//! order. Fortran order is accepted only when it describes the same memory
//! layout as C order (at most one dimension longer than 1); otherwise it is an
//! error. Trailing bytes after the data are ignored, as NumPy does.
//!
//! Writing produces exactly what `numpy.save` (NumPy >= 1.23) produces for
//! the same C-contiguous array: version 1.0 whenever the header fits (2.0
//! otherwise), header dict in sorted key order, padded with spaces to a
//! 64-byte boundary and terminated by `\n`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::dtype::DType;
use super::error::{IoError, Result};
use super::tensor::{checked_sizes, Bytes, TensorData};

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Largest header we are willing to parse (NumPy's own default limit is
/// 10 000 bytes; plain dtypes with even 64 dimensions need well under 2 KiB).
const MAX_HEADER_LEN: usize = 1 << 20;
/// Maximum nesting depth of the header literal.
const MAX_DEPTH: usize = 16;
const ARRAY_ALIGN: usize = 64;
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// Supported descr spellings, for error messages.
pub const SUPPORTED_DESCRS: &str = "<f4, <f8, <f2, |u1, <u2, |i1, <i4, <i8";

/// Parsed `.npy` preamble and header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// Format version `(major, minor)`: (1,0), (2,0) or (3,0).
    pub version: (u8, u8),
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Byte offset of the first data byte.
    pub data_offset: usize,
    /// Number of data bytes (`product(shape) * dtype.size()`).
    pub data_len: usize,
}

/// Header problems, before a path is attached.
enum NpyErr {
    Malformed(String),
    Unsupported { dtype: String, detail: String },
    Fortran,
    Truncated { expected: u64, actual: u64 },
}

impl NpyErr {
    fn with_path(self, path: &Path) -> IoError {
        let path = path.to_path_buf();
        match self {
            NpyErr::Malformed(msg) => IoError::Malformed {
                path,
                msg: format!("not a valid .npy file: {msg}"),
            },
            NpyErr::Unsupported { dtype, detail } => IoError::UnsupportedDtype {
                path,
                dtype,
                detail,
                supported: SUPPORTED_DESCRS.to_string(),
            },
            NpyErr::Fortran => IoError::FortranOrder { path },
            NpyErr::Truncated { expected, actual } => IoError::Truncated { path, expected, actual },
        }
    }
}

fn malformed<T>(msg: impl Into<String>) -> std::result::Result<T, NpyErr> {
    Err(NpyErr::Malformed(msg.into()))
}

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

/// Read a `.npy` file. The data is memory-mapped, not copied.
pub fn read_npy(path: impl AsRef<Path>) -> Result<TensorData> {
    let path = path.as_ref();
    let map = super::map_file(path)?;
    let h = parse_header(&map).map_err(|e| e.with_path(path))?;
    let bytes = Bytes::mapped(map, h.data_offset, h.data_len)?;
    TensorData::from_bytes(h.dtype, h.shape, bytes)
}

/// Read only the header of a `.npy` file (also checks that the file is long
/// enough for the data it announces).
pub fn read_npy_header(path: impl AsRef<Path>) -> Result<NpyHeader> {
    let path = path.as_ref();
    let map = super::map_file(path)?;
    parse_header(&map).map_err(|e| e.with_path(path))
}

/// Parse a complete in-memory `.npy` image; the data is copied into an owned
/// buffer. Errors use the path `<memory>`.
pub fn read_npy_bytes(buf: &[u8]) -> Result<TensorData> {
    let h = parse_header(buf).map_err(|e| e.with_path(Path::new("<memory>")))?;
    let data = buf[h.data_offset..h.data_offset + h.data_len].to_vec();
    TensorData::new(h.dtype, h.shape, data)
}

/// Parse the preamble and header of a complete `.npy` image. On success,
/// `data_offset + data_len <= buf.len()` is guaranteed.
fn parse_header(buf: &[u8]) -> std::result::Result<NpyHeader, NpyErr> {
    if buf.len() < 8 || &buf[..6] != MAGIC {
        let what = if buf.len() < 6 {
            format!("file is only {} bytes long", buf.len())
        } else {
            "bad magic (expected \\x93NUMPY)".to_string()
        };
        return malformed(what);
    }
    let version = (buf[6], buf[7]);
    let len_size = match version {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        (a, b) => return malformed(format!("unsupported format version {a}.{b}")),
    };
    let pre = 8 + len_size;
    if buf.len() < pre {
        return malformed("file ends inside the header length field");
    }
    let header_len = if len_size == 2 {
        u16::from_le_bytes([buf[8], buf[9]]) as usize
    } else {
        let n = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
        usize::try_from(n).unwrap_or(usize::MAX)
    };
    if header_len > MAX_HEADER_LEN {
        return malformed(format!(
            "header length {header_len} exceeds the limit of {MAX_HEADER_LEN} bytes"
        ));
    }
    let data_offset = pre + header_len;
    if buf.len() < data_offset {
        return malformed(format!(
            "header length {header_len} runs past the end of the file ({} bytes)",
            buf.len()
        ));
    }
    let raw = &buf[pre..data_offset];
    let text: Vec<char> = if version.0 == 3 {
        match std::str::from_utf8(raw) {
            Ok(s) => s.chars().collect(),
            Err(_) => return malformed("version 3.0 header is not valid UTF-8"),
        }
    } else {
        // latin-1: every byte is one code point.
        raw.iter().map(|&b| b as char).collect()
    };

    let (dtype, shape) = interpret_header(&text)?;

    let Some((_, data_len)) = checked_sizes(dtype, &shape) else {
        return malformed(format!("shape {shape:?} of {} is too large (size overflows)", dtype));
    };
    let avail = buf.len() - data_offset;
    if avail < data_len {
        return Err(NpyErr::Truncated {
            expected: data_len as u64,
            actual: avail as u64,
        });
    }
    Ok(NpyHeader {
        version,
        dtype,
        shape,
        data_offset,
        data_len,
    })
}

fn interpret_header(text: &[char]) -> std::result::Result<(DType, Vec<usize>), NpyErr> {
    let mut p = Parser { s: text, pos: 0 };
    let val = p.parse_value(0).map_err(NpyErr::Malformed)?;
    p.skip_ws();
    if p.pos != text.len() {
        return malformed(format!("unexpected text after the header dict at offset {}", p.pos));
    }
    let PyVal::Dict(items) = val else {
        return malformed("header is not a dict");
    };
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (k, v) in items {
        let PyVal::Str(k) = k else {
            return malformed("header dict has a non-string key");
        };
        match k.as_str() {
            "descr" => descr = Some(v),
            "fortran_order" => fortran = Some(v),
            "shape" => shape = Some(v),
            other => return malformed(format!("unexpected header key '{}'", other.escape_debug())),
        }
    }
    let (Some(descr), Some(fortran), Some(shape)) = (descr, fortran, shape) else {
        return malformed("header must have the keys 'descr', 'fortran_order' and 'shape'");
    };

    let PyVal::Tuple(dims) = shape else {
        return malformed("'shape' is not a tuple of integers");
    };
    let mut shape = Vec::with_capacity(dims.len());
    for d in dims {
        match d {
            PyVal::Int(n) if n >= 0 => match usize::try_from(n) {
                Ok(n) => shape.push(n),
                Err(_) => return malformed(format!("shape dimension {n} is too large")),
            },
            PyVal::Int(n) => return malformed(format!("negative shape dimension {n}")),
            _ => return malformed("'shape' is not a tuple of integers"),
        }
    }

    let dtype = match descr {
        PyVal::Str(s) => parse_descr(&s)?,
        PyVal::List(fields) => {
            return Err(NpyErr::Unsupported {
                dtype: "[...]".to_string(),
                detail: format!(" (structured/record dtype with {} fields)", fields.len()),
            })
        }
        _ => return malformed("'descr' is neither a string nor a list"),
    };

    let PyVal::Bool(fortran) = fortran else {
        return malformed("'fortran_order' is not True or False");
    };
    // Fortran and C order coincide when at most one axis is longer than 1.
    if fortran && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err(NpyErr::Fortran);
    }
    Ok((dtype, shape))
}

/// Map an npy descr string (`<f4`, `|u1`, `u1`, ...) to a dtype.
fn parse_descr(descr: &str) -> std::result::Result<DType, NpyErr> {
    let unsupported = |detail: &str| NpyErr::Unsupported {
        dtype: descr.escape_debug().to_string(),
        detail: detail.to_string(),
    };
    let (order, code) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (Some(c), &descr[1..]),
        _ => (None, descr),
    };
    let dtype = match code {
        "f4" => DType::F32,
        "f8" => DType::F64,
        "f2" => DType::F16,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "i1" => DType::I8,
        "i4" => DType::I32,
        "i8" => DType::I64,
        _ => {
            let detail = match code.chars().next() {
                Some('O') => " (object arrays)",
                Some('V') => " (void/structured)",
                Some('U' | 'S' | 'a') => " (string)",
                Some('b') | Some('?') => " (bool)",
                Some('c') => " (complex)",
                Some('M' | 'm') => " (datetime)",
                _ if order == Some('>') => " (big-endian)",
                _ => "",
            };
            return Err(unsupported(detail));
        }
    };
    if dtype.size() > 1 {
        match order {
            Some('<') => {}
            Some('>') => return Err(unsupported(" (big-endian)")),
            Some('=') if cfg!(target_endian = "little") => {}
            _ => return Err(unsupported(" (byte order not given; expected '<')")),
        }
    }
    Ok(dtype)
}

/// The subset of Python literals that can appear in an npy header.
#[derive(Debug)]
enum PyVal {
    Str(String),
    Int(i128),
    Bool(bool),
    None,
    Tuple(Vec<PyVal>),
    List(Vec<PyVal>),
    Dict(Vec<(PyVal, PyVal)>),
}

struct Parser<'a> {
    s: &'a [char],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r' | '\x0c')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, c: char) -> std::result::Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{c}'")))
        }
    }

    fn unexpected(&self, wanted: &str) -> String {
        match self.peek() {
            Some(c) => format!(
                "bad header: expected {wanted} at offset {}, found '{}'",
                self.pos,
                c.escape_debug()
            ),
            None => format!("bad header: expected {wanted}, found end of header"),
        }
    }

    fn parse_value(&mut self, depth: usize) -> std::result::Result<PyVal, String> {
        if depth > MAX_DEPTH {
            return Err("bad header: nesting too deep".to_string());
        }
        self.skip_ws();
        match self.peek() {
            Some('{') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_ws();
                    if self.peek() == Some('}') {
                        self.pos += 1;
                        return Ok(PyVal::Dict(items));
                    }
                    let k = self.parse_value(depth + 1)?;
                    self.expect(':')?;
                    let v = self.parse_value(depth + 1)?;
                    items.push((k, v));
                    self.skip_ws();
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some('}') => {}
                        _ => return Err(self.unexpected("',' or '}'")),
                    }
                }
            }
            Some(open @ ('(' | '[')) => {
                let close = if open == '(' { ')' } else { ']' };
                self.pos += 1;
                let mut items = Vec::new();
                let mut saw_comma = false;
                loop {
                    self.skip_ws();
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        break;
                    }
                    items.push(self.parse_value(depth + 1)?);
                    self.skip_ws();
                    match self.peek() {
                        Some(',') => {
                            self.pos += 1;
                            saw_comma = true;
                        }
                        Some(c) if c == close => {}
                        _ => return Err(self.unexpected(&format!("',' or '{close}'"))),
                    }
                }
                if open == '[' {
                    Ok(PyVal::List(items))
                } else if items.len() == 1 && !saw_comma {
                    // "(x)" is just a parenthesised x in Python.
                    Ok(items.pop().unwrap_or(PyVal::None))
                } else {
                    Ok(PyVal::Tuple(items))
                }
            }
            Some('\'' | '"') => self.parse_str(),
            Some('u' | 'b') if matches!(self.s.get(self.pos + 1), Some('\'' | '"')) => {
                self.pos += 1;
                self.parse_str()
            }
            Some(c) if c.is_ascii_digit() || c == '-' || c == '+' => self.parse_int(),
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == '_') {
                    self.pos += 1;
                }
                let word: String = self.s[start..self.pos].iter().collect();
                match word.as_str() {
                    "True" => Ok(PyVal::Bool(true)),
                    "False" => Ok(PyVal::Bool(false)),
                    "None" => Ok(PyVal::None),
                    _ => Err(format!(
                        "bad header: unexpected name '{}' at offset {start}",
                        word.escape_debug()
                    )),
                }
            }
            _ => Err(self.unexpected("a value")),
        }
    }

    fn parse_str(&mut self) -> std::result::Result<PyVal, String> {
        let quote = self.peek().unwrap_or('\'');
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None | Some('\n') => return Err(format!("bad header: unterminated string starting at offset {start}")),
                Some('\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(c) => {
                            out.push(c);
                            self.pos += 1;
                        }
                        None => continue,
                    }
                }
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(PyVal::Str(out));
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn parse_int(&mut self) -> std::result::Result<PyVal, String> {
        let start = self.pos;
        let neg = match self.peek() {
            Some('-') => {
                self.pos += 1;
                true
            }
            Some('+') => {
                self.pos += 1;
                false
            }
            _ => false,
        };
        let mut v: i128 = 0;
        let mut digits = 0usize;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(d as i128))
                .ok_or_else(|| format!("bad header: integer at offset {start} is too large"))?;
            digits += 1;
            self.pos += 1;
        }
        if digits == 0 {
            return Err(format!("bad header: malformed number at offset {start}"));
        }
        // Python 2 era writers emitted long literals like `3L`.
        if matches!(self.peek(), Some('L' | 'l')) {
            self.pos += 1;
        }
        if matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == '.' || c == '_') {
            return Err(format!(
                "bad header: malformed number at offset {start} (only integers are allowed)"
            ));
        }
        Ok(PyVal::Int(if neg { -v } else { v }))
    }
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

/// The complete preamble + header that precedes the data of a `.npy` file
/// holding a C-order array of `dtype` and `shape` (byte-identical to what
/// `numpy.save` writes).
pub fn npy_header_bytes(dtype: DType, shape: &[usize]) -> Option<Vec<u8>> {
    let descr = dtype.npy_descr()?;
    let shape_repr = match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => {
            let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_repr}, }}");
    if let Some(first) = shape.first() {
        let digits = first.to_string().len();
        dict.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }
    let hlen = dict.len() + 1; // + '\n'
    for (major, len_size) in [(1u8, 2usize), (2u8, 4usize)] {
        let padlen = ARRAY_ALIGN - ((8 + len_size + hlen) % ARRAY_ALIGN);
        let total = hlen + padlen;
        let len_bytes: Vec<u8> = if len_size == 2 {
            match u16::try_from(total) {
                Ok(n) => n.to_le_bytes().to_vec(),
                Err(_) => continue,
            }
        } else {
            u32::try_from(total).ok()?.to_le_bytes().to_vec()
        };
        let mut out = Vec::with_capacity(8 + len_size + total);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[major, 0]);
        out.extend_from_slice(&len_bytes);
        out.extend_from_slice(dict.as_bytes());
        out.resize(out.len() + padlen, b' ');
        out.push(b'\n');
        return Some(out);
    }
    None
}

fn header_for(path: &Path, dtype: DType, shape: &[usize]) -> Result<(Vec<u8>, usize)> {
    let header = npy_header_bytes(dtype, shape).ok_or_else(|| IoError::NotRepresentable {
        path: path.to_path_buf(),
        dtype,
        format: ".npy",
    })?;
    let (_, nbytes) = checked_sizes(dtype, shape).ok_or_else(|| IoError::SizeMismatch {
        path: path.to_path_buf(),
        msg: format!("shape {shape:?} of {dtype} overflows the address space"),
    })?;
    Ok((header, nbytes))
}

/// Write a C-order array to a `.npy` file in one go.
/// `data` must hold exactly `product(shape) * dtype.size()` little-endian bytes.
pub fn write_npy(path: impl AsRef<Path>, dtype: DType, shape: &[usize], data: &[u8]) -> Result<()> {
    let path = path.as_ref();
    let (_, nbytes) = header_for(path, dtype, shape)?;
    if data.len() != nbytes {
        return Err(IoError::SizeMismatch {
            path: path.to_path_buf(),
            msg: format!("shape {shape:?} of {dtype} needs {nbytes} bytes, got {}", data.len()),
        });
    }
    let mut w = NpyWriter::create(path, dtype, shape)?;
    w.write_chunk(data)?;
    w.finish()
}

/// Streaming `.npy` writer: the header is written by [`NpyWriter::create`],
/// data follows in any number of [`NpyWriter::write_chunk`] calls, and
/// [`NpyWriter::finish`] checks that exactly the announced amount of data was
/// written. A writer dropped without `finish` leaves a file that readers
/// reject as truncated.
pub struct NpyWriter {
    path: PathBuf,
    out: BufWriter<File>,
    expected: u64,
    written: u64,
}

impl NpyWriter {
    /// Create (truncate) `path` and write the header for `dtype`/`shape`.
    pub fn create(path: impl AsRef<Path>, dtype: DType, shape: &[usize]) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let (header, nbytes) = header_for(&path, dtype, shape)?;
        let os = |source| IoError::Os {
            path: path.clone(),
            source,
        };
        let file = File::create(&path).map_err(os)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&header).map_err(os)?;
        Ok(NpyWriter {
            path,
            out,
            expected: nbytes as u64,
            written: 0,
        })
    }

    /// Append data bytes. Fails (writing nothing) if this would exceed the
    /// size announced in the header.
    pub fn write_chunk(&mut self, chunk: &[u8]) -> Result<()> {
        let after = self.written.saturating_add(chunk.len() as u64);
        if after > self.expected {
            return Err(IoError::SizeMismatch {
                path: self.path.clone(),
                msg: format!(
                    "writing {} more bytes would exceed the {} data bytes announced in the header ({} already written)",
                    chunk.len(),
                    self.expected,
                    self.written
                ),
            });
        }
        self.out.write_all(chunk).map_err(|source| IoError::Os {
            path: self.path.clone(),
            source,
        })?;
        self.written = after;
        Ok(())
    }

    /// Data bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Total data bytes the header announces.
    pub fn bytes_expected(&self) -> u64 {
        self.expected
    }

    /// Check that all data was written and flush the file.
    pub fn finish(mut self) -> Result<()> {
        if self.written != self.expected {
            return Err(IoError::SizeMismatch {
                path: self.path.clone(),
                msg: format!(
                    "finished after {} data bytes, header announces {}",
                    self.written, self.expected
                ),
            });
        }
        self.out.flush().map_err(|source| IoError::Os {
            path: self.path.clone(),
            source,
        })
    }
}

impl Write for NpyWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_chunk(buf).map(|()| buf.len()).map_err(|e| match e {
            IoError::Os { source, .. } => source,
            other => std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string()),
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Convenience: `TensorData` to `.npy`.
pub fn write_npy_tensor(path: impl AsRef<Path>, t: &TensorData) -> Result<()> {
    write_npy(path, t.dtype(), t.shape(), t.bytes())
}
