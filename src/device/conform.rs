//! Order conformance: random orders × shapes × inputs, run as generated
//! CUDA kernels (`codegen`) and as the CPU model (`gemm::gemm`), compared
//! bit for bit. NaN results compare as a class (payloads are counted
//! separately); every other difference is a mismatch, to be fixed in the
//! model, never tolerated.
//!
//! A case is stored as its order, shape, input class and seed; inputs are
//! regenerated from those (SplitMix64), so a capture holds only the GPU's
//! per-row digests and the first mismatching elements.

use super::capture::{canonical_bits, digest64, Capture};
use super::codegen::{Backend16, GpuPlan, TermKind};
use super::{DeviceError, Result};
use crate::format::Format;
use crate::gemm::{gemm, BLayout, Matrix, Problem};
use crate::mx::MxFormat;
use crate::order::{Family, InType, Order};
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};

/// The kind of inputs of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputClass {
    /// Random sign and significand, exponents over a wide range.
    Wide,
    /// Subnormal inputs and products that land in the f32 subnormal range.
    Tiny,
    /// The second half of K repeats the first with B negated: exact
    /// cancellation whose result depends on the order.
    Cancel,
    /// Wide, but half of the entries are zero (+0 or -0): zero products
    /// must take no part in a tensor-core step's alignment.
    Sparse,
    /// Wide, plus special entries (±0, ±Inf, NaN, extremes; one per 4K
    /// entries, so most outputs stay finite) and,
    /// for MX, extreme and NaN scales.
    Specials,
}

/// Element type of the inputs as stored for the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Elem {
    F32,
    Bf16,
    F16,
    E4m3,
    E5m2,
}

impl Elem {
    fn format(self) -> Option<Format> {
        match self {
            Elem::F32 => None,
            Elem::Bf16 => Some(Format::BF16),
            Elem::F16 => Some(Format::F16),
            Elem::E4m3 => Some(Format::E4M3),
            Elem::E5m2 => Some(Format::E5M2),
        }
    }
}

/// One conformance case: everything needed to regenerate it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConformCase {
    pub id: usize,
    /// Canonical order spelling.
    pub order: String,
    /// Kernel for 16-bit `mma(k=16)` steps.
    pub backend16: Backend16,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Element type of A and B (the MX element format when `mx`).
    pub elem: Elem,
    /// Inputs are MX (codes + E8M0 scales, blocks of 32 along K).
    pub mx: bool,
    pub class: InputClass,
    pub seed: u64,
}

/// Inputs of a case: f32 values (what the CPU model reads, or the decoded
/// element values) and, for narrow types, the codes the kernel reads.
pub struct CaseInputs {
    pub a: Vec<f32>,
    pub bt: Vec<f32>,
    pub a_codes: Vec<u16>,
    pub bt_codes: Vec<u16>,
    pub sa: Vec<u8>,
    pub sb: Vec<u8>,
}

fn random_code(r: &mut SplitMix64, elem: Elem, class: InputClass) -> u16 {
    match elem {
        Elem::F32 => unreachable!("f32 values are generated as bits"),
        Elem::Bf16 => {
            let e = match class {
                InputClass::Tiny => r.range_i64(0, 30) as u16,
                _ => r.range_i64(127 - 24, 127 + 24) as u16,
            };
            ((r.next_u32() & 1) as u16) << 15 | e << 7 | (r.next_u32() & 0x7F) as u16
        }
        Elem::F16 => {
            let e = match class {
                InputClass::Tiny => r.range_i64(0, 4) as u16,
                _ => r.range_i64(1, 27) as u16,
            };
            ((r.next_u32() & 1) as u16) << 15 | e << 10 | (r.next_u32() & 0x3FF) as u16
        }
        Elem::E4m3 | Elem::E5m2 => {
            let e5 = elem == Elem::E5m2;
            loop {
                let c = match class {
                    InputClass::Tiny => (r.next_u32() & 0x8F) as u16, // exponent field 0..1
                    _ => (r.next_u32() & 0xFF) as u16,
                };
                let mag = c & 0x7F;
                let special = if e5 { mag >= 0x7C } else { mag == 0x7F };
                if !special {
                    return c;
                }
            }
        }
    }
}

fn random_f32(r: &mut SplitMix64, class: InputClass, operand_b: bool) -> f32 {
    let sign = (r.next_u32() & 1) << 31;
    let mant = r.next_u32() & 0x7F_FFFF;
    let exp = match class {
        // products of an A in [2^-126, 2^-96] and a B in [2^-30, 2^0] are subnormal in f32
        InputClass::Tiny if !operand_b => {
            if r.chance(1, 4) {
                0
            } else {
                r.range_i64(1, 31) as u32
            }
        }
        InputClass::Tiny => r.range_i64(97, 127) as u32,
        _ => r.range_i64(127 - 30, 127 + 30) as u32,
    };
    f32::from_bits(sign | exp << 23 | mant)
}

fn special_code(r: &mut SplitMix64, elem: Elem) -> u16 {
    let s = (r.next_u32() & 1) as u16;
    match elem {
        Elem::F32 => unreachable!(),
        Elem::Bf16 => [0x0000, 0x7F80, 0x7FC0, 0x7F7F, 0x0001][r.below(5) as usize] | s << 15,
        Elem::F16 => [0x0000, 0x7C00, 0x7E00, 0x7BFF, 0x0001][r.below(5) as usize] | s << 15,
        Elem::E4m3 => [0x00, 0x7F, 0x7E, 0x01][r.below(4) as usize] | s << 7,
        Elem::E5m2 => [0x00, 0x7C, 0x7E, 0x7B, 0x01][r.below(5) as usize] | s << 7,
    }
}

fn special_f32(r: &mut SplitMix64) -> f32 {
    let s = if r.chance(1, 2) { -1.0f32 } else { 1.0 };
    s * [
        0.0,
        f32::INFINITY,
        f32::NAN,
        f32::MAX,
        f32::from_bits(1),
        f32::MIN_POSITIVE,
    ][r.below(6) as usize]
}

impl ConformCase {
    pub fn parsed_order(&self) -> Result<Order> {
        self.order
            .parse::<Order>()
            .map_err(|e| DeviceError::Capture(format!("case {}: {e}", self.id)))
    }

    pub fn mx_format(&self) -> Option<MxFormat> {
        self.mx.then_some(if self.elem == Elem::E5m2 {
            MxFormat::Fp8E5M2
        } else {
            MxFormat::Fp8E4M3
        })
    }

    pub fn plan(&self) -> Result<GpuPlan> {
        let mx = self.mx.then_some(self.elem == Elem::E5m2);
        GpuPlan::new(&self.parsed_order()?, mx, self.backend16).map_err(DeviceError::Refused)
    }

