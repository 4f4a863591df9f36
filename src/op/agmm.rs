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
use crate::format::{e8m0_exponent, encode_f64, pow2, CastPolicy, Format, Overflow};
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
    /// Re-round x1 on this path to the given format with, per K-block, the
    /// largest x1 scale over the rows of the row's source shard (the rows
    /// that arrive in one gather message): a row's bytes then depend on
    /// the other rows of its shard (content coupling). Null: x1 as given.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_format")]
    pub x1_requant: Option<Format>,
}

/// `x1_requant` as a format name (`e4m3`, `e5m2`).
mod opt_format {
    use crate::format::Format;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Format>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(f) => s.serialize_str(f.name()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Format>, D::Error> {
        match Option::<String>::deserialize(d)?.as_deref() {
            None => Ok(None),
            Some("e4m3") => Ok(Some(Format::E4M3)),
            Some("e5m2") => Ok(Some(Format::E5M2)),
            Some(other) => Err(serde::de::Error::custom(format!(
                "unknown x1_requant format '{other}'; expected e4m3 or e5m2"
            ))),
        }
    }
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
            if let Some(to) = p.x1_requant {
                match self.mx_format {
                    Some(f) if f.element() == to && !matches!(p.scale_point, ScalePoint::Requant(Format::BF16 | Format::F16)) => {}
                    _ => {
                        return Err(OpError::Spec(format!(
                            "{name}: x1_requant '{}' needs MX inputs whose element format it is, and MX operands (not requant:bf16/f16)",
                            to.name()
                        )))
                    }
                }
            }
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

/// The operands of `spec` read from `inputs` (names and shapes checked).
pub fn read<'a>(spec: &AgmmSpec, inputs: &'a Inputs) -> Result<Operands<'a>> {
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

/// Computes the given global rows of x1 through one path; row-major
/// `[rows.len(), N]`. This is the model a GPU's bytes are compared with.
pub fn path_rows(spec: &AgmmSpec, path: &PathSpec, inputs: &Inputs, rows: &[usize]) -> Result<Vec<f32>> {
    let ops = read(spec, inputs)?;
    path_rows_with(spec, path, &ops, rows)
}

/// [`path_rows`] on operands already read.
pub fn path_rows_with(spec: &AgmmSpec, path: &PathSpec, o: &Operands, rows: &[usize]) -> Result<Vec<f32>> {
    let prepared = prepare(spec, path, o)?;
    eval_rows(spec, path, &prepared, o, rows)
}

/// x2 after a path's scale point: a function of x2, its scales and the
/// path only, so it can be computed once and used for any rows.
pub struct Prepared {
    order: Order,
    b: PreparedB,
    /// `output` scale point: the column exponents applied after the GEMM.
    out_exp: Option<Vec<i32>>,
    /// `requant:bf16|f16`: x1 enters exactly dequantized to f32.
    plain_a: bool,
}

impl Prepared {
    /// x2 as this path reads it when its scale point re-rounds x2 to MX
    /// codes (`requant:e4m3|e5m2`): (codes, scales, format); None when the
    /// path reads x2 as given or as plain values.
    pub fn requantized_x2(&self) -> Option<(&[u8], &[u8], MxFormat)> {
        match &self.b {
            PreparedB::Mx { codes, scales, format } if self.out_exp.is_none() => Some((codes, scales, *format)),
            _ => None,
        }
    }
}

enum PreparedB {
    /// x2 as given (plain values or MX codes and scales).
    Given,
    Mx {
        codes: Vec<u8>,
        scales: Vec<u8>,
        format: MxFormat,
    },
    Values(Vec<f32>),
}

/// Prepares x2 for `path` (see [`Prepared`]).
pub fn prepare(spec: &AgmmSpec, path: &PathSpec, o: &Operands) -> Result<Prepared> {
    let order = parse_order("order", &path.order)?;
    let (k, n) = (spec.k, spec.n);
    let given = |b| Prepared {
        order,
        b,
        out_exp: None,
        plain_a: false,
    };
    let Some(fmt) = spec.mx_format else {
        return Ok(given(PreparedB::Given));
    };
    let kb = k / MX_BLOCK;
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
        ScalePoint::None | ScalePoint::Fused | ScalePoint::Block | ScalePoint::Dequant => Ok(given(PreparedB::Given)),
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
            Ok(Prepared {
                order,
                b: PreparedB::Mx {
                    codes: o.c2.to_vec(),
                    scales: vec![127u8; o.s2.len()],
                    format: fmt,
                },
                out_exp: Some(col.iter().map(|&c| e8m0_exponent(c)).collect()),
                plain_a: false,
            })
        }
        ScalePoint::Requant(to @ (Format::E4M3 | Format::E5M2)) => {
            no_nan_scales()?;
            let to_mx = if to == Format::E4M3 {
                MxFormat::Fp8E4M3
            } else {
                MxFormat::Fp8E5M2
            };
            let sref: Vec<u8> = (0..n)
                .map(|j| (0..kb).map(|b| x2_scale(spec, o.s2, b, j)).max().unwrap_or(127))
                .collect();
            let mut codes = o.c2.to_vec();
            let mut shift = Requant::new(el, to);
            for (j, &sr) in sref.iter().enumerate() {
                for kk in 0..k {
                    let d = sr as i32 - x2_scale(spec, o.s2, kk / MX_BLOCK, j) as i32;
                    let i = x2_index(spec, kk, j);
                    if d == 0 && to == el {
                        continue;
                    }
                    codes[i] = shift
                        .get(o.c2[i], d)
                        .map_err(|e| OpError::Input(format!("x2 requant to {to}: {e}")))?;
                }
            }
            let scales: Vec<u8> = match spec.x2_layout {
                X2Layout::Kn => (0..kb * n).map(|i| sref[i % n]).collect(),
                X2Layout::Nk => (0..n * kb).map(|i| sref[i / kb]).collect(),
            };
            Ok(given(PreparedB::Mx {
                codes,
                scales,
                format: to_mx,
            }))
        }
        ScalePoint::Requant(to) => {
            // Both operands become plain values: x1 exactly dequantized, x2
            // dequantized then rounded (RNE) to `to`.
            let pol = CastPolicy {
                overflow: Overflow::Saturate,
                ..CastPolicy::ieee(to)
            };
            let mut b = vec![0f32; k * n];
            for j in 0..n {
                for kk in 0..k {
                    let i = x2_index(spec, kk, j);
                    let v = deq(el, o.c2[i], x2_scale(spec, o.s2, kk / MX_BLOCK, j));
                    let c = encode_f64(v, to, &pol, i as u64)
                        .map_err(|e| OpError::Input(format!("x2 requant to {to}: {e}")))?;
                    b[i] = to.decode_f32(c);
                }
            }
            Ok(Prepared {
                order,
                b: PreparedB::Values(b),
                out_exp: None,
                plain_a: true,
            })
        }
    }
}

