"""Failures explained where they are reported, and readable (issue 23):
``report.explanations`` and ``str(report)`` name both orders, the first
diverging node and the fix; explaining a cell of a kernel whose tree no
order names (numpy's BLAS) stays within 40 lines of at most 200 characters."""

from __future__ import annotations

import json

import numpy as np

import mxbi
from conftest import split_k_by_m


def test_the_report_carries_the_explanation():
    r = mxbi.bi.check(split_k_by_m, ["batch"], k=64, n=16, m=[1, 64])
    assert not r.passed
    assert len(r.explanations) == 1
    e = r.explanations[0]
    assert e.family == "batch" and e.failing_cells == len(r.failures)
    assert e.base["order"] and e.variant["order"] and e.base["order"] != e.variant["order"]
    assert e.first_node and e.fixes
    assert str(e).splitlines()[0] == e.lines[0]
    assert "why:\n  batch: " in str(r)
    assert json.loads(r.to_json())["explanations"][0]["schema"] == "mxbi-bi-explanation/1"
    quiet = mxbi.bi.check(split_k_by_m, ["batch"], k=64, n=16, m=[1, 64], explain=False)
    assert quiet.explanations == [] and "why:" not in str(quiet)


def blas(a, b):
    return np.asarray(a, np.float32) @ np.asarray(b, np.float32)


def test_a_blas_cell_is_explained_in_at_most_40_lines():
    r = mxbi.bi.check(blas, ["batch"], k=256, n=16, m=[1, 64], explain=False)
    cell = next(c for c in r.cells if c.m == 64)
    text = mxbi.explain.explain_cell(blas, r, cell)
    lines = text.splitlines()
    assert 0 < len(lines) <= 40, text
    assert all(len(x) <= 200 for x in lines), text
