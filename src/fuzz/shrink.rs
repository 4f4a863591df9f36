//! Shrinking a failing case: first proptest's own value-tree walk
//! (simplify while the case still fails, complicate when it stops
//! failing), which moves every dimension toward its first candidate; then
//! exact binary searches over the integers for the smallest failing M,
//! baseline M, K and N, and the fewest non-zero entries per row, the
//! narrowest exponent range and the fewest significand bits. A candidate
//! replaces the best case only when it fails, so the result always fails.

use super::case::FuzzCase;
use super::strategy::Draw;
use super::FuzzError;
use crate::bi::{Cell, Family, RowPos};
use proptest::strategy::ValueTree;
use std::collections::HashMap;

/// The failing case so far and its failing cell.
pub(super) type Best = (FuzzCase, Cell);

/// Runs candidates (memoised), counting runs against a limit.
pub(super) struct Shrinker<'a> {
    test: &'a mut dyn FnMut(&FuzzCase) -> Result<Option<Cell>, FuzzError>,
    seen: HashMap<FuzzCase, Option<Cell>>,
    pub runs: u64,
    max_runs: u64,
}

impl<'a> Shrinker<'a> {
    /// `test` runs a case: Some(cell) when it fails.
    pub fn new(test: &'a mut dyn FnMut(&FuzzCase) -> Result<Option<Cell>, FuzzError>, max_runs: u64) -> Self {
        Shrinker {
            test,
            seen: HashMap::new(),
            runs: 0,
            max_runs,
        }
    }

    /// Whether `fc` fails (a case past the run limit counts as passing, so
    /// shrinking stops there).
    fn fails(&mut self, fc: &FuzzCase) -> Result<Option<Cell>, FuzzError> {
        if let Some(r) = self.seen.get(fc) {
            return Ok(r.clone());
        }
        if self.runs >= self.max_runs {
            return Ok(None);
        }
        self.runs += 1;
        let r = (self.test)(fc)?;
        self.seen.insert(fc.clone(), r.clone());
        Ok(r)
    }

    /// proptest's walk over `tree` (whose current value failed as `best`).
    pub fn walk<T: ValueTree<Value = Draw>>(
        &mut self,
        tree: &mut T,
        make: &dyn Fn(Draw) -> FuzzCase,
        mut best: Best,
    ) -> Result<Best, FuzzError> {
        if !tree.simplify() {
            return Ok(best);
        }
        loop {
            if self.runs >= self.max_runs {
                break;
            }
            let cand = make(tree.current());
            match self.fails(&cand)? {
                Some(cell) => {
                    best = (cand, cell);
                    if !tree.simplify() {
                        break;
                    }
                }
                None => {
                    if !tree.complicate() {
                        break;
                    }
                }
            }
        }
        Ok(best)
    }

    /// The smallest value in `lo..=cur` (multiples of `step` when `step`
    /// is above one) for which the case still fails, by binary search from
    /// `cur` (which fails), assuming the value below `lo` passes.
    fn search(
        &mut self,
        best: Best,
        lo: usize,
        step: usize,
        get: fn(&FuzzCase) -> usize,
        set: &dyn Fn(&mut FuzzCase, usize),
    ) -> Result<Best, FuzzError> {
        let step = step.max(1);
        let mut best = best;
        let cur = get(&best.0);
        // indices: value = lo + (j - 1) * step for j >= 1; j = 0 passes
        let lo = lo.div_ceil(step) * step;
        if cur <= lo {
            return Ok(best);
        }
        let (mut pass, mut fail) = (0usize, (cur - lo) / step + 1);
        while fail - pass > 1 {
            let mid = pass + (fail - pass) / 2;
            let mut cand = best.0.clone();
            set(&mut cand, lo + (mid - 1) * step);
            match self.fails(&cand)? {
                Some(cell) => {
                    fail = mid;
                    best = (cand, cell);
                }
                None => pass = mid,
            }
        }
        Ok(best)
    }

