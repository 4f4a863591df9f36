//! The exact arithmetic steps of an accumulation order, in integers:
//! rounding an exact value to f32 (RNE or RZ at a given precision), adding an
//! exact term to an f32 with one rounding, and the tensor-core fused sum
//! (docs/ORDERS.md, "The fused sum"). Exact values and their rounding are the
//! format layer's ([`Exact`], [`Exact::round`]); this file adds the f32 range.

pub use crate::format::Exact;
use crate::format::Rounding;

/// Final rounding of an exact value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// Nearest, ties to even; overflow gives Inf.
    Rne,
    /// Toward zero; overflow gives the largest finite value of the precision.
    Rz,
}

impl Round {
    /// The rounding direction of the format layer's reference rounding.
    pub const fn rounding(self) -> Rounding {
        match self {
            Round::Rne => Rounding::NearestEven,
            Round::Rz => Rounding::TowardZero,
        }
    }
}

/// Rounds `x` to a binary format with `frac` fraction bits and the f32
/// exponent range (emin -126, subnormals quantised at 2^(-126-frac)),
/// returned as the f32 holding that value (a zero keeps the sign of `x`).
/// The rounding is the reference one ([`Exact::round`]); only the f32
/// range (overflow to Inf, or to the largest value of the precision under
/// RZ) is decided here.
pub fn round_exact(x: Exact, frac: u32, mode: Round) -> f32 {
    let sign = |v: f32| if x.neg { -v } else { v };
    if x.mag == 0 {
        return sign(0.0);
    }
    let (m, q) = x.round(frac, -126, mode.rounding(), None);
    let top = q + (127 - m.leading_zeros() as i32);
    if m != 0 && top > 127 {
        return match mode {
            Round::Rne => sign(f32::INFINITY),
            Round::Rz => sign((((1u64 << (frac + 1)) - 1) as f64 * 2f64.powi(127 - frac as i32)) as f32),
        };
    }
    sign((m as f64 * 2f64.powi(q)) as f32)
}

/// `RN(a + t)` with a single rounding, `t` exact.
pub fn add_exact_rn(a: f32, t: Exact) -> f32 {
    if !a.is_finite() {
        return a;
    }
    let x = Exact::from_f32(a);
    if t.mag == 0 {
        return if x.mag == 0 {
            if a.is_sign_negative() && t.neg {
                -0.0
            } else {
                0.0
            }
        } else {
            a
        };
    }
    if x.mag == 0 {
        return round_exact(t, 23, Round::Rne);
    }
    let lead = |v: &Exact| (127 - v.mag.leading_zeros()) as i32 + v.exp;
    let floor = lead(&x).max(lead(&t)) - 120;
    let align = |v: &Exact| -> i128 {
        let m = if v.exp >= floor {
            v.mag << (v.exp - floor) as u32
        } else {
            let sh = (floor - v.exp) as u32;
            let kept = if sh >= 128 { 0 } else { v.mag >> sh };
            let lost = if sh >= 128 { v.mag } else { v.mag & ((1u128 << sh) - 1) };
            kept | (lost != 0) as u128 // sticky
        };
        if v.neg {
            -(m as i128)
        } else {
            m as i128
        }
    };
    let s = align(&x) + align(&t);
    if s == 0 {
        return 0.0; // exact cancellation: +0 under round-to-nearest
    }
    round_exact(
        Exact {
            neg: s < 0,
            mag: s.unsigned_abs(),
            exp: floor,
        },
        23,
        Round::Rne,
    )
}

/// One term of a fused sum: `|v| = sig * 2^(e - frac)` with nominal
/// exponent `e` (a product's `ea + eb`, C's own exponent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    pub neg: bool,
    pub sig: u64,
    pub frac: u32,
    pub e: i32,
}

/// An input decomposed for a fused sum: `x = sig * 2^(e - frac)`, with
/// zeros and values below `emin` carried at `e = emin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decomposed {
    Finite(Term),
    Inf(bool),
    Nan,
}

pub fn decompose(x: f32, emin: i32) -> Decomposed {
    let b = x.to_bits();
    let neg = b >> 31 != 0;
    let field = ((b >> 23) & 0xFF) as i32;
    let mant = (b & 0x7F_FFFF) as u64;
    if field == 0xFF {
        return if mant == 0 {
            Decomposed::Inf(neg)
        } else {
            Decomposed::Nan
        };
    }
    let (sig, ex) = if field == 0 {
        (mant, -126)
    } else {
        (mant | 1 << 23, field - 127)
    };
    if sig == 0 {
        return Decomposed::Finite(Term {
            neg,
            sig: 0,
            frac: 23,
            e: emin,
        });
    }
    if ex < emin {
        Decomposed::Finite(Term {
            neg,
            sig,
            frac: 23 + (emin - ex) as u32,
            e: emin,
        })
    } else {
        Decomposed::Finite(Term {
            neg,
            sig,
            frac: 23,
            e: ex,
        })
    }
}

