//! The fast GEMM kernels (`gemm::fast`) against the generic tree evaluator,
//! bit for bit: random orders, shapes and inputs (wide exponent spread,
//! subnormals, zeros of both signs, exact cancellation, rare Inf/NaN), with
//! every kernel instruction set this CPU runs; thread-count determinism;
//! row-only evaluation.

use mxbi::format::Format;
use mxbi::gemm::fast::{gemm_isa, Isa};
use mxbi::gemm::{gemm, gemm_generic, prepare, BLayout, Matrix, Problem};
use mxbi::order::{InType, Order};
use proptest::prelude::*;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = self.0;
        (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (x >> 32)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// f32 values for fma/muladd: exponents -40..40 (or -80..-60: subnormal
/// products and sums), subnormals, signed zeros, small integers (exact
/// cancellation); `special` allows a rare Inf/NaN.
fn values(n: usize, rng: &mut Rng, special: bool) -> Vec<f32> {
    let (lo, tiny) = if rng.below(4) == 0 { (80, true) } else { (40, false) };
    let mut v: Vec<f32> = (0..n)
        .map(|_| {
            let r = rng.next();
            let sign = ((r >> 63) as u32) << 31;
            match r % 16 {
                0 => f32::from_bits(sign),
                1 => f32::from_bits(sign | (r >> 20) as u32 & 0x7F_FFFF),
                2..=4 => {
                    let x = ((r >> 8) % 7) as f32 - 3.0;
                    x * [1.0, 0.5, 0.25, 2.0][(r >> 30) as usize % 4] * if tiny { 2f32.powi(-70) } else { 1.0 }
                }
                _ => {
                    let e = ((r >> 24) % if tiny { 21 } else { 81 }) as u32 + 127 - lo;
                    f32::from_bits(sign | e << 23 | (r >> 32) as u32 & 0x7F_FFFF)
                }
            }
        })
        .collect();
    if special && n > 0 && rng.below(4) == 0 {
        let i = rng.below(n as u64) as usize;
        v[i] = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN][rng.below(4) as usize];
    }
    v
}

fn in_format(t: InType) -> Format {
    t.format().expect("no f32 in-type here")
}

/// Values exactly representable in `t`: random codes (full range), or
/// moderate exponents with occasional zeros and subnormals, or (bf16, f32)
/// tiny ones whose products and sums are f32 subnormals.
fn in_values(n: usize, t: InType, rng: &mut Rng, special: bool) -> Vec<f32> {
    let full = rng.below(3) == 0;
    let tiny = matches!(t, InType::Bf16 | InType::F32) && rng.below(3) == 0;
    let mut v: Vec<f32> = (0..n)
        .map(|_| {
            let r = rng.next();
            if t == InType::F32 {
                let e = if tiny {
                    ((r >> 24) % 21) as u32 + 127 - 75
                } else {
                    ((r >> 24) % 61) as u32 + 127 - 30
                };
                return f32::from_bits(((r >> 63) as u32) << 31 | e << 23 | (r >> 32) as u32 & 0x7F_FFFF);
            }
            let f = in_format(t);
            if full {
                loop {
                    let c = (rng.next() % f.code_count() as u64) as u16;
                    let x = f.decode_f32(c);
                    if x.is_finite() {
                        return x;
                    }
                }
            }
            let fi = match t {
                InType::Bf16 => 7,
                InType::F16 => 10,
                InType::E4M3 => 3,
                _ => 2,
            };
            let sign = if r >> 63 != 0 { -1.0 } else { 1.0 };
            let m = ((r >> 8) % (1 << fi)) as f64;
            let x = match r % 10 {
                0 => 0.0,
                1 => m * 2f64.powi(t.emin() - fi),
                _ => {
                    let e = ((r >> 20) % 15) as i32 - if tiny { 70 } else { 7 };
                    (2f64.powi(fi) + m) * 2f64.powi(e.max(t.emin()) - fi)
                }
            };
            (sign * x) as f32
        })
        .collect();
    if special && n > 0 && rng.below(5) == 0 {
        let i = rng.below(n as u64) as usize;
        v[i] = if t == InType::E4M3 {
            f32::NAN
        } else {
            [f32::INFINITY, -f32::INFINITY, f32::NAN][rng.below(3) as usize]
        };
    }
    v
}

