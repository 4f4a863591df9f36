//! CPU replay of a probe capture: regenerate every case, recompute the model,
//! check the stored digest, raw outputs and mismatch records.

use super::*;
use crate::device::suite_replay::{wrong_suite, Replay, ReplayOptions, ReplayOutcome};

/// The probe suite's CPU replay: every case of every probe.
pub struct Suite;

impl Replay for Suite {
    fn suite(&self) -> &'static str {
        SUITE
    }

    /// Fails (once) when some probe does not replay: digest not reproduced,
    /// stored outputs unexplained or records inconsistent
    /// ([`ProbeReplayReport::ok`]). Mismatches the GPU run recorded are
    /// reported, not failed: the capture explains them.
    fn replay(&self, capture: &Capture, _: &ReplayOptions) -> Result<ReplayOutcome> {
        let r = replay(capture)?;
        Ok(ReplayOutcome {
            summary: format!(
                "{} probes replayed, {} recorded mismatches{}",
                r.lines.len(),
                r.mismatches(),
                if r.ok() { "" } else { " -- replay FAILED" }
            ),
            details: r.table().lines().map(str::to_string).collect(),
            problems: Vec::new(),
            failed: usize::from(!r.ok()),
        })
    }
}

/// The replay of one probe.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProbeReplayLine {
    pub name: String,
    pub cases: u64,
    /// Mismatches the capture recorded (GPU vs model at capture time).
    pub recorded_mismatches: u64,
    /// The stored digest equals the model's outputs (with the recorded GPU
    /// bits substituted at recorded mismatches).
    pub digest_ok: bool,
    /// Stored raw outputs compared elementwise.
    pub first_checked: u64,
    /// Stored raw outputs that differ from the model at a case that is not
    /// a recorded mismatch (or differ from its record).
    pub first_unexplained: u64,
    /// Recorded mismatches whose inputs, model bits or GPU bits do not
    /// replay (with reasons).
    pub record_errors: Vec<String>,
    pub nan_payloads: BTreeMap<String, u64>,
}

/// The replay of a probe capture.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct ProbeReplayReport {
    pub lines: Vec<ProbeReplayLine>,
}

impl ProbeReplayReport {
    /// Every probe replays: digest reproduced, stored outputs explained,
    /// records consistent. (Recorded mismatches may exist; see
    /// [`ProbeReplayReport::mismatches`].)
    pub fn ok(&self) -> bool {
        self.lines
            .iter()
            .all(|l| l.digest_ok && l.first_unexplained == 0 && l.record_errors.is_empty())
    }

    /// Total recorded GPU-vs-model mismatches.
    pub fn mismatches(&self) -> u64 {
        self.lines.iter().map(|l| l.recorded_mismatches).sum()
    }

    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<26} {:>9} {:>10} {:>7} {:>11}  {}\n",
            "probe", "cases", "mismatches", "digest", "first-ok", "problems"
        );
        for l in &self.lines {
            s += &format!(
                "{:<26} {:>9} {:>10} {:>7} {:>11}  {}\n",
                l.name,
                l.cases,
                l.recorded_mismatches,
                if l.digest_ok { "ok" } else { "DIFFERS" },
                format!("{}/{}", l.first_checked - l.first_unexplained, l.first_checked),
                if l.record_errors.is_empty() {
                    "-".into()
                } else {
                    l.record_errors.join("; ")
                }
            );
        }
        s
    }
}

/// Replays a probe capture on the CPU model: regenerates every case from
/// the stored seed and count, recomputes the model, and checks the stored
/// digest, the stored raw outputs and the mismatch records.
pub fn replay(capture: &Capture) -> Result<ProbeReplayReport> {
    if capture.manifest.suite != SUITE {
        return Err(wrong_suite(capture, SUITE));
    }
    let records: Vec<ProbeRecord> = capture.read_json("probes.json")?;
    let mut report = ProbeReplayReport::default();
    for rec in records {
        let spec = find(&rec.name)
            .ok_or_else(|| DeviceError::Capture(format!("unknown probe `{}` in probes.json", rec.name)))?;
        let tc = spec.tile_cases() as u64;
        if rec.cases == 0 || rec.cases % tc != 0 || rec.cases / tc != rec.tiles || rec.cases > MAX_CASES as u64 {
            return Err(DeviceError::Capture(format!(
                "{}: inconsistent case count {} / tiles {}",
                rec.name, rec.cases, rec.tiles
            )));
        }
        let cases = Cases::generate(spec, rec.seed, rec.cases as usize)?;
        let model = cases.model();
        let first_bytes = capture.read(&rec.first_file)?;
        let records: Vec<MismatchRecord> = capture.read_json(&rec.mismatch_file)?;
        let mut errors = Vec::new();
        // records: inputs regenerate, model bits replay, GPU differs
        let mut by_case: BTreeMap<u64, u32> = BTreeMap::new();
        for r in &records {
            let i = r.case as usize;
            if i >= cases.len() {
                errors.push(format!("record case {} out of range", r.case));
                continue;
            }
            let (a, b, c) = cases.inputs(i);
            if a != r.a.as_slice() || b != r.b.as_slice() || c.to_bits() != r.c_bits {
                errors.push(format!("case {}: recorded inputs differ from the generator", r.case));
            }
            if !same(f32::from_bits(r.model_bits), model[i]) {
                errors.push(format!(
                    "case {}: recorded model {} but the model now gives {}",
                    r.case,
                    hex32(r.model_bits),
                    hex32(model[i].to_bits())
                ));
            }
            if same(f32::from_bits(r.gpu_bits), model[i]) {
                errors.push(format!(
                    "case {}: recorded as a mismatch but the GPU bits match",
                    r.case
                ));
            }
            by_case.insert(r.case, r.gpu_bits);
        }
        if (records.len() as u64) < rec.mismatches.min(MAX_RECORDS as u64) || records.len() as u64 > rec.mismatches {
            errors.push(format!("{} records for {} mismatches", records.len(), rec.mismatches));
        }
        // digest: model with the recorded GPU bits substituted
        let digest_ok = if rec.mismatches as usize > records.len() {
            errors.push(format!(
                "{} mismatches but only {} recorded: the digest cannot be rebuilt",
                rec.mismatches,
                records.len()
            ));
            false
        } else {
            let mut expect = model.clone();
            for (&i, &bits) in &by_case {
                if let Some(v) = expect.get_mut(i as usize) {
                    *v = f32::from_bits(bits);
                }
            }
            canonical_digest(&expect) == rec.digest
        };
        // the stored raw outputs
        if first_bytes.len() % 4 != 0 || first_bytes.len() / 4 != rec.first_count as usize {
            errors.push(format!("{}: {} bytes", rec.first_file, first_bytes.len()));
        }
        let mut first_checked = 0u64;
        let mut first_unexplained = 0u64;
        for (i, w) in first_bytes.chunks_exact(4).enumerate().take(cases.len()) {
            let g = f32::from_bits(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            first_checked += 1;
            let explained = match by_case.get(&(i as u64)) {
                Some(&bits) => same(g, f32::from_bits(bits)),
                None => same(g, model[i]),
            };
            if !explained {
                first_unexplained += 1;
            }
        }
        report.lines.push(ProbeReplayLine {
            name: rec.name.clone(),
            cases: rec.cases,
            recorded_mismatches: rec.mismatches,
            digest_ok,
            first_checked,
            first_unexplained,
            record_errors: errors,
            nan_payloads: rec.nan_payloads.clone(),
        });
    }
    Ok(report)
}
