//! MX block quantization against every oracle in `vectors/mx_cases.jsonl.gz`
//! (torchao HEAD and its contract, torchao 0.18.0, TransformerEngine's rule,
//! gfloat with f32 and f64 input), value by value: the scale byte and each
//! element code of every line.
//!
//! Three checks on every line:
//! * mxbi (array path, equal to the block path) against an independent
//!   reference quantizer written here from the definitions (exponent from
//!   f64 bits, elements by searching the oracle's own decode table);
//! * mxbi against the oracle, value by value;
//! * where they differ, a named predicate for a known oracle bug must
//!   explain the value: it models what the bug makes the oracle output there
//!   (the oracle must show exactly that), and derives, without mxbi, the
//!   value mxbi must output there. A predicate that matches a line where
//!   mxbi outputs anything else fails the test, whether or not mxbi agrees
//!   with the oracle.
//!
//! Excluded and compared counts are printed per oracle and per predicate.
//! The predicates are listed in reference/README.md.

#[path = "common/oracle_vectors.rs"]
mod oracle_vectors;

use mxbi::format::{encode_e8m0_f32, CastPreset, Format, Overflow};
use mxbi::mx::{quantize, quantize_block, AxisLayout, MxFormat, MxPolicy, MxPreset, NonFiniteBlock, ScaleMode};
use oracle_vectors::{hex_u32, lines, ValueTable};
use std::collections::BTreeMap;

/// An MX block: its E8M0 scale byte and element codes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Block {
    scale: u8,
    codes: Vec<u8>,
}

/// A line of `mx_cases` as read from the file.
#[derive(serde::Deserialize)]
struct MxCase {
    oracle: String,
    case: String,
    format: Option<String>,
    scale_mode: Option<String>,
    kind: Option<String>,
    input_f32: Vec<String>,
    scales: Option<Vec<String>>,
    codes: Option<Vec<String>>,
}

/// A block line: the oracle's output is `None` where the oracle raised.
struct MxLine {
    oracle: String,
    case: String,
    format: MxFormat,
    mode: ScaleMode,
    x: Vec<f32>,
    out: Option<Block>,
}

impl MxLine {
    fn has_nan(&self) -> bool {
        self.x.iter().any(|v| v.is_nan())
    }
    fn has_inf(&self) -> bool {
        self.x.iter().any(|v| v.is_infinite())
    }
    fn is_fp8(&self) -> bool {
        matches!(self.format, MxFormat::Fp8E4M3 | MxFormat::Fp8E5M2)
    }
    fn label(&self) -> String {
        format!("{} {} {} {}", self.oracle, self.case, self.format, self.mode.name())
    }
}

fn byte(h: &str) -> u8 {
    u8::from_str_radix(h, 16).unwrap()
}

