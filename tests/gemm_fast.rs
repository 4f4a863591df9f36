//! The fast GEMM kernels (`gemm::fast`) against the generic tree evaluator,
//! bit for bit, with every kernel instruction set this CPU runs.
//!
//! What is compared (the fast module's contract): `compute_isa` returns the
//! kernels' own values and the outputs they hand to the evaluator. The test
//! checks that the handed-off set is exactly the documented one (the NaN
//! outputs), that the evaluator gives NaN there too, and that every other
//! output is the evaluator's bit for bit (Inf included); whole problems the
//! kernels decline are listed in [`DECLINED`] and checked to be declined.
//!
//! Inputs: f32 values (wide exponent spread, subnormals, zeros of both
//! signs, exact cancellation, rare Inf/NaN) and MX operands (FP8, FP6, FP4
//! and INT8 elements, E8M0 scales near 1 or over the whole range, 2^-127,
//! 2^127, NaN scales, NaN/Inf element codes) under `scale=dequant`, `block`
//! and `fused`. Every family x key x scale combination either parses or is
//! listed in [`REJECTED`] with the parser's reason. Also: thread-count
//! determinism, row-only evaluation, tile-crossing shapes, and planted errors
//! that the comparison must catch.
//!
//! `PROPTEST_CASES=N` sets the property test's case count (default 1000).

use mxbi::format::{encode_f32, CastPolicy, Format};
use mxbi::gemm::fast::{compute_isa, gemm_isa, poison_scratch, Computed, Isa};
use mxbi::gemm::{gemm, gemm_generic, prepare, BLayout, Matrix, Problem, MX_BLOCK};
use mxbi::mx::MxFormat;
use mxbi::order::{Family, InType, Order};
use proptest::prelude::*;

/// The one test-case generator (src/rng.rs).
type Rng = mxbi::rng::SplitMix64;

/// f32 values for fma/muladd: exponents -40..40 (or -80..-60: subnormal
/// products and sums), subnormals, signed zeros, small integers (exact
/// cancellation); `special` allows a rare Inf/NaN.
fn values(n: usize, rng: &mut Rng, special: bool) -> Vec<f32> {
    let (lo, tiny) = if rng.below(4) == 0 { (80, true) } else { (40, false) };
    let mut v: Vec<f32> = (0..n)
        .map(|_| {
            let r = rng.next_u64();
            let sign = ((r >> 63) as u32) << 31;
            match r % 16 {
                0 => f32::from_bits(sign),
                1 => f32::from_bits(sign | (r >> 20) as u32 & 0x7F_FFFF),
                2..=4 => {
                    let x = ((r >> 8) % 7) as f32 - 3.0;
                    x * [1.0, 0.5, 0.25, 2.0][(r >> 30) as usize % 4] * if tiny { 2f32.powi(-70) } else { 1.0 }
                }
                _ => {
                    let e = ((r >> 24) % if tiny { 21 } else { 81 }) as u32 + 127 - lo;
                    f32::from_bits(sign | e << 23 | (r >> 32) as u32 & 0x7F_FFFF)
                }
            }
        })
        .collect();
    if special && n > 0 && rng.below(4) == 0 {
        let i = rng.below(n as u64) as usize;
        v[i] = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN][rng.below(4) as usize];
    }
    v
}

fn in_format(t: InType) -> Format {
    t.format().expect("no f32 in-type here")
}

/// Values exactly representable in `t`: random codes (full range), or
/// moderate exponents with occasional zeros and subnormals, or (bf16, f32)
/// tiny ones whose products and sums are f32 subnormals.
fn in_values(n: usize, t: InType, rng: &mut Rng, special: bool) -> Vec<f32> {
    let full = rng.below(3) == 0;
    let tiny = matches!(t, InType::Bf16 | InType::F32) && rng.below(3) == 0;
    let mut v: Vec<f32> = (0..n)
        .map(|_| {
            let r = rng.next_u64();
            if t == InType::F32 {
                let e = if tiny {
                    ((r >> 24) % 21) as u32 + 127 - 75
                } else {
                    ((r >> 24) % 61) as u32 + 127 - 30
                };
                return f32::from_bits(((r >> 63) as u32) << 31 | e << 23 | (r >> 32) as u32 & 0x7F_FFFF);
            }
            let f = in_format(t);
            if full {
                loop {
                    let c = (rng.next_u64() % f.code_count() as u64) as u16;
                    let x = f.decode_f32(c);
                    if x.is_finite() {
                        return x;
                    }
                }
            }
            let fi = match t {
                InType::Bf16 => 7,
                InType::F16 => 10,
                InType::E4M3 => 3,
                _ => 2,
            };
            let sign = if r >> 63 != 0 { -1.0 } else { 1.0 };
            let m = ((r >> 8) % (1 << fi)) as f64;
            let x = match r % 10 {
                0 => 0.0,
                1 => m * 2f64.powi(t.emin() - fi),
                _ => {
                    let e = ((r >> 20) % 15) as i32 - if tiny { 70 } else { 7 };
                    (2f64.powi(fi) + m) * 2f64.powi(e.max(t.emin()) - fi)
                }
            };
            (sign * x) as f32
        })
        .collect();
    if special && n > 0 && rng.below(5) == 0 {
        let i = rng.below(n as u64) as usize;
        v[i] = if t == InType::E4M3 {
            f32::NAN
        } else {
            [f32::INFINITY, -f32::INFINITY, f32::NAN][rng.below(3) as usize]
        };
    }
    v
}

/// Whether the step type `t` holds `v` exactly (what `gemm::prepare` checks
/// for mma orders).
fn representable(v: f32, t: InType) -> bool {
    let Some(f) = t.format() else { return true };
    if v.is_nan() {
        return f.has_nan();
    }
    match encode_f32(v, f, &CastPolicy::ieee(f), 0) {
        Ok(c) => f.decode_f32(c).to_bits() == v.to_bits(),
        Err(_) => false,
    }
}

