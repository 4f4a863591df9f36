//! One job's files, shared by the `exec:` and `dump:` subjects (protocol
//! "mxbi-exec/1" and dump folders "mxbi-bi-dump/1", docs/BI.md): the
//! inputs as `.npy` images, and the output file read back, checked against
//! the job and widened exactly to f32.
//!
//! # Contract
//! - Inputs are plain f32 values (`Matrix::F32`); A is written `[M, K]`,
//!   B `[K, N]` (a `[N, K]` B is transposed first), both `<f4`, C order,
//!   byte-identical to `numpy.save`. Every value must be exactly
//!   representable in the job's input type, or the job is refused.
//! - An output is `<f4` (f32), `<f2` (f16) or `<u2` (bf16 bits), shape
//!   exactly `[M, N]`; anything else is an error naming the file. The file
//!   size is bounded by the job before a byte of data is read.
//! - Widening is exact and keeps every bit: f16 NaN payloads and the
//!   signalling bit survive (no library conversion that quiets NaNs).

use crate::gemm::{representable, BLayout, Matrix, Problem};
use crate::io::{npy_header_bytes, read_npy_bytes, DType};
use crate::order::InType;
use std::borrow::Cow;
use std::path::Path;

/// Bytes a `.npy` header may take beyond the data (numpy writes 128).
const MAX_HEADER_SLACK: u64 = 1 << 16;

/// An output element type a runner may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutType {
    F32,
    F16,
    Bf16,
}

impl OutType {
    pub const fn name(self) -> &'static str {
        match self {
            OutType::F32 => "f32",
            OutType::F16 => "f16",
            OutType::Bf16 => "bf16",
        }
    }

    pub fn from_name(s: &str) -> Option<OutType> {
        [OutType::F32, OutType::F16, OutType::Bf16]
            .into_iter()
            .find(|t| t.name() == s)
    }

    /// The `.npy` dtype holding it (bf16 as `<u2` bits).
    const fn dtype(self) -> DType {
        match self {
            OutType::F32 => DType::F32,
            OutType::F16 => DType::F16,
            OutType::Bf16 => DType::U16,
        }
    }

    fn of_dtype(d: DType) -> Option<OutType> {
        match d {
            DType::F32 => Some(OutType::F32),
            DType::F16 => Some(OutType::F16),
            DType::U16 => Some(OutType::Bf16),
            _ => None,
        }
    }
}

/// A job's inputs: A `[m, k]` and B `[k, n]` (KN), values in `input`.
pub struct JobInputs<'a> {
    pub a: &'a [f32],
    pub b: Cow<'a, [f32]>,
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

