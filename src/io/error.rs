//! Error type of the tensor file layer.

use std::path::PathBuf;

use super::dtype::DType;

/// Everything that can go wrong reading or writing tensor files.
///
/// Every message is a single line; file-related variants start with the path.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// An operating-system level error (open, read, map, write).
    #[error("{}: {source}", path.display())]
    Os {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A dtype that the file format allows but this crate does not handle.
    #[error("{}: unsupported dtype '{dtype}'{detail}; supported: {supported}", path.display())]
    UnsupportedDtype {
        path: PathBuf,
        /// The dtype as spelled in the file (e.g. `>f4`, `BOOL`).
        dtype: String,
        /// Extra explanation such as ` (big-endian)`; empty or starting with a space.
        detail: String,
        /// Comma-separated list of supported spellings for this format.
        supported: String,
    },

    /// A `.npy` array stored in Fortran (column-major) order.
    #[error("{}: fortran_order=True arrays are not supported (only C order); re-save with np.ascontiguousarray", path.display())]
    FortranOrder { path: PathBuf },

    /// The header promises more data than the file holds.
    #[error("{}: truncated: header says {expected} bytes of data, file has {actual}", path.display())]
    Truncated { path: PathBuf, expected: u64, actual: u64 },

    /// The file is not a well-formed file of its format.
    #[error("{}: {msg}", path.display())]
    Malformed { path: PathBuf, msg: String },

    /// The requested tensor is not in the file.
    #[error("{}: no tensor named '{name}'; available: {available}", path.display())]
    TensorNotFound {
        path: PathBuf,
        name: String,
        available: String,
    },

    /// The file holds several tensors and no name was given.
    #[error("{}: file holds {count} tensors, a tensor name is required; available: {available}", path.display())]
    NameRequired {
        path: PathBuf,
        count: usize,
        available: String,
    },

    /// The file holds no tensor at all.
    #[error("{}: file holds no tensors", path.display())]
    Empty { path: PathBuf },

    /// The file type could not be determined from the extension or content.
    #[error("{}: unknown tensor file type (expected a .npy or .safetensors file)", path.display())]
    UnknownFormat { path: PathBuf },

    /// A dtype that the output format cannot represent (e.g. BF16 in `.npy`).
    #[error("{}: dtype {dtype} cannot be stored in {format} files", path.display())]
    NotRepresentable {
        path: PathBuf,
        dtype: DType,
        format: &'static str,
    },

    /// Bytes written or supplied do not match what the shape requires.
    #[error("{}: size mismatch: {msg}", path.display())]
    SizeMismatch { path: PathBuf, msg: String },

    /// In-memory tensor construction/access error (no file involved).
    #[error("{0}")]
    Tensor(String),
}

/// Result alias for this module.
pub type Result<T, E = IoError> = std::result::Result<T, E>;

/// Join names for an error message, keeping it to one reasonably short line.
pub(crate) fn list_names<S: AsRef<str>>(names: &[S]) -> String {
    const MAX: usize = 12;
    let mut out: Vec<String> = names
        .iter()
        .take(MAX)
        .map(|n| format!("'{}'", n.as_ref().escape_debug()))
        .collect();
    if names.len() > MAX {
        out.push(format!("... ({} more)", names.len() - MAX));
    }
    if out.is_empty() {
        "(none)".to_string()
    } else {
        out.join(", ")
    }
}
