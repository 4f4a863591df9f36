//! The entry points: `C = A x B` under an order (the fast kernels where
//! one applies, else the generic evaluator), the generic evaluator alone,
//! and one element's trace.

use super::prepare::{check_limits, prepare, Prepared};
use super::problem::{GemmError, Matrix, Problem, MX_BLOCK};
use super::{eval, fast};
use crate::order::Order;
use rayon::prelude::*;

/// Computes the selected rows (all when `rows` is None) of `C`, row-major
/// `[rows, N]`, with the fast kernels where they apply.
pub fn gemm(order: &Order, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, GemmError> {
    check_limits(order, p, rows)?;
    with_rows(p, rows, |q, rows| {
        let prep = prepare(order, q)?;
        if let Some(out) = fast::gemm(order, &prep, rows) {
            return Ok(out);
        }
        Ok(gemm_generic_prepared(order, &prep, rows))
    })
}

/// Runs `f` on a problem holding only the selected rows of A (an output row
/// depends only on its own row of A), so row-only evaluation prepares and
/// copies only what it uses. Errors name indices in the caller's A.
fn with_rows<R>(
    p: &Problem,
    rows: Option<&[usize]>,
    f: impl FnOnce(&Problem, &[usize]) -> Result<R, GemmError>,
) -> Result<R, GemmError> {
    let Some(rows) = rows else {
        let all: Vec<usize> = (0..p.m).collect();
        return f(p, &all);
    };
    let rows = select_rows(Some(rows), p.m)?;
    let k = p.k;
    let local: Vec<usize> = (0..rows.len()).collect();
    let remap = |e: GemmError| match e {
        GemmError::NotRepresentable {
            operand: "A",
            index,
            value,
            ty,
        } => GemmError::NotRepresentable {
            operand: "A",
            index: rows[index / k.max(1)] * k + index % k.max(1),
            value,
            ty,
        },
        e => e,
    };
    match p.a {
        Matrix::F32(a) if a.len() == p.m * k => {
            let sub: Vec<f32> = rows
                .iter()
                .flat_map(|&i| a[i * k..(i + 1) * k].iter().copied())
                .collect();
            f(
                &Problem {
                    a: Matrix::F32(&sub),
                    m: rows.len(),
                    ..*p
                },
                &local,
            )
            .map_err(remap)
        }
        Matrix::Mx { codes, scales, format }
            if k.is_multiple_of(MX_BLOCK) && codes.len() == p.m * k && scales.len() == p.m * (k / MX_BLOCK) =>
        {
            let kb = k / MX_BLOCK;
            let c: Vec<u8> = rows
                .iter()
                .flat_map(|&i| codes[i * k..(i + 1) * k].iter().copied())
                .collect();
            let s: Vec<u8> = rows
                .iter()
                .flat_map(|&i| scales[i * kb..(i + 1) * kb].iter().copied())
                .collect();
            let a = Matrix::Mx {
                codes: &c,
                scales: &s,
                format,
            };
            f(&Problem { a, m: rows.len(), ..*p }, &local).map_err(remap)
        }
        // malformed inputs: let prepare report them on the full problem
        _ => f(p, &rows),
    }
}

/// The same with the generic tree evaluator only (the reference the fast
/// kernels are tested against).
pub fn gemm_generic(order: &Order, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, GemmError> {
    check_limits(order, p, rows)?;
    with_rows(p, rows, |q, rows| {
        Ok(gemm_generic_prepared(order, &prepare(order, q)?, rows))
    })
}

fn select_rows(rows: Option<&[usize]>, m: usize) -> Result<Vec<usize>, GemmError> {
    match rows {
        None => Ok((0..m).collect()),
        Some(r) => {
            if let Some(&bad) = r.iter().find(|&&i| i >= m) {
                return Err(GemmError::Row { row: bad, m });
            }
            Ok(r.to_vec())
        }
    }
}

fn gemm_generic_prepared(order: &Order, prep: &Prepared, rows: &[usize]) -> Vec<f32> {
    let tree = order.compile(prep.terms());
    let n = prep.n;
    let mut out = vec![0f32; rows.len() * n];
    out.par_chunks_mut(n.max(1)).zip(rows.par_iter()).for_each(|(row, &i)| {
        let mut scratch = Vec::new();
        for (j, o) in row.iter_mut().enumerate() {
            *o = eval::evaluate(&tree, order, prep, i, j, &mut scratch, None);
        }
    });
    out
}

/// Every intermediate value of output (i, j), in evaluation order.
pub fn trace(order: &Order, p: &Problem, i: usize, j: usize) -> Result<Vec<eval::TraceStep>, GemmError> {
    check_limits(order, p, Some(&[]))?;
    let prep = prepare(order, p)?;
    if i >= prep.m || j >= prep.n {
        return Err(GemmError::Shape(format!(
            "element ({i}, {j}) is outside C [{}, {}]",
            prep.m, prep.n
        )));
    }
    let tree = order.compile(prep.terms());
    let mut steps = Vec::new();
    let mut scratch = Vec::new();
    eval::evaluate(&tree, order, &prep, i, j, &mut scratch, Some(&mut steps));
    Ok(steps)
}
