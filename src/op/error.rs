//! Why an op could not run: one-line errors.

use crate::gemm::GemmError;
use crate::order::OrderError;

/// Why an op could not run. Every variant is a clear one-line message.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error("bad op spec: {0}")]
    Spec(String),
    #[error("unknown preset '{name}'; known presets: {known}")]
    UnknownPreset { name: String, known: String },
    #[error("preset '{preset}' does not support world size {got}; supported: {supported}")]
    WorldSize {
        preset: String,
        got: usize,
        supported: String,
    },
    #[error("shape: {0}")]
    Shape(String),
    #[error("input: {0}")]
    Input(String),
    #[error(transparent)]
    Order(#[from] OrderError),
    #[error("gemm: {0}")]
    Gemm(#[from] GemmError),
}

pub type Result<T> = std::result::Result<T, OpError>;
