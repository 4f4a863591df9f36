//! Replays the committed two-GPU capture (reference/captures/collective):
//! the CPU op models must reproduce every rank's GPU rows and the GPU's
//! cross-rank verdicts.

use mxbi::device::capture::Capture;
use mxbi::device::collective::{replay, CollectiveReport};
use std::path::Path;

#[test]
fn collective_capture_replays_bit_exact() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("reference/captures/collective");
    // the capture is committed: a missing one is a failure, not a skip
    assert!(
        dir.join("manifest.json").is_file(),
        "no GPU capture at {} (make it with reference/device/run.sh)",
        dir.display()
    );
    let cap = Capture::open(&dir).expect("manifest");
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
}
