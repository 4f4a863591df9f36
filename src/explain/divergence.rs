//! Where two orders diverge: the first differing node of their trees
//! ([`crate::order::Tree::diff`]), the term where it happens and the part,
//! tile or lane that term sits in on each side, the differences between the
//! two orders as mechanisms, and the data that localise it: the ULP map of a
//! row grouped by N-tile, and by K-chunk (the row evaluated with only the
//! terms up to each chunk boundary). Words are in `words.rs`.

use crate::gemm::{gemm, Matrix, Problem, MX_BLOCK};
use crate::order::{Divergence, Family, MxScale, Order, Tile};

/// Where term `k` sits in an order's parts.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    /// The term (a k index, or an MX block index for block terms).
    pub term: u32,
    /// The split part holding it, of how many, and the part's terms
    /// (first, last) for a contiguous split.
    pub part: Option<(u32, u32)>,
    pub part_range: Option<(u32, u32)>,
    /// The k-tile holding it and that tile's terms (first, last).
    pub tile: Option<(u32, (u32, u32))>,
    /// The GEMV lane holding it.
    pub lane: Option<u32>,
}

/// A difference between two orders that changes the tree or the numerics.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Mechanism {
    /// Different step arithmetic (fma, muladd, a tensor-core step).
    Family { left: String, right: String },
    /// Split-K changes (parts, contiguous or interleaved).
    Split { left: String, right: String },
    /// The parts are combined differently.
    Reduce { left: String, right: String },
    /// Fresh k-tiles appear, vanish or change width.
    Tiles { left: String, right: String },
    /// GEMV lanes change.
    Lanes { left: u32, right: u32 },
    /// Tensor-core promotion interval changes.
    Promote { left: String, right: String },
    /// Where MX scales enter changes.
    ScalePoint { left: String, right: String },
    /// The output conversion changes.
    Output { left: String, right: String },
}

/// Two orders compared for one K.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TreeDiff {
    pub left: Order,
    pub right: Order,
    pub k: usize,
    /// The first differing node (None: the same tree).
    pub divergence: Option<Divergence>,
    /// Terms consumed identically before the first difference.
    pub common_terms: u32,
    /// The first term each tree consumes from the divergent node on, and
    /// where it sits in that order.
    pub left_at: Option<Location>,
    pub right_at: Option<Location>,
    /// What differs between the two orders.
    pub mechanisms: Vec<Mechanism>,
}

/// ULP differences of one row over a tile of columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TileUlp {
    pub cols: (usize, usize),
    pub differ: usize,
    pub max_ulp: u64,
}

/// Differences of one row when only the terms `[0, k_end)` are present.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ChunkUlp {
    pub k_end: usize,
    pub differ: usize,
    pub max_ulp: u64,
}

/// Distance between two f32 values in ULP: steps between their bit
/// patterns on the ordered line, counted as the checker's reports count
/// them (`bi::verdict`, a cell's `max_ulp`), so an explanation of a cell
/// gives the cell's figure: -0 is one step below +0, so two values of
/// opposite signs are one step further apart than their magnitudes add up
/// to. NaN against anything else: u64::MAX; two NaN: 0.
pub fn ulp_distance(a: f32, b: f32) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() { 0 } else { u64::MAX };
    }
    let ord = |x: f32| -> i64 {
        let b = x.to_bits();
        if b >> 31 == 1 {
            -((b & 0x7FFF_FFFF) as i64) - 1
        } else {
            b as i64
        }
    };
    (ord(a) - ord(b)).unsigned_abs()
}

/// The number of terms of a tree for these inputs (k, or blocks).
fn terms_of(o: &Order, k: usize, mx: bool) -> usize {
    if mx && o.scale == MxScale::Block && o.mma().is_none() {
        k / MX_BLOCK
    } else {
        k
    }
}

/// Where term `t` of `terms` sits in order `o`.
pub fn locate(o: &Order, terms: usize, t: u32) -> Location {
    let mut loc = Location {
        term: t,
        part: None,
        part_range: None,
        tile: None,
        lane: None,
    };
    let tu = t as usize;
    if o.lanes > 1 {
        // lanes take no split; their fresh k-tiles are located below
        loc.lane = Some(t % o.lanes);
    }
    let s = o.split as usize;
    let tile_w = o.ktile.map(|x| x as usize);
    if s > 1 {
        if o.interleave {
            let tw = tile_w.unwrap_or(terms.max(1));
            let tile = tu / tw;
            loc.part = Some(((tile % s) as u32, s as u32));
            loc.tile = Some((
                tile as u32,
                ((tile * tw) as u32, ((tile + 1) * tw).min(terms) as u32 - 1),
            ));
        } else {
            let chunk = o.split_chunk(terms).max(1);
            let p = tu / chunk;
            loc.part = Some((p as u32, s as u32));
            loc.part_range = Some(((p * chunk) as u32, ((p + 1) * chunk).min(terms) as u32 - 1));
            if let (Tile::Fresh, Some(tw)) = (o.tile, tile_w) {
                let within = tu - p * chunk;
                let start = p * chunk + within / tw * tw;
                loc.tile = Some((
                    (within / tw) as u32,
                    (start as u32, (start + tw).min((p + 1) * chunk).min(terms) as u32 - 1),
                ));
            }
        }
    } else if let (Tile::Fresh, Some(tw)) = (o.tile, tile_w) {
        let tile = tu / tw;
        loc.tile = Some((
            tile as u32,
            ((tile * tw) as u32, ((tile + 1) * tw).min(terms) as u32 - 1),
        ));
    }
    loc
}

