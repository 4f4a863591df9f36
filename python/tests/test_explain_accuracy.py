"""The explainer and the accuracy verdicts through the Python API, on numpy
kernels with known orders, and against the CLI's output."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mxbi
from conftest import draw, muladd, muladd_split, run_cli, split_k_by_m


def test_reveal_recovers_the_order_of_a_numpy_kernel():
    r = mxbi.reveal(muladd, 4, 96, 6)
    assert r.order == "muladd" and r.disagreements == 0 and r.launches > 0
    assert "order: muladd" in str(r)
    assert json.loads(r.to_json())["order"] == "muladd"
    split = mxbi.reveal(lambda a, b: muladd_split(a, b, 4), 4, 96, 6)
    assert split.order == "muladd;split=4"
    # the kernel that picks its split by M shows both sides of its boundary
    assert mxbi.reveal(split_k_by_m, 4, 96, 6).order == "muladd"
    assert mxbi.reveal(split_k_by_m, 5, 96, 6).order == "muladd;split=4"
    assert mxbi.reveal("model:fma;split=4", 4, 96, 6).order == "fma;split=4"


def test_a_callable_keeps_the_inputs_it_holds_on_to():
    # the native side refills the last call's arrays only when nothing
    # else refers to them: arrays a callable kept keep their values, and
    # the calls after them still get the right inputs (the order is found)
    kept = []

    def keeping(a, b):
        if len(kept) < 3:
            kept.append((a, a.copy(), b, b.copy()))
        return muladd(a, b)

    r = mxbi.reveal(keeping, 4, 96, 6)
    assert r.order == "muladd" and r.launches > 3
    assert len(kept) == 3
    for a, a0, b, b0 in kept:
        assert np.array_equal(a, a0) and np.array_equal(b, b0)
    # distinct calls got distinct launches (the kept arrays were not reused)
    assert not np.array_equal(kept[0][3], kept[1][3])


class Buffered:
    """A callable with kept input buffers (the protocol of
    ``mxbi.torch.on_device``): ``_mxbi_input_buffer(which, shape)`` hands
    out the buffer the checker writes the operand into, or None."""

    def __init__(self, only=("a", "b"), make=None):
        self.only, self.held, self.calls, self.asked = only, {}, [], []
        self.make = make or (lambda shape: np.zeros(shape, np.float32))

    def _mxbi_input_buffer(self, which, shape):
        self.asked.append((which, shape))
        if which not in self.only:
            return None
        if which not in self.held or self.held[which].shape != tuple(shape):
            self.held[which] = self.make(shape)
        return self.held[which]

    def __call__(self, a, b):
        self.calls.append((a is self.held.get("a"), b is self.held.get("b")))
        return muladd(a, b)


def test_a_callable_s_own_input_buffers_are_written_in_place():
    # both operands, only B (A of a GEMV goes in an array of mxbi's own), none
    for only, want in [(("a", "b"), (True, True)), (("b",), (False, True)), ((), (False, False))]:
        fn = Buffered(only)
        r = mxbi.reveal(fn, 4, 96, 6)
        assert r.order == "muladd" and r.disagreements == 0, only
        assert set(fn.calls) == {want}, only
        assert len(fn.asked) == 2 * r.launches and fn.asked[:2] == [("a", (4, 96)), ("b", (96, 6))]
    # a check runs through it too, and a buffer of the wrong kind is one clear error
    assert mxbi.bi.check(Buffered(), families=["batch"], k=32, n=3, m=[1, 5]).cells
    for make, why in [
        (lambda s: np.zeros(s, np.float64), "returned something else"),
        (lambda s: np.zeros((s[0] + 1, s[1]), np.float32), "returned another shape"),
        (lambda s: np.zeros((s[1], s[0]), np.float32).T, "returned a non-contiguous array"),
    ]:
        with pytest.raises(mxbi.MxbiError, match=why):
            mxbi.reveal(Buffered(make=make), 4, 96, 6)
    ro = np.zeros((4, 96), np.float32)
    ro.flags.writeable = False
    with pytest.raises(mxbi.MxbiError, match="not writable"):
        mxbi.reveal(Buffered(make=lambda s: ro if s == (4, 96) else np.zeros(s, np.float32)), 4, 96, 6)


def test_large_operands_are_copied_in_parallel_and_left_for_the_next_reveal():
    # B of 2048 x 2048 float32 (16 MiB) is copied into the callable's array
    # in parallel chunks, and the arrays a reveal's subject leaves are taken
    # by the next reveal's: both reveals find the order (every launch got
    # its inputs), and the second one's first call gets the array the first
    # one's last call had
    import weakref

    calls = []

    def recording(a, b):
        calls.append(weakref.ref(b))
        return muladd(a, b)

    first = mxbi.reveal(recording, 1, 2048, 2048)
    last_of_first = calls[-1]
    second = mxbi.reveal(recording, 1, 2048, 2048)
    assert first.order == second.order == "muladd" and first.disagreements == second.disagreements == 0
    assert calls[len(calls) - second.launches]() is last_of_first() is not None


def test_diverge_and_the_explanation_of_a_failing_cell():
    d = mxbi.diverge("muladd", "muladd;split=4", 96, m_left=1, m_right=5)
    assert d.text.startswith("muladd vs muladd;split=4 (K = 96):")
    assert any("run muladd;split=4 for every M" in f for f in d.fixes)
    assert mxbi.diverge("fma", "fma", 16).text == "fma and fma are the same tree for K = 16"
    report = mxbi.bi.check(split_k_by_m, families=["batch"], k=96, n=6, m=[1, 3, 5])
    text = mxbi.explain.explain_cell(split_k_by_m, report)
    assert text.startswith("batch/m=5/k=96/n=6/row=0: at M=1 the kernel runs muladd; at M=5 it runs muladd;split=4")
    assert "mechanism: the split-K changes" in text


def test_reveal_bad_input():
    with pytest.raises(mxbi.MxbiError, match="reveal needs M >= 1, N >= 1 and K >= 2"):
        mxbi.reveal(muladd, 4, 1, 6)


def test_accuracy_matches_the_cli(tmp_path):
    a, b = draw((8, 96), 41), draw((96, 6), 42)
    out = mxbi.gemm(a, b, order="fma;split=4")
    for name, x in dict(a=a, b=b, out=out).items():
        np.save(tmp_path / f"{name}.npy", x)
    for standard in ["atk", "msprobe", "assert-close"]:
        p = run_cli(["accuracy", "--actual", "out.npy", "--a", "a.npy", "--b", "b.npy", "--subject", "model:fma",
                     "--standard", standard], tmp_path, check=False)
        r = mxbi.accuracy(out, a=a, b=b, benchmark="model:fma", standard=standard)
        assert str(r) == p.stdout
        assert (p.returncode == 0) == r.passed
        pj = run_cli(["accuracy", "--actual", "out.npy", "--a", "a.npy", "--b", "b.npy", "--subject", "model:fma",
                      "--standard", standard, "--json"], tmp_path, check=False)
        assert r.to_json() + "\n" == pj.stdout
    # a callable benchmark that is the model gives the model's report
    r1 = mxbi.accuracy(out, a=a, b=b, benchmark=muladd)
    r2 = mxbi.accuracy(out, a=a, b=b, benchmark="model:muladd")
    assert r1.to_json() == r2.to_json()
    # a given golden and benchmark
    g = mxbi.gemm(a, b, order="fma").astype(np.float64)
    assert mxbi.accuracy(out, golden=g, benchmark=out, dtype="f32").passed


def test_accuracy_bad_input():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(mxbi.MxbiError, match="a golden is needed"):
        mxbi.accuracy(x)
    with pytest.raises(mxbi.MxbiError, match="unknown standard 'nope'"):
        mxbi.accuracy(x, golden=x, standard="nope")
    with pytest.raises(mxbi.MxbiError, match=r"shape mismatch: the golden is \[3\]"):
        mxbi.accuracy(x, golden=np.ones(3))
    with pytest.raises(mxbi.MxbiError, match="int64 values need dtype="):
        mxbi.accuracy(np.ones(2, np.int64), golden=np.ones(2))


def test_a_tree_no_order_names_points_to_its_listing():
    # pairs (k, 15 - k) first, then the pairs' sums in a chain: no order
    # of the family has this tree; the display names the attribute that
    # holds it, and that attribute does
    def folded(a, b):
        p = a[:, :, None].astype(np.float32) * b[None, :, :].astype(np.float32)
        pairs = p[:, :8, :] + p[:, 15:7:-1, :]
        acc = pairs[:, 0, :].copy()
        for i in range(1, 8):
            acc = acc + pairs[:, i, :]
        return acc.astype(np.float32)

    r = mxbi.reveal(folded, 1, 16, 8)
    assert r.order is None and r.disagreements == 0
    assert "Python: revealed.shape)" in str(r)
    assert r.shape.splitlines()[0] == "n0 = sum(k0, k15)"
    assert r.shape.splitlines()[-1].startswith("root = ")


def test_reveal_says_which_spellings_cut_the_same_parts_and_what_wide_nodes_cost():
    # K = 384 in 3 parts: 128 k each whether or not they start on a tile
    r = mxbi.reveal("model:mma(k=16,f=25);split=3;align=128;out=bf16", 1, 384, 64, input="bf16")
    assert r.order == "mma(k=16,f=25);split=3;out=bf16"
    # 256 would cut 256, 128 and 0 k
    assert r.same_parts == [
        "mma(k=16,f=25);split=3;align=32;out=bf16",
        "mma(k=16,f=25);split=3;align=64;out=bf16",
        "mma(k=16,f=25);split=3;align=128;out=bf16",
    ]
    assert "split parts that start elsewhere cut the same parts" in str(r)
    # three parts of 8 fused nodes: 16 products first, then 16 and the running sum
    assert r.sibling_pairs == 3 * (120 + 7 * 136)
    binary = mxbi.reveal("model:fma;split=4", 4, 96, 6)
    assert binary.same_parts == [] and binary.sibling_pairs == 0
