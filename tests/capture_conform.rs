//! Replays the committed GPU conformance capture (reference/captures/conform)
//! on the CPU model: every replayed row must have the GPU's bytes.

use mxbi::device::capture::Capture;
use mxbi::device::conform::{replay, RowSelection};
use std::path::Path;

#[test]
fn conform_capture_replays_bit_exact() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("reference/captures/conform");
    // the capture is committed: a missing one is a failure, not a skip
    assert!(
        dir.join("manifest.json").is_file(),
        "no GPU capture at {} (make it with reference/device/run.sh)",
        dir.display()
    );
    let cap = Capture::open(&dir).expect("manifest");
    cap.verify_all().expect("capture integrity");
    let r = replay(&cap, RowSelection::Sample).expect("replay");
    assert!(r.cases > 100, "only {} cases in the capture", r.cases);
    assert_eq!(r.recorded_mismatches, 0, "the GPU run itself recorded mismatches");
    assert!(
        r.row_mismatches.is_empty(),
        "rows differing from the GPU bytes: {:?}",
        r.row_mismatches
    );
    eprintln!("{} cases, {} rows replayed bit-exact", r.cases, r.rows_checked);
}
