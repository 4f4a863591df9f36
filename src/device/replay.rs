//! The one replay entry: every device suite whose capture can be checked
//! on the CPU is listed in [`SUITES`] (each implements [`Replay`], from
//! [`super::suite_replay`], re-exported here), and every replay ends in one
//! [`ReplayOutcome`]. `mxbi device replay` talks only to [`replay_capture`];
//! it never looks at a suite's name or report type.

use super::capture::Capture;
use super::Result;

pub use super::suite_replay::{Replay, ReplayOptions, ReplayOutcome};

/// Every suite with a CPU replay.
pub const SUITES: &[&dyn Replay] = &[
    &super::conform::Suite,
    &super::casts::Suite,
    &super::probe::Suite,
    &super::vendor::Suite,
    &super::collective::Suite,
];

/// The suite that replays captures of `name`.
pub fn suite(name: &str) -> Option<&'static dyn Replay> {
    SUITES.iter().copied().find(|s| s.suite() == name)
}

/// Replays a capture by the suite its manifest names. A suite without a
/// CPU replay is reported as verified for integrity only (the caller has
/// checked every file against the manifest).
pub fn replay_capture(capture: &Capture, opts: &ReplayOptions) -> Result<ReplayOutcome> {
    match suite(&capture.manifest.suite) {
        Some(s) => s.replay(capture, opts),
        None => Ok(ReplayOutcome {
            summary: format!(
                "suite `{}`: integrity verified (no CPU replay for this suite)",
                capture.manifest.suite
            ),
            ..ReplayOutcome::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suite_names_are_unique_and_found() {
        for (i, s) in SUITES.iter().enumerate() {
            assert!(SUITES[..i].iter().all(|t| t.suite() != s.suite()), "{}", s.suite());
            assert_eq!(suite(s.suite()).unwrap().suite(), s.suite());
        }
        assert!(suite("nccl-bench").is_none());
        let names: Vec<&str> = SUITES.iter().map(|s| s.suite()).collect();
        assert_eq!(names, ["conform", "casts", "probe", "vendor", "collective"]);
    }
}
