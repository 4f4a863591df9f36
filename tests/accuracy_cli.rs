//! `mxbi accuracy`: exit code 0 when the verdict passes, 1 when it fails,
//! 2 with one line on stderr for bad input (shape or dtype mismatch, a
//! value not of --dtype, a benchmark NaN where the golden is finite, ...);
//! the golden and benchmark computed from inputs and a subject.

mod common;

use common::TempDir;
use mxbi::accuracy::golden;
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::io::{write_tensor, TensorData};
use mxbi::subject::{Model, Subject};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi")).args(args).output().unwrap()
}

fn save<T: mxbi::io::Element>(dir: &TempDir, name: &str, shape: &[usize], v: &[T]) -> PathBuf {
    let p = dir.join(name);
    write_tensor(&p, "data", &TensorData::from_slice(shape.to_vec(), v).unwrap()).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn code(o: &Output) -> i32 {
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
    o.status.code().unwrap()
}

/// Exit 2, nothing on stdout, one `mxbi: error:` line containing `needle`.
fn bad_input(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(code(o), 2, "{err}");
    assert!(o.stdout.is_empty(), "{}", String::from_utf8_lossy(&o.stdout));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("mxbi: error: ") && err.contains(needle),
        "expected '{needle}' in: {err}"
    );
}

/// bf16 values near 1: golden (f64), a benchmark one step off at one
/// element, and an actual.
struct Files {
    dir: TempDir,
    golden: PathBuf,
    bench: PathBuf,
}

fn files(tag: &str) -> Files {
    let dir = TempDir::new(&format!("accuracy-{tag}"));
    let g: Vec<f64> = (0..64).map(|i| 0.5 + i as f64 / 128.0).collect(); // bf16 values
    let mut b: Vec<f32> = g.iter().map(|&x| x as f32).collect();
    b[3] += 2f32.powi(-8);
    Files {
        golden: save(&dir, "g.npy", &[8, 8], &g),
        bench: save(&dir, "b.npy", &[8, 8], &b),
        dir,
    }
}

