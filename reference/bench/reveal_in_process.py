"""Repeated `mxbi.reveal` calls in one Python process (what the process keeps
between reveals: docs/EXPLAIN.md "Speed"; the table in docs/PERFORMANCE.md
"Fifth measurement").

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=DIR_WITH_MXBI python3 reference/bench/reveal_in_process.py M K N [--calls 4]

The subject is numpy's float32 matmul (no GPU). Prints the first call's
wall seconds, launches and order, then the median of the later calls and
their phases over 3 ms.
"""

import argparse
import statistics
import time

import numpy as np

import mxbi


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) @ b.astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("m", type=int)
    ap.add_argument("k", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("--calls", type=int, default=4)
    a = ap.parse_args()
    times = []
    for call in range(max(a.calls, 2)):
        t0 = time.perf_counter()
        r = mxbi.reveal(matmul, a.m, a.k, a.n)
        times.append(time.perf_counter() - t0)
        if call == 0:
            print(f"first call {times[0]:.3f} s, {r.launches} launches ({r.grid_launches} grid), order {r.order}")
    phases = [(w, round(t, 3)) for w, t in r.timings if t > 0.003]
    print(f"later calls: median {statistics.median(times[1:]):.3f} s; last call's phases {phases}")


if __name__ == "__main__":
    main()
