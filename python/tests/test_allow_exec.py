"""Case files are data, not commands (docs/BI.md, "Case files are data:
--allow-exec"): ``check_case`` on a case whose own subject is ``exec:CMD``
runs CMD only with ``allow_exec=True`` or ``MXBI_ALLOW_EXEC=1``; otherwise
it raises ``MxbiError`` naming the command, and nothing runs. The command
creates a marker file before it starts a working runner."""

from __future__ import annotations

import json
import sys

import pytest

import mxbi
from mxbi import _mxbi
from conftest import ROOT

RUNNER = ROOT / "tests" / "runners" / "stdlib_runner.py"


def marking_case() -> str:
    subject = f"exec:touch ran; exec {sys.executable} '{RUNNER}' ok"
    return json.dumps(
        {"schema": "mxbi-bi-case/1", "subject": subject, "families": ["content"], "m": [1, 2], "k": 64, "n": 16}
    )


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MXBI_ALLOW_EXEC", raising=False)
    return tmp_path


@pytest.mark.parametrize("env", [None, "0", "yes"])
def test_a_case_s_exec_command_is_refused_without_allow_exec(here, monkeypatch, env):
    if env is not None:
        monkeypatch.setenv("MXBI_ALLOW_EXEC", env)
    with pytest.raises(mxbi.MxbiError) as e:
        _mxbi.check_case(marking_case())
    msg = str(e.value)
    assert msg.startswith("case: subject exec:touch ran; exec "), msg
    assert msg.endswith("would run a command; pass allow_exec=True (or set MXBI_ALLOW_EXEC=1) to allow it"), msg
    assert "\n" not in msg
    assert not (here / "ran").exists()


def test_allow_exec_runs_it(here):
    raw = _mxbi.check_case(marking_case(), allow_exec=True)
    assert (here / "ran").exists()
    assert raw.exit_code() == 0


def test_the_environment_variable_runs_it(here, monkeypatch):
    monkeypatch.setenv("MXBI_ALLOW_EXEC", "1")
    raw = _mxbi.check_case(marking_case())
    assert (here / "ran").exists()
    assert raw.exit_code() == 0


def test_a_subject_given_by_the_caller_is_the_caller_s_own(here):
    # the case's command is not run: the caller's subject replaces it
    raw = _mxbi.check_case(marking_case(), "model:muladd")
    assert not (here / "ran").exists()
    assert raw.exit_code() == 0
