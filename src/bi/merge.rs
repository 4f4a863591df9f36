//! Merging shard reports into one: the report of the same check run
//! unsharded.
//!
//! # Contract
//! - Every input must agree on everything but its cells, controls, summary
//!   and shard: schema, subject, switch partner, seed, input type, options,
//!   case (compared as JSON, so fields added later are compared too).
//! - Cells are unioned by id; a cell in two inputs must be identical there
//!   (a different verdict, or different bytes, is an error naming both).
//! - Controls are unioned by (family, subject, cell); two inputs holding the
//!   same control must agree on it.
//! - Witnesses are unioned by cell. Explanations: per family, the shards'
//!   explanation of the family's first failing cell in the merged order is
//!   kept, counting the failing cells of every shard's explanations of that
//!   family (a shard sees only its own cells).
//! - The result is re-summarised and in the canonical order, so it equals
//!   the unsharded report byte for byte; its shard, if the format has one,
//!   is null.

use super::cell::Cell;
use super::control::Control;
use super::report::{Report, REPORT_SCHEMA};
use serde_json::Value;
use std::collections::BTreeMap;

/// The fields that differ between shards of one check.
const PER_SHARD: [&str; 6] = ["cells", "controls", "summary", "shard", "witnesses", "explanations"];

fn header(r: &Report) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::to_value(r).map_err(|e| e.to_string())? {
        Value::Object(mut m) => {
            for k in PER_SHARD {
                m.remove(k);
            }
            Ok(m)
        }
        _ => Err("a report is not a JSON object".into()),
    }
}

/// Merges `(name, report)` pairs (names are used in messages).
pub fn merge(inputs: &[(String, Report)]) -> Result<Report, String> {
    let Some((first_name, first)) = inputs.first() else {
        return Err("nothing to merge".into());
    };
    let head = header(first)?;
    for (name, r) in inputs {
        if r.schema != REPORT_SCHEMA {
            return Err(format!("{name}: schema '{}' is not {REPORT_SCHEMA}", r.schema));
        }
        let h = header(r)?;
        if h != head {
            let key = head
                .keys()
                .chain(h.keys())
                .find(|k| head.get(*k) != h.get(*k))
                .cloned()
                .unwrap_or_default();
            let show = |v: Option<&Value>| v.map_or("absent".to_string(), |v| v.to_string());
            return Err(format!(
                "{name} and {first_name} are not shards of one check: {key} is {} there and {} here",
                show(h.get(&key)),
                show(head.get(&key))
            ));
        }
    }
    let mut cells: BTreeMap<String, (usize, Cell)> = BTreeMap::new();
    let mut controls: Vec<(usize, Control)> = Vec::new();
    for (i, (name, r)) in inputs.iter().enumerate() {
        for c in &r.cells {
            match cells.get(&c.id) {
                None => {
                    cells.insert(c.id.clone(), (i, c.clone()));
                }
                Some((j, old)) if old != c => {
                    let other = &inputs[*j].0;
                    return Err(if old.verdict != c.verdict {
                        format!("cell {}: {} in {other}, {} in {name}", c.id, old.verdict, c.verdict)
                    } else {
                        format!(
                            "cell {}: both {} but with different bytes in {other} and {name}",
                            c.id, c.verdict
                        )
                    });
                }
                Some(_) => {}
            }
        }
        for c in &r.controls {
            match controls
                .iter()
                .find(|(_, o)| (o.family, &o.subject, &o.cell) == (c.family, &c.subject, &c.cell))
            {
                None => controls.push((i, c.clone())),
                Some((j, o)) if o != c => {
                    return Err(format!(
                        "positive control {} on {}: {} in {}, {} in {name}",
                        c.subject, c.cell, o.verdict, inputs[*j].0, c.verdict
                    ))
                }
                Some(_) => {}
            }
        }
    }
    let mut v = serde_json::to_value(first).map_err(|e| e.to_string())?;
    if let Value::Object(m) = &mut v {
        if m.contains_key("shard") {
            m.insert("shard".into(), Value::Null);
        }
    }
    let mut merged: Report = serde_json::from_value(v).map_err(|e| e.to_string())?;
    merged.cells = cells.into_values().map(|(_, c)| c).collect();
    merged.controls = controls.into_iter().map(|(_, c)| c).collect();
    merged.finish();
    let mut witnesses: Vec<super::cell_witness::CellWitness> = Vec::new();
    for (_, r) in inputs {
        for w in &r.witnesses {
            if !witnesses.iter().any(|x| x.cell == w.cell) {
                witnesses.push(w.clone());
            }
        }
    }
    merged.witnesses = witnesses;
    merged.explanations = merge_explanations(inputs, &merged.cells);
    Ok(merged)
}

/// Per family, the explanation of its first failing cell in `cells`'
/// order, counting every shard's failing cells of that family.
fn merge_explanations(inputs: &[(String, Report)], cells: &[Cell]) -> Vec<super::explanation::Explanation> {
    let all: Vec<&super::explanation::Explanation> = inputs.iter().flat_map(|(_, r)| &r.explanations).collect();
    let at = |id: &str| cells.iter().position(|c| c.id == id).unwrap_or(usize::MAX);
    let mut out: Vec<super::explanation::Explanation> = Vec::new();
    for e in &all {
        if out.iter().any(|o| o.family == e.family) {
            continue;
        }
        let same: Vec<&&super::explanation::Explanation> = all.iter().filter(|x| x.family == e.family).collect();
        if let Some(first) = same.iter().min_by_key(|x| at(&x.cell)) {
            let mut kept = (**first).clone();
            kept.failing_cells = same.iter().map(|x| x.failing_cells).sum();
            out.push(kept);
        }
    }
    out.sort_by_key(|e| at(&e.cell));
    out
}
