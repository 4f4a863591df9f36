//! Probe launches: calibration, the lines and diagonal layouts, reading the
//! answers into the tallies (see the module doc of `reveal`).

use super::error::RevealError;
use super::grid::Window;
use super::keys::{at, Key, NO_WINDOW};
use super::options::{RevealOptions, Scheme, MAX_PROBES};
use super::tally::{Local, Tallies, Windows};
use crate::gemm::{BLayout, Matrix, Problem, MX_BLOCK};
use crate::mx::MxFormat;
use crate::order::InType;
use crate::subject::Subject;
use std::sync::Mutex;

/// Probe values for an input type (module doc of `reveal`, "Probes").
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Magnitudes {
    /// A unit in the probe operand.
    pub(super) lo: f32,
    /// The large value `B`.
    pub(super) hi: f32,
    /// Every element of the other operand (lines; the diagonal layout
    /// fills it with `lo` and puts `+-hi` on its diagonal).
    pub(super) other: f32,
    pub(super) scheme: Scheme,
}

/// The probe values for an input type, in the order calibration tries
/// them (the next is used only when a calibration with the one before
/// fails): lines wherever one operand's range holds `B / u` of at least
/// 2^38 (f16: `2^15` against the least subnormal, `2^-24`, the other
/// operand all ones; then f16's diagonal, 2^-6 and 2^14, `B / u` = 2^40
/// in normal numbers only, for a subject that flushes f16 subnormals),
/// the diagonal layout where no line fits (FP8: `B / u` as the product of
/// both factors).
pub(super) fn magnitudes(t: InType, mx: bool) -> Vec<Magnitudes> {
    let p = |e: i32| 2f32.powi(e);
    let lines = |lo: f32, hi: f32, other: f32| Magnitudes {
        lo,
        hi,
        other,
        scheme: Scheme::Lines,
    };
    if mx {
        // the large value lives in the block scale: 2^40 through E8M0
        return vec![lines(1.0, p(40), 1.0)];
    }
    match t {
        InType::F32 | InType::Bf16 => vec![lines(1.0, p(40), 1.0)],
        InType::F16 => vec![lines(p(-24), p(15), 1.0), diagonal(p(-6), p(14))],
        InType::E4M3 => vec![diagonal(p(-9), p(8))],
        InType::E5M2 => vec![diagonal(p(-16), p(15))],
    }
}

/// Both factors carry the large values: `B / u = (hi / lo)^2`.
fn diagonal(lo: f32, hi: f32) -> Magnitudes {
    Magnitudes {
        lo,
        hi,
        other: lo,
        scheme: Scheme::Diagonal,
    }
}

/// MX codes of +1, -1 and 0 in `f` (probe values are `+-1 * 2^s`, the
/// power of two in the block's E8M0 scale).
#[derive(Clone, Copy)]
pub(super) struct MxCodes {
    pub(super) format: MxFormat,
    pub(super) pos: u8,
    pub(super) neg: u8,
    pub(super) zero: u8,
}

impl MxCodes {
    pub(super) fn of(format: MxFormat) -> Option<MxCodes> {
        let f = format.element();
        let enc = |v: f32| -> Option<u8> {
            let c = crate::format::encode_f32(v, f, &crate::format::CastPolicy::ieee(f), 0).ok()?;
            (f.decode_f32(c) == v && c <= 0xFF).then_some(c as u8)
        };
        Some(MxCodes {
            format,
            pos: enc(1.0)?,
            neg: enc(-1.0)?,
            zero: enc(0.0)?,
        })
    }

    /// (code, E8M0 scale) of a probe value: 0 or +-2^e.
    pub(super) fn of_value(&self, v: f32) -> (u8, u8) {
        if v == 0.0 {
            return (self.zero, 127);
        }
        let e = ((v.to_bits() >> 23) & 0xFF) as i32 - 127;
        (if v > 0.0 { self.pos } else { self.neg }, (127 + e) as u8)
    }
}

/// `v` as a whole number of units of `unit`, at most `most` (None: not
/// finite, negative, not whole, or more).
pub(super) fn whole_units(v: f32, unit: f64, most: usize) -> Option<u32> {
    let c = v as f64 / unit;
    (c.is_finite() && c >= 0.0 && c.fract() == 0.0 && c <= most as f64).then_some(c as u32)
}

