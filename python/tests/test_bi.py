"""The checker on Python callables: numpy kernels with known orders, through
the same families, verdicts and report as `mxbi bi run`."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import mxbi
import mxbi.runner
from conftest import SPLIT_K_BY_M_TABLE, draw, muladd, muladd_split, run_cli, split_k_by_m

FAMILIES = ["content", "batch", "position", "permutation", "repeat"]
MS = [1, 3, 4, 5, 9, 17]
K, N = 96, 6


def renamed(report: mxbi.bi.Report, name: str) -> dict:
    d = json.loads(report.to_json())
    d["subject"] = name
    for c in d["cells"]:
        c["subject"] = name
    return d


def test_the_numpy_oracles_are_the_model_bit_for_bit():
    a, b = draw((9, K), 11), draw((K, N), 12)
    for fn, order in [(muladd, "muladd"), (lambda a, b: muladd_split(a, b, 4), "muladd;split=4")]:
        want = mxbi.gemm(a, b, order=order).view(np.uint32)
        assert np.array_equal(fn(a, b).view(np.uint32), want)
    # and they differ from each other on these inputs: the kernel below can fail
    assert not np.array_equal(muladd(a, b), muladd_split(a, b, 4))


def test_an_invariant_numpy_kernel_passes_with_the_models_report():
    report = mxbi.bi.check(muladd, families=FAMILIES, k=K, n=N, m=MS)
    assert report.passed and report.valid and report.exit_code == 0
    assert {c.verdict for c in report.cells} == {"BI_PASS"}
    assert report.subject == "python:muladd"
    assert len(report.cells) == report.summary["cells"] > 20
    # the same cells, verdicts and bytes as the CPU model under the same order
    model = mxbi.bi.check("model:muladd", families=FAMILIES, k=K, n=N, m=MS)
    assert renamed(report, "model:muladd") == json.loads(model.to_json())


def test_a_split_k_by_m_kernel_fails_batch_exactly_where_its_split_changes():
    report = mxbi.bi.check(split_k_by_m, families=["batch"], k=K, n=N, m=MS)
    assert not report.passed and report.exit_code == 1 and report.valid
    # the baseline is M = 1 (plain muladd); M <= 4 keep it, M > 4 split K
    assert {c.m for c in report.cells} == {3, 4, 5, 9, 17}
    for c in report.cells:
        assert c.verdict == ("BI_FAIL" if c.m > 4 else "BI_PASS"), c
    bad = report.failures
    assert bad and all(c.bytes_differing > 0 and c.first_offenders for c in bad)
    text = str(report)
    assert "BI_FAIL  batch/m=5/k=96/n=6/row=0" in text
    assert text.endswith(report.summary_line() + "\n")
    md = report.markdown()  # the verdict table of every cell
    assert md.startswith("# Batch invariance: `python:split_k_by_m`") and md.count("BI_FAIL") >= 3
    assert 'type="BI_FAIL"' in report.junit()
    assert report.svg().startswith("<svg") and report.ms == MS


def test_the_same_bytes_through_python_and_the_cli(tmp_path):
    """The Python kernel and the CLI's dispatch subject that describes it give
    the same report, byte for byte but for the subject's name; a model subject
    gives the CLI's report, stdout and exit code exactly."""
    table = tmp_path / "t.json"
    table.write_text(SPLIT_K_BY_M_TABLE)
    p = run_cli(
        ["bi", "run", "--subject", "dispatch:t.json", "--family", "batch,position,content",
         "--m", ",".join(map(str, MS)), "--k", str(K), "--n", str(N), "--json", "r.json",
         # the table declares its orders, the callable does not: compare
         # the checks without the witness check and the explanations
         # (declared vs identified), then the explanations' orders
         "--witness", "off", "--no-explain"],
        cwd=tmp_path, check=False,
    )
    assert p.returncode == 1, p.stderr
    cli = (tmp_path / "r.json").read_text()
    py = mxbi.bi.check(split_k_by_m, families=["batch", "position", "content"], k=K, n=N, m=MS, explain=False)
    assert json.dumps(renamed(py, "dispatch:t.json"), indent=2) + "\n" == cli
    assert py.exit_code == p.returncode
    explained = mxbi.bi.check(split_k_by_m, families=["batch", "position", "content"], k=K, n=N, m=MS)
    run_cli(["bi", "run", "--subject", "dispatch:t.json", "--family", "batch,position,content",
             "--m", ",".join(map(str, MS)), "--k", str(K), "--n", str(N), "--json", "e.json", "--witness", "off"],
            cwd=tmp_path, check=False)
    cli_e = json.loads((tmp_path / "e.json").read_text())["explanations"]
    pairs = lambda es: [(e["family"], e["base"]["order"], e["variant"]["order"]) for e in es]  # noqa: E731
    assert pairs([e.__dict__ for e in explained.explanations]) == pairs(cli_e) != []

    spec = "model:fma;split=4"
    p = run_cli(["bi", "run", "--subject", spec, "--family", "batch,permutation,repeat", "--m", "1,5,9",
                 "--k", "64", "--n", "8", "--rows", "0,last", "--seed", "7", "--json", "m.json"], cwd=tmp_path)
    r = mxbi.bi.check(spec, families="batch,permutation,repeat", k=64, n=8, m=[1, 5, 9], rows=[0, "last"], seed=7)
    assert r.to_json() == (tmp_path / "m.json").read_text()
    assert str(r) == p.stdout and r.exit_code == p.returncode == 0


