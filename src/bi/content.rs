//! Content classes: how the checker's input values are drawn (the case
//! file's `content` object; `mxbi fuzz` draws and shrinks them).
//!
//! # Contract
//! - [`Content::default`] is class `separating` (docs/BI.md, "Power"): a
//!   case without `content` draws it. [`Content::plain`] (class `plain`, no
//!   simplification) draws exactly the values the checker drew before
//!   `separating` existed.
//! - Every value is exactly representable in the input type (drawn as that
//!   type's bits, then widened), so any subject reading that type sees the
//!   value itself. Classes: `plain` (exponents within +-8 of 1),
//!   `wide-exponents` (the type's range, at most +-60 so products stay
//!   finite in f32), `cancellation` (A's odd entries are the negated even
//!   ones with their low significand bits redrawn within `mant_bits`, B's
//!   odd rows copy the even rows: pairs of products nearly cancel),
//!   `subnormals` (a third of
//!   the values subnormal, a third at the bottom of the normal range),
//!   `specials` (about one value in 32 is +-0, +-Inf, NaN or +-max; Inf
//!   becomes max in a type without Inf), `k-scaled` (every 32-element block
//!   along K carries its own power of two, one per block for all of A and
//!   one for all of B, as MX scales varying along K).
//! - Simplifications, each a function of the seed and the row id only:
//!   `nonzero` (each row of A keeps that many non-zero entries, at
//!   positions drawn per row; the rest +0), `exp_span` (exponents within
//!   +-span of 1, capped by the class), `mant_bits` (significand bits kept
//!   below the leading one; 0: powers of two).

use super::others::Others;
use super::separating::Separating;
use crate::order::InType;
use crate::rng::SplitMix64;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A content class (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ContentClass {
    Plain,
    KScaled,
    WideExponents,
    Cancellation,
    Subnormals,
    Specials,
    /// Inputs built to separate accumulation orders in narrow outputs
    /// (`bi::separating`; docs/BI.md, "Power"): the checker's default.
    #[default]
    Separating,
}

impl ContentClass {
    /// Simplest first (the order shrinking prefers).
    pub const ALL: [ContentClass; 7] = [
        ContentClass::Plain,
        ContentClass::KScaled,
        ContentClass::WideExponents,
        ContentClass::Cancellation,
        ContentClass::Subnormals,
        ContentClass::Specials,
        ContentClass::Separating,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            ContentClass::Plain => "plain",
            ContentClass::KScaled => "k-scaled",
            ContentClass::WideExponents => "wide-exponents",
            ContentClass::Cancellation => "cancellation",
            ContentClass::Subnormals => "subnormals",
            ContentClass::Specials => "specials",
            ContentClass::Separating => "separating",
        }
    }
}

impl std::str::FromStr for ContentClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ContentClass::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| {
            format!(
                "unknown content class '{s}'; expected one of: {}",
                ContentClass::ALL.map(|c| c.name()).join(", ")
            )
        })
    }
}

/// How input values are drawn (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Content {
    /// The content class (default "separating").
    #[serde(default)]
    pub class: ContentClass,
    /// Non-zero entries kept per row of A (default: every entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonzero: Option<usize>,
    /// Exponents within +-exp_span of 1 (default: the class's own range).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp_span: Option<u32>,
    /// Significand bits kept below the leading one (0: powers of two;
    /// default: all of the type's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mant_bits: Option<u32>,
    /// What the rows other than the target hold (default "drawn"; `bi::others`).
    #[serde(default, skip_serializing_if = "Others::is_drawn")]
    pub others: Others,
}

/// Largest `exp_span` and `mant_bits` a content may ask for.
pub const MAX_EXP_SPAN: u32 = 127;
pub const MAX_MANT_BITS: u32 = 23;

impl Content {
    /// This content as the content class draws it: `others` set back to
    /// `drawn` (what [`super::Rows`] draws a row from before `others`
    /// applies).
    pub fn drawing(&self) -> Content {
        Content {
            others: Others::Drawn,
            ..*self
        }
    }
}

