//! CUDA C++ generated from an order: kernels whose accumulation order is
//! exactly the order's (docs/ORDERS.md), built from the instructions that
//! order names.
//!
//! Structure of every generated program, mirroring the order's parts:
//! - `parts`: one thread (scalar families) or one warp / warpgroup
//!   (tensor-core families) per output tile and *group* (a split-K part, a
//!   fresh k-tile without split, or a lane). Inside a group, *segments*
//!   (fresh tiles of a split part) each start from +0 and are combined
//!   serially; inside a segment, promotion blocks (`promote=P`) and
//!   tensor-core chunks (`mma` k). Results go to a workspace `[G][M][N]`.
//! - `reduce`: one thread per output combines the G group results in the
//!   order's reduction (serial or pairwise, `__fadd_rn`), then converts the
//!   output (`__float2bfloat16_rn` / `__float2half_rn`, widened back).
//! - `lanes`: one warp per output; lane l accumulates k = l, l+L, ...; a
//!   `__shfl_xor_sync` butterfly combines them.
//!
//! Arithmetic uses `__fmaf_rn`/`__fmul_rn`/`__fadd_rn` only (compiled with
//! `--fmad=false`, no flush to zero). MX element codes and E8M0 scales are
//! decoded in software; `scale=block` terms are exact integer block dots
//! added with a single rounding (`rn_add_exact`).

use crate::order::{Family, InType, MmaSplit, MxScale, Order, OutFmt, Reduce, Tile};

/// The sm_90 instruction that performs one tensor-core step of an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TcInstr {
    /// `mma.sync.m16n8k16` bf16/f16 (HMMA, F=25).
    MmaSync16,
    /// `mma.sync.m16n8k32` e4m3/e5m2 (two f16 HMMAs + FADD on sm_90).
    MmaSyncFp8,
    /// `wgmma.m64n8k16` bf16/f16 (HGMMA, F=25).
    Wgmma16,
    /// `wgmma.m64n8k32` e4m3/e5m2 (QGMMA, F=13, e8m13 result).
    WgmmaFp8,
}

/// What the kernel reads as a term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TermKind {
    /// f32 values (or the tensor-core input type's bits).
    Values,
    /// MX codes decoded and scaled to f32 (`scale=dequant`).
    MxDequant,
    /// Exact 32-element block dots times 2^(Xa+Xb) (`scale=block`, fma/muladd).
    MxBlock,
    /// MX element codes fed to the tensor core, each 32-block promoted with
    /// its scale product (`scale=block;promote=32`).
    MxPromote,
}

/// How groups are formed from terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupMode {
    /// `split=S` (S >= 1) contiguous parts of ceil(T/S) terms.
    Contiguous,
    /// `split=S/interleave;ktile=T`: tile t in part t mod S.
    Interleave,
    /// `ktile=T;tile=fresh` without split: each tile is a group.
    Tiles,
    /// `lanes=L`.
    Lanes,
}

/// An order lowered to what a CUDA kernel needs.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuPlan {
    pub order: Order,
    pub scalar_fma: bool,
    pub instr: Option<TcInstr>,
    pub term: TermKind,
    /// MX element format (e4m3 or e5m2) when the inputs are MX.
    pub mx_e5m2: bool,
    pub mode: GroupMode,
    pub split: u32,
    /// Contiguous parts start on multiples of this (1: no `align`).
    pub align: u32,
    pub tile: u32,
    /// Fresh segments of `tile` terms inside each group.
    pub fresh_segments: bool,
    pub lanes: u32,
    pub promote: u32,
    pub pairwise: bool,
    pub out: OutFmt,
}

/// Which kernel implements a 16-bit `mma(k=16,f=25)` step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Backend16 {
    MmaSync,
    Wgmma,
}

