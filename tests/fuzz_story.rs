//! `mxbi fuzz` tells the kernel's story (docs/FUZZING.md, "The kernel's
//! story"): a table that runs `fma` up to M = 16 and `fma;split=4` above
//! shrinks to K = 2, where the two sides read as `fma` vs `muladd`; the
//! explanation is told at the failing case as found, names `split=4` and
//! its fix, and gives the minimal case's reading beside it.

mod common;

use std::process::Command;

#[test]
fn a_split_table_is_explained_at_the_case_as_found() {
    let dir = common::fresh_dir("fuzz-story");
    std::fs::write(
        dir.join("t.json"),
        r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"order": "fma;split=4"}]}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mxbi"))
        .current_dir(&dir)
        .args(["fuzz", "--subject", "dispatch:t.json", "--seed", "1", "--budget", "60"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    // the minimal case is minimal: K = 2
    assert!(text.contains("shrunk") && text.contains(" k=2 "), "{text}");
    let told = text
        .lines()
        .find(|l| l.starts_with("told at the failing case as found"))
        .unwrap_or_else(|| panic!("no story line: {text}"));
    assert!(
        told.contains("the minimal case (K = 2) reads as fma vs muladd"),
        "{told}"
    );
    assert!(told.ends_with("it is fma vs fma;split=4"), "{told}");
    assert!(
        text.contains("the baseline row is fma, the variant row is fma;split=4"),
        "{text}"
    );
    assert!(
        text.contains("fix: choose the split from (K, N) only: run fma;split=4 for every M"),
        "{text}"
    );
    assert!(
        !text.contains("use fma on both sides"),
        "the K = 2 fix is not the kernel's: {text}"
    );
}
