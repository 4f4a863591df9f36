//! Op models (src/op): the "done means" cases of the fused
//! comm+matmul issue, bad input, and the `mxbi op` CLI.

mod common;

use mxbi::op::agmm::{self, ScalePoint};
use mxbi::op::check::{self, Verdict};
use mxbi::op::{generate, run_op, GenOpts, Mechanism, OpError, OpSpec, TensorValues, X2Scales};
use serde_json::json;
use std::path::PathBuf;
use std::process::Command;

fn spec(v: serde_json::Value) -> OpSpec {
    OpSpec::from_value(v).unwrap_or_else(|e| panic!("{e}"))
}

fn base() -> GenOpts {
    GenOpts::new(11)
}

const CONTENT: u64 = 0xABCD;

fn agmm(preset: &str, ws: usize, mpr: usize) -> OpSpec {
    spec(json!({"preset": preset, "world_size": ws, "m_per_rank": mpr, "k": 256, "n": 64}))
}

fn rows_to_probe(m: usize) -> [usize; 3] {
    [0, m / 2, m - 1]
}

#[test]
fn agmm_v2_prefix_fails_cross_rank_only_with_k_varying_x2_scales() {
    for ws in [2, 4] {
        let s = agmm("agmm-v2-prefix", ws, 4);
        let m = ws * 4;
        // ID and per-column (K-constant) x2 scales: every check passes.
        for x2 in [X2Scales::Identity, X2Scales::KConstant] {
            let b = base().x2(x2);
            for g in 0..m {
                assert!(check::rank(&s, b, g).unwrap().passed(), "ws {ws} {x2:?} row {g}");
            }
            for g in rows_to_probe(m) {
                assert!(check::seed_ab(&s, b, g, CONTENT, 1, 2).unwrap().passed());
                assert!(check::position(&s, b, CONTENT, g, m - 1 - g).unwrap().passed());
            }
        }
        // K-varying x2 scales: the same global row differs between its own
        // rank (LOCAL) and the other ranks (GATHER).
        let b = base().x2(X2Scales::KVarying);
        let mut failed = 0;
        for g in 0..m {
            match check::rank(&s, b, g).unwrap() {
                Verdict::Fail(d) => {
                    failed += 1;
                    let paths = [d.a.path.as_str(), d.b.path.as_str()];
                    assert!(paths.contains(&"local") && paths.contains(&"gather"), "{paths:?}");
                    assert!(d.a.mechanisms.contains(&Mechanism::PathSplit));
                    assert_ne!(d.a.scale_point, d.b.scale_point);
                }
                v => panic!("ws {ws} row {g}: expected BI_FAIL, got {}", v.name()),
            }
        }
        assert_eq!(failed, m);
        // Moving a row to another rank's shard changes its bytes on a fixed
        // rank (its path changes); with other rows' content alone nothing
        // changes (the path depends on position, not content).
        assert!(!check::position(&s, b, CONTENT, 0, m - 1).unwrap().passed());
        assert!(check::seed_ab(&s, b, 0, CONTENT, 1, 2).unwrap().passed());
    }
}

#[test]
fn agmm_v2_fixed_never_fails() {
    for ws in [2, 4, 8] {
        let s = agmm("agmm-v2-fixed", ws, 4);
        let m = ws * 4;
        for x2 in [X2Scales::Identity, X2Scales::KConstant, X2Scales::KVarying] {
            let b = base().x2(x2);
            for g in rows_to_probe(m) {
                assert!(check::rank(&s, b, g).unwrap().passed(), "ws {ws} {x2:?} row {g}");
                assert!(check::seed_ab(&s, b, g, CONTENT, 3, 4).unwrap().passed());
                assert!(check::position(&s, b, CONTENT, g, (g + 5) % m).unwrap().passed());
            }
            let big = agmm("agmm-v2-fixed", ws, 8);
            assert!(check::batch_size(&s, &big, b, 1, CONTENT).unwrap().passed());
        }
    }
}

