//! Reading the oracle vectors in `reference/`, and an element encoder that
//! does not use mxbi's: it rounds by searching the value table that gfloat
//! wrote into `vectors/decode.tsv` (checked code by code against ml_dtypes in
//! `tests/oracles.rs`). The exclusion predicates of the oracle tests derive
//! the value mxbi must output from it.
#![allow(dead_code)]

use flate2::read::GzDecoder;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::OnceLock;

pub fn path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("reference").join(rel)
}

fn reader(rel: &str) -> BufReader<Box<dyn Read>> {
    let f = std::fs::File::open(path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let r: Box<dyn Read> = if rel.ends_with(".gz") {
        Box::new(GzDecoder::new(f))
    } else {
        Box::new(f)
    };
    BufReader::new(r)
}

/// The non-empty, non-comment lines of a (possibly gzipped) vector file.
pub fn lines(rel: &str) -> Vec<String> {
    reader(rel)
        .lines()
        .map(|l| l.unwrap())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The comment lines that open a (possibly gzipped) vector file, without
/// their `# `: the oracles' releases and the command that wrote it.
pub fn header(rel: &str) -> Vec<String> {
    reader(rel)
        .lines()
        .map(|l| l.unwrap())
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim().to_string())
        .collect()
}

pub fn hex_u32(s: &str) -> u32 {
    u32::from_str_radix(s, 16).unwrap()
}

/// How the reference encoder breaks a tie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ties {
    /// To the even code (for every format here the even significand).
    Even,
    /// Away from zero.
    Away,
}

/// What the reference encoder gives for a finite value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefCode {
    Code(u16),
    /// Beyond the largest finite value after rounding (the caller applies
    /// the format's own overflow rule).
    Overflow {
        negative: bool,
    },
}

/// Every finite code of one narrow format (8 bits or fewer) with its value.
pub struct ValueTable {
    pub name: String,
    /// (value, code) sorted by value; zero appears once, as +0.
    finite: Vec<(f64, u16)>,
    /// The code of -0, where the format has one.
    neg_zero: Option<u16>,
    /// The smallest code that decodes to NaN, where there is one.
    pub nan: Option<u16>,
    /// The would-be value one step above the largest finite value (the
    /// overflow threshold of nearest rounding is the midpoint to it).
    next_above_max: f64,
}

