//! Tensor-core instruction probes: random dot products run through single
//! `mma.sync` / `wgmma` instructions on the GPU and through the CPU step
//! model [`mma_step`], compared bit for bit.
//!
//! # Cases
//!
//! A probe runs `tiles` tiles. A tile is one instruction's operands: A
//! (`rows x k`, rows = 16 for `mma.sync`, 64 for `wgmma`), B (`k x 8`) and
//! C (`rows x 8`, f32). Output element (r, n) of tile t is case
//! `t * rows * 8 + r * 8 + n`: the dot product of row r of A with column n
//! of B plus `C[r][n]`, one instruction, so the GPU result must equal
//! `mma_step(model, A[r,:], B[:,n], C[r][n])`. Tile t is generated from
//! `SplitMix64::for_item(seed, t)` alone, so any thread count (and the CPU
//! replay) regenerates the same bytes. Tile classes (wide exponent spread
//! with subnormals and zeros, narrow spread, exact and near cancellation in
//! pairs, specials NaN/Inf/Inf x 0, overflow) and per-case C classes (+0,
//! -0, subnormal, random, cancelling the products, dominant, special, huge)
//! are mixed; every input is a code of the instruction's type.
//!
//! # Comparison, NaN and the digest
//!
//! GPU and model outputs match when their bits are equal, or both are NaN
//! (the model's fused-sum NaN is 0x7FFFFFFF; the payload the hardware
//! writes is recorded separately, per probe, as `nan_payloads`). The
//! capture's `digest` is SHA-256 of the GPU outputs' little-endian bits in
//! case order with every NaN replaced by 0x7FFFFFFF (canonical NaN), so a
//! replay on the model reproduces it exactly when every case matches; with
//! recorded mismatches, the replay substitutes the recorded GPU bits. The
//! first [`FIRST_OUTPUTS`] GPU outputs are stored raw (payloads kept).
//!
//! # Capture layout (`DIR/probe/`)
//!
//! `manifest.json` (suite `probe`, device JSON), `probes.json` (one
//! [`ProbeRecord`] per probe), and per probe `NAME.first.bin` (raw LE f32
//! bits) and `NAME.mismatches.json` (up to [`MAX_RECORDS`]
//! [`MismatchRecord`]s, lowest case indices first).

use super::capture::{canonical_bits, f32_digest, Capture, CaptureWriter, Manifest};
use super::{DeviceError, Result};
use crate::format::Format;
use crate::gemm::mma_step::mma_step;
use crate::order::{CMode, InType, Mma, MmaSplit};
use crate::rng::SplitMix64;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Output columns of every probed instruction (n = 8).
pub const COLS: usize = 8;
/// Bytes of one row of A (and of one column of B): k16 x 2 bytes or k32 x 1.
pub const ROW_BYTES: usize = 32;
/// Raw GPU outputs stored per probe.
pub const FIRST_OUTPUTS: usize = 4096;
/// Mismatch records kept per probe.
pub const MAX_RECORDS: usize = 256;
/// Default number of cases per probe (2^20 >= 10^6).
pub const DEFAULT_CASES: usize = 1 << 20;
/// `--quick`.
pub const QUICK_CASES: usize = 1 << 14;
/// Largest accepted case count per probe.
pub const MAX_CASES: usize = 1 << 26;
/// Default seed ("mxbiprob").
pub const DEFAULT_SEED: u64 = 0x6D78_6269_7072_6F62;

/// Which instruction family a probe drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Instr {
    /// `mma.sync.aligned.m16n8kK.row.col.f32.T.T.f32`, one warp per tile.
    MmaSync,
    /// `wgmma.mma_async.sync.aligned.m64n8kK.f32.T.T`, A from registers, B
    /// from shared memory (no swizzle), one warpgroup per tile.
    Wgmma,
}

/// One probed instruction and its CPU model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    pub name: &'static str,
    pub instr: Instr,
    /// Rows of A and D per tile (16 or 64).
    pub rows: usize,
    /// The model, as an order spelling (docs/ORDERS.md).
    pub order: &'static str,
    /// The model.
    pub mma: Mma,
    /// The PTX instruction (without operands).
    pub ptx: &'static str,
    /// CUDA kernel name.
    pub kernel: &'static str,
}

const fn mma(k: u32, f: u32, out: u32, split: MmaSplit, c: CMode, input: InType) -> Mma {
    Mma {
        k,
        f,
        out,
        split,
        c,
        input,
    }
}

/// Every probe, in run order.
pub const PROBES: &[ProbeSpec] = &[
    ProbeSpec {
        name: "mma.sync.m16n8k16.bf16",
        instr: Instr::MmaSync,
        rows: 16,
        order: "hopper-bf16",
        mma: mma(16, 25, 23, MmaSplit::None, CMode::Fused, InType::Bf16),
        ptx: "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        kernel: "probe_mma_sync_bf16",
    },
    ProbeSpec {
        name: "mma.sync.m16n8k16.f16",
        instr: Instr::MmaSync,
        rows: 16,
        order: "hopper-f16",
        mma: mma(16, 25, 23, MmaSplit::None, CMode::Fused, InType::F16),
        ptx: "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        kernel: "probe_mma_sync_f16",
    },
    ProbeSpec {
        name: "mma.sync.m16n8k32.e4m3",
        instr: Instr::MmaSync,
        rows: 16,
        order: "hopper-fp8-mma-sync",
        mma: mma(32, 25, 23, MmaSplit::Mod4, CMode::Late, InType::E4M3),
        ptx: "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
        kernel: "probe_mma_sync_e4m3",
    },
    ProbeSpec {
        name: "mma.sync.m16n8k32.e5m2",
        instr: Instr::MmaSync,
        rows: 16,
        order: "mma(k=32,f=25,split=mod4,c=late,in=e5m2)",
        mma: mma(32, 25, 23, MmaSplit::Mod4, CMode::Late, InType::E5M2),
        ptx: "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32",
        kernel: "probe_mma_sync_e5m2",
    },
    ProbeSpec {
        name: "wgmma.m64n8k16.bf16",
        instr: Instr::Wgmma,
        rows: 64,
        order: "hopper-bf16",
        mma: mma(16, 25, 23, MmaSplit::None, CMode::Fused, InType::Bf16),
        ptx: "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16",
        kernel: "probe_wgmma_bf16",
    },
    ProbeSpec {
        name: "wgmma.m64n8k32.e4m3",
        instr: Instr::Wgmma,
        rows: 64,
        order: "hopper-fp8-wgmma",
        mma: mma(32, 13, 13, MmaSplit::None, CMode::Fused, InType::E4M3),
        ptx: "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3",
        kernel: "probe_wgmma_e4m3",
    },
    ProbeSpec {
        name: "wgmma.m64n8k32.e5m2",
        instr: Instr::Wgmma,
        rows: 64,
        order: "mma(k=32,f=13,out=13,in=e5m2)",
        mma: mma(32, 13, 13, MmaSplit::None, CMode::Fused, InType::E5M2),
        ptx: "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2",
        kernel: "probe_wgmma_e5m2",
    },
];

/// The probe called `name`.
pub fn find(name: &str) -> Option<&'static ProbeSpec> {
    PROBES.iter().find(|p| p.name == name)
}

