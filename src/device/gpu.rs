//! A thin handle on one GPU: context, stream, NVRTC compilation with the
//! flags that keep arithmetic IEEE (no contraction, no flush to zero), and
//! the version report. Libraries are loaded at run time (cudarc
//! `dynamic-loading`); a missing library is an error, not a panic.

use super::{DeviceError, Result};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions, Ptx};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Where the CUDA headers are looked for (cuda_fp8.h and friends);
/// `CUDA_HOME`/`CUDA_PATH` first.
fn include_dirs() -> Vec<String> {
    let mut dirs = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(v) = std::env::var(var) {
            dirs.push(format!("{v}/include"));
        }
    }
    dirs.push("/usr/local/cuda/include".into());
    dirs.retain(|d| std::path::Path::new(d).is_dir());
    dirs
}

/// Code target for NVRTC: PTX for this virtual architecture, JIT-compiled
/// by the driver (`compute_90a` enables wgmma).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Sm90,
    Sm90a,
}

impl Arch {
    fn nvrtc(self) -> &'static str {
        match self {
            Arch::Sm90 => "compute_90",
            Arch::Sm90a => "compute_90a",
        }
    }
}

/// Versions and identity of the GPU and its software, recorded in every
/// capture manifest.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeviceInfo {
    pub name: String,
    pub compute_capability: (i32, i32),
    pub multiprocessors: i32,
    pub memory_bytes: usize,
    /// `cuDriverGetVersion`, e.g. 13000.
    pub driver_cuda_version: i32,
    pub nvrtc_version: (i32, i32),
    /// `cublasGetVersion`, e.g. 130000.
    pub cublas_version: i32,
    /// `cublasLtGetVersion`.
    pub cublaslt_version: usize,
    /// The kernel driver's version string, when /proc exposes it.
    pub kernel_driver: Option<String>,
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |x: i32| format!("{}.{}", x / 1000, (x % 1000) / 10);
        writeln!(f, "gpu                {}", self.name)?;
        writeln!(
            f,
            "compute capability {}.{}",
            self.compute_capability.0, self.compute_capability.1
        )?;
        writeln!(f, "multiprocessors    {}", self.multiprocessors)?;
        writeln!(
            f,
            "memory             {:.1} GiB",
            self.memory_bytes as f64 / (1u64 << 30) as f64
        )?;
        writeln!(
            f,
            "driver             {} (CUDA {})",
            self.kernel_driver.as_deref().unwrap_or("?"),
            v(self.driver_cuda_version)
        )?;
        writeln!(
            f,
            "nvrtc              {}.{}",
            self.nvrtc_version.0, self.nvrtc_version.1
        )?;
        writeln!(f, "cublas             {}", self.cublas_version)?;
        write!(f, "cublasLt           {}", self.cublaslt_version)
    }
}

/// One GPU with its default stream.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub ordinal: usize,
}

fn drv<E: std::fmt::Debug>(e: E) -> DeviceError {
    DeviceError::Driver(format!("{e:?}"))
}

/// Fails with a clear message unless the CUDA driver, NVRTC, cuBLAS and
/// cuBLASLt libraries can be loaded.
pub fn check_libraries() -> Result<()> {
    // SAFETY: each probe only tries to dlopen candidate library names.
    let present = unsafe {
        [
            ("libcuda (the NVIDIA driver)", cudarc::driver::sys::is_culib_present()),
            ("libnvrtc", cudarc::nvrtc::sys::is_culib_present()),
            ("libcublas", cudarc::cublas::sys::is_culib_present()),
            ("libcublasLt", cudarc::cublaslt::sys::is_culib_present()),
        ]
    };
    let missing: Vec<&str> = present.iter().filter(|p| !p.1).map(|p| p.0).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(DeviceError::Unavailable(format!(
            "no usable GPU: cannot load {} (set LD_LIBRARY_PATH, e.g. /usr/local/cuda/lib64)",
            missing.join(", ")
        )))
    }
}

