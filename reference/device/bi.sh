#!/usr/bin/env bash
# The checker on real kernels (issue 11 item 8), in one call on a machine with
# an NVIDIA GPU, PyTorch and Triton, and the prebuilt binary (built elsewhere
# with `cargo build --release --features cuda`).
#
#   MXBI_BIN=path/to/mxbi MXBI_EXAMPLES=examples bash reference/device/bi.sh OUTDIR
#
# 1. Dump captures (committed, replayed in CI by tests/capture_bi.rs): for each
#    runner in DUMPS, `mxbi bi gen` writes the jobs of a small check (K = 64,
#    N = 16), examples/fill_dump.py has the runner write every out.npy,
#    `bi run --subject dump:` records the verdicts (report.json) and the same
#    check run live through `exec:` records live.json; bi_seal.py writes the
#    capture manifest. OUTDIR/captures/bi-<name>/.
# 2. Live checks (OUTDIR/captures/bi-live/): every cuBLAS/cuBLASLt subject at
#    docs/DEVICE.md's shapes (N = 2048, K = 2048 and 7168) over the edge M
#    values and the vendor table's M (up to 1024), families batch, position,
#    content, plus repeat; three generated-kernel subjects; every runner at
#    K = N = 2048 (bf16/FP8 runners also at K = 7168, batch family).
# Tasks run in parallel (the GPU work is small; the CPU side draws inputs and
# runs the vacuity model); each is bounded by `timeout`.
set -uo pipefail
out=${1:?usage: bi.sh OUTDIR}
bin=$(realpath "${MXBI_BIN:-target/release/mxbi}")
ex=$(realpath "${MXBI_EXAMPLES:-examples}")
seal=$(realpath "$(dirname "$0")/bi_seal.py")
jobs=${MXBI_BI_JOBS:-12}
# stages (comma-separated): smoke (each runner's output vs the f64 product), vendor
# (cuBLAS/cuBLASLt live checks and a switch against the CPU model), vendor2 (see there),
# cuda (generated
# kernels), dumps (the dump captures), runners (live checks through exec:),
# switches (the library subjects against the runners that call the same library;
# the runner is told the library's input type), anchor (the te-anchor matrix,
# seed 001's table, on the bf16 library subjects and the torch bf16 runner)
stages=,${MXBI_BI_STAGES:-smoke,vendor,vendor2,cuda,dumps,runners,switches,anchor},
on() { case "$stages" in *,$1,*) return 0;; esac; return 1; }
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
export PYTHONUNBUFFERED=1
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
mkdir -p "$out/captures/bi-live" "$out/logs" "$out/tasks"
out=$(realpath "$out")
export TMPDIR=${MXBI_TMP:-/dev/shm/mxbi-bi}; mkdir -p "$TMPDIR"
"$bin" device info --json >"$out/device.json" 2>"$out/logs/device-info.err" || { cat "$out/logs/device-info.err"; exit 2; }
{ "$bin" device info; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
  python3 -c 'import torch, triton, numpy; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "numpy", numpy.__version__)'
} >"$out/logs/info.txt" 2>&1
version=$("$bin" --version | awk '{print $2}')

L=1,2,4,8,9,16,17,32,33,64,65,128,129,256,257,512,513,1024   # edges + the vendor table's M (<= 1024)
R=1,2,17,64,128,257,1024                                     # repeat (all rows compared)
DUMP_M=1,2,8,9,16,17,32,33,63,64,65,128
n=0
deadline=$(( $(date +%s) + ${MXBI_BI_BUDGET:-420} ))
task() {  # task NAME CMD: one task script, skipped or cut short at the deadline
  n=$((n + 1))
  printf 'cd %q; t0=$(date +%%s); left=$(( %s - t0 )); [ $left -gt 300 ] && left=300
[ $left -lt 15 ] && { echo "%s skipped: time budget spent" >>%q; exit 0; }
timeout $left bash -c %q >%q 2>&1; rc=$?; echo "%s rc=$rc $(( $(date +%%s) - t0 ))s" >>%q\n' \
    "$PWD" "$deadline" "$1" "$out/logs/tasks.txt" "$2" "$out/logs/$1.log" "$1" "$out/logs/tasks.txt" >"$out/tasks/$(printf %03d $n)-$1.sh"
}

