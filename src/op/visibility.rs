//! Where an all-gather-matmul preset's LOCAL vs GATHER difference can be
//! seen: per x1/x2 scale combination (identity or K-varying E8M0 scales),
//! the same logical rows are computed through both paths and compared bit
//! for bit, and the reason a difference stays hidden is named:
//!
//! - *one GEMM*: GATHER re-rounds no operand element (a `requant` scale
//!   point or `x1_requant` that changes nothing) and both orders compile to
//!   the same tree: the two paths are literally the same computation;
//! - *proven exact*: the paths differ only in their orders, and the
//!   exactness analysis ([`crate::explain::analyze`]) proves every element
//!   order-independent for the family {LOCAL order, GATHER order} (all
//!   partial sums exact);
//! - otherwise the difference is visible (or hidden by chance, unproven).
//!
//! Inputs ([`inputs`]) are e4m3 codes drawn from one of two value ranges
//! ([`Values`]) with scales `127` (ID) or `127 + [-3, 3]` per x1 (row,
//! K-block) and `127 + [-6, 2]` per x2 (K-block, column) (VAR), as the
//! checker's op subjects draw them (docs/OPS.md).

use super::agmm::{self, AgmmSpec, Operands, PathSpec};
use super::{Inputs, OpError, OpSpec, Result, Tensor};
use crate::explain;
use crate::format::{e8m0_exponent, pow2};
use crate::gemm::{BLayout, Matrix, Problem, MX_BLOCK};
use crate::rng::SplitMix64;
use crate::subject::ScaleKind;

/// The magnitudes of the generated element values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Values {
    /// `|v|` in `[1/64, 64]`: what the checker feeds an op subject.
    Checker,
    /// `|v|` in `[0.5, 4)`: a tight distribution whose identity-scale
    /// products fit an f32 accumulator at K = 256.
    Narrow,
}

impl Values {
    pub const ALL: [Values; 2] = [Values::Checker, Values::Narrow];

    pub fn name(self) -> &'static str {
        match self {
            Values::Checker => "checker",
            Values::Narrow => "narrow",
        }
    }

    fn range(self) -> (f32, f32) {
        match self {
            Values::Checker => (1.0 / 64.0, 64.0 + f32::EPSILON * 64.0),
            Values::Narrow => (0.5, 4.0),
        }
    }
}

/// Deterministic MX inputs for `spec` (x2 laid out `kn`, as the presets).
pub fn inputs(spec: &AgmmSpec, values: Values, x1: ScaleKind, x2: ScaleKind, seed: u64) -> Result<Inputs> {
    let fmt = spec
        .mx_format
        .ok_or_else(|| OpError::Spec("visibility needs MX inputs (mx_format)".into()))?;
    if spec.x2_layout != agmm::X2Layout::Kn {
        return Err(OpError::Spec("visibility draws x2 as [K, N] (x2_layout kn)".into()));
    }
    let el = fmt.element();
    let (lo, hi) = values.range();
    let code = |r: &mut SplitMix64| loop {
        let c = (r.next_u32() & 0xFF) as u8;
        let v = el.decode_f32(c as u16).abs();
        if v.is_finite() && v >= lo && v < hi {
            return c;
        }
    };
    let (m, k, n) = (spec.m(), spec.k, spec.n);
    let kb = k / MX_BLOCK;
    let mut r = SplitMix64::for_item(seed, 1);
    let c1: Vec<u8> = (0..m * k).map(|_| code(&mut r)).collect();
    let c2: Vec<u8> = (0..k * n).map(|_| code(&mut r)).collect();
    let mut r = SplitMix64::for_item(seed, 2);
    let s1: Vec<u8> = (0..m * kb)
        .map(|_| match x1 {
            ScaleKind::Identity => 127,
            ScaleKind::Varying => (127 + r.range_i64(-3, 3)) as u8,
        })
        .collect();
    let s2: Vec<u8> = (0..kb * n)
        .map(|_| match x2 {
            ScaleKind::Identity => 127,
            ScaleKind::Varying => (127 + r.range_i64(-6, 2)) as u8,
        })
        .collect();
    let mut inp = Inputs::default();
    inp.insert("x1", Tensor::u8(vec![m, k], c1));
    inp.insert("x1_scales", Tensor::u8(vec![m, kb], s1));
    inp.insert("x2", Tensor::u8(vec![k, n], c2));
    inp.insert("x2_scales", Tensor::u8(vec![kb, n], s2));
    Ok(inp)
}

