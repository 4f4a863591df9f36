"""Deterministic 32-element f32 blocks for the MX block-quantization cases.

Every block is a list of 32 u32 f32 bit patterns. Names are stable; the
same block list is fed to every oracle and every format/scale mode.
"""
import math

import numpy as np

from common import f32_bits

BLOCK = 32
# element max values per MX element format (OCP MX v1.0)
ELEM_MAX = {
    "mxfp8-e4m3": 448.0,
    "mxfp8-e5m2": 57344.0,
    "mxfp6-e3m2": 28.0,
    "mxfp6-e2m3": 7.5,
    "mxfp4-e2m1": 6.0,
}
EMAX_ELEM = {"mxfp8-e4m3": 8, "mxfp8-e5m2": 15, "mxfp6-e3m2": 4, "mxfp6-e2m3": 2, "mxfp4-e2m1": 2}
MX_FORMATS = list(ELEM_MAX)

ONE = 0x3F800000


def _fill(v_bits, n=BLOCK):
    return [v_bits] * n


def _with(base, idx_bits):
    out = list(base)
    for i, b in idx_bits:
        out[i] = b
    return out


def _rand_mag_bits(rng, n, lo_exp, hi_exp):
    """n positive f32 normals with unbiased exponent uniform in [lo_exp, hi_exp]."""
    e = rng.integers(lo_exp, hi_exp + 1, n)
    m = rng.integers(0, 1 << 23, n)
    return [int(((int(ei) + 127) << 23) | int(mi)) for ei, mi in zip(e, m)]


def _rand_block_below(rng, amax_bits, spread=12):
    """31 random-sign elements with magnitude <= amax (exponent spread below
    amax's), plus amax itself at a random position (random sign)."""
    amax_exp = ((amax_bits >> 23) & 0xFF) - 127
    lo = max(-149, amax_exp - spread)
    vals = []
    for _ in range(BLOCK - 1):
        e = int(rng.integers(lo, amax_exp + 1))
        if e < -126:
            mag = int(rng.integers(1, 1 << 23)) >> min(23, -126 - e)
            mag = max(mag, 1)
        else:
            mag = ((e + 127) << 23) | int(rng.integers(0, 1 << 23))
        if mag > amax_bits:
            mag = amax_bits
        vals.append(mag | (int(rng.integers(0, 2)) << 31))
    pos = int(rng.integers(0, BLOCK))
    vals.insert(pos, amax_bits | (int(rng.integers(0, 2)) << 31))
    return vals


