//! The accuracy module: every metric against hand-computed values, the
//! exact golden against independent integer arithmetic, the ULP view and
//! its labels, each standard passing and failing, the one table in sync
//! with docs/ACCURACY.md, and seed 004 reproduced (biased bf16 outputs near
//! 1.0: worst error exactly one bf16 step, the scoped atol between it and
//! eps, the cancellation case labelled).

use approx::{assert_abs_diff_eq, assert_relative_eq};
use mxbi::accuracy::golden::{self, round_to, Bound, ExactSum};
use mxbi::accuracy::metrics::{metrics, relative_error};
use mxbi::accuracy::scoped::{round_above, scoped, Proposal, Sample};
use mxbi::accuracy::standards::{evaluate, table_markdown, Case, Standard, Status};
use mxbi::accuracy::ulp::{self, Label};
use mxbi::accuracy::{judge, Golden};
use mxbi::format::{Format, Input};
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::io::DType;
use mxbi::rng::SplitMix64;
use mxbi::subject::{Model, Subject};

fn p2(e: i32) -> f64 {
    mxbi::format::pow2(e)
}

// ---------------------------------------------------------------- metrics

#[test]
fn metrics_match_hand_computed_values() {
    let a = [1.0, 2.5, -1.0, 0.0, 7.0];
    let g = [1.0, 2.0, -0.5, 0.0, f64::NAN];
    let m = metrics(&a, &g);
    assert_eq!(m.judged, 4);
    assert_eq!(m.golden_nonfinite, 1);
    assert_eq!(m.nonfinite, 0);
    // RE: 0, 0.5/2.0000001, 0.5/0.5000001, 0
    assert_eq!(relative_error(2.5, 2.0), 0.5 / 2.0000001);
    assert_eq!(m.max_re, 0.5 / 0.5000001);
    assert_eq!(m.max_re_at, Some(2));
    assert_eq!(m.avg_re, (0.5 / 2.0000001 + 0.5 / 0.5000001) / 4.0);
    // RMSE = sqrt((0.25 + 0.25) / 4)
    assert_eq!(m.rmse, 0.125f64.sqrt());
    // EB = (0 + 0.5/2 - 0.5/1 + 0) / 4
    assert_eq!(m.eb, -0.0625);
    assert_eq!(m.max_abs, 0.5);
    // an output NaN where the golden is finite is counted, not summed
    let m = metrics(&[f64::NAN, 1.0], &[1.0, 1.0]);
    assert_eq!((m.judged, m.nonfinite, m.max_re, m.rmse), (2, 1, 0.0, 0.0));
    // RE near zero uses the 1e-7 floor
    assert_eq!(relative_error(1e-7, 0.0), 1.0);
}

#[test]
fn the_double_benchmark_ratio_uses_the_error_threshold_floor() {
    // bf16, error_thd = 2^-8: a benchmark error below it is replaced by it
    let g = [1.0, 1.0];
    let bench = [1.0, 1.0]; // zero error
    let act = [1.0 + p2(-7), 1.0]; // RE 2^-7 / (1 + 1e-7)
    let case = Case {
        dtype: DType::BF16,
        actual: &act,
        benchmark: Some(&bench),
        golden: &g,
        golden_rounded: &g,
    };
    let v = evaluate(&Standard::Atk, &case).unwrap();
    let r = v.ratios.unwrap();
    let re = p2(-7) / (1.0 + 1e-7);
    assert_eq!(r.max_re, re / p2(-8));
    assert_eq!(r.avg_re, (re / 2.0) / p2(-8));
    assert_eq!(r.rmse, (p2(-14) / 2.0).sqrt() / p2(-8));
    // MaxRE ratio ~2 <= 10, AvgRE ratio ~1 <= 2, RMSE ratio ~1.41 <= 2, |EB| = 2^-8 <= 2^-7
    assert_eq!(v.status, Status::Pass, "{v:#?}");
    assert_eq!(v.level.as_deref(), Some("L1"));
    // strict: MaxRE ratio ~2 <= 2 fails only just: 2/(1+1e-7) < 2 passes; RMSE 1.41 > 1.2 fails
    let s = evaluate(&Standard::AtkStrict, &case).unwrap();
    assert_eq!(s.status, Status::Fail);
    assert_eq!(evaluate(&Standard::AtkLevel(1), &case).unwrap().status, Status::Pass);
    assert_eq!(evaluate(&Standard::AtkLevel(2), &case).unwrap().status, Status::Fail);
}

