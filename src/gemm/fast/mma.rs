//! Fast path: tensor-core fused sums (`mma` families, element inputs) in
//! integers, vectorised across the columns of C; bit for bit the generic
//! evaluator's (`gemm::step`), which the tests and `tests/gemm_fast.rs` check.
//!
//! Every input is decomposed once as `x = ±X * 2^(e - fi)` (X an integer
//! below 2^(fi+1), fi the fraction bits of the step's input type, `e >= emin`
//! its nominal exponent; signs kept as bit masks). A product term is then
//! `floor(|Xa*Xb| * 2^(F - 2fi - (M - e)))`: the A side is pre-shifted by
//! `L = max(F - 2fi, 0)`, the right shift is `M - e + max(2fi - F, 0)`. The
//! products of one fused sum are summed in i32 lanes when they provably fit
//! (bf16/f16/fp8 with F <= 25, Kc <= 16 .. 32), else in i64 lanes; C is added
//! in i64; the sum is rounded toward zero as `step::round_exact` does. On
//! AVX-512, where both significands fit 15 bits with their pre-shifts, the i32
//! kernel is `words` (products by `vpmaddwd` on word pairs, the rounding by the
//! float unit), which reads its own decomposition (`Lanes::Words`).
//!
//! MX `scale=fused` adds each element's block scale exponent to its `e`;
//! MX `scale=block` promotes each block's partial with `s = 2^Xa * 2^Xb`
//! (an f32 product) instead of 1.0.
//!
//! Contract: docs/ORDERS.md, "The fused sum" (and "MX inputs" for the
//! scales). Specials: a non-finite input (or, fused, a NaN scale) takes part
//! in the integer sums as a zero, and its row of A or column of B is marked;
//! the marked outputs' fused sums are then recomputed for their special
//! value as that section's "Specials" rule says.

use super::buffer::zeroed;
use super::isa::Isa;
use super::plan::{Op, Plan, Step};
use super::tile::{elementwise, TileBufs};
use crate::format::{pow2, pow2_f32};
use crate::order::Mma;
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
mod words;

const TILE_ROWS: usize = 16;
const TILE_COLS: usize = 128;

/// The exponent carried by zero inputs: far below any real term, so a zero
/// product never sets the alignment exponent M, and the shifts it causes
/// saturate to a zero term.
const ZERO_E: i32 = -2000;

/// `x = X * 2^(e - fi)` (zeros: `(0, ZERO_E)`); None if x is not a multiple of the in-type's
/// quantum at its exponent (not representable) or not finite.
#[inline(always)]
fn split(x: f32, fi: u32, emin: i32) -> Option<(i32, i32)> {
    let b = x.to_bits();
    let field = ((b >> 23) & 0xFF) as i32;
    let mant = b & 0x7F_FFFF;
    if field == 0xFF {
        return None;
    }
    if field == 0 && mant == 0 {
        return Some((0, ZERO_E));
    }
    let (sig, ex) = if field == 0 {
        (mant, -126)
    } else {
        (mant | 1 << 23, field - 127)
    };
    let e = ex.max(emin);
    let sh = (23 - fi as i32 + (e - ex)) as u32;
    if sh >= 24 || sig & ((1 << sh) - 1) != 0 {
        return None;
    }
    let v = (sig >> sh) as i32;
    Some((if b >> 31 != 0 { -v } else { v }, e))
}

/// The lanes a fused sum is computed in (chosen once per GEMM: the
/// decomposition depends on it).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lanes {
    /// i32 lanes on word pairs (`words`; AVX-512 only).
    Words,
    /// i32 lanes.
    Narrow,
    /// i64 lanes.
    Wide,
}

/// The word pair of a zero, a padding term or a non-finite input.
const ONE_PAIR: i32 = 1 << 16;

/// `(la, lb)`, the pre-shifts of A's and B's significands in word pairs
/// (`la + lb = L + 1`), where both pairs fit signed words and the `words`
/// kernel applies (`fi` fraction bits, F <= 29); None otherwise.
fn pair_shifts(fi: u32, f: u32) -> Option<(u32, u32)> {
    // a significand has fi + 1 bits; a word holds 15 of them
    let room = 14u32.checked_sub(fi)?;
    let l1 = f.saturating_sub(2 * fi) + 1;
    if f > 29 || l1 > 2 * room {
        return None;
    }
    let la = room.min(l1);
    Some((la, l1 - la))
}

