//! CPU replay of a casts capture: recompute the selected chunks' digests and
//! the stored records under the current conversion table.

use super::*;
use crate::device::suite_replay::{list_or_none, Replay, ReplayOptions, ReplayOutcome};

/// The casts suite's CPU replay: the sampled chunks (every chunk with
/// [`ReplayOptions::full`]) and every stored record.
pub struct Suite;

impl Replay for Suite {
    fn suite(&self) -> &'static str {
        SUITE
    }

    /// Fails on every conversion whose replay shows a disagreement that the
    /// conversion table does not explain.
    fn replay(&self, capture: &Capture, opts: &ReplayOptions) -> Result<ReplayOutcome> {
        let sel = if opts.full {
            ChunkSelection::All
        } else {
            ChunkSelection::Sampled { seed: opts.cast_seed }
        };
        let r = replay(capture, sel.clone())?;
        let unexplained: Vec<String> = r.unexplained().iter().map(|c| c.name.clone()).collect();
        let chunks: usize = r.conversions.iter().map(|c| c.chunks.len()).sum();
        Ok(ReplayOutcome {
            summary: format!(
                "{} conversions, {chunks} chunks replayed ({}), {} differing chunks/records, unexplained: {}",
                r.conversions.len(),
                sel.name(),
                r.mismatches(),
                list_or_none(&unexplained, ", ")
            ),
            details: Vec::new(),
            problems: Vec::new(),
            failed: unexplained.len(),
        })
    }
}

/// Replay of one conversion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConversionReplay {
    pub name: String,
    /// Mismatches counted on the GPU machine over the whole sweep.
    pub captured_mismatches: u64,
    /// The chunks replayed (selected and swept), ascending.
    pub chunks: Vec<u32>,
    /// Chunks whose CPU digest now differs from the stored GPU digest.
    pub chunks_differing: Vec<u32>,
    /// Of those, chunks where the GPU machine counted no mismatch: the CPU
    /// model changed since the capture.
    pub chunks_differing_unrecorded: Vec<u32>,
    /// Chunks that now agree although the GPU machine counted mismatches
    /// there (the CPU model was fixed since the capture).
    pub chunks_now_agreeing: Vec<u32>,
    pub records_checked: u64,
    /// Stored records where the CPU code now differs from the GPU code.
    pub record_mismatches: u64,
    /// Stored records whose CPU code differs from the CPU code stored with them.
    pub records_cpu_changed: u64,
    /// The current conversion table's explanation, if any.
    pub known_gap: Option<String>,
    /// Set when the conversion did not run on the GPU, or is not in the
    /// current table.
    pub skipped: Option<String>,
}

impl ConversionReplay {
    /// Mismatches the current CPU model shows against the stored GPU bytes
    /// (differing chunks plus differing records).
    pub fn mismatches(&self) -> u64 {
        self.chunks_differing.len() as u64 + self.record_mismatches
    }

    /// Whether the replay shows a disagreement that the current table does
    /// not explain.
    pub fn unexplained(&self) -> bool {
        !self.chunks_differing_unrecorded.is_empty() || (self.mismatches() > 0 && self.known_gap.is_none())
    }
}

/// Replay of a casts capture.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CastReplayReport {
    pub conversions: Vec<ConversionReplay>,
}

impl CastReplayReport {
    pub fn mismatches(&self) -> u64 {
        self.conversions.iter().map(|c| c.mismatches()).sum()
    }
    pub fn unexplained(&self) -> Vec<&ConversionReplay> {
        self.conversions.iter().filter(|c| c.unexplained()).collect()
    }
}

/// Recomputes the CPU codes of the selected chunks (those of them the
/// capture swept) under the current conversion table and compares their
/// digests with the stored GPU digests; checks every stored mismatch record
/// against the current CPU code. Integrity failures (a file that does not
/// match its manifest digest, a malformed sweep) are errors; disagreements
/// are counted in the report.
pub fn replay(capture: &Capture, chunks: ChunkSelection) -> Result<CastReplayReport> {
    let sweep = read_sweep(capture)?;
    let mut out = CastReplayReport::default();
    // (sweep index = report index, conversion, picked positions in its chunk list)
    let mut plans: Vec<(usize, &'static Conversion, Vec<usize>)> = Vec::new();
    for (ri, r) in sweep.conversions.iter().enumerate() {
        let mut rep = ConversionReplay {
            name: r.name.clone(),
            captured_mismatches: r.mismatches,
            ..Default::default()
        };
        let conv = match conversion(&r.name) {
            Some(c) => c,
            None => {
                rep.skipped = Some("not in this mxbi's conversion table".into());
                out.conversions.push(rep);
                continue;
            }
        };
        rep.known_gap = conv.known_gap.map(str::to_string);
        if r.status != Status::Ran {
            rep.skipped = Some(format!("status {:?} on the GPU machine", r.status));
            out.conversions.push(rep);
            continue;
        }
        if r.code_bytes != conv.code_bytes() || r.format != conv.format {
            return Err(DeviceError::Capture(format!(
                "{SWEEP_FILE}: {}: format {} with {}-byte codes, the table says {} with {}",
                r.name,
                r.format,
                r.code_bytes,
                conv.format,
                conv.code_bytes()
            )));
        }
        let wanted = chunks.chunks(conv)?;
        let picked: Vec<usize> = (0..r.chunks.len())
            .filter(|&i| wanted.binary_search(&r.chunks[i]).is_ok())
            .collect();
        plans.push((ri, conv, picked));
        out.conversions.push(rep);
    }
    // Conversions with the same format and CPU policy (a header intrinsic
    // and its inline-PTX twin) share their CPU digests: compute each once.
    type Key = (Format, CastPolicy, u32);
    let mut jobs: Vec<(Key, &'static Conversion)> = Vec::new();
    for (ri, conv, picked) in &plans {
        for &i in picked {
            let key = (conv.format, conv.policy(), sweep.conversions[*ri].chunks[i]);
            if !jobs.iter().any(|(k, _)| *k == key) {
                jobs.push((key, conv));
            }
        }
    }
    let digests: Vec<Result<String>> = jobs.par_iter().map(|(k, c)| cpu_chunk_digest(c, k.2)).collect();
    let mut cpu: std::collections::HashMap<Key, String> = std::collections::HashMap::new();
    for ((k, _), d) in jobs.into_iter().zip(digests) {
        cpu.insert(k, d?);
    }
    for (ri, conv, picked) in plans {
        let r = &sweep.conversions[ri];
        let rep = &mut out.conversions[ri];
        for i in picked {
            let chunk = r.chunks[i];
            let d = &cpu[&(conv.format, conv.policy(), chunk)];
            rep.chunks.push(chunk);
            let recorded = r.chunk_mismatches[i];
            if *d != r.gpu_sha256[i] {
                rep.chunks_differing.push(chunk);
                if recorded == 0 {
                    rep.chunks_differing_unrecorded.push(chunk);
                }
            } else if recorded > 0 {
                rep.chunks_now_agreeing.push(chunk);
            }
        }
        for m in &r.records {
            let cpu = cpu_code(conv, m.input_bits)?;
            rep.records_checked += 1;
            if cpu != m.gpu_code {
                rep.record_mismatches += 1;
            }
            if cpu != m.cpu_code {
                rep.records_cpu_changed += 1;
            }
        }
    }
    Ok(out)
}
