"""The fuzzer on Python callables: `mxbi.fuzz(fn, ...)` finds a batch-size
switch, shrinks it to the first M past the switch, and the minimal case
replays with a failing verdict through `mxbi.bi` and through `mxbi bi run`."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import mxbi
from conftest import ROOT, muladd, muladd_split, run_cli

# the content classes include infinities and NaN: numpy says so, harmlessly
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# small shapes: the numpy kernels loop over K in Python
SMALL = dict(max_m=64, max_k=64, max_n=8)


def switch_at_8(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plain muladd up to M = 8 rows, K split in two above: batch-variant
    from M = 9 on (K >= 4 tells the two orders apart)."""
    return muladd(a, b) if a.shape[0] <= 8 else muladd_split(a, b, 2)


RUNNER = """
import sys
sys.path.insert(0, {tests!r})
sys.path.insert(0, {examples!r})
from mxbi_runner import serve
from test_fuzz import switch_at_8
serve(switch_at_8, "switch_at_8")
"""


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    out = tmp_path_factory.mktemp("fuzz") / "out"
    r = mxbi.fuzz(switch_at_8, seed=3, max_cases=200, out=out, **SMALL)
    return r, out


def test_a_switch_at_m_8_is_found_and_shrunk_to_m_9(found):
    r, out = found
    assert not r.passed and not r and r.failure is not None
    f = r.failure
    assert r.seed == 3 and 1 <= r.cases_tried <= 200 and r.subject == "python:switch_at_8"
    # the batch family, the first M past the switch against a baseline at or below it
    assert f.family == "batch" and f.m == 9 and f.base_m <= 8, f.describe
    assert f.k >= 4 and f.n >= 1 and f.cell.verdict == "BI_FAIL" and f.cell.m == 9
    assert f.cell.bytes_differing > 0 and f.cell.first_offenders
    assert f.case["m"] == [f.base_m, 9] and f.case["k"] == f.k and f.case["families"] == ["batch"]
    assert f.describe.startswith("batch m=9 (baseline ")
    # the explainer names both orders from the bytes alone
    text = "\n".join(f.explanation)
    # the kernel sums muladd;split=2 above M = 8; on a shrunk row of a few
    # terms fma;split=2 may give the same bytes, so either is named (as in
    # tests/fuzz_cli.rs)
    assert ("the variant row is fma;split=2" in text or "the variant row is muladd;split=2" in text), text
    assert "fix:" in text, text
    # the files the CLI writes
    assert (out / "minimal.json").read_text() == f.case_json
    assert (out / "fuzz.json").read_text() == r.to_json()
    assert json.loads(r.to_json())["failure"]["minimal"] == f.describe
    assert list((out / "corpus").iterdir()), "the minimal case is saved to OUT/corpus"


def test_the_minimal_case_replays_failing_in_process(found):
    r, _ = found
    rep = r.replay()
    assert not rep.passed and rep.exit_code == 1
    bad = rep.failures
    assert bad and all(c.m == 9 for c in bad)
    assert bad[0].first_offenders == r.failure.cell.first_offenders
    # the same case on an invariant kernel holds: the replay can pass
    assert r.replay(muladd).passed


