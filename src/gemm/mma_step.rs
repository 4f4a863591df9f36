//! One tensor-core instruction, one output element: the single-step model
//! that the hardware probes (`mxbi device probe`) compare against.
//!
//! `mma_step(mma, a, b, c)` is exactly what the reduction tree of an `mma`
//! order does for one chunk of `mma.k` positions with accumulator `c`. The
//! contract is docs/ORDERS.md: the `mma(...)` item of "Families" (split,
//! c, out, in) and "The fused sum" (decomposition, alignment, truncation,
//! rounding, specials); this file implements those two sections and states
//! nothing of its own about them. With `c=late` the final `RN(C + s)` is an
//! IEEE f32 addition (NaN and Inf propagate as on the host; NaNs compare as
//! a class).
//!
//! The inputs are taken as given: the caller guarantees they are exactly
//! representable in the `in=` type (the GEMM checks this; the probes
//! generate codes of that type). Positions `p < mma.k` beyond the end of `a`
//! or `b` are zero products (the tree's padding of a short last chunk);
//! elements past `mma.k` are not read.

use super::step::{decompose, fused_sum, product, Decomposed};
use crate::order::{CMode, Mma, MmaSplit};

/// Terms kept on the stack up to this many products per fused sum.
const INLINE: usize = 64;

fn zero_term() -> Decomposed {
    decompose(0.0, -126)
}

/// One fused sum over C and the products at `positions`.
fn fused_over(mma: &Mma, a: &[f32], b: &[f32], c: f32, positions: impl Iterator<Item = usize> + Clone) -> f32 {
    let emin = mma.input.emin();
    let term = |p: usize| -> Decomposed {
        match (a.get(p), b.get(p)) {
            (Some(&x), Some(&y)) => product(decompose(x, emin), decompose(y, emin), 0),
            _ => product(decompose(0.0, emin), decompose(0.0, emin), 0),
        }
    };
    let n = positions.clone().count();
    if n < INLINE {
        let mut buf = [zero_term(); INLINE + 1];
        buf[0] = decompose(c, -126);
        for (slot, p) in buf[1..].iter_mut().zip(positions) {
            *slot = term(p);
        }
        fused_sum(&buf[..n + 1], mma.f, mma.out)
    } else {
        let mut terms = Vec::with_capacity(n + 1);
        terms.push(decompose(c, -126));
        terms.extend(positions.map(term));
        fused_sum(&terms, mma.f, mma.out)
    }
}

