"""mxbi.torch.locate: from a model to the root-cause op and its order
(docs/LOCATE.md). CI installs torch (CPU); the example decoder is
examples/locate/decoder.py."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT

torch = pytest.importorskip("torch")

sys.path.insert(0, str(ROOT / "examples" / "locate"))
import decoder  # noqa: E402

import mxbi  # noqa: E402
import mxbi.torch as mt  # noqa: E402

SIZES = [1, 9, 33]


def located(plant, dtype=torch.float32, **kw):
    model = decoder.build(plant=plant, dtype=dtype)
    kw.setdefault("ops", decoder.PLANTED_KINDS)
    return mt.locate(model, decoder.make_inputs, SIZES, **kw)


@pytest.fixture(scope="module")
def matmul_report():
    return located("matmul", evidence=False)


@pytest.fixture(scope="module")
def rmsnorm_report():
    return located("rmsnorm", evidence=False)


@pytest.fixture(scope="module")
def clean_report():
    return located(None)


def test_the_planted_split_k_matmul_is_the_only_root_cause_with_both_orders(matmul_report):
    r = matmul_report
    assert not r.invariant and not r
    assert [(c.op, c.module, c.batch_sizes, c.verdict) for c in r.root_causes] == [
        ("mxbi_demo::splitk_linear", "layers.1.mlp", (1, 9), "root")]
    rc = r.root_causes[0]
    assert rc.also == [33]
    base = rc.orders[1]
    assert base is not None and "split" not in base
    # two GEMMs over the halves of K, summed: the base order with split=2
    assert rc.orders[9] == f"{base};split=2"
    assert rc.detail.differ is True
    assert rc.fixes and "split" in rc.fixes[0]
    assert "while every input it read was identical" in rc.explanation
    assert rc.max_ulp is not None and rc.max_ulp > 0
    assert r.outputs_same == {9: False, 33: False}
    # every op downstream inherits the difference: none of them is a root cause
    verdicts = [row.verdicts[9] for row in r.ops if row.index > rc.index]
    assert "root" not in verdicts and "inherits" in verdicts
    assert all(row.verdicts[9] == "same" for row in r.ops if row.index < rc.index)


def test_the_planted_split_rms_norm_is_the_only_root_cause_identified_by_its_model(rmsnorm_report):
    r = rmsnorm_report
    assert [(c.op, c.module, c.batch_sizes) for c in r.root_causes] == [
        ("mxbi_demo::split_rms_norm", "layers.1.mlp_norm", (1, 9))]
    rc = r.root_causes[0]
    assert rc.orders == {1: "muladd", 9: "muladd;split=2"}
    assert all("identified on designed inputs by search against the model" in s.how for s in rc.detail.sides)
    assert "axis 2" in rc.detail.axis
    assert "split-K changes" in rc.explanation


def test_the_unplanted_model_is_invariant_on_the_cpu_with_each_ops_evidence(clean_report):
    r = clean_report
    assert r.invariant and bool(r)
    assert r.root_causes == [] and r.latent == []
    assert r.outputs_same == {9: True, 33: True}
    assert all(set(row.verdicts.values()) == {"same"} for row in r.ops)
    ops = {e.op for e in r.evidence}
    assert {"aten::mm", "aten::mean.dim"} <= ops
    assert any("attention" in op for op in ops)
    # evidence: the order revealed at both sizes, the same tree (a nonlinear
    # reduction whose order no model tells says so: differ None, not latent)
    for e in r.evidence:
        assert e.detail.differ is not True, e.detail.text
        assert [s.m for s in e.detail.sides] == list(e.batch_sizes)
        if e.op == "aten::mm":
            assert e.detail.differ is False and e.detail.power > 0.9
    assert "batch-invariant for sample 0" in str(r)


def test_the_unplanted_model_in_bf16_is_invariant_on_the_cpu_too():
    r = located(None, dtype=torch.bfloat16)
    assert r.invariant, str(r)
    assert r.latent == [] and r.evidence
    assert all(e.detail.differ is not True for e in r.evidence)


def test_the_report_renders_as_text_json_and_markdown(matmul_report, tmp_path):
    r = matmul_report
    r.write_json(tmp_path / "r.json")
    assert (tmp_path / "r.json").read_text() == r.to_json()
    d = json.loads(r.to_json())
    assert d["schema"] == "mxbi-locate/1"
    assert d["invariant"] is False and d["batch_sizes"] == SIZES
    rc = d["root_causes"][0]
    assert rc["op"] == "mxbi_demo::splitk_linear" and rc["module"] == "layers.1.mlp"
    assert rc["orders"]["9"].endswith(";split=2") and rc["fixes"]
    assert len(d["ops"]) == len(r.ops) and d["ops"][0]["verdicts"]["9"] == "same"
    md = r.markdown()
    assert "| 1 | `mxbi_demo::splitk_linear` | `layers.1.mlp` | 1 vs 9 |" in md
    assert "| vs 9 | vs 33 | max ULP |" in md
    text = str(r)
    assert text.startswith("Decoder: NOT batch-invariant")
    assert repr(r).startswith("<LocateReport 'Decoder: NOT batch-invariant")
    assert "root cause 1: mxbi_demo::splitk_linear in layers.1.mlp" in text
    assert "fix:" in text


def test_a_reduction_over_the_batch_is_named_as_mixing_samples():
    def center(x):
        return x - x.mean(0, keepdim=True)

    def make(m):
        x = torch.randn(m, 8, generator=torch.Generator().manual_seed(m))
        x[0] = torch.arange(8.0)
        return (x,)

    r = mt.locate(center, make, [2, 5], evidence=False)
    assert not r.invariant
    assert [(c.op, c.verdict) for c in r.root_causes] == [("aten::mean.dim", "mixes-batch")]
    assert "reduces over the batch" in r.root_causes[0].explanation


def test_ops_that_run_at_one_batch_size_only_are_the_root_cause_region():
    w = torch.randn(64, 16, generator=torch.Generator().manual_seed(3))

    def split_by_hand(x):
        if x.shape[0] <= 8:
            return x @ w
        return x[:, :32] @ w[:32] + x[:, 32:] @ w[32:]

    def make(m):
        x = torch.randn(m, 64, generator=torch.Generator().manual_seed(m))
        x[0] = torch.linspace(-3, 3, 64) ** 3
        return (x,)

    r = mt.locate(split_by_hand, make, [1, 9], evidence=False)
    assert not r.invariant
    # the mm of batch 1 ([1, 64] x [64, 16]) is not the mms of batch 9 (K
    # cut in halves): nothing aligns, the paths differ
    assert [(c.op, c.verdict) for c in r.root_causes] == [("aten::mm", "paths-differ")], str(r)
    first, other = r.unaligned[9]
    assert [op.split(" ")[0] for op in first] == ["aten::mm"]
    assert sorted(set(op.split(" ")[0] for op in other)) == ["aten::add.Tensor", "aten::mm", "aten::slice.Tensor"]
    note = r.root_causes[0].note
    assert "at 1: aten::mm ((root))" in note and "at 9: aten::slice.Tensor" in note
    assert "runs different ops at batch sizes 1 and 9" in r.root_causes[0].explanation


def test_a_difference_with_identical_inputs_in_an_undeclared_op_is_a_root_cause_without_an_order():
    @torch.library.custom_op("mxbi_test::bump", mutates_args=())
    def bump(x: torch.Tensor) -> torch.Tensor:
        # one ULP more on every element once the batch exceeds 4
        return torch.nextafter(x, torch.full_like(x, float("inf"))) if x.shape[0] > 4 else x.clone()

    def prog(x):
        return bump(x * 2) + 1

    def make(m):
        x = torch.ones(m, 4)
        return (x,)

    r = mt.locate(prog, make, [1, 5], evidence=False)
    assert [(c.op, c.verdict, c.kind, c.max_ulp) for c in r.root_causes] == [("mxbi_test::bump", "root", None, 1)]
    assert "no kind" in r.root_causes[0].explanation
    # the planted change removed: invariant
    r2 = mt.locate(lambda x: (x * 2) + 1, make, [1, 5], evidence=False)
    assert r2.invariant


def test_digests_alone_still_locate_when_no_slice_is_kept():
    r = located("rmsnorm", evidence=False, keep_elements=0)
    rc = r.root_causes[0]
    assert (rc.op, rc.module) == ("mxbi_demo::split_rms_norm", "layers.1.mlp_norm")
    assert rc.max_ulp is None and rc.differing == -1
    # the model search re-runs the op on designed inputs: no kept slice needed
    assert rc.orders == {1: "muladd", 9: "muladd;split=2"}


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(batch_sizes=[4]), "at least two distinct batch sizes"),
        (dict(batch_sizes=[4, 4]), "at least two distinct batch sizes"),
        (dict(batch_sizes=[2, 4], target=2), "target: 2 is not a position in every batch"),
        (dict(batch_sizes=[2, 4], ops={"x::y": "gemmish"}), "unknown kind 'gemmish'"),
        (dict(batch_sizes=[2, 4], max_ops=3), "more than 3 ops"),
    ],
)
def test_bad_arguments_raise_one_line(kwargs, words):
    model = decoder.build()
    with pytest.raises(mxbi.MxbiError, match=words):
        mt.locate(model, decoder.make_inputs, **kwargs)


def test_make_inputs_must_keep_the_batch_size_and_the_target_sample():
    model = decoder.build()
    with pytest.raises(mxbi.MxbiError, match="make_inputs\\(2\\): input 0 has 3 entries along batch_dim 0, expected 2"):
        mt.locate(model, lambda m: decoder.make_inputs(m + 1), [2, 4])

    def moving(m):
        t = decoder.make_inputs(m)
        t[0, 0] = m  # the target sample changes with m
        return t

    with pytest.raises(mxbi.MxbiError, match="sample 0 of input\\[0\\] differs"):
        mt.locate(model, moving, [2, 4], evidence=False)


def test_the_fixture_fails_a_variant_model_and_passes_an_invariant_one(pytester):
    pytester.makeconftest(f"import sys; sys.path.insert(0, {str(ROOT / 'examples' / 'locate')!r})")
    pytester.makepyfile(
        """
        import decoder

        def test_clean(mxbi_bi):
            r = mxbi_bi.locate(decoder.build(), decoder.make_inputs, batch_sizes=[1, 9], evidence=False)
            assert r.invariant

        def test_planted(mxbi_bi):
            mxbi_bi.locate(decoder.build(plant="matmul"), decoder.make_inputs, batch_sizes=[1, 9],
                           ops=decoder.PLANTED_KINDS, evidence=False)
        """
    )
    out = pytester.runpytest("--mxbi-report", str(pytester.path / "rep"))
    out.assert_outcomes(passed=1, failed=1)
    out.stdout.fnmatch_lines(["*root cause 1: mxbi_demo::splitk_linear in layers.1.mlp*"])
    assert (pytester.path / "rep").is_dir()


def test_the_target_need_not_be_the_first_sample():
    model = decoder.build(plant="matmul")
    r = mt.locate(model, lambda m: decoder.make_inputs(m, target=3), [4, 12], target=3, ops=decoder.PLANTED_KINDS,
                  evidence=False)
    assert [(c.op, c.module, c.batch_sizes) for c in r.root_causes] == [
        ("mxbi_demo::splitk_linear", "layers.1.mlp", (4, 12))]
    assert r.root_causes[0].orders[12] == r.root_causes[0].orders[4] + ";split=2"
    # at batch sizes that both stay at or below 8 the plant does not split
    assert mt.locate(model, lambda m: decoder.make_inputs(m, target=3), [4, 8], target=3,
                     ops=decoder.PLANTED_KINDS, evidence=False).invariant


def test_integer_launch_state_beside_a_batched_output_is_not_compared():
    @torch.library.custom_op("mxbi_test::with_seed", mutates_args=())
    def with_seed(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # as an attention kernel returns its RNG offset: launch state that differs per batch size
        return x * 2, torch.tensor(x.shape[0] * 7919, dtype=torch.int64)

    @torch.library.custom_op("mxbi_test::with_stat", mutates_args=())
    def with_stat(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # a float statistic over the batch: a result, compared
        return x * 2, x.sum().reshape(1)

    def make(m):
        return (torch.arange(m * 4, dtype=torch.float32).reshape(m, 4) / 7,)

    r = mt.locate(lambda x: with_seed(x)[0] + 1, make, [1, 5], evidence=False)
    assert r.invariant, str(r)
    r = mt.locate(lambda x: with_stat(x)[0] + 1, make, [1, 5], evidence=False)
    assert [(c.op, c.verdict) for c in r.root_causes] == [("mxbi_test::with_stat", "mixes-batch")]


def test_an_order_that_changes_where_the_bytes_agree_is_latent():
    @torch.library.custom_op("mxbi_test::split_mm", mutates_args=())
    def split_mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if x.shape[0] <= 4:
            return x @ w
        return x[:, :16] @ w[:16] + x[:, 16:] @ w[16:]

    w = torch.arange(32 * 8, dtype=torch.float32).reshape(32, 8) % 5

    def make(m):  # small integers: every order gives the exact sum, the same bytes
        return (torch.arange(m * 32, dtype=torch.float32).reshape(m, 32) % 3,)

    r = mt.locate(lambda x: split_mm(x, w), make, [2, 6], ops={"mxbi_test::split_mm": "mm"})
    assert r.invariant and r.root_causes == []
    [e] = r.latent
    assert (e.op, e.batch_sizes) == ("mxbi_test::split_mm", (2, 6))
    orders = [s.order for s in e.detail.sides]
    assert orders[1] == orders[0] + ";split=2", orders
    # exact sums: no order is told apart by these rows
    assert e.detail.power == 0.0
    assert "latent: mxbi_test::split_mm" in str(r)


def _serial(t):
    s = torch.zeros(t.shape[:-1], dtype=t.dtype)
    for i in range(t.shape[-1]):
        s = s + t[..., i]
    return s[..., None]


@torch.library.custom_op("mxbi_test::split_softmax", mutates_args=())
def split_softmax(x: torch.Tensor) -> torch.Tensor:
    """softmax over the last axis, its sum serial, split in halves once the batch exceeds 4."""
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    h = x.shape[-1] // 2
    s = _serial(e) if x.shape[0] <= 4 else _serial(e[..., :h]) + _serial(e[..., h:])
    return e / s


@torch.library.custom_op("mxbi_test::split_log_softmax", mutates_args=())
def split_log_softmax(x: torch.Tensor) -> torch.Tensor:
    shifted = x - x.max(dim=-1, keepdim=True).values
    e = torch.exp(shifted)
    h = x.shape[-1] // 2
    s = _serial(e) if x.shape[0] <= 4 else _serial(e[..., :h]) + _serial(e[..., h:])
    return shifted - torch.log(s)


@pytest.mark.parametrize("op, kind", [(split_softmax, "softmax"), (split_log_softmax, "log_softmax")])
def test_softmax_orders_are_identified_by_search_against_their_model(op, kind):
    def make(m):
        x = torch.randn(m, 3, 64, generator=torch.Generator().manual_seed(m)) * 4
        x[0] = torch.randn(3, 64, generator=torch.Generator().manual_seed(0)) * 4
        return (x,)

    name = f"mxbi_test::split_{kind}"
    r = mt.locate(lambda x: op(x) * 1, make, [2, 6], ops={name: kind}, evidence=False)
    [rc] = r.root_causes
    assert rc.op == name and rc.verdict == "root"
    assert rc.orders == {2: "muladd", 6: "muladd;split=2"}, rc.explanation
    assert "axis 2" in rc.detail.axis and "64 terms" in rc.detail.axis


def test_a_softmax_whose_order_moves_is_latent_when_the_targets_bytes_agree():
    def make(m):  # the target's rows are constant: every order sums exactly, the same bytes
        x = torch.randn(m, 3, 64, generator=torch.Generator().manual_seed(m)) * 4
        x[0] = 0.25
        return (x,)

    name = "mxbi_test::split_softmax"
    r = mt.locate(lambda x: split_softmax(x) * 1, make, [2, 6], ops={name: "softmax"})
    assert r.invariant and r.root_causes == []
    [e] = r.latent
    assert e.op == name and [s.order for s in e.detail.sides] == ["muladd", "muladd;split=2"]
    assert "on the designed inputs the same 6 rows give other bytes" in e.detail.text
    # below the split threshold: the same order at both sizes, told on designed inputs
    r = mt.locate(lambda x: split_softmax(x) * 1, make, [2, 3], ops={name: "softmax"})
    [e] = r.evidence
    assert not e.latent and [s.order for s in e.detail.sides] == ["muladd", "muladd"]
    assert "the same rows give the same bytes" in e.detail.text
