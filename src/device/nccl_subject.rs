//! The NCCL ops on several GPUs as a checker subject:
//! `nccl:PRESET[,world=W][,paths=SET][,x1=ID|VAR][,x2=ID|VAR]` (feature
//! `nccl`).
//!
//! # Contract
//! - PRESET is an all-gather-matmul preset that is a CPU subject (`op:`):
//!   `agmm-v2-prefix`, `agmm-v2-fixed`. Its paths are replaced by a path
//!   set a Hopper kernel realises (`crate::op::path_sets`, default `fma`),
//!   because the presets' own fused `mma(k=32,f=25)` sum has no generated
//!   kernel. The CPU model of exactly this op is `op:PRESET,paths=SET`: the
//!   switch family compares the two byte for byte.
//! - The job's inputs are read exactly as the CPU op subject reads them
//!   (`OpSubject::agmm_job`: x1 rows as e4m3 codes, E8M0 scales from the
//!   `x1_scales`/`x2_scales` knobs, x2 as shared weights): the same bytes go
//!   to the GPUs and to the model. The M rows are sharded over W ranks
//!   (M must divide by W, else Unsupported); NCCL all-gathers the shards
//!   (codes and scales) and every rank computes every row, its own shard on
//!   the LOCAL path, the others on the GATHER path
//!   (`device::collective`'s runner). [`Subject::run_on_rank`] answers rank
//!   r's copy of the requested rows; `run` is rank 0's.
//! - W comes from `world=W`, else the `world_size` knob, else the preset's
//!   default (2); `x1=`/`x2=` set the MX scale kinds as the
//!   `x1_scales`/`x2_scales` knobs do (an option and a knob that disagree
//!   are refused). The other knobs are those of `op:` (`deterministic_comm`
//!   is accepted and has no effect: the all-gather copies bytes).
//! - The GPUs (0..W) and their communicators are opened once per subject,
//!   at its first run. Fewer GPUs than W, no driver or NCCL library, or
//!   NVLink multicast not disabled (`NCCL_NVLS_ENABLE=0`) is
//!   [`SubjectError::Broken`] with one line (the check stops; exit 2).
//!   Sizes are bounded before anything is allocated on a device.
//! - One GPU run yields every rank's copy of the batch; each copy is handed
//!   out once (asking a rank of the same job again runs the op again), so
//!   the rank family compares the copies of one run and the repeat family
//!   compares real runs.
//! - Without feature `nccl` the spec still parses (errors in the spec are
//!   reported as such) and building the subject is one line saying to
//!   rebuild with the feature.

use crate::op::path_sets::{self, PathSet};
use crate::op::subject::OpSubject;
use crate::subject::spec::{Kind, Parsed};
use crate::subject::{Knobs, ScaleKind, Subject};

/// The default path set.
pub const DEFAULT_PATHS: &str = "fma";

/// A parsed `nccl:` spec.
#[derive(Clone, Debug, PartialEq)]
pub struct NcclSpec {
    pub preset: String,
    /// `world=W` when given.
    pub world: Option<usize>,
    pub paths: &'static PathSet,
    /// `x1=` / `x2=` when given.
    pub x1: Option<ScaleKind>,
    pub x2: Option<ScaleKind>,
}

impl NcclSpec {
    /// Parses the argument of `nccl:` (`PRESET[,world=W][,paths=SET][,x1=K][,x2=K]`);
    /// Err: one line.
    pub fn parse(arg: &str) -> Result<NcclSpec, String> {
        let spec = format!("nccl:{arg}");
        let mut parts = arg.split(',');
        let preset = parts.next().unwrap_or("").trim();
        if preset.is_empty() {
            return Err(format!(
                "subject '{spec}': expected nccl:PRESET[,world=W][,paths=SET][,x1=ID|VAR][,x2=ID|VAR]"
            ));
        }
        let mut world = None;
        let mut paths = None;
        let (mut x1, mut x2) = (None, None);
        for opt in parts {
            match opt.split_once('=') {
                Some(("world", w)) if world.is_none() => {
                    let w: usize = w
                        .parse()
                        .map_err(|_| format!("subject '{spec}': world '{w}' is not a number"))?;
                    crate::limits::check_at_most("world", w, crate::limits::MAX_WORLD, "MAX_WORLD")
                        .map_err(|e| format!("subject '{spec}': {e}"))?;
                    world = Some(w);
                }
                Some(("paths", p)) if paths.is_none() => {
                    paths = Some(path_sets::find(p).map_err(|e| format!("subject '{spec}': {e}"))?);
                }
                Some(("x1", k)) if x1.is_none() => {
                    x1 = Some(k.parse::<ScaleKind>().map_err(|e| format!("subject '{spec}': {e}"))?);
                }
                Some(("x2", k)) if x2.is_none() => {
                    x2 = Some(k.parse::<ScaleKind>().map_err(|e| format!("subject '{spec}': {e}"))?);
                }
                _ => {
                    return Err(format!(
                        "subject '{spec}': unexpected option '{opt}' (options: world=W, paths=SET, x1=ID|VAR, x2=ID|VAR, each at most once)"
                    ))
                }
            }
        }
        Ok(NcclSpec {
            preset: preset.to_string(),
            world,
            paths: paths.unwrap_or_else(|| path_sets::find(DEFAULT_PATHS).expect("the default set exists")),
            x1,
            x2,
        })
    }

