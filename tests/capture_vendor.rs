//! Vendor GEMM captures: the committed one (if any) replays consistently;
//! a synthetic capture round-trips, its table is what the rows say, and an
//! edited file or an edited table is caught. `mxbi device replay` refuses
//! a capture that is not the anchored one.

mod common;

use common::{committed_capture, copy_capture, reseal_manifest, TempDir};
use mxbi::device::capture::Capture;
use mxbi::device::vendor::{self, *};
use mxbi::order::InType;
use std::process::Command;

#[test]
fn committed_capture_replays() {
    let dir = committed_capture("vendor");
    // the capture is committed: a missing one is a failure, not a skip
    assert!(
        dir.join("manifest.json").is_file(),
        "no GPU capture at {} (make it with reference/device/run.sh)",
        dir.display()
    );
    let t0 = std::time::Instant::now();
    let c = Capture::open_anchored(&dir).expect("anchored capture");
    c.verify_all().unwrap();
    let r = vendor::replay(&c).unwrap();
    assert!(r.consistent(), "{:#?}", r.mismatches);
    assert!(r.rows_checked > 0 && r.tables_checked > 0);
    println!(
        "vendor: {} tables, {} rows checked in {:.1} s",
        r.tables_checked,
        r.rows_checked,
        t0.elapsed().as_secs_f64()
    );
    for line in &r.summary {
        println!("{line}");
    }
}

fn replay_cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi"))
        .args(["device", "replay"])
        .args(args)
        .output()
        .unwrap()
}

/// `mxbi device replay` replays an untouched copy, refuses a copy whose
/// manifest was edited (here only its notes, the data untouched) with one
/// line naming the manifest and the anchor file, and replays it with
/// `--unanchored`, saying so.
#[test]
fn cli_replay_refuses_an_unanchored_manifest() {
    let tmp = TempDir::new("vendor-cli");
    let copy = copy_capture("vendor", tmp.path());
    let copy_s = copy.to_str().unwrap();
    let ok = replay_cli(&[copy_s]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(!String::from_utf8_lossy(&ok.stdout).contains("UNANCHORED"));

    let path = copy.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    m["notes"] = serde_json::json!(["edited after the run"]);
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap() + "\n").unwrap();
    reseal_manifest(&copy);
    Capture::open(&copy).unwrap().verify_all().unwrap();
    let bad = replay_cli(&[copy_s]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("vendor/manifest.json") && err.contains("reference/captures.sha256"),
        "{err}"
    );
    let forced = replay_cli(&["--unanchored", copy_s]);
    assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stderr));
    assert!(String::from_utf8_lossy(&forced.stdout).contains("UNANCHORED"));
}

/// A fake "GPU" row: the f64 reference rounded to the output type, with
/// the last element nudged by one ulp when `nudge`.
fn fake_row(case: CaseId, reference: &[f64], nudge: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, &v) in reference.iter().enumerate() {
        let f = v as f32;
        let last = i + 1 == reference.len();
        match case.output() {
            InType::F32 => {
                let b = if nudge && last { f.to_bits() ^ 1 } else { f.to_bits() };
                out.extend_from_slice(&b.to_le_bytes());
            }
            _ => {
                let b = (f.to_bits() >> 16) as u16;
                let b = if nudge && last { b ^ 1 } else { b };
                out.extend_from_slice(&b.to_le_bytes());
            }
        }
    }
    out
}

/// A synthetic run: `lt-f32` heuristic differs at M=17 (middle row),
/// pinned is invariant; `lt-fp8-vec128-blk128` is unsupported at M=1 and
/// M=17, so its reference is M=4.
fn synthetic() -> VendorRun {
    let shape = Shape::new(32, 256);
    let mut opts = VendorOptions::quick();
    opts.shapes = vec![shape.clone()];
    opts.m_list = vec![1, 4, 17];
    opts.all_positions = true;
    opts.pin_m = 17;
    opts.cases = vec![CaseId::LtF32, CaseId::LtFp8Vec128Blk128];
    opts.validate().unwrap();
    let mut store = RowStore::default();
    let mut rows = Vec::new();
    for &case in &opts.cases {
        let reference = reference_row(case, &shape, opts.seed);
        for &m in &opts.m_list {
            for pos in positions(m, true) {
                for variant in [Variant::Heuristic, Variant::Pinned] {
                    let unsupported = case == CaseId::LtFp8Vec128Blk128 && m % 4 != 0;
                    let (status, row) = if unsupported {
                        (RowStatus::Unsupported("CUBLAS_STATUS_NOT_SUPPORTED".into()), None)
                    } else {
                        let nudge = case == CaseId::LtF32 && variant == Variant::Heuristic && m == 17 && pos.row == 8;
                        (RowStatus::Ok, Some(fake_row(case, &reference, nudge)))
                    };
                    rows.push(store.entry(case, &shape, variant, m, &pos, status, row.as_deref()));
                }
            }
        }
    }
    let tables = derive_tables(&rows, &store.data, &opts.shapes).unwrap();
    VendorRun {
        report: VendorReport {
            schema: SCHEMA,
            options: opts,
            generator: GENERATOR.into(),
            workspace_bytes: WORKSPACE_BYTES,
            tensor_scales: (TENSOR_SCALE_W, TENSOR_SCALE_X),
            environment: Default::default(),
            runs: vec![],
            rows,
            tables,
            notes: vec!["synthetic".into()],
        },
        rows_bin: store.data,
    }
}

