//! MatmulReduceScatter and MatmulAllReduce: rank `r` holds the K shard
//! `x1[:, r*K/WS ..]` and `x2[r*K/WS .., :]` and computes the partial
//! product `P_r = gemm(order, x1_r, x2_r)` (f32 `[M, N]`). The partials are
//! added element by element, `RN(acc + P)` in f32, in a rank order given by
//! the [`Reduction`] and the row's chunk.
//!
//! Sum type ([`Sum`]): `f32` adds the f32 partials with `RN(acc + P)` in
//! f32; `bf16` first converts each partial to bf16 (RNE, as a bf16
//! communication buffer holds it) and rounds every add once to bf16,
//! `RN_bf16(acc + P)` of the exact sum (what a bf16 sum of two bf16 values
//! with one rounding gives).
//!
//! Chunks: rows are cut into WS chunks of `ceil(M/WS)` rows (chunk `c` is
//! owned by rank `c`). Reduce-scatter gives rank `r` chunk `r` (M must be a
//! multiple of WS); all-reduce gives every rank every chunk (the all-gather
//! half copies bytes).

use super::provenance::{Mechanism, RowProvenance};
use super::{add_f32, matmul_values, need, parse_order, positive, Inputs, OpOutput, RankOutput, Result};
use crate::rng::SplitMix64;

/// How the per-rank partials of one chunk are added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Reduction {
    /// Ring: chunk `c` starts at rank `c+1` and travels the ring, each rank
    /// adding its partial, ending at its owner `c`:
    /// `((P_{c+1} + P_{c+2}) + ...) + P_c` (ranks mod WS). The order depends
    /// on which rank owns the chunk, hence on the row's position.
    Ring,
    /// Pairwise tree over ranks 0..WS-1 (levels of neighbour adds, an odd
    /// last element carried up), the same for every chunk.
    Tree,
    /// Serial over ranks 0..WS-1, the same for every chunk.
    Fixed,
    /// A serial order drawn per chunk and per run from `seed` and the trial
    /// number (SplitMix64, Fisher-Yates): models a non-deterministic
    /// reduction; two runs differ.
    Nondet { seed: u64 },
}

/// The type partials are reduced in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sum {
    /// f32 partials, every add `RN(x + y)` in f32.
    #[default]
    F32,
    /// Partials converted to bf16 (RNE), every add rounded once to bf16.
    Bf16,
}

impl Sum {
    pub fn name(self) -> &'static str {
        match self {
            Sum::F32 => "f32",
            Sum::Bf16 => "bf16",
        }
    }

    fn is_f32(&self) -> bool {
        *self == Sum::F32
    }

    /// A partial's value as the reduction's buffer holds it.
    pub fn load(self, x: f32) -> f32 {
        match self {
            Sum::F32 => x,
            Sum::Bf16 => round_bf16(x as f64),
        }
    }

    /// One add of the reduction (operands already of the sum type).
    pub fn add(self, x: f32, y: f32) -> f32 {
        match self {
            Sum::F32 => add_f32(x, y),
            // two bf16 values: their f64 sum is exact unless their exponents
            // differ by more than 45, and then the smaller lies far below
            // half a bf16 ulp of the larger, which the f64 rounding keeps
            // (no tie can appear): one correct rounding to bf16 either way
            Sum::Bf16 => round_bf16(x as f64 + y as f64),
        }
    }
}

