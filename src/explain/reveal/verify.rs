//! Naming the recovered tree: the candidates with its shape, told apart by
//! their bytes on random inputs (FPRev's `random_test`).

use super::super::shape::Shape;
use crate::gemm::MX_BLOCK;
use crate::mx::MxFormat;
use crate::order::{InType, MxScale, Order};

/// Random inputs of type `t` (exact in it): random sign, exponent within
/// +-8 of 1, random significand; a value that is not finite or is zero
/// once rounded to `t` is drawn again. One stream seeded `seed`, three
/// draws a try.
pub(super) fn random_values(t: InType, count: usize, seed: u64) -> Vec<f32> {
    use rayon::prelude::*;
    // one try: the value, or None when it is drawn again
    let attempt = |r: &mut crate::rng::SplitMix64| -> Option<f32> {
        let sign = (r.next_u32() & 1) << 31;
        let e = r.range_i64(-8, 8) as i32;
        let v = f32::from_bits(sign | ((127 + e) as u32) << 23 | (r.next_u32() & 0x7F_FFFF));
        let v = match t.format() {
            None => v,
            Some(f) => f.decode_f32(crate::format::encode_f32(v, f, &crate::format::CastPolicy::ieee(f), 0).ok()?),
        };
        (v.is_finite() && v != 0.0).then_some(v)
    };
    // blocks drawn in parallel, each assuming no try before it was drawn
    // again (value i then takes draws 3i to 3i + 2); where one was, the
    // stream is drawn in order instead: the same values either way
    const BLOCK: usize = 1 << 14;
    let blocks: Option<Vec<Vec<f32>>> = (0..count.div_ceil(BLOCK))
        .into_par_iter()
        .map(|bi| {
            let mut r = crate::rng::SplitMix64::after_draws(seed, 3 * (bi * BLOCK) as u64);
            (bi * BLOCK..count.min((bi + 1) * BLOCK))
                .map(|_| attempt(&mut r))
                .collect()
        })
        .collect();
    if let Some(blocks) = blocks {
        return blocks.concat();
    }
    let mut r = crate::rng::SplitMix64::new(seed);
    (0..count)
        .map(|_| loop {
            if let Some(v) = attempt(&mut r) {
                return v;
            }
        })
        .collect()
}

/// Random MX operands: finite nonzero codes of the format, scales within
/// +-4 of 2^0 (`rows` x `cols` codes, a scale per 32 codes along `rows`
/// when `along_rows`, else along `cols`).
pub(super) fn random_mx(f: MxFormat, rows: usize, cols: usize, along_rows: bool, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut r = crate::rng::SplitMix64::new(seed);
    let e = f.element();
    let codes = (0..rows * cols)
        .map(|_| loop {
            // a code of the element's width (FP6 and FP4 codes sit in the
            // low bits of the byte)
            let c = (r.next_u32() & ((1u32 << e.bits()) - 1)) as u8;
            let v = e.decode_f32(c as u16);
            if v.is_finite() && v != 0.0 {
                return c;
            }
        })
        .collect();
    let ns = if along_rows {
        rows / MX_BLOCK * cols
    } else {
        rows * cols / MX_BLOCK
    };
    let scales = (0..ns).map(|_| (127 + r.range_i64(-4, 4)) as u8).collect();
    (codes, scales)
}

/// The shape an order shows to MX probes (one unit per block): its tree
/// over blocks for block-scale `fma`/`muladd`, else its element tree seen
/// at the first element of each block.
pub(super) fn block_shape(o: &Order, k: usize) -> Shape {
    if o.scale == MxScale::Block && o.mma().is_none() {
        Shape::of_tree(&o.compile(k / MX_BLOCK))
    } else {
        let bs = MX_BLOCK as u32;
        Shape::of_tree(&o.compile(k)).restrict(k / MX_BLOCK, |x| x.is_multiple_of(bs).then_some(x / bs))
    }
}

/// The order with the fields that cannot change its tree's shape set to
/// one value: the output format (one final rounding) and `muladd` read as
/// `fma` (a product rounded or not is one leaf either way). Shape matching
/// compiles one tree per key (test: `shape_key_keeps_the_shape`).
pub(super) fn shape_key(o: &Order) -> Order {
    let mut k = *o;
    k.out = crate::order::OutFmt::F32;
    if k.family == crate::order::Family::MulAdd {
        k.family = crate::order::Family::Fma;
    }
    k
}

/// The shape probes see: the order's tree, or for MX probes its tree over
/// blocks ([`block_shape`]).
pub(super) fn order_shape(o: &Order, k: usize, mx: bool) -> Shape {
    if mx {
        block_shape(o, k)
    } else {
        Shape::of_tree(&o.compile(k))
    }
}

/// Columns compared in the verification launch: at most this many, spread
/// evenly over N (so every column tile of a wide launch is seen) ...
pub(super) const VERIFY_COLUMNS: usize = 512;

/// ... these.
pub(super) fn verify_columns(n: usize) -> Vec<usize> {
    let c = n.min(VERIFY_COLUMNS);
    (0..c).map(|i| i * n / c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`random_values`] as one stream drawn in order (its contract).
    fn in_order(t: InType, count: usize, seed: u64) -> Vec<f32> {
        let mut r = crate::rng::SplitMix64::new(seed);
        (0..count)
            .map(|_| loop {
                let sign = (r.next_u32() & 1) << 31;
                let e = r.range_i64(-8, 8) as i32;
                let v = f32::from_bits(sign | ((127 + e) as u32) << 23 | (r.next_u32() & 0x7F_FFFF));
                let v = match t.format() {
                    None => v,
                    Some(f) => match crate::format::encode_f32(v, f, &crate::format::CastPolicy::ieee(f), 0) {
                        Ok(c) => f.decode_f32(c),
                        Err(_) => continue,
                    },
                };
                if v.is_finite() && v != 0.0 {
                    return v;
                }
            })
            .collect()
    }

    /// The blocks drawn in parallel give the stream's values, for every
    /// input type (FP8 types draw some values again: the in-order path).
    #[test]
    fn random_values_are_one_stream() {
        for t in [InType::F32, InType::Bf16, InType::F16, InType::E4M3, InType::E5M2] {
            let count = 3 * (1 << 14) + 17;
            let got = random_values(t, count, 0xB0B);
            let want = in_order(t, count, 0xB0B);
            assert!(
                got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()) && got.len() == want.len(),
                "{t:?}"
            );
        }
    }
}
