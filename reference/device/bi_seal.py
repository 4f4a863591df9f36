"""Seal a checker capture folder: write its manifest.json (the layout of
src/device/capture.rs's Manifest: suite, command, mxbi version, date, device,
size and SHA-256 of every file under the folder, notes).

    python3 reference/device/bi_seal.py DIR --command CMD --device DEVICE.json \
        --version V --date D [--note TEXT]...

Files in subfolders are listed by their path relative to DIR (a dump folder's
dump/job-000001/out.npy), sorted, so CI's Capture::verify_all reads them all.
"""
import argparse
import hashlib
import json
import os

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--command", required=True)
p.add_argument("--device", required=True)
p.add_argument("--version", required=True)
p.add_argument("--date", required=True)
p.add_argument("--suite", default="bi")
p.add_argument("--note", action="append", default=[])
a = p.parse_args()

files = []
for root, _, names in os.walk(a.dir):
    for name in names:
        path = os.path.join(root, name)
        rel = os.path.relpath(path, a.dir)
        if rel == "manifest.json":
            continue
        data = open(path, "rb").read()
        files.append({"name": rel, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
files.sort(key=lambda f: f["name"])
with open(a.device) as f:
    device = json.load(f)
manifest = {
    "suite": a.suite,
    "command": a.command,
    "mxbi_version": a.version,
    "created": a.date,
    "device": device,
    "files": files,
    "notes": a.note,
}
with open(os.path.join(a.dir, "manifest.json"), "w") as f:
    f.write(json.dumps(manifest, indent=2) + "\n")
