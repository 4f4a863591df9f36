//! cuBLAS and cuBLASLt through cudarc's raw bindings (feature `cuda`):
//! RAII wrappers for the Lt handle, descriptors, layouts and preferences;
//! the problem, heuristic and pinned-algorithm calls; one matmul through
//! each API. Every status is checked; nothing falls back to another
//! algorithm. The vendor suite (`run.rs`) and the `cublas:`/`cublaslt:`
//! subjects (`device/subject.rs`) both call through here.

use super::*;
use cudarc::cublas::sys as cb;
use cudarc::cublaslt::sys as lt;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

type Lts = lt::cublasStatus_t;
type AlgoAttr = lt::cublasLtMatmulAlgoConfigAttributes_t;

const OP_N: i32 = 0;
const OP_T: i32 = 1;

fn lt_ok(st: Lts, what: &str) -> Result<()> {
    if st == Lts::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(DeviceError::Library {
            library: "cuBLASLt",
            what: format!("{what}: {st:?}"),
        })
    }
}

pub(crate) fn cb_ok(st: cb::cublasStatus_t, what: &str) -> Result<()> {
    if st == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(DeviceError::Library {
            library: "cuBLAS",
            what: format!("{what}: {st:?}"),
        })
    }
}

/// Library-level failures (a status code, a refusal) become a recorded
/// string; driver failures (faults, lost context) stay errors and end the run.
pub(crate) fn soft<T>(r: Result<T>) -> Result<std::result::Result<T, String>> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e @ (DeviceError::Library { .. } | DeviceError::Refused(_))) => Ok(Err(e.to_string())),
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------
// RAII wrappers.
// ---------------------------------------------------------------------------

pub(crate) struct LtHandle(lt::cublasLtHandle_t);

impl LtHandle {
    pub(crate) fn new() -> Result<LtHandle> {
        let mut h: lt::cublasLtHandle_t = std::ptr::null_mut();
        // SAFETY: out-parameter of the right type.
        lt_ok(unsafe { lt::cublasLtCreate(&mut h) }, "cublasLtCreate")?;
        Ok(LtHandle(h))
    }
}

impl Drop for LtHandle {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtCreate and destroyed once, here.
        let st = unsafe { lt::cublasLtDestroy(self.0) };
        if st != Lts::CUBLAS_STATUS_SUCCESS {
            eprintln!("warning: cublasLtDestroy: {st:?}");
        }
    }
}

struct Desc(lt::cublasLtMatmulDesc_t);

impl Desc {
    fn new(compute: lt::cublasComputeType_t, scale: lt::cudaDataType) -> Result<Desc> {
        let mut d: lt::cublasLtMatmulDesc_t = std::ptr::null_mut();
        // SAFETY: out-parameter of the right type.
        lt_ok(
            unsafe { lt::cublasLtMatmulDescCreate(&mut d, compute, scale) },
            "cublasLtMatmulDescCreate",
        )?;
        Ok(Desc(d))
    }

    fn set_bytes(&self, attr: lt::cublasLtMatmulDescAttributes_t, bytes: &[u8]) -> Result<()> {
        // SAFETY: the descriptor is alive; `bytes` is valid for its length.
        lt_ok(
            unsafe { lt::cublasLtMatmulDescSetAttribute(self.0, attr, bytes.as_ptr().cast(), bytes.len()) },
            &format!("cublasLtMatmulDescSetAttribute({attr:?})"),
        )
    }

    fn set_i32(&self, attr: lt::cublasLtMatmulDescAttributes_t, v: i32) -> Result<()> {
        self.set_bytes(attr, &v.to_le_bytes())
    }

