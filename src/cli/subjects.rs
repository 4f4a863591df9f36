//! Subject specs, parsed in one place: `KIND:ARG` -> a [`Subject`].
//!
//! Kinds: `model:ORDER` (the CPU model), `dispatch:FILE` (an order chosen by
//! shape from a JSON table), `op:PRESET` (an op model, `src/op/subject.rs`),
//! `exec:CMD` (an external runner, default options), `dump:DIR` (a dump
//! folder), the GPU kinds (`cuda:`, `cublas:`, `cublaslt:`; they say
//! what they need when built without feature `cuda`) and `nccl:PRESET`
//! (an op on several GPUs, src/device/nccl_subject.rs; its spec is checked
//! in every build, the subject built only with feature `nccl`). `op:` and
//! `nccl:` take `,paths=SET` (src/op/path_sets.rs). `bi run` passes
//! runner options (`--timeout`, `--keep`, `--input`) to `exec:`/`dump:`
//! itself (src/cli/bi.rs).
//! Each arm builds its subject under the matrix cell's [`Knobs`]; a subject
//! that cannot honour a set knob is refused with one line.

use crate::op::subject::OpSubject;
use crate::order::Order;
use crate::subject::{Dispatch, Dump, Exec, ExecOptions, Knobs, Model, ScaleKind, Subject};
use std::path::Path;

/// Most bytes a dispatch table file may have.
const MAX_TABLE_BYTES: u64 = 1 << 20;

/// The kinds this build knows, for error messages.
fn kinds() -> &'static str {
    "model:ORDER, dispatch:FILE, op:PRESET[,paths=SET], exec:CMD, dump:DIR, cuda:ORDER, cublas:NAME, cublaslt:NAME or nccl:PRESET[,world=W][,paths=SET]"
}

/// Builds the subject named by `spec` under `knobs` (one-line errors).
pub fn subject_from_spec(spec: &str, knobs: &Knobs) -> Result<Box<dyn Subject>, String> {
    if let Some(gpu) = crate::device::subject::gpu_subject_from_spec(spec) {
        knobs.refuse_any(spec, "a GPU kernel on one device")?;
        return gpu;
    }
    let (kind, arg) = spec
        .split_once(':')
        .ok_or_else(|| format!("subject '{spec}': expected KIND:ARG ({})", kinds()))?;
    match kind {
        "model" => {
            let order: Order = arg.parse().map_err(|e| format!("subject '{spec}': {e}"))?;
            knobs.refuse_any(spec, "the CPU model is one device with plain inputs")?;
            Ok(Box::new(Model::new(order)))
        }
        "dispatch" => {
            knobs.refuse_any(spec, "a dispatch table is one device with plain inputs")?;
            Ok(Box::new(dispatch_table(arg)?))
        }
        "op" => op_subject(spec, arg, knobs),
        // parsed in every build; built only with feature `nccl`
        "nccl" => crate::device::nccl_subject::nccl_subject(arg, knobs),
        "exec" => {
            knobs.refuse_any(spec, "an external runner computes whole batches on its own device")?;
            Ok(Box::new(Exec::start(arg, ExecOptions::default())?))
        }
        "dump" => {
            knobs.refuse_any(spec, "a dump folder holds one setting's outputs")?;
            Ok(Box::new(Dump::open(arg)?))
        }
        // further kinds: one arm each
        _ => Err(format!("subject '{spec}': unknown kind '{kind}' ({})", kinds())),
    }
}

/// `op:PRESET[,paths=SET][,x1=ID|VAR][,x2=ID|VAR]`: an op model; an
/// all-gather-matmul preset optionally with its paths replaced by a path
/// set (`crate::op::path_sets`) and its MX scale kinds set as the
/// `x1_scales`/`x2_scales` knobs do (an option and a knob that disagree are
/// refused). With options, reports name the subject by the spec as given.
fn op_subject(spec: &str, arg: &str, knobs: &Knobs) -> Result<Box<dyn Subject>, String> {
    Ok(Box::new(op_model_of(spec, arg, knobs)?))
}

/// The CPU op model behind an `op:` or `nccl:` spec under `knobs` (for
/// `nccl:`, the model its GPUs must reproduce); None for other kinds.
pub fn op_model(spec: &str, knobs: &Knobs) -> Option<Result<OpSubject, String>> {
    match spec.split_once(':') {
        Some(("op", arg)) => Some(op_model_of(spec, arg, knobs)),
        Some(("nccl", arg)) => Some(crate::device::nccl_subject::NcclSpec::parse(arg).and_then(|n| n.model(knobs))),
        _ => None,
    }
}

fn op_model_of(spec: &str, arg: &str, knobs: &Knobs) -> Result<OpSubject, String> {
    let mut parts = arg.split(',');
    let preset = parts.next().unwrap_or("");
    let mut paths = None;
    let mut knobs = *knobs;
    let mut seen: Vec<&str> = Vec::new();
    for opt in parts {
        let (key, val) = opt.split_once('=').unwrap_or((opt, ""));
        if seen.contains(&key) {
            return Err(format!("subject '{spec}': option '{key}' given twice"));
        }
        seen.push(key);
        let scales = |knob: &mut Option<ScaleKind>| -> Result<(), String> {
            let k: ScaleKind = val.parse().map_err(|e| format!("subject '{spec}': {e}"))?;
            match *knob {
                Some(b) if b != k => Err(format!(
                    "subject '{spec}': {key}={k} and the {key}_scales knob {b} disagree"
                )),
                _ => {
                    *knob = Some(k);
                    Ok(())
                }
            }
        };
        match key {
            "paths" => {
                paths = Some(crate::op::path_sets::find(val).map_err(|e| format!("subject '{spec}': {e}"))?);
            }
            "x1" => scales(&mut knobs.x1_scales)?,
            "x2" => scales(&mut knobs.x2_scales)?,
            _ => {
                return Err(format!(
                    "subject '{spec}': unexpected option '{opt}' (op:PRESET[,paths=SET][,x1=ID|VAR][,x2=ID|VAR])"
                ))
            }
        }
    }
    let s = OpSubject::with_paths(preset, paths, &knobs)?;
    Ok(if seen.is_empty() {
        s
    } else {
        s.labelled(spec.to_string())
    })
}

/// Reads a dispatch table file (bounded before reading).
fn dispatch_table(path: &str) -> Result<Dispatch, String> {
    let len = std::fs::metadata(Path::new(path))
        .map_err(|e| format!("dispatch table {path}: {e}"))?
        .len();
    if len > MAX_TABLE_BYTES {
        return Err(format!(
            "dispatch table {path}: {len} bytes (at most {MAX_TABLE_BYTES})"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("dispatch table {path}: {e}"))?;
    Dispatch::parse(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
