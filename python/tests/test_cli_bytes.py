"""The same inputs give the same bytes through Python and through the `mxbi`
command, and the same one-line error messages."""

from __future__ import annotations

import numpy as np
import pytest

import mxbi
from conftest import bits, draw, run_cli


def test_cast_quantize_dequantize_gemm_match_the_cli(tmp_path):
    x = draw((8, 64), 21)
    np.save(tmp_path / "x.npy", x)
    run_cli(["cast", "--to", "e4m3", "--preset", "nvidia", "x.npy", "c.npy"], tmp_path)
    assert bits(np.load(tmp_path / "c.npy")) == bits(mxbi.cast(x, "e4m3", preset="nvidia"))
    run_cli(["cast", "--to", "bf16", "--round", "stochastic", "--seed", "5", "--sr-bits", "8", "x.npy", "h.npy"], tmp_path)
    assert bits(np.load(tmp_path / "h.npy")) == bits(mxbi.cast(x, "bf16", round="stochastic", seed=5, sr_bits=8))
    run_cli(["decode", "--from", "e4m3", "c.npy", "d.npy"], tmp_path)
    assert bits(np.load(tmp_path / "d.npy")) == bits(mxbi.decode(np.load(tmp_path / "c.npy"), "e4m3"))

    for args, kw in [
        (["--format", "mxfp8-e4m3", "--preset", "nvidia"], dict(format="mxfp8-e4m3", preset="nvidia")),
        (["--format", "mxfp4-e2m1", "--axis", "0", "--block", "4"], dict(format="mxfp4-e2m1", axis=0, block=4)),
        (["--format", "mxint8", "--preset", "microxcaling", "--scale-layout", "swizzled-128x4"],
         dict(format="mxint8", preset="microxcaling", scale_layout="swizzled-128x4")),
    ]:
        run_cli(["quantize", *args, "x.npy", "--codes", "qc.npy", "--scales", "qs.npy"], tmp_path)
        codes, scales = mxbi.quantize(x, **kw)
        assert bits(np.load(tmp_path / "qc.npy")) == bits(codes)
        assert bits(np.load(tmp_path / "qs.npy")) == bits(scales)
        deq = [a for a in args if a not in ("--preset", "nvidia", "microxcaling")]
        run_cli(["dequantize", *deq, "--codes", "qc.npy", "--scales", "qs.npy", "y.npy"], tmp_path)
        kw.pop("preset", None)
        assert bits(np.load(tmp_path / "y.npy")) == bits(mxbi.dequantize(codes, scales, **kw))

    a, b = draw((5, 256), 22), draw((256, 7), 23)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    for order in ["muladd", "fma;split=4;reduce=pairwise", "fma;lanes=8"]:
        run_cli(["gemm", "--a", "a.npy", "--b", "b.npy", "--order", order, "--out", "o.npy"], tmp_path)
        assert bits(np.load(tmp_path / "o.npy")) == bits(mxbi.gemm(a, b, order=order))
    # bf16 inputs for a tensor-core order
    ab = mxbi.decode(mxbi.cast(a, "bf16"), "bf16").reshape(a.shape)
    bb = mxbi.decode(mxbi.cast(b, "bf16"), "bf16").reshape(b.shape)
    np.save(tmp_path / "ab.npy", ab)
    np.save(tmp_path / "bb.npy", bb)
    run_cli(["gemm", "--a", "ab.npy", "--b", "bb.npy", "--order", "hopper-bf16", "--rows", "4,1", "--out", "o.npy"],
            tmp_path)
    assert bits(np.load(tmp_path / "o.npy")) == bits(mxbi.gemm(ab, bb, order="hopper-bf16", rows=[4, 1]))
    # MX operands
    ca, sa = mxbi.quantize(a, "mxfp8-e4m3")
    cb, sb = mxbi.quantize(b, "mxfp8-e4m3", axis=0)
    for name, arr in dict(ca=ca, sa=sa, cb=cb, sb=sb).items():
        np.save(tmp_path / f"{name}.npy", arr)
    run_cli(["gemm", "--a", "ca.npy", "--b", "cb.npy", "--format", "mxfp8-e4m3", "--a-scales", "sa.npy",
             "--b-scales", "sb.npy", "--order", "blackwell-mxf8f6f4", "--out", "o.npy"], tmp_path)
    mx = mxbi.gemm(ca, cb, "blackwell-mxf8f6f4", format="mxfp8-e4m3", a_scales=sa, b_scales=sb)
    assert bits(np.load(tmp_path / "o.npy")) == bits(mx)


