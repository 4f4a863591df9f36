//! `mxbi explain` (which order produced observed bytes, and where two
//! observations diverge) and `mxbi reveal` (a subject's reduction tree by
//! probing; `reveal gen|solve` through files for external runners, in
//! `reveal_files`). File handling and printing only; the work is
//! `mxbi::explain`.

use super::{input_f32, load, CliError, Outcome, Result};
use clap::Args;
use mxbi::diagnosis::{explain_rows, Reported};
use mxbi::explain::Varies;
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::io::TensorData;
use mxbi::mx::MxFormat;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// A: [M, K] (f32, f16 or bf16 values; uint8 codes with --format).
    /// Required without --case.
    #[arg(long, required_unless_present = "case")]
    pub a: Option<PathBuf>,
    /// B: [K, N] (--b-layout kn) or [N, K] (nk). Required without --case.
    #[arg(long, required_unless_present = "case")]
    pub b: Option<PathBuf>,
    /// How B is stored: kn ([K, N]) or nk ([N, K], B transposed).
    #[arg(long, default_value = "kn")]
    pub b_layout: String,
    /// MX inputs: A and B are codes of this format, with scales.
    #[arg(long)]
    pub format: Option<MxFormat>,
    /// A scales [M, K/32] (E8M0, uint8), with --format.
    #[arg(long)]
    pub a_scales: Option<PathBuf>,
    /// B scales [K/32, N] (kn) or [N, K/32] (nk), with --format.
    #[arg(long)]
    pub b_scales: Option<PathBuf>,
    /// The observed output C: [M, N] (f32, f16 or bf16). Required without
    /// --case.
    #[arg(long, required_unless_present = "case")]
    pub observed: Option<PathBuf>,
    /// A batch-invariance case (mxbi-bi-case/1): explain one of its cells
    /// (--cell), re-running the cell's two sides on its subject.
    #[arg(long, requires = "cell", conflicts_with_all = ["a", "b", "observed", "vs", "format"])]
    pub case: Option<PathBuf>,
    /// The cell id as the report names it (`batch/m=2/k=1024/n=64/row=0`).
    #[arg(long, requires = "case")]
    pub cell: Option<String>,
    /// The case's `exec:` subject (or vs) may run its command (docs/BI.md,
    /// "Case files are data"; also MXBI_ALLOW_EXEC=1).
    #[arg(long, requires = "case")]
    pub allow_exec: bool,
    /// A second observation of the same rows: the two are identified,
    /// diffed and the divergence explained.
    #[arg(long)]
    pub vs: Option<PathBuf>,
    /// Rows to explain (comma-separated; default all).
    #[arg(long, value_delimiter = ',')]
    pub rows: Option<Vec<usize>>,
    /// Add the orders of a dispatch table to the candidates.
    #[arg(long)]
    pub dispatch: Option<PathBuf>,
    /// What differs between the observations, for the fix: `m=1,2` (batch
    /// sizes) or `path=local,gather`.
    #[arg(long)]
    pub varies: Option<String>,
    /// Columns per group of the ULP map.
    #[arg(long, default_value_t = 64)]
    pub n_tile: usize,
    /// Terms per chunk of the K profile.
    #[arg(long, default_value_t = 256)]
    pub k_chunk: usize,
    /// Also say, per element, whether every order of the family gives the
    /// same bytes, and why (all partial sums exact, a two-term sum).
    #[arg(long)]
    pub exactness: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

// ---------------------------------------------------------------- explain

/// Loaded operands.
struct Operands {
    af: Vec<f32>,
    bf: Vec<f32>,
    ca: Vec<u8>,
    cb: Vec<u8>,
    sa: Vec<u8>,
    sb: Vec<u8>,
    format: Option<MxFormat>,
    m: usize,
    k: usize,
    n: usize,
    layout: BLayout,
}

impl Operands {
    fn problem(&self) -> Problem<'_> {
        let (a, b) = match self.format {
            None => (Matrix::F32(&self.af), Matrix::F32(&self.bf)),
            Some(format) => (
                Matrix::Mx {
                    codes: &self.ca,
                    scales: &self.sa,
                    format,
                },
                Matrix::Mx {
                    codes: &self.cb,
                    scales: &self.sb,
                    format,
                },
            ),
        };
        Problem {
            a,
            b,
            m: self.m,
            n: self.n,
            k: self.k,
            b_layout: self.layout,
        }
    }
}

fn dims2(t: &TensorData, p: &Path) -> Result<(usize, usize)> {
    match t.shape() {
        [r, c] => Ok((*r, *c)),
        s => Err(CliError(format!(
            "{}: expected a 2-d array, got shape {s:?}",
            p.display()
        ))),
    }
}

