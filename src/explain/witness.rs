//! Witnesses: one input on which two accumulation orders give different
//! output bytes, built from the model (pure CPU, no subject).
//!
//! # Contract
//! - [`build`] takes two orders L and R, the input type (every value of the
//!   witness is exactly representable in it), K and N, and returns a
//!   [`Search`]: [`Search::Found`] with a [`Witness`] (one row of A, length
//!   K, and B, `[K, N]` row-major) on which `gemm(L)` and `gemm(R)` differ
//!   in at least one output's bits (checked by evaluating both, never
//!   assumed); [`Search::Equivalent`] when the two orders compile to the
//!   same computation for K (`candidates::order_key`: the same tree, input
//!   type and scale point), so no witness can exist; [`Search::NotFound`]
//!   when `tries` attempts found none (the orders may still differ on some
//!   input, e.g. `fma` vs `muladd` differ on no bf16 input).
//! - Bounded and deterministic: at most `tries` attempts, each two model
//!   evaluations of one `[1, K] x [K, N]` problem; attempt `i` is drawn from
//!   `SplitMix64::for_item(seed, i)`, so the same arguments give the same
//!   witness on any thread count.
//! - How attempts aim (each of the N columns of B is its own probe, so one
//!   attempt tries N probes):
//!   - **Absorption probes** (three attempts in four): a big `+H` and `-H`
//!     (as a product `a[k] * B[k, j]`) at two positions drawn near the
//!     points where the trees differ: the first diverging node of
//!     [`super::diverge`] (its term and the part and tile it sits in on
//!     each side) and every split, k-tile, tensor-core step, promotion and
//!     lane boundary of either order. Between and around them a window of
//!     at most 64 small units `u`: an accumulator holding `±H` absorbs the
//!     units added to it, one that does not counts them, so two orders
//!     whose partial sums pair `H` and `-H` at different points count
//!     different numbers of units. The counted result is a small multiple
//!     of `u` (at most 64 units per column), exact in bf16 and f16 outputs,
//!     so the difference survives the output rounding.
//!   - **Random fallback** (one attempt in four): values spread over a
//!     wide exponent range, alternating with cancelling pairs (`x` and `-x`
//!     at random positions, so the sum is small and every order's rounding
//!     errors show).

use super::candidates::order_key;
use super::divergence::{diverge, Location};
use crate::format::pow2_f32;
use crate::gemm::{gemm, representable, BLayout, Matrix, Problem};
use crate::order::{InType, Order, OutFmt, Tile};
use crate::rng::SplitMix64;

/// Knobs of the search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WitnessOptions {
    pub seed: u64,
    /// Most attempts (each evaluates both orders once).
    pub tries: usize,
}

impl Default for WitnessOptions {
    fn default() -> Self {
        WitnessOptions { seed: 1, tries: 64 }
    }
}

/// Most attempts a search may be asked for.
pub const MAX_TRIES: usize = 4096;

/// How an attempt's inputs were drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Probe {
    /// `+H`, `-H` and a window of units per column.
    Absorption,
    /// Random values over a wide exponent range.
    Wide,
    /// Random values in cancelling pairs.
    Cancel,
}

impl Probe {
    pub const fn name(self) -> &'static str {
        match self {
            Probe::Absorption => "absorption",
            Probe::Wide => "wide",
            Probe::Cancel => "cancel",
        }
    }
}

/// An input on which two orders give different bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Witness {
    pub left: Order,
    pub right: Order,
    pub input: InType,
    pub k: usize,
    pub n: usize,
    /// The row of A (K values).
    pub a: Vec<f32>,
    /// B, `[K, N]` row-major.
    pub b: Vec<f32>,
    /// The output row under each order (N values, bits as computed).
    pub left_out: Vec<f32>,
    pub right_out: Vec<f32>,
    /// Columns whose bits differ (at least one).
    pub columns: Vec<usize>,
    /// The attempt that found it (0-based) and how it was drawn.
    pub attempt: usize,
    pub probe: Probe,
    pub seed: u64,
}

impl Witness {
    /// A 64-bit FNV-1a digest of the witness's bytes (A's row, then B), to
    /// name it in reports.
    pub fn digest(&self) -> u64 {
        let mut h = 0xCBF2_9CE4_8422_2325u64;
        for x in self.a.iter().chain(self.b.iter()) {
            for byte in x.to_bits().to_le_bytes() {
                h ^= byte as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01B3);
            }
        }
        h
    }
}

/// What a search found.
#[derive(Clone, Debug, PartialEq)]
pub enum Search {
    Found(Box<Witness>),
    /// The orders are the same computation for K: no witness exists.
    Equivalent,
    /// No attempt separated them.
    NotFound {
        tries: usize,
    },
}

