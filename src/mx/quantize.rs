//! Block quantization and exact dequantization along one axis of a C-order
//! array.

use super::policy::{MxFormat, MxPolicy, NonFiniteBlock, ScaleMode, ScaleOverflow, ZeroBlock};
use crate::format::{e8m0_exponent, encode_input, pow2, pow2_f32, CastError, CastTable, Fp8Rne, Input, Rounding, Simd};
use rayon::prelude::*;

/// Why a quantization or dequantization request was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MxError {
    #[error("block size {0} is not a power of two (>= 1)")]
    BlockNotPow2(usize),
    #[error("axis {axis} is out of range for a {ndim}-d array")]
    BadAxis { axis: isize, ndim: usize },
    #[error("axis length {len} is not a multiple of the block size {block} (pass --pad to zero-pad the last block)")]
    NotMultiple { len: usize, block: usize },
    #[error("shape mismatch: {0}")]
    Shape(String),
    #[error(transparent)]
    Cast(#[from] CastError),
    #[error("invalid MX policy: {0}")]
    Policy(String),
    /// A size beyond [`crate::limits`].
    #[error("{0}")]
    Limit(String),
}

/// An N-d C-order array seen as `[outer, len, inner]` with blocks of `block`
/// elements along `len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisLayout {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    pub block: usize,
    /// Blocks per axis: `len / block`, or rounded up when padding.
    pub nblocks: usize,
}

impl AxisLayout {
    /// `axis` may be negative (from the end). With `pad`, a final partial
    /// block is allowed and behaves as if zero-padded. `block` is at most
    /// [`crate::limits::MAX_BLOCK`]; the product of the shape's dimensions
    /// (zero dimensions counted as 1) must not overflow.
    pub fn new(shape: &[usize], axis: isize, block: usize, pad: bool) -> Result<AxisLayout, MxError> {
        if block == 0 || !block.is_power_of_two() {
            return Err(MxError::BlockNotPow2(block));
        }
        crate::limits::check_at_most("block size", block, crate::limits::MAX_BLOCK, "MAX_BLOCK")
            .map_err(MxError::Limit)?;
        if crate::limits::nonzero_product(shape).is_none() {
            return Err(MxError::Shape(format!("the dimensions of {shape:?} overflow")));
        }
        let ndim = shape.len();
        let a = if axis < 0 {
            axis.checked_add(ndim as isize)
        } else {
            Some(axis)
        };
        let a = match a {
            Some(a) if ndim > 0 && a >= 0 && a < ndim as isize => a,
            _ => return Err(MxError::BadAxis { axis, ndim }),
        };
        let a = a as usize;
        let len = shape[a];
        if !len.is_multiple_of(block) && !pad {
            return Err(MxError::NotMultiple { len, block });
        }
        let prod = |s: &[usize]| {
            s.iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| MxError::Shape("size overflows".into()))
        };
        Ok(AxisLayout {
            outer: prod(&shape[..a])?,
            len,
            inner: prod(&shape[a + 1..])?,
            block,
            nblocks: len.div_ceil(block),
        })
    }

    pub fn elements(&self) -> usize {
        self.outer * self.len * self.inner
    }
    pub fn scale_count(&self) -> usize {
        self.outer * self.nblocks * self.inner
    }
    /// Shape of the scale array for an input of `shape` along `axis`.
    pub fn scale_shape(shape: &[usize], axis: usize, nblocks: usize) -> Vec<usize> {
        let mut s = shape.to_vec();
        s[axis] = nblocks;
        s
    }
}

/// Codes (one byte per element, same layout as the input) and E8M0 scales
/// (`[outer, nblocks, inner]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantized {
    pub codes: Vec<u8>,
    pub scales: Vec<u8>,
}

#[inline]
fn abs_bits(x: f32, flush: bool) -> u32 {
    let a = x.to_bits() & 0x7FFF_FFFF;
    if flush && a < 0x0080_0000 {
        0
    } else {
        a
    }
}

/// The block exponent for a finite, non-negative `amax` given by its bits, or
/// `None` when the block scale is NaN (scale overflow under
/// [`ScaleOverflow::Nan`], or EVEN rounding amax up to Inf). Never uses a
/// float `log2`.
pub fn block_scale(amax_bits: u32, format: MxFormat, p: &MxPolicy) -> Option<i32> {
    ScaleRule::new(format, p).exponent(amax_bits)
}

/// The constants of [`block_scale`] for one (format, policy), computed once
/// per call instead of once per block.
#[derive(Clone, Copy, Debug)]
struct ScaleRule {
    mode: ScaleMode,
    zero_block: ZeroBlock,
    overflow: ScaleOverflow,
    emax: i32,
    /// EVEN: half an ulp of the element's largest binade, in amax's bits.
    even_half: u32,
    /// RCEIL: 1 / (element max) as f32.
    max_rcp: f32,
}

impl ScaleRule {
    fn new(format: MxFormat, p: &MxPolicy) -> ScaleRule {
        ScaleRule {
            mode: p.scale_mode,
            zero_block: p.zero_block,
            overflow: p.scale_overflow,
            emax: format.element().emax(),
            even_half: 1 << (22 - format.mbits()),
            max_rcp: format.max_rcp(),
        }
    }

