"""Row 0 of every kept exec: job (reference/device/bi_power.sh): one JSON line per job with
the content, M, the SHA-256 of A's row 0 and of B (their f32 bytes, as mxbi wrote them) and
the output's row 0 as bf16 bits (hex, 4 digits each).

    python3 bi_power_rows.py KEPT_DIR CONTENT
"""
import hashlib
import json
import os
import sys

import numpy as np


def main():
    kept, content = sys.argv[1], sys.argv[2]
    for name in sorted(os.listdir(kept)):
        job = os.path.join(kept, name)
        if not name.startswith("job-") or not os.path.exists(os.path.join(job, "out.npy")):
            continue
        a = np.load(os.path.join(job, "a.npy"))
        b = np.load(os.path.join(job, "b.npy"))
        out = np.load(os.path.join(job, "out.npy"))
        if out.dtype != np.uint16 and out.dtype != np.int16:
            raise SystemExit(f"{job}: output dtype {out.dtype}, expected bf16 bits")
        row = out[0].view(np.uint16)
        # the target row sits at 0 in every batch-family job; other rows are not kept
        print(json.dumps({
            "content": content,
            "job": name,
            "m": int(a.shape[0]),
            "k": int(a.shape[1]),
            "n": int(b.shape[1]),
            "a_row0_sha256": hashlib.sha256(np.ascontiguousarray(a[0], dtype="<f4").tobytes()).hexdigest(),
            "b_sha256": hashlib.sha256(np.ascontiguousarray(b, dtype="<f4").tobytes()).hexdigest(),
            "out_row0": "".join(f"{int(x):04x}" for x in row),
        }))


if __name__ == "__main__":
    main()
