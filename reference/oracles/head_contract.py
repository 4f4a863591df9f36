#!/usr/bin/env python3
"""Worker: run torchao HEAD's `torchao/testing/_mxfp8_test_utils.py`
(loaded by file path; not copied into this repo) and dump its expected
values as data.

Usage: head_contract.py PATH/_mxfp8_test_utils.py OUT.json
OUT.json: {"cases": [{"case", "input_dtype", "scale_mode", "input_f32",
                      "scales", "codes"}],
           "e8m0_rceil": [{"case", "input_f32", "scales"}]}
bf16 inputs are written widened to f32 bits (exact).
"""
import importlib.util
import json
import sys
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402


def load(path):
    spec = importlib.util.spec_from_file_location("_mxfp8_test_utils_head", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    mod = load(sys.argv[1])
    cases = []
    for dt, dtname in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        for mode in ("floor", "rceil"):
            c = mod.make_mxfp8_semantic_cases(dt, mode, device="cpu")
            inp = c.inputs.to(torch.float32).view(torch.int32).numpy().view("uint32")
            sc = c.expected_scales.view(torch.uint8).reshape(-1).numpy()
            dat = c.expected_data.view(torch.uint8).numpy()
            for i, name in enumerate(c.names):
                cases.append({
                    "case": f"{dtname}:{name}", "input_dtype": dtname, "scale_mode": mode,
                    "input_f32": [f"{int(b):08x}" for b in inp[i]],
                    "scales": [f"{int(sc[i]):02x}"],
                    "codes": [f"{int(x):02x}" for x in dat[i]],
                })
    vals, exp = mod.make_f32_to_e8m0_rceil_cases(device="cpu")
    vb = vals.view(torch.int32).numpy().view("uint32")
    e8 = [{"case": f"e8m0_rceil_{int(b):08x}", "input_f32": [f"{int(b):08x}"],
           "scales": [f"{int(s):02x}"]} for b, s in zip(vb, exp.numpy())]
    json.dump({"cases": cases, "e8m0_rceil": e8}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
