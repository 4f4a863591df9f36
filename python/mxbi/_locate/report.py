"""The result of :func:`mxbi.torch.locate`: the root causes, the op table,
and its renderings (text, JSON with a versioned schema, Markdown;
docs/LOCATE.md, "Reports")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .explain import Explanation

SCHEMA = "mxbi-locate/1"


@dataclass
class RootCause:
    """An op that introduced a difference in the target's bytes."""

    op: str
    module: str
    batch_sizes: Tuple[int, int]  # the two compared (the first where it was found)
    index: int  # its position in the first run's op sequence (-1: an op of the other run only)
    verdict: str  # root, after-unaligned, mixes-batch or paths-differ
    kind: Optional[str]
    shapes: Dict[int, str]  # batch size -> the op's input shapes there
    max_ulp: Optional[int]
    differing: int  # elements of the target's output slice that differ (-1: not kept)
    elements: int
    also: List[int] = field(default_factory=list)  # other batch sizes where it is a root cause
    detail: Optional[Explanation] = None
    note: str = ""

    @property
    def orders(self) -> Dict[int, Optional[str]]:
        """Batch size -> the op's order there (where explained)."""
        return {s.m: s.order for s in self.detail.sides} if self.detail else {}

    @property
    def fixes(self) -> List[str]:
        return list(self.detail.fixes) if self.detail else []

    @property
    def explanation(self) -> str:
        a, b = self.batch_sizes
        head = {
            "root": f"its output differs between batch sizes {a} and {b} while every input it read was identical",
            "after-unaligned": f"its output differs between batch sizes {a} and {b}; its inputs came from ops that "
                               "ran at one batch size only (the program took different paths)",
            "mixes-batch": "it reduces over the batch: its output depends on the other samples by definition",
            "paths-differ": f"the program runs different ops at batch sizes {a} and {b}, and the target's output "
                            "differs (this is the first op of one side that the other did not run)",
        }[self.verdict]
        where = f"{self.differing} of {self.elements} elements differ" if self.differing >= 0 else "bytes differ"
        if self.max_ulp is not None:
            where += f", at most {self.max_ulp} ULP"
        lines = [f"{head} ({where})."]
        if self.note:
            lines.append(self.note)
        if self.detail is not None:
            if self.detail.axis:
                lines.append(f"reduction: {self.detail.axis}")
            if self.detail.text:
                lines.append(self.detail.text)
            if self.detail.power is not None:
                lines.append(f"power of the target's rows: {self.detail.power:.2f} (pairs of the family's orders "
                             "whose bytes differ on them)")
            lines += [f"fix: {f}" for f in self.detail.fixes]
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        return {"op": self.op, "module": self.module, "batch_sizes": list(self.batch_sizes), "index": self.index,
                "verdict": self.verdict, "kind": self.kind, "shapes": {str(k): v for k, v in self.shapes.items()},
                "max_ulp": self.max_ulp, "differing": self.differing, "elements": self.elements, "also": self.also,
                "orders": {str(k): v for k, v in self.orders.items()}, "fixes": self.fixes,
                "explanation": self.explanation, "detail": self.detail.to_dict() if self.detail else None}


@dataclass
class Evidence:
    """An op whose order was revealed at two batch sizes although its bytes
    agreed: the same order (evidence of invariance) or a different one (a
    latent root cause: shape-dependent, data-independent)."""

    op: str
    module: str
    batch_sizes: Tuple[int, int]
    index: int
    detail: Explanation

    @property
    def latent(self) -> bool:
        return bool(self.detail.differ)

    def to_dict(self) -> Dict[str, Any]:
        return {"op": self.op, "module": self.module, "batch_sizes": list(self.batch_sizes), "index": self.index,
                "latent": self.latent, "detail": self.detail.to_dict()}


@dataclass
class OpRow:
    """One op of the first run and its verdict at every other batch size."""

    index: int
    op: str
    module: str
    shape: str
    verdicts: Dict[int, str]
    max_ulp: Dict[int, Optional[int]]

    def to_dict(self) -> Dict[str, Any]:
        return {"index": self.index, "op": self.op, "module": self.module, "shape": self.shape,
                "verdicts": {str(k): v for k, v in self.verdicts.items()},
                "max_ulp": {str(k): v for k, v in self.max_ulp.items()}}


