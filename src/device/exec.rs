//! Running generated GEMM kernels (`codegen`) on one GPU: kernel cache,
//! uploads, launches of the parts / reduce / lanes kernels, download.

use super::codegen::{GpuPlan, GroupMode, TcInstr};
use super::gpu::{driver_err, Arch, Gpu};
use super::{DeviceError, Result};
use cudarc::driver::{CudaModule, LaunchConfig, PushKernelArg};
use std::collections::HashMap;
use std::sync::Arc;

/// Bit pattern written into outputs before a run; one that survives means
/// the kernel left that output unwritten.
pub const POISON: u32 = 0x7FBA_DBAD;

/// Compiled modules by source text.
#[derive(Default)]
pub struct KernelCache {
    modules: HashMap<String, Arc<CudaModule>>,
}

impl KernelCache {
    pub fn module(&mut self, gpu: &Gpu, plan: &GpuPlan) -> Result<Arc<CudaModule>> {
        let src = plan.source();
        if let Some(m) = self.modules.get(&src) {
            return Ok(m.clone());
        }
        let arch = if plan.needs_sm90a() { Arch::Sm90a } else { Arch::Sm90 };
        let m = gpu.compile(&format!("order_{}", self.modules.len()), &src, arch)?;
        self.modules.insert(src, m.clone());
        Ok(m)
    }
}

/// Operand bytes as the kernels read them: A `[M][K]`, Bt `[N][K]` in the
/// plan's element type (f32 LE, 16-bit LE bits, or 8-bit codes) and, for
/// MX, E8M0 scales A `[M][K/32]`, B `[N][K/32]`.
pub struct GemmOperands {
    pub a: Vec<u8>,
    pub bt: Vec<u8>,
    pub sa: Vec<u8>,
    pub sb: Vec<u8>,
}

pub fn operand_bytes(plan: &GpuPlan, vals: &[f32], codes: &[u16]) -> Vec<u8> {
    match plan.elem_bytes() {
        4 => vals.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect(),
        2 => codes.iter().flat_map(|c| c.to_le_bytes()).collect(),
        _ => codes.iter().map(|&c| c as u8).collect(),
    }
}

/// Runs the kernels of `plan` on `operands`; returns the output `[M][N]`
/// (f32, widened from the order's output format) and the GPU time in ms
/// (CUDA events around the launches). Unwritten outputs keep `POISON`.
pub fn gemm_on_gpu(
    gpu: &Gpu,
    cache: &mut KernelCache,
    plan: &GpuPlan,
    m: usize,
    n: usize,
    k: usize,
    operands: &GemmOperands,
) -> Result<(Vec<f32>, f32)> {
    let module = cache.module(gpu, plan)?;
    let s = &gpu.stream;
    let expect = |what: &str, got: usize, want: usize| -> Result<()> {
        if got != want {
            return Err(DeviceError::Refused(format!("{what}: {got} bytes, expected {want}")));
        }
        Ok(())
    };
    expect("A", operands.a.len(), m * k * plan.elem_bytes())?;
    expect("B", operands.bt.len(), n * k * plan.elem_bytes())?;
    if plan.term != crate::device::codegen::TermKind::Values {
        expect("A scales", operands.sa.len(), m * (k / 32))?;
        expect("B scales", operands.sb.len(), n * (k / 32))?;
    }
    let nt = plan.terms(k);
    let g = plan.groups(nt);
    let nonempty = |v: Vec<u8>| if v.is_empty() { vec![0u8] } else { v };
    let da = s
        .clone_htod(&nonempty(operands.a.clone()))
        .map_err(driver_err("upload A"))?;
    let db = s
        .clone_htod(&nonempty(operands.bt.clone()))
        .map_err(driver_err("upload B"))?;
    let dsa = s
        .clone_htod(&nonempty(operands.sa.clone()))
        .map_err(driver_err("upload scales A"))?;
    let dsb = s
        .clone_htod(&nonempty(operands.sb.clone()))
        .map_err(driver_err("upload scales B"))?;
    let mut dout = s
        .clone_htod(&vec![f32::from_bits(POISON); m * n])
        .map_err(driver_err("alloc out"))?;
    let (mi, ni, ki, nti, gi) = (m as i32, n as i32, k as i32, nt as i32, g as i32);
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let start = s.record_event(timing).map_err(driver_err("event"))?;
    if plan.mode == GroupMode::Lanes {
        let f = gpu.function(&module, "lanes_scalar")?;
        let mut lb = s.launch_builder(&f);
        lb.arg(&da)
            .arg(&db)
            .arg(&dsa)
            .arg(&dsb)
            .arg(&mut dout)
            .arg(&mi)
            .arg(&ni)
            .arg(&ki)
            .arg(&nti);
        let cfg = LaunchConfig {
            grid_dim: ((m * n) as u32, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: argument list matches `lanes_scalar`; buffers are sized M*K, N*K, M*K/32, N*K/32, M*N.
        unsafe { lb.launch(cfg) }.map_err(driver_err("launch lanes_scalar"))?;
    } else {
        let mut dws = s
            .clone_htod(&vec![f32::from_bits(POISON); g * m * n])
            .map_err(driver_err("alloc workspace"))?;
        // both parts kernels take the same arguments; they differ in shape
        let (name, cfg) = match plan.instr {
            None => (
                "parts_scalar",
                LaunchConfig {
                    grid_dim: (((g * m * n) as u32).div_ceil(128), 1, 1),
                    block_dim: (128, 1, 1),
                    shared_mem_bytes: 0,
                },
            ),
            Some(instr) => {
                let (threads, rows) = match instr {
                    TcInstr::MmaSync16 | TcInstr::MmaSyncFp8 => (32u32, 16usize),
                    TcInstr::Wgmma16 | TcInstr::WgmmaFp8 => (128u32, 64usize),
                };
                (
                    "parts_tc",
                    LaunchConfig {
                        grid_dim: (n.div_ceil(8) as u32, m.div_ceil(rows) as u32, g as u32),
                        block_dim: (threads, 1, 1),
                        shared_mem_bytes: 0,
                    },
                )
            }
        };
        let f = gpu.function(&module, name)?;
        let mut lb = s.launch_builder(&f);
        lb.arg(&da)
            .arg(&db)
            .arg(&dsa)
            .arg(&dsb)
            .arg(&mut dws)
            .arg(&mi)
            .arg(&ni)
            .arg(&ki)
            .arg(&nti)
            .arg(&gi);
        // SAFETY: the argument list matches both parts kernels; the workspace
        // holds G*M*N floats; out-of-range rows/columns are masked in the kernel.
        unsafe { lb.launch(cfg) }.map_err(driver_err(name))?;
        let f = gpu.function(&module, "reduce_groups")?;
        let cfg = LaunchConfig {
            grid_dim: ((m * n).div_ceil(128) as u32, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut lb = s.launch_builder(&f);
        lb.arg(&mut dws).arg(&mut dout).arg(&mi).arg(&ni).arg(&gi);
        // SAFETY: argument list matches `reduce_groups`.
        unsafe { lb.launch(cfg) }.map_err(driver_err("launch reduce_groups"))?;
    }
    let stop = s.record_event(timing).map_err(driver_err("event"))?;
    gpu.sync()?;
    let ms = start.elapsed_ms(&stop).map_err(driver_err("event time"))?;
    let out = s.clone_dtoh(&dout).map_err(driver_err("download"))?;
    Ok((out, ms))
}
