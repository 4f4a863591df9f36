//! `mxbi explain` (which order produced observed bytes, and where two
//! observations diverge) and `mxbi reveal` (a subject's reduction tree by
//! probing; `reveal gen|solve` through files for external runners, in
//! `reveal_files`). File handling and printing only; the work is
//! `mxbi::explain`.

use super::{input_f32, load, CliError, Outcome, Result};
use mxbi::diagnosis::{explain_rows, Reported};
use mxbi::explain::{self, RevealOptions, Varies};
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::io::TensorData;
use mxbi::mx::MxFormat;
use mxbi::order::InType;
use mxbi::subject::Subject;
use clap::{Args, Subcommand};
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

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RevealArgs {
    #[command(subcommand)]
    pub files: Option<RevealFiles>,
    #[command(flatten)]
    pub direct: RevealDirect,
}

#[derive(Args, Debug)]
pub struct RevealDirect {
    /// The subject: model:ORDER or dispatch:FILE.
    #[arg(long)]
    pub subject: Option<String>,
    #[command(flatten)]
    pub shape: RevealShape,
    /// Print the recovered tree as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print wall seconds per phase (calibration, probe launches, answer
    /// reading, checks, shape matching, verification) on stderr.
    #[arg(long)]
    pub timings: bool,
    /// Run one untimed launch of the subject at the reveal's shape first
    /// (a GPU subject's first call loads its kernels), as FPRev's timed
    /// comparison does; not counted in `launches`.
    #[arg(long)]
    pub warmup: bool,
    /// Also print the recovered tree node by node (one `nI = sum(...)`
    /// line per addition) when no order names it; the default is a
    /// summary in a few lines.
    #[arg(long)]
    pub tree: bool,
}

#[derive(Args, Debug)]
pub struct RevealShape {
    /// Rows of each probe launch (M); needed to reveal.
    #[arg(long)]
    pub m: Option<usize>,
    /// K, the reduction length whose tree is recovered (reveal probes at
    /// most 65536 terms); needed to reveal.
    #[arg(long)]
    pub k: Option<usize>,
    /// Output columns of each probe launch (N); needed to reveal.
    #[arg(long)]
    pub n: Option<usize>,
    /// Element type the subject reads (default: the model's, else f32), or
    /// an MX format (`mxfp8-e4m3`, ...): codes and E8M0 scales, probed per
    /// block through the scales.
    #[arg(long)]
    pub input: Option<String>,
    /// Seed of the probe values (same seed, same launches).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Subcommand, Debug)]
pub enum RevealFiles {
    /// Write the first round of probe launches to DIR (job-NNNNNN/a.npy,
    /// b.npy); a runner writes each job's out.npy.
    Gen {
        /// The folder the probe launches are written to.
        #[arg(long)]
        dir: PathBuf,
        #[command(flatten)]
        shape: RevealShape,
    },
    /// Read the runner's outputs in DIR: write the next round's launches,
    /// or print the recovered tree when no launch is missing.
    Solve {
        /// The folder `reveal gen` wrote, with the runner's out.npy files.
        #[arg(long)]
        dir: PathBuf,
        /// Print the recovered tree as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
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
        return super::explain_case::explain_case_cell(&x, case, cell);
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

// ---------------------------------------------------------------- reveal

fn input_type(s: Option<&str>, default: Option<InType>) -> Result<InType> {
    match s {
        Some(t) if mx_input(Some(t)).is_some() => Ok(InType::E4M3),
        Some(t) => InType::from_name(t).ok_or_else(|| {
            CliError(format!(
                "--input '{t}': expected one of f32, bf16, f16, e4m3, e5m2 or an MX format (mxfp8-e4m3, ...)"
            ))
        }),
        None => Ok(default.unwrap_or(InType::F32)),
    }
}

/// The MX format `--input` names, if it names one.
pub(super) fn mx_input(s: Option<&str>) -> Option<mxbi::mx::MxFormat> {
    mxbi::mx::MxFormat::ALL.into_iter().find(|f| Some(f.name()) == s)
}

pub(super) fn options(s: &RevealShape, default_input: Option<InType>) -> Result<RevealOptions> {
    let need = |v: Option<usize>, name: &str| v.ok_or_else(|| CliError(format!("reveal needs --{name}")));
    Ok(RevealOptions {
        m: need(s.m, "m")?,
        k: need(s.k, "k")?,
        n: need(s.n, "n")?,
        input: input_type(s.input.as_deref(), default_input)?,
        seed: s.seed,
        verify_rows: 8,
    })
}

pub(super) fn print_revealed(r: &explain::Revealed, as_json: bool, tree: bool) -> Result<()> {
    if as_json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "order": r.order.map(|o| o.to_string()),
                "equivalent": r.equivalent.iter().map(|o| o.to_string()).collect::<Vec<_>>(),
                "launches": r.launches,
                "probes": r.probes,
                "scheme": r.scheme,
                "window": r.window,
                "shared_tree": r.disagreement_count == 0,
                "disagreements": r.disagreements,
                "disagreement_count": r.disagreement_count,
                "shape_matches": r.shape_matches.iter().map(|o| o.to_string()).collect::<Vec<_>>(),
                "nearest": r.closest,
                "summary": r.shape.describe(),
                "verified_elements": r.verified_elements,
                "repeated_probes": r.repeats.probes,
                "repeats": r.repeats.repeats,
                "repeated_answers": r.repeats.answers,
                "tree": r.shape.listing(),
                "m": r.m, "k": r.k, "n": r.n, "input": r.input,
                "mx": r.mx,
                "distinct_probes": r.distinct_probes,
                "checked": r.checked,
            }))?
        );
    } else {
        out!("{r}");
        if !r.to_string().ends_with('\n') {
            outln!();
        }
        if tree && r.order.is_none() {
            outln!("the recovered tree:\n{}", r.shape.listing());
        }
    }
    Ok(())
}