impl ProbeSpec {
    pub fn k(&self) -> usize {
        self.mma.k as usize
    }
    /// Cases (output elements) per tile.
    pub fn tile_cases(&self) -> usize {
        self.rows * COLS
    }
    pub fn format(&self) -> Format {
        match self.mma.input {
            InType::Bf16 => Format::BF16,
            InType::F16 => Format::F16,
            InType::E4M3 => Format::E4M3,
            InType::E5M2 => Format::E5M2,
            InType::F32 => Format::BF16, // no probe reads f32
        }
    }
    /// Bytes per element code (2 for bf16/f16, 1 for fp8).
    pub fn elem_bytes(&self) -> usize {
        (self.format().bits() / 8) as usize
    }
    /// Tiles needed for at least `cases` cases.
    pub fn tiles_for(&self, cases: usize) -> usize {
        cases.div_ceil(self.tile_cases()).max(1)
    }
}

// ---------------------------------------------------------------- types

/// Bit layout of an element type, for generating codes directly.
#[derive(Clone, Copy)]
struct Ty {
    ebits: u32,
    mbits: u32,
    bias: i32,
    /// IEEE specials (Inf and NaN at the all-ones exponent); else OCP e4m3.
    ieee: bool,
}

impl Ty {
    fn of(f: Format) -> Ty {
        match f {
            Format::BF16 => Ty {
                ebits: 8,
                mbits: 7,
                bias: 127,
                ieee: true,
            },
            Format::F16 => Ty {
                ebits: 5,
                mbits: 10,
                bias: 15,
                ieee: true,
            },
            Format::E5M2 => Ty {
                ebits: 5,
                mbits: 2,
                bias: 15,
                ieee: true,
            },
            _ => Ty {
                ebits: 4,
                mbits: 3,
                bias: 7,
                ieee: false,
            },
        }
    }
    fn sign(&self) -> u16 {
        1 << (self.ebits + self.mbits)
    }
    fn mant_mask(&self) -> u32 {
        (1 << self.mbits) - 1
    }
    fn max_field(&self) -> u32 {
        if self.ieee {
            (1 << self.ebits) - 2
        } else {
            (1 << self.ebits) - 1
        }
    }
    /// Smallest and largest normal unbiased exponents.
    fn emin(&self) -> i32 {
        1 - self.bias
    }
    fn emax(&self) -> i32 {
        self.max_field() as i32 - self.bias
    }
    fn code(&self, neg: bool, field: u32, mant: u32) -> u16 {
        let mut mant = mant & self.mant_mask();
        if !self.ieee && field == self.max_field() && mant == self.mant_mask() {
            mant -= 1; // S.1111.111 is NaN in e4m3
        }
        (if neg { self.sign() } else { 0 }) | ((field << self.mbits) | mant) as u16
    }
    /// A random normal code with unbiased exponent `e` (clamped to the
    /// normal range), random mantissa.
    fn normal(&self, r: &mut SplitMix64, neg: bool, e: i32) -> u16 {
        let e = e.clamp(self.emin(), self.emax());
        self.code(neg, (e + self.bias) as u32, r.next_u32())
    }
    fn subnormal(&self, r: &mut SplitMix64, neg: bool) -> u16 {
        let m = (r.next_u32() & self.mant_mask()).max(1);
        self.code(neg, 0, m)
    }
    fn nan(&self, r: &mut SplitMix64) -> u16 {
        let neg = r.chance(1, 2);
        if self.ieee {
            let m = (r.next_u32() & self.mant_mask()).max(1);
            (if neg { self.sign() } else { 0 }) | ((((1 << self.ebits) - 1) << self.mbits) | m) as u16
        } else {
            (if neg { self.sign() } else { 0 }) | (self.sign() - 1)
        }
    }
    fn inf(&self, neg: bool) -> u16 {
        (if neg { self.sign() } else { 0 }) | ((((1 << self.ebits) - 1) << self.mbits) as u16)
    }
    /// Exponent window of the "wide" class: the whole normal range, except
    /// bf16 which stops at 2^60 so that sums stay inside f32.
    fn wide(&self) -> (i32, i32) {
        if self.ebits == 8 {
            (self.emin(), 60)
        } else {
            (self.emin(), self.emax())
        }
    }
}

// ---------------------------------------------------------------- classes

/// Tile classes, by index.
pub const TILE_CLASSES: [&str; 6] = ["wide", "narrow", "cancel", "special", "overflow", "layout"];
/// C classes, by index.
pub const C_CLASSES: [&str; 8] = [
    "+0",
    "-0",
    "subnormal",
    "random",
    "cancel",
    "dominant",
    "special",
    "huge",
];

const T_WIDE: u8 = 0;
const T_NARROW: u8 = 1;
const T_CANCEL: u8 = 2;
const T_SPECIAL: u8 = 3;
const T_OVERFLOW: u8 = 4;
const T_LAYOUT: u8 = 5;

const C_POS0: u8 = 0;
const C_NEG0: u8 = 1;
const C_SUB: u8 = 2;
const C_RANDOM: u8 = 3;
const C_CANCEL: u8 = 4;
const C_DOMINANT: u8 = 5;
const C_SPECIAL: u8 = 6;
const C_HUGE: u8 = 7;

// ---------------------------------------------------------------- cases

/// The generated inputs of one probe run.
#[derive(Clone, Debug)]
pub struct Cases {
    pub spec: ProbeSpec,
    pub seed: u64,
    pub tiles: usize,
    /// A codes, `[tile][row][k]`.
    pub a: Vec<u16>,
    /// B codes, `[tile][n][k]` (each column of B contiguous).
    pub b: Vec<u16>,
    /// C, `[tile][row][n]`.
    pub c: Vec<f32>,
    pub tile_class: Vec<u8>,
    /// Per case.
    pub c_class: Vec<u8>,
}

struct Tile {
    a: Vec<u16>,
    b: Vec<u16>,
    c: Vec<f32>,
    class: u8,
    c_class: Vec<u8>,
}

/// Exact value table of a format's codes.
fn decode_table(f: Format) -> Vec<f32> {
    (0..f.code_count()).map(|c| f.decode_f32(c as u16)).collect()
}

fn f64_exp(x: f64) -> i32 {
    ((x.to_bits() >> 52) & 0x7FF) as i32 - 1023
}

fn f32_with(r: &mut SplitMix64, neg: bool, e: i32) -> f32 {
    let e = e.clamp(-126, 127);
    let bits = (if neg { 1u32 << 31 } else { 0 }) | (((e + 127) as u32) << 23) | (r.next_u32() & 0x7F_FFFF);
    f32::from_bits(bits)
}

