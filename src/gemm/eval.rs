//! The generic evaluator: any reduction tree, one output element, node by
//! node in SSA order. This is the reference every fast kernel must match.

use super::step::{add_exact_rn, decompose, fused_sum, product, round_exact, Decomposed, Exact, Round};
use super::{Kind, Prepared, MX_BLOCK};
use crate::format::{encode_f32, pow2_f32, CastPolicy, Format};
use crate::mx::{block_dot, BlockDot};
use crate::order::{Node, Order, OutFmt, Tree};

/// One evaluated node.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TraceStep {
    pub node: usize,
    pub op: String,
    pub value: f32,
    pub bits: String,
}

/// The f32 conversion of the `out=` key (RNE; NaN keeps its sign with the
/// canonical quiet payload), widened back to f32.
pub fn convert_out(x: f32, to: OutFmt) -> f32 {
    let f = match to {
        OutFmt::F32 => return x,
        OutFmt::Bf16 => Format::BF16,
        OutFmt::F16 => Format::F16,
    };
    let code = encode_f32(x, f, &CastPolicy::ieee(f), 0).expect("bf16/f16 encode cannot fail under IEEE policy");
    f.decode_f32(code)
}

fn block_term(d: BlockDot) -> Result<Exact, f32> {
    match d {
        BlockDot::Finite { sum, exp } => Ok(Exact {
            neg: sum < 0,
            mag: sum.unsigned_abs(),
            exp,
        }),
        BlockDot::Inf { negative } => Err(if negative { f32::NEG_INFINITY } else { f32::INFINITY }),
        BlockDot::Nan => Err(f32::NAN),
    }
}

/// Evaluates `tree` for output (i, j). `scratch` is reused between calls.
pub fn evaluate(
    tree: &Tree,
    order: &Order,
    prep: &Prepared,
    i: usize,
    j: usize,
    scratch: &mut Vec<f32>,
    mut trace: Option<&mut Vec<TraceStep>>,
) -> f32 {
    let k = prep.k;
    let emin = tree.input.map_or(-126, |t| t.emin());
    scratch.clear();
    scratch.resize(tree.nodes.len(), 0.0);
    let v = scratch;
    for (idx, node) in tree.nodes.iter().enumerate() {
        let r = match node {
            Node::Zero => 0.0,
            Node::Fma { acc, k: t } => {
                let acc = v[*acc as usize];
                match &prep.kind {
                    Kind::Values { a, bt } | Kind::Scaled { a, bt, .. } => {
                        a[i * k + *t as usize].mul_add(bt[j * k + *t as usize], acc)
                    }
                    Kind::Blocks { .. } => match block_term(block_at(prep, i, j, *t as usize)) {
                        Ok(e) => add_exact_rn(acc, e),
                        Err(s) => acc + s,
                    },
                }
            }
            Node::MulAdd { acc, k: t } => {
                let acc = v[*acc as usize];
                match &prep.kind {
                    Kind::Values { a, bt } | Kind::Scaled { a, bt, .. } => {
                        acc + a[i * k + *t as usize] * bt[j * k + *t as usize]
                    }
                    Kind::Blocks { .. } => match block_term(block_at(prep, i, j, *t as usize)) {
                        Ok(e) => acc + round_exact(e, 23, Round::Rne),
                        Err(s) => acc + s,
                    },
                }
            }
            Node::Fused { c, ks, f, out } => {
                let mut terms = Vec::with_capacity(ks.len() + 1);
                terms.push(decompose(v[*c as usize], -126));
                for kk in ks {
                    terms.push(match kk {
                        None => product(decompose(0.0, emin), decompose(0.0, emin), 0),
                        Some(t) => {
                            let t = *t as usize;
                            match &prep.kind {
                                Kind::Values { a, bt } => {
                                    product(decompose(a[i * k + t], emin), decompose(bt[j * k + t], emin), 0)
                                }
                                Kind::Scaled { a, bt, xa, xb, fused } => {
                                    let (ea, eb) = (xa[i * k + t], xb[j * k + t]);
                                    if *fused && (ea == i32::MIN || eb == i32::MIN) {
                                        Decomposed::Nan
                                    } else {
                                        let extra = if *fused { ea + eb } else { 0 };
                                        product(decompose(a[i * k + t], emin), decompose(bt[j * k + t], emin), extra)
                                    }
                                }
                                Kind::Blocks { .. } => unreachable!("block terms are for fma/muladd"),
                            }
                        }
                    });
                }
                fused_sum(&terms, *f, *out)
            }
            Node::Add { a, b } => v[*a as usize] + v[*b as usize],
            Node::Promote { acc, partial, k0 } => {
                let s = match &prep.kind {
                    Kind::Scaled {
                        xa, xb, fused: false, ..
                    } => {
                        let (ea, eb) = (xa[i * k + *k0 as usize], xb[j * k + *k0 as usize]);
                        if ea == i32::MIN || eb == i32::MIN {
                            f32::NAN
                        } else {
                            pow2_f32(ea) * pow2_f32(eb)
                        }
                    }
                    _ => 1.0,
                };
                s.mul_add(v[*partial as usize], v[*acc as usize])
            }
            Node::Convert { x, to } => convert_out(v[*x as usize], *to),
        };
        v[idx] = r;
        if let Some(t) = trace.as_deref_mut() {
            t.push(TraceStep {
                node: idx,
                op: tree.describe_node(idx),
                value: r,
                bits: format!("0x{:08x}", r.to_bits()),
            });
        }
    }
    let _ = order;
    v[tree.root as usize]
}

/// The exact dot of MX block `t` of row i of A and column j of B.
fn block_at(prep: &Prepared, i: usize, j: usize, t: usize) -> BlockDot {
    let Kind::Blocks { a, sa, bt, sb, fa, fb } = &prep.kind else {
        unreachable!()
    };
    let (k, kb) = (prep.k, prep.k / MX_BLOCK);
    let ra = &a[i * k + t * MX_BLOCK..i * k + (t + 1) * MX_BLOCK];
    let rb = &bt[j * k + t * MX_BLOCK..j * k + (t + 1) * MX_BLOCK];
    block_dot(ra, sa[i * kb + t], *fa, rb, sb[j * kb + t], *fb).expect("validated MX blocks")
}