impl Content {
    /// Checks the bounds (one line naming the field).
    pub fn validate(&self) -> Result<(), String> {
        if let Some(s) = self.exp_span.filter(|&s| s > MAX_EXP_SPAN) {
            return Err(format!("content.exp_span = {s} exceeds {MAX_EXP_SPAN}"));
        }
        if let Some(b) = self.mant_bits.filter(|&b| b > MAX_MANT_BITS) {
            return Err(format!("content.mant_bits = {b} exceeds {MAX_MANT_BITS}"));
        }
        Ok(())
    }

    /// The plain drawing with no simplification (the checker's drawing
    /// before `separating` became the default; accuracy inputs).
    pub fn plain() -> Content {
        Content {
            class: ContentClass::Plain,
            ..Content::default()
        }
    }

    /// Whether this is [`Content::plain`].
    pub fn is_plain(&self) -> bool {
        *self == Content::plain()
    }

    /// One line: `wide-exponents, 3 non-zero per row, exponents +-2, 0 significand bits`.
    pub fn describe(&self) -> String {
        let mut s = self.class.name().to_string();
        if let Some(nz) = self.nonzero {
            s.push_str(&format!(", {nz} non-zero per row"));
        }
        if let Some(e) = self.exp_span {
            s.push_str(&format!(", exponents +-{e}"));
        }
        if let Some(b) = self.mant_bits {
            s.push_str(&format!(", {b} significand bits"));
        }
        if !self.others.is_drawn() {
            s.push_str(&format!(", others {}", self.others.name()));
        }
        s
    }
}

/// The bit layout of an input type.
#[derive(Clone, Copy)]
struct Layout {
    ebits: u32,
    mbits: u32,
    bias: i32,
    ty: InType,
}

impl Layout {
    fn of(ty: InType) -> Layout {
        match ty.params() {
            Some(p) => Layout {
                ebits: p.ebits,
                mbits: p.mbits,
                bias: p.bias,
                ty,
            },
            None => Layout {
                ebits: 8,
                mbits: 23,
                bias: 127,
                ty,
            },
        }
    }

    fn decode(&self, code: u32) -> f32 {
        match self.ty.format() {
            Some(f) => f.decode_f32(code as u16),
            None => f32::from_bits(code),
        }
    }

    fn code(&self, sign: bool, biased: u32, mant: u32) -> u32 {
        (sign as u32) << (self.ebits + self.mbits) | biased << self.mbits | mant
    }

    /// The largest finite value of the type, with a sign.
    fn max(&self, sign: bool) -> f32 {
        let m = self.ty.format().map_or(f32::MAX, |f| f.max_value() as f32);
        if sign {
            -m
        } else {
            m
        }
    }
}

/// Draws the values of one content (see the module doc).
pub(super) struct Drawer {
    content: Content,
    lay: Layout,
    seed: u64,
    k: usize,
}

impl Drawer {
    pub(super) fn new(content: Content, ty: InType, seed: u64, k: usize) -> Drawer {
        Drawer {
            content,
            lay: Layout::of(ty),
            seed,
            k,
        }
    }

    /// The exponent half-width of the class, capped by `exp_span`.
    fn span(&self) -> i32 {
        let own = match self.content.class {
            ContentClass::WideExponents => (self.lay.bias - 1).min(60),
            ContentClass::Cancellation => 12,
            ContentClass::KScaled => 4,
            _ => 8,
        };
        self.content.exp_span.map_or(own, |s| own.min(s as i32))
    }

    /// A normal value with unbiased exponent in `[lo, hi]` (clamped to the
    /// type's normal range), random sign and significand (masked to
    /// `mant_bits`); never Inf or NaN.
    fn normal(&self, r: &mut SplitMix64, lo: i32, hi: i32) -> f32 {
        let l = self.lay;
        let all_ones = (1u32 << l.ebits) - 1;
        // the top exponent is finite only in types without Inf (E4M3)
        let top = if l.decode(l.code(false, all_ones, 0)).is_finite() {
            all_ones as i32
        } else {
            all_ones as i32 - 1
        };
        loop {
            let e = r.range_i64(lo as i64, hi.max(lo) as i64) as i32;
            let biased = (e + l.bias).clamp(1, top) as u32;
            let mant = self.mask(r.next_u32() & ((1u32 << l.mbits) - 1));
            let v = l.decode(l.code(r.next_u32() & 1 == 1, biased, mant));
            if v.is_finite() {
                return v;
            }
        }
    }

