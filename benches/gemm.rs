//! Criterion benches of the fast GEMM kernels (`gemm::fast`), on prepared
//! inputs (A `[M, K]`, Bᵀ `[N, K]`; `gemm::prepare`'s copy and transpose are
//! not timed):
//! * `gemm_fma`: the `fma` order at M = N = K = 2048 (and 512), all rows;
//! * `gemm_hopper_bf16`: `hopper-bf16` (mma k=16, F=25) on bf16 inputs at
//!   M = N = K = 256, 1024 and 2048;
//! * `gemm_row_only`: batch-invariance row check, one row of an `fma` GEMM
//!   with K = 2048, N = 512 (M = 64), on prepared inputs and through
//!   `gemm::gemm` (preparation included).
//!
//! Throughput is in FLOP (2 per product). `cargo bench --bench gemm`. No
//! timing is asserted anywhere; the figures that matter are in
//! docs/PERFORMANCE.md. The numpy peer (`numpy_matmul_2048`) is timed
//! by `reference/bench/compare.sh`.

mod common;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mxbi::gemm::{fast, gemm, prepare, BLayout, Matrix, Prepared, Problem};
use mxbi::order::Order;
use std::time::Duration;

/// The prepared operands (borrowed by `Prepared`, so kept for the whole run).
fn prepared(order: &Order, m: usize, n: usize, k: usize, bf16: bool) -> Prepared<'static> {
    let round = |v: Vec<f32>| -> Vec<f32> {
        if bf16 {
            v.into_iter()
                .map(|x| f32::from_bits(x.to_bits() & 0xFFFF_0000))
                .collect()
        } else {
            v
        }
    };
    let a: &'static [f32] = Box::leak(round(common::input(m * k)).into_boxed_slice());
    let b: &'static [f32] = Box::leak(round(common::input(k * n + 1)[1..].to_vec()).into_boxed_slice());
    let p = Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m,
        n,
        k,
        b_layout: BLayout::Nk,
    };
    prepare(order, &p).unwrap()
}

fn square(c: &mut Criterion, group: &str, spec: &str, sizes: &[usize], bf16: bool) {
    let order: Order = spec.parse().unwrap();
    let mut g = c.benchmark_group(group);
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    for &s in sizes {
        let prep = prepared(&order, s, s, s, bf16);
        let rows: Vec<usize> = (0..s).collect();
        assert!(fast::gemm(&order, &prep, &rows).is_some());
        g.throughput(Throughput::Elements(2 * (s * s * s) as u64));
        g.bench_with_input(BenchmarkId::from_parameter(s), &s, |b, _| {
            b.iter(|| black_box(fast::gemm(&order, black_box(&prep), &rows)))
        });
    }
    g.finish();
}

fn gemm_fma(c: &mut Criterion) {
    square(c, "gemm_fma", "fma", &[512, 2048], false);
}

fn gemm_hopper_bf16(c: &mut Criterion) {
    square(c, "gemm_hopper_bf16", "hopper-bf16", &[256, 1024, 2048], true);
}

fn gemm_row_only(c: &mut Criterion) {
    let order: Order = "fma".parse().unwrap();
    let (m, n, k) = (64, 512, 2048);
    let prep = prepared(&order, m, n, k, false);
    let mut g = c.benchmark_group("gemm_row_only");
    g.sample_size(50);
    g.throughput(Throughput::Elements(2 * (n * k) as u64));
    g.bench_function("fma_k2048_n512", |b| {
        b.iter(|| black_box(fast::gemm(&order, black_box(&prep), &[17])))
    });
    // the same through the public entry point, `prepare` (copies of A and B,
    // B given as [N, K]) included
    let a = common::input(m * k);
    let bt = common::input(k * n + 1)[1..].to_vec();
    let p = Problem {
        a: Matrix::F32(&a),
        b: Matrix::F32(&bt),
        m,
        n,
        k,
        b_layout: BLayout::Nk,
    };
    g.bench_function("fma_k2048_n512_with_prepare", |b| {
        b.iter(|| black_box(gemm(&order, black_box(&p), Some(&[17]))))
    });
    g.finish();
}

criterion_group!(benches, gemm_fma, gemm_hopper_bf16, gemm_row_only);
criterion_main!(benches);
