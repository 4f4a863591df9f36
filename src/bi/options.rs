//! What a check is asked ([`CheckOptions`]) and its bounds, and the M
//! values where a subject's behaviour is likely to change ([`edge_ms`]).

use super::family::{Family, RowPos};
use super::limits::Limits;
use crate::order::InType;

/// What to check.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    pub families: Vec<Family>,
    /// Batch sizes; the `batch` family's baseline is the first.
    pub ms: Vec<usize>,
    pub k: usize,
    pub n: usize,
    /// Target-row positions for `content`, `batch` and `position`.
    pub positions: Vec<RowPos>,
    pub seed: u64,
    /// The element type inputs are drawn in (what the order's steps read).
    pub input: InType,
    /// Runs of the `repeat` family (at least 2).
    pub repeats: usize,
    /// Re-runs of each side of a cell that would fail, before it is
    /// `BI_FAIL` (0: none; see [`super::confirm`]).
    pub confirm: usize,
}

impl CheckOptions {
    /// Checks every bound; the message names the offending option.
    pub fn validate(&self, has_vs: bool) -> Result<(), String> {
        if self.families.is_empty() {
            return Err("no family given".into());
        }
        if self.ms.is_empty() {
            return Err("no M given".into());
        }
        for &m in &self.ms {
            if m == 0 || m > Limits::MAX_M {
                return Err(format!("M = {m} is out of range (1..={})", Limits::MAX_M));
            }
        }
        if self.k == 0 {
            return Err(format!(
                "K = 0 is out of range (1..={}, mxbi's K limit)",
                crate::limits::MAX_K
            ));
        }
        crate::limits::check_k("K", self.k)?;
        if self.n == 0 || self.n > Limits::MAX_N {
            return Err(format!("N = {} is out of range (1..={})", self.n, Limits::MAX_N));
        }
        let m_max = *self.ms.iter().max().unwrap_or(&1);
        for (what, x, y) in [("M*K", m_max, self.k), ("K*N", self.k, self.n), ("M*N", m_max, self.n)] {
            if x.checked_mul(y).is_none_or(|p| p > Limits::MAX_ELEMENTS) {
                return Err(format!("{what} = {x}*{y} exceeds {} elements", Limits::MAX_ELEMENTS));
            }
        }
        if self.repeats < 2 || self.repeats > Limits::MAX_REPEATS {
            return Err(format!(
                "repeats = {} is out of range (2..={})",
                self.repeats,
                Limits::MAX_REPEATS
            ));
        }
        if self.confirm > super::confirm::MAX_CONFIRM {
            return Err(format!(
                "confirm = {} is out of range (0..={})",
                self.confirm,
                super::confirm::MAX_CONFIRM
            ));
        }
        if self.families.contains(&Family::Switch) && !has_vs {
            return Err("the switch family needs a second subject (--vs)".into());
        }
        if self.positions.contains(&RowPos::All) {
            if let Some(f) = self.families.iter().find(|f| **f != Family::Position) {
                return Err(format!(
                    "row position 'all' applies to the position family only, not to {}",
                    f.name()
                ));
            }
        }
        let cells = self.families.len() * self.ms.len() * self.positions.len().max(RowPos::POSITIONS.len());
        if cells > Limits::MAX_CELLS {
            return Err(format!("{cells} cells exceed {}", Limits::MAX_CELLS));
        }
        Ok(())
    }
}

/// The M values where a subject's behaviour is likely to change: for each
/// boundary b (the last M of a dispatch entry, a tile height) b-1, b, b+1,
/// plus the usual 1, 2, 8/9, 16/17, 32/33, 64/65, 128/129, 256/257, 512/513.
pub fn edge_ms(boundaries: &[usize]) -> Vec<usize> {
    let mut v = vec![1, 2, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256, 257, 512, 513];
    for &b in boundaries {
        v.extend([b.saturating_sub(1), b, b + 1]);
    }
    v.retain(|m| (1..=Limits::MAX_M).contains(m));
    v.sort_unstable();
    v.dedup();
    v
}
