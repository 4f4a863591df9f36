"""The explainer from Python: recover a kernel's reduction tree
(:func:`reveal`), say where two orders diverge and what to pin
(:func:`diverge`), and explain a failing batch-invariance cell
(:func:`explain_cell`)."""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional

from . import _mxbi
from ._mxbi import Revealed

__all__ = ["reveal", "diverge", "Divergence", "explain_cell", "Revealed"]


def _subject(fn: Any) -> Any:
    from .bi import _subject as subject

    return subject(fn)


def reveal(
    fn: Any,
    m: int,
    k: int,
    n: int,
    *,
    input: Optional[str] = None,
    seed: int = 7,
    verify_rows: int = 4,
    name: Optional[str] = None,
) -> Revealed:
    """Recovers the reduction tree ``fn`` uses at launch shape (M, K, N)
    with FPRev-style probes (values exact in ``input``), and the simplest
    order of the grammar that gives its bytes (``.order``; None when the
    grammar cannot say it). ``fn`` is a subject as for :func:`mxbi.bi.check`."""
    from .bi import _name

    return _mxbi.reveal(_subject(fn), int(m), int(k), int(n), input, int(seed), int(verify_rows), _name(fn, name))


class Divergence(NamedTuple):
    """Where two orders' trees first differ and why (``text``), and what to
    pin so both sides run one tree (``fixes``)."""

    text: str
    fixes: List[str]

    def __str__(self) -> str:
        lines = [self.text.rstrip("\n")]
        lines += [f"  fix: {f}" for f in self.fixes]
        return "\n".join(lines)


def diverge(
    left: Any,
    right: Any,
    k: int,
    *,
    mx: bool = False,
    m_left: Optional[int] = None,
    m_right: Optional[int] = None,
) -> Divergence:
    """Compares two orders for K terms (``mx``: MX inputs). With the two
    batch sizes that ran them, fixes are suggested."""
    text, fixes = _mxbi.diverge(str(left), str(right), int(k), bool(mx), m_left, m_right)
    return Divergence(text, fixes)


def explain_cell(fn: Any, report: Any, cell: Any = None, *, seed: int = 7) -> str:
    """Explains a failing cell of ``report`` (default: the first ``BI_FAIL``)
    by revealing ``fn``'s order on both sides of it: for the batch family
    the baseline M and the cell's M, otherwise the cell's M alone (a tree
    that differs between the rows of one launch shows as disagreements)."""
    if cell is None:
        cell = next((c for c in report.cells if c.verdict == "BI_FAIL"), None)
        if cell is None:
            return "no BI_FAIL cell to explain"
    k, n, inp = cell.k, cell.n, report.input
    right = reveal(fn, cell.m, k, n, input=inp, seed=seed)
    if cell.family == "batch" and report.ms:
        m0 = report.ms[0]
        left = reveal(fn, m0, k, n, input=inp, seed=seed)
        head = f"{cell.id}: at M={m0} the kernel runs {left.order or '(no order of the grammar)'}; " \
               f"at M={cell.m} it runs {right.order or '(no order of the grammar)'}"
        if left.order and right.order:
            if left.order == right.order:
                return head + "\n(the same order on both sides: the difference is not in the reduction tree)"
            return head + "\n" + str(diverge(left.order, right.order, k, m_left=m0, m_right=cell.m))
        return head + "\n" + str(left) + str(right)
    return f"{cell.id}: at M={cell.m}:\n{right}"
