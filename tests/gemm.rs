//! The generic GEMM evaluator against hand-written loops, input validation,
//! and thread-count determinism. (Bit-exactness of every family against the
//! independent Python reference is in tests/orders_reference.rs.)

use approx::assert_relative_eq;
use mxbi::gemm::{gemm_generic, trace, BLayout, GemmError, Matrix, Problem};
use mxbi::mx::MxFormat;
use mxbi::order::Order;
use ndarray::{Array2, ArrayView2, Axis};

fn rand_vals(n: usize, seed: u64, spread: u32) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let e = (s >> 40) as u32 % (2 * spread + 1);
            f32::from_bits(((s as u32) & 0x807F_FFFF) | ((127 + e - spread) << 23))
        })
        .collect()
}

fn prob<'a>(a: &'a [f32], b: &'a [f32], m: usize, n: usize, k: usize) -> Problem<'a> {
    Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m,
        n,
        k,
        b_layout: BLayout::Kn,
    }
}

fn run(order: &str, p: &Problem) -> Vec<f32> {
    gemm_generic(&order.parse::<Order>().unwrap(), p, None).unwrap()
}

#[test]
fn fma_muladd_and_split_equal_hand_loops() {
    let (m, n, k) = (3, 5, 77);
    let a = rand_vals(m * k, 1, 30);
    let b = rand_vals(k * n, 2, 30);
    let p = prob(&a, &b, m, n, k);
    let c = |order| Array2::from_shape_vec((m, n), run(order, &p)).unwrap();
    let (fma, muladd, split) = (c("fma"), c("muladd"), c("fma;split=2;reduce=serial"));
    let (a, b) = (
        ArrayView2::from_shape((m, k), &a).unwrap(),
        ArrayView2::from_shape((k, n), &b).unwrap(),
    );
    // the products of row i of A and column j of B over k in `ks`, in k order
    let terms = |i, j, ks: std::ops::Range<usize>| ks.map(move |kk| (a[(i, kk)], b[(kk, j)]));
    for ((i, j), fma) in fma.indexed_iter() {
        let f = terms(i, j, 0..k).fold(0f32, |acc, (x, y)| x.mul_add(y, acc));
        let ma = terms(i, j, 0..k).fold(0f32, |acc, (x, y)| acc + x * y);
        assert_eq!(fma.to_bits(), f.to_bits());
        assert_eq!(muladd[(i, j)].to_bits(), ma.to_bits());
        let p0 = terms(i, j, 0..39).fold(0f32, |acc, (x, y)| x.mul_add(y, acc));
        let p1 = terms(i, j, 39..k).fold(0f32, |acc, (x, y)| x.mul_add(y, acc));
        assert_eq!(split[(i, j)].to_bits(), (p0 + p1).to_bits());
    }
}

#[test]
fn orders_that_differ_give_different_bytes_somewhere() {
    // with a wide exponent spread the families are distinguishable
    let (m, n, k) = (4, 8, 256);
    let a = rand_vals(m * k, 3, 20);
    let b = rand_vals(k * n, 4, 20);
    let p = prob(&a, &b, m, n, k);
    let base = run("fma", &p);
    for o in [
        "muladd",
        "fma;split=4",
        "fma;lanes=32",
        "fma;ktile=64;tile=fresh;reduce=pairwise",
    ] {
        assert_ne!(run(o, &p), base, "{o} gave the same bytes as fma");
    }
}

#[test]
fn nk_layout_equals_kn() {
    let (m, n, k) = (2, 3, 40);
    let a = rand_vals(m * k, 5, 10);
    let b = Array2::from_shape_vec((k, n), rand_vals(k * n, 6, 10)).unwrap();
    let bt = b.t().as_standard_layout().into_owned();
    let a = ArrayView2::from_shape((m, k), &a).unwrap();
    let o: Order = "fma;split=3;reduce=pairwise".parse().unwrap();
    let kn = Problem::from_arrays(a, b.view(), BLayout::Kn).unwrap();
    let nk = Problem::from_arrays(a, bt.view(), BLayout::Nk).unwrap();
    assert_eq!(
        gemm_generic(&o, &kn, None).unwrap(),
        gemm_generic(&o, &nk, None).unwrap()
    );
}