fn gen_tile(spec: &ProbeSpec, ty: Ty, table: &[f32], seed: u64, tile: usize) -> Tile {
    let mut r = SplitMix64::for_item(seed, tile as u64);
    let (rows, k) = (spec.rows, spec.k());
    let pick = r.below(100);
    let class = match pick {
        0..=34 => T_WIDE,
        35..=56 => T_NARROW,
        57..=84 => T_CANCEL,
        85..=94 => T_SPECIAL,
        _ => T_OVERFLOW,
    };
    let (wlo, whi) = ty.wide();
    // per-tile centres for the narrow and cancel classes
    let centre = |r: &mut SplitMix64| -> i32 {
        let (lo, hi) = if ty.ebits == 8 { (-40, 40) } else { (wlo + 3, whi - 3) };
        r.range_i64(lo as i64, hi as i64) as i32
    };
    let (ca, cb) = (centre(&mut r), centre(&mut r));
    let elem = |r: &mut SplitMix64, centre_e: i32| -> u16 {
        let neg = r.chance(1, 2);
        match class {
            T_NARROW | T_CANCEL => {
                let e = centre_e + r.range_i64(-3, 3) as i32;
                ty.normal(r, neg, e)
            }
            T_OVERFLOW if ty.ebits == 8 => {
                let e = r.range_i64(90, ty.emax() as i64) as i32;
                ty.normal(r, neg, e)
            }
            _ => {
                let u = r.below(100);
                if u < 3 {
                    ty.code(neg, 0, 0)
                } else if u < 9 {
                    ty.subnormal(r, neg)
                } else {
                    let e = r.range_i64(wlo as i64, whi as i64) as i32;
                    ty.normal(r, neg, e)
                }
            }
        }
    };
    let mut a: Vec<u16> = (0..rows * k).map(|_| elem(&mut r, ca)).collect();
    let mut b: Vec<u16> = (0..COLS * k).map(|_| elem(&mut r, cb)).collect();
    if class == T_CANCEL {
        // pairs (p, p + d): exact (a negated, b equal), near (b one code
        // up), or free (small exponent, truncated next to the large M)
        let d = [1usize, 2, k / 2][r.below(3) as usize];
        for p in (0..k).filter(|p| (p / d).is_multiple_of(2)) {
            let q = p + d;
            match r.below(10) {
                0..=3 => {
                    for row in 0..rows {
                        a[row * k + q] = a[row * k + p] ^ ty.sign();
                    }
                    for n in 0..COLS {
                        b[n * k + q] = b[n * k + p];
                    }
                }
                4..=6 => {
                    for row in 0..rows {
                        a[row * k + q] = a[row * k + p] ^ ty.sign();
                    }
                    for n in 0..COLS {
                        let base = b[n * k + p];
                        let up = base as usize + 1;
                        let ok =
                            up < table.len() && table[up].is_finite() && (up as u16 & ty.sign()) == (base & ty.sign());
                        b[n * k + q] = if ok { up as u16 } else { base };
                    }
                }
                _ => {
                    let shift = r.range_i64(1, 14) as i32;
                    for row in 0..rows {
                        let neg = r.chance(1, 2);
                        a[row * k + q] = ty.normal(&mut r, neg, ca - shift);
                    }
                }
            }
        }
    }
    if class == T_SPECIAL {
        for x in a.iter_mut().chain(b.iter_mut()) {
            if r.chance(1, 40) {
                *x = match r.below(10) {
                    0..=2 => ty.nan(&mut r),
                    3..=7 if ty.ieee => ty.inf(r.chance(1, 2)),
                    _ => ty.code(r.chance(1, 2), 0, 0),
                };
            }
        }
    }
    // C per case, from the case's own row and column
    let mut c = Vec::with_capacity(rows * COLS);
    let mut c_class = Vec::with_capacity(rows * COLS);
    for row in 0..rows {
        for n in 0..COLS {
            let (mut dot, mut pmax) = (0f64, i32::MIN);
            for p in 0..k {
                let v = table[a[row * k + p] as usize] as f64 * table[b[n * k + p] as usize] as f64;
                dot += v;
                if v != 0.0 && v.is_finite() {
                    pmax = pmax.max(f64_exp(v));
                }
            }
            let pmax = if pmax == i32::MIN { 0 } else { pmax };
            let neg = r.chance(1, 2);
            let mut cls = match r.below(100) {
                0..=11 => C_POS0,
                12..=16 => C_NEG0,
                17..=24 => C_SUB,
                25..=54 => C_RANDOM,
                55..=84 => C_CANCEL,
                _ => C_DOMINANT,
            };
            if class == T_SPECIAL && r.chance(1, 16) {
                cls = C_SPECIAL;
            }
            if class == T_OVERFLOW && r.chance(1, 2) {
                cls = C_HUGE;
            }
            if cls == C_CANCEL && !(dot.is_finite() && dot != 0.0 && (dot as f32).is_normal()) {
                cls = C_RANDOM;
            }
            let v = match cls {
                C_POS0 => 0.0,
                C_NEG0 => -0.0,
                C_SUB => f32::from_bits((if neg { 1u32 << 31 } else { 0 }) | (r.next_u32() & 0x7F_FFFF).max(1)),
                C_RANDOM => {
                    let e = pmax + r.range_i64(-30, 6) as i32;
                    f32_with(&mut r, neg, e)
                }
                C_CANCEL => {
                    let t = -(dot as f32);
                    let bits = (t.to_bits() as i64 + r.range_i64(-2, 2)) as u32;
                    let v = f32::from_bits(bits);
                    if v.is_finite() && v.is_sign_negative() == t.is_sign_negative() {
                        v
                    } else {
                        t
                    }
                }
                C_DOMINANT => {
                    let e = pmax + r.range_i64(8, 40) as i32;
                    f32_with(&mut r, neg, e)
                }
                C_HUGE => {
                    let e = r.range_i64(120, 127) as i32;
                    f32_with(&mut r, neg, e)
                }
                _ => match r.below(4) {
                    0 => f32::INFINITY,
                    1 => f32::NEG_INFINITY,
                    _ => f32::from_bits(
                        0x7F80_0000 | (if neg { 1u32 << 31 } else { 0 }) | (r.next_u32() & 0x7F_FFFF).max(1),
                    ),
                },
            };
            c.push(v);
            c_class.push(cls);
        }
    }
    Tile {
        a,
        b,
        c,
        class,
        c_class,
    }
}

impl Cases {
    /// The random cases of a probe: at least `cases` (rounded up to whole
    /// tiles), tile t generated from `SplitMix64::for_item(seed, t)`.
    pub fn generate(spec: &ProbeSpec, seed: u64, cases: usize) -> Result<Cases> {
        if cases == 0 || cases > MAX_CASES {
            return Err(DeviceError::Refused(format!(
                "{}: case count {cases} outside 1..={MAX_CASES}",
                spec.name
            )));
        }
        let f = spec.format();
        let ty = Ty::of(f);
        let table = decode_table(f);
        let tiles = spec.tiles_for(cases);
        let parts: Vec<Tile> = (0..tiles)
            .into_par_iter()
            .map(|t| gen_tile(spec, ty, &table, seed, t))
            .collect();
        Ok(Self::from_tiles(spec, seed, parts))
    }

