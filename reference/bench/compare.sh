#!/usr/bin/env bash
# The performance table in one command (docs/PERFORMANCE.md):
#
#   bash reference/bench/compare.sh
#
# 1. Python: $PYTHON if set; else reference/.venv (the oracle environment of
#    reference/requirements.txt) when it imports numpy, ml_dtypes and torchao;
#    else reference/bench/.venv, created here on first use
#    (git-ignored) and filled from reference/bench/requirements.txt with pip
#    (numpy, ml_dtypes, threadpoolctl; no torch: the torchao rows are then
#    skipped and say so).
# 2. Builds the release binary (cargo build --release --bin mxbi).
# 3. Runs reference/bench/paired.py: mxbi (`mxbi bench --serve`) and each
#    named peer measured alternately, ROUNDS paired rounds per comparison.
# 4. Writes target/bench-compare/{results.json,report.md} and prints the report.
#
# Environment: ROUNDS (default 7, at least 5 for the table), WINDOW (seconds
# per side per round, default 0.25), ELEMENTS (default 16777216 = 2^24),
# OUT_DIR (default target/bench-compare), PYTHON.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
ROUNDS="${ROUNDS:-7}"
WINDOW="${WINDOW:-0.25}"
ELEMENTS="${ELEMENTS:-16777216}"
OUT_DIR="${OUT_DIR:-$ROOT/target/bench-compare}"
VENV="$ROOT/reference/bench/.venv"

if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x reference/.venv/bin/python ]] &&
     reference/.venv/bin/python -c 'import numpy, ml_dtypes, torchao' 2>/dev/null; then
    PYTHON="$ROOT/reference/.venv/bin/python"
  else
    if ! "$VENV/bin/python" -c 'import numpy, ml_dtypes, threadpoolctl' 2>/dev/null; then
      echo "compare.sh: creating $VENV (pip: reference/bench/requirements.txt)" >&2
      python3 -m venv "$VENV"
      "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r reference/bench/requirements.txt
    fi
    PYTHON="$VENV/bin/python"
  fi
fi
"$PYTHON" -c 'import numpy, ml_dtypes' || {
  echo "compare.sh: $PYTHON cannot import numpy and ml_dtypes" >&2
  exit 2
}

echo "compare.sh: building the release binary" >&2
cargo build --release --quiet --bin mxbi
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR/results.json"

cpu_model="$(lscpu 2>/dev/null | awk -F: '/^Model name:/{sub(/^ +/, "", $2); print $2; exit}')"
cpu_ids="$(lscpu 2>/dev/null | awk -F: '/^CPU family:/{gsub(/ /,"",$2); f=$2} /^Model:/{gsub(/ /,"",$2); m=$2} END{print "family " f ", model " m}')"
mem="$(awk '/^MemTotal:/{printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
rev="$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
git diff --quiet HEAD -- src 2>/dev/null || rev="$rev + uncommitted changes under src/"
{
  echo "## Run"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- machine: $(nproc) CPUs, ${cpu_model:-unknown model} ($cpu_ids), $mem RAM"
  echo "- kernel: $(uname -r); rustc: $(rustc --version)"
  echo "- mxbi: $rev"
  echo "- command: \`bash reference/bench/compare.sh\` (ROUNDS=$ROUNDS WINDOW=$WINDOW ELEMENTS=$ELEMENTS)"
  echo
} > "$OUT_DIR/run.md"

# OpenBLAS picks its kernel for this CPU only with these unset.
# paired.py exits 1 (after writing results.json) when a peer's bytes differ
# from mxbi's; the report is still written, then this script exits 1.
status=0
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS \
  "$PYTHON" reference/bench/paired.py --mxbi "$ROOT/target/release/mxbi" --out "$OUT_DIR" \
  --elements "$ELEMENTS" --rounds "$ROUNDS" --window "$WINDOW" || status=$?
if [[ $status -ne 0 && $status -ne 1 ]] || [[ ! -f "$OUT_DIR/results.json" ]]; then
  echo "compare.sh: paired.py failed (exit $status)" >&2
  exit 2
fi
"$PYTHON" reference/bench/report.py "$OUT_DIR/results.json" > "$OUT_DIR/tables.md"
if (( ROUNDS < 5 )); then
  echo "**ROUNDS=$ROUNDS: fewer than 5 paired rounds; not for the table.**" >> "$OUT_DIR/run.md"
  echo >> "$OUT_DIR/run.md"
fi
cat "$OUT_DIR/run.md" "$OUT_DIR/tables.md" > "$OUT_DIR/report.md"
cat "$OUT_DIR/report.md"
echo "(results.json and report.md in $OUT_DIR)" >&2
exit "$status"
