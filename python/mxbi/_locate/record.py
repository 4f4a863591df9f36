"""Recording a program's aten ops: one run at one batch size, under a
``TorchDispatchMode`` and forward hooks (docs/LOCATE.md, "What is recorded").

A run is recorded twice. The *shape pass* keeps, for every op, its name,
the module it ran in, where each tensor input came from (an earlier op's
output, or a leaf: a model input, a parameter, a buffer, a constant) and
every tensor's shape, stride, dtype and device. The *slice pass* runs the
program again with a plan (from :mod:`.align`) that says, for every tensor
position, which slice belongs to the target sample; it keeps the SHA-256 of
that slice's bytes and, for slices up to ``keep_elements``, the slice itself
(on the CPU) for the ULP distance. Whole activations are never kept.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from .._mxbi import MxbiError

# A tensor's slice rule: ("batch", dim, per) -- the target's `per` entries of
# `dim` at offset target * per; ("shared",) -- the whole tensor (it does not
# grow with the batch); ("opaque",) -- no slice can be told (not compared).
Rule = Tuple[Any, ...]
SHARED: Rule = ("shared",)
OPAQUE: Rule = ("opaque",)


@dataclass
class TensorInfo:
    """One tensor an op read or wrote."""

    shape: Tuple[int, ...]
    stride: Tuple[int, ...]
    dtype: str
    device: str
    rule: Rule = OPAQUE
    digest: Optional[str] = None
    data: Optional[torch.Tensor] = None  # the target slice on the CPU, when small

    def describe(self) -> str:
        return f"{self.dtype}[{','.join(str(s) for s in self.shape)}]"


# Where an input came from: ("op", index, slot) or ("leaf", name).
Source = Tuple[Any, ...]


@dataclass
class OpRecord:
    """One aten op call."""

    index: int
    name: str  # the op's name, e.g. ``aten::mm`` or ``aten::sum.dim_IntList``
    module: str  # the dotted module path (``named_modules()``), "" for the root
    sources: List[Source]
    inputs: List[TensorInfo]
    outputs: List[TensorInfo]
    func: Any = None  # the OpOverload, to re-run the op when it is explained
    args: Any = None  # args/kwargs with tensors replaced by their input slot
    shared: Dict[int, torch.Tensor] = field(default_factory=dict)  # inputs kept for re-runs

    @property
    def key(self) -> Tuple[str, str]:
        return (self.name, self.module)


@dataclass
class Leaf:
    """A tensor no recorded op produced."""

    name: str
    info: TensorInfo


@dataclass
class Run:
    """One batch size's recording."""

    m: int
    ops: List[OpRecord]
    leaves: Dict[str, Leaf]
    outputs: List[Source]  # where the program's outputs came from


class Slot:
    """A tensor argument's place among an op's tensor inputs (for re-runs)."""

    __slots__ = ("i",)

    def __init__(self, i: int):
        self.i = i

    def __repr__(self) -> str:
        return f"<input {self.i}>"


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def info_of(t: torch.Tensor) -> TensorInfo:
    return TensorInfo(tuple(t.shape), tuple(t.stride()), dtype_name(t.dtype), str(t.device))


def take_slice(t: torch.Tensor, rule: Rule, target: int, m: int, keep_elements: int) -> Tuple[Optional[str], Optional[torch.Tensor]]:
    """(digest, kept slice) of the target's part of `t` under `rule`."""
    if rule[0] == "opaque":
        return None, None
    try:
        s = t.detach()
        if rule[0] == "batch":
            _, dim, per = rule
            if s.shape[dim] != per * m:
                return None, None
            s = s.narrow(dim, target * per, per)
        cpu = s.to("cpu").contiguous()
        raw = cpu.reshape(-1).view(torch.uint8).numpy()
    except (RuntimeError, TypeError, ValueError):  # sparse, meta, quantized: not compared
        return None, None
    digest = hashlib.sha256(raw.tobytes()).hexdigest()
    return digest, (cpu if cpu.numel() <= keep_elements else None)


