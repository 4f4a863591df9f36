//! An emulated external runner of `mxbi reveal gen|solve` folders: it
//! answers every job that has no `out.npy` with the CPU model under one
//! order, reading the job's files as the manifest says (f32 values `a.npy`
//! and `b.npy`, or for an MX `format` the codes `a.npy` [M, K], `b.npy`
//! [K, N] and the E8M0 scales `a_scales.npy` [M, K/32], `b_scales.npy`
//! [K/32, N]), and writing `out.npy` [M, N] as f32.

use mxbi::gemm::{gemm, BLayout, Matrix, Problem};
use mxbi::io::{load_tensor, write_tensor, TensorData};
use mxbi::mx::MxFormat;
use mxbi::order::Order;
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

/// C = A x B of one job folder under `order` (row-major [M, N]).
pub fn run_job(job: &Path, format: Option<MxFormat>, order: &Order) -> (Vec<f32>, usize, usize) {
    let load = |name: &str| load_tensor(job.join(name), None).unwrap_or_else(|e| panic!("{}: {e}", job.display()));
    let (a, b) = (load("a.npy"), load("b.npy"));
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    assert_eq!(b.shape()[0], k, "{}: B is [K, N]", job.display());
    let c = match format {
        None => {
            let (av, bv) = (a.as_f32().unwrap(), b.as_f32().unwrap());
            let p = Problem {
                a: Matrix::F32(&av),
                b: Matrix::F32(&bv),
                m,
                n,
                k,
                b_layout: BLayout::Kn,
            };
            gemm(order, &p, None).unwrap()
        }
        Some(f) => {
            let (sa, sb) = (load("a_scales.npy"), load("b_scales.npy"));
            assert_eq!(sa.shape(), [m, k / 32], "{}: A scales", job.display());
            assert_eq!(sb.shape(), [k / 32, n], "{}: B scales", job.display());
            let p = Problem {
                a: Matrix::Mx {
                    codes: a.as_bits8().unwrap(),
                    scales: sa.as_bits8().unwrap(),
                    format: f,
                },
                b: Matrix::Mx {
                    codes: b.as_bits8().unwrap(),
                    scales: sb.as_bits8().unwrap(),
                    format: f,
                },
                m,
                n,
                k,
                b_layout: BLayout::Kn,
            };
            gemm(order, &p, None).unwrap_or_else(|e| panic!("{}: {e}", job.display()))
        }
    };
    (c, m, n)
}

/// Answers every pending job of `dir` with `order`, passing each output
/// through `edit` (job folder name, values) before it is written; returns
/// how many jobs were answered.
pub fn answer_with(dir: &Path, order: &str, mut edit: impl FnMut(&str, &mut [f32])) -> usize {
    let order: Order = order.parse().unwrap();
    let format = folder_format(dir);
    let jobs = pending_jobs(dir);
    for job in &jobs {
        let (mut c, m, n) = run_job(job, format, &order);
        edit(&job.file_name().unwrap().to_string_lossy(), &mut c);
        let t = TensorData::from_slice(vec![m, n], &c).unwrap();
        write_tensor(job.join("out.npy"), "data", &t).unwrap();
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
