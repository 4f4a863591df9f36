//! Rows of an observation identified and, with a second observation,
//! diffed: per row the reproducing orders, the divergence of the nearest
//! pair, the K profile and the fixes, as text (`mxbi explain`'s listing),
//! as JSON and as [`RowStory`] for reports (docs/EXPLAIN.md).

use super::Result;
use crate::explain::candidates::{self, Inputs};
use crate::explain::{self, IdentifyOptions, RowIdentity, Varies};
use crate::gemm::{Matrix, Problem};
use crate::order::Order;
use crate::subject::spec::dispatch_table;
use serde_json::{json, Value};
use std::path::Path;

/// The orders of a dispatch table file (bounded before reading).
pub fn dispatch_orders(p: &Path) -> Result<Vec<Order>> {
    let d = dispatch_table(p)?;
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

/// The results of [`report`].
pub struct Reported {
    /// One JSON object per row.
    pub rows: Vec<Value>,
    pub text: String,
    /// Every row is reproduced by some order (and, over two or more rows,
    /// one order reproduces them all).
    pub ok: bool,
    /// The cross-row answers as JSON.
    pub across: Value,
    /// Per row, what was found, for reports that summarise it.
    pub stories: Vec<RowStory>,
}

/// What [`report`] found for one row.
pub struct RowStory {
    pub observed: RowIdentity,
    pub vs: Option<RowIdentity>,
    /// Both observations named: where their orders diverge, the fixes, and
    /// the K prefix over which they agree (terms k < this).
    pub diff: Option<(explain::TreeDiff, Vec<explain::Fix>, Option<usize>)>,
}

/// Identifies `rows` of `observed` (and of `vs`), and for each row with
/// two observations diffs their orders; over two or more rows, one
/// headline per observation first: the order that reproduces every row,
/// or that none does ([`explain::across_rows`]).
#[allow(clippy::too_many_arguments)]
pub fn report(
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
    let seen = explain::identify(p, rows, &pick(observed), &cands, opts)?;
    let other = match vs {
        Some(v) => Some(explain::identify(p, rows, &pick(v), &cands, opts)?),
        None => None,
    };
    let p = *p;
    let ops_k = k;
    let mut all_explained = true;
    let mut json_rows = Vec::new();
    let mut stories = Vec::new();
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
        let mut story = RowStory {
            observed: id.clone(),
            vs: other.as_ref().map(|o| o[i].clone()),
            diff: None,
        };
        text.push_str(&format!("observed {id}\n"));
        if exactness {
            let family: Vec<Order> = cands.iter().map(|c| c.order).collect();
            let e = explain::analyze(&p, &[r], &family)?;
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
            if let Some((lo, ro)) = explain::nearest_pair(&id.matches, &vid.matches) {
                let diff = explain::diverge(&lo, &ro, ops_k, mx);
                let fixes = explain::suggest(&diff, varies);
                let prof = explain::k_profile(&p, r, &lo, &ro, k_chunk)?;
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
                let agree = prof
                    .iter()
                    .find(|c| c.differ > 0)
                    .map(|_| prof.iter().take_while(|c| c.differ == 0).last().map_or(0, |c| c.k_end));
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
                story.diff = Some((diff, fixes, agree));
            } else {
                row_json["divergence"] = Value::Null;
            }
        }
        json_rows.push(row_json);
        stories.push(story);
    }
    Ok(Reported {
        rows: json_rows,
        text,
        ok: all_explained,
        across: across_value,
        stories,
    })
}