    /// See [`block_scale`].
    #[inline(always)]
    fn exponent(&self, amax_bits: u32) -> Option<i32> {
        debug_assert!(amax_bits < 0x7F80_0000);
        if amax_bits == 0 {
            return Some(match self.zero_block {
                ZeroBlock::Min => -127,
                ZeroBlock::One => 0,
            });
        }
        let emax = self.emax;
        let exp_field = (amax_bits >> 23) as i32;
        let mant = amax_bits & 0x7F_FFFF;
        // floor(log2 amax), exact for subnormals too.
        let floor_log2 = if exp_field == 0 {
            (31 - mant.leading_zeros() as i32) - 149
        } else {
            exp_field - 127
        };
        let e = match self.mode {
            ScaleMode::Floor => floor_log2 - emax,
            ScaleMode::Ceil => {
                let pow2 = if exp_field == 0 {
                    mant.is_power_of_two()
                } else {
                    mant == 0
                };
                floor_log2 + (!pow2) as i32 - emax
            }
            ScaleMode::Even => {
                let bumped = (amax_bits + self.even_half) & 0x7F80_0000;
                if bumped == 0x7F80_0000 {
                    return None; // rounded amax is Inf: a non-finite block
                }
                // a subnormal amax that does not carry into the normal range has
                // exponent field 0: torchao reads it as 2^-127.
                (bumped >> 23) as i32 - 127 - emax
            }
            ScaleMode::Rceil => {
                let s = (f32::from_bits(amax_bits) * self.max_rcp).to_bits();
                let se = (s >> 23) as i32;
                let sm = s & 0x7F_FFFF;
                // exact round-up of s to a power of two, as a biased byte
                let byte = if se == 0 {
                    if sm <= 0x40_0000 {
                        0
                    } else {
                        1
                    }
                } else {
                    se + (sm != 0) as i32
                };
                byte - 127
            }
        };
        if e > 127 {
            return match self.overflow {
                ScaleOverflow::Nan => None,
                ScaleOverflow::Saturate => Some(127),
            };
        }
        Some(e.max(-127))
    }
}

/// Per-call constants of the element encoder.
struct ElementCoder {
    format: MxFormat,
    policy: MxPolicy,
    rule: ScaleRule,
    /// Table path: valid when rescaling in f32 cannot change the code (the
    /// rounding modes whose result for |v| < 2^-126 is zero).
    table: Option<std::sync::Arc<CastTable>>,
    /// Branchless FP8 nearest-even encoder, where it applies.
    fp8: Option<Fp8Rne>,
    /// The vector level the FP8 block loop is run at.
    simd: Simd,
    nan_code: u8,
}

impl ElementCoder {
    fn new(format: MxFormat, p: &MxPolicy) -> Result<ElementCoder, MxError> {
        let el = format.element();
        p.element.validate(el).map_err(MxError::Policy)?;
        let table = match p.element.rounding {
            Rounding::NearestEven | Rounding::NearestAway | Rounding::TowardZero => CastTable::cached(el, &p.element),
            _ => None,
        };
        let nan_code = p.nan_block_codes.code(format);
        let fp8 = if p.flush_subnormals {
            None
        } else {
            Fp8Rne::new(el, &p.element)
        };
        Ok(ElementCoder {
            format,
            policy: *p,
            rule: ScaleRule::new(format, p),
            table,
            fp8,
            simd: Fp8Rne::simd(),
            nan_code,
        })
    }