fn family_name(o: &Order) -> String {
    match o.family {
        Family::Fma => "fma".into(),
        Family::MulAdd => "muladd".into(),
        Family::Mma(_) => {
            let s = o.to_string();
            s.split(';').next().unwrap_or("").to_string()
        }
    }
}

/// The pair of orders, one from each side's reproducing set (`left`,
/// `right`, simplest first), that differ in the fewest mechanisms (ties:
/// the simplest); None when a side has none. Two observations explained
/// by this pair say what changed and nothing more (a row reproduced by both
/// `fma` and `muladd` is not said to change its step arithmetic when the
/// other side is `muladd;split=2`). At most the 64 simplest of each side
/// are paired.
pub fn nearest_pair(left: &[Order], right: &[Order]) -> Option<(Order, Order)> {
    let mut best: Option<(usize, usize, Order, Order)> = None;
    for (i, l) in left.iter().take(64).enumerate() {
        for (j, r) in right.iter().take(64).enumerate() {
            let key = (mechanisms(l, r).len(), i + j);
            if best.as_ref().is_none_or(|b| key < (b.0, b.1)) {
                best = Some((key.0, key.1, *l, *r));
            }
        }
    }
    best.map(|b| (b.2, b.3))
}

/// The differences between two orders, field by field.
pub fn mechanisms(l: &Order, r: &Order) -> Vec<Mechanism> {
    let mut v = Vec::new();
    let (fl, fr) = (family_name(l), family_name(r));
    if fl != fr {
        v.push(Mechanism::Family { left: fl, right: fr });
    }
    let split = |o: &Order| {
        if o.split <= 1 && !o.interleave {
            "none".to_string()
        } else if o.interleave {
            format!("{} interleaved k-tiles of {}", o.split, o.ktile.unwrap_or(0))
        } else {
            format!("{} contiguous parts", o.split)
        }
    };
    let (sl, sr) = (split(l), split(r));
    if sl != sr {
        v.push(Mechanism::Split { left: sl, right: sr });
    }
    let parts = |o: &Order| o.split > 1 || o.lanes > 1 || o.tile == Tile::Fresh;
    let red = |o: &Order| format!("{:?}", o.reduction()).to_lowercase();
    if parts(l) && parts(r) && red(l) != red(r) {
        v.push(Mechanism::Reduce {
            left: red(l),
            right: red(r),
        });
    }
    let tiles = |o: &Order| match (o.tile, o.ktile) {
        (Tile::Fresh, Some(t)) => format!("fresh tiles of {t}"),
        _ => "none".to_string(),
    };
    if tiles(l) != tiles(r) {
        v.push(Mechanism::Tiles {
            left: tiles(l),
            right: tiles(r),
        });
    }
    if l.lanes != r.lanes {
        v.push(Mechanism::Lanes {
            left: l.lanes,
            right: r.lanes,
        });
    }
    let prom = |o: &Order| o.promote.map_or("none".to_string(), |p| format!("every {p} k"));
    if l.promote != r.promote {
        v.push(Mechanism::Promote {
            left: prom(l),
            right: prom(r),
        });
    }
    let sc = |o: &Order| format!("{:?}", o.scale).to_lowercase();
    if l.scale != r.scale {
        v.push(Mechanism::ScalePoint {
            left: sc(l),
            right: sc(r),
        });
    }
    let out = |o: &Order| format!("{:?}", o.out).to_lowercase();
    if l.out != r.out {
        v.push(Mechanism::Output {
            left: out(l),
            right: out(r),
        });
    }
    v
}

/// Compares two orders for `k` inputs (`mx`: MX inputs, where block-scale
/// orders count blocks as terms). Call `Order::check_size` first for sizes
/// from outside.
pub fn diverge(left: &Order, right: &Order, k: usize, mx: bool) -> TreeDiff {
    let (tl, tr) = (terms_of(left, k, mx), terms_of(right, k, mx));
    let (a, b) = (left.compile(tl), right.compile(tr));
    let divergence = a.diff(&b);
    let mut common_terms = 0;
    let (mut left_at, mut right_at) = (None, None);
    if let Some(d) = &divergence {
        let at = d.node as usize;
        common_terms = a.nodes[..at.min(a.nodes.len())]
            .iter()
            .map(|n| n.terms().len() as u32)
            .sum();
        let next = |t: &crate::order::Tree| t.nodes.iter().skip(at).find_map(|n| n.terms().first().copied());
        left_at = next(&a).map(|x| locate(left, tl, x));
        right_at = next(&b).map(|x| locate(right, tr, x));
    }
    TreeDiff {
        left: *left,
        right: *right,
        k,
        divergence,
        common_terms,
        left_at,
        right_at,
        mechanisms: mechanisms(left, right),
    }
}

