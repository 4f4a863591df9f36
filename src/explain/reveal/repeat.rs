//! Data-dependence check: a seeded sample of the probes is repeated with
//! other values; a static tree gives the same counts, an order chosen from
//! the data need not (see the module doc of `reveal`, "Data-dependent
//! orders").
//!
//! # The repeats
//! [`REPEAT_PROBES`] probes (at most; fewer when a launch has fewer slots
//! or there are fewer distinct probes; only probes whose answers are exact
//! counts, not zero tests), drawn with the reveal's seed, go
//! into each repeat launch, laid out as the probes were (lines or
//! diagonal); every answer of the launch is checked:
//! - **rescaled up / down** (two launches): the probe operand's units and
//!   large values and the other operand scaled by other powers of two
//!   (lines: units x2^6 and `+-B` x2^10 in the probe line, the other
//!   operand x2^-4, so the unit is x4 and `B / u` x16; and the mirror,
//!   units x2^-6, `+-B` x2^-2, other x2^4, so the unit is /4. Diagonal
//!   probes: both factors x2 or both /2; f16 lines, which span f16's range
//!   already: `+-B` halved with the other operand x2 (up: the unit x2) or
//!   not (down: the unit kept), while `B / u` stays above `K * 2^24`). A
//!   variant whose values are not all exact in the input type is skipped
//!   (FP8 inputs have no room).
//! - **refilled** (one launch): every unit that the recovered tree says is
//!   swamped (under the lowest common ancestor of p and q) replaced by a
//!   seeded choice of 0 or half a unit (0 only where half a unit is not
//!   exact in the input type); the counted units stay. On lines with room
//!   for two sets of the sample (`max(M, N) >= 2 s`) it shares the launch
//!   of *rescaled up*, on alternate lines, with that launch's other operand
//!   (x2^-4) and its own units, fills and `+-B` x2^4 (the unit and `B / u`
//!   as before), where those are exact in the input type ([`launches`]):
//!   two launches for the three variants.
//!
//! A static tree gives every repeated probe the count it gave before (a
//! scaled unit is still a unit; a swamped value of at most a unit is
//! still swamped). Any other answer (another count, or not a whole number
//! of the new unit) is a changed answer: the order depends on the data.

use super::error::RevealError;
use super::keys::{at, Key, NO_WINDOW};
use super::options::Scheme;
use super::prober::{refill, whole_units, Prober};
use super::repeats::{ChangedAnswer, Repeats};
use crate::explain::shape::Shape;
use crate::order::InType;

/// Most probes repeated per launch.
pub const REPEAT_PROBES: usize = 64;

/// Changed answers listed (all are counted).
const LISTED: usize = 16;

/// One repeat: power-of-two shifts of the probe operand's units and large
/// values and of the other operand's units and (diagonal) large values;
/// whether swamped units are refilled.
struct Variant {
    name: &'static str,
    shifts: [i32; 4],
    refill: bool,
}

/// Whether `v` is exactly an element value of the probes' operands.
fn exact(v: f32, t: InType, mx: bool) -> bool {
    if !v.is_finite() || v == 0.0 {
        return v == 0.0;
    }
    if mx {
        // +-1 times an E8M0 power of two
        let e = v.abs().log2();
        return e.fract() == 0.0 && (-127.0..=127.0).contains(&e) && v.abs() == 2f32.powi(e as i32);
    }
    match t.format() {
        None => v.is_normal(),
        Some(f) => {
            crate::format::encode_f32(v, f, &crate::format::CastPolicy::ieee(f), 0).is_ok_and(|c| f.decode_f32(c) == v)
        }
    }
}

