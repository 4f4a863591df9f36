"""`mxbi.reveal` against FPRev on one GPU kernel, side by side in one process
(issue 26, item 2; the table in docs/PERFORMANCE.md).

    python3 reference/bench/reveal_fprev.py --fprev DIR OUT.jsonl [--kernel triton-f32]
        [--shapes 1x64,64x64,4096x64,1x4096,64x4096,4096x4096] [--k 4096] [--rounds 3]

DIR holds FPRev's unmodified `fprev.py` (github.com/peichenxie/FPRev; it
imports `graphviz`, the pure-Python package, which must be importable too).
Both tools reveal the accumulation order of output (0, 0) of the same
kernel at the same launch shape [M, K] x [K, N], in the same process, on an
idle GPU, one after the other, each after one untimed warm-up call and a
`gc.collect()` (neither pays for a collection of the garbage the other
left):

  FPRev   `fprev.fprev(impl)` with an `AccumImpl` written as its own
          TorchGEMM is (experiments/accumimpls/torch.py): A and B all ones
          on the GPU, a mask sets A[0, k] to +-2^127, `get_l` reads C[0, 0]
          (one `.item()`: one launch and one scalar back per call). Timed:
          the `fprev` call. Counted: `get_l` calls (= launches).
  mxbi    `mxbi.reveal(fn, M, K, N)` with `fn(a, b)` the same kernel on numpy
          arrays (uploaded, run, the whole C read back: the subject
          interface's contract). Timed: the `reveal` call (probe design,
          every launch, the tree check, shape matching, naming and the
          verification on random inputs). Counted: `Revealed.launches`.
          `--subject plain` (the default) moves the numpy arrays with
          `torch.from_numpy(x).to(DEV)`; `--subject on_device` wraps the
          kernel with `mxbi.torch.on_device` (pinned uploads).

Kernels: `triton-f32` (a Triton f32 matmul, one 64 x 64 x 32 tile per
program, `tl.dot(..., input_precision="ieee")`, acc from +0, K in order:
the shape of the issue's measurement) and `torch-f32` (torch.matmul, TF32
off: cuBLAS's choice per shape). One JSON line per (kernel, shape, round)
in OUT.jsonl; the medians per shape are printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

DEV = torch.device("cuda")


def settle():
    """Before a timed section: the garbage of what ran before collected,
    the GPU idle."""
    gc.collect()
    sync()


def sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def triton_f32():
    import triton
    import triton.language as tl

    bm, bn, bk = 64, 64, 32

    @triton.jit
    def kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
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
            acc = tl.dot(a, b, acc, input_precision="ieee")
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), device=DEV, dtype=torch.float32)
        kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](a, b, c, m, n, k, BM=bm, BN=bn, BK=bk)
        return c

    return mm, f"triton-{triton.__version__}-f32-ieee-64x64x32"


def torch_f32():
    torch.backends.cuda.matmul.allow_tf32 = False
    return (lambda a, b: a @ b), f"torch-{torch.__version__}-matmul-f32-tf32off"


KERNELS = {"triton-f32": triton_f32, "torch-f32": torch_f32}

# narrow outputs: torch.matmul with bf16 / f16 inputs and output (mxbi only:
# FPRev's probes count units in the output, which a 16-bit output cannot
# hold past 256 / 2048 of them)
NARROW = {"bf16": torch.bfloat16, "f16": torch.float16}


def keep_tree(trees, name: str, m: int, k: int, n: int, r) -> None:
    """Writes the recovered tree (display and listing, `Revealed.shape`) of
    a reveal to `trees/NAME-MxKxN.txt` (NAME's other characters than
    letters, digits and `._-` as `_`) when `trees` is a folder (first
    round only: every round recovers the same tree or reports why not)."""
    if trees is None:
        return
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    path = os.path.join(trees, f"{safe}-{m}x{k}x{n}.txt")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(r.shape)


def narrow_gemv(dtype: str, k: int, n: int, rounds: int, mxbi, how: str = "plain", trees=None) -> list:
    t = NARROW[dtype]

    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        c = torch.from_numpy(a).to(DEV).to(t) @ torch.from_numpy(b).to(DEV).to(t)
        return c.float().cpu().numpy()  # widened exactly: the output's bytes

    if how == "on_device":
        import mxbi.torch

        fn = mxbi.torch.on_device(lambda a, b: a @ b, device=DEV, dtype=t, synchronize=False)

    name = f"torch-{torch.__version__}-matmul-{dtype}"
    fn(np.ones((1, k), np.float32), np.ones((k, n), np.float32))
    rows = []
    for rnd in range(rounds):
        settle()
        t0 = time.perf_counter()
        r = mxbi.reveal(fn, 1, k, n, input=dtype, name=name)
        keep_tree(trees, name, 1, k, n, r)
        rows.append(
            {
                "kernel": name,
                "m": 1,
                "k": k,
                "n": n,
                "mxbi_s": round(time.perf_counter() - t0, 4),
                "mxbi_launches": r.launches,
                "mxbi_grid_launches": r.grid_launches,
                "mxbi_timings": [[w, round(t, 4)] for w, t in r.timings],
                "mxbi_probes": r.probes,
                "mxbi_disagreements": r.disagreements,
                "mxbi_order": r.order,
                "subject": how,
                "round": rnd,
            }
        )
    return rows


def fprev_backend(fprev_mod, mm, m: int, k: int, n: int):
    """FPRev's AccumImpl for the kernel, as its TorchGEMM: element (0, 0)."""

    class Gemm(fprev_mod.AccumImpl):
        def __init__(self):
            self.n_summands = k
            self.a = torch.ones([m, k], dtype=torch.float32, device=DEV)
            self.b = torch.ones([k, n], dtype=torch.float32, device=DEV)
            self.calls = 0

        def set_mask(self, i: int, negative: bool = False):
            self.a[0, i] = -(2.0**127) if negative else 2.0**127

        def reset_mask(self, i: int):
            self.a[0, i] = 1

        def get_l(self) -> int:
            self.calls += 1
            return self.n_summands - int(mm(self.a, self.b)[0, 0].item())

    return Gemm()