    /// The subject's name in reports: the preset, the world size when
    /// given, the path set, the scale kinds when given.
    pub fn name(&self) -> String {
        let mut s = format!("nccl:{}", self.preset);
        if let Some(w) = self.world {
            s.push_str(&format!(",world={w}"));
        }
        s.push_str(&format!(",paths={}", self.paths.name));
        for (k, v) in [("x1", self.x1), ("x2", self.x2)] {
            if let Some(v) = v {
                s.push_str(&format!(",{k}={v}"));
            }
        }
        s
    }

    /// The CPU model of this op under `knobs` with the world size resolved
    /// (Err: one line): the bytes the GPUs are given and must reproduce.
    pub fn model(&self, knobs: &Knobs) -> Result<OpSubject, String> {
        let name = self.name();
        if !self.preset.starts_with("agmm-") {
            return Err(format!(
                "subject '{name}': only all-gather-matmul presets (agmm-*) run as a subject on GPUs; {} is not one",
                self.preset
            ));
        }
        let world = match (self.world, knobs.world_size) {
            (Some(a), Some(b)) if a != b => {
                return Err(format!(
                    "subject '{name}': world={a} and the world_size knob {b} disagree"
                ))
            }
            (a, b) => a.or(b),
        };
        let scales = |what: &str, opt: Option<ScaleKind>, knob: Option<ScaleKind>| match (opt, knob) {
            (Some(a), Some(b)) if a != b => Err(format!(
                "subject '{name}': {what}={a} and the {what}_scales knob {b} disagree"
            )),
            (a, b) => Ok(a.or(b)),
        };
        let knobs = Knobs {
            world_size: world,
            x1_scales: scales("x1", self.x1, knobs.x1_scales)?,
            x2_scales: scales("x2", self.x2, knobs.x2_scales)?,
            ..*knobs
        };
        let model = OpSubject::with_paths(&self.preset, Some(self.paths), &knobs)
            .map_err(|e| format!("subject '{name}': {e}"))?;
        if self.preset == "agmm-v2-coupled" {
            return Err(format!(
                "subject '{name}': the GPU runner does not re-round x1 (x1_requant); use agmm-v2-prefix or agmm-v2-fixed"
            ));
        }
        Ok(model)
    }
}

/// Builds the `nccl:` subject named by `arg` (the part after `nccl:`)
/// under `knobs`; Err: one line (a bad spec, or a build without `nccl`).
pub fn nccl_subject(arg: &str, knobs: &Knobs) -> Result<Box<dyn Subject>, String> {
    let spec = NcclSpec::parse(arg)?;
    let model = spec.model(knobs)?;
    build(spec, model)
}

/// The `nccl:` kind of the subject factory (`crate::subject::spec`): its
/// spec checked in every build, the subject built only with feature `nccl`.
pub const KIND: Kind = Kind {
    name: "nccl",
    usage: "nccl:PRESET[,world=W][,paths=SET]",
    build: |_, arg, knobs, _| nccl_subject(arg, knobs).map(Parsed::of),
    runner: false,
};

#[cfg(not(feature = "nccl"))]
fn build(_: NcclSpec, _: OpSubject) -> Result<Box<dyn Subject>, String> {
    Err("nccl: this mxbi was built without NCCL support; rebuild with `cargo build --release --features nccl`".into())
}

