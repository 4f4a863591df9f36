//! `mxbi reveal gen|solve` with MX inputs: each job is the codes and E8M0
//! scales of A and B as uint8 `.npy` files, a runner (emulated here by the
//! CPU model reading those files) writes `out.npy`, and the tree recovered
//! through the files is the one `mxbi reveal --subject` recovers directly.
//! A planted error in one answer is caught; bad manifests and answers are
//! one line and exit 2.

mod common;

use common::bad_input::{mxbi, Run};
use common::fresh_dir;
use common::reveal_runner::{answer, answer_with, outputs_as_bf16_bits};
use mxbi::io::load_tensor;
use serde_json::Value;
use std::path::Path;

const M: &str = "8";
const K: &str = "256";
const N: &str = "16";

fn run(args: &[&str], tmp: &Path) -> Run {
    mxbi(args, None, tmp)
}

fn json(r: &Run) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {:?} {:?}", r.stdout, r.stderr))
}

fn gen(dir: &Path, input: &str, tmp: &Path) -> Run {
    let ds = dir.display().to_string();
    run(
        &[
            "reveal", "gen", "--dir", &ds, "--m", M, "--k", K, "--n", N, "--input", input,
        ],
        tmp,
    )
}

/// Answers the pending jobs (through `edit`) and solves until the result:
/// the last solve and the number of rounds answered.
fn finish(dir: &Path, order: &str, tmp: &Path, mut edit: impl FnMut(&str, &mut [f32])) -> (Run, usize) {
    let ds = dir.display().to_string();
    for rounds in 1..=30 {
        assert!(answer_with(dir, order, &mut edit) > 0, "a round without jobs");
        let r = run(&["reveal", "solve", "--dir", &ds, "--json"], tmp);
        if r.code != Some(0) || json(&r)["status"] != "pending" {
            return (r, rounds);
        }
    }
    panic!("no result after 30 rounds");
}

/// The direct reveal of `model:ORDER` with `--input FORMAT --json`.
fn direct(order: &str, input: &str, tmp: &Path) -> Run {
    let subject = format!("model:{order}");
    run(
        &[
            "reveal",
            "--subject",
            &subject,
            "--input",
            input,
            "--m",
            M,
            "--k",
            K,
            "--n",
            N,
            "--json",
        ],
        tmp,
    )
}

/// gen -> runner -> solve until the result, for MX formats and orders: the
/// result (tree, order, launches, probes, everything in the JSON) is the
/// direct reveal's.
#[test]
fn files_round_trip_equals_the_direct_reveal() {
    let tmp = fresh_dir("reveal-mx-rt");
    for (input, order) in [
        ("mxfp8-e4m3", "fma;scale=block"),
        ("mxfp8-e4m3", "fma;split=4;reduce=pairwise;scale=block"),
        ("mxfp8-e5m2", "fma;scale=block"),
        ("mxint8", "fma;split=2;scale=block"),
        ("mxfp8-e4m3", "fma;scale=block;out=bf16"),
    ] {
        let dir = tmp.join(format!("{input}-{}", order.replace([';', '='], "_")));
        let g = gen(&dir, input, &tmp);
        assert_eq!(g.code, Some(0), "{}", g.stderr);
        let (r, rounds) = finish(&dir, order, &tmp, |_, _| {});
        assert_eq!(r.code, Some(0), "{input} {order}: {}", r.stderr);
        if order.contains("out=bf16") {
            // the runner's bf16 outputs as `<u2` bits read the same
            assert_eq!(
                outputs_as_bf16_bits(&dir) as u64,
                json(&r)["launches"].as_u64().unwrap()
            );
            let ds = dir.display().to_string();
            let again = run(&["reveal", "solve", "--dir", &ds, "--json"], &tmp);
            assert_eq!(again.code, Some(0), "{}", again.stderr);
            assert_eq!(json(&again), json(&r));
        }
        let d = direct(order, input, &tmp);
        assert_eq!(d.code, Some(0), "{}", d.stderr);
        let (files, want) = (json(&r), json(&d));
        assert_eq!(files, want, "{input} {order}: through files vs direct");
        let named = std::iter::once(&files["order"]).chain(files["equivalent"].as_array().unwrap());
        assert!(named.into_iter().any(|o| o == order), "{input} {order}: {files}");
        assert_eq!(files["mx"], input);
        assert!(rounds >= 2, "{input} {order}: {rounds} rounds");
        if order == "fma;scale=block" {
            // one vocabulary: `mxbi explain` reads the last job (random MX
            // inputs) as written and names the runner's order
            let last = dir.join(format!("job-{:06}", files["launches"].as_u64().unwrap() - 1));
            let f = |name: &str| last.join(name).display().to_string();
            let e = run(
                &[
                    "explain",
                    "--a",
                    &f("a.npy"),
                    "--b",
                    &f("b.npy"),
                    "--format",
                    input,
                    "--a-scales",
                    &f("a_scales.npy"),
                    "--b-scales",
                    &f("b_scales.npy"),
                    "--observed",
                    &f("out.npy"),
                    "--json",
                ],
                &tmp,
            );
            assert_eq!(e.code, Some(0), "{}", e.stderr);
            let rows = json(&e)["rows"].as_array().unwrap().clone();
            assert_eq!(rows.len(), 8);
            assert!(rows.iter().all(|r| r["observed"]["order"] == order), "{rows:?}");
        }
    }
}