impl Gpu {
    /// Opens GPU `ordinal`, after checking that the libraries load.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        check_libraries()?;
        let count = CudaContext::device_count().map_err(drv)?;
        if count <= 0 {
            return Err(DeviceError::Unavailable("the CUDA driver reports no GPU".into()));
        }
        if ordinal >= count as usize {
            return Err(DeviceError::Unavailable(format!(
                "GPU {ordinal} requested, the driver reports {count}"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(drv)?;
        let stream = ctx.default_stream();
        Ok(Gpu { ctx, stream, ordinal })
    }

    pub fn info(&self) -> Result<DeviceInfo> {
        use cudarc::driver::sys::CUdevice_attribute as A;
        let mut driver = 0i32;
        let (mut maj, mut min) = (0i32, 0i32);
        // SAFETY: plain out-parameter queries on loaded libraries.
        unsafe {
            cudarc::driver::sys::cuDriverGetVersion(&mut driver);
            cudarc::nvrtc::sys::nvrtcVersion(&mut maj, &mut min);
        }
        let blas = cudarc::cublas::CudaBlas::new(self.stream.clone()).map_err(|e| DeviceError::Library {
            library: "cuBLAS",
            what: format!("{e:?}"),
        })?;
        let mut cublas_version = 0i32;
        // SAFETY: the handle is alive for the call.
        unsafe {
            cudarc::cublas::sys::cublasGetVersion_v2(*blas.handle(), &mut cublas_version);
        }
        // SAFETY: no arguments.
        let cublaslt_version = unsafe { cudarc::cublaslt::sys::cublasLtGetVersion() };
        let kernel_driver = std::fs::read_to_string("/proc/driver/nvidia/version")
            .ok()
            .and_then(|s| {
                s.lines()
                    .next()
                    .and_then(|l| {
                        l.split_whitespace().find(|w| {
                            w.chars().filter(|c| *c == '.').count() >= 1
                                && w.chars().all(|c| c.is_ascii_digit() || c == '.')
                        })
                    })
                    .map(str::to_string)
            });
        Ok(DeviceInfo {
            name: self.ctx.name().map_err(drv)?,
            compute_capability: self.ctx.compute_capability().map_err(drv)?,
            multiprocessors: self
                .ctx
                .attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(drv)?,
            memory_bytes: self.ctx.total_mem().map_err(drv)?,
            driver_cuda_version: driver,
            nvrtc_version: (maj, min),
            cublas_version,
            cublaslt_version,
            kernel_driver,
        })
    }

    /// Compiles CUDA C++ with NVRTC ([`compile_ptx`]) and loads it.
    pub fn compile(&self, name: &str, src: &str, arch: Arch) -> Result<Arc<CudaModule>> {
        let ptx = compile_ptx(name, src, arch)?;
        self.ctx.load_module(ptx).map_err(drv)
    }

    /// A kernel of a loaded module.
    pub fn function(&self, module: &Arc<CudaModule>, name: &str) -> Result<CudaFunction> {
        module
            .load_function(name)
            .map_err(|e| DeviceError::Driver(format!("kernel {name}: {e:?}")))
    }

    /// Waits for the stream; surfaces any asynchronous kernel fault.
    pub fn sync(&self) -> Result<()> {
        self.stream.synchronize().map_err(drv)
    }
}

/// NVRTC compilation to PTX with the flags that keep arithmetic IEEE:
/// `--fmad=false --ftz=false --prec-div=true --prec-sqrt=true`, never
/// fast-math; CUDA headers from `include_dirs`.
pub fn compile_ptx(name: &str, src: &str, arch: Arch) -> Result<Ptx> {
    let opts = CompileOptions {
        ftz: Some(false),
        prec_sqrt: Some(true),
        prec_div: Some(true),
        fmad: Some(false),
        use_fast_math: None,
        include_paths: include_dirs(),
        arch: Some(arch.nvrtc()),
        name: Some(format!("{name}.cu")),
        options: vec!["--std=c++17".into()],
        maxrregcount: None,
    };
    compile_ptx_with_opts(src, opts).map_err(|e| DeviceError::Compile {
        name: name.to_string(),
        log: match e {
            CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
            other => format!("{other:?}"),
        },
    })
}

/// Maps any cudarc error into a driver error with context.
pub fn driver_err<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> DeviceError + '_ {
    move |e| DeviceError::Driver(format!("{what}: {e:?}"))
}