/// The repeats a reveal runs for its scheme and input type (those whose
/// values are exact in it).
fn variants(pr: &Prober) -> Vec<Variant> {
    let list = match pr.scheme {
        // f16 lines already span f16's range (2^15 against 2^-24): `B`
        // halved, with the other operand doubled (the unit x2, `B` times
        // the other operand unchanged: no new overflow in an f16
        // accumulator) or not (the unit unchanged); kept while `B / u`
        // still exceeds `K * 2^24` (every unit swamped: K < 2^14)
        Scheme::Lines if pr.o.input == InType::F16 && pr.mx.is_none() => {
            let ratio = (pr.hi as f64 / 2.0) / pr.lo as f64;
            if ratio > pr.kl as f64 * 2f64.powi(24) {
                vec![
                    Variant {
                        name: "rescaled up",
                        shifts: [0, -1, 1, 0],
                        refill: false,
                    },
                    Variant {
                        name: "rescaled down",
                        shifts: [0, -1, 0, 0],
                        refill: false,
                    },
                ]
            } else {
                vec![]
            }
        }
        Scheme::Lines => vec![
            Variant {
                name: "rescaled up",
                shifts: [6, 10, -4, 0],
                refill: false,
            },
            Variant {
                name: "rescaled down",
                shifts: [-6, -2, 4, 0],
                refill: false,
            },
        ],
        Scheme::Diagonal => vec![
            Variant {
                name: "rescaled up",
                shifts: [1, 1, 1, 1],
                refill: false,
            },
            Variant {
                name: "rescaled down",
                shifts: [-1, -1, -1, -1],
                refill: false,
            },
        ],
    };
    let (lo, hi, other, t, mx) = (pr.lo, pr.hi, pr.other, pr.o.input, pr.mx.is_some());
    let p2 = |e: i32| 2f32.powi(e);
    let mut out: Vec<Variant> = list
        .into_iter()
        .filter(|v| {
            let [pu, pb, ou, ob] = v.shifts;
            exact(lo * p2(pu), t, mx)
                && exact(hi * p2(pb), t, mx)
                && exact(other * p2(ou), t, mx)
                && (pr.scheme == Scheme::Lines || exact(hi * p2(ob), t, mx))
        })
        .collect();
    out.push(Variant {
        name: "refilled",
        shifts: [0; 4],
        refill: true,
    });
    out
}

/// The repeat launches: each variant alone, except that on lines with
/// room for two sets of the sampled probes (`max(M, N) >= 2 s`) the
/// refill shares the launch of *rescaled up*, taking its other operand
/// (x2^ou) with its own units, `+-B` and fills x2^-ou (the unit and `B / u`
/// unchanged), where all of those are exact in the input type: one launch
/// fewer, each of the two variants on alternate lines.
fn launches(pr: &Prober, vars: Vec<Variant>, s: usize, fills: &[f32]) -> Vec<Vec<Variant>> {
    let slots = pr.o.m.max(pr.o.n);
    let (t, mx) = (pr.o.input, pr.mx.is_some());
    let up = vars.iter().position(|v| v.name == "rescaled up" && v.shifts[2] != 0);
    let refill = vars.iter().position(|v| v.refill);
    if let (Scheme::Lines, Some(u), Some(r)) = (pr.scheme, up, refill) {
        let ou = vars[u].shifts[2];
        let p2 = 2f32.powi(-ou);
        let fits = exact(pr.lo * p2, t, mx)
            && exact(pr.hi * p2, t, mx)
            && fills.iter().all(|&f| exact(f * p2, t, mx))
            && slots >= 2 * s;
        if fits {
            let mut out: Vec<Vec<Variant>> = Vec::new();
            let mut rest = vars;
            let refilled = Variant {
                shifts: [-ou, -ou, ou, 0],
                ..rest.remove(r)
            };
            let u = rest.iter().position(|v| v.name == "rescaled up").expect("found above");
            let up = rest.remove(u);
            out.push(vec![up, refilled]);
            out.extend(rest.into_iter().map(|v| vec![v]));
            return out;
        }
    }
    vars.into_iter().map(|v| vec![v]).collect()
}

