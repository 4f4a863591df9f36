//! `mxbi reveal gen|solve`: the reveal's file protocol for external
//! runners. `gen` writes the first round of probe launches to a folder as
//! jobs; the runner answers each job with an `out.npy`; `solve` reruns the
//! deterministic recursion against the folder, writing the launches still
//! missing or printing the recovered tree.

use super::explain::{mx_input, options, outcome, print_revealed, RevealShape};
use super::{CliError, Outcome, Result};
use crate::explain::{self, RevealOptions};
use crate::gemm::{Matrix, Problem};
use crate::io::{self, DType, TensorData};
use crate::order::InType;
use crate::subject::{Subject, SubjectError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const REVEAL_SCHEMA: &str = "mxbi-reveal/1";

/// A subject answered from a folder: each launch is a job found by the
/// SHA-256 of its inputs; a launch not yet answered is written as a new job
/// and reported as pending.
struct Folder {
    dir: PathBuf,
    jobs: Mutex<Vec<(String, String)>>,
    pending: Mutex<Vec<String>>,
}

fn digest(a: &[f32], b: &[f32]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for v in a.iter().chain(b) {
        h.update(v.to_le_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl Folder {
    fn open(dir: &Path) -> Result<Folder> {
        let text = std::fs::read_to_string(dir.join("manifest.json"))
            .map_err(|e| CliError(format!("{}: {e}", dir.join("manifest.json").display())))?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| CliError(format!("{}/manifest.json: {e}", dir.display())))?;
        let jobs = v["jobs"]
            .as_array()
            .ok_or_else(|| CliError(format!("{}/manifest.json: no jobs list", dir.display())))?
            .iter()
            .map(|j| {
                (
                    j["id"].as_str().unwrap_or_default().to_string(),
                    j["sha256"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        Ok(Folder {
            dir: dir.to_path_buf(),
            jobs: Mutex::new(jobs),
            pending: Mutex::new(Vec::new()),
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
}

impl Subject for Folder {
    fn name(&self) -> String {
        format!("files:{}", self.dir.display())
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> std::result::Result<Vec<f32>, SubjectError> {
        let fail = |why: String| SubjectError::Broken {
            subject: self.name(),
            why,
        };
        let (Matrix::F32(a), Matrix::F32(b)) = (p.a, p.b) else {
            return Err(fail("probe launches are f32 values".into()));
        };
        let sha = digest(a, b);
        let mut jobs = self.jobs.lock().map_err(|_| fail("job list poisoned".into()))?;
        let id = match jobs.iter().find(|(_, s)| *s == sha) {
            Some((id, _)) => id.clone(),
            None => {
                let id = format!("job-{:06}", jobs.len());
                let d = self.dir.join(&id);
                std::fs::create_dir_all(&d).map_err(|e| fail(format!("{}: {e}", d.display())))?;
                let w = |name: &str, shape: Vec<usize>, v: &[f32]| -> std::result::Result<(), SubjectError> {
                    let t = TensorData::from_slice(shape, v).map_err(|e| fail(e.to_string()))?;
                    io::write_tensor(d.join(name), "data", &t).map_err(|e| fail(e.to_string()))
                };
                w("a.npy", vec![p.m, p.k], a)?;
                w("b.npy", vec![p.k, p.n], b)?;
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
        let t = io::load_tensor(&out, None).map_err(|e| fail(format!("{}: {e}", out.display())))?;
        if t.shape() != [p.m, p.n] {
            return Err(fail(format!(
                "{}: shape {:?}, expected [{}, {}]",
                out.display(),
                t.shape(),
                p.m,
                p.n
            )));
        }
        let v: Vec<f32> = match t.dtype() {
            DType::F32 => t.as_f32().map_err(|e| fail(e.to_string()))?.into_owned(),
            DType::F16 => t
                .as_f16()
                .map_err(|e| fail(e.to_string()))?
                .iter()
                .map(|h| h.to_f32())
                .collect(),
            DType::BF16 => t
                .as_bf16()
                .map_err(|e| fail(e.to_string()))?
                .iter()
                .map(|h| h.to_f32())
                .collect(),
            d => {
                return Err(fail(format!(
                    "{}: dtype {}, expected f32, f16 or bf16",
                    out.display(),
                    d.name()
                )))
            }
        };
        Ok(match rows {
            None => v,
            Some(r) => r.iter().flat_map(|&i| v[i * p.n..(i + 1) * p.n].to_vec()).collect(),
        })
    }
}

fn header(o: &RevealOptions) -> Value {
    json!({"schema": REVEAL_SCHEMA, "m": o.m, "k": o.k, "n": o.n, "input": o.input, "seed": o.seed})
}

/// One step of the file protocol: run the reveal against the folder; write
/// the launches it still needs, or print the result.
fn step(dir: &Path, o: RevealOptions, as_json: bool) -> Result<Outcome> {
    let f = Folder::open(dir)?;
    let r = explain::reveal(&f, o);
    f.save(&header(&o))?;
    let pending = f.pending.lock().map(|p| p.clone()).unwrap_or_default();
    match r {
        Ok(r) => {
            print_revealed(&r, as_json)?;
            Ok(outcome(&r))
        }
        Err(_) if !pending.is_empty() => {
            if as_json {
                outln!("{}", json!({"status": "pending", "jobs": pending}));
            } else {
                outln!(
                    "{} launches to run: {}/{{{}}}; for each, read a.npy [M, K] and b.npy [K, N] (f32), write out.npy [M, N] (f32, f16 or bf16), then: mxbi reveal solve --dir {}",
                    pending.len(),
                    dir.display(),
                    pending.join(","),
                    dir.display()
                );
            }
            Ok(Outcome::Held)
        }
        Err(e) => Err(CliError(e.to_string())),
    }
}

pub(super) fn gen(dir: &Path, s: &RevealShape) -> Result<Outcome> {
    if mx_input(s.input.as_deref()).is_some() {
        return Err(CliError(
            "reveal gen: MX probes are not written as files yet (jobs are f32 a.npy/b.npy); use --subject".into(),
        ));
    }
    let o = options(s, None)?;
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(CliError(format!(
            "{}: the folder exists and is not empty",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| CliError(format!("{}: {e}", dir.display())))?;
    let mut h = header(&o);
    h["jobs"] = json!([]);
    std::fs::write(dir.join("manifest.json"), serde_json::to_string_pretty(&h)? + "\n")?;
    step(dir, o, false)
}

pub(super) fn solve(dir: &Path, as_json: bool) -> Result<Outcome> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    if v["schema"] != REVEAL_SCHEMA {
        return Err(CliError(format!("{}: not a {REVEAL_SCHEMA} folder", path.display())));
    }
    let num = |key: &str| -> Result<usize> {
        v[key]
            .as_u64()
            .map(|x| x as usize)
            .ok_or_else(|| CliError(format!("{}: '{key}' missing", path.display())))
    };
    let input = v["input"]
        .as_str()
        .and_then(InType::from_name)
        .ok_or_else(|| CliError(format!("{}: 'input' missing", path.display())))?;
    let o = RevealOptions {
        m: num("m")?,
        k: num("k")?,
        n: num("n")?,
        input,
        seed: v["seed"].as_u64().unwrap_or(1),
        verify_rows: 8,
    };
    step(dir, o, as_json)
}
