//! `mxbi explain --case CASE --cell ID` on op subjects: a failing cell of a
//! batch-invariance case is explained with the op's provenance (the first
//! diverging node, its path and rank, the mechanism named as `mxbi op
//! explain` names it, the fix), a passing identity-scale cell says there is
//! no divergence, and a bad cell id is one line and exit 2.

mod common;

use common::TempDir;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn mxbi(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi")).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes a case for `subject` in `dir` and runs it through the checker:
/// (case path, the report's cells).
fn case_and_cells(dir: &Path, name: &str, subject: &str, families: &str, ms: &str) -> (String, Vec<Value>) {
    let case = dir.join(format!("{name}.json"));
    std::fs::write(
        &case,
        format!(
            r#"{{"schema": "mxbi-bi-case/1", "subject": "{subject}", "families": [{families}], "m": [{ms}], "k": 256, "n": 32}}"#
        ),
    )
    .unwrap();
    let (cs, rs) = (
        case.display().to_string(),
        dir.join(format!("{name}-report.json")).display().to_string(),
    );
    let o = mxbi(&["bi", "run", &cs, "--json", &rs]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&rs).unwrap()).unwrap();
    (cs, report["cells"].as_array().unwrap().clone())
}

/// The cell with this id.
fn cell<'a>(cells: &'a [Value], id: &str) -> &'a Value {
    cells
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no cell {id}"))
}

