//! `mxbi bench`: wall-clock throughput of the hot paths.
//!
//! Only library entry points are timed (`format::cast_f32_slice`,
//! `mx::quantize_into`, `mx::quantize`, `gemm::gemm`); no numerics live
//! here. The input is a deterministic array of f32 with a wide exponent
//! spread, generated in-process.
//!
//! Two modes:
//! * the default prints a table: each case's median over `--reps` timed
//!   repetitions after `--warmup` untimed ones, each timed run right after a
//!   timed run of a plain memory copy of the same bytes (the yardstick), and
//!   the median of the per-pair ratios;
//! * `--serve` answers timing requests on stdin, one JSON line each on
//!   stdout, so that `reference/bench/paired.py` can time mxbi and a Python
//!   peer alternately in one run (docs/PERFORMANCE.md). Requests:
//!   `time CASE THREADS MIN_SECONDS MIN_CALLS` (back-to-back calls until both
//!   minimums are reached; answers the call count and the total seconds),
//!   `write-input PATH` (the input, little-endian f32), `write-output CASE
//!   PATH` (one call's output bytes: codes, then scales for MX), `quit`.

use super::{CliError, Result};
use mxbi::format::{self, CastPolicy, CastPreset, CodesMut, Format, Fp8Rne};
use mxbi::gemm::{self, BLayout, Matrix, Problem};
use mxbi::mx::{self, AxisLayout, MxFormat, MxPolicy, MxPreset};
use mxbi::order::Order;
use mxbi::rng::{bench_input, BENCH_EXP_SPREAD};
use rayon::prelude::*;
use std::collections::hash_map::{Entry, HashMap};
use std::hint::black_box;
use std::io::{BufRead, Write};
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
    /// Answer timing requests on stdin (used by reference/bench/paired.py).
    #[arg(long, conflicts_with_all = ["json", "threads"])]
    pub serve: bool,
}

/// GEMM sizes of the GEMM cases.
const GEMM_FMA: usize = 2048;
const GEMM_HOPPER: usize = 1024;
const ROW_ONLY: (usize, usize, usize) = (64, 512, 2048);

/// One timed case.
struct CaseInfo {
    name: &'static str,
    what: &'static str,
    /// Bytes read + bytes written, for GB/s (0 where it means nothing).
    bytes: fn(usize) -> usize,
    /// Floating-point operations per call (GEMMs), else 0.
    flop: f64,
}

const fn cube(s: usize) -> f64 {
    2.0 * (s * s * s) as f64
}

const CASES: &[CaseInfo] = &[
    CaseInfo {
        name: "memcpy",
        what:
            "copy_from_slice of N f32 (4N bytes) and N u8 (N bytes) into reused buffers, parallel 64 Ki-element chunks",
        bytes: |n| 2 * 5 * n,
        flop: 0.0,
    },
    CaseInfo {
        name: "cast_e4m3_ml_dtypes",
        what: "format::cast_f32_slice f32 -> e4m3, preset ml_dtypes, into a reused buffer",
        bytes: |n| 5 * n,
        flop: 0.0,
    },
    CaseInfo {
        name: "cast_e4m3_nvidia",
        what: "format::cast_f32_slice f32 -> e4m3, preset nvidia (satfinite), into a reused buffer",
        bytes: |n| 5 * n,
        flop: 0.0,
    },
    CaseInfo {
        name: "mxfp8_e4m3_ocp_floor",
        what: "mx::quantize_into mxfp8-e4m3, block 32, last axis, preset ocp (floor), into reused buffers",
        bytes: |n| 5 * n + n / 32,
        flop: 0.0,
    },
    CaseInfo {
        name: "mxfp8_e4m3_nvidia_rceil",
        what: "mx::quantize_into mxfp8-e4m3, block 32, last axis, preset nvidia (rceil), into reused buffers",
        bytes: |n| 5 * n + n / 32,
        flop: 0.0,
    },
    CaseInfo {
        name: "mxfp8_e4m3_ocp_floor_alloc",
        what: "mx::quantize (allocates its codes and scales on every call), preset ocp (floor)",
        bytes: |n| 5 * n + n / 32,
        flop: 0.0,
    },
    CaseInfo {
        name: "mxfp8_e4m3_nvidia_rceil_alloc",
        what: "mx::quantize (allocates its codes and scales on every call), preset nvidia (rceil)",
        bytes: |n| 5 * n + n / 32,
        flop: 0.0,
    },
    CaseInfo {
        name: "gemm_fma_2048",
        what: "gemm::gemm, order fma, f32, M = N = K = 2048, B given as [N, K] (preparation included)",
        bytes: |_| 0,
        flop: cube(GEMM_FMA),
    },
    CaseInfo {
        name: "gemm_hopper_bf16_1024",
        what: "gemm::gemm, order hopper-bf16, bf16 inputs, M = N = K = 1024, B given as [N, K]",
        bytes: |_| 0,
        flop: cube(GEMM_HOPPER),
    },
    CaseInfo {
        name: "gemm_row_only_fma",
        what: "gemm::gemm, order fma, one row (17) of M = 64, N = 512, K = 2048 (row-only batch-invariance check)",
        bytes: |_| 0,
        flop: 2.0 * (ROW_ONLY.1 * ROW_ONLY.2) as f64,
    },
];

