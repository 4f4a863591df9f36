//! The golden: the exact result of an op where exactness is cheap, the
//! nearest f64 to it, and a stated bound on the golden's own error.
//!
//! * GEMM on f32, bf16, f16 or FP8 values, and on MX codes with E8M0 scales
//!   (any accumulation order computes the same mathematical value): every
//!   product is exact (an f32 product has at most 48 significant bits and
//!   is a multiple of 2^-298; an MX block dot is [`crate::mx::block_dot`],
//!   a multiple of 2^-286), and their sum is kept exactly in [`ExactSum`],
//!   a fixed-point accumulator from 2^-300 to 2^468. The golden value is
//!   that sum rounded once to f64 ([`Bound::Exact`]: at most half an f64
//!   ulp, relative 2^-53), and the golden rounded to an output type is the
//!   exact sum rounded once ([`round_to`]), never through f64.
//! * The op models that compute a GEMM (reduce-scatter, all-reduce,
//!   all-gather, MoE experts) have the GEMM's golden: they change the
//!   order of the sum, not its value.
//! * RMSNorm needs a square root and a division: [`rms_norm`] computes the
//!   sum of squares exactly and the rest in f64 ([`Bound::Relative`]).
//! * A golden read from a file is the user's ([`Bound::Given`]): its error
//!   is unknown here, and rounding it to an output type may round twice.
//!
//! Beside every exact golden element the absolute sum `sum |a_k b_k|` is
//! kept (in f64: each product is exact in f64 and the sum of K positive
//! terms is within relative `(K-1) 2^-53`), for the cancellation
//! diagnostic of [`super::ulp`].

use crate::format::{e8m0_exponent, encode_input, pow2, CastPolicy, Format, Input};
use crate::gemm::step::{round_exact, Exact, Round};
use crate::gemm::{GemmError, Problem, MX_BLOCK};
use crate::io::DType;
use crate::mx::{block_dot, BlockDot};
use rayon::prelude::*;

/// 64-bit limbs of the accumulator.
const LIMBS: usize = 12;
/// Exponent of the accumulator's least significant bit.
pub const LSB_EXP: i32 = -300;
/// Exponent one above the accumulator's most significant bit.
pub const TOP_EXP: i32 = LSB_EXP + 64 * LIMBS as i32;

/// What is known about a golden's own error.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Bound {
    /// The exact result is known; the f64 values are within half an f64
    /// ulp of it, and roundings to an output type are single roundings
    /// of the exact value.
    Exact,
    /// Each f64 value is within `rel * |exact|` of the exact result.
    Relative { rel: f64 },
    /// Read from a file: the error is the producer's, unknown here.
    Given,
}

/// An exact sum of exact terms: two unsigned fixed-point magnitudes (the
/// positive and the negative terms) with the least significant bit at
/// 2^[`LSB_EXP`], plus the specials seen. Adding is exact for every term
/// that lies within [2^LSB_EXP, 2^TOP_EXP); the sum of up to 2^60 terms
/// below 2^(TOP_EXP - 61) cannot overflow.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExactSum {
    pos: [u64; LIMBS],
    neg: [u64; LIMBS],
    nan: bool,
    pos_inf: bool,
    neg_inf: bool,
}

/// A term outside the accumulator's range (cannot happen for f32 products
/// or MX block dots; reported instead of rounded).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("term {mag} * 2^{exp} lies outside the exact accumulator [2^{LSB_EXP}, 2^{TOP_EXP})")]
pub struct OutOfRange {
    pub mag: u128,
    pub exp: i32,
}

