//! Why a reveal stopped ([`RevealError`]).

use super::repeats::Repeats;

/// Why a reveal stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RevealError {
    /// Bad options (sizes).
    #[error("{0}")]
    Options(String),
    /// The subject did not answer (every failed launch of the round ran first).
    #[error("{failed} of {launches} launches failed; first: {first}")]
    Subject {
        failed: usize,
        launches: usize,
        first: String,
    },
    /// Answers that are not counts, or that no static tree explains.
    #[error("{0}")]
    Inconsistent(String),
    /// The same probes, repeated with other values, gave other counts: the
    /// order depends on the data, no tree is reported (which probes
    /// disagree: [`Repeats::changed`]).
    #[error("the order depends on the data: {} of the {} probes repeated with other values gave other counts ({} of {} answers); no static tree describes the subject", .0.changed_probes, .0.probes, .0.changed_count, .0.answers)]
    DataDependent(Box<Repeats>),
}
