//! `mxbi reveal gen|solve`: the reveal's file protocol for external
//! runners. `gen` writes the first round of probe launches to a folder as
//! jobs; the runner answers each job with an `out.npy`; `solve` reruns the
//! deterministic recursion against the folder, writing the launches still
//! missing or printing the recovered tree.
//!
//! # Contract
//! - `DIR/manifest.json` (schema `mxbi-reveal/1`): the launch shape `m`,
//!   `k`, `n`, the probe `input` type and `seed`, for MX inputs the
//!   `format` (`mxfp8-e4m3`, ...; absent: f32 values), `block` (32) and
//!   `b_layout` (`kn`), `files` (each file of a job: name, dtype, shape and
//!   what it holds) and `jobs` (`id`, the SHA-256 of the job's operands).
//! - A job `DIR/job-NNNNNN/` holds `a.npy` `[M, K]` and `b.npy` `[K, N]`:
//!   f32 values (`<f4`), or for MX one code of the format per byte (`|u1`,
//!   the code in the low bits) with `a_scales.npy` `[M, K/32]` and
//!   `b_scales.npy` `[K/32, N]` (E8M0, `|u1`; blocks of 32 along K) — the
//!   names and layouts `mxbi explain --format --a-scales --b-scales` reads.
//!   The runner writes `out.npy` `[M, N]`: `<f4` (f32), `<f2` (f16) or
//!   `<u2` (bf16 bits).
//! - Bad input is one line and exit 2: a manifest that is not one (over
//!   64 MiB, not JSON, a field missing or out of place, a job id that is
//!   not `job-NNNNNN`, a format that is not MX), an `out.npy` that is not a
//!   regular file, larger than a `[M, N]` output can be, of another dtype
//!   or shape. Sizes are bounded before anything is allocated (the shape
//!   by the reveal's own limits, files by their length).

use super::reveal_shape::{mx_input, options, outcome, print_data_dependent, print_revealed, RevealShape};
use super::{CliError, Outcome, Result};
use mxbi::explain::{self, RevealOptions};
use mxbi::gemm::{BLayout, Matrix, Problem, MX_BLOCK};
use mxbi::io::{self, DType, TensorData};
use mxbi::mx::MxFormat;
use mxbi::order::InType;
use mxbi::subject::{Subject, SubjectError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const REVEAL_SCHEMA: &str = "mxbi-reveal/1";

/// Most bytes `manifest.json` may have (a job takes about 100).
const MAX_MANIFEST: u64 = 64 << 20;

/// Bytes an `out.npy` header may take beyond the data (numpy writes 128).
const MAX_HEADER_SLACK: u64 = 1 << 16;

/// A subject answered from a folder: each launch is a job found by the
/// SHA-256 of its operands; a launch not yet answered is written as a new
/// job and reported as pending, an answer that is not one is recorded as
/// broken.
struct Folder {
    dir: PathBuf,
    /// The launches' operands: f32 values (None) or MX codes and scales.
    mx: Option<MxFormat>,
    jobs: Mutex<Vec<(String, String)>>,
    pending: Mutex<Vec<String>>,
    broken: Mutex<Vec<String>>,
}

/// The SHA-256 of f32 operands: the little-endian bytes of A, then of B.
fn digest(a: &[f32], b: &[f32]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for v in a.iter().chain(b) {
        h.update(v.to_le_bytes());
    }
    mxbi::io::digest::hex_lower(&h.finalize())
}

/// The SHA-256 of MX operands: the format's name, then A's codes and
/// scales, then B's (lengths are fixed by the launch shape).
fn digest_mx(f: MxFormat, parts: [&[u8]; 4]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"mx:");
    h.update(f.name().as_bytes());
    h.update([0]);
    for p in parts {
        h.update(p);
    }
    mxbi::io::digest::hex_lower(&h.finalize())
}

/// `job-` and at least six digits.
fn job_id_ok(id: &str) -> bool {
    id.strip_prefix("job-")
        .is_some_and(|d| d.len() >= 6 && d.bytes().all(|c| c.is_ascii_digit()))
}