impl ExactSum {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `(-1)^neg * mag * 2^exp` exactly. The term must lie within
    /// [2^LSB_EXP, 2^(TOP_EXP - 64)), which leaves room for 2^63 terms.
    pub fn add(&mut self, neg: bool, mag: u128, exp: i32) -> Result<(), OutOfRange> {
        if mag == 0 {
            return Ok(());
        }
        let bits = 128 - mag.leading_zeros() as i32;
        if exp < LSB_EXP || exp + bits > TOP_EXP - 64 {
            return Err(OutOfRange { mag, exp });
        }
        let off = (exp - LSB_EXP) as usize;
        let (limb, sh) = (off / 64, (off % 64) as u32);
        // mag << sh spans at most three limbs
        let parts = [
            (mag << sh) as u64,
            ((mag << sh) >> 64) as u64,
            if sh == 0 { 0 } else { (mag >> (128 - sh)) as u64 },
        ];
        let acc = if neg { &mut self.neg } else { &mut self.pos };
        let mut carry = false;
        let mut i = 0;
        while limb + i < LIMBS && (i < 3 || carry) {
            let part = if i < 3 { parts[i] } else { 0 };
            let (s1, c1) = acc[limb + i].overflowing_add(part);
            let (s2, c2) = s1.overflowing_add(carry as u64);
            acc[limb + i] = s2;
            carry = c1 || c2;
            i += 1;
        }
        debug_assert!(!carry, "the headroom bounds the number of terms");
        Ok(())
    }

    /// Adds the exact product of two exactly decomposed values (IEEE
    /// specials: NaN, Inf x 0 = NaN, Inf x nonzero = signed Inf).
    pub fn add_product(&mut self, a: Input, b: Input) -> Result<(), OutOfRange> {
        let special = |x: &Input| matches!(x, Input::Inf { .. } | Input::Nan { .. });
        match (a, b) {
            (
                Input::Finite {
                    negative: s,
                    sig: x,
                    exp: e,
                },
                Input::Finite {
                    negative: t,
                    sig: y,
                    exp: f,
                },
            ) => {
                // trailing zeros dropped, each significand has at most 64 bits
                let (tx, ty) = (x.trailing_zeros(), y.trailing_zeros());
                let p = (x >> tx) as u128 * (y >> ty) as u128;
                self.add(s ^ t, p, e + f + (tx + ty) as i32)
            }
            (Input::Nan { .. }, _) | (_, Input::Nan { .. }) => self.add_input(NAN),
            (Input::Inf { .. }, Input::Zero { .. }) | (Input::Zero { .. }, Input::Inf { .. }) => self.add_input(NAN),
            (x, y) if special(&x) || special(&y) => self.add_input(Input::Inf {
                negative: sign(&x) ^ sign(&y),
            }),
            _ => Ok(()), // a zero product
        }
    }

    /// Adds an exactly decomposed value.
    pub fn add_input(&mut self, x: Input) -> Result<(), OutOfRange> {
        match x {
            Input::Zero { .. } => Ok(()),
            Input::Finite { negative, sig, exp } => self.add(negative, sig as u128, exp),
            Input::Inf { negative } => {
                if negative {
                    self.neg_inf = true
                } else {
                    self.pos_inf = true
                }
                Ok(())
            }
            Input::Nan { .. } => {
                self.nan = true;
                Ok(())
            }
        }
    }

    /// Adds the exact product `a * b` of two f32 values.
    pub fn add_product_f32(&mut self, a: f32, b: f32) -> Result<(), OutOfRange> {
        self.add_product(Input::from_f32(a), Input::from_f32(b))
    }

    /// Adds an exact MX block dot.
    pub fn add_block(&mut self, d: BlockDot) -> Result<(), OutOfRange> {
        match d {
            BlockDot::Finite { sum, exp } => self.add(sum < 0, sum.unsigned_abs(), exp),
            BlockDot::Inf { negative } => self.add_input(Input::Inf { negative }),
            BlockDot::Nan => self.add_input(NAN),
        }
    }