/// The MX element formats whose every code (finite, Inf, NaN) an mma step of
/// type `t` reads exactly (`scale=block|fused` read element values).
fn element_formats_for(t: InType) -> Vec<MxFormat> {
    MxFormat::ALL
        .into_iter()
        .filter(|f| {
            let e = f.element();
            (0..e.code_count()).all(|c| representable(e.decode_f32(c as u16), t))
        })
        .collect()
}

/// How the MX inputs are scaled (the order's `scale=` key), or plain f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scale {
    /// f32 values, no `scale` key.
    Plain,
    /// MX inputs, `scale=dequant`.
    Dequant,
    /// MX inputs, `scale=block`.
    Block,
    /// MX inputs, `scale=fused`.
    Fused,
}

const SCALES: [Scale; 4] = [Scale::Plain, Scale::Dequant, Scale::Block, Scale::Fused];

impl Scale {
    fn key(self) -> &'static str {
        match self {
            Scale::Plain => "",
            Scale::Dequant => ";scale=dequant",
            Scale::Block => ";scale=block",
            Scale::Fused => ";scale=fused",
        }
    }
}

const FAMILIES: &[&str] = &[
    "fma",
    "muladd",
    "hopper-bf16",
    "hopper-f16",
    "hopper-fp8-wgmma",
    "hopper-fp8-mma-sync",
    "ampere-bf16",
    "ada-fp8",
    "deepgemm-fp8",
    "mma(k=32,f=25,in=e4m3)",
    "mma(k=8,f=27,in=e5m2,c=late)",
    "mma(k=4,f=30,in=f32)",
    "mma(k=16,f=40,out=20,in=bf16,split=halves)",
];

const KEYS: &[&str] = &[
    "",
    ";split=3",
    ";split=2/interleave;ktile=8",
    ";split=3/interleave;ktile=32;reduce=pairwise",
    ";ktile=16;tile=fresh",
    ";ktile=1;tile=fresh;reduce=pairwise",
    ";split=2;ktile=32;tile=fresh;reduce=pairwise",
    ";split=5;reduce=pairwise",
    ";lanes=4",
    ";lanes=8;reduce=pairwise",
    ";lanes=3;reduce=serial",
    ";lanes=4;ktile=16;tile=fresh;reduce=serial",
    ";lanes=8;ktile=64;tile=fresh",
    ";out=bf16",
    ";out=f16",
    ";split=4;out=bf16",
    ";promote=64",
    ";promote=32;split=2",
    ";promote=32",
    ";promote=32;split=2/interleave;ktile=64;reduce=pairwise",
    ";promote=32;out=f16",
];

/// Keys that set `promote`.
const PROMOTE_KEYS: &[&str] = &[
    ";promote=64",
    ";promote=32;split=2",
    ";promote=32",
    ";promote=32;split=2/interleave;ktile=64;reduce=pairwise",
    ";promote=32;out=f16",
];

/// Keys that set `promote=32`.
const PROMOTE_32_KEYS: &[&str] = &[
    ";promote=32;split=2",
    ";promote=32",
    ";promote=32;split=2/interleave;ktile=64;reduce=pairwise",
    ";promote=32;out=f16",
];

/// The mma families, and those with k != 32.
const MMA_FAMILIES: &[&str] = &[
    "hopper-bf16",
    "hopper-f16",
    "hopper-fp8-wgmma",
    "hopper-fp8-mma-sync",
    "ampere-bf16",
    "ada-fp8",
    "deepgemm-fp8",
    "mma(k=32,f=25,in=e4m3)",
    "mma(k=8,f=27,in=e5m2,c=late)",
    "mma(k=4,f=30,in=f32)",
    "mma(k=16,f=40,out=20,in=bf16,split=halves)",
];
const MMA_K_NOT_32: &[&str] = &[
    "hopper-bf16",
    "hopper-f16",
    "ampere-bf16",
    "mma(k=8,f=27,in=e5m2,c=late)",
    "mma(k=4,f=30,in=f32)",
    "mma(k=16,f=40,out=20,in=bf16,split=halves)",
];

