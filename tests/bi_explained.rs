//! Every failure explained where it is reported (docs/BI.md,
//! "Explanations in the report"): `mxbi bi run` on a dispatch table that
//! switches `fma` to `fma;split=4` above M = 16 names both orders, the
//! first diverging node and a fix in the terminal, JSON, Markdown, JUnit
//! and SVG; an all-gather-matmul whose GATHER path re-rounds K-varying x2
//! scales is explained by its two paths; a table with two switches gets
//! one explanation per pair of declared orders; `--no-explain` skips it.

mod common;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const STEP: &str = r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"order": "fma;split=4"}]}"#;

fn mxbi(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("mxbi runs")
}

fn read(dir: &Path, f: &str) -> String {
    std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

fn step_run(extra: &[&str]) -> (std::path::PathBuf, Output) {
    let dir = common::fresh_dir("explained");
    std::fs::write(dir.join("t.json"), STEP).unwrap();
    let mut args = vec![
        "bi",
        "run",
        "--subject",
        "dispatch:t.json",
        "--family",
        "batch",
        "--k",
        "1024",
        "--n",
        "64",
        "--json",
        "r.json",
        "--markdown",
        "r.md",
        "--junit",
        "r.xml",
        "--svg",
        "r.svg",
    ];
    args.extend_from_slice(extra);
    let out = mxbi(&dir, &args);
    (dir, out)
}

#[test]
fn a_dispatch_step_is_explained_in_every_format() {
    let (dir, out) = step_run(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let headline = "batch: fma vs fma;split=4 (11 failing cells; first batch/m=17/k=1024/n=64/row=0)";
    assert!(text.contains(&format!("why:\n  {headline}\n")), "{text}");
    assert!(text.contains("    baseline M = 1, row 0: fma (declared)"), "{text}");
    assert!(
        text.contains("    variant  M = 17, row 0: fma;split=4 (declared)"),
        "{text}"
    );
    assert!(
        text.contains("first diverging node: node 257 (different operation), after 256 identical terms"),
        "{text}"
    );
    assert!(text.contains("split part 1 of 4, k 256..511"), "{text}");
    assert!(
        text.contains("fix: choose the split from (K, N) only: run fma;split=4 for every M"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 200), "{text}");

    let v: Value = serde_json::from_str(&read(&dir, "r.json")).unwrap();
    let e = &v["explanations"];
    assert_eq!(e.as_array().map(Vec::len), Some(1), "{e}");
    let e = &e[0];
    assert_eq!(e["schema"], "mxbi-bi-explanation/1");
    assert_eq!(e["family"], "batch");
    assert_eq!(e["cell"], "batch/m=17/k=1024/n=64/row=0");
    assert_eq!(e["failing_cells"], 11);
    assert_eq!(e["base"]["order"], "fma");
    assert_eq!(e["base"]["known"], "declared");
    assert_eq!(e["variant"]["order"], "fma;split=4");
    assert!(
        e["first_node"].as_str().unwrap().contains("bytes agree for k < 256"),
        "{e}"
    );
    assert!(e["mechanism"][0].as_str().unwrap().contains("split-K changes"), "{e}");
    assert!(e["fixes"].as_array().is_some_and(|f| !f.is_empty()), "{e}");

    let md = read(&dir, "r.md");
    assert!(md.contains(&format!("## Why it failed\n\n- **{headline}**\n")), "{md}");
    let xml = read(&dir, "r.xml");
    assert!(
        xml.contains(r#"<property name="explanation.variant" value="fma;split=4 (declared)"/>"#),
        "{xml}"
    );
    assert!(xml.contains("first diverging node: node 257"), "{xml}");
    let svg = read(&dir, "r.svg");
    assert!(svg.contains(headline), "the SVG legend names the pair");
}

#[test]
fn no_explain_skips_it() {
    let (dir, out) = step_run(&["--no-explain"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("why:"));
    let v: Value = serde_json::from_str(&read(&dir, "r.json")).unwrap();
    assert!(v.get("explanations").is_none(), "{v}");
}

#[test]
fn two_switches_give_one_explanation_per_pair() {
    let dir = common::fresh_dir("explained-two");
    std::fs::write(
        dir.join("t.json"),
        r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"m_max": 64, "order": "fma;split=4"}, {"order": "fma;split=8"}]}"#,
    )
    .unwrap();
    let out = mxbi(
        &dir,
        &[
            "bi",
            "run",
            "--subject",
            "dispatch:t.json",
            "--family",
            "batch",
            "--k",
            "512",
            "--n",
            "32",
            "--json",
            "r.json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(&read(&dir, "r.json")).unwrap();
    let pairs: Vec<(String, String, u64)> = v["explanations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["base"]["order"].as_str().unwrap().to_string(),
                e["variant"]["order"].as_str().unwrap().to_string(),
                e["failing_cells"].as_u64().unwrap(),
            )
        })
        .collect();
    let failing = v["summary"]["verdicts"]["BI_FAIL"].as_u64().unwrap();
    assert_eq!(pairs.len(), 2, "{pairs:?}");
    assert_eq!((pairs[0].0.as_str(), pairs[0].1.as_str()), ("fma", "fma;split=4"));
    assert_eq!((pairs[1].0.as_str(), pairs[1].1.as_str()), ("fma", "fma;split=8"));
    assert_eq!(pairs[0].2 + pairs[1].2, failing, "every failing cell is covered once");
}

#[test]
fn an_all_gather_matmul_is_explained_by_its_two_paths() {
    let dir = common::fresh_dir("explained-op");
    std::fs::write(
        dir.join("op.json"),
        r#"{"schema": "mxbi-bi-case/1", "subject": "op:agmm-v2-prefix", "k": 256, "n": 32, "m": [2, 8], "families": ["rank"], "knobs": {"x2_scales": "VAR"}}"#,
    )
    .unwrap();
    let out = mxbi(&dir, &["bi", "run", "op.json", "--json", "r.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  rank: LOCAL path ("), "{text}");
    assert!(text.contains(") vs GATHER path ("), "{text}");
    let v: Value = serde_json::from_str(&read(&dir, "r.json")).unwrap();
    let e = &v["explanations"][0];
    assert_eq!(e["base"]["path"], "LOCAL");
    assert_eq!(e["variant"]["path"], "GATHER");
    assert_eq!(e["base"]["known"], "op-model");
    assert!(e["first_node"].as_str().unwrap().contains("K-block 0"), "{e}");
    assert!(
        e["fixes"][0]
            .as_str()
            .unwrap()
            .starts_with("compute every row through one path"),
        "{e}"
    );
}

#[test]
fn a_side_no_order_names_is_revealed_by_probing() {
    let dir = common::fresh_dir("explained-reveal");
    let runner = format!(
        "exec:python3 {}/tests/runners/stdlib_runner.py reverse-above-4",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = mxbi(
        &dir,
        &[
            "bi",
            "run",
            "--subject",
            &runner,
            "--family",
            "batch",
            "--m",
            "1,8",
            "--k",
            "32",
            "--n",
            "4",
            "--json",
            "r.json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&read(&dir, "r.json")).unwrap();
    let e = &v["explanations"][0];
    assert_eq!(e["base"]["order"], "muladd", "{e}");
    assert_eq!(e["base"]["known"], "identified", "{e}");
    // the reversed sum is in no order of the family: probed, summarised
    assert_eq!(e["variant"]["known"], "not-nameable", "{e}");
    let closest = e["variant"]["closest"].as_str().unwrap();
    assert!(closest.contains("probed: 32 terms, 31 additions"), "{closest}");
    assert!(closest.contains("terms joining in DECREASING k"), "{closest}");
}