    /// Whole contiguous blocks with the FP8 encoder. Returns a bit mask of
    /// the blocks it did not write (a non-finite amax, or a NaN scale): the
    /// caller redoes those with [`ElementCoder::block`]. At most 64 blocks.
    #[inline(always)]
    fn blocks_fp8(&self, fp8: &Fp8Rne, x: &[f32], out: &mut [u8], scales: &mut [u8], block: usize) -> u64 {
        if block == 32 {
            return self.blocks_fp8_fixed::<32>(fp8, x, out, scales);
        }
        // bit j set: block j needs the general path
        let mut redo = 0u64;
        for (j, ((xb, ob), s)) in x
            .chunks_exact(block)
            .zip(out.chunks_exact_mut(block))
            .zip(scales.iter_mut())
            .enumerate()
        {
            let amax = xb.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7FFF_FFFF));
            match (amax < 0x7F80_0000).then(|| self.rule.exponent(amax)).flatten() {
                Some(e) => {
                    fp8.encode_inline(xb, pow2_f32(-e), ob);
                    *s = (e + 127) as u8;
                }
                None => redo |= 1 << j,
            }
        }
        redo
    }

    /// [`ElementCoder::blocks_fp8`] for a block length known at compile
    /// time (the amax and encode loops fully unrolled); the same bytes.
    #[inline(always)]
    fn blocks_fp8_fixed<const B: usize>(&self, fp8: &Fp8Rne, x: &[f32], out: &mut [u8], scales: &mut [u8]) -> u64 {
        let (fp8, rule) = (*fp8, self.rule);
        let mut redo = 0u64;
        for (j, ((xb, ob), s)) in x
            .as_chunks::<B>()
            .0
            .iter()
            .zip(out.as_chunks_mut::<B>().0)
            .zip(scales.iter_mut())
            .enumerate()
        {
            let amax = xb.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7FFF_FFFF));
            match (amax < 0x7F80_0000).then(|| rule.exponent(amax)).flatten() {
                Some(e) => {
                    fp8.encode_array(xb, pow2_f32(-e), ob);
                    *s = (e + 127) as u8;
                }
                None => redo |= 1 << j,
            }
        }
        redo
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn blocks_fp8_avx2(&self, fp8: &Fp8Rne, x: &[f32], out: &mut [u8], scales: &mut [u8], block: usize) -> u64 {
        self.blocks_fp8(fp8, x, out, scales, block)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn blocks_fp8_avx512(
        &self,
        fp8: &Fp8Rne,
        x: &[f32],
        out: &mut [u8],
        scales: &mut [u8],
        block: usize,
    ) -> u64 {
        self.blocks_fp8(fp8, x, out, scales, block)
    }

    /// Up to 64 contiguous blocks along a contiguous axis.
    fn run_blocks(
        &self,
        x: &[f32],
        out: &mut [u8],
        scales: &mut [u8],
        block: usize,
        index: u64,
    ) -> Result<(), MxError> {
        let Some(fp8) = &self.fp8 else {
            for (j, ((xb, ob), s)) in x
                .chunks(block)
                .zip(out.chunks_mut(block))
                .zip(scales.iter_mut())
                .enumerate()
            {
                *s = self.block(xb, ob, index + (j * block) as u64)?;
            }
            return Ok(());
        };
        let nfull = x.len() / block;
        let full = nfull * block;
        let (xf, of) = (&x[..full], &mut out[..full]);
        let redo = match self.simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `simd` is a level the CPU supports (Fp8Rne::simd, or
            // checked with Simd::available where a test forces one).
            Simd::Avx512 => unsafe { self.blocks_fp8_avx512(fp8, xf, of, scales, block) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Simd::Avx2 => unsafe { self.blocks_fp8_avx2(fp8, xf, of, scales, block) },
            _ => self.blocks_fp8(fp8, xf, of, scales, block),
        };
        // the blocks the fast loop left, then a final partial block
        let mut r = redo;
        while r != 0 {
            let j = r.trailing_zeros() as usize;
            r &= r - 1;
            let span = j * block..(j + 1) * block;
            scales[j] = self.block(&x[span.clone()], &mut out[span], index + (j * block) as u64)?;
        }
        if full < x.len() {
            scales[nfull] = self.block(&x[full..], &mut out[full..], index + full as u64)?;
        }
        Ok(())
    }

    /// Quantize one contiguous block; returns its scale byte.
    fn block(&self, x: &[f32], out: &mut [u8], index: u64) -> Result<u8, MxError> {
        self.block_strided(x, out, index, 1)
    }

    /// [`ElementCoder::block`] for a block gathered from a strided axis:
    /// element `k` sits at C-order index `index + k * stride`, the index its
    /// stochastic draw and any error use.
    fn block_strided(&self, x: &[f32], out: &mut [u8], index: u64, stride: u64) -> Result<u8, MxError> {
        let p = &self.policy;
        let flush = p.flush_subnormals;
        let amax = if flush {
            x.iter().fold(0u32, |m, v| m.max(abs_bits(*v, true)))
        } else {
            x.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7FFF_FFFF))
        };
        let mut amax = amax;
        if amax > 0x7F80_0000 && p.nonfinite == NonFiniteBlock::Saturate {
            // fmaxf semantics: NaN does not take part in amax.
            amax = x
                .iter()
                .map(|v| abs_bits(*v, flush))
                .filter(|&b| b <= 0x7F80_0000)
                .max()
                .unwrap_or(0);
        }
        let e = if amax >= 0x7F80_0000 {
            match p.nonfinite {
                NonFiniteBlock::NanScale => None,
                NonFiniteBlock::Saturate => Some(127),
            }
        } else {
            self.rule.exponent(amax)
        };
        let Some(e) = e else {
            out.fill(self.nan_code);
            return Ok(0xFF);
        };
        let el = self.format.element();
        if let Some(t) = &self.table {
            let m = pow2_f32(-e);
            let mut err = 0;
            if flush {
                for (o, v) in out.iter_mut().zip(x) {
                    let v = if abs_bits(*v, false) < 0x0080_0000 {
                        f32::from_bits(v.to_bits() & 0x8000_0000)
                    } else {
                        *v
                    };
                    let (c, er) = t.lookup((v * m).to_bits());
                    *o = c;
                    err |= er;
                }
            } else {
                for (o, v) in out.iter_mut().zip(x) {
                    let (c, er) = t.lookup((*v * m).to_bits());
                    *o = c;
                    err |= er;
                }
            }
            if err == 0 {
                return Ok((e + 127) as u8);
            }
        }
        for (k, (o, v)) in out.iter_mut().zip(x).enumerate() {
            let mut input = Input::from_f32(*v);
            if flush && abs_bits(*v, false) < 0x0080_0000 {
                input = Input::Zero {
                    negative: v.is_sign_negative(),
                };
            }
            *o = encode_input(input.scaled(-e), el, &p.element, index + k as u64 * stride)? as u8;
        }
        Ok((e + 127) as u8)
    }
}

