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

use clap::{Args, Parser, Subcommand};
use mxbi::format::{self, CastPolicy, CastPreset, CodesMut, Format, NanPolicy, Overflow, Rounding, Stochastic};
use mxbi::io::{self, DType, TensorData};
use mxbi::mx::{self, AxisLayout, MxFormat, MxPolicy, MxPreset, ScaleLayout, ScaleMode};
use std::path::PathBuf;

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

#[derive(Args, Debug)]
pub struct CastArgs {
    /// Target format: e4m3, e5m2, e3m2, e2m3, e2m1, int8, e8m0, bf16, f16.
    #[arg(long)]
    pub to: Format,
    /// Rounding (default: the preset's, else nearest-even).
    #[arg(long)]
    pub round: Option<Rounding>,
    /// Seed for stochastic rounding.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Random bits for stochastic rounding (1..=32, default 16).
    #[arg(long)]
    pub sr_bits: Option<u32>,
    /// Overflow policy: saturate or nonfinite.
    #[arg(long)]
    pub overflow: Option<Overflow>,
    /// NaN into formats without NaN: error, neg-zero, pos-max, zero.
    #[arg(long)]
    pub nan: Option<NanPolicy>,
    /// Reproduce an implementation: ml_dtypes, nvidia, torch, gfloat.
    #[arg(long)]
    pub preset: Option<CastPreset>,
    /// Tensor name inside a .safetensors input.
    #[arg(long)]
    pub name: Option<String>,
    /// Values to cast: a .npy or .safetensors file of f32 or f64.
    pub input: PathBuf,
    /// Where the codes go (.npy or .safetensors, the input's shape).
    pub output: PathBuf,
}

#[derive(Args, Debug)]
pub struct DecodeArgs {
    /// Format of the codes: e4m3, e5m2, e3m2, e2m3, e2m1, int8, e8m0, bf16, f16.
    #[arg(long)]
    pub from: Format,
    /// Tensor name inside a .safetensors input.
    #[arg(long)]
    pub name: Option<String>,
    /// Codes to decode: uint8 (uint16 for bf16/f16), .npy or .safetensors.
    pub input: PathBuf,
    /// Where the f32 values go (.npy or .safetensors, the input's shape).
    pub output: PathBuf,
}

#[derive(Args, Debug)]
pub struct MxShapeArgs {
    /// Elements per block (a power of two).
    #[arg(long, default_value_t = 32)]
    pub block: usize,
    /// Axis along which blocks run (negative counts from the end).
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    pub axis: isize,
    /// Allow an axis length that is not a multiple of the block (the last
    /// block is treated as zero-padded).
    #[arg(long)]
    pub pad: bool,
    /// Scale layout: plain (same shape as the input, axis divided by the
    /// block) or swizzled-128x4 (cuBLAS/Blackwell tiles; 2-d, last axis).
    #[arg(long, default_value = "plain")]
    pub scale_layout: ScaleLayout,
}

#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// MX format: mxfp8-e4m3, mxfp8-e5m2, mxfp6-e3m2, mxfp6-e2m3,
    /// mxfp4-e2m1, mxint8.
    #[arg(long)]
    pub format: MxFormat,
    /// floor, ceil, even, rceil (default: the preset's).
    #[arg(long)]
    pub scale_mode: Option<ScaleMode>,
    /// ocp (default), torchao, nvidia, microxcaling.
    #[arg(long)]
    pub preset: Option<MxPreset>,
    /// Element rounding (default: the preset's).
    #[arg(long)]
    pub round: Option<Rounding>,
    /// Seed for stochastic element rounding.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Treat f32-subnormal inputs as zero.
    #[arg(long)]
    pub flush_subnormals: bool,
    /// MXINT8: forbid -2.0 (code 0x80).
    #[arg(long)]
    pub no_int8_neg2: bool,
    #[command(flatten)]
    pub shape: MxShapeArgs,
    /// Tensor name inside a .safetensors input.
    #[arg(long)]
    pub name: Option<String>,
    /// Print a summary (scales, saturated elements, max error) as JSON.
    #[arg(long)]
    pub stats: bool,
    /// Values to quantize: f32, f16, bf16 (or f64 exact in f32), .npy or
    /// .safetensors.
    pub input: PathBuf,
    /// Where the element codes go (uint8, the input's shape).
    #[arg(long)]
    pub codes: PathBuf,
    /// Where the E8M0 scales go (uint8; the input's shape with the block
    /// axis divided by the block, or the swizzled layout).
    #[arg(long)]
    pub scales: PathBuf,
}

