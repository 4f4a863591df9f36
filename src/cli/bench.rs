//! `mxbi bench`: wall-clock throughput of the hot paths, with a plain memory
//! copy of the same bytes measured in the same run as the yardstick.
//!
//! Every figure is the median of `--reps` timed repetitions after
//! `--warmup` untimed ones (std::time::Instant). Each timed run of a case
//! follows a timed memcpy run, and the memcpy ratio is the median of the
//! per-pair ratios, so load that drifts during the run affects both sides. The input is a deterministic
//! array of f32 with a wide exponent spread, generated in-process. Only
//! library entry points are timed (`format::cast_f32_slice`, `mx::quantize`);
//! no numerics live here. See docs/PERFORMANCE.md and reference/bench/.

use super::{CliError, Result};
use crate::format::{self, CastPreset, CodesMut, Format};
use crate::mx::{self, AxisLayout, MxFormat, MxPreset};
use rayon::prelude::*;
use std::hint::black_box;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Number of f32 input elements (a multiple of 32).
    #[arg(long, default_value_t = 1 << 24)]
    pub elements: usize,
    /// Worker threads (default: rayon's default, one per logical CPU).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Timed repetitions per case (the median is reported).
    #[arg(long, default_value_t = 9)]
    pub reps: usize,
    /// Untimed warm-up repetitions per case.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Exponent range of the generated input: |x| in [2^-EXP_SPREAD, 2^(EXP_SPREAD+1)).
const EXP_SPREAD: i32 = 24;

/// Deterministic input: random sign, random 23-bit mantissa, exponent
/// uniform in [-24, 24] (49 binades, wider than any FP8 format), no
/// zeros/Inf/NaN. xorshift64, fixed seed; reference/bench/peers.py draws
/// from the same distribution with numpy.
pub fn bench_input(n: usize) -> Vec<f32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = state;
            let sign = ((u >> 63) as u32) << 31;
            let mant = (u >> 8) as u32 & 0x7F_FFFF;
            let e = ((u >> 32) % (2 * EXP_SPREAD as u64 + 1)) as i32 - EXP_SPREAD;
            f32::from_bits(sign | (((e + 127) as u32) << 23) | mant)
        })
        .collect()
}

#[derive(serde::Serialize, Debug)]
struct CaseResult {
    name: &'static str,
    what: &'static str,
    /// Bytes read + bytes written by the operation.
    bytes: usize,
    median_s: f64,
    min_s: f64,
    max_s: f64,
    melem_per_s: f64,
    gb_per_s: f64,
    /// Median over repetitions of (this repetition's time / the time of the
    /// memcpy run just before it): lower is better; the target is
    /// <= 2. Pairing each run with a memcpy run keeps the ratio honest when
    /// the machine's load drifts during the benchmark.
    time_vs_memcpy: f64,
    /// Median of the memcpy runs paired with this case's runs.
    memcpy_median_s: f64,
}

#[derive(serde::Serialize, Debug)]
struct Report {
    tool: &'static str,
    version: &'static str,
    elements: usize,
    threads: usize,
    reps: usize,
    warmup: usize,
    input: String,
    shape: Vec<usize>,
    results: Vec<CaseResult>,
}

