//! Exhaustive check of every f32 -> element-format cast against a second,
//! independently written formulation.
//!
//! The reference here never shifts bits: it sorts the format's finite values
//! (decoded exactly into f64), finds the pair that brackets |x| by
//! comparison, and picks one by comparing |x| with their exact midpoint.
//! The ties-to-even choice is the code whose magnitude is even. Overflow is
//! decided against the "next value after max" of the unbounded-exponent
//! format (max + one ulp of the top binade).
//!
//! CI runs a strided sample of inputs plus every input in the ranges where
//! the formats have boundaries; the full walk of all 2^32 inputs for every
//! format and rounding mode is
//!
//! ```text
//! cargo test --release --test exhaustive -- --ignored --nocapture
//! ```
//!
//! (about 90 s per format and mode on 2 cores, 15 s on 16; set
//! MXBI_EXHAUSTIVE_FORMATS to a comma list such as `e4m3,e8m0`, and
//! MXBI_EXHAUSTIVE_MODES to one such as `nearest-even,up`, to restrict it).
//! The last full run's log is in docs/evidence/.

use mxbi::format::{
    cast_f32_slice, encode_f32, CastPolicy, CodesMut, E8m0Negative, E8m0Zero, Format, NanOut, NanPolicy, Overflow,
    Rounding,
};
use rayon::prelude::*;

/// Non-negative finite values of a format with their magnitude codes,
/// ascending, plus the would-be next value above max.
struct Ladder {
    values: Vec<(f64, u16)>,
    next_after_max: f64,
    /// MX INT8 only: the negative side, which reaches -2.0 (magnitude 128).
    neg: Option<Box<Ladder>>,
}

fn ladder(f: Format) -> Ladder {
    let mut l = ladder_of(f, 127);
    if f == Format::Int8 {
        l.neg = Some(Box::new(ladder_of(f, 128)));
    }
    l
}

fn ladder_of(f: Format, int8_top: u16) -> Ladder {
    let mut values: Vec<(f64, u16)> = match f {
        Format::Int8 => (0..=int8_top).map(|k| (k as f64 / 64.0, k)).collect(),
        Format::E8M0 => (0..=254u16).map(|b| (2f64.powi(b as i32 - 127), b)).collect(),
        _ => {
            let sign = 1u16 << (f.bits() - 1);
            (0..sign)
                .map(|c| (f.decode_f64(c), c))
                .filter(|(v, _)| v.is_finite())
                .collect()
        }
    };
    values.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    let n = values.len();
    let next_after_max = match f {
        Format::E8M0 => 2f64.powi(128),
        _ => {
            let (top, below) = (values[n - 1].0, values[n - 2].0);
            // ulp of the top binade: the spacing between the two largest values
            top + (top - below)
        }
    };
    Ladder {
        values,
        next_after_max,
        neg: None,
    }
}

/// Which of two neighbours the mode picks; `even_hi` says whether `hi` is the
/// even candidate on a tie.
fn pick(a: f64, lo: f64, hi: f64, negative: bool, mode: Rounding, even_hi: bool) -> bool {
    let mid = lo + (hi - lo) / 2.0; // exact: both are dyadic with small spans
    match mode {
        Rounding::NearestEven => a > mid || (a == mid && even_hi),
        Rounding::NearestAway => a >= mid,
        Rounding::TowardZero => false,
        Rounding::Up => !negative,
        Rounding::Down => negative,
        Rounding::Stochastic => unreachable!(),
    }
}

