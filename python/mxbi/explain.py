"""The explainer from Python: recover a kernel's reduction tree
(:func:`reveal`), say where two orders diverge and what to pin
(:func:`diverge`), and explain a failing batch-invariance cell
(:func:`explain_cell`)."""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional

from . import _args, _mxbi
from ._mxbi import MxbiError, Revealed

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

    return _mxbi.reveal(
        _subject(fn), _args.size(m, "m"), _args.size(k, "k"), _args.size(n, "n"),
        _args.opt_text(input, "input"), _args.integer(seed, "seed"), _args.integer(verify_rows, "verify_rows"),
        _name(fn, name),
    )


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
    from . import _order_spec

    text, fixes = _mxbi.diverge(
        _order_spec(left, "left"), _order_spec(right, "right"), _args.integer(k, "k", 1), _args.flag(mx, "mx"),
        _args.opt_integer(m_left, "m_left", 1), _args.opt_integer(m_right, "m_right", 1),
    )
    return Divergence(text, fixes)


def _cut(line: str, limit: int = 200) -> str:
    """One line of at most ``limit`` characters (an ellipsis marks a cut)."""
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def explain_cell(fn: Any, report: Any, cell: Any = None, *, seed: int = 7) -> str:
    """Explains a failing cell of ``report`` (default: the first ``BI_FAIL``)
    by revealing ``fn``'s order on both sides of it: for the batch family
    the baseline M and the cell's M, otherwise the cell's M alone (a tree
    that differs between the rows of one launch shows as disagreements).
    ``cell``: one of ``report.cells`` or its id."""
    from .bi import Cell, Report

    if not isinstance(report, Report):
        raise MxbiError(f"report: expected an mxbi.bi.Report, got {type(report).__name__}")
    seed = _args.integer(seed, "seed")
    if isinstance(cell, str):
        found = next((c for c in report.cells if c.id == cell), None)
        if found is None:
            raise MxbiError(f"cell: no cell '{cell}' in the report")
        cell = found
    elif cell is not None and not isinstance(cell, Cell):
        raise MxbiError(f"cell: expected a Cell of the report or its id, got {type(cell).__name__}")
    if cell is None:
        cell = next((c for c in report.cells if c.verdict == "BI_FAIL"), None)
        if cell is None:
            return "no BI_FAIL cell to explain"
    k, n, inp = cell.k, cell.n, report.input
    try:
        right = reveal(fn, cell.m, k, n, input=inp, seed=seed)
    except MxbiError as e:  # no static tree: say so in one line
        if "no static tree" not in str(e):
            raise
        return _cut(f"{cell.id}: at M={cell.m} not revealed: {e}")
    if cell.family == "batch" and report.ms:
        m0 = report.ms[0]
        try:
            left = reveal(fn, m0, k, n, input=inp, seed=seed)
        except MxbiError as e:
            if "no static tree" not in str(e):
                raise
            return _cut(f"{cell.id}: at M={m0} not revealed: {e}")
        head = f"{cell.id}: at M={m0} the kernel runs {left.order or '(no order of the grammar)'}; " \
               f"at M={cell.m} it runs {right.order or '(no order of the grammar)'}"
        if left.order and right.order:
            if left.order == right.order:
                return head + "\n(the same order on both sides: the difference is not in the reduction tree)"
            return head + "\n" + str(diverge(left.order, right.order, k, m_left=m0, m_right=cell.m))
        return head + "\n" + str(left) + str(right)
    return f"{cell.id}: at M={cell.m}:\n{right}"