def test_edges_around_declared_boundaries():
    r = mxbi.bi.check(split_k_by_m, families=["batch"], k=16, n=2, boundaries=[4])
    assert r.ms == [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256, 257, 512, 513]
    assert {c.m for c in r.cells if c.verdict == "BI_FAIL"} == {m for m in r.ms if m > 4}
    with pytest.raises(mxbi.MxbiError, match="boundaries: only for a callable"):
        mxbi.bi.check("model:fma", families=["batch"], k=16, n=2, boundaries=[4])


RUNNER = """
import sys
sys.path.insert(0, {examples!r})
import numpy as np
from mxbi_runner import serve

def split_k_by_m(a, b):
    def muladd(a, b):
        acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
        for k in range(a.shape[1]):
            acc = acc + a[:, k:k + 1] * b[k:k + 1, :]
        return acc
    if a.shape[0] <= 4:
        return muladd(a, b)
    q = -(-a.shape[1] // 4)
    parts = [muladd(a[:, p * q:(p + 1) * q], b[p * q:(p + 1) * q]) for p in range(4)]
    return ((parts[0] + parts[1]) + parts[2]) + parts[3]

serve(split_k_by_m, "split_k_by_m")
"""


def test_in_process_and_through_an_exec_runner_give_the_same_report(tmp_path):
    """The same callable in-process and as an mxbi-exec/1 runner (the
    examples/ helper): the same cells, verdicts and bytes."""
    import sys

    from conftest import ROOT

    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER.format(examples=str(ROOT / "examples")))
    spec = f"exec:{sys.executable} {runner}"
    kw = dict(families=["batch", "position", "repeat"], k=K, n=N, m=MS)
    ex = mxbi.bi.check(spec, **kw)
    py = mxbi.bi.check(split_k_by_m, **kw)
    assert ex.subject == "exec:split_k_by_m" and not ex.passed  # named by the runner's greeting
    assert renamed(py, ex.subject) == json.loads(ex.to_json())
    with pytest.raises(mxbi.MxbiError, match="timeout 0: expected seconds"):
        mxbi.bi.check(spec, timeout=0, **kw)
    # the runner script itself, loaded in-process: the same report again
    inproc = mxbi.runner.in_process(str(runner))
    assert inproc.name == "split_k_by_m"
    again = mxbi.bi.check(inproc, name="exec:" + inproc.name, **kw)
    assert again.to_json() == ex.to_json()


