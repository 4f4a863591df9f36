//! The seed-000 hypotheses for the all-gather-matmul op: the K-loop
//! schedule preset, where each mechanism's LOCAL vs GATHER difference is
//! visible (the table of docs/OPS.md, by the exactness analysis), the
//! mechanism ranking from observed bytes (held-out model data of every
//! preset, a planted error, the two-GPU capture) and the first diverging
//! node of a failing cell from the op provenance records.

mod common;

use mxbi::explain::k_profile;
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::op::divergence::{explain_diff, NodeKind};
use mxbi::op::hypotheses::{rank_mechanisms, relation, Hypothesis, Observed};
use mxbi::op::visibility::{self, Values};
use mxbi::op::{agmm, cross_rank, generate, run_op, GenOpts, OpSpec, X2Scales};
use mxbi::subject::ScaleKind::{Identity as ID, Varying as VAR};
use serde_json::json;
use std::process::Command;

fn agmm_spec(v: serde_json::Value) -> (OpSpec, agmm::AgmmSpec) {
    let spec = OpSpec::from_value(v).unwrap();
    let OpSpec::AllGatherMatmul(s) = spec.clone() else {
        panic!("not an all-gather-matmul")
    };
    (spec, s)
}

#[test]
fn the_kloop_preset_splits_only_the_k_loop_schedule() {
    let (_, s) = agmm_spec(json!({"preset": "agmm-v2-kloop"}));
    let g = s.gather.as_ref().unwrap();
    assert_eq!(s.local.scale_point, g.scale_point);
    assert_eq!((s.local.x1_requant, g.x1_requant), (None, None));
    assert_ne!(s.local.order, g.order);
    assert_eq!(relation(&s.local, g, s.k), Some(Hypothesis::KLoopSplit));
    // the other presets are what their names say
    let rel = |p: &str| {
        let (_, s) = agmm_spec(json!({ "preset": p }));
        relation(&s.local, s.gather.as_ref().unwrap_or(&s.local), s.k)
    };
    assert_eq!(rel("agmm-v2-prefix"), Some(Hypothesis::ScalePointSplit));
    assert_eq!(rel("agmm-v2-coupled"), Some(Hypothesis::ContentCoupling));
    assert_eq!(rel("agmm-v2-fixed"), Some(Hypothesis::OnePath));
}

#[test]
fn the_visibility_table_in_docs_ops_is_what_the_analysis_finds() {
    let v = visibility::all(1).unwrap();
    let table = visibility::table(&v);
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/OPS.md")).unwrap();
    assert!(doc.contains(&table), "docs/OPS.md must contain the table:\n{table}");
    let get = |p: &str, values: Values, x1, x2| {
        v.iter()
            .find(|x| x.preset == p && x.values == values && x.x1 == x1 && x.x2 == x2)
            .unwrap()
    };
    for values in Values::ALL {
        for (x1, x2) in visibility::COMBOS {
            // scale-point split: visible exactly when x2's scales vary along K
            let p = get("agmm-v2-prefix", values, x1, x2);
            assert_eq!(p.visible(), x2 == VAR, "{p:?}");
            assert_eq!(p.x2_rerounded > 0, x2 == VAR);
            // content coupling: exactly when x1's scales vary between rows
            let c = get("agmm-v2-coupled", values, x1, x2);
            assert_eq!(c.visible(), x1 == VAR, "{c:?}");
            // a hidden difference is explained, never assumed: one GEMM or
            // every element proven
            for x in [p, c] {
                if !x.visible() {
                    assert_eq!(x.cell(), "hidden: one GEMM");
                }
            }
        }
    }
    // K-loop schedule split: with identity scales every element of the
    // narrow values is proven order-independent; the checker's wide values
    // show it at every combination, identity scales included
    let k = get("agmm-v2-kloop", Values::Narrow, ID, ID);
    assert!(!k.visible() && k.proven == Some(k.elements), "{k:?}");
    assert!(get("agmm-v2-kloop", Values::Narrow, VAR, VAR).visible());
    for (x1, x2) in visibility::COMBOS {
        let w = get("agmm-v2-kloop", Values::Checker, x1, x2);
        assert!(w.visible() && w.proven.unwrap() < w.elements, "{w:?}");
    }
}

