#!/usr/bin/env bash
# The explainer and the Python binding on the H200 (issues 12 and 15), in one
# call, with the prebuilt binary (cargo build --release --features cuda) and
# wheel (pip wheel ./python):
#
#   MXBI_BIN=path/to/mxbi FPREV=dir/with/fprev.py bash reference/device/explain.sh OUTDIR
#
# MXBI_PARTS picks the parts (comma-separated, default all): side (2, the
# timed comparison), sgemm and gemmex (1, the vendor table's f32 and bf16
# rows), python (3). MXBI_BUDGET: wall seconds for the whole run (540).
# MXBI_SGEMM_K / MXBI_SGEMM_M / MXBI_GEMMEX_M: the vendor-table shapes to
# run (default: every K and M below). times.txt: name, exit status, wall
# seconds and peak resident memory; every reveal runs with --warmup (one
# untimed launch first, as FPRev's harness warms up) and --timings (wall
# seconds per phase, in NAME.err; "total" is the figure FPRev's timer
# measures, the process wall in times.txt adds process and CUDA start-up).
#
# 1. reveal on cuBLAS at every M of docs/DEVICE.md's vendor table: sgemm at
#    N = 2048, K = 2048 and K = 7168; GemmEx bf16 at K = 7168 (the M where
#    the table shows it changing). OUTDIR/reveal/<subject>-k<K>-m<M>.json,
#    wall seconds in OUTDIR/reveal/times.txt.
# 2. FPRev side by side (its unmodified fprev.py with its TorchGEMM/TorchGEMV
#    probes, when FPREV is set) and mxbi reveal on the same shapes through
#    torch.matmul (exec: runner) and cublas:sgemm: OUTDIR/fprev.jsonl and
#    OUTDIR/reveal/side-*.json.
# 3. The Python binding (when a wheel is in .whl/): python/examples/h200_bi.py
#    on every runner, in-process vs exec:. OUTDIR/python/.
set -uo pipefail
out=${1:?usage: explain.sh OUTDIR}
mkdir -p "$out/reveal" "$out/logs"
out=$(realpath "$out")
bin=$(realpath "${MXBI_BIN:-target/release/mxbi}")
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
export PYTHONUNBUFFERED=1
deadline=$(( $(date +%s) + ${MXBI_BUDGET:-540} ))
left() { echo $(( deadline - $(date +%s) )); }
{ "$bin" --version; "$bin" device info; nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } >"$out/logs/info.txt" 2>&1

parts=",${MXBI_PARTS:-side,sgemm,gemmex,python},"
part() { [[ $parts == *",$1,"* ]]; }
timev=(); [ -x /usr/bin/time ] && timev=(/usr/bin/time -f "%M" -o "$out/reveal/.rss")

reveal() {  # reveal NAME TIMEOUT ARGS...
  local name=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 20 ] && { echo "$name skipped: budget" >>"$out/reveal/times.txt"; return; }
  [ "$t" -gt "$l" ] && t=$l
  rm -f "$out/reveal/.rss"
  local t0; t0=$(date +%s.%N)
  timeout "$t" "${timev[@]}" "$bin" reveal --json --warmup --timings "$@" >"$out/reveal/$name.json" 2>"$out/reveal/$name.err"
  local rc=$?
  local rss; rss=$(tail -n1 "$out/reveal/.rss" 2>/dev/null)
  echo "$name rc=$rc $(awk -v a="$(date +%s.%N)" -v b="$t0" "BEGIN{printf \"%.2f\", a-b}")s maxrss=${rss:-?}KB" >>"$out/reveal/times.txt"
}

# --- 2 first (the timed comparison, on an idle GPU) ---------------------------
if part side; then
  if [ -n "${FPREV:-}" ]; then
    timeout 120 python3 "$FPREV/compare.py" "$out/fprev.jsonl" >"$out/logs/fprev.log" 2>&1
  fi
  # the fixed cost of one mxbi process (CUDA context, cuBLAS handle): a
  # 2-term reveal, 3 launches of a [1, 2] x [2, 1] GEMM
  reveal side-startup 30 --subject cublas:sgemm --m 1 --k 2 --n 1
  reveal side-sgemm-k2048-m2048 60 --subject cublas:sgemm --m 2048 --k 2048 --n 2048
  reveal side-sgemm-k4096-m1 60 --subject cublas:sgemm --m 1 --k 4096 --n 4096
  reveal side-sgemm-k4096-m4096 90 --subject cublas:sgemm --m 4096 --k 4096 --n 4096
  torch_mm="exec:python3 $(realpath examples/runner_torch.py) matmul f32 --tf32 off"
  reveal side-torch-k2048-m2048 90 --subject "$torch_mm" --m 2048 --k 2048 --n 2048
  reveal side-torch-k4096-m1 90 --subject "$torch_mm" --m 1 --k 4096 --n 4096
  reveal side-torch-k4096-m4096 120 --subject "$torch_mm" --m 4096 --k 4096 --n 4096
fi

# --- 1. the vendor table -------------------------------------------------------
# bf16 first: M = 1 (a GEMV with a bf16 output, counted in windows of 256
# units) and the M where the table shows GemmEx changing
if part gemmex; then
  for M in ${MXBI_GEMMEX_M:-1 8 64 128 256 257 1024 4096}; do
    reveal "gemmex-bf16-k7168-m$M" 120 --subject cublas:gemmex-bf16 --input bf16 --m "$M" --k 7168 --n 2048
  done
fi
if part sgemm; then
  for K in ${MXBI_SGEMM_K:-7168 2048}; do
    for M in ${MXBI_SGEMM_M:-1 2 4 8 16 17 32 33 64 128 256 257 1024 4096}; do
      reveal "sgemm-k$K-m$M" 40 --subject cublas:sgemm --m "$M" --k "$K" --n 2048
    done
  done
fi

# --- 3. the Python binding ------------------------------------------------------
if part python && ls .whl/mxbi-*.whl >/dev/null 2>&1 && [ "$(left)" -gt 60 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/mxbi-*.whl >"$out/logs/pip.log" 2>&1
  PYTHONPATH=/tmp/site timeout $(( $(left) - 10 )) python3 python/examples/h200_bi.py "$out/python" \
    --m 1,2,16,17,64,65,128,257 >"$out/logs/python.log" 2>&1
  echo "python rc=$?" >>"$out/logs/python.log"
fi
rm -f "$out/reveal/.rss"
(cd "$out" && tar czf reveal.tgz reveal && rm -rf reveal)
(cd "$out" && [ -d python ] && tar czf python.tgz python && rm -rf python)
ls -la "$out"