    /// Regenerates the inputs (deterministic in the seed).
    pub fn inputs(&self) -> CaseInputs {
        let (m, n, k) = (self.m, self.n, self.k);
        let gen = |rows: usize, stream: u64, operand_b: bool| -> (Vec<f32>, Vec<u16>) {
            let mut vals = vec![0f32; rows * k];
            let mut codes = Vec::new();
            if self.elem.format().is_some() {
                codes = vec![0u16; rows * k];
            }
            for row in 0..rows {
                let mut r = SplitMix64::for_item(self.seed ^ stream, row as u64);
                let half = if self.class == InputClass::Cancel { k / 2 } else { k };
                for kk in 0..k {
                    let idx = row * k + kk;
                    if kk >= half && kk - half < half {
                        // mirror of the first half; B negated
                        let src = row * k + kk - half;
                        if let Some(f) = self.elem.format() {
                            let c = codes[src];
                            let sign_bit = if f.bits() == 16 { 0x8000 } else { 0x80 };
                            codes[idx] = if operand_b { c ^ sign_bit } else { c };
                            vals[idx] = f.decode_f32(codes[idx]);
                        } else {
                            vals[idx] = if operand_b { -vals[src] } else { vals[src] };
                        }
                        continue;
                    }
                    // about one special per row of 4K entries: most dot products stay finite
                    let special = self.class == InputClass::Specials && r.chance(1, 4 * k as u64);
                    if self.class == InputClass::Sparse && r.chance(1, 2) {
                        let neg = r.chance(1, 2);
                        if let Some(f) = self.elem.format() {
                            let sign_bit = if f.bits() == 16 { 0x8000 } else { 0x80 };
                            codes[idx] = if neg { sign_bit } else { 0 };
                            vals[idx] = f.decode_f32(codes[idx]);
                        } else {
                            vals[idx] = if neg { -0.0 } else { 0.0 };
                        }
                        continue;
                    }
                    if let Some(f) = self.elem.format() {
                        let c = if special {
                            special_code(&mut r, self.elem)
                        } else {
                            random_code(&mut r, self.elem, self.class)
                        };
                        codes[idx] = c;
                        vals[idx] = f.decode_f32(c);
                    } else {
                        vals[idx] = if special {
                            special_f32(&mut r)
                        } else {
                            random_f32(&mut r, self.class, operand_b)
                        };
                    }
                }
            }
            (vals, codes)
        };
        let (a, a_codes) = gen(m, 0xA, false);
        let (bt, bt_codes) = gen(n, 0xB, true);
        let (mut sa, mut sb) = (Vec::new(), Vec::new());
        if self.mx {
            let kb = k / 32;
            let scales = |rows: usize, stream: u64| -> Vec<u8> {
                let mut s = vec![127u8; rows * kb];
                for row in 0..rows {
                    let mut r = SplitMix64::for_item(self.seed ^ stream, row as u64);
                    for b in 0..kb {
                        let half = if self.class == InputClass::Cancel { kb / 2 } else { kb };
                        s[row * kb + b] = if b >= half && b - half < half {
                            s[row * kb + b - half]
                        } else {
                            match self.class {
                                InputClass::Tiny => r.range_i64(0, 20) as u8,
                                InputClass::Specials if r.chance(1, 20) => {
                                    [0u8, 1, 253, 254, 0xFF][r.below(5) as usize]
                                }
                                _ => r.range_i64(127 - 12, 127 + 12) as u8,
                            }
                        };
                    }
                }
                s
            };
            sa = scales(m, 0x5A);
            sb = scales(n, 0x5B);
        }
        CaseInputs {
            a,
            bt,
            a_codes,
            bt_codes,
            sa,
            sb,
        }
    }

    /// The CPU model's output (rows subset, or all), row-major `[rows][N]`.
    pub fn model(&self, inputs: &CaseInputs, rows: Option<&[usize]>) -> Result<Vec<f32>> {
        let order = self.parsed_order()?;
        let (a_codes, b_codes): (Vec<u8>, Vec<u8>);
        let problem = if let Some(fmt) = self.mx_format() {
            a_codes = inputs.a_codes.iter().map(|&c| c as u8).collect();
            b_codes = inputs.bt_codes.iter().map(|&c| c as u8).collect();
            Problem {
                a: Matrix::Mx {
                    codes: &a_codes,
                    scales: &inputs.sa,
                    format: fmt,
                },
                b: Matrix::Mx {
                    codes: &b_codes,
                    scales: &inputs.sb,
                    format: fmt,
                },
                m: self.m,
                n: self.n,
                k: self.k,
                b_layout: BLayout::Nk,
            }
        } else {
            Problem {
                a: Matrix::F32(&inputs.a),
                b: Matrix::F32(&inputs.bt),
                m: self.m,
                n: self.n,
                k: self.k,
                b_layout: BLayout::Nk,
            }
        };
        gemm(&order, &problem, rows).map_err(|e| DeviceError::Refused(format!("case {}: model: {e}", self.id)))
    }
}

/// Nearby wrong models of a case ("foils"): the arithmetic changed (fma vs
/// muladd, F = 24 instead of 25, F = 25 instead of the FP8 13, halves
/// instead of the mod-4 split) and the structure removed (no split, no
/// fresh tiles, no lanes, serial instead of pairwise). The GPU bytes must
/// match the order and *not* its foils; the foils' mismatch counts show how
/// strongly the data tells the orders apart.
pub fn foils(order: &Order) -> Vec<Order> {
    use crate::order::{MmaSplit, Reduce, Tile};
    let mut out = Vec::new();
    let mut arith = *order;
    arith.family = match order.family {
        Family::Fma => Family::MulAdd,
        Family::MulAdd => Family::Fma,
        Family::Mma(mut m) => {
            if m.f == 13 {
                m.f = 25;
                m.out = 23;
            } else if m.split == MmaSplit::Mod4 {
                m.split = MmaSplit::Halves;
            } else {
                m.f = 24;
            }
            Family::Mma(m)
        }
    };
    out.push(arith);
    let mut st = *order;
    if order.lanes > 1 {
        st.lanes = 1;
        st.reduce = None;
    } else if order.reduce == Some(Reduce::Pairwise) {
        st.reduce = None;
    } else if order.split > 1 {
        st.split = 1;
        st.interleave = false;
    } else if order.tile == Tile::Fresh {
        st.tile = Tile::Carry;
    } else if order.promote.is_some() && order.promote != Some(32) {
        st.promote = None;
    }
    if st != *order {
        out.push(st);
    }
    out.into_iter()
        .filter(|o| o.to_string().parse::<Order>().is_ok())
        .collect()
}

/// Digest of one output row (canonical NaN).
pub fn row_digest(row: &[f32]) -> u64 {
    let bytes: Vec<u8> = row.iter().flat_map(|&x| canonical_bits(x).to_le_bytes()).collect();
    digest64(&bytes)
}

