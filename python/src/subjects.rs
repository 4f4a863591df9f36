//! Subjects: a Python callable as a subject (the GIL taken per call, a KeyboardInterrupt ending the run) and spec strings through the library's one factory (`mxbi::subjects`).

use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::order::InType;
use mxbi::subject::spec::RunnerOptions;
use mxbi::subject::{Knobs, Subject, SubjectError};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::sync::{Arc, Mutex};

use crate::args::err;
/// A Python callable as a subject: `fn(a, b) -> out` with a `[M, K]` and
/// b `[K, N]` float32 arrays and out a float32 `[M, N]` array (the Python
/// half widens narrower outputs exactly before they get here). The whole
/// batch is computed and the requested rows are selected.
pub(crate) struct PySubject {
    pub(crate) func: Py<PyAny>,
    pub(crate) name: String,
    /// A `BaseException` that is not an `Exception` (KeyboardInterrupt,
    /// SystemExit): every later call fails at once and the check re-raises it.
    pub(crate) abort: Arc<Mutex<Option<PyErr>>>,
    /// The arrays `a` and `b` of the last call, refilled for the next call
    /// when nothing but this slot holds them (see [`reuse_or_new`]).
    pub(crate) inputs: Mutex<[Option<Py<PyArray2<f32>>>; 2]>,
    /// The callable's `_mxbi_input_buffer(which, shape)`, if it has one
    /// (`mxbi.torch.on_device`): where to write operand "a" or "b" before
    /// the call (a float32 array of that shape, e.g. a pinned upload
    /// buffer, free until the call), or None for an array of our own.
    pub(crate) input_buffer: Option<Py<PyAny>>,
    /// Held from writing into the callable's buffers until its call
    /// returns (a concurrent call uses arrays of its own).
    pub(crate) buffer_busy: Mutex<()>,
}

/// Arrays a finished Python subject leaves for the next one (a reveal or
/// check builds a new subject per call; a 64 MiB B mapped afresh costs its
/// pages again, see [`reuse_or_new`]); kept only while together at most
/// [`KEPT_BYTES`].
static LEFT_ARRAYS: Mutex<[Option<Py<PyArray2<f32>>>; 2]> = Mutex::new([None, None]);

/// Most bytes of arrays kept in [`LEFT_ARRAYS`] (the reveal's launch
/// buffers keep as much).
const KEPT_BYTES: usize = 256 << 20;

/// Elements copied per task when an input is copied into the callable's
/// array (a fixed size: the bytes do not depend on the thread count).
const COPY_CHUNK: usize = 1 << 16;

/// `src` into `dst` (same length), in parallel chunks from 16 MiB (below
/// that, waking the threads costs more than it saves, launch after launch).
fn copy_in(dst: &mut [f32], src: &[f32]) {
    use rayon::prelude::*;
    if src.len() < 64 * COPY_CHUNK {
        dst.copy_from_slice(src);
    } else {
        dst.par_chunks_mut(COPY_CHUNK)
            .zip(src.par_chunks(COPY_CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s));
    }
}

/// `data` as a `shape` float32 array for the callable: the slot's array,
/// overwritten, when it has that shape, is writeable and only the slot
/// refers to it (reference count 1: no view, no reference kept by the
/// callable or anyone else can see the new values); else a new array,
/// which the slot then keeps. A large new array costs its pages: the
/// kernel zeroes each on first touch (a 64 MiB B, K = N = 4096, is most of
/// a probe launch's host time), while a reused one is already mapped; a
/// new one is zero-filled lazily (numpy's `calloc`) and written in
/// parallel, so its pages are touched by several threads.
fn reuse_or_new<'py>(
    py: Python<'py>,
    slot: &mut Option<Py<PyArray2<f32>>>,
    data: &[f32],
    shape: [usize; 2],
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    if let Some(held) = slot.as_ref() {
        let arr = held.bind(py);
        // SAFETY: a reference count read of a live object, the GIL held
        let only_slot = unsafe { pyo3::ffi::Py_REFCNT(held.as_ptr()) } == 1;
        if only_slot && arr.shape() == shape {
            if let Ok(mut rw) = arr.try_readwrite() {
                if let Ok(dst) = rw.as_slice_mut() {
                    copy_in(dst, data);
                    drop(rw);
                    return Ok(arr.clone());
                }
            }
        }
    }
    let arr = PyArray2::<f32>::zeros(py, shape, false);
    {
        let mut rw = arr.try_readwrite().map_err(|e| PyException::new_err(e.to_string()))?;
        let dst = rw.as_slice_mut().map_err(|e| PyException::new_err(e.to_string()))?;
        copy_in(dst, data);
    }
    *slot = Some(arr.clone().unbind());
    Ok(arr)
}