    /// The exact sum as an [`Input`] whose significand keeps the top 63
    /// bits of the magnitude and ORs every lower bit into its last bit (a
    /// sticky bit): rounding it to any precision of at most 61 bits gives
    /// the same result as rounding the exact sum. An exact zero is +0;
    /// +Inf and -Inf together, or any NaN, give NaN.
    pub fn value(&self) -> Input {
        if self.nan || (self.pos_inf && self.neg_inf) {
            return NAN;
        }
        if self.pos_inf || self.neg_inf {
            return Input::Inf { negative: self.neg_inf };
        }
        let (negative, mag) = match cmp_limbs(&self.pos, &self.neg) {
            std::cmp::Ordering::Equal => return Input::Zero { negative: false },
            std::cmp::Ordering::Greater => (false, sub_limbs(&self.pos, &self.neg)),
            std::cmp::Ordering::Less => (true, sub_limbs(&self.neg, &self.pos)),
        };
        let top_limb = (0..LIMBS).rev().find(|&i| mag[i] != 0).expect("nonzero");
        let top_bit = top_limb as i32 * 64 + 63 - mag[top_limb].leading_zeros() as i32;
        // window of 63 bits ending at top_bit (bit positions top_bit-62 ..= top_bit)
        let low = top_bit - 62;
        let bit = |p: i32| -> u64 {
            if p < 0 {
                0
            } else {
                (mag[(p / 64) as usize] >> (p % 64)) & 1
            }
        };
        let mut sig = 0u64;
        for p in (low..=top_bit).rev() {
            sig = sig << 1 | bit(p);
        }
        let sticky = low > 0 && {
            let full = (low / 64) as usize;
            mag[..full].iter().any(|&l| l != 0) || mag[full] & ((1u64 << (low % 64)) - 1) != 0
        };
        Input::Finite {
            negative,
            sig: sig | sticky as u64,
            exp: low + LSB_EXP,
        }
    }
}

fn cmp_limbs(a: &[u64; LIMBS], b: &[u64; LIMBS]) -> std::cmp::Ordering {
    for i in (0..LIMBS).rev() {
        match a[i].cmp(&b[i]) {
            std::cmp::Ordering::Equal => continue,
            o => return o,
        }
    }
    std::cmp::Ordering::Equal
}

/// `a - b` for `a >= b`.
fn sub_limbs(a: &[u64; LIMBS], b: &[u64; LIMBS]) -> [u64; LIMBS] {
    let mut out = [0u64; LIMBS];
    let mut borrow = false;
    for i in 0..LIMBS {
        let (d1, b1) = a[i].overflowing_sub(b[i]);
        let (d2, b2) = d1.overflowing_sub(borrow as u64);
        out[i] = d2;
        borrow = b1 || b2;
    }
    out
}

/// The quiet NaN of a golden.
const NAN: Input = Input::Nan {
    negative: false,
    payload: 1 << 63,
};

fn sign(x: &Input) -> bool {
    match *x {
        Input::Zero { negative }
        | Input::Finite { negative, .. }
        | Input::Inf { negative }
        | Input::Nan { negative, .. } => negative,
    }
}

/// The product of two FP8 (or any element-format) codes, exact: each
/// value has at most 11 significant bits and an exponent within f64's.
pub fn fp8_product(ca: u16, fa: Format, cb: u16, fb: Format) -> f64 {
    fa.decode_f64(ca) * fb.decode_f64(cb)
}

/// Rounds an exact value once to an output type (nearest-even; overflow
/// gives Inf, or NaN for E4M3, which has no Inf), returned as the f64 that
/// holds the rounded value. Types: f64, f32, bf16, f16, FP8 E4M3/E5M2.
pub fn round_to(x: Input, dtype: DType) -> Result<f64, String> {
    match dtype {
        DType::F64 => Ok(round_f64(x)),
        DType::F32 => Ok(match x {
            Input::Finite { negative, sig, exp } => round_exact(
                Exact {
                    neg: negative,
                    mag: sig as u128,
                    exp,
                },
                23,
                Round::Rne,
            ) as f64,
            other => other.value(),
        }),
        _ => {
            let f = element_format(dtype)?;
            let code = encode_input(x, f, &CastPolicy::ieee(f), 0).map_err(|e| e.to_string())?;
            Ok(f.decode_f64(code))
        }
    }
}