/// Orders that every run covers once (each sm_90-expressible family), with
/// their input element type, MX flag and 16-bit backend.
pub fn fixed_orders() -> Vec<(&'static str, Elem, bool, Backend16)> {
    use Backend16::*;
    vec![
        ("fma", Elem::F32, false, MmaSync),
        ("muladd", Elem::F32, false, MmaSync),
        ("fma;ktile=64;tile=fresh", Elem::F32, false, MmaSync),
        ("fma;ktile=48;tile=fresh;reduce=pairwise", Elem::F32, false, MmaSync),
        ("fma;split=4", Elem::F32, false, MmaSync),
        ("muladd;split=3;reduce=pairwise", Elem::F32, false, MmaSync),
        ("fma;split=4/interleave;ktile=32", Elem::F32, false, MmaSync),
        ("fma;split=3;ktile=40;tile=fresh", Elem::F32, false, MmaSync),
        ("fma;lanes=32", Elem::F32, false, MmaSync),
        ("muladd;lanes=8;out=bf16", Elem::F32, false, MmaSync),
        ("fma;out=f16", Elem::F32, false, MmaSync),
        ("hopper-bf16", Elem::Bf16, false, MmaSync),
        ("hopper-f16", Elem::F16, false, MmaSync),
        ("hopper-bf16", Elem::Bf16, false, Wgmma),
        ("hopper-f16", Elem::F16, false, Wgmma),
        ("hopper-bf16;split=4;reduce=pairwise", Elem::Bf16, false, MmaSync),
        ("hopper-bf16;ktile=64;tile=fresh", Elem::Bf16, false, Wgmma),
        ("hopper-fp8-mma-sync", Elem::E4m3, false, MmaSync),
        ("mma(k=32,f=25,split=mod4,c=late,in=e5m2)", Elem::E5m2, false, MmaSync),
        ("hopper-fp8-wgmma", Elem::E4m3, false, MmaSync),
        ("mma(k=32,f=13,out=13,in=e5m2)", Elem::E5m2, false, MmaSync),
        ("deepgemm-fp8", Elem::E4m3, false, MmaSync),
        ("deepgemm-fp8;split=2", Elem::E4m3, false, MmaSync),
        ("fma", Elem::E4m3, true, MmaSync),
        ("muladd;split=2", Elem::E5m2, true, MmaSync),
        ("fma;scale=block", Elem::E4m3, true, MmaSync),
        ("muladd;scale=block;split=3;reduce=pairwise", Elem::E4m3, true, MmaSync),
        ("fma;scale=block;lanes=4", Elem::E4m3, true, MmaSync),
        ("hopper-fp8-wgmma;promote=32;scale=block", Elem::E4m3, true, MmaSync),
        ("hopper-fp8-mma-sync;promote=32;scale=block", Elem::E4m3, true, MmaSync),
        (
            "mma(k=32,f=13,out=13,in=e5m2);promote=32;scale=block;out=bf16",
            Elem::E5m2,
            true,
            MmaSync,
        ),
    ]
}

fn random_order(r: &mut SplitMix64) -> (String, Elem, bool, Backend16) {
    let backend = if r.chance(1, 2) {
        Backend16::MmaSync
    } else {
        Backend16::Wgmma
    };
    let pick = r.below(10);
    let (base, elem, mx): (&str, Elem, bool) = match pick {
        0 | 1 => ("fma", Elem::F32, false),
        2 => ("muladd", Elem::F32, false),
        3 => ("hopper-bf16", Elem::Bf16, false),
        4 => ("hopper-f16", Elem::F16, false),
        5 => {
            if r.chance(1, 2) {
                ("hopper-fp8-mma-sync", Elem::E4m3, false)
            } else {
                ("mma(k=32,f=25,split=mod4,c=late,in=e5m2)", Elem::E5m2, false)
            }
        }
        6 => {
            if r.chance(1, 2) {
                ("hopper-fp8-wgmma", Elem::E4m3, false)
            } else {
                ("deepgemm-fp8", Elem::E4m3, false)
            }
        }
        7 => {
            let e = if r.chance(1, 2) { Elem::E4m3 } else { Elem::E5m2 };
            (if r.chance(1, 2) { "fma" } else { "muladd" }, e, true)
        }
        8 => (
            if r.chance(1, 2) {
                "fma;scale=block"
            } else {
                "muladd;scale=block"
            },
            Elem::E4m3,
            true,
        ),
        _ => (
            if r.chance(1, 2) {
                "hopper-fp8-wgmma;promote=32;scale=block"
            } else {
                "hopper-fp8-mma-sync;promote=32;scale=block"
            },
            Elem::E4m3,
            true,
        ),
    };
    let tc = base.starts_with("hopper") || base.starts_with("mma") || base.starts_with("deepgemm");
    let mut keys: Vec<String> = Vec::new();
    let structure = r.below(6);
    let tiles = [8u64, 16, 24, 32, 48, 64, 100, 128, 256];
    let tile = |r: &mut SplitMix64| tiles[r.below(tiles.len() as u64) as usize];
    match structure {
        1 => keys.push(format!("ktile={};tile=fresh", tile(r))),
        2 => keys.push(format!("split={}", r.range_i64(2, 8))),
        3 => keys.push(format!("split={}/interleave;ktile={}", r.range_i64(2, 6), tile(r))),
        4 => keys.push(format!("split={};ktile={};tile=fresh", r.range_i64(2, 4), tile(r))),
        5 if !tc => keys.push(format!("lanes={}", 1u64 << r.range_i64(1, 5))),
        _ => {}
    }
    if matches!(structure, 1..=4) && r.chance(1, 3) {
        keys.push("reduce=pairwise".into());
    }
    match r.below(6) {
        0 => keys.push("out=bf16".into()),
        1 => keys.push("out=f16".into()),
        _ => {}
    }
    let mut s = base.to_string();
    for key in keys {
        s.push(';');
        s.push_str(&key);
    }
    (s, elem, mx, backend)
}

/// Options of a conformance run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConformOptions {
    pub seed: u64,
    /// Random cases after the fixed ones.
    pub random_cases: usize,
    /// Upper bound on M*N*K per case (keeps the CPU model's time bounded).
    pub max_terms: usize,
}

impl Default for ConformOptions {
    fn default() -> Self {
        ConformOptions {
            seed: 0x6d78_6269,
            random_cases: 96,
            max_terms: 1 << 26,
        }
    }
}

fn shape(r: &mut SplitMix64, mx: bool, max_terms: usize) -> (usize, usize, usize) {
    loop {
        let m = match r.below(5) {
            0 => [1usize, 2, 17, 33, 300][r.below(5) as usize],
            _ => r.range_i64(1, 300) as usize,
        };
        let n = match r.below(4) {
            0 => [8usize, 9, 512][r.below(3) as usize],
            _ => r.range_i64(8, 512) as usize,
        };
        let mut k = match r.below(4) {
            0 => [16usize, 17, 4096, 1000][r.below(4) as usize],
            _ => r.range_i64(16, 4096) as usize,
        };
        if mx {
            k = (k / 32).max(1) * 32;
        }
        if m * n * k <= max_terms {
            return (m, n, k);
        }
    }
}

