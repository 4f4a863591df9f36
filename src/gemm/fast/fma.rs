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
//! Two modes: `packed` (B pre-packed once per part into panels of NR
//! columns, A packed per tile; AVX-512 12x32, AVX2 6x16 or portable 4x8
//! register tiles) and `direct` for a few rows (chains read A and Bᵀ in
//! place, eight columns at a time; no packing of B, which would cost more
//! than the products).

use super::plan::{Op, Plan};
use super::{elementwise, Isa, TileBufs};
use rayon::prelude::*;

/// Rows up to which `direct` mode is used.
const DIRECT_ROWS: usize = 2;

#[derive(Clone, Copy, Debug)]
struct Geometry {
    mr: usize,
    nr: usize,
    kc: usize,
    mc: usize,
}

fn geometry(isa: Isa) -> Geometry {
    match isa {
        Isa::Avx512 => Geometry {
            mr: 12,
            nr: 32,
            kc: 256,
            mc: 96,
        },
        Isa::Avx2 => Geometry {
            mr: 6,
            nr: 16,
            kc: 256,
            mc: 96,
        },
        Isa::Portable => Geometry {
            mr: 4,
            nr: 8,
            kc: 256,
            mc: 64,
        },
    }
}

/// `C[0..mr, 0..nr] (row stride ldc) = chain(kc products)`, starting from +0
/// when `first`, else from the values in C. A is packed `[kc][mr]`, B
/// `[kc][nr]`.
type Kernel = unsafe fn(usize, *const f32, *const f32, *mut f32, usize, bool);

fn kernel(isa: Isa, fma: bool) -> Kernel {
    match (isa, fma) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, true) => x86::avx512::<12, true>,
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, false) => x86::avx512::<12, false>,
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, true) => x86::avx2::<6, true>,
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, false) => x86::avx2::<6, false>,
        (_, true) => portable::<4, 8, true>,
        (_, false) => portable::<4, 8, false>,
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

    /// `direct` chains with the FMA instruction inlined.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn direct_fma(args: super::Direct, fma: bool) {
        super::direct_impl(args, fma)
    }
}

/// Packs B for one part: panel p holds columns `p*nr..p*nr+nr` as `[ks][nr]`
/// (columns past N are zero).
fn pack_b(bt: &[f32], k: usize, n: usize, ks: &[u32], nr: usize) -> Vec<f32> {
    let panels = n.div_ceil(nr);
    let len = ks.len();
    let mut out = vec![0f32; panels * len * nr];
    // blocks of 64 k keep the destination lines in L1 while each column's
    // source is read in one sequential run
    const KB: usize = 64;
    out.par_chunks_mut((len * nr).max(1)).enumerate().for_each(|(p, dst)| {
        for kb in (0..len).step_by(KB) {
            let kse = &ks[kb..(kb + KB).min(len)];
            let d = &mut dst[kb * nr..];
            for x in 0..nr.min(n - p * nr) {
                let src = &bt[(p * nr + x) * k..(p * nr + x + 1) * k];
                for (kk, &kx) in kse.iter().enumerate() {
                    d[kk * nr + x] = src[kx as usize];
                }
            }
        }
    });
    out
}

/// Packs A rows `rows` (zero rows up to a multiple of mr) for the k list
/// `ks` as `[row panel][ks][mr]`.
fn pack_a(a: &[f32], k: usize, rows: &[usize], ks: &[u32], mr: usize, dst: &mut Vec<f32>) {
    let panels = rows.len().div_ceil(mr);
    let len = ks.len();
    dst.clear();
    dst.resize(panels * len * mr, 0.0);
    for (r, &row) in rows.iter().enumerate() {
        let (p, rr) = (r / mr, r % mr);
        let src = &a[row * k..(row + 1) * k];
        let d = &mut dst[p * len * mr..(p + 1) * len * mr];
        for (kk, &kx) in ks.iter().enumerate() {
            d[kk * mr + rr] = src[kx as usize];
        }
    }
}

pub(super) struct Direct<'a> {
    a: &'a [f32],
    bt: &'a [f32],
    k: usize,
    ks: &'a [u32],
    rows: &'a [usize],
    cols: std::ops::Range<usize>,
    dst: &'a mut [f32],
    ld: usize,
}

/// Chains of `rows` x `cols`, eight independent columns at a time.
#[inline(always)]
fn direct_impl(d: Direct, fma: bool) {
    const W: usize = 8;
    let k = d.k;
    for (r, &row) in d.rows.iter().enumerate() {
        let arow = &d.a[row * k..(row + 1) * k];
        let out = &mut d.dst[r * d.ld..];
        let mut j = d.cols.start;
        while j < d.cols.end {
            let w = W.min(d.cols.end - j);
            let mut acc = [0f32; W];
            if w == W {
                let b: [&[f32]; W] = std::array::from_fn(|x| &d.bt[(j + x) * k..(j + x + 1) * k]);
                for &kx in d.ks {
                    let kx = kx as usize;
                    let av = arow[kx];
                    for x in 0..W {
                        acc[x] = step(fma, av, b[x][kx], acc[x]);
                    }
                }
            } else {
                for (x, v) in acc.iter_mut().enumerate().take(w) {
                    let b = &d.bt[(j + x) * k..(j + x + 1) * k];
                    for &kx in d.ks {
                        *v = step(fma, arow[kx as usize], b[kx as usize], *v);
                    }
                }
            }
            out[j - d.cols.start..j - d.cols.start + w].copy_from_slice(&acc[..w]);
            j += w;
        }
    }
}