#[test]
fn each_standard_passes_and_fails() {
    let g = [0.5, 1.0, 2.0, 4.0];
    let same = g;
    let off = [0.5, 1.0, 2.0, 4.5]; // one element off by 0.5 at 4 (RE 1/8)
    let ev = |std: Standard, dtype: DType, a: &[f64], b: Option<&[f64]>| {
        evaluate(
            &std,
            &Case {
                dtype,
                actual: a,
                benchmark: b,
                golden: &g,
                golden_rounded: &g,
            },
        )
    };
    // atk: exact actual passes, the planted error fails (MaxRE ratio 2^-3 / 2^-8 = 32 > 10)
    assert_eq!(
        ev(Standard::Atk, DType::BF16, &same, Some(&same)).unwrap().status,
        Status::Pass
    );
    let v = ev(Standard::Atk, DType::BF16, &off, Some(&same)).unwrap();
    assert_eq!(v.status, Status::Fail);
    assert_abs_diff_eq!(v.ratios.unwrap().max_re, 32.0, epsilon = 1e-5);
    // ... unless the benchmark is as bad (the graded L0 ratios; atk also bounds |EB|)
    assert_eq!(
        ev(Standard::AtkLevel(0), DType::BF16, &off, Some(&off)).unwrap().status,
        Status::Pass
    );
    assert_eq!(
        ev(Standard::Atk, DType::BF16, &off, Some(&off)).unwrap().status,
        Status::Fail
    );
    // single: T(bf16) = 2^-7: AvgRE 2^-5 fails; T(e5m2) = 2^-2: AvgRE 2^-5 < 2^-2, MaxRE 2^-3 < 10 * 2^-2 passes
    assert_eq!(
        ev(Standard::Single, DType::BF16, &off, None).unwrap().status,
        Status::Fail
    );
    assert_eq!(
        ev(Standard::Single, DType::BF16, &same, None).unwrap().status,
        Status::Pass
    );
    assert_eq!(
        ev(Standard::Single, DType::F8E5M2, &off, None).unwrap().status,
        Status::Pass
    );
    // msprobe bands: ratio of RMSE and MaxRE without a floor
    let half = [0.5, 1.0, 2.0, 4.25];
    let v = ev(Standard::Msprobe, DType::BF16, &off, Some(&half)).unwrap();
    // RMSE ratio 2 (warn), MaxRE ratio 2 (warn)
    assert_eq!(v.status, Status::Warn, "{v:#?}");
    assert_eq!(v.checks[1].value, 2.0);
    assert_eq!(
        ev(Standard::Msprobe, DType::BF16, &off, Some(&same)).unwrap().status,
        Status::Fail
    );
    assert_eq!(
        ev(Standard::Msprobe, DType::BF16, &half, Some(&off)).unwrap().status,
        Status::Pass
    );
    // msprobe-ulp: bf16 threshold 1 ULP; 4.5 is 16 ULP from 4 (bf16 step 2^-5 at 4)
    assert_eq!(
        ev(Standard::MsprobeUlp, DType::BF16, &off, Some(&same)).unwrap().status,
        Status::Fail
    );
    // ... passes when the benchmark has more elements over it
    let worse = [0.75, 1.0, 2.5, 4.5];
    assert_eq!(
        ev(Standard::MsprobeUlp, DType::BF16, &off, Some(&worse))
            .unwrap()
            .status,
        Status::Pass
    );
    // msprobe-binary: bit identity with the benchmark
    assert_eq!(
        ev(Standard::MsprobeBinary, DType::BF16, &off, Some(&off))
            .unwrap()
            .status,
        Status::Pass
    );
    let v = ev(Standard::MsprobeBinary, DType::BF16, &off, Some(&same)).unwrap();
    assert_eq!((v.status, v.checks[0].value), (Status::Fail, 0.25));
    // assert-close: bf16 defaults rtol 1.6e-2, atol 1e-5: 0.5 > 1e-5 + 0.064
    assert_eq!(
        ev(
            Standard::AssertClose { rtol: None, atol: None },
            DType::BF16,
            &off,
            None
        )
        .unwrap()
        .status,
        Status::Fail
    );
    let loose = Standard::AssertClose {
        rtol: Some(0.125),
        atol: Some(0.0),
    };
    assert_eq!(ev(loose, DType::BF16, &off, None).unwrap().status, Status::Pass);
    let tight = Standard::AssertClose {
        rtol: Some(0.12),
        atol: Some(0.0),
    };
    assert_eq!(ev(tight, DType::BF16, &off, None).unwrap().status, Status::Fail);
    // no threshold for the dtype, no benchmark: cannot judge
    assert!(ev(Standard::Atk, DType::F8E4M3, &same, Some(&same))
        .unwrap_err()
        .contains("error_thd"));
    assert!(ev(Standard::Atk, DType::BF16, &same, None)
        .unwrap_err()
        .contains("needs a benchmark"));
}

#[test]
fn nan_and_inf_follow_the_double_benchmark_rules() {
    let g = [1.0, f64::NAN, f64::INFINITY];
    let ev = |a: &[f64], b: &[f64], std: Standard| {
        evaluate(
            &std,
            &Case {
                dtype: DType::F32,
                actual: a,
                benchmark: Some(b),
                golden: &g,
                golden_rounded: &g,
            },
        )
    };
    // a non-finite golden passes whatever the output
    let v = ev(&[1.0, 5.0, f64::NAN], &[1.0, 1.0, 1.0], Standard::Atk).unwrap();
    assert_eq!(
        (v.status, v.actual.judged, v.actual.golden_nonfinite),
        (Status::Pass, 1, 2)
    );
    // an actual NaN where the golden is finite fails
    assert_eq!(
        ev(&[f64::NAN, 0.0, 0.0], &[1.0, 1.0, 1.0], Standard::Atk)
            .unwrap()
            .status,
        Status::Fail
    );
    // a benchmark NaN there: the benchmark cannot be formed
    assert!(ev(&[1.0, 0.0, 0.0], &[f64::INFINITY, 1.0, 1.0], Standard::Atk)
        .unwrap_err()
        .contains("cannot be formed"));
    // a standard without a benchmark ignores one that cannot be formed
    assert_eq!(
        ev(&[1.0, 0.0, 0.0], &[f64::INFINITY, 1.0, 1.0], Standard::Single)
            .unwrap()
            .status,
        Status::Pass
    );
    // assert_close: equal_nan=False, so any NaN fails; Inf must match
    let ac = Standard::AssertClose { rtol: None, atol: None };
    assert_eq!(ev(&[1.0, 5.0, f64::INFINITY], &g, ac).unwrap().status, Status::Fail);
    let g2 = [1.0, f64::INFINITY];
    let c = |a: &[f64]| {
        evaluate(
            &ac,
            &Case {
                dtype: DType::F32,
                actual: a,
                benchmark: None,
                golden: &g2,
                golden_rounded: &g2,
            },
        )
        .unwrap()
        .status
    };
    assert_eq!(c(&[1.0, f64::INFINITY]), Status::Pass);
    assert_eq!(c(&[1.0, f64::NEG_INFINITY]), Status::Fail);
}

