//! A subject whose output does not depend on its inputs is an error
//! (bi::depends), not 40 passing cells: a zeros runner and a constant one
//! are refused with one line (CLI exit 2); the model and a dispatch table
//! are not.

use mxbi::bi::{check, CheckOptions, Family, Verdict};
use mxbi::gemm::Problem;
use mxbi::order::InType;
use mxbi::subject::{Dispatch, Model, Subject, SubjectError};
use std::path::Path;
use std::process::Command;

/// Answers `value` for every output, whatever the batch.
struct Constant(f32);

impl Subject for Constant {
    fn name(&self) -> String {
        format!("const:{}", self.0)
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        Ok(vec![self.0; rows.map_or(p.m, <[usize]>::len) * p.n])
    }
}

fn opts() -> CheckOptions {
    CheckOptions {
        families: vec![Family::Content, Family::Batch, Family::Position, Family::Repeat],
        ms: vec![1, 2, 8, 17],
        k: 64,
        n: 8,
        positions: vec![],
        seed: 1,
        input: InType::F32,
        repeats: 3,
        confirm: 3,
    }
}

#[test]
fn zeros_and_constants_are_an_error() {
    for (v, first) in [(0.0f32, "00000000"), (1.0, "3f800000"), (-0.0, "80000000")] {
        let e = check(&Constant(v), None, &opts(), &|_, _| {}).unwrap_err();
        assert_eq!(
            e,
            format!(
                "subject const:{v}: its output does not depend on its inputs: a batch (M = 1, K = 64, N = 8) and the same batch negated give the same bytes, e.g. {first}; a GEMM's outputs change sign"
            )
        );
    }
}

#[test]
fn a_constant_switch_partner_is_an_error() {
    let mut o = opts();
    o.families = vec![Family::Switch];
    let m = Model::new("fma".parse().unwrap());
    let e = check(&m, Some(&Constant(2.0)), &o, &|_, _| {}).unwrap_err();
    assert!(e.starts_with("subject const:2: its output does not depend"), "{e}");
}

#[test]
fn a_gemm_is_not() {
    let table = r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"order": "fma;split=4"}]}"#;
    let d = Dispatch::parse("t.json", table).unwrap();
    for s in [
        &Model::new("fma".parse().unwrap()) as &dyn Subject,
        &Model::new("muladd;split=4;reduce=pairwise".parse().unwrap()),
        &d,
    ] {
        let r = check(s, None, &opts(), &|_, _| {}).unwrap();
        assert!(r.summary.valid);
        assert!(r.count(Verdict::Pass) > 0, "{}", r.text());
    }
}

fn cli(mode: &str) -> (i32, String, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runners/stdlib_runner.py");
    let subject = format!("exec:python3 '{}' {mode}", script.display());
    let out = Command::new(env!("CARGO_BIN_EXE_mxbi"))
        .args(["bi", "run", "--subject", &subject, "--family", "batch,content"])
        .args(["--m", "1,2,3", "--k", "8", "--n", "4"])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_cli_says_so_in_one_line_and_exits_2() {
    for mode in ["zeros", "const"] {
        let (code, out, err) = cli(mode);
        assert_eq!(code, 2, "{mode}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{mode}: {err}");
        assert!(
            err.contains(&format!(
                "subject exec:stdlib-muladd-{mode}: its output does not depend on its inputs"
            )),
            "{mode}: {err}"
        );
        assert!(out.is_empty(), "{mode}: {out}");
    }
    let (code, _, err) = cli("ok");
    assert_eq!(code, 0, "{err}");
}
