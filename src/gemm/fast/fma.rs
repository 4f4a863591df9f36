//! `fma` / `muladd` parts as GEMM kernels.
//!
//! A part is a chain from +0 over its k list in order; for every output the
//! kernels keep one accumulator and apply the products in exactly that
//! order, so a blocked GEMM (panels of A and B packed along the part's k
//! list, K cut into consecutive blocks whose partial results are reloaded,
//! never added) gives the chain bit for bit. Each accumulator update is one
//! `vfmadd` (`fma`) or a `vmul` then a `vadd` (`muladd`), IEEE single
//! precision with round-to-nearest and subnormals kept, as in the evaluator.
//!
//! Register tiles: AVX-512 12x32 (1x32, 2x32, 4x32 for a few rows), AVX2
//! 6x16 (1x16, 2x16), portable 4x8. A is packed once per part into panels
//! of MR rows, shared by every tile. B is packed into panels of NR columns:
//! once per part for all tiles when there are several row blocks, else per
//! tile and K block, right before use; B panels start on a cache line.
//! With AVX-512 both pack runs of 16 consecutive k by 16x16 in-register
//! transposes. The AVX-512 kernel prefetches its A and B lines `PF` k
//! steps ahead. A plan that is one chain of at least one term writes its
//! tiles straight into C (N a multiple of NR), storing every element
//! before reading it. Packing buffers are scratch buffers reused between
//! calls, outputs are not zeroed first ([`super::buffer`]).

use super::buffer::{unwritten, zeroed, Lines};
use super::isa::Isa;
use super::plan::{Op, Plan};
use super::tile::{elementwise, TileBufs};
use rayon::prelude::*;

#[derive(Clone, Copy, Debug)]
struct Geometry {
    /// Rows of the register tile.
    mr: usize,
    /// Columns of the register tile (B panel width).
    nr: usize,
    /// K block where each tile packs its own B (one row block): the
    /// tile's B block stays in L2 while it is used.
    kc: usize,
    /// K block where B is packed once for every tile (several row blocks):
    /// long blocks, so each register tile's accumulators are loaded and
    /// stored rarely (AVX-512: 2048, 8% faster than 256 at 2048^3 on a
    /// Zen 4 core; docs/PERFORMANCE.md).
    kc_packed: usize,
    /// Rows of a task's tile: each B panel serves mc / mr register tiles
    /// (AVX-512: 96 rows; with kc_packed the tile's packed A, 96 x 2048
    /// floats, stays in a 1 MiB L2).
    mc: usize,
}

fn geometry(isa: Isa, rows: usize) -> Geometry {
    let (mrs, nr, mc, kc_packed): (&[usize], usize, usize, usize) = match isa {
        Isa::Avx512 => (&[1, 2, 4, 12], 32, 96, 2048),
        Isa::Avx2 => (&[1, 2, 6], 16, 96, 256),
        Isa::Portable => (&[4], 8, 64, 256),
    };
    // the smallest register tile that holds all rows, else the largest
    let mr = mrs.iter().copied().find(|&m| m >= rows).unwrap_or(mrs[mrs.len() - 1]);
    Geometry {
        mr,
        nr,
        kc: 256,
        kc_packed,
        mc,
    }
}

/// `C[0..mr, 0..nr] (row stride ldc) = chain(kc products)`, starting from +0
/// when `first`, else from the values in C. A is packed `[kc][mr]`, B
/// `[kc][nr]`.
type Kernel = unsafe fn(usize, *const f32, *const f32, *mut f32, usize, bool);

fn kernel(isa: Isa, mr: usize, fma: bool) -> Kernel {
    macro_rules! pick {
        ($f:ident, $($m:literal),*) => {
            match (mr, fma) {
                $(($m, true) => $f::<$m, true>, ($m, false) => $f::<$m, false>,)*
                _ => unreachable!("no {mr}-row kernel"),
            }
        };
    }
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => {
            use x86::avx512 as f;
            pick!(f, 1, 2, 4, 12)
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            use x86::avx2 as f;
            pick!(f, 1, 2, 6)
        }
        _ => match fma {
            true => portable::<4, 8, true>,
            false => portable::<4, 8, false>,
        },
    }
}