#[test]
fn pass_fail_and_json() {
    let f = files("pass");
    let g: Vec<f32> = (0..64).map(|i| 0.5 + i as f32 / 128.0).collect();
    let good = save(&f.dir, "good.npy", &[8, 8], &g);
    let mut worse = g.clone();
    worse[10] += 0.25; // RE 0.4: MaxRE ratio ~100 > 10
    let bad = save(&f.dir, "bad.npy", &[8, 8], &worse);
    let args = |a: &Path| {
        vec![
            "accuracy".to_string(),
            "--actual".into(),
            s(a).into(),
            "--benchmark".into(),
            s(&f.bench).into(),
            "--golden".into(),
            s(&f.golden).into(),
            "--dtype".into(),
            "bf16".into(),
        ]
    };
    fn argv(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let o = run(&argv(&args(&good)));
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("PASS  standard atk  dtype bf16"));
    let o = run(&argv(&args(&bad)));
    assert_eq!(code(&o), 1);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("FAIL") && out.contains("MaxRE ratio"), "{out}");
    // --json: every metric and ratio
    let mut a = args(&bad);
    a.push("--json".into());
    let o = run(&argv(&a));
    assert_eq!(code(&o), 1);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["verdict"]["status"], "fail");
    assert_eq!(j["verdict"]["standard"], "atk");
    assert_eq!(j["golden"]["kind"], "given");
    assert!(j["verdict"]["ratios"]["max_re"].as_f64().unwrap() > 10.0);
    assert!(j["verdict"]["benchmark"]["max_re"].as_f64().unwrap() > 0.0);
    assert_eq!(j["ulp"]["worst"][0]["index"], 10);
    assert_eq!(j["ulp"]["worst"][0]["label"], "unknown");
    // other standards by name: assert-close with a scoped atol passes the one-step benchmark
    let o = run(&[
        "accuracy",
        "--actual",
        s(&f.bench),
        "--golden",
        s(&f.golden),
        "--dtype",
        "bf16",
        "--standard",
        "assert-close",
        "--atol",
        "5e-3",
        "--rtol",
        "0",
    ]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&[
        "accuracy",
        "--actual",
        s(&f.bench),
        "--golden",
        s(&f.golden),
        "--dtype",
        "bf16",
        "--standard",
        "assert-close",
        "--atol",
        "1e-3",
        "--rtol",
        "1e-8",
    ]);
    assert_eq!(code(&o), 1);
    // uint16 bf16 bits read as bf16 values
    let bits: Vec<u16> = g.iter().map(|v| (v.to_bits() >> 16) as u16).collect();
    let u = save(&f.dir, "bits.npy", &[8, 8], &bits);
    let o = run(&[
        "accuracy",
        "--actual",
        s(&u),
        "--golden",
        s(&f.golden),
        "--dtype",
        "bf16",
        "--standard",
        "single",
    ]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn bad_input_is_exit_2_with_one_line() {
    let f = files("bad");
    let g: Vec<f32> = (0..64).map(|i| 0.5 + i as f32 / 128.0).collect();
    let good = save(&f.dir, "good.npy", &[8, 8], &g);
    let flat = save(&f.dir, "flat.npy", &[64], &g);
    let mut off = g.clone();
    off[0] = 0.5 + 2f32.powi(-12); // not a bf16 value
    let off = save(&f.dir, "off.npy", &[8, 8], &off);
    let mut nan = g.clone();
    nan[1] = f32::NAN;
    let nan = save(&f.dir, "nan.npy", &[8, 8], &nan);
    let ints = save(&f.dir, "ints.npy", &[8, 8], &[7i32; 64]);
    let (a, b, gd) = (s(&good), s(&f.bench), s(&f.golden));
    bad_input(
        &run(&[
            "accuracy",
            "--actual",
            s(&flat),
            "--benchmark",
            b,
            "--golden",
            gd,
            "--dtype",
            "bf16",
        ]),
        "shape mismatch",
    );
    bad_input(
        &run(&[
            "accuracy",
            "--actual",
            s(&off),
            "--benchmark",
            b,
            "--golden",
            gd,
            "--dtype",
            "bf16",
        ]),
        "is not a bf16 value",
    );
    bad_input(
        &run(&[
            "accuracy",
            "--actual",
            a,
            "--benchmark",
            s(&nan),
            "--golden",
            gd,
            "--dtype",
            "bf16",
        ]),
        "cannot be formed",
    );
    bad_input(
        &run(&["accuracy", "--actual", s(&ints), "--golden", gd, "--standard", "single"]),
        "need --dtype",
    );
    bad_input(
        &run(&["accuracy", "--actual", a, "--benchmark", b, "--dtype", "bf16"]),
        "a golden is needed",
    );
    bad_input(
        &run(&["accuracy", "--actual", a, "--golden", gd, "--dtype", "bf16"]),
        "needs a benchmark",
    );
    bad_input(
        &run(&[
            "accuracy",
            "--actual",
            a,
            "--golden",
            gd,
            "--benchmark",
            b,
            "--standard",
            "nope",
        ]),
        "unknown standard 'nope'",
    );
    bad_input(
        &run(&[
            "accuracy",
            "--actual",
            a,
            "--golden",
            gd,
            "--benchmark",
            b,
            "--atol",
            "1e-3",
        ]),
        "assert-close only",
    );
    bad_input(
        &run(&[
            "accuracy",
            "--actual",
            a,
            "--golden",
            gd,
            "--dtype",
            "e4m3",
            "--standard",
            "atk",
            "--benchmark",
            b,
        ]),
        "is not a f8e4m3 value",
    );
    bad_input(
        &run(&["accuracy", "--actual", a, "--golden", gd, "--dtype", "int8"]),
        "expected an output type",
    );
    bad_input(
        &run(&["accuracy", "--actual", a, "--golden", gd, "--subject", "model:fma"]),
        "--a",
    );
    bad_input(
        &run(&[
            "accuracy",
            "--actual",
            "/nonexistent/x.npy",
            "--golden",
            gd,
            "--dtype",
            "bf16",
        ]),
        "x.npy",
    );
}

#[test]
fn golden_and_benchmark_from_inputs_and_a_subject() {
    let dir = TempDir::new("accuracy-subject");
    let (m, k, n) = (4usize, 64usize, 8usize);
    // bf16-valued inputs
    let q = |v: f32| f32::from_bits(v.to_bits() & 0xFFFF_0000);
    let a: Vec<f32> = (0..m * k).map(|i| q(((i * 37 % 101) as f32 - 50.0) / 64.0)).collect();
    let b: Vec<f32> = (0..k * n).map(|i| q(((i * 53 % 97) as f32 - 48.0) / 64.0)).collect();
    let pa = save(&dir, "a.npy", &[m, k], &a);
    let pb = save(&dir, "b.npy", &[k, n], &b);
    let p = Problem {
        a: Matrix::F32(&a),
        b: Matrix::F32(&b),
        m,
        n,
        k,
        b_layout: BLayout::Kn,
    };
    // the "kernel": another order, bf16 output
    let kernel = Model::new("fma;split=4;reduce=pairwise;out=bf16".parse().unwrap());
    let y = kernel.run(&p, None).unwrap();
    let py = save(&dir, "y.npy", &[m, n], &y);
    let base = [
        "accuracy",
        "--actual",
        s(&py),
        "--a",
        s(&pa),
        "--b",
        s(&pb),
        "--dtype",
        "bf16",
    ];
    let with = |extra: &[&str]| run(&[&base[..], extra].concat());
    let o = with(&["--subject", "model:fma;out=bf16", "--json"]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["golden"]["kind"], "exact");
    // the golden rounded to bf16 is the library's exact golden rounded once
    let g = golden::gemm(&p).unwrap();
    let r = g.rounded(mxbi::io::DType::BF16).unwrap();
    let worst = &j["ulp"]["worst"];
    for e in worst.as_array().unwrap() {
        let i = e["index"].as_u64().unwrap() as usize;
        assert_eq!(e["golden_rounded"].as_f64().unwrap(), r[i]);
        assert_eq!(e["output"].as_f64().unwrap(), y[i] as f64);
    }
    // the kernel's bytes against the model's: msprobe-binary fails when they differ
    let same = with(&[
        "--subject",
        "model:fma;split=4;reduce=pairwise;out=bf16",
        "--standard",
        "msprobe-binary",
    ]);
    assert_eq!(code(&same), 0, "{}", String::from_utf8_lossy(&same.stderr));
    // a planted error fails
    let mut bad = y.clone();
    bad[5] = q(bad[5] * 1.5 + 0.5);
    let pbad = save(&dir, "bad.npy", &[m, n], &bad);
    let o = run(&[
        "accuracy",
        "--actual",
        s(&pbad),
        "--a",
        s(&pa),
        "--b",
        s(&pb),
        "--dtype",
        "bf16",
        "--subject",
        "model:fma;out=bf16",
    ]);
    assert_eq!(code(&o), 1, "{}", String::from_utf8_lossy(&o.stdout));
    let o = run(&[
        "accuracy",
        "--actual",
        s(&pbad),
        "--a",
        s(&pa),
        "--b",
        s(&pb),
        "--dtype",
        "bf16",
        "--subject",
        "model:fma;split=4;reduce=pairwise;out=bf16",
        "--standard",
        "msprobe-binary",
    ]);
    assert_eq!(code(&o), 1);
    // the actual must be [M, N]; the subject must parse
    let wrong = save(&dir, "wrong.npy", &[n, m], &y);
    bad_input(
        &run(&[
            "accuracy",
            "--actual",
            s(&wrong),
            "--a",
            s(&pa),
            "--b",
            s(&pb),
            "--dtype",
            "bf16",
            "--standard",
            "single",
        ]),
        "A x B is [4, 8]",
    );
    bad_input(&with(&["--subject", "model:nonsense"]), "nonsense");
    bad_input(&with(&["--subject", "model:fma", "--benchmark", s(&py)]), "--benchmark");
}

#[test]
fn a_case_standard_acc_is_judged_beside_bi() {
    let dir = TempDir::new("accuracy-case");
    let case = |name: &str, subject: &str, acc: &str| {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!(
                r#"{{"schema": "mxbi-bi-case/1", "subject": "{subject}", "m": [8, 16], "k": 1024, "n": 32,
                    "families": ["batch"], "standard": {{"acc": "{acc}"}}}}"#
            ),
        )
        .unwrap();
        p
    };
    // a split-K f32 model: BI passes, and so does the double benchmark against fma
    let good = case("good.json", "model:fma;split=4", "cv_fused_double_benchmark");
    let json = dir.join("good-report.json");
    let o = run(&["bi", "run", s(&good), "--json", s(&json)]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("accuracy PASS: standard cv_fused_double_benchmark (atk), dtype f32, M = 8"),
        "{out}"
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["accuracy"]["status"], "pass");
    assert_eq!(r["accuracy"]["benchmark"], "model:fma");
    assert_eq!(r["accuracy"]["report"]["golden"]["kind"], "exact");
    assert!(r["accuracy"]["report"]["verdict"]["ratios"]["max_re"].as_f64().unwrap() <= 10.0);
    // a truncating FP8 tensor-core order: batch-invariant, but its accuracy fails: exit 1
    let bad = case("bad.json", "model:hopper-fp8-wgmma", "atk");
    let o = run(&["bi", "run", s(&bad)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("0 BI_FAIL") && out.contains("accuracy FAIL: standard atk"),
        "{out}"
    );
    assert_eq!(code(&o), 1);
    // bf16 output: judged as bf16 against fma;out=bf16
    let b16 = case("b16.json", "model:fma;split=4;out=bf16", "single");
    let o = run(&["bi", "run", s(&b16)]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("dtype bf16, M = 8, benchmark model:fma;out=bf16"));
    // an unknown standard is refused before anything runs
    bad_input(
        &run(&["bi", "run", s(&case("nope.json", "model:fma", "nope"))]),
        "standard.acc: unknown standard 'nope'",
    );
}
