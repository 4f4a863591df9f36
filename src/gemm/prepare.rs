//! A problem checked and prepared for an order: limits, operand shapes,
//! exact representability in the order's input type, B transposed to
//! `[N, K]`, MX scales decoded.

use super::problem::{BLayout, GemmError, Matrix, Problem, MX_BLOCK};
use crate::format::{e8m0_exponent, encode_f32, pow2, CastPolicy, Format};
use crate::order::{Family, InType, MxScale, Order};
use rayon::prelude::*;
use std::borrow::Cow;

/// Sizes checked before anything is allocated: K at most
/// [`crate::limits::MAX_K`], the order's tree within
/// [`crate::limits::MAX_TREE`], the output (`rows x N`) and an empty
/// operand (no data bounds its other dimension) within
/// [`crate::limits::MAX_ELEMENTS`] with zero dimensions counted as 1, and
/// `M x K`, `K x N` without overflow.
pub(super) fn check_limits(order: &Order, p: &Problem, rows: Option<&[usize]>) -> Result<(), GemmError> {
    use crate::limits::{check_elements, nonzero_product};
    let (m, n, k) = (p.m, p.n, p.k);
    order.check_size(k).map_err(|e| GemmError::Limit(e.to_string()))?;
    let out_rows = rows.map_or(m, |r| r.len());
    check_elements("the output C", &[out_rows, n]).map_err(GemmError::Limit)?;
    for (name, dims) in [("A", [m, k]), ("B", [k, n])] {
        match nonzero_product(&dims) {
            None => {
                return Err(GemmError::Shape(format!(
                    "M = {m}, N = {n}, K = {k}: the size of {name} overflows"
                )))
            }
            Some(_) if dims.contains(&0) => {
                check_elements(&format!("the empty operand {name}"), &dims).map_err(GemmError::Limit)?;
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Inputs normalised for evaluation: A `[M, K]`, B transposed to `[N, K]`
/// so each output reads two contiguous rows. f32 operands already in that
/// layout are borrowed from the problem, not copied.
pub struct Prepared<'a> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub kind: Kind<'a>,
}

/// What a term is.
pub enum Kind<'a> {
    /// Element products of f32 values (`scale=dequant` for MX inputs).
    Values { a: Cow<'a, [f32]>, bt: Cow<'a, [f32]> },
    /// Element products of MX element values with per-block scale exponents
    /// (`scale=fused`, or `scale=block` with mma + promote).
    Scaled {
        a: Cow<'a, [f32]>,
        bt: Cow<'a, [f32]>,
        xa: Vec<i32>,
        xb: Vec<i32>,
        fused: bool,
    },
    /// Exact block dots (`scale=block` with fma/muladd); terms are blocks.
    Blocks {
        a: Vec<u8>,
        sa: Vec<u8>,
        bt: Vec<u8>,
        sb: Vec<u8>,
        fa: Format,
        fb: Format,
    },
}

impl Prepared<'_> {
    /// Number of terms per output (k, or k/32 for block terms).
    pub fn terms(&self) -> usize {
        match self.kind {
            Kind::Blocks { .. } => self.k / MX_BLOCK,
            _ => self.k,
        }
    }
}

/// `[rows, cols]` -> `[cols, rows]` ([`transpose_columns`] of all columns).
fn transpose<T: Copy + Default + Send + Sync>(x: &[T], rows: usize, cols: usize) -> Vec<T> {
    transpose_columns(x, rows, cols, cols)
}

/// The first `cols` columns of `x`, `[rows, width]` row-major, as a
/// `[cols, rows]` row-major matrix (B's first columns from `[K, N]` to
/// `[N, K]`). Tiles of 64 x 64 go through a local buffer, so each line of
/// the input and of the output is touched once (a strided walk over a
/// power-of-two width, K = 4096, puts every access in one cache set) and
/// each page visited gives 64 elements, not one line's worth (a page per
/// row of a tile: the TLB, not the copy, sets the pace). Blocks of 64
/// output rows in parallel from 64K elements (a pure copy: no result
/// depends on the thread count).
///
/// # Panics
/// When `cols > width` or `x` holds fewer than `rows * width` elements.
pub fn transpose_columns<T: Copy + Default + Send + Sync>(x: &[T], rows: usize, width: usize, cols: usize) -> Vec<T> {
    const TILE: usize = 64;
    assert!(
        cols <= width && x.len() >= rows * width,
        "transpose_columns: {cols} of {width} columns, {rows} rows, {} elements",
        x.len()
    );
    let mut out = vec![T::default(); rows * cols];
    if rows == 0 || cols == 0 {
        return out;
    }
    // output rows c0.. (input columns), dst holding them whole
    let block = |(bi, dst): (usize, &mut [T])| {
        let c0 = bi * TILE;
        let w = dst.len() / rows;
        let mut tile = Box::new([[T::default(); TILE]; TILE]);
        for r0 in (0..rows).step_by(TILE) {
            let h = TILE.min(rows - r0);
            for (i, t) in tile.iter_mut().enumerate().take(h) {
                let src = &x[(r0 + i) * width + c0..][..w];
                if let Ok(whole) = <&[T; TILE]>::try_from(src) {
                    // a fixed-size copy: moves in registers, no call
                    *t = *whole;
                } else {
                    t[..w].copy_from_slice(src);
                }
            }
            for c in 0..w {
                for (i, v) in dst[c * rows + r0..][..h].iter_mut().enumerate() {
                    *v = tile[i][c];
                }
            }
        }
    };
    if out.len() >= 1 << 16 {
        out.par_chunks_mut(TILE * rows).enumerate().for_each(block);
    } else {
        out.chunks_mut(TILE * rows).enumerate().for_each(block);
    }
    out
}

/// Whether `v` is exactly a value of `t` (NaN: whether `t` has NaNs).
pub fn representable(v: f32, t: InType) -> bool {
    NormalRange::of(t).is_none_or(|r| r.holds(v) || representable_by_cast(v, r.format))
}

/// A quick sufficient test for [`representable`]: a normal f32 whose
/// exponent is at least the type's smallest normal exponent, whose
/// magnitude is at most the type's largest finite value (which also
/// rules out Inf and NaN), and whose fraction bits below the type's are
/// zero is one of the type's normal values. Anything else goes to the
/// cast.
#[derive(Clone, Copy)]
struct NormalRange {
    format: Format,
    /// f32 fraction bits the type lacks (must be zero).
    dropped: u32,
    /// Smallest normal exponent field, as an f32 biased exponent.
    min_field: u32,
    max: f32,
}

impl NormalRange {
    /// None for f32 (every value is one).
    fn of(t: InType) -> Option<NormalRange> {
        let f = t.format()?;
        Some(NormalRange {
            format: f,
            dropped: 23 - t.frac_bits(),
            min_field: (t.emin() + 127).max(1) as u32,
            max: f.max_value() as f32,
        })
    }

    #[inline]
    fn holds(self, v: f32) -> bool {
        let b = v.to_bits();
        let field = (b >> 23) & 0xFF;
        field >= self.min_field && b & ((1 << self.dropped) - 1) == 0 && v.abs() <= self.max
    }
}

/// [`representable`] by encoding into the type's format and decoding back.
fn representable_by_cast(v: f32, f: Format) -> bool {
    if v.is_nan() {
        return f.has_nan();
    }
    match encode_f32(v, f, &CastPolicy::ieee(f), 0) {
        Ok(c) => {
            let back = f.decode_f32(c);
            back.to_bits() == v.to_bits()
                || (v == 0.0 && back == 0.0 && v.is_sign_negative() == back.is_sign_negative())
        }
        Err(_) => false,
    }
}

/// Validates shapes, the order against the inputs, and normalises.
/// The shape check every evaluator of a [`Problem`] shares (the model and
/// the accuracy golden): operand sizes against M, K and N, and for MX
/// inputs K a multiple of the block, the scales' sizes and every code a
/// valid code of its format. A problem mixing MX and plain operands is
/// left to the caller.
pub fn check_operands(p: &Problem) -> Result<(), GemmError> {
    let (m, n, k) = (p.m, p.n, p.k);
    let need = |what: &str, got: usize, want: usize| -> Result<(), GemmError> {
        if got != want {
            return Err(GemmError::Shape(format!("{what} has {got} elements, expected {want}")));
        }
        Ok(())
    };
    match (p.f32_operands(), p.mx_operands()) {
        (Some((a, b)), _) => {
            need("A", a.len(), m * k)?;
            need("B", b.len(), k * n)
        }
        (None, Some((a, b))) => {
            let (ca, sa, fa, cb, sb, fb) = (a.codes, a.scales, a.format, b.codes, b.scales, b.format);
            if k % MX_BLOCK != 0 {
                return Err(GemmError::Shape(format!(
                    "K = {k} is not a multiple of the MX block ({MX_BLOCK})"
                )));
            }
            let kb = k / MX_BLOCK;
            need("A codes", ca.len(), m * k)?;
            need("B codes", cb.len(), k * n)?;
            need("A scales", sa.len(), m * kb)?;
            need("B scales", sb.len(), kb * n)?;
            for (name, codes, f) in [("A", ca, fa.element()), ("B", cb, fb.element())] {
                if let Some(i) = codes.iter().position(|&c| c as u32 >= f.code_count()) {
                    return Err(GemmError::Shape(format!(
                        "{name} code {:#x} at {i} is not a valid {f} code",
                        codes[i]
                    )));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `scale=block` with an mma order: every promotion block must be one
/// aligned MX block (parts and tiles start on multiples of 32), no lanes.
fn check_block_alignment(order: &Order, k: usize) -> Result<(), GemmError> {
    let t = order.ktile.unwrap_or(k as u32) as usize;
    let parts_aligned = order.split == 1
        || if order.interleave {
            t.is_multiple_of(MX_BLOCK)
        } else {
            order.split_chunk(k).is_multiple_of(MX_BLOCK)
        };
    let tiles_aligned = order.tile == crate::order::Tile::Carry || t.is_multiple_of(MX_BLOCK);
    if order.lanes != 1 || !parts_aligned || !tiles_aligned {
        return Err(GemmError::Unsupported(
            "scale=block with an mma order needs every part and tile to start on an MX block (multiples of 32) and no lanes"
                .into(),
        ));
    }
    Ok(())
}

/// Every value of the prepared A and B is representable in the hardware
/// step's input type `input`; Err names the first one that is not (B's
/// index in the caller's layout).
fn check_representable(kind: &Kind, input: InType, p: &Problem) -> Result<(), GemmError> {
    let (n, k) = (p.n, p.k);
    let (a, bt) = match kind {
        Kind::Values { a, bt } | Kind::Scaled { a, bt, .. } => (a, bt),
        Kind::Blocks { .. } => unreachable!(),
    };
    let Some(normal) = NormalRange::of(input) else {
        return Ok(()); // f32: every value
    };
    // a direct-mapped memo of verdicts by exact bits (MX operands hold
    // at most 256 distinct values), one per block of the parallel scan
    let ok = |memo: &mut [(u32, u8)], x: f32| -> bool {
        if normal.holds(x) {
            return true;
        }
        let b = x.to_bits();
        let slot = &mut memo[(b.wrapping_mul(0x9E37_79B9) >> 22) as usize];
        if slot.1 != 0 && slot.0 == b {
            return slot.1 == 2;
        }
        let r = representable_by_cast(x, normal.format);
        *slot = (b, 1 + r as u8);
        r
    };
    const BLOCK: usize = 1 << 16;
    for (name, v, cols) in [("A", a, k), ("B", bt, k)] {
        let first = v.par_chunks(BLOCK).enumerate().find_map_first(|(at, block)| {
            let mut memo = vec![(0u32, 0u8); 1024];
            // runs of normal values are tested without a branch a value
            // (vectorised); a run holding anything else is scanned
            const RUN: usize = 64;
            block.chunks(RUN).enumerate().find_map(|(r, run)| {
                if run.iter().fold(true, |all, &x| all & normal.holds(x)) {
                    return None;
                }
                run.iter()
                    .position(|&x| !ok(&mut memo, x))
                    .map(|i| at * BLOCK + r * RUN + i)
            })
        });
        if let Some(i) = first {
            // report B's index in the caller's layout
            let idx = if name == "B" && p.b_layout == BLayout::Kn {
                (i % cols) * n + i / cols
            } else {
                i
            };
            return Err(GemmError::NotRepresentable {
                operand: name,
                index: idx,
                value: v[i],
                ty: input.name(),
            });
        }
    }
    Ok(())
}

pub fn prepare<'a>(order: &Order, p: &Problem<'a>) -> Result<Prepared<'a>, GemmError> {
    let (m, n, k) = (p.m, p.n, p.k);
    let mx = matches!(p.a, Matrix::Mx { .. }) || matches!(p.b, Matrix::Mx { .. });
    if mx != (matches!(p.a, Matrix::Mx { .. }) && matches!(p.b, Matrix::Mx { .. })) {
        return Err(GemmError::Unsupported(
            "A and B must both be MX or both be plain values".into(),
        ));
    }
    if !mx && order.scale != MxScale::Dequant {
        return Err(GemmError::Unsupported(format!(
            "scale={} needs MX inputs (codes and scales)",
            if order.scale == MxScale::Block {
                "block"
            } else {
                "fused"
            }
        )));
    }
    let kind = match (p.f32_operands(), p.mx_operands()) {
        (Some((a, b)), _) => {
            check_operands(p)?;
            let bt = if p.b_layout == BLayout::Kn {
                Cow::Owned(transpose(b, k, n))
            } else {
                Cow::Borrowed(b)
            };
            Kind::Values {
                a: Cow::Borrowed(a),
                bt,
            }
        }
        (None, Some((a, b))) => {
            let (ca, sa, fa, cb, sb, fb) = (a.codes, a.scales, a.format, b.codes, b.scales, b.format);
            check_operands(p)?;
            let kb = k / MX_BLOCK;
            let (cbt, sbt) = if p.b_layout == BLayout::Kn {
                (transpose(cb, k, n), transpose(sb, kb, n))
            } else {
                (cb.to_vec(), sb.to_vec())
            };
            let (ea, eb) = (fa.element(), fb.element());
            // codes are checked above: decode each of the format's codes once
            let values = |c: &[u8], f: Format| -> Vec<f32> {
                let table: Vec<f32> = (0..f.code_count().min(256) as u16).map(|x| f.decode_f32(x)).collect();
                c.iter().map(|&x| table[x as usize]).collect()
            };
            let exps = |s: &[u8], rows: usize| -> Vec<i32> {
                // per element (row, k) the block scale exponent; 0xFF -> NaN marker
                let mut out = Vec::with_capacity(rows * k);
                for r in 0..rows {
                    for kk in 0..k {
                        let b = s[r * kb + kk / MX_BLOCK];
                        out.push(if b == 0xFF { i32::MIN } else { e8m0_exponent(b) });
                    }
                }
                out
            };
            match (order.scale, order.family) {
                (MxScale::Dequant, _) => {
                    let deq = |c: &[u8], s: &[u8], rows: usize, f: Format| -> Vec<f32> {
                        (0..rows * k)
                            .map(|i| {
                                let sc = s[(i / k) * kb + (i % k) / MX_BLOCK];
                                if sc == 0xFF {
                                    f32::NAN
                                } else {
                                    (f.decode_f64(c[i] as u16) * pow2(e8m0_exponent(sc))) as f32
                                }
                            })
                            .collect()
                    };
                    Kind::Values {
                        a: Cow::Owned(deq(ca, sa, m, ea)),
                        bt: Cow::Owned(deq(&cbt, &sbt, n, eb)),
                    }
                }
                (MxScale::Block, Family::Fma | Family::MulAdd) => Kind::Blocks {
                    a: ca.to_vec(),
                    sa: sa.to_vec(),
                    bt: cbt,
                    sb: sbt,
                    fa: ea,
                    fb: eb,
                },
                (MxScale::Block | MxScale::Fused, Family::Mma(_)) => Kind::Scaled {
                    a: Cow::Owned(values(ca, ea)),
                    bt: Cow::Owned(values(&cbt, eb)),
                    xa: exps(sa, m),
                    xb: exps(&sbt, n),
                    fused: order.scale == MxScale::Fused,
                },
                (MxScale::Fused, _) => unreachable!("rejected by the order parser"),
            }
        }
        _ => unreachable!(),
    };
    if let Kind::Scaled { fused: false, .. } = kind {
        check_block_alignment(order, k)?;
    }
    // The hardware step's input type.
    if let Some(mm) = order.mma() {
        check_representable(&kind, mm.input, p)?;
    }
    Ok(Prepared { m, n, k, kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`transpose_columns`] against its definition, element by element:
    /// shapes off the 64 x 64 tile (partial tiles on both sides), some
    /// columns or all, serial and parallel sizes, f32 and byte operands.
    #[test]
    fn transpose_columns_is_the_definition() {
        fn check<T: Copy + Default + Send + Sync + PartialEq + std::fmt::Debug>(f: impl Fn(usize) -> T) {
            for (rows, width, cols) in [
                (1, 1, 1),
                (3, 5, 2),
                (64, 64, 64),
                (65, 130, 129),
                (200, 70, 3),
                (4096, 40, 33),
                (300, 300, 300),
                (7, 9, 0),
                (0, 5, 3),
            ] {
                let x: Vec<T> = (0..rows * width).map(&f).collect();
                let got = transpose_columns(&x, rows, width, cols);
                assert_eq!(got.len(), rows * cols);
                for c in 0..cols {
                    for r in 0..rows {
                        assert_eq!(
                            got[c * rows + r],
                            x[r * width + c],
                            "{rows}x{width} cols {cols}: ({r}, {c})"
                        );
                    }
                }
            }
        }
        check(|i| i as f32);
        check(|i| (i * 7 % 251) as u8);
    }

    /// The quick test never says yes where the cast says no, on a walk over
    /// every f32 bit pattern plus each type's edges, and it says yes to
    /// exactly the type's finite normal values among its codes.
    #[test]
    fn normal_range_implies_representable() {
        for t in InType::ALL {
            let Some(f) = t.format() else {
                assert!(NormalRange::of(t).is_none(), "{t:?}: f32 needs no test");
                continue;
            };
            let r = NormalRange::of(t).expect("a type with a format has a normal range");
            let max = f.max_value() as f32;
            let min_normal = 2f32.powi(t.emin());
            let edges = [1.0, max, min_normal].into_iter().flat_map(|x: f32| {
                let b = x.to_bits();
                [
                    b - 1,
                    b,
                    b + 1,
                    b + (1 << (23 - t.frac_bits())),
                    b - (1 << (23 - t.frac_bits())),
                ]
            });
            for bits in (0u32..=u32::MAX)
                .step_by(997)
                .chain(edges)
                .flat_map(|b| [b, b ^ 0x8000_0000])
            {
                let v = f32::from_bits(bits);
                if r.holds(v) {
                    assert!(representable_by_cast(v, f), "{t:?}: {v:e} ({bits:#010x})");
                }
            }
            // every finite normal value of the type is decided quickly
            for code in 0..f.code_count() as u16 {
                let v = f.decode_f32(code);
                let normal = v.is_finite() && v.abs() >= min_normal;
                assert_eq!(r.holds(v), normal, "{t:?}: code {code:#x} = {v:e}");
            }
        }
    }
}
