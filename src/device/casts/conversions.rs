//! The conversion table: every GPU conversion of the sweep with its
//! mechanism on sm_90, its CPU policy inputs and, where the CUDA headers
//! predict one, its known gap.

use super::*;

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
