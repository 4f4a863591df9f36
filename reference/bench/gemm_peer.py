#!/usr/bin/env python3
"""Peer timing for the fast GEMM kernels (see docs/PERFORMANCE.md).

Times numpy `a @ b` (f32, the BLAS sgemm numpy is linked with) at
M = N = K = 2048 (--size), on values drawn like `benches/common` (random sign
and mantissa, exponent uniform in [-24, 24]). The figure is the median of
--reps timed runs after --warmup untimed ones (time.perf_counter), reported in
GFLOP/s (2 M N K per run). Prints one JSON object on stdout, with the BLAS
library and kernel in use (threadpoolctl when installed, else OpenBLAS's own
config string).

OpenBLAS reads OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE from the environment;
time it with both unset so that it picks its kernel for this CPU:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python gemm_peer.py

Usage: gemm_peer.py [--size S] [--reps R] [--warmup W]
"""
import argparse
import ctypes
import glob
import json
import os
import platform
import statistics
import time

import numpy as np


def bench_input(n, seed):
    rng = np.random.default_rng(seed)
    sign = rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)
    mant = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    e = rng.integers(-24, 25, n, dtype=np.int32)
    bits = sign | ((e + 127).astype(np.uint32) << np.uint32(23)) | mant
    return bits.view(np.float32)


def blas_info():
    try:
        import threadpoolctl

        return [
            {k: v for k, v in d.items() if k in ("internal_api", "version", "architecture", "num_threads", "filepath")}
            for d in threadpoolctl.threadpool_info()
        ]
    except ImportError:
        pass
    out = []
    libdir = os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs")
    for path in glob.glob(os.path.join(libdir, "*openblas*")):
        lib = ctypes.CDLL(path)
        info = {"filepath": os.path.basename(path)}
        for prefix in ("scipy_openblas", "openblas"):
            for suffix in ("64_", ""):
                for what in ("config", "corename"):
                    fn = getattr(lib, f"{prefix}_get_{what}{suffix}", None)
                    if fn is not None:
                        fn.restype = ctypes.c_char_p
                        info[what] = fn().decode()
        out.append(info)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    s = args.size
    a = bench_input(s * s, 1).reshape(s, s)
    b = bench_input(s * s, 2).reshape(s, s)
    for _ in range(args.warmup):
        a @ b
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(
        json.dumps(
            {
                "numpy_matmul_f32": {
                    "size": s,
                    "median_s": med,
                    "gflops": 2 * s**3 / med / 1e9,
                    "min_s": min(times),
                    "reps": args.reps,
                },
                "numpy": np.__version__,
                "blas": blas_info(),
                "env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS")},
                "cpus": os.cpu_count(),
                "machine": platform.machine(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
