//! AllGatherMatmul: rank `r` holds the x1 shard `[M_per_rank, K]` (global
//! rows `r*M_per_rank ..`), all shards are all-gathered, and every rank
//! computes the full `[WS*M_per_rank, N] = x1_all x x2`.
//!
//! Two paths, as in a kernel with two classes: rows of the rank's own shard
//! take the LOCAL path, rows received from other ranks the GATHER path.
//! Each path has its own [`Order`] and its own x2 scale entry point
//! ([`ScalePoint`]). With `gather` absent one path serves every row.
//!
//! Numeric contract: a path's output rows are exactly
//! `gemm(order, x1[rows], x2')` where `x2'` is x2 after the scale entry
//! point's transformation (docs/OPS.md). The all-gather copies bytes, so it
//! adds no rounding.

use super::provenance::{Mechanism, RowProvenance};
use super::{need, parse_order, positive, Inputs, OpError, OpOutput, RankOutput, Result};
use crate::format::{encode_f64, CastPolicy, Format, Overflow};
use crate::gemm::{self, BLayout, Matrix, Problem, MX_BLOCK};
use crate::mx::MxFormat;
use crate::order::{MxScale, Order};
use std::fmt;
use std::str::FromStr;

/// Layout of x2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum X2Layout {
    /// `[K, N]`; scales `[K/32, N]`.
    #[default]
    Kn,
    /// `[N, K]` (transposed); scales `[N, K/32]`.
    Nk,
}

/// Where x2's E8M0 scales enter a path (x1's scales always enter as the
/// order's `scale=` key says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalePoint {
    /// Plain (non-MX) inputs: no scales.
    None,
    /// Inside the fused sum (order key `scale=fused`).
    Fused,
    /// Per 32-block rounding into the accumulator (order key `scale=block`).
    Block,
    /// Exact dequantization to f32 before the order runs (`scale=dequant`).
    Dequant,
    /// Folded into x2's elements and re-rounded (RNE, saturating) to a
    /// narrower format: for `e4m3`/`e5m2`, relative to the column's largest
    /// scale (which becomes the column's only scale); for `bf16`/`f16`,
    /// fully (x2 becomes plain values, x1 is dequantized exactly).
    Requant(Format),
    /// Folded into the output: x2's scales must be constant along K per
    /// column; the GEMM runs with x2 scale 2^0 and column j of the result is
    /// multiplied by 2^X(j) (one RN to f32).
    Output,
}

impl fmt::Display for ScalePoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScalePoint::None => f.write_str("none"),
            ScalePoint::Fused => f.write_str("fused"),
            ScalePoint::Block => f.write_str("block"),
            ScalePoint::Dequant => f.write_str("dequant"),
            ScalePoint::Requant(t) => write!(f, "requant:{}", t.name()),
            ScalePoint::Output => f.write_str("output"),
        }
    }
}

impl FromStr for ScalePoint {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "none" => ScalePoint::None,
            "fused" => ScalePoint::Fused,
            "block" => ScalePoint::Block,
            "dequant" => ScalePoint::Dequant,
            "output" => ScalePoint::Output,
            "requant:e4m3" => ScalePoint::Requant(Format::E4M3),
            "requant:e5m2" => ScalePoint::Requant(Format::E5M2),
            "requant:bf16" => ScalePoint::Requant(Format::BF16),
            "requant:f16" => ScalePoint::Requant(Format::F16),
            _ => {
                return Err(format!(
                "unknown scale point '{s}'; expected none, fused, block, dequant, output, requant:e4m3, requant:e5m2, requant:bf16 or requant:f16"
            ))
            }
        })
    }
}

impl serde::Serialize for ScalePoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for ScalePoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One path: its order and where x2's scales enter.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathSpec {
    pub order: String,
    #[serde(default = "scale_none")]
    pub scale_point: ScalePoint,
}