def test_order_listing_matches_the_cli(tmp_path):
    spec = "fma;split=4/interleave;ktile=8"
    out = run_cli(["order", spec, "--k", "64"], tmp_path).stdout.splitlines()
    o = mxbi.Order(spec)
    t = o.tree(64)
    assert out[0] == str(o)
    assert out[1] == f"tree for K = 64: {len(t)} nodes"
    assert "\n".join(out[2:]) == str(t)
    full = run_cli(["order", spec, "--k", "64", "--full"], tmp_path).stdout
    assert full.split("\n", 2)[2] == t.listing()
    diff = run_cli(["order", spec, "--k", "64", "--diff", "fma"], tmp_path).stdout
    assert diff.split("\n", 1)[1] == o.diff(mxbi.Order("fma"), 64) + "\n"


@pytest.mark.parametrize(
    "args, call",
    [
        (["gemm", "--a", "a.npy", "--b", "b.npy", "--order", "fma;split=0", "--out", "o.npy"],
         lambda a, b: mxbi.gemm(a, b, "fma;split=0")),
        (["gemm", "--a", "a.npy", "--b", "a.npy", "--order", "fma", "--out", "o.npy"],
         lambda a, b: mxbi.gemm(a, a, "fma")),
        (["quantize", "--format", "mxfp8-e4m3", "a.npy", "--codes", "c.npy", "--scales", "s.npy"],
         lambda a, b: mxbi.quantize(a, "mxfp8-e4m3")),
        (["quantize", "--format", "mxfp8-e4m3", "--axis", "3", "b.npy", "--codes", "c.npy", "--scales", "s.npy"],
         lambda a, b: mxbi.quantize(b, "mxfp8-e4m3", axis=3)),
        (["cast", "--to", "e2m1", "n.npy", "c.npy"], lambda a, b: mxbi.cast(np.float32([1.0, np.nan]), "e2m1")),
        (["bi", "run", "--subject", "model:fma", "--family", "batch", "--k", "0", "--n", "4"],
         lambda a, b: mxbi.bi.check("model:fma", families=["batch"], k=0, n=4)),
        (["bi", "run", "--subject", "model:fma;ktile=0", "--family", "batch", "--k", "8", "--n", "4"],
         lambda a, b: mxbi.bi.check("model:fma;ktile=0", families=["batch"], k=8, n=4)),
        (["bi", "run", "--subject", "dispatch:nope.json", "--family", "batch", "--k", "8", "--n", "4"],
         lambda a, b: mxbi.bi.check("dispatch:nope.json", families=["batch"], k=8, n=4)),
        (["bi", "run", "--subject", "model:fma", "--family", "batch", "--m", "7", "--k", "8", "--n", "4"],
         lambda a, b: mxbi.bi.check("model:fma", families=["batch"], m=[7], k=8, n=4)),
    ],
)
def test_error_messages_are_the_clis(tmp_path, monkeypatch, args, call):
    a, b = draw((3, 33), 31), draw((33, 2), 32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.save(tmp_path / "n.npy", np.float32([1.0, np.nan]))
    p = run_cli(args, tmp_path, check=False)
    assert p.returncode == 2
    monkeypatch.chdir(tmp_path)
    with pytest.raises(mxbi.MxbiError) as e:
        call(a, b)
    assert p.stderr == f"mxbi: error: {e.value}\n"
