"""Tables of the checker's live GPU runs (reference/captures/bi-live/*.json.gz):
one row per run, one column per M; a cell is `=` when every compared row of
that (family, M) passed, the largest number of differing bytes when some
failed, `E` for ERROR, `N` for NON_DET, `V` for VACUOUS.

    python3 reference/device/bi_table.py reference/captures/bi-live [FAMILY]
"""
import glob
import gzip
import json
import os
import sys

folder = sys.argv[1]
only = sys.argv[2] if len(sys.argv) > 2 else None
runs = {}
for line in open(os.path.join(folder, "runs.tsv")):
    name, subject, args = line.rstrip("\n").split("\t")
    runs[name] = (subject, args)
rows = []
ms = set()
for path in sorted(glob.glob(os.path.join(folder, "*.json.gz"))):
    name = os.path.basename(path)[: -len(".json.gz")]
    rep = json.load(gzip.open(path))
    by = {}
    for c in rep["cells"]:
        if only and c["family"] != only:
            continue
        key = (c["family"], c["m"])
        v = c["verdict"]
        cur = by.get(key)
        if v == "BI_FAIL":
            b = c["bytes_differing"]
            cur = b if not isinstance(cur, int) else max(cur, b)
        elif isinstance(cur, int):
            pass
        elif v == "ERROR":
            cur = "E"
        elif v == "NON_DET":
            cur = "N"
        elif v == "VACUOUS" and cur is None:
            cur = "V"
        elif cur is None:
            cur = "="
        by[key] = cur
        ms.add(c["m"])
    valid = rep["summary"].get("valid")
    rows.append((name, by, valid))
ms = sorted(ms)
fams = sorted({f for _, by, _ in rows for f, _ in by})
for fam in fams:
    print(f"\n### {fam}\n")
    print("| run | " + " | ".join(str(m) for m in ms) + " | controls |")
    print("|---|" + "|".join(":-:" for _ in ms) + "|---|")
    for name, by, valid in rows:
        cells = [by.get((fam, m)) for m in ms]
        if all(c is None for c in cells):
            continue
        print(f"| {name} | " + " | ".join("" if c is None else str(c) for c in cells) + f" | {'ok' if valid else 'INVALID'} |")
