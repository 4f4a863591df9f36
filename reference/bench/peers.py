"""The peers that `paired.py` times against mxbi (see docs/PERFORMANCE.md).

Each peer is one call of a Python library on the same input as mxbi (the
f32 array `mxbi bench --serve` writes out), with the same output
convention as its mxbi case:

  ml_dtypes_e4m3              the ml_dtypes f32 -> float8_e4m3fn cast (the
                              loop behind `x.astype(ml_dtypes.float8_e4m3fn)`)
                              writing into a reused array (`np.copyto`)
  numpy_mx_e4m3_floor         a vectorised numpy + ml_dtypes MXFP8 quantizer
                              (OCP FLOOR scale, saturate, RNE), every
                              intermediate and output in reused arrays
  numpy_mx_e4m3_floor_alloc   the same quantizer written the plain numpy way
                              (every step allocates its result)
  torchao_to_mx_{floor,rceil} torchao.prototype.mx_formats.mx_tensor.to_mx on
                              a CPU tensor (allocates; optional: only where
                              torchao imports)
  numpy_matmul_2048           numpy `a @ bt.T` (the BLAS sgemm numpy links)

Importing needs numpy and ml_dtypes; torch/torchao and threadpoolctl are
optional (without threadpoolctl the BLAS peer cannot be limited to one
thread and its one-thread row is skipped).
"""
import os

import numpy as np
import ml_dtypes

E4M3_EMAX = 8
E4M3_MAX = np.float32(448.0)
BLOCK = 32
GEMM = 2048


