//! GEMM operands and outputs as `ndarray` arrays, the tensor type at the
//! library's edges (tensors read with [`crate::io`], numpy arrays).
//!
//! # Contract
//! * M, N and K are taken from the operands' shapes: A is `[M, K]`, B is
//!   `[K, N]` ([`BLayout::Kn`]) or `[N, K]` ([`BLayout::Nk`]); MX scales are
//!   `[M, K/32]` for A and `[K/32, N]` or `[N, K/32]` for B. Shapes that do
//!   not agree are a [`GemmError::Shape`] naming both, never a problem whose
//!   flat lengths happen to match.
//! * Operands are borrowed, not copied, so they must be in standard
//!   (row-major, contiguous) layout; another layout is a
//!   [`GemmError::Shape`] (`as_standard_layout()` makes one).
//! * The output is C, `[rows, N]`, the same values as [`gemm`].

use ndarray::{Array2, ArrayView2};

use super::{gemm, BLayout, GemmError, Matrix, Problem, MX_BLOCK};
use crate::mx::MxFormat;
use crate::order::Order;

/// One MX operand: element codes and E8M0 block scales.
#[derive(Clone, Copy, Debug)]
pub struct MxArrays<'a> {
    pub codes: ArrayView2<'a, u8>,
    pub scales: ArrayView2<'a, u8>,
    pub format: MxFormat,
}

impl<'a> Problem<'a> {
    /// A problem of plain f32 operands (see the module doc for the shapes).
    pub fn from_arrays<'x: 'a, 'y: 'a>(
        a: ArrayView2<'x, f32>,
        b: ArrayView2<'y, f32>,
        b_layout: BLayout,
    ) -> Result<Problem<'a>, GemmError> {
        let (m, n, k) = dims(a.dim(), b.dim(), b_layout)?;
        Ok(Problem {
            a: Matrix::F32(slice("A", a)?),
            b: Matrix::F32(slice("B", b)?),
            m,
            n,
            k,
            b_layout,
        })
    }

    /// A problem of MX operands (see the module doc for the shapes).
    pub fn from_mx_arrays<'x: 'a, 'y: 'a>(
        a: MxArrays<'x>,
        b: MxArrays<'y>,
        b_layout: BLayout,
    ) -> Result<Problem<'a>, GemmError> {
        let (m, n, k) = dims(a.codes.dim(), b.codes.dim(), b_layout)?;
        if !k.is_multiple_of(MX_BLOCK) {
            return Err(GemmError::Shape(format!(
                "K = {k} is not a multiple of the MX block ({MX_BLOCK})"
            )));
        }
        let kb = k / MX_BLOCK;
        let b_scales = match b_layout {
            BLayout::Kn => (kb, n),
            BLayout::Nk => (n, kb),
        };
        for (what, got, want) in [("A", a.scales.dim(), (m, kb)), ("B", b.scales.dim(), b_scales)] {
            if got != want {
                return Err(GemmError::Shape(format!(
                    "{what} scales are {}, expected {} (one per {MX_BLOCK} elements along K = {k})",
                    show(got),
                    show(want)
                )));
            }
        }
        Ok(Problem {
            a: mx_matrix("A", a)?,
            b: mx_matrix("B", b)?,
            m,
            n,
            k,
            b_layout,
        })
    }
}

/// The selected rows (all when `rows` is None) of C as an array
/// `[rows, N]`: [`gemm`]'s values.
pub fn gemm_array(order: &Order, p: &Problem, rows: Option<&[usize]>) -> Result<Array2<f32>, GemmError> {
    let c = gemm(order, p, rows)?;
    let r = rows.map_or(p.m, <[usize]>::len);
    Ok(Array2::from_shape_vec((r, p.n), c).expect("gemm returns rows x N values"))
}

/// M, N and K of A `[M, K]` and B in `layout`, or an error naming both shapes.
fn dims(a: (usize, usize), b: (usize, usize), layout: BLayout) -> Result<(usize, usize, usize), GemmError> {
    let (m, k) = a;
    let (bk, n) = match layout {
        BLayout::Kn => b,
        BLayout::Nk => (b.1, b.0),
    };
    if bk != k {
        let want = match layout {
            BLayout::Kn => "[K, N]",
            BLayout::Nk => "[N, K]",
        };
        return Err(GemmError::Shape(format!(
            "A is {} (as [M, K]) but B is {} (as {want}): K differs",
            show(a),
            show(b)
        )));
    }
    Ok((m, n, k))
}

