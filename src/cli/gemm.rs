//! `mxbi gemm`, `mxbi order`, `mxbi trace`: file handling and printing only.

use super::{input_f32, load, save, CliError, Result};
use clap::Args;
use mxbi::gemm::{self, BLayout, Matrix, Problem};
use mxbi::io::TensorData;
use mxbi::mx::MxFormat;
use mxbi::order::Order;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct OperandArgs {
    /// A: [M, K] (f32, f16 or bf16 values; uint8 codes with --format).
    #[arg(long)]
    pub a: PathBuf,
    /// B: [K, N] (--b-layout kn) or [N, K] (nk).
    #[arg(long)]
    pub b: PathBuf,
    /// How B is stored: kn ([K, N], row-major) or nk ([N, K], B transposed,
    /// as a weight matrix).
    #[arg(long, default_value = "kn")]
    pub b_layout: String,
    /// MX inputs: A and B are codes of this format, with scales.
    #[arg(long)]
    pub format: Option<MxFormat>,
    /// A scales [M, K/32] (E8M0, uint8).
    #[arg(long)]
    pub a_scales: Option<PathBuf>,
    /// B scales [K/32, N] (kn) or [N, K/32] (nk).
    #[arg(long)]
    pub b_scales: Option<PathBuf>,
    /// The accumulation order (docs/ORDERS.md).
    #[arg(long)]
    pub order: String,
}

#[derive(Args, Debug)]
pub struct GemmArgs {
    #[command(flatten)]
    pub ops: OperandArgs,
    /// Compute only these rows of C (comma-separated); the output is [rows, N].
    #[arg(long, value_delimiter = ',')]
    pub rows: Option<Vec<usize>>,
    /// Use the generic tree evaluator even where a fast kernel exists.
    #[arg(long)]
    pub generic: bool,
    /// Where C goes: [M, N] f32 (.npy or .safetensors).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct OrderArgs {
    /// The order, e.g. "fma;split=4/interleave;ktile=64" or a preset such
    /// as hopper-bf16 (grammar: docs/ORDERS.md).
    pub spec: String,
    /// Compile for this K and print the tree; K is at most 4194304 (mxbi's
    /// K limit).
    #[arg(long)]
    pub k: Option<usize>,
    /// Print every node instead of compressed chains.
    #[arg(long)]
    pub full: bool,
    /// Compare with another order: print the first node where they differ.
    #[arg(long)]
    pub diff: Option<String>,
}

