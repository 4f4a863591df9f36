"""Formats, casts, MX quantize/dequantize, orders and the emulated GEMM
through the Python API (the numerics are proved in the Rust suite; here:
the data goes through unchanged, against oracles independent of the binding)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mxbi
from conftest import draw, muladd


def test_formats_and_value_tables():
    names = [f.name for f in mxbi.formats()]
    assert names == ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8", "e8m0", "bf16", "f16"]
    e4m3 = {f.name: f for f in mxbi.formats()}["e4m3"]
    assert (e4m3.bits, e4m3.max, e4m3.has_inf, e4m3.has_nan) == (8, 448.0, False, True)
    codes, values = mxbi.value_table("e2m1")
    assert codes.dtype == np.uint16 and values.dtype == np.float64
    # the OCP FP4 E2M1 values, written out
    assert values[:8].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert values[8:].tolist() == [-0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def test_cast_round_trips_every_value_and_ties_go_to_even():
    codes, values = mxbi.value_table("e4m3")
    finite = np.isfinite(values) & (np.abs(values) <= 448.0)
    v = values[finite].astype(np.float32)
    c = mxbi.cast(v, "e4m3")
    assert c.dtype == np.uint8 and c.shape == v.shape
    back = mxbi.decode(c, "e4m3")
    assert back.dtype == np.float32
    assert np.array_equal(back.view(np.uint32), v.view(np.uint32))
    # midpoints between neighbouring positive values round to the even code
    pos = np.unique(values[(values > 0) & np.isfinite(values)])
    mids = ((pos[:-1] + pos[1:]) / 2).astype(np.float32)
    assert np.all(mids.astype(np.float64) == (pos[:-1] + pos[1:]) / 2)  # exact in f32
    got = mxbi.decode(mxbi.cast(mids, "e4m3"), "e4m3").astype(np.float64)
    lo, hi = pos[:-1], pos[1:]
    lo_code = mxbi.cast(lo.astype(np.float32), "e4m3")
    want = np.where(lo_code % 2 == 0, lo, hi)
    assert np.array_equal(got, want)


def test_cast_wide_formats_and_policies():
    x = np.array([1.0, -2.5, 3.0e38, np.nan], dtype=np.float32)
    bf = mxbi.cast(x, "bf16")
    assert bf.dtype == np.uint16
    assert bf[:2].tolist() == [0x3F80, 0xC020]
    assert mxbi.cast(np.float32([1000.0]), "e4m3", preset="nvidia").tolist() == [0x7E]  # satfinite
    assert mxbi.cast(np.float32([1000.0]), "e4m3", preset="ml_dtypes").tolist() == [0x7F]  # NaN
    # each ml_dtypes release by its spelling, through the CLI's parser
    sub = np.array([0x00400001, 0x00600000], np.uint32).view(np.float32)
    assert mxbi.cast(sub, "e8m0", preset="ml_dtypes").tolist() == [0x00, 0x01]
    assert mxbi.cast(sub, "e8m0", preset="ml_dtypes@0.7").tolist() == [0x00, 0x01]
    assert mxbi.cast(sub, "e8m0", preset="ml_dtypes@0.6").tolist() == [0x01, 0x01]
    with pytest.raises(mxbi.MxbiError, match=r"expected ml_dtypes or ml_dtypes@0\.7 \(ml_dtypes 0\.7\.0\)"):
        mxbi.cast(sub, "e8m0", preset="ml_dtypes@0.5")
    with pytest.raises(mxbi.MxbiError, match="NaN cannot be represented in e2m1"):
        mxbi.cast(np.float32([np.nan]), "e2m1")
    # f64 input is cast from f64 (no double rounding through f32)
    just_above_tie = np.float64(1.0625) + 2.0**-40  # rounds up in e4m3 only from f64
    assert mxbi.cast(np.float64([just_above_tie]), "e4m3").tolist() == [0x39]
    assert mxbi.cast(np.float32([just_above_tie]), "e4m3").tolist() == [0x38]
    with pytest.raises(mxbi.MxbiError, match="only apply with round='stochastic'"):
        mxbi.cast(x, "e4m3", seed=3)
    s1 = mxbi.cast(np.full(64, 1.03, np.float32), "e4m3", round="stochastic", seed=7)
    s2 = mxbi.cast(np.full(64, 1.03, np.float32), "e4m3", round="stochastic", seed=7)
    assert np.array_equal(s1, s2) and len(set(s1.tolist())) == 2


def test_quantize_dequantize():
    x = draw((4, 64), 1) / 16
    codes, scales = mxbi.quantize(x, format="mxfp8-e4m3", preset="ocp")
    assert codes.dtype == np.uint8 and codes.shape == (4, 64)
    assert scales.dtype == np.uint8 and scales.shape == (4, 2)
    # the OCP FLOOR rule: scale = floor(log2(amax)) - emax(e4m3) = 8, from the bits
    amax = np.abs(x.reshape(4, 2, 32)).max(axis=2)
    e = ((amax.view(np.uint32) >> 23) & 0xFF).astype(np.int64) - 127
    assert np.array_equal(scales.astype(np.int64) - 127, e - 8)
    y = mxbi.dequantize(codes, scales, format="mxfp8-e4m3")
    assert y.dtype == np.float32 and y.shape == x.shape
    # dequantized values are exactly code value x 2^(scale-127)
    _, table = mxbi.value_table("e4m3")
    want = table[codes] * np.exp2(np.repeat(scales.astype(np.float64) - 127, 32, axis=1))
    assert np.array_equal(y.astype(np.float64), want)
    # other axis, block, swizzle
    c0, s0 = mxbi.quantize(x, format="mxfp4-e2m1", axis=0, block=2)
    assert s0.shape == (2, 64)
    cs, ss = mxbi.quantize(x, format="mxfp8-e4m3", scale_layout="swizzled-128x4")
    assert np.array_equal(cs, codes) and ss.ndim == 1
    ys = mxbi.dequantize(cs, ss, format="mxfp8-e4m3", scale_layout="swizzled-128x4")
    assert np.array_equal(ys.view(np.uint32), y.view(np.uint32))
    st = mxbi.quantize_stats(x, "mxfp8-e4m3")
    assert st["elements"] == 256 and st["blocks"] == 8


def test_dequantize_warns_where_f32_is_not_exact():
    # e5m2 max (57344, code 0x7B) times 2^127 is beyond f32
    codes = np.full((1, 32), 0x7B, np.uint8)
    scales = np.array([[254]], np.uint8)
    with pytest.warns(UserWarning, match="32 values are not exactly representable in f32"):
        y = mxbi.dequantize(codes, scales, format="mxfp8-e5m2")
    assert np.isinf(y).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y64 = mxbi.dequantize(codes, scales, format="mxfp8-e5m2", dtype="f64")
    assert (y64 == 57344.0 * 2.0**127).all()


def test_orders_and_trees():
    o = mxbi.Order("fma;split=4/interleave;ktile=64")
    assert str(o) == "fma;ktile=64;split=4/interleave"  # the canonical spelling
    assert mxbi.Order("hopper-bf16").preset == "hopper-bf16"
    assert mxbi.Order("hopper-bf16").input == "bf16"
    assert mxbi.Order("fma").input == "f32"
    assert mxbi.Order("fma") == mxbi.order("fma") and hash(mxbi.Order("fma")) == hash(mxbi.Order("fma"))
    t = mxbi.Order("fma;split=2").tree(4)
    assert len(t) == 7 and t.k == 4
    assert t.listing().splitlines()[-1] == f"root = %{t.root}"
    assert mxbi.Order("fma").diff(mxbi.Order("fma"), 16) is None
    assert mxbi.Order("fma").diff(mxbi.Order("fma;split=2"), 16).startswith("first difference at node")
    assert ("hopper-bf16", "mma(k=16,f=25,in=bf16)") in mxbi.presets()
    with pytest.raises(mxbi.MxbiError, match=r"^order 'fma;split=0': "):
        mxbi.Order("fma;split=0")


def test_gemm_is_the_numpy_muladd_oracle_bit_for_bit():
    a, b = draw((7, 300), 2), draw((300, 5), 3)
    want = muladd(a, b)
    got = mxbi.gemm(a, b, order="muladd")
    assert got.dtype == np.float32 and got.shape == (7, 5)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # the comparison can fail: another order gives other bytes
    assert not np.array_equal(mxbi.gemm(a, b, order="fma").view(np.uint32), want.view(np.uint32))
    rows = mxbi.gemm(a, b, order="muladd", rows=[6, 0])
    assert np.array_equal(rows.view(np.uint32), want[[6, 0]].view(np.uint32))
    nk = mxbi.gemm(a, np.ascontiguousarray(b.T), order="muladd", b_layout="nk")
    assert np.array_equal(nk.view(np.uint32), want.view(np.uint32))
    gen = mxbi.gemm(a, b, order=mxbi.Order("fma;split=4"), generic=True)
    assert np.array_equal(gen.view(np.uint32), mxbi.gemm(a, b, order="fma;split=4").view(np.uint32))
    steps = mxbi.trace(a, b, "muladd", 3, 2)
    assert steps[-1].value == want[3, 2] and steps[-1].bits == f"0x{want[3, 2].view(np.uint32):08x}"


def test_mx_gemm():
    a, b = draw((3, 64), 4), draw((64, 2), 5)
    ca, sa = mxbi.quantize(a, "mxfp8-e4m3")
    cb, sb = mxbi.quantize(b, "mxfp8-e4m3", axis=0)
    c = mxbi.gemm(ca, cb, "fma;scale=block", format="mxfp8-e4m3", a_scales=sa, b_scales=sb)
    assert c.shape == (3, 2) and np.isfinite(c).all()
    with pytest.raises(mxbi.MxbiError, match="MX inputs need a_scales and b_scales"):
        mxbi.gemm(ca, cb, "fma", format="mxfp8-e4m3")


class OnlyArray:
    def __init__(self, x):
        self.x = x

    def __array__(self, dtype=None, copy=None):
        return self.x


class OnlyDlpack:
    def __init__(self, x):
        self.x = x

    def __dlpack__(self, **kw):
        return self.x.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


def test_array_likes():
    a, b = draw((4, 40), 6), draw((40, 3), 7)
    want = mxbi.gemm(a, b, order="muladd").view(np.uint32)
    for wrap in (OnlyArray, OnlyDlpack, lambda x: x.tolist(), lambda x: x.astype(np.float64), np.asfortranarray):
        got = mxbi.gemm(wrap(a), wrap(b), order="muladd")
        assert np.array_equal(got.view(np.uint32), want)
    h = np.float16([1.5, -0.25, 65504.0])
    assert np.array_equal(mxbi.cast(h, "bf16"), mxbi.cast(h.astype(np.float32), "bf16"))


def test_bad_input_raises_mxbi_error():
    x = np.ones((4, 33), np.float32)
    cases = [
        (lambda: mxbi.cast(x, "e9m9"), "unknown element format 'e9m9'"),
        (lambda: mxbi.cast(np.int64([1]), "e4m3"), "expected f32, f16 or bf16 values, got int64"),
        (lambda: mxbi.quantize(x, "mxfp8-e4m3"), "axis length 33 is not a multiple of the block size 32"),
        (lambda: mxbi.quantize(x, "mxfp8-e4m3", block=3), "block size 3 is not a power of two"),
        (lambda: mxbi.quantize(x, "mxfp8-e4m3", axis=5), "axis 5 is out of range for a 2-d array"),
        (lambda: mxbi.quantize(np.float64([0.1] * 32), "mxfp8-e4m3"), "is not exactly representable in f32"),
        (lambda: mxbi.decode(np.uint8([16]), "e2m1"), "code 0x10 is not a valid e2m1 code"),
        (lambda: mxbi.gemm(x, x, "fma"), r"shape mismatch: A is \[4, 33\] but B \(\[K, N\]\) has K = 4"),
        (lambda: mxbi.gemm(x[0], x, "fma"), "a: expected a 2-d array"),
        (lambda: mxbi.gemm(x, x.T, "fma", rows=[9]), "row 9 is out of range"),
        (lambda: mxbi.gemm(x, x.T, "fma", b_layout="kk"), "unknown b_layout 'kk'"),
        (lambda: mxbi.cast(object(), "e4m3"), "x: expected an array"),
        (lambda: mxbi.Order("hopper-bf16").tree(1 << 40), "order"),
    ]
    for f, msg in cases:
        with pytest.raises(mxbi.MxbiError, match=msg):
            f()
    assert issubclass(mxbi.MxbiError, ValueError)
