//! The GPU side of the vendor probe (feature `cuda`): the suite driver.
//! Buffers and rows, timing, and the sweep over cases, shapes, M and
//! variants; the cuBLAS/cuBLASLt calls themselves are `blas.rs`.

use super::blas::*;

use super::*;
use crate::device::gpu::{driver_err, Gpu};
use cudarc::cublas::sys as cb;
use cudarc::cublaslt::sys as lt;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};
use std::ffi::c_void;
use std::sync::Arc;

// ---------------------------------------------------------------------------
// Buffers and rows.
// ---------------------------------------------------------------------------

fn upload<T: cudarc::driver::DeviceRepr>(stream: &Arc<CudaStream>, v: &[T], what: &str) -> Result<CudaSlice<T>> {
    stream.clone_htod(v).map_err(driver_err(what))
}

/// Writes 0xFF bytes (NaN in f32 and bf16) over the anchor output row, so a
/// GEMM that does not write it cannot pass for one that does.
fn sentinel(stream: &Arc<CudaStream>, y: &mut CudaSlice<u8>, off: usize, len: usize) -> Result<()> {
    stream
        .memcpy_htod(&vec![0xFFu8; len], &mut y.slice_mut(off..off + len))
        .map_err(driver_err("write sentinel row"))
}

fn fetch(stream: &Arc<CudaStream>, y: &CudaSlice<u8>, off: usize, len: usize) -> Result<Vec<u8>> {
    let mut host = vec![0u8; len];
    stream
        .memcpy_dtoh(&y.slice(off..off + len), &mut host)
        .map_err(driver_err("fetch anchor row"))?;
    stream.synchronize().map_err(driver_err("synchronize after GEMM"))?;
    Ok(host)
}

/// The status of a fetched row: failed if any element still holds the
/// sentinel.
fn row_status(row: &[u8], out: InType) -> RowStatus {
    let left = row.chunks(out.bytes()).filter(|c| c.iter().all(|&b| b == 0xFF)).count();
    if left == 0 {
        RowStatus::Ok
    } else {
        RowStatus::Failed(format!("{left} anchor outputs not written (sentinel left)"))
    }
}

