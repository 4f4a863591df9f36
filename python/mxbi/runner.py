"""An mxbi-exec/1 runner script, run in-process.

A runner written for ``exec:`` (``examples/mxbi_runner.py``'s ``serve(fn,
name)``) computes its GEMM in a function it hands to ``serve``.
:func:`in_process` runs the script's top level with ``serve`` replaced, keeps
that function, and returns it as a subject for :func:`mxbi.bi.check`: the
same kernel code, with no co-process, no ``.npy`` files and no JSON lines,
so the two paths can be compared verdict for verdict and timed side by side.
"""

from __future__ import annotations

import os
import runpy
import sys
import types
from typing import Any, Callable, Dict, List, Sequence

import numpy as np

from . import _args
from ._arrays import output_f32
from ._mxbi import MxbiError

__all__ = ["in_process", "InProcessRunner"]


class InProcessRunner:
    """A runner's GEMM function as a subject: ``fn(a, b)``; ``name`` is the
    name its greeting would send (``exec:NAME`` through the CLI)."""

    def __init__(self, fn: Callable[..., Any], name: str, with_job: bool, input: str):
        self.fn = fn
        self.name = name
        self.with_job = with_job
        self.input = input
        self.__qualname__ = name

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.with_job:
            m, k = a.shape
            job: Dict[str, Any] = {"job": 0, "m": m, "k": k, "n": b.shape[1], "input": self.input}
            c = self.fn(a, b, job)
        else:
            c = self.fn(a, b)
        if isinstance(c, tuple):  # (bf16 bits, "bf16"), as the protocol allows
            bits, kind = c
            bits = np.asarray(bits)
            if kind != "bf16" or bits.dtype not in (np.uint16, np.int16):
                raise TypeError("a tuple answer must be (uint16 or int16 bits, 'bf16')")
            return (bits.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        return output_f32(c)


def in_process(script: str, args: Sequence[str] = (), *, input: str = "f32") -> InProcessRunner:
    """Loads the runner ``script`` (with ``args`` as its ``sys.argv[1:]``)
    in this process and returns its GEMM as a subject. ``input`` is the
    element type the check draws in (the ``job["input"]`` a runner reads).

    While the script's top level runs, ``import mxbi_runner`` gives it a
    module whose ``serve`` keeps the function instead of serving jobs.
    Raises :class:`MxbiError` when ``script`` is not a file, or exits or
    ends without handing a function to ``serve``."""
    script = _args.path(script, "script") or ""
    if isinstance(args, (str, bytes)) or not hasattr(args, "__iter__"):
        raise MxbiError(f"args: expected a list of strings (the script's arguments), got {_args._shown(args)}")
    args = [_args.text(a, "args") for a in args]
    input = _args.text(input, "input")
    if input not in ("f32", "bf16", "f16", "e4m3", "e5m2"):
        raise MxbiError(f"unknown input type '{input}'; expected f32, bf16, f16, e4m3 or e5m2")
    if not os.path.isfile(script):
        raise MxbiError(f"script: {script}: no such file")
    captured: List[Any] = []

    def capture(fn: Callable[..., Any], name: str, with_job: bool = False) -> None:
        captured.append((fn, name, with_job))

    stub = types.ModuleType("mxbi_runner")
    stub.serve = capture  # type: ignore[attr-defined]
    stub.PROTOCOL = "mxbi-exec/1"  # type: ignore[attr-defined]
    saved = sys.modules.get("mxbi_runner")
    argv = sys.argv
    sys.modules["mxbi_runner"] = stub
    sys.argv = [script, *args]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if not captured:
            raise MxbiError(f"{script} exited ({e.code}) before handing a function to serve") from None
    finally:
        sys.argv = argv
        if saved is None:
            sys.modules.pop("mxbi_runner", None)
        else:
            sys.modules["mxbi_runner"] = saved
    if not captured:
        raise MxbiError(f"{script} never called serve(fn, name)")
    fn, name, with_job = captured[0]
    return InProcessRunner(fn, name, with_job, input)
