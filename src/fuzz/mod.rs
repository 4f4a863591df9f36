//! `mxbi fuzz`: property-based search for batch-invariance failures, with
//! shrinking. A fuzz case is one checker cell setting (family, M, the batch
//! family's baseline M, K, N, target row, content class, subject knobs,
//! input seed); it runs through the checker's own cells
//! ([`crate::bi::check_cells`]) and fails when a cell is `BI_FAIL`.
//!
//! | file | concern |
//! |---|---|
//! | `case.rs` | a fuzz case: its check options, running it, the case file (`mxbi-bi-case/1`) it becomes and back |
//! | `strategy.rs` | the proptest strategy: candidate values biased toward the subject's M and K edges |
//! | `shrink.rs` | shrinking: proptest's value-tree simplify/complicate, then exact searches on M, K, N and the content |
//! | `corpus.rs` | the regression corpus folder: save minimal cases, replay them first |
//! | `explanation.rs` | the explainer's account of a minimal failure (which orders, where they diverge, fixes) |
//! | `run.rs` | the loop: corpus, then cases until a failure, the budget or the case limit |
//!
//! # Contract
//! - **Deterministic.** Cases come from proptest's ChaCha generator seeded
//!   from [`FuzzConfig::seed`], input values from the checker's generator
//!   ([`crate::rng`]) seeded per case; the same seed gives the same cases,
//!   the same shrinking and the same minimal case on any machine and
//!   thread count. Only the time budget can stop a run at another case.
//! - **Edges first.** M is drawn from the usual edges (1, 2, 8/9, ...,
//!   512/513) and b-1, b, b+1 for every M boundary of the subject; K from
//!   powers of two +-1 and b-1, b, b+1 for every K boundary given
//!   ([`FuzzConfig::k_boundaries`], e.g. a dispatch table's `k_max`).
//! - **Shrinking** (on the first failure): proptest simplifies every
//!   dimension toward the first candidate (the smallest M, K, N, the
//!   simplest family, content class and knob setting), then exact binary
//!   searches find the smallest failing M, baseline M, K and N, and the
//!   fewest non-zero entries per row, the narrowest exponent range and the
//!   fewest significand bits that still fail. Every step keeps a failing
//!   case, so the result always fails.
//! - **The result** is a [`Shrunk`]: the minimal case as an
//!   `mxbi-bi-case/1` [`crate::bi::Case`] (which `mxbi bi run` replays with
//!   exit 1), the failing cell, and the explainer's account when it can
//!   give one.
//! - **Corpus.** With [`FuzzConfig::corpus`], cases saved there for this
//!   subject are replayed before any new case; one that fails again is the
//!   result at once (not shrunk again). A new minimal case is saved there.

mod case;
mod corpus;
mod explanation;
mod run;
mod shrink;
mod strategy;

pub use case::{FuzzCase, Outcome};
pub use corpus::{case_text, load_corpus, relative_spec, save_case, write_atomic};
pub use run::{fuzz, fuzz_with};

use crate::bi::{Cell, ContentClass};
use crate::order::InType;
use crate::subject::Knobs;
use std::path::PathBuf;
use std::time::Duration;

/// What to fuzz and for how long.
#[derive(Clone, Debug)]
pub struct FuzzConfig {
    /// The seed of the whole run (printed; the same seed, the same run).
    pub seed: u64,
    /// Time for new cases (the corpus and shrinking are not cut short).
    pub budget: Duration,
    /// Most new cases (None: until the budget ends).
    pub max_cases: Option<u64>,
    /// Family names as in bi cases (`content`, `batch`, ...); empty: content,
    /// batch, position (and rank for subjects of world size 2 or more).
    pub families: Vec<String>,
    /// Content classes to draw (empty: all of them).
    pub classes: Vec<ContentClass>,
    /// Subject settings to draw, simplest first (empty: the subject as given).
    pub knobs: Vec<Knobs>,
    /// The subject as `--subject` spells it, written into case files.
    pub spec: String,
    /// K values where the subject's behaviour may change (dispatch `k_max`).
    pub k_boundaries: Vec<usize>,
    /// Input element type (None: what the subject reads, else f32).
    pub input: Option<InType>,
    /// Largest M, K and N drawn.
    pub max_m: usize,
    pub max_k: usize,
    pub max_n: usize,
    /// K must be a multiple of this (32 for MX subjects).
    pub k_multiple: usize,
    /// The regression corpus folder (None: none).
    pub corpus: Option<PathBuf>,
    /// Most subject runs spent shrinking.
    pub max_shrink_runs: u64,
}

impl Default for FuzzConfig {
    fn default() -> Self {
        FuzzConfig {
            seed: 1,
            budget: Duration::from_secs(60),
            max_cases: None,
            families: Vec::new(),
            classes: Vec::new(),
            knobs: Vec::new(),
            spec: String::new(),
            k_boundaries: Vec::new(),
            input: None,
            max_m: 513,
            max_k: 4096,
            max_n: 64,
            k_multiple: 1,
            corpus: None,
            max_shrink_runs: 400,
        }
    }
}

/// The minimal failing case.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The case as first found (before shrinking).
    pub found: FuzzCase,
    /// The minimal case.
    pub case: FuzzCase,
    /// It as a case file (`mxbi-bi-case/1`).
    pub file: crate::bi::Case,
    /// Its failing cell.
    pub cell: Cell,
    /// The explainer's account (empty when it cannot give one).
    pub explanation: Vec<String>,
    /// Subject runs (cases) spent shrinking.
    pub shrink_runs: u64,
    /// The corpus file it came from, when a corpus case failed again.
    pub from_corpus: Option<PathBuf>,
}

/// What a fuzz run found.
#[derive(Clone, Debug)]
pub struct FuzzOutcome {
    pub seed: u64,
    /// New cases run (corpus replays not counted).
    pub cases_tried: u64,
    /// Corpus cases replayed first.
    pub corpus_replayed: u64,
    /// Cases that had no cell to run or whose every cell was an ERROR.
    pub cases_skipped: u64,
    /// The first ERROR reason seen, if any.
    pub first_error: Option<String>,
    pub failure: Option<Shrunk>,
}

/// Why a fuzz run could not happen (exit 2).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FuzzError {
    /// A bad setting (one line).
    #[error("{0}")]
    BadInput(String),
    /// The subject can no longer run anything, or a file could not be
    /// written.
    #[error("{0}")]
    Broken(String),
}
