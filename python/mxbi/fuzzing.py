"""The fuzzer: ``mxbi.fuzz(fn, ...)``, a property-based search for a
batch-invariance failure, shrunk to a minimal case, as ``mxbi fuzz``.

Each case is one checker cell setting (family, M, the batch family's
baseline M, K, N, target row, content class, input seed), drawn toward the
edges where kernels change behaviour (M = 1, 2, 8/9, ..., 512/513, powers
of two +-1 in K) and run through the checker's own cells; the first
``BI_FAIL`` is shrunk (smallest M, baseline M, K, N, simplest content) and
explained. The same seed gives the same cases and the same minimal case.

``fn`` is a subject as for :func:`mxbi.bi.check`: a Python callable
``fn(a, b) -> out`` (``a`` float32 ``[M, K]``, ``b`` float32 ``[K, N]``,
``out`` ``[M, N]`` in the kernel's own output type), or a spec string as
the CLI's ``--subject`` (``model:``, ``dispatch:``, ``op:``, ``exec:``, GPU
kinds). The GIL is released while mxbi computes; an exception in ``fn``
makes that cell an ``ERROR`` (the case is skipped, its reason kept in
:attr:`FuzzResult.first_error`); ``KeyboardInterrupt`` ends the run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _args, _mxbi
from ._mxbi import MxbiError
from .bi import Cell, Report, Subject, _name, _subject

__all__ = ["fuzz", "FuzzResult", "Minimal"]


@dataclass(frozen=True)
class Minimal:
    """The minimal failing case of a fuzz run."""

    #: the case file (``mxbi-bi-case/1``) as a dict; ``mxbi bi run`` replays
    #: it (exit 1) when its subject is a spec string; for a callable the
    #: subject is ``python:NAME`` (replay with :meth:`FuzzResult.replay`)
    case: Dict[str, Any]
    #: the same case as the JSON text ``OUT/minimal.json`` holds
    case_json: str
    #: where the case file was written: ``OUT/minimal.json`` when ``out``
    #: was given (``mxbi bi run`` replays it), None otherwise (write
    #: :attr:`case_json` yourself)
    case_path: Optional[str]
    #: content, batch, position, permutation, repeat or rank
    family: str
    #: the failing cell's batch size
    m: int
    #: the batch family's baseline batch size (other families: ``m``)
    base_m: int
    k: int
    n: int
    #: the target row (content, batch, position)
    row: str
    input: str
    content: str
    seed: int
    #: one line: ``batch m=9 (baseline 1) k=4 n=1 row=0 input=f32 content=plain seed=...``
    describe: str
    #: the case as first found, before shrinking (one line)
    found: str
    #: the failing cell (first differing bytes in ``cell.first_offenders``)
    cell: Cell
    #: the explainer's account (which orders, where they diverge, fixes); empty if none
    explanation: List[str]
    #: subject runs spent shrinking
    shrink_runs: int
    #: the corpus file the case came from, when a saved case failed again
    from_corpus: Optional[str] = None


@dataclass(frozen=True)
class FuzzResult:
    """What a fuzz run did. ``failure`` is the minimal failing case, or None
    when every case held; ``bool(result)`` is True when nothing failed (the
    CLI's exit 0). ``data`` is ``OUT/fuzz.json`` parsed; :meth:`to_json` its
    text, byte for byte what ``mxbi fuzz`` writes."""

    subject: str
    seed: int
    #: new cases run (corpus replays not counted)
    cases_tried: int
    #: cases with no cell to run, or whose every cell was an ERROR
    cases_skipped: int
    corpus_replayed: int
    #: the first ERROR reason seen (e.g. the exception ``fn`` raised)
    first_error: Optional[str]
    failure: Optional[Minimal]
    #: failures that did not replay every time (``fuzz.json``'s ``non_det``:
    #: stage, case, cell, failed, replays, rate); no minimal case for them
    non_det: List[Dict[str, Any]]
    data: Dict[str, Any] = field(repr=False, compare=False)
    _summary: str = field(repr=False, compare=False)
    _fn: Any = field(repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return self.failure is None

    def __bool__(self) -> bool:
        return self.passed

    def to_json(self) -> str:
        """``fuzz.json``: what the run did (no times)."""
        return self._summary

    def replay(self, fn: Optional[Subject] = None, *, name: Optional[str] = None) -> Report:
        """Runs the minimal case again as ``mxbi bi run minimal.json`` does,
        on ``fn`` (default: the fuzzed subject) and returns the report (a
        failing one, unless ``fn`` changed). Raises :class:`MxbiError` when
        no case failed."""
        if self.failure is None:
            raise MxbiError("no failing case to replay: the fuzz run found none")
        fn = self._fn if fn is None else fn
        # a spec with a knob setting (op: scale kinds) is built by the case itself
        own = isinstance(fn, str) and "knobs" in self.failure.case
        subject = None if own else _subject(fn)
        raw = _mxbi.check_case(self.failure.case_json, subject, _name(fn, name))
        ms = self.failure.case.get("m")
        return Report(raw, ms=ms if isinstance(ms, list) else None)


def fuzz(
    fn: Subject,
    *,
    families: Union[str, Sequence[str]] = (),
    classes: Union[str, Sequence[str]] = (),
    budget: float = 60.0,
    max_cases: Optional[int] = None,
    seed: int = 1,
    out: Optional[Union[str, "os.PathLike[str]"]] = None,
    corpus: Optional[Union[str, "os.PathLike[str]"]] = None,
    input: Optional[str] = None,
    max_m: int = 513,
    max_k: int = 4096,
    max_n: int = 64,
    max_shrink_runs: int = 400,
    k_boundaries: Sequence[int] = (),
    name: Optional[str] = None,
    timeout: Optional[float] = None,
    confirm: int = 3,
    others: Union[str, Sequence[str]] = (),
) -> FuzzResult:
    """Searches for a batch-invariance failure of ``fn`` and shrinks the
    first one found, as ``mxbi fuzz``.

    ``families``: content, batch, position, permutation, repeat, rank
    (default: content, batch, position, permutation; rank too for
    multi-rank subjects).
    ``classes``: content classes to draw (plain, k-scaled, wide-exponents,
    cancellation, subnormals, specials; default: all). ``budget``: seconds
    for new cases (shrinking comes on top); ``max_cases``: most new cases
    (give it for a run that does not depend on the clock). ``seed``: the
    same seed, the same cases and minimal case. ``out``: a folder (created)
    that gets ``fuzz.json`` and, on a failure, ``minimal.json``, as the CLI
    writes them. ``corpus``: a regression-corpus folder (default
    ``OUT/corpus`` when ``out`` is given, none otherwise): its cases for this
    subject are replayed first, and a new minimal case is saved there.
    ``input``: the element type inputs are drawn in (f32, bf16, f16, e4m3,
    e5m2). ``max_m``/``max_k``/``max_n``: the largest M, K, N drawn (keep
    them small for slow kernels). ``k_boundaries``: K values where ``fn``'s
    behaviour may change (drawn with their neighbours). ``name``: the
    subject's name (default ``python:QUALNAME``). ``timeout``: seconds an
    ``exec:`` runner may take per job (default 120). ``confirm``: replays
    that must all fail again before a failure is shrunk and before the
    minimal case is the result (0: none); a failure that does not replay
    every time is listed in ``non_det`` with its rate, never the
    ``failure``. ``others``: what the non-target rows may hold besides
    ``drawn`` (zero, duplicate, target, tiny, huge, zero-beside; default:
    all).

    Returns a :class:`FuzzResult`; a failure found is its ``failure``, never
    an exception. Raises :class:`MxbiError` for bad input, or when no case
    could run at all (every cell an ``ERROR``, e.g. ``fn`` always raises).
    """
    if not isinstance(fn, str) and not callable(fn):
        raise MxbiError(
            "subject: expected a callable fn(a, b) -> out or a spec string "
            f"(model:ORDER, dispatch:FILE, ...), got {type(fn).__name__}"
        )
    out = _args.path(out, "out")
    raw = _mxbi.fuzz(
        _subject(fn),
        _args.names(families, "families"),
        _args.names(classes, "classes"),
        _args.number(budget, "budget", unit="seconds"),
        _args.opt_integer(max_cases, "max_cases"),
        _args.integer(seed, "seed"),
        out,
        _args.path(corpus, "corpus"),
        _args.opt_text(input, "input"),
        _args.size(max_m, "max_m"),
        _args.size(max_k, "max_k"),
        _args.size(max_n, "max_n"),
        _args.integer(max_shrink_runs, "max_shrink_runs"),
        _args.integers(k_boundaries, "k_boundaries", 1),
        _name(fn, name),
        _args.seconds(timeout, "timeout"),
        _args.integer(confirm, "confirm", 0, _args.U32_MAX),
        _args.names(others, "others"),
    )
    summary = raw.summary_json()
    d = json.loads(summary)
    failure = None
    case_json = raw.minimal_json()
    if case_json is not None:
        s = json.loads(raw.setting_json())
        f = d["failure"]
        failure = Minimal(
            case=json.loads(case_json),
            case_json=case_json,
            case_path=None if out is None else os.path.join(out, "minimal.json"),
            family=s["family"],
            m=s["m"],
            base_m=s["base_m"],
            k=s["k"],
            n=s["n"],
            row=s["row"],
            input=s["input"],
            content=s["content"],
            seed=s["seed"],
            describe=s["describe"],
            found=s["found"],
            cell=Cell.from_dict(f["cell"]),
            explanation=list(f["explanation"]),
            shrink_runs=f["shrink_runs"],
            from_corpus=f.get("from_corpus"),
        )
    return FuzzResult(
        subject=d["subject"],
        seed=d["seed"],
        cases_tried=d["cases_tried"],
        cases_skipped=d["cases_skipped"],
        corpus_replayed=d["corpus_replayed"],
        first_error=d.get("first_error"),
        failure=failure,
        non_det=list(d.get("non_det", [])),
        data=d,
        _summary=summary,
        _fn=fn,
    )