    /// The exact searches after proptest's walk (see the module doc).
    pub fn refine(&mut self, best: Best, m_step: usize, k_step: usize) -> Result<Best, FuzzError> {
        // the batch family's M stays above its baseline
        let m_lo = if best.0.family == Family::Batch {
            best.0.base_m + 1
        } else {
            1
        };
        let mut best = self.search(best, m_lo, m_step, |c| c.m, &|c, v| c.m = v)?;
        if best.0.family == Family::Batch {
            best = self.search(best, 1, m_step, |c| c.base_m, &|c, v| c.base_m = v)?;
        }
        best = self.search(best, 1, k_step, |c| c.k, &|c, v| c.k = v)?;
        best = self.search(best, 1, 1, |c| c.n, &|c, v| c.n = v)?;
        // the first row, when it fails too (e.g. `mid` of a batch of 1 is row 0)
        if best.0.row != RowPos::Index(0) {
            let mut cand = best.0.clone();
            cand.row = RowPos::Index(0);
            if let Some(cell) = self.fails(&cand)? {
                best = (cand, cell);
            }
        }
        // fewest non-zero entries per row of A
        if best.0.content.nonzero.is_none() {
            let mut cand = best.0.clone();
            cand.content.nonzero = Some(cand.k);
            if let Some(cell) = self.fails(&cand)? {
                best = (cand, cell);
            }
        }
        if best.0.content.nonzero.is_some() {
            best = self.search(best, 1, 1, |c| c.content.nonzero.unwrap_or(c.k), &|c, v| {
                c.content.nonzero = Some(v)
            })?;
        }
        // simplest values: the narrowest exponents, the fewest significand bits
        for (get, set) in [
            (
                (|c: &FuzzCase| c.content.exp_span.unwrap_or(60) as usize) as fn(&FuzzCase) -> usize,
                (|c: &mut FuzzCase, v: usize| c.content.exp_span = Some(v as u32)) as fn(&mut FuzzCase, usize),
            ),
            (
                |c: &FuzzCase| c.content.mant_bits.unwrap_or(23) as usize,
                |c: &mut FuzzCase, v: usize| c.content.mant_bits = Some(v as u32),
            ),
        ] {
            let mut cand = best.0.clone();
            let cur = get(&cand);
            set(&mut cand, cur);
            if cand != best.0 {
                match self.fails(&cand)? {
                    Some(cell) => best = (cand, cell),
                    None => continue,
                }
            }
            best = self.search(best, 0, 1, get, &set)?;
        }
        Ok(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bi::{Content, RowDiff, RowPos, Verdict};
    use crate::order::InType;
    use crate::subject::Knobs;

    fn case(m: usize, k: usize) -> FuzzCase {
        FuzzCase {
            family: Family::Content,
            m,
            base_m: m,
            k,
            n: 4,
            row: RowPos::Index(0),
            content: Content::default(),
            knobs: Knobs::default(),
            seed: 1,
            input: InType::F32,
        }
    }

    fn cell() -> Cell {
        Cell {
            id: "x".into(),
            family: Family::Content,
            subject: "s".into(),
            m: 1,
            k: 1,
            n: 1,
            row: "0".into(),
            rank: None,
            knobs: Knobs::default(),
            inputs: None,
            path: None,
            verdict: Verdict::Fail,
            diff: RowDiff::default(),
            reason: None,
            power: None,
            nondet_rate: None,
        }
    }

    #[test]
    fn searches_find_the_exact_threshold_and_keep_a_failing_case() {
        // fails when M > 16 and K > 64, N >= 3, at least 2 non-zero, span >= 1
        let mut test = |c: &FuzzCase| -> Result<Option<Cell>, FuzzError> {
            let nz = c.content.nonzero.unwrap_or(c.k);
            let span = c.content.exp_span.unwrap_or(60);
            Ok((c.m > 16 && c.k > 64 && c.n >= 3 && nz >= 2 && span >= 1).then(cell))
        };
        let mut s = Shrinker::new(&mut test, 1000);
        let mut start = case(400, 3000);
        start.n = 40;
        let (best, _) = s.refine((start, cell()), 1, 1).unwrap();
        assert_eq!((best.m, best.k, best.n), (17, 65, 3));
        assert_eq!(best.content.nonzero, Some(2));
        assert_eq!(best.content.exp_span, Some(1));
        assert_eq!(best.content.mant_bits, Some(0));
        assert!(s.runs < 120, "{}", s.runs);
        // multiples: M in steps of 4 from 1 (1, 5, 9, ...) and K in steps of 32
        let mut s = Shrinker::new(&mut test, 1000);
        let (best, _) = s.refine((case(400, 3000), cell()), 4, 32).unwrap();
        assert_eq!((best.m % 4, best.k % 32), (0, 0));
        assert_eq!((best.m, best.k), (20, 96));
    }
}