#[test]
fn agmm_scale_points_agree_where_the_contract_says() {
    let s = agmm("agmm-v2-fixed", 2, 4);
    let OpSpec::AllGatherMatmul(a) = &s else { unreachable!() };
    let inp = generate(&s, &base().x2(X2Scales::KConstant));
    let rows: Vec<usize> = (0..8).collect();
    let fused = agmm::path_rows(a, &a.local, &inp, &rows).unwrap();
    // requant:e4m3 with K-constant scales leaves x2 unchanged
    let mut p = a.local.clone();
    p.scale_point = ScalePoint::Requant(mxbi::format::Format::E4M3);
    assert_eq!(bits(&agmm::path_rows(a, &p, &inp, &rows).unwrap()), bits(&fused));
    // folding a per-column scale into the output is exact here (no f32
    // subnormal or overflow in range)
    p.scale_point = ScalePoint::Output;
    assert_eq!(bits(&agmm::path_rows(a, &p, &inp, &rows).unwrap()), bits(&fused));
    // 'output' refuses K-varying scales
    let var = generate(&s, &base().x2(X2Scales::KVarying));
    let e = agmm::path_rows(a, &p, &var, &rows).unwrap_err().to_string();
    assert!(e.contains("constant along K"), "{e}");
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn content_coupling_fails_seed_ab() {
    for (preset, coupled) in [
        ("quant-per-tensor", true),
        ("quant-mx-m", true),
        ("quant-per-row", false),
        ("quant-mx-k", false),
    ] {
        let s = spec(json!({"preset": preset}));
        for g in rows_to_probe(64) {
            let v = check::seed_ab(&s, base(), g, CONTENT, 5, 6).unwrap();
            assert_eq!(!v.passed(), coupled, "{preset} row {g}: {}", v.name());
            if let Verdict::Fail(d) = v {
                assert_eq!(d.a.order, d.b.order, "no order change: the quantization couples rows");
                assert!(!d.a.mechanisms.is_empty());
            }
        }
    }
}

#[test]
fn ring_reduce_scatter_is_position_dependent() {
    let ring = spec(json!({"preset": "mmrs-ring", "world_size": 4, "m": 16}));
    // row 0 (chunk 0) vs row 5 (chunk 1): different add orders
    match check::position(&ring, base(), CONTENT, 0, 5).unwrap() {
        Verdict::Fail(d) => {
            assert_eq!(d.a.reduction.as_deref(), Some("ring r1,r2,r3,r0"));
            assert_eq!(d.b.reduction.as_deref(), Some("ring r2,r3,r0,r1"));
            assert_eq!(d.a.mechanisms, vec![Mechanism::PositionDependentReduction]);
        }
        v => panic!("expected BI_FAIL, got {}", v.name()),
    }
    // inside one chunk, and with other rows' content, nothing changes
    assert!(check::position(&ring, base(), CONTENT, 0, 3).unwrap().passed());
    assert!(check::seed_ab(&ring, base(), 5, CONTENT, 1, 2).unwrap().passed());
    for p in ["mmrs-tree", "mmrs-fixed", "mmar-fixed"] {
        let s = spec(json!({"preset": p, "world_size": 4, "m": 16}));
        assert!(check::position(&s, base(), CONTENT, 0, 5).unwrap().passed(), "{p}");
    }
    // all-reduce ring: position-dependent, but every rank has the same bytes
    let ar = spec(json!({"preset": "mmar-ring", "world_size": 4, "m": 16}));
    assert!(!check::position(&ar, base(), CONTENT, 0, 5).unwrap().passed());
    for g in [0, 5, 15] {
        assert!(check::rank(&ar, base(), g).unwrap().passed());
    }
}

#[test]
fn nondet_reduction_is_seen_as_non_det() {
    for p in ["mmrs-nondet", "mmar-nondet"] {
        let s = spec(json!({"preset": p, "world_size": 8, "m": 16}));
        let v = check::seed_ab(&s, base(), 0, CONTENT, 1, 2).unwrap();
        assert!(matches!(v, Verdict::NonDet(_)), "{p}: {}", v.name());
    }
}

#[test]
fn moe_routing_changes_a_rows_order() {
    let s = spec(json!({"preset": "moe-grouped"}));
    let OpSpec::Moe(ms) = &s else { unreachable!() };
    let (t, ne, target) = (ms.tokens, ms.experts, 7);
    let mut a = generate(&s, &base().pin(target, CONTENT));
    let expert = mxbi::op::moe::route(ms, values(&a, "logits")).unwrap()[target];
    // variant A: every other token goes elsewhere; B: every token joins
    // the target's expert. Row `target` itself is unchanged.
    let mut b = a.clone();
    for (inp, to_target) in [(&mut a, false), (&mut b, true)] {
        let TensorValues::F32(lg) = &mut inp.0.get_mut("logits").unwrap().values else {
            unreachable!()
        };
        for i in (0..t).filter(|&i| i != target) {
            let e = if to_target { expert } else { (expert + 1) % ne };
            for j in 0..ne {
                lg[i * ne + j] = if j == e { 100.0 } else { -100.0 };
            }
        }
    }
    let (oa, ob) = (run_op(&s, &a).unwrap(), run_op(&s, &b).unwrap());
    let (pa, pb) = (
        oa.provenance_of(0, target).unwrap(),
        ob.provenance_of(0, target).unwrap(),
    );
    assert_eq!(pa.path, pb.path);
    assert_ne!(
        pa.order, pb.order,
        "row count 1 vs {t} must pick different tiling orders"
    );
    assert!(pa.mechanisms.contains(&Mechanism::RowCountTiling));
    assert!(check::compare_rows(&oa, target, &ob, target).is_some());
    // expert parallel: the same batches, rows returned to their home ranks
    let ep = spec(json!({"preset": "moe-ep", "ep_world_size": 16, "tokens": 64, "experts": 16}));
    let inp = generate(&ep, &base());
    let o = run_op(&ep, &inp).unwrap();
    assert_eq!(o.per_rank.len(), 16);
    assert!(o.per_rank.iter().all(|r| r.rows == 4));
    let OpSpec::Moe(es) = &ep else { unreachable!() };
    let grouped = spec(
        serde_json::to_value(OpSpec::Moe(mxbi::op::moe::MoeSpec {
            ep_world_size: None,
            ..es.clone()
        }))
        .unwrap(),
    );
    let g = run_op(&grouped, &inp).unwrap();
    let all: Vec<f32> = o.per_rank.iter().flat_map(|r| r.data.iter().copied()).collect();
    assert_eq!(bits(&all), bits(&g.per_rank[0].data));
}

fn values<'a>(inp: &'a mxbi::op::Inputs, name: &str) -> &'a [f32] {
    match &inp.0[name].values {
        TensorValues::F32(v) => v,
        _ => unreachable!(),
    }
}

