"""Every bad argument of the public API raises MxbiError with one line.

The table below names every public function and method that takes
arguments, a call that works (the baseline, run first as the control: the
error must come from the one bad value) and the kind of each parameter;
each kind has its bad values (negative, too large for the native type, the
wrong type, an unknown name). A completeness test walks the public modules
(``__all__``) and their classes, so a new function, method or parameter
without a row here fails.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import pytest

import mxbi
import mxbi.bi
import mxbi.explain
import mxbi.fuzzing
import mxbi.runner
import mxbi.torch
from conftest import muladd, split_k_by_m

BIG = 2**70  # beyond every native integer type

#: bad values per kind of parameter
BAD: Dict[str, List[Any]] = {
    "size": [-5, 0, BIG, 3.5, "8", True, None],  # an integer >= 1
    "count": [-5, BIG, 3.5, "8", True, None],  # an integer >= 0
    "opt_count": [-5, BIG, 3.5, "8", True],  # an integer >= 0, or None
    "signed": [BIG, -BIG, 1.0, "1", True, None],  # an axis
    "name": [3, "bogus", b"e4m3", None],  # a name the library parses
    "opt_name": [3, "bogus", b"e4m3"],
    "label": [3, b"x"],  # free text (a subject's display name), or None
    "flag": ["yes", 1, None],
    "seconds": [-1, 0, float("nan"), float("inf"), "5", True],  # > 0, or None
    "budget": [-1, float("nan"), "5", True, None],  # >= 0
    "opt_number": [-1, float("inf"), "x", True],  # >= 0, or None
    "names": [3, ["bogus"], [3], None],
    "sizes": [[-1], [0], [BIG], [3.5], "1", 5],  # a list of integers >= 1
    "counts": [[-1], [BIG], [3.5], "1", 5],  # a list of integers >= 0
    "opt_counts": [[-1], [BIG], [3.5], "1", 5],
    "m": [-1, 0, [0], [BIG], "x", 3.5, None],
    "rows": [[-1], [3.5], 5, "mid"],
    "subject": [3, "bogus:x", None],
    "opt_subject": [3, "bogus:x"],
    "floats": ["abc", np.array(["a"]), np.zeros((2, 4), np.int64), None],  # float values
    "opt_floats": ["abc", np.array(["a"])],
    "codes": ["abc", np.zeros((2, 32), np.float32), None],  # uint8 codes
    "opt_codes": ["abc", np.zeros((2, 1), np.float32)],
    "order": [3, "bogus", None],  # an Order or its spelling
    "path": [3, 3.5],  # str or PathLike, or None
    "witness": [3, "bogus", None],
    "report": [3, None],
    "cell": [3, "no/such/cell"],
    "script": [3, "no_such_runner.py", None],
    "argv": ["x", [3]],
    "callable": [3, None],
    "arraylike": [object(), "abc", None],
    "kinds": [3, {"x::y": "bogus"}, {3: "mm"}],  # op name -> a kind of mxbi.torch.LOCATE_KINDS
}


class Row(NamedTuple):
    #: the qualified name (``module.func`` or ``Class.method``)
    name: str
    #: returns the callable (a bound method of a fresh object for methods)
    target: Callable[[], Callable[..., Any]]
    #: keyword arguments of a call that works
    baseline: Dict[str, Any]
    #: every parameter's kind (the parameters a caller passes)
    kinds: Dict[str, str]
    #: the baseline is run as the control (False: it needs torch)
    control: bool = True


A = np.float32(np.arange(8).reshape(2, 4) / 8)
B = np.float32(np.arange(12).reshape(4, 3) / 8)
X32 = np.float32(np.linspace(-1, 1, 64).reshape(2, 32))


def _codes() -> Tuple[np.ndarray, np.ndarray]:
    return mxbi.quantize(X32, "mxfp8-e4m3")


def _report() -> mxbi.bi.Report:
    return mxbi.bi.check(split_k_by_m, families=["batch"], k=8, n=2, m=[1, 5])


_FOUND: List[Any] = []


def _found() -> mxbi.FuzzResult:
    """A fuzz result with a failure (computed once)."""
    if not _FOUND:
        _FOUND.append(mxbi.fuzz(split_k_by_m, families=["batch"], classes=["plain"], seed=3, max_cases=200,
                                max_m=32, max_k=32, max_n=4))
    assert _FOUND[0].failure is not None
    return _FOUND[0]


RUNNER = "from mxbi_runner import serve\nserve(lambda a, b: a @ b, 'tiny')\n"

FUZZ = dict(fn="model:fma", max_cases=1, max_m=4, max_k=4, max_n=2, budget=5.0, max_shrink_runs=0)

ROWS: List[Row] = [
    Row("mxbi.value_table", lambda: mxbi.value_table, dict(format="e4m3"), {"format": "name"}),
    Row("mxbi.cast", lambda: mxbi.cast, dict(x=A, to="e4m3", round="stochastic", seed=1, sr_bits=8),
        {"x": "floats", "to": "name", "preset": "opt_name", "round": "opt_name", "overflow": "opt_name",
         "nan": "opt_name", "seed": "opt_count", "sr_bits": "opt_count"}),
    Row("mxbi.decode", lambda: mxbi.decode, dict(codes=np.uint8([1, 2]), format="e4m3"),
        {"codes": "codes", "format": "name"}),
    Row("mxbi.quantize", lambda: mxbi.quantize, dict(x=X32, format="mxfp8-e4m3"),
        {"x": "floats", "format": "name", "preset": "opt_name", "scale_mode": "opt_name", "round": "opt_name",
         "seed": "opt_count", "flush_subnormals": "flag", "no_int8_neg2": "flag", "block": "size",
         "axis": "signed", "pad": "flag", "scale_layout": "name"}),
    Row("mxbi.quantize_stats", lambda: mxbi.quantize_stats, dict(x=X32, format="mxfp8-e4m3"),
        {"x": "floats", "format": "name", "preset": "opt_name", "scale_mode": "opt_name", "round": "opt_name",
         "seed": "opt_count", "flush_subnormals": "flag", "no_int8_neg2": "flag", "block": "size",
         "axis": "signed", "pad": "flag"}),
    Row("mxbi.dequantize", lambda: mxbi.dequantize, dict(codes=_codes, scales=_codes, format="mxfp8-e4m3"),
        {"codes": "codes", "scales": "codes", "format": "name", "block": "size", "axis": "signed",
         "pad": "flag", "scale_layout": "name", "dtype": "name"}),
    Row("mxbi.order", lambda: mxbi.order, dict(spec="fma"), {"spec": "name"}),
    Row("mxbi.gemm", lambda: mxbi.gemm, dict(a=A, b=B),
        {"a": "floats", "b": "floats", "order": "order", "b_layout": "name", "rows": "opt_counts",
         "generic": "flag", "format": "opt_name", "a_scales": "opt_codes", "b_scales": "opt_codes"}),
    Row("mxbi.trace", lambda: mxbi.trace, dict(a=A, b=B, order="fma", row=1, col=2),
        {"a": "floats", "b": "floats", "order": "order", "row": "count", "col": "count", "b_layout": "name",
         "format": "opt_name", "a_scales": "opt_codes", "b_scales": "opt_codes"}),
    Row("mxbi.accuracy", lambda: mxbi.accuracy,
        dict(actual=np.float32([1, 2]), golden=np.float64([1, 2]), benchmark=np.float32([1, 2])),
        {"actual": "floats", "a": "opt_floats", "b": "opt_floats", "golden": "opt_floats",
         "benchmark": "opt_floats", "standard": "name", "dtype": "opt_name", "b_layout": "name",
         "format": "opt_name", "a_scales": "opt_codes", "b_scales": "opt_codes", "rtol": "opt_number",
         "atol": "opt_number"}),
    Row("mxbi.bi.check", lambda: mxbi.bi.check, dict(fn=muladd, families=["batch"], k=4, n=2, m=[1, 2]),
        {"fn": "subject", "families": "names", "k": "size", "n": "size", "m": "m", "rows": "rows",
         "input": "opt_name", "seed": "count", "repeats": "count", "vs": "opt_subject", "strict": "flag",
         "name": "label", "boundaries": "sizes", "timeout": "seconds", "witness": "witness",
         "explain": "flag"}),
    Row("mxbi.reveal", lambda: mxbi.reveal, dict(fn=muladd, m=2, k=4, n=2),
        {"fn": "subject", "m": "size", "k": "size", "n": "size", "input": "opt_name", "seed": "count",
         "verify_rows": "count", "name": "label"}),
    Row("mxbi.diverge", lambda: mxbi.diverge, dict(left="fma", right="fma;split=2", k=8),
        {"left": "order", "right": "order", "k": "size", "mx": "flag", "m_left": "opt_count",
         "m_right": "opt_count"}),
    Row("mxbi.explain.explain_cell", lambda: mxbi.explain.explain_cell, dict(fn=split_k_by_m, report=_report),
        {"fn": "subject", "report": "report", "cell": "cell", "seed": "count"}),
    Row("mxbi.fuzz", lambda: mxbi.fuzz, FUZZ,
        {"fn": "subject", "families": "names", "classes": "names", "budget": "budget", "max_cases": "opt_count",
         "seed": "count", "out": "path", "corpus": "path", "input": "opt_name", "max_m": "size",
         "max_k": "size", "max_n": "size", "max_shrink_runs": "count", "k_boundaries": "sizes",
         "name": "label", "timeout": "seconds", "confirm": "count", "others": "names"}),
    Row("FuzzResult.replay", lambda: _found().replay, dict(),
        {"fn": "opt_subject", "name": "label"}),
    Row("Report.write_json", lambda: _report().write_json, dict(path="r.json"), {"path": "path"}),
    Row("mxbi.runner.in_process", lambda: mxbi.runner.in_process, dict(script="RUNNER"),
        {"script": "script", "args": "argv", "input": "name"}),
    Row("mxbi.torch.on_device", lambda: mxbi.torch.on_device, dict(fn=muladd),  # the rest is torch's
        {"fn": "callable", "synchronize": "flag"}, control=False),
    Row("mxbi.torch.to_numpy", lambda: mxbi.torch.to_numpy, dict(x=A), {"x": "arraylike"}),
    Row("mxbi.torch.locate", lambda: mxbi.torch.locate,  # the baseline needs torch (tests/test_locate.py)
        dict(model=lambda x: x, make_inputs=lambda m: None, batch_sizes=[1, 2]),
        {"model": "callable", "make_inputs": "callable", "batch_sizes": "sizes", "target": "count",
         "batch_dim": "count", "ops": "kinds", "explain_ops": "flag", "evidence": "flag", "seed": "count",
         "keep_elements": "count", "max_ops": "size", "max_reveals": "count"}, control=False),
    Row("Order", lambda: mxbi.Order, dict(spec="fma"), {"spec": "name"}),
    Row("Order.tree", lambda: mxbi.Order("fma").tree, dict(k=4), {"k": "count"}),
    Row("Order.diff", lambda: mxbi.Order("fma").diff, dict(other="fma;split=2", k=4),
        {"other": "order", "k": "count"}),
    Row("Tree.describe", lambda: mxbi.Order("fma").tree(4).describe, dict(node=1), {"node": "count"}),
]

#: parameters a row leaves out, and why
NOT_WALKED = {
    "mxbi.torch.on_device": {"device", "dtype", "b_dtype"},  # torch's own objects, judged by torch
    "mxbi.torch.to_numpy": {"what"},  # the argument's name in messages: any text
}

#: public callables without parameters to walk, and why
NO_ARGS = {
    "mxbi.formats", "mxbi.presets",
    # constructors of results the library hands out (not made by users)
    "Report", "Cell", "Control", "AccuracyReport", "FuzzResult", "Minimal", "InProcessRunner",
    "Cell.from_dict", "Control.from_dict", "InProcessRunner.__call__",
    # NamedTuples: plain data
    "FormatInfo", "TraceStep", "Divergence",
}


def _resolve(kw: Dict[str, Any], tmp_path) -> Dict[str, Any]:
    """Baseline values that must be made per call (arrays from quantize, the runner script)."""
    out = dict(kw)
    if out.get("codes") is _codes:
        out["codes"], out["scales"] = _codes()
    if out.get("report") is _report:
        out["report"] = _report()
    if out.get("script") == "RUNNER":
        p = tmp_path / "tiny_runner.py"
        p.write_text(RUNNER)
        out["script"] = str(p)
    return out


def _cases() -> List[Any]:
    cases = []
    for row in ROWS:
        for param, kind in row.kinds.items():
            for i, bad in enumerate(BAD[kind]):
                cases.append(pytest.param(row, param, bad, id=f"{row.name}-{param}-{i}"))
    return cases


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in ROWS if r.control])
def test_the_baseline_call_works(row, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    row.target()(**_resolve(row.baseline, tmp_path))


@pytest.mark.parametrize("row,param,bad", _cases())
def test_a_bad_argument_raises_mxbi_error_in_one_line(row, param, bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kw = _resolve(row.baseline, tmp_path)
    kw[param] = bad
    with pytest.raises(mxbi.MxbiError) as e:
        row.target()(**kw)
    msg = str(e.value)
    assert msg and "\n" not in msg, msg
    assert len(msg) <= 300, msg
    assert not msg.startswith("--"), msg  # the Python argument's name, not the CLI's flag


@pytest.mark.parametrize("call,msg", [
    (lambda: mxbi.bi.check("model:fma", "batch", k=-5, n=4), "k: expected a positive integer, got -5"),
    (lambda: mxbi.bi.check("model:fma", "batch", k=2**70, n=4), f"k: {2**70} is too large (at most {2**64 - 1})"),
    (lambda: mxbi.bi.check("model:fma", "batch", k=8.0, n=4), "k: expected an integer, got float 8.0"),
    (lambda: mxbi.bi.check("model:fma", "batch", k=0, n=4), r"K = 0 is out of range (1..=4194304, mxbi's K limit)"),
    (lambda: mxbi.cast(A, 3), "to: expected a string, got int 3"),
    (lambda: mxbi.Order("fma").tree(-1), "k: expected an integer >= 0, got -1"),
    (lambda: mxbi.Order(None), "spec: expected a string, got NoneType None"),
    (lambda: mxbi.fuzz("model:fma", max_k=2**40, max_cases=1), "max_k = 1099511627776: K must be at most 4194304 (mxbi's K limit"),
    (lambda: mxbi.fuzz("model:fma", timeout=0, max_cases=1), "timeout 0: expected seconds > 0"),
    (lambda: mxbi.gemm(A, B, rows=[-1]), "rows: expected an integer >= 0, got -1"),
])
def test_messages_name_the_argument(call, msg):
    with pytest.raises(mxbi.MxbiError) as e:
        call()
    assert str(e.value).startswith(msg), str(e.value)
    assert type(e.value).__module__ == "mxbi" and type(e.value) is mxbi.MxbiError


def _public() -> Dict[str, Any]:
    """Every public callable: the functions in the modules' ``__all__`` and
    the public methods of the classes there."""
    found: Dict[str, Any] = {}
    for mod in (mxbi, mxbi.bi, mxbi.explain, mxbi.fuzzing, mxbi.runner, mxbi.torch):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or isinstance(obj, tuple) or obj is mxbi.MxbiError:
                continue
            if inspect.isclass(obj):
                found[obj.__name__] = obj
                for m, f in vars(obj).items():
                    if callable(f) and (not m.startswith("_") or m == "__call__"):
                        found[f"{obj.__name__}.{m}"] = f
                    elif isinstance(f, classmethod):
                        found[f"{obj.__name__}.{m}"] = f
            elif callable(obj):
                found[f"{obj.__module__}.{name}" if obj.__module__ != "mxbi" else f"mxbi.{name}"] = obj
    return found


def _params(f: Any) -> List[str]:
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters if p not in ("self", "cls")]


def test_the_table_covers_every_public_callable_and_parameter():
    rows = {r.name: r for r in ROWS}
    aliases = {"mxbi.explain.reveal": "mxbi.reveal", "mxbi.explain.diverge": "mxbi.diverge",
               "mxbi.fuzzing.fuzz": "mxbi.fuzz", "mxbi._arrays.to_numpy": "mxbi.torch.to_numpy"}
    missing = []
    for name, f in _public().items():
        name = aliases.get(name, name)
        if name in NO_ARGS or not _params(f):
            continue
        if name not in rows:
            missing.append(f"{name}: no row")
            continue
        params = set(_params(f)) - NOT_WALKED.get(name, set())
        if params and params != set(rows[name].kinds):
            missing.append(f"{name}: parameters {sorted(params)} vs the row's {sorted(rows[name].kinds)}")
    assert not missing, "\n".join(missing)


def test_numpy_integers_and_arrays_are_good_arguments():
    """The checks refuse wrong values, not numpy's spellings of right ones."""
    r = mxbi.bi.check(muladd, np.array(["batch"]), k=np.int64(8), n=np.uint16(2), m=np.array([1, 3]),
                      rows=np.array([0]), seed=np.uint64(2), boundaries=np.array([2]))
    assert r.passed and {c.m for c in r.cells} == {3}
    assert mxbi.gemm(A, B, rows=np.array([1])).shape == (1, 3)
    assert len(mxbi.Order("fma").tree(np.int32(4))) > 0
    assert mxbi.quantize(X32, "mxfp8-e4m3", axis=np.int8(-1), flush_subnormals=np.bool_(True))[0].shape == (2, 32)
    assert mxbi.fuzz("model:fma", max_cases=np.int64(1), max_m=np.int64(4), max_k=4, max_n=2,
                     budget=np.float32(5)).passed
