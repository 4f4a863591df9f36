//! Exactness: per output element, does every order of a family give the
//! same bytes, and why.
//!
//! Two answers per element. Measured: every order evaluated, bytes
//! compared (a witness pair when they differ). Proven, a sufficient
//! condition that holds for every order of the family:
//! - *all partial sums exact*: every product (dequantized, so MX scales
//!   included) is a multiple of `2^g`, and the sum of their magnitudes is
//!   below `2^(g + c)`, where `c` is the narrowest accumulator of the family
//!   (24 bits for IEEE f32 steps; for a fused sum the alignment width `f`
//!   and the result width `out + 1`). Then every partial sum of any subset
//!   is a multiple of `2^g` that fits, so no step rounds or truncates, in
//!   any order; for mma orders promoting unscaled MX blocks the unscaled
//!   products of each block must satisfy the same;
//! - *at most two terms*: at most two nonzero products, each exact in f32,
//!   under IEEE steps only (`RN(a + b) = RN(b + a)`; a fused sum truncates
//!   and is left out).
//!
//! Both describe the f32 accumulation. Orders of the family with another
//! output format (`out=bf16|f16`) agree with it only if the conversion
//! leaves the result unchanged: all partial sums exact needs the exact sum
//! representable in every output format of the family; at most two terms
//! needs one output format.
//!
//! This is why a cell passes with identity scales and fails with K-varying
//! ones: the same codes make products on a fine grid of small range when
//! every scale is 1, and spread them over many binades when the scale
//! changes along K. It is also what a `VACUOUS` verdict rests on: inputs
//! whose every element is provably order-independent cannot show an order
//! change.

use crate::format::{e8m0_exponent, pow2};
use crate::gemm::eval::convert_out;
use crate::gemm::{gemm, Problem, MX_BLOCK};
use crate::order::{Family, MxScale, Order};
use rayon::prelude::*;

/// Why every order of the family gives the same bytes.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Reason {
    /// All products are multiples of `2^grain` and their magnitudes sum
    /// below `2^(grain + bits)`, with `bits <= capacity` of the family.
    ExactSums { grain: i32, bits: u32, capacity: u32 },
    /// At most two nonzero products, each exact in f32, IEEE steps only.
    AtMostTwoTerms { nonzero: usize },
}

/// Two orders of the family that disagree on an element.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Witness {
    pub left: Order,
    pub left_bits: u32,
    pub right: Order,
    pub right_bits: u32,
}

/// The answer for one element.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ElementExactness {
    pub row: usize,
    pub col: usize,
    /// Every order that could run gave the same bits.
    pub same_bytes: bool,
    /// A proof that every order must (None: no sufficient condition holds).
    pub reason: Option<Reason>,
    pub witness: Option<Witness>,
}

/// The exact products `a[row, k] * b[k, col]` (f64; dequantized for MX,
/// None for NaN/Inf), and for MX the unscaled element products per block.
fn products(p: &Problem, row: usize, col: usize) -> Option<(Vec<f64>, Vec<f64>)> {
    let k = p.k;
    let mut scaled = Vec::with_capacity(k);
    let mut raw = Vec::new();
    if p.f32_operands().is_some() {
        for kk in 0..k {
            scaled.push(p.a_value(row, kk) * p.b_value(kk, col));
        }
    } else if let Some((a, b)) = p.mx_operands() {
        for kk in 0..k {
            let (xa, xb) = (p.a_scale(row, kk)?, p.b_scale(kk, col)?);
            if xa == 0xFF || xb == 0xFF {
                return None;
            }
            let va = a.format.element().decode_f64(a.codes[p.a_index(row, kk)] as u16);
            let vb = b.format.element().decode_f64(b.codes[p.b_index(kk, col)] as u16);
            raw.push(va * vb);
            scaled.push(va * vb * pow2(e8m0_exponent(xa)) * pow2(e8m0_exponent(xb)));
        }
    } else {
        return None;
    }
    scaled
        .iter()
        .chain(&raw)
        .all(|v| v.is_finite())
        .then_some((scaled, raw))
}

/// Exponent of the lowest set bit of `v` (None for zero).
fn grain(v: f64) -> Option<i32> {
    if v == 0.0 {
        return None;
    }
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7FF) as i32;
    let mut mant = bits & ((1u64 << 52) - 1);
    let e0 = if exp == 0 {
        -1074
    } else {
        mant |= 1 << 52;
        exp - 1075
    };
    Some(e0 + mant.trailing_zeros() as i32)
}