    fn from_tiles(spec: &ProbeSpec, seed: u64, parts: Vec<Tile>) -> Cases {
        let tiles = parts.len();
        let mut out = Cases {
            spec: *spec,
            seed,
            tiles,
            a: Vec::with_capacity(tiles * spec.rows * spec.k()),
            b: Vec::with_capacity(tiles * COLS * spec.k()),
            c: Vec::with_capacity(tiles * spec.tile_cases()),
            tile_class: Vec::with_capacity(tiles),
            c_class: Vec::with_capacity(tiles * spec.tile_cases()),
        };
        for t in parts {
            out.a.extend_from_slice(&t.a);
            out.b.extend_from_slice(&t.b);
            out.c.extend_from_slice(&t.c);
            out.tile_class.push(t.class);
            out.c_class.extend_from_slice(&t.c_class);
        }
        out
    }

    /// Structured tiles whose every output is one exact product or C, so any
    /// fragment-layout error shows up as a wrong value: one-hot rows of A
    /// (k = r mod K, then k = r + K/2 mod K) against distinct B values,
    /// one-hot columns of B (k = n, then k = n + K - 8) against distinct A
    /// values, and A = B = 0 with distinct integer C.
    pub fn layout_check(spec: &ProbeSpec) -> Cases {
        let f = spec.format();
        let ty = Ty::of(f);
        let (rows, k) = (spec.rows, spec.k());
        let one = ty.code(false, ty.bias as u32, 0);
        // distinct (as far as the type allows) positive codes in [1/4, 8):
        // a zero times any of them has a nominal exponent (emin + e) below
        // every nonzero product's, so no model truncates these sums
        let first = ty.code(false, (ty.bias - 2) as u32, 0);
        let count = (ty.code(false, (ty.bias + 3) as u32, 0) - first) as usize;
        let val = |j: usize| -> u16 { first + (j % count) as u16 };
        let mut parts = Vec::new();
        let zero_c = vec![0f32; rows * COLS];
        let classes = vec![C_POS0; rows * COLS];
        for shift in [0, k / 2] {
            let mut a = vec![0u16; rows * k];
            for row in 0..rows {
                a[row * k + (row + shift) % k] = one;
            }
            let b = (0..COLS * k).map(val).collect();
            parts.push(Tile {
                a,
                b,
                c: zero_c.clone(),
                class: T_LAYOUT,
                c_class: classes.clone(),
            });
        }
        for shift in [0, k - 8] {
            let a = (0..rows * k).map(val).collect();
            let mut b = vec![0u16; COLS * k];
            for n in 0..COLS {
                b[n * k + n + shift] = one;
            }
            parts.push(Tile {
                a,
                b,
                c: zero_c.clone(),
                class: T_LAYOUT,
                c_class: classes.clone(),
            });
        }
        parts.push(Tile {
            a: vec![0; rows * k],
            b: vec![0; COLS * k],
            c: (0..rows * COLS).map(|i| (i + 1) as f32).collect(),
            class: T_LAYOUT,
            c_class: vec![C_RANDOM; rows * COLS],
        });
        Self::from_tiles(spec, 0, parts)
    }

    pub fn len(&self) -> usize {
        self.tiles * self.spec.tile_cases()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tile, row and column of case `i`.
    pub fn position(&self, i: usize) -> (usize, usize, usize) {
        let tc = self.spec.tile_cases();
        (i / tc, (i % tc) / COLS, i % COLS)
    }

    /// The codes of row r of A and column n of B, and C, of case `i`.
    pub fn inputs(&self, i: usize) -> (&[u16], &[u16], f32) {
        let (t, row, n) = self.position(i);
        let k = self.spec.k();
        let ra = (t * self.spec.rows + row) * k;
        let rb = (t * COLS + n) * k;
        (&self.a[ra..ra + k], &self.b[rb..rb + k], self.c[i])
    }

    /// The CPU model's output of every case, in case order.
    pub fn model(&self) -> Vec<f32> {
        let table = decode_table(self.spec.format());
        let tc = self.spec.tile_cases();
        let mut out = vec![0f32; self.len()];
        out.par_chunks_mut(tc).enumerate().for_each(|(t, chunk)| {
            let mut av = [0f32; 64];
            let mut bv = [0f32; 64];
            let k = self.spec.k().min(64);
            for (j, o) in chunk.iter_mut().enumerate() {
                let (a, b, c) = self.inputs(t * tc + j);
                for p in 0..k {
                    av[p] = table[a[p] as usize];
                    bv[p] = table[b[p] as usize];
                }
                *o = mma_step(&self.spec.mma, &av[..k], &bv[..k], c);
            }
        });
        out
    }

    /// A as the bytes the kernels read: `[tile][row][32 bytes]`, codes
    /// little-endian.
    pub fn a_bytes(&self) -> Vec<u8> {
        codes_to_bytes(&self.a, self.spec.elem_bytes())
    }

    /// B as `[tile][n][32 bytes]`.
    pub fn b_bytes(&self) -> Vec<u8> {
        codes_to_bytes(&self.b, self.spec.elem_bytes())
    }
}

fn codes_to_bytes(codes: &[u16], bytes: usize) -> Vec<u8> {
    if bytes == 1 {
        codes.iter().map(|&c| c as u8).collect()
    } else {
        codes.iter().flat_map(|c| c.to_le_bytes()).collect()
    }
}

// ---------------------------------------------------------------- compare

/// Whether a GPU output matches the model (equal bits, or both NaN).
pub fn same(gpu: f32, model: f32) -> bool {
    canonical_bits(gpu) == canonical_bits(model)
}

/// SHA-256 of the canonical bits (see the module documentation).
pub fn canonical_digest(values: &[f32]) -> String {
    let canon: Vec<f32> = values.iter().map(|&v| f32::from_bits(canonical_bits(v))).collect();
    f32_digest(&canon)
}

/// Cases and mismatches of one class.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassCount {
    pub cases: u64,
    pub mismatches: u64,
}

/// One case where the GPU and the model differ.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MismatchRecord {
    pub case: u64,
    pub tile: u64,
    pub row: u32,
    pub col: u32,
    /// Codes of row `row` of A and column `col` of B.
    pub a: Vec<u16>,
    pub b: Vec<u16>,
    pub c_bits: u32,
    pub gpu_bits: u32,
    pub model_bits: u32,
    /// Readable values (not read back).
    #[serde(default)]
    pub c: String,
    #[serde(default)]
    pub gpu: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub class: String,
}

/// One probe's summary, as stored in `probes.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ProbeRecord {
    pub name: String,
    pub ptx: String,
    /// The model, as an order spelling.
    pub model: String,
    pub seed: u64,
    pub cases: u64,
    pub tiles: u64,
    /// SHA-256 of the GPU outputs' canonical bits (NaN -> 0x7FFFFFFF).
    pub digest: String,
    pub mismatches: u64,
    /// GPU outputs that are NaN, and their bit patterns.
    pub nan_outputs: u64,
    pub nan_payloads: BTreeMap<String, u64>,
    /// Model outputs that are NaN.
    pub model_nan_outputs: u64,
    /// `tile:CLASS` and `c:CLASS` counts.
    pub classes: BTreeMap<String, ClassCount>,
    pub first_file: String,
    pub first_count: u64,
    pub mismatch_file: String,
    pub records: u64,
}

/// The comparison of one probe's GPU outputs with the model.
#[derive(Clone, Debug)]
pub struct ProbeResult {
    pub record: ProbeRecord,
    /// The first GPU outputs, raw.
    pub first: Vec<f32>,
    pub mismatches: Vec<MismatchRecord>,
}

