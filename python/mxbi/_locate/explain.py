"""Explaining one op at two batch sizes: its order on each side (revealed
by probes, or identified by search against an exact model), where the two
orders diverge and what to pin (docs/LOCATE.md, "What is explained")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

from .._mxbi import MxbiError
from . import kinds, models
from .record import OpRecord, Run


@dataclass
class Side:
    """The op's order at one batch size."""

    m: int
    shape: str  # the launch shape the order was found at (``M=..,K=..,N=..``)
    order: Optional[str] = None
    how: str = ""  # revealed / identified / not found, in words
    tree: Optional[str] = None  # the recovered tree, when no order names it
    launches: int = 0
    matches: List[str] = field(default_factory=list)  # orders of the family with the recovered tree (when only the tree was told)

    def to_dict(self) -> Dict[str, Any]:
        return {"m": self.m, "shape": self.shape, "order": self.order, "how": self.how, "launches": self.launches}


@dataclass
class Explanation:
    """Both sides, whether their orders differ, the text and the fixes."""

    kind: Optional[str]
    axis: Optional[str]
    sides: List[Side] = field(default_factory=list)
    differ: Optional[bool] = None  # the two sides' trees differ (None: not known)
    text: str = ""
    fixes: List[str] = field(default_factory=list)
    power: Optional[float] = None  # of the target's rows (GEMM-like ops; power.py)

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "axis": self.axis, "sides": [s.to_dict() for s in self.sides],
                "orders_differ": self.differ, "text": self.text, "fixes": self.fixes, "power": self.power}


def _reveal(fn: Any, m: int, k: int, n: int, t: str, seed: int, side: Side, note: str = "") -> Optional[str]:
    """Reveals ``fn`` at (m, k, n) into ``side``; returns the tree listing."""
    from .. import reveal

    try:
        r = reveal(fn, m, k, n, input=t, seed=seed, name="locate")
    except MxbiError as e:
        side.how = f"not revealed: {e}"
        return None
    side.launches = r.launches
    order = r.order
    how = "revealed"
    if order is None:
        side.matches = [str(x) for x in json.loads(r.to_json()).get("shape_matches") or []]
        if side.matches:
            order, how = side.matches[0], "revealed (the tree of this order; its step arithmetic not told)"
    side.order = order
    side.how = how + note
    if order is None:
        side.tree = r.shape
        side.how = "revealed: a tree no order of the grammar spells" + note
    return r.shape


def _axis_name(rec: OpRecord, axis: Optional[int]) -> Optional[str]:
    if axis is None or not rec.inputs:
        return None
    return f"axis {axis} of {rec.inputs[0].describe()} ({rec.inputs[0].shape[axis]} terms)"


def explain(kind: Optional[str], a: Tuple[Run, OpRecord], b: Tuple[Run, OpRecord], seed: int,
            slices: Tuple[Tuple[Any, Any], Tuple[Any, Any]], cache: Optional[Dict[Any, Any]] = None) -> Explanation:
    """Explains the op ``a`` (first run) against its partner ``b``.
    ``slices``: ((input, output) of side a, of side b), the target's kept
    slices (None when not kept)."""
    (ra, xa), (rb, xb) = a, b
    if kind is None:
        return Explanation(None, None, text=f"{xa.name} is not a reduction mxbi can re-run (no kind; declare one "
                                            "with ops={...} if it is one)")
    if kind in kinds.GEMM_KINDS:
        return _explain_probed(kind, ra, xa, rb, xb, seed, "gemm", cache)
    if kind in kinds.LINEAR_REDUCTIONS:
        return _explain_probed(kind, ra, xa, rb, xb, seed, "reduction", cache)
    if kind == "attention":
        return _explain_probed(kind, ra, xa, rb, xb, seed, "attention", cache)
    return _explain_modelled(kind, ra, xa, rb, xb, slices)


def signature(rec: OpRecord) -> Tuple[Any, ...]:
    """What decides an op's kernel: its name, inputs (shape, stride, dtype,
    device) and non-tensor arguments."""
    return (rec.name, tuple((i.shape, i.stride, i.dtype, i.device) for i in rec.inputs), repr(rec.args))


