"""mxbi: bit-exact FP8/MX emulation, accumulation orders and batch-invariance
checking, from Python.

The calls a user starts with::

    import mxbi
    codes, scales = mxbi.quantize(x, format="mxfp8-e4m3", preset="ocp")
    report = mxbi.bi.check(fn, families=["batch"], k=1024, n=64)
    report.passed, report.cells, report.failures, str(report)
    found = mxbi.fuzz(fn, max_cases=200)        # search + shrink: found.failure.m, .case
    import mxbi.torch                           # a whole PyTorch program (docs/LOCATE.md):
    r = mxbi.torch.locate(model, make_inputs, batch_sizes=[1, 9, 33])  # r.root_causes[0].op, .module

Results expose what they hold as attributes and properties (``report.passed``,
``report.cells``, ``report.failures``, ``revealed.order``); methods either
take arguments (``order.tree(k)``) or render the result in a format
(``to_json()``, ``markdown()``, ``junit()``, ``listing()``).

Every function takes numpy arrays or anything with ``__array__``/DLPack
(torch tensors too; see :mod:`mxbi.torch` for kernels that run on a GPU) and
returns numpy arrays. Bad input raises :class:`MxbiError` (a ``ValueError``)
with one line naming the argument (the ``mxbi`` command's message where it
has one): unknown names, negative or too large integers, and values of the
wrong type (``k=3.5``, ``format=3``) alike. Names (formats, presets,
rounding modes, orders) are the CLI's.
"""

from __future__ import annotations

import json
import warnings
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import _args, _arrays, _mxbi
from ._arrays import codes_input, float_input, to_numpy
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
    "explain",
    "reveal",
    "diverge",
    "accuracy",
    "AccuracyReport",
    "fuzz",
    "FuzzResult",
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
    return _mxbi.value_table(_args.text(format, "format"))


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
    ``preset``: ml_dtypes (its current release, also ``ml_dtypes@0.7``),
    ml_dtypes@0.6, nvidia, torch, gfloat (each also as ``NAME@VERSION``);
    ``round``, ``overflow`` and ``nan`` override it; ``seed``/``sr_bits``
    with ``round="stochastic"``.
    Returns codes of ``x``'s shape: uint8, or uint16 for bf16/f16.
    """
    return _mxbi.cast(
        float_input(x), _args.text(to, "to"), _args.opt_text(preset, "preset"), _args.opt_text(round, "round"),
        _args.opt_text(overflow, "overflow"), _args.opt_text(nan, "nan"), _args.opt_integer(seed, "seed"),
        _args.opt_integer(sr_bits, "sr_bits", 0, _args.U32_MAX),
    )


def decode(codes: Any, format: str) -> np.ndarray:
    """Decodes codes (uint8, or uint16 for bf16/f16) to float32, as ``mxbi decode``."""
    return _mxbi.decode(codes_input(codes, wide=True), _args.text(format, "format"))


def _quantize(
    x: Any, format: str, stats: bool, preset: Optional[str], scale_mode: Optional[str], round: Optional[str],
    seed: Optional[int], flush_subnormals: bool, no_int8_neg2: bool, block: int, axis: int, pad: bool,
    scale_layout: str,
) -> Tuple[np.ndarray, np.ndarray, Optional[str]]:
    return _mxbi.quantize(
        float_input(x), _args.text(format, "format"), _args.opt_text(preset, "preset"),
        _args.opt_text(scale_mode, "scale_mode"), _args.opt_text(round, "round"), _args.opt_integer(seed, "seed"),
        _args.flag(flush_subnormals, "flush_subnormals"), _args.flag(no_int8_neg2, "no_int8_neg2"),
        _args.size(block, "block"), _args.integer(axis, "axis", -_args.I64_MAX - 1, _args.I64_MAX),
        _args.flag(pad, "pad"), _args.text(scale_layout, "scale_layout"), stats,
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
        x, format, False, preset, scale_mode, round, seed, flush_subnormals, no_int8_neg2, block, axis, pad,
        scale_layout,
    )
    return codes, scales


def quantize_stats(
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
) -> dict:
    """What ``mxbi quantize --stats`` prints for the same arguments as
    :func:`quantize`: elements, blocks, saturated, flushed_to_zero,
    nan_scales, max_abs_error, scale_range."""
    _, _, st = _quantize(
        x, format, True, preset, scale_mode, round, seed, flush_subnormals, no_int8_neg2, block, axis, pad, "plain"
    )
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
        codes_input(codes), codes_input(scales, "scales"), _args.text(format, "format"),
        _args.size(block, "block"), _args.integer(axis, "axis", -_args.I64_MAX - 1, _args.I64_MAX),
        _args.flag(pad, "pad"), _args.text(scale_layout, "scale_layout"), _args.text(dtype, "dtype"),
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
    return Order(_args.text(spec, "spec"))


def presets() -> List[Tuple[str, str]]:
    """The named order presets and the orders they expand to."""
    return _mxbi.presets()


def _order_spec(x: Any, what: str = "order") -> str:
    """An order given as an :class:`Order` or its spelling."""
    return str(x) if isinstance(x, Order) else _args.text(x, what)


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
        _operand(a, "a", mx), _operand(b, "b", mx), _order_spec(order), _args.text(b_layout, "b_layout"),
        None if rows is None else _args.integers(rows, "rows"), _args.flag(generic, "generic"),
        _args.opt_text(format, "format"), sa, sb,
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
        _operand(a, "a", mx), _operand(b, "b", mx), _order_spec(order), _args.integer(row, "row"),
        _args.integer(col, "col"), _args.text(b_layout, "b_layout"), _args.opt_text(format, "format"), sa, sb,
    )
    return [TraceStep(*s) for s in steps]


_OUTPUT_DTYPES = {
    "float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
    "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
}


def _output_dtype(x: Any) -> Optional[str]:
    """The output type of an array or tensor, by its dtype's name."""
    name = str(getattr(x, "dtype", "")).replace("torch.", "")
    return _OUTPUT_DTYPES.get(name)


