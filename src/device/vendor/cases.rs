//! Vendor inputs, regenerated from the seed on any machine (see
//! [`GENERATOR`]), the scale layouts the cuBLASLt FP8 cases read, and the
//! exact f64 reference of an anchor row.

use super::*;

const KIND_WEIGHTS: u64 = 1;
const KIND_ANCHOR: u64 = 2;
const KIND_NEIGHBOURS: u64 = 3;
const KIND_WEIGHT_SCALES: u64 = 4;
const KIND_ANCHOR_SCALES: u64 = 5;
const KIND_NEIGHBOUR_SCALES: u64 = 6;

/// The element type's tag in every input stream's index (the inputs are
/// a function of it: f32 1, bf16 2, e4m3 3; f16 4, e5m2 5 name no case).
fn tag(t: InType) -> u64 {
    match t {
        InType::F32 => 1,
        InType::Bf16 => 2,
        InType::E4M3 => 3,
        InType::F16 => 4,
        InType::E5M2 => 5,
    }
}

/// The stream of one input: its kind, element type, shape and (for the
/// neighbour rows) M. The anchor and the weights do not depend on M; the
/// neighbours do, so each M sees different rows around the anchor.
fn stream(seed: u64, kind: u64, dtype: InType, shape: &Shape, m: usize) -> SplitMix64 {
    let index = (kind << 60) | (tag(dtype) << 56) | ((shape.n as u64) << 40) | ((shape.k as u64) << 24) | m as u64;
    SplitMix64::for_item(seed, index)
}

/// One random element: f32 uniform in [-1, 1) on a 2⁻²³ grid; bf16 the
/// same value truncated to its top 16 bits (exact, full 8-bit significand,
/// so that f32 sums really round); e4m3 a code with random sign, exponent
/// field 0..=8 (|v| < 4, subnormals included, never NaN) and mantissa.
/// The cases read no other type ([`super::CaseId::input`]).
fn push_element(dtype: InType, r: &mut SplitMix64, out: &mut Vec<u8>) {
    match dtype {
        InType::F32 | InType::Bf16 => {
            let v = (r.next_u32() >> 8) as f32 * (1.0 / (1u32 << 23) as f32) - 1.0;
            if dtype == InType::F32 {
                out.extend_from_slice(&v.to_le_bytes());
            } else {
                out.extend_from_slice(&((v.to_bits() >> 16) as u16).to_le_bytes());
            }
        }
        InType::E4M3 => {
            let sign = r.below(2) as u8;
            let exp = r.below(9) as u8;
            let man = r.below(8) as u8;
            out.push(sign << 7 | exp << 3 | man);
        }
        InType::F16 | InType::E5M2 => panic!("no vendor case reads {} inputs", dtype.name()),
    }
}

fn elements(dtype: InType, mut r: SplitMix64, count: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * dtype.bytes());
    for _ in 0..count {
        push_element(dtype, &mut r, &mut out);
    }
    out
}

/// Weights `W[N,K]` row-major, raw little-endian elements.
pub fn weights(dtype: InType, shape: &Shape, seed: u64) -> Vec<u8> {
    elements(dtype, stream(seed, KIND_WEIGHTS, dtype, shape, 0), shape.n * shape.k)
}

/// The anchor row (K elements), the same for every M and position.
pub fn anchor(dtype: InType, shape: &Shape, seed: u64) -> Vec<u8> {
    elements(dtype, stream(seed, KIND_ANCHOR, dtype, shape, 0), shape.k)
}

/// The M rows around the anchor, `X[M,K]` row-major before the anchor is
/// written into one of them.
pub fn neighbours(dtype: InType, shape: &Shape, m: usize, seed: u64) -> Vec<u8> {
    elements(dtype, stream(seed, KIND_NEIGHBOURS, dtype, shape, m), m * shape.k)
}

fn power_of_two_scales(mut r: SplitMix64, count: usize) -> Vec<f32> {
    // Powers of two 2^-3..2^1: exact to apply, yet different per block, so a
    // wrong scale layout shows up in the reference check.
    (0..count).map(|_| (2f32).powi(r.range_i64(-3, 1) as i32)).collect()
}