#[derive(Args, Debug)]
pub struct DequantizeArgs {
    /// MX format of the codes: mxfp8-e4m3, mxfp8-e5m2, mxfp6-e3m2,
    /// mxfp6-e2m3, mxfp4-e2m1, mxint8.
    #[arg(long)]
    pub format: MxFormat,
    #[command(flatten)]
    pub shape: MxShapeArgs,
    /// Output dtype: f32 (exact where representable; inexact elements are
    /// counted on stderr) or f64 (always exact).
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Element codes (uint8, as `quantize --codes` writes them).
    #[arg(long)]
    pub codes: PathBuf,
    /// E8M0 scales (uint8, as `quantize --scales` writes them).
    #[arg(long)]
    pub scales: PathBuf,
    /// Where the values go (.npy or .safetensors, the codes' shape).
    pub output: PathBuf,
}

#[derive(Args, Debug)]
pub struct FormatsArgs {
    /// Element format (omit to list all formats).
    pub format: Option<Format>,
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

/// Loads a tensor. An empty tensor has no bytes that bound its other
/// dimensions, so their product (zero dimensions counted as 1) must stay
/// within [`mxbi::limits::MAX_ELEMENTS`].
fn load(path: &std::path::Path, name: Option<&str>) -> Result<TensorData> {
    let t = io::load_tensor(path, name)?;
    if t.numel() == 0 {
        mxbi::limits::check_elements(&format!("{}: the empty tensor of shape", path.display()), t.shape())
            .map_err(CliError)?;
    }
    Ok(t)
}

fn save(path: &PathBuf, t: TensorData) -> Result<()> {
    Ok(io::write_tensor(path, "data", &t)?)
}

fn cast(a: CastArgs) -> Result<()> {
    let mut p = match a.preset {
        Some(pr) => pr.policy(a.to),
        None => CastPolicy::ieee(a.to),
    };
    if let Some(r) = a.round {
        p.rounding = r;
    }
    if let Some(o) = a.overflow {
        p.overflow = o;
    }
    if let Some(n) = a.nan {
        p.nan = n;
    }
    if a.seed.is_some() || a.sr_bits.is_some() {
        if p.rounding != Rounding::Stochastic {
            return Err(CliError("--seed/--sr-bits only apply with --round stochastic".into()));
        }
        p.stochastic = Stochastic {
            seed: a.seed.unwrap_or(0),
            bits: a.sr_bits.unwrap_or(16),
        };
    }
    let t = load(&a.input, a.name.as_deref())?;
    let shape = t.shape().to_vec();
    let n = t.numel();
    let wide = a.to.bits() > 8;
    let mut out8 = if wide { Vec::new() } else { vec![0u8; n] };
    let mut out16 = if wide { vec![0u16; n] } else { Vec::new() };
    let out = if wide {
        CodesMut::U16(&mut out16)
    } else {
        CodesMut::U8(&mut out8)
    };
    match t.dtype() {
        DType::F32 => format::cast_f32_slice(&t.as_f32()?, out, a.to, &p, 0)?,
        DType::F64 => format::cast_f64_slice(&t.as_f64()?, out, a.to, &p, 0)?,
        d => {
            return Err(CliError(format!(
                "{}: cast needs f32 or f64 input, got {}",
                a.input.display(),
                d.name()
            )))
        }
    }
    drop(t);
    let t = if wide {
        TensorData::from_slice(shape, &out16)?
    } else {
        TensorData::new(DType::U8, shape, out8)?
    };
    save(&a.output, t)
}

fn decode(a: DecodeArgs) -> Result<()> {
    let t = load(&a.input, a.name.as_deref())?;
    let codes: Vec<u16> = match t.dtype() {
        DType::U8 | DType::I8 | DType::F8E4M3 | DType::F8E5M2 => t.as_bits8()?.iter().map(|&c| c as u16).collect(),
        DType::U16 | DType::F16 | DType::BF16 => t.as_bits16()?.into_owned(),
        d => {
            return Err(CliError(format!(
                "{}: decode needs uint8/uint16 codes, got {}",
                a.input.display(),
                d.name()
            )))
        }
    };
    if let Some((i, c)) = codes.iter().enumerate().find(|(_, &c)| c as u32 >= a.from.code_count()) {
        return Err(CliError(format!(
            "{}: element {i}: code {c:#x} is not a valid {} code ({} bits)",
            a.input.display(),
            a.from,
            a.from.bits()
        )));
    }
    let vals: Vec<f32> = codes.iter().map(|&c| a.from.decode_f32(c)).collect();
    save(&a.output, TensorData::from_slice(t.shape().to_vec(), &vals)?)
}

/// Reads a floating-point input as f32 (borrowing the memory map for f32
/// files), refusing values that f32 cannot hold exactly (so that nothing
/// rounds twice).
fn input_f32<'a>(t: &'a TensorData, path: &std::path::Path) -> Result<std::borrow::Cow<'a, [f32]>> {
    Ok(match t.dtype() {
        DType::F32 => t.as_f32()?,
        DType::F16 => t.as_f16()?.iter().map(|h| h.to_f32()).collect(),
        DType::BF16 => t.as_bf16()?.iter().map(|h| h.to_f32()).collect(),
        DType::F64 => {
            let v = t.as_f64()?;
            if let Some((i, x)) = v
                .iter()
                .enumerate()
                .find(|(_, x)| !x.is_nan() && (**x as f32) as f64 != **x)
            {
                return Err(CliError(format!(
                    "{}: element {i} ({x:e}) is not exactly representable in f32",
                    path.display()
                )));
            }
            v.iter().map(|&x| x as f32).collect()
        }
        d => {
            return Err(CliError(format!(
                "{}: expected f32, f16 or bf16 values, got {}",
                path.display(),
                d.name()
            )))
        }
    })
}