/// `data` written into the array the callable's `_mxbi_input_buffer`
/// gives for operand `which` of `shape`; None when it gives None. Anything
/// but a writable, contiguous float32 array of that shape is an error.
fn into_callers_buffer<'py>(
    py: Python<'py>,
    hook: &Py<PyAny>,
    which: &str,
    data: &[f32],
    shape: [usize; 2],
) -> PyResult<Option<Bound<'py, PyArray2<f32>>>> {
    let got = hook.bind(py).call1((which, (shape[0], shape[1])))?;
    if got.is_none() {
        return Ok(None);
    }
    let wrong = |why: &str| {
        PyException::new_err(format!(
            "_mxbi_input_buffer({which:?}, {shape:?}) {why}: expected a writable C-contiguous float32 array of that shape or None"
        ))
    };
    let arr = got
        .cast_into::<PyArray2<f32>>()
        .map_err(|_| wrong("returned something else"))?;
    if arr.shape() != shape {
        return Err(wrong("returned another shape"));
    }
    if !arr.is_c_contiguous() {
        return Err(wrong("returned a non-contiguous array"));
    }
    {
        let mut rw = arr
            .try_readwrite()
            .map_err(|_| wrong("returned an array that is not writable"))?;
        let dst = rw
            .as_slice_mut()
            .map_err(|_| wrong("returned a non-contiguous array"))?;
        copy_in(dst, data);
    }
    Ok(Some(arr))
}

impl Drop for PySubject {
    /// Leaves the arrays of the last call for the next subject, when small
    /// enough to keep (else they are freed with the subject).
    fn drop(&mut self) {
        let Ok(mine) = self.inputs.get_mut() else { return };
        let bytes: usize = Python::attach(|py| {
            mine.iter()
                .flatten()
                .map(|a| a.bind(py).len() * std::mem::size_of::<f32>())
                .sum()
        });
        if bytes <= KEPT_BYTES {
            if let Ok(mut left) = LEFT_ARRAYS.lock() {
                *left = std::mem::take(mine);
            }
        }
    }
}

impl PySubject {
    /// Stops the checker at once (it re-raises the exception afterwards).
    fn broken(&self) -> SubjectError {
        SubjectError::Broken {
            subject: self.name.clone(),
            why: "interrupted".into(),
        }
    }

    fn failed(&self, why: impl Into<String>) -> SubjectError {
        SubjectError::Failed {
            subject: self.name.clone(),
            why: why.into(),
        }
    }
}

impl Subject for PySubject {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let (Matrix::F32(a), Matrix::F32(b)) = (p.a, p.b) else {
            return Err(SubjectError::Unsupported {
                subject: self.name.clone(),
                why: "MX inputs: a Python subject takes float32 arrays".into(),
            });
        };
        if self.abort.lock().map(|g| g.is_some()).unwrap_or(true) {
            return Err(self.broken());
        }
        let (m, n, k) = (p.m, p.n, p.k);
        let b_kn: std::borrow::Cow<[f32]> = match p.b_layout {
            BLayout::Kn => b.into(),
            BLayout::Nk => (0..k * n).map(|i| b[(i % n) * k + i / n]).collect::<Vec<_>>().into(),
        };
        let out = Python::attach(|py| -> Result<Vec<f32>, SubjectError> {
            let call = || -> PyResult<Bound<'_, PyAny>> {
                // the callable's own buffers, held until its call returns
                let hook = match (&self.input_buffer, self.buffer_busy.try_lock()) {
                    (Some(h), Ok(busy)) => Some((h, busy)),
                    _ => None,
                };
                // another call filling the slots: arrays of its own
                let mut slots = self.inputs.try_lock().ok();
                let mut operand = |which: &str, i: usize, data: &[f32], shape: [usize; 2]| {
                    if let Some((h, _)) = &hook {
                        if let Some(arr) = into_callers_buffer(py, h, which, data, shape)? {
                            return Ok(arr);
                        }
                    }
                    match slots.as_deref_mut() {
                        Some(slot) => reuse_or_new(py, &mut slot[i], data, shape),
                        None => PyArray1::from_slice(py, data).reshape(shape),
                    }
                };
                let a = operand("a", 0, a, [m, k])?;
                let b = operand("b", 1, &b_kn, [k, n])?;
                drop(slots);
                self.func.bind(py).call1((a, b))
            };
            let out = match call() {
                Ok(o) => o,
                Err(e) => {
                    if !e.is_instance_of::<PyException>(py) {
                        if let Ok(mut g) = self.abort.lock() {
                            *g = Some(e);
                        }
                        return Err(self.broken());
                    }
                    return Err(self.failed(mxbi::message::one_line(&e.to_string())));
                }
            };
            let arr = out.extract::<PyReadonlyArrayDyn<'_, f32>>().map_err(|_| {
                let ty = out
                    .get_type()
                    .name()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|_| "?".into());
                self.failed(format!("returned {ty}, expected a float32 array of shape ({m}, {n})"))
            })?;
            if arr.shape() != [m, n] {
                let got: Vec<String> = arr.shape().iter().map(|d| d.to_string()).collect();
                return Err(self.failed(format!(
                    "returned shape ({}), expected ({m}, {n}): one row per row of a, N = {n} columns",
                    got.join(", ")
                )));
            }
            Ok(match arr.as_slice() {
                Ok(s) => s.to_vec(),
                Err(_) => arr.as_array().iter().copied().collect(),
            })
        })?;
        match rows {
            None => Ok(out),
            Some(sel) => {
                let mut v = Vec::with_capacity(sel.len() * n);
                for &r in sel {
                    if r >= m {
                        return Err(SubjectError::Unsupported {
                            subject: self.name.clone(),
                            why: format!("row {r} is out of range (M = {m})"),
                        });
                    }
                    v.extend_from_slice(&out[r * n..(r + 1) * n]);
                }
                Ok(v)
            }
        }
    }
}

