use clap::Parser;
use mxbi::cli::{run, Cli};

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("mxbi: error: {}", e.0);
        std::process::exit(2);
    }
}
