//! A problem's operands read by position: the pair of operands as f32
//! values or as MX codes with scales, where A's element (i, k) and B's
//! element (k, j) sit in their slices (B in its layout), the E8M0 scale of
//! the block holding each, and each element's exact value.
//!
//! # Contract
//! - A is `[M, K]` row-major; B is `[K, N]` (`kn`) or `[N, K]` (`nk`); MX
//!   scales have one byte per 32 elements along K: A's `[M, K/32]`, B's
//!   `[K/32, N]` (`kn`) or `[N, K/32]` (`nk`), as [`super::Matrix`] says.
//! - Indices are not checked against the slices (the caller checked the
//!   shapes, e.g. with [`super::check_operands`]); an index out of range
//!   panics where the slice is read.
//! - Values are exact: an f32 widened, or an MX code's value times
//!   2^(scale - 127) ([`crate::format::e8m0_exponent`]); a NaN scale (0xFF)
//!   gives NaN.

use super::{BLayout, Matrix, Problem, MX_BLOCK};
use crate::format::{e8m0_exponent, pow2};
use crate::mx::MxFormat;

/// One MX operand: codes, E8M0 scales and the format.
#[derive(Clone, Copy, Debug)]
pub struct MxOperand<'a> {
    pub codes: &'a [u8],
    pub scales: &'a [u8],
    pub format: MxFormat,
}

impl<'a> MxOperand<'a> {
    /// The exact value of the code at `at` under the scale at `scale_at`.
    fn value(&self, at: usize, scale_at: usize) -> f64 {
        let s = self.scales[scale_at];
        if s == 0xFF {
            return f64::NAN;
        }
        self.format.element().decode_f64(self.codes[at] as u16) * pow2(e8m0_exponent(s))
    }
}

impl<'a> Problem<'a> {
    /// A and B as f32 values, when both are.
    pub fn f32_operands(&self) -> Option<(&'a [f32], &'a [f32])> {
        match (self.a, self.b) {
            (Matrix::F32(a), Matrix::F32(b)) => Some((a, b)),
            _ => None,
        }
    }

    /// A and B as MX codes with scales, when both are.
    pub fn mx_operands(&self) -> Option<(MxOperand<'a>, MxOperand<'a>)> {
        let mx = |m: Matrix<'a>| match m {
            Matrix::Mx { codes, scales, format } => Some(MxOperand { codes, scales, format }),
            Matrix::F32(_) => None,
        };
        Some((mx(self.a)?, mx(self.b)?))
    }

    /// Where A's element (i, kk) sits in A's slice.
    pub fn a_index(&self, i: usize, kk: usize) -> usize {
        i * self.k + kk
    }

    /// Where B's element (kk, j) sits in B's slice, in B's layout.
    pub fn b_index(&self, kk: usize, j: usize) -> usize {
        match self.b_layout {
            BLayout::Kn => kk * self.n + j,
            BLayout::Nk => j * self.k + kk,
        }
    }

    /// Where the scale of A's K-block `blk` of row i sits in A's scales.
    pub fn a_scale_index(&self, i: usize, blk: usize) -> usize {
        i * (self.k / MX_BLOCK) + blk
    }

    /// Where the scale of B's K-block `blk` of column j sits in B's
    /// scales, in B's layout.
    pub fn b_scale_index(&self, blk: usize, j: usize) -> usize {
        match self.b_layout {
            BLayout::Kn => blk * self.n + j,
            BLayout::Nk => j * (self.k / MX_BLOCK) + blk,
        }
    }

    /// The E8M0 scale byte of A's element (i, kk) (None: f32 values).
    pub fn a_scale(&self, i: usize, kk: usize) -> Option<u8> {
        match self.a {
            Matrix::Mx { scales, .. } => Some(scales[self.a_scale_index(i, kk / MX_BLOCK)]),
            Matrix::F32(_) => None,
        }
    }

    /// The E8M0 scale byte of B's element (kk, j) (None: f32 values).
    pub fn b_scale(&self, kk: usize, j: usize) -> Option<u8> {
        match self.b {
            Matrix::Mx { scales, .. } => Some(scales[self.b_scale_index(kk / MX_BLOCK, j)]),
            Matrix::F32(_) => None,
        }
    }

    /// The exact value of A's element (i, kk).
    pub fn a_value(&self, i: usize, kk: usize) -> f64 {
        let at = self.a_index(i, kk);
        match self.a {
            Matrix::F32(a) => a[at] as f64,
            Matrix::Mx { codes, scales, format } => {
                MxOperand { codes, scales, format }.value(at, self.a_scale_index(i, kk / MX_BLOCK))
            }
        }
    }

    /// The exact value of B's element (kk, j).
    pub fn b_value(&self, kk: usize, j: usize) -> f64 {
        let at = self.b_index(kk, j);
        match self.b {
            Matrix::F32(b) => b[at] as f64,
            Matrix::Mx { codes, scales, format } => {
                MxOperand { codes, scales, format }.value(at, self.b_scale_index(kk / MX_BLOCK, j))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_and_scales_follow_the_layout() {
        // K = 64 (two blocks), N = 2; B[k, j] = k + 100 j
        let (k, n) = (64, 2);
        let kn: Vec<f32> = (0..k * n).map(|i| ((i / n) + 100 * (i % n)) as f32).collect();
        let nk: Vec<f32> = (0..n * k).map(|i| ((i % k) + 100 * (i / k)) as f32).collect();
        let a = vec![0f32; k];
        for (b, layout) in [(&kn, BLayout::Kn), (&nk, BLayout::Nk)] {
            let p = Problem {
                a: Matrix::F32(&a),
                b: Matrix::F32(b),
                m: 1,
                n,
                k,
                b_layout: layout,
            };
            for kk in [0, 1, 33, 63] {
                for j in 0..n {
                    assert_eq!(p.b_value(kk, j), (kk + 100 * j) as f64, "{layout:?} {kk} {j}");
                }
            }
            assert!(p.mx_operands().is_none() && p.f32_operands().is_some());
            assert_eq!(p.b_scale(0, 0), None);
        }
        // MX: B scales [K/32, N] (kn) hold 127 + blk + 2 j; e4m3 code 0x38 is 1.0
        let f = MxFormat::Fp8E4M3;
        let codes = vec![0x38u8; k * n];
        let sb: Vec<u8> = (0..2 * n).map(|i| (127 + i / n + 2 * (i % n)) as u8).collect();
        let sa = vec![126u8, 0xFF];
        let ca = vec![0x38u8; k];
        let p = Problem {
            a: Matrix::Mx {
                codes: &ca,
                scales: &sa,
                format: f,
            },
            b: Matrix::Mx {
                codes: &codes,
                scales: &sb,
                format: f,
            },
            m: 1,
            n,
            k,
            b_layout: BLayout::Kn,
        };
        assert_eq!(p.b_value(40, 1), 8.0); // 2^(1 + 2)
        assert_eq!(p.b_scale(40, 1), Some(130));
        assert_eq!(p.a_value(0, 5), 0.5);
        assert!(p.a_value(0, 40).is_nan());
        assert!(p.mx_operands().is_some() && p.f32_operands().is_none());
    }
}
