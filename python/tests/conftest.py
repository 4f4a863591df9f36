"""Shared helpers of the Python binding's tests: numpy subjects with known
orders and the `mxbi` command for byte comparisons."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import List, Sequence

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def muladd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`model:muladd` in float32: for every output, acc = +0, then
    acc = fl(acc + fl(a[i, k] * b[k, j])) for k ascending. numpy's float32
    multiply and add are separate, correctly rounded operations."""
    m, k = a.shape
    acc = np.zeros((m, b.shape[1]), dtype=np.float32)
    for kk in range(k):
        acc = acc + a[:, kk : kk + 1] * b[kk : kk + 1, :]
    return acc


def muladd_split(a: np.ndarray, b: np.ndarray, parts: int) -> np.ndarray:
    """`model:muladd;split=S`: K cut into S contiguous parts of ceil(K/S),
    each a muladd chain from +0, the partial sums added serially."""
    k = a.shape[1]
    step = -(-k // parts)
    partials = [muladd(a[:, p * step : (p + 1) * step], b[p * step : (p + 1) * step, :]) for p in range(parts)]
    total = partials[0]
    for p in partials[1:]:
        total = total + p
    return total


def split_k_by_m(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A kernel that picks its split-K by batch size, as tuned GEMMs do:
    plain muladd up to M = 4 rows, split=4 above. Not batch-invariant."""
    return muladd(a, b) if a.shape[0] <= 4 else muladd_split(a, b, 4)


#: the dispatch table that describes `split_k_by_m` to the CLI
SPLIT_K_BY_M_TABLE = '{"dispatch": [{"m_max": 4, "order": "muladd"}, {"order": "muladd;split=4"}]}'


def mxbi_bin() -> List[str]:
    """The `mxbi` command: $MXBI_BIN, else the repository's release build
    (built with cargo when it is missing)."""
    env = os.environ.get("MXBI_BIN")
    if env:
        return [env]
    exe = ROOT / "target" / "release" / "mxbi"
    if not exe.exists():
        cargo = shutil.which("cargo")
        if cargo is None:
            pytest.fail("no mxbi binary: set MXBI_BIN or install cargo")
        subprocess.run([cargo, "build", "--release", "--bin", "mxbi"], cwd=ROOT, check=True)
    return [str(exe)]


def run_cli(args: Sequence[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(mxbi_bin() + list(args), cwd=cwd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"mxbi {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p


def bits(x: np.ndarray) -> bytes:
    """The array's bytes, with its dtype and shape: equal means byte-equal."""
    return str((x.dtype.str, x.shape)).encode() + np.ascontiguousarray(x).tobytes()


pytest_plugins = ["pytester"]


def draw(shape: Sequence[int], seed: int) -> np.ndarray:
    """float32 values with random sign, significand and exponents within
    +-8 of 1 (as the checker draws), so that the order of additions shows."""
    r = np.random.default_rng(seed)
    sign = r.integers(0, 2, size=shape, dtype=np.uint32) << 31
    exp = r.integers(127 - 8, 127 + 9, size=shape, dtype=np.uint32) << 23
    frac = r.integers(0, 1 << 23, size=shape, dtype=np.uint32)
    return (sign | exp | frac).view(np.float32)
