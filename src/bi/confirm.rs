//! Confirming a failure before it is reported: a flake is not batch
//! dependence.
//!
//! # Contract
//! - A cell whose two sides differ is `BI_FAIL` only after each side (the
//!   baseline batch on its rank, and the variant: its batch, or for
//!   `switch` the partner subject) has been run again
//!   [`CheckOptions::confirm`](super::CheckOptions) times and every re-run
//!   gave the bytes of that side's first run. Otherwise the cell is
//!   `NON_DET`, with [`NonDetRate`]: how many re-runs differed from their
//!   side's first run, of how many.
//! - `confirm = 0` turns the re-runs off (the pre-confirm behaviour: one
//!   run per side). The cost is paid only by cells that would fail.
//! - A cell that is already `NON_DET` because its baseline's second run
//!   differed also gets `confirm` more baseline re-runs, to measure its
//!   rate.

use super::verdict::compare_rows;
use crate::subject::SubjectError;
use serde::{Deserialize, Serialize};

/// Default re-runs of each side of a failing cell (`--confirm`).
pub const DEFAULT_CONFIRM: usize = 3;

/// Most re-runs of one side (`--confirm` is bounded before anything runs).
pub const MAX_CONFIRM: usize = 100;

/// How often re-runs of the same batch disagreed with its first run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NonDetRate {
    /// Re-runs whose bytes differed from the first run of their side.
    pub differed: usize,
    /// Re-runs made (over both sides).
    pub reruns: usize,
    /// `differed / reruns`.
    pub rate: f64,
}

impl NonDetRate {
    pub fn new(differed: usize, reruns: usize) -> NonDetRate {
        NonDetRate {
            differed,
            reruns,
            rate: if reruns == 0 {
                0.0
            } else {
                differed as f64 / reruns as f64
            },
        }
    }

    /// `2 of 6 re-runs differed from their side's first run (rate 0.33)`.
    pub fn text(&self) -> String {
        format!(
            "{} of {} re-runs differed from their side's first run (rate {:.2})",
            self.differed, self.reruns, self.rate
        )
    }
}

/// Runs one side `times` more times; how many runs differ from `first`
/// (`n` columns per row). Subject errors stop at once.
pub(super) fn reruns(
    first: &[f32],
    n: usize,
    times: usize,
    mut run: impl FnMut() -> Result<Vec<f32>, SubjectError>,
) -> Result<usize, SubjectError> {
    let labels: Vec<usize> = (0..first.len().checked_div(n).unwrap_or(0)).collect();
    let mut differed = 0;
    for _ in 0..times {
        let again = run()?;
        if again.len() != first.len() || !compare_rows(first, &again, n, &labels).identical() {
            differed += 1;
        }
    }
    Ok(differed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_runs_that_differ() {
        let first = [1.0f32, 2.0];
        let mut k = 0;
        let d = reruns(&first, 2, 5, || {
            k += 1;
            Ok(if k % 2 == 0 { vec![1.0, 2.5] } else { vec![1.0, 2.0] })
        })
        .unwrap();
        assert_eq!(d, 2);
        let r = NonDetRate::new(2, 6);
        assert_eq!(
            r.text(),
            "2 of 6 re-runs differed from their side's first run (rate 0.33)"
        );
        assert_eq!(NonDetRate::new(0, 0).rate, 0.0);
    }
}