/// A set of table entries.
#[derive(Clone, Copy)]
enum Set<T: 'static> {
    All,
    Only(&'static [T]),
    AllBut(&'static [T]),
}

impl<T> Set<T> {
    fn has<U>(&self, x: &U) -> bool
    where
        T: PartialEq<U>,
    {
        match self {
            Set::All => true,
            Set::Only(s) => s.iter().any(|y| y == x),
            Set::AllBut(s) => !s.iter().any(|y| y == x),
        }
    }
}

/// One rule of a table: family x key x scale combinations, and why.
struct Rule {
    families: Set<&'static str>,
    keys: Set<&'static str>,
    scales: Set<Scale>,
    reason: &'static str,
}

impl Rule {
    fn matches(&self, fam: &str, key: &str, scale: Scale) -> bool {
        self.families.has(&fam) && self.keys.has(&key) && self.scales.has(&scale)
    }
}

/// The combinations the order parser rejects, with (a fragment of) its
/// message, in the order it checks them (the first matching rule is the
/// expected message). Every other combination must parse.
const REJECTED: &[Rule] = &[
    Rule {
        families: Set::Only(&["deepgemm-fp8"]),
        keys: Set::Only(PROMOTE_KEYS),
        scales: Set::All,
        reason: "key 'promote' is already set by preset 'deepgemm-fp8'", // promote=128
    },
    Rule {
        families: Set::Only(&["fma", "muladd"]),
        keys: Set::Only(PROMOTE_KEYS),
        scales: Set::All,
        reason: "promote applies to mma families only",
    },
    Rule {
        families: Set::Only(&["fma", "muladd"]),
        keys: Set::All,
        scales: Set::Only(&[Scale::Fused]),
        reason: "scale=fused applies to mma families only",
    },
    Rule {
        families: Set::Only(MMA_FAMILIES),
        keys: Set::AllBut(PROMOTE_32_KEYS),
        scales: Set::Only(&[Scale::Block]),
        reason: "scale=block with an mma family needs promote=32",
    },
    Rule {
        families: Set::Only(MMA_K_NOT_32),
        keys: Set::All,
        scales: Set::Only(&[Scale::Fused]),
        reason: "scale=fused needs mma k=32",
    },
];

/// The parsing combinations the fast kernels decline as a whole problem
/// (`compute_isa` and `gemm_isa` return None; `gemm` runs the evaluator), as
/// the fast module's contract lists. Every other parsing combination has a
/// fast path.
const DECLINED: &[Rule] = &[Rule {
    families: Set::Only(&["fma", "muladd"]),
    keys: Set::All,
    scales: Set::Only(&[Scale::Block]),
    reason: "scale=block with fma/muladd: exact block-dot terms, no kernel",
}];

fn spec(fam: usize, key: usize, scale: Scale) -> String {
    format!("{}{}{}", FAMILIES[fam], KEYS[key], scale.key())
}

fn first_rule(rules: &[Rule], fam: usize, key: usize, scale: Scale) -> Option<&Rule> {
    rules.iter().find(|r| r.matches(FAMILIES[fam], KEYS[key], scale))
}

/// Every combination that parses, with its order.
fn parsing() -> Vec<(usize, usize, Scale)> {
    let mut v = Vec::new();
    for fam in 0..FAMILIES.len() {
        for key in 0..KEYS.len() {
            for scale in SCALES {
                if first_rule(REJECTED, fam, key, scale).is_none() {
                    v.push((fam, key, scale));
                }
            }
        }
    }
    v
}

fn isas() -> Vec<Isa> {
    [Isa::Portable, Isa::Avx2, Isa::Avx512]
        .into_iter()
        .filter(|i| i.available())
        .collect()
}

enum Data {
    F32 {
        a: Vec<f32>,
        b: Vec<f32>,
    },
    Mx {
        a: Vec<u8>,
        sa: Vec<u8>,
        fa: MxFormat,
        b: Vec<u8>,
        sb: Vec<u8>,
        fb: MxFormat,
    },
}

struct Case {
    order: Order,
    data: Data,
    m: usize,
    n: usize,
    k: usize,
    layout: BLayout,
}

/// An MX operand `[rows, K]` (codes) with scales `[rows, K/32]`: codes over
/// the format's finite range (a tenth zeros), scales near 1, moderate, over
/// the whole range, or with the extremes; `special` allows a rare NaN/Inf code and a
/// rare NaN scale. With `step` (mma orders: the step's type, and whether
/// `scale=dequant`) every value the step reads is representable in its
/// type: under `dequant` the dequantized value (a block's scale is redrawn,
/// then 1.0, then the block zeroed), else the element value (a block is
/// zeroed otherwise).
fn mx_operand(
    rows: usize,
    k: usize,
    f: MxFormat,
    step: Option<(InType, bool)>,
    rng: &mut Rng,
    special: bool,
) -> (Vec<u8>, Vec<u8>) {
    let e = f.element();
    let kb = k / MX_BLOCK;
    let mut codes: Vec<u8> = (0..rows * k)
        .map(|_| loop {
            if rng.below(10) == 0 {
                return 0;
            }
            let c = rng.below(e.code_count() as u64) as u16;
            if e.decode_f32(c).is_finite() {
                return c as u8;
            }
        })
        .collect();
    // per operand: scales near 1 (half the operands), within 2^+-40, over
    // the whole range, or the extremes among ordinary ones
    let mode = [0, 0, 0, 0, 1, 1, 2, 3][rng.below(8) as usize];
    let draw = |rng: &mut Rng, mode: u64| -> u8 {
        match mode {
            0 => (127 + rng.below(13) as i64 - 6) as u8,
            1 => (127 + rng.below(81) as i64 - 40) as u8,
            2 => rng.below(255) as u8,
            _ => [0u8, 1, 0xFD, 0xFE, 120, 127, 134][rng.below(7) as usize],
        }
    };
    let mut scales: Vec<u8> = (0..rows * kb).map(|_| draw(rng, mode)).collect();
    if special && !codes.is_empty() {
        let specials: Vec<u16> = (0..e.code_count() as u16)
            .filter(|&c| !e.decode_f32(c).is_finite())
            .collect();
        if !specials.is_empty() && rng.below(3) == 0 {
            let i = rng.below(codes.len() as u64) as usize;
            codes[i] = specials[rng.below(specials.len() as u64) as usize] as u8;
        }
        if rng.below(4) == 0 {
            let i = rng.below(scales.len() as u64) as usize;
            scales[i] = 0xFF;
        }
    }
    let Some((t, dequant)) = step else {
        return (codes, scales);
    };
    let value = |c: u8, s: u8| -> f32 {
        if !dequant {
            e.decode_f32(c as u16)
        } else if s == 0xFF {
            f32::NAN
        } else {
            (e.decode_f64(c as u16) * 2f64.powi(s as i32 - 127)) as f32
        }
    };
    for r in 0..rows {
        for blk in 0..kb {
            let at = r * kb + blk;
            let range = r * k + blk * MX_BLOCK..r * k + (blk + 1) * MX_BLOCK;
            let fits = |codes: &[u8], s: u8| codes[range.clone()].iter().all(|&c| representable(value(c, s), t));
            let mut tries = 0;
            while !fits(&codes, scales[at]) {
                tries += 1;
                match tries {
                    1..=3 if dequant => scales[at] = draw(rng, 0),
                    4 if dequant => scales[at] = 127,
                    _ => codes[range.clone()].fill(0),
                }
            }
        }
    }
    (codes, scales)
}

/// `[rows, cols]` -> `[cols, rows]`.
fn transpose<T: Copy>(x: &[T], rows: usize, cols: usize) -> Vec<T> {
    (0..rows * cols).map(|i| x[(i % rows) * cols + i / rows]).collect()
}

impl Case {
    /// A random case: f32 values for `Scale::Plain`, else MX operands with K
    /// rounded up to whole MX blocks (and, for `scale=block` with mma and
    /// contiguous split parts, to parts of whole blocks).
    fn new(order: Order, scale: Scale, m: usize, n: usize, k: usize, seed: u64, special: bool) -> Case {
        let mut rng = Rng::new(seed);
        let layout = if rng.below(2) == 0 { BLayout::Kn } else { BLayout::Nk };
        if scale == Scale::Plain {
            let (a, b) = match order.mma() {
                Some(mm) => (
                    in_values(m * k, mm.input, &mut rng, special),
                    in_values(k * n, mm.input, &mut rng, special),
                ),
                None => (values(m * k, &mut rng, special), values(k * n, &mut rng, special)),
            };
            return Case {
                order,
                data: Data::F32 { a, b },
                m,
                n,
                k,
                layout,
            };
        }
        let mut kb = k.div_ceil(MX_BLOCK).max(1);
        if scale == Scale::Block && order.mma().is_some() && !order.interleave {
            kb = kb.next_multiple_of(order.split as usize);
        }
        let k = kb * MX_BLOCK;
        let step = order.mma().map(|mm| (mm.input, scale == Scale::Dequant));
        // mma orders read element values in the step's type: formats it holds
        let pick = |rng: &mut Rng| -> MxFormat {
            let fmts = match step {
                Some((t, _)) => element_formats_for(t),
                None => MxFormat::ALL.to_vec(),
            };
            fmts[rng.below(fmts.len() as u64) as usize]
        };
        let (fa, fb) = (pick(&mut rng), pick(&mut rng));
        let (a, sa) = mx_operand(m, k, fa, step, &mut rng, special);
        let (bt, sbt) = mx_operand(n, k, fb, step, &mut rng, special);
        let (b, sb) = match layout {
            BLayout::Nk => (bt, sbt),
            BLayout::Kn => (transpose(&bt, n, k), transpose(&sbt, n, kb)),
        };
        Case {
            order,
            data: Data::Mx { a, sa, fa, b, sb, fb },
            m,
            n,
            k,
            layout,
        }
    }

    fn problem(&self) -> Problem<'_> {
        let (a, b) = match &self.data {
            Data::F32 { a, b } => (Matrix::F32(a), Matrix::F32(b)),
            Data::Mx { a, sa, fa, b, sb, fb } => (
                Matrix::Mx {
                    codes: a,
                    scales: sa,
                    format: *fa,
                },
                Matrix::Mx {
                    codes: b,
                    scales: sb,
                    format: *fb,
                },
            ),
        };
        Problem {
            a,
            b,
            m: self.m,
            n: self.n,
            k: self.k,
            b_layout: self.layout,
        }
    }

    fn describe(&self) -> String {
        let inputs = match &self.data {
            Data::F32 { .. } => "f32".to_string(),
            Data::Mx { fa, fb, .. } => format!("{} x {}", fa.name(), fb.name()),
        };
        format!(
            "{} M={} N={} K={} {:?} {inputs}",
            self.order, self.m, self.n, self.k, self.layout
        )
    }
}

