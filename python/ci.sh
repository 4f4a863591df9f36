#!/usr/bin/env bash
# The Python binding's CI (called by .ci/run): a fresh venv, the documented
# install (`pip install ./python`, maturin builds the extension), then the
# pytest suite. The build shares the root's target directory, so the
# dependencies and the mxbi library that the root's release build compiled
# are reused (python/Cargo.toml keeps the root's release profile for that).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

python="${PYTHON:-python3}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
venv="$CARGO_TARGET_DIR/python-ci-venv"

echo "== python binding: fresh venv ($("$python" --version)), pip install ./python pytest numpy"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check ./python pytest numpy

# torch for mxbi.torch.locate and the torch tests (python/tests/test_locate.py,
# test_torch.py): PyPI's wheel (with its CUDA libraries, which torch loads even
# on a machine without a GPU; about 2.5 minutes on the CI machine)
echo "== python binding: pip install torch"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check torch

# the CLI the byte-comparison tests run (built by the root's release build)
if [ -z "${MXBI_BIN:-}" ] && [ -x "$CARGO_TARGET_DIR/release/mxbi" ]; then
  export MXBI_BIN="$CARGO_TARGET_DIR/release/mxbi"
fi

echo "== python binding: pytest python/tests"
"$venv/bin/pytest" python/tests -q -p no:cacheprovider
