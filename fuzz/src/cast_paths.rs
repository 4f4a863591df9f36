//! Casts: the slice paths (the branchless FP8 encoder, the lookup table,
//! the parallel chunks) give, element by element, the code of the exact
//! scalar path (`encode_f32` / `encode_f64` with the element's index), for
//! every format and preset, and a preset with its rounding mode replaced;
//! a slice fails exactly when some element does.
//!
//! Input: a selector byte (rounding override), a 4-byte base index, an
//! 8-byte stochastic seed, then the values: f32 and, from the same bytes,
//! f64.

use super::bytes::{f32s, Take};
use mxbi::format::{
    cast_f32_slice, cast_f64_slice, encode_f32, encode_f64, CastPolicy, CastPreset, CodesMut, Format, Rounding,
};

/// True when the input got past parsing to the property checks.
pub fn run(data: &[u8]) -> bool {
    let mut r = Take(data);
    let sel = r.u8();
    let base = r.u32() as u64;
    let seed = r.u64();
    let rest = r.rest();
    let xs = f32s(rest);
    let ys: Vec<f64> = rest
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for f in Format::ALL {
        for preset in CastPreset::ALL {
            let p = preset.policy(f);
            let mut q = p;
            q.rounding = Rounding::ALL[sel as usize % Rounding::ALL.len()];
            q.stochastic.seed = seed;
            q.stochastic.bits = 1 + (sel as u32 >> 3) % 32;
            for pol in [p, q] {
                check_f32(&xs, f, &pol, base);
                check_f64(&ys, f, &pol, base);
            }
        }
    }
    true
}

fn check_f32(xs: &[f32], f: Format, p: &CastPolicy, base: u64) {
    let scalar = |i: usize| encode_f32(xs[i], f, p, base + i as u64);
    let (got, err) = if f.bits() > 8 {
        let mut out = vec![0u16; xs.len()];
        let e = cast_f32_slice(xs, CodesMut::U16(&mut out), f, p, base).err();
        (out, e)
    } else {
        let mut out = vec![0u8; xs.len()];
        let e = cast_f32_slice(xs, CodesMut::U8(&mut out), f, p, base).err();
        (out.into_iter().map(u16::from).collect(), e)
    };
    compare(f, p, xs.len(), &got, err.map(|e| e.to_string()), scalar, |i| {
        format!("{:#010x}", xs[i].to_bits())
    });
}

fn check_f64(ys: &[f64], f: Format, p: &CastPolicy, base: u64) {
    let scalar = |i: usize| encode_f64(ys[i], f, p, base + i as u64);
    let (got, err) = if f.bits() > 8 {
        let mut out = vec![0u16; ys.len()];
        let e = cast_f64_slice(ys, CodesMut::U16(&mut out), f, p, base).err();
        (out, e)
    } else {
        let mut out = vec![0u8; ys.len()];
        let e = cast_f64_slice(ys, CodesMut::U8(&mut out), f, p, base).err();
        (out.into_iter().map(u16::from).collect(), e)
    };
    compare(f, p, ys.len(), &got, err.map(|e| e.to_string()), scalar, |i| {
        format!("{:#018x}", ys[i].to_bits())
    });
}

fn compare<E: std::fmt::Display>(
    f: Format,
    p: &CastPolicy,
    n: usize,
    got: &[u16],
    err: Option<String>,
    scalar: impl Fn(usize) -> Result<u16, E>,
    show: impl Fn(usize) -> String,
) {
    if p.validate(f).is_err() {
        assert!(err.is_some(), "{f}: an invalid policy was accepted: {p:?}");
        return;
    }
    let first_err = (0..n).find(|&i| scalar(i).is_err());
    match (&err, first_err) {
        (Some(msg), Some(_)) => super::bytes::one_line(msg),
        (None, None) => {
            for (i, &c) in got.iter().enumerate() {
                let want = scalar(i).ok().unwrap();
                assert_eq!(
                    c,
                    want,
                    "{f} {p:?}: element {i} ({}): slice {c:#x}, scalar {want:#x}",
                    show(i)
                );
            }
        }
        (Some(msg), None) => panic!("{f} {p:?}: the slice failed ({msg}) but every element casts"),
        (None, Some(i)) => panic!(
            "{f} {p:?}: the slice succeeded but element {i} ({}) fails: {}",
            show(i),
            scalar(i).err().unwrap()
        ),
    }
}
