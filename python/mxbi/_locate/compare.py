"""Comparing the target's slices of two aligned runs, op by op, and the
verdicts (docs/LOCATE.md, "Root cause").

For an op aligned between the first run (batch size ``a``) and another
(batch size ``b``):

- ``same``: every output slice has the same bytes;
- ``root``: an output slice differs while every input it read was identical
  (same bytes of the target's slice, or of the whole tensor for shared
  inputs): the op itself introduced the difference;
- ``inherits``: an output differs and so did an input;
- ``after-unaligned``: an output differs, no compared input did, and an
  input came from ops that ran at one batch size only (the programs took
  different paths; the root cause is that region);
- ``mixes-batch``: an input is the target's slice but an output does not
  grow with the batch (the op reduces over samples: its output depends on
  the other samples by definition);
- ``opaque``: an output slice cannot be told (not compared).

Integer outputs that do not grow with the batch beside one that does (an
attention kernel's RNG seed and offset) are launch state, not compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from .align import Plan
from .record import OpRecord, Run, Source, TensorInfo

_ORDERED = {torch.float32: torch.int32, torch.float64: torch.int64, torch.bfloat16: torch.int16,
            torch.float16: torch.int16}


def max_ulp(x: Optional[torch.Tensor], y: Optional[torch.Tensor]) -> Optional[int]:
    """The largest distance in units in the last place between two slices
    of one float type (NaN against a number counts as ``None``: not a
    distance); 0 for equal bytes; None when either slice was not kept."""
    if x is None or y is None or x.shape != y.shape or x.dtype != y.dtype:
        return None
    if x.numel() == 0:
        return 0
    it = _ORDERED.get(x.dtype)
    if it is None:
        if x.dtype.is_floating_point and x.element_size() == 1:  # FP8: through float32
            return max_ulp(x.float(), y.float())
        return None if not torch.equal(x, y) else 0
    if torch.isnan(x).any() or torch.isnan(y).any():
        same_nan = torch.equal(torch.isnan(x), torch.isnan(y))
        if not same_nan:
            return None
        keep = ~torch.isnan(x)
        x, y = x[keep], y[keep]
        if x.numel() == 0:
            return 0
    bits = x.element_size() * 8

    def ordered(t: torch.Tensor) -> np.ndarray:
        v = t.contiguous().view(it).numpy().astype(np.int64)
        magnitude = np.int64((1 << (bits - 1)) - 1)
        return np.where(v < 0, -(v & magnitude), v)

    return int(np.max(np.abs(ordered(x) - ordered(y))))


@dataclass
class OpVerdict:
    """One aligned op's verdict against the first run."""

    verdict: str
    max_ulp: Optional[int]
    differing: int  # output elements (of the kept slices) whose bytes differ; -1 when not kept
    elements: int


def _differing(x: Optional[torch.Tensor], y: Optional[torch.Tensor]) -> Tuple[int, int]:
    if x is None or y is None or x.shape != y.shape:
        return -1, 0 if x is None else x.numel()
    xb = x.reshape(-1).view(torch.uint8).reshape(x.numel(), -1) if x.numel() else x.reshape(0, 1)
    yb = y.reshape(-1).view(torch.uint8).reshape(y.numel(), -1) if y.numel() else y.reshape(0, 1)
    return int((xb != yb).any(dim=1).sum()), x.numel()