/// Weight block scales, logical `[n_block][k_block]`.
pub fn weight_block_scales(shape: &Shape, seed: u64) -> Vec<f32> {
    power_of_two_scales(
        stream(seed, KIND_WEIGHT_SCALES, InType::E4M3, shape, 0),
        shape.n_blocks() * shape.k_blocks(),
    )
}

/// The anchor row's 1×128 scales, `[k_block]`.
pub fn anchor_scales(shape: &Shape, seed: u64) -> Vec<f32> {
    power_of_two_scales(
        stream(seed, KIND_ANCHOR_SCALES, InType::E4M3, shape, 0),
        shape.k_blocks(),
    )
}

/// The neighbours' 1×128 scales, logical `[row][k_block]`.
pub fn neighbour_scales(shape: &Shape, m: usize, seed: u64) -> Vec<f32> {
    power_of_two_scales(
        stream(seed, KIND_NEIGHBOUR_SCALES, InType::E4M3, shape, m),
        m * shape.k_blocks(),
    )
}

/// `BLK128x128_32F` layout for cuBLAS operand A (the weights): K-major,
/// `L4 × ceil(N/128)` with `L4` = K blocks rounded up to a multiple of 4;
/// element `(kb, nb)` at `kb + nb·L4`, padding zero.
pub fn blk128_layout(logical: &[f32], shape: &Shape) -> Vec<f32> {
    let (l, nb) = (shape.k_blocks(), shape.n_blocks());
    let l4 = l.div_ceil(4) * 4;
    let mut out = vec![0f32; l4 * nb];
    for n in 0..nb {
        for k in 0..l {
            out[k + n * l4] = logical[n * l + k];
        }
    }
    out
}

/// `VEC128_32F` layout for cuBLAS operand B (the activations, cuBLAS N =
/// batch M): N-major, shape `M × L`; element `(row, kb)` at `row + kb·M`.
pub fn vec128_layout(logical: &[f32], m: usize, shape: &Shape) -> Vec<f32> {
    let l = shape.k_blocks();
    let mut out = vec![0f32; l * m];
    for row in 0..m {
        for k in 0..l {
            out[row + k * m] = logical[row * l + k];
        }
    }
    out
}

/// The anchor row's output computed in f64 from the generated inputs (and
/// scales): a check that layouts, transposes and scale orders are right,
/// not a model of the library's rounding.
pub fn reference_row(case: CaseId, shape: &Shape, seed: u64) -> Vec<f64> {
    let dt = case.input();
    let es = dt.bytes();
    let a: Vec<f64> = anchor(dt, shape, seed).chunks(es).map(|b| decode_le(dt, b)).collect();
    let w = weights(dt, shape, seed);
    let (l, kb) = (shape.k_blocks(), SCALE_BLOCK);
    let (ws, xs) = match case.scaling() {
        Scaling::Vec128Blk128 => (weight_block_scales(shape, seed), anchor_scales(shape, seed)),
        _ => (Vec::new(), Vec::new()),
    };
    (0..shape.n)
        .into_par_iter()
        .map(|j| {
            let row = &w[j * shape.k * es..(j + 1) * shape.k * es];
            match case.scaling() {
                Scaling::Vec128Blk128 => (0..l)
                    .map(|b| {
                        let s: f64 = (b * kb..((b + 1) * kb).min(shape.k))
                            .map(|i| a[i] * decode_le(dt, &row[i * es..]))
                            .sum();
                        s * ws[(j / kb) * l + b] as f64 * xs[b] as f64
                    })
                    .sum(),
                scaling => {
                    let s: f64 = (0..shape.k).map(|i| a[i] * decode_le(dt, &row[i * es..])).sum();
                    if scaling == Scaling::Tensor {
                        s * TENSOR_SCALE_W as f64 * TENSOR_SCALE_X as f64
                    } else {
                        s
                    }
                }
            }
        })
        .collect()
}