#[test]
fn the_table_in_the_docs_is_the_table_in_the_code() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ACCURACY.md")).unwrap();
    let table = table_markdown();
    assert!(doc.contains(&table), "docs/ACCURACY.md must contain exactly:\n{table}");
    // and the numbers of the notes, spot-checked
    assert!(
        table.contains("| atk* | error_thd | 2^-11 | 2^-8 | 2^-14 | 2^-14 | - | - | §6 |"),
        "{table}"
    );
    assert!(
        table.contains("| single | T | 2^-10 | 2^-7 | 2^-13 | - | 2^-3 | 2^-2 | §6 |"),
        "{table}"
    );
    assert!(
        table.contains("| assert-close | rtol | 0.001 | 0.016 | 1.3e-6 | - | - | - | §11 |"),
        "{table}"
    );
}

// ---------------------------------------------------------------- golden

#[test]
fn the_golden_is_exact_where_f64_is_not() {
    // 2^254 + 2^-298 - 2^254: f64 summation gives 0, the exact sum 2^-298
    let big = f32::from_bits(0x7F00_0000); // 2^127
    let tiny = f32::from_bits(1); // 2^-149
    let (x, abs) = golden::dot_f32(&[big, tiny, -big], &[big, tiny, big]);
    assert_eq!(
        x,
        Input::Finite {
            negative: false,
            sig: 1 << 62,
            exp: -298 - 62
        }
    );
    assert_eq!(round_to(x, DType::F64).unwrap(), p2(-298));
    assert_eq!(abs, 2.0 * p2(254));
    assert_eq!((big as f64 * big as f64) + p2(-298) - (big as f64 * big as f64), 0.0);
    // the largest products: 2^128 (1 - 2^-24) squared, twice, is still exact
    let max = f32::MAX;
    let (x, _) = golden::dot_f32(&[max, max], &[max, max]);
    assert_eq!(round_to(x, DType::F64).unwrap(), 2.0 * (max as f64) * (max as f64));
    assert_eq!(round_to(x, DType::F32).unwrap(), f64::INFINITY);
    // Inf x 0 is NaN, Inf - Inf is NaN
    assert!(matches!(golden::dot_f32(&[f32::INFINITY], &[0.0]).0, Input::Nan { .. }));
    assert!(matches!(
        golden::dot_f32(&[f32::INFINITY, f32::INFINITY], &[1.0, -1.0]).0,
        Input::Nan { .. }
    ));
    assert_eq!(
        golden::dot_f32(&[f32::INFINITY, 1.0], &[-2.0, 1.0]).0,
        Input::Inf { negative: true }
    );
}

#[test]
fn the_golden_matches_independent_integer_arithmetic() {
    // values k * 2^-20 with |k| < 2^20: products are integers times 2^-40,
    // their sum is exact in i128; compare every rounding of the golden
    let mut r = SplitMix64::new(4);
    for trial in 0..200 {
        let k = 1 + r.below(300) as usize;
        let ints: Vec<(i64, i64)> = (0..k)
            .map(|_| (r.range_i64(-(1 << 20), 1 << 20), r.range_i64(-(1 << 20), 1 << 20)))
            .collect();
        let a: Vec<f32> = ints.iter().map(|p| p.0 as f32 * (p2(-20) as f32)).collect();
        let b: Vec<f32> = ints.iter().map(|p| p.1 as f32 * (p2(-20) as f32)).collect();
        let want: i128 = ints.iter().map(|&(x, y)| x as i128 * y as i128).sum();
        let (x, _) = golden::dot_f32(&a, &b);
        let want_input = if want == 0 {
            Input::Zero { negative: false }
        } else {
            // an i128 below 2^63 in magnitude is an exact Input
            Input::Finite {
                negative: want < 0,
                sig: want.unsigned_abs() as u64,
                exp: -40,
            }
        };
        for dtype in [
            DType::F64,
            DType::F32,
            DType::BF16,
            DType::F16,
            DType::F8E4M3,
            DType::F8E5M2,
        ] {
            assert_eq!(
                round_to(x, dtype).unwrap().to_bits(),
                round_to(want_input, dtype).unwrap().to_bits(),
                "trial {trial} {}",
                dtype.name()
            );
        }
        // the rounding to f64 of a value of at most 63 bits is the i128's nearest f64
        assert_eq!(round_to(x, DType::F64).unwrap(), want as f64 * p2(-40), "trial {trial}");
    }
}