/// `x` rounded to nearest-even bf16 (one rounding from f64; overflow gives
/// Inf, NaN stays NaN), as an f32. bf16 keeps 8 significant bits with
/// f32's exponent range (normals from 2^-126, subnormals in steps of
/// 2^-133): `x` is cut at its quantum by one exact f64 round-half-even
/// (the unit test checks this against `crate::format`'s bf16 encoder).
pub fn round_bf16(x: f64) -> f32 {
    if !x.is_finite() {
        return x as f32;
    }
    if x == 0.0 {
        return x as f32;
    }
    // the exponent of |x| (f64 normal: every value reaching here is one
    // unless far below bf16's range, where the quantum floor applies anyway)
    let e = ((x.to_bits() >> 52) & 0x7FF) as i32 - 1023;
    let q = (e.max(-126) - 7).max(-133);
    let scale = 2f64.powi(q);
    let r = (x / scale).round_ties_even() * scale;
    // at or above 2^128 after rounding: Inf
    if r.abs() >= 2f64.powi(128) {
        return if r > 0.0 { f32::INFINITY } else { f32::NEG_INFINITY };
    }
    r as f32
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReduceSpec {
    pub world_size: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// Order of each rank's partial GEMM over its K shard.
    pub order: String,
    pub reduction: Reduction,
    /// The type the partials are reduced in (default f32).
    #[serde(default, skip_serializing_if = "Sum::is_f32")]
    pub sum: Sum,
}

impl ReduceSpec {
    pub fn validate(&self, scatter: bool) -> Result<()> {
        positive("world_size", self.world_size)?;
        positive("m", self.m)?;
        positive("k", self.k)?;
        positive("n", self.n)?;
        need(self.k.is_multiple_of(self.world_size), || {
            format!(
                "k = {} is not divisible by world_size = {} (each rank holds a K shard)",
                self.k, self.world_size
            )
        })?;
        if scatter {
            need(self.m.is_multiple_of(self.world_size), || {
                format!(
                    "m = {} is not divisible by world_size = {} (reduce-scatter splits M)",
                    self.m, self.world_size
                )
            })?;
        }
        parse_order("order", &self.order)?;
        Ok(())
    }

    pub fn input_shapes(&self) -> Vec<(String, Vec<usize>, bool)> {
        vec![
            ("x1".into(), vec![self.m, self.k], false),
            ("x2".into(), vec![self.k, self.n], false),
        ]
    }

    fn chunk_rows(&self) -> usize {
        self.m.div_ceil(self.world_size)
    }
}

/// The rank order of chunk `c`, and whether it is combined pairwise.
pub fn rank_order(red: Reduction, ws: usize, c: usize, trial: u64) -> (Vec<usize>, bool) {
    match red {
        Reduction::Ring => ((1..=ws).map(|s| (c + s) % ws).collect(), false),
        Reduction::Tree => ((0..ws).collect(), true),
        Reduction::Fixed => ((0..ws).collect(), false),
        Reduction::Nondet { seed } => {
            let mut rng = SplitMix64::for_item(seed ^ trial.wrapping_mul(0xD1B5_4A32_D192_ED03), c as u64);
            let mut v: Vec<usize> = (0..ws).collect();
            for i in (1..ws).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                v.swap(i, j);
            }
            (v, false)
        }
    }
}

/// Combines `parts` (each a slice of equal length, values of the sum
/// type) in the given order.
pub fn combine(parts: &[&[f32]], pairwise: bool, sum: Sum) -> Vec<f32> {
    if !pairwise {
        let mut acc = parts[0].to_vec();
        for p in &parts[1..] {
            for (a, &b) in acc.iter_mut().zip(p.iter()) {
                *a = sum.add(*a, b);
            }
        }
        return acc;
    }
    let mut level: Vec<Vec<f32>> = parts.iter().map(|p| p.to_vec()).collect();
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        let mut it = level.into_iter();
        while let Some(a) = it.next() {
            match it.next() {
                Some(b) => next.push(a.iter().zip(&b).map(|(&x, &y)| sum.add(x, y)).collect()),
                None => next.push(a),
            }
        }
        level = next;
    }
    level.pop().unwrap()
}

fn describe(red: Reduction, ranks: &[usize], pairwise: bool, trial: u64) -> String {
    let list = ranks.iter().map(|r| format!("r{r}")).collect::<Vec<_>>().join(",");
    match red {
        Reduction::Ring => format!("ring {list}"),
        Reduction::Fixed => format!("fixed {list}"),
        Reduction::Tree if pairwise => format!("tree pairwise {list}"),
        Reduction::Tree => format!("tree {list}"),
        Reduction::Nondet { .. } => format!("nondet {list} (trial {trial})"),
    }
}

/// Every rank's partial product `P_r` (`[M, N]`), as the reduction's
/// buffer holds it (f32, or converted to bf16 for a bf16 sum).
pub fn partials(spec: &ReduceSpec, inputs: &Inputs) -> Result<Vec<Vec<f32>>> {
    let (m, k, n, ws) = (spec.m, spec.k, spec.n, spec.world_size);
    let order = parse_order("order", &spec.order)?;
    let x1 = inputs.values("x1", &[m, k])?;
    let x2 = inputs.values("x2", &[k, n])?;
    let kr = k / ws;
    (0..ws)
        .map(|r| {
            let a: Vec<f32> = (0..m)
                .flat_map(|i| x1[i * k + r * kr..i * k + (r + 1) * kr].iter().copied())
                .collect();
            let b = &x2[r * kr * n..(r + 1) * kr * n];
            let mut p = matmul_values(&order, &a, b, m, kr, n)?;
            if spec.sum != Sum::F32 {
                p.iter_mut().for_each(|x| *x = spec.sum.load(*x));
            }
            Ok(p)
        })
        .collect()
}

