"""mxbi: bit-exact FP8/MX emulation, accumulation orders and batch-invariance
checking, from Python.

The calls a user starts with::

    import mxbi
    codes, scales = mxbi.quantize(x, format="mxfp8-e4m3", preset="ocp")
    report = mxbi.bi.check(fn, families=["batch"], k=1024, n=64)
    report.passed, report.cells, str(report)

Every function takes numpy arrays or anything with ``__array__``/DLPack
(torch tensors too; see :mod:`mxbi.torch` for kernels that run on a GPU) and
returns numpy arrays. Bad input raises :class:`MxbiError` (a ``ValueError``)
with the ``mxbi`` command's one-line message. Names (formats, presets,
rounding modes, orders) are the CLI's.
"""

from __future__ import annotations

import json
import warnings
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import _mxbi
from ._arrays import codes_input, float_input
from ._mxbi import MxbiError, Order, Tree

__version__: str = _mxbi.__version__

__all__ = [
    "MxbiError",
    "FormatInfo",
    "formats",
    "value_table",
    "cast",
    "decode",
    "quantize",
    "quantize_stats",
    "dequantize",
    "Order",
    "Tree",
    "order",
    "presets",
    "gemm",
    "trace",
    "TraceStep",
    "bi",
]


class FormatInfo(NamedTuple):
    """One element format, as a row of ``mxbi formats``."""

    name: str
    bits: int
    max: float
    emax: int
    has_inf: bool
    has_nan: bool


def formats() -> List[FormatInfo]:
    """Every element format (e4m3, e5m2, e3m2, e2m3, e2m1, int8, e8m0, bf16, f16)."""
    return [FormatInfo(*f) for f in _mxbi.formats()]


def value_table(format: str) -> Tuple[np.ndarray, np.ndarray]:
    """Every code of ``format`` (uint16) and its exact value (float64; NaN for NaN codes)."""
    return _mxbi.value_table(format)


def cast(
    x: Any,
    to: str,
    *,
    preset: Optional[str] = None,
    round: Optional[str] = None,
    overflow: Optional[str] = None,
    nan: Optional[str] = None,
    seed: Optional[int] = None,
    sr_bits: Optional[int] = None,
) -> np.ndarray:
    """Casts values to codes of an element format, as ``mxbi cast``.

    ``x``: float32 or float64 values (narrower floats are widened exactly).
    ``to``: e4m3, e5m2, e3m2, e2m3, e2m1, int8, e8m0, bf16, f16.
    ``preset``: ml_dtypes, nvidia, torch, gfloat; ``round``, ``overflow`` and
    ``nan`` override it; ``seed``/``sr_bits`` with ``round="stochastic"``.
    Returns codes of ``x``'s shape: uint8, or uint16 for bf16/f16.
    """
    return _mxbi.cast(float_input(x), to, preset, round, overflow, nan, seed, sr_bits)


def decode(codes: Any, format: str) -> np.ndarray:
    """Decodes codes (uint8, or uint16 for bf16/f16) to float32, as ``mxbi decode``."""
    return _mxbi.decode(codes_input(codes, wide=True), format)


def _quantize(x: Any, format: str, stats: bool, **kw: Any) -> Tuple[np.ndarray, np.ndarray, Optional[str]]:
    return _mxbi.quantize(
        float_input(x),
        format,
        kw.get("preset"),
        kw.get("scale_mode"),
        kw.get("round"),
        kw.get("seed"),
        bool(kw.get("flush_subnormals", False)),
        bool(kw.get("no_int8_neg2", False)),
        int(kw.get("block", 32)),
        int(kw.get("axis", -1)),
        bool(kw.get("pad", False)),
        kw.get("scale_layout", "plain"),
        stats,
    )


def quantize(
    x: Any,
    format: str,
    *,
    preset: Optional[str] = None,
    scale_mode: Optional[str] = None,
    round: Optional[str] = None,
    seed: Optional[int] = None,
    flush_subnormals: bool = False,
    no_int8_neg2: bool = False,
    block: int = 32,
    axis: int = -1,
    pad: bool = False,
    scale_layout: str = "plain",
) -> Tuple[np.ndarray, np.ndarray]:
    """OCP MX block quantization, as ``mxbi quantize``.

    ``format``: mxfp8-e4m3, mxfp8-e5m2, mxfp6-e3m2, mxfp6-e2m3, mxfp4-e2m1,
    mxint8. ``preset``: ocp (default), torchao, nvidia, microxcaling;
    ``scale_mode`` (floor, ceil, even, rceil), ``round`` and the flags override
    it. Blocks of ``block`` elements run along ``axis``; ``pad`` allows a
    length that is not a multiple of the block. ``scale_layout``: plain or
    swizzled-128x4.

    Returns ``(codes, scales)``: uint8 codes of ``x``'s shape and uint8 E8M0
    scales (plain: ``x``'s shape with the axis divided by the block).
    """
    codes, scales, _ = _quantize(
        x, format, False, preset=preset, scale_mode=scale_mode, round=round, seed=seed,
        flush_subnormals=flush_subnormals, no_int8_neg2=no_int8_neg2, block=block, axis=axis,
        pad=pad, scale_layout=scale_layout,
    )
    return codes, scales