/// The element format of a narrow output type.
pub fn element_format(dtype: DType) -> Result<Format, String> {
    Ok(match dtype {
        DType::BF16 => Format::BF16,
        DType::F16 => Format::F16,
        DType::F8E4M3 => Format::E4M3,
        DType::F8E5M2 => Format::E5M2,
        d => {
            return Err(format!(
                "{} is not an output type the accuracy verdicts know (f64, f32, bf16, f16, e4m3, e5m2)",
                d.name()
            ))
        }
    })
}

/// Nearest-even rounding to f64 (subnormals and overflow to Inf included).
fn round_f64(x: Input) -> f64 {
    let Input::Finite { negative, sig, exp } = x else {
        return x.value();
    };
    let lead = exp + 63 - sig.leading_zeros() as i32;
    let q = (lead - 52).max(-1074);
    let m = round_sig(sig, exp, q);
    let top = q + 63 - m.leading_zeros() as i32;
    let v = if top > 1023 {
        f64::INFINITY
    } else if q > 1023 - 52 {
        // m < 2^53 and the value is finite: scale in two steps
        m as f64 * pow2(q - 52) * pow2(52)
    } else {
        m as f64 * pow2(q)
    };
    if negative {
        -v
    } else {
        v
    }
}

/// `sig * 2^exp` rounded (nearest-even) to a multiple of `2^q`, in units of `2^q`.
fn round_sig(sig: u64, exp: i32, q: i32) -> u64 {
    let shift = q as i64 - exp as i64;
    if shift <= 0 {
        // the caller's q keeps at most 53 significant bits: no overflow
        return sig << (-shift) as u32;
    }
    if shift > 64 {
        return 0;
    }
    if shift == 64 {
        return (sig > 1 << 63) as u64;
    }
    let kept = sig >> shift;
    let rem = sig & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    kept + (rem > half || (rem == half && kept & 1 == 1)) as u64
}

/// The golden of a computation with one value per output element.
#[derive(Clone, Debug, PartialEq)]
pub struct Golden {
    /// The golden values (f64).
    pub values: Vec<f64>,
    /// The exact results where known (for single roundings to an output
    /// type), one per element.
    pub exact: Option<Vec<Input>>,
    /// `sum |a_k b_k|` per element where known (the cancellation diagnostic).
    pub abs_sum: Option<Vec<f64>>,
    pub bound: Bound,
}

impl Golden {
    /// A golden read from a file ([`Bound::Given`]).
    pub fn given(values: Vec<f64>) -> Golden {
        Golden {
            values,
            exact: None,
            abs_sum: None,
            bound: Bound::Given,
        }
    }

