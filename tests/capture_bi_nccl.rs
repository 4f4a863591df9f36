//! The `nccl:` subject's capture from two H200s (`reference/captures/bi-nccl/`,
//! written by `reference/device/nccl_bi.sh`): every run's report from the
//! GPUs is replayed on the CPU by running the same check on the op model
//! the subject realises (`op:PRESET,paths=SET,x2=…`, runs.tsv's third
//! column): the cells, verdicts and byte counts must be the same, cell by
//! cell; the switch runs (GPU rows vs the model's) must pass everywhere;
//! and the pattern is the op's: agmm-v2-prefix fails the rank and position
//! families under K-varying x2 scales only, agmm-v2-fixed never fails.
//!
//! The capture is anchored by its manifest digest in
//! reference/captures.sha256.

mod common;

use common::TempDir;
use mxbi::device::capture::Capture;
use serde_json::Value;
use std::io::Read;
use std::process::Command;

/// The fields of a cell that must be the same on the GPUs and the model.
const SAME: [&str; 12] = [
    "id",
    "family",
    "m",
    "row",
    "rank",
    "path",
    "verdict",
    "rows_differing",
    "elements_differing",
    "bytes_differing",
    "max_ulp",
    "first_offenders",
];

fn cells_of(report: &Value) -> Vec<Value> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Value::Object(SAME.iter().map(|k| (k.to_string(), c[*k].clone())).collect()))
        .collect()
}

/// Each cell's power (a missing one reads as 1).
fn powers(report: &Value) -> Vec<f64> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["power"]["value"].as_f64().unwrap_or(1.0))
        .collect()
}

#[test]
fn nccl_runs_replay_on_the_cpu_model() {
    let dir = common::committed_capture("bi-nccl");
    let cap = Capture::open_anchored(&dir).unwrap();
    let runs = String::from_utf8(cap.read("runs.tsv").unwrap()).unwrap();
    let tmp = TempDir::new("capture-bi-nccl");
    let mut replayed = 0;
    for line in runs.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (name, gpu, cpu, rc, args) = (f[0], f[1], f[2], f[3], f[4]);
        let gz = cap.read(&format!("{name}.json.gz")).unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_string(&mut text).unwrap();
        let report: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(report["subject"], gpu, "{name}");
        assert_eq!(
            report["summary"]["valid"],
            Value::Bool(true),
            "{name}: positive controls"
        );
        let gpu_cells = cells_of(&report);
        assert!(!gpu_cells.is_empty(), "{name}");
        assert!(
            gpu_cells
                .iter()
                .all(|c| c["verdict"] != "ERROR" && c["verdict"] != "NON_DET"),
            "{name}: {gpu_cells:?}"
        );
        let fails = gpu_cells.iter().filter(|c| c["verdict"] == "BI_FAIL").count();
        assert_eq!(rc, if fails > 0 { "1" } else { "0" }, "{name}: exit code");
        if name.ends_with("-switch") {
            // the GPU's bytes are the model's
            assert_eq!(fails, 0, "{name}: {gpu_cells:?}");
            continue;
        }
        let anti = name.starts_with("prefix-")
            && name.contains("-var-")
            && (name.ends_with("-rank") || name.contains("-position"));
        assert_eq!(fails > 0, anti, "{name}: {fails} failing cells");
        // the same check on the CPU model
        let json = tmp.join(&format!("{name}.json"));
        let o = Command::new(env!("CARGO_BIN_EXE_mxbi"))
            .args(["bi", "run", "--subject", cpu])
            .args(args.split_whitespace())
            // the GPU runs drew the plain inputs (they predate the
            // separating content, the default since): the same inputs here
            .args(["--content", "plain"])
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code().map(|c| c.to_string()).as_deref(),
            Some(rc),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let model: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let model_cells = cells_of(&model);
        assert_eq!(model_cells.len(), gpu_cells.len(), "{name}: cells");
        for ((m, g), power) in model_cells.iter().zip(&gpu_cells).zip(powers(&model)) {
            if m == g {
                continue;
            }
            // the GPU reports predate power: a recorded BI_PASS whose plain
            // inputs lack power is VACUOUS now, every count the same
            let mut passed = m.clone();
            passed["verdict"] = "BI_PASS".into();
            assert!(
                m["verdict"] == "VACUOUS" && &passed == g && power < 0.99,
                "{name}: GPU cell {g} differs from the CPU model's {m} (power {power})"
            );
        }
        replayed += 1;
    }
    assert!(replayed >= 8, "{replayed} runs replayed");
}
