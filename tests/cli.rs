//! The `mxbi` command line: the contract spellings work, outputs equal the
//! library, results do not depend on the thread count, and bad input gives
//! exit code 2 with one clear line (never a panic).

mod common;

use mxbi::format::{encode_f32, CastPreset, Format};
use mxbi::gemm::{gemm_generic, BLayout, Problem};
use mxbi::io::{self, DType, TensorData};
use mxbi::mx::{self, AxisLayout, MxFormat, MxPreset};
use ndarray::{Array2, ArrayView2, Axis, Ix2};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mxbi"))
}

fn tmp(name: &str) -> PathBuf {
    common::scratch("cli", name)
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn run_threads(args: &[&str], threads: usize) -> Output {
    bin()
        .args(args)
        .env("RAYON_NUM_THREADS", threads.to_string())
        .output()
        .unwrap()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "stderr: {}", String::from_utf8_lossy(&o.stderr));
}

/// Bad input: exit code 2, nothing on stdout, and exactly one line on
/// stderr, `mxbi: error: ...` mentioning `needle`; never a panic or abort.
fn fails_cleanly(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(out.is_empty(), "expected nothing on stdout, got: {out}");
    assert!(
        err.ends_with('\n') && err.lines().count() == 1,
        "expected exactly one line on stderr, got {} lines: {err}",
        err.lines().count()
    );
    assert!(err.starts_with("mxbi: error: "), "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
}

fn sample(n: usize) -> Vec<f32> {
    let mut s = 0x1234_5678_9ABC_DEF1u64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let e = (s >> 40) % 40;
            f32::from_bits(((s as u32) & 0x807F_FFFF) | (((e as u32) + 107) << 23))
        })
        .collect()
}

