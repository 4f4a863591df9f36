//! The `separating` content class: inputs built so that different
//! accumulation orders give different bytes even after a narrow output
//! conversion (bf16, f16, FP8). Contract: docs/BI.md, "Power".
//!
//! # Design
//! Every K position is either *big* (about one in four, at least two) or
//! *small*, the same for every row and every column.
//! - **A.** At a big position every row holds the same power of two,
//!   `s_k 2^e_k` (`e_k` near the top of the input type's range), times the
//!   row's own factor (a sign, 2^-1 and a significand); at a small
//!   position each row holds its own random value near the bottom of the
//!   range (all significand bits of the type, an exponent offset per
//!   32-wide block of K: magnitudes that depend on the K position).
//! - **B, column j.** One to three *pairs* of big positions carry `+H_p`
//!   and `-H_p` products (`b = +-H_p / a`, exact: both are powers of two);
//!   every other big position is zero; small positions carry random values.
//!   `H_p = 2^(c + d_p)` where `2^c` is the size of a small product and the
//!   gap `d_p` is drawn per pair from 8 to 34 binades (within what the type
//!   can hold).
//!
//! Each pair cancels exactly in any order, so the result is the sum of the
//! small products *plus what each order's rounding lost while a partial
//! sum held an uncancelled `H`*: orders that group the terms differently
//! (split parts, k-tiles, lanes, fused groups, the reduction of the parts)
//! lose different bits, and with gaps above 16 + log2(K)/2 binades the
//! losses are as large as the result itself, so they survive a bf16, f16
//! or FP8 output. Smaller gaps separate the orders an f32 output can tell
//! apart. Because big positions hold the same value in every row up to the
//! row's factor, every row's pairs cancel: every row has the power, not
//! only the target.
//!
//! Every value is exact in the input type and finite; a function of the
//! seed, the row id (A) and the column (B) only.

use crate::format::pow2_f32;
use crate::order::InType;
use crate::rng::SplitMix64;

/// What the design needs of the input type: smallest subnormal and normal
/// exponents, largest exponent used for big values (the type's, capped at
/// 20), significand bits.
#[derive(Clone, Copy, Debug)]
struct Range {
    emin_sub: i32,
    emin: i32,
    ebig: i32,
    mbits: u32,
    /// Significand bits kept below the leading one (the content's `mant_bits`).
    kept: u32,
}

impl Range {
    fn of(ty: InType, mant_bits: Option<u32>) -> Range {
        let (emin_sub, emin, emax) = match ty.params() {
            None => (-149, -126, 127),
            Some(m) => (m.emin() - m.mbits as i32, m.emin(), m.emax()),
        };
        Range {
            emin_sub,
            emin,
            ebig: emax.min(20),
            mbits: ty.frac_bits(),
            kept: mant_bits.map_or(ty.frac_bits(), |b| b.min(ty.frac_bits())),
        }
    }

    /// Centre exponent of small values: -1, or lower where the type is
    /// short of range for the big gaps (e4m3: -5).
    fn small_centre(&self) -> i32 {
        (self.emin + 1).max((-1).min(self.ebig - 16))
    }
}

/// `sign * 2^e * (1 + frac / 2^mbits)` as f32 (e a normal f32 exponent).
fn value(negative: bool, e: i32, frac: u32, mb: u32) -> f32 {
    let bits = ((negative as u32) << 31) | (((e + 127) as u32) << 23) | (frac << (23 - mb));
    f32::from_bits(bits)
}

/// `sign * 2^e` for any exponent down to the f32 subnormals.
/// -1 or +1.
fn sign(negative: bool) -> f32 {
    if negative {
        -1.0
    } else {
        1.0
    }
}

/// The gaps (binades between a small product and H) drawn per pair.
const GAP_MIN: i32 = 8;
const GAP_MAX: i32 = 34;

/// The design shared by every row and column of one seed, type and K.
#[derive(Clone, Debug)]
pub(super) struct Separating {
    range: Range,
    seed: u64,
    k: usize,
    /// Per K position: `Some((negative, e))` at a big position.
    big: Vec<Option<(bool, i32)>>,
    /// The big positions, in K order.
    big_at: Vec<usize>,
}

impl Separating {
    /// The design for `ty`, `seed` and `k`; small values keep `mant_bits`
    /// significand bits below the leading one (all of the type's: None).
    pub(super) fn new(ty: InType, seed: u64, k: usize, mant_bits: Option<u32>) -> Separating {
        let range = Range::of(ty, mant_bits);
        let mut r = SplitMix64::for_item(seed ^ 0x5E9A_7A71, k as u64);
        let mut big: Vec<Option<(bool, i32)>> = vec![None; k];
        let draw = |r: &mut SplitMix64| Some((r.next_u32() & 1 == 1, range.ebig - r.below(3) as i32));
        // K = 1 has no pair to place: every position small
        for slot in big.iter_mut().filter(|_| k >= 2) {
            if r.chance(1, 2) {
                *slot = draw(&mut r);
            }
        }
        // at least one pair of big positions when K allows
        while k >= 2 && big.iter().filter(|b| b.is_some()).count() < 2 {
            let i = r.below(k as u64) as usize;
            big[i] = draw(&mut r);
        }
        let big_at = (0..k).filter(|&i| big[i].is_some()).collect();
        Separating {
            range,
            seed,
            k,
            big,
            big_at,
        }
    }

