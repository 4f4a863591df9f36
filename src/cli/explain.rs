//! `mxbi explain` (which order produced observed bytes, and where two
//! observations diverge) and `mxbi reveal` (a subject's reduction tree by
//! probing; `reveal gen|solve` through files for external runners, in
//! `reveal_files`). File handling and printing only; the work is
//! `crate::explain`.

use super::{input_f32, load, CliError, Outcome, Result};
use crate::explain::candidates::{self, Inputs};
use crate::explain::{self, IdentifyOptions, RevealOptions, RowIdentity, Varies};
use crate::gemm::{BLayout, Matrix, Problem};
use crate::io::TensorData;
use crate::mx::MxFormat;
use crate::order::{InType, Order};
use crate::subject::{Dispatch, Subject};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
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
            let kb = k / crate::gemm::MX_BLOCK;
            if !k.is_multiple_of(crate::gemm::MX_BLOCK) || o.sa.len() != m * kb || o.sb.len() != kb * n {
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

fn read_dispatch(p: &Path) -> Result<Vec<Order>> {
    let len = std::fs::metadata(p)
        .map_err(|e| CliError(format!("dispatch table {}: {e}", p.display())))?
        .len();
    if len > 1 << 20 {
        return Err(CliError(format!(
            "dispatch table {}: {len} bytes (at most 1 MiB)",
            p.display()
        )));
    }
    let text = std::fs::read_to_string(p).map_err(|e| CliError(format!("dispatch table {}: {e}", p.display())))?;
    let d = Dispatch::parse(&p.display().to_string(), &text).map_err(CliError)?;
    Ok(d.entries.iter().map(|e| e.order).collect())
}

fn identity_json(id: &RowIdentity) -> Value {
    json!({
        "order": id.order().map(|o| o.to_string()),
        "equivalent": id.matches.iter().skip(1).map(|o| o.to_string()).collect::<Vec<_>>(),
        "same_tree": id.classes.first().map(|c| c.iter().skip(1).map(|o| o.to_string()).collect::<Vec<_>>()).unwrap_or_default(),
        "closest": id.closest,
        "evaluated": id.evaluated,
        "skipped": id.skipped,
    })
}

pub fn explain(x: ExplainArgs) -> Result<Outcome> {
    if let (Some(case), Some(cell)) = (&x.case, &x.cell) {
        return explain_cell(&x, case, cell);
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
    let entries = x
        .dispatch
        .as_deref()
        .map(read_dispatch)
        .transpose()?
        .unwrap_or_default();
    let p = ops.problem();
    let (json, text, ok, across) = report(
        &p,
        &rows,
        &observed,
        vs.as_deref(),
        &entries,
        &varies,
        (x.n_tile, x.k_chunk, x.exactness),
    )?;
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

/// The cross-row answer as JSON (`order` null when no order reproduces
/// every row; `groups` then says which order reproduces which rows).
fn across_json(a: &explain::AcrossRows) -> Value {
    json!({
        "rows": a.rows,
        "order": a.order().map(|o| o.to_string()),
        "reproduces_every_row": a.order().is_some(),
        "classes": a.classes.iter().map(|c| c.iter().map(|o| o.to_string()).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "groups": a.groups.iter().map(|g| json!({"order": g.order.to_string(), "rows": g.rows})).collect::<Vec<_>>(),
        "unmatched_rows": a.unmatched,
    })
}

/// The results of [`report`]: JSON rows, text, whether every row is
/// reproduced by some order (and, over two or more rows, one order
/// reproduces them all), and the cross-row answers as JSON.
type Reported = (Vec<Value>, String, bool, Value);

/// Identifies `rows` of `observed` (and of `vs`), and for each row with
/// two observations diffs their orders; over two or more rows, one
/// headline per observation first: the order that reproduces every row,
/// or that none does ([`explain::across_rows`]).
#[allow(clippy::too_many_arguments)]
fn report(
    p: &Problem,
    rows: &[usize],
    observed: &[f32],
    vs: Option<&[f32]>,
    entries: &[Order],
    varies: &Varies,
    (n_tile, k_chunk, exactness): (usize, usize, bool),
) -> Result<Reported> {
    let (n, k) = (p.n, p.k);
    let mx = matches!(p.a, Matrix::Mx { .. });
    let cands = candidates::with_dispatch(Inputs::of(p), k, entries);
    let pick = |c: &[f32]| -> Vec<f32> { rows.iter().flat_map(|&r| c[r * n..(r + 1) * n].to_vec()).collect() };
    let opts = IdentifyOptions::default();
    let seen = explain::identify(p, rows, &pick(observed), &cands, opts).map_err(CliError)?;
    let other = match vs {
        Some(v) => Some(explain::identify(p, rows, &pick(v), &cands, opts).map_err(CliError)?),
        None => None,
    };
    let p = *p;
    let ops_k = k;
    let mut all_explained = true;
    let mut json_rows = Vec::new();
    let mut text = String::new();
    // one headline per observation over two or more rows
    let across = explain::across_rows(&seen, k);
    let vs_across = other.as_ref().map(|o| explain::across_rows(o, k));
    if rows.len() > 1 {
        text.push_str(&format!("observed {across}"));
        all_explained &= across.order().is_some();
        if let Some(a) = &vs_across {
            text.push_str(&format!("vs       {a}"));
            all_explained &= a.order().is_some();
        }
    }
    let across_value = json!({
        "observed": across_json(&across),
        "vs": vs_across.as_ref().map(across_json),
    });
    for (i, id) in seen.iter().enumerate() {
        let r = id.row;
        all_explained &= !id.matches.is_empty();
        let mut row_json = json!({"row": r, "observed": identity_json(id)});
        text.push_str(&format!("observed {id}\n"));
        if exactness {
            let family: Vec<Order> = cands.iter().map(|c| c.order).collect();
            let e = explain::analyze(&p, &[r], &family).map_err(CliError)?;
            let proven = e.iter().filter(|x| x.reason.is_some()).count();
            let same = e.iter().filter(|x| x.same_bytes).count();
            let first_reason = e.iter().find_map(|x| x.reason.clone());
            let witness = e.iter().find(|x| x.witness.is_some());
            text.push_str(&format!(
                "  exactness over {} orders: {proven} of {n} elements provably the same in every order, {same} the same on these inputs",
                family.len()
            ));
            if let Some(reason) = &first_reason {
                text.push_str(&format!(" (e.g. {reason})"));
            }
            if let Some(w) = witness.and_then(|x| x.witness.as_ref().map(|wt| (x.col, wt))) {
                text.push_str(&format!(
                    "; column {} differs: {} gives {:08x}, {} gives {:08x}",
                    w.0, w.1.left, w.1.left_bits, w.1.right, w.1.right_bits
                ));
            }
            text.push('\n');
            row_json["exactness"] = json!({
                "orders": family.len(),
                "proven": proven,
                "same_bytes": same,
                "elements": e,
            });
        }
        if let (Some(ov), Some(v)) = (&other, vs) {
            let vid = &ov[i];
            all_explained &= !vid.matches.is_empty();
            text.push_str(&format!("vs       {vid}\n"));
            row_json["vs"] = identity_json(vid);
            let map = explain::ulp_map(&observed[r * n..(r + 1) * n], &v[r * n..(r + 1) * n], n_tile);
            let differ: usize = map.iter().map(|t| t.differ).sum();
            row_json["ulp_map"] = json!(map);
            if differ == 0 {
                text.push_str("  the two observations are byte-identical\n");
            } else {
                text.push_str(&format!(
                    "  {differ} of {n} elements differ; by {}-column tile (differing, max ulp):",
                    n_tile.max(1)
                ));
                for t in map.iter().filter(|t| t.differ > 0) {
                    text.push_str(&format!(" [{}..{}] {} / {}", t.cols.0, t.cols.1, t.differ, t.max_ulp));
                }
                text.push('\n');
            }
            if let (Some(lo), Some(ro)) = (id.order(), vid.order()) {
                let diff = explain::diverge(&lo, &ro, ops_k, mx);
                let fixes = explain::suggest(&diff, varies);
                let prof = explain::k_profile(&p, r, &lo, &ro, k_chunk).map_err(CliError)?;
                text.push_str(&format!("  {}\n", diff.to_string().trim_end().replace('\n', "\n  ")));
                if let Some(c) = prof.iter().find(|c| c.differ > 0) {
                    text.push_str(&format!(
                        "  along K: identical while only the terms k < {} are present; with the terms k < {}, {} elements differ (max {} ulp)\n",
                        prof.iter().take_while(|c| c.differ == 0).last().map_or(0, |c| c.k_end),
                        c.k_end,
                        c.differ,
                        c.max_ulp
                    ));
                }
                for f in &fixes {
                    text.push_str(&format!("  fix: {f}\n"));
                }
                row_json["divergence"] = json!({
                    "left": lo.to_string(),
                    "right": ro.to_string(),
                    "first_node": diff.divergence,
                    "common_terms": diff.common_terms,
                    "left_at": diff.left_at,
                    "right_at": diff.right_at,
                    "mechanisms": diff.mechanisms,
                    "words": diff.to_string(),
                    "k_profile": prof,
                    "fixes": fixes.iter().map(|f| json!({"fix": f, "words": f.to_string()})).collect::<Vec<_>>(),
                });
            } else {
                row_json["divergence"] = Value::Null;
            }
        }
        json_rows.push(row_json);
    }
    Ok((json_rows, text, all_explained, across_value))
}

/// Resolves a relative `dispatch:` path of a case against the case's folder.
fn resolve_spec(spec: &str, base: &Path) -> String {
    match spec.split_once(':') {
        Some(("dispatch", p)) if Path::new(p).is_relative() => format!("dispatch:{}", base.join(p).display()),
        _ => spec.to_string(),
    }
}

/// A row id of the checker's batches: the target row is id 0, the others
/// come from set A (0) or B (1) by index (the checker's own numbering).
fn other_id(set: u64, j: usize) -> u64 {
    1 + (set << 40) + j as u64
}

/// The checker's batch of M rows with the target at `at`.
fn with_target(m: usize, at: usize, set: u64) -> Vec<u64> {
    let mut ids: Vec<u64> = (0..m - 1).map(|j| other_id(set, j)).collect();
    ids.insert(at, 0);
    ids
}

/// `mxbi explain --case CASE --cell ID`: the cell's two sides re-run on the
/// case's subject, and the target row's two observations explained.
fn explain_cell(x: &ExplainArgs, case_path: &Path, cell: &str) -> Result<Outcome> {
    use crate::bi::{Family, RowPos, Rows};
    let case = super::bi_case::load(case_path)?;
    let base = case_path.parent().unwrap_or(Path::new("."));
    let spec = resolve_spec(&case.subject, base);
    let mut subject = super::bi::parse_subject(&spec)?;
    // a subject setting (op: scale kinds, world size) builds the subject
    // under it, as `bi run CASE` does
    let knobs = case.knobs.unwrap_or_default();
    if !knobs.is_empty() {
        let s = super::subjects::subject_from_spec(&spec, &knobs).map_err(|e| CliError(format!("knobs: {e}")))?;
        subject = super::bi::ParsedSubject {
            input: s.input(),
            boundaries: s.m_boundaries(),
            subject: s,
            kept: None,
        };
    }
    let vs = case
        .vs
        .as_ref()
        .map(|s| super::bi::parse_subject(&resolve_spec(s, base)))
        .transpose()?;
    let opts = case.options(subject.input, &subject.boundaries).map_err(CliError)?;
    opts.validate(vs.is_some()).map_err(CliError)?;
    let bad = |why: &str| CliError(format!("--cell '{cell}': {why}"));
    let parts: Vec<&str> = cell.split('/').collect();
    let field = |i: usize, key: &str| -> Result<String> {
        parts
            .get(i)
            .and_then(|p| p.strip_prefix(key))
            .map(str::to_string)
            .ok_or_else(|| bad("expected FAMILY/m=M/k=K/n=N/row=ROW"))
    };
    let family: Family = parts
        .first()
        .ok_or_else(|| bad("empty"))?
        .parse()
        .map_err(|e: String| bad(&e))?;
    let m: usize = field(1, "m=")?.parse().map_err(|_| bad("m is not a number"))?;
    let (k, n) = (opts.k, opts.n);
    if field(2, "k=")? != k.to_string() || field(3, "n=")? != n.to_string() {
        return Err(bad(&format!("the case runs k={k}, n={n}")));
    }
    if !opts.families.contains(&family) || !opts.ms.contains(&m) {
        return Err(bad("the case has no such family or batch size"));
    }
    let row = field(4, "row=")?;
    let rows = Rows::new(opts.seed, k, n, opts.input);
    let m0 = opts.ms[0];
    let pos = |mm: usize| -> Result<usize> {
        let p: RowPos = row.parse().map_err(|e: String| bad(&e))?;
        p.resolve(mm)
            .ok_or_else(|| bad("the row position does not exist at this M"))
    };
    // rank cells: `.../rank=R/held|owned` (rank 0 is the baseline's)
    let rank_of = || -> Result<(usize, bool)> {
        let r: usize = field(5, "rank=")?.parse().map_err(|_| bad("rank is not a number"))?;
        let ws = subject.subject.world_size();
        if r == 0 || r >= ws {
            return Err(bad(&format!("rank {r}: the subject's world size is {ws}")));
        }
        match parts.get(6) {
            Some(&"held") => Ok((r, false)),
            Some(&"owned") => Ok((r, true)),
            _ => Err(bad("expected .../rank=R/held or .../rank=R/owned")),
        }
    };
    // (baseline ids, its target index, variant ids, its target index, other subject)
    let (b_rank, mut v_rank) = (0, 0);
    let (b_ids, bi, v_ids, vi, varies) = match family {
        Family::Content => {
            let i = pos(m)?;
            (with_target(m, i, 0), i, with_target(m, i, 1), i, Varies::Unknown)
        }
        Family::Anchor => {
            // the row at 0 of the first batch vs at ROW of a batch of M
            let i = pos(m)?;
            (
                with_target(m0, 0, 0),
                0,
                with_target(m, i, 0),
                i,
                Varies::BatchSize { left: m0, right: m },
            )
        }
        Family::Rank => {
            let i = pos(m)?;
            let (r, owned) = rank_of()?;
            v_rank = r;
            if owned {
                // the same content at the same shard offset, owned by rank r
                // vs by rank 0 (each computing its own shard)
                let ws = subject.subject.world_size();
                if !m.is_multiple_of(ws) {
                    return Err(bad(&format!("owned cells need M divisible by the world size {ws}")));
                }
                let off = i % (m / ws);
                let at = r * (m / ws) + off;
                (with_target(m, off, 0), off, with_target(m, at, 0), at, Varies::Unknown)
            } else {
                (with_target(m, i, 0), i, with_target(m, i, 0), i, Varies::Unknown)
            }
        }
        Family::Batch => {
            let i = pos(m.min(m0))?;
            (
                with_target(m0, i, 0),
                i,
                with_target(m, i, 0),
                i,
                Varies::BatchSize { left: m0, right: m },
            )
        }
        Family::Position => {
            let i = pos(m)?;
            (with_target(m, 0, 0), 0, with_target(m, i, 0), i, Varies::Unknown)
        }
        Family::Switch => (with_target(m, 0, 0), 0, with_target(m, 0, 0), 0, Varies::Unknown),
        _ => {
            return Err(bad(
                "explain --cell runs content, batch, position, anchor, rank and switch cells",
            ))
        }
    };
    // rank 0 is the copy `run` answers, as the checker asks it
    let run = |s: &dyn Subject, a: &[f32], at: usize, rank: usize| -> Result<Vec<f32>> {
        let p = Problem {
            a: Matrix::F32(a),
            b: Matrix::F32(&rows.b),
            m: a.len() / k,
            n,
            k,
            b_layout: BLayout::Kn,
        };
        Ok(if rank == 0 {
            s.run(&p, Some(&[at]))?
        } else {
            s.run_on_rank(&p, rank, Some(&[at]))?
        })
    };
    let (a_left, a_right) = (rows.batch(&b_ids), rows.batch(&v_ids));
    let left = run(subject.subject.as_ref(), &a_left, bi, b_rank)?;
    let other: &dyn Subject = match (family, &vs) {
        (Family::Switch, Some(v)) => v.subject.as_ref(),
        (Family::Switch, None) => return Err(bad("a switch cell needs the case's vs subject")),
        _ => subject.subject.as_ref(),
    };
    let right = run(other, &a_right, vi, v_rank)?;
    // an op subject (op:, nccl:): the two sides explained with the op's
    // provenance (src/cli/explain_op.rs)
    let vs_spec = case.vs.as_ref().map(|v| resolve_spec(v, base));
    let side = |subject, a, at, rank, bytes| super::explain_op::Side {
        subject,
        a,
        at,
        rank,
        bytes,
    };
    let explained = super::explain_op::for_cell(
        (&spec, &knobs),
        (family == Family::Switch).then_some(vs_spec.as_deref()),
        &side(subject.subject.as_ref(), &a_left, bi, b_rank, &left),
        &side(other, &a_right, vi, v_rank, &right),
        &rows.b,
    )?;
    // the target row as the subject reads it: an all-gather-matmul's MX
    // codes and scales, else the f32 values
    let target = rows.row(0);
    let p = match explained.as_ref().and_then(|e| e.mx.as_ref()) {
        Some(mx) => mx.problem(n),
        None => Problem {
            a: Matrix::F32(&target),
            b: Matrix::F32(&rows.b),
            m: 1,
            n,
            k,
            b_layout: BLayout::Kn,
        },
    };
    let entries = match spec.split_once(':') {
        Some(("dispatch", f)) => read_dispatch(Path::new(f))?,
        _ => Vec::new(),
    };
    let varies = explained.as_ref().and_then(|e| e.varies.clone()).unwrap_or(varies);
    let (mut json_rows, text, ok, _) = report(
        &p,
        &[0],
        &left,
        Some(&right),
        &entries,
        &varies,
        (x.n_tile, x.k_chunk, x.exactness),
    )?;
    if let (Some(e), Some(row)) = (&explained, json_rows.first_mut()) {
        row["op"] = e.json.clone();
    }
    let verdict = if left.iter().zip(&right).all(|(a, b)| a.to_bits() == b.to_bits()) {
        "BI_PASS"
    } else {
        "BI_FAIL"
    };
    if x.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"cell": cell, "subject": subject.subject.name(), "verdict": verdict, "rows": json_rows})
            )?
        );
    } else {
        outln!(
            "cell {cell} on {} ({verdict}): the target row in the baseline batch (observed) vs the variant (vs)",
            subject.subject.name()
        );
        if let Some(e) = &explained {
            out!("{}", e.text);
        }
        out!("{text}");
    }
    // an op cell is explained by its provenance, other cells by an order
    // reproducing each side
    let held = explained.as_ref().map_or(ok, |e| e.held);
    Ok(if held { Outcome::Held } else { Outcome::Failed })
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
pub(super) fn mx_input(s: Option<&str>) -> Option<crate::mx::MxFormat> {
    crate::mx::MxFormat::ALL.into_iter().find(|f| Some(f.name()) == s)
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

pub(super) fn print_revealed(r: &explain::Revealed, as_json: bool) -> Result<()> {
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
    print_revealed(&r, a.direct.json)?;
    Ok(outcome(&r))
}

/// One launch of zeros at the reveal's shape (its answer is not used).
fn warm_up(subject: &dyn Subject, o: &RevealOptions, mx: Option<MxFormat>) -> Result<()> {
    let (a, b) = (vec![0f32; o.m * o.k], vec![0f32; o.k * o.n]);
    let (ca, cb) = (vec![0u8; o.m * o.k], vec![0u8; o.k * o.n]);
    let blocks = o.k / crate::gemm::MX_BLOCK;
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
