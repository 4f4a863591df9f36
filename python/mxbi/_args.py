"""Checking the arguments users pass to the public API.

Every public function and method checks its integer, number, flag and name
arguments here before the native module sees them, so that a wrong value
(negative, too large for the native type, the wrong type) raises
:class:`MxbiError` with one line naming the argument, never PyO3's
``OverflowError``/``TypeError`` or a silent truncation (``3.5`` is not an
integer). Names that are the wrong *value* (an unknown format, order or
family) are refused by the library's own parsers, also as ``MxbiError``.
"""

from __future__ import annotations

import math
import os
import operator
from typing import Any, List, Optional

import numpy as np

from ._mxbi import MxbiError

#: the largest value of the native integer types (usize/u64 on a 64-bit build, u32, isize)
U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1
I64_MAX = 2**63 - 1


def _shown(x: Any) -> str:
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


def integer(x: Any, what: str, lo: int = 0, hi: int = U64_MAX) -> int:
    """``x`` as an int in ``lo..=hi``: Python and numpy integers; never a
    bool, a float or a string."""
    v: Optional[int]
    try:
        v = None if isinstance(x, (bool, np.bool_)) else operator.index(x)
    except TypeError:
        v = None
    if v is None:
        raise MxbiError(f"{what}: expected an integer, got {type(x).__name__} {_shown(x)}")
    if v < lo:
        raise MxbiError(f"{what}: expected an integer >= {lo}, got {v}")
    if v > hi:
        raise MxbiError(f"{what}: {v} is too large (at most {hi})")
    return v


def size(x: Any, what: str, hi: int = U64_MAX) -> int:
    """A size (M, K, N, a block): an integer, not negative. Zero passes
    through to the library, which refuses it with the CLI's own message
    (``K = 0 is out of range (1..=1048576)``), so that Python and the CLI
    say the same for the same value."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) and x < 0:
        raise MxbiError(f"{what}: expected a positive integer, got {int(x)}")
    return integer(x, what, 0, hi)


def sizes(xs: Any, what: str) -> List[int]:
    """A sequence of sizes (not a string), each as :func:`size`."""
    if isinstance(xs, (str, bytes)) or not hasattr(xs, "__iter__"):
        raise MxbiError(f"{what}: expected a list of integers, got {type(xs).__name__} {_shown(xs)}")
    return [size(x, what) for x in xs]


def opt_integer(x: Any, what: str, lo: int = 0, hi: int = U64_MAX) -> Optional[int]:
    return None if x is None else integer(x, what, lo, hi)


def integers(xs: Any, what: str, lo: int = 0, hi: int = U64_MAX) -> List[int]:
    """A sequence of integers (not a string), each as :func:`integer`."""
    if isinstance(xs, (str, bytes)) or not hasattr(xs, "__iter__"):
        raise MxbiError(f"{what}: expected a list of integers, got {type(xs).__name__} {_shown(xs)}")
    return [integer(x, what, lo, hi) for x in xs]


def text(x: Any, what: str) -> str:
    """A name or a spec: a ``str`` (the library's parser judges its value)."""
    if not isinstance(x, str):
        raise MxbiError(f"{what}: expected a string, got {type(x).__name__} {_shown(x)}")
    return x


def opt_text(x: Any, what: str) -> Optional[str]:
    return None if x is None else text(x, what)


def names(x: Any, what: str) -> List[str]:
    """Names: a list of strings, or one comma-separated string."""
    if isinstance(x, str):
        return [s.strip() for s in x.split(",") if s.strip()]
    if not hasattr(x, "__iter__") or isinstance(x, bytes):
        raise MxbiError(f"{what}: expected names (a list, or one comma-separated string), got {_shown(x)}")
    out = []
    for s in x:
        if not isinstance(s, str):
            raise MxbiError(f"{what}: expected names (strings), got {type(s).__name__} {_shown(s)}")
        out.append(s.strip())
    return out


def flag(x: Any, what: str) -> bool:
    """A bool (numpy's too); ``"yes"`` or ``1`` are not flags."""
    if not isinstance(x, (bool, np.bool_)):
        raise MxbiError(f"{what}: expected True or False, got {type(x).__name__} {_shown(x)}")
    return bool(x)


def number(x: Any, what: str, lo: float = 0.0, lo_open: bool = False, unit: str = "a number") -> float:
    """A finite real number of at least ``lo`` (more than ``lo`` when
    ``lo_open``); ``unit`` names it in the message (``seconds``)."""
    ok = isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))
    if not ok:
        raise MxbiError(f"{what}: expected {unit}, got {type(x).__name__} {_shown(x)}")
    v = float(x)
    if not math.isfinite(v) or v < lo or (lo_open and v == lo):
        bound = f"> {lo:g}" if lo_open else f">= {lo:g}"
        raise MxbiError(f"{what} {_shown(x)}: expected {unit} {bound} (finite)")
    return v


def opt_number(x: Any, what: str, lo: float = 0.0, lo_open: bool = False) -> Optional[float]:
    return None if x is None else number(x, what, lo, lo_open)


def path(x: Any, what: str) -> Optional[str]:
    """A folder or file path (str or os.PathLike), or None."""
    if x is None:
        return None
    try:
        p = os.fspath(x)
    except TypeError:
        p = None
    if not isinstance(p, str):
        raise MxbiError(f"{what}: expected a path (str or os.PathLike), got {type(x).__name__} {_shown(x)}")
    return p


def seconds(x: Any, what: str) -> Optional[float]:
    """A timeout in seconds (> 0), or None for the default."""
    return None if x is None else number(x, what, 0.0, lo_open=True, unit="seconds")