#[inline(always)]
fn step(fma: bool, a: f32, b: f32, acc: f32) -> f32 {
    if fma {
        a.mul_add(b, acc)
    } else {
        acc + a * b
    }
}

unsafe fn portable<const MR: usize, const NR: usize, const FMA: bool>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    first: bool,
) {
    let mut acc = [[0f32; NR]; MR];
    if !first {
        for (r, row) in acc.iter_mut().enumerate() {
            for (x, v) in row.iter_mut().enumerate() {
                *v = *c.add(r * ldc + x);
            }
        }
    }
    for kk in 0..kc {
        let bk = std::slice::from_raw_parts(b.add(kk * NR), NR);
        for (r, row) in acc.iter_mut().enumerate() {
            let av = *a.add(kk * MR + r);
            for (v, &bv) in row.iter_mut().zip(bk) {
                *v = step(FMA, av, bv, *v);
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (x, v) in row.iter().enumerate() {
            *c.add(r * ldc + x) = *v;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// How many k steps ahead the AVX-512 kernel asks for its A and B
    /// lines (software prefetch into L1; with K blocks of 2048 a B panel,
    /// 256 KiB, streams from L2). 32: 0.92x -> 1.02-1.06x OpenBLAS at
    /// 2048^3 on an Intel Xeon (family 6 model 167); 8: 0.97x, 16: 1.0x,
    /// 64: like 32 (docs/PERFORMANCE.md). A hint: it never faults and
    /// changes no value.
    const PF: usize = 32;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512<const MR: usize, const FMA: bool>(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        first: bool,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        if !first {
            for (r, v) in acc.iter_mut().enumerate() {
                v[0] = _mm512_loadu_ps(c.add(r * ldc));
                v[1] = _mm512_loadu_ps(c.add(r * ldc + 16));
            }
        }
        let (mut a, mut b) = (a, b);
        for _ in 0..kc {
            _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(32 * PF) as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(32 * PF + 16) as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add(MR * PF) as *const i8);
            let b0 = _mm512_loadu_ps(b);
            let b1 = _mm512_loadu_ps(b.add(16));
            for (r, v) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*a.add(r));
                if FMA {
                    v[0] = _mm512_fmadd_ps(av, b0, v[0]);
                    v[1] = _mm512_fmadd_ps(av, b1, v[1]);
                } else {
                    v[0] = _mm512_add_ps(v[0], _mm512_mul_ps(av, b0));
                    v[1] = _mm512_add_ps(v[1], _mm512_mul_ps(av, b1));
                }
            }
            a = a.add(MR);
            b = b.add(32);
        }
        for (r, v) in acc.iter().enumerate() {
            _mm512_storeu_ps(c.add(r * ldc), v[0]);
            _mm512_storeu_ps(c.add(r * ldc + 16), v[1]);
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2<const MR: usize, const FMA: bool>(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        first: bool,
    ) {
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        if !first {
            for (r, v) in acc.iter_mut().enumerate() {
                v[0] = _mm256_loadu_ps(c.add(r * ldc));
                v[1] = _mm256_loadu_ps(c.add(r * ldc + 8));
            }
        }
        let (mut a, mut b) = (a, b);
        for _ in 0..kc {
            let b0 = _mm256_loadu_ps(b);
            let b1 = _mm256_loadu_ps(b.add(8));
            for (r, v) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*a.add(r));
                if FMA {
                    v[0] = _mm256_fmadd_ps(av, b0, v[0]);
                    v[1] = _mm256_fmadd_ps(av, b1, v[1]);
                } else {
                    v[0] = _mm256_add_ps(v[0], _mm256_mul_ps(av, b0));
                    v[1] = _mm256_add_ps(v[1], _mm256_mul_ps(av, b1));
                }
            }
            a = a.add(MR);
            b = b.add(16);
        }
        for (r, v) in acc.iter().enumerate() {
            _mm256_storeu_ps(c.add(r * ldc), v[0]);
            _mm256_storeu_ps(c.add(r * ldc + 8), v[1]);
        }
    }

    /// Packs 16 columns x 16 k of Bᵀ: `src` points at column 0, k 0 (column
    /// stride `ld`); writes `dst[kk * nr + x]`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn transpose16(src: *const f32, ld: usize, dst: *mut f32, nr: usize) {
        let r: [__m512; 16] = std::array::from_fn(|x| {
            // the same columns' lines a few blocks on (a prefetch never faults)
            _mm_prefetch::<_MM_HINT_T0>(src.wrapping_add(x * ld + 64) as *const i8);
            _mm512_loadu_ps(src.add(x * ld))
        });
        for (kk, v) in transpose(r).iter().enumerate() {
            _mm512_storeu_ps(dst.add(kk * nr), *v);
        }
    }

    /// Packs 16 k of `rows.len() <= mr <= 16` rows of A: row x's 16 values
    /// start at `rows[x]`; writes `dst[kk * mr + x]` for x < mr, zero past
    /// the rows.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn pack_rows16(rows: &[*const f32], dst: *mut f32, mr: usize) {
        let r: [__m512; 16] = std::array::from_fn(|x| match rows.get(x) {
            Some(&p) => _mm512_loadu_ps(p),
            None => _mm512_setzero_ps(),
        });
        let mask = ((1u32 << mr) - 1) as u16;
        for (kk, v) in transpose(r).iter().enumerate() {
            _mm512_mask_storeu_ps(dst.add(kk * mr), mask, *v);
        }
    }

    /// The 16x16 transpose: lane x of the result's vector kk is lane kk of
    /// `r[x]`.
    #[target_feature(enable = "avx512f")]
    unsafe fn transpose(mut r: [__m512; 16]) -> [__m512; 16] {
        let mut t = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        let lo = |a: __m512, b: __m512| _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
        let hi = |a: __m512, b: __m512| _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
        for i in 0..4 {
            let b = 4 * i;
            r[b] = lo(t[b], t[b + 2]);
            r[b + 1] = hi(t[b], t[b + 2]);
            r[b + 2] = lo(t[b + 1], t[b + 3]);
            r[b + 3] = hi(t[b + 1], t[b + 3]);
        }
        for h in 0..2 {
            let b = 8 * h;
            for i in 0..4 {
                t[b + i] = _mm512_shuffle_f32x4::<0x88>(r[b + i], r[b + i + 4]);
                t[b + i + 4] = _mm512_shuffle_f32x4::<0xDD>(r[b + i], r[b + i + 4]);
            }
        }
        for i in 0..8 {
            r[i] = _mm512_shuffle_f32x4::<0x88>(t[i], t[i + 8]);
            r[i + 8] = _mm512_shuffle_f32x4::<0xDD>(t[i], t[i + 8]);
        }
        r
    }
}

