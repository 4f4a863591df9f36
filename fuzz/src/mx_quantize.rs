//! MX quantization: the array path (`quantize`: runs of blocks, the
//! branchless FP8 encoder at the CPU's vector level, the lookup table,
//! strided blocks for an inner axis, the parallel split) gives the bytes
//! of a reference written here: the block scale from the amax by exact
//! arithmetic on the bits (an independent statement of each scale mode),
//! then each element through the exact scalar cast `encode_input` with its
//! C-order index. `quantize_into` gives the same bytes; both fail exactly
//! when the reference does.
//!
//! Input: format, preset, override bits, stochastic seed, shape (1 to 3
//! dimensions), axis, block and pad, then the values (f32, repeated
//! cyclically to fill the shape).

use super::bytes::{f32s, Take};
use mxbi::format::{encode_input, Input, Rounding};
use mxbi::mx::{
    quantize, quantize_into, AxisLayout, MxFormat, MxPolicy, MxPreset, NonFiniteBlock, ScaleMode, ScaleOverflow,
    ZeroBlock,
};

/// True when the input got past parsing to the property checks.
pub fn run(data: &[u8]) -> bool {
    let mut r = Take(data);
    let format = MxFormat::ALL[r.u8() as usize % MxFormat::ALL.len()];
    let preset = MxPreset::ALL[r.u8() as usize % MxPreset::ALL.len()];
    let ov = r.u16();
    let seed = r.u64();
    let ndim = 1 + r.u8() as usize % 3;
    let shape: Vec<usize> = (0..ndim).map(|_| r.u8() as usize % 48).collect();
    let axis = (r.u8() as i8 % 4) as isize;
    let bb = r.u8();
    let block = 1usize << (bb % 7);
    let pad = bb & 0x80 != 0;
    let vals = f32s(r.rest());

    let mut p = preset.policy(format);
    if ov & 1 != 0 {
        p.scale_mode = ScaleMode::ALL[(ov >> 1) as usize % 4];
    }
    if ov & 8 != 0 {
        p.flush_subnormals = !p.flush_subnormals;
    }
    if ov & 16 != 0 {
        p.zero_block = ZeroBlock::One;
    }
    if ov & 32 != 0 {
        p.scale_overflow = ScaleOverflow::Saturate;
    }
    if ov & 64 != 0 {
        p.nonfinite = NonFiniteBlock::Saturate;
    }
    if ov & 128 != 0 {
        p.element.rounding = Rounding::ALL[(ov >> 8) as usize % Rounding::ALL.len()];
        p.element.stochastic.seed = seed;
        p.element.stochastic.bits = 1 + (ov as u32 >> 11) % 32;
    }

    let Ok(layout) = AxisLayout::new(&shape, axis, block, pad) else {
        return false;
    };
    let n = layout.elements();
    if n > 1 << 14 {
        return false;
    }
    let x: Vec<f32> = if vals.is_empty() {
        vec![0.0; n]
    } else {
        (0..n).map(|i| vals[i % vals.len()]).collect()
    };
    let fast = quantize(&x, &layout, format, &p);
    let want = reference(&x, &layout, format, &p);
    match (&fast, &want) {
        (Ok(q), Ok((scales, codes))) => {
            for (s, (g, w)) in q.scales.iter().zip(scales).enumerate() {
                assert_eq!(
                    g, w,
                    "{format} {p:?} {layout:?}: scale {s}: fast {g:#04x}, reference {w:#04x}"
                );
            }
            for (i, (g, w)) in q.codes.iter().zip(codes).enumerate() {
                assert_eq!(
                    g,
                    w,
                    "{format} {p:?} {layout:?}: code {i} (x = {:e}, {:#010x}): fast {g:#04x}, reference {w:#04x}",
                    x[i],
                    x[i].to_bits()
                );
            }
            assert_eq!((q.scales.len(), q.codes.len()), (scales.len(), codes.len()));
            let (mut c, mut s) = (vec![0xA5u8; n], vec![0xA5u8; layout.scale_count()]);
            quantize_into(&x, &layout, format, &p, &mut c, &mut s)
                .expect("quantize_into fails where quantize does not");
            assert_eq!((&c, &s), (&q.codes, &q.scales), "quantize_into differs from quantize");
        }
        (Err(e), Err(_)) => super::bytes::one_line(&e.to_string()),
        (Ok(_), Err(e)) => panic!("{format} {p:?} {layout:?}: fast path succeeded, reference failed: {e}"),
        (Err(e), Ok(_)) => panic!("{format} {p:?} {layout:?}: fast path failed ({e}), reference succeeded"),
    }
    true
}