/// Bits needed to hold every partial sum of `terms` as a multiple of their
/// common grain: (grain, bits). None when all are zero.
fn span(terms: &[f64]) -> Option<(i32, u32)> {
    let g = terms.iter().filter_map(|&v| grain(v)).min()?;
    // an upper bound of the magnitude sum (f64 rounding, widened)
    let s: f64 = terms.iter().map(|v| v.abs()).sum::<f64>() * (1.0 + 1e-12);
    let ratio = s / 2f64.powi(g);
    Some((g, ratio.log2().floor() as u32 + 1))
}

/// The narrowest accumulator of a family (bits that always stay exact).
fn capacity(family: &[Order]) -> u32 {
    family
        .iter()
        .map(|o| match o.family {
            Family::Fma | Family::MulAdd => 24,
            Family::Mma(m) => m.f.min(m.out + 1).min(24),
        })
        .min()
        .unwrap_or(24)
}

/// The proof for one element, if one of the sufficient conditions holds.
fn prove(p: &Problem, row: usize, col: usize, family: &[Order]) -> Option<Reason> {
    let (scaled, raw) = products(p, row, col)?;
    let cap = capacity(family);
    // the smallest normal f32 grain: below it partial sums would be subnormal
    let fits = |terms: &[f64]| match span(terms) {
        None => Some((0, 0)),
        Some((g, bits)) => (bits <= cap && g >= -149 && g + bits as i32 <= 127).then_some((g, bits)),
    };
    let block_mma = family.iter().any(|o| o.mma().is_some() && o.scale == MxScale::Block);
    let blocks_ok = !block_mma || raw.chunks(MX_BLOCK).all(|b| fits(b).is_some());
    // every order then computes the exact sum S as its f32 result; orders
    // with another output format agree only if S converts exactly to it
    let outputs_agree = |s: f32| family.iter().all(|o| convert_out(s, o.out).to_bits() == s.to_bits());
    if let (Some((g, bits)), true) = (fits(&scaled), blocks_ok) {
        // exact in f64 and in f32: at most `capacity` <= 24 bits of grain >= 2^-149
        let sum = scaled.iter().sum::<f64>() as f32;
        if outputs_agree(if sum == 0.0 { 0.0 } else { sum }) {
            return Some(Reason::ExactSums {
                grain: g,
                bits,
                capacity: cap,
            });
        }
    }
    let ieee = family.iter().all(|o| o.mma().is_none());
    let one_output = family.iter().all(|o| o.out == family[0].out);
    let nonzero: Vec<f64> = scaled.iter().copied().filter(|&v| v != 0.0).collect();
    if ieee && one_output && nonzero.len() <= 2 && nonzero.iter().all(|&v| (v as f32) as f64 == v) {
        return Some(Reason::AtMostTwoTerms { nonzero: nonzero.len() });
    }
    None
}

/// Per element of the given rows: the measured and the proven answer for
/// `family` (orders the inputs cannot run are left out of both).
pub fn analyze(p: &Problem, rows: &[usize], family: &[Order]) -> Result<Vec<ElementExactness>, String> {
    if let Some(&r) = rows.iter().find(|&&r| r >= p.m) {
        return Err(format!("row {r} is out of range (M = {})", p.m));
    }
    let runnable: Vec<(Order, Vec<f32>)> = family
        .par_iter()
        .filter_map(|o| gemm(o, p, Some(rows)).ok().map(|c| (*o, c)))
        .collect();
    if runnable.is_empty() {
        return Err("no order of the family can run these inputs".into());
    }
    let orders: Vec<Order> = runnable.iter().map(|x| x.0).collect();
    let n = p.n;
    let mut out = Vec::with_capacity(rows.len() * n);
    for (ri, &row) in rows.iter().enumerate() {
        for col in 0..n {
            let idx = ri * n + col;
            let (o0, c0) = &runnable[0];
            let first = c0[idx].to_bits();
            let witness = runnable
                .iter()
                .find(|(_, c)| c[idx].to_bits() != first)
                .map(|(o, c)| Witness {
                    left: *o0,
                    left_bits: first,
                    right: *o,
                    right_bits: c[idx].to_bits(),
                });
            out.push(ElementExactness {
                row,
                col,
                same_bytes: witness.is_none(),
                reason: prove(p, row, col, &orders),
                witness,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grain_and_span() {
        assert_eq!(grain(1.0), Some(0));
        assert_eq!(grain(0.75), Some(-2));
        assert_eq!(grain(6.0), Some(1));
        assert_eq!(span(&[1.0, 2.0, 0.5]), Some((-1, 3)));
        assert_eq!(span(&[0.0]), None);
    }
}
