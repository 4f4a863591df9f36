//! GPU subjects for the checker (`crate::subject::Subject`): the generated
//! kernels of an order (`cuda:ORDER`), cuBLAS (`cublas:sgemm`,
//! `cublas:gemmex-bf16`) and cuBLASLt (`cublaslt:f32|bf16|fp8-tensor|fp8-blk128`,
//! each optionally `:pinned`).
//!
//! # Contract
//! - Each subject computes the whole batch `C = A x B` on GPU 0 with the
//!   kernels or library calls the device suites already use (`exec::gemm_on_gpu`
//!   for `cuda:`, the vendor probe's `classic` / `lt_matmul` for the
//!   libraries) and returns the requested rows, outputs widened exactly to f32.
//! - Inputs are the checker's f32 values, which must be exactly
//!   representable in the subject's input type ([`GpuSpec::input`]): f32 for
//!   `sgemm` and `cublaslt:f32`, bf16 for the bf16 cases, e4m3 for FP8, the
//!   order's step type for `cuda:`. A value that is not is refused
//!   (`Unsupported`), never rounded.
//! - cuBLAS runs as in `device::vendor`: `D[N,M] = op(W)[N,K] · X[K,M]`
//!   column-major, which is `Y[M,N] = X · B` row-major. The FP8 cases use
//!   unit scales (per-tensor 1.0; every `VEC128` / `BLK128x128` block 1.0), so
//!   the product is `A x B` itself; outputs are bf16 (FP8, bf16) or f32.
//! - `cublaslt:…` without `:pinned` runs the heuristic's first choice at each
//!   M. With `:pinned`, one algorithm is used for every M of a shape: the
//!   heuristic's choice at M = [`PIN_M`], re-initialised with split-K 1 and
//!   no reduction (the vendor probe's pin), checked with
//!   `cublasLtMatmulAlgoCheck` at each M; an M it refuses is `Unsupported`,
//!   never run on another algorithm. Library refusals (no algorithm, a shape
//!   rule such as FP8 block scales needing M % 4 == 0) are `Unsupported`;
//!   an output the call left unwritten (the sentinel survives) is `Failed`.
//! - Without the `cuda` feature, or without a driver and GPU, the factory
//!   returns one line naming the subject kind (the CLI exits 2).

use crate::order::{InType, Order};
use crate::subject::spec::{Kind, Parsed, RunnerOptions};
use crate::subject::{Knobs, Subject};

/// The M at which a `:pinned` cuBLASLt subject reads the heuristic's choice
/// (the vendor probe's pin: its largest M).
pub const PIN_M: usize = 4096;

/// A parsed GPU subject spec.
#[derive(Clone, Debug, PartialEq)]
pub enum GpuSpec {
    /// `cuda:ORDER`: the generated kernels (16-bit tensor-core steps on
    /// `mma.sync`).
    Cuda(Order),
    /// `cublas:sgemm` / `cublas:gemmex-bf16`, or `cublaslt:…[:pinned]`.
    Vendor { case: super::vendor::CaseId, pinned: bool },
}

impl GpuSpec {
    /// Parses `spec` if its kind is `cuda`, `cublas` or `cublaslt`
    /// (None: another kind; Some(Err): one line naming what is wrong).
    pub fn parse(spec: &str) -> Option<Result<GpuSpec, String>> {
        use super::vendor::CaseId;
        let (kind, arg) = spec.split_once(':')?;
        let r = match kind {
            "cuda" => arg
                .parse::<Order>()
                .map(GpuSpec::Cuda)
                .map_err(|e| format!("subject '{spec}': {e}")),
            "cublas" => match arg {
                "sgemm" => Ok(GpuSpec::Vendor {
                    case: CaseId::Sgemm,
                    pinned: false,
                }),
                "gemmex-bf16" => Ok(GpuSpec::Vendor {
                    case: CaseId::GemmexBf16,
                    pinned: false,
                }),
                _ => Err(format!(
                    "subject '{spec}': expected cublas:sgemm or cublas:gemmex-bf16 (cuBLAS has no algorithm control: pin with cublaslt:)"
                )),
            },
            "cublaslt" => {
                let (name, pinned) = match arg.strip_suffix(":pinned") {
                    Some(n) => (n, true),
                    None => (arg, false),
                };
                let case = match name {
                    "f32" => Some(CaseId::LtF32),
                    "bf16" => Some(CaseId::LtBf16),
                    "fp8-tensor" => Some(CaseId::LtFp8Tensor),
                    "fp8-blk128" => Some(CaseId::LtFp8Vec128Blk128),
                    _ => None,
                };
                case.map(|case| GpuSpec::Vendor { case, pinned }).ok_or_else(|| {
                    format!("subject '{spec}': expected cublaslt:f32|bf16|fp8-tensor|fp8-blk128, optionally :pinned")
                })
            }
            _ => return None,
        };
        Some(r)
    }