impl GpuPlan {
    /// Lowers `order` for inputs that are f32 (`mx = None`) or MX with the
    /// given element format (`Some(false)` e4m3, `Some(true)` e5m2).
    /// Orders with no sm_90 realisation are refused with the reason.
    pub fn new(order: &Order, mx_e5m2: Option<bool>, backend16: Backend16) -> Result<GpuPlan, String> {
        let mx = mx_e5m2.is_some();
        let (scalar_fma, instr) = match order.family {
            Family::Fma => (true, None),
            Family::MulAdd => (false, None),
            Family::Mma(m) => {
                let fp8 = matches!(m.input, InType::E4M3 | InType::E5M2);
                let sixteen = matches!(m.input, InType::Bf16 | InType::F16);
                let instr = if m.k == 16
                    && m.f == 25
                    && m.out == 23
                    && m.split == MmaSplit::None
                    && m.c == crate::order::CMode::Fused
                    && sixteen
                {
                    match backend16 {
                        Backend16::MmaSync => TcInstr::MmaSync16,
                        Backend16::Wgmma => TcInstr::Wgmma16,
                    }
                } else if m.k == 32
                    && m.f == 25
                    && m.out == 23
                    && m.split == MmaSplit::Mod4
                    && m.c == crate::order::CMode::Late
                    && fp8
                {
                    TcInstr::MmaSyncFp8
                } else if m.k == 32
                    && m.f == 13
                    && m.out == 13
                    && m.split == MmaSplit::None
                    && m.c == crate::order::CMode::Fused
                    && fp8
                {
                    TcInstr::WgmmaFp8
                } else {
                    return Err(format!("no sm_90 instruction performs the step `{order}`"));
                };
                if mx {
                    let want = if mx_e5m2 == Some(true) {
                        InType::E5M2
                    } else {
                        InType::E4M3
                    };
                    if m.input != want {
                        return Err("the tensor-core input type must be the MX element format".into());
                    }
                }
                (false, Some(instr))
            }
        };
        let term = match (mx, order.scale, instr.is_some()) {
            (false, _, _) => TermKind::Values,
            (true, MxScale::Dequant, false) => TermKind::MxDequant,
            (true, MxScale::Block, false) => {
                if mx_e5m2 == Some(true) {
                    return Err(
                        "scale=block on the GPU is built for e4m3 blocks only (exact in 64-bit integers)".into(),
                    );
                }
                TermKind::MxBlock
            }
            (true, MxScale::Block, true) if order.promote == Some(32) => TermKind::MxPromote,
            (true, MxScale::Fused, _) => {
                return Err("scale=fused (Blackwell block-scaled mma) has no sm_90 instruction".into())
            }
            (true, _, true) => return Err("MX inputs on sm_90 tensor cores need scale=block;promote=32".into()),
        };
        let lanes = order.lanes;
        let fresh = order.tile == Tile::Fresh;
        let mode = if lanes > 1 {
            if instr.is_some() {
                return Err("lanes with a tensor-core family has no kernel here".into());
            }
            if fresh {
                return Err("lanes cut into fresh k-tiles have no kernel here (one chain per lane)".into());
            }
            if lanes > 32 || !lanes.is_power_of_two() || order.reduction() != Reduce::Butterfly {
                return Err(
                    "lanes must be a power of two <= 32 reduced by butterfly (one warp, __shfl_xor_sync)".into(),
                );
            }
            GroupMode::Lanes
        } else if order.interleave {
            GroupMode::Interleave
        } else if order.split == 1 && fresh {
            GroupMode::Tiles
        } else {
            GroupMode::Contiguous
        };
        if order.reduction() == Reduce::Butterfly && mode != GroupMode::Lanes {
            return Err("butterfly reduction is only built for lanes".into());
        }
        let promote = order.promote.unwrap_or(0);
        if promote > 0 && instr.is_none() {
            return Err("promote needs a tensor-core family".into());
        }
        Ok(GpuPlan {
            order: *order,
            scalar_fma,
            instr,
            term,
            mx_e5m2: mx_e5m2 == Some(true),
            mode,
            split: order.split,
            align: order.align.unwrap_or(1),
            tile: order.ktile.unwrap_or(0),
            fresh_segments: fresh && mode != GroupMode::Tiles,
            lanes,
            promote,
            pairwise: order.reduction() == Reduce::Pairwise,
            out: order.out,
        })
    }

    /// Number of terms per output: K, or K/32 for exact block terms.
    pub fn terms(&self, k: usize) -> usize {
        if self.term == TermKind::MxBlock {
            k / 32
        } else {
            k
        }
    }

