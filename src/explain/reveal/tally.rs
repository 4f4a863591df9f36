//! What the probes found: each answer tallied against its probe, and the
//! scopes windowed probes count units in (see the module doc of `reveal`).

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
    /// Each probe's first answer: (value, how many answers gave it, where the first sat).
    pub(super) first: HashMap<Key, (u32, u64, At)>,
    /// Answers that differ from their probe's first answer, per value.
    pub(super) deviant: HashMap<(Key, u32), (u64, At)>,
    /// Deviant answers beyond [`MAX_DEVIANT`] (counted, not kept).
    pub(super) overflow: u64,
    /// Every answer received.
    pub(super) answers: u64,
}

impl Tallies {
    pub(super) fn add(&mut self, key: Key, value: u32, count: u64, at: At) {
        use std::collections::hash_map::Entry;
        self.answers += count;
        match self.first.entry(key) {
            Entry::Vacant(e) => {
                e.insert((value, count, at));
            }
            Entry::Occupied(mut e) => {
                let f = e.get_mut();
                if f.0 == value {
                    f.1 += count;
                } else if let Some(d) = self.deviant.get_mut(&(key, value)) {
                    d.0 += count;
                } else if self.deviant.len() < MAX_DEVIANT {
                    self.deviant.insert((key, value), (count, at));
                } else {
                    self.overflow += count;
                }
            }
        }
    }

    pub(super) fn value(&self, key: &Key) -> Option<u32> {
        self.first.get(key).map(|f| f.0)
    }
}

/// Per-launch tally of one probe's answers (merged into [`Tallies`] once
/// per launch, so a launch of M x N answers costs few hash lookups).
#[derive(Clone, Default)]
pub(super) struct Local(pub(super) Vec<(u32, u64, At)>);

impl Local {
    pub(super) fn add(&mut self, value: u32, at: At) {
        match self.0.iter_mut().find(|x| x.0 == value) {
            Some(x) => x.1 += 1,
            None => self.0.push((value, 1, at)),
        }
    }

    /// Adds the tallies of answers that came after this one's.
    pub(super) fn absorb(&mut self, later: Local) {
        for (v, c, a) in later.0 {
            match self.0.iter_mut().find(|x| x.0 == v) {
                Some(x) => x.1 += c,
                None => self.0.push((v, c, a)),
            }
        }
    }

    pub(super) fn merge(&self, key: Key, t: &mut Tallies) {
        for &(v, c, a) in &self.0 {
            t.add(key, v, c, a);
        }
    }
}

/// Where windowed probes count units: the leaves the probe's ancestor can
/// hold. The first round probes every leaf. A set found to join its
/// parent's first leaf `f` at an ancestor of `L` terms is then probed
/// within itself plus `f` only: the ancestor of two of its leaves either
/// lies inside one child of that ancestor (whose leaves are all in the
/// set) or is the ancestor itself, and then `f`'s unit is lost with every
/// other: a probe that loses every unit of its scope has `L(p, q) = L`.
/// So a deep set needs one window, not one per `w` terms of K.
pub(super) struct Scopes {
    /// Each scope: its sorted leaves and, but for the first (every leaf),
    /// the size of the ancestor it hangs from.
    pub(super) list: Vec<(Vec<u32>, Option<u32>)>,
    /// The scope of the probes whose `p` is this leaf (a leaf is the first
    /// of at most one set).
    pub(super) of: Vec<u32>,
}

impl Scopes {
    pub(super) fn new(kl: usize) -> Scopes {
        Scopes {
            list: vec![((0..kl as u32).collect(), None)],
            of: vec![0; kl],
        }
    }

    /// The probes from `p` (the first leaf of a set) count units only
    /// among `leaves` (sorted, holding the set); `ceiling` is the size of
    /// the ancestor the set hangs from.
    pub(super) fn add(&mut self, p: u32, leaves: Vec<u32>, ceiling: u32) {
        self.list.push((leaves, Some(ceiling)));
        self.of[p as usize] = (self.list.len() - 1) as u32;
    }

    pub(super) fn leaves(&self, p: u32) -> &[u32] {
        &self.list[self.of[p as usize] as usize].0
    }

    pub(super) fn ceiling(&self, p: u32) -> Option<u32> {
        self.list[self.of[p as usize] as usize].1
    }

    /// Windows of `w` units over the scope's terms other than p and q.
    pub(super) fn n_windows(&self, p: u32, w: usize) -> usize {
        self.leaves(p).len().saturating_sub(2).div_ceil(w.max(1)).max(1)
    }

    /// The index range of window `c` among the scope's `len - 2` terms.
    pub(super) fn range(&self, p: u32, w: usize, c: u32) -> (usize, usize) {
        let rest = self.leaves(p).len().saturating_sub(2);
        ((c as usize * w).min(rest), ((c as usize + 1) * w).min(rest))
    }

    /// The terms of window `c` of the probe (p, q): chunk c (of `w`) of
    /// the scope's leaves without p and q (both are in the scope).
    pub(super) fn window(&self, p: u32, q: u32, w: usize, c: u32) -> impl Iterator<Item = u32> + '_ {
        let leaves = self.leaves(p);
        let at = |x: u32| leaves.binary_search(&x).unwrap_or(leaves.len());
        let (a, b) = (at(p).min(at(q)), at(p).max(at(q)));
        let (lo, hi) = self.range(p, w, c);
        (lo..hi).map(move |i| {
            leaves[if i < a {
                i
            } else if i + 1 < b {
                i + 1
            } else {
                i + 2
            }]
        })
    }

    /// How many units a probe counts: every term but p and q, or its
    /// window's.
    pub(super) fn active(&self, &(p, _, c): &Key, kl: usize, w: usize) -> u32 {
        if c == NO_WINDOW {
            kl as u32 - 2
        } else {
            self.window_len(p, w, c)
        }
    }

    /// How many terms window `c` of a probe from `p` holds.
    pub(super) fn window_len(&self, p: u32, w: usize, c: u32) -> u32 {
        let (lo, hi) = self.range(p, w, c);
        (hi - lo) as u32
    }
}
