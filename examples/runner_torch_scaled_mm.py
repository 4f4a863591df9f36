"""torch._scaled_mm FP8 (e4m3 inputs, unit per-tensor scales, bf16 output) as an mxbi subject.

    mxbi bi run --subject 'exec:python3 examples/runner_torch_scaled_mm.py' --input e4m3 ...

A is cast to float8_e4m3fn row-major [M, K]; the weights w = B.T [N, K] row-major are cast
likewise and passed transposed (column-major [K, N]), the layout cuBLASLt's FP8 GEMM needs;
scale_a = scale_b = 1.0 (f32 scalars), out_dtype bfloat16. The casts are checked to be exact.
torch requires K and N to be multiples of 16; a job that breaks a torch rule is answered
with that error (one ERROR cell), never padded.

What the code implies: one cuBLASLt FP8 GEMM over the whole batch with per-tensor scales,
as docs/DEVICE.md's `Lt FP8 tensor scales` column (invariant over M 1..4096 at N = 2048,
K = 2048 and 7168). The heuristic may still change algorithm with M, so `batch` is what is
being measured; `content`, `position` and `repeat` should pass.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mxbi_runner import serve  # noqa: E402

dev = torch.device("cuda")
one = torch.ones((), device=dev, dtype=torch.float32)


def gemm(a, b, job):
    if job["input"] != "e4m3":
        raise ValueError(f"FP8 runner given {job['input']} inputs (run with --input e4m3)")
    ta = torch.from_numpy(a).to(dev)
    tw = torch.from_numpy(b.T.copy()).to(dev)
    a8 = ta.to(torch.float8_e4m3fn)
    w8 = tw.to(torch.float8_e4m3fn)
    if not (torch.equal(a8.float(), ta) and torch.equal(w8.float(), tw)):
        raise ValueError("inputs are not exact in e4m3")
    c = torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    torch.cuda.synchronize()
    return c.view(torch.int16).cpu().numpy(), "bf16"


serve(gemm, f"torch-{torch.__version__}-_scaled_mm-e4m3-unit-scales-bf16", with_job=True)