/// The fast kernels' `got` against the evaluator's `want` under the
/// contract: the handed-off set is exactly the NaN outputs, the evaluator
/// gives NaN there too, and every other output is bit for bit the same.
fn compare(got: &Computed, want: &[f32], n: usize) -> Result<(), String> {
    if got.values.len() != want.len() {
        return Err(format!("{} outputs, expected {}", got.values.len(), want.len()));
    }
    let nans: Vec<usize> = (0..want.len()).filter(|&x| got.values[x].is_nan()).collect();
    if got.handed_off != nans {
        let odd = got
            .handed_off
            .iter()
            .find(|x| !nans.contains(x))
            .or(nans.iter().find(|x| !got.handed_off.contains(x)));
        return Err(format!(
            "handed off {} outputs, {} are NaN (differ at {odd:?}): not the documented subset",
            got.handed_off.len(),
            nans.len()
        ));
    }
    for (x, (g, w)) in got.values.iter().zip(want).enumerate() {
        let ok = if g.is_nan() {
            w.is_nan()
        } else {
            g.to_bits() == w.to_bits()
        };
        if !ok {
            return Err(format!(
                "C[{}, {}] fast {g:e} ({:#010x}) generic {w:e} ({:#010x})",
                x / n,
                x % n,
                g.to_bits(),
                w.to_bits()
            ));
        }
    }
    Ok(())
}

/// Counts over the outputs checked.
#[derive(Default, Debug)]
struct Tally {
    /// Outputs the kernels computed, compared bit for bit.
    computed: usize,
    /// Of those, infinite.
    inf: usize,
    /// Outputs handed off (NaN), compared as NaN.
    handed_off: usize,
    /// Problems declined as a whole (per instruction set).
    declined: usize,
}

/// Checks the fast kernels on `case` (the selected rows, or all) with every
/// instruction set: declined exactly as [`DECLINED`] says, else [`compare`]
/// holds and the public result (after the hand-off) equals the evaluator's.
fn check(case: &Case, rows: Option<&[usize]>, declined: bool, tally: &mut Tally) {
    // packing buffers and direct outputs start as NaN: a read before a
    // write, or an output never stored, shows as a NaN the evaluator lacks
    poison_scratch(true);
    let p = case.problem();
    let what = case.describe();
    let want = gemm_generic(&case.order, &p, rows).unwrap_or_else(|e| panic!("{what}: {e}"));
    let prep = prepare(&case.order, &p).unwrap();
    let all: Vec<usize> = (0..case.m).collect();
    let rows = rows.unwrap_or(&all);
    for isa in isas() {
        let Some(got) = compute_isa(&case.order, &prep, rows, isa) else {
            assert!(declined, "{what} {isa:?}: no fast path");
            assert!(gemm_isa(&case.order, &prep, rows, isa).is_none(), "{what} {isa:?}");
            tally.declined += 1;
            continue;
        };
        assert!(!declined, "{what} {isa:?}: a fast path where the contract says none");
        if let Err(e) = compare(&got, &want, case.n) {
            panic!("{what} {isa:?}: {e}");
        }
        tally.handed_off += got.handed_off.len();
        tally.computed += got.values.len() - got.handed_off.len();
        tally.inf += got.values.iter().filter(|v| v.is_infinite()).count();
        let out = gemm_isa(&case.order, &prep, rows, isa).unwrap();
        assert!(
            out.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{what} {isa:?}: after the hand-off"
        );
    }
}