    /// A device pointer attribute (`void*`).
    fn set_ptr(&self, attr: lt::cublasLtMatmulDescAttributes_t, p: u64) -> Result<()> {
        if p == 0 {
            return Err(DeviceError::Library {
                library: "cuBLASLt",
                what: format!("{attr:?}: null device pointer"),
            });
        }
        // A `void*` attribute: the pointer's native bytes.
        self.set_bytes(attr, &(p as usize).to_ne_bytes())
    }
}

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtMatmulDescCreate, destroyed once.
        let st = unsafe { lt::cublasLtMatmulDescDestroy(self.0) };
        if st != Lts::CUBLAS_STATUS_SUCCESS {
            eprintln!("warning: cublasLtMatmulDescDestroy: {st:?}");
        }
    }
}

struct Layout(lt::cublasLtMatrixLayout_t);

impl Layout {
    fn new(t: lt::cudaDataType, rows: usize, cols: usize, ld: usize) -> Result<Layout> {
        let mut l: lt::cublasLtMatrixLayout_t = std::ptr::null_mut();
        // SAFETY: out-parameter of the right type.
        lt_ok(
            unsafe { lt::cublasLtMatrixLayoutCreate(&mut l, t, rows as u64, cols as u64, ld as i64) },
            &format!("cublasLtMatrixLayoutCreate({t:?}, {rows}x{cols}, ld {ld})"),
        )?;
        Ok(Layout(l))
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtMatrixLayoutCreate, destroyed once.
        let st = unsafe { lt::cublasLtMatrixLayoutDestroy(self.0) };
        if st != Lts::CUBLAS_STATUS_SUCCESS {
            eprintln!("warning: cublasLtMatrixLayoutDestroy: {st:?}");
        }
    }
}

pub(crate) struct Pref(lt::cublasLtMatmulPreference_t);

impl Pref {
    pub(crate) fn new(workspace: usize) -> Result<Pref> {
        let mut p: lt::cublasLtMatmulPreference_t = std::ptr::null_mut();
        // SAFETY: out-parameter of the right type.
        lt_ok(
            unsafe { lt::cublasLtMatmulPreferenceCreate(&mut p) },
            "cublasLtMatmulPreferenceCreate",
        )?;
        let pref = Pref(p);
        let ws = workspace as u64;
        // SAFETY: the attribute is a uint64_t; `ws` lives across the call.
        lt_ok(
            unsafe {
                lt::cublasLtMatmulPreferenceSetAttribute(
                    pref.0,
                    lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    (&ws as *const u64).cast(),
                    std::mem::size_of::<u64>(),
                )
            },
            "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)",
        )?;
        Ok(pref)
    }
}

