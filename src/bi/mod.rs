//! The batch-invariance checker: a subject (anything behind
//! [`crate::subject::Subject`]) run through variant families, with one
//! verdict per cell. This module never imports `device` or `op` (tests/layering.rs).
//!
//! # Contract
//! - **Bytes.** Output rows are compared as the bits of their values
//!   (`f32::to_bits`): NaN payloads and the sign of zero count.
//! - **A cell** is one family at one shape (M, K, N) and one target row
//!   position. Its baseline is run twice; if the two runs differ the cell is
//!   `NON_DET` and the variant comparison is skipped.
//! - **Families** ([`Family`]):
//!   `content` keeps the target row and redraws every other row (seed A vs
//!   seed B: the seed-000 method); `batch` puts the same row in a batch of
//!   another M (baseline: the first M listed; the row sits at the same
//!   index in both, positions resolved in the smaller batch); `position`
//!   moves the row from
//!   position 0 to position p in an otherwise unchanged batch; `permutation`
//!   deals all rows by a derangement (every row moves) and compares each row
//!   with itself unpermuted; `repeat` runs the same batch N times
//!   (determinism); `switch` runs two subjects that should agree on the
//!   same batch; `rank` (subjects with world size 2 or more, ranks owning
//!   contiguous shards of M / world size rows) compares the same global
//!   row as held by rank r and by rank 0 in one batch (`held`: e.g. the
//!   GATHER copy vs the owner's LOCAL copy), and the same content placed
//!   in rank r's shard and computed by r vs placed in rank 0's shard
//!   (`owned`), one cell per (M, row, rank, view); `anchor` (seed 001's
//!   table) compares the row at position 0 of a batch of the first M
//!   listed (1: the row alone) with the same row at each target position
//!   (resolved in the larger batch) of a batch of every other M.
//! - **Verdicts** ([`Verdict`]): `BI_PASS`, `BI_FAIL` (with differing
//!   bytes, columns, ULP distance and the first offenders), `NON_DET`,
//!   `VACUOUS` (the subject's rows agree, but the inputs' power is below
//!   [`power::THRESHOLD`]: too few pairs of distinct orders of the
//!   explainer's family give different bytes on them in the subject's
//!   output format, so the pass proves nothing; docs/BI.md, "Power"),
//!   `ERROR` (could not run, with the reason). Every cell carries its power.
//! - **Witnesses** ([`witness`]): where the orders on a cell's two sides
//!   are known (declared by the subject, or identified from its bytes) and
//!   differ, the subject runs on an input built to separate them; its
//!   bytes differing there makes the cell `BI_FAIL` with the witness.
//! - **Explanations** ([`explanation`]): a report carries, for each
//!   failing family, its first failing cell explained (each side's order,
//!   the first diverging node, the mechanism, the fix), filled in at the
//!   edge where the cell can be re-run.
//! - **Positive control.** Every run also checks, per family, a control
//!   subject built to break that family; if the control does not fail, the
//!   run is invalid and says so.
//! - **Cases** ([`Case`], `mxbi-bi-case/1`): one check as JSON, with the
//!   seed-000 `standard` object; its JSON Schema is generated from the types.
//! - **Reports** ([`Report`], `mxbi-bi-report/1`): JSON, Markdown grouped
//!   by family, JUnit, an SVG heatmap ([`heatmap`]); shard reports
//!   [`merge`] into the unsharded one.
//! - Deterministic: inputs come from the seed through [`crate::rng`]; the
//!   same command gives the same report bytes on any machine.

mod bisect;
mod case;
mod cell;
mod cell_witness;
mod confirm;
mod content;
mod control;
mod depends;
mod execute;
pub mod explanation;
mod family;
mod grid;
mod heatmap;
mod inputs;
mod limits;
mod matrix;
mod merge;
mod mrange;
mod options;
mod others;
mod plan;
pub mod power;
mod report;
mod row_ids;
mod run;
mod separating;
mod session;
mod verdict;
pub mod witness;

pub use bisect::bisect_ranges;
pub use case::{
    case_schema, parse_json, BiStandard, Case, CaseVersion, Input, MSpec, Pos, Standard, CASE_SCHEMA, MAX_CASE_BYTES,
};
pub use cell::Cell;
pub use confirm::{NonDetRate, DEFAULT_CONFIRM, MAX_CONFIRM};
pub use content::{Content, ContentClass};
pub use control::Control;
pub use explanation::{Explanation, Known, SideStory, EXPLANATION_SCHEMA};
pub use family::{Family, RowPos};
pub use grid::{knobs, symbol, Grid};
pub use heatmap::heatmap;
pub use inputs::{input_of, Draw, Rows};
pub use limits::Limits;
pub use matrix::{builtin, parse_shard, run_matrix, run_matrix_on, Factory, Job, BUILTINS};
pub use merge::merge;
pub use mrange::{expand, parse_ms, sample, FailRun, MItem, MRangeResult, MAX_BOUNDARIES, MAX_MS, MAX_RANGE_SAMPLES};
pub use options::{edge_ms, CheckOptions};
pub use others::Others;
pub use report::{CaseInfo, MatrixInfo, Options, Report, Summary, REPORT_SCHEMA};
pub use row_ids::{other_id, target_batch};
pub use run::{check_cells, check_content, check_shard, check_shard_content};
pub use verdict::{compare_rows, Offender, RowDiff, Verdict};

pub use run::check;
