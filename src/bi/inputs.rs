//! Deterministic input rows for the checker: every row is drawn from the run
//! seed and its own row id (never from its position), so the same row can be
//! placed in any batch, at any position, and be the same bytes.

use super::content::{Content, Drawer};
use crate::order::{InType, Order};
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};

/// How input values are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Draw {
    /// Random sign and significand, exponent within +-8 of 1 (8-bit types:
    /// magnitudes in [1/64, 64]; others [1/256, 256]): sums are inexact.
    #[default]
    Wide,
    /// Random sign and significand in one binade, magnitudes in [1, 2): with
    /// e4m3 (4 significant bits) every product is a multiple of 2^-6 below
    /// 4, so every partial sum of fewer than 2^16 of them is exact in f32
    /// and no accumulation order can change the result (the vacuity probes
    /// of the `seed000` matrix).
    Unit,
}

impl Draw {
    pub const fn name(self) -> &'static str {
        match self {
            Draw::Wide => "wide",
            Draw::Unit => "unit",
        }
    }
}

/// One input value of type `ty` (the element type an order's steps read;
/// f32 for fma/muladd) drawn as `how` says; never zero, Inf or NaN.
fn draw(ty: InType, how: Draw, r: &mut SplitMix64) -> f32 {
    if how == Draw::Unit {
        return loop {
            let sign = (r.next_u32() & 1) << 31;
            let v = f32::from_bits(sign | 127 << 23 | (r.next_u32() & 0x7F_FFFF));
            // keep the significand bits the type has (round toward zero
            // stays in [1, 2))
            let v = match ty.format() {
                None => v,
                Some(f) => {
                    let drop = 23 - f.minifloat().map_or(23, |m| m.mbits);
                    f32::from_bits(v.to_bits() >> drop << drop)
                }
            };
            if v.is_finite() {
                break v;
            }
        };
    }
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

/// Rows of A and the shared B of one run.
#[derive(Clone, Debug)]
pub struct Rows {
    pub seed: u64,
    pub k: usize,
    pub n: usize,
    pub ty: InType,
    pub draw: Draw,
    /// B, `[K, N]` row-major.
    pub b: Vec<f32>,
    /// How the values are drawn (default: `separating`; `Rows::plain` for the plain one).
    pub content: Content,
}

impl Rows {
    /// The checker's rows: [`Draw::Wide`] with the default content
    /// (`separating`).
    pub fn new(seed: u64, k: usize, n: usize, ty: InType) -> Rows {
        Rows::drawn(seed, k, n, ty, Draw::Wide)
    }

    /// Rows of the plain drawing (exponents within +-8 of 1: the
    /// accuracy checks' inputs).
    pub fn plain(seed: u64, k: usize, n: usize, ty: InType) -> Rows {
        Rows::build(seed, k, n, ty, Draw::Wide, Content::plain())
    }

    pub fn drawn(seed: u64, k: usize, n: usize, ty: InType, how: Draw) -> Rows {
        Rows::build(seed, k, n, ty, how, Content::default())
    }

    /// Rows drawn as `content` says (`bi::content`; the default content is
    /// [`Rows::new`]).
    pub fn with_content(seed: u64, k: usize, n: usize, ty: InType, content: Content) -> Rows {
        Rows::build(seed, k, n, ty, Draw::Wide, content)
    }

    /// [`Draw::Unit`] draws the plain unit values whatever the content;
    /// [`Draw::Wide`] draws the content (the plain content: the wide values).
    pub(super) fn build(seed: u64, k: usize, n: usize, ty: InType, how: Draw, content: Content) -> Rows {
        let mut b = Vec::with_capacity(k * n);
        if how == Draw::Unit || content.drawing().is_plain() {
            for kk in 0..k {
                let mut r = SplitMix64::for_item(seed ^ 0xB0B0_B0B0, kk as u64);
                b.extend((0..n).map(|_| draw(ty, how, &mut r)));
            }
        } else {
            b = Drawer::new(content, ty, seed, k).b(n);
        }
        Rows {
            seed,
            k,
            n,
            ty,
            draw: how,
            b,
            content,
        }
    }

    /// One row of A, a function of the seed and the row id only (rows
    /// other than the target as `content.others` says: `bi::others`).
    pub fn row(&self, id: u64) -> Vec<f32> {
        self.content.others.row(id, self.ty, self.k, &|id| self.drawn_row(id))
    }

    /// Row `id` as the content class draws it.
    fn drawn_row(&self, id: u64) -> Vec<f32> {
        if self.draw == Draw::Wide && !self.content.drawing().is_plain() {
            return Drawer::new(self.content, self.ty, self.seed, self.k).a_row(id);
        }
        let mut r = SplitMix64::for_item(self.seed ^ 0xA0A0_A0A0, id);
        (0..self.k).map(|_| draw(self.ty, self.draw, &mut r)).collect()
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
    use crate::bi::other_id;

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
        for (ty, how) in InType::ALL.into_iter().flat_map(|t| [(t, Draw::Wide), (t, Draw::Unit)]) {
            let r = match how {
                Draw::Wide => Rows::plain(1, 256, 4, ty),
                Draw::Unit => Rows::drawn(1, 256, 4, ty, how),
            };
            if how == Draw::Unit {
                assert!(r.b.iter().all(|v| (1.0..2.0).contains(&v.abs())));
            }
            // the checker's default (separating) has zeros in B, nothing else
            let sep = Rows::new(1, 256, 4, ty);
            for v in sep.row(0).into_iter().chain(sep.b.iter().copied()) {
                assert!(v.is_finite(), "{}: {v}", ty.name());
                if let Some(f) = ty.format() {
                    let code = crate::format::encode_f32(v, f, &crate::format::CastPolicy::ieee(f), 0).unwrap();
                    assert_eq!(f.decode_f32(code).to_bits(), v.to_bits(), "{}: {v}", ty.name());
                }
            }
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
