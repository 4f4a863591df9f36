//! Per-row provenance: for every output row, which rank holds it, which rank
//! computed it, the path and order, where MX scales entered, and which
//! batch-invariance mechanisms touched it. Serialised to `provenance.json`
//! (schema in docs/OPS.md); the explainer reads it.

/// A mechanism that can make a row's bytes depend on something other than
/// its own input row and the shared weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// The op runs different code paths for different rows (LOCAL vs
    /// GATHER): the path depends on the row's rank/position.
    PathSplit,
    /// Partial sums from several ranks are added in an order that depends on
    /// the row's position (ring chunk ownership).
    PositionDependentReduction,
    /// Partial sums from several ranks are added in a fixed order, the same
    /// for every row (recorded so the explainer sees the cross-rank sum).
    FixedReduction,
    /// The reduction order is drawn anew on every run.
    NonDeterministic,
    /// A router chose the expert; the expert's batch holds other rows.
    Routing,
    /// The GEMM order is chosen from the number of rows in the batch (other
    /// rows' routing or the batch size change it).
    RowCountTiling,
    /// A row-wise reduction whose split depends on the batch size.
    BatchDependentSplit,
    /// Dynamic quantization with one scale from the amax of the whole tensor.
    PerTensorAmax,
    /// MX blocks run along M: a row shares its scale with up to 31 others.
    MxAlongM,
}

/// Provenance of one output row.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RowProvenance {
    /// The rank whose output holds this row.
    pub rank: usize,
    /// Row index inside that rank's output.
    pub row: usize,
    /// The logical row (index into the op's global input rows / tokens).
    pub global_row: usize,
    /// Ranks whose matmul contributed, in the order their results were
    /// combined (one rank unless partial sums were reduced).
    pub computed_on: Vec<usize>,
    /// Path name: `local`, `gather`, `single`, `partial-sum`, `expert:E`,
    /// `norm`, `quant-matmul`.
    pub path: String,
    /// The order of the row's GEMM (or reduction); serialised as its
    /// canonical spelling.
    pub order: crate::order::Order,
    /// Where MX scales entered (`fused`, `block`, `dequant`, `output`,
    /// `requant:FMT`), or null for non-MX paths.
    pub scale_point: Option<String>,
    /// How partial results were combined (`ring r1,r2,r3,r0`, `tree`,
    /// `fixed r0..r3`, `nondet r2,r0,...`), or null.
    pub reduction: Option<String>,
    pub mechanisms: Vec<Mechanism>,
    /// Free-form facts the mechanisms depend on (expert and its row count,
    /// the amax, the MX block along M ...).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub detail: Option<String>,
}
