//! `mxbi demo`: the main job, the batch-invariance checker, on built-in
//! subjects on the CPU model, no files needed: a small matrix per subject,
//! its verdicts as a grid, the first failure and its explanation (the
//! explainer names the orders behind the two observations from the bytes
//! alone, where their trees diverge, and a fix), the summary, and whether
//! the pattern is the one the subject's construction predicts.
//!
//! Subjects: a dispatch-table GEMM (an order chosen by M, as cuBLAS
//! heuristics and tuned-config tables do), and the all-gather-matmul op
//! presets `agmm-v2-fixed` and `agmm-v2-prefix` (see [`op_rows`]).

use super::{Outcome, Result};
use mxbi::bi::{check, run_matrix, CheckOptions, Family, Grid, Job, Report, RowPos, Rows, Verdict};
use mxbi::explain::{diverge, simplest_order, suggest, Varies};
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::order::{InType, Order};
use mxbi::subject::{Dispatch, Knobs, ScaleKind, Subject};
use mxbi::subjects::subject_from_spec;

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
    /// The matrix, in one line (K, N, input, M, settings).
    shape: String,
    /// Runs the check.
    run: Box<dyn Fn() -> std::result::Result<Report, String>>,
    /// A row-independent subject and its options: a failing batch cell is
    /// then explained.
    explain: Option<(Box<dyn Subject>, CheckOptions)>,
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
        confirm: mxbi::bi::DEFAULT_CONFIRM,
    }
}

fn dispatch_rows() -> Vec<DemoRow> {
    let table = Dispatch::parse("builtin", TABLE).expect("the built-in table parses");
    let ms = mxbi::bi::edge_ms(&table.m_boundaries());
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
    let o = opts(
        &[
            Family::Content,
            Family::Batch,
            Family::Position,
            Family::Permutation,
            Family::Repeat,
        ],
        ms,
        k,
        n,
        InType::F32,
    );
    let (subject, check_opts) = (table.clone(), o.clone());
    vec![DemoRow {
        about: "a dispatch-table GEMM: fma up to M = 16, fma;split=4 up to 256, then fma;split=8;reduce=pairwise".into(),
        shape: format!(
            "K = {k}, N = {n}, input f32, M = {}",
            o.ms.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", ")
        ),
        run: Box::new(move || check(&subject, None, &check_opts, &|_, _| {})),
        explain: Some((Box::new(table), o)),
        expect: format!("batch fails exactly where the table picks another order than at M = {m0} (M > 16); every other family passes"),
        holds: Box::new(holds),
    }]
}

/// The all-gather-matmul op presets `agmm-v2-fixed` (one path for every
/// row) and `agmm-v2-prefix` (the GATHER path re-rounds x2 to per-column
/// scales, which changes its bytes only when x2's scales vary along K), as
/// subjects (`op:PRESET`): world size 2, x1 scales ID, x2 scales ID and
/// VAR, M per rank 4 and 8, families content, position and rank.
fn op_rows() -> Vec<DemoRow> {
    let (ws, k, n) = (2usize, 256, 64);
    let jobs: Vec<Job> = ScaleKind::ALL
        .iter()
        .map(|&x2| Job {
            knobs: Knobs {
                world_size: Some(ws),
                x1_scales: Some(ScaleKind::Identity),
                x2_scales: Some(x2),
                deterministic_comm: None,
            },
            opts: CheckOptions {
                positions: vec![RowPos::Index(0), RowPos::Mid, RowPos::Last],
                ..opts(
                    &[Family::Content, Family::Position, Family::Rank],
                    vec![4 * ws, 8 * ws],
                    k,
                    n,
                    InType::E4M3,
                )
            },
            draw: mxbi::bi::Draw::Wide,
        })
        .collect();
    let shape = format!(
        "K = {k}, N = {n}, MXFP8 (e4m3) inputs, world size {ws}, M = {} and {} ({} and {} rows per rank), x1 scales ID, x2 scales ID and VAR (K-varying)",
        4 * ws,
        8 * ws,
        4,
        8
    );
    let row = |preset: &'static str, about: &str, expect: &str, holds: Box<dyn Fn(&Report) -> bool>| {
        let jobs = jobs.clone();
        let spec = format!("op:{preset}");
        DemoRow {
            about: about.into(),
            shape: shape.clone(),
            run: Box::new(move || run_matrix(&jobs, &|kn: &Knobs| subject_from_spec(&spec, kn), None, &|_, _| {})),
            explain: None,
            expect: expect.into(),
            holds,
        }
    };
    let varying = |c: &mxbi::bi::Cell| c.knobs.x2_scales == Some(ScaleKind::Varying);
    vec![
        row(
            "agmm-v2-fixed",
            "AllGatherMatmul V2, MXFP8, the fix: every row through one path (x2 scales inside the fused sum)",
            "passes every family, with either x2 scale kind",
            Box::new(|r: &Report| {
                r.count(Verdict::Pass) == r.cells.len() && !r.cells.is_empty()
            }),
        ),
        row(
            "agmm-v2-prefix",
            "AllGatherMatmul V2, MXFP8, before the fix: GATHER rows re-round x2 to per-column scales, LOCAL rows do not",
            "rank fails exactly where a GATHER copy is compared with a LOCAL one, and position fails, only with K-varying x2 scales; content (seed 000's test) passes",
            Box::new(move |r: &Report| {
                let fails = |c: &mxbi::bi::Cell| c.verdict == Verdict::Fail;
                r.cells.iter().all(|c| c.verdict != Verdict::Error && c.verdict != Verdict::NonDet)
                    && r.cells.iter().filter(|c| fails(c)).all(|c| varying(c) && c.family != Family::Content)
                    && r.cells.iter().any(|c| fails(c) && c.family == Family::Rank)
                    && r.cells.iter().any(|c| fails(c) && c.family == Family::Position)
                    && r.cells
                        .iter()
                        .filter(|c| c.family == Family::Rank && varying(c))
                        .all(|c| fails(c) == c.path.as_deref().is_some_and(|p| p.contains("GATHER")))
            }),
        ),
    ]
}