#[test]
fn the_comparison_sees_a_planted_schedule_change() {
    // the fixed preset with a GATHER path whose only change is a split: the
    // comparison must see it on the checker's values with identity scales
    let (_, s) = agmm_spec(json!({"preset": "agmm-v2-fixed",
        "gather": {"order": "mma(k=32,f=25,in=e4m3);split=2;scale=fused", "scale_point": "fused"}}));
    let inp = visibility::inputs(&s, Values::Checker, ID, ID, 3).unwrap();
    let (elements, differ, x1r, x2r, same_tree, proven) = visibility::compare_paths(&s, &inp).unwrap();
    assert!(differ > 0 && !same_tree && x1r == 0 && x2r == 0, "{differ}");
    assert!(proven.unwrap() < elements);
}

/// Every preset's own output, on inputs of a seed no other test uses, is
/// attributed to the preset's mechanism and to no other.
#[test]
fn the_ranking_names_each_presets_mechanism_on_held_out_data() {
    let cases = [
        ("agmm-v2-prefix", Hypothesis::ScalePointSplit),
        ("agmm-v2-kloop", Hypothesis::KLoopSplit),
        ("agmm-v2-coupled", Hypothesis::ContentCoupling),
        ("agmm-v2-fixed", Hypothesis::OnePath),
    ];
    for (i, (preset, want)) in cases.iter().enumerate() {
        for ws in [2usize, 4] {
            let (spec, s) = agmm_spec(json!({"preset": preset, "world_size": ws, "m_per_rank": 3, "k": 256, "n": 32}));
            let seed = 0x0D15_EA5E_0000 + 17 * i as u64 + ws as u64;
            let inp = generate(&spec, &GenOpts::new(seed).x2(X2Scales::KVarying));
            let out = run_op(&spec, &inp).unwrap();
            let ops = agmm::read(&s, &inp).unwrap();
            let r = rank_mechanisms(&s, &ops, &Observed::Rows(&out.per_rank)).unwrap();
            assert_eq!(r.verdict(), Some(*want), "{preset} ws {ws}:\n{r}");
            assert_eq!(r.ranking[0], (*want, ws));
            assert!(r.ranking[1..].iter().all(|x| x.1 == 0), "{preset}: {:?}", r.ranking);
        }
    }
}

#[test]
fn with_identity_x2_scales_the_ranking_cannot_tell_the_scale_point_split_from_one_path() {
    let (spec, s) = agmm_spec(json!({"preset": "agmm-v2-prefix", "n": 32}));
    let inp = generate(&spec, &GenOpts::new(0xA11CE).x2(X2Scales::Identity));
    let out = run_op(&spec, &inp).unwrap();
    let ops = agmm::read(&s, &inp).unwrap();
    let r = rank_mechanisms(&s, &ops, &Observed::Rows(&out.per_rank)).unwrap();
    assert_eq!(
        r.supported,
        vec![Hypothesis::OnePath, Hypothesis::ScalePointSplit],
        "{r}"
    );
    assert_eq!(r.verdict(), None);
    assert!(r.to_string().contains("cannot tell apart one-path, scale-point-split"));
}

