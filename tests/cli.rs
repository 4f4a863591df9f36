//! The `mxbi` command line: the contract spellings work, outputs equal the
//! library, results do not depend on the thread count, and bad input gives
//! exit code 2 with one clear line (never a panic).

use mxbi::format::{encode_f32, CastPreset, Format};
use mxbi::io::{self, DType, TensorData};
use mxbi::mx::{self, AxisLayout, MxFormat, MxPreset};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mxbi"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mxbi-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
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

/// Exit code 2, exactly one line on stderr mentioning `needle`.
fn fails_cleanly(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let first = err.lines().next().unwrap_or("");
    assert!(first.contains(needle), "expected '{needle}' in: {err}");
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
fn demo_and_formats_run() {
    let o = run(&["demo"]);
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in ["mxfp8-e4m3", "microxcaling", "rceil", "log2 hazard"] {
        assert!(out.contains(needle), "{needle} missing from demo output");
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
    let c = io::load_tensor(&pc, None).unwrap().as_f32().unwrap().into_owned();
    let p = mxbi::gemm::Problem {
        a: mxbi::gemm::Matrix::F32(&a),
        b: mxbi::gemm::Matrix::F32(&b),
        m,
        n,
        k,
        b_layout: mxbi::gemm::BLayout::Kn,
    };
    let want = mxbi::gemm::gemm_generic(&order.parse().unwrap(), &p, None).unwrap();
    assert_eq!(c, want);
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
    assert_eq!(r.shape(), &[2, n]);
    assert_eq!(r.as_f32().unwrap()[..n], want[3 * n..4 * n]);
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
    let o = run(&["device", "conform", "--quick", "--out", tmp("dev").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    fails_cleanly(
        &run(&["device", "replay", tmp("no-such-dir").to_str().unwrap()]),
        "no-such-dir",
    );
}