/// One parsing combination on a random case of about that shape.
fn run_combo(
    (fam, key, scale): (usize, usize, Scale),
    (m, n, k): (usize, usize, usize),
    seed: u64,
    special: bool,
) -> Tally {
    let s = spec(fam, key, scale);
    let order: Order = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
    let mut tally = Tally::default();
    let declined = first_rule(DECLINED, fam, key, scale).is_some();
    check(
        &Case::new(order, scale, m, n, k, seed, special),
        None,
        declined,
        &mut tally,
    );
    tally
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(1000), ..ProptestConfig::default() })]

    #[test]
    fn fast_equals_generic(
        (fam, key, scale) in prop::sample::select(parsing()),
        m in 1usize..9,
        n in 1usize..9,
        k in 1usize..300,
        seed in any::<u64>(),
        special in any::<bool>(),
    ) {
        run_combo((fam, key, scale), (m, n, k), seed, special);
    }
}

/// The table is exact: every combination it lists as rejected is rejected
/// with the listed reason, every other one parses, and no rule is dead.
#[test]
fn every_combination_parses_or_is_listed() {
    let mut used = vec![0usize; REJECTED.len()];
    let mut parsed = 0;
    for fam in 0..FAMILIES.len() {
        for key in 0..KEYS.len() {
            for scale in SCALES {
                let s = spec(fam, key, scale);
                match (first_rule(REJECTED, fam, key, scale), s.parse::<Order>()) {
                    (None, Ok(_)) => parsed += 1,
                    (None, Err(e)) => panic!("{s} is rejected but not listed: {e}"),
                    (Some(r), Ok(_)) => panic!("{s} parses but is listed as rejected ({})", r.reason),
                    (Some(r), Err(e)) => {
                        assert!(e.to_string().contains(r.reason), "{s}: '{e}' is not '{}'", r.reason);
                        used[REJECTED.iter().position(|x| std::ptr::eq(x, r)).unwrap()] += 1;
                    }
                }
            }
        }
    }
    let total = FAMILIES.len() * KEYS.len() * SCALES.len();
    println!("{parsed} of {total} family x key x scale combinations parse; rejected per rule:");
    for (r, u) in REJECTED.iter().zip(&used) {
        println!("  {u:4}  {}", r.reason);
        assert!(*u > 0, "rule '{}' matches nothing", r.reason);
    }
    assert_eq!(parsed, parsing().len());
    for r in DECLINED {
        assert!(
            parsing()
                .iter()
                .any(|&(f, k, s)| first_rule(DECLINED, f, k, s).is_some_and(|x| std::ptr::eq(x, r))),
            "declined rule '{}' matches nothing",
            r.reason
        );
    }
}

/// Every parsing combination on fixed shapes (with and without specials).
#[test]
fn every_combination_on_fixed_shapes() {
    let mut tallies: Vec<(Scale, bool, Tally)> = Vec::new();
    for (c, combo) in parsing().into_iter().enumerate() {
        let mma = MMA_FAMILIES.contains(&FAMILIES[combo.0]);
        let at = match tallies.iter().position(|(s, m, _)| *s == combo.2 && *m == mma) {
            Some(x) => x,
            None => {
                tallies.push((combo.2, mma, Tally::default()));
                tallies.len() - 1
            }
        };
        for (i, &shape) in [(1, 1, 1), (3, 5, 64), (5, 3, 100), (9, 17, 257), (2, 3, 0)]
            .iter()
            .enumerate()
        {
            let r = run_combo(combo, shape, (c * 10 + i) as u64, i % 2 == 1);
            let t = &mut tallies[at].2;
            t.computed += r.computed;
            t.inf += r.inf;
            t.handed_off += r.handed_off;
            t.declined += r.declined;
        }
    }
    println!("inputs, family: outputs computed by the kernels (Inf), handed off (NaN), problems declined");
    for (s, mma, t) in &tallies {
        let fam = if *mma { "mma" } else { "fma/muladd" };
        println!(
            "  {s:?}, {fam}: {} ({}), {}, {}",
            t.computed, t.inf, t.handed_off, t.declined
        );
        // the special values are exercised, not only finite outputs
        if t.declined == 0 {
            assert!(t.inf > 20 && t.handed_off > 20, "{s:?} {fam}: {t:?}");
        }
    }
}

/// A case with finite, Inf and NaN outputs: row 0 of A holds +Inf at k = 0
/// (column 3 of B is 0 there: Inf * 0), rows 1.. are finite.
fn planted_case(order: &str) -> Case {
    let (m, n, k) = (3, 4, 32);
    let mut a: Vec<f32> = (0..m * k).map(|i| ((i % 7) as f32 - 3.0) * 0.5).collect();
    let mut b: Vec<f32> = (0..k * n).map(|i| ((i % 5) as f32 - 2.0) * 0.25).collect();
    a[0] = f32::INFINITY;
    for (j, x) in b[..n].iter_mut().enumerate() {
        *x = if j == 3 { 0.0 } else { 1.0 + j as f32 };
    }
    Case {
        order: order.parse().unwrap(),
        data: Data::F32 { a, b },
        m,
        n,
        k,
        layout: BLayout::Kn,
    }
}

/// A planted error in the kernels' result or the evaluator's.
type Tamper<'a> = dyn Fn(&mut Computed, &mut Vec<f32>) + 'a;

