//! Checker captures from the H200 (`reference/captures/bi-*/`, written by
//! `reference/device/bi.sh`): each dump capture holds the jobs of a small
//! check (`mxbi bi gen`), the outputs a real kernel wrote for them (a PyTorch
//! or Triton runner through `examples/fill_dump.py`), and the report the
//! checker gave on the GPU machine. CI replays every dump with
//! `--subject dump:` and the same options and must get the recorded
//! verdicts and byte counts, cell by cell; the Triton captures must also show
//! what their kernels' code implies. A changed output byte fails the replay.

mod common;

use common::TempDir;
use mxbi::device::capture::Capture;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The dump captures that must be committed.
const DUMPS: [&str; 4] = [
    "bi-triton-splitk",
    "bi-triton-fixed",
    "bi-torch-matmul-f32",
    "bi-torch-scaled-mm-fp8",
];

fn capture_dir(name: &str) -> PathBuf {
    common::committed_capture(name)
}

fn args_of(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("args.txt")).unwrap();
    text.split_whitespace().map(str::to_string).collect()
}

/// `mxbi bi run --subject dump:DIR/dump ARGS --json OUT`: the report.
fn replay(dir: &Path, tmp: &TempDir, tag: &str) -> Value {
    let json = tmp.join(&format!("{tag}.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_mxbi"))
        .args(["bi", "run", "--subject"])
        .arg(format!("dump:{}", dir.join("dump").display()))
        .args(args_of(dir))
        // the dumps were generated (`bi gen`) before the separating content
        // existed, from the plain drawing: their jobs are those inputs
        .args(["--content", "plain"])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(1),
        "{}: replay exited {code:?}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// Per cell id: verdict and the byte/element/row counts and max ULP.
fn cells(report: &Value) -> BTreeMap<String, (String, u64, u64, u64, u64)> {
    report["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| {
            let n = |k: &str| c[k].as_u64().unwrap_or(u64::MAX);
            (
                c["id"].as_str().unwrap().to_string(),
                (
                    c["verdict"].as_str().unwrap().to_string(),
                    n("bytes_differing"),
                    n("elements_differing"),
                    n("rows_differing"),
                    n("max_ulp"),
                ),
            )
        })
        .collect()
}

/// Per cell id: the replayed cell's power (a missing one reads as 1).
fn powers(report: &Value) -> BTreeMap<String, f64> {
    report["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["power"]["value"].as_f64().unwrap_or(1.0),
            )
        })
        .collect()
}

/// Ok when the two reports have the same cells with the same verdicts and
/// counts; else the first differences. The captures were recorded before
/// cells had a power: a recorded `BI_PASS` that replays as `VACUOUS` with
/// power below 0.99 and the same counts (nothing differs, the plain inputs
/// just could not show an order change) is the one change accepted.
fn same_cells(recorded: &Value, replayed: &Value) -> Result<usize, String> {
    let (a, b) = (cells(recorded), cells(replayed));
    let power = powers(replayed);
    let mut diffs = Vec::new();
    for (id, r) in &a {
        match b.get(id) {
            Some(x) if x == r => {}
            Some(x)
                if (r.0.as_str(), x.0.as_str()) == ("BI_PASS", "VACUOUS")
                    && (r.1, r.2, r.3, r.4) == (x.1, x.2, x.3, x.4)
                    && power[id] < 0.99 => {}
            Some(x) => diffs.push(format!("{id}: recorded {r:?}, replayed {x:?} (power {})", power[id])),
            None => diffs.push(format!("{id}: recorded, not replayed")),
        }
    }
    diffs.extend(
        b.keys()
            .filter(|id| !a.contains_key(*id))
            .map(|id| format!("{id}: replayed, not recorded")),
    );
    if diffs.is_empty() {
        Ok(a.len())
    } else {
        Err(format!(
            "{} cells differ: {}",
            diffs.len(),
            diffs[..diffs.len().min(5)].join("; ")
        ))
    }
}

