//! What the probes found: each answer tallied against its probe, and the
//! windows of units windowed probes count (see the module doc of `reveal`).

use super::keys::{At, Key, NO_WINDOW};
use rustc_hash::FxHashMap as HashMap;

/// Answers that differ from their probe's first answer are tallied per
/// distinct (probe, value) up to this many; beyond, they are only counted
/// (as disagreements).
pub(super) const MAX_DEVIANT: usize = 1 << 16;

/// The answers of requested probes: every answer is tallied against its
/// probe, so memory grows with the distinct probes, not with M x N.
#[derive(Default)]
pub(super) struct Tallies {
    /// The first answer of each probe asked outside a grid launch (on
    /// lines or the diagonal).
    first: HashMap<Key, First>,
    /// The first answers of grid launches' pairs, kept by cell (not
    /// hashed: a grid launch answers up to `GRID_SIDE^2` new pairs).
    grid: Vec<Cells>,
    /// Answers that differ from their probe's first answer, per value.
    pub(super) deviant: HashMap<(Key, u32), (u64, At)>,
    /// Deviant answers beyond [`MAX_DEVIANT`] (counted, not kept).
    pub(super) overflow: u64,
    /// Every answer received.
    pub(super) answers: u64,
}

/// A probe's first answer: its value, how many answers gave it, where the
/// first sat.
pub(super) type First = (u32, u64, At);

/// One grid launch's pairs (`+B` at `rows[r]`, `-B` at `cols[c]`, every
/// other term counted), each cell's first answer at `r * cols.len() + c`
/// (count 0: not answered).
struct Cells {
    rows: Vec<u32>,
    cols: Vec<u32>,
    first: Vec<First>,
    /// Cells with an answer.
    answered: usize,
}

impl Cells {
    fn key(&self, i: usize) -> Key {
        let w = self.cols.len();
        (self.rows[i / w], self.cols[i % w], NO_WINDOW)
    }

    fn find(&self, &(p, q, c): &Key) -> Option<usize> {
        if c != NO_WINDOW {
            return None;
        }
        let r = self.rows.binary_search(&p).ok()?;
        let c = self.cols.binary_search(&q).ok()?;
        Some(r * self.cols.len() + c)
    }
}

impl Tallies {
    pub(super) fn add(&mut self, key: Key, value: u32, count: u64, at: At) {
        use std::collections::hash_map::Entry;
        if let Some((g, i)) = self.find_cell(&key) {
            return self.add_cell(g, i, value, count, at);
        }
        self.answers += count;
        match self.first.entry(key) {
            Entry::Vacant(e) => {
                e.insert((value, count, at));
            }
            Entry::Occupied(mut e) => {
                let f = e.get_mut();
                if f.0 == value {
                    f.1 += count;
                } else {
                    self.deviate(key, value, count, at);
                }
            }
        }
    }

    /// Room for one grid launch's pairs `rows x cols` (both sorted, no leaf
    /// in both, no pair tallied yet); the index for [`Tallies::add_cell`].
    pub(super) fn add_grid(&mut self, rows: &[u32], cols: &[u32]) -> usize {
        debug_assert!(rows.windows(2).all(|w| w[0] < w[1]) && cols.windows(2).all(|w| w[0] < w[1]));
        self.grid.push(Cells {
            rows: rows.to_vec(),
            cols: cols.to_vec(),
            first: vec![(0, 0, (0, 0, 0)); rows.len() * cols.len()],
            answered: 0,
        });
        self.grid.len() - 1
    }

    /// An answer to the pair (`rows[r]`, `cols[c]`) of grid launch `g`
    /// (`i = r * cols.len() + c`).
    pub(super) fn add_cell(&mut self, g: usize, i: usize, value: u32, count: u64, at: At) {
        self.answers += count;
        let cells = &mut self.grid[g];
        let f = &mut cells.first[i];
        if f.1 == 0 {
            *f = (value, count, at);
            cells.answered += 1;
        } else if f.0 == value {
            f.1 += count;
        } else {
            let key = cells.key(i);
            self.deviate(key, value, count, at);
        }
    }

