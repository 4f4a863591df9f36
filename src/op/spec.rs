//! The `op:` subject kind: `op:PRESET[,paths=SET][,x1=ID|VAR][,x2=ID|VAR]`,
//! an op model as a subject ([`super::subject::OpSubject`]); an
//! all-gather-matmul preset optionally with its paths replaced by a path
//! set ([`super::path_sets`]) and its MX scale kinds set as the
//! `x1_scales`/`x2_scales` knobs do (an option and a knob that disagree are
//! refused). With options, reports name the subject by the spec as given.

use super::subject::OpSubject;
use crate::subject::spec::{Kind, Parsed, RunnerOptions};
use crate::subject::{Knobs, ScaleKind};

/// The `op:` kind of the subject factory.
pub const OP: Kind = Kind {
    name: "op",
    usage: "op:PRESET[,paths=SET]",
    build: build_op,
    runner: false,
};

fn build_op(spec: &str, arg: &str, knobs: &Knobs, _: &RunnerOptions) -> Result<Parsed, String> {
    Ok(Parsed::of(Box::new(op_model(spec, arg, knobs)?)))
}

/// The op model `spec` (`op:ARG`) names under `knobs`.
pub fn op_model(spec: &str, arg: &str, knobs: &Knobs) -> Result<OpSubject, String> {
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
                paths = Some(super::path_sets::find(val).map_err(|e| format!("subject '{spec}': {e}"))?);
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
