use clap::Parser;
use mxbi::cli::{run, Cli};

fn main() {
    // Behave like a Unix filter: a closed pipe (`mxbi ... | head`) ends the
    // process quietly instead of a panic on the next write.
    #[cfg(unix)]
    // SAFETY: restoring the default SIGPIPE disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(outcome) => std::process::exit(outcome.exit_code()),
        Err(e) => {
            eprintln!("mxbi: error: {}", e.0);
            std::process::exit(2);
        }
    }
}