fn load_operands(x: &ExplainArgs) -> Result<Operands> {
    let layout = match x.b_layout.as_str() {
        "kn" => BLayout::Kn,
        "nk" => BLayout::Nk,
        o => return Err(CliError(format!("unknown --b-layout '{o}'; expected kn or nk"))),
    };
    let (Some(pa), Some(pb)) = (&x.a, &x.b) else {
        return Err(CliError("explain needs --a and --b (or --case and --cell)".into()));
    };
    let ta = load(pa, None)?;
    let tb = load(pb, None)?;
    let (m, k) = dims2(&ta, pa)?;
    let (b0, b1) = dims2(&tb, pb)?;
    let (kb, n) = if layout == BLayout::Kn { (b0, b1) } else { (b1, b0) };
    if kb != k {
        return Err(CliError(format!("shape mismatch: A is [{m}, {k}] but B has K = {kb}")));
    }
    let mut o = Operands {
        af: vec![],
        bf: vec![],
        ca: vec![],
        cb: vec![],
        sa: vec![],
        sb: vec![],
        format: x.format,
        m,
        k,
        n,
        layout,
    };
    match x.format {
        None => {
            if x.a_scales.is_some() || x.b_scales.is_some() {
                return Err(CliError("--a-scales/--b-scales need --format (MX inputs)".into()));
            }
            o.af = input_f32(&ta, pa)?.into_owned();
            o.bf = input_f32(&tb, pb)?.into_owned();
        }
        Some(_) => {
            let (Some(sa_path), Some(sb_path)) = (&x.a_scales, &x.b_scales) else {
                return Err(CliError("MX inputs need --a-scales and --b-scales".into()));
            };
            let codes = |t: &TensorData, p: &Path| -> Result<Vec<u8>> {
                t.as_bits8()
                    .map(|c| c.to_vec())
                    .map_err(|_| CliError(format!("{}: MX codes and scales must be uint8", p.display())))
            };
            o.ca = codes(&ta, pa)?;
            o.cb = codes(&tb, pb)?;
            let (sa_path, sb_path) = (sa_path.clone(), sb_path.clone());
            o.sa = codes(&load(&sa_path, None)?, &sa_path)?;
            o.sb = codes(&load(&sb_path, None)?, &sb_path)?;
            let kb = k / mxbi::gemm::MX_BLOCK;
            if !k.is_multiple_of(mxbi::gemm::MX_BLOCK) || o.sa.len() != m * kb || o.sb.len() != kb * n {
                return Err(CliError(format!(
                    "MX inputs: K = {k} must be a multiple of 32, A scales [{m}, {kb}] and B scales [{kb}, {n}] (or [{n}, {kb}] for nk)"
                )));
            }
        }
    }
    Ok(o)
}

/// An observed output `[M, N]` as f32 bits (f16/bf16 widened exactly).
fn load_observed(p: &Path, m: usize, n: usize) -> Result<Vec<f32>> {
    let t = load(p, None)?;
    let (r, c) = dims2(&t, p)?;
    if (r, c) != (m, n) {
        return Err(CliError(format!(
            "{}: shape [{r}, {c}], expected the output shape [{m}, {n}]",
            p.display()
        )));
    }
    Ok(input_f32(&t, p)?.into_owned())
}

fn parse_varies(s: Option<&str>) -> Result<Varies> {
    let Some(s) = s else { return Ok(Varies::Unknown) };
    let bad = || CliError(format!("--varies '{s}': expected m=M1,M2 or path=P1,P2"));
    let (key, v) = s.split_once('=').ok_or_else(bad)?;
    let (l, r) = v.split_once(',').ok_or_else(bad)?;
    match key {
        "m" => Ok(Varies::BatchSize {
            left: l.trim().parse().map_err(|_| bad())?,
            right: r.trim().parse().map_err(|_| bad())?,
        }),
        "path" => Ok(Varies::Path {
            left: l.trim().into(),
            right: r.trim().into(),
        }),
        _ => Err(bad()),
    }
}

pub fn explain(x: ExplainArgs) -> Result<Outcome> {
    if let (Some(case), Some(cell)) = (&x.case, &x.cell) {
        return super::explain_case::explain_case_cell(
            case,
            cell,
            x.allow_exec,
            (x.n_tile, x.k_chunk, x.exactness),
            x.json,
        );
    }
    let ops = load_operands(&x)?;
    let varies = parse_varies(x.varies.as_deref())?;
    let (m, n) = (ops.m, ops.n);
    let rows: Vec<usize> = x.rows.clone().unwrap_or_else(|| (0..m).collect());
    if let Some(&r) = rows.iter().find(|&&r| r >= m) {
        return Err(CliError(format!("--rows: row {r} is out of range (M = {m})")));
    }
    if rows.is_empty() {
        return Err(CliError("--rows: no rows to explain".into()));
    }
    let observed_path = x
        .observed
        .as_deref()
        .ok_or_else(|| CliError("explain needs --observed".into()))?;
    let observed = load_observed(observed_path, m, n)?;
    let vs = x.vs.as_deref().map(|p| load_observed(p, m, n)).transpose()?;
    // rows whose outputs are all NaN or Inf carry no order information
    let blind = |c: &[f32], r: usize| c[r * n..(r + 1) * n].iter().all(|v| !v.is_finite());
    let (rows, dropped): (Vec<usize>, Vec<usize>) = rows
        .iter()
        .partition(|&&r| !blind(&observed, r) && !vs.as_deref().is_some_and(|v| blind(v, r)));
    for r in &dropped {
        super::write_stderr_line(&format!(
            "mxbi: row {r}: every output is NaN or Inf; it carries no order information (an input NaN or Inf, or an overflow), skipped"
        ));
    }
    if rows.is_empty() {
        return Err(CliError(format!(
            "nothing to explain: every output of the {} row(s) asked is NaN or Inf",
            dropped.len()
        )));
    }
    let entries = x
        .dispatch
        .as_deref()
        .map(mxbi::diagnosis::dispatch_orders)
        .transpose()
        .map_err(|e| CliError(e.0))?
        .unwrap_or_default();
    let p = ops.problem();
    let Reported {
        rows: json,
        text,
        ok,
        across,
        ..
    } = explain_rows(
        &p,
        &rows,
        &observed,
        vs.as_deref(),
        &entries,
        &varies,
        (x.n_tile, x.k_chunk, x.exactness),
    )
    .map_err(|e| CliError(e.0))?;
    if x.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"rows": json, "across_rows": across}))?
        );
    } else {
        out!("{text}");
    }
    Ok(if ok { Outcome::Held } else { Outcome::Failed })
}
