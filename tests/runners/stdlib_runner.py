"""An mxbi-exec/1 runner on the Python standard library only (CI has no numpy).

C = A x B in mxbi's `muladd` order, bit for bit: per output, acc = +0, then
acc = RN32(acc + RN32(a_k * b_k)) for k = 0..K-1. The product of two f32 is
exact in f64; one f64 addition of two f32 then RN32 is correctly rounded
(53 >= 2 * 24 + 2), so struct's f32 packing (round to nearest even) is RN32.

    python3 stdlib_runner.py [MODE]          serve jobs on stdin (protocol)
    python3 stdlib_runner.py --dump DIR [MODE]   write out.npy for every job of a dump

MODE makes it misbehave, for the tests: ok (default), plant (flips the last
bit of C[0][0] when M > 2: a batch-dependent error), f16 (answers in f16),
bf16 (answers bf16 bits, rounded to nearest even), error (every job answers
an error), error-m3 (jobs with M >= 3 do), die-at-start, die-after-1, hang,
garbage, wrong-job, wrong-shape, wrong-dtype, chatter (prints a log line on
stdout), bad-greeting, exit-after-1 (exits right after answering job 1: mxbi's
next write meets a closed pipe), close-stdout (closes stdout and hangs),
dev-zero (names /dev/zero as its output), need-bf16 (answers an error for a job
whose input type is not bf16, as a bf16 library runner does); lies for the
malformed-input battery: f16-said-f32 (writes f16, says f32), other-m (writes
[M + 1, N]), nan (every output NaN), no-file-exit (answers job 1 without
writing it, then exits), chatter-after (prints a log line after each answer);
outputs that do not depend on the inputs: zeros (every output +0), const
(every output 1.0); an order outside the explainer's family: reverse (the
same serial muladd from k = K-1 down to 0), reverse-above-4 (that order
for M > 4, the forward one up to M = 4: batch-variant).
"""
import ast
import json
import math
import os
import struct
import sys
import time


def rn32(x):
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    hlen = struct.unpack("<H", data[8:10])[0] if data[6] == 1 else struct.unpack("<I", data[8:12])[0]
    start = (10 if data[6] == 1 else 12) + hlen
    header = ast.literal_eval(data[start - hlen:start].decode("latin-1"))
    assert header["descr"] == "<f4" and not header["fortran_order"], header
    rows, cols = header["shape"]
    flat = struct.unpack("<%df" % (rows * cols), data[start:start + 4 * rows * cols])
    return [list(flat[r * cols:(r + 1) * cols]) for r in range(rows)]


def save(path, descr, shape, raw):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, ", ".join(map(str, shape)))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + raw)


def matmul(a, b, reverse=False):
    k, n = len(b), len(b[0])
    out = []
    for row in a:
        c = []
        for j in range(n):
            acc = 0.0
            for t in (range(k - 1, -1, -1) if reverse else range(k)):
                acc = rn32(acc + rn32(row[t] * b[t][j]))
            c.append(acc)
        out.append(c)
    return out


def answer(job, mode):
    """Writes job["out"]; returns the dtype name."""
    a, b = load(job["a"]), load(job["b"])
    c = matmul(a, b, reverse=(mode == "reverse" or (mode == "reverse-above-4" and len(a) > 4)))
    m, n = len(c), len(c[0])
    flat = [x for row in c for x in row]
    bits = list(struct.unpack("<%dI" % len(flat), struct.pack("<%df" % len(flat), *flat)))
    if mode == "plant" and m > 2:
        bits[0] ^= 1
    if mode == "nan":
        bits = [0x7FC00000] * len(bits)
    if mode == "zeros":
        bits = [0] * len(bits)
    if mode == "const":
        bits = [0x3F800000] * len(bits)
    if mode == "f16-said-f32":
        save(job["out"], "<f2", (m, n), struct.pack("<%de" % len(flat), *flat))
        return "f32"
    if mode == "other-m":
        save(job["out"], "<f4", (m + 1, n), struct.pack("<%dI" % (len(bits) + n), *(bits + bits[:n])))
        return "f32"
    if mode == "f16":
        save(job["out"], "<f2", (m, n), struct.pack("<%de" % len(flat), *flat))
        return "f16"
    if mode == "bf16":
        rne = [(x + 0x7FFF + ((x >> 16) & 1)) >> 16 for x in bits]  # no NaN or overflow here
        save(job["out"], "<u2", (m, n), struct.pack("<%dH" % len(bits), *rne))
        return "bf16"
    shape = (m, n + 1) if mode == "wrong-shape" else (m, n)
    if mode == "wrong-shape":
        bits = [x for r in range(m) for x in bits[r * n:(r + 1) * n] + [0]]
    save(job["out"], "<f4", shape, struct.pack("<%dI" % len(bits), *bits))
    return "f16" if mode == "wrong-dtype" else "f32"


def serve(mode):
    say = lambda obj: print(json.dumps(obj), flush=True)  # noqa: E731
    if mode == "die-at-start":
        sys.exit(3)
    if mode == "bad-greeting":
        print("hello, I am a runner", flush=True)
    say({"protocol": "mxbi-exec/1", "name": "stdlib-muladd" + ("" if mode == "ok" else "-" + mode)})
    done = 0
    for line in sys.stdin:
        job = json.loads(line)
        if mode == "die-after-1" and done == 1:
            sys.exit(4)
        if mode == "hang":
            time.sleep(3600)
        if mode == "close-stdout":
            os.close(1)
            time.sleep(3600)
        if mode == "dev-zero":
            say({"job": job["job"], "out": "/dev/zero", "dtype": "f32"})
            continue
        if mode == "garbage":
            print("Traceback (most recent call last): oops", flush=True)
            continue
        if mode == "chatter":
            print("computing job", job["job"], flush=True)
        if mode == "need-bf16" and job["input"] != "bf16":
            say({"job": job["job"], "error": "bf16 runner given %s inputs" % job["input"]})
            continue
        if mode == "error" or (mode == "error-m3" and job["m"] >= 3):
            say({"job": job["job"], "error": "this runner refuses every job"})
            continue
        if mode == "no-file-exit":
            say({"job": job["job"], "out": job["out"], "dtype": "f32"})
            os._exit(6)
        dtype = answer(job, mode)
        say({"job": job["job"] + (1 if mode == "wrong-job" else 0), "out": job["out"], "dtype": dtype})
        done += 1
        if mode == "chatter-after":
            print("job", job["job"], "done", flush=True)
        if mode == "exit-after-1":
            os._exit(5)


def dump(folder, mode):
    with open(os.path.join(folder, "manifest.json")) as f:
        jobs = json.load(f)["jobs"]
    for job in jobs:
        job = dict(job, a=os.path.join(folder, job["a"]), b=os.path.join(folder, job["b"]),
                   out=os.path.join(folder, job["out"]))
        answer(job, mode)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--dump"]:
        dump(args[1], args[2] if len(args) > 2 else "ok")
    else:
        serve(args[0] if args else "ok")