#[test]
fn rmsnorm_fixed_is_batch_invariant_and_batch_split_is_not() {
    let m = |p: &str, m: usize| spec(json!({"preset": p, "m": m}));
    for g in [0, 3] {
        assert!(
            check::batch_size(&m("rmsnorm", 4), &m("rmsnorm", 16), base(), g, CONTENT)
                .unwrap()
                .passed()
        );
        assert!(check::seed_ab(&m("rmsnorm", 4), base(), g, CONTENT, 1, 2)
            .unwrap()
            .passed());
        let v = check::batch_size(
            &m("rmsnorm-batch-split", 4),
            &m("rmsnorm-batch-split", 16),
            base(),
            g,
            CONTENT,
        )
        .unwrap();
        match v {
            Verdict::Fail(d) => assert_eq!(d.a.mechanisms, vec![Mechanism::BatchDependentSplit]),
            v => panic!("expected BI_FAIL, got {}", v.name()),
        }
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let err = |v: serde_json::Value| OpSpec::from_value(v).unwrap_err();
    let e = err(json!({"preset": "mmrs-ring", "world_size": 4, "m": 10}));
    assert!(
        e.to_string().contains("m = 10 is not divisible by world_size = 4"),
        "{e}"
    );
    let e = err(json!({"preset": "mmar-ring", "world_size": 4, "k": 258}));
    assert!(e.to_string().contains("k = 258 is not divisible"), "{e}");
    let e = err(json!({"preset": "agmm-v2-prefix", "world_size": 3}));
    assert!(matches!(e, OpError::WorldSize { got: 3, .. }), "{e}");
    assert!(e.to_string().contains("supported: 2, 4, 8"), "{e}");
    let e = err(json!({"preset": "moe-ep", "ep_world_size": 4}));
    assert!(e.to_string().contains("supported: 8, 16"), "{e}");
    let e = err(json!({"preset": "agmm-v3"}));
    assert!(matches!(e, OpError::UnknownPreset { .. }), "{e}");
    assert!(e.to_string().contains("agmm-v2-prefix"), "{e}");
    let e = err(json!({"preset": "agmm-v2-fixed", "k": 100}));
    assert!(e.to_string().contains("multiple of the MX block"), "{e}");
    let e = err(json!({"preset": "agmm-v2-fixed", "kk": 100}));
    assert!(e.to_string().contains("unknown field"), "{e}");
    let e = err(json!({"preset": "agmm-v2-fixed", "local": {"order": "fma", "scale_point": "fused"}}));
    assert!(e.to_string().contains("scale=fused"), "{e}");
    // wrong input shapes
    let s = agmm("agmm-v2-fixed", 2, 4);
    let mut inp = generate(&s, &base());
    inp.0.remove("x2_scales");
    let e = run_op(&s, &inp).unwrap_err().to_string();
    assert!(e.contains("missing input 'x2_scales'"), "{e}");
}

#[test]
fn spec_round_trips_through_json() {
    for p in mxbi::op::presets::PRESETS {
        let s = spec(json!({"preset": p.name}));
        let again = spec(serde_json::to_value(&s).unwrap());
        assert_eq!(format!("{s:?}"), format!("{again:?}"), "{}", p.name);
        let inp = generate(&s, &base());
        let o = run_op(&s, &inp).unwrap();
        let rows: usize = o.per_rank.iter().map(|r| r.rows).sum();
        assert_eq!(o.provenance.len(), rows, "{}", p.name);
    }
}

// ---- CLI ----

fn mxbi(args: &[&str], threads: usize) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi"))
        .args(args)
        .env("RAYON_NUM_THREADS", threads.to_string())
        .output()
        .unwrap()
}