    /// The exponent offset of K-block `kk / 32` (-1..=2).
    fn block_offset(&self, kk: usize) -> i32 {
        SplitMix64::for_item(self.seed ^ 0x0FF5_E700, (kk / 32) as u64).below(4) as i32 - 1
    }

    /// A small value: random sign and significand, exponent the small
    /// centre + [-1, 1] + the block offset (within the type's normals).
    fn small(&self, r: &mut SplitMix64, kk: usize) -> f32 {
        let g = self.range;
        let e = (g.small_centre() + r.below(3) as i32 - 1 + self.block_offset(kk)).clamp(g.emin, g.ebig);
        let frac = r.next_u32() & ((1u32 << g.mbits) - 1) & !((1u32 << (g.mbits - g.kept)) - 1);
        value(r.next_u32() & 1 == 1, e, frac, g.mbits)
    }

    /// Row `id` of A (`K` values). The row's big values are the shared
    /// powers of two times the row's own factor `t 2^-1 m` (a sign and a
    /// significand of the type's bits): a pair's two
    /// products scale alike, so they still cancel exactly, while the rows'
    /// largest values differ (a kernel that scales by the batch's amax sees
    /// other rows change).
    pub(super) fn a_row(&self, id: u64) -> Vec<f32> {
        let g = self.range;
        let mut f = SplitMix64::for_item(self.seed ^ 0x0B16_5CA1, id);
        let flip = f.next_u32() & 1 == 1;
        // one binade down: a significand times the type's top binade may
        // pass its largest value (e4m3: 1.875 x 2^8)
        let shift = 1;
        let frac = f.next_u32() & ((1u32 << g.mbits) - 1) & !((1u32 << (g.mbits - g.kept)) - 1);
        let factor = value(false, 0, frac, g.mbits);
        let mut r = SplitMix64::for_item(self.seed ^ 0xA5E9_0000, id);
        (0..self.k)
            .map(|kk| match self.big[kk] {
                Some((neg, e)) => sign(neg ^ flip) * pow2_f32(e - shift) * factor,
                None => self.small(&mut r, kk),
            })
            .collect()
    }

    /// Column `j`'s big entries: `(position, value)`, two per pair.
    fn column_pairs(&self, j: usize) -> Vec<(usize, f32)> {
        let g = self.range;
        let mut r = SplitMix64::for_item(self.seed ^ 0xC0_1A55, j as u64);
        let n_big = self.big_at.len();
        let pairs = (1 + r.below(4) as usize).min(n_big / 2);
        let mut chosen: Vec<usize> = Vec::with_capacity(2 * pairs);
        while chosen.len() < 2 * pairs {
            let k = self.big_at[r.below(n_big as u64) as usize];
            if !chosen.contains(&k) {
                chosen.push(k);
            }
        }
        let small_product = 2 * g.small_centre() + 1;
        let mut out = Vec::with_capacity(2 * pairs);
        for pair in chosen.chunks(2) {
            let (n1, e1) = self.big[pair[0]].expect("big position");
            let (n2, e2) = self.big[pair[1]].expect("big position");
            // b = H / a must stay within the type: a subnormal at least,
            // 2^ebig at most
            let lo = e1.max(e2) + g.emin_sub;
            let hi = e1.min(e2) + g.ebig;
            let gap = GAP_MIN + r.below((GAP_MAX - GAP_MIN + 1) as u64) as i32;
            let h = (small_product + gap).clamp(lo, hi);
            let neg = r.next_u32() & 1 == 1;
            out.push((pair[0], sign(neg ^ n1) * pow2_f32(h - e1)));
            out.push((pair[1], sign(!neg ^ n2) * pow2_f32(h - e2)));
        }
        out
    }

    /// B, `[K, N]` row-major.
    pub(super) fn b(&self, n: usize) -> Vec<f32> {
        let mut b = Vec::with_capacity(self.k * n);
        for kk in 0..self.k {
            let mut r = SplitMix64::for_item(self.seed ^ 0xB5E9_0000, kk as u64);
            for _ in 0..n {
                // big positions are zero unless a column's pair sits there
                let v = if self.big[kk].is_some() {
                    0.0
                } else {
                    self.small(&mut r, kk)
                };
                b.push(v);
            }
        }
        for j in 0..n {
            for (kk, v) in self.column_pairs(j) {
                b[kk * n + j] = v;
            }
        }
        b
    }
}
