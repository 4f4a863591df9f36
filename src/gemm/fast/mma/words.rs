//! The AVX-512 fused-sum kernel on word pairs: one `vpmaddwd` a product,
//! the sign folded into it, the sum rounded by the float unit. Bit for bit
//! the generic evaluator's (docs/ORDERS.md, "The fused sum"), as the narrow
//! kernel of `super` is; used where both significands, pre-shifted, fit 15
//! bits (`super::pair_shifts`), a chunk has at most 32 terms and F <= 29.
//!
//! Products. Every element is stored as the word pair `(σ, σ·X << l)`
//! (`split_block`; σ = ±1, l = `la` for A and `lb` for B, `la + lb = L + 1`), so
//! one `vpmaddwd` gives `y = σa·σb·(x + 1)` with `x = Xa·Xb << (L + 1)`. An
//! arithmetic right shift by `d + 1` (`d = M + r0 - e` as in `super`) then
//! gives the term `floor(x / 2^(d + 1)) = floor(Xa·Xb·2^L / 2^d)` where
//! y > 0 (the low L + 1 bits of x are zero, so the + 1 never carries into
//! the kept bits), and `-floor(..) - 1` where y < 0 (the shift of a one's
//! complement, `~x`). A chunk's sum adds back its count of negative terms:
//! the popcount of the XOR of A's and B's sign bits over the chunk. Zeros,
//! padding and non-finite inputs are the pair `(1, 0)` with sign bit 0.
//!
//! Rounding. `C`'s term is `trunc(C·2^(F - M))` (`vscalefps` toward zero,
//! then a truncating conversion); the i32 sum converts to f32 toward zero,
//! is scaled by `2^(M - F)` toward zero and loses its low `23 - out` bits:
//! truncations onto nested grids compose to the one truncation of
//! `step::round_exact(.., Rz)` at `out` bits (subnormals included). Lanes
//! whose sum with C's term could leave i32, whose sum could reach `2^128`
//! (±inf in `finish`), or whose C is not finite are redone by `finish`.

use super::{finish, Dec, Inputs, Params, Tile, ONE_PAIR, TILE_ROWS, ZERO_E};
use std::arch::x86_64::*;

/// The fused sum over `ks` for the tile, where the CPU has VPOPCNTDQ.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512cd,avx512vpopcntdq,avx2,bmi1,bmi2,lzcnt")]
pub(super) unsafe fn avx512_vpopcnt(
    i: &Inputs,
    d: &Dec,
    p: Params,
    ks: &[Option<u32>],
    t: &Tile,
    c: &[f32],
    o: &mut [f32],
) {
    dispatch::<true>(i, d, p, ks, t, c, o)
}

/// The same where it lacks VPOPCNTDQ (the counts by a nibble table).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512cd,avx2,bmi1,bmi2,lzcnt")]
pub(super) unsafe fn avx512(i: &Inputs, d: &Dec, p: Params, ks: &[Option<u32>], t: &Tile, c: &[f32], o: &mut [f32]) {
    dispatch::<false>(i, d, p, ks, t, c, o)
}

/// Fixed chunk lengths unrolled; contiguous k lists read at constant
/// offsets from their first k.
#[inline(always)]
unsafe fn dispatch<const VP: bool>(
    i: &Inputs,
    d: &Dec,
    p: Params,
    ks: &[Option<u32>],
    t: &Tile,
    c: &[f32],
    o: &mut [f32],
) {
    // `run` picks this kernel for chunks of at most 32 terms; more would
    // panic at the slice below, never run on a truncated chunk
    let mut at = [0usize; 32];
    for (a, x) in at.iter_mut().zip(ks) {
        *a = x.map_or(i.k, |v| v as usize);
    }
    let kidx = &at[..ks.len()];
    let contig = kidx.windows(2).all(|w| w[1] == w[0] + 1);
    match (kidx.len(), contig) {
        (8, false) => body::<8, false, VP>(i, d, p, kidx, t, c, o),
        (16, false) => body::<16, false, VP>(i, d, p, kidx, t, c, o),
        (32, false) => body::<32, false, VP>(i, d, p, kidx, t, c, o),
        (8, true) => body::<8, true, VP>(i, d, p, kidx, t, c, o),
        (16, true) => body::<16, true, VP>(i, d, p, kidx, t, c, o),
        (32, true) => body::<32, true, VP>(i, d, p, kidx, t, c, o),
        _ => body::<0, false, VP>(i, d, p, kidx, t, c, o),
    }
}

