//! External subjects end to end: `exec:CMD` (protocol mxbi-exec/1) and
//! `dump:DIR` after `bi gen`, with a runner on the Python standard library
//! only (tests/runners/stdlib_runner.py: mxbi's `muladd` order bit for bit,
//! plus modes that misbehave). A runner that agrees with the model passes,
//! a planted one-bit error fails, and every broken runner or dump is exit 2
//! with one line, no report files and no files left behind.

mod common;

use common::TempDir;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// K = 64, N = 16: the smallest shape whose default (separating) inputs
/// have power >= 0.99 in every cell here, so an agreeing cell is a
/// `BI_PASS` (at K = 16, N = 4 it is `VACUOUS`: docs/BI.md, "Power").
const SHAPE: [&str; 6] = ["--m", "1,2,3,5", "--k", "64", "--n", "16"];
const ALL: &str = "switch,batch,content,position,permutation,repeat";

fn runner(mode: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runners/stdlib_runner.py");
    format!("exec:python3 '{}' {mode}", script.display())
}

/// A test folder; mxbi runs with TMPDIR inside it, so its work folders can
/// be checked.
struct Env {
    dir: TempDir,
}

impl Env {
    fn new(tag: &str) -> Env {
        let dir = TempDir::new(&format!("exec-{tag}"));
        std::fs::create_dir(dir.join("tmp")).unwrap();
        Env { dir }
    }

    fn tmp(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// (exit code, stdout, stderr)
    fn mxbi(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_mxbi"))
            .args(args)
            .env("TMPDIR", self.tmp())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn run(&self, subject: &str, extra: &[&str]) -> (i32, String, String) {
        let mut args = vec!["bi", "run", "--subject", subject];
        args.extend(SHAPE);
        args.extend(extra);
        self.mxbi(&args)
    }

    fn json(&self, name: &str) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.dir.join(name)).unwrap()).unwrap()
    }

    fn tmp_is_empty(&self) -> bool {
        std::fs::read_dir(self.tmp()).unwrap().next().is_none()
    }
}

fn cells<'a>(report: &'a Value, family: &str) -> Vec<&'a Value> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["family"] == family)
        .collect()
}

