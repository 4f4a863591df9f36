//! Exhaustive f32 conversions on the GPU against the CPU `nvidia` cast
//! preset (`mxbi device casts`).
//!
//! # What is compared
//!
//! Each [`Conversion`] names one CUDA conversion of an f32 (a header
//! intrinsic such as `__nv_cvt_float_to_fp8`, or one PTX `cvt` instruction
//! written inline) together with the CPU policy that is expected to give the
//! same code: [`CastPreset::Nvidia`]'s policy for the target format, with the
//! rounding direction and the overflow rule of that conversion put in
//! ([`Conversion::policy`]). Nothing else is adjusted: what overflow, NaN,
//! zero and negative inputs become is whatever that policy says, so a
//! disagreement shows up as a mismatch, never as a special case in the
//! comparison.
//!
//! The input space is every f32 bit pattern `0..=u32::MAX`, cut into 256
//! chunks of 2^24 consecutive bit patterns (chunk `c` holds the inputs whose
//! top byte is `c`). Codes are integers (`u8` for formats of at most 8 bits,
//! FP6/FP4 in the low bits; `u16` for bf16/f16), so NaN outputs are compared
//! bit for bit like any other code.
//!
//! # Chunk digest
//!
//! The digest of a chunk is the SHA-256 of its 2^24 codes in input order:
//! one byte per code for formats of at most 8 bits, two little-endian bytes
//! per code for bf16/f16 ([`chunk_digest_u8`], [`chunk_digest_u16`]). A
//! capture stores the GPU's digest of every swept chunk, the mismatch count
//! of every chunk, and a sample of mismatching inputs; [`replay`] recomputes
//! the CPU digests of selected chunks and compares them with the stored GPU
//! digests, so a machine without a GPU checks the current CPU model against
//! the hardware bytes.

use super::capture::{sha256_hex, Capture};
use super::{DeviceError, Result};
use crate::format::{cast_f32_slice, encode_f32, CastPolicy, CastPreset, CodesMut, Format, Overflow, Rounding};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// log2 of the number of inputs in one chunk.
pub const CHUNK_BITS: u32 = 24;
/// Inputs per chunk (2^24).
pub const CHUNK_LEN: usize = 1 << CHUNK_BITS;
/// Number of chunks covering all 2^32 f32 bit patterns.
pub const CHUNK_COUNT: u32 = 1 << (32 - CHUNK_BITS);
/// Mismatch records kept per conversion in input order (one more is kept
/// for each mismatching chunk beyond these, so the sample spans the range).
pub const FIRST_RECORDS: usize = 64;
/// Name of the sweep file in a capture folder.
pub const SWEEP_FILE: &str = "sweep.json";
/// Kernel entry point of every conversion module.
pub const KERNEL_NAME: &str = "mxbi_cast";

/// How the conversion is carried out on sm_90.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CvtPath {
    /// One PTX `cvt` instruction written inline in the kernel (`asm volatile`),
    /// independent of the CUDA headers.
    InlinePtx,
    /// A CUDA header intrinsic that lowers to one hardware `cvt` on sm_90.
    HeaderHardware,
    /// A CUDA header intrinsic that is integer/f64 emulation on sm_90 (the
    /// hardware instruction needs sm_100 or later).
    HeaderSoftware,
}

impl CvtPath {
    pub const fn name(self) -> &'static str {
        match self {
            CvtPath::InlinePtx => "inline-ptx",
            CvtPath::HeaderHardware => "header-hw",
            CvtPath::HeaderSoftware => "header-sw",
        }
    }
}

/// One GPU conversion and the CPU policy it is checked against.
#[derive(Clone, Copy, Debug)]
pub struct Conversion {
    /// Stable name (`e4m3.satfinite`, `bf16.rz`, ...).
    pub name: &'static str,
    /// Target format of the code.
    pub format: Format,
    /// Rounding direction of the conversion.
    pub rounding: Rounding,
    /// Overflow rule of the conversion (satfinite or not).
    pub overflow: Overflow,
    /// Headers the kernel includes.
    pub headers: &'static [&'static str],
    /// CUDA statements that set `unsigned int code` from `float x`.
    pub body: &'static str,
    pub path: CvtPath,
    /// The instruction or header branch that does the work on sm_90.
    pub mechanism: &'static str,
    /// A divergence from the CPU policy predicted by reading the CUDA
    /// headers, when there is one; mismatches of such a conversion are
    /// explained, all others are not.
    pub known_gap: Option<&'static str>,
    /// The number of mismatches over all 2^32 inputs that `known_gap`
    /// predicts.
    pub predicted_mismatches: Option<u64>,
}