/// Re-rounding an element code scaled by `2^-d` (`d >= 0`) into `to`
/// (RNE, saturating): `cast(decode(code) * 2^-d)`, each distinct
/// (code, d) computed once. RNE does not depend on the element's index, so
/// the table gives the bytes the per-element cast gives.
struct Requant {
    el: Format,
    to: Format,
    pol: CastPolicy,
    table: Vec<i16>,
}

impl Requant {
    fn new(el: Format, to: Format) -> Requant {
        let mut pol = CastPolicy::ieee(to);
        pol.overflow = Overflow::Saturate;
        Requant {
            el,
            to,
            pol,
            table: vec![-1; 256 * 256],
        }
    }

    fn get(&mut self, code: u8, d: i32) -> std::result::Result<u8, String> {
        let slot = (d.clamp(0, 255) as usize) << 8 | code as usize;
        if (0..256).contains(&d) && self.table[slot] >= 0 {
            return Ok(self.table[slot] as u8);
        }
        let v = self.el.decode_f64(code as u16) * pow2(-d);
        let c = encode_f64(v, self.to, &self.pol, 0).map_err(|e| e.to_string())? as u8;
        if (0..256).contains(&d) {
            self.table[slot] = c as i16;
        }
        Ok(c)
    }
}

/// An MX element exactly dequantized (NaN for a NaN scale).
fn deq(el: Format, c: u8, s: u8) -> f64 {
    if s == 0xFF {
        f64::NAN
    } else {
        el.decode_f64(c as u16) * pow2(e8m0_exponent(s))
    }
}

/// x1 rows `rows` as the path reads them: MX codes and scales of those rows
/// only, re-rounded when the path sets `x1_requant` (each K-block of a row
/// takes the largest scale over the rows of its source shard).
pub fn x1_rows(spec: &AgmmSpec, path: &PathSpec, o: &Operands, rows: &[usize]) -> Result<(Vec<u8>, Vec<u8>)> {
    let (k, mpr) = (spec.k, spec.m_per_rank);
    let kb = k / MX_BLOCK;
    let mut codes = Vec::with_capacity(rows.len() * k);
    let mut scales = Vec::with_capacity(rows.len() * kb);
    for &g in rows {
        codes.extend_from_slice(&o.c1[g * k..(g + 1) * k]);
        scales.extend_from_slice(&o.s1[g * kb..(g + 1) * kb]);
    }
    let Some(to) = path.x1_requant else {
        return Ok((codes, scales));
    };
    let el = spec.mx_format.expect("validated: x1_requant needs MX inputs").element();
    let mut shift = Requant::new(el, to);
    for (ri, &g) in rows.iter().enumerate() {
        let shard = g / mpr;
        for b in 0..kb {
            let sref = (shard * mpr..(shard + 1) * mpr)
                .map(|r| o.s1[r * kb + b])
                .max()
                .expect("a shard has rows");
            if sref == 0xFF {
                return Err(OpError::Input(format!(
                    "x1_scales of shard {shard}, K-block {b} include 0xFF (NaN); x1_requant needs finite scales"
                )));
            }
            let own = scales[ri * kb + b];
            let d = sref as i32 - own as i32;
            scales[ri * kb + b] = sref;
            if d == 0 && to == el {
                continue;
            }
            for kk in b * MX_BLOCK..(b + 1) * MX_BLOCK {
                let i = ri * k + kk;
                codes[i] = shift
                    .get(codes[i], d)
                    .map_err(|e| OpError::Input(format!("x1 requant to {to}: {e}")))?;
            }
        }
    }
    Ok((codes, scales))
}

