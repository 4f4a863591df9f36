//! Comparing ranks and models: the global rows whose copies differ across
//! ranks, the rank orders that reproduce a reduced output, and (GPU runs)
//! one case's per-rank GPU outputs against the CPU model.

#[cfg(feature = "cuda")]
use super::cases::CollectiveCase;
#[cfg(feature = "cuda")]
use super::report::CollectiveRecord;
#[cfg(feature = "cuda")]
use crate::device::conform::row_digest;
#[cfg(feature = "cuda")]
use crate::device::{DeviceError, Result};
use crate::op::OpSpec;
#[cfg(feature = "cuda")]
use crate::op::{run_op, Inputs};

/// Names the rank order behind each rank's reduced output: the partials
/// (`[rank][element]`, as summed) and each rank's output (the whole sum for
/// an all-reduce, the rank's `1/WS` part for a reduce-scatter) are cut by
/// `explain::reduction::segments` over every serial order and the tree
/// into runs of elements one order reproduces; one line per run:
/// `rank R: elements A..B: NAMES` (`ring@c`, `fixed`, `tree`, or a rank
/// list; `+N more` when several computations reproduce the run, `none`
/// when no candidate does).
pub fn reduction_orders(partials: &[Vec<f32>], outputs: &[Vec<f32>], scatter: bool) -> Vec<String> {
    use crate::explain::reduction::{candidates, segments};
    use crate::op::reduce::Sum;
    let ws = partials.len();
    let cands = candidates(ws, true);
    let add = |x: f32, y: f32| Sum::F32.add(x, y);
    let mut lines = Vec::new();
    for (r, out) in outputs.iter().enumerate() {
        let off = if scatter { r * out.len() } else { 0 };
        let parts: Vec<&[f32]> = partials.iter().map(|p| &p[off..off + out.len()]).collect();
        for sg in segments(&parts, out, &cands, &add) {
            let names = match sg.matches.first() {
                None => "none".to_string(),
                Some(&i) => {
                    let mut t = cands[i].names(ws).join(" = ");
                    if sg.matches.len() > 1 {
                        t.push_str(&format!(" (+{} more)", sg.matches.len() - 1));
                    }
                    t
                }
            };
            lines.push(format!("rank {r}: elements {}..{}: {names}", sg.start, sg.end));
        }
    }
    lines
}

/// The global rows whose copies differ across ranks, for ops where every
/// rank holds every row; empty for a reduce-scatter (each rank holds other
/// rows: there are no copies to compare).
pub fn op_cross_rank_differences(spec: &OpSpec, per_rank: &[Vec<f32>], n: usize) -> Vec<usize> {
    match spec {
        OpSpec::MatmulReduceScatter(_) => Vec::new(),
        _ => cross_rank_differences(per_rank, n),
    }
}

/// Global rows whose bytes differ between ranks (`M` rows per rank).
pub fn cross_rank_differences(per_rank: &[Vec<f32>], n: usize) -> Vec<usize> {
    let rows = per_rank.first().map_or(0, |r| r.len() / n.max(1));
    (0..rows)
        .filter(|&g| {
            let first = &per_rank[0][g * n..(g + 1) * n];
            per_rank[1..].iter().any(|r| {
                r[g * n..(g + 1) * n]
                    .iter()
                    .zip(first)
                    .any(|(a, b)| a.to_bits() != b.to_bits())
            })
        })
        .collect()
}

/// Compares one case's per-rank GPU outputs with the CPU model.
#[cfg(feature = "cuda")]
pub(super) fn record(
    case: &CollectiveCase,
    spec: &OpSpec,
    inputs: &Inputs,
    gpu_out: Vec<Vec<f32>>,
    notes: Vec<String>,
) -> Result<CollectiveRecord> {
    let model = run_op(spec, inputs).map_err(|e| DeviceError::Refused(format!("{}: model: {e}", case.name)))?;
    let n = model.per_rank[0].cols;
    let mut mismatches = 0;
    for (g, m) in gpu_out.iter().zip(&model.per_rank) {
        mismatches += g
            .iter()
            .zip(&m.data)
            .filter(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()))
            .count();
    }
    let per_model: Vec<Vec<f32>> = model.per_rank.iter().map(|r| r.data.clone()).collect();
    Ok(CollectiveRecord {
        case: case.clone(),
        ranks: gpu_out.len(),
        rows: model.per_rank[0].rows,
        n,
        mismatches,
        gpu_row_digests: gpu_out
            .iter()
            .map(|o| o.chunks(n).map(|row| format!("{:016x}", row_digest(row))).collect())
            .collect(),
        gpu_cross_rank_rows: op_cross_rank_differences(spec, &gpu_out, n),
        model_cross_rank_rows: op_cross_rank_differences(spec, &per_model, n),
        reduction_orders: Vec::new(),
        paths: model
            .provenance
            .iter()
            .filter(|p| p.row == 0 || p.row + 1 == model.per_rank[0].rows)
            .map(|p| format!("rank {} row {}: {} {}", p.rank, p.row, p.path, p.order))
            .collect(),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{generate, run_op, GenOpts};
    #[test]
    fn reduction_orders_name_each_ring_position() {
        use crate::op::reduce::partials;
        for (ws, scatter) in [(4, true), (8, true), (4, false)] {
            let preset = if scatter { "mmrs-ring" } else { "mmar-ring" };
            let spec =
                OpSpec::from_value(serde_json::json!({"preset": preset, "world_size": ws, "m": 4 * ws})).unwrap();
            let (OpSpec::MatmulReduceScatter(rs) | OpSpec::MatmulAllReduce(rs)) = &spec else {
                unreachable!()
            };
            let inputs = generate(&spec, &GenOpts::new(11));
            let p = partials(rs, &inputs).unwrap();
            let out: Vec<Vec<f32>> = run_op(&spec, &inputs)
                .unwrap()
                .per_rank
                .into_iter()
                .map(|r| r.data)
                .collect();
            let lines = reduction_orders(&p, &out, scatter);
            if scatter {
                // one run per rank, its own chunk's ring position, no other computation
                let want: Vec<String> = (0..ws)
                    .map(|r| {
                        let fixed = if r == ws - 1 { " = fixed" } else { "" };
                        format!("rank {r}: elements 0..256: ring@{r}{fixed}")
                    })
                    .collect();
                assert_eq!(lines, want);
            } else {
                // every rank: WS runs, ring@0, ring@1, ... in chunk order
                let r0: Vec<&String> = lines.iter().filter(|l| l.starts_with("rank 0:")).collect();
                assert_eq!(r0.len(), ws, "{lines:?}");
                for (c, l) in r0.iter().enumerate() {
                    assert!(l.contains(&format!("ring@{c}")), "{l}");
                }
            }
        }
    }
}
