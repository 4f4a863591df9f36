//! Witness construction (`explain::witness::build`): for pairs of orders
//! that differ, a witness exists at K in {64, 1024, 4096} and verifies
//! (both orders re-evaluated here on it give different bytes); for an
//! order and an equivalent spelling none is claimed.

use mxbi::explain::witness::{build, Search, WitnessOptions};
use mxbi::gemm::{gemm, representable, BLayout, Matrix, Problem};
use mxbi::order::{InType, Order};

fn o(s: &str) -> Order {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn eval(order: &Order, a: &[f32], b: &[f32], k: usize, n: usize) -> Vec<u32> {
    let p = Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m: 1,
        n,
        k,
        b_layout: BLayout::Kn,
    };
    gemm(order, &p, None).unwrap().iter().map(|x| x.to_bits()).collect()
}

/// Builds a witness for (l, r) and checks it independently.
fn witnessed(l: &str, r: &str, input: InType, k: usize, n: usize) -> usize {
    let (lo, ro) = (o(l), o(r));
    let s = build(&lo, &ro, input, k, n, WitnessOptions::default()).unwrap();
    let Search::Found(w) = s else {
        panic!("{l} vs {r} ({}, K={k}, N={n}): {s:?}", input.name())
    };
    assert_eq!((w.a.len(), w.b.len()), (k, k * n));
    for v in w.a.iter().chain(w.b.iter()) {
        assert!(
            v.is_finite() && representable(*v, input),
            "{l} vs {r}: {v} is not a {}",
            input.name()
        );
    }
    let (x, y) = (eval(&lo, &w.a, &w.b, k, n), eval(&ro, &w.a, &w.b, k, n));
    assert_ne!(x, y, "{l} vs {r}: the witness does not separate them");
    let differ: Vec<usize> = (0..n).filter(|&j| x[j] != y[j]).collect();
    assert_eq!(differ, w.columns, "{l} vs {r}: columns");
    // deterministic: the same arguments, the same witness
    let again = build(&lo, &ro, input, k, n, WitnessOptions::default()).unwrap();
    assert_eq!(again.witness().map(|w| w.digest()), Some(w.digest()));
    w.attempt
}

const OUTS: [&str; 3] = ["", ";out=bf16", ";out=f16"];

#[test]
fn fma_pairs_have_witnesses_in_every_output_format() {
    for k in [64, 1024, 4096] {
        for out in OUTS {
            for (l, r) in [
                ("fma", "fma;split=4"),
                ("fma;split=8;reduce=pairwise", "fma;split=32"),
                ("fma;lanes=4", "fma"),
                ("fma;lanes=8", "fma;lanes=4;reduce=serial"),
                ("fma;ktile=8;tile=fresh", "fma;split=2"),
                ("fma;split=4;reduce=pairwise", "fma;split=4"),
            ] {
                let (l, r) = (format!("{l}{out}"), format!("{r}{out}"));
                for input in [InType::F32, InType::Bf16] {
                    witnessed(&l, &r, input, k, 64);
                }
            }
        }
    }
}

#[test]
fn mma_presets_with_narrow_inputs_have_witnesses() {
    for k in [64, 1024, 4096] {
        for out in OUTS {
            for (l, r, input) in [
                ("mma(k=16,f=25);split=2", "mma(k=16,f=25)", InType::Bf16),
                ("hopper-bf16", "fma", InType::Bf16),
                ("hopper-bf16", "ampere-bf16", InType::Bf16),
                ("hopper-f16;split=2;reduce=pairwise", "hopper-f16", InType::F16),
                ("hopper-fp8-wgmma", "deepgemm-fp8", InType::E4M3),
                ("hopper-fp8-wgmma;split=2", "hopper-fp8-wgmma", InType::E4M3),
            ] {
                if k == 64 && l.starts_with("hopper-fp8-wgmma") && r == "deepgemm-fp8" {
                    // promote=128 is no promotion at all when K = 64
                    continue;
                }
                witnessed(&format!("{l}{out}"), &format!("{r}{out}"), input, k, 64);
            }
        }
    }
}

#[test]
fn narrow_n_and_other_input_types() {
    // one column: every attempt is one probe
    witnessed("fma;out=bf16", "fma;split=4;out=bf16", InType::Bf16, 1024, 1);
    witnessed("fma;out=f16", "fma;split=2;out=f16", InType::F16, 1024, 4);
    witnessed("fma;out=bf16", "fma;split=4;out=bf16", InType::E4M3, 1024, 8);
    witnessed("fma;out=bf16", "fma;split=4;out=bf16", InType::E5M2, 4096, 8);
    witnessed("fma", "muladd", InType::F32, 256, 8);
}

#[test]
fn equivalent_spellings_get_no_witness() {
    let w = WitnessOptions::default();
    for (l, r, k) in [
        ("fma;split=1", "fma", 1024),
        ("fma;split=4;reduce=serial", "fma;split=4", 4096),
        ("hopper-bf16", "mma(k=16,f=25,in=bf16)", 1024),
        ("fma;split=4", "fma;split=4/interleave;ktile=256", 1024),
    ] {
        assert_eq!(
            build(&o(l), &o(r), InType::Bf16, k, 16, w),
            Ok(Search::Equivalent),
            "{l} vs {r}"
        );
    }
    // different trees that no bf16 input separates: products of two bf16
    // values are exact in f32, so fma and muladd agree on every bf16 input
    let few = WitnessOptions { seed: 3, tries: 16 };
    assert_eq!(
        build(&o("fma"), &o("muladd"), InType::Bf16, 256, 16, few),
        Ok(Search::NotFound { tries: 16 })
    );
}
