#!/bin/bash
# issue 26: torch's f32 GEMV at N = 64 after the links / translated-subtree code (HEAD 7abd001), FPRev side by side
# (.devbin/py13: the wheel of the working tree, `pip install --no-deps --target .devbin/py13 ./python`;
#  .devbin/fprev: FPRev's fprev.py at github.com/peichenxie/FPRev HEAD and the graphviz 0.21 wheel, unzipped)
set -x
export PYTHONPATH=$PWD/.devbin/py13:$PWD/.devbin/fprev
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
git log --oneline -1 > $OUT/rev.txt 2>/dev/null || true
python3 reference/bench/reveal_fprev.py --fprev .devbin/fprev $OUT/gemv.jsonl --kernel torch-f32,triton-f32 --rounds 5 --narrow bf16,f16 --narrow-n 64 --shapes 1x64,64x64 --budget 300 --subject on_device > $OUT/main.txt 2>&1
python3 reference/bench/reveal_fprev.py --fprev .devbin/fprev $OUT/plain.jsonl --kernel torch-f32 --rounds 3 --narrow '' --shapes 1x64 --budget 100 --subject plain > $OUT/plain.txt 2>&1
cd $OUT && tar czf all.tgz *.txt *.jsonl && ls -la
tail -40 $OUT/main.txt