fn mx_cases() -> Vec<MxCase> {
    lines("vectors/mx_cases.jsonl.gz")
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn block_lines() -> Vec<MxLine> {
    mx_cases()
        .into_iter()
        .filter(|c| c.kind.is_none())
        .map(|c| MxLine {
            format: c.format.as_deref().unwrap().parse().unwrap(),
            mode: c.scale_mode.as_deref().unwrap().parse().unwrap(),
            x: c.input_f32.iter().map(|h| f32::from_bits(hex_u32(h))).collect(),
            out: c.scales.as_ref().map(|s| Block {
                scale: byte(&s[0]),
                codes: c.codes.as_ref().unwrap().iter().map(|h| byte(h)).collect(),
            }),
            oracle: c.oracle,
            case: c.case,
        })
        .collect()
}

/// Which of our presets an MX oracle is.
fn mx_preset(oracle: &str) -> MxPreset {
    match oracle {
        "torchao-head-contract" | "torchao-head-36027d8" | "torchao-0.18.0" => MxPreset::Torchao,
        "te-rule" => MxPreset::Nvidia,
        "gfloat-f64in" | "gfloat" => MxPreset::Ocp,
        o => panic!("unknown MX oracle {o}"),
    }
}

// ---------------------------------------------------------------------------
// The independent reference quantizer.

/// What the reference needs of an element format, from the decode table and
/// the format's definition.
struct Elem {
    table: &'static ValueTable,
    /// Exponent of the largest finite value.
    emax: i32,
    /// Explicit mantissa bits (torchao's EVEN rounds amax to these).
    mbits: i32,
    /// The sign bit (the code of -0).
    sign: u8,
}

fn elem(f: MxFormat) -> Elem {
    let (name, mbits) = match f {
        MxFormat::Fp8E4M3 => ("e4m3", 3),
        MxFormat::Fp8E5M2 => ("e5m2", 2),
        MxFormat::Fp6E3M2 => ("e3m2", 2),
        MxFormat::Fp6E2M3 => ("e2m3", 3),
        MxFormat::Fp4E2M1 => ("e2m1", 1),
        MxFormat::Int8 => panic!("no MXINT8 vectors"),
    };
    let table = ValueTable::get(name);
    Elem {
        table,
        emax: floor_log2(table.max()),
        mbits,
        sign: table.code_of(-0.0).unwrap() as u8,
    }
}

impl Elem {
    fn code(&self, v: f64) -> u8 {
        self.table.code_of(v).unwrap() as u8
    }
    /// +-max for a sign.
    fn max_code(&self, negative: bool) -> u8 {
        self.code(if negative { -self.table.max() } else { self.table.max() })
    }
    /// x * 2^-e (exact in f64) rounded to nearest-even and clamped to
    /// +-max; +-Inf become +-max, NaN becomes `nan`.
    fn codes_at(&self, x: &[f32], e: i32, nan: u8) -> Vec<u8> {
        x.iter()
            .map(|&v| {
                if v.is_nan() {
                    nan
                } else if v.is_infinite() {
                    self.max_code(v < 0.0)
                } else {
                    self.table.rne_saturate(v as f64 * 2f64.powi(-e)) as u8
                }
            })
            .collect()
    }
}

/// floor(log2 v) for a positive finite v (every f32 is normal in f64).
fn floor_log2(v: f64) -> i32 {
    assert!(v > 0.0 && v.is_finite());
    ((v.to_bits() >> 52) & 0x7FF) as i32 - 1023
}

fn ceil_log2(v: f64) -> i32 {
    floor_log2(v) + (v.to_bits() & ((1 << 52) - 1) != 0) as i32
}

/// The element code every element of a NaN-scale block gets: FP8 0x7F (the
/// NaN torch's and NVIDIA's casts write); FP6/FP4 have no NaN: torchao
/// writes the code of 1.5 (its kernels' output for a NaN input), OCP and
/// mxbi's other presets 0.
fn nan_block_code(f: MxFormat, el: &Elem, torchao: bool) -> u8 {
    match f {
        MxFormat::Fp8E4M3 | MxFormat::Fp8E5M2 => 0x7F,
        _ if torchao => el.code(1.5),
        _ => 0,
    }
}

/// The block exponent for a finite amax under `mode`, or None for a NaN
/// scale. FLOOR and CEIL from the f64 exponent; EVEN rounds amax half-up to
/// `mbits` fraction bits first (torchao: a rounded amax of 2^128 is its f32
/// Inf, a NaN scale); RCEIL rounds `s = fl32(amax * fl32(1/max))` up to a
/// power of two (the definition TransformerEngine and torchao use). Below
/// 2^-127 the exponent clamps to -127 (byte 0x00).
fn ref_exponent(amax: f64, el: &Elem, mode: ScaleMode) -> Option<i32> {
    if amax == 0.0 {
        return Some(-127);
    }
    let e = match mode {
        ScaleMode::Floor => floor_log2(amax) - el.emax,
        ScaleMode::Ceil => ceil_log2(amax) - el.emax,
        ScaleMode::Even => {
            let fl = floor_log2(amax);
            let q = amax * 2f64.powi(-fl); // in [1, 2), exact
            let carry = (q * 2f64.powi(el.mbits) + 0.5).floor() >= 2f64.powi(el.mbits + 1);
            let r = fl + carry as i32;
            if r >= 128 {
                return None;
            }
            r - el.emax
        }
        ScaleMode::Rceil => {
            let rcp = (1.0 / el.table.max()) as f32;
            let s = amax as f32 * rcp;
            if s == 0.0 {
                -127
            } else {
                ceil_log2(s as f64)
            }
        }
    };
    (e <= 127).then_some(e.max(-127))
}

/// How the reference treats a block holding Inf or NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RefNonFinite {
    /// Scale 0xFF, every element the NaN-block code (OCP; torchao HEAD with
    /// its FP6/FP4 codes).
    NanBlock { torchao: bool },
    /// TransformerEngine: amax skips NaN; an Inf amax is scale 2^127 (0xFE);
    /// elements saturate, NaN elements are 0x7F.
    Saturate,
}

fn ref_nonfinite(preset: MxPreset) -> RefNonFinite {
    match preset {
        MxPreset::Torchao => RefNonFinite::NanBlock { torchao: true },
        MxPreset::Nvidia => RefNonFinite::Saturate,
        MxPreset::Ocp => RefNonFinite::NanBlock { torchao: false },
        MxPreset::Microxcaling => panic!("no microxcaling vectors"),
    }
}

