//! RMSNorm, `y = x * rsqrt(mean(x^2) + eps) * weight`, one device.
//!
//! Numeric contract, per row `x` of length H (all f32, RN = nearest-even):
//! * `ss = sum_h x_h * x_h` evaluated by `gemm(order, x [1,H], x^T [H,1])`
//!   — the order model decides the reduction (e.g. `fma;lanes=32` is a
//!   warp butterfly);
//! * `mean = RN(ss / H)`, `t = RN(mean + eps)`, `r = RN(1 / RN(sqrt(t)))`;
//! * `y_h = RN(RN(x_h * r) * weight_h)`.
//!
//! With `small_batch`, batches of at most `max_m` rows use `small_batch.order`
//! instead (a split reduction to fill the machine at small batch): the
//! negative example, whose row bytes depend on the batch size.

use super::provenance::{Mechanism, RowProvenance};
use super::{matmul_values, parse_order, positive, Inputs, OpError, OpOutput, RankOutput, Result};

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmallBatch {
    pub max_m: usize,
    pub order: String,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormSpec {
    pub m: usize,
    pub h: usize,
    pub eps: f32,
    /// Order of the sum of squares.
    pub order: String,
    /// Batch-size-dependent reduction (negative example); null: fixed order.
    #[serde(default)]
    pub small_batch: Option<SmallBatch>,
}

impl NormSpec {
    pub fn validate(&self) -> Result<()> {
        positive("m", self.m)?;
        positive("h", self.h)?;
        if !self.eps.is_finite() || self.eps < 0.0 {
            return Err(OpError::Spec(format!("eps must be finite and >= 0, got {}", self.eps)));
        }
        parse_order("order", &self.order)?;
        if let Some(s) = &self.small_batch {
            parse_order("small_batch.order", &s.order)?;
        }
        Ok(())
    }

    pub fn input_shapes(&self) -> Vec<(String, Vec<usize>, bool)> {
        vec![
            ("x".into(), vec![self.m, self.h], false),
            ("weight".into(), vec![self.h], false),
        ]
    }

    /// The order used at this batch size.
    pub fn order_for(&self, m: usize) -> &str {
        match &self.small_batch {
            Some(s) if m <= s.max_m => &s.order,
            _ => &self.order,
        }
    }
}

/// RMSNorm of one row under `order` (the contract above).
pub fn rms_row(order: &crate::order::Order, x: &[f32], w: &[f32], eps: f32) -> Result<Vec<f32>> {
    let h = x.len();
    let ss = matmul_values(order, x, x, 1, h, 1)?[0];
    let mean = ss / h as f32;
    let t = mean + eps;
    let r = 1.0f32 / t.sqrt();
    Ok(x.iter().zip(w).map(|(&v, &g)| (v * r) * g).collect())
}

pub fn run(spec: &NormSpec, inputs: &Inputs) -> Result<OpOutput> {
    let (m, h) = (spec.m, spec.h);
    let x = inputs.values("x", &[m, h])?;
    let w = inputs.values("weight", &[h])?;
    let ostr = spec.order_for(m);
    let order = parse_order("order", ostr)?;
    let mut data = Vec::with_capacity(m * h);
    let mut provenance = Vec::with_capacity(m);
    for i in 0..m {
        data.extend(rms_row(&order, &x[i * h..(i + 1) * h], w, spec.eps)?);
        provenance.push(RowProvenance {
            rank: 0,
            row: i,
            global_row: i,
            computed_on: vec![0],
            path: "norm".into(),
            order,
            scale_point: None,
            reduction: None,
            mechanisms: if spec.small_batch.is_some() {
                vec![Mechanism::BatchDependentSplit]
            } else {
                vec![]
            },
            detail: spec
                .small_batch
                .as_ref()
                .map(|s| format!("batch of {m} rows; small-batch order applies when m <= {}", s.max_m)),
        });
    }
    Ok(OpOutput {
        per_rank: vec![RankOutput { rows: m, cols: h, data }],
        provenance,
    })
}
