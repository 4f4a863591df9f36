"""The checker's GPU examples through the Python API and through `exec:`,
side by side (issue 15, item 5).

The kernels are the project's own runners in examples/ (the ones
reference/device/bi.sh runs through `exec:`): torch.matmul and F.linear in
f32 and bf16, torch._scaled_mm FP8, the fixed-tile Triton matmul and the
Triton matmul whose split-K depends on M. For each, the same check runs

  in-process   mxbi.bi.check on the runner's own GEMM function, loaded with
               mxbi.runner.in_process (no co-process, no files);
  exec:        mxbi.bi.check("exec:python3 examples/runner_....py ...") (the
               runner as a co-process, mxbi-exec/1; the same code path as
               `mxbi bi run --subject exec:...`).

Both reports carry the runner's name, so they must be identical byte for
byte; the script says whether they are and records the wall time of each
path in OUTDIR/summary.md and summary.json (reports: OUTDIR/NAME.{inproc,exec}.json).

    pip install ./python                         # from the repository root, on the GPU machine
    python3 python/examples/h200_bi.py OUTDIR    # all kernels, K = 2048, N = 2048, the bi.sh M list
    python3 python/examples/h200_bi.py OUTDIR --kernels triton-splitk,matmul-bf16 --m 1,17,64,65 --k 4096 --n 512
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"

# name -> (runner script, its arguments, input type): reference/device/bi.sh's runners
KERNELS = {
    "matmul-f32": ("runner_torch.py", ["matmul", "f32", "--tf32", "off"], "f32"),
    "linear-f32": ("runner_torch.py", ["linear", "f32", "--tf32", "off"], "f32"),
    "matmul-bf16": ("runner_torch.py", ["matmul", "bf16"], "bf16"),
    "linear-bf16": ("runner_torch.py", ["linear", "bf16"], "bf16"),
    "scaled-mm-fp8": ("runner_torch_scaled_mm.py", [], "e4m3"),
    "triton-fixed": ("runner_triton_fixed.py", [], "bf16"),
    "triton-splitk": ("runner_triton_splitk.py", [], "bf16"),
    # the CPU's BLAS: a smoke test of this script on a machine without a GPU (not in the default list)
    "numpy-f32": ("runner_numpy_f32.py", [], "f32"),
}
GPU_KERNELS = [k for k in KERNELS if k != "numpy-f32"]

# bi.sh's batch sizes for the runners (edges of 64 and of the vendor heuristics)
DEFAULT_M = "1,2,8,9,16,17,32,33,63,64,65,128,129,256,257,512,513,1024"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--kernels", default=",".join(GPU_KERNELS), help="comma-separated names: " + ", ".join(KERNELS))
    ap.add_argument("--families", default="batch,position,content,repeat")
    ap.add_argument("--m", default=DEFAULT_M, help="batch sizes, comma-separated, or edges")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-exec", action="store_true", help="only the in-process path")
    args = ap.parse_args()

    import numpy as np

    import mxbi
    import mxbi.runner

    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    ms = "edges" if args.m == "edges" else [int(x) for x in args.m.split(",")]
    kw = dict(families=args.families, k=args.k, n=args.n, m=ms, seed=args.seed)
    rows = []
    for name in [k for k in args.kernels.split(",") if k]:
        script, rargs, input_type = KERNELS[name]
        path = str(EX / script)
        row = {"kernel": name, "runner": " ".join([script, *rargs]), "input": input_type}
        try:
            fn = mxbi.runner.in_process(path, rargs, input=input_type)
        except Exception as e:  # e.g. no Triton on this machine
            row["error"] = f"{type(e).__name__}: {e}"
            print(f"== {name}: cannot load: {row['error']}", flush=True)
            rows.append(row)
            continue
        fn(np.ones((2, args.k), np.float32), np.ones((args.k, args.n), np.float32))  # warm-up: JIT, library handles
        t0 = time.perf_counter()
        r = mxbi.bi.check(fn, input=input_type, name="exec:" + fn.name, **kw)
        row["inproc_s"] = round(time.perf_counter() - t0, 2)
        (out / f"{name}.inproc.json").write_text(r.to_json())
        row.update(cells=len(r.cells), verdicts={k: v for k, v in r.counts.items() if v}, exit_code=r.exit_code)
        print(f"== {name} ({row['runner']}): in-process {row['inproc_s']} s", flush=True)
        print(str(r), end="", flush=True)
        if not args.no_exec:
            spec = f"exec:{sys.executable} {path} {' '.join(rargs)}".rstrip()
            t0 = time.perf_counter()
            try:
                e = mxbi.bi.check(spec, input=input_type, **kw)
                row["exec_s"] = round(time.perf_counter() - t0, 2)
                (out / f"{name}.exec.json").write_text(e.to_json())
                row["same_report"] = e.to_json() == r.to_json()
                if not row["same_report"]:
                    a = {c.id: c.verdict for c in r.cells}
                    b = {c.id: c.verdict for c in e.cells}
                    row["verdicts_differ"] = sorted(i for i in a.keys() | b.keys() if a.get(i) != b.get(i))
            except mxbi.MxbiError as err:
                row["exec_error"] = str(err)
            print(f"   exec: {row.get('exec_s', '-')} s, same report: {row.get('same_report', row.get('exec_error'))}",
                  flush=True)
        if r.failures:
            try:
                row["explanation"] = mxbi.explain.explain_cell(fn, r)
                print(row["explanation"], flush=True)
            except Exception as err:
                print(f"(no explanation: {err})", flush=True)
        rows.append(row)
    (out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        f"K = {args.k}, N = {args.n}, M = {args.m}, families {args.families}, seed {args.seed}",
        "",
        "| kernel | runner | input | cells | verdicts | in-process s | exec: s | same report |",
        "|---|---|---|---:|---|---:|---:|---|",
    ]
    for x in rows:
        v = ", ".join(f"{n} {k}" for k, n in x.get("verdicts", {}).items()) or x.get("error", "")
        lines.append(f"| {x['kernel']} | `{x['runner']}` | {x['input']} | {x.get('cells', '-')} | {v} | "
                     f"{x.get('inproc_s', '-')} | {x.get('exec_s', '-')} | {x.get('same_report', '-')} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
