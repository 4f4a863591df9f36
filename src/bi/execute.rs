//! Running one planned cell: the baseline twice (determinism), the
//! variant side, the confirming re-runs, the comparison of bytes and the
//! vacuity test, into the cell's verdict.

use super::cell::Cell;
use super::confirm::NonDetRate;
use super::family::Family;
use super::inputs::Draw;
use super::options::CheckOptions;
use super::plan::Plan;
use super::power;
use super::session::{run_batch, Session};
use super::verdict::{compare_rows, RowDiff, Verdict};
use crate::subject::{Knobs, ScaleKind, Subject, SubjectError};
use std::sync::Arc;

fn cell_of(plan: &Plan, opts: &CheckOptions, knobs: &Knobs, draw: Draw, subject: &dyn Subject) -> Cell {
    let kid = knobs.id();
    let mut id = format!("{}/", plan.family);
    if !kid.is_empty() {
        id.push_str(&kid);
        id.push('/');
    }
    let inputs = (draw != Draw::Wide).then_some(draw);
    if let Some(d) = inputs {
        id.push_str(&format!("inputs={}/", d.name()));
    }
    id.push_str(&format!("m={}/k={}/n={}/row={}", plan.m, opts.k, opts.n, plan.row));
    if let Some((_, suffix)) = &plan.rank {
        id.push('/');
        id.push_str(suffix);
    }
    Cell {
        id,
        family: plan.family,
        subject: subject.name(),
        m: plan.m,
        k: opts.k,
        n: opts.n,
        row: plan.row.clone(),
        rank: plan.rank.as_ref().map(|r| r.0),
        knobs: *knobs,
        inputs,
        path: plan.path.clone(),
        verdict: Verdict::Error,
        diff: RowDiff::default(),
        reason: None,
        power: None,
        nondet_rate: None,
    }
}

/// A per-cell ERROR, or Err when the subject is broken (the whole check
/// stops: nothing after it could run).
fn error_cell(mut c: Cell, e: SubjectError) -> Result<Cell, String> {
    if let SubjectError::Broken { .. } = e {
        return Err(e.to_string());
    }
    c.verdict = Verdict::Error;
    c.reason = Some(e.to_string());
    Ok(c)
}

/// The variant side of a planned cell: its batch on its rank, the
/// partner subject on the baseline batch (`switch`), or the baseline's
/// own bytes (`repeat`).
fn run_variant(
    plan: &Plan,
    session: &mut Session,
    base_a: &Arc<Vec<f32>>,
    base: &[f32],
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
) -> Result<Vec<f32>, SubjectError> {
    match (&plan.variant, plan.family) {
        (_, Family::Repeat) => Ok(base.to_vec()),
        (_, Family::Switch) => match vs {
            Some(other) => run_batch(other, 0, &session.rows, base_a, &plan.base_rows),
            None => Err(SubjectError::Unsupported {
                subject: subject.name(),
                why: "the switch family needs a second subject".into(),
            }),
        },
        (Some((batch, sel)), _) => {
            let a = if *batch == plan.baseline {
                base_a.clone()
            } else {
                session.batch(batch)
            };
            run_batch(subject, plan.var_rank, &session.rows, &a, sel)
        }
        (None, _) => unreachable!("every family but repeat and switch plans a variant"),
    }
}

/// Re-runs both sides of a cell whose sides differ, `opts.confirm` times
/// each ([`super::confirm`]): None when every re-run reproduced its side's
/// first bytes (the failure stands), else the disagreement rate.
fn confirm_sides(
    plan: &Plan,
    session: &mut Session,
    opts: &CheckOptions,
    base_a: &Arc<Vec<f32>>,
    (base, variant): (&[f32], &[f32]),
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
) -> Result<Option<NonDetRate>, SubjectError> {
    let n = session.rows.n;
    let rows = &session.rows;
    let on_base = super::confirm::reruns(base, n, opts.confirm, || {
        run_batch(subject, plan.base_rank, rows, base_a, &plan.base_rows)
    })?;
    let on_variant = super::confirm::reruns(variant, n, opts.confirm, || {
        run_variant(plan, session, base_a, base, subject, vs)
    })?;
    let differed = on_base + on_variant;
    Ok((differed > 0).then(|| NonDetRate::new(differed, 2 * opts.confirm)))
}

