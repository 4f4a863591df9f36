//! The CPU op models at world sizes 2, 4 and 8 through the checker's `rank`,
//! `position` and `repeat` families (`op:` subjects, Knobs.world_size):
//! AllGatherMatmul (both presets, x2 scales ID and VAR) and
//! MatmulReduceScatter / MatmulAllReduce under every reduction model
//! (ring, tree, fixed, nondet; sums in f32 and bf16). Every cell's verdict
//! is pinned to what the model's construction predicts; the table in
//! docs/OPS.md ("World sizes 4 and 8 on the CPU model") is checked here.

use mxbi::bi::{run_matrix, CheckOptions, Draw, Family, Job, Report, RowPos, Verdict};
use mxbi::op::subject::OpSubject;
use mxbi::order::InType;
use mxbi::subject::{Knobs, ScaleKind, Subject};

const FAMILIES: [Family; 3] = [Family::Rank, Family::Position, Family::Repeat];

fn job(ws: usize, x2: Option<ScaleKind>) -> Job {
    Job {
        knobs: Knobs {
            world_size: Some(ws),
            x1_scales: x2.map(|_| ScaleKind::Varying),
            x2_scales: x2,
            deterministic_comm: None,
        },
        opts: CheckOptions {
            families: FAMILIES.to_vec(),
            // 4 rows per rank (per reduce chunk)
            ms: vec![4 * ws],
            k: 256,
            n: 64,
            positions: Vec::new(),
            seed: 3,
            input: InType::E4M3,
            repeats: 3,
            confirm: 3,
        },
        draw: Draw::Wide,
    }
}

fn check(subject: &'static str, ws: usize, x2: Option<ScaleKind>) -> Report {
    let factory = move |k: &Knobs| OpSubject::new(subject, k).map(|s| Box::new(s) as Box<dyn Subject>);
    let r = run_matrix(&[job(ws, x2)], &factory, None, &|_, _| {}).unwrap_or_else(|e| panic!("{subject}: {e}"));
    assert!(r.summary.valid, "{subject} ws {ws}: {}", r.summary_line());
    assert!(
        r.controls.iter().all(|c| c.held),
        "{subject}: a positive control did not fail"
    );
    r
}

/// The global rows a cell compares: (baseline row, variant row, variant
/// rank); `None` for repeat cells (all rows, rank 0).
fn compared(c: &mxbi::bi::Cell) -> Option<(usize, usize, usize)> {
    let m = c.m;
    let idx = |label: &str| label.parse::<RowPos>().unwrap().resolve(m).unwrap();
    match c.family {
        Family::Repeat => None,
        Family::Position => Some((0, idx(&c.row), 0)),
        Family::Rank => {
            let r = c.rank.unwrap();
            let i = idx(&c.row);
            let ws = job_ws(c);
            if c.id.ends_with("/held") {
                Some((i, i, r))
            } else {
                let off = i % (m / ws);
                Some((off, r * (m / ws) + off, r))
            }
        }
        f => panic!("unexpected family {f}"),
    }
}