/// The cases of the default table (those measured against memcpy).
const TABLE_CASES: &[&str] = &[
    "cast_e4m3_ml_dtypes",
    "cast_e4m3_nvidia",
    "mxfp8_e4m3_ocp_floor",
    "mxfp8_e4m3_nvidia_rceil",
    "mxfp8_e4m3_ocp_floor_alloc",
];

fn case_info(name: &str) -> Result<&'static CaseInfo> {
    CASES.iter().find(|c| c.name == name).ok_or_else(|| {
        let names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
        CliError(format!("bench: unknown case {name:?} (cases: {})", names.join(", ")))
    })
}

/// GEMM operands, built on first use.
struct GemmData {
    fma: Order,
    hopper: Order,
    a: Vec<f32>,
    bt: Vec<f32>,
    ah: Vec<f32>,
    bth: Vec<f32>,
    ar: Vec<f32>,
    btr: Vec<f32>,
}

impl GemmData {
    fn new() -> Result<GemmData> {
        let bf16 = |v: Vec<f32>| -> Vec<f32> {
            v.into_iter()
                .map(|x| f32::from_bits(x.to_bits() & 0xFFFF_0000))
                .collect()
        };
        let two = |m: usize, n: usize, k: usize| (bench_input(m * k), bench_input(k * n + 1)[1..].to_vec());
        let (a, bt) = two(GEMM_FMA, GEMM_FMA, GEMM_FMA);
        let (ah, bth) = two(GEMM_HOPPER, GEMM_HOPPER, GEMM_HOPPER);
        let (ar, btr) = two(ROW_ONLY.0, ROW_ONLY.1, ROW_ONLY.2);
        Ok(GemmData {
            fma: "fma".parse::<Order>()?,
            hopper: "hopper-bf16".parse::<Order>()?,
            a,
            bt,
            ah: bf16(ah),
            bth: bf16(bth),
            ar,
            btr,
        })
    }
}

fn problem<'a>(a: &'a [f32], bt: &'a [f32], m: usize, n: usize, k: usize) -> Problem<'a> {
    Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(bt),
        m,
        n,
        k,
        b_layout: BLayout::Nk,
    }
}

/// Inputs, reused output buffers and policies of every case.
struct Bench {
    n: usize,
    x: Vec<f32>,
    shape: Vec<usize>,
    layout: AxisLayout,
    x_copy: Vec<f32>,
    bytes_src: Vec<u8>,
    bytes_copy: Vec<u8>,
    cast_out: Vec<u8>,
    codes: Vec<u8>,
    scales: Vec<u8>,
    p_ml: CastPolicy,
    p_nv: CastPolicy,
    q_ocp: MxPolicy,
    q_nv: MxPolicy,
    gemm: Option<GemmData>,
}

/// Parallel copy in 64 Ki-element chunks on the current rayon pool (the
/// chunking granularity the cast uses).
fn par_copy<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    const CHUNK: usize = 1 << 16;
    dst.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