fn write_f32(p: &Path, shape: &[usize], v: &[f32]) {
    io::write_tensor(p, "x", &TensorData::from_slice(shape.to_vec(), v).unwrap()).unwrap();
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn cast_equals_library_for_every_preset() {
    let x = sample(4096);
    let inp = tmp("cast_in.npy");
    write_f32(&inp, &[64, 64], &x);
    for (fmt, preset) in [
        ("e4m3", "ml_dtypes"),
        ("e5m2", "nvidia"),
        ("e8m0", "torch"),
        ("e2m1", "nvidia"),
    ] {
        let out = tmp(&format!("cast_{fmt}_{preset}.npy"));
        ok(&run(&["cast", "--to", fmt, "--preset", preset, s(&inp), s(&out)]));
        let t = io::load_tensor(&out, None).unwrap();
        assert_eq!(t.dtype(), DType::U8);
        assert_eq!(t.shape(), &[64, 64]);
        let f: Format = fmt.parse().unwrap();
        let p = preset.parse::<CastPreset>().unwrap().policy(f);
        for (i, (&c, &v)) in t.as_u8().unwrap().iter().zip(&x).enumerate() {
            assert_eq!(
                c as u16,
                encode_f32(v, f, &p, i as u64).unwrap(),
                "{fmt} {preset} {v:e}"
            );
        }
    }
    // each ml_dtypes release by its spelling: they part on the f32
    // subnormals in (2^-127, 1.5 * 2^-127)
    let sub: Vec<f32> = [0x0040_0001u32, 0x005F_FFFF, 0x0060_0000, 0x3F80_0000]
        .iter()
        .map(|&b| f32::from_bits(b))
        .collect();
    let inp = tmp("cast_sub.npy");
    write_f32(&inp, &[4], &sub);
    for (preset, want) in [
        ("ml_dtypes", [0x00, 0x00, 0x01, 0x7F]),
        ("ml_dtypes@0.7", [0x00, 0x00, 0x01, 0x7F]),
        ("ml_dtypes@0.6", [0x01, 0x01, 0x01, 0x7F]),
    ] {
        let out = tmp("cast_sub_e8m0.npy");
        ok(&run(&["cast", "--to", "e8m0", "--preset", preset, s(&inp), s(&out)]));
        assert_eq!(io::load_tensor(&out, None).unwrap().as_u8().unwrap(), &want, "{preset}");
    }
    // 16-bit formats write uint16
    let out = tmp("cast_bf16.npy");
    ok(&run(&["cast", "--to", "bf16", s(&inp), s(&out)]));
    assert_eq!(io::load_tensor(&out, None).unwrap().dtype(), DType::U16);
}

#[test]
fn cast_from_f64_and_decode_round_trip() {
    let x: Vec<f64> = (0..256)
        .map(|c| Format::E4M3.decode_f64(c))
        .filter(|v| !v.is_nan())
        .collect();
    let inp = tmp("f64_in.npy");
    io::write_tensor(&inp, "x", &TensorData::from_slice(vec![x.len()], &x).unwrap()).unwrap();
    let codes = tmp("f64_codes.npy");
    let back = tmp("f64_back.npy");
    ok(&run(&[
        "cast",
        "--to",
        "e4m3",
        "--preset",
        "gfloat",
        s(&inp),
        s(&codes),
    ]));
    ok(&run(&["decode", "--from", "e4m3", s(&codes), s(&back)]));
    let b = io::load_tensor(&back, None).unwrap().as_f32().unwrap().into_owned();
    for (v, w) in x.iter().zip(&b) {
        assert_eq!(*v, *w as f64);
        assert_eq!(v.is_sign_negative(), w.is_sign_negative());
    }
}

#[test]
fn stochastic_cast_is_seeded_and_thread_count_independent() {
    let x = sample(300_000);
    let inp = tmp("sr_in.npy");
    write_f32(&inp, &[x.len()], &x);
    let mut outs = Vec::new();
    for (threads, seed) in [(1, "7"), (2, "7"), (2, "8")] {
        let out = tmp(&format!("sr_{threads}_{seed}.npy"));
        let args = [
            "cast",
            "--to",
            "e4m3",
            "--round",
            "stochastic",
            "--seed",
            seed,
            "--sr-bits",
            "8",
        ];
        ok(&run_threads(&[&args[..], &[s(&inp), s(&out)]].concat(), threads));
        outs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(outs[0], outs[1], "thread count changed stochastic results");
    assert_ne!(outs[1], outs[2], "the seed had no effect");
}

#[test]
fn quantize_dequantize_round_trip_and_threads() {
    let x = sample(128 * 96);
    let inp = tmp("q_in.npy");
    write_f32(&inp, &[128, 96], &x);
    let layout = AxisLayout::new(&[128, 96], -1, 32, false).unwrap();
    for preset in ["ocp", "torchao", "nvidia", "microxcaling"] {
        let (c1, s1, c2, s2) = (tmp("q_c1.npy"), tmp("q_s1.npy"), tmp("q_c2.npy"), tmp("q_s2.npy"));
        let args = [
            "quantize",
            "--format",
            "mxfp8-e4m3",
            "--preset",
            preset,
            "--block",
            "32",
            "--axis",
            "-1",
            s(&inp),
        ];
        ok(&run_threads(
            &[&args[..], &["--codes", s(&c1), "--scales", s(&s1)]].concat(),
            1,
        ));
        ok(&run_threads(
            &[&args[..], &["--codes", s(&c2), "--scales", s(&s2)]].concat(),
            2,
        ));
        assert_eq!(std::fs::read(&c1).unwrap(), std::fs::read(&c2).unwrap());
        assert_eq!(std::fs::read(&s1).unwrap(), std::fs::read(&s2).unwrap());
        let sc = io::load_tensor(&s1, None).unwrap();
        assert_eq!(sc.shape(), &[128, 3]);
        let q = mx::quantize(
            &x,
            &layout,
            MxFormat::Fp8E4M3,
            &preset.parse::<MxPreset>().unwrap().policy(MxFormat::Fp8E4M3),
        )
        .unwrap();
        assert_eq!(io::load_tensor(&c1, None).unwrap().as_u8().unwrap(), &q.codes[..]);
        assert_eq!(sc.as_u8().unwrap(), &q.scales[..]);
        let y = tmp("q_y.npy");
        ok(&run(&[
            "dequantize",
            "--format",
            "mxfp8-e4m3",
            "--codes",
            s(&c1),
            "--scales",
            s(&s1),
            s(&y),
        ]));
        let (want, _) = mx::dequantize(&q.codes, &q.scales, &layout, MxFormat::Fp8E4M3).unwrap();
        let got = io::load_tensor(&y, None).unwrap().as_f32().unwrap().into_owned();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
}

#[test]
fn quantize_other_axis_and_swizzled_scales() {
    let x = sample(64 * 130);
    let inp = tmp("ax_in.npy");
    write_f32(&inp, &[64, 130], &x);
    let (c, sc) = (tmp("ax_c.npy"), tmp("ax_s.npy"));
    ok(&run(&[
        "quantize",
        "--format",
        "mxfp6-e2m3",
        "--axis",
        "0",
        s(&inp),
        "--codes",
        s(&c),
        "--scales",
        s(&sc),
    ]));
    assert_eq!(io::load_tensor(&sc, None).unwrap().shape(), &[2, 130]);
    // swizzled: rows 130 -> padded 256, cols 4 -> 512 * 2 bytes
    let inp2 = tmp("sw_in.npy");
    write_f32(&inp2, &[130, 128], &sample(130 * 128));
    let (c2, s2, y2) = (tmp("sw_c.npy"), tmp("sw_s.npy"), tmp("sw_y.npy"));
    let q = [
        "quantize",
        "--format",
        "mxfp8-e4m3",
        "--scale-layout",
        "swizzled-128x4",
        s(&inp2),
    ];
    ok(&run(&[&q[..], &["--codes", s(&c2), "--scales", s(&s2)]].concat()));
    assert_eq!(io::load_tensor(&s2, None).unwrap().shape(), &[1024]);
    let d = [
        "dequantize",
        "--format",
        "mxfp8-e4m3",
        "--scale-layout",
        "swizzled-128x4",
    ];
    ok(&run(
        &[&d[..], &["--codes", s(&c2), "--scales", s(&s2), s(&y2)]].concat()
    ));
}

#[test]
fn demo_mx_table_and_formats_run() {
    // the demo is the checker's: verdict grids, the summary, and every
    // subject behaving as its construction predicts (exit 0)
    let o = run(&["demo"]);
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "== dispatch:builtin",
        "first failure: batch/m=17/",
        // the explainer names, from the bytes alone, the orders the table picks
        "at M = 1 the row is fma, at M = 17 it is fma;split=4",
        "fix: choose the split from (K, N) only",
        "== op:agmm-v2-fixed",
        "== op:agmm-v2-prefix",
        "-- as expected",
        "every subject behaved as its construction predicts: yes",
    ] {
        assert!(out.contains(needle), "{needle} missing from demo output:\n{out}");
    }
    assert!(!out.contains("NOT as expected"), "{out}");
    let summary = out.lines().find(|l| l.starts_with("summary: ")).unwrap();
    assert!(
        summary.contains(" BI_FAIL") && !summary.contains(" 0 BI_FAIL"),
        "{summary}"
    );
    let o = run(&["mx-table"]);
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in ["mxfp8-e4m3", "microxcaling", "rceil", "log2 hazard"] {
        assert!(out.contains(needle), "{needle} missing from mx-table output");
    }
    let o = run(&["formats", "e2m1"]);
    ok(&o);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 17);
    ok(&run(&["formats"]));
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let garbage = tmp("garbage.npy");
    std::fs::write(&garbage, b"\x93NUMPY\x01\x00\xff\xffnot a header at all").unwrap();
    let out = tmp("never.npy");
    fails_cleanly(&run(&["cast", "--to", "e4m3", s(&garbage), s(&out)]), "garbage.npy");

    // truncated: a valid header promising more data than present
    let good = tmp("good.npy");
    write_f32(&good, &[1000], &sample(1000));
    let bytes = std::fs::read(&good).unwrap();
    let trunc = tmp("trunc.npy");
    std::fs::write(&trunc, &bytes[..bytes.len() - 10]).unwrap();
    fails_cleanly(&run(&["cast", "--to", "e4m3", s(&trunc), s(&out)]), "truncated");

    // unsupported input dtype for cast
    let ints = tmp("ints.npy");
    io::write_tensor(&ints, "x", &TensorData::from_slice(vec![4], &[1i32, 2, 3, 4]).unwrap()).unwrap();
    fails_cleanly(&run(&["cast", "--to", "e4m3", s(&ints), s(&out)]), "f32 or f64");

    // axis length not a multiple of the block
    let odd = tmp("odd.npy");
    write_f32(&odd, &[4, 30], &sample(120));
    let q = [
        "quantize",
        "--format",
        "mxfp8-e4m3",
        s(&odd),
        "--codes",
        s(&out),
        "--scales",
        s(&out),
    ];
    fails_cleanly(&run(&q), "not a multiple");
    ok(&run(&[&q[..], &["--pad"]].concat()));

    // unknown names
    fails_cleanly(&run(&["cast", "--to", "e9m9", s(&good), s(&out)]), "e9m9");
    fails_cleanly(
        &run(&[
            "quantize",
            "--format",
            "mxfp7",
            s(&good),
            "--codes",
            "a",
            "--scales",
            "b",
        ]),
        "mxfp7",
    );
    fails_cleanly(
        &run(&["cast", "--to", "e4m3", "--preset", "cublas", s(&good), s(&out)]),
        "cublas",
    );

    // NaN that the format cannot hold under gfloat's policy
    let nan = tmp("nan.npy");
    write_f32(&nan, &[3], &[1.0, f32::NAN, 2.0]);
    fails_cleanly(
        &run(&["cast", "--to", "e2m1", "--preset", "gfloat", s(&nan), s(&out)]),
        "element 1",
    );
    // overflow where the format has neither Inf nor NaN
    let big = tmp("big.npy");
    write_f32(&big, &[2], &[1.0, 100.0]);
    fails_cleanly(
        &run(&["cast", "--to", "e2m1", "--overflow", "nonfinite", s(&big), s(&out)]),
        "overflows",
    );

    // dequantize with scales of the wrong shape
    let (c, sc) = (tmp("dq_c.npy"), tmp("dq_s.npy"));
    io::write_tensor(&c, "c", &TensorData::new(DType::U8, vec![2, 64], vec![0; 128]).unwrap()).unwrap();
    io::write_tensor(&sc, "s", &TensorData::new(DType::U8, vec![2, 3], vec![127; 6]).unwrap()).unwrap();
    fails_cleanly(
        &run(&[
            "dequantize",
            "--format",
            "mxfp8-e4m3",
            "--codes",
            s(&c),
            "--scales",
            s(&sc),
            s(&out),
        ]),
        "scales",
    );
    // codes out of range for a 4-bit format
    io::write_tensor(
        &c,
        "c",
        &TensorData::new(DType::U8, vec![2, 64], vec![0x10; 128]).unwrap(),
    )
    .unwrap();
    io::write_tensor(&sc, "s", &TensorData::new(DType::U8, vec![2, 2], vec![127; 4]).unwrap()).unwrap();
    fails_cleanly(
        &run(&[
            "dequantize",
            "--format",
            "mxfp4-e2m1",
            "--codes",
            s(&c),
            "--scales",
            s(&sc),
            s(&out),
        ]),
        "not a valid",
    );

    // a missing file
    fails_cleanly(
        &run(&["decode", "--from", "e4m3", "/nonexistent/x.npy", s(&out)]),
        "/nonexistent/x.npy",
    );
    // policy flags that contradict the preset's fixed rule
    fails_cleanly(
        &run(&[
            "cast",
            "--to",
            "e8m0",
            "--preset",
            "torch",
            "--round",
            "up",
            s(&good),
            s(&out),
        ]),
        "nearest-away",
    );
}

#[test]
fn gemm_order_and_trace_commands() {
    let (m, n, k) = (4usize, 3usize, 64usize);
    let a: Vec<f32> = sample(m * k);
    let b: Vec<f32> = sample(k * n + 7)[7..].to_vec();
    let (pa, pb, pc) = (tmp("g_a.npy"), tmp("g_b.npy"), tmp("g_c.npy"));
    write_f32(&pa, &[m, k], &a);
    write_f32(&pb, &[k, n], &b);
    let order = "fma;split=4;reduce=pairwise";
    ok(&run(&[
        "gemm",
        "--a",
        s(&pa),
        "--b",
        s(&pb),
        "--order",
        order,
        "--out",
        s(&pc),
    ]));
    let c = io::load_tensor(&pc, None).unwrap();
    let (av, bv) = (
        ArrayView2::from_shape((m, k), &a).unwrap(),
        ArrayView2::from_shape((k, n), &b).unwrap(),
    );
    let p = Problem::from_arrays(av, bv, BLayout::Kn).unwrap();
    let want = gemm_generic(&order.parse().unwrap(), &p, None).unwrap();
    let want = Array2::from_shape_vec((m, n), want).unwrap();
    assert_eq!(c.view::<f32, Ix2>().unwrap(), want);
    // row-only
    ok(&run(&[
        "gemm",
        "--a",
        s(&pa),
        "--b",
        s(&pb),
        "--order",
        order,
        "--rows",
        "3,1",
        "--out",
        s(&pc),
    ]));
    let r = io::load_tensor(&pc, None).unwrap();
    assert_eq!(r.view::<f32, Ix2>().unwrap(), want.select(Axis(0), &[3, 1]));
    // order and trace
    let o = run(&["order", "hopper-bf16", "--k", "64"]);
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("preset hopper-bf16"));
    let t = run(&[
        "trace",
        "--a",
        s(&pa),
        "--b",
        s(&pb),
        "--order",
        "fma",
        "--row",
        "1",
        "--col",
        "2",
    ]);
    ok(&t);
    assert_eq!(String::from_utf8_lossy(&t.stdout).lines().count(), k + 1);
    // MX inputs
    let (ca, sa, cb, sb) = (tmp("g_ca.npy"), tmp("g_sa.npy"), tmp("g_cb.npy"), tmp("g_sb.npy"));
    ok(&run(&[
        "quantize",
        "--format",
        "mxfp8-e4m3",
        s(&pa),
        "--codes",
        s(&ca),
        "--scales",
        s(&sa),
    ]));
    ok(&run(&[
        "quantize",
        "--format",
        "mxfp8-e4m3",
        "--axis",
        "0",
        s(&pb),
        "--codes",
        s(&cb),
        "--scales",
        s(&sb),
    ]));
    for ord in [
        "fma;scale=block",
        "fma",
        "blackwell-mxf8f6f4",
        "hopper-fp8-wgmma;scale=block;promote=32",
    ] {
        let g = [
            "gemm",
            "--a",
            s(&ca),
            "--b",
            s(&cb),
            "--format",
            "mxfp8-e4m3",
            "--a-scales",
            s(&sa),
            "--b-scales",
            s(&sb),
            "--order",
            ord,
            "--out",
            s(&pc),
        ];
        ok(&run(&g));
    }
}