/// Quantize one contiguous block (any length >= 1); returns (scale, codes).
pub fn quantize_block(x: &[f32], format: MxFormat, p: &MxPolicy) -> Result<(u8, Vec<u8>), MxError> {
    let coder = ElementCoder::new(format, p)?;
    let mut codes = vec![0u8; x.len()];
    let s = coder.block(x, &mut codes, 0)?;
    Ok((s, codes))
}

/// Work units: groups of consecutive blocks (in `[outer, nblocks]` order),
/// whose inputs, codes and scales are each one contiguous range.
fn unit_ranges(l: &AxisLayout) -> Vec<(usize, usize)> {
    // (first unit, unit count) with about 64K elements per task.
    let per_unit = l.block * l.inner;
    let units = l.outer * l.nblocks;
    let step = (65536 / per_unit.max(1)).max(1);
    (0..units).step_by(step).map(|u| (u, step.min(units - u))).collect()
}

fn unit_span(l: &AxisLayout, u: usize) -> (usize, usize) {
    let (o, b) = (u / l.nblocks, u % l.nblocks);
    let start = (o * l.len + b * l.block) * l.inner;
    let bl = l.block.min(l.len - b * l.block);
    (start, bl * l.inner)
}

/// Quantize `input` (C order, shape given by `layout`). Deterministic for any
/// thread count. Element `i` of `input` (its C-order index, whatever the
/// axis) is cast with index `i`: its stochastic draw and any error use it.
pub fn quantize(input: &[f32], layout: &AxisLayout, format: MxFormat, p: &MxPolicy) -> Result<Quantized, MxError> {
    if input.len() != layout.elements() {
        return Err(MxError::Shape(format!(
            "input has {} elements, layout expects {}",
            input.len(),
            layout.elements()
        )));
    }
    let coder = ElementCoder::new(format, p)?;
    if input.is_empty() {
        // No blocks (an empty axis, outer or inner extent): nothing to walk.
        return Ok(Quantized {
            codes: Vec::new(),
            scales: Vec::new(),
        });
    }
    let mut codes = vec![0u8; input.len()];
    let mut scales = vec![0u8; layout.scale_count()];
    quantize_with(&coder, input, layout, &mut codes, &mut scales)?;
    Ok(Quantized { codes, scales })
}

/// [`quantize`] into caller-provided buffers: `codes` holds one byte per
/// element (the input's layout), `scales` holds `layout.scale_count()`
/// bytes. Gives the same bytes as [`quantize`]; a caller that reuses its
/// buffers pays no allocation and no first-touch page faults per call. On
/// an error the buffers' contents are unspecified.
pub fn quantize_into(
    input: &[f32],
    layout: &AxisLayout,
    format: MxFormat,
    p: &MxPolicy,
    codes: &mut [u8],
    scales: &mut [u8],
) -> Result<(), MxError> {
    for (what, got, want) in [
        ("input", input.len(), layout.elements()),
        ("codes", codes.len(), layout.elements()),
        ("scales", scales.len(), layout.scale_count()),
    ] {
        if got != want {
            return Err(MxError::Shape(format!(
                "{what} has {got} elements, layout expects {want}"
            )));
        }
    }
    let coder = ElementCoder::new(format, p)?;
    if input.is_empty() {
        // No blocks (an empty axis, outer or inner extent), as in quantize.
        return Ok(());
    }
    quantize_with(&coder, input, layout, codes, scales)
}

