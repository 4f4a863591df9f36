#!/usr/bin/env python3
"""mx_cases.jsonl(.gz): MX block quantization cases from several oracles.

Usage: gen_mx.py OUT [--head-utils PATH/_mxfp8_test_utils.py]
                     [--head-src PATH_CONTAINING_torchao_PACKAGE --head-commit SHA]

Without --head-utils / --head-src the torchao HEAD data are taken from the
caches in reference/data/ (written by an earlier run that had them).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import mx_blocks
import mx_gfloat
import mx_te

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
CONTRACT_CACHE = os.path.join(DATA, "torchao_head_contract.json")
HEAD_CACHE = os.path.join(DATA, "torchao_head_to_mx.json.gz")
PY = sys.executable


def write_json_gz(path, obj):
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as g:
            g.write(json.dumps(obj, sort_keys=True).encode())


def run_worker(args, env_extra=None):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if env_extra:
        env.update(env_extra)
    subprocess.run([PY] + args, check=True, env=env, cwd=HERE,
                   stderr=subprocess.DEVNULL if not os.environ.get("MX_VERBOSE") else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--head-utils")
    ap.add_argument("--head-src")
    ap.add_argument("--head-commit", default="unknown")
    a = ap.parse_args()
    os.makedirs(DATA, exist_ok=True)
    tmp = tempfile.mkdtemp()

    # (b)+(c): torchao HEAD contract data
    if a.head_utils:
        run_worker(["head_contract.py", a.head_utils, os.path.join(tmp, "hc.json")])
        contract = json.load(open(os.path.join(tmp, "hc.json")))
        contract["commit"] = a.head_commit
        with open(CONTRACT_CACHE, "w") as f:
            json.dump(contract, f, indent=0, sort_keys=True)
    contract = json.load(open(CONTRACT_CACHE))

    # block list: HEAD semantic inputs (floor list; rceil inputs identical) + ours
    blocks, seen = [], {}
    for c in contract["cases"]:
        if c["case"] in seen:
            assert seen[c["case"]] == c["input_f32"], c["case"]
            continue
        seen[c["case"]] = c["input_f32"]
        blocks.append((c["case"], [int(h, 16) for h in c["input_f32"]]))
    blocks += mx_blocks.make_blocks()
    bjson = os.path.join(tmp, "blocks.json")
    json.dump(blocks, open(bjson, "w"))

    # (a) installed torchao
    run_worker(["mx_torchao.py", bjson, os.path.join(tmp, "rel.json")])
    rel = json.load(open(os.path.join(tmp, "rel.json")))
    rel_name = f"torchao-{rel['version']}"
    assert "site-packages" in rel["torchao_file"], rel["torchao_file"]

    # torchao HEAD to_mx (extra oracle)
    if a.head_src:
        run_worker(["mx_torchao.py", bjson, os.path.join(tmp, "head.json")], {"PYTHONPATH": a.head_src})
        head = json.load(open(os.path.join(tmp, "head.json")))
        assert head["torchao_file"].startswith(os.path.abspath(a.head_src)), head["torchao_file"]
        head["commit"] = a.head_commit
        head.pop("torchao_file")
        write_json_gz(HEAD_CACHE, head)
    head = json.load(gzip.open(HEAD_CACHE)) if os.path.exists(HEAD_CACHE) else None
    head_name = f"torchao-head-{head['commit'][:7]}" if head else None

    def index(res):
        d = {}
        for r in res["results"]:
            d.setdefault(r["case"], []).append(r)
        return d

    rel_by, head_by = index(rel), (index(head) if head else {})
    con_by = {}
    for c in contract["cases"]:
        con_by.setdefault(c["case"], []).append(c)

    lines = []

    def emit(obj):
        lines.append(json.dumps(obj, separators=(",", ":")) + "\n")

    def base(oracle, case, fmt, mode, bits):
        return {"oracle": oracle, "case": case, "format": fmt, "scale_mode": mode, "block": 32,
                "input_f32": [f"{b:08x}" for b in bits]}

    for name, bits in blocks:
        for c in con_by.get(name, []):
            o = base("torchao-head-contract", name, "mxfp8-e4m3", c["scale_mode"], bits)
            o.update(input_dtype=c["input_dtype"], scales=c["scales"], codes=c["codes"])
            emit(o)
        for oname, by in ((rel_name, rel_by), (head_name, head_by)):
            for r in by.get(name, []):
                o = base(oname, name, r["format"], r["scale_mode"], bits)
                if "error" in r:
                    o.update(error=r["error"], scales=None, codes=None)
                else:
                    o.update(scales=r["scales"], codes=r["codes"])
                emit(o)
        for fmt in ("mxfp8-e4m3", "mxfp8-e5m2"):
            s, codes = mx_te.te_quantize_block(fmt, bits)
            o = base("te-rule", name, fmt, "rceil", bits)
            o.update(scales=[f"{s:02x}"], codes=[f"{c:02x}" for c in codes])
            emit(o)
        for in_dt, oname in (("f32", "gfloat"), ("f64", "gfloat-f64in")):
            for fmt in mx_blocks.MX_FORMATS:
                o = base(oname, name, fmt, "floor", bits)
                try:
                    s, codes = mx_gfloat.gfloat_quantize_block(fmt, bits, in_dt)
                    o.update(scales=[f"{s:02x}"], codes=[f"{c:02x}" for c in codes])
                except Exception as e:
                    o.update(error=f"{type(e).__name__}: {e}"[:200], scales=None, codes=None)
                emit(o)
    for c in contract["e8m0_rceil"]:
        emit({"oracle": "torchao-head-contract", "case": c["case"], "kind": "f32_to_e8m0_rceil",
              "input_f32": c["input_f32"], "scales": c["scales"]})
        # TE's float_to_e8m0 applied directly to the same f32 (no /max step)
        v = int(c["input_f32"][0], 16)
        import numpy as np

        s = mx_te.te_float_to_e8m0(np.array([v], dtype=np.uint32).view(np.float32)[0])
        emit({"oracle": "te-rule", "case": c["case"], "kind": "f32_to_e8m0_rceil",
              "input_f32": c["input_f32"], "scales": [f"{s:02x}"]})

    data = "".join(lines).encode()
    if a.out.endswith(".gz"):
        with open(a.out, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as g:
                g.write(data)
    else:
        open(a.out, "wb").write(data)
    print(f"mx: {len(blocks)} blocks, {len(lines)} lines, oracles {rel_name}, {head_name}, te-rule, gfloat, gfloat-f64in")


if __name__ == "__main__":
    main()