/// LOCAL vs GATHER for one preset, value range and scale combination.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Visibility {
    pub preset: String,
    pub values: Values,
    pub x1: ScaleKind,
    pub x2: ScaleKind,
    /// Elements compared (every row through both paths, every column).
    pub elements: usize,
    /// Elements whose bits differ between the two paths.
    pub differ: usize,
    /// x1 / x2 elements whose exact value GATHER's re-rounding changes.
    pub x1_rerounded: usize,
    pub x2_rerounded: usize,
    /// The two paths' orders compile to the same tree at K.
    pub same_tree: bool,
    /// Where the paths differ only in their orders: the elements the
    /// exactness analysis proves equal under both (all partial sums exact).
    pub proven: Option<usize>,
}

impl Visibility {
    pub fn visible(&self) -> bool {
        self.differ > 0
    }

    /// One table cell: `VISIBLE d/E (why)` or `hidden: why`.
    pub fn cell(&self) -> String {
        let e = self.elements;
        let mut why = Vec::new();
        if self.x1_rerounded > 0 {
            why.push(format!("x1: {} re-rounded", self.x1_rerounded));
        }
        if self.x2_rerounded > 0 {
            why.push(format!("x2: {} re-rounded", self.x2_rerounded));
        }
        if let Some(p) = self.proven {
            why.push(format!("{p}/{e} proven exact"));
        }
        if self.visible() {
            format!("VISIBLE {}/{e} ({})", self.differ, why.join(", "))
        } else if why.is_empty() && self.same_tree {
            "hidden: one GEMM".to_string()
        } else if self.proven == Some(e) && self.x1_rerounded + self.x2_rerounded == 0 {
            format!("hidden: {e}/{e} proven exact")
        } else {
            format!("hidden, unproven ({})", why.join(", "))
        }
    }
}

fn gather_of(spec: &AgmmSpec) -> Result<&PathSpec> {
    spec.gather
        .as_ref()
        .ok_or_else(|| OpError::Spec("the preset has one path (gather: null): nothing to compare".into()))
}

/// The exact value of every MX element (`code * 2^(scale - 127)`), laid out
/// as the codes; `scale_of(i)` gives element i's scale byte.
fn values_of(codes: &[u8], scale_of: impl Fn(usize) -> u8, el: crate::format::Format) -> Vec<f64> {
    codes
        .iter()
        .enumerate()
        .map(|(i, &c)| el.decode_f64(c as u16) * pow2(e8m0_exponent(scale_of(i))))
        .collect()
}

/// Compares LOCAL and GATHER on `inp` (every row, every column).
pub fn compare_paths(spec: &AgmmSpec, inp: &Inputs) -> Result<(usize, usize, usize, usize, bool, Option<usize>)> {
    let gather = gather_of(spec)?;
    let fmt = spec
        .mx_format
        .ok_or_else(|| OpError::Spec("visibility needs MX inputs".into()))?;
    let el = fmt.element();
    let (m, k, n) = (spec.m(), spec.k, spec.n);
    let kb = k / MX_BLOCK;
    let rows: Vec<usize> = (0..m).collect();
    let local = agmm::path_rows(spec, &spec.local, inp, &rows)?;
    let gath = agmm::path_rows(spec, gather, inp, &rows)?;
    let differ = local
        .iter()
        .zip(&gath)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    let bytes = |name: &str, shape: &[usize]| inp.bytes(name, shape).map(<[u8]>::to_vec);
    let (c1, s1) = (bytes("x1", &[m, k])?, bytes("x1_scales", &[m, kb])?);
    let (c2, s2) = (bytes("x2", &[k, n])?, bytes("x2_scales", &[kb, n])?);
    let ops = Operands {
        x1: &[],
        x2: &[],
        c1: &c1,
        s1: &s1,
        c2: &c2,
        s2: &s2,
    };
    // x1 as each path reads it
    let x1_vals = |p: &PathSpec| -> Result<Vec<f64>> {
        let (c, s) = agmm::x1_rows(spec, p, &ops, &rows)?;
        Ok(values_of(&c, |i| s[(i / k) * kb + (i % k) / MX_BLOCK], el))
    };
    let x1_rerounded = x1_vals(&spec.local)?
        .iter()
        .zip(&x1_vals(gather)?)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    // x2 as each path reads it (a requant scale point re-rounds it)
    let x2_given = values_of(&c2, |i| s2[(i / n / MX_BLOCK) * n + i % n], el);
    let x2_vals = |p: &PathSpec| -> Result<Vec<f64>> {
        let pr = agmm::prepare(spec, p, &ops)?;
        Ok(match pr.requantized_x2() {
            Some((c, s, f)) => values_of(c, |i| s[(i / n / MX_BLOCK) * n + i % n], f.element()),
            None => x2_given.clone(),
        })
    };
    let x2_rerounded = x2_vals(&spec.local)?
        .iter()
        .zip(&x2_vals(gather)?)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    let lo = super::parse_order("local.order", &spec.local.order)?;
    let go = super::parse_order("gather.order", &gather.order)?;
    let same_tree = lo.compile(k) == go.compile(k);
    // the paths differ in their orders only: the exactness analysis over
    // the family {LOCAL order, GATHER order} on the shared operands
    let orders_only = !same_tree
        && spec.local.scale_point == gather.scale_point
        && spec.local.x1_requant.is_none()
        && gather.x1_requant.is_none();
    let proven = if orders_only {
        let p = Problem {
            a: Matrix::Mx {
                codes: &c1,
                scales: &s1,
                format: fmt,
            },
            b: Matrix::Mx {
                codes: &c2,
                scales: &s2,
                format: fmt,
            },
            m,
            n,
            k,
            b_layout: BLayout::Kn,
        };
        let e = explain::analyze(&p, &rows, &[lo, go]).map_err(OpError::Input)?;
        Some(e.iter().filter(|x| x.reason.is_some()).count())
    } else {
        None
    };
    Ok((m * n, differ, x1_rerounded, x2_rerounded, same_tree, proven))
}