fn describe(v: &Variant, scheme: Scheme, fills: &[f32], lo: f32) -> String {
    let [pu, pb, ou, ob] = v.shifts;
    if v.refill {
        let f: Vec<String> = fills.iter().map(|x| format!("{}", x / lo)).collect();
        let scaled = if v.shifts == [0; 4] {
            String::new()
        } else {
            format!(
                " (in the launch of rescaled up: probe units, fills and +-B x2^{pu}, the other operand x2^{ou}, the unit unchanged)"
            )
        };
        return format!(
            "refilled: the swamped units (under the ancestor of p and q) set to {} units, seeded{scaled}",
            f.join(" or ")
        );
    }
    match scheme {
        Scheme::Lines => format!(
            "{}: probe units x2^{pu}, +-B x2^{pb}, the other operand x2^{ou} (unit x2^{})",
            v.name,
            pu + ou
        ),
        Scheme::Diagonal => format!(
            "{}: units x2^{pu} and x2^{ou}, large values x2^{pb} and x2^{ob} in the two factors (unit x2^{})",
            v.name,
            pu + ou
        ),
    }
}

/// A sampled probe: its key, its line in leaf space and the count it
/// gave first.
struct Probe {
    key: Key,
    /// (leaf, swamped) for every unit of the line
    units: Vec<(u32, bool)>,
    before: u32,
}