fn verdicts(report: &Value) -> Vec<(String, u64, String)> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["family"].as_str().unwrap().to_string(),
                c["m"].as_u64().unwrap(),
                c["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn every_dump_capture_replays_to_its_recorded_verdicts() {
    let tmp = TempDir::new("capture-bi");
    for name in DUMPS {
        let dir = capture_dir(name);
        // committed: a missing capture is a failure, not a skip
        let cap = Capture::open_anchored(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        cap.verify_all().unwrap_or_else(|e| panic!("{name}: {e}"));
        let recorded = read_json(&dir.join("report.json"));
        let replayed = replay(&dir, &tmp, name);
        let n = same_cells(&recorded, &replayed).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(n > 0, "{name}: no cells");
        assert_eq!(
            replayed["summary"]["valid"],
            Value::Bool(true),
            "{name}: positive controls"
        );
        // the same check run live on the GPU (through exec:) gave the same verdicts
        let live = read_json(&dir.join("live.json"));
        assert_eq!(
            verdicts(&live),
            verdicts(&recorded),
            "{name}: live exec run vs its dump"
        );
        println!("{name}: {n} cells replayed, verdicts equal the recorded and the live run");
    }
}

#[test]
fn triton_captures_show_what_their_code_implies() {
    // fixed tile: every family passes at every M
    let fixed = read_json(&capture_dir("bi-triton-fixed").join("report.json"));
    for (family, m, v) in verdicts(&fixed) {
        assert_eq!(v, "BI_PASS", "triton fixed tile: {family} at M = {m}");
    }
    // split-K 4 below M = 64, 1 from 64 on; batch baseline M = 1: batch fails
    // exactly at M >= 64, every other cell passes
    let split = read_json(&capture_dir("bi-triton-splitk").join("report.json"));
    let v = verdicts(&split);
    assert!(v.iter().any(|(f, m, _)| f == "batch" && *m >= 64));
    for (family, m, verdict) in v {
        let want = if family == "batch" && m >= 64 {
            "BI_FAIL"
        } else {
            "BI_PASS"
        };
        assert_eq!(verdict, want, "triton split-K: {family} at M = {m}");
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// Offset of the first data byte of a `.npy` file (format 1.x or 2.x).
fn npy_data_offset(bytes: &[u8]) -> usize {
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    match bytes[6] {
        1 => 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize,
        _ => 12 + u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
    }
}

#[test]
fn a_changed_output_byte_fails_the_replay() {
    let tmp = TempDir::new("capture-bi-tamper");
    let name = "bi-triton-fixed";
    let dir = tmp.join(name);
    copy_tree(&capture_dir(name), &dir);
    // the batch family's baseline: the one job of M = 1; its row 0 is every
    // batch cell's baseline row
    let manifest = read_json(&dir.join("dump/manifest.json"));
    let job = manifest["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["m"] == 1)
        .expect("a job of M = 1");
    let out = dir.join("dump").join(job["out"].as_str().unwrap());
    let mut bytes = std::fs::read(&out).unwrap();
    let at = npy_data_offset(&bytes);
    bytes[at] ^= 1;
    std::fs::write(&out, &bytes).unwrap();
    // the capture's integrity check names the file
    let err = Capture::open(&dir).unwrap().verify_all().unwrap_err().to_string();
    assert!(err.contains("out.npy") && err.contains("does not match"), "{err}");
    // and the replay itself (the dump read as it is) no longer gives the
    // recorded verdicts
    let recorded = read_json(&dir.join("report.json"));
    let replayed = replay(&dir, &tmp, "tampered");
    let err = same_cells(&recorded, &replayed).unwrap_err();
    assert!(err.contains("batch/"), "{err}");
}

/// The live reports of `bi-live`, by run name (integrity checked first).
fn live_reports() -> BTreeMap<String, Value> {
    use std::io::Read;
    let dir = capture_dir("bi-live");
    let cap = Capture::open_anchored(&dir).unwrap();
    let runs = String::from_utf8(cap.read("runs.tsv").unwrap()).unwrap();
    let mut out = BTreeMap::new();
    for line in runs.lines() {
        let name = line.split('\t').next().unwrap().to_string();
        let gz = cap.read(&format!("{name}.json.gz")).unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_string(&mut text).unwrap();
        let report: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            report["summary"]["valid"],
            Value::Bool(true),
            "{name}: positive controls"
        );
        out.insert(name, report);
    }
    out
}

/// What docs/DEVICE.md's vendor table (the anchor-row probe, N = 2048)
/// says a cuBLAS/cuBLASLt subject's cell must be, or None for runs it does
/// not cover.
fn vendor_table_says(run: &str, family: &str, m: u64) -> Option<&'static str> {
    let k7168 = run.contains("k7168");
    let blk = run.starts_with("cublaslt-fp8-blk128");
    if !run.starts_with("cublas") || run.contains("-vs-") {
        return None;
    }
    // block scales: cuBLASLt refuses M % 4 != 0 (nothing is padded)
    if blk && !m.is_multiple_of(4) {
        return Some("ERROR");
    }
    // ... so is the batch baseline M = 1 of the runs whose M list starts at 1
    // (the `-m4-` runs start at M = 4, the vendor table's baseline for this case)
    if blk && family == "batch" && !run.contains("-m4-") {
        return Some("ERROR");
    }
    if family != "batch" {
        // no row ever depended on its position or its neighbours; repeats agree
        return Some("BI_PASS");
    }
    let heuristic_f32 = (run.starts_with("cublas-sgemm") || run.starts_with("cublaslt-f32")) && !run.contains("pinned");
    let heuristic_bf16 =
        (run.starts_with("cublas-gemmex-bf16") || run.starts_with("cublaslt-bf16")) && !run.contains("pinned");
    Some(if heuristic_f32 || (heuristic_bf16 && k7168 && m >= 128) {
        "BI_FAIL"
    } else {
        "BI_PASS"
    })
}

#[test]
fn live_checks_agree_with_the_vendor_table() {
    let live = live_reports();
    let mut checked = 0;
    for (run, report) in &live {
        for c in report["cells"].as_array().unwrap() {
            let (family, m) = (c["family"].as_str().unwrap(), c["m"].as_u64().unwrap());
            if let Some(want) = vendor_table_says(run, family, m) {
                assert_eq!(c["verdict"].as_str().unwrap(), want, "{run}: {}", c["id"]);
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked} cells checked");
    // the generated kernels are bit-exact to the model and batch-invariant
    for (run, report) in live.iter().filter(|(r, _)| r.starts_with("cuda-")) {
        for (family, m, v) in verdicts(report) {
            assert_eq!(v, "BI_PASS", "{run}: {family} at M = {m}");
        }
    }
    // F.linear hands cuBLAS the weights as [N, K], the layout of the cuBLAS
    // subjects: the same bytes differ at every M
    let batch_bytes = |run: &str| -> Vec<(u64, u64)> {
        live[run]["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["family"] == "batch")
            .map(|c| (c["m"].as_u64().unwrap(), c["bytes_differing"].as_u64().unwrap()))
            .collect()
    };
    assert_eq!(
        batch_bytes("torch-linear-bf16-k7168"),
        batch_bytes("cublas-gemmex-bf16-k7168-batch")
    );
    assert_eq!(
        batch_bytes("torch-linear-f32-tf32off-k2048"),
        batch_bytes("cublas-sgemm-k2048")
    );
    // the Triton runners at K = N = 2048, as their code implies
    for (family, m, v) in verdicts(&live["triton-splitk-k2048"]) {
        let want = if family == "batch" && m >= 64 {
            "BI_FAIL"
        } else {
            "BI_PASS"
        };
        assert_eq!(v, want, "triton split-K live: {family} at M = {m}");
    }
    for run in ["triton-fixed-k2048", "triton-fixed-repeat", "triton-splitk-repeat"] {
        for (family, m, v) in verdicts(&live[run]) {
            assert_eq!(v, "BI_PASS", "{run}: {family} at M = {m}");
        }
    }
}
