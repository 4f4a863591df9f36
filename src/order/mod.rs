//! Accumulation orders: a compact, canonical, round-trippable spelling of
//! how a GEMM accumulates one output element, and its compilation into a
//! reduction tree for a given K. The contract is docs/ORDERS.md.

mod render;
mod tree;

pub use tree::{Difference, Divergence, Node, NodeId, Tree};

use crate::format::{Format, MiniFloat};
use std::fmt;
use std::str::FromStr;

/// How one part of K is accumulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// `acc = RN(acc + a*b)` per k.
    Fma,
    /// `acc = RN(acc + RN(a*b))` per k.
    MulAdd,
    /// Chained tensor-core fused sums.
    Mma(Mma),
}

/// One tensor-core step: `k` products (plus C) per instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mma {
    pub k: u32,
    /// Fraction bits kept below the largest nominal exponent (truncated).
    pub f: u32,
    /// Fraction bits of each fused sum's result (RZ); 23 = f32.
    pub out: u32,
    pub split: MmaSplit,
    pub c: CMode,
    /// The input type the hardware step reads.
    pub input: InType,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaSplit {
    /// One fused sum over all k products.
    None,
    /// Two chained fused sums over the first and second halves.
    Halves,
    /// Two chained fused sums over positions p mod 4 in {0,1}, then {2,3}.
    Mod4,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CMode {
    /// C is a term of the (first) fused sum.
    Fused,
    /// Fused sums start from +0; the step result is RN(C + s).
    Late,
}

/// Types a tensor-core step can read; inputs must be exactly representable.
/// The subset of the element vocabulary ([`Format`]) that GEMM inputs use,
/// plus f32; every name and parameter is read from the format
/// ([`InType::format`] is the one mapping), none is restated here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InType {
    Bf16,
    F16,
    E4M3,
    E5M2,
    F32,
}

impl InType {
    pub const ALL: [InType; 5] = [InType::Bf16, InType::F16, InType::E4M3, InType::E5M2, InType::F32];

    /// The type named `name` (`bf16`, `f16`, `e4m3`, `e5m2`, `f32`).
    pub fn from_name(name: &str) -> Option<InType> {
        InType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The element format (None: f32, any f32 value).
    pub const fn format(self) -> Option<Format> {
        match self {
            InType::Bf16 => Some(Format::BF16),
            InType::F16 => Some(Format::F16),
            InType::E4M3 => Some(Format::E4M3),
            InType::E5M2 => Some(Format::E5M2),
            InType::F32 => None,
        }
    }

    /// The input type whose element format is `f` (None: a format GEMM
    /// inputs do not use); the inverse of [`InType::format`].
    pub fn of_format(f: Format) -> Option<InType> {
        InType::ALL.into_iter().find(|t| t.format() == Some(f))
    }

    /// The format's name (`f32` for f32).
    pub const fn name(self) -> &'static str {
        match self.format() {
            Some(f) => f.name(),
            None => "f32",
        }
    }

    /// The type's minifloat parameters (None: f32, whose parameters are
    /// the standard library's).
    pub const fn params(self) -> Option<MiniFloat> {
        match self.format() {
            Some(f) => f.minifloat(),
            None => None,
        }
    }

    /// Exponent given to zeros and subnormals in the fused-sum decomposition
    /// (the smallest normal exponent).
    pub const fn emin(self) -> i32 {
        match self.params() {
            Some(m) => m.emin(),
            None => f32::MIN_EXP - 1,
        }
    }

    /// Fraction (mantissa) bits of the type.
    pub const fn frac_bits(self) -> u32 {
        match self.params() {
            Some(m) => m.mbits,
            None => f32::MANTISSA_DIGITS - 1,
        }
    }