impl Bench {
    fn new(n: usize) -> Result<Bench> {
        let x = bench_input(n);
        let cols = if n.is_multiple_of(4096) { 4096 } else { 32 };
        let shape = vec![n / cols, cols];
        let layout = AxisLayout::new(&shape, -1, 32, false)?;
        let e4m3 = Format::E4M3;
        // Every output buffer is written once here, so that no timed call
        // takes a first-touch page fault on it.
        Ok(Bench {
            n,
            shape,
            x_copy: x.clone(),
            x,
            bytes_src: vec![0x5A; n],
            bytes_copy: vec![0xA5; n],
            cast_out: vec![1; n],
            codes: vec![1; n],
            scales: vec![1; layout.scale_count()],
            layout,
            p_ml: CastPreset::MlDtypes.policy(e4m3),
            p_nv: CastPreset::Nvidia.policy(e4m3),
            q_ocp: MxPreset::Ocp.policy(MxFormat::Fp8E4M3),
            q_nv: MxPreset::Nvidia.policy(MxFormat::Fp8E4M3),
            gemm: None,
        })
    }

    /// Builds what `case` reads and is not built yet (the GEMM operands), so
    /// that no timed call includes it.
    fn prepare(&mut self, case: &str) -> Result<()> {
        if case.starts_with("gemm_") && self.gemm.is_none() {
            self.gemm = Some(GemmData::new()?);
        }
        Ok(())
    }

    /// One call of `case` on the current rayon pool.
    fn call(&mut self, case: &str) -> Result<()> {
        let fmt = MxFormat::Fp8E4M3;
        match case {
            "memcpy" => {
                par_copy(&mut self.x_copy, &self.x);
                par_copy(&mut self.bytes_copy, &self.bytes_src);
                black_box((&self.x_copy, &self.bytes_copy));
            }
            "cast_e4m3_ml_dtypes" | "cast_e4m3_nvidia" => {
                let p = if case == "cast_e4m3_nvidia" {
                    &self.p_nv
                } else {
                    &self.p_ml
                };
                format::cast_f32_slice(&self.x, CodesMut::U8(&mut self.cast_out), Format::E4M3, p, 0)?;
                black_box(&self.cast_out);
            }
            "mxfp8_e4m3_ocp_floor" | "mxfp8_e4m3_nvidia_rceil" => {
                let p = if case == "mxfp8_e4m3_nvidia_rceil" {
                    &self.q_nv
                } else {
                    &self.q_ocp
                };
                mx::quantize_into(&self.x, &self.layout, fmt, p, &mut self.codes, &mut self.scales)?;
                black_box((&self.codes, &self.scales));
            }
            "mxfp8_e4m3_ocp_floor_alloc" | "mxfp8_e4m3_nvidia_rceil_alloc" => {
                let p = if case == "mxfp8_e4m3_nvidia_rceil_alloc" {
                    &self.q_nv
                } else {
                    &self.q_ocp
                };
                black_box(mx::quantize(&self.x, &self.layout, fmt, p)?);
            }
            "gemm_fma_2048" | "gemm_hopper_bf16_1024" | "gemm_row_only_fma" => {
                self.prepare(case)?;
                let g = self.gemm.as_ref().expect("built above");
                let out = match case {
                    "gemm_fma_2048" => {
                        let s = GEMM_FMA;
                        gemm::gemm(&g.fma, &problem(&g.a, &g.bt, s, s, s), None)?
                    }
                    "gemm_hopper_bf16_1024" => {
                        let s = GEMM_HOPPER;
                        gemm::gemm(&g.hopper, &problem(&g.ah, &g.bth, s, s, s), None)?
                    }
                    _ => {
                        let (m, n, k) = ROW_ONLY;
                        gemm::gemm(&g.fma, &problem(&g.ar, &g.btr, m, n, k), Some(&[17]))?
                    }
                };
                black_box(out);
            }
            _ => {
                case_info(case)?;
                unreachable!("every listed case has a branch above");
            }
        }
        Ok(())
    }

    /// The output bytes of one call of `case` (codes, then scales for MX).
    fn output(&mut self, case: &str) -> Result<Vec<u8>> {
        self.call(case)?;
        Ok(match case {
            "cast_e4m3_ml_dtypes" | "cast_e4m3_nvidia" => self.cast_out.clone(),
            "mxfp8_e4m3_ocp_floor" | "mxfp8_e4m3_nvidia_rceil" => {
                let mut v = self.codes.clone();
                v.extend_from_slice(&self.scales);
                v
            }
            _ => return Err(CliError(format!("bench: case {case:?} keeps no output to write"))),
        })
    }
}