#[derive(Args, Debug)]
pub struct TraceArgs {
    #[command(flatten)]
    pub ops: OperandArgs,
    /// Row of C (0-based) whose element is traced.
    #[arg(long)]
    pub row: usize,
    /// Column of C (0-based) whose element is traced.
    #[arg(long)]
    pub col: usize,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn dims2(t: &TensorData, path: &Path) -> Result<(usize, usize)> {
    match t.shape() {
        [r, c] => Ok((*r, *c)),
        s => Err(CliError(format!(
            "{}: expected a 2-d array, got shape {s:?}",
            path.display()
        ))),
    }
}

/// Loaded operands and the problem they form.
pub(super) struct Loaded {
    a: Vec<u8>,
    b: Vec<u8>,
    af: Vec<f32>,
    bf: Vec<f32>,
    sa: Vec<u8>,
    sb: Vec<u8>,
    format: Option<MxFormat>,
    m: usize,
    n: usize,
    k: usize,
    layout: BLayout,
}

impl Loaded {
    pub(super) fn problem(&self) -> Problem<'_> {
        let (a, b) = match self.format {
            None => (Matrix::F32(&self.af), Matrix::F32(&self.bf)),
            Some(f) => (
                Matrix::Mx {
                    codes: &self.a,
                    scales: &self.sa,
                    format: f,
                },
                Matrix::Mx {
                    codes: &self.b,
                    scales: &self.sb,
                    format: f,
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

pub(super) fn load_operands(o: &OperandArgs) -> Result<Loaded> {
    let layout = match o.b_layout.as_str() {
        "kn" => BLayout::Kn,
        "nk" => BLayout::Nk,
        x => return Err(CliError(format!("unknown --b-layout '{x}'; expected kn or nk"))),
    };
    let ta = load(&o.a, None)?;
    let tb = load(&o.b, None)?;
    let (m, ka) = dims2(&ta, &o.a)?;
    let (b0, b1) = dims2(&tb, &o.b)?;
    let (kb, n) = if layout == BLayout::Kn { (b0, b1) } else { (b1, b0) };
    if ka != kb {
        return Err(CliError(format!(
            "shape mismatch: A is [{m}, {ka}] but B ({}) has K = {kb}",
            if layout == BLayout::Kn { "[K, N]" } else { "[N, K]" }
        )));
    }
    let k = ka;
    let mut l = Loaded {
        a: vec![],
        b: vec![],
        af: vec![],
        bf: vec![],
        sa: vec![],
        sb: vec![],
        format: o.format,
        m,
        n,
        k,
        layout,
    };
    match o.format {
        None => {
            if o.a_scales.is_some() || o.b_scales.is_some() {
                return Err(CliError("--a-scales/--b-scales need --format (MX inputs)".into()));
            }
            l.af = input_f32(&ta, &o.a)?.into_owned();
            l.bf = input_f32(&tb, &o.b)?.into_owned();
        }
        Some(_) => {
            let (Some(pa), Some(pb)) = (&o.a_scales, &o.b_scales) else {
                return Err(CliError("MX inputs need --a-scales and --b-scales".into()));
            };
            let codes = |t: &TensorData, p: &Path| -> Result<Vec<u8>> {
                t.as_bits8()
                    .map(|c| c.to_vec())
                    .map_err(|_| CliError(format!("{}: MX codes must be uint8", p.display())))
            };
            l.a = codes(&ta, &o.a)?;
            l.b = codes(&tb, &o.b)?;
            l.sa = codes(&load(pa, None)?, pa)?;
            l.sb = codes(&load(pb, None)?, pb)?;
        }
    }
    Ok(l)
}

fn parse_order(s: &str) -> Result<Order> {
    Ok(s.parse::<Order>()?)
}

pub fn gemm(a: GemmArgs) -> Result<()> {
    let order = parse_order(&a.ops.order)?;
    let l = load_operands(&a.ops)?;
    let p = l.problem();
    let rows = a.rows.as_deref();
    let c = if a.generic {
        gemm::gemm_generic(&order, &p, rows)?
    } else {
        gemm::gemm(&order, &p, rows)?
    };
    let r = rows.map_or(l.m, |r| r.len());
    save(&a.out, TensorData::from_slice(vec![r, l.n], &c)?)
}

pub fn order(a: OrderArgs) -> Result<()> {
    // every input is checked before anything is printed
    let o = parse_order(&a.spec)?;
    let other = match &a.diff {
        Some(d) => {
            let k = a.k.ok_or_else(|| CliError("--diff needs --k".into()))?;
            let o2 = parse_order(d)?;
            o2.check_size(k)?;
            Some((o2, k))
        }
        None => None,
    };
    if let Some(k) = a.k {
        o.check_size(k)?;
    }
    match o.preset_name() {
        Some(p) => outln!("{o}    (preset {p})"),
        None => outln!("{o}"),
    }
    if let Some((o2, k)) = other {
        match o.compile(k).diff(&o2.compile(k)) {
            None => outln!("same tree for K = {k}"),
            Some(d) => outln!("{d}"),
        }
        return Ok(());
    }
    if let Some(k) = a.k {
        let t = o.compile(k);
        outln!("tree for K = {k}: {} nodes", t.nodes.len());
        if a.full {
            out!("{}", t.listing());
            outln!("root = %{}", t.root);
        } else {
            outln!("{t}");
        }
    }
    Ok(())
}

pub fn trace(a: TraceArgs) -> Result<()> {
    let order = parse_order(&a.ops.order)?;
    let l = load_operands(&a.ops)?;
    let steps = gemm::trace(&order, &l.problem(), a.row, a.col)?;
    for s in &steps {
        if a.json {
            outln!("{}", serde_json::to_string(s)?);
        } else {
            outln!("{:<60} {:>16e}  {}", s.op, s.value, s.bits);
        }
    }
    Ok(())
}