impl ValueTable {
    /// The table of `format` (a decode.tsv name: e4m3 e5m2 e3m2 e2m3 e2m1
    /// e8m0 int8), from gfloat's column.
    pub fn get(format: &str) -> &'static ValueTable {
        static TABLES: OnceLock<HashMap<String, ValueTable>> = OnceLock::new();
        TABLES
            .get_or_init(|| {
                let mut rows: HashMap<String, Vec<(u16, Option<f64>)>> = HashMap::new();
                for l in lines("vectors/decode.tsv") {
                    let c: Vec<&str> = l.split('\t').collect();
                    if c[0] != "gfloat" || c[1] == "bf16" || c[1] == "f16" {
                        continue;
                    }
                    let code = u16::from_str_radix(c[2], 16).unwrap();
                    let v = (c[3] != "nan").then(|| f32::from_bits(hex_u32(c[3])) as f64);
                    rows.entry(c[1].to_string()).or_default().push((code, v));
                }
                rows.into_iter()
                    .map(|(k, v)| (k.clone(), ValueTable::new(k, v)))
                    .collect()
            })
            .get(format)
            .unwrap_or_else(|| panic!("no decode table for {format}"))
    }

    fn new(name: String, rows: Vec<(u16, Option<f64>)>) -> ValueTable {
        let nan = rows.iter().filter(|r| r.1.is_none()).map(|r| r.0).min();
        let mut neg_zero = None;
        let mut finite = Vec::new();
        for &(code, v) in &rows {
            match v {
                Some(v) if v.is_finite() => {
                    if v == 0.0 && v.is_sign_negative() {
                        neg_zero = Some(code);
                    } else {
                        finite.push((v, code));
                    }
                }
                _ => {}
            }
        }
        finite.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        assert!(finite.windows(2).all(|w| w[0].0 < w[1].0), "{name}: duplicate values");
        let n = finite.len();
        let (max, below) = (finite[n - 1].0, finite[n - 2].0);
        // powers of two (E8M0) step by doubling, the others by their top spacing
        let next_above_max = if name == "e8m0" { 2.0 * max } else { 2.0 * max - below };
        ValueTable {
            name,
            finite,
            neg_zero,
            nan,
            next_above_max,
        }
    }

    pub fn max(&self) -> f64 {
        self.finite.last().unwrap().0
    }

    /// The code of the finite value `v` (its sign picks between +-0).
    pub fn code_of(&self, v: f64) -> Option<u16> {
        if v == 0.0 && v.is_sign_negative() {
            return Some(self.neg_zero.unwrap_or(self.finite_code(0.0)?));
        }
        self.finite_code(v)
    }

    fn finite_code(&self, v: f64) -> Option<u16> {
        self.finite
            .binary_search_by(|p| p.0.partial_cmp(&v).unwrap())
            .ok()
            .map(|i| self.finite[i].1)
    }

    /// The value of a finite code.
    pub fn value_of(&self, code: u16) -> Option<f64> {
        if Some(code) == self.neg_zero {
            return Some(-0.0);
        }
        self.finite.iter().find(|p| p.1 == code).map(|p| p.0)
    }

    /// Round the finite `v` to nearest, by searching the table for the
    /// neighbours of `v`. Beyond the largest (smallest) value the neighbour
    /// is the would-be next value, so results past it are `Overflow`. A
    /// zero result keeps the sign of `v`.
    pub fn nearest(&self, v: f64, ties: Ties) -> RefCode {
        assert!(v.is_finite() && self.name != "e8m0", "{} {v:e}", self.name);
        let negative = v.is_sign_negative();
        let step = self.next_above_max - self.max();
        let n = self.finite.len();
        // neighbours as (value, code); None is the would-be code past the end
        let (lo, hi) = if v > self.max() {
            ((self.max(), Some(self.finite[n - 1].1)), (self.next_above_max, None))
        } else if v < self.finite[0].0 {
            (
                (self.finite[0].0 - step, None),
                (self.finite[0].0, Some(self.finite[0].1)),
            )
        } else {
            let i = self.finite.partition_point(|p| p.0 <= v);
            let lo = self.finite[i - 1];
            if lo.0 == v {
                return RefCode::Code(self.code_of(v).unwrap());
            }
            ((lo.0, Some(lo.1)), (self.finite[i].0, Some(self.finite[i].1)))
        };
        let (dl, dh) = (v - lo.0, hi.0 - v);
        let take_lo = if dl != dh {
            dl < dh
        } else if ties == Ties::Away {
            negative
        } else {
            // the even code; a would-be code past the end has the parity
            // opposite to its neighbour
            match (lo.1, hi.1) {
                (Some(c), _) => c & 1 == 0,
                (None, Some(c)) => c & 1 == 1,
                (None, None) => unreachable!(),
            }
        };
        let (value, code) = if take_lo { lo } else { hi };
        match code {
            None => RefCode::Overflow { negative },
            Some(_) if value == 0.0 => RefCode::Code(self.code_of(if negative { -0.0 } else { 0.0 }).unwrap()),
            Some(c) => RefCode::Code(c),
        }
    }

    /// Nearest-even, clamping to +-max: the MX element rule of OCP, torchao
    /// and TransformerEngine for finite values.
    pub fn rne_saturate(&self, v: f64) -> u16 {
        match self.nearest(v, Ties::Even) {
            RefCode::Code(c) => c,
            RefCode::Overflow { negative } => self.code_of(if negative { -self.max() } else { self.max() }).unwrap(),
        }
    }
}
