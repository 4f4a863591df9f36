//! The conformance capture format: `conform/cases.json` holds one
//! [`CaseRecord`] per case (order, shape, seed, GPU row digests, foil counts).

use super::*;

/// One mismatching element.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Mismatch {
    pub i: usize,
    pub j: usize,
    pub gpu: String,
    pub model: String,
}

/// The result of one case.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CaseRecord {
    pub case: ConformCase,
    pub elements: usize,
    pub mismatches: usize,
    /// Elements where both are NaN with different payloads.
    pub nan_payload_differences: usize,
    /// Outputs the kernel left unwritten (poison survived).
    pub unwritten: usize,
    pub first_mismatches: Vec<Mismatch>,
    /// Mismatches of the GPU bytes against each foil order (see `foils`).
    #[serde(default)]
    pub foils: Vec<(String, usize)>,
    /// Per output row: 16 hex digits of `row_digest` of the GPU row.
    pub gpu_row_digests: String,
    /// GPU time of the case's kernels in ms (CUDA events).
    pub gpu_ms: f32,
    /// Every GPU output is NaN (recorded since the generator screens for it).
    #[serde(default)]
    pub all_nan: bool,
}

/// The conformance report (`conform/cases.json` in a capture).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConformReport {
    pub options: ConformOptions,
    pub records: Vec<CaseRecord>,
    /// Cases whose order could not be built or run, with the reason.
    pub failed: Vec<(usize, String, String)>,
}