def test_the_examples_numpy_runner_in_process_and_through_exec():
    """examples/runner_numpy_f32.py (the machine's BLAS): whatever its
    verdicts, they are the same in-process and through exec:."""
    import sys

    from conftest import ROOT

    script = str(ROOT / "examples" / "runner_numpy_f32.py")
    kw = dict(families=["batch", "content", "repeat"], k=256, n=16, m=[1, 2, 9, 64])
    ex = mxbi.bi.check(f"exec:{sys.executable} {script}", **kw)
    inproc = mxbi.runner.in_process(script)
    py = mxbi.bi.check(inproc, name=ex.subject, **kw)
    assert py.to_json() == ex.to_json()


def test_a_kernel_reading_other_rows_fails_content():
    def leaky(a, b):
        out = muladd(a, b)
        return out + np.float32(1e-3) * np.float32(a[:, 0].sum())

    # K = 64, N = 16: the default (separating) inputs have power there; at
    # K = 32, N = 4 they do not, and agreeing bytes are VACUOUS, not a pass
    report = mxbi.bi.check(leaky, families=["content"], k=64, n=16, m=[4, 8])
    assert not report.passed
    assert {c.verdict for c in report.cells} == {"BI_FAIL"}


def test_a_nondeterministic_kernel_is_non_det_and_fails_only_when_strict():
    counter = itertools.count()

    def noisy(a, b):
        out = muladd(a, b)
        out.view(np.uint32)[...] ^= np.uint32(next(counter) % 2)  # every other call flips the last bit
        return out

    lax = mxbi.bi.check(noisy, families=["repeat"], k=32, n=4, m=[4])
    assert [c.verdict for c in lax.cells] == ["NON_DET"] and lax.passed
    strict = mxbi.bi.check(noisy, families=["repeat"], k=32, n=4, m=[4], strict=True)
    assert not strict.passed and strict.exit_code == 1


def test_switch_against_a_model():
    same = mxbi.bi.check(muladd, families=["switch"], k=64, n=16, m=[3, 8], vs="model:muladd")
    assert same.passed and same.vs == "model:muladd"
    other = mxbi.bi.check(muladd, families=["switch"], k=64, n=16, m=[3, 8], vs="model:fma")
    assert not other.passed


def test_a_kernel_that_breaks_gives_error_cells_with_the_reason():
    def broken(a, b):
        raise ValueError("boom")

    r = mxbi.bi.check(broken, families=["batch"], k=16, n=4, m=[1, 2])
    assert r.cells and {c.verdict for c in r.cells} == {"ERROR"}
    assert r.cells[0].reason == "python:test_a_kernel_that_breaks_gives_error_cells_with_the_reason.<locals>.broken failed: ValueError: boom"
    assert r.exit_code == 2 and not r.passed  # no cell could run, as the CLI's exit 2

    f64 = mxbi.bi.check(lambda a, b: muladd(a, b).astype(np.float64), families=["batch"], k=16, n=4, m=[1, 2])
    assert "fn returned float64 values" in f64.cells[0].reason
    shape = mxbi.bi.check(lambda a, b: muladd(a, b)[:, :2], families=["batch"], k=16, n=4, m=[1, 2])
    assert shape.cells[0].reason.endswith("failed: returned shape (1, 2), expected (1, 4): one row per row of a, N = 4 columns")


def test_narrow_outputs_are_widened_exactly():
    # a float16-output kernel: its outputs are compared as float16 values
    # widened exactly to float32
    r = mxbi.bi.check(lambda a, b: muladd(a, b).astype(np.float16), families=["batch"], k=16, n=4, m=[1, 2, 8])
    assert r.passed


def test_keyboard_interrupt_ends_the_check():
    def interrupted(a, b):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mxbi.bi.check(interrupted, families=["batch"], k=16, n=4, m=[1, 2])


