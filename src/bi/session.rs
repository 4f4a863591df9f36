//! The inputs a check's cells share: batches of row ids, the session that
//! builds each batch and each power measurement once, and running a
//! subject on one batch.

use super::content::Content;
use super::inputs::{Draw, Rows};
use super::options::CheckOptions;
use super::power::{self, Power};
use super::row_ids::other_id;
use crate::format::Format;
use crate::gemm::{BLayout, Matrix, Problem};
use crate::order::InType;
use crate::subject::{Subject, SubjectError};
use std::collections::HashMap;
use std::sync::Arc;

/// One batch: its row ids, in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Batch {
    pub(super) ids: Vec<u64>,
}

impl Batch {
    /// M rows: the target (id 0) at `at`, the others from `set` in order.
    pub(super) fn with_target(m: usize, at: usize, set: u64) -> Batch {
        Batch {
            ids: super::row_ids::target_batch(m, at, set),
        }
    }

    /// M rows `0..M` of set A (all rows compared).
    pub(super) fn plain(m: usize) -> Batch {
        Batch {
            ids: (0..m).map(|j| other_id(0, j)).collect(),
        }
    }
}

/// Most f32 elements the input caches of one session hold.
const CACHE_ELEMENTS: usize = 1 << 24;

/// The inputs of every cell that shares (seed, K, N, input type, draw): B,
/// the rows by id, the batches and the vacuity verdicts, each built once.
pub(super) struct Session {
    pub(super) rows: Rows,
    row_cache: HashMap<u64, Arc<Vec<f32>>>,
    batches: HashMap<Batch, Arc<Vec<f32>>>,
    cached: usize,
    /// Power by the ids of the compared rows and the output formats their
    /// bytes allow (every order of the family is row-only: rows are
    /// independent under it).
    power: HashMap<(Vec<u64>, Vec<Option<Format>>), Power>,
}

impl Session {
    pub(super) fn new(opts: &CheckOptions, draw: Draw, content: Content) -> Session {
        Session {
            rows: Rows::build(opts.seed, opts.k, opts.n, opts.input, draw, content),
            row_cache: HashMap::new(),
            batches: HashMap::new(),
            cached: 0,
            power: HashMap::new(),
        }
    }

    /// Whether this session serves `opts` drawn `draw` with `content` (same
    /// seed, K, N, input type, draw and content).
    pub(super) fn serves(&self, opts: &CheckOptions, draw: Draw, content: Content) -> bool {
        let r = &self.rows;
        (r.seed, r.k, r.n, r.ty, r.draw, r.content) == (opts.seed, opts.k, opts.n, opts.input, draw, content)
    }

    pub(super) fn batch(&mut self, b: &Batch) -> Arc<Vec<f32>> {
        if let Some(a) = self.batches.get(b) {
            return a.clone();
        }
        let k = self.rows.k;
        if self.cached + (b.ids.len() + 1) * k > CACHE_ELEMENTS {
            self.batches.clear();
            self.row_cache.clear();
            self.cached = 0;
        }
        let mut a = Vec::with_capacity(b.ids.len() * k);
        for &id in &b.ids {
            let row = match self.row_cache.get(&id) {
                Some(r) => r.clone(),
                None => {
                    let r = Arc::new(self.rows.row(id));
                    self.cached += k;
                    self.row_cache.insert(id, r.clone());
                    r
                }
            };
            a.extend_from_slice(&row);
        }
        let a = Arc::new(a);
        self.cached += a.len();
        self.batches.insert(b.clone(), a.clone());
        a
    }

    /// The power of rows `sel` of batch `b` (at most [`power::MAX_ROWS`]
    /// of them) in the weakest of `formats`.
    pub(super) fn power(&mut self, b: &Batch, sel: &[usize], formats: Vec<Option<Format>>) -> Power {
        let ids: Vec<u64> = sel.iter().take(power::MAX_ROWS).map(|&i| b.ids[i]).collect();
        let key = (ids, formats);
        if let Some(p) = self.power.get(&key) {
            return p.clone();
        }
        let r = &self.rows;
        // sessions are rebuilt per job of a matrix: the measurement is also
        // kept across them, by everything that determines it
        let global = (r.seed, r.k, r.n, r.ty, r.draw, r.content, key.clone());
        let p = match power_cache().lock().ok().and_then(|c| c.get(&global).cloned()) {
            Some(p) => p,
            None => {
                let a = r.batch(&key.0);
                let p = power::measure(&a, &r.b, r.k, r.n, r.ty, &key.1, r.seed);
                if let Ok(mut c) = power_cache().lock() {
                    if c.len() >= POWER_CACHE_ENTRIES {
                        c.clear();
                    }
                    c.insert(global, p.clone());
                }
                p
            }
        };
        self.power.insert(key, p.clone());
        p
    }
}

/// What determines a power measurement: seed, K, N, input type, draw,
/// content, compared row ids and output formats.
type PowerKey = (
    u64,
    usize,
    usize,
    InType,
    Draw,
    Content,
    (Vec<u64>, Vec<Option<Format>>),
);

/// Most power measurements kept across sessions.
const POWER_CACHE_ENTRIES: usize = 4096;

fn power_cache() -> &'static std::sync::Mutex<HashMap<PowerKey, Power>> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<HashMap<PowerKey, Power>>> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Runs a subject's `rank` on a batch `a` (`[m, K]`); `sel` selects
/// output rows.
pub(super) fn run_batch(
    subject: &dyn Subject,
    rank: usize,
    rows: &Rows,
    a: &[f32],
    sel: &[usize],
) -> Result<Vec<f32>, SubjectError> {
    let p = Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(&rows.b),
        m: a.len() / rows.k,
        n: rows.n,
        k: rows.k,
        b_layout: BLayout::Kn,
    };
    let out = if rank == 0 {
        subject.run(&p, Some(sel))?
    } else {
        subject.run_on_rank(&p, rank, Some(sel))?
    };
    if out.len() != sel.len() * rows.n {
        return Err(SubjectError::Failed {
            subject: subject.name(),
            why: format!("returned {} values for {} rows of N = {}", out.len(), sel.len(), rows.n),
        });
    }
    Ok(out)
}
