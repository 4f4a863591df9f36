//! One cell of a batch-invariance check explained: its two sides re-run on
//! the subject as the checker ran them, the target row's two observations
//! identified and diffed (`mxbi explain --case CASE --cell ID`), and the
//! same summarised as a [`crate::bi::Explanation`] for reports
//! (`mxbi bi run`, docs/BI.md "Explanations in the report").

use super::rows::{dispatch_orders, report, Reported, RowStory};
use super::{Result, Unexplained};
use crate::bi::{target_batch, CheckOptions, Content, Explanation, Family, Known, RowPos, Rows, SideStory};
use crate::explain::Varies;
use crate::gemm::{BLayout, Matrix, Problem};
use crate::subject::{Knobs, Subject};
use serde_json::{json, Value};
use std::path::Path;

/// A check as it ran: its subject(s), their specs (an op subject's
/// provenance is rebuilt from the spec under `knobs`), options and content.
pub struct CellSetup<'a> {
    pub subject: &'a dyn Subject,
    pub vs: Option<&'a dyn Subject>,
    pub spec: &'a str,
    pub vs_spec: Option<&'a str>,
    pub knobs: &'a Knobs,
    pub opts: &'a CheckOptions,
    pub content: Content,
}

/// One cell explained.
pub struct CellExplained {
    /// `{"cell", "subject", "verdict", "rows", "explanation"}`.
    pub json: Value,
    /// The full listing (`mxbi explain --case`).
    pub text: String,
    /// The explanation accounts for both sides' bytes.
    pub held: bool,
    /// The summary a report carries.
    pub story: Explanation,
}

/// Where a side's target row sits, in words.
fn side_words(m: usize, at: usize, rank: usize) -> String {
    if rank == 0 {
        format!("M = {m}, row {at}")
    } else {
        format!("M = {m}, row {at} on rank {rank}")
    }
}

/// A cell's two sides as the checker ran them: each batch's row ids, the
/// target's index in it and the rank asked, and what varies between them.
struct Sides {
    family: Family,
    b_ids: Vec<u64>,
    bi: usize,
    b_rank: usize,
    v_ids: Vec<u64>,
    vi: usize,
    v_rank: usize,
    varies: Varies,
}

/// Reads cell id `cell` (`FAMILY/m=M/k=K/n=N/row=ROW[/rank=R/held|owned]`)
/// against the check `setup` describes, and rebuilds its two sides.
fn cell_sides(setup: &CellSetup, cell: &str) -> Result<Sides> {
    let bad = |why: &str| Unexplained(format!("--cell '{cell}': {why}"));
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
    let opts = setup.opts;
    let (k, n) = (opts.k, opts.n);
    if field(2, "k=")? != k.to_string() || field(3, "n=")? != n.to_string() {
        return Err(bad(&format!("the case runs k={k}, n={n}")));
    }
    if !opts.families.contains(&family) || !opts.ms.contains(&m) {
        return Err(bad("the case has no such family or batch size"));
    }
    let row = field(4, "row=")?;
    let m0 = opts.ms[0];
    let pos = |mm: usize| -> Result<usize> {
        let p: RowPos = row.parse().map_err(|e: String| bad(&e))?;
        p.resolve(mm)
            .ok_or_else(|| bad("the row position does not exist at this M"))
    };
    // rank cells: `.../rank=R/held|owned` (rank 0 is the baseline's)
    let rank_of = || -> Result<(usize, bool)> {
        let r: usize = field(5, "rank=")?.parse().map_err(|_| bad("rank is not a number"))?;
        let ws = setup.subject.world_size();
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
            (target_batch(m, i, 0), i, target_batch(m, i, 1), i, Varies::Unknown)
        }
        Family::Anchor => {
            // the row at 0 of the first batch vs at ROW of a batch of M
            let i = pos(m)?;
            (
                target_batch(m0, 0, 0),
                0,
                target_batch(m, i, 0),
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
                let ws = setup.subject.world_size();
                if !m.is_multiple_of(ws) {
                    return Err(bad(&format!("owned cells need M divisible by the world size {ws}")));
                }
                let off = i % (m / ws);
                let at = r * (m / ws) + off;
                (
                    target_batch(m, off, 0),
                    off,
                    target_batch(m, at, 0),
                    at,
                    Varies::Unknown,
                )
            } else {
                (target_batch(m, i, 0), i, target_batch(m, i, 0), i, Varies::Unknown)
            }
        }
        Family::Batch => {
            let i = pos(m.min(m0))?;
            (
                target_batch(m0, i, 0),
                i,
                target_batch(m, i, 0),
                i,
                Varies::BatchSize { left: m0, right: m },
            )
        }
        Family::Position => {
            let i = pos(m)?;
            (target_batch(m, 0, 0), 0, target_batch(m, i, 0), i, Varies::Unknown)
        }
        Family::Switch => (target_batch(m, 0, 0), 0, target_batch(m, 0, 0), 0, Varies::Unknown),
        _ => {
            return Err(bad(
                "explain --cell runs content, batch, position, anchor, rank and switch cells",
            ))
        }
    };
    Ok(Sides {
        family,
        b_ids,
        bi,
        b_rank,
        v_ids,
        vi,
        v_rank,
        varies,
    })
}