/// Runs `f` `warmup` times untimed, then `reps` times timed, each timed run
/// right after a timed run of `base`; returns (times of `f`, times of
/// `base`), in run order, in seconds.
fn time_paired(
    warmup: usize,
    reps: usize,
    base: &mut dyn FnMut() -> Result<()>,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    for _ in 0..warmup {
        base()?;
        f()?;
    }
    let (mut t, mut tb) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for _ in 0..reps {
        let t0 = Instant::now();
        base()?;
        tb.push(t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        f()?;
        t.push(t0.elapsed().as_secs_f64());
    }
    Ok((t, tb))
}

fn sorted(mut t: Vec<f64>) -> Vec<f64> {
    t.sort_by(f64::total_cmp);
    t
}

fn median(t: &[f64]) -> f64 {
    let n = t.len();
    if n % 2 == 1 {
        t[n / 2]
    } else {
        (t[n / 2 - 1] + t[n / 2]) / 2.0
    }
}

/// Parallel copy in 64 KiB-element chunks on the current rayon pool (the
/// same pool and chunking granularity the library uses).
fn par_copy<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    const CHUNK: usize = 1 << 16;
    dst.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

fn measure(a: &BenchArgs, threads: usize) -> Result<Report> {
    let n = a.elements;
    let x = bench_input(n);
    let cols = if n.is_multiple_of(4096) { 4096 } else { 32 };
    let shape = vec![n / cols, cols];
    let layout = AxisLayout::new(&shape, -1, 32, false)?;
    let mut out = vec![0u8; n];
    // memcpy destinations, touched once so that no page faults are timed.
    let mut x_copy = vec![0f32; n];
    let out_src = vec![0x5Au8; n];

    type Case<'a> = (&'static str, &'static str, Box<dyn FnMut() -> Result<()> + 'a>);
    let e4m3 = Format::E4M3;
    let p_ml = CastPreset::MlDtypes.policy(e4m3);
    let p_nv = CastPreset::Nvidia.policy(e4m3);
    let q_ocp = MxPreset::Ocp.policy(MxFormat::Fp8E4M3);
    let q_nv = MxPreset::Nvidia.policy(MxFormat::Fp8E4M3);
    let (xr, lr) = (&x, &layout);
    let mut memcpy = || -> Result<()> {
        par_copy(&mut x_copy, xr);
        par_copy(&mut out, &out_src);
        black_box((&x_copy, &out));
        Ok(())
    };
    let cases: Vec<Case> = vec![
        (
            "cast_e4m3_ml_dtypes",
            "format::cast_f32_slice f32 -> e4m3, preset ml_dtypes",
            Box::new(|| {
                let mut o = vec![0u8; n];
                format::cast_f32_slice(xr, CodesMut::U8(&mut o), e4m3, &p_ml, 0)?;
                black_box(&o);
                Ok(())
            }),
        ),
        (
            "cast_e4m3_nvidia",
            "format::cast_f32_slice f32 -> e4m3, preset nvidia (satfinite)",
            Box::new(|| {
                let mut o = vec![0u8; n];
                format::cast_f32_slice(xr, CodesMut::U8(&mut o), e4m3, &p_nv, 0)?;
                black_box(&o);
                Ok(())
            }),
        ),
        (
            "mxfp8_e4m3_ocp_floor",
            "mx::quantize mxfp8-e4m3, block 32, last axis, preset ocp (floor)",
            Box::new(|| {
                black_box(mx::quantize(xr, lr, MxFormat::Fp8E4M3, &q_ocp)?);
                Ok(())
            }),
        ),
        (
            "mxfp8_e4m3_nvidia_rceil",
            "mx::quantize mxfp8-e4m3, block 32, last axis, preset nvidia (rceil)",
            Box::new(|| {
                black_box(mx::quantize(xr, lr, MxFormat::Fp8E4M3, &q_nv)?);
                Ok(())
            }),
        ),
    ];
    let row = |name, what, bytes: usize, t: &[f64], ratio: f64, memcpy_median_s: f64| {
        let med = median(t);
        CaseResult {
            name,
            what,
            bytes,
            median_s: med,
            min_s: t[0],
            max_s: t[t.len() - 1],
            melem_per_s: n as f64 / med / 1e6,
            gb_per_s: bytes as f64 / med / 1e9,
            time_vs_memcpy: ratio,
            memcpy_median_s,
        }
    };
    let mut rows = Vec::new();
    let mut all_memcpy = Vec::new();
    for (name, what, mut f) in cases {
        let (t, tb) = time_paired(a.warmup, a.reps, &mut memcpy, &mut *f)?;
        let ratio = median(&sorted(t.iter().zip(&tb).map(|(a, b)| a / b).collect()));
        let bytes = if name.starts_with("mxfp8") {
            // codes + one scale byte per block
            4 * n + n + n / 32
        } else {
            5 * n
        };
        let tb = sorted(tb);
        rows.push(row(name, what, bytes, &sorted(t), ratio, median(&tb)));
        all_memcpy.extend(tb);
    }
    let all_memcpy = sorted(all_memcpy);
    let m = median(&all_memcpy);
    let mut results = vec![row(
        "memcpy",
        "copy_from_slice of N f32 (4N bytes) + N u8 (N bytes), parallel; one run before each timed run of every case",
        5 * n,
        &all_memcpy,
        1.0,
        m,
    )];
    results.extend(rows);
    Ok(Report {
        tool: "mxbi",
        version: env!("CARGO_PKG_VERSION"),
        elements: n,
        threads,
        reps: a.reps,
        warmup: a.warmup,
        input: format!("xorshift64 f32: random sign and mantissa, exponent uniform in [-{EXP_SPREAD}, {EXP_SPREAD}]"),
        shape,
        results,
    })
}

pub fn run(a: BenchArgs) -> Result<()> {
    use crate::limits::{check_at_most, MAX_ELEMENTS, MAX_REPS, MAX_THREADS};
    if a.elements == 0 || !a.elements.is_multiple_of(32) {
        return Err(CliError(format!(
            "--elements must be a positive multiple of 32 (the MX block), got {}",
            a.elements
        )));
    }
    check_at_most("--elements", a.elements, MAX_ELEMENTS, "MAX_ELEMENTS").map_err(CliError)?;
    if a.reps == 0 {
        return Err(CliError("--reps must be at least 1".into()));
    }
    check_at_most("--reps", a.reps, MAX_REPS, "MAX_REPS").map_err(CliError)?;
    check_at_most("--warmup", a.warmup, MAX_REPS, "MAX_REPS").map_err(CliError)?;
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(t) = a.threads {
        if t == 0 {
            return Err(CliError("--threads must be at least 1".into()));
        }
        check_at_most("--threads", t, MAX_THREADS, "MAX_THREADS").map_err(CliError)?;
        b = b.num_threads(t);
    }
    let pool = b.build()?;
    let threads = pool.current_num_threads();
    let rep = pool.install(|| measure(&a, threads))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&rep)?);
        return Ok(());
    }
    outln!(
        "mxbi bench: {} f32 elements ({} MiB in), {} threads, median of {} reps after {} warm-up",
        rep.elements,
        (rep.elements * 4) >> 20,
        rep.threads,
        rep.reps,
        rep.warmup
    );
    outln!(
        "{:<26} {:>10} {:>10} {:>8} {:>10}",
        "case",
        "median ms",
        "Melem/s",
        "GB/s",
        "x memcpy"
    );
    for r in &rep.results {
        outln!(
            "{:<26} {:>10.3} {:>10.1} {:>8.2} {:>10.2}",
            r.name,
            r.median_s * 1e3,
            r.melem_per_s,
            r.gb_per_s,
            r.time_vs_memcpy
        );
    }
    Ok(())
}
