//! Runners that lie through `exec:` (tests/runners/stdlib_runner.py's lying
//! modes, beside the crashes, hangs and garbage of tests/bi_exec.rs): each
//! makes `mxbi bi run` exit 2 with one clear line naming the lie, writes
//! no report file, and leaves no work folder behind.

mod common;

use common::bad_input::{mxbi, outputs};
use common::TempDir;
use std::path::Path;

fn runner(mode: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runners/stdlib_runner.py");
    format!("exec:python3 {} {mode}", script.display())
}

/// `bi run` on the runner in `mode`: batch sizes 1 and 2, K 8, N 4, every
/// report format, into `dir`.
fn check(dir: &Path, mode: &str) -> common::bad_input::Run {
    let d = dir.display();
    let (json, md, xml) = (format!("{d}/out.json"), format!("{d}/out.md"), format!("{d}/out.xml"));
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let subject = runner(mode);
    let args = [
        "bi",
        "run",
        "--subject",
        &subject,
        "--family",
        "batch,content",
        "--k",
        "8",
        "--n",
        "4",
        "--m",
        "1,2",
        "--json",
        &json,
        "--markdown",
        &md,
        "--junit",
        &xml,
    ];
    mxbi(&args, None, &tmp)
}

#[test]
fn lying_runners_are_exit_2_with_one_line_and_nothing_written() {
    let root = TempDir::new("lying-runners");
    let lies = [
        // claims f32, writes f16
        ("f16-said-f32", "dtype <f2, but the runner said f32"),
        // the right shape for another M (the first job is the input-
        // dependence probe's, bi::depends, at the smallest M)
        ("other-m", "shape [2, 4], expected [1, 4]"),
        // NaN where these inputs cannot overflow
        (
            "nan",
            "C[0, 0] is NaN, but no summation of these finite inputs can overflow",
        ),
        // answers, then exits without having written the output
        ("no-file-exit", "job 1: "),
        // a log line after its answer: the next job reads it
        (
            "chatter-after",
            "answered job 2 with a line that is not JSON: \"job 1 done\"",
        ),
    ];
    let mut failures = Vec::new();
    for (mode, want) in lies {
        let dir = root.join(mode);
        std::fs::create_dir_all(&dir).unwrap();
        let run = check(&dir, mode);
        if let Some(p) = run.bad_input_problem(want) {
            failures.push(format!("{mode}: {p}"));
        }
        let left = outputs(&dir);
        if !left.is_empty() {
            failures.push(format!("{mode}: files left {left:?}"));
        }
        let tmp: Vec<_> = std::fs::read_dir(dir.join("tmp")).unwrap().collect();
        if !tmp.is_empty() {
            failures.push(format!("{mode}: {} work folders left", tmp.len()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same harness on the honest runner: exit 0, the reports written; so
/// the assertions above can fail.
#[test]
fn the_honest_runner_passes_the_same_harness() {
    let dir = TempDir::new("honest-runner");
    let run = check(dir.path(), "ok");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.bad_input_problem("").is_some());
    let mut left = outputs(dir.path());
    left.sort();
    assert_eq!(left, ["out.json", "out.md", "out.xml"]);
}

/// An offline runner's dump whose manifest lies about a job's M (and whose
/// `out.npy` follows the lie): exit 2 naming the job, no report. Before
/// the check, the `[M + 1, N]` output was taken as the answer to an
/// `[M, N]` job.
#[test]
fn a_dump_whose_manifest_lies_about_m_is_exit_2() {
    let dir = TempDir::new("lying-dump");
    let d = dir.path().display().to_string();
    let dump = format!("{d}/dump");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let shape = ["--family", "batch", "--k", "8", "--n", "4", "--m", "1,2"];
    let mut gen = vec!["bi", "gen", "--out", &dump, "--subject", "model:muladd"];
    gen.extend(shape);
    let run = mxbi(&gen, None, &tmp);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runners/stdlib_runner.py");
    let st = std::process::Command::new("python3")
        .arg(script)
        .args(["--dump", &dump])
        .status()
        .unwrap();
    assert!(st.success());
    let subject = format!("dump:{dump}");
    let json = format!("{d}/out.json");
    let mut check = vec!["bi", "run", "--subject", &subject, "--json", &json];
    check.extend(shape);
    // the honest dump passes
    let run = mxbi(&check, None, &tmp);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    std::fs::remove_file(&json).unwrap();
    // the M = 1 jobs (the cells' baseline, and the negated batch only the
    // input-dependence probe reads, bi::depends) now claim M = 2 and have
    // a [2, 4] output
    let path = dir.join("dump/manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut lied = 0;
    for j in m["jobs"].as_array_mut().unwrap() {
        if j["m"] == 1 {
            j["m"] = 2.into();
            let out = common::bad_input::f32_npy("(2, 4)", 8);
            std::fs::write(
                dir.join(&format!("dump/job-{:06}/out.npy", j["job"].as_u64().unwrap())),
                out,
            )
            .unwrap();
            lied += 1;
        }
    }
    assert_eq!(lied, 2);
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let run = mxbi(&check, None, &tmp);
    assert_eq!(
        run.bad_input_problem("lists M = 2, K = 8, N = 4, but its input files are [1, 8] and [8, 4]"),
        None
    );
    assert!(!Path::new(&json).exists());
}