def _explain_probed(kind: str, ra: Run, xa: OpRecord, rb: Run, xb: OpRecord, seed: int, how: str,
                    cache: Optional[Dict[Any, Any]]) -> Explanation:
    ex = Explanation(kind, None)
    trees: List[Optional[str]] = []
    k = 0
    cache = {} if cache is None else cache
    for run, rec in ((ra, xa), (rb, xb)):
        key = (signature(rec), seed)
        if key in cache:
            side, tree, k, ex.axis = cache[key]
            ex.sides.append(replace(side, m=run.m, matches=list(side.matches)))
            trees.append(tree)
            continue
        try:
            if how == "gemm":
                fn, m, k, n, t = kinds.gemm_subject(kind, rec)
                note = ""
                ex.axis = f"K of the GEMM ({k} terms)"
            elif how == "reduction":
                fn, m, k, n, t, note = kinds.reduction_subject(kind, rec)
                ex.axis = _axis_name(rec, kinds.reduction_axis(kind, rec))
            else:
                fn, m, k, n, t, note = kinds.attention_subject(rec)
                ex.axis = f"the key/value length ({k} terms)"
        except kinds.NotReplayable as e:
            side = Side(run.m, "", how=f"not re-run: {e}")
            ex.sides.append(side)
            trees.append(None)
            continue
        side = Side(run.m, f"M={m},K={k},N={n}")
        trees.append(_reveal(fn, m, k, n, t, seed, side, note))
        ex.sides.append(side)
        cache[key] = (replace(side, matches=list(side.matches)), trees[-1], k, ex.axis)
    _compare_sides(ex, trees, k)
    return ex


def _compare_sides(ex: Explanation, trees: List[Optional[str]], k: int) -> None:
    from ..explain import diverge

    sa, sb = ex.sides
    _same_output_spelling(sa, sb)
    _same_output_spelling(sb, sa)
    lines = [f"at m={s.m} ({s.shape or 'not run'}): {s.order or '(no order)'} [{s.how}]" for s in ex.sides]
    if trees[0] is not None and trees[1] is not None:
        ex.differ = trees[0] != trees[1]
        if sa.order and sb.order and ex.differ:
            ma = int(sa.shape.split(",")[0][2:]) if sa.shape.startswith("M=") else None
            mb = int(sb.shape.split(",")[0][2:]) if sb.shape.startswith("M=") else None
            try:
                d = diverge(sa.order, sb.order, k, m_left=ma, m_right=mb)
                lines.append(d.text.rstrip("\n"))
                ex.fixes = list(d.fixes)
            except MxbiError as e:
                lines.append(f"(where they diverge: not told: {e})")
        elif ex.differ:
            lines.append("the recovered trees differ")
        else:
            lines.append("the same tree at both batch sizes: the difference is not in this reduction's order")
    ex.text = "\n".join(lines)


def _output_of(order: str) -> str:
    return next((p for p in order.split(";") if p.startswith("out=")), "")


def _same_output_spelling(side: Side, other: Side) -> None:
    """Where only ``side``'s tree was told, the shape match that converts its
    output as ``other``'s order does (so the divergence is about the tree)."""
    if not side.matches or not other.order:
        return
    want = _output_of(other.order)
    pick = next((o for o in side.matches if _output_of(o) == want), None)
    if pick is not None:
        side.order = pick


#: rows of the designed input that the model search reads (the same at both batch sizes)
SEARCH_ROWS = 32


def _designed(kind: str, rec: OpRecord, axis: int, rows: int) -> Tuple[Any, Any]:
    """(input, output) of the op re-run on a designed input of its recorded
    shape: the first ``rows`` rows along the reduced axis hold the same
    seeded values at every batch size (softmax: normal with deviation 2;
    RMS norm: normal times 2^[-4, 4], a wide spread of squares), the rest
    other seeded values."""
    import torch

    info = rec.inputs[0]
    shape = list(info.shape)
    moved = shape[:axis] + shape[axis + 1:] + [shape[axis]]
    gen = torch.Generator().manual_seed(0x10CA7E)
    x = torch.randn(moved, generator=gen)
    flat = x.reshape(-1, shape[axis])
    head = torch.randn(rows, shape[axis], generator=torch.Generator().manual_seed(7))
    if kind == "rms_norm":
        head = head * torch.exp2(torch.randint(-4, 5, head.shape, generator=torch.Generator().manual_seed(8)).float())
    else:
        head = head * 2
    flat[: head.shape[0]] = head
    xt = kinds.place(x.movedim(-1, axis).contiguous().numpy(), info)
    y = kinds.rerun(rec, {0: xt})
    xs = xt.movedim(axis, -1).reshape(-1, shape[axis])[: head.shape[0]].cpu()
    ys = y.movedim(axis, -1).reshape(-1, shape[axis])[: head.shape[0]].cpu()
    return xs, ys