/// Runs one planned cell (Err: a subject is broken).
pub(super) fn run_plan(
    plan: &Plan,
    session: &mut Session,
    opts: &CheckOptions,
    knobs: &Knobs,
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
) -> Result<Cell, String> {
    let mut cell = cell_of(plan, opts, knobs, session.rows.draw, subject);
    let base_a = session.batch(&plan.baseline);
    let rows = &session.rows;
    let base = match run_batch(subject, plan.base_rank, rows, &base_a, &plan.base_rows) {
        Ok(x) => x,
        Err(e) => return error_cell(cell, e),
    };
    // the power of the compared rows, in the formats the bytes allow
    cell.power = Some(session.power(&plan.baseline, &plan.base_rows, power::output_formats(&base)));
    let rows = &session.rows;
    let runs = if plan.family == Family::Repeat { opts.repeats } else { 2 };
    for done in 1..runs {
        match run_batch(subject, plan.base_rank, rows, &base_a, &plan.base_rows) {
            Ok(again) => {
                let d = compare_rows(&base, &again, rows.n, &plan.base_rows);
                if !d.identical() {
                    // the rate: this re-run, then `confirm` more
                    let more = match super::confirm::reruns(&base, rows.n, opts.confirm, || {
                        run_batch(subject, plan.base_rank, rows, &base_a, &plan.base_rows)
                    }) {
                        Ok(x) => x,
                        Err(e) => return error_cell(cell, e),
                    };
                    let rate = NonDetRate::new(1 + more, done + opts.confirm);
                    cell.verdict = Verdict::NonDet;
                    cell.diff = d;
                    cell.reason = Some(format!("two runs of the same batch differ; {}", rate.text()));
                    cell.nondet_rate = Some(rate);
                    return Ok(cell);
                }
            }
            Err(e) => return error_cell(cell, e),
        }
    }
    let variant = match run_variant(plan, session, &base_a, &base, subject, vs) {
        Ok(v) => v,
        Err(e) => return error_cell(cell, e),
    };
    cell.diff = compare_rows(&base, &variant, session.rows.n, &plan.labels);
    // confirm (super::confirm): before a cell is BI_FAIL, each side is
    // re-run; a side that does not reproduce makes it NON_DET
    if !cell.diff.identical() && opts.confirm > 0 {
        match confirm_sides(plan, session, opts, &base_a, (&base, &variant), subject, vs) {
            Ok(None) => {}
            Ok(Some(rate)) => {
                cell.verdict = Verdict::NonDet;
                cell.reason = Some(format!(
                    "the sides differ, but re-runs of the same batch do not reproduce: {}",
                    rate.text()
                ));
                cell.nondet_rate = Some(rate);
                return Ok(cell);
            }
            Err(e) => return error_cell(cell, e),
        }
    }
    // power is measured on the values given: a subject that scales them by
    // MX scales of its own choosing (a VAR knob) sums other values, so its
    // cells are never called vacuous (their power is reported all the same)
    let own_scales = knobs.x1_scales == Some(ScaleKind::Varying) || knobs.x2_scales == Some(ScaleKind::Varying);
    let weak = cell.power.as_ref().filter(|p| !p.sufficient());
    cell.verdict = if !cell.diff.identical() {
        Verdict::Fail
    } else if let (false, Some(p)) = (own_scales, weak) {
        cell.reason = Some(format!(
            "power {:.3} < {} in {}: {} of the {} order pairs of the family give the same bytes on these inputs, so an order change may not show",
            p.value,
            power::THRESHOLD,
            p.output,
            p.pairs_agreeing,
            p.orders * p.orders.saturating_sub(1) / 2
        ));
        Verdict::Vacuous
    } else {
        Verdict::Pass
    };
    Ok(cell)
}
