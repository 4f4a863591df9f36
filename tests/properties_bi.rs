//! Property suite: a batch-invariant subject passes every family of the
//! checker (src/bi), through the library API.
//!
//! - The CPU model of any order of the grammar computes every row with the
//!   same order whatever M, the row's position or the other rows: every
//!   cell of the content, batch, position, permutation and repeat families
//!   passes (or is vacuous), and the positive controls fail as they must,
//!   for random orders, batch sizes, K, N and seeds.
//! - The op preset `agmm-v2-fixed` (one path, a fixed tensor-core order;
//!   docs/OPS.md) passes those families and the rank family for random
//!   world sizes, scale kinds and shapes.
//! - The property can fail: a dispatch subject whose order changes past an
//!   M boundary is caught, and the shrunk case is the batch family across
//!   that boundary.
//!
//! Expensive (each case is a whole check): `PROPTEST_CASES=N` runs N / 100
//! cases (see tests/common/props.rs).

#[path = "common/props.rs"]
mod props;

use mxbi::bi::{check, run_matrix, CheckOptions, Draw, Family, Job, Report, RowPos, Verdict};
use mxbi::op::subject::OpSubject;
use mxbi::order::{InType, Order};
use mxbi::subject::{Dispatch, Knobs, Model, ScaleKind, Subject};
use props::{cases_expensive, in_type, order, shrunk_failure};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const FAMILIES: [Family; 5] = [
    Family::Content,
    Family::Batch,
    Family::Position,
    Family::Permutation,
    Family::Repeat,
];

/// One to three batch sizes in `1..40`, ascending, distinct.
fn batch_sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::btree_set(1usize..40, 1..4).prop_map(|s| s.into_iter().collect())
}

/// The property body: the report is valid (controls failed) and no cell
/// failed, was non-deterministic or could not run.
fn passes_every_family(r: &Report, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(r.summary.valid, "{}: invalid run: {}", what, r.summary_line());
    let bad: Vec<String> = r
        .cells
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Fail | Verdict::NonDet | Verdict::Error))
        .map(|c| format!("{} {:?} {:?}", c.id, c.verdict, c.reason))
        .collect();
    prop_assert!(bad.is_empty(), "{}: {}", what, bad.join("; "));
    prop_assert!(
        r.count(Verdict::Pass) + r.count(Verdict::Vacuous) > 0,
        "{}: no cell",
        what
    );
    Ok(())
}

fn check_model(subject: &dyn Subject, t: InType, ms: Vec<usize>, k: usize, n: usize, seed: u64) -> Report {
    let opts = CheckOptions {
        families: FAMILIES.to_vec(),
        ms,
        k,
        n,
        positions: vec![],
        seed,
        input: t,
        repeats: 2,
        confirm: 3,
    };
    check(subject, None, &opts, &|_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", subject.name()))
}

/// The model of any order passes every family.
#[test]
fn a_fixed_order_model_passes_every_family() {
    let s = (order(), batch_sizes(), 32usize..200, 4usize..16, any::<u64>());
    props::check(cases_expensive(12), s, |(o, ms, k, n, seed)| {
        let r = check_model(&Model::new(o), in_type(&o), ms, k, n, seed);
        passes_every_family(&r, &o.to_string())
    });
}

/// The invariant op preset passes every family, the rank family included.
#[test]
fn the_invariant_op_preset_passes_every_family() {
    let kinds = || prop::sample::select(ScaleKind::ALL.to_vec());
    let s = (
        prop::sample::select(vec![2usize, 4]),
        (kinds(), kinds()),
        prop::collection::btree_set(1usize..6, 1..3),
        1usize..5,
        8usize..40,
        any::<u64>(),
    );
    props::check(cases_expensive(12), s, |(ws, (x1, x2), per_rank, k_blocks, n, seed)| {
        let job = Job {
            knobs: Knobs {
                world_size: Some(ws),
                x1_scales: Some(x1),
                x2_scales: Some(x2),
                deterministic_comm: Some(true),
            },
            opts: CheckOptions {
                families: [&FAMILIES[..], &[Family::Rank]].concat(),
                ms: per_rank.into_iter().map(|m| m * ws).collect(),
                k: 32 * k_blocks,
                n,
                positions: vec![RowPos::Index(0), RowPos::Mid, RowPos::Last],
                seed,
                input: InType::E4M3,
                repeats: 2,
                confirm: 3,
            },
            draw: Draw::Wide,
        };
        let factory = |kn: &Knobs| OpSubject::new("agmm-v2-fixed", kn).map(|s| Box::new(s) as Box<dyn Subject>);
        let r = run_matrix(&[job], &factory, None, &|_, _| {}).unwrap();
        passes_every_family(&r, "op:agmm-v2-fixed")?;
        prop_assert!(r.cells.iter().any(|c| c.family == Family::Rank), "no rank cell");
        Ok(())
    });
}

/// The property can fail: a dispatch subject (`fma` up to M = 8, a split
/// above) is caught, and the shrunk case is the batch family with batch
/// sizes on both sides of the boundary.
#[test]
fn bi_property_catches_an_order_that_depends_on_m() {
    let d = Dispatch::parse(
        "planted.json",
        r#"{"dispatch": [{"m_max": 8, "order": "fma"}, {"order": "fma;split=4"}]}"#,
    )
    .unwrap();
    let fma: Order = "fma".parse().unwrap();
    let (why, (ms, _, _)) = shrunk_failure(12, (batch_sizes(), 32usize..200, any::<u64>()), |(ms, k, seed)| {
        passes_every_family(&check_model(&d, in_type(&fma), ms, k, 8, seed), "planted dispatch")
    });
    assert!(why.contains("batch/"), "{why}");
    assert!(ms.len() == 2 && ms[0] <= 8 && ms[1] > 8, "{ms:?}: {why}");
}
