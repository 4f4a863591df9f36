//! Dump folders (schema "mxbi-bi-dump/1", docs/BI.md "Dump folders"): the
//! [`Recorder`] writes every job a check asks of its subject, any runner
//! writes the outputs, and [`Dump`] (`dump:DIR`) answers the same check
//! from those files.
//!
//! # Contract
//! - Layout: `DIR/manifest.json` and, per job, `DIR/job-NNNNNN/a.npy`
//!   (`<f4 [M, K]`), `b.npy` (`<f4 [K, N]`); a runner adds `out.npy`
//!   (`<f4`, `<f2`, or bf16 bits as `<u2`; `[M, N]`).
//! - A job is its inputs: the recorder writes each distinct (A, B) once
//!   (a repeated request is the same job), and `dump:DIR` finds the job by
//!   the SHA-256 of the `.npy` images of the inputs it is asked about. So
//!   the repeats of one batch read one file: a dump cannot show
//!   non-determinism (the `repeat` family and the NON_DET baseline check
//!   always agree on a dump).
//! - Jobs are numbered in order of (M, SHA-256 of A, SHA-256 of B), so the
//!   folder is the same bytes whatever order the check asked in.
//! - `dump:DIR` fails as [`SubjectError::Broken`] (the check stops, exit 2)
//!   naming the file: a job it was asked for is not in the manifest (other
//!   options than `bi gen` had), the job's M, K, N in the manifest are not
//!   its inputs' shapes, `out.npy` is missing, has the wrong dtype or
//!   shape, or an input file no longer has its recorded digest.

use super::job::{read_bounded, read_output, select_rows, JobInputs};
use super::{Subject, SubjectError};
use crate::gemm::Problem;
use crate::io::sha256_hex;
use crate::order::InType;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The manifest's schema name.
pub const DUMP_SCHEMA: &str = "mxbi-bi-dump/1";
/// Largest manifest read.
const MAX_MANIFEST_BYTES: u64 = 256 << 20;
/// Most jobs a dump may hold.
pub const MAX_DUMP_JOBS: usize = 1 << 20;

/// `DIR/manifest.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub schema: String,
    /// The options of `mxbi bi gen` (the run must repeat them).
    pub options: serde_json::Value,
    /// The input type every job's values are exact in.
    pub input: String,
    /// M values where the subject's behaviour may change (they fed `--m edges`).
    pub boundaries: Vec<usize>,
    pub jobs: Vec<DumpJob>,
}

/// One job of a dump.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpJob {
    pub job: u64,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub input: String,
    /// File names relative to the dump folder: `job-NNNNNN/a.npy`, ...
    pub a: String,
    pub b: String,
    pub out: String,
    pub a_sha256: String,
    pub b_sha256: String,
}

fn job_dir(id: u64) -> String {
    format!("job-{id:06}")
}

/// A recording subject: writes each distinct job's inputs under `dir` and
/// answers zeros (see the module doc).
pub struct Recorder {
    dir: PathBuf,
    input: InType,
    state: Mutex<RecState>,
}

#[derive(Default)]
struct RecState {
    /// (job, its temporary folder name)
    jobs: Vec<(DumpJob, String)>,
    seen: HashSet<(String, String)>,
    /// A B file per digest, for hard links.
    b_files: HashMap<String, PathBuf>,
}

impl Recorder {
    /// Records into `dir` (an existing, empty folder).
    pub fn new(dir: &Path, input: InType) -> Result<Recorder, String> {
        let mut entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if entries.next().is_some() {
            return Err(format!("{}: not empty", dir.display()));
        }
        Ok(Recorder {
            dir: dir.to_path_buf(),
            input,
            state: Mutex::new(RecState::default()),
        })
    }

