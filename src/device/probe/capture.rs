//! The probe capture format (see "Capture layout" in the module
//! documentation): the records stored in `probes.json` and
//! `NAME.mismatches.json`, and the writer of a capture folder.

use super::*;

/// Cases and mismatches of one class.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassCount {
    pub cases: u64,
    pub mismatches: u64,
}

/// One case where the GPU and the model differ.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MismatchRecord {
    pub case: u64,
    pub tile: u64,
    pub row: u32,
    pub col: u32,
    /// Codes of row `row` of A and column `col` of B.
    pub a: Vec<u16>,
    pub b: Vec<u16>,
    pub c_bits: u32,
    pub gpu_bits: u32,
    pub model_bits: u32,
    /// Readable values (not read back).
    #[serde(default)]
    pub c: String,
    #[serde(default)]
    pub gpu: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub class: String,
}

/// One probe's summary, as stored in `probes.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ProbeRecord {
    pub name: String,
    pub ptx: String,
    /// The model, as an order spelling.
    pub model: String,
    pub seed: u64,
    pub cases: u64,
    pub tiles: u64,
    /// SHA-256 of the GPU outputs' canonical bits (NaN -> 0x7FFFFFFF).
    pub digest: String,
    pub mismatches: u64,
    /// GPU outputs that are NaN, and their bit patterns.
    pub nan_outputs: u64,
    pub nan_payloads: BTreeMap<String, u64>,
    /// Model outputs that are NaN.
    pub model_nan_outputs: u64,
    /// `tile:CLASS` and `c:CLASS` counts.
    pub classes: BTreeMap<String, ClassCount>,
    pub first_file: String,
    pub first_count: u64,
    pub mismatch_file: String,
    pub records: u64,
}

/// Writes a probe capture folder (see the module documentation).
pub fn write_capture(
    dir: &Path,
    results: &[ProbeResult],
    device: serde_json::Value,
    notes: Vec<String>,
) -> Result<Manifest> {
    let mut w = CaptureWriter::create(dir)?;
    let records: Vec<&ProbeRecord> = results.iter().map(|r| &r.record).collect();
    for r in results {
        let bytes: Vec<u8> = r.first.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
        w.put(&r.record.first_file, &bytes)?;
        w.put_json(&r.record.mismatch_file, &r.mismatches)?;
    }
    w.put_json("probes.json", &records)?;
    w.finish(SUITE, device, notes)
}
