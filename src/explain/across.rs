//! The cross-row answer: one headline for several identified rows.
//!
//! # Contract
//! - An order reproduces every row iff it is among every row's matches
//!   ([`RowIdentity::matches`]): the headline is the intersection of the
//!   per-row match sets, simplest first, grouped by tree class
//!   ([`super::candidates::order_key`]: orders of one class compute the same
//!   thing, so intersecting orders and intersecting classes agree).
//! - When the intersection is empty, the rows are split into groups that
//!   share an order: repeatedly, the order reproducing the most of the rows
//!   not yet grouped (ties: the simplest, then its spelling) takes those
//!   rows. Rows that no order reproduces are listed apart. The groups say
//!   which rows disagree; the split is deterministic (no thread count or
//!   hash order enters it).

use super::candidates::order_key;
use super::identify::RowIdentity;
use crate::order::Order;

/// Rows that one order reproduces (when no order reproduces every row).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RowGroup {
    pub order: Order,
    pub rows: Vec<usize>,
}

/// One answer for several rows.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AcrossRows {
    /// The rows, as identified.
    pub rows: Vec<usize>,
    /// The orders that reproduce every row, simplest first, grouped by
    /// tree class (each class's first order is its simplest spelling).
    pub classes: Vec<Vec<Order>>,
    /// When no order reproduces every row: which order reproduces which
    /// rows (empty otherwise).
    pub groups: Vec<RowGroup>,
    /// Rows no order reproduces.
    pub unmatched: Vec<usize>,
}

impl AcrossRows {
    /// The headline order: the simplest that reproduces every row.
    pub fn order(&self) -> Option<Order> {
        self.classes.first().and_then(|c| c.first()).copied()
    }
}

fn simplicity(o: &Order) -> (usize, usize, String) {
    let s = o.to_string();
    (s.matches(';').count(), s.len(), s)
}

/// The cross-row answer of the identified rows `ids` (K terms per row).
pub fn across_rows(ids: &[RowIdentity], k: usize) -> AcrossRows {
    let rows: Vec<usize> = ids.iter().map(|id| id.row).collect();
    let unmatched: Vec<usize> = ids.iter().filter(|id| id.matches.is_empty()).map(|id| id.row).collect();
    let mut common: Vec<Order> = ids.first().map(|id| id.matches.clone()).unwrap_or_default();
    for id in ids.iter().skip(1) {
        common.retain(|o| id.matches.contains(o));
    }
    common.sort_by_key(simplicity);
    let mut classes: Vec<(u64, Vec<Order>)> = Vec::new();
    for o in common {
        let key = order_key(&o, k);
        match classes.iter_mut().find(|(x, _)| *x == key) {
            Some((_, v)) => v.push(o),
            None => classes.push((key, vec![o])),
        }
    }
    let mut groups = Vec::new();
    if classes.is_empty() {
        let mut left: Vec<&RowIdentity> = ids.iter().filter(|id| !id.matches.is_empty()).collect();
        while !left.is_empty() {
            let mut seen: Vec<Order> = left.iter().flat_map(|id| id.matches.iter().copied()).collect();
            seen.sort_by_key(simplicity);
            seen.dedup();
            let reproduced = |o: &Order| left.iter().filter(|id| id.matches.contains(o)).count();
            // the most rows; the first (simplest) among equals
            let best = seen
                .iter()
                .fold(None::<(Order, usize)>, |acc, o| {
                    let c = reproduced(o);
                    match acc {
                        Some((_, b)) if b >= c => acc,
                        _ => Some((*o, c)),
                    }
                })
                .map(|(o, _)| o)
                .expect("every row left has a match");
            let (took, rest): (Vec<&RowIdentity>, Vec<&RowIdentity>) =
                left.into_iter().partition(|id| id.matches.contains(&best));
            groups.push(RowGroup {
                order: best,
                rows: took.iter().map(|id| id.row).collect(),
            });
            left = rest;
        }
    }
    AcrossRows {
        rows,
        classes: classes.into_iter().map(|(_, v)| v).collect(),
        groups,
        unmatched,
    }
}