fn verdicts(report: &Value) -> Vec<String> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["verdict"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_runner_that_computes_the_model_order_passes_and_agrees_bit_for_bit() {
    let e = Env::new("agree");
    let json = e.path("r.json");
    let (code, _, err) = e.run(
        &runner("ok"),
        &["--vs", "model:muladd", "--family", ALL, "--json", &json],
    );
    assert_eq!(code, 0, "{err}");
    let r = e.json("r.json");
    assert_eq!(r["subject"], "exec:stdlib-muladd");
    assert!(verdicts(&r).iter().all(|v| v == "BI_PASS"), "{:?}", verdicts(&r));
    assert_eq!(cells(&r, "switch").len(), 4);
    assert_eq!(r["summary"]["valid"], true);
    assert!(e.tmp_is_empty(), "the work folder is removed");
}

#[test]
fn the_comparison_fails_on_another_order_and_on_a_planted_bit() {
    let e = Env::new("fail");
    let (code, _, _) = e.run(&runner("ok"), &["--vs", "model:fma", "--family", "switch"]);
    assert_eq!(code, 1, "muladd is not fma: the switch family must see it");

    let json = e.path("r.json");
    let (code, _, err) = e.run(
        &runner("plant"),
        &["--vs", "model:muladd", "--family", "switch,batch", "--json", &json],
    );
    assert_eq!(code, 1, "{err}");
    let r = e.json("r.json");
    for c in cells(&r, "switch") {
        let m = c["m"].as_u64().unwrap();
        if m <= 2 {
            assert_eq!(c["verdict"], "BI_PASS", "{c}");
        } else {
            assert_eq!(c["verdict"], "BI_FAIL", "{c}");
            assert_eq!(c["elements_differing"], 1, "{c}");
            assert_eq!(c["first_offenders"][0]["row"], 0, "{c}");
            assert_eq!(c["first_offenders"][0]["col"], 0, "{c}");
        }
    }
    // the batch family sees row 0 change in batches of 3 and 5 rows, and only row 0
    for c in cells(&r, "batch") {
        let want = if c["m"].as_u64().unwrap() >= 3 && c["row"] == "0" {
            "BI_FAIL"
        } else {
            "BI_PASS"
        };
        assert_eq!(c["verdict"], want, "{c}");
    }
}

#[test]
fn narrow_outputs_are_widened_exactly() {
    let e = Env::new("narrow");
    for (mode, vs) in [("f16", "model:muladd;out=f16"), ("bf16", "model:muladd;out=bf16")] {
        let (code, _, err) = e.run(&runner(mode), &["--vs", vs, "--family", "switch,batch"]);
        assert_eq!(code, 0, "{mode}: {err}");
        // and the rounding is visible: the f32 model disagrees
        let (code, _, err) = e.run(&runner(mode), &["--vs", "model:muladd", "--family", "switch"]);
        assert_eq!(code, 1, "{mode}: {err}");
    }
}

#[test]
fn an_error_answer_is_one_error_cell_and_the_runner_stays() {
    let e = Env::new("error");
    let json = e.path("r.json");
    let (code, _, err) = e.run(
        &runner("error-m3"),
        &["--vs", "model:muladd", "--family", "switch,repeat", "--json", &json],
    );
    assert_eq!(code, 0, "errors are not failures without --strict: {err}");
    let r = e.json("r.json");
    for c in r["cells"].as_array().unwrap() {
        let m = c["m"].as_u64().unwrap();
        let want = if m >= 3 { "ERROR" } else { "BI_PASS" };
        assert_eq!(c["verdict"], want, "{c}");
        if m >= 3 {
            assert!(
                c["reason"]
                    .as_str()
                    .unwrap()
                    .ends_with("the runner answered: this runner refuses every job"),
                "{c}"
            );
        }
    }
    // repeat cells come after the switch cells: the runner answered after its errors
    assert_eq!(cells(&r, "repeat")[0]["verdict"], "BI_PASS");
    let (code, _, _) = e.run(
        &runner("error-m3"),
        &["--vs", "model:muladd", "--family", "switch", "--strict"],
    );
    assert_eq!(code, 1);
}

#[test]
fn a_broken_runner_is_exit_2_with_one_line_and_nothing_written() {
    let e = Env::new("broken");
    let cases: [(&str, &str, &str); 13] = [
        ("die-at-start", "120", "exited (exit status: 3) before the greeting"),
        ("bad-greeting", "120", "is not the greeting"),
        ("die-after-1", "120", "exited (exit status: 4) before job 2"),
        // the next job line meets a closed pipe: no SIGPIPE death, one line
        ("exit-after-1", "120", "exit status: 5)"),
        ("hang", "2", "no answer for job 1 within 2 s (killed)"),
        ("garbage", "120", "answered job 1 with a line that is not JSON"),
        ("chatter", "120", "not JSON: \"computing job 1\""),
        ("wrong-job", "120", "answered job 2 while job 1 was asked"),
        ("wrong-shape", "120", "shape [1, 17], expected [1, 16]"),
        ("wrong-dtype", "120", "dtype <f4, but the runner said f16"),
        ("close-stdout", "120", "closed its stdout before job 1"),
        ("dev-zero", "120", "job 1: /dev/zero: not a regular file"),
        ("", "120", ""),
    ];
    for (mode, timeout, want) in cases {
        let subject = match mode {
            "" => "exec:/nonexistent/runner".to_string(),
            // without `exec`, the shell would keep the pipe open
            "close-stdout" => runner(mode).replacen("exec:", "exec:exec ", 1),
            _ => runner(mode),
        };
        let want = if mode.is_empty() {
            "exited (exit status: 127) before the greeting"
        } else {
            want
        };
        let (json, md, junit) = (e.path("r.json"), e.path("r.md"), e.path("r.xml"));
        let (code, out, err) = e.run(
            &subject,
            &[
                "--vs",
                "model:muladd",
                "--family",
                "switch,batch",
                "--timeout",
                timeout,
                "--json",
                &json,
                "--markdown",
                &md,
                "--junit",
                &junit,
            ],
        );
        assert_eq!(code, 2, "{mode}: {err}");
        assert_eq!(out, "", "{mode}");
        // stderr: mxbi's one line; for a nonexistent command it quotes the
        // shell's own complaint instead of letting it through
        assert_eq!(err.lines().count(), 1, "{mode}: {err}");
        assert!(err.starts_with("mxbi: error: ") && err.contains(want), "{mode}: {err}");
        if mode.is_empty() {
            assert!(
                err.contains("; its last stderr line: \"") && err.contains("/nonexistent/runner"),
                "{err}"
            );
        }
        for f in ["r.json", "r.md", "r.xml", "r.partial"] {
            assert!(!e.dir.join(f).exists(), "{mode}: {f} written");
        }
        assert!(e.tmp_is_empty(), "{mode}: work folder left behind");
    }
}

#[test]
fn a_runner_s_stderr_before_its_greeting_is_shown_once_after_it() {
    let e = Env::new("stderr");
    let subject = runner("ok").replacen("exec:", "exec:echo warming up >&2; ", 1);
    let (code, _, err) = e.run(&subject, &["--family", "batch", "--keep"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("warming up").count(), 1, "{err}");
    // and it is in the log in the work folder
    let line = err.lines().find(|l| l.contains("kept in")).expect(&err);
    let dir = PathBuf::from(line.rsplit("kept in ").next().unwrap());
    let log = std::fs::read_to_string(dir.join("runner-stderr.log")).unwrap();
    assert_eq!(log, "warming up\n");
}

#[test]
fn a_switch_partner_runner_is_told_the_other_subject_s_input_type() {
    // a runner that refuses any job whose input type is not bf16, against
    // a model that reads bf16: without --input it gets bf16 jobs, whichever
    // side it is on
    let e = Env::new("input");
    let bf16_runner = runner("need-bf16");
    for (subject, vs) in [
        ("model:hopper-bf16", bf16_runner.as_str()),
        (bf16_runner.as_str(), "model:hopper-bf16"),
    ] {
        let json = e.path("r.json");
        let (code, _, err) = e.mxbi(&[
            "bi",
            "run",
            "--subject",
            subject,
            "--vs",
            vs,
            "--family",
            "switch",
            "--m",
            "1,2",
            "--k",
            "32",
            "--n",
            "4",
            "--json",
            &json,
        ]);
        // the orders differ (a fused bf16 sum vs muladd): BI_FAIL, not ERROR
        assert_eq!(code, 1, "{subject} vs {vs}: {err}");
        let r = e.json("r.json");
        assert_eq!(r["input"], "bf16");
        assert!(verdicts(&r).iter().all(|v| v == "BI_FAIL"), "{:?}", verdicts(&r));
    }
    // against an f32 model it is told f32 and refuses every job (the check can fail)
    let (code, _, err) = e.mxbi(&[
        "bi",
        "run",
        "--subject",
        "model:muladd",
        "--vs",
        &bf16_runner,
        "--family",
        "switch",
        "--m",
        "1,2",
        "--k",
        "32",
        "--n",
        "4",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bf16 runner given f32 inputs"), "{err}");
}

#[test]
fn keep_keeps_the_job_files() {
    let e = Env::new("keep");
    let (code, _, err) = e.run(&runner("ok"), &["--family", "batch", "--keep"]);
    assert_eq!(code, 0, "{err}");
    let line = err.lines().find(|l| l.contains("kept in")).expect(&err);
    let dir = PathBuf::from(line.rsplit("kept in ").next().unwrap());
    assert!(dir.starts_with(e.tmp()), "{line}");
    let job = dir.join("job-000001");
    let a = mxbi::io::read_npy(job.join("a.npy")).unwrap();
    let b = mxbi::io::read_npy(job.join("b.npy")).unwrap();
    let c = mxbi::io::read_npy(job.join("out.npy")).unwrap();
    assert_eq!(
        (a.dtype(), b.dtype(), c.dtype()),
        (mxbi::io::DType::F32, mxbi::io::DType::F32, mxbi::io::DType::F32)
    );
    let m = a.shape()[0];
    assert_eq!(
        (a.shape(), b.shape(), c.shape()),
        (&[m, 64][..], &[64, 16][..], &[m, 16][..])
    );
}

fn gen(e: &Env, out: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "bi",
        "gen",
        "--out",
        out,
        "--subject",
        "model:muladd",
        "--vs",
        "model:muladd",
    ];
    args.extend(SHAPE);
    args.extend(["--family", ALL]);
    args.extend(extra);
    e.mxbi(&args)
}

fn fill(dir: &str, mode: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runners/stdlib_runner.py");
    let st = Command::new("python3")
        .arg(script)
        .args(["--dump", dir, mode])
        .status()
        .unwrap();
    assert!(st.success());
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(files(&p));
        } else {
            v.push((
                p.strip_prefix(dir).unwrap().display().to_string(),
                std::fs::read(&p).unwrap(),
            ));
        }
    }
    v.sort();
    v
}

#[test]
fn a_dump_round_trips_and_its_repeats_are_vacuous() {
    let e = Env::new("dump");
    let d = e.path("d");
    let (code, out, err) = gen(&e, &d, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        // 26 jobs of the cells, and the negated first batch of the
        // input-dependence probe (bi::depends; its plain batch is a cell's)
        out.starts_with(&format!("wrote 27 jobs to {d} (mxbi-bi-dump/1)")),
        "{out}"
    );
    let manifest = e.json("d/manifest.json");
    assert_eq!(manifest["schema"], "mxbi-bi-dump/1");
    let jobs = manifest["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 27);
    assert_eq!(jobs[0]["a"], "job-000001/a.npy");
    assert_eq!(jobs[0]["a_sha256"].as_str().unwrap().len(), 64);
    // the same command writes the same bytes
    let (code, _, _) = gen(&e, &e.path("d2"), &[]);
    assert_eq!(code, 0);
    assert_eq!(files(&e.dir.join("d")), files(&e.dir.join("d2")));
    // a folder that exists is refused
    let (code, _, err) = gen(&e, &d, &[]);
    assert_eq!(code, 2);
    assert!(err.contains("exists"), "{err}");

    // before a runner answered: the missing file is named
    let subject = format!("dump:{d}");
    let json = e.path("r.json");
    let run = |extra: &[&str]| {
        let mut x = vec!["--vs", "model:muladd", "--family", ALL, "--json", &json];
        x.extend(extra);
        e.run(&subject, &x)
    };
    let (code, _, err) = run(&[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/out.npy is missing: no runner has answered job"), "{err}");
    assert!(!e.dir.join("r.json").exists());

    fill(&d, "ok");
    let (code, _, err) = run(&[]);
    assert_eq!(code, 0, "{err}");
    let r = e.json("r.json");
    for c in r["cells"].as_array().unwrap() {
        if c["family"] == "repeat" {
            assert_eq!(c["verdict"], "VACUOUS", "{c}");
            assert!(c["reason"].as_str().unwrap().contains("cannot show non-determinism"));
        } else {
            assert_eq!(c["verdict"], "BI_PASS", "{c}");
        }
    }
    std::fs::remove_file(e.dir.join("r.json")).unwrap();

    // other options than gen had: no such job
    let (code, _, err) = run(&["--seed", "2"]);
    assert_eq!(code, 2);
    assert!(err.contains("has no job with these inputs"), "{err}");

    // a dump can fail: the planted bit
    fill(&d, "plant");
    let (code, _, err) = run(&[]);
    assert_eq!(code, 1, "{err}");
    std::fs::remove_file(e.dir.join("r.json")).unwrap();

    // outputs of the wrong shape, inputs changed after gen: named, exit 2
    fill(&d, "wrong-shape");
    let (code, _, err) = run(&[]);
    assert_eq!(code, 2);
    assert!(err.contains("out.npy: shape [") && err.contains("expected ["), "{err}");
    fill(&d, "ok");
    // the first job of M = 2: every cell at M = 2 reads it (the probe's
    // negated batch and which job of M = 1 goes unread depend on the shape
    // and on what else gen plans)
    let job = jobs.iter().find(|j| j["m"] == 2).expect("a job of M = 2");
    let name = job["a"].as_str().unwrap();
    let a = e.dir.join("d").join(name);
    let mut bytes = std::fs::read(&a).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&a, bytes).unwrap();
    let (code, _, err) = run(&[]);
    assert_eq!(code, 2);
    assert!(err.contains(&format!("{name}: changed since mxbi bi gen")), "{err}");
    assert!(!e.dir.join("r.json").exists());
}

#[test]
fn bad_options_are_refused() {
    let e = Env::new("options");
    let (code, _, err) = e.run(&runner("ok"), &["--family", "batch", "--timeout", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--timeout"), "{err}");
    let (code, _, err) = gen(&e, &e.path("d"), &["--json", &e.path("r.json")]);
    assert_eq!(code, 2);
    assert!(err.contains("drop --json"), "{err}");
    assert!(!e.dir.join("d").exists() && !e.dir.join("d.partial").exists());
    let (code, _, err) = e.run("dump:/nonexistent/dump", &["--family", "batch"]);
    assert_eq!(code, 2);
    assert!(err.contains("mxbi bi gen --out"), "{err}");
}

#[test]
fn a_case_resolves_its_relative_paths_against_its_own_folder() {
    // a dump folder and a runner next to the case file; mxbi runs elsewhere
    let e = Env::new("case-paths");
    let cases = e.dir.join("cases");
    std::fs::create_dir(&cases).unwrap();
    let dump = cases.join("dump").display().to_string();
    let (code, _, err) = gen(&e, &dump, &[]);
    assert_eq!(code, 0, "{err}");
    fill(&dump, "ok");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runners/stdlib_runner.py"),
        cases.join("runner.py"),
    )
    .unwrap();
    let write = |name: &str, subject: &str, families: &str, m: &str| {
        let p = cases.join(name);
        std::fs::write(
            &p,
            format!(
                r#"{{"schema": "mxbi-bi-case/1", "subject": "{subject}", "vs": "model:muladd", "families": {families}, "m": {m}, "k": 64, "n": 16}}"#
            ),
        )
        .unwrap();
        p.display().to_string()
    };
    let all: Vec<String> = ALL.split(',').map(|f| format!("\"{f}\"")).collect();
    let all = format!("[{}]", all.join(", "));
    let dump_case = write("dump.json", "dump:dump", &all, "[1, 2, 3, 5]");
    let exec_case = write("exec.json", "exec:python3 runner.py ok", "[\"switch\"]", "[1, 2]");
    let missing = write("missing.json", "dump:nope", "[\"batch\"]", "[1, 2]");
    assert_ne!(std::env::current_dir().unwrap(), cases);
    let (code, out, err) = e.mxbi(&["bi", "run", &dump_case]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("0 BI_FAIL"), "{out}");
    // a case file's exec: command runs only when allowed (tests/bi_allow_exec.rs)
    let (code, out, err) = e.mxbi(&["bi", "run", "--allow-exec", &exec_case]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2 BI_PASS"), "{out}");
    // the error names the resolved folder
    let (code, _, err) = e.mxbi(&["bi", "run", &missing]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&cases.join("nope").display().to_string()), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
