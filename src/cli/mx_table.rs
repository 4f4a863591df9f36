//! `mxbi mx-table`: the MX presets side by side on a built-in input, no
//! files needed.
//!
//! Quantizes a built-in tensor (deterministic; wide exponent spread, block
//! maxima placed just below, at and just above the points where scale modes
//! disagree) with each MX preset and prints how the presets differ.

use super::Result;
use mxbi::format::Format;
use mxbi::mx::{self, AxisLayout, MxFormat, MxPreset, QuantStats};

/// The built-in tensor: 64 rows x 256 columns (8 blocks of 32 per row).
pub fn builtin_tensor() -> (Vec<f32>, Vec<usize>) {
    let (rows, cols) = (64usize, 256usize);
    let mut x = Vec::with_capacity(rows * cols);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for r in 0..rows {
        for _ in 0..cols {
            let u = next();
            // mantissa in [1, 2), exponent spread of +-5 binades around a
            // per-row centre, random sign
            let m = 1.0 + (u >> 40) as f32 / (1u64 << 24) as f32;
            let e = (r as i32 % 16) - 8 + ((u >> 8) % 11) as i32 - 5;
            let s = if u & 1 == 1 { -1.0 } else { 1.0 };
            x.push(s * m * 2f32.powi(e));
        }
    }
    // Block maxima at the edges where the scale modes part ways.
    let edges = [
        f32::from_bits(0x43FF_FFFF), // 511.99997: float log2 says 2^9, the bits say 2^8
        448.0,                       // e4m3 max exactly
        464.0,                       // e4m3 rounding tie at the top
        449.0,                       // just above max: FLOOR saturates, RCEIL does not
        f32::from_bits(0x0000_0400), // f32 subnormal block max
        1.5,
    ];
    for (k, v) in edges.iter().enumerate() {
        let row = 2 * k;
        for b in 0..8 {
            let base = row * cols + b * 32;
            for j in 0..32 {
                x[base + j] = x[base + j].abs().min(1.0) * v / 4.0;
            }
            x[base + (b * 5) % 32] = *v;
        }
    }
    (x, vec![rows, cols])
}

pub fn run() -> Result<()> {
    let (x, shape) = builtin_tensor();
    let layout = AxisLayout::new(&shape, -1, 32, false)?;
    outln!(
        "mxbi demo: a built-in {}x{} f32 tensor, MX blocks of 32 along the last axis",
        shape[0],
        shape[1]
    );
    outln!("(block maxima include 511.99997 = 0x43FFFFFF, 448, 464, 449 and an f32 subnormal)\n");
    for format in [
        MxFormat::Fp8E4M3,
        MxFormat::Fp8E5M2,
        MxFormat::Fp6E2M3,
        MxFormat::Fp4E2M1,
        MxFormat::Int8,
    ] {
        outln!("{format}");
        outln!(
            "  {:<13} {:<6} {:>7} {:>10} {:>9} {:>9} {:>13} {:>18}",
            "preset",
            "scale",
            "scales",
            "vs ocp",
            "saturated",
            "to zero",
            "max |error|",
            "codes vs ocp"
        );
        let ocp = mx::quantize(&x, &layout, format, &MxPreset::Ocp.policy(format))?;
        for preset in MxPreset::ALL {
            let p = preset.policy(format);
            let q = mx::quantize(&x, &layout, format, &p)?;
            let st = QuantStats::compute(&x, &q, &layout, format)?;
            let scale_diff = q.scales.iter().zip(&ocp.scales).filter(|(a, b)| a != b).count();
            let code_diff = q.codes.iter().zip(&ocp.codes).filter(|(a, b)| a != b).count();
            let (lo, hi) = st.scale_range.unwrap_or((0, 0));
            outln!(
                "  {:<13} {:<6} {:>3}..{:<3} {:>10} {:>9} {:>9} {:>13.6e} {:>18}",
                preset.name(),
                p.scale_mode.name(),
                mxbi::format::e8m0_exponent(lo),
                mxbi::format::e8m0_exponent(hi),
                format!("{scale_diff}/{}", q.scales.len()),
                st.saturated,
                st.flushed_to_zero,
                st.max_abs_error,
                format!("{code_diff}/{}", q.codes.len()),
            );
        }
        outln!();
    }
    // The log2 hazard in one line.
    let amax = f32::from_bits(0x43FF_FFFF);
    let exact = ((amax.to_bits() >> 23) as i32 - 127) - Format::E4M3.emax();
    let float_log2 = (amax.log2().floor() as i32) - Format::E4M3.emax();
    outln!(
        "log2 hazard: amax = {amax} (0x43FFFFFF): exponent from the bits gives X = 2^{exact}; float32 floor(log2) gives 2^{float_log2}"
    );
    outln!("scales shown as unbiased exponents; 'saturated' = elements clamped to the element max; 'to zero' = nonzero inputs that became 0");
    Ok(())
}