    fn mask(&self, mant: u32) -> u32 {
        match self.content.mant_bits {
            Some(b) if b < self.lay.mbits => mant & !((1u32 << (self.lay.mbits - b)) - 1),
            _ => mant,
        }
    }

    /// A subnormal of the type (non-zero significand).
    fn subnormal(&self, r: &mut SplitMix64) -> f32 {
        let l = self.lay;
        loop {
            let mant = self.mask(r.next_u32() & ((1u32 << l.mbits) - 1));
            if mant != 0 {
                return l.decode(l.code(r.next_u32() & 1 == 1, 0, mant));
            }
            if self.content.mant_bits == Some(0) {
                // no significand bit may be set: the largest subnormal's top bit
                return l.decode(l.code(r.next_u32() & 1 == 1, 0, 1 << (l.mbits - 1)));
            }
        }
    }

    /// The exponent offset of K-block `kb` for matrix `which` (k-scaled).
    fn block_offset(&self, which: u64, kb: usize) -> i32 {
        let mut r = SplitMix64::for_item(self.seed ^ 0x5CA1_E000 ^ which, kb as u64);
        let s = self.content.exp_span.map_or(12, |s| (s as i32).min(12));
        r.range_i64(-(s as i64), s as i64) as i32
    }

    /// Entry `kk` of a row or column drawn from `r`.
    fn value(&self, r: &mut SplitMix64, which: u64, kk: usize) -> f32 {
        let s = self.span();
        match self.content.class {
            // separating rows are drawn whole (`a_row`, `b`)
            ContentClass::Plain
            | ContentClass::WideExponents
            | ContentClass::Cancellation
            | ContentClass::Separating => self.normal(r, -s, s),
            ContentClass::KScaled => {
                let o = self.block_offset(which, kk / 32);
                self.normal(r, o - s, o + s)
            }
            ContentClass::Subnormals => {
                let emin = 1 - self.lay.bias;
                match r.below(3) {
                    0 => self.subnormal(r),
                    1 => self.normal(r, emin, emin + s.min(8)),
                    _ => self.normal(r, -s, s),
                }
            }
            ContentClass::Specials => {
                if r.chance(1, 32) {
                    let sign = r.next_u32() & 1 == 1;
                    let has_inf = self.lay.ty.format().is_none_or(|f| f.has_inf());
                    match r.below(4) {
                        0 => {
                            if sign {
                                -0.0
                            } else {
                                0.0
                            }
                        }
                        1 if has_inf => {
                            if sign {
                                f32::NEG_INFINITY
                            } else {
                                f32::INFINITY
                            }
                        }
                        2 => self.nan(),
                        _ => self.lay.max(sign),
                    }
                } else {
                    self.normal(r, -s, s)
                }
            }
        }
    }

    fn nan(&self) -> f32 {
        let l = self.lay;
        let all = (1u32 << (l.ebits + l.mbits)) - 1;
        l.decode(all)
    }

    /// Row `id` of A (`K` values).
    pub(super) fn a_row(&self, id: u64) -> Vec<f32> {
        let mut r = SplitMix64::for_item(self.seed ^ 0xA0A0_A0A0, id);
        let mut row: Vec<f32> = match self.content.class {
            ContentClass::Separating => self.separating().a_row(id),
            _ => (0..self.k).map(|kk| self.value(&mut r, 0, kk)).collect(),
        };
        if self.content.class == ContentClass::Cancellation {
            for kk in (1..self.k).step_by(2) {
                row[kk] = self.near_negation(row[kk - 1], &mut r);
            }
        }
        if let Some(nz) = self.content.nonzero.filter(|&nz| nz < self.k) {
            let mut r = SplitMix64::for_item(self.seed ^ 0x2E50_2E50, id);
            let mut idx: Vec<usize> = (0..self.k).collect();
            for i in 0..nz {
                let j = i + r.below((self.k - i) as u64) as usize;
                idx.swap(i, j);
            }
            let mut keep = vec![false; self.k];
            for &i in &idx[..nz] {
                keep[i] = true;
            }
            for (x, kept) in row.iter_mut().zip(keep) {
                if !kept {
                    *x = 0.0;
                }
            }
        }
        row
    }

