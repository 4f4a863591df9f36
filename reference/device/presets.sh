#!/usr/bin/env bash
# The two ml_dtypes presets over every f32 input, on the device machine's
# CPUs (16 cores: about 4 minutes a preset; on this 2-core machine about
# 30), with test binaries built here:
#
#   cargo test --release --no-run --test oracles --test exhaustive_presets
#   mkdir -p .devbin && cp target/release/deps/{oracles,exhaustive_presets}-<hash> .devbin/
#   bash reference/device/presets.sh OUTDIR [digests] [f32] [f64:FORMATS]
#
# digests: `oracles --ignored` for ml_dtypes (0.7.0) and ml_dtypes@0.6
#   (0.6.0): mxbi's codes of all 2^32 f32 inputs, SHA-256 per 2^24-input
#   chunk, against each release's digests (reference/vectors/exhaustive_*).
# f32: `exhaustive_presets --ignored` f32 walks of both presets against the
#   test's independent formulation of their rules.
# f64:FORMATS: the structured f64 walk of `ml_dtypes` (the preset whose f64
#   rule changed: rounded once) for the comma-separated formats.
#
# The binaries find reference/ through the path they were built in
# (CARGO_MANIFEST_DIR, /work/main here): that path is linked to this tree.
set -uo pipefail
out=${1:?usage: presets.sh OUTDIR [digests] [f32] [f64:FORMATS]}
shift
mkdir -p "$out"
root=$(pwd)
built=${MXBI_BUILT_IN:-/work/main}
if [ "$(realpath "$built" 2>/dev/null)" != "$root" ]; then
  mkdir -p "$(dirname "$built")" && ln -sfn "$root" "$built"
fi
{ echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(git rev-parse --short HEAD 2>/dev/null || echo '?')"; } >"$out/info.txt"
for part in "$@"; do
  case $part in
    digests)
      for t in all_f32_casts_match_ml_dtypes_exhaustively all_f32_casts_match_ml_dtypes_0_6_exhaustively; do
        echo "## oracles --ignored --exact $t" >>"$out/digests.txt"
        .devbin/oracles --ignored --exact --nocapture "$t" >>"$out/digests.txt" 2>&1
        echo "rc=$?" >>"$out/digests.txt"
      done ;;
    f32)
      for t in full_f32_walk_ml_dtypes full_f32_walk_ml_dtypes_0_6; do
        echo "## exhaustive_presets --ignored --exact $t" >>"$out/walks.txt"
        .devbin/exhaustive_presets --ignored --exact --nocapture --test-threads=1 "$t" >>"$out/walks.txt" 2>&1
        echo "rc=$?" >>"$out/walks.txt"
      done ;;
    f64:*)
      echo "## MXBI_WALK_FORMATS=${part#f64:} exhaustive_presets --ignored --exact full_f64_walk_ml_dtypes" >>"$out/walks.txt"
      MXBI_WALK_FORMATS=${part#f64:} .devbin/exhaustive_presets --ignored --exact --nocapture --test-threads=1 \
        full_f64_walk_ml_dtypes >>"$out/walks.txt" 2>&1
      echo "rc=$?" >>"$out/walks.txt" ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done
