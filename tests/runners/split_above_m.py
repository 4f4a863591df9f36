"""An mxbi-exec/1 runner (Python standard library only) that is batch-variant
above one batch size: for M <= THRESHOLD it computes mxbi's `muladd` order bit
for bit (as stdlib_runner.py), for M > THRESHOLD `muladd;split=2` (the row's K
cut into two contiguous halves, each summed in order, then added), as a
kernel that switches to split-K for larger batches would.

    python3 split_above_m.py THRESHOLD
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stdlib_runner import load, rn32, save  # noqa: E402


def dot(row, b, j, lo, hi):
    acc = 0.0
    for t in range(lo, hi):
        acc = rn32(acc + rn32(row[t] * b[t][j]))
    return acc


def matmul(a, b, split):
    k, n = len(b), len(b[0])
    half = (k + 1) // 2
    out = []
    for row in a:
        if split:
            out.append([rn32(dot(row, b, j, 0, half) + dot(row, b, j, half, k)) for j in range(n)])
        else:
            out.append([dot(row, b, j, 0, k) for j in range(n)])
    return out


def main():
    threshold = int(sys.argv[1])
    print(json.dumps({"protocol": "mxbi-exec/1", "name": "stdlib-split-above-m%d" % threshold}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        a, b = load(job["a"]), load(job["b"])
        c = matmul(a, b, len(a) > threshold)
        m, n = len(c), len(c[0])
        flat = [x for r in c for x in r]
        save(job["out"], "<f4", (m, n), struct.pack("<%df" % len(flat), *flat))
        print(json.dumps({"job": job["job"], "out": job["out"], "dtype": "f32"}), flush=True)


if __name__ == "__main__":
    main()
