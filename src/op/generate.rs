//! Deterministic inputs for an op spec (SplitMix64), built for BI checks:
//! every input row (x1 row, token and its router logits) comes from its own
//! stream `SplitMix64::for_item(seed, row)`, so rows do not depend on each
//! other; a pinned row ([`Pin`]) comes from a stream keyed by its content
//! seed only, so the same content can be placed at any row and any rank.
//! Shared weights (x2, expert weights, norm weight) come from `weight_seed`.
//!
//! Values: plain inputs are bf16-representable f32 with an exponent spread
//! (so f32 accumulation is inexact and orders are observable); MX codes are
//! uniform over the format's finite codes; x1 scales are `127 + [-3, 3]`;
//! x2 scales follow [`X2Scales`].

use super::{OpSpec, Tensor};
use crate::gemm::MX_BLOCK;
use crate::mx::MxFormat;
use crate::rng::SplitMix64;

/// How x2's E8M0 scales vary (AllGatherMatmul with MX inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum X2Scales {
    /// Every scale 2^0 (byte 127): "ID".
    #[default]
    Identity,
    /// One scale per column, `127 + [-3, 3]`, constant along K.
    KConstant,
    /// A scale per (K-block, column), `127 + [-6, 2]`: "VAR".
    KVarying,
}

/// Fixed content for one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pin {
    pub row: usize,
    pub content: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenOpts {
    /// Seed of the non-pinned rows.
    pub seed: u64,
    /// Seed of the shared weights.
    pub weight_seed: u64,
    pub pin: Option<Pin>,
    pub x2_scales: X2Scales,
}

impl GenOpts {
    pub fn new(seed: u64) -> GenOpts {
        GenOpts {
            seed,
            weight_seed: 0x0005_EED0_F3E1_67A5,
            pin: None,
            x2_scales: X2Scales::Identity,
        }
    }
    pub fn pin(mut self, row: usize, content: u64) -> GenOpts {
        self.pin = Some(Pin { row, content });
        self
    }
    pub fn x2(mut self, s: X2Scales) -> GenOpts {
        self.x2_scales = s;
        self
    }

    fn row(&self, row: usize) -> SplitMix64 {
        match self.pin {
            Some(p) if p.row == row => SplitMix64::for_item(p.content ^ 0xC0DE_C0DE_C0DE_C0DE, 0),
            _ => SplitMix64::for_item(self.seed, row as u64),
        }
    }

    fn weights(&self, tag: u64) -> SplitMix64 {
        SplitMix64::for_item(self.weight_seed, tag)
    }
}

/// A bf16-representable value `±1.m * 2^e`, e uniform in `[-spread, spread]`.
pub fn bf16_value(rng: &mut SplitMix64, spread: i64) -> f32 {
    let sign = (rng.next_u32() & 1) << 31;
    let e = rng.range_i64(-spread, spread) as i32;
    let mant = (rng.next_u32() >> 25) << 16;
    f32::from_bits(sign | (((127 + e) as u32) << 23) | mant)
}

fn mx_code(rng: &mut SplitMix64, f: MxFormat) -> u8 {
    let el = f.element();
    loop {
        let c = rng.below(el.code_count() as u64) as u16;
        if el.decode_f32(c).is_finite() {
            return c as u8;
        }
    }
}