/// A data-dependent order (the probes repeated with other values gave
/// other counts): one headline, then the changed answers (at most 16
/// listed), or the JSON `{"data_dependent": true, ...}`. Exit 1: a check
/// failed, no tree is reported.
pub(super) fn print_data_dependent(rep: &explain::Repeats, as_json: bool) -> Result<Outcome> {
    let headline = explain::RevealError::DataDependent(Box::new(rep.clone())).to_string();
    if as_json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "data_dependent": true,
                "headline": headline,
                "order": null,
                "repeated_probes": rep.probes,
                "repeats": rep.repeats,
                "answers": rep.answers,
                "changed_probes": rep.changed_probes,
                "changed_count": rep.changed_count,
                "changed": rep.changed,
            }))?
        );
        return Ok(Outcome::Failed);
    }
    outln!("{headline}");
    for r in &rep.repeats {
        outln!("  repeat {r}");
    }
    for c in &rep.changed {
        let window = c.window.map(|w| format!(", window {w}")).unwrap_or_default();
        let after = match c.after {
            Some(a) => format!("{a} units"),
            None => format!("{:e}, not a whole number of units", c.value),
        };
        outln!(
            "  {} launch {} C[{}, {}]: probe (+B at k={}, -B at k={}{window}) counted {} units, now {after}",
            c.repeat,
            c.launch,
            c.row,
            c.col,
            c.p,
            c.q,
            c.before
        );
    }
    if rep.changed_count > rep.changed.len() {
        outln!("  ... {} more changed answers", rep.changed_count - rep.changed.len());
    }
    Ok(Outcome::Failed)
}

/// Exit status of a reveal: held when one tree explains every probe and
/// the grammar can say it.
pub(super) fn outcome(r: &explain::Revealed) -> Outcome {
    if r.disagreement_count == 0 && r.order.is_some() {
        Outcome::Held
    } else {
        Outcome::Failed
    }
}

pub fn reveal(a: RevealArgs) -> Result<Outcome> {
    match a.files {
        Some(RevealFiles::Gen { dir, shape }) => return super::reveal_files::gen(&dir, &shape),
        Some(RevealFiles::Solve { dir, json }) => return super::reveal_files::solve(&dir, json),
        None => {}
    }
    let spec = a
        .direct
        .subject
        .as_deref()
        .ok_or_else(|| CliError("reveal needs --subject SPEC (or the gen/solve subcommands)".into()))?;
    let parsed = super::bi::parse_subject(spec)?;
    let o = options(&a.direct.shape, parsed.subject.input().or(parsed.input))?;
    let mx = mx_input(a.direct.shape.input.as_deref());
    let subject = parsed.subject.as_ref();
    let t0 = std::time::Instant::now();
    if a.direct.warmup {
        warm_up(subject, &o, mx)?;
    }
    let warm = t0.elapsed().as_secs_f64();
    let r = match mx {
        Some(f) => explain::reveal_mx(subject, o, f),
        None => explain::reveal(subject, o),
    };
    let r = match r {
        Err(explain::RevealError::DataDependent(rep)) => return print_data_dependent(&rep, a.direct.json),
        r => r?,
    };
    if a.direct.timings {
        if a.direct.warmup {
            super::write_stderr_line(&format!("reveal timing: warm-up launch (not counted) {warm:.3} s"));
        }
        for (what, secs) in &r.timings {
            super::write_stderr_line(&format!("reveal timing: {what} {secs:.3} s"));
        }
    }
    print_revealed(&r, a.direct.json, a.direct.tree)?;
    Ok(outcome(&r))
}

/// One launch of zeros at the reveal's shape (its answer is not used).
fn warm_up(subject: &dyn Subject, o: &RevealOptions, mx: Option<MxFormat>) -> Result<()> {
    let (a, b) = (vec![0f32; o.m * o.k], vec![0f32; o.k * o.n]);
    let (ca, cb) = (vec![0u8; o.m * o.k], vec![0u8; o.k * o.n]);
    let blocks = o.k / mxbi::gemm::MX_BLOCK;
    let (sa, sb) = (vec![127u8; o.m * blocks], vec![127u8; blocks * o.n]);
    let (a, b) = match mx {
        None => (Matrix::F32(&a), Matrix::F32(&b)),
        Some(format) => (
            Matrix::Mx {
                codes: &ca,
                scales: &sa,
                format,
            },
            Matrix::Mx {
                codes: &cb,
                scales: &sb,
                format,
            },
        ),
    };
    let p = Problem {
        a,
        b,
        m: o.m,
        n: o.n,
        k: o.k,
        b_layout: BLayout::Kn,
    };
    subject
        .run(&p, None)
        .map(|_| ())
        .map_err(|e| CliError(format!("reveal --warmup: {e}")))
}
