"""Turn a callable into an mxbi runner (protocol "mxbi-exec/1", see docs/BI.md).

    from mxbi_runner import serve
    serve(lambda a, b: a @ b, "numpy-f32")

`fn(a, b)` gets A `[M, K]` and B `[K, N]` as float32 arrays whose values are exactly
representable in the job's input type (`job["input"]`: f32, bf16, f16, e4m3, e5m2; cast
to it losslessly) and returns the whole C `[M, N]`: a float32 or float16 array, or
`(bits, "bf16")` with bf16 bits as a uint16/int16 array. With `with_job=True` it is called
as `fn(a, b, job)` (the job's JSON object). An exception answers that job with an error
(mxbi records one ERROR cell) and the runner stays up; EOF on stdin ends it. Anything
printed to stdout (by fn or a library) is sent to stderr: stdout carries the protocol.
Run with `--dump DIR`, it instead writes `out.npy` for every job of a dump folder
(`mxbi bi gen --out DIR ...`), for `mxbi bi run --subject dump:DIR`.
"""
import json
import os
import sys

import numpy as np

PROTOCOL = "mxbi-exec/1"


def _as_output(c):
    if isinstance(c, tuple):
        bits, kind = c
        bits = np.asarray(bits)
        if kind != "bf16" or bits.dtype not in (np.uint16, np.int16):
            raise TypeError("a tuple answer must be (uint16 or int16 bits, 'bf16')")
        return bits.view(np.uint16), "bf16"
    c = np.asarray(c)
    kinds = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
    if c.dtype not in kinds:
        raise TypeError(f"fn returned {c.dtype}; expected float32, float16 or (bits, 'bf16')")
    return c, kinds[c.dtype]


def _answer(fn, job, with_job):
    """Computes one job and writes its output; returns the output's dtype name."""
    a, b = np.load(job["a"]), np.load(job["b"])
    c, dtype = _as_output(fn(a, b, job) if with_job else fn(a, b))
    np.save(job["out"], np.ascontiguousarray(c))  # bf16 as <u2 bits
    return dtype


def _dump(fn, folder, with_job):
    with open(os.path.join(folder, "manifest.json")) as f:
        jobs = json.load(f)["jobs"]
    for job in jobs:
        _answer(fn, dict(job, **{k: os.path.join(folder, job[k]) for k in ("a", "b", "out")}), with_job)


def serve(fn, name, with_job=False):
    """Answer mxbi's jobs on stdin with `fn` until EOF (or fill a dump: `--dump DIR`)."""
    if sys.argv[1:2] == ["--dump"]:
        return _dump(fn, sys.argv[2], with_job)
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def say(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    say({"protocol": PROTOCOL, "name": name})
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            say({"job": job["job"], "out": job["out"], "dtype": _answer(fn, job, with_job)})
        except Exception as e:  # one failed job is an ERROR cell, not a dead runner
            say({"job": job["job"], "error": f"{type(e).__name__}: {e}"})