/// Rows of a case on which [`screen`] evaluates the order and its foils:
/// first, middle and last (the rows every CI replay also recomputes first).
fn screen_rows(m: usize) -> Vec<usize> {
    let mut v = vec![0, m / 2, m.saturating_sub(1)];
    v.dedup();
    v
}

/// Why the generator turned a drawn case down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Screen {
    /// The GPU plan or the CPU model refuses the order on this shape.
    Refused,
    /// Every screened output is NaN: the case cannot tell any two orders apart.
    AllNan,
    /// Every foil gives the same bytes as the order on the screened rows:
    /// a 0-mismatch result would not show that the GPU used *this* order.
    NoFoilDiffers,
}

/// A case is kept only if the model accepts it, its outputs are not all
/// NaN, and at least one foil ([`foils`]) gives different bytes from the
/// claimed order (canonical NaN) on the screened rows. A case that passes
/// discriminates: its GPU bytes can only match one of the order and that foil.
pub fn screen(case: &ConformCase) -> std::result::Result<(), Screen> {
    if case.plan().is_err() {
        return Err(Screen::Refused);
    }
    let order = case.parsed_order().map_err(|_| Screen::Refused)?;
    let rows = screen_rows(case.m);
    let inputs = case.inputs();
    let model = case.model(&inputs, Some(&rows)).map_err(|_| Screen::Refused)?;
    let foil_outputs: Vec<Vec<f32>> = foils(&order)
        .into_iter()
        .filter_map(|foil| {
            let fc = ConformCase {
                order: foil.to_string(),
                ..case.clone()
            };
            fc.model(&inputs, Some(&rows)).ok()
        })
        .collect();
    screen_outputs(&model, &foil_outputs)
}

/// The verdict of [`screen`] on computed outputs: NaN compares as a class
/// (canonical NaN), every other bit counts.
pub fn screen_outputs(model: &[f32], foil_outputs: &[Vec<f32>]) -> std::result::Result<(), Screen> {
    if model.iter().all(|x| x.is_nan()) {
        return Err(Screen::AllNan);
    }
    let bits = |v: &[f32]| v.iter().map(|&x| canonical_bits(x)).collect::<Vec<u32>>();
    let want = bits(model);
    if foil_outputs.iter().any(|f| bits(f) != want) {
        Ok(())
    } else {
        Err(Screen::NoFoilDiffers)
    }
}

/// Attempts per order: the first half keeps a fixed order's assigned input
/// class, the rest may draw any class (some classes cannot separate some
/// orders, e.g. exact sums of tiny products).
const ATTEMPTS_PER_ORDER: usize = 24;

/// The case list of a run: the fixed families first, then random ones.
pub fn generate_cases(opts: &ConformOptions) -> Vec<ConformCase> {
    let mut r = SplitMix64::new(opts.seed);
    let classes = [
        InputClass::Wide,
        InputClass::Tiny,
        InputClass::Cancel,
        InputClass::Specials,
        InputClass::Sparse,
    ];
    let mut cases = Vec::new();
    let mut push =
        |r: &mut SplitMix64, order: String, elem: Elem, mx: bool, backend16: Backend16, class: Option<InputClass>| {
            for attempt in 0..ATTEMPTS_PER_ORDER {
                let (m, n, k) = shape(r, mx, opts.max_terms);
                let drawn = classes[r.below(classes.len() as u64) as usize];
                let class = match class {
                    Some(c) if attempt < ATTEMPTS_PER_ORDER / 2 => c,
                    _ => drawn,
                };
                let canonical = match order.parse::<Order>() {
                    Ok(o) => o.to_string(),
                    Err(_) => return false,
                };
                let case = ConformCase {
                    id: cases.len(),
                    order: canonical,
                    backend16,
                    m,
                    n,
                    k,
                    elem,
                    mx,
                    class,
                    seed: r.next_u64(),
                };
                if screen(&case).is_ok() {
                    cases.push(case);
                    return true;
                }
            }
            false
        };
    for (i, (o, e, mx, b)) in fixed_orders().into_iter().enumerate() {
        push(&mut r, o.to_string(), e, mx, b, Some(classes[i % classes.len()]));
    }
    let mut attempts = 0;
    let mut added = 0;
    while added < opts.random_cases && attempts < 50 * opts.random_cases.max(1) {
        attempts += 1;
        let (o, e, mx, b) = random_order(&mut r);
        if push(&mut r, o, e, mx, b, None) {
            added += 1;
        }
    }
    cases
}

/// One mismatching element.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Mismatch {
    pub i: usize,
    pub j: usize,
    pub gpu: String,
    pub model: String,
}

/// The result of one case.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CaseRecord {
    pub case: ConformCase,
    pub elements: usize,
    pub mismatches: usize,
    /// Elements where both are NaN with different payloads.
    pub nan_payload_differences: usize,
    /// Outputs the kernel left unwritten (poison survived).
    pub unwritten: usize,
    pub first_mismatches: Vec<Mismatch>,
    /// Mismatches of the GPU bytes against each foil order (see `foils`).
    #[serde(default)]
    pub foils: Vec<(String, usize)>,
    /// Per output row: 16 hex digits of `row_digest` of the GPU row.
    pub gpu_row_digests: String,
    /// GPU time of the case's kernels in ms (CUDA events).
    pub gpu_ms: f32,
    /// Every GPU output is NaN (recorded since the generator screens for it).
    #[serde(default)]
    pub all_nan: bool,
}

/// The conformance report (`conform/cases.json` in a capture).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConformReport {
    pub options: ConformOptions,
    pub records: Vec<CaseRecord>,
    /// Cases whose order could not be built or run, with the reason.
    pub failed: Vec<(usize, String, String)>,
}

impl ConformReport {
    pub fn total_mismatches(&self) -> usize {
        self.records.iter().map(|r| r.mismatches + r.unwritten).sum()
    }

    /// Cases on which at least one foil misses some of the GPU's bytes:
    /// the cases whose 0 mismatches name the claimed order (target: all).
    pub fn discriminating(&self) -> usize {
        self.records.iter().filter(|r| r.foils.iter().any(|f| f.1 > 0)).count()
    }

    /// Cases whose GPU outputs are all NaN (the generator rejects them).
    pub fn all_nan(&self) -> usize {
        self.records.iter().filter(|r| r.all_nan).count()
    }

