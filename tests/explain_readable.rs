//! `explain` stays readable (docs/EXPLAIN.md, "Readable when it cannot
//! name"): rows whose outputs are all NaN or Inf are flagged as carrying no
//! order information, one short line each, and exit 2 when nothing else is
//! left; `reveal` on a tree no order names prints a summary in a few lines,
//! the full node listing only behind `--tree`; no line is over 200
//! characters.

mod common;

use common::bad_input::{f32_npy, npy};
use std::process::Command;

fn mxbi(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn f32_file(shape: &str, vals: &[f32]) -> Vec<u8> {
    let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    npy(
        &format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"),
        &data,
    )
}

#[test]
fn nan_rows_carry_no_order_information() {
    let dir = common::fresh_dir("explain-nan");
    std::fs::write(dir.join("a.npy"), f32_npy("(2, 4)", 8)).unwrap();
    std::fs::write(dir.join("b.npy"), f32_npy("(4, 3)", 12)).unwrap();
    std::fs::write(dir.join("nan.npy"), f32_file("(2, 3)", &[f32::NAN; 6])).unwrap();
    let out = mxbi(
        &dir,
        &["explain", "--a", "a.npy", "--b", "b.npy", "--observed", "nan.npy"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty());
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].starts_with("mxbi: row 0: every output is NaN or Inf; it carries no order information"));
    assert!(lines[1].starts_with("mxbi: row 1: every output is NaN or Inf"));
    assert!(lines[2].contains("nothing to explain: every output of the 2 row(s) asked is NaN or Inf"));
    assert!(lines.iter().all(|l| l.len() <= 200), "{err}");

    // a row with numbers is still explained beside a NaN row
    let mut mixed = vec![f32::NAN; 3];
    // row 1 of A = [2, 2.5, 3, 3.5] times B (columns of 0, .5, ...): muladd
    let b: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
    let a1 = [2.0f32, 2.5, 3.0, 3.5];
    for j in 0..3 {
        let mut acc = 0.0f32;
        for k in 0..4 {
            acc += a1[k] * b[k * 3 + j];
        }
        mixed.push(acc);
    }
    std::fs::write(dir.join("mixed.npy"), f32_file("(2, 3)", &mixed)).unwrap();
    let out = mxbi(
        &dir,
        &["explain", "--a", "a.npy", "--b", "b.npy", "--observed", "mixed.npy"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("row 0: every output is NaN or Inf"));
    assert!(text.contains("row 1: "), "{text}");
    assert!(!text.contains("row 0: "), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 200), "{text}");
}

#[test]
fn an_unnamed_tree_is_summarised_and_listed_only_on_request() {
    let dir = common::fresh_dir("reveal-summary");
    let runner = format!(
        "exec:python3 {}/tests/runners/stdlib_runner.py reverse",
        env!("CARGO_MANIFEST_DIR")
    );
    let args = ["reveal", "--subject", &runner, "--m", "2", "--k", "32", "--n", "4"];
    let out = mxbi(&dir, &args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("no order of the family has this tree; the recovered tree in words:"),
        "{text}"
    );
    assert!(
        text.contains(
            "one part: k 0..31 (32 terms, contiguous), serial (one term per addition, terms joining in DECREASING k)"
        ),
        "{text}"
    );
    assert!(text.contains("nearest family order by tree: "), "{text}");
    assert!(!text.contains("= sum("), "no node listing without --tree: {text}");
    assert!(text.lines().count() <= 12, "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 200), "{text}");
    let mut with_tree = args.to_vec();
    with_tree.push("--tree");
    let out = mxbi(&dir, &with_tree);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches(" = sum(").count(), 31, "{text}");
}