/// The parallel loop of [`quantize`] and [`quantize_into`]; lengths checked
/// by the caller.
fn quantize_with(
    coder: &ElementCoder,
    input: &[f32],
    layout: &AxisLayout,
    codes: &mut [u8],
    scales: &mut [u8],
) -> Result<(), MxError> {
    // Split outputs into per-task disjoint slices.
    let tasks = unit_ranges(layout);
    let mut jobs = Vec::with_capacity(tasks.len());
    let (mut crest, mut srest) = (codes, scales);
    for &(u0, n) in &tasks {
        let (start, _) = unit_span(layout, u0);
        let (last_start, last_len) = unit_span(layout, u0 + n - 1);
        let clen = last_start + last_len - start;
        let (c, cr) = std::mem::take(&mut crest).split_at_mut(clen);
        let (s, sr) = std::mem::take(&mut srest).split_at_mut(n * layout.inner);
        crest = cr;
        srest = sr;
        jobs.push((u0, n, start, c, s));
    }
    jobs.into_par_iter()
        .try_for_each(|(u0, n, start0, c, s)| -> Result<(), MxError> {
            if layout.inner == 1 {
                // runs of up to 64 consecutive blocks within one row
                let mut k = 0;
                while k < n {
                    let u = u0 + k;
                    let (o, b) = (u / layout.nblocks, u % layout.nblocks);
                    let g = (n - k).min(layout.nblocks - b).min(64);
                    let start = o * layout.len + b * layout.block;
                    let end = o * layout.len + ((b + g) * layout.block).min(layout.len);
                    coder.run_blocks(
                        &input[start..end],
                        &mut c[start - start0..end - start0],
                        &mut s[k..k + g],
                        layout.block,
                        start as u64,
                    )?;
                    k += g;
                }
                return Ok(());
            }
            let mut buf = vec![0f32; layout.block];
            let mut cbuf = vec![0u8; layout.block];
            for k in 0..n {
                let (start, len) = unit_span(layout, u0 + k);
                let xs = &input[start..start + len];
                let cs = &mut c[start - start0..start - start0 + len];
                let ss = &mut s[k * layout.inner..(k + 1) * layout.inner];
                if layout.inner == 1 {
                    ss[0] = coder.block(xs, cs, start as u64)?;
                } else {
                    let bl = len / layout.inner;
                    for i in 0..layout.inner {
                        for j in 0..bl {
                            buf[j] = xs[j * layout.inner + i];
                        }
                        ss[i] = coder.block_strided(
                            &buf[..bl],
                            &mut cbuf[..bl],
                            (start + i) as u64,
                            layout.inner as u64,
                        )?;
                        for j in 0..bl {
                            cs[j * layout.inner + i] = cbuf[j];
                        }
                    }
                }
            }
            Ok(())
        })
}

fn check_dequant(codes: &[u8], scales: &[u8], layout: &AxisLayout) -> Result<(), MxError> {
    if codes.len() != layout.elements() {
        return Err(MxError::Shape(format!(
            "codes have {} elements, expected {}",
            codes.len(),
            layout.elements()
        )));
    }
    if scales.len() != layout.scale_count() {
        return Err(MxError::Shape(format!(
            "scales have {} elements, expected {} (axis length {} / block {})",
            scales.len(),
            layout.scale_count(),
            layout.len,
            layout.block
        )));
    }
    Ok(())
}

fn dequant_with<T: Send + Copy>(
    codes: &[u8],
    scales: &[u8],
    layout: &AxisLayout,
    format: MxFormat,
    f: impl Fn(f64) -> T + Sync,
) -> Result<Vec<T>, MxError> {
    check_dequant(codes, scales, layout)?;
    let el = format.element();
    let values: Vec<f64> = (0..=255u16).map(|c| el.decode_f64(c)).collect();
    let l = *layout;
    Ok(codes
        .par_iter()
        .enumerate()
        .map(|(idx, &c)| {
            let i = idx % l.inner;
            let j = (idx / l.inner) % l.len;
            let o = idx / (l.inner * l.len);
            let s = scales[(o * l.nblocks + j / l.block) * l.inner + i];
            let v = if s == 0xFF {
                f64::NAN
            } else {
                values[c as usize] * pow2(e8m0_exponent(s))
            };
            f(v)
        })
        .collect())
}

/// Exact dequantization to f64 (every MX value is exact in f64).
pub fn dequantize_f64(codes: &[u8], scales: &[u8], layout: &AxisLayout, format: MxFormat) -> Result<Vec<f64>, MxError> {
    dequant_with(codes, scales, layout, format, |v| v)
}

/// Dequantization to f32: exact wherever the value is representable in f32;
/// otherwise rounded to nearest-even. Returns the values and the number of
/// elements that were not exact (an f32 subnormal below its precision, or
/// beyond f32 range), so callers never lose precision silently.
pub fn dequantize(
    codes: &[u8],
    scales: &[u8],
    layout: &AxisLayout,
    format: MxFormat,
) -> Result<(Vec<f32>, usize), MxError> {
    let v = dequant_with(codes, scales, layout, format, |v| {
        (v as f32, !v.is_nan() && (v as f32) as f64 != v)
    })?;
    let inexact = v.iter().filter(|p| p.1).count();
    Ok((v.into_iter().map(|p| p.0).collect(), inexact))
}

/// Summary of a quantization, for reports.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct QuantStats {
    pub elements: usize,
    pub blocks: usize,
    /// Finite elements with |x| / X above the element max (clamped).
    pub saturated: usize,
    /// Non-zero finite elements that became zero.
    pub flushed_to_zero: usize,
    pub nan_scales: usize,
    /// Largest |x - dequant(x)| over finite elements of finite-scale blocks.
    pub max_abs_error: f64,
    /// Smallest and largest scale byte used (excluding NaN).
    pub scale_range: Option<(u8, u8)>,
}