fn fails_cleanly(o: &std::process::Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
}

#[test]
fn cli_op_run_writes_ranks_and_provenance_deterministically() {
    let d = common::TempDir::new("op-run");
    let spec = d.join("spec.json");
    std::fs::write(
        &spec,
        r#"{"preset": "agmm-v2-prefix", "world_size": 2, "m_per_rank": 4, "k": 256, "n": 64}"#,
    )
    .unwrap();
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let (o1, o4, o5) = (d.join("o1"), d.join("o4"), d.join("o5"));
    for (out, th) in [(&o1, 1), (&o4, 4)] {
        let r = mxbi(
            &[
                "op",
                "run",
                &s(&spec),
                "--generate",
                "7",
                "--x2-scales",
                "k-varying",
                "--out",
                &s(out),
            ],
            th,
        );
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    }
    // reading the generated inputs back gives the same bytes
    let inputs = o1.join("inputs");
    let r = mxbi(&["op", "run", &s(&spec), "--inputs", &s(&inputs), "--out", &s(&o5)], 2);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    for f in ["rank0.npy", "rank1.npy", "provenance.json"] {
        let a = std::fs::read(o1.join(f)).unwrap();
        assert_eq!(a, std::fs::read(o4.join(f)).unwrap(), "{f}");
        assert_eq!(a, std::fs::read(o5.join(f)).unwrap(), "{f}");
    }
    let prov: serde_json::Value = serde_json::from_slice(&std::fs::read(o1.join("provenance.json")).unwrap()).unwrap();
    let rows = prov["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 16);
    assert_eq!(rows[4]["path"], "gather");
    assert_eq!(rows[4]["scale_point"], "requant:e4m3");
    assert_eq!(rows[0]["order"], "mma(k=32,f=25,in=e4m3);scale=fused");
    // the outputs differ across ranks (k-varying scales)
    assert_ne!(
        std::fs::read(o1.join("rank0.npy")).unwrap(),
        std::fs::read(o1.join("rank1.npy")).unwrap()
    );
    let l = mxbi(&["op", "list"], 1);
    assert!(String::from_utf8_lossy(&l.stdout).contains("agmm-v2-fixed"));
}

#[test]
fn cli_op_bad_input_exits_2() {
    let d = common::TempDir::new("op-bad");
    let s = |p: PathBuf| p.to_str().unwrap().to_string();
    let out = s(d.join("o"));
    for (body, needle) in [
        (
            r#"{"preset": "mmrs-ring", "world_size": 4, "m": 6}"#,
            "not divisible by world_size",
        ),
        (
            r#"{"preset": "agmm-v2-prefix", "world_size": 6}"#,
            "does not support world size 6",
        ),
        (r#"{"preset": "nope"}"#, "unknown preset 'nope'"),
        (r#"{"op": "rms-norm"}"#, "missing field"),
        ("not json", "not valid JSON"),
    ] {
        let spec = d.join("spec.json");
        std::fs::write(&spec, body).unwrap();
        fails_cleanly(
            &mxbi(&["op", "run", &s(spec), "--generate", "1", "--out", &out], 1),
            needle,
        );
    }
    let spec = d.join("ok.json");
    std::fs::write(&spec, r#"{"preset": "rmsnorm"}"#).unwrap();
    fails_cleanly(
        &mxbi(&["op", "run", &s(spec.clone()), "--out", &out], 1),
        "--inputs PATH or --generate SEED",
    );
    fails_cleanly(
        &mxbi(
            &["op", "run", &s(spec), "--inputs", &s(d.join("empty")), "--out", &out],
            1,
        ),
        "empty",
    );
}

/// The prefix/fixed property does not depend on the preset's tensor-core
/// order: the same holds for orders a plain CUDA kernel (fmaf over
/// dequantized values) or a Hopper FP8 kernel with per-block promotion
/// reproduces, which the two-GPU run can use.
#[test]
fn agmm_prefix_property_holds_for_gpu_friendly_orders() {
    for (order, point) in [
        ("fma;scale=dequant", "dequant"),
        ("hopper-fp8-wgmma;promote=32;scale=block", "block"),
    ] {
        let local = json!({"order": order, "scale_point": point});
        let gather = json!({"order": order, "scale_point": "requant:e4m3"});
        let prefix = spec(json!({"preset": "agmm-v2-prefix", "local": local, "gather": gather}));
        let fixed = spec(json!({"preset": "agmm-v2-fixed", "local": local}));
        for x2 in [X2Scales::Identity, X2Scales::KConstant, X2Scales::KVarying] {
            let b = base().x2(x2);
            for g in 0..8 {
                assert!(check::rank(&fixed, b, g).unwrap().passed());
                let v = check::rank(&prefix, b, g).unwrap();
                assert_eq!(
                    v.passed(),
                    x2 != X2Scales::KVarying,
                    "{order} {x2:?} row {g}: {}",
                    v.name()
                );
            }
        }
    }
}
