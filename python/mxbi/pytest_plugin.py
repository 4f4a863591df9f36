"""pytest plugin (entry point ``pytest11``): the ``mxbi_bi`` fixture.

A kernel test reads::

    def test_my_kernel_is_batch_invariant(mxbi_bi):
        mxbi_bi.check(my_kernel, families=["batch", "position"], k=4096, n=512)

``mxbi_bi.fuzz(fn, max_cases=200, ...)`` takes :func:`mxbi.fuzz`'s
arguments and fails the test with the minimal failing case if it finds one.

``mxbi_bi.locate(model, make_inputs, batch_sizes=[1, 9, 33])`` takes
:func:`mxbi.torch.locate`'s arguments and fails the test with the root
causes (each op, its module, its orders at both batch sizes and the fix)
unless the program is batch-invariant (records ``mxbi_locate``).

``mxbi_bi.check`` takes :func:`mxbi.bi.check`'s arguments and returns its
report; when the check does not pass, the test fails with the CLI's summary
(the cells that did not pass, with their first differing bytes) and the
verdict table of every cell. Options:

``--mxbi-report DIR``
    write each check's JSON report (``mxbi-bi-report/1``) into DIR, one file
    per check named after the test; with ``--junitxml`` the path is also
    recorded as the ``mxbi_report`` property.
``--mxbi-strict``
    ``NON_DET`` and ``ERROR`` cells fail the test too.
``--mxbi-no-explain``
    skip the explanation of the first failing cell (by default the
    explainer reveals the kernel's order on both sides of it: a few extra
    launches of the kernel).

JUnit (``--junitxml``): each check records ``mxbi_summary`` (the summary
line), ``mxbi_failures`` (the ids of the cells that failed, comma-separated;
empty when none) and with ``--mxbi-report`` ``mxbi_report`` (the JSON
report's path); a fuzz run records ``mxbi_fuzz``. Under pytest's default
``junit_family`` (``xunit2``, whose schema has no properties on a test
case) they are properties of the ``<testsuite>``, named after the test:
``mxbi_summary[tests/test_k.py::test_x]``; under ``xunit1``/``legacy`` they
are the test case's own properties, by their plain names. Either way no
warning is printed (the plugin does not use ``record_property``, which
warns under ``xunit2``).
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, List, Optional

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("mxbi", "mxbi batch-invariance checks")
    group.addoption(
        "--mxbi-report",
        metavar="DIR",
        default=None,
        help="write each mxbi_bi check's JSON report into DIR (beside pytest's JUnit)",
    )
    group.addoption(
        "--mxbi-strict",
        action="store_true",
        default=False,
        help="NON_DET and ERROR cells of mxbi_bi checks fail the test too",
    )
    group.addoption(
        "--mxbi-no-explain",
        action="store_true",
        default=False,
        help="do not explain the first failing cell of an mxbi_bi check (no extra kernel launches)",
    )


def _file_name(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_") or "test"


def _recorder(request: Any) -> Callable[[str, object], None]:
    """Records a JUnit property of the calling test, valid for the JUnit
    family in use and without a warning: under ``xunit2`` (pytest's
    default) a ``<testsuite>`` property named ``NAME[NODEID]`` (through
    ``record_testsuite_property``, the xunit2-compatible fixture); otherwise
    (``xunit1``, ``legacy``, or no ``--junitxml``) the test's
    ``user_properties``, which pytest writes as the test case's properties."""
    xunit2 = (
        request.config.getoption("xmlpath", None) is not None
        and request.config.getini("junit_family") not in ("xunit1", "legacy")
    )
    if xunit2:
        suite = request.getfixturevalue("record_testsuite_property")
        nodeid = request.node.nodeid
        return lambda name, value: suite(f"{name}[{nodeid}]", value)
    return lambda name, value: request.node.user_properties.append((name, value))


