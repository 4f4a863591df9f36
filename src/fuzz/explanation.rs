//! The explainer's account of a minimal failure: for the content, batch
//! and position families on a single-device subject, the target row's
//! output is rebuilt in the baseline and the variant batch (and checked
//! against the bytes the failing cell reported), the order behind each is
//! identified from the bytes alone among the explainer's candidates, and
//! where their trees diverge and how to fix it is said. Other cases, or
//! bytes no candidate reproduces, get a line saying so.

use super::case::FuzzCase;
use crate::bi::{target_batch, Cell, Family, Rows};
use crate::explain::{diverge, simplest_order, suggest, Varies};
use crate::gemm::{BLayout, Matrix, Problem};
use crate::order::Order;
use crate::subject::Subject;

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

/// The account of one case: its lines and, when both sides were named,
/// the two orders.
struct Account {
    lines: Vec<String>,
    pair: Option<(Order, Order)>,
}

impl From<Vec<String>> for Account {
    fn from(lines: Vec<String>) -> Account {
        Account { lines, pair: None }
    }
}

/// The kernel's story of a failure (docs/BI.md, "How `mxbi fuzz` explains"):
/// told at the failing case as found, where the two sides' orders are
/// those the kernel runs at a realistic K; when the minimal case reads
/// otherwise (shrinking K can make `fma;split=4` look like `muladd` at
/// K = 2), its reading is given beside it. Empty when the explainer does
/// not read the case (see the module doc).
pub(super) fn explain(subject: &dyn Subject, found: (&FuzzCase, &Cell), minimal: (&FuzzCase, &Cell)) -> Vec<String> {
    let at_found = account(subject, found.0, found.1);
    if found.0 == minimal.0 {
        return at_found.lines;
    }
    let at_min = account(subject, minimal.0, minimal.1);
    let (fk, mk) = (found.0.k, minimal.0.k);
    match (at_found.pair, at_min.pair) {
        (Some(f), Some(m)) if f == m => at_found.lines,
        (Some((fl, fr)), Some((ml, mr))) => {
            let mut lines = vec![format!(
                "told at the failing case as found (M = {}, K = {fk}): the minimal case (K = {mk}) reads as {ml} vs {mr}; at K = {fk} it is {fl} vs {fr}",
                found.0.m
            )];
            lines.extend(at_found.lines);
            lines
        }
        (Some(_), None) => {
            let mut lines = vec![format!(
                "told at the failing case as found (M = {}, K = {fk})",
                found.0.m
            )];
            lines.extend(at_found.lines);
            lines
        }
        (None, _) if !at_min.lines.is_empty() => {
            let mut lines = at_found.lines;
            lines.push(format!("the minimal case (K = {mk}):"));
            lines.extend(at_min.lines.into_iter().map(|l| format!("  {l}")));
            lines
        }
        (None, _) => at_found.lines,
    }
}

/// The account of one case (see the module doc).
fn account(subject: &dyn Subject, fc: &FuzzCase, cell: &Cell) -> Account {
    if subject.world_size() != 1 {
        return Vec::new().into();
    }
    let rows = Rows::with_content(fc.seed, fc.k, fc.n, fc.input, fc.content);
    let (base, var, varies) = match fc.family {
        Family::Content => {
            let Some(i) = fc.row.resolve(fc.m) else {
                return Vec::new().into();
            };
            (
                (target_batch(fc.m, i, 0), i),
                (target_batch(fc.m, i, 1), i),
                Varies::Unknown,
            )
        }
        Family::Batch => {
            let Some(i) = fc.row.resolve(fc.m.min(fc.base_m)) else {
                return Vec::new().into();
            };
            (
                (target_batch(fc.base_m, i, 0), i),
                (target_batch(fc.m, i, 0), i),
                Varies::BatchSize {
                    left: fc.base_m,
                    right: fc.m,
                },
            )
        }
        Family::Position => {
            let Some(i) = fc.row.resolve(fc.m) else {
                return Vec::new().into();
            };
            (
                (target_batch(fc.m, 0, 0), 0),
                (target_batch(fc.m, i, 0), i),
                Varies::Unknown,
            )
        }
        _ => return Vec::new().into(),
    };
    let (Some(left_bytes), Some(right_bytes)) = (
        output_row(subject, &rows, &base.0, base.1),
        output_row(subject, &rows, &var.0, var.1),
    ) else {
        return Vec::new().into();
    };
    // the rebuilt rows must be the cell's bytes
    if let Some(o) = cell.diff.first_offenders.first() {
        let hex = |v: &[f32]| v.get(o.col).map(|x| format!("{:08x}", x.to_bits()));
        if hex(&left_bytes).as_deref() != Some(o.baseline.as_str())
            || hex(&right_bytes).as_deref() != Some(o.variant.as_str())
        {
            return vec![
                "explainer: the target row's bytes did not rebuild as the cell reported them; no account".into(),
            ]
            .into();
        }
    }
    let (left, right) = (identify_row(&rows, &left_bytes), identify_row(&rows, &right_bytes));
    let (Some(left), Some(right)) = (left, right) else {
        let name = |o: Option<Order>| o.map_or("no candidate order".to_string(), |o| o.to_string());
        return vec![format!(
            "explainer: baseline bytes follow {}, variant bytes follow {} (of the explainer's candidate family)",
            name(left),
            name(right)
        )]
        .into();
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
    Account {
        lines,
        pair: Some((left, right)),
    }
}