fn direct(isa: Isa, d: Direct, fma: bool) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx2 => unsafe { x86::direct_fma(d, fma) },
        _ => direct_impl(d, fma),
    }
}

/// All selected rows of C for a plan made of chains and element-wise ops.
pub(super) fn run(plan: &Plan, a: &[f32], bt: &[f32], k: usize, n: usize, rows: &[usize], isa: Isa) -> Vec<f32> {
    let threads = rayon::current_num_threads().max(1);
    let fma = plan.ops.iter().any(|o| matches!(o, Op::Chain { fma: true, .. }));
    let dr: usize = std::env::var("DR")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DIRECT_ROWS);
    if rows.len() <= dr {
        // tiles: one row, a block of columns
        let cb = 64usize.max(n.div_ceil(4 * threads).next_multiple_of(8)).min(n.max(1));
        let tiles: Vec<(usize, usize)> = (0..rows.len())
            .flat_map(|r| (0..n).step_by(cb).map(move |c| (r, c)))
            .collect();
        let done: Vec<Vec<f32>> = tiles
            .par_iter()
            .map(|&(r, c0)| {
                let c1 = (c0 + cb).min(n);
                let ld = c1 - c0;
                let mut bufs = TileBufs::new(plan.slots, ld);
                for st in &plan.steps {
                    match &plan.ops[st.op] {
                        Op::Chain { ks, .. } => {
                            let dst = &mut bufs.0[st.dst];
                            let rr = std::slice::from_ref(&rows[r]);
                            direct(
                                isa,
                                Direct {
                                    a,
                                    bt,
                                    k,
                                    ks,
                                    rows: rr,
                                    cols: c0..c1,
                                    dst,
                                    ld,
                                },
                                fma,
                            );
                        }
                        op => elementwise(op, st, &mut bufs.0),
                    }
                }
                std::mem::take(&mut bufs.0[plan.root_slot])
            })
            .collect();
        let mut out = vec![0f32; rows.len() * n];
        for (&(r, c0), t) in tiles.iter().zip(done) {
            out[r * n + c0..r * n + c0 + t.len()].copy_from_slice(&t);
        }
        return out;
    }

    let g = geometry(isa);
    let kern = kernel(isa, fma);
    // B packed once per part
    let mut packed: Vec<Option<Vec<f32>>> = vec![None; plan.ops.len()];
    for (op, ks) in plan.chains() {
        packed[op] = Some(pack_b(bt, k, n, ks, g.nr));
    }
    let panels = n.div_ceil(g.nr);
    let row_blocks = rows.len().div_ceil(g.mc);
    // enough tasks for the threads: split columns when rows are few
    let col_split = (4 * threads).div_ceil(row_blocks).clamp(1, panels);
    let pb = panels.div_ceil(col_split);
    let tiles: Vec<(usize, usize)> = (0..row_blocks)
        .flat_map(|r| (0..panels).step_by(pb).map(move |p| (r * g.mc, p)))
        .collect();
    let done: Vec<Vec<f32>> = tiles
        .par_iter()
        .map(|&(r0, p0)| {
            let r1 = (r0 + g.mc).min(rows.len());
            let p1 = (p0 + pb).min(panels);
            let trows = &rows[r0..r1];
            let ld = (p1 - p0) * g.nr;
            let rpad = trows.len().next_multiple_of(g.mr);
            let mut bufs = TileBufs::new(plan.slots, rpad * ld);
            let mut apack = Vec::new();
            for st in &plan.steps {
                match &plan.ops[st.op] {
                    Op::Chain { ks, .. } => {
                        let bp = packed[st.op].as_ref().unwrap();
                        let len = ks.len();
                        let dst = bufs.0[st.dst].as_mut_ptr();
                        for kc0 in (0..len).step_by(g.kc) {
                            let kcl = g.kc.min(len - kc0);
                            pack_a(a, k, trows, &ks[kc0..kc0 + kcl], g.mr, &mut apack);
                            for p in p0..p1 {
                                let bpp = bp[(p * len + kc0) * g.nr..].as_ptr();
                                for ip in 0..rpad / g.mr {
                                    // SAFETY: the packed panels hold kcl x mr and
                                    // kcl x nr values; the tile buffer holds rpad x ld.
                                    unsafe {
                                        kern(
                                            kcl,
                                            apack.as_ptr().add(ip * kcl * g.mr),
                                            bpp,
                                            dst.add(ip * g.mr * ld + (p - p0) * g.nr),
                                            ld,
                                            kc0 == 0,
                                        );
                                    }
                                }
                            }
                        }
                    }
                    op => elementwise(op, st, &mut bufs.0),
                }
            }
            std::mem::take(&mut bufs.0[plan.root_slot])
        })
        .collect();
    let mut out = vec![0f32; rows.len() * n];
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