fn job_ws(c: &mxbi::bi::Cell) -> usize {
    c.knobs.world_size.unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Red {
    Ring,
    Tree,
    Fixed,
    Nondet,
}

/// What the reduce model predicts for a cell (nondet: see the test).
fn reduce_expect(c: &mxbi::bi::Cell, red: Red, scatter: bool) -> Verdict {
    let ws = job_ws(c);
    let cr = c.m / ws;
    let Some((base, var, rank)) = compared(c) else {
        // repeat: one order per chunk, drawn again on every run for nondet
        return if red == Red::Nondet && ws > 2 {
            Verdict::NonDet
        } else {
            Verdict::Pass
        };
    };
    if scatter && c.family == Family::Rank && c.id.ends_with("/held") && var / cr != rank {
        return Verdict::Error;
    }
    let same_order = ws == 2 || base / cr == var / cr || matches!(red, Red::Tree | Red::Fixed);
    if same_order {
        Verdict::Pass
    } else {
        Verdict::Fail
    }
}

fn pattern(r: &Report) -> String {
    let mut counts = Vec::new();
    for v in [
        Verdict::Pass,
        Verdict::Fail,
        Verdict::NonDet,
        Verdict::Error,
        Verdict::Vacuous,
    ] {
        let n = r.count(v);
        if n > 0 {
            counts.push(format!("{} {n}", v.name().replace("BI_", "")));
        }
    }
    counts.join(", ")
}

#[test]
fn reduce_ops_show_their_reduction_order_only_from_world_size_3_on() {
    let reds = [
        ("ring", Red::Ring),
        ("tree", Red::Tree),
        ("fixed", Red::Fixed),
        ("nondet", Red::Nondet),
    ];
    let mut table = vec![
        "| op | reduction | WS 2 | WS 4 | WS 8 |".to_string(),
        "|---|---|---|---|---|".to_string(),
    ];
    for (op, scatter) in [("mmrs", true), ("mmar", false)] {
        for (rname, red) in reds {
            let mut by_sum = Vec::new();
            for sum in ["f32", "bf16"] {
                let mut row = Vec::new();
                let name: &'static str = Box::leak(format!("{op}-fixed;reduction={rname};sum={sum}").into_boxed_str());
                for ws in [2, 4, 8] {
                    let r = check(name, ws, None);
                    assert_eq!(r.count(Verdict::Vacuous), 0, "{name} ws {ws}");
                    for c in &r.cells {
                        let want = reduce_expect(c, red, scatter);
                        if red == Red::Nondet && ws > 2 {
                            // every run draws again: the baseline's two runs
                            // differ (NON_DET) unless their draws coincide on
                            // the row's chunk; then the variant, a third draw,
                            // is compared (PASS or FAIL)
                            let ok = match c.family {
                                Family::Repeat => c.verdict == Verdict::NonDet,
                                _ => {
                                    matches!(c.verdict, Verdict::NonDet | Verdict::Pass | Verdict::Fail)
                                        || c.verdict == want
                                }
                            };
                            assert!(ok, "{name} ws {ws} {}: {:?} {:?}", c.id, c.verdict, c.reason);
                        } else {
                            assert_eq!(c.verdict, want, "{name} ws {ws} {}: {:?}", c.id, c.reason);
                        }
                        if c.verdict == Verdict::Error {
                            assert!(
                                c.reason.as_deref().unwrap().contains("reduce-scatter leaves rows"),
                                "{:?}",
                                c.reason
                            );
                        }
                    }
                    if red == Red::Nondet && ws > 2 {
                        // most cells see two different draws
                        let nd = r.count(Verdict::NonDet);
                        assert!(
                            nd * 2 > r.cells.len() - r.count(Verdict::Error),
                            "{name} ws {ws}: {}",
                            pattern(&r)
                        );
                    }
                    row.push(pattern(&r));
                }
                by_sum.push(row);
            }
            // a bf16 sum shows the same pattern as an f32 sum
            assert_eq!(by_sum[0], by_sum[1], "{op} {rname}");
            table.push(format!("| {op} | {rname} | {} |", by_sum[0].join(" | ")));
        }
    }
    assert_in_doc(&table);
}

/// The table must be in docs/OPS.md as printed.
fn assert_in_doc(table: &[String]) {
    let table = table.join("\n");
    println!("{table}");
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/OPS.md")).unwrap();
    assert!(doc.contains(&table), "docs/OPS.md lacks the table:\n{table}");
}

#[test]
fn all_gather_matmul_at_world_sizes_4_and_8() {
    let mut table = vec![
        "| preset | x2 scales | WS 4 | WS 8 |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    for preset in ["agmm-v2-prefix", "agmm-v2-fixed"] {
        for x2 in ScaleKind::ALL {
            let mut row = Vec::new();
            for ws in [4, 8] {
                let r = check(preset, ws, Some(x2));
                let split = preset == "agmm-v2-prefix" && x2 == ScaleKind::Varying;
                for c in &r.cells {
                    let mpr = c.m / ws;
                    // the path of a row on a rank: LOCAL on its owner, GATHER elsewhere
                    let want = match compared(c) {
                        None => Verdict::Pass,
                        Some((base, var, rank)) => {
                            let local = |row: usize, on: usize| row / mpr == on;
                            let base_rank = 0;
                            if split && local(base, base_rank) != local(var, rank) {
                                Verdict::Fail
                            } else {
                                Verdict::Pass
                            }
                        }
                    };
                    assert_eq!(c.verdict, want, "{preset} {x2} ws {ws} {}", c.id);
                }
                row.push(pattern(&r));
            }
            table.push(format!("| {preset} | {x2} | {} |", row.join(" | ")));
        }
    }
    assert_in_doc(&table);
}

#[test]
fn reduce_subjects_refuse_what_they_cannot_do() {
    let ws = |n| Knobs {
        world_size: Some(n),
        ..Knobs::default()
    };
    let e = OpSubject::new("mmrs-ring", &ws(3)).err().unwrap();
    assert!(e.contains("does not support world size 3"), "{e}");
    let e = OpSubject::new("mmrs-ring;reduction=spiral", &ws(4)).err().unwrap();
    assert!(e.contains("unknown reduction 'spiral'"), "{e}");
    let e = OpSubject::new("mmar-ring;sum=f16", &ws(4)).err().unwrap();
    assert!(e.contains("unknown sum type 'f16'"), "{e}");
    let e = OpSubject::new("agmm-v2-fixed;sum=bf16", &ws(4)).err().unwrap();
    assert!(e.contains("only the reduce presets"), "{e}");
    let det = Knobs {
        deterministic_comm: Some(true),
        ..ws(4)
    };
    let e = OpSubject::new("mmar-nondet", &det).err().unwrap();
    assert!(e.contains("contradicts"), "{e}");
    assert!(OpSubject::new("mmar-ring", &det).is_ok());
    let scales = Knobs {
        x2_scales: Some(ScaleKind::Varying),
        ..ws(4)
    };
    assert!(OpSubject::new("mmar-ring", &scales)
        .err()
        .unwrap()
        .contains("no MX scale knobs"));
    let s = OpSubject::new("mmar-fixed;reduction=tree;sum=bf16", &ws(8)).unwrap();
    assert_eq!(
        (s.name().as_str(), s.world_size()),
        ("op:mmar-fixed;reduction=tree;sum=bf16", 8)
    );
    assert_eq!(s.input(), Some(InType::Bf16));
}