    /// Number of groups (workspace slices) for `terms` terms.
    pub fn groups(&self, terms: usize) -> usize {
        match self.mode {
            GroupMode::Contiguous | GroupMode::Interleave => self.split as usize,
            GroupMode::Tiles => terms.div_ceil(self.tile as usize).max(1),
            GroupMode::Lanes => self.lanes as usize,
        }
    }

    /// Kernel shape: threads per block and outputs per block along (M, N).
    pub fn tile_shape(&self) -> (u32, u32, u32) {
        match (self.mode, self.instr) {
            (GroupMode::Lanes, _) => (32, 1, 1),
            (_, None) => (128, 1, 128),
            (_, Some(TcInstr::MmaSync16 | TcInstr::MmaSyncFp8)) => (32, 16, 8),
            (_, Some(TcInstr::Wgmma16 | TcInstr::WgmmaFp8)) => (128, 64, 8),
        }
    }

    pub fn needs_sm90a(&self) -> bool {
        matches!(self.instr, Some(TcInstr::Wgmma16 | TcInstr::WgmmaFp8))
    }

    /// Bytes per element of the A/B buffers the kernel reads.
    pub fn elem_bytes(&self) -> usize {
        match (self.term, self.instr) {
            (TermKind::Values, None) => 4,
            (TermKind::Values, Some(TcInstr::MmaSync16 | TcInstr::Wgmma16)) => 2,
            _ => 1,
        }
    }

    /// The complete CUDA source.
    pub fn source(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("// mxbi generated kernel for order `{}`\n", self.order));
        s.push_str("#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n");
        let instr_id = match self.instr {
            None => 0,
            Some(TcInstr::MmaSync16) => 1,
            Some(TcInstr::MmaSyncFp8) => 2,
            Some(TcInstr::Wgmma16) => 3,
            Some(TcInstr::WgmmaFp8) => 4,
        };
        let in_f16 = matches!(self.order.mma().map(|m| m.input), Some(InType::F16));
        let in_e5m2 = matches!(self.order.mma().map(|m| m.input), Some(InType::E5M2)) || self.mx_e5m2;
        let consts = [
            ("SCALAR_FMA", self.scalar_fma as i64),
            ("INSTR", instr_id),
            (
                "TERM",
                match self.term {
                    TermKind::Values => 0,
                    TermKind::MxDequant => 1,
                    TermKind::MxBlock => 2,
                    TermKind::MxPromote => 3,
                },
            ),
            ("IN_F16", in_f16 as i64),
            ("IN_E5M2", in_e5m2 as i64),
            (
                "MODE",
                match self.mode {
                    GroupMode::Contiguous => 0,
                    GroupMode::Interleave => 1,
                    GroupMode::Tiles => 2,
                    GroupMode::Lanes => 3,
                },
            ),
            ("SPLIT", self.split as i64),
            ("ALIGN", self.align as i64),
            ("TILE", self.tile as i64),
            ("FRESH_SEG", self.fresh_segments as i64),
            ("LANES", self.lanes as i64),
            ("PROMOTE", self.promote as i64),
            ("PAIRWISE", self.pairwise as i64),
            (
                "OUT",
                match self.out {
                    OutFmt::F32 => 0,
                    OutFmt::Bf16 => 1,
                    OutFmt::F16 => 2,
                },
            ),
        ];
        for (name, v) in consts {
            s.push_str(&format!("#define {name} {v}\n"));
        }
        s.push_str(KERNELS);
        s
    }
}

/// The kernel bodies; specialised by the `#define`s above.
const KERNELS: &str = r#"
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;

// ---- group / position -> term index -------------------------------------
__device__ __forceinline__ int group_len(int g, int nt) {
#if MODE == 0
    int chunk = (nt + SPLIT - 1) / SPLIT; chunk = (chunk + ALIGN - 1) / ALIGN * ALIGN; if (chunk < 1) chunk = 1;
    int start = g * chunk; int end = min(nt, start + chunk);
    return end > start ? end - start : 0;
#elif MODE == 1
    int len = 0;
    for (int t = g; t * TILE < nt; t += SPLIT) len += min(TILE, nt - t * TILE);
    return len;
#elif MODE == 2
    int start = g * TILE; return start < nt ? min(TILE, nt - start) : 0;
#else
    return g < nt ? (nt - g + LANES - 1) / LANES : 0;
#endif
}