/// Builds every input of `spec`.
pub fn generate(spec: &OpSpec, o: &GenOpts) -> super::Inputs {
    let mut inp = super::Inputs::default();
    let rows_f32 = |rows: usize, cols: usize, spread: i64| -> Vec<f32> {
        (0..rows)
            .flat_map(|i| {
                let mut r = o.row(i);
                (0..cols).map(move |_| bf16_value(&mut r, spread)).collect::<Vec<_>>()
            })
            .collect()
    };
    let weights_f32 = |tag: u64, len: usize, spread: i64| -> Vec<f32> {
        let mut r = o.weights(tag);
        (0..len).map(|_| bf16_value(&mut r, spread)).collect()
    };
    match spec {
        OpSpec::AllGatherMatmul(s) => {
            let (m, k, n) = (s.m(), s.k, s.n);
            let x2_shape = match s.x2_layout {
                super::agmm::X2Layout::Kn => vec![k, n],
                super::agmm::X2Layout::Nk => vec![n, k],
            };
            match s.mx_format {
                None => {
                    inp.insert("x1", Tensor::f32(vec![m, k], rows_f32(m, k, 8)));
                    inp.insert("x2", Tensor::f32(x2_shape, weights_f32(1, k * n, 4)));
                }
                Some(f) => {
                    let kb = k / MX_BLOCK;
                    let (mut c1, mut s1) = (Vec::with_capacity(m * k), Vec::with_capacity(m * kb));
                    for i in 0..m {
                        let mut r = o.row(i);
                        c1.extend((0..k).map(|_| mx_code(&mut r, f)));
                        s1.extend((0..kb).map(|_| (127 + r.range_i64(-3, 3)) as u8));
                    }
                    inp.insert("x1", Tensor::u8(vec![m, k], c1));
                    inp.insert("x1_scales", Tensor::u8(vec![m, kb], s1));
                    let mut r = o.weights(1);
                    let c2: Vec<u8> = (0..k * n).map(|_| mx_code(&mut r, f)).collect();
                    inp.insert("x2", Tensor::u8(x2_shape, c2));
                    let mut r = o.weights(2);
                    let col: Vec<u8> = (0..n).map(|_| (127 + r.range_i64(-3, 3)) as u8).collect();
                    // scale of (kb, j), laid out as the spec says
                    let sc = |j: usize, r: &mut SplitMix64| -> u8 {
                        match o.x2_scales {
                            X2Scales::Identity => 127,
                            X2Scales::KConstant => col[j],
                            X2Scales::KVarying => (127 + r.range_i64(-6, 2)) as u8,
                        }
                    };
                    let mut r = o.weights(3);
                    let mut kn = vec![0u8; kb * n];
                    for b in 0..kb {
                        for j in 0..n {
                            kn[b * n + j] = sc(j, &mut r);
                        }
                    }
                    let (shape, s2) = match s.x2_layout {
                        super::agmm::X2Layout::Kn => (vec![kb, n], kn),
                        super::agmm::X2Layout::Nk => {
                            (vec![n, kb], (0..n * kb).map(|i| kn[(i % kb) * n + i / kb]).collect())
                        }
                    };
                    inp.insert("x2_scales", Tensor::u8(shape, s2));
                }
            }
        }
        OpSpec::MatmulReduceScatter(s) | OpSpec::MatmulAllReduce(s) => {
            inp.insert("x1", Tensor::f32(vec![s.m, s.k], rows_f32(s.m, s.k, 12)));
            inp.insert("x2", Tensor::f32(vec![s.k, s.n], weights_f32(1, s.k * s.n, 4)));
        }
        OpSpec::Moe(s) => {
            let (t, h, e) = (s.tokens, s.hidden, s.experts);
            let mut x = Vec::with_capacity(t * h);
            let mut lg = Vec::with_capacity(t * e);
            for i in 0..t {
                let mut r = o.row(i);
                x.extend((0..h).map(|_| bf16_value(&mut r, 6)));
                lg.extend((0..e).map(|_| bf16_value(&mut r, 2)));
            }
            inp.insert("x", Tensor::f32(vec![t, h], x));
            inp.insert("logits", Tensor::f32(vec![t, e], lg));
            inp.insert("w", Tensor::f32(vec![e, h, s.n], weights_f32(1, e * h * s.n, 3)));
        }
        OpSpec::RmsNorm(s) => {
            inp.insert("x", Tensor::f32(vec![s.m, s.h], rows_f32(s.m, s.h, 6)));
            inp.insert("weight", Tensor::f32(vec![s.h], weights_f32(1, s.h, 1)));
        }
        OpSpec::QuantMatmul(s) => {
            // a wide spread, so that MX blocks along M push small elements
            // of one row into the element format's subnormals depending on
            // the other rows (power-of-two scales are otherwise invisible)
            inp.insert("x", Tensor::f32(vec![s.m, s.k], rows_f32(s.m, s.k, 12)));
            inp.insert("w", Tensor::f32(vec![s.k, s.n], weights_f32(1, s.k * s.n, 3)));
        }
    }
    inp
}