class Comparison:
    """The verdicts of every op aligned between run 0 and run ``r``."""

    def __init__(self, plan: Plan, r: int):
        self.plan, self.r = plan, r
        self.a, self.b = plan.runs[0], plan.runs[r]
        self.verdicts: Dict[int, OpVerdict] = {}
        self._out_same: Dict[Tuple[int, int], Optional[bool]] = {}
        for j in range(len(self.a.ops)):
            jb = plan.partner(r, j)
            if jb is None:
                continue
            self.verdicts[j] = self._judge(self.a.ops[j], self.b.ops[jb])

    def _info_same(self, x: TensorInfo, y: TensorInfo) -> Optional[bool]:
        if x.digest is None or y.digest is None:
            return None
        return x.digest == y.digest

    def input_status(self, sa: Source, sb: Source) -> str:
        """``same``, ``differs``, ``unknown`` (opaque) or ``unaligned``."""
        if sa[0] == "leaf" and sb[0] == "leaf":
            if sa[1] != sb[1]:
                return "unaligned"
            la, lb = self.a.leaves.get(sa[1]), self.b.leaves.get(sb[1])
            if la is None or lb is None:
                return "unknown"
            s = self._info_same(la.info, lb.info)
            return "unknown" if s is None else ("same" if s else "differs")
        if sa[0] == "op" and sb[0] == "op":
            if self.plan.partner(self.r, sa[1]) != sb[1]:
                return "unaligned"
            s = self._out_same.get((sa[1], sa[2]))
            if s is None:
                s = self._info_same(self.a.ops[sa[1]].outputs[sa[2]], self.b.ops[sb[1]].outputs[sb[2]])
            return "unknown" if s is None else ("same" if s else "differs")
        return "unaligned"

    def _judge(self, x: OpRecord, y: OpRecord) -> OpVerdict:
        outs: List[Optional[bool]] = []
        ulp: Optional[int] = 0
        differing, elements = 0, 0
        skip = bookkeeping(x)
        for slot, (ox, oy) in enumerate(zip(x.outputs, y.outputs)):
            if slot in skip:
                continue
            s = self._info_same(ox, oy)
            self._out_same[(x.index, slot)] = s
            outs.append(s)
            if s is False:
                u = max_ulp(ox.data, oy.data)
                ulp = None if (u is None or ulp is None) else max(ulp, u)
                d, e = _differing(ox.data, oy.data)
                differing = -1 if (d < 0 or differing < 0) else differing + d
                elements += e
            elif ox.data is not None:
                elements += ox.data.numel()
        if len(x.outputs) != len(y.outputs):
            return OpVerdict("opaque", None, -1, 0)
        if all(s is True for s in outs):
            return OpVerdict("same", 0, 0, elements)
        batched_in = any(i.rule[0] == "batch" for i in x.inputs)
        shared_differs = any(self._info_same(ox, oy) is False for slot, (ox, oy) in enumerate(zip(x.outputs, y.outputs))
                             if ox.rule[0] == "shared" and slot not in skip)
        if batched_in and shared_differs:
            return OpVerdict("mixes-batch", ulp, differing, elements)
        if not any(s is False for s in outs):
            return OpVerdict("opaque", None, -1, elements)
        status = [self.input_status(sa, sb) for sa, sb in zip(x.sources, y.sources)]
        if len(x.sources) != len(y.sources):
            status.append("unaligned")
        if "differs" in status:
            v = "inherits"
        elif "unaligned" in status:
            v = "after-unaligned"
        elif "unknown" in status:
            v = "opaque"
        else:
            v = "root"
        return OpVerdict(v, ulp, differing, elements)


def bookkeeping(op: OpRecord) -> set:
    """Output slots not compared: integer tensors that do not grow with the
    batch beside an output that does (an attention kernel's RNG seed and
    offset, say): state of the launch, not a result about the sample."""
    if not any(o.rule[0] == "batch" for o in op.outputs):
        return set()
    return {slot for slot, o in enumerate(op.outputs)
            if o.rule[0] == "shared" and not o.dtype.startswith(("float", "bfloat", "complex"))}


def unaligned_ops(plan: Plan, r: int) -> Tuple[List[int], List[int]]:
    """Op indices of run 0 and of run ``r`` that have no partner."""
    a = [j for j in range(len(plan.runs[0].ops)) if plan.partner(r, j) is None]
    b = [i for i in range(len(plan.runs[r].ops)) if i not in plan.back[r]]
    return a, b


def program_outputs_same(plan: Plan, cmp: Comparison) -> Optional[bool]:
    """Whether the program's outputs (the target's slices) have the same bytes."""
    a, b = plan.runs[0], plan.runs[cmp.r]
    if len(a.outputs) != len(b.outputs):
        return False
    got: List[str] = [cmp.input_status(sa, sb) for sa, sb in zip(a.outputs, b.outputs)]
    if any(g == "differs" for g in got):
        return False
    if all(g == "same" for g in got):
        return True
    return None


__all__ = ["Comparison", "OpVerdict", "max_ulp", "unaligned_ops", "program_outputs_same", "Run"]