/// The ULP map of two versions of a row, grouped into tiles of `n_tile`
/// columns.
pub fn ulp_map(a: &[f32], b: &[f32], n_tile: usize) -> Vec<TileUlp> {
    let w = n_tile.max(1);
    a.chunks(w)
        .zip(b.chunks(w))
        .enumerate()
        .map(|(t, (x, y))| {
            let mut differ = 0;
            let mut max_ulp = 0;
            for (p, q) in x.iter().zip(y) {
                if p.to_bits() != q.to_bits() {
                    differ += 1;
                    max_ulp = max_ulp.max(ulp_distance(*p, *q));
                }
            }
            TileUlp {
                cols: (t * w, t * w + x.len() - 1),
                differ,
                max_ulp,
            }
        })
        .collect()
}

/// Row `row` under `left` and `right` with only the terms `[0, k_end)`
/// present (the others zeroed in A), for `k_end` at every multiple of
/// `chunk` (at most 64 chunks; rounded up to a multiple of 32 for MX
/// inputs): where along K the two orders start to give different bytes.
pub fn k_profile(p: &Problem, row: usize, left: &Order, right: &Order, chunk: usize) -> Result<Vec<ChunkUlp>, String> {
    let k = p.k;
    if row >= p.m {
        return Err(format!("row {row} is out of range (M = {})", p.m));
    }
    let mut chunk = chunk.max(k.div_ceil(64)).max(1);
    let mx = matches!(p.a, Matrix::Mx { .. });
    if mx {
        chunk = chunk.div_ceil(MX_BLOCK) * MX_BLOCK;
    }
    let mut out = Vec::new();
    let mut end = chunk.min(k);
    loop {
        let (x, y) = match p.a {
            Matrix::F32(a) => {
                let mut r = a[row * k..(row + 1) * k].to_vec();
                r[end..].fill(0.0);
                let q = Problem {
                    a: Matrix::F32(&r),
                    m: 1,
                    ..*p
                };
                (gemm(left, &q, None), gemm(right, &q, None))
            }
            Matrix::Mx { codes, scales, format } => {
                let kb = k / MX_BLOCK;
                let mut c = codes[row * k..(row + 1) * k].to_vec();
                c[end..].fill(0);
                let s = scales[row * kb..(row + 1) * kb].to_vec();
                let q = Problem {
                    a: Matrix::Mx {
                        codes: &c,
                        scales: &s,
                        format,
                    },
                    m: 1,
                    ..*p
                };
                (gemm(left, &q, None), gemm(right, &q, None))
            }
        };
        let (x, y) = (x.map_err(|e| e.to_string())?, y.map_err(|e| e.to_string())?);
        let t = ulp_map(&x, &y, x.len().max(1));
        out.push(ChunkUlp {
            k_end: end,
            differ: t.iter().map(|t| t.differ).sum(),
            max_ulp: t.iter().map(|t| t.max_ulp).max().unwrap_or(0),
        });
        if end >= k {
            break;
        }
        end = (end + chunk).min(k);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulp_distance_counts_steps() {
        assert_eq!(ulp_distance(1.0, 1.0), 0);
        assert_eq!(ulp_distance(1.0, f32::from_bits(1.0f32.to_bits() + 3)), 3);
        // as bi::verdict counts them: -0 is one step below +0
        assert_eq!(ulp_distance(0.0, -0.0), 1);
        assert_eq!(ulp_distance(f32::from_bits(1), -f32::from_bits(1)), 3);
        assert_eq!(ulp_distance(-1.0, -f32::from_bits(1.0f32.to_bits() + 2)), 2);
        assert_eq!(ulp_distance(f32::NAN, 1.0), u64::MAX);
    }

    #[test]
    fn split_boundary_is_located() {
        let l: Order = "fma".parse().unwrap();
        let r: Order = "fma;split=4".parse().unwrap();
        let d = diverge(&l, &r, 1024, false);
        assert_eq!(d.common_terms, 256);
        let at = d.right_at.unwrap();
        assert_eq!(at.term, 256);
        assert_eq!(at.part, Some((1, 4)));
        assert_eq!(at.part_range, Some((256, 511)));
        assert_eq!(d.mechanisms.len(), 1);
        assert!(matches!(d.mechanisms[0], Mechanism::Split { .. }));
    }
}