/// `ks[from]` where `ks[from..from + 16]` are 16 consecutive k, else None.
fn run16(ks: &[u32], from: usize) -> Option<usize> {
    let run = ks.get(from..from + 16)?;
    run.windows(2).all(|w| w[1] == w[0] + 1).then_some(run[0] as usize)
}

/// Packs panel `p` of Bᵀ (columns `p*nr..p*nr+nr`, zero past N) for the k
/// list `ks` as `[ks][nr]`.
#[allow(clippy::too_many_arguments)]
fn pack_b_panel(isa: Isa, bt: &[f32], k: usize, n: usize, ks: &[u32], p: usize, nr: usize, dst: &mut [f32]) {
    let cols = nr.min(n - p * nr);
    let len = ks.len();
    let mut kk = 0;
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && cols == nr {
        // runs of 16 consecutive k: 16x16 transposes
        while let Some(k0) = run16(ks, kk) {
            for half in 0..nr / 16 {
                let j = p * nr + half * 16;
                // SAFETY: columns j..j+16 < n exist with k0+15 < k; dst holds len x nr.
                unsafe {
                    x86::transpose16(
                        bt[j * k + k0..].as_ptr(),
                        k,
                        dst[kk * nr + half * 16..].as_mut_ptr(),
                        nr,
                    )
                };
            }
            kk += 16;
        }
    }
    let _ = isa;
    // the rest: blocks of 64 k keep the destination lines in L1 while each
    // column's source is read in one sequential run
    for kb in (kk..len).step_by(64) {
        let kse = &ks[kb..(kb + 64).min(len)];
        let d = &mut dst[kb * nr..];
        for x in 0..cols {
            let src = &bt[(p * nr + x) * k..(p * nr + x + 1) * k];
            for (i, &kx) in kse.iter().enumerate() {
                d[i * nr + x] = src[kx as usize];
            }
        }
        if cols < nr {
            for i in 0..kse.len() {
                d[i * nr + cols..(i + 1) * nr].fill(0.0);
            }
        }
    }
}