    fn record(&self, inputs: &JobInputs) -> Result<(), String> {
        let (a, b) = (inputs.a_npy(), inputs.b_npy());
        let (a_sha, b_sha) = (sha256_hex(&a), sha256_hex(&b));
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !st.seen.insert((a_sha.clone(), b_sha.clone())) {
            return Ok(());
        }
        if st.jobs.len() >= MAX_DUMP_JOBS {
            return Err(format!("more than {MAX_DUMP_JOBS} jobs"));
        }
        let tmp = format!("rec-{}", st.jobs.len());
        let d = self.dir.join(&tmp);
        let io = |e: std::io::Error| format!("{}: {e}", d.display());
        std::fs::create_dir(&d).map_err(io)?;
        std::fs::write(d.join("a.npy"), &a).map_err(io)?;
        let bf = d.join("b.npy");
        // the weights are shared by most jobs: link instead of copying when possible
        let linked = st
            .b_files
            .get(&b_sha)
            .is_some_and(|first| std::fs::hard_link(first, &bf).is_ok());
        if !linked {
            std::fs::write(&bf, &b).map_err(io)?;
            st.b_files.entry(b_sha.clone()).or_insert(bf);
        }
        let job = DumpJob {
            job: 0,
            m: inputs.m,
            k: inputs.k,
            n: inputs.n,
            input: self.input.name().to_string(),
            a: String::new(),
            b: String::new(),
            out: String::new(),
            a_sha256: a_sha,
            b_sha256: b_sha,
        };
        st.jobs.push((job, tmp));
        Ok(())
    }

    /// Numbers the jobs, moves them to their final folders and writes
    /// `manifest.json`; returns the number of jobs.
    pub fn finish(self, options: serde_json::Value, boundaries: Vec<usize>) -> Result<usize, String> {
        let mut jobs = self.state.into_inner().unwrap_or_else(|e| e.into_inner()).jobs;
        jobs.sort_by(|(x, _), (y, _)| (x.m, &x.a_sha256, &x.b_sha256).cmp(&(y.m, &y.a_sha256, &y.b_sha256)));
        let mut out = Vec::with_capacity(jobs.len());
        for (i, (mut job, tmp)) in jobs.into_iter().enumerate() {
            job.job = i as u64 + 1;
            let name = job_dir(job.job);
            std::fs::rename(self.dir.join(&tmp), self.dir.join(&name))
                .map_err(|e| format!("{}: {e}", self.dir.join(&name).display()))?;
            job.a = format!("{name}/a.npy");
            job.b = format!("{name}/b.npy");
            job.out = format!("{name}/out.npy");
            out.push(job);
        }
        let n = out.len();
        let m = Manifest {
            schema: DUMP_SCHEMA.into(),
            options,
            input: self.input.name().to_string(),
            boundaries,
            jobs: out,
        };
        let text = serde_json::to_string_pretty(&m).map_err(|e| e.to_string())? + "\n";
        let path = self.dir.join("manifest.json");
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(n)
    }
}

impl Subject for Recorder {
    fn name(&self) -> String {
        "record".into()
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let inputs = JobInputs::of(p, self.input).map_err(|why| SubjectError::Unsupported {
            subject: self.name(),
            why,
        })?;
        self.record(&inputs).map_err(|why| SubjectError::Broken {
            subject: self.name(),
            why,
        })?;
        Ok(vec![0.0; rows.map_or(p.m, <[usize]>::len) * p.n])
    }
}

/// `dump:DIR`: a check answered from a dump folder (see the module doc).
pub struct Dump {
    /// The folder as given (the subject's name).
    given: String,
    dir: PathBuf,
    manifest_input: InType,
    boundaries: Vec<usize>,
    jobs: HashMap<(String, String), DumpJob>,
    /// Jobs whose input files were checked against their digests.
    verified: Mutex<HashSet<u64>>,
}

