//! Criterion benches of the element-format paths:
//! * `cast_e4m3`: `cast_f32_slice` f32 -> e4m3.
//!   - `fast_path/{ml_dtypes,nvidia}`: the presets' nearest-even policies
//!     take the branchless FP8 encoder;
//!   - `table_path/cast_f32_slice/nearest-away`: the same entry point with
//!     a rounding the FP8 encoder does not cover, so it takes the 65536-entry
//!     table (cached per policy);
//!   - `table_path/cast_into_prebuilt_1thread`: the table loop alone;
//!   - `table_path/table_build`: building one table.
//! * `cast_bf16`: `cast_f32_slice` f32 -> bf16 (the exact scalar path);
//! * `encode_scalar`: `encode_f32` one value at a time, e4m3.
//!
//! `cargo bench --bench formats`. No timing is asserted anywhere; the
//! figures that matter are in docs/PERFORMANCE.md (`reference/bench/compare.sh`).

mod common;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mxbi::format::{cast_f32_slice, encode_f32, CastPreset, CastTable, CodesMut, Format, Rounding};

const N: usize = 1 << 20;

fn cast_e4m3(c: &mut Criterion) {
    let x = common::input(N);
    let mut out = vec![0u8; N];
    let mut g = c.benchmark_group("cast_e4m3");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    for preset in [CastPreset::MlDtypes, CastPreset::Nvidia] {
        let p = preset.policy(Format::E4M3);
        g.bench_with_input(BenchmarkId::new("fast_path", preset), &p, |b, p| {
            b.iter(|| {
                cast_f32_slice(black_box(&x), CodesMut::U8(&mut out), Format::E4M3, p, 0).unwrap();
                black_box(&out);
            })
        });
    }
    let mut p = CastPreset::MlDtypes.policy(Format::E4M3);
    p.rounding = Rounding::NearestAway;
    g.bench_with_input(
        BenchmarkId::new("table_path/cast_f32_slice", Rounding::NearestAway),
        &p,
        |b, p| {
            b.iter(|| {
                cast_f32_slice(black_box(&x), CodesMut::U8(&mut out), Format::E4M3, p, 0).unwrap();
                black_box(&out);
            })
        },
    );
    let p = CastPreset::MlDtypes.policy(Format::E4M3);
    let table = CastTable::build(Format::E4M3, &p).unwrap();
    g.bench_function("table_path/cast_into_prebuilt_1thread/ml_dtypes", |b| {
        b.iter(|| black_box(table.cast_into(black_box(&x), &mut out)))
    });
    g.bench_function("table_path/table_build/ml_dtypes", |b| {
        b.iter(|| black_box(CastTable::build(Format::E4M3, black_box(&p))))
    });
    g.finish();
}

fn cast_bf16(c: &mut Criterion) {
    let x = common::input(N);
    let mut out = vec![0u16; N];
    let mut g = c.benchmark_group("cast_bf16");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    for preset in [CastPreset::MlDtypes, CastPreset::Nvidia] {
        let p = preset.policy(Format::BF16);
        g.bench_with_input(BenchmarkId::new("cast_f32_slice", preset), &p, |b, p| {
            b.iter(|| {
                cast_f32_slice(black_box(&x), CodesMut::U16(&mut out), Format::BF16, p, 0).unwrap();
                black_box(&out);
            })
        });
    }
    g.finish();
}

fn encode_scalar(c: &mut Criterion) {
    const M: usize = 4096;
    let x = common::input(M);
    let mut g = c.benchmark_group("encode_scalar");
    g.throughput(Throughput::Elements(M as u64));
    for preset in [CastPreset::MlDtypes, CastPreset::Nvidia] {
        let p = preset.policy(Format::E4M3);
        g.bench_with_input(BenchmarkId::new("encode_f32_e4m3", preset), &p, |b, p| {
            b.iter(|| {
                let mut acc = 0u32;
                for (i, v) in x.iter().enumerate() {
                    acc = acc.wrapping_add(encode_f32(black_box(*v), Format::E4M3, p, i as u64).unwrap() as u32);
                }
                black_box(acc)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, cast_e4m3, cast_bf16, encode_scalar);
criterion_main!(benches);