/// The manifest of `dir`, read with its size bounded, checked to be a
/// `mxbi-reveal/1` object.
fn read_manifest(dir: &Path) -> Result<Value> {
    use std::io::Read;
    let path = dir.join("manifest.json");
    let show = path.display();
    let f = std::fs::File::open(&path).map_err(|e| CliError(format!("{show}: {e}")))?;
    let meta = f.metadata().map_err(|e| CliError(format!("{show}: {e}")))?;
    if !meta.is_file() {
        return Err(CliError(format!("{show}: not a regular file")));
    }
    if meta.len() > MAX_MANIFEST {
        return Err(CliError(format!(
            "{show}: {} bytes, more than the {MAX_MANIFEST} a manifest may have",
            meta.len()
        )));
    }
    let mut text = String::new();
    f.take(MAX_MANIFEST + 1)
        .read_to_string(&mut text)
        .map_err(|e| CliError(format!("{show}: {e}")))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| CliError(format!("{show}: {e}")))?;
    if v["schema"] != REVEAL_SCHEMA {
        return Err(CliError(format!("{show}: not a {REVEAL_SCHEMA} folder")));
    }
    Ok(v)
}

/// The job list of a manifest, every id `job-NNNNNN` and every digest 64
/// hex digits, no id twice.
fn read_jobs(v: &Value, show: &str) -> Result<Vec<(String, String)>> {
    let list = v["jobs"]
        .as_array()
        .ok_or_else(|| CliError(format!("{show}: no jobs list")))?;
    let mut jobs: Vec<(String, String)> = Vec::with_capacity(list.len());
    for (i, j) in list.iter().enumerate() {
        let id = j["id"].as_str().unwrap_or_default();
        let sha = j["sha256"].as_str().unwrap_or_default();
        if !job_id_ok(id) {
            return Err(CliError(format!(
                "{show}: jobs[{i}]: id {:?} is not job-NNNNNN",
                j["id"]
            )));
        }
        if sha.len() != 64 || !sha.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(CliError(format!(
                "{show}: jobs[{i}]: sha256 {:?} is not 64 hex digits",
                j["sha256"]
            )));
        }
        if jobs.iter().any(|(x, _)| x == id) {
            return Err(CliError(format!("{show}: jobs[{i}]: id {id} appears twice")));
        }
        jobs.push((id.to_string(), sha.to_ascii_lowercase()));
    }
    Ok(jobs)
}

/// An answer `out.npy` of a `[m, n]` launch, widened exactly to f32: a
/// regular file no larger than the output can be, dtype `<f4`, `<f2` or
/// `<u2` (bf16 bits), shape exactly `[m, n]`.
fn read_out(path: &Path, m: usize, n: usize) -> std::result::Result<Vec<f32>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let max = (m as u64)
        .saturating_mul(n as u64)
        .saturating_mul(4)
        .saturating_add(MAX_HEADER_SLACK);
    if meta.len() > max {
        return Err(format!(
            "{} bytes, more than the {max} a [{m}, {n}] output can take",
            meta.len()
        ));
    }
    let t = io::load_tensor(path, None).map_err(|e| e.to_string())?;
    if t.shape() != [m, n] {
        return Err(format!("shape {:?}, expected [{m}, {n}]", t.shape()));
    }
    let e = |e: io::IoError| e.to_string();
    Ok(match t.dtype() {
        DType::F32 => t.as_f32().map_err(e)?.into_owned(),
        DType::F16 => t.as_f16().map_err(e)?.iter().map(|h| h.to_f32()).collect(),
        DType::BF16 => t.as_bf16().map_err(e)?.iter().map(|h| h.to_f32()).collect(),
        DType::U16 => t
            .as_bits16()
            .map_err(e)?
            .iter()
            .map(|&h| f32::from_bits((h as u32) << 16))
            .collect(),
        d => {
            return Err(format!(
                "dtype {}, expected <f4 (f32), <f2 (f16) or <u2 (bf16 bits)",
                d.name()
            ))
        }
    })
}