#[test]
fn the_sticky_bit_keeps_single_rounding() {
    // 1 + 2^-8 + 2^-200: rounds up to bf16 (1 + 2^-7) only because of the
    // tiny term (1 + 2^-8 alone is a tie, to even: 1.0)
    let mut s = ExactSum::new();
    s.add(false, 1, 0).unwrap();
    s.add(false, 1, -8).unwrap();
    assert_eq!(round_to(s.value(), DType::BF16).unwrap(), 1.0);
    s.add(false, 1, -200).unwrap();
    assert_eq!(round_to(s.value(), DType::BF16).unwrap(), 1.0 + p2(-7));
    // and the f64 route would have lost it
    assert_eq!(
        round_to(Input::from_f64(1.0 + p2(-8) + p2(-200)), DType::BF16).unwrap(),
        1.0
    );
    // out of range terms are refused, not rounded
    assert!(s.add(false, 1, -301).is_err());
    assert!(s.add(false, 1, 404).is_err());
}

#[test]
fn the_mx_golden_is_the_sum_of_exact_block_dots() {
    use mxbi::mx::MxFormat;
    let (m, n, k) = (2, 3, 64);
    let mut r = SplitMix64::new(9);
    // E4M3 codes without NaN (0x7F/0xFF)
    let code = |r: &mut SplitMix64| loop {
        let c = r.below(256) as u8;
        if c & 0x7F != 0x7F {
            return c;
        }
    };
    let a: Vec<u8> = (0..m * k).map(|_| code(&mut r)).collect();
    let b: Vec<u8> = (0..k * n).map(|_| code(&mut r)).collect();
    // scales within 2^10 of each other, so the i128 below cannot overflow
    let sa: Vec<u8> = (0..m * 2).map(|_| 120 + r.below(10) as u8).collect();
    let sb: Vec<u8> = (0..2 * n).map(|_| 120 + r.below(10) as u8).collect();
    let p = Problem {
        a: Matrix::Mx {
            codes: &a,
            scales: &sa,
            format: MxFormat::Fp8E4M3,
        },
        b: Matrix::Mx {
            codes: &b,
            scales: &sb,
            format: MxFormat::Fp8E4M3,
        },
        m,
        n,
        k,
        b_layout: BLayout::Kn,
    };
    let g = golden::gemm(&p).unwrap();
    assert_eq!(g.bound, Bound::Exact);
    // independent: every product is (int * 2^-9) (int * 2^-9) 2^(sa-127) 2^(sb-127);
    // scale all to the common exponent 2^(-18 - 254 + 240) in i128
    for i in 0..m {
        for j in 0..n {
            let mut sum: i128 = 0;
            for kk in 0..k {
                let q = |c: u8| -> i128 {
                    let v = Format::E4M3.decode_f64(c as u16) * 512.0;
                    v as i128
                };
                let sh = (sa[i * 2 + kk / 32] as i32 + sb[(kk / 32) * n + j] as i32 - 240) as u32;
                sum += (q(a[i * k + kk]) * q(b[kk * n + j])) << sh;
            }
            let mag = sum.unsigned_abs();
            let tz = mag.trailing_zeros().min(127);
            let (mag, e) = (mag >> tz, -18 - 254 + 240 + tz as i32);
            assert!(mag >> 63 == 0);
            let want = if sum == 0 {
                Input::Zero { negative: false }
            } else {
                Input::Finite {
                    negative: sum < 0,
                    sig: mag as u64,
                    exp: e,
                }
            };
            let x = g.exact.as_ref().unwrap()[i * n + j];
            for dtype in [DType::F64, DType::F32, DType::BF16] {
                assert_eq!(round_to(x, dtype).unwrap(), round_to(want, dtype).unwrap(), "({i},{j})");
            }
        }
    }
}

#[test]
fn fp8_products_are_exact() {
    for (ca, cb) in [(0x7Eu16, 0x7Eu16), (0x01, 0x01), (0xB9, 0x3A)] {
        let want = Format::E4M3.decode_f64(ca) * Format::E4M3.decode_f64(cb);
        assert_eq!(golden::fp8_product(ca, Format::E4M3, cb, Format::E4M3), want);
    }
    assert_eq!(
        golden::fp8_product(0x7E, Format::E4M3, 0x7E, Format::E4M3),
        448.0 * 448.0
    );
    assert_eq!(
        golden::fp8_product(0x01, Format::E4M3, 0x01, Format::E5M2),
        p2(-9) * p2(-16)
    );
}

#[test]
fn the_rms_norm_golden_states_its_bound() {
    let x = [3.0f32, 4.0];
    let g = golden::rms_norm(&x, 2, &[1.0, 2.0], 0.0).unwrap();
    // rms = sqrt(25/2); y = [3, 8] / sqrt(12.5)
    let r = 1.0 / 12.5f64.sqrt();
    let rel = golden::RMS_NORM_REL;
    assert_relative_eq!(g.values[0], 3.0 * r, epsilon = 0.0, max_relative = rel);
    assert_relative_eq!(g.values[1], 8.0 * r, epsilon = 0.0, max_relative = rel);
    assert_eq!(
        g.bound,
        Bound::Relative {
            rel: golden::RMS_NORM_REL
        }
    );
    assert!(golden::rms_norm(&x, 3, &[1.0; 3], 0.0).is_err());
}

// ---------------------------------------------------------------- ULP