fn pool(threads: Option<usize>) -> Result<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(t) = threads {
        if t == 0 {
            return Err(CliError("--threads must be at least 1".into()));
        }
        b = b.num_threads(t);
    }
    Ok(b.build()?)
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
    /// memcpy run just before it): lower is better.
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
    simd: String,
    reps: usize,
    warmup: usize,
    input: String,
    shape: Vec<usize>,
    results: Vec<CaseResult>,
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

fn timed(b: &mut Bench, case: &str) -> Result<f64> {
    let t0 = Instant::now();
    b.call(case)?;
    Ok(t0.elapsed().as_secs_f64())
}

fn input_description() -> String {
    format!("xorshift64 f32: random sign and mantissa, exponent uniform in [-{BENCH_EXP_SPREAD}, {BENCH_EXP_SPREAD}]")
}

/// The default table: every case paired run by run with memcpy.
fn measure(a: &BenchArgs, threads: usize) -> Result<Report> {
    let mut b = Bench::new(a.elements)?;
    let n = b.n;
    let mut rows = Vec::new();
    let mut all_memcpy = Vec::new();
    let row = |info: &CaseInfo, t: &[f64], ratio: f64, memcpy_median_s: f64| {
        let med = median(t);
        let bytes = (info.bytes)(n);
        CaseResult {
            name: info.name,
            what: info.what,
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
    for &name in TABLE_CASES {
        for _ in 0..a.warmup {
            b.call("memcpy")?;
            b.call(name)?;
        }
        let (mut t, mut tb) = (Vec::new(), Vec::new());
        for _ in 0..a.reps {
            tb.push(timed(&mut b, "memcpy")?);
            t.push(timed(&mut b, name)?);
        }
        let ratio = median(&sorted(t.iter().zip(&tb).map(|(a, b)| a / b).collect()));
        let tb = sorted(tb);
        rows.push(row(case_info(name)?, &sorted(t), ratio, median(&tb)));
        all_memcpy.extend(tb);
    }
    let all_memcpy = sorted(all_memcpy);
    let m = median(&all_memcpy);
    let mut results = vec![row(case_info("memcpy")?, &all_memcpy, 1.0, m)];
    results.extend(rows);
    Ok(Report {
        tool: "mxbi",
        version: env!("CARGO_PKG_VERSION"),
        elements: n,
        threads,
        simd: format!("{:?}", Fp8Rne::simd()),
        reps: a.reps,
        warmup: a.warmup,
        input: input_description(),
        shape: b.shape.clone(),
        results,
    })
}

fn write_file(path: &str, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|e| CliError(format!("bench: cannot write {path}: {e}")))
}

/// `--serve`: answer requests on stdin until `quit` or end of input.
fn serve(a: &BenchArgs) -> Result<()> {
    let mut b = Bench::new(a.elements)?;
    let mut pools: HashMap<usize, rayon::ThreadPool> = HashMap::new();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let cases: Vec<serde_json::Value> = CASES
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": c.name, "what": c.what, "bytes": (c.bytes)(b.n), "flop": c.flop,
            })
        })
        .collect();
    let hello = serde_json::json!({
        "tool": "mxbi",
        "version": env!("CARGO_PKG_VERSION"),
        "elements": b.n,
        "shape": b.shape,
        "input": input_description(),
        "simd": format!("{:?}", Fp8Rne::simd()),
        "default_threads": rayon::current_num_threads(),
        "cases": cases,
    });
    writeln!(out, "{hello}")?;
    out.flush()?;
    let bad = |line: &str| {
        CliError(format!(
            "bench --serve: cannot read request {line:?} (expected `time CASE THREADS MIN_SECONDS MIN_CALLS`, \
             `write-input PATH`, `write-output CASE PATH` or `quit`)"
        ))
    };
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            [] => continue,
            ["quit"] => break,
            ["time", case, threads, min_s, min_calls] => {
                case_info(case)?;
                let threads: usize = threads.parse().map_err(|_| bad(&line))?;
                let min_s: f64 = min_s.parse().map_err(|_| bad(&line))?;
                let min_calls: u64 = min_calls.parse().map_err(|_| bad(&line))?;
                if threads == 0 || threads > 1024 || !(0.0..=600.0).contains(&min_s) || min_calls > 1_000_000 {
                    return Err(bad(&line));
                }
                let pool = match pools.entry(threads) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(v) => v.insert(pool(Some(threads))?),
                };
                b.prepare(case)?;
                let (calls, seconds) = pool.install(|| -> Result<(u64, f64)> {
                    let t0 = Instant::now();
                    let mut calls = 0u64;
                    loop {
                        b.call(case)?;
                        calls += 1;
                        let s = t0.elapsed().as_secs_f64();
                        if calls >= min_calls.max(1) && s >= min_s {
                            return Ok((calls, s));
                        }
                    }
                })?;
                serde_json::json!({"case": case, "threads": threads, "calls": calls, "seconds": seconds})
            }
            ["write-input", path] => {
                let bytes: Vec<u8> = b.x.iter().flat_map(|v| v.to_le_bytes()).collect();
                write_file(path, &bytes)?;
                serde_json::json!({"wrote": path, "bytes": bytes.len()})
            }
            ["write-output", case, path] => {
                case_info(case)?;
                let bytes = b.output(case)?;
                write_file(path, &bytes)?;
                serde_json::json!({"wrote": path, "bytes": bytes.len()})
            }
            _ => return Err(bad(&line)),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}

