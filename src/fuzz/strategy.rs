//! The strategy: what a case is drawn from. M and K are drawn half the
//! time from the edge lists (where a subject's behaviour is likely to
//! change) and half the time log-uniformly over the whole range
//! ([`log_uniform`]); every other dimension is a proptest `select` over a
//! sorted candidate list, and `others` is `drawn` half the time. Shrinking
//! moves every dimension toward its simplest value (the first list entry,
//! the smallest M and K, `drawn`).

use super::{FuzzConfig, FuzzError};
use crate::bi::{edge_ms, ContentClass, Family, Limits, Others, RowPos};
use crate::subject::{Knobs, Subject};
use proptest::prelude::{prop_oneof, Just};
use proptest::sample::select;
use proptest::strategy::{BoxedStrategy, Strategy};

/// The usual K edges: powers of two and their neighbours.
const K_EDGES: [usize; 34] = [
    1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023,
    1024, 1025, 2047, 2048, 2049, 4095, 4096,
];

/// The N values drawn.
const N_EDGES: [usize; 10] = [1, 2, 3, 4, 8, 16, 17, 32, 33, 64];

/// One drawn setting: (family, baseline M, M, K, N, row, content class,
/// others, knobs), in the order proptest shrinks them.
pub(super) type Draw = (Family, usize, usize, usize, usize, RowPos, ContentClass, Others, Knobs);

/// Fraction bits of a [`log_uniform`] draw within its octave.
const FRAC_BITS: u32 = 16;

/// Integers in `1..=max` that are multiples of `step` (`step <= max`),
/// log-uniform: `u` is drawn uniformly from `0..U` and read as an octave
/// `e = u >> 16` and a fraction `f = u & 0xFFFF`, the value being
/// `2^e + (2^e * f >> 16)` (linear within the octave); `U` is the first
/// `u` whose value would exceed `max`, so every octave below `max` is
/// equally likely and the last one is cut at `max` with its share cut
/// too. The value is then rounded up to a multiple of `step` and capped at
/// the largest multiple of `step` up to `max`. Integer arithmetic only (the
/// same draws on every machine); shrinks toward `step`.
pub(super) fn log_uniform(max: usize, step: usize) -> BoxedStrategy<usize> {
    let step = step.max(1);
    let top = max / step * step;
    let max = max.max(1) as u64;
    let e_max = u64::from(u64::BITS - 1 - max.leading_zeros());
    let low = 1u64 << e_max;
    // fractions of the last octave whose value stays <= max
    let last = (((max - low + 1) << FRAC_BITS).div_ceil(low)).min(1 << FRAC_BITS);
    (0u64..(e_max << FRAC_BITS) + last)
        .prop_map(move |u| {
            let low = 1u64 << (u >> FRAC_BITS);
            let v = low + ((low * (u & ((1 << FRAC_BITS) - 1))) >> FRAC_BITS);
            (v as usize).div_ceil(step).saturating_mul(step).clamp(step, top)
        })
        .boxed()
}

/// Edges half the time, [`log_uniform`] the other half.
fn edges_or_range(edges: &[usize], max: usize, step: usize) -> BoxedStrategy<usize> {
    prop_oneof![select(edges.to_vec()), log_uniform(max, step)].boxed()
}

/// The candidate lists of one run.
#[derive(Clone, Debug)]
pub(super) struct Space {
    pub families: Vec<Family>,
    pub ms: Vec<usize>,
    pub ks: Vec<usize>,
    pub ns: Vec<usize>,
    pub rows: Vec<RowPos>,
    pub classes: Vec<ContentClass>,
    /// The `others` settings other than `drawn` (drawn half the time).
    pub others: Vec<Others>,
    pub knobs: Vec<Knobs>,
    /// Largest M and K drawn.
    pub max_m: usize,
    pub max_k: usize,
    /// M must be a multiple of this (the subject's world size).
    pub m_step: usize,
    /// K must be a multiple of this.
    pub k_step: usize,
}