def test_bad_check_input():
    cases = [
        (dict(families=["bogus"]), "families: unknown family 'bogus'; expected one of: content, batch"),
        (dict(families=["rank"]), "the rank family needs a subject with world size 2 or more"),
        (dict(families=["batch"], k=0), r"K = 0 is out of range \(1..="),
        (dict(families=["batch"], k=-5), "k: expected a positive integer, got -5"),
        (dict(families=["batch"], m="1,x"), "m: '1,x' is not a batch size"),
        (dict(families=["batch"], input="fp8"), "unknown input type 'fp8'"),
        (dict(families=["switch"]), "the switch family needs a second subject"),
        (dict(families=["batch"], rows=["middle"]), "rows: bad row position 'middle'"),
        (dict(families=["batch"], m=[5]), "no cell to check"),
    ]
    for kw, msg in cases:
        kw.setdefault("k", 16)
        kw.setdefault("n", 4)
        kw.setdefault("m", [1, 2])
        with pytest.raises(mxbi.MxbiError, match=msg):
            mxbi.bi.check(muladd, **kw)
    with pytest.raises(mxbi.MxbiError, match="expected KIND:ARG"):
        mxbi.bi.check("muladd", families=["batch"], k=16, n=4)
    with pytest.raises(mxbi.MxbiError, match="subject: expected a callable"):
        mxbi.bi.check(42, families=["batch"], k=16, n=4)


#: a bf16-output table whose orders change above M = 16 (issue 22)
BF16_TABLE = '{"dispatch": [{"m_max": 16, "order": "fma;out=bf16"}, {"order": "fma;split=4;out=bf16"}]}'


def test_witnesses_fail_a_bf16_table_from_its_boundary_as_the_cli_does(tmp_path):
    """`witness="auto"` (the default) checks declared orders: batch cells
    across the table's bound fail with a witness, the others pass; the
    report is the CLI's, byte for byte; `witness=False` skips it."""
    (tmp_path / "t.json").write_text(BF16_TABLE)
    spec = f"dispatch:{tmp_path / 't.json'}"
    kw = dict(families=["batch", "position"], k=256, n=16, m=[1, 16, 17, 33])
    r = mxbi.bi.check(spec, **kw)
    assert [c.m for c in r.failures] == [17, 33]
    assert [w["cell"] for w in r.witnesses] == [c.id for c in r.failures]
    for w in r.witnesses:
        assert w["outcome"] == "fail" and w["base"] == {"order": "fma;out=bf16", "known": "declared"}
        assert w["var"]["order"] == "fma;split=4;out=bf16" and w["witness"]["subject_columns"] > 0
    p = run_cli(["bi", "run", "--subject", spec, "--family", "batch,position", "--m", "1,16,17,33",
                 "--k", "256", "--n", "16", "--json", "r.json"], cwd=tmp_path, check=False)
    assert p.returncode == r.exit_code == 1, p.stderr
    assert (tmp_path / "r.json").read_text() == r.to_json()
    off = mxbi.bi.check(spec, witness=False, **kw)
    assert off.witnesses == [] and all(c.verdict != "BI_FAIL" or c.m > 16 for c in off.cells)
    with pytest.raises(mxbi.MxbiError, match="witness"):
        mxbi.bi.check(spec, witness="maybe", **kw)


def test_witness_true_identifies_a_callables_orders():
    """A callable declares nothing: `witness=True` identifies its orders
    from its bytes (muladd up to M = 4, muladd;split=4 above)."""
    r = mxbi.bi.check(split_k_by_m, families=["batch"], k=K, n=N, m=MS, witness=True)
    ws = {w["cell"]: w for w in r.witnesses}
    assert sorted(ws) == sorted(c.id for c in r.cells if c.m > 4)
    for w in ws.values():
        assert w["outcome"] == "fail"
        assert w["base"] == {"order": "muladd", "known": "identified"}
        assert w["var"] == {"order": "muladd;split=4", "known": "identified"}
    assert mxbi.bi.check(split_k_by_m, families=["batch"], k=K, n=N, m=MS).witnesses == []