// term index of position `pos` (0 <= pos < group_len) of group g
__device__ __forceinline__ int term_of(int g, int pos, int nt) {
#if MODE == 0
    int chunk = (nt + SPLIT - 1) / SPLIT; chunk = (chunk + ALIGN - 1) / ALIGN * ALIGN; if (chunk < 1) chunk = 1;
    return g * chunk + pos;
#elif MODE == 1
    int u = pos / TILE, o = pos % TILE;
    return (g + u * SPLIT) * TILE + o;
#elif MODE == 2
    return g * TILE + pos;
#else
    return g + pos * LANES;
#endif
}

// ---- software decoding of MX operands ------------------------------------
__device__ __forceinline__ float pow2f(int e) {  // exact 2^e for e in [-149, 127]
    if (e >= -126) return __uint_as_float((u32)(e + 127) << 23);
    return __uint_as_float(1u << (e + 149));
}

// element code -> (integer significand m, exponent q): value = m * 2^q; returns false for NaN/Inf
__device__ __forceinline__ bool elem_parts(u8 c, int* m, int* q, bool e5m2) {
    int s = (c >> 7) ? -1 : 1;
    if (!e5m2) {
        int E = (c >> 3) & 15, f = c & 7;
        if (E == 15 && f == 7) return false;
        if (E == 0) { *m = s * f; *q = -9; } else { *m = s * (8 + f); *q = E - 10; }
    } else {
        int E = (c >> 2) & 31, f = c & 3;
        if (E == 31) return false;
        if (E == 0) { *m = s * f; *q = -16; } else { *m = s * (4 + f); *q = E - 17; }
    }
    return true;
}

__device__ __forceinline__ float elem_value(u8 c, bool e5m2) {
    int m, q;
    if (!elem_parts(c, &m, &q, e5m2)) {
        if (e5m2 && ((c >> 2) & 31) == 31 && (c & 3) == 0) return __uint_as_float((c >> 7) ? 0xff800000u : 0x7f800000u);
        return __uint_as_float(0x7fffffffu);
    }
    float mag = __fmul_rn((float)abs(m), pow2f(q));  // exact
    return (c >> 7) ? -mag : mag;  // the sign from the code: -0 stays -0
}

// MX dequantised element: code * 2^(scale-127) as f32 (exact but for overflow); 0xFF scale -> NaN
__device__ __forceinline__ float mx_value(u8 c, u8 scale, bool e5m2) {
    if (scale == 0xFF) return __uint_as_float(0x7fffffffu);
    float v = elem_value(c, e5m2);
    int x = (int)scale - 127;
    // split the scale so each factor is a normal power of two: exact, one rounding at most
    int x1 = x / 2, x2 = x - x1;
    return __fmul_rn(__fmul_rn(v, pow2f(x1)), pow2f(x2));
}

// RN_f32(a + b) of two doubles with a single rounding (a, b exact values).
__device__ float rn_add_exact(double a, double b) {
    double s = a + b;
    double bb = s - a;
    double err = (a - (s - bb)) + (b - bb);
    if (err == 0.0) return __double2float_rn(s);
    bool neg = s < 0.0;
    double as = fabs(s), ae = neg ? -err : err;
    float d = __double2float_rd(as), u = __double2float_ru(as);
    double uu = isinf(u) ? 340282366920938463463374607431768211456.0 : (double)u;  // 2^128
    float r;
    if (d != u && as - (double)d == uu - as) r = ae > 0.0 ? u : d;  // s on an f32 midpoint
    else r = __double2float_rn(as);
    return neg ? -r : r;
}

// ---- one term step for scalar families ------------------------------------
struct Operands {
    const void* a; const void* b;     // A [M][K], Bt [N][K] (f32, or codes)
    const u8* sa; const u8* sb;       // scales A [M][K/32], B [N][K/32]
    int M, N, K;
};

