//! The conversion commands: `cast`, `decode`, `quantize`, `dequantize`
//! and `formats`.

use super::output::{write_stderr_line, CliError, Result};
use super::tensor_files::{input_f32, load, save};
use clap::Args;
use mxbi::format::{self, CastPolicy, CastPreset, CodesMut, Format, NanPolicy, Overflow, Rounding, Stochastic};
use mxbi::io::{DType, TensorData};
use mxbi::mx::{self, AxisLayout, MxFormat, MxPolicy, MxPreset, ScaleLayout, ScaleMode};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CastArgs {
    /// Target format: e4m3, e5m2, e3m2, e2m3, e2m1, int8, e8m0, bf16, f16.
    #[arg(long)]
    pub to: Format,
    /// Rounding (default: the preset's, else nearest-even).
    #[arg(long)]
    pub round: Option<Rounding>,
    /// Seed for stochastic rounding.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Random bits for stochastic rounding (1..=32, default 16).
    #[arg(long)]
    pub sr_bits: Option<u32>,
    /// Overflow policy: saturate or nonfinite.
    #[arg(long)]
    pub overflow: Option<Overflow>,
    /// NaN into formats without NaN: error, neg-zero, pos-max, zero.
    #[arg(long)]
    pub nan: Option<NanPolicy>,
    /// Reproduce a library release: ml_dtypes (its current release; =
    /// ml_dtypes@0.7), ml_dtypes@0.6, nvidia, torch, gfloat (each also as
    /// NAME@VERSION; README "Presets and policies").
    #[arg(long)]
    pub preset: Option<CastPreset>,
    /// Tensor name inside a .safetensors input.
    #[arg(long)]
    pub name: Option<String>,
    /// Values to cast: a .npy or .safetensors file of f32 or f64.
    pub input: PathBuf,
    /// Where the codes go (.npy or .safetensors, the input's shape).
    pub output: PathBuf,
}

#[derive(Args, Debug)]
pub struct DecodeArgs {
    /// Format of the codes: e4m3, e5m2, e3m2, e2m3, e2m1, int8, e8m0, bf16, f16.
    #[arg(long)]
    pub from: Format,
    /// Tensor name inside a .safetensors input.
    #[arg(long)]
    pub name: Option<String>,
    /// Codes to decode: uint8 (uint16 for bf16/f16), .npy or .safetensors.
    pub input: PathBuf,
    /// Where the f32 values go (.npy or .safetensors, the input's shape).
    pub output: PathBuf,
}

#[derive(Args, Debug)]
pub struct MxShapeArgs {
    /// Elements per block (a power of two).
    #[arg(long, default_value_t = 32)]
    pub block: usize,
    /// Axis along which blocks run (negative counts from the end).
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    pub axis: isize,
    /// Allow an axis length that is not a multiple of the block (the last
    /// block is treated as zero-padded).
    #[arg(long)]
    pub pad: bool,
    /// Scale layout: plain (same shape as the input, axis divided by the
    /// block) or swizzled-128x4 (cuBLAS/Blackwell tiles; 2-d, last axis).
    #[arg(long, default_value = "plain")]
    pub scale_layout: ScaleLayout,
}

#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// MX format: mxfp8-e4m3, mxfp8-e5m2, mxfp6-e3m2, mxfp6-e2m3,
    /// mxfp4-e2m1, mxint8.
    #[arg(long)]
    pub format: MxFormat,
    /// floor, ceil, even, rceil (default: the preset's).
    #[arg(long)]
    pub scale_mode: Option<ScaleMode>,
    /// ocp (default), torchao, nvidia, microxcaling.
    #[arg(long)]
    pub preset: Option<MxPreset>,
    /// Element rounding (default: the preset's).
    #[arg(long)]
    pub round: Option<Rounding>,
    /// Seed for stochastic element rounding.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Treat f32-subnormal inputs as zero.
    #[arg(long)]
    pub flush_subnormals: bool,
    /// MXINT8: forbid -2.0 (code 0x80).
    #[arg(long)]
    pub no_int8_neg2: bool,
    #[command(flatten)]
    pub shape: MxShapeArgs,
    /// Tensor name inside a .safetensors input.
    #[arg(long)]
    pub name: Option<String>,
    /// Print a summary (scales, saturated elements, max error) as JSON.
    #[arg(long)]
    pub stats: bool,
    /// Values to quantize: f32, f16, bf16 (or f64 exact in f32), .npy or
    /// .safetensors.
    pub input: PathBuf,
    /// Where the element codes go (uint8, the input's shape).
    #[arg(long)]
    pub codes: PathBuf,
    /// Where the E8M0 scales go (uint8; the input's shape with the block
    /// axis divided by the block, or the swizzled layout).
    #[arg(long)]
    pub scales: PathBuf,
}