    /// Bytes of one code (4 for f32).
    pub const fn bytes(self) -> usize {
        match self.params() {
            Some(m) => (m.bits() / 8) as usize,
            None => std::mem::size_of::<f32>(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tile {
    Carry,
    Fresh,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduce {
    Serial,
    Pairwise,
    Butterfly,
}

/// Where MX block scales enter (MX inputs only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MxScale {
    Dequant,
    Block,
    Fused,
}

/// Final output conversion (RNE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutFmt {
    F32,
    Bf16,
    F16,
}

/// A parsed, validated order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Order {
    pub family: Family,
    pub ktile: Option<u32>,
    pub tile: Tile,
    pub split: u32,
    pub interleave: bool,
    /// Contiguous split parts start on multiples of this many k (`align`;
    /// docs/ORDERS.md "Parts"); None: parts of ceil(K/S).
    pub align: Option<u32>,
    pub lanes: u32,
    /// None: the default for the shape (serial; butterfly with lanes).
    pub reduce: Option<Reduce>,
    pub promote: Option<u32>,
    pub scale: MxScale,
    pub out: OutFmt,
}

impl Order {
    fn base(family: Family) -> Order {
        Order {
            family,
            ktile: None,
            tile: Tile::Carry,
            split: 1,
            interleave: false,
            align: None,
            lanes: 1,
            reduce: None,
            promote: None,
            scale: MxScale::Dequant,
            out: OutFmt::F32,
        }
    }

    /// The width of a contiguous split part over `k` terms (blocks for
    /// `scale=block`): `ceil(k / split)`, rounded up to a multiple of
    /// `align` (docs/ORDERS.md "Parts"). Part p holds `[p w, (p + 1) w)`
    /// clipped to k, so late parts may be short or empty. 0 for k = 0.
    pub fn split_chunk(&self, k: usize) -> usize {
        let w = k.div_ceil(self.split.max(1) as usize);
        match self.align {
            Some(a) => w.div_ceil(a as usize) * a as usize,
            None => w,
        }
    }

    /// The reduction actually used to combine parts.
    pub fn reduction(&self) -> Reduce {
        self.reduce.unwrap_or(if self.lanes > 1 {
            Reduce::Butterfly
        } else {
            Reduce::Serial
        })
    }

    /// The MMA parameters, if this is a tensor-core order.
    pub fn mma(&self) -> Option<Mma> {
        match self.family {
            Family::Mma(m) => Some(m),
            _ => None,
        }
    }

    /// Compile into the reduction tree for `k` terms. Call
    /// [`Order::check_size`] first when `k` or the order come from outside:
    /// compiling an unchecked size may exhaust memory.
    pub fn compile(&self, k: usize) -> Tree {
        Tree::compile(self, k)
    }

    /// Checks, before anything is allocated, that the tree for `k` terms
    /// stays within [`crate::limits::MAX_K`] terms and
    /// [`crate::limits::MAX_TREE`] units (an upper bound on nodes, fused-step
    /// slots and part-list entries, which grow with K, split, lanes, fresh
    /// tiles, promotion blocks and the mma k).
    pub fn check_size(&self, k: usize) -> Result<(), OrderError> {
        use crate::limits::{check_k, show, MAX_TREE};
        let err = |msg: String| OrderError {
            spec: self.to_string(),
            kind: OrderErrorKind::Size,
            msg,
        };
        check_k("K", k).map_err(err)?;
        let units = self.tree_size_bound(k);
        if units > MAX_TREE as u128 {
            return Err(err(format!(
                "the tree for K = {k} would take about {units} nodes and slots, more than the limit of {} (mxbi::limits::MAX_TREE); lower split, lanes or the mma k",
                show(MAX_TREE)
            )));
        }
        Ok(())
    }

    /// An upper bound on what [`Tree::compile`] allocates for `k` terms, in
    /// units of one node, one fused-step slot or one part-list entry.
    fn tree_size_bound(&self, k: usize) -> u128 {
        let k = k as u128;
        let (split, lanes) = (self.split as u128, self.lanes as u128);
        // leaf parts: the lanes or the split parts, each possibly cut into
        // fresh tiles (at most K / T + 1 tiles per part)
        let parts = if self.lanes > 1 {
            match (self.tile, self.ktile) {
                // each lane cut into at most K / T + 1 fresh tiles, and no
                // more tiles than terms plus one empty tile per lane
                (Tile::Fresh, Some(t)) => (lanes * (k / t as u128 + 1)).min(k + lanes),
                _ => lanes,
            }
        } else {
            match (self.tile, self.ktile) {
                (Tile::Fresh, Some(t)) => k / t as u128 + split,
                _ => split,
            }
        };
        let steps = match self.family {
            Family::Fma | Family::MulAdd => k,
            Family::Mma(m) => {
                let mk = m.k as u128;
                // promotion blocks, at most one partial block per part
                let blocks = self.promote.map_or(parts, |p| k / p as u128 + parts);
                // tensor-core steps (at most one partial step per block),
                // each with mk slots and up to four nodes, one promotion per block
                (k / mk + blocks) * (mk + 4) + blocks
            }
        };
        // the term list and the part lists (2K), a zero and a reduction add
        // per part (butterfly: a copy of the lane or part list per level)
        let combined = if self.lanes > 1 {
            lanes
        } else if self.reduction() == Reduce::Butterfly {
            split
        } else {
            0
        };
        let lane_copies = combined * (128 - combined.leading_zeros()) as u128;
        2 * k + steps + 4 * parts + lane_copies + 8
    }
}

/// Named presets and what they expand to (docs/ORDERS.md).
pub const PRESETS: &[(&str, &str)] = &[
    ("hopper-bf16", "mma(k=16,f=25,in=bf16)"),
    ("hopper-f16", "mma(k=16,f=25,in=f16)"),
    ("hopper-fp8-wgmma", "mma(k=32,f=13,out=13,in=e4m3)"),
    ("hopper-fp8-mma-sync", "mma(k=32,f=25,split=mod4,c=late,in=e4m3)"),
    ("ampere-bf16", "mma(k=16,f=24,split=halves,in=bf16)"),
    ("ada-fp8", "mma(k=32,f=13,out=13,split=halves,in=e4m3)"),
    ("blackwell-mxf8f6f4", "mma(k=32,f=25,in=e4m3);scale=fused"),
    ("deepgemm-fp8", "mma(k=32,f=13,out=13,in=e4m3);promote=128"),
];

/// A malformed or contradictory order string.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("order '{spec}': {msg}")]
pub struct OrderError {
    pub spec: String,
    pub kind: OrderErrorKind,
    pub msg: String,
}

/// Why a spelling is rejected (docs/ORDERS.md, "Parsing rules").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderErrorKind {
    /// Empty, or an item / mma parameter that is not `key=value`.
    Syntax,
    /// Unknown family, key or mma parameter.
    Unknown,
    /// A value that is not one of the allowed words or not an integer in range.
    Value,
    /// A key or mma parameter given twice, or a key the preset already sets.
    Repeat,
    /// `mma(...)` without `k=` or `f=`.
    Missing,
    /// Keys that cannot go together.
    Combination,
    /// A valid order whose tree for the requested K would exceed a size
    /// limit (`Order::check_size`); never a parse result.
    Size,
}

impl OrderErrorKind {
    /// The class name used by the parse vectors (`reference/orders/`).
    pub const fn name(self) -> &'static str {
        match self {
            OrderErrorKind::Syntax => "syntax",
            OrderErrorKind::Unknown => "unknown",
            OrderErrorKind::Value => "value",
            OrderErrorKind::Repeat => "repeat",
            OrderErrorKind::Missing => "missing",
            OrderErrorKind::Combination => "combination",
            OrderErrorKind::Size => "size",
        }
    }
}