#[test]
fn ulp_distances_steps_and_eps() {
    let d = |a: f64, b: f64, t: DType| ulp::distance(a, b, t).unwrap();
    assert_eq!(d(1.0, 1.0 + p2(-7), DType::BF16), Some(1));
    assert_eq!(d(1.0 - p2(-8), 1.0, DType::BF16), Some(1));
    assert_eq!(d(-0.0, 0.0, DType::BF16), Some(0));
    assert_eq!(d(-p2(-133), p2(-133), DType::BF16), Some(2)); // the smallest subnormals
    assert_eq!(d(448.0, 416.0, DType::F8E4M3), Some(1));
    assert_eq!(d(-1.0, 1.0, DType::F8E4M3), Some(2 * 0x38));
    assert_eq!(d(1.0, 1.0 + p2(-23), DType::F32), Some(1));
    assert_eq!(d(1.0, 1.0 + p2(-52) * 3.0, DType::F64), Some(3));
    assert_eq!(d(f64::NAN, 1.0, DType::F32), None);
    assert!(ulp::distance(1.0 + p2(-8), 1.0, DType::BF16).is_err()); // not a bf16 value
    assert_eq!(ulp::eps(DType::BF16).unwrap(), p2(-7));
    assert_eq!(ulp::eps(DType::F16).unwrap(), p2(-10));
    assert_eq!(ulp::eps(DType::F32).unwrap(), p2(-23));
    assert_eq!(ulp::step(DType::BF16, 0.75).unwrap(), p2(-8));
    assert_eq!(ulp::step(DType::BF16, -1.0).unwrap(), p2(-7));
    assert_eq!(ulp::step(DType::F16, 0.0).unwrap(), p2(-24));
    assert_eq!(ulp::step(DType::F16, 0.999).unwrap(), p2(-11));
}

#[test]
fn the_ulp_view_bins_labels_and_ranks() {
    // f32 values 1 + j * 2^-23 against golden 1.0: distances 0,1,2,3,5,8,9
    let ds = [0u64, 1, 2, 3, 5, 8, 9];
    let out: Vec<f64> = ds.iter().map(|&j| 1.0 + j as f64 * p2(-23)).collect();
    let g = vec![1.0; ds.len()];
    let v = ulp::view(&out, &g, &g, None, DType::F32, 3).unwrap();
    let bins: Vec<(u64, u64, usize)> = v.histogram.iter().map(|b| (b.lo, b.hi, b.count)).collect();
    assert_eq!(
        bins,
        [(0, 0, 1), (1, 1, 1), (2, 2, 1), (3, 4, 1), (5, 8, 2), (9, 16, 1)]
    );
    assert_eq!(v.max_ulp, 9);
    assert_eq!(v.worst.iter().map(|e| e.index).collect::<Vec<_>>(), [6, 5, 4]);
    // no terms known: more than 1 ULP is unknown
    assert_eq!(v.labels[&Label::Unknown], 5);
    assert_eq!((v.labels[&Label::Exact], v.labels[&Label::Rounding]), (1, 1));
}

#[test]
fn cancellation_is_told_from_excess() {
    // golden 2^-10 from terms whose absolute sum is 0.75: bf16 step at 0.75 is 2^-8
    let g = p2(-10);
    let out_near = p2(-10) + p2(-12); // 2^-12 off: many ULP at 2^-10, below one step at 0.75
    let dist = ulp::distance(out_near, g, DType::BF16).unwrap().unwrap();
    assert_eq!(dist, 32); // bf16 step at 2^-10 is 2^-17
    assert_eq!(
        ulp::label(DType::BF16, Some(dist), p2(-12), Some(0.75), g).unwrap(),
        Label::Cancellation
    );
    // the same error without cancellation (terms sum to the result) is excess
    assert_eq!(
        ulp::label(DType::BF16, Some(dist), p2(-12), Some(g), g).unwrap(),
        Label::Excess
    );
    // an error above one step at the terms' magnitude is excess even with cancellation
    assert_eq!(
        ulp::label(DType::BF16, Some(600), p2(-7), Some(0.75), g).unwrap(),
        Label::Excess
    );
    assert_eq!(ulp::cancellation_ratio(0.75, g), 768.0);
    assert_eq!(ulp::cancellation_ratio(1.0, 0.0), f64::INFINITY);
}

// ---------------------------------------------------------------- scoped

#[test]
fn proposals_sit_above_the_worst_and_below_eps() {
    assert_eq!(round_above(0.00390625, p2(-7)), Some(5e-3));
    assert_eq!(round_above(4.8828125e-4, p2(-10)), Some(5e-4));
    assert_eq!(round_above(0.0075, p2(-7)), Some(7.6e-3));
    assert_eq!(round_above(0.0078, p2(-7)), None);
    assert_eq!(round_above(0.0, p2(-7)), Some(0.0));
    assert_eq!(round_above(1e-3, 1.0), Some(2e-3));
    let a = [1.0, 0.5 + p2(-8)];
    let e = [1.0, 0.5];
    let s = scoped(&[
        Sample {
            scope: "bf16 bias=on",
            dtype: DType::BF16,
            actual: &a,
            expected: &e,
        },
        Sample {
            scope: "bf16 bias=on",
            dtype: DType::BF16,
            actual: &e,
            expected: &e,
        },
        Sample {
            scope: "exact",
            dtype: DType::BF16,
            actual: &e,
            expected: &e,
        },
        Sample {
            scope: "wide",
            dtype: DType::BF16,
            actual: &[2.0 + p2(-6)],
            expected: &[2.0],
        },
        Sample {
            scope: "zero",
            dtype: DType::BF16,
            actual: &[p2(-20)],
            expected: &[0.0],
        },
    ])
    .unwrap();
    let by = |n: &str| s.iter().find(|x| x.scope == n).unwrap();
    let on = by("bf16 bias=on");
    assert_eq!((on.cases, on.elements, on.worst_abs, on.worst_ulp), (2, 4, p2(-8), 1));
    assert_eq!(on.atol, Proposal::Value { value: 5e-3 });
    // the relative worst, 2^-8 / 0.5, is one eps: no rtol below eps
    assert!(matches!(&on.rtol, Proposal::Impossible { why } if why.contains("at least one eps")));
    assert_eq!(by("exact").atol, Proposal::Value { value: 0.0 });
    assert!(matches!(&by("wide").atol, Proposal::Impossible { why } if why.contains("at least one eps")));
    assert!(matches!(&by("zero").rtol, Proposal::Impossible { why } if why.contains("expect exactly 0")));
    assert_eq!(by("zero").atol, Proposal::Value { value: 1e-6 });
    // a scope mixing dtypes is refused
    assert!(scoped(&[
        Sample {
            scope: "x",
            dtype: DType::BF16,
            actual: &e,
            expected: &e
        },
        Sample {
            scope: "x",
            dtype: DType::F16,
            actual: &e,
            expected: &e
        },
    ])
    .is_err());
}