/// The data of one job file, borrowed from the launch.
#[derive(Clone, Copy)]
enum Data<'a> {
    F32(&'a [f32]),
    U8(&'a [u8]),
}

/// One launch's files (name, shape, data) and its digest.
type Launch<'a> = (Vec<(&'static str, [usize; 2], Data<'a>)>, String);

impl Folder {
    fn new(dir: &Path, mx: Option<MxFormat>, manifest: &Value) -> Result<Folder> {
        let jobs = read_jobs(manifest, &dir.join("manifest.json").display().to_string())?;
        Ok(Folder {
            dir: dir.to_path_buf(),
            mx,
            jobs: Mutex::new(jobs),
            pending: Mutex::new(Vec::new()),
            broken: Mutex::new(Vec::new()),
        })
    }

    fn save(&self, header: &Value) -> Result<()> {
        let jobs = self.jobs.lock().map_err(|_| CliError("job list poisoned".into()))?;
        let mut v = header.clone();
        v["jobs"] = json!(jobs
            .iter()
            .map(|(id, sha)| json!({"id": id, "sha256": sha}))
            .collect::<Vec<_>>());
        std::fs::write(self.dir.join("manifest.json"), serde_json::to_string_pretty(&v)? + "\n")?;
        Ok(())
    }

    /// The files of one launch and its digest, checked against the
    /// folder's kind and the launch shape.
    fn operands<'a>(&self, p: &Problem<'a>) -> std::result::Result<Launch<'a>, String> {
        if p.b_layout != BLayout::Kn {
            return Err("the file protocol writes B as [K, N]; the launch has B as [N, K]".into());
        }
        let (m, k, n) = (p.m, p.k, p.n);
        match (self.mx, p.a, p.b) {
            (None, Matrix::F32(a), Matrix::F32(b)) => Ok((
                vec![("a.npy", [m, k], Data::F32(a)), ("b.npy", [k, n], Data::F32(b))],
                digest(a, b),
            )),
            (
                Some(f),
                Matrix::Mx {
                    codes: ca,
                    scales: sa,
                    format: fa,
                },
                Matrix::Mx {
                    codes: cb,
                    scales: sb,
                    format: fb,
                },
            ) if fa == f && fb == f && k.is_multiple_of(MX_BLOCK) => {
                let kb = k / MX_BLOCK;
                Ok((
                    vec![
                        ("a.npy", [m, k], Data::U8(ca)),
                        ("a_scales.npy", [m, kb], Data::U8(sa)),
                        ("b.npy", [k, n], Data::U8(cb)),
                        ("b_scales.npy", [kb, n], Data::U8(sb)),
                    ],
                    digest_mx(f, [ca, sa, cb, sb]),
                ))
            }
            _ => Err(match self.mx {
                None => "this folder's launches are f32 values".into(),
                Some(f) => format!(
                    "this folder's launches are {} codes and scales, K a multiple of {MX_BLOCK}",
                    f.name()
                ),
            }),
        }
    }
}

