//! The casts capture format: `sweep.json` ([`CastSweepReport`], one
//! [`ConversionResult`] per conversion, with its mismatch records), its
//! writer and its checked reader.

use super::*;
use crate::device::suite_replay::wrong_suite;

/// One input where the GPU and the CPU gave different codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MismatchRecord {
    pub input_bits: u32,
    pub gpu_code: u16,
    pub cpu_code: u16,
}

/// Outcome of one conversion's sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Swept; see the mismatch count.
    Ran,
    /// NVRTC (or the driver's PTX JIT) refused the kernel; `error` holds the log.
    CompileFailed,
    /// A driver or CPU-model error stopped this conversion; `error` says which.
    Failed,
}

/// Result of one conversion in `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConversionResult {
    pub name: String,
    pub format: Format,
    pub code_bytes: u32,
    pub path: CvtPath,
    pub mechanism: String,
    /// The distinct `cvt` opcodes in the PTX NVRTC produced for the kernel
    /// (empty when they could not be listed).
    #[serde(default)]
    pub ptx_cvt: Vec<String>,
    /// CUDA statements of the kernel body.
    pub cuda: String,
    /// The CPU policy the GPU codes were compared with.
    pub policy: CastPolicy,
    pub known_gap: Option<String>,
    /// Mismatches over all 2^32 inputs that `known_gap` predicts.
    #[serde(default)]
    pub predicted_mismatches: Option<u64>,
    pub status: Status,
    pub error: Option<String>,
    /// Inputs compared.
    pub inputs: u64,
    /// Inputs whose GPU and CPU codes differ.
    pub mismatches: u64,
    /// Swept chunk indices, ascending.
    pub chunks: Vec<u32>,
    /// SHA-256 of the GPU codes of each swept chunk (same order as `chunks`).
    pub gpu_sha256: Vec<String>,
    /// Mismatches in each swept chunk (same order as `chunks`).
    pub chunk_mismatches: Vec<u64>,
    /// The first [`FIRST_RECORDS`] mismatches in input order, plus the first
    /// mismatch of every other mismatching chunk; ascending by input.
    pub records: Vec<MismatchRecord>,
    pub seconds: f64,
}

impl ConversionResult {
    /// A result with no chunks swept yet.
    pub fn new(conv: &Conversion) -> ConversionResult {
        ConversionResult {
            name: conv.name.into(),
            format: conv.format,
            code_bytes: conv.code_bytes(),
            path: conv.path,
            mechanism: conv.mechanism.into(),
            ptx_cvt: Vec::new(),
            cuda: conv.body.into(),
            policy: conv.policy(),
            known_gap: conv.known_gap.map(str::to_string),
            predicted_mismatches: conv.predicted_mismatches,
            status: Status::Ran,
            error: None,
            inputs: 0,
            mismatches: 0,
            chunks: Vec::new(),
            gpu_sha256: Vec::new(),
            chunk_mismatches: Vec::new(),
            records: Vec::new(),
            seconds: 0.0,
        }
    }

    /// Whether this conversion needs attention: it did not run, or it
    /// mismatched without a predicted explanation, or (over all 2^32
    /// inputs) the count differs from the predicted one.
    pub fn unexplained(&self) -> bool {
        if self.status != Status::Ran {
            return true;
        }
        if self.inputs == 1u64 << 32 {
            self.mismatches != self.predicted_mismatches.unwrap_or(0)
        } else {
            self.mismatches > 0 && self.known_gap.is_none()
        }
    }
}

/// The whole sweep, stored as `sweep.json` in the capture folder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CastSweepReport {
    pub schema: u32,
    pub chunk_bits: u32,
    /// `all` or `boundary` (the `--quick` subset).
    pub selection: String,
    pub conversions: Vec<ConversionResult>,
}

/// Writes a casts capture folder: [`SWEEP_FILE`] (compact JSON, one line)
/// and the manifest with `device` (the GPU's `DeviceInfo` as JSON) and
/// `notes`.
pub fn write_capture(
    dir: &std::path::Path,
    report: &CastSweepReport,
    device: serde_json::Value,
    notes: Vec<String>,
) -> Result<crate::device::capture::Manifest> {
    let mut text = serde_json::to_vec(report).map_err(|e| DeviceError::Capture(e.to_string()))?;
    text.push(b'\n');
    let mut w = crate::device::capture::CaptureWriter::create(dir)?;
    w.put(SWEEP_FILE, &text)?;
    w.finish(SUITE, device, notes)
}

/// Reads and checks the sweep of a casts capture.
pub fn read_sweep(capture: &Capture) -> Result<CastSweepReport> {
    if capture.manifest.suite != SUITE {
        return Err(wrong_suite(capture, SUITE));
    }
    let sweep: CastSweepReport = capture.read_json(SWEEP_FILE)?;
    if sweep.chunk_bits != CHUNK_BITS {
        return Err(DeviceError::Capture(format!(
            "{SWEEP_FILE}: chunk_bits {} (this mxbi uses {CHUNK_BITS})",
            sweep.chunk_bits
        )));
    }
    for (i, r) in sweep.conversions.iter().enumerate() {
        if sweep.conversions[..i].iter().any(|q| q.name == r.name) {
            return Err(DeviceError::Capture(format!("{SWEEP_FILE}: {} listed twice", r.name)));
        }
        let n = r.chunks.len();
        if r.gpu_sha256.len() != n || r.chunk_mismatches.len() != n {
            return Err(DeviceError::Capture(format!(
                "{SWEEP_FILE}: {}: {} chunks, {} digests, {} counts",
                r.name,
                n,
                r.gpu_sha256.len(),
                r.chunk_mismatches.len()
            )));
        }
        if r.chunks.iter().any(|&c| c >= CHUNK_COUNT) || r.chunks.windows(2).any(|w| w[0] >= w[1]) {
            return Err(DeviceError::Capture(format!(
                "{SWEEP_FILE}: {}: chunk list not ascending in 0..{CHUNK_COUNT}",
                r.name
            )));
        }
    }
    Ok(sweep)
}