impl Conversion {
    /// The CPU policy: the `nvidia` preset for the format with this
    /// conversion's rounding and overflow rule. Nothing else is changed.
    pub fn policy(&self) -> CastPolicy {
        let mut p = CastPreset::Nvidia.policy(self.format);
        p.rounding = self.rounding;
        p.overflow = self.overflow;
        p
    }

    /// Bytes per code on the device and in digests (1 or 2).
    pub fn code_bytes(&self) -> u32 {
        if self.format.bits() > 8 {
            2
        } else {
            1
        }
    }

    /// The CUDA C++ source of this conversion's kernel: thread `t` writes
    /// the code of the f32 whose bits are `base + t`, for `t < n`.
    pub fn kernel_source(&self) -> String {
        let code_t = if self.code_bytes() == 2 {
            "unsigned short"
        } else {
            "unsigned char"
        };
        let includes: String = self.headers.iter().map(|h| format!("#include <{h}>\n")).collect();
        format!(
            "// mxbi device casts: {name}\n{includes}\
extern \"C\" __global__ void {KERNEL_NAME}(unsigned int base, unsigned int n, {code_t}* out) {{\n\
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;\n\
    if (t >= n) return;\n\
    unsigned int bits = base + t;\n\
    float x;\n\
    asm(\"mov.b32 %0, %1;\" : \"=f\"(x) : \"r\"(bits));\n\
    unsigned int code = 0u;\n\
    {{\n{body}\n    }}\n\
    out[t] = ({code_t})code;\n\
}}\n",
            name = self.name,
            body = self.body,
        )
    }
}

const FP8: &[&str] = &["cuda_fp8.h"];
const FP6: &[&str] = &["cuda_fp6.h"];
const FP4: &[&str] = &["cuda_fp4.h"];
const BF16: &[&str] = &["cuda_bf16.h"];
const F16: &[&str] = &["cuda_fp16.h"];
const NONE: &[&str] = &[];

// The first sweep on an H200 (CUDA 13.0) found two behaviours the preset
// did not have: the non-saturating E4M3 conversion gives an overflow NaN
// with the input's sign (0xFF for negatives) while a NaN input gives 0x7F,
// and the E8M0 conversion converts |x| (the sign is dropped). The `nvidia`
// preset now has both (`signed_overflow_nan`, `E8m0Negative::Abs`); a
// conversion may still carry a predicted gap (`known_gap`) when one is found.

macro_rules! conv {
    ($name:expr, $fmt:ident, $round:ident, $ovf:ident, $headers:expr, $path:ident, $mech:expr, $gap:expr, $body:expr) => {
        conv!($name, $fmt, $round, $ovf, $headers, $path, $mech, $gap, None, $body)
    };
    ($name:expr, $fmt:ident, $round:ident, $ovf:ident, $headers:expr, $path:ident, $mech:expr, $gap:expr, $pred:expr, $body:expr) => {
        Conversion {
            name: $name,
            format: Format::$fmt,
            rounding: Rounding::$round,
            overflow: Overflow::$ovf,
            headers: $headers,
            body: $body,
            path: CvtPath::$path,
            mechanism: $mech,
            known_gap: $gap,
            predicted_mismatches: $pred,
        }
    };
}