/// The number of set bits of each i32 lane (`vpopcntd` where VP, else a
/// nibble table).
#[inline(always)]
unsafe fn popcount<const VP: bool>(x: __m512i) -> __m512i {
    if VP {
        _mm512_popcnt_epi32(x)
    } else {
        let table = _mm512_set4_epi32(0x0403_0302, 0x0302_0201, 0x0302_0201, 0x0201_0100);
        let low = _mm512_set1_epi8(0x0F);
        let lo = _mm512_and_si512(x, low);
        let hi = _mm512_and_si512(_mm512_srli_epi32(x, 4), low);
        let bytes = _mm512_add_epi8(_mm512_shuffle_epi8(table, lo), _mm512_shuffle_epi8(table, hi));
        _mm512_madd_epi16(_mm512_maddubs_epi16(bytes, _mm512_set1_epi8(1)), _mm512_set1_epi16(1))
    }
}

/// The kernel for chunks of KC terms (0: any up to 32); CONTIG: the k list
/// is `k0, k0 + 1, ..`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // q indexes kidx and, for fixed KC, es
unsafe fn body<const KC: usize, const CONTIG: bool, const VP: bool>(
    i: &Inputs,
    d: &Dec,
    p: Params,
    kidx: &[usize],
    t: &Tile,
    c: &[f32],
    o: &mut [f32],
) {
    const RZ: i32 = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    let k = i.k;
    let nk = if KC > 0 { KC } else { kidx.len() };
    debug_assert!(nk == kidx.len() && nk <= 32 && p.f <= 29);
    let k0 = kidx.first().copied().unwrap_or(0);
    let zero = _mm512_setzero_si512();
    // the chunk's sign bits of A per row of the tile (bit q: A's term q is negative)
    let mut sab = [0u32; TILE_ROWS];
    for (r, w) in (t.r0..t.r1).zip(sab.iter_mut()) {
        let sa = &d.sa[r * (k + 1)..(r + 1) * (k + 1)];
        *w = if CONTIG && KC > 0 && KC.is_multiple_of(16) {
            // the sign words are 0 or 0xFFFF: their top bits, 16 at a time
            let run = &sa[k0..k0 + KC];
            (0..KC / 16).fold(0, |w, h| {
                let v = _mm256_loadu_si256(run[16 * h..].as_ptr() as *const _);
                w | (_mm256_movepi16_mask(v) as u32) << (16 * h)
            })
        } else {
            kidx.iter()
                .enumerate()
                .fold(0, |w, (q, &kx)| w | ((sa[kx] & 1) as u32) << q)
        };
    }
    let shift1 = _mm512_set1_epi32(p.r0 as i32 + 1);
    let fv = _mm512_set1_epi32(p.f as i32);
    // |sum| above this may leave i32 once C's term (below 2^(F + 1)) is added
    let safe = _mm512_set1_epi32(i32::MAX - (1 << (p.f + 1)) + 1);
    let keep = _mm512_set1_epi32(!((1i32 << (23 - p.out)) - 1));
    let huge = _mm512_set1_epi32(97 + p.f as i32);
    for j in (t.c0..t.c1).step_by(16) {
        let bp = d.b.as_ptr().add(d.b_at(k, 0, j));
        let bsp = d.bs.as_ptr().add((j / 16) * (k + 1));
        // per column, the chunk's sign bits of B
        let mut sbv = zero;
        for (q, &kx) in kidx.iter().enumerate() {
            sbv = _mm512_mask_or_epi32(sbv, *bsp.add(kx), sbv, _mm512_set1_epi32(1 << q));
        }
        for r in t.r0..t.r1 {
            let xa = &d.xa[r * (k + 1)..(r + 1) * (k + 1)];
            let ea = &d.ea[r * (k + 1)..(r + 1) * (k + 1)];
            let lr = (r - t.r0) * t.ld;
            let cp = c[lr + j - t.c0..][..16].as_ptr();
            let cb = _mm512_loadu_si512(cp as *const _);
            let field = _mm512_and_si512(_mm512_srli_epi32(cb, 23), _mm512_set1_epi32(0xFF));
            let ec = _mm512_sub_epi32(_mm512_max_epi32(field, _mm512_set1_epi32(1)), _mm512_set1_epi32(127));
            // M: two running maxima (max is exact in any grouping)
            let e_at = |q: usize| {
                let kx = if CONTIG { k0 + q } else { *kidx.get_unchecked(q) };
                let eb = _mm512_loadu_si512(bp.add(kx * 32 + 16) as *const _);
                _mm512_add_epi32(eb, _mm512_set1_epi32(*ea.get_unchecked(kx)))
            };
            let mut es = [zero; KC];
            let (mut m0, mut m1) = (ec, ec);
            let mut q = 0;
            while q + 2 <= nk {
                let (e0, e1) = (e_at(q), e_at(q + 1));
                if KC > 0 {
                    es[q] = e0;
                    es[q + 1] = e1;
                }
                m0 = _mm512_max_epi32(m0, e0);
                m1 = _mm512_max_epi32(m1, e1);
                q += 2;
            }
            if q < nk {
                let e0 = e_at(q);
                if KC > 0 {
                    es[q] = e0;
                }
                m0 = _mm512_max_epi32(m0, e0);
            }
            let m = _mm512_max_epi32(m0, m1);
            // terms: y = σ(x + 1) shifted right by d + 1 (arithmetic); i32
            // lanes wrap, so two partial sums give the sum's bits
            let m1s = _mm512_add_epi32(m, shift1);
            let term = |q: usize| {
                let kx = if CONTIG { k0 + q } else { *kidx.get_unchecked(q) };
                let e = if KC > 0 { es[q] } else { e_at(q) };
                let bw = _mm512_loadu_si512(bp.add(kx * 32) as *const _);
                let y = _mm512_madd_epi16(bw, _mm512_set1_epi32(*xa.get_unchecked(kx) as i32));
                _mm512_srav_epi32(y, _mm512_sub_epi32(m1s, e))
            };
            let (mut s0, mut s1) = (zero, zero);
            let mut q = 0;
            while q + 2 <= nk {
                s0 = _mm512_add_epi32(s0, term(q));
                s1 = _mm512_add_epi32(s1, term(q + 1));
                q += 2;
            }
            if q < nk {
                s0 = _mm512_add_epi32(s0, term(q));
            }
            let negs = popcount::<VP>(_mm512_xor_si512(sbv, _mm512_set1_epi32(sab[r - t.r0] as i32)));
            let s = _mm512_add_epi32(_mm512_add_epi32(s0, s1), negs);
            // C's term trunc(C * 2^(F - M)), the sum, rounded
            let fm = _mm512_cvtepi32_ps(_mm512_sub_epi32(fv, m));
            let tc = _mm512_cvtt_roundps_epi32::<_MM_FROUND_NO_EXC>(_mm512_scalef_round_ps::<RZ>(
                _mm512_castsi512_ps(cb),
                fm,
            ));
            let ovf = _mm512_cmpgt_epi32_mask(_mm512_abs_epi32(s), safe);
            let sf = _mm512_cvt_roundepi32_ps::<RZ>(_mm512_add_epi32(s, tc));
            let v = _mm512_scalef_round_ps::<RZ>(sf, _mm512_sub_ps(_mm512_setzero_ps(), fm));
            let bits = _mm512_and_si512(_mm512_castps_si512(v), keep);
            let op = o[lr + j - t.c0..][..16].as_mut_ptr();
            _mm512_storeu_si512(op as *mut _, bits);
            // rare lanes: a sum that may leave i32, a sum that may reach
            // 2^128 (|sum| < 2^31: only where M - F + 30 >= 128), C not
            // finite (its exponent field 0xFF gives M >= 128 > 97 + F, F <= 29)
            let special = ovf | _mm512_cmpgt_epi32_mask(m, huge);
            if special != 0 {
                let (mut sv, mut mv) = ([0i32; 16], [0i32; 16]);
                _mm512_storeu_si512(sv.as_mut_ptr() as *mut _, s);
                _mm512_storeu_si512(mv.as_mut_ptr() as *mut _, m);
                for l in (0..16).filter(|l| special >> l & 1 != 0) {
                    *op.add(l) = finish(sv[l] as i64, mv[l], *cp.add(l), p);
                }
            }
        }
    }
}

