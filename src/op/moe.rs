//! MoE expert GEMMs: a top-1 router assigns each token (row of `x`) to the
//! expert with the largest logit (ties: the lowest expert index; a NaN logit
//! is an error). Expert `e` multiplies its batch — the rows routed to it, in
//! token order — by `w[e]` (`[H, N]`) under the order chosen by the tiling
//! heuristic from the batch's row count: the first [`TileRule`] with
//! `rows <= max_rows` (a rule without `max_rows` matches every count).
//! Other tokens' routing changes the count, hence row i's order.
//!
//! Without `ep_world_size` this is a grouped matmul on one device (one
//! output, `[T, N]`). With `ep_world_size = WS` (8 or 16) it is the
//! expert-parallel AlltoAll + BatchMatmul: rank r holds tokens
//! `[r*T/WS, (r+1)*T/WS)` and experts `[r*E/WS, (r+1)*E/WS)`; the dispatch
//! all-to-all delivers each expert's rows to its rank in source-rank order,
//! then token order (so the batch equals the grouped batch), the expert
//! GEMM runs there, and the combine all-to-all returns each row to its home
//! rank (`[T/WS, N]` per rank). The all-to-alls copy bytes. The TP
//! all-gather of the fused op is not modelled (TP size 1: the identity).

use super::provenance::{Mechanism, RowProvenance};
use super::{matmul_values, need, parse_order, positive, Inputs, OpError, OpOutput, RankOutput, Result};

/// One tiling rule: batches of at most `max_rows` rows use `order`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TileRule {
    #[serde(default)]
    pub max_rows: Option<usize>,
    pub order: String,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    /// Tokens T (rows of x).
    pub tokens: usize,
    /// Hidden size H (K of the expert GEMM).
    pub hidden: usize,
    pub n: usize,
    pub experts: usize,
    /// Expert-parallel world size (8 or 16); null: grouped matmul on one
    /// device.
    #[serde(default)]
    pub ep_world_size: Option<usize>,
    pub tiling: Vec<TileRule>,
}

/// EP world sizes the AlltoAll + AllGather + BatchMatmul model accepts (the
/// vendor op's epWorldSize constraint).
pub const EP_WORLD_SIZES: [usize; 2] = [8, 16];

impl MoeSpec {
    pub fn validate(&self) -> Result<()> {
        positive("tokens", self.tokens)?;
        positive("hidden", self.hidden)?;
        positive("n", self.n)?;
        positive("experts", self.experts)?;
        if self.tiling.is_empty() {
            return Err(OpError::Spec("tiling needs at least one rule".into()));
        }
        if self.tiling.last().unwrap().max_rows.is_some() {
            return Err(OpError::Spec(
                "the last tiling rule must have no max_rows (it covers every row count)".into(),
            ));
        }
        for (i, r) in self.tiling.iter().enumerate() {
            parse_order(&format!("tiling[{i}].order"), &r.order)?;
        }
        if let Some(ws) = self.ep_world_size {
            if !EP_WORLD_SIZES.contains(&ws) {
                return Err(OpError::Spec(format!(
                    "ep_world_size {ws} is not supported; supported: 8, 16"
                )));
            }
            need(self.tokens.is_multiple_of(ws), || {
                format!("tokens = {} is not divisible by ep_world_size = {ws}", self.tokens)
            })?;
            need(self.experts.is_multiple_of(ws), || {
                format!("experts = {} is not divisible by ep_world_size = {ws}", self.experts)
            })?;
        }
        Ok(())
    }

    pub fn input_shapes(&self) -> Vec<(String, Vec<usize>, bool)> {
        vec![
            ("x".into(), vec![self.tokens, self.hidden], false),
            ("logits".into(), vec![self.tokens, self.experts], false),
            ("w".into(), vec![self.experts, self.hidden, self.n], false),
        ]
    }

    /// The tiling rule index and order string for a batch of `rows` rows.
    pub fn rule_for(&self, rows: usize) -> (usize, &str) {
        let i = self
            .tiling
            .iter()
            .position(|r| r.max_rows.is_none_or(|m| rows <= m))
            .unwrap_or(self.tiling.len() - 1);
        (i, &self.tiling[i].order)
    }
}

/// Top-1 routing: the expert of every token.
pub fn route(spec: &MoeSpec, logits: &[f32]) -> Result<Vec<usize>> {
    let e = spec.experts;
    (0..spec.tokens)
        .map(|t| {
            let row = &logits[t * e..(t + 1) * e];
            if let Some(j) = row.iter().position(|v| v.is_nan()) {
                return Err(OpError::Input(format!("logits[{t}, {j}] is NaN")));
            }
            let mut best = 0;
            for j in 1..e {
                if row[j] > row[best] {
                    best = j;
                }
            }
            Ok(best)
        })
        .collect()
}

pub fn run(spec: &MoeSpec, inputs: &Inputs) -> Result<OpOutput> {
    let (t, h, n, ne) = (spec.tokens, spec.hidden, spec.n, spec.experts);
    let x = inputs.values("x", &[t, h])?;
    let logits = inputs.values("logits", &[t, ne])?;
    let w = inputs.values("w", &[ne, h, n])?;
    let expert = route(spec, logits)?;
    let ws = spec.ep_world_size.unwrap_or(1);
    let (tpr, epr) = (t / ws, ne / ws);
    let mut out = vec![0f32; t * n];
    let mut prov: Vec<Option<RowProvenance>> = vec![None; t];
    for e in 0..ne {
        let rows: Vec<usize> = (0..t).filter(|&i| expert[i] == e).collect();
        if rows.is_empty() {
            continue;
        }
        let (rule, ostr) = spec.rule_for(rows.len());
        let order = parse_order("tiling order", ostr)?;
        let a: Vec<f32> = rows
            .iter()
            .flat_map(|&i| x[i * h..(i + 1) * h].iter().copied())
            .collect();
        let c = matmul_values(&order, &a, &w[e * h * n..(e + 1) * h * n], rows.len(), h, n)?;
        let owner = e / epr;
        for (p, &i) in rows.iter().enumerate() {
            out[i * n..(i + 1) * n].copy_from_slice(&c[p * n..(p + 1) * n]);
            prov[i] = Some(RowProvenance {
                rank: i / tpr,
                row: i % tpr,
                global_row: i,
                computed_on: vec![owner],
                path: format!("expert:{e}"),
                order,
                scale_point: None,
                reduction: None,
                mechanisms: vec![Mechanism::Routing, Mechanism::RowCountTiling],
                detail: Some(format!(
                    "expert {e} batch of {} rows (tiling rule {rule}), position {p} in the batch",
                    rows.len()
                )),
            });
        }
    }
    let per_rank = (0..ws)
        .map(|r| RankOutput {
            rows: tpr,
            cols: n,
            data: out[r * tpr * n..(r + 1) * tpr * n].to_vec(),
        })
        .collect();
    Ok(OpOutput {
        per_rank,
        provenance: prov.into_iter().map(|p| p.expect("every token is routed")).collect(),
    })
}
