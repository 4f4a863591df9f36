#!/usr/bin/env bash
# One command: build release, run `mxbi bench --json` (all threads and one
# thread) and the Python peers in the same run, print markdown ratio tables.
#
#   bash reference/bench/compare.sh [N]          # N defaults to 2^24
#
# Environment:
#   PYTHON   interpreter with numpy, ml_dtypes (and torch/torchao for the
#            torchao peer); default reference/.venv/bin/python
#   OUT_DIR  where the JSON and the markdown go; default target/bench-compare
#   REPS     timed repetitions for mxbi (default 9); PEER_REPS for peers (5)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
N="${1:-16777216}"
REPS="${REPS:-9}"
PEER_REPS="${PEER_REPS:-5}"
OUT_DIR="${OUT_DIR:-$ROOT/target/bench-compare}"
PYTHON="${PYTHON:-$ROOT/reference/.venv/bin/python}"
if [[ ! -x "$PYTHON" ]]; then
  echo "compare.sh: no Python at $PYTHON (set PYTHON=...; it needs numpy, ml_dtypes, torch, torchao)" >&2
  exit 2
fi
mkdir -p "$OUT_DIR"

cargo build --release --quiet --bin mxbi
MXBI="$ROOT/target/release/mxbi"

{
  echo "## Run"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
       "($(lscpu 2>/dev/null | awk -F: '/^Model:/{gsub(/ /,"",$2); print "model " $2}'))"
  echo "- kernel: $(uname -r); rustc: $(rustc --version)"
  echo "- mxbi: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src 2>/dev/null || echo ' + uncommitted src changes')"
  echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- command: \`bash reference/bench/compare.sh $N\` (REPS=$REPS PEER_REPS=$PEER_REPS), which ran:"
  echo "  - \`mxbi bench --elements $N --reps $REPS --json\`"
  echo "  - \`mxbi bench --elements $N --reps $REPS --threads 1 --json\`"
  echo "  - \`python reference/bench/peers.py --elements $N --reps $PEER_REPS\`"
  echo
} > "$OUT_DIR/run.md"

"$MXBI" bench --elements "$N" --reps "$REPS" --json > "$OUT_DIR/mxbi.json"
"$MXBI" bench --elements "$N" --reps "$REPS" --threads 1 --json > "$OUT_DIR/mxbi_1thread.json"
"$PYTHON" reference/bench/peers.py --elements "$N" --reps "$PEER_REPS" > "$OUT_DIR/peers.json" \
  2> >(grep -v 'register_constant\|^ *_\?torch\._\|is an Enum subclass' >&2)
echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT_DIR/run.md"
echo >> "$OUT_DIR/run.md"

"$PYTHON" reference/bench/report.py "$OUT_DIR/mxbi.json" "$OUT_DIR/mxbi_1thread.json" "$OUT_DIR/peers.json" \
  > "$OUT_DIR/tables.md"
cat "$OUT_DIR/run.md" "$OUT_DIR/tables.md" | tee "$OUT_DIR/report.md"
echo "(JSON and report.md in $OUT_DIR)" >&2