/// Explains cell `cell` (its report id) of the check `setup` describes;
/// `view`: the ULP map's tile width, the K profile's chunk, and whether to
/// add the exactness analysis.
pub fn explain_cell(setup: &CellSetup, cell: &str, view: (usize, usize, bool)) -> Result<CellExplained> {
    let Sides {
        family,
        b_ids,
        bi,
        b_rank,
        v_ids,
        vi,
        v_rank,
        varies,
    } = cell_sides(setup, cell)?;
    let bad = |why: &str| Unexplained(format!("--cell '{cell}': {why}"));
    let opts = setup.opts;
    let (k, n) = (opts.k, opts.n);
    let rows = Rows::with_content(opts.seed, k, n, opts.input, setup.content);
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
    let left = run(setup.subject, &a_left, bi, b_rank)?;
    let other: &dyn Subject = match (family, setup.vs) {
        (Family::Switch, Some(v)) => v,
        (Family::Switch, None) => return Err(bad("a switch cell needs the case's vs subject")),
        _ => setup.subject,
    };
    let right = run(other, &a_right, vi, v_rank)?;
    // an op subject (op:, nccl:): the two sides explained with the op's
    // provenance (src/diagnosis/op.rs)
    let side = |subject, a, at, rank, bytes| super::op::Side {
        subject,
        a,
        at,
        rank,
        bytes,
    };
    let explained = super::op::for_cell(
        (setup.spec, setup.knobs),
        (family == Family::Switch).then_some(setup.vs_spec),
        &side(setup.subject, &a_left, bi, b_rank, &left),
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
    let entries = match setup.spec.split_once(':') {
        Some(("dispatch", f)) => dispatch_orders(Path::new(f))?,
        _ => Vec::new(),
    };
    let varies = explained.as_ref().and_then(|e| e.varies.clone()).unwrap_or(varies);
    let Reported {
        rows: mut json_rows,
        text,
        ok,
        stories,
        ..
    } = report(&p, &[0], &left, Some(&right), &entries, &varies, view)?;
    if let (Some(e), Some(row)) = (&explained, json_rows.first_mut()) {
        row["op"] = e.json.clone();
    }
    let verdict = if left.iter().zip(&right).all(|(a, b)| a.to_bits() == b.to_bits()) {
        "BI_PASS"
    } else {
        "BI_FAIL"
    };
    // the summary for reports: the op's paths, else each side's order
    let mut story = Explanation::new(family, cell, 1);
    let sides = [
        side_words(a_left.len() / k, bi, b_rank),
        side_words(a_right.len() / k, vi, v_rank),
    ];
    let declared = [
        setup.subject.declared_order(a_left.len() / k, k, n),
        other.declared_order(a_right.len() / k, k, n),
    ];
    match (&explained, stories.first()) {
        (Some(e), _) => op_story(&mut story, e),
        (None, Some(row)) => {
            summarise(&mut story, row, &sides, &declared);
            let subjects = [setup.subject, other];
            let ms = [a_left.len() / k, a_right.len() / k];
            reveal_unnamed(&mut story, &subjects, ms, (k, n, opts), &varies);
        }
        (None, None) => story.note = Some("nothing to explain".into()),
    }
    let json = json!({
        "cell": cell,
        "subject": setup.subject.name(),
        "verdict": verdict,
        "rows": json_rows,
        "explanation": story,
    });
    let mut listing = format!(
        "cell {cell} on {} ({verdict}): the target row in the baseline batch (observed) vs the variant (vs)\n",
        setup.subject.name()
    );
    if let Some(e) = &explained {
        listing.push_str(&e.text);
    }
    listing.push_str(&text);
    // an op cell is explained by its provenance, other cells by an order
    // reproducing each side
    let held = explained.as_ref().map_or(ok, |e| e.held);
    Ok(CellExplained {
        json,
        text: listing,
        held,
        story,
    })
}

/// The summary of an op cell: each side's path and order from the op
/// model's provenance, the first diverging node, the mechanism, the fixes.
fn op_story(story: &mut Explanation, e: &super::op::Explained) {
    let [l, r] = &e.story.sides;
    let side = |(w, o, rep, path): &(String, String, bool, String)| SideStory {
        side: w.clone(),
        path: Some(path.clone()),
        order: rep.then(|| o.clone()),
        known: if *rep { Known::OpModel } else { Known::NotNameable },
        closest: (!rep).then(|| format!("the op model's {o}, which does not reproduce the bytes")),
    };
    story.base = Some(side(l));
    story.variant = Some(side(r));
    story.first_node = e.story.first_node.clone();
    story.mechanism = e.story.mechanisms.clone();
    story.fixes = e.story.fixes.clone();
    if !e.held {
        story.note = Some("the op model does not account for both sides' bytes".into());
    }
}

/// A side as the explanation names it: the order that reproduces its
/// bytes (declared when the subject declares that very order), else the
/// closest order and its distance.
fn side_story(
    side: &str,
    id: &crate::explain::RowIdentity,
    chosen: Option<crate::order::Order>,
    declared: Option<crate::order::Order>,
) -> SideStory {
    let k_same = |a: &crate::order::Order| id.matches.iter().any(|m| m == a);
    match chosen.or(id.order()) {
        Some(o) => {
            let (order, known) = match declared {
                Some(d) if k_same(&d) => (d, Known::Declared),
                _ => (o, Known::Identified),
            };
            SideStory {
                side: side.to_string(),
                path: None,
                order: Some(order.to_string()),
                known,
                closest: None,
            }
        }
        None => SideStory {
            side: side.to_string(),
            path: None,
            order: None,
            known: Known::NotNameable,
            closest: id.closest.as_ref().map(|c| {
                format!(
                    "{}: {} elements differ, at most {} ulp ({} candidates tried)",
                    c.order,
                    c.elements_differ,
                    if c.max_ulp == u64::MAX {
                        "NaN-vs-number".to_string()
                    } else {
                        c.max_ulp.to_string()
                    },
                    id.evaluated
                )
            }),
        },
    }
}

/// Largest K and M at which a side no order names is probed (`reveal`:
/// some tens of launches of the side's shape).
pub const REVEAL_MAX_K: usize = 4096;
pub const REVEAL_MAX_M: usize = 1024;

/// A side no order of the family reproduces is probed (`explain::reveal`
/// at the side's M, K, N) when its subject is one device and the shape is
/// within [`REVEAL_MAX_K`] and [`REVEAL_MAX_M`]: a named tree makes the side
/// `revealed` (and, both sides named, their divergence and fixes are
/// given); an unnamed one adds its summary to the side's closest; a
/// data-dependent order is said in the note.
fn reveal_unnamed(
    story: &mut Explanation,
    subjects: &[&dyn Subject; 2],
    ms: [usize; 2],
    (k, n, opts): (usize, usize, &CheckOptions),
    varies: &Varies,
) {
    let mut revealed_any = false;
    for (i, side) in [&mut story.base, &mut story.variant].into_iter().enumerate() {
        let Some(side) = side.as_mut() else { continue };
        if side.order.is_some() || subjects[i].world_size() != 1 || k > REVEAL_MAX_K || ms[i] > REVEAL_MAX_M {
            continue;
        }
        let o = crate::explain::RevealOptions {
            m: ms[i],
            k,
            n,
            input: opts.input,
            seed: opts.seed,
            verify_rows: 1,
        };
        match crate::explain::reveal(subjects[i], o) {
            Ok(r) => match r.order {
                Some(order) => {
                    side.order = Some(order.to_string());
                    side.known = Known::Revealed;
                    side.closest = None;
                    revealed_any = true;
                }
                None => {
                    let words = r.shape.describe().join(" ");
                    let nearest = r
                        .closest
                        .as_ref()
                        .map(|c| format!("; nearest by tree {}", c.order))
                        .unwrap_or_default();
                    side.closest = Some(match side.closest.take() {
                        Some(c) => format!("{c}; probed: {words}{nearest}"),
                        None => format!("probed: {words}{nearest}"),
                    });
                }
            },
            Err(e) => {
                let w = format!("{} side: {}", if i == 0 { "baseline" } else { "variant" }, e);
                story.note = Some(match story.note.take() {
                    Some(n) => format!("{n}; {w}"),
                    None => w,
                });
            }
        }
    }
    // both sides named now: where they diverge and the fixes
    let named = |s: &Option<SideStory>| {
        s.as_ref()
            .and_then(|s| s.order.as_deref()?.parse::<crate::order::Order>().ok())
    };
    if let (true, Some(l), Some(r)) = (revealed_any, named(&story.base), named(&story.variant)) {
        let d = crate::explain::diverge(&l, &r, k, false);
        let fixes = crate::explain::suggest(&d, varies);
        story.note = None;
        tell_divergence(story, &d, &fixes, None);
    }
}

/// Sets `story`'s first diverging node, mechanism and fixes from the
/// divergence of its two orders (`agree`: the K prefix over which the
/// bytes agree, when measured).
fn tell_divergence(
    story: &mut Explanation,
    d: &crate::explain::TreeDiff,
    fixes: &[crate::explain::Fix],
    agree: Option<usize>,
) {
    match &d.divergence {
        Some(div) => {
            let first = div.to_string();
            let first = first.lines().next().unwrap_or_default().trim_end_matches(':');
            let first = first.strip_prefix("first difference at ").unwrap_or(first);
            let mut w = format!("{first}, after {} identical terms", d.common_terms);
            match (&d.left_at, &d.right_at) {
                (Some(a), Some(b)) if a == b => w.push_str(&format!(", at {a} on both sides")),
                (a, b) => {
                    if let Some(a) = a {
                        w.push_str(&format!(": baseline continues with {a}"));
                    }
                    if let Some(b) = b {
                        w.push_str(&format!(", variant with {b}"));
                    }
                }
            }
            if let Some(k) = agree.filter(|&k| k > 0) {
                w.push_str(&format!("; bytes agree for k < {k}"));
            }
            story.first_node = Some(w);
        }
        None => {
            story.note = Some(format!(
                "{} and {} are the same tree for K = {}: the bytes differ for another reason",
                d.left, d.right, d.k
            ))
        }
    }
    story.mechanism = d.mechanisms.iter().map(|m| m.to_string()).collect();
    story.fixes = fixes.iter().map(|f| f.to_string()).collect();
}

/// Fills `story` from the row's identification and divergence.
fn summarise(
    story: &mut Explanation,
    row: &RowStory,
    sides: &[String; 2],
    declared: &[Option<crate::order::Order>; 2],
) {
    // the pair the divergence was computed for (the nearest of the two
    // sides' reproducing sets), else each side's simplest
    let pair = row.diff.as_ref().map(|(d, _, _)| (d.left, d.right));
    story.base = Some(side_story(&sides[0], &row.observed, pair.map(|p| p.0), declared[0]));
    if let Some(v) = &row.vs {
        story.variant = Some(side_story(&sides[1], v, pair.map(|p| p.1), declared[1]));
    }
    match &row.diff {
        Some((d, fixes, agree)) => {
            tell_divergence(story, d, fixes, *agree);
        }
        None => {
            let named = |s: &Option<SideStory>| s.as_ref().is_some_and(|s| s.order.is_some());
            if !named(&story.base) || !named(&story.variant) {
                story.note = Some(
                    "a side's order is not in the explainer's family: the closest order is given; `mxbi reveal` recovers its tree by probing"
                        .into(),
                );
            }
        }
    }
}