    /// -x with its lowest significand bits redrawn (never Inf or NaN).
    fn near_negation(&self, x: f32, r: &mut SplitMix64) -> f32 {
        let l = self.lay;
        let code = match l.ty.format() {
            None => x.to_bits(),
            // x is a value of the type: its code is exact
            Some(f) => match crate::format::encode_f32(x, f, &crate::format::CastPolicy::ieee(f), 0) {
                Ok(c) => c as u32,
                Err(_) => return -x,
            },
        };
        let low = (l.mbits / 3).max(1);
        // the redrawn bits respect `mant_bits` (none with 0: exact negation)
        let flipped = code ^ (1 << (l.ebits + l.mbits)) ^ self.mask(r.next_u32() & ((1 << low) - 1));
        let v = l.decode(flipped);
        if v.is_finite() {
            v
        } else {
            -x
        }
    }

    /// The separating design of this seed, type and K.
    fn separating(&self) -> Separating {
        Separating::new(self.lay.ty, self.seed, self.k, self.content.mant_bits)
    }

    /// B, `[K, N]` row-major.
    pub(super) fn b(&self, n: usize) -> Vec<f32> {
        if self.content.class == ContentClass::Separating {
            return self.separating().b(n);
        }
        let mut b = Vec::with_capacity(self.k * n);
        for kk in 0..self.k {
            b.extend(self.b_row(kk, n));
        }
        b
    }

    /// Row `kk` of B (`N` values).
    fn b_row(&self, kk: usize, n: usize) -> Vec<f32> {
        let src = if self.content.class == ContentClass::Cancellation {
            kk & !1
        } else {
            kk
        };
        let mut r = SplitMix64::for_item(self.seed ^ 0xB0B0_B0B0, src as u64);
        (0..n).map(|_| self.value(&mut r, 1, kk)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_draws_representable_values() {
        for ty in InType::ALL {
            for class in ContentClass::ALL {
                for (nz, span, bits) in [(None, None, None), (Some(3), Some(2), Some(0))] {
                    let c = Content {
                        class,
                        nonzero: nz,
                        exp_span: span,
                        mant_bits: bits,
                        others: Others::Drawn,
                    };
                    let d = Drawer::new(c, ty, 9, 96);
                    let row = d.a_row(0);
                    assert_eq!(row.len(), 96);
                    if let Some(nz) = nz {
                        assert!(row.iter().filter(|v| **v != 0.0).count() <= nz, "{ty:?} {class:?}");
                    }
                    for v in row.iter().chain(d.b(7)[5 * 7..6 * 7].iter()) {
                        if let Some(f) = ty.format() {
                            if v.is_nan() {
                                continue;
                            }
                            let p = crate::format::CastPolicy::ieee(f);
                            let code = crate::format::encode_f32(*v, f, &p, 0).unwrap();
                            assert_eq!(f.decode_f32(code).to_bits(), v.to_bits(), "{ty:?} {class:?} {v}");
                        }
                        if class != ContentClass::Specials {
                            assert!(v.is_finite(), "{ty:?} {class:?} {v}");
                        }
                        if bits == Some(0) && v.is_normal() {
                            let m = v.abs() / 2f32.powi(v.abs().log2().floor() as i32);
                            assert_eq!(m, 1.0, "{ty:?} {class:?} {v}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn names_round_trip_and_bounds_are_checked() {
        for c in ContentClass::ALL {
            assert_eq!(c.name().parse::<ContentClass>(), Ok(c));
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.name()));
        }
        assert!(Content {
            mant_bits: Some(24),
            ..Content::default()
        }
        .validate()
        .unwrap_err()
        .contains("mant_bits"));
        assert_eq!(
            serde_json::to_string(&Content::default()).unwrap(),
            r#"{"class":"separating"}"#
        );
        assert_eq!(
            serde_json::to_string(&Content::plain()).unwrap(),
            r#"{"class":"plain"}"#
        );
    }
}