/// Up to 16 inputs (and their fused scale exponents) decomposed as
/// `super::split` and the scalar loops of `super::run` do, the significands
/// as word pairs pre-shifted by `l`: per input the pair, e (`ZERO_E` for
/// zeros and non-finite inputs), the sign bits, and whether one is not
/// finite (or its scale is NaN). None if an input is not representable.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(super) unsafe fn split_block(
    v: &[f32],
    sx: Option<&[i32]>,
    fi: u32,
    emin: i32,
    l: u32,
) -> Option<([i32; 16], [i32; 16], u16, bool)> {
    debug_assert!(v.len() <= 16 && sx.is_none_or(|s| s.len() == v.len()));
    let live = ((1u32 << v.len()) - 1) as u16;
    let b = _mm512_maskz_loadu_epi32(live, v.as_ptr() as *const i32);
    let sx = match sx {
        Some(s) => _mm512_maskz_loadu_epi32(live, s.as_ptr()),
        None => _mm512_setzero_si512(),
    };
    let field = _mm512_and_si512(_mm512_srli_epi32(b, 23), _mm512_set1_epi32(0xFF));
    let bad = _mm512_cmpeq_epi32_mask(field, _mm512_set1_epi32(0xFF))
        | _mm512_cmpeq_epi32_mask(sx, _mm512_set1_epi32(i32::MIN));
    let zero = _mm512_testn_epi32_mask(b, _mm512_set1_epi32(i32::MAX));
    let sig = _mm512_mask_or_epi32(
        _mm512_and_si512(b, _mm512_set1_epi32(0x7F_FFFF)),
        _mm512_cmpneq_epi32_mask(field, _mm512_setzero_si512()),
        _mm512_and_si512(b, _mm512_set1_epi32(0x7F_FFFF)),
        _mm512_set1_epi32(1 << 23),
    );
    let ex = _mm512_sub_epi32(_mm512_max_epi32(field, _mm512_set1_epi32(1)), _mm512_set1_epi32(127));
    let e = _mm512_max_epi32(ex, _mm512_set1_epi32(emin));
    let sh = _mm512_add_epi32(_mm512_sub_epi32(e, ex), _mm512_set1_epi32(23 - fi as i32));
    // bits below the type's quantum, or a shift past the significand
    let below = _mm512_sllv_epi32(sig, _mm512_sub_epi32(_mm512_set1_epi32(32), sh));
    let lost = _mm512_test_epi32_mask(below, below) | _mm512_cmpge_epi32_mask(sh, _mm512_set1_epi32(24));
    if lost & !zero & !bad & live != 0 {
        return None;
    }
    let x = _mm512_sllv_epi32(_mm512_srlv_epi32(sig, sh), _mm512_set1_epi32(l as i32));
    let neg = _mm512_movepi32_mask(b) & !zero & !bad;
    let pos = _mm512_or_si512(x, _mm512_set1_epi32(ONE_PAIR));
    let negp = _mm512_or_si512(
        _mm512_and_si512(_mm512_sub_epi32(_mm512_setzero_si512(), x), _mm512_set1_epi32(0xFFFF)),
        _mm512_set1_epi32(-1 << 16),
    );
    let pairs = _mm512_mask_mov_epi32(_mm512_maskz_mov_epi32(!bad, pos), neg, negp);
    let pairs = _mm512_mask_mov_epi32(pairs, bad, _mm512_set1_epi32(ONE_PAIR));
    let es = _mm512_mask_mov_epi32(_mm512_add_epi32(e, sx), zero | bad, _mm512_set1_epi32(ZERO_E));
    let (mut po, mut eo) = ([0i32; 16], [0i32; 16]);
    _mm512_storeu_si512(po.as_mut_ptr() as *mut _, pairs);
    _mm512_storeu_si512(eo.as_mut_ptr() as *mut _, es);
    Some((po, eo, neg & live, bad & live != 0))
}