impl Search {
    /// The witness, if found.
    pub fn witness(&self) -> Option<&Witness> {
        match self {
            Search::Found(w) => Some(w),
            _ => None,
        }
    }
}

/// The value levels of an input type: `a_big * b_big` is H, `a_small *
/// b_small` the unit, both exactly representable factors.
#[derive(Clone, Copy, Debug)]
struct Levels {
    a_big: f32,
    b_big: f32,
    a_small: f32,
    b_small: f32,
    /// log2 of the largest and smallest normal power of two of the type.
    e_max: i32,
    e_min: i32,
}

impl Levels {
    fn of(t: InType) -> Levels {
        let e_min = t.emin();
        let e_max = (e_min..=127)
            .rev()
            .find(|&e| representable(pow2_f32(e), t))
            .unwrap_or(0);
        // H = 2^(2 * big) at most 2^40; the unit 1 when the type holds a
        // product ratio of 2^28 around 1, else the smallest normal squared
        let big = e_max.min(20);
        let small = if 2 * big >= 28 { 0 } else { e_min };
        Levels {
            a_big: pow2_f32(big),
            b_big: pow2_f32(big),
            a_small: pow2_f32(small),
            b_small: pow2_f32(small),
            e_max,
            e_min,
        }
    }
}

/// Multiples of `step` in `1..k`, all when at most 32 of them, else the
/// first 8, the last 4 and 16 evenly spaced.
fn multiples(step: usize, k: usize, out: &mut Vec<usize>) {
    if step == 0 || step >= k {
        return;
    }
    let count = (k - 1) / step;
    if count <= 32 {
        out.extend((1..=count).map(|i| i * step));
    } else {
        out.extend((1..=8).map(|i| i * step));
        out.extend((count - 3..=count).map(|i| i * step));
        out.extend((1..=16).map(|i| i * count / 17 * step));
    }
}

/// Where an order's partial sums start or end: split parts, k-tiles,
/// tensor-core steps, promotion blocks, lane residues.
fn boundaries(o: &Order, k: usize, out: &mut Vec<usize>) {
    if o.split > 1 && !o.interleave {
        multiples(o.split_chunk(k), k, out);
    }
    if let Some(t) = o.ktile {
        if o.interleave || o.tile == Tile::Fresh {
            multiples(t as usize, k, out);
        }
    }
    if let Some(m) = o.mma() {
        multiples(m.k as usize, k, out);
    }
    if let Some(p) = o.promote {
        multiples(p as usize, k, out);
    }
    if o.lanes > 1 {
        out.extend(0..(o.lanes as usize).min(64).min(k));
    }
}

fn location_points(l: &Location, out: &mut Vec<usize>) {
    out.push(l.term as usize);
    if let Some((a, b)) = l.part_range {
        out.extend([a as usize, b as usize]);
    }
    if let Some((_, (a, b))) = l.tile {
        out.extend([a as usize, b as usize]);
    }
}