/// Decodes answers into unit counts (a copy of what the prober knows, so a
/// launch's answers can be read while the prober runs the next one).
#[derive(Clone, Copy)]
pub(super) struct Counter {
    pub(super) unit: f64,
    pub(super) kl: usize,
    pub(super) ratio: f64,
}

impl Counter {
    /// The number of units an output value holds.
    pub(super) fn count(&self, v: f32) -> Option<u32> {
        whole_units(v, self.unit, self.kl)
    }

    /// An answer read for a window: an exact count of at most `active`
    /// units, or for a zero test any whole number of units (a rounded sum
    /// of more units than the output counts exactly), as its tallied value
    /// ([`Windows::value`]).
    pub(super) fn read(&self, windows: &Windows, c: u32, active: u32, v: f32) -> Option<u32> {
        let most = if windows.exact(c) { self.kl } else { u32::MAX as usize };
        windows.value(c, active, whole_units(v, self.unit, most)?)
    }

    pub(super) fn not_a_count(&self, subject: &str, v: f32, p: u32, q: u32, i: usize, j: usize) -> RevealError {
        RevealError::Inconsistent(format!(
            "probe (+B at k={p}, -B at k={q}) at C[{i}, {j}] of {subject} gave {v:e}, not a whole number of units of {:e}: the subject's sum is not a static tree of roundings, or the probe's range ({:e} to a unit) is too small for its accumulator",
            self.unit, self.ratio
        ))
    }
}

pub(super) struct Prober<'a> {
    pub(super) subject: &'a dyn Subject,
    pub(super) o: RevealOptions,
    /// MX inputs: probes per block (leaf b = block b).
    pub(super) mx: Option<MxCodes>,
    /// Leaves: K, or K / 32 for MX.
    pub(super) kl: usize,
    pub(super) lo: f32,
    pub(super) hi: f32,
    /// The other operand's value (lines; `lo` for the diagonal layout).
    pub(super) other: f32,
    pub(super) scheme: Scheme,
    pub(super) window: usize,
    pub(super) launches: usize,
    pub(super) tallies: Tallies,
    /// The units windowed probes count.
    pub(super) windows: Windows,
    /// Seconds building launch inputs, in the subject, and reading answers.
    pub(super) spent: [f64; 3],
    /// A and B of the last launch (their allocations are reused).
    pub(super) buffers: (Vec<f32>, Vec<f32>),
    /// Set by a launch of unwindowed lines ([`Prober::measure_lines`]):
    /// the indices into the line operand holding its `+-B`, every other
    /// element of both operands a unit. The next such launch puts those
    /// back to units and places its own, instead of writing both operands
    /// whole (64 MiB at K = N = 4096, most of building a launch of lines).
    /// None when anything else wrote the buffers. (Which operand holds the
    /// lines and the operands' sizes are fixed for a reveal.)
    pub(super) lines_held: Option<Vec<usize>>,
    /// Whether the check line of the first launch of two probes a line
    /// (`two.rs`) came back exact (None: no such launch yet).
    pub(super) two_exact: Option<bool>,
}

/// The launch buffers of the last reveal in the process, taken by the next
/// one (a fresh K x N buffer is zeroed by the kernel page by page as it is
/// first written; with the verification launch using the same B, repeated
/// reveals at M = 1, K = N = 4096 fault about 4,600 pages each instead of
/// 37,000: docs/PERFORMANCE.md); kept only up to [`KEPT_BYTES`]. Their
/// contents are never read before a launch fills them ([`refill`]).
static KEPT: Mutex<(Vec<f32>, Vec<f32>)> = Mutex::new((Vec::new(), Vec::new()));

/// The most bytes of launch buffers kept between reveals.
const KEPT_BYTES: usize = 256 << 20;

/// The buffers the last reveal left ([`KEPT`]), or empty ones.
pub(super) fn kept_buffers() -> (Vec<f32>, Vec<f32>) {
    KEPT.try_lock().map(|mut k| std::mem::take(&mut *k)).unwrap_or_default()
}