def quantize_stats(x: Any, format: str, **kw: Any) -> dict:
    """What ``mxbi quantize --stats`` prints for the same arguments as
    :func:`quantize`: elements, blocks, saturated, flushed_to_zero,
    nan_scales, max_abs_error, scale_range."""
    _, _, st = _quantize(x, format, True, **kw)
    return json.loads(st)


def dequantize(
    codes: Any,
    scales: Any,
    format: str,
    *,
    block: int = 32,
    axis: int = -1,
    pad: bool = False,
    scale_layout: str = "plain",
    dtype: str = "f32",
) -> np.ndarray:
    """Exact MX dequantization, as ``mxbi dequantize``.

    ``dtype="f32"`` rounds the values float32 cannot hold (an f32 subnormal
    below its precision, beyond f32 range) to nearest-even and warns with
    their count, as the CLI does on stderr; ``dtype="f64"`` is always exact.
    """
    values, inexact = _mxbi.dequantize(
        codes_input(codes), codes_input(scales, "scales"), format, block, axis, pad, scale_layout, dtype
    )
    if inexact:
        warnings.warn(
            f"{inexact} values are not exactly representable in f32 and were rounded to "
            "nearest-even; use dtype='f64' for exact values",
            stacklevel=2,
        )
    return values


def order(spec: str) -> Order:
    """Parses an accumulation order (docs/ORDERS.md); ``str()`` of the result
    is its canonical spelling, ``.tree(k)`` its reduction tree."""
    return Order(spec)


def presets() -> List[Tuple[str, str]]:
    """The named order presets and the orders they expand to."""
    return _mxbi.presets()


def _operand(x: Any, what: str, mx: bool) -> np.ndarray:
    a = codes_input(x, what) if mx else float_input(x, what)
    if a.ndim != 2:
        raise MxbiError(f"{what}: expected a 2-d array, got shape {list(a.shape)}")
    return a


def gemm(
    a: Any,
    b: Any,
    order: "str | Order" = "fma",
    *,
    b_layout: str = "kn",
    rows: Optional[Sequence[int]] = None,
    generic: bool = False,
    format: Optional[str] = None,
    a_scales: Any = None,
    b_scales: Any = None,
) -> np.ndarray:
    """``C = A x B`` under an accumulation order, bit for bit, as ``mxbi gemm``.

    ``a`` is ``[M, K]``; ``b`` is ``[K, N]`` (``b_layout="kn"``) or ``[N, K]``
    (``"nk"``). Values are float32 (float16/bfloat16 widened exactly; float64
    only when every value is an f32), or with ``format`` MX codes (uint8)
    with E8M0 scales in blocks of 32 along K. ``rows`` computes only those
    rows. Returns float32 ``[M, N]`` (or ``[len(rows), N]``).
    """
    mx = format is not None
    sa = None if a_scales is None else codes_input(a_scales, "a_scales")
    sb = None if b_scales is None else codes_input(b_scales, "b_scales")
    return _mxbi.gemm(
        _operand(a, "a", mx), _operand(b, "b", mx), str(order), b_layout,
        None if rows is None else [int(r) for r in rows], generic, format, sa, sb,
    )


class TraceStep(NamedTuple):
    """One intermediate value of an output element: its tree node, the
    operation, the value and its bits."""

    node: int
    op: str
    value: float
    bits: str


def trace(
    a: Any,
    b: Any,
    order: "str | Order",
    row: int,
    col: int,
    *,
    b_layout: str = "kn",
    format: Optional[str] = None,
    a_scales: Any = None,
    b_scales: Any = None,
) -> List[TraceStep]:
    """Every intermediate value of ``C[row, col]``, as ``mxbi trace``."""
    mx = format is not None
    sa = None if a_scales is None else codes_input(a_scales, "a_scales")
    sb = None if b_scales is None else codes_input(b_scales, "b_scales")
    steps = _mxbi.trace(
        _operand(a, "a", mx), _operand(b, "b", mx), str(order), int(row), int(col), b_layout, format, sa, sb
    )
    return [TraceStep(*s) for s in steps]


from . import bi  # noqa: E402  (bi imports the names above)
