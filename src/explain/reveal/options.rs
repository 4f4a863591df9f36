//! What a reveal is asked ([`RevealOptions`]), how its probes are laid out
//! ([`Scheme`]) and its memory bound ([`MAX_PROBES`]).

use crate::order::InType;

/// What to reveal.
#[derive(Clone, Copy, Debug)]
pub struct RevealOptions {
    /// The launch shape (the subject's tree may depend on it).
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// The element type the subject reads; probe values are exact in it.
    pub input: InType,
    /// Seed of the random verification inputs.
    pub seed: u64,
    /// Rows of the random verification launch compared byte for byte.
    pub verify_rows: usize,
}

/// How probes were laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    Lines,
    Diagonal,
}

/// Most distinct probes one reveal may request: 2^24. Each keeps a tally of
/// its answers (about 50 bytes), so the tallies stay under about 1 GiB;
/// checked before each round, before its launches are built.
pub const MAX_PROBES: usize = 1 << 24;
