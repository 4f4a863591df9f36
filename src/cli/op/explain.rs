//! `mxbi op explain` (which mechanism reproduces each rank's observed
//! all-gather-matmul bytes) and `mxbi op visibility` (where each mechanism
//! preset's LOCAL vs GATHER difference can be seen). File handling and
//! printing only; the numerics are `op::hypotheses` and `op::visibility`.

use super::super::{CliError, Outcome, Result};
use clap::Args;
use mxbi::device::capture::Capture;
use mxbi::device::collective::CollectiveReport;
use mxbi::device::conform::row_digest;
use mxbi::op::divergence::explain_diff;
use mxbi::op::hypotheses::{rank_mechanisms, Observed, Ranking};
use mxbi::op::{agmm, visibility, GenOpts, OpSpec, RankOutput};
use serde_json::json;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// Spec JSON of an all-gather-matmul with MX inputs (its shape and
    /// inputs are used; its paths are not: they are what is identified).
    pub spec: Option<PathBuf>,
    /// Inputs: a directory of NAME.npy files or one .safetensors file.
    #[arg(long, conflicts_with = "generate")]
    pub inputs: Option<PathBuf>,
    /// Regenerate the inputs from this seed (as `mxbi op run --generate`).
    #[arg(long)]
    pub generate: Option<u64>,
    /// x2 scales of generated inputs: identity, k-constant, k-varying.
    #[arg(long, default_value = "identity")]
    pub x2_scales: String,
    /// Observed outputs: a directory with rank{r}.npy ([M, N] f32 per rank,
    /// as `mxbi op run` writes them).
    #[arg(long, conflicts_with = "capture")]
    pub observed: Option<PathBuf>,
    /// A collective capture (reference/captures/collective): the case's
    /// spec, inputs and per-row GPU digests are the observation.
    #[arg(long, requires = "case")]
    pub capture: Option<PathBuf>,
    /// The capture's case name (e.g. agmm-v2-prefix/fma/kvar).
    #[arg(long)]
    pub case: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct VisibilityArgs {
    /// Seed of the generated inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Spec JSON (a full spec or a preset with overrides).
    pub spec: PathBuf,
    /// Inputs: a directory of NAME.npy files or one .safetensors file.
    #[arg(long, conflicts_with = "generate")]
    pub inputs: Option<PathBuf>,
    /// Generate the inputs from this seed.
    #[arg(long)]
    pub generate: Option<u64>,
    /// x2 scales of generated inputs: identity, k-constant, k-varying.
    #[arg(long, default_value = "identity")]
    pub x2_scales: String,
    /// The logical (global) row whose copies are compared.
    #[arg(long)]
    pub row: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn agmm_spec(spec: OpSpec) -> Result<agmm::AgmmSpec> {
    match spec {
        OpSpec::AllGatherMatmul(s) if s.mx_format.is_some() => Ok(s),
        _ => Err(CliError(
            "op explain ranks all-gather-matmul mechanisms: the spec must be an all-gather-matmul with mx_format"
                .into(),
        )),
    }
}

fn print(r: &Ranking, as_json: bool, source: serde_json::Value) -> Result<Outcome> {
    if as_json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "source": source,
                "verdict": r.verdict(),
                "supported": r.supported,
                "ranking": r.ranking,
                "candidates": r.candidates,
                "ranks": r.ranks,
            }))?
        );
    } else {
        out!("{r}");
    }
    Ok(if r.supported.is_empty() {
        Outcome::Failed
    } else {
        Outcome::Held
    })
}