impl Dump {
    /// Reads and checks `DIR/manifest.json` (one-line errors).
    pub fn open(dir: &str) -> Result<Dump, String> {
        let root = PathBuf::from(dir);
        let path = root.join("manifest.json");
        let show = path.display();
        let len = std::fs::metadata(&path)
            .map_err(|e| format!("dump folder {dir}: {show}: {e} (write one with mxbi bi gen --out {dir} ...)"))?
            .len();
        if len > MAX_MANIFEST_BYTES {
            return Err(format!("{show}: {len} bytes (at most {MAX_MANIFEST_BYTES})"));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{show}: {e}"))?;
        let de = &mut serde_json::Deserializer::from_str(&text);
        let m: Manifest = serde_path_to_error::deserialize(de).map_err(|e| {
            let at = e.path().to_string();
            format!("{show}: at {at}: {}", e.into_inner())
        })?;
        if m.schema != DUMP_SCHEMA {
            return Err(format!("{show}: schema '{}', expected '{DUMP_SCHEMA}'", m.schema));
        }
        let input =
            InType::from_name(&m.input).ok_or_else(|| format!("{show}: at input: unknown type '{}'", m.input))?;
        if m.jobs.len() > MAX_DUMP_JOBS {
            return Err(format!("{show}: {} jobs (at most {MAX_DUMP_JOBS})", m.jobs.len()));
        }
        let mut jobs = HashMap::with_capacity(m.jobs.len());
        let mut ids = HashSet::new();
        for (i, j) in m.jobs.into_iter().enumerate() {
            let d = job_dir(j.job);
            let problem = if !ids.insert(j.job) {
                Some(format!("job {} appears twice", j.job))
            } else if [&j.a, &j.b, &j.out] != [&format!("{d}/a.npy"), &format!("{d}/b.npy"), &format!("{d}/out.npy")] {
                Some(format!("files must be {d}/a.npy, {d}/b.npy and {d}/out.npy"))
            } else if j.input != m.input {
                Some(format!("input '{}' differs from the dump's '{}'", j.input, m.input))
            } else if ![&j.a_sha256, &j.b_sha256].iter().all(|s| is_sha256(s)) {
                Some("a digest is not 64 lower-case hex digits".into())
            } else {
                None
            };
            if let Some(p) = problem {
                return Err(format!("{show}: at jobs[{i}]: {p}"));
            }
            if jobs.insert((j.a_sha256.clone(), j.b_sha256.clone()), j).is_some() {
                return Err(format!("{show}: at jobs[{i}]: the same inputs as an earlier job"));
            }
        }
        Ok(Dump {
            given: dir.to_string(),
            dir: root,
            manifest_input: input,
            boundaries: m.boundaries,
            jobs,
            verified: Mutex::new(HashSet::new()),
        })
    }

    /// The input type of the dump's jobs.
    pub fn input_type(&self) -> InType {
        self.manifest_input
    }

    /// The M boundaries `bi gen` used.
    pub fn boundaries(&self) -> &[usize] {
        &self.boundaries
    }

    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// Checks a job's input files against the images whose digests found
    /// the job (so against the recorded digests).
    fn verify(&self, j: &DumpJob, images: [&[u8]; 2]) -> Result<(), String> {
        if self.verified.lock().unwrap_or_else(|e| e.into_inner()).contains(&j.job) {
            return Ok(());
        }
        for (name, image) in [&j.a, &j.b].into_iter().zip(images) {
            let p = self.dir.join(name);
            let bytes = read_bounded(&p, image.len() as u64).map_err(|e| format!("{}: {e}", p.display()))?;
            if bytes != image {
                return Err(format!(
                    "{}: changed since mxbi bi gen (SHA-256 differs from the manifest)",
                    p.display()
                ));
            }
        }
        self.verified.lock().unwrap_or_else(|e| e.into_inner()).insert(j.job);
        Ok(())
    }
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

impl Subject for Dump {
    fn name(&self) -> String {
        format!("dump:{}", self.given)
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let unsupported = |why: String| SubjectError::Unsupported {
            subject: self.name(),
            why,
        };
        let broken = |why: String| SubjectError::Broken {
            subject: self.name(),
            why,
        };
        let inputs = JobInputs::of(p, self.manifest_input).map_err(unsupported)?;
        let (a_img, b_img) = (inputs.a_npy(), inputs.b_npy());
        let key = (sha256_hex(&a_img), sha256_hex(&b_img));
        let Some(j) = self.jobs.get(&key) else {
            return Err(broken(format!(
                "{} has no job with these inputs (M = {}, K = {}, N = {}): run with the options it was generated with (its manifest.json has them), or generate it again",
                self.given, p.m, p.k, p.n
            )));
        };
        if (j.m, j.k, j.n) != (p.m, p.k, p.n) {
            return Err(broken(format!(
                "{}: job {} lists M = {}, K = {}, N = {}, but its input files are [{}, {}] and [{}, {}]",
                self.dir.join("manifest.json").display(),
                j.job,
                j.m,
                j.k,
                j.n,
                p.m,
                p.k,
                p.k,
                p.n
            )));
        }
        self.verify(j, [&a_img, &b_img]).map_err(broken)?;
        let out = self.dir.join(&j.out);
        if !out.exists() {
            return Err(broken(format!(
                "{} is missing: no runner has answered job {}",
                out.display(),
                j.job
            )));
        }
        let c = read_output(&out, None, j.m, j.n).map_err(broken)?;
        select_rows(c, p.m, p.n, rows).map_err(unsupported)
    }

    fn m_boundaries(&self) -> Vec<usize> {
        self.boundaries.clone()
    }

    fn input(&self) -> Option<InType> {
        Some(self.manifest_input)
    }
}