/// Packs A rows `rows` (zero rows up to a multiple of mr) for the k list
/// `ks` as `[row panel][ks][mr]`, once per part for every tile; each
/// panel is written in one sequential run while its mr rows are read.
/// Every element of the (scratch) buffer is written.
fn pack_a(isa: Isa, a: &[f32], k: usize, rows: &[usize], ks: &[u32], mr: usize) -> Lines {
    let len = ks.len();
    let mut dst = Lines::scratch(rows.len().div_ceil(mr) * len * mr);
    dst.par_chunks_mut(len * mr).enumerate().for_each(|(p, d)| {
        let src: Vec<&[f32]> = rows[p * mr..((p + 1) * mr).min(rows.len())]
            .iter()
            .map(|&row| &a[row * k..(row + 1) * k])
            .collect();
        let mut from = 0;
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx512 && mr <= 16 {
            // runs of 16 consecutive k: 16x16 transposes
            let mut at: Vec<*const f32> = Vec::with_capacity(src.len());
            while let Some(k0) = run16(ks, from) {
                at.clear();
                at.extend(src.iter().map(|s| s[k0..k0 + 16].as_ptr()));
                // SAFETY: each row holds k0..k0 + 16 (sliced above); d holds
                // 16 x mr values from from * mr.
                unsafe { x86::pack_rows16(&at, d[from * mr..(from + 16) * mr].as_mut_ptr(), mr) };
                from += 16;
            }
        }
        let _ = isa;
        for (kk, &kx) in ks.iter().enumerate().skip(from) {
            let line = &mut d[kk * mr..(kk + 1) * mr];
            for (rr, s) in src.iter().enumerate() {
                line[rr] = s[kx as usize];
            }
            line[src.len()..].fill(0.0);
        }
    });
    dst
}

/// The output, written by tiles in parallel, each to its own rows and
/// columns.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: tiles write disjoint elements (see `run`).
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// # Safety
    /// `at` lies inside the output.
    unsafe fn at(self, at: usize) -> *mut f32 {
        self.0.add(at)
    }
}