    /// The element type the subject's inputs must be exactly representable in.
    pub fn input(&self) -> InType {
        match self {
            GpuSpec::Cuda(order) => order.mma().map_or(InType::F32, |m| m.input),
            GpuSpec::Vendor { case, .. } => case.input(),
        }
    }

    /// The subject's name in reports.
    pub fn name(&self) -> String {
        use super::vendor::CaseId;
        match self {
            GpuSpec::Cuda(order) => format!("cuda:{order}"),
            GpuSpec::Vendor { case, pinned } => {
                let base = match case {
                    CaseId::Sgemm => "cublas:sgemm",
                    CaseId::GemmexBf16 => "cublas:gemmex-bf16",
                    CaseId::LtF32 => "cublaslt:f32",
                    CaseId::LtBf16 => "cublaslt:bf16",
                    CaseId::LtFp8Tensor => "cublaslt:fp8-tensor",
                    CaseId::LtFp8Vec128Blk128 => "cublaslt:fp8-blk128",
                };
                format!("{base}{}", if *pinned { ":pinned" } else { "" })
            }
        }
    }

    /// M values where the subject's behaviour may change: the row height of
    /// a generated tensor-core kernel's tile (16 for `mma.sync`); none known
    /// for the libraries (their heuristics are opaque: sweep the edges).
    pub fn m_boundaries(&self) -> Vec<usize> {
        match self {
            GpuSpec::Cuda(order) => {
                match super::codegen::GpuPlan::new(order, None, super::codegen::Backend16::MmaSync) {
                    Ok(plan) if plan.tile_shape().1 > 1 => vec![plan.tile_shape().1 as usize],
                    _ => Vec::new(),
                }
            }
            GpuSpec::Vendor { .. } => Vec::new(),
        }
    }
}

/// Exact codes of `vals` in `ty` (bits of bf16/f16, 8-bit codes; f32 values
/// are returned as their bits' low half and unused): `Err` names the first
/// value that is not exactly representable.
pub fn exact_codes(ty: InType, vals: &[f32]) -> Result<Vec<u16>, String> {
    let Some(f) = ty.format() else {
        return Ok(Vec::new());
    };
    let bad = |i: usize, v: f32| format!("input [{i}] = {v:e} is not exactly representable in {}", ty.name());
    match ty {
        InType::Bf16 => vals
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let b = v.to_bits();
                if b & 0xFFFF == 0 {
                    Ok((b >> 16) as u16)
                } else {
                    Err(bad(i, *v))
                }
            })
            .collect(),
        _ => {
            // every non-NaN code of the format (at most 16 bits), sorted by
            // the bits of its value: one binary search per input
            let mut table: Vec<(u32, u16)> = (0..(1u32 << f.bits()))
                .map(|code| (f.decode_f32(code as u16), code as u16))
                .filter(|(v, _)| !v.is_nan())
                .map(|(v, c)| (v.to_bits(), c))
                .collect();
            table.sort_unstable();
            table.dedup_by_key(|e| e.0);
            vals.iter()
                .enumerate()
                .map(|(i, v)| {
                    table
                        .binary_search_by_key(&v.to_bits(), |e| e.0)
                        .map(|j| table[j].1)
                        .map_err(|_| bad(i, *v))
                })
                .collect()
        }
    }
}