/// Decomposed operands.
struct Dec {
    /// A rows (the selected ones) `[row][k + 1]`: X pre-shifted by L (with
    /// `Lanes::Words`, the word pair `(σ, σ·X << la)` of `words`), e, and
    /// the sign (0 or 0xFFFF); index k is the zero padding product's operand.
    xa: Vec<i64>,
    ea: Vec<i32>,
    sa: Vec<u16>,
    /// B in panels of 16 columns, `[panel][k + 1][X x 16, e x 16]` (X: the
    /// word pair with `Lanes::Words`), and the signs `[panel][k + 1]` (bit
    /// x: column 16 panel + x is negative).
    b: Vec<i32>,
    bs: Vec<u16>,
}

impl Dec {
    /// Offset of B's X for row `kx`, columns `j..` (e is 16 further on).
    #[inline(always)]
    fn b_at(&self, k: usize, kx: usize, j: usize) -> usize {
        ((j / 16) * (k + 1) + kx) * 32 + j % 16
    }
}

#[derive(Clone, Copy)]
struct Params {
    f: u32,
    out: u32,
    /// Right shift of a product term beyond `M - e`.
    r0: u32,
}

pub(super) struct Inputs<'a> {
    /// A `[M, K]` and Bᵀ `[N, K]`: values, or MX element values.
    pub a: &'a [f32],
    pub bt: &'a [f32],
    pub k: usize,
    pub n: usize,
    pub rows: &'a [usize],
    /// MX block scale exponents per element, for `scale=fused|block`.
    pub scales: Option<Scales<'a>>,
}

/// Per element (row, k) of A and (column, k) of Bᵀ the unbiased block scale
/// exponent, `i32::MIN` for a NaN scale (0xFF).
#[derive(Clone, Copy)]
pub(super) struct Scales<'a> {
    pub xa: &'a [i32],
    pub xb: &'a [i32],
    /// `scale=fused` (exponents inside the fused sums), else `scale=block`
    /// (exponents at promotion).
    pub fused: bool,
}

impl Inputs<'_> {
    /// The scale exponent of element `x` of A when it enters the fused sums
    /// (`scale=fused`), else 0.
    #[inline(always)]
    fn fused_exp_a(&self, x: usize) -> i32 {
        match self.scales {
            Some(s) if s.fused => s.xa[x],
            _ => 0,
        }
    }

    /// The same for element `x` of Bᵀ.
    #[inline(always)]
    fn fused_exp_b(&self, x: usize) -> i32 {
        match self.scales {
            Some(s) if s.fused => s.xb[x],
            _ => 0,
        }
    }
}

