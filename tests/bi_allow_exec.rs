//! Case files are data, not commands (docs/BI.md, "Case files are data:
//! --allow-exec"): a case file whose subject or vs subject is `exec:CMD`
//! runs CMD only with `--allow-exec` or `MXBI_ALLOW_EXEC=1`; otherwise
//! `mxbi bi run CASE` and `mxbi explain --case CASE` exit 2 with one line
//! naming the command, and nothing runs. The command here creates a marker
//! file before it starts a working runner (tests/runners/stdlib_runner.py),
//! so whether it ran is a file on disk. A `--subject exec:CMD` typed on the
//! command line runs without the flag; a fuzz corpus replays its cases on
//! the fuzzed subject and never runs a case file's own command.

mod common;

use common::TempDir;
use std::path::Path;
use std::process::Command;

const MARKER: &str = "ran";

/// A command that leaves `ran` in its folder, then answers as the runner.
fn marking_runner() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runners/stdlib_runner.py");
    format!("exec:touch {MARKER}; exec python3 '{}' ok", script.display())
}

/// A case file in `dir`: `subject` (and `vs`), K = 64, N = 16.
fn write_case(dir: &Path, name: &str, subject: &str, vs: Option<&str>, family: &str, m: &str) -> String {
    let vs = vs.map_or(String::new(), |v| format!(r#", "vs": "{v}""#));
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            r#"{{"schema": "mxbi-bi-case/1", "subject": "{subject}"{vs}, "families": ["{family}"], "m": {m}, "k": 64, "n": 16}}"#
        ),
    )
    .unwrap();
    p.display().to_string()
}

/// (exit code, stdout, stderr) of mxbi run in `dir`, with `MXBI_ALLOW_EXEC`
/// set to `env` (None: unset, whatever the test process has).
fn mxbi(dir: &Path, args: &[&str], env: Option<&str>) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mxbi"));
    c.args(args).current_dir(dir).env("TMPDIR", dir);
    match env {
        Some(v) => c.env("MXBI_ALLOW_EXEC", v),
        None => c.env_remove("MXBI_ALLOW_EXEC"),
    };
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The refusal: exit 2, one line naming the file, the role and the
/// command, nothing run, no report written.
fn assert_refused(dir: &Path, (code, out, err): (i32, String, String), file: &str, role: &str) {
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let want = format!("{file}: {role} exec:touch {MARKER}; exec python3 ");
    assert!(err.contains(&want), "{err}");
    assert!(
        err.trim_end()
            .ends_with("would run a command; pass --allow-exec (or set MXBI_ALLOW_EXEC=1) to allow it"),
        "{err}"
    );
    assert!(!dir.join(MARKER).exists(), "the command ran: {err}");
    assert!(!dir.join("r.json").exists());
}

#[test]
fn a_case_file_runs_its_exec_command_only_when_allowed() {
    let d = TempDir::new("allow-exec-case");
    let dir = d.path();
    let case = write_case(dir, "case.json", &marking_runner(), None, "content", "[1, 2]");
    let run = |flag: bool, env: Option<&str>| {
        let mut args = vec!["bi", "run", &case, "--json", "r.json"];
        if flag {
            args.push("--allow-exec");
        }
        mxbi(dir, &args, env)
    };
    // refused without the flag, and with the variable set to anything but 1
    for env in [None, Some("0"), Some(""), Some("yes")] {
        assert_refused(dir, run(false, env), &case, "subject");
    }
    // --allow-exec: it runs (and the runner agrees with itself)
    let (code, out, err) = run(true, None);
    assert_eq!(code, 0, "{out}{err}");
    assert!(dir.join(MARKER).exists());
    assert!(dir.join("r.json").exists());
    // MXBI_ALLOW_EXEC=1: the same, without the flag
    std::fs::remove_file(dir.join(MARKER)).unwrap();
    std::fs::remove_file(dir.join("r.json")).unwrap();
    let (code, out, err) = run(false, Some("1"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(dir.join(MARKER).exists());
}

#[test]
fn a_vs_subject_is_held_to_the_same_rule() {
    let d = TempDir::new("allow-exec-vs");
    let dir = d.path();
    let case = write_case(
        dir,
        "vs.json",
        "model:muladd",
        Some(&marking_runner()),
        "switch",
        "[1, 2]",
    );
    assert_refused(
        dir,
        mxbi(dir, &["bi", "run", &case, "--json", "r.json"], None),
        &case,
        "vs subject",
    );
    let (code, out, err) = mxbi(dir, &["bi", "run", "--allow-exec", &case], None);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 BI_PASS"), "{out}");
    assert!(dir.join(MARKER).exists());
}

#[test]
fn explain_case_is_held_to_the_same_rule() {
    let d = TempDir::new("allow-exec-explain");
    let dir = d.path();
    let case = write_case(dir, "case.json", &marking_runner(), None, "batch", "[1, 2]");
    let cell = "batch/m=2/k=64/n=16/row=0";
    let args = ["explain", "--case", &case, "--cell", cell];
    assert_refused(dir, mxbi(dir, &args, None), &case, "subject");
    assert_refused(dir, mxbi(dir, &args, Some("0")), &case, "subject");
    for (flag, env) in [(true, None), (false, Some("1"))] {
        let mut a = args.to_vec();
        if flag {
            a.push("--allow-exec");
        }
        let (code, out, err) = mxbi(dir, &a, env);
        assert_eq!(code, 0, "{out}{err}");
        assert!(dir.join(MARKER).exists(), "{out}{err}");
        std::fs::remove_file(dir.join(MARKER)).unwrap();
    }
}

#[test]
fn a_command_typed_on_the_command_line_runs_without_the_flag() {
    let d = TempDir::new("allow-exec-typed");
    let dir = d.path();
    let subject = marking_runner();
    let (code, out, err) = mxbi(
        dir,
        &[
            "bi",
            "run",
            "--subject",
            &subject,
            "--family",
            "content",
            "--m",
            "1,2",
            "--k",
            "64",
            "--n",
            "16",
        ],
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(dir.join(MARKER).exists());
}

#[test]
fn a_fuzz_corpus_never_runs_a_case_file_s_command() {
    // a corpus case that claims the fuzzed subject's name but names a
    // command: it is replayed on the fuzzed subject, its command never runs
    let d = TempDir::new("allow-exec-fuzz");
    let dir = d.path();
    let corpus = dir.join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    let p = corpus.join("case-0000000000000000.json");
    std::fs::write(
        &p,
        format!(
            r#"{{"schema": "mxbi-bi-case/1", "name": "mxbi fuzz: model:fma", "subject": "{}", "families": ["batch"], "m": [1, 2], "k": 64, "n": 16}}"#,
            marking_runner()
        ),
    )
    .unwrap();
    for env in [None, Some("1")] {
        let (code, out, err) = mxbi(
            dir,
            &[
                "fuzz",
                "--subject",
                "model:fma",
                "--corpus",
                "corpus",
                "--out",
                "o",
                "--max-cases",
                "2",
                "--max-k",
                "64",
                "--max-n",
                "4",
                "--max-m",
                "9",
            ],
            env,
        );
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("1 case(s) replayed"), "{out}{err}");
        assert!(!dir.join(MARKER).exists(), "{out}{err}");
        assert!(!corpus.join(MARKER).exists(), "{out}{err}");
    }
    // the same file given to bi run is a case file like any other
    let file = p.display().to_string();
    let (code, out, err) = mxbi(dir, &["bi", "run", &file], None);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("would run a command; pass --allow-exec"), "{err}");
    assert!(!corpus.join(MARKER).exists(), "{err}");
}