#[test]
fn a_planted_byte_is_reproduced_by_no_mechanism() {
    let (spec, s) = agmm_spec(json!({"preset": "agmm-v2-kloop", "n": 32}));
    let inp = generate(&spec, &GenOpts::new(0xBAD).x2(X2Scales::KVarying));
    let mut out = run_op(&spec, &inp).unwrap();
    // rank 1's first GATHER row is global row 0: one bit of one element
    out.per_rank[1].data[3] = f32::from_bits(out.per_rank[1].data[3].to_bits() ^ 1);
    let ops = agmm::read(&s, &inp).unwrap();
    let r = rank_mechanisms(&s, &ops, &Observed::Rows(&out.per_rank)).unwrap();
    assert!(r.supported.is_empty(), "{r}");
    let r1 = &r.ranks[1];
    assert!(r1.gather.matches.is_empty() && r1.reproduced_by.is_empty());
    // the closest path is the true GATHER path, one element off
    let (p, d) = r1.gather.closest.clone().unwrap();
    assert_eq!(d, Some(1), "{r}");
    assert_eq!(relation(&s.local, &p, s.k), Some(Hypothesis::KLoopSplit), "{p:?}");
    // rank 0 is untouched and still attributed
    assert_eq!(r.ranks[0].reproduced_by[0].0, Hypothesis::KLoopSplit);
}

fn mxbi(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi")).args(args).output().unwrap()
}

