//! Replays the committed two-GPU capture (reference/captures/collective):
//! the CPU op models must reproduce every rank's GPU rows and the GPU's
//! cross-rank verdicts.

mod common;

use common::committed_capture;
use mxbi::device::capture::Capture;
use mxbi::device::collective::{replay, CollectiveReport};

#[test]
fn collective_capture_replays_bit_exact() {
    let dir = committed_capture("collective");
    // the capture is committed: a missing one is a failure, not a skip
    assert!(
        dir.join("manifest.json").is_file(),
        "no GPU capture at {} (make it with reference/device/run.sh)",
        dir.display()
    );
    let t0 = std::time::Instant::now();
    let cap = Capture::open_anchored(&dir).expect("anchored capture");
    cap.verify_all().expect("capture integrity");
    let report: CollectiveReport = cap.read_json("cases.json").unwrap();
    assert!(
        report.records.iter().all(|r| r.mismatches == 0),
        "the GPU run recorded mismatches"
    );
    // the anti-pattern is visible on the GPU exactly where the model says
    for r in &report.records {
        let expect_fail = r.case.name.starts_with("agmm-v2-prefix") && r.case.name.ends_with("kvar");
        assert_eq!(!r.gpu_cross_rank_rows.is_empty(), expect_fail, "{}", r.case.name);
    }
    let rep = replay(&cap).expect("replay");
    assert_eq!(rep.cases, report.records.len());
    assert!(
        rep.row_mismatches.is_empty(),
        "{:?}",
        &rep.row_mismatches[..rep.row_mismatches.len().min(5)]
    );
    assert!(rep.verdict_mismatches.is_empty(), "{:?}", rep.verdict_mismatches);
    println!(
        "collective: {} cases, {} rank rows replayed in {:.1} s",
        rep.cases,
        rep.rows_checked,
        t0.elapsed().as_secs_f64()
    );
}
