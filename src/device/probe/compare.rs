//! GPU outputs against the model: the match rule (equal bits or both NaN),
//! the canonical digest, and the per-probe comparison that fills a
//! [`ProbeRecord`] (see "Comparison, NaN and the digest" in the module
//! documentation).

use super::*;

/// Whether a GPU output matches the model (equal bits, or both NaN).
pub fn same(gpu: f32, model: f32) -> bool {
    canonical_bits(gpu) == canonical_bits(model)
}

/// SHA-256 of the canonical bits (see the module documentation).
pub fn canonical_digest(values: &[f32]) -> String {
    let canon: Vec<f32> = values.iter().map(|&v| f32::from_bits(canonical_bits(v))).collect();
    f32_digest(&canon)
}
/// The comparison of one probe's GPU outputs with the model.
#[derive(Clone, Debug)]
pub struct ProbeResult {
    pub record: ProbeRecord,
    /// The first GPU outputs, raw.
    pub first: Vec<f32>,
    pub mismatches: Vec<MismatchRecord>,
}

pub(super) fn hex32(x: u32) -> String {
    format!("0x{x:08x}")
}

fn file_stem(name: &str) -> String {
    name.to_string()
}

fn record_for(cases: &Cases, i: usize, gpu: f32, model: f32) -> MismatchRecord {
    let (t, row, n) = cases.position(i);
    let (a, b, c) = cases.inputs(i);
    MismatchRecord {
        case: i as u64,
        tile: t as u64,
        row: row as u32,
        col: n as u32,
        a: a.to_vec(),
        b: b.to_vec(),
        c_bits: c.to_bits(),
        gpu_bits: gpu.to_bits(),
        model_bits: model.to_bits(),
        c: format!("{c:e}"),
        gpu: format!("{gpu:e}"),
        model: format!("{model:e}"),
        class: format!(
            "tile:{} c:{}",
            TILE_CLASSES[cases.tile_class[t] as usize], C_CLASSES[cases.c_class[i] as usize]
        ),
    }
}

/// Compares GPU outputs (case order) with the model's.
pub fn compare(cases: &Cases, gpu: &[f32]) -> Result<ProbeResult> {
    if gpu.len() != cases.len() {
        return Err(DeviceError::Capture(format!(
            "{}: {} GPU outputs for {} cases",
            cases.spec.name,
            gpu.len(),
            cases.len()
        )));
    }
    let model = cases.model();
    Ok(compare_with_model(cases, gpu, &model))
}

fn compare_with_model(cases: &Cases, gpu: &[f32], model: &[f32]) -> ProbeResult {
    let spec = &cases.spec;
    let mut classes: BTreeMap<String, ClassCount> = BTreeMap::new();
    let mut nan_payloads: BTreeMap<String, u64> = BTreeMap::new();
    let (mut mismatches, mut nan_outputs, mut model_nans) = (0u64, 0u64, 0u64);
    let mut records = Vec::new();
    let mut tile_counts = vec![ClassCount::default(); TILE_CLASSES.len()];
    let mut c_counts = vec![ClassCount::default(); C_CLASSES.len()];
    for i in 0..cases.len() {
        let (g, m) = (gpu[i], model[i]);
        let bad = !same(g, m);
        let t = i / spec.tile_cases();
        let tc = &mut tile_counts[cases.tile_class[t] as usize];
        tc.cases += 1;
        let cc = &mut c_counts[cases.c_class[i] as usize];
        cc.cases += 1;
        if g.is_nan() {
            nan_outputs += 1;
            *nan_payloads.entry(hex32(g.to_bits())).or_insert(0) += 1;
        }
        if m.is_nan() {
            model_nans += 1;
        }
        if bad {
            mismatches += 1;
            tile_counts[cases.tile_class[t] as usize].mismatches += 1;
            c_counts[cases.c_class[i] as usize].mismatches += 1;
            if records.len() < MAX_RECORDS {
                records.push(record_for(cases, i, g, m));
            }
        }
    }
    for (i, c) in tile_counts.into_iter().enumerate() {
        if c.cases > 0 {
            classes.insert(format!("tile:{}", TILE_CLASSES[i]), c);
        }
    }
    for (i, c) in c_counts.into_iter().enumerate() {
        if c.cases > 0 {
            classes.insert(format!("c:{}", C_CLASSES[i]), c);
        }
    }
    let first: Vec<f32> = gpu[..gpu.len().min(FIRST_OUTPUTS)].to_vec();
    let stem = file_stem(spec.name);
    ProbeResult {
        record: ProbeRecord {
            name: spec.name.into(),
            ptx: spec.ptx.into(),
            model: spec.order.into(),
            seed: cases.seed,
            cases: cases.len() as u64,
            tiles: cases.tiles as u64,
            digest: canonical_digest(gpu),
            mismatches,
            nan_outputs,
            nan_payloads,
            model_nan_outputs: model_nans,
            classes,
            first_file: format!("{stem}.first.bin"),
            first_count: first.len() as u64,
            mismatch_file: format!("{stem}.mismatches.json"),
            records: records.len() as u64,
        },
        first,
        mismatches: records,
    }
}