/// The selected rows of C, every output computed (specials included), and
/// the lanes' name (`Computed::kernel`). None where the kernel's integer
/// width is insufficient, an input is not representable in the step's type,
/// or the tree has unexpected parameters.
pub(super) fn run(plan: &Plan, m: Mma, inp: &Inputs, isa: Isa) -> Option<(Vec<f32>, &'static str)> {
    let (k, n, rows) = (inp.k, inp.n, inp.rows);
    let fi = m.input.frac_bits();
    let emin = m.input.emin();
    let mut nmax = 0usize;
    for op in &plan.ops {
        match op {
            Op::Fused { ks, f, out, .. } => {
                if *f != m.f || *out != m.out {
                    return None;
                }
                nmax = nmax.max(ks.len());
            }
            Op::Chain { .. } => return None,
            _ => {}
        }
    }
    let l = m.f.saturating_sub(2 * fi);
    let r0 = (2 * fi).saturating_sub(m.f);
    let xmax = (1u128 << (fi + 1)) - 1;
    let pmax = (xmax * xmax) << l;
    let tmax = pmax >> r0;
    let sum = nmax as u128 * tmax;
    let ctmax = 1u128 << (m.f + 1);
    let narrow = pmax <= i32::MAX as u128 && sum <= i32::MAX as u128;
    if !(narrow || (pmax <= i64::MAX as u128 && sum + ctmax <= i64::MAX as u128)) {
        return None;
    }
    // (la, lb): the word pairs' pre-shifts where that kernel applies
    let pairs = (cfg!(target_arch = "x86_64") && isa == Isa::Avx512 && narrow && nmax <= 32)
        .then(|| pair_shifts(fi, m.f))
        .flatten();
    let lanes = match (pairs, narrow) {
        (Some(_), _) => Lanes::Words,
        (None, true) => Lanes::Narrow,
        (None, false) => Lanes::Wide,
    };
    let x_zero = if pairs.is_some() { ONE_PAIR } else { 0 };
    // decompose A rows
    let mut xa: Vec<i64> = vec![x_zero as i64; rows.len() * (k + 1)];
    let mut ea = vec![ZERO_E; rows.len() * (k + 1)];
    let mut sa: Vec<u16> = zeroed(rows.len() * (k + 1));
    let mut bad_rows = vec![false; rows.len()];
    let ok_a = xa
        .par_chunks_mut(k + 1)
        .zip(ea.par_chunks_mut(k + 1))
        .zip(sa.par_chunks_mut(k + 1))
        .zip(bad_rows.par_iter_mut())
        .zip(rows.par_iter())
        .all(|((((x, e), sg), bad), &row)| {
            #[cfg(target_arch = "x86_64")]
            if let Some((la, _)) = pairs {
                let sx = inp.scales.filter(|s| s.fused).map(|s| &s.xa[row * k..(row + 1) * k]);
                // SAFETY: pairs are chosen only where the CPU runs AVX-512
                let split = unsafe {
                    words::split_row(&inp.a[row * k..(row + 1) * k], sx, fi, emin, la, |k0, p, ev, neg| {
                        for (q, &pq) in p.iter().enumerate() {
                            x[k0 + q] = pq as i64;
                            sg[k0 + q] = if neg >> q & 1 != 0 { 0xFFFF } else { 0 };
                        }
                        e[k0..k0 + ev.len()].copy_from_slice(ev);
                    })
                };
                let Some(b) = split else {
                    return false;
                };
                *bad = b;
                return true;
            }
            for (kk, &v) in inp.a[row * k..(row + 1) * k].iter().enumerate() {
                let sx = inp.fused_exp_a(row * k + kk);
                if !v.is_finite() || sx == i32::MIN {
                    *bad = true;
                    continue;
                }
                let Some((xv, ev)) = split(v, fi, emin) else {
                    return false;
                };
                x[kk] = (xv.unsigned_abs() as i64) << l;
                e[kk] = if xv == 0 { ev } else { ev + sx };
                sg[kk] = if xv < 0 { 0xFFFF } else { 0 };
            }
            true
        });
    // decompose B into panels of 16 columns
    let mut b: Vec<i32> = zeroed(n.div_ceil(16) * (k + 1) * 32);
    let mut bs: Vec<u16> = zeroed(n.div_ceil(16) * (k + 1));
    let mut bad_cols = vec![false; n.div_ceil(16) * 16];
    let ok_b = b
        .par_chunks_mut((k + 1) * 32)
        .zip(bs.par_chunks_mut(k + 1))
        .zip(bad_cols.par_chunks_mut(16))
        .enumerate()
        .all(|(panel, ((dst, sg), bad))| {
            for row in dst.chunks_mut(32) {
                row[..16].fill(x_zero);
                row[16..].fill(ZERO_E);
            }
            for (x, bad) in bad.iter_mut().enumerate().take(16.min(n - panel * 16)) {
                let j = panel * 16 + x;
                #[cfg(target_arch = "x86_64")]
                if let Some((_, lb)) = pairs {
                    let sx = inp.scales.filter(|s| s.fused).map(|s| &s.xb[j * k..(j + 1) * k]);
                    // SAFETY: as for A
                    let split = unsafe {
                        words::split_row(&inp.bt[j * k..(j + 1) * k], sx, fi, emin, lb, |k0, p, ev, neg| {
                            for (q, (&pq, &eq)) in p.iter().zip(ev).enumerate() {
                                dst[(k0 + q) * 32 + x] = pq;
                                dst[(k0 + q) * 32 + 16 + x] = eq;
                                sg[k0 + q] |= (neg >> q & 1) << x;
                            }
                        })
                    };
                    let Some(b) = split else {
                        return false;
                    };
                    *bad = b;
                    continue;
                }
                for (kk, &v) in inp.bt[j * k..(j + 1) * k].iter().enumerate() {
                    let sx = inp.fused_exp_b(j * k + kk);
                    if !v.is_finite() || sx == i32::MIN {
                        *bad = true;
                        continue;
                    }
                    let Some((xv, ev)) = split(v, fi, emin) else {
                        return false;
                    };
                    dst[kk * 32 + x] = xv.abs();
                    dst[kk * 32 + 16 + x] = if xv == 0 { ev } else { ev + sx };
                    sg[kk] |= ((xv < 0) as u16) << x;
                }
            }
            true
        });
    if !ok_a || !ok_b {
        return None;
    }
    bad_cols.truncate(n);
    let dec = Dec { xa, ea, sa, b, bs };
    let p = Params { f: m.f, out: m.out, r0 };

    // tiles of up to TILE_ROWS x TILE_COLS, narrower when rows are few
    let tasks = 4 * rayon::current_num_threads().max(1);
    let tc = n
        .div_ceil(tasks.div_ceil(rows.len().div_ceil(TILE_ROWS)))
        .next_multiple_of(16)
        .clamp(16, TILE_COLS);
    // column-major: a worker's consecutive tiles share B's panels (in L2)
    let row_blocks = rows.len().div_ceil(TILE_ROWS);
    let tiles: Vec<(usize, usize)> = (0..n)
        .step_by(tc)
        .flat_map(|c| (0..rows.len()).step_by(TILE_ROWS).map(move |r| (r, c)))
        .collect();
    let done: Vec<Vec<f32>> = tiles
        .par_iter()
        .map(|&(r0, c0)| {
            let r1 = (r0 + TILE_ROWS).min(rows.len());
            let c1 = (c0 + tc).min(n);
            let ld = (c1 - c0).next_multiple_of(16);
            let mut bufs = TileBufs::new(plan.slots, (r1 - r0) * ld);
            for st in &plan.steps {
                match &plan.ops[st.op] {
                    Op::Fused { ks, .. } => {
                        let mut d = std::mem::take(&mut bufs.0[st.dst]);
                        let t = Tile { r0, r1, c0, c1, ld };
                        let c = &bufs.0[st.src[0]];
                        fused_tile(isa, lanes, inp, &dec, p, ks, &t, c, &mut d);
                        if bad_rows[r0..r1].contains(&true) || bad_cols[c0..c1].contains(&true) {
                            specials(inp, ks, &t, &bad_rows, &bad_cols, c, &mut d);
                        }
                        bufs.0[st.dst] = d;
                    }
                    &Op::Promote { k0, .. } if inp.scales.is_some_and(|s| !s.fused) => {
                        let t = Tile { r0, r1, c0, c1, ld };
                        promote_scaled(inp, k0 as usize, &t, st, &mut bufs.0);
                    }
                    op => elementwise(op, st, &mut bufs.0),
                }
            }
            std::mem::take(&mut bufs.0[plan.root_slot])
        })
        .collect();
    // tiles are in column-block order, row_blocks to a block of columns
    let mut out: Vec<f32> = zeroed(rows.len() * n);
    out.par_chunks_mut((TILE_ROWS * n).max(1))
        .enumerate()
        .for_each(|(rb, block)| {
            for (c0, t) in (0..n).step_by(tc).zip(done.iter().skip(rb).step_by(row_blocks.max(1))) {
                let c1 = (c0 + tc).min(n);
                let ld = (c1 - c0).next_multiple_of(16);
                for (r, line) in block.chunks_mut(n).enumerate() {
                    line[c0..c1].copy_from_slice(&t[r * ld..r * ld + (c1 - c0)]);
                }
            }
        });
    let name = match lanes {
        Lanes::Words => "mma words",
        Lanes::Narrow => "mma i32",
        Lanes::Wide => "mma i64",
    };
    Some((out, name))
}

