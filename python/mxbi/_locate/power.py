"""The power of the target's bytes at a GEMM-like op (docs/LOCATE.md,
"Evidence"; the checker's power, docs/BI.md): the fraction of pairs of
distinct orders of the explainer's family, for the op's input type and
output type, whose bytes differ on the target's rows of A with the op's
weights. Equal bytes at two batch sizes mean little where the power is
low; a revealed order means the same at any power."""

from __future__ import annotations

from typing import Any, List, Optional

import numpy as np
import torch

from .. import _mxbi
from .kinds import INPUT_TYPES
from .record import OpRecord

#: orders of the family sampled (evenly, by index) for one op
SAMPLE = 24


def _out_key(dtype: str) -> Optional[str]:
    return {"float32": "", "bfloat16": "out=bf16", "float16": "out=f16"}.get(dtype)


def gemm_power(kind: str, rec: OpRecord, a_slice: Optional[torch.Tensor]) -> Optional[float]:
    """The power (0..1) of the target's rows at a 2-D GEMM-like op, or None
    when it cannot be told (batched GEMMs, FP8, the slice or weights not kept)."""
    if a_slice is None or kind not in ("mm", "addmm", "linear"):
        return None
    ia, ib = (1, 2) if kind == "addmm" else (0, 1)
    w = rec.shared.get(ib)
    if w is None or len(rec.inputs) <= ib or not rec.outputs:
        return None
    t = INPUT_TYPES.get(rec.inputs[ia].dtype)
    out = _out_key(rec.outputs[0].dtype)
    if t not in ("f32", "bf16", "f16") or out is None:
        return None
    k = rec.inputs[ia].shape[-1]
    a = a_slice.float().reshape(-1, k).numpy()
    b = w.detach().float().cpu().numpy()
    b = b.T if kind == "linear" else b
    orders = [o for o in _mxbi.family(k, t) if (("out=" not in o) if not out else o.endswith(out))]
    if len(orders) < 2:
        return None
    step = max(1, len(orders) // SAMPLE)
    picked = orders[::step][:SAMPLE]
    from .. import gemm

    digests: List[Any] = []
    for o in picked:
        try:
            digests.append(np.asarray(gemm(a, np.ascontiguousarray(b), order=o)).tobytes())
        except ValueError:  # an order the inputs do not fit
            continue
    n = len(digests)
    if n < 2:
        return None
    differ = sum(digests[i] != digests[j] for i in range(n) for j in range(i + 1, n))
    return differ / (n * (n - 1) / 2)
