"""Torch programs: kernels as subjects (inputs moved to the GPU, outputs
back), and :func:`locate`, from a model to the op that breaks batch
invariance and its order (docs/LOCATE.md).

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
from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np

from . import _args
from ._arrays import to_numpy
from ._mxbi import MxbiError

__all__ = ["on_device", "to_numpy", "locate"]


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

    On a CUDA device an operand of 1 MiB or more goes up through a pinned
    host buffer the wrapper keeps per operand (refilled call after call, once
    the previous upload from it is done): on an H200 host a 64 MiB float32
    operand took 6.6 ms from pageable memory and 2 ms through the buffer
    (docs/PERFORMANCE.md, "Eighth measurement"). mxbi's checker writes such
    an operand straight into that buffer (the wrapper's
    ``_mxbi_input_buffer(which, shape)`` hands it out as a numpy array), so
    the copy into pinned memory is skipped: on an H100 host that copy was
    3 - 10 ms per 64 MiB operand ("Tenth measurement"). A smaller operand
    whose bytes are those of the last call, and whose tensor the kernel did
    not change in place, is not uploaded again.
    """
    if not callable(fn):
        raise MxbiError(f"fn: expected a callable fn(a, b) -> out on torch tensors, got {type(fn).__name__}")
    synchronize = _args.flag(synchronize, "synchronize")
    import torch

    a_t = dtype if dtype is not None else torch.float32
    b_t = b_dtype if b_dtype is not None else a_t
    dev = torch.device(device)
    # per operand: (pinned buffer, the event of the last upload from it,
    # the buffer as a numpy array)
    staged: Dict[str, Any] = {}

    def pinned(which: str, shape: Any, dt: Any) -> Any:
        """The operand's kept pinned buffer of ``shape`` and ``dt``, once the
        last upload from it has finished (a new one if the shape changed)."""
        buf, done, view = staged.get(which, (None, None, None))
        if buf is None or tuple(buf.shape) != tuple(shape) or buf.dtype != dt:
            buf, done = torch.empty(tuple(shape), dtype=dt).pin_memory(), None
            view = buf.numpy()
        if done is not None:
            done.synchronize()  # the last upload from the buffer has finished
        staged[which] = (buf, None, view)
        return buf, view

    def staged_size(shape: Any, itemsize: int) -> bool:
        return dev.type == "cuda" and int(np.prod(shape)) * itemsize >= (1 << 20)

    # per small operand on a CUDA device: (the bytes uploaded last, the
    # tensor they became, its version counter then)
    small: Dict[str, Any] = {}

    def upload_small(x: np.ndarray, which: str, t: Any) -> Any:
        """A small operand: the tensor of the last call again when its bytes
        are the same and the kernel did not change it in place (its version
        counter), else uploaded (the A of a GEMV reveal's probes is the same
        in every launch)."""
        held = small.get(which)
        if held is not None:
            host, moved, version = held
            same = host.shape == x.shape and host.dtype == x.dtype and moved._version == version
            if same and np.array_equal(host.view(np.uint8), x.view(np.uint8)):
                return moved
        moved = torch.from_numpy(x).to(device=dev).to(t)
        small[which] = (x.copy(), moved, moved._version)
        return moved

    def upload(x: np.ndarray, which: str, t: Any) -> Any:
        x = np.ascontiguousarray(x)
        if not staged_size(x.shape, x.itemsize):
            if dev.type == "cuda":
                return upload_small(x, which, t)
            return torch.from_numpy(x).to(device=dev).to(t)
        src = torch.from_numpy(x)
        held = staged.get(which)
        mine = held is not None and x.ctypes.data == held[0].data_ptr()
        if mine and (x.shape, x.dtype) == (held[2].shape, held[2].dtype):
            buf = held[0]  # written in place through _mxbi_input_buffer
        else:
            buf, _ = pinned(which, src.shape, src.dtype)
            buf.copy_(src)
        moved = buf.to(device=dev, non_blocking=True)
        done = torch.cuda.Event()
        done.record(torch.cuda.current_stream(dev))  # the stream the copy went on
        staged[which] = (buf, done, staged[which][2])
        return moved.to(t)

    @functools.wraps(fn)
    def call(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ta = upload(a, "a", a_t)
        tb = upload(b, "b", b_t)
        out = fn(ta, tb)
        if synchronize and dev.type == "cuda":
            torch.cuda.synchronize(dev)
        return to_numpy(out, "the output")

    def input_buffer(which: str, shape: Any) -> Optional[np.ndarray]:
        """Where the checker may write operand ``which`` ("a" or "b") of
        ``shape`` before the next call: the kept pinned buffer as a float32
        numpy array, free (its last upload done); None where the operand
        would not go through one."""
        if which not in ("a", "b") or not staged_size(shape, 4):
            return None
        return pinned(which, shape, torch.float32)[1]

    call._mxbi_input_buffer = input_buffer  # type: ignore[attr-defined]
    return call


#: kinds of ops that ``locate`` explains (docs/LOCATE.md, "What is explained")
LOCATE_KINDS = ("mm", "addmm", "bmm", "baddbmm", "linear", "scaled_mm", "sum", "mean", "softmax", "log_softmax",
                "rms_norm", "layer_norm", "var", "attention")


def locate(
    model: Callable[..., Any],
    make_inputs: Callable[[int], Any],
    batch_sizes: Sequence[int] = (1, 9, 33),
    target: int = 0,
    *,
    batch_dim: int = 0,
    ops: Optional[Dict[str, str]] = None,
    explain_ops: bool = True,
    evidence: bool = True,
    seed: int = 7,
    keep_elements: int = 1 << 20,
    max_ops: int = 200_000,
    max_reveals: int = 64,
) -> Any:
    """From a PyTorch program to the op that breaks batch invariance, and its
    order (docs/LOCATE.md).

    Runs ``model(*make_inputs(m))`` at every batch size of ``batch_sizes``,
    records every aten op with its module path and the target sample's
    slice of every tensor, aligns the op sequences and reports the root
    causes: the ops whose target slice differs in bytes while every input
    slice they read was identical, each explained (its order at both batch
    sizes, where they diverge, the fix). Returns a ``LocateReport``
    (``.invariant``, ``.root_causes``, ``.evidence``, ``.ops``, ``str()``,
    ``to_json()``, ``markdown()``).

    ``model``: an ``nn.Module`` (module paths from ``named_modules()``) or a
    function of tensors. ``make_inputs(m)``: the positional inputs for batch
    size ``m`` (a tuple, or one tensor), sample ``target`` the same at every
    ``m``, the batch along ``batch_dim``. ``ops``: kinds of custom ops
    (``{"lib::op": "linear"}``; kinds: :data:`LOCATE_KINDS`).
    ``explain_ops``: explain the root causes. ``evidence``: also reveal
    GEMM-like ops, linear reductions and attention whose bytes agreed but
    whose shapes differ (a different order there is a latent root cause),
    at most ``max_reveals`` distinct ops. ``keep_elements``: target slices
    up to this many elements are kept for ULP distances and model searches
    (larger ones are compared by digest). ``max_ops``: ops per run at most.
    """
    if not callable(model):
        raise MxbiError(f"model: expected an nn.Module or a function of tensors, got {type(model).__name__}")
    if not callable(make_inputs):
        raise MxbiError(f"make_inputs: expected a function of the batch size, got {type(make_inputs).__name__}")
    sizes = _args.sizes(batch_sizes, "batch_sizes")
    if len(set(sizes)) < 2 or len(set(sizes)) != len(sizes):
        raise MxbiError(f"batch_sizes: expected at least two distinct batch sizes, got {sizes}")
    target = _args.integer(target, "target")
    if target >= min(sizes):
        raise MxbiError(f"target: {target} is not a position in every batch (the smallest has {min(sizes)})")
    if ops is not None and not isinstance(ops, dict):
        raise MxbiError(f"ops: expected a dict of op name -> kind, got {type(ops).__name__}")
    declared = dict(ops or {})
    for name, kind in declared.items():
        if not isinstance(name, str) or not isinstance(kind, str):
            raise MxbiError(f"ops: expected op names and kinds as strings, got {name!r}: {kind!r}")
        if kind not in LOCATE_KINDS:
            raise MxbiError(f"ops: unknown kind '{kind}' for {name}; expected one of {', '.join(LOCATE_KINDS)}")
    from ._locate import locate as run

    return run(model, make_inputs, sizes, target, _args.integer(batch_dim, "batch_dim"), declared,
               _args.flag(explain_ops, "explain_ops"), _args.flag(evidence, "evidence"), _args.integer(seed, "seed"),
               _args.integer(keep_elements, "keep_elements"), _args.size(max_ops, "max_ops"),
               _args.integer(max_reveals, "max_reveals"))
