"""``mxbi.torch.locate``: from a PyTorch program to the op that breaks batch
invariance and its accumulation order (docs/LOCATE.md).

Importing this package imports torch; ``mxbi.torch`` imports it only when
``locate`` is called.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .._mxbi import MxbiError
from . import kinds
from .align import Plan
from .compare import Comparison, program_outputs_same, unaligned_ops
from .explain import Explanation, explain
from .power import gemm_power
from .record import OpRecord, Run, run_once
from .report import Evidence, LocateReport, OpRow, RootCause

__all__ = ["locate", "LocateReport", "RootCause", "Evidence", "OpRow"]

_CAUSES = ("root", "after-unaligned", "mixes-batch")


def _inputs(make_inputs: Callable[[int], Any], m: int, batch_dim: int) -> Tuple[Any, ...]:
    got = make_inputs(m)
    inputs = tuple(got) if isinstance(got, (tuple, list)) else (got,)
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if not tensors:
        raise MxbiError(f"make_inputs({m}): returned no tensor")
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.dim() > batch_dim and x.shape[batch_dim] != m:
            raise MxbiError(f"make_inputs({m}): input {i} has {x.shape[batch_dim]} entries along batch_dim "
                            f"{batch_dim}, expected {m}")
    return inputs


def _name_of(program: Any) -> str:
    if isinstance(program, torch.nn.Module):
        return type(program).__name__
    return getattr(program, "__qualname__", None) or type(program).__name__


def _shapes(rec: OpRecord) -> str:
    return ", ".join(i.describe() for i in rec.inputs)


def _slice_of(run: Run, source: Any) -> Any:
    if source[0] == "op":
        return run.ops[source[1]].outputs[source[2]].data
    leaf = run.leaves.get(source[1])
    return leaf.info.data if leaf else None


def locate(model: Any, make_inputs: Callable[[int], Any], sizes: List[int], target: int, batch_dim: int,
           declared: Dict[str, str], explain_ops: bool, evidence: bool, seed: int, keep_elements: int, max_ops: int,
           max_reveals: int) -> LocateReport:
    """:func:`mxbi.torch.locate` on validated arguments (see its doc)."""
    modules: List[Tuple[str, torch.nn.Module]] = []
    param_names: Dict[int, str] = {}
    if isinstance(model, torch.nn.Module):
        modules = list(model.named_modules())
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            param_names[id(p)] = name
    is_explainable = kinds.explainable(declared)

    def record(m: int, plan: Any) -> Run:
        return run_once(model, _inputs(make_inputs, m, batch_dim), m, target, {}, modules, plan, keep_elements,
                        is_explainable, max_ops, param_names)

    shape_runs = [record(m, None) for m in sizes]
    plan = Plan(shape_runs)
    runs: List[Run] = []
    for r, m in enumerate(sizes):
        run = record(m, lambda index, role, slot, r=r: plan.rule(r, index, role, slot))
        before = shape_runs[r]
        if [(o.key, [i.shape for i in o.inputs]) for o in run.ops] != \
                [(o.key, [i.shape for i in o.inputs]) for o in before.ops]:
            raise MxbiError(f"the program ran other ops on its second run at batch size {m}: its control flow "
                            "depends on more than the shapes (locate needs the same ops for the same inputs)")
        runs.append(run)
    plan.runs = runs
    return _report(model, sizes, target, plan, declared, explain_ops, evidence, seed, max_reveals)


def _report(model: Any, sizes: List[int], target: int, plan: Plan, declared: Dict[str, str], explain_ops: bool,
            evidence: bool, seed: int, max_reveals: int) -> LocateReport:
    runs = plan.runs
    base = runs[0]
    notes: List[str] = []
    comparisons = [Comparison(plan, r) for r in range(1, len(runs))]
    for leaf in base.leaves.values():
        if leaf.name.startswith("input["):
            for cmp in comparisons:
                other = cmp.b.leaves.get(leaf.name)
                if other and leaf.info.digest and other.info.digest and leaf.info.digest != other.info.digest:
                    raise MxbiError(f"make_inputs: sample {target} of {leaf.name} differs between batch sizes "
                                    f"{sizes[0]} and {cmp.b.m} (it must be the same sample at every size)")
    rows = [OpRow(op.index, op.name, op.module, _shapes(op),
                  {c.b.m: c.verdicts[op.index].verdict for c in comparisons if op.index in c.verdicts},
                  {c.b.m: c.verdicts[op.index].max_ulp for c in comparisons if op.index in c.verdicts})
            for op in base.ops]
    causes: Dict[int, RootCause] = {}
    for cmp in comparisons:
        for j, v in sorted(cmp.verdicts.items()):
            if v.verdict not in _CAUSES:
                continue
            if j in causes:
                causes[j].also.append(cmp.b.m)
                continue
            op = base.ops[j]
            partner = cmp.b.ops[plan.partner(cmp.r, j)]  # type: ignore[index]
            causes[j] = RootCause(op.name, op.module, (base.m, cmp.b.m), j, v.verdict,
                                  kinds.kind_of(op.name, declared), {base.m: _shapes(op), cmp.b.m: _shapes(partner)},
                                  v.max_ulp, v.differing, v.elements)
            if v.verdict == "after-unaligned":
                causes[j].note = _one_side_only(plan, cmp)
    cache: Dict[Any, Any] = {}
    if explain_ops:
        for rc in causes.values():
            if rc.verdict != "root":
                continue
            cmp = comparisons[sizes.index(rc.batch_sizes[1]) - 1]
            rc.detail = _explain(plan, cmp, rc.index, declared, seed, cache)
    found_evidence: List[Evidence] = []
    if evidence:
        seen = set()
        for cmp in comparisons:
            for j, v in sorted(cmp.verdicts.items()):
                if v.verdict != "same" or len(seen) >= max_reveals:
                    continue
                op = base.ops[j]
                kind = kinds.kind_of(op.name, declared)
                if kind is None or kind in ("layer_norm", "var"):
                    continue
                partner = cmp.b.ops[plan.partner(cmp.r, j)]  # type: ignore[index]
                if [i.shape for i in op.inputs] == [i.shape for i in partner.inputs]:
                    continue
                from .explain import signature

                key = (signature(op), signature(partner))
                if key in seen:
                    continue
                seen.add(key)
                found_evidence.append(Evidence(op.name, op.module, (base.m, cmp.b.m), j,
                                               _explain(plan, cmp, j, declared, seed, cache)))
    outputs_same = {cmp.b.m: program_outputs_same(plan, cmp) for cmp in comparisons}
    unaligned = {}
    for cmp in comparisons:
        a, b = unaligned_ops(plan, cmp.r)
        unaligned[cmp.b.m] = ([f"{base.ops[i].name} ({base.ops[i].module})" for i in a],
                              [f"{cmp.b.ops[i].name} ({cmp.b.ops[i].module})" for i in b])
    found = [causes[j] for j in sorted(causes)]
    if not found:
        for cmp in comparisons:
            a, b = unaligned_ops(plan, cmp.r)
            if outputs_same[cmp.b.m] is True or not (a or b):
                continue
            first = base.ops[a[0]] if a else cmp.b.ops[b[0]]
            rc = RootCause(first.name, first.module, (base.m, cmp.b.m), first.index if a else -1, "paths-differ",
                           kinds.kind_of(first.name, declared), {}, None, -1, 0)
            rc.note = _one_side_only(plan, cmp)
            found.append(rc)
            break
    if not found and any(v is not True for v in outputs_same.values()):
        notes.append("the outputs differ but no op was located: the difference passed through tensors whose "
                     "target slice could not be told (opaque)")
    return LocateReport(sizes, target, _name_of(model), outputs_same, found, found_evidence, rows, unaligned, notes)


def _one_side_only(plan: Plan, cmp: Comparison) -> str:
    """The ops that ran at one of the two batch sizes only, in words."""
    base = plan.runs[0]
    a, b = unaligned_ops(plan, cmp.r)
    parts = []
    if a:
        parts.append(f"at {base.m}: " + ", ".join(f"{base.ops[i].name} ({base.ops[i].module or '(root)'})"
                                                for i in a[:6]) + (" ..." if len(a) > 6 else ""))
    if b:
        parts.append(f"at {cmp.b.m}: " + ", ".join(f"{cmp.b.ops[i].name} ({cmp.b.ops[i].module or '(root)'})"
                                                  for i in b[:6]) + (" ..." if len(b) > 6 else ""))
    return "ops at one batch size only: " + "; ".join(parts)


def _explain(plan: Plan, cmp: Comparison, j: int, declared: Dict[str, str], seed: int,
             cache: Dict[Any, Any]) -> Explanation:
    a, b = plan.runs[0], cmp.b
    xa, xb = a.ops[j], b.ops[plan.partner(cmp.r, j)]  # type: ignore[index]
    slices = tuple((_slice_of(run, rec.sources[0]) if rec.sources else None,
                    rec.outputs[0].data if rec.outputs else None) for run, rec in ((a, xa), (b, xb)))
    kind = kinds.kind_of(xa.name, declared)
    ex = explain(kind, (a, xa), (b, xb), seed, slices, cache)  # type: ignore[arg-type]
    if kind is not None:
        slot = 1 if kind == "addmm" else 0
        ex.power = gemm_power(kind, xa, _slice_of(a, xa.sources[slot]) if len(xa.sources) > slot else None)
    return ex
