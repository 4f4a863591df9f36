//! Conversions as CUDA kernels: the source text and the `cvt` opcodes of
//! its PTX (always compiled), and the sweep on a GPU (feature `cuda`).

use super::*;

impl Conversion {
    /// The CUDA C++ source of this conversion's kernel: thread `t` writes
    /// the code of the f32 whose bits are `base + t`, for `t < n`.
    pub fn kernel_source(&self) -> String {
        let code_t = if self.code_bytes() == 2 {
            "unsigned short"
        } else {
            "unsigned char"
        };
        let includes: String = self.headers.iter().map(|h| format!("#include <{h}>\n")).collect();
        format!(
            "// mxbi device casts: {name}\n{includes}\
extern \"C\" __global__ void {KERNEL_NAME}(unsigned int base, unsigned int n, {code_t}* out) {{\n\
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;\n\
    if (t >= n) return;\n\
    unsigned int bits = base + t;\n\
    float x;\n\
    asm(\"mov.b32 %0, %1;\" : \"=f\"(x) : \"r\"(bits));\n\
    unsigned int code = 0u;\n\
    {{\n{body}\n    }}\n\
    out[t] = ({code_t})code;\n\
}}\n",
            name = self.name,
            body = self.body,
        )
    }
}

#[cfg(feature = "cuda")]
pub use gpu_sweep::run;

#[cfg(feature = "cuda")]
mod gpu_sweep {
    use super::*;
    use crate::device::gpu::{driver_err, Arch, Gpu};
    use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};
    use std::time::Instant;

    /// Chunks per kernel launch (2^28 inputs).
    const CHUNKS_PER_LAUNCH: usize = 16;
    const BLOCK: u32 = 256;

    /// Runs the selected conversions on `gpu` over the selected chunks,
    /// computing the CPU codes of the same inputs in parallel with the GPU
    /// and comparing them code by code. `on_result` sees each conversion's
    /// result as it finishes. A conversion whose kernel does not compile or
    /// load is reported as [`Status::CompileFailed`] with the log; one that
    /// hits a driver or CPU-model error is [`Status::Failed`]; the sweep goes
    /// on with the next conversion either way.
    pub fn run(
        gpu: &Gpu,
        opts: &SweepOptions,
        mut on_result: impl FnMut(&ConversionResult),
    ) -> Result<CastSweepReport> {
        let convs = select(&opts.only)?;
        let mut report = CastSweepReport {
            schema: 1,
            chunk_bits: CHUNK_BITS,
            selection: opts.selection.name(),
            conversions: Vec::new(),
        };
        for conv in convs {
            let t0 = Instant::now();
            let mut r = ConversionResult::new(conv);
            sweep_one(gpu, conv, &opts.selection, &mut r);
            r.seconds = t0.elapsed().as_secs_f64();
            on_result(&r);
            report.conversions.push(r);
        }
        Ok(report)
    }

    fn sweep_one(gpu: &Gpu, conv: &Conversion, sel: &ChunkSelection, r: &mut ConversionResult) {
        let src = conv.kernel_source();
        let kname = format!("mxbi_cast_{}", conv.name.replace('.', "_"));
        let func = match gpu
            .compile(&kname, &src, Arch::Sm90)
            .and_then(|m| gpu.function(&m, KERNEL_NAME))
        {
            Ok(f) => f,
            Err(e) => {
                r.status = Status::CompileFailed;
                r.error = Some(e.to_string());
                return;
            }
        };
        r.ptx_cvt = ptx_cvt_opcodes(&kname, &src);
        let res = match sel.chunks(conv) {
            Ok(chunks) => {
                if conv.code_bytes() == 2 {
                    sweep_typed::<u16>(gpu, conv, &func, &chunks, r)
                } else {
                    sweep_typed::<u8>(gpu, conv, &func, &chunks, r)
                }
            }
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            r.status = Status::Failed;
            r.error = Some(e.to_string());
        }
    }

    /// Consecutive runs of chunk indices, at most [`CHUNKS_PER_LAUNCH`] long.
    fn runs(chunks: &[u32]) -> Vec<Vec<u32>> {
        let mut out: Vec<Vec<u32>> = Vec::new();
        for &c in chunks {
            match out.last_mut() {
                Some(run) if run.len() < CHUNKS_PER_LAUNCH && run.last().is_some_and(|&l| l + 1 == c) => run.push(c),
                _ => out.push(vec![c]),
            }
        }
        out
    }

    fn sweep_typed<T: Code + DeviceRepr + ValidAsZeroBits>(
        gpu: &Gpu,
        conv: &Conversion,
        func: &cudarc::driver::CudaFunction,
        chunks: &[u32],
        r: &mut ConversionResult,
    ) -> Result<()> {
        let cap = CHUNKS_PER_LAUNCH * CHUNK_LEN;
        let mut d_out = gpu
            .stream
            .alloc_zeros::<T>(cap)
            .map_err(driver_err("device buffer for codes"))?;
        let mut host = vec![T::default(); cap];
        let mut cpu = vec![T::default(); cap];
        for run in runs(chunks) {
            let base: u32 = run[0] << CHUNK_BITS;
            let len = run.len() * CHUNK_LEN;
            let n = len as u32;
            let cfg = LaunchConfig {
                grid_dim: (n / BLOCK, 1, 1),
                block_dim: (BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut lb = gpu.stream.launch_builder(func);
            lb.arg(&base).arg(&n).arg(&mut d_out);
            // SAFETY: the kernel takes (unsigned int, unsigned int, T*) and
            // writes out[t] for t < n <= the buffer's length.
            unsafe { lb.launch(cfg) }.map_err(driver_err("kernel launch"))?;
            // The CPU codes are computed while the GPU runs.
            let cpu_res = T::cpu_codes(conv, base, &mut cpu[..len]);
            gpu.stream
                .memcpy_dtoh(&d_out.slice(0..len), &mut host[..len])
                .map_err(driver_err("copy codes to host"))?;
            gpu.sync()?;
            cpu_res?;
            let per_chunk: Vec<(u32, String, u64, Vec<MismatchRecord>)> = run
                .par_iter()
                .enumerate()
                .map(|(k, &chunk)| {
                    let g = &host[k * CHUNK_LEN..(k + 1) * CHUNK_LEN];
                    let c = &cpu[k * CHUNK_LEN..(k + 1) * CHUNK_LEN];
                    let (n, recs) = compare_chunk(chunk << CHUNK_BITS, g, c);
                    (chunk, T::digest(g), n, recs)
                })
                .collect();
            absorb_chunks(r, per_chunk);
        }
        Ok(())
    }

    /// The distinct `cvt` opcodes of the PTX NVRTC makes of `src` (compiled
    /// a second time, with the same flags, only to list them); empty if that
    /// compile fails.
    fn ptx_cvt_opcodes(name: &str, src: &str) -> Vec<String> {
        match crate::device::gpu::compile_ptx(name, src, crate::device::gpu::Arch::Sm90) {
            Ok(ptx) => cvt_opcodes(&ptx.to_src()),
            Err(_) => Vec::new(),
        }
    }
}

/// The distinct `cvt...` opcodes in PTX text, sorted.
pub fn cvt_opcodes(ptx: &str) -> Vec<String> {
    let mut v: Vec<String> = ptx
        .lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches('{').trim_start();
            let op = l.split_whitespace().next()?;
            op.starts_with("cvt.").then(|| op.to_string())
        })
        .collect();
    v.sort();
    v.dedup();
    v
}