/// Scales (`[outer, nblocks, inner]`) and codes by the reference rule.
fn reference(x: &[f32], l: &AxisLayout, f: MxFormat, p: &MxPolicy) -> Result<(Vec<u8>, Vec<u8>), String> {
    p.element.validate(f.element()).map_err(|e| e.to_string())?;
    let mut scales = vec![0u8; l.scale_count()];
    let mut codes = vec![0u8; x.len()];
    for o in 0..l.outer {
        for b in 0..l.nblocks {
            for i in 0..l.inner {
                let idx: Vec<usize> = (b * l.block..((b + 1) * l.block).min(l.len))
                    .map(|j| (o * l.len + j) * l.inner + i)
                    .collect();
                let vals: Vec<f32> = idx.iter().map(|&k| x[k]).collect();
                let (s, cs) = reference_block(&vals, &idx, f, p)?;
                scales[(o * l.nblocks + b) * l.inner + i] = s;
                for (k, c) in idx.iter().zip(cs) {
                    codes[*k] = c;
                }
            }
        }
    }
    Ok((scales, codes))
}

fn is_sub(v: f32) -> bool {
    v.to_bits() & 0x7FFF_FFFF < 0x0080_0000
}

fn reference_block(x: &[f32], idx: &[usize], f: MxFormat, p: &MxPolicy) -> Result<(u8, Vec<u8>), String> {
    let flush = p.flush_subnormals;
    // the inputs as the quantizer sees them (flushed subnormals are +-0)
    let seen: Vec<f32> = x
        .iter()
        .map(|&v| {
            if flush && is_sub(v) {
                f32::from_bits(v.to_bits() & 0x8000_0000)
            } else {
                v
            }
        })
        .collect();
    let has_nan = seen.iter().any(|v| v.is_nan());
    let has_inf = seen.iter().any(|v| v.is_infinite());
    let exp = if has_nan || has_inf {
        match p.nonfinite {
            NonFiniteBlock::NanScale => None,
            NonFiniteBlock::Saturate if has_inf => Some(127),
            // NaN takes no part in the amax
            NonFiniteBlock::Saturate => scale_exponent(amax(&seen), f, p),
        }
    } else {
        scale_exponent(amax(&seen), f, p)
    };
    let Some(e) = exp else {
        return Ok((0xFF, vec![p.nan_block_codes.code(f); x.len()]));
    };
    let mut codes = Vec::with_capacity(x.len());
    for (v, &k) in seen.iter().zip(idx) {
        let c = encode_input(Input::from_f32(*v).scaled(-e), f.element(), &p.element, k as u64)
            .map_err(|e| e.to_string())?;
        codes.push(c as u8);
    }
    Ok(((e + 127) as u8, codes))
}

/// The largest finite |v| (NaN ignored), exactly, as f64.
fn amax(x: &[f32]) -> f64 {
    x.iter()
        .filter(|v| v.is_finite())
        .map(|v| (*v as f64).abs())
        .fold(0.0, f64::max)
}

/// floor(log2 v) for a positive finite f64, from its bits.
fn floor_log2(v: f64) -> i32 {
    let b = v.to_bits();
    let e = ((b >> 52) & 0x7FF) as i32;
    assert!(e > 0, "f32 values are normal in f64");
    e - 1023
}

/// The block exponent (scale 2^e), or None for a NaN scale.
fn scale_exponent(a: f64, f: MxFormat, p: &MxPolicy) -> Option<i32> {
    let emax = f.element().emax();
    if a == 0.0 {
        return Some(match p.zero_block {
            ZeroBlock::Min => -127,
            ZeroBlock::One => 0,
        });
    }
    let fl = floor_log2(a);
    let e = match p.scale_mode {
        ScaleMode::Floor => fl - emax,
        ScaleMode::Ceil => {
            let exact = a == 2f64.powi(fl);
            fl + (!exact) as i32 - emax
        }
        ScaleMode::Even => {
            // amax rounded half up to the element's precision (mbits
            // fraction bits), as an f32 bit pattern: its exponent field
            // (0 for an f32 subnormal that stays below 2^-126).
            let q = 2f64.powi(fl.max(-126) - f.mbits() as i32);
            let r = ((a / q) + 0.5).floor() * q;
            if r >= 2f64.powi(128) {
                return None;
            }
            if r < 2f64.powi(-126) {
                -127 - emax
            } else {
                floor_log2(r) - emax
            }
        }
        ScaleMode::Rceil => {
            // s = fl32(amax * fl32(1 / max)), then the power of two at or above it
            let s = ((a as f32) * f.max_rcp()) as f64;
            if s == 0.0 {
                -127
            } else {
                let c = floor_log2(s) + (s != 2f64.powi(floor_log2(s))) as i32;
                c.max(-127)
            }
        }
    };
    if e > 127 {
        return match p.scale_overflow {
            ScaleOverflow::Nan => None,
            ScaleOverflow::Saturate => Some(127),
        };
    }
    Some(e.max(-127))
}
