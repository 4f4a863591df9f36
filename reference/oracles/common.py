"""Shared helpers: format tables and the boundary input sets.

The input sets are built from exact arithmetic (Python floats are IEEE f64;
every value and midpoint used here is exact in f64) and are the same for
every oracle. Nothing here calls an oracle except `format_values`, which
takes the list of representable values from gfloat's decoder (cross-checked
against ml_dtypes in gen_decode.py).
"""
import math
import struct

import numpy as np

HERE = __import__("os").path.dirname(__file__)

# format name -> gfloat FormatInfo attribute name
GFLOAT_FI = {
    "e4m3": "format_info_ocp_e4m3",
    "e5m2": "format_info_ocp_e5m2",
    "e3m2": "format_info_ocp_e3m2",
    "e2m3": "format_info_ocp_e2m3",
    "e2m1": "format_info_ocp_e2m1",
    "e8m0": "format_info_ocp_e8m0",
    "int8": "format_info_ocp_int8",
    "bf16": "format_info_bfloat16",
    "f16": "format_info_binary16",
}

NBITS = {"e4m3": 8, "e5m2": 8, "e3m2": 6, "e2m3": 6, "e2m1": 4, "e8m0": 8, "int8": 8, "bf16": 16, "f16": 16}
SMALL_FORMATS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0", "int8"]
ALL_FORMATS = SMALL_FORMATS + ["bf16", "f16"]


def gfloat_fi(fmt):
    import gfloat.formats as F

    return getattr(F, GFLOAT_FI[fmt])


def ml_dtype(fmt):
    import ml_dtypes as md

    return {
        "e4m3": md.float8_e4m3fn,
        "e5m2": md.float8_e5m2,
        "e3m2": md.float6_e3m2fn,
        "e2m3": md.float6_e2m3fn,
        "e2m1": md.float4_e2m1fn,
        "e8m0": md.float8_e8m0fnu,
        "bf16": md.bfloat16,
        "f16": np.float16,
    }.get(fmt)


# oracle name -> the distribution whose release produced its outputs
ORACLE_DIST = {"ml_dtypes": "ml_dtypes", "torch": "torch", "gfloat": "gfloat"}


def release_header(oracles, argv):
    """The comment lines that open a vector file: each oracle's installed
    release (`# oracle: NAME VERSION`, the version as the distribution's
    metadata gives it), numpy's and Python's, and the command that wrote the
    file (run in reference/oracles). The Rust tests read the oracle lines and
    check them against the release each preset names."""
    import os
    import platform
    import sys
    from importlib.metadata import version

    lines = [f"# oracle: {o} {version(ORACLE_DIST[o])}\n" for o in oracles]
    lines.append(f"# with: numpy {np.__version__}, Python {platform.python_version()}\n")
    lines.append(f"# command: python {' '.join([os.path.basename(argv[0])] + argv[1:])}\n")
    return lines


def code_hex(fmt, code):
    return f"{code:04x}" if NBITS[fmt] == 16 else f"{code:02x}"


# ---- bit helpers ---------------------------------------------------------

