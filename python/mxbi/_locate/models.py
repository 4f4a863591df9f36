"""Exact models of nonlinear reductions, for identifying the order of
their sum by search (docs/LOCATE.md, "What is explained").

Each model follows torch's own decomposition of the op, with the one sum
in it evaluated by mxbi in a candidate order of the explainer's family and
every other step rounded as torch rounds it on the op's device (the
elementwise steps run in torch on that device: its ``exp``, ``log``,
``rsqrt``). An order *matches* when the model's bytes equal the op's on
every row of the target's slice. Models:

- ``rms_norm`` (``x, weight, eps``; aten's ``rms_norm``): in float32,
  ``s = sum(x*x)``, ``r = rsqrt(s / K + eps)``, ``y = (x * r)`` cast to
  x's type, times ``weight``.
- ``softmax``: ``e = exp(x - max)``, ``s = sum(e)``, ``y = e / s`` (or
  ``e * (1/s)``: both are tried and the one that matched is named).
- ``log_softmax``: ``y = (x - max) - log(sum(exp(x - max)))``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from .. import _mxbi

MODELLED = ("rms_norm", "softmax", "log_softmax")


def _candidates(k: int) -> List[str]:
    # a sum of float32 terms times one: fma and muladd are the same tree
    return [o for o in _mxbi.family(k, "f32") if o.startswith("muladd") and "out=" not in o]


def _tree_sums(terms: np.ndarray, order: str) -> np.ndarray:
    """Row sums of ``terms`` (rows x K, float32) in ``order``."""
    from .. import gemm

    ones = np.ones((terms.shape[1], 1), np.float32)
    return np.asarray(gemm(np.ascontiguousarray(terms, np.float32), ones, order=order), np.float32).reshape(-1)


def _rows(t: torch.Tensor, axis: int) -> torch.Tensor:
    t = t.movedim(axis, -1)
    return t.reshape(-1, t.shape[-1])


def search(kind: str, x: torch.Tensor, y: torch.Tensor, axis: int, device: str, out_dtype: torch.dtype,
           weight: Optional[torch.Tensor] = None, eps: Optional[float] = None) -> Tuple[List[str], str]:
    """(matching orders, how the model was spelled) for a nonlinear reduction
    whose target input slice is ``x`` and output slice ``y`` (CPU tensors)."""
    xr = _rows(x, axis).to(device)
    want = _rows(y, axis).contiguous()
    k = xr.shape[-1]
    xf = xr.float()
    found: List[str] = []
    variant = ""
    if kind == "rms_norm":
        if eps is None:
            eps = torch.finfo(x.dtype).eps if x.dtype.is_floating_point else 1e-6
        terms = (xf * xf).cpu().numpy()

        def model(s: torch.Tensor) -> List[Tuple[str, torch.Tensor]]:
            r = torch.rsqrt(s / k + eps)
            out = (xf * r[:, None]).to(x.dtype)
            if weight is not None:
                out = out * weight.to(device).reshape(-1)
            return [("", out.to(out_dtype))]
    else:
        mx = xf.max(dim=-1, keepdim=True).values
        shifted = xf - mx
        e = torch.exp(shifted)
        terms = e.cpu().numpy()

        def model(s: torch.Tensor) -> List[Tuple[str, torch.Tensor]]:
            sc = s[:, None]
            if kind == "softmax":
                return [("divide", (e / sc).to(out_dtype)), ("reciprocal", (e * (1.0 / sc)).to(out_dtype))]
            return [("", (shifted - torch.log(sc)).to(out_dtype))]

    for order in _candidates(k):
        s = torch.from_numpy(_tree_sums(terms, order)).to(device)
        for name, got in model(s):
            if torch.equal(got.cpu().contiguous().view(_int_type(got.dtype)), want.view(_int_type(want.dtype))):
                found.append(order)
                variant = variant or name
                break
    how = {"rms_norm": "float32 sum(x*x); rsqrt(s/K + eps); (x*r) cast, times weight",
           "softmax": f"exp(x - max) / sum ({variant or 'divide'})",
           "log_softmax": "(x - max) - log(sum(exp(x - max)))"}[kind]
    return found, how


def _int_type(dt: torch.dtype) -> torch.dtype:
    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[torch.tensor([], dtype=dt).element_size()]


def model_inputs(kind: str, rec: Any) -> Dict[str, Any]:
    """The weight and eps a model needs from the recorded op."""
    args = rec.args[0] if rec.args else ()
    got: Dict[str, Any] = {}
    if kind == "rms_norm":
        if rec.name.startswith("aten::"):  # rms_norm(x, normalized_shape, weight, eps)
            got["weight"] = rec.shared.get(1)
            got["eps"] = args[3] if len(args) > 3 else None
        else:  # custom: (x, weight, eps)
            got["weight"] = rec.shared.get(1)
            got["eps"] = next((a for a in args[1:] if isinstance(a, float)), None)
    return got


__all__ = ["search", "MODELLED", "model_inputs"]