#[derive(Args, Debug)]
pub struct DequantizeArgs {
    /// MX format of the codes: mxfp8-e4m3, mxfp8-e5m2, mxfp6-e3m2,
    /// mxfp6-e2m3, mxfp4-e2m1, mxint8.
    #[arg(long)]
    pub format: MxFormat,
    #[command(flatten)]
    pub shape: MxShapeArgs,
    /// Output dtype: f32 (exact where representable; inexact elements are
    /// counted on stderr) or f64 (always exact).
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Element codes (uint8, as `quantize --codes` writes them).
    #[arg(long)]
    pub codes: PathBuf,
    /// E8M0 scales (uint8, as `quantize --scales` writes them).
    #[arg(long)]
    pub scales: PathBuf,
    /// Where the values go (.npy or .safetensors, the codes' shape).
    pub output: PathBuf,
}

#[derive(Args, Debug)]
pub struct FormatsArgs {
    /// Element format (omit to list all formats).
    pub format: Option<Format>,
}

pub(super) fn cast(a: CastArgs) -> Result<()> {
    let mut p = match a.preset {
        Some(pr) => pr.policy(a.to),
        None => CastPolicy::ieee(a.to),
    };
    if let Some(r) = a.round {
        p.rounding = r;
    }
    if let Some(o) = a.overflow {
        p.overflow = o;
    }
    if let Some(n) = a.nan {
        p.nan = n;
    }
    if a.seed.is_some() || a.sr_bits.is_some() {
        if p.rounding != Rounding::Stochastic {
            return Err(CliError("--seed/--sr-bits only apply with --round stochastic".into()));
        }
        p.stochastic = Stochastic {
            seed: a.seed.unwrap_or(0),
            bits: a.sr_bits.unwrap_or(16),
        };
    }
    let t = load(&a.input, a.name.as_deref())?;
    let shape = t.shape().to_vec();
    let n = t.numel();
    let wide = a.to.bits() > 8;
    let mut out8 = if wide { Vec::new() } else { vec![0u8; n] };
    let mut out16 = if wide { vec![0u16; n] } else { Vec::new() };
    let out = if wide {
        CodesMut::U16(&mut out16)
    } else {
        CodesMut::U8(&mut out8)
    };
    match t.dtype() {
        DType::F32 => format::cast_f32_slice(&t.as_f32()?, out, a.to, &p, 0)?,
        DType::F64 => format::cast_f64_slice(&t.as_f64()?, out, a.to, &p, 0)?,
        d => {
            return Err(CliError(format!(
                "{}: cast needs f32 or f64 input, got {}",
                a.input.display(),
                d.name()
            )))
        }
    }
    drop(t);
    let t = if wide {
        TensorData::from_slice(shape, &out16)?
    } else {
        TensorData::new(DType::U8, shape, out8)?
    };
    save(&a.output, t)
}

pub(super) fn decode(a: DecodeArgs) -> Result<()> {
    let t = load(&a.input, a.name.as_deref())?;
    let codes: Vec<u16> = match t.dtype() {
        DType::U8 | DType::I8 | DType::F8E4M3 | DType::F8E5M2 => t.as_bits8()?.iter().map(|&c| c as u16).collect(),
        DType::U16 | DType::F16 | DType::BF16 => t.as_bits16()?.into_owned(),
        d => {
            return Err(CliError(format!(
                "{}: decode needs uint8/uint16 codes, got {}",
                a.input.display(),
                d.name()
            )))
        }
    };
    if let Some((i, c)) = codes.iter().enumerate().find(|(_, &c)| c as u32 >= a.from.code_count()) {
        return Err(CliError(format!(
            "{}: element {i}: code {c:#x} is not a valid {} code ({} bits)",
            a.input.display(),
            a.from,
            a.from.bits()
        )));
    }
    let vals: Vec<f32> = codes.iter().map(|&c| a.from.decode_f32(c)).collect();
    save(&a.output, TensorData::from_slice(t.shape().to_vec(), &vals)?)
}

fn check_swizzle(shape: &[usize], axis: isize) -> Result<()> {
    if shape.len() != 2 || !(axis == -1 || axis == 1) {
        return Err(CliError(
            "--scale-layout swizzled-128x4 needs a 2-d input with blocks along the last axis".into(),
        ));
    }
    Ok(())
}

fn mx_policy(a: &QuantizeArgs) -> Result<MxPolicy> {
    let mut p = a.preset.unwrap_or(MxPreset::Ocp).policy(a.format);
    if let Some(m) = a.scale_mode {
        p.scale_mode = m;
    }
    if let Some(r) = a.round {
        p.element.rounding = r;
    }
    if let Some(s) = a.seed {
        p.element.stochastic.seed = s;
    }
    p.flush_subnormals |= a.flush_subnormals;
    if a.no_int8_neg2 {
        if a.format != MxFormat::Int8 {
            return Err(CliError("--no-int8-neg2 applies to mxint8 only".into()));
        }
        p.element.int8_allow_neg2 = false;
    }
    Ok(p)
}

