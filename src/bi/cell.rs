//! One cell's verdict as the report carries it ([`Cell`]): its id and
//! shape, the subject's setting, the verdict with the differing bytes, the
//! reason, the power and the non-determinism rate.

use super::family::Family;
use super::inputs::Draw;
use super::power::Power;
use super::verdict::{RowDiff, Verdict};
use crate::subject::Knobs;
use serde::{Deserialize, Serialize};

/// One cell's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub id: String,
    pub family: Family,
    pub subject: String,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// Target-row position (`0`, `mid`, `last`) or `all`.
    pub row: String,
    /// The rank (op subjects); null for single-device subjects.
    pub rank: Option<usize>,
    /// The subject setting of a matrix cell (only the knobs set).
    #[serde(flatten)]
    pub knobs: Knobs,
    /// How the inputs were drawn, when not the default (`unit`: the
    /// vacuity probes of the `seed000` matrix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Draw>,
    /// Rank cells: the paths compared, variant vs baseline (`GATHER vs
    /// LOCAL`: the row received by rank r vs the row in its owner's shard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub verdict: Verdict,
    #[serde(flatten)]
    pub diff: RowDiff,
    /// Why the verdict is ERROR, NON_DET or VACUOUS.
    pub reason: Option<String>,
    /// The power of the cell's inputs (docs/BI.md, "Power"); null when the
    /// subject gave no bytes to measure it in (an ERROR).
    #[serde(default)]
    pub power: Option<Power>,
    // -- confirm (bi::confirm) --
    /// NON_DET cells: how often re-runs of a side disagreed with its first
    /// run (the reason says the same in words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nondet_rate: Option<super::confirm::NonDetRate>,
}