/// The reference quantizer.
fn reference(x: &[f32], f: MxFormat, mode: ScaleMode, nf: RefNonFinite) -> Block {
    let el = elem(f);
    let nan = match nf {
        RefNonFinite::NanBlock { torchao } => nan_block_code(f, &el, torchao),
        RefNonFinite::Saturate => 0x7F,
    };
    let nan_block = Block {
        scale: 0xFF,
        codes: vec![nan; x.len()],
    };
    let (has_nan, has_inf) = (x.iter().any(|v| v.is_nan()), x.iter().any(|v| v.is_infinite()));
    match nf {
        RefNonFinite::NanBlock { .. } if has_nan || has_inf => return nan_block,
        RefNonFinite::Saturate if has_inf => {
            return Block {
                scale: 0xFE,
                codes: el.codes_at(x, 127, nan),
            }
        }
        _ => {}
    }
    let amax = x
        .iter()
        .filter(|v| !v.is_nan())
        .map(|v| v.abs() as f64)
        .fold(0.0, f64::max);
    match ref_exponent(amax, &el, mode) {
        None => nan_block,
        Some(e) => Block {
            scale: (e + 127) as u8,
            codes: el.codes_at(x, e, nan),
        },
    }
}

// ---------------------------------------------------------------------------
// Known oracle bugs.

/// A value of a block: the scale byte or element `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Pos {
    Scale,
    Elem(usize),
}

fn at(b: &Block, p: Pos) -> u8 {
    match p {
        Pos::Scale => b.scale,
        Pos::Elem(i) => b.codes[i],
    }
}

fn positions(n: usize) -> impl Iterator<Item = Pos> {
    std::iter::once(Pos::Scale).chain((0..n).map(Pos::Elem))
}

/// What a bug does to one value: the oracle outputs `bug` (None: the oracle
/// raised), while mxbi must output `correct`.
#[derive(Clone, Copy, Debug)]
struct Act {
    pos: Pos,
    bug: Option<u8>,
    correct: u8,
}

/// The acts of a bug whose whole-block output is `bug`, against the correct
/// block: the values where they differ.
fn block_acts(bug: &Block, correct: &Block) -> Vec<Act> {
    positions(bug.codes.len())
        .filter(|&p| at(bug, p) != at(correct, p))
        .map(|p| Act {
            pos: p,
            bug: Some(at(bug, p)),
            correct: at(correct, p),
        })
        .collect()
}

/// A known oracle bug. `acts` looks only at the line's input (never at
/// mxbi): where its trigger holds it returns what the bug makes the oracle
/// output and what the correct value is; the bug is on the line only if the
/// oracle shows exactly those values.
struct MxBug {
    name: &'static str,
    oracle: &'static str,
    acts: fn(&MxLine) -> Vec<Act>,
}

const MX_BUGS: &[MxBug] = &[
    MxBug {
        name: "torchao_018_scale_2^-127_applied_as_2^-126",
        oracle: "torchao-0.18.0",
        acts: torchao_018_tiny_scale,
    },
    MxBug {
        name: "torchao_018_rceil_scale_0x00_flushes",
        oracle: "torchao-0.18.0",
        acts: torchao_018_rceil_flush,
    },
    MxBug {
        name: "torchao_018_rceil_float_log2",
        oracle: "torchao-0.18.0",
        acts: torchao_018_rceil_log2,
    },
    MxBug {
        name: "torchao_018_inf_amax_read_as_2^128",
        oracle: "torchao-0.18.0",
        acts: torchao_018_inf_amax,
    },
    MxBug {
        name: "torchao_018_even_rounds_amax_to_inf",
        oracle: "torchao-0.18.0",
        acts: torchao_018_even_overflow,
    },
    MxBug {
        name: "torchao_018_rceil_inf_amax_gives_0xfe",
        oracle: "torchao-0.18.0",
        acts: torchao_018_rceil_inf,
    },
    MxBug {
        name: "torchao_018_nan_scale_divides_by_inf",
        oracle: "torchao-0.18.0",
        acts: torchao_018_nan_block,
    },
    MxBug {
        name: "gfloat_f32_log2_hazard",
        oracle: "gfloat",
        acts: gfloat_log2_hazard,
    },
    MxBug {
        name: "gfloat_inf_amax_scale_2^127",
        oracle: "gfloat*",
        acts: gfloat_inf_scale,
    },
    MxBug {
        name: "gfloat_inf_element_saturates",
        oracle: "gfloat*",
        acts: gfloat_inf_element,
    },
    MxBug {
        name: "gfloat_nan_code_has_sign_bit",
        oracle: "gfloat*",
        acts: gfloat_nan_sign,
    },
    MxBug {
        name: "gfloat_fp6_fp4_nan_raises",
        oracle: "gfloat*",
        acts: gfloat_nan_raises,
    },
];

fn applies(bug: &MxBug, oracle: &str) -> bool {
    match bug.oracle.strip_suffix('*') {
        Some(prefix) => oracle.starts_with(prefix),
        None => oracle == bug.oracle,
    }
}

