//! `mxbi fuzz` end to end: it finds and shrinks a failure on a dispatch
//! table (to exactly the M and K boundary values), an op preset (to the
//! scale knob and the two-block K that shows it) and an external runner
//! (to the first M past its switch); a batch-invariant subject passes its
//! case limit; the same seed writes the same bytes; the minimal case
//! replays through `mxbi bi run` with exit 1; the corpus is replayed first.

mod common;

use common::fresh_dir;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (exit code, stdout, stderr) of `mxbi ARGS` run in `dir`.
fn mxbi(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mxbi"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// A dispatch table that fails only past one M boundary (16) and one K
/// range (K > 64): fma below, fma;split=4 above both.
const TABLE: &str =
    r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"k_max": 64, "order": "fma"}, {"order": "fma;split=4"}]}"#;

fn table_dir(tag: &str) -> PathBuf {
    let dir = fresh_dir(tag);
    std::fs::write(dir.join("table.json"), TABLE).unwrap();
    dir
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                v.push((
                    p.strip_prefix(dir).unwrap().display().to_string(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    v.sort();
    v
}

#[test]
fn a_dispatch_failure_shrinks_to_the_boundary_values_and_replays() {
    let dir = table_dir("fuzz-dispatch");
    for seed in ["1", "2", "7"] {
        let out = format!("o{seed}");
        let (code, stdout, stderr) = mxbi(
            &dir,
            &[
                "fuzz",
                "--subject",
                "dispatch:table.json",
                "--seed",
                seed,
                "--out",
                &out,
                "--max-cases",
                "300",
            ],
        );
        assert_eq!(code, 1, "{stdout}{stderr}");
        assert!(
            stdout.contains(&format!("seed {seed}")) && stdout.contains("cases tried: "),
            "{stdout}"
        );
        let case = json(&dir.join(&out).join("minimal.json"));
        assert_eq!(case["schema"], "mxbi-bi-case/1");
        assert_eq!(case["families"], serde_json::json!(["batch"]), "{case}");
        // exactly the boundary values: the first M past m_max = 16 against
        // a baseline of 1, the first K past k_max = 64
        assert_eq!(case["m"], serde_json::json!([1, 17]), "{case}");
        assert_eq!(case["k"], 65, "{case}");
        // the table is named relative to the case file's folder
        assert_eq!(case["subject"], "dispatch:../table.json");
        // the explainer names both orders (from the bytes alone: on a
        // shrunk row another order may give the variant's bytes too)
        assert!(
            stdout.contains(
                "explained from the bytes alone (mxbi explain): the baseline row is fma, the variant row is "
            ),
            "{stdout}"
        );
        // the case replays through the checker, from anywhere, with exit 1
        let (code, stdout, stderr) = mxbi(
            Path::new("/"),
            &["bi", "run", dir.join(&out).join("minimal.json").to_str().unwrap()],
        );
        assert_eq!(code, 1, "{stdout}{stderr}");
        assert!(stdout.contains("BI_FAIL  batch/m=17/k=65/"), "{stdout}");
    }
}

#[test]
fn the_same_seed_writes_the_same_bytes() {
    let dir = table_dir("fuzz-same");
    let args = |out: &'static str| -> Vec<&'static str> {
        vec![
            "fuzz",
            "--subject",
            "dispatch:table.json",
            "--seed",
            "5",
            "--out",
            out,
            "--max-cases",
            "300",
        ]
    };
    let (c1, s1, _) = mxbi(&dir, &args("a"));
    let (c2, s2, _) = mxbi(&dir, &args("b"));
    assert_eq!((c1, c2), (1, 1), "{s1}{s2}");
    let (fa, fb) = (files(&dir.join("a")), files(&dir.join("b")));
    assert_eq!(
        fa.len(),
        3,
        "fuzz.json, minimal.json, one corpus case: {:?}",
        fa.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    assert_eq!(fa, fb);
    // and the printed search (all but the timing line)
    let strip = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with("cases tried") && !l.starts_with("minimal case"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&s1), strip(&s2));
    // a different seed draws other cases (the minimal case may agree)
    let (_, _, _) = mxbi(
        &dir,
        &[
            "fuzz",
            "--subject",
            "dispatch:table.json",
            "--seed",
            "6",
            "--out",
            "c",
            "--max-cases",
            "300",
        ],
    );
    let found = |d: &str| json(&dir.join(d).join("fuzz.json"))["failure"]["found"].clone();
    assert_ne!(found("a"), found("c"));
}

#[test]
fn an_op_preset_fails_under_k_varying_scales_and_shrinks() {
    let dir = fresh_dir("fuzz-op");
    let (code, stdout, stderr) = mxbi(
        &dir,
        &[
            "fuzz",
            "--subject",
            "op:agmm-v2-prefix",
            "--seed",
            "3",
            "--out",
            "o",
            "--max-cases",
            "300",
        ],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    let case = json(&dir.join("o/minimal.json"));
    // the x2 scales vary along K, so it takes two 32-element blocks
    assert_eq!(case["knobs"]["x2_scales"], "VAR", "{case}");
    assert_eq!(case["k"], 64, "{case}");
    assert_eq!(case["input"], "e4m3");
    // world size 2: M shrinks to the smallest multiple
    assert_eq!(
        case["m"].as_array().unwrap().iter().map(|m| m.as_u64().unwrap()).max(),
        Some(2),
        "{case}"
    );
    let (code, stdout, stderr) = mxbi(&dir, &["bi", "run", "o/minimal.json"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    // the same case without the knob holds: the scales are the cause
    let mut plain = case.clone();
    plain.as_object_mut().unwrap().remove("knobs");
    std::fs::write(dir.join("plain.json"), plain.to_string()).unwrap();
    let (code, stdout, stderr) = mxbi(&dir, &["bi", "run", "plain.json"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
}

#[test]
fn an_exec_runner_that_switches_above_m8_shrinks_to_m9() {
    let dir = fresh_dir("fuzz-exec");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runners/split_above_m.py");
    let spec = format!("exec:python3 '{}' 8", script.display());
    let (code, stdout, stderr) = mxbi(
        &dir,
        &[
            "fuzz",
            "--subject",
            &spec,
            "--seed",
            "1",
            "--out",
            "o",
            "--families",
            "batch,content",
            "--max-m",
            "33",
            "--max-k",
            "64",
            "--max-n",
            "4",
            "--max-cases",
            "100",
        ],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    let case = json(&dir.join("o/minimal.json"));
    assert_eq!(case["families"], serde_json::json!(["batch"]), "{case}");
    assert_eq!(case["m"], serde_json::json!([1, 9]), "{case}");
    assert!(case["k"].as_u64().unwrap() <= 4, "{case}");
    // the runner sums `muladd;split=2` above M = 8; on a shrunk row of a
    // few terms `fma;split=2` may give the same bytes, so either is named
    assert!(
        stdout.contains("the variant row is fma;split=2") || stdout.contains("the variant row is muladd;split=2"),
        "{stdout}"
    );
    // the minimal case names the runner: its replay allows it (and says so)
    assert!(stdout.contains("(replay: mxbi bi run --allow-exec "), "{stdout}");
    let (code, stdout, stderr) = mxbi(&dir, &["bi", "run", "--allow-exec", "o/minimal.json"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
}

#[test]
fn a_flaky_runner_is_non_det_with_its_rate_and_writes_no_minimal_case() {
    let dir = fresh_dir("fuzz-flaky");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runners/flaky_split.py");
    let spec = format!("exec:python3 '{}'", script.display());
    let args = |strict: bool| {
        let mut v = vec![
            "fuzz",
            "--subject",
            &spec,
            "--seed",
            "1",
            "--out",
            "o",
            "--max-m",
            "17",
            "--max-k",
            "64",
            "--max-n",
            "4",
            "--max-cases",
            "60",
        ];
        if strict {
            v.push("--strict");
        }
        v
    };
    let (code, stdout, stderr) = mxbi(&dir, &args(false));
    // NON_DET is not a batch-invariance failure: exit 0, as `bi run`
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("NON_DET  ") && stdout.contains(" of 3 replays failed"),
        "{stdout}"
    );
    assert!(stdout.contains("no minimal case written"), "{stdout}");
    assert!(!stdout.contains("BI_FAIL"), "{stdout}");
    assert!(!dir.join("o/minimal.json").exists());
    let summary = json(&dir.join("o/fuzz.json"));
    assert_eq!(summary["failure"], Value::Null);
    assert_eq!(summary["non_det"][0]["verdict"], "NON_DET", "{summary}");
    // --strict: NON_DET fails the run
    let (code, stdout, stderr) = mxbi(&dir, &args(true));
    assert_eq!(code, 1, "{stdout}{stderr}");
}

#[test]
fn a_batch_invariant_subject_passes_its_case_limit() {
    let dir = fresh_dir("fuzz-pass");
    let (code, stdout, stderr) = mxbi(
        &dir,
        &[
            "fuzz",
            "--subject",
            "model:fma;split=4",
            "--seed",
            "2",
            "--out",
            "o",
            "--max-cases",
            "40",
            "--max-k",
            "512",
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("no failure (seed 2, 40 cases)"), "{stdout}");
    let summary = json(&dir.join("o/fuzz.json"));
    assert_eq!(summary["cases_tried"], 40);
    assert_eq!(summary["failure"], Value::Null);
    assert!(!dir.join("o/minimal.json").exists());
}

#[test]
fn the_corpus_is_replayed_first() {
    let dir = table_dir("fuzz-corpus");
    let (code, stdout, _) = mxbi(
        &dir,
        &[
            "fuzz",
            "--subject",
            "dispatch:table.json",
            "--seed",
            "1",
            "--out",
            "o",
            "--corpus",
            "corpus",
            "--max-cases",
            "300",
        ],
    );
    assert_eq!(code, 1, "{stdout}");
    let saved = files(&dir.join("corpus"));
    assert_eq!(saved.len(), 1);
    // no new case is drawn: the corpus case fails again at once
    let (code, stdout, stderr) = mxbi(
        &dir,
        &[
            "fuzz",
            "--subject",
            "dispatch:table.json",
            "--seed",
            "9",
            "--out",
            "o2",
            "--corpus",
            "corpus",
            "--max-cases",
            "0",
        ],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("1 case(s) replayed") && stdout.contains("fails again"),
        "{stdout}"
    );
    assert!(stdout.contains("cases tried: 0"), "{stdout}");
    assert_eq!(json(&dir.join("o2/minimal.json"))["k"], 65);
    // another subject's corpus cases are left alone
    let (code, stdout, stderr) = mxbi(
        &dir,
        &[
            "fuzz",
            "--subject",
            "model:fma",
            "--out",
            "o3",
            "--corpus",
            "corpus",
            "--max-cases",
            "3",
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stdout.contains("replayed"), "{stdout}");
    // a fixed subject: the corpus case holds, the run goes on to new cases
    std::fs::write(dir.join("table.json"), r#"{"dispatch": [{"order": "fma;split=4"}]}"#).unwrap();
    let (code, stdout, stderr) = mxbi(
        &dir,
        &[
            "fuzz",
            "--subject",
            "dispatch:table.json",
            "--out",
            "o4",
            "--corpus",
            "corpus",
            "--max-cases",
            "5",
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("1 case(s) replayed") && stdout.contains("no failure"),
        "{stdout}"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = table_dir("fuzz-bad");
    std::fs::create_dir_all(dir.join("badcorpus")).unwrap();
    std::fs::write(dir.join("badcorpus/x.json"), "{not json").unwrap();
    for (args, want) in [
        (vec!["--subject", "nope:x"], "unknown kind 'nope'"),
        (
            vec!["--subject", "model:fma", "--families", "switch"],
            "switch needs a second subject",
        ),
        (
            vec!["--subject", "model:fma", "--families", "rank"],
            "rank needs a subject with world size 2",
        ),
        (
            vec!["--subject", "model:fma", "--families", "bogus"],
            "unknown family 'bogus'",
        ),
        (
            vec!["--subject", "model:fma", "--classes", "pretty"],
            "unknown content class 'pretty'",
        ),
        (
            vec!["--subject", "model:fma", "--max-m", "0"],
            "--max-m 0 is out of range",
        ),
        (
            vec!["--subject", "model:fma", "--max-k", "1048576", "--max-n", "65536"],
            "exceeds",
        ),
        (vec!["--subject", "model:fma", "--budget=-1"], "--budget -1"),
        (
            vec!["--subject", "model:fma", "--input", "f8"],
            "unknown input type 'f8'",
        ),
        (
            vec!["--subject", "dump:somewhere"],
            "a dump: folder holds only the jobs",
        ),
        (
            vec!["--subject", "model:fma", "--corpus", "badcorpus"],
            "badcorpus/x.json",
        ),
        (
            vec!["--subject", "model:fma", "--others", "padding"],
            "unknown others 'padding'",
        ),
        (
            vec!["--subject", "model:fma", "--confirm", "101"],
            "--confirm 101 is out of range",
        ),
    ] {
        let mut all = vec!["fuzz", "--out", "o", "--max-cases", "2"];
        all.extend(args.iter());
        let (code, stdout, stderr) = mxbi(&dir, &all);
        assert_eq!(code, 2, "{args:?}: {stdout}{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("mxbi: error: ") && stderr.contains(want),
            "{args:?}: {stderr}"
        );
    }
}