pub fn run(a: BenchArgs) -> Result<()> {
    if a.elements == 0 || !a.elements.is_multiple_of(32) {
        return Err(CliError(format!(
            "--elements must be a positive multiple of 32 (the MX block) up to 2^30, got {}",
            a.elements
        )));
    }
    use mxbi::limits::{check_at_most, MAX_ELEMENTS, MAX_REPS, MAX_THREADS};
    check_at_most("--elements", a.elements, MAX_ELEMENTS, "MAX_ELEMENTS").map_err(CliError)?;
    if let Some(t) = a.threads {
        check_at_most("--threads", t, MAX_THREADS, "MAX_THREADS").map_err(CliError)?;
    }
    if a.serve {
        return serve(&a);
    }
    if a.reps == 0 {
        return Err(CliError("--reps must be at least 1".into()));
    }
    check_at_most("--reps", a.reps, MAX_REPS, "MAX_REPS").map_err(CliError)?;
    check_at_most("--warmup", a.warmup, MAX_REPS, "MAX_REPS").map_err(CliError)?;
    let pool = pool(a.threads)?;
    let threads = pool.current_num_threads();
    let rep = pool.install(|| measure(&a, threads))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&rep)?);
        return Ok(());
    }
    outln!(
        "mxbi bench: {} f32 elements ({} MiB in), {} threads, {:?} loops, median of {} reps after {} warm-up",
        rep.elements,
        (rep.elements * 4) >> 20,
        rep.threads,
        Fp8Rne::simd(),
        rep.reps,
        rep.warmup
    );
    outln!(
        "{:<30} {:>10} {:>10} {:>8} {:>10}",
        "case",
        "median ms",
        "Melem/s",
        "GB/s",
        "x memcpy"
    );
    for r in &rep.results {
        outln!(
            "{:<30} {:>10.3} {:>10.1} {:>8.2} {:>10.2}",
            r.name,
            r.median_s * 1e3,
            r.melem_per_s,
            r.gb_per_s,
            r.time_vs_memcpy
        );
    }
    outln!("(reference/bench/compare.sh times mxbi against its peers, paired; see docs/PERFORMANCE.md)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed case has a branch (no `unreachable!`), unknown names are
    /// refused, and the written outputs are the library's bytes.
    #[test]
    fn every_case_runs_and_outputs_are_the_library_bytes() {
        let mut b = Bench::new(8192).unwrap();
        for c in CASES {
            b.call(c.name).unwrap_or_else(|e| panic!("{}: {}", c.name, e.0));
        }
        assert!(b.call("no_such_case").is_err());
        assert!(b.output("memcpy").is_err());
        let fmt = MxFormat::Fp8E4M3;
        let q = mx::quantize(&b.x, &b.layout, fmt, &MxPreset::Nvidia.policy(fmt)).unwrap();
        let mut want = q.codes;
        want.extend_from_slice(&q.scales);
        assert_eq!(b.output("mxfp8_e4m3_nvidia_rceil").unwrap(), want);
        let p = CastPreset::MlDtypes.policy(Format::E4M3);
        let want: Vec<u8> =
            b.x.iter()
                .map(|&v| format::encode_f32(v, Format::E4M3, &p, 0).unwrap() as u8)
                .collect();
        assert_eq!(b.output("cast_e4m3_ml_dtypes").unwrap(), want);
    }
}