/// The GPU kinds of the subject factory (`crate::subject::spec`), parsed
/// in every build and built only with feature `cuda`: GPU 0 is opened;
/// without a driver, a GPU, or the feature, one line naming the kind.
pub const KINDS: [Kind; 3] = [
    Kind {
        name: "cuda",
        usage: "cuda:ORDER",
        build: build_kind,
        runner: false,
    },
    Kind {
        name: "cublas",
        usage: "cublas:NAME",
        build: build_kind,
        runner: false,
    },
    Kind {
        name: "cublaslt",
        usage: "cublaslt:NAME",
        build: build_kind,
        runner: false,
    },
];

/// A GPU kind's builder: the spec parsed, knobs refused, the subject built;
/// its input type and M boundaries are the spec's.
fn build_kind(spec: &str, _: &str, knobs: &Knobs, _: &RunnerOptions) -> Result<Parsed, String> {
    let parsed = GpuSpec::parse(spec).unwrap_or_else(|| Err(format!("subject '{spec}': not a GPU kind")))?;
    knobs.refuse_any(spec, "a GPU kernel on one device")?;
    Ok(Parsed {
        input: Some(parsed.input()),
        boundaries: parsed.m_boundaries(),
        subject: build(&parsed, spec)?,
        kept: None,
    })
}

#[cfg(not(feature = "cuda"))]
fn build(_: &GpuSpec, spec: &str) -> Result<Box<dyn Subject>, String> {
    let kind = spec.split(':').next().unwrap_or(spec);
    Err(format!(
        "{kind}: this mxbi was built without GPU support; rebuild with `cargo build --release --features cuda`"
    ))
}

#[cfg(feature = "cuda")]
fn build(s: &GpuSpec, spec: &str) -> Result<Box<dyn Subject>, String> {
    let kind = spec.split(':').next().unwrap_or(spec);
    let gpu = super::gpu::Gpu::open(0).map_err(|e| format!("{kind}: no CUDA driver or GPU: {e}"))?;
    match s {
        GpuSpec::Cuda(order) => Ok(Box::new(
            on_gpu::KernelSubject::new(gpu, *order).map_err(|e| format!("{kind}: {e}"))?,
        )),
        GpuSpec::Vendor { case, pinned } => Ok(Box::new(
            on_gpu::VendorSubject::new(gpu, *case, *pinned, s.name()).map_err(|e| format!("{kind}: {e}"))?,
        )),
    }
}

#[cfg(feature = "cuda")]
mod on_gpu {
    use super::{exact_codes, GpuSpec, PIN_M};
    use crate::device::codegen::{Backend16, GpuPlan};
    use crate::device::exec::{gemm_on_gpu, operand_bytes, GemmOperands, KernelCache, POISON};
    use crate::device::gpu::{driver_err, Gpu};
    use crate::device::vendor::blas::{
        build_pin, cb_ok, check_pin, classic, heuristic, lt_matmul, lt_problem, raw, raw_mut, Env, LtHandle, Pin, Pref,
        Ptrs,
    };
    use crate::device::vendor::{blk128_layout, vec128_layout, Api, CaseId, Scaling, Shape, WORKSPACE_BYTES};
    use crate::device::DeviceError;
    use crate::gemm::{BLayout, Matrix, Problem};
    use crate::order::{InType, Order};
    use crate::subject::{Subject, SubjectError};
    use cudarc::driver::CudaSlice;
    use std::collections::HashMap;
    use std::ffi::c_void;
    use std::sync::Mutex;