#[cfg(feature = "nccl")]
fn build(spec: NcclSpec, model: OpSubject) -> Result<Box<dyn Subject>, String> {
    Ok(Box::new(on_gpus::NcclSubject::new(spec, model)))
}

#[cfg(feature = "nccl")]
mod on_gpus {
    use super::NcclSpec;
    use crate::device::collective::two_gpu;
    use crate::device::exec::KernelCache;
    use crate::device::nccl::Ranks;
    use crate::device::DeviceError;
    use crate::gemm::Problem;
    use crate::op::subject::{AgmmJob, OpSubject};
    use crate::op::{Inputs, Tensor};
    use crate::order::InType;
    use crate::subject::{Subject, SubjectError};
    use std::sync::Mutex;

    /// Most distinct jobs whose unread rank outputs are kept.
    const KEPT_JOBS: usize = 8;

    /// Most elements of one rank's output or of x1 (`M x N`, `M x K`).
    const MAX_JOB_ELEMENTS: usize = 1 << 28;

    /// The open GPUs and their kernels.
    struct Open {
        ranks: Ranks,
        caches: Vec<KernelCache>,
    }

    // SAFETY: NCCL communicators and CUDA streams may be driven from any
    // host thread provided calls on one communicator are not concurrent;
    // every use of `Open` goes through the subject's Mutex.
    unsafe impl Send for Open {}

    enum State {
        NotYet,
        Open(Open),
        /// Opening failed: every later run is Broken with this line.
        Failed(String),
    }

    type JobKey = (usize, usize, usize, Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>);

    /// The rank outputs `[M, N]` of one GPU run not handed out yet.
    type Unread = Vec<Option<Vec<f32>>>;

    pub struct NcclSubject {
        spec: NcclSpec,
        model: OpSubject,
        world: usize,
        state: Mutex<State>,
        /// One GPU run yields every rank's copy; each copy is handed out at
        /// most once, so asking a rank again re-runs the op (the repeat
        /// family sees real runs) while the other ranks of one run are the
        /// same batch's copies (the rank family's comparison).
        kept: Mutex<Vec<(JobKey, Unread)>>,
    }

    impl NcclSubject {
        pub fn new(spec: NcclSpec, model: OpSubject) -> NcclSubject {
            let world = model.world_size();
            NcclSubject {
                spec,
                model,
                world,
                state: Mutex::new(State::NotYet),
                kept: Mutex::new(Vec::new()),
            }
        }

        fn broken(&self, why: String) -> SubjectError {
            SubjectError::Broken {
                subject: self.name(),
                why,
            }
        }

        fn unsupported(&self, why: String) -> SubjectError {
            SubjectError::Unsupported {
                subject: self.name(),
                why,
            }
        }

        fn open(&self) -> Result<Open, String> {
            let w = self.world;
            crate::device::gpu::check_libraries().map_err(|e| e.to_string())?;
            let count =
                cudarc::driver::CudaContext::device_count().map_err(|e| format!("no CUDA driver or GPU: {e:?}"))?;
            if (count.max(0) as usize) < w {
                return Err(format!("world size {w} needs {w} GPUs; the driver reports {count}"));
            }
            let ranks = Ranks::open(w).map_err(|e| e.to_string())?;
            Ok(Open {
                caches: (0..w).map(|_| KernelCache::default()).collect(),
                ranks,
            })
        }

