"""A Triton matmul whose split-K depends on M, as an mxbi subject.

    mxbi bi run --subject 'exec:python3 examples/runner_triton_splitk.py' --input bf16 ...

The host picks S = split_k(M): 4 parts when M < SPLIT_BELOW (64), else 1, the way tuned
configurations split K when a small batch has too few tiles to fill the GPU. Part s of each
64 x 64 tile accumulates k in [s*ceil(K/S), (s+1)*ceil(K/S)) exactly as the fixed-tile kernel
does (acc from +0, tl.dot chained over BK = 32 chunks, bf16 inputs, f32 accumulation) into a
workspace [S, M, N]; a second kernel adds the parts serially, ((p0 + p1) + p2) + p3, and
stores f32. With S = 1 the part is written to C directly. No atomics.

What the code implies for batch invariance:
- `batch` (baseline: the first M listed): a row's bytes depend on M only through S. With a
  baseline below 64 (e.g. M = 1), every M < 64 passes and every M >= 64 must fail (one chain
  of K/BK dots vs four partial chains added afterwards round differently); with a baseline
  of 64 or more it is the other way round.
- `content`, `position`: pass at every M (no row reads another row; S is fixed within M).
- `repeat`: passes (the reduction order is fixed, nothing is atomic).
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mxbi_runner import serve  # noqa: E402

BM, BN, BK = 64, 64, 32
SPLIT_BELOW = 64
SPLIT = 4


def split_k(m):
    return SPLIT if m < SPLIT_BELOW else 1


@triton.jit
def matmul_part(a_ptr, b_ptr, ws_ptr, M, N, K, KPART, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    s = tl.program_id(2)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    k_lo = s * KPART
    k_hi = tl.minimum(k_lo + KPART, K)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BK):
        ks = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < k_hi), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + rn[None, :], mask=(ks[:, None] < k_hi) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    out = ws_ptr + s * M * N + rm[:, None] * N + rn[None, :]
    tl.store(out, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def reduce_parts(ws_ptr, c_ptr, MN, S: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.load(ws_ptr + offs, mask=mask, other=0.0)
    for s in tl.static_range(1, S):
        acc = acc + tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc, mask=mask)


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
    s = split_k(m)
    kpart = triton.cdiv(k, s)
    c = torch.empty((m, n), device=dev, dtype=torch.float32)
    ws = c if s == 1 else torch.empty((s, m, n), device=dev, dtype=torch.float32)
    matmul_part[(triton.cdiv(m, BM), triton.cdiv(n, BN), s)](xa, xb, ws, m, n, k, kpart, BM=BM, BN=BN, BK=BK)
    if s > 1:
        block = 1024
        reduce_parts[(triton.cdiv(m * n, block),)](ws, c, m * n, S=s, BLOCK=block)
    torch.cuda.synchronize()
    return c.cpu().numpy()


serve(
    gemm,
    f"triton-{triton.__version__}-splitk{SPLIT}-below-m{SPLIT_BELOW}-{BM}x{BN}x{BK}-bf16-f32acc",
    with_job=True,
)