/// Every conversion of the sweep, in sweep order.
pub const CONVERSIONS: &[Conversion] = &[
    conv!(
        "e4m3.satfinite",
        E4M3,
        NearestEven,
        Saturate,
        FP8,
        HeaderHardware,
        "__nv_cvt_float_to_fp8 -> cvt.rn.satfinite.e4m3x2.f32",
        None,
        "        code = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);"
    ),
    conv!(
        "e4m3.satfinite.ptx",
        E4M3,
        NearestEven,
        Saturate,
        NONE,
        InlinePtx,
        "cvt.rn.satfinite.e4m3x2.f32 (inline)",
        None,
        "        unsigned short r;\n        asm volatile(\"{ cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2; }\" : \"=h\"(r) : \"f\"(0.0f), \"f\"(x));\n        code = r & 0xFFu;"
    ),
    conv!(
        "e4m3.nosat",
        E4M3,
        NearestEven,
        NonFinite,
        FP8,
        HeaderSoftware,
        "__nv_cvt_float_to_fp8(__NV_NOSAT): f64 software rounding in cuda_fp8.hpp",
        None,
        None,
        "        code = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);"
    ),
    conv!(
        "e5m2.satfinite",
        E5M2,
        NearestEven,
        Saturate,
        FP8,
        HeaderHardware,
        "__nv_cvt_float_to_fp8 -> cvt.rn.satfinite.e5m2x2.f32",
        None,
        "        code = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);"
    ),
    conv!(
        "e5m2.satfinite.ptx",
        E5M2,
        NearestEven,
        Saturate,
        NONE,
        InlinePtx,
        "cvt.rn.satfinite.e5m2x2.f32 (inline)",
        None,
        "        unsigned short r;\n        asm volatile(\"{ cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2; }\" : \"=h\"(r) : \"f\"(0.0f), \"f\"(x));\n        code = r & 0xFFu;"
    ),
    conv!(
        "e5m2.nosat",
        E5M2,
        NearestEven,
        NonFinite,
        FP8,
        HeaderSoftware,
        "__nv_cvt_float_to_fp8(__NV_NOSAT): f64 software rounding in cuda_fp8.hpp",
        None,
        "        code = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);"
    ),
    conv!(
        "e8m0.rp.satfinite",
        E8M0,
        Up,
        Saturate,
        FP8,
        HeaderSoftware,
        "__nv_cvt_float_to_e8m0(cudaRoundPosInf): cvt.rp.bf16.f32 of |x|, then the bf16 exponent field (cuda_fp8.hpp)",
        None,
        None,
        "        code = __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);"
    ),
    conv!(
        "e8m0.rp.nosat",
        E8M0,
        Up,
        NonFinite,
        FP8,
        HeaderSoftware,
        "__nv_cvt_float_to_e8m0(cudaRoundPosInf): cvt.rp.bf16.f32 of |x|, then the bf16 exponent field (cuda_fp8.hpp)",
        None,
        None,
        "        code = __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf);"
    ),
    conv!(
        "e8m0.rz.satfinite",
        E8M0,
        TowardZero,
        Saturate,
        FP8,
        HeaderSoftware,
        "__nv_cvt_float_to_e8m0(cudaRoundZero): cvt.rz.bf16.f32, then the bf16 exponent field (cuda_fp8.hpp)",
        None,
        None,
        "        code = __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero);"
    ),
    conv!(
        "e8m0.rz.nosat",
        E8M0,
        TowardZero,
        NonFinite,
        FP8,
        HeaderSoftware,
        "__nv_cvt_float_to_e8m0(cudaRoundZero): cvt.rz.bf16.f32, then the bf16 exponent field (cuda_fp8.hpp)",
        None,
        None,
        "        code = __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero);"
    ),
    conv!(
        "e2m3.rn.satfinite",
        E2M3,
        NearestEven,
        Saturate,
        FP6,
        HeaderSoftware,
        "__nv_cvt_float_to_fp6(cudaRoundNearest): f64 software rounding in cuda_fp6.hpp",
        None,
        "        code = __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest);"
    ),
    conv!(
        "e2m3.rz.satfinite",
        E2M3,
        TowardZero,
        Saturate,
        FP6,
        HeaderSoftware,
        "__nv_cvt_float_to_fp6(cudaRoundZero): f64 software rounding in cuda_fp6.hpp",
        None,
        "        code = __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundZero);"
    ),
    conv!(
        "e3m2.rn.satfinite",
        E3M2,
        NearestEven,
        Saturate,
        FP6,
        HeaderSoftware,
        "__nv_cvt_float_to_fp6(cudaRoundNearest): f64 software rounding in cuda_fp6.hpp",
        None,
        "        code = __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest);"
    ),
    conv!(
        "e3m2.rz.satfinite",
        E3M2,
        TowardZero,
        Saturate,
        FP6,
        HeaderSoftware,
        "__nv_cvt_float_to_fp6(cudaRoundZero): f64 software rounding in cuda_fp6.hpp",
        None,
        "        code = __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundZero);"
    ),
    conv!(
        "e2m1.rn.satfinite",
        E2M1,
        NearestEven,
        Saturate,
        FP4,
        HeaderSoftware,
        "__nv_cvt_float_to_fp4(cudaRoundNearest): f64 software rounding in cuda_fp4.hpp",
        None,
        "        code = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);"
    ),
    conv!(
        "e2m1.rz.satfinite",
        E2M1,
        TowardZero,
        Saturate,
        FP4,
        HeaderSoftware,
        "__nv_cvt_float_to_fp4(cudaRoundZero): f64 software rounding in cuda_fp4.hpp",
        None,
        "        code = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundZero);"
    ),
    conv!(
        "bf16.rn",
        BF16,
        NearestEven,
        NonFinite,
        BF16,
        HeaderHardware,
        "__float2bfloat16_rn -> cvt.rn.bf16.f32",
        None,
        "        code = __bfloat16_as_ushort(__float2bfloat16_rn(x));"
    ),
    conv!(
        "bf16.rn.ptx",
        BF16,
        NearestEven,
        NonFinite,
        NONE,
        InlinePtx,
        "cvt.rn.bf16.f32 (inline)",
        None,
        "        unsigned short r;\n        asm volatile(\"{ cvt.rn.bf16.f32 %0, %1; }\" : \"=h\"(r) : \"f\"(x));\n        code = r;"
    ),
    conv!(
        "bf16.rz",
        BF16,
        TowardZero,
        NonFinite,
        BF16,
        HeaderHardware,
        "__float2bfloat16_rz -> cvt.rz.bf16.f32",
        None,
        "        code = __bfloat16_as_ushort(__float2bfloat16_rz(x));"
    ),
    conv!(
        "bf16.rd",
        BF16,
        Down,
        NonFinite,
        BF16,
        HeaderHardware,
        "__float2bfloat16_rd -> cvt.rm.bf16.f32",
        None,
        "        code = __bfloat16_as_ushort(__float2bfloat16_rd(x));"
    ),
    conv!(
        "bf16.ru",
        BF16,
        Up,
        NonFinite,
        BF16,
        HeaderHardware,
        "__float2bfloat16_ru -> cvt.rp.bf16.f32",
        None,
        "        code = __bfloat16_as_ushort(__float2bfloat16_ru(x));"
    ),
    conv!(
        "f16.rn",
        F16,
        NearestEven,
        NonFinite,
        F16,
        HeaderHardware,
        "__float2half_rn -> cvt.rn.f16.f32",
        None,
        "        code = __half_as_ushort(__float2half_rn(x));"
    ),
    conv!(
        "f16.rn.ptx",
        F16,
        NearestEven,
        NonFinite,
        NONE,
        InlinePtx,
        "cvt.rn.f16.f32 (inline)",
        None,
        "        unsigned short r;\n        asm volatile(\"{ cvt.rn.f16.f32 %0, %1; }\" : \"=h\"(r) : \"f\"(x));\n        code = r;"
    ),
    conv!(
        "f16.rz",
        F16,
        TowardZero,
        NonFinite,
        F16,
        HeaderHardware,
        "__float2half_rz -> cvt.rz.f16.f32",
        None,
        "        code = __half_as_ushort(__float2half_rz(x));"
    ),
    conv!(
        "f16.rd",
        F16,
        Down,
        NonFinite,
        F16,
        HeaderHardware,
        "__float2half_rd -> cvt.rm.f16.f32",
        None,
        "        code = __half_as_ushort(__float2half_rd(x));"
    ),
    conv!(
        "f16.ru",
        F16,
        Up,
        NonFinite,
        F16,
        HeaderHardware,
        "__float2half_ru -> cvt.rp.f16.f32",
        None,
        "        code = __half_as_ushort(__float2half_ru(x));"
    ),
];

