"""TransformerEngine's MXFP8 CPU reference rule, re-expressed in Python.

Sources (NVIDIA/TransformerEngine, read, not copied):
  * tests/cpp/test_common.h::float_to_e8m0 (also the non-Blackwell fallback
    of transformer_engine/common/util/ptx_arch_spec.cuh::float_to_e8m0)
  * tests/cpp/test_common.h::exp2f_rcp and Quantized_Limits::max_reciprocal
  * tests/cpp/operator/test_cast_mxfp8.cu reference quantizer:
      amax = std::max over |x| (a NaN element never wins the comparison,
      so NaN is ignored for amax), b = float_to_e8m0(amax * max_reciprocal),
      q = static_cast<fp8>(x * exp2f_rcp(b))
  * cuda_fp8.hpp __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...): RNE,
    |x| beyond max (incl. Inf) -> +-max, NaN -> 0x7F (sign dropped).
All arithmetic is float32 (numpy float32 scalar ops are IEEE RNE, no FTZ).
"""
import numpy as np

import ml_dtypes

MAX = {"mxfp8-e4m3": 448.0, "mxfp8-e5m2": 57344.0}
DT = {"mxfp8-e4m3": ml_dtypes.float8_e4m3fn, "mxfp8-e5m2": ml_dtypes.float8_e5m2}


def _bits(x):
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def te_float_to_e8m0(v):
    v = np.float32(v)
    if np.isnan(v):
        return 0xFF
    if np.isinf(v):
        return 0xFE
    if v == 0:
        return 0x00
    b = _bits(v)
    exponent = (b >> 23) & 0xFF  # C: stored into a uint8 (sign bit truncated away)
    mantissa = b & 0x7FFFFF
    # round up the exponent; 0xFE stays (satfinite); subnormals <= 2^-127 stay at 0
    if mantissa > 0 and exponent != 0xFE and not (exponent == 0 and mantissa <= 0x400000):
        exponent += 1
    return exponent & 0xFF


def te_exp2f_rcp(b):
    if b == 255:
        bits = 0x7FFFFFFF
    elif b == 254:
        bits = 0x00400000
    else:
        bits = (254 - b) << 23
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def te_cvt_satfinite(fmt, x):
    """RNE + satfinite conversion of one float32 to an FP8 code."""
    x = np.float32(x)
    if np.isnan(x):
        return 0x7F
    mx = np.float32(MAX[fmt])
    c = np.clip(x, -mx, mx)  # exact (max is representable); keeps -0
    return int(np.array([c], dtype=np.float32).astype(DT[fmt]).view(np.uint8)[0])


def te_quantize_block(fmt, bits32):
    x = np.array(bits32, dtype=np.uint32).view(np.float32)
    amax = np.float32(0.0)
    for v in x:
        a = np.abs(v)
        if amax < a:  # std::max(amax, a): NaN never replaces amax
            amax = a
    rcp = np.float32(1.0 / float(np.float32(MAX[fmt])))
    with np.errstate(over="ignore", invalid="ignore"):
        b = te_float_to_e8m0(np.float32(amax * rcp))
        s = te_exp2f_rcp(b)
        codes = [te_cvt_satfinite(fmt, np.float32(v * s)) for v in x]
    return b, codes
