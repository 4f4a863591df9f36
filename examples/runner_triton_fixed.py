"""A Triton matmul with one fixed tile (BM x BN x BK = 64 x 64 x 32) as an mxbi subject.

    mxbi bi run --subject 'exec:python3 examples/runner_triton_fixed.py' --input bf16 ...

A [M, K] and B [K, N] are cast to bf16 (checked exact); each program computes one 64 x 64
tile of C in f32: acc starts at +0 and takes tl.dot(a_chunk, b_chunk, acc) for k0 = 0, BK,
2 BK, ... in that order; C is stored as f32. No autotuning, no split-K, no atomics.

What the code implies for batch invariance: C[i, j] is a function of row i of A, column j of
B and K only. M decides how many tiles the grid has; rows past M are masked to zero and are
never added into another row's sum; the K loop and the tl.dot chain are the same for every
tile. Triton specialises the compiled kernel on M (M == 1, M divisible by 16), which changes
address arithmetic and masks, not the accumulation chain. So every family must pass:
`batch`, `position`, `content` BI_PASS at every M, and `repeat` (deterministic) too. Any
failure is a finding against this reading.
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mxbi_runner import serve  # noqa: E402

BM, BN, BK = 64, 64, 32


@triton.jit
def matmul_fixed(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + rn[None, :], mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


dev = torch.device("cuda")


def gemm(a, b, job):
    if job["input"] != "bf16":
        raise ValueError(f"bf16 kernel given {job['input']} inputs (run with --input bf16)")
    ta, tb = torch.from_numpy(a).to(dev), torch.from_numpy(b).to(dev)
    xa, xb = ta.to(torch.bfloat16).contiguous(), tb.to(torch.bfloat16).contiguous()
    if not (torch.equal(xa.float(), ta) and torch.equal(xb.float(), tb)):
        raise ValueError("inputs are not exact in bf16")
    m, k = xa.shape
    n = xb.shape[1]
    c = torch.empty((m, n), device=dev, dtype=torch.float32)
    matmul_fixed[(triton.cdiv(m, BM), triton.cdiv(n, BN))](xa, xb, c, m, n, k, BM=BM, BN=BN, BK=BK)
    torch.cuda.synchronize()
    return c.cpu().numpy()


serve(gemm, f"triton-{triton.__version__}-fixed-{BM}x{BN}x{BK}-bf16-f32acc", with_job=True)