/// `explain --case --cell --json`: (exit code, the row's JSON, the whole JSON).
fn explain_json(case: &str, id: &str) -> (Option<i32>, Value, Value) {
    let o = mxbi(&["explain", "--case", case, "--cell", id, "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    (o.status.code(), v["rows"][0].clone(), v)
}

/// `mxbi op explain`'s verdict for a preset on its own generated inputs
/// with K-varying x2 scales (the op run as `mxbi op run` writes it).
fn op_explain_verdict(dir: &Path, preset: &str) -> Value {
    let spec = dir.join(format!("{preset}-spec.json"));
    std::fs::write(&spec, format!(r#"{{"preset": "{preset}"}}"#)).unwrap();
    let out = dir.join(format!("{preset}-out"));
    let (s, d) = (spec.display().to_string(), out.display().to_string());
    let o = mxbi(&[
        "op",
        "run",
        &s,
        "--generate",
        "7",
        "--x2-scales",
        "k-varying",
        "--out",
        &d,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = mxbi(&[
        "op",
        "explain",
        &s,
        "--generate",
        "7",
        "--x2-scales",
        "k-varying",
        "--observed",
        &d,
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    v["verdict"].clone()
}

/// The two sides' paths, as the provenance records name them.
fn paths(op: &Value) -> (String, String) {
    let d = &op["divergence"];
    (
        d["left"]["path"].as_str().unwrap().to_string(),
        d["right"]["path"].as_str().unwrap().to_string(),
    )
}

/// `op:agmm-v2-prefix` with K-varying x2 scales: a failing rank cell and a
/// failing position cell are explained as a scale-point split: the first
/// diverging node is a block of x2 the GATHER path re-rounds, the sides
/// are LOCAL and GATHER on the ranks the cell compares, and the mechanism
/// is the one `mxbi op explain` finds on the preset's own outputs.
#[test]
fn a_prefix_cell_is_a_scale_point_split() {
    let t = TempDir::new("explain-case-op-prefix");
    let (cs, cells) = case_and_cells(
        t.path(),
        "prefix",
        "op:agmm-v2-prefix,x2=VAR",
        r#""rank", "position""#,
        "4",
    );
    let id = "rank/m=4/k=256/n=32/row=mid/rank=1/held";
    let c = cell(&cells, id);
    assert_eq!(c["verdict"], "BI_FAIL");
    let (code, row, v) = explain_json(&cs, id);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["verdict"], "BI_FAIL");
    let op = &row["op"];
    // the re-run differs in as many elements as the checker reported
    assert_eq!(op["elements_differ"], c["elements_differing"]);
    assert_eq!(op["left"]["model_reproduces"], true);
    assert_eq!(op["right"]["model_reproduces"], true);
    // row 2 of M = 4 belongs to rank 1: GATHER on rank 0, LOCAL on rank 1
    assert_eq!(paths(op), ("gather".to_string(), "local".to_string()));
    let d = &op["divergence"];
    assert_eq!(
        (d["left"]["rank"].as_u64(), d["right"]["rank"].as_u64()),
        (Some(0), Some(1))
    );
    let first = &op["first_node"];
    assert_eq!(first["kind"], "x2-operand", "{op}");
    let (lo, hi) = (
        first["k_range"][0].as_u64().unwrap(),
        first["k_range"][1].as_u64().unwrap(),
    );
    assert_eq!((lo % 32, hi - lo), (0, 31), "one K-block: {first}");
    assert_eq!(op["hypothesis"]["name"], "scale-point-split");
    assert_eq!(op["ranking"]["verdict"], "scale-point-split");
    assert_eq!(op["fixes"][0]["fix"]["kind"], "one-path");
    assert_eq!(op["fixes"][0]["fix"]["order"], "mma(k=32,f=25,in=e4m3);scale=fused");
    // the existing fields stay
    assert!(row["observed"].is_object() && row["vs"].is_object() && row["ulp_map"].is_array());
    // the mechanism agrees with `mxbi op explain` on the preset's own run
    assert_eq!(op_explain_verdict(t.path(), "agmm-v2-prefix"), op["hypothesis"]["name"]);

    // the text names the node, the paths and the mechanism
    let o = mxbi(&["explain", "--case", &cs, "--cell", id]);
    assert_eq!(o.status.code(), Some(0));
    let s = stdout(&o);
    for want in [
        "op provenance (op:agmm-v2-prefix,x2=VAR)",
        "rank 0 row 2 of M = 4 on the GATHER path",
        "rank 1 row 2 of M = 4 on the LOCAL path",
        "first diverging node: x2 column",
        "mechanism: scale-point split",
        "mechanism named: scale-point-split",
        "fix: compute every row through one path",
    ] {
        assert!(s.contains(want), "missing '{want}' in:\n{s}");
    }

    // a position cell: the same row at 0 (LOCAL on rank 0) and at 3
    // (rank 1's shard: GATHER on rank 0)
    let id = "position/m=4/k=256/n=32/row=3";
    assert_eq!(cell(&cells, id)["verdict"], "BI_FAIL");
    let (code, row, _) = explain_json(&cs, id);
    assert_eq!(code, Some(0));
    let op = &row["op"];
    assert_eq!(paths(op), ("local".to_string(), "gather".to_string()));
    assert_eq!(op["first_node"]["kind"], "x2-operand");
    assert_eq!(op["hypothesis"]["name"], "scale-point-split");
}

/// `op:agmm-v2-kloop`: the first diverging node is the order trees' node
/// where GATHER's second fresh k-tile starts (k = 128), the mechanism a
/// K-loop schedule split, as `mxbi op explain` finds.
#[test]
fn a_kloop_cell_is_a_k_loop_schedule_split() {
    let t = TempDir::new("explain-case-op-kloop");
    let (cs, cells) = case_and_cells(t.path(), "kloop", "op:agmm-v2-kloop,x2=VAR", r#""rank""#, "4");
    let id = "rank/m=4/k=256/n=32/row=0/rank=1/held";
    let c = cell(&cells, id);
    assert_eq!(c["verdict"], "BI_FAIL");
    let (code, row, _) = explain_json(&cs, id);
    assert_eq!(code, Some(0));
    let op = &row["op"];
    assert_eq!(op["elements_differ"], c["elements_differing"]);
    // row 0 is rank 0's: LOCAL there, GATHER on rank 1
    assert_eq!(paths(op), ("local".to_string(), "gather".to_string()));
    let first = &op["first_node"];
    assert_eq!(first["kind"], "order", "{op}");
    assert_eq!(first["k_range"], serde_json::json!([128, 255]), "{first}");
    // GATHER continues in its k-tile 1 (k 128..255); LOCAL has no tiles
    assert_eq!(first["right_at"]["tile"], serde_json::json!([1, [128, 255]]), "{first}");
    assert!(first["left_at"]["tile"].is_null());
    assert_eq!(op["hypothesis"]["name"], "k-loop-split");
    assert_eq!(op["ranking"]["verdict"], "k-loop-split");
    assert_eq!(op["fixes"][0]["fix"]["kind"], "one-path");
    let words = op["divergence"]["mechanism"][0].as_str().unwrap();
    assert!(words.starts_with("K-loop schedule split"), "{words}");
    assert_eq!(op_explain_verdict(t.path(), "agmm-v2-kloop"), op["hypothesis"]["name"]);
    // the order section's fix is the path fix too, not a per-M split plan
    let fixes = row["divergence"]["fixes"].as_array().unwrap();
    assert!(fixes.iter().all(|f| f["fix"]["kind"] == "one-path"), "{fixes:?}");
}

/// Identity x2 scales: the prefix preset's paths re-round no element, the
/// cell passes, and the explanation says there is no divergence (the
/// scale point differs only latently); an owned cell compares one path
/// with itself.
#[test]
fn an_identity_scale_cell_has_no_divergence() {
    let t = TempDir::new("explain-case-op-id");
    let (cs, cells) = case_and_cells(t.path(), "id", "op:agmm-v2-prefix,x2=ID", r#""rank""#, "4");
    assert!(cells.iter().all(|c| c["verdict"] == "BI_PASS"), "{cells:?}");
    let id = "rank/m=4/k=256/n=32/row=mid/rank=1/held";
    let (code, row, v) = explain_json(&cs, id);
    assert_eq!(code, Some(0));
    assert_eq!(v["verdict"], "BI_PASS");
    let op = &row["op"];
    assert_eq!(paths(op), ("gather".to_string(), "local".to_string()));
    assert_eq!(op["elements_differ"], 0);
    assert!(op["first_node"].is_null(), "{op}");
    assert!(op["divergence"]["nodes"].as_array().unwrap().is_empty());
    let latent = op["divergence"]["latent"][0].as_str().unwrap();
    assert!(
        latent.contains("requant:e4m3") && latent.contains("no element is re-rounded"),
        "{latent}"
    );
    // on identity scales the bytes cannot tell the scale point from one path
    let supported = op["ranking"]["supported"].as_array().unwrap();
    assert!(supported.contains(&"one-path".into()) && supported.contains(&"scale-point-split".into()));
    let s = stdout(&mxbi(&["explain", "--case", &cs, "--cell", id]));
    assert!(s.contains("no divergence: the two copies have the same bytes"), "{s}");
    assert!(!s.contains("first diverging node"), "{s}");
    assert!(!s.contains("  fix: "), "{s}");
    // an owned cell: LOCAL vs LOCAL, one computation
    let (code, row, _) = explain_json(&cs, "rank/m=4/k=256/n=32/row=0/rank=1/owned");
    assert_eq!(code, Some(0));
    let op = &row["op"];
    assert_eq!(paths(op), ("local".to_string(), "local".to_string()));
    assert_eq!(op["hypothesis"]["name"], "one-path");
    assert!(op["divergence"]["latent"].as_array().unwrap().is_empty());
    assert!(op["fixes"].as_array().unwrap().is_empty());
}

/// A ring all-reduce: the position cell's rows sit in chunks with
/// different owners, the first diverging node is the first reduction step
/// and its two ranks, the mechanism the ring position, the fix one rank
/// order for every chunk.
#[test]
fn a_ring_cell_names_the_reduction_step_and_the_ring_position() {
    let t = TempDir::new("explain-case-op-ring");
    let (cs, cells) = case_and_cells(t.path(), "ring", "op:mmar-ring", r#""position""#, "4");
    let id = "position/m=4/k=256/n=32/row=2";
    assert_eq!(cell(&cells, id)["verdict"], "BI_FAIL");
    let (code, row, _) = explain_json(&cs, id);
    assert_eq!(code, Some(0));
    let op = &row["op"];
    let d = &op["divergence"];
    // chunk 0 (owner 0) is added from rank 1 on, chunk 2 (owner 2) from rank 3
    assert_eq!(d["left"]["computed_on"], serde_json::json!([1, 2, 3, 0]));
    assert_eq!(d["right"]["computed_on"], serde_json::json!([3, 0, 1, 2]));
    assert_eq!(op["first_node"]["kind"], "reduction");
    assert_eq!(op["first_node"]["ranks"], serde_json::json!([1, 3]));
    assert!(
        op["mechanism_named"].as_str().unwrap().starts_with("ring position"),
        "{op}"
    );
    assert_eq!(op["fixes"][0]["fix"]["kind"], "fixed-rank-order");
    assert_eq!(op["fixes"][0]["fix"]["ranks"], serde_json::json!([1, 2, 3, 0]));
}

/// The op model's record is checked against the subject's bytes: a
/// non-deterministic all-reduce draws a new order per run, so the second
/// side's bytes are not the model's run 0 (the check can fail), and the
/// cell is explained by the non-deterministic reduction.
#[test]
fn a_record_that_does_not_reproduce_the_bytes_is_said_so() {
    let t = TempDir::new("explain-case-op-nondet");
    let (cs, _) = case_and_cells(t.path(), "nondet", "op:mmar-nondet", r#""content""#, "4");
    let (code, row, _) = explain_json(&cs, "content/m=4/k=256/n=32/row=0");
    assert_eq!(code, Some(0));
    let op = &row["op"];
    assert_eq!(op["left"]["model_reproduces"], true);
    assert_eq!(op["right"]["model_reproduces"], false, "{op}");
    assert!(op["mechanism_named"]
        .as_str()
        .unwrap()
        .starts_with("non-deterministic reduction"));
    let s = stdout(&mxbi(&[
        "explain",
        "--case",
        &cs,
        "--cell",
        "content/m=4/k=256/n=32/row=0",
    ]));
    assert!(s.contains("the op model's run differs from the subject's bytes"), "{s}");
}

/// Bad cell ids: one line on stderr, exit 2.
#[test]
fn a_bad_cell_id_is_one_line_and_exit_2() {
    let t = TempDir::new("explain-case-op-bad");
    let (cs, _) = case_and_cells(t.path(), "bad", "op:agmm-v2-prefix,x2=VAR", r#""rank""#, "4");
    for id in [
        "bogus",
        "rank/m=4/k=256/n=32/row=mid/rank=9/held",
        "rank/m=4/k=256/n=32/row=mid/rank=1/sideways",
        "rank/m=3/k=256/n=32/row=0/rank=1/held",
        "rank/m=4/k=512/n=32/row=0/rank=1/held",
    ] {
        let o = mxbi(&["explain", "--case", &cs, "--cell", id]);
        assert_eq!(o.status.code(), Some(2), "{id}: {}", stderr(&o));
        let e = stderr(&o);
        assert_eq!(e.trim_end().lines().count(), 1, "{id}: {e}");
        assert!(e.contains(id), "{e}");
        assert!(o.stdout.is_empty());
    }
}