/// The conversion called `name`.
pub fn conversion(name: &str) -> Option<&'static Conversion> {
    CONVERSIONS.iter().find(|c| c.name == name)
}

/// The conversions named in `only` (all of them when it is empty), in sweep
/// order; an unknown name is an error that lists the known ones.
pub fn select(only: &[String]) -> Result<Vec<&'static Conversion>> {
    for n in only {
        if conversion(n).is_none() {
            let known: Vec<&str> = CONVERSIONS.iter().map(|c| c.name).collect();
            return Err(DeviceError::Refused(format!(
                "unknown conversion `{n}`; known: {}",
                known.join(", ")
            )));
        }
    }
    Ok(CONVERSIONS
        .iter()
        .filter(|c| only.is_empty() || only.iter().any(|n| n == c.name))
        .collect())
}

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
    let name_key = super::capture::digest64(format.to_string().as_bytes());
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

/// Writes a casts capture folder: [`SWEEP_FILE`] (compact JSON, one line)
/// and the manifest with `device` (the GPU's `DeviceInfo` as JSON) and
/// `notes`.
pub fn write_capture(
    dir: &std::path::Path,
    report: &CastSweepReport,
    device: serde_json::Value,
    notes: Vec<String>,
) -> Result<super::capture::Manifest> {
    let mut text = serde_json::to_vec(report).map_err(|e| DeviceError::Capture(e.to_string()))?;
    text.push(b'\n');
    let mut w = super::capture::CaptureWriter::create(dir)?;
    w.put(SWEEP_FILE, &text)?;
    w.finish("casts", device, notes)
}

