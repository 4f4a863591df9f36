//! Replays the committed `device casts` capture (GPU conversion digests)
//! against the CPU model, and checks the replay logic on small synthetic
//! captures (no GPU needed).

use mxbi::device::capture::{Capture, CaptureWriter};
use mxbi::device::casts::{
    absorb_chunks, boundary_chunks, conversion, cpu_chunk_digest, cpu_code, replay, write_capture, CastSweepReport,
    ChunkSelection, ConversionResult, MismatchRecord, CHUNK_BITS, SWEEP_FILE,
};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("reference/captures/casts")
}

#[test]
fn committed_casts_capture_replays() {
    let dir = committed();
    // the capture is committed: a missing one is a failure, not a skip
    assert!(
        dir.join("manifest.json").is_file(),
        "no GPU capture at {} (make it with reference/device/run.sh)",
        dir.display()
    );
    let t0 = Instant::now();
    let cap = Capture::open(&dir).expect("open capture");
    cap.verify_all().expect("every file matches its manifest digest");
    let rep = replay(&cap, ChunkSelection::Boundary).expect("replay");
    for c in &rep.conversions {
        println!(
            "{:<20} chunks {:>3} differing {:?} (unrecorded {:?}, now agreeing {:?}) records {}/{} mismatching, captured {} {}{}",
            c.name,
            c.chunks_checked,
            c.chunks_differing,
            c.chunks_differing_unrecorded,
            c.chunks_now_agreeing,
            c.record_mismatches,
            c.records_checked,
            c.captured_mismatches,
            if c.known_gap.is_some() { "[known gap]" } else { "" },
            c.skipped.as_deref().map(|s| format!(" skipped: {s}")).unwrap_or_default(),
        );
    }
    println!("replay took {:.1} s", t0.elapsed().as_secs_f64());
    let bad: Vec<&str> = rep.unexplained().iter().map(|c| c.name.as_str()).collect();
    assert!(bad.is_empty(), "unexplained GPU/CPU disagreement in: {bad:?}");
    assert!(rep.conversions.iter().any(|c| c.chunks_checked > 0), "nothing replayed");
}

/// A capture whose "GPU" digests are the CPU's own, for two conversions.
fn synthetic(dir: &Path, chunks: &[u32]) -> CastSweepReport {
    let mut report = CastSweepReport {
        schema: 1,
        chunk_bits: CHUNK_BITS,
        selection: "list".into(),
        conversions: Vec::new(),
    };
    for name in ["e2m1.rn.satfinite", "e8m0.rp.satfinite"] {
        let conv = conversion(name).unwrap();
        let mut r = ConversionResult::new(conv);
        let per: Vec<(u32, String, u64, Vec<MismatchRecord>)> = chunks
            .iter()
            .map(|&c| (c, cpu_chunk_digest(conv, c).unwrap(), 0, vec![]))
            .collect();
        absorb_chunks(&mut r, per);
        report.conversions.push(r);
    }
    write(dir, &report);
    report
}

fn write(dir: &Path, report: &CastSweepReport) {
    write_capture(dir, report, serde_json::json!({"name": "synthetic"}), vec![]).unwrap();
}

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mxbi-casts-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn synthetic_capture_matches_then_planted_mismatch_is_found() {
    let dir = tmp("synthetic");
    // 0x00: zero and subnormals; 0x40: e2m1's max 6.0; 0xFF: -Inf and NaNs.
    let mut report = synthetic(&dir, &[0x00, 0x40, 0xFF]);
    let cap = Capture::open(&dir).unwrap();
    let rep = replay(&cap, ChunkSelection::All).unwrap();
    assert_eq!(rep.conversions.len(), 2);
    for c in &rep.conversions {
        assert_eq!(c.chunks_checked, 3, "{}", c.name);
        assert_eq!(c.mismatches(), 0, "{}", c.name);
        assert!(!c.unexplained());
    }
    // A list selection replays only the chunks asked for that were swept.
    let rep = replay(&cap, ChunkSelection::List(vec![0x40, 0x41])).unwrap();
    assert!(rep.conversions.iter().all(|c| c.chunks_checked == 1));

    // Plant a GPU disagreement in e2m1 chunk 0x40 that the capture did not
    // count: a different digest, and a record whose GPU code is not the CPU's.
    let e2m1 = conversion("e2m1.rn.satfinite").unwrap();
    let six = 6.0f32.to_bits();
    let cpu = cpu_code(e2m1, six).unwrap();
    assert_eq!(cpu, 0x7);
    let r = &mut report.conversions[0];
    r.gpu_sha256[1] = "00".repeat(32);
    r.records.push(MismatchRecord {
        input_bits: six,
        gpu_code: 0x6,
        cpu_code: cpu,
    });
    let dir2 = tmp("planted");
    write(&dir2, &report);
    let rep = replay(&Capture::open(&dir2).unwrap(), ChunkSelection::All).unwrap();
    let c = &rep.conversions[0];
    assert_eq!(c.chunks_differing, [0x40]);
    assert_eq!(c.chunks_differing_unrecorded, [0x40]);
    assert_eq!(c.record_mismatches, 1);
    assert_eq!(c.records_cpu_changed, 0);
    assert!(c.unexplained());
    assert_eq!(rep.mismatches(), 2);
    assert_eq!(rep.unexplained().len(), 1);
    // e8m0 is untouched.
    assert_eq!(rep.conversions[1].mismatches(), 0);

    // (No conversion carries a predicted gap since the preset was fixed from
    // the H200 sweep; `ConversionResult::unexplained` is unit-tested with a
    // synthetic gap in src/device/casts.rs.)
    for d in [dir, dir2] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn tampered_capture_is_refused() {
    let dir = tmp("tamper");
    synthetic(&dir, &[0x00]);
    let path = dir.join(SWEEP_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    // Same length, one digit changed: only the manifest digest can tell.
    let pos = text.find("\"mismatches\":0").unwrap() + "\"mismatches\":".len();
    let mut bytes = text.into_bytes();
    bytes[pos] = b'1';
    std::fs::write(&path, bytes).unwrap();
    let cap = Capture::open(&dir).unwrap();
    let err = replay(&cap, ChunkSelection::All).unwrap_err().to_string();
    assert!(err.contains("does not match its manifest digest"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrong_suite_and_malformed_sweeps_are_refused() {
    let dir = tmp("suite");
    let mut w = CaptureWriter::create(&dir).unwrap();
    w.put_json(SWEEP_FILE, &serde_json::json!({})).unwrap();
    w.finish("conform", serde_json::json!({}), vec![]).unwrap();
    assert!(replay(&Capture::open(&dir).unwrap(), ChunkSelection::All).is_err());
    std::fs::remove_dir_all(&dir).unwrap();

    let dir = tmp("malformed");
    let mut report = synthetic(&dir, &[0x00, 0x01]);
    report.conversions[0].gpu_sha256.pop();
    write(&dir, &report);
    let err = replay(&Capture::open(&dir).unwrap(), ChunkSelection::All)
        .unwrap_err()
        .to_string();
    assert!(err.contains("digests"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn boundary_selection_is_small() {
    // The CI replay budget: a handful of chunks per conversion.
    for c in mxbi::device::casts::CONVERSIONS {
        let n = boundary_chunks(c.format).len();
        assert!(n <= 14, "{} has {n} boundary chunks", c.name);
    }
}