/// Runs one GEMM (`launch`) with the sentinel in place and fetches the row.
/// A library error becomes a failed row (the sweep goes on); a driver
/// error ends the run.
fn run_row(
    stream: &Arc<CudaStream>,
    y: &mut CudaSlice<u8>,
    off: usize,
    len: usize,
    out: InType,
    launch: impl FnOnce() -> Result<()>,
) -> Result<(RowStatus, Option<Vec<u8>>)> {
    sentinel(stream, y, off, len)?;
    match launch() {
        Ok(()) => {
            let row = fetch(stream, y, off, len)?;
            let st = row_status(&row, out);
            let keep = (st == RowStatus::Ok).then_some(row);
            Ok((st, keep))
        }
        Err(e @ DeviceError::Library { .. }) => Ok((RowStatus::Failed(e.to_string()), None)),
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------
// Timing.
// ---------------------------------------------------------------------------

struct Timer {
    start: CudaEvent,
    stop: CudaEvent,
}

impl Timer {
    fn new(gpu: &Gpu) -> Result<Timer> {
        let ev = || {
            gpu.ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(driver_err("create timing event"))
        };
        Ok(Timer {
            start: ev()?,
            stop: ev()?,
        })
    }

    /// Microseconds per launch over `inner` back-to-back launches.
    fn sample(&self, stream: &Arc<CudaStream>, inner: usize, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        self.start.record(stream).map_err(driver_err("record start event"))?;
        for _ in 0..inner {
            f()?;
        }
        self.stop.record(stream).map_err(driver_err("record stop event"))?;
        let ms = self
            .start
            .elapsed_ms(&self.stop)
            .map_err(driver_err("event elapsed time"))?;
        Ok(ms as f64 * 1000.0 / inner as f64)
    }
}

fn untimed(m: usize, note: String) -> TimingEntry {
    TimingEntry {
        m,
        heuristic_us: None,
        pinned_us: None,
        pinned_speed: None,
        heuristic_samples_us: Vec::new(),
        pinned_samples_us: Vec::new(),
        note: Some(note),
    }
}

/// Times the heuristic and (if any) the pinned launch, interleaved sample by
/// sample so that clock drift hits both alike.
fn time_pair(
    timer: &Timer,
    stream: &Arc<CudaStream>,
    opts: &VendorOptions,
    m: usize,
    heur: Option<&mut dyn FnMut() -> Result<()>>,
    pinned: Option<&mut dyn FnMut() -> Result<()>>,
    note: Option<String>,
) -> Result<TimingEntry> {
    let (mut hs, mut ps) = (Vec::new(), Vec::new());
    let mut heur = heur;
    let mut pinned = pinned;
    for _ in 0..opts.warmup {
        if let Some(f) = heur.as_mut() {
            f()?;
        }
        if let Some(f) = pinned.as_mut() {
            f()?;
        }
    }
    stream.synchronize().map_err(driver_err("synchronize after warm-up"))?;
    for _ in 0..opts.timing_reps {
        if let Some(f) = heur.as_mut() {
            hs.push(timer.sample(stream, opts.timing_inner, *f)?);
        }
        if let Some(f) = pinned.as_mut() {
            ps.push(timer.sample(stream, opts.timing_inner, *f)?);
        }
    }
    let (h, p) = (median(&hs), median(&ps));
    Ok(TimingEntry {
        m,
        heuristic_us: h,
        pinned_us: p,
        pinned_speed: match (h, p) {
            (Some(h), Some(p)) if p > 0.0 => Some(h / p),
            _ => None,
        },
        heuristic_samples_us: hs,
        pinned_samples_us: ps,
        note,
    })
}

// ---------------------------------------------------------------------------
// The sweep.
// ---------------------------------------------------------------------------

struct CaseState {
    run: CaseRun,
    pin: Option<Pin>,
    reference: Vec<f64>,
}

fn math_mode_name(raw: u32) -> String {
    let base = match raw & 0xF {
        0 => "CUBLAS_DEFAULT_MATH",
        1 => "CUBLAS_TENSOR_OP_MATH",
        2 => "CUBLAS_PEDANTIC_MATH",
        3 => "CUBLAS_TF32_TENSOR_OP_MATH",
        4 => "CUBLAS_FP32_EMULATED_BF16X9_MATH",
        8 => "CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH",
        _ => "unknown",
    };
    if raw & 16 != 0 {
        format!("{base} | DISALLOW_REDUCED_PRECISION_REDUCTION ({raw})")
    } else {
        format!("{base} ({raw})")
    }
}

/// Runs the whole probe on `gpu`: anchor rows for every case, shape, M and
/// position (heuristic and pinned), the heuristic's choices, the pins'
/// checks, timings, and a reference check per case.
pub fn run(gpu: &Gpu, opts: &VendorOptions) -> Result<VendorRun> {
    opts.validate()?;
    let stream = &gpu.stream;
    let lt_handle = LtHandle::new()?;
    let blas = cudarc::cublas::CudaBlas::new(stream.clone()).map_err(|e| DeviceError::Library {
        library: "cuBLAS",
        what: format!("create handle: {e:?}"),
    })?;
    let bh = *blas.handle();
    let mut ws_lt: CudaSlice<u8> = stream
        .alloc_zeros(WORKSPACE_BYTES)
        .map_err(driver_err("allocate cuBLASLt workspace"))?;
    let mut ws_cb: CudaSlice<u8> = stream
        .alloc_zeros(WORKSPACE_BYTES)
        .map_err(driver_err("allocate cuBLAS workspace"))?;
    let ws_cb_ptr = raw_mut(&mut ws_cb, stream);
    // SAFETY: the handle is alive; the buffer outlives it (dropped after `blas`
    // below) and is 256-byte aligned (driver allocation).
    cb_ok(
        unsafe { cb::cublasSetWorkspace_v2(bh, ws_cb_ptr as usize as *mut c_void, WORKSPACE_BYTES) },
        "cublasSetWorkspace",
    )?;
    let mut math_raw: u32 = 0;
    // SAFETY: the handle is alive; the mode is written as a 32-bit integer
    // (read as u32 so flag combinations are not forced into the enum).
    cb_ok(
        unsafe { cb::cublasGetMathMode(bh, (&mut math_raw as *mut u32).cast()) },
        "cublasGetMathMode",
    )?;
    let math_mode = math_mode_name(math_raw);
    let env = Env {
        lt: &lt_handle,
        blas: bh,
        stream,
        lt_stream: stream.cu_stream() as lt::cudaStream_t,
        workspace: raw_mut(&mut ws_lt, stream),
    };
    let pref = Pref::new(WORKSPACE_BYTES)?;
    let timer = Timer::new(gpu)?;
    let mut store = RowStore::default();
    let mut rows: Vec<RowEntry> = Vec::new();
    let mut runs: Vec<CaseRun> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let t0 = std::time::Instant::now();

    for shape in &opts.shapes {
        for family in [InType::F32, InType::Bf16, InType::E4M3] {
            let cases: Vec<CaseId> = opts.cases.iter().copied().filter(|c| c.input() == family).collect();
            if cases.is_empty() {
                continue;
            }
            eprintln!(
                "vendor: {} {:?} inputs ({:.1} s)",
                shape.name,
                family,
                t0.elapsed().as_secs_f64()
            );
            sweep_family(
                gpu, &env, &pref, &timer, opts, shape, family, &cases, &math_mode, &mut store, &mut rows, &mut runs,
            )?;
        }
    }
    drop(blas);
    drop(ws_cb);

    for r in &runs {
        if let Some(c) = &r.reference_check {
            if !c.plausible {
                notes.push(format!(
                    "{} {}: anchor row is {:.2e} (relative) from the f64 reference, above {:.0e}: layout, scale or transpose suspect",
                    r.case.name(),
                    r.shape,
                    c.rel,
                    c.tolerance
                ));
            }
        }
        if r.heuristic.iter().any(|h| !h.same_at_all_positions) {
            notes.push(format!(
                "{} {}: the heuristic chose differently at different positions of the same M",
                r.case.name(),
                r.shape
            ));
        }
    }
    let failed = rows.iter().filter(|r| matches!(r.status, RowStatus::Failed(_))).count();
    if failed > 0 {
        notes.push(format!("{failed} anchor rows failed (see rows[].status)"));
    }
    notes.push(format!("GPU sweep took {:.1} s", t0.elapsed().as_secs_f64()));
    let tables = derive_tables(&rows, &store.data, &opts.shapes)?;
    Ok(VendorRun {
        report: VendorReport {
            schema: SCHEMA,
            options: opts.clone(),
            generator: GENERATOR.into(),
            workspace_bytes: WORKSPACE_BYTES,
            tensor_scales: (TENSOR_SCALE_W, TENSOR_SCALE_X),
            environment: environment(),
            runs,
            rows,
            tables,
            notes,
        },
        rows_bin: store.data,
    })
}

/// All cases of one input type at one shape: the weights are uploaded
/// once, each M's neighbours once, and the anchor row is written into (and
/// restored out of) one row per position.
#[allow(clippy::too_many_arguments)]
fn sweep_family(
    gpu: &Gpu,
    env: &Env,
    pref: &Pref,
    timer: &Timer,
    opts: &VendorOptions,
    shape: &Shape,
    family: InType,
    cases: &[CaseId],
    math_mode: &str,
    store: &mut RowStore,
    rows: &mut Vec<RowEntry>,
    runs: &mut Vec<CaseRun>,
) -> Result<()> {
    let sweep = FamilySweep::upload(env, pref, timer, opts, shape, family, cases)?;
    let mut states = sweep.case_states(cases, math_mode)?;
    let mut sink = RowSink { store, rows, shape };
    for &m in &opts.m_list {
        let mut buffers = sweep.m_buffers(m)?;
        for (pi, pos) in positions(m, opts.all_positions).iter().enumerate() {
            sweep.anchor_rows(&mut buffers, pi == 0, pos, &mut states, &mut sink)?;
        }
        if opts.timing_m.contains(&m) {
            sweep.time_cases(&buffers, &mut states)?;
        }
        gpu.sync()?;
    }
    for st in states {
        let mut run = st.run;
        run.pin = st.pin.map(|p| p.report);
        runs.push(run);
    }
    Ok(())
}

/// What every case of one input type at one shape shares: the run's
/// handles and options, the weights and scale buffers on the device (kept
/// alive as long as the pointers in `base` are used), the anchor row and
/// its scales.
struct FamilySweep<'a> {
    env: &'a Env<'a>,
    pref: &'a Pref,
    timer: &'a Timer,
    opts: &'a VendorOptions,
    shape: &'a Shape,
    family: InType,
    stream: &'a Arc<CudaStream>,
    _d_w: CudaSlice<u8>,
    d_tsw: CudaSlice<f32>,
    d_tsx: CudaSlice<f32>,
    d_wblk: Option<CudaSlice<f32>>,
    anchor_host: Vec<u8>,
    a_scales: Vec<f32>,
    /// K blocks of 128 (scale entries per row).
    l: usize,
    /// The weights' pointer; the other pointers are set per launch.
    base: Ptrs,
}

/// One M's buffers: the neighbour rows on the host and the device, the
/// output, and the neighbours' activation scales (e4m3 inputs).
struct MBuffers {
    m: usize,
    x_host: Vec<u8>,
    d_x: CudaSlice<u8>,
    d_y: CudaSlice<u8>,
    x_ptr: u64,
    y_ptr: u64,
    n_scales: Vec<f32>,
}

/// One anchor row's place: its M, whether its position is the first of
/// this M (where the heuristic's choice and the pin's check are recorded),
/// the position, and the row's bytes in the output buffer.
struct RowAt<'p> {
    m: usize,
    first: bool,
    pos: &'p Position,
    off: usize,
    len: usize,
}

