//! `mxbi demo`: the main job, the batch-invariance checker, on built-in
//! subjects on the CPU model, no files needed: a small matrix per subject,
//! its verdicts as a grid, the first failure, the summary, and whether the
//! pattern is the one the subject's construction predicts.
//!
//! Subjects: a dispatch-table GEMM (an order chosen by M, as cuBLAS
//! heuristics and tuned-config tables do), and the op presets
//! (see [`op_rows`]).

use super::{Outcome, Result};
use crate::bi::{check, CheckOptions, Family, Grid, Report, Verdict};
use crate::order::InType;
use crate::subject::{Dispatch, Subject};

/// The built-in dispatch table: fma up to 16 rows, split-K 4 up to 256,
/// then split-K 8 with a pairwise reduction.
const TABLE: &str = r#"{"dispatch": [
    {"m_max": 16, "order": "fma"},
    {"m_max": 256, "order": "fma;split=4"},
    {"order": "fma;split=8;reduce=pairwise"}
]}"#;

/// One subject of the demo and the check it gets.
struct DemoRow {
    /// What the subject is, in one line.
    about: String,
    subject: Box<dyn Subject>,
    opts: CheckOptions,
    /// What the construction predicts, in one line.
    expect: String,
    /// Whether the report shows exactly that.
    holds: Box<dyn Fn(&Report) -> bool>,
}

fn opts(families: &[Family], ms: Vec<usize>, k: usize, n: usize, input: InType) -> CheckOptions {
    CheckOptions {
        families: families.to_vec(),
        ms,
        k,
        n,
        positions: vec![],
        seed: 1,
        input,
        repeats: 3,
    }
}

fn dispatch_rows() -> Vec<DemoRow> {
    let table = Dispatch::parse("builtin", TABLE).expect("the built-in table parses");
    let ms = crate::bi::edge_ms(&table.m_boundaries());
    let (k, n) = (256, 16);
    let m0 = ms[0];
    let picks = table.clone();
    let holds = move |r: &Report| {
        r.cells.iter().all(|c| {
            let differs = c.family == Family::Batch
                && picks.pick(c.m, n, k).map(|e| e.order) != picks.pick(m0, n, k).map(|e| e.order);
            (c.verdict == Verdict::Fail) == differs && c.verdict != Verdict::Error
        }) && r.count(Verdict::Fail) > 0
    };
    vec![DemoRow {
        about: "a dispatch-table GEMM: fma up to M = 16, fma;split=4 up to 256, then fma;split=8;reduce=pairwise".into(),
        subject: Box::new(table),
        opts: opts(
            &[Family::Content, Family::Batch, Family::Position, Family::Permutation, Family::Repeat],
            ms,
            k,
            n,
            InType::F32,
        ),
        expect: format!("batch fails exactly where the table picks another order than at M = {m0} (M > 16); every other family passes"),
        holds: Box::new(holds),
    }]
}

/// The op presets `agmm-v2-fixed` and `agmm-v2-prefix` as subjects
/// (`op:PRESET`). Empty until the op subject is part of this build: the
/// demo then shows the dispatch-table subject only.
fn op_rows() -> Vec<DemoRow> {
    Vec::new()
}

pub fn run() -> Result<Outcome> {
    outln!("mxbi demo: the batch-invariance checker on built-in subjects (the CPU model, bit-exact)");
    outln!("a cell compares the bytes of one output row across the variants a family demands;");
    outln!(
        "grid: . BI_PASS   X BI_FAIL   ~ NON_DET   o VACUOUS (no order change could show)   E ERROR   (blank: no cell)\n"
    );
    let mut all_held = true;
    let mut totals = [0usize; 5];
    for row in dispatch_rows().into_iter().chain(op_rows()) {
        let report = check(row.subject.as_ref(), None, &row.opts, &|_, _| {})?;
        outln!("== {}", report.subject);
        outln!("   {}", row.about);
        outln!(
            "   K = {}, N = {}, input {}, M = {}",
            row.opts.k,
            row.opts.n,
            report.input,
            row.opts.ms.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", ")
        );
        outln!();
        for line in Grid::new(&report.cells).text(&report.cells).lines() {
            outln!("   {line}");
        }
        outln!();
        if let Some(c) = report.cells.iter().find(|c| c.verdict == Verdict::Fail) {
            outln!(
                "   first failure: {}: {} of {} rows, {} bytes, {} columns differ, max {} ulp",
                c.id,
                c.diff.rows_differing,
                c.diff.rows,
                c.diff.bytes_differing,
                c.diff.columns_differing,
                c.diff.max_ulp
            );
            if let Some(o) = c.diff.first_offenders.first() {
                outln!(
                    "     row {} col {}: {} (baseline) vs {} (variant)",
                    o.row,
                    o.col,
                    o.baseline,
                    o.variant
                );
            }
        }
        outln!("   {}", report.summary_line());
        let held = report.summary.valid && (row.holds)(&report);
        all_held &= held;
        outln!(
            "   expected: {} -- {}\n",
            row.expect,
            if held { "as expected" } else { "NOT as expected" }
        );
        for (t, v) in totals.iter_mut().zip(Verdict::ALL) {
            *t += report.count(v);
        }
    }
    let counts: Vec<String> = Verdict::ALL
        .iter()
        .zip(totals)
        .map(|(v, t)| format!("{t} {v}"))
        .collect();
    outln!("summary: {} cells: {}", totals.iter().sum::<usize>(), counts.join(", "));
    outln!(
        "every subject behaved as its construction predicts: {}",
        if all_held { "yes" } else { "NO" }
    );
    outln!("(run a subject yourself: mxbi bi run --subject SUBJECT --family batch,content --k 256 --n 16; the MX presets table: mxbi mx-table)");
    Ok(if all_held { Outcome::Held } else { Outcome::Failed })
}
