//! Replays the committed collective captures: the two-GPU NCCL run
//! (reference/captures/collective) and every other capture of the
//! `collective` suite, such as the one-GPU sequential-rank runs at world
//! sizes 4 and 8 (reference/captures/collective-seq-wsN, made by
//! `mxbi device collective --sequential`): the CPU op models must
//! reproduce every rank's GPU rows and the GPU's cross-rank verdicts.

mod common;

use common::committed_capture;
use mxbi::device::capture::Capture;
use mxbi::device::collective::{replay, CollectiveReport, SUITE};
use std::path::PathBuf;

/// Every committed capture folder whose manifest names the collective suite.
fn collective_captures() -> Vec<PathBuf> {
    let root = committed_capture("");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            std::fs::read_to_string(p.join("manifest.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .is_some_and(|m| m["suite"] == SUITE)
        })
        .collect();
    v.sort();
    v
}

fn replay_one(dir: &std::path::Path) {
    let t0 = std::time::Instant::now();
    let cap = Capture::open_anchored(dir).expect("anchored capture");
    cap.verify_all().expect("capture integrity");
    let report: CollectiveReport = cap.read_json("cases.json").unwrap();
    assert!(
        report.records.iter().all(|r| r.mismatches == 0),
        "{}: the GPU run recorded mismatches",
        dir.display()
    );
    // the anti-pattern is visible on the GPU exactly where the model says
    for r in &report.records {
        let expect_fail = r.case.name.starts_with("agmm-v2-prefix") && r.case.name.ends_with("kvar");
        assert_eq!(!r.gpu_cross_rank_rows.is_empty(), expect_fail, "{}", r.case.name);
    }
    if report.sequential {
        // one GPU, ranks in turn: no NCCL, no reduction, and the manifest says so
        assert_eq!(report.nccl_version, 0);
        assert!(report.records.iter().all(|r| r.case.name.starts_with("agmm-")));
        assert!(
            cap.manifest
                .notes
                .iter()
                .any(|n| n.contains("sequentially on ONE GPU") && n.contains("no NCCL")),
            "{:?}",
            cap.manifest.notes
        );
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
        "{}: {} cases, {} ranks, {} rank rows replayed in {:.1} s{}",
        dir.file_name().unwrap().to_string_lossy(),
        rep.cases,
        report.records.first().map_or(0, |r| r.ranks),
        rep.rows_checked,
        t0.elapsed().as_secs_f64(),
        if report.sequential {
            " (sequential ranks, one GPU)"
        } else {
            ""
        }
    );
}

#[test]
fn collective_captures_replay_bit_exact() {
    let dir = committed_capture("collective");
    // the two-GPU capture is committed: a missing one is a failure, not a skip
    assert!(
        dir.join("manifest.json").is_file(),
        "no GPU capture at {} (make it with reference/device/run.sh)",
        dir.display()
    );
    let all = collective_captures();
    assert!(all.contains(&dir), "{all:?}");
    for d in &all {
        replay_one(d);
    }
}

/// The sequential capture format end to end without a GPU: a report whose
/// "GPU" rows are the model's own (a stand-in, not evidence) is written as
/// a capture, read back and replayed; a changed row digest is caught.
#[test]
fn a_sequential_capture_replays_and_a_changed_row_is_caught() {
    use mxbi::device::capture::CaptureWriter;
    use mxbi::device::collective::{cross_rank_differences, sequential_cases, CollectiveRecord};
    use mxbi::device::conform::row_digest;
    let cases: Vec<_> = sequential_cases(8)
        .into_iter()
        .filter(|c| c.name.contains("/fma/"))
        .collect();
    assert_eq!(cases.len(), 4);
    let mut records = Vec::new();
    for c in &cases {
        let out = c.model().unwrap();
        let per: Vec<Vec<f32>> = out.per_rank.iter().map(|r| r.data.clone()).collect();
        let n = out.per_rank[0].cols;
        records.push(CollectiveRecord {
            case: c.clone(),
            ranks: per.len(),
            rows: out.per_rank[0].rows,
            n,
            mismatches: 0,
            gpu_row_digests: per
                .iter()
                .map(|o| o.chunks(n).map(|row| format!("{:016x}", row_digest(row))).collect())
                .collect(),
            gpu_cross_rank_rows: cross_rank_differences(&per, n),
            model_cross_rank_rows: cross_rank_differences(&per, n),
            paths: Vec::new(),
            notes: Vec::new(),
            reduction_orders: Vec::new(),
        });
    }
    // at WS 8 the prefix model fails across ranks exactly with K-varying x2 scales
    for r in &records {
        assert_eq!(r.ranks, 8);
        let expect_fail = r.case.name.starts_with("agmm-v2-prefix") && r.case.name.ends_with("kvar");
        assert_eq!(!r.model_cross_rank_rows.is_empty(), expect_fail, "{}", r.case.name);
    }
    let report = CollectiveReport {
        records,
        nccl_version: 0,
        sequential: true,
    };
    let dir = common::fresh_dir("collective-seq").join("collective-seq-ws8");
    let mut w = CaptureWriter::create(&dir).unwrap();
    w.put_json("cases.json", &report).unwrap();
    w.finish(
        SUITE,
        serde_json::json!({}),
        vec!["world size 8: ranks run sequentially on ONE GPU, no NCCL".into()],
    )
    .unwrap();
    let cap = Capture::open(&dir).unwrap();
    let back: CollectiveReport = cap.read_json("cases.json").unwrap();
    assert!(back.sequential && back == report);
    let rep = replay(&cap).unwrap();
    assert_eq!((rep.cases, rep.rows_checked), (4, 4 * 8 * 128));
    assert!(rep.row_mismatches.is_empty() && rep.verdict_mismatches.is_empty());
    // one row's digest changed: the replay names it
    let first = &report.records[0].gpu_row_digests[3][16 * 5..16 * 6];
    let flipped: String = first
        .chars()
        .enumerate()
        .map(|(i, ch)| {
            if i == 0 {
                if ch == '0' {
                    '1'
                } else {
                    '0'
                }
            } else {
                ch
            }
        })
        .collect();
    common::edit_file(&dir, "cases.json", first, &flipped);
    common::reseal_manifest(&dir);
    let rep = replay(&Capture::open(&dir).unwrap()).unwrap();
    assert_eq!(rep.row_mismatches.len(), 1, "{:?}", rep.row_mismatches);
}
