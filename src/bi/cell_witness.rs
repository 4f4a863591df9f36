//! A cell's witness check as the report carries it ([`CellWitness`]):
//! each side's order and how it is known, the outcome, the finding and the
//! witness that was run ([`super::witness`] runs the check).

use super::verdict::RowDiff;
use serde::{Deserialize, Serialize};

/// How a side's order became known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Known {
    Declared,
    Identified,
}

/// A side's order and how it is known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideOrder {
    pub order: String,
    pub known: Known,
}

/// What the check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The subject's bytes differ between the sides on the witness.
    Fail,
    /// The orders differ, the subject's bytes on the witness did not.
    Held,
    /// The two sides' orders are the same computation for K.
    SameOrder,
    /// A side's order is not known.
    Unknown,
    /// The search found no witness.
    NoWitness,
    /// The subject could not run the witness.
    Error,
}

/// The witness that was run: how to rebuild it and what it gave.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WitnessInfo {
    /// `explain::witness::build(baseline order, variant order, input, K, N,
    /// {seed, tries})` rebuilds it; `attempt` and `probe` say which draw.
    pub seed: u64,
    pub tries: usize,
    pub attempt: usize,
    pub probe: String,
    pub input: String,
    /// FNV-1a of A's row and B (`Witness::digest`), hex.
    pub digest: String,
    /// Columns where the two orders differ on it (model).
    pub columns: usize,
    /// The first such column, and its bits (hex) under each order and as
    /// the subject gave them on each side.
    pub column: usize,
    pub base_order_bits: String,
    pub var_order_bits: String,
    pub base_bits: Option<String>,
    pub var_bits: Option<String>,
    /// Columns where the subject's two sides differ.
    pub subject_columns: Option<usize>,
}

/// The witness check of one cell (a plain serde struct; `cell` is the
/// report cell's id).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellWitness {
    pub cell: String,
    pub base: Option<SideOrder>,
    pub var: Option<SideOrder>,
    pub outcome: Outcome,
    /// `held`: which order the subject's bytes equal on the witness
    /// (`baseline`, `variant`, or None: neither).
    pub matches: Option<String>,
    /// One sentence saying what was found.
    pub finding: String,
    pub witness: Option<WitnessInfo>,
    /// How the subject's two target rows differ on the witness (None: not
    /// run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<RowDiff>,
}
