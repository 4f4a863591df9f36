//! Which inputs a sweep or replay covers: chunks of 2^24 consecutive f32 bit
//! patterns (all, the boundary subset, ordinary and seeded samples).

use super::*;

/// Which chunks a sweep or a replay covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkSelection {
    /// All 256 chunks (every f32).
    All,
    /// Per conversion, the chunks holding the edge cases of its format
    /// ([`boundary_chunks`]).
    Boundary,
    /// These chunk indices (0..=255) for every conversion.
    List(Vec<u32>),
    /// Per conversion, [`sampled_chunks`]: the boundary chunks, the
    /// [`ORDINARY_CHUNKS`], and chunks drawn from `seed` up to
    /// [`SAMPLE_FLOOR`] (what CI replays; the seed changes with each commit).
    Sampled { seed: u64 },
}

impl ChunkSelection {
    /// The sorted, de-duplicated chunk indices for `conv`.
    pub fn chunks(&self, conv: &Conversion) -> Result<Vec<u32>> {
        let mut v = match self {
            ChunkSelection::All => (0..CHUNK_COUNT).collect(),
            ChunkSelection::Boundary => boundary_chunks(conv.format),
            ChunkSelection::Sampled { seed } => sampled_chunks(conv.format, *seed),
            ChunkSelection::List(l) => {
                if let Some(bad) = l.iter().find(|&&c| c >= CHUNK_COUNT) {
                    return Err(DeviceError::Refused(format!(
                        "chunk {bad} out of range 0..{CHUNK_COUNT}"
                    )));
                }
                l.clone()
            }
        };
        v.sort_unstable();
        v.dedup();
        Ok(v)
    }

    pub fn name(&self) -> String {
        match self {
            ChunkSelection::All => "all".into(),
            ChunkSelection::Boundary => "boundary".into(),
            ChunkSelection::List(l) => format!("list:{l:?}"),
            ChunkSelection::Sampled { seed } => format!("sampled:{seed:#018x}"),
        }
    }
}

/// Chunks of ordinary values that every sampled replay covers: chunk 0x3F
/// holds [0.5, 2) and 0xBF holds (-2, -0.5] (so 1.0 and -1.0, bit patterns
/// 0x3F800000 and 0xBF800000), where every format rounds mid-range values
/// of both signs.
pub const ORDINARY_CHUNKS: [u32; 2] = [0x3F, 0xBF];

/// Chunks per conversion of a [`ChunkSelection::Sampled`] replay, at least.
pub const SAMPLE_FLOOR: usize = 16;

/// Chunks drawn from the seed per conversion, at least, even when the
/// boundary and ordinary chunks already reach [`SAMPLE_FLOOR`].
pub const SAMPLE_MIN_DRAWN: usize = 4;

/// The chunks of a sampled replay of a conversion to `format`, ascending:
/// [`boundary_chunks`] and [`ORDINARY_CHUNKS`], then distinct chunks drawn
/// uniformly from the others (SplitMix64 of `seed` and the format's name, so
/// conversions to one format share chunks and their CPU digests) until the
/// list holds [`SAMPLE_FLOOR`] chunks and at least [`SAMPLE_MIN_DRAWN`]
/// drawn ones. Deterministic in (`format`, `seed`).
pub fn sampled_chunks(format: Format, seed: u64) -> Vec<u32> {
    let mut v = boundary_chunks(format);
    v.extend(ORDINARY_CHUNKS);
    v.sort_unstable();
    v.dedup();
    let fixed = v.len();
    let want = SAMPLE_FLOOR.max(fixed + SAMPLE_MIN_DRAWN).min(CHUNK_COUNT as usize);
    let name_key = crate::device::capture::digest64(format.to_string().as_bytes());
    let mut r = crate::rng::SplitMix64::new(seed ^ name_key);
    while v.len() < want {
        let c = r.below(CHUNK_COUNT as u64) as u32;
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v.sort_unstable();
    v
}

/// The chunks (by top byte of the f32 bits) that hold, for both signs: zero
/// and the f32 subnormals, the format's smallest positive value and half of
/// it (the underflow tie), its largest finite value and the f32 just above
/// it (the overflow edge), and +-Inf with every NaN.
pub fn boundary_chunks(format: Format) -> Vec<u32> {
    let mut vals: Vec<u32> = vec![0, 0x7F80_0000];
    let max = format.max_value() as f32;
    vals.push(max.to_bits());
    vals.push(max.to_bits().saturating_add(1).min(0x7F80_0000));
    let min_pos = (0..format.code_count())
        .map(|c| format.decode_f64(c as u16))
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    if min_pos.is_finite() {
        vals.push((min_pos as f32).to_bits());
        vals.push(((min_pos / 2.0) as f32).to_bits());
    }
    let mut chunks: Vec<u32> = vals
        .iter()
        .flat_map(|&b| [b >> CHUNK_BITS, (b | 0x8000_0000) >> CHUNK_BITS])
        .collect();
    chunks.sort_unstable();
    chunks.dedup();
    chunks
}