/// All selected rows of C for a plan made of chains and element-wise ops.
///
/// Tiles of C (mc rows, up to 16 B panels) run in parallel. A plan that is
/// one chain, with N a multiple of the panel width, is written straight
/// into C (rows padded to the register tile, cut off at the end); any
/// other goes through the tile buffers of its slots and is copied out.
pub(super) fn run(plan: &Plan, a: &[f32], bt: &[f32], k: usize, n: usize, rows: &[usize], isa: Isa) -> Vec<f32> {
    let threads = rayon::current_num_threads().max(1);
    let fma = plan.ops.iter().any(|o| matches!(o, Op::Chain { fma: true, .. }));
    let g = geometry(isa, rows.len());
    let kern = kernel(isa, g.mr, fma);
    let panels = n.div_ceil(g.nr);
    let row_blocks = rows.len().div_ceil(g.mc);
    // A packed once per part for every tile; B too when there are several
    // row blocks (else each tile packs its own B blocks right before use)
    let mut apacked: Vec<Option<Lines>> = (0..plan.ops.len()).map(|_| None).collect();
    let mut packed: Vec<Option<Lines>> = (0..plan.ops.len()).map(|_| None).collect();
    for (op, ks) in plan.chains() {
        apacked[op] = Some(pack_a(isa, a, k, rows, ks, g.mr));
        if row_blocks > 1 {
            let len = ks.len();
            let mut out = Lines::scratch(panels * len * g.nr);
            out.par_chunks_mut(len * g.nr)
                .enumerate()
                .for_each(|(p, dst)| pack_b_panel(isa, bt, k, n, ks, p, g.nr, dst));
            packed[op] = Some(out);
        }
    }
    // enough tasks for the threads (split columns when rows are few), and
    // at most 16 panels per tile (the tile's B block stays in L2)
    let col_split = (4 * threads).div_ceil(row_blocks).clamp(1, panels);
    let pb = panels.div_ceil(col_split).min(16);
    let tiles: Vec<(usize, usize)> = (0..row_blocks)
        .flat_map(|r| (0..panels).step_by(pb).map(move |p| (r * g.mc, p)))
        .collect();
    // one chain of at least one term (its first K block stores every element)
    let one_chain = match plan.steps[..] {
        [st] => matches!(&plan.ops[st.op], Op::Chain { ks, .. } if !ks.is_empty()) && st.dst == plan.root_slot,
        _ => false,
    };
    let direct = one_chain && n.is_multiple_of(g.nr);
    let rows_pad = rows.len().next_multiple_of(g.mr);
    // direct: every element of rows_pad x n is stored by the first K block
    // of its tile before anything reads it
    let mut out: Vec<f32> = unwritten(if direct { rows_pad * n } else { 0 });
    let shared = Shared(out.as_mut_ptr());
    let kc = if row_blocks > 1 { g.kc_packed } else { g.kc };
    let done: Vec<Vec<f32>> = tiles
        .par_iter()
        .map(|&(r0, p0)| {
            let r1 = (r0 + g.mc).min(rows.len());
            let p1 = (p0 + pb).min(panels);
            let rpad = (r1 - r0).next_multiple_of(g.mr);
            // where the tile's slots live: C itself, or the tile buffers
            let (mut bufs, ld) = match direct {
                true => (TileBufs(Vec::new()), n),
                false => (TileBufs::new(plan.slots, rpad * (p1 - p0) * g.nr), (p1 - p0) * g.nr),
            };
            let mut bpack = Lines::scratch(if row_blocks > 1 { 0 } else { (p1 - p0) * kc * g.nr });
            for st in &plan.steps {
                let Op::Chain { ks, .. } = &plan.ops[st.op] else {
                    elementwise(&plan.ops[st.op], st, &mut bufs.0);
                    continue;
                };
                let len = ks.len();
                let apk = apacked[st.op].as_ref().expect("packed above");
                let dst = match direct {
                    // SAFETY: the tile's rows r0..r0 + rpad and columns from
                    // p0 * nr lie inside C's rows_pad x n, and no other tile
                    // writes them.
                    true => unsafe { shared.at(r0 * n + p0 * g.nr) },
                    false => bufs.0[st.dst].as_mut_ptr(),
                };
                for kc0 in (0..len).step_by(kc) {
                    let kcl = kc.min(len - kc0);
                    let kse = &ks[kc0..kc0 + kcl];
                    let bps: Vec<*const f32> = match &packed[st.op] {
                        Some(bp) => (p0..p1).map(|p| bp[(p * len + kc0) * g.nr..].as_ptr()).collect(),
                        None => {
                            for (x, p) in (p0..p1).enumerate() {
                                let d = &mut bpack[x * kcl * g.nr..(x + 1) * kcl * g.nr];
                                pack_b_panel(isa, bt, k, n, kse, p, g.nr, d);
                            }
                            (0..p1 - p0).map(|x| bpack[x * kcl * g.nr..].as_ptr()).collect()
                        }
                    };
                    // each B panel stays in L1 while the tile's A micro-panels
                    // stream past it
                    for (x, &bpp) in bps.iter().enumerate() {
                        for ip in 0..rpad / g.mr {
                            let ap = apk[((r0 / g.mr + ip) * len + kc0) * g.mr..].as_ptr();
                            // SAFETY: the packed panels hold kcl x mr and kcl x nr
                            // values; the destination holds rpad x ld from dst.
                            unsafe { kern(kcl, ap, bpp, dst.add(ip * g.mr * ld + x * g.nr), ld, kc0 == 0) };
                        }
                    }
                }
            }
            match direct {
                true => Vec::new(),
                false => std::mem::take(&mut bufs.0[plan.root_slot]),
            }
        })
        .collect();
    if direct {
        // SAFETY: the tiles above stored all rows_pad x n elements (the
        // register tiles cover rpad rows of every tile, the tiles every
        // row block and panel, and N is a multiple of nr).
        unsafe { out.set_len(rows_pad * n) };
        out.truncate(rows.len() * n);
        return out;
    }
    let mut out = zeroed(rows.len() * n);
    for (&(r0, p0), t) in tiles.iter().zip(done) {
        let r1 = (r0 + g.mc).min(rows.len());
        let c0 = p0 * g.nr;
        let c1 = ((p0 + pb) * g.nr).min(n);
        let ld = ((p0 + pb).min(panels) - p0) * g.nr;
        for r in r0..r1 {
            out[r * n + c0..r * n + c1].copy_from_slice(&t[(r - r0) * ld..(r - r0) * ld + (c1 - c0)]);
        }
    }
    out
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    #[test]
    fn transpose16_transposes() {
        if !is_x86_feature_detected!("avx512f") {
            return;
        }
        let src: Vec<f32> = (0..16 * 40).map(|i| i as f32).collect();
        let mut dst = vec![0f32; 16 * 32];
        unsafe { super::x86::transpose16(src[3..].as_ptr(), 40, dst[5..].as_mut_ptr(), 32) };
        for kk in 0..16 {
            for x in 0..16 {
                assert_eq!(dst[5 + kk * 32 + x], (x * 40 + 3 + kk) as f32, "{kk} {x}");
            }
        }
    }

    #[test]
    fn pack_rows16_packs_rows_and_zeroes_the_rest() {
        if !is_x86_feature_detected!("avx512f") {
            return;
        }
        let src: Vec<f32> = (0..16 * 40).map(|i| i as f32 + 1.0).collect();
        // 5 rows (not in order) into panels of 12: lanes 5..12 zero, the
        // values past the panel untouched
        let rows: Vec<*const f32> = [7, 0, 3, 15, 9].iter().map(|&r| src[r * 40 + 2..].as_ptr()).collect();
        let mut dst = vec![-1f32; 16 * 12 + 8];
        unsafe { super::x86::pack_rows16(&rows, dst[3..].as_mut_ptr(), 12) };
        for kk in 0..16 {
            for x in 0..12 {
                let want = match [7, 0, 3, 15, 9].get(x) {
                    Some(r) => (r * 40 + 2 + kk) as f32 + 1.0,
                    None => 0.0,
                };
                assert_eq!(dst[3 + kk * 12 + x], want, "{kk} {x}");
            }
        }
        assert!(dst[..3].iter().chain(&dst[3 + 16 * 12..]).all(|&v| v == -1.0));
    }
}