# --- 0. runner smoke tests ----------------------------------------------------
smoke() {  # smoke NAME INPUT RUNNER-COMMAND
  task "smoke-$1" "MXBI_FILL_DUMP=$ex/fill_dump.py python3 $(dirname "$seal")/runner_smoke.py \$TMPDIR/smoke-$1 $2 $3"
}
if on smoke; then
  smoke torch-matmul-f32 f32 "python3 $ex/runner_torch.py matmul f32 --tf32 off"
  smoke torch-linear-f32-tf32on f32 "python3 $ex/runner_torch.py linear f32 --tf32 on"
  smoke torch-matmul-bf16 bf16 "python3 $ex/runner_torch.py matmul bf16"
  smoke torch-linear-bf16 bf16 "python3 $ex/runner_torch.py linear bf16"
  smoke torch-scaled-mm-fp8 e4m3 "python3 $ex/runner_torch_scaled_mm.py"
  smoke triton-fixed bf16 "python3 $ex/runner_triton_fixed.py"
  smoke triton-splitk bf16 "python3 $ex/runner_triton_splitk.py"
fi

# --- 1. dump captures --------------------------------------------------------
dump() {  # dump NAME INPUT RUNNER-COMMAND
  local name=$1 input=$2 runner=$3 d="$out/captures/bi-$1"
  local args="--family batch,position,content --m $DUMP_M --k 64 --n 16 --rows 0,mid,last --input $input --seed 1"
  mkdir -p "$d"
  echo "$args" >"$d/args.txt"
  echo "$runner" >"$d/runner.txt"
  local cmd="set -e
$bin bi gen --out $d/dump --subject 'exec:$runner' $args
python3 $ex/fill_dump.py $d/dump $runner
$bin bi run --subject dump:$d/dump $args --json $d/report.json --markdown $d/report.md || [ \$? = 1 ]
$bin bi run --subject 'exec:$runner' $args --json $d/live.json --markdown $d/live.md || [ \$? = 1 ]
python3 $seal $d --version $version --date $date --device $out/device.json \
  --command 'MXBI_BIN=mxbi MXBI_EXAMPLES=examples bash reference/device/bi.sh OUTDIR  # dump capture $name: bi gen / fill_dump.py / bi run --subject dump: / bi run --subject exec: with the options in args.txt, runner in runner.txt'"
  task "dump-$name" "$cmd"
}
if on dumps; then
  dump triton-splitk bf16 "python3 $ex/runner_triton_splitk.py"
  dump triton-fixed bf16 "python3 $ex/runner_triton_fixed.py"
  dump torch-matmul-f32 f32 "python3 $ex/runner_torch.py matmul f32 --tf32 off"
  dump torch-scaled-mm-fp8 e4m3 "python3 $ex/runner_torch_scaled_mm.py"
fi

# --- 2. live checks ------------------------------------------------------------
live() {  # live NAME SUBJECT ARGS...
  local name=$1 subject=$2; shift 2
  local r="$out/captures/bi-live/$name"
  echo "$name	$subject	$*" >>"$out/captures/bi-live/runs.tsv"
  task "live-$name" "$bin bi run --subject $(printf %q "$subject") $(printf '%q ' "$@")--json $r.json --markdown $r.md; rc=\$?; gzip -9n $r.json; exit \$rc"
}
for s in cublas:sgemm cublas:gemmex-bf16 cublaslt:f32 cublaslt:bf16 cublaslt:fp8-tensor cublaslt:fp8-blk128; do
  on vendor || break
  # the values, not only their invariance: the subject against the CPU model (max ULP)
  live "$(echo "$s" | tr ':' '-')-vs-model" "$s" --vs model:fma --family switch --m 4,16 --k 2048 --n 2048
  for p in "" ":pinned"; do
    case "$s$p" in cublas:*:pinned) continue;; esac
    slug=$(echo "$s$p" | tr ':' '-')
    for k in 7168 2048; do
      live "$slug-k$k" "$s$p" --family batch,position,content --m $L --k $k --n 2048
    done
    live "$slug-repeat" "$s$p" --family repeat --m $R --k 2048 --n 2048
  done