type ParseError = (OrderErrorKind, String);

fn syntax(msg: String) -> ParseError {
    (OrderErrorKind::Syntax, msg)
}
fn unknown(msg: String) -> ParseError {
    (OrderErrorKind::Unknown, msg)
}
fn value(msg: String) -> ParseError {
    (OrderErrorKind::Value, msg)
}
fn repeat(msg: String) -> ParseError {
    (OrderErrorKind::Repeat, msg)
}
fn combination(msg: String) -> ParseError {
    (OrderErrorKind::Combination, msg)
}

const KEYS: &str = "ktile, tile, split, align, lanes, reduce, promote, scale, out";

/// INT: ASCII decimal digits (no sign), `min <= n <= max`.
fn parse_u32(item: &str, v: &str, min: u32, max: u32) -> Result<u32, ParseError> {
    match v.parse::<u32>() {
        Ok(n) if v.bytes().all(|b| b.is_ascii_digit()) && (min..=max).contains(&n) => Ok(n),
        _ => Err(value(format!(
            "'{item}': expected an integer in [{min}, {max}], got '{v}'"
        ))),
    }
}

fn parse_mma(params: &str) -> Result<Mma, ParseError> {
    let mut k = None;
    let mut f = None;
    let mut out = None;
    let mut split = None;
    let mut c = None;
    let mut input = None;
    let items = if params.is_empty() {
        None
    } else {
        Some(params.split(','))
    };
    for p in items.into_iter().flatten() {
        let (key, v) = p
            .split_once('=')
            .ok_or_else(|| syntax(format!("mma parameter '{p}': expected key=value")))?;
        let given = match key {
            "k" => k.is_some(),
            "f" => f.is_some(),
            "out" => out.is_some(),
            "split" => split.is_some(),
            "c" => c.is_some(),
            "in" => input.is_some(),
            _ => false,
        };
        if given {
            return Err(repeat(format!("mma parameter '{p}': '{key}' given twice")));
        }
        match key {
            "k" => k = Some(parse_u32(p, v, 1, u32::MAX)?),
            "f" => f = Some(parse_u32(p, v, 1, 60)?),
            "out" => out = Some(parse_u32(p, v, 1, 23)?),
            "split" => {
                split = Some(match v {
                    "none" => MmaSplit::None,
                    "halves" => MmaSplit::Halves,
                    "mod4" => MmaSplit::Mod4,
                    _ => return Err(value(format!("'{p}': expected one of none, halves, mod4"))),
                })
            }
            "c" => {
                c = Some(match v {
                    "fused" => CMode::Fused,
                    "late" => CMode::Late,
                    _ => return Err(value(format!("'{p}': expected one of fused, late"))),
                })
            }
            "in" => {
                input = Some(match InType::from_name(v) {
                    Some(t) => t,
                    None => return Err(value(format!("'{p}': expected one of bf16, f16, e4m3, e5m2, f32"))),
                })
            }
            _ => {
                return Err(unknown(format!(
                    "unknown mma parameter '{key}' in '{p}'; expected k, f, out, split, c, in"
                )))
            }
        }
    }
    let k = k.ok_or((OrderErrorKind::Missing, "mma(...) needs k=".to_string()))?;
    let f = f.ok_or((OrderErrorKind::Missing, "mma(...) needs f=".to_string()))?;
    let split = split.unwrap_or(MmaSplit::None);
    match split {
        MmaSplit::Halves if k % 2 != 0 => {
            return Err(combination(format!("mma split=halves needs an even k, got k={k}")))
        }
        MmaSplit::Mod4 if k % 4 != 0 => {
            return Err(combination(format!("mma split=mod4 needs k divisible by 4, got k={k}")))
        }
        _ => {}
    }
    let input = input.unwrap_or(if f == 13 { InType::E4M3 } else { InType::Bf16 });
    Ok(Mma {
        k,
        f,
        out: out.unwrap_or(23),
        split,
        c: c.unwrap_or(CMode::Fused),
        input,
    })
}

