# The device script of 2026-12-01 (one H200): the one-GPU sequential-rank
# AllGatherMatmul captures at WS 4 and 8, and `mxbi fuzz` on the Triton
# split-K / fixed runners and cublas:sgemm with the minimal cases replayed.
# Run from the repository root with the cuda binary at .devbin/mxbi-cuda:
#   OUT=DIR bash reference/device/fuzz_seq.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64; B=$PWD/.devbin/mxbi-cuda; ex=$PWD/examples
W=/tmp/w; mkdir -p $W
( $B device info && $B device collective --sequential --world 4 --out $W && $B device collective --sequential --world 8 --out $W; $B device replay --unanchored $W ) > $OUT/seq.log 2>&1; echo seq rc=$?
tar czf $OUT/seq.tgz -C $W .
for s in "triton-splitk:exec:python3 $ex/runner_triton_splitk.py:150" "triton-fixed:exec:python3 $ex/runner_triton_fixed.py:60" "cublas-sgemm:cublas:sgemm:60"; do
  name=${s%%:*}; rest=${s#*:}; budget=${rest##*:}; subj=${rest%:*}
  inp=bf16; [ $name = cublas-sgemm ] && inp=f32
  /usr/bin/time -v timeout 200 $B fuzz --subject "$subj" --input $inp --budget $budget --seed 1 --out /tmp/fz/$name > /tmp/fz-$name.log 2>&1; echo "$name fuzz rc=$?" | tee -a $OUT/fuzz-rc.txt
  if [ -f /tmp/fz/$name/minimal.json ]; then (cd /tmp/fz/$name && timeout 100 $B bi run minimal.json > replay.txt 2>&1; echo "replay rc=$?" >> replay.txt); fi
  cp /tmp/fz-$name.log /tmp/fz/$name/ 2>/dev/null
done
tar czf $OUT/fuzz.tgz -C /tmp fz
