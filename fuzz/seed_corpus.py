#!/usr/bin/env python3
"""Seeds fuzz/corpus/<target>/ with real files of the repository (standard
library only): .npy fixtures and GPU-capture outputs, example cases and
dispatch tables, the order grammar's reference vectors, a committed dump
manifest, and inputs built in each target's byte layout (fuzz/src/*.rs).
Run from the repository root; then fuzz, then `cargo fuzz cmin` (docs/FUZZING.md)."""
import glob, hashlib, json, os, struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def rel(*p):
    return os.path.join(ROOT, *p)


def npy(descr, shape, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data


def f32(*xs):
    return b"".join(struct.pack("<f", x) for x in xs)


def u32(*xs):
    return b"".join(struct.pack("<I", x) for x in xs)


# .npy: the fixtures and small capture outputs
npys = sorted(glob.glob(rel("tests/data/npy/*.npy")))
npys += sorted(p for p in glob.glob(rel("reference/captures/**/*.npy"), recursive=True) if os.path.getsize(p) < 2048)[:12]
for p in npys:
    put("npy_reader", open(p, "rb").read())

# .safetensors: one file per supported dtype, a two-tensor file with metadata
def st(tensors, meta=None):
    head, data = {}, b""
    for name, dt, shape, raw in tensors:
        head[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if meta is not None:
        head["__metadata__"] = meta
    h = json.dumps(head).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data

for dt, size in [("F32", 4), ("F64", 8), ("F16", 2), ("BF16", 2), ("U8", 1), ("U16", 2), ("I8", 1),
                 ("I32", 4), ("I64", 8), ("F8_E4M3", 1), ("F8_E5M2", 1), ("BOOL", 1)]:
    put("safetensors_reader", st([("x", dt, [2, 3], bytes(range(6 * size)))]))
put("safetensors_reader", st([("a", "F32", [2], f32(1.0, -2.0)), ("b", "F8_E4M3", [4], b"\x38\x40\x7f\x80")],
                             {"format": "pt"}))
put("safetensors_reader", st([("empty", "F32", [0, 3], b"")]))

# orders: the grammar's reference vectors and the presets, at several K
ks = [0, 1, 7, 64, 1000, 4096, 1 << 22, (1 << 22) + 1, 1 << 63]
specs = [json.loads(l)["spec"] for l in open(rel("reference/orders/parse_vectors.jsonl"))]
specs += ["hopper-bf16", "hopper-fp8-mma-sync", "ampere-bf16;split=3;reduce=pairwise", "deepgemm-fp8",
          "mma(k=64,f=25,split=mod4,c=late);promote=128;split=3", "blackwell-mxf8f6f4;out=bf16",
          "fma;split=4/interleave;ktile=64", "fma;ktile=3;tile=fresh;split=5", "fma;lanes=32", "fma;scale=block",
          "fma;lanes=16;ktile=512;tile=fresh;reduce=serial", "muladd;lanes=4;ktile=4;tile=fresh",
          "hopper-bf16;lanes=2;ktile=64;tile=fresh;reduce=pairwise"]
for i, s in enumerate(specs):
    put("order_parser", struct.pack("<Q", ks[i % len(ks)]) + s.encode())

# dispatch tables
for p in [rel("examples/cases/dispatch-table.json")]:
    put("dispatch_json", u32(17, 64, 1024) + open(p, "rb").read())
put("dispatch_json", u32(1, 9, 513) + b'{"dispatch": [{"k_max": 512, "n_max": 8, "order": "muladd"}]}')
put("dispatch_json", u32(300, 64, 64) + b'{"dispatch": [{"m_max": 16, "order": "fma"}, {"m_max": 256, "n_max": 4096, "order": "fma;split=4"}, {"order": "hopper-bf16"}]}')

# case files: the examples and the README's
for p in sorted(glob.glob(rel("examples/cases/*.json"))):
    put("bi_case", b"\x04" + u32(16, 256) + open(p, "rb").read())
put("bi_case", b"\x00" + u32(0, 0) + json.dumps({
    "schema": "mxbi-bi-case/1", "name": "allgather_matmul_v2_bi", "subject": "model:fma;split=4",
    "m": [4, 16, 17, 64], "k": 1024, "n": 64, "seed": 1,
    "standard": {"acc": "cv_fused_double_benchmark", "perf": [0.95, 0.95],
                 "bi": {"row_positions": [0, "mid", "last"], "n_variants": 2}}}).encode())
put("bi_case", b"\x02" + u32(3, 9) + json.dumps({
    "schema": "mxbi-bi-case/1", "subject": "model:fma", "vs": "model:muladd", "families": ["switch", "repeat"],
    "m": "edges", "k": 8, "n": 4, "repeats": 2, "input": "bf16"}).encode())

# dump folders: a committed capture's manifest (raw mode), and recorded jobs
put("dump_folder", b"\x00" + open(rel("reference/captures/bi-torch-matmul-f32/dump/manifest.json"), "rb").read())
for m, k, n in [(1, 1, 1), (2, 3, 2), (4, 8, 4)]:
    out = npy("<f4", "(%d, %d)" % (m, n), f32(*[0.5 * i for i in range(m * n)]))
    for mode in [1, 1 | 16]:
        put("dump_folder", bytes([mode, m - 1, k - 1, n - 1]) + bytes(6) + out)
    put("dump_folder", bytes([1 | 2, m - 1, k - 1, n - 1]) + struct.pack("<HBHB", 40, ord("9"), 300, ord("x")) + out)
    put("dump_folder", bytes([1, m - 1, k - 1, n - 1]) + bytes(6) + npy("<f2", "(%d, %d)" % (m, n), bytes(2 * m * n)))

# runner replies: greeting, answer line, output file
greet = b'{"protocol": "mxbi-exec/1", "name": "numpy-f32"}\n'
for m, n, dt, descr, size in [(2, 3, "f32", "<f4", 4), (1, 1, "f16", "<f2", 2), (4, 2, "bf16", "<u2", 2)]:
    ans = json.dumps({"job": 7, "out": "/tmp/job-000007/out.npy", "dtype": dt}).encode() + b"\n"
    put("exec_reply", bytes([7, m, n]) + greet + ans + npy(descr, "(%d, %d)" % (m, n), bytes(range(m * n * size))))
put("exec_reply", bytes([7, 2, 2]) + greet + b'{"job": 7, "error": "out of memory"}\n')
put("exec_reply", bytes([7, 2, 2]) + greet + b'{"job": 8, "out": "o.npy", "dtype": "f32"}\n')

# casts: special values
specials = [0.0, -0.0, 1.0, -1.5, 448.0, 464.0, 57344.0, 6.0, 1e-40, -1e-45, 3.4e38, float("inf"), float("-inf"),
            float("nan"), 0.1, 2.0 ** -126, 2.0 ** -149, 65504.0, 65520.0]
body = f32(*specials)
for sel in [0, 5, 0x2d, 0xff]:
    put("cast_paths", bytes([sel]) + u32(0) + struct.pack("<Q", sel) + body)
put("cast_paths", bytes([1]) + u32(7) + struct.pack("<Q", 1) + b"".join(struct.pack("<d", x) for x in specials))

# MX quantization: format, preset, overrides, seed, ndim, dims, axis, block|pad, values
vals = f32(*[x * s for s in (1.0, 2.0 ** 40, 2.0 ** -130) for x in (0.3, -1.7, 5.0, 0.0, 448.0, -2.0)])
for fmt in range(6):
    for preset in range(4):
        put("mx_quantize", bytes([fmt, preset]) + struct.pack("<H", 0) + bytes(8) + bytes([2, 3, 32, 0xff, 5]) + vals)
put("mx_quantize", bytes([0, 0]) + struct.pack("<H", 0x80 | (5 << 8)) + bytes(8) + bytes([3, 2, 32, 3, 1, 5]) + vals)
put("mx_quantize", bytes([1, 2]) + struct.pack("<H", 0x7f) + bytes(8) + bytes([1, 40, 0, 0x83]) + f32(float("nan"), float("inf"), 1.0))
