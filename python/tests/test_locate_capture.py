"""The H200 capture of mxbi.torch.locate (reference/captures/locate-h200),
replayed on the CPU: the files are the ones recorded (digests anchored
here), and every explanation's divergence and fixes are recomputed from the
recorded orders by mxbi on the CPU. Needs no torch."""

from __future__ import annotations

import hashlib
import json

import pytest

import mxbi
from conftest import ROOT

CAPTURE = ROOT / "reference" / "captures" / "locate-h200"
#: SHA-256 of manifest.json (which holds every other file's)
MANIFEST_SHA256 = "3fd6c7fddb6b2be752a13440d85291e500d29c77c02b1a2d69b2005be64dc740"


def load(name):
    return json.loads((CAPTURE / name).read_text())


def test_the_files_are_the_recorded_ones():
    raw = (CAPTURE / "manifest.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == MANIFEST_SHA256
    manifest = json.loads(raw)
    assert len(manifest) == 21
    for name, digest in manifest.items():
        assert hashlib.sha256((CAPTURE / name).read_bytes()).hexdigest() == digest, name


def _m(shape):
    return int(shape.split(",")[0][2:])


@pytest.mark.parametrize("name", ["none-float32.json", "matmul-bfloat16.json", "compile-float32.json"])
def test_every_divergence_and_fix_is_what_mxbi_says_on_the_cpu(name):
    d = load(name)
    assert d["schema"] == "mxbi-locate/1"
    replayed = 0
    for rc in d["root_causes"]:
        det = rc["detail"]
        a, b = det["sides"]
        if not (a["order"] and b["order"] and det["orders_differ"]):
            continue
        k = int(a["shape"].split("K=")[1].split(",")[0])
        assert mxbi.Order(a["order"]).diff(b["order"], k) is not None  # the trees differ
        div = mxbi.diverge(a["order"], b["order"], k, m_left=_m(a["shape"]), m_right=_m(b["shape"]))
        assert div.text.rstrip("\n") in det["text"]
        assert list(div.fixes) == rc["fixes"]
        replayed += 1
    assert replayed == len(d["root_causes"])


def test_the_f32_model_breaks_in_cublas_sgemm_and_the_bf16_model_does_not():
    f32 = load("none-float32.json")
    assert not f32["invariant"]
    assert [(r["op"], r["module"], r["batch_sizes"]) for r in f32["root_causes"]] == [
        ("aten::mm", "layers.0.attn.q", [1, 33]), ("aten::mm", "layers.0.attn.k", [1, 33]),
        ("aten::mm", "layers.0.attn.v", [1, 33]), ("aten::mm", "layers.0.mlp", [1, 8]),
        ("aten::mm", "layers.0.mlp", [1, 8])]
    assert {r["orders"]["1"] for r in f32["root_causes"]} == {"fma;ktile=8;split=4/interleave"}
    bf16 = load("none-bfloat16.json")
    assert bf16["invariant"] and bf16["root_causes"] == []
    assert all(not e["latent"] for e in bf16["evidence"])
    assert {e["detail"]["sides"][0]["order"] for e in bf16["evidence"] if e["op"] == "aten::mm"} == {
        "mma(k=16,f=25);out=bf16"}


def test_the_planted_matmul_is_the_only_root_cause_on_the_gpu():
    d = load("matmul-bfloat16.json")
    assert [(r["op"], r["module"], r["verdict"]) for r in d["root_causes"]] == [
        ("mxbi_demo::splitk_linear", "layers.1.mlp", "root")]


def test_torch_compile_is_not_batch_invariant_where_eager_bf16_is():
    c = load("compile-bfloat16.json")["run"]["compile"]
    per = c["per_batch_size"]
    assert c["compiled_invariant"] is False
    assert per["1"]["compiled"] == per["8"]["compiled"] != per["33"]["compiled"] == per["257"]["compiled"]
    assert len({v["eager"] for v in per.values()}) == 1  # eager: one output at every batch size
