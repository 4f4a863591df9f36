//! The cross-row answer (docs/EXPLAIN.md, "Passive identification"):
//! `explain` over several rows gives one headline, the orders that
//! reproduce every row (the intersection of the per-row match sets, by
//! tree class), or that none does and which order reproduces which rows;
//! in the library (`explain::across_rows`) and in the CLI's text and JSON.

mod common;

use common::TempDir;
use mxbi::explain::candidates::{self, order_key, Inputs};
use mxbi::explain::{self, IdentifyOptions};
use mxbi::gemm::{gemm, BLayout, Matrix, Problem};
use mxbi::io::{write_tensor, TensorData};
use mxbi::order::{InType, Order};
use mxbi::rng::SplitMix64;
use std::process::{Command, Output};

const M: usize = 4;
const K: usize = 256;
const N: usize = 64;

fn order(s: &str) -> Order {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            let e = r.range_i64(-5, 5) as i32;
            let m = 1.0 + (r.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
            m * 2f32.powi(e) * if r.next_u32() & 1 == 1 { -1.0 } else { 1.0 }
        })
        .collect()
}

fn problem<'a>(a: &'a [f32], b: &'a [f32]) -> Problem<'a> {
    Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m: M,
        n: N,
        k: K,
        b_layout: BLayout::Kn,
    }
}

/// A random, and B. With `blind`, row 0 of A holds one nonzero term
/// (every f32-output order gives its bytes: it cannot tell the orders
/// apart).
fn operands(blind: bool) -> (Vec<f32>, Vec<f32>) {
    let mut a = random(M * K, 11);
    if blind {
        a[..K].fill(0.0);
        a[3] = 1.5;
    }
    (a, random(K * N, 12))
}

/// Row i of C under `rows_order(i)`.
fn observed(a: &[f32], b: &[f32], rows_order: impl Fn(usize) -> Order) -> Vec<f32> {
    (0..M)
        .flat_map(|i| {
            let c = gemm(&rows_order(i), &problem(a, b), Some(&[i])).unwrap();
            c.into_iter()
        })
        .collect()
}

fn across(a: &[f32], b: &[f32], c: &[f32]) -> explain::AcrossRows {
    let p = problem(a, b);
    let family = candidates::family(Inputs::of_type(InType::F32), K);
    let rows: Vec<usize> = (0..M).collect();
    let ids = explain::identify(&p, &rows, c, &family, IdentifyOptions::default()).unwrap();
    explain::across_rows(&ids, K)
}

/// Every row from `fma;split=4`: the headline is its tree class; row 0
/// alone is reproduced by every f32 order (so the first row's matches, or
/// their union with the others, would name `fma`).
#[test]
fn rows_of_one_order_have_it_as_the_headline() {
    let (a, b) = operands(true);
    let want = order("fma;split=4");
    let c = observed(&a, &b, |_| want);
    let x = across(&a, &b, &c);
    let head = x.order().expect("an order reproduces every row");
    assert_eq!(order_key(&head, K), order_key(&want, K), "{x}");
    assert!(x.groups.is_empty() && x.unmatched.is_empty(), "{x:?}");
    // every order of the headline reproduces every row, `fma` is not one
    for o in x.classes.iter().flatten() {
        assert_eq!(
            gemm(o, &problem(&a, &b), None)
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            c.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{o}"
        );
    }
    assert!(!x.classes.iter().flatten().any(|o| *o == order("fma")), "{x:?}");
    let line = x.to_string();
    assert!(
        line.starts_with("across rows 0, 1, 2, 3: fma;split=4 reproduces every row"),
        "{line}"
    );
}

/// Rows 0, 1 from `fma;split=4`, rows 2, 3 from `fma;ktile=32;tile=fresh`:
/// no order reproduces every row, and the groups say which rows go with
/// which order (`fma;ktile=32;tile=fresh` is the tree of `fma;split=8` at
/// K = 256, its simpler spelling).
#[test]
fn rows_of_two_orders_have_no_headline_order() {
    let (a, b) = operands(false);
    let (left, right) = (order("fma;split=4"), order("fma;ktile=32;tile=fresh"));
    let c = observed(&a, &b, |i| if i < 2 { left } else { right });
    let x = across(&a, &b, &c);
    assert_eq!(x.order(), None, "{x}");
    assert!(x.classes.is_empty());
    assert_eq!(x.groups.len(), 2, "{x:?}");
    let g: Vec<(u64, Vec<usize>)> = x
        .groups
        .iter()
        .map(|g| (order_key(&g.order, K), g.rows.clone()))
        .collect();
    assert!(g.contains(&(order_key(&left, K), vec![0, 1])), "{x:?}");
    assert!(g.contains(&(order_key(&right, K), vec![2, 3])), "{x:?}");
    assert!(x.unmatched.is_empty());
    let line = x.to_string();
    assert!(line.contains("no order reproduces every row: "), "{line}");
    assert!(
        line.contains("reproduces rows 0, 1") && line.contains("reproduces rows 2, 3"),
        "{line}"
    );
}

fn mxbi(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi")).args(args).output().unwrap()
}

/// The CLI: the headline leads the text and is in the JSON
/// (`across_rows.observed`); no order for every row exits 1.
#[test]
fn explain_prints_the_cross_row_headline() {
    let t = TempDir::new("explain-across");
    let (a, b) = operands(false);
    let save = |name: &str, shape: Vec<usize>, v: &[f32]| {
        let p = t.join(name);
        write_tensor(&p, "data", &TensorData::from_slice(shape, v).unwrap()).unwrap();
        p.display().to_string()
    };
    let (pa, pb) = (save("a.npy", vec![M, K], &a), save("b.npy", vec![K, N], &b));
    let one = observed(&a, &b, |_| order("fma;split=4"));
    let two = observed(&a, &b, |i| {
        if i < 2 {
            order("fma;split=4")
        } else {
            order("fma;ktile=32;tile=fresh")
        }
    });
    let (p1, p2) = (save("c1.npy", vec![M, N], &one), save("c2.npy", vec![M, N], &two));
    let run = |c: &str, json: bool| {
        let mut args = vec!["explain", "--a", &pa, "--b", &pb, "--observed", c];
        if json {
            args.push("--json");
        }
        mxbi(&args)
    };
    let o = run(&p1, false);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.lines()
            .next()
            .unwrap()
            .starts_with("observed across rows 0, 1, 2, 3: fma;split=4 reproduces every row"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_slice(&run(&p1, true).stdout).unwrap();
    assert_eq!(v["across_rows"]["observed"]["order"], "fma;split=4");
    assert_eq!(v["across_rows"]["observed"]["reproduces_every_row"], true);

    let o = run(&p2, false);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.lines().next().unwrap().contains("no order reproduces every row"),
        "{text}"
    );
    let o = run(&p2, true);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let x = &v["across_rows"]["observed"];
    assert!(x["order"].is_null(), "{x}");
    assert_eq!(x["reproduces_every_row"], false);
    assert_eq!(x["groups"].as_array().unwrap().len(), 2, "{x}");
    // each row alone is still reproduced (per-row answers unchanged)
    for r in v["rows"].as_array().unwrap() {
        assert!(r["observed"]["order"].is_string(), "{r}");
    }
}
