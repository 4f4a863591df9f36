//! The explainer: name the accumulation order behind observed bytes,
//! recover a black-box subject's reduction tree, and say where two orders
//! diverge and why (contract and examples: docs/EXPLAIN.md).
//!
//! | file | concern |
//! |---|---|
//! | `candidates.rs` | the bounded, enumerable order families searched (incl. dispatch entries) |
//! | `identify.rs` | passive identification: which candidates reproduce observed rows (row-only, early pruning) |
//! | `across.rs` | the cross-row answer: the orders that reproduce every row, or which rows disagree |
//! | `shape.rs` | the summation-tree shape of a compiled tree (what probes can see) |
//! | `reduction.rs` | passive identification of a cross-rank reduction: which rank order (ring position, tree, fixed, any serial order) combined a chunk's partials |
//! | `reveal/` | active recovery through a [`crate::subject::Subject`]: batched FPRev-style probes (`prober.rs` launches, `tally.rs` answers and windows, `rank.rs` windowed ranks, `verify.rs` naming the tree) |
//! | `divergence.rs` | first differing node of two trees, its location, ULP maps, the mechanism |
//! | `exactness.rs` | per element: does every order in a family give the same bytes, and why |
//! | `fix.rs` | a concrete fix for a divergence |
//! | `witness.rs` | an input on which two orders give different bytes, aimed by their tree difference |
//! | `words.rs` | the words: every sentence the explainer prints (no decisions) |
//!
//! The explainer reaches kernels only through the subject interface: it
//! never imports `device`, `op` or `cli` (tests/layering.rs).

pub mod across;
pub mod candidates;
pub mod divergence;
pub mod exactness;
pub mod fix;
pub mod identify;
pub mod reduction;
pub mod reveal;
pub mod shape;
pub mod witness;
mod words;

pub use across::{across_rows, AcrossRows, RowGroup};
pub use candidates::{Candidate, Source};
pub use divergence::{
    diverge, k_profile, nearest_pair, ulp_distance, ulp_map, ChunkUlp, Location, Mechanism, TileUlp, TreeDiff,
};
pub use exactness::{analyze, ElementExactness, Reason};
pub use fix::{suggest, Fix, Varies};
pub use identify::{identify, simplest_order, Closest, IdentifyOptions, RowIdentity};
pub use reveal::{reveal, reveal_mx, ChangedAnswer, Repeats, RevealError, RevealOptions, Revealed};
pub use shape::{Form, Part, Shape, ShapeMiss};