/// Set one key of `o` from the item `item` = `key=v`.
fn set_key(o: &mut Order, n: usize, item: &str, key: &str, v: &str) -> Result<(), ParseError> {
    match key {
        "ktile" => o.ktile = Some(parse_u32(item, v, 1, u32::MAX)?),
        "tile" => {
            o.tile = match v {
                "carry" => Tile::Carry,
                "fresh" => Tile::Fresh,
                _ => return Err(value(format!("item {n} '{item}': expected carry or fresh"))),
            }
        }
        "split" => {
            let (num, inter) = match v.split_once('/') {
                Some((a, "interleave")) => (a, true),
                Some((_, b)) => {
                    return Err(value(format!(
                        "item {n} '{item}': unknown split mode '{b}'; expected interleave"
                    )))
                }
                None => (v, false),
            };
            o.split = parse_u32(item, num, 1, u32::MAX)?;
            o.interleave = inter;
        }
        "align" => o.align = Some(parse_u32(item, v, 1, u32::MAX)?),
        "lanes" => o.lanes = parse_u32(item, v, 1, u32::MAX)?,
        "reduce" => {
            o.reduce = Some(match v {
                "serial" => Reduce::Serial,
                "pairwise" => Reduce::Pairwise,
                "butterfly" => Reduce::Butterfly,
                _ => {
                    return Err(value(format!(
                        "item {n} '{item}': expected serial, pairwise or butterfly"
                    )))
                }
            })
        }
        "promote" => o.promote = Some(parse_u32(item, v, 1, u32::MAX)?),
        "scale" => {
            o.scale = match v {
                "dequant" => MxScale::Dequant,
                "block" => MxScale::Block,
                "fused" => MxScale::Fused,
                _ => return Err(value(format!("item {n} '{item}': expected dequant, block or fused"))),
            }
        }
        "out" => {
            o.out = match v {
                "f32" => OutFmt::F32,
                "bf16" => OutFmt::Bf16,
                "f16" => OutFmt::F16,
                _ => return Err(value(format!("item {n} '{item}': expected f32, bf16 or f16"))),
            }
        }
        _ => {
            return Err(unknown(format!(
                "item {n}: unknown key '{key}'; expected one of: {KEYS}"
            )))
        }
    }
    Ok(())
}