// ---------------------------------------------------------------- seed 004

/// Approximately standard normal, by arithmetic only (the sum of four
/// uniforms, centred and scaled): the same on every machine.
fn normal(r: &mut SplitMix64) -> f64 {
    let s: f64 = (0..4).map(|_| (r.next_u64() >> 11) as f64 * p2(-53)).sum();
    (s - 2.0) * 3f64.sqrt()
}

struct Seed004 {
    actual: Vec<f64>,
    benchmark: Vec<f64>,
    golden: Golden,
}

/// `y = A x B + bias` in type `t` (bf16 or f16), as in the seed: Xavier
/// inputs, a bias in [-0.75, 0.75) (outputs near, but below, 1.0).
/// The benchmark is the reference (`F.linear`): f32 accumulation with the
/// bias as one more term, one rounding to `t`. The actual is a kernel that
/// rounds its split-K f32 result to `t` and adds the bias in a second
/// rounding (without bias: one rounding, a different order).
fn seed004(t: DType, bias: bool, seed: u64) -> Seed004 {
    let q = |v: f64| round_to(Input::from_f64(v), t).unwrap() as f32;
    let (m, n, k) = (8usize, 64usize, 1024usize);
    let kb = k + bias as usize;
    let mut r = SplitMix64::new(seed);
    let xavier = (2.0 / k as f64).sqrt();
    let mut a = vec![0f32; m * kb];
    let mut b = vec![0f32; kb * n];
    for i in 0..m {
        for j in 0..k {
            a[i * kb + j] = q(normal(&mut r) * xavier);
        }
    }
    for v in &mut b[..k * n] {
        *v = q(normal(&mut r) * xavier);
    }
    if bias {
        for i in 0..m {
            a[i * kb + k] = 1.0;
        }
        for j in 0..n {
            b[k * n + j] = q(((r.next_u64() >> 11) as f64 * p2(-53) * 2.0 - 1.0) * 0.75);
        }
    }
    let out = if t == DType::BF16 { "bf16" } else { "f16" };
    let run = |order: &str, a: &[f32], b: &[f32], kk: usize| -> Vec<f64> {
        let p = Problem {
            a: Matrix::F32(a),
            b: Matrix::F32(b),
            m,
            n,
            k: kk,
            b_layout: BLayout::Kn,
        };
        let s = Model::new(format!("{order};out={out}").parse().unwrap());
        s.run(&p, None).unwrap().into_iter().map(f64::from).collect()
    };
    let benchmark = run("fma", &a, &b, kb);
    let a_mm: Vec<f32> = (0..m).flat_map(|i| a[i * kb..i * kb + k].to_vec()).collect();
    let mm = run("fma;split=4;reduce=pairwise", &a_mm, &b[..k * n], k);
    let actual = mm
        .iter()
        .enumerate()
        .map(|(c, &v)| {
            if !bias {
                return v;
            }
            let mut s = ExactSum::new();
            s.add_input(Input::from_f64(v)).unwrap();
            s.add_input(Input::from_f64(b[k * n + c % n] as f64)).unwrap();
            round_to(s.value(), t).unwrap()
        })
        .collect();
    let p = Problem {
        a: Matrix::F32(&a),
        b: Matrix::F32(&b),
        m,
        n,
        k: kb,
        b_layout: BLayout::Kn,
    };
    Seed004 {
        benchmark,
        actual,
        golden: golden::gemm(&p).unwrap(),
    }
}

