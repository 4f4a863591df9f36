//! The bounded, enumerable order families the explainer searches.
//!
//! A family is a finite list of canonical orders for one K: the plain
//! families (`fma`, `muladd`) with every contiguous split-K up to 128 parts
//! (serial and pairwise), interleaved splits (serial, pairwise, and
//! butterfly for 2, 4, 8, 16 or 32 parts), fresh k-tiles alone and inside
//! splits, GEMV lanes (butterfly, serial, pairwise), and lanes cut into
//! fresh k-tiles (8, 16 or 32 lanes, 8 to 64 terms per lane and tile,
//! butterfly or serial); the tensor-core presets
//! whose input type holds the inputs, with splits (2, 3, 4, 8 parts,
//! serial, pairwise, or starting on multiples of 32 to 256 k) and
//! promotion intervals;
//! for MX inputs every scale point (the block-scale layouts counted in
//! blocks of 32 k, k-tiles of 1..32 blocks); each with the three output
//! formats.
//! Orders whose tree for K is the same tree are kept once (the first,
//! simplest spelling). Dispatch entries are added as their own candidates.

use crate::gemm::{Matrix, Problem};
use crate::order::{InType, Order, PRESETS};
use std::collections::HashSet;

/// Where a candidate came from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Source {
    /// The built-in family.
    Family,
    /// Entry `index` of a dispatch table.
    Dispatch { index: usize },
}

/// One order to try.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Candidate {
    pub order: Order,
    pub source: Source,
}

/// What the inputs of a problem are, for choosing applicable orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inputs {
    /// Plain values, and which narrower types hold every one of them exactly.
    Values {
        bf16: bool,
        f16: bool,
        e4m3: bool,
        e5m2: bool,
    },
    /// MX codes and scales.
    Mx,
}

impl Inputs {
    /// Inspects the operands of `p`.
    pub fn of(p: &Problem) -> Inputs {
        let (a, b) = match (p.a, p.b) {
            (Matrix::F32(a), Matrix::F32(b)) => (a, b),
            _ => return Inputs::Mx,
        };
        let holds = |t: InType| a.iter().chain(b).all(|&v| representable(v, t));
        Inputs::Values {
            bf16: holds(InType::Bf16),
            f16: holds(InType::F16),
            e4m3: holds(InType::E4M3),
            e5m2: holds(InType::E5M2),
        }
    }

    /// Inputs whose values are all of type `t` (and so of every wider type).
    pub fn of_type(t: InType) -> Inputs {
        use InType::*;
        let fp8 = matches!(t, E4M3 | E5M2);
        Inputs::Values {
            bf16: t == Bf16 || fp8,
            f16: t == F16 || fp8,
            e4m3: t == E4M3,
            e5m2: t == E5M2,
        }
    }

    fn holds(&self, t: InType) -> bool {
        match *self {
            Inputs::Mx => matches!(t, InType::E4M3),
            Inputs::Values { bf16, f16, e4m3, e5m2 } => match t {
                InType::F32 => true,
                InType::Bf16 => bf16,
                InType::F16 => f16,
                InType::E4M3 => e4m3,
                InType::E5M2 => e5m2,
            },
        }
    }
}

fn representable(v: f32, t: InType) -> bool {
    let Some(f) = t.format() else { return true };
    if !v.is_finite() {
        return false;
    }
    match crate::format::encode_f32(v, f, &crate::format::CastPolicy::ieee(f), 0) {
        Ok(c) => f.decode_f32(c).to_bits() == v.to_bits() || (v == 0.0 && f.decode_f32(c) == 0.0),
        Err(_) => false,
    }
}

/// Where the tensor-core orders' contiguous split parts may start
/// (`align`, docs/ORDERS.md "Parts").
const SPLIT_ALIGNS: &[u32] = &[32, 64, 128, 256];

/// The split counts tried (contiguous), in order of simplicity.
const SPLITS: &[u32] = &[
    2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
    33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 56, 64, 72, 80, 96, 112, 128,
];
const TILES: &[u32] = &[8, 16, 32, 64, 128, 256, 512, 1024];
const INTERLEAVE_SPLITS: &[u32] = &[2, 3, 4, 6, 8, 16, 32];
const LANES: &[u32] = &[2, 4, 8, 16, 32, 64, 128, 256];
/// Lanes cut into fresh k-tiles (the cuBLAS sgemm GEMV shape): the lane
/// counts, and the terms each lane takes per k-tile (the k-tile is
/// `lanes x terms` wide).
const TILED_LANES: &[u32] = &[8, 16, 32];
const TERMS_PER_LANE_TILE: &[u32] = &[8, 16, 32, 64];

