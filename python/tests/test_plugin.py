"""The pytest plugin: the `mxbi_bi` fixture and `--mxbi-report DIR`."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

KERNELS = '''
import numpy as np

def muladd(a, b):
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = acc + a[:, k:k + 1] * b[k:k + 1, :]
    return acc

def split_k_by_m(a, b):
    if a.shape[0] <= 4:
        return muladd(a, b)
    h = a.shape[1] // 2
    return muladd(a[:, :h], b[:h]) + muladd(a[:, h:], b[h:])

def test_invariant(mxbi_bi):
    r = mxbi_bi.check(muladd, families=["batch", "position"], k=64, n=16, m=[1, 3, 8])
    assert r.passed

def test_split(mxbi_bi):
    mxbi_bi.check(split_k_by_m, families=["batch"], k=64, n=16, m=[1, 3, 8])
'''


def test_the_fixture_fails_the_test_with_the_verdict_table(pytester):
    pytester.makepyfile(test_kernels=KERNELS)
    reports = pytester.path / "reports"
    result = pytester.runpytest("--mxbi-report", str(reports),
                                "--junitxml", str(pytester.path / "junit.xml"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*mxbi: the batch-invariance check of python:split_k_by_m did not pass (the CLI would exit 1)*",
        "BI_FAIL  batch/m=8/k=64/n=16/row=0: 1 of 1 rows*",
        # the report's explanation names both orders: nothing is probed
        "why:",
        "  batch: muladd vs muladd;split=2 (1 failing cell; first batch/m=8/k=64/n=16/row=0)",
        "    first diverging node: *",
        "    fix: choose the split from (K, N) only: run muladd;split=2 for every M*",
        "# Batch invariance: `python:split_k_by_m`",
        "*| 3 | 64 | 16 | 0 | BI_PASS | 0.9* (f32) |*",
        "*| 8 | 64 | 16 | 0 | *BI_FAIL* |*",
    ])
    assert "explanation:" not in result.stdout.str()
    files = sorted(p.name for p in reports.iterdir())
    assert files == ["test_kernels.py_test_invariant.json", "test_kernels.py_test_split.json"]
    r = json.loads((reports / "test_kernels.py_test_split.json").read_text())
    assert r["schema"] == "mxbi-bi-report/1" and r["subject"] == "python:split_k_by_m"
    assert {(c["m"], c["verdict"]) for c in r["cells"]} == {(3, "BI_PASS"), (8, "BI_FAIL")}
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "junit.xml").iter("property")}
    assert props["mxbi_report[test_kernels.py::test_split]"].endswith("test_kernels.py_test_split.json")


@pytest.mark.parametrize("family", [None, "xunit2", "xunit1", "legacy"])
def test_the_junit_xml_carries_the_properties_without_a_warning(pytester, family):
    """Under every junit_family (None: pytest's default, xunit2) the run
    prints no warning (-W error would turn one into an error) and the JUnit
    XML carries each check's properties: on the <testsuite> under xunit2
    (whose schema has none on a test case), on the test case otherwise."""
    pytester.makepyfile(test_kernels=KERNELS)
    args = ["-W", "error", "--mxbi-report", "reports", "--junitxml", "junit.xml"]
    if family is not None:
        args += ["-o", f"junit_family={family}"]
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "warnings summary" not in out and not re.search(r"\d+ warnings? in", out), out
    root = ET.parse(pytester.path / "junit.xml").getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    suite_props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    split_json = "reports/test_kernels.py_test_split.json"  # as given: --mxbi-report reports
    if family in (None, "xunit2"):
        assert all(c.find("properties") is None for c in cases.values())  # the xunit2 schema
        props = {
            "split": {k.split("[")[0]: v for k, v in suite_props.items() if k.endswith("::test_split]")},
            "invariant": {k.split("[")[0]: v for k, v in suite_props.items() if k.endswith("::test_invariant]")},
        }
        assert "mxbi_summary[test_kernels.py::test_split]" in suite_props
    else:
        assert suite_props == {}
        props = {
            name: {p.get("name"): p.get("value") for p in cases[f"test_{name}"].findall("properties/property")}
            for name in ("split", "invariant")
        }
    assert props["split"]["mxbi_report"] == split_json
    assert props["split"]["mxbi_failures"] == "batch/m=8/k=64/n=16/row=0"
    assert props["split"]["mxbi_summary"].startswith("2 cells: 1 BI_PASS, 1 BI_FAIL, ")
    assert props["invariant"]["mxbi_failures"] == ""
    assert set(props["invariant"]) == {"mxbi_summary", "mxbi_failures", "mxbi_report"}


def test_the_plugin_is_registered_by_its_entry_point(pytester):
    pytester.makepyfile(test_kernels=KERNELS)
    # no -p: the pytest11 entry point of the installed package loads it
    result = pytester.runpytest_subprocess("-k", "split", "--mxbi-no-explain")
    result.assert_outcomes(failed=1)
    assert "explanation:" not in result.stdout.str()
    result = pytester.runpytest_subprocess("-k", "invariant", "--mxbi-strict")
    result.assert_outcomes(passed=1)
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    assert "--mxbi-report=DIR" in help_text


FUZZ_KERNELS = KERNELS.split("def test_invariant")[0] + '''
def test_fuzz_invariant(mxbi_bi):
    assert mxbi_bi.fuzz(muladd, max_cases=10, max_m=32, max_k=32, max_n=4).passed

def test_fuzz_split(mxbi_bi):
    mxbi_bi.fuzz(split_k_by_m, seed=3, max_cases=200, families=["batch"], max_m=32, max_k=32, max_n=4)
'''


def test_the_fixture_fuzzes_and_fails_with_the_minimal_case(pytester):
    pytester.makepyfile(test_fuzzing=FUZZ_KERNELS)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*mxbi: fuzzing python:split_k_by_m found a batch-invariance failure (seed 3, * cases)",
        "minimal case: batch m=5 (baseline *",
        '*"schema": "mxbi-bi-case/1"*',
    ])
