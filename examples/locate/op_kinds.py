"""``mxbi.torch.locate`` on one op of each kind that it explains (docs/LOCATE.md,
"What is explained"), as small programs over a batch: a row sum, softmax,
log-softmax, RMSNorm (``F.rms_norm``), layer norm, attention, and on a GPU the
FP8 ``torch._scaled_mm``.

    python3 examples/locate/op_kinds.py [--device cuda] [--out DIR]

Prints each program's report (and writes ``op-kinds-DEVICE.txt`` and
``.json`` into DIR). Exit status 0 (the reports are findings, not checks).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

import mxbi.torch as mt

H = 1024  # the reduced length
SIZES = [1, 8, 64, 257]


def programs(device: str):
    gen = torch.Generator().manual_seed(5)
    w = (1 + 0.1 * torch.randn(H, generator=gen)).to(device)
    progs = {
        "sum": (lambda x: x.sum(-1), torch.float32),
        "softmax": (lambda x: torch.softmax(x, -1), torch.float32),
        "log_softmax": (lambda x: torch.log_softmax(x, -1), torch.float32),
        "rms_norm": (lambda x: F.rms_norm(x, (H,), w, 1e-6), torch.float32),
        "layer_norm": (lambda x: F.layer_norm(x, (H,)), torch.float32),
        "attention": (lambda x: F.scaled_dot_product_attention(x, x, x), torch.bfloat16),
    }
    if device.startswith("cuda"):
        w8 = (torch.randn(512, H, generator=gen) / 8).to(device).to(torch.float8_e4m3fn)
        one = torch.ones((), device=device)
        progs["scaled_mm"] = (lambda x: torch._scaled_mm(x.reshape(-1, H).to(torch.float8_e4m3fn), w8.t(),
                                                         scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                              torch.float32)
    return progs


def make(device: str, dtype: torch.dtype, attention: bool):
    def inputs(m: int):
        shape = (m, 4, 64, 64) if attention else (m, 16, H)
        x = torch.randn(shape, generator=torch.Generator().manual_seed(100 + m))
        x[0] = torch.randn(shape[1:], generator=torch.Generator().manual_seed(0))
        return (x.to(device=device, dtype=dtype),)

    return inputs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default=None)
    p.add_argument("--only", default=None, help="run only this program (sum, softmax, ..., scaled_mm)")
    a = p.parse_args()
    text, found = [], {}
    for name, (fn, dtype) in programs(a.device).items():
        if a.only and name != a.only:
            continue
        fn.__qualname__ = name
        try:
            r = mt.locate(fn, make(a.device, dtype, name == "attention"), SIZES)
        except Exception as e:  # a finding too: say what stopped it
            text.append(f"== {name}: {type(e).__name__}: {e}")
            found[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        text.append(f"== {name} ({dtype})\n{r}")
        found[name] = json.loads(r.to_json())
    out = "\n".join(text) + f"\n(torch {torch.__version__}, device {a.device})"
    print(out)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        dev = a.device.split(":")[0]
        stem = f"op-kinds-{dev}" + (f"-{a.only}" if a.only else "")
        with open(os.path.join(a.out, f"{stem}.txt"), "w") as f:
            f.write(out + "\n")
        with open(os.path.join(a.out, f"{stem}.json"), "w") as f:
            json.dump(found, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
