//! The subjects this build can build from a spec: the one
//! [`Factory`](crate::subject::spec::Factory) with every kind, listed once
//! ([`factory`]), for the CLI, the case files and the Python binding.
//!
//! Kinds: `model:ORDER`, `dispatch:FILE`, `exec:CMD`, `dump:DIR`
//! (`crate::subject::spec`), `op:PRESET[,paths=SET]` (`crate::op::spec`),
//! the GPU kinds `cuda:`, `cublas:`, `cublaslt:` (`crate::device::subject`;
//! they say what they need when built without feature `cuda`) and
//! `nccl:PRESET` (`crate::device::nccl_subject`; its spec is checked in
//! every build, the subject built only with feature `nccl`). This module
//! sits above `op` and `device`, which register the kinds; the checking
//! layers never import it (tests/layering.rs).

pub mod allow_exec;
pub mod fuzz_target;

use crate::op::subject::OpSubject;
use crate::subject::spec::{self, Factory, Parsed, RunnerOptions};
use crate::subject::{Knobs, Subject};

/// Every subject kind of this build, in the order messages list them.
pub fn factory() -> Factory {
    let [cuda, cublas, cublaslt] = crate::device::subject::KINDS;
    Factory::new(vec![
        spec::MODEL,
        spec::DISPATCH,
        crate::op::spec::OP,
        spec::EXEC,
        spec::DUMP,
        cuda,
        cublas,
        cublaslt,
        crate::device::nccl_subject::KIND,
    ])
}

/// The subject `spec` names under `knobs` (runner options at their
/// defaults); one-line errors.
pub fn subject_from_spec(spec: &str, knobs: &Knobs) -> Result<Box<dyn Subject>, String> {
    factory().subject(spec, knobs)
}

/// The subject `spec` names with the caller's runner options.
pub fn parse(spec: &str, knobs: &Knobs, runner: &RunnerOptions) -> Result<Parsed, String> {
    factory().parse(spec, knobs, runner)
}

/// The CPU op model behind an `op:` or `nccl:` spec under `knobs` (for
/// `nccl:`, the model its GPUs must reproduce); None for other kinds.
pub fn op_model(spec: &str, knobs: &Knobs) -> Option<Result<OpSubject, String>> {
    match spec.split_once(':') {
        Some(("op", arg)) => Some(crate::op::spec::op_model(spec, arg, knobs)),
        Some(("nccl", arg)) => Some(crate::device::nccl_subject::NcclSpec::parse(arg).and_then(|n| n.model(knobs))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subject::ScaleKind;

    #[test]
    fn kinds_and_knobs() {
        assert_eq!(
            subject_from_spec("model:fma", &Knobs::default()).unwrap().name(),
            "model:fma"
        );
        let ws4 = Knobs {
            world_size: Some(4),
            ..Knobs::default()
        };
        let e = subject_from_spec("model:fma", &ws4).err().unwrap();
        assert!(e.contains("takes no knobs (ws=4)"), "{e}");
        let s = subject_from_spec("op:agmm-v2-prefix", &ws4).unwrap();
        assert_eq!((s.name().as_str(), s.world_size()), ("op:agmm-v2-prefix", 4));
        let bad = Knobs {
            world_size: Some(3),
            x2_scales: Some(ScaleKind::Varying),
            ..Knobs::default()
        };
        let e = subject_from_spec("op:agmm-v2-prefix", &bad).err().unwrap();
        assert!(e.contains("does not support world size 3"), "{e}");
        let e = subject_from_spec("op:rmsnorm", &Knobs::default()).err().unwrap();
        assert!(e.contains("is not a subject") && e.contains("not a GEMM"), "{e}");
        let e = subject_from_spec("op:nope", &Knobs::default()).err().unwrap();
        assert!(e.contains("unknown preset 'nope'"), "{e}");
        let e = subject_from_spec("op:quant-per-tensor", &ws4).err().unwrap();
        assert!(e.contains("takes no knobs"), "{e}");
        let s = subject_from_spec("op:agmm-v2-prefix,paths=fma", &Knobs::default()).unwrap();
        assert_eq!(s.name(), "op:agmm-v2-prefix,paths=fma");
        let e = subject_from_spec("op:agmm-v2-prefix,paths=x", &Knobs::default())
            .err()
            .unwrap();
        assert!(e.contains("unknown path set 'x'"), "{e}");
        let e = subject_from_spec("op:agmm-v2-prefix,world=2", &Knobs::default())
            .err()
            .unwrap();
        assert!(e.contains("unexpected option 'world=2'"), "{e}");
        let e = subject_from_spec("op:quant-per-tensor,paths=fma", &Knobs::default())
            .err()
            .unwrap();
        assert!(e.contains("all-gather-matmul presets only"), "{e}");
        let e = subject_from_spec("nccl:agmm-v2-prefix,world=3", &Knobs::default())
            .err()
            .unwrap();
        assert!(e.contains("does not support world size 3"), "{e}");
        let e = subject_from_spec("gpu0", &Knobs::default()).err().unwrap();
        assert!(e.contains("expected KIND:ARG"), "{e}");
        let e = subject_from_spec("foo:bar", &Knobs::default()).err().unwrap();
        assert!(e.contains("unknown kind 'foo'"), "{e}");
    }

    #[test]
    fn the_usage_is_the_one_messages_have_always_listed() {
        assert_eq!(
            factory().usage(),
            "model:ORDER, dispatch:FILE, op:PRESET[,paths=SET], exec:CMD, dump:DIR, cuda:ORDER, cublas:NAME, cublaslt:NAME or nccl:PRESET[,world=W][,paths=SET]"
        );
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn gpu_kinds_say_what_they_need() {
        let e = subject_from_spec("cublas:sgemm", &Knobs::default()).err().unwrap();
        assert!(e.starts_with("cublas: this mxbi was built without GPU support"), "{e}");
        let e = subject_from_spec("cuda:nope", &Knobs::default()).err().unwrap();
        assert!(e.starts_with("subject 'cuda:nope': "), "{e}");
    }
}