#[test]
fn mma_rejects_values_its_input_type_cannot_hold() {
    let (m, n, k) = (2, 2, 16);
    let mut a = vec![1.5f32; m * k];
    let b = vec![0.25f32; k * n];
    a[7] = 1.0 + 2f32.powi(-10); // not a bf16
    let err = gemm_generic(&"hopper-bf16".parse().unwrap(), &prob(&a, &b, m, n, k), None).unwrap_err();
    assert!(
        matches!(
            err,
            GemmError::NotRepresentable {
                operand: "A",
                index: 7,
                ..
            }
        ),
        "{err}"
    );
    // but f16 holds it
    assert!(gemm_generic(&"hopper-f16".parse().unwrap(), &prob(&a, &b, m, n, k), None).is_ok());
    // the first of several, beyond the first block of the parallel scan
    let (m, k) = (2, 40_000);
    let mut a = vec![1.5f32; m * k];
    let b = vec![0.25f32; k * n];
    for at in [70_001, 70_002, 79_999] {
        a[at] = 1.0 + 2f32.powi(-10);
    }
    let err = gemm_generic(&"hopper-bf16".parse().unwrap(), &prob(&a, &b, m, n, k), None).unwrap_err();
    assert!(
        matches!(
            err,
            GemmError::NotRepresentable {
                operand: "A",
                index: 70_001,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn bad_shapes_and_combinations_are_rejected() {
    let a = vec![1f32; 6];
    let b = vec![1f32; 6];
    let o: Order = "fma".parse().unwrap();
    assert!(matches!(
        gemm_generic(&o, &prob(&a, &b, 2, 2, 4), None),
        Err(GemmError::Shape(_))
    ));
    let blk: Order = "fma;scale=block".parse().unwrap();
    assert!(matches!(
        gemm_generic(&blk, &prob(&a, &b, 2, 2, 3), None),
        Err(GemmError::Unsupported(_))
    ));
    assert!(matches!(
        gemm_generic(&o, &prob(&a, &b, 2, 2, 3), Some(&[5])),
        Err(GemmError::Row { row: 5, m: 2 })
    ));
    // MX: K must be a multiple of 32
    let codes = vec![0x38u8; 2 * 48];
    let scales = vec![127u8; 4];
    let mx = Matrix::Mx {
        codes: &codes,
        scales: &scales,
        format: MxFormat::Fp8E4M3,
    };
    let p = Problem {
        a: mx,
        b: mx,
        m: 2,
        n: 2,
        k: 48,
        b_layout: BLayout::Nk,
    };
    assert!(matches!(gemm_generic(&blk, &p, None), Err(GemmError::Shape(_))));
}

#[test]
fn mx_block_terms_are_exact_dots() {
    // one block per row: the fma;scale=block result is RN of the exact dot
    let (m, n, k) = (1, 1, 32);
    let ca: Vec<u8> = (0..32).map(|i| (i * 7 % 120) as u8).collect();
    let cb: Vec<u8> = (0..32)
        .map(|i| (i * 11 % 120) as u8 | if i % 3 == 0 { 0x80 } else { 0 })
        .collect();
    let (sa, sb) = (vec![130u8], vec![120u8]);
    let p = Problem {
        a: Matrix::Mx {
            codes: &ca,
            scales: &sa,
            format: MxFormat::Fp8E4M3,
        },
        b: Matrix::Mx {
            codes: &cb,
            scales: &sb,
            format: MxFormat::Fp8E4M3,
        },
        m,
        n,
        k,
        b_layout: BLayout::Kn,
    };
    let got = gemm_generic(&"fma;scale=block".parse().unwrap(), &p, None).unwrap()[0];
    let d = mxbi::mx::block_dot(
        &ca,
        130,
        mxbi::format::Format::E4M3,
        &cb,
        120,
        mxbi::format::Format::E4M3,
    )
    .unwrap();
    let mxbi::mx::BlockDot::Finite { sum, exp } = d else {
        panic!("{d:?}")
    };
    let exact = mxbi::gemm::step::Exact {
        neg: sum < 0,
        mag: sum.unsigned_abs(),
        exp,
    };
    assert_eq!(
        got.to_bits(),
        mxbi::gemm::step::round_exact(exact, 23, mxbi::gemm::step::Round::Rne).to_bits()
    );
    // within half an f32 ulp of the exact dot (no absolute slack)
    assert_relative_eq!(got as f64, d.to_f64(), epsilon = 0.0, max_relative = 2f64.powi(-24));
    // dequant with fma: a chain over dequantized values
    let deq = gemm_generic(&"fma".parse().unwrap(), &p, None).unwrap()[0];
    let mut acc = 0f32;
    for i in 0..32 {
        let x = (mxbi::format::Format::E4M3.decode_f64(ca[i] as u16) * 8.0) as f32;
        let y = (mxbi::format::Format::E4M3.decode_f64(cb[i] as u16) * 2f64.powi(-7)) as f32;
        acc = x.mul_add(y, acc);
    }
    assert_eq!(deq.to_bits(), acc.to_bits());
}

#[test]
fn generic_results_do_not_depend_on_thread_count() {
    let (m, n, k) = (16, 8, 200);
    let a = rand_vals(m * k, 7, 25);
    let b = rand_vals(k * n, 8, 25);
    for o in ["fma;split=3;reduce=pairwise", "muladd;lanes=8"] {
        let order: Order = o.parse().unwrap();
        let p = prob(&a, &b, m, n, k);
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let two = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let r1 = one.install(|| gemm_generic(&order, &p, None).unwrap());
        let r2 = two.install(|| gemm_generic(&order, &p, None).unwrap());
        assert_eq!(r1, r2, "{o}");
        // row-only mode equals those rows of the full result
        let rows = [3usize, 0, 15];
        let sel = gemm_generic(&order, &p, Some(&rows)).unwrap();
        let full = ArrayView2::from_shape((m, n), &r1).unwrap();
        assert_eq!(
            ArrayView2::from_shape((rows.len(), n), &sel).unwrap(),
            full.select(Axis(0), &rows)
        );
    }
}

#[test]
fn trace_lists_every_node_and_ends_at_the_output() {
    let (m, n, k) = (2, 2, 40);
    let a = rand_vals(m * k, 9, 5);
    let b = rand_vals(k * n, 10, 5);
    let o: Order = "fma;split=2;reduce=serial".parse().unwrap();
    let p = prob(&a, &b, m, n, k);
    let t = trace(&o, &p, 1, 0).unwrap();
    assert_eq!(t.len(), o.compile(k).nodes.len());
    assert_eq!(
        t.last().unwrap().value.to_bits(),
        gemm_generic(&o, &p, None).unwrap()[2].to_bits()
    );
    assert!(t[1].op.contains("fma(%0, k=0)"));
}
