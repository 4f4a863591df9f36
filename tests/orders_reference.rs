//! Every order family against the independent exact-arithmetic Python
//! reference (`reference/orders/`, written from docs/ORDERS.md only): zero
//! mismatches, for the generic evaluator and for `gemm` (fast kernels where
//! they apply). NaN results compare as a class.

use flate2::read::GzDecoder;
use mxbi::gemm::{gemm, gemm_generic, BLayout, Matrix, Problem};
use mxbi::mx::MxFormat;
use mxbi::order::Order;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};

#[derive(serde::Deserialize)]
struct Case {
    order: String,
    m: usize,
    n: usize,
    k: usize,
    a: Option<Vec<String>>,
    b: Option<Vec<String>>,
    format: Option<String>,
    a_codes: Option<Vec<String>>,
    a_scales: Option<Vec<String>>,
    b_codes: Option<Vec<String>>,
    b_scales: Option<Vec<String>>,
    c: Vec<String>,
}

fn f32s(v: &[String]) -> Vec<f32> {
    v.iter()
        .map(|h| f32::from_bits(u32::from_str_radix(h, 16).unwrap()))
        .collect()
}
fn u8s(v: &[String]) -> Vec<u8> {
    v.iter().map(|h| u8::from_str_radix(h, 16).unwrap()).collect()
}

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

#[test]
fn every_family_matches_the_python_reference() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/reference/orders/vectors.jsonl.gz");
    let f = std::fs::File::open(path).unwrap();
    let mut per_order: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut shown = 0;
    for line in BufReader::new(GzDecoder::new(f)).lines() {
        let c: Case = serde_json::from_str(&line.unwrap()).unwrap();
        let order: Order = c.order.parse().unwrap_or_else(|e| panic!("{e}"));
        let want = f32s(&c.c);
        let (af, bf, ac, asc, bc, bsc);
        let p = if let Some(fmt) = &c.format {
            let fmt: MxFormat = fmt.parse().unwrap();
            ac = u8s(c.a_codes.as_ref().unwrap());
            asc = u8s(c.a_scales.as_ref().unwrap());
            bc = u8s(c.b_codes.as_ref().unwrap());
            bsc = u8s(c.b_scales.as_ref().unwrap());
            Problem {
                a: Matrix::Mx {
                    codes: &ac,
                    scales: &asc,
                    format: fmt,
                },
                b: Matrix::Mx {
                    codes: &bc,
                    scales: &bsc,
                    format: fmt,
                },
                m: c.m,
                n: c.n,
                k: c.k,
                b_layout: BLayout::Kn,
            }
        } else {
            af = f32s(c.a.as_ref().unwrap());
            bf = f32s(c.b.as_ref().unwrap());
            Problem {
                a: Matrix::F32(&af),
                b: Matrix::F32(&bf),
                m: c.m,
                n: c.n,
                k: c.k,
                b_layout: BLayout::Kn,
            }
        };
        let generic = gemm_generic(&order, &p, None).unwrap_or_else(|e| panic!("{}: {e}", c.order));
        let fast = gemm(&order, &p, None).unwrap();
        let e = per_order.entry(c.order.clone()).or_default();
        e.0 += 1;
        let bad = (0..want.len())
            .filter(|&i| !same(generic[i], want[i]) || !same(fast[i], want[i]))
            .count();
        if bad > 0 {
            e.1 += 1;
            if shown < 10 {
                shown += 1;
                let i = (0..want.len())
                    .find(|&i| !same(generic[i], want[i]) || !same(fast[i], want[i]))
                    .unwrap();
                eprintln!(
                    "{} m={} n={} k={}: element {i}: reference {:#010x} ({:e}), generic {:#010x}, gemm {:#010x}",
                    c.order,
                    c.m,
                    c.n,
                    c.k,
                    want[i].to_bits(),
                    want[i],
                    generic[i].to_bits(),
                    fast[i].to_bits()
                );
            }
        }
    }
    let mut failed = 0;
    for (o, (n, bad)) in &per_order {
        eprintln!("{o:<50} {n:>4} cases  {bad} mismatching");
        failed += bad;
    }
    assert!(
        per_order.len() >= 28,
        "only {} spellings in the vectors",
        per_order.len()
    );
    assert_eq!(failed, 0);
}
