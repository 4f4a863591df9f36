//! Tensor-core probe captures: the committed GPU capture (if any) replays
//! on the CPU step model, and synthetic captures (GPU outputs faked from the
//! model) exercise the capture format, NaN canonicalisation and mismatch
//! detection.

mod common;

use common::{committed_capture, TempDir};
use mxbi::device::capture::Capture;
use mxbi::device::probe::{canonical_digest, compare, find, replay, write_capture, Cases, ProbeResult, PROBES};
use mxbi::device::replay::{replay_capture, ReplayOptions};

/// Mismatches of the committed capture that are understood (probe name,
/// count); anything else must be zero.
const EXPLAINED: &[(&str, u64)] = &[];

#[test]
fn committed_probe_capture_replays() {
    let dir = committed_capture("probe");
    // the capture is committed: a missing one is a failure, not a skip
    assert!(
        dir.join("manifest.json").is_file(),
        "no GPU capture at {} (make it with reference/device/run.sh)",
        dir.display()
    );
    let t0 = std::time::Instant::now();
    let cap = Capture::open_anchored(&dir).expect("anchored capture");
    let report = replay(&cap).unwrap();
    println!("{}", report.table());
    println!("replayed in {:.1} s", t0.elapsed().as_secs_f64());
    assert!(report.ok(), "capture does not replay:\n{}", report.table());
    for l in &report.lines {
        let expected = EXPLAINED.iter().find(|e| e.0 == l.name).map_or(0, |e| e.1);
        assert_eq!(
            l.recorded_mismatches, expected,
            "{}: unexplained GPU/model mismatches",
            l.name
        );
    }
}

fn fake_results(cases: usize, seed: u64, tweak: impl Fn(&str, &mut Vec<f32>)) -> Vec<ProbeResult> {
    PROBES
        .iter()
        .map(|p| {
            let c = Cases::generate(p, seed, cases).unwrap();
            let mut gpu = c.model();
            tweak(p.name, &mut gpu);
            compare(&c, &gpu).unwrap()
        })
        .collect()
}

#[test]
fn synthetic_capture_replays_with_nan_payloads_canonicalised() {
    // hardware NaN payloads differ from the model's 0x7FFFFFFF: not a mismatch
    let results = fake_results(5000, 11, |_, gpu| {
        for v in gpu.iter_mut().filter(|v| v.is_nan()) {
            *v = f32::from_bits(0xFFC0_0000);
        }
    });
    for r in &results {
        assert_eq!(r.record.mismatches, 0, "{}", r.record.name);
        assert!(r.record.nan_outputs > 0, "{}", r.record.name);
        assert_eq!(r.record.nan_payloads.keys().collect::<Vec<_>>(), vec!["0xffc00000"]);
        assert!(r.record.cases >= 5000);
        let model = Cases::generate(find(&r.record.name).unwrap(), 11, 5000)
            .unwrap()
            .model();
        assert_eq!(r.record.digest, canonical_digest(&model));
    }
    let tmp = TempDir::new("probe-ok");
    let dir = tmp.join("probe");
    write_capture(&dir, &results, serde_json::json!({"name": "synthetic"}), vec![]).unwrap();
    let rep = replay(&Capture::open(&dir).unwrap()).unwrap();
    assert!(rep.ok(), "{}", rep.table());
    assert_eq!(rep.mismatches(), 0);
    assert_eq!(rep.lines.len(), PROBES.len());
    assert!(rep.lines.iter().all(|l| l.first_checked == 4096));
    // the one replay interface: found by the manifest's suite, held
    let out = replay_capture(&Capture::open(&dir).unwrap(), &ReplayOptions::default()).unwrap();
    assert!(out.held(), "{out:?}");
    assert!(out
        .summary
        .starts_with(&format!("{} probes replayed, 0 recorded", PROBES.len())));
}

#[test]
fn planted_mismatch_is_recorded_and_replays_as_a_mismatch() {
    let target = "wgmma.m64n8k32.e4m3";
    let results = fake_results(4096, 3, |name, gpu| {
        if name == target {
            // a finite output one ulp off, inside the stored raw outputs
            let i = (0..gpu.len()).find(|&i| gpu[i].is_finite() && gpu[i] != 0.0).unwrap();
            gpu[i] = f32::from_bits(gpu[i].to_bits() ^ 1);
        }
    });
    let r = results.iter().find(|r| r.record.name == target).unwrap();
    assert_eq!(r.record.mismatches, 1);
    assert_eq!(r.mismatches.len(), 1);
    assert_eq!(r.mismatches[0].gpu_bits ^ r.mismatches[0].model_bits, 1);
    let bad: u64 = r.record.classes.values().map(|c| c.mismatches).sum();
    assert_eq!(bad, 2, "counted once under its tile class and once under its C class");
    let tmp = TempDir::new("probe-planted");
    let dir = tmp.join("probe");
    write_capture(&dir, &results, serde_json::json!({}), vec![]).unwrap();
    let rep = replay(&Capture::open(&dir).unwrap()).unwrap();
    assert!(rep.ok(), "a recorded mismatch is consistent: {}", rep.table());
    assert_eq!(rep.mismatches(), 1);
}

#[test]
fn unrecorded_differences_are_detected() {
    let mut results = fake_results(2048, 5, |_, _| {});
    // the GPU digest differs from the model without a record
    let c = Cases::generate(&PROBES[0], 5, 2048).unwrap();
    let mut other = c.model();
    other[100] = f32::from_bits(other[100].to_bits() ^ 0x10);
    results[0].record.digest = canonical_digest(&other);
    // a stored raw output differs from the model without a record
    results[1].first[7] = f32::from_bits(results[1].first[7].to_bits() ^ 0x8000_0000);
    let tmp = TempDir::new("probe-tampered");
    let dir = tmp.join("probe");
    write_capture(&dir, &results, serde_json::json!({}), vec![]).unwrap();
    let rep = replay(&Capture::open(&dir).unwrap()).unwrap();
    assert!(!rep.ok());
    assert!(!rep.lines[0].digest_ok);
    assert!(rep.lines[1].digest_ok);
    assert_eq!(rep.lines[1].first_unexplained, 1);
    assert!(rep.lines[2..].iter().all(|l| l.digest_ok && l.first_unexplained == 0));
    // through the one replay interface the same capture is a failed check
    let out = replay_capture(&Capture::open(&dir).unwrap(), &ReplayOptions::default()).unwrap();
    assert!(!out.held() && out.failed == 1, "{out:?}");
    assert!(out.summary.ends_with("-- replay FAILED"), "{}", out.summary);
    // editing a data file after the fact is caught by the manifest digests
    std::fs::write(dir.join(&results[2].record.first_file), [0u8; 16]).unwrap();
    assert!(replay(&Capture::open(&dir).unwrap()).is_err());
}

#[test]
fn replay_is_deterministic_across_thread_counts() {
    let p = find("mma.sync.m16n8k32.e4m3").unwrap();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let (a, ma) = one.install(|| {
        let c = Cases::generate(p, 9, 20_000).unwrap();
        let m = c.model();
        (c, m)
    });
    let b = Cases::generate(p, 9, 20_000).unwrap();
    assert_eq!(a.a, b.a);
    assert_eq!(a.b, b.b);
    assert_eq!(canonical_digest(&ma), canonical_digest(&b.model()));
}