    /// Golden values rounded to `dtype`: single roundings of the exact
    /// results when known, else roundings of the f64 values.
    pub fn rounded(&self, dtype: DType) -> Result<Vec<f64>, String> {
        match &self.exact {
            Some(x) => x.iter().map(|&v| round_to(v, dtype)).collect(),
            None => self
                .values
                .iter()
                .map(|&v| round_to(Input::from_f64(v), dtype))
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// The exact dot product of two f32 vectors, with `sum |a_k b_k|`.
pub fn dot_f32(a: &[f32], b: &[f32]) -> (Input, f64) {
    let mut s = ExactSum::new();
    let mut abs = 0f64;
    for (&x, &y) in a.iter().zip(b) {
        s.add_product_f32(x, y)
            .expect("f32 products lie within the accumulator");
        abs += (x as f64 * y as f64).abs();
    }
    (s.value(), abs)
}

/// The exact GEMM `C = A x B` of a problem (f32 values or MX codes with
/// scales), row-major `[M, N]`: [`Bound::Exact`].
pub fn gemm(p: &Problem) -> Result<Golden, GemmError> {
    let (m, n, k) = (p.m, p.n, p.k);
    crate::limits::check_elements("the golden C", &[m, n]).map_err(GemmError::Limit)?;
    crate::gemm::check_operands(p)?;
    let cells: Vec<(Input, f64)> = match (p.f32_operands(), p.mx_operands()) {
        (Some((a, b)), _) => (0..m * n)
            .into_par_iter()
            .map(|c| {
                let (i, j) = (c / n, c % n);
                let mut s = ExactSum::new();
                let mut abs = 0f64;
                for kk in 0..k {
                    let (x, y) = (a[p.a_index(i, kk)], b[p.b_index(kk, j)]);
                    s.add_product_f32(x, y)
                        .expect("f32 products lie within the accumulator");
                    abs += (x as f64 * y as f64).abs();
                }
                (s.value(), abs)
            })
            .collect(),
        (None, Some((a, b))) => {
            let kb = k / MX_BLOCK;
            let (ea, eb) = (a.format.element(), b.format.element());
            (0..m * n)
                .into_par_iter()
                .map(|c| -> Result<(Input, f64), GemmError> {
                    let (i, j) = (c / n, c % n);
                    let mut s = ExactSum::new();
                    let mut abs = 0f64;
                    let mut bblock = [0u8; MX_BLOCK];
                    for blk in 0..kb {
                        let at = p.a_index(i, blk * MX_BLOCK);
                        let ablock = &a.codes[at..at + MX_BLOCK];
                        for (t, v) in bblock.iter_mut().enumerate() {
                            *v = b.codes[p.b_index(blk * MX_BLOCK + t, j)];
                        }
                        let (sai, sbj) = (a.scales[p.a_scale_index(i, blk)], b.scales[p.b_scale_index(blk, j)]);
                        let d = block_dot(ablock, sai, ea, &bblock, sbj, eb)
                            .map_err(|e| GemmError::Unsupported(e.to_string()))?;
                        s.add_block(d).expect("MX block dots lie within the accumulator");
                        let scale =
                            (sai != 0xFF && sbj != 0xFF).then(|| pow2(e8m0_exponent(sai)) * pow2(e8m0_exponent(sbj)));
                        for (&x, &y) in ablock.iter().zip(&bblock) {
                            let pr = (ea.decode_f64(x as u16) * eb.decode_f64(y as u16)).abs();
                            abs += pr * scale.unwrap_or(f64::NAN);
                        }
                    }
                    Ok((s.value(), abs))
                })
                .collect::<Result<_, _>>()?
        }
        _ => {
            return Err(GemmError::Unsupported(
                "A and B must both be MX or both be plain values".into(),
            ))
        }
    };
    let (exact, abs_sum): (Vec<Input>, Vec<f64>) = cells.into_iter().unzip();
    Ok(Golden {
        values: exact.iter().map(|&x| round_f64(x)).collect(),
        exact: Some(exact),
        abs_sum: Some(abs_sum),
        bound: Bound::Exact,
    })
}

/// Relative error bound of [`rms_norm`]'s f64 steps (see there).
pub const RMS_NORM_REL: f64 = 6.0 * 1.1102230246251565e-16;

/// RMSNorm `y = x * (1 / sqrt(sum(x^2) / H + eps)) * w` over rows of
/// length `h`: the sum of squares exact, rounded once to f64, then six f64
/// operations (divide, add, square root, reciprocal, two multiplies), each
/// within relative 2^-53 (the square root halves its input's error), so
/// every value is within relative 6 * 2^-53 (plus second-order terms) of
/// the exact result: [`Bound::Relative`] with [`RMS_NORM_REL`].
pub fn rms_norm(x: &[f32], h: usize, w: &[f32], eps: f32) -> Result<Golden, String> {
    if h == 0 || !x.len().is_multiple_of(h) || w.len() != h {
        return Err(format!(
            "rms_norm: x has {} elements, weight {}, H = {h}: x must be [M, H] and weight [H]",
            x.len(),
            w.len()
        ));
    }
    let values = x
        .par_chunks(h)
        .flat_map_iter(|row| {
            let (ss, _) = dot_f32(row, row);
            let mean = round_f64(ss) / h as f64;
            let r = 1.0 / (mean + eps as f64).sqrt();
            row.iter().zip(w).map(move |(&v, &g)| v as f64 * r * g as f64)
        })
        .collect();
    Ok(Golden {
        values,
        exact: None,
        abs_sum: None,
        bound: Bound::Relative { rel: RMS_NORM_REL },
    })
}
