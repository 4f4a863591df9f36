"""numpy's f32 matmul (its BLAS) as an mxbi subject, e.g.

    mxbi bi run --subject 'exec:python3 examples/runner_numpy_f32.py' \
        --family content,batch,position --m 1,2,17,64 --k 512 --n 64
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mxbi_runner import serve  # noqa: E402

serve(lambda a, b: np.matmul(a, b, dtype=np.float32), f"numpy-{np.__version__}-matmul-f32")