impl Subject for Folder {
    fn name(&self) -> String {
        format!("files:{}", self.dir.display())
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> std::result::Result<Vec<f32>, SubjectError> {
        let fail = |why: String| {
            if let Ok(mut b) = self.broken.lock() {
                b.push(why.clone());
            }
            SubjectError::Broken {
                subject: self.name(),
                why,
            }
        };
        let (files, sha) = self.operands(p).map_err(&fail)?;
        let mut jobs = self.jobs.lock().map_err(|_| fail("job list poisoned".into()))?;
        let id = match jobs.iter().find(|(_, s)| *s == sha) {
            Some((id, _)) => id.clone(),
            None => {
                // a fresh id: not in the manifest, no folder of that name
                // (whose out.npy would answer another launch)
                let mut at = jobs.len();
                let taken = |id: &str| jobs.iter().any(|(x, _)| x == id) || self.dir.join(id).exists();
                while taken(&format!("job-{at:06}")) {
                    at += 1;
                }
                let id = format!("job-{at:06}");
                let d = self.dir.join(&id);
                std::fs::create_dir_all(&d).map_err(|e| fail(format!("{}: {e}", d.display())))?;
                for (name, shape, data) in files {
                    let t = match data {
                        Data::F32(v) => TensorData::from_slice(shape.to_vec(), v),
                        Data::U8(v) => TensorData::from_slice(shape.to_vec(), v),
                    };
                    t.and_then(|t| io::write_tensor(d.join(name), "data", &t))
                        .map_err(|e| fail(format!("{}: {e}", d.join(name).display())))?;
                }
                jobs.push((id.clone(), sha));
                id
            }
        };
        drop(jobs);
        let out = self.dir.join(&id).join("out.npy");
        if !out.exists() {
            if let Ok(mut pend) = self.pending.lock() {
                pend.push(id.clone());
            }
            return Err(SubjectError::Failed {
                subject: self.name(),
                why: format!("{id}/out.npy is not written yet"),
            });
        }
        let v = read_out(&out, p.m, p.n).map_err(|e| fail(format!("{}: {e}", out.display())))?;
        match rows {
            None => Ok(v),
            Some(r) => r
                .iter()
                .map(|&i| {
                    v.get(i * p.n..(i + 1) * p.n)
                        .map(|s| s.to_vec())
                        .ok_or_else(|| fail(format!("row {i} of an [{}, {}] output", p.m, p.n)))
                })
                .collect::<std::result::Result<Vec<_>, _>>()
                .map(|x| x.concat()),
        }
    }
}

/// The manifest's fields other than the jobs: the launch shape, probe
/// options, and what each job's files hold.
fn header(o: &RevealOptions, mx: Option<MxFormat>) -> Value {
    let (m, k, n) = (o.m, o.k, o.n);
    let mut h = json!({"schema": REVEAL_SCHEMA, "m": m, "k": k, "n": n, "input": o.input, "seed": o.seed});
    let out = json!({
        "file": "out.npy", "shape": [m, n], "dtype": "<f4 (f32), <f2 (f16) or <u2 (bf16 bits)",
        "holds": "C = A x B, written by the runner",
    });
    h["files"] = match mx {
        None => json!({
            "a": {"file": "a.npy", "shape": [m, k], "dtype": "<f4", "holds": "A, f32 values, row-major"},
            "b": {"file": "b.npy", "shape": [k, n], "dtype": "<f4", "holds": "B, f32 values, row-major"},
            "out": out,
        }),
        Some(f) => {
            let kb = k / MX_BLOCK;
            h["format"] = json!(f.name());
            h["block"] = json!(MX_BLOCK);
            h["b_layout"] = json!("kn");
            json!({
                "a": {"file": "a.npy", "shape": [m, k], "dtype": "|u1",
                      "holds": format!("A as {} codes, one per byte (the code in the low bits), row-major", f.name())},
                "a_scales": {"file": "a_scales.npy", "shape": [m, kb], "dtype": "|u1",
                      "holds": "E8M0 scales of A: [i, b] scales A[i, 32b .. 32b+31]"},
                "b": {"file": "b.npy", "shape": [k, n], "dtype": "|u1",
                      "holds": format!("B as {} codes, one per byte (the code in the low bits), row-major [K, N]", f.name())},
                "b_scales": {"file": "b_scales.npy", "shape": [kb, n], "dtype": "|u1",
                      "holds": "E8M0 scales of B: [b, j] scales B[32b .. 32b+31, j]"},
                "out": out,
            })
        }
    };
    h
}

/// What a runner reads and writes for each pending job (one line).
fn prompt(o: &RevealOptions, mx: Option<MxFormat>) -> String {
    let (m, k, n) = (o.m, o.k, o.n);
    let out = format!("write out.npy [{m}, {n}] (<f4 f32, <f2 f16 or <u2 bf16 bits)");
    match mx {
        None => format!("read a.npy [{m}, {k}] and b.npy [{k}, {n}] (<f4 f32 values), {out}"),
        Some(f) => format!(
            "read the {} codes a.npy [{m}, {k}] and b.npy [{k}, {n}] (|u1, one code per byte) and their E8M0 scales a_scales.npy [{m}, {}] and b_scales.npy [{}, {n}] (|u1, blocks of {MX_BLOCK} along K), {out}",
            f.name(),
            k / MX_BLOCK,
            k / MX_BLOCK
        ),
    }
}

/// One step of the file protocol: run the reveal against the folder; write
/// the launches it still needs, or print the result.
fn step(dir: &Path, o: RevealOptions, mx: Option<MxFormat>, manifest: &Value, as_json: bool) -> Result<Outcome> {
    let f = Folder::new(dir, mx, manifest)?;
    let r = match mx {
        None => explain::reveal(&f, o),
        Some(format) => explain::reveal_mx(&f, o, format),
    };
    let h = header(&o, mx);
    f.save(&h)?;
    if let Some(why) = f.broken.lock().ok().and_then(|b| b.first().cloned()) {
        return Err(CliError(why));
    }
    let pending = f.pending.lock().map(|p| p.clone()).unwrap_or_default();
    match r {
        Ok(r) => {
            print_revealed(&r, as_json, false)?;
            Ok(outcome(&r))
        }
        Err(_) if !pending.is_empty() => {
            if as_json {
                outln!(
                    "{}",
                    json!({"status": "pending", "jobs": pending, "format": mx.map(|f| f.name()), "files": h["files"]})
                );
            } else {
                outln!(
                    "{} launches to run: {}/{{{}}}; for each, {}, then: mxbi reveal solve --dir {}",
                    pending.len(),
                    dir.display(),
                    pending.join(","),
                    prompt(&o, mx),
                    dir.display()
                );
            }
            Ok(Outcome::Held)
        }
        Err(explain::RevealError::DataDependent(rep)) => print_data_dependent(&rep, as_json),
        Err(e) => Err(CliError(e.to_string())),
    }
}

pub(super) fn gen(dir: &Path, s: &RevealShape) -> Result<Outcome> {
    let mx = mx_input(s.input.as_deref());
    let o = options(s, None)?;
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(CliError(format!(
            "{}: the folder exists and is not empty",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| CliError(format!("{}: {e}", dir.display())))?;
    let mut h = header(&o, mx);
    h["jobs"] = json!([]);
    std::fs::write(dir.join("manifest.json"), serde_json::to_string_pretty(&h)? + "\n")?;
    step(dir, o, mx, &h, false)
}

pub(super) fn solve(dir: &Path, as_json: bool) -> Result<Outcome> {
    let v = read_manifest(dir)?;
    let show = dir.join("manifest.json").display().to_string();
    let num = |key: &str| -> Result<usize> {
        v[key]
            .as_u64()
            .and_then(|x| usize::try_from(x).ok())
            .ok_or_else(|| CliError(format!("{show}: '{key}' missing or not a count")))
    };
    let input = v["input"]
        .as_str()
        .and_then(InType::from_name)
        .ok_or_else(|| CliError(format!("{show}: 'input' missing or not an element type")))?;
    let mx = match &v["format"] {
        Value::Null => None,
        Value::String(s) => Some(mx_input(Some(s)).ok_or_else(|| {
            CliError(format!(
                "{show}: format '{s}' is not an MX format ({})",
                MxFormat::ALL.map(|f| f.name()).join(", ")
            ))
        })?),
        x => return Err(CliError(format!("{show}: format {x} is not an MX format name"))),
    };
    let seed = match &v["seed"] {
        Value::Null => 1,
        x => x
            .as_u64()
            .ok_or_else(|| CliError(format!("{show}: 'seed' is not a count")))?,
    };
    let o = RevealOptions {
        m: num("m")?,
        k: num("k")?,
        n: num("n")?,
        input,
        seed,
        verify_rows: 8,
    };
    step(dir, o, mx, &v, as_json)
}
