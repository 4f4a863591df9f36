#!/usr/bin/env python3
"""Worker: run torchao `to_mx` (whichever torchao is importable: the
installed release, or a HEAD source tree put first on PYTHONPATH by
gen_mx.py) on a list of 32-element f32 blocks.

Usage: mx_torchao.py BLOCKS.json OUT.json
BLOCKS.json: [[name, [u32 bits x32]], ...]
OUT.json: {"torchao_file": ..., "version": ..., "results": [
            {"case", "format", "scale_mode", "input_f32", "scales", "codes"} | {..., "error"}]}
"""
import json
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torchao  # noqa: E402
from torchao.prototype.mx_formats.config import ScaleCalculationMode  # noqa: E402
from torchao.prototype.mx_formats.mx_tensor import to_mx  # noqa: E402

ELEM = {
    "mxfp8-e4m3": torch.float8_e4m3fn,
    "mxfp8-e5m2": torch.float8_e5m2,
    "mxfp6-e3m2": "fp6_e3m2",
    "mxfp6-e2m3": "fp6_e2m3",
    "mxfp4-e2m1": torch.float4_e2m1fn_x2,
}
MODES = {
    "floor": ScaleCalculationMode.FLOOR,
    "ceil": ScaleCalculationMode.CEIL,
    "even": ScaleCalculationMode.EVEN,
    "rceil": ScaleCalculationMode.RCEIL,
}


def unpack_fp4(packed):
    # torchao kernels.pack_uint4 layout: byte j = elem[2j] | elem[2j+1] << 4
    p = packed.view(torch.uint8).numpy().reshape(packed.shape[0], -1)
    out = np.empty((p.shape[0], p.shape[1] * 2), dtype=np.uint8)
    out[:, 0::2] = p & 0xF
    out[:, 1::2] = p >> 4
    return out


def run(blocks):
    names = [b[0] for b in blocks]
    bits = np.array([b[1] for b in blocks], dtype=np.uint32)
    x = torch.from_numpy(bits.view(np.float32).copy())
    results = []
    for fmt, elem in ELEM.items():
        for mode, m in MODES.items():
            try:
                s, d = to_mx(x.clone(), elem, 32, m)
                s = s.view(torch.uint8).reshape(len(blocks)).numpy()
                if fmt == "mxfp4-e2m1":
                    codes = unpack_fp4(d)
                else:
                    codes = d.view(torch.uint8).reshape(len(blocks), 32).numpy()
                for i, n in enumerate(names):
                    results.append({
                        "case": n, "format": fmt, "scale_mode": mode,
                        "scales": [f"{int(s[i]):02x}"],
                        "codes": [f"{int(c):02x}" for c in codes[i]],
                    })
            except Exception as e:  # whole batch failed: retry per block
                for i, n in enumerate(names):
                    try:
                        s, d = to_mx(x[i:i + 1].clone(), elem, 32, m)
                        s = s.view(torch.uint8).reshape(1).numpy()
                        codes = unpack_fp4(d) if fmt == "mxfp4-e2m1" else d.view(torch.uint8).reshape(1, 32).numpy()
                        results.append({"case": n, "format": fmt, "scale_mode": mode,
                                        "scales": [f"{int(s[0]):02x}"],
                                        "codes": [f"{int(c):02x}" for c in codes[0]]})
                    except Exception as e2:
                        results.append({"case": n, "format": fmt, "scale_mode": mode,
                                        "error": f"{type(e2).__name__}: {e2}"[:200]})
                print("batch failed", fmt, mode, repr(e)[:200], file=sys.stderr)
    return results


def main():
    blocks = json.load(open(sys.argv[1]))
    out = {"torchao_file": torchao.__file__, "version": getattr(torchao, "__version__", "?"),
           "torch": torch.__version__, "results": run(blocks)}
    json.dump(out, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
