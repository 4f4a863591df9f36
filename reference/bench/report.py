#!/usr/bin/env python3
"""Markdown tables from paired.py's results.json (see docs/PERFORMANCE.md).

Usage: report.py RESULTS.json

Every ratio is the median of the per-round ratios of paired rounds, with
their min and max; a target is judged at the median ("held in every round"
says whether the worst round met it too).
"""
import json
import sys


def ms(s):
    return f"{s * 1e3:.2f}"


def verdict(ok):
    return "**yes**" if ok else "**no**"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    r = json.load(open(sys.argv[1]))
    hello = r["mxbi"]
    n = r["elements"]
    cases = {c["name"]: c for c in hello["cases"]}
    vers = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
    print(
        f"N = {n} f32 elements, shape {r['shape']}, block 32 along the last axis; GEMM operands: {r['gemm_input']}. "
        f"{r['rounds']} paired rounds per comparison, each side timed for at least {r['window_s']} s per round "
        f"(mean time per call), after one untimed round."
    )
    print()
    print(f"- mxbi {hello['version']}, FP8 loops compiled for {hello['simd']}; Python {r['python']}: {vers}")
    for b in r["blas"]:
        print(f"- BLAS: {b.get('internal_api')} {b.get('version')}, kernel {b.get('architecture')}")
    for k, v in r["skipped"].items():
        print(f"- skipped: {k}: {v}")
    print(f"- load average (1 min): {r['load1_before']:.2f} before, {r['load1_after']:.2f} after; "
          f"measuring took {r['seconds']:.0f} s")
    print()

    print("### Same work")
    print()
    print("| mxbi case | peer | bytes compared | identical |")
    print("|---|---|---:|---|")
    for c in r["same_bytes"]:
        print(f"| `{c['mxbi']}` | `{c['peer']}` | {c['bytes']} | {verdict(c['equal'])} |")
    print()

    print("### mxbi vs its peers (peer time / mxbi time, higher is better)")
    print()
    print("| threads | mxbi case | peer | mxbi ms | peer ms | ratio (median) | min – max | target | met | held in every round |")
    print("|---:|---|---|---:|---:|---:|---|---:|---|---|")
    for p in r["peer_pairs"]:
        q, t = p["ratio"], p["target"]
        fmt = (lambda v: f"{v:.2f}") if p["mxbi"].startswith("gemm") else (lambda v: f"{v:.1f}x")
        tgt = f">= {fmt(t)}" if t else "(context)"
        met = verdict(q["median"] >= t) if t else "—"
        every = verdict(q["min"] >= t) if t else "—"
        print(
            f"| {p['threads']} | `{p['mxbi']}` | `{p['peer']}` | {ms(p['mxbi_s'])} | {ms(p['peer_s'])} | "
            f"**{fmt(q['median'])}** | {fmt(q['min'])} – {fmt(q['max'])} | {tgt} | {met} | {every} |"
        )
    gemm = [p for p in r["peer_pairs"] if p["mxbi"].startswith("gemm")]
    if gemm:
        print()
        print("For the GEMM row the ratio is mxbi's throughput as a fraction of the BLAS sgemm's.")
        for p in gemm:
            flop = cases[p["mxbi"]]["flop"]
            print(
                f"- {p['threads']} thread(s): mxbi {flop / p['mxbi_s'] / 1e9:.1f} GFLOP/s, "
                f"numpy {flop / p['peer_s'] / 1e9:.1f} GFLOP/s (medians)"
            )
    print()

    print("### mxbi vs memcpy of the same bytes (case time / memcpy time, lower is better)")
    print()
    print("| threads | case | median ms | Melem/s | GB/s (in+out) | time / memcpy (median) | min – max | <= 2x memcpy |")
    print("|---:|---|---:|---:|---:|---:|---|---|")
    for p in r["memcpy_pairs"]:
        q, t, s = p["ratio"], p["target"], p["mxbi_s"]
        met = verdict(q["median"] <= t) if t else "(context)"
        print(
            f"| {p['threads']} | `{p['mxbi']}` | {ms(s)} | {n / s / 1e6:.0f} | {cases[p['mxbi']]['bytes'] / s / 1e9:.2f} | "
            f"**{q['median']:.2f}** | {q['min']:.2f} – {q['max']:.2f} | {met} |"
        )
    print()
    print("memcpy itself (median of the paired memcpy windows): " + ", ".join(
        f"{p['threads']} thread(s) {ms(p['memcpy_s'])} ms" for p in r["memcpy_pairs"] if p["mxbi"] == "cast_e4m3_ml_dtypes"
    ))
    print()

    print("### mxbi alone")
    print()
    print("| threads | case | median ms | min – max ms | figure | target | met |")
    print("|---:|---|---:|---|---:|---:|---|")
    for s in r["solo"]:
        q = s["time"]
        if s["target_kind"] == "min_gflops":
            flop = cases[s["mxbi"]]["flop"]
            fig = f"{flop / q['median'] / 1e9:.2f} GFLOP/s"
            tgt, ok = f">= {s['target']:g} GFLOP/s", flop / q["median"] / 1e9 >= s["target"]
        else:
            fig = f"{q['median'] * 1e3:.3f} ms"
            tgt, ok = f"< {s['target']:g} ms", q["median"] * 1e3 < s["target"]
        print(
            f"| {s['threads']} | `{s['mxbi']}` | {ms(q['median'])} | {ms(q['min'])} – {ms(q['max'])} | {fig} | {tgt} | "
            f"{verdict(ok)} |"
        )
    print()
    print("What each case and peer times:")
    print()
    used = {p["mxbi"] for p in r["peer_pairs"] + r["memcpy_pairs"]} | {s["mxbi"] for s in r["solo"]} | {"memcpy"}
    for c in hello["cases"]:
        if c["name"] in used:
            print(f"- `{c['name']}`: {c['what']}")
    for k, v in r["peer_what"].items():
        print(f"- `{k}`: {v}")


if __name__ == "__main__":
    main()