/// [`compare_paths`] for a preset at its default shape (WS 2, M per rank
/// 4, K 256, N 64) on [`inputs`] drawn from `seed`.
pub fn visibility(preset: &str, values: Values, x1: ScaleKind, x2: ScaleKind, seed: u64) -> Result<Visibility> {
    let OpSpec::AllGatherMatmul(spec) = OpSpec::from_value(serde_json::json!({ "preset": preset }))? else {
        return Err(OpError::Spec(format!("preset '{preset}' is not an all-gather-matmul")));
    };
    let inp = inputs(&spec, values, x1, x2, seed)?;
    let (elements, differ, x1_rerounded, x2_rerounded, same_tree, proven) = compare_paths(&spec, &inp)?;
    Ok(Visibility {
        preset: preset.to_string(),
        values,
        x1,
        x2,
        elements,
        differ,
        x1_rerounded,
        x2_rerounded,
        same_tree,
        proven,
    })
}

/// The presets of the three candidate mechanisms and their names.
pub const MECHANISM_PRESETS: [(&str, &str); 3] = [
    ("agmm-v2-prefix", "scale-point split"),
    ("agmm-v2-kloop", "K-loop schedule split"),
    ("agmm-v2-coupled", "content coupling"),
];

/// The scale combinations, in the seed's order: (x1, x2).
pub const COMBOS: [(ScaleKind, ScaleKind); 4] = [
    (ScaleKind::Identity, ScaleKind::Identity),
    (ScaleKind::Identity, ScaleKind::Varying),
    (ScaleKind::Varying, ScaleKind::Identity),
    (ScaleKind::Varying, ScaleKind::Varying),
];

/// Every (preset, values, combo) of [`MECHANISM_PRESETS`] x [`Values::ALL`]
/// x [`COMBOS`].
pub fn all(seed: u64) -> Result<Vec<Visibility>> {
    let mut out = Vec::new();
    for (preset, _) in MECHANISM_PRESETS {
        for values in Values::ALL {
            for (x1, x2) in COMBOS {
                out.push(visibility(preset, values, x1, x2, seed)?);
            }
        }
    }
    Ok(out)
}

/// The Markdown table of [`all`]: one row per (preset, values), one
/// column per scale combination.
pub fn table(v: &[Visibility]) -> String {
    let mut s = String::from(
        "| preset (mechanism) | values | ID/ID | ID/VAR | VAR/ID | VAR/VAR |\n|---|---|---|---|---|---|\n",
    );
    for (preset, mech) in MECHANISM_PRESETS {
        for values in Values::ALL {
            s.push_str(&format!("| `{preset}` ({mech}) | {} |", values.name()));
            for (x1, x2) in COMBOS {
                match v
                    .iter()
                    .find(|x| x.preset == preset && x.values == values && x.x1 == x1 && x.x2 == x2)
                {
                    Some(x) => s.push_str(&format!(" {} |", x.cell())),
                    None => s.push_str(" - |"),
                }
            }
            s.push('\n');
        }
    }
    s
}
