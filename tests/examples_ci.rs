//! examples/ci/: the CI a kernel author copies, run here as CI runs it.
//! The GitHub Actions workflow (mxbi.yml) calls the shell script
//! (mxbi-ci.sh) for every mxbi step, so the script is what is tested: on the
//! passing example (exit 0, JUnit and Markdown written, the job summary
//! filled), on failing cases (exit 1, from the check or from the fuzzer, the
//! corpus kept and replayed), and on what cannot run (exit 2, one line).
//! The workflow is checked to call the script with files that exist and to
//! upload the files the script writes.

mod common;

use common::TempDir;
use std::path::{Path, PathBuf};
use std::process::Command;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ci").join(name)
}

/// Small fuzz runs: a few cases, small shapes.
const FUZZ_ARGS: &str = "--max-cases 30 --max-k 600 --max-n 8 --max-m 40";

/// (exit code, stdout, stderr) of `bash mxbi-ci.sh ARGS` run in `dir`,
/// with `env` set and the CI variables of the test process removed.
fn ci(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new("bash");
    c.arg(example("mxbi-ci.sh")).args(args).current_dir(dir);
    for v in [
        "GITHUB_STEP_SUMMARY",
        "MXBI_ALLOW_EXEC",
        "MXBI_FUZZ_SUBJECT",
        "MXBI_FUZZ_SEED",
    ] {
        c.env_remove(v);
    }
    c.env("MXBI_FUZZ_BUDGET", "20")
        .env("MXBI_FUZZ_ARGS", FUZZ_ARGS)
        .env("TMPDIR", dir);
    c.envs(env.iter().copied());
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The workflow file's lines, trimmed.
fn workflow() -> Vec<String> {
    read(&example("mxbi.yml"))
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

/// The workflow's `env:` value of `key`.
fn workflow_env(key: &str) -> String {
    let prefix = format!("{key}:");
    workflow()
        .iter()
        .find_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().trim_matches('"').to_string()))
        .unwrap_or_else(|| panic!("mxbi.yml sets no {key}"))
}

/// A dispatch table that changes its order at M = 16 (batch-variant), and
/// two cases on it: `fails.json` crosses the boundary (the check fails),
/// `holds.json` stays below it (the check holds, the fuzzer finds it).
fn variant_cases(dir: &Path) {
    std::fs::write(
        dir.join("t.json"),
        r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"order": "fma;split=4"}]}"#,
    )
    .unwrap();
    for (name, m) in [("fails.json", r#""edges""#), ("holds.json", "[1, 2]")] {
        std::fs::write(
            dir.join(name),
            format!(
                r#"{{"schema": "mxbi-bi-case/1", "subject": "dispatch:t.json", "families": ["batch"], "m": {m}, "k": 64, "n": 16}}"#
            ),
        )
        .unwrap();
    }
}