/// The two-GPU capture's observed digests: the GATHER path that re-rounds
/// x2 is recognised with K-varying scales; the one-path case is one path.
#[test]
fn op_explain_ranks_the_two_gpu_capture() {
    let dir = common::committed_capture("collective");
    let dir = dir.to_str().unwrap();
    for (case, verdict) in [
        ("agmm-v2-prefix/fma/kvar", "scale-point-split"),
        ("agmm-v2-fixed/wgmma-promote/kvar", "one-path"),
    ] {
        let o = mxbi(&["op", "explain", "--capture", dir, "--case", case, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["verdict"], verdict, "{case}");
        assert_eq!(v["ranks"].as_array().unwrap().len(), 2);
    }
    let o = mxbi(&["op", "explain", "--capture", dir, "--case", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("agmm-v2-prefix/fma/kvar"));
}

/// A failing rank cell of each preset: the first diverging node and the
/// mechanism, from the provenance records.
#[test]
fn a_failing_cell_names_its_first_diverging_node() {
    for (preset, kind) in [
        ("agmm-v2-prefix", NodeKind::X2Operand),
        ("agmm-v2-kloop", NodeKind::Order),
        ("agmm-v2-coupled", NodeKind::X1Operand),
    ] {
        let (spec, s) = agmm_spec(json!({"preset": preset, "n": 32}));
        let inp = generate(&spec, &GenOpts::new(41).x2(X2Scales::KVarying));
        let out = run_op(&spec, &inp).unwrap();
        let Some(d) = cross_rank(&out, 5) else {
            panic!("{preset}: row 5 should differ across ranks")
        };
        let dv = explain_diff(&spec, Some(&inp), &d).unwrap();
        assert_eq!(dv.nodes[0].kind, kind, "{preset}: {dv}");
        assert_eq!(dv.nodes.len(), 1, "{preset}: {dv}");
        let words = dv.to_string();
        assert!(words.contains("first diverging node"), "{words}");
        let (lo, hi) = dv.nodes[0].k_range.unwrap();
        assert!(lo < hi && hi < s.k);
        if kind == NodeKind::Order {
            // the trees part at k = 128 (GATHER's second fresh tile): the
            // K profile on the row's own inputs agrees: with only the terms
            // below 128 present the two orders give the same bytes
            assert_eq!(lo, 128, "{dv}");
            assert!(words.contains("K-loop schedule split"), "{words}");
            let bytes = |n: &str| match &inp.0[n].values {
                mxbi::op::TensorValues::U8(v) => v.clone(),
                _ => unreachable!(),
            };
            let (c1, s1, c2, s2) = (bytes("x1"), bytes("x1_scales"), bytes("x2"), bytes("x2_scales"));
            let (m, k, n) = (s.m(), s.k, s.n);
            let f = mxbi::mx::MxFormat::Fp8E4M3;
            let p = Problem {
                a: Matrix::Mx {
                    codes: &c1,
                    scales: &s1,
                    format: f,
                },
                b: Matrix::Mx {
                    codes: &c2,
                    scales: &s2,
                    format: f,
                },
                m,
                n,
                k,
                b_layout: BLayout::Kn,
            };
            let prof = k_profile(&p, 5, &d.a.order, &d.b.order, 32).unwrap();
            let first = prof.iter().find(|c| c.differ > 0).unwrap();
            assert!(first.k_end > 128, "{prof:?}");
            assert_eq!(prof.iter().find(|c| c.k_end == 128).unwrap().differ, 0);
        } else {
            // the operand analysis names a block whose values really differ
            // between the paths, and no earlier one (checked by re-reading
            // the block's scales: a re-rounded block has a scale below the
            // reference it is shifted to)
            let blk = lo / 32;
            let kb = s.k / 32;
            let bytes = |n: &str| match &inp.0[n].values {
                mxbi::op::TensorValues::U8(v) => v.clone(),
                _ => unreachable!(),
            };
            if kind == NodeKind::X2Operand {
                let s2 = bytes("x2_scales");
                let col = d.first_col;
                let max = (0..kb).map(|b| s2[b * s.n + col]).max().unwrap();
                assert!(s2[blk * s.n + col] < max, "{dv}");
                assert!(words.contains("scale-point split"), "{words}");
            } else {
                let s1 = bytes("x1_scales");
                let shard = 5 / s.m_per_rank;
                let max = (shard * s.m_per_rank..(shard + 1) * s.m_per_rank)
                    .map(|r| s1[r * kb + blk])
                    .max()
                    .unwrap();
                assert!(s1[5 * kb + blk] < max, "{dv}");
                assert!(words.contains("content coupling"), "{words}");
            }
        }
    }
}

#[test]
fn a_reduction_divergence_names_the_step_and_the_ranks() {
    // MatmulAllReduce with a ring: rows of chunks 0 and 1 are added in
    // different rank orders (the position family's two copies)
    let spec = OpSpec::from_value(json!({"preset": "mmar-ring"})).unwrap();
    let inp = generate(&spec, &GenOpts::new(2));
    let out = run_op(&spec, &inp).unwrap();
    let a = out.provenance_of(0, 0).unwrap();
    let b = out.provenance_of(0, 4).unwrap();
    assert_ne!(a.computed_on, b.computed_on);
    let dv = mxbi::op::divergence::diverge(&spec, Some(&inp), a, b, None).unwrap();
    let n = &dv.nodes[0];
    assert_eq!(n.kind, NodeKind::Reduction);
    let i = n.node.unwrap() as usize;
    assert_eq!(n.ranks, Some((a.computed_on[i], b.computed_on[i])));
    assert!(a.computed_on[..i] == b.computed_on[..i]);
    assert!(dv.to_string().contains("position-dependent reduction"));
    // the same record twice: nothing diverges, and the words say so
    let same = mxbi::op::divergence::diverge(&spec, Some(&inp), a, a, None).unwrap();
    assert!(same.nodes.is_empty() && same.mechanism[0].contains("same computation"));
}

#[test]
fn op_check_exits_1_and_explains_a_failing_row() {
    let tmp = std::env::temp_dir().join(format!("mxbi-op-check-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let spec = tmp.join("kloop.json");
    std::fs::write(&spec, r#"{"preset": "agmm-v2-kloop"}"#).unwrap();
    let s = spec.to_str().unwrap();
    let o = mxbi(&[
        "op",
        "check",
        s,
        "--generate",
        "9",
        "--x2-scales",
        "k-varying",
        "--row",
        "5",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "BI_FAIL");
    assert_eq!(v["divergence"]["nodes"][0]["kind"], "order");
    std::fs::write(&spec, r#"{"preset": "agmm-v2-fixed"}"#).unwrap();
    let o = mxbi(&[
        "op",
        "check",
        s,
        "--generate",
        "9",
        "--x2-scales",
        "k-varying",
        "--row",
        "5",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let o = mxbi(&["op", "check", s, "--generate", "9", "--row", "99"]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&tmp).ok();
}