pub fn explain(a: ExplainArgs) -> Result<Outcome> {
    if let Some(dir) = &a.capture {
        let name = a.case.as_deref().unwrap_or_default();
        if a.spec.is_some() || a.inputs.is_some() || a.generate.is_some() {
            return Err(CliError(
                "--capture brings its own spec and inputs; drop SPEC, --inputs, --generate".into(),
            ));
        }
        let cap = Capture::open_anchored(dir)?;
        let report: CollectiveReport = cap.read_json("cases.json")?;
        let rec = report.records.iter().find(|r| r.case.name == name).ok_or_else(|| {
            CliError(format!(
                "no case '{name}' in {}; cases: {}",
                dir.display(),
                report
                    .records
                    .iter()
                    .map(|r| r.case.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let spec = rec.case.resolve()?;
        let inputs = rec.case.inputs(&spec);
        let s = agmm_spec(spec)?;
        let mut per_rank = Vec::with_capacity(rec.gpu_row_digests.len());
        for (r, hex) in rec.gpu_row_digests.iter().enumerate() {
            if hex.len() != 16 * s.m() || !hex.is_ascii() {
                return Err(CliError(format!(
                    "{name}: rank {r}: digests are not 16 hex digits per row"
                )));
            }
            let d: std::result::Result<Vec<u64>, _> = (0..s.m())
                .map(|i| u64::from_str_radix(&hex[16 * i..16 * i + 16], 16))
                .collect();
            per_rank.push(d.map_err(|e| CliError(format!("{name}: rank {r}: {e}")))?);
        }
        let ops = agmm::read(&s, &inputs)?;
        let digest = |row: &[f32]| row_digest(row);
        let r = rank_mechanisms(
            &s,
            &ops,
            &Observed::Digests {
                per_rank: &per_rank,
                digest: &digest,
            },
        )?;
        return print(&r, a.json, json!({"capture": dir, "case": name}));
    }
    let spec_path = a
        .spec
        .as_ref()
        .ok_or_else(|| CliError("give SPEC (with --observed) or --capture DIR --case NAME".into()))?;
    let text = std::fs::read_to_string(spec_path).map_err(|e| CliError(format!("{}: {e}", spec_path.display())))?;
    let spec = OpSpec::from_json(&text)?;
    let inputs = match (&a.inputs, a.generate) {
        (Some(p), _) => super::load_inputs(p)?,
        (None, Some(seed)) => mxbi::op::generate(&spec, &GenOpts::new(seed).x2(super::parse_x2_scales(&a.x2_scales)?)),
        (None, None) => return Err(CliError("give --inputs PATH or --generate SEED".into())),
    };
    let s = agmm_spec(spec)?;
    let dir = a
        .observed
        .as_ref()
        .ok_or_else(|| CliError("give --observed DIR (rank{r}.npy per rank)".into()))?;
    let mut per_rank = Vec::with_capacity(s.world_size);
    for r in 0..s.world_size {
        let p = dir.join(format!("rank{r}.npy"));
        let t = super::super::load(&p, None)?;
        let shape = t.shape().to_vec();
        if shape != [s.m(), s.n] {
            return Err(CliError(format!(
                "{}: shape {shape:?}, expected [{}, {}]",
                p.display(),
                s.m(),
                s.n
            )));
        }
        let data = t
            .as_f32()
            .map_err(|e| CliError(format!("{}: {e}", p.display())))?
            .into_owned();
        per_rank.push(RankOutput {
            rows: s.m(),
            cols: s.n,
            data,
        });
    }
    let ops = agmm::read(&s, &inputs)?;
    let r = rank_mechanisms(&s, &ops, &Observed::Rows(&per_rank))?;
    print(&r, a.json, json!({"observed": dir}))
}

pub fn visibility(a: VisibilityArgs) -> Result<Outcome> {
    let v = visibility::all(a.seed)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        out!("{}", visibility::table(&v));
    }
    Ok(Outcome::Held)
}

/// `mxbi op check`: every copy of one logical row (the op checker's rank
/// check); a failing cell is explained from the provenance records.
pub fn check(a: CheckArgs) -> Result<Outcome> {
    let text = std::fs::read_to_string(&a.spec).map_err(|e| CliError(format!("{}: {e}", a.spec.display())))?;
    let spec = OpSpec::from_json(&text)?;
    let inputs = match (&a.inputs, a.generate) {
        (Some(p), _) => super::load_inputs(p)?,
        (None, Some(seed)) => mxbi::op::generate(&spec, &GenOpts::new(seed).x2(super::parse_x2_scales(&a.x2_scales)?)),
        (None, None) => return Err(CliError("give --inputs PATH or --generate SEED".into())),
    };
    let out = mxbi::op::run_op(&spec, &inputs)?;
    if out.locations(a.row).is_empty() {
        return Err(CliError(format!("row {} is not an output row of this op", a.row)));
    }
    let d = mxbi::op::cross_rank(&out, a.row);
    let v = if d.is_some() {
        mxbi::bi::Verdict::Fail
    } else {
        mxbi::bi::Verdict::Pass
    };
    let div = match &d {
        Some(d) => Some((d.elements, explain_diff(&spec, Some(&inputs), d)?)),
        None => None,
    };
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "row": a.row,
                "verdict": v.name(),
                "elements_differ": div.as_ref().map(|d| d.0),
                "divergence": div.as_ref().map(|d| &d.1),
            }))?
        );
    } else {
        match &div {
            None => outln!("row {}: {} (every copy has the same bytes)", a.row, v.name()),
            Some((n, d)) => {
                outln!("row {}: {} ({n} elements differ)", a.row, v.name());
                out!("{d}");
            }
        }
    }
    Ok(if d.is_none() { Outcome::Held } else { Outcome::Failed })
}
