"""Failures explained where they are reported, and readable (issue 23):
``report.explanations`` and ``str(report)`` name both orders, the first
diverging node and the fix; explaining a cell of a kernel whose tree no
order names (numpy's BLAS) stays within 40 lines of at most 200 characters."""

from __future__ import annotations

import json

import numpy as np
import pytest

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


def reversed_above_4(a, b):
    """muladd from k = K-1 down to 0 for M > 4 (no order of the family has
    that tree), forward up to M = 4."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    ks = range(a.shape[1] - 1, -1, -1) if a.shape[0] > 4 else range(a.shape[1])
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for t in ks:
        acc = (acc + a[:, t : t + 1] * b[t : t + 1, :]).astype(np.float32)
    return acc


@pytest.mark.parametrize("kernel", [blas, reversed_above_4])
def test_a_cell_is_explained_in_at_most_40_lines(kernel):
    """numpy's BLAS (named, or no static tree at larger M: one line), and a
    tree no order names (a summary, not its 255 nodes)."""
    for ms in ([1, 8], [1, 64]):
        r = mxbi.bi.check(kernel, ["batch"], k=256, n=16, m=ms, explain=False)
        cell = next(c for c in r.cells if c.m == ms[1])
        text = mxbi.explain.explain_cell(kernel, r, cell)
        lines = text.splitlines()
        assert 0 < len(lines) <= 40, text
        assert all(len(x) <= 200 for x in lines), text
    if kernel is reversed_above_4:
        assert "terms joining in DECREASING k" in text, text
