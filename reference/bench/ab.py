#!/usr/bin/env python3
"""Paired timing of two mxbi binaries on one `mxbi bench` case (a change
against the revision before it; docs/PERFORMANCE.md).

    python3 reference/bench/ab.py OLD_MXBI NEW_MXBI [--case gemm_fma_2048]
        [--threads 1] [--rounds 7] [--window 0.5]

Starts `bench --serve` in both, then times them in paired rounds with
`paired.py`'s `run_pair` (old first in even rounds, new first in odd ones,
each side calling the case back to back for at least WINDOW seconds).
Prints the median time of each and the per-round ratio new / old (below 1:
the new binary is faster), with its min and max.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import Mxbi, run_pair  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--case", default="gemm_fma_2048")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--window", type=float, default=0.5)
    a = ap.parse_args()
    if a.rounds < 1 or a.window <= 0 or a.threads < 1:
        print("ab.py: --rounds >= 1, --window > 0, --threads >= 1", file=sys.stderr)
        sys.exit(2)
    old, new = Mxbi(a.old, 1 << 24), Mxbi(a.new, 1 << 24)
    rounds = run_pair(
        a.rounds,
        a.window,
        lambda w: old.window(a.case, a.threads, w),
        lambda w: new.window(a.case, a.threads, w),
    )
    ratios = [r["b_s"] / r["a_s"] for r in rounds]
    print(
        f"{a.case}, {a.threads} thread(s), {a.rounds} rounds: "
        f"old {statistics.median(r['a_s'] for r in rounds) * 1e3:.1f} ms, "
        f"new {statistics.median(r['b_s'] for r in rounds) * 1e3:.1f} ms; "
        f"new / old median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"
    )
    old.close()
    new.close()


if __name__ == "__main__":
    main()
