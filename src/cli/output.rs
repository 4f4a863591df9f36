//! What every command shares for its output: the error type (one line,
//! exit code 2), stdout writes that never panic, clap's errors as one line,
//! and the outcome that sets the exit code.

/// A one-line error for the user; the process exits with code 2.
#[derive(Debug)]
pub struct CliError(pub String);

impl<E: std::fmt::Display> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, CliError>;

/// The first failed write to stdout, if any.
static STDOUT_ERROR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Writes to stdout; on failure records the error (see [`stdout_error`])
/// and skips every later write instead of panicking like `println!`.
pub fn write_stdout(args: std::fmt::Arguments) {
    use std::io::Write;
    if STDOUT_ERROR.get().is_some() {
        return;
    }
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        let _ = STDOUT_ERROR.set(e.to_string());
    }
}

/// Flushes stdout and returns the first write error, if any: the command's
/// output is incomplete and the process should exit with code 2.
pub fn stdout_error() -> Option<String> {
    use std::io::Write;
    if STDOUT_ERROR.get().is_none() {
        if let Err(e) = std::io::stdout().lock().flush() {
            let _ = STDOUT_ERROR.set(e.to_string());
        }
    }
    STDOUT_ERROR.get().cloned()
}

/// Writes one line to stderr, ignoring failure (there is nowhere left to
/// report it), unlike `eprintln!`, which panics.
pub fn write_stderr_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

pub use mxbi::message::one_line;

/// Clap's parse error as one line, without the `error: ` prefix, the usage
/// block and the "For more information" hint: a list introduced by a colon
/// (missing arguments) is joined with ", ", tips with "; ". (A missing
/// subcommand is not an error line: `main` prints the whole help, see
/// [`help_for_missing_subcommand`].)
pub fn clap_error_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut out = String::new();
    let mut listing = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if line.is_empty() {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        if out.is_empty() {
            out.push_str(line);
        } else if out.ends_with(':') {
            out.push(' ');
            out.push_str(line);
            listing = true;
            continue;
        } else if listing && !line.starts_with("tip:") {
            out.push_str(", ");
            out.push_str(line);
            continue;
        } else {
            out.push_str("; ");
            out.push_str(line);
        }
        listing = false;
    }
    if out.is_empty() {
        out = format!("{:?}", e.kind());
    }
    out
}

/// `mxbi` alone, or a command group without its subcommand (`mxbi bi`):
/// the whole help of that command, to be printed on stderr with exit code
/// 2 (a command was expected and nothing ran). `None` for every other
/// parse error.
pub fn help_for_missing_subcommand(e: &clap::Error) -> Option<String> {
    (e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand).then(|| e.render().to_string())
}

/// How a command that ran ended, under the one exit-code policy of the
/// whole CLI (README, "Exit codes"): 0 every check held, 1 a check failed
/// (its report says which). Bad input and runs that cannot happen are
/// errors instead ([`CliError`]), exit code 2, written by `main`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Held,
    Failed,
}

impl Outcome {
    pub const fn exit_code(self) -> i32 {
        match self {
            Outcome::Held => 0,
            Outcome::Failed => 1,
        }
    }
}
