//! Replays the committed `device casts` capture (GPU conversion digests)
//! against the CPU model, and checks the replay logic on small synthetic
//! captures (no GPU needed).

mod common;

use common::{cast_sample_seed, committed_capture, copy_capture, reseal_manifest, TempDir};
use mxbi::device::capture::{Capture, CaptureWriter};
use mxbi::device::casts::{
    absorb_chunks, boundary_chunks, conversion, cpu_chunk_digest, cpu_code, read_sweep, replay, sampled_chunks,
    write_capture, CastSweepReport, ChunkSelection, ConversionResult, MismatchRecord, CHUNK_BITS, CHUNK_COUNT,
    CONVERSIONS, ORDINARY_CHUNKS, SAMPLE_FLOOR, SWEEP_FILE,
};
use std::path::Path;
use std::time::Instant;

/// Distinct CPU chunk digests a sampled CI replay of a full capture may
/// compute (conversions with the same format and policy share them). The
/// sample has a fixed size per format, so the count does not depend on the
/// seed. Measured on the 2-core CI machine: 352 chunk digests (22 format and
/// policy pairs x 16) cost 31 s of CPU time (user + sys), about 16 s of wall
/// time on 2 idle cores (103 s while other builds kept the load at 12-18).
/// Raise it only with a new measurement, and the numbers in docs/DEVICE.md.
const CI_CHUNK_BUDGET: usize = 360;