    /// A short table: one line per family/instruction.
    pub fn summary(&self) -> String {
        use std::collections::BTreeMap;
        let mut by: BTreeMap<String, (usize, usize, usize, usize)> = BTreeMap::new();
        for r in &self.records {
            let fam = family_label(&r.case);
            let e = by.entry(fam).or_default();
            e.0 += 1;
            e.1 += r.elements;
            e.2 += r.mismatches + r.unwritten;
            e.3 += r.foils.iter().map(|f| f.1).sum::<usize>();
        }
        let mut s = String::from(
            "| family / kernel | cases | elements | mismatches | foil mismatches |\n|---|---:|---:|---:|---:|\n",
        );
        for (k, (c, e, m, f)) in by {
            s.push_str(&format!("| {k} | {c} | {e} | {m} | {f} |\n"));
        }
        s.push_str(&format!(
            "| **all** | {} | {} | {} | {} |\n",
            self.records.len(),
            self.records.iter().map(|r| r.elements).sum::<usize>(),
            self.total_mismatches(),
            self.records
                .iter()
                .flat_map(|r| r.foils.iter().map(|f| f.1))
                .sum::<usize>()
        ));
        s.push_str(&format!(
            "\ndiscriminating cases (some foil misses GPU bytes): {} of {}; all-NaN cases: {}\n",
            self.discriminating(),
            self.records.len(),
            self.all_nan()
        ));
        if !self.failed.is_empty() {
            s.push_str(&format!("\n{} case(s) failed to build or run:\n", self.failed.len()));
            for (id, order, why) in &self.failed {
                s.push_str(&format!(
                    "- case {id} `{order}`: {}\n",
                    why.lines().next().unwrap_or("")
                ));
            }
        }
        s
    }
}

fn family_label(c: &ConformCase) -> String {
    let order: Order = match c.order.parse() {
        Ok(o) => o,
        Err(_) => return c.order.clone(),
    };
    let fam = match order.family {
        Family::Fma => "fma".to_string(),
        Family::MulAdd => "muladd".to_string(),
        Family::Mma(m) => {
            let instr = match (m.k, m.f, m.input) {
                (16, _, InType::Bf16) => format!(
                    "{} bf16",
                    if c.backend16 == Backend16::Wgmma {
                        "wgmma"
                    } else {
                        "mma.sync"
                    }
                ),
                (16, _, _) => format!(
                    "{} f16",
                    if c.backend16 == Backend16::Wgmma {
                        "wgmma"
                    } else {
                        "mma.sync"
                    }
                ),
                (32, 25, t) => format!("mma.sync {}", t.name()),
                (_, _, t) => format!("wgmma {}", t.name()),
            };
            if order.promote.is_some() {
                format!("{instr} promote")
            } else {
                instr
            }
        }
    };
    let mx = if c.mx {
        let term = c.plan().map(|p| p.term).ok();
        match term {
            Some(TermKind::MxBlock) => " (MX scale=block)",
            Some(TermKind::MxPromote) => " (MX promote)",
            _ => " (MX dequant)",
        }
    } else {
        ""
    };
    let structure = if order.lanes > 1 {
        " lanes"
    } else if order.split > 1 {
        if order.interleave {
            " split/interleave"
        } else {
            " split"
        }
    } else if order.tile == crate::order::Tile::Fresh {
        " ktile fresh"
    } else {
        ""
    };
    format!("{fam}{mx}{structure}")
}

/// One foil of a case recomputed on the CPU against the case's GPU rows.
#[derive(Clone, Debug, PartialEq)]
pub struct FoilReplay {
    /// Canonical spelling of the foil order.
    pub order: String,
    /// The count the capture stores for this foil (GPU outputs it misses),
    /// when the capture lists it.
    pub stored: Option<usize>,
    /// Replayed rows whose GPU digest the foil does not reproduce.
    pub rows_differing: usize,
    /// Outputs where the foil differs from the GPU bytes (NaN as a class),
    /// counted on the replayed rows whose model digest equals the GPU's
    /// (there the model *is* the GPU output, so the foil is compared with the
    /// model element by element).
    pub elements: usize,
    /// `elements` counts every output of the case: all rows were replayed
    /// and reproduced, and the kernel left none unwritten. Only then is it
    /// comparable with `stored`.
    pub exact: bool,
    /// Set when the CPU model refuses the foil (the GPU run then stores no
    /// count for it either).
    pub error: Option<String>,
}

impl FoilReplay {
    /// Why this foil's recomputation disagrees with the capture, if it does:
    /// a stored count that differs from the exact recomputed one, a foil the
    /// model now refuses although a count is stored, or a foil the model
    /// computes that the capture does not list.
    pub fn disagreement(&self) -> Option<String> {
        match (self.stored, &self.error) {
            (Some(s), None) if self.exact && s != self.elements => Some(format!(
                "`{}`: stored {s} mismatching outputs, recomputed {}",
                self.order, self.elements
            )),
            (Some(s), Some(e)) => Some(format!("`{}`: stored {s}, the model now refuses it: {e}", self.order)),
            (None, None) => Some(format!(
                "`{}`: recomputed {} mismatching outputs, the capture lists no count",
                self.order, self.elements
            )),
            _ => None,
        }
    }
}

/// Replay of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseReplay {
    pub id: usize,
    pub order: String,
    /// Rows in the capture (M).
    pub rows: usize,
    pub rows_checked: usize,
    /// Replayed rows whose model digest differs from the GPU's.
    pub rows_differing: Vec<usize>,
    /// Every foil of the order ([`foils`]), recomputed.
    pub foils: Vec<FoilReplay>,
    /// Foils the capture lists that [`foils`] no longer produces (order,
    /// stored count).
    pub stored_only: Vec<(String, usize)>,
}

impl CaseReplay {
    /// Whether some foil fails to reproduce the GPU bytes on a replayed row:
    /// the case tells its order from at least one wrong one.
    pub fn discriminates(&self) -> bool {
        self.foils.iter().any(|f| f.error.is_none() && f.rows_differing > 0)
    }

    /// Disagreements between the recomputed foils and the stored counts.
    pub fn foil_disagreements(&self) -> Vec<String> {
        let mut v: Vec<String> = self.foils.iter().filter_map(FoilReplay::disagreement).collect();
        for (order, n) in &self.stored_only {
            v.push(format!("`{order}`: stored {n}, not a foil of this order any more"));
        }
        v
    }

    /// One line: id, order, rows, and per foil `stored -> recomputed`.
    pub fn line(&self) -> String {
        let foils: Vec<String> = self
            .foils
            .iter()
            .map(|f| {
                let stored = f.stored.map_or("-".to_string(), |s| s.to_string());
                match &f.error {
                    Some(_) => format!("{} {stored}->refused", f.order),
                    None => format!(
                        "{} {stored}->{}{} ({} rows)",
                        f.order,
                        f.elements,
                        if f.exact { "" } else { "+" },
                        f.rows_differing
                    ),
                }
            })
            .collect();
        format!(
            "case {:3} {:<48} rows {:>3}/{:<3} {}{}",
            self.id,
            self.order,
            self.rows_checked,
            self.rows,
            if self.discriminates() {
                ""
            } else {
                "[NOT DISCRIMINATING] "
            },
            foils.join("; ")
        )
    }
}

/// Replay result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConformReplayReport {
    pub cases: usize,
    pub rows_checked: usize,
    /// Rows the capture holds (the sum of M over its cases).
    pub rows_in_capture: usize,
    /// (case id, row) pairs whose model digest differs from the GPU's.
    pub row_mismatches: Vec<(usize, usize)>,
    /// Cases whose capture recorded GPU-vs-model mismatches.
    pub recorded_mismatches: usize,
    /// Per case, in capture order.
    pub case_replays: Vec<CaseReplay>,
}

