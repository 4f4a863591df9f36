//! Subject specs on the command line and in case files, parsed by the
//! library's one factory ([`mxbi::subjects`]) with the CLI's error type.

use super::{CliError, Result};
use mxbi::subject::spec::{Parsed, RunnerOptions};
use mxbi::subject::Knobs;
use mxbi::subjects;

/// The subject `spec` names, runner options at their defaults.
pub(super) fn parse_subject(spec: &str) -> Result<Parsed> {
    parse_with(spec, &RunnerOptions::default())
}

/// The subject `spec` names with `runner`'s options.
pub(super) fn parse_with(spec: &str, runner: &RunnerOptions) -> Result<Parsed> {
    subjects::parse(spec, &Knobs::default(), runner).map_err(CliError)
}

/// A subject and its switch partner ([`mxbi::subject::spec::Factory::pair`]).
pub(super) fn parse_pair(spec: &str, vs: Option<&str>, runner: &RunnerOptions) -> Result<(Parsed, Option<Parsed>)> {
    subjects::factory().pair(spec, vs, runner).map_err(CliError)
}