/// The given global rows through a prepared path; row-major
/// `[rows.len(), N]`. Reads x1 only at those rows (and, with `x1_requant`,
/// the scales of their source shards): the cost is per row asked.
pub fn eval_rows(spec: &AgmmSpec, path: &PathSpec, pr: &Prepared, o: &Operands, rows: &[usize]) -> Result<Vec<f32>> {
    let (m, k, n) = (spec.m(), spec.k, spec.n);
    if let Some(&g) = rows.iter().find(|&&g| g >= m) {
        return Err(OpError::Shape(format!("row {g} is out of range (M = {m})")));
    }
    if spec.mx_format.is_none() {
        let a: Vec<f32> = rows
            .iter()
            .flat_map(|&g| o.x1[g * k..(g + 1) * k].iter().copied())
            .collect();
        let bm = match &pr.b {
            PreparedB::Values(v) => Matrix::F32(v),
            _ => Matrix::F32(o.x2),
        };
        let b_layout = match spec.x2_layout {
            X2Layout::Kn => BLayout::Kn,
            X2Layout::Nk => BLayout::Nk,
        };
        let p = Problem {
            a: Matrix::F32(&a),
            b: bm,
            m: rows.len(),
            n,
            k,
            b_layout,
        };
        return Ok(gemm::gemm(&pr.order, &p, None)?);
    }
    let (c1, s1) = x1_rows(spec, path, o, rows)?;
    eval_x1(spec, pr, o, &c1, &s1)
}

/// Rows of x1 as the path reads them (codes `[r, K]`, scales `[r, K/32]`,
/// from [`x1_rows`]) through a prepared path (MX inputs).
pub fn eval_x1(spec: &AgmmSpec, pr: &Prepared, o: &Operands, c1: &[u8], s1: &[u8]) -> Result<Vec<f32>> {
    let (k, n) = (spec.k, spec.n);
    let fmt = spec
        .mx_format
        .ok_or_else(|| OpError::Spec("eval_x1 needs MX inputs".into()))?;
    let r = c1.len() / k;
    let b_layout = match spec.x2_layout {
        X2Layout::Kn => BLayout::Kn,
        X2Layout::Nk => BLayout::Nk,
    };
    let run = |a: Matrix<'_>, b: Matrix<'_>| -> Result<Vec<f32>> {
        let p = Problem {
            a,
            b,
            m: r,
            n,
            k,
            b_layout,
        };
        Ok(gemm::gemm(&pr.order, &p, None)?)
    };
    let bm = match &pr.b {
        PreparedB::Given => Matrix::Mx {
            codes: o.c2,
            scales: o.s2,
            format: fmt,
        },
        PreparedB::Mx { codes, scales, format } => Matrix::Mx {
            codes,
            scales,
            format: *format,
        },
        PreparedB::Values(v) => Matrix::F32(v),
    };
    let mut c = if pr.plain_a {
        let el = fmt.element();
        let kb = k / MX_BLOCK;
        let a: Vec<f32> = (0..r * k)
            .map(|i| deq(el, c1[i], s1[(i / k) * kb + (i % k) / MX_BLOCK]) as f32)
            .collect();
        run(Matrix::F32(&a), bm)?
    } else {
        run(
            Matrix::Mx {
                codes: c1,
                scales: s1,
                format: fmt,
            },
            bm,
        )?
    };
    if let Some(col) = &pr.out_exp {
        for (idx, v) in c.iter_mut().enumerate() {
            *v = (*v as f64 * pow2(col[idx % n])) as f32;
        }
    }
    Ok(c)
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
                mechanisms: {
                    let mut v = if split { vec![Mechanism::PathSplit] } else { vec![] };
                    if p.x1_requant.is_some() {
                        v.push(Mechanism::MxAlongM);
                    }
                    v
                },
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
