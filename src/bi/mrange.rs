//! M ranges: `--m 1..512`, `--m 1,8,40..60`. A range is sampled, and each
//! run of consecutive failing M in it is narrowed to its exact first and
//! last failing M by bisection.
//!
//! # Contract
//! - **Syntax** ([`parse_ms`]): a comma-separated list of batch sizes and
//!   ranges `A..B` or `A..=B`; both range forms include B (1 <= A <= B).
//!   The first item's first M is the `batch`/`anchor` baseline.
//! - **Sampling** ([`sample`]): a range `[A, B]` runs A, A+1, B-1, B,
//!   every power of two in it and the M after it, and 32 log-spaced points
//!   (rounded): at most [`MAX_RANGE_SAMPLES`] M. A failing run that no
//!   sampled M falls in is not found (log spacing: about 22% apart from 1
//!   to 512).
//! - **Bisection** of each run of failing M to its exact ends: [`super::bisect`].
//! - The result is in the report (`m_ranges`), one line per range in the
//!   Markdown and the terminal view:
//!   `M range 1..=512 (48 sampled, 9 bisected): first failing M = 17, last = 512`.

use super::limits::Limits;
use serde::{Deserialize, Serialize};

/// Most M one range samples (4 edges, 2 per power of two, 32 log-spaced).
pub const MAX_RANGE_SAMPLES: usize = 4 + 2 * 17 + 32;

/// Most pass/fail boundaries bisected in one check.
pub const MAX_BOUNDARIES: usize = 16;

/// Most distinct M a list with ranges may expand to.
pub const MAX_MS: usize = 4096;

/// One item of an M list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MItem {
    One(usize),
    /// Inclusive.
    Range(usize, usize),
}

/// One run of consecutive failing M in a range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailRun {
    pub first: usize,
    pub last: usize,
    /// Both ends found by bisection (or at the range's edge); false when
    /// the bisection bound was reached and the ends are sampled M.
    pub exact: bool,
}

/// What a range found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MRangeResult {
    /// `A..=B`.
    pub range: String,
    /// M sampled in the range.
    pub sampled: usize,
    /// M checked by bisection.
    pub bisected: usize,
    /// Runs of failing M, in order.
    pub runs: Vec<FailRun>,
}

impl MRangeResult {
    /// `M range 1..=512 (48 sampled, 9 bisected): first failing M = 17,
    /// last = 512` (one clause per run), or `... : no failing M`.
    pub fn line(&self) -> String {
        let runs: Vec<String> = self
            .runs
            .iter()
            .map(|r| {
                format!(
                    "first failing M = {}, last = {}{}",
                    r.first,
                    r.last,
                    if r.exact { "" } else { " (sampled, not bisected)" }
                )
            })
            .collect();
        format!(
            "M range {} ({} sampled, {} bisected): {}",
            self.range,
            self.sampled,
            self.bisected,
            if runs.is_empty() {
                "no failing M".to_string()
            } else {
                runs.join("; ")
            }
        )
    }
}

fn parse_m(s: &str, whole: &str) -> Result<usize, String> {
    let m: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{whole}' is not a batch size or a range A..B"))?;
    if m == 0 || m > Limits::MAX_M {
        return Err(format!("M = {m} is out of range (1..={})", Limits::MAX_M));
    }
    Ok(m)
}

/// Parses `1,8,40..60` / `1..=512` (see the module doc).
pub fn parse_ms(s: &str) -> Result<Vec<MItem>, String> {
    let mut out = Vec::new();
    for item in s.split(',') {
        let item = item.trim();
        let parsed = match item.split_once("..") {
            None => MItem::One(parse_m(item, item)?),
            Some((a, b)) => {
                let b = b.strip_prefix('=').unwrap_or(b);
                let (a, b) = (parse_m(a, item)?, parse_m(b, item)?);
                if a > b {
                    return Err(format!("range '{item}' is empty ({a} > {b})"));
                }
                MItem::Range(a, b)
            }
        };
        out.push(parsed);
    }
    Ok(out)
}

/// The M a range `[lo, hi]` runs (sorted, distinct; see the module doc).
pub fn sample(lo: usize, hi: usize) -> Vec<usize> {
    let mut v = vec![lo, lo + 1, hi.saturating_sub(1), hi];
    let mut p = 1usize;
    while p <= hi {
        v.extend([p, p + 1]);
        p *= 2;
    }
    let ratio = (hi as f64 / lo as f64).ln();
    for i in 0..32 {
        v.push((lo as f64 * (ratio * i as f64 / 31.0).exp()).round() as usize);
    }
    v.retain(|m| (lo..=hi).contains(m));
    v.sort_unstable();
    v.dedup();
    v
}

/// The M a list runs, and its ranges `(A, B)`.
pub type Expanded = (Vec<usize>, Vec<(usize, usize)>);

/// The M list a parsed list runs (each M once, first occurrence first: the
/// first item's first M is the baseline) and its ranges. Err: more than
/// [`MAX_MS`] M.
pub fn expand(items: &[MItem]) -> Result<Expanded, String> {
    let mut ms: Vec<usize> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut ranges = Vec::new();
    for it in items {
        let add = match *it {
            MItem::One(m) => vec![m],
            MItem::Range(a, b) => {
                ranges.push((a, b));
                sample(a, b)
            }
        };
        for m in add {
            if seen.insert(m) {
                ms.push(m);
            }
        }
        if ms.len() > MAX_MS {
            return Err(format!("the M list expands to more than {MAX_MS} batch sizes"));
        }
    }
    Ok((ms, ranges))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_ranges() {
        assert_eq!(
            parse_ms("1, 8,40..60,2..=4").unwrap(),
            vec![MItem::One(1), MItem::One(8), MItem::Range(40, 60), MItem::Range(2, 4)]
        );
        assert_eq!(parse_ms("1..1").unwrap(), vec![MItem::Range(1, 1)]);
        for (bad, want) in [
            ("5..3", "range '5..3' is empty (5 > 3)"),
            ("0..4", "M = 0 is out of range (1..=65536)"),
            ("1..", "'1..' is not a batch size or a range A..B"),
            ("x", "'x' is not a batch size or a range A..B"),
            ("1..70000", "M = 70000 is out of range (1..=65536)"),
        ] {
            assert_eq!(parse_ms(bad).unwrap_err(), want, "{bad}");
        }
    }

    #[test]
    fn samples_edges_powers_and_log_points_within_bounds() {
        let s = sample(1, 512);
        for m in [1, 2, 16, 17, 511, 512] {
            assert!(s.contains(&m), "{m}: {s:?}");
        }
        assert!(s.iter().any(|m| (40..=60).contains(m)), "{s:?}");
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert!(sample(1, 65536).len() <= MAX_RANGE_SAMPLES);
        assert_eq!(sample(7, 7), vec![7]);
        let (ms, ranges) = expand(&parse_ms("64,1..4").unwrap()).unwrap();
        assert_eq!(ms, vec![64, 1, 2, 3, 4]);
        assert_eq!(ranges, vec![(1, 4)]);
    }
}
