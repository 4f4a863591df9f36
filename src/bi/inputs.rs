//! Deterministic input rows for the checker: every row is drawn from the run
//! seed and its own row id (never from its position), so the same row can be
//! placed in any batch, at any position, and be the same bytes.

use super::content::{Content, Drawer};
use crate::order::{InType, Order};
use crate::rng::SplitMix64;

/// One input value of type `ty` (the element type an order's steps read;
/// f32 for fma/muladd): random sign and significand, exponent within +-8 of
/// 1 (narrower for 8-bit types), never zero, Inf or NaN.
fn draw(ty: InType, r: &mut SplitMix64) -> f32 {
    match ty.format() {
        None => {
            let sign = (r.next_u32() & 1) << 31;
            let exp = r.range_i64(127 - 8, 127 + 8) as u32;
            f32::from_bits(sign | exp << 23 | (r.next_u32() & 0x7F_FFFF))
        }
        Some(f) => loop {
            let bits = f.bits();
            let code = (r.next_u64() & ((1u64 << bits) - 1)) as u16;
            let v = f.decode_f32(code);
            let limit = if bits == 8 { 64.0 } else { 256.0 };
            if v.is_finite() && v != 0.0 && v.abs() <= limit && v.abs() >= 1.0 / limit {
                return v;
            }
        },
    }
}

/// The input type an order's steps read (f32 for fma/muladd).
pub fn input_of(order: &Order) -> InType {
    order.mma().map_or(InType::F32, |m| m.input)
}

/// Row ids: the target row is id 0; the other rows of a batch come from a
/// set (A = 0, B = 1) and their index in it.
pub fn other_id(set: u64, j: usize) -> u64 {
    1 + (set << 40) + j as u64
}

/// Rows of A and the shared B of one run.
#[derive(Clone, Debug)]
pub struct Rows {
    pub seed: u64,
    pub k: usize,
    pub n: usize,
    pub ty: InType,
    /// B, `[K, N]` row-major.
    pub b: Vec<f32>,
    /// How the values are drawn (default: the plain drawing).
    pub content: Content,
}

impl Rows {
    pub fn new(seed: u64, k: usize, n: usize, ty: InType) -> Rows {
        Rows::with_content(seed, k, n, ty, Content::default())
    }

    /// Rows drawn as `content` says (`bi::content`; the default is [`Rows::new`]).
    pub fn with_content(seed: u64, k: usize, n: usize, ty: InType, content: Content) -> Rows {
        let mut b = Vec::with_capacity(k * n);
        if content.is_plain() {
            for kk in 0..k {
                let mut r = SplitMix64::for_item(seed ^ 0xB0B0_B0B0, kk as u64);
                b.extend((0..n).map(|_| draw(ty, &mut r)));
            }
        } else {
            let d = Drawer::new(content, ty, seed, k);
            for kk in 0..k {
                b.extend(d.b_row(kk, n));
            }
        }
        Rows {
            seed,
            k,
            n,
            ty,
            b,
            content,
        }
    }

    /// One row of A, a function of the seed and the row id only.
    pub fn row(&self, id: u64) -> Vec<f32> {
        if !self.content.is_plain() {
            return Drawer::new(self.content, self.ty, self.seed, self.k).a_row(id);
        }
        let mut r = SplitMix64::for_item(self.seed ^ 0xA0A0_A0A0, id);
        (0..self.k).map(|_| draw(self.ty, &mut r)).collect()
    }

    /// A batch: the rows with these ids, in this order, `[ids.len(), K]`.
    pub fn batch(&self, ids: &[u64]) -> Vec<f32> {
        let mut a = Vec::with_capacity(ids.len() * self.k);
        for &id in ids {
            a.extend(self.row(id));
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_the_same_wherever_it_sits() {
        let r = Rows::new(5, 40, 3, InType::Bf16);
        let x = r.batch(&[other_id(0, 3), 0, other_id(1, 3)]);
        let y = r.batch(&[0]);
        assert_eq!(
            x[40..80].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        // the two sets differ
        assert_ne!(r.row(other_id(0, 3)), r.row(other_id(1, 3)));
    }

    #[test]
    fn values_are_representable_and_finite() {
        for ty in InType::ALL {
            let r = Rows::new(1, 256, 4, ty);
            for v in r.row(0).into_iter().chain(r.b.iter().copied()) {
                assert!(v.is_finite() && v != 0.0, "{}: {v}", ty.name());
                if let Some(f) = ty.format() {
                    let code = crate::format::encode_f32(v, f, &crate::format::CastPolicy::ieee(f), 0).unwrap();
                    assert_eq!(f.decode_f32(code).to_bits(), v.to_bits(), "{}: {v}", ty.name());
                }
            }
        }
    }
}