/// For the outputs of the tile whose row of A or column of B is marked,
/// the fused sum over `ks` with C from `c` where one of its products is not
/// finite (`d` holds the integer result, in which those took part as zeros).
fn specials(
    inp: &Inputs,
    ks: &[Option<u32>],
    t: &Tile,
    bad_rows: &[bool],
    bad_cols: &[bool],
    c: &[f32],
    d: &mut [f32],
) {
    let k = inp.k;
    let marked = bad_rows[t.r0..t.r1].iter().zip(&inp.rows[t.r0..t.r1]);
    for (r, (&bad_row, &row)) in (t.r0..t.r1).zip(marked) {
        for j in (t.c0..t.c1).filter(|&j| bad_row || bad_cols[j]) {
            let (mut nan, mut pinf, mut ninf) = (false, false, false);
            for &kx in ks.iter().flatten() {
                let (xa, xb) = (row * k + kx as usize, j * k + kx as usize);
                let (sa, sb) = (inp.fused_exp_a(xa), inp.fused_exp_b(xb));
                let (a, b) = (inp.a[xa], inp.bt[xb]);
                if sa == i32::MIN || sb == i32::MIN || a.is_nan() || b.is_nan() {
                    nan = true;
                } else if a.is_infinite() || b.is_infinite() {
                    if a == 0.0 || b == 0.0 {
                        nan = true;
                    } else if a.is_sign_negative() != b.is_sign_negative() {
                        ninf = true;
                    } else {
                        pinf = true;
                    }
                }
            }
            if !(nan || pinf || ninf) {
                continue;
            }
            let at = (r - t.r0) * t.ld + j - t.c0;
            let cv = c[at];
            nan |= cv.is_nan();
            pinf |= cv == f32::INFINITY;
            ninf |= cv == f32::NEG_INFINITY;
            d[at] = if nan || (pinf && ninf) {
                f32::from_bits(crate::gemm::step::FUSED_NAN)
            } else if ninf {
                f32::NEG_INFINITY
            } else {
                f32::INFINITY
            };
        }
    }
}