        /// Rank `rank`'s output `[M, N]` of the job: an unread copy of an
        /// earlier run of the same job, else a new run on the GPUs.
        fn output(&self, job: AgmmJob, rank: usize) -> Result<Vec<f32>, SubjectError> {
            let s = &job.spec;
            let key: JobKey = (
                s.m(),
                s.k,
                s.n,
                job.c1.clone(),
                job.s1.clone(),
                job.c2.clone(),
                job.s2.clone(),
            );
            {
                let mut kept = self.kept.lock().expect("lock");
                if let Some(i) = kept.iter().position(|(k, o)| *k == key && o[rank].is_some()) {
                    let out = kept[i].1[rank].take().expect("checked");
                    if kept[i].1.iter().all(Option::is_none) {
                        kept.remove(i);
                    }
                    return Ok(out);
                }
            }
            let mut state = self.state.lock().expect("lock");
            if let State::NotYet = *state {
                *state = match self.open() {
                    Ok(o) => State::Open(o),
                    Err(e) => State::Failed(e),
                };
            }
            let open = match &mut *state {
                State::Open(o) => o,
                State::Failed(e) => return Err(self.broken(e.clone())),
                State::NotYet => unreachable!("opened above"),
            };
            let (m, k, kb) = (s.m(), s.k, s.k / crate::gemm::MX_BLOCK);
            let (x2_shape, s2_shape) = match s.x2_layout {
                crate::op::agmm::X2Layout::Kn => (vec![k, s.n], vec![kb, s.n]),
                crate::op::agmm::X2Layout::Nk => (vec![s.n, k], vec![s.n, kb]),
            };
            let mut inputs = Inputs::default();
            inputs.insert("x1", Tensor::u8(vec![m, k], job.c1));
            inputs.insert("x1_scales", Tensor::u8(vec![m, kb], job.s1));
            inputs.insert("x2_scales", Tensor::u8(s2_shape, job.s2));
            inputs.insert("x2", Tensor::u8(x2_shape, job.c2));
            let (outs, _notes) =
                two_gpu::agmm(&open.ranks, &mut open.caches, s, &inputs).map_err(|e| self.device_err(e))?;
            drop(state);
            if outs.len() != self.world {
                return Err(SubjectError::Failed {
                    subject: self.name(),
                    why: format!("{} rank outputs from a world of {}", outs.len(), self.world),
                });
            }
            let mut outs: Unread = outs.into_iter().map(Some).collect();
            let mine = outs[rank].take().expect("one output per rank");
            let mut kept = self.kept.lock().expect("lock");
            // an older unread run of this job is superseded
            kept.retain(|(k, _)| *k != key);
            if kept.len() >= KEPT_JOBS {
                kept.remove(0);
            }
            kept.push((key, outs));
            Ok(mine)
        }

        /// Refusals (no kernel for a path, a library's refusal) are per-cell
        /// Unsupported; driver faults Failed.
        fn device_err(&self, e: DeviceError) -> SubjectError {
            let (subject, why) = (self.name(), e.to_string());
            match e {
                DeviceError::Library { .. } | DeviceError::Refused(_) | DeviceError::Compile { .. } => {
                    SubjectError::Unsupported { subject, why }
                }
                _ => SubjectError::Failed { subject, why },
            }
        }
    }

    impl Subject for NcclSubject {
        fn name(&self) -> String {
            self.spec.name()
        }

        fn run(&self, problem: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
            self.run_on_rank(problem, 0, rows)
        }

        fn world_size(&self) -> usize {
            self.world
        }

        fn run_on_rank(&self, p: &Problem, rank: usize, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
            if rank >= self.world {
                return Err(self.unsupported(format!("rank {rank} of world size {}", self.world)));
            }
            let (m, n) = (p.m, p.n);
            for (what, dims) in [("x1 (M x K)", [m, p.k]), ("a rank's output (M x N)", [m, n])] {
                match crate::limits::nonzero_product(&dims) {
                    Some(e) if e <= MAX_JOB_ELEMENTS => {}
                    _ => {
                        return Err(self.unsupported(format!(
                            "{what} = {} x {} is more than {} elements",
                            dims[0],
                            dims[1],
                            crate::limits::show(MAX_JOB_ELEMENTS)
                        )))
                    }
                }
            }
            let all: Vec<usize> = (0..m).collect();
            let rows = rows.unwrap_or(&all);
            if let Some(&g) = rows.iter().find(|&&g| g >= m) {
                return Err(self.unsupported(format!("row {g} is out of range (M = {m})")));
            }
            let job = self.model.agmm_job(p).map_err(|e| match e {
                SubjectError::Unsupported { why, .. } => self.unsupported(why),
                other => other,
            })?;
            let mine = self.output(job, rank)?;
            if mine.len() != m * n {
                return Err(SubjectError::Failed {
                    subject: self.name(),
                    why: format!("rank {rank} returned {} values for M x N = {m} x {n}", mine.len()),
                });
            }
            let mut out = Vec::with_capacity(rows.len() * n);
            for &g in rows {
                out.extend_from_slice(&mine[g * n..(g + 1) * n]);
            }
            Ok(out)
        }

        fn m_boundaries(&self) -> Vec<usize> {
            self.model.m_boundaries()
        }

