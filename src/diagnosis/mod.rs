//! Failures diagnosed: each failing cell of a checker report explained
//! where it is reported (docs/BI.md, "Explanations in the report"), and
//! one cell explained on request (`mxbi explain --case`). The two sides of
//! a cell are re-run on the subject as the checker ran them; their target
//! rows are identified ([`crate::explain`]), diffed, and, for op subjects,
//! traced through the op model's provenance ([`op`]).
//!
//! This module sits above `bi`, `explain`, `op` and `subjects`: the
//! checker itself never imports it (tests/layering.rs); the CLI and the
//! Python binding call [`explain_report`].

pub mod cell;
pub mod op;
pub mod report;
pub mod rows;

pub use cell::{explain_cell, CellExplained, CellSetup, REVEAL_MAX_K, REVEAL_MAX_M};
pub use report::{explain_failures, explain_report, MAX_PER_FAMILY};
pub use rows::{dispatch_orders, report as explain_rows, Reported, RowStory};

/// Why a cell could not be explained: one line.
#[derive(Debug)]
pub struct Unexplained(pub String);

impl<E: std::fmt::Display> From<E> for Unexplained {
    fn from(e: E) -> Self {
        Unexplained(e.to_string())
    }
}

/// A diagnosis's result.
pub type Result<T> = std::result::Result<T, Unexplained>;
