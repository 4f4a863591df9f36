//! mxbi against the independent exact-arithmetic Python reference
//! (`reference/orders/`, see its README):
//! - `vectors.jsonl.gz`: random cases for every order family, bit for bit
//!   for the generic evaluator and for `gemm` (fast kernels where they
//!   apply); NaN results compare as a class;
//! - `edge_vectors.jsonl`: the fused sum's edges (sums reaching 2^128, the
//!   round-toward-zero maximum, zero products beside C, a zero C), each with
//!   the claim its `what` makes checked on mxbi's output, and the foil result
//!   it must not give;
//! - `parse_vectors.jsonl`: spellings that must parse (with their canonical
//!   form) or be rejected (with the reason class and the text the message
//!   names).
//!
//! Every comparison is shown to fail on a planted error, and the files'
//! contents are pinned by SHA-256 below, so that editing a vector fails
//! here unless the digest changes too (visibly, in review).

use flate2::read::GzDecoder;
use mxbi::gemm::{gemm, gemm_generic, BLayout, Matrix, Problem};
use mxbi::mx::MxFormat;
use mxbi::order::Order;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

/// SHA-256 of each vector file's content (the .gz decompressed). After a
/// deliberate regeneration (`python3 reference/orders/gen_vectors.py`, then
/// `--check`), update these.
const PINNED: &[(&str, &str)] = &[
    (
        "vectors.jsonl.gz",
        "45ed5b63e6349127f907797b310708ab92f8bb4906e7add0c34e6b09b7cf3718",
    ),
    (
        "edge_vectors.jsonl",
        "5a392cff9d2ac7b0f299521927451f51802ca8aa80775773318ee53d314bc07b",
    ),
    (
        "parse_vectors.jsonl",
        "9d7193d635eec207e4ab468252111ae0d3e4f49ebfe3915dfa3ee4644635c542",
    ),
];

fn read(name: &str) -> String {
    let path = format!("{}/reference/orders/{name}", env!("CARGO_MANIFEST_DIR"));
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    if name.ends_with(".gz") {
        let mut s = String::new();
        GzDecoder::new(&raw[..]).read_to_string(&mut s).unwrap();
        s
    } else {
        String::from_utf8(raw).unwrap()
    }
}

#[derive(Clone, serde::Deserialize)]
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
    // edge vectors only
    what: Option<String>,
    note: Option<String>,
    foil: Option<String>,
    foil_c: Option<Vec<String>>,
}

fn bits(v: &[String]) -> Vec<u32> {
    v.iter().map(|h| u32::from_str_radix(h, 16).unwrap()).collect()
}
fn u8s(v: &[String]) -> Vec<u8> {
    v.iter().map(|h| u8::from_str_radix(h, 16).unwrap()).collect()
}

fn same(x: u32, y: u32) -> bool {
    let nan = |b: u32| f32::from_bits(b).is_nan();
    x == y || (nan(x) && nan(y))
}

/// mxbi's outputs for a case: (generic evaluator, gemm).
fn run(c: &Case) -> (Vec<u32>, Vec<u32>) {
    let order: Order = c.order.parse().unwrap_or_else(|e| panic!("{e}"));
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
        af = bits(c.a.as_ref().unwrap())
            .into_iter()
            .map(f32::from_bits)
            .collect::<Vec<_>>();
        bf = bits(c.b.as_ref().unwrap())
            .into_iter()
            .map(f32::from_bits)
            .collect::<Vec<_>>();
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
    let fast = gemm(&order, &p, None).unwrap_or_else(|e| panic!("{}: {e}", c.order));
    let to_bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect();
    (to_bits(generic), to_bits(fast))
}

/// The first element where mxbi's outputs differ from `want`, described.
fn mismatch(c: &Case, got: &(Vec<u32>, Vec<u32>), want: &[u32]) -> Option<String> {
    let (generic, fast) = got;
    assert_eq!(generic.len(), want.len(), "{}: output size", c.order);
    (0..want.len())
        .find(|&i| !same(generic[i], want[i]) || !same(fast[i], want[i]))
        .map(|i| {
            format!(
                "{} m={} n={} k={}: element {i}: reference {:#010x} ({:e}), generic {:#010x}, gemm {:#010x}",
                c.order,
                c.m,
                c.n,
                c.k,
                want[i],
                f32::from_bits(want[i]),
                generic[i],
                fast[i]
            )
        })
}

/// A wrong expectation for a case: a different class of value in element 0
/// (a NaN becomes 0, anything else has its sign flipped or, for zero, its
/// last bit set).
fn planted(want: &[u32]) -> Vec<u32> {
    let mut w = want.to_vec();
    w[0] = match w[0] {
        x if f32::from_bits(x).is_nan() => 0,
        x => x ^ 0x8000_0000,
    };
    w
}