/// Reads and checks the sweep of a casts capture.
pub fn read_sweep(capture: &Capture) -> Result<CastSweepReport> {
    if capture.manifest.suite != "casts" {
        return Err(DeviceError::Capture(format!(
            "{} is a `{}` capture, not `casts`",
            capture.dir.display(),
            capture.manifest.suite
        )));
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

/// Options of a GPU sweep.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// `All`, or `Boundary` for a quick smoke run.
    pub selection: ChunkSelection,
    /// Conversion names to run (all when empty).
    pub only: Vec<String>,
}

#[cfg(feature = "cuda")]
pub use gpu_sweep::run;

#[cfg(feature = "cuda")]
mod gpu_sweep {
    use super::*;
    use crate::device::gpu::{driver_err, Arch, Gpu};
    use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};
    use std::time::Instant;

    /// Chunks per kernel launch (2^28 inputs).
    const CHUNKS_PER_LAUNCH: usize = 16;
    const BLOCK: u32 = 256;

    /// Runs the selected conversions on `gpu` over the selected chunks,
    /// computing the CPU codes of the same inputs in parallel with the GPU
    /// and comparing them code by code. `on_result` sees each conversion's
    /// result as it finishes. A conversion whose kernel does not compile or
    /// load is reported as [`Status::CompileFailed`] with the log; one that
    /// hits a driver or CPU-model error is [`Status::Failed`]; the sweep goes
    /// on with the next conversion either way.
    pub fn run(
        gpu: &Gpu,
        opts: &SweepOptions,
        mut on_result: impl FnMut(&ConversionResult),
    ) -> Result<CastSweepReport> {
        let convs = select(&opts.only)?;
        let mut report = CastSweepReport {
            schema: 1,
            chunk_bits: CHUNK_BITS,
            selection: opts.selection.name(),
            conversions: Vec::new(),
        };
        for conv in convs {
            let t0 = Instant::now();
            let mut r = ConversionResult::new(conv);
            sweep_one(gpu, conv, &opts.selection, &mut r);
            r.seconds = t0.elapsed().as_secs_f64();
            on_result(&r);
            report.conversions.push(r);
        }
        Ok(report)
    }

    fn sweep_one(gpu: &Gpu, conv: &Conversion, sel: &ChunkSelection, r: &mut ConversionResult) {
        let src = conv.kernel_source();
        let kname = format!("mxbi_cast_{}", conv.name.replace('.', "_"));
        let func = match gpu
            .compile(&kname, &src, Arch::Sm90)
            .and_then(|m| gpu.function(&m, KERNEL_NAME))
        {
            Ok(f) => f,
            Err(e) => {
                r.status = Status::CompileFailed;
                r.error = Some(e.to_string());
                return;
            }
        };
        r.ptx_cvt = ptx_cvt_opcodes(&kname, &src);
        let res = match sel.chunks(conv) {
            Ok(chunks) => {
                if conv.code_bytes() == 2 {
                    sweep_typed::<u16>(gpu, conv, &func, &chunks, r)
                } else {
                    sweep_typed::<u8>(gpu, conv, &func, &chunks, r)
                }
            }
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            r.status = Status::Failed;
            r.error = Some(e.to_string());
        }
    }

    /// Consecutive runs of chunk indices, at most [`CHUNKS_PER_LAUNCH`] long.
    fn runs(chunks: &[u32]) -> Vec<Vec<u32>> {
        let mut out: Vec<Vec<u32>> = Vec::new();
        for &c in chunks {
            match out.last_mut() {
                Some(run) if run.len() < CHUNKS_PER_LAUNCH && run.last().is_some_and(|&l| l + 1 == c) => run.push(c),
                _ => out.push(vec![c]),
            }
        }
        out
    }

    fn sweep_typed<T: Code + DeviceRepr + ValidAsZeroBits>(
        gpu: &Gpu,
        conv: &Conversion,
        func: &cudarc::driver::CudaFunction,
        chunks: &[u32],
        r: &mut ConversionResult,
    ) -> Result<()> {
        let cap = CHUNKS_PER_LAUNCH * CHUNK_LEN;
        let mut d_out = gpu
            .stream
            .alloc_zeros::<T>(cap)
            .map_err(driver_err("device buffer for codes"))?;
        let mut host = vec![T::default(); cap];
        let mut cpu = vec![T::default(); cap];
        for run in runs(chunks) {
            let base: u32 = run[0] << CHUNK_BITS;
            let len = run.len() * CHUNK_LEN;
            let n = len as u32;
            let cfg = LaunchConfig {
                grid_dim: (n / BLOCK, 1, 1),
                block_dim: (BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut lb = gpu.stream.launch_builder(func);
            lb.arg(&base).arg(&n).arg(&mut d_out);
            // SAFETY: the kernel takes (unsigned int, unsigned int, T*) and
            // writes out[t] for t < n <= the buffer's length.
            unsafe { lb.launch(cfg) }.map_err(driver_err("kernel launch"))?;
            // The CPU codes are computed while the GPU runs.
            let cpu_res = T::cpu_codes(conv, base, &mut cpu[..len]);
            gpu.stream
                .memcpy_dtoh(&d_out.slice(0..len), &mut host[..len])
                .map_err(driver_err("copy codes to host"))?;
            gpu.sync()?;
            cpu_res?;
            let per_chunk: Vec<(u32, String, u64, Vec<MismatchRecord>)> = run
                .par_iter()
                .enumerate()
                .map(|(k, &chunk)| {
                    let g = &host[k * CHUNK_LEN..(k + 1) * CHUNK_LEN];
                    let c = &cpu[k * CHUNK_LEN..(k + 1) * CHUNK_LEN];
                    let (n, recs) = compare_chunk(chunk << CHUNK_BITS, g, c);
                    (chunk, T::digest(g), n, recs)
                })
                .collect();
            absorb_chunks(r, per_chunk);
        }
        Ok(())
    }

    /// The distinct `cvt` opcodes of the PTX NVRTC makes of `src` (compiled
    /// a second time, with the same flags, only to list them); empty if that
    /// compile fails.
    fn ptx_cvt_opcodes(name: &str, src: &str) -> Vec<String> {
        match crate::device::gpu::compile_ptx(name, src, crate::device::gpu::Arch::Sm90) {
            Ok(ptx) => cvt_opcodes(&ptx.to_src()),
            Err(_) => Vec::new(),
        }
    }
}

/// The distinct `cvt...` opcodes in PTX text, sorted.
pub fn cvt_opcodes(ptx: &str) -> Vec<String> {
    let mut v: Vec<String> = ptx
        .lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches('{').trim_start();
            let op = l.split_whitespace().next()?;
            op.starts_with("cvt.").then(|| op.to_string())
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(name: &str, bits: u32) -> u16 {
        cpu_code(conversion(name).unwrap(), bits).unwrap()
    }

    #[test]
    fn names_are_unique_and_selectable() {
        let mut names: Vec<&str> = CONVERSIONS.iter().map(|c| c.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), CONVERSIONS.len());
        assert_eq!(select(&[]).unwrap().len(), CONVERSIONS.len());
        let two = select(&["bf16.rz".into(), "e4m3.nosat".into()]).unwrap();
        assert_eq!(
            two.iter().map(|c| c.name).collect::<Vec<_>>(),
            ["e4m3.nosat", "bf16.rz"]
        );
        assert!(select(&["e4m3".into()]).is_err());
        for c in CONVERSIONS {
            c.policy().validate(c.format).unwrap();
        }
    }

    #[test]
    fn kernel_source_shape() {
        let c = conversion("e4m3.satfinite.ptx").unwrap();
        let s = c.kernel_source();
        assert!(
            s.contains("extern \"C\" __global__ void mxbi_cast(unsigned int base, unsigned int n, unsigned char* out)")
        );
        assert!(s.contains("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;"));
        assert!(!s.contains("#include"));
        let b = conversion("bf16.rn").unwrap().kernel_source();
        assert!(b.contains("#include <cuda_bf16.h>"));
        assert!(b.contains("unsigned short* out"));
    }

    #[test]
    fn cvt_opcode_listing() {
        let ptx = "\t{ cvt.rn.satfinite.e4m3x2.f32 %rs1, %f2, %f1; }\n\tcvt.rn.bf16.f32 %rs2, %f1;\n\tmov.b32 %f1, %r1;\n\tcvt.rn.bf16.f32 %rs3, %f4;\n";
        assert_eq!(cvt_opcodes(ptx), ["cvt.rn.bf16.f32", "cvt.rn.satfinite.e4m3x2.f32"]);
    }

    #[test]
    fn known_values_under_each_policy() {
        // E4M3
        assert_eq!(code("e4m3.satfinite", 448f32.to_bits()), 0x7E);
        assert_eq!(code("e4m3.satfinite", 480f32.to_bits()), 0x7E);
        assert_eq!(code("e4m3.satfinite", 0xFF80_0000), 0xFE);
        assert_eq!(code("e4m3.satfinite", 0x7FC0_0000), 0x7F);
        assert_eq!(code("e4m3.nosat", 464f32.to_bits()), 0x7E);
        assert_eq!(code("e4m3.nosat", 480f32.to_bits()), 0x7F);
        assert_eq!(code("e4m3.nosat", 0x7F80_0000), 0x7F);
        // E5M2
        assert_eq!(code("e5m2.satfinite", 61440f32.to_bits()), 0x7B);
        assert_eq!(code("e5m2.nosat", 61440f32.to_bits()), 0x7C);
        assert_eq!(code("e5m2.nosat", (-61440f32).to_bits()), 0xFC);
        assert_eq!(code("e5m2.nosat", 0xFFC0_0000), 0x7F);
        // E8M0 round-up / toward zero
        assert_eq!(code("e8m0.rp.satfinite", 1.5f32.to_bits()), 128);
        assert_eq!(code("e8m0.rp.satfinite", 1.0f32.to_bits()), 127);
        assert_eq!(code("e8m0.rz.satfinite", 1.5f32.to_bits()), 127);
        assert_eq!(code("e8m0.rp.satfinite", 0), 0);
        assert_eq!(code("e8m0.rp.satfinite", 0x7F80_0000), 0xFE);
        assert_eq!(code("e8m0.rp.nosat", 0x7F80_0000), 0xFF);
        assert_eq!(code("e8m0.rp.satfinite", 0x7F00_0001), 0xFE);
        assert_eq!(code("e8m0.rp.nosat", 0x7F00_0001), 0xFF);
        assert_eq!(code("e8m0.rz.nosat", 0x7F7F_FFFF), 0xFE);
        assert_eq!(code("e8m0.rp.satfinite", 0x7FC0_0000), 0xFF);
        // FP6 / FP4: saturating, NaN -> +max, ties to even, -0 kept
        assert_eq!(code("e2m3.rn.satfinite", 8.0f32.to_bits()), 0x1F);
        assert_eq!(code("e2m3.rn.satfinite", (-8.0f32).to_bits()), 0x3F);
        assert_eq!(code("e2m3.rn.satfinite", 0xFFC0_0000), 0x1F);
        assert_eq!(code("e3m2.rn.satfinite", 30f32.to_bits()), 0x1F);
        assert_eq!(code("e3m2.rz.satfinite", 27.9f32.to_bits()), 0x1E);
        assert_eq!(code("e2m1.rn.satfinite", 5.0f32.to_bits()), 0x6);
        assert_eq!(code("e2m1.rz.satfinite", 5.9f32.to_bits()), 0x6);
        assert_eq!(code("e2m1.rn.satfinite", (-0.1f32).to_bits()), 0x8);
        assert_eq!(code("e2m1.rn.satfinite", 0x7FC0_0000), 0x7);
        // bf16 / f16
        assert_eq!(code("bf16.rn", 0x3F80_8000), 0x3F80);
        assert_eq!(code("bf16.rn", 0x3F81_8000), 0x3F82);
        assert_eq!(code("bf16.rz", 0x3F81_FFFF), 0x3F81);
        assert_eq!(code("bf16.ru", 0x3F81_0001), 0x3F82);
        assert_eq!(code("bf16.rd", 0xBF81_0001), 0xBF82);
        assert_eq!(code("bf16.rn", 0x7F7F_FFFF), 0x7F80);
        assert_eq!(code("bf16.rz", 0x7F7F_FFFF), 0x7F7F);
        assert_eq!(code("bf16.rn", 0xFFC0_0001), 0x7FFF);
        assert_eq!(code("f16.rn", 65520f32.to_bits()), 0x7C00);
        assert_eq!(code("f16.rz", 65520f32.to_bits()), 0x7BFF);
        assert_eq!(code("f16.rd", 65520f32.to_bits()), 0x7BFF);
        assert_eq!(code("f16.ru", (-65520f32).to_bits()), 0xFBFF);
        assert_eq!(code("f16.rn", 0x7F80_0000), 0x7C00);
        assert_eq!(code("f16.rz", 0x7F80_0000), 0x7C00);
        assert_eq!(code("f16.rn", 0x7FC0_0000), 0x7FFF);
        assert_eq!(code("f16.rn", 2f32.powi(-25).to_bits()), 0x0000);
        assert_eq!(code("f16.ru", 2f32.powi(-25).to_bits()), 0x0001);
    }

    #[test]
    fn array_path_matches_scalar_path_on_edge_chunks_samples() {
        // The digest is taken over the array path; spot-check it against the
        // exact scalar path on a stride through a few chunks.
        for c in CONVERSIONS {
            let base = 0x43E0_0000u32 & !0xFFFF;
            if c.code_bytes() == 2 {
                let mut v = vec![0u16; 1 << 16];
                u16::cpu_codes(c, base, &mut v).unwrap();
                for k in (0..v.len()).step_by(97) {
                    assert_eq!(v[k], cpu_code(c, base + k as u32).unwrap(), "{}", c.name);
                }
            } else {
                let mut v = vec![0u8; 1 << 16];
                u8::cpu_codes(c, base, &mut v).unwrap();
                for k in (0..v.len()).step_by(97) {
                    assert_eq!(v[k] as u16, cpu_code(c, base + k as u32).unwrap(), "{}", c.name);
                }
            }
        }
    }

    #[test]
    fn digests() {
        // SHA-256 of the empty string and of one zero byte.
        assert_eq!(
            chunk_digest_u8(&[]),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            chunk_digest_u8(&[0]),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
        // u16 codes digest as little-endian byte pairs.
        let v: Vec<u16> = (0..10_000u32).map(|i| (i * 7919) as u16).collect();
        let bytes: Vec<u8> = v.iter().flat_map(|c| c.to_le_bytes()).collect();
        assert_eq!(chunk_digest_u16(&v), sha256_hex(&bytes));
    }

    #[test]
    fn boundary_chunks_cover_edges() {
        let e4 = boundary_chunks(Format::E4M3);
        for c in [0x00, 0x80, 0x43, 0xC3, 0x7F, 0xFF, 0x3B, 0x3A, 0xBB] {
            assert!(e4.contains(&c), "{c:#x} {e4:x?}");
        }
        let f16 = boundary_chunks(Format::F16);
        assert!(f16.contains(&0x47) && f16.contains(&0x33) && f16.contains(&0xC7));
        assert!(boundary_chunks(Format::E8M0).len() <= 12);
    }

    #[test]
    fn predicted_gaps_explain_only_their_count() {
        let conv = conversion("e8m0.rp.satfinite").unwrap();
        let mut r = ConversionResult::new(conv);
        r.known_gap = Some("test".into());
        r.predicted_mismatches = Some(12);
        r.inputs = 1 << 32;
        r.mismatches = 12;
        assert!(!r.unexplained());
        r.mismatches += 1;
        assert!(r.unexplained());
        r.inputs = 10 * CHUNK_LEN as u64; // a quick run: any count is explained
        assert!(!r.unexplained());
        let plain = ConversionResult::new(conversion("e2m1.rz.satfinite").unwrap());
        assert!(!plain.unexplained());
        // what the H200 sweep measured: E8M0 converts |x|; non-saturating
        // E4M3 overflow keeps the sign, a NaN input does not
        assert_eq!(
            code("e8m0.rp.satfinite", (-1.5f32).to_bits()),
            code("e8m0.rp.satfinite", 1.5f32.to_bits())
        );
        assert_eq!(code("e8m0.rp.satfinite", (-1.5f32).to_bits()), 128);
        assert_eq!(code("e4m3.nosat", 0xC3E8_0001), 0xFF);
        assert_eq!(code("e4m3.nosat", 0x43E8_0001), 0x7F);
        assert_eq!(code("e4m3.nosat", 0xFFC0_0000), 0x7F);
        assert_eq!(code("e4m3.nosat", 0xC3E8_0000), 0xFE);
    }

    #[test]
    fn record_sample() {
        let conv = conversion("e2m1.rn.satfinite").unwrap();
        let mut r = ConversionResult::new(conv);
        let recs = |base: u32, n: usize| -> Vec<MismatchRecord> {
            (0..n)
                .map(|k| MismatchRecord {
                    input_bits: base + k as u32,
                    gpu_code: 1,
                    cpu_code: 2,
                })
                .collect()
        };
        absorb_chunks(
            &mut r,
            vec![
                (3, "a".into(), 100, recs(3 << 24, FIRST_RECORDS)),
                (4, "b".into(), 0, vec![]),
                (5, "c".into(), 5, recs(5 << 24, 5)),
                (9, "d".into(), 7, recs(9 << 24, 7)),
            ],
        );
        assert_eq!(r.mismatches, 112);
        assert_eq!(r.inputs, 4 * CHUNK_LEN as u64);
        assert_eq!(r.records.len(), FIRST_RECORDS + 2);
        assert_eq!(r.records[FIRST_RECORDS].input_bits, 5 << 24);
        assert_eq!(r.records[FIRST_RECORDS + 1].input_bits, 9 << 24);
        assert!(r.unexplained());
        let (n, first) = compare_chunk(10, &[1u8, 2, 3], &[1u8, 0, 3]);
        assert_eq!(n, 1);
        assert_eq!(
            first,
            [MismatchRecord {
                input_bits: 11,
                gpu_code: 2,
                cpu_code: 0
            }]
        );
    }
}