/// The comparison catches planted errors: one bit of a computed output, an
/// Inf's sign, a NaN not handed off, a number handed off, a NaN where the
/// evaluator has a number.
#[test]
fn planted_errors_are_caught() {
    for s in ["fma", "muladd;split=2", "hopper-bf16", "ampere-bf16;out=bf16"] {
        let case = planted_case(s);
        let p = case.problem();
        let want = gemm_generic(&case.order, &p, None).unwrap();
        let prep = prepare(&case.order, &p).unwrap();
        for isa in isas() {
            let got = compute_isa(&case.order, &prep, &[0, 1, 2], isa).unwrap();
            compare(&got, &want, case.n).unwrap();
            let fin = (0..want.len()).find(|&x| got.values[x].is_finite() && got.values[x] != 0.0);
            let inf = (0..want.len()).find(|&x| got.values[x].is_infinite());
            let (fin, inf, nan) = (fin.unwrap(), inf.unwrap(), got.handed_off[0]);
            assert_eq!(nan, 3, "{s}: Inf * 0 at C[0, 3]");
            let tampered: [(&str, Box<Tamper<'_>>); 6] = [
                (
                    "low bit",
                    Box::new(|g, _| g.values[fin] = f32::from_bits(g.values[fin].to_bits() ^ 1)),
                ),
                ("Inf sign", Box::new(|g, _| g.values[inf] = -g.values[inf])),
                ("not handed off", Box::new(|g, _| g.handed_off.clear())),
                ("handed off a number", Box::new(|g, _| g.handed_off.insert(0, fin))),
                ("NaN made a number", Box::new(|g, _| g.values[nan] = 0.0)),
                ("evaluator's number", Box::new(|_, w| w[nan] = 1.0)),
            ];
            for (what, f) in tampered {
                let (mut g, mut w) = (got.clone(), want.clone());
                f(&mut g, &mut w);
                assert!(compare(&g, &w, case.n).is_err(), "{s} {isa:?}: {what} not caught");
            }
        }
    }
}

/// Shapes that cross the kernels' tiles: K blocks, column panels, row
/// panels, mma tiles; MX inputs in each scale mode.
#[test]
fn larger_shapes() {
    for (s, scale, m, n, k) in [
        ("fma", Scale::Plain, 37, 75, 600),
        ("muladd", Scale::Plain, 30, 40, 300),
        ("fma;split=3;reduce=pairwise", Scale::Plain, 29, 70, 530),
        ("fma;split=2/interleave;ktile=100", Scale::Plain, 25, 66, 520),
        ("fma;lanes=16", Scale::Plain, 13, 34, 400),
        // the cuBLAS GEMV tree: 16 lanes cut into fresh k-tiles of 512
        (
            "fma;lanes=16;ktile=512;tile=fresh;reduce=serial",
            Scale::Plain,
            3,
            70,
            4096,
        ),
        ("muladd;lanes=8;ktile=64;tile=fresh", Scale::Plain, 13, 34, 400),
        ("hopper-bf16", Scale::Plain, 37, 300, 100),
        ("hopper-fp8-mma-sync;split=2", Scale::Plain, 20, 270, 96),
        ("deepgemm-fp8", Scale::Plain, 17, 33, 300),
        ("mma(k=4,f=30,in=f32)", Scale::Plain, 19, 280, 40),
        // more than one row block: B packed once per part for all tiles
        // (row blocks of 96 rows), in K blocks of 2048 with AVX-512 (one
        // chain straight into C, and through the tile buffers)
        ("fma", Scale::Plain, 100, 64, 2100),
        ("muladd", Scale::Plain, 97, 40, 2070),
        ("fma", Scale::Plain, 100, 40, 300),
        ("fma", Scale::Plain, 400, 40, 300),
        ("fma", Scale::Plain, 785, 64, 260),
        // N a multiple of every ISA's panel width: one chain is written
        // straight into C (rows not a multiple of the register tile, one
        // and several row blocks, one row)
        ("fma", Scale::Plain, 101, 64, 300),
        ("muladd", Scale::Plain, 13, 96, 257),
        ("fma", Scale::Plain, 1, 32, 50),
        ("fma;out=bf16", Scale::Plain, 7, 64, 70),
        // K = 0: no chain, the plan is +0 alone
        ("fma", Scale::Plain, 3, 32, 0),
        ("muladd;split=2/interleave;ktile=16", Scale::Plain, 130, 33, 200),
        ("fma", Scale::Dequant, 40, 70, 320),
        ("hopper-bf16;split=2", Scale::Dequant, 20, 40, 256),
        ("mma(k=32,f=25,in=e4m3);scale=fused", Scale::Fused, 21, 270, 256),
        ("hopper-fp8-wgmma;scale=fused;split=2", Scale::Fused, 17, 40, 320),
        ("hopper-bf16;promote=32;scale=block", Scale::Block, 20, 50, 256),
        ("ada-fp8;promote=32;scale=block", Scale::Block, 18, 33, 192),
    ] {
        let order: Order = s.parse().unwrap();
        let declined = matches!(order.family, Family::Fma | Family::MulAdd) && scale == Scale::Block;
        for (seed, special) in [(m as u64 * 31 + k as u64, false), (n as u64, true)] {
            check(
                &Case::new(order, scale, m, n, k, seed, special),
                None,
                declined,
                &mut Tally::default(),
            );
        }
    }
}

#[test]
fn too_wide_for_the_integer_kernels_falls_back() {
    // F = 60 with f32 inputs: product terms need more than 64 bits
    let order: Order = "mma(k=4,f=60,in=f32)".parse().unwrap();
    let case = Case::new(order, Scale::Plain, 3, 4, 20, 5, false);
    let prep = prepare(&case.order, &case.problem()).unwrap();
    assert!(compute_isa(&case.order, &prep, &[0, 1, 2], Isa::Portable).is_none());
    check(&case, None, true, &mut Tally::default());
    // the public entry point still answers (generic evaluator)
    let p = case.problem();
    assert_eq!(
        gemm(&case.order, &p, None).unwrap(),
        gemm_generic(&case.order, &p, None).unwrap()
    );
}

#[test]
fn same_result_with_one_and_two_threads() {
    for (s, scale) in [
        ("fma", Scale::Plain),
        ("fma;split=4;reduce=pairwise", Scale::Plain),
        ("muladd;lanes=8", Scale::Plain),
        ("hopper-bf16", Scale::Plain),
        ("ampere-bf16;out=bf16", Scale::Plain),
        ("mma(k=32,f=25,in=e4m3);scale=fused", Scale::Fused),
    ] {
        let case = Case::new(s.parse().unwrap(), scale, 70, 90, 400, 77, true);
        let p = case.problem();
        let run = |t: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap();
            pool.install(|| gemm(&case.order, &p, None).unwrap())
        };
        let (one, two) = (run(1), run(2));
        assert!(one.iter().zip(&two).all(|(x, y)| x.to_bits() == y.to_bits()), "{s}");
        // and one row alone
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let row = pool.install(|| gemm(&case.order, &p, Some(&[33])).unwrap());
        assert!(
            row.iter()
                .zip(&one[33 * 90..34 * 90])
                .all(|(x, y)| x.to_bits() == y.to_bits()),
            "{s}"
        );
    }
}