/// MX `scale=block` promotion over the tile: `fma(s, partial, acc)` with
/// `s = 2^Xa * 2^Xb` (rounded as an f32 product; NaN for a NaN scale) from
/// the scales of k `k0`.
fn promote_scaled(inp: &Inputs, k0: usize, t: &Tile, st: &Step, bufs: &mut [Vec<f32>]) {
    let Some(sc) = inp.scales else {
        unreachable!("promotion by block scales needs the scales")
    };
    let k = inp.k;
    let mut d = std::mem::take(&mut bufs[st.dst]);
    let (acc, part) = (&bufs[st.src[0]], &bufs[st.src[1]]);
    for r in t.r0..t.r1 {
        let ea = sc.xa[inp.rows[r] * k + k0];
        let lr = (r - t.r0) * t.ld;
        for x in 0..t.ld {
            let j = t.c0 + x;
            let s = if j >= t.c1 {
                1.0 // padding columns
            } else {
                let eb = sc.xb[j * k + k0];
                if ea == i32::MIN || eb == i32::MIN {
                    f32::NAN
                } else {
                    pow2_f32(ea) * pow2_f32(eb)
                }
            };
            d[lr + x] = s.mul_add(part[lr + x], acc[lr + x]);
        }
    }
    bufs[st.dst] = d;
}

struct Tile {
    r0: usize,
    r1: usize,
    c0: usize,
    c1: usize,
    ld: usize,
}