pub(super) fn quantize(a: QuantizeArgs) -> Result<()> {
    let p = mx_policy(&a)?;
    let t = load(&a.input, a.name.as_deref())?;
    let shape = t.shape().to_vec();
    let layout = AxisLayout::new(&shape, a.shape.axis, a.shape.block, a.shape.pad)?;
    let x = input_f32(&t, &a.input)?;
    let q = mx::quantize(&x, &layout, a.format, &p)?;
    // printed once both files are written, so a failed write prints nothing
    let stats = if a.stats {
        let st = mx::QuantStats::compute(&x, &q, &layout, a.format)?;
        Some(serde_json::to_string(&st)?)
    } else {
        None
    };
    drop(x);
    drop(t);
    let axis = if a.shape.axis < 0 {
        (a.shape.axis + shape.len() as isize) as usize
    } else {
        a.shape.axis as usize
    };
    let (scale_shape, scales) = match a.shape.scale_layout {
        ScaleLayout::Plain => (AxisLayout::scale_shape(&shape, axis, layout.nblocks), q.scales),
        ScaleLayout::Swizzled128x4 => {
            check_swizzle(&shape, a.shape.axis)?;
            let s = mx::swizzle_128x4(&q.scales, shape[0], layout.nblocks);
            (vec![s.len()], s)
        }
    };
    save(&a.codes, TensorData::new(DType::U8, shape, q.codes)?)?;
    save(&a.scales, TensorData::new(DType::U8, scale_shape, scales)?)?;
    if let Some(st) = stats {
        outln!("{st}");
    }
    Ok(())
}

pub(super) fn dequantize(a: DequantizeArgs) -> Result<()> {
    if a.dtype != "f32" && a.dtype != "f64" {
        return Err(CliError(format!("unknown --dtype '{}'; expected f32 or f64", a.dtype)));
    }
    let c = load(&a.codes, None)?;
    let s = load(&a.scales, None)?;
    let shape = c.shape().to_vec();
    let layout = AxisLayout::new(&shape, a.shape.axis, a.shape.block, a.shape.pad)?;
    let codes = c
        .as_bits8()
        .map_err(|_| CliError(format!("{}: codes must be uint8", a.codes.display())))?;
    let raw_scales = s
        .as_bits8()
        .map_err(|_| CliError(format!("{}: scales must be uint8", a.scales.display())))?;
    let scales = match a.shape.scale_layout {
        ScaleLayout::Plain => raw_scales.to_vec(),
        ScaleLayout::Swizzled128x4 => {
            check_swizzle(&shape, a.shape.axis)?;
            let want = mx::swizzled_len(shape[0], layout.nblocks);
            if raw_scales.len() != want {
                return Err(CliError(format!(
                    "{}: swizzled scales for {}x{} need {want} bytes, got {}",
                    a.scales.display(),
                    shape[0],
                    layout.nblocks,
                    raw_scales.len()
                )));
            }
            mx::unswizzle_128x4(raw_scales, shape[0], layout.nblocks)
        }
    };
    let el = a.format.element();
    if let Some((i, v)) = codes.iter().enumerate().find(|(_, &v)| v as u32 >= el.code_count()) {
        return Err(CliError(format!(
            "{}: element {i}: code {v:#x} is not a valid {el} code",
            a.codes.display()
        )));
    }
    match a.dtype.as_str() {
        "f32" => {
            let (v, inexact) = mx::dequantize(codes, &scales, &layout, a.format)?;
            save(&a.output, TensorData::from_slice(shape, &v)?)?;
            if inexact > 0 {
                write_stderr_line(&format!(
                    "mxbi: warning: {inexact} values are not exactly representable in f32 and were rounded to nearest-even; use --dtype f64 for exact values"
                ));
            }
            Ok(())
        }
        "f64" => {
            let v = mx::dequantize_f64(codes, &scales, &layout, a.format)?;
            save(&a.output, TensorData::from_slice(shape, &v)?)
        }
        d => Err(CliError(format!("unknown --dtype '{d}'; expected f32 or f64"))),
    }
}

pub(super) fn formats(a: FormatsArgs) -> Result<()> {
    let Some(f) = a.format else {
        outln!(
            "{:<6} {:>5} {:>14} {:>5} {:>4} {:>4}",
            "format",
            "bits",
            "max",
            "emax",
            "inf",
            "nan"
        );
        for f in Format::ALL {
            outln!(
                "{:<6} {:>5} {:>14e} {:>5} {:>4} {:>4}",
                f.name(),
                f.bits(),
                f.max_value(),
                f.emax(),
                if f.has_inf() { "yes" } else { "no" },
                if f.has_nan() { "yes" } else { "no" }
            );
        }
        return Ok(());
    };
    let width = (f.bits() as usize).div_ceil(4);
    outln!("{:<8} {:<20} {:<26} f32 bits", "code", "bits", "value");
    for (c, v) in f.value_table() {
        let bits = format!("{:0w$b}", c, w = f.bits() as usize);
        let shown = if v.is_nan() {
            "NaN".to_string()
        } else {
            format!("{v:e}")
        };
        outln!(
            "0x{:0w$x}{:pad$} {:<20} {:<26} 0x{:08x}",
            c,
            "",
            bits,
            shown,
            f.decode_f32(c).to_bits(),
            w = width,
            pad = 6 - width
        );
    }
    Ok(())
}
