//! Probe case generation (see "Cases" in the module documentation): codes
//! of the instruction's element type drawn per tile class and C class, the
//! layout self-check tiles, and the CPU model's output of every case.

use super::*;

/// Codes of an element type drawn directly from its parameters (the
/// format's [`MiniFloat`]; nothing about the type is restated here).
trait Draw {
    fn sign(&self) -> u16;
    fn mant_mask(&self) -> u32;
    fn code(&self, neg: bool, field: u32, mant: u32) -> u16;
    fn normal(&self, r: &mut SplitMix64, neg: bool, e: i32) -> u16;
    fn subnormal(&self, r: &mut SplitMix64, neg: bool) -> u16;
    fn nan(&self, r: &mut SplitMix64) -> u16;
    fn inf(&self, neg: bool) -> u16;
    fn wide(&self) -> (i32, i32);
}

impl Draw for MiniFloat {
    fn sign(&self) -> u16 {
        self.sign_mask()
    }
    fn mant_mask(&self) -> u32 {
        (1 << self.mbits) - 1
    }
    /// The code with this sign, biased exponent field and mantissa; a code
    /// that would be NaN (S.1111.111 in e4m3) steps one down to the maximum.
    fn code(&self, neg: bool, field: u32, mant: u32) -> u16 {
        let c = (if neg { self.sign() } else { 0 }) | ((field << self.mbits) | (mant & self.mant_mask())) as u16;
        if self.is_nan_code(c) {
            c - 1
        } else {
            c
        }
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
    /// A NaN code: random sign, and with IEEE specials a random nonzero
    /// mantissa under the all-ones exponent.
    fn nan(&self, r: &mut SplitMix64) -> u16 {
        let neg = r.chance(1, 2);
        let s = if neg { self.sign() } else { 0 };
        match self.inf_mag() {
            Some(inf) => s | inf | (r.next_u32() & self.mant_mask()).max(1) as u16,
            None => s | self.nan_mag().expect("a probed type has NaN"),
        }
    }
    fn inf(&self, neg: bool) -> u16 {
        (if neg { self.sign() } else { 0 }) | self.inf_mag().expect("only types with Inf draw it")
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
pub(super) fn decode_table(f: Format) -> Vec<f32> {
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

/// The cancel class: pairs (p, p + d) of K positions made to cancel
/// exactly (a negated, b equal), nearly (b one code up) or freely (a small
/// exponent, truncated next to the large M).
fn cancel_pairs(
    r: &mut SplitMix64,
    ty: MiniFloat,
    table: &[f32],
    (a, b): (&mut [u16], &mut [u16]),
    (rows, k): (usize, usize),
    ca: i32,
) {
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
                    let ok = up < table.len() && table[up].is_finite() && (up as u16 & ty.sign()) == (base & ty.sign());
                    b[n * k + q] = if ok { up as u16 } else { base };
                }
            }
            _ => {
                let shift = r.range_i64(1, 14) as i32;
                for row in 0..rows {
                    let neg = r.chance(1, 2);
                    a[row * k + q] = ty.normal(r, neg, ca - shift);
                }
            }
        }
    }
}

/// The special class: about one code in 40 of A and B replaced by NaN,
/// +-Inf (where the type has it) or +-0.
fn specials(r: &mut SplitMix64, ty: MiniFloat, a: &mut [u16], b: &mut [u16]) {
    for x in a.iter_mut().chain(b.iter_mut()) {
        if r.chance(1, 40) {
            *x = match r.below(10) {
                0..=2 => ty.nan(r),
                3..=7 if ty.inf_mag().is_some() => ty.inf(r.chance(1, 2)),
                _ => ty.code(r.chance(1, 2), 0, 0),
            };
        }
    }
}

/// One case's C: its class drawn (special and overflow tiles add their
/// own; a cancel C needs a normal dot product), then its value, from the
/// case's exact dot product `dot` and largest product exponent `pmax`.
fn c_value(r: &mut SplitMix64, class: u8, dot: f64, pmax: i32) -> (f32, u8) {
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
            f32_with(r, neg, e)
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
            f32_with(r, neg, e)
        }
        C_HUGE => {
            let e = r.range_i64(120, 127) as i32;
            f32_with(r, neg, e)
        }
        _ => match r.below(4) {
            0 => f32::INFINITY,
            1 => f32::NEG_INFINITY,
            _ => f32::from_bits(0x7F80_0000 | (if neg { 1u32 << 31 } else { 0 }) | (r.next_u32() & 0x7F_FFFF).max(1)),
        },
    };
    (v, cls)
}

fn gen_tile(spec: &ProbeSpec, ty: MiniFloat, table: &[f32], seed: u64, tile: usize) -> Tile {
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
        cancel_pairs(&mut r, ty, table, (&mut a, &mut b), (rows, k), ca);
    }
    if class == T_SPECIAL {
        specials(&mut r, ty, &mut a, &mut b);
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
            let (v, cls) = c_value(&mut r, class, dot, pmax);
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
        let ty = spec.params();
        let table = decode_table(spec.format());
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
        let ty = spec.params();
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