fn parse(s: &str) -> Option<Order> {
    s.parse().ok()
}

/// The k-tiles tried for block-scale orders, in blocks of 32 k (a 128-wide
/// k-tile is 4 blocks).
const BLOCK_TILES: &[u32] = &[1, 2, 4, 8, 16, 32];

/// The part layouts (keys after the family) for K, simplest first.
fn layouts(k: usize, mma_k: Option<u32>) -> Vec<String> {
    layouts_with(k, mma_k, TILES)
}

/// [`layouts`] with the k-tiles `tiles`.
fn layouts_with(k: usize, mma_k: Option<u32>, tiles: &[u32]) -> Vec<String> {
    let k32 = k as u32;
    let mut v = vec![String::new()];
    for &s in SPLITS.iter().filter(|&&s| s < k32) {
        v.push(format!(";split={s}"));
        if s > 2 {
            v.push(format!(";split={s};reduce=pairwise"));
        }
    }
    let tile_ok = |t: u32| t < k32 && mma_k.is_none_or(|m| t.is_multiple_of(m));
    for &t in tiles.iter().filter(|&&t| tile_ok(t)) {
        v.push(format!(";ktile={t};tile=fresh"));
        v.push(format!(";ktile={t};tile=fresh;reduce=pairwise"));
    }
    for &s in INTERLEAVE_SPLITS {
        for &t in tiles.iter().filter(|&&t| tile_ok(t) && t * s <= k32) {
            v.push(format!(";ktile={t};split={s}/interleave"));
            v.push(format!(";ktile={t};split={s}/interleave;reduce=pairwise"));
            if s.is_power_of_two() {
                v.push(format!(";ktile={t};split={s}/interleave;reduce=butterfly"));
            }
        }
    }
    for &s in &[2u32, 4, 8] {
        for &t in tiles.iter().filter(|&&t| tile_ok(t) && t * s < k32) {
            v.push(format!(";ktile={t};tile=fresh;split={s}"));
        }
    }
    if mma_k.is_none() {
        for &l in LANES.iter().filter(|&&l| l < k32) {
            v.push(format!(";lanes={l}"));
            v.push(format!(";lanes={l};reduce=serial"));
            v.push(format!(";lanes={l};reduce=pairwise"));
        }
        for &l in TILED_LANES {
            for t in TERMS_PER_LANE_TILE.iter().map(|&m| l * m).filter(|&t| t < k32) {
                v.push(format!(";lanes={l};ktile={t};tile=fresh"));
                v.push(format!(";lanes={l};ktile={t};tile=fresh;reduce=serial"));
            }
        }
    }
    v
}

/// Families built in this process, by inputs and K (at most
/// [`FAMILY_CACHE`] kept; a full cache is emptied): building one compiles
/// and digests every order's tree for K (about 1,400 trees at K = 4096,
/// most of a reveal's CPU time after its launches), and a process that
/// explains many launches asks for the same few again.
static FAMILIES: std::sync::OnceLock<std::sync::Mutex<Families>> = std::sync::OnceLock::new();

/// The built families, by inputs and K.
type Families = std::collections::HashMap<(Inputs, usize), Vec<Candidate>>;

/// Most families kept in [`FAMILIES`].
const FAMILY_CACHE: usize = 16;

/// The built-in family for inputs `inputs` and `k` terms (see the module
/// doc), each order's tree distinct for K. The same list on every call
/// (built once per process and kept, see [`FAMILIES`]).
pub fn family(inputs: Inputs, k: usize) -> Vec<Candidate> {
    let cache = FAMILIES.get_or_init(Default::default);
    if let Some(f) = cache.lock().ok().and_then(|c| c.get(&(inputs, k)).cloned()) {
        return f;
    }
    let f = build_family(inputs, k);
    if let Ok(mut c) = cache.lock() {
        if c.len() >= FAMILY_CACHE {
            c.clear();
        }
        c.insert((inputs, k), f.clone());
    }
    f
}