impl<'a> JobInputs<'a> {
    /// The problem's operands, checked: plain values, consistent sizes,
    /// every value exactly representable in `input`.
    pub fn of(p: &Problem<'a>, input: InType) -> Result<JobInputs<'a>, String> {
        let (Matrix::F32(a), Matrix::F32(b)) = (p.a, p.b) else {
            return Err("MX inputs (codes and scales) cannot be sent to a runner; only plain values".into());
        };
        let (m, k, n) = (p.m, p.k, p.n);
        for (what, got, x, y) in [("A", a.len(), m, k), ("B", b.len(), k, n)] {
            if x.checked_mul(y) != Some(got) {
                return Err(format!("{what} has {got} values, expected {x} x {y}"));
            }
        }
        for (what, v) in [("A", a), ("B", b)] {
            if let Some(i) = v.iter().position(|&x| !representable(x, input)) {
                return Err(format!(
                    "{what}[{i}] = {:e} is not exactly representable in the input type {}",
                    v[i],
                    input.name()
                ));
            }
        }
        let b = match p.b_layout {
            BLayout::Kn => Cow::Borrowed(b),
            BLayout::Nk => Cow::Owned((0..k * n).map(|i| b[(i % n) * k + i / n]).collect()),
        };
        Ok(JobInputs { a, b, m, k, n })
    }

    /// `a.npy` as written: `<f4 [m, k]`.
    pub fn a_npy(&self) -> Vec<u8> {
        npy_f32(self.a, self.m, self.k)
    }

    /// `b.npy` as written: `<f4 [k, n]`.
    pub fn b_npy(&self) -> Vec<u8> {
        npy_f32(&self.b, self.k, self.n)
    }
}

/// A `<f4` C-order `.npy` image of `[rows, cols]`.
pub fn npy_f32(data: &[f32], rows: usize, cols: usize) -> Vec<u8> {
    let mut out = npy_header_bytes(DType::F32, &[rows, cols]).expect("a 2-D f32 header always fits");
    out.reserve(data.len() * 4);
    for x in data {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Reads an output file of a job `[m, n]`: `claimed` is the dtype the
/// runner named (None: taken from the file, `<u2` meaning bf16). The
/// message names the file and what was expected.
pub fn read_output(path: &Path, claimed: Option<OutType>, m: usize, n: usize) -> Result<Vec<f32>, String> {
    let show = path.display();
    let max = output_bound(m, n);
    let bytes = read_bounded(path, max).map_err(|e| format!("{show}: {e}"))?;
    read_output_bytes(&bytes, claimed, m, n).map_err(|e| format!("{show}: {e}"))
}

/// Most bytes the output file of a `[m, n]` job may have.
fn output_bound(m: usize, n: usize) -> u64 {
    (m as u64)
        .saturating_mul(n as u64)
        .saturating_mul(4)
        .saturating_add(MAX_HEADER_SLACK)
}

/// The checks and widening of [`read_output`] on the file's bytes: at most
/// the bytes a `[m, n]` output can take, a `.npy` of dtype `<f4`, `<f2` or
/// `<u2` (the one `claimed`, if given) and shape exactly `[m, n]`, widened
/// exactly to `m * n` f32 values. The message (one line) does not name the
/// file.
pub fn read_output_bytes(bytes: &[u8], claimed: Option<OutType>, m: usize, n: usize) -> Result<Vec<f32>, String> {
    let max = output_bound(m, n);
    if bytes.len() as u64 > max {
        return Err(format!("more than the {max} bytes a [{m}, {n}] output can take"));
    }
    let t = read_npy_bytes(bytes).map_err(|e| e.to_string().replacen("<memory>: ", "", 1))?;
    let descr = t.dtype().npy_descr().unwrap_or("?");
    let Some(got) = OutType::of_dtype(t.dtype()) else {
        return Err(format!(
            "dtype {descr}; expected <f4 (f32), <f2 (f16) or <u2 (bf16 bits)"
        ));
    };
    if let Some(want) = claimed {
        if want != got {
            return Err(format!(
                "dtype {descr}, but the runner said {} (which is stored as {})",
                want.name(),
                want.dtype().npy_descr().unwrap_or("?")
            ));
        }
    }
    if t.shape() != [m, n] {
        return Err(format!("shape {:?}, expected [{m}, {n}]", t.shape()));
    }
    let raw = t.bytes();
    Ok(match got {
        OutType::F32 => raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        OutType::F16 => raw
            .chunks_exact(2)
            .map(|c| f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
        OutType::Bf16 => raw
            .chunks_exact(2)
            .map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16))
            .collect(),
    })
}

/// Refuses an output that holds NaN or Inf although no summation order can
/// overflow on the job's inputs: every input finite and
/// `K * max|A| * max|B| * (1 + 2^-7)^K` (the largest sum of products, with
/// one rounding of relative size up to 2^-7 per step compounded over K
/// steps: any accumulator of at least 8 significant bits) at most the
/// output type's largest finite value. Such an output is not a result of
/// the job (uninitialised memory, a wrong buffer); the message (one line)
/// names the first such element.
pub fn check_overflow_free(inputs: &JobInputs, c: &[f32], out: OutType) -> Result<(), String> {
    let Some(at) = c.iter().position(|x| !x.is_finite()) else {
        return Ok(());
    };
    let amax = |v: &[f32]| {
        v.iter()
            .try_fold(0f64, |m, x| x.is_finite().then(|| m.max((*x as f64).abs())))
    };
    let (Some(a), Some(b)) = (amax(inputs.a), amax(&inputs.b)) else {
        return Ok(()); // non-finite inputs: anything may follow
    };
    let k = inputs.k as f64;
    let bound = k * a * b * (k * (2f64.powi(-7)).ln_1p()).exp();
    let max = match out {
        OutType::F32 => f32::MAX as f64,
        OutType::F16 => 65504.0,
        OutType::Bf16 => f32::from_bits(0x7F7F_0000) as f64,
    };
    if bound > max {
        return Ok(());
    }
    let n = inputs.n.max(1);
    Err(format!(
        "C[{}, {}] is {}, but no summation of these finite inputs can overflow (K * max|A| * max|B| = {:e}): not a result of the job",
        at / n,
        at % n,
        c[at],
        k * a * b
    ))
}

/// At most `max + 1` bytes of a regular file (a FIFO or device is refused:
/// it could block or never end).
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::with_capacity(meta.len().min(max + 1) as usize);
    f.take(max + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// The f32 with the same value as the f16 `h`, bit for bit: NaN payloads
/// and the signalling bit kept (shifted into the top of the f32 fraction).
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1F) as u32;
    let man = (h & 0x3FF) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // subnormal: man * 2^-24; normalise
            let mut e = 127 - 14;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3FF) << 13)
        }
        (0x1F, _) => sign | 0x7F80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// The selected rows of a `[m, n]` output (all when None); rows are
