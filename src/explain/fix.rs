//! A concrete fix for a divergence: what to pin so that both sides of a
//! failing cell run the same tree. Words are in `words.rs`.

use super::divergence::{Mechanism, TreeDiff};
use crate::order::Order;

/// What changed between the two sides of the comparison.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Varies {
    /// The batch size (M) of the launch.
    BatchSize { left: usize, right: usize },
    /// The code path a row takes (LOCAL vs GATHER rows of a fused op).
    Path { left: String, right: String },
    /// Nothing the caller controls (two runs, two captures).
    Unknown,
}

/// One suggested fix.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Fix {
    /// Run this order for every batch size: the split plan then depends on
    /// (K, N) only. `dispatch` is the one-entry table that says so.
    SplitFromKN { order: Order, dispatch: String },
    /// Compute every row through one path with this order.
    OnePath { order: Order },
    /// A vendor library: pin one algorithm for every M instead of the
    /// heuristic (cuBLASLt: a fixed algo with its split-K and reduction
    /// attributes).
    PinAlgorithm { split: u32, reduce: String },
    /// A Triton kernel: a fixed `BLOCK_K` and `SPLIT_K` for every M (no
    /// autotune key on M).
    TritonConfig { block_k: Option<u32>, split_k: u32 },
    /// Use the same output conversion / scale point / step arithmetic on
    /// both sides.
    SameNumerics { order: Order },
    /// A cross-rank reduction: add the ranks' partial sums in this one rank
    /// order for every chunk and every run, instead of an order that
    /// depends on the chunk's owner (ring) or is drawn per run.
    FixedRankOrder { ranks: Vec<usize> },
}

/// Whether the tree difference is a change of how K is cut and combined.
fn is_schedule(m: &Mechanism) -> bool {
    matches!(
        m,
        Mechanism::Split { .. }
            | Mechanism::Reduce { .. }
            | Mechanism::Tiles { .. }
            | Mechanism::Lanes { .. }
            | Mechanism::Promote { .. }
    )
}

/// The order with more parallel parts (kept for every M: it serves the
/// large batches the faster path was chosen for).
fn wider(l: &Order, r: &Order) -> Order {
    let par = |o: &Order| o.split.max(o.lanes);
    if par(r) > par(l) {
        *r
    } else {
        *l
    }
}

/// Fixes for `diff` (none when the trees are equal).
pub fn suggest(diff: &TreeDiff, varies: &Varies) -> Vec<Fix> {
    if diff.divergence.is_none() {
        return Vec::new();
    }
    let (l, r) = (&diff.left, &diff.right);
    let mut v = Vec::new();
    let schedule = diff.mechanisms.iter().any(is_schedule);
    match varies {
        Varies::Path { .. } => v.push(Fix::OnePath { order: *l }),
        Varies::BatchSize { .. } | Varies::Unknown if schedule => {
            let keep = wider(l, r);
            v.push(Fix::SplitFromKN {
                order: keep,
                dispatch: format!("{{\"dispatch\": [{{\"order\": \"{keep}\"}}]}}"),
            });
            v.push(Fix::TritonConfig {
                block_k: keep.ktile,
                split_k: keep.split.max(1),
            });
            v.push(Fix::PinAlgorithm {
                split: keep.split.max(1),
                reduce: format!("{:?}", keep.reduction()).to_lowercase(),
            });
        }
        _ => {}
    }
    if diff.mechanisms.iter().any(|m| !is_schedule(m)) && !matches!(varies, Varies::Path { .. }) {
        v.push(Fix::SameNumerics { order: *l });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::divergence::diverge;

    #[test]
    fn a_split_that_changes_with_m_gets_a_kn_only_plan() {
        let l: Order = "fma".parse().unwrap();
        let r: Order = "fma;split=4".parse().unwrap();
        let d = diverge(&l, &r, 1024, false);
        let f = suggest(&d, &Varies::BatchSize { left: 1, right: 2 });
        assert!(matches!(&f[0], Fix::SplitFromKN { order, .. } if *order == r), "{f:?}");
        assert!(f.iter().any(|x| matches!(x, Fix::TritonConfig { split_k: 4, .. })));
        assert!(suggest(&diverge(&l, &l, 64, false), &Varies::Unknown).is_empty());
        let p = suggest(
            &d,
            &Varies::Path {
                left: "local".into(),
                right: "gather".into(),
            },
        );
        assert_eq!(p, vec![Fix::OnePath { order: l }]);
    }
}