fn check_swizzle(shape: &[usize], axis: isize) -> Result<()> {
    if shape.len() != 2 || !(axis == -1 || axis == 1) {
        return Err(CliError(
            "--scale-layout swizzled-128x4 needs a 2-d input with blocks along the last axis".into(),
        ));
    }
    Ok(())
}

fn mx_policy(a: &QuantizeArgs) -> Result<MxPolicy> {
    let mut p = a.preset.unwrap_or(MxPreset::Ocp).policy(a.format);
    if let Some(m) = a.scale_mode {
        p.scale_mode = m;
    }
    if let Some(r) = a.round {
        p.element.rounding = r;
    }
    if let Some(s) = a.seed {
        p.element.stochastic.seed = s;
    }
    p.flush_subnormals |= a.flush_subnormals;
    if a.no_int8_neg2 {
        if a.format != MxFormat::Int8 {
            return Err(CliError("--no-int8-neg2 applies to mxint8 only".into()));
        }
        p.element.int8_allow_neg2 = false;
    }
    Ok(p)
}

fn quantize(a: QuantizeArgs) -> Result<()> {
    let p = mx_policy(&a)?;
    let t = load(&a.input, a.name.as_deref())?;
    let shape = t.shape().to_vec();
    let layout = AxisLayout::new(&shape, a.shape.axis, a.shape.block, a.shape.pad)?;
    let x = input_f32(&t, &a.input)?;
    let q = mx::quantize(&x, &layout, a.format, &p)?;
    // printed once both files are written, so a failed write prints nothing
    let stats = if a.stats {
        let st = mx::QuantStats::compute(&x, &q, &layout, a.format)?;
        Some(serde_json::to_string(&st)?)
    } else {
        None
    };
    drop(x);
    drop(t);
    let axis = if a.shape.axis < 0 {
        (a.shape.axis + shape.len() as isize) as usize
    } else {
        a.shape.axis as usize
    };
    let (scale_shape, scales) = match a.shape.scale_layout {
        ScaleLayout::Plain => (AxisLayout::scale_shape(&shape, axis, layout.nblocks), q.scales),
        ScaleLayout::Swizzled128x4 => {
            check_swizzle(&shape, a.shape.axis)?;
            let s = mx::swizzle_128x4(&q.scales, shape[0], layout.nblocks);
            (vec![s.len()], s)
        }
    };
    save(&a.codes, TensorData::new(DType::U8, shape, q.codes)?)?;
    save(&a.scales, TensorData::new(DType::U8, scale_shape, scales)?)?;
    if let Some(st) = stats {
        outln!("{st}");
    }
    Ok(())
}