    fn deviate(&mut self, key: Key, value: u32, count: u64, at: At) {
        if let Some(d) = self.deviant.get_mut(&(key, value)) {
            d.0 += count;
        } else if self.deviant.len() < MAX_DEVIANT {
            self.deviant.insert((key, value), (count, at));
        } else {
            self.overflow += count;
        }
    }

    fn find_cell(&self, key: &Key) -> Option<(usize, usize)> {
        if key.2 != NO_WINDOW {
            return None;
        }
        self.grid
            .iter()
            .enumerate()
            .find_map(|(g, cells)| cells.find(key).map(|i| (g, i)))
    }

    /// A probe's first answer, if it was asked.
    pub(super) fn get(&self, key: &Key) -> Option<&First> {
        match self.find_cell(key) {
            Some((g, i)) => Some(&self.grid[g].first[i]).filter(|f| f.1 > 0),
            None => self.first.get(key),
        }
    }

    pub(super) fn value(&self, key: &Key) -> Option<u32> {
        self.get(key).map(|f| f.0)
    }

    /// The first answer of the unwindowed pair of p and q, asked in either
    /// orientation (`(p, q)` first).
    pub(super) fn pair_value(&self, p: u32, q: u32) -> Option<u32> {
        self.value(&(p, q, NO_WINDOW))
            .or_else(|| self.value(&(q, p, NO_WINDOW)))
    }

    /// Every answered probe and its first answer (probes asked on lines,
    /// then grid cells launch by launch, row by row; each probe once).
    pub(super) fn for_each_first<'t>(&'t self, mut f: impl FnMut(Key, &'t First)) {
        for (k, x) in &self.first {
            f(*k, x);
        }
        for cells in &self.grid {
            let w = cells.cols.len();
            for (&p, row) in cells.rows.iter().zip(cells.first.chunks(w)) {
                for (&q, x) in cells.cols.iter().zip(row) {
                    if x.1 > 0 {
                        f((p, q, NO_WINDOW), x);
                    }
                }
            }
        }
    }

    /// How many distinct probes were answered.
    pub(super) fn distinct(&self) -> usize {
        self.first.len() + self.grid.iter().map(|c| c.answered).sum::<usize>()
    }
}

/// Per-launch tally of one probe's answers (merged into [`Tallies`] once
/// per launch, so a launch of M x N answers costs few hash lookups): each
/// value with its count and where it was first seen, in the order first
/// seen. The first value is held inline: a line whose answers all agree
/// (every line of a subject with a static tree) allocates nothing, where a
/// block of rows tallies thousands of lines (64 x 4096 answers: 262,144
/// tallies, each a heap list, were most of the launch's reading).
#[derive(Clone, Default)]
pub(super) struct Local {
    first: Option<(u32, u64, At)>,
    rest: Vec<(u32, u64, At)>,
}

impl Local {
    pub(super) fn add(&mut self, value: u32, at: At) {
        self.add_count(value, 1, at);
    }

    /// `count` answers `value`, the first of them at `at` (kept when the
    /// value was seen before).
    fn add_count(&mut self, value: u32, count: u64, at: At) {
        match &mut self.first {
            None => {
                self.first = Some((value, count, at));
                return;
            }
            Some(f) if f.0 == value => {
                f.1 += count;
                return;
            }
            Some(_) => {}
        }
        match self.rest.iter_mut().find(|x| x.0 == value) {
            Some(x) => x.1 += count,
            None => self.rest.push((value, count, at)),
        }
    }

    /// Each value, its count and where it was first seen, in the order
    /// first seen.
    fn entries(&self) -> impl Iterator<Item = (u32, u64, At)> + '_ {
        self.first.iter().chain(&self.rest).copied()
    }

    /// Adds the tallies of answers that came after this one's.
    pub(super) fn absorb(&mut self, later: Local) {
        for (v, c, a) in later.entries() {
            self.add_count(v, c, a);
        }
    }

    pub(super) fn merge(&self, key: Key, t: &mut Tallies) {
        for (v, c, a) in self.entries() {
            t.add(key, v, c, a);
        }
    }
}

