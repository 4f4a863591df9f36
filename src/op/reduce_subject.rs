//! MatmulReduceScatter and MatmulAllReduce presets (`mmrs-*`, `mmar-*`) as
//! checker subjects: the job's A `[M, K]` is x1, B `[K, N]` (or `[N, K]`)
//! is x2; rank `r` computes the partial product over its K shard, and the
//! partials of a row's chunk are added in the rank order of the reduction
//! (`crate::op::reduce`, docs/OPS.md). Only the requested rows are computed
//! (a partial row depends only on its own row of x1).
//!
//! # Ranks
//! - All-reduce: every rank holds every row; `run_on_rank(r)` is rank r's
//!   copy (the all-gather half copies bytes, so the copies agree).
//! - Reduce-scatter: rank `r` holds chunk `r` only (`M / WS` rows, M must
//!   divide). `run` answers each row as the rank that holds it has it (the
//!   reduce-scatter's outputs in rank order); `run_on_rank(r)` answers rows
//!   of chunk `r` and refuses any other row as Unsupported (no such copy
//!   exists): a `rank/held` cell asking rank r for another rank's row is an
//!   ERROR, by construction.
//!
//! # Spelling and knobs
//! `op:PRESET` with optional overrides `;reduction=ring|tree|fixed|nondet`
//! and `;sum=f32|bf16` (e.g. `op:mmar-ring;reduction=tree;sum=bf16`).
//! Knobs: `world_size` (one of the preset's sizes); `deterministic_comm`
//! only where it agrees with the reduction (false for `nondet`, true for
//! the others); MX scale knobs are refused (plain values).
//!
//! # Non-determinism
//! `nondet` draws its order per chunk from the spec's seed and a trial
//! number; the subject counts its calls and uses the count as the trial,
//! so every call is a new run (two runs of one batch differ where the drawn
//! orders differ and the bytes show it). The checker calls in a fixed
//! sequence, so a check's report is still the same on every run.

use super::presets::Preset;
use super::reduce::{combine, rank_order, ReduceSpec, Reduction, Sum};
use super::{matmul_values, parse_order, OpSpec};
use crate::gemm::{BLayout, Matrix, Problem};
use crate::order::{InType, Order};
use crate::subject::{Knobs, SubjectError};
use std::sync::atomic::{AtomicU64, Ordering};

/// A reduce preset as a subject (see the module doc).
pub struct ReduceSubject {
    name: String,
    template: ReduceSpec,
    order: Order,
    scatter: bool,
    world_size: usize,
    calls: AtomicU64,
}

impl ReduceSubject {
    /// `preset` is a `mmrs-*`/`mmar-*` preset, `overrides` the `;key=value`
    /// parts after its name. Err: one line.
    pub fn new(preset: &'static Preset, overrides: &[&str], knobs: &Knobs) -> Result<ReduceSubject, String> {
        let name = preset.name;
        let mut spec = serde_json::json!({ "preset": name });
        let mut canonical = vec![name.to_string()];
        for kv in overrides {
            let (key, value) = kv
                .split_once('=')
                .ok_or_else(|| format!("op:{name}: override '{kv}': expected KEY=VALUE"))?;
            let v = match key.trim() {
                "reduction" => match value.trim() {
                    "nondet" => serde_json::json!({"kind": "nondet", "seed": 1}),
                    k @ ("ring" | "tree" | "fixed") => serde_json::json!({ "kind": k }),
                    other => {
                        return Err(format!(
                            "op:{name}: unknown reduction '{other}'; expected ring, tree, fixed or nondet"
                        ))
                    }
                },
                "sum" => match value.trim() {
                    s @ ("f32" | "bf16") => serde_json::json!(s),
                    other => return Err(format!("op:{name}: unknown sum type '{other}'; expected f32 or bf16")),
                },
                other => {
                    return Err(format!(
                        "op:{name}: unknown override '{other}'; a reduce preset takes reduction= and sum="
                    ))
                }
            };
            spec[key.trim()] = v;
            canonical.push(format!("{}={}", key.trim(), value.trim()));
        }
        if knobs.x1_scales.is_some() || knobs.x2_scales.is_some() {
            return Err(format!(
                "op:{name} takes no MX scale knobs ({}): its inputs are plain values",
                knobs.id()
            ));
        }
        if let Some(ws) = knobs.world_size {
            spec["world_size"] = serde_json::json!(ws);
        }
        let resolved = OpSpec::from_value(spec).map_err(|e| format!("op:{name}: {e}"))?;
        let (template, scatter) = match resolved {
            OpSpec::MatmulReduceScatter(s) => (s, true),
            OpSpec::MatmulAllReduce(s) => (s, false),
            _ => return Err(format!("op:{name} is not a reduce preset")),
        };
        if let Some(det) = knobs.deterministic_comm {
            let nondet = matches!(template.reduction, Reduction::Nondet { .. });
            if det == nondet {
                return Err(format!(
                    "op:{name}: deterministic_comm = {det} contradicts its {} reduction",
                    if nondet { "non-deterministic" } else { "deterministic" }
                ));
            }
        }
        let order = parse_order("order", &template.order).map_err(|e| format!("op:{name}: {e}"))?;
        Ok(ReduceSubject {
            name: format!("op:{}", canonical.join(";")),
            world_size: template.world_size,
            template,
            order,
            scatter,
            calls: AtomicU64::new(0),
        })
    }