const FAMILIES: &[&str] = &[
    "fma",
    "muladd",
    "hopper-bf16",
    "hopper-f16",
    "hopper-fp8-wgmma",
    "hopper-fp8-mma-sync",
    "ampere-bf16",
    "ada-fp8",
    "deepgemm-fp8",
    "mma(k=32,f=25,in=e4m3)",
    "mma(k=8,f=27,in=e5m2,c=late)",
    "mma(k=4,f=30,in=f32)",
    "mma(k=16,f=40,out=20,in=bf16,split=halves)",
];

const KEYS: &[&str] = &[
    "",
    ";split=3",
    ";split=2/interleave;ktile=8",
    ";split=3/interleave;ktile=32;reduce=pairwise",
    ";ktile=16;tile=fresh",
    ";ktile=1;tile=fresh;reduce=pairwise",
    ";split=2;ktile=32;tile=fresh;reduce=pairwise",
    ";split=5;reduce=pairwise",
    ";lanes=4",
    ";lanes=8;reduce=pairwise",
    ";lanes=3;reduce=serial",
    ";out=bf16",
    ";out=f16",
    ";split=4;out=bf16",
    ";promote=64",
    ";promote=32;split=2",
];

fn isas() -> Vec<Isa> {
    [Isa::Portable, Isa::Avx2, Isa::Avx512]
        .into_iter()
        .filter(|i| i.available())
        .collect()
}

struct Case {
    order: Order,
    a: Vec<f32>,
    b: Vec<f32>,
    m: usize,
    n: usize,
    k: usize,
    layout: BLayout,
}

impl Case {
    fn new(order: Order, m: usize, n: usize, k: usize, seed: u64, special: bool) -> Case {
        let mut rng = Rng(seed);
        let (a, b) = match order.mma() {
            Some(mm) => (
                in_values(m * k, mm.input, &mut rng, special),
                in_values(k * n, mm.input, &mut rng, special),
            ),
            None => (values(m * k, &mut rng, special), values(k * n, &mut rng, special)),
        };
        let layout = if rng.below(2) == 0 { BLayout::Kn } else { BLayout::Nk };
        Case {
            order,
            a,
            b,
            m,
            n,
            k,
            layout,
        }
    }
    fn problem(&self) -> Problem<'_> {
        Problem {
            a: Matrix::F32(&self.a),
            b: Matrix::F32(&self.b),
            m: self.m,
            n: self.n,
            k: self.k,
            b_layout: self.layout,
        }
    }
}

fn check(case: &Case, rows: Option<&[usize]>) {
    let p = case.problem();
    let want = gemm_generic(&case.order, &p, rows).unwrap();
    let prep = prepare(&case.order, &p).unwrap();
    let all: Vec<usize> = (0..case.m).collect();
    let rows = rows.unwrap_or(&all);
    for isa in isas() {
        // every family and key of these tests has a fast path
        let got = gemm_isa(&case.order, &prep, rows, isa).unwrap_or_else(|| panic!("{}: no fast path", case.order));
        assert_eq!(got.len(), want.len());
        for (idx, (g, w)) in got.iter().zip(&want).enumerate() {
            let same = g.to_bits() == w.to_bits();
            assert!(
                same,
                "{} M={} N={} K={} {:?} {isa:?}: C[{}, {}] fast {g:e} ({:#010x}) generic {w:e} ({:#010x})",
                case.order,
                case.m,
                case.n,
                case.k,
                case.layout,
                rows[idx / case.n],
                idx % case.n,
                g.to_bits(),
                w.to_bits()
            );
        }
    }
}

