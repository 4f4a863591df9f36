#!/usr/bin/env python3
"""Exhaustive f32 -> narrow-format cast hashes.

Walks all 2^32 float32 bit patterns in ascending u32 order, in 256 chunks of
2^24 inputs. For chunk i (inputs with bits i*2^24 .. (i+1)*2^24-1, ascending)
the oracle's output codes are laid out in input order as raw bytes:
  * 8/6/4-bit formats: one byte per input, the code in the low bits
    (fp6: 0..63, fp4: 0..15, upper bits zero);
  * bf16/f16: two bytes per input, the u16 code little-endian.
and the line `format<TAB>policy<TAB>chunk_index<TAB>sha256hex` is written,
after comment lines naming the oracle's installed release and the command
(common.release_header).

Usage: exhaustive.py ml_dtypes|torch OUT.tsv [format ...]
       exhaustive.py codes ml_dtypes|torch FORMAT CHUNK OUT.npy   (one chunk's codes)
       exhaustive.py selftest
"""
import hashlib
import sys
import time

import numpy as np

import common as C

CHUNK = 1 << 24
NCHUNK = 256

ML_FORMATS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0", "bf16", "f16"]
TORCH_FORMATS = ["e4m3", "e5m2", "e8m0", "bf16", "f16"]


def ml_caster(fmt):
    import ml_dtypes as md

    dt = {
        "e4m3": md.float8_e4m3fn,
        "e5m2": md.float8_e5m2,
        "e3m2": md.float6_e3m2fn,
        "e2m3": md.float6_e2m3fn,
        "e2m1": md.float4_e2m1fn,
        "e8m0": md.float8_e8m0fnu,
        "bf16": md.bfloat16,
        "f16": np.float16,
    }[fmt]
    wide = fmt in ("bf16", "f16")
    limit = {"e3m2": 64, "e2m3": 64, "e2m1": 16}.get(fmt)

    def cast(f32):
        out = f32.astype(dt)
        if wide:
            return out.view(np.uint16).astype("<u2", copy=False)
        codes = out.view(np.uint8)
        if limit is not None:
            assert int(codes.max()) < limit, (fmt, int(codes.max()))
        return codes

    return "astype", cast


def torch_caster(fmt):
    import torch

    torch.set_num_threads(1)
    dt = {
        "e4m3": torch.float8_e4m3fn,
        "e5m2": torch.float8_e5m2,
        "e8m0": torch.float8_e8m0fnu,
        "bf16": torch.bfloat16,
        "f16": torch.float16,
    }[fmt]
    wide = fmt in ("bf16", "f16")

    def cast(f32):
        out = torch.from_numpy(f32).to(dt)
        if wide:
            return out.view(torch.int16).numpy().view(np.uint16).astype("<u2", copy=False)
        return out.view(torch.uint8).numpy()

    return "to", cast


def chunk_inputs(i):
    return np.arange(i * CHUNK, (i + 1) * CHUNK, dtype=np.uint32).view(np.float32)


def hash_codes(codes):
    return hashlib.sha256(np.ascontiguousarray(codes).tobytes()).hexdigest()


def selftest():
    # Tiny worked example documented in README.md: e4m3 via ml_dtypes on the
    # 4 inputs 0x3f800000 (1.0), 0x43e00000 (448), 0xbf800000 (-1.0),
    # 0x7fc00000 (NaN) -> bytes 38 7e b8 7f.
    _, cast = ml_caster("e4m3")
    x = np.array([0x3F800000, 0x43E00000, 0xBF800000, 0x7FC00000], dtype=np.uint32).view(np.float32)
    c = cast(x)
    assert c.tobytes() == bytes([0x38, 0x7E, 0xB8, 0x7F]), c.tobytes().hex()
    print("e4m3 tiny", c.tobytes().hex(), hash_codes(c))
    _, cast = ml_caster("bf16")
    x = np.array([0x3F800000, 0x3F808000, 0x3F818000], dtype=np.uint32).view(np.float32)
    c = cast(x)
    # 1.0 -> 0x3f80; tie 0x3f808000 -> even 0x3f80; tie 0x3f818000 -> 0x3f82
    assert c.tobytes() == bytes([0x80, 0x3F, 0x80, 0x3F, 0x82, 0x3F]), c.tobytes().hex()
    print("bf16 tiny", c.tobytes().hex(), hash_codes(c))
    # chunk layout check: chunk 127 starts at 0x7f000000
    assert chunk_inputs(127)[:1].view(np.uint32)[0] == 0x7F000000


def main():
    if sys.argv[1] == "selftest":
        selftest()
        return
    if sys.argv[1] == "codes":
        oracle, fmt, i, out = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
        _, cast = (ml_caster if oracle == "ml_dtypes" else torch_caster)(fmt)
        np.save(out, cast(chunk_inputs(i)))
        return
    oracle, out = sys.argv[1], sys.argv[2]
    fmts = sys.argv[3:] or (ML_FORMATS if oracle == "ml_dtypes" else TORCH_FORMATS)
    mk = ml_caster if oracle == "ml_dtypes" else torch_caster
    with open(out + ".tmp", "w") as f:
        f.writelines(C.release_header([oracle], sys.argv))
        for fmt in fmts:
            policy, cast = mk(fmt)
            t0 = time.time()
            for i in range(NCHUNK):
                f.write(f"{fmt}\t{policy}\t{i}\t{hash_codes(cast(chunk_inputs(i)))}\n")
            f.flush()
            print(f"{oracle} {fmt} done in {time.time() - t0:.1f}s", flush=True)
    import os

    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