__device__ __forceinline__ float scalar_step(float acc, const Operands& op, int i, int j, int t) {
#if TERM == 0
    float a = ((const float*)op.a)[(i64)i * op.K + t], b = ((const float*)op.b)[(i64)j * op.K + t];
#elif TERM == 1
    int kb = op.K / 32;
    float a = mx_value(((const u8*)op.a)[(i64)i * op.K + t], op.sa[(i64)i * kb + t / 32], IN_E5M2);
    float b = mx_value(((const u8*)op.b)[(i64)j * op.K + t], op.sb[(i64)j * kb + t / 32], IN_E5M2);
#endif
#if TERM == 0 || TERM == 1
#if SCALAR_FMA
    return __fmaf_rn(a, b, acc);
#else
    return __fadd_rn(acc, __fmul_rn(a, b));
#endif
#elif TERM == 2
    // exact block dot of 32 e4m3 products, as an integer multiple of 2^-18
    int kb = op.K / 32;
    u8 xa = op.sa[(i64)i * kb + t], xb = op.sb[(i64)j * kb + t];
    const u8* ar = (const u8*)op.a + (i64)i * op.K + 32 * t;
    const u8* br = (const u8*)op.b + (i64)j * op.K + 32 * t;
    bool nan = (xa == 0xFF) || (xb == 0xFF);
    i64 sum = 0;
    for (int p = 0; p < 32; ++p) {
        int ma, qa, mb, qb;
        bool oka = elem_parts(ar[p], &ma, &qa, false), okb = elem_parts(br[p], &mb, &qb, false);
        if (!oka || !okb) { nan = true; continue; }
        sum += (i64)(ma * mb) << (qa + qb + 18);
    }
    if (nan) return __uint_as_float(0x7fffffffu);
    double term = ldexp((double)sum, (int)xa + (int)xb - 254 - 18);  // exact
#if SCALAR_FMA
    if (isnan(acc) || isinf(acc)) return acc;  // the term is finite: RN(Inf + t) = Inf
    return rn_add_exact((double)acc, term);
#else
    // RN(term) may overflow to +-Inf: Inf + (-Inf) must give NaN
    return __fadd_rn(acc, __double2float_rn(term));
#endif
#else
    return acc;  // TERM 3 (tensor-core operands) never takes the scalar path
#endif
}

__device__ __forceinline__ float convert_out(float x) {
#if OUT == 1
    return __bfloat162float(__float2bfloat16_rn(x));
#elif OUT == 2
    return __half2float(__float2half_rn(x));
#else
    return x;
#endif
}

// ---- scalar parts kernel: one thread per (group, i, j) ---------------------
extern "C" __global__ void parts_scalar(const void* a, const void* b, const u8* sa, const u8* sb,
                                        float* ws, int M, int N, int K, int nt, int G) {
    Operands op = {a, b, sa, sb, M, N, K};
    i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    i64 total = (i64)G * M * N;
    if (idx >= total) return;
    int j = (int)(idx % N), i = (int)((idx / N) % M), g = (int)(idx / ((i64)M * N));
    int len = group_len(g, nt);
    float value = 0.0f;
    bool first = true;
    int seg = FRESH_SEG ? TILE : (len > 0 ? len : 1);
    for (int s0 = 0; s0 < len; s0 += seg) {
        int s1 = min(len, s0 + seg);
        float acc = 0.0f;
        for (int pos = s0; pos < s1; ++pos) acc = scalar_step(acc, op, i, j, term_of(g, pos, nt));
        if (first) { value = acc; first = false; } else value = __fadd_rn(value, acc);
    }
    ws[idx] = value;
}

// ---- lanes kernel: one warp per output, butterfly over LANES lanes ---------
extern "C" __global__ void lanes_scalar(const void* a, const void* b, const u8* sa, const u8* sb,
                                        float* out, int M, int N, int K, int nt) {
    Operands op = {a, b, sa, sb, M, N, K};
    i64 o = blockIdx.x;
    if (o >= (i64)M * N) return;
    int j = (int)(o % N), i = (int)(o / N);
    int lane = threadIdx.x, g = lane % LANES;
    int len = group_len(g, nt);
    float acc = 0.0f;
    for (int pos = 0; pos < len; ++pos) acc = scalar_step(acc, op, i, j, term_of(g, pos, nt));
    for (int off = LANES / 2; off >= 1; off /= 2) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, off));
    if (lane == 0) out[o] = convert_out(acc);
}