fn order(fam: usize, key: usize) -> Option<Order> {
    format!("{}{}", FAMILIES[fam], KEYS[key]).parse().ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn fast_equals_generic(
        fam in 0..FAMILIES.len(),
        key in 0..KEYS.len(),
        m in 1usize..9,
        n in 1usize..9,
        k in 1usize..300,
        seed in any::<u64>(),
        special in any::<bool>(),
    ) {
        let Some(order) = order(fam, key) else { return Ok(()) };
        check(&Case::new(order, m, n, k, seed, special), None);
    }
}

#[test]
fn every_family_and_key_on_fixed_shapes() {
    for fam in 0..FAMILIES.len() {
        for key in 0..KEYS.len() {
            let Some(order) = order(fam, key) else { continue };
            for (i, &(m, n, k)) in [(1, 1, 1), (3, 5, 64), (5, 3, 100), (9, 17, 257), (2, 3, 0)]
                .iter()
                .enumerate()
            {
                check(
                    &Case::new(order, m, n, k, (fam * 100 + key * 10 + i) as u64, i % 2 == 1),
                    None,
                );
            }
        }
    }
}

/// Shapes that cross the kernels' tiles: K blocks, column panels, row
/// panels, mma tiles.
#[test]
fn larger_shapes() {
    for (s, m, n, k) in [
        ("fma", 37, 75, 600),
        ("muladd", 30, 40, 300),
        ("fma;split=3;reduce=pairwise", 29, 70, 530),
        ("fma;split=2/interleave;ktile=100", 25, 66, 520),
        ("fma;lanes=16", 13, 34, 400),
        ("hopper-bf16", 37, 300, 100),
        ("hopper-fp8-mma-sync;split=2", 20, 270, 96),
        ("deepgemm-fp8", 17, 33, 300),
        ("mma(k=4,f=30,in=f32)", 19, 280, 40),
        // more than one row block: B packed once per part for all tiles
        ("fma", 100, 40, 300),
        ("muladd;split=2/interleave;ktile=16", 130, 33, 200),
    ] {
        let order: Order = s.parse().unwrap();
        check(&Case::new(order, m, n, k, m as u64 * 31 + k as u64, false), None);
        check(&Case::new(order, m, n, k, n as u64, true), None);
    }
}

#[test]
fn too_wide_for_the_integer_kernels_falls_back() {
    // F = 60 with f32 inputs: product terms need more than 64 bits
    let case = Case::new("mma(k=4,f=60,in=f32)".parse().unwrap(), 3, 4, 20, 5, false);
    let prep = prepare(&case.order, &case.problem()).unwrap();
    assert!(gemm_isa(&case.order, &prep, &[0, 1, 2], Isa::Portable).is_none());
    // the public entry point still answers (generic evaluator)
    let p = case.problem();
    assert_eq!(
        gemm(&case.order, &p, None).unwrap(),
        gemm_generic(&case.order, &p, None).unwrap()
    );
}

#[test]
fn same_result_with_one_and_two_threads() {
    for s in [
        "fma",
        "fma;split=4;reduce=pairwise",
        "muladd;lanes=8",
        "hopper-bf16",
        "ampere-bf16;out=bf16",
    ] {
        let case = Case::new(s.parse().unwrap(), 70, 90, 400, 77, false);
        let p = case.problem();
        let run = |t: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap();
            pool.install(|| gemm(&case.order, &p, None).unwrap())
        };
        let (one, two) = (run(1), run(2));
        assert!(one.iter().zip(&two).all(|(x, y)| x.to_bits() == y.to_bits()), "{s}");
        // and one row alone
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let row = pool.install(|| gemm(&case.order, &p, Some(&[33])).unwrap());
        assert!(
            row.iter()
                .zip(&one[33 * 90..34 * 90])
                .all(|(x, y)| x.to_bits() == y.to_bits()),
            "{s}"
        );
    }
}