def mx_numpy(x, block=BLOCK):
    """MXFP8-e4m3 (OCP FLOOR) in plain vectorised numpy + ml_dtypes.

    amax per block; exponent from the bits of amax (not a float log2);
    E = floor(log2 amax) - emax, clamped to [-127, 127]; NaN/Inf blocks get
    scale 0xFF and code 0x7F; elements x * 2^-E clamped to +-448 and cast
    (RNE) with ml_dtypes. Returns (codes uint8 same shape, scales uint8
    [..., nblocks]). Every step allocates its result.
    """
    xb = x.reshape(*x.shape[:-1], x.shape[-1] // block, block)
    amax = np.abs(xb).max(axis=-1)  # NaN propagates
    e_field = (amax.view(np.uint32) >> np.uint32(23)).astype(np.int32)
    # floor(log2 amax) from the bits (an f32-subnormal amax clamps to -127 anyway)
    e = np.where(e_field == 0, -127, e_field - 127) - E4M3_EMAX
    e = np.clip(e, -127, 127)
    nonfinite = e_field == 255
    scales = np.where(nonfinite, 255, e + 127).astype(np.uint8)
    # 2^-E as f32 (2^127 .. 2^-127, the last one subnormal; exact via ldexp)
    inv = np.ldexp(np.float32(1.0), (-e).astype(np.int32)).astype(np.float32)
    y = xb * inv[..., None]
    np.clip(y, -E4M3_MAX, E4M3_MAX, out=y)
    codes = y.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    codes[nonfinite] = 0x7F
    return codes.reshape(x.shape), scales


class MxNumpyInto:
    """`mx_numpy` with every array it writes allocated once, here, and
    reused by each call (the `out=` forms of the same numpy operations), so
    that, like `mx::quantize_into`, a call allocates no large array and
    takes no first-touch page faults. Same bytes as `mx_numpy` (checked by
    paired.py)."""

    def __init__(self, shape, block=BLOCK):
        nb = tuple(shape[:-1]) + (shape[-1] // block,)
        self.blocks = nb + (block,)
        self.tmp = np.empty(self.blocks, np.float32)
        self.amax = np.empty(nb, np.float32)
        self.e_field = np.empty(nb, np.int32)
        self.e = np.empty(nb, np.int32)
        self.neg_e = np.empty(nb, np.int32)
        self.mask = np.empty(nb, bool)
        self.inv = np.empty(nb, np.float32)
        self.scales = np.empty(nb, np.uint8)
        self.codes = np.empty(self.blocks, ml_dtypes.float8_e4m3fn)
        self.codes_u8 = self.codes.view(np.uint8)
        for a in (self.tmp, self.amax, self.e_field, self.e, self.neg_e, self.mask, self.inv, self.scales):
            a.fill(0)  # first touch here, not in a timed call
        self.codes_u8.fill(0)

    def __call__(self, x):
        xb = x.reshape(self.blocks)
        np.abs(xb, out=self.tmp)
        np.max(self.tmp, axis=-1, out=self.amax)
        np.right_shift(self.amax.view(np.uint32), np.uint32(23), out=self.e_field, casting="unsafe")
        e = self.e
        np.subtract(self.e_field, 127 + E4M3_EMAX, out=e)
        np.equal(self.e_field, 0, out=self.mask)
        e[self.mask] = -127 - E4M3_EMAX
        np.clip(e, -127, 127, out=e)
        np.equal(self.e_field, 255, out=self.mask)  # non-finite blocks
        np.add(e, 127, out=self.scales, casting="unsafe")
        self.scales[self.mask] = 255
        np.negative(e, out=self.neg_e)
        np.ldexp(np.float32(1.0), self.neg_e, out=self.inv)
        np.multiply(xb, self.inv[..., None], out=self.tmp)
        np.clip(self.tmp, -E4M3_MAX, E4M3_MAX, out=self.tmp)
        np.copyto(self.codes, self.tmp, casting="unsafe")
        self.codes_u8[self.mask] = 0x7F
        return self.codes_u8.reshape(x.shape), self.scales


class Peers:
    """The peers on one input `x` (f32, shape [rows, cols]); `gemm_a`,
    `gemm_bt` are the GEMM operands ([2048, 2048] each, B given as [N, K])."""

    def __init__(self, x, gemm_a, gemm_bt):
        self.x = x
        self.cast_out = np.zeros(x.shape, ml_dtypes.float8_e4m3fn)
        self.mx_into = MxNumpyInto(x.shape)
        self.gemm_a, self.gemm_bt = gemm_a, gemm_bt
        self.versions = {"numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__}
        self.skipped = {}
        try:
            import threadpoolctl

            self.threadpoolctl = threadpoolctl
            self.blas = [
                {k: d.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
                for d in threadpoolctl.threadpool_info()
                if d.get("user_api") == "blas"
            ]
            self.versions["threadpoolctl"] = threadpoolctl.__version__
        except ImportError:
            self.threadpoolctl = None
            self.blas = []
            self.skipped["threadpoolctl"] = "not importable: numpy's BLAS runs on its default threads only"
        self.torch = None
        try:
            import torch
            import torchao
            from torchao.prototype.mx_formats.config import ScaleCalculationMode
            from torchao.prototype.mx_formats.mx_tensor import to_mx
        except Exception as e:  # noqa: BLE001 (any import failure means: no torchao peer)
            self.skipped["torchao"] = f"not importable: {type(e).__name__}: {e}"
        else:
            self.torch, self.to_mx, self.mode = torch, to_mx, ScaleCalculationMode
            self.xt = torch.from_numpy(x)
            self.versions["torch"] = torch.__version__
            self.versions["torchao"] = torchao.__version__

    def what(self):
        """name -> description of every peer available here."""
        w = {
            "ml_dtypes_e4m3": "ml_dtypes f32 -> float8_e4m3fn cast (np.copyto into a reused array; "
            "the astype loop), 1 thread",
            "numpy_mx_e4m3_floor": "peers.py MxNumpyInto: numpy + ml_dtypes MXFP8 FLOOR quantizer, "
            "every array reused, 1 thread",
            "numpy_mx_e4m3_floor_alloc": "peers.py mx_numpy: the same quantizer, allocating each step, 1 thread",
            "numpy_matmul_2048": "numpy a @ bt.T, f32, 2048^3 (BLAS sgemm)",
        }
        if self.torch is not None:
            for m in ("floor", "rceil"):
                w[f"torchao_to_mx_{m}"] = f"torchao to_mx(x, float8_e4m3fn, 32, {m.upper()}) on CPU (allocates)"
        return w

    def can_run(self, name, threads):
        """None if `name` can run on `threads` threads here, else why not."""
        if name not in self.what():
            return self.skipped.get("torchao", f"unknown peer {name}")
        if name == "numpy_matmul_2048" and self.threadpoolctl is None and threads != os.cpu_count():
            return self.skipped["threadpoolctl"]
        return None

    def setup(self, name, threads):
        """Sets the peer's thread count; returns a context manager to hold
        around its timed calls."""
        if name.startswith("torchao") and self.torch is not None:
            self.torch.set_num_threads(threads)
        if name == "numpy_matmul_2048" and self.threadpoolctl is not None:
            return self.threadpoolctl.threadpool_limits(limits=threads, user_api="blas")
        return _Null()

    def fn(self, name):
        """A no-argument callable: one call of the peer."""
        x = self.x
        if name == "ml_dtypes_e4m3":
            return lambda: np.copyto(self.cast_out, x, casting="unsafe")
        if name == "numpy_mx_e4m3_floor":
            return lambda: self.mx_into(x)
        if name == "numpy_mx_e4m3_floor_alloc":
            return lambda: mx_numpy(x)
        if name == "numpy_matmul_2048":
            a, bt = self.gemm_a, self.gemm_bt
            return lambda: a @ bt.T
        if name.startswith("torchao_to_mx_"):
            torch, m = self.torch, getattr(self.mode, name.rsplit("_", 1)[1].upper())

            def call():
                with torch.no_grad():
                    return self.to_mx(self.xt, torch.float8_e4m3fn, BLOCK, m)

            return call
        raise KeyError(name)

    def outputs(self):
        """name -> output bytes (codes, then scales for MX) of one call of
        each peer whose output convention matches an mxbi case."""
        out = {}
        np.copyto(self.cast_out, self.x, casting="unsafe")
        out["ml_dtypes_e4m3"] = self.cast_out.view(np.uint8).tobytes()
        astype = self.x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8).tobytes()
        out["ml_dtypes_astype_e4m3"] = astype
        c, s = self.mx_into(self.x)
        out["numpy_mx_e4m3_floor"] = c.tobytes() + s.tobytes()
        c, s = mx_numpy(self.x)
        out["numpy_mx_e4m3_floor_alloc"] = c.tobytes() + s.tobytes()
        if self.torch is not None:
            torch = self.torch
            for m in ("floor", "rceil"):
                s, d = self.to_mx(self.xt, torch.float8_e4m3fn, BLOCK, getattr(self.mode, m.upper()))
                codes = d.view(torch.uint8).numpy().tobytes()
                out[f"torchao_to_mx_{m}"] = codes + s.view(torch.uint8).numpy().tobytes()
        return out


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