class Recorder(TorchDispatchMode):
    """Records every aten op the program runs (see the module doc)."""

    def __init__(self, m: int, target: int, leaf_names: Dict[int, str], module_stack: List[str],
                 plan: Optional[Callable[[int, str, int], Rule]], keep_elements: int, explainable: Callable[[str], bool],
                 max_ops: int):
        super().__init__()
        self.m, self.target = m, target
        self.leaf_names = leaf_names
        self.stack = module_stack
        self.plan = plan
        self.keep = keep_elements
        self.explainable = explainable
        self.max_ops = max_ops
        self.ops: List[OpRecord] = []
        self.leaves: Dict[str, Leaf] = {}
        self.made: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.constants = 0

    def source_of(self, t: torch.Tensor, index: int, slot: int) -> Source:
        got = self.made.get(t)
        if got is not None:
            return got
        name = self.leaf_names.get(id(t))
        if name is None:
            name = f"constant#{self.constants}"
            self.constants += 1
            self.leaf_names[id(t)] = name
        if name not in self.leaves:
            info = info_of(t)
            if self.plan is not None:
                info.rule = self.plan(index, "in", slot)
                info.digest, info.data = take_slice(t, info.rule, self.target, self.m, self.keep)
            self.leaves[name] = Leaf(name, info)
        return ("leaf", name)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        index = len(self.ops)
        if index >= self.max_ops:
            raise MxbiError(f"the program ran more than {self.max_ops} ops (max_ops)")
        flat_in, _ = tree_flatten((args, kwargs))
        tensors_in = [x for x in flat_in if isinstance(x, torch.Tensor)]
        sources = [self.source_of(t, index, i) for i, t in enumerate(tensors_in)]
        name = func.name()
        rec = OpRecord(index, name, self.stack[-1] if self.stack else "", sources,
                       [info_of(t) for t in tensors_in], [])
        if self.plan is not None:
            for i, info in enumerate(rec.inputs):
                info.rule = self.plan(index, "in", i)
        if self.explainable(name):
            counter = iter(range(len(tensors_in)))
            rec.func = func
            rec.args = tree_map(lambda x: Slot(next(counter)) if isinstance(x, torch.Tensor) else x, (args, kwargs))
            # non-batch inputs (weights, masks) are kept by reference for re-runs
            for i, t in enumerate(tensors_in):
                if rec.inputs[i].rule[0] == "shared":
                    rec.shared[i] = t
        flat_out, _ = tree_flatten(out)
        for slot, t in enumerate(x for x in flat_out if isinstance(x, torch.Tensor)):
            info = info_of(t)
            if self.plan is not None:
                info.rule = self.plan(index, "out", slot)
                info.digest, info.data = take_slice(t, info.rule, self.target, self.m, self.keep)
            rec.outputs.append(info)
            self.made[t] = ("op", index, slot)
        self.ops.append(rec)
        return out


def _push(stack: List[str], path: str) -> None:
    stack.append(path)


def _pop(stack: List[str]) -> None:
    if stack:
        stack.pop()


def run_once(program: Callable[..., Any], inputs: Sequence[Any], m: int, target: int, module_names: Dict[int, str],
             modules: List[Tuple[str, torch.nn.Module]], plan: Optional[Callable[[int, str, int], Rule]],
             keep_elements: int, explainable: Callable[[str], bool], max_ops: int,
             param_names: Dict[int, str]) -> Run:
    """Runs ``program(*inputs)`` once under the recorder (no autograd)."""
    stack: List[str] = []
    leaf_names: Dict[int, str] = dict(param_names)
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            leaf_names[id(x)] = f"input[{i}]"
    handles = []
    for path, mod in modules:
        handles.append(mod.register_forward_pre_hook(lambda _m, _a, p=path: _push(stack, p)))
        handles.append(mod.register_forward_hook(lambda _m, _a, _o: _pop(stack), always_call=True))
    rec = Recorder(m, target, leaf_names, stack, plan, keep_elements, explainable, max_ops)
    try:
        with torch.no_grad(), rec:
            result = program(*inputs)
    finally:
        for h in handles:
            h.remove()
    flat, _ = tree_flatten(result)
    outs = [rec.made.get(t) or ("leaf", leaf_names.get(id(t), "?")) for t in flat if isinstance(t, torch.Tensor)]
    return Run(m, rec.ops, rec.leaves, outs)
