"""Turning what users pass into the arrays the native module takes.

Accepted: numpy arrays, anything with ``__array__`` or ``__dlpack__``, torch
tensors on any device (moved to the CPU; narrow float types widened exactly),
nested lists and scalars. Narrow float dtypes (float16, ml_dtypes' bfloat16
and FP8 types, torch's) are widened to float32 exactly; nothing is rounded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._mxbi import MxbiError

# ml_dtypes' narrow float types have numpy kind "V"; their names say what they are.
_NARROW_FLOAT_NAMES = ("bfloat16", "float8", "float6", "float4")


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _torch_to_numpy(t: Any) -> np.ndarray:
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    # torch's own upcasts of bf16, f16 and FP8 to float32 are exact
    if t.is_floating_point() and t.element_size() < 4:
        t = t.float()
    return t.contiguous().numpy()


def to_numpy(x: Any, what: str = "x") -> np.ndarray:
    """Any array-like as a numpy array (no copy when ``x`` already is one)."""
    if isinstance(x, np.ndarray):
        return x
    if _is_torch(x):
        return _torch_to_numpy(x)
    if hasattr(x, "__array__"):
        return np.asarray(x)
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    if isinstance(x, (list, tuple, int, float, np.generic)):
        return np.asarray(x)
    raise MxbiError(
        f"{what}: expected an array (numpy, __array__ or DLPack), got {type(x).__name__}"
    )


def is_narrow_float(dtype: np.dtype) -> bool:
    """float16, or an ml_dtypes narrow float (bfloat16, FP8, FP6, FP4)."""
    if dtype.kind == "f":
        return dtype.itemsize < 4
    return dtype.kind == "V" and any(n in dtype.name for n in _NARROW_FLOAT_NAMES)


def float_input(x: Any, what: str = "x") -> np.ndarray:
    """Float values for the native module: float32 or float64, C-contiguous.

    Narrow floats are widened to float32 exactly; float64 stays float64 (the
    native side refuses values that float32 cannot hold where it needs f32).
    """
    a = to_numpy(x, what)
    if a.dtype == np.float32 or a.dtype == np.float64:
        return np.ascontiguousarray(a)
    if is_narrow_float(a.dtype):
        return np.ascontiguousarray(a.astype(np.float32))
    raise MxbiError(f"{what}: expected f32, f16 or bf16 values, got {a.dtype}")


def codes_input(x: Any, what: str = "codes", wide: bool = False) -> np.ndarray:
    """Codes as uint8 (uint16 allowed when ``wide``), C-contiguous.

    int8 arrays and FP8-typed arrays are read as their bytes.
    """
    a = to_numpy(x, what)
    if a.dtype == np.uint8 or (wide and a.dtype == np.uint16):
        return np.ascontiguousarray(a)
    if a.dtype == np.int8 or (a.dtype.itemsize == 1 and a.dtype.kind == "V"):
        return np.ascontiguousarray(a).view(np.uint8)
    if wide and (a.dtype == np.int16 or a.dtype == np.float16 or a.dtype.name == "bfloat16"):
        return np.ascontiguousarray(a).view(np.uint16)
    want = "uint8/uint16" if wide else "uint8"
    raise MxbiError(f"{what}: expected {want} codes, got {a.dtype}")


def output_f32(out: Any) -> np.ndarray:
    """A subject's output as float32 bits: float32 as it is, narrower float
    types widened exactly. float64 is refused: its values are not the bytes
    of the kernel's output."""
    a = to_numpy(out, "the output")
    if a.dtype == np.float32:
        return np.ascontiguousarray(a)
    if is_narrow_float(a.dtype):
        return np.ascontiguousarray(a.astype(np.float32))
    raise TypeError(
        f"fn returned {a.dtype} values; return the kernel's own output type "
        "(float32, float16, bfloat16 or an FP8 type), whose bytes are compared"
    )