def _explain_modelled(kind: str, ra: Run, xa: OpRecord, rb: Run, xb: OpRecord,
                      slices: Tuple[Tuple[Any, Any], Tuple[Any, Any]]) -> Explanation:
    axis = kinds.reduction_axis(kind, xa)
    ex = Explanation(kind, _axis_name(xa, axis))
    if kind not in models.MODELLED or axis is None:
        ex.text = f"a {kinds.describe_kind(kind)} over {ex.axis or 'several axes'}: no exact model, order not identified"
        return ex
    found_sets: List[List[str]] = []
    designed: List[Any] = []
    rows = min([SEARCH_ROWS] + [kinds.prod(r.inputs[0].shape) // max(r.inputs[0].shape[axis], 1) for r in (xa, xb)])
    for (run, rec), (x, y) in zip(((ra, xa), (rb, xb)), slices):
        side = Side(run.m, f"K={rec.inputs[0].shape[axis]}")
        ex.sides.append(side)
        source = "designed inputs"
        try:
            x, y = _designed(kind, rec, axis, rows)
            search_axis = 1
            designed.append(y)
        except (kinds.NotReplayable, RuntimeError, TypeError, ValueError):
            source, search_axis = "the target's slices", axis
        if x is None or y is None:
            side.how = "not identified: the op cannot be re-run and the target's slices were not kept"
            found_sets.append([])
            continue
        extra = models.model_inputs(kind, rec)
        try:
            found, model = models.search(kind, x, y, search_axis, rec.inputs[0].device, y.dtype, **extra)
        except (RuntimeError, MxbiError, ValueError, TypeError) as e:
            side.how = f"not identified: {e}"
            found_sets.append([])
            continue
        found_sets.append(found)
        if found:
            side.order = found[0]
            side.how = f"identified on {source} by search against the model {model}" + (
                f" ({len(found)} orders match)" if len(found) > 1 else "")
        else:
            side.how = f"no order of the family reproduces the bytes on {source} under the model {model}"
    common = [o for o in found_sets[0] if o in found_sets[1]] if len(found_sets) == 2 else []
    if common:  # both sides are consistent with one order: name it on both
        for side in ex.sides:
            side.order = common[0]
    trees = [None, None]
    k = xa.inputs[0].shape[axis]
    if all(s.order for s in ex.sides):
        from .. import order as parse_order

        trees = [parse_order(s.order).tree(k).listing() for s in ex.sides]  # type: ignore[union-attr]
    _compare_sides(ex, trees, k)
    if len(designed) == 2:
        from .compare import max_ulp

        same = designed[0].shape == designed[1].shape and torch_equal_bytes(designed[0], designed[1])
        if not same:
            # the same rows, another batch size, other bytes: the order moved
            ex.differ = True
            u = max_ulp(designed[0].contiguous(), designed[1].contiguous())
            ex.text += (f"\non the designed inputs the same {designed[0].shape[0]} rows give other bytes at the two "
                        f"batch sizes (at most {u} ULP): the reduction order depends on the batch size")
        else:
            ex.text += "\non the designed inputs the same rows give the same bytes at both batch sizes"
    return ex


def torch_equal_bytes(x: Any, y: Any) -> bool:
    """Whether two CPU tensors of one shape and dtype hold the same bytes."""
    if x.dtype != y.dtype:
        return False
    return bool((x.contiguous().view(-1).view(_int_of(x)) == y.contiguous().view(-1).view(_int_of(y))).all())


def _int_of(t: Any) -> Any:
    import torch

    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]


__all__ = ["Explanation", "Side", "explain"]