fn hex32(x: u32) -> String {
    format!("0x{x:08x}")
}

fn file_stem(name: &str) -> String {
    name.to_string()
}

fn record_for(cases: &Cases, i: usize, gpu: f32, model: f32) -> MismatchRecord {
    let (t, row, n) = cases.position(i);
    let (a, b, c) = cases.inputs(i);
    MismatchRecord {
        case: i as u64,
        tile: t as u64,
        row: row as u32,
        col: n as u32,
        a: a.to_vec(),
        b: b.to_vec(),
        c_bits: c.to_bits(),
        gpu_bits: gpu.to_bits(),
        model_bits: model.to_bits(),
        c: format!("{c:e}"),
        gpu: format!("{gpu:e}"),
        model: format!("{model:e}"),
        class: format!(
            "tile:{} c:{}",
            TILE_CLASSES[cases.tile_class[t] as usize], C_CLASSES[cases.c_class[i] as usize]
        ),
    }
}

/// Compares GPU outputs (case order) with the model's.
pub fn compare(cases: &Cases, gpu: &[f32]) -> Result<ProbeResult> {
    if gpu.len() != cases.len() {
        return Err(DeviceError::Capture(format!(
            "{}: {} GPU outputs for {} cases",
            cases.spec.name,
            gpu.len(),
            cases.len()
        )));
    }
    let model = cases.model();
    Ok(compare_with_model(cases, gpu, &model))
}

fn compare_with_model(cases: &Cases, gpu: &[f32], model: &[f32]) -> ProbeResult {
    let spec = &cases.spec;
    let mut classes: BTreeMap<String, ClassCount> = BTreeMap::new();
    let mut nan_payloads: BTreeMap<String, u64> = BTreeMap::new();
    let (mut mismatches, mut nan_outputs, mut model_nans) = (0u64, 0u64, 0u64);
    let mut records = Vec::new();
    let mut tile_counts = vec![ClassCount::default(); TILE_CLASSES.len()];
    let mut c_counts = vec![ClassCount::default(); C_CLASSES.len()];
    for i in 0..cases.len() {
        let (g, m) = (gpu[i], model[i]);
        let bad = !same(g, m);
        let t = i / spec.tile_cases();
        let tc = &mut tile_counts[cases.tile_class[t] as usize];
        tc.cases += 1;
        let cc = &mut c_counts[cases.c_class[i] as usize];
        cc.cases += 1;
        if g.is_nan() {
            nan_outputs += 1;
            *nan_payloads.entry(hex32(g.to_bits())).or_insert(0) += 1;
        }
        if m.is_nan() {
            model_nans += 1;
        }
        if bad {
            mismatches += 1;
            tile_counts[cases.tile_class[t] as usize].mismatches += 1;
            c_counts[cases.c_class[i] as usize].mismatches += 1;
            if records.len() < MAX_RECORDS {
                records.push(record_for(cases, i, g, m));
            }
        }
    }
    for (i, c) in tile_counts.into_iter().enumerate() {
        if c.cases > 0 {
            classes.insert(format!("tile:{}", TILE_CLASSES[i]), c);
        }
    }
    for (i, c) in c_counts.into_iter().enumerate() {
        if c.cases > 0 {
            classes.insert(format!("c:{}", C_CLASSES[i]), c);
        }
    }
    let first: Vec<f32> = gpu[..gpu.len().min(FIRST_OUTPUTS)].to_vec();
    let stem = file_stem(spec.name);
    ProbeResult {
        record: ProbeRecord {
            name: spec.name.into(),
            ptx: spec.ptx.into(),
            model: spec.order.into(),
            seed: cases.seed,
            cases: cases.len() as u64,
            tiles: cases.tiles as u64,
            digest: canonical_digest(gpu),
            mismatches,
            nan_outputs,
            nan_payloads,
            model_nan_outputs: model_nans,
            classes,
            first_file: format!("{stem}.first.bin"),
            first_count: first.len() as u64,
            mismatch_file: format!("{stem}.mismatches.json"),
            records: records.len() as u64,
        },
        first,
        mismatches: records,
    }
}

/// Human-readable dump of a failed layout self-check: per wrong output, the
/// GPU value, the expected value, and where in the tile the expected
/// values contain the GPU value (a permutation shows up there), then the
/// raw GPU tile.
pub fn layout_report(cases: &Cases, gpu: &[f32], model: &[f32]) -> Option<String> {
    let tc = cases.spec.tile_cases();
    let mut out = String::new();
    let mut bad_tiles = 0;
    let what = [
        "A one-hot at k = r mod K, B distinct: D[r][n] = B[n][r mod K]",
        "A one-hot at k = (r + K/2) mod K: D[r][n] = B[n][(r + K/2) mod K]",
        "B one-hot at k = n, A distinct: D[r][n] = A[r][n]",
        "B one-hot at k = n + K - 8: D[r][n] = A[r][n + K - 8]",
        "A = B = 0, C[r][n] = 8r + n + 1: D = C",
    ];
    for t in 0..cases.tiles {
        let range = t * tc..(t + 1) * tc;
        let wrong: Vec<usize> = range.clone().filter(|&i| !same(gpu[i], model[i])).collect();
        if wrong.is_empty() {
            continue;
        }
        bad_tiles += 1;
        out += &format!(
            "  check tile {t} ({}): {} of {tc} outputs wrong\n",
            what.get(t).unwrap_or(&"?"),
            wrong.len()
        );
        for &i in wrong.iter().take(24) {
            let (_, r, n) = cases.position(i);
            let at: Vec<String> = range
                .clone()
                .filter(|&j| same(gpu[i], model[j]))
                .take(3)
                .map(|j| {
                    let (_, r2, n2) = cases.position(j);
                    format!("({r2},{n2})")
                })
                .collect();
            out += &format!(
                "    (r={r},n={n}) gpu {} [{}] expected {} [{}]; gpu value expected at {}\n",
                gpu[i],
                hex32(gpu[i].to_bits()),
                model[i],
                hex32(model[i].to_bits()),
                if at.is_empty() { "nowhere".into() } else { at.join(" ") }
            );
        }
        if bad_tiles == 1 {
            out += "    raw GPU tile (rows r, columns n = 0..7):\n";
            for r in 0..cases.spec.rows {
                let row: Vec<String> = (0..COLS).map(|n| format!("{}", gpu[t * tc + r * COLS + n])).collect();
                out += &format!("      r={r:2}: {}\n", row.join(" "));
            }
        }
    }
    (bad_tiles > 0).then_some(out)
}

// ---------------------------------------------------------------- capture

/// The result of a probe run (GPU or synthetic): per probe comparisons, and
/// probes that could not run (compile error, failed layout check).
#[derive(Clone, Debug, Default)]
pub struct ProbeReport {
    pub results: Vec<ProbeResult>,
    pub failures: Vec<(String, String)>,
}