fn scale_none() -> ScalePoint {
    ScalePoint::None
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgmmSpec {
    pub world_size: usize,
    pub m_per_rank: usize,
    pub k: usize,
    pub n: usize,
    #[serde(default)]
    pub x2_layout: X2Layout,
    /// MX format of x1 and x2 (codes + scales); null: plain f32 values.
    #[serde(default)]
    pub mx_format: Option<MxFormat>,
    /// Rows of the rank's own shard.
    pub local: PathSpec,
    /// Rows received from other ranks; null: the LOCAL path serves all rows.
    #[serde(default)]
    pub gather: Option<PathSpec>,
}

impl AgmmSpec {
    pub fn m(&self) -> usize {
        self.world_size * self.m_per_rank
    }

    pub fn validate(&self) -> Result<()> {
        positive("world_size", self.world_size)?;
        positive("m_per_rank", self.m_per_rank)?;
        positive("k", self.k)?;
        positive("n", self.n)?;
        if self.mx_format.is_some() {
            need(self.k.is_multiple_of(MX_BLOCK), || {
                format!("k = {} is not a multiple of the MX block ({MX_BLOCK})", self.k)
            })?;
        }
        for (name, p) in [("local", Some(&self.local)), ("gather", self.gather.as_ref())] {
            let Some(p) = p else { continue };
            let o = parse_order(&format!("{name}.order"), &p.order)?;
            check_point(name, &o, p.scale_point, self.mx_format.is_some())?;
        }
        Ok(())
    }

    pub fn input_shapes(&self) -> Vec<(String, Vec<usize>, bool)> {
        let (m, k, n) = (self.m(), self.k, self.n);
        let x2 = match self.x2_layout {
            X2Layout::Kn => vec![k, n],
            X2Layout::Nk => vec![n, k],
        };
        let mx = self.mx_format.is_some();
        let mut v = vec![("x1".into(), vec![m, k], mx), ("x2".into(), x2, mx)];
        if mx {
            let kb = k / MX_BLOCK;
            v.push(("x1_scales".into(), vec![m, kb], true));
            v.push((
                "x2_scales".into(),
                match self.x2_layout {
                    X2Layout::Kn => vec![kb, n],
                    X2Layout::Nk => vec![n, kb],
                },
                true,
            ));
        }
        v
    }

    /// The path a row takes on `rank`: (is_local, spec).
    pub fn path_for(&self, rank: usize, global_row: usize) -> (bool, &PathSpec) {
        let owner = global_row / self.m_per_rank;
        match (&self.gather, owner == rank) {
            (Some(g), false) => (false, g),
            _ => (true, &self.local),
        }
    }
}

fn check_point(name: &str, o: &Order, sp: ScalePoint, mx: bool) -> Result<()> {
    let bad = |msg: String| Err(OpError::Spec(format!("{name}: {msg}")));
    match (mx, sp) {
        (false, ScalePoint::None) => Ok(()),
        (false, _) => bad(format!("scale_point '{sp}' needs MX inputs (set mx_format)")),
        (true, ScalePoint::None) => bad("MX inputs need a scale_point".into()),
        (true, ScalePoint::Fused | ScalePoint::Block | ScalePoint::Dequant) => {
            let want = match sp {
                ScalePoint::Fused => MxScale::Fused,
                ScalePoint::Block => MxScale::Block,
                _ => MxScale::Dequant,
            };
            if o.scale != want {
                return bad(format!(
                    "scale_point '{sp}' needs the order key scale={sp} (order '{o}')"
                ));
            }
            Ok(())
        }
        (true, ScalePoint::Requant(Format::BF16 | Format::F16)) => {
            if o.scale != MxScale::Dequant {
                return bad(format!(
                    "scale_point '{sp}' makes the inputs plain values; the order must not set scale= (order '{o}')"
                ));
            }
            Ok(())
        }
        (true, _) => Ok(()),
    }
}

/// The x1 and x2 operands as read from the inputs.
pub struct Operands<'a> {
    pub x1: &'a [f32],
    pub x2: &'a [f32],
    pub c1: &'a [u8],
    pub s1: &'a [u8],
    pub c2: &'a [u8],
    pub s2: &'a [u8],
}

fn read<'a>(spec: &AgmmSpec, inputs: &'a Inputs) -> Result<Operands<'a>> {
    let sh = spec.input_shapes();
    let mut o = Operands {
        x1: &[],
        x2: &[],
        c1: &[],
        s1: &[],
        c2: &[],
        s2: &[],
    };
    for (name, shape, _) in &sh {
        match (name.as_str(), spec.mx_format.is_some()) {
            ("x1", false) => o.x1 = inputs.values(name, shape)?,
            ("x2", false) => o.x2 = inputs.values(name, shape)?,
            ("x1", true) => o.c1 = inputs.bytes(name, shape)?,
            ("x2", true) => o.c2 = inputs.bytes(name, shape)?,
            ("x1_scales", _) => o.s1 = inputs.bytes(name, shape)?,
            ("x2_scales", _) => o.s2 = inputs.bytes(name, shape)?,
            _ => {}
        }
    }
    Ok(o)
}

