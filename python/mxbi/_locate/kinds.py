"""What kind of computation an op is, and how it is re-run as a subject
of the explainer (docs/LOCATE.md, "What is explained").

Kinds and the signature each assumes (aten ops are known; custom ops are
declared with ``locate(..., ops={"lib::name": kind})`` and must take their
tensors in the order given):

- ``mm``: ``(a[..., M, K] (leading dims folded into M), b[K, N], ...)``;
  ``addmm``/``baddbmm``: ``(bias, a, b, ...)``; ``bmm``: ``(a[B, M, K],
  b[B, K, N])``; ``linear``: ``(x[..., K], w[N, K], bias?)``;
  ``scaled_mm``: ``(a[M, K], b[K, N], scale_a, scale_b, ...)`` (FP8).
- ``sum``/``mean``: a linear reduction over one axis (aten: its ``dim``
  argument; custom: the last axis).
- ``softmax``/``log_softmax``/``rms_norm``/``layer_norm``/``var``: a
  nonlinear reduction over the last axis (aten: its own axis argument).
- ``attention``: ``(q[B, H, S, D], k[B, Hkv, L, D], v[B, Hkv, L, D], ...)``,
  reducing over the key/value length L.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch.utils._pytree import tree_map

from ..torch import LOCATE_KINDS
from .record import OpRecord, TensorInfo, Slot

ATEN_KINDS: Dict[str, str] = {
    "aten::mm": "mm",
    "aten::addmm": "addmm",
    "aten::bmm": "bmm",
    "aten::baddbmm": "baddbmm",
    "aten::linear": "linear",
    "aten::_scaled_mm": "scaled_mm",
    "aten::sum": "sum",
    "aten::sum.dim_IntList": "sum",
    "aten::mean": "mean",
    "aten::mean.dim": "mean",
    "aten::_softmax": "softmax",
    "aten::_log_softmax": "log_softmax",
    "aten::native_layer_norm": "layer_norm",
    "aten::rms_norm": "rms_norm",
    "aten::_fused_rms_norm": "rms_norm",
    "aten::var.correction": "var",
    "aten::var_mean.correction": "var",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "attention",
    "aten::_scaled_dot_product_flash_attention": "attention",
    "aten::_scaled_dot_product_efficient_attention": "attention",
    "aten::_scaled_dot_product_cudnn_attention": "attention",
}

GEMM_KINDS = ("mm", "addmm", "bmm", "baddbmm", "linear", "scaled_mm")
LINEAR_REDUCTIONS = ("sum", "mean")
NONLINEAR_REDUCTIONS = ("softmax", "log_softmax", "rms_norm", "layer_norm", "var")
assert set(GEMM_KINDS + LINEAR_REDUCTIONS + NONLINEAR_REDUCTIONS + ("attention",)) == set(LOCATE_KINDS)

# torch dtype name -> the explainer's input type name
INPUT_TYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "float8_e4m3fn": "e4m3",
               "float8_e5m2": "e5m2"}


def kind_of(name: str, declared: Dict[str, str]) -> Optional[str]:
    base = name.split(".")[0]
    return declared.get(name) or declared.get(base) or ATEN_KINDS.get(name) or ATEN_KINDS.get(base)


def place(values: np.ndarray, info: TensorInfo) -> torch.Tensor:
    """``values`` (float32, exact in the tensor's type) as a tensor with the
    recorded shape, dtype, device and, where they do not overlap, strides."""
    dt = getattr(torch, info.dtype)
    src = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32).reshape(info.shape))
    if 0 in info.stride or len(info.stride) != len(info.shape):
        return src.to(device=info.device, dtype=dt).contiguous()
    out = torch.empty_strided(info.shape, info.stride, dtype=dt, device=info.device)
    out.copy_(src)
    return out


def zeros(info: TensorInfo) -> torch.Tensor:
    dt = getattr(torch, info.dtype)
    return torch.zeros(info.shape, dtype=dt, device=info.device)


class NotReplayable(Exception):
    """The op cannot be re-run as a subject (the reason is the message)."""


def rerun(rec: OpRecord, tensors: Dict[int, torch.Tensor], fill_zero: Tuple[int, ...] = ()) -> Any:
    """Runs the recorded op again with ``tensors`` in the given input slots,
    the kept shared inputs elsewhere, zeros in ``fill_zero`` slots."""
    if rec.func is None or rec.args is None:
        raise NotReplayable(f"{rec.name} was not kept for a re-run")
    slots: Dict[int, torch.Tensor] = {}
    for i, info in enumerate(rec.inputs):
        if i in tensors:
            slots[i] = tensors[i]
        elif i in fill_zero:
            slots[i] = zeros(info)
        elif i in rec.shared:
            slots[i] = rec.shared[i]
        else:
            raise NotReplayable(f"input {i} of {rec.name} ({info.describe()}) is per-sample and was not kept")
    args, kwargs = tree_map(lambda x: slots[x.i] if isinstance(x, Slot) else x, rec.args)
    out = rec.func(*args, **kwargs)
    if out is not None and not isinstance(out, torch.Tensor):
        out = out[0]
    if isinstance(out, torch.Tensor) and out.device.type == "cuda":
        torch.cuda.synchronize(out.device)
    return out


def prod(xs: Any) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p


def _f32(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu").float().contiguous().numpy()


Subject = Callable[[np.ndarray, np.ndarray], np.ndarray]


def gemm_subject(kind: str, rec: OpRecord) -> Tuple[Subject, int, int, int, str]:
    """(subject, M, K, N, input type) re-running a GEMM-like op at its recorded
    shapes: the subject's A and B go where the op reads them."""
    ins = rec.inputs
    if kind in ("addmm", "baddbmm"):
        ia, ib, zero = 1, 2, (0,)
    else:
        ia, ib, zero = 0, 1, ()
    if len(ins) <= ib:
        raise NotReplayable(f"{rec.name}: expected at least {ib + 1} tensor inputs, got {len(ins)}")
    xa, xb = ins[ia], ins[ib]
    if kind in ("bmm", "baddbmm"):
        if len(xa.shape) != 3 or len(xb.shape) != 3:
            raise NotReplayable(f"{rec.name}: expected 3-D operands")
        batch, m, k = xa.shape
        n = xb.shape[2]
    elif kind == "linear":
        m, k, n = prod(xa.shape[:-1]), xa.shape[-1], xb.shape[0]
    else:
        m, k, n = prod(xa.shape[:-1]), xa.shape[-1], xb.shape[-1]
    t = INPUT_TYPES.get(xa.dtype)
    if t is None:
        raise NotReplayable(f"{rec.name}: {xa.dtype} operands have no probe type")
    fill = zero
    ones: Dict[int, torch.Tensor] = {}
    if kind == "scaled_mm":
        for i in range(2, min(4, len(ins))):
            ones[i] = torch.ones(ins[i].shape, dtype=getattr(torch, ins[i].dtype), device=ins[i].device)

    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if kind in ("bmm", "baddbmm"):
            ta = place(np.broadcast_to(a, (batch, m, k)), xa)
            tb = place(np.broadcast_to(b, (batch, k, n)), xb)
        else:
            ta = place(a, xa)
            tb = place(b.T if kind == "linear" else b, xb)
        out = rerun(rec, {ia: ta, ib: tb, **ones}, fill)
        if kind in ("bmm", "baddbmm"):
            out = out[0]
        return _f32(out).reshape(m, n)

    return fn, m, k, n, t


def reduction_axis(kind: str, rec: OpRecord) -> Optional[int]:
    """The reduced axis of the op's first input (None: several or all axes)."""
    rank = len(rec.inputs[0].shape) if rec.inputs else 0
    if rank == 0:
        return None
    args = rec.args[0] if rec.args else ()
    axis: Any = rank - 1
    if rec.name.startswith("aten::"):
        if kind in ("sum", "mean"):
            if len(args) < 2 or args[1] is None:
                return None if rank > 1 else 0
            axis = args[1]
            if isinstance(axis, (list, tuple)):
                if len(axis) != 1:
                    return None
                axis = axis[0]
        elif kind in ("softmax", "log_softmax"):
            axis = args[1] if len(args) > 1 else rank - 1
        elif kind in ("rms_norm", "layer_norm"):
            shape = args[1] if len(args) > 1 else [rec.inputs[0].shape[-1]]
            if len(shape) != 1:
                return None
        elif kind == "var":
            dims = args[1] if len(args) > 1 else None
            if not dims or len(dims) != 1:
                return None
            axis = dims[0]
    return int(axis) % rank


def reduction_subject(kind: str, rec: OpRecord) -> Tuple[Subject, int, int, int, str, str]:
    """(subject, M=1, K, N, input type, note) revealing a linear reduction:
    the K terms of output j are ``a[0, k] * b[k, j]`` (exact for the
    probes, whose A is units), laid along the reduced axis at the
    recorded shape, one output per remaining position."""
    x = rec.inputs[0]
    d = reduction_axis(kind, rec)
    if d is None:
        raise NotReplayable(f"{rec.name} reduces over several axes")
    k = x.shape[d]
    outer = prod(x.shape) // max(k, 1)
    t = INPUT_TYPES.get(x.dtype)
    if t is None:
        raise NotReplayable(f"{rec.name}: {x.dtype} inputs have no probe type")
    scale = 1.0
    note = ""
    if kind == "mean":
        if k & (k - 1):
            raise NotReplayable(f"{rec.name}: a mean over {k} terms divides by a number that is not a power of two "
                                "(the counts the probes read would round)")
        scale = float(k)
        note = f" (the mean times {k}, exact)"
    moved = x.shape[:d] + x.shape[d + 1:] + (k,)

    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        terms = (a[0].astype(np.float64)[:, None] * b.astype(np.float64)).T  # outer x K
        xt = torch.from_numpy(terms.astype(np.float32).reshape(moved)).movedim(-1, d)
        out = rerun(rec, {0: place(xt.numpy(), x)})
        return (_f32(out).reshape(1, outer).astype(np.float64) * scale).astype(np.float32)

    return fn, 1, k, outer, t, note


def attention_subject(rec: OpRecord) -> Tuple[Subject, int, int, int, str, str]:
    """(subject, M=1, K=L, N, input type, note) revealing how an attention
    op combines partial results over the key/value length L: q = k = 0
    makes every score equal, so the last query's output is the mean of V's
    rows (a linear reduction over L); V's rows carry the probes."""
    if len(rec.inputs) < 3:
        raise NotReplayable(f"{rec.name}: expected q, k, v")
    q, kk, v = rec.inputs[:3]
    if len(q.shape) != 4 or len(v.shape) != 4:
        raise NotReplayable(f"{rec.name}: expected [B, H, S, D] operands")
    b, hq, s, dq = q.shape
    _, hk, l, d = v.shape
    if hk == 0 or hq % hk or l & (l - 1):
        raise NotReplayable(f"{rec.name}: a key/value length of {l} is not a power of two (the mean rounds)")
    t = INPUT_TYPES.get(v.dtype)
    if t is None:
        raise NotReplayable(f"{rec.name}: {v.dtype} inputs have no probe type")
    group = hq // hk
    n = b * hk * d
    zq = np.zeros(q.shape, np.float32)
    zk = np.zeros(kk.shape, np.float32)

    def fn(a: np.ndarray, bm: np.ndarray) -> np.ndarray:
        terms = a[0].astype(np.float64)[:, None] * bm.astype(np.float64)  # L x (B*Hkv*D)
        vt = terms.astype(np.float32).reshape(l, b, hk, d).transpose(1, 2, 0, 3)
        out = rerun(rec, {0: place(zq, q), 1: place(zk, kk), 2: place(vt, v)})
        last = _f32(out)[:, ::group, s - 1, :]  # [B, Hkv, D]
        return (last.reshape(1, n).astype(np.float64) * l).astype(np.float32)

    return fn, 1, l, n, t, " (equal scores: the last query's output times L)"


def explainable(declared: Dict[str, str]) -> Callable[[str], bool]:
    return lambda name: kind_of(name, declared) is not None


def describe_kind(kind: Optional[str]) -> str:
    return {
        None: "op",
        "mm": "GEMM", "addmm": "GEMM", "bmm": "batched GEMM", "baddbmm": "batched GEMM", "linear": "GEMM",
        "scaled_mm": "scaled FP8 GEMM", "sum": "sum", "mean": "mean", "softmax": "softmax",
        "log_softmax": "log-softmax", "rms_norm": "RMS norm", "layer_norm": "layer norm", "var": "variance",
        "attention": "attention",
    }.get(kind, kind or "op")


__all__: List[str] = ["kind_of", "gemm_subject", "reduction_subject", "attention_subject", "NotReplayable"]
