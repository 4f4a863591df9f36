"""An mxbi-exec/1 runner (Python standard library only) that is flaky, not
batch-variant: it computes mxbi's `muladd` order bit for bit (as
stdlib_runner.py), except on every fifth job (a job counter), where it
computes `muladd;split=2` (as split_above_m.py does above its threshold),
as a kernel that picks another split now and then would.

    python3 flaky_split.py
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from split_above_m import matmul  # noqa: E402
from stdlib_runner import load, save  # noqa: E402


def main():
    print(json.dumps({"protocol": "mxbi-exec/1", "name": "stdlib-flaky-split"}), flush=True)
    calls = 0
    for line in sys.stdin:
        job = json.loads(line)
        a, b = load(job["a"]), load(job["b"])
        c = matmul(a, b, calls % 5 == 4)
        calls += 1
        m, n = len(c), len(c[0])
        flat = [x for r in c for x in r]
        save(job["out"], "<f4", (m, n), struct.pack("<%df" % len(flat), *flat))
        print(json.dumps({"job": job["job"], "out": job["out"], "dtype": "f32"}), flush=True)


if __name__ == "__main__":
    main()