/// x2 scale byte of (k-block kb, column j).
fn x2_scale(spec: &AgmmSpec, s2: &[u8], kb: usize, j: usize) -> u8 {
    match spec.x2_layout {
        X2Layout::Kn => s2[kb * spec.n + j],
        X2Layout::Nk => s2[j * (spec.k / MX_BLOCK) + kb],
    }
}

fn x2_index(spec: &AgmmSpec, kk: usize, j: usize) -> usize {
    match spec.x2_layout {
        X2Layout::Kn => kk * spec.n + j,
        X2Layout::Nk => j * spec.k + kk,
    }
}

fn pow2(e: i32) -> f64 {
    2f64.powi(e)
}

/// Computes the given global rows of x1 through one path; row-major
/// `[rows.len(), N]`. This is the model a GPU's bytes are compared with.
pub fn path_rows(spec: &AgmmSpec, path: &PathSpec, inputs: &Inputs, rows: &[usize]) -> Result<Vec<f32>> {
    let ops = read(spec, inputs)?;
    path_rows_with(spec, path, &ops, rows)
}

fn path_rows_with(spec: &AgmmSpec, path: &PathSpec, o: &Operands, rows: &[usize]) -> Result<Vec<f32>> {
    let order = parse_order("order", &path.order)?;
    let (m, k, n) = (spec.m(), spec.k, spec.n);
    let b_layout = match spec.x2_layout {
        X2Layout::Kn => BLayout::Kn,
        X2Layout::Nk => BLayout::Nk,
    };
    let problem = |a: Matrix<'_>, b: Matrix<'_>| -> Result<Vec<f32>> {
        let p = Problem {
            a,
            b,
            m,
            n,
            k,
            b_layout,
        };
        Ok(gemm::gemm(&order, &p, Some(rows))?)
    };
    let Some(fmt) = spec.mx_format else {
        return problem(Matrix::F32(o.x1), Matrix::F32(o.x2));
    };
    let kb = k / MX_BLOCK;
    let x1 = Matrix::Mx {
        codes: o.c1,
        scales: o.s1,
        format: fmt,
    };
    let x2 = Matrix::Mx {
        codes: o.c2,
        scales: o.s2,
        format: fmt,
    };
    let el = fmt.element();
    let no_nan_scales = || -> Result<()> {
        if let Some(i) = o.s2.iter().position(|&s| s == 0xFF) {
            return Err(OpError::Input(format!(
                "x2_scales[{i}] is 0xFF (NaN); scale point '{}' needs finite scales",
                path.scale_point
            )));
        }
        Ok(())
    };
    match path.scale_point {
        ScalePoint::None | ScalePoint::Fused | ScalePoint::Block | ScalePoint::Dequant => problem(x1, x2),
        ScalePoint::Output => {
            no_nan_scales()?;
            let mut col = vec![0u8; n];
            for (j, c) in col.iter_mut().enumerate() {
                *c = x2_scale(spec, o.s2, 0, j);
                if let Some(b) = (1..kb).find(|&b| x2_scale(spec, o.s2, b, j) != *c) {
                    return Err(OpError::Input(format!(
                        "scale point 'output' needs x2 scales constant along K; column {j} changes at K-block {b}"
                    )));
                }
            }
            let ones = vec![127u8; o.s2.len()];
            let x2u = Matrix::Mx {
                codes: o.c2,
                scales: &ones,
                format: fmt,
            };
            let mut c = problem(x1, x2u)?;
            for (idx, v) in c.iter_mut().enumerate() {
                let x = col[idx % n] as i32 - 127;
                *v = (*v as f64 * pow2(x)) as f32;
            }
            Ok(c)
        }
        ScalePoint::Requant(to @ (Format::E4M3 | Format::E5M2)) => {
            no_nan_scales()?;
            let to_mx = if to == Format::E4M3 {
                MxFormat::Fp8E4M3
            } else {
                MxFormat::Fp8E5M2
            };
            let mut pol = CastPolicy::ieee(to);
            pol.overflow = Overflow::Saturate;
            let sref: Vec<u8> = (0..n)
                .map(|j| (0..kb).map(|b| x2_scale(spec, o.s2, b, j)).max().unwrap_or(127))
                .collect();
            let mut codes = o.c2.to_vec();
            for (j, &sr) in sref.iter().enumerate() {
                for kk in 0..k {
                    let d = sr as i32 - x2_scale(spec, o.s2, kk / MX_BLOCK, j) as i32;
                    let i = x2_index(spec, kk, j);
                    if d == 0 && to == el {
                        continue;
                    }
                    let v = el.decode_f64(o.c2[i] as u16) * pow2(-d);
                    codes[i] = encode_f64(v, to, &pol, i as u64)
                        .map_err(|e| OpError::Input(format!("x2 requant to {to}: {e}")))?
                        as u8;
                }
            }
            let scales: Vec<u8> = match spec.x2_layout {
                X2Layout::Kn => (0..kb * n).map(|i| sref[i % n]).collect(),
                X2Layout::Nk => (0..n * kb).map(|i| sref[i / kb]).collect(),
            };
            let x2r = Matrix::Mx {
                codes: &codes,
                scales: &scales,
                format: to_mx,
            };
            problem(x1, x2r)
        }
        ScalePoint::Requant(to) => {
            // Both operands become plain values: x1 exactly dequantized, x2
            // dequantized then rounded (RNE) to `to`.
            let pol = CastPolicy {
                overflow: Overflow::Saturate,
                ..CastPolicy::ieee(to)
            };
            let deq = |c: u8, s: u8| -> f64 {
                if s == 0xFF {
                    f64::NAN
                } else {
                    el.decode_f64(c as u16) * pow2(s as i32 - 127)
                }
            };
            let a: Vec<f32> = (0..m * k)
                .map(|i| deq(o.c1[i], o.s1[(i / k) * kb + (i % k) / MX_BLOCK]) as f32)
                .collect();
            let mut b = vec![0f32; k * n];
            for j in 0..n {
                for kk in 0..k {
                    let i = x2_index(spec, kk, j);
                    let v = deq(o.c2[i], x2_scale(spec, o.s2, kk / MX_BLOCK, j));
                    let c = encode_f64(v, to, &pol, i as u64)
                        .map_err(|e| OpError::Input(format!("x2 requant to {to}: {e}")))?;
                    b[i] = to.decode_f32(c);
                }
            }
            problem(Matrix::F32(&a), Matrix::F32(&b))
        }
    }
}

