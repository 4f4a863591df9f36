//! A cell's power: how likely its inputs are to expose an order change.
//! Contract: docs/BI.md, "Power".
//!
//! The power of some rows of A and a B, for an input type, an output
//! format and K, is the fraction of pairs of distinct orders of the
//! explainer's family (`explain::candidates::family`) whose output bytes
//! differ on those rows. Distinct means a different tree for K; for inputs
//! narrower than f32 every product is exact in f32, so `muladd` orders are
//! the `fma` orders and are left out, as are aligned split parts (`align`:
//! near-copies of a plain split, kept out so that the measure and the
//! captured powers stay those of one order set). Orders are evaluated with an f32
//! output and converted to the output format with RNE (the `out=`
//! conversion, extended to FP8), so one evaluation serves every format.
//! Where the family has more than [`SAMPLE`] orders a seeded sample of
//! that many is taken and the fraction is over the sample's pairs.

use crate::explain::candidates::{family, Inputs};
use crate::format::{encode_f32, CastPolicy, Format};
use crate::gemm::{gemm, BLayout, Matrix, Problem};
use crate::order::{Family as OrderFamily, InType, MxScale, Node, NodeId, Order, OutFmt, Tree};
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The power below which a cell whose bytes agree is `VACUOUS`, never
/// `BI_PASS` (docs/BI.md, "Power").
pub const THRESHOLD: f64 = 0.99;

/// Orders sampled from a larger family.
pub const SAMPLE: usize = 48;

/// Rows at most that power is measured on (a multi-row cell's first rows:
/// a lower bound on the power of all of them).
pub const MAX_ROWS: usize = 4;

/// The power of a cell's inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Power {
    /// Fraction of order pairs whose bytes differ, in [0, 1].
    pub value: f64,
    /// The output format it was measured in (`f32`, `bf16`, `f16`,
    /// `e4m3`, `e5m2`): the narrowest the subject's bytes allow.
    pub output: String,
    /// Orders evaluated (the family, or the sample of it).
    pub orders: usize,
    /// Pairs of them whose bytes agree.
    pub pairs_agreeing: usize,
}

impl Power {
    /// Whether this power makes an agreeing cell a pass.
    pub fn sufficient(&self) -> bool {
        self.value >= THRESHOLD
    }
}

/// The output formats whose values hold every one of `out`, narrowest
/// first, f32 (None) always last; NaN and Inf are held by every format that
/// has them, and by none that lacks them.
pub fn output_formats(out: &[f32]) -> Vec<Option<Format>> {
    let mut v = Vec::new();
    for f in [Format::E4M3, Format::E5M2, Format::BF16, Format::F16] {
        let holds = out.iter().all(|&x| {
            if x.is_nan() {
                return f.has_nan();
            }
            if x.is_infinite() {
                return f.has_inf();
            }
            encode_f32(x, f, &CastPolicy::ieee(f), 0).is_ok_and(|c| f.decode_f32(c).to_bits() == x.to_bits())
        });
        if holds {
            v.push(Some(f));
        }
    }
    v.push(None);
    v
}

/// `x` converted to `f` with RNE (f32 when None), widened back to f32.
fn convert(x: f32, f: Option<Format>) -> u32 {
    match f {
        None => x.to_bits(),
        Some(f) => match encode_f32(x, f, &CastPolicy::ieee(f), 0) {
            Ok(c) => f.decode_f32(c).to_bits(),
            Err(_) => f32::NAN.to_bits(),
        },
    }
}

/// A digest of what a tree computes, equal for trees that compute the same
/// value on every input: an addition of the structural zero (an empty
/// split part) is its other operand, `RN(a + b)` is `RN(b + a)`, the
/// first step of a chain (`RN(0 + p)`) is the rounded product under both
/// `fma` and `muladd`, and with `exact_products` (inputs narrower than f32)
/// `muladd` steps are `fma` steps. The sign of a zero result is the one
/// thing these rules ignore.
pub fn computation_key(tree: &Tree, exact_products: bool) -> u64 {
    use std::hash::{Hash, Hasher};
    fn h(parts: impl Hash) -> u64 {
        let mut s = std::collections::hash_map::DefaultHasher::new();
        parts.hash(&mut s);
        s.finish()
    }
    const ZERO: u64 = 0;
    let mut key: Vec<u64> = Vec::with_capacity(tree.nodes.len());
    for node in &tree.nodes {
        let at = |id: NodeId| key[id as usize];
        let v = match node {
            Node::Zero => ZERO,
            Node::Fma { acc, k } | Node::MulAdd { acc, k } if at(*acc) == ZERO => h(("first", k)),
            Node::Fma { acc, k } => h(("fma", at(*acc), k)),
            Node::MulAdd { acc, k } if exact_products => h(("fma", at(*acc), k)),
            Node::MulAdd { acc, k } => h(("muladd", at(*acc), k)),
            Node::Add { a, b } => match (at(*a), at(*b)) {
                (ZERO, x) | (x, ZERO) => x,
                (x, y) => h(("add", x.min(y), x.max(y))),
            },
            Node::Fused { c, ks, f, out } => h(("fused", at(*c), ks, f, out)),
            Node::Promote { acc, partial, k0 } => h(("promote", at(*acc), at(*partial), k0)),
            Node::Convert { x, to } => h(("convert", at(*x), to)),
        };
        // a digest never collides with the zero's
        key.push(if v == ZERO && !matches!(node, Node::Zero | Node::Add { .. }) {
            1
        } else {
            v
        });
    }
    key[tree.root as usize]
}