def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f32_from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f64_from_bits(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def f32_exact(x):
    """True when the f64 x is exactly a finite f32 value."""
    if not math.isfinite(x) or abs(x) > 3.4028234663852886e38:
        return False
    return float(np.float32(x)) == x


def f32_neighbours(bits):
    """bits, bits+-1 (in magnitude order, staying on the same sign), as u32."""
    out = [bits]
    mag = bits & 0x7FFFFFFF
    sign = bits & 0x80000000
    if mag < 0x7F800000:
        out.append(sign | (mag + 1))  # next away from zero (may be Inf)
    if mag > 0:
        out.append(sign | (mag - 1))
    else:
        out.append(0x80000001 if sign == 0 else 0x00000001)  # across zero
    return out


def f64_neighbours(bits):
    out = [bits]
    mag = bits & 0x7FFFFFFFFFFFFFFF
    sign = bits & 0x8000000000000000
    if mag < 0x7FF0000000000000:
        out.append(sign | (mag + 1))
    if mag > 0:
        out.append(sign | (mag - 1))
    else:
        out.append(0x8000000000000001 if sign == 0 else 1)
    return out


# ---- format values -------------------------------------------------------

_VALUES = {}


def format_values(fmt):
    """Sorted distinct finite non-negative values of the format (as f64)."""
    if fmt not in _VALUES:
        import gfloat

        fi = gfloat_fi(fmt)
        vals = set()
        for c in range(1 << NBITS[fmt]):
            v = gfloat.decode_float(fi, c).fval
            if math.isfinite(v) and v >= 0:
                vals.add(abs(v))
        _VALUES[fmt] = sorted(vals)
    return _VALUES[fmt]


def beyond_max(vals):
    """Would-be values above the max: max + ulp(max) (the next value the
    format would have with one more code), then a few larger ones."""
    mx = vals[-1]
    ulp = mx - vals[-2]
    nxt = mx + ulp
    return [nxt, nxt + ulp, 2 * mx, 4 * mx, 16 * mx]


SPECIAL_F32 = [
    0x00000000, 0x80000000,  # +-0
    0x7F800000, 0xFF800000,  # +-Inf
    0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF,  # NaNs
    0x00000001, 0x00400000, 0x007FFFFF, 0x00200000, 0x00800000,  # f32 subnormals, min normal
    0x80000001, 0x80400000, 0x807FFFFF, 0x80200000, 0x80800000,
    0x7F7FFFFF, 0xFF7FFFFF,  # f32 max
]

SPECIAL_F64 = [
    0x0000000000000000, 0x8000000000000000,
    0x7FF0000000000000, 0xFFF0000000000000,
    0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001,
    0x0000000000000001, 0x8000000000000001,  # f64 min subnormal
    0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF,  # f64 max
    0x47EFFFFFE0000000, 0xC7EFFFFFE0000000,  # f32 max as f64
    0x47EFFFFFF0000000,  # f32max + half f32 ulp (f32 cast -> Inf tie)
    0x3800000000000000, 0x3810000000000000,  # 2^-127, 2^-126
    0x36A0000000000000,  # 2^-149
]


def random_f32_bits(n=2000, seed=20240601):
    """n random f32 patterns: uniform sign, uniform biased exponent 0..255,
    uniform mantissa (so every binade, subnormals, Inf/NaN patterns occur)."""
    rng = np.random.default_rng(seed)
    sign = rng.integers(0, 2, n, dtype=np.uint32) << 31
    exp = rng.integers(0, 256, n, dtype=np.uint32) << 23
    man = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    return [int(x) for x in (sign | exp | man)]


def pow2_sweep_f32():
    """2^-149 .. 2^127 and +-1 ulp, both signs."""
    out = []
    for e in range(-149, 128):
        out.extend(f32_neighbours(f32_bits(math.ldexp(1.0, e))))
    return out


def _sampled_positive_values(fmt, vals):
    """For bf16/f16: sample every 16th positive code's value plus all
    subnormals and the top 16 codes. For the small formats: all values."""
    if NBITS[fmt] < 16:
        return list(range(len(vals)))
    # vals index == positive code for bf16/f16 (monotone, no duplicates)
    n = len(vals)
    mant_bits = 7 if fmt == "bf16" else 10
    idx = set(range(0, n, 16))
    idx.update(range(0, 1 << mant_bits))  # zero + subnormals (+ first normal)
    idx.update(range(max(0, n - 16), n))
    return sorted(idx)


def f32_input_set(fmt):
    """Sorted list of u32 bit patterns (unique) for the cast vectors."""
    vals = format_values(fmt)
    ext = vals + beyond_max(vals)
    if fmt == "e8m0":
        # would-be values below 2^-127 (no zero in e8m0)
        ext = [math.ldexp(1.0, e) for e in range(-150, -127)] + ext
    pos = set()
    for i in _sampled_positive_values(fmt, vals) + list(range(len(vals), len(ext))):
        if i >= len(ext):
            continue
        v = ext[i]
        if f32_exact(v):
            pos.update(f32_neighbours(f32_bits(v)))
        if i + 1 < len(ext):
            m = (ext[i] + ext[i + 1]) / 2
            if f32_exact(m):
                pos.update(f32_neighbours(f32_bits(m)))
            elif math.isfinite(np.float32(m)):
                pos.add(f32_bits(float(np.float32(m))))
    if fmt == "e8m0":
        pos.update(f32_neighbours(f32_bits(math.ldexp(1.5, -127))))
    bits = set()
    for b in pos:
        bits.add(b & 0x7FFFFFFF)
        bits.add((b & 0x7FFFFFFF) | 0x80000000)
    bits.update(SPECIAL_F32)
    bits.update(pow2_sweep_f32())
    bits.update(random_f32_bits())
    for b in [0x7F7FFFFF]:
        bits.update(f32_neighbours(b))
    return sorted(bits)


def f64_input_set(fmt):
    """u64 bit patterns: every representable value and every midpoint
    (including beyond max) with +-1 f64 ulp, both signs, plus specials.
    For bf16/f16 only the sampled codes of `_sampled_positive_values` (and
    the would-be values beyond max)."""
    vals = format_values(fmt)
    ext = vals + beyond_max(vals)
    if fmt == "e8m0":
        ext = [math.ldexp(1.0, e) for e in range(-150, -127)] + ext
    pos = set()
    for i in _sampled_positive_values(fmt, vals) + list(range(len(vals), len(ext))):
        pos.update(f64_neighbours(f64_bits(ext[i])))
        if i + 1 < len(ext):
            pos.update(f64_neighbours(f64_bits((ext[i] + ext[i + 1]) / 2)))
    bits = set()
    for b in pos:
        bits.add(b & 0x7FFFFFFFFFFFFFFF)
        bits.add((b & 0x7FFFFFFFFFFFFFFF) | 0x8000000000000000)
    bits.update(SPECIAL_F64)
    return sorted(bits)