/// The correct block of a torchao line (torchao HEAD's semantics, derived
/// by the reference quantizer).
fn torchao_correct(l: &MxLine) -> Block {
    reference(&l.x, l.format, l.mode, RefNonFinite::NanBlock { torchao: true })
}

/// torchao 0.18.0, FLOOR/CEIL/EVEN: byte 0x00 is stored for scale 2^-127,
/// but its f32 scale is clamped to F32_MIN_NORMAL (2^-126) before the
/// division, so the elements are x * 2^126. Correct: x * 2^127.
fn torchao_018_tiny_scale(l: &MxLine) -> Vec<Act> {
    let el = elem(l.format);
    let finite = !l.has_nan() && !l.has_inf();
    if !finite || l.mode == ScaleMode::Rceil || torchao_correct(l).scale != 0x00 {
        return vec![];
    }
    let correct = Block {
        scale: 0x00,
        codes: el.codes_at(&l.x, -127, 0),
    };
    let bug = Block {
        scale: 0x00,
        codes: el.codes_at(&l.x, -126, 0),
    };
    block_acts(&bug, &correct)
}

/// torchao 0.18.0's RCEIL on a finite block: `descale = fl32(amax / max)`,
/// exponent `clamp(ceil(log2(descale)), -127, 127)` with log2 in f32 (modelled
/// as the f32 nearest to the exact log2), and elements `x * rcp` clamped to
/// +-max, where `rcp` is 2^-E except for byte 0x00, where it is 1.0.
fn torchao_018_rceil_model(l: &MxLine) -> Block {
    let el = elem(l.format);
    let amax = l.x.iter().map(|v| v.abs()).fold(0.0f32, f32::max);
    let descale = amax / el.table.max() as f32;
    let e = if descale == 0.0 {
        -127
    } else {
        (((descale as f64).log2() as f32).ceil() as i32).clamp(-127, 127)
    };
    let codes = if e == -127 {
        el.codes_at(&l.x, 0, 0)
    } else {
        el.codes_at(&l.x, e, 0)
    };
    Block {
        scale: (e + 127) as u8,
        codes,
    }
}

/// torchao 0.18.0, RCEIL, scale byte 0x00 (correctly chosen): the elements
/// are multiplied by 1.0 instead of 2^127, which flushes them to zero.
fn torchao_018_rceil_flush(l: &MxLine) -> Vec<Act> {
    if l.mode != ScaleMode::Rceil || l.has_nan() || l.has_inf() {
        return vec![];
    }
    let (bug, correct) = (torchao_018_rceil_model(l), torchao_correct(l));
    if bug.scale != 0x00 || correct.scale != 0x00 {
        return vec![];
    }
    block_acts(&bug, &correct)
}

/// torchao 0.18.0, RCEIL: `ceil(log2(amax / max))` in f32 loses the part of
/// the logarithm below half an f32 ulp, so `amax = max * 2^k * (1 + 2^-23)`
/// gets a scale one too low (and saturates). Correct: the exact round-up.
fn torchao_018_rceil_log2(l: &MxLine) -> Vec<Act> {
    if l.mode != ScaleMode::Rceil || l.has_nan() || l.has_inf() {
        return vec![];
    }
    let (bug, correct) = (torchao_018_rceil_model(l), torchao_correct(l));
    if bug.scale == correct.scale {
        return vec![];
    }
    block_acts(&bug, &correct)
}

/// torchao 0.18.0 FLOOR/CEIL/EVEN on an amax whose bits have exponent field
/// 255: the exponent is read as 128, the byte is 255 - emax (never NaN), and
/// the elements are x / 2^(128 - emax) saturated (+-Inf -> +-max).
fn torchao_018_amax_2_128(l: &MxLine) -> Block {
    let el = elem(l.format);
    let e = 128 - el.emax;
    Block {
        scale: (e + 127) as u8,
        codes: el.codes_at(&l.x, e, 0),
    }
}

/// torchao 0.18.0 FLOOR/CEIL/EVEN, Inf in the block (no NaN): a finite
/// scale 255 - emax with saturated elements. Correct: NaN scale (0xFF) and
/// every element the NaN-block code.
fn torchao_018_inf_amax(l: &MxLine) -> Vec<Act> {
    if l.mode == ScaleMode::Rceil || l.has_nan() || !l.has_inf() {
        return vec![];
    }
    block_acts(&torchao_018_amax_2_128(l), &torchao_correct(l))
}

