//! The explainer's account of a minimal failure: for the content, batch
//! and position families on a single-device subject, the target row's
//! output is rebuilt in the baseline and the variant batch (and checked
//! against the bytes the failing cell reported), the order behind each is
//! identified from the bytes alone among the explainer's candidates, and
//! where their trees diverge and how to fix it is said. Other cases, or
//! bytes no candidate reproduces, get a line saying so.

use super::case::FuzzCase;
use crate::bi::{other_id, Cell, Family, Rows};
use crate::explain::{diverge, simplest_order, suggest, Varies};
use crate::gemm::{BLayout, Matrix, Problem};
use crate::order::Order;
use crate::subject::Subject;

/// A batch of `m` rows: the target (id 0) at `at`, the others from `set`.
fn batch_ids(m: usize, at: usize, set: u64) -> Vec<u64> {
    let mut ids: Vec<u64> = (0..m - 1).map(|j| other_id(set, j)).collect();
    ids.insert(at, 0);
    ids
}

/// Row `at` of `subject`'s output on the batch `ids`.
fn output_row(subject: &dyn Subject, rows: &Rows, ids: &[u64], at: usize) -> Option<Vec<f32>> {
    let a = rows.batch(ids);
    let p = Problem {
        a: Matrix::F32(&a),
        b: Matrix::F32(&rows.b),
        m: ids.len(),
        n: rows.n,
        k: rows.k,
        b_layout: BLayout::Kn,
    };
    subject.run(&p, Some(&[at])).ok()
}

/// The simplest candidate order that reproduces `observed` for the target row.
fn identify_row(rows: &Rows, observed: &[f32]) -> Option<Order> {
    simplest_order(&rows.row(0), &rows.b, rows.k, rows.n, observed)
}

/// The account (see the module doc); empty when the case is not one the
/// explainer reads.
pub(super) fn explain(subject: &dyn Subject, fc: &FuzzCase, cell: &Cell) -> Vec<String> {
    if subject.world_size() != 1 {
        return Vec::new();
    }
    let rows = Rows::with_content(fc.seed, fc.k, fc.n, fc.input, fc.content);
    let (base, var, varies) = match fc.family {
        Family::Content => {
            let Some(i) = fc.row.resolve(fc.m) else {
                return Vec::new();
            };
            ((batch_ids(fc.m, i, 0), i), (batch_ids(fc.m, i, 1), i), Varies::Unknown)
        }
        Family::Batch => {
            let Some(i) = fc.row.resolve(fc.m.min(fc.base_m)) else {
                return Vec::new();
            };
            (
                (batch_ids(fc.base_m, i, 0), i),
                (batch_ids(fc.m, i, 0), i),
                Varies::BatchSize {
                    left: fc.base_m,
                    right: fc.m,
                },
            )
        }
        Family::Position => {
            let Some(i) = fc.row.resolve(fc.m) else {
                return Vec::new();
            };
            ((batch_ids(fc.m, 0, 0), 0), (batch_ids(fc.m, i, 0), i), Varies::Unknown)
        }
        _ => return Vec::new(),
    };
    let (Some(left_bytes), Some(right_bytes)) = (
        output_row(subject, &rows, &base.0, base.1),
        output_row(subject, &rows, &var.0, var.1),
    ) else {
        return Vec::new();
    };
    // the rebuilt rows must be the cell's bytes
    if let Some(o) = cell.diff.first_offenders.first() {
        let hex = |v: &[f32]| v.get(o.col).map(|x| format!("{:08x}", x.to_bits()));
        if hex(&left_bytes).as_deref() != Some(o.baseline.as_str())
            || hex(&right_bytes).as_deref() != Some(o.variant.as_str())
        {
            return vec![
                "explainer: the target row's bytes did not rebuild as the cell reported them; no account".into(),
            ];
        }
    }
    let (left, right) = (identify_row(&rows, &left_bytes), identify_row(&rows, &right_bytes));
    let (Some(left), Some(right)) = (left, right) else {
        let name = |o: Option<Order>| o.map_or("no candidate order".to_string(), |o| o.to_string());
        return vec![format!(
            "explainer: baseline bytes follow {}, variant bytes follow {} (of the explainer's candidate family)",
            name(left),
            name(right)
        )];
    };
    let mut lines = vec![format!(
        "explained from the bytes alone (mxbi explain): the baseline row is {left}, the variant row is {right}"
    )];
    if left != right {
        let diff = diverge(&left, &right, fc.k, false);
        lines.extend(diff.to_string().lines().map(|l| format!("  {l}")));
        for f in suggest(&diff, &varies) {
            lines.push(format!("fix: {f}"));
        }
    }
    lines
}
