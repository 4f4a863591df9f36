#!/usr/bin/env python3
"""Peer timings for `mxbi bench` (see docs/PERFORMANCE.md).

Times, on N f32 values drawn from the same distribution as `mxbi bench`
(random sign and 23-bit mantissa, exponent uniform in [-24, 24]; the values
differ, the size and exponent spread are the same):

  * ml_dtypes_astype_e4m3   x.astype(ml_dtypes.float8_e4m3fn)
  * numpy_mx_e4m3_floor     a vectorised numpy + ml_dtypes MXFP8 quantizer
                            (OCP FLOOR scale, saturate, RNE), see mx_numpy()
  * torchao_to_mx_floor     torchao.prototype.mx_formats.mx_tensor.to_mx,
  * torchao_to_mx_rceil     CPU, float8_e4m3fn, block 32, last axis

Each figure is the median of --reps timed runs after --warmup untimed ones
(time.perf_counter). Prints one JSON object on stdout.

Usage: peers.py [--elements N] [--reps R] [--warmup W] [--threads T] [--check]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings

import numpy as np
import ml_dtypes

warnings.filterwarnings("ignore")

EXP_SPREAD = 24


def bench_input(n, seed=20240601):
    """Random sign and mantissa, exponent uniform in [-24, 24], no 0/Inf/NaN."""
    rng = np.random.default_rng(seed)
    sign = rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)
    mant = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    e = rng.integers(-EXP_SPREAD, EXP_SPREAD + 1, n, dtype=np.int32)
    bits = sign | ((e + 127).astype(np.uint32) << np.uint32(23)) | mant
    return bits.view(np.float32)


E4M3_EMAX = 8
E4M3_MAX = np.float32(448.0)


def mx_numpy(x, block=32):
    """MXFP8-e4m3 (OCP FLOOR) quantizer in plain vectorised numpy+ml_dtypes.

    amax per block; exponent from the bits of amax (not a float log2);
    E = floor(log2 amax) - emax, clamped to [-127, 127]; NaN/Inf blocks get
    scale 0xFF; elements x * 2^-E clamped to +-448 and cast (RNE) with
    ml_dtypes. Returns (codes uint8 same shape, scales uint8 [..., nblocks]).
    """
    xb = x.reshape(*x.shape[:-1], x.shape[-1] // block, block)
    amax = np.abs(xb).max(axis=-1)  # NaN propagates
    abits = amax.view(np.uint32)
    e_field = (abits >> np.uint32(23)).astype(np.int32)
    # floor(log2 amax) from the bits (f32-subnormal amax: clamps to -127 anyway)
    e = np.where(e_field == 0, -127, e_field - 127) - E4M3_EMAX
    e = np.clip(e, -127, 127)
    nonfinite = e_field == 255
    scales = np.where(nonfinite, 255, e + 127).astype(np.uint8)
    # 2^-E as f32 (2^127 .. 2^-127, the last one subnormal; exact via ldexp)
    inv = np.ldexp(np.float32(1.0), (-e).astype(np.int32)).astype(np.float32)
    y = xb * inv[..., None]
    np.clip(y, -E4M3_MAX, E4M3_MAX, out=y)
    codes = y.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    codes[nonfinite] = 0x7F
    return codes.reshape(x.shape), scales


def timeit(f, reps, warmup):
    for _ in range(warmup):
        f()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    t.sort()
    return t


def entry(name, what, t, n, nbytes):
    med = statistics.median(t)
    return {
        "name": name,
        "what": what,
        "bytes": nbytes,
        "median_s": med,
        "min_s": t[0],
        "max_s": t[-1],
        "melem_per_s": n / med / 1e6,
        "gb_per_s": nbytes / med / 1e9,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's default)")
    ap.add_argument("--check", action="store_true", help="cross-check numpy quantizer against torchao (FLOOR)")
    a = ap.parse_args()
    n = a.elements
    if n % 32:
        sys.exit("--elements must be a multiple of 32")
    cols = 4096 if n % 4096 == 0 else 32
    x = bench_input(n).reshape(n // cols, cols)
    out = {
        "tool": "peers.py",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "ml_dtypes": ml_dtypes.__version__,
        "elements": n,
        "shape": list(x.shape),
        "reps": a.reps,
        "warmup": a.warmup,
        "input": f"numpy default_rng f32: random sign and mantissa, exponent uniform in [-{EXP_SPREAD}, {EXP_SPREAD}]",
        "results": [],
        "skipped": {},
    }
    res = out["results"]
    cast_bytes = 5 * n
    mx_bytes = 5 * n + n // 32

    t = timeit(lambda: x.astype(ml_dtypes.float8_e4m3fn), a.reps, a.warmup)
    res.append(entry("ml_dtypes_astype_e4m3", "numpy ndarray.astype(ml_dtypes.float8_e4m3fn), 1 thread", t, n, cast_bytes))

    t = timeit(lambda: mx_numpy(x), a.reps, a.warmup)
    res.append(entry("numpy_mx_e4m3_floor", "reference/bench/peers.py mx_numpy (numpy+ml_dtypes, vectorised), 1 thread", t, n, mx_bytes))

    try:
        import torch
        import torchao
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
        from torchao.prototype.mx_formats.mx_tensor import to_mx
    except Exception as e:  # noqa: BLE001
        out["skipped"]["torchao"] = f"not importable: {type(e).__name__}: {e}"
    else:
        if a.threads:
            torch.set_num_threads(a.threads)
        out["torch"] = torch.__version__
        out["torchao"] = torchao.__version__
        out["torch_threads"] = torch.get_num_threads()
        xt = torch.from_numpy(x)
        for mode in ("floor", "rceil"):
            m = getattr(ScaleCalculationMode, mode.upper())
            with torch.no_grad():
                t = timeit(lambda: to_mx(xt, torch.float8_e4m3fn, 32, m), a.reps, a.warmup)
            res.append(
                entry(
                    f"torchao_to_mx_{mode}",
                    f"torchao to_mx(x, float8_e4m3fn, 32, {mode.upper()}) on CPU, {torch.get_num_threads()} torch threads",
                    t,
                    n,
                    mx_bytes,
                )
            )
        if a.check:
            s_t, d_t = to_mx(xt, torch.float8_e4m3fn, 32, ScaleCalculationMode.FLOOR)
            c_np, s_np = mx_numpy(x)
            out["check_numpy_vs_torchao_floor"] = {
                "scales_equal": bool(np.array_equal(s_t.view(torch.uint8).numpy().reshape(s_np.shape), s_np)),
                "codes_equal": bool(np.array_equal(d_t.view(torch.uint8).numpy().reshape(c_np.shape), c_np)),
            }
    out["cpu_count"] = os.cpu_count()
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
