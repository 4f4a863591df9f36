#!/usr/bin/env bash
# mxbi fuzz speed (docs/PERFORMANCE.md, "Fuzzer"): seconds to find and shrink
# the failure of a dispatch table that fails only past one M boundary (16)
# and one K range (K > 64), per seed, with the shrunk M and K; then cases per
# second on the model subject. Prints medians; no Python needed.
#   bash reference/bench/fuzz.sh            SEEDS="1 2 3 4 5 6 7" BUDGET=20 ROUNDS=3
set -euo pipefail
cd "$(dirname "$0")/../.."
SEEDS=${SEEDS:-"1 2 3 4 5 6 7"}
BUDGET=${BUDGET:-20}
ROUNDS=${ROUNDS:-3}
cargo build --release --bin mxbi >&2
BIN=$PWD/target/release/mxbi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo '{"dispatch": [{"m_max": 16, "order": "fma"}, {"k_max": 64, "order": "fma"}, {"order": "fma;split=4"}]}' > "$WORK/table.json"
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo "== dispatch table (fails for M > 16 and K > 64): find + shrink, whole command"
times=()
for s in $SEEDS; do
  rm -rf "$WORK/o"
  t0=$(date +%s.%N)
  (cd "$WORK" && "$BIN" fuzz --subject dispatch:table.json --seed "$s" --out o --budget 60 > log.txt) || true
  t1=$(date +%s.%N)
  t=$(echo "$t1 - $t0" | bc -l)
  shrunk=$(grep -o 'to: [a-z]* m=[0-9]*\( (baseline [0-9]*)\)\? k=[0-9]*' "$WORK/log.txt" | cut -c5-)
  cases=$(grep -o 'cases tried: [0-9]*' "$WORK/log.txt")
  runs=$(grep -o 'shrunk ([0-9]* runs)' "$WORK/log.txt")
  printf 'seed %s: %.2f s, %s, %s, minimal %s\n' "$s" "$t" "$cases" "$runs" "$shrunk"
  times+=("$t")
done
printf 'median %.2f s, min %.2f s, max %.2f s over %d seeds\n' \
  "$(printf '%s\n' "${times[@]}" | median)" "$(printf '%s\n' "${times[@]}" | sort -g | head -1)" \
  "$(printf '%s\n' "${times[@]}" | sort -g | tail -1)" "${#times[@]}"
for subject in "model:fma" "model:hopper-bf16"; do
  echo "== $subject: cases per second (budget $BUDGET s, $ROUNDS rounds)"
  rates=()
  for r in $(seq "$ROUNDS"); do
    rm -rf "$WORK/p"
    line=$(cd "$WORK" && "$BIN" fuzz --subject "$subject" --seed "$r" --out p --budget "$BUDGET" | grep 'cases tried')
    echo "round $r: $line"
    rates+=("$(echo "$line" | grep -o '[0-9.]* cases/s' | cut -d' ' -f1)")
  done
  echo "median $(printf '%s\n' "${rates[@]}" | median) cases/s"
done