fn dequantize(a: DequantizeArgs) -> Result<()> {
    if a.dtype != "f32" && a.dtype != "f64" {
        return Err(CliError(format!("unknown --dtype '{}'; expected f32 or f64", a.dtype)));
    }
    let c = load(&a.codes, None)?;
    let s = load(&a.scales, None)?;
    let shape = c.shape().to_vec();
    let layout = AxisLayout::new(&shape, a.shape.axis, a.shape.block, a.shape.pad)?;
    let codes = c
        .as_bits8()
        .map_err(|_| CliError(format!("{}: codes must be uint8", a.codes.display())))?;
    let raw_scales = s
        .as_bits8()
        .map_err(|_| CliError(format!("{}: scales must be uint8", a.scales.display())))?;
    let scales = match a.shape.scale_layout {
        ScaleLayout::Plain => raw_scales.to_vec(),
        ScaleLayout::Swizzled128x4 => {
            check_swizzle(&shape, a.shape.axis)?;
            let want = mx::swizzled_len(shape[0], layout.nblocks);
            if raw_scales.len() != want {
                return Err(CliError(format!(
                    "{}: swizzled scales for {}x{} need {want} bytes, got {}",
                    a.scales.display(),
                    shape[0],
                    layout.nblocks,
                    raw_scales.len()
                )));
            }
            mx::unswizzle_128x4(raw_scales, shape[0], layout.nblocks)
        }
    };
    let el = a.format.element();
    if let Some((i, v)) = codes.iter().enumerate().find(|(_, &v)| v as u32 >= el.code_count()) {
        return Err(CliError(format!(
            "{}: element {i}: code {v:#x} is not a valid {el} code",
            a.codes.display()
        )));
    }
    match a.dtype.as_str() {
        "f32" => {
            let (v, inexact) = mx::dequantize(codes, &scales, &layout, a.format)?;
            save(&a.output, TensorData::from_slice(shape, &v)?)?;
            if inexact > 0 {
                write_stderr_line(&format!(
                    "mxbi: warning: {inexact} values are not exactly representable in f32 and were rounded to nearest-even; use --dtype f64 for exact values"
                ));
            }
            Ok(())
        }
        "f64" => {
            let v = mx::dequantize_f64(codes, &scales, &layout, a.format)?;
            save(&a.output, TensorData::from_slice(shape, &v)?)
        }
        d => Err(CliError(format!("unknown --dtype '{d}'; expected f32 or f64"))),
    }
}

fn formats(a: FormatsArgs) -> Result<()> {
    let Some(f) = a.format else {
        outln!(
            "{:<6} {:>5} {:>14} {:>5} {:>4} {:>4}",
            "format",
            "bits",
            "max",
            "emax",
            "inf",
            "nan"
        );
        for f in Format::ALL {
            outln!(
                "{:<6} {:>5} {:>14e} {:>5} {:>4} {:>4}",
                f.name(),
                f.bits(),
                f.max_value(),
                f.emax(),
                if f.has_inf() { "yes" } else { "no" },
                if f.has_nan() { "yes" } else { "no" }
            );
        }
        return Ok(());
    };
    let width = (f.bits() as usize).div_ceil(4);
    outln!("{:<8} {:<20} {:<26} f32 bits", "code", "bits", "value");
    for (c, v) in f.value_table() {
        let bits = format!("{:0w$b}", c, w = f.bits() as usize);
        let shown = if v.is_nan() {
            "NaN".to_string()
        } else {
            format!("{v:e}")
        };
        outln!(
            "0x{:0w$x}{:pad$} {:<20} {:<26} 0x{:08x}",
            c,
            "",
            bits,
            shown,
            f.decode_f32(c).to_bits(),
            w = width,
            pad = 6 - width
        );
    }
    Ok(())
}