/// The CI replay: every boundary and ordinary chunk of every conversion,
/// plus chunks drawn from a seed that changes with each commit (printed,
/// with the chunks, so that a failure can be replayed with
/// `MXBI_CAST_SAMPLE_SEED`).
#[test]
fn committed_casts_capture_replays() {
    let dir = committed_capture("casts");
    // the capture is committed: a missing one is a failure, not a skip
    assert!(
        dir.join("manifest.json").is_file(),
        "no GPU capture at {} (make it with reference/device/run.sh)",
        dir.display()
    );
    let (seed, source) = cast_sample_seed();
    println!("cast sample seed {seed:#018x} from {source} (set MXBI_CAST_SAMPLE_SEED to replay it)");
    let t0 = Instant::now();
    let cap = Capture::open_anchored(&dir).expect("anchored capture");
    cap.verify_all().expect("every file matches its manifest digest");
    let sweep = read_sweep(&cap).unwrap();
    let rep = replay(&cap, ChunkSelection::Sampled { seed }).expect("replay");
    let secs = t0.elapsed().as_secs_f64();
    let mut total = 0;
    for (c, r) in rep.conversions.iter().zip(&sweep.conversions) {
        total += c.chunks.len();
        println!(
            "{:<20} {:>3} of {} chunks {:02x?} differing {:?} (unrecorded {:?}, now agreeing {:?}) records {}/{} mismatching, captured {} {}{}",
            c.name,
            c.chunks.len(),
            r.chunks.len(),
            c.chunks,
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
    let in_capture: usize = sweep.conversions.iter().map(|r| r.chunks.len()).sum();
    println!("casts: {total} of {in_capture} chunks replayed in {secs:.1} s (seed {seed:#018x})");
    let bad: Vec<&str> = rep.unexplained().iter().map(|c| c.name.as_str()).collect();
    assert!(
        bad.is_empty(),
        "unexplained GPU/CPU disagreement in: {bad:?} (seed {seed:#018x})"
    );
    for (c, r) in rep.conversions.iter().zip(&sweep.conversions) {
        assert!(c.skipped.is_none(), "{}: {:?}", c.name, c.skipped);
        let conv = conversion(&c.name).unwrap();
        // the committed capture swept every chunk: all selected ones replay
        assert_eq!(r.chunks.len(), CHUNK_COUNT as usize, "{}", c.name);
        assert_eq!(c.chunks, sampled_chunks(conv.format, seed), "{}", c.name);
        assert!(c.chunks.len() >= SAMPLE_FLOOR, "{}", c.name);
    }
}

#[test]
fn sampled_selection_covers_edges_ordinary_values_and_stays_in_budget() {
    let mut jobs: Vec<(String, String, u32)> = Vec::new();
    for seed in [0u64, 1, 0x648c_237f_0000_0000] {
        jobs.clear();
        for c in CONVERSIONS {
            let v = sampled_chunks(c.format, seed);
            assert!(v.len() >= SAMPLE_FLOOR, "{}: {} chunks", c.name, v.len());
            assert!(v.windows(2).all(|w| w[0] < w[1]) && v.iter().all(|&x| x < CHUNK_COUNT));
            for b in boundary_chunks(c.format).into_iter().chain(ORDINARY_CHUNKS) {
                assert!(v.contains(&b), "{} misses chunk {b:#x}", c.name);
            }
            // 1.0 and -1.0 are replayed for every conversion
            assert!(v.contains(&(0x3F80_0000 >> CHUNK_BITS)) && v.contains(&(0xBF80_0000 >> CHUNK_BITS)));
            for ch in v {
                let key = (c.format.to_string(), format!("{:?}", c.policy()), ch);
                if !jobs.contains(&key) {
                    jobs.push(key);
                }
            }
        }
        println!("seed {seed:#x}: {} distinct CPU chunk digests", jobs.len());
        assert!(
            jobs.len() <= CI_CHUNK_BUDGET,
            "the sampled cast replay computes {} chunk digests, over the measured budget of {CI_CHUNK_BUDGET}",
            jobs.len()
        );
    }
    // the draw depends on the seed
    let f = CONVERSIONS[0].format;
    assert_ne!(sampled_chunks(f, 1), sampled_chunks(f, 2));
    assert_eq!(sampled_chunks(f, 7), sampled_chunks(f, 7));
}

/// A copy of the committed capture with one GPU chunk digest changed and
/// the manifest resealed passes the manifest check but not the anchor.
#[test]
fn tampered_copy_of_committed_capture_is_refused_by_the_anchor() {
    let tmp = TempDir::new("casts-anchor");
    let copy = copy_capture("casts", tmp.path());
    Capture::open_anchored(&copy).expect("an untouched copy is anchored");
    Capture::open_anchored(&copy).unwrap().verify_all().unwrap();
    // a chunk no sampled replay need visit: only the anchor can tell
    let cap = Capture::open(&copy).unwrap();
    let mut sweep = read_sweep(&cap).unwrap();
    let digest = &mut sweep.conversions[0].gpu_sha256[0x5C];
    let forged = if digest.starts_with('0') { "1" } else { "0" }.to_string() + &digest[1..];
    *digest = forged.clone();
    let mut text = serde_json::to_vec(&sweep).unwrap();
    text.push(b'\n');
    std::fs::write(copy.join(SWEEP_FILE), text).unwrap();
    reseal_manifest(&copy);
    let cap = Capture::open(&copy).unwrap();
    cap.verify_all().expect("the resealed manifest matches its files");
    assert_eq!(read_sweep(&cap).unwrap().conversions[0].gpu_sha256[0x5C], forged);
    let err = Capture::open_anchored(&copy).err().expect("refused").to_string();
    assert!(
        err.contains("casts/manifest.json") && err.contains("reference/captures.sha256"),
        "{err}"
    );
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

#[test]
fn synthetic_capture_matches_then_planted_mismatch_is_found() {
    let tmp_synthetic = TempDir::new("casts-synthetic");
    let dir = tmp_synthetic.path();
    // 0x00: zero and subnormals; 0x40: e2m1's max 6.0; 0xFF: -Inf and NaNs.
    let mut report = synthetic(dir, &[0x00, 0x40, 0xFF]);
    let cap = Capture::open(dir).unwrap();
    let rep = replay(&cap, ChunkSelection::All).unwrap();
    assert_eq!(rep.conversions.len(), 2);
    for c in &rep.conversions {
        assert_eq!(c.chunks.len(), 3, "{}", c.name);
        assert_eq!(c.mismatches(), 0, "{}", c.name);
        assert!(!c.unexplained());
    }
    // A list selection replays only the chunks asked for that were swept.
    let rep = replay(&cap, ChunkSelection::List(vec![0x40, 0x41])).unwrap();
    assert!(rep.conversions.iter().all(|c| c.chunks.len() == 1));

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
    let tmp_planted = TempDir::new("casts-planted");
    let dir2 = tmp_planted.path();
    write(dir2, &report);
    let rep = replay(&Capture::open(dir2).unwrap(), ChunkSelection::All).unwrap();
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
}

#[test]
fn tampered_capture_is_refused() {
    let tmp_tamper = TempDir::new("casts-tamper");
    let dir = tmp_tamper.path();
    synthetic(dir, &[0x00]);
    let path = dir.join(SWEEP_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    // Same length, one digit changed: only the manifest digest can tell.
    let pos = text.find("\"mismatches\":0").unwrap() + "\"mismatches\":".len();
    let mut bytes = text.into_bytes();
    bytes[pos] = b'1';
    std::fs::write(&path, bytes).unwrap();
    let cap = Capture::open(dir).unwrap();
    let err = replay(&cap, ChunkSelection::All).unwrap_err().to_string();
    assert!(err.contains("does not match its manifest digest"), "{err}");
}

#[test]
fn wrong_suite_and_malformed_sweeps_are_refused() {
    let tmp_suite = TempDir::new("casts-suite");
    let dir = tmp_suite.path();
    let mut w = CaptureWriter::create(dir).unwrap();
    w.put_json(SWEEP_FILE, &serde_json::json!({})).unwrap();
    w.finish("conform", serde_json::json!({}), vec![]).unwrap();
    assert!(replay(&Capture::open(dir).unwrap(), ChunkSelection::All).is_err());

    let tmp_malformed = TempDir::new("casts-malformed");
    let dir = tmp_malformed.path();
    let mut report = synthetic(dir, &[0x00, 0x01]);
    report.conversions[0].gpu_sha256.pop();
    write(dir, &report);
    let err = replay(&Capture::open(dir).unwrap(), ChunkSelection::All)
        .unwrap_err()
        .to_string();
    assert!(err.contains("digests"), "{err}");
}