/// Where anchor rows go: the deduplicated row bytes and one entry per row.
struct RowSink<'s> {
    store: &'s mut RowStore,
    rows: &'s mut Vec<RowEntry>,
    shape: &'s Shape,
}

impl RowSink<'_> {
    fn push(&mut self, case: CaseId, variant: Variant, at: &RowAt, status: RowStatus, row: Option<&[u8]>) {
        let entry = self.store.entry(case, self.shape, variant, at.m, at.pos, status, row);
        self.rows.push(entry);
    }
}

impl<'a> FamilySweep<'a> {
    /// Uploads the weights and the scale buffers (separate allocations, so
    /// every pointer is 256-byte aligned).
    fn upload(
        env: &'a Env<'a>,
        pref: &'a Pref,
        timer: &'a Timer,
        opts: &'a VendorOptions,
        shape: &'a Shape,
        family: InType,
        cases: &[CaseId],
    ) -> Result<FamilySweep<'a>> {
        let stream = env.stream;
        let seed = opts.seed;
        let d_w = upload(stream, &weights(family, shape, seed), "upload weights")?;
        let anchor_host = anchor(family, shape, seed);
        let needs_blk = cases.iter().any(|c| c.scaling() == Scaling::Vec128Blk128);
        let d_tsw = upload(stream, &[TENSOR_SCALE_W], "upload tensor scale")?;
        let d_tsx = upload(stream, &[TENSOR_SCALE_X], "upload tensor scale")?;
        let d_wblk = if needs_blk {
            Some(upload(
                stream,
                &blk128_layout(&weight_block_scales(shape, seed), shape),
                "upload weight block scales",
            )?)
        } else {
            None
        };
        let base = Ptrs {
            w: raw(&d_w, stream),
            ..Ptrs::default()
        };
        Ok(FamilySweep {
            env,
            pref,
            timer,
            opts,
            shape,
            family,
            stream,
            _d_w: d_w,
            d_tsw,
            d_tsx,
            d_wblk,
            anchor_host,
            a_scales: anchor_scales(shape, seed),
            l: shape.k_blocks(),
            base,
        })
    }

    /// The (weight, activation) scale pointers of `case`, with the
    /// activation scales `act_scales` (block-scaled cases).
    fn scale_ptrs(&self, case: CaseId, act_scales: Option<&CudaSlice<f32>>) -> (u64, u64) {
        let stream = self.stream;
        match case.scaling() {
            Scaling::None => (0, 0),
            Scaling::Tensor => (raw(&self.d_tsw, stream), raw(&self.d_tsx, stream)),
            Scaling::Vec128Blk128 => (
                self.d_wblk.as_ref().map(|b| raw(b, stream)).unwrap_or(0),
                act_scales.map(|b| raw(b, stream)).unwrap_or(0),
            ),
        }
    }

    /// Every pointer of one launch of `case` on `b`'s buffers.
    fn launch_ptrs(&self, case: CaseId, b: &MBuffers, act_scales: Option<&CudaSlice<f32>>) -> Ptrs {
        let (sa, sb) = self.scale_ptrs(case, act_scales);
        Ptrs {
            x: b.x_ptr,
            y: b.y_ptr,
            scale_a: sa,
            scale_b: sb,
            ..self.base
        }
    }

    /// Each case's state, with its pinned algorithm (or why there is none).
    fn case_states(&self, cases: &[CaseId], math_mode: &str) -> Result<Vec<CaseState>> {
        let (shape, seed) = (self.shape, self.opts.seed);
        let mut states: Vec<CaseState> = Vec::new();
        for &case in cases {
            let mut st = CaseState {
                run: CaseRun {
                    case,
                    shape: shape.name.clone(),
                    api: case.api(),
                    input: case.input(),
                    output: case.output(),
                    scaling: case.scaling(),
                    math_mode: (case.api() == Api::Cublas).then(|| math_mode.to_string()),
                    heuristic: Vec::new(),
                    pin: None,
                    pin_error: None,
                    timings: Vec::new(),
                    reference_check: None,
                },
                pin: None,
                reference: reference_row(case, shape, seed),
            };
            if case.pinnable() {
                self.pin(&mut st)?;
            }
            states.push(st);
        }
        Ok(states)
    }

    /// Builds the pin of a pinnable case at `pin_m`.
    fn pin(&self, st: &mut CaseState) -> Result<()> {
        let (case, pin_m) = (st.run.case, self.opts.pin_m);
        // Activation scales for the pin's problem at pin_m (zeros: the
        // heuristic looks at the descriptors, not at the values).
        let dummy = if case.scaling() == Scaling::Vec128Blk128 {
            Some(
                self.stream
                    .alloc_zeros::<f32>(self.l * pin_m)
                    .map_err(driver_err("allocate pin scales"))?,
            )
        } else {
            None
        };
        let (sa, sb) = self.scale_ptrs(case, dummy.as_ref());
        let ptrs = Ptrs {
            scale_a: sa,
            scale_b: sb,
            ..self.base
        };
        let pin = soft(lt_problem(case, self.shape, pin_m, &ptrs))?
            .and_then(|prob| build_pin(self.env.lt, case, pin_m, &prob, self.pref));
        match pin {
            Ok(p) => st.pin = Some(p),
            Err(e) => {
                eprintln!("vendor: {} {}: no pinned algorithm: {e}", case.name(), self.shape.name);
                st.run.pin_error = Some(e);
            }
        }
        Ok(())
    }

    /// Uploads M's neighbour rows and allocates its output.
    fn m_buffers(&self, m: usize) -> Result<MBuffers> {
        let (stream, shape, seed) = (self.stream, self.shape, self.opts.seed);
        let x_host = neighbours(self.family, shape, m, seed);
        let mut d_x = upload(stream, &x_host, "upload activations")?;
        let x_ptr = raw_mut(&mut d_x, stream);
        let mut d_y: CudaSlice<u8> = stream
            .alloc_zeros(m * shape.n * 4)
            .map_err(driver_err("allocate output"))?;
        let y_ptr = raw_mut(&mut d_y, stream);
        let n_scales = if self.family == InType::E4M3 {
            neighbour_scales(shape, m, seed)
        } else {
            Vec::new()
        };
        Ok(MBuffers {
            m,
            x_host,
            d_x,
            d_y,
            x_ptr,
            y_ptr,
            n_scales,
        })
    }

    /// The anchor row at `pos` for every case: written into the
    /// neighbours, run (heuristic, and pinned for cuBLASLt), restored.
    fn anchor_rows(
        &self,
        b: &mut MBuffers,
        first: bool,
        pos: &Position,
        states: &mut [CaseState],
        sink: &mut RowSink,
    ) -> Result<()> {
        let (stream, m, l) = (self.stream, b.m, self.l);
        let (k, es) = (self.shape.k, self.family.bytes());
        let xr = pos.row * k * es..(pos.row + 1) * k * es;
        stream
            .memcpy_htod(&self.anchor_host, &mut b.d_x.slice_mut(xr.clone()))
            .map_err(driver_err("write anchor row"))?;
        let d_xs = if self.family == InType::E4M3 {
            let mut s = b.n_scales.clone();
            s[pos.row * l..(pos.row + 1) * l].copy_from_slice(&self.a_scales);
            Some(upload(
                stream,
                &vec128_layout(&s, m, self.shape),
                "upload activation scales",
            )?)
        } else {
            None
        };
        for st in states.iter_mut() {
            let case = st.run.case;
            let out = case.output();
            let n = self.shape.n;
            let at = RowAt {
                m,
                first,
                pos,
                off: pos.row * n * out.bytes(),
                len: n * out.bytes(),
            };
            let ptrs = self.launch_ptrs(case, b, d_xs.as_ref());
            match case.api() {
                Api::Cublas => {
                    let (status, row) = run_row(stream, &mut b.d_y, at.off, at.len, out, || {
                        classic(self.env, case, self.shape, m, &ptrs)
                    })?;
                    note_reference(st, m, row.as_deref());
                    sink.push(case, Variant::Heuristic, &at, status, row.as_deref());
                }
                Api::CublasLt => self.lt_rows(st, &at, &ptrs, &mut b.d_y, sink)?,
            }
        }
        stream
            .memcpy_htod(&b.x_host[xr.clone()], &mut b.d_x.slice_mut(xr))
            .map_err(driver_err("restore neighbour row"))?;
        Ok(())
    }

    /// A cuBLASLt case's two rows at `at`: the heuristic's own choice and
    /// the pinned algorithm (or a refusal: never another one).
    fn lt_rows(
        &self,
        st: &mut CaseState,
        at: &RowAt,
        ptrs: &Ptrs,
        d_y: &mut CudaSlice<u8>,
        sink: &mut RowSink,
    ) -> Result<()> {
        let (case, m) = (st.run.case, at.m);
        let prob = match soft(lt_problem(case, self.shape, m, ptrs))? {
            Ok(p) => p,
            Err(e) => {
                if at.first {
                    st.run.heuristic.push(HeuristicPick {
                        m,
                        status: format!("descriptors: {e}"),
                        config: None,
                        workspace_bytes: None,
                        waves_count: None,
                        same_at_all_positions: true,
                    });
                }
                for (variant, status) in [
                    (Variant::Heuristic, RowStatus::Unsupported(e.clone())),
                    (Variant::Pinned, RowStatus::Refused(e.clone())),
                ] {
                    sink.push(case, variant, at, status, None);
                }
                return Ok(());
            }
        };
        self.heuristic_row(st, at, ptrs, &prob, d_y, sink)?;
        let (status, row) = self.pinned_row(st, at, ptrs, &prob, d_y)?;
        note_reference(st, m, row.as_deref());
        sink.push(case, Variant::Pinned, at, status, row.as_deref());
        Ok(())
    }

    /// The heuristic's own choice at this M: recorded (at the first
    /// position; later positions only say whether it chose the same), run.
    fn heuristic_row(
        &self,
        st: &mut CaseState,
        at: &RowAt,
        ptrs: &Ptrs,
        prob: &LtProblem,
        d_y: &mut CudaSlice<u8>,
        sink: &mut RowSink,
    ) -> Result<()> {
        let (case, m, out) = (st.run.case, at.m, st.run.case.output());
        match heuristic(self.env.lt, prob, self.pref) {
            Ok(choice) => {
                let (config, status) = match soft(read_config(&choice.algo))? {
                    Ok(c) => (Some(c), "ok".to_string()),
                    Err(e) => (None, format!("ok; config not readable: {e}")),
                };
                if at.first {
                    st.run.heuristic.push(HeuristicPick {
                        m,
                        status,
                        config: config.clone(),
                        workspace_bytes: Some(choice.workspace as u64),
                        waves_count: Some(choice.waves),
                        same_at_all_positions: true,
                    });
                } else if let Some(h) = st.run.heuristic.last_mut() {
                    if h.config != config && !matches!((&h.config, &config), (Some(a), Some(b)) if a.same_config(b)) {
                        h.same_at_all_positions = false;
                    }
                }
                let (status, row) = run_row(self.stream, d_y, at.off, at.len, out, || {
                    lt_matmul(self.env, prob, &choice.algo, ptrs)
                })?;
                note_reference(st, m, row.as_deref());
                sink.push(case, Variant::Heuristic, at, status, row.as_deref());
            }
            Err(e) => {
                if at.first {
                    st.run.heuristic.push(HeuristicPick {
                        m,
                        status: e.clone(),
                        config: None,
                        workspace_bytes: None,
                        waves_count: None,
                        same_at_all_positions: true,
                    });
                }
                sink.push(case, Variant::Heuristic, at, RowStatus::Unsupported(e), None);
            }
        }
        Ok(())
    }

    /// The pinned algorithm's row (checked against this M's problem first;
    /// the check is recorded at the first position), or a refusal.
    fn pinned_row(
        &self,
        st: &mut CaseState,
        at: &RowAt,
        ptrs: &Ptrs,
        prob: &LtProblem,
        d_y: &mut CudaSlice<u8>,
    ) -> Result<(RowStatus, Option<Vec<u8>>)> {
        let out = st.run.case.output();
        Ok(match &mut st.pin {
            None => (
                RowStatus::Refused(format!(
                    "no pinned algorithm: {}",
                    st.run.pin_error.as_deref().unwrap_or("?")
                )),
                None,
            ),
            Some(pin) => {
                let check = check_pin(self.env.lt, prob, &pin.algo);
                if at.first {
                    pin.report.checks.push(PinCheck {
                        m: at.m,
                        status: check.as_ref().map(|_| "ok".to_string()).unwrap_or_else(|e| e.clone()),
                        workspace_bytes: check.as_ref().ok().map(|c| c.0 as u64),
                        waves_count: check.as_ref().ok().map(|c| c.1),
                    });
                }
                match check {
                    Ok(_) => {
                        let algo = pin.algo;
                        run_row(self.stream, d_y, at.off, at.len, out, || {
                            lt_matmul(self.env, prob, &algo, ptrs)
                        })?
                    }
                    Err(e) => (RowStatus::Refused(e), None),
                }
            }
        })
    }

    /// Times every case at M (the neighbours as uploaded, no anchor row).
    fn time_cases(&self, b: &MBuffers, states: &mut [CaseState]) -> Result<()> {
        let d_xs = if self.family == InType::E4M3 {
            Some(upload(
                self.stream,
                &vec128_layout(&b.n_scales, b.m, self.shape),
                "upload activation scales",
            )?)
        } else {
            None
        };
        for st in states.iter_mut() {
            let ptrs = self.launch_ptrs(st.run.case, b, d_xs.as_ref());
            self.time_case(st, b.m, &ptrs)?;
        }
        Ok(())
    }

    /// One case's timing entry at M (heuristic and pinned side by side for
    /// cuBLASLt), or why it was not timed.
    fn time_case(&self, st: &mut CaseState, m: usize, ptrs: &Ptrs) -> Result<()> {
        let (env, case) = (self.env, st.run.case);
        let (timer, stream, opts) = (self.timer, self.stream, self.opts);
        let timed = match case.api() {
            Api::Cublas => {
                let mut h = || classic(env, case, self.shape, m, ptrs);
                soft(time_pair(timer, stream, opts, m, Some(&mut h), None, None))?
            }
            Api::CublasLt => {
                let prob = match soft(lt_problem(case, self.shape, m, ptrs))? {
                    Ok(p) => p,
                    Err(e) => {
                        st.run.timings.push(untimed(m, format!("descriptors: {e}")));
                        return Ok(());
                    }
                };
                let choice = heuristic(env.lt, &prob, self.pref);
                let pinned = st
                    .pin
                    .as_ref()
                    .map(|p| p.algo)
                    .filter(|a| check_pin(env.lt, &prob, a).is_ok());
                let mut note = Vec::new();
                if let Err(e) = &choice {
                    note.push(format!("heuristic: {e}"));
                }
                if pinned.is_none() {
                    note.push("pinned: refused or none".to_string());
                }
                let pr = &prob;
                let mut hc = choice.as_ref().ok().map(|c| move || lt_matmul(env, pr, &c.algo, ptrs));
                let mut pc = pinned.map(|a| move || lt_matmul(env, pr, &a, ptrs));
                soft(time_pair(
                    timer,
                    stream,
                    opts,
                    m,
                    hc.as_mut().map(|f| f as &mut dyn FnMut() -> Result<()>),
                    pc.as_mut().map(|f| f as &mut dyn FnMut() -> Result<()>),
                    (!note.is_empty()).then(|| note.join("; ")),
                ))?
            }
        };
        st.run
            .timings
            .push(timed.unwrap_or_else(|e| untimed(m, format!("timing failed: {e}"))));
        Ok(())
    }
}

/// Every anchor row that ran is compared with the f64 reference; the worst
/// comparison is kept (so a scale layout that is wrong only at some M
/// still shows).
fn note_reference(st: &mut CaseState, m: usize, row: Option<&[u8]>) {
    if let Some(r) = row {
        let c = check_reference(st.run.case, m, r, &st.reference);
        if st.run.reference_check.as_ref().is_none_or(|w| c.rel > w.rel) {
            st.run.reference_check = Some(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_rows_are_failed() {
        let ok = [0u8, 0, 128, 63, 0xFF, 0xFF, 0xFF, 0x7F];
        assert_eq!(row_status(&ok, InType::F32), RowStatus::Ok);
        let left = [0u8, 0, 0xFF, 0xFF];
        assert!(matches!(row_status(&left, InType::Bf16), RowStatus::Failed(_)));
        assert_eq!(row_status(&left, InType::F32), RowStatus::Ok);
    }

    #[test]
    fn math_modes() {
        assert_eq!(math_mode_name(0), "CUBLAS_DEFAULT_MATH (0)");
        assert!(math_mode_name(16 | 3).contains("TF32") && math_mode_name(19).contains("DISALLOW"));
    }
}