pub fn run(spec: &AgmmSpec, inputs: &Inputs) -> Result<OpOutput> {
    let ops = read(spec, inputs)?;
    let (m, n, ws, mpr) = (spec.m(), spec.n, spec.world_size, spec.m_per_rank);
    let all: Vec<usize> = (0..m).collect();
    // Each path's rows depend only on the row and x2, so every path is
    // evaluated once for all rows and each rank picks its rows.
    let local = path_rows_with(spec, &spec.local, &ops, &all)?;
    let gather = match &spec.gather {
        Some(g) => Some(path_rows_with(spec, g, &ops, &all)?),
        None => None,
    };
    let split = spec.gather.as_ref().is_some_and(|g| *g != spec.local);
    let canon = |p: &PathSpec| parse_order("order", &p.order);
    let local_order = canon(&spec.local)?;
    let gather_order = spec.gather.as_ref().map(canon).transpose()?;
    let mut per_rank = Vec::with_capacity(ws);
    let mut provenance = Vec::with_capacity(ws * m);
    for r in 0..ws {
        let mut data = Vec::with_capacity(m * n);
        for g in 0..m {
            let (is_local, p) = spec.path_for(r, g);
            let src = if is_local { &local } else { gather.as_ref().unwrap() };
            data.extend_from_slice(&src[g * n..(g + 1) * n]);
            let path = match (&spec.gather, is_local) {
                (None, _) => "single",
                (_, true) => "local",
                _ => "gather",
            };
            provenance.push(RowProvenance {
                rank: r,
                row: g,
                global_row: g,
                computed_on: vec![r],
                path: path.into(),
                order: if is_local {
                    local_order
                } else {
                    gather_order.unwrap_or(local_order)
                },
                scale_point: spec.mx_format.map(|_| p.scale_point.to_string()),
                reduction: None,
                mechanisms: if split { vec![Mechanism::PathSplit] } else { vec![] },
                detail: Some(format!(
                    "x1 shard of rank {} (row {} of {mpr}), all-gathered to rank {r}",
                    g / mpr,
                    g % mpr
                )),
            });
        }
        per_rank.push(RankOutput { rows: m, cols: n, data });
    }
    Ok(OpOutput { per_rank, provenance })
}