impl QuantStats {
    pub fn compute(input: &[f32], q: &Quantized, layout: &AxisLayout, format: MxFormat) -> Result<QuantStats, MxError> {
        let deq = dequantize_f64(&q.codes, &q.scales, layout, format)?;
        let max = format.element().max_value();
        let l = *layout;
        let mut st = QuantStats {
            elements: input.len(),
            blocks: q.scales.len(),
            ..Default::default()
        };
        st.nan_scales = q.scales.iter().filter(|&&s| s == 0xFF).count();
        let finite: Vec<u8> = q.scales.iter().copied().filter(|&s| s != 0xFF).collect();
        st.scale_range = finite.iter().min().zip(finite.iter().max()).map(|(a, b)| (*a, *b));
        for (idx, (&x, &d)) in input.iter().zip(&deq).enumerate() {
            if !x.is_finite() || d.is_nan() {
                continue;
            }
            let i = idx % l.inner;
            let j = (idx / l.inner) % l.len;
            let o = idx / (l.inner * l.len);
            let s = q.scales[(o * l.nblocks + j / l.block) * l.inner + i];
            let xs = (x as f64).abs() * 2f64.powi(127 - s as i32);
            if xs > max {
                st.saturated += 1;
            }
            if x != 0.0 && d == 0.0 {
                st.flushed_to_zero += 1;
            }
            st.max_abs_error = st.max_abs_error.max((x as f64 - d).abs());
        }
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use crate::mx::{MxPreset, ScaleMode};

    fn q(x: &[f32], f: MxFormat, preset: MxPreset) -> (u8, Vec<u8>) {
        quantize_block(x, f, &preset.policy(f)).unwrap()
    }

    #[test]
    fn floor_vs_rceil_at_saturation() {
        // amax 0x43FFFFFF (511.99997) in e4m3: FLOOR X = 2^0 (saturates at
        // 448), RCEIL X = 2^1. The float-log2 bug would give 2^1 for FLOOR.
        let mut x = vec![1.0f32; 32];
        x[3] = f32::from_bits(0x43FF_FFFF);
        let (s, c) = q(&x, MxFormat::Fp8E4M3, MxPreset::Ocp);
        assert_eq!(s, 127);
        assert_eq!(c[3], 0x7E);
        let (s, c) = q(&x, MxFormat::Fp8E4M3, MxPreset::Nvidia);
        assert_eq!(s, 128);
        assert_eq!(c[3], 0x78); // 255.99998 rounds to 256
        assert_eq!(Format::E4M3.decode_f64(c[3] as u16) * 2.0, 512.0);
    }

    #[test]
    fn tiny_scale_is_exact() {
        // amax = 2^-130 (f32 subnormal): FLOOR E = -138 -> clamped to -127,
        // elements are x * 2^127 exactly.
        let x: Vec<f32> = (0..32).map(|i| f32::from_bits(0x0008_0000 + i)).collect();
        let (s, c) = q(&x, MxFormat::Fp8E4M3, MxPreset::Ocp);
        assert_eq!(s, 0);
        for (v, c) in x.iter().zip(&c) {
            let exact = *v as f64 * 2f64.powi(127);
            let back = Format::E4M3.decode_f64(*c as u16);
            let half_ulp = 2f64.powi(-9) / 2.0 + 1e-300;
            assert!(
                approx::abs_diff_eq!(back, exact, epsilon = half_ulp),
                "{v:e} {c:#x}: {back:e} vs {exact:e}"
            );
        }
    }

    #[test]
    fn nonfinite_block_policies() {
        let mut x = vec![1.0f32; 32];
        x[0] = f32::INFINITY;
        let (s, c) = q(&x, MxFormat::Fp8E4M3, MxPreset::Torchao);
        assert_eq!((s, c[0], c[1]), (0xFF, 0x7F, 0x7F));
        let (s, c) = q(&x, MxFormat::Fp8E4M3, MxPreset::Nvidia);
        assert_eq!((s, c[0], c[1]), (0xFE, 0x7E, 0x00));
        x[0] = f32::NAN;
        let (s, c) = q(&x, MxFormat::Fp8E4M3, MxPreset::Nvidia);
        // amax ignores the NaN: 1.0 * fl32(1/448) rounds up to 2^-8.
        assert_eq!((s, c[0], c[1]), (119, 0x7F, 0x78));
    }

    #[test]
    fn zero_blocks_subnormal_flush_and_signs() {
        let mut x = vec![0.0f32; 32];
        x[5] = -0.0;
        let (s, c) = q(&x, MxFormat::Fp8E4M3, MxPreset::Ocp);
        assert_eq!((s, c[0], c[5]), (0x00, 0x00, 0x80));
        let mut p = MxPreset::Ocp.policy(MxFormat::Fp8E4M3);
        p.zero_block = crate::mx::ZeroBlock::One;
        assert_eq!(quantize_block(&x, MxFormat::Fp8E4M3, &p).unwrap().0, 0x7F);
        // f32 subnormals: kept exactly by default (scale 2^-127), zero when flushed
        let sub: Vec<f32> = (0..32).map(|i| f32::from_bits(0x0040_0000 + i * 0x1000)).collect();
        let (s, c) = q(&sub, MxFormat::Fp8E4M3, MxPreset::Ocp);
        assert_eq!(s, 0x00);
        assert_eq!(Format::E4M3.decode_f64(c[0] as u16), 1.0); // 2^-127 / 2^-127
        let mut p = MxPreset::Ocp.policy(MxFormat::Fp8E4M3);
        p.flush_subnormals = true;
        let (s, c) = quantize_block(&sub, MxFormat::Fp8E4M3, &p).unwrap();
        assert_eq!(s, 0x00);
        assert!(c.iter().all(|&c| c == 0));
    }

    #[test]
    fn mxint8_minus_two() {
        let mut x = vec![0.5f32; 32];
        x[0] = -1.999; // * 64 = -127.94 -> -128
        let (s, c) = q(&x, MxFormat::Int8, MxPreset::Ocp);
        assert_eq!((s, c[0], c[1]), (127, 0x80, 32));
        let (_, c) = q(&x, MxFormat::Int8, MxPreset::Microxcaling);
        assert_eq!(c[0], 0x81);
    }

    #[test]
    fn stochastic_elements_depend_on_index_and_seed_only() {
        let x: Vec<f32> = (0..4096).map(|i| 1.0 + (i % 97) as f32 / 97.0).collect();
        let l = AxisLayout::new(&[4096], -1, 32, false).unwrap();
        let mut p = MxPreset::Ocp.policy(MxFormat::Fp8E4M3);
        p.element.rounding = crate::format::Rounding::Stochastic;
        let a = quantize(&x, &l, MxFormat::Fp8E4M3, &p).unwrap();
        let b = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| quantize(&x, &l, MxFormat::Fp8E4M3, &p).unwrap());
        assert_eq!(a, b);
        p.element.stochastic.seed = 1;
        assert_ne!(quantize(&x, &l, MxFormat::Fp8E4M3, &p).unwrap().codes, a.codes);
    }

