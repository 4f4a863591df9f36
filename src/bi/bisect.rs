//! Bisection of M ranges ([`super::mrange`]): each run of consecutive
//! failing sampled M narrowed to its exact first and last failing M.
//!
//! # Contract
//! - **An M fails** when any of its cells is `BI_FAIL`.
//! - **Bisection** ([`bisect_ranges`]): for each maximal run of consecutive
//!   failing sampled M, between the passing sample before it and its first
//!   failing sample (and its last failing sample and the passing sample
//!   after it), the midpoint M is checked (every family of the check; the
//!   baseline-relative families against the same baseline) until the two
//!   are adjacent: the first (last) failing M is then exact. A run that
//!   starts (ends) at the range's edge starts (ends) there. At most
//!   [`MAX_BOUNDARIES`] boundaries are bisected per check (each at most
//!   17 steps, M <= 65536); a run beyond that keeps its sampled ends and
//!   says `exact: false`. The cells of bisected M join the report.

use super::cell::Cell;
use super::content::Content;
use super::family::Family;
use super::mrange::{sample, FailRun, MRangeResult, MAX_BOUNDARIES};
use super::options::CheckOptions;
use super::report::Report;
use super::run::check_cells;
use super::verdict::Verdict;
use crate::subject::{Knobs, Subject};
use std::collections::BTreeMap;

/// Pass/fail by M, from cells already run and cells run on demand.
struct Status<'a> {
    known: BTreeMap<usize, bool>,
    subject: &'a dyn Subject,
    vs: Option<&'a dyn Subject>,
    opts: &'a CheckOptions,
    content: Content,
    /// Cells of bisected M, for the report.
    cells: Vec<Cell>,
    bisected: usize,
}

impl Status<'_> {
    fn fails(&mut self, m: usize) -> Result<bool, String> {
        if let Some(&f) = self.known.get(&m) {
            return Ok(f);
        }
        let m0 = self.opts.ms[0];
        let mut failed = false;
        for f in &self.opts.families {
            let relative = matches!(f, Family::Batch | Family::Anchor);
            let o = CheckOptions {
                families: vec![*f],
                ms: if relative { vec![m0, m] } else { vec![m] },
                ..self.opts.clone()
            };
            if relative && m == m0 {
                continue;
            }
            let cells = check_cells(self.subject, self.vs, &o, self.content, &Knobs::default())?;
            failed |= cells.iter().any(|c| c.m == m && c.verdict == Verdict::Fail);
            self.cells.extend(cells.into_iter().filter(|c| c.m == m));
        }
        self.bisected += 1;
        self.known.insert(m, failed);
        Ok(failed)
    }

    /// `a < b` with different status: the adjacent pair where it changes.
    fn bisect(&mut self, mut a: usize, mut b: usize) -> Result<(usize, usize), String> {
        let sa = self.fails(a)?;
        while b - a > 1 {
            let mid = a + (b - a) / 2;
            if self.fails(mid)? == sa {
                a = mid;
            } else {
                b = mid;
            }
        }
        Ok((a, b))
    }
}

/// Narrows each range's runs of failing M by bisection (module doc), adds
/// the bisected cells to `report` and its `m_ranges`. `opts` is the check
/// that made `report` (unsharded), `ranges` from [`super::expand`].
pub fn bisect_ranges(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    content: Content,
    ranges: &[(usize, usize)],
    report: &mut Report,
) -> Result<(), String> {
    let mut known: BTreeMap<usize, bool> = BTreeMap::new();
    for c in &report.cells {
        *known.entry(c.m).or_default() |= c.verdict == Verdict::Fail;
    }
    let mut st = Status {
        known,
        subject,
        vs,
        opts,
        content,
        cells: Vec::new(),
        bisected: 0,
    };
    let mut boundaries = 0;
    let mut results = Vec::new();
    for &(lo, hi) in ranges {
        let before = st.bisected;
        let samples = sample(lo, hi);
        let fails: Vec<bool> = samples
            .iter()
            .map(|m| st.known.get(m).copied().unwrap_or(false))
            .collect();
        let mut runs = Vec::new();
        let mut i = 0;
        while i < samples.len() {
            if !fails[i] {
                i += 1;
                continue;
            }
            let mut j = i;
            while j + 1 < samples.len() && fails[j + 1] {
                j += 1;
            }
            let mut run = FailRun {
                first: samples[i],
                last: samples[j],
                exact: true,
            };
            if i > 0 && samples[i] - samples[i - 1] > 1 {
                if boundaries < MAX_BOUNDARIES {
                    boundaries += 1;
                    run.first = st.bisect(samples[i - 1], samples[i])?.1;
                } else {
                    run.exact = false;
                }
            }
            if j + 1 < samples.len() && samples[j + 1] - samples[j] > 1 {
                if boundaries < MAX_BOUNDARIES {
                    boundaries += 1;
                    run.last = st.bisect(samples[j], samples[j + 1])?.0;
                } else {
                    run.exact = false;
                }
            }
            runs.push(run);
            i = j + 1;
        }
        results.push(MRangeResult {
            range: format!("{lo}..={hi}"),
            sampled: samples.len(),
            bisected: st.bisected - before,
            runs,
        });
    }
    report.cells.append(&mut st.cells);
    report.m_ranges = results;
    report.finish();
    Ok(())
}