class BiChecker:
    """What the ``mxbi_bi`` fixture gives a test."""

    def __init__(self, request: Any):
        self._request = request
        self._record = _recorder(request)
        self.reports: List[Any] = []
        self.report_dir: Optional[str] = request.config.getoption("--mxbi-report")
        self.strict: bool = bool(request.config.getoption("--mxbi-strict"))
        self.explain: bool = not request.config.getoption("--mxbi-no-explain")

    def check(self, fn: Any, **kwargs: Any) -> Any:
        """Runs :func:`mxbi.bi.check`; fails the test unless it passed."""
        import mxbi.bi

        kwargs.setdefault("strict", self.strict)
        report = mxbi.bi.check(fn, **kwargs)
        self.reports.append(report)
        path = self._write(report)
        self._record("mxbi_summary", report.summary_line())
        self._record("mxbi_failures", ",".join(c.id for c in report.failures))
        if report.explanations:
            self._record("mxbi_explanations", " | ".join(e.lines[0] for e in report.explanations if e.lines))
        if path is not None:
            self._record("mxbi_report", path)
        if not report.passed:
            msg = [
                f"mxbi: the batch-invariance check of {report.subject} did not pass "
                f"(the CLI would exit {report.exit_code})",
                "",
                str(report).rstrip("\n"),
                "",
                report.markdown().rstrip("\n"),
            ]
            explanation = self._explain(fn, report)
            if explanation:
                msg += ["", "explanation:", explanation.rstrip("\n")]
            if path is not None:
                msg += ["", f"JSON report: {path}"]
            pytest.fail("\n".join(msg), pytrace=False)
        return report

    def fuzz(self, fn: Any, **kwargs: Any) -> Any:
        """Runs :func:`mxbi.fuzz`; fails the test with the minimal failing
        case (its setting, the explanation and the case file) if it finds one."""
        import mxbi

        result = mxbi.fuzz(fn, **kwargs)
        self._record("mxbi_fuzz", f"seed {result.seed}, {result.cases_tried} cases")
        f = result.failure
        if f is not None:
            msg = [
                f"mxbi: fuzzing {result.subject} found a batch-invariance failure "
                f"(seed {result.seed}, {result.cases_tried} cases)",
                f"minimal case: {f.describe}",
                *f.explanation,
                "",
                f.case_json.rstrip("\n"),
            ]
            pytest.fail("\n".join(msg), pytrace=False)
        return result

    def locate(self, model: Any, make_inputs: Any, **kwargs: Any) -> Any:
        """Runs :func:`mxbi.torch.locate`; fails the test with the report
        (root causes, their orders and fixes, the op table) unless the
        program is batch-invariant. The JSON report goes to ``--mxbi-report``."""
        import mxbi.torch

        report = mxbi.torch.locate(model, make_inputs, **kwargs)
        self.reports.append(report)
        path = None
        if self.report_dir:
            os.makedirs(self.report_dir, exist_ok=True)
            n = len(self.reports)
            base = _file_name(self._request.node.nodeid)
            path = os.path.join(self.report_dir, f"{base}-locate.json" if n == 1 else f"{base}-locate-{n}.json")
            report.write_json(path)
            self._record("mxbi_report", path)
        self._record("mxbi_locate", report.summary_line())
        if not report.invariant:
            msg = ["mxbi: " + report.summary_line(), "", str(report), "", report.markdown().rstrip("\n")]
            if path is not None:
                msg += ["", f"JSON report: {path}"]
            pytest.fail("\n".join(msg), pytrace=False)
        return report

    def _explain(self, fn: Any, report: Any) -> Optional[str]:
        """The report's explanations name each failing family's orders; only
        when a side is not nameable is the kernel probed (``reveal``)."""
        if not self.explain or not any(c.verdict == "BI_FAIL" for c in report.cells):
            return None
        named = lambda s: s is not None and s.get("order") is not None  # noqa: E731
        if report.explanations and all(named(e.base) and named(e.variant) for e in report.explanations):
            return None
        import mxbi

        try:
            return mxbi.explain.explain_cell(fn, report)
        except Exception as e:  # the verdict stands; say why there is no explanation
            return f"(no explanation: {type(e).__name__}: {e})"

    def _write(self, report: Any) -> Optional[str]:
        if not self.report_dir:
            return None
        os.makedirs(self.report_dir, exist_ok=True)
        base = _file_name(self._request.node.nodeid)
        n = len(self.reports)
        name = f"{base}.json" if n == 1 else f"{base}-{n}.json"
        path = os.path.join(self.report_dir, name)
        report.write_json(path)
        return path


@pytest.fixture
def mxbi_bi(request: Any) -> BiChecker:
    """Batch-invariance checks inside a test: ``mxbi_bi.check(fn, families=[...], k=..., n=...)``,
    ``mxbi_bi.fuzz(fn)``, ``mxbi_bi.locate(model, make_inputs, batch_sizes=[...])``."""
    return BiChecker(request)
