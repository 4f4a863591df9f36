#!/usr/bin/env python3
"""Paired timing of mxbi against its peers (see docs/PERFORMANCE.md).

Starts `mxbi bench --serve`, takes its input array (so both sides work on
the same values), checks that each peer writes the same bytes as its mxbi
case, then measures every comparison in ROUNDS paired rounds. A round times
mxbi (one `time` request to the server) and its peer (in this process)
back to back, in alternating order (mxbi first in even rounds, the peer
first in odd ones); each side makes back-to-back calls for at least
WINDOW seconds (and at least one call) and counts the mean time per call,
so both sides are exposed to the same load for the same wall time. Each
window starts SETTLE_S (0.2 s) after the other side's ended, so that
neither is timed while the other's threads still spin (OpenBLAS's do). The
round's ratio is peer time / mxbi time (for memcpy comparisons: mxbi case
time / memcpy time, both in mxbi). One untimed round comes first. The
result is the median of the per-round ratios, with their min and max.

Usage: paired.py --mxbi PATH --out DIR [--elements N] [--rounds R]
                 [--window S] [--threads T ...]
Writes DIR/results.json (every round) for report.py; exit 1 if a peer's
bytes differ from its mxbi case.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers as peers_mod  # noqa: E402

# (mxbi case, peer, target speedup at all threads or None, also at 1 thread)
PEER_PAIRS = [
    ("cast_e4m3_ml_dtypes", "ml_dtypes_e4m3", 10.0, True),
    ("cast_e4m3_nvidia", "ml_dtypes_e4m3", None, False),
    ("mxfp8_e4m3_ocp_floor", "numpy_mx_e4m3_floor", 20.0, True),
    ("mxfp8_e4m3_nvidia_rceil", "numpy_mx_e4m3_floor", None, False),
    ("mxfp8_e4m3_ocp_floor_alloc", "numpy_mx_e4m3_floor_alloc", None, False),
    ("mxfp8_e4m3_ocp_floor_alloc", "torchao_to_mx_floor", 4.0, True),
    ("mxfp8_e4m3_nvidia_rceil_alloc", "torchao_to_mx_rceil", 4.0, True),
    ("gemm_fma_2048", "numpy_matmul_2048", 0.5, True),
]
# (mxbi case, target time / memcpy or None)
MEMCPY_PAIRS = [
    ("cast_e4m3_ml_dtypes", 2.0),
    ("cast_e4m3_nvidia", 2.0),
    ("mxfp8_e4m3_ocp_floor", 2.0),
    ("mxfp8_e4m3_nvidia_rceil", 2.0),
    ("mxfp8_e4m3_ocp_floor_alloc", None),
]
# (mxbi case, target kind, target value): alone, all threads
SOLO = [
    ("gemm_hopper_bf16_1024", "min_gflops", 5.0),
    ("gemm_row_only_fma", "max_ms", 1.0),
]
# mxbi case -> peers that must give the same bytes
SAME_BYTES = {
    "cast_e4m3_ml_dtypes": ["ml_dtypes_e4m3", "ml_dtypes_astype_e4m3"],
    "mxfp8_e4m3_ocp_floor": ["numpy_mx_e4m3_floor", "numpy_mx_e4m3_floor_alloc", "torchao_to_mx_floor"],
    "mxfp8_e4m3_nvidia_rceil": ["torchao_to_mx_rceil"],
}


class Mxbi:
    def __init__(self, exe, elements):
        self.p = subprocess.Popen(
            [exe, "bench", "--serve", "--elements", str(elements)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.hello = self._read()

    def _read(self):
        line = self.p.stdout.readline()
        if not line:
            self.p.wait()
            sys.exit(f"paired.py: mxbi bench --serve stopped (exit {self.p.returncode})")
        return json.loads(line)

    def ask(self, request):
        self.p.stdin.write(request + "\n")
        self.p.stdin.flush()
        return self._read()

    def window(self, case, threads, window):
        r = self.ask(f"time {case} {threads} {window} 1")
        return r["seconds"] / r["calls"], r["calls"]

    def close(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        self.p.wait()


def peer_window(f, window):
    t0 = time.perf_counter()
    calls = 0
    while True:
        f()
        calls += 1
        s = time.perf_counter() - t0
        if s >= window:
            return s / calls, calls


def load1():
    with open("/proc/loadavg") as fh:
        return float(fh.read().split()[0])


def summary(ratios):
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


# Seconds each side waits before its window, so that it starts on a quiet
# machine: OpenBLAS's worker threads keep spinning for about 0.1 s after a
# call returns (its THREAD_TIMEOUT, 2^28 cycles), and a side timed right
# after them shares its cores with them (measured: mxbi's first GEMM call
# after numpy's took 108 ms instead of 81 ms at 2 threads; after a 0.2 s
# pause, 81 ms; numpy's calls after mxbi's are the same with or without it).
SETTLE_S = 0.2


def run_pair(rounds, window, a, b, settle=SETTLE_S):
    """a, b: callables (window) -> (seconds per call, calls). Returns the
    rounds, a first in even rounds; each window starts `settle` seconds
    after the previous one ended."""

    def timed(side):
        time.sleep(settle)
        return side(window)

    a(window / 2)
    b(window / 2)
    out = []
    for r in range(rounds):
        if r % 2 == 0:
            ta, ca = timed(a)
            tb, cb = timed(b)
        else:
            tb, cb = timed(b)
            ta, ca = timed(a)
        out.append({"a_s": ta, "a_calls": ca, "b_s": tb, "b_calls": cb})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mxbi", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--elements", type=int, default=1 << 24)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--window", type=float, default=0.25)
    ap.add_argument("--threads", type=int, nargs="*", default=None, help="thread counts (default: all CPUs, then 1)")
    a = ap.parse_args()
    if a.rounds < 1 or a.window <= 0 or a.elements % 4096:
        sys.exit("paired.py: --rounds >= 1, --window > 0 and --elements a multiple of 4096")
    ncpu = len(os.sched_getaffinity(0))
    threads = a.threads or sorted({ncpu, 1}, reverse=True)
    os.makedirs(a.out, exist_ok=True)

    mxbi = Mxbi(a.mxbi, a.elements)
    shape = mxbi.hello["shape"]
    path = os.path.join(a.out, "input.f32")
    mxbi.ask(f"write-input {path}")
    x = np.fromfile(path, dtype="<f4").reshape(shape)
    os.remove(path)
    # mxbi's GEMM operands are the first 2048^2 values of its input stream
    # (A) and the 2048^2 after the first (B as [N, K]).
    g = peers_mod.GEMM
    flat = x.reshape(-1)
    if flat.size >= g * g + 1:
        ga, gbt = flat[: g * g].reshape(g, g).copy(), flat[1 : g * g + 1].reshape(g, g).copy()
        gemm_input = "the same values as mxbi"
    else:
        rng = np.random.default_rng(1)
        ga, gbt = (rng.standard_normal((g, g), dtype=np.float32) for _ in range(2))
        gemm_input = "numpy normal values (the input is smaller than mxbi's GEMM operands)"
    peers = peers_mod.Peers(x, ga, gbt)
    what = peers.what()

    # Same work: each peer's bytes against its mxbi case's.
    pout = peers.outputs()
    checks = []
    for case, names in SAME_BYTES.items():
        p = os.path.join(a.out, f"{case}.bin")
        mxbi.ask(f"write-output {case} {p}")
        with open(p, "rb") as fh:
            mine = fh.read()
        os.remove(p)
        for name in names:
            if name in pout:
                checks.append({"mxbi": case, "peer": name, "bytes": len(mine), "equal": pout[name] == mine})
    del pout

    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "elements": a.elements,
        "shape": shape,
        "rounds": a.rounds,
        "window_s": a.window,
        "threads": threads,
        "cpus": ncpu,
        "mxbi": mxbi.hello,
        "python": platform.python_version(),
        "versions": peers.versions,
        "blas": peers.blas,
        "peer_what": what,
        "skipped": dict(peers.skipped),
        "gemm_input": gemm_input,
        "same_bytes": checks,
        "load1_before": load1(),
        "peer_pairs": [],
        "memcpy_pairs": [],
        "solo": [],
    }
    t_start = time.time()

    def progress(msg):
        print(f"[{time.time() - t_start:6.1f}s] {msg}", file=sys.stderr, flush=True)

    for t in threads:
        for case, peer, target, at_one in PEER_PAIRS:
            if t != threads[0] and not at_one:
                continue
            why = peers.can_run(peer, t)
            if why:
                if why not in result["skipped"].values():
                    result["skipped"][f"{peer} ({t} threads)"] = why
                continue
            progress(f"{case} vs {peer}, {t} threads")
            f = peers.fn(peer)
            with peers.setup(peer, t):
                load = load1()
                rounds = run_pair(
                    a.rounds,
                    a.window,
                    lambda w: mxbi.window(case, t, w),
                    lambda w: peer_window(f, w),
                )
            ratios = [r["b_s"] / r["a_s"] for r in rounds]
            result["peer_pairs"].append(
                {
                    "threads": t,
                    "mxbi": case,
                    "peer": peer,
                    "target": target if t == threads[0] else None,
                    "load1": load,
                    "rounds": rounds,
                    "mxbi_s": statistics.median(r["a_s"] for r in rounds),
                    "peer_s": statistics.median(r["b_s"] for r in rounds),
                    "ratio": summary(ratios),
                }
            )
        for case, target in MEMCPY_PAIRS:
            progress(f"{case} vs memcpy, {t} threads")
            load = load1()
            rounds = run_pair(
                a.rounds,
                a.window,
                lambda w: mxbi.window(case, t, w),
                lambda w: mxbi.window("memcpy", t, w),
            )
            ratios = [r["a_s"] / r["b_s"] for r in rounds]
            result["memcpy_pairs"].append(
                {
                    "threads": t,
                    "mxbi": case,
                    "target": target,
                    "load1": load,
                    "rounds": rounds,
                    "mxbi_s": statistics.median(r["a_s"] for r in rounds),
                    "memcpy_s": statistics.median(r["b_s"] for r in rounds),
                    "ratio": summary(ratios),
                }
            )
    for case, kind, value in SOLO:
        t = threads[0]
        progress(f"{case}, {t} threads")
        mxbi.window(case, t, a.window / 2)
        times = [mxbi.window(case, t, a.window)[0] for _ in range(a.rounds)]
        result["solo"].append(
            {
                "threads": t,
                "mxbi": case,
                "target_kind": kind,
                "target": value,
                "times_s": times,
                "time": summary(times),
            }
        )
    mxbi.close()
    result["load1_after"] = load1()
    result["seconds"] = time.time() - t_start
    with open(os.path.join(a.out, "results.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    progress(f"done; {os.path.join(a.out, 'results.json')}")
    bad = [c for c in checks if not c["equal"] and not c["peer"].startswith("torchao")]
    if bad:
        print(f"paired.py: peers whose bytes differ from mxbi's: {bad}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
