#!/bin/bash
# issue 26: the card; the trees of the narrow GEMVs (bf16 / f16, N = 64 and 4096) and of the f32 GEMVs at N = 64, one round;
# on an H200 only, the whole table (5 rounds). Wheel: the working tree of 80ab8c7 + reveal_fprev.py --trees.
export PYTHONPATH=$PWD/.devbin/py13:$PWD/.devbin/fprev
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
cat $OUT/gpu.txt
echo "80ab8c7 + --trees" > $OUT/rev.txt
mkdir -p $OUT/trees
python3 reference/bench/reveal_fprev.py --fprev .devbin/fprev $OUT/trees.jsonl --kernel torch-f32,triton-f32 --shapes 1x64 --narrow bf16,f16 --narrow-n 64,4096 --rounds 1 --budget 150 --subject on_device --trees $OUT/trees > $OUT/trees.txt 2>&1
echo "exit $?" >> $OUT/trees.txt
tail -14 $OUT/trees.txt
if false && grep -q H200 $OUT/gpu.txt; then
  python3 reference/bench/reveal_fprev.py --fprev .devbin/fprev $OUT/table.jsonl --kernel triton-f32,torch-f32 --rounds 5 --narrow bf16,f16 --narrow-n 64,4096 --budget 400 --subject on_device > $OUT/table.txt 2>&1
  echo "exit $?" >> $OUT/table.txt
  tail -24 $OUT/table.txt
fi
ls -la $OUT $OUT/trees
