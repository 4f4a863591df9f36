"""PyTorch GEMMs as mxbi subjects (protocol mxbi-exec/1, through mxbi_runner.serve).

    mxbi bi run --subject 'exec:python3 examples/runner_torch.py matmul f32 --tf32 off' ...
    python3 examples/runner_torch.py OP DTYPE [--tf32 on|off]

OP      matmul: torch.matmul(a, b) with b [K, N] as given;
        linear: F.linear(a, w) with w = b.T made contiguous, [N, K] as nn.Linear stores it.
DTYPE   f32: f32 inputs, f32 output; bf16: bf16 inputs (job input must be bf16), bf16 output
        (answered as bits).
--tf32  whether f32 matmuls may use TF32 tensor cores; set explicitly either way
        (torch.backends.cuda.matmul.allow_tf32, and fp32_precision where this torch has it).
        Default off. bf16 runs record torch's allow_bf16_reduced_precision_reduction as found.

What the code implies for batch invariance: nothing by itself. Both ops hand the whole batch to
cuBLAS/cuBLASLt (one GEMM of M rows), whose heuristic picks the kernel, tile and split-K per
shape. So a row's bytes may change with M (the `batch` family) wherever the library changes
its algorithm, and the verdicts should follow docs/DEVICE.md's vendor table for the same
dtype: f32 (sgemm-like) fails `batch` from M = 2 on at N = K = 2048; bf16 passes there. Within
one M the algorithm is fixed and rows are independent: `content` and `position` pass, and the
library is deterministic for a fixed shape: `repeat` passes.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mxbi_runner import serve  # noqa: E402


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    try:  # newer torch: the precision knob that supersedes allow_tf32
        torch.backends.cuda.matmul.fp32_precision = "tf32" if on else "ieee"
    except (AttributeError, RuntimeError):
        pass


def main():
    args = sys.argv[1:]
    tf32 = "off"
    if "--tf32" in args:
        i = args.index("--tf32")
        tf32 = args[i + 1]
        del args[i : i + 2]
    if len(args) != 2 or args[0] not in ("matmul", "linear") or args[1] not in ("f32", "bf16") or tf32 not in ("on", "off"):
        sys.stderr.write("usage: runner_torch.py matmul|linear f32|bf16 [--tf32 on|off]\n")
        sys.exit(2)
    op, dtype = args
    set_tf32(tf32 == "on")
    dev = torch.device("cuda")
    tdt = torch.float32 if dtype == "f32" else torch.bfloat16
    rpr = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    name = f"torch-{torch.__version__}-{op}-{dtype}-tf32={tf32}"
    if dtype == "bf16":
        name += f"-bf16rpr={int(rpr)}"

    def gemm(a, b, job):
        if dtype == "bf16" and job["input"] != "bf16":
            raise ValueError(f"bf16 runner given {job['input']} inputs (run with --input bf16)")
        ta = torch.from_numpy(a).to(dev)
        tb = torch.from_numpy(b).to(dev)
        xa, xb = ta.to(tdt), tb.to(tdt)
        if not (torch.equal(xa.float(), ta) and torch.equal(xb.float(), tb)):
            raise ValueError(f"inputs are not exact in {dtype}")
        if op == "matmul":
            c = torch.matmul(xa, xb)
        else:
            c = F.linear(xa, xb.t().contiguous())
        torch.cuda.synchronize()
        if dtype == "f32":
            return c.cpu().numpy()
        return c.view(torch.int16).cpu().numpy(), "bf16"

    serve(gemm, name, with_job=True)


if __name__ == "__main__":
    main()
