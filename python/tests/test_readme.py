"""Every Python example of README.md runs, as written.

A ```python block of the README is either a doctest (its lines start with
``>>>``; every such block of the file runs in order in one namespace, in a
fresh folder, with ELLIPSIS) or a pytest file (its first line is
``# test_NAME.py ... run: pytest ARGS``), written to a fresh folder and run
with its own command plus ``-W error``: it must pass, print no warning and,
with ``--junitxml``, carry the plugin's properties. A block that is neither
fails the test: an example nobody runs is an example that rots.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import List, NamedTuple, Tuple

from conftest import ROOT

README = ROOT / "README.md"


class Block(NamedTuple):
    #: the line of README.md the block's first code line is on (1-based)
    line: int
    text: str


def python_blocks(readme: str) -> List[Block]:
    """The ```python blocks of a Markdown text."""
    blocks, lines = [], readme.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            blocks.append(Block(i + 2, "\n".join(lines[i + 1 : j]) + "\n"))
            i = j
        i += 1
    return blocks


def run_doctests(blocks: List[Block], filename: str) -> Tuple[int, List[str]]:
    """Runs the doctest blocks in order in one namespace (the current folder
    is the caller's): (examples run, one report per failing example)."""
    parser = doctest.DocTestParser()
    flags = doctest.ELLIPSIS
    globs: dict = {"__name__": "README"}
    failures: List[str] = []
    ran = 0
    for b in blocks:
        test = parser.get_doctest(b.text, globs, f"{filename}:{b.line}", filename, b.line - 1)
        out: List[str] = []
        runner = doctest.DocTestRunner(optionflags=flags)
        result = runner.run(test, out=out.append, clear_globs=False)
        globs = test.globs  # DocTest copies the namespace: the next block goes on from this one's
        ran += result.attempted
        if result.failed:
            failures.append("".join(out))
    return ran, failures


def file_command(block: Block) -> Tuple[str, List[str]]:
    """A pytest-file block's file name and its command's arguments."""
    m = re.match(r"#\s*(test_\w+\.py)\b.*?\brun:\s*pytest\s+(.*)$", block.text.split("\n", 1)[0])
    assert m, f"README.md:{block.line}: a test file block starts with '# test_NAME.py ... run: pytest ARGS'"
    return m.group(1), shlex.split(m.group(2))


def run_readme(readme: str, where: Path) -> Tuple[int, int, List[str]]:
    """Runs every Python example of ``readme`` inside ``where``: (doctest
    examples run, test files run, failures)."""
    blocks = python_blocks(readme)
    doctests = [b for b in blocks if re.search(r"^>>> ", b.text, re.M)]
    files = [b for b in blocks if b not in doctests and b.text.startswith("# test_")]
    failures = [
        f"README.md:{b.line}: a ```python block that is neither a doctest (>>>) nor a test file (# test_NAME.py)"
        for b in blocks
        if b not in doctests and b not in files
    ]
    doc_dir = where / "doctests"
    doc_dir.mkdir()
    here = Path.cwd()
    try:
        os.chdir(doc_dir)
        ran, failed = run_doctests(doctests, "README.md")
    finally:
        os.chdir(here)
    failures += failed
    for i, b in enumerate(files):
        name, args = file_command(b)
        d = where / f"file{i}"
        d.mkdir()
        (d / name).write_text(b.text)
        p = subprocess.run(
            [sys.executable, "-m", "pytest", *args, "-W", "error", "-p", "no:cacheprovider", name],
            cwd=d, capture_output=True, text=True,
        )
        out = p.stdout + p.stderr
        if p.returncode != 0 or "warnings summary" in out or re.search(r"\d+ warnings? in", out):
            failures.append(f"README.md:{b.line}: pytest {' '.join(args)} exited {p.returncode}:\n{out}")
            continue
        if "--junitxml" in args:
            xml = d / args[args.index("--junitxml") + 1]
            names = {p.get("name", "").split("[")[0] for p in ET.parse(xml).iter("property")}
            if not {"mxbi_summary", "mxbi_failures"} <= names:
                failures.append(f"README.md:{b.line}: {xml.name} lacks the mxbi properties: {sorted(names)}")
    return ran, len(files), failures


def test_every_python_example_of_the_readme_runs(tmp_path):
    ran, files, failures = run_readme(README.read_text(encoding="utf-8"), tmp_path)
    assert not failures, "\n\n".join(failures)
    # the "## Python" section's examples are there (not vacuous)
    assert ran >= 20 and files >= 1, (ran, files)


def test_a_broken_readme_example_fails(tmp_path):
    """The runner fails on a wrong output, on a pytest file that fails, and
    on a block that is neither kind."""
    text = README.read_text(encoding="utf-8")
    wrong = text.replace("('muladd', 'muladd;split=2')", "('muladd', 'muladd;split=4')", 1)
    assert wrong != text
    (tmp_path / "a").mkdir()
    _, _, failures = run_readme(wrong, tmp_path / "a")
    assert len(failures) == 1 and "split=4" in failures[0], failures
    failing_file = text.replace("k=256, n=64, m=[1, 16, 17, 64])", "k=0, n=64)", 1)
    assert failing_file != text
    (tmp_path / "b").mkdir()
    _, _, failures = run_readme(failing_file, tmp_path / "b")
    assert len(failures) == 1 and "exited 1" in failures[0], failures
    (tmp_path / "c").mkdir()
    _, _, failures = run_readme(text + "\n```python\nprint('untested')\n```\n", tmp_path / "c")
    assert len(failures) == 1 and "neither a doctest" in failures[0], failures