/// The orders power is measured over for `input` at `k` (see the module
/// doc): one per computation ([`computation_key`]), sampled down to
/// [`SAMPLE`] with `seed`.
pub fn orders(input: InType, k: usize, seed: u64) -> Vec<Order> {
    use rayon::prelude::*;
    let all: Vec<Order> = family(Inputs::of_type(input), k)
        .into_iter()
        .map(|c| c.order)
        .filter(|o| o.out == OutFmt::F32 && o.scale == MxScale::Dequant)
        .filter(|o| input == InType::F32 || o.family != OrderFamily::MulAdd)
        // aligned split parts name kernels; the measure keeps its orders
        .filter(|o| o.align.is_none())
        .collect();
    let keys: Vec<u64> = all
        .par_iter()
        .map(|o| computation_key(&o.compile(k), input != InType::F32))
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut v: Vec<Order> = all
        .into_iter()
        .zip(keys)
        .filter(|(_, key)| seen.insert(*key))
        .map(|(o, _)| o)
        .collect();
    if v.len() > SAMPLE {
        let mut r = SplitMix64::for_item(seed ^ 0x9045_E500, k as u64);
        for i in 0..SAMPLE {
            let j = i + r.below((v.len() - i) as u64) as usize;
            v.swap(i, j);
        }
        v.truncate(SAMPLE);
    }
    v
}

/// Every order's output bits on rows `a` (`[rows, K]`) and `b` (`[K, N]`),
/// f32 output; an order the inputs cannot run gives None.
pub fn evaluate(orders: &[Order], a: &[f32], b: &[f32], k: usize, n: usize) -> Vec<Option<Vec<f32>>> {
    use rayon::prelude::*;
    let p = Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m: a.len() / k.max(1),
        n,
        k,
        b_layout: BLayout::Kn,
    };
    orders.par_iter().map(|o| gemm(o, &p, None).ok()).collect()
}

/// The power of evaluated outputs (from [`evaluate`]) in format `f`.
pub fn power_of(outputs: &[Option<Vec<f32>>], f: Option<Format>) -> Power {
    let mut classes: HashMap<Vec<u32>, usize> = HashMap::new();
    let mut orders = 0usize;
    for out in outputs.iter().flatten() {
        orders += 1;
        *classes.entry(out.iter().map(|&x| convert(x, f)).collect()).or_default() += 1;
    }
    let pairs = orders * orders.saturating_sub(1) / 2;
    let agreeing: usize = classes.values().map(|&c| c * (c - 1) / 2).sum();
    Power {
        value: if pairs == 0 {
            0.0
        } else {
            1.0 - agreeing as f64 / pairs as f64
        },
        output: f.map_or("f32", |f| f.name()).to_string(),
        orders,
        pairs_agreeing: agreeing,
    }
}

/// The power of rows `a` with `b` in the weakest of the formats `formats`
/// (the formats the subject's bytes allow: the lowest power among them; on
/// a tie, the first listed: the narrowest).
pub fn measure(
    a: &[f32],
    b: &[f32],
    k: usize,
    n: usize,
    input: InType,
    formats: &[Option<Format>],
    seed: u64,
) -> Power {
    let outputs = evaluate(&orders(input, k, seed), a, b, k, n);
    formats
        .iter()
        .map(|&f| power_of(&outputs, f))
        .min_by(|x, y| x.value.total_cmp(&y.value))
        .unwrap_or_else(|| power_of(&outputs, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_that_hold_the_bytes() {
        assert_eq!(
            output_formats(&[1.0, 0.5]),
            vec![
                Some(Format::E4M3),
                Some(Format::E5M2),
                Some(Format::BF16),
                Some(Format::F16),
                None
            ]
        );
        let f = output_formats(&[1.0 + 2f32.powi(-8)]);
        assert_eq!(f, vec![Some(Format::F16), None]);
        assert_eq!(output_formats(&[1.0 + 2f32.powi(-20)]), vec![None]);
    }

    #[test]
    fn power_counts_agreeing_pairs() {
        let out = vec![Some(vec![1.0f32]), Some(vec![1.0]), Some(vec![2.0]), None];
        let p = power_of(&out, None);
        assert_eq!((p.orders, p.pairs_agreeing), (3, 1));
        approx::assert_abs_diff_eq!(p.value, 2.0 / 3.0, epsilon = 1e-12);
        // 1 and 1 + 2^-20 agree in bf16
        let out = vec![Some(vec![1.0f32]), Some(vec![1.0 + 2f32.powi(-20)])];
        assert_eq!(power_of(&out, None).value, 1.0);
        assert_eq!(power_of(&out, Some(Format::BF16)).value, 0.0);
    }
}