done
runner() {  # runner NAME INPUT K7168(yes/no) COMMAND
  local name=$1 input=$2 big=$3 cmd=$4
  live "$name-k2048" "exec:$cmd" --family batch,position,content --m $L --k 2048 --n 2048 --rows 0,mid,last --input $input
  live "$name-repeat" "exec:$cmd" --family repeat --m 1,2,17,64,128,257 --k 2048 --n 2048 --input $input
  [ "$big" = yes ] && live "$name-k7168" "exec:$cmd" --family batch --m $L --k 7168 --n 2048 --rows 0 --input $input
  return 0
}
on runners && {
runner torch-matmul-bf16 bf16 yes "python3 $ex/runner_torch.py matmul bf16"
runner torch-linear-bf16 bf16 yes "python3 $ex/runner_torch.py linear bf16"
runner torch-scaled-mm-fp8 e4m3 yes "python3 $ex/runner_torch_scaled_mm.py"
runner triton-splitk bf16 no "python3 $ex/runner_triton_splitk.py"
runner triton-fixed bf16 no "python3 $ex/runner_triton_fixed.py"
runner torch-matmul-f32-tf32off f32 no "python3 $ex/runner_torch.py matmul f32 --tf32 off"
runner torch-matmul-f32-tf32on f32 no "python3 $ex/runner_torch.py matmul f32 --tf32 on"
runner torch-linear-f32-tf32off f32 no "python3 $ex/runner_torch.py linear f32 --tf32 off"
runner torch-linear-f32-tf32on f32 no "python3 $ex/runner_torch.py linear f32 --tf32 on"
# a library subject and a runner that calls the same library on the same batches
live sgemm-vs-torch-matmul-f32 cublas:sgemm --vs "exec:python3 $ex/runner_torch.py matmul f32 --tf32 off" --family switch --m 1,17,128,1024 --k 2048 --n 2048
}
# the runner is told the library subject's input type (bf16, e4m3) without --input
on switches && {
live gemmex-bf16-vs-torch-matmul-bf16 cublas:gemmex-bf16 --vs "exec:python3 $ex/runner_torch.py matmul bf16" --family switch --m 1,17,128,1024 --k 2048 --n 2048
live lt-fp8-tensor-vs-scaled-mm cublaslt:fp8-tensor --vs "exec:python3 $ex/runner_torch_scaled_mm.py" --family switch --m 16,128,1024 --k 2048 --n 2048
}
# seed 001's table: the row alone vs at 0, mid, last of M 2..1024, K = N = 2048, bf16
on anchor && {
live te-anchor-cublas-gemmex-bf16 cublas:gemmex-bf16 --matrix te-anchor
live te-anchor-cublaslt-bf16 cublaslt:bf16 --matrix te-anchor
live te-anchor-torch-matmul-bf16 "exec:python3 $ex/runner_torch.py matmul bf16" --matrix te-anchor
}
# vendor2: the runs of `vendor` that need less work or another M list: at K = 7168 the
# bf16/FP8 subjects by the batch family alone (row 0 against M = 1, the vendor table's
# comparison), and the block-scaled FP8 case, which cuBLASLt refuses unless M % 4 == 0,
# over multiples of 4 (its batch baseline M = 4, as the vendor table)
M4=4,8,16,32,64,128,256,512,1024
if on vendor2; then
  for s in cublas:gemmex-bf16 cublaslt:bf16 cublaslt:bf16:pinned cublaslt:fp8-tensor cublaslt:fp8-tensor:pinned; do
    live "$(echo "$s" | tr ':' '-')-k7168-batch" "$s" --family batch --m $L --k 7168 --n 2048
  done
  for s in cublaslt:fp8-blk128 cublaslt:fp8-blk128:pinned; do
    slug=$(echo "$s" | tr ':' '-')
    live "$slug-m4-k2048" "$s" --family batch,position,content --m $M4 --k 2048 --n 2048
    live "$slug-m4-k7168-batch" "$s" --family batch --m $M4 --k 7168 --n 2048
  done
fi
for o in "fma" "fma;split=4;reduce=pairwise" "hopper-bf16"; do
  on cuda || break
  slug=cuda-$(echo "$o" | tr ';=' '-_')
  live "$slug" "cuda:$o" --family batch,position,content,repeat --k 2048 --n 256
  # the generated kernels are bit-exact to the model: the switch must pass
  live "$slug-vs-model" "cuda:$o" --vs "model:$o" --family switch --m 1,17,65 --k 2048 --n 256
done

t0=$(date +%s)
ls "$out/tasks"/*.sh | xargs -P "$jobs" -n 1 bash
echo "all tasks: rc=$? in $(( $(date +%s) - t0 )) s ($n tasks, $jobs at a time)" | tee -a "$out/logs/tasks.txt"
cp "$out/logs/info.txt" "$out/captures/bi-live/info.txt"
python3 "$seal" "$out/captures/bi-live" --version "$version" --date "$date" --device "$out/device.json" \
  --command "MXBI_BIN=mxbi MXBI_EXAMPLES=examples bash reference/device/bi.sh OUTDIR  # live checks: one line of runs.tsv each (name, subject, options)"
