//! Replays the committed GPU conformance capture (reference/captures/conform)
//! on the CPU model: every row of every case must have the GPU's bytes, and
//! every foil (a nearby wrong order) is recomputed and its mismatch count
//! compared with the one the capture stores. Also: a tampered copy of the
//! capture with a resealed manifest is refused by the anchor.

mod common;

use common::{committed_capture, copy_capture, reseal_manifest, TempDir};
use mxbi::device::capture::Capture;
use mxbi::device::conform::{replay, ConformReport, RowSelection};

#[test]
fn conform_capture_replays_bit_exact_with_every_foil_recomputed() {
    let dir = committed_capture("conform");
    // the capture is committed: a missing one is a failure, not a skip
    assert!(
        dir.join("manifest.json").is_file(),
        "no GPU capture at {} (make it with reference/device/run.sh)",
        dir.display()
    );
    let t0 = std::time::Instant::now();
    let cap = Capture::open_anchored(&dir).expect("anchored capture");
    cap.verify_all().expect("capture integrity");
    let r = replay(&cap, RowSelection::All).expect("replay");
    let secs = t0.elapsed().as_secs_f64();
    for c in &r.case_replays {
        println!("{}", c.line());
    }
    let nd: Vec<String> = r.non_discriminating().iter().map(|c| c.id.to_string()).collect();
    println!("conform: {}", r.totals());
    println!(
        "conform: {} cases do not discriminate (every foil reproduces the GPU bytes): {}",
        nd.len(),
        nd.join(" ")
    );
    println!("conform: replayed in {secs:.1} s");
    assert!(r.cases > 100, "only {} cases in the capture", r.cases);
    assert_eq!(r.rows_checked, r.rows_in_capture, "every row is replayed");
    assert_eq!(r.recorded_mismatches, 0, "the GPU run itself recorded mismatches");
    assert!(
        r.row_mismatches.is_empty(),
        "rows differing from the GPU bytes: {:?}",
        r.row_mismatches
    );
    // every committed case tells its order from a wrong one (the generator
    // screens for it: docs/DEVICE.md, held-out re-run)
    assert!(
        nd.is_empty(),
        "cases whose foils all reproduce the GPU bytes (they cannot name the order): {}",
        nd.join(" ")
    );
    let disagreements = r.foil_disagreements();
    assert!(
        disagreements.is_empty(),
        "recomputed foils disagree with the capture:\n{}",
        disagreements.join("\n")
    );
    assert!(r.case_replays.iter().all(|c| c.foils.iter().all(|f| f.exact)));
    assert!(r.foils_recomputed() >= r.cases, "every case has a foil");
}

/// The `align` run (docs/DEVICE.md, "Aligned split parts on an H100"):
/// NVRTC kernels of the fixed orders, among them `fma;split=3;align=64`
/// and `hopper-bf16;split=3;align=128`, and 8 random ones, on an H100.
/// Every row is replayed on the CPU model, every foil recomputed, and the
/// GPU bytes of the two aligned cases are not those of the same split with
/// parts of ceil(K / S) (their third foil).
#[test]
fn conform_align_capture_replays_and_tells_aligned_parts_apart() {
    let cap = Capture::open_anchored(&committed_capture("conform-align")).expect("anchored capture");
    cap.verify_all().expect("capture integrity");
    let r = replay(&cap, RowSelection::All).expect("replay");
    assert_eq!(r.rows_checked, r.rows_in_capture, "every row is replayed");
    assert_eq!(r.recorded_mismatches, 0);
    assert!(r.row_mismatches.is_empty(), "{:?}", r.row_mismatches);
    assert!(r.foil_disagreements().is_empty(), "{:?}", r.foil_disagreements());
    assert!(r.non_discriminating().is_empty());
    let aligned: Vec<_> = r.case_replays.iter().filter(|c| c.order.contains(";align=")).collect();
    assert_eq!(aligned.len(), 2, "{}", r.totals());
    for c in aligned {
        let unaligned = c.order.replace(";align=64", "").replace(";align=128", "");
        let f = c
            .foils
            .iter()
            .find(|f| f.order == unaligned)
            .unwrap_or_else(|| panic!("case {}: no foil `{unaligned}`", c.id));
        assert!(
            f.exact && f.elements > 0 && f.rows_differing > 0,
            "case {}: {f:?}",
            c.id
        );
        assert_eq!(f.stored, Some(f.elements), "case {}", c.id);
    }
}

/// A copy with one GPU row digest changed and the manifest resealed passes
/// the manifest check but not the anchor.
#[test]
fn tampered_copy_of_committed_capture_is_refused_by_the_anchor() {
    let tmp = TempDir::new("conform-anchor");
    let copy = copy_capture("conform", tmp.path());
    Capture::open_anchored(&copy).expect("an untouched copy is anchored");
    Capture::open_anchored(&copy).unwrap().verify_all().unwrap();
    let mut report: ConformReport = Capture::open(&copy).unwrap().read_json("cases.json").unwrap();
    let digests = &mut report.records[7].gpu_row_digests;
    let forged = if digests.starts_with('0') { "1" } else { "0" };
    digests.replace_range(0..1, forged);
    let text = serde_json::to_string_pretty(&report).unwrap();
    std::fs::write(copy.join("cases.json"), format!("{text}\n")).unwrap();
    reseal_manifest(&copy);
    let cap = Capture::open(&copy).unwrap();
    cap.verify_all().expect("the resealed manifest matches its files");
    let edited: ConformReport = cap.read_json("cases.json").unwrap();
    assert!(edited.records[7].gpu_row_digests.starts_with(forged));
    let err = Capture::open_anchored(&copy).err().expect("refused").to_string();
    assert!(
        err.contains("conform/manifest.json") && err.contains("reference/captures.sha256"),
        "{err}"
    );
    // through the CLI: an unanchored capture is bad input (exit 2); replayed
    // on purpose with --unanchored, the forged digest is a failed check (exit 1)
    let mxbi = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mxbi"))
            .args(["device", "replay"])
            .arg(&copy)
            .args(extra)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = mxbi(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, err) = mxbi(&["--unanchored"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("differ from the capture"), "{err}");
}