impl ProbeReport {
    /// The summary table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<26} {:>9} {:>10} {:>9}  {}\n",
            "probe", "cases", "mismatches", "gpu NaNs", "NaN payloads seen"
        );
        for r in &self.results {
            let p = &r.record;
            let payloads: Vec<String> = p.nan_payloads.iter().map(|(k, v)| format!("{k} x{v}")).collect();
            s += &format!(
                "{:<26} {:>9} {:>10} {:>9}  {}\n",
                p.name,
                p.cases,
                p.mismatches,
                p.nan_outputs,
                if payloads.is_empty() {
                    "-".into()
                } else {
                    payloads.join(", ")
                }
            );
        }
        for (name, why) in &self.failures {
            s += &format!("{name:<26} FAILED: {}\n", why.lines().next().unwrap_or(""));
        }
        s
    }
}

/// Writes a probe capture folder (see the module documentation).
pub fn write_capture(
    dir: &Path,
    results: &[ProbeResult],
    device: serde_json::Value,
    notes: Vec<String>,
) -> Result<Manifest> {
    let mut w = CaptureWriter::create(dir)?;
    let records: Vec<&ProbeRecord> = results.iter().map(|r| &r.record).collect();
    for r in results {
        let bytes: Vec<u8> = r.first.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
        w.put(&r.record.first_file, &bytes)?;
        w.put_json(&r.record.mismatch_file, &r.mismatches)?;
    }
    w.put_json("probes.json", &records)?;
    w.finish("probe", device, notes)
}

/// The replay of one probe.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProbeReplayLine {
    pub name: String,
    pub cases: u64,
    /// Mismatches the capture recorded (GPU vs model at capture time).
    pub recorded_mismatches: u64,
    /// The stored digest equals the model's outputs (with the recorded GPU
    /// bits substituted at recorded mismatches).
    pub digest_ok: bool,
    /// Stored raw outputs compared elementwise.
    pub first_checked: u64,
    /// Stored raw outputs that differ from the model at a case that is not
    /// a recorded mismatch (or differ from its record).
    pub first_unexplained: u64,
    /// Recorded mismatches whose inputs, model bits or GPU bits do not
    /// replay (with reasons).
    pub record_errors: Vec<String>,
    pub nan_payloads: BTreeMap<String, u64>,
}

/// The replay of a probe capture.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct ProbeReplayReport {
    pub lines: Vec<ProbeReplayLine>,
}

impl ProbeReplayReport {
    /// Every probe replays: digest reproduced, stored outputs explained,
    /// records consistent. (Recorded mismatches may exist; see
    /// [`ProbeReplayReport::mismatches`].)
    pub fn ok(&self) -> bool {
        self.lines
            .iter()
            .all(|l| l.digest_ok && l.first_unexplained == 0 && l.record_errors.is_empty())
    }

    /// Total recorded GPU-vs-model mismatches.
    pub fn mismatches(&self) -> u64 {
        self.lines.iter().map(|l| l.recorded_mismatches).sum()
    }

    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<26} {:>9} {:>10} {:>7} {:>11}  {}\n",
            "probe", "cases", "mismatches", "digest", "first-ok", "problems"
        );
        for l in &self.lines {
            s += &format!(
                "{:<26} {:>9} {:>10} {:>7} {:>11}  {}\n",
                l.name,
                l.cases,
                l.recorded_mismatches,
                if l.digest_ok { "ok" } else { "DIFFERS" },
                format!("{}/{}", l.first_checked - l.first_unexplained, l.first_checked),
                if l.record_errors.is_empty() {
                    "-".into()
                } else {
                    l.record_errors.join("; ")
                }
            );
        }
        s
    }
}