/// The positions absorption probes are aimed at: each boundary and
/// divergence point, with its neighbours, sorted and distinct.
fn points(left: &Order, right: &Order, k: usize) -> Vec<usize> {
    let mut raw = vec![0, k / 2, k - 1];
    let d = diverge(left, right, k, false);
    for l in [&d.left_at, &d.right_at].into_iter().flatten() {
        location_points(l, &mut raw);
    }
    boundaries(left, k, &mut raw);
    boundaries(right, k, &mut raw);
    let mut v: Vec<usize> = raw
        .into_iter()
        .flat_map(|x| [x.saturating_sub(1), x, x + 1])
        .filter(|&x| x < k)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Most units one absorption column holds: the counted result stays an
/// integer multiple of the unit below 2^8, exact in every output format.
const MAX_UNITS: usize = 64;

/// One absorption attempt: A's row and B.
fn absorption(
    r: &mut SplitMix64,
    pts: &[usize],
    lv: &Levels,
    strides: &[usize],
    k: usize,
    n: usize,
) -> (Vec<f32>, Vec<f32>) {
    let pick = |r: &mut SplitMix64| -> usize {
        if r.chance(1, 8) {
            r.below(k as u64) as usize
        } else {
            pts[r.below(pts.len() as u64) as usize]
        }
    };
    let want = 2 + r.below(5) as usize;
    let mut slots: Vec<usize> = Vec::new();
    for _ in 0..4 * want {
        if slots.len() >= want.min(k) {
            break;
        }
        let s = pick(r);
        if !slots.contains(&s) {
            slots.push(s);
        }
    }
    let mut a = vec![lv.a_small; k];
    for &s in &slots {
        a[s] = lv.a_big;
    }
    let mut b = vec![0f32; k * n];
    for j in 0..n {
        if slots.len() >= 2 {
            let p = slots[r.below(slots.len() as u64) as usize];
            let q = loop {
                let q = slots[r.below(slots.len() as u64) as usize];
                if q != p {
                    break q;
                }
            };
            // H, sometimes a few binades lower (partial absorption)
            let drop = if r.chance(1, 4) { r.below(12) as i32 } else { 0 };
            let e = (lv.b_big.log2() as i32 - drop).max(lv.e_min);
            let h = if r.chance(1, 2) { pow2_f32(e) } else { -pow2_f32(e) };
            b[p * n + j] = h;
            b[q * n + j] = -h;
        }
        let units = 1 + r.below(MAX_UNITS.min(k) as u64) as usize;
        let start = if r.chance(1, 4) {
            r.below(k as u64) as usize
        } else {
            let x = pick(r) as i64;
            (x + r.range_i64(-(units as i64), units as i64)).clamp(0, k as i64 - 1) as usize
        };
        let stride = strides[r.below(strides.len() as u64) as usize];
        let mixed = r.chance(1, 4);
        for i in 0..units {
            let pos = (start + i * stride) % k;
            if slots.contains(&pos) {
                continue;
            }
            let neg = mixed && r.chance(1, 2);
            b[pos * n + j] = if neg { -lv.b_small } else { lv.b_small };
        }
    }
    (a, b)
}

/// A random value of type `t` with magnitude in `[2^lo, 2^hi)`, never zero.
fn value(r: &mut SplitMix64, t: InType, lo: i32, hi: i32) -> f32 {
    loop {
        let e = r.range_i64(lo as i64, hi as i64 - 1) as i32;
        let m = 1.0 + (r.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
        let v = if r.chance(1, 2) {
            -m * pow2_f32(e)
        } else {
            m * pow2_f32(e)
        };
        // keep the significand bits the type has (toward zero)
        let v = match t.params() {
            None => v,
            Some(p) => {
                let drop = 23 - p.mbits;
                f32::from_bits(v.to_bits() >> drop << drop)
            }
        };
        if v != 0.0 && v.is_finite() && representable(v, t) {
            return v;
        }
    }
}

/// One random attempt: wide values, or cancelling pairs.
fn random(r: &mut SplitMix64, t: InType, lv: &Levels, cancel: bool, k: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
    // spread over at most 2^-16..2^16, inside the type's normal range
    let lo = lv.e_min.max(-16);
    let hi = (lv.e_max + 1).min(16);
    if !cancel {
        let a: Vec<f32> = (0..k).map(|_| value(r, t, lo, hi)).collect();
        let b: Vec<f32> = (0..k * n).map(|_| value(r, t, lo, hi)).collect();
        return (a, b);
    }
    let a = vec![1.0f32; k];
    let mut b = vec![0f32; k * n];
    for j in 0..n {
        let mut idx: Vec<usize> = (0..k).collect();
        for i in (1..k).rev() {
            idx.swap(i, r.below(i as u64 + 1) as usize);
        }
        for pair in idx.chunks(2) {
            let x = value(r, t, lo, hi);
            b[pair[0] * n + j] = x;
            if let Some(&q) = pair.get(1) {
                // most pairs cancel exactly, a few keep a remainder
                b[q * n + j] = if r.chance(1, 8) { value(r, t, lo, hi) } else { -x };
            }
        }
    }
    (a, b)
}

/// Evaluates `order` on the one-row problem.
fn eval(order: &Order, a: &[f32], b: &[f32], k: usize, n: usize) -> Result<Vec<f32>, String> {
    let p = Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m: 1,
        n,
        k,
        b_layout: BLayout::Kn,
    };
    gemm(order, &p, None).map_err(|e| format!("order {order}: {e}"))
}

/// Searches for a witness (see the module doc). Err: a size out of bounds,
/// an order too large for K, or an order that cannot run on inputs of
/// `input` (a tensor-core order reading another type).
pub fn build(
    left: &Order,
    right: &Order,
    input: InType,
    k: usize,
    n: usize,
    opts: WitnessOptions,
) -> Result<Search, String> {
    use crate::limits::{check_k, MAX_TREE};
    if k == 0 || n == 0 {
        return Err(format!("witness: K = {k}, N = {n}: expected K >= 1 and N >= 1"));
    }
    check_k("witness: K", k)?;
    if k.checked_mul(n).is_none_or(|x| x > MAX_TREE) {
        return Err(format!("witness: K*N = {k}*{n} is larger than {MAX_TREE}"));
    }
    if opts.tries == 0 || opts.tries > MAX_TRIES {
        return Err(format!("witness: tries = {}: expected 1..={MAX_TRIES}", opts.tries));
    }
    for o in [left, right] {
        o.check_size(k).map_err(|e| e.to_string())?;
        if let Some(m) = o.mma() {
            if m.input != input && !(input != InType::F32 && holds(m.input, input)) {
                return Err(format!(
                    "witness: order {o} reads {} inputs, not {}",
                    m.input.name(),
                    input.name()
                ));
            }
        }
    }
    if order_key(left, k) == order_key(right, k) {
        return Ok(Search::Equivalent);
    }
    let lv = Levels::of(input);
    let pts = points(left, right, k);
    let mut strides = vec![1, 1, 1, 2];
    for o in [left, right] {
        if o.lanes > 1 {
            strides.push(o.lanes as usize);
        }
        if let Some(m) = o.mma() {
            strides.push(m.k as usize);
        }
        if o.interleave {
            strides.push(o.ktile.unwrap_or(1) as usize);
        }
    }
    for attempt in 0..opts.tries {
        let mut r = SplitMix64::for_item(opts.seed ^ 0x5717_E55E, attempt as u64);
        let (probe, (a, b)) = if attempt % 4 == 3 {
            let cancel = (attempt / 4) % 2 == 1;
            let p = if cancel { Probe::Cancel } else { Probe::Wide };
            (p, random(&mut r, input, &lv, cancel, k, n))
        } else {
            (Probe::Absorption, absorption(&mut r, &pts, &lv, &strides, k, n))
        };
        let lo = eval(left, &a, &b, k, n)?;
        let ro = eval(right, &a, &b, k, n)?;
        let columns: Vec<usize> = (0..n).filter(|&j| lo[j].to_bits() != ro[j].to_bits()).collect();
        if !columns.is_empty() {
            return Ok(Search::Found(Box::new(Witness {
                left: *left,
                right: *right,
                input,
                k,
                n,
                a,
                b,
                left_out: lo,
                right_out: ro,
                columns,
                attempt,
                probe,
                seed: opts.seed,
            })));
        }
    }
    Ok(Search::NotFound { tries: opts.tries })
}

/// Whether every value of `inner` is a value of `outer` (both narrow).
fn holds(outer: InType, inner: InType) -> bool {
    use crate::order::InType::*;
    matches!((outer, inner), (Bf16, E4M3) | (F16, E4M3) | (Bf16, E5M2) | (F16, E5M2)) || outer == inner
}

/// Whether an order's output is narrower than f32.
pub fn narrow_output(o: &Order) -> bool {
    o.out != OutFmt::F32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(s: &str) -> Order {
        s.parse().unwrap()
    }

    #[test]
    fn levels_are_representable_and_far_apart() {
        for t in InType::ALL {
            let lv = Levels::of(t);
            for v in [lv.a_big, lv.b_big, lv.a_small, lv.b_small] {
                assert!(representable(v, t), "{}: {v}", t.name());
            }
            let ratio = (lv.a_big * lv.b_big / (lv.a_small * lv.b_small)).log2();
            assert!(ratio >= 28.0, "{}: 2^{ratio}", t.name());
        }
    }

    #[test]
    fn probes_aim_at_the_divergence_and_every_boundary() {
        // fma vs split=4 at K = 1024: the trees part at term 256 (where
        // part 1 starts); split=4's parts start at 256, 512, 768
        let p = points(&o("fma;out=bf16"), &o("fma;split=4;out=bf16"), 1024);
        for x in [0, 255, 256, 257, 511, 512, 767, 768, 1023] {
            assert!(p.contains(&x), "{x}: {p:?}");
        }
        let d = diverge(&o("fma"), &o("fma;split=4"), 1024, false);
        assert_eq!(d.right_at.map(|l| l.term), Some(256));
        // lanes: every residue; tensor-core steps: multiples of the mma k
        let p = points(&o("fma;lanes=8"), &o("hopper-bf16"), 256);
        for x in [1, 6, 7, 16, 32, 240] {
            assert!(p.contains(&x), "{x}: {p:?}");
        }
        // many boundaries are sampled, not all listed
        let p = points(&o("fma;ktile=8;tile=fresh"), &o("fma"), 16384);
        assert!(p.len() < 200 && p.contains(&8) && p.contains(&16376), "{}", p.len());
    }

    #[test]
    fn equal_trees_are_equivalent_and_sizes_are_bounded() {
        let w = WitnessOptions::default();
        assert_eq!(
            build(&o("fma;split=1"), &o("fma"), InType::F32, 64, 4, w),
            Ok(Search::Equivalent)
        );
        assert!(build(&o("fma"), &o("fma"), InType::F32, 0, 4, w).is_err());
        assert!(build(&o("fma"), &o("fma"), InType::F32, 4, 0, w).is_err());
        let none = WitnessOptions { tries: 0, ..w };
        assert!(build(&o("fma"), &o("muladd"), InType::F32, 4, 4, none).is_err());
        let e = build(&o("hopper-bf16"), &o("fma"), InType::F32, 64, 4, w).unwrap_err();
        assert!(e.contains("reads bf16 inputs"), "{e}");
    }
}