@dataclass
class LocateReport:
    """What :func:`mxbi.torch.locate` found. ``invariant``: the target's
    output bytes are the same at every batch size and no op introduced a
    difference. ``root_causes``: first first."""

    batch_sizes: List[int]
    target: int
    program: str
    outputs_same: Dict[int, Optional[bool]]
    root_causes: List[RootCause]
    evidence: List[Evidence]
    ops: List[OpRow]
    unaligned: Dict[int, Tuple[List[str], List[str]]]
    notes: List[str] = field(default_factory=list)

    @property
    def invariant(self) -> bool:
        return not self.root_causes and all(v is True for v in self.outputs_same.values())

    @property
    def latent(self) -> List[Evidence]:
        return [e for e in self.evidence if e.latent]

    def __bool__(self) -> bool:
        return self.invariant

    def summary_line(self) -> str:
        sizes = ", ".join(str(m) for m in self.batch_sizes)
        if self.invariant:
            extra = f"; {len(self.latent)} op(s) change order with the batch size although their bytes agreed" \
                if self.latent else ""
            return f"{self.program}: batch-invariant for sample {self.target} at batch sizes {sizes} " \
                   f"({len(self.ops)} ops compared{extra})"
        if not self.root_causes:
            return f"{self.program}: NOT batch-invariant at batch sizes {sizes}, no op located (see notes)"
        first = self.root_causes[0]
        return f"{self.program}: NOT batch-invariant at batch sizes {sizes}: {len(self.root_causes)} root cause(s), " \
               f"first {first.op} in {first.module or '(root)'}"

    def __str__(self) -> str:
        lines = [self.summary_line()]
        for m, same in self.outputs_same.items():
            word = {True: "the same bytes", False: "different bytes", None: "not comparable"}[same]
            lines.append(f"  output of sample {self.target}: batch {self.batch_sizes[0]} vs {m}: {word}")
        for i, rc in enumerate(self.root_causes, 1):
            also = f" (also at {', '.join(str(m) for m in rc.also)})" if rc.also else ""
            lines.append(f"root cause {i}: {rc.op} in {rc.module or '(root)'} (op #{rc.index}, "
                         f"batch {rc.batch_sizes[0]} vs {rc.batch_sizes[1]}{also})")
            lines += ["  " + x for x in rc.explanation.splitlines()]
        for e in self.latent:
            lines.append(f"latent: {e.op} in {e.module or '(root)'} (op #{e.index}): the same bytes here, "
                         f"another order at batch {e.batch_sizes[1]}")
            lines += ["  " + x for x in e.detail.text.splitlines()]
        if self.invariant and self.evidence:
            lines.append("evidence (orders revealed or identified at both batch sizes):")
            for e in self.evidence:
                if e.latent:
                    continue
                power = f", power {e.detail.power:.2f}" if e.detail.power is not None else ""
                where = f"{e.op} in {e.module or '(root)'}"
                if e.detail.differ is None:
                    how = e.detail.sides[0].how if e.detail.sides else ""
                    lines.append(f"  {where}: order not told at {e.batch_sizes[0]} and {e.batch_sizes[1]} ({how})")
                    continue
                first = e.detail.sides[0].order if e.detail.sides else None
                lines.append(f"  {where}: {first or '(the same tree, no order of the grammar)'} at "
                             f"{e.batch_sizes[0]} and {e.batch_sizes[1]}{power}")
        for m, (a, b) in self.unaligned.items():
            if a or b:
                lines.append(f"  ops at one batch size only (batch {self.batch_sizes[0]} vs {m}): "
                             f"{len(a)} | {len(b)}: {', '.join((a + b)[:6])}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "schema": SCHEMA, "program": self.program, "batch_sizes": self.batch_sizes, "target": self.target,
            "invariant": self.invariant,
            "outputs_same": {str(k): v for k, v in self.outputs_same.items()},
            "root_causes": [r.to_dict() for r in self.root_causes],
            "evidence": [e.to_dict() for e in self.evidence],
            "ops": [o.to_dict() for o in self.ops],
            "unaligned": {str(k): {"first": a, "other": b} for k, (a, b) in self.unaligned.items()},
            "notes": self.notes,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def write_json(self, path: Any) -> None:
        """Writes :meth:`to_json` to ``path`` (a str or PathLike)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    def __repr__(self) -> str:
        return f"<LocateReport {self.summary_line()!r}>"

    def markdown(self) -> str:
        ms = self.batch_sizes[1:]
        out = [f"### {self.summary_line()}", ""]
        if self.root_causes:
            out += ["| # | root cause | module | batch sizes | orders | fix |", "|---|---|---|---|---|---|"]
            for i, rc in enumerate(self.root_causes, 1):
                orders = "; ".join(f"{m}: `{o}`" for m, o in rc.orders.items() if o) or "—"
                fix = "; ".join(rc.fixes[:1]) or "—"
                out.append(f"| {i} | `{rc.op}` | `{rc.module or '(root)'}` | {rc.batch_sizes[0]} vs "
                           f"{rc.batch_sizes[1]} | {orders} | {fix} |")
            out.append("")
        head = "| # | op | module | shape | " + " | ".join(f"vs {m}" for m in ms) + " | max ULP |"
        out += [head, "|" + "---|" * (5 + len(ms))]
        for row in self.ops:
            ulps = [u for u in row.max_ulp.values() if u is not None]
            verdicts = " | ".join(row.verdicts.get(m, "unaligned") for m in ms)
            out.append(f"| {row.index} | `{row.op}` | `{row.module or '(root)'}` | {row.shape} | {verdicts} | "
                       f"{max(ulps) if ulps else '—'} |")
        return "\n".join(out) + "\n"