    /// Along an inner axis, each element's stochastic draw uses its own
    /// C-order index (found by the mx_quantize fuzz target: the strided
    /// path used `start + column + row`, so draws repeated across columns).
    #[test]
    fn stochastic_draws_use_the_c_order_index_on_any_axis() {
        let (rows, cols) = (32usize, 3usize);
        let x: Vec<f32> = (0..rows * cols).map(|i| 0.3 + (i % 11) as f32 * 0.173).collect();
        let f = MxFormat::Fp8E4M3;
        let mut p = MxPreset::Ocp.policy(f);
        p.element.rounding = crate::format::Rounding::Stochastic;
        p.element.stochastic.bits = 1;
        let l = AxisLayout::new(&[rows, cols], 0, 32, false).unwrap();
        let q = quantize(&x, &l, f, &p).unwrap();
        for (i, v) in x.iter().enumerate() {
            let e = e8m0_exponent(q.scales[i % cols]);
            let want = encode_input(Input::from_f32(*v).scaled(-e), f.element(), &p.element, i as u64).unwrap();
            assert_eq!(q.codes[i] as u16, want, "element {i}");
        }
    }

    #[test]
    fn padded_last_block_equals_zero_padding() {
        let x: Vec<f32> = (0..40).map(|i| (i as f32 - 20.0) * 0.731).collect();
        let l = AxisLayout::new(&[40], -1, 32, true).unwrap();
        let p = MxPreset::Nvidia.policy(MxFormat::Fp8E4M3);
        let got = quantize(&x, &l, MxFormat::Fp8E4M3, &p).unwrap();
        let mut padded = x.clone();
        padded.resize(64, 0.0);
        let l64 = AxisLayout::new(&[64], -1, 32, false).unwrap();
        let want = quantize(&padded, &l64, MxFormat::Fp8E4M3, &p).unwrap();
        assert_eq!(got.scales, want.scales);
        assert_eq!(got.codes[..], want.codes[..40]);
    }

