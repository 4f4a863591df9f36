//! The `mxbi` command line: argument parsing, file I/O and reports. All
//! numerics live in the library modules; this module only wires them up.

/// `println!` that never panics: a failed write to stdout (a full disk, a
/// closed descriptor) is recorded, later writes are skipped, and the
/// process ends with one error line and exit code 2 ([`stdout_error`]).
macro_rules! outln {
    () => {
        $crate::cli::write_stdout(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::cli::write_stdout(format_args!("{}\n", format_args!($($t)*)))
    };
}

/// `print!` that never panics (see `outln!`).
macro_rules! out {
    ($($t:tt)*) => {
        $crate::cli::write_stdout(format_args!($($t)*))
    };
}

mod accuracy;
pub mod bench;
mod bi;
mod bi_case;
mod bi_report;
mod demo;
mod device;
mod explain;
mod explain_case;
pub mod fuzz;
mod gemm;
mod mx_table;
mod op;
mod reveal;
mod reveal_files;
mod reveal_shape;
mod subject_specs;

mod convert;
mod output;
mod tensor_files;

use convert::{cast, decode, dequantize, formats, quantize};
pub use convert::{CastArgs, DecodeArgs, DequantizeArgs, FormatsArgs, QuantizeArgs};
pub use output::{
    clap_error_line, help_for_missing_subcommand, one_line, stdout_error, write_stderr_line, write_stdout, CliError,
    Outcome, Result,
};
use tensor_files::{input_f32, load, save};

use clap::{Parser, Subcommand};

/// What `mxbi --help` says before the command list: what batch
/// invariance is and the jobs mxbi does for it.
const ABOUT: &str = "\
Batch-invariance checker for GEMM-like GPU kernels, on a bit-exact emulator of
accumulation orders and MX/FP8 formats.

A kernel is batch-invariant when the bytes it computes for one row do not depend
on the batch around it: how many rows, where the row sits, what the other rows
hold. Kernels break it by picking another accumulation order (split-K, tiles,
tensor-core steps) by batch shape; mxbi finds where, and names the orders.

  check     mxbi bi run     a subject (model, dispatch table, runner, GPU kernel)
                            through variant families, one verdict per cell
  explain   mxbi explain    the accumulation order behind observed bytes, and
                            where two orders diverge
            mxbi reveal     recover a black box's reduction tree by probing it
  fuzz      mxbi fuzz       search shapes for a failure, shrink it to a case file
  accuracy  mxbi accuracy   an output's error against a golden and a benchmark";

/// Where to start, after the command list.
const START: &str = "\
Start here: `mxbi demo` (the checker on built-in subjects: no GPU, under a
second), then `mxbi bi run --help`.
Exit codes: 0 every check held, 1 a check failed, 2 bad input or a run that
cannot happen (`mxbi` alone prints this help and exits 2).
Docs: README.md; docs/BI.md (the checker), docs/EXPLAIN.md, docs/ORDERS.md,
docs/ACCURACY.md.";

#[derive(Parser, Debug)]
#[command(name = "mxbi", version, about = ABOUT, after_help = START)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The batch-invariance checker on built-in subjects (CPU model): a
    /// small matrix, verdicts and the summary.
    Demo,
    /// Quantize a built-in tensor with every MX preset and compare them.
    MxTable,
    /// Cast f32/f64 values to element codes (uint8; uint16 for bf16/f16).
    Cast(CastArgs),
    /// Decode element codes to f32.
    Decode(DecodeArgs),
    /// MX block quantization: codes (uint8, input shape) and E8M0 scales.
    Quantize(QuantizeArgs),
    /// Exact MX dequantization.
    Dequantize(DequantizeArgs),
    /// Print the value table of an element format.
    Formats(FormatsArgs),
    /// Measure cast/quantize throughput (see docs/PERFORMANCE.md).
    Bench(bench::BenchArgs),
    /// Emulated GEMM under an accumulation order (docs/ORDERS.md).
    Gemm(gemm::GemmArgs),
    /// Batch-invariance checks: a subject through variant families.
    #[command(subcommand)]
    Bi(bi::BiCommand),
    /// Print an order's canonical form and its reduction tree for a K.
    Order(gemm::OrderArgs),
    /// Every intermediate value of one output element.
    Trace(gemm::TraceArgs),
    /// Real-GPU suites (feature `cuda`) and replay of their captures.
    #[command(subcommand)]
    Device(device::DeviceCommand),
    /// Name the accumulation order behind observed bytes; with --vs, where
    /// two observations diverge and why (docs/EXPLAIN.md).
    Explain(explain::ExplainArgs),
    /// Recover a subject's reduction tree by probing it (docs/EXPLAIN.md).
    Reveal(reveal::RevealArgs),
    /// Fused comm+matmul op models (docs/OPS.md): list presets, run a spec.
    #[command(subcommand)]
    Op(op::OpCommand),
    /// Accuracy verdict of an output against a golden and a benchmark (docs/ACCURACY.md).
    Accuracy(accuracy::AccuracyArgs),
    /// Search a subject for a batch-invariance failure and shrink it to a
    /// minimal case file (docs/BI.md).
    Fuzz(fuzz::FuzzArgs),
}

/// `RAYON_NUM_THREADS` sizes the worker pool: a number beyond
/// [`mxbi::limits::MAX_THREADS`] is refused before any pool starts.
fn check_threads_env() -> Result<()> {
    if let Ok(v) = std::env::var("RAYON_NUM_THREADS") {
        if let Ok(n) = v.trim().parse::<u128>() {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            mxbi::limits::check_at_most("RAYON_NUM_THREADS", n, mxbi::limits::MAX_THREADS, "MAX_THREADS")
                .map_err(CliError)?;
        }
    }
    Ok(())
}

pub fn run(cli: Cli) -> Result<Outcome> {
    check_threads_env()?;
    match cli.command {
        Command::Bi(c) => return bi::run(c),
        Command::Device(c) => return device::run(c),
        Command::Accuracy(a) => return accuracy::run(a),
        Command::Demo => return demo::run(),
        Command::Explain(a) => return explain::explain(a),
        Command::Reveal(a) => return reveal::reveal(a),
        Command::Op(c) => return op::run(c),
        Command::Fuzz(a) => return fuzz::run(a),
        _ => {}
    }
    match cli.command {
        Command::Demo => unreachable!("handled above"),
        Command::MxTable => mx_table::run(),
        Command::Cast(a) => cast(a),
        Command::Decode(a) => decode(a),
        Command::Quantize(a) => quantize(a),
        Command::Dequantize(a) => dequantize(a),
        Command::Formats(a) => formats(a),
        Command::Bench(a) => bench::run(a),
        Command::Gemm(a) => gemm::gemm(a),
        Command::Order(a) => gemm::order(a),
        Command::Trace(a) => gemm::trace(a),
        Command::Device(_) => unreachable!("handled above"),
        Command::Bi(_)
        | Command::Accuracy(_)
        | Command::Explain(_)
        | Command::Reveal(_)
        | Command::Op(_)
        | Command::Fuzz(_) => {
            unreachable!("handled above")
        }
    }?;
    Ok(Outcome::Held)
}
