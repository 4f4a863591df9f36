#!/usr/bin/env bash
# Power and witnesses on a real kernel (issue 22): torch.matmul bf16 at K = N = 4096,
# whose orders differ between M = 1 and M = 64 (reveal-vendor-2: split-K at small M),
# checked by the batch family with the old inputs (--content plain), the new default
# (separating) and the witness, on a machine with an NVIDIA GPU and PyTorch, with the
# prebuilt binary (no GPU feature needed: the kernel runs in the exec: runner).
#
#   MXBI_BIN=path/to/mxbi bash reference/device/bi_power.sh OUTDIR
#   (MXBI_OP=matmul|linear, MXBI_K=4096, MXBI_N=4096, MXBI_MS=1,64 choose the run)
#
# Writes the capture OUTDIR/capture/ (committed as reference/captures/bi-power-torch-bf16,
# replayed by tests/capture_bi_power.rs): {plain,separating}.json and .md (the reports),
# rows.json (row 0 of every job's output with the SHA-256 of the job's A row 0 and B, from
# the kept job folders), info.txt, manifest.json (bi_seal.py); logs in OUTDIR/logs/.
set -uo pipefail
out=${1:?usage: bi_power.sh OUTDIR}
mkdir -p "$out/capture" "$out/logs"; out=$(realpath "$out"); logs=$out/logs; out=$out/capture
bin=$(realpath "${MXBI_BIN:-target/release/mxbi}")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export PYTHONUNBUFFERED=1
export TMPDIR=${MXBI_TMP:-/dev/shm/mxbi-power}; mkdir -p "$TMPDIR"
{ nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c 'import torch, numpy; print("torch", torch.__version__, "cuda", torch.version.cuda, "numpy", numpy.__version__)'
  "$bin" --version; date -u +%Y-%m-%dT%H:%M:%SZ
} >"$out/info.txt" 2>&1
op=${MXBI_OP:-matmul}; k=${MXBI_K:-4096}; n=${MXBI_N:-4096}; ms=${MXBI_MS:-1,64}
runner="exec:python3 $root/examples/runner_torch.py $op bf16"
for content in plain separating; do
  kept="$TMPDIR/kept-$content"
  "$bin" bi run --subject "$runner" --input bf16 --family batch --m $ms --rows 0 --k $k --n $n \
    --seed 1 --content "$content" --witness on --keep --timeout 600 \
    --json "$out/$content.json" --markdown "$out/$content.md" >"$logs/$content.log" 2>&1
  echo "$content: exit $?" >>"$out/info.txt"
  dir=$(grep -o 'kept in [^ ]*' "$logs/$content.log" | head -1 | awk '{print $3}')
  echo "$content: jobs in $dir" >>"$out/info.txt"
  python3 "$here/bi_power_rows.py" "$dir" "$content" >>"$out/rows.jsonl" 2>>"$logs/rows.err"
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/rows.jsonl")]
json.dump({"schema": "mxbi-power-capture/1", "jobs": rows}, open(f"{out}/rows.json", "w"), indent=1)
PY
rm -f "$out/rows.jsonl"
"$bin" device info --json >"$logs/device.json" 2>"$logs/device.err" || echo '{"name": "unknown"}' >"$logs/device.json"
python3 "$here/bi_seal.py" "$out" --suite bi-power --device "$logs/device.json" \
  --version "$("$bin" --version | awk '{print $2}')" --date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --command "MXBI_BIN=mxbi MXBI_OP=$op MXBI_K=$k MXBI_N=$n MXBI_MS=$ms bash reference/device/bi_power.sh OUTDIR  # torch $op bf16 K=$k N=$n, batch M $ms, --content plain|separating, --witness on"
