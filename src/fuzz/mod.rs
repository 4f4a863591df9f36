//! `mxbi fuzz`: property-based search for batch-invariance failures, with
//! shrinking. A fuzz case is one checker cell setting (family, M, the batch
//! family's baseline M, K, N, target row, content class, subject knobs,
//! input seed); it runs through the checker's own cells
//! ([`crate::bi::check_cells`]) and fails when a cell is `BI_FAIL`.
//!
//! | file | concern |
//! |---|---|
//! | `case.rs` | a fuzz case: its check options, running it, the case file (`mxbi-bi-case/1`) it becomes and back |
//! | `strategy.rs` | the proptest strategy: M and K from the subject's edges or log-uniform over the range, the other dimensions from candidate lists |
//! | `shrink.rs` | shrinking: proptest's value-tree simplify/complicate, then exact searches on M, K, N and the content |
//! | `corpus.rs` | the regression corpus folder: save minimal cases, replay them first |
//! | `explanation.rs` | the explainer's account of a minimal failure (which orders, where they diverge, fixes) |
//! | `run.rs` | the loop: corpus, then cases until a confirmed failure, the budget or the case limit; replays that confirm a failure |
//!
//! # Contract
//! - **Deterministic.** Cases come from proptest's ChaCha generator seeded
//!   from [`FuzzConfig::seed`], input values from the checker's generator
//!   ([`crate::rng`]) seeded per case; the same seed gives the same cases,
//!   the same shrinking and the same minimal case on any machine and
//!   thread count. Only the time budget can stop a run at another case.
//! - **Edges and the whole range.** M and K are each drawn half the time
//!   from an edge list and half the time log-uniformly over `1..=max`
//!   (each octave below the maximum equally likely, uniform within it, the
//!   last one cut at the maximum with its share; multiples of the
//!   world size for M and of [`FuzzConfig::k_multiple`] for K). M's edges:
//!   the usual 1, 2, 8/9, ..., 512/513 and b-1, b, b+1 for every M
//!   boundary of the subject; K's: powers of two +-1 and b-1, b, b+1 for
//!   every K boundary given ([`FuzzConfig::k_boundaries`], e.g. a dispatch
//!   table's `k_max`). The content's `others` (what the non-target rows
//!   hold, [`crate::bi::Others`]) is `drawn` half the time, else one of
//!   the other settings ([`FuzzConfig::others`]).
//! - **Shrinking** (on the first failure): proptest simplifies every
//!   dimension toward the first candidate (the smallest M, K, N, the
//!   simplest family, content class and knob setting, `others` toward
//!   `drawn`), then exact binary
//!   searches find the smallest failing M, baseline M, K and N, and the
//!   fewest non-zero entries per row, the narrowest exponent range and the
//!   fewest significand bits that still fail. Every step keeps a failing
//!   case, so the result always fails.
//! - **Confirmed before written.** A failing case (new or from the corpus)
//!   is replayed [`FuzzConfig::confirm`] more times (fresh runs, default
//!   3; 0: no replays); only if every replay fails again is it shrunk, and
//!   the minimal case is replayed as many times before it becomes the
//!   result. A case whose replays do not all fail is a [`NonDet`] (`k` of
//!   `N` replays failed) and the search goes on; a minimal case whose
//!   replays do not all fail is a [`NonDet`] too, and the result is the
//!   confirmed case as found (not shrunk). So a result always replays its
//!   failure; a flaky subject gives [`NonDet`]s and no result.
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
pub mod files;
mod run;
mod shrink;
mod strategy;

pub use case::{FuzzCase, Outcome};
pub use corpus::{case_text, load_corpus, relative_spec, save_case, write_atomic};
pub use files::{minimal_json, something_ran, summary_json, write_files};
pub use run::{check_config, fuzz, fuzz_with};

use crate::bi::{Cell, ContentClass, Others};
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
    /// `others` settings drawn besides `drawn` (empty: all of them;
    /// `[drawn]`: always drawn).
    pub others: Vec<Others>,
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
    /// Replays that must all fail before a case is shrunk and before a
    /// minimal case is the result (0: none).
    pub confirm: u32,
}

/// Most replays [`FuzzConfig::confirm`] may ask for.
pub const MAX_CONFIRM: u32 = 100;

/// Most [`NonDet`] entries an outcome keeps (the count goes on).
pub const MAX_NON_DET: usize = 16;

impl Default for FuzzConfig {
    fn default() -> Self {
        FuzzConfig {
            seed: 1,
            budget: Duration::from_secs(60),
            max_cases: None,
            families: Vec::new(),
            classes: Vec::new(),
            others: Vec::new(),
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
            confirm: 3,
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
    /// Replays of the result that failed again (all of them: `confirm`).
    pub confirmed: u32,
}

/// A failure that did not replay every time: `NON_DET`.
#[derive(Clone, Debug)]
pub struct NonDet {
    /// The case that failed once.
    pub case: FuzzCase,
    /// Its failing cell (the first run).
    pub cell: Cell,
    /// Replays that failed again, of `replays`.
    pub failed: u32,
    pub replays: u32,
    /// Where it came from: `new`, `minimal` (the shrunk case of a
    /// confirmed one) or `corpus`.
    pub stage: &'static str,
}

impl NonDet {
    /// `1 of 3 replays failed`.
    pub fn rate(&self) -> String {
        format!("{} of {} replays failed", self.failed, self.replays)
    }
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
    /// Failures that did not replay every time (the first
    /// [`MAX_NON_DET`]).
    pub non_det: Vec<NonDet>,
    /// How many there were in all.
    pub non_det_count: u64,
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