/// The output element of one tensor-core instruction: `mma.k` products
/// `a[p] * b[p]` plus `c`, under the step model of `mma` (see the module
/// documentation for the exact contract).
pub fn mma_step(mma: &Mma, a: &[f32], b: &[f32], c: f32) -> f32 {
    let k = mma.k as usize;
    let start = match mma.c {
        CMode::Fused => c,
        CMode::Late => 0.0,
    };
    let s = match mma.split {
        MmaSplit::None => fused_over(mma, a, b, start, 0..k),
        MmaSplit::Halves => {
            let h = k / 2;
            let first = fused_over(mma, a, b, start, 0..h);
            fused_over(mma, a, b, first, h..k)
        }
        MmaSplit::Mod4 => {
            let first = fused_over(mma, a, b, start, (0..k).filter(|p| p % 4 < 2));
            fused_over(mma, a, b, first, (0..k).filter(|p| p % 4 >= 2))
        }
    };
    match mma.c {
        CMode::Fused => s,
        CMode::Late => c + s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use crate::gemm::{gemm, BLayout, Matrix, Problem};
    use crate::order::{InType, Order};
    use crate::rng::SplitMix64;

    fn mma_of(spec: &str) -> (Order, Mma) {
        let o: Order = spec.parse().unwrap();
        (o, o.mma().unwrap())
    }

    fn p2(e: i32) -> f32 {
        2f64.powi(e) as f32
    }

    /// `k`-vectors with the given leading pairs, zeros after.
    fn padded(pairs: &[(f32, f32)], k: usize) -> (Vec<f32>, Vec<f32>) {
        let mut a = vec![0.0; k];
        let mut b = vec![0.0; k];
        for (i, &(x, y)) in pairs.iter().enumerate() {
            a[i] = x;
            b[i] = y;
        }
        (a, b)
    }

    fn random_code(r: &mut SplitMix64, t: InType) -> f32 {
        let f = t.format().unwrap();
        loop {
            let code = (r.next_u32() & (f.code_count() - 1)) as u16;
            let v = f.decode_f32(code);
            // keep bf16 magnitudes where products cannot overflow f32
            if v.is_finite() && (t != InType::Bf16 || v.abs() < 1e30) {
                return v;
            }
        }
    }

    #[test]
    fn one_by_one_gemm_equals_mma_step() {
        for spec in [
            "hopper-bf16",
            "hopper-f16",
            "hopper-fp8-wgmma",
            "hopper-fp8-mma-sync",
            "mma(k=32,f=25,split=mod4,c=late,in=e5m2)",
            "mma(k=32,f=13,out=13,in=e5m2)",
            "ampere-bf16",
            "ada-fp8",
        ] {
            let (order, mma) = mma_of(spec);
            let k = mma.k as usize;
            let mut r = SplitMix64::new(42);
            for case in 0..3000 {
                let mut a: Vec<f32> = (0..k).map(|_| random_code(&mut r, mma.input)).collect();
                let mut b: Vec<f32> = (0..k).map(|_| random_code(&mut r, mma.input)).collect();
                if case % 3 == 0 {
                    // cancellation: pairs of equal and opposite products
                    for p in (0..k).step_by(4) {
                        a[p + 1] = -a[p];
                        b[p + 1] = b[p];
                    }
                }
                let prob = Problem {
                    a: Matrix::F32(&a),
                    b: Matrix::F32(&b),
                    m: 1,
                    n: 1,
                    k,
                    b_layout: BLayout::Kn,
                };
                let g = gemm(&order, &prob, None).unwrap()[0];
                let s = mma_step(&mma, &a, &b, 0.0);
                assert!(
                    g.to_bits() == s.to_bits() || (g.is_nan() && s.is_nan()),
                    "{spec} case {case}: gemm {g:e} step {s:e}"
                );
            }
        }
    }

    #[test]
    fn fasi_features_with_c_on_hopper_bf16() {
        let (_, m) = mma_of("hopper-bf16");
        let run = |pairs: &[(f32, f32)], c: f32| {
            let (a, b) = padded(pairs, 16);
            mma_step(&m, &a, &b, c)
        };
        // exact products: (1-2^-8)^2 = 1 - 2^-7 + 2^-16, plus C = 2^-20
        let x = 1.0 - p2(-8);
        assert_eq!(run(&[(x, x)], p2(-20)), 1.0 - p2(-7) + p2(-16) + p2(-20));
        // truncation direction: C = 2 plus 2^-23 + 2^-24 -> 2 (not 2 + 2^-22)
        assert_eq!(run(&[(1.0, p2(-23) + p2(-24))], 2.0), 2.0);
        assert_eq!(run(&[(-1.0, p2(-23) + p2(-24))], -2.0), -2.0);
        // alignment bits: 1*1 + C with C = -(1 - 2^-24) gives 2^-24 exactly
        assert_eq!(run(&[(1.0, 1.0)], -(1.0 - p2(-24))), p2(-24));
        // F = 25: four products 0.5 * 2^-24 each keep their bit with C = 1
        assert_eq!(run(&[(0.5, p2(-24)); 4], 1.0), 1.0 + p2(-23));
        // carry bits: four 1*1 plus C = 1 + 2^-22 + 2^-23 -> 5 (RZ of 5 + 3*2^-23)
        assert_eq!(run(&[(1.0, 1.0); 4], 1.0 + p2(-22) + p2(-23)), 5.0);
        // sixteen products 1.5*1.5 + C = 1.5*... : no carry lost (exact 37.5)
        assert_eq!(run(&[(1.5, 1.5); 16], 1.5), 37.5);
        // C subnormal is aligned like any term: 2^-149 vanishes beside 1
        assert_eq!(run(&[(1.0, 1.0)], p2(-149)), 1.0);
        // but is kept when everything is tiny (M = -126): 2^-149 + 2^-140
        assert_eq!(run(&[(p2(-70), p2(-70))], p2(-149)), p2(-140) + p2(-149));
        // -0 + -0 products: integer adder gives +0
        assert_eq!(run(&[(-0.0, 1.0)], -0.0).to_bits(), 0);
        // specials
        assert!(run(&[(f32::INFINITY, 0.0)], 1.0).is_nan());
        assert!(run(&[(1.0, 1.0)], f32::NAN).is_nan());
        assert_eq!(run(&[(f32::INFINITY, 1.0)], 1.0), f32::INFINITY);
        assert!(run(&[(f32::INFINITY, 1.0)], f32::NEG_INFINITY).is_nan());
        assert_eq!(run(&[(1.0, 1.0)], f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert_eq!(run(&[(f32::NAN, 1.0)], 0.0).to_bits(), 0x7FFF_FFFF);
    }

    #[test]
    fn f16_emin_and_subnormal_products() {
        let (_, m) = mma_of("hopper-f16");
        let run = |pairs: &[(f32, f32)], c: f32| {
            let (a, b) = padded(pairs, 16);
            mma_step(&m, &a, &b, c)
        };
        // smallest f16 subnormal squared, 2^-48, survives next to C = 2^-30
        // (M = -28 from the f16 emin: subnormals carried at 2^-14 * 2^-14)
        let tiny = f32::from(half::f16::from_bits(1));
        assert_eq!(tiny, p2(-24));
        assert_eq!(run(&[(tiny, tiny)], p2(-30)), p2(-30) + p2(-48));
        // but is truncated beside C = 2^-20 (M = -20, F = 25: quantum 2^-45)
        assert_eq!(run(&[(tiny, tiny)], p2(-20)), p2(-20));
        assert_eq!(run(&[(tiny, tiny)], 1.0), 1.0);
    }

    #[test]
    fn fp8_mma_sync_c_late_rounds_to_nearest() {
        let (_, m) = mma_of("hopper-fp8-mma-sync");
        // products sum to 1 + 2^-9 (exact in the f16 HMMA chain)
        let (a, b) = padded(&[(1.0, 1.0), (p2(-9), 1.0)], 32);
        assert_eq!(Format::E4M3.decode_f32(0x01), p2(-9));
        // C = 2^24: RN(2^24 + 1.001953125) = 2^24 + 2
        assert_eq!(mma_step(&m, &a, &b, p2(24)), p2(24) + 2.0);
        // the fused (wgmma-like) model truncates instead
        let fused = Mma { c: CMode::Fused, ..m };
        assert_eq!(mma_step(&fused, &a, &b, p2(24)), p2(24));
        // mod4 split: positions 0,1 summed first, then 2,3 (chained RZ f32)
        let mut a = vec![0.0; 32];
        let mut b = vec![1.0; 32];
        a[2] = 256.0; // second half
        a[0] = p2(-9); // first half
        b[0] = p2(-9);
        // first sum 2^-18; second: 256 + 2^-18 keeps 2^-18 (F = 25 below 2^8: 2^-17 quantum -> truncated)
        assert_eq!(mma_step(&m, &a, &b, 0.0), 256.0);
        // with halves, 2^-18 and 256 would also meet in one sum
        let halves = Mma {
            split: MmaSplit::Halves,
            ..m
        };
        assert_eq!(mma_step(&halves, &a, &b, 0.0), 256.0);
        // NaN: e4m3 NaN input gives NaN; C = NaN gives NaN
        a[5] = f32::NAN;
        assert!(mma_step(&m, &a, &b, 1.0).is_nan());
        a[5] = 0.0;
        assert!(mma_step(&m, &a, &b, f32::NAN).is_nan());
    }

    #[test]
    fn fp8_wgmma_keeps_13_fraction_bits() {
        let (_, m) = mma_of("hopper-fp8-wgmma");
        let run = |pairs: &[(f32, f32)], c: f32| {
            let (a, b) = padded(pairs, 32);
            mma_step(&m, &a, &b, c)
        };
        // C = 1 plus 2^-4 * 2^-9 = 2^-13: kept (13 fraction bits)
        assert_eq!(run(&[(p2(-4), p2(-9))], 1.0), 1.0 + p2(-13));
        // plus another 2^-14: result truncated to e8m13
        assert_eq!(run(&[(p2(-4), p2(-9)), (p2(-5), p2(-9))], 1.0), 1.0 + p2(-13));
        // a C with 23 fraction bits is truncated to 13
        assert_eq!(run(&[], 1.0 + p2(-20)), 1.0);
        assert_eq!(run(&[], -(1.0 + p2(-13) + p2(-20))), -(1.0 + p2(-13)));
        // below F = 13 under M: 2^-15 beside C = 1 is dropped
        assert_eq!(run(&[(p2(-6), p2(-9))], 1.0), 1.0);
        // short inputs are zero-padded, not a panic
        assert_eq!(mma_step(&m, &[1.0], &[], 2.0), 2.0);
    }
}
