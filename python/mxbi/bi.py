"""The batch-invariance checker: ``mxbi.bi.check(fn, ...)``, the same families,
verdicts and report as ``mxbi bi run``.

A subject is a Python callable ``fn(a, b) -> out``: ``a`` is a float32
``[M, K]`` numpy array (one row per token), ``b`` the shared float32 weights
``[K, N]``, ``out`` the ``[M, N]`` result in the kernel's own output type
(float32, or float16/bfloat16/FP8, widened exactly; torch tensors on any
device are accepted, see :mod:`mxbi.torch`). The values are drawn from the
seed so that they are exact in ``input`` (default f32; pass ``input="bf16"``
for a bf16 kernel). It may also be a spec string, as the CLI's ``--subject``:
``"model:ORDER"``, ``"dispatch:FILE"``, ``"exec:CMD"`` (an mxbi-exec/1
runner), ``"dump:DIR"``, or a GPU kind (with a ``cuda`` build).

The checker releases the GIL while it computes and takes it back to call
``fn``; an exception in ``fn`` makes that cell an ``ERROR`` with the
exception as its reason, while ``KeyboardInterrupt`` ends the check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from . import _args, _mxbi
from ._arrays import output_f32
from ._mxbi import MxbiError

__all__ = ["check", "Report", "Cell", "Control", "FAMILIES", "VERDICTS"]

FAMILIES = ("content", "batch", "position", "permutation", "repeat", "switch")
VERDICTS = ("BI_PASS", "BI_FAIL", "NON_DET", "VACUOUS", "ERROR")

Subject = Union[str, Callable[..., Any]]


@dataclass(frozen=True)
class Cell:
    """One cell's verdict: a family at one shape (M, K, N) and target row."""

    id: str
    family: str
    subject: str
    m: int
    k: int
    n: int
    row: str
    verdict: str
    reason: Optional[str]
    rows: int
    rows_differing: int
    elements_differing: int
    bytes_differing: int
    columns_differing: int
    max_ulp: int
    nan_differing: int
    first_offenders: List[Dict[str, Any]]
    rank: Optional[int] = None
    #: the power of the cell's inputs (docs/BI.md, "Power"): ``value`` (the
    #: fraction of order pairs whose bytes differ), ``output`` (the format it
    #: was measured in), ``orders``, ``pairs_agreeing``; None for an ERROR
    power: Optional[Dict[str, Any]] = None
    #: every field of the JSON cell, including any this class does not name
    data: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Cell":
        names = [f for f in cls.__dataclass_fields__ if f != "data"]
        return cls(**{f: d.get(f) for f in names}, data=dict(d))