#[test]
fn selected_rows_equal_rows_of_the_full_result() {
    for s in [
        "fma",
        "muladd;split=3",
        "fma;ktile=7;tile=fresh",
        "hopper-bf16;split=2",
        "ada-fp8;lanes=2",
    ] {
        let case = Case::new(s.parse().unwrap(), 40, 50, 200, 3, true);
        let p = case.problem();
        let full = gemm(&case.order, &p, None).unwrap();
        for rows in [
            vec![0],
            vec![39],
            vec![5, 0],
            vec![7, 7, 1],
            (0..40).rev().collect::<Vec<_>>(),
            vec![3; 20],
        ] {
            let got = gemm(&case.order, &p, Some(&rows)).unwrap();
            for (r, &i) in rows.iter().enumerate() {
                let (g, w) = (&got[r * 50..(r + 1) * 50], &full[i * 50..(i + 1) * 50]);
                assert!(
                    g.iter().zip(w).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{s} rows {rows:?}: row {i}"
                );
            }
            check(&case, Some(&rows));
        }
    }
}

/// A step result below the smallest subnormal quantum is -0 under RZ; a
/// later step whose exact sum is zero gives +0 (an integer adder has no -0).
#[test]
fn negative_zero_from_underflow() {
    for (kk, tail) in [
        (16, [0f32, 0.0]),
        (48, [-0.0, 1.0]),
        (48, [0.0, -1.0]),
        (43, [0.0, 1.0]),
        (48, [1.0, 1.0]),
    ] {
        let (m, n) = (3, 4);
        let mut a = vec![0f32; m * kk];
        let mut b = vec![0f32; kk * n];
        for i in 0..m {
            // -2^-150: truncated at F = 25 below C's exponent -126 to -2 units of 2^-151
            a[i * kk] = -(2f32.powi(-90));
            for x in 16..kk {
                a[i * kk + x] = tail[0];
            }
        }
        for j in 0..n {
            b[j] = 2f32.powi(-60);
            for x in 16..kk {
                b[x * n + j] = if j == 3 { 0.0 } else { tail[1] };
            }
        }
        for s in [
            "hopper-bf16",
            "hopper-bf16;split=2;reduce=pairwise",
            "hopper-bf16;out=f16",
        ] {
            let case = Case {
                order: s.parse().unwrap(),
                a: a.clone(),
                b: b.clone(),
                m,
                n,
                k: kk,
                layout: BLayout::Kn,
            };
            check(&case, None);
            let want = gemm_generic(&case.order, &case.problem(), None).unwrap();
            if s == "hopper-bf16" {
                assert_eq!(want[0].to_bits() == 0x8000_0000, kk == 16, "{kk} {tail:?}");
            }
        }
    }
}

/// Sixteen largest-significand products at the exponent of a large C: the
/// exact sum needs 32 bits (the i32 lanes' overflow path).
#[test]
fn fused_sum_beyond_32_bits() {
    let x = 1.9921875f32; // bf16 significand 0xFF
    for sign in [1.0f32, -1.0] {
        for c_sign in [1.0f32, -1.0] {
            let (m, n, k) = (2, 17, 32);
            let mut a = vec![0f32; m * k];
            let mut b = vec![0f32; k * n];
            for i in 0..m {
                for kk in 0..k {
                    a[i * k + kk] = if kk < 16 { c_sign * x } else { sign * x * 4.0 };
                }
            }
            for kk in 0..k {
                for j in 0..n {
                    b[kk * n + j] = if kk < 16 {
                        x
                    } else {
                        x * 8.0 * if j == 5 { 0.5 } else { 1.0 }
                    };
                }
            }
            for s in ["hopper-bf16", "hopper-bf16;out=bf16", "ampere-bf16"] {
                check(
                    &Case {
                        order: s.parse().unwrap(),
                        a: a.clone(),
                        b: b.clone(),
                        m,
                        n,
                        k,
                        layout: BLayout::Kn,
                    },
                    None,
                );
            }
        }
    }
}
