//! `mxbi explain` and `mxbi reveal` (incl. `reveal gen|solve` with a runner
//! that answers from files): output shapes, exit codes, bad input.

mod common;

use common::TempDir;
use mxbi::gemm::{gemm_array, BLayout, Problem};
use mxbi::io::{load_tensor, write_tensor, TensorData};
use mxbi::order::Order;
use mxbi::rng::SplitMix64;
use ndarray::{Array2, ArrayView2};
use std::path::Path;
use std::process::{Command, Output};

fn mxbi(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi")).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn random(shape: (usize, usize), seed: u64) -> Array2<f32> {
    let mut r = SplitMix64::new(seed);
    let v = (0..shape.0 * shape.1)
        .map(|_| {
            let e = r.range_i64(-5, 5) as i32;
            let m = 1.0 + (r.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
            m * 2f32.powi(e) * if r.next_u32() & 1 == 1 { -1.0 } else { 1.0 }
        })
        .collect();
    Array2::from_shape_vec(shape, v).unwrap()
}

fn save(p: &Path, a: &Array2<f32>) {
    write_tensor(p, "data", &TensorData::from_array(a)).unwrap();
}

/// C = A x B under `order`, A [M, K], B [K, N].
fn c_of(order: &str, a: ArrayView2<f32>, b: ArrayView2<f32>) -> Array2<f32> {
    let p = Problem::from_arrays(a, b, BLayout::Kn).unwrap();
    gemm_array(&order.parse::<Order>().unwrap(), &p, None).unwrap()
}

#[test]
fn explain_names_orders_and_their_divergence() {
    let t = TempDir::new("explain-cli");
    let (m, k, n) = (2, 1024, 32);
    let a = random((m, k), 1);
    let b = random((k, n), 2);
    save(&t.join("a.npy"), &a);
    save(&t.join("b.npy"), &b);
    save(&t.join("c1.npy"), &c_of("fma", a.view(), b.view()));
    save(&t.join("c2.npy"), &c_of("fma;split=4", a.view(), b.view()));
    let p = |f: &str| t.join(f).display().to_string();
    let o = mxbi(&[
        "explain",
        "--a",
        &p("a.npy"),
        "--b",
        &p("b.npy"),
        "--observed",
        &p("c1.npy"),
        "--vs",
        &p("c2.npy"),
        "--rows",
        "1",
        "--varies",
        "m=1,2",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let row = &v["rows"][0];
    assert_eq!(row["row"], 1);
    assert_eq!(row["observed"]["order"], "fma");
    assert_eq!(row["vs"]["order"], "fma;split=4");
    assert_eq!(row["divergence"]["first_node"]["node"], 257);
    assert_eq!(
        row["divergence"]["right_at"]["part_range"],
        serde_json::json!([256, 511])
    );
    assert!(row["divergence"]["fixes"][0]["words"]
        .as_str()
        .unwrap()
        .contains("(K, N) only"));
    // the text form
    let o = mxbi(&[
        "explain",
        "--a",
        &p("a.npy"),
        "--b",
        &p("b.npy"),
        "--observed",
        &p("c1.npy"),
        "--vs",
        &p("c2.npy"),
        "--rows",
        "0",
    ]);
    let s = stdout(&o);
    assert!(
        s.contains("observed row 0: fma") && s.contains("split part 1 of 4, k 256..511"),
        "{s}"
    );
    // exactness: random f32 rows are order-sensitive, and a witness pair is named
    let o = mxbi(&[
        "explain",
        "--a",
        &p("a.npy"),
        "--b",
        &p("b.npy"),
        "--observed",
        &p("c1.npy"),
        "--rows",
        "0",
        "--exactness",
    ]);
    let s = stdout(&o);
    assert!(s.contains("exactness over") && s.contains("differs:"), "{s}");
    // a row no order reproduces: exit 1, the closest named
    let mut c = c_of("fma", a.view(), b.view());
    c[(0, 3)] = f32::from_bits(c[(0, 3)].to_bits() ^ 4);
    save(&t.join("c3.npy"), &c);
    let o = mxbi(&[
        "explain",
        "--a",
        &p("a.npy"),
        "--b",
        &p("b.npy"),
        "--observed",
        &p("c3.npy"),
        "--rows",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("the closest, fma, differs in 1 elements"),
        "{}",
        stdout(&o)
    );
    // bad input: one line, exit 2
    let o = mxbi(&[
        "explain",
        "--a",
        &p("a.npy"),
        "--b",
        &p("b.npy"),
        "--observed",
        &p("a.npy"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("expected the output shape [2, 32]") && e.trim().lines().count() == 1,
        "{e}"
    );
}

#[test]
fn reveal_a_model_subject() {
    let o = mxbi(&[
        "reveal",
        "--subject",
        "model:fma;lanes=8",
        "--m",
        "4",
        "--k",
        "64",
        "--n",
        "64",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["order"], "fma;lanes=8");
    assert_eq!(v["shared_tree"], true);
    // MX inputs: probed per block through the scales
    let o = mxbi(&[
        "reveal",
        "--subject",
        "model:fma;split=2;scale=block",
        "--input",
        "mxfp8-e4m3",
        "--m",
        "4",
        "--k",
        "512",
        "--n",
        "32",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["order"], "fma;split=2;scale=block");
    assert_eq!(v["mx"], "mxfp8-e4m3");
    let o = mxbi(&["reveal", "--subject", "model:fma", "--m", "4", "--k", "1", "--n", "4"]);
    assert_eq!(o.status.code(), Some(2));
    let o = mxbi(&["reveal", "--m", "4", "--k", "8", "--n", "4"]);
    assert_eq!(o.status.code(), Some(2));
}

/// The runner: answers every job of DIR that has no out.npy with `order`.
fn answer(dir: &Path, order: &str) -> usize {
    let mut done = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let d = e.unwrap().path();
        if !d.is_dir() || d.join("out.npy").exists() {
            continue;
        }
        let a = load_tensor(d.join("a.npy"), None).unwrap();
        let b = load_tensor(d.join("b.npy"), None).unwrap();
        save(
            &d.join("out.npy"),
            &c_of(order, a.view().unwrap().view(), b.view().unwrap().view()),
        );
        done += 1;
    }
    done
}

#[test]
fn reveal_through_files() {
    let t = TempDir::new("reveal-files");
    let dir = t.join("probe");
    let ds = dir.display().to_string();
    let o = mxbi(&["reveal", "gen", "--dir", &ds, "--m", "8", "--k", "48", "--n", "32"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).contains("launches to run"), "{}", stdout(&o));
    let mut rounds = 0;
    loop {
        assert!(answer(&dir, "fma;split=3;reduce=pairwise") > 0);
        let o = mxbi(&["reveal", "solve", "--dir", &ds, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        rounds += 1;
        if v["status"] == "pending" {
            assert!(rounds < 20);
            continue;
        }
        assert_eq!(v["order"], "fma;split=3");
        break;
    }
    // a folder that is not empty is refused
    let o = mxbi(&["reveal", "gen", "--dir", &ds, "--m", "8", "--k", "48", "--n", "32"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `explain --case --cell` re-runs a failing cell of a case: its two
/// observations differ exactly as the checker's report says, and the
/// explanation names the orders on each side and the split boundary.
#[test]
fn explain_a_cell_of_a_case() {
    let t = TempDir::new("explain-case");
    std::fs::write(
        t.join("table.json"),
        r#"{"dispatch": [{"m_max": 1, "order": "fma"}, {"order": "fma;split=4"}]}"#,
    )
    .unwrap();
    let case = t.join("case.json");
    std::fs::write(
        &case,
        r#"{"schema": "mxbi-bi-case/1", "subject": "dispatch:table.json", "families": ["batch", "content"], "m": [1, 2, 8], "k": 1024, "n": 64}"#,
    )
    .unwrap();
    let (cs, rs) = (case.display().to_string(), t.join("r.json").display().to_string());
    let o = mxbi(&["bi", "run", &cs, "--json", &rs]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&rs).unwrap()).unwrap();
    let cells = report["cells"].as_array().unwrap();
    let failing = cells.iter().find(|c| c["verdict"] == "BI_FAIL").unwrap();
    let id = failing["id"].as_str().unwrap();
    let o = mxbi(&["explain", "--case", &cs, "--cell", id, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["verdict"], "BI_FAIL");
    let row = &v["rows"][0];
    assert_eq!(row["observed"]["order"], "fma");
    assert_eq!(row["vs"]["order"], "fma;split=4");
    // the re-run differs exactly as the report says
    let map = row["ulp_map"].as_array().unwrap();
    let differ: u64 = map.iter().map(|t| t["differ"].as_u64().unwrap()).sum();
    let max_ulp = map.iter().map(|t| t["max_ulp"].as_u64().unwrap()).max().unwrap();
    assert_eq!(differ, failing["elements_differing"].as_u64().unwrap());
    assert_eq!(max_ulp, failing["max_ulp"].as_u64().unwrap());
    assert_eq!(
        row["divergence"]["right_at"]["part_range"],
        serde_json::json!([256, 511])
    );
    // a passing cell: the same order on both sides, nothing to fix
    let pass = cells.iter().find(|c| c["verdict"] == "BI_PASS").unwrap();
    let o = mxbi(&[
        "explain",
        "--case",
        &cs,
        "--cell",
        pass["id"].as_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["verdict"], "BI_PASS");
    assert_eq!(v["rows"][0]["observed"]["order"], v["rows"][0]["vs"]["order"]);
    // a cell the case does not have: exit 2
    let o = mxbi(&["explain", "--case", &cs, "--cell", "batch/m=3/k=1024/n=64/row=0"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn demo_prints_an_explanation() {
    let o = mxbi(&["demo"]);
    assert_eq!(o.status.code(), Some(0));
    let s = stdout(&o);
    assert!(s.contains("explained from the bytes alone (mxbi explain)"), "{s}");
    assert!(s.contains("(split part 1 of 4, k 64..127)"), "{s}");
}
