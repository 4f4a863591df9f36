//! MatmulReduceScatter and MatmulAllReduce: rank `r` holds the K shard
//! `x1[:, r*K/WS ..]` and `x2[r*K/WS .., :]` and computes the partial
//! product `P_r = gemm(order, x1_r, x2_r)` (f32 `[M, N]`). The partials are
//! added element by element, `RN(acc + P)` in f32, in a rank order given by
//! the [`Reduction`] and the row's chunk.
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

/// Combines `parts` (each a slice of equal length) in the given order.
fn combine(parts: &[&[f32]], pairwise: bool) -> Vec<f32> {
    if !pairwise {
        let mut acc = parts[0].to_vec();
        for p in &parts[1..] {
            for (a, &b) in acc.iter_mut().zip(p.iter()) {
                *a = add_f32(*a, b);
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
                Some(b) => next.push(a.iter().zip(&b).map(|(&x, &y)| add_f32(x, y)).collect()),
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

/// Every rank's partial product `P_r` (f32 `[M, N]`).
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
            matmul_values(&order, &a, b, m, kr, n)
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
            reduced[lo * n..hi * n].copy_from_slice(&combine(&parts, pw));
        }
        chunk_desc.push((ranks.clone(), describe(spec.reduction, &ranks, pw, trial)));
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