// ---- reduction of group results and output conversion ----------------------
extern "C" __global__ void reduce_groups(float* ws, float* out, int M, int N, int G) {
    i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    i64 mn = (i64)M * N;
    if (o >= mn) return;
#if PAIRWISE
    for (int s = 1; s < G; s *= 2)
        for (int p = 0; p + s < G; p += 2 * s) ws[p * mn + o] = __fadd_rn(ws[p * mn + o], ws[(p + s) * mn + o]);
    float acc = ws[o];
#else
    float acc = ws[o];
    for (int p = 1; p < G; ++p) acc = __fadd_rn(acc, ws[p * mn + o]);
#endif
    out[o] = convert_out(acc);
}

#if INSTR != 0
// ---- tensor-core parts kernel ---------------------------------------------
// Operands are the instruction's input type: 16-bit bits (bf16/f16) or 8-bit
// codes, A [M][K], Bt [N][K]. Out-of-range rows/columns and padded
// positions read zero.
#if INSTR == 1 || INSTR == 3
#define KC 16
typedef u16 elem_t;
#else
#define KC 32
typedef u8 elem_t;
#endif

__device__ __forceinline__ u32 ld_elem(const elem_t* m, int row, int rows, int K, int g, int kpos, int kend, int nt) {
    if (row >= rows || kpos >= kend) return 0u;
    int t = term_of(g, kpos, nt);
    return (u32)m[(i64)row * K + t];
}

// A fragment for rows r0 + {gid, gid+8} of a 16-row slice (mma.m16n8k16 / m16n8k32 layout)
__device__ __forceinline__ void load_a(u32 a[4], const elem_t* A, int r0, int M, int K, int g, int c0, int cend, int nt) {
    int lane = threadIdx.x & 31, gid = lane >> 2, tid = lane & 3;
#if KC == 16
    int ks[4] = {2 * tid, 2 * tid, 2 * tid + 8, 2 * tid + 8};
    int rs[4] = {gid, gid + 8, gid, gid + 8};
    for (int r = 0; r < 4; ++r) {
        u32 lo = ld_elem(A, r0 + rs[r], M, K, g, c0 + ks[r], cend, nt);
        u32 hi = ld_elem(A, r0 + rs[r], M, K, g, c0 + ks[r] + 1, cend, nt);
        a[r] = lo | (hi << 16);
    }
#else
    int ks[4] = {4 * tid, 4 * tid, 4 * tid + 16, 4 * tid + 16};
    int rs[4] = {gid, gid + 8, gid, gid + 8};
    for (int r = 0; r < 4; ++r) {
        u32 v = 0;
        for (int q = 0; q < 4; ++q) v |= ld_elem(A, r0 + rs[r], M, K, g, c0 + ks[r] + q, cend, nt) << (8 * q);
        a[r] = v;
    }
#endif
}

#if INSTR == 1 || INSTR == 2
__device__ __forceinline__ void load_b(u32 b[2], const elem_t* Bt, int n0, int N, int K, int g, int c0, int cend, int nt) {
    int lane = threadIdx.x & 31, gid = lane >> 2, tid = lane & 3;
#if KC == 16
    int ks[2] = {2 * tid, 2 * tid + 8};
    for (int r = 0; r < 2; ++r) {
        u32 lo = ld_elem(Bt, n0 + gid, N, K, g, c0 + ks[r], cend, nt);
        u32 hi = ld_elem(Bt, n0 + gid, N, K, g, c0 + ks[r] + 1, cend, nt);
        b[r] = lo | (hi << 16);
    }
#else
    int ks[2] = {4 * tid, 4 * tid + 16};
    for (int r = 0; r < 2; ++r) {
        u32 v = 0;
        for (int q = 0; q < 4; ++q) v |= ld_elem(Bt, n0 + gid, N, K, g, c0 + ks[r] + q, cend, nt) << (8 * q);
        b[r] = v;
    }
#endif
}

