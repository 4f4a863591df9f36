//! What the data-dependence check found ([`Repeats`]): the probes
//! repeated with other values and every answer that changed
//! ([`ChangedAnswer`]); [`super::repeat`] runs the check.

/// A repeated probe answer that differs from the probe's first answer.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ChangedAnswer {
    /// Which repeat (`rescaled up`, `rescaled down`, `refilled`).
    pub repeat: &'static str,
    pub launch: usize,
    pub row: usize,
    pub col: usize,
    /// The probe: `+B` at p, `-B` at q, the window of counted units (None:
    /// every other term).
    pub p: u32,
    pub q: u32,
    pub window: Option<u32>,
    /// Units the probe counted the first time.
    pub before: u32,
    /// Units counted in the repeat (None: not a whole number of the
    /// repeat's unit; `value` is the raw output).
    pub after: Option<u32>,
    pub value: f32,
}

/// What the repeats found.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Repeats {
    /// Distinct probes repeated.
    pub probes: usize,
    /// The repeats run, in words (a launch each, or two sharing one:
    /// `repeat.rs`).
    pub repeats: Vec<String>,
    /// Launches they took.
    pub launches: usize,
    /// Answers checked (every position of every repeat launch).
    pub answers: usize,
    /// Changed answers, at most 16 listed, and their count.
    pub changed: Vec<ChangedAnswer>,
    pub changed_count: usize,
    /// The distinct probes with a changed answer (p, q, window).
    pub changed_probes: usize,
}
