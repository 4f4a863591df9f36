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
MANIFEST_SHA256 = "2837d8ac0278b77f98132b9bc06b0a616824f0a66ff69889e7650236a1afe187"


def load(name):
    return json.loads((CAPTURE / name).read_text())


def test_the_files_are_the_recorded_ones():
    raw = (CAPTURE / "manifest.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == MANIFEST_SHA256
    manifest = json.loads(raw)
    assert manifest["suite"] == "locate" and len(manifest["files"]) == 28
    for f in manifest["files"]:
        data = (CAPTURE / f["name"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (f["bytes"], f["sha256"]), f["name"]
    # the same digest is anchored beside the other captures (reference/captures.sha256)
    anchors = (ROOT / "reference" / "captures.sha256").read_text()
    assert f"{MANIFEST_SHA256}  captures/locate-h200/manifest.json" in anchors


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


def test_each_explained_kind_has_its_order_on_the_gpu():
    d = load("op-kinds-cuda.json")
    d.update(load("op-kinds-cuda-scaled_mm.json"))

    def orders(name):
        return {(e["op"], e["detail"]["sides"][0]["order"], e["detail"]["sides"][1]["order"]) for e in d[name]["evidence"]}

    for name in d:
        assert d[name]["invariant"], name
        assert all(not e["latent"] for e in d[name]["evidence"]), name
    assert orders("softmax") == {("aten::_softmax", "muladd;lanes=32", "muladd;lanes=32")}
    assert orders("log_softmax") == {("aten::_log_softmax", "muladd;lanes=32", "muladd;lanes=32")}
    rms = "muladd;ktile=16;split=32/interleave;reduce=pairwise"
    assert orders("rms_norm") == {("aten::_fused_rms_norm", rms, rms)}
    assert orders("attention") == {("aten::_scaled_dot_product_cudnn_attention", "mma(k=16,f=25)", "mma(k=16,f=25)")}
    fp8 = "mma(k=32,f=13,out=13);split=8;out=bf16"
    assert orders("scaled_mm") == {("aten::_scaled_mm", fp8, fp8)}
    assert d["layer_norm"]["evidence"] == []