pub fn run(spec: &ReduceSpec, inputs: &Inputs, scatter: bool, trial: u64) -> Result<OpOutput> {
    let (m, n, ws) = (spec.m, spec.n, spec.world_size);
    let p = partials(spec, inputs)?;
    let order = parse_order("order", &spec.order)?;
    let cr = spec.chunk_rows();
    // reduced chunks
    let mut reduced = vec![0f32; m * n];
    let mut chunk_desc = Vec::with_capacity(ws);
    for c in 0..ws {
        let (lo, hi) = ((c * cr).min(m), ((c + 1) * cr).min(m));
        let (ranks, pw) = rank_order(spec.reduction, ws, c, trial);
        if hi > lo {
            let parts: Vec<&[f32]> = ranks.iter().map(|&r| &p[r][lo * n..hi * n]).collect();
            reduced[lo * n..hi * n].copy_from_slice(&combine(&parts, pw, spec.sum));
        }
        let mut desc = describe(spec.reduction, &ranks, pw, trial);
        if spec.sum != Sum::F32 {
            desc.push_str(&format!(", {} sum", spec.sum.name()));
        }
        chunk_desc.push((ranks.clone(), desc));
    }
    let mech = match spec.reduction {
        Reduction::Ring => Mechanism::PositionDependentReduction,
        Reduction::Tree | Reduction::Fixed => Mechanism::FixedReduction,
        Reduction::Nondet { .. } => Mechanism::NonDeterministic,
    };
    let mut per_rank = Vec::with_capacity(ws);
    let mut provenance = Vec::new();
    for r in 0..ws {
        let rows: Vec<usize> = if scatter {
            (r * cr..(r + 1) * cr).collect()
        } else {
            (0..m).collect()
        };
        let mut data = Vec::with_capacity(rows.len() * n);
        for (i, &g) in rows.iter().enumerate() {
            data.extend_from_slice(&reduced[g * n..(g + 1) * n]);
            let c = g / cr;
            provenance.push(RowProvenance {
                rank: r,
                row: i,
                global_row: g,
                computed_on: chunk_desc[c].0.clone(),
                path: "partial-sum".into(),
                order,
                scale_point: None,
                reduction: Some(chunk_desc[c].1.clone()),
                mechanisms: vec![mech],
                detail: Some(format!(
                    "chunk {c} (rows {}..{}), owned by rank {c}",
                    c * cr,
                    ((c + 1) * cr).min(m)
                )),
            });
        }
        per_rank.push(RankOutput {
            rows: rows.len(),
            cols: n,
            data,
        });
    }
    Ok(OpOutput { per_rank, provenance })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{encode_f64, CastPolicy, Format};
    use crate::rng::SplitMix64;

    fn reference(x: f64) -> f32 {
        let c = encode_f64(x, Format::BF16, &CastPolicy::ieee(Format::BF16), 0).unwrap();
        Format::BF16.decode_f32(c)
    }

    #[test]
    fn round_bf16_matches_the_format_encoder() {
        let mut r = SplitMix64::new(7);
        let mut xs = vec![
            0.0,
            -0.0,
            1.0,
            1.00390625,
            1.005859375,
            3.0e38,
            3.4e38,
            -3.4e38,
            f64::MAX,
            1e-40,
            2f64.powi(-134),
            2f64.powi(-133) * 1.5,
            2f64.powi(-133) * 0.5,
        ];
        for _ in 0..200_000 {
            // exact sums of two bf16 values, and random f64 bit patterns
            let a = Format::BF16.decode_f32((r.next_u32() & 0xFFFF) as u16);
            let b = Format::BF16.decode_f32((r.next_u32() & 0xFFFF) as u16);
            if a.is_finite() && b.is_finite() {
                xs.push(a as f64 + b as f64);
            }
            xs.push(f64::from_bits(r.next_u64()));
        }
        for x in xs.into_iter().filter(|x| !x.is_nan()) {
            let (got, want) = (round_bf16(x), reference(x));
            assert_eq!(got.to_bits(), want.to_bits(), "{x:e}: {got:e} vs {want:e}");
        }
        assert!(round_bf16(f64::NAN).is_nan());
        // the comparison can fail: truncating instead of rounding differs here
        assert_eq!(round_bf16(1.0 + 3.0 / 512.0), 1.0078125);
    }

    #[test]
    fn a_bf16_sum_rounds_every_add_once() {
        // 256 + 1 + 1: serially each +1 is a tie to even (256 stays), while
        // 1 + 1 first gives 2 and 256 + 2 = 258 is exact
        let (a, b, c) = (256.0f32, 1.0f32, 1.0f32);
        let s = Sum::Bf16;
        assert_eq!(s.add(s.add(a, b), c), 256.0);
        assert_eq!(s.add(a, s.add(b, c)), 258.0);
        assert_eq!(Sum::F32.add(Sum::F32.add(a, b), c), 258.0);
        let parts: [&[f32]; 3] = [&[256.0], &[1.0], &[1.0]];
        assert_eq!(combine(&parts, false, s), vec![256.0]);
        assert_eq!(combine(&parts, true, s), vec![256.0]);
        let parts: [&[f32]; 3] = [&[1.0], &[1.0], &[256.0]];
        assert_eq!(combine(&parts, false, s), vec![258.0]);
    }
}