impl Drop for Pref {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtMatmulPreferenceCreate, destroyed once.
        let st = unsafe { lt::cublasLtMatmulPreferenceDestroy(self.0) };
        if st != Lts::CUBLAS_STATUS_SUCCESS {
            eprintln!("warning: cublasLtMatmulPreferenceDestroy: {st:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// Problems, heuristics, algorithm configs.
// ---------------------------------------------------------------------------

fn lt_type(d: InType) -> lt::cudaDataType {
    match d {
        InType::F32 => lt::cudaDataType::CUDA_R_32F,
        InType::Bf16 => lt::cudaDataType::CUDA_R_16BF,
        InType::E4M3 => lt::cudaDataType::CUDA_R_8F_E4M3,
        InType::F16 => lt::cudaDataType::CUDA_R_16F,
        InType::E5M2 => lt::cudaDataType::CUDA_R_8F_E5M2,
    }
}

/// Compute type, scale type, A, B, C, D types of a cuBLASLt case.
struct LtTypes {
    compute: lt::cublasComputeType_t,
    scale: lt::cudaDataType,
    a: lt::cudaDataType,
    b: lt::cudaDataType,
    c: lt::cudaDataType,
    d: lt::cudaDataType,
}

fn lt_types(case: CaseId) -> LtTypes {
    LtTypes {
        compute: lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        scale: lt::cudaDataType::CUDA_R_32F,
        a: lt_type(case.input()),
        b: lt_type(case.input()),
        c: lt_type(case.output()),
        d: lt_type(case.output()),
    }
}

/// Device pointers of one GEMM.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ptrs {
    pub(crate) w: u64,
    pub(crate) x: u64,
    pub(crate) y: u64,
    /// Scale of cuBLAS A (the weights): tensor scalar or BLK128x128 grid.
    pub(crate) scale_a: u64,
    /// Scale of cuBLAS B (the activations): tensor scalar or VEC128 grid.
    pub(crate) scale_b: u64,
}

/// The descriptors of one cuBLASLt problem: D[N,M] = op(A=W)[N,K] · B=X[K,M].
pub(crate) struct LtProblem {
    desc: Desc,
    a: Layout,
    b: Layout,
    cd: Layout,
}

pub(crate) fn lt_problem(case: CaseId, shape: &Shape, m: usize, p: &Ptrs) -> Result<LtProblem> {
    use lt::cublasLtMatmulDescAttributes_t as A;
    use lt::cublasLtMatmulMatrixScale_t as S;
    let t = lt_types(case);
    let desc = Desc::new(t.compute, t.scale)?;
    desc.set_i32(A::CUBLASLT_MATMUL_DESC_TRANSA, OP_T)?;
    desc.set_i32(A::CUBLASLT_MATMUL_DESC_TRANSB, OP_N)?;
    match case.scaling() {
        Scaling::None => {}
        Scaling::Tensor => {
            desc.set_ptr(A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p.scale_a)?;
            desc.set_ptr(A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p.scale_b)?;
        }
        Scaling::Vec128Blk128 => {
            desc.set_i32(
                A::CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                S::CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F as i32,
            )?;
            desc.set_i32(
                A::CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                S::CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F as i32,
            )?;
            desc.set_ptr(A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p.scale_a)?;
            desc.set_ptr(A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p.scale_b)?;
        }
    }
    Ok(LtProblem {
        desc,
        a: Layout::new(t.a, shape.k, shape.n, shape.k)?,
        b: Layout::new(t.b, shape.k, m, shape.k)?,
        cd: Layout::new(t.d, shape.n, m, shape.n)?,
    })
}

fn empty_result() -> lt::cublasLtMatmulHeuristicResult_t {
    lt::cublasLtMatmulHeuristicResult_t {
        algo: lt::cublasLtMatmulAlgo_t { data: [0; 8] },
        workspaceSize: 0,
        state: Lts::CUBLAS_STATUS_SUCCESS,
        wavesCount: 0.0,
        reserved: [0; 4],
    }
}

pub(crate) struct Choice {
    pub(crate) algo: lt::cublasLtMatmulAlgo_t,
    pub(crate) workspace: usize,
    pub(crate) waves: f32,
}

/// The heuristic's top choice; `Err` (recorded, not fatal) when there is
/// none for this problem.
pub(crate) fn heuristic(h: &LtHandle, p: &LtProblem, pref: &Pref) -> std::result::Result<Choice, String> {
    let mut res = empty_result();
    let mut count: c_int = 0;
    // SAFETY: all descriptors are alive; `res` has room for the one result requested.
    let st = unsafe {
        lt::cublasLtMatmulAlgoGetHeuristic(
            h.0, p.desc.0, p.a.0, p.b.0, p.cd.0, p.cd.0, pref.0, 1, &mut res, &mut count,
        )
    };
    if st != Lts::CUBLAS_STATUS_SUCCESS {
        return Err(format!("cublasLtMatmulAlgoGetHeuristic: {st:?}"));
    }
    if count < 1 {
        return Err("cublasLtMatmulAlgoGetHeuristic: no algorithm".into());
    }
    if res.state != Lts::CUBLAS_STATUS_SUCCESS {
        return Err(format!("cublasLtMatmulAlgoGetHeuristic: result state {:?}", res.state));
    }
    if res.workspaceSize > WORKSPACE_BYTES {
        return Err(format!("heuristic wants {} workspace bytes", res.workspaceSize));
    }
    Ok(Choice {
        algo: res.algo,
        workspace: res.workspaceSize,
        waves: res.wavesCount,
    })
}

const CONFIG_ATTRS: [AlgoAttr; 9] = [
    AlgoAttr::CUBLASLT_ALGO_CONFIG_ID,
    AlgoAttr::CUBLASLT_ALGO_CONFIG_TILE_ID,
    AlgoAttr::CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
    AlgoAttr::CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
    AlgoAttr::CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING,
    AlgoAttr::CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION,
    AlgoAttr::CUBLASLT_ALGO_CONFIG_STAGES_ID,
    AlgoAttr::CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID,
    AlgoAttr::CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
];

/// One config attribute as (value, size in bytes). The size is asked first
/// (buf NULL, size 0, as documented), so 16-bit and 32-bit attributes are
/// read and written with exactly their storage size.
fn config_attr(algo: &lt::cublasLtMatmulAlgo_t, attr: AlgoAttr) -> Result<(u64, usize)> {
    let what = format!("cublasLtMatmulAlgoConfigGetAttribute({attr:?})");
    let mut size = 0usize;
    // SAFETY: documented size query: NULL buffer, 0 bytes, size written out.
    let st = unsafe { lt::cublasLtMatmulAlgoConfigGetAttribute(algo, attr, std::ptr::null_mut(), 0, &mut size) };
    if st != Lts::CUBLAS_STATUS_SUCCESS || size == 0 || size > 8 {
        // Fall back to the documented storage: uint16_t for the inner and
        // cluster shapes, 32 bits for the others.
        size = match attr {
            AlgoAttr::CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID | AlgoAttr::CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID => 2,
            _ => 4,
        };
    }
    let mut buf = [0u8; 8];
    let mut written = 0usize;
    // SAFETY: `buf` holds 8 >= size bytes.
    lt_ok(
        unsafe { lt::cublasLtMatmulAlgoConfigGetAttribute(algo, attr, buf.as_mut_ptr().cast(), size, &mut written) },
        &what,
    )?;
    if written != size {
        return Err(DeviceError::Library {
            library: "cuBLASLt",
            what: format!("{what}: wrote {written} of {size} bytes"),
        });
    }
    Ok((u64::from_le_bytes(buf), size))
}

/// A capability attribute, `None` if the library does not answer.
fn cap_attr(algo: &lt::cublasLtMatmulAlgo_t, attr: lt::cublasLtMatmulAlgoCapAttributes_t) -> Option<u64> {
    let mut size = 0usize;
    // SAFETY: documented size query: NULL buffer, 0 bytes.
    let st = unsafe { lt::cublasLtMatmulAlgoCapGetAttribute(algo, attr, std::ptr::null_mut(), 0, &mut size) };
    if st != Lts::CUBLAS_STATUS_SUCCESS || size == 0 || size > 8 {
        return None;
    }
    let mut buf = [0u8; 8];
    let mut written = 0usize;
    // SAFETY: `buf` holds 8 >= size bytes.
    let st = unsafe { lt::cublasLtMatmulAlgoCapGetAttribute(algo, attr, buf.as_mut_ptr().cast(), size, &mut written) };
    (st == Lts::CUBLAS_STATUS_SUCCESS && written == size).then(|| u64::from_le_bytes(buf))
}

pub(crate) fn read_config(algo: &lt::cublasLtMatmulAlgo_t) -> Result<AlgoConfig> {
    let mut v = [0u64; 9];
    let mut id_size = 4;
    for (i, attr) in CONFIG_ATTRS.iter().enumerate() {
        let (value, size) = config_attr(algo, *attr)?;
        v[i] = value;
        if i == 0 {
            id_size = size;
        }
    }
    // The id is an int32_t.
    let algo_id = if id_size == 4 {
        v[0] as u32 as i32 as i64
    } else {
        v[0] as i64
    };
    use lt::cublasLtMatmulAlgoCapAttributes_t as C;
    Ok(AlgoConfig {
        algo_id,
        tile_id: v[1],
        splitk_num: v[2],
        reduction_scheme: v[3],
        cta_swizzling: v[4],
        custom_option: v[5],
        stages_id: v[6],
        inner_shape_id: v[7],
        cluster_shape_id: v[8],
        numerical_impl_flags: cap_attr(algo, C::CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS),
        splitk_support: cap_attr(algo, C::CUBLASLT_ALGO_CAP_SPLITK_SUPPORT),
        reduction_scheme_mask: cap_attr(algo, C::CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK),
    })
}

pub(crate) struct Pin {
    pub(crate) algo: lt::cublasLtMatmulAlgo_t,
    pub(crate) report: PinReport,
}

/// Reads the heuristic's choice at `pin_m` and re-initialises it with
/// split-K 1 and reduction scheme NONE. `Err` is recorded, not fatal.
pub(crate) fn build_pin(
    h: &LtHandle,
    case: CaseId,
    pin_m: usize,
    p: &LtProblem,
    pref: &Pref,
) -> std::result::Result<Pin, String> {
    let choice = heuristic(h, p, pref).map_err(|e| format!("heuristic at pin M={pin_m}: {e}"))?;
    let from = read_config(&choice.algo).map_err(|e| e.to_string())?;
    let t = lt_types(case);
    let mut algo = lt::cublasLtMatmulAlgo_t { data: [0; 8] };
    let id = c_int::try_from(from.algo_id).map_err(|_| format!("algorithm id {} out of range", from.algo_id))?;
    // SAFETY: the handle is alive; `algo` is a valid out-parameter.
    lt_ok(
        unsafe { lt::cublasLtMatmulAlgoInit(h.0, t.compute, t.scale, t.a, t.b, t.c, t.d, id, &mut algo) },
        &format!("cublasLtMatmulAlgoInit(id {id})"),
    )
    .map_err(|e| e.to_string())?;
    for attr in &CONFIG_ATTRS[1..] {
        let (value, size) = config_attr(&choice.algo, *attr).map_err(|e| e.to_string())?;
        let value = match attr {
            AlgoAttr::CUBLASLT_ALGO_CONFIG_SPLITK_NUM => 1,
            AlgoAttr::CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME => {
                lt::cublasLtReductionScheme_t::CUBLASLT_REDUCTION_SCHEME_NONE as u64
            }
            _ => value,
        };
        let bytes = value.to_le_bytes();
        // SAFETY: `bytes` holds at least `size` bytes, the attribute's storage size.
        lt_ok(
            unsafe { lt::cublasLtMatmulAlgoConfigSetAttribute(&mut algo, *attr, bytes.as_ptr().cast(), size) },
            &format!("cublasLtMatmulAlgoConfigSetAttribute({attr:?} = {value})"),
        )
        .map_err(|e| e.to_string())?;
    }
    let pinned = read_config(&algo).map_err(|e| e.to_string())?;
    let mut expect = from.clone();
    expect.splitk_num = 1;
    expect.reduction_scheme = 0;
    if !pinned.same_config(&expect) {
        return Err(format!(
            "pinned algorithm reads back as {} instead of {}",
            pinned.short(),
            expect.short()
        ));
    }
    Ok(Pin {
        report: PinReport {
            pin_m,
            heuristic_at_pin: from,
            pinned,
            reinit_bytes_equal_heuristic: algo.data == choice.algo.data,
            checks: Vec::new(),
        },
        algo,
    })
}

/// `cublasLtMatmulAlgoCheck` of the pinned algorithm for this problem:
/// (workspace, waves), or the refusal.
pub(crate) fn check_pin(
    h: &LtHandle,
    p: &LtProblem,
    algo: &lt::cublasLtMatmulAlgo_t,
) -> std::result::Result<(usize, f32), String> {
    let mut res = empty_result();
    // SAFETY: descriptors alive; `res` is a valid out-parameter.
    let st = unsafe { lt::cublasLtMatmulAlgoCheck(h.0, p.desc.0, p.a.0, p.b.0, p.cd.0, p.cd.0, algo, &mut res) };
    if st != Lts::CUBLAS_STATUS_SUCCESS {
        return Err(format!("cublasLtMatmulAlgoCheck: {st:?}"));
    }
    if res.state != Lts::CUBLAS_STATUS_SUCCESS {
        return Err(format!("cublasLtMatmulAlgoCheck: result state {:?}", res.state));
    }
    if res.workspaceSize > WORKSPACE_BYTES {
        return Err(format!("needs {} workspace bytes", res.workspaceSize));
    }
    Ok((res.workspaceSize, res.wavesCount))
}

pub(crate) struct Env<'a> {
    pub(crate) lt: &'a LtHandle,
    pub(crate) blas: cb::cublasHandle_t,
    pub(crate) stream: &'a Arc<CudaStream>,
    pub(crate) lt_stream: lt::cudaStream_t,
    pub(crate) workspace: u64,
}

pub(crate) fn lt_matmul(env: &Env, p: &LtProblem, algo: &lt::cublasLtMatmulAlgo_t, ptr: &Ptrs) -> Result<()> {
    let (alpha, beta) = (1f32, 0f32);
    // SAFETY: descriptors alive; the device buffers were allocated for this
    // problem's (M, N, K) and types by the caller; alpha/beta are host f32
    // (pointer mode host, scale type 32F); C = D with beta 0.
    lt_ok(
        unsafe {
            lt::cublasLtMatmul(
                env.lt.0,
                p.desc.0,
                (&alpha as *const f32).cast(),
                ptr.w as usize as *const c_void,
                p.a.0,
                ptr.x as usize as *const c_void,
                p.b.0,
                (&beta as *const f32).cast(),
                ptr.y as usize as *const c_void,
                p.cd.0,
                ptr.y as usize as *mut c_void,
                p.cd.0,
                algo,
                env.workspace as usize as *mut c_void,
                WORKSPACE_BYTES,
                env.lt_stream,
            )
        },
        "cublasLtMatmul",
    )
}

pub(crate) fn classic(env: &Env, case: CaseId, shape: &Shape, m: usize, ptr: &Ptrs) -> Result<()> {
    let (alpha, beta) = (1f32, 0f32);
    let (n, mm, k) = (shape.n as c_int, m as c_int, shape.k as c_int);
    let (t, nn) = (cb::cublasOperation_t::CUBLAS_OP_T, cb::cublasOperation_t::CUBLAS_OP_N);
    match case {
        // SAFETY: device buffers sized for (M, N, K) f32 by the caller; host scalars.
        CaseId::Sgemm => cb_ok(
            unsafe {
                cb::cublasSgemm_v2(
                    env.blas,
                    t,
                    nn,
                    n,
                    mm,
                    k,
                    &alpha,
                    ptr.w as usize as *const f32,
                    k,
                    ptr.x as usize as *const f32,
                    k,
                    &beta,
                    ptr.y as usize as *mut f32,
                    n,
                )
            },
            "cublasSgemm",
        ),
        // SAFETY: device buffers sized for (M, N, K) bf16 by the caller; host
        // f32 scalars (compute type 32F).
        CaseId::GemmexBf16 => cb_ok(
            unsafe {
                cb::cublasGemmEx(
                    env.blas,
                    t,
                    nn,
                    n,
                    mm,
                    k,
                    (&alpha as *const f32).cast(),
                    ptr.w as usize as *const c_void,
                    cb::cudaDataType::CUDA_R_16BF,
                    k,
                    ptr.x as usize as *const c_void,
                    cb::cudaDataType::CUDA_R_16BF,
                    k,
                    (&beta as *const f32).cast(),
                    ptr.y as usize as *mut c_void,
                    cb::cudaDataType::CUDA_R_16BF,
                    n,
                    cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    cb::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
                )
            },
            "cublasGemmEx",
        ),
        other => Err(DeviceError::Refused(format!(
            "{} is not a classic cuBLAS case",
            other.name()
        ))),
    }
}

// ---------------------------------------------------------------------------
// Device pointers.
// ---------------------------------------------------------------------------

pub(crate) fn raw<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

pub(crate) fn raw_mut<T>(s: &mut CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _sync) = s.device_ptr_mut(stream);
    p
}
