//! Naming the recovered shape, first step: the family's orders whose tree
//! has the recovered shape (by digest, then compared in full), or the
//! nearest one by tree edges when none has it (module doc of `reveal`).

use super::super::candidates;
use super::super::shape::Shape;
use super::verify::{order_shape, shape_key};
use crate::order::Order;
use rustc_hash::FxHashMap as HashMap;

/// Digests of the canonical shapes of a family's shape keys, by (K, MX):
/// a recovered shape is first looked up by its digest, and only the keys
/// with its digest are compiled again and compared in full; the distances
/// to every key (the nearest order, when none has the shape) are computed
/// only on a miss. At most [`SHAPE_DIGESTS`] entries are kept.
static DIGESTS: std::sync::OnceLock<std::sync::Mutex<Digests>> = std::sync::OnceLock::new();

/// Per (K, MX): each shape key and its canonical shape's digest.
type Digests = HashMap<(usize, bool), Vec<(Order, u64)>>;

/// Most (K, MX) entries kept in [`DIGESTS`] (a full map is emptied).
const SHAPE_DIGESTS: usize = 16;

fn digest(canon: &[[u32; 4]]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    canon.hash(&mut h);
    h.finish()
}

/// The digests of `uniq`'s canonical shapes for K (cached, see [`DIGESTS`]).
fn key_digests(uniq: &[Order], k: usize, mx: bool) -> Vec<u64> {
    use rayon::prelude::*;
    let cache = DIGESTS.get_or_init(Default::default);
    if let Some(d) = cache.lock().ok().and_then(|c| c.get(&(k, mx)).cloned()) {
        let by: HashMap<Order, u64> = d.into_iter().collect();
        if let Some(v) = uniq.iter().map(|o| by.get(o).copied()).collect::<Option<Vec<u64>>>() {
            return v;
        }
    }
    let v: Vec<u64> = uniq
        .par_iter()
        .map(|o| digest(&order_shape(o, k, mx).canonical()))
        .collect();
    if let Ok(mut c) = cache.lock() {
        if c.len() >= SHAPE_DIGESTS {
            c.clear();
        }
        c.insert((k, mx), uniq.iter().copied().zip(v.iter().copied()).collect());
    }
    v
}

/// The canonical shapes of a family's shape keys for K, kept for the last
/// [`KEPT_SHAPES`] (K, MX) of at most [`KEPT_SHAPES_K`] terms (a K = 4096
/// family's keys take about 20 MB): a shape no order has is compared with
/// every key, and a process that explains many launches meets the same
/// unnamed trees again.
static SHAPES: std::sync::OnceLock<std::sync::Mutex<KeptShapes>> = std::sync::OnceLock::new();

/// Per (K, MX): the shape keys and their canonical shapes.
type KeptShapes = Vec<((usize, bool), Vec<Order>, std::sync::Arc<Vec<Vec<[u32; 4]>>>)>;

const KEPT_SHAPES: usize = 2;
const KEPT_SHAPES_K: usize = 8192;

/// The canonical shapes of `uniq` for K (kept, see [`SHAPES`]).
fn key_shapes(uniq: &[Order], k: usize, mx: bool) -> std::sync::Arc<Vec<Vec<[u32; 4]>>> {
    use rayon::prelude::*;
    let cache = SHAPES.get_or_init(Default::default);
    if let Some(hit) = cache
        .lock()
        .ok()
        .and_then(|c| c.iter().find(|e| e.0 == (k, mx) && e.1 == uniq).map(|e| e.2.clone()))
    {
        return hit;
    }
    let v = std::sync::Arc::new(
        uniq.par_iter()
            .map(|o| order_shape(o, k, mx).canonical())
            .collect::<Vec<_>>(),
    );
    if k <= KEPT_SHAPES_K {
        if let Ok(mut c) = cache.lock() {
            c.retain(|e| e.0 != (k, mx));
            if c.len() >= KEPT_SHAPES {
                c.remove(0);
            }
            c.push(((k, mx), uniq.to_vec(), v.clone()));
        }
    }
    v
}

/// The candidates of `family` whose tree has `shape` (one tree per shape
/// key: looked up by digest, confirmed in full), and when none has, the
/// first (simplest) of the nearest keys (every key compiled, in parallel).
pub(super) fn match_shapes(
    family: &[candidates::Candidate],
    shape: &Shape,
    k: usize,
    mx: bool,
) -> (Vec<Order>, Option<crate::explain::ShapeMiss>) {
    use rayon::prelude::*;
    let canon = shape.canonical();
    let mut closest: Option<crate::explain::ShapeMiss> = None;
    let mut index: HashMap<Order, usize> = HashMap::default();
    let mut uniq: Vec<Order> = Vec::new();
    for c in family {
        index.entry(shape_key(&c.order)).or_insert_with(|| {
            uniq.push(shape_key(&c.order));
            uniq.len() - 1
        });
    }
    let want = digest(&canon);
    let digests = key_digests(&uniq, k, mx);
    let mut hit: Vec<bool> = uniq
        .par_iter()
        .zip(&digests)
        .map(|(ord, &d)| d == want && order_shape(ord, k, mx).canonical() == canon)
        .collect();
    if !hit.contains(&true) {
        let shapes = key_shapes(&uniq, k, mx);
        // each key's distance where it is no more than the least found so
        // far (None past it): the least, its first key and every key at
        // distance 0 are the same as from every distance in full
        let least = std::sync::atomic::AtomicUsize::new(usize::MAX);
        let dist: Vec<Option<(usize, Option<[u32; 4]>)>> = shapes
            .par_iter()
            .map(|c| {
                let d = Shape::distance_within(&canon, c, least.load(std::sync::atomic::Ordering::Relaxed));
                if let Some((n, _)) = d {
                    least.fetch_min(n, std::sync::atomic::Ordering::Relaxed);
                }
                d
            })
            .collect();
        hit = dist.iter().map(|d| matches!(d, Some((0, _)))).collect();
        if !hit.contains(&true) {
            closest = dist
                .iter()
                .enumerate()
                .filter_map(|(i, d)| d.map(|d| (i, d)))
                .min_by_key(|(_, d)| d.0)
                .map(|(i, d)| crate::explain::ShapeMiss {
                    order: uniq[i],
                    edges_differ: d.0,
                    first: d.1,
                });
        }
    }
    let matches = family
        .iter()
        .map(|c| c.order)
        .filter(|ord| hit[index[&shape_key(ord)]])
        .collect();
    (matches, closest)
}
