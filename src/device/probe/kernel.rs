//! The probed instructions as CUDA kernels (source text, always compiled)
//! and their launch on a GPU (feature `cuda`).

use super::*;

const CUDA_COMMON: &str = r#"
typedef unsigned char u8;
typedef unsigned int u32;
// four bytes at p (p 4-byte aligned): two 16-bit codes or four 8-bit codes,
// the lower k in the lower bits
#define LDW(p) (*(const u32*)(p))
"#;

/// The CUDA source of one probe's kernel. Operand bytes: A `[tile][row][32]`,
/// B `[tile][n][32]` (each column of B contiguous along k), C and D
/// `[tile][row][8]` f32. With 16-bit types a 32-bit fragment register holds
/// k = 2j, 2j+1; with 8-bit types k = 4j..4j+3; both are the 4 bytes at
/// byte offset 4j of the row, so one indexing serves both.
///
/// `mma.sync` (PTX ISA "Matrix fragments for mma.m16n8k16 / m16n8k32"):
/// g = lane >> 2, t = lane & 3; a0 = row g bytes 4t.., a1 = row g+8 bytes
/// 4t.., a2 = row g bytes 4t+16.., a3 = row g+8 bytes 4t+16..; b0 = column g
/// bytes 4t.., b1 = column g bytes 4t+16..; c/d = (g, 2t), (g, 2t+1),
/// (g+8, 2t), (g+8, 2t+1). One warp per tile, tiles strided over warps.
///
/// `wgmma` m64n8: warp w of the warpgroup holds rows 16w + (the mma.sync A
/// layout) and D rows 16w + {g, g+8}, columns 2t, 2t+1. B goes to shared
/// memory K-major without swizzle: core matrix j (8 columns n x 16 bytes of
/// k) at byte 128 j, column n at 16 n inside it; descriptor start >> 4,
/// LBO = SBO = 128 (only one core matrix along N, so whichever offset the
/// hardware applies along K it is 128).
pub fn kernel_source(spec: &ProbeSpec) -> String {
    match spec.instr {
        Instr::MmaSync => format!(
            r#"{CUDA_COMMON}
extern "C" __global__ void __launch_bounds__(128) {kernel}(const u8* __restrict__ A, const u8* __restrict__ B,
        const float* __restrict__ C, float* __restrict__ D, int tiles) {{
    const int lane = threadIdx.x & 31;
    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int nwarps = (int)((gridDim.x * blockDim.x) >> 5);
    const int g = lane >> 2, t = lane & 3;
    for (int tile = warp; tile < tiles; tile += nwarps) {{
        const u8* a = A + (size_t)tile * 512;
        const u8* b = B + (size_t)tile * 256;
        const float* c = C + (size_t)tile * 128;
        float* d = D + (size_t)tile * 128;
        u32 a0 = LDW(a + g * 32 + 4 * t), a1 = LDW(a + (g + 8) * 32 + 4 * t);
        u32 a2 = LDW(a + g * 32 + 4 * t + 16), a3 = LDW(a + (g + 8) * 32 + 4 * t + 16);
        u32 b0 = LDW(b + g * 32 + 4 * t), b1 = LDW(b + g * 32 + 4 * t + 16);
        float d0 = c[g * 8 + 2 * t], d1 = c[g * 8 + 2 * t + 1];
        float d2 = c[(g + 8) * 8 + 2 * t], d3 = c[(g + 8) * 8 + 2 * t + 1];
        asm volatile("{ptx} {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        d[g * 8 + 2 * t] = d0;
        d[g * 8 + 2 * t + 1] = d1;
        d[(g + 8) * 8 + 2 * t] = d2;
        d[(g + 8) * 8 + 2 * t + 1] = d3;
    }}
}}
"#,
            kernel = spec.kernel,
            ptx = spec.ptx
        ),
        Instr::Wgmma => {
            // bf16 has the transpose immediate for B (0: K-major); fp8 has none
            let tail = if spec.elem_bytes() == 2 { ", 1, 1, 0" } else { ", 1, 1" };
            format!(
                r#"{CUDA_COMMON}
static __device__ __forceinline__ u32 smem_u32(const void* p) {{
    u32 r;
    asm volatile("{{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }}" : "=r"(r) : "l"(p));
    return r;
}}
extern "C" __global__ void __launch_bounds__(128) {kernel}(const u8* __restrict__ A, const u8* __restrict__ B,
        const float* __restrict__ C, float* __restrict__ D, int tiles) {{
    __shared__ __align__(128) u8 sB[256];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    const int r0 = warp * 16 + g, r1 = r0 + 8;
    const u32 base = smem_u32(sB);
    const unsigned long long desc = (unsigned long long)((base & 0x3FFFF) >> 4)
        | ((unsigned long long)(128 >> 4) << 16) | ((unsigned long long)(128 >> 4) << 32);
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {{
        const u8* a = A + (size_t)tile * 2048;
        const u8* b = B + (size_t)tile * 256;
        const float* c = C + (size_t)tile * 512;
        float* d = D + (size_t)tile * 512;
        if (tid < 64) {{
            const int n = tid >> 3, rb = (tid & 7) * 4;
            *(u32*)(sB + (rb >> 4) * 128 + n * 16 + (rb & 15)) = LDW(b + n * 32 + rb);
        }}
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        u32 a0 = LDW(a + r0 * 32 + 4 * t), a1 = LDW(a + r1 * 32 + 4 * t);
        u32 a2 = LDW(a + r0 * 32 + 4 * t + 16), a3 = LDW(a + r1 * 32 + 4 * t + 16);
        float d0 = c[r0 * 8 + 2 * t], d1 = c[r0 * 8 + 2 * t + 1];
        float d2 = c[r1 * 8 + 2 * t], d3 = c[r1 * 8 + 2 * t + 1];
        asm volatile("" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) :: "memory");
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        asm volatile("{{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
            "{ptx} {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, %8, p{tail};\n}}\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1) : "memory");
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        asm volatile("" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) :: "memory");
        d[r0 * 8 + 2 * t] = d0;
        d[r0 * 8 + 2 * t + 1] = d1;
        d[r1 * 8 + 2 * t] = d2;
        d[r1 * 8 + 2 * t + 1] = d3;
        __syncthreads();
    }}
}}
"#,
                kernel = spec.kernel,
                ptx = spec.ptx,
                tail = tail
            )
        }
    }
}

