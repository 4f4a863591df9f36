#!/usr/bin/env python3
"""Print the disagreement tables used in README.md ("Where oracles disagree").

Reads vectors/cast_*.tsv.gz and vectors/mx_cases.jsonl.gz; writes markdown to
stdout. Not needed by the Rust tests.
"""
import collections
import gzip
import json
import math
import os
import struct

V = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vectors")


def load_casts(oracle):
    d = collections.defaultdict(dict)
    for line in gzip.open(os.path.join(V, f"cast_{oracle}.tsv.gz"), "rt"):
        if line.startswith("#"):
            continue
        fmt, pol, inp, out = line.rstrip("\n").split("\t")
        d[(fmt, inp)][pol] = out
    return d


def val(inp):
    k, h = inp.split(":")
    if k == "f32":
        return struct.unpack("<f", struct.pack("<I", int(h, 16)))[0]
    return struct.unpack("<d", struct.pack("<Q", int(h, 16)))[0]


def classify(fmt_max, x):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    s = "-" if math.copysign(1, x) < 0 else "+"
    a = abs(x)
    if a == 0:
        return s + "0"
    if a > fmt_max:
        return s + "above max"
    if a < 1.1754943508222875e-38:
        return s + "f32-subnormal"
    return s + "in range"


FMT_MAX = {"e4m3": 448, "e5m2": 57344, "e3m2": 28, "e2m3": 7.5, "e2m1": 6, "e8m0": 2.0**127,
           "int8": 127 / 64, "bf16": 3.3895313892515355e38, "f16": 65504}


def cast_report():
    ml, to, gf = load_casts("ml_dtypes"), load_casts("torch"), load_casts("gfloat")
    print("Pattern letters: ml_dtypes astype / torch .to() / gfloat TiesToEven sat / gfloat TiesToEven nosat; equal letters = equal output, '-' = oracle has no such format/input. Examples show the outputs in the same order.\n")
    print("| format | input class | pattern | #inputs | examples (input -> ml/torch/gf-sat/gf-nosat) |")
    print("|---|---|---|---|---|")
    for fmt in ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0", "int8", "bf16", "f16"]:
        groups = collections.OrderedDict()
        inputs = {k for d in (ml, to, gf) for k in d if k[0] == fmt}
        keys = sorted(inputs, key=lambda k: (k[1][:3], val_key(k[1]), k[1]))
        for k in keys:
            a = ml.get(k, {}).get("astype", "-")
            b = to.get(k, {}).get("to", "-")
            c = gf.get(k, {}).get("gfloat:TiesToEven:sat", "-")
            d = gf.get(k, {}).get("gfloat:TiesToEven:nosat", "-")
            outs = [a, b, c, d]
            present = [o for o in outs if o != "-"]
            if len(set(present)) <= 1:
                continue
            x = val(k[1])
            cls = classify(FMT_MAX[fmt], x) + (" (f64 in)" if k[1].startswith("f64") else "")
            # equality pattern: letter per distinct output, '-' where absent
            letters, pat = {}, ""
            for o in outs:
                if o == "-":
                    pat += "-"
                else:
                    pat += letters.setdefault(o, "ABCD"[len(letters)])
            g = (cls, pat)
            if g not in groups:
                groups[g] = [0, []]
            groups[g][0] += 1
            if len(groups[g][1]) < 2:
                groups[g][1].append(f"`{k[1]}` ({x!r}) -> {a}/{b}/{c}/{d}")
        for (cls, pat), (n, ex) in groups.items():
            print(f"| {fmt} | {cls} | {pat} | {n} | {'; '.join(ex)} |")


def val_key(inp):
    x = val(inp)
    return (math.isnan(x), x if not math.isnan(x) else 0)


