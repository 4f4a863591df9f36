//! Real hardware: running orders, tensor-core instructions, conversions and
//! vendor GEMMs on an NVIDIA GPU, and the captures that let a machine
//! without a GPU check the CPU model against those bytes.
//!
//! Everything that talks to the GPU sits behind the `cuda` cargo feature
//! (`gpu`, and the `run` functions of the other submodules); it loads the
//! CUDA libraries at run time, so a build with the feature still starts on a
//! machine without them and reports a clear error. Case generation, CUDA
//! source text and capture replay are plain Rust and always compiled, so CI
//! replays the committed captures without a GPU.

pub mod capture;
pub mod casts;
pub mod codegen;
pub mod collective;
pub mod conform;
#[cfg(feature = "cuda")]
pub mod exec;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod nccl_subject;
pub mod probe;
pub mod replay;
pub mod subject;
pub mod suite_replay;
pub mod vendor;

#[cfg(feature = "cuda")]
pub mod gpu;

/// Errors of the device layer. Every failure is reported, never retried on
/// another path: a refused configuration is an error, not a fallback.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("this mxbi was built without GPU support; rebuild with `cargo build --release --features cuda`")]
    NotBuilt,
    #[error("{0}")]
    Unavailable(String),
    #[error("CUDA driver: {0}")]
    Driver(String),
    #[error("NVRTC compile of `{name}` failed: {log}")]
    Compile { name: String, log: String },
    #[error("{library}: {what}")]
    Library { library: &'static str, what: String },
    #[error("refused: {0}")]
    Refused(String),
    #[error("capture: {0}")]
    Capture(String),
    #[error("I/O on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, DeviceError>;