def _f64(x: Any, what: str) -> np.ndarray:
    """Numeric values as float64 (a string or object array is refused)."""
    a = to_numpy(x, what)
    if a.dtype.kind not in "fiub" and not _arrays.is_narrow_float(a.dtype):
        raise MxbiError(f"{what}: expected numeric values, got {a.dtype}")
    return np.ascontiguousarray(a.astype(np.float64))


class AccuracyReport:
    """An accuracy verdict (``mxbi accuracy``): ``passed`` (``warn``
    passes), ``str()`` the CLI's text, :meth:`to_json` its ``--json``."""

    def __init__(self, raw: "_mxbi.AccuracyReport"):
        self._raw = raw
        self.data: dict = json.loads(raw.to_json())

    @property
    def passed(self) -> bool:
        return self._raw.passed

    def to_json(self) -> str:
        return self._raw.to_json()

    def __str__(self) -> str:
        return self._raw.text()

    def __bool__(self) -> bool:
        return self.passed


def accuracy(
    actual: Any,
    *,
    a: Any = None,
    b: Any = None,
    golden: Any = None,
    benchmark: Any = None,
    standard: str = "atk",
    dtype: Optional[str] = None,
    b_layout: str = "kn",
    format: Optional[str] = None,
    a_scales: Any = None,
    b_scales: Any = None,
    rtol: Optional[float] = None,
    atol: Optional[float] = None,
) -> AccuracyReport:
    """Judges an output by a named standard, as ``mxbi accuracy``.

    The golden is ``golden`` (values) or the exact product of ``a`` and
    ``b`` (MX codes with ``format``/scales). ``benchmark`` is the
    same-precision benchmark: values, or a subject run on ``a``/``b`` (a
    callable or ``"model:ORDER"``). ``standard``: atk (default), atk-strict,
    atk-l0/l1/l2, single, msprobe, msprobe-ulp, msprobe-binary, assert-close
    (with ``rtol``/``atol``). ``dtype``: the output type (f32, f64, bf16,
    f16, e4m3, e5m2); by default the array's own.
    """
    dt = _args.opt_text(dtype, "dtype") or _output_dtype(actual)
    if dt is None:
        raise MxbiError(f"actual: {getattr(actual, 'dtype', type(actual).__name__)} values need dtype= (the output type)")
    act = _f64(actual, "actual")
    f64 = lambda x, what: None if x is None else _f64(x, what)  # noqa: E731
    subject = None
    bench = None
    if benchmark is not None and (callable(benchmark) or isinstance(benchmark, str)):
        from .bi import _subject

        subject = _subject(benchmark)
    else:
        bench = f64(benchmark, "benchmark")
    mx = format is not None
    raw = _mxbi.accuracy(
        act, dt, _args.text(standard, "standard"), f64(golden, "golden"), bench,
        None if a is None else _operand(a, "a", mx), None if b is None else _operand(b, "b", mx),
        _args.text(b_layout, "b_layout"), _args.opt_text(format, "format"),
        None if a_scales is None else codes_input(a_scales, "a_scales"),
        None if b_scales is None else codes_input(b_scales, "b_scales"),
        subject, _args.opt_number(rtol, "rtol"), _args.opt_number(atol, "atol"),
    )
    return AccuracyReport(raw)


from . import bi, explain  # noqa: E402  (they import the names above)
from .explain import diverge, reveal  # noqa: E402
from .fuzzing import FuzzResult, fuzz  # noqa: E402
