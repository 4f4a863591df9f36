#!/usr/bin/env bash
# The checker on the NCCL all-gather-matmul op on 2 GPUs (issue 11 item 1,
# the `nccl:` subject), in one call on a machine with 2 NVIDIA GPUs and the
# prebuilt binary (built elsewhere with `cargo build --release --features nccl`).
#
#   MXBI_BIN=path/to/mxbi bash reference/device/nccl_bi.sh OUTDIR
#
# Writes OUTDIR/captures/bi-nccl/: for each run, NAME.json.gz (the report) and
# NAME.md, runs.tsv (NAME, GPU subject, its CPU model, exit code, arguments),
# info.txt, and manifest.json (sealed by bi_seal.py). Commit the folder as
# reference/captures/bi-nccl/ and add its manifest's digest to
# reference/captures.sha256:
#   (cd reference && sha256sum captures/bi-nccl/manifest.json) >> reference/captures.sha256
# tests/capture_bi_nccl.rs then replays every run on the CPU: the same check
# with the CPU model (`op:PRESET,paths=SET,...`, runs.tsv's third column) must
# give the same cells, verdicts and byte counts, and the switch runs (GPU vs
# CPU model) must pass.
#
# Expected (the CPU model says so): agmm-v2-prefix fails the rank family on
# every GATHER copy and the position family on rank 0's second shard under
# K-varying x2 scales (x2=VAR) and passes under identity scales (x2=ID);
# agmm-v2-fixed passes everything; repeat passes; every switch passes (the
# GPU bytes are the model's bytes).
set -uo pipefail
out=${1:?usage: nccl_bi.sh OUTDIR}
bin=$(realpath "${MXBI_BIN:-target/release/mxbi}")
seal=$(realpath "$(dirname "$0")/bi_seal.py")
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
# NVLink multicast stays off (Ranks::open refuses otherwise)
export NCCL_NVLS_ENABLE=0
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
d="$out/captures/bi-nccl"
mkdir -p "$d" "$out/logs"
out=$(realpath "$out"); d=$(realpath "$d")
"$bin" device info --json >"$out/device.json" 2>"$out/logs/device-info.err" || { cat "$out/logs/device-info.err"; exit 2; }
{ "$bin" device info; nvidia-smi --query-gpu=name,driver_version --format=csv; nvidia-smi topo -m; } >"$d/info.txt" 2>&1
version=$("$bin" --version | awk '{print $2}')
: >"$d/runs.tsv"

K=1024; N=256
M=2,4,8,16,32,64,128          # world size 2: M must be even
MP=2,8,32,128                 # position (default rows 0,1,2,3,7,15,31,mid,last)
MR=2,16,128                   # repeat
deadline=$(( $(date +%s) + ${MXBI_NCCL_BUDGET:-480} ))
run() {  # run NAME GPU-SUBJECT CPU-SUBJECT ARGS...: skipped once the budget is spent
  local name=$1 gpu=$2 cpu=$3; shift 3
  local t0=$(date +%s) left=$(( deadline - $(date +%s) ))
  [ $left -lt 20 ] && { echo "$name skipped: time budget spent"; return; }
  timeout $left "$bin" bi run --subject "$gpu" "$@" --json "$d/$name.json" --markdown "$d/$name.md" \
    >"$out/logs/$name.log" 2>&1
  local rc=$?
  [ -f "$d/$name.json" ] || { echo "$name rc=$rc (no report): $(tail -2 "$out/logs/$name.log")"; return; }
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$gpu" "$cpu" "$rc" "$*" >>"$d/runs.tsv"
  echo "$name rc=$rc $(( $(date +%s) - t0 ))s: $(tail -1 "$out/logs/$name.log")"
  gzip -9nf "$d/$name.json"
}
# most telling first: the anti-pattern and its fix on the fma paths
for spec in prefix-fma-VAR fixed-fma-VAR prefix-fma-ID fixed-fma-ID prefix-wgmma-VAR fixed-wgmma-VAR prefix-wgmma-ID; do
  IFS=- read -r p paths x2 <<<"$spec"
  g="nccl:agmm-v2-$p,paths=$paths,x2=$x2"; c="op:agmm-v2-$p,paths=$paths,x2=$x2"
  tag="$p-$paths-$(echo "$x2" | tr A-Z a-z)"
  run "$tag-rank" "$g" "$c" --family rank --m $M --k $K --n $N --rows 0,1,mid,last
  # the GPU against the CPU model: rank 0's rows, every row of each batch
  run "$tag-switch" "$g" "$c" --vs "$c" --family switch --m $M --k $K --n $N
  run "$tag-position-all" "$g" "$c" --family position --rows all --m $M --k $K --n $N
  if [ "$paths" = fma ]; then
    run "$tag-position" "$g" "$c" --family position --m $MP --k $K --n $N
    run "$tag-repeat" "$g" "$c" --family repeat --m $MR --k $K --n $N
  fi
done
python3 "$seal" "$d" --suite bi --command "MXBI_BIN=mxbi bash reference/device/nccl_bi.sh OUTDIR" \
  --version "$version" --date "$date" --device "$out/device.json" \
  --note "nccl: subject on 2 GPUs (NCCL all-gather of x1 codes and scales, the generated Hopper GEMM kernels per path); K=$K N=$N"
echo "sealed $d ($(wc -l <"$d/runs.tsv") runs)"
