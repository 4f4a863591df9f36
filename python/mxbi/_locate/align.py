"""Aligning the op sequences of several batch sizes, and telling which
slice of each tensor is the target sample's (docs/LOCATE.md, "How ops are
aligned").

Ops are matched by (name, module path) with a longest-matching-blocks
alignment (``difflib``) of each run against the first run; ops of a run
that match no op of the first run are *unaligned*. A tensor position
(aligned op, input or output, slot) is

- ``shared`` when its shape is the same at every batch size (weights,
  constants, anything that does not grow with the batch: compared whole);
- ``batch`` along the first dimension ``d`` whose size is ``per * m`` at
  every batch size ``m`` for one ``per`` while every other dimension stays
  the same (``[m, S, H]``: d = 0, per = 1; ``[m*S, H]``: d = 0, per = S; a
  transposed ``[S, m, H]``: d = 1): the target's slice is entries
  ``target*per .. (target+1)*per`` of ``d``;
- ``opaque`` otherwise. An op matched by name and module with an opaque
  tensor (shapes that do not follow the batch: ``[1, 64] x [64, 16]``
  against ``[9, 32] x [32, 16]``) is another computation: it is unaligned.
"""

from __future__ import annotations

import difflib
from typing import Dict, List, Optional, Sequence, Tuple

from .record import OPAQUE, SHARED, Rule, Run


def align(base: Run, other: Run) -> Dict[int, int]:
    """Op index of ``base`` -> op index of ``other`` for matched ops."""
    a = [op.key for op in base.ops]
    b = [op.key for op in other.ops]
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    pairs: Dict[int, int] = {}
    for blk in sm.get_matching_blocks():
        for t in range(blk.size):
            pairs[blk.a + t] = blk.b + t
    return pairs


def rule_of(shapes: Sequence[Tuple[int, ...]], ms: Sequence[int]) -> Rule:
    """The slice rule of one tensor position from its shapes at batch sizes ``ms``."""
    if all(s == shapes[0] for s in shapes):
        return SHARED
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        return OPAQUE
    for d in range(rank):
        if any(s[d] % m for s, m in zip(shapes, ms)):
            continue
        per = shapes[0][d] // ms[0]
        if per == 0 or any(s[d] != per * m for s, m in zip(shapes, ms)):
            continue
        if all(s[:d] + s[d + 1:] == shapes[0][:d] + shapes[0][d + 1:] for s in shapes):
            return ("batch", d, per)
    return OPAQUE


class Plan:
    """The slice rules of every run's tensor positions, from the shape passes."""

    def __init__(self, runs: List[Run]):
        self.runs = runs
        self.ms = [r.m for r in runs]
        base = runs[0]
        # pairs[r]: base op index -> op index of run r (run 0: itself)
        self.pairs: List[Dict[int, int]] = [{i: i for i in range(len(base.ops))}]
        self.pairs += [align(base, r) for r in runs[1:]]
        self.everywhere = [j for j in range(len(base.ops)) if all(j in p for p in self.pairs)]
        self.rules: Dict[Tuple[int, str, int], Rule] = {}
        for j in list(self.everywhere):
            ops = [run.ops[p[j]] for run, p in zip(runs, self.pairs)]
            rules = {}
            for role, pick in (("in", lambda o: o.inputs), ("out", lambda o: o.outputs)):
                counts = {len(pick(o)) for o in ops}
                if len(counts) != 1:
                    rules = None
                    break
                for slot in range(counts.pop()):
                    rules[(j, role, slot)] = rule_of([pick(o)[slot].shape for o in ops], self.ms)
            if rules is None or any(r == OPAQUE for r in rules.values()):
                # same name and module, but shapes that do not follow the
                # batch: another computation (a K cut in halves, say)
                self.everywhere.remove(j)
                for p in self.pairs[1:]:
                    p.pop(j, None)
                continue
            self.rules.update(rules)
        # back[r]: op index of run r -> base op index
        self.back: List[Dict[int, int]] = [{v: k for k, v in p.items()} for p in self.pairs]

    def rule(self, run: int, index: int, role: str, slot: int) -> Rule:
        j = self.back[run].get(index)
        if j is None:
            return OPAQUE
        return self.rules.get((j, role, slot), OPAQUE)

    def partner(self, run: int, j: int) -> Optional[int]:
        return self.pairs[run].get(j)