#[test]
fn vector_files_are_pinned() {
    let mut wrong = Vec::new();
    for (name, pinned) in PINNED {
        let got = hex::encode(Sha256::digest(read(name).as_bytes()));
        if got != *pinned {
            wrong.push(format!("{name}: content sha256 {got}, pinned {pinned}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "reference/orders vector files differ from the pinned digests (regenerate with \
         gen_vectors.py, confirm with gen_vectors.py --check, then update PINNED):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_family_matches_the_python_reference() {
    let mut per_order: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut shown = 0;
    for line in read("vectors.jsonl.gz").lines() {
        let c: Case = serde_json::from_str(line).unwrap();
        let want = bits(&c.c);
        let got = run(&c);
        let e = per_order.entry(c.order.clone()).or_default();
        e.0 += 1;
        if let Some(msg) = mismatch(&c, &got, &want) {
            e.1 += 1;
            if shown < 10 {
                shown += 1;
                eprintln!("{msg}");
            }
        }
        // the comparison catches a planted error on this very case
        assert!(
            mismatch(&c, &got, &planted(&want)).is_some(),
            "{}: a planted error goes unnoticed",
            c.order
        );
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

const INF: u32 = 0x7F80_0000;

/// The largest finite fused-sum result with `out` fraction bits.
fn max_finite(out: u32) -> u32 {
    0x7F80_0000 - (1 << (23 - out))
}

/// Check what the case's `what` claims about the output `c` (the same
/// claims edge_cases.py asserts on the reference side).
fn claim_holds(case: &Case, c: &[u32]) -> Result<(), String> {
    let what = case.what.as_deref().unwrap();
    let order: Order = case.order.parse().unwrap();
    let out = order.mma().map_or(23, |m| m.out);
    let finite_inputs = match &case.format {
        Some(_) => {
            let codes: Vec<u8> = [case.a_codes.as_ref(), case.b_codes.as_ref()]
                .into_iter()
                .flat_map(|v| u8s(v.unwrap()))
                .collect();
            let scales: Vec<u8> = [case.a_scales.as_ref(), case.b_scales.as_ref()]
                .into_iter()
                .flat_map(|v| u8s(v.unwrap()))
                .collect();
            case.format.as_deref() == Some("mxfp8-e4m3")
                && codes.iter().all(|&x| x & 0x7F != 0x7F)
                && scales.iter().all(|&x| x != 0xFF)
        }
        None => [case.a.as_ref(), case.b.as_ref()]
            .into_iter()
            .flat_map(|v| bits(v.unwrap()))
            .all(|x| f32::from_bits(x).is_finite()),
    };
    let mags: BTreeSet<u32> = c.iter().map(|x| x & 0x7FFF_FFFF).collect();
    let ok = match what {
        "overflow-inf" | "overflow-via-c" | "truncated-to-inf" | "rn-contrast" => {
            finite_inputs && mags == BTreeSet::from([INF])
        }
        "rz-max" | "beyond-max" => mags == BTreeSet::from([max_finite(out)]),
        "cancel-huge" => c.iter().all(|&x| f32::from_bits(x).is_finite()),
        "zero-c" => c.iter().all(|&x| x == 0),
        "zero-products" => c.iter().all(|&x| f32::from_bits(x).is_finite() && x & 0x7FFF_FFFF != 0),
        _ => return Err(format!("unknown what '{what}'")),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{} '{}' ({what}): output {c:08x?} does not show what it claims",
            case.order,
            case.note.as_deref().unwrap_or("")
        ))
    }
}

#[test]
fn fused_sum_edges_match_the_python_reference() {
    let cases: Vec<Case> = read("edge_vectors.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut failures = Vec::new();
    let mut covered: BTreeSet<(String, String)> = BTreeSet::new();
    for c in &cases {
        let what = c.what.clone().unwrap();
        let want = bits(&c.c);
        let got = run(c);
        if let Some(msg) = mismatch(c, &got, &want) {
            failures.push(format!("{what} '{}': {msg}", c.note.as_deref().unwrap_or("")));
        }
        for out in [&got.0, &got.1] {
            if let Err(e) = claim_holds(c, out) {
                failures.push(e);
            }
        }
        // the foil reading gives other bytes, and mxbi does not give them
        if let (Some(foil), Some(fc)) = (&c.foil, &c.foil_c) {
            let fc = bits(fc);
            assert!(
                mismatch(c, &got, &fc).is_some(),
                "{} '{}': mxbi gives the foil ({foil}) result",
                c.order,
                c.note.as_deref().unwrap_or("")
            );
        }
        // planted errors are caught: a flipped expectation, and the claim
        // check on an output of the wrong kind
        assert!(
            mismatch(c, &got, &planted(&want)).is_some(),
            "{what}: planted error unnoticed"
        );
        let mut wrong = want.clone();
        wrong[0] = match what.as_str() {
            "zero-c" => 0x3F80_0000,
            "cancel-huge" => 0x7FC0_0000,
            _ => 0,
        };
        assert!(
            claim_holds(c, &wrong).is_err(),
            "{what}: the claim holds for a wrong output"
        );
        covered.insert((what, c.order.clone()));
    }
    // what must be covered, for which orders
    let required = [
        (
            "hopper-bf16",
            &[
                "overflow-inf",
                "overflow-via-c",
                "truncated-to-inf",
                "rz-max",
                "beyond-max",
                "zero-products",
                "zero-c",
                "cancel-huge",
            ][..],
        ),
        (
            "ampere-bf16",
            &["overflow-inf", "overflow-via-c", "rz-max", "beyond-max"][..],
        ),
        ("mma(k=16,f=25,in=f32)", &["overflow-inf", "rz-max", "beyond-max"][..]),
        ("hopper-f16", &["zero-products"][..]),
        ("hopper-fp8-wgmma", &["zero-products"][..]),
        (
            "blackwell-mxf8f6f4",
            &[
                "overflow-inf",
                "overflow-via-c",
                "truncated-to-inf",
                "rz-max",
                "beyond-max",
                "zero-products",
                "zero-c",
            ][..],
        ),
        (
            "mma(k=32,f=13,out=13);scale=fused",
            &["overflow-inf", "truncated-to-inf", "rz-max", "zero-products"][..],
        ),
        ("fma", &["rn-contrast"][..]),
        ("muladd", &["rn-contrast"][..]),
    ];
    for (order, whats) in required {
        for w in whats {
            assert!(
                covered.contains(&(w.to_string(), order.to_string())),
                "no '{w}' edge vector for {order}"
            );
        }
    }
    eprintln!(
        "{} fused-sum edge vectors, {} (what, order) pairs",
        cases.len(),
        covered.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[derive(Clone, serde::Deserialize)]
struct ParseVector {
    spec: String,
    canonical: Option<String>,
    error: Option<String>,
    names: Option<String>,
}

/// Whether mxbi's parser agrees with one parse vector.
fn parse_agrees(v: &ParseVector) -> Result<(), String> {
    let got = v.spec.parse::<Order>();
    match (&v.canonical, &got) {
        (Some(canon), Ok(o)) => {
            let printed = o.to_string();
            if printed != *canon {
                return Err(format!("{:?}: canonical {printed:?}, reference {canon:?}", v.spec));
            }
            match canon.parse::<Order>() {
                Ok(o2) if o2 == *o => Ok(()),
                other => Err(format!(
                    "{:?}: canonical {canon:?} does not round-trip: {other:?}",
                    v.spec
                )),
            }
        }
        (Some(canon), Err(e)) => Err(format!(
            "{:?}: rejected ({e}), reference parses it as {canon:?}",
            v.spec
        )),
        (None, Ok(o)) => Err(format!(
            "{:?}: parses as {o}, reference rejects it ({})",
            v.spec,
            v.error.as_deref().unwrap_or("")
        )),
        (None, Err(e)) => {
            let class = v.error.as_deref().unwrap();
            let names = v.names.as_deref().unwrap();
            if e.kind.name() != class {
                Err(format!(
                    "{:?}: rejected as {} ({e}), reference says {class}",
                    v.spec,
                    e.kind.name()
                ))
            } else if !e.msg.contains(names) {
                Err(format!("{:?}: message '{e}' does not name {names:?}", v.spec))
            } else {
                Ok(())
            }
        }
    }
}

#[test]
fn parse_vectors_agree_with_the_python_reference() {
    let vectors: Vec<ParseVector> = read("parse_vectors.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut classes: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for v in &vectors {
        *classes
            .entry(v.error.clone().unwrap_or_else(|| "parses".into()))
            .or_default() += 1;
        if let Err(e) = parse_agrees(v) {
            failures.push(e);
        }
        // planted errors: a changed canonical form / reason class, a flipped verdict
        let mut p = v.clone();
        if let Some(c) = &v.canonical {
            p.canonical = Some(format!("{c};out=bf16"));
            assert!(parse_agrees(&p).is_err(), "{:?}: wrong canonical unnoticed", v.spec);
            p = v.clone();
            p.canonical = None;
            p.error = Some("syntax".into());
            p.names = Some(String::new());
        } else {
            p.error = Some(
                if v.error.as_deref() == Some("value") {
                    "syntax"
                } else {
                    "value"
                }
                .into(),
            );
            assert!(parse_agrees(&p).is_err(), "{:?}: wrong class unnoticed", v.spec);
            p = v.clone();
            p.names = Some(format!("{}#", v.names.as_deref().unwrap()));
            assert!(parse_agrees(&p).is_err(), "{:?}: wrong named text unnoticed", v.spec);
            p = v.clone();
            p.canonical = Some("fma".into());
        }
        assert!(parse_agrees(&p).is_err(), "{:?}: flipped verdict unnoticed", v.spec);
    }
    eprintln!("{} parse vectors: {classes:?}", vectors.len());
    for class in [
        "parses",
        "syntax",
        "unknown",
        "value",
        "repeat",
        "missing",
        "combination",
    ] {
        assert!(classes.contains_key(class), "no parse vector of class {class}");
    }
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