def test_the_minimal_case_replays_failing_through_the_cli(found, tmp_path):
    r, _ = found
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER.format(tests=str(ROOT / "python" / "tests"), examples=str(ROOT / "examples")))
    case = dict(r.failure.case, subject=f"exec:{sys.executable} {runner}")
    (tmp_path / "case.json").write_text(json.dumps(case))
    p = run_cli(["bi", "run", "--allow-exec", "case.json", "--json", "r.json"], cwd=tmp_path, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    cells = json.loads((tmp_path / "r.json").read_text())["cells"]
    assert [c["verdict"] for c in cells] == ["BI_FAIL"] and cells[0]["m"] == 9
    assert cells[0]["first_offenders"] == r.failure.cell.first_offenders


def test_the_corpus_replays_the_saved_case_first(found):
    r, out = found
    again = mxbi.fuzz(switch_at_8, seed=99, max_cases=5, out=out, **SMALL)
    assert again.corpus_replayed >= 1 and again.cases_tried == 0
    f = again.failure
    assert f is not None and f.from_corpus and f.shrink_runs == 0
    assert f.case_json == r.failure.case_json and f.m == 9


def test_an_invariant_kernel_has_no_failure(tmp_path):
    r = mxbi.fuzz(muladd, seed=5, max_cases=25, out=tmp_path, **SMALL)
    assert r.passed and r and r.failure is None
    assert r.cases_tried == 25 and r.cases_skipped < 25
    assert not (tmp_path / "minimal.json").exists()
    assert json.loads((tmp_path / "fuzz.json").read_text())["failure"] is None
    with pytest.raises(mxbi.MxbiError, match="no failing case"):
        r.replay()


def test_the_same_seed_gives_the_same_minimal_case():
    kw = dict(seed=11, max_cases=200, families=["batch", "position"], **SMALL)
    one, two = mxbi.fuzz(switch_at_8, **kw), mxbi.fuzz(switch_at_8, **kw)
    assert one.failure is not None and one.failure.m == 9
    assert one.failure.case_json == two.failure.case_json
    assert one.to_json() == two.to_json() and one.cases_tried == two.cases_tried


def test_a_spec_string_is_fuzzed_as_the_cli_does(tmp_path, monkeypatch):
    """A dispatch table that describes switch_at_8: the same minimal case
    file, byte for byte, from `mxbi fuzz` and from `mxbi.fuzz`."""
    (tmp_path / "t.json").write_text('{"dispatch": [{"m_max": 8, "order": "muladd"}, {"order": "muladd;split=2"}]}')
    kw = ["--seed", "2", "--max-cases", "100", "--max-m", "64", "--max-k", "64", "--max-n", "8"]
    p = run_cli(["fuzz", "--subject", "dispatch:t.json", "--out", "cli", *kw], cwd=tmp_path, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    monkeypatch.chdir(tmp_path)
    r = mxbi.fuzz("dispatch:t.json", seed=2, max_cases=100, out="py", **SMALL)
    assert r.failure is not None and r.failure.m == 9
    cli = (tmp_path / "cli" / "minimal.json").read_text()
    assert (tmp_path / "py" / "minimal.json").read_text() == cli == r.failure.case_json
    assert json.loads(cli)["subject"] == "dispatch:../t.json"
    assert (tmp_path / "py" / "fuzz.json").read_text() == (tmp_path / "cli" / "fuzz.json").read_text()
    assert r.replay("dispatch:t.json").exit_code == 1


def test_bad_arguments_are_clear_exceptions():
    with pytest.raises(mxbi.MxbiError, match="expected a callable"):
        mxbi.fuzz(42)
    with pytest.raises(mxbi.MxbiError, match="families"):
        mxbi.fuzz(muladd, families=["nope"], max_cases=1)
    with pytest.raises(mxbi.MxbiError, match="classes"):
        mxbi.fuzz(muladd, classes=["bogus"], max_cases=1)
    with pytest.raises(mxbi.MxbiError, match="max_m"):
        mxbi.fuzz(muladd, max_m=0)
    with pytest.raises(mxbi.MxbiError, match="seed: expected an integer"):
        mxbi.fuzz(muladd, seed="one")
    with pytest.raises(mxbi.MxbiError, match="budget -1"):
        mxbi.fuzz(muladd, budget=-1.0)
    with pytest.raises(mxbi.MxbiError, match="unknown input type"):
        mxbi.fuzz(muladd, input="e9m9")
    with pytest.raises(mxbi.MxbiError, match="dump:"):
        mxbi.fuzz("dump:nowhere")
    with pytest.raises(mxbi.MxbiError, match="unknown kind"):
        mxbi.fuzz("nope:x")


def test_exceptions_inside_fn_are_reported_like_the_checker():
    def broken(a, b):
        raise ZeroDivisionError("kernel fell over")

    # every cell an ERROR: nothing was checked, said with fn's exception
    with pytest.raises(mxbi.MxbiError, match="no case could run.*ZeroDivisionError: kernel fell over"):
        mxbi.fuzz(broken, max_cases=3, **SMALL)

    def big_breaks(a, b):
        if a.shape[0] > 16:
            raise ValueError("too many rows")
        return muladd(a, b)

    r = mxbi.fuzz(big_breaks, seed=4, max_cases=30, **SMALL)
    assert r.passed and 0 < r.cases_skipped < r.cases_tried
    assert "ValueError: too many rows" in r.first_error

    def interrupted(a, b):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mxbi.fuzz(interrupted, max_cases=3, **SMALL)