#[test]
fn gemm_bad_input_exits_2() {
    let (pa, pb, out) = (tmp("gb_a.npy"), tmp("gb_b.npy"), tmp("gb_c.npy"));
    write_f32(&pa, &[2, 16], &sample(32));
    write_f32(&pb, &[15, 3], &sample(45));
    let g = |order: &str| run(&["gemm", "--a", s(&pa), "--b", s(&pb), "--order", order, "--out", s(&out)]);
    fails_cleanly(&g("fma"), "shape mismatch");
    write_f32(&pb, &[16, 3], &sample(48));
    fails_cleanly(&g("fma;lanes=32;split=2"), "lanes cannot be combined");
    fails_cleanly(&g("fma;reduce=sideways"), "reduce=sideways");
    fails_cleanly(&g("hopper-bf16"), "not exactly representable in bf16");
    fails_cleanly(&g("fma;scale=block"), "needs MX inputs");
    fails_cleanly(
        &run(&[
            "gemm",
            "--a",
            s(&pa),
            "--b",
            s(&pb),
            "--order",
            "fma",
            "--rows",
            "9",
            "--out",
            s(&out),
        ]),
        "row 9",
    );
}

#[test]
fn device_commands_without_a_gpu_fail_cleanly() {
    // Built without `cuda` (the test build): a clear "rebuild" message.
    // Built with it on a machine without the driver: "no usable GPU".
    let o = run(&["device", "info"]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(
        err.contains("--features cuda") || err.contains("no usable GPU"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    fails_cleanly(
        &run(&["device", "conform", "--quick", "--out", tmp("dev").to_str().unwrap()]),
        "",
    );
    fails_cleanly(
        &run(&["device", "replay", tmp("no-such-dir").to_str().unwrap()]),
        "no-such-dir",
    );
}

/// Runs `mxbi` in `dir` (so arguments can name fixture files directly).
fn run_in(dir: &Path, args: &[&str]) -> Output {
    bin().current_dir(dir).args(args).output().unwrap()
}

/// A `.npy` file holding only the header for `shape` (and `data`): sizes
/// the file does not back.
fn npy_raw(p: &Path, dtype: DType, shape: &[usize], data: &[u8]) {
    let mut b = io::npy_header_bytes(dtype, shape).unwrap();
    b.extend_from_slice(data);
    std::fs::write(p, b).unwrap();
}

/// A `.safetensors` file with a hand-written header (shapes and offsets as
/// given, no validation) followed by `data_len` zero bytes.
fn safetensors_raw(p: &Path, header: serde_json::Value, data_len: usize) {
    let h = header.to_string().into_bytes();
    let mut b = (h.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(&h);
    b.resize(b.len() + data_len, 0);
    std::fs::write(p, b).unwrap();
}

/// The files the hostile-argument battery names, in a fresh folder.
fn hostile_fixture() -> PathBuf {
    let d = tmp("hostile");
    std::fs::create_dir_all(d.join("specs")).unwrap();
    std::fs::create_dir_all(d.join("inputs")).unwrap();
    let f = |name: &str| d.join(name);
    write_f32(&f("a.npy"), &[4, 64], &sample(256));
    write_f32(&f("b.npy"), &[64, 3], &sample(192));
    write_f32(&f("a1.npy"), &[64], &sample(64));
    write_f32(&f("a3.npy"), &[2, 2, 64], &sample(256));
    write_f32(&f("scalar.npy"), &[], &[1.0]);
    let u8s = |shape: Vec<usize>, v: u8| {
        let n = shape.iter().product();
        TensorData::new(DType::U8, shape, vec![v; n]).unwrap()
    };
    io::write_tensor(f("u8.npy"), "c", &u8s(vec![2, 64], 0)).unwrap();
    io::write_tensor(f("s.npy"), "s", &u8s(vec![2, 2], 127)).unwrap();
    let ints: Vec<i32> = (0..32).collect();
    io::write_tensor(f("i32.npy"), "x", &TensorData::from_slice(vec![32], &ints).unwrap()).unwrap();
    io::write_tensor(
        f("f64.npy"),
        "x",
        &TensorData::from_slice(vec![2, 32], &[0.1f64; 64]).unwrap(),
    )
    .unwrap();
    // headers promising what the file does not hold, or nothing at all
    npy_raw(&f("huge.npy"), DType::F32, &[1 << 62], &[]);
    npy_raw(&f("overflow.npy"), DType::F32, &[1 << 40, 1 << 40], &[]);
    npy_raw(&f("empty_rows.npy"), DType::F32, &[1 << 31, 0], &[]);
    npy_raw(&f("empty_cols.npy"), DType::F32, &[0, 1 << 40], &[]);
    npy_raw(&f("empty_3d.npy"), DType::F32, &[1 << 30, 1 << 30, 0], &[]);
    npy_raw(&f("empty_k.npy"), DType::F32, &[0, 1 << 23], &[]);
    npy_raw(&f("empty_kb.npy"), DType::F32, &[1 << 23, 0], &[]);
    npy_raw(&f("small_empty.npy"), DType::F32, &[0, 4], &[]);
    let mut neg = io::npy_header_bytes(DType::F32, &[7]).unwrap();
    let at = neg.windows(4).position(|w| w == b"(7,)").unwrap();
    neg[at + 1] = b'-';
    std::fs::write(f("negative.npy"), neg).unwrap();
    std::fs::write(f("zero_bytes.npy"), b"").unwrap();
    std::fs::write(f("header_len.safetensors"), (1u64 << 62).to_le_bytes()).unwrap();
    use serde_json::json;
    let st = |name: &str, dt: &str, shape: serde_json::Value, bytes: usize| {
        safetensors_raw(
            &f(name),
            json!({"x": {"dtype": dt, "shape": shape, "data_offsets": [0, bytes]}}),
            bytes,
        )
    };
    st("st_overflow.safetensors", "F32", json!([1u64 << 40, 1u64 << 40]), 0);
    st("st_empty_huge.safetensors", "F32", json!([0, 1u64 << 62]), 0);
    st("st_short.safetensors", "F32", json!([1000]), 16);
    st("st_bool.safetensors", "BOOL", json!([4]), 4);
    st("st_negative.safetensors", "F32", json!([-4]), 16);
    safetensors_raw(
        &f("st_two.safetensors"),
        json!({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
               "y": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}),
        32,
    );
    let spec = |name: &str, v: serde_json::Value| std::fs::write(d.join("specs").join(name), v.to_string()).unwrap();
    spec("ok.json", json!({"preset": "rmsnorm"}));
    spec(
        "agmm_overflow.json",
        json!({"preset": "agmm-v2-fixed", "m_per_rank": 1u64 << 62}),
    );
    spec(
        "agmm_big.json",
        json!({"preset": "agmm-v2-fixed", "m_per_rank": 100_000_000}),
    );
    spec("agmm_k.json", json!({"preset": "agmm-v2-fixed", "k": 1u64 << 40}));
    spec(
        "agmm_rows.json",
        json!({"preset": "agmm-v2-fixed", "world_size": 8, "m_per_rank": 1 << 15, "n": 1}),
    );
    spec(
        "mmrs_big.json",
        json!({"preset": "mmrs-ring", "m": 1 << 30, "n": 1 << 30}),
    );
    spec(
        "mmrs_world.json",
        json!({"op": "matmul-all-reduce", "world_size": 1u64 << 20, "m": 1, "k": 1 << 20, "n": 1,
        "order": "fma", "reduction": {"kind": "fixed"}}),
    );
    spec(
        "moe_experts.json",
        json!({"preset": "moe-grouped", "experts": u64::MAX}),
    );
    spec("moe_zero.json", json!({"preset": "moe-grouped", "tokens": 0}));
    spec("norm_h.json", json!({"preset": "rmsnorm", "h": u64::MAX}));
    spec("norm_negative.json", json!({"preset": "rmsnorm", "h": -1}));
    spec("norm_float.json", json!({"preset": "rmsnorm", "h": 1e30}));
    spec(
        "norm_split.json",
        json!({"preset": "rmsnorm", "order": "fma;split=4000000000"}),
    );
    spec(
        "quant_tree.json",
        json!({"preset": "quant-per-row", "m": 1, "n": 1, "k": 1 << 22, "order": "fma;split=4000000"}),
    );
    spec("unknown.json", json!({"preset": "nope"}));
    spec(
        "extra_field.json",
        json!({"op": "rms-norm", "m": 1, "h": 1, "eps": 0.0, "order": "fma", "bogus": 1}),
    );
    std::fs::write(d.join("specs/deep.json"), "[".repeat(10_000)).unwrap();
    std::fs::write(d.join("specs/binary.json"), b"\xff\xfe\x00").unwrap();
    std::fs::write(d.join("specs/truncated.json"), "{\"preset\": \"rmsnorm\"").unwrap();
    npy_raw(&d.join("inputs/x.npy"), DType::F32, &[0, 1 << 40], &[]);
    d
}

/// Hostile arguments over every subcommand and argument in src/cli:
/// sizes past the limits (mxbi::limits), negative and overflowing numbers,
/// zero, products of dimensions that overflow, headers that promise more
/// than the file holds, missing files, wrong dtypes, unknown names, clap
/// errors. Each gives exit code 2, nothing on stdout and exactly one line.
#[test]
fn hostile_arguments_fail_cleanly() {
    let d = hostile_fixture();
    let s = |args: &str| args.to_string();
    let q = |rest: &str| format!("quantize --format mxfp8-e4m3 --codes c.npy --scales so.npy {rest}");
    let dq = |rest: &str| format!("dequantize --format mxfp8-e4m3 --codes u8.npy --scales s.npy y.npy {rest}");
    let g = |rest: &str| format!("gemm --a a.npy --b b.npy --out c.npy {rest}");
    let mx = |rest: &str| format!("gemm --a u8.npy --b u8.npy --b-layout nk --format mxfp8-e4m3 --out c.npy {rest}");
    let t = |rest: &str| format!("trace --a a.npy --b b.npy {rest}");
    let op = |rest: &str| format!("op run --out op_out {rest}");
    let cases: Vec<(String, &str)> = vec![
        // top level and clap errors
        (s("frobnicate"), "unrecognized subcommand 'frobnicate'"),
        (s("--bogus"), "unexpected argument '--bogus'"),
        (s("demo extra"), "unexpected argument 'extra'"),
        (s("mx-table extra"), "unexpected argument 'extra'"),
        (s("bi schema extra"), "unexpected argument 'extra'"),
        (s("bi merge m.json"), "required arguments were not provided"),
        (s("bi merge m.json absent.json"), "absent.json: No such file"),
        (s("bi merge m.json a.npy"), "a.npy: stream did not contain valid UTF-8"),
        (
            s("bi merge m.json specs/truncated.json"),
            "specs/truncated.json: EOF while parsing",
        ),
        (s("bi run absent-case.json"), "absent-case.json: No such file"),
        (s("bi run specs/deep.json"), "deep.json: [0]: expected value"),
        (
            s("bi run specs/binary.json"),
            "binary.json: stream did not contain valid UTF-8",
        ),
        // cast
        (
            s("cast"),
            "required arguments were not provided: --to <TO>, <INPUT>, <OUTPUT>",
        ),
        (s("cast --to e4m3 a.npy"), "<OUTPUT>"),
        (s("cast --to e9m9 a.npy o.npy"), "unknown element format 'e9m9'"),
        (
            s("cast --to e4m3 --preset cublas a.npy o.npy"),
            "unknown cast preset 'cublas'",
        ),
        (s("cast --to e4m3 --round sideways a.npy o.npy"), "sideways"),
        (s("cast --to e4m3 --overflow maybe a.npy o.npy"), "maybe"),
        (s("cast --to e4m3 --nan explode a.npy o.npy"), "explode"),
        (s("cast --to e4m3 --round stochastic --sr-bits 0 a.npy o.npy"), "got 0"),
        (
            s("cast --to e4m3 --round stochastic --sr-bits 33 a.npy o.npy"),
            "got 33",
        ),
        (
            s("cast --to e4m3 --round stochastic --sr-bits 4294967296 a.npy o.npy"),
            "--sr-bits",
        ),
        (s("cast --to e4m3 --round stochastic --seed -1 a.npy o.npy"), "'-1'"),
        (
            s("cast --to e4m3 --round stochastic --seed 18446744073709551616 a.npy o.npy"),
            "--seed",
        ),
        (
            s("cast --to e4m3 --seed 3 a.npy o.npy"),
            "only apply with --round stochastic",
        ),
        (s("cast --to e4m3 i32.npy o.npy"), "got i32"),
        (s("cast --to e4m3 u8.npy o.npy"), "got u8"),
        (s("cast --to e4m3 missing.npy o.npy"), "missing.npy"),
        (s("cast --to e4m3 . o.npy"), "."),
        (s("cast --to e4m3 zero_bytes.npy o.npy"), "zero_bytes.npy"),
        (
            s("cast --to e4m3 negative.npy o.npy"),
            "negative.npy: not a valid .npy file",
        ),
        (s("cast --to e4m3 huge.npy o.npy"), "huge.npy"),
        (s("cast --to e4m3 overflow.npy o.npy"), "overflow"),
        (s("cast --to e4m3 empty_cols.npy o.npy"), "2^30"),
        (s("cast --to e4m3 header_len.safetensors o.npy"), "header length"),
        (s("cast --to e4m3 st_overflow.safetensors o.npy"), "overflow"),
        (s("cast --to e4m3 st_empty_huge.safetensors o.npy"), "MAX_ELEMENTS"),
        (s("cast --to e4m3 st_short.safetensors o.npy"), "st_short.safetensors"),
        (s("cast --to e4m3 st_bool.safetensors o.npy"), "BOOL"),
        (
            s("cast --to e4m3 st_negative.safetensors o.npy"),
            "st_negative.safetensors",
        ),
        (
            s("cast --to e4m3 st_two.safetensors o.npy"),
            "a tensor name is required",
        ),
        (
            s("cast --to e4m3 --name z st_two.safetensors o.npy"),
            "no tensor named 'z'",
        ),
        (s("cast --to e4m3 --name"), "--name"),
        (s("cast --to e4m3 a.npy no/such/dir/o.npy"), "no/such/dir/o.npy"),
        (s("cast --to e4m3 a.npy o.txt"), "unknown tensor file type"),
        // decode
        (s("decode --from e9m9 u8.npy o.npy"), "e9m9"),
        (s("decode --from e4m3 a.npy o.npy"), "needs uint8/uint16 codes, got f32"),
        (s("decode --from e4m3 i32.npy o.npy"), "got i32"),
        (s("decode --from e4m3 u8.npy o.npy --bogus"), "--bogus"),
        (s("decode --from e4m3 st_empty_huge.safetensors o.npy"), "2^30"),
        // quantize: block, axis, shapes, dtypes, names
        (q("a.npy --block 9223372036854775808 --pad"), "MAX_BLOCK"),
        (q("a.npy --block 1099511627776 --pad"), "limit of 2^20"),
        (q("a.npy --block 2097152 --pad"), "MAX_BLOCK"),
        (q("a.npy --block 18446744073709551616"), "--block"),
        (q("a.npy --block 0"), "not a power of two"),
        (q("a.npy --block 48"), "not a power of two"),
        (q("a.npy --block -32"), "'-3'"),
        (q("a.npy --axis 2"), "axis 2 is out of range"),
        (q("a.npy --axis -3"), "axis -3 is out of range"),
        (q("a.npy --axis 9223372036854775807"), "out of range"),
        (q("a.npy --axis -9223372036854775808"), "out of range"),
        (q("a.npy --axis 9223372036854775808"), "--axis"),
        (q("scalar.npy"), "0-d array"),
        (q("empty_3d.npy --axis 1"), "MAX_ELEMENTS"),
        (q("empty_rows.npy --scale-layout swizzled-128x4"), "MAX_ELEMENTS"),
        (q("empty_cols.npy --pad"), "MAX_ELEMENTS"),
        (q("i32.npy"), "got i32"),
        (q("u8.npy"), "got u8"),
        (q("f64.npy"), "not exactly representable in f32"),
        (q("a.npy --scale-mode sideways"), "sideways"),
        (q("a.npy --preset cublas"), "unknown MX preset 'cublas'"),
        (q("a.npy --no-int8-neg2"), "mxint8 only"),
        (q("a.npy --scale-layout diagonal"), "diagonal"),
        (q("a3.npy --scale-layout swizzled-128x4"), "2-d input"),
        (q("a.npy --stats --round stochastic --seed -5"), "'-5'"),
        (
            s("quantize --format mxfp8-e4m3 a.npy --codes c.npy --scales s.txt --stats"),
            "s.txt",
        ),
        (
            s("quantize --format mxfp8-e4m3 a.npy --scales s.npy"),
            "--codes <CODES>",
        ),
        (s("quantize --format mxfp9 a.npy --codes c.npy --scales s.npy"), "mxfp9"),
        // dequantize
        (dq("--dtype f16"), "unknown --dtype 'f16'"),
        (dq("--block 2147483648 --pad"), "MAX_BLOCK"),
        (dq("--axis 5"), "axis 5"),
        (dq("--scale-layout swizzled-128x4"), "need 512 bytes, got 4"),
        (
            s("dequantize --format mxfp8-e4m3 --codes a.npy --scales s.npy y.npy"),
            "codes must be uint8",
        ),
        (
            s("dequantize --format mxfp8-e4m3 --codes u8.npy --scales a.npy y.npy"),
            "scales must be uint8",
        ),
        (
            s("dequantize --format mxfp8-e4m3 --codes u8.npy --scales u8.npy y.npy"),
            "scales have 128 elements",
        ),
        (
            s("dequantize --format mxfp8-e4m3 --codes scalar.npy --scales s.npy y.npy"),
            "0-d",
        ),
        (
            s("dequantize --format mxfp8-e4m3 --codes empty_rows.npy --scales s.npy y.npy"),
            "MAX_ELEMENTS",
        ),
        (
            s("dequantize --format mxfp8-e4m3 --codes missing.npy --scales s.npy y.npy"),
            "missing.npy",
        ),
        (
            s("dequantize --format mxfp8-e4m3 --codes u8.npy --scales s.npy no/dir/y.npy"),
            "no/dir/y.npy",
        ),
        // formats
        (s("formats e9m9"), "e9m9"),
        (s("formats e4m3 extra"), "extra"),
        // bench
        (s("bench --elements 0"), "positive multiple of 32"),
        (s("bench --elements 33"), "positive multiple of 32"),
        (s("bench --elements -32"), "'-3'"),
        (s("bench --elements 1099511627776"), "MAX_ELEMENTS"),
        (s("bench --elements 18446744073709551616"), "--elements"),
        (s("bench --elements 32 --reps 0"), "at least 1"),
        (s("bench --elements 32 --reps 9223372036854775807"), "MAX_REPS"),
        (s("bench --elements 32 --warmup 18446744073709551615"), "MAX_REPS"),
        (s("bench --elements 32 --threads 0"), "at least 1"),
        (s("bench --elements 32 --threads 100000000"), "MAX_THREADS"),
        // gemm: orders, trees, shapes, scales, rows
        (g("--order fmx"), "unknown family 'fmx'"),
        (g("--order fma;split=4000000000"), "MAX_TREE"),
        (g("--order fma;lanes=2147483648"), "MAX_TREE"),
        (g("--order mma(k=4294967295,f=25)"), "MAX_TREE"),
        (g("--order mma(k=4294967296,f=25)"), "k=4294967296"),
        (g("--order fma;ktile=1;tile=fresh;split=4194304"), "MAX_TREE"),
        (g("--order fma --b-layout mn"), "unknown --b-layout 'mn'"),
        (g("--order fma --b-layout nk"), "shape mismatch"),
        (g("--order fma --rows 4"), "row 4 is out of range"),
        (g("--order fma --rows 18446744073709551615"), "out of range"),
        (g("--order fma --rows -1"), "'-1'"),
        (g("--order fma --rows ,"), "--rows"),
        (g("--order fma --a-scales s.npy"), "need --format"),
        (g("--order fma --format mxfp8-e4m3"), "need --a-scales and --b-scales"),
        (
            g("--order fma --format mxfp8-e4m3 --a-scales s.npy --b-scales s.npy"),
            "MX codes must be uint8",
        ),
        (g("--order fma --format mxfp9"), "mxfp9"),
        (g("--order fma --out c.txt"), "--out"),
        (
            mx("--order fma --a-scales a.npy --b-scales s.npy"),
            "MX codes must be uint8",
        ),
        (
            mx("--order fma --a-scales u8.npy --b-scales s.npy"),
            "A scales has 128 elements",
        ),
        (
            mx("--order fma;split=4000000000 --a-scales s.npy --b-scales s.npy"),
            "MAX_TREE",
        ),
        (
            s("gemm --a a1.npy --b b.npy --order fma --out c.npy"),
            "expected a 2-d array",
        ),
        (
            s("gemm --a a3.npy --b b.npy --order fma --out c.npy"),
            "expected a 2-d array",
        ),
        (
            s("gemm --a scalar.npy --b b.npy --order fma --out c.npy"),
            "expected a 2-d array",
        ),
        (s("gemm --a i32.npy --b b.npy --order fma --out c.npy"), "2-d"),
        (
            s("gemm --a empty_rows.npy --b small_empty.npy --order fma --out c.npy"),
            "MAX_ELEMENTS",
        ),
        (
            s("gemm --a empty_k.npy --b empty_kb.npy --order fma --out c.npy"),
            "MAX_K",
        ),
        (
            s("gemm --a missing.npy --b b.npy --order fma --out c.npy"),
            "missing.npy",
        ),
        (s("gemm --a a.npy --b b.npy --order fma --out c.txt"), "c.txt"),
        (s("gemm --a a.npy --b b.npy --order fma"), "--out <OUT>"),
        // order
        (s("order"), "<SPEC>"),
        (s("order fmx"), "unknown family"),
        (s("order fma --k 100000000000"), "MAX_K"),
        (s("order fma --k 4194305"), "K must be at most 4194304 (mxbi's K limit"),
        // one K limit, in the same words, from every command
        (
            s("bi run --subject model:fma --family batch --k 4194305 --n 1 --m 1,2"),
            "K = 4194305: K must be at most 4194304 (mxbi's K limit",
        ),
        (
            s("bi gen --out kdump --subject model:fma --family batch --k 4194305 --n 1 --m 1,2"),
            "K = 4194305: K must be at most 4194304 (mxbi's K limit",
        ),
        (s("order fma --k -1"), "'-1'"),
        (s("order fma --k 18446744073709551616"), "--k"),
        (s("order fma;split=4000000000 --k 64"), "MAX_TREE"),
        (s("order fma;lanes=2147483648 --k 64"), "MAX_TREE"),
        (s("order fma;lanes=4194304 --k 4194304"), "MAX_TREE"),
        (s("order mma(k=4000000000,f=25) --k 1"), "MAX_TREE"),
        (s("order fma --diff fma;split=2"), "--diff needs --k"),
        (s("order fma --diff fmx --k 4"), "unknown family"),
        (s("order fma --diff fma;split=4000000000 --k 4"), "MAX_TREE"),
        // trace
        (t("--order fma --row 4 --col 0"), "outside C"),
        (t("--order fma --row 0 --col 3"), "outside C"),
        (t("--order fma --row 18446744073709551615 --col 0"), "outside C"),
        (t("--order fma --row -1 --col 0"), "'-1'"),
        (t("--order fma;split=4000000000 --row 0 --col 0"), "MAX_TREE"),
        (t("--order fma --col 0"), "--row <ROW>"),
        // device (built without `cuda` here: sizes first, then "rebuild")
        // (`mxbi device` alone prints the group's help: tests/cli_help.rs)
        (s("device bogus"), "unrecognized subcommand 'bogus'"),
        (s("device info --gpu -1"), "'-1'"),
        (s("device conform --out o --cases 18446744073709551615"), "--cases"),
        (s("device conform --out o --max-terms 0"), "--max-terms"),
        (s("device probe --out o --quick --cases 5"), "cannot be used with"),
        (s("device probe --out o --cases 18446744073709551616"), "--cases"),
        (s("device casts --out o --only bogus"), "unknown conversion `bogus`"),
        (s("device collective --out o --world 18446744073709551616"), "--world"),
        (s("device replay no-such-dir"), "no-such-dir"),
        (s("device replay a.npy"), "a.npy"),
        (s("device replay specs"), "no capture folder"),
        // op
        // (`mxbi op` alone prints the group's help: tests/cli_help.rs)
        (s("op list extra"), "extra"),
        (s("op run specs/ok.json"), "--out <OUT>"),
        (
            s("op run specs/ok.json --out op_out"),
            "give --inputs PATH or --generate SEED",
        ),
        (op("--generate 1 missing.json"), "missing.json"),
        (op("--generate 1 specs"), "specs"),
        (op("--generate 1 specs/binary.json"), "specs/binary.json"),
        (op("--generate 1 specs/deep.json"), "recursion limit"),
        (op("--generate 1 specs/truncated.json"), "not valid JSON"),
        (op("--generate 1 specs/unknown.json"), "unknown preset 'nope'"),
        (op("--generate 1 specs/extra_field.json"), "unknown field `bogus`"),
        (op("--generate 1 specs/agmm_overflow.json"), "overflows"),
        (op("--generate 1 specs/agmm_big.json"), "MAX_ELEMENTS"),
        (op("--generate 1 specs/agmm_k.json"), "MAX_K"),
        (op("--generate 1 specs/agmm_rows.json"), "MAX_OP_ROWS"),
        (op("--generate 1 specs/mmrs_big.json"), "MAX_ELEMENTS"),
        (op("--generate 1 specs/mmrs_world.json"), "MAX_WORLD"),
        (op("--generate 1 specs/moe_experts.json"), "overflows"),
        (op("--generate 1 specs/moe_zero.json"), "tokens must be at least 1"),
        (op("--generate 1 specs/norm_h.json"), "h = 18446744073709551615"),
        (op("--generate 1 specs/norm_negative.json"), "-1"),
        (op("--generate 1 specs/norm_float.json"), "floating point"),
        (op("--generate 1 specs/norm_split.json"), "MAX_TREE"),
        (op("--generate 1 specs/quant_tree.json"), "MAX_TREE"),
        (op("--generate 1 --x2-scales wobbly specs/ok.json"), "wobbly"),
        (op("--generate 1 --inputs . specs/ok.json"), "cannot be used with"),
        (op("--generate -1 specs/ok.json"), "'-1'"),
        (op("--inputs missing-dir specs/ok.json"), "missing-dir"),
        (
            op("--inputs st_two.safetensors specs/ok.json"),
            "input 'x' has shape [4]",
        ),
        (op("--inputs inputs specs/ok.json"), "MAX_ELEMENTS"),
        (s("op run --out a.npy/sub --generate 1 specs/ok.json"), "a.npy/sub"),
    ];
    let mut failures = Vec::new();
    let mut check = |args: &[&str], needle: &str| {
        let o = run_in(&d, args);
        if let Err(e) = std::panic::catch_unwind(|| fails_cleanly(&o, needle)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("{args:?}: {msg}"));
        }
    };
    // (no arguments at all print the whole help: tests/cli_help.rs)
    check(&[""], "unrecognized subcommand ''");
    for (args, needle) in &cases {
        check(&args.split_whitespace().collect::<Vec<_>>(), needle);
    }
    let n = cases.len() + 1;
    assert!(
        failures.is_empty(),
        "{} of {n} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!("{n} hostile argument lists, each exit 2 with one line");
}

/// RAYON_NUM_THREADS sizes the worker pool: a huge value is refused before
/// any pool starts.
#[test]
fn huge_thread_count_from_the_environment_fails_cleanly() {
    let o = bin()
        .args(["formats"])
        .env("RAYON_NUM_THREADS", "100000000")
        .output()
        .unwrap();
    fails_cleanly(&o, "RAYON_NUM_THREADS");
    ok(&run_threads(&["formats", "e2m1"], 2));
}

/// `--help` and `--version` stay on stdout with exit code 0, and a clap
/// error keeps its message (reduced to one line, the list joined).
#[test]
fn help_and_version_exit_0() {
    for args in [
        vec!["--help"],
        vec!["-h"],
        vec!["--version"],
        vec!["-V"],
        vec!["cast", "--help"],
        vec!["device", "--help"],
        vec!["op", "run", "--help"],
        vec!["help", "quantize"],
    ] {
        let o = run(&args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.stderr.is_empty(), "{args:?}");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("mxbi") || out.contains("Usage"), "{args:?}: {out}");
    }
    let o = run(&["--version"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("mxbi {}", env!("CARGO_PKG_VERSION"))
    );
    let o = run(&["cast", "--to", "e4m3", "--preset", "cublas", "x.npy", "y.npy"]);
    fails_cleanly(
        &o,
        "mxbi: error: invalid value 'cublas' for '--preset <PRESET>': unknown cast preset 'cublas'; expected \
         ml_dtypes or ml_dtypes@0.7 (ml_dtypes 0.7.0), ml_dtypes@0.6 (ml_dtypes 0.6.0), nvidia or nvidia@13.0 (CUDA 13.0), \
         torch or torch@2.15 (torch 2.15.0), gfloat or gfloat@0.5 (gfloat 0.5.2)\n",
    );
}

/// Library entry points the command line reaches refuse the same sizes
/// (the bounds hold for library callers too).
#[test]
fn library_entry_points_bound_sizes() {
    use mxbi::gemm::{self, BLayout, GemmError, Matrix, Problem};
    use mxbi::limits::{MAX_BLOCK, MAX_K};
    // MX layouts: block, axis and overflowing empty shapes
    assert!(matches!(
        AxisLayout::new(&[64], -1, MAX_BLOCK * 2, true),
        Err(mx::MxError::Limit(_))
    ));
    assert!(AxisLayout::new(&[64], -1, MAX_BLOCK, true).is_ok());
    assert!(AxisLayout::new(&[64], isize::MIN, 32, false).is_err());
    assert!(AxisLayout::new(&[1 << 40, 1 << 40, 0], 1, 32, false).is_err());
    // an empty tensor with a long outer extent quantizes without walking it
    let l = AxisLayout::new(&[1 << 30, 1 << 20, 0], 1, 32, false).unwrap();
    let p = MxPreset::Ocp.policy(MxFormat::Fp8E4M3);
    let q = mx::quantize(&[], &l, MxFormat::Fp8E4M3, &p).unwrap();
    assert!(q.codes.is_empty() && q.scales.is_empty());
    // GEMM: K, output size, empty operands with huge other dimensions
    let order = "fma".parse().unwrap();
    let prob = |m, n, k| Problem {
        a: Matrix::F32(&[]),
        b: Matrix::F32(&[]),
        m,
        n,
        k,
        b_layout: BLayout::Kn,
    };
    for (m, n, k) in [
        (0, 0, MAX_K + 1),
        (1 << 62, 0, 0),
        (1 << 20, 1 << 20, 0),
        (0, usize::MAX, 0),
    ] {
        for r in [
            gemm::gemm(&order, &prob(m, n, k), None),
            gemm::gemm_generic(&order, &prob(m, n, k), None),
        ] {
            assert!(matches!(r, Err(GemmError::Limit(_))), "{m} {n} {k}: {r:?}");
        }
    }
    assert!(matches!(
        gemm::trace(&"fma;split=4000000000".parse().unwrap(), &prob(1, 1, 64), 0, 0),
        Err(GemmError::Limit(_))
    ));
    assert_eq!(gemm::gemm(&order, &prob(0, 5, 0), None).unwrap(), Vec::<f32>::new());
}

/// A failed write to stdout (here a full device) ends in one error line
/// and exit code 2, not a panic from `println!`.
#[cfg(target_os = "linux")]
#[test]
fn unwritable_stdout_fails_cleanly() {
    for args in [
        &["formats"][..],
        &["formats", "e4m3"],
        &["order", "fma", "--k", "1000", "--full"],
        &["demo"],
        &["mx-table"],
        &["op", "list"],
    ] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = bin().args(args).stdout(full).output().unwrap();
        fails_cleanly(&o, "cannot write to stdout: No space left on device");
    }
}