fn mx_matrix<'a>(what: &str, x: MxArrays<'a>) -> Result<Matrix<'a>, GemmError> {
    Ok(Matrix::Mx {
        codes: slice(&format!("{what} codes"), x.codes)?,
        scales: slice(&format!("{what} scales"), x.scales)?,
        format: x.format,
    })
}

fn slice<'a, T>(what: &str, x: ArrayView2<'a, T>) -> Result<&'a [T], GemmError> {
    x.to_slice().ok_or_else(|| {
        GemmError::Shape(format!(
            "{what} is not in standard (row-major, contiguous) layout; pass as_standard_layout()"
        ))
    })
}

fn show((r, c): (usize, usize)) -> String {
    format!("[{r}, {c}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array2};

    fn order(s: &str) -> Order {
        s.parse().unwrap()
    }

    #[test]
    fn shapes_give_m_n_k_and_the_output_is_m_by_n() {
        let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let b = array![[1.0f32, 0.0], [0.0, 1.0], [1.0, 1.0]];
        let p = Problem::from_arrays(a.view(), b.view(), BLayout::Kn).unwrap();
        assert_eq!((p.m, p.n, p.k), (2, 2, 3));
        let c = gemm_array(&order("fma"), &p, None).unwrap();
        assert_eq!(c, array![[4.0, 5.0], [10.0, 11.0]]);
        assert_eq!(c, a.dot(&b));
        assert_eq!(gemm_array(&order("fma"), &p, Some(&[1])).unwrap(), array![[10.0, 11.0]]);
        // B as [N, K]: the same product
        let bt = b.t().as_standard_layout().into_owned();
        let q = Problem::from_arrays(a.view(), bt.view(), BLayout::Nk).unwrap();
        assert_eq!(gemm_array(&order("fma"), &q, None).unwrap(), c);
    }

    #[test]
    fn shapes_that_disagree_are_refused() {
        let a = Array2::<f32>::zeros((2, 3));
        let b = Array2::<f32>::zeros((2, 3));
        // the flat lengths agree with K = 3, N = 2, but B is [2, 3]
        let e = Problem::from_arrays(a.view(), b.view(), BLayout::Kn).unwrap_err();
        assert_eq!(
            e.to_string(),
            "shape mismatch: A is [2, 3] (as [M, K]) but B is [2, 3] (as [K, N]): K differs"
        );
        assert!(Problem::from_arrays(a.view(), b.view(), BLayout::Nk).is_ok());
        let e = Problem::from_arrays(a.view(), b.t(), BLayout::Kn).unwrap_err();
        assert!(e.to_string().contains("B is not in standard"), "{e}");
    }

    #[test]
    fn mx_scales_are_checked_by_shape() {
        let f: MxFormat = "mxfp8-e4m3".parse().unwrap();
        let (m, k, n) = (2, 64, 3);
        let codes_a = Array2::<u8>::from_elem((m, k), 0x38);
        let codes_b = Array2::<u8>::from_elem((k, n), 0x38);
        let sa = Array2::<u8>::from_elem((m, k / 32), 127);
        let sb = Array2::<u8>::from_elem((k / 32, n), 127);
        fn op<'a>(codes: &'a Array2<u8>, scales: &'a Array2<u8>, format: MxFormat) -> MxArrays<'a> {
            MxArrays {
                codes: codes.view(),
                scales: scales.view(),
                format,
            }
        }
        let p = Problem::from_mx_arrays(op(&codes_a, &sa, f), op(&codes_b, &sb, f), BLayout::Kn).unwrap();
        assert_eq!(
            gemm_array(&order("fma"), &p, None).unwrap(),
            Array2::from_elem((m, n), 64.0)
        );
        // B's scales as [N, K/32] hold as many bytes, but are not [K/32, N]
        let sb_nk = Array2::<u8>::from_elem((n, k / 32), 127);
        let e = Problem::from_mx_arrays(op(&codes_a, &sa, f), op(&codes_b, &sb_nk, f), BLayout::Kn).unwrap_err();
        assert!(e.to_string().contains("B scales are [3, 2], expected [2, 3]"), "{e}");
    }
}