fn build_family(inputs: Inputs, k: usize) -> Vec<Candidate> {
    let mut specs: Vec<String> = Vec::new();
    let outs = ["", ";out=bf16", ";out=f16"];
    let mx = inputs == Inputs::Mx;
    for base in ["fma", "muladd"] {
        for lay in layouts(k, None) {
            for out in outs {
                specs.push(format!("{base}{lay}{out}"));
            }
        }
        // block-scale parts, tiles and lanes count blocks of 32 k
        if mx {
            for lay in layouts_with(k / crate::gemm::MX_BLOCK, None, BLOCK_TILES) {
                for out in outs {
                    specs.push(format!("{base}{lay};scale=block{out}"));
                }
            }
        }
    }
    for (name, exp) in PRESETS {
        let Some(o) = parse(exp) else { continue };
        let m = o.mma().expect("presets are mma orders");
        let scale_fused = o.scale == crate::order::MxScale::Fused;
        let applies = if mx {
            m.input == InType::E4M3 || m.input == InType::E5M2
        } else {
            !scale_fused && inputs.holds(m.input)
        };
        if !applies {
            continue;
        }
        let mut lays = vec![String::new()];
        for s in [2u32, 3, 4, 8] {
            if (s * m.k) as usize <= k {
                lays.push(format!(";split={s}"));
                lays.push(format!(";split={s};reduce=pairwise"));
                // split-K slices that start on a k-tile (cuBLAS's bf16
                // GEMV at N = 64: 3 parts of 11 x 128); the family keeps
                // those whose tree differs from the plain split at this K
                for a in SPLIT_ALIGNS {
                    lays.push(format!(";split={s};align={a}"));
                }
            }
        }
        for out in outs {
            for lay in &lays {
                specs.push(format!("{name}{lay}{out}"));
            }
            if o.promote.is_none() && m.f == 13 && !scale_fused {
                for p in [32u32, 64, 128, 256] {
                    if p % m.k == 0 && (p as usize) < k {
                        specs.push(format!("{exp};promote={p}{out}"));
                    }
                }
            }
            if mx && !scale_fused && o.promote.is_none() {
                specs.push(format!("{exp};promote=32;scale=block{out}"));
            }
        }
    }
    dedupe(specs.iter().filter_map(|s| parse(s)), k)
        .into_iter()
        .map(|order| Candidate {
            order,
            source: Source::Family,
        })
        .collect()
}

/// The family's spellings that differ from `order` only in where its
/// split parts start (`align`, [`SPLIT_ALIGNS`] or none) and have its tree
/// for K: the family keeps one of them (the first), so a name chosen
/// among them does not tell which (docs/EXPLAIN.md, "What a wide node
/// costs"). Empty for an order without a contiguous split, and for the
/// `fma`/`muladd` orders (the family aligns only tensor-core splits).
pub fn same_parts(order: &Order, k: usize) -> Vec<Order> {
    if order.split < 2 || order.interleave || order.lanes > 1 || order.mma().is_none() {
        return Vec::new();
    }
    let key = order_key(order, k);
    std::iter::once(None)
        .chain(SPLIT_ALIGNS.iter().map(|&a| Some(a)))
        .map(|align| Order { align, ..*order })
        .filter(|o| o != order && o.to_string().parse::<Order>().as_ref() == Ok(o))
        .filter(|o| order_key(o, k) == key)
        .collect()
}

/// The built-in family plus the entries of a dispatch table (each kept
/// even when the family already holds its order, so reports can name it).
pub fn with_dispatch(inputs: Inputs, k: usize, entries: &[Order]) -> Vec<Candidate> {
    let mut v: Vec<Candidate> = entries
        .iter()
        .enumerate()
        .map(|(index, o)| Candidate {
            order: *o,
            source: Source::Dispatch { index },
        })
        .collect();
    let have: HashSet<Order> = entries.iter().copied().collect();
    v.extend(family(inputs, k).into_iter().filter(|c| !have.contains(&c.order)));
    v
}

/// Orders kept once per distinct tree for K (first spelling wins), after
/// dropping orders whose tree would exceed the size limits.
pub fn dedupe(orders: impl Iterator<Item = Order>, k: usize) -> Vec<Order> {
    use rayon::prelude::*;
    let mut seen_orders = HashSet::new();
    let orders: Vec<Order> = orders
        .filter(|o| seen_orders.insert(*o) && o.check_size(k).is_ok())
        .collect();
    let keys: Vec<u64> = orders.par_iter().map(|o| order_key(o, k)).collect();
    let mut seen_trees = HashSet::new();
    orders
        .into_iter()
        .zip(keys)
        .filter(|(_, key)| seen_trees.insert(*key))
        .map(|(o, _)| o)
        .collect()
}