        fn input(&self) -> Option<InType> {
            self.model.input()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_refuse_in_one_line() {
        let s = NcclSpec::parse("agmm-v2-prefix").unwrap();
        assert_eq!((s.world, s.paths.name), (None, "fma"));
        assert_eq!(s.name(), "nccl:agmm-v2-prefix,paths=fma");
        let s = NcclSpec::parse("agmm-v2-fixed,world=4,paths=wgmma,x2=VAR").unwrap();
        assert_eq!(
            (s.world, s.paths.name, s.x2),
            (Some(4), "wgmma", Some(ScaleKind::Varying))
        );
        assert_eq!(s.name(), "nccl:agmm-v2-fixed,world=4,paths=wgmma,x2=VAR");
        let m = s.model(&Knobs::default()).unwrap();
        assert_eq!((m.name().as_str(), m.world_size()), ("op:agmm-v2-fixed,paths=wgmma", 4));
        for (arg, want) in [
            ("", "expected nccl:PRESET"),
            ("agmm-v2-prefix,world=x", "world 'x' is not a number"),
            ("agmm-v2-prefix,world=2,world=2", "unexpected option 'world=2'"),
            ("agmm-v2-prefix,paths=nope", "unknown path set 'nope'"),
            ("agmm-v2-prefix,foo", "unexpected option 'foo'"),
            ("agmm-v2-prefix,world=99999", "MAX_WORLD"),
            ("agmm-v2-prefix,x2=BIG", "unknown scale kind 'BIG'"),
        ] {
            let e = NcclSpec::parse(arg).unwrap_err();
            assert!(e.contains(want) && !e.contains('\n'), "{arg}: {e}");
        }
        let ws = |w| Knobs {
            world_size: Some(w),
            ..Knobs::default()
        };
        for (arg, knobs, want) in [
            (
                "agmm-v2-prefix,world=3",
                Knobs::default(),
                "does not support world size 3",
            ),
            ("agmm-v2-prefix,world=2", ws(4), "disagree"),
            (
                "agmm-v2-prefix,x2=ID",
                Knobs {
                    x2_scales: Some(ScaleKind::Varying),
                    ..Knobs::default()
                },
                "x2=ID and the x2_scales knob VAR disagree",
            ),
            ("mmar-fixed", Knobs::default(), "only all-gather-matmul presets"),
            ("agmm-v2-coupled", Knobs::default(), "does not re-round x1"),
            ("nope", Knobs::default(), "only all-gather-matmul"),
            ("agmm-nope", Knobs::default(), "unknown preset"),
        ] {
            let e = nccl_subject(arg, &knobs).err().unwrap();
            assert!(e.contains(want) && !e.contains('\n'), "{arg}: {e}");
        }
        // the knobs reach the model
        let k = Knobs {
            world_size: Some(4),
            x2_scales: Some(ScaleKind::Varying),
            ..Knobs::default()
        };
        let m = NcclSpec::parse("agmm-v2-prefix").unwrap().model(&k).unwrap();
        assert_eq!(m.world_size(), 4);
    }

    #[cfg(not(feature = "nccl"))]
    #[test]
    fn without_the_feature_building_says_so() {
        let e = nccl_subject("agmm-v2-prefix", &Knobs::default()).err().unwrap();
        assert!(e.contains("--features nccl"), "{e}");
    }

    /// With the feature and no GPUs here, the subject builds (lazily) and its
    /// first run is Broken with one line.
    #[cfg(feature = "nccl")]
    #[test]
    fn with_the_feature_and_too_few_gpus_the_first_run_is_broken() {
        use crate::gemm::{BLayout, Matrix, Problem};
        use crate::subject::SubjectError;
        let s = nccl_subject("agmm-v2-prefix,world=8", &Knobs::default()).unwrap();
        assert_eq!(s.world_size(), 8);
        let (m, k, n) = (8, 32, 4);
        let a = vec![1.0f32; m * k];
        let b = vec![0.5f32; k * n];
        let p = Problem {
            a: Matrix::F32(&a),
            b: Matrix::F32(&b),
            m,
            n,
            k,
            b_layout: BLayout::Kn,
        };
        // a machine with 8 usable GPUs and NCCL would run it; this one cannot
        match s.run_on_rank(&p, 1, Some(&[0])) {
            Err(SubjectError::Broken { why, .. }) => assert!(!why.contains('\n'), "{why}"),
            Ok(_) => {}
            Err(e) => panic!("expected Broken, got {e}"),
        }
        assert!(matches!(
            s.run_on_rank(&p, 8, None),
            Err(SubjectError::Unsupported { .. })
        ));
    }
}