#[test]
fn seed_004_one_bf16_step_a_scoped_atol_and_the_cancellation_labelled() {
    let cases: Vec<(DType, bool, u64, Seed004)> = [DType::BF16, DType::F16]
        .into_iter()
        .flat_map(|t| [true, false].map(|bias| (t, bias)))
        .flat_map(|(t, bias)| (1..=3u64).map(move |s| (t, bias, s, seed004(t, bias, s))))
        .collect();
    let names: Vec<String> = cases
        .iter()
        .map(|(t, bias, _, _)| format!("{} bias={}", t.name(), if *bias { "on" } else { "off" }))
        .collect();
    let samples: Vec<Sample> = cases
        .iter()
        .zip(&names)
        .map(|((t, _, _, c), name)| Sample {
            scope: name,
            dtype: *t,
            actual: &c.actual,
            expected: &c.benchmark,
        })
        .collect();
    let scopes = scoped(&samples).unwrap();
    let by = |n: &str| scopes.iter().find(|s| s.scope == n).unwrap();

    // biased bf16 outputs near 1.0: the worst difference is exactly one bf16 step,
    // 2^-8 = 0.00390625 (outputs in [0.5, 1)), about 3.9x the old atol 1e-3
    let on = by("bf16 bias=on");
    assert_eq!(on.worst_abs, 0.00390625, "{on:#?}");
    assert_eq!(on.step_at_worst, Some(on.worst_abs));
    assert!(on.worst_abs_at.as_ref().unwrap().expected.abs() >= 0.5);
    let top = cases
        .iter()
        .flat_map(|c| c.3.benchmark.iter())
        .fold(0f64, |x, y| x.max(y.abs()));
    assert!((0.75..1.0).contains(&top), "outputs near, below 1.0: {top}");
    assert!(on.worst_abs > 1e-3);
    // the scoped atol lies between the worst case and finfo(bf16).eps
    let Proposal::Value { value: atol } = on.atol else {
        panic!("{on:#?}")
    };
    assert_eq!(atol, 5e-3);
    assert!(on.worst_abs < atol && atol < on.eps && on.eps == 0.0078125);
    // no rtol below eps covers the near-zero output
    assert!(matches!(on.rtol, Proposal::Impossible { .. }), "{on:#?}");
    // the other scopes keep a strict atol of at most 1e-3
    for s in ["bf16 bias=off", "f16 bias=on", "f16 bias=off"] {
        let sc = by(s);
        let Proposal::Value { value } = sc.atol else {
            panic!("{sc:#?}")
        };
        // above the worst (0 when the scope is bit-identical), at most 1e-3, below eps
        assert!(sc.worst_abs < value || sc.worst_abs == 0.0 && value == 0.0, "{sc:#?}");
        assert!(value <= 1e-3 && value < sc.eps, "{sc:#?}");
    }
    assert_eq!(by("f16 bias=on").worst_abs, 4.8828125e-4); // one f16 step in [0.5, 1)

    // against the exact golden: the near-zero outputs are many ULP off and
    // labelled cancellation; nothing is labelled excess. The double
    // benchmark's AvgRE and RMSE ratios pass everywhere; its MaxRE ratio is
    // made by those near-zero outputs (RE = |a-g|/(|g|+1e-7) grows as g
    // nears 0) and fails 4 of the 6 biased cases: the kernel's second
    // rounding is visible there, and the ULP view says why.
    let mut maxre_failures = 0;
    for (t, bias, seed, c) in &cases {
        let rep = judge(&Standard::Atk, *t, &c.actual, Some(&c.benchmark), &c.golden).unwrap();
        let what = format!("{} bias={bias} seed {seed}: {}", t.name(), rep.text());
        assert!(!rep.ulp.labels.contains_key(&Label::Excess), "{what}");
        assert!(
            !rep.ulp_benchmark.as_ref().unwrap().labels.contains_key(&Label::Excess),
            "{what}"
        );
        for ch in &rep.verdict.checks {
            assert!(ch.status == Status::Pass || ch.name == "MaxRE ratio", "{what}");
        }
        if rep.verdict.status == Status::Fail {
            maxre_failures += 1;
            assert!(*bias, "{what}");
            let i = rep.verdict.actual.max_re_at.unwrap();
            let g = rep
                .ulp
                .worst
                .iter()
                .find(|e| e.index == i)
                .expect("the MaxRE element is among the worst");
            assert_eq!(g.label, Label::Cancellation, "{what}");
        }
        if *bias {
            // the near-zero outputs: several ULP, labelled cancellation
            let worst = &rep.ulp.worst[0];
            assert!(
                worst.ulp.unwrap() > 1 && worst.label == Label::Cancellation,
                "{worst:#?}"
            );
            assert!(
                worst.cancellation.unwrap() >= 2.0 && worst.golden.abs() < 0.1,
                "{worst:#?}"
            );
        } else {
            assert!(rep.ulp.max_ulp <= 1, "{what}");
            assert_eq!(rep.verdict.level.as_deref(), Some("L2"), "{what}");
        }
    }
    assert_eq!(maxre_failures, 4);

    // a zero must be able to fail: at the largest output of a passing case,
    // an error of two bf16 steps at the terms' magnitude is excess, and the
    // double benchmark fails on it
    let (_, bias, _, c) = &cases[3];
    assert!(!bias);
    let pass = judge(&Standard::Atk, DType::BF16, &c.actual, Some(&c.benchmark), &c.golden).unwrap();
    assert_eq!(pass.verdict.status, Status::Pass);
    let big = (0..c.actual.len())
        .max_by(|&i, &j| c.actual[i].abs().total_cmp(&c.actual[j].abs()))
        .unwrap();
    let terms = c.golden.abs_sum.as_ref().unwrap()[big];
    let mut bad = c.actual.clone();
    bad[big] += 2.0 * ulp::step(DType::BF16, terms).unwrap() * bad[big].signum();
    let rep = judge(&Standard::Atk, DType::BF16, &bad, Some(&c.benchmark), &c.golden).unwrap();
    let e = rep.ulp.worst.iter().find(|e| e.index == big).unwrap();
    assert_eq!(e.label, Label::Excess, "{e:#?}");
    assert_eq!(rep.verdict.status, Status::Fail, "{}", rep.text());
}

