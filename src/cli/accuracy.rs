//! `mxbi accuracy`: an output judged against a golden and a benchmark by a
//! named standard (docs/ACCURACY.md). File handling and printing only.
//!
//! The golden is `--golden FILE`, or computed exactly from `--a`/`--b`
//! (with `--format`, `--a-scales`, `--b-scales` for MX inputs); the
//! benchmark is `--benchmark FILE`, or the output of `--subject` (e.g.
//! `model:ORDER`) on those inputs. Exit 0: the verdict passes (msprobe's
//! `warn` included); 1: it fails; 2: bad input or a case that cannot be
//! judged (one line on stderr).

use super::gemm::{load_operands, OperandArgs};
use super::subject_specs::parse_subject;
use super::{load, CliError, Outcome, Result};
use clap::Args;
use mxbi::accuracy::{golden, judge, judge_subject, CaseAccuracy, Golden, Standard};
use mxbi::bi::{CheckOptions, Rows};
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::io::{DType, TensorData};
use mxbi::mx::MxFormat;
use mxbi::order::{Order, OutFmt};
use mxbi::subject::{Model, Subject};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct AccuracyArgs {
    /// The output under test (f32, f64, f16 values; uint16 bf16/f16 bits or
    /// uint8 FP8 codes with --dtype).
    #[arg(long)]
    pub actual: PathBuf,
    /// The same-precision benchmark output (same shape).
    #[arg(long, conflicts_with = "subject")]
    pub benchmark: Option<PathBuf>,
    /// The high-precision golden (same shape; f64 or f32 values).
    #[arg(long, conflicts_with_all = ["a", "b"])]
    pub golden: Option<PathBuf>,
    /// Inputs: A [M, K] (the golden is their exact product).
    #[arg(long, requires = "b")]
    pub a: Option<PathBuf>,
    /// Inputs: B [K, N] (--b-layout kn) or [N, K] (nk).
    #[arg(long, requires = "a")]
    pub b: Option<PathBuf>,
    /// How B is stored: kn ([K, N]) or nk ([N, K], B transposed).
    #[arg(long, default_value = "kn")]
    pub b_layout: String,
    /// MX inputs: A and B are codes of this format, with scales.
    #[arg(long)]
    pub format: Option<MxFormat>,
    /// A scales [M, K/32] (E8M0, uint8), with --format.
    #[arg(long)]
    pub a_scales: Option<PathBuf>,
    /// B scales [K/32, N] (kn) or [N, K/32] (nk), with --format.
    #[arg(long)]
    pub b_scales: Option<PathBuf>,
    /// The benchmark as a subject run on --a/--b: model:ORDER or dispatch:FILE.
    #[arg(long, requires = "a")]
    pub subject: Option<String>,
    /// Output type: f32, f64, bf16, f16, e4m3, e5m2 (default: the actual file's).
    #[arg(long)]
    pub dtype: Option<String>,
    /// atk (cv_fused_double_benchmark), atk-strict, atk-l0/l1/l2, single,
    /// msprobe, msprobe-ulp, msprobe-binary, assert-close.
    #[arg(long, default_value = "atk")]
    pub standard: String,
    /// assert-close only: rtol instead of the dtype's default.
    #[arg(long)]
    pub rtol: Option<f64>,
    /// assert-close only: atol instead of the dtype's default.
    #[arg(long)]
    pub atol: Option<f64>,
    /// Print the whole report (every metric and ratio) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Values of an output file as f64, decoding uint16/uint8 codes of `dtype`.
fn values(t: &TensorData, path: &Path, dtype: DType) -> Result<Vec<f64>> {
    let codes = |f: mxbi::format::Format, c: Vec<u16>| -> Vec<f64> { c.into_iter().map(|c| f.decode_f64(c)).collect() };
    Ok(match (t.dtype(), dtype) {
        (DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2, _) => t.to_f64_vec(),
        (DType::U16, DType::BF16 | DType::F16) => codes(golden::element_format(dtype)?, t.as_bits16()?.into_owned()),
        (DType::U8, DType::F8E4M3 | DType::F8E5M2) => codes(
            golden::element_format(dtype)?,
            t.as_bits8()?.iter().map(|&c| c as u16).collect(),
        ),
        (d, _) => {
            return Err(CliError(format!(
                "{}: {} elements are not {} values (floats, or uint16 bf16/f16 bits, uint8 FP8 codes)",
                path.display(),
                d.name(),
                dtype.name()
            )))
        }
    })
}

fn parse_dtype(s: &str) -> Result<DType> {
    let d = DType::from_name(s).ok_or_else(|| CliError(format!("unknown --dtype '{s}'")))?;
    match d {
        DType::F32 | DType::F64 | DType::BF16 | DType::F16 | DType::F8E4M3 | DType::F8E5M2 => Ok(d),
        _ => Err(CliError(format!(
            "--dtype {s}: expected an output type: f32, f64, bf16, f16, e4m3, e5m2"
        ))),
    }
}

fn same_shape(what: &str, path: &Path, got: &[usize], want: &[usize]) -> Result<()> {
    if got != want {
        return Err(CliError(format!(
            "shape mismatch: {what} {} is {got:?}, the actual output is {want:?}",
            path.display()
        )));
    }
    Ok(())
}

pub fn run(a: AccuracyArgs) -> Result<Outcome> {
    let mut standard: Standard = a.standard.parse().map_err(CliError)?;
    if a.rtol.is_some() || a.atol.is_some() {
        let Standard::AssertClose { rtol, atol } = &mut standard else {
            return Err(CliError("--rtol/--atol apply to --standard assert-close only".into()));
        };
        *rtol = a.rtol;
        *atol = a.atol;
    }
    if a.a.is_none() && (a.subject.is_some() || a.format.is_some() || a.a_scales.is_some() || a.b_scales.is_some()) {
        return Err(CliError(
            "--subject, --format and --a-scales/--b-scales need the inputs --a and --b".into(),
        ));
    }
    if a.golden.is_none() && a.a.is_none() {
        return Err(CliError(
            "a golden is needed: --golden FILE, or --a/--b to compute it".into(),
        ));
    }
    let ta = load(&a.actual, None)?;
    let dtype = match &a.dtype {
        Some(s) => parse_dtype(s)?,
        None => parse_dtype(ta.dtype().name()).map_err(|_| {
            CliError(format!(
                "{}: {} values need --dtype (the output type)",
                a.actual.display(),
                ta.dtype().name()
            ))
        })?,
    };
    let shape = ta.shape().to_vec();
    let actual = values(&ta, &a.actual, dtype)?;
    drop(ta);
    let benchmark_file = match &a.benchmark {
        Some(p) => {
            let t = load(p, None)?;
            same_shape("the benchmark", p, t.shape(), &shape)?;
            Some(values(&t, p, dtype)?)
        }
        None => None,
    };
    let (gold, benchmark) = match (&a.golden, &a.a, &a.b) {
        (Some(p), _, _) => {
            let t = load(p, None)?;
            same_shape("the golden", p, t.shape(), &shape)?;
            if !matches!(t.dtype(), DType::F64 | DType::F32 | DType::F16 | DType::BF16) {
                return Err(CliError(format!(
                    "{}: the golden must hold float values, got {}",
                    p.display(),
                    t.dtype().name()
                )));
            }
            (Golden::given(t.to_f64_vec()), benchmark_file)
        }
        (None, Some(pa), Some(pb)) => {
            let ops = OperandArgs {
                a: pa.clone(),
                b: pb.clone(),
                b_layout: a.b_layout.clone(),
                format: a.format,
                a_scales: a.a_scales.clone(),
                b_scales: a.b_scales.clone(),
                order: String::new(),
            };
            let l = load_operands(&ops)?;
            let p = l.problem();
            if shape != [p.m, p.n] {
                return Err(CliError(format!(
                    "shape mismatch: the actual output {} is {shape:?}, A x B is [{}, {}]",
                    a.actual.display(),
                    p.m,
                    p.n
                )));
            }
            let g = golden::gemm(&p)?;
            let bench = match &a.subject {
                Some(spec) => {
                    let s = parse_subject(spec)?;
                    let out = s.subject.run(&p, None)?;
                    Some(out.into_iter().map(f64::from).collect())
                }
                None => benchmark_file,
            };
            (g, bench)
        }
        _ => unreachable!("clap requires --a and --b together"),
    };
    let report = judge(&standard, dtype, &actual, benchmark.as_deref(), &gold).map_err(CliError)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{}", report.text());
    }
    Ok(if report.passed() {
        Outcome::Held
    } else {
        Outcome::Failed
    })
}