impl ConformReplayReport {
    /// Foils recomputed (those the model refuses not counted).
    pub fn foils_recomputed(&self) -> usize {
        self.case_replays
            .iter()
            .flat_map(|c| &c.foils)
            .filter(|f| f.error.is_none())
            .count()
    }

    /// Cases where every foil reproduces the GPU bytes on every replayed
    /// row: they cannot tell the claimed order from a wrong one.
    pub fn non_discriminating(&self) -> Vec<&CaseReplay> {
        self.case_replays.iter().filter(|c| !c.discriminates()).collect()
    }

    /// Every foil disagreement, prefixed with its case id.
    pub fn foil_disagreements(&self) -> Vec<String> {
        self.case_replays
            .iter()
            .flat_map(|c| {
                c.foil_disagreements()
                    .into_iter()
                    .map(move |d| format!("case {}: {d}", c.id))
            })
            .collect()
    }

    /// The totals in one line.
    pub fn totals(&self) -> String {
        format!(
            "{} cases; {} of {} rows replayed, {} differ from the GPU bytes; {} foils recomputed, {} disagree with the stored counts; {} of {} cases discriminate (a foil misses the GPU bytes)",
            self.cases,
            self.rows_checked,
            self.rows_in_capture,
            self.row_mismatches.len(),
            self.foils_recomputed(),
            self.foil_disagreements().len(),
            self.cases - self.non_discriminating().len(),
            self.cases
        )
    }
}

/// Which rows of each case a replay recomputes.
#[derive(Clone, Copy, Debug)]
pub enum RowSelection {
    /// First, middle and last row.
    Sample,
    All,
}

/// Replays `conform/cases.json` of a capture on the CPU model: the selected
/// rows of every case under its order (digests compared with the GPU's) and
/// under each of its [`foils`] (how many GPU rows and outputs each foil
/// misses, compared with the counts the capture stores). Cases run in
/// parallel; the report is in capture order whatever the thread count.
pub fn replay(capture: &Capture, rows: RowSelection) -> Result<ConformReplayReport> {
    use rayon::prelude::*;
    let report: ConformReport = capture.read_json("cases.json")?;
    let cases: Vec<CaseReplay> = report
        .records
        .par_iter()
        .map(|rec| replay_case(rec, rows))
        .collect::<Result<_>>()?;
    let mut out = ConformReplayReport::default();
    for (rec, c) in report.records.iter().zip(cases) {
        out.cases += 1;
        out.rows_checked += c.rows_checked;
        out.rows_in_capture += c.rows;
        out.row_mismatches.extend(c.rows_differing.iter().map(|&r| (c.id, r)));
        out.recorded_mismatches += rec.mismatches + rec.unwritten;
        out.case_replays.push(c);
    }
    Ok(out)
}

fn replay_case(rec: &CaseRecord, rows: RowSelection) -> Result<CaseReplay> {
    let c = &rec.case;
    if c.m == 0 || c.n == 0 {
        return Err(DeviceError::Capture(format!(
            "case {}: empty output {}x{}",
            c.id, c.m, c.n
        )));
    }
    let digests = parse_digests(&rec.gpu_row_digests, c.m)?;
    let sel: Vec<usize> = match rows {
        RowSelection::All => (0..c.m).collect(),
        RowSelection::Sample => {
            let mut v = vec![0, c.m / 2, c.m - 1];
            v.dedup();
            v
        }
    };
    let inputs = c.inputs();
    let model = c.model(&inputs, Some(&sel))?;
    let reproduced: Vec<bool> = (0..sel.len())
        .map(|ri| row_digest(&model[ri * c.n..(ri + 1) * c.n]) == digests[sel[ri]])
        .collect();
    let rows_differing: Vec<usize> = (0..sel.len()).filter(|&ri| !reproduced[ri]).map(|ri| sel[ri]).collect();
    let complete = sel.len() == c.m && rows_differing.is_empty() && rec.unwritten == 0;
    let mut foil_replays = Vec::new();
    for foil in foils(&c.parsed_order()?) {
        let fc = ConformCase {
            order: foil.to_string(),
            ..c.clone()
        };
        let stored = rec.foils.iter().find(|f| f.0 == fc.order).map(|f| f.1);
        let mut fr = FoilReplay {
            order: fc.order.clone(),
            stored,
            rows_differing: 0,
            elements: 0,
            exact: complete,
            error: None,
        };
        match fc.model(&inputs, Some(&sel)) {
            Err(e) => fr.error = Some(e.to_string()),
            Ok(fm) => {
                for ri in 0..sel.len() {
                    let f_row = &fm[ri * c.n..(ri + 1) * c.n];
                    if row_digest(f_row) != digests[sel[ri]] {
                        fr.rows_differing += 1;
                    }
                    if reproduced[ri] {
                        let m_row = &model[ri * c.n..(ri + 1) * c.n];
                        fr.elements += f_row
                            .iter()
                            .zip(m_row)
                            .filter(|(f, m)| canonical_bits(**f) != canonical_bits(**m))
                            .count();
                    }
                }
            }
        }
        foil_replays.push(fr);
    }
    let stored_only = rec
        .foils
        .iter()
        .filter(|(o, _)| !foil_replays.iter().any(|f| &f.order == o))
        .cloned()
        .collect();
    Ok(CaseReplay {
        id: c.id,
        order: c.order.clone(),
        rows: c.m,
        rows_checked: sel.len(),
        rows_differing,
        foils: foil_replays,
        stored_only,
    })
}

fn parse_digests(s: &str, m: usize) -> Result<Vec<u64>> {
    if s.len() != 16 * m {
        return Err(DeviceError::Capture(format!(
            "expected {m} row digests, found {} hex digits",
            s.len()
        )));
    }
    (0..m)
        .map(|i| u64::from_str_radix(&s[16 * i..16 * i + 16], 16).map_err(|e| DeviceError::Capture(e.to_string())))
        .collect()
}

/// Compares GPU output with the model, filling a record.
pub fn compare(case: &ConformCase, gpu: &[f32], model: &[f32], poison: u32, gpu_ms: f32) -> CaseRecord {
    let (mut mismatches, mut nan_payload, mut unwritten) = (0, 0, 0);
    let mut first = Vec::new();
    for (idx, (&g, &m)) in gpu.iter().zip(model).enumerate() {
        if g.to_bits() == poison {
            unwritten += 1;
            continue;
        }
        if g.to_bits() == m.to_bits() {
            continue;
        }
        if g.is_nan() && m.is_nan() {
            nan_payload += 1;
            continue;
        }
        mismatches += 1;
        if first.len() < 16 {
            first.push(Mismatch {
                i: idx / case.n,
                j: idx % case.n,
                gpu: format!("{:08x} ({:e})", g.to_bits(), g),
                model: format!("{:08x} ({:e})", m.to_bits(), m),
            });
        }
    }
    let gpu_row_digests = gpu
        .chunks(case.n)
        .map(|row| format!("{:016x}", row_digest(row)))
        .collect();
    CaseRecord {
        case: case.clone(),
        elements: gpu.len(),
        mismatches,
        nan_payload_differences: nan_payload,
        unwritten,
        first_mismatches: first,
        foils: Vec::new(),
        gpu_row_digests,
        gpu_ms,
        all_nan: !gpu.is_empty() && gpu.iter().all(|x| x.is_nan()),
    }
}