#[test]
fn selected_rows_equal_rows_of_the_full_result() {
    for (s, scale) in [
        ("fma", Scale::Plain),
        ("muladd;split=3", Scale::Plain),
        ("fma;ktile=7;tile=fresh", Scale::Plain),
        ("hopper-bf16;split=2", Scale::Plain),
        ("ada-fp8;lanes=2", Scale::Plain),
        ("hopper-fp8-wgmma;scale=fused", Scale::Fused),
        ("hopper-bf16;promote=32;scale=block", Scale::Block),
    ] {
        let case = Case::new(s.parse().unwrap(), scale, 40, 50, 200, 3, true);
        let p = case.problem();
        let full = gemm(&case.order, &p, None).unwrap();
        for rows in [
            vec![0],
            vec![39],
            vec![5, 0],
            vec![7, 7, 1],
            (0..40).rev().collect::<Vec<_>>(),
            vec![3; 20],
        ] {
            let got = gemm(&case.order, &p, Some(&rows)).unwrap();
            for (r, &i) in rows.iter().enumerate() {
                let (g, w) = (&got[r * 50..(r + 1) * 50], &full[i * 50..(i + 1) * 50]);
                assert!(
                    g.iter().zip(w).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{s} rows {rows:?}: row {i}"
                );
            }
            check(&case, Some(&rows), false, &mut Tally::default());
        }
    }
}