/// Expected code, or None where the policy makes the cast fail.
/// `hint`: the bracket index found for the previous input; inputs walked in
/// ascending magnitude only move it forward (a plain search otherwise).
fn reference_from(x: f32, f: Format, l: &Ladder, p: &CastPolicy, hint: &mut usize) -> Option<u16> {
    let negative = x.is_sign_negative();
    let l = match (&l.neg, negative && p.int8_allow_neg2) {
        (Some(n), true) => n.as_ref(),
        _ => l,
    };
    let sign_code = |mag: u16| -> u16 {
        match f {
            Format::Int8 => {
                if negative {
                    (-(mag as i16)) as u8 as u16
                } else {
                    mag
                }
            }
            Format::E8M0 => mag,
            _ => mag | if negative { 1 << (f.bits() - 1) } else { 0 },
        }
    };
    let max_mag = l.values.last().unwrap().1;
    let nonfinite = |from_inf: bool| -> Option<u16> {
        let saturate = p.overflow == Overflow::Saturate
            || (!from_inf
                && matches!(
                    (p.rounding, negative),
                    (Rounding::TowardZero, _) | (Rounding::Up, true) | (Rounding::Down, false)
                ));
        match f {
            Format::E8M0 => Some(if saturate { 0xFE } else { 0xFF }),
            Format::Int8 => {
                if !saturate {
                    return None;
                }
                Some(sign_code(max_mag))
            }
            _ if saturate => Some(sign_code(max_mag)),
            Format::E5M2 => Some(sign_code(0x7C)),
            Format::BF16 => Some(sign_code(0x7F80)),
            Format::F16 => Some(sign_code(0x7C00)),
            Format::E4M3 => Some(sign_code(0x7F)),
            _ => None,
        }
    };
    if x.is_nan() {
        return match f {
            Format::E8M0 => Some(0xFF),
            Format::E4M3 | Format::E5M2 | Format::BF16 | Format::F16 => match p.nan_out {
                NanOut::Canonical(c) => Some(c),
                NanOut::SignedCanonical(c) => Some(sign_code(c)),
                NanOut::TruncatePayload | NanOut::QuietPayload => None, // payload rules: checked against numpy/torch vectors
            },
            _ => match p.nan {
                NanPolicy::Error => None,
                NanPolicy::NegZero => Some(1 << (f.bits() - 1)),
                NanPolicy::Zero => Some(0),
                NanPolicy::PosMax => Some(max_mag),
                NanPolicy::FlipSignZero => Some(if negative { 0 } else { 1 << (f.bits() - 1) }),
            },
        };
    }
    if f == Format::E8M0 {
        if x == 0.0 {
            return Some(if p.e8m0_zero == E8m0Zero::Nan { 0xFF } else { 0x00 });
        }
        if negative && p.e8m0_negative != E8m0Negative::Abs {
            return Some(if p.e8m0_negative == E8m0Negative::Nan {
                0xFF
            } else {
                0x00
            });
        }
    }
    if x.is_infinite() {
        return if f == Format::E8M0 && negative {
            nonfinite_e8m0_abs(p)
        } else {
            nonfinite(true)
        };
    }
    let a = (x as f64).abs();
    let vals = &l.values;
    // index of the first value > a (one past the largest value <= a)
    let mut i = *hint;
    if i > vals.len() || (i > 0 && vals[i - 1].0 > a) {
        i = vals.partition_point(|v| v.0 <= a);
    } else {
        while i < vals.len() && vals[i].0 <= a {
            i += 1;
        }
    }
    *hint = i;
    if i == 0 {
        // below the smallest value: only E8M0 (no zero) gets here
        return Some(0);
    }
    let (lo, lo_code) = vals[i - 1];
    if lo == a {
        return Some(if f == Format::Int8 && negative && lo_code == 0 {
            0
        } else {
            sign_code(lo_code)
        });
    }
    if i == vals.len() {
        // above max: between max and the next would-be value
        if a >= l.next_after_max {
            return if f == Format::E8M0 && negative {
                nonfinite_e8m0_abs(p)
            } else {
                nonfinite(false)
            };
        }
        let even_hi = match f {
            Format::E8M0 => false, // 255 is odd
            _ => (lo_code + 1) & 1 == 0,
        };
        return if pick(a, lo, l.next_after_max, negative, p.rounding, even_hi) {
            if f == Format::E8M0 && negative {
                nonfinite_e8m0_abs(p)
            } else {
                nonfinite(false)
            }
        } else {
            Some(sign_code(lo_code))
        };
    }
    let (hi, hi_code) = vals[i];
    let code = if pick(a, lo, hi, negative, p.rounding, hi_code & 1 == 0) {
        hi_code
    } else {
        lo_code
    };
    if f == Format::Int8 && negative && code == 0 {
        return Some(0);
    }
    Some(sign_code(code))
}

fn nonfinite_e8m0_abs(p: &CastPolicy) -> Option<u16> {
    Some(
        if p.overflow == Overflow::Saturate || matches!(p.rounding, Rounding::TowardZero | Rounding::Down) {
            0xFE
        } else {
            0xFF
        },
    )
}