/// The target row's output as `subject` computes it in a batch of `m`
/// rows where it sits at index `at` (the other rows: ids no check uses).
fn target_output(subject: &dyn Subject, rows: &Rows, m: usize, at: usize) -> Option<Vec<f32>> {
    let ids: Vec<u64> = (0..m).map(|j| if j == at { 0 } else { (1 << 48) + j as u64 }).collect();
    let a = rows.batch(&ids);
    let p = Problem {
        a: Matrix::F32(&a),
        b: Matrix::F32(&rows.b),
        m,
        n: rows.n,
        k: rows.k,
        b_layout: BLayout::Kn,
    };
    subject.run(&p, Some(&[at])).ok()
}

/// The simplest candidate order that reproduces `observed` for the target row.
fn identify_row(rows: &Rows, observed: &[f32]) -> Option<Order> {
    simplest_order(&rows.row(0), &rows.b, rows.k, rows.n, observed)
}

/// The explanation of the first failing `batch` cell of a subject whose
/// rows do not depend on each other: its target row's output is rebuilt at
/// the baseline M and the cell's M (checked against the bytes the cell
/// reported), the explainer names the order behind each from the bytes
/// alone, says where the two trees diverge, and suggests a fix. None when
/// there is no such cell or the rebuilt bytes are not the cell's.
fn explain_batch_failure(subject: &dyn Subject, report: &Report, opts: &CheckOptions) -> Option<Vec<String>> {
    let cell = report
        .cells
        .iter()
        .find(|c| c.verdict == Verdict::Fail && c.family == Family::Batch)?;
    let o = cell.diff.first_offenders.first()?;
    let rows = Rows::new(opts.seed, opts.k, opts.n, opts.input);
    let (m0, m) = (opts.ms[0], cell.m);
    let base = target_output(subject, &rows, m0, o.row)?;
    let var = target_output(subject, &rows, m, o.row)?;
    let hex = |v: &[f32]| format!("{:08x}", v[o.col].to_bits());
    if hex(&base) != o.baseline || hex(&var) != o.variant {
        return None;
    }
    let (left, right) = (identify_row(&rows, &base)?, identify_row(&rows, &var)?);
    let diff = diverge(&left, &right, opts.k, false);
    let mut lines = vec![format!(
        "explained from the bytes alone (mxbi explain): at M = {m0} the row is {left}, at M = {m} it is {right}"
    )];
    lines.extend(diff.to_string().lines().map(|l| format!("  {l}")));
    for f in suggest(&diff, &Varies::BatchSize { left: m0, right: m }) {
        lines.push(format!("fix: {f}"));
    }
    Some(lines)
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
        let report = (row.run)()?;
        outln!("== {}", report.subject);
        outln!("   {}", row.about);
        outln!("   {}", row.shape);
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
        if let Some((subject, opts)) = &row.explain {
            for l in explain_batch_failure(subject.as_ref(), &report, opts).unwrap_or_default() {
                outln!("   {l}");
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