@dataclass(frozen=True)
class Control:
    """A positive control: a cell run on a subject built to fail it."""

    family: str
    cell: str
    subject: str
    verdict: str
    expected: str
    held: bool

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Control":
        return cls(**{f: d.get(f) for f in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Explanation:
    """Why a family failed: its first failing cell explained, as the report's
    ``explanations`` hold it (docs/BI.md, "Explanations in the report").

    ``base`` and ``variant``: each side's ``side`` (where the row sits),
    ``order`` (None when not nameable), ``known`` (``declared``,
    ``identified``, ``op-model`` or ``not-nameable``), ``closest`` (the
    nearest order and its distance, when not nameable) and ``path`` (an op's
    LOCAL or GATHER). ``first_node``: where the two computations first
    differ, in words. ``mechanism`` and ``fixes``: in words. ``note``: what
    could not be explained. ``str()``: the lines ``mxbi bi run`` prints.
    """

    family: str
    cell: str
    failing_cells: int
    base: Optional[Dict[str, Any]]
    variant: Optional[Dict[str, Any]]
    first_node: Optional[str]
    mechanism: List[str]
    fixes: List[str]
    note: Optional[str]
    #: the headline and detail lines, as the CLI prints them
    lines: List[str] = field(default_factory=list, compare=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any], lines: List[str]) -> "Explanation":
        return cls(
            family=d["family"],
            cell=d["cell"],
            failing_cells=d["failing_cells"],
            base=d.get("base"),
            variant=d.get("variant"),
            first_node=d.get("first_node"),
            mechanism=list(d.get("mechanism", [])),
            fixes=list(d.get("fixes", [])),
            note=d.get("note"),
            lines=list(lines),
        )

    def __str__(self) -> str:
        return "\n".join(self.lines)


class Report:
    """A whole check (the report ``mxbi bi run`` writes).

    ``passed``: the CLI would exit 0 (no ``BI_FAIL``; with ``strict`` also no
    ``NON_DET`` or ``ERROR``; every positive control failed as it must and
    some cell ran). ``str(report)``: what ``mxbi bi run`` prints (the cells
    that did not pass, then the summary line); :meth:`markdown`: the verdict
    table of every cell; :meth:`to_json`: the ``--json`` report, byte for byte.

    What the check found is an attribute or a property (``cells``,
    ``failures``, ``passed``, ``exit_code``, ``valid``, ``counts``,
    ``controls``, ``witnesses``, ``explanations``, ``summary``); the methods render the report
    in the CLI's formats (:meth:`to_json`, :meth:`markdown`, :meth:`svg`,
    :meth:`junit`, :meth:`summary_line`) or write it (:meth:`write_json`).
    """

    def __init__(self, raw: "_mxbi.RawReport", strict: bool = False, ms: Optional[List[int]] = None):
        self._raw = raw
        self.strict = strict
        #: the batch sizes checked (the batch family's baseline is the first)
        self.ms: Optional[List[int]] = ms
        d = json.loads(raw.to_json())
        self.data: Dict[str, Any] = d
        self.schema: str = d["schema"]
        self.subject: str = d["subject"]
        self.vs: Optional[str] = d.get("vs")
        self.seed: int = d["seed"]
        self.input: str = d["input"]
        self.cells: List[Cell] = [Cell.from_dict(c) for c in d["cells"]]
        self.controls: List[Control] = [Control.from_dict(c) for c in d["controls"]]
        self.summary: Dict[str, Any] = d["summary"]
        #: the witness checks of cells whose two sides' orders are known and
        #: differ (each a dict: cell, base, var, outcome, matches, finding,
        #: witness; docs/BI.md, "Witnesses")
        self.witnesses: List[Dict[str, Any]] = list(d.get("witnesses", []))
        #: why each failing family failed: its first failing cell explained
        #: (both orders, the first diverging node, the fix; empty when no cell
        #: failed or with ``explain=False``)
        self.explanations: List[Explanation] = [
            Explanation.from_dict(e, lines) for e, lines in zip(d.get("explanations", []), raw.explanation_lines())
        ]
        if self.ms is None:
            self.ms = d.get("options", {}).get("ms")

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this report: 0, 1 (a check failed) or 2
        (a positive control did not fail, or no cell could run)."""
        return self._raw.exit_code(self.strict)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def valid(self) -> bool:
        """Every positive control failed as it must."""
        return bool(self.summary["valid"])

    @property
    def counts(self) -> Dict[str, int]:
        """Cells per verdict."""
        return dict(self.summary["verdicts"])

    @property
    def failures(self) -> List[Cell]:
        """The cells that make the check fail (``BI_FAIL``; with ``strict``
        also ``NON_DET`` and ``ERROR``), in report order."""
        bad = {"BI_FAIL", "NON_DET", "ERROR"} if self.strict else {"BI_FAIL"}
        return [c for c in self.cells if c.verdict in bad]

    def to_json(self) -> str:
        return self._raw.to_json()

    def write_json(self, path: "str | Any") -> None:
        """Writes :meth:`to_json` to the file ``path`` (a str or os.PathLike;
        an integer is refused, not taken as a file descriptor)."""
        with open(_args.path(path, "path") or "", "w", encoding="utf-8") as f:
            f.write(self.to_json())

    def markdown(self) -> str:
        """The verdict table of every cell, one table per family (``--markdown``)."""
        return self._raw.markdown()

    def svg(self) -> str:
        """The heatmap of the cells by verdict (``--svg``)."""
        return self._raw.svg()

    def junit(self) -> str:
        return self._raw.junit(self.strict)

    def summary_line(self) -> str:
        return self._raw.summary_line()

    def __str__(self) -> str:
        return self._raw.text()

    def __repr__(self) -> str:
        return f"<mxbi.bi.Report {self.subject}: {self.summary_line()}>"

    def __bool__(self) -> bool:
        return self.passed


class _Callable:
    """``fn`` as the native checker calls it: outputs converted to float32 bits."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.__qualname__ = getattr(fn, "__qualname__", None) or type(fn).__name__
        # where the checker may write the operands (mxbi.torch.on_device's
        # pinned upload buffers): passed on as the callable's own
        hook = getattr(fn, "_mxbi_input_buffer", None)
        if callable(hook):
            self._mxbi_input_buffer = hook

    def __call__(self, a: Any, b: Any) -> Any:
        return output_f32(self.fn(a, b))


def _subject(s: Subject) -> Any:
    if isinstance(s, str):
        return s
    if callable(s):
        return _Callable(s)
    raise MxbiError(
        "subject: expected a callable fn(a, b) -> out or a spec string "
        f"(model:ORDER or dispatch:FILE), got {type(s).__name__}"
    )


def _ms(m: Union[str, int, Sequence[int]]) -> Optional[List[int]]:
    """Batch sizes: ``"edges"`` (None), ``"1,8,9"``, one integer or a list."""
    if isinstance(m, str):
        if m.strip() == "edges":
            return None
        try:
            parts = [int(x) for x in m.split(",")]
        except ValueError:
            raise MxbiError(f"m: '{m}' is not a batch size (a list of integers, or edges)") from None
        return _args.sizes(parts, "m")
    if isinstance(m, (int, np.integer)) and not isinstance(m, (bool, np.bool_)):
        return [_args.size(m, "m")]
    return _args.sizes(m, "m")


def _name(fn: Subject, name: Optional[str]) -> Optional[str]:
    if name is not None or isinstance(fn, str):
        return _args.opt_text(name, "name")
    inner = getattr(fn, "__wrapped__", fn)
    return "python:" + (getattr(inner, "__qualname__", None) or type(inner).__name__)


def check(
    fn: Subject,
    families: Union[str, Sequence[str]],
    k: int,
    n: int,
    *,
    m: Union[str, int, Sequence[int]] = "edges",
    rows: Optional[Sequence[Union[int, str]]] = None,
    input: Optional[str] = None,
    seed: int = 1,
    repeats: int = 3,
    vs: Optional[Subject] = None,
    strict: bool = False,
    name: Optional[str] = None,
    boundaries: Sequence[int] = (),
    timeout: Optional[float] = None,
    witness: Union[bool, str] = "auto",
    explain: bool = True,
) -> Report:
    """Runs a subject through variant families; one verdict per cell, as
    ``mxbi bi run``.

    ``families``: content, batch, position, permutation, repeat, switch
    (``switch`` compares with ``vs``). ``m``: batch sizes (the batch family's
    baseline is the first), or ``"edges"``: 1, 2, 8/9, ..., 512/513 and the
    bounds of a dispatch table. ``rows``: target-row positions (indices,
    ``"mid"``, ``"last"``). ``input``: the element type inputs are drawn in
    (f32, bf16, f16, e4m3, e5m2; default: the model's, else f32).
    ``strict``: ``NON_DET`` and ``ERROR`` cells also fail. ``name``: the
    subject's name in the report (default ``python:QUALNAME``).
    ``boundaries``: M values where a callable's behaviour may change (tile
    heights, split thresholds); ``"edges"`` then adds b-1, b, b+1 for each.
    ``timeout``: seconds an ``exec:`` runner may take to greet and per job
    (default 120).
    ``witness``: the witness check, as ``mxbi bi run --witness``
    (docs/BI.md, "Witnesses"): ``"auto"`` checks cells whose two sides'
    orders are declared (a ``model:`` or ``dispatch:`` spec); ``True`` (or
    ``"on"``) also identifies undeclared orders (a callable's) from its
    bytes; ``False`` (or ``"off"``) skips it. The results are the report's
    ``witnesses``; a cell whose subject's bytes differ on a witness is
    ``BI_FAIL``.
    ``explain``: explain each failing family's first failing cell (both
    orders, the first diverging node, the fix), as ``mxbi bi run`` does;
    the report's ``explanations`` and ``str(report)`` carry it. False skips
    it (``--no-explain``).

    Raises :class:`MxbiError` for bad input; a failing check is a report
    whose ``passed`` is False, never an exception.
    """
    families = _args.names(families, "families")
    strict = _args.flag(strict, "strict")
    ms = _ms(m)
    bounds = _args.integers(boundaries, "boundaries", 1)
    if bounds and isinstance(fn, str):
        raise MxbiError("boundaries: only for a callable (a dispatch table declares its own)")
    if ms is None and not isinstance(fn, str):
        ms = _mxbi.edge_ms(bounds)
    raw = _mxbi.check(
        _subject(fn),
        families,
        _args.size(k, "k"),
        _args.size(n, "n"),
        ms,
        None if rows is None else _rows(rows),
        _args.opt_text(input, "input"),
        _args.integer(seed, "seed"),
        _args.integer(repeats, "repeats"),
        None if vs is None else _subject(vs),
        _name(fn, name),
        None if vs is None else _name(vs, None),
        _args.seconds(timeout, "timeout"),
        _witness(witness),
        _args.flag(explain, "explain"),
    )
    return Report(raw, strict=strict, ms=ms)


def _rows(rows: Any) -> List[str]:
    """Target-row positions: indices (>= 0) or names (mid, last, all)."""
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise MxbiError(f"rows: expected a list of row positions (indices, 'mid', 'last'), got {rows!r}")
    return [r if isinstance(r, str) else str(_args.integer(r, "rows")) for r in rows]


def _witness(w: Union[bool, str]) -> str:
    """The witness mode's name: True is "on", False "off"."""
    if w is True:
        return "on"
    if w is False:
        return "off"
    if isinstance(w, str):
        return w
    raise MxbiError(f"witness: expected True, False, 'on', 'auto' or 'off', got {w!r}")
