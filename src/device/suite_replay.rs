//! What a device suite's CPU replay implements ([`Replay`]) and ends in
//! ([`ReplayOutcome`]), with the helpers the suites share. The suites
//! themselves are listed in [`super::replay`].
//!
//! A replay *fails* (exit code 1, README "Exit codes") when
//! [`ReplayOutcome::failed`] is nonzero: a replayed row, chunk, record or
//! stored count that the current CPU model does not reproduce. A capture
//! that cannot be read, is not intact, or is malformed is an error
//! ([`DeviceError`], exit code 2), not a failed check.

use super::capture::Capture;
use super::{DeviceError, Result};

/// What a replay may vary (the CLI's flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Recompute every cast chunk instead of the sampled ones.
    pub full: bool,
    /// Seed of the sampled cast chunks.
    pub cast_seed: u64,
}

/// The result of replaying one capture, whatever its suite.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayOutcome {
    /// One line: what was replayed and what differs.
    pub summary: String,
    /// One line per replayed unit (printed with `--verbose`).
    pub details: Vec<String>,
    /// Disagreements worth a line of their own (printed on stderr).
    pub problems: Vec<String>,
    /// Replayed rows, chunks, records or stored counts that differ from the
    /// capture; the check held when this is 0.
    pub failed: usize,
}

impl ReplayOutcome {
    /// Every replayed byte and count agrees with the capture.
    pub fn held(&self) -> bool {
        self.failed == 0
    }
}

/// A device suite whose captures replay on the CPU model.
pub trait Replay: Sync {
    /// The suite name its captures carry in `manifest.json`.
    fn suite(&self) -> &'static str;
    /// Replays an opened, verified capture of this suite.
    fn replay(&self, capture: &Capture, opts: &ReplayOptions) -> Result<ReplayOutcome>;
}

/// The error of a capture handed to the wrong suite.
pub(crate) fn wrong_suite(capture: &Capture, expected: &str) -> DeviceError {
    DeviceError::Capture(format!(
        "{}: suite `{}`, expected `{expected}`",
        capture.dir.display(),
        capture.manifest.suite
    ))
}

/// "none", or the items joined by `sep`.
pub(crate) fn list_or_none(items: &[String], sep: &str) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(sep)
    }
}