impl Space {
    /// The lists for `cfg` on `subject` (its M boundaries and world size).
    pub fn new(cfg: &FuzzConfig, subject: &dyn Subject) -> Result<Space, FuzzError> {
        let bad = |s: String| Err(FuzzError::BadInput(s));
        if cfg.max_m == 0 || cfg.max_m > Limits::MAX_M {
            return bad(format!("--max-m {} is out of range (1..={})", cfg.max_m, Limits::MAX_M));
        }
        if cfg.max_k == 0 {
            return bad(format!(
                "--max-k 0 is out of range (1..={}, mxbi's K limit)",
                crate::limits::MAX_K
            ));
        }
        if let Err(e) = crate::limits::check_k("--max-k", cfg.max_k) {
            return bad(e);
        }
        if cfg.max_n == 0 || cfg.max_n > Limits::MAX_N {
            return bad(format!("--max-n {} is out of range (1..={})", cfg.max_n, Limits::MAX_N));
        }
        for (what, x, y) in [
            ("M*K", cfg.max_m, cfg.max_k),
            ("K*N", cfg.max_k, cfg.max_n),
            ("M*N", cfg.max_m, cfg.max_n),
        ] {
            if x.checked_mul(y).is_none_or(|p| p > Limits::MAX_ELEMENTS) {
                return bad(format!(
                    "largest {what} = {x}*{y} exceeds {} elements",
                    Limits::MAX_ELEMENTS
                ));
            }
        }
        if cfg.k_multiple == 0 || cfg.k_multiple > cfg.max_k {
            return bad(format!(
                "K multiple {} is out of range (1..={})",
                cfg.k_multiple, cfg.max_k
            ));
        }
        let ws = subject.world_size().max(1);
        let families = families(cfg, ws)?;
        let mut ms: Vec<usize> = edge_ms(&subject.m_boundaries());
        ms.push(cfg.max_m);
        ms.retain(|&m| m <= cfg.max_m && m.is_multiple_of(ws));
        ms.sort_unstable();
        ms.dedup();
        if ms.is_empty() {
            return bad(format!(
                "no batch size up to {} is a multiple of the world size {ws}",
                cfg.max_m
            ));
        }
        let step = cfg.k_multiple;
        let mut ks: Vec<usize> = K_EDGES.to_vec();
        for &b in &cfg.k_boundaries {
            ks.extend([b.saturating_sub(1), b, b + 1]);
        }
        let mut ks: Vec<usize> = ks
            .into_iter()
            .filter(|&k| k >= 1)
            .map(|k| k.div_ceil(step) * step)
            .filter(|&k| k <= cfg.max_k)
            .collect();
        ks.push(cfg.max_k / step * step);
        ks.sort_unstable();
        ks.dedup();
        let mut ns: Vec<usize> = N_EDGES.iter().copied().filter(|&n| n <= cfg.max_n).collect();
        ns.push(cfg.max_n);
        ns.sort_unstable();
        ns.dedup();
        let mut classes = if cfg.classes.is_empty() {
            ContentClass::ALL.to_vec()
        } else {
            cfg.classes.clone()
        };
        classes.sort_unstable();
        classes.dedup();
        let mut others: Vec<Others> = if cfg.others.is_empty() {
            Others::ALL.to_vec()
        } else {
            cfg.others.clone()
        };
        others.retain(|o| !o.is_drawn());
        others.sort_unstable();
        others.dedup();
        let knobs = if cfg.knobs.is_empty() {
            vec![Knobs::default()]
        } else {
            cfg.knobs.clone()
        };
        Ok(Space {
            families,
            ms,
            ks,
            ns,
            rows: vec![RowPos::Index(0), RowPos::Index(1), RowPos::Mid, RowPos::Last],
            classes,
            others,
            knobs,
            max_m: cfg.max_m,
            max_k: cfg.max_k,
            m_step: ws,
            k_step: step,
        })
    }

    /// The proptest strategy over these lists and ranges.
    pub fn strategy(&self) -> impl Strategy<Value = Draw> {
        let others = if self.others.is_empty() {
            Just(Others::Drawn).boxed()
        } else {
            prop_oneof![Just(Others::Drawn), select(self.others.clone())].boxed()
        };
        (
            select(self.families.clone()),
            edges_or_range(&self.ms, self.max_m, self.m_step),
            edges_or_range(&self.ms, self.max_m, self.m_step),
            edges_or_range(&self.ks, self.max_k, self.k_step),
            select(self.ns.clone()),
            select(self.rows.clone()),
            select(self.classes.clone()),
            others,
            select(self.knobs.clone()),
        )
    }
}

/// The families of a run, simplest first (`Family`'s order).
fn families(cfg: &FuzzConfig, ws: usize) -> Result<Vec<Family>, FuzzError> {
    let mut v: Vec<Family> = if cfg.families.is_empty() {
        let mut d = vec![Family::Content, Family::Batch, Family::Position, Family::Permutation];
        if ws >= 2 {
            d.push(Family::Rank);
        }
        d
    } else {
        cfg.families
            .iter()
            .map(|s| {
                s.trim()
                    .parse::<Family>()
                    .map_err(|e| FuzzError::BadInput(format!("--families: {e}")))
            })
            .collect::<Result<_, _>>()?
    };
    v.sort_unstable();
    v.dedup();
    if v.contains(&Family::Switch) {
        return Err(FuzzError::BadInput(
            "--families: switch needs a second subject; mxbi fuzz checks one subject".into(),
        ));
    }
    if v.contains(&Family::Rank) && ws < 2 {
        return Err(FuzzError::BadInput(format!(
            "--families: rank needs a subject with world size 2 or more; this one has {ws}"
        )));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    fn draws(max: usize, step: usize, n: usize) -> Vec<usize> {
        let s = log_uniform(max, step);
        let mut runner = TestRunner::deterministic();
        (0..n).map(|_| s.new_tree(&mut runner).unwrap().current()).collect()
    }

    #[test]
    fn log_uniform_covers_the_range_by_octave() {
        let v = draws(513, 1, 4000);
        assert!(v.iter().all(|&m| (1..=513).contains(&m)));
        // nine whole octaves, equally likely (the tenth is 512..=513 only):
        // 40..=60 is 21/32 of one of them
        let window = v.iter().filter(|&&m| (40..=60).contains(&m)).count();
        assert!((150..=380).contains(&window), "{window}");
        // the last octave is cut at the maximum, its share too
        let at_max = v.iter().filter(|&&m| m == 513).count();
        assert!(at_max < 40, "{at_max}");
        assert!(v.iter().filter(|&&m| m >= 256).count() > 250);
        // multiples of the step, from the step up to the largest multiple
        let v = draws(100, 32, 500);
        assert!(v.iter().all(|&k| k % 32 == 0 && (32..=96).contains(&k)), "{v:?}");
        assert!(v.contains(&32) && v.contains(&96));
    }

    #[test]
    fn log_uniform_shrinks_to_the_step() {
        let s = log_uniform(4096, 4);
        let mut runner = TestRunner::deterministic();
        let mut t = s.new_tree(&mut runner).unwrap();
        while t.simplify() {}
        assert_eq!(t.current(), 4);
    }
}