#[test]
fn the_passing_example_holds_and_writes_junit_and_markdown() {
    let d = TempDir::new("ci-pass");
    let dir = d.path();
    let summary = dir.join("summary.md");
    let case = example("case.json");
    let (code, out, err) = ci(
        dir,
        &[env!("CARGO_BIN_EXE_mxbi"), case.to_str().unwrap(), "corpus", "mxbi-out"],
        &[("GITHUB_STEP_SUMMARY", summary.to_str().unwrap())],
    );
    assert_eq!(code, 0, "{out}{err}");
    let o = dir.join("mxbi-out");
    let junit = read(&o.join("bi.xml"));
    assert!(junit.starts_with("<?xml") && junit.contains("<testsuites "), "{junit}");
    assert!(
        junit.contains(r#"failures="0""#) && !junit.contains("<failure"),
        "{junit}"
    );
    let md = read(&o.join("bi.md"));
    assert!(md.starts_with("# Batch invariance"), "{md}");
    assert!(md.contains(" 0 BI_FAIL"), "{md}");
    assert!(
        read(&o.join("fuzz.txt")).contains("no failure (seed 1, 30 cases)"),
        "{out}"
    );
    assert!(o.join("fuzz/fuzz.json").is_file());
    assert!(
        dir.join("corpus").is_dir(),
        "the corpus folder exists for the cache to save"
    );
    let s = read(&summary);
    assert!(
        s.starts_with("# Batch invariance") && s.contains("## mxbi fuzz (seed 1)"),
        "{s}"
    );
    // the workflow passes `mxbi-out` as OUT_DIR and uploads what the script wrote there
    let wf = workflow();
    let uploads: Vec<&String> = wf.iter().filter(|l| l.starts_with("mxbi-out/")).collect();
    assert!(uploads.len() >= 2, "{uploads:?}");
    for u in &uploads {
        assert!(
            dir.join(u.as_str()).exists(),
            "mxbi.yml uploads {u}, which the script did not write"
        );
    }
    for f in ["mxbi-out/bi.xml", "mxbi-out/bi.md"] {
        assert!(uploads.iter().any(|u| u.as_str() == f), "mxbi.yml does not upload {f}");
    }
}

#[test]
fn a_failing_check_or_a_fuzz_failure_is_exit_1_and_the_corpus_is_kept() {
    let d = TempDir::new("ci-fail");
    let dir = d.path();
    variant_cases(dir);
    let bin = env!("CARGO_BIN_EXE_mxbi");
    // the check fails (BI_FAIL cells in the JUnit), the fuzzer finds it too
    let (code, out, err) = ci(dir, &[bin, "fails.json", "c1", "o1"], &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(read(&dir.join("o1/bi.xml")).contains("<failure"), "{out}");
    assert!(read(&dir.join("o1/bi.md")).contains("BI_FAIL"));
    // the check holds, the fuzzer fails: still exit 1, the case saved
    let (code, out, err) = ci(dir, &[bin, "holds.json", "c2", "o2"], &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("bi run exit 0, fuzz exit 1"), "{out}");
    assert!(dir.join("o2/fuzz/minimal.json").is_file());
    let saved = std::fs::read_dir(dir.join("c2")).unwrap().count();
    assert_eq!(saved, 1, "{out}");
    // the next run replays the kept corpus first
    let (code, out, err) = ci(dir, &[bin, "holds.json", "c2", "o3"], &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("1 case(s) replayed") && out.contains("fails again"),
        "{out}"
    );
}

#[test]
fn what_cannot_run_is_exit_2_with_one_line() {
    let d = TempDir::new("ci-bad");
    let dir = d.path();
    variant_cases(dir);
    let bin = env!("CARGO_BIN_EXE_mxbi");
    let marker = dir.join("ran");
    let exec_case = dir.join("exec.json");
    std::fs::write(
        &exec_case,
        r#"{"schema": "mxbi-bi-case/1", "subject": "exec:touch ran; false", "families": ["batch"], "m": [1, 2], "k": 64, "n": 16}"#,
    )
    .unwrap();
    std::fs::write(dir.join("broken.json"), "{").unwrap();
    let runs: [(&[&str], &str); 6] = [
        (
            &[bin, "holds.json"],
            "usage: mxbi-ci.sh MXBI CASE.json CORPUS_DIR [OUT_DIR]",
        ),
        (
            &["/nonexistent/mxbi", "holds.json", "c", "o"],
            "/nonexistent/mxbi: not an executable file",
        ),
        (
            &["no-such-mxbi-command", "holds.json", "c", "o"],
            "no-such-mxbi-command: no such command on PATH",
        ),
        (&[bin, "missing.json", "c", "o"], "missing.json: no such case file"),
        (
            &[bin, "broken.json", "c", "o"],
            "mxbi bi run broken.json could not run (exit 2)",
        ),
        // a case file's exec: command is not run without MXBI_ALLOW_EXEC=1
        (
            &[bin, "exec.json", "c", "o"],
            "mxbi bi run exec.json could not run (exit 2)",
        ),
    ];
    for (args, want) in runs {
        let (code, out, err) = ci(dir, args, &[]);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        let last = err.lines().last().unwrap_or_default();
        assert_eq!(last, format!("mxbi-ci: {want}"), "{args:?}: {err}");
        assert!(!dir.join("o/fuzz.txt").exists(), "{args:?}: the fuzzer ran");
    }
    assert!(!marker.exists(), "the exec: case ran its command");
}

#[test]
fn the_workflow_calls_the_script_on_files_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = workflow_env("MXBI_CI_SCRIPT");
    assert_eq!(root.join(&script), example("mxbi-ci.sh"));
    assert!(root.join(workflow_env("MXBI_CASE")).is_file());
    let wf = workflow();
    let call = wf
        .iter()
        .find(|l| l.starts_with("run: bash \"$MXBI_CI_SCRIPT\""))
        .expect("a step runs the script");
    assert_eq!(
        call,
        r#"run: bash "$MXBI_CI_SCRIPT" "$HOME/.cargo/bin/mxbi" "$MXBI_CASE" "$MXBI_CORPUS" mxbi-out"#
    );
    // no mxbi command outside the script, except installing it
    let other: Vec<&String> = wf
        .iter()
        .filter(|l| l.contains("mxbi bi ") || l.contains("mxbi fuzz ") || l.starts_with("run: mxbi"))
        .filter(|l| !l.starts_with('#') && !l.starts_with("- name:"))
        .collect();
    assert!(other.is_empty(), "{other:?}");
    // the corpus is restored before the script and saved after it, even on failure
    let at = |s: &str| {
        wf.iter()
            .position(|l| l.contains(s))
            .unwrap_or_else(|| panic!("no {s}"))
    };
    assert!(at("actions/cache/restore@") < at("run: bash \"$MXBI_CI_SCRIPT\""));
    assert!(at("run: bash \"$MXBI_CI_SCRIPT\"") < at("actions/cache/save@"));
    for step in ["actions/cache/save@", "actions/upload-artifact@"] {
        assert_eq!(
            wf[at(step) - 1],
            "if: always()",
            "{step} runs after a failing check too"
        );
    }
}