__device__ __forceinline__ void tc_step(float d[4], const u32 a[4], const u32 b[2]) {
#if INSTR == 1 && IN_F16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif INSTR == 1
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif IN_E5M2
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
#define ROWS_PER_CTA 16
#else
// wgmma: B chunk (8 columns x KC) in shared memory as no-swizzle K-major core
// matrices of 8 rows x 16 bytes; core matrix j (k bytes 16j..16j+15) at byte
// 128*j. Both descriptor offsets are 128 bytes (one core matrix along N).
__device__ __forceinline__ unsigned long long smem_desc(const void* p) {
    u32 addr = (u32)__cvta_generic_to_shared(p);
    unsigned long long d = 0;
    d |= (unsigned long long)((addr >> 4) & 0x3FFF);
    d |= (unsigned long long)((128 >> 4) & 0x3FFF) << 16;
    d |= (unsigned long long)((128 >> 4) & 0x3FFF) << 32;
    return d;
}

__device__ __forceinline__ void fill_b(u8* sb, const elem_t* Bt, int n0, int N, int K, int g, int c0, int cend, int nt) {
    // 8 columns x KC elements; element (n, kk) at byte 128*(kk*sizeof/16) + 16*n + (kk*sizeof)%16
    for (int e = threadIdx.x; e < 8 * KC; e += blockDim.x) {
        int n = e / KC, kk = e % KC;
        u32 v = ld_elem(Bt, n0 + n, N, K, g, c0 + kk, cend, nt);
        int byte = kk * (int)sizeof(elem_t);
        int off = 128 * (byte / 16) + 16 * n + (byte % 16);
        if (sizeof(elem_t) == 2) *(u16*)(sb + off) = (u16)v; else sb[off] = (u8)v;
    }
}

__device__ __forceinline__ void tc_step_wg(float d[4], const u32 a[4], const u8* sb) {
    unsigned long long desc = smem_desc(sb);
    int one = 1;  // scale-d: accumulate into D (preloaded with C)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#if INSTR == 3 && IN_F16
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(one) : "memory");
#elif INSTR == 3
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(one) : "memory");
#elif IN_E5M2
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(one) : "memory");
#else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(one) : "memory");
#endif
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();
}
#define ROWS_PER_CTA 64
#endif

// Scale product of the 32-block that starts at term t (MX promote): RN(2^(Xa+Xb)).
__device__ __forceinline__ float promote_scale(const u8* sa, const u8* sb, int row, int col, int M, int N, int K, int t) {
#if TERM == 3
    if (row >= M || col >= N) return 1.0f;
    int kb = K / 32;
    u8 xa = sa[(i64)row * kb + t / 32], xb = sb[(i64)col * kb + t / 32];
    if (xa == 0xFF || xb == 0xFF) return __uint_as_float(0x7fffffffu);
    return __double2float_rn(ldexp(1.0, (int)xa + (int)xb - 254));
#else
    return 1.0f;
#endif
}