/// The units windowed probes count: each window an explicit set of
/// leaves (the probe's p and q left out where it holds them), and whether
/// its count is read exactly (at most the calibrated window of units) or
/// only as "every unit lost" (a zero test: any positive sum of units stays
/// positive through any rounding, so it may hold any number of units). The
/// sets come from the ranking of a recursion level's leaves (`rank.rs`).
#[derive(Default)]
pub(super) struct Windows {
    /// Each window: its sorted leaves, and whether its count is exact.
    list: Vec<(Vec<u32>, bool)>,
}

impl Windows {
    /// A new window over `leaves` (sorted); its index is a probe key's
    /// window.
    pub(super) fn add(&mut self, leaves: Vec<u32>, exact: bool) -> u32 {
        debug_assert!(leaves.windows(2).all(|w| w[0] < w[1]));
        self.list.push((leaves, exact));
        (self.list.len() - 1) as u32
    }

    /// The leaves of window `c` (sorted).
    pub(super) fn leaves(&self, c: u32) -> &[u32] {
        &self.list[c as usize].0
    }

    /// Whether the answers of window `c` are exact counts ([`NO_WINDOW`]:
    /// every term, exact).
    pub(super) fn exact(&self, c: u32) -> bool {
        c == NO_WINDOW || self.list[c as usize].1
    }

    /// The terms of window `c` of the probe (p, q): its leaves but p and q.
    pub(super) fn window(&self, p: u32, q: u32, c: u32) -> impl Iterator<Item = u32> + '_ {
        self.list[c as usize]
            .0
            .iter()
            .copied()
            .filter(move |&x| x != p && x != q)
    }

    /// How many units a probe counts: every term but p and q, or its
    /// window's.
    pub(super) fn active(&self, &(p, q, c): &Key, kl: usize) -> u32 {
        if c == NO_WINDOW {
            return kl as u32 - 2;
        }
        let l = &self.list[c as usize].0;
        let has = |x: u32| l.binary_search(&x).is_ok() as u32;
        l.len() as u32 - has(p) - has(q)
    }

    /// The tallied value of a probe that counted `got` units of `active`:
    /// `2 + lost` for an exact window; for a zero test `2 + active` when
    /// every unit was lost and 0 otherwise. None: not a count of this probe.
    pub(super) fn value(&self, c: u32, active: u32, got: u32) -> Option<u32> {
        if self.exact(c) {
            (got <= active).then(|| active - got + 2)
        } else {
            Some(if got == 0 { active + 2 } else { 0 })
        }
    }

    /// The value a probe's answer must have when `lost` of its `active`
    /// units sit under the ancestor of p and q ([`Windows::value`]).
    pub(super) fn expected(&self, c: u32, active: u32, lost: u32) -> u32 {
        if self.exact(c) || lost == active {
            2 + lost
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line's answers tallied in two blocks of rows, the later absorbed
    /// into the earlier, then merged: the first value seen is the probe's
    /// answer with every agreeing answer counted, each other value a
    /// deviant with its count and the place it was first seen.
    #[test]
    fn a_lines_answers_are_all_counted_in_order() {
        let key: Key = (0, 3, NO_WINDOW);
        let at = |i: u32| (0, i, 7);
        let mut early = Local::default();
        for (i, v) in [5, 5, 7, 5].into_iter().enumerate() {
            early.add(v, at(i as u32));
        }
        let mut late = Local::default();
        for (i, v) in [9, 7, 5, 9, 9].into_iter().enumerate() {
            late.add(v, at(10 + i as u32));
        }
        early.absorb(late);
        let want = vec![(5, 4, at(0)), (7, 2, at(2)), (9, 3, at(10))];
        assert_eq!(early.entries().collect::<Vec<_>>(), want);
        let mut t = Tallies::default();
        early.merge(key, &mut t);
        assert_eq!(t.answers, 9);
        assert_eq!(t.get(&key), Some(&(5, 4, at(0))));
        assert_eq!(t.deviant.get(&(key, 7)), Some(&(2, at(2))));
        assert_eq!(t.deviant.get(&(key, 9)), Some(&(3, at(10))));
        assert_eq!(t.deviant.len(), 2);
        // a line whose answers all agree: one entry, nothing else held
        let mut same = Local::default();
        for i in 0..100 {
            same.add(4, at(i));
        }
        assert_eq!(same.entries().collect::<Vec<_>>(), vec![(4, 100, at(0))]);
        assert!(same.rest.capacity() == 0);
    }
}
