//! Accumulation orders: a compact, canonical, round-trippable spelling of
//! how a GEMM accumulates one output element, and its compilation into a
//! reduction tree for a given K. The contract is docs/ORDERS.md.

mod tree;

pub use tree::{Divergence, Node, NodeId, Tree};

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InType {
    Bf16,
    F16,
    E4M3,
    E5M2,
    F32,
}

impl InType {
    pub const fn name(self) -> &'static str {
        match self {
            InType::Bf16 => "bf16",
            InType::F16 => "f16",
            InType::E4M3 => "e4m3",
            InType::E5M2 => "e5m2",
            InType::F32 => "f32",
        }
    }
    /// Exponent given to zeros and subnormals in the fused-sum decomposition.
    pub const fn emin(self) -> i32 {
        match self {
            InType::Bf16 | InType::F32 => -126,
            InType::F16 | InType::E5M2 => -14,
            InType::E4M3 => -6,
        }
    }
    /// The element format, for representability checks (None: any f32).
    pub const fn format(self) -> Option<crate::format::Format> {
        use crate::format::Format;
        match self {
            InType::Bf16 => Some(Format::BF16),
            InType::F16 => Some(Format::F16),
            InType::E4M3 => Some(Format::E4M3),
            InType::E5M2 => Some(Format::E5M2),
            InType::F32 => None,
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
            lanes: 1,
            reduce: None,
            promote: None,
            scale: MxScale::Dequant,
            out: OutFmt::F32,
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
        use crate::limits::{show, MAX_K, MAX_TREE};
        let err = |msg: String| OrderError {
            spec: self.to_string(),
            msg,
        };
        if k > MAX_K {
            return Err(err(format!(
                "K = {k} is larger than the limit of {} terms (mxbi::limits::MAX_K)",
                show(MAX_K)
            )));
        }
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
        // leaf parts: the lanes, or the split parts, each possibly cut into
        // fresh tiles (at most K / T + 1 tiles per part)
        let parts = if self.lanes > 1 {
            lanes
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
        // per part (butterfly lanes: a copy of the lane list per level)
        let lane_copies = if self.lanes > 1 {
            lanes * (128 - lanes.leading_zeros()) as u128
        } else {
            0
        };
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
    pub msg: String,
}

const KEYS: &str = "ktile, tile, split, lanes, reduce, promote, scale, out";

fn parse_u32(item: &str, v: &str, min: u32) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(format!("'{item}': expected an integer >= {min}, got '{v}'")),
    }
}

fn parse_mma(params: &str) -> Result<Mma, String> {
    let mut k = None;
    let mut f = None;
    let mut out = 23;
    let mut split = MmaSplit::None;
    let mut c = CMode::Fused;
    let mut input = None;
    for p in params.split(',').filter(|p| !p.is_empty()) {
        let (key, v) = p
            .split_once('=')
            .ok_or_else(|| format!("mma parameter '{p}': expected key=value"))?;
        match key {
            "k" => k = Some(parse_u32(p, v, 1)?),
            "f" => f = Some(parse_u32(p, v, 1)?),
            "out" => out = parse_u32(p, v, 1)?,
            "split" => {
                split = match v {
                    "none" => MmaSplit::None,
                    "halves" => MmaSplit::Halves,
                    "mod4" => MmaSplit::Mod4,
                    _ => return Err(format!("mma parameter '{p}': expected none, halves or mod4")),
                }
            }
            "c" => {
                c = match v {
                    "fused" => CMode::Fused,
                    "late" => CMode::Late,
                    _ => return Err(format!("mma parameter '{p}': expected fused or late")),
                }
            }
            "in" => {
                input = Some(match v {
                    "bf16" => InType::Bf16,
                    "f16" => InType::F16,
                    "e4m3" => InType::E4M3,
                    "e5m2" => InType::E5M2,
                    "f32" => InType::F32,
                    _ => return Err(format!("mma parameter '{p}': expected bf16, f16, e4m3, e5m2 or f32")),
                })
            }
            _ => {
                return Err(format!(
                    "unknown mma parameter '{key}' in '{p}'; expected k, f, out, split, c, in"
                ))
            }
        }
    }
    let k = k.ok_or("mma(...) needs k=")?;
    let f = f.ok_or("mma(...) needs f=")?;
    if f > 60 {
        return Err(format!("mma f={f}: at most 60 alignment bits are modelled"));
    }
    if out > 23 {
        return Err(format!(
            "mma out={out}: a step result has at most 23 fraction bits (f32)"
        ));
    }
    match split {
        MmaSplit::Halves if k % 2 != 0 => return Err(format!("mma split=halves needs an even k, got {k}")),
        MmaSplit::Mod4 if k % 4 != 0 => return Err(format!("mma split=mod4 needs k divisible by 4, got {k}")),
        _ => {}
    }
    let input = input.unwrap_or(if f == 13 { InType::E4M3 } else { InType::Bf16 });
    Ok(Mma {
        k,
        f,
        out,
        split,
        c,
        input,
    })
}