pub(crate) struct Parsed {
    pub(crate) subject: Box<dyn Subject>,
    pub(crate) input: Option<InType>,
    pub(crate) boundaries: Vec<usize>,
    /// A Python subject's abort slot (see [`PySubject`]).
    pub(crate) abort: Option<Arc<Mutex<Option<PyErr>>>>,
}

/// What runner subjects (`exec:`, `dump:`) take from the call (the CLI's
/// `--input`, `--timeout`).
#[derive(Clone, Copy, Default)]
pub(crate) struct RunnerCtx {
    pub(crate) input: Option<InType>,
    /// Seconds (None: the default, 120).
    pub(crate) timeout: Option<f64>,
}

/// A subject spec string, as the CLI's `--subject`: the library's one
/// factory (`mxbi::subjects`: model:, dispatch:, op:, exec:, dump: and
/// the GPU kinds, which need a build with feature `cuda` and say so
/// otherwise), with `exec:`/`dump:` taking the call's runner options as
/// `mxbi bi run` does; the CLI's messages.
pub(crate) fn subject_from_spec(spec: &str, ctx: RunnerCtx) -> PyResult<Parsed> {
    let runner = RunnerOptions {
        input: ctx.input,
        timeout: ctx
            .timeout
            .map(|t| mxbi::subject::spec::timeout_secs(t, "timeout"))
            .transpose()
            .map_err(err)?,
        input_flag: "input",
        ..RunnerOptions::default()
    };
    let p = mxbi::subjects::parse(spec, &Knobs::default(), &runner).map_err(err)?;
    Ok(Parsed {
        subject: p.subject,
        input: p.input,
        boundaries: p.boundaries,
        abort: None,
    })
}

/// A subject: a spec string (see [`subject_from_spec`]) or a callable,
/// named `name`.
pub(crate) fn subject(spec: &Bound<'_, PyAny>, name: Option<String>, ctx: RunnerCtx) -> PyResult<Parsed> {
    if let Ok(s) = spec.cast::<PyString>() {
        let spec: String = s.extract()?;
        return subject_from_spec(&spec, ctx);
    }
    if !spec.is_callable() {
        let ty = spec.get_type().name()?.to_string();
        return Err(err(format!(
            "subject: expected a callable fn(a, b) -> out or a spec string (model:ORDER or dispatch:FILE), got {ty}"
        )));
    }
    let name = match name {
        Some(n) => n,
        None => format!(
            "python:{}",
            spec.getattr("__qualname__")
                .map(|q| q.to_string())
                .unwrap_or_else(|_| "fn".into())
        ),
    };
    let abort = Arc::new(Mutex::new(None));
    let s = PySubject {
        func: spec.clone().unbind(),
        name,
        abort: abort.clone(),
        // the arrays the last subject left, if any (another subject alive at
        // the same time finds none and makes its own)
        inputs: Mutex::new(
            LEFT_ARRAYS
                .lock()
                .map(|mut l| std::mem::take(&mut *l))
                .unwrap_or_default(),
        ),
        input_buffer: spec
            .getattr("_mxbi_input_buffer")
            .ok()
            .filter(|h| h.is_callable())
            .map(|h| h.unbind()),
        buffer_busy: Mutex::new(()),
    };
    Ok(Parsed {
        subject: Box::new(s),
        input: None,
        boundaries: vec![],
        abort: Some(abort),
    })
}

/// The input type named (the CLI's message), else the subject's own, else f32.
pub(crate) fn in_type(input: Option<&str>, own: Option<InType>) -> PyResult<InType> {
    match input {
        Some(t) => InType::from_name(t).ok_or_else(|| {
            err(format!(
                "unknown input type '{t}'; expected f32, bf16, f16, e4m3 or e5m2"
            ))
        }),
        None => Ok(own.unwrap_or(InType::F32)),
    }
}

/// Re-raises a `BaseException` a Python subject's function raised.
pub(crate) fn take_abort(p: &Parsed) -> PyResult<()> {
    if let Some(slot) = &p.abort {
        if let Some(e) = slot.lock().ok().and_then(|mut g| g.take()) {
            return Err(e);
        }
    }
    Ok(())
}