#[test]
fn synthetic_table_logic() {
    let run = synthetic();
    let t = &run.report.tables;
    assert_eq!(t.len(), 4);
    let heur = t
        .iter()
        .find(|t| t.case == CaseId::LtF32 && t.variant == Variant::Heuristic)
        .unwrap();
    assert_eq!(heur.reference_m, Some(1));
    assert_eq!(heur.invariant, Some(false));
    assert_eq!(heur.differing_cells, 1);
    let bad = heur.cells.iter().find(|c| c.diff_bytes != Some(0)).unwrap();
    assert_eq!(
        (bad.m, bad.row, bad.diff_bytes, bad.diff_elems),
        (17, 8, Some(1), Some(1))
    );
    let pinned = t
        .iter()
        .find(|t| t.case == CaseId::LtF32 && t.variant == Variant::Pinned)
        .unwrap();
    assert_eq!(pinned.invariant, Some(true));
    assert_eq!(pinned.reference_equals_heuristic, Some(true));
    let fp8 = t
        .iter()
        .find(|t| t.case == CaseId::LtFp8Vec128Blk128 && t.variant == Variant::Heuristic)
        .unwrap();
    assert_eq!(fp8.reference_m, Some(4));
    assert_eq!(fp8.invariant, Some(true));
    assert!(fp8.cells.iter().any(|c| c.status == "unsupported"));
    // Identical rows are stored once: 3 distinct rows in all.
    let f32_row = 32 * 4;
    let bf16_row = 32 * 2;
    assert_eq!(run.rows_bin.len(), 2 * f32_row + bf16_row);
    let md = render_markdown(&run.report);
    assert!(md.contains("| 17 |") && md.contains("unsupported") && md.contains("**yes**"));
}

#[test]
fn synthetic_capture_round_trip_and_tampering() {
    let run = synthetic();
    let t_ok = TempDir::new("vendor-ok");
    let dir = t_ok.path();
    write_capture(dir, &run, serde_json::json!({"name": "synthetic"}), vec![]).unwrap();
    let c = Capture::open(dir).unwrap();
    let r = vendor::replay(&c).unwrap();
    assert!(r.consistent(), "{:#?}", r.mismatches);
    assert_eq!(r.rows_checked, run.report.rows.len());
    assert_eq!(r.tables_checked, 4);

    // An edited data file fails the manifest check.
    let mut bytes = std::fs::read(dir.join("rows.bin")).unwrap();
    bytes[3] ^= 0x40;
    std::fs::write(dir.join("rows.bin"), &bytes).unwrap();
    assert!(vendor::replay(&Capture::open(dir).unwrap()).is_err());

    // A stored table that does not follow from the rows (manifest valid).
    let mut forged = synthetic();
    let cell = forged.report.tables[0]
        .cells
        .iter_mut()
        .find(|c| c.diff_bytes == Some(1))
        .unwrap();
    cell.diff_bytes = Some(0);
    cell.diff_elems = Some(0);
    let mut forged2 = synthetic();
    forged2.report.tables[0].invariant = Some(true);
    for (name, f) in [("forged", forged), ("forged2", forged2)] {
        let t = TempDir::new(&format!("vendor-{name}"));
        let dir = t.path();
        write_capture(dir, &f, serde_json::json!({}), vec![]).unwrap();
        let r = vendor::replay(&Capture::open(dir).unwrap()).unwrap();
        assert!(!r.consistent(), "{name} not caught");
    }

    // A row whose digest does not match its bytes.
    let mut wrong = synthetic();
    wrong.report.rows[0].sha256 = Some("00".repeat(32));
    let t_digest = TempDir::new("vendor-digest");
    let dir = t_digest.path();
    write_capture(dir, &wrong, serde_json::json!({}), vec![]).unwrap();
    assert!(!vendor::replay(&Capture::open(dir).unwrap()).unwrap().consistent());
}

#[test]
fn inputs_are_reproducible_across_calls() {
    let s = Shape::new(2048, 2048);
    let a = anchor(InType::E4M3, &s, DEFAULT_SEED);
    assert_eq!(a, anchor(InType::E4M3, &s, DEFAULT_SEED));
    assert_eq!(
        neighbours(InType::Bf16, &s, 17, DEFAULT_SEED),
        neighbours(InType::Bf16, &s, 17, DEFAULT_SEED)
    );
    assert_ne!(
        neighbours(InType::Bf16, &s, 17, DEFAULT_SEED)[..2 * 2048],
        neighbours(InType::Bf16, &s, 33, DEFAULT_SEED)[..2 * 2048]
    );
}
