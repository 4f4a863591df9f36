//! Flakes are flakes (bi::confirm): a subject that is batch-invariant but
//! not deterministic gives NON_DET cells with their rate, never BI_FAIL,
//! and its run does not exit 1; with the re-runs off it does fail.

use mxbi::bi::{check, CheckOptions, Family, Verdict};
use mxbi::gemm::Problem;
use mxbi::order::InType;
use mxbi::rng::SplitMix64;
use mxbi::subject::{Model, Subject, SubjectError};
use std::sync::atomic::{AtomicU64, Ordering};

/// The CPU model under `fma;split=4` on 1 call in `every` (chosen by a
/// hash of a call counter, so the flakes do not lock to the checker's
/// call pattern), else `fma`: row-only, so batch-invariant, but not
/// deterministic.
struct Flaky {
    calls: AtomicU64,
    every: u64,
}

impl Subject for Flaky {
    fn name(&self) -> String {
        "flaky".into()
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        let spec = if SplitMix64::new(call).below(self.every) == 0 {
            "fma;split=4"
        } else {
            "fma"
        };
        Model::new(spec.parse().unwrap()).run(p, rows)
    }
}

const FAMILIES: [Family; 6] = [
    Family::Content,
    Family::Batch,
    Family::Position,
    Family::Permutation,
    Family::Repeat,
    Family::Anchor,
];

fn opts(confirm: usize) -> CheckOptions {
    CheckOptions {
        families: FAMILIES.to_vec(),
        ms: vec![1, 2, 9, 17, 33, 64],
        k: 256,
        n: 16,
        positions: vec![],
        seed: 3,
        input: InType::F32,
        repeats: 3,
        confirm,
    }
}

fn run(confirm: usize) -> mxbi::bi::Report {
    let s = Flaky {
        calls: AtomicU64::new(0),
        every: 5,
    };
    check(&s, None, &opts(confirm), &|_, _| {}).unwrap()
}

#[test]
fn a_flaky_subject_is_non_det_never_bi_fail() {
    let r = run(3);
    eprintln!("confirm 3: {}", r.summary_line());
    assert!(r.summary.valid, "{}", r.summary_line());
    assert_eq!(r.count(Verdict::Fail), 0, "{}", r.text());
    // flaky variants confirmed as such, not only baselines caught twice
    let confirmed: Vec<_> = r
        .cells
        .iter()
        .filter(|c| c.reason.as_deref().is_some_and(|x| x.starts_with("the sides differ")))
        .collect();
    assert!(!confirmed.is_empty(), "{}", r.text());
    for c in r.cells.iter().filter(|c| c.verdict == Verdict::NonDet) {
        let rate = c.nondet_rate.as_ref().expect("every NON_DET cell has its rate");
        assert!(rate.differed >= 1 && rate.differed <= rate.reruns, "{}: {rate:?}", c.id);
        approx::assert_abs_diff_eq!(rate.rate, rate.differed as f64 / rate.reruns as f64, epsilon = 1e-12);
        assert!(c.reason.as_deref().unwrap().contains("re-runs differed"), "{}", c.id);
    }
    // NON_DET is exit 0 unless --strict (then 1), as documented
    assert_eq!(r.exit_code(false), 0);
    assert_eq!(r.exit_code(true), 1);
    // the rate is in every format
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"nondet_rate\":{\"differed\":"), "{json}");
    assert!(r.markdown().contains("re-runs differed"));
    assert!(r.junit(false).contains("re-runs differed"));
}

#[test]
fn without_confirm_the_flake_reads_as_bi_fail() {
    let r = run(0);
    eprintln!("confirm 0: {}", r.summary_line());
    assert!(r.count(Verdict::Fail) > 0, "{}", r.text());
    assert_eq!(r.exit_code(false), 1);
}

#[test]
fn a_real_failure_survives_confirm() {
    // a dispatch that changes order above M = 16 is deterministic: its
    // failures are confirmed and stay BI_FAIL
    let table = r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"order": "fma;split=4"}]}"#;
    let d = mxbi::subject::Dispatch::parse("t.json", table).unwrap();
    let mut o = opts(3);
    o.families = vec![Family::Batch];
    let r = check(&d, None, &o, &|_, _| {}).unwrap();
    assert!(r.count(Verdict::Fail) > 0, "{}", r.text());
    assert_eq!(r.count(Verdict::NonDet), 0, "{}", r.text());
    assert!(r.cells.iter().all(|c| c.nondet_rate.is_none()));
}

#[test]
fn confirm_is_bounded() {
    let e = opts(101).validate(false).unwrap_err();
    assert_eq!(e, "confirm = 101 is out of range (0..=100)");
}
