//! Identification compares the whole row (docs/EXPLAIN.md, "Early
//! pruning": 4, 64, 512 columns, then the whole row): two orders that agree
//! on the first 599 of 600 columns and differ at the last are told apart.

use mxbi::explain::candidates::{self, Candidate, Inputs, Source};
use mxbi::explain::{self, IdentifyOptions};
use mxbi::gemm::{gemm, BLayout, Matrix, Problem};
use mxbi::order::{InType, Order};
use mxbi::rng::SplitMix64;

const K: usize = 64;
const N: usize = 600;
/// The one column where the orders differ.
const LATE: usize = 599;

fn order(s: &str) -> Order {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn random(r: &mut SplitMix64) -> f32 {
    let e = r.range_i64(-5, 5) as i32;
    let m = 1.0 + (r.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
    m * 2f32.powi(e) * if r.next_u32() & 1 == 1 { -1.0 } else { 1.0 }
}

/// A: one random row. B: every column but [`LATE`] holds one nonzero term
/// (one product: every f32 order gives the same bytes), column LATE is
/// random (the orders differ there).
fn operands(seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut r = SplitMix64::new(seed);
    let a: Vec<f32> = (0..K).map(|_| random(&mut r)).collect();
    let mut b = vec![0f32; K * N];
    for j in 0..N {
        if j == LATE {
            for x in 0..K {
                b[x * N + j] = random(&mut r);
            }
        } else {
            b[(j % K) * N + j] = random(&mut r);
        }
    }
    (a, b)
}

fn problem<'a>(a: &'a [f32], b: &'a [f32]) -> Problem<'a> {
    Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m: 1,
        n: N,
        k: K,
        b_layout: BLayout::Kn,
    }
}

#[test]
fn identify_compares_columns_past_the_pruning_stages() {
    let (want, other) = (order("fma;split=4"), order("fma"));
    // the first seed whose late column the two orders round differently
    let (a, b) = (0..64)
        .map(operands)
        .find(|(a, b)| {
            let p = problem(a, b);
            gemm(&want, &p, None).unwrap()[LATE].to_bits() != gemm(&other, &p, None).unwrap()[LATE].to_bits()
        })
        .expect("a seed that separates the orders");
    let p = problem(&a, &b);
    let c = gemm(&want, &p, None).unwrap();
    let d = gemm(&other, &p, None).unwrap();
    let differ: Vec<usize> = (0..N).filter(|&j| c[j].to_bits() != d[j].to_bits()).collect();
    assert_eq!(differ, vec![LATE], "the two orders differ only at the late column");
    // the two candidates, the wrong one first
    let cands: Vec<Candidate> = [other, want]
        .into_iter()
        .map(|order| Candidate {
            order,
            source: Source::Family,
        })
        .collect();
    let id = explain::identify(&p, &[0], &c, &cands, IdentifyOptions::default()).unwrap();
    assert_eq!(id[0].matches, vec![want], "{}", id[0]);
    // and the whole family: `fma` is out, every match has the late column's bytes
    let family = candidates::family(Inputs::of_type(InType::F32), K);
    let id = explain::identify(&p, &[0], &c, &family, IdentifyOptions::default()).unwrap();
    assert!(id[0].matches.contains(&want), "{}", id[0]);
    assert!(!id[0].matches.contains(&other), "{}", id[0]);
    for o in &id[0].matches {
        assert_eq!(gemm(o, &p, None).unwrap()[LATE].to_bits(), c[LATE].to_bits(), "{o}");
    }
}