/// The exact sum's range, at both ends: the largest term it takes, and the
/// next binade refused (a mutation of the top bound lived, docs/TESTING.md).
#[test]
fn the_exact_sum_takes_terms_up_to_its_top_and_refuses_beyond() {
    use mxbi::accuracy::golden::{LSB_EXP, TOP_EXP};
    let mut s = ExactSum::new();
    // mag = 1 (one bit): the largest exponent allowed is TOP_EXP - 65
    assert!(s.add(false, 1, TOP_EXP - 65).is_ok());
    assert!(s.add(false, 1, TOP_EXP - 64).is_err());
    assert!(s.add(false, 3, TOP_EXP - 66).is_ok());
    assert!(s.add(false, 3, TOP_EXP - 65).is_err());
    assert!(s.add(true, 1, LSB_EXP).is_ok());
    assert!(s.add(true, 1, LSB_EXP - 1).is_err());
}

/// A term whose shifted magnitude spans three limbs keeps its top bits
/// (a mutation of the third limb's shift lived, docs/TESTING.md): adding
/// it whole equals adding its high and low bits apart.
#[test]
fn a_term_spanning_three_limbs_is_added_whole() {
    use mxbi::accuracy::golden::LSB_EXP;
    let (hi, lo) = (3u128 << 100, 5u128);
    // shift 40 within a limb: bits 100..101 land at 140..141, past 128
    let exp = LSB_EXP + 2 * 64 + 40;
    let mut whole = ExactSum::new();
    whole.add(false, hi | lo, exp).unwrap();
    let mut apart = ExactSum::new();
    apart.add(false, 3, exp + 100).unwrap();
    apart.add(false, lo, exp).unwrap();
    assert_eq!(whole, apart);
}

/// A carry ripples through every limb it reaches (a mutation of the
/// carry loop's bound lived, docs/TESTING.md): three full limbs plus one
/// are one unit of the limb above them.
#[test]
fn a_carry_ripples_past_three_full_limbs() {
    use mxbi::accuracy::golden::LSB_EXP;
    let limb = |i: i32| LSB_EXP + 64 * i;
    let mut s = ExactSum::new();
    for i in 4..7 {
        s.add(false, u64::MAX as u128, limb(i)).unwrap();
    }
    s.add(false, 1, limb(4)).unwrap();
    let mut want = ExactSum::new();
    want.add(false, 1, limb(7)).unwrap();
    assert_eq!(s, want);
}

/// A NaN factor makes the product NaN whatever the other factor is (a
/// mutation deleting the NaN arm of `ExactSum::add_product` lived,
/// docs/TESTING.md): NaN x 0 and NaN x Inf are NaN, not zero or infinite.
#[test]
fn a_nan_factor_makes_the_exact_sum_nan() {
    for other in [0.0f32, -0.0, 1.5, f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
        for (a, b) in [(f32::NAN, other), (other, f32::NAN)] {
            let mut s = ExactSum::new();
            s.add_product_f32(a, b).unwrap();
            assert!(matches!(s.value(), Input::Nan { .. }), "{a} x {b}: {:?}", s.value());
        }
    }
}

/// An infinite product takes the sign of the two factors' signs combined by
/// exclusive or (a mutation that combined them by `|` lived,
/// docs/TESTING.md): -Inf x -1 is +Inf, Inf x -2 is -Inf.
#[test]
fn an_infinite_product_takes_the_sign_of_its_factors() {
    let inf = f32::INFINITY;
    for (a, b, negative) in [
        (-inf, -1.0, false),
        (-1.0, -inf, false),
        (inf, -2.0, true),
        (-0.5, inf, true),
        (inf, 3.0, false),
        (-inf, inf, true),
    ] {
        let mut s = ExactSum::new();
        s.add_product_f32(a, b).unwrap();
        assert_eq!(s.value(), Input::Inf { negative }, "{a} x {b}");
    }
}

/// The exact sum's value keeps its lowest bit, 2^LSB_EXP (a shard-2
/// mutation reading bit 0 as zero lived, docs/TESTING.md): one unit at
/// the bottom of the accumulator is 2^LSB_EXP, not zero, and a unit beside
/// a large term still reaches the sticky bit.
#[test]
fn the_exact_sum_keeps_its_lowest_bit() {
    use mxbi::accuracy::golden::LSB_EXP;
    let mut s = ExactSum::new();
    s.add(false, 1, LSB_EXP).unwrap();
    assert_eq!(
        s.value(),
        Input::Finite {
            negative: false,
            sig: 1 << 62,
            exp: LSB_EXP - 62
        }
    );
    s.add(false, 3, LSB_EXP + 1).unwrap(); // 1 + 6 = 7 units: bits 0, 1, 2
    assert_eq!(
        s.value(),
        Input::Finite {
            negative: false,
            sig: 7 << 60,
            exp: LSB_EXP - 60
        }
    );
}

/// A bit just below the 63-bit window, in the window's lowest limb, sets
/// the sticky bit (shard-2 mutations of the partial limb's mask lived,
/// docs/TESTING.md): 2^264 + 2^201 (in units of 2^LSB_EXP) keeps 2^264
/// in its window and reports the lower bit as sticky.
#[test]
fn a_bit_below_the_window_in_its_own_limb_is_sticky() {
    use mxbi::accuracy::golden::LSB_EXP;
    let mut s = ExactSum::new();
    s.add(false, 1, LSB_EXP + 264).unwrap();
    s.add(false, 1, LSB_EXP + 201).unwrap();
    assert_eq!(
        s.value(),
        Input::Finite {
            negative: false,
            sig: (1 << 62) | 1,
            exp: LSB_EXP + 202
        }
    );
}
