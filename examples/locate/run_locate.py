"""Runs ``mxbi.torch.locate`` on the example decoder (docs/LOCATE.md).

    python3 examples/locate/run_locate.py [--plant matmul|rmsnorm] [--dtype float32|bfloat16]
        [--device cpu|cuda] [--batch-sizes 1,9,33] [--seq 16] [--compile] [--out DIR]

Prints the report; with ``--out DIR`` writes ``NAME.txt``, ``NAME.json`` and
``NAME.md`` there (NAME from the settings). ``--compile`` also runs the
model under ``torch.compile`` at every batch size and compares the target
sample's log-probabilities across batch sizes and against eager (Inductor's
generated kernels are not aten ops: ``locate`` itself runs the eager model).
Exit status: 0 invariant, 1 not invariant, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import decoder  # noqa: E402
import mxbi.torch as mt  # noqa: E402


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def compiled_outputs(model: torch.nn.Module, sizes: list, seq: int, device: str) -> dict:
    """The target's log-probabilities under torch.compile at every batch size, vs eager."""
    fn = torch.compile(model, dynamic=False)
    rows = {}
    with torch.no_grad():
        for m in sizes:
            x = decoder.make_inputs(m, seq=seq, device=device)
            c = fn(x)[0]
            e = model(x)[0]
            rows[m] = {"compiled": digest(c), "eager": digest(e), "compiled_equals_eager": bool(torch.equal(c, e))}
    first = rows[sizes[0]]["compiled"]
    return {"per_batch_size": rows, "compiled_invariant": all(r["compiled"] == first for r in rows.values())}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plant", choices=["none", "matmul", "rmsnorm"], default="none")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch-sizes", default="1,9,33")
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--no-evidence", action="store_true")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    try:
        sizes = [int(x) for x in a.batch_sizes.split(",")]
    except ValueError:
        print(f"run_locate: --batch-sizes '{a.batch_sizes}' is not a list of integers", file=sys.stderr)
        return 2
    dtype = getattr(torch, a.dtype)
    plant = None if a.plant == "none" else a.plant
    model = decoder.build(plant, dtype=dtype, device=a.device, dim=a.dim, hidden=a.hidden)
    t0 = time.time()
    report = mt.locate(model, lambda m: decoder.make_inputs(m, seq=a.seq, device=a.device), sizes,
                       ops=decoder.PLANTED_KINDS, evidence=not a.no_evidence)
    took = time.time() - t0
    text = str(report) + f"\n({took:.1f} s, torch {torch.__version__}, device {a.device}"
    if a.device.startswith("cuda"):
        text += f" {torch.cuda.get_device_name()}"
    text += ")"
    extra = {}
    if a.compile:
        extra = compiled_outputs(model, sizes, a.seq, a.device)
        text += "\ntorch.compile: " + json.dumps(extra)
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        name = f"{a.plant}-{a.dtype}-{a.device.split(':')[0]}"
        with open(os.path.join(a.out, name + ".txt"), "w") as f:
            f.write(text + "\n")
        d = json.loads(report.to_json())
        d["run"] = {"seconds": round(took, 2), "torch": torch.__version__, "device": a.device, "dtype": a.dtype,
                    "seq": a.seq, "dim": a.dim, "hidden": a.hidden, "compile": extra or None,
                    "command": "python3 examples/locate/run_locate.py " + " ".join(sys.argv[1:])}
        with open(os.path.join(a.out, name + ".json"), "w") as f:
            json.dump(d, f, indent=2)
        with open(os.path.join(a.out, name + ".md"), "w") as f:
            f.write(report.markdown())
    return 0 if report.invariant else 1


if __name__ == "__main__":
    sys.exit(main())