/// Replays a probe capture on the CPU model: regenerates every case from
/// the stored seed and count, recomputes the model, and checks the stored
/// digest, the stored raw outputs and the mismatch records.
pub fn replay(capture: &Capture) -> Result<ProbeReplayReport> {
    if capture.manifest.suite != "probe" {
        return Err(DeviceError::Capture(format!(
            "{}: suite `{}`, expected `probe`",
            capture.dir.display(),
            capture.manifest.suite
        )));
    }
    let records: Vec<ProbeRecord> = capture.read_json("probes.json")?;
    let mut report = ProbeReplayReport::default();
    for rec in records {
        let spec = find(&rec.name)
            .ok_or_else(|| DeviceError::Capture(format!("unknown probe `{}` in probes.json", rec.name)))?;
        let tc = spec.tile_cases() as u64;
        if rec.cases == 0 || rec.cases % tc != 0 || rec.cases / tc != rec.tiles || rec.cases > MAX_CASES as u64 {
            return Err(DeviceError::Capture(format!(
                "{}: inconsistent case count {} / tiles {}",
                rec.name, rec.cases, rec.tiles
            )));
        }
        let cases = Cases::generate(spec, rec.seed, rec.cases as usize)?;
        let model = cases.model();
        let first_bytes = capture.read(&rec.first_file)?;
        let records: Vec<MismatchRecord> = capture.read_json(&rec.mismatch_file)?;
        let mut errors = Vec::new();
        // records: inputs regenerate, model bits replay, GPU differs
        let mut by_case: BTreeMap<u64, u32> = BTreeMap::new();
        for r in &records {
            let i = r.case as usize;
            if i >= cases.len() {
                errors.push(format!("record case {} out of range", r.case));
                continue;
            }
            let (a, b, c) = cases.inputs(i);
            if a != r.a.as_slice() || b != r.b.as_slice() || c.to_bits() != r.c_bits {
                errors.push(format!("case {}: recorded inputs differ from the generator", r.case));
            }
            if !same(f32::from_bits(r.model_bits), model[i]) {
                errors.push(format!(
                    "case {}: recorded model {} but the model now gives {}",
                    r.case,
                    hex32(r.model_bits),
                    hex32(model[i].to_bits())
                ));
            }
            if same(f32::from_bits(r.gpu_bits), model[i]) {
                errors.push(format!(
                    "case {}: recorded as a mismatch but the GPU bits match",
                    r.case
                ));
            }
            by_case.insert(r.case, r.gpu_bits);
        }
        if (records.len() as u64) < rec.mismatches.min(MAX_RECORDS as u64) || records.len() as u64 > rec.mismatches {
            errors.push(format!("{} records for {} mismatches", records.len(), rec.mismatches));
        }
        // digest: model with the recorded GPU bits substituted
        let digest_ok = if rec.mismatches as usize > records.len() {
            errors.push(format!(
                "{} mismatches but only {} recorded: the digest cannot be rebuilt",
                rec.mismatches,
                records.len()
            ));
            false
        } else {
            let mut expect = model.clone();
            for (&i, &bits) in &by_case {
                if let Some(v) = expect.get_mut(i as usize) {
                    *v = f32::from_bits(bits);
                }
            }
            canonical_digest(&expect) == rec.digest
        };
        // the stored raw outputs
        if first_bytes.len() % 4 != 0 || first_bytes.len() / 4 != rec.first_count as usize {
            errors.push(format!("{}: {} bytes", rec.first_file, first_bytes.len()));
        }
        let mut first_checked = 0u64;
        let mut first_unexplained = 0u64;
        for (i, w) in first_bytes.chunks_exact(4).enumerate().take(cases.len()) {
            let g = f32::from_bits(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            first_checked += 1;
            let explained = match by_case.get(&(i as u64)) {
                Some(&bits) => same(g, f32::from_bits(bits)),
                None => same(g, model[i]),
            };
            if !explained {
                first_unexplained += 1;
            }
        }
        report.lines.push(ProbeReplayLine {
            name: rec.name.clone(),
            cases: rec.cases,
            recorded_mismatches: rec.mismatches,
            digest_ok,
            first_checked,
            first_unexplained,
            record_errors: errors,
            nan_payloads: rec.nan_payloads.clone(),
        });
    }
    Ok(report)
}

// ---------------------------------------------------------------- CUDA

const CUDA_COMMON: &str = r#"
typedef unsigned char u8;
typedef unsigned int u32;
// four bytes at p (p 4-byte aligned): two 16-bit codes or four 8-bit codes,
// the lower k in the lower bits
#define LDW(p) (*(const u32*)(p))
"#;

/// The CUDA source of one probe's kernel. Operand bytes: A `[tile][row][32]`,
/// B `[tile][n][32]` (each column of B contiguous along k), C and D
/// `[tile][row][8]` f32. With 16-bit types a 32-bit fragment register holds
/// k = 2j, 2j+1; with 8-bit types k = 4j..4j+3; both are the 4 bytes at
/// byte offset 4j of the row, so one indexing serves both.
///
/// `mma.sync` (PTX ISA "Matrix fragments for mma.m16n8k16 / m16n8k32"):
/// g = lane >> 2, t = lane & 3; a0 = row g bytes 4t.., a1 = row g+8 bytes
/// 4t.., a2 = row g bytes 4t+16.., a3 = row g+8 bytes 4t+16..; b0 = column g
/// bytes 4t.., b1 = column g bytes 4t+16..; c/d = (g, 2t), (g, 2t+1),
/// (g+8, 2t), (g+8, 2t+1). One warp per tile, tiles strided over warps.
///
/// `wgmma` m64n8: warp w of the warpgroup holds rows 16w + (the mma.sync A
/// layout) and D rows 16w + {g, g+8}, columns 2t, 2t+1. B goes to shared
/// memory K-major without swizzle: core matrix j (8 columns n x 16 bytes of
/// k) at byte 128 j, column n at 16 n inside it; descriptor start >> 4,
/// LBO = SBO = 128 (only one core matrix along N, so whichever offset the
/// hardware applies along K it is 128).
pub fn kernel_source(spec: &ProbeSpec) -> String {
    match spec.instr {
        Instr::MmaSync => format!(
            r#"{CUDA_COMMON}
extern "C" __global__ void __launch_bounds__(128) {kernel}(const u8* __restrict__ A, const u8* __restrict__ B,
        const float* __restrict__ C, float* __restrict__ D, int tiles) {{
    const int lane = threadIdx.x & 31;
    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int nwarps = (int)((gridDim.x * blockDim.x) >> 5);
    const int g = lane >> 2, t = lane & 3;
    for (int tile = warp; tile < tiles; tile += nwarps) {{
        const u8* a = A + (size_t)tile * 512;
        const u8* b = B + (size_t)tile * 256;
        const float* c = C + (size_t)tile * 128;
        float* d = D + (size_t)tile * 128;
        u32 a0 = LDW(a + g * 32 + 4 * t), a1 = LDW(a + (g + 8) * 32 + 4 * t);
        u32 a2 = LDW(a + g * 32 + 4 * t + 16), a3 = LDW(a + (g + 8) * 32 + 4 * t + 16);
        u32 b0 = LDW(b + g * 32 + 4 * t), b1 = LDW(b + g * 32 + 4 * t + 16);
        float d0 = c[g * 8 + 2 * t], d1 = c[g * 8 + 2 * t + 1];
        float d2 = c[(g + 8) * 8 + 2 * t], d3 = c[(g + 8) * 8 + 2 * t + 1];
        asm volatile("{ptx} {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        d[g * 8 + 2 * t] = d0;
        d[g * 8 + 2 * t + 1] = d1;
        d[(g + 8) * 8 + 2 * t] = d2;
        d[(g + 8) * 8 + 2 * t + 1] = d3;
    }}
}}
"#,
            kernel = spec.kernel,
            ptx = spec.ptx
        ),
        Instr::Wgmma => {
            // bf16 has the transpose immediate for B (0: K-major); fp8 has none
            let tail = if spec.elem_bytes() == 2 { ", 1, 1, 0" } else { ", 1, 1" };
            format!(
                r#"{CUDA_COMMON}
static __device__ __forceinline__ u32 smem_u32(const void* p) {{
    u32 r;
    asm volatile("{{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }}" : "=r"(r) : "l"(p));
    return r;
}}
extern "C" __global__ void __launch_bounds__(128) {kernel}(const u8* __restrict__ A, const u8* __restrict__ B,
        const float* __restrict__ C, float* __restrict__ D, int tiles) {{
    __shared__ __align__(128) u8 sB[256];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    const int r0 = warp * 16 + g, r1 = r0 + 8;
    const u32 base = smem_u32(sB);
    const unsigned long long desc = (unsigned long long)((base & 0x3FFFF) >> 4)
        | ((unsigned long long)(128 >> 4) << 16) | ((unsigned long long)(128 >> 4) << 32);
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {{
        const u8* a = A + (size_t)tile * 2048;
        const u8* b = B + (size_t)tile * 256;
        const float* c = C + (size_t)tile * 512;
        float* d = D + (size_t)tile * 512;
        if (tid < 64) {{
            const int n = tid >> 3, rb = (tid & 7) * 4;
            *(u32*)(sB + (rb >> 4) * 128 + n * 16 + (rb & 15)) = LDW(b + n * 32 + rb);
        }}
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        u32 a0 = LDW(a + r0 * 32 + 4 * t), a1 = LDW(a + r1 * 32 + 4 * t);
        u32 a2 = LDW(a + r0 * 32 + 4 * t + 16), a3 = LDW(a + r1 * 32 + 4 * t + 16);
        float d0 = c[r0 * 8 + 2 * t], d1 = c[r0 * 8 + 2 * t + 1];
        float d2 = c[r1 * 8 + 2 * t], d3 = c[r1 * 8 + 2 * t + 1];
        asm volatile("" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) :: "memory");
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        asm volatile("{{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
            "{ptx} {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, %8, p{tail};\n}}\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1) : "memory");
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        asm volatile("" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) :: "memory");
        d[r0 * 8 + 2 * t] = d0;
        d[r0 * 8 + 2 * t + 1] = d1;
        d[r1 * 8 + 2 * t] = d2;
        d[r1 * 8 + 2 * t + 1] = d3;
        __syncthreads();
    }}
}}
"#,
                kernel = spec.kernel,
                ptx = spec.ptx,
                tail = tail
            )
        }
    }
}

/// Options of a GPU probe run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub cases: usize,
    pub seed: u64,
    /// Probe names; empty = all.
    pub only: Vec<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            cases: DEFAULT_CASES,
            seed: DEFAULT_SEED,
            only: Vec::new(),
        }
    }
}

