//! GPU rows against the model: the per-case comparison (NaN as a class,
//! unwritten outputs counted), the row digest, and the foils (nearby wrong
//! orders the GPU bytes must *not* match).

use super::*;

/// Nearby wrong models of a case ("foils"): the arithmetic changed (fma vs
/// muladd, F = 24 instead of 25, F = 25 instead of the FP8 13, halves
/// instead of the mod-4 split) and the structure removed (no split, no
/// fresh tiles, no lanes, serial instead of pairwise or of a split's
/// butterfly; an aligned split's parts not aligned). The GPU bytes must
/// match the order and *not* its foils; the foils' mismatch counts show how
/// strongly the data tells the orders apart.
pub fn foils(order: &Order) -> Vec<Order> {
    use crate::order::{MmaSplit, Reduce, Tile};
    let mut out = Vec::new();
    let mut arith = *order;
    arith.family = match order.family {
        Family::Fma => Family::MulAdd,
        Family::MulAdd => Family::Fma,
        Family::Mma(mut m) => {
            if m.f == 13 {
                m.f = 25;
                m.out = 23;
            } else if m.split == MmaSplit::Mod4 {
                m.split = MmaSplit::Halves;
            } else {
                m.f = 24;
            }
            Family::Mma(m)
        }
    };
    out.push(arith);
    let mut st = *order;
    if order.lanes > 1 {
        st.lanes = 1;
        st.reduce = None;
    } else if matches!(order.reduce, Some(Reduce::Pairwise))
        || (order.reduction() == Reduce::Butterfly && order.split > 1)
    {
        st.reduce = None;
    } else if order.split > 1 {
        st.split = 1;
        st.interleave = false;
        st.align = None;
    } else if order.tile == Tile::Fresh {
        st.tile = Tile::Carry;
    } else if order.promote.is_some() && order.promote != Some(32) {
        st.promote = None;
    }
    if st != *order {
        out.push(st);
    }
    if order.align.is_some() {
        // the same split, parts of ceil(K / S) (docs/ORDERS.md "Parts")
        let mut unaligned = *order;
        unaligned.align = None;
        out.push(unaligned);
    }
    out.into_iter()
        .filter(|o| o.to_string().parse::<Order>().is_ok())
        .collect()
}

/// Digest of one output row (canonical NaN).
pub fn row_digest(row: &[f32]) -> u64 {
    let bytes: Vec<u8> = row.iter().flat_map(|&x| canonical_bits(x).to_le_bytes()).collect();
    digest64(&bytes)
}

/// Compares GPU output with the model, filling a record.
pub fn compare(case: &ConformCase, gpu: &[f32], model: &[f32], poison: u32, gpu_ms: f32) -> CaseRecord {
    let (mut mismatches, mut nan_payload, mut unwritten) = (0, 0, 0);
    let mut first = Vec::new();
    for (idx, (&g, &m)) in gpu.iter().zip(model).enumerate() {
        if g.to_bits() == poison {
            unwritten += 1;
            continue;
        }
        if g.to_bits() == m.to_bits() {
            continue;
        }
        if g.is_nan() && m.is_nan() {
            nan_payload += 1;
            continue;
        }
        mismatches += 1;
        if first.len() < 16 {
            first.push(Mismatch {
                i: idx / case.n,
                j: idx % case.n,
                gpu: format!("{:08x} ({:e})", g.to_bits(), g),
                model: format!("{:08x} ({:e})", m.to_bits(), m),
            });
        }
    }
    let gpu_row_digests = gpu
        .chunks(case.n)
        .map(|row| format!("{:016x}", row_digest(row)))
        .collect();
    CaseRecord {
        case: case.clone(),
        elements: gpu.len(),
        mismatches,
        nan_payload_differences: nan_payload,
        unwritten,
        first_mismatches: first,
        foils: Vec::new(),
        gpu_row_digests,
        gpu_ms,
        all_nan: !gpu.is_empty() && gpu.iter().all(|x| x.is_nan()),
    }
}
