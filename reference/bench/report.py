#!/usr/bin/env python3
"""Markdown tables of ratios from `mxbi bench --json` and peers.py output.

Usage: report.py MXBI.json [MXBI_1THREAD.json] PEERS.json

A speedup is peer median time / mxbi median time (higher is better); the
memcpy ratio is mxbi median time / memcpy median time, both from the same
`mxbi bench` process (lower is better).
"""
import json
import sys

# (mxbi case, peer case, issue target speedup or None for context only)
PAIRS = [
    ("cast_e4m3_ml_dtypes", "ml_dtypes_astype_e4m3", 10.0),
    ("cast_e4m3_nvidia", "ml_dtypes_astype_e4m3", None),
    ("mxfp8_e4m3_ocp_floor", "torchao_to_mx_floor", 4.0),
    ("mxfp8_e4m3_nvidia_rceil", "torchao_to_mx_rceil", 4.0),
    ("mxfp8_e4m3_ocp_floor", "numpy_mx_e4m3_floor", 20.0),
    ("mxfp8_e4m3_nvidia_rceil", "numpy_mx_e4m3_floor", None),
]
MEMCPY_TARGET = 2.0


def by_name(rep):
    return {r["name"]: r for r in rep["results"]}


def verdict(ok):
    return "**yes**" if ok else "**no**"


def main():
    args = sys.argv[1:]
    if len(args) not in (2, 3):
        sys.exit(__doc__)
    runs = [json.load(open(p)) for p in args[:-1]]
    peers = json.load(open(args[-1]))
    pr = by_name(peers)
    primary = runs[0]

    print(f"N = {primary['elements']} f32 elements, shape {primary['shape']}, block 32 along the last axis.")
    print(
        f"mxbi: median of {primary['reps']} reps after {primary['warmup']} warm-up; "
        f"peers: median of {peers['reps']} reps after {peers['warmup']} warm-up."
    )
    peer_versions = ", ".join(
        f"{k} {peers[k]}" for k in ("python", "numpy", "ml_dtypes", "torch", "torchao") if k in peers
    )
    print(f"Peers: {peer_versions}; torch threads: {peers.get('torch_threads', 'n/a')}.")
    for k, v in peers.get("skipped", {}).items():
        print(f"Skipped peer {k}: {v}")
    print()

    print("### mxbi vs memcpy (same process)")
    print()
    print("| threads | case | median ms | Melem/s | GB/s (in+out) | time / memcpy | <= 2x memcpy |")
    print("|---:|---|---:|---:|---:|---:|---|")
    for rep in runs:
        for r in rep["results"]:
            ok = r["time_vs_memcpy"] <= MEMCPY_TARGET
            mark = "—" if r["name"] == "memcpy" else verdict(ok)
            print(
                f"| {rep['threads']} | `{r['name']}` | {r['median_s'] * 1e3:.2f} | {r['melem_per_s']:.0f} | "
                f"{r['gb_per_s']:.2f} | {r['time_vs_memcpy']:.2f} | {mark} |"
            )
    print()

    print("### Peers")
    print()
    print("| peer | median ms | Melem/s | what |")
    print("|---|---:|---:|---|")
    for r in peers["results"]:
        print(f"| `{r['name']}` | {r['median_s'] * 1e3:.2f} | {r['melem_per_s']:.0f} | {r['what']} |")
    print()

    print("### Speedup of mxbi over each peer (peer time / mxbi time)")
    print()
    print("| mxbi case | threads | peer | speedup | target | met |")
    print("|---|---:|---|---:|---:|---|")
    for rep in runs:
        mr = by_name(rep)
        for m, p, target in PAIRS:
            if m not in mr or p not in pr:
                continue
            s = pr[p]["median_s"] / mr[m]["median_s"]
            tgt = f">= {target:g}x" if target else "(context)"
            met = verdict(s >= target) if target else "—"
            print(f"| `{m}` | {rep['threads']} | `{p}` | {s:.1f}x | {tgt} | {met} |")
    print()


if __name__ == "__main__":
    main()