#[cfg(feature = "cuda")]
mod gpu_run {
    use super::*;
    use crate::device::gpu::{driver_err, Arch, Gpu};
    use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

    /// Sentinel written to D before a launch, so an output the kernel never
    /// stores shows up (-6.3e18, finite).
    const SENTINEL: u32 = 0xDEAD_BEEF;

    fn launch(gpu: &Gpu, f: &CudaFunction, cases: &Cases) -> Result<Vec<f32>> {
        let s = &gpu.stream;
        let a = s.clone_htod(&cases.a_bytes()).map_err(driver_err("upload A"))?;
        let b = s.clone_htod(&cases.b_bytes()).map_err(driver_err("upload B"))?;
        let c = s.clone_htod(&cases.c).map_err(driver_err("upload C"))?;
        let mut d = s
            .clone_htod(&vec![f32::from_bits(SENTINEL); cases.len()])
            .map_err(driver_err("allocate D"))?;
        let tiles = i32::try_from(cases.tiles).map_err(|_| DeviceError::Refused("too many tiles".into()))?;
        let blocks = match cases.spec.instr {
            Instr::MmaSync => cases.tiles.div_ceil(4).min(4096),
            Instr::Wgmma => cases.tiles.min(2048),
        } as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks.max(1), 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut lb = s.launch_builder(f);
        lb.arg(&a).arg(&b).arg(&c).arg(&mut d).arg(&tiles);
        // SAFETY: the kernel reads tiles*512|2048 bytes of A, tiles*256 of
        // B, tiles*rows*8 floats of C and writes as many of D: the sizes
        // uploaded above.
        unsafe { lb.launch(cfg) }.map_err(driver_err("launch"))?;
        let out = s.clone_dtoh(&d).map_err(driver_err("download D"))?;
        gpu.sync()?;
        Ok(out)
    }

    /// Runs the selected probes: compile, layout self-check, then the random
    /// cases (generated and modelled on the CPU with rayon).
    pub fn run(gpu: &Gpu, opts: &RunOptions) -> Result<ProbeReport> {
        let mut report = ProbeReport::default();
        for spec in select(&opts.only)? {
            let arch = match spec.instr {
                Instr::MmaSync => Arch::Sm90,
                Instr::Wgmma => Arch::Sm90a,
            };
            let f = match gpu
                .compile(spec.kernel, &kernel_source(spec), arch)
                .and_then(|m| gpu.function(&m, spec.kernel))
            {
                Ok(f) => f,
                Err(e) => {
                    report.failures.push((spec.name.into(), format!("compile/load: {e}")));
                    continue;
                }
            };
            let check = Cases::layout_check(spec);
            let got = match launch(gpu, &f, &check) {
                Ok(g) => g,
                Err(e) => {
                    report
                        .failures
                        .push((spec.name.into(), format!("layout check launch: {e}")));
                    continue;
                }
            };
            if let Some(dump) = layout_report(&check, &got, &check.model()) {
                report
                    .failures
                    .push((spec.name.into(), format!("layout check failed\n{dump}")));
                continue;
            }
            let cases = Cases::generate(spec, opts.seed, opts.cases)?;
            let got = match launch(gpu, &f, &cases) {
                Ok(g) => g,
                Err(e) => {
                    report.failures.push((spec.name.into(), format!("launch: {e}")));
                    continue;
                }
            };
            report.results.push(compare(&cases, &got)?);
        }
        Ok(report)
    }
}

#[cfg(feature = "cuda")]
pub use gpu_run::run;