    /// The f32 values of A `[M][K]` and of B transposed, `[N][K]`.
    fn operands<'a>(name: &str, p: &'a Problem) -> Result<(&'a [f32], Vec<f32>), SubjectError> {
        let unsupported = |why: &str| SubjectError::Unsupported {
            subject: name.to_string(),
            why: why.to_string(),
        };
        let (Matrix::F32(a), Matrix::F32(b)) = (p.a, p.b) else {
            return Err(unsupported("MX-coded inputs: GPU subjects take values (f32 matrices)"));
        };
        let (m, n, k) = (p.m, p.n, p.k);
        if a.len() != m * k || b.len() != k * n || m == 0 || n == 0 || k == 0 {
            return Err(unsupported(&format!(
                "A has {} and B {} values for M={m} K={k} N={n}",
                a.len(),
                b.len()
            )));
        }
        let bt = match p.b_layout {
            BLayout::Nk => b.to_vec(),
            BLayout::Kn => transpose(b, k, n),
        };
        Ok((a, bt))
    }

    /// `[rows][cols]` -> `[cols][rows]`, in 64 x 64 blocks (a K x N
    /// weight of 4096 x 4096 is 64 MiB: a plain strided loop misses the
    /// cache on every write), output rows in parallel.
    fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        use rayon::prelude::*;
        const T: usize = 64;
        let mut t = vec![0f32; rows * cols];
        t.par_chunks_mut(T * rows).enumerate().for_each(|(cb, out)| {
            let c0 = cb * T;
            let cn = out.len() / rows;
            for r0 in (0..rows).step_by(T) {
                for r in r0..(r0 + T).min(rows) {
                    let src = &x[r * cols + c0..r * cols + c0 + cn];
                    for (c, &v) in src.iter().enumerate() {
                        out[c * rows + r] = v;
                    }
                }
            }
        });
        t
    }

    fn select(all: Vec<f32>, n: usize, m: usize, rows: Option<&[usize]>, name: &str) -> Result<Vec<f32>, SubjectError> {
        let Some(rows) = rows else { return Ok(all) };
        let mut out = Vec::with_capacity(rows.len() * n);
        for &r in rows {
            if r >= m {
                return Err(SubjectError::Unsupported {
                    subject: name.to_string(),
                    why: format!("row {r} asked of a batch of {m}"),
                });
            }
            out.extend_from_slice(&all[r * n..(r + 1) * n]);
        }
        Ok(out)
    }

    /// Library refusals are per-cell `Unsupported`; driver faults `Failed`.
    fn device_err(name: &str, e: DeviceError) -> SubjectError {
        let (subject, why) = (name.to_string(), e.to_string());
        match e {
            DeviceError::Library { .. } | DeviceError::Refused(_) | DeviceError::Compile { .. } => {
                SubjectError::Unsupported { subject, why }
            }
            _ => SubjectError::Failed { subject, why },
        }
    }

    // -----------------------------------------------------------------
    // cuda:ORDER
    // -----------------------------------------------------------------

    struct KernelState {
        gpu: Gpu,
        cache: KernelCache,
    }

    /// The generated kernels of one order (`exec::gemm_on_gpu`).
    pub struct KernelSubject {
        order: Order,
        plan: GpuPlan,
        state: Mutex<KernelState>,
    }

    impl KernelSubject {
        pub fn new(gpu: Gpu, order: Order) -> Result<KernelSubject, String> {
            let plan = GpuPlan::new(&order, None, Backend16::MmaSync).map_err(|e| format!("refused `{order}`: {e}"))?;
            Ok(KernelSubject {
                order,
                plan,
                state: Mutex::new(KernelState {
                    gpu,
                    cache: KernelCache::default(),
                }),
            })
        }
    }

    impl Subject for KernelSubject {
        fn name(&self) -> String {
            GpuSpec::Cuda(self.order).name()
        }

        fn input(&self) -> Option<InType> {
            Some(GpuSpec::Cuda(self.order).input())
        }

        fn m_boundaries(&self) -> Vec<usize> {
            GpuSpec::Cuda(self.order).m_boundaries()
        }

        fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
            let name = self.name();
            let (a, bt) = operands(&name, p)?;
            let ty = GpuSpec::Cuda(self.order).input();
            let unsupported = |why: String| SubjectError::Unsupported {
                subject: name.clone(),
                why,
            };
            let a_codes = exact_codes(ty, a).map_err(|e| unsupported(format!("A {e}")))?;
            let b_codes = exact_codes(ty, &bt).map_err(|e| unsupported(format!("B {e}")))?;
            let ops = GemmOperands {
                a: operand_bytes(&self.plan, a, &a_codes),
                bt: operand_bytes(&self.plan, &bt, &b_codes),
                sa: Vec::new(),
                sb: Vec::new(),
            };
            let mut st = self.state.lock().map_err(|_| SubjectError::Failed {
                subject: name.clone(),
                why: "a previous run panicked".into(),
            })?;
            let KernelState { gpu, cache } = &mut *st;
            let (out, _ms) =
                gemm_on_gpu(gpu, cache, &self.plan, p.m, p.n, p.k, &ops).map_err(|e| device_err(&name, e))?;
            let unwritten = out.iter().filter(|v| v.to_bits() == POISON).count();
            if unwritten > 0 {
                return Err(SubjectError::Failed {
                    subject: name,
                    why: format!("{unwritten} outputs not written (poison left)"),
                });
            }
            select(out, p.n, p.m, rows, &name)
        }
    }

    // -----------------------------------------------------------------
    // cuBLAS / cuBLASLt
    // -----------------------------------------------------------------

    /// Weights resident on the GPU: the f32 values they came from (`[N][K]`)
    /// and their encoding.
    struct Weights {
        host_bt: Vec<f32>,
        shape: Shape,
        w: CudaSlice<u8>,
        /// `BLK128x128` unit scales (FP8 block-scaled case).
        blk: Option<CudaSlice<f32>>,
    }

    struct VendorState {
        // field order is drop order: the cuBLAS handle before its workspace
        blas: cudarc::cublas::CudaBlas,
        _ws_cb: CudaSlice<u8>,
        lt: LtHandle,
        ws_lt: CudaSlice<u8>,
        pref: Pref,
        unit_a: CudaSlice<f32>,
        unit_b: CudaSlice<f32>,
        weights: Option<Weights>,
        /// Pinned algorithms by (N, K): the pin, or why there is none.
        pins: HashMap<(usize, usize), Result<Pin, String>>,
        gpu: Gpu,
    }

    /// Raw cuBLAS(Lt) handles and descriptors are not `Send`: the state is
    /// only ever touched under the subject's mutex, one call at a time, and
    /// the libraries allow a handle to be used from any host thread when
    /// calls are not concurrent.
    struct Guarded(VendorState);
    // SAFETY: see the type's doc; every access goes through `Mutex<Guarded>`.
    unsafe impl Send for Guarded {}

    /// One cuBLAS or cuBLASLt case of the vendor probe, as a subject.
    pub struct VendorSubject {
        case: CaseId,
        pinned: bool,
        name: String,
        state: Mutex<Guarded>,
    }

    /// The device bytes of the inputs (little-endian, as the GPU reads
    /// them; borrowed without a copy on a little-endian host).
    fn bytes_of<'a>(dt: InType, vals: &'a [f32], codes: &'a [u16]) -> std::borrow::Cow<'a, [u8]> {
        use std::borrow::Cow;
        let little = cfg!(target_endian = "little");
        match dt {
            InType::F32 if little => Cow::Borrowed(bytemuck::cast_slice(vals)),
            InType::F32 => Cow::Owned(vals.iter().flat_map(|v| v.to_le_bytes()).collect()),
            InType::Bf16 | InType::F16 if little => Cow::Borrowed(bytemuck::cast_slice(codes)),
            InType::Bf16 | InType::F16 => Cow::Owned(codes.iter().flat_map(|c| c.to_le_bytes()).collect()),
            InType::E4M3 | InType::E5M2 => Cow::Owned(codes.iter().map(|&c| c as u8).collect()),
        }
    }

    impl VendorSubject {
        pub fn new(gpu: Gpu, case: CaseId, pinned: bool, name: String) -> Result<VendorSubject, String> {
            if pinned && !case.pinnable() {
                return Err(format!("{} has no algorithm control to pin", case.name()));
            }
            let e = |x: DeviceError| x.to_string();
            let stream = gpu.stream.clone();
            let blas = cudarc::cublas::CudaBlas::new(stream.clone()).map_err(|x| format!("cuBLAS handle: {x:?}"))?;
            let mut ws_cb: CudaSlice<u8> = stream
                .alloc_zeros(WORKSPACE_BYTES)
                .map_err(driver_err("allocate cuBLAS workspace"))
                .map_err(e)?;
            let p = raw_mut(&mut ws_cb, &stream);
            // SAFETY: the handle is alive; the buffer outlives it (dropped
            // after it, by field order) and is 256-byte aligned.
            cb_ok(
                unsafe {
                    cudarc::cublas::sys::cublasSetWorkspace_v2(
                        *blas.handle(),
                        p as usize as *mut c_void,
                        WORKSPACE_BYTES,
                    )
                },
                "cublasSetWorkspace",
            )
            .map_err(e)?;
            let ws_lt: CudaSlice<u8> = stream
                .alloc_zeros(WORKSPACE_BYTES)
                .map_err(driver_err("allocate cuBLASLt workspace"))
                .map_err(e)?;
            // two allocations, so each scale pointer is 256-byte aligned
            let unit_a = stream
                .clone_htod(&[1f32])
                .map_err(driver_err("upload scale"))
                .map_err(e)?;
            let unit_b = stream
                .clone_htod(&[1f32])
                .map_err(driver_err("upload scale"))
                .map_err(e)?;
            let state = VendorState {
                blas,
                _ws_cb: ws_cb,
                lt: LtHandle::new().map_err(e)?,
                ws_lt,
                pref: Pref::new(WORKSPACE_BYTES).map_err(e)?,
                unit_a,
                unit_b,
                weights: None,
                pins: HashMap::new(),
                gpu,
            };
            Ok(VendorSubject {
                case,
                pinned,
                name,
                state: Mutex::new(Guarded(state)),
            })
        }

        /// Uploads the weights `bt` (`[N][K]`) and, for block-scaled
        /// cases, their unit block scales, unless the same bits are
        /// already on the device for this shape.
        fn upload_weights(&self, st: &mut VendorState, bt: Vec<f32>, shape: &Shape) -> Result<(), SubjectError> {
            let name = &self.name;
            let case = self.case;
            let dt = case.input();
            let ty = dt;
            let unsupported = |why: String| SubjectError::Unsupported {
                subject: name.clone(),
                why,
            };
            let dev = |e: DeviceError| device_err(name, e);
            let stream = st.gpu.stream.clone();
            // the same bits (not float equality: -0 and +0, NaNs)
            let same_bits =
                |x: &[f32], y: &[f32]| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
            let reuse = st
                .weights
                .as_ref()
                .is_some_and(|w| w.shape == *shape && same_bits(&w.host_bt, &bt));
            if !reuse {
                let codes = exact_codes(ty, &bt).map_err(|e| unsupported(format!("B {e}")))?;
                let w = stream
                    .clone_htod(bytes_of(dt, &bt, &codes).as_ref())
                    .map_err(driver_err("upload weights"))
                    .map_err(dev)?;
                let blk = if case.scaling() == Scaling::Vec128Blk128 {
                    let ones = vec![1f32; shape.n_blocks() * shape.k_blocks()];
                    Some(
                        stream
                            .clone_htod(&blk128_layout(&ones, shape))
                            .map_err(driver_err("upload weight scales"))
                            .map_err(dev)?,
                    )
                } else {
                    None
                };
                st.weights = Some(Weights {
                    host_bt: bt,
                    shape: shape.clone(),
                    w,
                    blk,
                });
            }
            Ok(())
        }

        /// Runs the whole batch; the output bytes `[M][N]` in the case's output type.
        fn compute(
            &self,
            st: &mut VendorState,
            a: &[f32],
            bt: Vec<f32>,
            m: usize,
            n: usize,
            k: usize,
        ) -> Result<Vec<u8>, SubjectError> {
            let name = &self.name;
            let case = self.case;
            let dt = case.input();
            let ty = dt;
            let unsupported = |why: String| SubjectError::Unsupported {
                subject: name.clone(),
                why,
            };
            let dev = |e: DeviceError| device_err(name, e);
            let stream = st.gpu.stream.clone();
            let shape = Shape::new(n, k);
            self.upload_weights(st, bt, &shape)?;
            let a_codes = exact_codes(ty, a).map_err(|e| unsupported(format!("A {e}")))?;
            let mut d_x = stream
                .clone_htod(bytes_of(dt, a, &a_codes).as_ref())
                .map_err(driver_err("upload activations"))
                .map_err(dev)?;
            let out_size = case.output().bytes();
            // 0xFF sentinel (NaN in f32 and bf16): an output the call leaves
            // unwritten cannot pass for one it wrote
            let y_bytes = m * n * out_size;
            // SAFETY: the allocation is filled by the memset below before
            // anything reads it
            let mut d_y: CudaSlice<u8> = unsafe { stream.alloc(y_bytes) }
                .map_err(driver_err("allocate output"))
                .map_err(dev)?;
            let y_ptr = raw_mut(&mut d_y, &stream);
            // SAFETY: y_ptr is d_y's device pointer, y_bytes its size, on
            // the stream it was allocated on
            unsafe { cudarc::driver::result::memset_d8_async(y_ptr, 0xFF, y_bytes, stream.cu_stream()) }
                .map_err(driver_err("fill output sentinel"))
                .map_err(dev)?;
            // activation block scales, for M and for the pin's problem
            let act_rows = m.max(PIN_M);
            let d_vec = if case.scaling() == Scaling::Vec128Blk128 {
                let ones = vec![1f32; act_rows * shape.k_blocks()];
                Some(
                    stream
                        .clone_htod(&vec128_layout(&ones, act_rows, &shape))
                        .map_err(driver_err("upload activation scales"))
                        .map_err(dev)?,
                )
            } else {
                None
            };
            let weights = st.weights.as_ref().expect("weights uploaded above");
            let (scale_a, scale_b) = match case.scaling() {
                Scaling::None => (0, 0),
                Scaling::Tensor => (raw(&st.unit_a, &stream), raw(&st.unit_b, &stream)),
                Scaling::Vec128Blk128 => (
                    weights.blk.as_ref().map_or(0, |b| raw(b, &stream)),
                    d_vec.as_ref().map_or(0, |b| raw(b, &stream)),
                ),
            };
            let ptrs = Ptrs {
                w: raw(&weights.w, &stream),
                x: raw_mut(&mut d_x, &stream),
                y: raw_mut(&mut d_y, &stream),
                scale_a,
                scale_b,
            };
            let ws_lt = raw_mut(&mut st.ws_lt, &stream);
            let env = Env {
                lt: &st.lt,
                blas: *st.blas.handle(),
                stream: &stream,
                lt_stream: stream.cu_stream() as cudarc::cublaslt::sys::cudaStream_t,
                workspace: ws_lt,
            };
            match case.api() {
                Api::Cublas => classic(&env, case, &shape, m, &ptrs).map_err(dev)?,
                Api::CublasLt => {
                    let prob = lt_problem(case, &shape, m, &ptrs).map_err(dev)?;
                    let algo = if self.pinned {
                        let pin = st.pins.entry((n, k)).or_insert_with(|| {
                            lt_problem(case, &shape, PIN_M, &ptrs)
                                .map_err(|e| e.to_string())
                                .and_then(|pp| build_pin(&st.lt, case, PIN_M, &pp, &st.pref))
                        });
                        let pin = pin
                            .as_ref()
                            .map_err(|e| unsupported(format!("no pinned algorithm for N={n} K={k}: {e}")))?;
                        check_pin(&st.lt, &prob, &pin.algo)
                            .map_err(|e| unsupported(format!("the pinned algorithm is refused at M={m}: {e}")))?;
                        pin.algo
                    } else {
                        heuristic(&st.lt, &prob, &st.pref)
                            .map_err(|e| unsupported(format!("M={m}: {e}")))?
                            .algo
                    };
                    lt_matmul(&env, &prob, &algo, &ptrs).map_err(dev)?;
                }
            }
            st.gpu.sync().map_err(dev)?;
            let host = stream
                .clone_dtoh(&d_y)
                .map_err(driver_err("download output"))
                .map_err(dev)?;
            let unwritten = match out_size {
                4 => host
                    .chunks_exact(4)
                    .filter(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) == u32::MAX)
                    .count(),
                _ => host.chunks(out_size).filter(|c| c.iter().all(|&b| b == 0xFF)).count(),
            };
            if unwritten > 0 {
                return Err(SubjectError::Failed {
                    subject: name.clone(),
                    why: format!("{unwritten} outputs not written (sentinel left)"),
                });
            }
            Ok(host)
        }
    }

    impl Subject for VendorSubject {
        fn name(&self) -> String {
            self.name.clone()
        }

        fn input(&self) -> Option<InType> {
            Some(self.case.input())
        }

        fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
            let (a, bt) = operands(&self.name, p)?;
            let mut g = self.state.lock().map_err(|_| SubjectError::Failed {
                subject: self.name.clone(),
                why: "a previous run panicked".into(),
            })?;
            let bytes = self.compute(&mut g.0, a, bt, p.m, p.n, p.k)?;
            let out = self.case.output();
            let all: Vec<f32> = match out {
                InType::F32 => bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
                InType::Bf16 => bytes
                    .chunks_exact(2)
                    .map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16))
                    .collect(),
                InType::E4M3 => bytes
                    .iter()
                    .map(|&c| crate::format::Format::E4M3.decode_f32(c as u16))
                    .collect(),
                InType::F16 | InType::E5M2 => bytes
                    .chunks_exact(out.bytes())
                    .map(|c| crate::device::vendor::decode_le(out, c) as f32)
                    .collect(),
            };
            select(all, p.n, p.m, rows, &self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::vendor::CaseId;

    #[test]
    fn specs_parse_and_name_themselves() {
        for spec in [
            "cublas:sgemm",
            "cublas:gemmex-bf16",
            "cublaslt:f32",
            "cublaslt:bf16:pinned",
            "cublaslt:fp8-tensor",
            "cublaslt:fp8-blk128:pinned",
            "cuda:fma;split=4",
        ] {
            let s = GpuSpec::parse(spec).unwrap().unwrap();
            assert_eq!(s.name(), spec);
        }
        assert_eq!(
            GpuSpec::parse("cublaslt:fp8-blk128:pinned").unwrap().unwrap(),
            GpuSpec::Vendor {
                case: CaseId::LtFp8Vec128Blk128,
                pinned: true
            }
        );
        assert_eq!(
            GpuSpec::parse("cublaslt:fp8-tensor").unwrap().unwrap().input(),
            InType::E4M3
        );
        assert_eq!(
            GpuSpec::parse("cublas:gemmex-bf16").unwrap().unwrap().input(),
            InType::Bf16
        );
        assert!(GpuSpec::parse("model:fma").is_none());
        for bad in ["cublas:sgemm:pinned", "cublaslt:f16", "cuda:nonsense", "cublas:"] {
            let e = GpuSpec::parse(bad).unwrap().unwrap_err();
            assert!(e.contains(bad) && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn tensor_core_orders_report_their_tile_height() {
        let s = GpuSpec::parse("cuda:hopper-bf16").unwrap().unwrap();
        assert_eq!(s.input(), InType::Bf16);
        assert_eq!(s.m_boundaries(), vec![16]);
        assert!(GpuSpec::parse("cuda:fma").unwrap().unwrap().m_boundaries().is_empty());
    }

    #[test]
    fn exact_codes_refuse_what_they_would_round() {
        assert_eq!(exact_codes(InType::Bf16, &[1.0, -2.0]).unwrap(), vec![0x3F80, 0xC000]);
        assert!(exact_codes(InType::Bf16, &[1.0 + f32::EPSILON])
            .unwrap_err()
            .contains("[0]"));
        assert_eq!(
            exact_codes(InType::E4M3, &[1.0, -0.0, 448.0]).unwrap(),
            vec![0x38, 0x80, 0x7E]
        );
        assert!(exact_codes(InType::E4M3, &[1.0, 1.0625]).unwrap_err().contains("[1]"));
        assert_eq!(exact_codes(InType::F16, &[0.5]).unwrap(), vec![0x3800]);
        assert!(exact_codes(InType::F32, &[0.1]).unwrap().is_empty());
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn without_the_feature_gpu_specs_say_so_in_one_line() {
        let build = |spec: &str| (KINDS[1].build)(spec, "", &Knobs::default(), &RunnerOptions::default());
        let e = build("cublas:sgemm").err().unwrap();
        assert!(e.starts_with("cublas: this mxbi was built without GPU support"), "{e}");
        let e = build("model:fma").err().unwrap();
        assert_eq!(e, "subject 'model:fma': not a GPU kind");
    }
}