// grid: (ceil(N/8), ceil(M/ROWS_PER_CTA), G); block: 32 (mma.sync) or 128 (wgmma)
extern "C" __global__ void parts_tc(const elem_t* A, const elem_t* Bt, const u8* sa, const u8* sb,
                                    float* ws, int M, int N, int K, int nt, int G) {
#if INSTR == 3 || INSTR == 4
    __shared__ __align__(128) u8 sbuf[8 * KC * sizeof(elem_t)];
#endif
    int g = blockIdx.z;
    int n0 = blockIdx.x * 8;
    int warp = threadIdx.x >> 5;
    int r0 = blockIdx.y * ROWS_PER_CTA + 16 * warp;
    int lane = threadIdx.x & 31, gid = lane >> 2, tid = lane & 3;
    int len = group_len(g, nt);
    float value[4] = {0.f, 0.f, 0.f, 0.f};
    bool first = true;
    int seg = FRESH_SEG ? TILE : (len > 0 ? len : 1);
    for (int s0 = 0; s0 < len; s0 += seg) {
        int s1 = min(len, s0 + seg);
        float fin[4] = {0.f, 0.f, 0.f, 0.f};
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        int blk = PROMOTE > 0 ? PROMOTE : (s1 - s0);
        for (int b0 = s0; b0 < s1; b0 += blk) {
            int b1 = min(s1, b0 + blk);
            if (PROMOTE > 0) { acc[0] = acc[1] = acc[2] = acc[3] = 0.f; }
            for (int c0 = b0; c0 < b1; c0 += KC) {
                u32 a[4];
                load_a(a, A, r0, M, K, g, c0, b1, nt);
#if INSTR == 1 || INSTR == 2
                u32 b[2];
                load_b(b, Bt, n0, N, K, g, c0, b1, nt);
                // (INSTR 2: ptxas makes the step RN(C + fused(products)), c=late)
                tc_step(acc, a, b);
#else
                fill_b(sbuf, Bt, n0, N, K, g, c0, b1, nt);
                tc_step_wg(acc, a, sbuf);
#endif
            }
            if (PROMOTE > 0) {
                int t0 = term_of(g, b0, nt);
                int rows[4] = {r0 + gid, r0 + gid, r0 + gid + 8, r0 + gid + 8};
                int cols[4] = {n0 + 2 * tid, n0 + 2 * tid + 1, n0 + 2 * tid, n0 + 2 * tid + 1};
                for (int r = 0; r < 4; ++r) fin[r] = __fmaf_rn(promote_scale(sa, sb, rows[r], cols[r], M, N, K, t0), acc[r], fin[r]);
            }
        }
        float* part = PROMOTE > 0 ? fin : acc;
        for (int r = 0; r < 4; ++r) {
            if (first) value[r] = part[r]; else value[r] = __fadd_rn(value[r], part[r]);
        }
        first = false;
    }
    int rows[4] = {r0 + gid, r0 + gid, r0 + gid + 8, r0 + gid + 8};
    int cols[4] = {n0 + 2 * tid, n0 + 2 * tid + 1, n0 + 2 * tid, n0 + 2 * tid + 1};
    for (int r = 0; r < 4; ++r)
        if (rows[r] < M && cols[r] < N) ws[((i64)g * M + rows[r]) * N + cols[r]] = value[r];
}
#endif
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(s: &str) -> Result<GpuPlan, String> {
        GpuPlan::new(&s.parse::<Order>().unwrap(), None, Backend16::MmaSync)
    }

    #[test]
    fn lowers_expressible_orders() {
        assert_eq!(plan("fma").unwrap().mode, GroupMode::Contiguous);
        assert_eq!(
            plan("fma;ktile=16;tile=fresh;reduce=pairwise").unwrap().mode,
            GroupMode::Tiles
        );
        assert!(plan("muladd;split=4/interleave;ktile=8").unwrap().mode == GroupMode::Interleave);
        assert_eq!(plan("fma;lanes=8").unwrap().mode, GroupMode::Lanes);
        assert_eq!(plan("hopper-bf16").unwrap().instr, Some(TcInstr::MmaSync16));
        assert_eq!(plan("hopper-fp8-mma-sync").unwrap().instr, Some(TcInstr::MmaSyncFp8));
        assert_eq!(plan("hopper-fp8-wgmma").unwrap().instr, Some(TcInstr::WgmmaFp8));
        assert_eq!(plan("deepgemm-fp8").unwrap().promote, 128);
    }

    #[test]
    fn refuses_what_sm90_cannot_do() {
        assert!(plan("ampere-bf16").unwrap_err().contains("no sm_90 instruction"));
        assert!(plan("ada-fp8").is_err());
        assert!(plan("fma;lanes=64").is_err());
        assert!(plan("fma;ktile=64;split=16/interleave;reduce=butterfly")
            .unwrap_err()
            .contains("only built for lanes"));
        assert!(plan("fma;lanes=16;ktile=512;tile=fresh")
            .unwrap_err()
            .contains("fresh k-tiles"));
        let o: Order = "blackwell-mxf8f6f4".parse().unwrap();
        assert!(GpuPlan::new(&o, Some(false), Backend16::MmaSync).is_err());
        let o: Order = "fma;scale=block".parse().unwrap();
        assert!(GpuPlan::new(&o, Some(true), Backend16::MmaSync).is_err());
        assert!(GpuPlan::new(&o, Some(false), Backend16::MmaSync).is_ok());
    }

    #[test]
    fn source_carries_the_order() {
        let s = plan("fma;split=3;reduce=pairwise;out=bf16").unwrap().source();
        assert!(s.contains("#define SPLIT 3"));
        assert!(s.contains("#define ALIGN 1"));
        assert!(s.contains("#define PAIRWISE 1"));
        assert!(s.contains("#define OUT 1"));
        assert!(s.contains("__fmaf_rn"));
        assert!(!s.contains("fast"));
        let s = plan("fma;split=3;align=128").unwrap().source();
        assert!(s.contains("#define ALIGN 128"));
    }
}
