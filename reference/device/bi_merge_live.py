"""Add the live runs of a later bi.sh call to the committed bi-live capture.

    python3 reference/device/bi_merge_live.py NEW_BI_LIVE [--into reference/captures/bi-live] --note TEXT

NEW_BI_LIVE is OUTDIR/captures/bi-live of the later call (its runs.tsv, NAME.json.gz,
NAME.md). Each run it lists is copied in (a run of the same name is replaced) and its
runs.tsv line appended (or replaced); the folder is re-sealed with bi_seal.py's layout,
keeping the suite, command, version, date and device of the committed manifest and
adding TEXT to its notes, and the manifest's line in reference/captures.sha256 is
rewritten. The device of the later call must be the committed one (same GPU, driver,
cuBLAS).
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

p = argparse.ArgumentParser()
p.add_argument("new")
p.add_argument("--into", default="reference/captures/bi-live")
p.add_argument("--note", required=True)
a = p.parse_args()

old = json.load(open(os.path.join(a.into, "manifest.json")))
new_manifest = os.path.join(a.new, "manifest.json")
if os.path.exists(new_manifest):
    dev = json.load(open(new_manifest))["device"]
    if dev != old["device"]:
        sys.exit(f"the later call ran on another device: {dev} vs {old['device']}")
lines = open(os.path.join(a.into, "runs.tsv")).read().splitlines()
for line in open(os.path.join(a.new, "runs.tsv")).read().splitlines():
    name = line.split("\t")[0]
    for ext in (".json.gz", ".md"):
        src = os.path.join(a.new, name + ext)
        if not os.path.exists(src):
            sys.exit(f"{src}: missing (the run left no report)")
        shutil.copyfile(src, os.path.join(a.into, name + ext))
    lines = [l for l in lines if l.split("\t")[0] != name] + [line]
    print("added", name)
with open(os.path.join(a.into, "runs.tsv"), "w") as f:
    f.write("\n".join(lines) + "\n")
fd, dev_file = tempfile.mkstemp(suffix=".json")
with os.fdopen(fd, "w") as f:
    json.dump(old["device"], f)
seal = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bi_seal.py")
args = [sys.executable, seal, a.into, "--command", old["command"], "--device", dev_file,
        "--version", old["mxbi_version"], "--date", old["created"], "--suite", old["suite"]]
for n in old["notes"] + [a.note]:
    args += ["--note", n]
try:
    subprocess.run(args, check=True)
finally:
    os.remove(dev_file)
digest = hashlib.sha256(open(os.path.join(a.into, "manifest.json"), "rb").read()).hexdigest()
sums = os.path.join(os.path.dirname(os.path.normpath(a.into)), "..", "captures.sha256")
sums = os.path.normpath(sums)
rel = "captures/" + os.path.basename(os.path.normpath(a.into)) + "/manifest.json"
out = []
for line in open(sums).read().splitlines():
    out.append(f"{digest}  {rel}" if line.endswith("  " + rel) else line)
with open(sums, "w") as f:
    f.write("\n".join(out) + "\n")
print("sealed", a.into, digest)
