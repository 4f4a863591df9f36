//! Criterion benches of MX block quantization: MXFP8-e4m3, block 32 along
//! the last axis, OCP (FLOOR) and NVIDIA (RCEIL) presets, allocating
//! (`quantize`) and into reused buffers (`quantize_into`), and exact
//! dequantization (f32 and f64).
//!
//! `cargo bench --bench mx`. No timing is asserted anywhere; the figures that
//! matter are in docs/PERFORMANCE.md (`reference/bench/compare.sh`).

mod common;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mxbi::mx::{dequantize, dequantize_f64, quantize, quantize_into, AxisLayout, MxFormat, MxPreset};

const ROWS: usize = 256;
const COLS: usize = 4096;
const N: usize = ROWS * COLS;

fn quantize_mxfp8(c: &mut Criterion) {
    let x = common::input(N);
    let layout = AxisLayout::new(&[ROWS, COLS], -1, 32, false).unwrap();
    let mut g = c.benchmark_group("quantize_mxfp8_e4m3");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    for (label, preset) in [("floor/ocp", MxPreset::Ocp), ("rceil/nvidia", MxPreset::Nvidia)] {
        let p = preset.policy(MxFormat::Fp8E4M3);
        g.bench_with_input(BenchmarkId::from_parameter(label), &p, |b, p| {
            b.iter(|| black_box(quantize(black_box(&x), &layout, MxFormat::Fp8E4M3, p).unwrap()))
        });
        // the same into reused buffers (no allocation, no first-touch faults)
        let (mut codes, mut scales) = (vec![1u8; N], vec![1u8; layout.scale_count()]);
        g.bench_with_input(BenchmarkId::new("into", label), &p, |b, p| {
            b.iter(|| {
                quantize_into(black_box(&x), &layout, MxFormat::Fp8E4M3, p, &mut codes, &mut scales).unwrap();
                black_box((&codes, &scales));
            })
        });
    }
    g.finish();
}

fn dequantize_mxfp8(c: &mut Criterion) {
    let x = common::input(N);
    let layout = AxisLayout::new(&[ROWS, COLS], -1, 32, false).unwrap();
    let q = quantize(&x, &layout, MxFormat::Fp8E4M3, &MxPreset::Ocp.policy(MxFormat::Fp8E4M3)).unwrap();
    let mut g = c.benchmark_group("dequantize_mxfp8_e4m3");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    g.bench_function("f32", |b| {
        b.iter(|| black_box(dequantize(black_box(&q.codes), &q.scales, &layout, MxFormat::Fp8E4M3).unwrap()))
    });
    g.bench_function("f64", |b| {
        b.iter(|| black_box(dequantize_f64(black_box(&q.codes), &q.scales, &layout, MxFormat::Fp8E4M3).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, quantize_mxfp8, dequantize_mxfp8);
criterion_main!(benches);