fn parse(spec: &str) -> Result<Order, String> {
    let s: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    if s.is_empty() {
        return Err("empty order; expected fma, muladd, mma(k=..,f=..) or a preset".into());
    }
    // Expand a leading preset name.
    let (head, rest) = match s.find(';') {
        Some(i) if !s[..i].contains('(') || s[..i].contains(')') => (&s[..i], &s[i..]),
        _ => (s.as_str(), ""),
    };
    let expanded;
    let s = if let Some((_, exp)) = PRESETS.iter().find(|(n, _)| *n == head) {
        expanded = format!("{exp}{rest}");
        expanded.as_str()
    } else {
        s.as_str()
    };
    let mut items = s.split(';');
    let fam = items.next().unwrap_or("");
    let family = if fam == "fma" {
        Family::Fma
    } else if fam == "muladd" {
        Family::MulAdd
    } else if let Some(p) = fam.strip_prefix("mma(").and_then(|p| p.strip_suffix(')')) {
        Family::Mma(parse_mma(p)?)
    } else {
        let presets: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
        return Err(format!(
            "unknown family '{fam}' (item 1); expected fma, muladd, mma(k=..,f=..) or a preset: {}",
            presets.join(", ")
        ));
    };
    let mut o = Order::base(family);
    let mut seen = std::collections::HashSet::new();
    for (idx, item) in items.enumerate() {
        let n = idx + 2;
        let (key, v) = item
            .split_once('=')
            .ok_or_else(|| format!("item {n} '{item}': expected key=value"))?;
        if !seen.insert(key.to_string()) {
            return Err(format!("item {n} '{item}': key '{key}' given twice"));
        }
        match key {
            "ktile" => o.ktile = Some(parse_u32(item, v, 1)?),
            "tile" => {
                o.tile = match v {
                    "carry" => Tile::Carry,
                    "fresh" => Tile::Fresh,
                    _ => return Err(format!("item {n} '{item}': expected carry or fresh")),
                }
            }
            "split" => {
                let (num, inter) = match v.split_once('/') {
                    Some((a, "interleave")) => (a, true),
                    Some((_, b)) => {
                        return Err(format!(
                            "item {n} '{item}': unknown split mode '{b}'; expected interleave"
                        ))
                    }
                    None => (v, false),
                };
                o.split = parse_u32(item, num, 1)?;
                o.interleave = inter;
            }
            "lanes" => o.lanes = parse_u32(item, v, 1)?,
            "reduce" => {
                o.reduce = Some(match v {
                    "serial" => Reduce::Serial,
                    "pairwise" => Reduce::Pairwise,
                    "butterfly" => Reduce::Butterfly,
                    _ => return Err(format!("item {n} '{item}': expected serial, pairwise or butterfly")),
                })
            }
            "promote" => o.promote = Some(parse_u32(item, v, 1)?),
            "scale" => {
                o.scale = match v {
                    "dequant" => MxScale::Dequant,
                    "block" => MxScale::Block,
                    "fused" => MxScale::Fused,
                    _ => return Err(format!("item {n} '{item}': expected dequant, block or fused")),
                }
            }
            "out" => {
                o.out = match v {
                    "f32" => OutFmt::F32,
                    "bf16" => OutFmt::Bf16,
                    "f16" => OutFmt::F16,
                    _ => return Err(format!("item {n} '{item}': expected f32, bf16 or f16")),
                }
            }
            _ => return Err(format!("item {n}: unknown key '{key}'; expected one of: {KEYS}")),
        }
    }
    validate(&o)?;
    // Canonical form: drop what has no effect.
    if o.reduce == Some(if o.lanes > 1 { Reduce::Butterfly } else { Reduce::Serial }) {
        o.reduce = None;
    }
    if o.tile == Tile::Carry && !o.interleave {
        o.ktile = None; // a carried tile boundary changes nothing
    }
    Ok(o)
}