/// checked against `m`.
pub fn select_rows(all: Vec<f32>, m: usize, n: usize, rows: Option<&[usize]>) -> Result<Vec<f32>, String> {
    let Some(rows) = rows else { return Ok(all) };
    let mut out = Vec::with_capacity(rows.len() * n);
    for &r in rows {
        if r >= m {
            return Err(format!("row {r} asked of a batch of {m} rows"));
        }
        out.extend_from_slice(&all[r * n..(r + 1) * n]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_widening_is_exact_and_keeps_nan_bits() {
        for h in 0..=u16::MAX {
            let w = f16_bits_to_f32(h);
            let x = half::f16::from_bits(h);
            if x.is_nan() {
                assert!(w.is_nan());
                // the 10 fraction bits, signalling bit included, survive
                assert_eq!((w.to_bits() >> 13) & 0x3FF, (h & 0x3FF) as u32, "{h:#06x}");
                assert_eq!(w.is_sign_negative(), h & 0x8000 != 0);
            } else {
                assert_eq!(w.to_bits(), x.to_f32().to_bits(), "{h:#06x}");
            }
        }
    }

    #[test]
    fn npy_images_are_what_numpy_writes() {
        let img = npy_f32(&[1.0, -2.0, 0.5, 3.0, 4.0, 5.0], 2, 3);
        let t = read_npy_bytes(&img).unwrap();
        assert_eq!(t.shape(), [2, 3]);
        assert_eq!(t.to_f32_vec(), [1.0, -2.0, 0.5, 3.0, 4.0, 5.0]);
        assert_eq!(img.len(), 128 + 24);
    }

    #[test]
    fn nk_b_is_transposed_and_inputs_are_checked() {
        let a = [1.0f32, 2.0];
        let b_nk = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // [n=3, k=2]
        let p = Problem {
            a: Matrix::F32(&a),
            b: Matrix::F32(&b_nk),
            m: 1,
            k: 2,
            n: 3,
            b_layout: BLayout::Nk,
        };
        let j = JobInputs::of(&p, InType::F32).unwrap();
        assert_eq!(&*j.b, &[1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
        let odd = [1.0f32 + f32::EPSILON, 2.0];
        let q = Problem {
            a: Matrix::F32(&odd),
            ..p
        };
        let e = JobInputs::of(&q, InType::Bf16).err().unwrap();
        assert!(e.starts_with("A[0] = ") && e.contains("bf16"), "{e}");
    }

    #[test]
    fn non_finite_outputs_are_refused_only_where_no_overflow_can_happen() {
        fn job<'a>(a: &'a [f32], b: &'a [f32]) -> JobInputs<'a> {
            JobInputs {
                a,
                b: Cow::Borrowed(b),
                m: 2,
                k: 2,
                n: 2,
            }
        }
        let (a, b) = ([1.0f32, -2.0, 0.5, 3.0], [0.25f32, 1.0, -1.0, 2.0]);
        let j = job(&a, &b);
        assert!(check_overflow_free(&j, &[1.0, 2.0, 3.0, 4.0], OutType::F32).is_ok());
        let e = check_overflow_free(&j, &[1.0, 2.0, f32::NAN, 4.0], OutType::F32).unwrap_err();
        assert!(e.starts_with("C[1, 0] is NaN, but no summation"), "{e}");
        assert!(check_overflow_free(&j, &[f32::INFINITY, 2.0, 3.0, 4.0], OutType::F16).is_err());
        // inputs that can overflow the output type: anything goes
        let big = [3e38f32; 4];
        let inf_nan = [f32::INFINITY, f32::NAN, 0.0, 0.0];
        assert!(check_overflow_free(&job(&big, &b), &inf_nan, OutType::F32).is_ok());
        let f16_big = [300.0f32; 4];
        let inf = [f32::INFINITY, 0.0, 0.0, 0.0];
        assert!(check_overflow_free(&job(&f16_big, &f16_big), &inf, OutType::F16).is_ok());
        assert!(check_overflow_free(&job(&f16_big, &f16_big), &inf, OutType::F32).is_err());
        // non-finite inputs: anything goes
        let nan_in = [f32::NAN, 1.0, 1.0, 1.0];
        assert!(check_overflow_free(&job(&nan_in, &b), &inf_nan, OutType::F32).is_ok());
    }

    #[test]
    fn output_bounds_do_not_overflow() {
        // a [usize::MAX, usize::MAX] job (a manifest may claim one): the
        // bound saturates instead of wrapping to a small number
        assert_eq!(output_bound(usize::MAX, usize::MAX), u64::MAX);
        let e = read_output_bytes(b"\x93NUMPY", None, usize::MAX, 2).unwrap_err();
        assert!(!e.contains('\n'), "{e}");
    }
}