def subject(mm, how: str):
    """The kernel as mxbi's subject: `plain`, numpy arrays moved with
    `torch.from_numpy(x).to(DEV)` (pageable uploads); `on_device`, through
    `mxbi.torch.on_device` (pinned uploads of large operands)."""
    if how == "on_device":
        import mxbi.torch

        return mxbi.torch.on_device(mm, device=DEV, synchronize=False)

    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        c = mm(torch.from_numpy(a).to(DEV), torch.from_numpy(b).to(DEV))
        return c.cpu().numpy()

    return fn


def one_round(fprev_mod, mxbi, mm, name: str, m: int, k: int, n: int, how: str = "plain", trees=None) -> dict:
    impl = fprev_backend(fprev_mod, mm, m, k, n)
    impl.get_l()  # warm-up (FPRev's compare.py warms up once as well)
    impl.calls = 0
    settle()
    t0 = time.perf_counter()
    tree = fprev_mod.fprev(impl)
    t_fprev = time.perf_counter() - t0
    fprev_calls = impl.calls
    fprev_nodes = sum(1 for line in tree.source.splitlines() if "->" not in line and "[label=" in line)
    del impl

    fn = subject(mm, how)
    fn(np.ones((m, k), np.float32), np.ones((k, n), np.float32))  # warm-up
    settle()
    t0 = time.perf_counter()
    r = mxbi.reveal(fn, m, k, n, name=name)
    t_mxbi = time.perf_counter() - t0
    keep_tree(trees, name, m, k, n, r)
    return {
        "kernel": name,
        "m": m,
        "k": k,
        "n": n,
        "fprev_s": round(t_fprev, 4),
        "fprev_calls": fprev_calls,
        "fprev_nodes": fprev_nodes,
        "mxbi_s": round(t_mxbi, 4),
        "mxbi_launches": r.launches,
        "mxbi_grid_launches": r.grid_launches,
        "mxbi_timings": [[w, round(t, 4)] for w, t in r.timings],
        "mxbi_probes": r.probes,
        "mxbi_disagreements": r.disagreements,
        "mxbi_order": r.order,
        "subject": how,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fprev", required=True, help="the folder holding FPRev's fprev.py")
    ap.add_argument("out", help="JSON lines, one per kernel, shape and round")
    ap.add_argument("--kernel", default="triton-f32", help="comma-separated: " + ", ".join(KERNELS) + " ('' for none)")
    ap.add_argument("--shapes", default="1x64,64x64,4096x64,1x4096,64x4096,4096x4096", help="MxN, comma-separated")
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--narrow", default="bf16,f16", help="GEMV (M = 1) reveals with these output types, mxbi only ('' for none)")
    ap.add_argument("--narrow-n", default="64,4096", help="N of the narrow GEMVs")
    ap.add_argument("--budget", type=float, default=480, help="wall seconds; later runs are skipped once spent")
    ap.add_argument("--subject", default="plain", choices=["plain", "on_device"],
                    help="how mxbi's subject moves the operands (see `subject`)")
    ap.add_argument("--trees", default=None, help="a folder: write each recovered tree there (`keep_tree`)")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of this script (torch-f32 only)")
    args = ap.parse_args()
    global DEV
    DEV = torch.device(args.device)
    deadline = time.monotonic() + args.budget

    def run(what: str, f):
        """One measurement; an error or a spent budget is a line, not the end."""
        if time.monotonic() > deadline:
            print(json.dumps({"skipped": what, "why": "budget"}), flush=True)
            return None
        try:
            return f()
        except Exception as e:  # noqa: BLE001 - recorded and reported
            print(json.dumps({"error": what, "why": f"{type(e).__name__}: {e}"}), flush=True)
            return None

    sys.path.insert(0, args.fprev)
    import fprev as fprev_mod  # noqa: E402
    import mxbi  # noqa: E402

    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    rows, narrow = [], []
    with open(args.out, "w") as out:
        for kname in filter(None, args.kernel.split(",")):
            mm, name = KERNELS[kname]()
            for m, n in shapes:
                for rnd in range(args.rounds):
                    row = run(f"{kname} {m}x{n}", lambda: one_round(fprev_mod, mxbi, mm, name, m, args.k, n, args.subject, args.trees))
                    if row is None:
                        continue
                    row["round"] = rnd
                    rows.append(row)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print(json.dumps(row), flush=True)
        for dtype in filter(None, args.narrow.split(",")):
            for n in (int(x) for x in args.narrow_n.split(",")):
                for row in run(f"{dtype} 1x{n}", lambda: narrow_gemv(dtype, args.k, n, args.rounds, mxbi, args.subject, args.trees)) or []:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print(json.dumps(row), flush=True)
                    narrow.append(row)
    print()
    print("| kernel | M | N | FPRev calls | FPRev s | mxbi launches | mxbi s | launches | time | mxbi order |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    keys = sorted({(r["kernel"], r["m"], r["n"]) for r in rows}, key=lambda t: (t[0], t[2], t[1]))
    for kname, m, n in keys:
        rs = [r for r in rows if (r["kernel"], r["m"], r["n"]) == (kname, m, n)]
        fs = statistics.median(r["fprev_s"] for r in rs)
        ms = statistics.median(r["mxbi_s"] for r in rs)
        calls = rs[0]["fprev_calls"]
        launches = rs[0]["mxbi_launches"]
        print(
            f"| {kname} | {m} | {n} | {calls:,} | {fs:.3f} | {launches} | {ms:.3f} | "
            f"{calls / launches:.0f}x fewer | {fs / ms:.1f}x | `{rs[0]['mxbi_order']}` |"
        )
    if narrow:
        print()
        print("| kernel (mxbi only) | M | N | launches | mxbi s | order |")
        print("|---|---:|---:|---:|---:|---|")
        for kname, n in sorted({(r["kernel"], r["n"]) for r in narrow}):
            rs = [r for r in narrow if (r["kernel"], r["n"]) == (kname, n)]
            ms = statistics.median(r["mxbi_s"] for r in rs)
            print(f"| {kname} | 1 | {n} | {rs[0]['mxbi_launches']} | {ms:.3f} | `{rs[0]['mxbi_order']}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