#[cfg(feature = "cuda")]
pub use gpu_run::run;

#[cfg(feature = "cuda")]
mod gpu_run {
    use super::*;
    use crate::device::exec::{gemm_on_gpu, operand_bytes, GemmOperands, KernelCache, POISON};
    use crate::device::gpu::Gpu;

    /// Runs one case on the GPU; returns the output `[M][N]` and GPU ms.
    fn run_case(
        gpu: &Gpu,
        cache: &mut KernelCache,
        case: &ConformCase,
        inputs: &CaseInputs,
    ) -> Result<(Vec<f32>, f32)> {
        let plan = case.plan()?;
        let operands = GemmOperands {
            a: operand_bytes(&plan, &inputs.a, &inputs.a_codes),
            bt: operand_bytes(&plan, &inputs.bt, &inputs.bt_codes),
            sa: inputs.sa.clone(),
            sb: inputs.sb.clone(),
        };
        gemm_on_gpu(gpu, cache, &plan, case.m, case.n, case.k, &operands)
    }

    /// Runs every case: GPU kernels, CPU model, comparison.
    pub fn run(gpu: &Gpu, opts: &ConformOptions, progress: &dyn Fn(&str)) -> Result<ConformReport> {
        let cases = generate_cases(opts);
        let mut cache = KernelCache::default();
        let mut records = Vec::new();
        let mut failed = Vec::new();
        for case in &cases {
            let inputs = case.inputs();
            let gpu_out = run_case(gpu, &mut cache, case, &inputs);
            match gpu_out {
                Ok((out, ms)) => {
                    // `gemm` prepares the inputs once and spreads rows over threads
                    let model = case.model(&inputs, None)?;
                    let mut rec = compare(case, &out, &model, POISON, ms);
                    let order = case.parsed_order()?;
                    for foil in foils(&order) {
                        let fc = ConformCase {
                            order: foil.to_string(),
                            ..case.clone()
                        };
                        if let Ok(fm) = fc.model(&inputs, None) {
                            let fr = compare(&fc, &out, &fm, POISON, 0.0);
                            rec.foils.push((fc.order.clone(), fr.mismatches));
                        }
                    }
                    progress(&format!(
                        "case {:3} {:<60} {}x{}x{} {:?}: {} mismatches",
                        case.id,
                        case.order,
                        case.m,
                        case.n,
                        case.k,
                        case.class,
                        rec.mismatches + rec.unwritten
                    ));
                    records.push(rec);
                }
                Err(e) => {
                    progress(&format!("case {:3} {}: FAILED {e}", case.id, case.order));
                    failed.push((case.id, case.order.clone(), e.to_string()));
                    if matches!(e, DeviceError::Driver(_)) {
                        // a fault poisons the context: stop here and report
                        break;
                    }
                }
            }
        }
        Ok(ConformReport {
            options: opts.clone(),
            records,
            failed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_deterministic_and_cover_every_fixed_family() {
        let opts = ConformOptions {
            random_cases: 8,
            ..Default::default()
        };
        let a = generate_cases(&opts);
        let b = generate_cases(&opts);
        assert_eq!(a, b);
        assert!(a.len() >= fixed_orders().len());
        let ia = a[3].inputs();
        let ib = b[3].inputs();
        assert_eq!(
            ia.a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            ib.a.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        for c in &a {
            assert!(c.plan().is_ok(), "{}", c.order);
        }
    }

    #[test]
    fn every_generated_case_discriminates() {
        let opts = ConformOptions {
            seed: 0x5eed_0009,
            random_cases: 12,
            max_terms: 1 << 18,
        };
        let cases = generate_cases(&opts);
        assert!(cases.len() >= fixed_orders().len() + 12, "{} cases", cases.len());
        for c in &cases {
            assert_eq!(screen(c), Ok(()), "case {} `{}`", c.id, c.order);
        }
    }

    #[test]
    fn screen_rejects_all_nan_and_indistinguishable_outputs() {
        let nan = f32::NAN;
        let other_nan = f32::from_bits(0x7FC0_0123);
        // every output NaN: rejected whatever the foils do
        assert_eq!(screen_outputs(&[nan, nan], &[vec![1.0, 2.0]]), Err(Screen::AllNan));
        // foils equal to the order (NaN payloads do not count): rejected
        assert_eq!(
            screen_outputs(&[1.0, nan], &[vec![1.0, other_nan], vec![1.0, nan]]),
            Err(Screen::NoFoilDiffers)
        );
        assert_eq!(screen_outputs(&[1.0, 2.0], &[]), Err(Screen::NoFoilDiffers));
        // -0 vs +0 and one ulp both discriminate
        assert_eq!(screen_outputs(&[0.0, 2.0], &[vec![-0.0, 2.0]]), Ok(()));
        let up = f32::from_bits(2.0f32.to_bits() + 1);
        assert_eq!(screen_outputs(&[1.0, 2.0], &[vec![1.0, 2.0], vec![1.0, up]]), Ok(()));
    }

    #[test]
    fn cancel_class_mirrors_the_first_half() {
        let c = ConformCase {
            id: 0,
            order: "fma".into(),
            backend16: Backend16::MmaSync,
            m: 2,
            n: 3,
            k: 64,
            elem: Elem::Bf16,
            mx: false,
            class: InputClass::Cancel,
            seed: 5,
        };
        let x = c.inputs();
        for kk in 0..32 {
            assert_eq!(x.a[kk + 32], x.a[kk]);
            assert_eq!(x.bt[kk + 32], -x.bt[kk]);
        }
        // the exact sum is zero; what remains is the order's rounding error
        let y = c.model(&x, None).unwrap();
        assert_eq!(y.len(), 6);
    }

    #[test]
    fn foils_differ_from_their_order() {
        for s in [
            "fma;split=4",
            "hopper-bf16;lanes=1",
            "hopper-fp8-wgmma",
            "hopper-fp8-mma-sync",
            "fma;lanes=8",
            "deepgemm-fp8",
        ] {
            let o: Order = s.parse().unwrap();
            let f = foils(&o);
            assert!(!f.is_empty(), "{s}");
            assert!(f.iter().all(|x| *x != o), "{s}");
        }
    }

    #[test]
    fn compare_counts_mismatches_nan_payloads_and_unwritten() {
        let c = ConformCase {
            id: 0,
            order: "fma".into(),
            backend16: Backend16::MmaSync,
            m: 1,
            n: 4,
            k: 16,
            elem: Elem::F32,
            mx: false,
            class: InputClass::Wide,
            seed: 1,
        };
        let poison = 0x7FBA_DBAD;
        let gpu = [1.0f32, f32::from_bits(0x7FC0_0001), f32::from_bits(poison), 2.0];
        let model = [1.0f32, f32::NAN, 3.0, 2.5];
        let r = compare(&c, &gpu, &model, poison, 0.0);
        assert_eq!((r.mismatches, r.nan_payload_differences, r.unwritten), (1, 1, 1));
        assert_eq!(r.gpu_row_digests.len(), 16);
    }

    #[test]
    fn replay_detects_a_wrong_digest_and_wrong_foil_counts() {
        use crate::device::capture::CaptureWriter;
        let opts = ConformOptions {
            random_cases: 2,
            max_terms: 1 << 16,
            ..Default::default()
        };
        let cases: Vec<ConformCase> = generate_cases(&opts).into_iter().take(3).collect();
        let mut records = Vec::new();
        for c in &cases {
            // a "GPU" that computes the model; foils counted as the GPU run does
            let x = c.inputs();
            let y = c.model(&x, None).unwrap();
            let mut rec = compare(c, &y, &y, 0x7FBA_DBAD, 0.0);
            for foil in foils(&c.parsed_order().unwrap()) {
                let fc = ConformCase {
                    order: foil.to_string(),
                    ..c.clone()
                };
                let fm = fc.model(&x, None).unwrap();
                rec.foils
                    .push((fc.order.clone(), compare(&fc, &y, &fm, 0x7FBA_DBAD, 0.0).mismatches));
            }
            records.push(rec);
        }
        let discriminating = records.iter().position(|r| r.foils.iter().any(|f| f.1 > 0)).unwrap();
        let mut bad = records.clone();
        bad[1].gpu_row_digests.replace_range(0..16, "0123456789abcdef");
        let mut count = records.clone();
        count[discriminating].foils[0].1 += 1;
        let mut missing = records.clone();
        missing[0].foils.pop();
        let mut extra = records.clone();
        extra[2].foils.push(("fma;split=9".into(), 5));
        // (name, records, rows differing, foil disagreements)
        for (name, recs, rows, foil_bad) in [
            ("good", records, 0, 0),
            ("bad", bad, 1, 0),
            ("count", count, 0, 1),
            ("missing", missing, 0, 1),
            ("extra", extra, 0, 1),
        ] {
            let dir = std::env::temp_dir().join(format!("mxbi-conform-{name}-{}", std::process::id()));
            let mut w = CaptureWriter::create(&dir).unwrap();
            w.put_json(
                "cases.json",
                &ConformReport {
                    options: opts.clone(),
                    records: recs,
                    failed: vec![],
                },
            )
            .unwrap();
            w.finish("conform", serde_json::json!({}), vec![]).unwrap();
            let rep = replay(&Capture::open(&dir).unwrap(), RowSelection::All).unwrap();
            assert_eq!(rep.row_mismatches.len(), rows, "{name}");
            assert_eq!(
                rep.foil_disagreements().len(),
                foil_bad,
                "{name}: {:?}",
                rep.foil_disagreements()
            );
            assert_eq!(rep.rows_checked, rep.rows_in_capture);
            assert!(rep.case_replays[discriminating].discriminates(), "{name}");
            if name == "good" {
                assert!(rep.case_replays.iter().all(|c| c.foils.iter().all(|f| f.exact)));
                // a sample replays first, middle and last row; counts over
                // fewer rows than the case are not comparable with the capture
                let sample = replay(&Capture::open(&dir).unwrap(), RowSelection::Sample).unwrap();
                for c in &sample.case_replays {
                    assert_eq!(c.rows_checked, c.rows.min(3), "{}", c.line());
                    assert!(c.foils.iter().all(|f| f.exact == (c.rows <= 3)));
                }
                assert!(sample.foil_disagreements().is_empty());
                assert_eq!(
                    rep.foils_recomputed(),
                    rep.case_replays.iter().map(|c| c.foils.len()).sum::<usize>()
                );
            }
            if name == "bad" {
                // case 1's foil counts are no longer exact: row 0 is not the GPU's
                assert!(rep.case_replays[1].foils.iter().all(|f| !f.exact));
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn a_case_whose_foils_agree_does_not_discriminate() {
        // one product per output: fma and muladd round it once alike (K = 1);
        // over K = 64 products they differ
        for (k, expect) in [(1, false), (64, true)] {
            let c = ConformCase {
                id: 0,
                order: "fma".into(),
                backend16: Backend16::MmaSync,
                m: 4,
                n: 8,
                k,
                elem: Elem::F32,
                mx: false,
                class: InputClass::Wide,
                seed: 3,
            };
            let y = c.model(&c.inputs(), None).unwrap();
            let rec = compare(&c, &y, &y, 0x7FBA_DBAD, 0.0);
            let rep = replay_case(&rec, RowSelection::All).unwrap();
            assert!(rep.rows_differing.is_empty());
            assert_eq!(rep.foils.len(), 1);
            assert_eq!(rep.discriminates(), expect, "K = {k}: {}", rep.line());
            assert_eq!(rep.foils[0].elements > 0, expect);
            assert!(rep.foils[0].exact);
            // the capture lists no foil count: reported, not hidden
            assert_eq!(rep.foil_disagreements().len(), 1);
        }
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use rayon::prelude::*;

    /// Model time of a default run (`cargo test --release -- --ignored conform_model_time --nocapture`).
    #[test]
    #[ignore]
    fn conform_model_time() {
        let t = std::time::Instant::now();
        let cases = generate_cases(&ConformOptions::default());
        eprintln!("{} cases generated in {:?}", cases.len(), t.elapsed());
        for c in &cases {
            let t = std::time::Instant::now();
            let x = c.inputs();
            let rows: Vec<usize> = (0..c.m).collect();
            let _y: Vec<Vec<f32>> = rows.par_iter().map(|&i| c.model(&x, Some(&[i])).unwrap()).collect();
            eprintln!("{:3} {:<60} {}x{}x{} {:?}", c.id, c.order, c.m, c.n, c.k, t.elapsed());
        }
    }
}

#[cfg(test)]
mod generation_stats {
    use super::*;

    /// Which fixed orders the generator kept, and the time it took.
    #[test]
    #[ignore]
    fn generation_stats() {
        let seed = std::env::var("SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(ConformOptions::default().seed);
        let t = std::time::Instant::now();
        let cases = generate_cases(&ConformOptions {
            seed,
            ..Default::default()
        });
        eprintln!("{} cases in {:?}", cases.len(), t.elapsed());
        for (o, ..) in fixed_orders() {
            let canon = o.parse::<Order>().unwrap().to_string();
            eprintln!("{:<60} {}", o, cases.iter().filter(|c| c.order == canon).count());
        }
    }
}