/// A row of inputs (A's row or Bᵀ's column, with its fused scale exponents)
/// split in blocks of 16 (`split_block`); each block's pairs, e and sign
/// bits are handed to `place` with the block's first index. Whether an
/// input is not finite (or its scale NaN); None if one is not representable.
///
/// # Safety
/// The CPU runs AVX-512 (F, BW, DQ, VL).
pub(super) unsafe fn split_row(
    v: &[f32],
    sx: Option<&[i32]>,
    fi: u32,
    emin: i32,
    l: u32,
    mut place: impl FnMut(usize, &[i32], &[i32], u16),
) -> Option<bool> {
    let mut bad = false;
    for k0 in (0..v.len()).step_by(16) {
        let k1 = (k0 + 16).min(v.len());
        let (p, ev, neg, b) = split_block(&v[k0..k1], sx.map(|s| &s[k0..k1]), fi, emin, l)?;
        place(k0, &p[..k1 - k0], &ev[..k1 - k0], neg);
        bad |= b;
    }
    Some(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn popcount_by_table_counts_bits() {
        if !is_x86_feature_detected!("avx512bw") {
            return;
        }
        #[target_feature(enable = "avx512f,avx512bw")]
        unsafe fn counts(x: &[u32; 16]) -> [i32; 16] {
            let mut out = [0i32; 16];
            let v = popcount::<false>(_mm512_loadu_si512(x.as_ptr() as *const _));
            _mm512_storeu_si512(out.as_mut_ptr() as *mut _, v);
            out
        }
        let mut s = 11u64;
        for _ in 0..2_000 {
            let mut x = [0u32; 16];
            for w in &mut x {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *w = (s >> 32) as u32 >> (s % 33).min(31);
            }
            x[0] = u32::MAX;
            let got = unsafe { counts(&x) };
            for (g, w) in got.iter().zip(x) {
                assert_eq!(*g as u32, w.count_ones(), "{w:#x}");
            }
        }
    }
}