/// torchao 0.18.0 EVEN, finite block whose amax rounds up to 2^128 (its f32
/// bits become Inf's): the same finite scale 255 - emax as an Inf amax.
/// Correct (torchao HEAD): a NaN block.
fn torchao_018_even_overflow(l: &MxLine) -> Vec<Act> {
    if l.mode != ScaleMode::Even || l.has_nan() || l.has_inf() {
        return vec![];
    }
    let correct = torchao_correct(l);
    if correct.scale != 0xFF {
        return vec![];
    }
    block_acts(&torchao_018_amax_2_128(l), &correct)
}

/// torchao 0.18.0 RCEIL, Inf in the block (no NaN): descale Inf gives byte
/// 0xFE, elements x * 2^-127 clamped (+-Inf -> +-max). Correct: NaN block.
fn torchao_018_rceil_inf(l: &MxLine) -> Vec<Act> {
    if l.mode != ScaleMode::Rceil || l.has_nan() || !l.has_inf() {
        return vec![];
    }
    let el = elem(l.format);
    let bug = Block {
        scale: 0xFE,
        codes: el.codes_at(&l.x, 127, 0),
    };
    block_acts(&bug, &torchao_correct(l))
}

/// torchao 0.18.0 FLOOR/CEIL/EVEN, NaN in the block: the scale byte is
/// 0xFF (correct), but the elements are divided by its f32 value, +Inf: a
/// finite x gives +-0, a NaN stays NaN with its sign, and +-Inf / Inf is
/// x86's default NaN, which has the sign bit set; a NaN is written as the
/// NaN-block code with the sign bit of the NaN. Correct: every element the
/// (positive) NaN-block code.
fn torchao_018_nan_block(l: &MxLine) -> Vec<Act> {
    if l.mode == ScaleMode::Rceil || !l.has_nan() {
        return vec![];
    }
    let el = elem(l.format);
    let nan = nan_block_code(l.format, &el, true);
    let codes =
        l.x.iter()
            .map(|&v| {
                if v.is_nan() {
                    nan | if v.is_sign_negative() { el.sign } else { 0 }
                } else if v.is_infinite() {
                    nan | el.sign
                } else {
                    el.code(if v.is_sign_negative() { -0.0 } else { 0.0 })
                }
            })
            .collect();
    block_acts(&Block { scale: 0xFF, codes }, &torchao_correct(l))
}

/// The correct block of a gfloat line (OCP).
fn ocp_correct(l: &MxLine) -> Block {
    reference(&l.x, l.format, l.mode, RefNonFinite::NanBlock { torchao: false })
}

/// gfloat with f32 input: `floor(log2(amax))` in f32 (modelled as the f32
/// nearest to the exact log2) rounds amax a few ulp below 2^k up to k, so
/// the scale is one too high. Correct: the exponent from the bits.
fn gfloat_log2_hazard(l: &MxLine) -> Vec<Act> {
    if l.has_nan() || l.has_inf() {
        return vec![];
    }
    let el = elem(l.format);
    let amax = l.x.iter().map(|v| v.abs()).fold(0.0f32, f32::max);
    if amax == 0.0 {
        return vec![];
    }
    let e = ((((amax as f64).log2() as f32).floor() as i32) - el.emax).clamp(-127, 127);
    let bug = Block {
        scale: (e + 127) as u8,
        codes: el.codes_at(&l.x, e, 0),
    };
    let correct = ocp_correct(l);
    if bug.scale == correct.scale {
        return vec![];
    }
    block_acts(&bug, &correct)
}

/// gfloat, Inf in the block (no NaN): `clip(floor(log2(Inf)) - emax, -127,
/// 127)` gives scale 2^127 (0xFE). Correct (OCP): an Inf amax makes the
/// scale NaN (0xFF). (The block's finite elements are compared with mxbi at
/// gfloat's scale, see `compare_target`.)
fn gfloat_inf_scale(l: &MxLine) -> Vec<Act> {
    if l.has_nan() || !l.has_inf() {
        return vec![];
    }
    vec![Act {
        pos: Pos::Scale,
        bug: Some(0xFE),
        correct: 0xFF,
    }]
}

/// gfloat, Inf in the block (no NaN): encode_block saturates each +-Inf
/// element to +-max. Correct (OCP): elements of a NaN-scale block are NaN:
/// FP8 0x7F, and 0 for FP6/FP4, which have no NaN.
fn gfloat_inf_element(l: &MxLine) -> Vec<Act> {
    if l.has_nan() || !l.has_inf() {
        return vec![];
    }
    let el = elem(l.format);
    let nan = nan_block_code(l.format, &el, false);
    (0..l.x.len())
        .filter(|&i| l.x[i].is_infinite())
        .map(|i| Act {
            pos: Pos::Elem(i),
            bug: Some(el.max_code(l.x[i] < 0.0)),
            correct: nan,
        })
        .collect()
}

