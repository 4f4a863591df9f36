//! Mechanisms that couple rows without any order change: the activation is
//! quantized inside the op, and the scale of row i can depend on other rows.
//!
//! `y = gemm(order, x̂, w)` with `x̂` the dequantized activation:
//! * `per-tensor`: `amax = max |x|` over the whole `[M, K]` tensor,
//!   `s = RN(amax / max_elem)` (f32; `s = 1` when amax is 0),
//!   `q = cast(RN(x / s))` to the element format (RNE, saturating),
//!   `x̂ = RN(decode(q) * s)`. Couples every row to every other (BI fails).
//! * `per-row`: the same with the row's own amax (BI-safe control).
//! * `mx-k`: OCP MX quantization, blocks of 32 along K (BI-safe).
//! * `mx-m`: OCP MX quantization, blocks of 32 along M (as for a transposed
//!   operand): row i shares each scale with the other rows of its 32-row
//!   block (zero-padded when M is not a multiple of 32). BI fails.
//!
//! MX dequantization is exact (an error if a value is not exact in f32).

use super::provenance::{Mechanism, RowProvenance};
use super::{matmul_values, parse_order, positive, Inputs, OpError, OpOutput, RankOutput, Result};
use crate::format::{encode_f32, CastPolicy, Overflow};
use crate::mx::{self, AxisLayout, MxFormat, MxPreset};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DynQuant {
    PerTensor,
    PerRow,
    MxK,
    MxM,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantSpec {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub quant: DynQuant,
    /// Element format (per-tensor/per-row use its element and max).
    #[serde(default = "e4m3")]
    pub format: MxFormat,
    /// Order of the matmul on the dequantized activation and `w`.
    pub order: String,
}

fn e4m3() -> MxFormat {
    MxFormat::Fp8E4M3
}

impl QuantSpec {
    pub fn validate(&self) -> Result<()> {
        positive("m", self.m)?;
        positive("k", self.k)?;
        positive("n", self.n)?;
        parse_order("order", &self.order)?;
        Ok(())
    }

    pub fn input_shapes(&self) -> Vec<(String, Vec<usize>, bool)> {
        vec![
            ("x".into(), vec![self.m, self.k], false),
            ("w".into(), vec![self.k, self.n], false),
        ]
    }
}

fn scaled_cast(x: &[f32], fmt: MxFormat, offset: usize) -> Result<(Vec<f32>, f32)> {
    let el = fmt.element();
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(OpError::Input(format!(
            "x[{}] = {} is not finite; dynamic quantization needs finite inputs",
            offset + i,
            x[i]
        )));
    }
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let s = if amax == 0.0 {
        1.0
    } else {
        amax / fmt.max_value() as f32
    };
    let mut pol = CastPolicy::ieee(el);
    pol.overflow = Overflow::Saturate;
    let q = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = encode_f32(v / s, el, &pol, (offset + i) as u64)
                .map_err(|e| OpError::Input(format!("quantizing x: {e}")))?;
            Ok(el.decode_f32(c) * s)
        })
        .collect::<Result<Vec<f32>>>()?;
    Ok((q, amax))
}

/// The dequantized activation and a per-row note.
pub fn quantize_activation(spec: &QuantSpec, x: &[f32]) -> Result<(Vec<f32>, Vec<String>)> {
    let (m, k) = (spec.m, spec.k);
    match spec.quant {
        DynQuant::PerTensor => {
            let (q, amax) = scaled_cast(x, spec.format, 0)?;
            Ok((q, vec![format!("per-tensor amax {amax:e} over all {m} rows"); m]))
        }
        DynQuant::PerRow => {
            let mut out = Vec::with_capacity(m * k);
            let mut notes = Vec::with_capacity(m);
            for i in 0..m {
                let (q, amax) = scaled_cast(&x[i * k..(i + 1) * k], spec.format, i * k)?;
                out.extend(q);
                notes.push(format!("row amax {amax:e}"));
            }
            Ok((out, notes))
        }
        DynQuant::MxK | DynQuant::MxM => {
            let axis = if spec.quant == DynQuant::MxK { 1 } else { 0 };
            let layout = AxisLayout::new(&[m, k], axis, 32, true).map_err(|e| OpError::Input(e.to_string()))?;
            let p = MxPreset::Ocp.policy(spec.format);
            let q = mx::quantize(x, &layout, spec.format, &p).map_err(|e| OpError::Input(e.to_string()))?;
            let (v, inexact) =
                mx::dequantize(&q.codes, &q.scales, &layout, spec.format).map_err(|e| OpError::Input(e.to_string()))?;
            if inexact > 0 {
                return Err(OpError::Input(format!(
                    "{inexact} dequantized values are not exact in f32"
                )));
            }
            let notes = (0..m)
                .map(|i| {
                    if axis == 0 {
                        format!("MX block along M: rows {}..{}", i / 32 * 32, (i / 32 * 32 + 32).min(m))
                    } else {
                        "MX blocks along K (own row only)".into()
                    }
                })
                .collect();
            Ok((v, notes))
        }
    }
}

pub fn run(spec: &QuantSpec, inputs: &Inputs) -> Result<OpOutput> {
    let (m, k, n) = (spec.m, spec.k, spec.n);
    let x = inputs.values("x", &[m, k])?;
    let w = inputs.values("w", &[k, n])?;
    let order = parse_order("order", &spec.order)?;
    let (xq, notes) = quantize_activation(spec, x)?;
    let data = matmul_values(&order, &xq, w, m, k, n)?;
    let mech = match spec.quant {
        DynQuant::PerTensor => vec![Mechanism::PerTensorAmax],
        DynQuant::MxM => vec![Mechanism::MxAlongM],
        DynQuant::PerRow | DynQuant::MxK => vec![],
    };
    let scale_point = match spec.quant {
        DynQuant::MxK | DynQuant::MxM => Some("dequant".to_string()),
        _ => None,
    };
    let provenance = notes
        .into_iter()
        .enumerate()
        .map(|(i, note)| RowProvenance {
            rank: 0,
            row: i,
            global_row: i,
            computed_on: vec![0],
            path: "quant-matmul".into(),
            order,
            scale_point: scale_point.clone(),
            reduction: None,
            mechanisms: mech.clone(),
            detail: Some(note),
        })
        .collect();
    Ok(OpOutput {
        per_rank: vec![RankOutput { rows: m, cols: n, data }],
        provenance,
    })
}