def mx_report():
    L = [json.loads(l) for l in gzip.open(os.path.join(V, "mx_cases.jsonl.gz"))]
    by = collections.defaultdict(dict)
    for o in L:
        if o.get("kind"):
            continue
        by[(o["case"], o["format"], o["scale_mode"])][o["oracle"]] = o

    def res(o):
        return (tuple(o["scales"] or ()), tuple(o["codes"] or ()), o.get("error"))

    oracles = sorted({o for d in by.values() for o in d})
    head = [o for o in oracles if o.startswith("torchao-head-") and o != "torchao-head-contract"][0]
    print("\n## MX blocks\n")
    print(f"Reference: `{head}` (torchao HEAD to_mx, equal to its own contract on all contract cases).\n")
    print("| oracle | scale_mode | compared | differ | differing cases (first 12) |")
    print("|---|---|---|---|---|")
    for o in oracles:
        if o == head:
            continue
        for mode in ("floor", "ceil", "even", "rceil"):
            n, bad = 0, []
            for k, d in by.items():
                if k[2] != mode or o not in d or head not in d:
                    continue
                n += 1
                if res(d[o]) != res(d[head]):
                    bad.append(f"{k[0]}/{k[1].split('-')[1]}")
            if n:
                shown = ", ".join(sorted(set(bad))[:12])
                print(f"| {o} | {mode} | {n} | {len(bad)} | {shown} |")


def scalar_report():
    """ml_dtypes scalar constructor from f64 vs astype(f64 array) vs gfloat."""
    ml, gf = load_casts("ml_dtypes"), load_casts("gfloat")
    print("\n### ml_dtypes f64 inputs: `astype` (array) vs `scalar` (constructor) vs gfloat TiesToEven\n")
    print("| format | #f64 inputs | astype != scalar | scalar != gfloat sat (non-NaN outputs) | example astype!=scalar |")
    print("|---|---|---|---|---|")
    for fmt in ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0"]:
        keys = [k for k in ml if k[0] == fmt and k[1].startswith("f64")]
        d1 = [k for k in keys if ml[k]["astype"] != ml[k]["scalar"]]
        d2 = [k for k in keys if ml[k]["scalar"] != gf[k].get("gfloat:TiesToEven:sat") and not math.isnan(val(k[1]))
              and not math.isinf(val(k[1])) and abs(val(k[1])) <= FMT_MAX[fmt]]
        ex = f"`{d1[0][1]}` -> {ml[d1[0]]['astype']} / {ml[d1[0]]['scalar']}" if d1 else ""
        print(f"| {fmt} | {len(keys)} | {len(d1)} | {len(d2)} | {ex} |")


def release_report():
    """The current ml_dtypes release against the one before (ml_dtypes@0.6)."""
    new, old = load_casts("ml_dtypes"), load_casts("ml_dtypes@0.6")
    assert new.keys() == old.keys()
    print("\n### ml_dtypes releases: `cast_ml_dtypes` (current) vs `cast_ml_dtypes@0.6`\n")
    print("| format | policy | input | #inputs | differ | examples (input -> 0.6 / current) |")
    print("|---|---|---|---|---|---|")
    groups = collections.OrderedDict()
    for k in sorted(new, key=lambda k: (k[0], k[1][:3], val_key(k[1]))):
        for pol in sorted(new[k]):
            g = groups.setdefault((k[0], pol, k[1][:3]), [0, []])
            g[0] += 1
            if new[k][pol] != old[k][pol]:
                g[1].append(f"`{k[1]}` -> {old[k][pol]} / {new[k][pol]}")
    for (fmt, pol, kind), (n, diff) in groups.items():
        print(f"| {fmt} | {pol} | {kind} | {n} | {len(diff)} | {'; '.join(diff[:2])} |")


if __name__ == "__main__":
    print("# Oracle disagreements (generated by reference/oracles/report.py; see README.md)\n")
    print("## Scalar casts (f32 and f64 boundary sets)\n")
    cast_report()
    scalar_report()
    release_report()
    mx_report()
