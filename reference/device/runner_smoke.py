"""Checks that an mxbi-exec/1 runner computes A x B (not only that it answers):
writes a few jobs (M = 1, 17, 64; K = 64; N = 16) whose values are small dyadic
numbers exact in f32, bf16 and e4m3, has examples/fill_dump.py run the runner on
them, and compares each output with the f64 product (exact for f32 outputs, within
bf16 rounding for bf16 outputs). Exit 0 and one line when all agree, else 1.

    python3 reference/device/runner_smoke.py WORKDIR INPUT RUNNER-COMMAND...
"""
import json
import os
import subprocess
import sys

import numpy as np

work, input_type, runner = sys.argv[1], sys.argv[2], sys.argv[3:]
here = os.path.dirname(os.path.abspath(__file__))
fill = os.environ.get("MXBI_FILL_DUMP", os.path.join(here, "..", "..", "examples", "fill_dump.py"))
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(20261130)
values = np.array([-2.0, -1.5, -1.0, -0.75, -0.5, 0.5, 0.75, 1.0, 1.5, 2.0], dtype=np.float32)
k, n = 64, 16
jobs = []
for i, m in enumerate((1, 17, 64)):
    d = os.path.join(work, f"job-{i:06d}")
    os.makedirs(d, exist_ok=True)
    a = rng.choice(values, (m, k)).astype(np.float32)
    b = rng.choice(values, (k, n)).astype(np.float32)
    np.save(os.path.join(d, "a.npy"), a)
    np.save(os.path.join(d, "b.npy"), b)
    jobs.append({"job": i, "m": m, "k": k, "n": n, "input": input_type,
                 "a": f"job-{i:06d}/a.npy", "b": f"job-{i:06d}/b.npy", "out": f"job-{i:06d}/out.npy"})
with open(os.path.join(work, "manifest.json"), "w") as f:
    json.dump({"schema": "mxbi-bi-dump/1", "jobs": jobs}, f)
r = subprocess.run([sys.executable, fill, work] + runner)
if r.returncode != 0:
    print(f"SMOKE FAIL {' '.join(runner)}: fill_dump exited {r.returncode}")
    sys.exit(1)
worst = 0.0
for j in jobs:
    a = np.load(os.path.join(work, j["a"])).astype(np.float64)
    b = np.load(os.path.join(work, j["b"])).astype(np.float64)
    c = np.load(os.path.join(work, j["out"]))
    if c.dtype == np.uint16 or c.dtype == np.int16:
        c = (c.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    if c.shape != (j["m"], n):
        print(f"SMOKE FAIL {' '.join(runner)}: job {j['job']} shape {c.shape}")
        sys.exit(1)
    ref = a @ b
    err = np.abs(c.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30)
    worst = max(worst, err)
ok = worst <= 1e-2
print(f"SMOKE {'OK' if ok else 'FAIL'} {' '.join(runner)}: max relative error {worst:.3e} over M = 1, 17, 64")
sys.exit(0 if ok else 1)
