#!/usr/bin/env bash
# mxbi.torch.locate on the example decoder (issue 25, docs/LOCATE.md), on a machine with
# an NVIDIA GPU and PyTorch: the unplanted model in float32 and bfloat16 at batch sizes
# 1, 8, 33, 64 and 257 (eager, with every root cause explained and evidence revealed),
# the same model under torch.compile beside it, and the planted split-K matmul on the GPU.
#
#   PYTHONPATH=DIR_WITH_MXBI bash reference/device/locate.sh OUTDIR [eager|compile|all]
#
# Writes OUTDIR/capture/ (committed as reference/captures/locate-h200, replayed by
# python/tests/test_locate_capture.py): per run NAME.txt (the report), NAME.json
# (mxbi-locate/1 plus the run's settings and command), NAME.md; info.txt; and
# manifest.json (SHA-256 of every file, anchored in tests).
set -uo pipefail
out=${1:?usage: locate.sh OUTDIR [eager|compile|all]}
what=${2:-all}
mkdir -p "$out/capture"; out=$(realpath "$out")/capture
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export PYTHONUNBUFFERED=1
sizes=${MXBI_SIZES:-1,8,33,64,257}
model="--dim ${MXBI_DIM:-256} --hidden ${MXBI_HIDDEN:-1024} --seq ${MXBI_SEQ:-32}"
{ nvidia-smi --query-gpu=name,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
  python3 -c 'import torch, numpy, mxbi; print("torch", torch.__version__, "cuda", torch.version.cuda, "numpy", numpy.__version__, "mxbi", mxbi.__version__)'
  date -u +%Y-%m-%dT%H:%M:%SZ
} >>"$out/info.txt" 2>&1
run() {  # NAME ARGS...: one run_locate.py run, its exit status in info.txt
  local name=$1; shift
  local t0=$SECONDS
  timeout "${MXBI_RUN_TIMEOUT:-3000}" python3 "$root/examples/locate/run_locate.py" "$@" --out "$out/tmp" >"$out/$name.log" 2>&1
  local rc=$?
  for f in "$out"/tmp/*; do [ -e "$f" ] && mv "$f" "$out/$name.${f##*.}"; done
  echo "$name: exit $rc in $((SECONDS - t0)) s: run_locate.py $*" >>"$out/info.txt"
}
if [ "$what" = eager ] || [ "$what" = all ]; then
  for dt in float32 bfloat16; do
    run "none-$dt" --dtype "$dt" --batch-sizes "$sizes" $model
  done
  run "matmul-bfloat16" --plant matmul --dtype bfloat16 --batch-sizes 1,9 $model --no-evidence
fi
if [ "$what" = compile ] || [ "$what" = all ]; then
  for dt in float32 bfloat16; do
    run "compile-$dt" --dtype "$dt" --batch-sizes "$sizes" $model --compile --no-evidence
  done
fi
rmdir "$out/tmp" 2>/dev/null
python3 - "$out" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
files = sorted(f for f in os.listdir(d) if f != "manifest.json")
man = {f: hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest() for f in files}
json.dump(man, open(os.path.join(d, "manifest.json"), "w"), indent=1, sort_keys=True)
PY