/// The exact product term of two decomposed inputs, with `extra` added to
/// the nominal exponent (MX scale exponents).
pub fn product(a: Decomposed, b: Decomposed, extra: i32) -> Decomposed {
    match (a, b) {
        (Decomposed::Nan, _) | (_, Decomposed::Nan) => Decomposed::Nan,
        (Decomposed::Inf(s), Decomposed::Finite(t)) | (Decomposed::Finite(t), Decomposed::Inf(s)) => {
            if t.sig == 0 {
                Decomposed::Nan
            } else {
                Decomposed::Inf(s ^ t.neg)
            }
        }
        (Decomposed::Inf(s), Decomposed::Inf(t)) => Decomposed::Inf(s ^ t),
        (Decomposed::Finite(x), Decomposed::Finite(y)) => Decomposed::Finite(Term {
            neg: x.neg ^ y.neg,
            sig: x.sig * y.sig,
            frac: x.frac + y.frac,
            e: x.e + y.e + extra,
        }),
    }
}

/// The canonical NaN of a fused sum.
pub const FUSED_NAN: u32 = 0x7FFF_FFFF;

/// One tensor-core fused sum over `terms` = [C, products...] with `f`
/// alignment bits and `out` result fraction bits: docs/ORDERS.md, "The
/// fused sum" (the contract; every rule there is implemented here).
pub fn fused_sum(terms: &[Decomposed], f: u32, out: u32) -> f32 {
    let (mut pinf, mut ninf) = (false, false);
    for t in terms {
        match t {
            Decomposed::Nan => return f32::from_bits(FUSED_NAN),
            Decomposed::Inf(true) => ninf = true,
            Decomposed::Inf(false) => pinf = true,
            Decomposed::Finite(_) => {}
        }
    }
    if pinf && ninf {
        return f32::from_bits(FUSED_NAN);
    }
    if pinf || ninf {
        return if ninf { f32::NEG_INFINITY } else { f32::INFINITY };
    }
    // `terms[0]` is C and always takes part in the alignment (a zero C at
    // its nominal exponent); zero products (padding included) do not
    // (measured on an H200).
    let fin = terms.iter().enumerate().filter_map(|(i, t)| match t {
        Decomposed::Finite(t) if i == 0 || t.sig != 0 => Some(*t),
        _ => None,
    });
    let Some(m) = fin.clone().map(|t| t.e).max() else {
        return 0.0;
    };
    let mut s: i128 = 0;
    for t in fin {
        let sh = f as i64 + t.e as i64 - m as i64 - t.frac as i64;
        let v = if sh >= 0 {
            (t.sig as u128) << sh as u32
        } else if -sh >= 64 {
            0
        } else {
            (t.sig >> (-sh) as u32) as u128
        };
        s += if t.neg { -(v as i128) } else { v as i128 };
    }
    if s == 0 {
        return 0.0; // an integer adder has no -0
    }
    // A sum of 2^128 or more is Inf, not the largest finite value
    // (measured: the hardware does not saturate).
    let lead = 127 - s.unsigned_abs().leading_zeros() as i32 + m - f as i32;
    if lead >= 128 {
        return if s < 0 { f32::NEG_INFINITY } else { f32::INFINITY };
    }
    round_exact(
        Exact {
            neg: s < 0,
            mag: s.unsigned_abs(),
            exp: m - f as i32,
        },
        out,
        Round::Rz,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(x: f32) -> Decomposed {
        decompose(x, -126)
    }

    fn fused(pairs: &[(f32, f32)], c: f32) -> f32 {
        let mut t: Vec<Decomposed> = vec![d(c)];
        t.extend(pairs.iter().map(|&(a, b)| product(d(a), d(b), 0)));
        fused_sum(&t, 25, 23)
    }

    #[test]
    fn round_exact_matches_hardware_f32_rounding() {
        // RNE of random exact sums of two f32 equals the f32 addition
        let mut s = 99u64;
        for _ in 0..100_000 {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let a = f32::from_bits((s >> 32) as u32 & 0xBFFF_FFFF);
            let b = f32::from_bits(s as u32 & 0xBFFF_FFFF);
            if !a.is_finite() || !b.is_finite() {
                continue;
            }
            let got = add_exact_rn(a, Exact::from_f32(b));
            assert_eq!(got.to_bits(), (a + b).to_bits(), "{a:e} + {b:e}");
            // and an fma with an exact product term
            let p = Exact {
                neg: false,
                mag: Exact::from_f32(b).mag * Exact::from_f32(b).mag,
                exp: 2 * Exact::from_f32(b).exp,
            };
            let got = add_exact_rn(a, p);
            assert_eq!(got.to_bits(), b.mul_add(b, a).to_bits(), "fma {b:e} {a:e}");
        }
    }

    #[test]
    fn fasi_feature_tests_on_the_hopper_model() {
        // exact products: (1-2^-8)^2 = 1 - 2^-7 + 2^-16
        let x = 1.0 - 2f32.powi(-8);
        assert_eq!(fused(&[(x, x)], 0.0), 1.0 - 2f32.powi(-7) + 2f32.powi(-16));
        // truncation (not rounding) of the aligned addend: 2 + (2^-23 + 2^-24) -> 2
        assert_eq!(fused(&[(1.0, 2.0), (1.0, 2f32.powi(-23) + 2f32.powi(-24))], 0.0), 2.0);
        assert_eq!(
            fused(&[(-1.0, 2.0), (-1.0, 2f32.powi(-23) + 2f32.powi(-24))], 0.0),
            -2.0
        );
        // extra alignment bits: 1 - (1 - 2^-24) = 2^-24 exactly
        assert_eq!(fused(&[(1.0, 1.0), (-1.0, 1.0 - 2f32.powi(-24))], 0.0), 2f32.powi(-24));
        // four products 0.5*2^-24 plus C=1: each keeps one bit at F=25
        // (Hopper: 1 + 2^-23), none at F=24 (Ampere, Fasi et al.: exactly 1)
        assert_eq!(fused(&[(0.5, 2f32.powi(-24)); 4], 1.0), 1.0 + 2f32.powi(-23));
        let mut t = vec![d(1.0)];
        t.extend([product(d(0.5), d(2f32.powi(-24)), 0); 4]);
        assert_eq!(fused_sum(&t, 24, 23), 1.0);
        // NaN and Inf
        assert!(fused(&[(f32::INFINITY, 0.0)], 1.0).is_nan());
        assert_eq!(fused(&[(f32::INFINITY, 1.0)], 1.0), f32::INFINITY);
        assert_eq!(fused(&[(-0.0, 1.0)], -0.0).to_bits(), 0);
    }

    #[test]
    fn rz_output_precision() {
        // 1 + 2^-20 truncated to 13 fraction bits is 1
        let t = [d(0.0), product(d(1.0), d(1.0 + 2f32.powi(-20)), 0)];
        assert_eq!(fused_sum(&t, 25, 13), 1.0);
        assert_eq!(fused_sum(&t, 25, 23), 1.0 + 2f32.powi(-20));
        // a sum of 2^128 or more is Inf (H200: no saturation), with its sign
        let big = f32::MAX;
        let t = [d(big), product(d(big), d(1.0), 0)];
        assert_eq!(fused_sum(&t, 25, 23), f32::INFINITY);
        let t = [d(-big), product(d(big), d(-1.0), 0)];
        assert_eq!(fused_sum(&t, 25, 23), f32::NEG_INFINITY);
        // just below 2^128 stays finite (truncated)
        let t = [d(big), product(d(0.0), d(1.0), 0)];
        assert_eq!(fused_sum(&t, 25, 13), f32::from_bits(0x7F7F_FC00));
    }

    #[test]
    fn zero_products_take_no_part_in_the_alignment() {
        // f16 inputs (emin -14): C = 2^-3 (M = -3); the product
        // 2^-13 * (1 + 2^-10) 2^-13 keeps its 2^-26 bit; a zero product
        // 0 * 2^15 carries the nominal exponent -14 + 15 = 1 and, if it took
        // part, would truncate that bit away (H200: it does not).
        let d16 = |x: f32| decompose(x, -14);
        let t = [
            decompose(0.125, -126),
            product(d16(2f32.powi(-13)), d16((1.0 + 2f32.powi(-10)) * 2f32.powi(-13)), 0),
            product(d16(0.0), d16(2f32.powi(15)), 0),
        ];
        assert_eq!(fused_sum(&t, 25, 23), 0.125 + 2f32.powi(-26));
        // a zero C does take part (at -126): eight products of 2^-152 are
        // truncated away (0), where alignment at -152 would give 2^-149
        let p = product(d(2f32.powi(-76)), d(2f32.powi(-76)), 0);
        let mut t = vec![d(0.0)];
        t.extend([p; 8]);
        assert_eq!(fused_sum(&t, 25, 23).to_bits(), 0);
        assert_eq!(fused_sum(&t[1..], 25, 23), f32::from_bits(1), "without C, M = -152");
    }
}
