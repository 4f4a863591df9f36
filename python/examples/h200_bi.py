"""Batch invariance of real GPU kernels through the Python API, beside the
same check through the CLI's `exec:` runner (issue 15, item 5).

Kernels (torch and Triton, on one GPU):
  matmul-f32      torch.matmul, float32 (TF32 off)
  matmul-bf16     torch.matmul, bf16 in and out
  linear-bf16     torch.nn.functional.linear, bf16 (weights [N, K])
  scaled-mm-fp8   torch._scaled_mm, e4m3 in (unit scales), bf16 out
  triton-fixed    a Triton matmul with one tile config (64x64x32, no split-K), bf16 in, f32 out
  triton-splitk   the same kernel with SPLIT_K = 4 for M <= 64, else 1 (split chosen by M)

For each kernel the script runs `mxbi.bi.check` in-process (the kernel is a
Python callable; inputs go to the GPU and outputs come back through
`mxbi.torch.on_device`), times it, and, when the `mxbi` binary understands
`exec:`, runs the same check through `mxbi bi run --subject exec:...` with
this script as the runner, times that, and compares the two reports cell by
cell (ids, verdicts and byte statistics). Reports and a summary go to OUTDIR.

    pip install ./python                      # from the repository root
    python python/examples/h200_bi.py OUTDIR [--mxbi target/release/mxbi] [--k 4096 --n 512]
    python python/examples/h200_bi.py OUTDIR --kernels matmul-bf16,triton-splitk --m 1,64,65,128

As a runner (what `exec:` starts): `python h200_bi.py --serve KERNEL`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


# ------------------------------------------------------------------ kernels


def _triton_kernels():
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scs, scm, scn, k_per_split,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        pid_s = tl.program_id(2)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        k0 = pid_s * k_per_split
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(k0, k0 + k_per_split, BK):
            ks = kk + rk
            a = tl.load(a_ptr + rm[:, None] * sam + ks[None, :] * sak,
                        mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
            b = tl.load(b_ptr + ks[:, None] * sbk + rn[None, :] * sbn,
                        mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        c = c_ptr + pid_s * scs + rm[:, None] * scm + rn[None, :] * scn
        tl.store(c, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    def mm(a, b, split):
        m, k = a.shape
        n = b.shape[1]
        bm, bn, bk = 64, 64, 32
        kps = triton.cdiv(triton.cdiv(k, split), bk) * bk
        part = torch.empty((split, m, n), device=a.device, dtype=torch.float32)
        grid = (triton.cdiv(m, bm), triton.cdiv(n, bn), split)
        _mm[grid](a, b, part, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                  part.stride(0), part.stride(1), part.stride(2), kps, BM=bm, BN=bn, BK=bk)
        out = part[0]
        for s in range(1, split):  # a fixed, serial reduction of the partial sums
            out = out + part[s]
        return out

    def fixed(a, b):
        return mm(a, b, 1)

    def splitk(a, b):
        return mm(a, b, 4 if a.shape[0] <= 64 else 1)

    return fixed, splitk


@functools.lru_cache(maxsize=None)
def kernels():
    """name -> (fn on torch tensors, input dtype name, torch input dtype)."""
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def matmul(a, b):
        return torch.matmul(a, b)

    def linear(a, b):
        return F.linear(a, b.t().contiguous())

    def scaled_mm(a, b):
        one = torch.ones((), device=a.device, dtype=torch.float32)
        return torch._scaled_mm(a, b.t().contiguous().t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    ks = {
        "matmul-f32": (matmul, "f32", torch.float32),
        "matmul-bf16": (matmul, "bf16", torch.bfloat16),
        "linear-bf16": (linear, "bf16", torch.bfloat16),
        "scaled-mm-fp8": (scaled_mm, "e4m3", torch.float8_e4m3fn),
    }
    try:
        fixed, splitk = _triton_kernels()
        ks["triton-fixed"] = (fixed, "bf16", torch.bfloat16)
        ks["triton-splitk"] = (splitk, "bf16", torch.bfloat16)
    except Exception as e:  # no Triton: the torch kernels still run
        print(f"triton kernels unavailable: {type(e).__name__}: {e}", file=sys.stderr)
    return ks


def subject(name):
    """The kernel as a numpy-in, numpy-out callable named after it."""
    import mxbi.torch

    fn, _, dtype = kernels()[name]
    call = mxbi.torch.on_device(fn, device="cuda", dtype=dtype)
    call.__qualname__ = name
    return call


# ------------------------------------------------------------------ runner mode


def serve(name):
    sys.path.insert(0, str(ROOT / "examples"))
    from mxbi_runner import serve as serve_jobs

    serve_jobs(subject(name), f"h200_bi:{name}")


# ------------------------------------------------------------------ the comparison


def cells_key(report_json):
    keep = ("id", "verdict", "rows_differing", "elements_differing", "bytes_differing", "columns_differing", "max_ulp")
    return [{k: c.get(k) for k in keep} for c in report_json["cells"]]


def has_exec(mxbi_bin):
    p = subprocess.run([mxbi_bin, "bi", "run", "--subject", "exec:true", "--family", "batch", "--m", "1,2",
                        "--k", "2", "--n", "1"], capture_output=True, text=True)
    return "unknown kind 'exec'" not in p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--serve", metavar="KERNEL", help="run as an mxbi-exec/1 runner for KERNEL")
    ap.add_argument("--kernels", default="", help="comma-separated kernel names (default: all)")
    ap.add_argument("--families", default="batch,position,content,repeat")
    ap.add_argument("--m", default="edges", help="batch sizes, comma-separated, or edges")
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mxbi", default=str(ROOT / "target" / "release" / "mxbi"), help="the mxbi binary (exec path)")
    ap.add_argument("--no-exec", action="store_true", help="only the in-process path")
    args = ap.parse_args()
    if args.serve:
        return serve(args.serve)
    if not args.outdir:
        ap.error("OUTDIR is required")

    import numpy as np

    import mxbi

    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    names = [k for k in args.kernels.split(",") if k] or list(kernels())
    ms = None if args.m == "edges" else [int(x) for x in args.m.split(",")]
    do_exec = not args.no_exec and os.path.exists(args.mxbi) and has_exec(args.mxbi)
    if not args.no_exec and not do_exec:
        print(f"exec path skipped: {args.mxbi} missing or without exec:", file=sys.stderr)
    rows = []
    for name in names:
        _, input_type, _ = kernels()[name]
        fn = subject(name)
        fn(np.ones((2, args.k), np.float32), np.ones((args.k, args.n), np.float32))  # warm-up: JIT, library handles
        t0 = time.perf_counter()
        r = mxbi.bi.check(fn, families=args.families, k=args.k, n=args.n, m=ms if ms else "edges",
                          input=input_type, seed=args.seed, name=f"python:{name}")
        t_py = time.perf_counter() - t0
        (out / f"{name}.python.json").write_text(r.to_json())
        row = {"kernel": name, "input": input_type, "cells": len(r.cells), "verdicts": r.counts,
               "exit_code": r.exit_code, "python_s": round(t_py, 2)}
        print(f"== {name}: in-process {t_py:.1f} s, {r.summary_line()}", flush=True)
        print(str(r), flush=True)
        if r.failures():
            try:
                print(mxbi.explain.explain_cell(fn, r), flush=True)
            except Exception as e:
                print(f"(no explanation: {e})", flush=True)
        if do_exec:
            cmd = f"exec:{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).resolve()))} --serve {name}"
            ms_arg = "edges" if ms is None else ",".join(map(str, ms))
            t0 = time.perf_counter()
            p = subprocess.run([args.mxbi, "bi", "run", "--subject", cmd, "--family", args.families, "--m", ms_arg,
                                "--k", str(args.k), "--n", str(args.n), "--input", input_type,
                                "--seed", str(args.seed), "--json", str(out / f"{name}.exec.json")],
                               capture_output=True, text=True)
            t_exec = time.perf_counter() - t0
            row["exec_s"] = round(t_exec, 2)
            row["exec_exit_code"] = p.returncode
            if (out / f"{name}.exec.json").exists():
                e = json.loads((out / f"{name}.exec.json").read_text())
                row["same_cells"] = cells_key(e) == cells_key(json.loads(r.to_json()))
            else:
                row["same_cells"] = None
                row["exec_error"] = p.stderr.strip()[-500:]
            print(f"   exec: {t_exec:.1f} s, exit {p.returncode}, same cells: {row['same_cells']}", flush=True)
        rows.append(row)
    (out / "summary.json").write_text(json.dumps(rows, indent=2))
    lines = ["| kernel | input | cells | verdicts | in-process s | exec: s | same cells |", "|---|---|---:|---|---:|---:|---|"]
    for r in rows:
        v = ", ".join(f"{n} {k}" for k, n in r["verdicts"].items() if n)
        lines.append(f"| {r['kernel']} | {r['input']} | {r['cells']} | {v} | {r['python_s']} | "
                     f"{r.get('exec_s', '-')} | {r.get('same_cells', '-')} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