/// Compares the library (scalar path and array path) with the reference on
/// all inputs `start..start+len` (as f32 bit patterns). Returns mismatches.
fn check_range(f: Format, p: &CastPolicy, start: u64, len: u64, stride: u64) -> Vec<(u32, Option<u16>, Option<u16>)> {
    let l = ladder(f);
    let chunk = 1u64 << 20;
    (0..len.div_ceil(chunk * stride))
        .into_par_iter()
        .flat_map_iter(|c| {
            let bits: Vec<u32> = (0..chunk)
                .map(|k| start + (c * chunk + k) * stride)
                .take_while(|&v| v < start + len)
                .map(|v| v as u32)
                .collect();
            let xs: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
            let wide = f.bits() > 8;
            let mut out8 = vec![0u8; if wide { 0 } else { xs.len() }];
            let mut out16 = vec![0u16; if wide { xs.len() } else { 0 }];
            let array_ok = if f.bits() > 8 {
                cast_f32_slice(&xs, CodesMut::U16(&mut out16), f, p, 0).is_ok()
            } else {
                cast_f32_slice(&xs, CodesMut::U8(&mut out8), f, p, 0).is_ok()
            };
            let mut bad = Vec::new();
            let (mut hint_pos, mut hint_neg) = (0usize, 0usize);
            for (k, &b) in bits.iter().enumerate() {
                let hint = if b >> 31 == 0 { &mut hint_pos } else { &mut hint_neg };
                let want = reference_from(f32::from_bits(b), f, &l, p, hint);
                let scalar = encode_f32(f32::from_bits(b), f, p, 0).ok();
                let arr = if f.bits() > 8 { out16[k] } else { out8[k] as u16 };
                let array_mismatch = array_ok && want.is_some() && Some(arr) != want;
                if scalar != want || array_mismatch {
                    bad.push((b, want, scalar));
                }
            }
            bad
        })
        .collect()
}

fn policies(f: Format) -> Vec<(String, CastPolicy)> {
    let mut out = Vec::new();
    for mode in [
        Rounding::NearestEven,
        Rounding::NearestAway,
        Rounding::TowardZero,
        Rounding::Up,
        Rounding::Down,
    ] {
        for overflow in [Overflow::Saturate, Overflow::NonFinite] {
            let mut p = CastPolicy::ieee(f);
            p.rounding = mode;
            p.overflow = overflow;
            p.nan = NanPolicy::NegZero;
            if f == Format::Int8 {
                p.nan = NanPolicy::Zero;
            }
            if f == Format::E8M0 {
                p.e8m0_zero = E8m0Zero::Min;
            }
            out.push((format!("{mode}/{overflow:?}"), p));
        }
    }
    out
}

const FORMATS: [Format; 9] = Format::ALL;

fn report(f: Format, name: &str, bad: &[(u32, Option<u16>, Option<u16>)]) {
    for (b, want, got) in bad.iter().take(5) {
        eprintln!(
            "{f} {name}: input {b:#010x} ({:e}): reference {want:x?}, library {got:x?}",
            f32::from_bits(*b)
        );
    }
}

/// CI-sized: every 4099th f32 pattern, plus every pattern in the binades
/// around each format's range (where all rounding boundaries lie).
#[test]
fn sampled_inputs_match_independent_reference() {
    let mut failures = 0;
    for f in FORMATS {
        for (name, p) in policies(f) {
            let mut bad = check_range(f, &p, 0, 1 << 32, 4099);
            // dense: 2^16 consecutive patterns starting at a few exponents per sign
            let l = ladder(f);
            let top = l.next_after_max;
            for v in [l.values[1].0, 1.0, top / 2.0, top, top * 2.0] {
                for s in [0u32, 0x8000_0000] {
                    let b = (v as f32).to_bits() | s;
                    bad.extend(check_range(f, &p, (b.saturating_sub(1 << 15)) as u64, 1 << 16, 1));
                }
            }
            report(f, &name, &bad);
            failures += bad.len();
        }
    }
    assert_eq!(failures, 0);
}

#[test]
#[ignore = "walks all 2^32 f32 inputs per format and mode (about 90 s each on 2 cores)"]
fn all_f32_inputs_match_independent_reference() {
    let only: Option<Vec<Format>> = std::env::var("MXBI_EXHAUSTIVE_FORMATS")
        .ok()
        .map(|s| s.split(',').map(|n| n.trim().parse().expect("format name")).collect());
    let mut failures = 0;
    for f in FORMATS {
        if only.as_ref().is_some_and(|o| !o.contains(&f)) {
            continue;
        }
        for (name, p) in policies(f) {
            if std::env::var("MXBI_EXHAUSTIVE_MODES").is_ok_and(|m| !m.split(',').any(|x| name.starts_with(x.trim()))) {
                continue;
            }
            let t = std::time::Instant::now();
            let bad = check_range(f, &p, 0, 1 << 32, 1);
            eprintln!(
                "{f} {name}: {} mismatches over 2^32 inputs ({:.1?})",
                bad.len(),
                t.elapsed()
            );
            report(f, &name, &bad);
            failures += bad.len();
        }
    }
    assert_eq!(failures, 0);
}
