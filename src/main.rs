use clap::Parser;
use mxbi::cli::{clap_error_line, one_line, run, Cli};

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
            eprintln!("mxbi: error: {}", clap_error_line(&e));
            std::process::exit(2);
        }
    };
    if let Err(e) = run(cli) {
        eprintln!("mxbi: error: {}", one_line(&e.0));
        std::process::exit(2);
    }
}
