"""gfloat 0.5.2 block quantization, called the way gfloat.quantize_block
does (compute_scale_amax -> vals / scale -> encode_block), but keeping the
codes that encode_block yields (first the E8M0 scale code, then the 32
element codes) instead of decoding them.

in_dtype "f32": vals is a numpy float32 array (so compute_scale_amax runs
log2 in float32 -> the known log2 hazard); "f64": float64 array (exact).
"""
import numpy as np

import gfloat
import gfloat.formats as F

BFI = {
    "mxfp8-e4m3": F.format_info_mxfp8_e4m3,
    "mxfp8-e5m2": F.format_info_mxfp8_e5m2,
    "mxfp6-e3m2": F.format_info_mxfp6_e3m2,
    "mxfp6-e2m3": F.format_info_mxfp6_e2m3,
    "mxfp4-e2m1": F.format_info_mxfp4_e2m1,
}


def gfloat_quantize_block(fmt, bits32, in_dtype="f32"):
    fi = BFI[fmt]
    vals = np.array(bits32, dtype=np.uint32).view(np.float32)
    if in_dtype == "f64":
        vals = vals.astype(np.float64)
    with np.errstate(all="ignore"):
        q_scale = gfloat.compute_scale_amax(fi.etype.emax, vals)
        scaled = vals / q_scale
        enc = list(gfloat.encode_block(fi, q_scale, scaled, gfloat.RoundMode.TiesToEven))
    return enc[0], enc[1:]
