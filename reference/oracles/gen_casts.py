#!/usr/bin/env python3
"""cast_<oracle>.tsv.gz: boundary-set casts of f32 / f64 inputs.

Columns (TAB separated, no header): format policy input output
  input : f32:XXXXXXXX (f32 bits) or f64:XXXXXXXXXXXXXXXX (f64 bits), lowercase hex
  output: the code in hex (2 digits for <=8-bit formats, 4 for bf16/f16) or ERR
The file opens with comment lines naming the oracle's installed release and
the command (common.release_header).
Usage: gen_casts.py ml_dtypes|torch|gfloat OUT.tsv.gz
"""
import gzip
import math
import sys

import numpy as np

import common as C

ML_FORMATS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0", "bf16", "f16"]
TORCH_FORMATS = ["e4m3", "e5m2", "e8m0", "bf16", "f16"]
GF_FORMATS = C.ALL_FORMATS  # includes int8
# f64 inputs: every format of ml_dtypes and torch; gfloat's bf16/f16 are cast
# from f32 only (its TiesToAway f64 bug is modelled for the <=8-bit formats).
F64_FORMATS = {"ml_dtypes": ML_FORMATS, "torch": TORCH_FORMATS, "gfloat": C.SMALL_FORMATS}
GF_MODES = ["TiesToEven", "TiesToAway", "TowardZero", "TowardPositive", "TowardNegative"]


def f32_array(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def f64_array(bits):
    return np.array(bits, dtype=np.uint64).view(np.float64)


def ml_cast(fmt, arr):
    out = arr.astype(C.ml_dtype(fmt))
    if C.NBITS[fmt] == 16:
        return [int(x) for x in out.view(np.uint16)]
    return [int(x) for x in out.view(np.uint8)]


def ml_scalar(fmt, values):
    dt = C.ml_dtype(fmt)
    width = np.uint16 if C.NBITS[fmt] == 16 else np.uint8
    out = []
    for v in values:
        try:
            out.append(int(np.array([dt(v)]).view(width)[0]))
        except Exception:
            out.append(None)
    return out


def torch_cast(fmt, arr):
    import torch

    dt = {
        "e4m3": torch.float8_e4m3fn,
        "e5m2": torch.float8_e5m2,
        "e8m0": torch.float8_e8m0fnu,
        "bf16": torch.bfloat16,
        "f16": torch.float16,
    }[fmt]
    out = torch.from_numpy(arr.copy()).to(dt)
    if C.NBITS[fmt] == 16:
        return [int(x) & 0xFFFF for x in out.view(torch.int16).tolist()]
    return [int(x) for x in out.view(torch.uint8).tolist()]


def gf_cast(fmt, values, mode, sat):
    import gfloat

    fi = C.gfloat_fi(fmt)
    rnd = getattr(gfloat.RoundMode, mode)
    res = []
    for v in values:
        try:
            r = gfloat.round_float(fi, float(v), rnd, sat)
            res.append(gfloat.encode_float(fi, r))
        except Exception:
            res.append(None)
    return res


def emit(lines, fmt, policy, prefix, bits, codes, width):
    for b, c in zip(bits, codes):
        out = "ERR" if c is None else C.code_hex(fmt, c)
        lines.append(f"{fmt}\t{policy}\t{prefix}:{b:0{width}x}\t{out}\n")


def main(oracle, out):
    lines = C.release_header([oracle], sys.argv)
    fmts = {"ml_dtypes": ML_FORMATS, "torch": TORCH_FORMATS, "gfloat": GF_FORMATS}[oracle]
    for fmt in fmts:
        b32 = C.f32_input_set(fmt)
        b64 = C.f64_input_set(fmt) if fmt in F64_FORMATS[oracle] else []
        a32, a64 = f32_array(b32), f64_array(b64)
        if oracle == "ml_dtypes":
            emit(lines, fmt, "astype", "f32", b32, ml_cast(fmt, a32), 8)
            if b64:
                emit(lines, fmt, "astype", "f64", b64, ml_cast(fmt, a64), 16)
                # scalar constructor from a Python float (f64): no f32 detour
                emit(lines, fmt, "scalar", "f64", b64, ml_scalar(fmt, a64.tolist()), 16)
        elif oracle == "torch":
            emit(lines, fmt, "to", "f32", b32, torch_cast(fmt, a32), 8)
            if b64:
                emit(lines, fmt, "to", "f64", b64, torch_cast(fmt, a64), 16)
        else:
            for mode in GF_MODES:
                for sat in (True, False):
                    pol = f"gfloat:{mode}:{'sat' if sat else 'nosat'}"
                    emit(lines, fmt, pol, "f32", b32, gf_cast(fmt, a32.tolist(), mode, sat), 8)
                    if b64:
                        emit(lines, fmt, pol, "f64", b64, gf_cast(fmt, a64.tolist(), mode, sat), 16)
        print(f"{oracle} {fmt}: {len(b32)} f32 + {len(b64)} f64 inputs", flush=True)
    # deterministic gzip (mtime 0, no file name)
    with open(out, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as g:
            g.write("".join(lines).encode())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