/// A 64-bit digest of what an order computes for K inputs: its tree (over
/// MX blocks for block-scale fma/muladd orders) and its scale point. Equal
/// keys, the same computation on every input.
pub fn order_key(o: &Order, k: usize) -> u64 {
    use std::hash::{Hash, Hasher};
    let blocks = o.scale == crate::order::MxScale::Block && o.mma().is_none();
    let t = o.compile(if blocks { k / crate::gemm::MX_BLOCK } else { k });
    let mut h = std::collections::hash_map::DefaultHasher::new();
    t.nodes.hash(&mut h);
    t.root.hash(&mut h);
    t.input.hash(&mut h);
    o.scale.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache hands back the list a fresh build gives.
    /// The spellings whose parts start elsewhere but cut the same parts:
    /// tensor-core splits only (the family aligns no other), the order
    /// itself left out.
    #[test]
    fn same_parts_lists_the_aligned_spellings_of_one_tree() {
        let o: Order = "hopper-bf16;split=3;out=bf16".parse().unwrap();
        let got: Vec<String> = same_parts(&o, 384).iter().map(|o| o.to_string()).collect();
        assert_eq!(
            got,
            [
                "mma(k=16,f=25);split=3;align=32;out=bf16",
                "mma(k=16,f=25);split=3;align=64;out=bf16",
                "mma(k=16,f=25);split=3;align=128;out=bf16"
            ]
        );
        let named: Order = "hopper-bf16;split=3;align=64".parse().unwrap();
        let got: Vec<String> = same_parts(&named, 4096).iter().map(|o| o.to_string()).collect();
        assert_eq!(got, ["mma(k=16,f=25);split=3;align=128"]);
        assert!(same_parts(&"fma;split=4".parse().unwrap(), 256).is_empty());
        assert!(same_parts(&"hopper-bf16".parse().unwrap(), 256).is_empty());
    }

    #[test]
    fn a_cached_family_is_the_built_one() {
        for (inputs, k) in [(Inputs::of_type(InType::F32), 300), (Inputs::Mx, 256)] {
            let built: Vec<Order> = build_family(inputs, k).iter().map(|c| c.order).collect();
            for _ in 0..2 {
                let got: Vec<Order> = family(inputs, k).iter().map(|c| c.order).collect();
                assert_eq!(got, built);
            }
        }
    }

    #[test]
    fn families_are_large_distinct_and_valid() {
        let f = family(Inputs::of_type(InType::F32), 4096);
        assert!(f.len() >= 1000, "{}", f.len());
        let specs: HashSet<String> = f.iter().map(|c| c.order.to_string()).collect();
        assert_eq!(specs.len(), f.len());
        assert!(specs.contains("fma;split=4"));
        assert!(specs.contains("muladd;lanes=32"));
        // the cuBLAS sgemm GEMV tree at K = 4096
        assert!(specs.contains("fma;ktile=512;tile=fresh;lanes=16;reduce=serial"));
        assert!(specs.contains("muladd;ktile=64;tile=fresh;lanes=8;out=bf16"));
        // bf16 inputs bring the bf16 tensor-core presets
        let b = family(Inputs::of_type(InType::Bf16), 256);
        assert!(b.iter().any(|c| c.order.preset_name() == Some("hopper-bf16")));
        assert!(!family(Inputs::of_type(InType::F32), 256)
            .iter()
            .any(|c| c.order.mma().is_some()));
        let e = family(Inputs::of_type(InType::E4M3), 256);
        assert!(e.iter().any(|c| c.order.preset_name() == Some("deepgemm-fp8")));
    }

    #[test]
    fn dispatch_entries_come_first() {
        let o: Order = "fma;split=4".parse().unwrap();
        let v = with_dispatch(Inputs::of_type(InType::F32), 256, &[o]);
        assert_eq!(v[0].source, Source::Dispatch { index: 0 });
        assert_eq!(v.iter().filter(|c| c.order == o).count(), 1);
    }
}