fn parse(spec: &str) -> Result<Order, ParseError> {
    let s: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    if s.is_empty() {
        return Err(syntax(
            "empty order; expected fma, muladd, mma(k=..,f=..) or a preset".into(),
        ));
    }
    let mut items = s.split(';');
    let head = items.next().unwrap_or("");
    // A preset is its expansion: a family plus the keys it sets.
    let preset = PRESETS.iter().find(|(name, _)| *name == head);
    let mut expansion = preset.map_or(head, |p| p.1).split(';');
    let fam = expansion.next().unwrap_or("");
    let family = if fam == "fma" {
        Family::Fma
    } else if fam == "muladd" {
        Family::MulAdd
    } else if let Some(p) = fam.strip_prefix("mma(").and_then(|p| p.strip_suffix(')')) {
        Family::Mma(parse_mma(p)?)
    } else {
        let presets: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
        return Err(unknown(format!(
            "unknown family '{fam}' (item 1); expected fma, muladd, mma(k=..,f=..) or a preset: {}",
            presets.join(", ")
        )));
    };
    let mut o = Order::base(family);
    let mut preset_keys = Vec::new();
    for item in expansion {
        let (key, v) = item.split_once('=').unwrap_or((item, ""));
        set_key(&mut o, 1, item, key, v)?;
        preset_keys.push(key);
    }
    let mut seen = std::collections::HashSet::new();
    for (idx, item) in items.enumerate() {
        let n = idx + 2;
        let (key, v) = item
            .split_once('=')
            .ok_or_else(|| syntax(format!("item {n} '{item}': expected key=value")))?;
        if let (Some((name, exp)), true) = (preset, preset_keys.contains(&key)) {
            return Err(repeat(format!(
                "item {n} '{item}': key '{key}' is already set by preset '{name}' \
                 (spell out its expansion {exp} to change it)"
            )));
        }
        if !seen.insert(key.to_string()) {
            return Err(repeat(format!("item {n} '{item}': key '{key}' given twice")));
        }
        set_key(&mut o, n, item, key, v)?;
    }
    validate(&o)?;
    // Canonical form: drop what has no effect.
    if o.reduce == Some(if o.lanes > 1 { Reduce::Butterfly } else { Reduce::Serial }) {
        o.reduce = None;
    }
    if o.tile == Tile::Carry && !o.interleave {
        o.ktile = None; // a carried tile boundary changes nothing
    }
    if o.align == Some(1) {
        o.align = None; // every k is a multiple of 1
    }
    Ok(o)
}

fn validate(o: &Order) -> Result<(), ParseError> {
    if o.lanes > 1 {
        let l = o.lanes;
        if o.split > 1 || o.interleave {
            return Err(combination(format!(
                "lanes cannot be combined with split (split=S or split=S/interleave); lanes={l} already deals k = l mod {l} to the lanes"
            )));
        }
        if let Some(t) = o.ktile {
            if o.tile != Tile::Fresh {
                return Err(combination(format!(
                    "lanes with ktile={t} needs tile=fresh: write lanes={l};ktile={t};tile=fresh (each lane's terms in a k-tile summed from +0), or drop ktile (a carried k-tile does nothing)"
                )));
            }
            if t % l != 0 {
                return Err(combination(format!(
                    "lanes={l};ktile={t};tile=fresh needs ktile to be a multiple of lanes (every k-tile holds ktile/lanes terms of each lane)"
                )));
            }
        }
    }
    if o.reduction() == Reduce::Butterfly {
        // over the lanes, or over the parts of a split (lanes exclude split)
        let (what, n) = if o.lanes > 1 {
            ("lanes", o.lanes)
        } else {
            ("split", o.split)
        };
        if n == 1 {
            return Err(combination(
                "reduce=butterfly needs lanes=L (GEMV lanes) or split=S (split parts), a power of two".into(),
            ));
        }
        if !n.is_power_of_two() {
            return Err(combination(format!(
                "reduce=butterfly needs {what} to be a power of two, got {n}"
            )));
        }
    }
    if o.interleave && o.ktile.is_none() {
        return Err(combination(
            "split=S/interleave needs ktile=T (tiles are dealt to parts)".into(),
        ));
    }
    if let Some(a) = o.align {
        if o.split < 2 || o.interleave {
            return Err(combination(format!(
                "align={a} needs a contiguous split=S with S >= 2 (it sets where split parts start; interleaved parts are dealt k-tiles)"
            )));
        }
    }
    if o.tile == Tile::Fresh && o.ktile.is_none() {
        return Err(combination("tile=fresh needs ktile=T".into()));
    }
    match (o.family, o.promote) {
        (Family::Mma(m), Some(p)) if p % m.k != 0 => {
            return Err(combination(format!(
                "promote={p} must be a multiple of the mma k={}",
                m.k
            )));
        }
        (Family::Fma | Family::MulAdd, Some(_)) => {
            return Err(combination("promote applies to mma families only".into()))
        }
        _ => {}
    }
    match (o.family, o.scale) {
        (Family::Fma | Family::MulAdd, MxScale::Fused) => {
            return Err(combination(
                "scale=fused applies to mma families only (use scale=block or dequant)".into(),
            ))
        }
        (Family::Mma(_), MxScale::Block) if o.promote != Some(32) => {
            return Err(combination(
                "scale=block with an mma family needs promote=32 (one promotion per MX block)".into(),
            ))
        }
        (Family::Mma(m), MxScale::Fused) if m.k != 32 => {
            return Err(combination(format!(
                "scale=fused needs mma k=32 (one MX block per step), got k={}",
                m.k
            )))
        }
        _ => {}
    }
    Ok(())
}

