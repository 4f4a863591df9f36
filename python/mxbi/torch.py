"""Running torch kernels as subjects: inputs moved to the GPU, outputs back.

Importing this module does not import torch; :func:`on_device` does. The
checker hands a subject float32 numpy arrays whose values are exact in the
check's ``input`` type, so converting them to ``dtype`` on the device is
exact; the output comes back to the CPU, narrow float types widened exactly
to float32 (bf16 through its bits), so the bytes compared are the kernel's.

Example::

    import torch, mxbi, mxbi.torch
    fn = mxbi.torch.on_device(lambda a, b: a @ b, dtype=torch.bfloat16)
    report = mxbi.bi.check(fn, families=["batch"], k=4096, n=512, input="bf16")
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from . import _args
from ._arrays import to_numpy
from ._mxbi import MxbiError

__all__ = ["on_device", "to_numpy"]


def on_device(
    fn: Callable[..., Any],
    device: Any = "cuda",
    dtype: Any = None,
    b_dtype: Any = None,
    synchronize: bool = True,
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Wraps ``fn(a, b)`` written for torch tensors into a subject taking and
    returning numpy arrays.

    ``a`` and ``b`` become tensors on ``device`` of ``dtype`` (default
    float32; ``b_dtype`` defaults to ``dtype``); the output is synchronised
    and returned as a CPU numpy array (bf16/f16/FP8 widened exactly to
    float32). The report names the subject after ``fn``.
    """
    if not callable(fn):
        raise MxbiError(f"fn: expected a callable fn(a, b) -> out on torch tensors, got {type(fn).__name__}")
    synchronize = _args.flag(synchronize, "synchronize")
    import torch

    a_t = dtype if dtype is not None else torch.float32
    b_t = b_dtype if b_dtype is not None else a_t

    @functools.wraps(fn)
    def call(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ta = torch.from_numpy(np.ascontiguousarray(a)).to(device=device).to(a_t)
        tb = torch.from_numpy(np.ascontiguousarray(b)).to(device=device).to(b_t)
        out = fn(ta, tb)
        if synchronize and torch.device(device).type == "cuda":
            torch.cuda.synchronize(device)
        return to_numpy(out, "the output")

    return call