fn validate(o: &Order) -> Result<(), String> {
    if o.lanes > 1 && (o.split > 1 || o.ktile.is_some()) {
        return Err("lanes cannot be combined with split or ktile".into());
    }
    if o.reduction() == Reduce::Butterfly {
        if o.lanes == 1 {
            return Err("reduce=butterfly needs lanes=L (GEMV lanes)".into());
        }
        if !o.lanes.is_power_of_two() {
            return Err(format!(
                "reduce=butterfly needs lanes to be a power of two, got {}",
                o.lanes
            ));
        }
    }
    if o.interleave && o.ktile.is_none() {
        return Err("split=S/interleave needs ktile=T (tiles are dealt to parts)".into());
    }
    if o.tile == Tile::Fresh && o.ktile.is_none() {
        return Err("tile=fresh needs ktile=T".into());
    }
    match (o.family, o.promote) {
        (Family::Mma(m), Some(p)) if p % m.k != 0 => {
            return Err(format!("promote={p} must be a multiple of the mma k={}", m.k));
        }
        (Family::Fma | Family::MulAdd, Some(_)) => return Err("promote applies to mma families only".into()),
        _ => {}
    }
    match (o.family, o.scale) {
        (Family::Fma | Family::MulAdd, MxScale::Fused) => {
            return Err("scale=fused applies to mma families only (use scale=block or dequant)".into())
        }
        (Family::Mma(_), MxScale::Block) if o.promote != Some(32) => {
            return Err("scale=block with an mma family needs promote=32 (one promotion per MX block)".into())
        }
        (Family::Mma(m), MxScale::Fused) if m.k != 32 => {
            return Err(format!(
                "scale=fused needs mma k=32 (one MX block per step), got k={}",
                m.k
            ))
        }
        _ => {}
    }
    Ok(())
}

impl FromStr for Order {
    type Err = OrderError;
    fn from_str(s: &str) -> Result<Self, OrderError> {
        parse(s).map_err(|msg| OrderError {
            spec: s.to_string(),
            msg,
        })
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
    ];

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
    }

    #[test]
    fn errors_point_at_the_item() {
        let err = |s: &str| s.parse::<Order>().unwrap_err().to_string();
        assert!(err("fma;splt=4").contains("unknown key 'splt'"));
        assert!(err("fma;split=four").contains("'split=four'"));
        assert!(err("fmx").contains("unknown family 'fmx'"));
        assert!(err("fma;lanes=32;split=2").contains("lanes cannot be combined"));
        assert!(err("fma;reduce=butterfly").contains("needs lanes"));
        assert!(err("fma;lanes=24;reduce=butterfly").contains("power of two"));
        assert!(err("mma(k=16)").contains("needs f="));
        assert!(err("mma(k=16,f=25,q=1)").contains("unknown mma parameter 'q'"));
        assert!(err("hopper-bf16;promote=24").contains("multiple"));
        assert!(err("fma;scale=fused").contains("mma families only"));
        assert!(err("fma;split=2;split=3").contains("given twice"));
        assert!(err("fma;tile=fresh").contains("needs ktile"));
        assert!(err("").contains("empty"));
    }
}
