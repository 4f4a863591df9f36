#!/bin/bash
# issue 26, thirteenth session, the working tree of 7c95a5c + `align` (split parts that start on multiples of A):
# (1) NVRTC kernels of every fixed order (now with fma;split=3;align=64 and hopper-bf16;split=3;align=128) and 8
#     random ones vs the CPU model: `mxbi device conform --quick`, the capture in $OUT/conform;
# (2) torch.matmul's narrow GEMVs (bf16 / f16, N = 64 and 4096) revealed again, 3 rounds: named now?
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PYTHONPATH=$PWD/.devbin/py13:$PWD/.devbin/fprev
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
cat $OUT/gpu.txt
echo "7c95a5c + align (working tree)" > $OUT/rev.txt
.devbin/mxbi-cuda device conform --quick --out $OUT > $OUT/conform.txt 2>&1
echo "exit $?" >> $OUT/conform.txt
tail -8 $OUT/conform.txt
mkdir -p $OUT/trees
python3 reference/bench/reveal_fprev.py --fprev .devbin/fprev $OUT/narrow.jsonl --kernel '' --narrow bf16,f16 --narrow-n 64,4096 --rounds 3 --budget 200 --subject on_device --trees $OUT/trees > $OUT/narrow.txt 2>&1
echo "exit $?" >> $OUT/narrow.txt
tail -9 $OUT/narrow.txt
ls -la $OUT $OUT/conform | head -30
