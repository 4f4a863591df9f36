#!/usr/bin/env bash
# mxbi in CI, in one script: the batch-invariance check of a case file, then
# the fuzzer with a kept regression corpus. The GitHub Actions workflow next
# to it (mxbi.yml) calls this script; run it locally the same way.
#
# Usage: mxbi-ci.sh MXBI CASE.json CORPUS_DIR [OUT_DIR]
#   MXBI        the mxbi binary (a path, or a name on PATH)
#   CASE.json   a case file (mxbi-bi-case/1; `mxbi bi schema`)
#   CORPUS_DIR  the fuzzer's regression corpus: replayed first, a new
#               minimal failing case is saved there (keep it between runs)
#   OUT_DIR     where the reports go (default: mxbi-out)
#
# Steps:
#   1. mxbi bi run CASE.json --junit OUT/bi.xml --markdown OUT/bi.md --json OUT/bi.json
#   2. mxbi fuzz --subject SUBJECT --corpus CORPUS_DIR --out OUT/fuzz
#      (output also in OUT/fuzz.txt), run from the case file's folder so
#      the subject's relative paths mean what they mean in the case.
#      SUBJECT: $MXBI_FUZZ_SUBJECT, else the case file's "subject".
# Both steps run (the fuzzer also after a failing check, unless the check
# could not run). With $GITHUB_STEP_SUMMARY set (GitHub Actions), the
# Markdown report and the fuzzer's result are added to the job's summary.
#
# Environment:
#   MXBI_FUZZ_BUDGET   seconds of new fuzz cases (default 60)
#   MXBI_FUZZ_SEED     the fuzzer's seed (default 1; the same seed draws the
#                      same cases: the workflow passes the run number)
#   MXBI_FUZZ_ARGS     more `mxbi fuzz` flags, split on spaces
#                      (e.g. "--max-k 1024 --families batch,content")
#   MXBI_FUZZ_SUBJECT  the subject to fuzz, instead of the case's
#   MXBI_ALLOW_EXEC    1: a case file whose subject is `exec:CMD` may run
#                      CMD (docs/BI.md, "Case files are data"); without it
#                      such a case stops the script at step 1 (exit 2)
#
# Exit status: 0 every check held; 1 a check failed (a BI_FAIL cell, or the
# fuzzer found a failing case); 2 cannot run (bad arguments, a missing
# binary or file, a case mxbi refuses).
set -uo pipefail

die() {
  echo "mxbi-ci: $*" >&2
  exit 2
}

[ $# -ge 3 ] && [ $# -le 4 ] || die "usage: mxbi-ci.sh MXBI CASE.json CORPUS_DIR [OUT_DIR]"

# absolute paths: the fuzz step runs in the case file's folder
abs() {
  case "$1" in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s\n' "$PWD/$1" ;;
  esac
}

mxbi="$1"
case "$mxbi" in
  */*) mxbi="$(abs "$mxbi")" ;;
  *) mxbi="$(command -v "$mxbi")" || die "$1: no such command on PATH" ;;
esac
[ -x "$mxbi" ] && [ -f "$mxbi" ] || die "$1: not an executable file"
case_file="$(abs "$2")"
[ -f "$case_file" ] || die "$2: no such case file"
corpus="$(abs "$3")"
out="$(abs "${4:-mxbi-out}")"
mkdir -p "$out" "$corpus" || die "cannot create $out or $corpus"

budget="${MXBI_FUZZ_BUDGET:-60}"
seed="${MXBI_FUZZ_SEED:-1}"

# --- 1. the check -----------------------------------------------------------
echo "== mxbi bi run $2"
"$mxbi" bi run "$case_file" --junit "$out/bi.xml" --markdown "$out/bi.md" --json "$out/bi.json"
bi_rc=$?
case "$bi_rc" in
  0 | 1) ;;
  *) die "mxbi bi run $2 could not run (exit $bi_rc)" ;;
esac

# --- 2. the fuzzer ----------------------------------------------------------
subject="${MXBI_FUZZ_SUBJECT:-}"
if [ -z "$subject" ]; then
  # the case's "subject" string (a case file is JSON; mxbi checked it in step 1)
  subject="$(tr -d '\n' <"$case_file" | sed -n 's/.*"subject"[[:space:]]*:[[:space:]]*"\([^"\\]*\)".*/\1/p')"
  [ -n "$subject" ] || die "$2: cannot read its \"subject\"; set MXBI_FUZZ_SUBJECT"
fi
# shellcheck disable=SC2206 # MXBI_FUZZ_ARGS is split on spaces on purpose
extra=(${MXBI_FUZZ_ARGS:-})
echo "== mxbi fuzz --subject $subject --seed $seed --budget $budget (corpus $3)"
(
  cd "$(dirname "$case_file")" || exit 2
  "$mxbi" fuzz --subject "$subject" --seed "$seed" --budget "$budget" \
    --corpus "$corpus" --out "$out/fuzz" "${extra[@]}"
) 2>&1 | tee "$out/fuzz.txt"
fuzz_rc=${PIPESTATUS[0]}
case "$fuzz_rc" in
  0 | 1) ;;
  *) die "mxbi fuzz --subject $subject could not run (exit $fuzz_rc)" ;;
esac

# --- the summary ------------------------------------------------------------
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  {
    cat "$out/bi.md"
    printf '\n## mxbi fuzz (seed %s)\n\n```\n' "$seed"
    cat "$out/fuzz.txt"
    printf '```\n'
  } >>"$GITHUB_STEP_SUMMARY"
fi

echo "== mxbi-ci: bi run exit $bi_rc, fuzz exit $fuzz_rc; reports in $out"
if [ "$bi_rc" -eq 1 ] || [ "$fuzz_rc" -eq 1 ]; then
  exit 1
fi
exit 0