    pub fn name(&self) -> String {
        self.name.clone()
    }

    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The op spec of a job of `m` rows (K sharded over the ranks, the
    /// rows chunked as [`ReduceSubject::run_rows`] does).
    pub fn op_spec(&self, m: usize, k: usize, n: usize) -> OpSpec {
        let spec = ReduceSpec {
            m,
            k,
            n,
            ..self.template.clone()
        };
        if self.scatter {
            OpSpec::MatmulReduceScatter(spec)
        } else {
            OpSpec::MatmulAllReduce(spec)
        }
    }

    /// The element type of the partial order's steps.
    pub fn input(&self) -> InType {
        self.order.mma().map_or(InType::F32, |m| m.input)
    }

    fn unsupported(&self, why: impl Into<String>) -> SubjectError {
        SubjectError::Unsupported {
            subject: self.name(),
            why: why.into(),
        }
    }

    /// The requested global rows; `rank`: None for each row's holder (the
    /// reduce-scatter's view), Some(r) for rank r's copy.
    pub fn run_rows(&self, p: &Problem, rank: Option<usize>, rows: &[usize]) -> Result<Vec<f32>, SubjectError> {
        let (m, k, n, ws) = (p.m, p.k, p.n, self.world_size);
        let spec = ReduceSpec {
            m,
            k,
            n,
            ..self.template.clone()
        };
        spec.validate(self.scatter)
            .map_err(|e| self.unsupported(e.to_string()))?;
        if let Some(&g) = rows.iter().find(|&&g| g >= m) {
            return Err(self.unsupported(format!("row {g} is out of range (M = {m})")));
        }
        let cr = m.div_ceil(ws);
        if let Some(r) = rank {
            if r >= ws {
                return Err(self.unsupported(format!("rank {r} of world size {ws}")));
            }
            if self.scatter {
                if let Some(&g) = rows.iter().find(|&&g| g / cr != r) {
                    return Err(self.unsupported(format!(
                        "rank {r} does not hold row {g}: reduce-scatter leaves rows {}..{} on rank {r} only, row {g} on rank {}",
                        r * cr,
                        (r + 1) * cr,
                        g / cr
                    )));
                }
            }
        }
        let (Matrix::F32(a), Matrix::F32(b)) = (p.a, p.b) else {
            return Err(self.unsupported("a reduce op takes plain values, not MX codes"));
        };
        let kr = k / ws;
        // every rank's partial of the requested rows, as the sum type holds it
        let mut partials = Vec::with_capacity(ws);
        for r in 0..ws {
            let ar: Vec<f32> = rows
                .iter()
                .flat_map(|&g| a[g * k + r * kr..g * k + (r + 1) * kr].iter().copied())
                .collect();
            let br: Vec<f32> = match p.b_layout {
                BLayout::Kn => b[r * kr * n..(r + 1) * kr * n].to_vec(),
                BLayout::Nk => (0..kr)
                    .flat_map(|kk| (0..n).map(move |j| (kk, j)))
                    .map(|(kk, j)| b[j * k + r * kr + kk])
                    .collect(),
            };
            let mut pr =
                matmul_values(&self.order, &ar, &br, rows.len(), kr, n).map_err(|e| self.unsupported(e.to_string()))?;
            if spec.sum != Sum::F32 {
                pr.iter_mut().for_each(|x| *x = spec.sum.load(*x));
            }
            partials.push(pr);
        }
        let trial = self.calls.fetch_add(1, Ordering::Relaxed);
        let mut out = Vec::with_capacity(rows.len() * n);
        for (i, &g) in rows.iter().enumerate() {
            let (ranks, pairwise) = rank_order(spec.reduction, ws, g / cr, trial);
            let parts: Vec<&[f32]> = ranks.iter().map(|&r| &partials[r][i * n..(i + 1) * n]).collect();
            out.extend(combine(&parts, pairwise, spec.sum));
        }
        Ok(out)
    }
}
