"""mxbi.torch: torch kernels as subjects (runs where torch is installed; the
CI machine has no torch, so there it is skipped, never passed vacuously)."""

from __future__ import annotations

import numpy as np
import pytest

import mxbi
from conftest import draw, muladd

torch = pytest.importorskip("torch")


def test_on_device_moves_inputs_and_widens_bf16_outputs_exactly():
    import mxbi.torch as mt

    seen = {}

    def kernel(a, b):
        seen["types"] = (a.dtype, b.dtype, a.device.type)
        return (a.float() @ b.float()).to(torch.bfloat16)

    fn = mt.on_device(kernel, device="cpu", dtype=torch.bfloat16)
    a = mxbi.decode(mxbi.cast(draw((4, 32), 1), "bf16"), "bf16").reshape(4, 32)
    b = mxbi.decode(mxbi.cast(draw((32, 3), 2), "bf16"), "bf16").reshape(32, 3)
    out = fn(a, b)
    assert seen["types"] == (torch.bfloat16, torch.bfloat16, "cpu")
    assert out.dtype == np.float32
    want = (torch.from_numpy(a) @ torch.from_numpy(b)).to(torch.bfloat16)
    assert np.array_equal(out.view(np.uint32), want.view(torch.int16).numpy().astype(np.uint32) << 16)
    r = mxbi.bi.check(fn, families=["repeat"], k=32, n=3, m=[4], input="bf16")
    assert r.subject == "python:test_on_device_moves_inputs_and_widens_bf16_outputs_exactly.<locals>.kernel"


def test_torch_tensors_are_accepted_as_arrays():
    a = torch.from_numpy(draw((3, 16), 3))
    b = torch.from_numpy(draw((16, 2), 4))
    got = mxbi.gemm(a, b, order="muladd")
    assert np.array_equal(got.view(np.uint32), muladd(a.numpy(), b.numpy()).view(np.uint32))
    assert np.array_equal(mxbi.cast(a.to(torch.bfloat16), "bf16"), mxbi.cast(a, "bf16"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the H200 run)")
def test_on_device_cuda_runs_on_the_gpu_and_returns_its_exact_bytes():
    """On a GPU: inputs reach the kernel as CUDA tensors of the asked dtype,
    the output comes back as the GPU's own bytes (compared with the same
    product computed by torch on the GPU, read back by torch), and a
    batch-variant check of the GPU kernel runs through the subject."""
    import mxbi.torch as mt

    seen = {}

    def kernel(a, b):
        seen["types"] = (a.dtype, b.dtype, a.device.type)
        return a @ b

    fn = mt.on_device(kernel, device="cuda", dtype=torch.bfloat16)
    a = mxbi.decode(mxbi.cast(draw((64, 512), 5), "bf16"), "bf16").reshape(64, 512)
    b = mxbi.decode(mxbi.cast(draw((512, 256), 6), "bf16"), "bf16").reshape(512, 256)
    out = fn(a, b)
    assert seen["types"] == (torch.bfloat16, torch.bfloat16, "cuda")
    want = torch.from_numpy(a).cuda().bfloat16() @ torch.from_numpy(b).cuda().bfloat16()
    want_bits = want.view(torch.int16).cpu().numpy().astype(np.uint16).astype(np.uint32) << 16
    assert np.array_equal(out.view(np.uint32), want_bits)
    r = mxbi.bi.check(fn, families=["repeat", "batch"], k=512, n=256, m=[1, 64, 65], input="bf16")
    assert r.subject.endswith("kernel")
    assert r.cells, "the check ran no cell"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the H200 run)")
def test_on_device_input_buffers_are_its_pinned_uploads():
    """On a GPU: an operand of 1 MiB or more is handed out as the wrapper's
    pinned buffer, goes up without a copy when passed back, and a reveal
    writing into it finds the same tree as one through arrays of its own."""
    import mxbi.torch as mt

    fn = mt.on_device(lambda a, b: a @ b, device="cuda")
    assert fn._mxbi_input_buffer("a", (1, 512)) is None  # 2 KiB: no buffer
    assert fn._mxbi_input_buffer("c", (512, 512)) is None
    buf = fn._mxbi_input_buffer("b", (512, 512))
    assert buf.dtype == np.float32 and buf.shape == (512, 512) and buf.flags.c_contiguous
    assert fn._mxbi_input_buffer("b", (512, 512)) is buf  # kept
    a, b = draw((3, 512), 7), draw((512, 512), 8)
    want = (torch.from_numpy(a).cuda() @ torch.from_numpy(b).cuda()).cpu().numpy()
    for rounds in range(3):
        fn._mxbi_input_buffer("b", (512, 512))[...] = b
        assert np.array_equal(fn(a, buf).view(np.uint32), want.view(np.uint32))
        fn._mxbi_input_buffer("b", (512, 512))[...] = 0.0  # not an upload of old values
        assert not fn(a, buf).any()
        assert np.array_equal(fn(a, b).view(np.uint32), want.view(np.uint32))  # another array: copied
    own = mxbi.reveal(fn, 1, 512, 512)
    def pageable(x, y):
        return (torch.from_numpy(x).cuda() @ torch.from_numpy(y).cuda()).cpu().numpy()

    plain = mxbi.reveal(pageable, 1, 512, 512)
    assert own.disagreements == plain.disagreements == 0 and own.launches > 1
    assert own.shape == plain.shape and own.order == plain.order


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the H200 run)")
def test_on_device_small_operands_go_up_again_only_when_changed():
    """On a GPU: a small operand with the bytes of the last call is the last
    call's tensor again; other bytes (-0.0 for 0.0 included), or a tensor
    the kernel changed in place, go up again."""
    import mxbi.torch as mt

    seen = []

    def kernel(a, b):
        seen.append(a.data_ptr())
        out = a @ b
        if bump[0]:
            a.add_(1.0)  # in place, after use
        return out

    bump = [False]
    fn = mt.on_device(kernel, device="cuda")
    a, b = draw((2, 64), 9), draw((64, 8), 10)
    want = (torch.from_numpy(a).cuda() @ torch.from_numpy(b).cuda()).cpu().numpy()
    for _ in range(3):
        assert np.array_equal(fn(a.copy(), b).view(np.uint32), want.view(np.uint32))
    assert len(set(seen)) == 1  # uploaded once
    z = a.copy()
    z[0, 0] = -0.0
    a0 = a.copy()
    a0[0, 0] = 0.0
    fn(a0, b)
    fn(z, b)  # -0.0: other bytes, uploaded
    got = fn(z, b)
    zb = (torch.from_numpy(z).cuda() @ torch.from_numpy(b).cuda()).cpu().numpy()
    assert np.array_equal(got.view(np.uint32), zb.view(np.uint32))
    assert len(set(seen[3:])) == 2
    bump[0] = True
    fn(a, b)  # changes its A in place
    bump[0] = False
    assert np.array_equal(fn(a, b).view(np.uint32), want.view(np.uint32))
