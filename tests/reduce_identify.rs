//! Identifiability of the reduction order at world sizes 4 and 8: from one
//! output chunk per rank (the reduce-scatter's output) and the per-rank
//! partials, the explainer's passive search over rank orders
//! (`mxbi::explain::reduction`) names the order of every chunk (each ring
//! position, the tree, fixed, a non-deterministic draw) uniquely among all
//! serial orders and the tree, for f32 and bf16 sums; at world size 2 every
//! order is one computation. The table in docs/OPS.md ("Naming the
//! reduction order") is checked here.

use mxbi::explain::reduction::{candidates, identify_chunk, segments, RankOrder};
use mxbi::op::reduce::{partials, rank_order, Reduction, Sum};
use mxbi::op::{generate, run_op, GenOpts, OpSpec};
use serde_json::json;
use std::collections::BTreeSet;

fn spec(op: &str, red: &str, sum: &str, ws: usize) -> OpSpec {
    let reduction = if red == "nondet" {
        json!({"kind": "nondet", "seed": 5})
    } else {
        json!({ "kind": red })
    };
    OpSpec::from_value(json!({
        "preset": format!("{op}-fixed"), "reduction": reduction, "sum": sum,
        "world_size": ws, "m": 4 * ws, "k": 256, "n": 64,
    }))
    .unwrap()
}

fn reduce_spec(s: &OpSpec) -> &mxbi::op::reduce::ReduceSpec {
    match s {
        OpSpec::MatmulReduceScatter(r) | OpSpec::MatmulAllReduce(r) => r,
        _ => unreachable!(),
    }
}

fn adder(sum: Sum) -> impl Fn(f32, f32) -> f32 + Sync {
    move |x, y| sum.add(x, y)
}

#[test]
fn every_chunk_names_its_reduction_order_at_world_sizes_4_and_8() {
    let mut table = vec![
        "| WS | model | sum | candidates searched | chunk orders found (chunk 0, 1, ...) | elements needed per chunk (max) |".to_string(),
        "|---:|---|---|---:|---|---:|".to_string(),
    ];
    for ws in [4, 8] {
        let cands = candidates(ws, true);
        assert_eq!(cands.len(), (1..=ws).product::<usize>() / 2 + 1);
        for red in ["ring", "tree", "fixed", "nondet"] {
            for sum_name in ["f32", "bf16"] {
                let s = spec("mmrs", red, sum_name, ws);
                let rs = reduce_spec(&s);
                let add = adder(rs.sum);
                let inputs = generate(&s, &GenOpts::new(11));
                let p = partials(rs, &inputs).unwrap();
                let out = run_op(&s, &inputs).unwrap();
                let n = rs.n;
                let cr = rs.m / ws;
                let mut names = Vec::new();
                let mut needed = 0;
                for (c, chunk) in out.per_rank.iter().enumerate() {
                    let parts: Vec<&[f32]> = p.iter().map(|pr| &pr[c * cr * n..(c + 1) * cr * n]).collect();
                    let id = identify_chunk(&parts, &chunk.data, &cands, &add).unwrap();
                    assert_eq!(
                        id.matches.len(),
                        1,
                        "ws {ws} {red} {sum_name} chunk {c}: {:?}",
                        id.matches
                    );
                    let got = &id.matches[0];
                    // the model's own order for this chunk
                    let (ranks, pairwise) = rank_order(rs.reduction, ws, c, 0);
                    let want = if pairwise {
                        RankOrder::pairwise(ranks)
                    } else {
                        RankOrder::serial(ranks)
                    };
                    assert_eq!(got.key(), want.key(), "ws {ws} {red} chunk {c}");
                    let nm = got.names(ws);
                    match rs.reduction {
                        Reduction::Ring => assert!(nm.contains(&format!("ring@{c}")), "{nm:?}"),
                        Reduction::Fixed => assert!(nm.contains(&"fixed".to_string()), "{nm:?}"),
                        Reduction::Tree => assert_eq!(nm, vec!["tree"]),
                        Reduction::Nondet { .. } => {}
                    }
                    needed = needed.max(id.decided_at);
                    // a planted error (chunk 0): one flipped bit matches nothing
                    if c > 0 {
                        names.push(nm.join("="));
                        continue;
                    }
                    let mut bad = chunk.data.clone();
                    bad[n + 3] = f32::from_bits(bad[n + 3].to_bits() ^ 1);
                    let miss = identify_chunk(&parts, &bad, &cands, &add).unwrap();
                    assert!(miss.matches.is_empty(), "ws {ws} {red} chunk {c}");
                    assert_eq!(miss.closest.unwrap().1, 1);
                    names.push(nm.join("="));
                }
                // ring and fixed share one chunk's order (ring@WS-1 = fixed), the
                // other chunks tell them apart
                if rs.reduction == Reduction::Ring {
                    assert_eq!(names.iter().filter(|x| x.contains("fixed")).count(), 1);
                }
                let shown = if red == "nondet" {
                    let distinct: BTreeSet<&String> = names.iter().collect();
                    format!("each chunk its own draw ({} distinct of {ws})", distinct.len())
                } else {
                    names.join(", ")
                };
                table.push(format!(
                    "| {ws} | {red} | {sum_name} | {} | {shown} | {needed} |",
                    cands.len()
                ));
            }
        }
    }
    let table = table.join("\n");
    println!("{table}");
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/OPS.md")).unwrap();
    assert!(
        doc.contains(&table),
        "docs/OPS.md lacks the identification table:\n{table}"
    );
}