impl Drop for Prober<'_> {
    fn drop(&mut self) {
        let (a, b) = std::mem::take(&mut self.buffers);
        if (a.capacity() + b.capacity()) * 4 <= KEPT_BYTES {
            if let Ok(mut k) = KEPT.try_lock() {
                *k = (a, b);
            }
        }
    }
}

/// `v` as `len` copies of `value` (keeping its allocation).
pub(super) fn refill(v: &mut Vec<f32>, len: usize, value: f32) {
    use rayon::prelude::*;
    // a 64 MiB launch operand is several milliseconds of one thread's
    // stores: in fixed chunks, in parallel (below 16 MiB waking the
    // threads costs more than it saves, launch after launch)
    const CHUNK: usize = 1 << 16;
    v.truncate(len);
    if v.len() < 64 * CHUNK {
        v.fill(value);
    } else {
        v.par_chunks_mut(CHUNK).for_each(|c| c.fill(value));
    }
    v.resize(len, value);
}

/// Rows read per block when a launch's answers are read in parallel: a
/// function of M only, so the tallies are the same on any thread count.
pub(super) fn row_block(m: usize) -> usize {
    m.div_ceil(64).max(1)
}

impl Prober<'_> {
    /// Runs one launch given in leaf space (`a` [M, kl], `b` [kl, N]).
    pub(super) fn run(&mut self, a: &[f32], b: &[f32]) -> Result<Vec<f32>, String> {
        self.launches += 1;
        let (m, k, n, kl) = (self.o.m, self.o.k, self.o.n, self.kl);
        let out = match self.mx {
            None => {
                let p = Problem {
                    a: Matrix::F32(a),
                    b: Matrix::F32(b),
                    m,
                    n,
                    k,
                    b_layout: BLayout::Kn,
                };
                self.subject.run(&p, None)
            }
            Some(mc) => {
                // leaf b -> the first element of block b; the rest zero
                let (mut ca, mut sa) = (vec![mc.zero; m * k], vec![127u8; m * kl]);
                for i in 0..m {
                    for x in 0..kl {
                        let (c, s) = mc.of_value(a[i * kl + x]);
                        ca[i * k + x * MX_BLOCK] = c;
                        sa[i * kl + x] = s;
                    }
                }
                let (mut cb, mut sb) = (vec![mc.zero; k * n], vec![127u8; kl * n]);
                for x in 0..kl {
                    for j in 0..n {
                        let (c, s) = mc.of_value(b[x * n + j]);
                        cb[x * MX_BLOCK * n + j] = c;
                        sb[x * n + j] = s;
                    }
                }
                let p = Problem {
                    a: Matrix::Mx {
                        codes: &ca,
                        scales: &sa,
                        format: mc.format,
                    },
                    b: Matrix::Mx {
                        codes: &cb,
                        scales: &sb,
                        format: mc.format,
                    },
                    m,
                    n,
                    k,
                    b_layout: BLayout::Kn,
                };
                self.subject.run(&p, None)
            }
        }
        .map_err(|e| e.to_string())?;
        if out.len() != m * n {
            return Err(format!(
                "{} answered {} values for an [{m}, {n}] output",
                self.subject.name(),
                out.len()
            ));
        }
        Ok(out)
    }

    pub(super) fn counter(&self) -> Counter {
        Counter {
            unit: self.lo as f64 * self.other as f64,
            kl: self.kl,
            ratio: (self.hi as f64 / self.lo as f64).powi(match self.scheme {
                Scheme::Lines => 1,
                Scheme::Diagonal => 2,
            }),
        }
    }

    /// Runs `count` launches, each built when it is due (so only one
    /// launch's inputs are held at a time) and its answers handed to
    /// `take` (launch number, index, output). Every launch runs even when
    /// some fail (a file subject writes every missing job at once); the
    /// first unreadable answer stops the round.
    pub(super) fn launch_all(
        &mut self,
        count: usize,
        mut build: impl FnMut(usize, &mut Vec<f32>, &mut Vec<f32>),
        mut take: impl FnMut(&mut Tallies, usize, usize, &[f32]) -> Result<(), RevealError>,
    ) -> Result<(), RevealError> {
        let mut first = None;
        let mut failed = 0;
        // the launch inputs, reused from launch to launch (a fresh 64 MiB
        // buffer per launch costs more in page faults than filling it)
        let (mut a, mut b) = std::mem::take(&mut self.buffers);
        // whatever `build` writes, the buffers no longer hold the last
        // lines (measure_lines took that note before, and gives it back)
        self.lines_held = None;
        for i in 0..count {
            let t0 = std::time::Instant::now();
            build(i, &mut a, &mut b);
            let id = self.launches;
            let t1 = std::time::Instant::now();
            let ran = self.run(&a, &b);
            let t2 = std::time::Instant::now();
            self.spent[0] += (t1 - t0).as_secs_f64();
            self.spent[1] += (t2 - t1).as_secs_f64();
            match ran {
                Ok(out) => {
                    if first.is_none() {
                        take(&mut self.tallies, id, i, &out)?;
                    }
                    self.spent[2] += t2.elapsed().as_secs_f64();
                }
                Err(e) => {
                    failed += 1;
                    first.get_or_insert(e);
                }
            }
        }
        self.buffers = (a, b);
        match first {
            Some(first) => Err(RevealError::Subject {
                failed,
                launches: count,
                first,
            }),
            None => Ok(()),
        }
    }

    /// The largest window size whose unit counts come back exact: one
    /// calibration launch (more only when neither M nor N has room for
    /// the sizes tried), the sizes laid out along the longer of rows and
    /// columns (so a GEMV, M = 1, is calibrated too).
    pub(super) fn calibrate(&mut self) -> Result<usize, RevealError> {
        let (m, kl, n, lo, other) = (self.o.m, self.kl, self.o.n, self.lo, self.other);
        let mut sizes: Vec<usize> = vec![kl];
        for s in [2048usize, 256, 16] {
            if s < kl {
                sizes.push(s);
            }
        }
        // the largest odd count of each size: exact only if every count up
        // to the size is (an odd count needs every bit of its width)
        let odd: Vec<usize> = sizes.iter().map(|&s| s - 1 + (s & 1)).collect();
        let cols = n >= m;
        let per = (if cols { n } else { m }).min(sizes.len());
        let nl = sizes.len().div_ceil(per);
        let which = |l: usize, t: usize| l * per + t % per.min(sizes.len() - l * per);
        let mut got: Vec<Option<f32>> = vec![None; sizes.len()];
        let mut exact = vec![true; sizes.len()];
        let ct = self.counter();
        self.launch_all(
            nl,
            |l, a, b| {
                if cols {
                    // row by row of B (a column at a time is a strided
                    // write per term: slow at K x N = 4096 x 4096)
                    use rayon::prelude::*;
                    let count: Vec<usize> = (0..n).map(|j| odd[which(l, j)]).collect();
                    b.truncate(kl * n);
                    b.resize(kl * n, 0.0);
                    // every element written once, rows in parallel
                    b.par_chunks_mut(n).enumerate().for_each(|(x, row)| {
                        for (v, &c) in row.iter_mut().zip(&count) {
                            *v = if x < c { lo } else { 0.0 };
                        }
                    });
                    refill(a, m * kl, other);
                } else {
                    // every element written once, rows in parallel (row by
                    // row on one thread is 64 MiB of stores at M = K = 4096)
                    use rayon::prelude::*;
                    a.truncate(m * kl);
                    a.resize(m * kl, 0.0);
                    a.par_chunks_mut(kl).enumerate().for_each(|(i, row)| {
                        let c = odd[which(l, i)];
                        row[..c].fill(lo);
                        row[c..].fill(0.0);
                    });
                    refill(b, kl * n, other);
                }
            },
            |_, _, l, out| {
                use rayon::prelude::*;
                // per block of rows: (exact, first value) per size
                let blocks: Vec<(Vec<bool>, Vec<Option<f32>>)> = out
                    .par_chunks(row_block(m) * n)
                    .enumerate()
                    .map(|(bi, block)| {
                        let mut ex = vec![true; sizes.len()];
                        let mut first: Vec<Option<f32>> = vec![None; sizes.len()];
                        for (r, row) in block.chunks(n).enumerate() {
                            let i = bi * row_block(m) + r;
                            for (j, &v) in row.iter().enumerate() {
                                let s = which(l, if cols { j } else { i });
                                if ct.count(v) != Some(odd[s] as u32) {
                                    ex[s] = false;
                                }
                                first[s].get_or_insert(v);
                            }
                        }
                        (ex, first)
                    })
                    .collect();
                for (ex, first) in blocks {
                    for s in 0..sizes.len() {
                        exact[s] &= ex[s];
                        if let Some(v) = first[s] {
                            got[s].get_or_insert(v);
                        }
                    }
                }
                Ok(())
            },
        )?;
        match (0..sizes.len()).find(|&i| exact[i]) {
            Some(i) if (i..sizes.len()).all(|j| exact[j]) => Ok(sizes[i]),
            _ => {
                let seen: Vec<String> = (0..sizes.len())
                    .map(|s| {
                        format!(
                            "{} units gave {:e}{}",
                            odd[s],
                            got[s].unwrap_or(f32::NAN),
                            if exact[s] { "" } else { " (wrong)" }
                        )
                    })
                    .collect();
                Err(RevealError::Inconsistent(format!(
                    "{} does not return sums of units exactly (units of {:e}: {}): not a sum of the products, or an output too narrow to count even {} units",
                    self.subject.name(),
                    ct.unit,
                    seen.join(", "),
                    odd[sizes.len() - 1]
                )))
            }
        }
    }

    /// The tallied value of every probe (`2 + lost`, L(p, q) for a probe
    /// that counts every term; windows: [`Windows::value`]), measured in
    /// this prober's scheme (their answers are tallied, see [`Tallies`]).
    pub(super) fn measure(&mut self, probes: &[Key]) -> Result<Vec<u32>, RevealError> {
        self.room_for(probes)?;
        match self.scheme {
            Scheme::Lines => self.measure_lines(probes)?,
            Scheme::Diagonal => self.measure_diagonal(probes)?,
        }
        let missing = || RevealError::Inconsistent("a probe was not placed".into());
        probes
            .iter()
            .map(|k| self.tallies.value(k).ok_or_else(missing))
            .collect()
    }

    /// An error where asking `probes` would take the distinct probes past
    /// [`MAX_PROBES`].
    pub(super) fn room_for(&self, probes: &[Key]) -> Result<(), RevealError> {
        let fresh = probes.iter().filter(|k| self.tallies.get(k).is_none()).count();
        let before = self.tallies.distinct();
        if before as u128 + fresh as u128 > MAX_PROBES as u128 {
            return Err(RevealError::Options(format!(
                "this round needs {fresh} probes (windows of at most {} units) after {} already: more than reveal's limit of {} distinct probes",
                self.window,
                before,
                crate::limits::show(MAX_PROBES)
            )));
        }
        Ok(())
    }

    /// One probe per line, along the longer of columns and rows: line s
    /// holds a whole probe in one operand (`+B` at p, `-B` at q, units at
    /// the terms it counts: every other term, or its window's; 0 elsewhere)
    /// and the other operand is all units, so one launch answers
    /// `max(M, N)` arbitrary probes whatever sets they come from. Lines
    /// beyond the probes repeat them, and every row (column) of a line
    /// answers it again: all are checked.
    pub(super) fn measure_lines(&mut self, probes: &[Key]) -> Result<(), RevealError> {
        let (m, kl, n, lo, hi) = (self.o.m, self.kl, self.o.n, self.lo, self.hi);
        let other = self.other;
        let cols = n >= m;
        let slots = if cols { n } else { m };
        let chunks: Vec<&[Key]> = probes.chunks(slots).collect();
        let ct = self.counter();
        let name = self.subject.name();
        let windows = std::mem::take(&mut self.windows);
        let sc = &windows;
        // the probe's line in leaf space: `put(x, value)` for every
        // nonzero term (the line starts as 0, or as units when it counts
        // every term)
        let line = |&(p, q, c): &Key, put: &mut dyn FnMut(usize, f32)| {
            if c != NO_WINDOW {
                sc.window(p, q, c).for_each(|x| put(x as usize, lo));
            }
            put(p as usize, hi);
            put(q as usize, -hi);
        };
        let fill = |chunk: &[Key]| {
            if chunk.iter().any(|k| k.2 != NO_WINDOW) {
                0f32
            } else {
                lo
            }
        };
        let active = |key: &Key| sc.active(key, kl);
        // what the operands hold from the last launch of unwindowed lines
        let mut held = self.lines_held.take();
        let done = self.launch_all(
            chunks.len(),
            |li, a, b| {
                let chunk = chunks[li];
                let used = chunk.len();
                let (line_op, other_op) = if cols { (&mut *b, &mut *a) } else { (&mut *a, &mut *b) };
                let (line_len, other_len) = if cols { (kl * n, m * kl) } else { (m * kl, kl * n) };
                // unwindowed lines over the last ones: their `+-B` back to
                // units; else both operands written whole
                let unwindowed = chunk.iter().all(|k| k.2 == NO_WINDOW);
                match held.take() {
                    Some(placed) if unwindowed => {
                        debug_assert!(line_op.len() == line_len && other_op.len() == other_len);
                        for i in placed {
                            line_op[i] = lo;
                        }
                    }
                    _ => {
                        refill(line_op, line_len, fill(chunk));
                        refill(other_op, other_len, other);
                    }
                }
                // element x of line l: at x * n + l (columns) or l * kl + x
                let (stride, step) = if cols { (n, 1) } else { (1, kl) };
                let mut placed = Vec::new();
                for l in 0..if cols { n } else { m } {
                    line(&chunk[l % used], &mut |x, v| {
                        let i = x * stride + l * step;
                        line_op[i] = v;
                        if unwindowed {
                            placed.push(i);
                        }
                    });
                }
                held = unwindowed.then_some(placed);
            },
            |t, id, li, out| {
                use rayon::prelude::*;
                let chunk = chunks[li];
                let used = chunk.len();
                let act: Vec<u32> = chunk.iter().map(active).collect();
                // blocks of rows read in parallel, each line's tallies
                // folded in row order: the same as one pass over the rows
                let rb = row_block(m);
                let blocks: Vec<Result<Vec<Local>, RevealError>> = out
                    .par_chunks(rb * n)
                    .enumerate()
                    .map(|(bi, block)| {
                        let mut local = vec![Local::default(); used];
                        for (r, row) in block.chunks(n).enumerate() {
                            let i = bi * rb + r;
                            for (j, &v) in row.iter().enumerate() {
                                let s = if cols { j } else { i } % used;
                                let (p, q, c) = chunk[s];
                                let value = ct
                                    .read(sc, c, act[s], v)
                                    .ok_or_else(|| ct.not_a_count(&name, v, p, q, i, j))?;
                                local[s].add(value, at(id, i, j));
                            }
                        }
                        Ok(local)
                    })
                    .collect();
                let mut local = vec![Local::default(); used];
                for block in blocks {
                    for (s, lt) in block?.into_iter().enumerate() {
                        local[s].absorb(lt);
                    }
                }
                for (s, lt) in local.iter().enumerate() {
                    lt.merge(chunk[s], t);
                }
                Ok(())
            },
        );
        self.windows = windows;
        if done.is_ok() {
            self.lines_held = held;
        }
        done
    }

    /// Probes one launch answers: a line each (`max(M, N)`), or a
    /// diagonal element each (`min(M, N)`).
    pub(super) fn slots(&self) -> usize {
        match self.scheme {
            Scheme::Lines => self.o.m.max(self.o.n),
            Scheme::Diagonal => self.o.m.min(self.o.n),
        }
    }

    /// Whether grid launches fit these probe values: units of 1 in both
    /// operands, so `+B` on a row and `-B` on a column meet units only
    /// (f32 and bf16 lines, MX through the scales), and counts that are
    /// exact (no windows).
    pub(super) fn grid_fits(&self) -> bool {
        self.scheme == Scheme::Lines && self.lo == 1.0 && self.other == 1.0 && self.window == self.kl
    }

    /// Grid launches (`grid.rs`): row i of A is units with `+B` at
    /// `rows[i % len]`, column j of B units with `-B` at `cols[j % len]`,
    /// so C[i, j] answers the pair (p_i, q_j); every answer is tallied.
    pub(super) fn measure_grid(&mut self, windows: &[Window]) -> Result<(), RevealError> {
        let (m, kl, n, hi) = (self.o.m, self.kl, self.o.n, self.hi);
        let ct = self.counter();
        let name = self.subject.name();
        let act = kl as u32 - 2;
        // each launch's pairs kept by cell (rows[r], cols[c])
        let cells: Vec<usize> = windows
            .iter()
            .map(|w| self.tallies.add_grid(&w.rows, &w.cols))
            .collect();
        // the window whose pairs the operands hold (None: not built yet)
        let mut placed: Option<usize> = None;
        self.launch_all(
            windows.len(),
            |li, a, b| {
                // window w's pairs: `+B` (va) on the rows, `-B` (vb) on the
                // columns, or units back in their place
                let put = |w: &Window, a: &mut [f32], b: &mut [f32], va: f32, vb: f32| {
                    for i in 0..m {
                        a[i * kl + w.rows[i % w.rows.len()] as usize] = va;
                    }
                    for j in 0..n {
                        b[w.cols[j % w.cols.len()] as usize * n + j] = vb;
                    }
                };
                // after this call's first launch the operands are units but
                // for the last window's pairs: take those back (a launch
                // reads its operands, never writes them)
                match placed {
                    Some(last) => put(&windows[last], a, b, 1.0, 1.0),
                    None => {
                        refill(a, m * kl, 1.0);
                        refill(b, kl * n, 1.0);
                    }
                }
                put(&windows[li], a, b, hi, -hi);
                placed = Some(li);
            },
            |t, id, li, out| {
                let w = &windows[li];
                let (nr, nc) = (w.rows.len(), w.cols.len());
                for i in 0..m {
                    let r = i % nr;
                    for (j, &v) in out[i * n..(i + 1) * n].iter().enumerate() {
                        let c = j % nc;
                        let got = ct
                            .count(v)
                            .filter(|&x| x <= act)
                            .ok_or_else(|| ct.not_a_count(&name, v, w.rows[r], w.cols[c], i, j))?;
                        t.add_cell(cells[li], r * nc + c, act - got + 2, 1, at(id, i, j));
                    }
                }
                Ok(())
            },
        )
    }

    /// Both factors carry the large values (the narrow types' range), so
    /// only the diagonal elements are probes: `min(M, N)` per launch.
    pub(super) fn measure_diagonal(&mut self, probes: &[Key]) -> Result<(), RevealError> {
        let (m, kl, n, lo, hi) = (self.o.m, self.kl, self.o.n, self.lo, self.hi);
        let slots = m.min(n);
        let chunks: Vec<&[Key]> = probes.chunks(slots).collect();
        let ct = self.counter();
        let name = self.subject.name();
        let windows = std::mem::take(&mut self.windows);
        let sc = &windows;
        let active = |key: &Key| sc.active(key, kl);
        let done = self.launch_all(
            chunks.len(),
            |li, a, b| {
                refill(a, m * kl, 0.0);
                refill(b, kl * n, lo);
                for (i, &(p, q, c)) in chunks[li].iter().enumerate() {
                    let row = &mut a[i * kl..(i + 1) * kl];
                    if c == NO_WINDOW {
                        row.fill(lo);
                    } else {
                        sc.window(p, q, c).for_each(|x| row[x as usize] = lo);
                    }
                    row[p as usize] = hi;
                    row[q as usize] = hi;
                    b[p as usize * n + i] = hi;
                    b[q as usize * n + i] = -hi;
                }
            },
            |t, id, li, out| {
                for (i, key) in chunks[li].iter().enumerate() {
                    let v = out[i * n + i];
                    let act = active(key);
                    let value = ct
                        .read(sc, key.2, act, v)
                        .ok_or_else(|| ct.not_a_count(&name, v, key.0, key.1, i, i))?;
                    t.add(*key, value, 1, at(id, i, i));
                }
                Ok(())
            },
        );
        self.windows = windows;
        done
    }
}
