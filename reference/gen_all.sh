#!/usr/bin/env bash
# Regenerate every file under reference/vectors/ (see README.md).
#   bash reference/gen_all.sh                 # everything (~25 min on 2 cores)
#   SKIP_EXHAUSTIVE=1 bash reference/gen_all.sh
# Optional, for the torchao HEAD oracles (else cached data in reference/data/ is reused):
#   TORCHAO_HEAD_SRC=/path/to/pytorch-ao-checkout TORCHAO_HEAD_COMMIT=<sha> bash reference/gen_all.sh
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/pip install -r requirements.txt
fi
# the release before ml_dtypes' current one, for the ml_dtypes@0.6 preset
OLD=".venv-ml_dtypes@0.6"
if [ ! -x "$OLD/bin/python" ]; then
  python3 -m venv "$OLD"
  "$OLD/bin/pip" install -r "requirements-ml_dtypes@0.6.txt"
fi
PY="$(pwd)/.venv/bin/python"
PY_OLD="$(pwd)/$OLD/bin/python"
mkdir -p vectors data
cd oracles
export PYTHONWARNINGS=ignore
"$PY" exhaustive.py selftest
"$PY" gen_decode.py ../vectors/decode.tsv
for o in ml_dtypes torch gfloat; do
  "$PY" gen_casts.py "$o" "../vectors/cast_$o.tsv.gz"
done
"$PY_OLD" gen_casts.py ml_dtypes "../vectors/cast_ml_dtypes@0.6.tsv.gz"
HEAD_ARGS=()
if [ -n "${TORCHAO_HEAD_SRC:-}" ]; then
  HEAD_ARGS=(--head-utils "$TORCHAO_HEAD_SRC/torchao/testing/_mxfp8_test_utils.py"
             --head-src "$TORCHAO_HEAD_SRC" --head-commit "${TORCHAO_HEAD_COMMIT:-unknown}")
fi
"$PY" gen_mx.py ../vectors/mx_cases.jsonl.gz "${HEAD_ARGS[@]}"
"$PY" report.py > ../DISAGREEMENTS.md
if [ "${SKIP_EXHAUSTIVE:-0}" != 1 ]; then
  # two processes, one per core
  "$PY" exhaustive.py ml_dtypes ../vectors/exhaustive_ml_dtypes.tsv > /tmp/exhaustive_ml_dtypes.log 2>&1 &
  p1=$!
  "$PY" exhaustive.py torch ../vectors/exhaustive_torch.tsv > /tmp/exhaustive_torch.log 2>&1 &
  p2=$!
  wait "$p1"; wait "$p2"
  "$PY_OLD" exhaustive.py ml_dtypes "../vectors/exhaustive_ml_dtypes@0.6.tsv" > "/tmp/exhaustive_ml_dtypes@0.6.log" 2>&1
fi
cd ..
(cd vectors && sha256sum $(ls | grep -v '^SHA256SUMS$') > SHA256SUMS)
echo "done"