#[test]
fn at_world_size_2_every_order_is_one_computation() {
    assert_eq!(candidates(2, true).len(), 1);
    for red in ["ring", "tree", "fixed", "nondet"] {
        let s = spec("mmrs", red, "f32", 2);
        let rs = reduce_spec(&s);
        let inputs = generate(&s, &GenOpts::new(11));
        let p = partials(rs, &inputs).unwrap();
        let out = run_op(&s, &inputs).unwrap();
        let cr = rs.m / 2 * rs.n;
        for (c, chunk) in out.per_rank.iter().enumerate() {
            let parts: Vec<&[f32]> = p.iter().map(|pr| &pr[c * cr..(c + 1) * cr]).collect();
            let add = adder(Sum::F32);
            // all four named orders reproduce the chunk
            for o in [
                RankOrder::ring(2, 0),
                RankOrder::ring(2, 1),
                RankOrder::pairwise(vec![0, 1]),
            ] {
                let id = identify_chunk(&parts, &chunk.data, &[o], &add).unwrap();
                assert_eq!(id.matches.len(), 1);
            }
        }
    }
}

#[test]
fn an_all_reduce_buffer_is_cut_at_its_chunk_boundaries() {
    // the chunk boundaries are not given: segments() finds where the order
    // changes (a ring all-reduce changes it at every chunk)
    for ws in [4, 8] {
        let s = spec("mmar", "ring", "f32", ws);
        let rs = reduce_spec(&s);
        let inputs = generate(&s, &GenOpts::new(11));
        let p = partials(rs, &inputs).unwrap();
        let out = run_op(&s, &inputs).unwrap();
        let parts: Vec<&[f32]> = p.iter().map(|x| x.as_slice()).collect();
        let cands = candidates(ws, false);
        let segs = segments(&parts, &out.per_rank[0].data, &cands, &adder(Sum::F32));
        let chunk = rs.m / ws * rs.n;
        assert_eq!(segs.len(), ws, "{segs:?}");
        for (c, sg) in segs.iter().enumerate() {
            // a segment may run a few elements into the next chunk, where
            // those elements happen to agree with its order too
            assert!(sg.start >= c * chunk && sg.start < c * chunk + 8, "ws {ws}: {segs:?}");
            assert!(sg.matches.contains(&c), "ws {ws} segment {c}: {:?}", sg.matches);
        }
    }
}