    /// The array path (with its FP8 fast path and runs of blocks) equals
    /// quantizing each block on its own, on blocks built to hit every branch.
    #[test]
    fn array_path_equals_block_path() {
        let mut s = 12345u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let (rows, cols) = (7usize, 200usize);
        let mut x: Vec<f32> = (0..rows * cols)
            .map(|_| {
                let u = next();
                let e = (u >> 40) % 90;
                f32::from_bits((u as u32 & 0x807F_FFFF) | ((e as u32 + 60) << 23))
            })
            .collect();
        x[5] = f32::INFINITY;
        x[300] = f32::NAN;
        x[420] = -f32::INFINITY;
        for v in &mut x[600..632] {
            *v = f32::from_bits(*v as u32 % 0x0080_0000); // f32 subnormals
        }
        for v in &mut x[700..760] {
            *v = 0.0;
        }
        for v in &mut x[900..930] {
            *v = f32::from_bits(0x7F7F_0000);
        }
        let mut levels = 0;
        for f in [MxFormat::Fp8E4M3, MxFormat::Fp8E5M2, MxFormat::Fp4E2M1] {
            for preset in MxPreset::ALL {
                for mode in ScaleMode::ALL {
                    let mut p = preset.policy(f);
                    p.scale_mode = mode;
                    // 32: the loop specialised to the block length; 16: the general one
                    for bs in [32, 16] {
                        let l = AxisLayout::new(&[rows, cols], -1, bs, true).unwrap();
                        for level in Simd::ALL {
                            let Some(q) = quantize_at(level, &x, &l, f, &p) else {
                                continue;
                            };
                            levels += 1;
                            for r in 0..rows {
                                for b in 0..l.nblocks {
                                    let (lo, hi) = (r * cols + b * bs, r * cols + ((b + 1) * bs).min(cols));
                                    let (sc, codes) = quantize_block(&x[lo..hi], f, &p).unwrap();
                                    let at = format!("{f} {preset} {mode:?} block {bs} {level:?} row {r} block {b}");
                                    assert_eq!(q.scales[r * l.nblocks + b], sc, "{at}");
                                    assert_eq!(&q.codes[lo..hi], &codes[..], "{at}");
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(levels >= 3 * MxPreset::ALL.len() * ScaleMode::ALL.len() * 2);
    }

    /// [`quantize`] with the FP8 block loop run at `level`; None when the
    /// CPU lacks it.
    fn quantize_at(level: Simd, x: &[f32], l: &AxisLayout, f: MxFormat, p: &MxPolicy) -> Option<Quantized> {
        if !level.available() {
            return None;
        }
        let mut coder = ElementCoder::new(f, p).unwrap();
        coder.simd = level;
        let (mut codes, mut scales) = (vec![0u8; x.len()], vec![0u8; l.scale_count()]);
        quantize_with(&coder, x, l, &mut codes, &mut scales).unwrap();
        Some(Quantized { codes, scales })
    }

    #[test]
    fn quantize_into_equals_quantize_and_checks_lengths() {
        let x: Vec<f32> = (0..4 * 96).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 0.37).collect();
        let l = AxisLayout::new(&[4, 96], -1, 32, false).unwrap();
        let (f, p) = (MxFormat::Fp8E4M3, MxPreset::Nvidia.policy(MxFormat::Fp8E4M3));
        let want = quantize(&x, &l, f, &p).unwrap();
        // stale contents are overwritten
        let (mut codes, mut scales) = (vec![0xAAu8; x.len()], vec![0xAAu8; l.scale_count()]);
        quantize_into(&x, &l, f, &p, &mut codes, &mut scales).unwrap();
        assert_eq!((codes.clone(), scales.clone()), (want.codes, want.scales));
        let short = &mut scales[1..];
        assert!(matches!(
            quantize_into(&x, &l, f, &p, &mut codes, short),
            Err(MxError::Shape(_))
        ));
        assert!(matches!(
            quantize_into(&x[1..], &l, f, &p, &mut codes, &mut scales),
            Err(MxError::Shape(_))
        ));
        assert!(matches!(
            quantize_into(&x, &l, f, &p, &mut codes[1..], &mut scales),
            Err(MxError::Shape(_))
        ));
    }

    /// An empty inner extent: no blocks, no division by it (found by the
    /// mx_quantize fuzz target: quantize_into divided by the inner extent).
    #[test]
    fn empty_arrays_quantize_to_nothing_on_any_axis() {
        let (f, p) = (MxFormat::Fp8E4M3, MxPreset::Ocp.policy(MxFormat::Fp8E4M3));
        for (shape, axis) in [(vec![2, 32, 0], 1), (vec![0, 32], 1), (vec![3, 0], 0), (vec![0], 0)] {
            let l = AxisLayout::new(&shape, axis, 32, true).unwrap();
            let q = quantize(&[], &l, f, &p).unwrap();
            assert!(q.codes.is_empty() && q.scales.is_empty(), "{shape:?}");
            quantize_into(&[], &l, f, &p, &mut [], &mut []).unwrap();
        }
    }

    #[test]
    fn axis_layout_rejects_bad_input() {
        assert!(AxisLayout::new(&[4, 30], -1, 32, false).is_err());
        assert!(AxisLayout::new(&[4, 30], -1, 32, true).is_ok());
        assert!(AxisLayout::new(&[4, 32], 2, 32, false).is_err());
        assert!(AxisLayout::new(&[4, 32], -1, 24, false).is_err());
    }

    #[test]
    fn any_axis_equals_last_axis_of_the_transpose() {
        let (a, b) = (64usize, 3usize);
        let x: Vec<f32> = (0..a * b).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 0.37).collect();
        let l0 = AxisLayout::new(&[a, b], 0, 32, false).unwrap();
        let p = MxPreset::Ocp.policy(MxFormat::Fp8E4M3);
        let q0 = quantize(&x, &l0, MxFormat::Fp8E4M3, &p).unwrap();
        let xt: Vec<f32> = (0..a * b).map(|k| x[(k % a) * b + k / a]).collect();
        let l1 = AxisLayout::new(&[b, a], -1, 32, false).unwrap();
        let q1 = quantize(&xt, &l1, MxFormat::Fp8E4M3, &p).unwrap();
        for k in 0..a * b {
            assert_eq!(q0.codes[(k % a) * b + k / a], q1.codes[k]);
        }
        for bl in 0..2 {
            for col in 0..b {
                assert_eq!(q0.scales[bl * b + col], q1.scales[col * 2 + bl]);
            }
        }
    }
}