#[allow(clippy::too_many_arguments)]
fn fused_tile(
    isa: Isa,
    lanes: Lanes,
    inp: &Inputs,
    dec: &Dec,
    p: Params,
    ks: &[Option<u32>],
    t: &Tile,
    c: &[f32],
    d: &mut [f32],
) {
    match (isa, lanes) {
        // chosen only where the CPU runs AVX-512 (`run`)
        #[cfg(target_arch = "x86_64")]
        (_, Lanes::Words) if is_x86_feature_detected!("avx512vpopcntdq") => unsafe {
            words::avx512_vpopcnt(inp, dec, p, ks, t, c, d)
        },
        #[cfg(target_arch = "x86_64")]
        (_, Lanes::Words) => unsafe { words::avx512(inp, dec, p, ks, t, c, d) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, Lanes::Narrow) => unsafe { x86::avx512_narrow(inp, dec, p, ks, t, c, d) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, _) => unsafe { x86::avx512_wide(inp, dec, p, ks, t, c, d) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, Lanes::Narrow) => unsafe { x86::avx2_narrow(inp, dec, p, ks, t, c, d) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, _) => unsafe { x86::avx2_wide(inp, dec, p, ks, t, c, d) },
        (_, Lanes::Narrow) => tile_narrow(inp, dec, p, ks, t, c, d),
        (_, _) => tile_wide(inp, dec, p, ks, t, c, d),
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512cd,avx2,bmi1,bmi2,lzcnt")]
    pub(super) unsafe fn avx512_wide(
        i: &Inputs,
        d: &Dec,
        p: Params,
        ks: &[Option<u32>],
        t: &Tile,
        c: &[f32],
        o: &mut [f32],
    ) {
        tile_wide(i, d, p, ks, t, c, o)
    }
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt")]
    pub(super) unsafe fn avx2_narrow(
        i: &Inputs,
        d: &Dec,
        p: Params,
        ks: &[Option<u32>],
        t: &Tile,
        c: &[f32],
        o: &mut [f32],
    ) {
        tile_narrow(i, d, p, ks, t, c, o)
    }
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt")]
    pub(super) unsafe fn avx2_wide(
        i: &Inputs,
        d: &Dec,
        p: Params,
        ks: &[Option<u32>],
        t: &Tile,
        c: &[f32],
        o: &mut [f32],
    ) {
        tile_wide(i, d, p, ks, t, c, o)
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512cd,avx2,bmi1,bmi2,lzcnt")]
    pub(super) unsafe fn avx512_narrow(
        i: &Inputs,
        d: &Dec,
        p: Params,
        ks: &[Option<u32>],
        t: &Tile,
        c: &[f32],
        o: &mut [f32],
    ) {
        tile_narrow(i, d, p, ks, t, c, o)
    }
}

/// C's decomposition with emin -126: `C = Xc * 2^(ec - 23)` (a zero C takes
/// part in M at -126).
#[inline(always)]
fn split_c(x: f32) -> (u64, i32) {
    let b = x.to_bits();
    let field = ((b >> 23) & 0xFF) as i32;
    let mant = (b & 0x7F_FFFF) as u64;
    let implicit = (field != 0) as u64;
    (mant | implicit << 23, field.max(1) - 127)
}

/// C's aligned, truncated term `floor(Xc * 2^(F - 23 - (M - ec)))`, signed.
#[inline(always)]
fn c_term(c: f32, m: i32, f: u32) -> i64 {
    let (xc, ec) = split_c(c);
    let d = (m - ec) as u32;
    let v = if f >= 23 {
        (xc << (f - 23)) >> d.min(63)
    } else {
        xc >> (d + 23 - f).min(63)
    };
    if c.is_sign_negative() {
        -(v as i64)
    } else {
        v as i64
    }
}

macro_rules! tile_impl {
    ($name:ident, $lanes:expr, $int:ty, $uint:ty, $bits:expr) => {
        #[inline(always)]
        fn $name(i: &Inputs, d: &Dec, p: Params, ks: &[Option<u32>], t: &Tile, c: &[f32], o: &mut [f32]) {
            const W: usize = $lanes;
            let k = i.k;
            let kidx: Vec<usize> = ks.iter().map(|x| x.map_or(k, |v| v as usize)).collect();
            for j in (t.c0..t.c1).step_by(W) {
                for r in t.r0..t.r1 {
                    let xa = &d.xa[r * (k + 1)..(r + 1) * (k + 1)];
                    let ea = &d.ea[r * (k + 1)..(r + 1) * (k + 1)];
                    let sa = &d.sa[r * (k + 1)..(r + 1) * (k + 1)];
                    let lr = (r - t.r0) * t.ld;
                    let cv: &[f32; W] = c[lr + j - t.c0..][..W].try_into().unwrap();
                    // M: the largest nominal exponent (C's and the products')
                    let mut m = [0i32; W];
                    for l in 0..W {
                        m[l] = split_c(cv[l]).1;
                    }
                    for &kx in &kidx {
                        let e0 = ea[kx];
                        let at = d.b_at(k, kx, j);
                        let eb: &[i32; W] = d.b[at + 16..][..W].try_into().unwrap();
                        for l in 0..W {
                            m[l] = m[l].max(e0 + eb[l]);
                        }
                    }
                    let mut s = [0 as $int; W];
                    for &kx in &kidx {
                        let (x0, e0) = (xa[kx] as $uint, ea[kx] - p.r0 as i32);
                        let at = d.b_at(k, kx, j);
                        let xb: &[i32; W] = d.b[at..][..W].try_into().unwrap();
                        let eb: &[i32; W] = d.b[at + 16..][..W].try_into().unwrap();
                        // the lanes' sign bits
                        let neg = (d.bs[(j / 16) * (k + 1) + kx] ^ sa[kx]) >> (j % 16);
                        for l in 0..W {
                            let sh = (m[l] - e0 - eb[l]) as u32;
                            let v = (x0.wrapping_mul(xb[l] as $uint) >> sh.min($bits - 1)) as $int;
                            s[l] = s[l].wrapping_add(if neg >> l & 1 != 0 { v.wrapping_neg() } else { v });
                        }
                    }
                    let out: &mut [f32; W] = (&mut o[lr + j - t.c0..][..W]).try_into().unwrap();
                    for l in 0..W {
                        out[l] = finish(s[l] as i64, m[l], cv[l], p);
                    }
                }
            }
        }
    };
}

tile_impl!(tile_narrow, 16, i32, u32, 32);
tile_impl!(tile_wide, 8, i64, u64, 64);

/// The fused sum's result from the products' sum `sp` and C.
#[inline(always)]
fn finish(sp: i64, m: i32, c: f32, p: Params) -> f32 {
    if !c.is_finite() {
        return if c.is_nan() {
            f32::from_bits(crate::gemm::step::FUSED_NAN)
        } else {
            c
        };
    }
    let s = sp + c_term(c, m, p.f);
    if s == 0 {
        return 0.0; // an integer adder has no -0
    }
    if 63 - s.unsigned_abs().leading_zeros() as i32 + m - p.f as i32 >= 128 {
        return if s < 0 { f32::NEG_INFINITY } else { f32::INFINITY };
    }
    rz(s < 0, s.unsigned_abs(), m - p.f as i32, p.out)
}

/// Fast path of the reference rounding: `step::round_exact(.., Round::Rz)`
/// for a 64-bit magnitude (test `rz_matches_round_exact`).
#[inline(always)]
fn rz(neg: bool, mag: u64, exp: i32, out: u32) -> f32 {
    let lead = 63 - mag.leading_zeros() as i32 + exp;
    let q = lead.max(-126) - out as i32;
    let m = if q <= exp {
        mag << (exp - q) as u32
    } else {
        let sh = (q - exp) as u32;
        if sh >= 64 {
            0
        } else {
            mag >> sh
        }
    };
    let v = if m != 0 && q + (63 - m.leading_zeros() as i32) > 127 {
        (((1u64 << (out + 1)) - 1) as f64 * pow2(127 - out as i32)) as f32
    } else {
        (m as f64 * pow2(q)) as f32
    };
    if neg {
        -v
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::step::{round_exact, Exact, Round};
    use crate::order::InType;

    #[test]
    fn rz_matches_round_exact() {
        let mut s = 7u64;
        for _ in 0..200_000 {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let mag = (s >> (s % 64)) | 1;
            let exp = ((s >> 40) % 400) as i32 - 250;
            let out = [23, 13, 10, 7][(s >> 20) as usize % 4];
            let neg = s & 1 == 1;
            let want = round_exact(
                Exact {
                    neg,
                    mag: mag as u128,
                    exp,
                },
                out,
                Round::Rz,
            );
            assert_eq!(rz(neg, mag, exp, out).to_bits(), want.to_bits(), "{mag} {exp} {out}");
        }
    }

    /// The word pair `(σ, σ·(x << l))` as one i32 (`x << l` below 2^15; σ = -1
    /// if `neg`, else 1): `vpmaddwd` of two pairs is `σa·σb·(xa·xb << (la + lb) + 1)`.
    fn pair(x: u32, l: u32, neg: bool) -> i32 {
        let lo = (x << l) as i32;
        debug_assert!(lo < 1 << 15);
        if neg {
            ((0xFFFF_u32 << 16) | (-lo) as u16 as u32) as i32
        } else {
            ONE_PAIR | lo
        }
    }

    #[test]
    fn pairs_multiply_to_signed_products_plus_sign() {
        // y = σa σb (Xa Xb << (la + lb) + 1), as vpmaddwd reads two word pairs
        for (fi, f) in [(7, 25), (10, 25), (3, 13), (3, 25), (2, 27), (7, 24), (23, 0)] {
            let Some((la, lb)) = pair_shifts(fi, f) else {
                assert_eq!(fi, 23);
                continue;
            };
            assert_eq!(la + lb, f.saturating_sub(2 * fi) + 1);
            let top = (1u32 << (fi + 1)) - 1;
            for (xa, xb) in [(top, top), (1, top), (0, 5), (top, 0), (0, 0)] {
                for (na, nb) in [(false, false), (true, false), (false, true), (true, true)] {
                    let (a, b) = (pair(xa, la, na), pair(xb, lb, nb));
                    let word = |v: i32, h: u32| (v >> (16 * h)) as i16 as i64;
                    let y = word(a, 0) * word(b, 0) + word(a, 1) * word(b, 1);
                    let sg = if na != nb { -1 } else { 1 };
                    assert_eq!(
                        y,
                        sg * (((xa as i64 * xb as i64) << (la + lb)) + 1),
                        "{fi} {f} {xa} {xb}"
                    );
                }
            }
        }
        assert_eq!(pair(0, 7, false), ONE_PAIR);
        assert_eq!(pair_shifts(7, 30), None);
        assert_eq!(pair_shifts(10, 40), None);
        assert_eq!(pair_shifts(7, 25), Some((7, 5)));
    }

    /// `words::split_block` against the scalar `split` and `pair` (the
    /// decomposition `run` did per element before).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn split_block_matches_split_and_pair() {
        if Isa::detect() != Isa::Avx512 {
            return;
        }
        let mut s = 3u64;
        let mut next = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        for t in [InType::Bf16, InType::F16, InType::E4M3, InType::E5M2] {
            let (fi, emin) = (t.frac_bits(), t.emin());
            let (la, _) = pair_shifts(fi, 25).unwrap();
            let (mut blocks, mut refused) = (0, 0);
            for round in 0..4_000 {
                let len = 1 + next() as usize % 16;
                let v: Vec<f32> = (0..len)
                    .map(|_| match next() % 16 {
                        0 => 0.0,
                        1 => -0.0,
                        2 => f32::INFINITY,
                        3 => f32::NAN,
                        // any pattern: mostly not representable
                        4 if round % 8 == 0 => f32::from_bits(next()),
                        _ => {
                            // a value of the type: fi fraction bits, a small exponent
                            let m = (next() & ((1 << fi) - 1)) as f32 / (1 << fi) as f32;
                            let e = emin + (next() % 24) as i32;
                            let sign = if next() % 2 == 0 { 1.0 } else { -1.0 };
                            sign * (1.0 + m) * 2f32.powi(e)
                        }
                    })
                    .collect();
                let sx: Vec<i32> = (0..len)
                    .map(|_| {
                        if next() % 50 == 0 {
                            i32::MIN
                        } else {
                            next() as i32 % 9 - 4
                        }
                    })
                    .collect();
                let scaled = round % 2 == 0;
                let got = unsafe { words::split_block(&v, scaled.then_some(&sx[..]), fi, emin, la) };
                // the scalar decomposition of `run`
                let mut want = Some(([ONE_PAIR; 16], [ZERO_E; 16], 0u16, false));
                for (q, &x) in v.iter().enumerate() {
                    let sc = if scaled { sx[q] } else { 0 };
                    let w = want.as_mut().unwrap();
                    if !x.is_finite() || sc == i32::MIN {
                        w.3 = true;
                        continue;
                    }
                    let Some((xv, ev)) = split(x, fi, emin) else {
                        want = None;
                        break;
                    };
                    w.0[q] = pair(xv.unsigned_abs(), la, xv < 0);
                    w.1[q] = if xv == 0 { ev } else { ev + sc };
                    w.2 |= ((xv < 0) as u16) << q;
                }
                match (got, want) {
                    (Some(g), Some(w)) => {
                        blocks += 1;
                        assert_eq!(
                            (&g.0[..len], &g.1[..len], g.2, g.3),
                            (&w.0[..len], &w.1[..len], w.2, w.3),
                            "{t:?} {v:?}"
                        );
                    }
                    (None, None) => refused += 1,
                    (g, w) => panic!("{t:?} {v:?}: {:?} against {:?}", g.is_some(), w.is_some()),
                }
            }
            assert!(
                blocks > 1_000 && refused > 50,
                "{t:?}: {blocks} blocks, {refused} refused"
            );
        }
    }

    #[test]
    fn split_is_exact() {
        for t in [InType::Bf16, InType::F16, InType::E4M3, InType::E5M2, InType::F32] {
            let (fi, emin) = (t.frac_bits(), t.emin());
            for bits in (0u32..0x7F80_0000).step_by(9973).chain([1, 0x80_0000, 0x3F80_0000]) {
                let x = f32::from_bits(bits);
                if let Some((xv, e)) = split(x, fi, emin) {
                    assert_eq!(xv as f64 * 2f64.powi(e - fi as i32), x as f64, "{t:?} {x:e}");
                }
            }
        }
    }
}