impl Prober<'_> {
    /// A seeded sample of the tallied probes (partial Fisher-Yates, then
    /// in key order), each with its line in leaf space (units counted or
    /// swamped under `shape`) and its first count; and the generator,
    /// which goes on to draw the refill choices.
    fn sample_probes(&self, shape: &Shape) -> (Vec<Probe>, crate::rng::SplitMix64) {
        let kl = self.kl;
        let slots = self.slots();
        // exact counts only (a zero test's answer is not a count)
        let sc = &self.windows;
        let mut keys: Vec<Key> = Vec::with_capacity(self.tallies.distinct());
        self.tallies.for_each_first(|k, _| {
            if sc.exact(k.2) {
                keys.push(k);
            }
        });
        rayon::slice::ParallelSliceMut::par_sort_unstable(&mut keys[..]);
        // seeded partial Fisher-Yates: the sample, then in key order
        let s = REPEAT_PROBES.min(slots).min(keys.len());
        let mut r = crate::rng::SplitMix64::new(self.o.seed ^ 0xDA7A_DE9E);
        for i in 0..s {
            let j = i + r.below((keys.len() - i) as u64) as usize;
            keys.swap(i, j);
        }
        let mut sample: Vec<Key> = keys[..s].to_vec();
        sample.sort_unstable();
        // per probe: its line in leaf space (units counted or swamped) and
        // the count it gave first
        let lca = shape.lca_sizes();
        let tallies = &self.tallies;
        use rayon::prelude::*;
        let probes: Vec<Probe> = sample
            .par_iter()
            .map(|&key| {
                let (p, q, c) = key;
                let row = shape.lca_row(&lca, p).unwrap_or_else(|| vec![0; kl]);
                let lpq = row[q as usize];
                let under = |x: u32| row[x as usize] > 0 && row[x as usize] <= lpq;
                let units: Vec<(u32, bool)> = if c == NO_WINDOW {
                    (0..kl as u32)
                        .filter(|&x| x != p && x != q)
                        .map(|x| (x, under(x)))
                        .collect()
                } else {
                    sc.window(p, q, c).map(|x| (x, under(x))).collect()
                };
                let act = sc.active(&key, kl);
                let v = tallies.value(&key).expect("a sampled probe was tallied");
                Probe {
                    key,
                    units,
                    before: (act + 2).saturating_sub(v),
                }
            })
            .collect();
        (probes, r)
    }

    /// Repeats a seeded sample of the tallied probes with other values
    /// (module doc) and checks every answer against the probe's first
    /// count. `shape` is the recovered tree (it says which units are
    /// swamped).
    pub(super) fn repeat(&mut self, shape: &Shape) -> Result<Repeats, RevealError> {
        let (m, kl, n) = (self.o.m, self.kl, self.o.n);
        let (probes, mut r) = self.sample_probes(shape);
        let s = probes.len();
        if s == 0 {
            // no probe with an exact count to repeat
            return Ok(Repeats::default());
        }
        let (lo, hi, other) = (self.lo, self.hi, self.other);
        let half = lo / 2.0;
        let fills: Vec<f32> = if exact(half, self.o.input, self.mx.is_some()) {
            vec![0.0, half]
        } else {
            vec![0.0]
        };
        let vars = variants(self);
        let scheme = self.scheme;
        let groups = launches(self, vars, s, &fills);
        let repeats: Vec<String> = groups
            .iter()
            .flatten()
            .map(|v| describe(v, scheme, &fills, lo))
            .collect();
        // the refill choices, seeded, per probe and unit
        let choice: Vec<Vec<f32>> = probes
            .iter()
            .map(|pb| {
                pb.units
                    .iter()
                    .map(|&(_, sw)| {
                        if sw {
                            fills[r.below(fills.len() as u64) as usize]
                        } else {
                            lo
                        }
                    })
                    .collect()
            })
            .collect();
        let cols = n >= m;
        let p2 = |e: i32| 2f32.powi(e);
        let unit0 = lo as f64 * other as f64;
        let mut changed: Vec<ChangedAnswer> = Vec::new();
        let mut changed_count = 0usize;
        let mut changed_keys: std::collections::HashSet<Key> = std::collections::HashSet::new();
        let mut answers = 0usize;
        let probes = &probes;
        let choice = &choice;
        let groups = &groups;
        self.launch_all(
            groups.len(),
            |gi, a, b| {
                let g = &groups[gi];
                // lines: line l holds variant g[l % g.len()] of probe l / g.len()
                let nl = g.len() * s;
                // one other operand per launch (the variants of a launch share it)
                let [_, _, ou, ob] = g[0].shifts;
                let (olo, ohi) = (other * p2(ou), hi * p2(ob));
                // the probe line's value at each of its units
                let line = |l: usize, put: &mut dyn FnMut(usize, f32)| {
                    let (v, t) = (&g[l % g.len()], l / g.len());
                    let [pu, pb, _, _] = v.shifts;
                    let (plo, phi) = (p2(pu), hi * p2(pb));
                    let pr = &probes[t];
                    for (u, &(x, _)) in pr.units.iter().enumerate() {
                        let base = if v.refill { choice[t][u] } else { lo };
                        put(x as usize, base * plo);
                    }
                    put(pr.key.0 as usize, phi);
                    put(pr.key.1 as usize, -phi);
                };
                match scheme {
                    Scheme::Lines if cols => {
                        // column j carries line j % nl: the lines laid out
                        // densely by leaf first, then B row by row (a
                        // column at a time is a strided write per term:
                        // 1.6 s of a 2.1 s reveal at K = N = 4096)
                        let mut lines = vec![0f32; kl * nl];
                        for l in 0..nl {
                            line(l, &mut |x, val| lines[x * nl + l] = val);
                        }
                        // every element written once (no zeroing first),
                        // rows in parallel
                        use rayon::prelude::*;
                        b.truncate(kl * n);
                        b.resize(kl * n, 0.0);
                        b.par_chunks_mut(n).zip(lines.par_chunks(nl)).for_each(|(row, src)| {
                            for part in row.chunks_mut(nl) {
                                part.copy_from_slice(&src[..part.len()]);
                            }
                        });
                        refill(a, m * kl, olo);
                    }
                    Scheme::Lines => {
                        // row i carries line i % nl: the lines built once,
                        // then copied into the rows in parallel (a line put
                        // term by term into every row is K calls a row:
                        // most of the repeats at M = 4096)
                        use rayon::prelude::*;
                        let mut lines = vec![0f32; nl * kl];
                        for (l, dst) in lines.chunks_mut(kl).enumerate() {
                            line(l, &mut |x, val| dst[x] = val);
                        }
                        a.truncate(m * kl);
                        a.resize(m * kl, 0.0);
                        a.par_chunks_mut(kl)
                            .enumerate()
                            .for_each(|(i, row)| row.copy_from_slice(&lines[(i % nl) * kl..(i % nl + 1) * kl]));
                        refill(b, kl * n, olo);
                    }
                    Scheme::Diagonal => {
                        refill(a, m * kl, 0.0);
                        refill(b, kl * n, olo);
                        for (i, pr) in probes.iter().enumerate() {
                            let row = &mut a[i * kl..(i + 1) * kl];
                            line(i * g.len(), &mut |x, val| row[x] = val);
                            // the large values in both factors: +-B in B
                            // (the line put -B at q into A: both are +B there)
                            let phi = hi * p2(g[0].shifts[1]);
                            row[pr.key.1 as usize] = phi;
                            b[pr.key.0 as usize * n + i] = ohi;
                            b[pr.key.1 as usize * n + i] = -ohi;
                        }
                    }
                }
            },
            |_, id, gi, out| {
                use rayon::prelude::*;
                let g = &groups[gi];
                let nl = g.len() * s;
                let unit: Vec<f64> = g.iter().map(|v| unit0 * 2f64.powi(v.shifts[0] + v.shifts[2])).collect();
                // each line's unchanged answer, where it is an f32 (a
                // count times a power of two: always, short of the range's
                // ends): an answer equal to it is unchanged, so the common
                // case is one comparison
                let same: Vec<Option<f32>> = (0..nl)
                    .map(|l| {
                        let want = probes[l / g.len()].before as f64 * unit[l % g.len()];
                        ((want as f32) as f64 == want).then_some(want as f32)
                    })
                    .collect();
                // the answer at (i, j) of line l, when it changed
                let changed_at = |l: usize, i: usize, j: usize| -> Option<ChangedAnswer> {
                    let (vi, pr) = (l % g.len(), &probes[l / g.len()]);
                    let val = out[i * n + j];
                    if same[l] == Some(val) {
                        return None;
                    }
                    let after = whole_units(val, unit[vi], kl);
                    (after != Some(pr.before)).then(|| {
                        let (launch, row, col) = at(id, i, j);
                        ChangedAnswer {
                            repeat: g[vi].name,
                            launch: launch as usize,
                            row: row as usize,
                            col: col as usize,
                            p: pr.key.0,
                            q: pr.key.1,
                            window: (pr.key.2 != NO_WINDOW).then_some(pr.key.2),
                            before: pr.before,
                            after,
                            value: val,
                        }
                    })
                };
                // per block of cells, in row order: (changed answers, the
                // first LISTED of them, the probes that changed)
                type Block = (usize, Vec<ChangedAnswer>, Vec<Key>);
                let add = |b: &mut Block, l: usize, i: usize, j: usize| {
                    if let Some(ch) = changed_at(l, i, j) {
                        let key = probes[l / g.len()].key;
                        b.0 += 1;
                        if !b.2.contains(&key) {
                            b.2.push(key);
                        }
                        if b.1.len() < LISTED {
                            b.1.push(ch);
                        }
                    }
                };
                let blocks: Vec<Block> = match scheme {
                    Scheme::Lines => {
                        let rb = super::prober::row_block(m);
                        (0..m.div_ceil(rb))
                            .into_par_iter()
                            .map(|bi| {
                                let mut b: Block = (0, Vec::new(), Vec::new());
                                for i in bi * rb..((bi + 1) * rb).min(m) {
                                    for j in 0..n {
                                        add(&mut b, if cols { j } else { i } % nl, i, j);
                                    }
                                }
                                b
                            })
                            .collect()
                    }
                    Scheme::Diagonal => {
                        let mut b: Block = (0, Vec::new(), Vec::new());
                        for i in 0..s {
                            add(&mut b, i * g.len(), i, i);
                        }
                        vec![b]
                    }
                };
                answers += match scheme {
                    Scheme::Lines => m * n,
                    Scheme::Diagonal => s,
                };
                for (count, listed, keys) in blocks {
                    changed_count += count;
                    changed_keys.extend(keys);
                    for ch in listed {
                        if changed.len() < LISTED {
                            changed.push(ch);
                        }
                    }
                }
                Ok(())
            },
        )?;
        Ok(Repeats {
            probes: s,
            repeats,
            launches: groups.len(),
            answers,
            changed,
            changed_count,
            changed_probes: changed_keys.len(),
        })
    }
}