/// gfloat, NaN in an FP8 block: the scale is NaN (correct) and every element
/// becomes NaN (x / NaN), which gfloat encodes as 0xFF (sign bit always
/// set). Correct: both are NaN; the OCP preset writes 0x7F.
fn gfloat_nan_sign(l: &MxLine) -> Vec<Act> {
    if !l.has_nan() || !l.is_fp8() {
        return vec![];
    }
    (0..l.x.len())
        .map(|i| Act {
            pos: Pos::Elem(i),
            bug: Some(0xFF),
            correct: 0x7F,
        })
        .collect()
}

/// gfloat, NaN in an FP6/FP4 block: encoding NaN into a format without NaN
/// raises. Correct (OCP): scale 0xFF, elements 0 (no NaN code).
fn gfloat_nan_raises(l: &MxLine) -> Vec<Act> {
    if !l.has_nan() || l.is_fp8() {
        return vec![];
    }
    positions(l.x.len())
        .map(|p| Act {
            pos: p,
            bug: None,
            correct: if p == Pos::Scale { 0xFF } else { 0 },
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The comparison.

/// mxbi's output on a line, as the test runs it; tests of the test wrap it.
type Mxbi<'a> = &'a dyn Fn(&MxLine, &MxPolicy) -> Block;

fn mxbi_policy(l: &MxLine) -> MxPolicy {
    let mut p = mx_preset(&l.oracle).policy(l.format);
    p.scale_mode = l.mode;
    p
}

/// mxbi through the array entry point (its fast paths), checked equal to
/// the block entry point.
fn mxbi_quantize(l: &MxLine, p: &MxPolicy) -> Block {
    let layout = AxisLayout::new(&[1, l.x.len()], -1, l.x.len(), false).unwrap();
    let q = quantize(&l.x, &layout, l.format, p).unwrap();
    let b = Block {
        scale: q.scales[0],
        codes: q.codes,
    };
    let (s, codes) = quantize_block(&l.x, l.format, p).unwrap();
    assert_eq!(
        b,
        Block { scale: s, codes },
        "{}: array and block paths differ",
        l.label()
    );
    b
}

#[derive(Default)]
struct OracleStats {
    lines: usize,
    /// Lines whose every value equals mxbi's.
    lines_equal: usize,
    /// Values (scale byte or element code) equal to mxbi's.
    values_equal: usize,
    /// Of those: finite elements of gfloat Inf blocks, compared with mxbi at
    /// gfloat's scale.
    values_equal_at_oracle_scale: usize,
    /// Values excluded, per predicate.
    excluded: BTreeMap<&'static str, usize>,
    lines_excluded: BTreeMap<&'static str, usize>,
}

#[derive(Default)]
struct MxReport {
    per_oracle: BTreeMap<String, OracleStats>,
    /// Lines where mxbi and the reference quantizer differ.
    reference_differs: Vec<String>,
    /// Values that differ from the oracle with no predicate to explain them.
    unexplained: Vec<String>,
    /// Predicates that matched a line where mxbi is not the correct value.
    refused: Vec<String>,
}

impl MxReport {
    fn print(&self) {
        for (o, s) in &self.per_oracle {
            eprintln!(
                "{o}: {} lines ({} equal throughout); {} values equal{}; {} excluded",
                s.lines,
                s.lines_equal,
                s.values_equal,
                if s.values_equal_at_oracle_scale > 0 {
                    format!(
                        " (of which {} finite elements of Inf blocks at the oracle's scale)",
                        s.values_equal_at_oracle_scale
                    )
                } else {
                    String::new()
                },
                s.excluded.values().sum::<usize>()
            );
            for (name, n) in &s.excluded {
                eprintln!("    {name}: {n} values on {} lines", s.lines_excluded[name]);
            }
        }
        let lines: usize = self.per_oracle.values().map(|s| s.lines).sum();
        eprintln!("reference quantizer: {lines} lines checked against mxbi");
        for (what, v) in [
            ("mxbi differs from the reference quantizer", &self.reference_differs),
            ("unexplained mismatch", &self.unexplained),
            ("predicate matched but mxbi is not the correct value", &self.refused),
        ] {
            eprintln!("{what}: {}", v.len());
            for m in v.iter().take(10) {
                eprintln!("    {m}");
            }
        }
    }
}

/// What the oracle's values are compared with: mxbi's output, except for
/// gfloat blocks holding Inf (no NaN), whose finite elements are compared
/// with mxbi at gfloat's scale 2^127: the OCP preset with
/// `NonFiniteBlock::Saturate`, which chooses that scale for an Inf amax
/// (checked, and checked against the reference). Their scale and Inf
/// elements are the predicates' business.
fn compare_target(l: &MxLine, mxbi: Mxbi, own: &Block, report: &mut MxReport) -> Block {
    if !(l.oracle.starts_with("gfloat") && l.has_inf() && !l.has_nan()) {
        return own.clone();
    }
    let mut p = mxbi_policy(l);
    p.nonfinite = NonFiniteBlock::Saturate;
    let b = mxbi(l, &p);
    let want = reference(&l.x, l.format, l.mode, RefNonFinite::Saturate);
    if b != want || b.scale != 0xFE {
        report.reference_differs.push(format!(
            "{} (Saturate variant): mxbi {b:02x?}, reference {want:02x?}",
            l.label()
        ));
    }
    b
}

fn check_mx(lines: &[MxLine], mxbi: Mxbi) -> MxReport {
    let mut r = MxReport::default();
    for l in lines {
        let p = mxbi_policy(l);
        let got = mxbi(l, &p);
        let want = reference(&l.x, l.format, l.mode, ref_nonfinite(mx_preset(&l.oracle)));
        if got != want {
            r.reference_differs
                .push(format!("{}: mxbi {got:02x?}, reference {want:02x?}", l.label()));
        }
        let target = compare_target(l, mxbi, &got, &mut r);
        let oracle_at = |p: Pos| l.out.as_ref().map(|b| at(b, p));
        let mut explained = BTreeMap::<Pos, &'static str>::new();
        for bug in MX_BUGS.iter().filter(|b| applies(b, &l.oracle)) {
            let acts = (bug.acts)(l);
            if acts.is_empty()
                || !acts
                    .iter()
                    .all(|a| oracle_at(a.pos) == a.bug && a.bug != Some(a.correct))
            {
                continue;
            }
            for a in acts {
                if at(&got, a.pos) != a.correct {
                    r.refused.push(format!(
                        "{} on {} {:?}: mxbi {:#04x}, correct {:#04x}",
                        bug.name,
                        l.label(),
                        a.pos,
                        at(&got, a.pos),
                        a.correct
                    ));
                }
                explained.entry(a.pos).or_insert(bug.name);
            }
        }
        let s = r.per_oracle.entry(l.oracle.clone()).or_default();
        s.lines += 1;
        let mut line_equal = true;
        let mut names = std::collections::BTreeSet::new();
        for pos in positions(l.x.len()) {
            if let Some(name) = explained.get(&pos) {
                *s.excluded.entry(name).or_default() += 1;
                names.insert(*name);
                line_equal = false;
            } else if oracle_at(pos) == Some(at(&target, pos)) {
                s.values_equal += 1;
                s.values_equal_at_oracle_scale += (target != got && pos != Pos::Scale) as usize;
            } else {
                line_equal = false;
                r.unexplained.push(format!(
                    "{} {pos:?}: oracle {}, mxbi {:#04x}",
                    l.label(),
                    oracle_at(pos).map_or("raised".to_string(), |v| format!("{v:#04x}")),
                    at(&target, pos)
                ));
            }
        }
        for n in names {
            *s.lines_excluded.entry(n).or_default() += 1;
        }
        s.lines_equal += line_equal as usize;
    }
    r
}

#[test]
fn mx_blocks_match_every_oracle_value_by_value() {
    let lines = block_lines();
    let r = check_mx(&lines, &mxbi_quantize);
    r.print();
    let n = |o: &str| r.per_oracle.get(o).map_or(0, |s| s.lines);
    assert_eq!(n("torchao-head-contract"), 72);
    assert_eq!(n("torchao-0.18.0"), 10780);
    assert_eq!(n("torchao-head-36027d8"), 10780);
    assert_eq!(n("te-rule"), 1078);
    assert_eq!(n("gfloat"), 2695);
    assert_eq!(n("gfloat-f64in"), 2695);
    // oracles without known bugs: nothing excluded
    for o in ["torchao-head-contract", "torchao-head-36027d8", "te-rule"] {
        assert!(r.per_oracle[o].excluded.is_empty(), "{o}");
    }
    assert!(
        r.reference_differs.is_empty(),
        "mxbi differs from the reference quantizer"
    );
    assert!(r.refused.is_empty(), "a predicate matched where mxbi is wrong");
    assert!(
        r.unexplained.is_empty(),
        "{} unexplained MX mismatches",
        r.unexplained.len()
    );
}

#[test]
fn e8m0_rceil_scalar_cases_match_torchao_head_and_te() {
    let mut n = 0;
    for c in mx_cases()
        .iter()
        .filter(|c| c.kind.as_deref() == Some("f32_to_e8m0_rceil"))
    {
        let x = f32::from_bits(hex_u32(&c.input_f32[0]));
        let want = byte(&c.scales.as_ref().unwrap()[0]);
        // torchao HEAD: cvt.rp without satfinite (overflow/Inf -> 0xFF);
        // TE: cvt.rp.satfinite (-> 0xFE).
        let mut p = CastPreset::Nvidia.policy(Format::E8M0);
        if c.oracle == "torchao-head-contract" {
            p.overflow = Overflow::NonFinite;
        }
        assert_eq!(encode_e8m0_f32(x, &p, 0), want, "{} {} {x:e}", c.oracle, c.case);
        n += 1;
    }
    assert_eq!(n, 36);
}

// ---------------------------------------------------------------------------
// The comparison can fail: planted errors.

/// The torchao 0.18.0 and gfloat lines (every predicate acts on them).
fn buggy_oracle_lines() -> Vec<MxLine> {
    block_lines()
        .into_iter()
        .filter(|l| l.oracle == "torchao-0.18.0" || l.oracle.starts_with("gfloat"))
        .collect()
}

fn same_line(a: &MxLine, b: &MxLine) -> bool {
    a.oracle == b.oracle && a.case == b.case && a.format == b.format && a.mode == b.mode
}

/// If mxbi reproduced an oracle's bug, every predicate refuses the line:
/// with mxbi replaced by the oracle's own output (and, where the oracle
/// raised, by mxbi's output with its scale made finite), each of the
/// predicates reports mxbi as wrong, and the reference check does too.
#[test]
fn mx_predicates_refuse_mxbi_reproducing_the_oracle_bug() {
    let lines = buggy_oracle_lines();
    let as_oracle = |l: &MxLine, p: &MxPolicy| match &l.out {
        Some(b) => b.clone(),
        None => Block {
            scale: 0xFE,
            ..mxbi_quantize(l, p)
        },
    };
    let r = check_mx(&lines, &as_oracle);
    for bug in MX_BUGS {
        assert!(
            r.refused.iter().any(|m| m.starts_with(bug.name)),
            "{} did not refuse mxbi outputting the oracle's value",
            bug.name
        );
    }
    assert!(!r.reference_differs.is_empty());
    let honest = check_mx(&lines, &mxbi_quantize);
    assert!(honest.refused.is_empty() && honest.reference_differs.is_empty());
}

/// One element code of mxbi changed on a line where mxbi and torchao 0.18.0
/// agree throughout: exactly one unexplained mismatch, and the reference
/// check sees it too.
#[test]
fn mx_planted_mxbi_error_is_caught() {
    let lines = buggy_oracle_lines();
    let victim = lines
        .iter()
        .find(|l| {
            l.oracle == "torchao-0.18.0" && l.out.as_ref() == Some(&mxbi_quantize(l, &mxbi_policy(l))) && l.x[7] != 0.0
        })
        .unwrap();
    let planted = |l: &MxLine, p: &MxPolicy| {
        let mut b = mxbi_quantize(l, p);
        if same_line(l, victim) {
            b.codes[7] ^= 1;
        }
        b
    };
    let r = check_mx(&lines, &planted);
    assert_eq!(r.unexplained.len(), 1, "{:?}", r.unexplained);
    assert!(r.unexplained[0].contains("Elem(7)"));
    assert_eq!(r.reference_differs.len(), 1);
    assert!(r.refused.is_empty());
}

/// Oracle values changed in memory: on a line a torchao 0.18.0 predicate
/// explains, one excluded value set to neither the bug's nor the correct
/// value (the predicate no longer matches, so its values become
/// unexplained); on a gfloat Inf block, one finite element (compared, not
/// excluded: exactly one mismatch).
#[test]
fn mx_planted_oracle_errors_are_caught() {
    let mut lines = buggy_oracle_lines();
    let i = lines
        .iter()
        .position(|l| l.oracle == "torchao-0.18.0" && !torchao_018_tiny_scale(l).is_empty())
        .unwrap();
    let act = torchao_018_tiny_scale(&lines[i])[0];
    let Pos::Elem(k) = act.pos else {
        panic!("the tiny-scale bug acts on elements")
    };
    let wrong = (0..=255u8).find(|&c| Some(c) != act.bug && c != act.correct).unwrap();
    lines[i].out.as_mut().unwrap().codes[k] = wrong;
    let j = lines
        .iter()
        .position(|l| l.oracle == "gfloat" && l.has_inf() && !l.has_nan())
        .unwrap();
    let f = lines[j].x.iter().position(|v| v.is_finite()).unwrap();
    lines[j].out.as_mut().unwrap().codes[f] ^= 1;
    let r = check_mx(&lines, &mxbi_quantize);
    let on = |l: &MxLine| r.unexplained.iter().filter(|m| m.starts_with(&l.label())).count();
    assert!(on(&lines[i]) >= 1, "{:?}", r.unexplained);
    assert_eq!(on(&lines[j]), 1, "{:?}", r.unexplained);
    assert_eq!(r.unexplained.len(), on(&lines[i]) + on(&lines[j]));
    assert!(r.refused.is_empty() && r.reference_differs.is_empty());
}