def make_blocks(seed=12345):
    rng = np.random.default_rng(seed)
    blocks = []

    def add(name, bits):
        assert len(bits) == BLOCK, name
        blocks.append((name, [int(b) & 0xFFFFFFFF for b in bits]))

    # --- zeros, specials -------------------------------------------------
    add("all_zero", _fill(0))
    add("all_neg_zero", _fill(0x80000000))
    add("mixed_signed_zero", [0x80000000 if i % 2 else 0 for i in range(BLOCK)])
    add("inf_in_ones", _with(_fill(ONE), [(0, 0x7F800000)]))
    add("neg_inf_in_ones", _with(_fill(ONE), [(5, 0xFF800000)]))
    add("nan_in_ones", _with(_fill(ONE), [(0, 0x7FC00000)]))
    add("neg_nan_in_ones", _with(_fill(ONE), [(31, 0xFFC00000)]))
    add("snan_in_ones", _with(_fill(ONE), [(7, 0x7F800001)]))
    add("inf_and_nan", _with(_fill(ONE), [(0, 0x7F800000), (1, 0x7FC00000)]))
    add("all_inf", _fill(0x7F800000))
    add("all_neg_inf", _fill(0xFF800000))
    add("all_nan", _fill(0x7FC00000))
    add("inf_in_zeros", _with(_fill(0), [(3, 0x7F800000)]))
    add("nan_in_zeros", _with(_fill(0), [(3, 0x7FC00000)]))
    add("inf_with_f32max", _with(_fill(0x7F7FFFFF), [(2, 0x7F800000)]))
    add("nan_with_tiny", _with(_fill(0x00000001), [(2, 0x7FC00000)]))

    # --- f32 subnormals and tiny scales ---------------------------------
    add("all_min_subnormal", _fill(0x00000001))
    add("all_neg_min_subnormal", _fill(0x80000001))
    add("all_max_subnormal", _fill(0x007FFFFF))
    add("all_2^-127", _fill(0x00400000))
    add("all_2^-128", _fill(0x00200000))
    add("all_1.5*2^-127", _fill(0x00600000))
    add("all_min_normal", _fill(0x00800000))
    add("subnormal_ramp", [(1 << (i % 23)) | ((i & 1) << 31) for i in range(BLOCK)])
    add("subnormal_random", [int(rng.integers(1, 1 << 23)) | (int(rng.integers(0, 2)) << 31) for _ in range(BLOCK)])
    add("min_normal_and_subnormals", [0x00800000] + [int(rng.integers(1, 1 << 23)) for _ in range(BLOCK - 1)])
    # blocks whose FLOOR/RCEIL scale is at or below 2^-127 for some format
    for e in (-133, -130, -128, -127, -126, -125, -124, -123, -121, -120, -119, -118, -117, -112, -110):
        if e < -126:
            amax = 1 << (23 + 126 + e) if e >= -149 else 1
        else:
            amax = (e + 127) << 23
        add(f"amax_2^{e}_ramp", _rand_block_below(rng, amax, spread=6))
        if e >= -126:
            add(f"amax_2^{e}_ulp_up_block", _rand_block_below(rng, amax | 0x3FFFFF, spread=4))

    # --- huge values -----------------------------------------------------
    add("all_f32_max", _fill(0x7F7FFFFF))
    add("all_neg_f32_max", _fill(0xFF7FFFFF))
    add("f32_max_and_ones", _with(_fill(ONE), [(0, 0x7F7FFFFF)]))
    add("all_2^127", _fill(0x7F000000))
    add("all_1.75*2^127", _fill(0x7F600000))
    add("all_2^126", _fill(0x7E800000))
    add("huge_random", _rand_block_below(rng, 0x7F7FFFFF, spread=30))

    # --- amax near powers of two ----------------------------------------
    for e in (-100, -20, -9, -1, 0, 1, 3, 8, 9, 15, 16, 40, 100, 126, 127):
        p = (e + 127) << 23
        add(f"amax_just_below_2^{e}", _rand_block_below(rng, p - 1))
        add(f"amax_at_2^{e}", _rand_block_below(rng, p))
        add(f"amax_just_above_2^{e}", _rand_block_below(rng, p + 1))
        add(f"uniform_2^{e}_minus_ulp", _fill(p - 1))
    # the f32 log2 hazard: the largest f32 below 512 (research: 0x43FFFFFF)
    add("all_0x43ffffff", _fill(0x43FFFFFF))
    add("all_0x3fffffff", _fill(0x3FFFFFFF))
    add("all_0x4fffffff", _fill(0x4FFFFFFF))

    # --- amax near element max * 2^k (per element format) ----------------
    for fmt, mx in ELEM_MAX.items():
        tag = fmt.split("-")[1]
        for k in (-127, -126, -120, -8, -1, 0, 1, 5, 64, 119):
            v = mx * 2.0**k
            if not (1.2e-38 <= v < 3.4e38):
                continue
            b = f32_bits(v)
            add(f"{tag}_max*2^{k}_minus_ulp", _rand_block_below(rng, b - 1))
            add(f"{tag}_max*2^{k}", _rand_block_below(rng, b))
            add(f"{tag}_max*2^{k}_plus_ulp", _rand_block_below(rng, b + 1))
        # between max and the next power of two (FLOOR saturates these)
        half_ulp = {"e4m3": 16.0, "e5m2": 4096.0, "e3m2": 2.0, "e2m3": 0.125, "e2m1": 0.5}[tag]
        for v in (mx + half_ulp, mx + 2 * half_ulp, 2.0 ** math.ceil(math.log2(mx)) * (1 - 2**-24)):
            add(f"{tag}_over_max_{v!r}", _fill(f32_bits(v)))
            add(f"{tag}_over_max_{v!r}_neg_mixed", [f32_bits(v) | ((i & 1) << 31) if i % 3 == 0 else f32_bits(1.0 / (i + 1)) for i in range(BLOCK)])

    # --- element rounding ties inside a block ----------------------------
    # scale 1 blocks (amax in [2^emax, 2^(emax+1)) for e4m3) with ties
    add("e4m3_ties_scale1", [f32_bits(v) for v in
        ([256.0] + [1.0625, 1.1875, 0.0029296875, 0.0009765625, 0.0009765626, 464.0, -464.0,
                    240.0 + 8.0, 17.0, 19.0, -1.0625, 2.0**-10, 3 * 2.0**-10, 5 * 2.0**-11, 7 * 2.0**-11]
         + [float(i) / 7 for i in range(16)])])
    add("e2m1_ties", [f32_bits(v) for v in
        ([4.0] + [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0, 5.9999]
         + [float(i) / 5 for i in range(16)])])
    add("e2m3_ties", [f32_bits(v) for v in
        ([4.0] + [0.0625, 0.1875, 1.0625, 1.1875, 2.125, 3.875, 7.25, 7.75, -0.0625, -1.0625, -7.25, 7.5, 0.125, 0.0624, 0.0626]
         + [float(i) / 3 for i in range(16)])])
    add("e3m2_ties", [f32_bits(v) for v in
        ([16.0] + [0.03125, 0.09375, 1.125, 1.375, 26.0, 29.0, 30.0, 0.1251, 0.0314, 0.03, -26.0, -29.0, -0.03125, 24.0, 20.0]
         + [float(i) / 3 for i in range(16)])])

    # --- random blocks with wide exponent spread --------------------------
    for i in range(200):
        center = int(rng.integers(-140, 128))
        spread = int(rng.choice([2, 8, 20, 40, 80]))
        lo, hi = max(-149, center - spread), min(127, center)
        vals = []
        for _ in range(BLOCK):
            r = rng.random()
            if r < 0.03:
                vals.append(0)
                continue
            e = int(rng.integers(lo, hi + 1))
            if e < -126:
                mag = max(1, int(rng.integers(1, 1 << 23)) >> min(23, -126 - e))
            else:
                mag = ((e + 127) << 23) | int(rng.integers(0, 1 << 23))
            vals.append(mag | (int(rng.integers(0, 2)) << 31))
        add(f"random_{i:03d}_c{center}_s{spread}", vals)
    return blocks