/// The probes selected by `only` (all when empty); unknown names are an
/// error listing the known ones.
pub fn select(only: &[String]) -> Result<Vec<&'static ProbeSpec>> {
    if only.is_empty() {
        return Ok(PROBES.iter().collect());
    }
    only.iter()
        .map(|n| {
            find(n.trim()).ok_or_else(|| {
                let known: Vec<&str> = PROBES.iter().map(|p| p.name).collect();
                DeviceError::Refused(format!("unknown probe `{n}`; known: {}", known.join(", ")))
            })
        })
        .collect()
}

#[cfg(feature = "cuda")]
mod gpu_run {
    use super::*;
    use crate::device::gpu::{driver_err, Arch, Gpu};
    use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

    /// Sentinel written to D before a launch, so an output the kernel never
    /// stores shows up (-6.3e18, finite).
    const SENTINEL: u32 = 0xDEAD_BEEF;

    fn launch(gpu: &Gpu, f: &CudaFunction, cases: &Cases) -> Result<Vec<f32>> {
        let s = &gpu.stream;
        let a = s.clone_htod(&cases.a_bytes()).map_err(driver_err("upload A"))?;
        let b = s.clone_htod(&cases.b_bytes()).map_err(driver_err("upload B"))?;
        let c = s.clone_htod(&cases.c).map_err(driver_err("upload C"))?;
        let mut d = s
            .clone_htod(&vec![f32::from_bits(SENTINEL); cases.len()])
            .map_err(driver_err("allocate D"))?;
        let tiles = i32::try_from(cases.tiles).map_err(|_| DeviceError::Refused("too many tiles".into()))?;
        let blocks = match cases.spec.instr {
            Instr::MmaSync => cases.tiles.div_ceil(4).min(4096),
            Instr::Wgmma => cases.tiles.min(2048),
        } as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks.max(1), 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut lb = s.launch_builder(f);
        lb.arg(&a).arg(&b).arg(&c).arg(&mut d).arg(&tiles);
        // SAFETY: the kernel reads tiles*512|2048 bytes of A, tiles*256 of
        // B, tiles*rows*8 floats of C and writes as many of D: the sizes
        // uploaded above.
        unsafe { lb.launch(cfg) }.map_err(driver_err("launch"))?;
        let out = s.clone_dtoh(&d).map_err(driver_err("download D"))?;
        gpu.sync()?;
        Ok(out)
    }

    /// Runs the selected probes: compile, layout self-check, then the random
    /// cases (generated and modelled on the CPU with rayon).
    pub fn run(gpu: &Gpu, opts: &RunOptions) -> Result<ProbeReport> {
        let mut report = ProbeReport::default();
        for spec in select(&opts.only)? {
            let arch = match spec.instr {
                Instr::MmaSync => Arch::Sm90,
                Instr::Wgmma => Arch::Sm90a,
            };
            let f = match gpu
                .compile(spec.kernel, &kernel_source(spec), arch)
                .and_then(|m| gpu.function(&m, spec.kernel))
            {
                Ok(f) => f,
                Err(e) => {
                    report.failures.push((spec.name.into(), format!("compile/load: {e}")));
                    continue;
                }
            };
            let check = Cases::layout_check(spec);
            let got = match launch(gpu, &f, &check) {
                Ok(g) => g,
                Err(e) => {
                    report
                        .failures
                        .push((spec.name.into(), format!("layout check launch: {e}")));
                    continue;
                }
            };
            if let Some(dump) = layout_report(&check, &got, &check.model()) {
                report
                    .failures
                    .push((spec.name.into(), format!("layout check failed\n{dump}")));
                continue;
            }
            let cases = Cases::generate(spec, opts.seed, opts.cases)?;
            let got = match launch(gpu, &f, &cases) {
                Ok(g) => g,
                Err(e) => {
                    report.failures.push((spec.name.into(), format!("launch: {e}")));
                    continue;
                }
            };
            report.results.push(compare(&cases, &got)?);
        }
        Ok(report)
    }
}

#[cfg(feature = "cuda")]
pub use gpu_run::run;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_models_match_their_order_spelling() {
        for p in PROBES {
            let o: crate::order::Order = p.order.parse().unwrap();
            assert_eq!(o.mma(), Some(p.mma), "{}", p.name);
            assert_eq!(p.k() * p.elem_bytes(), ROW_BYTES, "{}", p.name);
        }
    }

    #[test]
    fn generated_inputs_are_codes_of_the_type_and_deterministic() {
        for p in PROBES {
            let x = Cases::generate(p, 7, 100_000).unwrap();
            let y = Cases::generate(p, 7, 100_000).unwrap();
            assert_eq!(x.a, y.a);
            assert_eq!(x.b, y.b);
            assert_eq!(
                x.c.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                y.c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
            let mask = (p.format().code_count() - 1) as u16;
            assert!(x.a.iter().chain(&x.b).all(|&c| c & !mask == 0), "{}", p.name);
            // every class appears
            for t in 0..5u8 {
                assert!(x.tile_class.contains(&t), "{} tile class {t}", p.name);
            }
            let m = x.model();
            let nans = m.iter().filter(|v| v.is_nan()).count();
            assert!(nans > 0 && nans * 10 < m.len(), "{}: {nans} NaN of {}", p.name, m.len());
        }
    }

    #[test]
    fn layout_check_expectations_are_the_designed_values() {
        for p in PROBES {
            let c = Cases::layout_check(p);
            let m = c.model();
            let table = decode_table(p.format());
            let (k, rows) = (p.k(), p.rows);
            let tc = p.tile_cases();
            for r in 0..rows {
                for n in 0..COLS {
                    let bv = |t: usize, kk: usize| table[c.b[(t * COLS + n) * k + kk] as usize];
                    let av = |t: usize, kk: usize| table[c.a[(t * rows + r) * k + kk] as usize];
                    let o = |t: usize| m[t * tc + r * COLS + n];
                    assert_eq!(o(0), bv(0, r % k), "{} T0", p.name);
                    assert_eq!(o(1), bv(1, (r + k / 2) % k), "{} T1", p.name);
                    assert_eq!(o(2), av(2, n), "{} T2", p.name);
                    assert_eq!(o(3), av(3, n + k - 8), "{} T3", p.name);
                    assert_eq!(o(4), (r * COLS + n + 1) as f32, "{} T4", p.name);
                }
            }
            let fake = m.clone();
            assert!(layout_report(&c, &fake, &m).is_none());
            // a transposed-fragment style error is reported with positions
            let mut bad = m.clone();
            bad.swap(1, 2);
            let rep = layout_report(&c, &bad, &m).unwrap();
            assert!(rep.contains("check tile 0") && rep.contains("expected at"), "{rep}");
        }
    }

    #[test]
    fn kernel_sources_name_their_instruction() {
        for p in PROBES {
            let s = kernel_source(p);
            assert!(s.contains(p.ptx) && s.contains(p.kernel));
            assert_eq!(s.matches('{').count(), s.matches('}').count(), "{}", p.name);
        }
    }

    #[test]
    fn select_rejects_unknown_names() {
        assert_eq!(select(&[]).unwrap().len(), PROBES.len());
        assert!(select(&["nope".into()]).is_err());
        assert_eq!(select(&["wgmma.m64n8k16.bf16".into()]).unwrap()[0].rows, 64);
    }
}
