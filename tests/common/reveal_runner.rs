//! An emulated external runner of `mxbi reveal gen|solve` folders: it
//! answers every job that has no `out.npy` with the CPU model under one
//! order, reading the job's files as the manifest says (f32 values `a.npy`
//! and `b.npy`, or for an MX `format` the codes `a.npy` [M, K], `b.npy`
//! [K, N] and the E8M0 scales `a_scales.npy` [M, K/32], `b_scales.npy`
//! [K/32, N]), and writing `out.npy` [M, N] as f32.

use mxbi::gemm::{gemm_array, BLayout, MxArrays, Problem};
use mxbi::io::{load_tensor, write_tensor, Element, TensorData};
use mxbi::mx::MxFormat;
use mxbi::order::Order;
use ndarray::{Array2, CowArray, Ix2};
use std::path::Path;

/// The MX format a folder's manifest names (None: f32 values).
pub fn folder_format(dir: &Path) -> Option<MxFormat> {
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["format"].as_str().map(|s| s.parse().unwrap())
}

/// The job folders of `dir` without an `out.npy`, sorted by name.
pub fn pending_jobs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut jobs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|d| d.is_dir() && !d.join("out.npy").exists())
        .collect();
    jobs.sort();
    jobs
}

/// C = A x B of one job folder under `order`, `[M, N]`.
pub fn run_job(job: &Path, format: Option<MxFormat>, order: &Order) -> Array2<f32> {
    let fail = |e: &dyn std::fmt::Display| -> ! { panic!("{}: {e}", job.display()) };
    let load = |name: &str| load_tensor(job.join(name), None).unwrap_or_else(|e| fail(&e));
    let (a, b) = (load("a.npy"), load("b.npy"));
    let c = match format {
        None => {
            let (a, b) = (matrix(job, &a), matrix(job, &b));
            Problem::from_arrays(a.view(), b.view(), BLayout::Kn).and_then(|p| gemm_array(order, &p, None))
        }
        Some(format) => {
            let (sa, sb) = (load("a_scales.npy"), load("b_scales.npy"));
            let (ca, sa, cb, sb) = (matrix(job, &a), matrix(job, &sa), matrix(job, &b), matrix(job, &sb));
            let mx = |codes, scales| MxArrays { codes, scales, format };
            Problem::from_mx_arrays(mx(ca.view(), sa.view()), mx(cb.view(), sb.view()), BLayout::Kn)
                .and_then(|p| gemm_array(order, &p, None))
        }
    };
    c.unwrap_or_else(|e| fail(&e))
}

/// A job file's tensor as a matrix of `T`.
fn matrix<'t, T: Element>(job: &Path, t: &'t TensorData) -> CowArray<'t, T, Ix2> {
    t.view().unwrap_or_else(|e| panic!("{}: {e}", job.display()))
}

/// Answers every pending job of `dir` with `order`, passing each output
/// through `edit` (job folder name, values) before it is written; returns
/// how many jobs were answered.
pub fn answer_with(dir: &Path, order: &str, mut edit: impl FnMut(&str, &mut [f32])) -> usize {
    let order: Order = order.parse().unwrap();
    let format = folder_format(dir);
    let jobs = pending_jobs(dir);
    for job in &jobs {
        let mut c = run_job(job, format, &order);
        edit(
            &job.file_name().unwrap().to_string_lossy(),
            c.as_slice_mut().expect("a new array is contiguous"),
        );
        write_tensor(job.join("out.npy"), "data", &TensorData::from_array(&c)).unwrap();
    }
    jobs.len()
}

/// [`answer_with`] without edits.
pub fn answer(dir: &Path, order: &str) -> usize {
    answer_with(dir, order, |_, _| {})
}

/// Rewrites every f32 `out.npy` of `dir` as bf16 bits (`<u2`), the values
/// being bf16 numbers (panics otherwise); returns how many were rewritten.
pub fn outputs_as_bf16_bits(dir: &Path) -> usize {
    let mut done = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let out = e.unwrap().path().join("out.npy");
        let Ok(t) = load_tensor(&out, None) else { continue };
        let Ok(v) = t.as_f32() else { continue };
        let bits: Vec<u16> = v
            .iter()
            .map(|x| {
                assert_eq!(x.to_bits() & 0xFFFF, 0, "{}: {x} is not a bf16 number", out.display());
                (x.to_bits() >> 16) as u16
            })
            .collect();
        let t = TensorData::from_slice(t.shape().to_vec(), &bits).unwrap();
        write_tensor(&out, "data", &t).unwrap();
        done += 1;
    }
    done
}