impl FromStr for Order {
    type Err = OrderError;
    fn from_str(s: &str) -> Result<Self, OrderError> {
        parse(s).map_err(|(kind, msg)| OrderError {
            spec: s.to_string(),
            kind,
            msg,
        })
    }
}

/// An order serialises as its canonical spelling (docs/ORDERS.md) and
/// deserialises through the parser, so a stored order is always valid.
impl serde::Serialize for Order {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Order {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Order {
    /// The canonical spelling: family, then keys in a fixed order, defaults
    /// omitted. `parse(display(o)) == o`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.family {
            Family::Fma => f.write_str("fma")?,
            Family::MulAdd => f.write_str("muladd")?,
            Family::Mma(m) => {
                write!(f, "mma(k={},f={}", m.k, m.f)?;
                if m.out != 23 {
                    write!(f, ",out={}", m.out)?;
                }
                match m.split {
                    MmaSplit::None => {}
                    MmaSplit::Halves => f.write_str(",split=halves")?,
                    MmaSplit::Mod4 => f.write_str(",split=mod4")?,
                }
                if m.c == CMode::Late {
                    f.write_str(",c=late")?;
                }
                let default_in = if m.f == 13 { InType::E4M3 } else { InType::Bf16 };
                if m.input != default_in {
                    write!(f, ",in={}", m.input.name())?;
                }
                f.write_str(")")?;
            }
        }
        if let Some(t) = self.ktile {
            write!(f, ";ktile={t}")?;
        }
        if self.tile == Tile::Fresh {
            f.write_str(";tile=fresh")?;
        }
        if self.split > 1 || self.interleave {
            write!(
                f,
                ";split={}{}",
                self.split,
                if self.interleave { "/interleave" } else { "" }
            )?;
        }
        if let Some(a) = self.align {
            write!(f, ";align={a}")?;
        }
        if self.lanes > 1 {
            write!(f, ";lanes={}", self.lanes)?;
        }
        if let Some(r) = self.reduce {
            let default = if self.lanes > 1 {
                Reduce::Butterfly
            } else {
                Reduce::Serial
            };
            if r != default {
                f.write_str(match r {
                    Reduce::Serial => ";reduce=serial",
                    Reduce::Pairwise => ";reduce=pairwise",
                    Reduce::Butterfly => ";reduce=butterfly",
                })?;
            }
        }
        if let Some(p) = self.promote {
            write!(f, ";promote={p}")?;
        }
        match self.scale {
            MxScale::Dequant => {}
            MxScale::Block => f.write_str(";scale=block")?,
            MxScale::Fused => f.write_str(";scale=fused")?,
        }
        match self.out {
            OutFmt::F32 => {}
            OutFmt::Bf16 => f.write_str(";out=bf16")?,
            OutFmt::F16 => f.write_str(";out=f16")?,
        }
        Ok(())
    }
}

