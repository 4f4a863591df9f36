#!/usr/bin/env python3
"""decode.tsv: every code of every format -> value as f32 bits.

Columns (TAB separated, no header): oracle format code_hex value_f32_hex
value is 8 lowercase hex digits of the f32 bits, or the word `nan`.
The file opens with comment lines naming the oracles' installed releases and
the command (common.release_header).
"""
import math
import sys

import numpy as np

import common as C


def ml_decode(fmt):
    dt = C.ml_dtype(fmt)
    n = 1 << C.NBITS[fmt]
    if C.NBITS[fmt] == 16:
        codes = np.arange(n, dtype=np.uint16)
    else:
        codes = np.arange(n, dtype=np.uint8)
    vals = codes.view(dt).astype(np.float32)
    return [float(v) for v in vals]


def gf_decode(fmt):
    import gfloat

    fi = C.gfloat_fi(fmt)
    return [gfloat.decode_float(fi, c).fval for c in range(1 << C.NBITS[fmt])]


def fmt_val(v):
    if math.isnan(v):
        return "nan"
    f = np.float32(v)
    assert float(f) == v or math.isinf(v), (v, f)
    return f"{C.f32_bits(float(f)):08x}"


def main(out):
    lines = C.release_header(["ml_dtypes", "gfloat"], sys.argv)
    tables = {}
    for fmt in ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0", "bf16", "f16"]:
        tables[("ml_dtypes", fmt)] = ml_decode(fmt)
    for fmt in C.ALL_FORMATS:
        tables[("gfloat", fmt)] = gf_decode(fmt)
    for (oracle, fmt), vals in tables.items():
        for c, v in enumerate(vals):
            lines.append(f"{oracle}\t{fmt}\t{C.code_hex(fmt, c)}\t{fmt_val(v)}\n")
    with open(out, "w") as f:
        f.writelines(lines)
    # disagreement report
    for fmt in ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0", "bf16", "f16"]:
        a, b = tables[("ml_dtypes", fmt)], tables[("gfloat", fmt)]
        diffs = [c for c in range(len(a)) if fmt_val(a[c]) != fmt_val(b[c])]
        print(f"decode {fmt}: {len(diffs)} ml_dtypes/gfloat differences", [C.code_hex(fmt, c) for c in diffs[:8]])


if __name__ == "__main__":
    main(sys.argv[1])
