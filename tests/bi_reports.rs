//! Cases, schema and reports of the batch-invariance checker: the case
//! format and its committed schema, the seed-000 `standard` mapping, shard
//! merges that equal the unsharded report, the SVG heatmap, the Markdown
//! grouping, atomic writes and the `bi run CASE` / `bi merge` commands.

mod common;

use mxbi::bi::{case_schema, check, heatmap, merge, Case, CheckOptions, Family, Report, RowPos, Verdict};
use mxbi::order::InType;
use mxbi::subject::Dispatch;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn case(text: &str) -> Result<Case, String> {
    Case::parse("case.json", text)
}

fn case_with(extra: &str) -> String {
    format!(r#"{{"schema": "mxbi-bi-case/1", "subject": "model:fma", "k": 64, "n": 4{extra}}}"#)
}

const SEED000: &str = r#""standard": {"acc": "cv_fused_double_benchmark", "perf": [0.95, 0.95],
    "bi": {"row_positions": [0, "mid", "last"], "n_variants": 2}}"#;

#[test]
fn the_committed_schema_is_the_generated_one() {
    let path = root().join("docs/schema/bi-case.schema.json");
    let committed = std::fs::read_to_string(&path).unwrap();
    assert!(
        committed == case_schema(),
        "{} is stale: regenerate it with `mxbi bi schema > docs/schema/bi-case.schema.json`",
        path.display()
    );
    let v: serde_json::Value = serde_json::from_str(&committed).unwrap();
    assert_eq!(v["properties"]["schema"]["$ref"], "#/$defs/CaseVersion");
    assert_eq!(v["$defs"]["CaseVersion"]["enum"][0], "mxbi-bi-case/1");
    assert_eq!(v["additionalProperties"], false);
    let families: Vec<&str> = v["$defs"]["Family"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert_eq!(families, Family::ALL.map(|f| f.name()));
    for def in ["Standard", "BiStandard"] {
        assert_eq!(v["$defs"][def]["additionalProperties"], false, "{def}");
    }
}

#[test]
fn the_seed000_standard_maps_onto_the_content_family() {
    let c = case(&case_with(&format!(r#", "m": [4, 9], {SEED000}"#))).unwrap();
    let o = c.options(None, &[]).unwrap();
    assert_eq!(o.families, vec![Family::Content]);
    assert_eq!(o.positions, vec![RowPos::Index(0), RowPos::Mid, RowPos::Last]);
    assert_eq!((o.ms.clone(), o.k, o.n, o.seed, o.repeats), (vec![4, 9], 64, 4, 1, 3));
    assert_eq!(o.input, InType::F32);
    let st = c.standard.as_ref().unwrap();
    assert_eq!(st.acc.as_deref(), Some("cv_fused_double_benchmark"));
    assert_eq!(st.perf.as_deref(), Some(&[0.95, 0.95][..]));
    // no standard: families are required; the subject's input type and
    // boundaries fill the defaults
    let c = case(&case_with(r#", "families": ["batch"]"#)).unwrap();
    let o = c.options(Some(InType::Bf16), &[100]).unwrap();
    assert!(
        o.ms.contains(&99) && o.ms.contains(&101) && o.ms.contains(&513),
        "{:?}",
        o.ms
    );
    assert_eq!(o.input, InType::Bf16);
    assert!(o.positions.is_empty());
}

#[test]
fn inconsistent_cases_are_refused_with_one_line() {
    let refused = |extra: &str, needle: &str| {
        let e = case(&case_with(extra))
            .and_then(|c| c.options(None, &[]).map(|_| ()))
            .unwrap_err();
        assert!(e.contains(needle), "{extra}: {e}");
        assert!(!e.contains('\n'), "{e}");
    };
    refused("", "no families");
    refused(
        r#", "standard": {"bi": {"n_variants": 3}}"#,
        "standard.bi.n_variants = 3",
    );
    refused(r#", "families": ["batch"], "standard": {"bi": {}}"#, "has no content");
    refused(
        r#", "positions": [1], "standard": {"bi": {"row_positions": [0]}}"#,
        "positions [1] disagree with standard.bi.row_positions [0]",
    );
    refused(r#", "families": ["repeat"], "positions": [0]"#, "no family uses them");
    refused(r#", "families": ["content"], "vs": "model:fma""#, "vs is given");
    refused(r#", "families": ["switch"]"#, "second subject");
    let e = case(r#"{"schema": "mxbi-bi-case/1", "subject": "model:fma", "families": ["content"], "k": 0, "n": 4}"#)
        .and_then(|c| c.options(None, &[]).map(|_| ()))
        .unwrap_err();
    assert!(e.contains("K = 0"), "{e}");
    refused(r#", "families": ["content"], "repeats": 1"#, "repeats = 1");
    // schema errors name the JSON path
    for (extra, path) in [
        (
            r#", "standard": {"bi": {"row_positions": [0, "mid", "end"]}}"#,
            "case.json: standard.bi.row_positions[2]: invalid value",
        ),
        (
            r#", "standard": {"bi": {"n_variant": 2}}"#,
            "case.json: standard.bi.n_variant: unknown field",
        ),
        (r#", "standard": {"ac": "x"}"#, "case.json: standard.ac: unknown field"),
        (
            r#", "families": ["content", "rank?"]"#,
            "case.json: families[1]: unknown variant",
        ),
        (
            r#", "input": "fp8""#,
            "case.json: input: invalid value: string \"fp8\", expected an input type",
        ),
        (r#", "m": "edge""#, "case.json: m: invalid value"),
        (r#", "seed": -1"#, "case.json: seed: invalid value"),
    ] {
        let e = case(&case_with(extra)).unwrap_err();
        assert!(e.starts_with(path), "{extra}: {e}");
    }
    let e = case(r#"{"schema": "mxbi-bi-case/1", "subject": "model:fma", "n": 4}"#).unwrap_err();
    assert!(e.contains("missing field `k`"), "{e}");
}

#[test]
fn every_example_case_parses_and_maps() {
    let dir = root().join("examples/cases");
    let mut seen = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        if !text.contains("mxbi-bi-case/1") {
            continue; // a dispatch table the cases name
        }
        let c = Case::parse(&p.display().to_string(), &text).unwrap();
        c.options(None, &[16, 256]).unwrap();
        seen += 1;
    }
    assert!(seen >= 2, "{seen} example cases");
}

fn opts(families: &[Family], ms: &[usize]) -> CheckOptions {
    CheckOptions {
        families: families.to_vec(),
        ms: ms.to_vec(),
        k: 256,
        n: 8,
        positions: vec![],
        seed: 3,
        input: InType::F32,
        repeats: 3,
        confirm: 3,
    }
}

fn dispatch() -> Dispatch {
    Dispatch::parse(
        "t",
        r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"order": "fma;split=4"}]}"#,
    )
    .unwrap()
}

fn full_report() -> Report {
    let fams = [Family::Content, Family::Batch, Family::Position, Family::Repeat];
    check(&dispatch(), None, &opts(&fams, &[1, 2, 16, 17, 33]), &|_, _| {}).unwrap()
}

fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap()
}

#[test]
fn merged_shards_equal_the_unsharded_report() {
    let full = full_report();
    assert!(
        full.count(Verdict::Fail) > 0 && full.count(Verdict::Pass) > 0,
        "{}",
        full.text()
    );
    // two shards built by filtering (interleaved, reversed), each with every control
    let shard = |keep: usize| {
        let mut r = full.clone();
        r.cells = full
            .cells
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == keep)
            .map(|(_, c)| c.clone())
            .rev()
            .collect();
        r.finish();
        r
    };
    let (a, b) = (shard(0), shard(1));
    assert_ne!(json(&a), json(&full));
    let merged = merge(&[("b.json".into(), b.clone()), ("a.json".into(), a.clone())]).unwrap();
    assert_eq!(json(&merged), json(&full));
    // a shard given twice, or overlapping shards, change nothing
    let merged = merge(&[
        ("a".into(), a.clone()),
        ("b".into(), b.clone()),
        ("a2".into(), a.clone()),
    ])
    .unwrap();
    assert_eq!(json(&merged), json(&full));

    // shards of different checks
    let mut other = b.clone();
    other.seed = 4;
    let e = merge(&[("a.json".into(), a.clone()), ("b.json".into(), other)]).unwrap_err();
    assert!(e.contains("not shards of one check: seed is 4 there and 3 here"), "{e}");
    let mut other = b.clone();
    other.options.k = 512;
    assert!(merge(&[("a".into(), a.clone()), ("b".into(), other)])
        .unwrap_err()
        .contains("options"));
    // one cell with two verdicts
    let mut twisted = a.clone();
    twisted.cells[0].verdict = Verdict::Fail;
    let e = merge(&[("a.json".into(), a.clone()), ("t.json".into(), twisted)]).unwrap_err();
    assert!(
        e.contains(&format!("cell {}: BI_PASS in a.json, BI_FAIL in t.json", a.cells[0].id)),
        "{e}"
    );
    let mut twisted = a.clone();
    twisted.cells[0].diff.max_ulp += 1;
    assert!(merge(&[("a".into(), a.clone()), ("t".into(), twisted)])
        .unwrap_err()
        .contains("different bytes"));
    // controls must agree
    let mut twisted = b.clone();
    twisted.controls[0].held = false;
    twisted.controls[0].verdict = Verdict::Pass;
    let e = merge(&[("a".into(), a.clone()), ("t".into(), twisted)]).unwrap_err();
    assert!(e.starts_with("positive control"), "{e}");
}

#[test]
fn the_heatmap_colours_every_cell_by_verdict_deterministically() {
    let r = full_report();
    let svg = heatmap(&r);
    assert_eq!(svg, heatmap(&r.clone()));
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    // one square per grid square (here one cell each) plus five legend squares and the background
    let grid = mxbi::bi::Grid::new(&r.cells);
    let filled = grid.at.iter().flatten().filter(|s| !s.is_empty()).count();
    assert_eq!(filled, r.cells.len());
    assert_eq!(svg.matches("<rect ").count(), filled + 5 + 1);
    for (v, colour) in [(Verdict::Pass, "#2e7d32"), (Verdict::Fail, "#c62828")] {
        // the legend square and one per cell of this verdict
        assert_eq!(
            svg.matches(&format!(r#"fill="{colour}""#)).count(),
            r.count(v) + 1,
            "{v}"
        );
        assert!(svg.contains(&format!("{} ({})", v.name(), r.count(v))));
    }
    // rows are M (sorted), columns family/K/N/row
    assert_eq!(
        grid.rows.iter().map(|k| k.m).collect::<Vec<_>>(),
        vec![1, 2, 16, 17, 33]
    );
    assert!(grid.cols.iter().any(|c| c.label() == "position k=256 n=8 row=mid"));
    // a failing cell's tooltip names it
    let failing = r.cells.iter().find(|c| c.verdict == Verdict::Fail).unwrap();
    assert!(svg.contains(&format!("<title>{}: BI_FAIL (", failing.id)));
    assert!(mxbi::bi::knobs(failing).is_empty());
}

#[test]
fn reports_are_in_canonical_order_and_markdown_is_grouped_by_family() {
    let r = full_report();
    let mut ms = Vec::new();
    for f in [Family::Batch, Family::Content, Family::Position, Family::Repeat] {
        let cells: Vec<_> = r.cells.iter().filter(|c| c.family == f).collect();
        assert!(!cells.is_empty(), "{f}");
        ms.push(cells.iter().map(|c| c.m).collect::<Vec<_>>());
    }
    for m in &ms {
        assert!(m.windows(2).all(|w| w[0] <= w[1]), "{m:?}");
    }
    let md = r.markdown();
    let heads: Vec<&str> = md.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(heads.len(), 5, "{heads:?}");
    assert!(heads[0].starts_with("## content ("), "{heads:?}");
    assert_eq!(heads[4], "## Positive controls");
    assert!(md.contains("| M | K | N | row | verdict |"));
    assert!(md.contains("**BI_FAIL**"));
    // the same cells in any order give the same report
    let mut shuffled = r.clone();
    shuffled.cells.reverse();
    shuffled.finish();
    assert_eq!(json(&shuffled), json(&r));
}

fn mxbi(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mxbi")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn listing(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

#[test]
fn a_case_runs_as_its_flags_and_carries_its_standard() {
    let d = common::TempDir::new("bi-case");
    let case = d.join("c.json");
    std::fs::write(
        &case,
        format!(
            r#"{{"schema": "mxbi-bi-case/1", "name": "agmm", "subject": "model:fma;split=4", "m": [3, 9], "k": 128, "n": 8, "seed": 5, {SEED000}}}"#
        ),
    )
    .unwrap();
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    let (svg, md, xml) = (d.join("a.svg"), d.join("a.md"), d.join("a.xml"));
    let (code, out, err) = mxbi(&[
        "bi",
        "run",
        s(&case),
        "--json",
        s(&a),
        "--svg",
        s(&svg),
        "--markdown",
        s(&md),
        "--junit",
        s(&xml),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(err, "", "no progress bar when stderr is not a terminal");
    assert!(out.trim_end().ends_with("failed as they must"), "{out}");
    let (code, _, err) = mxbi(&[
        "bi",
        "run",
        "--subject",
        "model:fma;split=4",
        "--family",
        "content",
        "--m",
        "3,9",
        "--k",
        "128",
        "--n",
        "8",
        "--rows",
        "0,mid,last",
        "--seed",
        "5",
        "--json",
        s(&b),
    ]);
    assert_eq!(code, 0, "{err}");
    let mut va: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    let vb: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    assert_eq!(va["case"]["name"], "agmm");
    assert_eq!(va["case"]["standard"]["acc"], "cv_fused_double_benchmark");
    assert_eq!(va["case"]["standard"]["perf"][1], 0.95);
    assert_eq!(va["case"]["standard"]["bi"]["row_positions"][1], "mid");
    // the case's `acc` standard is judged beside the cells (tests/accuracy_cli.rs)
    assert_eq!(va["accuracy"]["status"], "pass");
    va.as_object_mut().unwrap().remove("case");
    va.as_object_mut().unwrap().remove("accuracy");
    assert_eq!(va, vb);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    assert!(std::fs::read_to_string(&md).unwrap().contains("## content"));
    assert!(std::fs::read_to_string(&xml).unwrap().contains("testsuite"));
    // the schema command prints the committed schema
    let (code, out, _) = mxbi(&["bi", "schema"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        std::fs::read_to_string(root().join("docs/schema/bi-case.schema.json")).unwrap()
    );
    // every example case runs (exit 0 or 1: a check, not bad input)
    for name in ["seed000-content.json", "dispatch-edges.json"] {
        let (code, out, err) = mxbi(&["bi", "run", s(&root().join("examples/cases").join(name))]);
        assert!(code == 0 || code == 1, "{name}: {code} {out}{err}");
    }
}

#[test]
fn bad_cases_and_merges_exit_2_with_one_line_and_write_nothing() {
    let d = common::TempDir::new("bi-case-bad");
    let bad = |name: &str, text: &str, needle: &str| {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        let j = d.join("never.json");
        let (code, out, err) = mxbi(&["bi", "run", s(&p), "--json", s(&j), "--svg", s(&d.join("never.svg"))]);
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{name}: {err}");
        assert!(!j.exists());
    };
    bad(
        "path.json",
        &case_with(r#", "standard": {"bi": {"row_positions": [0, "mid", 1.5]}}"#),
        "path.json: standard.bi.row_positions[2]: invalid type: floating point `1.5`, expected a row index",
    );
    bad(
        "vs.json",
        &case_with(r#", "families": ["content"], "vs": "model:fma""#),
        "vs.json: vs is given",
    );
    let with_subject = |subject: &str| {
        format!(r#"{{"schema": "mxbi-bi-case/1", "subject": "{subject}", "families": ["batch"], "k": 8, "n": 2}}"#)
    };
    bad("subj.json", &with_subject("nope"), "subject 'nope'");
    bad("kind.json", &with_subject("gpu:x"), "unknown kind");
    bad("table.json", &with_subject("dispatch:missing.json"), "missing.json");
    bad("trunc.json", r#"{"schema": "mxbi-bi-case/1", "subj"#, "trunc.json: ");
    let (code, _, err) = mxbi(&["bi", "run", s(&d.join("absent.json"))]);
    assert_eq!(code, 2);
    assert!(err.contains("absent.json"), "{err}");
    let (code, _, err) = mxbi(&["bi", "run", s(&d.join("absent.json")), "--k", "4"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be used with"), "{err}");
    assert_eq!(
        listing(d.path())
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "svg"))
            .count(),
        0
    );

    // merge: two shards of one check, then mismatches
    let full = full_report();
    let shard = |keep: usize, name: &str| {
        let mut r = full.clone();
        r.cells.retain(|c| (c.m % 2 == 0) == (keep == 0));
        r.finish();
        let p = d.join(name);
        std::fs::write(&p, json(&r)).unwrap();
        p
    };
    let (a, b) = (shard(0, "s0.json"), shard(1, "s1.json"));
    let out_json = d.join("merged.json");
    let svg = d.join("merged.svg");
    let (code, out, err) = mxbi(&["bi", "merge", s(&out_json), s(&a), s(&b), "--svg", s(&svg)]);
    assert_eq!(code, 1, "a BI_FAIL in the merged report: {out}{err}");
    assert_eq!(std::fs::read_to_string(&out_json).unwrap(), json(&full) + "\n");
    assert_eq!(std::fs::read_to_string(&svg).unwrap(), heatmap(&full));
    assert!(out.trim_end().ends_with(&full.summary_line()), "{out}");
    let mut other = full.clone();
    other.subject = "model:other".into();
    let o = d.join("other.json");
    std::fs::write(&o, json(&other)).unwrap();
    let never = d.join("never-merged.json");
    let (code, _, err) = mxbi(&[
        "bi",
        "merge",
        s(&never),
        s(&a),
        s(&o),
        "--svg",
        s(&d.join("never-merged.svg")),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not shards of one check: subject"), "{err}");
    let garbage = d.join("garbage.json");
    std::fs::write(&garbage, r#"{"schema": "mxbi-bi-report/1", "cells": [{"id": 3}]}"#).unwrap();
    let (code, _, err) = mxbi(&["bi", "merge", s(&never), s(&a), s(&garbage)]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("{}: cells[0].id: invalid type", garbage.display())),
        "{err}"
    );
    assert!(!never.exists() && !d.join("never-merged.svg").exists());
    // an unwritable target: nothing written, no temporary left behind
    let (code, _, err) = mxbi(&[
        "bi",
        "merge",
        s(&d.join("no/such/dir/m.json")),
        s(&a),
        s(&b),
        "--svg",
        s(&d.join("m.svg")),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(!d.join("m.svg").exists());
    assert!(listing(d.path())
        .iter()
        .all(|p| !p.to_string_lossy().contains(".partial")));
}