impl Order {
    /// The preset this order equals, if any.
    pub fn preset_name(&self) -> Option<&'static str> {
        PRESETS
            .iter()
            .find(|(_, exp)| exp.parse::<Order>().ok().as_ref() == Some(self))
            .map(|p| p.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// InType reads every parameter from the format: the values the fused
    /// step and the fast kernels used to restate.
    #[test]
    fn in_type_parameters_come_from_the_format() {
        let expect = [
            (InType::Bf16, "bf16", -126, 7, 2),
            (InType::F16, "f16", -14, 10, 2),
            (InType::E4M3, "e4m3", -6, 3, 1),
            (InType::E5M2, "e5m2", -14, 2, 1),
            (InType::F32, "f32", -126, 23, 4),
        ];
        assert_eq!(expect.len(), InType::ALL.len());
        for (t, name, emin, frac, bytes) in expect {
            assert_eq!(
                (t.name(), t.emin(), t.frac_bits(), t.bytes()),
                (name, emin, frac, bytes)
            );
            assert_eq!(InType::from_name(name), Some(t));
        }
    }

    const SPELLINGS: &[&str] = &[
        "fma",
        "muladd",
        "fma;ktile=128;tile=fresh",
        "fma;split=4;reduce=serial",
        "fma;split=4;reduce=pairwise",
        "fma;split=4/interleave;ktile=64;reduce=serial",
        "fma;lanes=32;reduce=butterfly",
        "mma(k=16,f=25)",
        "mma(k=32,f=13,out=13)",
        "hopper-bf16",
        "hopper-fp8-wgmma",
        "hopper-fp8-mma-sync",
        "ampere-bf16",
        "ada-fp8",
        "blackwell-mxf8f6f4",
        "hopper-fp8-wgmma;promote=128",
        "fma;scale=block",
        "fma;scale=dequant",
        "fma;out=bf16",
        "hopper-bf16;out=f16",
        "mma(k=32,f=13,out=13);scale=block;promote=32",
        "fma;lanes=16;ktile=512;tile=fresh;reduce=serial",
        "muladd;lanes=8;ktile=64;tile=fresh",
        "hopper-bf16;split=3;align=128;out=bf16",
    ];

    #[test]
    fn orders_serialise_as_their_canonical_spelling() {
        for (name, _) in PRESETS {
            let o: Order = name.parse().unwrap();
            let j = serde_json::to_string(&o).unwrap();
            assert_eq!(j, format!("\"{o}\""));
            assert_eq!(serde_json::from_str::<Order>(&j).unwrap(), o);
        }
        // a stored order is always valid: deserialising goes through the parser
        let err = serde_json::from_str::<Order>("\"fma;split=0\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("split"), "{err}");
    }

    #[test]
    fn issue_spellings_parse_and_round_trip() {
        for s in SPELLINGS {
            let o: Order = s.parse().unwrap_or_else(|e| panic!("{e}"));
            let canon = o.to_string();
            let o2: Order = canon.parse().unwrap_or_else(|e| panic!("{canon}: {e}"));
            assert_eq!(o, o2, "{s} -> {canon}");
            assert_eq!(canon, o2.to_string());
        }
        assert_eq!("hopper-bf16".parse::<Order>().unwrap().to_string(), "mma(k=16,f=25)");
        assert_eq!(
            "mma(k=16,f=25)".parse::<Order>().unwrap().preset_name(),
            Some("hopper-bf16")
        );
        assert_eq!(" fma ; split = 4 ".parse::<Order>().unwrap().to_string(), "fma;split=4");
        assert_eq!(
            "fma;ktile=64;reduce=serial".parse::<Order>().unwrap().to_string(),
            "fma"
        );
        // lanes cut into fresh k-tiles: keys in table order, serial explicit
        // (the lanes' default reduction is butterfly)
        let gemv: Order = "fma;lanes=16;ktile=512;tile=fresh;reduce=serial".parse().unwrap();
        assert_eq!(gemv.to_string(), "fma;ktile=512;tile=fresh;lanes=16;reduce=serial");
        assert_eq!(
            (gemv.lanes, gemv.ktile, gemv.tile, gemv.reduction()),
            (16, Some(512), Tile::Fresh, Reduce::Serial)
        );
        assert_eq!(
            "fma;lanes=8;ktile=64;tile=fresh;reduce=butterfly"
                .parse::<Order>()
                .unwrap()
                .to_string(),
            "fma;ktile=64;tile=fresh;lanes=8"
        );
    }

    #[test]
    fn errors_point_at_the_item() {
        let err = |s: &str| s.parse::<Order>().unwrap_err().to_string();
        assert!(err("fma;splt=4").contains("unknown key 'splt'"));
        assert!(err("fma;split=four").contains("'split=four'"));
        assert!(err("fmx").contains("unknown family 'fmx'"));
        assert!(err("fma;lanes=32;split=2").contains("lanes cannot be combined"));
        assert!(err("fma;lanes=4;split=2/interleave;ktile=4;tile=fresh").contains("lanes cannot be combined"));
        assert!(err("fma;lanes=4;split=1/interleave;ktile=4;tile=fresh").contains("lanes cannot be combined"));
        // a carried k-tile with lanes: the message says what to write
        let e = err("fma;lanes=4;ktile=16");
        assert!(
            e.contains("lanes=4;ktile=16;tile=fresh") && e.contains("drop ktile"),
            "{e}"
        );
        assert!(err("fma;lanes=4;ktile=6;tile=fresh").contains("multiple of lanes"));
        assert!(err("fma;lanes=4;tile=fresh").contains("needs ktile"));
        assert!(err("fma;reduce=butterfly").contains("needs lanes"));
        assert!(err("fma;lanes=24;reduce=butterfly").contains("power of two"));
        // butterfly over the parts of a split: S a power of two above 1
        assert!(err("fma;split=3;reduce=butterfly").contains("split to be a power of two"));
        assert!(err("fma;split=1/interleave;ktile=4;reduce=butterfly").contains("or split=S"));
        let torch: Order = "fma;reduce=butterfly;split=16/interleave;ktile=64".parse().unwrap();
        assert_eq!(torch.to_string(), "fma;ktile=64;split=16/interleave;reduce=butterfly");
        assert_eq!(torch.reduction(), Reduce::Butterfly);
        assert!(err("mma(k=16)").contains("needs f="));
        assert!(err("mma(k=16,f=25,q=1)").contains("unknown mma parameter 'q'"));
        assert!(err("hopper-bf16;promote=24").contains("multiple"));
        assert!(err("fma;scale=fused").contains("mma families only"));
        assert!(err("fma;split=2;split=3").contains("given twice"));
        assert!(err("fma;tile=fresh").contains("needs ktile"));
        assert!(err("").contains("empty"));
        // align: where contiguous split parts start
        assert!(err("fma;align=128").contains("needs a contiguous split"));
        assert!(err("fma;split=4/interleave;ktile=8;align=16").contains("needs a contiguous split"));
        assert!(err("fma;split=3;align=0").contains("align=0"));
        let aligned: Order = "fma;align=128;split=3".parse().unwrap();
        assert_eq!(aligned.to_string(), "fma;split=3;align=128");
        assert_eq!(aligned.split_chunk(4096), 1408);
        assert_eq!(aligned.split_chunk(0), 0);
        let one: Order = "fma;split=3;align=1".parse().unwrap();
        assert_eq!(one, "fma;split=3".parse().unwrap());
    }

    #[test]
    fn error_kinds() {
        use OrderErrorKind::*;
        let kind = |s: &str| s.parse::<Order>().unwrap_err().kind;
        assert_eq!(kind("fma;split=2/interleave"), Combination);
        assert_eq!(kind("fma;lanes=4;ktile=16"), Combination);
        assert_eq!(kind("fma;lanes=4;ktile=6;tile=fresh"), Combination);
        assert_eq!(kind("deepgemm-fp8;promote=64"), Repeat);
        assert_eq!(kind("fma;split=+4"), Value);
        assert_eq!(kind("mma(k=16,k=32,f=25)"), Repeat);
        assert_eq!(kind("mma(k=16,,f=25)"), Syntax);
        assert_eq!(kind("mma(k=16)"), Missing);
        assert_eq!(kind("fma;splt=4"), Unknown);
        assert_eq!(kind("fma;split=3;align=x"), Value);
        assert_eq!(kind("fma;align=64"), Combination);
        // the item number counts the spelling as written, not the preset's expansion
        let e = "deepgemm-fp8;split=2;split=3".parse::<Order>().unwrap_err();
        assert!(e.msg.contains("item 3 'split=3'"), "{e}");
        // the way to change a preset's own key: spell out its expansion
        let o: Order = "mma(k=32,f=13,out=13,in=e4m3);promote=64".parse().unwrap();
        assert_eq!(o.promote, Some(64));
    }
}
