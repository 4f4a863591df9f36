//! The CPU side of the comparison: codes of a chunk under a conversion's
//! policy (array path, scalar path) and their chunk digests.

use super::*;

/// A code type of the sweep: `u8` (formats of at most 8 bits) or `u16`
/// (bf16, f16).
pub trait Code: Copy + Eq + Default + Send + Sync + Into<u16> + 'static {
    /// The CPU codes of the inputs with bits `base, base + 1, ...` (one per
    /// element of `out`) under `conv.policy()`, through the library's array
    /// path [`cast_f32_slice`]. Deterministic for any thread count.
    fn cpu_codes(conv: &Conversion, base: u32, out: &mut [Self]) -> Result<()> {
        check_width::<Self>(conv)?;
        let p = conv.policy();
        out.par_chunks_mut(PIECE).enumerate().try_for_each(|(i, o)| {
            let start = base.wrapping_add((i * PIECE) as u32);
            cast_f32_slice(
                &inputs(start, o.len()),
                Self::codes_mut(o),
                conv.format,
                &p,
                start as u64,
            )
            .map_err(cpu_err(conv))
        })
    }
    /// The library's output view of a code slice.
    fn codes_mut(out: &mut [Self]) -> CodesMut<'_>;
    /// SHA-256 (hex) of the codes in order, each as `size_of::<Self>()`
    /// little-endian bytes.
    fn digest(codes: &[Self]) -> String;
}

const PIECE: usize = 1 << 16;

fn cpu_err(conv: &Conversion) -> impl Fn(crate::format::CastError) -> DeviceError + '_ {
    move |e| DeviceError::Refused(format!("CPU model for {}: {e}", conv.name))
}

fn check_width<T>(conv: &Conversion) -> Result<()> {
    if std::mem::size_of::<T>() as u32 != conv.code_bytes() {
        return Err(DeviceError::Refused(format!(
            "{}: codes are {} byte(s), not {}",
            conv.name,
            conv.code_bytes(),
            std::mem::size_of::<T>()
        )));
    }
    Ok(())
}

fn inputs(start: u32, len: usize) -> Vec<f32> {
    (0..len as u32).map(|k| f32::from_bits(start.wrapping_add(k))).collect()
}

impl Code for u8 {
    fn codes_mut(out: &mut [u8]) -> CodesMut<'_> {
        CodesMut::U8(out)
    }
    fn digest(codes: &[u8]) -> String {
        sha256_hex(codes)
    }
}

impl Code for u16 {
    fn codes_mut(out: &mut [u16]) -> CodesMut<'_> {
        CodesMut::U16(out)
    }
    fn digest(codes: &[u16]) -> String {
        let mut h = Sha256::new();
        let mut buf = Vec::with_capacity(2 * 4096);
        for block in codes.chunks(4096) {
            buf.clear();
            for c in block {
                buf.extend_from_slice(&c.to_le_bytes());
            }
            h.update(&buf);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// SHA-256 (hex) of byte codes in input order.
pub fn chunk_digest_u8(codes: &[u8]) -> String {
    <u8 as Code>::digest(codes)
}

/// SHA-256 (hex) of 16-bit codes in input order, each little-endian.
pub fn chunk_digest_u16(codes: &[u16]) -> String {
    <u16 as Code>::digest(codes)
}

/// The CPU code of one input under `conv.policy()` (exact scalar path).
pub fn cpu_code(conv: &Conversion, bits: u32) -> Result<u16> {
    encode_f32(f32::from_bits(bits), conv.format, &conv.policy(), bits as u64).map_err(cpu_err(conv))
}

/// The CPU digest of chunk `chunk` of `conv` (the array path, as the sweep
/// computes it).
pub fn cpu_chunk_digest(conv: &Conversion, chunk: u32) -> Result<String> {
    if chunk >= CHUNK_COUNT {
        return Err(DeviceError::Refused(format!("chunk {chunk} out of range")));
    }
    let base = chunk << CHUNK_BITS;
    if conv.code_bytes() == 2 {
        let mut v = vec![0u16; CHUNK_LEN];
        u16::cpu_codes(conv, base, &mut v)?;
        Ok(u16::digest(&v))
    } else {
        let mut v = vec![0u8; CHUNK_LEN];
        u8::cpu_codes(conv, base, &mut v)?;
        Ok(u8::digest(&v))
    }
}
