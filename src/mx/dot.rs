//! The exact dot product of two MX blocks: `X_a * X_b * sum_i P_a[i] * P_b[i]`
//! as an integer times a power of two. No rounding happens here; how block
//! dots are accumulated (order, precision) is the accumulation model's job.
//!
//! Every element of an MX element format is an integer multiple of the
//! format's subnormal quantum (E4M3 2^-9, E5M2 2^-16, E3M2 2^-4, E2M3 2^-3,
//! E2M1 2^-1, INT8 2^-6), so the block sum is an integer multiple of
//! `2^(qa + qb)`. E4M3 x E4M3 over 32 elements needs about 41 bits, E5M2 x
//! E5M2 about 69 bits; the sum is kept in an `i128`, which holds any block
//! of up to 2^60 elements of any pair of these formats.

use crate::format::{e8m0_exponent, Exact, Format};

/// Exact value of a block dot product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockDot {
    /// `sum * 2^exp`.
    Finite {
        sum: i128,
        exp: i32,
    },
    Inf {
        negative: bool,
    },
    Nan,
}

impl BlockDot {
    /// The value as f64: the reference rounding ([`Exact::to_f64`],
    /// nearest-even when `sum` needs more than 53 bits; exact otherwise).
    pub fn to_f64(self) -> f64 {
        match self {
            BlockDot::Finite { sum, exp } => Exact::from_i128(sum, exp).to_f64(),
            BlockDot::Inf { negative } => {
                if negative {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
            BlockDot::Nan => f64::NAN,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DotError {
    #[error("block lengths differ: {0} vs {1}")]
    Length(usize, usize),
    #[error("{0} is not an MX element format")]
    NotElement(Format),
}

/// Element as (integer multiple of the quantum) or a special.
enum Elem {
    Int(i64),
    Inf(bool),
    Nan,
}

fn quantum_exp(f: Format) -> Result<i32, DotError> {
    match f {
        Format::Int8 => Ok(-6),
        Format::E4M3 | Format::E5M2 | Format::E3M2 | Format::E2M3 | Format::E2M1 => {
            let m = f.minifloat().unwrap();
            Ok(m.emin() - m.mbits as i32)
        }
        other => Err(DotError::NotElement(other)),
    }
}

fn elem(f: Format, code: u8, q: i32) -> Elem {
    if f == Format::Int8 {
        return Elem::Int(code as i8 as i64);
    }
    let m = f.minifloat().unwrap();
    let c = code as u16 & ((1u16 << m.bits()) - 1);
    if m.is_nan_code(c) {
        return Elem::Nan;
    }
    if m.is_inf_code(c) {
        return Elem::Inf(c & m.sign_mask() != 0);
    }
    let (neg, sig, e) = m.decode_parts(c).unwrap();
    let k = (sig as i64) << (e - q);
    Elem::Int(if neg { -k } else { k })
}

/// Exact dot product of block `a` (format `fa`, scale byte `sa`) and block
/// `b`. NaN if either scale is 0xFF or any product is NaN (NaN element,
/// Inf x 0, or Inf - Inf).
pub fn block_dot(a: &[u8], sa: u8, fa: Format, b: &[u8], sb: u8, fb: Format) -> Result<BlockDot, DotError> {
    if a.len() != b.len() {
        return Err(DotError::Length(a.len(), b.len()));
    }
    let (qa, qb) = (quantum_exp(fa)?, quantum_exp(fb)?);
    if sa == 0xFF || sb == 0xFF {
        return Ok(BlockDot::Nan);
    }
    let mut sum: i128 = 0;
    let (mut pos_inf, mut neg_inf, mut nan) = (false, false, false);
    for (&x, &y) in a.iter().zip(b) {
        match (elem(fa, x, qa), elem(fb, y, qb)) {
            (Elem::Int(i), Elem::Int(j)) => sum += i as i128 * j as i128,
            (Elem::Nan, _) | (_, Elem::Nan) => nan = true,
            (Elem::Inf(s), Elem::Int(k)) | (Elem::Int(k), Elem::Inf(s)) => {
                if k == 0 {
                    nan = true
                } else if s ^ (k < 0) {
                    neg_inf = true
                } else {
                    pos_inf = true
                }
            }
            (Elem::Inf(s), Elem::Inf(t)) => {
                if s ^ t {
                    neg_inf = true
                } else {
                    pos_inf = true
                }
            }
        }
    }
    if nan || (pos_inf && neg_inf) {
        return Ok(BlockDot::Nan);
    }
    if pos_inf || neg_inf {
        return Ok(BlockDot::Inf { negative: neg_inf });
    }
    Ok(BlockDot::Finite {
        sum,
        exp: qa + qb + e8m0_exponent(sa) + e8m0_exponent(sb),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extremes_fit_and_are_exact() {
        // 32 x (max * max) for E5M2: 32 * 57344^2 = 2^5 * (1.75 * 2^15)^2.
        let a = [0x7Bu8; 32];
        let d = block_dot(&a, 127, Format::E5M2, &a, 127, Format::E5M2).unwrap();
        assert_eq!(d.to_f64(), 32.0 * 57344.0 * 57344.0);
        // min subnormal squared in E4M3 with the smallest scales: 2^-18 * 2^-254.
        let a = [0x01u8; 1];
        let d = block_dot(&a, 0, Format::E4M3, &a, 0, Format::E4M3).unwrap();
        assert_eq!(d, BlockDot::Finite { sum: 1, exp: -18 - 254 });
        // mixed formats and signs
        let d = block_dot(&[0x38, 0xB8], 127, Format::E4M3, &[0x3C, 0x3C], 128, Format::E5M2).unwrap();
        assert_eq!(d.to_f64(), 0.0);
        // int8: (-2) * (127/64)
        let d = block_dot(&[0x80], 127, Format::Int8, &[0x7F], 127, Format::Int8).unwrap();
        assert_eq!(d.to_f64(), -2.0 * 127.0 / 64.0);
    }

    #[test]
    fn specials() {
        assert_eq!(
            block_dot(&[0x38], 0xFF, Format::E4M3, &[0x38], 127, Format::E4M3).unwrap(),
            BlockDot::Nan
        );
        assert_eq!(
            block_dot(&[0x7F], 127, Format::E4M3, &[0x38], 127, Format::E4M3).unwrap(),
            BlockDot::Nan
        );
        assert_eq!(
            block_dot(&[0x7C], 127, Format::E5M2, &[0x00], 127, Format::E5M2).unwrap(),
            BlockDot::Nan
        );
        assert_eq!(
            block_dot(&[0x7C, 0x3C], 127, Format::E5M2, &[0xBC, 0x3C], 127, Format::E5M2).unwrap(),
            BlockDot::Inf { negative: true }
        );
        assert!(block_dot(&[1], 127, Format::BF16, &[1], 127, Format::E4M3).is_err());
        assert!(block_dot(&[1, 2], 127, Format::E4M3, &[1], 127, Format::E4M3).is_err());
    }
}
