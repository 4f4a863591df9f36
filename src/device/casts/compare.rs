//! GPU codes against CPU codes, chunk by chunk: mismatch counts and the
//! record sample a capture keeps.

use super::*;

/// Compares the GPU and CPU codes of one chunk starting at input `base`:
/// (mismatch count, first records up to [`FIRST_RECORDS`]).
pub fn compare_chunk<T: Code>(base: u32, gpu: &[T], cpu: &[T]) -> (u64, Vec<MismatchRecord>) {
    let mut n = 0u64;
    let mut recs = Vec::new();
    for (k, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        if g != c {
            n += 1;
            if recs.len() < FIRST_RECORDS {
                recs.push(MismatchRecord {
                    input_bits: base.wrapping_add(k as u32),
                    gpu_code: (*g).into(),
                    cpu_code: (*c).into(),
                });
            }
        }
    }
    (n, recs)
}

/// Adds the per-chunk outcomes (in ascending chunk order) to `r`, keeping
/// the record sample as [`ConversionResult::records`] describes.
pub fn absorb_chunks(r: &mut ConversionResult, chunks: Vec<(u32, String, u64, Vec<MismatchRecord>)>) {
    for (chunk, digest, n, recs) in chunks {
        r.chunks.push(chunk);
        r.gpu_sha256.push(digest);
        r.chunk_mismatches.push(n);
        r.inputs += CHUNK_LEN as u64;
        r.mismatches += n;
        let room = FIRST_RECORDS.saturating_sub(r.records.len());
        let take = if room > 0 {
            room.min(recs.len())
        } else {
            recs.len().min(1)
        };
        r.records.extend_from_slice(&recs[..take]);
    }
    r.records.sort_by_key(|m| m.input_bits);
    r.records.dedup();
}
