//! The subject a fuzz run checks, built from its spec with what the
//! fuzzer draws for it: a dispatch table's K bounds, an op's MX scale kinds
//! and its K multiple (docs/FUZZING.md). The CLI and the Python binding
//! share it.

use crate::gemm::MX_BLOCK;
use crate::order::InType;
use crate::subject::spec::{dispatch_table, RunnerOptions};
use crate::subject::{Knobs, ScaleKind, Subject};
use std::path::Path;

/// The subject, its K boundaries and the knob settings drawn.
pub struct Target {
    pub subject: Box<dyn Subject>,
    pub k_boundaries: Vec<usize>,
    pub knobs: Vec<Knobs>,
    pub k_multiple: usize,
}

/// The subject a `--subject` spec names, with what the fuzzer draws for it
/// (`exec:` runners get `input` and `timeout` seconds; `dump:` is refused).
/// The Python binding's `fuzz` shares it.
pub fn target(spec: &str, input: Option<InType>, timeout: f64) -> Result<Target, String> {
    let (kind, arg) = spec.split_once(':').unwrap_or((spec, ""));
    if kind == "dump" {
        return Err("mxbi fuzz draws new inputs: a dump: folder holds only the jobs it was generated for".into());
    }
    let runner = RunnerOptions {
        input: Some(input.unwrap_or(InType::F32)),
        timeout: Some(std::time::Duration::from_secs_f64(timeout)),
        ..RunnerOptions::default()
    };
    let mut t = Target {
        subject: super::parse(spec, &Knobs::default(), &runner)?.subject,
        k_boundaries: Vec::new(),
        knobs: vec![Knobs::default()],
        k_multiple: 1,
    };
    match kind {
        "dispatch" => {
            // the table was read and checked above; its K bounds
            let d = dispatch_table(Path::new(arg))?;
            t.k_boundaries = d.entries.iter().filter_map(|e| e.k_max).collect();
        }
        "op" => {
            // MX scales come in 32-element blocks along K; draw the scale kinds
            t.k_multiple = MX_BLOCK;
            let var = Some(ScaleKind::Varying);
            for (x1, x2) in [(None, var), (var, None), (var, var)] {
                let k = Knobs {
                    x1_scales: x1,
                    x2_scales: x2,
                    ..Knobs::default()
                };
                if super::subject_from_spec(spec, &k).is_ok() {
                    t.knobs.push(k);
                }
            }
        }
        _ => {}
    }
    Ok(t)
}