/// What gen writes for an MX job: uint8 codes A [M, K] and B [K, N], uint8
/// E8M0 scales [M, K/32] and [K/32, N], the manifest naming the format and
/// the layouts, and a prompt that says what to read and write.
#[test]
fn gen_writes_codes_scales_and_layouts() {
    let tmp = fresh_dir("reveal-mx-gen");
    let dir = tmp.join("probe");
    let g = gen(&dir, "mxfp8-e4m3", &tmp);
    assert_eq!(g.code, Some(0), "{}", g.stderr);
    for word in [
        "a.npy [8, 256]",
        "b.npy [256, 16]",
        "a_scales.npy [8, 8]",
        "b_scales.npy [8, 16]",
        "out.npy [8, 16]",
    ] {
        assert!(g.stdout.contains(word), "{word}: {}", g.stdout);
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(v["schema"], "mxbi-reveal/1");
    assert_eq!(v["format"], "mxfp8-e4m3");
    assert_eq!(v["b_layout"], "kn");
    assert_eq!(v["block"], 32);
    let job = dir.join(v["jobs"][0]["id"].as_str().unwrap());
    for (key, shape) in [
        ("a", [8, 256]),
        ("a_scales", [8, 8]),
        ("b", [256, 16]),
        ("b_scales", [8, 16]),
    ] {
        let f = &v["files"][key];
        assert_eq!(f["shape"], serde_json::json!(shape), "{key}");
        assert_eq!(f["dtype"], "|u1", "{key}");
        let t = load_tensor(job.join(f["file"].as_str().unwrap()), None).unwrap();
        assert_eq!(t.shape(), shape, "{key}");
        assert!(t.as_bits8().is_ok(), "{key}: uint8");
    }
    assert_eq!(v["files"]["out"]["shape"], serde_json::json!([8, 16]));
    // a job folder the manifest does not list is never taken for a launch:
    // its out.npy answers something else
    std::fs::write(job.join("out.npy"), b"stale").unwrap();
    set(&dir, "jobs", serde_json::json!([]));
    let ds = dir.display().to_string();
    let r = run(&["reveal", "solve", "--dir", &ds, "--json"], &tmp);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(json(&r)["jobs"], serde_json::json!(["job-000001"]));
    // the same folder shape answered for f32 inputs still writes f32 jobs
    let dir = tmp.join("f32");
    let g = gen(&dir, "f32", &tmp);
    assert_eq!(g.code, Some(0), "{}", g.stderr);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert!(v.get("format").is_none());
    let job = dir.join(v["jobs"][0]["id"].as_str().unwrap());
    assert!(load_tensor(job.join("a.npy"), None).unwrap().as_f32().is_ok());
    assert!(!job.join("a_scales.npy").exists());
}

/// A planted error in one answer is never a tree: a flipped bit in a probe
/// answer is refused (exit 2, not a whole number of units); a wrong but
/// whole count (an element copied from another column) is a disagreement
/// (exit 1, no order named); a flipped bit in the last launch (random MX
/// inputs, checking the named order's bytes) leaves no order that
/// reproduces them (exit 1).
#[test]
fn a_planted_error_is_caught() {
    let tmp = fresh_dir("reveal-mx-plant");
    let order = "fma;scale=block";
    // the clean run: the number of jobs (the last one checks the bytes)
    let clean = tmp.join("clean");
    assert_eq!(gen(&clean, "mxfp8-e4m3", &tmp).code, Some(0));
    let (r, _) = finish(&clean, order, &tmp, |_, _| {});
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v = json(&r);
    let jobs = v["launches"].as_u64().unwrap() as usize;
    let last = format!("job-{:06}", jobs - 1);
    assert!(clean.join(&last).join("out.npy").exists());
    assert!(!clean.join(format!("job-{jobs:06}")).exists());

    let plant = |name: &str, job: &str, how: u8| {
        let dir = tmp.join(name);
        assert_eq!(gen(&dir, "mxfp8-e4m3", &tmp).code, Some(0));
        let mut planted = false;
        let (r, _) = finish(&dir, order, &tmp, |j, c| {
            if j == job {
                match how {
                    0 => c[5] = f32::from_bits(c[5].to_bits() ^ 1),
                    _ => {
                        assert_ne!(c[5], c[6], "the copy must change the element");
                        c[5] = c[6];
                    }
                }
                planted = true;
            }
        });
        assert!(planted, "{job} was never answered");
        r
    };
    // a flipped bit in a probe answer: refused
    let r = plant("bit", "job-000001", 0);
    assert!(
        r.bad_input_problem("not a whole number of units").is_none(),
        "{}",
        r.stderr
    );
    // a whole but wrong count: a disagreement, no order
    let r = plant("copy", "job-000001", 1);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let v = json(&r);
    assert!(v["disagreement_count"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["shared_tree"], false);
    assert_eq!(v["order"], Value::Null);
    // a flipped bit in the bytes check: the tree, but no order reproduces the bytes
    let r = plant("check", &last, 0);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let v = json(&r);
    assert_eq!(v["disagreement_count"], 0);
    assert_eq!(v["order"], Value::Null);
    assert!(v["shape_matches"].as_array().unwrap().iter().any(|o| o == order), "{v}");
}

/// Every MX format's probe launches are written and read back: the first
/// round of jobs answered, solve goes on (exit 0).
#[test]
fn every_mx_format_writes_probe_jobs() {
    let tmp = fresh_dir("reveal-mx-formats");
    for input in [
        "mxfp8-e4m3",
        "mxfp8-e5m2",
        "mxfp6-e3m2",
        "mxfp6-e2m3",
        "mxfp4-e2m1",
        "mxint8",
    ] {
        let dir = tmp.join(input);
        let g = gen(&dir, input, &tmp);
        assert_eq!(g.code, Some(0), "{input}: {}", g.stderr);
        assert!(g.stdout.contains(&format!("the {input} codes")), "{}", g.stdout);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(v["format"], input);
        assert!(answer(&dir, "fma;scale=block") > 0);
        let ds = dir.display().to_string();
        let r = run(&["reveal", "solve", "--dir", &ds, "--json"], &tmp);
        assert_eq!(r.code, Some(0), "{input}: {}", r.stderr);
    }
}

fn set(dir: &Path, key: &str, value: Value) {
    let p = dir.join("manifest.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v[key] = value;
    std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
}

/// Bad manifests and bad answers: one line, exit 2.
#[test]
fn bad_manifests_and_answers_exit_2() {
    let tmp = fresh_dir("reveal-mx-bad");
    let fresh = |name: &str| {
        let dir = tmp.join(name);
        assert_eq!(gen(&dir, "mxfp8-e4m3", &tmp).code, Some(0));
        dir
    };
    let solve = |dir: &Path| {
        let ds = dir.display().to_string();
        run(&["reveal", "solve", "--dir", &ds], &tmp)
    };
    let check = |r: Run, want: &str| {
        if let Some(p) = r.bad_input_problem(want) {
            panic!("{p}");
        }
    };
    // manifests
    let d = fresh("not-json");
    std::fs::write(d.join("manifest.json"), "{ not json").unwrap();
    check(solve(&d), "manifest.json");
    let d = fresh("schema");
    set(&d, "schema", "mxbi-reveal/0".into());
    check(solve(&d), "not a mxbi-reveal/1 folder");
    let d = fresh("format");
    set(&d, "format", "mxfp9-e9m9".into());
    check(solve(&d), "format 'mxfp9-e9m9' is not an MX format");
    let d = fresh("format-number");
    set(&d, "format", 8.into());
    check(solve(&d), "is not an MX format name");
    let d = fresh("no-m");
    set(&d, "m", Value::Null);
    check(solve(&d), "'m' missing");
    let d = fresh("k-not-blocks");
    set(&d, "k", 100.into());
    check(solve(&d), "multiple of 32");
    let d = fresh("huge");
    set(&d, "m", (1u64 << 40).into());
    check(solve(&d), "MAX_ELEMENTS");
    let d = fresh("escape");
    set(
        &d,
        "jobs",
        serde_json::json!([{"id": "../elsewhere", "sha256": "00".repeat(32)}]),
    );
    check(solve(&d), "is not job-NNNNNN");
    let d = fresh("sha");
    set(&d, "jobs", serde_json::json!([{"id": "job-000000", "sha256": "xyz"}]));
    check(solve(&d), "is not 64 hex digits");
    let d = fresh("twice");
    let sha = "00".repeat(32);
    set(
        &d,
        "jobs",
        serde_json::json!([{"id": "job-000000", "sha256": sha}, {"id": "job-000000", "sha256": sha}]),
    );
    check(solve(&d), "appears twice");
    let d = fresh("big");
    std::fs::File::create(d.join("manifest.json"))
        .unwrap()
        .set_len(65 << 20)
        .unwrap();
    check(solve(&d), "more than the");
    check(solve(&tmp.join("absent")), "manifest.json");
    // answers
    let job = |d: &Path| d.join("job-000000").join("out.npy");
    let d = fresh("out-shape");
    let t = mxbi::io::TensorData::from_slice(vec![8, 15], &[0f32; 120]).unwrap();
    mxbi::io::write_tensor(job(&d), "data", &t).unwrap();
    check(solve(&d), "shape [8, 15], expected [8, 16]");
    let d = fresh("out-dtype");
    let t = mxbi::io::TensorData::from_slice(vec![8, 16], &[0u8; 128]).unwrap();
    mxbi::io::write_tensor(job(&d), "data", &t).unwrap();
    check(solve(&d), "expected <f4 (f32), <f2 (f16) or <u2 (bf16 bits)");
    let d = fresh("out-dir");
    std::fs::create_dir(job(&d)).unwrap();
    check(solve(&d), "not a regular file");
    let d = fresh("out-big");
    std::fs::File::create(job(&d)).unwrap().set_len(1 << 30).unwrap();
    check(solve(&d), "more than the");
    let d = fresh("out-garbage");
    std::fs::write(job(&d), b"not an npy").unwrap();
    check(solve(&d), "out.npy");
}