fn f32_case(s: &str, a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Case {
    Case {
        order: s.parse().unwrap(),
        data: Data::F32 {
            a: a.to_vec(),
            b: b.to_vec(),
        },
        m,
        n,
        k,
        layout: BLayout::Kn,
    }
}

/// A step result below the smallest subnormal quantum is -0 under RZ; a
/// later step whose exact sum is zero gives +0 (an integer adder has no -0).
#[test]
fn negative_zero_from_underflow() {
    for (kk, tail) in [
        (16, [0f32, 0.0]),
        (48, [-0.0, 1.0]),
        (48, [0.0, -1.0]),
        (43, [0.0, 1.0]),
        (48, [1.0, 1.0]),
    ] {
        let (m, n) = (3, 4);
        let mut a = vec![0f32; m * kk];
        let mut b = vec![0f32; kk * n];
        for i in 0..m {
            // -2^-150: truncated at F = 25 below C's exponent -126 to -2 units of 2^-151
            a[i * kk] = -(2f32.powi(-90));
            for x in 16..kk {
                a[i * kk + x] = tail[0];
            }
        }
        for j in 0..n {
            b[j] = 2f32.powi(-60);
            for x in 16..kk {
                b[x * n + j] = if j == 3 { 0.0 } else { tail[1] };
            }
        }
        for s in [
            "hopper-bf16",
            "hopper-bf16;split=2;reduce=pairwise",
            "hopper-bf16;out=f16",
        ] {
            let case = f32_case(s, &a, &b, m, n, kk);
            check(&case, None, false, &mut Tally::default());
            let want = gemm_generic(&case.order, &case.problem(), None).unwrap();
            if s == "hopper-bf16" {
                assert_eq!(want[0].to_bits() == 0x8000_0000, kk == 16, "{kk} {tail:?}");
            }
        }
    }
}

/// Sums below 2^-126: the fused sum's result truncates onto the subnormal
/// grid (3 units of 2^-151 give 0, where rounding to nearest would give
/// 2^-149), and products of mixed signs cancel there.
#[test]
fn subnormal_sums_truncate() {
    let (m, n, kk) = (4, 16, 32);
    let mut a = vec![0f32; m * kk];
    let mut b = vec![0f32; kk * n];
    for i in 0..m {
        for x in 0..kk {
            let sign = if (x + i) % 3 == 0 { -1.0 } else { 1.0 };
            a[i * kk + x] = sign * (1.0 + ((i * kk + x) % 8) as f32 / 8.0) * 2f32.powi(-75 - (x % 5) as i32);
        }
    }
    for x in 0..kk {
        for j in 0..n {
            b[x * n + j] = (1.0 + ((x * 7 + j) % 16) as f32 / 16.0) * 2f32.powi(-74 - (j % 4) as i32);
        }
    }
    // one row: a single product of 0.75 * 2^-149 (3 units of 2^-151), C = 0
    a[..kk].fill(0.0);
    a[0] = 0.75 * 2f32.powi(-75);
    for s in ["hopper-bf16", "ampere-bf16", "hopper-bf16;out=bf16"] {
        let case = f32_case(s, &a, &b, m, n, kk);
        check(&case, None, false, &mut Tally::default());
        let want = gemm_generic(&case.order, &case.problem(), None).unwrap();
        let subnormal = want
            .iter()
            .filter(|v| **v != 0.0 && v.abs() < f32::MIN_POSITIVE)
            .count();
        // (out=bf16 keeps 7 bits below 2^-126: every sum here truncates to 0)
        assert!(
            subnormal >= n || s.ends_with("out=bf16"),
            "{s}: {subnormal} subnormal results"
        );
        if s == "hopper-bf16" {
            assert_eq!(want[0], 0.0, "3 units of 2^-151 truncate to 0");
        }
    }
}

/// Which kernel computes an order on each instruction set: the word-pair
/// kernel on AVX-512 where the significands fit words (a fallback that still
/// gives the right bytes would pass every other test here).
#[test]
fn kernels_chosen_by_type_and_instruction_set() {
    for (s, scale, avx512, other) in [
        ("hopper-bf16", Scale::Plain, "mma words", "mma i32"),
        ("hopper-f16;out=bf16", Scale::Plain, "mma words", "mma i32"),
        ("hopper-fp8-wgmma", Scale::Plain, "mma words", "mma i32"),
        (
            "mma(k=32,f=13,out=13,in=e4m3);scale=fused",
            Scale::Fused,
            "mma words",
            "mma i32",
        ),
        ("mma(k=32,f=25,in=e4m3);scale=fused", Scale::Fused, "mma i64", "mma i64"),
        ("mma(k=8,f=24,in=e5m2,c=late)", Scale::Plain, "mma words", "mma i32"),
        ("mma(k=8,f=27,in=e5m2,c=late)", Scale::Plain, "mma i64", "mma i64"),
        ("mma(k=64,f=13,out=13,in=e4m3)", Scale::Plain, "mma i32", "mma i32"),
        ("mma(k=4,f=30,in=f32)", Scale::Plain, "mma i64", "mma i64"),
        (
            "mma(k=16,f=40,out=20,in=bf16,split=halves)",
            Scale::Plain,
            "mma i64",
            "mma i64",
        ),
        ("fma", Scale::Plain, "fma", "fma"),
    ] {
        let order: Order = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
        let case = Case::new(order, scale, 5, 40, 64, 9, false);
        let p = case.problem();
        let prep = prepare(&case.order, &p).unwrap();
        let rows: Vec<usize> = (0..case.m).collect();
        for isa in isas() {
            let got = compute_isa(&case.order, &prep, &rows, isa).unwrap();
            let want = if isa == Isa::Avx512 { avx512 } else { other };
            assert_eq!(got.kernel, want, "{s} {isa:?}");
        }
    }
}

/// Nine largest-significand bf16 products at nominal exponent `e` (C = 0):
/// their exact sum is about 1.12 * 2^30 units of 2^(e - 25), so at e = 123
/// the result's leading bit is at 2^128 (inf) and at e = 122 at 2^127 (the
/// largest finite values), while no i32 sum overflows.
#[test]
fn sums_at_the_edge_of_the_range() {
    let top = 1.9921875f32; // 1.1111111b, the largest bf16 significand
    for (e, inf) in [(123, true), (122, false)] {
        let (m, n, kk) = (2, 16, 16);
        let mut a = vec![0f32; m * kk];
        let mut b = vec![0f32; kk * n];
        for x in 0..9 {
            a[x] = top * 2f32.powi(61);
            a[kk + x] = -top * 2f32.powi(61);
            for j in 0..n {
                b[x * n + j] = top * 2f32.powi(e - 61);
            }
        }
        for s in ["hopper-bf16", "hopper-bf16;out=bf16"] {
            let case = f32_case(s, &a, &b, m, n, kk);
            check(&case, None, false, &mut Tally::default());
            let want = gemm_generic(&case.order, &case.problem(), None).unwrap();
            assert_eq!(want[0].is_infinite(), inf, "{s} at {e}: {}", want[0]);
            assert_eq!(want[n], -want[0], "{s} at {e}");
        }
    }
}

/// Sixteen largest-significand products at the exponent of a large C: the
/// exact sum needs 32 bits (the i32 lanes' overflow path).
#[test]
fn fused_sum_beyond_32_bits() {
    let x = 1.9921875f32; // bf16 significand 0xFF
    for sign in [1.0f32, -1.0] {
        for c_sign in [1.0f32, -1.0] {
            let (m, n, k) = (2, 17, 32);
            let mut a = vec![0f32; m * k];
            let mut b = vec![0f32; k * n];
            for i in 0..m {
                for kk in 0..k {
                    a[i * k + kk] = if kk < 16 { c_sign * x } else { sign * x * 4.0 };
                }
            }
            for kk in 0..k {
                for j in 0..n {
                    b[kk * n + j] = if kk < 16 {
                        x
                    } else {
                        x * 8.0 * if j == 5 { 0.5 } else { 1.0 }
                    };
                }
            }
            for s in ["hopper-bf16", "hopper-bf16;out=bf16", "ampere-bf16"] {
                check(&f32_case(s, &a, &b, m, n, k), None, false, &mut Tally::default());
            }
        }
    }
}

/// Fused sums' specials computed by the kernels: an Inf product beside
/// finite ones, Inf times zero, Infs of both signs, a NaN scale (fused), an
/// Inf C from an earlier step meeting a finite or an opposite Inf product.
#[test]
fn fused_specials() {
    let (m, n, k) = (4, 5, 64);
    let mut a = vec![1f32; m * k];
    let mut b = vec![0.5f32; k * n];
    a[0] = f32::INFINITY; // row 0: Inf in the first step
    b[4] = 0.0; // column 4, k 0: Inf * 0 for row 0
    a[k + 40] = f32::NEG_INFINITY; // row 1: -Inf in the third step (k 32..48)
    a[2 * k] = f32::INFINITY; // row 2: +Inf at k 0 ...
    a[2 * k + 20] = f32::NEG_INFINITY; // ... then -Inf in the second step
    b[50 * n + 2] = f32::NAN; // column 2: NaN at k 50
    for s in [
        "hopper-bf16",
        "hopper-bf16;split=2;reduce=pairwise",
        "ampere-bf16",
        "mma(k=32,f=25,split=mod4,c=late,in=f16)",
        "mma(k=8,f=27,in=e5m2,c=late)",
        "hopper-bf16;promote=32",
        "hopper-bf16;out=bf16",
    ] {
        check(&f32_case(s, &a, &b, m, n, k), None, false, &mut Tally::default());
    }
}
