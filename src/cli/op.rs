//! `mxbi op list`, `mxbi op run`: fused comm+matmul op models
//! (docs/OPS.md). File handling and printing only.

mod explain;

use super::{CliError, Outcome, Result};
use clap::{Args, Subcommand};
use mxbi::io;
use mxbi::op::{self, presets, GenOpts, Inputs, OpSpec, Tensor, X2Scales};
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum OpCommand {
    /// List the op presets.
    List,
    /// Run an op spec: per-rank outputs (rank{r}.npy) and provenance.json.
    Run(RunArgs),
    /// Rank the mechanisms (one path, scale-point split, K-loop schedule
    /// split, content coupling) by which reproduces each rank's observed
    /// all-gather-matmul bytes (docs/OPS.md).
    Explain(explain::ExplainArgs),
    /// Where each mechanism preset's LOCAL vs GATHER difference is visible,
    /// per x1/x2 scale combination (the exactness analysis, docs/OPS.md).
    Visibility(explain::VisibilityArgs),
    /// Compare every rank's copy of one all-gather row; on a difference,
    /// name the first diverging node from the op provenance records.
    Check(explain::CheckArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Spec JSON: a full spec ({"op": ...}) or {"preset": NAME, overrides}.
    pub spec: PathBuf,
    /// Inputs: a directory of NAME.npy files or one .safetensors file.
    #[arg(long, conflicts_with = "generate")]
    pub inputs: Option<PathBuf>,
    /// Generate deterministic inputs from this seed (written to OUT/inputs/).
    #[arg(long)]
    pub generate: Option<u64>,
    /// x2 scales of generated AllGatherMatmul MX inputs: identity,
    /// k-constant, k-varying.
    #[arg(long, default_value = "identity")]
    pub x2_scales: String,
    /// Run number (only non-deterministic reductions look at it).
    #[arg(long, default_value_t = 0)]
    pub trial: u64,
    /// The output folder: rank{r}.npy, provenance.json (and inputs/ with
    /// --generate).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(c: OpCommand) -> Result<Outcome> {
    match c {
        OpCommand::List => {
            for p in presets::PRESETS {
                let ws = match p.world {
                    Some((key, sizes)) => format!(
                        " [{key}: {}]",
                        sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("|")
                    ),
                    None => String::new(),
                };
                outln!("{:<22} {}{ws}", p.name, p.description);
            }
            Ok(Outcome::Held)
        }
        OpCommand::Run(a) => run_spec(a).map(|_| Outcome::Held),
        OpCommand::Explain(a) => explain::explain(a),
        OpCommand::Visibility(a) => explain::visibility(a),
        OpCommand::Check(a) => explain::check(a),
    }
}

fn parse_x2_scales(s: &str) -> Result<X2Scales> {
    match s {
        "identity" => Ok(X2Scales::Identity),
        "k-constant" => Ok(X2Scales::KConstant),
        "k-varying" => Ok(X2Scales::KVarying),
        s => Err(CliError(format!(
            "unknown --x2-scales '{s}'; expected identity, k-constant or k-varying"
        ))),
    }
}

fn load_inputs(path: &Path) -> Result<Inputs> {
    let mut inp = Inputs::default();
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| CliError(format!("{}: {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "npy"))
            .collect();
        files.sort();
        for f in files {
            let name = f.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            let t = super::load(&f, None)?;
            inp.insert(&name, Tensor::from_tensor_data(&name, &t)?);
        }
    } else {
        for e in io::list_tensors(path)? {
            let t = super::load(path, Some(&e.name))?;
            inp.insert(&e.name, Tensor::from_tensor_data(&e.name, &t)?);
        }
    }
    Ok(inp)
}

fn run_spec(a: RunArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.spec).map_err(|e| CliError(format!("{}: {e}", a.spec.display())))?;
    let spec = OpSpec::from_json(&text)?;
    let x2 = parse_x2_scales(&a.x2_scales)?;
    let inputs = match (&a.inputs, a.generate) {
        (Some(p), _) => load_inputs(p)?,
        (None, Some(seed)) => {
            let inp = op::generate(&spec, &GenOpts::new(seed).x2(x2));
            let dir = a.out.join("inputs");
            std::fs::create_dir_all(&dir).map_err(|e| CliError(format!("{}: {e}", dir.display())))?;
            for (name, t) in &inp.0 {
                io::write_tensor(dir.join(format!("{name}.npy")), name, &t.to_tensor_data())?;
            }
            inp
        }
        (None, None) => return Err(CliError("give --inputs PATH or --generate SEED".into())),
    };
    // created once the inputs are read: a bad input leaves no output folder
    std::fs::create_dir_all(&a.out).map_err(|e| CliError(format!("{}: {e}", a.out.display())))?;
    let out = op::run_op_trial(&spec, &inputs, a.trial)?;
    for (r, o) in out.per_rank.iter().enumerate() {
        let t = mxbi::io::TensorData::from_slice(vec![o.rows, o.cols], &o.data)?;
        io::write_tensor(a.out.join(format!("rank{r}.npy")), "out", &t)?;
    }
    let prov = serde_json::json!({
        "spec": spec,
        "trial": a.trial,
        "rows": out.provenance,
    });
    std::fs::write(a.out.join("provenance.json"), serde_json::to_string_pretty(&prov)?)
        .map_err(|e| CliError(format!("{}: {e}", a.out.display())))?;
    outln!(
        "{} ranks, {} rows with provenance -> {}",
        out.per_rank.len(),
        out.provenance.len(),
        a.out.display()
    );
    Ok(())
}
