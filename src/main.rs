mod cli;

use clap::Parser;
use cli::{clap_error_line, help_for_missing_subcommand, one_line, run, stdout_error, write_stderr_line, Cli};

/// Bad input or a failure to run: one line on stderr, exit code 2 (the
/// exit-code policy: README, "Exit codes"; 0 and 1 come from `Outcome`).
fn fail(msg: &str) -> ! {
    write_stderr_line(&format!("mxbi: error: {msg}"));
    std::process::exit(2);
}

fn main() {
    // Behave like a Unix filter: a closed pipe (`mxbi ... | head`) ends the
    // process quietly instead of a panic on the next write.
    #[cfg(unix)]
    // SAFETY: restoring the default SIGPIPE disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                // --help / --version: printed on stdout, exit code 0
                e.exit();
            }
            if let Some(help) = help_for_missing_subcommand(&e) {
                // `mxbi` alone (or `mxbi bi`): the whole help on stderr, exit 2
                write_stderr_line(help.trim_end());
                std::process::exit(2);
            }
            fail(&clap_error_line(&e));
        }
    };
    let result = run(cli);
    // a failed write to stdout is reported once the command has ended
    let unwritten = stdout_error();
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(e) => fail(&one_line(&e.0)),
    };
    if let Some(e) = unwritten {
        fail(&format!("cannot write to stdout: {e}"));
    }
    std::process::exit(outcome.exit_code());
}