/// A case's `standard.acc` as a standard (checked before the case runs).
pub(super) fn case_standard(case: &str, acc: &str) -> Result<Standard> {
    acc.parse()
        .map_err(|e: String| CliError(format!("{case}: standard.acc: {e}")))
}

/// The accuracy half of a case (docs/ACCURACY.md, "In a BI case"): the
/// subject's output on the case's first batch size M, the checker's batch
/// with the target row first (row ids 0..M of its generator: seed, K, N,
/// input type), judged by `standard`
/// against the exact golden and the CPU model's `fma` order with the
/// subject's output type (a model subject's `out=`; f32 otherwise).
pub(super) fn case_accuracy(
    acc: &str,
    standard: &Standard,
    spec: &str,
    subject: &dyn Subject,
    opts: &CheckOptions,
) -> Result<CaseAccuracy> {
    let out = match spec.strip_prefix("model:") {
        Some(o) => o.parse::<Order>()?.out,
        None => OutFmt::F32,
    };
    let (dtype, bench_order) = match out {
        OutFmt::F32 => (DType::F32, "fma"),
        OutFmt::Bf16 => (DType::BF16, "fma;out=bf16"),
        OutFmt::F16 => (DType::F16, "fma;out=f16"),
    };
    let m = *opts
        .ms
        .first()
        .ok_or_else(|| CliError("standard.acc: the case has no batch size".into()))?;
    let rows = Rows::plain(opts.seed, opts.k, opts.n, opts.input);
    let ids: Vec<u64> = (0..m as u64).collect();
    let a = rows.batch(&ids);
    let p = Problem {
        a: Matrix::F32(&a),
        b: Matrix::F32(&rows.b),
        m,
        n: opts.n,
        k: opts.k,
        b_layout: BLayout::Kn,
    };
    let bench = Model::new(bench_order.parse()?);
    let report =
        judge_subject(subject, &bench, &p, standard, dtype).map_err(|e| CliError(format!("standard.acc: {e}")))?;
    Ok(CaseAccuracy::new(acc, dtype, m, &bench, &report))
}
